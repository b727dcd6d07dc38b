/*
 * shm_fifo.c — the shared-memory data path: eager slots, single-copy
 * (process_vm_readv) receives, completion, and peer liveness. No system
 * call and no allocation on the eager path; see shm.h for the protocol.
 */
#define _GNU_SOURCE
#include "transports/shm/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/p2p.h"

/* Receive phases, in msg->tp_priv[0]; tp_priv[1] holds the CMA address. */
enum shm_rx_phase {
	SHM_RX_NEW = 0, /* header not seen yet */
	SHM_RX_EAGER,	/* matched; more data slots follow */
	SHM_RX_CMA,	/* matched; reading the sender's buffer */
};

static inline size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

static inline void q_push(struct shm_queue *q, struct weft_msg *m)
{
	m->next = NULL;
	if (q->tail)
		q->tail->next = m;
	else
		q->head = m;
	q->tail = m;
}

static inline struct weft_msg *q_pop(struct shm_queue *q)
{
	struct weft_msg *m = q->head;
	q->head = m->next;
	if (!q->head)
		q->tail = NULL;
	m->next = NULL;
	return m;
}

static inline void msg_finish(struct weft_msg *m, weft_status_t status)
{
	m->status = status;
	m->done = true;
}

static void fail_queue(struct shm_queue *q, weft_status_t status)
{
	while (q->head)
		msg_finish(q_pop(q), status);
}

void weft_tp_shm_fail_all(struct shm_conn *c, weft_status_t status)
{
	if (c->fail_status == WEFT_SUCCESS)
		c->fail_status = status;
	fail_queue(&c->sendq, status);
	fail_queue(&c->cmaq, status);
	fail_queue(&c->recvq, status);
}

/* The connection is unusable: record why (once), tell the local peers
 * through our state word, fail everything queued on it. */
static weft_status_t conn_fail(struct shm_conn *c, weft_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static weft_status_t conn_fail(struct shm_conn *c, weft_status_t status, const char *fmt, ...)
{
	if (!c->broken) {
		char msg[WEFT_ERR_MSG_BYTES];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		weft_comm_fail(c->tc->base.comm, status, "%s", msg);
	}
	c->broken = true;
	int alive = SHM_STATE_ALIVE;
	atomic_compare_exchange_strong(&c->tc->ctl->state, &alive, SHM_STATE_FAILED);
	weft_tp_shm_fail_all(c, status);
	return status;
}

/* --- Sending --- */

static inline bool tx_slot_free(struct shm_conn *c)
{
	if (c->tx_seq - c->tx_tail < c->tc->nslots)
		return true;
	c->tx_tail = atomic_load_explicit(&c->tx->tail, memory_order_acquire);
	return c->tx_seq - c->tx_tail < c->tc->nslots;
}

static inline void tx_publish(struct shm_conn *c, struct shm_slot *s)
{
	c->tx_seq++;
	atomic_store_explicit(&s->seq, c->tx_seq, memory_order_release);
}

/* Move queued sends into free slots. True if anything moved. */
static bool tx_push(struct shm_conn *c)
{
	struct shm_tc *tc = c->tc;
	struct weft_msg *m;
	bool moved = false;
	while ((m = c->sendq.head) && tx_slot_free(c)) {
		uint32_t i = (uint32_t)(c->tx_seq % tc->nslots);
		struct shm_slot *s = &c->tx->slots[i];
		moved = true;
		s->tag = m->tag;
		s->len = m->len;
		if (c->tx_cma && m->len >= tc->cma_min) {
			/* A CMA message never stays in sendq after its header. */
			uint64_t addr = (uint64_t)(uintptr_t)m->buf;
			s->kind = SHM_KIND_CMA;
			memcpy(s->inl, &addr, sizeof(addr));
			tx_publish(c, s);
			m->tp_priv[1] = c->cma_posted++;
			q_push(&c->cmaq, q_pop(&c->sendq));
			continue;
		}
		s->kind = SHM_KIND_EAGER;
		if (m->len <= SHM_INLINE) {
			if (m->len)
				memcpy(s->inl, m->buf, m->len);
			m->xferred = m->len;
		} else {
			size_t n = min_size(tc->slot_bytes, m->len - m->xferred);
			memcpy(c->tx_data + (size_t)i * tc->slot_bytes, (char *)m->buf + m->xferred,
			       n);
			m->xferred += n;
		}
		tx_publish(c, s);
		if (m->xferred == m->len)
			msg_finish(q_pop(&c->sendq), WEFT_SUCCESS);
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
	while (c->cmaq.head && c->cmaq.head->tp_priv[1] < done) {
		msg_finish(q_pop(&c->cmaq), WEFT_SUCCESS);
		moved = true;
	}
	return moved;
}

/* --- Receiving --- */

static inline void rx_release(struct shm_conn *c)
{
	c->rx_seq++;
	atomic_store_explicit(&c->rx->tail, c->rx_seq, memory_order_release);
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

/* Read up to *budget bytes of a single-copy message: straight into the
 * destination, or through the bounce buffer for a reducing receive. */
static weft_status_t rx_cma(struct shm_conn *c, struct weft_msg *m, size_t *budget)
{
	struct shm_tc *tc = c->tc;
	uint64_t raddr = m->tp_priv[1];
	while (*budget && m->xferred < m->len) {
		size_t n = min_size(m->len - m->xferred, *budget);
		char *dst = (char *)m->buf + m->xferred;
		if (m->reduce) {
			n = min_size(n, SHM_BOUNCE_BYTES);
			if (n < m->len - m->xferred)
				n -= n % m->unit;
			if (n == 0)
				break;
			dst = (char *)tc->bounce;
		}
		for (size_t got = 0; got < n;) {
			struct iovec local = {dst + got, n - got};
			struct iovec remote = {(void *)(uintptr_t)(raddr + m->xferred + got),
					       n - got};
			ssize_t k = process_vm_readv(c->pid, &local, 1, &remote, 1, 0);
			if (k <= 0)
				return rx_cma_error(c, k < 0 ? errno : EIO);
			got += (size_t)k;
		}
		if (m->reduce)
			weft_msg_deliver(m, m->xferred, dst, n);
		m->xferred += n;
		*budget -= min_size(n, *budget);
	}
	return WEFT_SUCCESS;
}

static weft_status_t rx_mismatch(struct shm_conn *c, struct weft_msg *m, const struct shm_slot *s)
{
	char why[256];
	weft_p2p_explain(c->tc->base.comm, s->tag, m->tag, c->base.peer, why, sizeof(why));
	return conn_fail(c, WEFT_ERR_REMOTE,
			 "shm: rank %d sent tag %#llx with %llu bytes, but the receive posted here "
			 "expects tag %#llx with %zu bytes: %s",
			 c->base.peer, (unsigned long long)s->tag, (unsigned long long)s->len,
			 (unsigned long long)m->tag, m->len,
			 why[0] ? why : "mismatched calls across ranks?");
}

/* Match arrived slots against posted receives, in order. Bounded work: at
 * most one ring of slots and SHM_CMA_STEP single-copy bytes per call. */
static bool rx_pull(struct shm_conn *c, weft_status_t *status)
{
	struct shm_tc *tc = c->tc;
	size_t budget = SHM_CMA_STEP;
	uint32_t slots_left = tc->nslots;
	struct weft_msg *m;
	bool moved = false;
	while ((m = c->recvq.head)) {
		if (m->tp_priv[0] == SHM_RX_CMA) {
			size_t before = m->xferred;
			*status = rx_cma(c, m, &budget);
			if (*status != WEFT_SUCCESS)
				return true;
			moved |= m->xferred != before || m->len == 0;
			if (m->xferred < m->len)
				break;
			c->rx_cma_done++;
			atomic_store_explicit(&c->rx->cma_done, c->rx_cma_done,
					      memory_order_release);
			msg_finish(q_pop(&c->recvq), WEFT_SUCCESS);
			continue;
		}
		uint32_t i = (uint32_t)(c->rx_seq % tc->nslots);
		struct shm_slot *s = &c->rx->slots[i];
		if (!slots_left ||
		    atomic_load_explicit(&s->seq, memory_order_acquire) != c->rx_seq + 1)
			break;
		slots_left--;
		moved = true;
		if (m->tp_priv[0] == SHM_RX_NEW) {
			if (s->tag != m->tag || s->len != m->len) {
				*status = rx_mismatch(c, m, s);
				return true;
			}
			if (s->kind == SHM_KIND_CMA) {
				memcpy(&m->tp_priv[1], s->inl, sizeof(uint64_t));
				m->tp_priv[0] = SHM_RX_CMA;
				rx_release(c);
				continue;
			}
			if (m->len <= SHM_INLINE) {
				if (m->len)
					weft_msg_deliver(m, 0, s->inl, m->len);
				m->xferred = m->len;
				rx_release(c);
				msg_finish(q_pop(&c->recvq), WEFT_SUCCESS);
				continue;
			}
			m->tp_priv[0] = SHM_RX_EAGER;
		} else if (s->tag != m->tag || s->kind != SHM_KIND_EAGER) {
			*status =
			    conn_fail(c, WEFT_ERR_REMOTE,
				      "shm: stream from rank %d out of step (tag %#llx kind %u "
				      "inside message tag %#llx)",
				      c->base.peer, (unsigned long long)s->tag, s->kind,
				      (unsigned long long)m->tag);
			return true;
		}
		size_t n = min_size(tc->slot_bytes, m->len - m->xferred);
		weft_msg_deliver(m, m->xferred, c->rx_data + (size_t)i * tc->slot_bytes, n);
		m->xferred += n;
		rx_release(c);
		if (m->xferred == m->len)
			msg_finish(q_pop(&c->recvq), WEFT_SUCCESS);
	}
	return moved;
}

/* --- Liveness --- */

/* kill(pid, 0) alone is not enough: a killed child stays a zombie until its
 * parent reaps it, and a zombie still "exists". */
static bool pid_alive(pid_t pid)
{
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return false;
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

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
	if (!pid_alive(c->pid))
		return conn_fail(c, WEFT_ERR_REMOTE, "shm: peer rank %d (pid %d) died",
				 c->base.peer, (int)c->pid);
	return WEFT_SUCCESS;
}

static inline bool conn_busy(const struct shm_conn *c)
{
	return c->sendq.head || c->cmaq.head || c->recvq.head;
}

/* After SHM_STALL_S without progress on a busy connection, look at the peer
 * (and again every SHM_STALL_S). The clock is read once per SHM_STALL_POLLS
 * idle polls only. */
static weft_status_t conn_stalled(struct shm_conn *c)
{
	if (++c->stall_polls < SHM_STALL_POLLS)
		return WEFT_SUCCESS;
	c->stall_polls = 0;
	double now = weft_now();
	if (c->stall_since == 0) {
		c->stall_since = now;
		return WEFT_SUCCESS;
	}
	if (now - c->stall_since < SHM_STALL_S)
		return WEFT_SUCCESS;
	c->stall_since = now;
	return check_peer(c);
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
		c->stall_polls = 0;
		c->stall_since = 0;
		return WEFT_SUCCESS;
	}
	return conn_busy(c) ? conn_stalled(c) : WEFT_SUCCESS;
}

weft_status_t weft_tp_shm_progress(struct weft_tp_comm *base)
{
	struct shm_tc *tc = weft_container_of(base, struct shm_tc, base);
	weft_status_t ret = WEFT_SUCCESS;
	for (int l = 0; l < tc->nlocal; l++) {
		struct shm_conn *c = &tc->conns[l];
		if (!c->connected || c->broken || !conn_busy(c))
			continue;
		weft_status_t st = conn_progress(c);
		if (st != WEFT_SUCCESS && ret == WEFT_SUCCESS)
			ret = st;
	}
	return ret;
}

/* --- Posting --- */

static weft_status_t post_broken(struct shm_conn *c, struct weft_msg *m)
{
	weft_status_t st = c->fail_status != WEFT_SUCCESS ? c->fail_status : WEFT_ERR_REMOTE;
	msg_finish(m, st);
	return st;
}

weft_status_t weft_tp_shm_isend(struct weft_conn *base, struct weft_msg *m)
{
	struct shm_conn *c = weft_container_of(base, struct shm_conn, base);
	m->done = false;
	m->status = WEFT_INPROGRESS;
	m->xferred = 0;
	m->tp_priv[0] = m->tp_priv[1] = 0;
	if (c->broken)
		return post_broken(c, m);
	bool idle = !c->sendq.head;
	q_push(&c->sendq, m);
	if (idle) /* latency: put it in a slot now rather than at the next progress */
		tx_push(c);
	return WEFT_SUCCESS;
}

weft_status_t weft_tp_shm_irecv(struct weft_conn *base, struct weft_msg *m)
{
	struct shm_conn *c = weft_container_of(base, struct shm_conn, base);
	m->done = false;
	m->status = WEFT_INPROGRESS;
	m->xferred = 0;
	m->tp_priv[0] = m->tp_priv[1] = 0;
	if (m->unit == 0)
		m->unit = 1;
	if (c->broken)
		return post_broken(c, m);
	bool idle = !c->recvq.head;
	q_push(&c->recvq, m);
	if (idle) {
		weft_status_t st = WEFT_SUCCESS;
		rx_pull(c, &st);
		return st;
	}
	return WEFT_SUCCESS;
}
