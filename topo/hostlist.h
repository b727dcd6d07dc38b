/*
 * hostlist.h — Slurm hostlist expressions: "node[01-16,20]", "tux[1-3]x",
 * "a,b", "rack[1-2]-node[1-4]" (every bracket group of a name multiplies).
 * Zero padding follows the lower bound's width, as in Slurm: node[08-10] is
 * node08 node09 node10.
 */
#ifndef WEFT_HOSTLIST_H
#define WEFT_HOSTLIST_H

#include <stddef.h>

#include "util/error.h"

#define WEFT_HOSTLIST_MAX_HOSTS 1000000 /* one expression, and one file */
#define WEFT_HOSTLIST_NAME_MAX	255	/* bytes of one expanded name */

/* Called once per expanded name, in order; a non-success status stops the
 * expansion and is returned. */
typedef weft_status_t (*weft_hostlist_fn)(void *ctx, const char *name);

/*
 * Expand @p expr, calling @p fn for each name. The whole expression is checked
 * first, so a malformed one emits nothing: WEFT_ERR_INVALID_ARG with the
 * reason in @p why (no file or line; the caller adds them). More than
 * @p max_hosts names is malformed too.
 */
weft_status_t weft_hostlist_expand(const char *expr, size_t max_hosts, weft_hostlist_fn fn,
				   void *ctx, char *why, size_t why_len);

#endif
