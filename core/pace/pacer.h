/*
 * pacer.h — per-connection rate control on the pacing gate (core/gate.h).
 *
 * A pacer turns congestion feedback (struct weft_pacer_signal: CE marks and
 * RTT, as a transport's signals op reports them) into a sending rate, and
 * the rate into the two things the gate asks: may a chunk of B bytes go
 * now (a budget of bytes in flight, rate x WEFT_PACER_WINDOW), and when
 * may the next one go (release time: a chunk of B bytes at rate R holds
 * the next back for B / R). It never reads a clock, a socket or a setting
 * itself: the caller passes `now` and the feedback, so unit tests drive it
 * with a fake clock and synthetic signals, and its timers run from
 * whatever calls it (the progress loop), with no thread.
 *
 * Two controllers:
 *
 * dcqcn — the reaction point of DCQCN (Zhu et al., SIGCOMM 2015). Feedback
 *   with CE marks counts as one congestion notification (at most one per
 *   WEFT_PACER_CNP_INTERVAL, as a DCQCN notification point sends at most
 *   one CNP per interval): target rate R_T = R_C, R_C = R_C (1 - a/2).
 *   a is the EWMA (g = 1/256) of the marked fraction: once per
 *   WEFT_PACER_ALPHA_PERIOD that saw deliveries, a = (1 - g) a + g f, f
 *   the fraction of the period's delivered segments that were CE-marked
 *   (a period with none leaves a). DCQCN's own a takes one bit per
 *   period (a CNP or not), which suits a RED-like switch whose marking
 *   probability grows with its queue; a rate marker (the fabric here, and
 *   any switch that marks every packet above a threshold) marks in every
 *   period of even a small excess, where one bit would drive a to 1 and
 *   halve every cut, and the fraction measures the excess. After a cut, rate-increase events come
 * from a timer (WEFT_PACER_TIMER) and a byte counter (WEFT_PACER_BYTES sent); with T timer events
 * and BC byte events since the cut and F = WEFT_PACER_STAGES: while max(T, BC) < F, fast recovery
 *   R_C = (R_T + R_C) / 2; then additive increase R_T += R_AI, and once
 *   min(T, BC) >= F hyper increase R_T += i R_HAI (i = min(T, BC) - F + 1),
 *   each followed by R_C = (R_T + R_C) / 2. Rates stay within
 *   [WEFT_PACER_MIN_RATE, line rate]. As in DCQCN, a connection has no
 *   rate limiter until its first notification (alpha waits at 1, so the
 *   first cut halves), and loses it when it is back at line rate (the next
 *   congestion starts afresh).
 *
 *   Three changes carry DCQCN from a NIC's queue pair to a host transport
 *   (TCP), where the feedback comes an RTT late and the rate limiter is
 *   not what limits an unpaced flow:
 *   - the cut starts from the rate the connection's data was delivered
 *     at (the transport's measure, taken while it had more to send; the
 *     largest in the last WEFT_PACER_RATE_WINDOW RTTs, since one sample
 *     after a loss or a stall can be far below what the path carries)
 *     when that is below R_C. A NIC's unlimited flow sends at line rate, so
 *     there R_C is the sending rate; a TCP flow sends at what its window
 *     allows, often a small fraction of the line rate, and halving a
 *     nominal line rate would leave it unpaced (R_T = measured,
 *     R_C = R_T (1 - a/2));
 *   - at most one cut per max(CNP interval, RTT): the marks of the RTT
 *     after a cut were earned by the rate before it (TCP reduces once per
 *     window for the same reason), and rate-increase timer events come at
 *     most once per RTT, the soonest their effect can be seen;
 *   - increase beyond R_T is earned only while the connection has data in
 *     the network (feedback not idle): an idle connection's timer events
 *     only bring R_C back toward R_T, the rate the path took before the
 *     last cut, and count no stage, so the next collective's burst starts
 *     at that rate, not at line rate (as TCP does not grow an
 *     application-limited window, RFC 7661); and a sparse connection (a
 *     small AllReduce every 100 ms) is not left at the bottom of its last
 *     cuts, which one that earned nothing while idle would be.
 *
 * delay — for paths with no ECN signal, in the manner of Swift (Kumar et
 *   al., SIGCOMM 2020): target delay = base RTT (the smallest seen) +
 *   WEFT_PACER_HOPS x WEFT_PACER_HOP_DELAY. Below the target the rate grows
 *   by WEFT_PACER_DELAY_AI per RTT; above it, at most once per RTT, it is
 *   multiplied by max(1 - beta (rtt - target) / rtt, 1 - max_mdf), a
 *   decrease in proportion to the excess.
 *
 * A connection at its line rate (never cut, or recovered) is not held at
 * all: uncongested, a paced connection runs as an unpaced one.
 */
#ifndef WEFT_PACER_H
#define WEFT_PACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

enum weft_pacer_mode {
	WEFT_PACER_OFF = 0,
	WEFT_PACER_DCQCN,
	WEFT_PACER_DELAY,
};

/* Every constant, from the WEFT_PACER_* settings (weft_pacer_params_read). */
struct weft_pacer_params {
	enum weft_pacer_mode mode;
	double g;	       /* alpha's EWMA gain */
	double alpha_period_s; /* K: alpha takes one sample of the marked fraction per period */
	double timer_s;	       /* T: rate-increase timer */
	uint64_t byte_counter; /* B: rate-increase byte counter */
	int stages;	       /* F: fast-recovery stages */
	double rai_Bps;	       /* additive increase */
	double rhai_Bps;       /* hyper increase */
	double cnp_interval_s; /* at most one cut per interval */
	double min_rate_Bps;   /* floor */
	double start_rate_Bps; /* > 0: start here (dcqcn rises only after a cut) */
	double window_s;       /* bytes in flight: rate x window */
	double rate_window;    /* dcqcn: RTTs a delivery rate is remembered for */
	double hop_delay_s;    /* delay: allowance per hop */
	int hops;	       /* delay: hops on the path */
	double delay_ai_Bps;   /* delay: increase per RTT below target */
	double delay_beta;     /* delay: decrease per unit of relative excess */
	double delay_max_mdf;  /* delay: largest decrease at once */
};

/* Feedback since the previous call, summed over a connection's sub-flows. */
struct weft_pacer_signal {
	uint32_t delivered;    /* segments delivered */
	uint32_t delivered_ce; /* of which CE-marked */
	uint32_t rtt_us;       /* smoothed RTT (largest sub-flow's), 0 unknown */
	/* The rate the connection's data was delivered at while it had more
	 * to send (summed over sub-flows), bytes/s; 0 unknown. */
	double delivery_Bps;
	/* Nothing of the connection's was in the network: no increase beyond
	 * R_T is earned (pacer.h). */
	bool idle;
};

struct weft_pacer {
	const struct weft_pacer_params *p;
	double line_Bps;       /* the most the connection may send */
	double rc_Bps, rt_Bps; /* current and target rate */
	double alpha;
	double alpha_at, timer_at;	    /* when alpha and the timer last moved */
	uint64_t alpha_delivered, alpha_ce; /* alpha's period so far: segments, marked */
	double cut_at;			    /* last cut (dcqcn) or decrease (delay), < 0 none */
	uint64_t bytes;			    /* sent since the last byte-counter event */
	int t_events, bc_events;	    /* increase events since the last cut */
	double release_at;		    /* the next chunk may go at or after this */
	double base_rtt_s;		    /* delay: smallest RTT seen (0 none) */
	double rtt_s;			    /* last RTT sample (0 none) */
	double delivery_Bps;		    /* largest delivery rate in the window, 0 none */
	double delivery_at;		    /* when it was seen */
	/* Counters for logs and statistics. */
	uint64_t cuts, marks, delivered;
};

/* Read the WEFT_PACER* settings. A malformed value is
 * WEFT_ERR_INVALID_ARG naming it. */
weft_status_t weft_pacer_params_read(struct weft_pacer_params *p, struct weft_err *err);

/* The DCQCN paper's constants (and Swift's for delay), mode dcqcn: what
 * the settings default to, and what the unit tests start from. */
void weft_pacer_params_default(struct weft_pacer_params *p);

/* Start at @p line_Bps (the connection's line rate), alpha 1, uncut. */
void weft_pacer_init(struct weft_pacer *pc, const struct weft_pacer_params *p, double line_Bps,
		     double now);

/* Feedback (since the previous call) at @p now; runs the timers first. */
void weft_pacer_feedback(struct weft_pacer *pc, const struct weft_pacer_signal *sig, double now);

/* Run the rate-increase timer up to @p now, the connection busy. */
void weft_pacer_advance(struct weft_pacer *pc, double now);

/* A chunk of @p bytes went at @p now: the byte counter and release time. */
void weft_pacer_sent(struct weft_pacer *pc, size_t bytes, double now);

/* May a chunk of @p bytes go at @p now with @p inflight bytes in flight?
 * Always when nothing is in flight and the release time has come, so one
 * chunk larger than the budget still moves. */
bool weft_pacer_admit(const struct weft_pacer *pc, size_t inflight, size_t bytes, double now);

/* True while the pacer holds the connection below its line rate. */
bool weft_pacer_limiting(const struct weft_pacer *pc);

/* Bytes in flight the rate allows (rate x window). */
size_t weft_pacer_budget(const struct weft_pacer *pc);

/* "off", "dcqcn" or "delay". */
const char *weft_pacer_mode_name(enum weft_pacer_mode mode);

#endif
