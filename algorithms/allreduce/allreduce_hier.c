/*
 * allreduce_hier.c — hierarchical AllReduce: inside each host, then among
 * host leaders, then inside each host again.
 *
 * Each host's ranks form a chain in placement order, headed by the host
 * leader (graph.host_leader, its lowest rank). The leaders form a ring in
 * placement order, which visits the hosts of one leaf together, so the ring
 * crosses the spine once per leaf and most bytes stay under a leaf.
 *
 *  1. Reduce up the chain: the last rank sends its input, chunk by chunk, to
 *     the one before it; each rank receives a chunk, reduces it with its own
 *     input straight out of the transport (shm slots, or CMA for large
 *     chunks) into recvbuf, and passes it on. Chunks are pipelined, so all
 *     links of the chain are busy at once. The leader ends with the host's
 *     sum.
 *  2. AllReduce among the leaders: ring reduce-scatter + allgather (as in
 *     allreduce_ring.c) in place on recvbuf, chunked and pipelined.
 *  3. Broadcast down the chain, pipelined the same way.
 * WEFT_AVG sums, and the rank that finishes a chunk's full sum divides it
 * by nranks once (the leaders' ring, or the leader with one host).
 *
 * Why a reduce to the leader and not a reduce-scatter with "rail" exchanges
 * among the owners of each slice: hosts may have unequal rank counts, and
 * then slices owned on one host do not line up with another's; a leader
 * scheme works for any layout with one code path. On a host with one NIC
 * the leader's one stream per peer host is what the NIC can carry anyway,
 * and a pipelined chain costs about one pass of the vector over shared
 * memory in each direction, with every core reducing its share. A rail
 * variant for hosts with equal counts and several NICs is future work.
 *
 * Cost (S bytes, m ranks on the largest host, H hosts, chunk C, k = S/C):
 *   2 (m - 2 + k) (alpha_host + C beta_host) + S gamma          (chain)
 * + 2 (H - 1) (alpha_net + S/H beta_net) + (H-1)/H S gamma       (leaders)
 * The network carries 2 (H-1)/H S per leader instead of 2 (n-1)/n S over
 * n-1 ring links, and the latency term grows with H, not n.
 */
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "algorithms/patterns/hier.h"
#include "algorithms/patterns/ring.h"
#include "core/comm.h"
#include "reduce/reduce.h"
#include "topo/topo_flow.h"

/* The schedule's phases; each has a queue of receives and one of sends. */
enum hier_phase {
	PHASE_UP = 0, /* reduce up the chain to the host leader */
	PHASE_RING,   /* allreduce among host leaders */
	PHASE_DOWN,   /* broadcast down the chain */
	PHASE_DONE
};

enum { Q_RECV = 0, Q_SEND };

/* Tags: the leaders' ring counts from 0 (below 2^31), the chains from here. */
#define TAG_UP	 0x80000000u
#define TAG_DOWN 0xc0000000u

struct allreduce_hier {
	struct weft_engine eng;
	struct weft_hier_layout lay;
	enum hier_phase phase;
	weft_reduce_fn reduce;
	size_t chunk_elems; /* chains: chunks of the whole vector */
	uint32_t nchunks;
	size_t ring_chunk_elems; /* leaders' ring: chunks of one segment */
	uint32_t ring_nchunks;
};

WEFT_ENGINE_FIRST(struct allreduce_hier);
_Static_assert(sizeof(struct allreduce_hier) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct allreduce_hier *state(const struct weft_task *task)
{
	return (struct allreduce_hier *)(void *)task->priv;
}

static void chain_span(const struct weft_task *task, uint32_t chunk, size_t *off, size_t *len)
{
	const struct allreduce_hier *h = state(task);
	weft_engine_chunk_span(task, 0, task->args.count, h->chunk_elems, chunk, off, len);
}

/* ---- 1. up the chain ---- */

static void up_recv(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	const struct allreduce_hier *h = state(task);
	size_t off, len;
	chain_span(task, k, &off, &len);
	out->buf = (char *)task->args.recvbuf + off;
	out->bytes = len;
	out->reduce = h->reduce;
	out->local = (const char *)task->args.sendbuf + off;
}

static void up_send(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	const struct allreduce_hier *h = state(task);
	size_t off, len;
	chain_span(task, k, &off, &len);
	const char *base = h->lay.chain_next >= 0 ? (const char *)task->args.recvbuf
						  : (const char *)task->args.sendbuf;
	out->buf = (char *)base + off;
	out->bytes = len;
}

/* A chain forwards chunk k once it has it (the last rank up, the leader
 * down, only send). */
static bool chain_ready(const struct weft_task *task, int q, uint32_t k)
{
	const struct allreduce_hier *h = state(task);
	bool receives = h->phase == PHASE_UP ? h->lay.chain_next >= 0 : h->lay.chain_prev >= 0;
	return !receives || weft_engine_done(&h->eng, Q_RECV) > k;
}

/* One host: the leader holds each chunk's full sum as it arrives. */
static void up_recv_done(struct weft_task *task, int q, uint32_t k)
{
	const struct allreduce_hier *h = state(task);
	if (task->args.op != WEFT_AVG || h->lay.chain_pos != 0 || h->lay.nleaders != 1)
		return;
	size_t off, len;
	chain_span(task, k, &off, &len);
	weft_reduce_scale((char *)task->args.recvbuf + off, len / task->args.esize,
			  task->args.dtype, task->comm->nranks);
}

static const struct weft_queue_ops up_recv_ops = {.item = up_recv, .done = up_recv_done};
static const struct weft_queue_ops up_send_ops = {.item = up_send, .ready = chain_ready};

/* ---- 2. ring among the host leaders, in place on recvbuf ---- */

static void ring_span(const struct weft_task *task, int seg, uint32_t chunk, size_t *off,
		      size_t *len)
{
	const struct allreduce_hier *h = state(task);
	size_t count = task->args.count;
	int nl = h->lay.nleaders;
	weft_engine_chunk_span(task, weft_seg_offset(count, nl, seg),
			       weft_seg_count(count, nl, seg), h->ring_chunk_elems, chunk, off,
			       len);
}

static void ring_recv(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	const struct allreduce_hier *h = state(task);
	uint32_t step = k / h->ring_nchunks;
	size_t off, len;
	ring_span(task, weft_ring_back(h->lay.leader_pos, (long)step + 1, h->lay.nleaders),
		  k % h->ring_nchunks, &off, &len);
	out->buf = (char *)task->args.recvbuf + off;
	out->bytes = len;
	if (step < (uint32_t)h->lay.nleaders - 1) {
		out->reduce = h->reduce;
		out->local = out->buf;
	}
}

static void ring_send(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	const struct allreduce_hier *h = state(task);
	size_t off, len;
	ring_span(task, weft_ring_back(h->lay.leader_pos, k / h->ring_nchunks, h->lay.nleaders),
		  k % h->ring_nchunks, &off, &len);
	out->buf = (char *)task->args.recvbuf + off;
	out->bytes = len;
}

/* Chunk c of step s goes on once chunk c of step s-1 has arrived. */
static bool ring_ready(const struct weft_task *task, int q, uint32_t k)
{
	return weft_engine_follows(&state(task)->eng, Q_RECV, k, state(task)->ring_nchunks);
}

static void ring_recv_done(struct weft_task *task, int q, uint32_t k)
{
	const struct allreduce_hier *h = state(task);
	uint32_t step = k / h->ring_nchunks;
	if (task->args.op != WEFT_AVG || step != (uint32_t)h->lay.nleaders - 2)
		return;
	size_t off, len;
	ring_span(task, weft_ring_back(h->lay.leader_pos, (long)step + 1, h->lay.nleaders),
		  k % h->ring_nchunks, &off, &len);
	weft_reduce_scale((char *)task->args.recvbuf + off, len / task->args.esize,
			  task->args.dtype, task->comm->nranks);
}

static const struct weft_queue_ops ring_recv_ops = {.item = ring_recv, .done = ring_recv_done};
static const struct weft_queue_ops ring_send_ops = {.item = ring_send, .ready = ring_ready};

/* ---- 3. down the chain ---- */

static void down_recv(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	size_t off, len;
	chain_span(task, k, &off, &len);
	out->buf = (char *)task->args.recvbuf + off;
	out->bytes = len;
}

static void down_send(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	size_t off, len;
	chain_span(task, k, &off, &len);
	out->buf = (char *)task->args.recvbuf + off;
	out->bytes = len;
}

static const struct weft_queue_ops down_recv_ops = {.item = down_recv};
static const struct weft_queue_ops down_send_ops = {.item = down_send, .ready = chain_ready};

/* ---- phases ---- */

/* One queue of each direction; a side with nothing to do has no items. */
static void add_queues(struct allreduce_hier *h, const struct weft_queue_ops *recv_ops, int from,
		       uint32_t nrecv, const struct weft_queue_ops *send_ops, int to,
		       uint32_t nsend, uint32_t tag_base)
{
	weft_engine_add_queue(&h->eng, recv_ops, from, false, from >= 0 ? nrecv : 0, tag_base);
	weft_engine_add_queue(&h->eng, send_ops, to, true, to >= 0 ? nsend : 0, tag_base);
}

static bool phase_begin(struct weft_task *task, uint32_t phase)
{
	struct allreduce_hier *h = state(task);
	const struct weft_hier_layout *l = &h->lay;
	uint32_t nc = h->nchunks;
	h->phase = (enum hier_phase)phase;
	switch (h->phase) {
	case PHASE_UP:
		if (l->chain_pos == 0 && l->local_n == 1 && !task->args.in_place)
			memcpy(task->args.recvbuf, task->args.sendbuf,
			       task->args.count * task->args.esize);
		add_queues(h, &up_recv_ops, l->chain_next, nc, &up_send_ops, l->chain_prev, nc,
			   TAG_UP);
		return true;
	case PHASE_RING: {
		bool runs = l->chain_pos == 0 && l->nleaders > 1;
		uint32_t n = runs ? 2 * ((uint32_t)l->nleaders - 1) * h->ring_nchunks : 0;
		add_queues(h, &ring_recv_ops, l->leader_prev, n, &ring_send_ops, l->leader_next, n,
			   0);
		return true;
	}
	case PHASE_DOWN:
		add_queues(h, &down_recv_ops, l->chain_prev, nc, &down_send_ops, l->chain_next, nc,
			   TAG_DOWN);
		return true;
	case PHASE_DONE: break;
	}
	return false;
}

static const struct weft_engine_ops schedule = {.phase_begin = phase_begin};

static weft_status_t hier_post(struct weft_task *task)
{
	struct allreduce_hier *h = state(task);
	const struct weft_coll_args *a = &task->args;
	weft_hier_layout(task->comm, &h->lay);
	h->reduce = weft_reduce_kernel(a->dtype, a->op);
	uint64_t most = (UINT32_MAX / 2) / (2 * (uint64_t)task->comm->nranks);
	h->nchunks = weft_engine_chunks(task, a->count, most, &h->chunk_elems);
	h->ring_nchunks = weft_engine_chunks(task, weft_seg_count(a->count, h->lay.nleaders, 0),
					     most, &h->ring_chunk_elems);
	weft_engine_init(&h->eng, &schedule);
	weft_engine_start(&h->eng, task);
	return WEFT_SUCCESS;
}

/* The cost of the header's formula for @p m ranks in the largest group and
 * @p ngroups groups, chained over @p in and joined over @p among. */
static double hier_cost(const struct weft_comm *comm, const struct weft_coll_args *args, int m,
			int ngroups, struct weft_cost in, struct weft_cost among)
{
	double bytes = (double)args->count * (double)args->esize;
	double chunk = (double)comm->chunk_bytes < bytes ? (double)comm->chunk_bytes : bytes;
	double k = chunk > 0 ? bytes / chunk : 1;
	double t = 0;
	if (m > 1)
		t += 2.0 * (m - 2 + k) * (in.alpha + chunk * in.beta) + bytes * in.gamma;
	if (ngroups > 1) {
		double seg = bytes / ngroups;
		t += 2.0 * (ngroups - 1) * (among.alpha + seg * among.beta) +
		     (ngroups - 1) * seg * among.gamma;
	}
	return t;
}

static double hier_estimate(const struct weft_comm *comm, const struct weft_links *links,
			    const struct weft_coll_args *args)
{
	return hier_cost(comm, args, weft_hier_max_local(comm), comm->graph.nhosts,
			 links->intra_host, links->inter_host);
}

struct hier_flow {
	struct weft_topo_flow *flow;
	double chain_bytes, ring_bytes;
};

/* A chain edge carries the vector up and back down; a leaders' ring edge
 * 2 (G-1) segments of S/G. */
static void flow_edge(void *ctx, bool chain, int from, int to)
{
	struct hier_flow *h = ctx;
	if (chain) {
		weft_topo_flow_add(h->flow, to, from, h->chain_bytes);
		weft_topo_flow_add(h->flow, from, to, h->chain_bytes);
	} else {
		weft_topo_flow_add(h->flow, from, to, h->ring_bytes);
	}
}

static void grouped_flow(const struct weft_comm *comm, const struct weft_coll_args *args,
			 bool by_leaf, struct weft_topo_flow *flow)
{
	struct weft_hier_groups gr;
	weft_hier_groups(comm, by_leaf, &gr);
	double bytes = (double)args->count * (double)args->esize;
	struct hier_flow h = {flow, bytes, gr.n > 1 ? 2.0 * (gr.n - 1) * bytes / gr.n : 0};
	weft_hier_walk(comm, &gr, flow_edge, &h);
}

static void hier_flow(const struct weft_comm *comm, const struct weft_coll_args *args,
		      struct weft_topo_flow *flow)
{
	grouped_flow(comm, args, false, flow);
}

const struct weft_algo weft_allreduce_hier = {
    .id = WEFT_ALGO_HIER,
    .coll = WEFT_COLL_ALLREDUCE,
    .name = "hier",
    .description = "reduce up a chain to each host leader, ring among leaders (leaf-grouped), "
		   "broadcast down the chain",
    .estimate = hier_estimate,
    .supports = weft_hier_supports,
    .flow = hier_flow,
    .task = {.post = hier_post, .progress = weft_engine_task_progress},
};

/*
 * hier-leaf: the same three stages with the leaf as the group, what the
 * tuner's table shows at scale (issue 13) and the runtime does not run:
 * the chain runs through every rank under a leaf (across its hosts'
 * NICs), the ring among the leaf leaders, so the network ring has one
 * member per leaf instead of one per host: 2 (L-1) latency terms instead
 * of 2 (H-1), for a chain of up to a leaf's ranks. weft_hier_layout would
 * need the groups as a parameter to run it.
 */
static double hier_leaf_estimate(const struct weft_comm *comm, const struct weft_links *links,
				 const struct weft_coll_args *args)
{
	struct weft_hier_groups gr;
	weft_hier_groups(comm, true, &gr);
	return hier_cost(comm, args, weft_hier_max_members(comm, &gr), gr.n, links->intra_leaf,
			 links->inter_leaf);
}

static void hier_leaf_flow(const struct weft_comm *comm, const struct weft_coll_args *args,
			   struct weft_topo_flow *flow)
{
	grouped_flow(comm, args, true, flow);
}

/* Several leaves, and more ranks than leaves (some chain to walk). */
static bool hier_leaf_supports(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	return comm->graph.nleaves > 1 && comm->nranks > comm->graph.nleaves;
}

const struct weft_algo weft_allreduce_hier_leaf = {
    .id = WEFT_ALGO_HIER,
    .coll = WEFT_COLL_ALLREDUCE,
    .name = "hier-leaf",
    .description = "estimate only (the runtime hier groups by host): hier with the leaf as the "
		   "group, a chain through each leaf's ranks and a ring among leaf leaders",
    .estimate = hier_leaf_estimate,
    .supports = hier_leaf_supports,
    .flow = hier_leaf_flow,
};
