/*
 * reduce_tree.c — pipelined Reduce to a root along a binary tree, reducing
 * on arrival.
 *
 * NCCL's binary tree laid over the placement ring and rotated so that the
 * root is its root (see engine/sched_tree.h). The vector is cut into chunks; for
 * each chunk a rank receives its children's partial sums, reducing each on
 * arrival with its own sendbuf (own data, then child 0, then child 1: a
 * fixed order, reproducible bits), and sends the result to its parent. A
 * leaf sends straight from sendbuf. The root reduces into recvbuf (and
 * divides each finished chunk for WEFT_AVG).
 *
 * Where partial sums live: sendbuf is read-only and a non-root's recvbuf may
 * be NULL, so an inner node accumulates in staging slots of one chunk each,
 * reused round-robin once the chunk in them has gone up: the communicator's
 * scratch buffer (one collective runs at a time, so it is ours).
 *
 * Cost (S bytes, n ranks, d = ceil(log2 n), chunk c, k = ceil(S/c)):
 *   T = (d - 1 + k) (alpha + 2 c (beta + gamma))
 * an inner node takes in two chunks per step: about 2 S (beta + gamma) for
 * large S, d alpha of latency.
 */
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/sched_tree.h"
#include "core/comm.h"

#define REDUCE_SLOTS 2

_Static_assert(REDUCE_SLOTS <= WEFT_SCRATCH_CHUNKS, "scratch too small for the staging slots");
_Static_assert(sizeof(struct weft_tree_task) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static size_t chunk_bytes(const struct weft_comm *comm)
{
	return comm->chunk_bytes;
}

static weft_status_t reduce_post(struct weft_task *task)
{
	const struct weft_comm *comm = task->comm;
	const struct weft_coll_args *a = &task->args;
	struct weft_tree_config cfg = {
	    .ntrees = 1,
	    .up = true,
	    .staging = comm->scratch,
	    .nslots = REDUCE_SLOTS,
	};
	if (comm->nranks == 1) {
		if (!a->in_place)
			memcpy(a->recvbuf, a->sendbuf, a->count * a->esize);
		cfg.ntrees = 0;
	}
	weft_shape_place(&cfg.tree[0].node, comm, weft_shape_btree, a->root);
	cfg.tree[0].elem_off = 0;
	cfg.tree[0].elems = a->count;
	weft_tree_sched_start(task, &cfg);
	return WEFT_SUCCESS;
}

static double reduce_estimate(const struct weft_comm *comm, const struct weft_links *links,
			      const struct weft_coll_args *args)
{
	struct weft_cost c = links->worst;
	double bytes = (double)args->count * (double)args->esize;
	if (comm->nranks == 1)
		return bytes * c.gamma;
	double chunk = (double)chunk_bytes(comm);
	if (chunk > bytes)
		chunk = bytes > 0 ? bytes : 1;
	double k = (double)(size_t)((bytes + chunk - 1) / chunk);
	double d = weft_shape_depth(comm->nranks);
	return (d - 1 + (k > 0 ? k : 1)) * (c.alpha + 2 * chunk * (c.beta + c.gamma));
}

const struct weft_algo weft_reduce_tree = {
    .id = WEFT_ALGO_TREE,
    .coll = WEFT_COLL_REDUCE,
    .name = "tree",
    .description = "binary tree to the root, reduce on arrival, chunked and pipelined",
    .estimate = reduce_estimate,
    .task = {.post = reduce_post, .progress = weft_engine_task_progress},
};
