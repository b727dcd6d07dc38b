/* stats.c — see stats.h. */
#include "core/stats.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/fail.h"
#include "transports/transport.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/settings.h"

#define STATS_PATH_BYTES 4096
#define STATS_BUF_BYTES	 (64u << 10)
#define STATS_LINE_BYTES 4096 /* a line with 16 sub-flows takes about 1K */
#define STATS_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(9))

struct weft_stats {
	FILE *f;
	char path[STATS_PATH_BYTES];
	double interval_s, t0, next_at;
	char *buf;	/* the FILE's buffer: full lines leave once per interval */
	size_t pending; /* bytes in it */
};

/* Communicators of this process that opened a file, and the rank of the
 * first. A later one (a split) names its file after the first's rank, with
 * ".commN": its own rank is not unique in the job (each child of a split
 * has a rank 0), and two processes must never write one file. */
static pthread_mutex_t opened_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned opened;
static int first_rank;

weft_status_t weft_stats_init(struct weft_comm *comm)
{
	double interval = 0;
	if (!weft_setting_double("WEFT_STATS_INTERVAL", &interval) || !(interval > 0) ||
	    !isfinite(interval))
		return weft_err_set(&comm->err, WEFT_ERR_INVALID_ARG,
				    "WEFT_STATS_INTERVAL=%s: expected seconds (a number above 0)",
				    weft_setting_str("WEFT_STATS_INTERVAL"));
	if (!weft_setting_str("WEFT_STATS_FILE"))
		return WEFT_SUCCESS;
	struct weft_stats *s = calloc(1, sizeof(*s));
	if (!s)
		return weft_err_set(&comm->err, WEFT_ERR_NO_MEMORY, "init: no memory for stats");
	s->interval_s = interval;
	s->t0 = weft_now();
	comm->stats = s;
	return WEFT_SUCCESS;
}

/* @p tmpl with %r the rank and %h the host name (%% a percent sign), and
 * ".RANK" appended if it has no %r. False if it does not fit. */
static bool expand(char *out, size_t len, const char *tmpl, int rank, const char *host)
{
	size_t n = 0;
	bool has_rank = false;
	for (const char *p = tmpl; *p && n < len; p++) {
		int w;
		if (p[0] == '%' && p[1] == 'r') {
			w = snprintf(out + n, len - n, "%d", rank);
			has_rank = true;
		} else if (p[0] == '%' && p[1] == 'h') {
			w = snprintf(out + n, len - n, "%s", host);
		} else if (p[0] == '%' && p[1] == '%') {
			w = snprintf(out + n, len - n, "%%");
		} else {
			out[n++] = *p;
			continue;
		}
		n += (size_t)w;
		p++;
	}
	if (n >= len)
		return false;
	out[n] = '\0';
	if (!has_rank)
		n += (size_t)snprintf(out + n, len - n, ".%d", rank);
	return n < len;
}

/* Truncated, then appended to: if another process writes the same file
 * (a job that ends while the next one with the same path starts), each
 * write() lands whole at the end, and as write_lines() hands stdio only
 * whole lines, no line is torn. */
static FILE *open_lines(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
	FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
	if (!f && fd >= 0) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return f;
}

weft_status_t weft_stats_open(struct weft_comm *comm)
{
	struct weft_stats *s = comm->stats;
	if (!s)
		return WEFT_SUCCESS;
	const char *tmpl = weft_setting_str("WEFT_STATS_FILE");
	pthread_mutex_lock(&opened_lock);
	unsigned nth = opened++;
	if (nth == 0)
		first_rank = comm->rank;
	int rank = first_rank;
	pthread_mutex_unlock(&opened_lock);
	char suffix[24] = "";
	if (nth > 0)
		snprintf(suffix, sizeof(suffix), ".comm%u", nth);
	if (!expand(s->path, sizeof(s->path) - strlen(suffix), tmpl, rank,
		    comm->cards[comm->rank].hostname))
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "init: WEFT_STATS_FILE=%s: path too long", tmpl);
	strcat(s->path, suffix);
	s->buf = malloc(STATS_BUF_BYTES);
	s->f = s->buf ? open_lines(s->path) : NULL;
	if (!s->f)
		return weft_comm_fail_errno(comm, s->buf ? errno : ENOMEM,
					    "init: WEFT_STATS_FILE=%s: cannot open %s", tmpl,
					    s->path);
	setvbuf(s->f, s->buf, _IOFBF, STATS_BUF_BYTES);
	s->next_at = weft_now() + s->interval_s;
	weft_log(WEFT_LOG_INFO, WEFT_SUB_PACE, "stats: every %.3g s to %s", s->interval_s, s->path);
	return WEFT_SUCCESS;
}

/* This rank's leaf name, or NULL where no source named one (the graph
 * then counts each host as its own leaf). */
static const char *leaf_of(const struct weft_comm *comm, int rank)
{
	const struct weft_topo_graph *g = &comm->graph;
	if (!g->leaf_of || rank >= g->nranks)
		return NULL;
	int l = g->leaf_of[rank];
	return g->leaf_source[l] == WEFT_LEAF_NONE ? NULL : g->leaf_name[l];
}

/* The transport's signals: the sums, bytes per sub-flow and each one's
 * share (null while nothing was acked). */
static int add_signals(json_t *o, const struct weft_p2p_link *link)
{
	const struct weft_link_signals *sig = &link->sig;
	if (!link->has_signals)
		return json_object_set_new(o, "ce", json_null()) |
		       json_object_set_new(o, "delivered", json_null()) |
		       json_object_set_new(o, "rtt_us", json_null()) |
		       json_object_set_new(o, "subflow_bytes", json_null()) |
		       json_object_set_new(o, "weights", json_null());
	json_t *bytes = json_array(), *weights = json_array();
	uint64_t total = 0;
	int bad = 0;
	for (unsigned i = 0; i < sig->nsub; i++) {
		bad |= json_array_append_new(bytes, json_integer((json_int_t)sig->sub_bytes[i]));
		total += sig->sub_bytes[i];
	}
	for (unsigned i = 0; i < sig->nsub && total > 0; i++)
		bad |= json_array_append_new(weights,
					     json_real((double)sig->sub_bytes[i] / (double)total));
	if (total == 0) {
		json_decref(weights);
		weights = json_null();
	}
	return bad | json_object_set_new(o, "ce", json_integer((json_int_t)sig->delivered_ce)) |
	       json_object_set_new(o, "delivered", json_integer((json_int_t)sig->delivered)) |
	       json_object_set_new(o, "rtt_us",
				   sig->rtt_us ? json_integer(sig->rtt_us) : json_null()) |
	       json_object_set_new(o, "subflow_bytes", bytes) |
	       json_object_set_new(o, "weights", weights);
}

/* The pacer's state: its mode, and its rate while it limits. */
static int add_pacer(json_t *o, const struct weft_comm *comm, const struct weft_p2p_link *link)
{
	if (!link->paced)
		return json_object_set_new(o, "pacer", json_string("off")) |
		       json_object_set_new(o, "rate_MBps", json_null()) |
		       json_object_set_new(o, "alpha", json_null()) |
		       json_object_set_new(o, "cuts", json_null());
	const struct weft_pacer *pc = &link->pacer;
	return json_object_set_new(o, "pacer",
				   json_string(weft_pacer_mode_name(comm->gate.pacer.mode))) |
	       json_object_set_new(o, "rate_MBps",
				   weft_pacer_limiting(pc) ? json_real(pc->rc_Bps / 1e6)
							   : json_null()) |
	       json_object_set_new(o, "alpha", json_real(pc->alpha)) |
	       json_object_set_new(o, "cuts", json_integer((json_int_t)pc->cuts));
}

/* What keeping the connection's paths has done (the socket transport's
 * failover, WEFT_REPATH; zero where a transport keeps none): sub-flows
 * failed over, moved, replaced on a new port, probes, frames sent again,
 * duplicates dropped, and the sub-flows dark now. */
static int add_paths(json_t *o, const struct weft_conn *conn)
{
	struct weft_tp_paths p = {0};
	if (conn->ops->prop.paths)
		conn->ops->prop.paths((struct weft_conn *)conn, &p);
	int bad = 0;
#define ADD(f) bad |= json_object_set_new(o, #f, json_integer((json_int_t)p.f));
	WEFT_TP_PATH_COUNTERS(ADD)
#undef ADD
	return bad | json_object_set_new(o, "dark", json_integer(p.dark));
}

void weft_stats_paths_sum(struct weft_comm *comm, struct weft_tp_paths *sum)
{
	memset(sum, 0, sizeof(*sum));
	weft_comm_lock(comm);
	for (int peer = 0; peer < comm->nranks; peer++) {
		struct weft_conn *conn = comm->peers[peer].conn;
		struct weft_tp_paths p = {0};
		if (!conn || !conn->ops->prop.paths)
			continue;
		conn->ops->prop.paths(conn, &p);
#define SUM(f) sum->f += p.f;
		WEFT_TP_PATH_COUNTERS(SUM)
#undef SUM
		sum->dark += p.dark;
	}
	weft_comm_unlock(comm);
}

static json_t *leaf_json(const char *name)
{
	return name ? json_string(name) : json_null();
}

static json_t *line(const struct weft_comm *comm, int peer, double t)
{
	const struct weft_p2p_link *link = &comm->peers[peer].link;
	json_t *o = json_pack("{s:f, s:i, s:i, s:s, s:o, s:o, s:s, s:I, s:I}", "t", t, "rank",
			      comm->rank, "peer", peer, "host", comm->cards[comm->rank].hostname,
			      "leaf", leaf_json(leaf_of(comm, comm->rank)), "peer_leaf",
			      leaf_json(leaf_of(comm, peer)), "transport",
			      weft_comm_peer_transport(comm, peer), "bytes",
			      (json_int_t)link->sent_bytes, "msgs", (json_int_t)link->sent_msgs);
	if (o && (add_signals(o, link) | add_pacer(o, comm, link) |
		  add_paths(o, comm->peers[peer].conn)) == 0)
		return o;
	json_decref(o);
	return NULL;
}

/* One line per connection that has sent anything. A line that cannot be
 * built (no memory, a host name that is not UTF-8) is left out, once
 * said. */
static void write_lines(struct weft_comm *comm, struct weft_stats *s, double now)
{
	for (int p = 0; p < comm->nranks; p++) {
		struct weft_p2p_link *link = &comm->peers[p].link;
		if (!comm->peers[p].conn || link->sent_msgs == 0)
			continue;
		weft_gate_sample(link);
		/* Into our own buffer, not json_dumps: the application may have
		 * given jansson an allocator that free() must not see. */
		char text[STATS_LINE_BYTES];
		json_t *o = line(comm, p, now - s->t0);
		size_t n = o ? json_dumpb(o, text, sizeof(text), STATS_JSON_FLAGS) : 0;
		json_decref(o);
		if (n > 0 && n < sizeof(text)) {
			text[n++] = '\n';
			if (s->pending + n > STATS_BUF_BYTES) {
				fflush(s->f); /* before the buffer would split this line */
				s->pending = 0;
			}
			fwrite(text, 1, n, s->f);
			s->pending += n;
		} else {
			weft_log(WEFT_LOG_WARN, WEFT_SUB_PACE, "stats: no line for rank %d", p);
		}
	}
	s->pending = 0;
	if (fflush(s->f) != 0)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_PACE, "stats: %s: %s", s->path, strerror(errno));
}

void weft_stats_tick(struct weft_comm *comm)
{
	struct weft_stats *s = comm->stats;
	if (!s || !s->f)
		return;
	double now = weft_now();
	if (now < s->next_at)
		return;
	/* A long gap between two calls writes once, not once per interval missed. */
	s->next_at += s->interval_s;
	if (s->next_at < now)
		s->next_at = now + s->interval_s;
	write_lines(comm, s, now);
}

void weft_stats_close(struct weft_comm *comm)
{
	struct weft_stats *s = comm->stats;
	if (!s)
		return;
	comm->stats = NULL;
	if (s->f) {
		if (comm->peers)
			write_lines(comm, s, weft_now());
		if (fclose(s->f) != 0)
			weft_log(WEFT_LOG_WARN, WEFT_SUB_PACE, "stats: %s: %s", s->path,
				 strerror(errno));
	}
	free(s->buf);
	free(s);
}
