/*
 * gate.h — the pacing gate of the point-to-point layer.
 *
 * Every send to a peer passes the gate of its connection (a link) before
 * it reaches the transport. The link counts the bytes and messages it has
 * in flight (posted to the transport, not yet done), and the gate decides
 * whether the next send may go now; a send it holds back waits, in post
 * order, on the link until progress finds the gate open. This is the one
 * place where the bytes a connection puts on the wire can be limited, so
 * a congestion pacer is a gate (transports/pace/, next), and a test gate
 * that admits one message at a time (WEFT_GATE=one) runs the whole suite to
 * show that nothing bypasses it. Receives are not gated: the sender's gate
 * paces the data.
 */
#ifndef WEFT_GATE_H
#define WEFT_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

struct weft_msg;

/* One connection's accounting. */
struct weft_p2p_link {
	int peer;
	size_t inflight_bytes;
	uint32_t inflight_msgs;
	uint64_t sent_bytes, sent_msgs;		/* admitted, cumulative */
	struct weft_msg *held_head, *held_tail; /* sends the gate holds, in post order */
	bool listed;				/* in the communicator's list of links that hold */
	struct weft_p2p_link *next_held;
};

struct weft_gate;

struct weft_gate_ops {
	const char *name;
	/* May a send of @p bytes go on @p link now? */
	bool (*admit)(struct weft_gate *gate, const struct weft_p2p_link *link, size_t bytes);
};

struct weft_gate {
	const struct weft_gate_ops *ops;
};

/* WEFT_GATE: "open" (the default: admits everything) or "one" (one message
 * in flight per connection, for tests). An unknown value is
 * WEFT_ERR_INVALID_ARG naming it. */
weft_status_t weft_gate_init(struct weft_gate *gate, struct weft_err *err);

#endif
