/*
 * reduce_tree.c — pipelined Reduce to a root along a binary tree, reducing
 * on arrival.
 *
 * NCCL's binary tree laid over the placement ring and rotated so that the
 * root is its root (see tree_pipeline.h). The vector is cut into chunks; for
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
#include <stdalign.h>
#include <string.h>

#include "core/comm.h"
#include "tune/tune.h"
#include "algorithms/algo.h"
#include "algorithms/engine/tree_pipeline.h"

#define REDUCE_POOL  9 /* three links (two children, the parent), three each */
#define REDUCE_SLOTS 2

_Static_assert(REDUCE_SLOTS <= WEFT_SCRATCH_CHUNKS, "scratch too small for the staging slots");

struct reduce_tree {
	struct weft_tree_pipeline tp;
	struct weft_msg pool[REDUCE_POOL];
};

_Static_assert(sizeof(struct reduce_tree) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct reduce_tree *state(const struct weft_task *task)
{
	return (struct reduce_tree *)(void *)task->priv;
}

static size_t chunk_bytes(const struct weft_comm *comm)
{
	return comm->chunk_bytes;
}

static weft_status_t reduce_post(struct weft_task *task)
{
	struct reduce_tree *rt = state(task);
	const struct weft_comm *comm = task->comm;
	const struct weft_coll_args *a = &task->args;
	if (comm->nranks == 1) {
		if (!a->in_place)
			memcpy(a->recvbuf, a->sendbuf, a->count * a->esize);
		return WEFT_SUCCESS;
	}
	struct weft_tp_config cfg = {
	    .ntrees = 1,
	    .up = true,
	    .chunk_elems = chunk_bytes(comm) / a->esize,
	    .staging = comm->scratch,
	    .nslots = REDUCE_SLOTS,
	    .pool = rt->pool,
	    .pool_cap = REDUCE_POOL,
	};
	weft_tp_tree_place(&cfg.tree[0], comm, weft_tp_btree, a->root);
	cfg.tree[0].elem_off = 0;
	cfg.tree[0].elems = a->count;
	weft_tree_pipeline_init(&rt->tp, task, &cfg);
	weft_status_t st = weft_tree_pipeline_progress(&rt->tp, task);
	return st == WEFT_SUCCESS ? WEFT_INPROGRESS : st;
}

static weft_status_t reduce_progress(struct weft_task *task)
{
	if (task->comm->nranks == 1)
		return WEFT_SUCCESS;
	return weft_tree_pipeline_progress(&state(task)->tp, task);
}

static double reduce_estimate(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	struct weft_cost c = weft_tune_worst(comm);
	double bytes = (double)args->count * (double)args->esize;
	if (comm->nranks == 1)
		return bytes * c.gamma;
	double chunk = (double)chunk_bytes(comm);
	if (chunk > bytes)
		chunk = bytes > 0 ? bytes : 1;
	double k = (double)(size_t)((bytes + chunk - 1) / chunk);
	double d = weft_tp_btree_depth(comm->nranks);
	return (d - 1 + (k > 0 ? k : 1)) * (c.alpha + 2 * chunk * (c.beta + c.gamma));
}

const struct weft_algo weft_reduce_tree = {
    .id = WEFT_ALGO_TREE,
    .coll = WEFT_COLL_REDUCE,
    .name = "tree",
    .description = "binary tree to the root, reduce on arrival, chunked and pipelined",
    .estimate = reduce_estimate,
    .post = reduce_post,
    .progress = reduce_progress,
};
