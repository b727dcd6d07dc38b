/* ring_pipeline.c — see ring_pipeline.h. */
#include "algorithms/engine/ring_pipeline.h"

#include "core/comm.h"
#include "core/p2p.h"
#include "algorithms/patterns/ring.h"

void weft_ring_pipeline_init(struct weft_ring_pipeline *rp, const struct weft_task *task,
			     const struct weft_ring_geometry *geo, uint32_t nsteps,
			     uint32_t nchunks)
{
	const struct weft_comm *comm = task->comm;
	int n = comm->nranks;
	rp->geo = geo;
	rp->next = comm->ring[weft_ring_next(comm->ring_pos, n)];
	rp->prev = comm->ring[weft_ring_prev(comm->ring_pos, n)];
	rp->nsteps = nsteps;
	rp->nchunks = nchunks;
	rp->total = nsteps * nchunks;
	rp->send_posted = rp->send_done = rp->recv_posted = rp->recv_done = 0;
}

uint32_t weft_ring_nchunks(const struct weft_task *task, size_t max_elems, size_t *chunk_elems)
{
	size_t ce = task->comm->chunk_bytes / task->args.esize;
	if (ce == 0)
		ce = 1;
	size_t nc = (max_elems + ce - 1) / ce;
	if (nc == 0)
		nc = 1;
	/* Keep tags within 32 bits: grow chunks for huge messages. */
	while (nc * 2 * (size_t)task->comm->nranks > UINT32_MAX / 2) {
		ce *= 2;
		nc = (max_elems + ce - 1) / ce;
	}
	*chunk_elems = ce;
	return (uint32_t)nc;
}

static weft_status_t post_recv(struct weft_ring_pipeline *rp, struct weft_task *task)
{
	uint32_t k = rp->recv_posted;
	struct weft_msg *m = &rp->recvs[k % WEFT_RING_WINDOW];
	struct weft_ring_chunk c = {0};
	rp->geo->recv_chunk(task, k / rp->nchunks, k % rp->nchunks, &c);
	m->buf = c.buf;
	m->len = c.bytes;
	m->tag = weft_p2p_tag(task->seq, k);
	m->reduce = c.reduce;
	m->local = c.local;
	m->unit = task->args.esize;
	rp->recv_posted++;
	if (c.bytes == 0) {
		m->done = true;
		m->status = WEFT_SUCCESS;
		return WEFT_SUCCESS;
	}
	return weft_p2p_irecv(task->comm, rp->prev, m);
}

static weft_status_t post_send(struct weft_ring_pipeline *rp, struct weft_task *task)
{
	uint32_t k = rp->send_posted;
	struct weft_msg *m = &rp->sends[k % WEFT_RING_WINDOW];
	struct weft_ring_chunk c = {0};
	rp->geo->send_chunk(task, k / rp->nchunks, k % rp->nchunks, &c);
	m->buf = c.buf;
	m->len = c.bytes;
	m->tag = weft_p2p_tag(task->seq, k);
	m->unit = task->args.esize;
	rp->send_posted++;
	if (c.bytes == 0) {
		m->done = true;
		m->status = WEFT_SUCCESS;
		return WEFT_SUCCESS;
	}
	return weft_p2p_isend(task->comm, rp->next, m);
}

/* Chunk j of step s is sendable once chunk j of step s-1 has arrived. */
static bool send_ready(const struct weft_ring_pipeline *rp)
{
	uint32_t k = rp->send_posted;
	return k < rp->nchunks || rp->recv_done > k - rp->nchunks;
}

weft_status_t weft_ring_pipeline_progress(struct weft_ring_pipeline *rp, struct weft_task *task)
{
	weft_status_t st;
	bool moved;
	do {
		moved = false;
		while (rp->recv_done < rp->recv_posted) {
			struct weft_msg *m = &rp->recvs[rp->recv_done % WEFT_RING_WINDOW];
			if (!m->done)
				break;
			if (m->status != WEFT_SUCCESS)
				return m->status;
			if (rp->geo->recv_done)
				rp->geo->recv_done(task, rp->recv_done / rp->nchunks,
						   rp->recv_done % rp->nchunks);
			rp->recv_done++;
			moved = true;
		}
		while (rp->send_done < rp->send_posted) {
			struct weft_msg *m = &rp->sends[rp->send_done % WEFT_RING_WINDOW];
			if (!m->done)
				break;
			if (m->status != WEFT_SUCCESS)
				return m->status;
			rp->send_done++;
			moved = true;
		}
		while (rp->recv_posted < rp->total &&
		       rp->recv_posted - rp->recv_done < WEFT_RING_WINDOW) {
			if ((st = post_recv(rp, task)) != WEFT_SUCCESS)
				return st;
			moved = true;
		}
		while (rp->send_posted < rp->total &&
		       rp->send_posted - rp->send_done < WEFT_RING_WINDOW && send_ready(rp)) {
			if ((st = post_send(rp, task)) != WEFT_SUCCESS)
				return st;
			moved = true;
		}
		if (moved)
			weft_task_touch(task);
	} while (moved && rp->send_done + rp->recv_done < 2 * rp->total);
	if (rp->send_done == rp->total && rp->recv_done == rp->total)
		return WEFT_SUCCESS;
	task->waiting_for = rp->recv_done < rp->total ? rp->prev : rp->next;
	return WEFT_INPROGRESS;
}
