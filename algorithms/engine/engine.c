/* engine.c — see engine.h. */
#include "algorithms/engine/engine.h"

#include <stdint.h>
#include <string.h>

#include "core/comm.h"
#include "core/p2p.h"
#include "health/slowdet.h"

void weft_engine_init(struct weft_engine *eng, const struct weft_engine_ops *ops)
{
	eng->ops = ops;
	eng->window_max = WEFT_ENGINE_WINDOW;
	eng->phase = 0;
	eng->finished = false;
	eng->nq = 0;
}

static void list_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out);

static const struct weft_queue_ops list_ops = {
    .item = list_item,
};

static void list_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	*out = weft_engine_of(task)->list[q][k];
}

/* Share the message slots among the phase's queues. */
static void lay_out_windows(struct weft_engine *eng)
{
	uint32_t w = eng->nq ? WEFT_ENGINE_MSGS / (uint32_t)eng->nq : 0;
	if (w > eng->window_max)
		w = eng->window_max;
	if (w == 0)
		w = 1;
	for (int i = 0; i < eng->nq; i++) {
		eng->q[i].window = w;
		eng->q[i].first = (uint16_t)((uint32_t)i * w);
	}
}

int weft_engine_add_queue(struct weft_engine *eng, const struct weft_queue_ops *ops, int peer,
			  bool send, uint32_t total, uint32_t tag_base)
{
	int i = eng->nq++;
	eng->q[i] = (struct weft_queue){
	    .ops = ops, .peer = peer, .send = send, .total = total, .tag_base = tag_base};
	lay_out_windows(eng);
	return i;
}

int weft_engine_add_list(struct weft_engine *eng, bool send, const struct weft_xfer *items, int n)
{
	int i = weft_engine_add_queue(eng, &list_ops, -1, send, 0, 0);
	for (int j = 0; j < n; j++) {
		if (items[j].peer < 0)
			continue;
		eng->list[i][eng->q[i].total++] = items[j];
	}
	return i;
}

void weft_step_clear(struct weft_step *st)
{
	for (int i = 0; i < WEFT_ENGINE_STEP_PIECES; i++)
		st->recv[i] = st->send[i] = (struct weft_xfer){.peer = -1};
}

void weft_engine_add_step(struct weft_engine *eng, uint32_t step, const struct weft_step *st)
{
	struct weft_step tagged = *st;
	for (int i = 0; i < WEFT_ENGINE_STEP_PIECES; i++)
		tagged.recv[i].step = tagged.send[i].step =
		    step * WEFT_ENGINE_STEP_PIECES + (uint32_t)i;
	weft_engine_add_list(eng, false, tagged.recv, WEFT_ENGINE_STEP_PIECES);
	weft_engine_add_list(eng, true, tagged.send, WEFT_ENGINE_STEP_PIECES);
}

static bool begin_phase(struct weft_engine *eng, struct weft_task *task)
{
	if (!eng->ops || !eng->ops->phase_begin)
		return eng->phase == 0;
	eng->nq = 0;
	return eng->ops->phase_begin(task, eng->phase);
}

void weft_engine_start(struct weft_engine *eng, struct weft_task *task)
{
	eng->phase = 0;
	eng->finished = !begin_phase(eng, task);
}

/* Describe and post item q->posted; a zero-byte item is done at once. */
static weft_status_t post_item(struct weft_engine *eng, struct weft_task *task, int qi)
{
	struct weft_queue *q = &eng->q[qi];
	uint32_t k = q->posted;
	uint32_t slot = q->first + k % q->window;
	struct weft_xfer x = {.peer = q->peer, .step = q->tag_base + k};
	q->ops->item(task, qi, k, &x);
	eng->msg_peer[slot] = x.peer;
	eng->msg_step[slot] = x.step;
	eng->reqs[slot] = NULL;
	q->posted++;
	if (x.bytes == 0 && !x.signal)
		return WEFT_SUCCESS;
	struct weft_p2p_post post = {
	    .buf = x.buf,
	    .len = x.bytes,
	    .tag = weft_p2p_tag(task->seq, x.step),
	    .reduce = q->send ? NULL : x.reduce,
	    .local = q->send ? NULL : x.local,
	    .stream = !q->send && x.stream,
	    .unit = task->args.esize ? task->args.esize : 1,
	};
	return q->send ? weft_p2p_isend(task->comm, x.peer, &post, &eng->reqs[slot])
		       : weft_p2p_irecv(task->comm, x.peer, &post, &eng->reqs[slot]);
}

/* Reap finished items in order, then post while the window and readiness
 * allow. *moved if anything happened. */
static weft_status_t queue_progress(struct weft_engine *eng, struct weft_task *task, int qi,
				    bool *moved)
{
	struct weft_queue *q = &eng->q[qi];
	while (q->done < q->posted) {
		struct weft_p2p_req **req = &eng->reqs[q->first + q->done % q->window];
		if (*req) {
			weft_status_t st;
			if (!weft_p2p_done(*req, &st))
				break;
			if (st != WEFT_SUCCESS)
				return st;
			weft_p2p_release(task->comm, *req);
			*req = NULL;
		}
		if (q->done == 0 && !q->send && eng->phase == 0 && task->comm->slowdet)
			weft_slowdet_first(task, eng->msg_peer[q->first]);
		if (q->ops->done)
			q->ops->done(task, qi, q->done);
		q->done++;
		*moved = true;
	}
	while (q->posted < q->total && q->posted - q->done < q->window &&
	       (!q->ops->ready || q->ops->ready(task, qi, q->posted))) {
		weft_status_t st = post_item(eng, task, qi);
		if (st != WEFT_SUCCESS)
			return st;
		*moved = true;
	}
	return WEFT_SUCCESS;
}

static bool phase_complete(const struct weft_engine *eng)
{
	for (int i = 0; i < eng->nq; i++)
		if (eng->q[i].done < eng->q[i].total)
			return false;
	return true;
}

/* For the timeout message and the flight recorder: the peer of the
 * oldest unfinished receive, else of the oldest unfinished send, and that
 * message's tag step (UINT32_MAX: not posted yet). */
static int waiting_for(const struct weft_engine *eng, uint32_t *step, bool *send)
{
	*send = false;
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < eng->nq; i++) {
			const struct weft_queue *q = &eng->q[i];
			if (q->send != (pass == 1) || q->done == q->total)
				continue;
			*send = q->send;
			*step = UINT32_MAX;
			if (q->done < q->posted) {
				uint32_t slot = q->first + q->done % q->window;
				*step = eng->msg_step[slot];
				return eng->msg_peer[slot];
			}
			if (q->peer >= 0)
				return q->peer;
		}
	}
	*step = UINT32_MAX;
	return -1;
}

weft_status_t weft_engine_progress(struct weft_engine *eng, struct weft_task *task)
{
	bool moved;
	do {
		moved = false;
		for (int i = 0; i < eng->nq && !eng->finished; i++) {
			weft_status_t st = queue_progress(eng, task, i, &moved);
			if (st != WEFT_SUCCESS)
				return st;
		}
		while (!eng->finished && phase_complete(eng)) {
			if (eng->ops && eng->ops->phase_done)
				eng->ops->phase_done(task, eng->phase);
			eng->phase++;
			eng->finished = !begin_phase(eng, task);
			moved = true;
		}
		if (moved)
			weft_task_touch(task);
	} while (moved && !eng->finished);
	if (eng->finished)
		return WEFT_SUCCESS;
	task->waiting_for = waiting_for(eng, &task->waiting_step, &task->waiting_send);
	return WEFT_INPROGRESS;
}

weft_status_t weft_engine_task_progress(struct weft_task *task)
{
	return weft_engine_progress(weft_engine_of(task), task);
}

uint32_t weft_engine_chunks(const struct weft_task *task, size_t elems, uint64_t max_chunks,
			    size_t *chunk_elems)
{
	size_t ce = task->comm->chunk_bytes / task->args.esize;
	if (ce == 0)
		ce = 1;
	size_t nc = (elems + ce - 1) / ce;
	while (nc > max_chunks) {
		ce *= 2;
		nc = (elems + ce - 1) / ce;
	}
	*chunk_elems = ce;
	return nc ? (uint32_t)nc : 1;
}

void weft_engine_chunk_span(const struct weft_task *task, size_t first, size_t elems,
			    size_t chunk_elems, uint32_t chunk, size_t *off, size_t *len)
{
	size_t start = (size_t)chunk * chunk_elems;
	size_t n = start >= elems ? 0 : (elems - start < chunk_elems ? elems - start : chunk_elems);
	*off = (first + (start < elems ? start : 0)) * task->args.esize;
	*len = n * task->args.esize;
}

bool weft_engine_stream(const struct weft_task *task, size_t out_bytes)
{
	size_t min = task->comm->stream_min;
	if (task->args.in_place) /* half the footprint: no second buffer */
		min = min > SIZE_MAX / 2 ? SIZE_MAX : 2 * min;
	return out_bytes > min;
}
