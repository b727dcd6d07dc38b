/*
 * gate.h — the pacing gate of the point-to-point layer.
 *
 * Every send to a peer passes the gate of its connection (a link) before
 * it reaches the transport. The link counts the bytes and messages it has
 * in flight (posted to the transport, not yet done), and the gate decides
 * whether the next send may go now; a send it holds back waits, in post
 * order, on the link until progress finds the gate open. This is the one
 * place where the bytes a connection puts on the wire can be limited, so
 * a test gate that admits one message at a time (WEFT_GATE=one) runs the
 * whole suite to show that nothing bypasses it. Receives are not gated:
 * the sender's gate paces the data.
 *
 * The congestion pacer (WEFT_PACER=dcqcn|delay, core/pace/pacer.h)
 * sits on the gate: each connection whose transport reports congestion
 * signals and does not pace itself in hardware gets a pacer, and a send
 * goes only if both the gate and the pacer admit it. The gate reads the
 * transports' signals every WEFT_PACER_TICK from progress (no thread),
 * feeds them to the pacer and hands the pacer's rate back to the
 * transport (the signals group's pace op). shm has no signals (nothing to
 * pace), ofi none yet; verbs is rate-controlled by the NIC.
 */
#ifndef WEFT_GATE_H
#define WEFT_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/pace/pacer.h"
#include "util/counter.h"
#include "util/error.h"

struct weft_msg;
struct weft_conn;

/* Sub-flows (a connection's TCP sockets) whose signals the gate reads. */
#define WEFT_GATE_MAX_SUBFLOWS 16

/* A connection's congestion signals, accumulated from the signals op's
 * deltas since the connection came up. The op hands each delta out once,
 * so the gate is its one reader: the pacer gets the deltas of each read,
 * and the statistics (core/stats.h), the metrics (health/metrics.h) and the
 * slow-link detector (health/slowdet.h) these sums. The thread that drives
 * the communicator writes them; the exporter and the watch read them
 * (util/counter.h). */
struct weft_link_signals {
	weft_counter_t delivered, delivered_ce; /* segments, of which CE-marked */
	_Atomic uint32_t rtt_us; /* the last read's (largest sub-flow's), 0 unknown */
	_Atomic unsigned nsub;	 /* sub-flows in the last read */
	weft_counter_t sub_bytes[WEFT_GATE_MAX_SUBFLOWS]; /* bytes acked per sub-flow */
	weft_counter_t acked;				  /* their sum */
	/* The path's time: at each read, the busiest sub-flow's time with data
	 * out less the time the receiver's window held it back (TCP_INFO's
	 * busy and rwnd-limited times), summed over the reads, so that
	 * acked / path_us is the path's rate whatever the sub-flows' number;
	 * the receiver-limited time summed over sub-flows; segments resent.
	 * 0 where the transport cannot tell. */
	weft_counter_t path_us, rwnd_us, retrans;
};

/* One connection's accounting. */
struct weft_p2p_link {
	int peer;
	size_t inflight_bytes;
	uint32_t inflight_msgs;
	weft_counter_t sent_bytes, sent_msgs;	/* admitted, cumulative */
	struct weft_msg *held_head, *held_tail; /* sends the gate holds, in post order */
	bool listed;				/* in the communicator's list of links that hold */
	struct weft_p2p_link *next_held;
	/* Set by weft_gate_attach: the connection, and whether its
	 * transport reports signals (then @sig accumulates them). */
	struct weft_conn *conn;
	bool has_signals;
	struct weft_link_signals sig;
	bool paced;
	double applied_Bps;	 /* the rate last handed to the transport */
	weft_counter_t rate_Bps; /* the same, for readers in other threads (0: not limiting) */
	struct weft_pacer pacer;
};

struct weft_gate;

struct weft_gate_ops {
	const char *name;
	/* May a send of @p bytes go on @p link now? */
	bool (*admit)(struct weft_gate *gate, const struct weft_p2p_link *link, size_t bytes);
};

struct weft_gate {
	const struct weft_gate_ops *ops;
	struct weft_pacer_params pacer; /* WEFT_PACER* */
	double tick_s, next_tick;
	struct weft_p2p_link **paced; /* links with a pacer */
	size_t npaced, cap;
};

/* WEFT_GATE: "open" (the default: admits everything) or "one" (one message
 * in flight per connection, for tests); and the WEFT_PACER* settings. An
 * unknown value is WEFT_ERR_INVALID_ARG naming it. */
weft_status_t weft_gate_init(struct weft_gate *gate, struct weft_err *err);

/* Free what attach allocated. */
void weft_gate_fini(struct weft_gate *gate);

/* May a send of @p bytes go on @p link now? The gate's rule and, on a
 * paced link, the pacer's. */
bool weft_gate_admit(struct weft_gate *gate, const struct weft_p2p_link *link, size_t bytes);

/* A send of @p bytes was posted on @p link (the pacer's release time and
 * byte counter). */
void weft_gate_sent(struct weft_gate *gate, struct weft_p2p_link *link, size_t bytes);

/* Tie @p link to @p conn, and give it a pacer if WEFT_PACER is on and the
 * transport reports signals and does not pace itself; @p line_Bps is the
 * connection's bandwidth (its transport's property). */
weft_status_t weft_gate_attach(struct weft_gate *gate, struct weft_p2p_link *link,
			       struct weft_conn *conn, double line_Bps, struct weft_err *err);

/* From progress: every WEFT_PACER_TICK, read each paced connection's
 * signals, feed its pacer, and hand a changed rate to the transport. */
void weft_gate_tick(struct weft_gate *gate);

/* Read an unpaced @p link's signals now into link->sig, for the
 * statistics (core/stats.h). A no-op without signals, and on a paced link:
 * its pacer's tick reads them (its sums are at most one tick old), and a
 * second reader would take deltas from the pacer. */
void weft_gate_sample(struct weft_p2p_link *link);

#endif
