/*
 * shm_fifo.c — the shared-memory data path: eager slots, single-copy
 * (process_vm_readv) receives, completion, and peer liveness. No system
 * call and no allocation on the eager path; see shm.h for the protocol.
 */
#define _GNU_SOURCE
#include "transports/shm/shm.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/uio.h>

#include "util/proc.h"

/* Receive phases (struct shm_req.phase). */
enum shm_rx_phase {
	SHM_RX_NEW = 0, /* header not seen yet */
	SHM_RX_EAGER,	/* matched; more data slots follow */
	SHM_RX_CMA,	/* matched; reading the sender's buffer */
};

static inline size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

static inline struct shm_req *req_of(struct weft_tp_req *r)
{
	return weft_container_of(r, struct shm_req, base);
}

static inline struct shm_req *q_head(const struct weft_tp_reqq *q)
{
	return q->head ? req_of(q->head) : NULL;
}

/* The request leaves @p q and goes back to the pool; its message is done. */
static void req_finish(struct shm_conn *c, struct weft_tp_reqq *q, struct shm_req *r,
		       weft_status_t status)
{
	weft_reqq_unlink(q, &r->base);
	struct weft_msg *m = r->base.msg;
	weft_tp_pool_put(&c->tp->reqs, r);
	weft_msg_complete(m, status);
}

static void fail_queue(struct shm_conn *c, struct weft_tp_reqq *q, weft_status_t status)
{
	while (q->head)
		req_finish(c, q, q_head(q), status);
}

void weft_tp_shm_fail_all(struct shm_conn *c, weft_status_t status)
{
	if (c->fail_status == WEFT_SUCCESS)
		c->fail_status = status;
	fail_queue(c, &c->sendq, status);
	fail_queue(c, &c->cmaq, status);
	fail_queue(c, &c->recvq, status);
}

/* The connection is unusable: record why (once), tell the local peers
 * through our state word, fail everything queued on it. */
static weft_status_t conn_fail(struct shm_conn *c, weft_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static weft_status_t conn_fail(struct shm_conn *c, weft_status_t status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	weft_tp_vfail_once(c->tp->base.env, c->broken, NULL, status, fmt, ap);
	va_end(ap);
	c->broken = true;
	int alive = SHM_STATE_ALIVE;
	atomic_compare_exchange_strong(&c->tp->ctl->state, &alive, SHM_STATE_FAILED);
	weft_tp_shm_fail_all(c, status);
	return status;
}

/* --- Sending --- */

/* Move queued sends into free slots. True if anything moved. */
static bool tx_push(struct shm_conn *c)
{
	struct shm_tp *tp = c->tp;
	struct shm_req *r;
	bool moved = false;
	while ((r = q_head(&c->sendq)) && weft_ring_tx_has_slot(&c->txr, &c->tx->tail)) {
		struct weft_msg *m = r->base.msg;
		uint32_t i = weft_ring_tx_index(&c->txr);
		struct weft_slot_hdr *s = &c->tx->slots[i];
		moved = true;
		s->tag = m->tag;
		s->len = m->len;
		if (c->tx_cma && m->len >= tp->cma_min) {
			/* A single-copy message never stays in sendq after its header. */
			uint64_t addr = (uint64_t)(uintptr_t)m->buf;
			s->kind = WEFT_SLOT_RNDV;
			memcpy(s->inl, &addr, sizeof(addr));
			weft_ring_tx_publish(&c->txr, s);
			r->cma = c->cma_posted++;
			weft_reqq_unlink(&c->sendq, &r->base);
			weft_reqq_push(&c->cmaq, &r->base);
			continue;
		}
		s->kind = WEFT_SLOT_EAGER;
		if (m->len <= SHM_INLINE) {
			if (m->len)
				memcpy(s->inl, m->buf, m->len);
			r->base.xferred = m->len;
		} else {
			size_t n = min_size(tp->slot_bytes, m->len - r->base.xferred);
			memcpy(c->tx_data + (size_t)i * tp->slot_bytes,
			       (char *)m->buf + r->base.xferred, n);
			r->base.xferred += n;
		}
		weft_ring_tx_publish(&c->txr, s);
		if (r->base.xferred == m->len)
			req_finish(c, &c->sendq, r, WEFT_SUCCESS);
	}
	return moved;
}

/* Complete single-copy sends the receiver has finished reading. */
static bool tx_reap(struct shm_conn *c)
{
	if (!c->cmaq.head)
		return false;
	uint64_t done = atomic_load_explicit(&c->tx->cma_done, memory_order_acquire);
	bool moved = false;
	struct shm_req *r;
	while ((r = q_head(&c->cmaq)) && r->cma < done) {
		req_finish(c, &c->cmaq, r, WEFT_SUCCESS);
		moved = true;
	}
	return moved;
}

/* --- Receiving --- */

static inline void rx_release(struct shm_conn *c)
{
	if (weft_ring_rx_release(&c->rxr))
		atomic_store_explicit(&c->rx->tail, c->rxr.head, memory_order_release);
}

static weft_status_t rx_cma_error(struct shm_conn *c, int err)
{
	int peer = c->base.peer;
	if (err == ESRCH)
		return conn_fail(c, WEFT_ERR_REMOTE, "shm: peer rank %d (pid %d) died", peer,
				 (int)c->pid);
	return conn_fail(c, WEFT_ERR_REMOTE, "shm: process_vm_readv from rank %d (pid %d): %s",
			 peer, (int)c->pid, strerror(err));
}

/* Read [off, off + n) of the sender's buffer into @p dst. */
static weft_status_t cma_read(struct shm_conn *c, uint64_t raddr, size_t off, char *dst, size_t n)
{
	for (size_t got = 0; got < n;) {
		struct iovec local = {dst + got, n - got};
		struct iovec remote = {(void *)(uintptr_t)(raddr + off + got), n - got};
		ssize_t k = process_vm_readv(c->pid, &local, 1, &remote, 1, 0);
		if (k <= 0)
			return rx_cma_error(c, k < 0 ? errno : EIO);
		got += (size_t)k;
	}
	return WEFT_SUCCESS;
}

/* Read up to *budget bytes of a single-copy message: straight into the
 * destination, or through the bounce buffer for a reducing receive. */
static weft_status_t rx_cma(struct shm_conn *c, struct shm_req *r, size_t *budget)
{
	struct weft_bounce *b = &c->tp->bounce;
	struct weft_msg *m = r->base.msg;
	while (*budget && r->base.xferred < m->len) {
		size_t n = min_size(m->len - r->base.xferred, *budget);
		weft_status_t st;
		if (!m->reduce) {
			st = cma_read(c, r->cma, r->base.xferred, (char *)m->buf + r->base.xferred,
				      n);
			if (st != WEFT_SUCCESS)
				return st;
			r->base.xferred += n;
		} else {
			/* xferred counts bytes read; the bounce holds the undelivered ones. */
			n = min_size(n, weft_bounce_room(b));
			st = cma_read(c, r->cma, r->base.xferred, weft_bounce_tail(b), n);
			if (st != WEFT_SUCCESS)
				return st;
			weft_bounce_deliver(b, n, m, r->base.xferred - b->have);
			r->base.xferred += n;
		}
		*budget -= n;
	}
	return WEFT_SUCCESS;
}

static weft_status_t rx_mismatch(struct shm_conn *c, struct weft_msg *m,
				 const struct weft_slot_hdr *s)
{
	char why[256];
	const struct weft_tp_env *env = c->tp->base.env;
	env->explain(env->ctx, s->tag, m->tag, c->base.peer, why, sizeof(why));
	return conn_fail(c, WEFT_ERR_REMOTE,
			 "shm: rank %d sent tag %#llx with %llu bytes, but the receive posted here "
			 "expects tag %#llx with %zu bytes: %s",
			 c->base.peer, (unsigned long long)s->tag, (unsigned long long)s->len,
			 (unsigned long long)m->tag, m->len,
			 why[0] ? why : "mismatched calls across ranks?");
}

/* The header of a new message arrived in slot @p i for receive @p r: check
 * it, then take it (a single-copy descriptor, an inline message) or note
 * that its data follows. True when the slot is consumed and done with. */
static bool rx_first(struct shm_conn *c, struct shm_req *r, const struct weft_slot_hdr *s,
		     weft_status_t *status)
{
	struct weft_msg *m = r->base.msg;
	if (s->tag != m->tag || s->len != m->len) {
		*status = rx_mismatch(c, m, s);
		return true;
	}
	if (s->kind == WEFT_SLOT_RNDV) {
		memcpy(&r->cma, s->inl, sizeof(uint64_t));
		r->phase = SHM_RX_CMA;
		rx_release(c);
		return true;
	}
	if (m->len <= SHM_INLINE) {
		if (m->len)
			weft_msg_deliver(m, 0, s->inl, m->len);
		rx_release(c);
		req_finish(c, &c->recvq, r, WEFT_SUCCESS);
		return true;
	}
	r->phase = SHM_RX_EAGER;
	return false;
}

/* A single-copy receive at the head of the queue: read what the budget
 * allows; true if it finished. */
static bool rx_cma_step(struct shm_conn *c, struct shm_req *r, size_t *budget, bool *moved,
			weft_status_t *status)
{
	size_t before = r->base.xferred;
	*status = rx_cma(c, r, budget);
	if (*status != WEFT_SUCCESS)
		return false;
	*moved |= r->base.xferred != before || r->base.msg->len == 0;
	if (r->base.xferred < r->base.msg->len)
		return false;
	c->rx_cma_done++;
	atomic_store_explicit(&c->rx->cma_done, c->rx_cma_done, memory_order_release);
	req_finish(c, &c->recvq, r, WEFT_SUCCESS);
	return true;
}

/* Match arrived slots against posted receives, in order. Bounded work: at
 * most one ring of slots and SHM_CMA_STEP single-copy bytes per call. */
static bool rx_pull(struct shm_conn *c, weft_status_t *status)
{
	struct shm_tp *tp = c->tp;
	size_t budget = SHM_CMA_STEP;
	uint32_t slots_left = tp->nslots;
	struct shm_req *r;
	bool moved = false;
	while ((r = q_head(&c->recvq))) {
		if (r->phase == SHM_RX_CMA) {
			if (!rx_cma_step(c, r, &budget, &moved, status))
				return moved || *status != WEFT_SUCCESS;
			continue;
		}
		uint32_t i = weft_ring_rx_index(&c->rxr);
		struct weft_slot_hdr *s = &c->rx->slots[i];
		if (!slots_left || !weft_ring_rx_arrived(&c->rxr, s))
			break;
		slots_left--;
		moved = true;
		struct weft_msg *m = r->base.msg;
		if (r->phase == SHM_RX_NEW) {
			if (rx_first(c, r, s, status)) {
				if (*status != WEFT_SUCCESS)
					return true;
				continue;
			}
		} else if (s->tag != m->tag || s->kind != WEFT_SLOT_EAGER) {
			*status =
			    conn_fail(c, WEFT_ERR_REMOTE,
				      "shm: stream from rank %d out of step (tag %#llx kind %u "
				      "inside message tag %#llx)",
				      c->base.peer, (unsigned long long)s->tag, s->kind,
				      (unsigned long long)m->tag);
			return true;
		}
		size_t n = min_size(tp->slot_bytes, m->len - r->base.xferred);
		weft_msg_deliver(m, r->base.xferred, c->rx_data + (size_t)i * tp->slot_bytes, n);
		r->base.xferred += n;
		rx_release(c);
		if (r->base.xferred == m->len)
			req_finish(c, &c->recvq, r, WEFT_SUCCESS);
	}
	return moved;
}

/* --- Liveness --- */

static weft_status_t check_peer(struct shm_conn *c)
{
	int state = atomic_load_explicit(&c->peer_ctl->state, memory_order_acquire);
	if (state == SHM_STATE_ABORTED)
		return conn_fail(c, WEFT_ERR_REMOTE,
				 "shm: peer rank %d (pid %d) aborted its communicator",
				 c->base.peer, (int)c->pid);
	if (state == SHM_STATE_CLOSED)
		return conn_fail(
		    c, WEFT_ERR_REMOTE,
		    "shm: peer rank %d (pid %d) destroyed its communicator while this rank "
		    "still waits for it (mismatched calls across ranks?)",
		    c->base.peer, (int)c->pid);
	if (state != SHM_STATE_ALIVE)
		return conn_fail(c, WEFT_ERR_REMOTE,
				 "shm: peer rank %d (pid %d) failed (see its log)", c->base.peer,
				 (int)c->pid);
	if (!weft_pid_alive(c->pid))
		return conn_fail(c, WEFT_ERR_REMOTE, "shm: peer rank %d (pid %d) died",
				 c->base.peer, (int)c->pid);
	return WEFT_SUCCESS;
}

static inline bool conn_busy(const struct shm_conn *c)
{
	return c->sendq.head || c->cmaq.head || c->recvq.head;
}

/* After SHM_STALL_S without progress on a busy connection, look at the peer
 * (and again every SHM_STALL_S). */
static weft_status_t conn_stalled(struct shm_conn *c)
{
	return weft_watchdog_due(&c->wd, SHM_STALL_S) ? check_peer(c) : WEFT_SUCCESS;
}

static weft_status_t conn_progress(struct shm_conn *c)
{
	weft_status_t st = WEFT_SUCCESS;
	bool moved = false;
	if (c->sendq.head)
		moved |= tx_push(c);
	if (c->cmaq.head)
		moved |= tx_reap(c);
	if (c->recvq.head)
		moved |= rx_pull(c, &st);
	if (st != WEFT_SUCCESS)
		return st;
	if (moved) {
		weft_tp_shm_ring(c); /* a slot, the tail or a single-copy completion */
		weft_watchdog_moved(&c->wd);
		return WEFT_SUCCESS;
	}
	return conn_busy(c) ? conn_stalled(c) : WEFT_SUCCESS;
}

weft_status_t weft_tp_shm_progress(struct weft_tp *base)
{
	struct shm_tp *tp = weft_container_of(base, struct shm_tp, base);
	weft_status_t ret = WEFT_SUCCESS;
	for (int l = 0; l < tp->nlocal; l++) {
		struct shm_conn *c = &tp->conns[l];
		if (!c->connected || c->broken || !conn_busy(c))
			continue;
		weft_status_t st = conn_progress(c);
		if (st != WEFT_SUCCESS && ret == WEFT_SUCCESS)
			ret = st;
	}
	return ret;
}

/* --- Posting --- */

/* A request for @p m, or NULL with @p m completed with the reason. */
static struct shm_req *post_req(struct shm_conn *c, struct weft_msg *m, weft_status_t *st)
{
	weft_status_t refused =
	    c->broken ? (c->fail_status != WEFT_SUCCESS ? c->fail_status : WEFT_ERR_REMOTE)
		      : WEFT_SUCCESS;
	return weft_tp_req_start(&c->tp->reqs, c->tp->base.env, "shm", m, refused, st);
}

weft_status_t weft_tp_shm_isend(struct weft_conn *base, struct weft_msg *m)
{
	struct shm_conn *c = weft_container_of(base, struct shm_conn, base);
	weft_status_t st;
	struct shm_req *r = post_req(c, m, &st);
	if (!r)
		return st;
	bool idle = !c->sendq.head;
	weft_reqq_push(&c->sendq, &r->base);
	if (idle && tx_push(c)) /* latency: put it in a slot now, not at the next progress */
		weft_tp_shm_ring(c);
	return WEFT_SUCCESS;
}

weft_status_t weft_tp_shm_irecv(struct weft_conn *base, struct weft_msg *m)
{
	struct shm_conn *c = weft_container_of(base, struct shm_conn, base);
	weft_status_t st;
	struct shm_req *r = post_req(c, m, &st);
	if (!r)
		return st;
	bool idle = !c->recvq.head;
	weft_reqq_push(&c->recvq, &r->base);
	if (idle) {
		st = WEFT_SUCCESS;
		if (rx_pull(c, &st))
			weft_tp_shm_ring(c); /* slots freed */
		return st;
	}
	return WEFT_SUCCESS;
}

/* --- Waiting (WEFT_WAIT) --- */

/* Could progress move something on @p c now, without a new store from
 * the peer? Reads only (the flags' loads order after arm's fence). */
static bool conn_ready(struct shm_conn *c)
{
	struct shm_req *r;
	if (c->sendq.head && weft_ring_tx_has_slot(&c->txr, &c->tx->tail))
		return true;
	if ((r = q_head(&c->cmaq)) &&
	    r->cma < atomic_load_explicit(&c->tx->cma_done, memory_order_acquire))
		return true;
	if (!(r = q_head(&c->recvq)))
		return false;
	if (r->phase == SHM_RX_CMA)
		return true; /* a single-copy read goes on by itself */
	return weft_ring_rx_arrived(&c->rxr, &c->rx->slots[weft_ring_rx_index(&c->rxr)]);
}

bool weft_tp_shm_settle(struct weft_tp *base)
{
	struct shm_tp *tp = weft_container_of(base, struct shm_tp, base);
	for (int l = 0; l < tp->nlocal; l++) {
		struct shm_conn *c = &tp->conns[l];
		if (c->connected && !c->broken && conn_busy(c) && conn_ready(c))
			return false;
	}
	return true;
}
