/*
 * verbs_lanes.c — the sub-flows of a verbs connection (verbs.h, "Lanes"):
 * WEFT_IB_QPS_PER_CONN QPs per peer, the lane each rendezvous data write
 * takes (WEFT_SPRAY), what each lane has in flight and has carried, and
 * the signals op, which reports the bytes per lane (the statistics'
 * sub-flows) and the port's congestion counters.
 *
 * Adaptive choice. A lane's cost for a piece of L bytes is the time it
 * would take to finish it: (bytes in flight there + L) / its drain rate.
 * The rate is an EWMA (gain VERBS_LANE_GAIN) of each completed write's
 * bytes over its drain time, from its post or, if it queued behind
 * another, from the previous completion on the lane (a QP completes in
 * order); while writes are in flight it is also bounded by their bytes
 * over the time the oldest has waited, so a lane whose path stalls looks
 * slow at once, not only when its write completes. A lane not measured yet
 * counts at the fastest rate measured on the connection (the port's rate
 * before any), so new lanes are tried. A lane that gets nothing (its rate
 * measured low once) would never be measured again: an idle lane not given
 * a piece for VERBS_LANE_PROBE_S takes the next one.
 */
#include <stdio.h>
#include <string.h>

#include "transports/verbs/verbs.h"
#include "util/clock.h"
#include "util/settings.h"

/* What a write's op keeps for its completion (in op->prov, which verbs
 * leaves otherwise unused). */
struct verbs_op_ctx {
	double posted;
	uint32_t lane;
};

_Static_assert(sizeof(struct verbs_op_ctx) <= sizeof(((struct weft_rma_op *)0)->prov),
	       "the lane's context fits the op's transport context");

weft_status_t weft_verbs_read_lanes(struct verbs_tp *tp)
{
	const struct weft_tp_env *env = tp->base.env;
	long k = 0;
	tp->nlanes = 1;
	if (!weft_setting_long("WEFT_IB_QPS_PER_CONN", &k) || k < 1 || k > VERBS_MAX_LANES)
		return weft_tp_fail(
		    env, WEFT_ERR_INVALID_ARG,
		    "verbs: WEFT_IB_QPS_PER_CONN=%s: expected an integer from 1 to %d",
		    weft_setting_str("WEFT_IB_QPS_PER_CONN"), VERBS_MAX_LANES);
	tp->nlanes = (unsigned)k;
	const char *spray = weft_setting_str("WEFT_SPRAY");
	if (strcmp(spray, "rr") == 0)
		tp->spray = VERBS_SPRAY_RR;
	else if (strcmp(spray, "adaptive") == 0)
		tp->spray = VERBS_SPRAY_ADAPTIVE;
	else
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "verbs: WEFT_SPRAY=%s: expected rr or adaptive", spray);
	return WEFT_SUCCESS;
}

/* The lane's drain rate as of @p now (see the top of the file). */
static double lane_rate(const struct verbs_lane *l, double fastest, double now)
{
	double r = l->rate_Bps > 0 ? l->rate_Bps : fastest;
	double waited = now - l->head_since;
	if (l->out_writes > 0 && waited > 0 && (double)l->out_bytes / waited < r)
		r = (double)l->out_bytes / waited;
	return r;
}

static unsigned pick_adaptive(struct verbs_conn *c, size_t len)
{
	const struct verbs_tp *tp = c->tp;
	double now = weft_now(), fastest = 0;
	for (unsigned i = 0; i < tp->nlanes; i++)
		if (c->lane[i].rate_Bps > fastest)
			fastest = c->lane[i].rate_Bps;
	if (fastest == 0)
		fastest = tp->port_Bps > 0 ? tp->port_Bps : 1e9;
	/* None with room: the post will wait for one (EAGAIN). */
	unsigned best = c->rr_next;
	double best_cost = -1;
	/* From the lane after the last one chosen, so that ties rotate. */
	for (unsigned k = 0; k < tp->nlanes; k++) {
		unsigned i = (c->rr_next + k) % tp->nlanes;
		const struct verbs_lane *l = &c->lane[i];
		if (l->sq_out + 1 >= tp->sq_depth)
			continue; /* full: post_write would refuse it */
		if (l->out_writes == 0 && now - l->last_pick > VERBS_LANE_PROBE_S)
			return i;
		double cost = ((double)l->out_bytes + (double)len) / lane_rate(l, fastest, now);
		if (best_cost < 0 || cost < best_cost) {
			best = i;
			best_cost = cost;
		}
	}
	return best;
}

unsigned weft_verbs_lane_pick(struct verbs_conn *c, size_t len)
{
	unsigned lane = c->tp->spray == VERBS_SPRAY_ADAPTIVE ? pick_adaptive(c, len) : c->rr_next;
	return lane < c->tp->nlanes ? lane : 0;
}

void weft_verbs_lane_posted(struct verbs_conn *c, unsigned lane, struct weft_rma_op *op)
{
	struct verbs_lane *l = &c->lane[lane];
	struct verbs_op_ctx ctx = {.lane = lane};
	bool adaptive = c->tp->spray == VERBS_SPRAY_ADAPTIVE && c->tp->nlanes > 1;
	if (adaptive)
		ctx.posted = weft_now();
	memcpy(op->prov, &ctx, sizeof(ctx));
	if (l->out_writes++ == 0)
		l->head_since = ctx.posted;
	l->out_bytes += op->len;
	if (op->kind == WEFT_RMA_IMM_DATA) {
		l->last_pick = ctx.posted;
		c->rr_next = (lane + 1) % c->tp->nlanes;
	}
}

unsigned weft_verbs_lane_done(struct verbs_conn *c, struct weft_rma_op *op, bool ok)
{
	struct verbs_op_ctx ctx;
	memcpy(&ctx, op->prov, sizeof(ctx));
	struct verbs_lane *l = &c->lane[ctx.lane < c->tp->nlanes ? ctx.lane : 0];
	l->out_writes--;
	l->out_bytes -= op->len;
	if (!ok)
		return ctx.lane;
	l->bytes += op->len;
	if (c->tp->spray != VERBS_SPRAY_ADAPTIVE || c->tp->nlanes == 1)
		return ctx.lane;
	/* Its drain began at its post, or at the completion before it. */
	double now = weft_now();
	double began = ctx.posted > l->head_since ? ctx.posted : l->head_since;
	if (op->len > 0 && now > began) {
		double sample = (double)op->len / (now - began);
		l->rate_Bps = l->rate_Bps > 0
				  ? l->rate_Bps + VERBS_LANE_GAIN * (sample - l->rate_Bps)
				  : sample;
	}
	l->head_since = now;
	return ctx.lane;
}

void weft_verbs_lanes_describe(const struct verbs_tp *tp, char *buf, size_t len)
{
	if (tp->nlanes > 1)
		snprintf(buf, len, ", %u QPs, spray %s", tp->nlanes,
			 tp->spray == VERBS_SPRAY_ADAPTIVE ? "adaptive" : "rr");
	else if (len > 0)
		buf[0] = '\0';
}

/* The port's counter deltas since this connection's last query, into
 * @p out: every QP of the port shares the counters, so each connection
 * sees the port's marked fraction (CNPs per packet sent), which is what a
 * rate controller of the port's traffic needs; the counts themselves are
 * the port's. */
static void port_deltas(struct verbs_conn *c, struct weft_tp_signal *out)
{
	struct weft_verbs_sample s;
	if (!weft_verbs_counters_read(&c->tp->counters, &s))
		return;
	uint64_t tx = s.tx_packets - c->seen_tx, ce = s.cnp_handled - c->seen_ce;
	if (s.tx_packets < c->seen_tx || s.cnp_handled < c->seen_ce)
		tx = ce = 0; /* the counters were reset */
	out->delivered = tx > UINT32_MAX ? UINT32_MAX : (uint32_t)tx;
	out->delivered_ce = (uint32_t)(ce < tx ? ce : tx);
	c->seen_tx = s.tx_packets;
	c->seen_ce = s.cnp_handled;
}

/* One signal per lane: the bytes its writes completed since the last
 * query; the port's counters (where it has them) in the first. */
int weft_tp_verbs_signals(struct weft_conn *conn, struct weft_tp_signal *out, int max)
{
	struct verbs_conn *c = weft_container_of(conn, struct verbs_conn, base);
	int n = (int)c->tp->nlanes < max ? (int)c->tp->nlanes : max;
	for (int i = 0; i < n; i++) {
		struct verbs_lane *l = &c->lane[i];
		out[i] = (struct weft_tp_signal){.bytes_acked = l->bytes - l->seen_bytes};
		l->seen_bytes = l->bytes;
	}
	if (n > 0)
		port_deltas(c, &out[0]);
	return n;
}
