/*
 * socket_data.c — the TCP transport's data path: queues, framing, striping
 * and the non-blocking progress engine. See socket.h for the wire format.
 *
 * Each connection keeps one queue per direction, in post order. Each socket
 * has a cursor per direction: the message (and fragment) it is moving now.
 * A cursor walks the queue on its own, skipping messages that have no
 * fragment on its socket, so a slow socket never holds back a fast one; a
 * message is done when all of its fragments are, whichever socket finishes
 * last, and leaves its queue at once (the poster may then reuse it).
 *
 * Per-message state is a request (struct weft_sock_req) from the
 * transport's pool: where its fragments start, how many are left.
 *
 * Sprayed (WEFT_SPRAY=adaptive), a send cursor that finishes a fragment
 * takes the next undealt one of the queue (tx_deal) instead of the next on
 * its own socket, and a receive cursor reads a header first and finds the
 * posted receive by the header's seq (rx_spray).
 *
 * progress() tries recv/send directly on every socket that has work and
 * stops at EAGAIN or at a short transfer (the kernel buffer is empty or
 * full): one system call per socket and direction when there is nothing to
 * do, no poll().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transports/socket/socket.h"
#include "util/log.h"

#define HDR_BYTES sizeof(struct weft_sock_frame)

static struct weft_sock_conn *to_conn(struct weft_conn *conn)
{
	return weft_container_of(conn, struct weft_sock_conn, base);
}

static struct weft_sock_req *req_of(struct weft_tp_req *r)
{
	return r ? weft_container_of(r, struct weft_sock_req, base) : NULL;
}

static struct weft_sock_req *next_req(const struct weft_sock_req *r)
{
	return req_of(r->base.next);
}

/* Index of the first fragment of @p r that travels on socket @p s
 * (>= nchunks if none does). */
static uint64_t first_chunk_on(const struct weft_sock_req *r, unsigned s, unsigned nsocks)
{
	return (s + nsocks - r->s0) % nsocks;
}

static size_t frag_len(const struct weft_msg *m, uint64_t chunk, size_t chunk_bytes)
{
	size_t off = (size_t)chunk * chunk_bytes;
	size_t left = m->len - off;
	return left < chunk_bytes ? left : chunk_bytes;
}

static bool sprayed(const struct weft_sock_conn *c)
{
	return c->sc->spray == WEFT_SPRAY_ADAPTIVE;
}

static void queue_push(struct weft_sock_queue *q, struct weft_sock_req *r,
		       const struct weft_sock_comm *sc)
{
	size_t len = r->base.msg->len;
	uint64_t n = len == 0 ? 1 : (len + sc->chunk - 1) / sc->chunk;
	r->s0 = q->s0;
	r->seq = q->seq++;
	r->nchunks = r->left = n;
	r->dealt = 0;
	weft_reqq_push(&q->q, &r->base);
	q->s0 = (unsigned)((q->s0 + n) % sc->nsocks);
	if (!q->deal)
		q->deal = r; /* every earlier message is dealt out */
}

/* @p r leaves its queue and goes back to the pool; its message is done. */
static void req_finish(struct weft_sock_conn *c, struct weft_sock_queue *q, struct weft_sock_req *r,
		       weft_status_t status)
{
	weft_reqq_unlink(&q->q, &r->base);
	struct weft_msg *m = r->base.msg;
	weft_tp_pool_put(&c->sc->reqs, r);
	weft_msg_complete(m, status);
}

static void frame_hdr(struct weft_sock_frame *h, const struct weft_sock_req *r, uint64_t chunk,
		      size_t chunk_bytes)
{
	const struct weft_msg *m = r->base.msg;
	*h = (struct weft_sock_frame){
	    .magic = WEFT_SOCK_FRAME_MAGIC,
	    .frag_len = (uint32_t)frag_len(m, chunk, chunk_bytes),
	    .tag = m->tag,
	    .len = m->len,
	    .off = (uint64_t)chunk * chunk_bytes,
	    .seq = r->seq,
	};
}

static void tx_frame(struct weft_sock_tx *tx, struct weft_sock_req *r, uint64_t chunk,
		     size_t chunk_bytes)
{
	tx->req = r;
	tx->chunk = chunk;
	tx->done = 0;
	frame_hdr(&tx->hdr, r, chunk, chunk_bytes);
}

/* The fragment after (*r, *chunk) on socket s, as the cursor will walk;
 * false if there is none queued. */
static bool next_on_sock(const struct weft_sock_conn *c, unsigned s, struct weft_sock_req **r,
			 uint64_t *chunk)
{
	unsigned nsocks = c->sc->nsocks;
	if (*chunk + nsocks < (*r)->nchunks) {
		*chunk += nsocks;
		return true;
	}
	for (struct weft_sock_req *x = next_req(*r); x; x = next_req(x)) {
		uint64_t j = first_chunk_on(x, s, nsocks);
		if (j < x->nchunks) {
			*r = x;
			*chunk = j;
			return true;
		}
	}
	return false;
}

/* Sprayed: socket s's send cursor takes the next undealt fragment. */
static void tx_deal(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock_queue *q = &c->sendq;
	struct weft_sock_req *r = q->deal;
	if (!r) {
		c->sock[s].tx.req = NULL;
		return;
	}
	tx_frame(&c->sock[s].tx, r, r->dealt++, c->sc->chunk);
	if (r->dealt == r->nchunks)
		q->deal = next_req(r);
}

/* Point socket s's send cursor at the first fragment for it in r or later. */
static void tx_seek(struct weft_sock_conn *c, unsigned s, struct weft_sock_req *r)
{
	struct weft_sock_comm *sc = c->sc;
	for (; r; r = next_req(r)) {
		uint64_t j = first_chunk_on(r, s, sc->nsocks);
		if (j < r->nchunks) {
			tx_frame(&c->sock[s].tx, r, j, sc->chunk);
			return;
		}
	}
	c->sock[s].tx.req = NULL;
}

static void rx_seek(struct weft_sock_conn *c, unsigned s, struct weft_sock_req *r)
{
	struct weft_sock_comm *sc = c->sc;
	struct weft_sock_rx *rx = &c->sock[s].rx;
	for (; r; r = next_req(r)) {
		uint64_t j = first_chunk_on(r, s, sc->nsocks);
		if (j < r->nchunks) {
			rx->req = r;
			rx->chunk = j;
			rx->hdr_got = rx->frag_got = 0;
			c->sock[s].bounce.have = 0;
			return;
		}
	}
	rx->req = NULL;
}

static void close_sock(struct weft_sock *s)
{
	if (s->fd >= 0) {
		shutdown(s->fd, SHUT_RDWR);
		close(s->fd);
		s->fd = -1;
	}
	s->phase = WEFT_SOCK_CLOSED;
	s->tx.req = NULL;
	s->rx.req = NULL;
}

void weft_tp_socket_conn_fail(struct weft_sock_conn *c, weft_status_t status)
{
	if (!c->failed)
		c->failed = status;
	weft_tp_socket_forget_handshakes(c);
	for (unsigned i = 0; i < c->sc->nsocks; i++)
		close_sock(&c->sock[i]);
	if (c->call_fd >= 0) {
		close(c->call_fd);
		c->call_fd = -1;
	}
	c->sendq.deal = NULL;
	while (c->sendq.q.head)
		req_finish(c, &c->sendq, req_of(c->sendq.q.head), c->failed);
	while (c->recvq.q.head)
		req_finish(c, &c->recvq, req_of(c->recvq.q.head), c->failed);
}

/* The peer is gone or broke the protocol: record why once, fail everything. */
static weft_status_t peer_failed(struct weft_sock_conn *c, unsigned s, int err)
{
	const struct weft_tp_env *env = c->sc->base.env;
	weft_status_t st;
	if (err == 0 || err == ECONNRESET || err == EPIPE)
		st = weft_tp_fail(env, WEFT_ERR_REMOTE,
				  "peer rank %d closed the connection (socket %u%s)", c->base.peer,
				  s,
				  err == 0	 ? ""
				  : err == EPIPE ? ", broken pipe"
						 : ", reset");
	else
		st = weft_tp_fail_errno(env, err, "socket %u to peer rank %d", s, c->base.peer);
	weft_tp_socket_conn_fail(c, err == 0 || err == ECONNRESET || err == EPIPE ? WEFT_ERR_REMOTE
										  : st);
	return st;
}

/* A request for @p m, or NULL with @p m completed with the reason. */
static struct weft_sock_req *post_req(struct weft_sock_conn *c, struct weft_msg *m, bool recv,
				      weft_status_t *st)
{
	const struct weft_tp_env *env = c->sc->base.env;
	weft_status_t refused = c->failed;
	if (!refused && !c->up)
		refused = weft_tp_fail(
		    env, WEFT_ERR_INTERNAL,
		    "socket: message posted to peer rank %d before it was connected", c->base.peer);
	/* A fragment is a multiple of 4 KiB, so a power-of-two unit that
	 * divides the length never straddles two fragments. Checked before
	 * the start below makes a zero unit 1. */
	if (!refused && recv && m->reduce && (m->unit == 0 || m->len % m->unit || 4096 % m->unit))
		refused = weft_tp_fail(env, WEFT_ERR_INTERNAL,
				       "socket: reduce receive of %zu bytes with element size %zu",
				       m->len, m->unit);
	return weft_tp_req_start(&c->sc->reqs, env, "socket", m, refused, st);
}

/* Queue @p m and point every idle socket cursor of its direction at it. */
static weft_status_t post(struct weft_conn *conn, struct weft_msg *m, bool recv)
{
	struct weft_sock_conn *c = to_conn(conn);
	weft_status_t st;
	struct weft_sock_req *r = post_req(c, m, recv, &st);
	if (!r)
		return st;
	queue_push(recv ? &c->recvq : &c->sendq, r, c->sc);
	for (unsigned s = 0; s < c->sc->nsocks; s++) {
		if (sprayed(c)) {
			/* A receive is found by the headers as they come. */
			if (!recv && !c->sock[s].tx.req)
				tx_deal(c, s);
		} else if (recv && !c->sock[s].rx.req)
			rx_seek(c, s, r);
		else if (!recv && !c->sock[s].tx.req)
			tx_seek(c, s, r);
	}
	return WEFT_SUCCESS;
}

weft_status_t weft_tp_socket_isend(struct weft_conn *conn, struct weft_msg *m)
{
	return post(conn, m, false);
}

weft_status_t weft_tp_socket_irecv(struct weft_conn *conn, struct weft_msg *m)
{
	return post(conn, m, true);
}

/* One fragment of r is finished on socket s: account for it and move the
 * socket's cursor on before r may leave the queue. */
static void frag_done(struct weft_sock_conn *c, struct weft_sock_queue *q, unsigned s,
		      struct weft_sock_req *r, uint64_t chunk, size_t bytes, bool tx)
{
	r->base.xferred += bytes;
	if (tx)
		c->sock[s].tx_bytes += bytes;
	uint64_t next = chunk + c->sc->nsocks;
	if (sprayed(c) && tx) {
		tx_deal(c, s);
	} else if (sprayed(c)) {
		struct weft_sock_rx *rx = &c->sock[s].rx;
		rx->req = NULL; /* the next header says where its fragment goes */
		rx->hdr_got = rx->frag_got = 0;
		c->sock[s].bounce.have = 0;
	} else if (next < r->nchunks) {
		if (tx) {
			tx_frame(&c->sock[s].tx, r, next, c->sc->chunk);
		} else {
			struct weft_sock_rx *rx = &c->sock[s].rx;
			rx->chunk = next;
			rx->hdr_got = rx->frag_got = 0;
			c->sock[s].bounce.have = 0;
		}
	} else if (tx) {
		tx_seek(c, s, next_req(r));
	} else {
		rx_seek(c, s, next_req(r));
	}
	if (--r->left == 0)
		req_finish(c, q, r, WEFT_SUCCESS);
}

/* Add frame (m, chunk) to iov from byte @p done of header + fragment on;
 * returns the bytes added. */
static size_t tx_iov(struct iovec *iov, int *n_iov, const struct weft_sock_frame *h,
		     const struct weft_sock_req *r, size_t done)
{
	const struct weft_msg *m = r->base.msg;
	size_t flen = h->frag_len;
	const char *payload = flen ? (const char *)m->buf + h->off : NULL;
	if (done < HDR_BYTES) {
		iov[(*n_iov)++] = (struct iovec){(char *)h + done, HDR_BYTES - done};
		if (flen)
			iov[(*n_iov)++] = (struct iovec){(void *)payload, flen};
	} else {
		iov[(*n_iov)++] =
		    (struct iovec){(void *)(payload + done - HDR_BYTES), flen - (done - HDR_BYTES)};
	}
	return HDR_BYTES + flen - done;
}

static weft_status_t tx_progress(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock *sk = &c->sock[s];
	struct weft_sock_tx *tx = &sk->tx;
	while (tx->req) {
		/* The current frame, then, while they are small, the frames queued
		 * behind it on this socket: one system call for a burst of small
		 * messages. */
		struct iovec iov[2 * (WEFT_SOCK_TX_BATCH + 1)];
		int n_iov = 0;
		size_t want = tx_iov(iov, &n_iov, &tx->hdr, tx->req, tx->done);
		struct weft_sock_req *r = tx->req;
		uint64_t chunk = tx->chunk;
		/* (Sprayed, a socket holds one fragment at a time.) */
		for (int k = 0;
		     !sprayed(c) && k < WEFT_SOCK_TX_BATCH && want < WEFT_SOCK_TX_BATCH_BYTES;
		     k++) {
			if (!next_on_sock(c, s, &r, &chunk))
				break;
			frame_hdr(&tx->ahead[k], r, chunk, c->sc->chunk);
			want += tx_iov(iov, &n_iov, &tx->ahead[k], r, 0);
		}
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n_iov};
		ssize_t n = sendmsg(sk->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return WEFT_SUCCESS;
			return peer_failed(c, s, errno);
		}
		/* Walk the cursor over what went out; it rebuilds the same headers. */
		size_t left = (size_t)n;
		while (left && tx->req) {
			size_t rest = HDR_BYTES + tx->hdr.frag_len - tx->done;
			if (left < rest) {
				tx->done += left;
				break;
			}
			left -= rest;
			frag_done(c, &c->sendq, s, tx->req, tx->chunk, tx->hdr.frag_len, true);
		}
		if ((size_t)n < want)
			return WEFT_SUCCESS; /* the socket buffer is full */
	}
	return WEFT_SUCCESS;
}

static weft_status_t header_mismatch(struct weft_sock_conn *c, unsigned s, const struct weft_msg *m,
				     size_t off, size_t flen)
{
	const struct weft_sock_frame *h = &c->sock[s].rx.hdr;
	const struct weft_tp_env *env = c->sc->base.env;
	weft_status_t st;
	if (h->magic != WEFT_SOCK_FRAME_MAGIC)
		st = weft_tp_fail(env, WEFT_ERR_REMOTE,
				  "peer rank %d sent a corrupt frame header (socket %u)",
				  c->base.peer, s);
	else if (h->tag != m->tag || h->len != m->len) {
		char why[256];
		env->explain(env->ctx, h->tag, m->tag, c->base.peer, why, sizeof(why));
		st = weft_tp_fail(
		    env, WEFT_ERR_REMOTE,
		    "peer rank %d sent a message with tag %#llx and %llu bytes where the "
		    "receive posted here has tag %#llx and %zu bytes (socket %u)%s%s",
		    c->base.peer, (unsigned long long)h->tag, (unsigned long long)h->len,
		    (unsigned long long)m->tag, m->len, s, why[0] ? ": " : "", why);
	} else {
		st = weft_tp_fail(
		    env, WEFT_ERR_REMOTE,
		    "peer rank %d sent fragment %llu+%u of tag %#llx where %zu+%zu was "
		    "expected (socket %u)",
		    c->base.peer, (unsigned long long)h->off, h->frag_len,
		    (unsigned long long)m->tag, off, flen, s);
	}
	weft_tp_socket_conn_fail(c, WEFT_ERR_REMOTE);
	return st;
}

static weft_status_t rx_progress(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock_comm *sc = c->sc;
	struct weft_sock *sk = &c->sock[s];
	struct weft_sock_rx *rx = &sk->rx;
	struct weft_bounce *b = &sk->bounce;
	while (rx->req) {
		struct weft_msg *m = rx->req->base.msg;
		size_t off = (size_t)rx->chunk * sc->chunk;
		size_t flen = frag_len(m, rx->chunk, sc->chunk);
		struct iovec iov[2];
		int n_iov = 0;
		if (rx->hdr_got < HDR_BYTES)
			iov[n_iov++] =
			    (struct iovec){(char *)&rx->hdr + rx->hdr_got, HDR_BYTES - rx->hdr_got};
		/* Read the fragment with its header: one call for a small message.
		 * If the header turns out wrong, the bytes are never used. */
		size_t left = flen - rx->frag_got;
		if (left && m->reduce) {
			size_t room = weft_bounce_room(b);
			iov[n_iov++] =
			    (struct iovec){weft_bounce_tail(b), left < room ? left : room};
		} else if (left) {
			iov[n_iov++] = (struct iovec){(char *)m->buf + off + rx->frag_got, left};
		}
		size_t want = 0;
		for (int i = 0; i < n_iov; i++)
			want += iov[i].iov_len;
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n_iov};
		ssize_t n = recvmsg(sk->fd, &mh, MSG_DONTWAIT);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return WEFT_SUCCESS;
			return peer_failed(c, s, n == 0 ? 0 : errno);
		}
		size_t got = (size_t)n;
		if (rx->hdr_got < HDR_BYTES) {
			size_t h = got < HDR_BYTES - rx->hdr_got ? got : HDR_BYTES - rx->hdr_got;
			rx->hdr_got += h;
			got -= h;
			if (rx->hdr_got == HDR_BYTES &&
			    (rx->hdr.magic != WEFT_SOCK_FRAME_MAGIC || rx->hdr.tag != m->tag ||
			     rx->hdr.len != m->len || rx->hdr.off != off ||
			     rx->hdr.frag_len != flen || rx->hdr.seq != rx->req->seq))
				return header_mismatch(c, s, m, off, flen);
		}
		/* Reduce: the bounce's first byte is byte off + frag_got - have. */
		if (m->reduce)
			weft_bounce_deliver(b, got, m, off + rx->frag_got - b->have);
		rx->frag_got += got;
		if (rx->hdr_got == HDR_BYTES && rx->frag_got == flen)
			frag_done(c, &c->recvq, s, rx->req, rx->chunk, flen, false);
		else if ((size_t)n < want)
			return WEFT_SUCCESS; /* drained what the kernel had */
	}
	return WEFT_SUCCESS;
}

/* Sprayed: the posted receive a complete header belongs to, with the
 * cursor pointed at its fragment; NULL with *st set if the header is
 * wrong, NULL with *st == 0 if its receive is not posted yet. */
static struct weft_sock_req *rx_place(struct weft_sock_conn *c, unsigned s, weft_status_t *st)
{
	struct weft_sock_rx *rx = &c->sock[s].rx;
	const struct weft_sock_frame *h = &rx->hdr;
	size_t chunk = c->sc->chunk;
	*st = WEFT_SUCCESS;
	if (h->magic == WEFT_SOCK_FRAME_MAGIC && h->seq >= c->recvq.seq)
		return NULL; /* waits, header read, until its receive is posted */
	struct weft_sock_req *r = req_of(c->recvq.q.head);
	while (r && r->seq != h->seq)
		r = next_req(r);
	if (!r || h->magic != WEFT_SOCK_FRAME_MAGIC) {
		*st = weft_tp_fail(c->sc->base.env, WEFT_ERR_REMOTE,
				   "peer rank %d sent %s (socket %u)", c->base.peer,
				   h->magic != WEFT_SOCK_FRAME_MAGIC
				       ? "a corrupt frame header"
				       : "a fragment of a finished message",
				   s);
		weft_tp_socket_conn_fail(c, WEFT_ERR_REMOTE);
		return NULL;
	}
	const struct weft_msg *m = r->base.msg;
	uint64_t i = h->off / chunk;
	size_t off = i < r->nchunks ? (size_t)i * chunk : 0;
	size_t flen = i < r->nchunks ? frag_len(m, i, chunk) : 0;
	if (h->tag != m->tag || h->len != m->len || h->off != off || h->frag_len != flen ||
	    i >= r->nchunks) {
		*st = header_mismatch(c, s, m, off, flen);
		return NULL;
	}
	rx->req = r;
	rx->chunk = i;
	rx->frag_got = 0;
	c->sock[s].bounce.have = 0;
	return r;
}

/* Sprayed: the peer closed socket s between two frames. A peer that is
 * done may close while its last fragments are still on other sockets, so
 * a receive still waiting is an error only once every socket is closed. */
static bool all_eof(const struct weft_sock_conn *c)
{
	for (unsigned i = 0; i < c->sc->nsocks; i++)
		if (!c->sock[i].eof)
			return false;
	return true;
}

static weft_status_t rx_eof(struct weft_sock_conn *c, unsigned s)
{
	c->sock[s].eof = true;
	return all_eof(c) ? peer_failed(c, s, 0) : WEFT_SUCCESS;
}

/* Sprayed receive on socket s: a header, then its fragment, into whichever
 * posted receive it names. */
static weft_status_t rx_spray(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock *sk = &c->sock[s];
	struct weft_sock_rx *rx = &sk->rx;
	struct weft_bounce *b = &sk->bounce;
	for (;;) {
		size_t want;
		ssize_t n;
		if (rx->hdr_got == 0 && !c->recvq.q.head)
			return WEFT_SUCCESS; /* nothing expected: leave the next frame (or EOF) */
		if (rx->hdr_got < HDR_BYTES) {
			want = HDR_BYTES - rx->hdr_got;
			n = recv(sk->fd, (char *)&rx->hdr + rx->hdr_got, want, MSG_DONTWAIT);
		} else {
			weft_status_t st;
			if (!rx->req && !rx_place(c, s, &st))
				return st;
			struct weft_msg *m = rx->req->base.msg;
			size_t off = (size_t)rx->chunk * c->sc->chunk + rx->frag_got;
			want = rx->hdr.frag_len - rx->frag_got;
			void *dst = (char *)m->buf + off;
			if (m->reduce) {
				size_t room = weft_bounce_room(b);
				want = want < room ? want : room;
				dst = weft_bounce_tail(b);
			}
			n = want ? recv(sk->fd, dst, want, MSG_DONTWAIT) : 0;
			if (n > 0 && m->reduce)
				weft_bounce_deliver(b, (size_t)n, m, off - b->have);
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return WEFT_SUCCESS;
		if (n == 0 && want && rx->hdr_got == 0)
			return rx_eof(c, s);
		if (n < 0 || (n == 0 && want))
			return peer_failed(c, s, n == 0 ? 0 : errno);
		if (rx->hdr_got < HDR_BYTES) {
			rx->hdr_got += (size_t)n;
		} else {
			rx->frag_got += (size_t)n;
			if (rx->frag_got == rx->hdr.frag_len)
				frag_done(c, &c->recvq, s, rx->req, rx->chunk, rx->frag_got, false);
		}
		if ((size_t)n < want)
			return WEFT_SUCCESS; /* drained what the kernel had */
	}
}

weft_status_t weft_tp_socket_progress(struct weft_tp *tp)
{
	struct weft_sock_comm *sc = weft_container_of(tp, struct weft_sock_comm, base);
	weft_status_t ret = weft_tp_socket_setup_progress(sc);
	for (int k = 0; k < sc->nactive; k++) {
		struct weft_sock_conn *c = sc->active[k];
		if (c->failed || (!c->sendq.q.head && !c->recvq.q.head))
			continue;
		bool spray = sprayed(c);
		if (spray && c->recvq.q.head && all_eof(c)) {
			weft_status_t st = peer_failed(c, 0, 0);
			ret = ret ? ret : st;
			continue;
		}
		for (unsigned s = 0; s < sc->nsocks && !c->failed; s++) {
			weft_status_t st = WEFT_SUCCESS;
			struct weft_sock *sk = &c->sock[s];
			if (spray && !sk->eof && (c->recvq.q.head || sk->rx.hdr_got))
				st = rx_spray(c, s);
			else if (!spray && sk->rx.req)
				st = rx_progress(c, s);
			if (st == WEFT_SUCCESS && spray && !sk->tx.req)
				tx_deal(c, s);
			if (st == WEFT_SUCCESS && sk->tx.req)
				st = tx_progress(c, s);
			if (st != WEFT_SUCCESS && ret == WEFT_SUCCESS)
				ret = st;
		}
	}
	return ret;
}
