/*
 * bootstrap_rank.c — the rank side of the bootstrap: check the unique id,
 * join through the root and link into the relay tree, allgather (blocks up
 * to the root, results down the tree, forwarded as they arrive) and
 * barrier, close. The protocol is described in bootstrap_wire.h.
 */
#define _GNU_SOURCE
#include "bootstrap/bootstrap.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "bootstrap/bootstrap_rank.h"
#include "bootstrap/bootstrap_wire.h"
#include "util/clock.h"
#include "util/log.h"

#define RELAY_PIECE ((size_t)1 << 20) /* forwarded as soon as it is in */

weft_status_t weft_bootstrap_uid_check(const struct weft_uid *uid, struct weft_err *err)
{
	if (!uid)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "unique id is NULL");
	if (uid->magic != WEFT_UID_MAGIC)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "unique id is invalid (bad magic 0x%016llx; was it made by "
				    "weft_get_unique_id() and copied whole?)",
				    (unsigned long long)uid->magic);
	if (uid->version != WEFT_UID_VERSION)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "unique id is invalid (version %u, this library reads %u)",
				    uid->version, WEFT_UID_VERSION);
	if (!weft_bootstrap_wire_addr_len_ok(uid->addr.sa.sa_family, uid->addr_len))
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "unique id is invalid (address family %d, length %u)",
				    uid->addr.sa.sa_family, uid->addr_len);
	return WEFT_SUCCESS;
}

/* The relay listener, on the address this rank's root connection leaves
 * from (so its peers can reach it where the root reached it). */
static weft_status_t relay_listen(struct weft_bootstrap *bs, uint32_t *port, struct weft_err *err)
{
	union weft_uid_addr a;
	socklen_t len = sizeof(a);
	int fd;

	if (getsockname(bs->fd, &a.sa, &len) < 0 ||
	    !weft_bootstrap_wire_addr_len_ok(a.sa.sa_family, len))
		return weft_err_errno(err, errno ? errno : EAFNOSUPPORT,
				      "rank %d: bootstrap: address of the root connection",
				      bs->rank);
	if (a.sa.sa_family == AF_INET)
		a.in4.sin_port = 0;
	else
		a.in6.sin6_port = 0;
	fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return weft_err_errno(err, errno, "rank %d: bootstrap: relay socket", bs->rank);
	if (bind(fd, &a.sa, len) < 0 || listen(fd, SOMAXCONN) < 0 ||
	    getsockname(fd, &a.sa, &len) < 0) {
		char where[ADDR_STR_BYTES];
		int e = errno;

		weft_bootstrap_wire_addr_format(&a.sa, where, sizeof(where));
		close(fd);
		return weft_err_errno(err, e, "rank %d: bootstrap: relay listen on %s", bs->rank,
				      where);
	}
	bs->listen_fd = fd;
	*port = bs->relay_port =
	    ntohs(a.sa.sa_family == AF_INET ? a.in4.sin_port : a.in6.sin6_port);
	return WEFT_SUCCESS;
}

/*
 * The relay listener while children are missing: any number of
 * connections in their handshake at once (at most WEFT_MAX_PENDING, the
 * one dropped for a new one as weft_hs_drop_first chooses; each for
 * WEFT_HANDSHAKE_TIMEOUT at most),
 * so strangers, silent or not, never hold a child back.
 */
struct relay_pending {
	struct weft_hs hs;
	double since;
};

struct relay_door {
	struct relay_pending *p;
	int n, max;
	double hs_s;
	uint64_t dropped;
};

static void door_drop(struct weft_bootstrap *bs, struct relay_door *d, int k, const char *why)
{
	if (++d->dropped <= 3)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_BOOT,
			 "rank %d: bootstrap: dropped a relay connection: %s%s", bs->rank, why,
			 d->dropped == 3 ? " (further ones are counted, not logged)" : "");
	weft_hs_clear(&d->p[k].hs);
	close(d->p[k].hs.fd);
	d->p[k] = d->p[--d->n];
}

/* A child, authenticated: is it one of ours, not yet in? Checked without
 * arithmetic on what it claims until it is known to be in range. */
static bool relay_child_ok(const struct weft_bootstrap *bs, const struct weft_hs *hs)
{
	long rank = hs->hello.rank, first = bs->first_child;
	struct join j;

	memcpy(&j, hs->hello.payload, sizeof(j));
	return rank >= first && rank < first + bs->nchildren && j.nranks == bs->nranks &&
	       bs->child_fd[rank - first] < 0;
}

/* Move pending handshake @p k along; it leaves the door when done. */
static void door_step(struct weft_bootstrap *bs, struct relay_door *d, int k)
{
	struct weft_hs *hs = &d->p[k].hs;
	struct weft_err err = {0};

	for (;;) {
		switch (weft_hs_step(hs)) {
		case WEFT_HS_AGAIN: return;
		case WEFT_HS_HELLO:
			if (hs->hello.role != WEFT_HS_RELAY || hs->hello.peer != bs->rank ||
			    memcmp(hs->hello.id, bs->job_id, sizeof(bs->job_id)) != 0) {
				door_drop(bs, d, k, "a handshake meant for another listener");
				return;
			}
			if (weft_hs_answer(hs, &bs->key, bs->rank, NULL, 0, &err) != WEFT_SUCCESS) {
				door_drop(bs, d, k, err.msg);
				return;
			}
			continue;
		case WEFT_HS_OK:
			if (!relay_child_ok(bs, hs)) {
				door_drop(bs, d, k,
					  "not a child of this rank's, or one already in");
				return;
			}
			bs->child_fd[hs->hello.rank - bs->first_child] = hs->fd;
			d->p[k] = d->p[--d->n];
			return;
		case WEFT_HS_REFUSED:
		case WEFT_HS_IO_ERROR: door_drop(bs, d, k, hs->why); return;
		}
	}
}

static void door_accept(struct weft_bootstrap *bs, struct relay_door *d)
{
	for (;;) {
		int fd = accept4(bs->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return; /* EAGAIN, EINTR, ECONNABORTED, EMFILE: poll again */
		if (d->n == d->max) {
			int victim = -1;

			for (int k = 0; k < d->n; k++)
				if (weft_hs_droppable(&d->p[k].hs) &&
				    (victim < 0 ||
				     weft_hs_drop_first(&d->p[k].hs, d->p[k].since,
							&d->p[victim].hs, d->p[victim].since)))
					victim = k;
			if (victim < 0) { /* all being welcomed: this one waits */
				close(fd);
				continue;
			}
			door_drop(bs, d, victim,
				  "WEFT_MAX_PENDING connections were in their handshake");
		}
		weft_hs_accept(&d->p[d->n].hs, fd);
		d->p[d->n++].since = weft_bootstrap_wire_now_s();
	}
}

static int children_missing(const struct weft_bootstrap *bs)
{
	int missing = 0;

	for (int i = 0; i < bs->nchildren; i++)
		missing += bs->child_fd[i] < 0;
	return missing;
}

static weft_status_t children_late(struct weft_bootstrap *bs, const char *what,
				   struct weft_err *err)
{
	bool *absent = calloc((size_t)bs->nchildren, sizeof(*absent));
	char ranks[300] = "?";

	if (absent) {
		for (int i = 0; i < bs->nchildren; i++)
			absent[i] = bs->child_fd[i] < 0;
		weft_bootstrap_wire_ranks_format(absent, bs->nchildren, bs->first_child, ranks,
						 sizeof(ranks));
		free(absent);
	}
	weft_status_t rc = weft_err_set(err, WEFT_ERR_TIMEOUT,
					"rank %d: bootstrap: relay child %s did not connect within "
					"%.1f s",
					bs->rank, ranks, bs->timeout_s);
	return bs_relay_failed(bs, rc, what, err);
}

/* One round of the door: poll the listener, the root (a verdict) and the
 * pending handshakes once, until @p deadline. */
static weft_status_t door_round(struct weft_bootstrap *bs, struct relay_door *d, struct pollfd *pfd,
				double deadline, const char *what, struct weft_err *err)
{
	double now = weft_bootstrap_wire_now_s(), until = deadline;

	for (int k = d->n - 1; k >= 0; k--)
		if (now - d->p[k].since > d->hs_s)
			door_drop(bs, d, k, "no handshake within WEFT_HANDSHAKE_TIMEOUT");
	pfd[0] = (struct pollfd){.fd = bs->listen_fd, .events = POLLIN};
	pfd[1] = (struct pollfd){.fd = bs->fd, .events = POLLIN};
	for (int k = 0; k < d->n; k++) {
		pfd[k + 2] =
		    (struct pollfd){.fd = d->p[k].hs.fd, .events = weft_hs_events(&d->p[k].hs)};
		if (d->p[k].since + d->hs_s < until)
			until = d->p[k].since + d->hs_s;
	}
	int nfds = d->n + 2, rc = poll(pfd, (nfds_t)nfds, weft_bootstrap_wire_ms_until(until, now));
	if (rc < 0 && errno != EINTR)
		return weft_err_errno(err, errno, "rank %d: bootstrap: poll", bs->rank);
	if (rc > 0 && pfd[1].revents)
		return bs_root_verdict(bs, deadline, what, err);
	for (int k = nfds - 3; rc > 0 && k >= 0; k--)
		if (pfd[k + 2].revents)
			door_step(bs, d, k);
	if (rc > 0 && pfd[0].revents)
		door_accept(bs, d);
	return WEFT_SUCCESS;
}

/* Take the children's connections, and strangers' at the same time. */
static weft_status_t relay_accept_children(struct weft_bootstrap *bs, double deadline,
					   const char *what, struct weft_err *err)
{
	struct relay_door d = {.max = weft_hs_max_pending(), .hs_s = weft_hs_timeout_s()};
	struct pollfd *pfd = NULL;
	weft_status_t rc = WEFT_SUCCESS;

	d.p = calloc((size_t)d.max, sizeof(*d.p));
	pfd = calloc((size_t)d.max + 2, sizeof(*pfd));
	if (!d.p || !pfd)
		rc = weft_err_set(err, WEFT_ERR_NO_MEMORY, "rank %d: bootstrap: relay", bs->rank);
	while (rc == WEFT_SUCCESS && children_missing(bs) > 0) {
		if (weft_bootstrap_wire_now_s() >= deadline)
			rc = children_late(bs, what, err);
		else
			rc = door_round(bs, &d, pfd, deadline, what, err);
	}
	while (d.n > 0) { /* no longer needed: drop quietly */
		weft_hs_clear(&d.p[d.n - 1].hs);
		close(d.p[--d.n].hs.fd);
	}
	free(d.p);
	free(pfd);
	return rc;
}

/* A listener that closed every connection before welcoming this rank. */
static weft_status_t dropped_too_long(struct weft_bootstrap *bs, const char *who,
				      struct weft_err *err)
{
	return weft_err_set(err, WEFT_ERR_TIMEOUT,
			    "rank %d: bootstrap: %s closed every connection before admitting this "
			    "rank, for %.1f s (a door crowded by strangers, or a listener that is "
			    "not this job's)",
			    bs->rank, who, bs->timeout_s);
}

/* After READY: connect to the parent, take the children's connections. */
static weft_status_t relay_link(struct weft_bootstrap *bs, const struct ready *ready,
				double deadline, struct weft_err *err)
{
	char what[] = "join (relay links)", who[ADDR_STR_BYTES + 32];
	weft_status_t rc;

	bs->broken_fd = -1;
	bs->fanout = (int)ready->fanout;
	bs->parent = relay_parent(bs->rank, bs->fanout);
	bs->nchildren = relay_children(bs->rank, bs->fanout, bs->nranks, &bs->first_child);
	if (bs->nchildren) {
		bs->child_fd = malloc((size_t)bs->nchildren * sizeof(*bs->child_fd));
		if (!bs->child_fd)
			return weft_err_set(err, WEFT_ERR_NO_MEMORY, "rank %d: bootstrap: relay",
					    bs->rank);
		for (int i = 0; i < bs->nchildren; i++)
			bs->child_fd[i] = -1;
	}
	if (bs->parent >= 0) {
		struct join join = {.nranks = bs->nranks};
		char where[ADDR_STR_BYTES];
		bool dropped;
		int fd = -1;

		weft_bootstrap_wire_addr_format(&ready->parent.sa, where, sizeof(where));
		snprintf(who, sizeof(who), "relay parent rank %d at %s", bs->parent, where);
		for (;;) {
			dropped = false;
			rc = bs_connect(bs, &ready->parent.sa, (socklen_t)ready->parent_len, false,
					deadline, who, &fd, err);
			if (rc == WEFT_SUCCESS)
				rc = bs_handshake(bs, fd, WEFT_HS_RELAY, bs->parent, &join,
						  sizeof(join), deadline, who, NULL, 0, &dropped,
						  err);
			if (rc == WEFT_SUCCESS || !dropped)
				break;
			close(fd);
			fd = -1;
			if (weft_bootstrap_wire_now_s() >= deadline) {
				rc = dropped_too_long(bs, who, err);
				break;
			}
			usleep(10000); /* the parent's door was crowded: knock again */
		}
		if (rc != WEFT_SUCCESS) {
			if (fd >= 0)
				close(fd);
			return bs_relay_failed(bs, rc, what, err);
		}
		bs->up_fd = fd;
	}
	rc = relay_accept_children(bs, deadline, what, err);
	if (rc != WEFT_SUCCESS)
		return rc;
	close(bs->listen_fd);
	bs->listen_fd = -1;
	return WEFT_SUCCESS;
}

static void bs_free(struct weft_bootstrap *bs)
{
	if (bs->up_fd >= 0 && bs->up_fd != bs->fd)
		close(bs->up_fd);
	for (int i = 0; i < bs->nchildren && bs->child_fd; i++)
		if (bs->child_fd[i] >= 0)
			close(bs->child_fd[i]);
	if (bs->listen_fd >= 0)
		close(bs->listen_fd);
	if (bs->fd >= 0)
		close(bs->fd);
	free(bs->child_fd);
	weft_wipe(&bs->key, sizeof(bs->key));
	free(bs);
}

/* Connect to the root and prove the key to it (and it to us); a
 * connection the root dropped before it welcomed us (a flood crowds its
 * door) is tried again until @p deadline. */
static weft_status_t join_root(struct weft_bootstrap *bs, const struct weft_uid *uid,
			       double deadline, struct weft_err *err)
{
	char who[ADDR_STR_BYTES + 8];
	struct join join = {.nranks = bs->nranks};
	struct root_answer answer;
	bool dropped = false;
	weft_status_t rc;

	snprintf(who, sizeof(who), "root %s", bs->root);
	for (;;) {
		dropped = false;
		bool refused_again = !(uid->reserved & WEFT_UID_LISTENING);
		rc = bs_connect(bs, &uid->addr.sa, uid->addr_len, refused_again, deadline, who,
				&bs->fd, err);
		if (rc == WEFT_SUCCESS && bs->listen_fd < 0)
			rc = relay_listen(bs, &join.relay_port, err);
		else if (rc == WEFT_SUCCESS)
			join.relay_port = bs->relay_port;
		if (rc == WEFT_SUCCESS)
			rc = bs_handshake(bs, bs->fd, WEFT_HS_ROOT, -1, &join, sizeof(join),
					  deadline, who, &answer, sizeof(answer), &dropped, err);
		if (rc == WEFT_SUCCESS || !dropped)
			break;
		close(bs->fd);
		bs->fd = -1;
		if (weft_bootstrap_wire_now_s() >= deadline) {
			rc = dropped_too_long(bs, who, err);
			break;
		}
		usleep(10000); /* the root's door was crowded: knock again */
	}
	if (rc == WEFT_SUCCESS)
		memcpy(bs->job_id, answer.job_id, sizeof(bs->job_id));
	return rc;
}

weft_status_t weft_bootstrap_join(const struct weft_uid *uid, int rank, int nranks,
				  double timeout_s, struct weft_bootstrap **out,
				  struct weft_err *err)
{
	struct ready ready;
	struct weft_bootstrap *bs;
	double start = weft_bootstrap_wire_now_s();
	weft_status_t rc;

	if (!out)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "bootstrap: join: out is NULL");
	*out = NULL;
	rc = weft_bootstrap_uid_check(uid, err);
	if (rc != WEFT_SUCCESS)
		return rc;
	if (nranks < 1 || nranks > WEFT_MAX_RANKS || rank < 0 || rank >= nranks)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "bootstrap: rank %d of %d ranks is out of range (1..%d ranks)",
				    rank, nranks, WEFT_MAX_RANKS);
	if (!(timeout_s > 0))
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "bootstrap: timeout must be positive, not %g", timeout_s);
	bs = calloc(1, sizeof(*bs));
	if (!bs)
		return weft_err_set(err, WEFT_ERR_NO_MEMORY, "rank %d: bootstrap: state", rank);
	bs->fd = bs->up_fd = bs->listen_fd = bs->broken_fd = -1;
	bs->rank = rank;
	bs->nranks = nranks;
	bs->key = uid->key;
	bs->timeout_s = timeout_s;
	weft_bootstrap_wire_addr_format(&uid->addr.sa, bs->root, sizeof(bs->root));

	rc = join_root(bs, uid, start + timeout_s, err);
	if (rc != WEFT_SUCCESS)
		goto out_free;
	bs->up_fd = bs->fd;
	rc = bs_expect(bs, bs->fd, FRAME_READY, 0, sizeof(ready), start + timeout_s + JOIN_GRACE_S,
		       "join", err);
	if (rc == WEFT_SUCCESS)
		rc = bs_read(bs, bs->fd, &ready, sizeof(ready), start + timeout_s + JOIN_GRACE_S,
			     "join", err);
	if (rc == WEFT_SUCCESS &&
	    (ready.fanout < 1 || ready.fanout > WEFT_MAX_RANKS ||
	     (relay_parent(rank, (int)ready.fanout) < 0) != (ready.parent_len == 0) ||
	     (ready.parent_len &&
	      !weft_bootstrap_wire_addr_len_ok(ready.parent.sa.sa_family, ready.parent_len))))
		rc = weft_err_set(err, WEFT_ERR_REMOTE,
				  "rank %d: bootstrap: root %s sent a malformed ready (fan-out %u, "
				  "parent address of %u bytes)",
				  rank, bs->root, ready.fanout, ready.parent_len);
	if (rc == WEFT_SUCCESS)
		rc = relay_link(bs, &ready, start + timeout_s + JOIN_GRACE_S, err);
	if (rc != WEFT_SUCCESS)
		goto out_free;
	weft_log(WEFT_LOG_INFO, WEFT_SUB_BOOT,
		 "rank %d: bootstrap: joined %d ranks at root %s; relay parent %d, %d children",
		 rank, nranks, bs->root, bs->parent, bs->nchildren);
	*out = bs;
	return WEFT_SUCCESS;

out_free:
	bs_free(bs);
	return rc;
}

void weft_bootstrap_job_id(const struct weft_bootstrap *bs, unsigned char id[WEFT_JOB_ID_BYTES])
{
	memcpy(id, bs->job_id, WEFT_JOB_ID_BYTES);
}

/* Inflate @p len packed bytes of a result into @p zs's output. */
static weft_status_t unpack(struct weft_bootstrap *bs, z_stream *zs, const void *in, size_t len,
			    const char *what, struct weft_err *err)
{
	int zrc = Z_OK;

	zs->next_in = (Bytef *)in;
	zs->avail_in = (uInt)len;
	while (zs->avail_in > 0 && zrc == Z_OK)
		zrc = inflate(zs, Z_NO_FLUSH);
	if (zrc == Z_OK || (zrc == Z_STREAM_END && zs->avail_in == 0))
		return WEFT_SUCCESS;
	if (zs->avail_out == 0)
		return weft_err_set(
		    err, WEFT_ERR_REMOTE,
		    "rank %d: bootstrap: %s: the result inflates past its %lu bytes", bs->rank,
		    what, zs->total_out);
	return weft_err_set(err, WEFT_ERR_REMOTE,
			    "rank %d: bootstrap: %s: the result from %s is garbled (zlib: %s)",
			    bs->rank, what, bs->parent >= 0 ? "its relay parent" : "the root",
			    zrc == Z_STREAM_END ? "data past its end"
			    : zs->msg		? zs->msg
						: "stream error");
}

/*
 * Receive allgather #seq's result (@p total bytes, packed) from the parent,
 * forward it to the children piece by piece as it comes in, still packed,
 * and inflate it into @p buf.
 */
static weft_status_t relay_result(struct weft_bootstrap *bs, uint32_t seq, void *buf, size_t total,
				  double deadline, const char *what, struct weft_err *err)
{
	uint64_t most = total ? compressBound((uLong)total) : 0;
	struct frame_hdr h;
	z_stream zs = {0};
	unsigned char *piece_buf = NULL;
	bool garbled = false; /* what came is wrong: no verdict to wait for */
	weft_status_t rc;

	bs->broken_fd = -1;
	rc = bs_read(bs, bs->up_fd, &h, sizeof(h), deadline, what, err);
	if (rc == WEFT_SUCCESS && h.type == FRAME_ERROR && bs->up_fd == bs->fd)
		return bs_read_error(bs, &h, deadline, what, err);
	if (rc == WEFT_SUCCESS &&
	    (h.type != FRAME_GATHER || h.seq != seq || h.len > most || (total && h.len == 0))) {
		char who[ADDR_STR_BYTES + 32];

		bs->broken_fd = bs->up_fd;
		bs_link_name(bs, bs->up_fd, who, sizeof(who));
		rc =
		    weft_err_set(err, WEFT_ERR_REMOTE,
				 "rank %d: bootstrap: %s sent an unexpected frame during %s "
				 "(type %u seq %u, %llu bytes; expected type %u seq %u, a %zu-byte "
				 "result in at most %llu bytes)",
				 bs->rank, who, what, h.type, h.seq, (unsigned long long)h.len,
				 FRAME_GATHER, seq, total, (unsigned long long)most);
	}
	for (int i = 0; rc == WEFT_SUCCESS && i < bs->nchildren; i++)
		rc = bs_send_all(bs, bs->child_fd[i], &h, NULL, 0, deadline, what, err);
	if (rc == WEFT_SUCCESS && total) {
		piece_buf = malloc(h.len < RELAY_PIECE ? (size_t)h.len : RELAY_PIECE);
		if (!piece_buf || inflateInit(&zs) != Z_OK) {
			free(piece_buf);
			return weft_err_set(err, WEFT_ERR_NO_MEMORY, "rank %d: %s: buffers",
					    bs->rank, what);
		}
		zs.next_out = buf;
		zs.avail_out = (uInt)total;
	}
	for (size_t off = 0; rc == WEFT_SUCCESS && off < h.len;) {
		size_t piece = h.len - off < RELAY_PIECE ? (size_t)h.len - off : RELAY_PIECE;

		rc = bs_read(bs, bs->up_fd, piece_buf, piece, deadline, what, err);
		for (int i = 0; rc == WEFT_SUCCESS && i < bs->nchildren; i++)
			rc = bs_send_all(bs, bs->child_fd[i], NULL, piece_buf, piece, deadline,
					 what, err);
		if (rc == WEFT_SUCCESS) {
			rc = unpack(bs, &zs, piece_buf, piece, what, err);
			garbled = rc != WEFT_SUCCESS;
		}
		off += piece;
	}
	garbled |= rc == WEFT_SUCCESS && total &&
		   (zs.total_out != total || inflate(&zs, Z_FINISH) != Z_STREAM_END);
	if (rc == WEFT_SUCCESS && garbled)
		rc = weft_err_set(err, WEFT_ERR_REMOTE,
				  "rank %d: bootstrap: %s: the result inflates to %lu bytes%s, not "
				  "%zu",
				  bs->rank, what, zs.total_out,
				  zs.total_out == total ? " and no stream end" : "", total);
	if (piece_buf) {
		inflateEnd(&zs);
		free(piece_buf);
	}
	return garbled ? rc : bs_relay_failed(bs, rc, what, err);
}

weft_status_t weft_bootstrap_allgather(struct weft_bootstrap *bs, void *buf, size_t bytes,
				       struct weft_err *err)
{
	char what[64];
	uint32_t seq;
	double deadline;
	weft_status_t rc;

	if (!bs)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "bootstrap allgather: bs is NULL");
	seq = bs->seq;
	snprintf(what, sizeof(what), "bootstrap allgather #%u", seq);
	if (bs->failed)
		return weft_err_set(err, WEFT_ERR_REMOTE,
				    "rank %d: %s: an earlier bootstrap call failed", bs->rank,
				    what);
	if (bytes > MAX_TOTAL_BYTES / (uint64_t)bs->nranks)
		return weft_err_set(
		    err, WEFT_ERR_INVALID_ARG,
		    "rank %d: %s: %zu bytes per rank x %d ranks is over the %llu byte "
		    "limit",
		    bs->rank, what, bytes, bs->nranks, (unsigned long long)MAX_TOTAL_BYTES);
	if (bytes && !buf)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "rank %d: %s: buf is NULL", bs->rank,
				    what);
	bs->seq++;
	deadline = weft_bootstrap_wire_now_s() + bs->timeout_s;
	rc = bs_send_frame(bs, bs->fd, FRAME_GATHER, seq,
			   bytes ? (char *)buf + (size_t)bs->rank * bytes : NULL, bytes, deadline,
			   what, err);
	if (rc == WEFT_SUCCESS)
		rc = relay_result(bs, seq, buf, (size_t)bs->nranks * bytes, deadline + JOIN_GRACE_S,
				  what, err);
	if (rc != WEFT_SUCCESS)
		bs->failed = true;
	return rc;
}

weft_status_t weft_bootstrap_barrier(struct weft_bootstrap *bs, struct weft_err *err)
{
	return weft_bootstrap_allgather(bs, NULL, 0, err);
}

void weft_bootstrap_close(struct weft_bootstrap *bs)
{
	struct frame_hdr bye = {.type = FRAME_BYE};

	if (!bs)
		return;
	/* Best effort: if the root cannot take 16 bytes now, our EOF says the same. */
	if (!bs->failed && send(bs->fd, &bye, sizeof(bye), MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
		bs->bytes_out += sizeof(bye);
	weft_log(WEFT_LOG_INFO, WEFT_SUB_BOOT,
		 "rank %d: bootstrap: done: received %llu bytes, sent %llu bytes, over the root "
		 "and %d relay links",
		 bs->rank, (unsigned long long)bs->bytes_in, (unsigned long long)bs->bytes_out,
		 (bs->parent >= 0) + bs->nchildren);
	bs_free(bs);
}
