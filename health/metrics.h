/*
 * metrics.h — counters and histograms for operators, in Prometheus's text
 * format (0.0.4) and OpenMetrics 1.0: a file rewritten every
 * WEFT_METRICS_INTERVAL (WEFT_METRICS_FILE, what node_exporter's textfile
 * collector reads) and an HTTP endpoint per process (WEFT_METRICS_PORT,
 * what Prometheus scrapes; health/metrics_http.c). docs/observability.md
 * lists every series.
 *
 * What is counted, and by whom. The thread that drives a communicator
 * (the caller's or its progress thread) counts operations, bytes and
 * times as operations finish (weft_metrics_op: a few relaxed stores, no
 * lock, no allocation); connections' bytes and TCP's signals are the
 * gate's own counters (core/gate.h), read where they are. The exporter's
 * thread renders from those atomics and the communicator's fixed facts
 * (rank, hosts, leaves), under the exporter's lock alone, so a scrape
 * never waits for an operation and an operation never waits for a scrape.
 *
 * Series are bounded: no label carries anything per operation; per
 * connection series exist for at most WEFT_METRICS_PEERS peers, beyond
 * which a communicator's connections are summed per peer leaf (at most
 * WEFT_METRICS_PEERS leaves, then "other").
 */
#ifndef WEFT_METRICS_H
#define WEFT_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/service.h"
#include "core/task.h"
#include "core/trace.h"
#include "util/counter.h"
#include "weft.h"

struct weft_comm;

/* Size classes of the operation-time histograms, by the call's bytes
 * (count x datatype size): [0, 64K), [64K, 1M), [1M, 16M), [16M, inf). */
#define WEFT_METRICS_CLASSES 4
/* Upper bounds of the histograms' buckets, in ns (then +Inf). */
#define WEFT_METRICS_BUCKETS 12
/* Algorithms counted apart per collective (more: counted as "other"). */
#define WEFT_METRICS_ALGOS 8

extern const uint64_t weft_metrics_bucket_ns[WEFT_METRICS_BUCKETS];
extern const char *const weft_metrics_class_name[WEFT_METRICS_CLASSES];

struct weft_metrics_algo {
	_Atomic(const char *) name; /* static (the algorithm table's); NULL: free slot */
	weft_counter_t ops, bytes, failed;
};

struct weft_metrics_coll {
	struct weft_metrics_algo algo[WEFT_METRICS_ALGOS];
	/* per size class: operations per bucket (not cumulative; the last
	 * one is +Inf), their count and their summed time */
	weft_counter_t hist[WEFT_METRICS_CLASSES][WEFT_METRICS_BUCKETS + 1];
	weft_counter_t count[WEFT_METRICS_CLASSES], sum_ns[WEFT_METRICS_CLASSES];
	/* per size class, the last successful one, for its busbw */
	weft_counter_t last_bytes[WEFT_METRICS_CLASSES], last_ns[WEFT_METRICS_CLASSES];
};

struct weft_metrics {
	struct weft_comm *comm;
	struct weft_metrics *next; /* in the exporter's list */
	struct weft_metrics_coll coll[WEFT_COLL_COUNT];
	weft_counter_t started, finished;
	/* the last operation started: its collective, number and time */
	weft_counter_t cur_coll, cur_call, cur_since_ns;
	weft_counter_t timeouts;
	_Atomic uint64_t events[WEFT_EV_COUNT]; /* any thread: atomic adds */
	int peers_max;				/* WEFT_METRICS_PEERS */
	/* the labels every series of this communicator carries, made once */
	char labels[512];
};

/* The exporter's settings (WEFT_METRICS_*; a bad value fails init, naming
 * it) and, when one is set, the communicator's counters (comm->metrics;
 * NULL otherwise, and every hook below returns at once). */
weft_status_t weft_metrics_init(struct weft_comm *comm);

/* The communicator is ready: its labels, and it joins the exporter (which
 * starts its file thread and HTTP endpoint with the first one). */
void weft_metrics_register(struct weft_comm *comm);

/* It leaves the exporter (waiting for a render under way; the last one
 * out writes the file one last time and stops the exporter). The counters
 * stay: threads still running (the watch's, the progress thread) may
 * count an event or an operation into them until weft_metrics_free. */
void weft_metrics_leave(struct weft_comm *comm);

/* Free the counters, once no other thread can reach them. */
void weft_metrics_free(struct weft_comm *comm);

/* An operation started (call number @p call) / finished at @p now_ns. */
void weft_metrics_started(struct weft_task *task, uint64_t call);
void weft_metrics_op(struct weft_task *task, weft_status_t status, uint64_t now_ns);

/* An event of the flight recorder (any thread). */
void weft_metrics_event(struct weft_comm *comm, enum weft_trace_event_kind kind);

/* The three above as the communicator's observer (core/service.h),
 * attached by health/health.c when the metrics are on. */
extern const struct weft_comm_observer weft_metrics_observer;

/* ---- the exporter (metrics_render.c, metrics_export.c, metrics_http.c) ---- */

enum weft_metrics_format {
	WEFT_METRICS_TEXT = 0,	  /* Prometheus text format 0.0.4 */
	WEFT_METRICS_OPENMETRICS, /* OpenMetrics 1.0.0 */
};

/* A growing buffer of text. */
struct weft_mbuf {
	char *p;
	size_t n, cap;
	bool oom; /* an allocation failed: the text is cut */
};

void weft_mbuf_printf(struct weft_mbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void weft_mbuf_free(struct weft_mbuf *b);

/* Every registered communicator's series in @p format into @p out (which
 * the caller frees). Takes the exporter's lock. */
void weft_metrics_render(enum weft_metrics_format format, struct weft_mbuf *out);

/* The same for one list of communicators, lock held by the caller
 * (metrics_render.c; the unit tests call it on their own). */
void weft_metrics_render_list(const struct weft_metrics *first, enum weft_metrics_format format,
			      struct weft_mbuf *out);

#endif
