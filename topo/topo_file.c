/*
 * topo_file.c — WEFT_TOPO_FILE: load a Slurm topology.conf or Weft's own
 * JSON dump (the readers are topo_file_conf.c and topo_file_json.c), check
 * that no host sits under two leaves, and look hosts up by name.
 *
 * Lookup tries the exact name first, then the short name (up to the first
 * '.') both ways, since one side often says "node1" and the other
 * "node1.cluster.example": a query "node1.x" finds an entry "node1", and a
 * query "node1" finds an entry "node1.x". Hosts are sorted by name, so every
 * candidate is found by binary search.
 */
#define _GNU_SOURCE /* qsort_r */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"
#include "topo/topo_file_impl.h"
#include "util/log.h"

/* A JSON dump takes about 400 bytes per rank, so this holds some 600,000
 * ranks, yet a wrong path (a disk image) fails before it fills memory. */
#define TOPO_FILE_MAX_BYTES (256u << 20)

/* ---- building ------------------------------------------------------------- */

weft_status_t weft_topo_file_add_string(struct weft_topo_file *f, const char *s, size_t len,
					size_t *off, struct weft_err *err)
{
	if (f->pool_cap - f->pool_len < len + 1) {
		size_t cap = f->pool_cap ? f->pool_cap : 1024;
		while (cap - f->pool_len < len + 1)
			cap *= 2;
		char *pool = realloc(f->pool, cap);
		if (!pool)
			return weft_err_set(err, WEFT_ERR_NO_MEMORY, "%s: reading topology",
					    f->path);
		f->pool = pool;
		f->pool_cap = cap;
	}
	*off = f->pool_len;
	memcpy(f->pool + f->pool_len, s, len);
	f->pool[f->pool_len + len] = '\0';
	f->pool_len += len + 1;
	return WEFT_SUCCESS;
}

weft_status_t weft_topo_file_add_host(struct weft_topo_file *f, size_t name, size_t leaf,
				      size_t spine, int line, struct weft_err *err)
{
	if (f->nhosts == f->hosts_cap) {
		size_t cap = f->hosts_cap ? f->hosts_cap * 2 : 64;
		struct weft_topo_file_host *h = realloc(f->hosts, cap * sizeof(*h));
		if (!h)
			return weft_err_set(err, WEFT_ERR_NO_MEMORY, "%s: reading topology",
					    f->path);
		f->hosts = h;
		f->hosts_cap = cap;
	}
	f->hosts[f->nhosts++] = (struct weft_topo_file_host){name, leaf, spine, line};
	return WEFT_SUCCESS;
}

/* ---- checking ------------------------------------------------------------- */

static int host_cmp(const void *pa, const void *pb, void *pool)
{
	const struct weft_topo_file_host *a = pa, *b = pb;
	int c = strcmp((const char *)pool + a->name, (const char *)pool + b->name);
	if (c)
		return c;
	return (a->line > b->line) - (a->line < b->line);
}

static weft_status_t two_leaves(const struct weft_topo_file *f,
				const struct weft_topo_file_host *first,
				const struct weft_topo_file_host *again, struct weft_err *err)
{
	const char *name = weft_topo_file_str(f, again->name);
	const char *a = weft_topo_file_str(f, first->leaf), *b = weft_topo_file_str(f, again->leaf);
	if (f->by_index)
		return weft_err_set(
		    err, WEFT_ERR_INVALID_ARG,
		    "%s: ranks[%d]: host %s is under leaf %s here but under leaf %s "
		    "at ranks[%d]",
		    f->path, again->line, name, b, a, first->line);
	return weft_err_set(err, WEFT_ERR_INVALID_ARG,
			    "%s:%d: host %s is under leaf %s here but under leaf %s at line %d",
			    f->path, again->line, name, b, a, first->line);
}

/* Sort by name; a host named twice under the same leaf is kept once, under
 * two leaves is an error. */
static weft_status_t sort_hosts(struct weft_topo_file *f, struct weft_err *err)
{
	size_t kept = 0;

	if (f->nhosts == 0 && f->by_index)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s: the file names no hosts (no rank in it has a leaf learned "
				    "from LLDP or a topology file)",
				    f->path);
	if (f->nhosts == 0)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s: the file names no hosts",
				    f->path);
	qsort_r(f->hosts, f->nhosts, sizeof(*f->hosts), host_cmp, f->pool);
	for (size_t i = 0; i < f->nhosts; i++) {
		const struct weft_topo_file_host *h = &f->hosts[i];
		const struct weft_topo_file_host *prev = kept ? &f->hosts[kept - 1] : NULL;
		const char *name = weft_topo_file_str(f, h->name);
		if (prev && strcmp(weft_topo_file_str(f, prev->name), name) == 0) {
			const char *a = weft_topo_file_str(f, prev->leaf);
			const char *b = weft_topo_file_str(f, h->leaf);
			if (strcmp(a, b) != 0)
				return two_leaves(f, prev, h, err);
			continue;
		}
		f->hosts[kept++] = *h;
	}
	f->nhosts = kept;
	return WEFT_SUCCESS;
}

/* ---- loading -------------------------------------------------------------- */

static weft_status_t read_all(const char *path, char **text, size_t *len, struct weft_err *err)
{
	FILE *fp = fopen(path, "rb");
	size_t cap = 4096, n = 0;
	char *buf = NULL;
	weft_status_t st = WEFT_SUCCESS;

	if (!fp)
		return weft_err_errno(err, errno, "cannot open topology file %s", path);
	for (;;) {
		if (n == cap - 1 || !buf) {
			if (buf)
				cap *= 2;
			char *nb = realloc(buf, cap);
			if (!nb) {
				st = weft_err_set(err, WEFT_ERR_NO_MEMORY, "reading %s", path);
				goto out_close;
			}
			buf = nb;
		}
		size_t got = fread(buf + n, 1, cap - 1 - n, fp);
		n += got;
		if (n > TOPO_FILE_MAX_BYTES) {
			st = weft_err_set(err, WEFT_ERR_INVALID_ARG,
					  "%s: larger than %u bytes; not a topology file", path,
					  TOPO_FILE_MAX_BYTES);
			goto out_close;
		}
		if (got == 0)
			break;
	}
	if (ferror(fp))
		st = weft_err_errno(err, EIO, "reading topology file %s", path);
	buf[n] = '\0';
out_close:
	fclose(fp);
	if (st != WEFT_SUCCESS) {
		free(buf);
		return st;
	}
	*text = buf;
	*len = n;
	return WEFT_SUCCESS;
}

/* JSON if the first character that is not white space is '{'; '\0' if the
 * file is blank. */
static char first_char(const char *text, size_t len)
{
	size_t i = 0;
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		i = 3;
	for (; i < len; i++) {
		if (text[i] == '\0')
			return '\x01'; /* not blank: let the reader name the bad byte */
		if (!strchr(" \t\r\n\f\v", text[i]))
			return text[i];
	}
	return '\0';
}

weft_status_t weft_topo_file_parse(const char *path, const char *text, size_t len,
				   struct weft_topo_file **out, struct weft_err *err)
{
	struct weft_topo_file *f;
	weft_status_t st;
	char c;

	*out = NULL;
	f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(path))) {
		free(f);
		return weft_err_set(err, WEFT_ERR_NO_MEMORY, "loading topology file %s", path);
	}
	c = first_char(text, len);
	if (c == '\0')
		st = weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s: empty topology file", path);
	else if (c == '{')
		st = weft_topo_file_parse_json(f, text, len, err);
	else
		st = weft_topo_file_parse_conf(f, text, len, err);
	if (st == WEFT_SUCCESS)
		st = sort_hosts(f, err);
	if (st != WEFT_SUCCESS) {
		weft_topo_file_free(f);
		return st;
	}
	weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO, "topology file %s: %zu hosts (%s)", path, f->nhosts,
		 c == '{' ? "Weft JSON" : "Slurm topology.conf");
	*out = f;
	return WEFT_SUCCESS;
}

weft_status_t weft_topo_file_load(const char *path, struct weft_topo_file **out,
				  struct weft_err *err)
{
	char *text = NULL;
	size_t len = 0;

	*out = NULL;
	if (!path || !path[0])
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "topology file: no path");
	weft_status_t st = read_all(path, &text, &len, err);
	if (st == WEFT_SUCCESS)
		st = weft_topo_file_parse(path, text, len, out, err);
	free(text);
	return st;
}

void weft_topo_file_free(struct weft_topo_file *f)
{
	if (!f)
		return;
	free(f->hosts);
	free(f->pool);
	free(f->path);
	free(f);
}

/* ---- lookup --------------------------------------------------------------- */

/* First host whose name is >= the @p len bytes at @p key. */
static size_t lower_bound(const struct weft_topo_file *f, const char *key, size_t len)
{
	size_t lo = 0, hi = f->nhosts;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *name = weft_topo_file_str(f, f->hosts[mid].name);
		int c = strncmp(name, key, len);
		if (c < 0 || (c == 0 && strlen(name) < len))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static const struct weft_topo_file_host *find_exact(const struct weft_topo_file *f, const char *key,
						    size_t len)
{
	size_t i = lower_bound(f, key, len);
	if (i < f->nhosts) {
		const char *name = weft_topo_file_str(f, f->hosts[i].name);
		if (strncmp(name, key, len) == 0 && name[len] == '\0')
			return &f->hosts[i];
	}
	return NULL;
}

/* The first host named "@p short.<anything>": those sort together right
 * after @p short itself. */
static const struct weft_topo_file_host *find_long(const struct weft_topo_file *f,
						   const char *short_name, size_t len)
{
	for (size_t i = lower_bound(f, short_name, len); i < f->nhosts; i++) {
		const char *name = weft_topo_file_str(f, f->hosts[i].name);
		if (strncmp(name, short_name, len) != 0)
			break;
		if (name[len] == '.')
			return &f->hosts[i];
	}
	return NULL;
}

bool weft_topo_file_lookup(const struct weft_topo_file *f, const char *hostname, char *leaf,
			   size_t leaf_len, char *spine, size_t spine_len)
{
	const struct weft_topo_file_host *h;
	size_t len, short_len;

	if (!f || !hostname || !hostname[0])
		return false;
	len = strlen(hostname);
	short_len = strcspn(hostname, ".");
	h = find_exact(f, hostname, len);
	if (!h && short_len < len)
		h = find_exact(f, hostname, short_len); /* "node1.x" -> "node1" */
	if (!h && short_len == len)
		h = find_long(f, hostname, len); /* "node1" -> "node1.x" */
	if (!h)
		return false;
	if (leaf && leaf_len)
		snprintf(leaf, leaf_len, "%s", weft_topo_file_str(f, h->leaf));
	if (spine && spine_len)
		snprintf(spine, spine_len, "%s", weft_topo_file_str(f, h->spine));
	return true;
}

size_t weft_topo_file_count(const struct weft_topo_file *f)
{
	return f ? f->nhosts : 0;
}

void weft_topo_file_host(const struct weft_topo_file *f, size_t i, const char **name,
			 const char **leaf, const char **spine)
{
	const struct weft_topo_file_host *h = &f->hosts[i];
	*name = weft_topo_file_str(f, h->name);
	*leaf = weft_topo_file_str(f, h->leaf);
	*spine = weft_topo_file_str(f, h->spine);
}
