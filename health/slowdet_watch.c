/*
 * slowdet_watch.c — the detector in the watch's thread: each period, this
 * rank's sample (its wait fraction, its busiest connections' path rates)
 * goes to rank 0; the datagrams that come in (samples on rank 0,
 * verdicts everywhere) are checked as the watch's are; a verdict is kept
 * for the metrics and said once, in a WARN line and the flight recorder.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/comm.h"
#include "core/trace.h"
#include "core/watch.h"
#include "core/watch_int.h"
#include "health/slowdet_int.h"
#include "util/clock.h"
#include "util/log.h"

/* While the detector runs, the watch's thread wakes every TICK_NS: how
 * late it wakes, beyond what poll's millisecond rounds up, is time the
 * process did not run (stopped, or its cores taken by others), whatever
 * its main thread was doing. The thread sleeps in between (100 wake-ups a
 * second, a few microseconds each), and as it sleeps most of the time the
 * scheduler runs it soon after it asks: unlike a main thread that spins
 * on a wait, it is late only when the process is. A rank whose share of
 * time not running stands out from the job's is named (slowdet_root.c). */
#define TICK_NS	 10000000ull
#define SLACK_NS 2000000ull

uint64_t weft_slowdet_next_ns(const struct weft_watch *w)
{
	const struct weft_slowdet *d = slowdet_of(w);
	if (!d)
		return UINT64_MAX;
	return d->tick_due && d->tick_due < d->next_ns ? d->tick_due : d->next_ns;
}

/* The thread woke at @p now: its lateness against the tick it asked for. */
static void ticked(struct weft_slowdet *d, uint64_t now)
{
	if (d->tick_due && now > d->tick_due + SLACK_NS)
		d->off_ns += now - d->tick_due - SLACK_NS;
	if (now >= d->tick_due)
		d->tick_due = now + TICK_NS;
}

/* A datagram to @p peer (its sequence number and MAC made here). */
void weft_slowdet_send(struct weft_watch *w, int peer, uint32_t type, const void *body, size_t len)
{
	struct slowdet_msg m;
	memset(&m, 0, sizeof(m));
	m.magic = DETECT_MAGIC;
	m.comm_id = w->comm_id;
	m.seq = atomic_fetch_add(&w->seq, 1) + 1;
	m.type = type;
	m.rank = w->rank;
	memcpy(&m.u, body, len < sizeof(m.u) ? len : sizeof(m.u));
	weft_mac(&w->key, &m, offsetof(struct slowdet_msg, mac), m.mac);
	(void)sendto(w->fd, &m, sizeof(m), MSG_DONTWAIT, (const struct sockaddr *)&w->addrs[peer],
		     w->lens[peer]);
}

static uint32_t permille(uint64_t part, uint64_t whole)
{
	return whole == 0 ? 0 : part >= whole ? 1000 : (uint32_t)(part * 1000 / whole);
}

/* The connection to @p p over the period, into the top DETECT_LINKS by
 * bytes acknowledged. */
static void take_link(struct weft_slowdet *d, int p, struct slowdet_sample *s)
{
	const struct weft_p2p_link *l = &d->comm->peers[p].link;
	struct slowdet_prev_link *prev = &d->prev_link[p];
	uint64_t acked = weft_counter_get(&l->sig.acked), path = weft_counter_get(&l->sig.path_us);
	uint64_t da = acked - prev->acked, eff = path - prev->path_us;
	*prev = (struct slowdet_prev_link){acked, path};
	if (da == 0)
		return;
	struct slowdet_link_wire x = {.peer = p,
				      .kbytes =
					  da >> 10 > UINT32_MAX ? UINT32_MAX : (uint32_t)(da >> 10),
				      .busy_us = eff > UINT32_MAX ? UINT32_MAX : (uint32_t)eff,
				      .rate_kBps = eff ? (uint32_t)(da * 1000 / eff) : 0};
	unsigned i = s->nlinks < DETECT_LINKS ? s->nlinks++ : DETECT_LINKS;
	if (i == DETECT_LINKS) { /* full: replace the smallest if this is larger */
		unsigned min = 0;
		for (unsigned k = 1; k < DETECT_LINKS; k++)
			if (s->links[k].kbytes < s->links[min].kbytes)
				min = k;
		if (s->links[min].kbytes >= x.kbytes)
			return;
		i = min;
	}
	s->links[i] = x;
}

/* Peer @p p's first messages over the period, into the DETECT_LATE with
 * the most of them. */
static void take_late(struct weft_slowdet *d, int p, struct slowdet_sample *s)
{
	uint64_t ns = weft_counter_get(&d->pub.late_ns[p]), n = weft_counter_get(&d->pub.late_n[p]);
	uint64_t dns = ns - d->prev_late[2 * p], dn = n - d->prev_late[2 * p + 1];
	d->prev_late[2 * p] = ns;
	d->prev_late[2 * p + 1] = n;
	if (dn == 0)
		return;
	uint64_t avg_us = dns / dn / 1000;
	struct slowdet_late_wire x = {.peer = p,
				      .count = dn > UINT32_MAX ? UINT32_MAX : (uint32_t)dn,
				      .delay_us =
					  avg_us > UINT32_MAX ? UINT32_MAX : (uint32_t)avg_us};
	unsigned i = s->nlate < DETECT_LATE ? s->nlate++ : DETECT_LATE;
	if (i == DETECT_LATE) {
		unsigned min = 0;
		for (unsigned k = 1; k < DETECT_LATE; k++)
			if (s->late[k].count < s->late[min].count)
				min = k;
		if (s->late[min].count >= x.count)
			return;
		i = min;
	}
	s->late[i] = x;
}

static void build(struct weft_slowdet *d, uint64_t now, struct slowdet_sample *s)
{
	const struct weft_comm *comm = d->comm;
	uint64_t dt = now - d->prev_t, wait = weft_counter_get(&d->pub.wait_ns);
	uint64_t stall = weft_counter_get(&d->pub.stall_ns), ops = weft_counter_get(&d->pub.ops);
	uint64_t off = d->off_ns;
	memset(s, 0, sizeof(*s));
	s->period_us = (uint32_t)(dt / 1000);
	s->ops = (uint32_t)(ops - d->prev_ops);
	s->wait_permille = permille(wait - d->prev_wait, dt);
	s->stall_permille = permille(stall - d->prev_stall, dt);
	s->off_permille = permille(off - d->prev_off, dt);
	s->top_peer = -1;
	uint64_t top = 0;
	for (int p = 0; p < comm->nranks; p++) {
		uint64_t on = weft_counter_get(&d->pub.wait_on[p]);
		if (on - d->prev_wait_on[p] > top) {
			top = on - d->prev_wait_on[p];
			s->top_peer = p;
		}
		d->prev_wait_on[p] = on;
		if (p != comm->rank) {
			take_link(d, p, s);
			take_late(d, p, s);
		}
	}
	s->top_permille = permille(top, dt);
	d->prev_t = now;
	d->prev_wait = wait;
	d->prev_stall = stall;
	d->prev_ops = ops;
	d->prev_off = off;
}

void weft_slowdet_watch_tick(struct weft_watch *w, uint64_t now)
{
	struct weft_slowdet *d = slowdet_of(w);
	if (!d)
		return;
	ticked(d, now);
	if (now < d->next_ns)
		return;
	struct slowdet_sample s;
	if (d->next_ns == 0) { /* the first: only where the counters start */
		build(d, now, &s);
		d->next_ns = now + d->period_ns;
		return;
	}
	d->next_ns += d->period_ns;
	if (d->next_ns <= now)
		d->next_ns = now + d->period_ns;
	build(d, now, &s);
	if (w->rank != 0) {
		weft_slowdet_send(w, 0, DETECT_SAMPLE, &s, sizeof(s));
		return;
	}
	weft_slowdet_root_sample(w, 0, &s, now);
	weft_slowdet_root_eval(w, now);
}

/* ---- what comes in ---- */

static bool sample_ok(const struct weft_watch *w, const struct slowdet_sample *s)
{
	if (s->nlinks > DETECT_LINKS || s->nlate > DETECT_LATE)
		return false;
	for (unsigned i = 0; i < s->nlinks; i++)
		if (s->links[i].peer < 0 || s->links[i].peer >= w->nranks)
			return false;
	for (unsigned i = 0; i < s->nlate; i++)
		if (s->late[i].peer < 0 || s->late[i].peer >= w->nranks)
			return false;
	return s->top_peer >= -1 && s->top_peer < w->nranks;
}

static bool verdict_ok(const struct weft_watch *w, const struct slowdet_verdict *v)
{
	return (v->kind == DETECT_LINK || v->kind == DETECT_RANK) && v->named <= 1 &&
	       v->cause <= DETECT_NOT_RUNNING && v->rank >= 0 && v->rank < w->nranks && v->id > 0;
}

bool weft_slowdet_take(struct weft_watch *w, const void *buf, ssize_t len,
		       const struct sockaddr_storage *from)
{
	const struct slowdet_msg *m = buf;
	if (len != (ssize_t)sizeof(*m) || m->magic != DETECT_MAGIC)
		return false;
	struct weft_slowdet *d = slowdet_of(w);
	unsigned char mac[WEFT_MAC_BYTES];
	bool ok = d && m->comm_id == w->comm_id && m->rank >= 0 && m->rank < w->nranks &&
		  m->rank != w->rank && watch_from_rank(w, m->rank, from);
	if (ok) {
		weft_mac(&w->key, m, offsetof(struct slowdet_msg, mac), mac);
		ok = weft_mac_equal(mac, m->mac) && m->seq > d->last_seq[m->rank];
	}
	if (ok && m->type == DETECT_SAMPLE)
		ok = w->rank == 0 && sample_ok(w, &m->u.sample);
	else if (ok)
		ok = m->type == DETECT_VERDICT && m->rank == 0 && verdict_ok(w, &m->u.verdict);
	if (!ok) {
		if (d)
			d->dropped++;
		else
			w->dropped++;
		return true;
	}
	d->last_seq[m->rank] = m->seq;
	if (m->type == DETECT_SAMPLE)
		weft_slowdet_root_sample(w, m->rank, &m->u.sample, weft_now_ns());
	else
		weft_slowdet_apply(w, &m->u.verdict);
	return true;
}

/* ---- a verdict ---- */

/* Keep @p v for the metrics: in place of the last word on its suspect,
 * else in a free slot, else over the oldest cleared one. */
static void keep(struct weft_slowdet *d, const struct slowdet_verdict *v)
{
	int at = -1;
	for (int i = 0; i < d->nkept && at < 0; i++)
		if (d->kept[i].kind == v->kind && d->kept[i].rank == v->rank)
			at = i;
	if (at < 0 && d->nkept < DETECT_KEPT)
		at = d->nkept++;
	for (int i = 0; i < d->nkept && at < 0; i++)
		if (!d->kept[i].named)
			at = i;
	if (at >= 0)
		d->kept[at] = *v;
}

/* "rank 1 (h3, 10.77.5.13)" */
static void who(const struct weft_comm *comm, int rank, char *buf, size_t len)
{
	char addr[64];
	weft_watch_addr(comm, rank, addr, sizeof(addr));
	snprintf(buf, len, "rank %d (%s, %s)", rank, comm->cards[rank].hostname, addr);
}

/* A log line, cut short if it must be (numbers as large as a double may
 * be, which the compiler counts, never come from a sane detector). */
__attribute__((format(printf, 3, 4))) static void put(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

static void say(const struct weft_comm *comm, const struct slowdet_verdict *v, char *buf,
		size_t len)
{
	char w[160], leaf[96] = "";
	who(comm, v->rank, w, sizeof(w));
	const char *ln = weft_comm_leaf_name(comm, v->rank);
	if (ln)
		snprintf(leaf, sizeof(leaf), " to %s", ln);
	if (v->kind == DETECT_LINK && v->named)
		put(buf, len,
		    "slow: %s uplink%s at %.1f MB/s, the job's median %.1f MB/s, for %u "
		    "operations",
		    w, leaf, v->value / 1e6, v->median / 1e6, v->ops);
	else if (v->kind == DETECT_LINK)
		put(buf, len,
		    "slow: cleared: %s uplink%s back at %.1f MB/s (the job's median %.1f MB/s)", w,
		    leaf, v->value / 1e6, v->median / 1e6);
	else if (v->named && v->cause == DETECT_NOT_RUNNING)
		put(buf, len,
		    "slow: %s holds the job up: its process did not run %.0f %% of the time "
		    "(stopped, or its cores taken), the job's median %.0f %%, for %u operations",
		    w, v->value / 10.0, v->median / 10.0, v->ops);
	else if (v->named)
		put(buf, len,
		    "slow: %s holds the job up: the ranks it feeds waited %.0f ms on average "
		    "for its first message of an operation, the job's median %.0f ms, for %u "
		    "operations",
		    w, v->value / 1e3, v->median / 1e3, v->ops);
	else if (v->cause == DETECT_NOT_RUNNING)
		put(buf, len,
		    "slow: cleared: %s runs again (not running %.0f %% of the time, the job's "
		    "median %.0f %%)",
		    w, v->value / 10.0, v->median / 10.0);
	else
		put(buf, len,
		    "slow: cleared: %s keeps time again (its first messages %.0f ms after the "
		    "call, the job's median %.0f ms)",
		    w, v->value / 1e3, v->median / 1e3);
}

void weft_slowdet_apply(struct weft_watch *w, const struct slowdet_verdict *v)
{
	struct weft_slowdet *d = slowdet_of(w);
	pthread_mutex_lock(&d->lock);
	bool fresh = v->id > d->last_id;
	if (fresh) {
		d->last_id = v->id;
		keep(d, v);
	}
	pthread_mutex_unlock(&d->lock);
	if (!fresh || !d->comm)
		return;
	char line[WEFT_TRACE_TEXT_BYTES * 3];
	say(d->comm, v, line, sizeof(line));
	weft_log(WEFT_LOG_WARN, v->kind == DETECT_LINK ? WEFT_SUB_NET : WEFT_SUB_COLL, "%s", line);
	weft_trace_event(d->comm, v->named ? WEFT_EV_SLOW : WEFT_EV_CLEARED, v->rank, "%s",
			 line + 6 /* past "slow: " */);
}

static bool serve_take(void *ctx, struct weft_watch *w, const unsigned char *buf, ssize_t len,
		       const struct sockaddr_storage *from)
{
	return weft_slowdet_take(w, buf, len, from);
}

static uint64_t serve_tick(void *ctx, struct weft_watch *w, uint64_t now_ns)
{
	weft_slowdet_watch_tick(w, now_ns);
	return weft_slowdet_next_ns(w);
}

const struct weft_watch_service weft_slowdet_watch = {
    .size = sizeof(struct weft_watch_service),
    .name = "the slow-rank detector",
    .take = serve_take,
    .tick = serve_tick,
};
