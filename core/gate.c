/* gate.c — see gate.h. */
#include "core/gate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "transports/common/tp_stubs.h"
#include "transports/transport.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/settings.h"

static bool open_admit(struct weft_gate *gate, const struct weft_p2p_link *link, size_t bytes)
{
	return true;
}

static bool one_admit(struct weft_gate *gate, const struct weft_p2p_link *link, size_t bytes)
{
	return link->inflight_msgs == 0;
}

static const struct weft_gate_ops gates[] = {
    {.name = "open", .admit = open_admit},
    {.name = "one", .admit = one_admit},
};

weft_status_t weft_gate_init(struct weft_gate *gate, struct weft_err *err)
{
	memset(gate, 0, sizeof(*gate));
	weft_status_t st = weft_pacer_params_read(&gate->pacer, err);
	if (st != WEFT_SUCCESS)
		return st;
	if (!weft_setting_double("WEFT_PACER_TICK", &gate->tick_s) || !(gate->tick_s >= 0))
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "WEFT_PACER_TICK=%s: expected seconds (0 or more)",
				    weft_setting_str("WEFT_PACER_TICK"));
	const char *name = weft_setting_str("WEFT_GATE");
	for (size_t i = 0; i < sizeof(gates) / sizeof(gates[0]); i++) {
		if (strcmp(gates[i].name, name) == 0) {
			gate->ops = &gates[i];
			return WEFT_SUCCESS;
		}
	}
	return weft_err_set(err, WEFT_ERR_INVALID_ARG, "WEFT_GATE=%s: expected open or one", name);
}

void weft_gate_fini(struct weft_gate *gate)
{
	free(gate->paced);
	gate->paced = NULL;
	gate->npaced = gate->cap = 0;
}

bool weft_gate_admit(struct weft_gate *gate, const struct weft_p2p_link *link, size_t bytes)
{
	if (!gate->ops->admit(gate, link, bytes))
		return false;
	return !link->paced ||
	       weft_pacer_admit(&link->pacer, link->inflight_bytes, bytes, weft_now());
}

void weft_gate_sent(struct weft_gate *gate, struct weft_p2p_link *link, size_t bytes)
{
	if (link->paced)
		weft_pacer_sent(&link->pacer, bytes, weft_now());
}

/* One read of the signals op: its deltas into @p sum (for the pacer) and
 * into the link's running sums. */
static void read_signals(struct weft_p2p_link *link, struct weft_pacer_signal *sum)
{
	struct weft_tp_signal sig[WEFT_GATE_MAX_SUBFLOWS];
	int n = link->conn->ops->signal.signals(link->conn, sig, WEFT_GATE_MAX_SUBFLOWS);
	struct weft_link_signals *acc = &link->sig;
	*sum = (struct weft_pacer_signal){0};
	uint64_t acked = 0, path = 0, rwnd = 0, retrans = 0;
	bool limited_by_network = false;
	for (int i = 0; i < n; i++) {
		sum->delivered += sig[i].delivered;
		sum->delivered_ce += sig[i].delivered_ce;
		if (sig[i].rtt_us > sum->rtt_us)
			sum->rtt_us = sig[i].rtt_us;
		sum->delivery_Bps += (double)sig[i].delivery_Bps;
		limited_by_network |= sig[i].delivery_Bps && !sig[i].app_limited;
		acked += sig[i].bytes_acked;
		uint32_t sent = sig[i].busy_us > sig[i].rwnd_limited_us
				    ? sig[i].busy_us - sig[i].rwnd_limited_us
				    : 0;
		if (sent > path) /* sub-flows run side by side: the longest is the path's time */
			path = sent;
		rwnd += sig[i].rwnd_limited_us;
		retrans += sig[i].retrans;
		weft_counter_add(&acc->sub_bytes[i], sig[i].bytes_acked);
	}
	/* A rate measured while every sub-flow ran out of data says what the
	 * application sent, not what the network took: unknown. */
	if (!limited_by_network)
		sum->delivery_Bps = 0;
	sum->idle = acked == 0 && link->inflight_bytes == 0 && !link->held_head;
	weft_counter_add(&acc->delivered, sum->delivered);
	weft_counter_add(&acc->delivered_ce, sum->delivered_ce);
	weft_counter_add(&acc->acked, acked);
	weft_counter_add(&acc->path_us, path);
	weft_counter_add(&acc->rwnd_us, rwnd);
	weft_counter_add(&acc->retrans, retrans);
	if (n > 0)
		atomic_store_explicit(&acc->rtt_us, sum->rtt_us, memory_order_relaxed);
	if ((unsigned)n > atomic_load_explicit(&acc->nsub, memory_order_relaxed))
		atomic_store_explicit(&acc->nsub, (unsigned)n, memory_order_relaxed);
}

void weft_gate_sample(struct weft_p2p_link *link)
{
	struct weft_pacer_signal sum;
	if (link->has_signals && !link->paced)
		read_signals(link, &sum);
}

weft_status_t weft_gate_attach(struct weft_gate *gate, struct weft_p2p_link *link,
			       struct weft_conn *conn, double line_Bps, struct weft_err *err)
{
	link->conn = conn;
	link->has_signals = conn->ops->signal.signals != weft_tp_no_signals;
	if (!link->has_signals || gate->pacer.mode == WEFT_PACER_OFF)
		return WEFT_SUCCESS;
	struct weft_tp_props props;
	conn->ops->prop.props(conn->tp, conn->peer, &props);
	if (props.rate_controlled)
		return WEFT_SUCCESS;
	if (gate->npaced == gate->cap) {
		size_t cap = gate->cap ? 2 * gate->cap : 8;
		struct weft_p2p_link **p = realloc(gate->paced, cap * sizeof(*p));
		if (!p)
			return weft_err_set(err, WEFT_ERR_NO_MEMORY, "gate: no memory for pacers");
		gate->paced = p;
		gate->cap = cap;
	}
	gate->paced[gate->npaced++] = link;
	link->paced = true;
	link->applied_Bps = 0;
	weft_pacer_init(&link->pacer, &gate->pacer, line_Bps, weft_now());
	/* Read the counters once, so that the first tick sees only what
	 * happened since: the handshake's segments are not feedback (the
	 * sums keep them, as an unpaced link's first read does). */
	struct weft_pacer_signal skip;
	read_signals(link, &skip);
	weft_log(WEFT_LOG_INFO, WEFT_SUB_PACE, "pacer %s on rank %d's connection, line %.0f MB/s",
		 weft_pacer_mode_name(gate->pacer.mode), conn->peer, line_Bps / 1e6);
	return WEFT_SUCCESS;
}

/* Hand the transport the rate when it moved by more than 1/16 or the
 * pacer started or stopped limiting. */
static void apply_rate(struct weft_p2p_link *link)
{
	double want = weft_pacer_limiting(&link->pacer) ? link->pacer.rc_Bps : 0;
	double have = link->applied_Bps;
	if (want == have || (want > 0 && have > 0 && fabs(want - have) < have / 16))
		return;
	link->applied_Bps = want;
	weft_counter_set(&link->rate_Bps, (uint64_t)want);
	link->conn->ops->signal.pace(link->conn, want);
	weft_log(WEFT_LOG_TRACE, WEFT_SUB_PACE,
		 "rank %d: rate %.1f MB/s (alpha %.3f, %llu cuts, %llu of %llu delivered marked)",
		 link->conn->peer, link->pacer.rc_Bps / 1e6, link->pacer.alpha,
		 (unsigned long long)link->pacer.cuts, (unsigned long long)link->pacer.marks,
		 (unsigned long long)link->pacer.delivered);
}

static void tick_link(struct weft_p2p_link *link, double now)
{
	struct weft_pacer_signal sum;
	read_signals(link, &sum);
	weft_pacer_feedback(&link->pacer, &sum, now);
	apply_rate(link);
}

void weft_gate_tick(struct weft_gate *gate)
{
	if (gate->npaced == 0)
		return;
	double now = weft_now();
	if (now < gate->next_tick)
		return;
	gate->next_tick = now + gate->tick_s;
	for (size_t i = 0; i < gate->npaced; i++)
		tick_link(gate->paced[i], now);
}
