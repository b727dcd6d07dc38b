/*
 * allreduce_tree.c — double binary tree AllReduce (NCCL's scheme), pipelined.
 *
 * Two binary trees span the ranks, laid over the placement ring so that
 * neighbours in a tree tend to share a host or a leaf (patterns/tree.h
 * weft_dbtree: tree 0 is NCCL's in-order binary tree, tree 1 its mirror
 * image; for odd n the last position hangs as a leaf under both roots).
 * Every rank is an inner node in at most one tree, so the two trees load
 * every link about equally in both directions. The first half of the vector (ceil(count/2)
 * elements) goes up and down tree 0, the second half tree 1, both at once.
 *
 * Per tree, for every chunk (comm->chunk_bytes): a rank receives the chunk
 * from each child and reduces it on arrival into recvbuf (own data, then
 * child 0, then child 1: a fixed order, so the bits are reproducible), then
 * sends it to its parent; the root, once it has reduced a chunk (and divided
 * it for WEFT_AVG), sends it down; every rank receives the final chunk into
 * recvbuf and forwards it to its children. Chunks overlap along the tree:
 * see engine/sched_tree.h for the schedule and how two trees share a link.
 *
 * Cost (S bytes, n ranks, d = ceil(log2 n) levels, chunk c, k = ceil(S/2c)
 * chunks per tree): the pipeline needs 2d steps to fill and k to drain; a
 * step moves at most 4 chunks through a rank's port (an inner node of one
 * tree sends one chunk up and two down, and one up as a leaf of the other),
 *     T = (2d + k - 1) (alpha + 4 c beta) + S gamma
 * i.e. about 2 log2(n) alpha + 2 S beta for large S. Against the ring's
 * 2(n-1) alpha it wins on latency at any n > 3; against its 2(n-1)/n S beta
 * it loses little bandwidth.
 */
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/sched_tree.h"
#include "algorithms/patterns/shape.h"
#include "core/comm.h"
#include "topo/topo_flow.h"

_Static_assert(sizeof(struct weft_tree_task) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static weft_status_t tree_post(struct weft_task *task)
{
	const struct weft_comm *comm = task->comm;
	const struct weft_coll_args *a = &task->args;
	struct weft_tree_config cfg = {.ntrees = 2, .up = true, .down = true};
	if (comm->nranks == 1) {
		if (!a->in_place)
			memcpy(a->recvbuf, a->sendbuf, a->count * a->esize);
		cfg.ntrees = 0;
	}
	weft_shape_place(&cfg.tree[0].node, comm, weft_shape_dbtree0, comm->ring[0]);
	weft_shape_place(&cfg.tree[1].node, comm, weft_shape_dbtree1, comm->ring[0]);
	cfg.tree[0].elem_off = 0;
	cfg.tree[0].elems = (a->count + 1) / 2;
	cfg.tree[1].elem_off = cfg.tree[0].elems;
	cfg.tree[1].elems = a->count / 2;
	weft_tree_sched_start(task, &cfg);
	return WEFT_SUCCESS;
}

static double tree_estimate(const struct weft_comm *comm, const struct weft_links *links,
			    const struct weft_coll_args *args)
{
	struct weft_cost c = links->worst;
	double bytes = (double)args->count * (double)args->esize;
	if (comm->nranks == 1)
		return bytes * c.gamma;
	double chunk = (double)comm->chunk_bytes;
	double half = bytes / 2;
	if (chunk > half)
		chunk = half > 0 ? half : 1;
	double k = half > 0 ? (double)(size_t)((half + chunk - 1) / chunk) : 1;
	double d = weft_shape_depth(comm->nranks);
	return (2 * d + k - 1) * (c.alpha + 4 * chunk * c.beta) + bytes * c.gamma;
}

/* Each tree's half goes up every edge and comes down it. The trees are
 * laid over ring positions from ring[0], as tree_post places them, so a
 * position's parent is found without the per-rank search of
 * weft_shape_place (which would make this n^2). */
static void tree_flow(const struct weft_comm *comm, const struct weft_coll_args *args,
		      struct weft_topo_flow *flow)
{
	static const weft_shape_fn shapes[2] = {weft_shape_dbtree0, weft_shape_dbtree1};
	int n = comm->nranks, parent, child[WEFT_TREE_MAX_CHILDREN];
	size_t elems[2] = {(args->count + 1) / 2, args->count / 2};
	for (int t = 0; t < 2 && n > 1; t++) {
		double half = (double)elems[t] * (double)args->esize;
		for (int v = 0; v < n; v++) {
			shapes[t](n, v, &parent, child);
			if (parent < 0)
				continue;
			weft_topo_flow_add(flow, comm->ring[v], comm->ring[parent], half);
			weft_topo_flow_add(flow, comm->ring[parent], comm->ring[v], half);
		}
	}
}

const struct weft_algo weft_allreduce_tree = {
    .id = WEFT_ALGO_TREE,
    .coll = WEFT_COLL_ALLREDUCE,
    .name = "tree",
    .description =
	"double binary tree (half the data each), reduce up and broadcast down, pipelined",
    .estimate = tree_estimate,
    .flow = tree_flow,
    .task = {.post = tree_post, .progress = weft_engine_task_progress},
};
