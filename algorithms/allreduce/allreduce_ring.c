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
 * copying instead of reducing. Every segment is cut into chunks that the
 * ring pipeline overlaps across steps.
 *
 * Cost (alpha-beta, S bytes, n ranks): 2(n-1) alpha + 2 (n-1)/n S beta, plus
 * (n-1)/n S gamma for the reductions. Bandwidth-optimal; the latency term
 * grows with n, which is why small messages want another algorithm.
 */
#include <string.h>

#include "core/comm.h"
#include "reduce/reduce.h"
#include "algorithms/algo.h"
#include "algorithms/patterns/ring.h"
#include "algorithms/engine/ring_pipeline.h"

struct allreduce_ring {
	struct weft_ring_pipeline rp;
	size_t chunk_elems;
	weft_reduce_fn reduce;
};

_Static_assert(sizeof(struct allreduce_ring) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct allreduce_ring *state(const struct weft_task *task)
{
	return (struct allreduce_ring *)(void *)task->priv;
}

/* Bytes [*off, *off + *len) of chunk @p chunk of segment @p seg. */
static void chunk_span(const struct weft_task *task, int seg, uint32_t chunk, size_t *off,
		       size_t *len)
{
	const struct allreduce_ring *ar = state(task);
	int n = task->comm->nranks;
	size_t count = task->args.count, esize = task->args.esize;
	size_t seg_elems = weft_seg_count(count, n, seg);
	size_t first = (size_t)chunk * ar->chunk_elems;
	size_t elems = first >= seg_elems ? 0
					  : (seg_elems - first < ar->chunk_elems ? seg_elems - first
										 : ar->chunk_elems);
	*off = (weft_seg_offset(count, n, seg) + (first < seg_elems ? first : 0)) * esize;
	*len = elems * esize;
}

static void send_chunk(const struct weft_task *task, uint32_t step, uint32_t chunk,
		       struct weft_ring_chunk *out)
{
	int n = task->comm->nranks;
	size_t off, len;
	chunk_span(task, weft_ring_back(task->comm->ring_pos, step, n), chunk, &off, &len);
	const char *base =
	    step == 0 ? (const char *)task->args.sendbuf : (const char *)task->args.recvbuf;
	out->buf = (char *)base + off;
	out->bytes = len;
}

static void recv_chunk(const struct weft_task *task, uint32_t step, uint32_t chunk,
		       struct weft_ring_chunk *out)
{
	int n = task->comm->nranks;
	size_t off, len;
	chunk_span(task, weft_ring_back(task->comm->ring_pos, (long)step + 1, n), chunk, &off,
		   &len);
	out->buf = (char *)task->args.recvbuf + off;
	out->bytes = len;
	if (step < (uint32_t)n - 1) {
		out->reduce = state(task)->reduce;
		out->local = (const char *)task->args.sendbuf + off;
	}
}

/* WEFT_AVG: divide each chunk of the segment this rank finished, before it
 * is passed on in the allgather phase. */
static void recv_done(const struct weft_task *task, uint32_t step, uint32_t chunk)
{
	int n = task->comm->nranks;
	if (task->args.op != WEFT_AVG || step != (uint32_t)n - 2)
		return;
	size_t off, len;
	chunk_span(task, weft_ring_back(task->comm->ring_pos, (long)step + 1, n), chunk, &off,
		   &len);
	weft_reduce_scale((char *)task->args.recvbuf + off, len / task->args.esize,
			  task->args.dtype, n);
}

static const struct weft_ring_geometry geometry = {
    .send_chunk = send_chunk,
    .recv_chunk = recv_chunk,
    .recv_done = recv_done,
};

static weft_status_t ring_post(struct weft_task *task)
{
	struct allreduce_ring *ar = state(task);
	int n = task->comm->nranks;
	const struct weft_coll_args *a = &task->args;
	if (n == 1) {
		if (!a->in_place)
			memcpy(a->recvbuf, a->sendbuf, a->count * a->esize);
		ar->rp.total = 0;
		return WEFT_INPROGRESS;
	}
	ar->reduce = weft_reduce_kernel(a->dtype, a->op);
	uint32_t nchunks =
	    weft_ring_nchunks(task, weft_seg_count(a->count, n, 0), &ar->chunk_elems);
	weft_ring_pipeline_init(&ar->rp, task, &geometry, 2 * ((uint32_t)n - 1), nchunks);
	weft_status_t st = weft_ring_pipeline_progress(&ar->rp, task);
	return st == WEFT_SUCCESS ? WEFT_INPROGRESS : st;
}

static weft_status_t ring_progress(struct weft_task *task)
{
	struct allreduce_ring *ar = state(task);
	if (task->comm->nranks == 1)
		return WEFT_SUCCESS;
	return weft_ring_pipeline_progress(&ar->rp, task);
}

/* 2(n-1) steps of S/n bytes each over the slowest ring link, half of them
 * reducing; the pipeline hides all but one chunk of the latency per step. */
static double ring_estimate(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	int n = comm->nranks;
	if (n == 1)
		return 0;
	struct weft_cost c = weft_tune_ring(comm);
	double seg = (double)args->count * (double)args->esize / n;
	return 2.0 * (n - 1) * (c.alpha + seg * c.beta) + (n - 1) * seg * c.gamma;
}

const struct weft_algo weft_allreduce_ring = {
    .id = WEFT_ALGO_RING,
    .coll = WEFT_COLL_ALLREDUCE,
    .name = "ring",
    .description = "reduce-scatter then allgather around the placement ring, chunked and pipelined",
    .estimate = ring_estimate,
    .post = ring_post,
    .progress = ring_progress,
};
