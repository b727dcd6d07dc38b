/*
 * lockstep.h — the engine under the step-by-step algorithms (recursive
 * doubling and halving, Bruck, dissemination).
 *
 * An algorithm is a fixed sequence of steps, numbered the same on every
 * rank. At each step a rank posts at most WEFT_LOCKSTEP_MAX receives and as
 * many sends (to any peers; a step may move nothing), waits for all of
 * them, runs the step's hook, and goes on. Piece i of step s travels with
 * the tag (seq, s * WEFT_LOCKSTEP_MAX + i), so a sender and a receiver agree
 * when both number the step and cut the pieces the same way; pieces to one
 * peer are posted in index order on both sides. Waiting for the sends too
 * means a step may reuse the memory the previous step sent from.
 */
#ifndef WEFT_LOCKSTEP_H
#define WEFT_LOCKSTEP_H

#include <stdint.h>

#include "core/task.h"
#include "transports/transport.h"

#define WEFT_LOCKSTEP_MAX 2

/* One message of a step. peer -1: none (then nothing is posted, on both
 * sides); a zero length with a peer is posted (barriers). */
struct weft_xfer {
	int peer;
	void *buf;
	size_t len;
	weft_reduce_fn reduce; /* receive only: buf = reduce(local, incoming) */
	const void *local;
};

struct weft_lockstep_step {
	struct weft_xfer send[WEFT_LOCKSTEP_MAX];
	struct weft_xfer recv[WEFT_LOCKSTEP_MAX];
};

struct weft_lockstep_ops {
	/* What step @p step moves; @p out comes with every peer set to -1. */
	void (*plan)(struct weft_task *task, uint32_t step, struct weft_lockstep_step *out);
	/* Called once every message of @p step is done; may be NULL. */
	void (*step_done)(struct weft_task *task, uint32_t step);
};

struct weft_lockstep {
	const struct weft_lockstep_ops *ops;
	uint32_t nsteps, step;
	bool posted;
	uint32_t active; /* bit i: msgs[i] was posted and is not yet seen done */
	int peers[2 * WEFT_LOCKSTEP_MAX];
	struct weft_msg msgs[2 * WEFT_LOCKSTEP_MAX]; /* receives, then sends */
};

void weft_lockstep_init(struct weft_lockstep *ls, const struct weft_lockstep_ops *ops,
			uint32_t nsteps);

/* Post what can be posted, reap what finished, never block. WEFT_SUCCESS
 * once the last step is done, WEFT_INPROGRESS, or a failed message's status. */
weft_status_t weft_lockstep_progress(struct weft_lockstep *ls, struct weft_task *task);

#endif
