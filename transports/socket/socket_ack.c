/*
 * socket_ack.c — what a connection has sent and the peer has not yet
 * acknowledged (WEFT_REPATH on; socket.h has the wire side).
 *
 * Every data frame written on a socket gets a record, kept on that slot's
 * list in fseq order until the peer's acknowledgement for the slot (its
 * count of frames read whole, for the socket's generation) covers it. A
 * record holds the frame's header and where its payload is, so that when
 * the socket fails the frames it had can be written again on the others
 * (the list moves to the connection's resend list as it is).
 *
 * When does a send complete? When each of its fragments is acknowledged,
 * not when the kernel took it: the buffer stays the poster's until then,
 * and a fragment the kernel took can still be lost with its path. That
 * costs a round trip at the end of a message, which is little for a large
 * one and everything for a small one (an 8-byte AllReduce over two ranks
 * would take two one-way trips instead of one: the peer's acknowledgement
 * can only follow its reading of ours). So a fragment of at most
 * WEFT_SOCK_COPY_MAX bytes is copied into the connection's replay ring
 * once it is written, and its send completes then, as before; the copy is
 * what is written again if its socket fails. A fragment the ring has no
 * room for waits for its acknowledgement like a large one.
 *
 * The ring's blocks are released in whatever order their acknowledgements
 * come (one slot's before another's); the tail moves over released blocks
 * only, so a block held by a slow slot holds the space after it until it
 * goes, and later copies fall back to waiting for their acknowledgement.
 */
#include <stdlib.h>
#include <string.h>

#include "transports/socket/socket.h"

struct blk {
	uint32_t len; /* of the block, header included, a multiple of 8 */
	uint32_t released;
};

/* Room for four fragments of the largest size copied, with their block
 * headers. */
#define RING_BYTES (4 * (WEFT_SOCK_COPY_MAX + sizeof(struct blk)))

static size_t round8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static char *ring_place(struct weft_sock_ring *r, size_t at, size_t need)
{
	struct blk *b = (struct blk *)(r->buf + at);
	*b = (struct blk){.len = (uint32_t)need, .released = 0};
	r->head = at + need == r->cap ? 0 : at + need;
	r->used += need;
	return (char *)(b + 1);
}

/* Room for @p n payload bytes (*held: the block's size), or NULL. */
static char *ring_get(struct weft_sock_ring *r, size_t n, uint32_t *held)
{
	size_t need = round8(sizeof(struct blk) + n);
	if (!r->buf || r->used + need > r->cap)
		return NULL;
	*held = (uint32_t)need;
	if (r->used == 0)
		r->head = r->tail = 0;
	if (r->head < r->tail) /* free: [head, tail) */
		return r->tail - r->head >= need ? ring_place(r, r->head, need) : NULL;
	/* free: [head, cap) and [0, tail) */
	if (r->cap - r->head >= need)
		return ring_place(r, r->head, need);
	if (r->tail < need)
		return NULL;
	/* The end is too short: a released pad to the end, then from 0. */
	size_t pad = r->cap - r->head;
	if (pad) {
		*(struct blk *)(r->buf + r->head) =
		    (struct blk){.len = (uint32_t)pad, .released = 1};
		r->used += pad;
	}
	return ring_place(r, 0, need);
}

static void ring_put(struct weft_sock_ring *r, const char *payload)
{
	((struct blk *)(payload - sizeof(struct blk)))->released = 1;
	while (r->used > 0) {
		struct blk *b = (struct blk *)(r->buf + r->tail);
		if (!b->released)
			break;
		r->used -= b->len;
		r->tail = r->tail + b->len == r->cap ? 0 : r->tail + b->len;
	}
}

weft_status_t weft_tp_socket_ack_init(struct weft_sock_conn *c)
{
	const struct weft_sock_comm *sc = c->sc;
	size_t n = (size_t)sc->nslots * WEFT_SOCK_SENT_PER_SLOT;
	c->pool = calloc(n, sizeof(*c->pool));
	if (!c->pool)
		return WEFT_ERR_NO_MEMORY;
	if (weft_sock_acking(sc)) {
		/* Touched now: no page faults on the data path. */
		c->ring.buf = malloc(RING_BYTES);
		if (!c->ring.buf)
			return WEFT_ERR_NO_MEMORY;
		memset(c->ring.buf, 0, RING_BYTES);
		c->ring.cap = RING_BYTES;
	}
	for (size_t i = 0; i < n; i++) {
		c->pool[i].next = c->free_sent;
		c->free_sent = &c->pool[i];
	}
	return WEFT_SUCCESS;
}

void weft_tp_socket_ack_fini(struct weft_sock_conn *c)
{
	free(c->pool);
	free(c->ring.buf);
	c->pool = c->free_sent = NULL;
	c->ring = (struct weft_sock_ring){0};
}

static void list_push(struct weft_sock_list *l, struct weft_sock_sent *rec)
{
	rec->next = NULL;
	if (l->tail)
		l->tail->next = rec;
	else
		l->head = rec;
	l->tail = rec;
	l->n++;
}

static struct weft_sock_sent *list_pop(struct weft_sock_list *l)
{
	struct weft_sock_sent *rec = l->head;
	if (!rec)
		return NULL;
	l->head = rec->next;
	if (!l->head)
		l->tail = NULL;
	l->n--;
	rec->next = NULL;
	return rec;
}

static size_t frag_bytes(const struct weft_msg *m, uint64_t chunk, size_t chunk_bytes)
{
	size_t off = (size_t)chunk * chunk_bytes;
	size_t left = m->len - off;
	return left < chunk_bytes ? left : chunk_bytes;
}

/* Onto slot @p s's list, the next number on its socket. */
static void slot_take(struct weft_sock_conn *c, unsigned s, struct weft_sock_sent *rec)
{
	struct weft_sock_tx *tx = &c->sock[s].tx;
	rec->fseq = tx->next_fseq++;
	list_push(&tx->sent, rec);
	if (!tx->wr) {
		tx->wr = rec;
		tx->done = 0;
	}
}

struct weft_sock_sent *weft_tp_socket_resend_from(const struct weft_sock_conn *c, uint64_t seq)
{
	struct weft_sock_sent *rec = c->resend.head;
	while (rec && rec->hdr.seq < seq)
		rec = rec->next;
	return rec;
}

void weft_tp_socket_resend_take(struct weft_sock_conn *c, unsigned s, struct weft_sock_sent *rec)
{
	struct weft_sock_list *l = &c->resend;
	struct weft_sock_sent *prev = NULL;
	for (struct weft_sock_sent *p = l->head; p != rec; p = p->next)
		prev = p;
	if (prev)
		prev->next = rec->next;
	else
		l->head = rec->next;
	if (l->tail == rec)
		l->tail = prev;
	l->n--;
	rec->hdr.flags |= WEFT_SOCK_F_RESEND;
	slot_take(c, s, rec);
}

struct weft_sock_sent *weft_tp_socket_sent_new(struct weft_sock_conn *c, unsigned s,
					       struct weft_sock_req *req, uint64_t chunk)
{
	struct weft_sock_sent *rec;
	if (!c->free_sent || c->sock[s].tx.sent.n >= WEFT_SOCK_SENT_PER_SLOT)
		return NULL;
	rec = c->free_sent;
	c->free_sent = rec->next;
	const struct weft_msg *m = req->base.msg;
	size_t flen = frag_bytes(m, chunk, c->sc->chunk);
	size_t off = (size_t)chunk * c->sc->chunk;
	*rec = (struct weft_sock_sent){
	    .req = req,
	    .src = flen ? (const char *)m->buf + off : NULL,
	    .hdr = {.magic = WEFT_SOCK_FRAME_MAGIC,
		    .frag_len = (uint32_t)flen,
		    .tag = m->tag,
		    .len = m->len,
		    .off = off,
		    .seq = req->seq},
	};
	/* A small fragment is copied once written (its room is taken now);
	 * any other waits for its acknowledgement, and says so. */
	uint32_t held = 0;
	char *copy = weft_sock_acking(c->sc) && flen <= WEFT_SOCK_COPY_MAX
			 ? ring_get(&c->ring, flen, &held)
			 : NULL;
	if (copy) {
		rec->copy = copy;
		rec->copy_bytes = held;
	} else if (weft_sock_acking(c->sc)) {
		rec->hdr.flags |= WEFT_SOCK_F_ACKREQ;
	}
	c->unacked++;
	c->waiting++;
	slot_take(c, s, rec);
	return rec;
}

/* One fragment of a send is finished for its poster. */
static void frag_finished(struct weft_sock_conn *c, struct weft_sock_req *r)
{
	if (--r->left == 0)
		weft_tp_socket_req_finish(c, &c->sendq, r, WEFT_SUCCESS);
}

/* Back to the pool; the copy it held goes back to the ring. */
static void sent_free(struct weft_sock_conn *c, struct weft_sock_sent *rec)
{
	if (rec->copy_bytes)
		ring_put(&c->ring, rec->copy);
	rec->copy = NULL;
	if (rec->req)
		c->waiting--;
	rec->copy_bytes = 0;
	rec->req = NULL;
	rec->next = c->free_sent;
	c->free_sent = rec;
	c->unacked--;
}

void weft_tp_socket_sent_written(struct weft_sock_conn *c, unsigned s, struct weft_sock_sent *rec)
{
	struct weft_sock_req *r = rec->req;
	if (!weft_sock_acking(c->sc)) {	       /* no acknowledgements: done once written */
		list_pop(&c->sock[s].tx.sent); /* rec: the only written one, the head */
		rec->req = NULL;
		c->waiting--;
		sent_free(c, rec);
		if (r)
			frag_finished(c, r);
		return;
	}
	if (!r || !rec->copy)
		return; /* it waits for its acknowledgement */
	if (rec->hdr.frag_len)
		memcpy(rec->copy, rec->src, rec->hdr.frag_len);
	rec->src = rec->copy;
	rec->req = NULL;
	c->waiting--;
	frag_finished(c, r);
}

void weft_tp_socket_acked(struct weft_sock_conn *c, unsigned s, uint32_t gen, uint32_t n)
{
	struct weft_sock_tx *tx = &c->sock[s].tx;
	if (c->sock[s].gen != gen)
		return; /* about a socket this slot no longer has */
	while (tx->sent.head && tx->sent.head != tx->wr && tx->sent.head->fseq <= n) {
		struct weft_sock_sent *rec = list_pop(&tx->sent);
		struct weft_sock_req *r = rec->req;
		sent_free(c, rec);
		c->acks_seen++;
		if (r)
			frag_finished(c, r);
	}
}

/* Into the resend list in message order (then offset): a socket carries
 * its frames in message order (socket_tx.c), and two failed slots' lists
 * are each in order, not together. */
static void resend_insert(struct weft_sock_list *l, struct weft_sock_sent *rec)
{
	struct weft_sock_sent *prev = NULL, *p = l->head;
	while (p && (p->hdr.seq < rec->hdr.seq ||
		     (p->hdr.seq == rec->hdr.seq && p->hdr.off <= rec->hdr.off))) {
		prev = p;
		p = p->next;
	}
	rec->next = p;
	if (prev)
		prev->next = rec;
	else
		l->head = rec;
	if (!p)
		l->tail = rec;
	l->n++;
}

void weft_tp_socket_sent_requeue(struct weft_sock_conn *c, unsigned s)
{
	struct weft_sock_tx *tx = &c->sock[s].tx;
	struct weft_sock_sent *rec;
	while ((rec = list_pop(&tx->sent)))
		resend_insert(&c->resend, rec);
	tx->wr = NULL;
	tx->done = 0;
}

void weft_tp_socket_sent_drop(struct weft_sock_conn *c)
{
	struct weft_sock_sent *rec;
	for (unsigned s = 0; s < c->sc->nslots; s++) {
		struct weft_sock_tx *tx = &c->sock[s].tx;
		while ((rec = list_pop(&tx->sent)))
			sent_free(c, rec);
		tx->wr = NULL;
		tx->done = 0;
	}
	while ((rec = list_pop(&c->resend)))
		sent_free(c, rec);
}

void weft_tp_socket_ack_vector(const struct weft_sock_conn *c, struct weft_sock_ack *out)
{
	for (unsigned s = 0; s < c->sc->nslots; s++)
		out[s] =
		    (struct weft_sock_ack){.gen = c->sock[s].gen, .frames = c->sock[s].rx.frames};
}
