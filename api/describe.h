/*
 * describe.h — the pieces of the communicator's self-description
 * (weft_comm_describe), each adding its members to the document's top-level
 * object. Every list in it is per rank, per host, per leaf or per spine, so
 * the document grows linearly with the job; what is per pair (transports) is
 * summarised per link class.
 *
 * jansson's setters take over the value they are given even when they fail
 * (and fail when it is NULL), so a piece builds everything, ORs the setters'
 * results together, and reports WEFT_ERR_NO_MEMORY once at the end.
 */
#ifndef WEFT_DESCRIBE_H
#define WEFT_DESCRIBE_H

#include <jansson.h>

#include "util/error.h"

struct weft_comm;

/* A JSON string of @p s; bytes that are not valid UTF-8 (a switch may send
 * anything over LLDP) become '?' so the document stays valid. NULL only for
 * lack of memory. */
json_t *weft_describe_text(const char *s);

/* An array of the @p n ints at @p v. */
json_t *weft_describe_ints(const int *v, int n);

/* "ranks", "hosts", "leaves", "spines" (describe_topo.c). */
weft_status_t weft_describe_topo(const struct weft_comm *comm, json_t *root);

/* "ring" and "trees" (describe_trees.c). */
weft_status_t weft_describe_ring(const struct weft_comm *comm, json_t *root);
weft_status_t weft_describe_trees(const struct weft_comm *comm, json_t *root);

/* The value of "transports" into *out and of "connections" (WEFT_CONNECT's
 * mode, and the fewest, most and all peers the ranks were connected to)
 * into *conns: collective, it gathers every rank's view
 * (describe_transports.c). Errors are recorded on @p comm. */
weft_status_t weft_describe_transports(struct weft_comm *comm, json_t **out, json_t **conns);

/* "tuner" (describe_tune.c). */
weft_status_t weft_describe_tuner(const struct weft_comm *comm, json_t *root);

/* "flow" in the tuner's object @p tuner: AllReduce by alpha-beta and by
 * flow at a few sizes (describe_flow.c). */
weft_status_t weft_describe_flow(const struct weft_comm *comm, json_t *tuner);

/* "pacer": the mode and, with a pacer on, this rank's paced connections
 * (describe_pacer.c). */
weft_status_t weft_describe_pacer(const struct weft_comm *comm, json_t *root);

/* Called after each piece of the document is built ("topo", "ring",
 * "trees", "tuner"): weft-topo --model times them. */
struct weft_describe_hook {
	void (*after)(void *ctx, const char *piece);
	void *ctx;
};

/* The whole document, in the order a reader meets it, with @p transports
 * (weft_describe_transports(), or a model's) as "transports" (not taken
 * over); @p hook may be NULL. NULL and WEFT_ERR_NO_MEMORY for lack of
 * memory. */
weft_status_t weft_describe_build(const struct weft_comm *comm, json_t *transports,
				  const struct weft_describe_hook *hook, json_t **out);

/* @p root as a NUL-terminated string in memory of our own malloc, so that
 * weft_describe_free() can release it whatever allocator the application
 * gave jansson. Takes over @p root. */
weft_status_t weft_describe_dump(json_t *root, char **out);

#endif
