/* watch_verdict.c — at a timeout, the job-wide verdict: ask every peer for
 * its state over the watch (watch.h), wait a bounded window, and name the
 * ranks that never reached the operation and the ones that merely waited. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/comm.h"
#include "core/tag.h"
#include "core/watch.h"
#include "core/watch_int.h"
#include "util/log.h"

#define RESEND_S 0.05

/* What the verdict knows of one rank. */
struct seen {
	bool alive;	       /* answered the query (or is this rank) */
	bool known;	       /* st holds something heard of it */
	double heard_s;	       /* since it was last heard from, by anyone asked */
	struct watch_state st; /* its state then */
};

/* The window: a quarter of the timeout, between 0.2 s and 2 s. */
static double window(double timeout_s)
{
	double t = timeout_s / 4;
	return t < 0.2 ? 0.2 : t > 2 ? 2 : t;
}

/* Done once every peer answered, and every one in an operation has timed
 * out too (our query tells them to), so that all report the same verdict
 * before anyone's abort breaks the data path. */
static bool settled(struct weft_watch *w)
{
	for (int r = 0; r < w->nranks; r++) {
		const struct watch_view *v = &w->view[r];
		if (r == w->rank)
			continue;
		if (!v->replied)
			return false;
		if (v->st.started > v->st.finished && !(v->st.flags & WATCH_TIMED_OUT))
			return false;
	}
	return true;
}

static void ask(struct weft_watch *w, double timeout_s)
{
	pthread_mutex_lock(&w->lock);
	for (int r = 0; r < w->nranks; r++)
		w->view[r].replied = false;
	pthread_mutex_unlock(&w->lock);
	double deadline = weft_now() + window(timeout_s);
	for (;;) {
		pthread_mutex_lock(&w->lock);
		bool done = settled(w);
		for (int r = 0; !done && r < w->nranks; r++)
			if (r != w->rank)
				watch_send(w, r, WATCH_QUERY);
		pthread_mutex_unlock(&w->lock);
		if (done || weft_now() >= deadline)
			return;
		struct timespec nap = {0, (long)(RESEND_S * 1e9)};
		nanosleep(&nap, NULL);
	}
}

/* Fold in what rank @p r's neighbours last heard of it. */
static void from_neighbours(const struct weft_watch *w, int r, double now, struct seen *s)
{
	if (w->view[r].heard > 0) {
		s->known = true;
		s->heard_s = now - w->view[r].heard;
		s->st = w->view[r].st;
	}
	for (int side = 0; side < 2; side++) {
		int nb = (r + (side ? 1 : w->nranks - 1)) % w->nranks;
		const struct watch_view *v = &w->view[nb];
		/* nb's neighbour on the other side is r */
		uint32_t ms = v->nb_heard_ms[side ? 0 : 1];
		if (nb == w->rank || !v->replied || ms == UINT32_MAX)
			continue;
		if (!s->known || ms / 1e3 < s->heard_s) {
			s->known = true;
			s->heard_s = ms / 1e3;
			s->st = v->nb[side ? 0 : 1];
		}
	}
}

static void collect(struct weft_watch *w, struct seen *seen)
{
	double now = weft_now();
	pthread_mutex_lock(&w->lock);
	for (int r = 0; r < w->nranks; r++) {
		struct seen *s = &seen[r];
		memset(s, 0, sizeof(*s));
		if (r == w->rank) {
			s->alive = s->known = true;
			watch_state_mine(w, &s->st);
		} else if (w->view[r].replied) {
			s->alive = s->known = true;
			s->heard_s = now - w->view[r].heard;
			s->st = w->view[r].st;
		} else {
			from_neighbours(w, r, now, s);
		}
	}
	pthread_mutex_unlock(&w->lock);
}

/* "in allreduce seq 4 for 1.2 s" / "outside Weft for 3.0 s, after seq 4". */
static void describe(const struct watch_state *st, char *buf, size_t size)
{
	if (st->started == 0)
		snprintf(buf, size, "before its first collective");
	else if (st->started > st->finished)
		snprintf(buf, size, "in %s seq %llu for %.1f s", weft_coll_name(st->coll),
			 (unsigned long long)(st->started - 1), st->age_ms / 1e3);
	else
		snprintf(buf, size, "outside Weft for %.1f s, after seq %llu", st->age_ms / 1e3,
			 (unsigned long long)(st->started - 1));
}

static size_t append(char *buf, size_t size, size_t used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t append(char *buf, size_t size, size_t used, const char *fmt, ...)
{
	if (used >= size)
		return used;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + used, size - used, fmt, ap);
	va_end(ap);
	return n < 0 ? used : used + (size_t)n;
}

/* Did rank @p s reach call (number + 1) @p want? Not answering and never
 * heard of: no. */
static bool reached(const struct seen *s, uint64_t want)
{
	return s->known && s->st.started >= want;
}

#define VERDICT_DETAILS 4

static size_t name_stragglers(const struct seen *seen, int n, uint64_t want, const char *op,
			      char *buf, size_t size, size_t used)
{
	int shown = 0, more = 0;
	for (int r = 0; r < n; r++) {
		const struct seen *s = &seen[r];
		if (s->alive && reached(s, want))
			continue;
		if (shown == VERDICT_DETAILS) {
			more++;
			continue;
		}
		char what[96] = "never heard from";
		if (s->known)
			describe(&s->st, what, sizeof(what));
		const char *verb = reached(s, want) ? "stopped inside" : "never reached";
		if (s->alive)
			used = append(buf, size, used, "%srank %d %s %s (alive, %s)",
				      shown ? "; " : "", r, verb, op, what);
		else if (s->known)
			used = append(buf, size, used,
				      "%srank %d %s %s (not answering: stopped or dead; last "
				      "heard %.1f s ago, then %s)",
				      shown ? "; " : "", r, verb, op, s->heard_s, what);
		else
			used = append(buf, size, used, "%srank %d %s %s (never heard from)",
				      shown ? "; " : "", r, verb, op);
		shown++;
	}
	if (more)
		used = append(buf, size, used, "; and %d more", more);
	if (!shown)
		used = append(buf, size, used, "every rank reached %s", op);
	return used;
}

static size_t name_waiters(const struct seen *seen, int n, uint64_t want, const char *op, char *buf,
			   size_t size, size_t used)
{
	int count = 0;
	for (int r = 0; r < n; r++)
		count += seen[r].alive && reached(&seen[r], want);
	used = append(buf, size, used, "; %s ", count == 1 ? "rank" : "ranks");
	for (int r = 0, shown = 0; r < n; r++) {
		if (!(seen[r].alive && reached(&seen[r], want)))
			continue;
		int j = r;
		while (j + 1 < n && seen[j + 1].alive && reached(&seen[j + 1], want))
			j++;
		if (j > r + 1) { /* three or more in a row: a range */
			used = append(buf, size, used, "%s%d-%d", shown ? "," : "", r, j);
			r = j;
		} else {
			used = append(buf, size, used, "%s%d", shown ? "," : "", r);
		}
		shown = 1;
	}
	return append(buf, size, used, " waited in %s", op);
}

static void log_state(const struct seen *seen, int n)
{
	if (!weft_log_enabled(WEFT_LOG_INFO, WEFT_SUB_COLL))
		return;
	for (int r = 0; r < n; r++) {
		char what[96] = "never heard from";
		if (seen[r].known)
			describe(&seen[r].st, what, sizeof(what));
		weft_log(WEFT_LOG_INFO, WEFT_SUB_COLL,
			 "timeout: job state: rank %d %s, last heard %.1f s ago, %s%s", r,
			 seen[r].alive ? "answering" : "NOT answering", seen[r].heard_s, what,
			 seen[r].st.flags & WATCH_TIMED_OUT ? ", timed out" : "");
	}
}

/* For weft_comm_stragglers: the ranks this verdict names as not through. */
static void keep_stragglers(struct weft_watch *w, const struct seen *seen, uint64_t want)
{
	pthread_mutex_lock(&w->lock);
	for (int r = 0; r < w->nranks; r++)
		w->straggler[r] = !(seen[r].alive && reached(&seen[r], want));
	w->verdicts++;
	pthread_mutex_unlock(&w->lock);
}

int weft_watch_stragglers(struct weft_comm *comm, int *ranks, int capacity)
{
	struct weft_watch *w = comm->watch;
	if (!w)
		return -1;
	pthread_mutex_lock(&w->lock);
	int count = w->verdicts ? 0 : -1;
	for (int r = 0; w->verdicts && r < w->nranks; r++)
		if (w->straggler[r] && count++ < capacity)
			ranks[count - 1] = r;
	pthread_mutex_unlock(&w->lock);
	return count;
}

void weft_watch_verdict(struct weft_comm *comm, const struct weft_task *task, char *buf,
			size_t size)
{
	struct weft_watch *w = comm->watch;
	buf[0] = '\0';
	if (!w || size == 0)
		return;
	uint64_t call = weft_tag_number((uint32_t)task->seq);
	bool coll = !weft_task_is_p2p(task);
	atomic_store(&w->waiting_for, task->waiting_for);
	atomic_store(&w->timed_out_call, coll ? call + 1 : UINT64_MAX);
	ask(w, comm->timeout_s);
	struct seen *seen = calloc((size_t)w->nranks, sizeof(*seen));
	if (!seen)
		return;
	collect(w, seen);
	log_state(seen, w->nranks);
	char op[64];
	snprintf(op, sizeof(op), "%s seq %llu", weft_coll_name(task->args.coll),
		 (unsigned long long)call);
	/* Send/recv calls are numbered per peer: only who answers is known. */
	uint64_t want = coll ? call + 1 : 0;
	keep_stragglers(w, seen, want);
	size_t used = append(buf, size, 0, "verdict: ");
	used = name_stragglers(seen, w->nranks, want, op, buf, size, used);
	name_waiters(seen, w->nranks, want, op, buf, size, used);
	weft_log(WEFT_LOG_INFO, WEFT_SUB_COLL, "timeout: %s", buf);
	free(seen);
}
