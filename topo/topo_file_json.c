/*
 * topo_file_json.c — reading back Weft's own topology JSON (what
 * `weft-topo --format json` and weft_comm_describe() write), with jansson:
 *
 *     {"ranks": [{"rank": 0, "host": "h1/...", "hostname": "h1",
 *                 "leaf": "leaf1", "leaf_source": "lldp", "spine": "spine1",
 *                 ...}, ...],
 *      "ring": {...}, ...}
 *
 * Only ranks[].hostname, ranks[].host (the host id), ranks[].leaf and the
 * optional ranks[].spine matter; other members are the dump's business and
 * are skipped, whatever they hold. A rank whose leaf is null, "" or whose
 * leaf_source is "none" taught the dump nothing (its leaf is a display name
 * like "host:h1"), so it is skipped too: reading a dump back must not invent
 * leaves.
 *
 * A rank's host is recorded under its hostname and, when it differs, under
 * its host id, since a later job looks a host up by WEFT_HOSTID when that is
 * set (and then the host id is WEFT_HOSTID). Network namespaces of one
 * machine stand for hosts in tests and fabrics: they share a hostname but
 * not a host id, and may sit under different leaves. A hostname that several
 * host ids share names none of them (it would be a lie for all but one);
 * their host ids still do. The many ranks of one host give one record each;
 * topo_file.c folds them and rejects a name under two leaves.
 *
 * jansson does not keep the position of each value, so syntax errors name
 * the line and column (jansson's) and errors of content name the member
 * ("ranks[3]: \"leaf\" must be a string, not number"), which is as easy to
 * find.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo_file_impl.h"

/* What one useful element of "ranks" says. The strings belong to the
 * parsed document. */
struct json_rank {
	const char *name; /* hostname, else the host id */
	const char *id;	  /* host id; NULL if absent */
	const char *leaf;
	const char *spine; /* NULL or "": none */
	int index;	   /* in "ranks" */
	bool ambiguous;	   /* name shared by several host ids */
};

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "object";
	case JSON_ARRAY: return "array";
	case JSON_STRING: return "string";
	case JSON_INTEGER:
	case JSON_REAL: return "number";
	case JSON_TRUE:
	case JSON_FALSE: return "boolean";
	default: return "null";
	}
}

/* Member @p key of rank @p i: NULL if absent or null; an error if present
 * but not a string. */
static weft_status_t string_member(const struct weft_topo_file *f, const json_t *rank, int i,
				   const char *key, const char **out, struct weft_err *err)
{
	const json_t *v = json_object_get(rank, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return WEFT_SUCCESS;
	if (!json_is_string(v))
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s: ranks[%d]: \"%s\" must be a string, not %s", f->path, i,
				    key, type_name(v));
	*out = json_string_value(v);
	return WEFT_SUCCESS;
}

/* Fill @p out from element @p i; *useful false if it teaches no leaf. */
static weft_status_t read_rank(const struct weft_topo_file *f, const json_t *rank, int i,
			       struct json_rank *out, bool *useful, struct weft_err *err)
{
	const char *hostname, *host, *leaf, *spine, *source;
	weft_status_t st;

	*useful = false;
	if (!json_is_object(rank))
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s: ranks[%d] must be an object, not %s", f->path, i,
				    type_name(rank));
	st = string_member(f, rank, i, "hostname", &hostname, err);
	if (st == WEFT_SUCCESS)
		st = string_member(f, rank, i, "host", &host, err);
	if (st == WEFT_SUCCESS)
		st = string_member(f, rank, i, "leaf", &leaf, err);
	if (st == WEFT_SUCCESS)
		st = string_member(f, rank, i, "spine", &spine, err);
	if (st == WEFT_SUCCESS)
		st = string_member(f, rank, i, "leaf_source", &source, err);
	if (st != WEFT_SUCCESS)
		return st;

	if (!hostname || !hostname[0])
		hostname = host;
	if (!hostname || !hostname[0])
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s: ranks[%d] has neither \"hostname\" nor \"host\"", f->path,
				    i);
	if (!leaf || !leaf[0] || (source && strcmp(source, "none") == 0))
		return WEFT_SUCCESS;
	*out = (struct json_rank){.name = hostname,
				  .id = host && host[0] ? host : NULL,
				  .leaf = leaf,
				  .spine = spine,
				  .index = i};
	*useful = true;
	return WEFT_SUCCESS;
}

static int by_name(const void *pa, const void *pb)
{
	const struct json_rank *a = pa, *b = pb;
	int c = strcmp(a->name, b->name);
	return c ? c : (a->index > b->index) - (a->index < b->index);
}

/* The host id a rank stands for: its id, or its name when it has none. */
static const char *identity(const struct json_rank *r)
{
	return r->id ? r->id : r->name;
}

/* Mark the names that several host ids share (@p r sorted by name). */
static void mark_ambiguous(struct json_rank *r, size_t n)
{
	for (size_t lo = 0, hi; lo < n; lo = hi) {
		bool shared = false;
		for (hi = lo + 1; hi < n && strcmp(r[hi].name, r[lo].name) == 0; hi++)
			shared |= strcmp(identity(&r[hi]), identity(&r[lo])) != 0;
		for (size_t k = lo; k < hi; k++)
			r[k].ambiguous = shared;
	}
}

static weft_status_t add_record(struct weft_topo_file *f, const char *name,
				const struct json_rank *r, struct weft_err *err)
{
	size_t name_off, leaf_off, spine_off = WEFT_TOPO_FILE_NO_STRING;
	weft_status_t st = weft_topo_file_add_string(f, name, strlen(name), &name_off, err);
	if (st == WEFT_SUCCESS)
		st = weft_topo_file_add_string(f, r->leaf, strlen(r->leaf), &leaf_off, err);
	if (st == WEFT_SUCCESS && r->spine && r->spine[0])
		st = weft_topo_file_add_string(f, r->spine, strlen(r->spine), &spine_off, err);
	if (st != WEFT_SUCCESS)
		return st;
	return weft_topo_file_add_host(f, name_off, leaf_off, spine_off, r->index, err);
}

static weft_status_t add_records(struct weft_topo_file *f, struct json_rank *r, size_t n,
				 struct weft_err *err)
{
	weft_status_t st = WEFT_SUCCESS;

	qsort(r, n, sizeof(*r), by_name);
	mark_ambiguous(r, n);
	for (size_t i = 0; i < n && st == WEFT_SUCCESS; i++) {
		if (!r[i].ambiguous)
			st = add_record(f, r[i].name, &r[i], err);
		if (st == WEFT_SUCCESS && r[i].id && strcmp(r[i].id, r[i].name) != 0)
			st = add_record(f, r[i].id, &r[i], err);
	}
	return st;
}

static weft_status_t read_ranks(struct weft_topo_file *f, const json_t *ranks, struct weft_err *err)
{
	size_t n = json_array_size(ranks), kept = 0;
	struct json_rank *r = calloc(n ? n : 1, sizeof(*r));
	weft_status_t st = WEFT_SUCCESS;

	if (!r)
		return weft_err_set(err, WEFT_ERR_NO_MEMORY, "%s: reading topology", f->path);
	for (size_t i = 0; i < n && st == WEFT_SUCCESS; i++) {
		bool useful;
		st = read_rank(f, json_array_get(ranks, i), (int)i, &r[kept], &useful, err);
		kept += useful;
	}
	if (st == WEFT_SUCCESS)
		st = add_records(f, r, kept, err);
	free(r);
	return st;
}

weft_status_t weft_topo_file_parse_json(struct weft_topo_file *f, const char *text, size_t len,
					struct weft_err *err)
{
	json_error_t jerr;
	weft_status_t st;

	f->by_index = true;
	/* Duplicate keys are rejected: which of two "leaf" members is meant? */
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s:%d:%d: %s", f->path, jerr.line,
				    jerr.column, jerr.text);
	const json_t *ranks = json_object_get(root, "ranks");
	if (!json_is_object(root))
		st = weft_err_set(err, WEFT_ERR_INVALID_ARG,
				  "%s: the top level must be an object, not %s", f->path,
				  type_name(root));
	else if (!ranks)
		st = weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s: no \"ranks\" array", f->path);
	else if (!json_is_array(ranks))
		st = weft_err_set(err, WEFT_ERR_INVALID_ARG,
				  "%s: \"ranks\" must be an array, not %s", f->path,
				  type_name(ranks));
	else
		st = read_ranks(f, ranks, err);
	json_decref(root);
	return st;
}
