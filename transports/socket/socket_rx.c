/*
 * socket_rx.c — each socket's receiving side: frames read from the kernel
 * into a staging buffer (so that a header and a small payload, or several
 * small frames, take one recv), their acknowledgements taken, control
 * frames handed to socket_path.c, and data placed by the header in the
 * posted receive it names; a large payload is read straight into the
 * receive's buffer (or the socket's bounce buffer, for a reducing one).
 *
 * Duplicates. After a failover the same fragment can arrive twice: its
 * resent copy and the original, from a path that came back (socket.h).
 * Each receive keeps a bitmap of the fragments delivered, and a fragment
 * already delivered is read and dropped, as is one of a receive that is
 * finished once a resent frame has been seen (before any, that is the
 * peer breaking the protocol). A fragment another socket has begun and not
 * finished is taken over by a resent copy: the newcomer delivers from
 * where the other stopped, and the other drops the rest of its copy, so no
 * byte reaches a reducing receive twice; a late original finding the
 * fragment begun is dropped (claim says why).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "transports/socket/socket.h"

static struct weft_sock_req *req_of(struct weft_tp_req *r)
{
	return r ? weft_container_of(r, struct weft_sock_req, base) : NULL;
}

static size_t frag_len(const struct weft_msg *m, uint64_t chunk, size_t chunk_bytes)
{
	size_t off = (size_t)chunk * chunk_bytes;
	size_t left = m->len - off;
	return left < chunk_bytes ? left : chunk_bytes;
}

bool weft_tp_socket_rx_bitmap(struct weft_sock_req *r)
{
	size_t words = (r->nchunks + 63) / 64;
	if (r->nchunks <= WEFT_SOCK_INLINE_FRAGS) {
		memset(r->done_inline, 0, words * sizeof(uint64_t));
		r->done = r->done_inline;
		return true;
	}
	r->done = calloc(words, sizeof(uint64_t));
	return r->done != NULL;
}

static bool frag_is_done(const struct weft_sock_req *r, uint64_t i)
{
	return r->done[i / 64] >> (i % 64) & 1;
}

bool weft_tp_socket_rx_wanted(const struct weft_sock_conn *c, unsigned s)
{
	const struct weft_sock *sk = &c->sock[s];
	const struct weft_sock_rx *rx = &sk->rx;
	if (!weft_tp_socket_usable(c, s) || sk->eof)
		return false;
	if (rx->in_frame || rx->pos < rx->len)
		return true;
	if (c->waiting > 0) /* acknowledgements expected, on any socket */
		return true;
	return c->recvq.q.head && s != weft_sock_ctl_slot(c->sc);
}

static weft_status_t corrupt(struct weft_sock_conn *c, unsigned s, const char *what)
{
	weft_status_t st = weft_tp_fail(c->sc->base.env, WEFT_ERR_REMOTE,
					"peer rank %d sent %s (socket %u)", c->base.peer, what, s);
	weft_tp_socket_conn_fail(c, WEFT_ERR_REMOTE);
	return st;
}

static weft_status_t header_mismatch(struct weft_sock_conn *c, unsigned s, const struct weft_msg *m,
				     size_t off, size_t flen)
{
	const struct weft_sock_frame *h = &c->sock[s].rx.hdr;
	const struct weft_tp_env *env = c->sc->base.env;
	weft_status_t st;
	if (h->tag != m->tag || h->len != m->len) {
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

/* Bytes of the fragment slot @p u has delivered (whole elements), from
 * the start. */
static size_t delivered(const struct weft_sock_conn *c, unsigned u)
{
	const struct weft_sock *sk = &c->sock[u];
	size_t mine = sk->rx.got - (sk->rx.req->base.msg->reduce ? sk->bounce.have : 0);
	return mine > sk->rx.skip ? mine : sk->rx.skip;
}

/* The frame on slot @p s is fragment @p i of @p r: drop it if that is
 * delivered already, else take it over from a socket that began it. */
static void claim(struct weft_sock_conn *c, unsigned s, struct weft_sock_req *r, uint64_t i)
{
	struct weft_sock_rx *rx = &c->sock[s].rx;
	if (frag_is_done(r, i)) {
		rx->discard = true;
		c->st.dups++;
		return;
	}
	for (unsigned k = 0; k < WEFT_SOCK_ORPHANS; k++) { /* its socket failed mid-way */
		struct weft_sock_orphan *o = &c->orphans[k];
		if (o->req == r && o->chunk == i) {
			rx->skip = o->delivered > rx->skip ? o->delivered : rx->skip;
			o->req = NULL;
		}
	}
	for (unsigned u = 0; u < c->sc->nslots; u++) {
		struct weft_sock_rx *o = &c->sock[u].rx;
		if (u == s || !o->in_frame || o->discard || o->req != r || o->chunk != i)
			continue;
		if (!(rx->hdr.flags & WEFT_SOCK_F_RESEND)) {
			/* A late original: the copy sent again is the one the
			 * sender counts on. Were the original to take over, the
			 * resent copy would be read whole, dropped and
			 * acknowledged, and the original's socket, failed over
			 * by the sender, could die before it finishes: the
			 * fragment would have no copy left anywhere. */
			rx->discard = true;
			c->st.dups++;
			return;
		}
		rx->skip = delivered(c, u);
		o->discard = true;
		o->req = NULL;
		c->sock[u].bounce.have = 0;
		c->st.dups++;
	}
	rx->req = r;
	rx->chunk = i;
	if (rx->hdr.flags & WEFT_SOCK_F_ACKREQ)
		r->ackreq = true;
}

/* Place the frame whose header slot @p s has read: WEFT_SUCCESS (placed,
 * or to drop), WEFT_INPROGRESS (its receive is not posted yet: the socket
 * waits, header read), or the error. */
static weft_status_t place(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock_rx *rx = &c->sock[s].rx;
	const struct weft_sock_frame *h = &rx->hdr;
	size_t chunk = c->sc->chunk;
	if (h->seq >= c->recvq.seq) {
		if (c->waiting > 0) /* its acknowledgements may wait behind this frame */
			c->ack_asked = true;
		return WEFT_INPROGRESS;
	}
	struct weft_sock_req *r = req_of(c->recvq.q.head);
	while (r && r->seq != h->seq)
		r = req_of(r->base.next);
	if (!r) {
		if (!(h->flags & WEFT_SOCK_F_RESEND) && !c->seen_resend)
			return corrupt(c, s, "a fragment of a finished message");
		rx->discard = true; /* the other copy finished it */
		c->st.dups++;
		return WEFT_SUCCESS;
	}
	const struct weft_msg *m = r->base.msg;
	uint64_t i = h->off / chunk;
	size_t off = i < r->nchunks ? (size_t)i * chunk : 0;
	size_t flen = i < r->nchunks ? frag_len(m, i, chunk) : 0;
	if (h->tag != m->tag || h->len != m->len || h->off != off || h->frag_len != flen ||
	    i >= r->nchunks)
		return header_mismatch(c, s, m, off, flen);
	claim(c, s, r, i);
	return WEFT_SUCCESS;
}

/* What is wrong with data frame header @p h on slot @p s, into @p why
 * (false: nothing). The fragment must be the one its message's length
 * and offset make it: a whole chunk, or the message's last bytes. */
static bool data_problem(const struct weft_sock_conn *c, unsigned s,
			 const struct weft_sock_frame *h, char *why, size_t len)
{
	size_t chunk = c->sc->chunk;
	uint64_t left = h->off <= h->len ? h->len - h->off : 0;
	if (h->flags & ~(unsigned)(WEFT_SOCK_F_ACKREQ | WEFT_SOCK_F_RESEND))
		snprintf(why, len, "a data frame with unknown flags %#x", h->flags);
	else if (weft_sock_acking(c->sc) && s == weft_sock_ctl_slot(c->sc))
		snprintf(why, len, "a data frame on the control socket");
	else if (h->fseq != c->sock[s].rx.frames + 1)
		snprintf(why, len, "frame %u out of sequence (expected %u)", h->fseq,
			 c->sock[s].rx.frames + 1);
	else if (h->off > h->len || h->off % chunk != 0 ||
		 h->frag_len != (left < chunk ? left : chunk))
		snprintf(why, len,
			 "a fragment that does not add up (%u bytes at offset %llu of a "
			 "%llu-byte message, in fragments of %zu)",
			 h->frag_len, (unsigned long long)h->off, (unsigned long long)h->len,
			 chunk);
	else
		return false;
	return true;
}

/* Frames slot @p s has written whole on its socket (the most the peer can
 * acknowledge for it). */
static uint32_t written_whole(const struct weft_sock_conn *c, unsigned s)
{
	const struct weft_sock_tx *tx = &c->sock[s].tx;
	return tx->wr ? tx->wr->fseq - 1 : tx->next_fseq - 1;
}

/* What is wrong with the header @p h (and its acknowledgement vector
 * @p acks) on slot @p s, into @p why (false: nothing). Every field is
 * checked before any is acted on. */
static bool header_problem(const struct weft_sock_conn *c, unsigned s,
			   const struct weft_sock_frame *h, const struct weft_sock_ack *acks,
			   char *why, size_t len)
{
	const struct weft_sock_comm *sc = c->sc;
	if (h->magic != WEFT_SOCK_FRAME_MAGIC) {
		snprintf(why, len, "a corrupt frame header (magic %#x)", h->magic);
		return true;
	}
	if (h->nacks != sc->nslots) {
		snprintf(why, len, "a frame header with %u acknowledgements (expected %u)",
			 h->nacks, sc->nslots);
		return true;
	}
	for (unsigned i = 0; weft_sock_acking(sc) && i < sc->nslots; i++)
		if (acks[i].gen == c->sock[i].gen && acks[i].frames > written_whole(c, i)) {
			snprintf(why, len,
				 "an acknowledgement of %u frames on socket %u, which carried %u",
				 acks[i].frames, i, written_whole(c, i));
			return true;
		}
	if (!(h->flags & WEFT_SOCK_F_CTL))
		return data_problem(c, s, h, why, len);
	if (h->flags != WEFT_SOCK_F_CTL || h->frag_len || h->fseq) {
		snprintf(why, len, "a control frame with flags %#x, %u payload bytes, number %u",
			 h->flags, h->frag_len, h->fseq);
		return true;
	}
	return false;
}

/* The header (and acknowledgements) at the stage's read position. */
static weft_status_t take_header(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock_rx *rx = &c->sock[s].rx;
	const struct weft_sock_comm *sc = c->sc;
	struct weft_sock_ack acks[WEFT_SOCK_MAX_SLOTS];
	char why[160];
	memcpy(&rx->hdr, rx->stage + rx->pos, sizeof(rx->hdr));
	const struct weft_sock_frame *h = &rx->hdr;
	if (h->nacks == sc->nslots)
		memcpy(acks, rx->stage + rx->pos + sizeof(*h), sc->nslots * sizeof(acks[0]));
	if (header_problem(c, s, h, acks, why, sizeof(why)))
		return corrupt(c, s, why);
	rx->pos += weft_sock_hdr_bytes(sc);
	if (weft_sock_acking(sc))
		for (unsigned i = 0; i < sc->nslots; i++)
			weft_tp_socket_acked(c, i, acks[i].gen, acks[i].frames);
	if (h->flags & WEFT_SOCK_F_CTL)
		return weft_tp_socket_on_ctl(c, s, h);
	if (h->flags & WEFT_SOCK_F_RESEND)
		c->seen_resend = true;
	rx->in_frame = true;
	rx->discard = false;
	rx->req = NULL;
	rx->got = rx->skip = 0;
	c->sock[s].bounce.have = 0;
	return WEFT_SUCCESS;
}

/* At least @p need unread bytes in the stage: 1 when there are, 0 when
 * the kernel has no more now, < 0 the socket closed (handled). */
static int fill(struct weft_sock_conn *c, unsigned s, size_t need, weft_status_t *st)
{
	struct weft_sock *sk = &c->sock[s];
	struct weft_sock_rx *rx = &sk->rx;
	while (rx->len - rx->pos < need) {
		if (rx->pos == rx->len)
			rx->pos = rx->len = 0;
		else if (WEFT_SOCK_STAGE - rx->pos < need) {
			memmove(rx->stage, rx->stage + rx->pos, rx->len - rx->pos);
			rx->len -= rx->pos;
			rx->pos = 0;
		}
		ssize_t n = c->sc->io->recv(sk->fd, rx->stage + rx->len, WEFT_SOCK_STAGE - rx->len,
					    MSG_DONTWAIT);
		if (n > 0) {
			rx->len += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		*st = weft_tp_socket_on_close(c, s, n == 0 ? 0 : errno);
		return -1;
	}
	return 1;
}

/* @p n payload bytes at @p src (from the stage) for the current frame. */
static void consume(struct weft_sock_conn *c, unsigned s, const char *src, size_t n)
{
	struct weft_sock *sk = &c->sock[s];
	struct weft_sock_rx *rx = &sk->rx;
	if (!rx->discard && rx->got < rx->skip) {
		size_t drop = n < rx->skip - rx->got ? n : rx->skip - rx->got;
		rx->got += drop;
		src += drop;
		n -= drop;
	}
	if (rx->discard || n == 0) {
		rx->got += n;
		return;
	}
	struct weft_msg *m = rx->req->base.msg;
	size_t off = (size_t)rx->chunk * c->sc->chunk + rx->got;
	rx->got += n;
	if (!m->reduce) {
		weft_msg_deliver(m, off, src, n);
		return;
	}
	struct weft_bounce *b = &sk->bounce;
	while (n) {
		size_t k = n < weft_bounce_room(b) ? n : weft_bounce_room(b);
		memcpy(weft_bounce_tail(b), src, k);
		weft_bounce_deliver(b, k, m, off - b->have);
		off += k;
		src += k;
		n -= k;
	}
}

/* Read what the kernel has of the current frame's payload straight where
 * it goes (or into the stage, when it is dropped). 1: read some, 0: the
 * kernel has none now, < 0: closed (handled, *st set). */
static int read_payload(struct weft_sock_conn *c, unsigned s, weft_status_t *st)
{
	struct weft_sock *sk = &c->sock[s];
	struct weft_sock_rx *rx = &sk->rx;
	size_t want = rx->hdr.frag_len - rx->got;
	struct weft_msg *m = rx->req && !rx->discard ? rx->req->base.msg : NULL;
	char *dst;
	if (!m || rx->got < rx->skip) {
		return fill(c, s, rx->len - rx->pos + 1, st); /* into the stage */
	} else if (m->reduce) {
		struct weft_bounce *b = &sk->bounce;
		want = want < weft_bounce_room(b) ? want : weft_bounce_room(b);
		dst = weft_bounce_tail(b);
	} else {
		dst = (char *)m->buf + (size_t)rx->chunk * c->sc->chunk + rx->got;
	}
	ssize_t n = c->sc->io->recv(sk->fd, dst, want, MSG_DONTWAIT);
	if (n < 0 && errno == EINTR)
		return 1;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n <= 0) {
		*st = weft_tp_socket_on_close(c, s, n == 0 ? 0 : errno);
		return -1;
	}
	if (m->reduce) {
		size_t off = (size_t)rx->chunk * c->sc->chunk + rx->got;
		weft_bounce_deliver(&sk->bounce, (size_t)n, m, off - sk->bounce.have);
	}
	rx->got += (size_t)n;
	return 1;
}

/* The current frame of slot @p s is read whole. */
static void frame_end(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock *sk = &c->sock[s];
	struct weft_sock_rx *rx = &sk->rx;
	struct weft_sock_req *r = rx->discard ? NULL : rx->req;
	rx->frames++;
	rx->in_frame = false;
	rx->req = NULL;
	sk->bounce.have = 0;
	c->ack_owed = true;
	c->ack_frames++;
	if (rx->discard && (rx->hdr.flags & WEFT_SOCK_F_ACKREQ))
		c->ack_urgent = true; /* a sender waits for it */
	if (!r)
		return;
	r->done[rx->chunk / 64] |= 1ull << (rx->chunk % 64);
	r->base.xferred += rx->hdr.frag_len;
	if (--r->left > 0)
		return;
	if (r->ackreq)
		c->ack_urgent = true;
	weft_tp_socket_req_finish(c, &c->recvq, r, WEFT_SUCCESS);
}

weft_status_t weft_tp_socket_rx(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock_rx *rx = &c->sock[s].rx;
	size_t hl = weft_sock_hdr_bytes(c->sc);
	weft_status_t st = WEFT_SUCCESS;
	while (!c->failed && weft_tp_socket_usable(c, s) && !c->sock[s].eof) {
		if (!rx->in_frame) {
			int got = fill(c, s, hl, &st);
			if (got <= 0)
				return got < 0 ? st : WEFT_SUCCESS;
			st = take_header(c, s);
			if (st != WEFT_SUCCESS || !rx->in_frame)
				continue; /* a control frame, or the connection failed */
		}
		if (!rx->req && !rx->discard) {
			st = place(c, s);
			if (st != WEFT_SUCCESS)
				return st == WEFT_INPROGRESS ? WEFT_SUCCESS : st;
		}
		while (rx->got < rx->hdr.frag_len) {
			size_t avail = rx->len - rx->pos, need = rx->hdr.frag_len - rx->got;
			if (avail) {
				size_t k = avail < need ? avail : need;
				consume(c, s, rx->stage + rx->pos, k);
				rx->pos += k;
				continue;
			}
			int got = read_payload(c, s, &st);
			if (got <= 0)
				return got < 0 ? st : WEFT_SUCCESS;
		}
		frame_end(c, s);
	}
	return c->failed ? c->failed : st;
}
