/*
 * trace_dump.c — the flight recorder as one JSON file (trace.h).
 *
 * This may run in a signal handler, while the thread it interrupted is
 * half-way through a record or holds any lock: so only async-signal-safe
 * calls (open, write, close, rename, clock_gettime, getpid), no stdio,
 * no allocation, and nothing read but the recorder's own rings, the
 * identity copied into it at init, and a few words of the communicator
 * that are plain memory. A record caught half-written shows as it was;
 * one being rewritten (id 0) is left out. The file is written beside its
 * name and renamed onto it, so a reader never sees half a dump.
 *
 *   {"weft_trace": 1, "library", "reason", "host", "addr", "leaf", "rank",
 *    "nranks", "pid", "comm", "calls", "dumped_us", "mono_ns", "status",
 *    "error", "buffer", "recorded",
 *    "ops": [{"id", "call", "coll", "algo", "dtype", "op", "count",
 *             "bytes", "root", "word", "group", "state", "status",
 *             "posted_us", "started_us", "finished_us", "waiting_for",
 *             "wait", "wait_step"}, ...],   oldest first
 *    "events": [{"t_us", "kind", "peer", "text"}, ...]}
 *
 * Times are microseconds since the epoch (CLOCK_REALTIME at the dump,
 * minus how long ago on CLOCK_MONOTONIC), so that the dumps of a job's
 * hosts line up as well as their clocks do.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h> /* rename */
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/trace.h"
#include "util/clock.h"
#include "util/dtype.h"

struct jw {
	int fd;
	int err; /* the first write error */
	size_t n;
	char buf[2048];
};

static void jw_flush(struct jw *w)
{
	size_t off = 0;
	while (off < w->n && !w->err) {
		ssize_t k = write(w->fd, w->buf + off, w->n - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			w->err = k < 0 ? errno : EIO;
		else
			off += (size_t)k;
	}
	w->n = 0;
}

static void jw_put(struct jw *w, const char *s, size_t len)
{
	while (len > 0) {
		if (w->n == sizeof(w->buf))
			jw_flush(w);
		size_t k = sizeof(w->buf) - w->n < len ? sizeof(w->buf) - w->n : len;
		memcpy(w->buf + w->n, s, k);
		w->n += k;
		s += k;
		len -= k;
	}
}

static void jw_raw(struct jw *w, const char *s)
{
	jw_put(w, s, strlen(s));
}

static void jw_u64(struct jw *w, uint64_t v)
{
	char d[24];
	size_t i = sizeof(d);
	do
		d[--i] = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	jw_put(w, d + i, sizeof(d) - i);
}

static void jw_i64(struct jw *w, int64_t v)
{
	if (v < 0) {
		jw_raw(w, "-");
		jw_u64(w, (uint64_t)0 - (uint64_t)v);
	} else {
		jw_u64(w, (uint64_t)v);
	}
}

/* A JSON string of at most @p max bytes of @p s: control characters
 * escaped, bytes beyond ASCII shown as '?' (a name that is not UTF-8 must
 * not make the file unreadable). */
static void jw_str(struct jw *w, const char *s, size_t max)
{
	static const char hex[] = "0123456789abcdef";
	jw_raw(w, "\"");
	for (size_t i = 0; s && i < max && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			jw_put(w, e, 2);
		} else if (c < 0x20) {
			char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			jw_put(w, e, 6);
		} else {
			char e = c < 0x80 ? (char)c : '?';
			jw_put(w, &e, 1);
		}
	}
	jw_raw(w, "\"");
}

static void jw_key(struct jw *w, const char *k)
{
	jw_raw(w, ",\"");
	jw_raw(w, k);
	jw_raw(w, "\":");
}

static void jw_kstr(struct jw *w, const char *k, const char *v)
{
	jw_key(w, k);
	jw_str(w, v, 1024);
}

static void jw_ki(struct jw *w, const char *k, int64_t v)
{
	jw_key(w, k);
	jw_i64(w, v);
}

static void jw_ku(struct jw *w, const char *k, uint64_t v)
{
	jw_key(w, k);
	jw_u64(w, v);
}

/* Monotonic ns to wall-clock us, by the offset at the dump; 0 stays 0. */
struct clocks {
	uint64_t mono_ns, wall_ns;
};

static void jw_time(struct jw *w, const char *k, uint64_t ns, const struct clocks *c)
{
	jw_key(w, k);
	if (ns == 0 || ns > c->mono_ns) {
		jw_raw(w, ns == 0 ? "null" : "0");
		return;
	}
	jw_u64(w, (c->wall_ns - (c->mono_ns - ns)) / 1000);
}

static const char *state_name(unsigned s)
{
	switch (s) {
	case WEFT_TRACE_POSTED: return "posted";
	case WEFT_TRACE_STARTED: return "started";
	case WEFT_TRACE_DONE: return "done";
	case WEFT_TRACE_FAILED: return "failed";
	default: return "unknown";
	}
}

static void write_op(struct jw *w, const struct weft_trace_op *r, uint64_t id,
		     const struct clocks *c)
{
	static const char hex[] = "0123456789abcdef";
	unsigned state = atomic_load_explicit(&r->state, memory_order_relaxed);
	jw_raw(w, "{\"id\":");
	jw_u64(w, id);
	jw_ku(w, "call", r->call);
	jw_kstr(w, "coll", weft_coll_name((enum weft_coll_kind)r->coll));
	jw_key(w, "algo");
	if (r->algo)
		jw_str(w, r->algo, 64);
	else
		jw_raw(w, "null");
	jw_kstr(w, "dtype", weft_dtype_name((weft_datatype_t)r->dtype));
	jw_kstr(w, "op", weft_op_name((weft_op_t)r->op));
	jw_ku(w, "count", r->count);
	jw_ku(w, "bytes", r->bytes);
	jw_ki(w, "root", r->root);
	char word[12] = "\"0x";
	for (int i = 0; i < 8; i++)
		word[3 + i] = hex[(r->word >> (28 - 4 * i)) & 15];
	jw_key(w, "word");
	jw_put(w, word, 11);
	jw_raw(w, "\"");
	jw_ki(w, "group", r->group);
	jw_kstr(w, "state", state_name(state));
	jw_key(w, "status");
	if (state == WEFT_TRACE_DONE || state == WEFT_TRACE_FAILED)
		jw_str(w, weft_status_string((weft_status_t)r->status), 64);
	else
		jw_raw(w, "null");
	jw_time(w, "posted_us", r->posted_ns, c);
	jw_time(w, "started_us", r->started_ns, c);
	jw_time(w, "finished_us", r->finished_ns, c);
	jw_ki(w, "waiting_for", r->waiting_for);
	jw_kstr(w, "wait", r->waiting_for < 0 ? "" : r->wait_send ? "send" : "recv");
	jw_key(w, "wait_step");
	if (r->wait_step == UINT32_MAX || r->waiting_for < 0)
		jw_raw(w, "null");
	else
		jw_u64(w, r->wait_step);
	jw_raw(w, "}");
}

/* The ring's records oldest first; one being rewritten is left out. */
static void write_ops(struct jw *w, const struct weft_trace *t, const struct clocks *c)
{
	jw_raw(w, ",\"ops\":[");
	uint64_t last = t->next, first = last > t->cap ? last - t->cap + 1 : 1;
	bool any = false;
	for (uint64_t id = first; t->cap && id <= last; id++) {
		const struct weft_trace_op *r = &t->ops[(id - 1) & (t->cap - 1)];
		if (atomic_load_explicit(&r->id, memory_order_acquire) != id)
			continue;
		if (any)
			jw_raw(w, ",");
		write_op(w, r, id, c);
		any = true;
	}
	jw_raw(w, "]");
}

static void write_events(struct jw *w, const struct weft_trace *t, const struct clocks *c)
{
	jw_raw(w, ",\"events\":[");
	uint64_t last = atomic_load(&t->ev_next),
		 first = last > t->ev_cap ? last - t->ev_cap + 1 : 1;
	bool any = false;
	for (uint64_t id = first; id <= last; id++) {
		const struct weft_trace_ev *e = &t->evs[(id - 1) & (t->ev_cap - 1)];
		if (atomic_load_explicit(&e->id, memory_order_acquire) != id)
			continue;
		jw_raw(w, any ? ",{\"t_us\":" : "{\"t_us\":");
		jw_u64(w, e->wall_ns / 1000);
		jw_kstr(w, "kind", weft_trace_event_name((enum weft_trace_event_kind)e->kind));
		jw_ki(w, "peer", e->peer);
		jw_key(w, "text");
		jw_str(w, e->text, sizeof(e->text));
		jw_raw(w, "}");
		any = true;
	}
	jw_raw(w, "]");
}

static void write_head(struct jw *w, const struct weft_trace *t, const char *reason,
		       const struct clocks *c)
{
	const struct weft_comm *comm = t->comm;
	jw_raw(w, "{\"weft_trace\":1");
	jw_kstr(w, "library", weft_version());
	jw_kstr(w, "reason", reason);
	jw_kstr(w, "host", t->host);
	jw_kstr(w, "addr", t->addr);
	jw_kstr(w, "leaf", t->leaf);
	jw_ki(w, "rank", t->rank);
	jw_ki(w, "nranks", t->nranks);
	jw_ki(w, "pid", t->pid);
	jw_kstr(w, "comm", t->comm_hex);
	jw_ku(w, "calls", comm->seq);
	jw_ku(w, "dumped_us", c->wall_ns / 1000);
	jw_ku(w, "mono_ns", c->mono_ns);
	int st = atomic_load(&comm->async_error);
	jw_kstr(w, "status", weft_status_string((weft_status_t)st));
	jw_key(w, "error");
	jw_str(w, comm->err.msg, sizeof(comm->err.msg));
	jw_ku(w, "buffer", t->cap);
	jw_ku(w, "recorded", t->next);
}

/* @p a then @p b into @p out (of @p len): false if it does not fit. */
static bool join(char *out, size_t len, const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la + lb + 1 > len)
		return false;
	memcpy(out, a, la);
	memcpy(out + la, b, lb + 1);
	return true;
}

int weft_trace_dump(struct weft_trace *t, const char *path, const char *reason)
{
	if (!path)
		path = t->path;
	if (!path[0])
		return ENOENT;
	char tmp[4200];
	if (!join(tmp, sizeof(tmp), path, ".partial"))
		return ENAMETOOLONG;
	atomic_fetch_add(&t->dumping, 1);
	struct jw w = {.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
	if (w.fd < 0) {
		int e = errno;
		atomic_fetch_sub(&t->dumping, 1);
		return e;
	}
	struct clocks c = {.mono_ns = weft_now_ns(), .wall_ns = weft_wall_ns()};
	write_head(&w, t, reason, &c);
	write_ops(&w, t, &c);
	write_events(&w, t, &c);
	jw_raw(&w, "}\n");
	jw_flush(&w);
	if (close(w.fd) != 0 && !w.err)
		w.err = errno;
	if (!w.err && rename(tmp, path) != 0)
		w.err = errno;
	if (w.err)
		unlink(tmp);
	atomic_fetch_sub(&t->dumping, 1);
	return w.err;
}
