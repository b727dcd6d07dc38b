/* bootstrap_root_io.c — the root listener's connections: frames queued
 * for sending, what is written when the socket takes it, accepting new
 * connections within bounds, closing and freeing. The protocol that uses
 * them is in bootstrap_root.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_root.h"
#include "util/clock.h"
#include "util/log.h"

struct blob *blob_new(size_t len)
{
	struct blob *b = malloc(sizeof(*b) + (len ? len : 1));

	if (!b)
		return NULL;
	b->refs = 1;
	b->len = len;
	return b;
}

void blob_put(struct blob *b)
{
	if (b && --b->refs == 0)
		free(b);
}

struct blob *blob_deflate(const struct blob *b)
{
	uLongf len = compressBound((uLong)b->len);
	struct blob *z = blob_new((size_t)len);

	if (!z)
		return NULL;
	/* Level 1: 87 MB of cards (100,000 ranks) in a third of a second. */
	if (compress2(z->data, &len, b->data, (uLong)b->len, 1) != Z_OK) {
		blob_put(z);
		return NULL;
	}
	z->len = (size_t)len;
	return z;
}

void conn_close(struct conn *c)
{
	struct out_msg *m = c->out_head;

	while (m) {
		struct out_msg *next = m->next;

		blob_put(m->blob);
		free(m);
		m = next;
	}
	c->out_head = c->out_tail = NULL;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->phase = CONN_DEAD;
}

/* Queue a frame; the connection takes a reference on @p blob. */
void conn_queue(struct conn *c, uint32_t type, uint32_t seq, struct blob *blob)
{
	struct out_msg *m;

	if (c->phase == CONN_DEAD)
		return;
	m = calloc(1, sizeof(*m));
	if (!m) {
		weft_log(WEFT_LOG_WARN, WEFT_SUB_BOOT,
			 "bootstrap root: out of memory queueing a reply to %s; dropping it",
			 c->peer);
		conn_close(c);
		return;
	}
	m->hdr.type = type;
	m->hdr.seq = seq;
	m->hdr.len = blob ? blob->len : 0;
	m->blob = blob;
	if (blob)
		blob->refs++;
	if (c->out_tail)
		c->out_tail->next = m;
	else
		c->out_head = m;
	c->out_tail = m;
}

struct blob *error_blob(weft_status_t status, const char *text)
{
	size_t len = strnlen(text, MAX_ERROR_BYTES - sizeof(int32_t));
	struct blob *b = blob_new(sizeof(int32_t) + len);
	int32_t st = status;

	if (!b)
		return NULL;
	memcpy(b->data, &st, sizeof(st));
	memcpy(b->data + sizeof(st), text, len);
	return b;
}

void conn_send_error(struct conn *c, weft_status_t status, const char *text)
{
	struct blob *b = error_blob(status, text);

	if (!b) {
		conn_close(c);
		return;
	}
	conn_queue(c, FRAME_ERROR, 0, b);
	blob_put(b);
}

/* Refuse a connection that sent a well-formed hello: tell it why, then close. */
void conn_refuse(struct root *r, struct conn *c, weft_status_t status, const char *text)
{
	weft_log(WEFT_LOG_WARN, WEFT_SUB_BOOT, "bootstrap root %s: refused %s: %s", r->addr,
		 c->peer, text);
	conn_send_error(c, status, text);
	c->phase = CONN_CLOSING;
	c->drain = true;
	c->deadline = weft_bootstrap_wire_now_s() + CLOSING_S;
}

void root_write(struct root *r, struct conn *c)
{
	while (c->out_head) {
		struct out_msg *m = c->out_head;
		size_t hdr_len = sizeof(m->hdr), total = hdr_len + (size_t)m->hdr.len;
		struct iovec iov[2];
		struct msghdr mh = {.msg_iov = iov};
		ssize_t n;

		if (m->off < hdr_len) {
			iov[0].iov_base = (char *)&m->hdr + m->off;
			iov[0].iov_len = hdr_len - m->off;
			iov[1].iov_base = m->blob ? m->blob->data : NULL;
			iov[1].iov_len = (size_t)m->hdr.len;
			mh.msg_iovlen = m->hdr.len ? 2 : 1;
		} else {
			iov[0].iov_base = m->blob->data + (m->off - hdr_len);
			iov[0].iov_len = total - m->off;
			mh.msg_iovlen = 1;
		}
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				root_conn_lost(r, c, strerror(errno));
			return;
		}
		m->off += (size_t)n;
		r->bytes_out += (uint64_t)n;
		if (m->off < total)
			return;
		c->out_head = m->next;
		if (!c->out_head)
			c->out_tail = NULL;
		blob_put(m->blob);
		free(m);
	}
	if (c->phase == CONN_CLOSING)
		conn_close(c);
}

void conn_left_hello(struct root *r, struct conn *c)
{
	if (c->phase == CONN_HELLO)
		r->npending--;
	weft_hs_clear(&c->hs);
}

/* A new connection needs a place among the unauthenticated: one of them
 * gives it up, as weft_hs_drop_first chooses (a rank whose connection
 * this was knocks again). */
static void evict_oldest(struct root *r)
{
	struct conn *oldest = NULL;

	for (size_t i = 0; i < r->nconns; i++) {
		struct conn *c = r->conns[i];

		if (c->phase == CONN_HELLO && weft_hs_droppable(&c->hs) &&
		    (!oldest ||
		     weft_hs_drop_first(&c->hs, c->accepted, &oldest->hs, oldest->accepted)))
			oldest = c;
	}
	if (!oldest)
		return;
	if (++r->refused <= 3)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_BOOT,
			 "bootstrap root %s: dropped connection from %s: %d connections were "
			 "already in their handshake (WEFT_MAX_PENDING)",
			 r->addr, oldest->peer, r->max_pending);
	conn_left_hello(r, oldest);
	conn_close(oldest);
}

static bool grow_conns(struct root *r)
{
	size_t cap;
	struct conn **grown;

	if (r->nconns < r->conns_cap)
		return true;
	cap = r->conns_cap ? 2 * r->conns_cap : 16;
	grown = realloc(r->conns, cap * sizeof(*grown));
	if (!grown)
		return false;
	r->conns = grown;
	r->conns_cap = cap;
	return true;
}

/* At most this many accepts per poll round, so that the handshakes under
 * way get their turn between bursts of new connections. */
#define ACCEPTS_PER_ROUND 16

void root_accept(struct root *r)
{
	for (int accepted = 0; accepted < ACCEPTS_PER_ROUND; accepted++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		struct conn *c;
		int fd = accept4(r->listen_fd, (struct sockaddr *)&ss, &len,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE) {
				/* the connection waits in the backlog; poll() would
				 * report it again at once */
				if (r->accept_rest_until == 0)
					weft_log(WEFT_LOG_WARN, WEFT_SUB_BOOT,
						 "bootstrap root %s: accept: %s (%zu connections "
						 "open); raise `ulimit -n`",
						 r->addr, strerror(errno), r->nconns);
				r->accept_rest_until = weft_bootstrap_wire_now_s() + 0.1;
				return;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				weft_log(WEFT_LOG_WARN, WEFT_SUB_BOOT,
					 "bootstrap root %s: accept: %s", r->addr, strerror(errno));
			return;
		}
		if (r->npending >= r->max_pending)
			evict_oldest(r);
		c = calloc(1, sizeof(*c));
		if (!c || !grow_conns(r)) {
			weft_log(WEFT_LOG_WARN, WEFT_SUB_BOOT,
				 "bootstrap root %s: out of memory; dropped a connection", r->addr);
			free(c);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->rank = -1;
		c->phase = CONN_HELLO;
		c->accepted = weft_bootstrap_wire_now_s();
		c->deadline = c->accepted + r->handshake_s;
		weft_hs_accept(&c->hs, fd);
		weft_bootstrap_wire_addr_format((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
		if (weft_bootstrap_wire_addr_len_ok(ss.ss_family, len)) {
			memcpy(&c->addr, &ss, len);
			c->addr_len = len;
		}
		r->conns[r->nconns++] = c;
		r->npending++;
		if (r->nconns > r->peak_conns)
			r->peak_conns = r->nconns;
	}
}

void root_free(struct root *r)
{
	for (size_t i = 0; i < r->nconns; i++) {
		conn_close(r->conns[i]);
		free(r->conns[i]);
	}
	free(r->conns);
	free(r->by_rank);
	free(r->local_pids);
	free(r->gone);
	free(r->scratch);
	free(r->op_have);
	blob_put(r->op_blob);
	if (r->listen_fd >= 0)
		close(r->listen_fd);
	weft_wipe(&r->key, sizeof(r->key));
	free(r);
}

void root_compact(struct root *r)
{
	size_t j = 0;

	for (size_t i = 0; i < r->nconns; i++) {
		if (r->conns[i]->phase == CONN_DEAD)
			free(r->conns[i]);
		else
			r->conns[j++] = r->conns[i];
	}
	r->nconns = j;
}
