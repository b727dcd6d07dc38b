/*
 * metrics_export.c — the process's exporter: the list of communicators
 * whose series it shows, the file it rewrites every WEFT_METRICS_INTERVAL
 * (a thread of its own, off every operation's path), and the HTTP
 * endpoint (metrics_http.c). One per process whatever the number of
 * communicators (each adds its series, labelled by communicator); it
 * starts with the first communicator and stops with the last, writing the
 * file one last time, so nothing listens once the job has let go of Weft.
 *
 * The file: WEFT_METRICS_FILE with %r the rank (of the process's first
 * communicator), %h the host name, %p the pid; without %r or %p, "-rRANK"
 * goes before a final ".prom" (node_exporter reads only *.prom) or
 * ".RANK" at the end, so that the ranks of a host never share a file. It
 * is written beside its name and renamed onto it: a reader sees the last
 * whole file, never half of one.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/comm.h"
#include "health/metrics_int.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/settings.h"

static struct {
	pthread_mutex_t lock; /* the list, and whatever a render reads */
	struct weft_metrics *list;
	char job[64];
	int first_rank;
	/* the file */
	char path[4096];
	double interval_s;
	pthread_t thread;
	bool running, stop;
	bool stopping; /* the last one left and the threads are being joined */
	pthread_cond_t cond, stopped;
	/* the endpoint */
	struct weft_metrics_http *http;
} ex = {.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.stopped = PTHREAD_COND_INITIALIZER};

void weft_metrics_render(enum weft_metrics_format format, struct weft_mbuf *out)
{
	pthread_mutex_lock(&ex.lock);
	weft_metrics_render_list(ex.list, format, out);
	pthread_mutex_unlock(&ex.lock);
}

static bool expand(char *out, size_t len, const char *tmpl, int rank, const char *host)
{
	size_t n = 0;
	bool named = false;
	for (const char *p = tmpl; *p && n + 1 < len; p++) {
		if (p[0] != '%' || !p[1]) {
			out[n++] = *p;
			continue;
		}
		p++;
		int w = *p == 'r'   ? snprintf(out + n, len - n, "%d", rank)
			: *p == 'h' ? snprintf(out + n, len - n, "%s", host)
			: *p == 'p' ? snprintf(out + n, len - n, "%d", (int)getpid())
				    : snprintf(out + n, len - n, "%c", *p);
		named |= *p == 'r' || *p == 'p';
		n += (size_t)w;
	}
	if (n >= len)
		return false;
	out[n] = '\0';
	if (named)
		return true;
	char *dot = n > 5 && strcmp(out + n - 5, ".prom") == 0 ? out + n - 5 : NULL;
	char tail[32];
	snprintf(tail, sizeof(tail), dot ? "-r%d.prom" : ".%d", rank);
	if ((dot ? (size_t)(dot - out) : n) + strlen(tail) + 1 > len)
		return false;
	strcpy(dot ? dot : out + n, tail);
	return true;
}

/* One render into the file, written beside it and renamed onto it. */
static void write_file(void)
{
	struct weft_mbuf b = {0};
	weft_metrics_render_list(ex.list, WEFT_METRICS_TEXT, &b);
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", ex.path, (int)getpid());
	int fd = b.oom ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	bool ok = fd >= 0;
	for (size_t off = 0; ok && off < b.n;) {
		ssize_t k = write(fd, b.p + off, b.n - off);
		if (k < 0 && errno == EINTR)
			continue;
		ok = k > 0;
		off += ok ? (size_t)k : 0;
	}
	int err = errno;
	if (fd >= 0 && close(fd) != 0)
		ok = false;
	if (ok && rename(tmp, ex.path) != 0) {
		err = errno;
		ok = false;
	}
	if (!ok) {
		if (fd >= 0)
			unlink(tmp);
		weft_log(WEFT_LOG_WARN, WEFT_SUB_INIT, "metrics: cannot write %s: %s", ex.path,
			 b.oom ? "no memory" : strerror(err));
	}
	weft_mbuf_free(&b);
}

static void *file_thread(void *arg)
{
	pthread_mutex_lock(&ex.lock);
	while (!ex.stop) {
		write_file();
		struct timespec until = weft_wall_after(ex.interval_s);
		while (!ex.stop && pthread_cond_timedwait(&ex.cond, &ex.lock, &until) == 0)
			;
	}
	pthread_mutex_unlock(&ex.lock);
	return NULL;
}

/* The first communicator: the job label, the file's thread, the endpoint. */
static void start(const struct weft_comm *comm, int local_rank)
{
	const char *job = weft_setting_str("WEFT_METRICS_JOB");
	if (job)
		snprintf(ex.job, sizeof(ex.job), "%s", job);
	else
		for (int i = 0; i < 8; i++)
			snprintf(ex.job + 2 * i, 3, "%02x", comm->id[i]);
	ex.first_rank = comm->rank;
	const char *tmpl = weft_setting_str("WEFT_METRICS_FILE");
	weft_setting_double("WEFT_METRICS_INTERVAL", &ex.interval_s);
	ex.stop = false;
	if (tmpl &&
	    !expand(ex.path, sizeof(ex.path), tmpl, comm->rank, comm->cards[comm->rank].hostname))
		weft_log(WEFT_LOG_WARN, WEFT_SUB_INIT, "metrics: WEFT_METRICS_FILE=%s: too long",
			 tmpl);
	else if (tmpl && pthread_create(&ex.thread, NULL, file_thread, NULL) == 0)
		ex.running = true;
	long port = 0, conns = 8;
	if (weft_setting_str("WEFT_METRICS_PORT") &&
	    weft_setting_long("WEFT_METRICS_PORT", &port)) {
		weft_setting_long("WEFT_METRICS_CONNECTIONS", &conns);
		if (port + local_rank > 65535)
			weft_log(WEFT_LOG_WARN, WEFT_SUB_INIT,
				 "metrics: WEFT_METRICS_PORT %ld + local rank %d is past 65535",
				 port, local_rank);
		else
			ex.http = weft_metrics_http_start(weft_setting_str("WEFT_METRICS_ADDR"),
							  (int)port + local_rank, (int)conns);
	}
}

/* The last communicator left: the file one last time, then nothing. */
static void stop(void)
{
	struct weft_metrics_http *h = ex.http;
	ex.http = NULL;
	bool running = ex.running;
	ex.running = false;
	ex.stop = true;
	ex.stopping = true;
	pthread_cond_signal(&ex.cond);
	pthread_mutex_unlock(&ex.lock);
	weft_metrics_http_stop(h); /* its handler takes the lock */
	if (running)
		pthread_join(ex.thread, NULL);
	pthread_mutex_lock(&ex.lock);
	ex.stopping = false;
	pthread_cond_broadcast(&ex.stopped);
}

static void make_labels(struct weft_metrics *m)
{
	const struct weft_comm *c = m->comm;
	const char *leaf = weft_comm_leaf_name(c, c->rank);
	char comm_hex[17];
	for (int i = 0; i < 8; i++)
		snprintf(comm_hex + 2 * i, 3, "%02x", c->id[i]);
	struct weft_mbuf b = {0};
	/* "weft_job", not "job": Prometheus's own job label names the scrape
	 * job, and a target's would be renamed exported_job. */
	weft_mbuf_printf(&b, "weft_job=\"");
	weft_mbuf_label(&b, ex.job);
	weft_mbuf_printf(&b, "\",rank=\"%d\",host=\"", c->rank);
	weft_mbuf_label(&b, c->cards[c->rank].hostname);
	weft_mbuf_printf(&b, "\",leaf=\"");
	weft_mbuf_label(&b, leaf ? leaf : "");
	weft_mbuf_printf(&b, "\",comm=\"%s\"", comm_hex);
	snprintf(m->labels, sizeof(m->labels), "%s", b.p ? b.p : "");
	weft_mbuf_free(&b);
}

void weft_metrics_export_add(struct weft_metrics *m, int local_rank)
{
	pthread_mutex_lock(&ex.lock);
	while (ex.stopping) /* a last one leaving in another thread */
		pthread_cond_wait(&ex.stopped, &ex.lock);
	bool first = !ex.list;
	if (first)
		start(m->comm, local_rank);
	make_labels(m);
	struct weft_metrics **link = &ex.list;
	while (*link)
		link = &(*link)->next;
	*link = m;
	pthread_mutex_unlock(&ex.lock);
}

void weft_metrics_export_remove(struct weft_metrics *m)
{
	pthread_mutex_lock(&ex.lock);
	bool last = ex.list == m && !m->next;
	if (last && ex.running)
		write_file(); /* the final counts, while it is still listed */
	bool found = false;
	for (struct weft_metrics **link = &ex.list; *link; link = &(*link)->next)
		if (*link == m) {
			*link = m->next;
			found = true;
			break;
		}
	if (found && !ex.list)
		stop();
	pthread_mutex_unlock(&ex.lock);
}
