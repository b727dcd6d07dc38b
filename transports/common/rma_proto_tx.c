/*
 * rma_proto_tx.c — the sending side of the RMA protocol (rma_proto.h):
 * every send takes the next landing slot (its bytes when eager, a header
 * when large), and a large send is then written, piece by piece, where the
 * receiver's descriptors say.
 */
#include <stdio.h>
#include <string.h>

#include "transports/common/rma_proto_impl.h"

weft_status_t weft_rma_isend(struct weft_rma_conn *c, struct weft_msg *m)
{
	weft_status_t st;
	struct weft_rma_req *r = weft_rma_new_req(c, m, &st);
	if (!r)
		return st;
	r->index = c->tx_posted++;
	r->rndv = m->len > weft_rma_eager_max(&c->rp->geom);
	weft_reqq_push(&c->sendq, &r->base);
	weft_rma_mark(c);
	if (!c->tx_slot)
		c->tx_slot = r;
	if (r->rndv && !c->tx_desc)
		c->tx_desc = r;
	/* Latency: into a slot now rather than at the next progress. */
	weft_rma_tx_progress(c);
	return c->broken ? c->fail_status : WEFT_SUCCESS;
}

/* A large send whose slot is out and whose pieces are all written is done. */
static void maybe_done(struct weft_rma_conn *c, struct weft_rma_req *r)
{
	if (r->slotted && r->issued == r->base.msg->len && r->pending == 0)
		weft_rma_finish(c, &c->sendq, r, WEFT_SUCCESS);
}

/* Publish the slot of the first send without one. WEFT_INPROGRESS: no
 * credit or a full queue. */
static weft_status_t push_slot(struct weft_rma_conn *c)
{
	const struct weft_rma_geom *g = &c->rp->geom;
	struct weft_rma_req *r = c->tx_slot;
	if (!weft_ring_tx_has_slot(&c->txr, &c->tx_credit))
		return WEFT_INPROGRESS;
	struct weft_msg *m = r->base.msg;
	uint32_t i = weft_ring_tx_index(&c->txr);
	unsigned char *stage = c->st_slots + (size_t)i * g->slot_bytes;
	struct weft_slot_hdr *h = (struct weft_slot_hdr *)stage;
	atomic_store_explicit(&h->seq, c->txr.head + 1, memory_order_relaxed);
	h->tag = m->tag;
	h->len = m->len;
	h->kind = r->rndv ? WEFT_SLOT_RNDV : WEFT_SLOT_EAGER;
	h->flags = 0;
	size_t bytes = sizeof(*h);
	if (!r->rndv && m->len) {
		memcpy(stage + sizeof(*h), m->buf, m->len);
		bytes += m->len;
	}
	weft_status_t st = weft_rma_post(
	    c, weft_rma_imm(WEFT_RMA_IMM_SLOT, c->txr.head), stage, bytes, c->rp->region_reg.desc,
	    c->r_slots + (uint64_t)i * g->slot_bytes, c->card.key, NULL, 0);
	if (st != WEFT_SUCCESS)
		return st;
	c->txr.head++;
	r->slotted = true;
	c->tx_slot = weft_rma_next(r);
	if (!r->rndv) {
		/* The bytes are in the staging slot, which is not reused before
		 * the receiver has consumed it: the message is done. */
		r->base.xferred = m->len;
		weft_rma_finish(c, &c->sendq, r, WEFT_SUCCESS);
	} else {
		maybe_done(c, r);
	}
	return WEFT_SUCCESS;
}

/* The send with index @p index, or NULL (done, or not posted). */
static struct weft_rma_req *find_send(struct weft_rma_conn *c, uint64_t index)
{
	for (struct weft_rma_req *r = weft_rma_req_of(c->sendq.head); r; r = weft_rma_next(r))
		if (r->index == index)
			return r;
	return NULL;
}

static weft_status_t desc_mismatch(struct weft_rma_conn *c, const struct weft_rma_desc *d)
{
	struct weft_rma_req *r = find_send(c, d->msg);
	char mine[96], why[256] = "";
	const struct weft_tp_env *env = c->rp->env;
	if (r) {
		snprintf(mine, sizeof(mine), "tag %#llx with %zu bytes",
			 (unsigned long long)r->base.msg->tag, r->base.msg->len);
		/* The peer's receive stands for its call, ours for this rank's. */
		env->explain(env->ctx, d->tag, r->base.msg->tag, c->peer, why, sizeof(why));
	} else {
		snprintf(mine, sizeof(mine), "a message of at most %zu bytes",
			 weft_rma_eager_max(&c->rp->geom));
	}
	return weft_rma_fail(c, WEFT_ERR_REMOTE,
			     "%s: peer rank %d expects tag %#llx with %llu bytes (piece %llu+%llu) "
			     "where this rank's message %llu to it is %s: %s",
			     c->rp->name, c->peer, (unsigned long long)d->tag,
			     (unsigned long long)d->msg_len, (unsigned long long)d->off,
			     (unsigned long long)d->len, (unsigned long long)d->msg, mine,
			     why[0] ? why : "mismatched calls across ranks?");
}

/* Return descriptor entries to the receiver. */
static void return_descs(struct weft_rma_conn *c, bool now)
{
	uint64_t taken = c->d_head - c->d_returned;
	if (!taken || (!now && taken < weft_rma_desc_batch(&c->rp->geom))) {
		c->owe_desc_credit = false;
		return;
	}
	weft_status_t st =
	    weft_rma_post(c, weft_rma_imm(WEFT_RMA_IMM_DESC_CREDIT, c->d_head), c->st_ctrl, 8,
			  c->rp->region_reg.desc, c->r_ctrl, c->card.key, NULL, 0);
	c->owe_desc_credit = st == WEFT_INPROGRESS;
	if (st == WEFT_SUCCESS)
		c->d_returned = c->d_head;
}

/* Serve the next arrived descriptor: write its piece. WEFT_INPROGRESS:
 * nothing to serve yet, or a full queue. */
static weft_status_t serve_desc(struct weft_rma_conn *c)
{
	const struct weft_rma_geom *g = &c->rp->geom;
	uint32_t i = (uint32_t)(c->d_head % g->ndesc);
	if (c->d_arrived[i] != c->d_head + 1)
		return WEFT_INPROGRESS;
	const struct weft_rma_desc *d =
	    (const struct weft_rma_desc *)(c->descs + (size_t)i * WEFT_RMA_LINE);
	if (d->seq != c->d_head + 1)
		return weft_rma_fail(c, WEFT_ERR_REMOTE,
				     "%s: descriptor %llu from rank %d is corrupt (sequence %llu)",
				     c->rp->name, (unsigned long long)c->d_head, c->peer,
				     (unsigned long long)d->seq);
	if (d->msg >= c->tx_posted)
		return WEFT_INPROGRESS; /* the receiver is ahead: wait for the send */
	struct weft_rma_req *r = c->tx_desc;
	struct weft_msg *m = r ? r->base.msg : NULL;
	if (!r || r->index != d->msg || d->tag != m->tag || d->msg_len != m->len ||
	    d->off != r->issued || d->len == 0 || d->len > m->len - r->issued)
		return desc_mismatch(c, d);
	if (c->rp->prims->src_needs_reg && !r->mr) {
		weft_status_t st = weft_mr_cache_get(&c->rp->cache, m->buf, m->len, &r->mr);
		if (st != WEFT_SUCCESS)
			return weft_rma_fail(c, st, "%s: registering %zu bytes to send to rank %d",
					     c->rp->name, m->len, c->peer);
	}
	weft_status_t st = weft_rma_post(
	    c, weft_rma_imm(WEFT_RMA_IMM_DATA, c->d_head), (const char *)m->buf + d->off, d->len,
	    r->mr ? r->mr->reg.desc : NULL, d->raddr, d->rkey, r, c->d_head);
	if (st != WEFT_SUCCESS)
		return st;
	r->issued += d->len;
	r->pending++;
	if (r->issued == m->len)
		c->tx_desc = weft_rma_next_rndv(r, false);
	/* The descriptor's fields are in the op now: its entry is free. */
	c->d_arrived[i] = 0;
	c->d_head++;
	return_descs(c, false);
	return WEFT_SUCCESS;
}

bool weft_rma_tx_progress(struct weft_rma_conn *c)
{
	bool moved = false;
	if (c->owe_desc_credit)
		return_descs(c, true);
	while (!c->broken && c->tx_slot && push_slot(c) == WEFT_SUCCESS)
		moved = true;
	while (!c->broken && serve_desc(c) == WEFT_SUCCESS)
		moved = true;
	return moved;
}

void weft_rma_tx_on_desc(struct weft_rma_conn *c, uint32_t value)
{
	const struct weft_rma_geom *g = &c->rp->geom;
	uint64_t n = weft_rma_widen(c->d_head, value);
	if (n - c->d_head >= g->ndesc) {
		weft_rma_fail(c, WEFT_ERR_REMOTE,
			      "%s: rank %d wrote descriptor %llu while this rank takes %llu",
			      c->rp->name, c->peer, (unsigned long long)n,
			      (unsigned long long)c->d_head);
		return;
	}
	c->d_arrived[n % g->ndesc] = n + 1;
}

void weft_rma_tx_on_credit(struct weft_rma_conn *c, uint32_t value)
{
	uint64_t have = atomic_load_explicit(&c->tx_credit, memory_order_relaxed);
	uint64_t n = weft_rma_widen(have, value);
	/* An older count that arrives late widens to far ahead: ignore it. */
	if (n <= c->txr.head)
		atomic_store_explicit(&c->tx_credit, n, memory_order_relaxed);
}

void weft_rma_tx_on_written(struct weft_rma_conn *c, struct weft_rma_op *op)
{
	struct weft_rma_req *r = op->req;
	r->base.xferred += op->len;
	r->pending--;
	maybe_done(c, r);
}
