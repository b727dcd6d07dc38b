/*
 * socket_data.c — the TCP transport's queues and progress: messages posted
 * per connection and direction, in post order (struct weft_sock_req from
 * the transport's pool), and the progress that moves every socket of every
 * busy connection (socket_tx.c, socket_rx.c) and runs the health checks
 * (socket_path.c). See socket.h for the wire format.
 *
 * A message is done when all of its fragments are — read whole into a
 * receive, acknowledged (or copied, small) for a send — whichever socket
 * carried them, and leaves its queue at once (the poster may then reuse
 * it).
 *
 * progress() tries recv/send directly on every socket that has work and
 * stops at EAGAIN or at a short transfer (the kernel buffer is empty or
 * full): one system call per socket and direction when there is nothing to
 * do, no poll(). A socket is read only while something may come on it: a
 * receive is posted, a frame is half read, or a send waits for its
 * acknowledgement.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transports/socket/socket.h"
#include "util/clock.h"
#include "util/log.h"

/* Progress calls between two looks at every socket of a connection with
 * nothing expected (a BYE, a close, a request to replace a socket). */
#define SOCK_LOOK_POLLS 64

/* At the end, what was sent may take this long (at most WEFT_PEER_DEAD)
 * to reach the peer's kernel before the sockets close anyway. */
#define SOCK_FLUSH_MAX_S 2.0

static struct weft_sock_conn *to_conn(struct weft_conn *conn)
{
	return weft_container_of(conn, struct weft_sock_conn, base);
}

static struct weft_sock_req *req_of(struct weft_tp_req *r)
{
	return r ? weft_container_of(r, struct weft_sock_req, base) : NULL;
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
	r->ackreq = false;
	weft_reqq_push(&q->q, &r->base);
	q->s0 = (unsigned)((q->s0 + n) % sc->nsocks);
	if (!q->deal)
		q->deal = r; /* every earlier message is dealt out */
}

void weft_tp_socket_req_finish(struct weft_sock_conn *c, struct weft_sock_queue *q,
			       struct weft_sock_req *r, weft_status_t status)
{
	weft_reqq_unlink(&q->q, &r->base);
	if (q->deal == r)
		q->deal = req_of(r->base.next);
	if (r->done && r->done != r->done_inline)
		free(r->done);
	r->done = NULL;
	for (unsigned k = 0; q == &c->recvq && k < WEFT_SOCK_ORPHANS; k++)
		if (c->orphans[k].req == r)
			c->orphans[k].req = NULL;
	struct weft_msg *m = r->base.msg;
	weft_tp_pool_put(&c->sc->reqs, r);
	weft_msg_complete(m, status);
}

void weft_tp_socket_close_fd(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock *sk = &c->sock[s];
	if (sk->fd >= 0) {
		c->sc->io->shutdown(sk->fd, SHUT_RDWR);
		c->sc->io->close(sk->fd);
		sk->fd = -1;
	}
}

/* Forget what slot @p s was reading and writing (its records are moved or
 * dropped by the caller). */
static void reset_slot(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock *sk = &c->sock[s];
	sk->rx.in_frame = sk->rx.discard = false;
	sk->rx.req = NULL;
	sk->rx.pos = sk->rx.len = 0;
	sk->rx.got = sk->rx.skip = 0;
	sk->bounce.have = 0;
	sk->tx.walk = NULL;
	sk->tx.ctl_want = 0;
	sk->tx.ctl_len = sk->tx.ctl_done = 0;
}

void weft_tp_socket_conn_fail(struct weft_sock_conn *c, weft_status_t status)
{
	if (!c->failed)
		c->failed = status;
	weft_tp_socket_forget_handshakes(c);
	for (unsigned i = 0; i < c->sc->nslots; i++) {
		weft_tp_socket_close_fd(c, i);
		c->sock[i].phase = WEFT_SOCK_CLOSED;
		reset_slot(c, i);
	}
	if (c->call_fd >= 0) {
		close(c->call_fd);
		c->call_fd = -1;
	}
	if (c->repath_fd >= 0) {
		close(c->repath_fd);
		c->repath_fd = -1;
	}
	weft_tp_socket_sent_drop(c);
	c->sendq.deal = NULL;
	while (c->sendq.q.head)
		weft_tp_socket_req_finish(c, &c->sendq, req_of(c->sendq.q.head), c->failed);
	while (c->recvq.q.head)
		weft_tp_socket_req_finish(c, &c->recvq, req_of(c->recvq.q.head), c->failed);
}

weft_status_t weft_tp_socket_peer_failed(struct weft_sock_conn *c, unsigned s, int err)
{
	const struct weft_tp_env *env = c->sc->base.env;
	weft_status_t st;
	bool closed = err == 0 || err == ECONNRESET || err == EPIPE;
	if (closed)
		st = weft_tp_fail(env, WEFT_ERR_REMOTE,
				  "peer rank %d closed the connection (socket %u%s)", c->base.peer,
				  s,
				  err == 0	 ? ""
				  : err == EPIPE ? ", broken pipe"
						 : ", reset");
	else
		st = weft_tp_fail_errno(env, err, "socket %u to peer rank %d", s, c->base.peer);
	weft_tp_socket_conn_fail(c, closed ? WEFT_ERR_REMOTE : st);
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

/* Queue @p m; the sockets pick it up in progress. */
static weft_status_t post(struct weft_conn *conn, struct weft_msg *m, bool recv)
{
	struct weft_sock_conn *c = to_conn(conn);
	weft_status_t st;
	struct weft_sock_req *r = post_req(c, m, recv, &st);
	if (!r)
		return st;
	queue_push(recv ? &c->recvq : &c->sendq, r, c->sc);
	if (!recv) {
		weft_tp_socket_tx_posted(c, r);
		return WEFT_SUCCESS;
	}
	r->done = NULL;
	if (!weft_tp_socket_rx_bitmap(r)) {
		st = weft_tp_fail(c->sc->base.env, WEFT_ERR_NO_MEMORY,
				  "socket: no memory for a receive of %zu bytes", m->len);
		weft_tp_socket_req_finish(c, &c->recvq, r, st);
		return st;
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

/* Acknowledgements owed and not carried by any header this round go on
 * the control socket: at once where a sender waits (it asked, or a
 * receive it completed asked), else after a batch of frames, which frees
 * the peer's replay ring. While the control socket is being replaced
 * (failed over), on the first data socket that is up: a sender waiting
 * for them would otherwise wait for the replacement. */
static void acks_out(struct weft_sock_conn *c)
{
	unsigned via = weft_sock_ctl_slot(c->sc);
	for (unsigned s = 0; !weft_tp_socket_usable(c, via) && s < c->sc->nsocks; s++)
		via = s;
	if (!weft_tp_socket_usable(c, via))
		return; /* none up: asked again at the next check */
	bool now = c->ack_urgent || c->ack_frames >= 32;
	if (c->ack_asked) { /* our acknowledgements may wait behind data: ask */
		c->ack_asked = false;
		weft_tp_socket_ctl(c, via, WEFT_SOCK_CTL_ACKNOW, 0, 0, 0);
	}
	if (now && c->ack_owed)
		weft_tp_socket_ctl(c, via, WEFT_SOCK_CTL_ACK, 0, 0, 0);
	if (weft_tp_socket_tx_busy(c, via))
		weft_tp_socket_tx(c, via);
}

/* Does @p c need its sockets moved? @p look: every socket is read this
 * time (now and then, for a BYE, a close, a request to replace one). */
static bool busy(struct weft_sock_conn *c, bool look)
{
	if (c->failed)
		return false;
	return look || c->sendq.q.head || c->recvq.q.head || c->unacked || c->resend.head ||
	       c->ack_owed || c->dark_since > 0;
}

static weft_status_t conn_progress(struct weft_sock_conn *c, bool look)
{
	const struct weft_sock_comm *sc = c->sc;
	weft_status_t ret = weft_tp_socket_closed_check(c);
	for (unsigned s = 0; s < sc->nslots && !c->failed; s++) {
		weft_status_t st = WEFT_SUCCESS;
		if (weft_tp_socket_rx_wanted(c, s) ||
		    (look && weft_tp_socket_usable(c, s) && !c->sock[s].eof))
			st = weft_tp_socket_rx(c, s);
		if (st == WEFT_SUCCESS && weft_tp_socket_usable(c, s))
			st = weft_tp_socket_tx(c, s);
		if (st != WEFT_SUCCESS && ret == WEFT_SUCCESS)
			ret = st;
	}
	if (!c->failed && weft_sock_acking(sc)) {
		acks_out(c);
		weft_status_t st = weft_tp_socket_health(c);
		if (st != WEFT_SUCCESS && ret == WEFT_SUCCESS)
			ret = st;
	}
	return ret;
}

weft_status_t weft_tp_socket_progress(struct weft_tp *tp)
{
	struct weft_sock_comm *sc = weft_container_of(tp, struct weft_sock_comm, base);
	weft_status_t ret = weft_tp_socket_setup_progress(sc);
	for (int k = 0; k < sc->nactive; k++) {
		struct weft_sock_conn *c = sc->active[k];
		bool look = ++c->polls % SOCK_LOOK_POLLS == 0;
		if (!busy(c, look))
			continue;
		weft_status_t st = conn_progress(c, look);
		if (st != WEFT_SUCCESS && ret == WEFT_SUCCESS)
			ret = st;
	}
	return ret;
}

/* Does @p c still have frames to write, or bytes its peer's kernel has
 * not acknowledged? */
static bool unflushed(struct weft_sock_conn *c)
{
	if (c->resend.head)
		return true;
	for (unsigned s = 0; s < c->sc->nslots; s++) {
		struct tcp_info ti;
		if (!weft_tp_socket_usable(c, s))
			continue;
		if (weft_tp_socket_tx_busy(c, s))
			return true;
		if (c->sc->io->tcp_info(c->sock[s].fd, &ti) == 0 &&
		    (ti.tcpi_unacked > 0 || ti.tcpi_notsent_bytes > 0))
			return true;
	}
	return false;
}

void weft_tp_socket_flush(struct weft_sock_comm *sc)
{
	if (!weft_sock_acking(sc))
		return;
	double bound = sc->peer_dead_s < SOCK_FLUSH_MAX_S ? sc->peer_dead_s : SOCK_FLUSH_MAX_S;
	double end = weft_now() + bound;
	for (;;) {
		bool left = false;
		for (int k = 0; k < sc->nactive; k++) {
			struct weft_sock_conn *c = sc->active[k];
			if (c->failed || c->peer_bye)
				continue;
			bool data = c->resend.head != NULL;
			for (unsigned s = 0; s < sc->nslots; s++)
				data = data || c->sock[s].tx.wr;
			if (!data && !c->bye_sent) { /* nothing follows it on any socket */
				c->bye_sent = true;
				for (unsigned s = 0; s < sc->nslots; s++)
					if (weft_tp_socket_usable(c, s))
						weft_tp_socket_ctl(c, s, WEFT_SOCK_CTL_BYE, 0, 0,
								   0);
			}
			left = left || !c->bye_sent || unflushed(c);
		}
		if (!left || weft_now() > end)
			return;
		weft_tp_socket_progress(&sc->base);
	}
}
