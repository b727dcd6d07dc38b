/*
 * socket_path.c — keeping a connection's paths (WEFT_REPATH on): when a
 * sub-flow has stalled, failing it over to its siblings and replacing it
 * with a socket on a new source port (a new ECMP path); control frames;
 * a socket the peer closed; a peer that is gone; and the flush at the end.
 *
 * A stall is the kernel's to see. A busy receiver (computing, its progress
 * not running) acknowledges nothing at Weft's level, but its kernel still
 * acknowledges TCP segments, so a sub-flow is stalled when TCP_INFO shows
 * data in flight (tcpi_unacked) while tcpi_bytes_acked has not moved and
 * no acknowledgement of any kind has come (tcpi_last_ack_recv) for
 * WEFT_PATH_STALL. Its default is four of the sub-flow's smoothed RTTs
 * (measured while it was healthy: a queue at a congested link grows the
 * RTT, not the gaps between acknowledgements), at least 50 ms: below that
 * a scheduler hiccup on a busy host looks like a dead path. With one
 * segment in flight, or less than two segments' bytes, the peer's kernel
 * may delay its acknowledgement (up to 200 ms in Linux), so then the
 * bound is 250 ms. A receive window at zero
 * is back-pressure, not a dead path: the peer's kernel answers the window
 * probes, tcpi_last_ack_recv stays recent, and nothing is in flight.
 * The checks run from progress, every 16 calls at most once per
 * WEFT_SOCK_CHECK_S (the clock is read only then).
 *
 * Failing over slot s: its unacknowledged frames go to the connection's
 * resend list, which the healthy sockets write before anything new of a
 * later message (and never behind a later message's frame: socket_tx.c);
 * its socket is closed. The connector (the lower rank) then connects a new one
 * in the slot, one generation up (socket_conn.c), trying new sockets (new
 * ports) until one gets through; the acceptor asks the connector for it
 * (CTL_REPLACE on a healthy socket, or, with every path dark, a call to
 * its listener on a new connection: socket_lazy.c). A socket the peer
 * closed without saying BYE is failed over the same way; a peer that is
 * gone shows when a new connection to its listener is refused. A peer dark
 * on every path and silent on the watch for WEFT_PEER_DEAD (asked there and
 * not answering: env->peer_silence) is declared failed: the connection
 * fails naming it, each sub-flow, the sockets tried and how long each was
 * dark.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "transports/socket/socket.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/proc.h"

/* tcpi_state of an established connection (the kernel's net/tcp_states.h;
 * <netinet/tcp.h>, which names it, clashes with <linux/tcp.h>). */
#define SOCK_TCP_ESTABLISHED 1

#define CHECK_POLLS	    16
#define WEFT_SOCK_CHECK_S   2e-3
#define STALL_FLOOR_S	    50e-3
#define STALL_ONE_SEGMENT_S 0.25
#define STALL_RTTS	    4
#define ASK_AGAIN_MIN_S	    50e-3
#define PROBE_QUIET_S	    0.25

bool weft_tp_socket_usable(const struct weft_sock_conn *c, unsigned s)
{
	return c->sock[s].phase == WEFT_SOCK_UP && c->sock[s].fd >= 0;
}

static bool connector(const struct weft_sock_conn *c)
{
	return c->sc->base.env->rank < c->base.peer;
}

/* Slots that carry data: the data sockets and the probe. */
static bool data_slot(const struct weft_sock_comm *sc, unsigned s)
{
	return s != weft_sock_ctl_slot(sc);
}

/* May the peer's kernel be delaying its acknowledgement of what @p ti has
 * in flight? Linux acknowledges at once only when more than a full
 * segment has come since its last acknowledgement (or out of order, or in
 * quick-ack mode); less waits for the delayed-ACK timer, 40 to 200 ms.
 * Small frames are exactly that: on loopback (64 KiB segments) every
 * AllGather of 7 elements left 2-5 small segments unacknowledged for
 * 50-130 ms, which the 50 ms floor took for a dead path (about 150
 * failovers in one run of integration/allgather). One segment, or
 * (kernels that say) less than two segments' bytes. */
static bool ack_may_be_delayed(const struct tcp_info *ti)
{
	if (ti->tcpi_unacked < 2)
		return true;
	uint64_t sent = ti->tcpi_bytes_sent - ti->tcpi_bytes_retrans;
	if (!ti->tcpi_snd_mss || ti->tcpi_bytes_sent < ti->tcpi_bytes_retrans ||
	    sent < ti->tcpi_bytes_acked)
		return false; /* not told */
	return sent - ti->tcpi_bytes_acked < 2ull * ti->tcpi_snd_mss;
}

/* Seconds slot @p s may go without an acknowledgement with @p ti in flight. */
static double stall_limit(const struct weft_sock_conn *c, const struct weft_sock *sk,
			  const struct tcp_info *ti)
{
	double lim = c->sc->stall_s;
	if (lim <= 0) {
		lim = STALL_RTTS * sk->h.srtt_us * 1e-6;
		lim = lim > STALL_FLOOR_S ? lim : STALL_FLOOR_S;
	}
	if (lim < STALL_ONE_SEGMENT_S && ack_may_be_delayed(ti))
		lim = STALL_ONE_SEGMENT_S;
	return lim;
}

/* The frame slot @p s was reading is lost with its socket: what it
 * delivered is remembered, so that the resent copy starts after it. */
static void orphan_rx(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock *sk = &c->sock[s];
	struct weft_sock_rx *rx = &sk->rx;
	if (rx->in_frame && !rx->discard && rx->req) {
		size_t mine = rx->got - (rx->req->base.msg->reduce ? sk->bounce.have : 0);
		size_t done = mine > rx->skip ? mine : rx->skip;
		for (unsigned k = 0; done && k < WEFT_SOCK_ORPHANS; k++)
			if (!c->orphans[k].req) {
				c->orphans[k] = (struct weft_sock_orphan){rx->req, rx->chunk, done};
				break;
			}
	}
	rx->in_frame = rx->discard = false;
	rx->req = NULL;
	rx->pos = rx->len = 0;
	rx->got = rx->skip = 0;
	/* Its count goes with the socket: acknowledged against the next one's
	 * frames it would acknowledge frames never read. */
	rx->frames = 0;
	sk->bounce.have = 0;
}

static void ask_replacement(struct weft_sock_conn *c, unsigned s, double now);

unsigned weft_tp_socket_retire(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock *sk = &c->sock[s];
	unsigned frames = sk->tx.sent.n;
	weft_tp_socket_sent_requeue(c, s);
	orphan_rx(c, s);
	weft_tp_socket_close_fd(c, s);
	sk->tx.ctl_want = 0;
	sk->tx.ctl_len = sk->tx.ctl_done = 0;
	sk->h.draining = false;
	c->st.resent += frames;
	return frames;
}

/* Slot @p s's socket goes and a new one is to take its place: a failover
 * (@p moved false) or a re-path. */
static void renew(struct weft_sock_conn *c, unsigned s, const char *why, bool moved)
{
	struct weft_sock *sk = &c->sock[s];
	if (sk->phase != WEFT_SOCK_UP)
		return;
	double now = weft_now();
	unsigned frames = weft_tp_socket_retire(c, s);
	sk->h.dark_since = now;
	sk->h.old_port = sk->port;
	sk->h.tried = 0;
	if (!moved) {
		sk->h.failovers++;
		c->st.failovers++;
	}
	char name[32];
	weft_log(WEFT_LOG_INFO, WEFT_SUB_NET,
		 "socket: peer rank %d, %s (port %u) %s: %s; %u frame%s sent again on the others",
		 c->base.peer, weft_sock_slot_name(c->sc, s, name, sizeof(name)), sk->port,
		 moved ? "moves" : "failed over", why, frames, frames == 1 ? "" : "s");
	sk->phase = connector(c) ? WEFT_SOCK_IDLE : WEFT_SOCK_DOWN;
	if (!connector(c))
		ask_replacement(c, s, now);
}

void weft_tp_socket_failover(struct weft_sock_conn *c, unsigned s, const char *why)
{
	renew(c, s, why, false);
}

void weft_tp_socket_move(struct weft_sock_conn *c, unsigned s, const char *why)
{
	renew(c, s, why, true);
}

/* The acceptor: ask the connector for a new socket in slot @p s, on a
 * healthy socket (the control one first), else by a call. */
static void ask_replacement(struct weft_sock_conn *c, unsigned s, double now)
{
	const struct weft_sock_comm *sc = c->sc;
	struct weft_sock *sk = &c->sock[s];
	sk->h.asked_at = now;
	unsigned ctl = weft_sock_ctl_slot(sc);
	int via = weft_tp_socket_usable(c, ctl) ? (int)ctl : -1;
	for (unsigned t = 0; via < 0 && t < sc->nslots; t++)
		if (t != s && weft_tp_socket_usable(c, t))
			via = (int)t;
	if (via >= 0) {
		weft_tp_socket_ctl(c, (unsigned)via, WEFT_SOCK_CTL_REPLACE, s, sk->gen,
				   WEFT_SOCK_REPLACE_NEW);
		return;
	}
	c->repath_mask |= 1u << s;
}

/* A rank that only waits for its peer has nothing in flight, so its
 * kernel has nothing to see stalled: with every path dark (the peer's
 * sends and its requests for new sockets all lost) it would wait for
 * WEFT_TIMEOUT and name no path. It waits so when a receive waits, and
 * also when a send waits only for the peer's acknowledgements (its
 * fragments written and acknowledged by the peer's kernel just before
 * the paths went dark: its request for them, CTL_ACKNOW, goes on one
 * socket, and once that one is failed over the others would carry
 * nothing; on the fabric about one run in 14 of test_failover's "dead"
 * step failed so at WEFT_TIMEOUT, unit/transports/failover sender_dark).
 * So while something waits on the peer and slot @p s has neither sent nor
 * received anything for PROBE_QUIET_S (and not probed since), it writes a
 * control frame (its acknowledgements, useful anyway): the peer's kernel
 * acknowledges it even while the peer computes, and a dark path leaves it
 * unacknowledged, which the check below sees as a stall (the bound for
 * one segment, 250 ms). A long wait on a live peer costs one small frame
 * per socket every PROBE_QUIET_S. */
static void probe_quiet(struct weft_sock_conn *c, unsigned s, const struct tcp_info *ti, double now)
{
	struct weft_sock_health *h = &c->sock[s].h;
	bool waits = c->recvq.q.head || c->waiting > 0 || c->resend.head;
	if (!waits || ti->tcpi_unacked || weft_tp_socket_tx_busy(c, s) ||
	    ti->tcpi_last_data_recv < PROBE_QUIET_S * 1e3 ||
	    ti->tcpi_last_data_sent < PROBE_QUIET_S * 1e3 || now - h->probed_at < PROBE_QUIET_S)
		return;
	h->probed_at = now;
	weft_tp_socket_ctl(c, s, WEFT_SOCK_CTL_ACK, 0, 0, 0);
}

/* One look at slot @p s's kernel: stalled? */
static void check_slot(struct weft_sock_conn *c, unsigned s, double now)
{
	struct weft_sock *sk = &c->sock[s];
	struct tcp_info ti;
	if (c->sc->io->tcp_info(sk->fd, &ti) != 0)
		return;
	probe_quiet(c, s, &ti, now);
	struct weft_sock_health *h = &sk->h;
	/* Nothing was in flight at the last check: what is now was sent since,
	 * so its clock starts now, not at that check (which may be long ago:
	 * a connection is checked only while it is busy, and a rank between
	 * operations checks none; an idle second then read as a stall the
	 * moment a small message went out: 'no acknowledgement for 639 ms'). */
	bool was_idle = h->idle;
	h->idle = ti.tcpi_unacked == 0;
	if (ti.tcpi_bytes_acked != h->acked || ti.tcpi_unacked == 0 || was_idle) {
		h->acked = ti.tcpi_bytes_acked;
		h->progress_at = now;
		if (ti.tcpi_rtt)
			h->srtt_us = ti.tcpi_rtt;
		return;
	}
	double lim = stall_limit(c, sk, &ti);
	if (now - h->progress_at <= lim || ti.tcpi_last_ack_recv < lim * 1e3)
		return;
	char why[96];
	snprintf(why, sizeof(why), "no acknowledgement for %.0f ms with %u segment%s in flight",
		 (now - h->progress_at) * 1e3, ti.tcpi_unacked, ti.tcpi_unacked == 1 ? "" : "s");
	h->gone_at = h->progress_at;
	weft_tp_socket_failover(c, s, why);
}

/* Slots waiting for their replacement: the connector connects (every
 * call), the acceptor asks again now and then. */
static weft_status_t move_slots(struct weft_sock_conn *c, double now)
{
	const struct weft_sock_comm *sc = c->sc;
	double again = sc->stall_s > ASK_AGAIN_MIN_S ? sc->stall_s : ASK_AGAIN_MIN_S;
	for (unsigned s = 0; s < sc->nslots; s++) {
		struct weft_sock *sk = &c->sock[s];
		if (sk->h.parked || sk->phase == WEFT_SOCK_UP)
			continue;
		if (connector(c)) {
			weft_status_t st = weft_tp_socket_slot_step(c, s);
			if (st < 0)
				return st;
		} else if (sk->phase == WEFT_SOCK_DOWN && now - sk->h.asked_at > again) {
			ask_replacement(c, s, now);
		}
	}
	return c->repath_mask ? weft_tp_socket_repath_call(c) : WEFT_SUCCESS;
}

/* Is any data slot up? */
static bool lit(const struct weft_sock_conn *c)
{
	for (unsigned s = 0; s < c->sc->nslots; s++)
		if (data_slot(c->sc, s) && weft_tp_socket_usable(c, s))
			return true;
	return false;
}

void weft_tp_socket_dark_note(const struct weft_sock_conn *c, char *buf, size_t len)
{
	double now = weft_now();
	size_t n = 0;
	buf[0] = '\0';
	for (unsigned s = 0; s < c->sc->nslots && n < len; s++) {
		const struct weft_sock *sk = &c->sock[s];
		if (sk->h.parked || sk->phase == WEFT_SOCK_UP || !sk->h.dark_since)
			continue;
		double since = sk->h.gone_at > 0 ? sk->h.gone_at : sk->h.dark_since;
		char name[32];
		int w =
		    snprintf(buf + n, len - n, "%s%s dark %.1f s (port %u, %u new socket%s tried)",
			     n ? "; " : "", weft_sock_slot_name(c->sc, s, name, sizeof(name)),
			     now - since, sk->h.old_port, sk->h.tried, sk->h.tried == 1 ? "" : "s");
		if (w < 0)
			break;
		n += (size_t)w;
	}
}

/* Every path dark for WEFT_PEER_DEAD, and the watch has asked the peer
 * for as long and heard nothing: it is declared failed. The watch is asked
 * from the moment the last path goes dark (it counts silence from its
 * first unanswered question), so both bounds run together. A peer the
 * watch still hears is alive and cut off from this rank's data paths
 * only: the connection keeps trying new sockets, and an operation waiting
 * on it fails at WEFT_TIMEOUT (its verdict says the peer answers). */
static weft_status_t dark_check(struct weft_sock_conn *c, double now)
{
	const struct weft_sock_comm *sc = c->sc;
	const struct weft_tp_env *env = sc->base.env;
	if (lit(c)) {
		c->dark_since = 0;
		c->dark_heard = false;
		return WEFT_SUCCESS;
	}
	if (c->dark_since == 0)
		c->dark_since = now;
	double silent = env->peer_silence ? env->peer_silence(env->ctx, c->base.peer) : -1;
	if (now - c->dark_since < sc->peer_dead_s)
		return WEFT_SUCCESS;
	if (silent >= 0 && silent < sc->peer_dead_s) {
		if (!c->dark_heard) /* once per dark spell */
			weft_log(WEFT_LOG_WARN, WEFT_SUB_NET,
				 "socket: peer rank %d: every path to it dark for %.1f s, but it "
				 "answers on the watch: still trying new sockets",
				 c->base.peer, now - c->dark_since);
		c->dark_heard = true;
		return WEFT_SUCCESS; /* the watch hears it: a path may still come back */
	}
	char note[512], watch[96] = "no watch to ask";
	weft_tp_socket_dark_note(c, note, sizeof(note));
	if (silent >= 0)
		snprintf(watch, sizeof(watch), "no answer from it on the watch for %.1f s", silent);
	if (env->peer_gone) /* weft_comm_failed_ranks names it, a shrink leaves it out */
		env->peer_gone(env->ctx, c->base.peer, WEFT_RANK_UNREACHABLE);
	weft_status_t st = weft_tp_fail(
	    env, WEFT_ERR_REMOTE,
	    "socket: peer rank %d (%s) is unreachable: every path to it "
	    "dark for %.1f s (%s), %s",
	    c->base.peer, env->peers[c->base.peer].hostname, now - c->dark_since, note, watch);
	weft_tp_socket_conn_fail(c, st);
	return st;
}

weft_status_t weft_tp_socket_health(struct weft_sock_conn *c)
{
	const struct weft_sock_comm *sc = c->sc;
	bool moving = !lit(c) || c->repath_mask;
	for (unsigned s = 0; !moving && s < sc->nslots; s++)
		moving = !c->sock[s].h.parked && c->sock[s].phase != WEFT_SOCK_UP;
	weft_status_t st = WEFT_SUCCESS;
	if (moving) /* rare: the clock is read every call meanwhile */
		st = move_slots(c, weft_now());
	if (st != WEFT_SUCCESS || c->failed || ++c->checks % CHECK_POLLS != 0)
		return st;
	double now = weft_now();
	if (now < c->next_check)
		return WEFT_SUCCESS;
	c->next_check = now + WEFT_SOCK_CHECK_S;
	/* A send waits, or a frame to write again may wait for a socket whose
	 * frames are acknowledged (socket_tx.c), and nothing was acknowledged
	 * since the last check: ask (a safety net; the peer acknowledges at
	 * once what a sender waits for). */
	if ((c->waiting > 0 || c->resend.head) && c->acks_seen == c->acks_at_check)
		c->ack_asked = true;
	c->acks_at_check = c->acks_seen;
	/* Acknowledgements owed since the last check and carried by nothing
	 * since (no traffic back, fewer than a batch): sent now, so that the
	 * peer's replay ring and records do not stay held by a last message. */
	if (c->ack_owed && c->ack_stale)
		c->ack_urgent = true;
	c->ack_stale = c->ack_owed;
	for (unsigned s = 0; s < sc->nslots && !c->failed; s++)
		if (weft_tp_socket_usable(c, s))
			check_slot(c, s, now);
	if (sc->repath == WEFT_SOCK_REPATH_STALL_CONGESTION)
		weft_tp_socket_repath_round(c, now);
	return c->failed ? c->failed : dark_check(c, now);
}

/* CTL_REPLACE: the acceptor asks the connector for a new socket in
 * @p slot (its socket of generation @p gen) or to open the parked one; the
 * connector tells the acceptor it parks @p slot. */
static void replace_asked(struct weft_sock_conn *c, unsigned slot, uint32_t gen,
			  enum weft_sock_replace_action what)
{
	struct weft_sock *sk = &c->sock[slot];
	if (connector(c) && what == WEFT_SOCK_REPLACE_OPEN)
		weft_tp_socket_repath_open(c, slot);
	else if (connector(c) && what == WEFT_SOCK_REPLACE_NEW && sk->gen == gen &&
		 sk->phase == WEFT_SOCK_UP)
		weft_tp_socket_failover(c, slot, "the peer asked for a new socket");
	else if (!connector(c) && what == WEFT_SOCK_REPLACE_PARK && sk->gen == gen) {
		if (sk->phase == WEFT_SOCK_UP) {
			sk->h.parked_pending = true; /* parked once its end closes */
			return;
		}
		sk->phase = WEFT_SOCK_IDLE;
		sk->h.parked = true;
		sk->h.dark_since = 0;
	}
}

/* What is wrong with control frame @p h, into @p why (false: nothing). A
 * CTL_REPLACE names a slot of the connection, a generation (32 bits) and
 * an action the side that sends it may ask for: a new socket or the probe
 * opened from the acceptor, a slot parked from the connector. The other
 * kinds take no arguments. */
static bool ctl_problem(const struct weft_sock_conn *c, const struct weft_sock_frame *h, char *why,
			size_t len)
{
	const unsigned nslots = c->sc->nslots;
	switch (h->seq) {
	case WEFT_SOCK_CTL_ACK:
	case WEFT_SOCK_CTL_ACKNOW:
	case WEFT_SOCK_CTL_BYE:
		if (!h->off && !h->len && !h->tag)
			return false;
		snprintf(why, len, "a control frame (kind %llu) with arguments it does not take",
			 (unsigned long long)h->seq);
		return true;
	case WEFT_SOCK_CTL_REPLACE:
		if (h->off >= nslots || h->len > UINT32_MAX)
			snprintf(why, len, "a request for socket %llu generation %llu (it has %u)",
				 (unsigned long long)h->off, (unsigned long long)h->len, nslots);
		else if (h->tag > WEFT_SOCK_REPLACE_PARK)
			snprintf(why, len, "a request with an unknown action %llu",
				 (unsigned long long)h->tag);
		else if ((h->tag == WEFT_SOCK_REPLACE_PARK) == connector(c))
			snprintf(why, len, "a request to %s, which only the %s sends",
				 h->tag == WEFT_SOCK_REPLACE_PARK ? "park a socket"
								  : "replace or open a socket",
				 connector(c) ? "connector" : "acceptor");
		else
			return false;
		return true;
	default:
		snprintf(why, len, "an unknown control frame (kind %llu)",
			 (unsigned long long)h->seq);
		return true;
	}
}

weft_status_t weft_tp_socket_on_ctl(struct weft_sock_conn *c, unsigned s,
				    const struct weft_sock_frame *h)
{
	char why[160];
	if (ctl_problem(c, h, why, sizeof(why))) {
		weft_status_t st =
		    weft_tp_fail(c->sc->base.env, WEFT_ERR_REMOTE,
				 "peer rank %d sent %s (socket %u)", c->base.peer, why, s);
		weft_tp_socket_conn_fail(c, WEFT_ERR_REMOTE);
		return st;
	}
	switch (h->seq) {
	case WEFT_SOCK_CTL_ACKNOW: c->ack_owed = c->ack_urgent = true; break;
	case WEFT_SOCK_CTL_BYE:
		/* The peer is closing: it sends nothing more here, and what it
		 * had of ours it has (its operations are over). */
		c->peer_bye = true;
		c->sock[s].eof = true;
		for (unsigned i = 0; i < c->sc->nslots; i++)
			weft_tp_socket_acked(c, i, c->sock[i].gen, UINT32_MAX);
		break;
	case WEFT_SOCK_CTL_REPLACE:
		replace_asked(c, (unsigned)h->off, (uint32_t)h->len,
			      (enum weft_sock_replace_action)h->tag);
		break;
	default: break; /* CTL_ACK: only the acknowledgements */
	}
	return WEFT_SUCCESS;
}

/* Is every socket of @p c closed by the peer (at least one, the others
 * closed too or not up), and does something still wait on it (a receive,
 * a frame not wholly written)? */
static bool closed_under_work(const struct weft_sock_conn *c)
{
	bool any = false, all = true;
	for (unsigned i = 0; i < c->sc->nslots; i++) {
		const struct weft_sock *sk = &c->sock[i];
		any = any || sk->eof;
		all = all && (sk->eof || sk->phase != WEFT_SOCK_UP || sk->h.parked);
	}
	if (!any || !all)
		return false;
	bool waits = c->recvq.q.head || c->sendq.q.head || c->resend.head;
	for (unsigned i = 0; i < c->sc->nslots; i++)
		waits = waits || c->sock[i].tx.wr;
	return waits;
}

/* Without acknowledgements, or after the peer's BYE: a socket that closes
 * is over; the connection fails when every one is and a receive (or a
 * send not wholly written) still waits, or at once on an error. */
static weft_status_t closed_for_good(struct weft_sock_conn *c, unsigned s, int err)
{
	struct weft_sock *sk = &c->sock[s];
	bool mid = sk->rx.in_frame || sk->rx.pos < sk->rx.len;
	if ((err != 0 && err != ECONNRESET) || (mid && !c->peer_bye))
		return weft_tp_socket_peer_failed(c, s, err);
	sk->eof = true;
	return closed_under_work(c) ? weft_tp_socket_peer_failed(c, s, err) : WEFT_SUCCESS;
}

weft_status_t weft_tp_socket_closed_check(struct weft_sock_conn *c)
{
	if (c->failed || !closed_under_work(c))
		return WEFT_SUCCESS;
	unsigned s = 0;
	while (s + 1 < c->sc->nslots && !c->sock[s].eof)
		s++;
	return weft_tp_socket_peer_failed(c, s, 0);
}

/* A dead path sends no FIN: an end the peer closed without BYE is either
 * one the connector replaces (its siblings stay established) or a peer
 * that is gone, whose kernel closes every socket at once. Is any other
 * socket of @p c still established (TCP_INFO's state)? */
static bool sibling_established(const struct weft_sock_conn *c, unsigned s)
{
	for (unsigned i = 0; i < c->sc->nslots; i++) {
		struct tcp_info ti;
		if (i == s || !weft_tp_socket_usable(c, i) || c->sock[i].eof)
			continue;
		if (c->sc->io->tcp_info(c->sock[i].fd, &ti) == 0 &&
		    ti.tcpi_state == SOCK_TCP_ESTABLISHED)
			return true;
	}
	return false;
}

/* Every socket of @p c is closed: did the peer exit? Only a peer on this
 * host can be asked (its pid). Its sockets may as well have been failed
 * over at once, each closed to be replaced (a load spike that stalled
 * them all: seen at 8 ranks on 2 cores, where the acceptor took the
 * connector's replacements for an exit and failed a live peer); then the
 * failover's new connection, or call, to its listener tells (refused:
 * gone, socket_slot.c and socket_lazy.c). */
static bool peer_exited(const struct weft_sock_conn *c)
{
	const struct weft_tp_env *env = c->sc->base.env;
	int peer = c->base.peer;
	return weft_tp_same_host(env, peer) && env->peers[peer].pid > 0 &&
	       !weft_pid_alive(env->peers[peer].pid);
}

weft_status_t weft_tp_socket_on_close(struct weft_sock_conn *c, unsigned s, int err)
{
	/* Every socket closed by a peer that exited: it is gone, as one that
	 * said BYE is (an error only if something still waits on it). */
	if (!weft_sock_acking(c->sc) || c->peer_bye ||
	    (!sibling_established(c, s) && peer_exited(c)))
		return closed_for_good(c, s, err);
	if (c->sock[s].h.parked_pending) { /* the connector said it parks it */
		weft_tp_socket_retire(c, s);
		c->sock[s].phase = WEFT_SOCK_IDLE;
		c->sock[s].h.parked = true;
		c->sock[s].h.parked_pending = false;
		return WEFT_SUCCESS;
	}
	char why[96];
	snprintf(why, sizeof(why), "the peer's end %s%s%s", err ? "failed (" : "closed",
		 err ? strerror(err) : "", err ? ")" : " it");
	c->sock[s].h.gone_at = weft_now();
	weft_tp_socket_failover(c, s, why);
	return WEFT_SUCCESS;
}
