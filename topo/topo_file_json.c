/*
 * topo_file_json.c — reading back Weft's own topology JSON (what
 * `weft-topo --format json` writes):
 *
 *     {"ranks": [{"rank": 0, "host": "h1", "hostname": "h1", "leaf": "leaf1",
 *                 "leaf_source": "lldp", "spine": "spine1", ...}, ...],
 *      "ring": {...}, ...}
 *
 * Only ranks[].hostname (or ranks[].host when there is no hostname),
 * ranks[].leaf and the optional ranks[].spine matter; other members are
 * the dump's business and are skipped, whatever they hold. A rank whose
 * leaf is null, "" or whose leaf_source is "none" taught the dump nothing
 * (its leaf is a display name like "host:h1"), so it is skipped too: reading
 * a dump back must not invent leaves. The many ranks of one host give one
 * host record each; topo_file.c folds them and rejects a host under two
 * leaves.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "topo/json_read.h"
#include "topo/topo_file_impl.h"

static weft_status_t bad_value(struct weft_topo_file *f, const struct weft_json_value *v,
			       const char *what, struct weft_err *err)
{
	return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s:%d: %s", f->path, weft_json_line(v),
			    what);
}

/* Member @p key of @p obj: NULL if absent or null; an error if present but
 * not a string. */
static weft_status_t string_member(struct weft_topo_file *f, const struct weft_json_value *obj,
				   const char *key, const char **out, struct weft_err *err)
{
	const struct weft_json_value *v = weft_json_get(obj, key);
	char what[96];

	*out = NULL;
	if (!v || weft_json_type(v) == WEFT_JSON_NULL)
		return WEFT_SUCCESS;
	if (weft_json_type(v) != WEFT_JSON_STRING) {
		snprintf(what, sizeof(what), "\"%s\" must be a string, not %s", key,
			 weft_json_type_name(weft_json_type(v)));
		return bad_value(f, v, what, err);
	}
	*out = weft_json_string(v);
	return WEFT_SUCCESS;
}

static weft_status_t add_string(struct weft_topo_file *f, const char *s, size_t *off,
				struct weft_err *err)
{
	if (!s || !s[0]) {
		*off = WEFT_TOPO_FILE_NO_STRING;
		return WEFT_SUCCESS;
	}
	return weft_topo_file_add_string(f, s, strlen(s), off, err);
}

static weft_status_t read_rank(struct weft_topo_file *f, const struct weft_json_value *rank,
			       struct weft_err *err)
{
	const char *hostname, *host, *leaf, *spine, *source;
	size_t name_off, leaf_off, spine_off;
	weft_status_t st;

	if (weft_json_type(rank) != WEFT_JSON_OBJECT)
		return bad_value(f, rank, "each element of \"ranks\" must be an object", err);
	st = string_member(f, rank, "hostname", &hostname, err);
	if (st == WEFT_SUCCESS)
		st = string_member(f, rank, "host", &host, err);
	if (st == WEFT_SUCCESS)
		st = string_member(f, rank, "leaf", &leaf, err);
	if (st == WEFT_SUCCESS)
		st = string_member(f, rank, "spine", &spine, err);
	if (st == WEFT_SUCCESS)
		st = string_member(f, rank, "leaf_source", &source, err);
	if (st != WEFT_SUCCESS)
		return st;

	if (!hostname || !hostname[0])
		hostname = host;
	if (!hostname || !hostname[0])
		return bad_value(f, rank, "rank has neither \"hostname\" nor \"host\"", err);
	if (!leaf || !leaf[0] || (source && strcmp(source, "none") == 0))
		return WEFT_SUCCESS;
	st = add_string(f, hostname, &name_off, err);
	if (st == WEFT_SUCCESS)
		st = add_string(f, leaf, &leaf_off, err);
	if (st == WEFT_SUCCESS)
		st = add_string(f, spine, &spine_off, err);
	if (st != WEFT_SUCCESS)
		return st;
	return weft_topo_file_add_host(f, name_off, leaf_off, spine_off, weft_json_line(rank), err);
}

weft_status_t weft_topo_file_parse_json(struct weft_topo_file *f, const char *text, size_t len,
					struct weft_err *err)
{
	struct weft_json *doc;
	const struct weft_json_value *root, *ranks;
	weft_status_t st;

	st = weft_json_parse(text, len, f->path, &doc, err);
	if (st != WEFT_SUCCESS)
		return st;
	root = weft_json_root(doc);
	ranks = weft_json_get(root, "ranks");
	if (weft_json_type(root) != WEFT_JSON_OBJECT)
		st = bad_value(f, root, "the top level must be an object", err);
	else if (!ranks)
		st = bad_value(f, root, "no \"ranks\" array", err);
	else if (weft_json_type(ranks) != WEFT_JSON_ARRAY)
		st = bad_value(f, ranks, "\"ranks\" must be an array", err);
	for (const struct weft_json_value *r = weft_json_first(ranks); st == WEFT_SUCCESS && r;
	     r = weft_json_next(r))
		st = read_rank(f, r, err);
	weft_json_free(doc);
	return st;
}
