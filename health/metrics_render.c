/*
 * metrics_render.c — every registered communicator's series as text, in
 * Prometheus's 0.0.4 format or OpenMetrics 1.0 (metrics.h). The two differ
 * where it shows: a counter's TYPE line names "x_total" in 0.0.4 and "x"
 * in OpenMetrics (whose samples are still "x_total"), and OpenMetrics ends
 * with "# EOF". Each family's samples come together, over every
 * communicator, as both formats require.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "health/metrics_int.h"
#include "health/slowdet.h"
#include "transports/transport.h"
#include "util/clock.h"

void weft_mbuf_printf(struct weft_mbuf *b, const char *fmt, ...)
{
	if (b->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (b->p && b->n + (size_t)n < b->cap) {
			b->n += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap : 16384;
		while (cap <= b->n + (size_t)n)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

void weft_mbuf_free(struct weft_mbuf *b)
{
	free(b->p);
	*b = (struct weft_mbuf){0};
}

void weft_mbuf_label(struct weft_mbuf *b, const char *value)
{
	char esc[2 * 256 + 1];
	size_t n = 0;
	for (const char *s = value; *s && n + 2 < sizeof(esc); s++) {
		if (*s == '\\' || *s == '"') {
			esc[n++] = '\\';
			esc[n++] = *s;
		} else if (*s == '\n') {
			esc[n++] = '\\';
			esc[n++] = 'n';
		} else {
			esc[n++] = *s;
		}
	}
	esc[n] = '\0';
	weft_mbuf_printf(b, "%s", esc);
}

const char *weft_metrics_content_type(enum weft_metrics_format format)
{
	return format == WEFT_METRICS_OPENMETRICS
		   ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
		   : "text/plain; version=0.0.4; charset=utf-8";
}

/* ---- one family's header and samples ---- */

void weft_mout_header(struct weft_mout *o, const char *base, enum weft_mkind k, const char *help)
{
	static const char *const types[] = {"counter", "gauge", "histogram"};
	bool total = k == WEFT_MK_COUNTER && o->fmt == WEFT_METRICS_TEXT;
	weft_mbuf_printf(o->b, "# HELP %s%s %s\n# TYPE %s%s %s\n", base, total ? "_total" : "",
			 help, base, total ? "_total" : "", types[k]);
}

void weft_mout_u(struct weft_mout *o, const char *name, const char *labels, const char *extra,
		 unsigned long long v)
{
	weft_mbuf_printf(o->b, "%s{%s%s} %llu\n", name, labels, extra, v);
}

void weft_mout_d(struct weft_mout *o, const char *name, const char *labels, const char *extra,
		 double v)
{
	weft_mbuf_printf(o->b, "%s{%s%s} %.9g\n", name, labels, extra, v);
}

/* ---- per communicator ---- */

static void info(struct weft_mout *o, const struct weft_metrics *list)
{
	weft_mout_header(o, "weft_info", WEFT_MK_GAUGE,
			 "1 for each communicator: its size and the library");
	for (const struct weft_metrics *m = list; m; m = m->next) {
		char extra[96];
		snprintf(extra, sizeof(extra), ",nranks=\"%d\",version=\"%s\"", m->comm->nranks,
			 weft_version());
		weft_mout_u(o, "weft_info", m->labels, extra, 1);
	}
}

typedef uint64_t (*algo_field)(const struct weft_metrics_algo *a);
static uint64_t f_ops(const struct weft_metrics_algo *a)
{
	return weft_counter_get(&a->ops);
}
static uint64_t f_bytes(const struct weft_metrics_algo *a)
{
	return weft_counter_get(&a->bytes);
}
static uint64_t f_failed(const struct weft_metrics_algo *a)
{
	return weft_counter_get(&a->failed);
}

static void per_algo(struct weft_mout *o, const struct weft_metrics *list, const char *base,
		     const char *help, algo_field f)
{
	char name[96];
	snprintf(name, sizeof(name), "%s_total", base);
	weft_mout_header(o, base, WEFT_MK_COUNTER, help);
	for (const struct weft_metrics *m = list; m; m = m->next)
		for (int c = 0; c < WEFT_COLL_COUNT; c++)
			for (int i = 0; i < WEFT_METRICS_ALGOS; i++) {
				const struct weft_metrics_algo *a = &m->coll[c].algo[i];
				const char *an = atomic_load(&a->name);
				if (!an)
					break;
				char extra[160];
				snprintf(extra, sizeof(extra),
					 ",collective=\"%s\",algorithm=\"%s\"",
					 weft_coll_name((enum weft_coll_kind)c),
					 i == WEFT_METRICS_ALGOS - 1 ? "other" : an);
				weft_mout_u(o, name, m->labels, extra, f(a));
			}
}

static void histogram_of(struct weft_mout *o, const struct weft_metrics *m, int c, int k)
{
	const struct weft_metrics_coll *mc = &m->coll[c];
	uint64_t n = weft_counter_get(&mc->count[k]);
	if (n == 0)
		return;
	char extra[160];
	const char *cn = weft_coll_name((enum weft_coll_kind)c);
	uint64_t cum = 0;
	for (int b = 0; b <= WEFT_METRICS_BUCKETS; b++) {
		cum += weft_counter_get(&mc->hist[k][b]);
		if (b < WEFT_METRICS_BUCKETS)
			snprintf(extra, sizeof(extra), ",collective=\"%s\",size=\"%s\",le=\"%.9g\"",
				 cn, weft_metrics_class_name[k], weft_metrics_bucket_ns[b] * 1e-9);
		else
			snprintf(extra, sizeof(extra), ",collective=\"%s\",size=\"%s\",le=\"+Inf\"",
				 cn, weft_metrics_class_name[k]);
		weft_mout_u(o, "weft_operation_seconds_bucket", m->labels, extra, cum);
	}
	/* the count is the +Inf bucket's, read in the same pass, so they agree */
	snprintf(extra, sizeof(extra), ",collective=\"%s\",size=\"%s\"", cn,
		 weft_metrics_class_name[k]);
	weft_mout_u(o, "weft_operation_seconds_count", m->labels, extra, cum);
	weft_mout_d(o, "weft_operation_seconds_sum", m->labels, extra,
		    weft_counter_get(&mc->sum_ns[k]) * 1e-9);
}

static void histograms(struct weft_mout *o, const struct weft_metrics *list)
{
	weft_mout_header(
	    o, "weft_operation_seconds", WEFT_MK_HISTOGRAM,
	    "time from the call to its end, by collective and size class (the call's bytes)");
	for (const struct weft_metrics *m = list; m; m = m->next)
		for (int c = 0; c < WEFT_COLL_COUNT; c++)
			for (int k = 0; k < WEFT_METRICS_CLASSES; k++)
				histogram_of(o, m, c, k);
}

/* nccl-tests' factor from algorithm bandwidth to bus bandwidth. */
static double bus_factor(int coll, int n)
{
	switch (coll) {
	case WEFT_COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
	case WEFT_COLL_ALLGATHER:
	case WEFT_COLL_REDUCE_SCATTER:
	case WEFT_COLL_ALLTOALL:
	case WEFT_COLL_ALLTOALLV:
	case WEFT_COLL_GATHER:
	case WEFT_COLL_SCATTER: return (double)(n - 1) / n;
	case WEFT_COLL_BARRIER: return 0;
	default: return 1;
	}
}

static void busbw(struct weft_mout *o, const struct weft_metrics *list)
{
	weft_mout_header(o, "weft_busbw_bytes_per_second", WEFT_MK_GAUGE,
			 "bus bandwidth of the last successful operation of each collective and "
			 "size class (nccl-tests' busbw)");
	for (const struct weft_metrics *m = list; m; m = m->next)
		for (int c = 0; c < WEFT_COLL_COUNT; c++)
			for (int k = 0; k < WEFT_METRICS_CLASSES; k++) {
				uint64_t ns = weft_counter_get(&m->coll[c].last_ns[k]);
				uint64_t bytes = weft_counter_get(&m->coll[c].last_bytes[k]);
				double f = bus_factor(c, m->comm->nranks);
				if (ns == 0 || f == 0)
					continue;
				char extra[96];
				snprintf(extra, sizeof(extra), ",collective=\"%s\",size=\"%s\"",
					 weft_coll_name((enum weft_coll_kind)c),
					 weft_metrics_class_name[k]);
				weft_mout_d(o, "weft_busbw_bytes_per_second", m->labels, extra,
					    (double)bytes / (ns * 1e-9) * f);
			}
}

typedef uint64_t (*comm_field)(const struct weft_metrics *m);
static uint64_t f_started(const struct weft_metrics *m)
{
	return weft_counter_get(&m->started);
}
static uint64_t f_finished(const struct weft_metrics *m)
{
	return weft_counter_get(&m->finished);
}
static uint64_t f_timeouts(const struct weft_metrics *m)
{
	return weft_counter_get(&m->timeouts);
}

static void per_comm(struct weft_mout *o, const struct weft_metrics *list, const char *base,
		     const char *help, comm_field f)
{
	char name[96];
	snprintf(name, sizeof(name), "%s_total", base);
	weft_mout_header(o, base, WEFT_MK_COUNTER, help);
	for (const struct weft_metrics *m = list; m; m = m->next)
		weft_mout_u(o, name, m->labels, "", f(m));
}

static void in_flight(struct weft_mout *o, const struct weft_metrics *list)
{
	uint64_t now = weft_now_ns();
	weft_mout_header(o, "weft_operation_in_flight", WEFT_MK_GAUGE,
			 "1 while an operation is in flight: the last one called, by collective");
	for (const struct weft_metrics *m = list; m; m = m->next) {
		if (weft_counter_get(&m->started) <= weft_counter_get(&m->finished))
			continue;
		char extra[64];
		snprintf(extra, sizeof(extra), ",collective=\"%s\"",
			 weft_coll_name((enum weft_coll_kind)weft_counter_get(&m->cur_coll)));
		weft_mout_u(o, "weft_operation_in_flight", m->labels, extra, 1);
	}
	weft_mout_header(o, "weft_operation_last_call", WEFT_MK_GAUGE,
			 "the number of the last collective called (0 before the first)");
	for (const struct weft_metrics *m = list; m; m = m->next)
		weft_mout_u(o, "weft_operation_last_call", m->labels, "",
			    weft_counter_get(&m->cur_call));
	weft_mout_header(o, "weft_operation_age_seconds", WEFT_MK_GAUGE,
			 "how long the last operation called has been in flight (0: none is)");
	for (const struct weft_metrics *m = list; m; m = m->next) {
		bool busy = weft_counter_get(&m->started) > weft_counter_get(&m->finished);
		uint64_t since = weft_counter_get(&m->cur_since_ns);
		weft_mout_d(o, "weft_operation_age_seconds", m->labels, "",
			    busy && since && now > since ? (now - since) * 1e-9 : 0);
	}
}

static void events(struct weft_mout *o, const struct weft_metrics *list)
{
	weft_mout_header(
	    o, "weft_events", WEFT_MK_COUNTER,
	    "events of the flight recorder: timeout, abort, failure, failover, repath, revoke, "
	    "shrink, slow, cleared, note");
	for (const struct weft_metrics *m = list; m; m = m->next)
		for (int k = 0; k < WEFT_EV_COUNT; k++) {
			char extra[48];
			snprintf(extra, sizeof(extra), ",kind=\"%s\"",
				 weft_trace_event_name((enum weft_trace_event_kind)k));
			weft_mout_u(o, "weft_events_total", m->labels, extra,
				    atomic_load_explicit(&m->events[k], memory_order_relaxed));
		}
}

void weft_metrics_render_list(const struct weft_metrics *list, enum weft_metrics_format fmt,
			      struct weft_mbuf *b)
{
	struct weft_mout o = {.b = b, .fmt = fmt};
	info(&o, list);
	per_algo(&o, list, "weft_operations", "operations finished, by collective and algorithm",
		 f_ops);
	per_algo(&o, list, "weft_operation_bytes",
		 "bytes the calls passed (count x datatype size), by collective and algorithm",
		 f_bytes);
	per_algo(&o, list, "weft_operation_failures", "operations that ended in an error",
		 f_failed);
	histograms(&o, list);
	busbw(&o, list);
	per_comm(&o, list, "weft_operations_started", "operations called", f_started);
	per_comm(&o, list, "weft_operations_finished", "operations finished, well or not",
		 f_finished);
	in_flight(&o, list);
	per_comm(&o, list, "weft_timeouts", "operations that timed out (WEFT_TIMEOUT)", f_timeouts);
	events(&o, list);
	weft_metrics_render_peers(list, &o);
	weft_slowdet_render(list, &o);
	if (fmt == WEFT_METRICS_OPENMETRICS)
		weft_mbuf_printf(b, "# EOF\n");
}
