/*
 * allreduce_ring.c — ring AllReduce: reduce-scatter, then allgather.
 *
 * The vector is cut into n segments, one per ring position. In the
 * reduce-scatter phase (steps 0..n-2) the rank at position p sends segment
 * (p - s) mod n to the next rank and receives segment (p - s - 1) mod n from
 * the previous one, reducing it with its own contribution straight out of
 * the transport's buffer; after n-1 steps it holds the full reduction of
 * segment (p + 1) mod n. The allgather phase (steps n-1..2n-3) passes the
 * finished segments around the ring with the same send/receive formula,
 * copying instead of reducing. Every segment is cut into chunks, and chunk
 * c of step s is sent as soon as chunk c of step s-1 has arrived, so the
 * steps overlap: on the engine, one queue of receives from the previous
 * rank and one of sends to the next, the sends following the receives one
 * step behind.
 *
 * Cost (alpha-beta, S bytes, n ranks): 2(n-1) alpha + 2 (n-1)/n S beta, plus
 * (n-1)/n S gamma for the reductions. Bandwidth-optimal; the latency term
 * grows with n, which is why small messages want another algorithm.
 */
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "algorithms/patterns/ring.h"
#include "core/comm.h"
#include "reduce/reduce.h"
#include "topo/topo_flow.h"

enum { Q_RECV = 0, Q_SEND };

struct allreduce_ring {
	struct weft_engine eng;
	weft_reduce_fn reduce;
	size_t chunk_elems;
	uint32_t nchunks; /* per segment */
};

WEFT_ENGINE_FIRST(struct allreduce_ring);
_Static_assert(sizeof(struct allreduce_ring) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct allreduce_ring *state(const struct weft_task *task)
{
	return (struct allreduce_ring *)(void *)task->priv;
}

/* Bytes [*off, *off + *len) of chunk @p chunk of segment @p seg. */
static void chunk_span(const struct weft_task *task, int seg, uint32_t chunk, size_t *off,
		       size_t *len)
{
	int n = task->comm->nranks;
	size_t count = task->args.count;
	weft_engine_chunk_span(task, weft_seg_offset(count, n, seg), weft_seg_count(count, n, seg),
			       state(task)->chunk_elems, chunk, off, len);
}

static void send_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	const struct weft_comm *comm = task->comm;
	uint32_t step = k / state(task)->nchunks;
	size_t off, len;
	chunk_span(task, weft_ring_back(comm->ring_pos, step, comm->nranks),
		   k % state(task)->nchunks, &off, &len);
	const char *base =
	    step == 0 ? (const char *)task->args.sendbuf : (const char *)task->args.recvbuf;
	out->buf = (char *)base + off;
	out->bytes = len;
}

static bool send_ready(const struct weft_task *task, int q, uint32_t k)
{
	return weft_engine_follows(&state(task)->eng, Q_RECV, k, state(task)->nchunks);
}

static void recv_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	const struct weft_comm *comm = task->comm;
	uint32_t step = k / state(task)->nchunks;
	size_t off, len;
	chunk_span(task, weft_ring_back(comm->ring_pos, (long)step + 1, comm->nranks),
		   k % state(task)->nchunks, &off, &len);
	out->buf = (char *)task->args.recvbuf + off;
	out->bytes = len;
	if (step < (uint32_t)comm->nranks - 1) {
		out->reduce = state(task)->reduce;
		out->local = (const char *)task->args.sendbuf + off;
	}
	/* The last allgather step's chunks are not sent on: nothing reads them
	 * again here, so a large output skips the write-allocate read. */
	out->stream = step == 2 * (uint32_t)comm->nranks - 3 &&
		      weft_engine_stream(task, task->args.count * task->args.esize);
}

/* WEFT_AVG: divide each chunk of the segment this rank finished, before it
 * is passed on in the allgather phase. */
static void recv_done(struct weft_task *task, int q, uint32_t k)
{
	const struct weft_comm *comm = task->comm;
	uint32_t step = k / state(task)->nchunks;
	if (task->args.op != WEFT_AVG || step != (uint32_t)comm->nranks - 2)
		return;
	size_t off, len;
	chunk_span(task, weft_ring_back(comm->ring_pos, (long)step + 1, comm->nranks),
		   k % state(task)->nchunks, &off, &len);
	weft_reduce_scale((char *)task->args.recvbuf + off, len / task->args.esize,
			  task->args.dtype, comm->nranks);
}

static const struct weft_queue_ops recv_ops = {.item = recv_item, .done = recv_done};
static const struct weft_queue_ops send_ops = {.item = send_item, .ready = send_ready};

static weft_status_t ring_post(struct weft_task *task)
{
	struct allreduce_ring *ar = state(task);
	const struct weft_comm *comm = task->comm;
	const struct weft_coll_args *a = &task->args;
	int n = comm->nranks;
	weft_engine_init(&ar->eng, NULL);
	if (n == 1) {
		if (!a->in_place)
			memcpy(a->recvbuf, a->sendbuf, a->count * a->esize);
		weft_engine_start(&ar->eng, task);
		return WEFT_SUCCESS;
	}
	ar->reduce = weft_reduce_kernel(a->dtype, a->op);
	/* Steps x chunks count in the 31 bits below the chain tags. */
	ar->nchunks = weft_engine_chunks(task, weft_seg_count(a->count, n, 0),
					 (UINT32_MAX / 2) / (2 * (uint64_t)n), &ar->chunk_elems);
	uint32_t total = 2 * ((uint32_t)n - 1) * ar->nchunks;
	weft_engine_add_queue(&ar->eng, &recv_ops, comm->ring[weft_ring_prev(comm->ring_pos, n)],
			      false, total, 0);
	weft_engine_add_queue(&ar->eng, &send_ops, comm->ring[weft_ring_next(comm->ring_pos, n)],
			      true, total, 0);
	weft_engine_start(&ar->eng, task);
	return WEFT_SUCCESS;
}

/* 2(n-1) steps of S/n bytes each over the slowest ring link, half of them
 * reducing; the pipeline hides all but one chunk of the latency per step. */
static double ring_estimate(const struct weft_comm *comm, const struct weft_links *links,
			    const struct weft_coll_args *args)
{
	int n = comm->nranks;
	if (n == 1)
		return 0;
	struct weft_cost c = links->ring;
	double seg = (double)args->count * (double)args->esize / n;
	return 2.0 * (n - 1) * (c.alpha + seg * c.beta) + (n - 1) * seg * c.gamma;
}

/* Every ring edge carries 2(n-1) segments of S/n bytes. */
static void ring_flow(const struct weft_comm *comm, const struct weft_coll_args *args,
		      struct weft_topo_flow *flow)
{
	int n = comm->nranks;
	double bytes = 2.0 * (n - 1) * (double)args->count * (double)args->esize / n;
	for (int p = 0; p < n && n > 1; p++)
		weft_topo_flow_add(flow, comm->ring[p], comm->ring[weft_ring_next(p, n)], bytes);
}

const struct weft_algo weft_allreduce_ring = {
    .id = WEFT_ALGO_RING,
    .coll = WEFT_COLL_ALLREDUCE,
    .name = "ring",
    .description = "reduce-scatter then allgather around the placement ring, chunked and pipelined",
    .estimate = ring_estimate,
    .flow = ring_flow,
    .task = {.post = ring_post, .progress = weft_engine_task_progress},
};
