/*
 * engine.h — the one transfer engine under every algorithm.
 *
 * An algorithm is a schedule of phases; a phase is a set of queues; a queue
 * is an ordered list of transfer items in one direction (sends or
 * receives), each item a peer, a span of bytes and, for a receive, whether
 * it reduces on arrival. The engine posts each queue's items in order,
 * keeps a window of them in flight, reaps them in order, finishes
 * zero-byte items at once, stops at the first failed message, notes whom
 * the task waits for, and moves to the next phase when every queue of the
 * current one is complete.
 *
 * What an algorithm says, per queue (struct weft_queue_ops):
 *  - item(k): what item k moves; called exactly once per item, in
 *    increasing k, so it may keep cursors;
 *  - ready(k): whether item k may be posted yet (its data has arrived, its
 *    staging slot is free); called as often as needed, so it must not
 *    change state; NULL: always. Dependencies on other queues are read
 *    from their counters (weft_engine_done);
 *  - done(k): item k has completed (zero-byte items too); NULL: nothing.
 * and, per schedule (struct weft_engine_ops), how phases begin and end.
 * A schedule of one phase needs no phase hook: its queues are added before
 * weft_engine_start.
 *
 * Matching. The transport matches messages of one direction between two
 * ranks in the order they were posted (and checks tag and length), so an
 * algorithm's queues must post messages to a given peer in the order that
 * peer posts the matching ones: a queue posts in item order, and several
 * queues to one peer must be ordered by readiness (the tree algorithms
 * merge their streams onto one queue per link for this reason). Item k of
 * a queue carries the tag step tag_base + k unless item() sets another.
 *
 * Zero-byte items are skipped by both sides (both compute the same
 * lengths), except signals (struct weft_xfer.signal), which are sent with
 * no payload: barriers are made of them.
 *
 * The window is the one policy point for how many messages a task keeps
 * in flight: each queue of a phase gets WEFT_ENGINE_MSGS / (queues in the
 * phase) slots, at most WEFT_ENGINE_WINDOW and at least one. How many bytes
 * may be in flight on a connection is not decided here: the point-to-point
 * layer's pacing gate holds sends back (core/p2p.h).
 */
#ifndef WEFT_ENGINE_H
#define WEFT_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/task.h"
#include "reduce/reduce.h"

struct weft_p2p_req;

#define WEFT_ENGINE_MAX_QUEUES 12 /* a double binary tree: 2 trees x 3 neighbours x 2 ways */
#define WEFT_ENGINE_MSGS       24 /* messages in flight per task */
#define WEFT_ENGINE_WINDOW     8  /* messages in flight per queue */
#define WEFT_ENGINE_LIST_MAX   4  /* items of a list queue (weft_engine_add_list) */

/* One transfer item. */
struct weft_xfer {
	int peer;	       /* -1: the queue's peer */
	char *buf;	       /* send: source; receive: destination */
	size_t bytes;	       /* 0: nothing to move (unless signal) */
	weft_reduce_fn reduce; /* receive only: buf = reduce(local, incoming); NULL: copy */
	const char *local;     /* receive with reduce: the local operand */
	uint32_t step;	       /* tag step; preset to the queue's tag_base + k */
	bool signal;	       /* post even with zero bytes (a barrier's token) */
	bool stream;	       /* receive: buf is not read again soon (weft_engine_stream) */
};

struct weft_queue_ops {
	void (*item)(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out);
	bool (*ready)(const struct weft_task *task, int q, uint32_t k);
	void (*done)(struct weft_task *task, int q, uint32_t k);
};

struct weft_engine_ops {
	/* Set up phase @p phase (its queues: weft_engine_add_*) after the
	 * previous one completed; false when there is no such phase: the
	 * schedule is finished. NULL: one phase, set up before start. */
	bool (*phase_begin)(struct weft_task *task, uint32_t phase);
	/* Every item of phase @p phase is done; NULL: nothing to do. */
	void (*phase_done)(struct weft_task *task, uint32_t phase);
};

struct weft_queue {
	const struct weft_queue_ops *ops;
	int peer; /* -1: each item names its own */
	bool send;
	uint32_t total, window, tag_base;
	uint32_t posted, done;
	uint16_t first; /* its message slots: msgs[first .. first + window) */
};

struct weft_engine {
	const struct weft_engine_ops *ops;
	uint32_t window_max; /* WEFT_ENGINE_WINDOW; tests lower it */
	uint32_t phase;
	bool finished;
	int nq;
	struct weft_queue q[WEFT_ENGINE_MAX_QUEUES];
	/* The messages in flight, by slot (NULL: a zero-byte item, done at once). */
	struct weft_p2p_req *reqs[WEFT_ENGINE_MSGS];
	int msg_peer[WEFT_ENGINE_MSGS];
	uint32_t msg_step[WEFT_ENGINE_MSGS]; /* its tag step, for the flight recorder */
	/* Items of list queues (weft_engine_add_list), by queue. */
	struct weft_xfer list[WEFT_ENGINE_MAX_QUEUES][WEFT_ENGINE_LIST_MAX];
};

/* The engine is the first member of every algorithm's state, at the start
 * of task->priv: queue callbacks reach it (and the state) from the task. */
static inline struct weft_engine *weft_engine_of(const struct weft_task *task)
{
	return (struct weft_engine *)(void *)task->priv;
}

#define WEFT_ENGINE_FIRST(type)                                                                    \
	_Static_assert(offsetof(type, eng) == 0, "the engine must be the first member")

/* Empty the engine for a new schedule (@p ops may be NULL: one phase). */
void weft_engine_init(struct weft_engine *eng, const struct weft_engine_ops *ops);

/* Add a queue of @p total items to the phase being set up; returns its
 * index. @p peer -1: every item names its peer. */
int weft_engine_add_queue(struct weft_engine *eng, const struct weft_queue_ops *ops, int peer,
			  bool send, uint32_t total, uint32_t tag_base);

/* Add a queue whose items are given now (at most WEFT_ENGINE_LIST_MAX;
 * items with peer < 0 are left out; each carries its own tag step): a
 * step of a lockstep algorithm. */
int weft_engine_add_list(struct weft_engine *eng, bool send, const struct weft_xfer *items, int n);

/* A step of a lockstep algorithm (recursive doubling, Bruck,
 * dissemination), as the phase it is: up to WEFT_ENGINE_STEP_PIECES
 * receives and as many sends (peer < 0: none, on both sides), piece i
 * tagged step * WEFT_ENGINE_STEP_PIECES + i; receives queued first, so a
 * rendezvous sender finds them waiting. Every piece of a step completes
 * before the next step's begin (so a step may reuse memory the previous
 * one sent from). */
#define WEFT_ENGINE_STEP_PIECES 2

struct weft_step {
	struct weft_xfer recv[WEFT_ENGINE_STEP_PIECES];
	struct weft_xfer send[WEFT_ENGINE_STEP_PIECES];
};

/* An empty step: every piece's peer -1. */
void weft_step_clear(struct weft_step *st);

void weft_engine_add_step(struct weft_engine *eng, uint32_t step, const struct weft_step *st);

/* Begin the schedule (phase 0 through phase_begin when there is one). */
void weft_engine_start(struct weft_engine *eng, struct weft_task *task);

/* Post what can be posted, reap what finished, move through the phases.
 * Never blocks. WEFT_SUCCESS when the schedule is finished,
 * WEFT_INPROGRESS (task->waiting_for set), or the first failed message's
 * status. */
weft_status_t weft_engine_progress(struct weft_engine *eng, struct weft_task *task);

/* weft_engine_progress on the engine at the start of task->priv: the
 * progress function of every algorithm (struct weft_task_ops). */
weft_status_t weft_engine_task_progress(struct weft_task *task);

/* Should receives of this call write their destination with streaming
 * stores (reduce/stream.h)? When the output is larger than
 * comm->stream_min (WEFT_STREAM_MIN), twice that in place, where the
 * call's buffers would not stay in the cache anyway; for receives whose
 * data this rank does not send on: an algorithm sets struct
 * weft_xfer.stream where that holds. */
bool weft_engine_stream(const struct weft_task *task, size_t out_bytes);

/* Items of queue @p q completed so far (for readiness rules). */
static inline uint32_t weft_engine_done(const struct weft_engine *eng, int q)
{
	return eng->q[q].done;
}

/* A pipelined queue that forwards what queue @p q receives, @p lag items
 * behind (chunk c of ring step s goes on once chunk c of step s-1 has
 * arrived: lag = chunks per step): may item @p k be posted? */
static inline bool weft_engine_follows(const struct weft_engine *eng, int q, uint32_t k,
				       uint32_t lag)
{
	return k < lag || eng->q[q].done > k - lag;
}

/* Chunking shared by the pipelined algorithms: @p elems elements cut at the
 * communicator's chunk size into at least one chunk, chunks doubled until
 * there are at most @p max_chunks (the algorithm's tag steps must fit 32
 * bits). Returns the chunk count; *chunk_elems the chunk in elements. */
uint32_t weft_engine_chunks(const struct weft_task *task, size_t elems, uint64_t max_chunks,
			    size_t *chunk_elems);

/* Bytes [*off, *off + *len) of chunk @p chunk of the span of @p elems
 * elements starting at element @p first (*len 0 past its end). */
void weft_engine_chunk_span(const struct weft_task *task, size_t first, size_t elems,
			    size_t chunk_elems, uint32_t chunk, size_t *off, size_t *len);

#endif
