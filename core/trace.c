/* trace.c — the flight recorder's rings and hooks (trace.h says why;
 * trace_dump.c writes them out, trace_signal.c installs the handlers). */
#include "core/trace.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/fail.h"
#include "core/task.h"
#include "core/trace_int.h"
#include "core/watch.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/settings.h"

#define TRACE_MAX_OPS (1u << 20) /* 128 MiB: beyond that, a setting's typo */
#define TRACE_EVENTS  256

static const char *const event_names[WEFT_EV_COUNT] = {
    [WEFT_EV_TIMEOUT] = "timeout",   [WEFT_EV_ABORT] = "abort",	  [WEFT_EV_FAILURE] = "failure",
    [WEFT_EV_FAILOVER] = "failover", [WEFT_EV_REPATH] = "repath", [WEFT_EV_REVOKE] = "revoke",
    [WEFT_EV_SHRINK] = "shrink",     [WEFT_EV_SLOW] = "slow",	  [WEFT_EV_CLEARED] = "cleared",
    [WEFT_EV_NOTE] = "note",
};

const char *weft_trace_event_name(enum weft_trace_event_kind kind)
{
	return (unsigned)kind < WEFT_EV_COUNT ? event_names[kind] : "unknown";
}

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

/* Rings are written once at init, so that their pages are faulted in
 * then and never on an operation's path, and aligned to cache lines, so
 * that a record of 128 bytes takes two lines, not three (calloc's 16
 * bytes of alignment made it three). n * size cannot overflow: n is at
 * most TRACE_MAX_OPS. */
static void *prefaulted(size_t n, size_t size)
{
	void *p = aligned_alloc(64, n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

weft_status_t weft_trace_init(struct weft_comm *comm)
{
	long n = 0;
	const char *v = weft_setting_str("WEFT_TRACE_BUFFER");
	if (!weft_setting_long("WEFT_TRACE_BUFFER", &n) || n > TRACE_MAX_OPS)
		return weft_err_set(
		    &comm->err, WEFT_ERR_INVALID_ARG,
		    "WEFT_TRACE_BUFFER=%s: expected a count of operations, 0 (off) to "
		    "%u",
		    v, TRACE_MAX_OPS);
	const char *sig = weft_setting_str("WEFT_TRACE_SIGNAL");
	if (strcmp(sig, "0") != 0 && strcmp(sig, "1") != 0)
		return weft_err_set(&comm->err, WEFT_ERR_INVALID_ARG,
				    "WEFT_TRACE_SIGNAL=%s: expected 0 or 1", sig);
	const char *dir = weft_setting_str("WEFT_TRACE_DIR");
	if (dir && strlen(dir) > 3000)
		return weft_err_set(&comm->err, WEFT_ERR_INVALID_ARG,
				    "WEFT_TRACE_DIR: longer than 3000 bytes");
	struct weft_trace *t = calloc(1, sizeof(*t));
	if (!t)
		return weft_err_set(&comm->err, WEFT_ERR_NO_MEMORY,
				    "init: no memory for the trace");
	comm->trace = t;
	t->comm = comm;
	t->rank = -1;
	t->cap = n > 0 ? pow2_at_least((uint32_t)n) : 0;
	t->ev_cap = TRACE_EVENTS;
	t->ops = t->cap ? prefaulted(t->cap, sizeof(*t->ops)) : NULL;
	t->evs = prefaulted(t->ev_cap, sizeof(*t->evs));
	if ((t->cap && !t->ops) || !t->evs)
		return weft_err_set(&comm->err, WEFT_ERR_NO_MEMORY,
				    "init: no memory for %u trace records", t->cap);
	return WEFT_SUCCESS;
}

/* Host names go into a file name: keep what is safe there. */
static void file_safe(char *out, size_t len, const char *in)
{
	size_t n = 0;
	for (; *in && n + 1 < len; in++) {
		char c = *in;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
		out[n++] = ok ? c : '_';
	}
	out[n] = '\0';
}

void weft_trace_identify(struct weft_comm *comm)
{
	struct weft_trace *t = comm->trace;
	if (!t)
		return;
	t->rank = comm->rank;
	t->nranks = comm->nranks;
	t->pid = getpid();
	snprintf(t->host, sizeof(t->host), "%s", comm->cards[comm->rank].hostname);
	snprintf(t->leaf, sizeof(t->leaf), "%s", weft_comm_leaf_name(comm, comm->rank) ?: "");
	weft_watch_addr(comm, comm->rank, t->addr, sizeof(t->addr));
	for (int i = 0; i < 8; i++)
		snprintf(t->comm_hex + 2 * i, 3, "%02x", comm->id[i]);
	const char *dir = weft_setting_str("WEFT_TRACE_DIR");
	if (dir) {
		char host[WEFT_TRACE_NAME_BYTES];
		file_safe(host, sizeof(host), t->host);
		snprintf(t->path, sizeof(t->path), "%s/weft-trace-%s-r%d-p%d-%s.json", dir, host,
			 t->rank, (int)t->pid, t->comm_hex);
	}
	weft_trace_register(t);
}

void weft_trace_fini(struct weft_comm *comm)
{
	struct weft_trace *t = comm->trace;
	if (!t)
		return;
	weft_trace_unregister(t);
	comm->trace = NULL;
	free(t->ops);
	free(t->evs);
	free(t);
}

static struct weft_trace_op *record_of(const struct weft_task *task)
{
	if (!task->trace_id) /* not recorded (task->trace_rec is stale) */
		return NULL;
	struct weft_trace_op *r = task->trace_rec;
	/* A ring shorter than the operations in flight has reused it. */
	return atomic_load_explicit(&r->id, memory_order_relaxed) == task->trace_id ? r : NULL;
}

void weft_trace_posted(struct weft_task *task, uint64_t call, uint64_t started_ns)
{
	struct weft_trace *t = task->comm->trace;
	task->trace_id = 0;
	if (!t || !t->cap)
		return;
	uint64_t id = ++t->next;
	struct weft_trace_op *r = &t->ops[(id - 1) & (t->cap - 1)];
	const struct weft_coll_args *a = &task->args;
	atomic_store_explicit(&r->id, 0, memory_order_relaxed); /* being rewritten */
	r->call = call;
	r->count = a->count;
	r->bytes = a->count * a->esize;
	r->posted_ns = task->posted_ns;
	r->started_ns = started_ns;
	r->finished_ns = 0;
	r->algo = task->algo_name;
	r->word = (uint32_t)task->seq;
	r->root = a->root;
	r->waiting_for = -1;
	r->wait_step = UINT32_MAX;
	r->status = 0;
	r->coll = (uint8_t)a->coll;
	r->dtype = (uint8_t)a->dtype;
	r->op = (uint8_t)a->op;
	r->wait_send = 0;
	r->group = task->group != 0;
	atomic_store_explicit(&r->state, started_ns ? WEFT_TRACE_STARTED : WEFT_TRACE_POSTED,
			      memory_order_relaxed);
	atomic_store_explicit(&r->id, id, memory_order_release);
	task->trace_id = id;
	task->trace_rec = r;
	/* The next record's lines, fetched for writing now, while this
	 * operation waits for its peers, rather than missed by the next
	 * call's stores (perf annotate: this hook's time sat on its first
	 * store into each line of a record last written a ring ago). */
	__builtin_prefetch(&t->ops[id & (t->cap - 1)], 1);
	__builtin_prefetch((const char *)&t->ops[id & (t->cap - 1)] + 64, 1);
}

void weft_trace_started(struct weft_task *task, uint64_t now_ns)
{
	struct weft_trace_op *r = record_of(task);
	if (!r)
		return;
	r->algo = task->algo_name;
	r->started_ns = now_ns;
	atomic_store_explicit(&r->state, WEFT_TRACE_STARTED, memory_order_relaxed);
}

void weft_trace_waiting(struct weft_task *task)
{
	struct weft_trace_op *r = record_of(task);
	if (!r)
		return;
	r->waiting_for = task->waiting_for;
	r->wait_step = task->waiting_step;
	r->wait_send = task->waiting_send;
}

void weft_trace_finished(struct weft_task *task, weft_status_t status, uint64_t now_ns)
{
	struct weft_trace_op *r = record_of(task);
	if (!r)
		return;
	if (!r->started_ns)
		r->started_ns = r->posted_ns;
	/* The start may have been read on the precise clock and the end on
	 * the coarse one, whose tick lags it by up to a few milliseconds: a
	 * dump's times stay in order. */
	r->finished_ns = now_ns > r->started_ns ? now_ns : r->started_ns;
	r->status = (int16_t)status;
	r->waiting_for = task->waiting_for;
	atomic_store_explicit(&r->state,
			      status == WEFT_SUCCESS ? WEFT_TRACE_DONE : WEFT_TRACE_FAILED,
			      memory_order_relaxed);
}

void weft_trace_event(struct weft_comm *comm, enum weft_trace_event_kind kind, int peer,
		      const char *fmt, ...)
{
	weft_observe_event(&comm->observe, comm, kind);
	struct weft_trace *t = comm->trace;
	if (!t || !t->evs)
		return;
	uint64_t id = atomic_fetch_add(&t->ev_next, 1) + 1;
	struct weft_trace_ev *e = &t->evs[(id - 1) & (t->ev_cap - 1)];
	atomic_store_explicit(&e->id, 0, memory_order_relaxed);
	e->wall_ns = weft_wall_ns();
	e->kind = (int32_t)kind;
	e->peer = peer;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->text, sizeof(e->text), fmt, ap);
	va_end(ap);
	atomic_store_explicit(&e->id, id, memory_order_release);
}

void weft_trace_dump_auto(struct weft_comm *comm, const char *reason)
{
	struct weft_trace *t = comm->trace;
	if (!t || !t->path[0])
		return;
	int err = weft_trace_dump(t, NULL, reason);
	if (err)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_COLL, "trace: cannot write %s: %s", t->path,
			 strerror(err));
	else
		weft_log(WEFT_LOG_WARN, WEFT_SUB_COLL, "trace: %s: flight recorder written to %s",
			 reason, t->path);
}
