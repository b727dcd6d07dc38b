/*
 * slowdet_root.c — rank 0's side of the detector: the latest sample of
 * every rank, and every period the decision (slowdet_stats.c) over those
 * no older than 2.5 periods; a change is sent to every rank at once and
 * again the next period (one lost datagram must not leave a rank behind).
 * A suspect with no fresh word (a host whose connections moved too little
 * to be believed, a rank that sent nothing) keeps its state: nothing is
 * known of it either way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/watch_int.h"
#include "health/slowdet_int.h"
#include "util/clock.h"
#include "util/log.h"

struct slowdet_root *weft_slowdet_root_new(int nranks, int nhosts)
{
	struct slowdet_root *r = calloc(1, sizeof(*r));
	size_t n = (size_t)nranks, h = (size_t)nhosts, big = n > h ? n : h;
	if (!r)
		return NULL;
	r->ranks = calloc(n, sizeof(*r->ranks));
	r->host_run = calloc(h, sizeof(*r->host_run));
	r->rank_run = calloc(n, sizeof(*r->rank_run));
	r->host_best = calloc(h, sizeof(*r->host_best));
	r->rank_late = calloc(n, sizeof(*r->rank_late));
	r->rank_off = calloc(n, sizeof(*r->rank_off));
	r->rank_cause = calloc(n, sizeof(*r->rank_cause));
	r->off = calloc(n, sizeof(*r->off));
	r->slow_off = calloc(n, sizeof(*r->slow_off));
	r->have_off = calloc(n, sizeof(*r->have_off));
	r->links = calloc(n * DETECT_LINKS, sizeof(*r->links));
	r->best = calloc(h, sizeof(*r->best));
	r->tmp = calloc(2 * big, sizeof(*r->tmp));
	r->late = calloc(n, sizeof(*r->late));
	r->slow_h = calloc(h, sizeof(*r->slow_h));
	r->slow_r = calloc(n, sizeof(*r->slow_r));
	r->have = calloc(n, sizeof(*r->have));
	r->on_slow_host = calloc(n, sizeof(*r->on_slow_host));
	r->not_running = calloc(n, sizeof(*r->not_running));
	r->itmp = calloc(2 * h, sizeof(*r->itmp));
	r->next_id = 1;
	if (!r->ranks || !r->host_run || !r->rank_run || !r->host_best || !r->rank_late ||
	    !r->links || !r->best || !r->tmp || !r->late || !r->slow_h || !r->slow_r || !r->have ||
	    !r->on_slow_host || !r->not_running || !r->itmp || !r->rank_off || !r->rank_cause ||
	    !r->off || !r->slow_off || !r->have_off) {
		weft_slowdet_root_free(r);
		return NULL;
	}
	return r;
}

void weft_slowdet_root_free(struct slowdet_root *r)
{
	if (!r)
		return;
	free(r->ranks);
	free(r->host_run);
	free(r->rank_run);
	free(r->host_best);
	free(r->rank_late);
	free(r->rank_off);
	free(r->rank_cause);
	free(r->off);
	free(r->slow_off);
	free(r->have_off);
	free(r->links);
	free(r->best);
	free(r->tmp);
	free(r->late);
	free(r->slow_h);
	free(r->slow_r);
	free(r->have);
	free(r->on_slow_host);
	free(r->not_running);
	free(r->itmp);
	free(r);
}

static struct slowdet_root *root_of(struct weft_watch *w)
{
	struct weft_slowdet *d = slowdet_of(w);
	if (!d->root && d->comm)
		d->root = weft_slowdet_root_new(w->nranks, d->comm->graph.nhosts);
	return d->root;
}

void weft_slowdet_root_sample(struct weft_watch *w, int rank, const struct slowdet_sample *s,
			      uint64_t now_ns)
{
	struct slowdet_root *r = root_of(w);
	if (!r)
		return;
	struct slowdet_root_rank *rk = &r->ranks[rank];
	unsigned i = rk->n++ % DETECT_HISTORY;
	rk->s[i] = *s;
	rk->at_ns[i] = now_ns ? now_ns : 1;
}

/* To every rank (this one through weft_slowdet_apply), and again next period. */
static void broadcast(struct weft_watch *w, const struct slowdet_verdict *v)
{
	for (int p = 0; p < w->nranks; p++)
		if (p != w->rank)
			weft_slowdet_send(w, p, DETECT_VERDICT, v, sizeof(*v));
	weft_slowdet_apply(w, v);
}

static void decide(struct weft_watch *w, struct slowdet_root *r, int kind, int rank,
		   const struct weft_slowdet_run *run, double value, double median, uint32_t cause)
{
	struct slowdet_verdict v = {.id = r->next_id++,
				    .kind = (uint32_t)kind,
				    .cause = cause,
				    .named = run->named,
				    .rank = rank,
				    .ops = run->ops,
				    .value = (uint64_t)(value > 0 ? value : 0),
				    .median = (uint64_t)(median > 0 ? median : 0),
				    .periods = run->flagged};
	broadcast(w, &v);
	if (r->nresend < DETECT_KEPT)
		r->resend[r->nresend++] = v;
}

/* Connection @p x of @p rk's latest sample, over the samples of the last
 * DETECT_HISTORY periods that carry it: bytes and path time summed. */
static struct weft_slowdet_link_obs windowed(const struct slowdet_root_rank *rk, int src,
					     const struct slowdet_link_wire *x, uint64_t now,
					     uint64_t window)
{
	struct weft_slowdet_link_obs o = {.src = src, .dst = x->peer};
	for (unsigned h = 0; h < DETECT_HISTORY && h < rk->n; h++) {
		const struct slowdet_sample *s = &rk->s[(rk->n - 1 - h) % DETECT_HISTORY];
		if (now - rk->at_ns[(rk->n - 1 - h) % DETECT_HISTORY] > window)
			break;
		for (unsigned i = 0; i < s->nlinks; i++)
			if (s->links[i].peer == x->peer) {
				o.bytes += (uint64_t)s->links[i].kbytes << 10;
				o.busy_s += s->links[i].busy_us * 1e-6;
			}
	}
	o.rate_Bps = o.busy_s > 0 ? (double)o.bytes / o.busy_s : 0;
	return o;
}

/* The fresh samples: connections into r->links, each rank's lateness as
 * the ranks it feeds saw it into r->late and r->have (the average over
 * its receivers, weighted by their counts), each rank's own share of the
 * window it did not run into r->off and r->have_off; returns how many
 * connections, and the job's median operations per period in *ops. */
static int gather(struct weft_watch *w, struct slowdet_root *r, uint64_t now, uint32_t *ops)
{
	uint64_t period = slowdet_of(w)->period_ns, fresh = period * 5 / 2;
	int nl = 0, nops = 0;
	double *cnt = r->tmp + w->nranks; /* beside the ops' slots */
	for (int k = 0; k < w->nranks; k++) {
		r->late[k] = cnt[k] = r->off[k] = 0;
		r->have_off[k] = false;
	}
	for (int k = 0; k < w->nranks; k++) {
		const struct slowdet_root_rank *rk = &r->ranks[k];
		unsigned last = (rk->n + DETECT_HISTORY - 1) % DETECT_HISTORY;
		if (!rk->n || now - rk->at_ns[last] > fresh)
			continue;
		const struct slowdet_sample *s = &rk->s[last];
		r->tmp[nops++] = s->ops;
		double off_us = 0, span_us = 0;
		for (unsigned h = 0; h < DETECT_HISTORY && h < rk->n; h++) { /* the window */
			unsigned at = (rk->n - 1 - h) % DETECT_HISTORY;
			if (now - rk->at_ns[at] > period * (DETECT_HISTORY + 1))
				break;
			off_us += rk->s[at].off_permille * 1e-3 * rk->s[at].period_us;
			span_us += rk->s[at].period_us;
			for (unsigned i = 0; i < rk->s[at].nlate; i++) {
				const struct slowdet_late_wire *x = &rk->s[at].late[i];
				r->late[x->peer] += x->delay_us * 1e-6 * x->count;
				cnt[x->peer] += x->count;
			}
		}
		r->have_off[k] = span_us > 0;
		r->off[k] = span_us > 0 ? off_us / span_us : 0;
		for (unsigned i = 0; i < s->nlinks; i++)
			r->links[nl++] =
			    windowed(rk, k, &s->links[i], now, period * (DETECT_HISTORY + 1));
	}
	for (int k = 0; k < w->nranks; k++) {
		r->have[k] = cnt[k] > 0;
		if (r->have[k])
			r->late[k] /= cnt[k];
	}
	*ops = nops ? (uint32_t)weft_slowdet_median(r->tmp, nops) : 0;
	return nl;
}

static void eval_hosts(struct weft_watch *w, struct slowdet_root *r, int nl, uint32_t ops)
{
	const struct weft_topo_graph *g = &slowdet_of(w)->comm->graph;
	double median;
	weft_slowdet_slow_hosts(r->links, nl, g->host_of, g->nhosts, r->best, r->slow_h, &median,
				r->tmp, r->itmp);
	if (median > 0)
		r->host_median = median;
	for (int h = 0; h < g->nhosts; h++) {
		if (r->best[h] <= 0)
			continue; /* nothing believed of it this period */
		r->host_best[h] = r->best[h];
		int need = slowdet_of(w)->confirm;
		if (r->slow_h[h])
			need = weft_slowdet_link_confirm(r->best[h], median, need);
		enum weft_slowdet_change c =
		    weft_slowdet_step(&r->host_run[h], r->slow_h[h], ops, need);
		if (c != WEFT_DETECT_SAME)
			decide(w, r, DETECT_LINK, g->host_leader[h], &r->host_run[h],
			       r->host_best[h], r->host_median, 0);
	}
}

/* A rank holds the job up when its first messages come late to the ranks
 * it feeds, or when it did not run (stopped, starved of CPU: the ranks
 * waiting on it then wait in any step, not only for its first message).
 * Named for the cause it shows; a rank named is cleared when it shows
 * neither. */
static void eval_ranks(struct weft_watch *w, struct slowdet_root *r, uint32_t ops)
{
	const struct weft_topo_graph *g = &slowdet_of(w)->comm->graph;
	double median;
	for (int k = 0; k < w->nranks; k++) {
		int h = g->host_of[k];
		r->on_slow_host[k] = r->host_run[h].named || r->slow_h[h];
	}
	weft_slowdet_late_ranks(r->late, r->have, r->on_slow_host, w->nranks, r->slow_r, &median,
				r->tmp);
	if (median > 0)
		r->rank_median = median;
	weft_slowdet_off_ranks(r->off, r->have_off, r->on_slow_host, w->nranks, r->slow_off,
			       &median, r->tmp);
	r->off_median = median;
	for (int k = 0; k < w->nranks; k++)
		r->not_running[k] = r->rank_run[k].named && r->rank_cause[k] == DETECT_NOT_RUNNING;
	weft_slowdet_late_explained(r->slow_r, r->slow_off, r->not_running, w->nranks);
	for (int k = 0; k < w->nranks; k++) {
		if (!r->have[k] && !r->have_off[k])
			continue;
		if (r->have[k])
			r->rank_late[k] = r->late[k];
		if (r->have_off[k])
			r->rank_off[k] = r->off[k];
		bool flagged = r->slow_r[k] || r->slow_off[k];
		if (flagged && !r->rank_run[k].named)
			r->rank_cause[k] = r->slow_off[k] ? DETECT_NOT_RUNNING : DETECT_LATE_FIRST;
		enum weft_slowdet_change c =
		    weft_slowdet_step(&r->rank_run[k], flagged, ops, slowdet_of(w)->confirm);
		if (c == WEFT_DETECT_SAME)
			continue;
		if (r->rank_cause[k] == DETECT_NOT_RUNNING)
			decide(w, r, DETECT_RANK, k, &r->rank_run[k], r->rank_off[k] * 1e3,
			       r->off_median * 1e3, DETECT_NOT_RUNNING);
		else
			decide(w, r, DETECT_RANK, k, &r->rank_run[k], r->rank_late[k] * 1e6,
			       r->rank_median * 1e6, DETECT_LATE_FIRST);
	}
}

/* The latest fresh sample of @p rank, or NULL. */
static const struct slowdet_sample *latest(const struct slowdet_root *r, int rank, uint64_t now,
					   uint64_t fresh)
{
	const struct slowdet_root_rank *rk = &r->ranks[rank];
	unsigned last = (rk->n + DETECT_HISTORY - 1) % DETECT_HISTORY;
	return rk->n && now - rk->at_ns[last] <= fresh ? &rk->s[last] : NULL;
}

/* WEFT_DEBUG=TRACE, subsystem NET: what each period's decision saw (the
 * time, realtime, so that a run's log lines up with what was done to it). */
static void trace_period(struct weft_watch *w, struct slowdet_root *r, int nl, uint64_t now)
{
	if (!weft_log_enabled(WEFT_LOG_TRACE, WEFT_SUB_NET))
		return;
	const struct weft_topo_graph *g = &slowdet_of(w)->comm->graph;
	char line[1024];
	size_t n = 0;
	for (int h = 0; h < g->nhosts && n + 32 < sizeof(line); h++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, " h%d=%.1f%s", h,
				      r->best[h] / 1e6, r->slow_h[h] ? "!" : "");
	for (int k = 0; k < w->nranks && n + 64 < sizeof(line); k++) {
		const struct slowdet_sample *s =
		    latest(r, k, now, slowdet_of(w)->period_ns * 5 / 2);
		n += (size_t)snprintf(line + n, sizeof(line) - n, " r%d=%u/%u/%u/%.1fms%s", k,
				      s ? s->wait_permille : 0, s ? s->stall_permille : 0,
				      s ? s->off_permille : 0, r->have[k] ? r->late[k] * 1e3 : -1.0,
				      r->slow_r[k] || r->slow_off[k] ? "!" : "");
	}
	weft_log(WEFT_LOG_TRACE, WEFT_SUB_NET,
		 "slowdet t=%.3f: %d links; best MB/s; wait/stall/off permille, late:%s",
		 (double)weft_wall_ns() * 1e-9, nl, line);
	n = 0;
	for (int i = 0; i < nl && n + 48 < sizeof(line); i++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, " %d>%d=%.1f/%lluK",
				      r->links[i].src, r->links[i].dst, r->links[i].rate_Bps / 1e6,
				      (unsigned long long)(r->links[i].bytes >> 10));
	weft_log(WEFT_LOG_TRACE, WEFT_SUB_NET, "slowdet: links MB/s over the window:%s", line);
}

void weft_slowdet_root_eval(struct weft_watch *w, uint64_t now)
{
	struct slowdet_root *r = root_of(w);
	if (!r)
		return;
	for (int i = 0; i < r->nresend; i++)
		for (int p = 0; p < w->nranks; p++)
			if (p != w->rank)
				weft_slowdet_send(w, p, DETECT_VERDICT, &r->resend[i],
						  sizeof(r->resend[i]));
	r->nresend = 0;
	uint32_t ops;
	int nl = gather(w, r, now, &ops);
	eval_hosts(w, r, nl, ops);
	eval_ranks(w, r, ops);
	trace_period(w, r, nl, now);
}
