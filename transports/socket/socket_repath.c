/*
 * socket_repath.c — moving a sub-flow off a path that is congested or
 * slow (WEFT_REPATH=stall+congestion), as Google's PLB does for a TCP
 * flow: by giving it a new source port, which ECMP hashes anew.
 *
 * Every ROUND_S, from TCP_INFO, each data socket's share of CE-marked
 * segments and its send rate over the round. A socket whose share stays
 * far above its siblings' (twice their median and 5 points more) for
 * ROUNDS rounds, or whose rate stays below half theirs while the network,
 * not Weft, limited it, is moved: it takes no new frames, and once what it
 * has is acknowledged (or after a bound), it is replaced in its slot like
 * a failed one — by the connector directly, by the acceptor's request. A
 * socket that moved stays where it went for HOLD_S (hysteresis: a fabric
 * where every path is marked should not have its flows hop for ever), and
 * one move at a time per connection.
 *
 * One sub-flow (WEFT_SOCKET_NSOCKS=1) has no siblings to compare with, so
 * the connector probes: every PROBE_EVERY_S while the network limits it,
 * it opens a second socket in the spare slot, on a new port; for PROBE_S
 * both carry the traffic (the faster takes more: a socket takes the next
 * fragment when its kernel has room), and then the slower, by the kernel's
 * delivery rate (probe_end), is closed and parked, unless the newcomer did
 * not beat the old by PROBE_WIN_RATE (a move must earn its disruption). The connector
 * alone probes; it sees both directions (bytes it sent acknowledged, bytes
 * it received) on each socket.
 */
#define _GNU_SOURCE
#include <linux/tcp.h>
#include <stdio.h>
#include <string.h>

#include "transports/socket/socket.h"
#include "util/clock.h"
#include "util/log.h"

#define ROUND_S		  0.1
#define ROUNDS		  3
#define HOLD_S		  2.0
#define HOT_EXTRA	  0.05
#define SLOW_RATIO	  0.5
#define MIN_SEGS	  100
#define PROBE_EVERY_S	  2.0
#define PROBE_S		  0.5
#define PROBE_MIN_SAMPLES 3
#define PROBE_WIN_RATE	  1.4
#define PROBE_WIN	  1.25
#define DRAIN_MIN_S	  0.2

static bool connector(const struct weft_sock_conn *c)
{
	return c->sc->base.env->rank < c->base.peer;
}

/* The other slot of a single sub-flow: 0 and the spare take turns. */
static unsigned twin(const struct weft_sock_conn *c, unsigned s)
{
	return s == 0 ? weft_sock_probe_slot(c->sc) : 0;
}

/* This round's figures for slot @p s. */
static void sample(struct weft_sock_conn *c, unsigned s, double dt)
{
	struct weft_sock *sk = &c->sock[s];
	struct weft_sock_health *h = &sk->h;
	struct tcp_info ti;
	if (c->sc->io->tcp_info(sk->fd, &ti) != 0)
		return;
	uint32_t d = ti.tcpi_delivered - h->delivered, ce = ti.tcpi_delivered_ce - h->delivered_ce;
	h->round_ce = d >= MIN_SEGS ? (double)ce / d : -1;
	h->round_Bps = (double)(ti.tcpi_bytes_acked - h->rate_bytes) / dt;
	h->round_busy = d >= MIN_SEGS && !ti.tcpi_delivery_rate_app_limited;
	if (c->probe >= 0 && c->probe_at > 0 && !ti.tcpi_delivery_rate_app_limited &&
	    ti.tcpi_delivery_rate > 0 && h->probe_nrate < WEFT_SOCK_PROBE_SAMPLES)
		h->probe_rate[h->probe_nrate++] = (double)ti.tcpi_delivery_rate;
	h->delivered = ti.tcpi_delivered;
	h->delivered_ce = ti.tcpi_delivered_ce;
	h->rate_bytes = ti.tcpi_bytes_acked;
	h->rx_bytes = ti.tcpi_bytes_received;
}

static double median(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The siblings' median CE share and rate (slot @p s left out); false if
 * none had traffic. */
static bool siblings(const struct weft_sock_conn *c, unsigned s, double *ce, double *rate)
{
	double a[WEFT_SOCK_MAX_NSOCKS], b[WEFT_SOCK_MAX_NSOCKS];
	int n = 0;
	for (unsigned t = 0; t < c->sc->nsocks; t++) {
		const struct weft_sock_health *h = &c->sock[t].h;
		if (t == s || !weft_tp_socket_usable(c, t) || h->round_ce < 0 || h->draining)
			continue;
		a[n] = h->round_ce;
		b[n++] = h->round_Bps;
	}
	if (n == 0)
		return false;
	*ce = median(a, n);
	*rate = median(b, n);
	return true;
}

static void move(struct weft_sock_conn *c, unsigned s, double now, const char *why)
{
	struct weft_sock *sk = &c->sock[s];
	sk->h.draining = true;
	sk->h.moved_at = now;
	c->st.repaths++;
	sk->h.repaths++;
	char name[32];
	weft_log(WEFT_LOG_INFO, WEFT_SUB_NET,
		 "socket: peer rank %d, %s (port %u): %s; moving it to a new port", c->base.peer,
		 weft_sock_slot_name(c->sc, s, name, sizeof(name)), sk->port, why);
}

/* A socket being moved has given back what it had (or took too long):
 * replace it. */
static void drained(struct weft_sock_conn *c, unsigned s, double now)
{
	struct weft_sock *sk = &c->sock[s];
	double bound = c->sc->stall_s > DRAIN_MIN_S / 4 ? 4 * c->sc->stall_s : DRAIN_MIN_S;
	bool empty = !sk->tx.sent.head;
	if (!empty && now - sk->h.moved_at < bound)
		return;
	if (connector(c)) {
		weft_tp_socket_move(c, s, empty ? "drained" : "not drained in time");
		return;
	}
	sk->h.draining = false; /* asked: the connector replaces it */
	weft_tp_socket_ctl(c, weft_sock_ctl_slot(c->sc), WEFT_SOCK_CTL_REPLACE, s, sk->gen,
			   WEFT_SOCK_REPLACE_NEW);
	sk->h.moved_at = now;
}

static void plb(struct weft_sock_conn *c, double now)
{
	for (unsigned s = 0; s < c->sc->nsocks; s++)
		if (c->sock[s].h.draining) {
			drained(c, s, now);
			return; /* one move at a time */
		}
	for (unsigned s = 0; s < c->sc->nsocks; s++) {
		struct weft_sock_health *h = &c->sock[s].h;
		double ce, rate;
		if (!weft_tp_socket_usable(c, s) || h->round_ce < 0 || !siblings(c, s, &ce, &rate))
			continue;
		bool hot = h->round_ce > 2 * ce && h->round_ce > ce + HOT_EXTRA;
		bool slow = h->round_busy && h->round_Bps < SLOW_RATIO * rate;
		h->hot_rounds = hot ? h->hot_rounds + 1 : 0;
		h->slow_rounds = slow ? h->slow_rounds + 1 : 0;
		if ((h->hot_rounds < ROUNDS && h->slow_rounds < ROUNDS) ||
		    now - h->moved_at < HOLD_S)
			continue;
		char why[128];
		if (h->hot_rounds >= ROUNDS)
			snprintf(why, sizeof(why),
				 "%.0f %% of its segments CE-marked against %.0f %%",
				 100 * h->round_ce, 100 * ce);
		else
			snprintf(why, sizeof(why), "%.1f MB/s against its siblings' %.1f MB/s",
				 h->round_Bps / 1e6, rate / 1e6);
		h->hot_rounds = h->slow_rounds = 0;
		move(c, s, now, why);
		return;
	}
}

void weft_tp_socket_repath_open(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock *sk = &c->sock[s];
	if (!sk->h.parked || !connector(c))
		return;
	sk->h.parked = false;
	sk->phase = WEFT_SOCK_IDLE;
	c->probe = (int)s;
	c->probe_at = 0;
	c->probed_at = weft_now();
	c->st.probes++;
}

/* Bytes both ways on slot @p s so far. */
static uint64_t carried(const struct weft_sock_conn *c, unsigned s)
{
	struct tcp_info ti;
	const struct weft_sock *sk = &c->sock[s];
	if (!weft_tp_socket_usable(c, s) || c->sc->io->tcp_info(sk->fd, &ti) != 0)
		return 0;
	return ti.tcpi_bytes_acked + ti.tcpi_bytes_received;
}

/* Slot @p s goes for good: the peer is told (it must not ask for a
 * replacement), its frames go to the other. */
static void park(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock *sk = &c->sock[s];
	weft_tp_socket_ctl(c, weft_sock_ctl_slot(c->sc), WEFT_SOCK_CTL_REPLACE, s, sk->gen,
			   WEFT_SOCK_REPLACE_PARK);
	weft_tp_socket_retire(c, s);
	sk->phase = WEFT_SOCK_IDLE;
	sk->h.parked = true;
}

/* The probe's window is over: keep the faster path. Bytes carried do not
 * tell: a collective's chunk completes with its slowest fragment, so the
 * two sockets take turns and carry about the same whatever their paths
 * (a sitting of bench_congestion --single: 1 move in 5 flows on the slow
 * spine). The kernel's delivery rate while the network, not Weft, limited
 * the socket does (the median of a sample a round; PROBE_WIN_RATE above
 * the old, as one sample is noisy: a 1.25 moved flows between equal
 * paths); the bytes decide only when either socket has too few. */
static void probe_end(struct weft_sock_conn *c, double now)
{
	unsigned p = (unsigned)c->probe, old = twin(c, p);
	uint64_t bp = carried(c, p) - c->sock[p].h.probe_bytes;
	uint64_t bo = carried(c, old) - c->sock[old].h.probe_bytes;
	struct weft_sock_health *hp = &c->sock[p].h, *ho = &c->sock[old].h;
	double rp =
	    hp->probe_nrate >= PROBE_MIN_SAMPLES ? median(hp->probe_rate, (int)hp->probe_nrate) : 0;
	double ro =
	    ho->probe_nrate >= PROBE_MIN_SAMPLES ? median(ho->probe_rate, (int)ho->probe_nrate) : 0;
	bool by_rate = rp > 0 && ro > 0;
	bool wins = by_rate ? rp > PROBE_WIN_RATE * ro : (double)bp > PROBE_WIN * (double)bo;
	weft_log(
	    WEFT_LOG_INFO, WEFT_SUB_NET,
	    "socket: peer rank %d: probe on port %u carried %.1f MB in %.2f s at a median %.1f "
	    "MB/s, port %u %.1f MB at %.1f MB/s: %s (by %s)",
	    c->base.peer, c->sock[p].port, bp / 1e6, now - c->probe_at, rp / 1e6, c->sock[old].port,
	    bo / 1e6, ro / 1e6, wins ? "moving to the probe's path" : "keeping the old path",
	    by_rate ? "delivery rate" : "bytes");
	if (wins) {
		c->st.repaths++;
		c->sock[p].h.moved_at = now;
	}
	park(c, wins ? old : p);
	c->probe = -1;
}

static void probe(struct weft_sock_conn *c, double now)
{
	if (c->probe >= 0) {
		if (c->probe_at > 0 && now - c->probe_at >= PROBE_S)
			probe_end(c, now);
		else if (c->probe_at == 0 && now - c->probed_at > 1.0) { /* it never came up */
			park(c, (unsigned)c->probe);
			c->probe = -1;
		}
		return;
	}
	unsigned on = weft_tp_socket_usable(c, 0) ? 0 : weft_sock_probe_slot(c->sc);
	const struct weft_sock_health *h = &c->sock[on].h;
	if (!connector(c) || !weft_tp_socket_usable(c, on) || !h->round_busy ||
	    now - c->probed_at < PROBE_EVERY_S || now - h->moved_at < HOLD_S)
		return;
	weft_tp_socket_repath_open(c, twin(c, on));
}

void weft_tp_socket_repath_up(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock_health *h = &c->sock[s].h;
	h->hot_rounds = h->slow_rounds = 0;
	h->draining = false;
	h->round_ce = -1;
	h->round_busy = false;
	h->delivered = h->delivered_ce = 0;
	h->rate_bytes = h->rx_bytes = 0;
	if (c->probe == (int)s && c->sc->nsocks == 1) {
		double now = weft_now();
		c->probe_at = now;
		c->sock[s].h.probe_bytes = 0;
		c->sock[twin(c, s)].h.probe_bytes = carried(c, twin(c, s));
		c->sock[s].h.probe_nrate = c->sock[twin(c, s)].h.probe_nrate = 0;
	}
}

void weft_tp_socket_repath_round(struct weft_sock_conn *c, double now)
{
	double dt = now - c->round_at;
	if (dt < ROUND_S)
		return;
	c->round_at = now;
	if (dt > 4 * ROUND_S) /* idle in between: the deltas span more than a round */
		dt = ROUND_S;
	for (unsigned s = 0; s < c->sc->nslots; s++)
		if (s != weft_sock_ctl_slot(c->sc) && weft_tp_socket_usable(c, s))
			sample(c, s, dt);
	if (c->sc->nsocks == 1)
		probe(c, now);
	else
		plb(c, now);
}
