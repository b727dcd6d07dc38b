/*
 * allgather_ring.c — ring AllGather.
 *
 * Each rank's block starts at its owner. At step s (0..n-2) the rank at ring
 * position p sends the block of position (p - s) mod n to the next rank and
 * receives the block of position (p - s - 1) mod n from the previous one,
 * straight into its place in recvbuf; after n-1 steps every rank has every
 * block. Blocks are chunked and the steps pipelined.
 *
 * Cost: (n-1) alpha + (n-1)/n S beta, S the whole gathered buffer.
 */
#include <string.h>

#include "core/comm.h"
#include "algorithms/algo.h"
#include "algorithms/patterns/ring.h"
#include "algorithms/engine/ring_pipeline.h"

struct allgather_ring {
	struct weft_ring_pipeline rp;
	size_t chunk_elems;
};

_Static_assert(sizeof(struct allgather_ring) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct allgather_ring *state(const struct weft_task *task)
{
	return (struct allgather_ring *)(void *)task->priv;
}

/* Offset in recvbuf of chunk @p chunk of the block at ring position @p pos. */
static void chunk_span(const struct weft_task *task, int pos, uint32_t chunk, size_t *off,
		       size_t *len)
{
	const struct allgather_ring *ag = state(task);
	size_t count = task->args.count, esize = task->args.esize;
	size_t first = (size_t)chunk * ag->chunk_elems;
	size_t elems = count - first < ag->chunk_elems ? count - first : ag->chunk_elems;
	int owner = task->comm->ring[pos];
	*off = ((size_t)owner * count + first) * esize;
	*len = elems * esize;
}

static void send_chunk(const struct weft_task *task, uint32_t step, uint32_t chunk,
		       struct weft_ring_chunk *out)
{
	size_t off, len;
	chunk_span(task, weft_ring_back(task->comm->ring_pos, step, task->comm->nranks), chunk,
		   &off, &len);
	if (step == 0) { /* our own block: from sendbuf, even out of place */
		size_t mine = (size_t)task->comm->rank * task->args.count * task->args.esize;
		out->buf = (char *)task->args.sendbuf + (off - mine);
	} else {
		out->buf = (char *)task->args.recvbuf + off;
	}
	out->bytes = len;
}

static void recv_chunk(const struct weft_task *task, uint32_t step, uint32_t chunk,
		       struct weft_ring_chunk *out)
{
	size_t off, len;
	chunk_span(task, weft_ring_back(task->comm->ring_pos, (long)step + 1, task->comm->nranks),
		   chunk, &off, &len);
	out->buf = (char *)task->args.recvbuf + off;
	out->bytes = len;
}

static const struct weft_ring_geometry geometry = {
    .send_chunk = send_chunk,
    .recv_chunk = recv_chunk,
};

static weft_status_t ring_post(struct weft_task *task)
{
	struct allgather_ring *ag = state(task);
	const struct weft_coll_args *a = &task->args;
	int n = task->comm->nranks;
	if (!a->in_place)
		memcpy((char *)a->recvbuf + (size_t)task->comm->rank * a->count * a->esize,
		       a->sendbuf, a->count * a->esize);
	if (n == 1)
		return WEFT_INPROGRESS;
	uint32_t nchunks = weft_ring_nchunks(task, a->count, &ag->chunk_elems);
	weft_ring_pipeline_init(&ag->rp, task, &geometry, (uint32_t)n - 1, nchunks);
	weft_status_t st = weft_ring_pipeline_progress(&ag->rp, task);
	return st == WEFT_SUCCESS ? WEFT_INPROGRESS : st;
}

static weft_status_t ring_progress(struct weft_task *task)
{
	if (task->comm->nranks == 1)
		return WEFT_SUCCESS;
	return weft_ring_pipeline_progress(&state(task)->rp, task);
}

/* n-1 steps of one block each over the slowest ring link. */
static double ring_estimate(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	int n = comm->nranks;
	struct weft_cost c = weft_tune_ring(comm);
	return (n - 1) * (c.alpha + (double)args->count * (double)args->esize * c.beta);
}

const struct weft_algo weft_allgather_ring = {
    .id = WEFT_ALGO_RING,
    .coll = WEFT_COLL_ALLGATHER,
    .name = "ring",
    .description = "each block travels the placement ring, chunked and pipelined",
    .estimate = ring_estimate,
    .post = ring_post,
    .progress = ring_progress,
};
