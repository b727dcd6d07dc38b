/*
 * broadcast_tree.c — pipelined Broadcast along a binary tree ("tree") or a
 * chain ("ring").
 *
 * Both lay their shape over the placement ring, rotated so that the root is
 * at its head: "ring" is the chain root -> next -> ... along the ring (every
 * hop stays under one host or leaf except one per leaf boundary); "tree" is
 * NCCL's binary tree over the same order (see engine/sched_tree.h). The root
 * sends its buffer chunk by chunk (comm->chunk_bytes); every other rank
 * receives each chunk into recvbuf and forwards it to its children at once,
 * so the hops overlap. Out of place, the root also copies sendbuf into its
 * own recvbuf.
 *
 * Cost (S bytes, n ranks, chunk c, k = ceil(S/c) chunks, d = ceil(log2 n)):
 *   ring: T = (n - 2 + k) (alpha + c beta)       -> S beta for large S
 *   tree: T = (d - 1 + k) (alpha + 2 c beta)     -> 2 S beta, but only
 *         d alpha of latency: it wins for small messages and large n, the
 *         chain for large messages (an inner node of the tree sends
 *         everything twice).
 */
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/sched_tree.h"
#include "core/comm.h"

_Static_assert(sizeof(struct weft_tree_task) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static weft_status_t bcast_post(struct weft_task *task, weft_shape_fn shape)
{
	const struct weft_comm *comm = task->comm;
	const struct weft_coll_args *a = &task->args;
	if (comm->rank == a->root && a->sendbuf != a->recvbuf)
		memcpy(a->recvbuf, a->sendbuf, a->count * a->esize);
	struct weft_tree_config cfg = {.ntrees = comm->nranks > 1 ? 1 : 0, .down = true};
	weft_shape_place(&cfg.tree[0].node, comm, shape, a->root);
	cfg.tree[0].elem_off = 0;
	cfg.tree[0].elems = a->count;
	weft_tree_sched_start(task, &cfg);
	return WEFT_SUCCESS;
}

static weft_status_t tree_post(struct weft_task *task)
{
	return bcast_post(task, weft_shape_btree);
}

static weft_status_t chain_post(struct weft_task *task)
{
	return bcast_post(task, weft_shape_chain);
}

/* Steps of a pipeline of @p depth hops carrying @p bytes in chunks. */
static double pipeline_steps(const struct weft_comm *comm, double bytes, double depth,
			     double *chunk)
{
	*chunk = (double)comm->chunk_bytes;
	if (*chunk > bytes)
		*chunk = bytes > 0 ? bytes : 1;
	double k = (double)(size_t)((bytes + *chunk - 1) / *chunk);
	return depth - 1 + (k > 0 ? k : 1);
}

static double tree_estimate(const struct weft_comm *comm, const struct weft_links *links,
			    const struct weft_coll_args *args)
{
	if (comm->nranks == 1)
		return 0;
	struct weft_cost c = links->worst;
	double chunk, bytes = (double)args->count * (double)args->esize;
	double steps = pipeline_steps(comm, bytes, weft_shape_depth(comm->nranks), &chunk);
	return steps * (c.alpha + 2 * chunk * c.beta);
}

static double chain_estimate(const struct weft_comm *comm, const struct weft_links *links,
			     const struct weft_coll_args *args)
{
	if (comm->nranks == 1)
		return 0;
	struct weft_cost c = links->ring;
	double chunk, bytes = (double)args->count * (double)args->esize;
	double steps = pipeline_steps(comm, bytes, comm->nranks - 1, &chunk);
	return steps * (c.alpha + chunk * c.beta);
}

const struct weft_algo weft_broadcast_tree = {
    .id = WEFT_ALGO_TREE,
    .coll = WEFT_COLL_BROADCAST,
    .name = "tree",
    .description = "binary tree from the root over the placement ring, chunked and pipelined",
    .estimate = tree_estimate,
    .task = {.post = tree_post, .progress = weft_engine_task_progress},
};

const struct weft_algo weft_broadcast_ring = {
    .id = WEFT_ALGO_RING,
    .coll = WEFT_COLL_BROADCAST,
    .name = "ring",
    .description = "chain from the root along the placement ring, chunked and pipelined",
    .estimate = chain_estimate,
    .task = {.post = chain_post, .progress = weft_engine_task_progress},
};
