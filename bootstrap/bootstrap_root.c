/*
 * bootstrap_root.c — the root listener thread of the bootstrap: accepts the
 * ranks' connections, checks their hellos, serves the join and each
 * allgather, enforces the deadlines and tells the ranks why a job failed.
 * The protocol is described in bootstrap_wire.h.
 */
#define _GNU_SOURCE
#include "bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap_root.h"
#include "bootstrap/bootstrap_wire.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/proc.h"
#include "util/settings.h"

/* The job is over: every rank still connected is told why. */
static void root_fail(struct root *r, weft_status_t status, const char *text)
{
	struct blob *b;

	if (r->failed)
		return;
	r->failed = true;
	r->fail_status = status;
	r->fail_time = weft_bootstrap_wire_now_s();
	snprintf(r->fail_text, sizeof(r->fail_text), "%s", text);
	weft_log(WEFT_LOG_WARN, WEFT_SUB_BOOT, "bootstrap root %s: job failed: %s", r->addr, text);
	b = error_blob(status, text);
	for (size_t i = 0; i < r->nconns; i++) {
		struct conn *c = r->conns[i];

		if (c->phase != CONN_JOINED)
			continue;
		c->drain = true;
		if (b)
			conn_queue(c, FRAME_ERROR, r->op_seq, b);
		else
			conn_close(c);
	}
	blob_put(b);
	blob_put(r->op_blob);
	r->op_blob = NULL;
	r->op_pending = false;
}

/* No one else may join: close the door rather than accept and read
 * strangers for the rest of init (poll skips fd -1), and tell the ranks. */
static void root_all_joined(struct root *r)
{
	r->all_joined = true;
	/* shutdown first: a child forked since holds the socket too, and close
	 * alone would leave it listening (connections queued, never read). */
	shutdown(r->listen_fd, SHUT_RDWR);
	close(r->listen_fd);
	r->listen_fd = -1;
	weft_log(WEFT_LOG_INFO, WEFT_SUB_BOOT,
		 "bootstrap root %s: all %d ranks joined; listener closed; relay fan-out %d",
		 r->addr, r->nranks, r->fanout);
	for (int rank = 0; rank < r->nranks; rank++) {
		struct blob *b = blob_new(sizeof(struct ready));
		int parent = relay_parent(rank, r->fanout);
		struct ready ready = {.fanout = (uint32_t)r->fanout};

		if (!b) {
			root_fail(r, WEFT_ERR_NO_MEMORY, "bootstrap: root is out of memory");
			return;
		}
		if (parent >= 0) {
			const struct conn *p = r->by_rank[parent];

			ready.parent_len = (uint32_t)p->addr_len;
			memcpy(&ready.parent, &p->addr, p->addr_len);
			/* the port the parent listens on, where it connected from */
			if (p->addr.sa.sa_family == AF_INET)
				ready.parent.in4.sin_port = htons((uint16_t)p->join.relay_port);
			else
				ready.parent.in6.sin6_port = htons((uint16_t)p->join.relay_port);
		}
		memcpy(b->data, &ready, sizeof(ready));
		conn_queue(r->by_rank[rank], FRAME_READY, 0, b);
		blob_put(b);
	}
}

/*
 * The root holds a connection per rank until init ends: a job of @p nranks
 * needs that many descriptors in this process, and more. Raise the soft
 * limit toward the hard one if need be; false (and why in @p text) when
 * even the hard limit is too low, so that the job fails at once, saying
 * so, rather than the accepts failing and the join timing out.
 */
static bool root_fd_budget(struct root *r, int nranks, char *text, size_t size)
{
	rlim_t need = (rlim_t)nranks + (rlim_t)r->max_pending + FD_SLACK;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= need)
		return true;
	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) {
		rlim_t was = rl.rlim_cur;

		rl.rlim_cur = need;
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0) {
			weft_log(WEFT_LOG_INFO, WEFT_SUB_BOOT,
				 "bootstrap root %s: raised the descriptor limit from %llu to %llu "
				 "for %d ranks",
				 r->addr, (unsigned long long)was, (unsigned long long)need,
				 nranks);
			return true;
		}
	}
	snprintf(text, size,
		 "bootstrap: the root holds a connection per rank until init ends: %d ranks need "
		 "about %llu descriptors in its process, and its limit is %llu (hard limit %llu); "
		 "raise `ulimit -n` where the root runs",
		 nranks, (unsigned long long)need, (unsigned long long)rl.rlim_cur,
		 (unsigned long long)rl.rlim_max);
	return false;
}

/* The first valid join gives the job's size: the tables, the descriptors. */
static bool root_size_job(struct root *r, struct conn *c)
{
	const struct join *h = &c->join;
	size_t n = (size_t)h->nranks;
	char text[400];

	if (!root_fd_budget(r, h->nranks, text, sizeof(text))) {
		root_fail(r, WEFT_ERR_SYSTEM, text);
		conn_refuse(r, c, WEFT_ERR_SYSTEM, text);
		r->fail_nranks = h->nranks;
		r->told = 1;
		return false;
	}
	r->by_rank = calloc(n, sizeof(*r->by_rank));
	r->gone = calloc(n, sizeof(*r->gone));
	r->scratch = calloc(n, sizeof(*r->scratch));
	r->op_have = calloc(n, sizeof(*r->op_have));
	if (!r->by_rank || !r->gone || !r->scratch || !r->op_have) {
		conn_refuse(r, c, WEFT_ERR_NO_MEMORY, "bootstrap: root is out of memory");
		return false;
	}
	r->nranks = h->nranks;
	r->nranks_from = c->rank;
	r->join_start = weft_bootstrap_wire_now_s();
	return true;
}

/* An authenticated rank: its join must fit the job's. */
static void root_on_join(struct root *r, struct conn *c)
{
	const struct join *h = &c->join;
	int rank = c->rank;
	char text[400];

	if (r->failed) {
		snprintf(text, sizeof(text),
			 "bootstrap: rank %d arrived after the job failed: %.300s", rank,
			 r->fail_text);
		conn_refuse(r, c, r->fail_status, text);
		r->told++;
		if (r->nranks && rank >= 0 && rank < r->nranks)
			r->gone[rank] = true; /* told: root_all_told */
		return;
	}
	if (h->nranks < 1 || h->nranks > WEFT_MAX_RANKS) {
		snprintf(text, sizeof(text), "bootstrap: nranks %d is out of range 1..%d",
			 h->nranks, WEFT_MAX_RANKS);
		conn_refuse(r, c, WEFT_ERR_INVALID_ARG, text);
		return;
	}
	if (r->nranks && h->nranks != r->nranks) {
		snprintf(text, sizeof(text),
			 "bootstrap: rank %d says nranks %d, but rank %d joined with nranks %d",
			 rank, h->nranks, r->nranks_from, r->nranks);
		conn_refuse(r, c, WEFT_ERR_INVALID_ARG, text);
		return;
	}
	if (h->relay_port == 0 || h->relay_port > 65535 || c->addr_len == 0) {
		snprintf(text, sizeof(text),
			 "bootstrap: rank %d's join names no relay port (%u) or comes from an "
			 "address that is not IPv4 or IPv6",
			 rank, h->relay_port);
		conn_refuse(r, c, WEFT_ERR_INVALID_ARG, text);
		return;
	}
	if (rank < 0 || rank >= h->nranks) {
		snprintf(text, sizeof(text), "bootstrap: rank %d is out of range for %d ranks",
			 rank, h->nranks);
		conn_refuse(r, c, WEFT_ERR_INVALID_ARG, text);
		return;
	}
	if (!r->nranks && !root_size_job(r, c))
		return;
	if (r->by_rank[rank] || r->gone[rank]) {
		snprintf(text, sizeof(text), "bootstrap: rank %d already joined%s%s", rank,
			 r->by_rank[rank] ? " from " : "",
			 r->by_rank[rank] ? r->by_rank[rank]->peer : "");
		conn_refuse(r, c, WEFT_ERR_INVALID_ARG, text);
		return;
	}
	c->phase = CONN_JOINED;
	r->by_rank[rank] = c;
	r->joined++;
	weft_log(WEFT_LOG_INFO, WEFT_SUB_BOOT, "bootstrap root %s: rank %d joined from %s (%d/%d)",
		 r->addr, rank, c->peer, r->joined, r->nranks);
	if (r->joined == r->nranks)
		root_all_joined(r);
}

/* A connection that failed the handshake: closed unanswered. The first few
 * are named; a flood of them is counted (the summary at the root's end). */
static void root_stranger(struct root *r, struct conn *c, const char *why)
{
	if (++r->refused <= 3)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_BOOT,
			 "bootstrap root %s: dropped connection from %s: %s%s", r->addr, c->peer,
			 why, r->refused == 3 ? " (further ones are counted, not logged)" : "");
	conn_left_hello(r, c);
	conn_close(c);
}

/* Move a connection's handshake along (util/handshake.h). */
static void root_handshake(struct root *r, struct conn *c)
{
	struct root_answer answer;
	struct weft_err err = {0};

	for (;;) {
		switch (weft_hs_step(&c->hs)) {
		case WEFT_HS_AGAIN: return;
		case WEFT_HS_HELLO:
			if (c->hs.hello.role != WEFT_HS_ROOT || c->hs.hello.peer != -1) {
				root_stranger(r, c,
					      "a handshake meant for another kind of listener");
				return;
			}
			memcpy(answer.job_id, r->job_id, sizeof(answer.job_id));
			if (weft_hs_answer(&c->hs, &r->key, -1, &answer, sizeof(answer), &err) !=
			    WEFT_SUCCESS) {
				root_stranger(r, c, err.msg);
				return;
			}
			continue;
		case WEFT_HS_OK:
			c->rank = c->hs.hello.rank;
			memcpy(&c->join, c->hs.hello.payload, sizeof(c->join));
			conn_left_hello(r, c);
			root_on_join(r, c);
			return;
		case WEFT_HS_REFUSED: root_stranger(r, c, c->hs.why); return;
		case WEFT_HS_IO_ERROR: {
			char why[160];

			snprintf(why, sizeof(why), "%s: %s", c->hs.why,
				 c->hs.errnum ? strerror(c->hs.errnum) : "closed");
			root_stranger(r, c, why);
			return;
		}
		}
	}
}

/* A new allgather starts with this block: every rank must still be there. */
static bool root_op_start(struct root *r, struct conn *c, size_t bytes)
{
	char text[400], who[300];
	bool any = false;

	for (int i = 0; i < r->nranks; i++) {
		r->scratch[i] = r->gone[i];
		any |= r->gone[i];
	}
	if (any) {
		weft_bootstrap_wire_ranks_format(r->scratch, r->nranks, 0, who, sizeof(who));
		snprintf(text, sizeof(text),
			 "bootstrap allgather #%u: %s closed the bootstrap before it", r->op_seq,
			 who);
		root_fail(r, WEFT_ERR_REMOTE, text);
		return false;
	}
	r->op_blob = blob_new((size_t)r->nranks * bytes);
	if (!r->op_blob) {
		root_fail(r, WEFT_ERR_NO_MEMORY, "bootstrap: root is out of memory");
		return false;
	}
	memset(r->op_have, 0, (size_t)r->nranks * sizeof(*r->op_have));
	r->op_pending = true;
	r->op_bytes = bytes;
	r->op_first = c->rank;
	r->op_count = 0;
	r->op_start = weft_bootstrap_wire_now_s();
	return true;
}

/* A joined rank's frame header is in: decide where its payload goes. */
static void root_on_rank_header(struct root *r, struct conn *c)
{
	const struct frame_hdr *h = &c->hdr;
	uint64_t max_block = MAX_TOTAL_BYTES / (uint64_t)r->nranks;
	char text[400];

	if (h->type == FRAME_BYE && h->len == 0 && r->all_joined)
		return;
	/* a goodbye before READY too: no rank may leave a job still forming */
	if (h->type != FRAME_GATHER || !r->all_joined) {
		snprintf(text, sizeof(text),
			 "bootstrap: rank %d sent an unexpected frame (type %u, %llu bytes)",
			 c->rank, h->type, (unsigned long long)h->len);
		root_fail(r, WEFT_ERR_REMOTE, text);
		return;
	}
	if (h->seq != r->op_seq) {
		snprintf(text, sizeof(text),
			 "bootstrap: rank %d is at allgather #%u, the job at #%u (ranks must make "
			 "the same bootstrap calls in the same order)",
			 c->rank, h->seq, r->op_seq);
		root_fail(r, WEFT_ERR_REMOTE, text);
		return;
	}
	if (h->len > max_block) {
		snprintf(text, sizeof(text),
			 "bootstrap allgather #%u: rank %d sent %llu bytes, more than the limit of "
			 "%llu per rank for %d ranks",
			 h->seq, c->rank, (unsigned long long)h->len, (unsigned long long)max_block,
			 r->nranks);
		root_fail(r, WEFT_ERR_INVALID_ARG, text);
		return;
	}
	if (!r->op_pending && !root_op_start(r, c, (size_t)h->len))
		return;
	if (h->len != r->op_bytes) {
		snprintf(
		    text, sizeof(text),
		    "bootstrap allgather #%u: rank %d gives %llu bytes, rank %d gives %zu (every "
		    "rank must pass the same size)",
		    h->seq, c->rank, (unsigned long long)h->len, r->op_first, r->op_bytes);
		root_fail(r, WEFT_ERR_INVALID_ARG, text);
		return;
	}
	if (r->op_have[c->rank]) {
		snprintf(text, sizeof(text),
			 "bootstrap allgather #%u: rank %d sent its block twice", h->seq, c->rank);
		root_fail(r, WEFT_ERR_REMOTE, text);
		return;
	}
	c->in_dst = r->op_blob->data + (size_t)c->rank * r->op_bytes;
	c->in_len = (size_t)h->len;
}

static void root_on_rank_frame(struct root *r, struct conn *c, const struct frame_hdr *h)
{
	char text[400];

	if (h->type == FRAME_BYE) {
		c->bye = true;
		if (r->op_pending && !r->op_have[c->rank]) {
			snprintf(text, sizeof(text),
				 "bootstrap allgather #%u: rank %d closed the bootstrap instead",
				 r->op_seq, c->rank);
			root_fail(r, WEFT_ERR_REMOTE, text);
		}
		return;
	}
	r->op_have[c->rank] = true;
	if (++r->op_count < r->nranks)
		return;
	/* Packed once, to the relay tree's top; each rank forwards it to its
	 * children. */
	{
		int first, count = relay_children(-1, r->fanout, r->nranks, &first);
		struct blob *z = r->op_blob->len ? blob_deflate(r->op_blob) : r->op_blob;

		if (!z) {
			snprintf(text, sizeof(text),
				 "bootstrap allgather #%u: root could not compress its %zu-byte "
				 "result (out of memory)",
				 r->op_seq, r->op_blob->len);
			root_fail(r, WEFT_ERR_NO_MEMORY, text);
			return;
		}
		for (int i = first; i < first + count; i++)
			if (r->by_rank[i])
				conn_queue(r->by_rank[i], FRAME_GATHER, r->op_seq, z);
		if (z != r->op_blob)
			blob_put(z);
	}
	blob_put(r->op_blob);
	r->op_blob = NULL;
	r->op_pending = false;
	r->op_seq++;
}

/* A frame header is complete: validate it and point the payload somewhere. */
static void root_on_header(struct root *r, struct conn *c)
{
	c->in_dst = NULL;
	c->in_len = 0;
	c->in_got = 0;
	root_on_rank_header(r, c);
}

static void root_on_frame(struct root *r, struct conn *c)
{
	struct frame_hdr h = c->hdr;

	c->hdr_got = 0;
	c->in_dst = NULL;
	if (c->drain || c->phase == CONN_DEAD)
		return;
	if (c->phase == CONN_JOINED)
		root_on_rank_frame(r, c, &h);
}

void root_conn_lost(struct root *r, struct conn *c, const char *why)
{
	char text[400];

	if (c->phase == CONN_HELLO) {
		snprintf(text, sizeof(text), "closed during the handshake (%s)", why);
		root_stranger(r, c, text);
		return;
	}
	if (c->phase == CONN_JOINED) {
		r->by_rank[c->rank] = NULL;
		r->gone[c->rank] = true;
		if (!c->bye && !r->failed) {
			snprintf(
			    text, sizeof(text),
			    "bootstrap: rank %d left the bootstrap (its connection to the root "
			    "%s)",
			    c->rank, why);
			conn_close(c);
			root_fail(r, WEFT_ERR_REMOTE, text);
			return;
		}
		weft_log(WEFT_LOG_TRACE, WEFT_SUB_BOOT, "bootstrap root %s: rank %d closed",
			 r->addr, c->rank);
	}
	conn_close(c);
}

static void root_read(struct root *r, struct conn *c)
{
	unsigned char sink[4096];

	if (c->phase == CONN_HELLO) {
		root_handshake(r, c);
		return;
	}
	while (c->phase != CONN_DEAD) {
		unsigned char *dst;
		size_t want;
		ssize_t n;

		if (c->drain) {
			dst = sink;
			want = sizeof(sink);
		} else if (c->hdr_got < sizeof(c->hdr)) {
			dst = (unsigned char *)&c->hdr + c->hdr_got;
			want = sizeof(c->hdr) - c->hdr_got;
		} else {
			dst = c->in_dst + c->in_got;
			want = c->in_len - c->in_got;
		}
		n = recv(c->fd, dst, want, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				root_conn_lost(r, c, strerror(errno));
			return;
		}
		if (n == 0) {
			root_conn_lost(r, c, "closed");
			return;
		}
		r->bytes_in += (uint64_t)n;
		if (c->drain)
			continue;
		if (c->hdr_got < sizeof(c->hdr)) {
			c->hdr_got += (size_t)n;
			if (c->hdr_got < sizeof(c->hdr))
				continue;
			root_on_header(r, c);
			if (c->phase != CONN_DEAD && !c->drain && c->in_len == 0)
				root_on_frame(r, c);
			continue;
		}
		c->in_got += (size_t)n;
		if (c->in_got == c->in_len)
			root_on_frame(r, c);
	}
}

/* How often the pids of ranks not joined yet are checked, in seconds. */
#define PID_CHECK_S 0.05

/* A rank not joined yet whose pid on this host is gone: the job fails at
 * once, naming it (true), rather than when the join's time runs out. */
static bool root_member_died(struct root *r)
{
	char text[200];

	if (!r->local_pids || r->npids != r->nranks)
		return false;
	for (int i = 0; i < r->nranks; i++) {
		if (r->by_rank[i] || r->local_pids[i] <= 0 ||
		    weft_pid_state((pid_t)r->local_pids[i]) != WEFT_PID_GONE)
			continue;
		snprintf(text, sizeof(text),
			 "bootstrap: rank %d (pid %lld on this host) died before it joined", i,
			 (long long)r->local_pids[i]);
		root_fail(r, WEFT_ERR_REMOTE, text);
		return true;
	}
	return false;
}

/* Fail whatever wait has run out; returns the earliest deadline still ahead. */
static double root_check_deadlines(struct root *r, double now)
{
	double next = now + 60.0;
	char text[400], who[300];

	for (size_t i = 0; i < r->nconns; i++) {
		struct conn *c = r->conns[i];

		if (c->phase != CONN_HELLO && c->phase != CONN_CLOSING)
			continue;
		if (now < c->deadline) {
			next = c->deadline < next ? c->deadline : next;
			continue;
		}
		if (c->phase == CONN_HELLO) {
			char why[80];

			snprintf(why, sizeof(why), "no handshake within %.1f s", r->handshake_s);
			root_stranger(r, c, why);
		} else {
			conn_close(c);
		}
	}
	if (r->failed || !r->nranks)
		return next;
	if (!r->all_joined) {
		double deadline = r->join_start + r->timeout_s;

		if (root_member_died(r))
			return next;
		if (r->local_pids && r->npids == r->nranks && now + PID_CHECK_S < next)
			next = now + PID_CHECK_S;
		if (now < deadline)
			return deadline < next ? deadline : next;
		for (int i = 0; i < r->nranks; i++)
			r->scratch[i] = !r->by_rank[i];
		weft_bootstrap_wire_ranks_format(r->scratch, r->nranks, 0, who, sizeof(who));
		snprintf(text, sizeof(text), "bootstrap: %s did not join within %.1f s", who,
			 r->timeout_s);
		root_fail(r, WEFT_ERR_TIMEOUT, text);
	} else if (r->op_pending) {
		double deadline = r->op_start + r->timeout_s;

		if (now < deadline)
			return deadline < next ? deadline : next;
		for (int i = 0; i < r->nranks; i++)
			r->scratch[i] = !r->op_have[i];
		weft_bootstrap_wire_ranks_format(r->scratch, r->nranks, 0, who, sizeof(who));
		snprintf(text, sizeof(text),
			 "bootstrap allgather #%u: %s did not arrive within %.1f s", r->op_seq, who,
			 r->timeout_s);
		root_fail(r, WEFT_ERR_TIMEOUT, text);
	}
	return next;
}

/*
 * After a failure before every rank joined: has every rank of the job been
 * told why (or can it never come: its pid on this host is gone, or the
 * join's time is over)? Until then the root stays, so that a rank that
 * comes late (a member's death is seen as soon as the first rank joins)
 * hears the job's failure rather than finds no listener: "refused the
 * connection ... its process is gone" named the wrong cause.
 */
static bool root_all_told(struct root *r, double now)
{
	bool pids = r->local_pids && r->npids == r->nranks;

	for (size_t i = 0; i < r->nconns; i++)
		if (r->conns[i]->phase == CONN_CLOSING) /* a refusal still on its way */
			return false;
	if (now >= r->join_start + r->timeout_s)
		return true;
	for (int i = 0; i < r->nranks; i++) {
		bool dead = pids && r->local_pids[i] > 0 && /* 0: not known here */
			    weft_pid_state((pid_t)r->local_pids[i]) == WEFT_PID_GONE;

		if (!r->gone[i] && !dead)
			return false;
	}
	return true;
}

/* True when the thread has nothing left to do. */
static bool root_done(struct root *r, double now)
{
	size_t open_ranks = 0;
	double linger = r->timeout_s > 1.0 ? r->timeout_s : 1.0;

	if (!r->nranks) {
		/* Failed before the job was sized (its descriptors): done once every
		 * rank has been told, or as below. */
		if (r->failed && r->fail_nranks && r->told >= r->fail_nranks) {
			for (size_t i = 0; i < r->nconns; i++)
				if (r->conns[i]->phase == CONN_CLOSING)
					return false;
			return true;
		}
		if (now >= r->start + r->timeout_s) {
			weft_log(WEFT_LOG_WARN, WEFT_SUB_BOOT,
				 "bootstrap root %s: no rank joined within %.1f s; closing",
				 r->addr, r->timeout_s);
			return true;
		}
		return false;
	}
	for (size_t i = 0; i < r->nconns; i++)
		open_ranks += r->conns[i]->phase == CONN_JOINED;
	if (open_ranks == 0 && (r->all_joined || (r->failed && root_all_told(r, now))))
		return true;
	/* Ranks that never close after a failure must not keep the thread alive. */
	return r->failed && now >= r->fail_time + linger;
}

/* What to poll for: the listener (unless resting), and each connection,
 * as its phase wants; *next moves up to the nearest deadline. */
static void root_poll_fill(struct root *r, struct pollfd *pfds, double now, double *next)
{
	double linger = r->timeout_s > 1.0 ? r->timeout_s : 1.0;

	pfds[0] =
	    (struct pollfd){.fd = now < r->accept_rest_until ? -1 : r->listen_fd, .events = POLLIN};
	if (now < r->accept_rest_until && r->accept_rest_until < *next)
		*next = r->accept_rest_until;
	for (size_t i = 0; i < r->nconns; i++) {
		struct conn *c = r->conns[i];

		pfds[i + 1] = (struct pollfd){.fd = c->fd, .events = POLLIN};
		if (c->phase == CONN_HELLO)
			pfds[i + 1].events = weft_hs_events(&c->hs);
		else if (c->out_head)
			pfds[i + 1].events |= POLLOUT;
	}
	if (!r->nranks && r->start + r->timeout_s < *next)
		*next = r->start + r->timeout_s;
	if (r->failed && r->fail_time + linger < *next)
		*next = r->fail_time + linger;
	if (r->failed && r->nranks && !r->all_joined) { /* root_all_told may change */
		if (r->join_start + r->timeout_s < *next)
			*next = r->join_start + r->timeout_s;
		if (r->local_pids && now + PID_CHECK_S < *next)
			*next = now + PID_CHECK_S;
	}
}

static void root_serve(struct root *r, const struct pollfd *pfds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct conn *c = r->conns[i];
		short rev = pfds[i + 1].revents;

		if (c->phase == CONN_HELLO && rev)
			root_handshake(r, c);
		else if (rev & (POLLIN | POLLHUP | POLLERR))
			root_read(r, c);
		if (c->phase != CONN_DEAD && (rev & POLLOUT))
			root_write(r, c);
	}
	/* the last join above may have closed the door */
	if ((pfds[0].revents & POLLIN) && r->listen_fd >= 0)
		root_accept(r);
}

void *root_main(void *arg)
{
	struct root *r = arg;
	struct pollfd *pfds = NULL;
	size_t pfds_cap = 0;

	for (;;) {
		double now = weft_bootstrap_wire_now_s();
		double next = root_check_deadlines(r, now);
		size_t n;
		int rc;

		root_compact(r);
		n = r->nconns;
		if (root_done(r, now))
			break;
		if (n + 1 > pfds_cap) {
			struct pollfd *grown = realloc(pfds, (n + 1) * sizeof(*grown));

			if (!grown) {
				weft_log(WEFT_LOG_WARN, WEFT_SUB_BOOT,
					 "bootstrap root %s: out of memory; closing", r->addr);
				break;
			}
			pfds = grown;
			pfds_cap = n + 1;
		}
		root_poll_fill(r, pfds, now, &next);
		rc = poll(pfds, n + 1, weft_bootstrap_wire_ms_until(next, now));
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			weft_log(WEFT_LOG_WARN, WEFT_SUB_BOOT, "bootstrap root %s: poll: %s",
				 r->addr, strerror(errno));
			break;
		}
		root_serve(r, pfds, n);
	}
	weft_log(WEFT_LOG_INFO, WEFT_SUB_BOOT,
		 "bootstrap root %s: done: %d ranks, %u allgathers, received %llu bytes, sent %llu "
		 "bytes, at most %zu connections, %llu dropped unauthenticated",
		 r->addr, r->nranks, r->op_seq, (unsigned long long)r->bytes_in,
		 (unsigned long long)r->bytes_out, r->peak_conns, (unsigned long long)r->refused);
	free(pfds);
	{
		struct weft_key key = r->key;

		root_free(r);
		weft_bootstrap_roots_remove(&key);
		weft_wipe(&key, sizeof(key));
	}
	return NULL;
}
