/*
 * bootstrap_rank.c — the rank side of the bootstrap: check the unique id,
 * join through the root, allgather and barrier, close. The protocol is
 * described in bootstrap_wire.h.
 */
#define _GNU_SOURCE
#include "bootstrap/bootstrap.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/bootstrap_wire.h"
#include "util/clock.h"
#include "util/log.h"

#define JOIN_GRACE_S 1.0 /* rank waits this long past its timeout for the root */

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

struct weft_bootstrap {
	int fd;
	int rank;
	int nranks;
	double timeout_s;
	uint32_t seq;
	bool failed;
	char root[ADDR_STR_BYTES];
};

/* Wait for @p events on the root connection; false once @p deadline passes. */
static bool wait_fd(int fd, short events, double deadline, short *revents)
{
	for (;;) {
		double now = weft_bootstrap_wire_now_s();
		struct pollfd p = {.fd = fd, .events = events};
		int rc;

		if (now >= deadline)
			return false;
		rc = poll(&p, 1, weft_bootstrap_wire_ms_until(deadline, now));
		if (rc > 0) {
			*revents = p.revents;
			return true;
		}
		if (rc < 0 && errno != EINTR)
			return false;
	}
}

/* Read exactly @p len bytes before @p deadline. */
static weft_status_t read_full(struct weft_bootstrap *bs, void *buf, size_t len, double deadline,
			       const char *what, struct weft_err *err)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = recv(bs->fd, (char *)buf + got, len - got, MSG_DONTWAIT);
		short rev;

		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n == 0)
			return weft_err_set(
			    err, WEFT_ERR_REMOTE,
			    "rank %d: bootstrap: root %s closed the connection during %s", bs->rank,
			    bs->root, what);
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return weft_err_errno(err, errno,
					      "rank %d: bootstrap: read from root %s during %s",
					      bs->rank, bs->root, what);
		if (!wait_fd(bs->fd, POLLIN, deadline, &rev))
			return weft_err_set(
			    err, WEFT_ERR_TIMEOUT,
			    "rank %d: bootstrap: no answer from root %s within %.1f s "
			    "(%s)",
			    bs->rank, bs->root, bs->timeout_s, what);
	}
	return WEFT_SUCCESS;
}

/* The root sent an ERROR frame: hand its status and text to the caller. */
static weft_status_t read_error(struct weft_bootstrap *bs, const struct frame_hdr *h,
				double deadline, const char *what, struct weft_err *err)
{
	char buf[MAX_ERROR_BYTES + 1];
	int32_t status;
	size_t text_len;
	weft_status_t rc;

	if (h->len < sizeof(status) || h->len > MAX_ERROR_BYTES)
		return weft_err_set(
		    err, WEFT_ERR_REMOTE,
		    "rank %d: bootstrap: root %s sent a malformed error (%llu bytes) "
		    "during %s",
		    bs->rank, bs->root, (unsigned long long)h->len, what);
	rc = read_full(bs, buf, (size_t)h->len, deadline, what, err);
	if (rc != WEFT_SUCCESS)
		return rc;
	memcpy(&status, buf, sizeof(status));
	text_len = (size_t)h->len - sizeof(status);
	memmove(buf, buf + sizeof(status), text_len);
	buf[text_len] = '\0';
	for (size_t i = 0; i < text_len; i++)
		if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] > 0x7e)
			buf[i] = '?';
	if (status >= 0 || status < WEFT_ERR_ABORTED)
		status = WEFT_ERR_REMOTE;
	return weft_err_set(err, (weft_status_t)status, "rank %d: %s", bs->rank, buf);
}

/*
 * Read one frame header and check it is @p type with @p seq and @p len; an
 * ERROR frame instead becomes the caller's error.
 */
static weft_status_t expect_frame(struct weft_bootstrap *bs, uint32_t type, uint32_t seq,
				  uint64_t len, double deadline, const char *what,
				  struct weft_err *err)
{
	struct frame_hdr h;
	weft_status_t rc = read_full(bs, &h, sizeof(h), deadline, what, err);

	if (rc != WEFT_SUCCESS)
		return rc;
	if (h.type == FRAME_ERROR)
		return read_error(bs, &h, deadline, what, err);
	if (h.type != type || h.seq != seq || h.len != len)
		return weft_err_set(
		    err, WEFT_ERR_REMOTE,
		    "rank %d: bootstrap: root %s sent an unexpected frame during %s "
		    "(type %u seq %u, %llu bytes; expected type %u seq %u, %llu bytes)",
		    bs->rank, bs->root, what, h.type, h.seq, (unsigned long long)h.len, type, seq,
		    (unsigned long long)len);
	return WEFT_SUCCESS;
}

/*
 * Send a frame. While the root does not read, watch for what it sends
 * instead: an ERROR (the job failed) must end the wait, not the deadline.
 */
static weft_status_t send_frame(struct weft_bootstrap *bs, uint32_t type, uint32_t seq,
				const void *payload, size_t len, double deadline, const char *what,
				struct weft_err *err)
{
	struct frame_hdr h = {.type = type, .seq = seq, .len = len};
	size_t total = sizeof(h) + len, off = 0;

	while (off < total) {
		struct iovec iov[2];
		struct msghdr mh = {.msg_iov = iov};
		ssize_t n;
		short rev;

		if (off < sizeof(h)) {
			iov[0] = (struct iovec){(char *)&h + off, sizeof(h) - off};
			iov[1] = (struct iovec){(void *)payload, len};
			mh.msg_iovlen = len ? 2 : 1;
		} else {
			iov[0] = (struct iovec){(char *)payload + (off - sizeof(h)), total - off};
			mh.msg_iovlen = 1;
		}
		n = sendmsg(bs->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0) {
			off += (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return weft_err_errno(err, errno,
					      "rank %d: bootstrap: send to root %s during %s",
					      bs->rank, bs->root, what);
		if (!wait_fd(bs->fd, POLLOUT | POLLIN, deadline, &rev))
			return weft_err_set(
			    err, WEFT_ERR_TIMEOUT,
			    "rank %d: bootstrap: root %s took no data within %.1f s (%s)", bs->rank,
			    bs->root, bs->timeout_s, what);
		if ((rev & POLLIN) && !(rev & POLLOUT))
			return expect_frame(bs, FRAME_ERROR, 0, 0, deadline, what, err);
	}
	return WEFT_SUCCESS;
}

/* Non-blocking connect, retried while the root is not listening yet. */
static weft_status_t connect_root(struct weft_bootstrap *bs, const struct weft_uid *uid,
				  double deadline, struct weft_err *err)
{
	double backoff = 0.01;
	int one = 1;

	for (;;) {
		int fd =
		    socket(uid->addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		int e = 0;
		socklen_t elen = sizeof(e);
		short rev;

		if (fd < 0)
			return weft_err_errno(err, errno, "rank %d: bootstrap: socket", bs->rank);
		if (connect(fd, &uid->addr.sa, uid->addr_len) < 0) {
			e = errno;
			if (e == EINPROGRESS || e == EINTR) {
				if (!wait_fd(fd, POLLOUT, deadline, &rev))
					e = ETIMEDOUT;
				else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) < 0)
					e = errno;
			}
		}
		if (e == 0) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			bs->fd = fd;
			return WEFT_SUCCESS;
		}
		close(fd);
		if (e == ECONNREFUSED && weft_bootstrap_wire_now_s() + backoff < deadline) {
			struct timespec ts = {0, (long)(backoff * 1e9)};

			nanosleep(&ts, NULL);
			backoff = backoff * 2 < 0.2 ? backoff * 2 : 0.2;
			continue;
		}
		if (e == ECONNREFUSED || e == ETIMEDOUT)
			return weft_err_set(err, WEFT_ERR_TIMEOUT,
					    "rank %d: bootstrap: connect to root %s: %s for %.1f s",
					    bs->rank, bs->root, strerror(e), bs->timeout_s);
		return weft_err_errno(err, e, "rank %d: bootstrap: connect to root %s", bs->rank,
				      bs->root);
	}
}

weft_status_t weft_bootstrap_join(const struct weft_uid *uid, int rank, int nranks,
				  double timeout_s, struct weft_bootstrap **out,
				  struct weft_err *err)
{
	struct hello hello = {0};
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
	bs->fd = -1;
	bs->rank = rank;
	bs->nranks = nranks;
	bs->timeout_s = timeout_s;
	weft_bootstrap_wire_addr_format(&uid->addr.sa, bs->root, sizeof(bs->root));

	rc = connect_root(bs, uid, start + timeout_s, err);
	if (rc != WEFT_SUCCESS)
		goto out_free;
	hello.magic = WEFT_UID_MAGIC;
	hello.secret = uid->secret;
	hello.version = WEFT_UID_VERSION;
	hello.rank = rank;
	hello.nranks = nranks;
	rc = send_frame(bs, FRAME_HELLO, 0, &hello, sizeof(hello), start + timeout_s, "join", err);
	if (rc != WEFT_SUCCESS)
		goto out_close;
	rc = expect_frame(bs, FRAME_READY, 0, 0, start + timeout_s + JOIN_GRACE_S, "join", err);
	if (rc != WEFT_SUCCESS)
		goto out_close;
	weft_log(WEFT_LOG_INFO, WEFT_SUB_BOOT, "rank %d: bootstrap: joined %d ranks at root %s",
		 rank, nranks, bs->root);
	*out = bs;
	return WEFT_SUCCESS;

out_close:
	close(bs->fd);
out_free:
	free(bs);
	return rc;
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
	rc =
	    send_frame(bs, FRAME_GATHER, seq, bytes ? (char *)buf + (size_t)bs->rank * bytes : NULL,
		       bytes, deadline, what, err);
	if (rc == WEFT_SUCCESS)
		rc = expect_frame(bs, FRAME_GATHER, seq, (uint64_t)bs->nranks * bytes,
				  deadline + JOIN_GRACE_S, what, err);
	if (rc == WEFT_SUCCESS && bytes)
		rc = read_full(bs, buf, (size_t)bs->nranks * bytes, deadline + JOIN_GRACE_S, what,
			       err);
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
	if (!bs->failed)
		(void)!send(bs->fd, &bye, sizeof(bye), MSG_NOSIGNAL | MSG_DONTWAIT);
	close(bs->fd);
	free(bs);
}
