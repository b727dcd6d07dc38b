/* bootstrap_rank_io.c — a rank's bootstrap links: reads, writes and waits
 * on the root connection and the relay links, each with a deadline and
 * watching the root for the job's verdict, and connecting. The protocol
 * that uses them is in bootstrap_rank.c. */
#define _GNU_SOURCE
#include "bootstrap/bootstrap_rank.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

void bs_link_name(const struct weft_bootstrap *bs, int fd, char *buf, size_t size)
{
	if (fd == bs->fd) {
		snprintf(buf, size, "root %s", bs->root);
		return;
	}
	if (fd == bs->up_fd) {
		snprintf(buf, size, "relay parent rank %d", bs->parent);
		return;
	}
	for (int i = 0; i < bs->nchildren; i++)
		if (bs->child_fd[i] == fd) {
			snprintf(buf, size, "relay child rank %d", bs->first_child + i);
			return;
		}
	snprintf(buf, size, "a relay link");
}

enum wake bs_wait(const struct weft_bootstrap *bs, int fd, short events, double deadline,
		  short *revents)
{
	for (;;) {
		double now = weft_bootstrap_wire_now_s();
		struct pollfd p[2] = {{.fd = fd, .events = events},
				      {.fd = bs ? bs->fd : -1, .events = POLLIN}};
		nfds_t n = bs && bs->fd >= 0 && bs->fd != fd ? 2 : 1;
		int rc;

		if (now >= deadline)
			return WAKE_TIMEOUT;
		rc = poll(p, n, weft_bootstrap_wire_ms_until(deadline, now));
		if (rc > 0) {
			*revents = p[0].revents;
			if (p[0].revents)
				return WAKE_FD;
			return WAKE_ROOT;
		}
		if (rc < 0 && errno != EINTR)
			return WAKE_TIMEOUT;
	}
}

weft_status_t bs_root_verdict(struct weft_bootstrap *bs, double deadline, const char *what,
			      struct weft_err *err)
{
	return bs_expect(bs, bs->fd, FRAME_ERROR, 0, 0, deadline, what, err);
}

static weft_status_t read_core(struct weft_bootstrap *bs, int fd, void *buf, size_t len,
			       double deadline, bool watch_root, const char *what,
			       struct weft_err *err)
{
	char who[ADDR_STR_BYTES + 32];
	size_t got = 0;

	while (got < len) {
		ssize_t n = recv(fd, (char *)buf + got, len - got, MSG_DONTWAIT);
		short rev;

		if (n > 0) {
			got += (size_t)n;
			bs->bytes_in += (uint64_t)n;
			continue;
		}
		int e = n < 0 ? errno : 0;

		if (e == EINTR)
			continue;
		if (e == EAGAIN || e == EWOULDBLOCK) {
			switch (bs_wait(watch_root ? bs : NULL, fd, POLLIN, deadline, &rev)) {
			case WAKE_FD: continue;
			case WAKE_ROOT: return bs_root_verdict(bs, deadline, what, err);
			case WAKE_TIMEOUT: break;
			}
		}
		/* The link failed: only now is it worth naming. */
		bs->broken_fd = fd;
		bs_link_name(bs, fd, who, sizeof(who));
		if (n == 0)
			return weft_err_set(
			    err, WEFT_ERR_REMOTE,
			    "rank %d: bootstrap: %s closed the connection during %s", bs->rank, who,
			    what);
		if (e != EAGAIN && e != EWOULDBLOCK)
			return weft_err_errno(err, e, "rank %d: bootstrap: read from %s during %s",
					      bs->rank, who, what);
		return weft_err_set(err, WEFT_ERR_TIMEOUT,
				    "rank %d: bootstrap: no answer from %s within %.1f s (%s)",
				    bs->rank, who, bs->timeout_s, what);
	}
	return WEFT_SUCCESS;
}

weft_status_t bs_read(struct weft_bootstrap *bs, int fd, void *buf, size_t len, double deadline,
		      const char *what, struct weft_err *err)
{
	return read_core(bs, fd, buf, len, deadline, true, what, err);
}

weft_status_t bs_read_alone(struct weft_bootstrap *bs, int fd, void *buf, size_t len,
			    double deadline, const char *what, struct weft_err *err)
{
	return read_core(bs, fd, buf, len, deadline, false, what, err);
}

weft_status_t bs_read_error(struct weft_bootstrap *bs, const struct frame_hdr *h, double deadline,
			    const char *what, struct weft_err *err)
{
	char buf[MAX_ERROR_BYTES + 1];
	int32_t status;
	size_t text_len;
	weft_status_t rc;

	bs->broken_fd = bs->fd;
	if (h->len < sizeof(status) || h->len > MAX_ERROR_BYTES)
		return weft_err_set(
		    err, WEFT_ERR_REMOTE,
		    "rank %d: bootstrap: root %s sent a malformed error (%llu bytes) "
		    "during %s",
		    bs->rank, bs->root, (unsigned long long)h->len, what);
	rc = bs_read(bs, bs->fd, buf, (size_t)h->len, deadline, what, err);
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
	bs->verdict = true;
	return weft_err_set(err, (weft_status_t)status, "rank %d: %s", bs->rank, buf);
}

weft_status_t bs_expect(struct weft_bootstrap *bs, int fd, uint32_t type, uint32_t seq,
			uint64_t len, double deadline, const char *what, struct weft_err *err)
{
	char who[ADDR_STR_BYTES + 32];
	struct frame_hdr h;
	weft_status_t rc = bs_read(bs, fd, &h, sizeof(h), deadline, what, err);

	if (rc != WEFT_SUCCESS)
		return rc;
	if (h.type == FRAME_ERROR && fd == bs->fd)
		return bs_read_error(bs, &h, deadline, what, err);
	if (h.type != type || h.seq != seq || h.len != len) {
		bs->broken_fd = fd;
		bs_link_name(bs, fd, who, sizeof(who));
		return weft_err_set(
		    err, WEFT_ERR_REMOTE,
		    "rank %d: bootstrap: %s sent an unexpected frame during %s "
		    "(type %u seq %u, %llu bytes; expected type %u seq %u, %llu bytes)",
		    bs->rank, who, what, h.type, h.seq, (unsigned long long)h.len, type, seq,
		    (unsigned long long)len);
	}
	return WEFT_SUCCESS;
}

weft_status_t bs_send_all(struct weft_bootstrap *bs, int fd, const struct frame_hdr *h,
			  const void *payload, size_t len, double deadline, const char *what,
			  struct weft_err *err)
{
	size_t hlen = h ? sizeof(*h) : 0, total = hlen + len, off = 0;
	char who[ADDR_STR_BYTES + 32];

	while (off < total) {
		struct iovec iov[2];
		struct msghdr mh = {.msg_iov = iov};
		ssize_t n;
		short rev;
		int e;

		if (off < hlen) {
			iov[0] = (struct iovec){(char *)h + off, hlen - off};
			iov[1] = (struct iovec){(void *)payload, len};
			mh.msg_iovlen = len ? 2 : 1;
		} else {
			iov[0] = (struct iovec){(char *)payload + (off - hlen), total - off};
			mh.msg_iovlen = 1;
		}
		n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0) {
			off += (size_t)n;
			bs->bytes_out += (uint64_t)n;
			continue;
		}
		e = errno;
		if (e == EINTR)
			continue;
		if (e == EAGAIN || e == EWOULDBLOCK) {
			switch (bs_wait(bs, fd, fd == bs->fd ? POLLOUT | POLLIN : POLLOUT, deadline,
					&rev)) {
			case WAKE_FD:
				if (fd == bs->fd && (rev & POLLIN) && !(rev & POLLOUT))
					return bs_root_verdict(bs, deadline, what, err);
				continue;
			case WAKE_ROOT: return bs_root_verdict(bs, deadline, what, err);
			case WAKE_TIMEOUT: break;
			}
		}
		/* The link failed: only now is it worth naming. */
		bs->broken_fd = fd;
		bs_link_name(bs, fd, who, sizeof(who));
		if (e != EAGAIN && e != EWOULDBLOCK)
			return weft_err_errno(err, e, "rank %d: bootstrap: send to %s during %s",
					      bs->rank, who, what);
		return weft_err_set(err, WEFT_ERR_TIMEOUT,
				    "rank %d: bootstrap: %s took no data within %.1f s (%s)",
				    bs->rank, who, bs->timeout_s, what);
	}
	return WEFT_SUCCESS;
}

weft_status_t bs_send_frame(struct weft_bootstrap *bs, int fd, uint32_t type, uint32_t seq,
			    const void *payload, size_t len, double deadline, const char *what,
			    struct weft_err *err)
{
	struct frame_hdr h = {.type = type, .seq = seq, .len = len};

	return bs_send_all(bs, fd, &h, payload, len, deadline, what, err);
}

weft_status_t bs_relay_failed(struct weft_bootstrap *bs, weft_status_t rc, const char *what,
			      struct weft_err *err)
{
	double until = weft_bootstrap_wire_now_s() + JOIN_GRACE_S;
	struct weft_err verdict = {0};
	short rev;

	/* A failure on the root connection is the root's word already. */
	if (rc == WEFT_SUCCESS || bs->broken_fd == bs->fd ||
	    bs_wait(NULL, bs->fd, POLLIN, until, &rev) != WAKE_FD)
		return rc;
	bs->verdict = false;
	(void)bs_root_verdict(bs, until, what, &verdict);
	if (!bs->verdict)
		return rc;
	*err = verdict;
	return verdict.status;
}

weft_status_t bs_connect(struct weft_bootstrap *bs, const struct sockaddr *addr, socklen_t addr_len,
			 bool retry_refused, double deadline, const char *who, int *out,
			 struct weft_err *err)
{
	double backoff = 0.01;

	for (;;) {
		int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		int e = 0;
		socklen_t elen = sizeof(e);
		short rev;

		if (fd < 0)
			return weft_err_errno(err, errno, "rank %d: bootstrap: socket", bs->rank);
		if (connect(fd, addr, addr_len) < 0) {
			e = errno;
			if (e == EINPROGRESS || e == EINTR) {
				if (bs_wait(NULL, fd, POLLOUT, deadline, &rev) != WAKE_FD)
					e = ETIMEDOUT;
				else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) < 0)
					e = errno;
			}
		}
		if (e == 0) {
			*out = fd;
			return WEFT_SUCCESS;
		}
		close(fd);
		if (retry_refused && e == ECONNREFUSED &&
		    weft_bootstrap_wire_now_s() + backoff < deadline) {
			struct timespec ts = {0, (long)(backoff * 1e9)};

			nanosleep(&ts, NULL);
			backoff = backoff * 2 < 0.2 ? backoff * 2 : 0.2;
			continue;
		}
		if (e == ECONNREFUSED && !retry_refused)
			return weft_err_set(err, WEFT_ERR_REMOTE,
					    "rank %d: bootstrap: %s refused the connection: it was "
					    "listening, so its process is gone",
					    bs->rank, who);
		if (e == ECONNREFUSED || e == ETIMEDOUT)
			return weft_err_set(err, WEFT_ERR_TIMEOUT,
					    "rank %d: bootstrap: connect to %s: %s for %.1f s",
					    bs->rank, who, strerror(e), bs->timeout_s);
		return weft_err_errno(err, e, "rank %d: bootstrap: connect to %s", bs->rank, who);
	}
}

weft_status_t bs_handshake(struct weft_bootstrap *bs, int fd, enum weft_hs_role role, int peer,
			   const void *payload, size_t len, double deadline, const char *who,
			   void *answer, size_t answer_len, bool *dropped, struct weft_err *err)
{
	struct weft_hs hs;
	weft_status_t rc =
	    weft_hs_connect(&hs, fd, &bs->key, role, bs->job_id, bs->rank, peer, payload, len, err);

	*dropped = false;
	while (rc == WEFT_SUCCESS) {
		enum wake wake;
		short rev;

		switch (weft_hs_step(&hs)) {
		case WEFT_HS_OK:
			if (answer_len)
				memcpy(answer, hs.challenge.payload, answer_len);
			return WEFT_SUCCESS;
		case WEFT_HS_AGAIN:
			/* on a relay link, the root may tell us the job failed */
			wake = bs_wait(bs, fd, weft_hs_events(&hs), deadline, &rev);
			if (wake == WAKE_ROOT)
				rc = bs_root_verdict(bs, deadline, "join", err);
			else if (wake != WAKE_FD)
				rc = weft_err_set(
				    err, WEFT_ERR_TIMEOUT,
				    "rank %d: bootstrap: no answer from %s within %.1f "
				    "s (handshake)",
				    bs->rank, who, bs->timeout_s);
			continue;
		case WEFT_HS_REFUSED:
			rc = weft_err_set(
			    err, WEFT_ERR_REMOTE,
			    "rank %d: bootstrap: %s %s; a stale unique id, or not this "
			    "job's listener",
			    bs->rank, who, hs.why);
			continue;
		case WEFT_HS_IO_ERROR:
			/* closed before the welcome: not admitted, and not an error
			 * yet (the caller knocks again, or says so at its deadline) */
			if (hs.errnum == 0 || hs.errnum == ECONNRESET || hs.errnum == EPIPE) {
				*dropped = true;
				rc = WEFT_ERR_REMOTE;
				continue;
			}
			rc = hs.errnum
				 ? weft_err_errno(err, hs.errnum, "rank %d: bootstrap: %s (%s)",
						  bs->rank, who, hs.why)
				 : weft_err_set(err, WEFT_ERR_REMOTE,
						"rank %d: bootstrap: %s closed the connection "
						"(%s)",
						bs->rank, who, hs.why);
			continue;
		case WEFT_HS_HELLO:
			rc = weft_err_set(err, WEFT_ERR_INTERNAL, "handshake");
			continue;
		}
	}
	weft_hs_clear(&hs);
	return rc;
}
