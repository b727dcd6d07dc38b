/*
 * topo_file_impl.h — what a loaded topology file holds, shared by its two
 * readers (topo_file_conf.c: Slurm topology.conf; topo_file_json.c: Weft's
 * JSON) and topo_file.c (loading, lookup).
 *
 * Either reader reduces its file to one record per host: the host's name, its
 * leaf switch and the switch above that leaf. Strings live in one pool and
 * are referred to by offset, so the pool may grow while reading.
 */
#ifndef WEFT_TOPO_FILE_IMPL_H
#define WEFT_TOPO_FILE_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

#define WEFT_TOPO_FILE_NO_STRING ((size_t)-1)

struct weft_topo_file_host {
	size_t name; /* pool offsets */
	size_t leaf;
	size_t spine; /* WEFT_TOPO_FILE_NO_STRING: none */
	int line;     /* where the file names the host under its leaf: its line, or
		       * with by_index its element of "ranks" */
};

struct weft_topo_file {
	char *path;
	char *pool;
	size_t pool_len, pool_cap;
	struct weft_topo_file_host *hosts; /* sorted by name after loading */
	size_t nhosts, hosts_cap;
	bool by_index; /* host records say where by element index (JSON), not line */
};

/* Copy @p len bytes of @p s (plus a NUL) into the pool; *off is where. */
weft_status_t weft_topo_file_add_string(struct weft_topo_file *f, const char *s, size_t len,
					size_t *off, struct weft_err *err);

/* Append a host record (its strings already in the pool). */
weft_status_t weft_topo_file_add_host(struct weft_topo_file *f, size_t name, size_t leaf,
				      size_t spine, int line, struct weft_err *err);

static inline const char *weft_topo_file_str(const struct weft_topo_file *f, size_t off)
{
	return off == WEFT_TOPO_FILE_NO_STRING ? "" : f->pool + off;
}

/* The readers: parse @p len bytes of @p text (the contents of f->path) into
 * host records. Errors: WEFT_ERR_INVALID_ARG "PATH:LINE: what is wrong"
 * (conf), "PATH:LINE:COLUMN: what is wrong" (JSON syntax) or
 * "PATH: ranks[I]: what is wrong" (JSON content). */
weft_status_t weft_topo_file_parse_conf(struct weft_topo_file *f, const char *text, size_t len,
					struct weft_err *err);
weft_status_t weft_topo_file_parse_json(struct weft_topo_file *f, const char *text, size_t len,
					struct weft_err *err);

#endif
