/*
 * verbs_slots.c — the verbs transport's message path: eager landing slots
 * with credits, written over RDMA with immediate; completion; liveness.
 * The protocol is described in verbs.h. This is the interim path: it goes
 * when the shared RMA protocol module of transports/common lands, and the
 * transport then runs that module over the primitives of verbs_qp.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "transports/verbs/verbs.h"
#include "util/clock.h"
#include "util/error.h"

enum verbs_rx_phase {
	VERBS_RX_NEW = 0, /* header not seen yet */
	VERBS_RX_EAGER,	  /* matched; more data slots follow */
};

static inline size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

static inline struct verbs_req *q_head(const struct weft_tp_reqq *q)
{
	return q->head ? weft_container_of(q->head, struct verbs_req, base) : NULL;
}

static void req_finish(struct verbs_conn *c, struct weft_tp_reqq *q, struct verbs_req *r,
		       weft_status_t status)
{
	weft_reqq_unlink(q, &r->base);
	struct weft_msg *m = r->base.msg;
	weft_tp_pool_put(&c->tp->reqs, r);
	weft_msg_complete(m, status);
}

static void fail_queue(struct verbs_conn *c, struct weft_tp_reqq *q, weft_status_t status)
{
	while (q->head)
		req_finish(c, q, q_head(q), status);
}

void weft_verbs_fail_all(struct verbs_conn *c, weft_status_t status)
{
	if (c->fail_status == WEFT_SUCCESS)
		c->fail_status = status;
	fail_queue(c, &c->sendq, status);
	fail_queue(c, &c->recvq, status);
}

static weft_status_t conn_fail(struct verbs_conn *c, weft_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The connection is unusable: record why (once; not while closing, when
 * peers that left first are expected), fail everything queued on it. */
static weft_status_t conn_fail(struct verbs_conn *c, weft_status_t status, const char *fmt, ...)
{
	if (!c->broken && !c->tp->closing) {
		char msg[WEFT_ERR_MSG_BYTES];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		weft_tp_fail(c->tp->base.env, status, "%s", msg);
	}
	c->broken = true;
	weft_verbs_fail_all(c, status);
	return status;
}

static const char *host_of(const struct verbs_conn *c)
{
	return c->tp->base.env->peers[c->base.peer].hostname;
}

static weft_status_t post_failed(struct verbs_conn *c, const char *what, int err)
{
	return conn_fail(c, WEFT_ERR_SYSTEM, "verbs: posting %s to rank %d (host %s): %s", what,
			 c->base.peer, host_of(c), strerror(err));
}

/* ---- sending ---- */

/* Stage the next piece of @p r in slot i and write it to the peer. */
static int tx_slot(struct verbs_conn *c, struct verbs_req *r)
{
	struct verbs_tp *tp = c->tp;
	struct weft_msg *m = r->base.msg;
	uint32_t i = weft_ring_tx_index(&c->txr);
	unsigned char *slot = c->stage + (size_t)i * tp->stride;
	struct weft_slot_hdr *h = (struct weft_slot_hdr *)slot;
	size_t wlen = VERBS_HDR;
	h->tag = m->tag;
	h->len = m->len;
	h->kind = WEFT_SLOT_EAGER;
	h->flags = 0;
	if (m->len <= WEFT_SLOT_INLINE) {
		if (m->len)
			memcpy(h->inl, m->buf, m->len);
		r->base.xferred = m->len;
	} else {
		size_t n = min_size(tp->slot_bytes, m->len - r->base.xferred);
		memcpy(slot + VERBS_HDR, (const char *)m->buf + r->base.xferred, n);
		r->base.xferred += n;
		wlen += n;
	}
	weft_ring_tx_publish(&c->txr, h);
	return weft_verbs_post_write(c, VERBS_WR_DATA, slot, tp->stage_mr->lkey, (uint32_t)wlen,
				     c->ring_addr + (uint64_t)i * tp->stride, c->ring_rkey, true,
				     (uint32_t)c->txr.head);
}

/* Move queued sends into free slots. True if anything moved. */
static bool tx_push(struct verbs_conn *c, weft_status_t *st)
{
	struct verbs_req *r;
	bool moved = false;
	while ((r = q_head(&c->sendq)) && weft_verbs_sq_room(c) > 2 &&
	       weft_ring_tx_has_slot(&c->txr, &c->ctl->tail)) {
		int err = tx_slot(c, r);
		if (err) {
			*st = post_failed(c, "a write", err);
			return true;
		}
		moved = true;
		if (r->base.xferred == r->base.msg->len)
			req_finish(c, &c->sendq, r, WEFT_SUCCESS);
	}
	return moved;
}

/* ---- receiving ---- */

static void send_credit(struct verbs_conn *c, weft_status_t *st)
{
	struct verbs_tp *tp = c->tp;
	c->ctl->tail_src = c->rxr.head; /* the newest count: a late read only gives more */
	int err = weft_verbs_post_write(
	    c, VERBS_WR_CREDIT, &c->ctl->tail_src, tp->ctl_mr->lkey, sizeof(uint64_t),
	    c->ctl_addr + offsetof(struct verbs_ctl, tail), c->ctl_rkey, false, 0);
	c->credit_owed = err == EAGAIN;
	if (err && err != EAGAIN)
		*st = post_failed(c, "a credit write", err);
}

static void rx_release(struct verbs_conn *c, weft_status_t *st)
{
	if (weft_ring_rx_release(&c->rxr) || c->credit_owed)
		send_credit(c, st);
}

void weft_verbs_on_recv(struct verbs_conn *c, uint32_t imm, uint32_t len)
{
	if (c->broken)
		return;
	if (imm != (uint32_t)(c->rx_arrived + 1)) {
		conn_fail(c, WEFT_ERR_REMOTE,
			  "verbs: rank %d's slot %u arrived where slot %u was due (stream out of "
			  "step)",
			  c->base.peer, imm, (uint32_t)(c->rx_arrived + 1));
		return;
	}
	c->rx_arrived++;
	c->stall_polls = 0;
	c->stall_since = 0;
	int err = weft_verbs_post_recvs(c, 1);
	if (err)
		post_failed(c, "a receive", err);
}

static weft_status_t rx_mismatch(struct verbs_conn *c, struct weft_msg *m,
				 const struct weft_slot_hdr *s)
{
	return conn_fail(c, WEFT_ERR_REMOTE,
			 "verbs: peer rank %d sent tag %#llx with %llu bytes, but the receive "
			 "posted here expects tag %#llx with %zu bytes (mismatched calls across "
			 "ranks?)",
			 c->base.peer, (unsigned long long)s->tag, (unsigned long long)s->len,
			 (unsigned long long)m->tag, m->len);
}

/* Consume the arrived slot @p s for the receive @p r; true once @p r is
 * done (or failed, with *st set). */
static bool rx_slot(struct verbs_conn *c, struct verbs_req *r, const struct weft_slot_hdr *s,
		    weft_status_t *st)
{
	struct weft_msg *m = r->base.msg;
	if (!weft_ring_rx_arrived(&c->rxr, s) ||
	    (r->phase == VERBS_RX_EAGER && (s->tag != m->tag || s->kind != WEFT_SLOT_EAGER))) {
		*st = conn_fail(c, WEFT_ERR_REMOTE,
				"verbs: stream from rank %d out of step (slot %llu holds seq %llu, "
				"tag %#llx, kind %u, in message tag %#llx)",
				c->base.peer, (unsigned long long)c->rxr.head,
				(unsigned long long)atomic_load(&s->seq),
				(unsigned long long)s->tag, s->kind, (unsigned long long)m->tag);
		return true;
	}
	if (r->phase == VERBS_RX_NEW) {
		if (s->tag != m->tag || s->len != m->len || s->kind != WEFT_SLOT_EAGER) {
			*st = rx_mismatch(c, m, s);
			return true;
		}
		r->phase = VERBS_RX_EAGER;
		if (m->len <= WEFT_SLOT_INLINE) {
			if (m->len)
				weft_msg_deliver(m, 0, s->inl, m->len);
			r->base.xferred = m->len;
		}
	}
	if (r->base.xferred < m->len) {
		/* Straight from the landing slot: it stays put until we free it. */
		size_t n = min_size(c->tp->slot_bytes, m->len - r->base.xferred);
		weft_msg_deliver(m, r->base.xferred, (const unsigned char *)s + VERBS_HDR, n);
		r->base.xferred += n;
	}
	rx_release(c, st);
	if (c->broken) /* the credit write failed: r is failed with the rest */
		return true;
	if (r->base.xferred < m->len)
		return false;
	req_finish(c, &c->recvq, r, WEFT_SUCCESS);
	return true;
}

/* Match arrived slots against posted receives, in order. */
static bool rx_pull(struct verbs_conn *c, weft_status_t *st)
{
	struct verbs_req *r;
	bool moved = false;
	while ((r = q_head(&c->recvq)) && c->rxr.head < c->rx_arrived && *st == WEFT_SUCCESS &&
	       !c->broken) {
		uint32_t i = weft_ring_rx_index(&c->rxr);
		const struct weft_slot_hdr *s =
		    (const struct weft_slot_hdr *)(c->land + (size_t)i * c->tp->stride);
		rx_slot(c, r, s, st);
		moved = true;
	}
	return moved;
}

/* ---- liveness ---- */

void weft_verbs_on_probe(struct verbs_conn *c)
{
	c->probing = false;
}

static const char *kind_name(enum verbs_wr_kind kind)
{
	switch (kind) {
	case VERBS_WR_DATA: return "data write";
	case VERBS_WR_CREDIT: return "credit write";
	case VERBS_WR_PROBE: return "liveness probe";
	case VERBS_WR_STATE: return "state write";
	case VERBS_WR_RECV: return "receive";
	default: return "work request";
	}
}

void weft_verbs_on_error(struct verbs_conn *c, enum verbs_wr_kind kind, int status,
			 uint32_t vendor_err)
{
	if (kind == VERBS_WR_PROBE)
		c->probing = false;
	if (c->broken || c->tp->closing)
		return;
	const char *what = weft_verbs_wc_str(c->tp->ibv, (enum ibv_wc_status)status);
	if (status == IBV_WC_RETRY_EXC_ERR)
		conn_fail(c, WEFT_ERR_REMOTE,
			  "verbs: peer rank %d (host %s) does not answer: %s on a %s (it died, or "
			  "the path to it is down)",
			  c->base.peer, host_of(c), what, kind_name(kind));
	else
		conn_fail(c, WEFT_ERR_REMOTE,
			  "verbs: a %s with peer rank %d (host %s) failed: %s (status %d, vendor "
			  "error %#x)",
			  kind_name(kind), c->base.peer, host_of(c), what, status, vendor_err);
}

static weft_status_t check_peer(struct verbs_conn *c)
{
	uint64_t state = atomic_load_explicit(&c->ctl->state, memory_order_acquire);
	if (state == VERBS_STATE_ABORTED)
		return conn_fail(c, WEFT_ERR_REMOTE,
				 "verbs: peer rank %d (host %s) aborted its communicator",
				 c->base.peer, host_of(c));
	if (state == VERBS_STATE_CLOSED)
		return conn_fail(c, WEFT_ERR_REMOTE,
				 "verbs: peer rank %d (host %s) destroyed its communicator while "
				 "this rank still waits for it (mismatched calls across ranks?)",
				 c->base.peer, host_of(c));
	if (c->probing)
		return WEFT_SUCCESS;
	/* Write our state where the peer keeps it: a dead peer fails this. */
	c->ctl->state_src = VERBS_STATE_ALIVE;
	int err = weft_verbs_post_write(
	    c, VERBS_WR_PROBE, &c->ctl->state_src, c->tp->ctl_mr->lkey, sizeof(uint64_t),
	    c->ctl_addr + offsetof(struct verbs_ctl, state), c->ctl_rkey, false, 0);
	if (err && err != EAGAIN)
		return post_failed(c, "a liveness probe", err);
	c->probing = err == 0;
	return WEFT_SUCCESS;
}

static inline bool conn_busy(const struct verbs_conn *c)
{
	return c->sendq.head || c->recvq.head || c->credit_owed;
}

/* After VERBS_STALL_S without progress on a busy connection, look at the
 * peer (and again every VERBS_STALL_S); the clock is read once per
 * VERBS_STALL_POLLS idle polls only. */
static weft_status_t conn_stalled(struct verbs_conn *c)
{
	if (++c->stall_polls < VERBS_STALL_POLLS)
		return WEFT_SUCCESS;
	c->stall_polls = 0;
	double now = weft_now();
	if (c->stall_since == 0) {
		c->stall_since = now;
		return WEFT_SUCCESS;
	}
	if (now - c->stall_since < VERBS_STALL_S)
		return WEFT_SUCCESS;
	c->stall_since = now;
	return check_peer(c);
}

static weft_status_t conn_progress(struct verbs_conn *c)
{
	weft_status_t st = WEFT_SUCCESS;
	bool moved = false;
	if (c->sendq.head)
		moved |= tx_push(c, &st);
	if (c->recvq.head && st == WEFT_SUCCESS)
		moved |= rx_pull(c, &st);
	if (c->credit_owed && st == WEFT_SUCCESS && !c->broken)
		send_credit(c, &st);
	if (st != WEFT_SUCCESS || c->broken)
		return st != WEFT_SUCCESS ? st : c->fail_status;
	if (moved) {
		c->stall_polls = 0;
		c->stall_since = 0;
		return WEFT_SUCCESS;
	}
	return conn_busy(c) ? conn_stalled(c) : WEFT_SUCCESS;
}

weft_status_t weft_tp_verbs_progress(struct weft_tp *base)
{
	struct verbs_tp *tp = verbs_tp_of(base);
	if (!tp->usable || tp->closing)
		return WEFT_SUCCESS;
	if (weft_verbs_poll(tp) < 0) {
		weft_status_t st = weft_tp_fail(base->env, WEFT_ERR_SYSTEM,
						"verbs: ibv_poll_cq failed on %s:%d (CQ overrun?)",
						tp->port.dev, tp->port.port);
		for (int i = 0; i < tp->nconns; i++) {
			tp->conns[i].broken = true;
			weft_verbs_fail_all(&tp->conns[i], st);
		}
		return st;
	}
	weft_status_t ret = WEFT_SUCCESS;
	for (int i = 0; i < tp->nconns; i++) {
		struct verbs_conn *c = &tp->conns[i];
		if (!c->up || c->broken || !conn_busy(c))
			continue;
		weft_status_t st = conn_progress(c);
		if (st != WEFT_SUCCESS && ret == WEFT_SUCCESS)
			ret = st;
	}
	return ret;
}

/* ---- posting ---- */

/* A request for @p m, or NULL with @p m completed with the reason. */
static struct verbs_req *post_req(struct verbs_conn *c, struct weft_msg *m, weft_status_t *st)
{
	m->done = false;
	m->status = WEFT_INPROGRESS;
	if (m->unit == 0)
		m->unit = 1;
	*st = c->broken ? (c->fail_status != WEFT_SUCCESS ? c->fail_status : WEFT_ERR_REMOTE)
			: WEFT_SUCCESS;
	struct verbs_req *r = *st ? NULL : weft_tp_pool_get(&c->tp->reqs);
	if (!r && !*st)
		*st = weft_tp_fail(c->tp->base.env, WEFT_ERR_NO_MEMORY,
				   "verbs: no memory for a request");
	if (!r) {
		weft_msg_complete(m, *st);
		return NULL;
	}
	r->base.msg = m;
	return r;
}

weft_status_t weft_tp_verbs_isend(struct weft_conn *base, struct weft_msg *m)
{
	struct verbs_conn *c = weft_container_of(base, struct verbs_conn, base);
	weft_status_t st;
	struct verbs_req *r = post_req(c, m, &st);
	if (!r)
		return st;
	bool idle = !c->sendq.head;
	weft_reqq_push(&c->sendq, &r->base);
	st = WEFT_SUCCESS;
	if (idle) /* latency: write it now rather than at the next progress */
		tx_push(c, &st);
	return st;
}

weft_status_t weft_tp_verbs_irecv(struct weft_conn *base, struct weft_msg *m)
{
	struct verbs_conn *c = weft_container_of(base, struct verbs_conn, base);
	weft_status_t st;
	struct verbs_req *r = post_req(c, m, &st);
	if (!r)
		return st;
	bool idle = !c->recvq.head;
	weft_reqq_push(&c->recvq, &r->base);
	st = WEFT_SUCCESS;
	if (idle)
		rx_pull(c, &st);
	return st;
}
