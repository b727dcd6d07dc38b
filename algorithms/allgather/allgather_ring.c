/*
 * allgather_ring.c — ring AllGather.
 *
 * Each rank's block starts at its owner. At step s (0..n-2) the rank at ring
 * position p sends the block of position (p - s) mod n to the next rank and
 * receives the block of position (p - s - 1) mod n from the previous one,
 * straight into its place in recvbuf; after n-1 steps every rank has every
 * block. Blocks are chunked and the steps pipelined: on the engine, a queue
 * of receives from the previous rank and one of sends to the next, each
 * send following the receive of the same chunk one step earlier.
 *
 * Cost: (n-1) alpha + (n-1)/n S beta, S the whole gathered buffer.
 */
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "algorithms/patterns/ring.h"
#include "core/comm.h"

enum { Q_RECV = 0, Q_SEND };

struct allgather_ring {
	struct weft_engine eng;
	size_t chunk_elems;
	uint32_t nchunks; /* per block */
};

WEFT_ENGINE_FIRST(struct allgather_ring);
_Static_assert(sizeof(struct allgather_ring) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct allgather_ring *state(const struct weft_task *task)
{
	return (struct allgather_ring *)(void *)task->priv;
}

/* Offset in recvbuf of chunk @p chunk of the block at ring position @p pos. */
static void chunk_span(const struct weft_task *task, int pos, uint32_t chunk, size_t *off,
		       size_t *len)
{
	size_t count = task->args.count;
	int owner = task->comm->ring[pos];
	weft_engine_chunk_span(task, (size_t)owner * count, count, state(task)->chunk_elems, chunk,
			       off, len);
}

static void send_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	uint32_t step = k / state(task)->nchunks;
	size_t off, len;
	chunk_span(task, weft_ring_back(task->comm->ring_pos, step, task->comm->nranks),
		   k % state(task)->nchunks, &off, &len);
	if (step == 0) { /* our own block: from sendbuf, even out of place */
		size_t mine = (size_t)task->comm->rank * task->args.count * task->args.esize;
		out->buf = (char *)task->args.sendbuf + (off - mine);
	} else {
		out->buf = (char *)task->args.recvbuf + off;
	}
	out->bytes = len;
}

static bool send_ready(const struct weft_task *task, int q, uint32_t k)
{
	return weft_engine_follows(&state(task)->eng, Q_RECV, k, state(task)->nchunks);
}

static void recv_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	uint32_t step = k / state(task)->nchunks;
	size_t off, len;
	chunk_span(task, weft_ring_back(task->comm->ring_pos, (long)step + 1, task->comm->nranks),
		   k % state(task)->nchunks, &off, &len);
	out->buf = (char *)task->args.recvbuf + off;
	out->bytes = len;
}

static const struct weft_queue_ops recv_ops = {.item = recv_item};
static const struct weft_queue_ops send_ops = {.item = send_item, .ready = send_ready};

static weft_status_t ring_post(struct weft_task *task)
{
	struct allgather_ring *ag = state(task);
	const struct weft_comm *comm = task->comm;
	const struct weft_coll_args *a = &task->args;
	int n = comm->nranks;
	if (!a->in_place)
		memcpy((char *)a->recvbuf + (size_t)comm->rank * a->count * a->esize, a->sendbuf,
		       a->count * a->esize);
	weft_engine_init(&ag->eng, NULL);
	if (n > 1) {
		ag->nchunks = weft_engine_chunks(task, a->count, (UINT32_MAX / 2) / (uint64_t)n,
						 &ag->chunk_elems);
		uint32_t total = ((uint32_t)n - 1) * ag->nchunks;
		weft_engine_add_queue(&ag->eng, &recv_ops,
				      comm->ring[weft_ring_prev(comm->ring_pos, n)], false, total,
				      0);
		weft_engine_add_queue(&ag->eng, &send_ops,
				      comm->ring[weft_ring_next(comm->ring_pos, n)], true, total,
				      0);
	}
	weft_engine_start(&ag->eng, task);
	return WEFT_SUCCESS;
}

/* n-1 steps of one block each over the slowest ring link. */
static double ring_estimate(const struct weft_comm *comm, const struct weft_links *links,
			    const struct weft_coll_args *args)
{
	int n = comm->nranks;
	struct weft_cost c = links->ring;
	return (n - 1) * (c.alpha + (double)args->count * (double)args->esize * c.beta);
}

const struct weft_algo weft_allgather_ring = {
    .id = WEFT_ALGO_RING,
    .coll = WEFT_COLL_ALLGATHER,
    .name = "ring",
    .description = "each block travels the placement ring, chunked and pipelined",
    .estimate = ring_estimate,
    .task = {.post = ring_post, .progress = weft_engine_task_progress},
};
