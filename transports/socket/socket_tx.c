/*
 * socket_tx.c — each socket's sending side: which frame it writes next,
 * and writing frames (header, acknowledgements, payload) with as few
 * system calls as the kernel allows. See socket.h for the wire format.
 *
 * A socket takes its next frame when it has written the previous one: a
 * frame to write again (a failed socket's, socket_ack.c) before anything
 * new of the same or a later message; else, round robin, its own next
 * fragment (its walk over the queue: fragment i of a message is socket
 * (s0 + i) % nsocks's) or, sprayed, the next fragment not yet handed to
 * any socket. In round robin the walk of a socket that is down (failed
 * over, being replaced) or being moved is not left behind: the others
 * take its fragments, the earliest first, so a message never waits for a
 * socket that cannot send. The probe socket (socket_repath.c) takes from
 * any walk. Whatever it takes, a socket's unacknowledged frames are in
 * message order (floor_seq says why).
 *
 * Control frames (socket.h) wait for a frame boundary and go first then.
 * Round robin, small frames queued behind the current one on the same
 * socket leave in the same sendmsg (up to WEFT_SOCK_TX_BATCH of them and
 * WEFT_SOCK_TX_BATCH_BYTES); sprayed, a socket holds one fragment at a
 * time, so that it takes the next only when its kernel has room.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "transports/socket/socket.h"

static struct weft_sock_req *req_of(struct weft_tp_req *r)
{
	return r ? weft_container_of(r, struct weft_sock_req, base) : NULL;
}

static struct weft_sock_req *next_req(const struct weft_sock_req *r)
{
	return req_of(r->base.next);
}

static bool round_robin(const struct weft_sock_conn *c)
{
	return c->sc->spray == WEFT_SPRAY_RR;
}

/* Index of the first fragment of @p r that is socket @p s's (>= nchunks
 * if none is). */
static uint64_t first_chunk_on(const struct weft_sock_req *r, unsigned s, unsigned nsocks)
{
	return (s + nsocks - r->s0) % nsocks;
}

/* Point slot @p o's walk at its first fragment in @p r or later. */
static void walk_seek(struct weft_sock_conn *c, unsigned o, struct weft_sock_req *r)
{
	struct weft_sock_tx *tx = &c->sock[o].tx;
	for (; r; r = next_req(r)) {
		uint64_t j = first_chunk_on(r, o, c->sc->nsocks);
		if (j < r->nchunks) {
			tx->walk = r;
			tx->walk_chunk = j;
			return;
		}
	}
	tx->walk = NULL;
}

static void walk_advance(struct weft_sock_conn *c, unsigned o)
{
	struct weft_sock_tx *tx = &c->sock[o].tx;
	uint64_t next = tx->walk_chunk + c->sc->nsocks;
	if (next < tx->walk->nchunks)
		tx->walk_chunk = next;
	else
		walk_seek(c, o, next_req(tx->walk));
}

void weft_tp_socket_tx_posted(struct weft_sock_conn *c, struct weft_sock_req *r)
{
	if (!round_robin(c))
		return; /* dealt from the queue (sendq.deal) */
	for (unsigned o = 0; o < c->sc->nsocks; o++)
		if (!c->sock[o].tx.walk)
			walk_seek(c, o, r);
}

/* Does data slot @p o's walk go to whoever can send (it is down, or moving)? */
static bool orphaned(const struct weft_sock_conn *c, unsigned o)
{
	return !weft_tp_socket_usable(c, o) || c->sock[o].h.draining;
}

/* Round robin: the walk whose fragment slot @p s writes next (-1: none):
 * its own, or an orphaned one's, whichever comes first in the queue, of
 * message @p floor or later; the probe slot takes from any. */
static int rr_pick(const struct weft_sock_conn *c, unsigned s, uint64_t floor)
{
	unsigned nsocks = c->sc->nsocks;
	int best = -1;
	for (unsigned o = 0; o < nsocks; o++) {
		const struct weft_sock_tx *t = &c->sock[o].tx;
		if (!t->walk || (o != s && s < nsocks && !orphaned(c, o)) || t->walk->seq < floor)
			continue;
		if (o == s && c->sock[s].h.draining)
			continue;
		const struct weft_sock_tx *b = best >= 0 ? &c->sock[best].tx : NULL;
		if (!b || t->walk->seq < b->walk->seq ||
		    (t->walk == b->walk && t->walk_chunk < b->walk_chunk))
			best = (int)o;
	}
	return best;
}

/* Does slot @p s take new data frames? Not the control slot, nor one that
 * is down or being moved, nor one that said BYE (the peer reads nothing
 * after it: a frame sent again during the flush at the end, after a
 * sub-flow failed over, goes on a replacement). */
static bool takes_frames(const struct weft_sock_conn *c, unsigned s)
{
	return s != weft_sock_ctl_slot(c->sc) && weft_tp_socket_usable(c, s) &&
	       !c->sock[s].h.draining && !c->sock[s].tx.bye;
}

/* The message of the last frame on slot @p s that the peer has not
 * acknowledged (0: none). Nothing of an earlier message may follow it on
 * the socket: the peer reads a socket in order and waits at a header
 * whose receive it has not posted, which it may post only once an earlier
 * message is complete; that message's fragment behind the header would
 * never be read (a resend of a failed slot's frame, or an orphaned walk's
 * fragment, taken by a socket that had gone ahead). Such a frame waits
 * for a socket that carries nothing later: the failed slot's replacement,
 * or one whose frames are acknowledged. */
static uint64_t floor_seq(const struct weft_sock_conn *c, unsigned s)
{
	const struct weft_sock_sent *tail = c->sock[s].tx.sent.tail;
	return tail ? tail->hdr.seq : 0;
}

/* The next frame for slot @p s, put on its list (NULL: none, or no room):
 * of the frames to write again and the new fragments it may take, the one
 * of the earliest message (a frame to write again first). */
static struct weft_sock_sent *start_next(struct weft_sock_conn *c, unsigned s)
{
	if (!takes_frames(c, s))
		return NULL;
	uint64_t floor = floor_seq(c, s);
	struct weft_sock_sent *again = weft_tp_socket_resend_from(c, floor);
	struct weft_sock_sent *rec;
	if (round_robin(c)) {
		int o = rr_pick(c, s, floor);
		struct weft_sock_tx *t = o >= 0 ? &c->sock[o].tx : NULL;
		if (again && (!t || again->hdr.seq <= t->walk->seq)) {
			weft_tp_socket_resend_take(c, s, again);
			return again;
		}
		if (!t)
			return NULL;
		rec = weft_tp_socket_sent_new(c, s, t->walk, t->walk_chunk);
		if (rec)
			walk_advance(c, (unsigned)o);
		return rec;
	}
	struct weft_sock_req *r = c->sendq.deal;
	if (r && r->seq < floor)
		r = NULL;
	if (again && (!r || again->hdr.seq <= r->seq)) {
		weft_tp_socket_resend_take(c, s, again);
		return again;
	}
	if (!r)
		return NULL;
	rec = weft_tp_socket_sent_new(c, s, r, r->dealt);
	if (rec && ++r->dealt == r->nchunks)
		c->sendq.deal = next_req(r);
	return rec;
}

/* Header @p h numbered @p fseq, with this rank's acknowledgements, into
 * @p out; its length. */
static size_t build_hdr(const struct weft_sock_conn *c, const struct weft_sock_frame *h,
			uint32_t fseq, unsigned char *out)
{
	struct weft_sock_frame f = *h;
	struct weft_sock_ack acks[WEFT_SOCK_MAX_SLOTS];
	f.fseq = fseq;
	f.nacks = (uint16_t)c->sc->nslots;
	weft_tp_socket_ack_vector(c, acks);
	memcpy(out, &f, sizeof(f));
	memcpy(out + sizeof(f), acks, c->sc->nslots * sizeof(acks[0]));
	return weft_sock_hdr_bytes(c->sc);
}

void weft_tp_socket_ctl(struct weft_sock_conn *c, unsigned s, enum weft_sock_ctl_kind kind,
			uint64_t a0, uint64_t a1, uint64_t a2)
{
	struct weft_sock_tx *tx = &c->sock[s].tx;
	tx->ctl_want |= 1u << kind;
	tx->bye = tx->bye || kind == WEFT_SOCK_CTL_BYE;
	if (kind == WEFT_SOCK_CTL_REPLACE) {
		tx->ctl_arg[0] = a0;
		tx->ctl_arg[1] = a1;
		tx->ctl_arg[2] = a2;
	}
}

/* The control frames asked for, into tx->ctl: BYE last (nothing follows). */
static void ctl_build(struct weft_sock_conn *c, unsigned s)
{
	static const enum weft_sock_ctl_kind order[] = {WEFT_SOCK_CTL_ACK, WEFT_SOCK_CTL_REPLACE,
							WEFT_SOCK_CTL_ACKNOW, WEFT_SOCK_CTL_BYE};
	struct weft_sock_tx *tx = &c->sock[s].tx;
	tx->ctl_len = tx->ctl_done = 0;
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		if (!(tx->ctl_want & (1u << order[i])))
			continue;
		struct weft_sock_frame f = {
		    .magic = WEFT_SOCK_FRAME_MAGIC, .flags = WEFT_SOCK_F_CTL, .seq = order[i]};
		if (order[i] == WEFT_SOCK_CTL_REPLACE) {
			f.off = tx->ctl_arg[0];
			f.len = tx->ctl_arg[1];
			f.tag = tx->ctl_arg[2];
		}
		tx->ctl_len += build_hdr(c, &f, 0, tx->ctl + tx->ctl_len);
	}
	tx->ctl_want = 0;
}

bool weft_tp_socket_tx_busy(const struct weft_sock_conn *c, unsigned s)
{
	const struct weft_sock_tx *tx = &c->sock[s].tx;
	return tx->wr || tx->ctl_want || tx->ctl_done < tx->ctl_len;
}

/* The frame of @p rec, from byte @p done of header and payload, into iov;
 * its header is hdr[k] (built now unless it is wr's, partly written).
 * Returns the bytes added. */
static size_t add_frame(struct weft_sock_conn *c, unsigned s, const struct weft_sock_sent *rec,
			unsigned k, size_t done, struct iovec *iov, int *n_iov)
{
	struct weft_sock_tx *tx = &c->sock[s].tx;
	size_t hl = weft_sock_hdr_bytes(c->sc), flen = rec->hdr.frag_len;
	if (k > 0 || done == 0)
		build_hdr(c, &rec->hdr, rec->fseq, tx->hdr[k]);
	if (done < hl) {
		iov[(*n_iov)++] = (struct iovec){tx->hdr[k] + done, hl - done};
		if (flen)
			iov[(*n_iov)++] = (struct iovec){(void *)rec->src, flen};
	} else {
		iov[(*n_iov)++] =
		    (struct iovec){(void *)(rec->src + done - hl), flen - (done - hl)};
	}
	return hl + flen - done;
}

/* What slot @p s writes in one sendmsg: control frames, wr, and round
 * robin the small frames behind it. Fills @p iov and @p batch (the
 * records, in order); returns the bytes. */
static size_t gather(struct weft_sock_conn *c, unsigned s, struct iovec *iov, int *n_iov,
		     struct weft_sock_sent **batch, int *nrec)
{
	struct weft_sock_tx *tx = &c->sock[s].tx;
	size_t want = 0;
	if (tx->ctl_done == tx->ctl_len && tx->ctl_want && (!tx->wr || tx->done == 0))
		ctl_build(c, s);
	if (tx->ctl_done < tx->ctl_len) {
		iov[(*n_iov)++] =
		    (struct iovec){tx->ctl + tx->ctl_done, tx->ctl_len - tx->ctl_done};
		want += tx->ctl_len - tx->ctl_done;
	}
	if (!tx->wr)
		start_next(c, s);
	if (!tx->wr)
		return want;
	want += add_frame(c, s, tx->wr, 0, tx->done, iov, n_iov);
	batch[(*nrec)++] = tx->wr;
	struct weft_sock_sent *rec = tx->wr->next;
	for (unsigned k = 1;
	     round_robin(c) && k <= WEFT_SOCK_TX_BATCH && want < WEFT_SOCK_TX_BATCH_BYTES; k++) {
		if (!rec && !(rec = start_next(c, s)))
			break;
		want += add_frame(c, s, rec, k, 0, iov, n_iov);
		batch[(*nrec)++] = rec;
		rec = rec->next;
	}
	return want;
}

/* The acknowledgements went out with a header: nothing is owed now. */
static void acks_sent(struct weft_sock_conn *c)
{
	c->ack_owed = c->ack_urgent = c->ack_stale = false;
	c->ack_frames = 0;
}

/* Walk slot @p s's cursor over @p n bytes written from what gather set
 * out (@p batch, @p nrec records after the control frames). */
static void advance(struct weft_sock_conn *c, unsigned s, size_t n, struct weft_sock_sent **batch,
		    int nrec)
{
	struct weft_sock *sk = &c->sock[s];
	struct weft_sock_tx *tx = &sk->tx;
	size_t hl = weft_sock_hdr_bytes(c->sc);
	if (tx->ctl_done < tx->ctl_len) {
		size_t take = n < tx->ctl_len - tx->ctl_done ? n : tx->ctl_len - tx->ctl_done;
		if (tx->ctl_done == 0 && take)
			acks_sent(c);
		tx->ctl_done += take;
		n -= take;
		if (tx->ctl_done == tx->ctl_len)
			tx->ctl_done = tx->ctl_len = 0;
	}
	for (int i = 0; i < nrec && n; i++) {
		struct weft_sock_sent *rec = batch[i];
		size_t done = i == 0 ? tx->done : 0;
		size_t rest = hl + rec->hdr.frag_len - done;
		if (done == 0)
			acks_sent(c);
		if (n < rest) {
			if (i > 0) /* its header must stay what went out */
				memcpy(tx->hdr[0], tx->hdr[i], hl);
			tx->done = done + n;
			return;
		}
		n -= rest;
		sk->tx_bytes += rec->hdr.frag_len;
		tx->wr = rec->next;
		tx->done = 0;
		weft_tp_socket_sent_written(c, s, rec);
	}
}

weft_status_t weft_tp_socket_tx(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock *sk = &c->sock[s];
	while (weft_tp_socket_usable(c, s) && !c->failed) {
		struct iovec iov[2 * (WEFT_SOCK_TX_BATCH + 1) + 1];
		struct weft_sock_sent *batch[WEFT_SOCK_TX_BATCH + 1];
		int n_iov = 0, nrec = 0;
		size_t want = gather(c, s, iov, &n_iov, batch, &nrec);
		if (want == 0)
			return WEFT_SUCCESS;
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n_iov};
		ssize_t n = c->sc->io->sendmsg(sk->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return WEFT_SUCCESS;
			return weft_tp_socket_on_close(c, s, errno);
		}
		advance(c, s, (size_t)n, batch, nrec);
		if ((size_t)n < want)
			return WEFT_SUCCESS; /* the socket buffer is full */
	}
	return WEFT_SUCCESS;
}
