/*
 * rma_proto_rx.c — the receiving side of the RMA protocol (rma_proto.h):
 * landing slots checked and consumed in order, descriptors written for
 * large receives as soon as they are posted (into the destination, or into
 * a bounce piece for a reducing receive), pieces delivered as they land.
 */
#include <stdio.h>
#include <string.h>

#include "transports/common/rma_proto_impl.h"

/* Bytes of a bounce piece a reducing receive of @p m may use: whole elements. */
static size_t piece_bytes(const struct weft_rma_geom *g, const struct weft_msg *m)
{
	return g->bounce_bytes - g->bounce_bytes % m->unit;
}

weft_status_t weft_rma_irecv(struct weft_rma_conn *c, struct weft_msg *m)
{
	const struct weft_rma_geom *g = &c->rp->geom;
	weft_status_t st;
	struct weft_rma_req *r = weft_rma_new_req(c, m, &st);
	if (!r)
		return st;
	if (m->reduce && (m->len % m->unit || m->unit > g->bounce_bytes)) {
		weft_tp_pool_put(&c->rp->reqs, r);
		st = weft_tp_fail(c->rp->env, WEFT_ERR_INTERNAL,
				  "%s: reducing receive of %zu bytes with element size %zu",
				  c->rp->name, m->len, m->unit);
		weft_msg_complete(m, st);
		return st;
	}
	r->index = c->rx_posted++;
	r->rndv = m->len > weft_rma_eager_max(g);
	weft_reqq_push(&c->recvq, &r->base);
	weft_rma_mark(c);
	if (!c->rx_slot)
		c->rx_slot = r;
	if (r->rndv && !c->rx_desc)
		c->rx_desc = r;
	/* Receiver-driven: the descriptor goes out now, so that the sender
	 * finds it waiting. */
	weft_rma_rx_progress(c);
	return c->broken ? c->fail_status : WEFT_SUCCESS;
}

static void maybe_done(struct weft_rma_conn *c, struct weft_rma_req *r)
{
	if (r->slotted && r->base.xferred == r->base.msg->len)
		weft_rma_finish(c, &c->recvq, r, WEFT_SUCCESS);
}

/* Tell the sender how many slots are free again. */
static void return_slots(struct weft_rma_conn *c)
{
	weft_status_t st =
	    weft_rma_post(c, weft_rma_imm(WEFT_RMA_IMM_SLOT_CREDIT, c->rxr.head), c->st_ctrl, 8,
			  c->rp->region_reg.desc, c->r_ctrl, c->card.key, NULL, 0);
	c->owe_slot_credit = st == WEFT_INPROGRESS;
}

static weft_status_t slot_mismatch(struct weft_rma_conn *c, const struct weft_msg *m,
				   const struct weft_slot_hdr *h)
{
	char why[256];
	const struct weft_tp_env *env = c->rp->env;
	env->explain(env->ctx, h->tag, m->tag, c->peer, why, sizeof(why));
	return weft_rma_fail(c, WEFT_ERR_REMOTE,
			     "%s: peer rank %d sent tag %#llx with %llu bytes where the receive "
			     "posted here has tag %#llx with %zu bytes: %s",
			     c->rp->name, c->peer, (unsigned long long)h->tag,
			     (unsigned long long)h->len, (unsigned long long)m->tag, m->len,
			     why[0] ? why : "mismatched calls across ranks?");
}

/* Check and consume the next landed slot. WEFT_INPROGRESS: none yet. */
static weft_status_t take_slot(struct weft_rma_conn *c)
{
	const struct weft_rma_geom *g = &c->rp->geom;
	uint32_t i = weft_ring_rx_index(&c->rxr);
	if (c->s_arrived[i] != c->rxr.head + 1)
		return WEFT_INPROGRESS;
	const unsigned char *slot = c->slots + (size_t)i * g->slot_bytes;
	const struct weft_slot_hdr *h = (const struct weft_slot_hdr *)slot;
	struct weft_rma_req *r = c->rx_slot;
	struct weft_msg *m = r->base.msg;
	uint64_t seq = atomic_load_explicit(&h->seq, memory_order_relaxed);
	if (seq != c->rxr.head + 1)
		return weft_rma_fail(
		    c, WEFT_ERR_REMOTE, "%s: slot %llu from rank %d is corrupt (sequence %llu)",
		    c->rp->name, (unsigned long long)c->rxr.head, c->peer, (unsigned long long)seq);
	if (h->tag != m->tag || h->len != m->len ||
	    h->kind != (r->rndv ? WEFT_SLOT_RNDV : WEFT_SLOT_EAGER))
		return slot_mismatch(c, m, h);
	c->s_arrived[i] = 0;
	c->rx_slot = weft_rma_next(r);
	r->slotted = true;
	if (!r->rndv) {
		if (m->len)
			weft_msg_deliver(m, 0, slot + sizeof(*h), m->len);
		r->base.xferred = m->len;
	}
	if (weft_ring_rx_release(&c->rxr))
		return_slots(c);
	maybe_done(c, r);
	return WEFT_SUCCESS;
}

/* Where the next piece of @p r lands (*raddr under *rkey) and its length; a
 * reducing receive takes a bounce piece (*piece), the others have their
 * destination registered once. WEFT_INPROGRESS: no bounce piece free. */
static weft_status_t piece_target(struct weft_rma_conn *c, struct weft_rma_req *r, int *piece,
				  size_t *len, uint64_t *raddr, uint64_t *rkey)
{
	struct weft_rma *rp = c->rp;
	struct weft_msg *m = r->base.msg;
	size_t left = m->len - r->issued;
	if (m->reduce) {
		if (!c->bounce_free)
			return WEFT_INPROGRESS;
		*piece = __builtin_ctzll(c->bounce_free);
		size_t cap = piece_bytes(&rp->geom, m);
		*len = left < cap ? left : cap;
		*raddr =
		    rp->region_reg.key.addr +
		    (uint64_t)(c->bounce + (size_t)*piece * rp->geom.bounce_bytes - rp->region);
		*rkey = rp->region_reg.key.key;
		return WEFT_SUCCESS;
	}
	if (!r->mr) {
		weft_status_t st = weft_mr_cache_get(&rp->cache, m->buf, m->len, &r->mr);
		if (st != WEFT_SUCCESS)
			return weft_rma_fail(c, st,
					     "%s: registering %zu bytes to receive from rank %d",
					     rp->name, m->len, c->peer);
	}
	*piece = -1;
	size_t cap = rp->geom.max_write ? rp->geom.max_write : left;
	*len = left < cap ? left : cap;
	*raddr = weft_mr_remote_addr(r->mr, (const char *)m->buf + r->issued);
	*rkey = r->mr->reg.key.key;
	return WEFT_SUCCESS;
}

/* Write the next descriptor of the first large receive not fully
 * described. WEFT_INPROGRESS: no room (credits, a table entry, a bounce
 * piece, the queue). */
static weft_status_t issue_desc(struct weft_rma_conn *c)
{
	const struct weft_rma_geom *g = &c->rp->geom;
	struct weft_rma_req *r = c->rx_desc;
	uint64_t d = c->d_next;
	uint32_t i = (uint32_t)(d % g->ndesc);
	if (d - c->d_credit >= g->ndesc || c->dtab[i].req)
		return WEFT_INPROGRESS;
	int piece = -1;
	size_t len = 0;
	uint64_t raddr = 0, rkey = 0;
	weft_status_t st = piece_target(c, r, &piece, &len, &raddr, &rkey);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_msg *m = r->base.msg;
	struct weft_rma_desc *out =
	    (struct weft_rma_desc *)(c->st_descs + (size_t)i * WEFT_RMA_LINE);
	*out = (struct weft_rma_desc){
	    .seq = d + 1,
	    .msg = r->index,
	    .tag = m->tag,
	    .msg_len = m->len,
	    .off = r->issued,
	    .len = len,
	    .raddr = raddr,
	    .rkey = rkey,
	};
	st = weft_rma_post(c, weft_rma_imm(WEFT_RMA_IMM_DESC, d), out, sizeof(*out),
			   c->rp->region_reg.desc, c->r_descs + (uint64_t)i * WEFT_RMA_LINE,
			   c->card.key, NULL, 0);
	if (st != WEFT_SUCCESS)
		return st;
	if (piece >= 0)
		c->bounce_free &= ~(1ull << piece);
	c->dtab[i] = (struct weft_rma_dtab){.req = r, .off = r->issued, .len = len, .piece = piece};
	c->d_next++;
	r->issued += len;
	if (r->issued == m->len)
		c->rx_desc = weft_rma_next_rndv(r, false);
	return WEFT_SUCCESS;
}

bool weft_rma_rx_progress(struct weft_rma_conn *c)
{
	bool moved = false;
	if (c->owe_slot_credit)
		return_slots(c);
	while (!c->broken && c->rx_slot && take_slot(c) == WEFT_SUCCESS)
		moved = true;
	while (!c->broken && c->rx_desc && issue_desc(c) == WEFT_SUCCESS)
		moved = true;
	return moved;
}

void weft_rma_rx_on_slot(struct weft_rma_conn *c, uint32_t value)
{
	const struct weft_rma_geom *g = &c->rp->geom;
	uint64_t n = weft_rma_widen(c->rxr.head, value);
	if (n - c->rxr.head >= g->nslots) {
		weft_rma_fail(c, WEFT_ERR_REMOTE,
			      "%s: rank %d filled slot %llu while this rank consumes %llu (credits "
			      "overrun)",
			      c->rp->name, c->peer, (unsigned long long)n,
			      (unsigned long long)c->rxr.head);
		return;
	}
	c->s_arrived[n % g->nslots] = n + 1;
}

void weft_rma_rx_on_data(struct weft_rma_conn *c, uint32_t value)
{
	const struct weft_rma_geom *g = &c->rp->geom;
	uint64_t base = c->d_next > g->ndesc ? c->d_next - g->ndesc : 0;
	uint64_t n = weft_rma_widen(base, value);
	struct weft_rma_dtab *e = &c->dtab[n % g->ndesc];
	if (n >= c->d_next || !e->req) {
		weft_rma_fail(
		    c, WEFT_ERR_REMOTE,
		    "%s: rank %d wrote data for descriptor %llu, which is not outstanding",
		    c->rp->name, c->peer, (unsigned long long)n);
		return;
	}
	struct weft_rma_req *r = e->req;
	struct weft_msg *m = r->base.msg;
	if (e->piece >= 0) {
		weft_msg_deliver(m, e->off, c->bounce + (size_t)e->piece * g->bounce_bytes, e->len);
		c->bounce_free |= 1ull << e->piece;
	}
	r->base.xferred += e->len;
	e->req = NULL;
	maybe_done(c, r);
}

void weft_rma_rx_on_credit(struct weft_rma_conn *c, uint32_t value)
{
	uint64_t n = weft_rma_widen(c->d_credit, value);
	if (n <= c->d_next)
		c->d_credit = n;
}
