/*
 * verbs_lanes.c — the sub-flows of a verbs connection (verbs.h, "Lanes"):
 * WEFT_IB_QPS_PER_CONN QPs per peer, the lane each rendezvous data write
 * takes (WEFT_SPRAY), what each lane has in flight and has carried, and
 * the signals op, which reports the bytes per lane (the statistics'
 * sub-flows) and the port's congestion counters.
 *
 * Adaptive choice: pieces in proportion to each lane's drain rate, by
 * smooth weighted round robin (each pick adds every lane's weight, its
 * rate over the sum, to its credit; the lane with the most credit takes
 * the piece and gives back 1), so lanes of equal rate take turns and a
 * lane at a tenth of the others' rate takes a tenth of their share. Only
 * data writes count, in flight and as samples: lane 0's control writes
 * are a few bytes each, and their delay measures the per-write latency,
 * not the path's rate. The rate is the ratio of two EWMAs (gain
 * VERBS_LANE_GAIN, per completion): of the bytes completed, and of the
 * time the lane had data in flight since the completion before. A time per
 * write (post to completion) would count two completions read in one poll
 * as an infinitely fast drain, and windows cut at completions misplace the
 * time of the writes that straddle them; the ratio spreads both over the
 * last few completions. While data writes are in flight
 * the rate is also bounded by their bytes over the time the oldest has
 * waited (since its post, or the completion before it), so a lane
 * whose path stalls loses its share at once, not only when its write
 * completes. A lane not measured yet counts at the fastest rate measured
 * on the connection (the port's before any), so every lane is tried.
 *
 * Why not the lane that would finish a piece soonest (bytes in flight
 * plus the piece over its rate)? Where queues do not build (a fast path,
 * light load, the test double) every lane has nothing in flight, and that
 * rule hands every piece to whichever lane was measured fastest, by noise:
 * the lanes then share no path diversity. And a lane measured slow once
 * would get nothing again, to be re-measured only by a probe timer. Rate
 * proportions keep equal lanes equal and give a slow lane a trickle that
 * keeps its rate current.
 */
#include <stdio.h>
#include <string.h>

#include "transports/verbs/verbs.h"
#include "util/clock.h"
#include "util/settings.h"

/* What a write's op keeps for its completion (in op->prov, which verbs
 * leaves otherwise unused). */
struct verbs_op_ctx {
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
	return weft_tp_read_spray(env, "verbs", &tp->spray);
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

static bool has_room(const struct verbs_tp *tp, const struct verbs_lane *l)
{
	return l->sq_out + 1 < tp->sq_depth; /* else post_write would refuse it */
}

static unsigned pick_adaptive(struct verbs_conn *c)
{
	const struct verbs_tp *tp = c->tp;
	double now = weft_now(), fastest = 0, rate[VERBS_MAX_LANES], sum = 0;
	for (unsigned i = 0; i < tp->nlanes; i++)
		if (c->lane[i].rate_Bps > fastest)
			fastest = c->lane[i].rate_Bps;
	if (fastest == 0)
		fastest = tp->port_Bps > 0 ? tp->port_Bps : 1e9;
	for (unsigned i = 0; i < tp->nlanes; i++) {
		rate[i] = has_room(tp, &c->lane[i]) ? lane_rate(&c->lane[i], fastest, now) : 0;
		sum += rate[i];
	}
	if (!(sum > 0))
		return c->rr_next; /* none with room: the post waits for one (EAGAIN) */
	unsigned best = c->rr_next;
	double top = -1e300;
	/* From the lane after the last one chosen, so that ties rotate. */
	for (unsigned k = 0; k < tp->nlanes; k++) {
		unsigned i = (c->rr_next + k) % tp->nlanes;
		struct verbs_lane *l = &c->lane[i];
		if (rate[i] <= 0)
			continue;
		l->credit += rate[i] / sum;
		if (l->credit > top) {
			top = l->credit;
			best = i;
		}
	}
	/* Credits sum to about 0; lanes that were full for a while, or
	 * weights that moved, must not bank a burst. */
	struct verbs_lane *b = &c->lane[best];
	b->credit -= 1;
	if (b->credit < -VERBS_LANE_CREDIT_MAX)
		b->credit = -VERBS_LANE_CREDIT_MAX;
	for (unsigned i = 0; i < tp->nlanes; i++)
		if (c->lane[i].credit > VERBS_LANE_CREDIT_MAX)
			c->lane[i].credit = VERBS_LANE_CREDIT_MAX;
	return best;
}

unsigned weft_verbs_lane_pick(struct verbs_conn *c)
{
	unsigned lane = c->tp->spray == WEFT_SPRAY_ADAPTIVE ? pick_adaptive(c) : c->rr_next;
	return lane < c->tp->nlanes ? lane : 0;
}

static bool measuring(const struct verbs_conn *c)
{
	return c->tp->spray == WEFT_SPRAY_ADAPTIVE && c->tp->nlanes > 1;
}

/* The lane was busy (data in flight) since its last event: count it. */
static void busy_until(struct verbs_lane *l, double now)
{
	if (l->out_writes > 0 && now > l->busy_mark)
		l->busy += now - l->busy_mark;
	l->busy_mark = now;
}

void weft_verbs_lane_posted(struct verbs_conn *c, unsigned lane, struct weft_rma_op *op)
{
	struct verbs_lane *l = &c->lane[lane];
	struct verbs_op_ctx ctx = {.lane = lane};
	memcpy(op->prov, &ctx, sizeof(ctx));
	if (op->kind != WEFT_RMA_IMM_DATA)
		return;
	if (measuring(c)) {
		double now = weft_now();
		busy_until(l, now);
		if (l->out_writes == 0)
			l->head_since = now;
	}
	l->out_writes++;
	l->out_bytes += op->len;
	c->rr_next = (lane + 1) % c->tp->nlanes;
}

/* A data write of @p len bytes completed: a sample of bytes over the busy
 * time since the completion before. */
static void sample(struct verbs_lane *l, size_t len)
{
	l->acc_bytes += VERBS_LANE_GAIN * ((double)len - l->acc_bytes);
	l->acc_busy += VERBS_LANE_GAIN * (l->busy - l->acc_busy);
	l->busy = 0;
	if (l->acc_busy > 0)
		l->rate_Bps = l->acc_bytes / l->acc_busy;
}

unsigned weft_verbs_lane_done(struct verbs_conn *c, struct weft_rma_op *op, bool ok)
{
	struct verbs_op_ctx ctx;
	memcpy(&ctx, op->prov, sizeof(ctx));
	unsigned lane = ctx.lane < c->tp->nlanes ? ctx.lane : 0;
	struct verbs_lane *l = &c->lane[lane];
	if (ok)
		l->bytes += op->len;
	if (op->kind != WEFT_RMA_IMM_DATA)
		return lane;
	if (measuring(c)) {
		double now = weft_now();
		busy_until(l, now);
		l->head_since = now; /* the next write in flight drains from here */
		if (ok)
			sample(l, op->len);
	}
	l->out_writes--;
	l->out_bytes -= op->len;
	return lane;
}

void weft_verbs_lanes_describe(const struct verbs_tp *tp, char *buf, size_t len)
{
	if (tp->nlanes > 1)
		snprintf(buf, len, ", %u QPs, spray %s", tp->nlanes,
			 tp->spray == WEFT_SPRAY_ADAPTIVE ? "adaptive" : "rr");
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
