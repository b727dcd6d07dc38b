/*
 * topo_print.h — weft-topo's writers. Each takes a JSON document from the
 * library's public API (weft_comm_describe, weft_host_describe,
 * weft_settings_describe), parses it with jansson and writes it for people
 * (text), tools (JSON, laid out to be read), pictures (Graphviz DOT) or
 * mpirun (an Open MPI rankfile). A writer that cannot parse its input says
 * so on stderr and returns non-zero.
 */
#ifndef WEFT_TOPO_PRINT_H
#define WEFT_TOPO_PRINT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

enum weft_topo_format {
	WEFT_TOPO_TEXT = 0,
	WEFT_TOPO_JSON,
	WEFT_TOPO_DOT,
	WEFT_TOPO_RANKFILE,
	WEFT_TOPO_MARKDOWN, /* --settings only: docs/settings.md, which make docs writes */
	WEFT_TOPO_MAN,	    /* --settings only: weft(7)'s ENVIRONMENT entries (make man) */
};

/* A job's description (weft_comm_describe) in @p format. */
int weft_tool_print_job(const char *json, enum weft_topo_format format, FILE *out);

/* A modelled job's description (weft_model_describe) in @p format. */
int weft_tool_print_model(const char *json, enum weft_topo_format format, FILE *out);

/* This host (weft_host_describe): text, or JSON for WEFT_TOPO_JSON. */
int weft_tool_print_host(const char *json, enum weft_topo_format format, FILE *out);

/* The settings table (weft_settings_describe): text, JSON, the Markdown
 * page docs/settings.md is (make docs writes it, make lint compares), or
 * the entries of weft(7)'s ENVIRONMENT section in roff (make man). */
int weft_tool_print_settings(const char *json, enum weft_topo_format format, FILE *out);

/* Files of WEFT_STATS_FILE lines (topo_stats.c): per connection its last
 * line, and per leaf its uplink, as text or JSON. A file that cannot be
 * read or a line that is not a stats line: a message naming the file and
 * the line, and 1. */
int weft_tool_print_stats(char *const *paths, int npaths, enum weft_topo_format format, FILE *out);

/* Files of WEFT_TRACE_DIR / weft_comm_dump (topo_trace.c): per
 * communicator, the verdict in plain words (text) or as JSON. A file that
 * is not a flight recorder: a message naming it, and 1. */
int weft_tool_print_trace(char *const *paths, int npaths, enum weft_topo_format format, FILE *out);

/* weft-topo --watch (topo_watch_view.c): a live view of the job's
 * metrics, or with @p once one frame as text. */
int weft_tool_watch(char *const *targets, int n, bool once, double interval);

/* ---- shared by the writers ---- */

/* The job writers, on the parsed document (topo_print_text.c,
 * topo_print_dot.c). */
int weft_tool_print_job_text(const json_t *doc, FILE *out);
int weft_tool_print_job_dot(const json_t *doc, FILE *out);
int weft_tool_print_job_rankfile(const json_t *doc, FILE *out);

/* A weft_model_describe() document for people: counts and summaries where
 * the job's text lists every rank (topo_print_model.c). */
int weft_tool_print_model_text(const json_t *doc, FILE *out);

/* Sections of the job's text that the model's shares (topo_print_text.c):
 * one tree's line, the transports per link class, the tuner's table and
 * the pacer. */
void weft_tool_text_tree(const char *label, const json_t *t, FILE *out);
void weft_tool_text_transports(const json_t *doc, FILE *out);
void weft_tool_text_tail(const json_t *doc, FILE *out);

/* Parse @p json; NULL (after a message naming @p what) if it is not JSON. */
json_t *weft_tool_parse(const char *json, const char *what);

/* @p v laid out for reading: short values and arrays of numbers on one
 * line, other objects and arrays one member per line. */
void weft_tool_write_json(const json_t *v, FILE *out);

/* Members of @p obj with a default when absent or of another type. */
static inline long long weft_tool_int(const json_t *obj, const char *key)
{
	return (long long)json_integer_value(json_object_get(obj, key));
}

static inline const char *weft_tool_str(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	return s ? s : "";
}

/* "-" for an empty string, as the text tables show unknowns. */
static inline const char *weft_tool_dash(const char *s)
{
	return s[0] ? s : "-";
}

#endif
