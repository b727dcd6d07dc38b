/*
 * fake_data.c — the fake libibverbs' data path: completion queues, posting
 * sends and receives, executing RDMA writes (with immediate) into a peer's
 * shared MR files, receive completions from the inbound ring, and the
 * waits and errors a real RC connection shows. See fake_ibverbs.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fake_ibverbs.h"
#include "util/proc.h"

/* A request that cannot be delivered yet (the peer is not there, not
 * ready, or addressed wrongly): it is retried until the QP's retry time. */
#define FAKE_WAIT (-1)

/* ---- completion queues ---- */

FAKE_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
					 struct ibv_comp_channel *channel, int comp_vector)
{
	struct fake_cq *cq = NULL;
	if (cqe < 1 || cqe > (1 << 22) || channel) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (cq)
		cq->ring = calloc((size_t)cqe, sizeof(*cq->ring));
	if (!cq || !cq->ring) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->cap = (uint32_t)cqe;
	cq->ibv.context = ctx;
	cq->ibv.cq_context = cq_context;
	cq->ibv.cqe = cqe;
	return &cq->ibv;
}

FAKE_EXPORT int ibv_destroy_cq(struct ibv_cq *ibv)
{
	struct fake_cq *cq = (struct fake_cq *)ibv;
	if (cq->users)
		return EBUSY;
	free(cq->ring);
	free(cq);
	return 0;
}

bool fake_cq_push(struct fake_cq *cq, const struct ibv_wc *wc, struct fake_qp *sq_of,
		  uint64_t sq_idx)
{
	if (cq->head - cq->tail >= cq->cap) {
		if (!cq->overrun)
			fprintf(stderr, "fake ibverbs (pid %d): CQ overrun (%u entries)\n",
				(int)getpid(), cq->cap);
		cq->overrun = true;
		return false;
	}
	struct fake_cqe *e = &cq->ring[cq->head++ % cq->cap];
	e->wc = *wc;
	e->sq_of = sq_of;
	e->sq_idx = sq_idx;
	return true;
}

/* ---- the peer ---- */

static struct fake_qp_file *map_peer(struct fake_qp *qp)
{
	if (qp->peer)
		return qp->peer;
	char name[64];
	snprintf(name, sizeof(name), "/" FAKE_SHM_PREFIX "qp-%u", qp->file->dest_qpn);
	int fd = shm_open(name, O_RDWR, 0);
	if (fd < 0)
		return NULL;
	void *map =
	    mmap(NULL, sizeof(struct fake_qp_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return NULL;
	qp->peer = map;
	if (qp->peer->magic != FAKE_QP_MAGIC) {
		munmap(map, sizeof(struct fake_qp_file));
		qp->peer = NULL;
	}
	return qp->peer;
}

/* Why a packet from @p qp would not be accepted by its peer now, or NULL. */
static const char *not_ready(struct fake_qp *qp, double now)
{
	struct fake_qp_file *me = qp->file, *p = map_peer(qp);
	if (!p)
		return "no QP with the destination number";
	if (now - qp->peer_seen > FAKE_PEER_RECHECK) {
		if (!weft_pid_alive(p->pid))
			return "the peer's process is dead";
		qp->peer_seen = now;
	}
	uint32_t st = atomic_load_explicit(&p->state, memory_order_acquire);
	if (st != IBV_QPS_RTR && st != IBV_QPS_RTS)
		return "the peer QP is not in RTR or RTS";
	if (p->dest_qpn != me->qpn)
		return "the peer QP is connected to another QP";
	if (p->link_layer != me->link_layer)
		return "link layers differ";
	if (me->link_layer == IBV_LINK_LAYER_ETHERNET &&
	    (memcmp(p->sgid, me->dgid, 16) != 0 || memcmp(me->sgid, p->dgid, 16) != 0))
		return "the GIDs do not match (dgid here vs sgid there, or the reverse)";
	if (me->link_layer == IBV_LINK_LAYER_INFINIBAND &&
	    (p->slid != me->dlid || me->slid != p->dlid))
		return "the LIDs do not match";
	if (p->rq_psn != me->sq_psn)
		return "the peer expects another PSN";
	if (p->mtu != me->mtu)
		return "the path MTUs differ";
	return NULL;
}

static struct fake_rmr *remote_mr(struct fake_qp *qp, uint32_t rkey)
{
	for (int i = 0; i < qp->nrmr; i++)
		if (qp->rmr[i].rkey == rkey)
			return &qp->rmr[i];
	if (qp->nrmr == FAKE_RMR_CACHE) {
		munmap(qp->rmr[0].hdr, qp->rmr[0].maplen);
		memmove(&qp->rmr[0], &qp->rmr[1], sizeof(qp->rmr[0]) * (FAKE_RMR_CACHE - 1));
		qp->nrmr--;
	}
	char name[96];
	snprintf(name, sizeof(name), "/" FAKE_SHM_PREFIX "mr-%d-%u", (int)qp->peer->pid, rkey);
	int fd = shm_open(name, O_RDWR, 0);
	struct stat st;
	if (fd < 0)
		return NULL;
	void *map = MAP_FAILED;
	if (fstat(fd, &st) == 0 && st.st_size >= FAKE_PAGE)
		map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return NULL;
	struct fake_rmr *r = &qp->rmr[qp->nrmr++];
	*r = (struct fake_rmr){.rkey = rkey, .hdr = map, .maplen = (size_t)st.st_size};
	return r;
}

/* ---- executing one write ---- */

static int local_source(const struct fake_qp *qp, const struct fake_swr *w)
{
	if (w->flags & IBV_SEND_INLINE)
		return IBV_WC_SUCCESS;
	for (int i = 0; i < w->nsge; i++) {
		const struct ibv_sge *s = &w->sge[i];
		const struct fake_mr *m = fake_mr_find(s->lkey);
		uint64_t lo = (uint64_t)(uintptr_t)(m ? m->ibv.addr : NULL);
		if (!m || m->pd != qp->pd || s->addr < lo ||
		    s->addr + s->length > lo + m->ibv.length)
			return IBV_WC_LOC_PROT_ERR;
	}
	return IBV_WC_SUCCESS;
}

/* The peer's MR for @p w, checked (key, PD, rights, range), or NULL. */
static const struct fake_mr_file *remote_mr_for(struct fake_qp *qp, const struct fake_swr *w)
{
	const struct fake_qp_file *p = qp->peer;
	struct fake_rmr *r = remote_mr(qp, w->rkey);
	if (!r)
		return NULL;
	const struct fake_mr_file *h = r->hdr;
	if (!atomic_load(&h->valid) || h->pd_id != p->pd_id ||
	    !(h->access & IBV_ACCESS_REMOTE_WRITE) || !(p->access & IBV_ACCESS_REMOTE_WRITE) ||
	    w->raddr < h->addr || w->raddr + w->len > h->addr + h->len)
		return NULL;
	return h;
}

static void copy_out(unsigned char *dst, const struct fake_swr *w)
{
	if (w->flags & IBV_SEND_INLINE) {
		memcpy(dst, w->inl, w->len);
		return;
	}
	for (int i = 0; i < w->nsge; i++) {
		memcpy(dst, (const void *)(uintptr_t)w->sge[i].addr, w->sge[i].length);
		dst += w->sge[i].length;
	}
}

/* Into the owner's own memory: IBV_WC_SUCCESS, FAKE_WAIT (it died), or an
 * access error. */
static int cma_write(const struct fake_mr_file *h, const struct fake_swr *w)
{
	struct iovec local[FAKE_MAX_SGE];
	int n = 0;
	if (w->flags & IBV_SEND_INLINE)
		local[n++] = (struct iovec){(void *)w->inl, w->len};
	else
		for (; n < w->nsge; n++)
			local[n] =
			    (struct iovec){(void *)(uintptr_t)w->sge[n].addr, w->sge[n].length};
	struct iovec remote = {(void *)(uintptr_t)w->raddr, w->len};
	ssize_t k = process_vm_writev(h->pid, local, (unsigned long)n, &remote, 1, 0);
	if (k == (ssize_t)w->len)
		return IBV_WC_SUCCESS;
	if (k < 0 && errno == ESRCH)
		return FAKE_WAIT;
	fprintf(stderr, "fake ibverbs (pid %d): process_vm_writev to pid %d: %s\n", (int)getpid(),
		(int)h->pid, k < 0 ? strerror(errno) : "short write");
	return IBV_WC_REM_ACCESS_ERR;
}

/* IBV_WC_SUCCESS, another status, or FAKE_WAIT. */
static int execute(struct fake_qp *qp, const struct fake_swr *w, double now)
{
	const char *why = not_ready(qp, now);
	if (why) {
		if (!qp->told)
			fake_debug("QP %u -> %u waits: %s", qp->ibv.qp_num, qp->file->dest_qpn,
				   why);
		qp->told = true;
		return FAKE_WAIT;
	}
	qp->told = false;
	int st = local_source(qp, w);
	if (st != IBV_WC_SUCCESS)
		return st;
	struct fake_qp_file *p = qp->peer;
	bool imm = w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	uint64_t head = atomic_load_explicit(&p->in_head, memory_order_relaxed);
	if (imm && head - atomic_load_explicit(&p->in_tail, memory_order_acquire) >= FAKE_INBOUND)
		return FAKE_WAIT; /* the receiver is behind: receiver-not-ready */
	if (w->len) {		  /* zero-length writes check no key, as on hardware */
		const struct fake_mr_file *h = remote_mr_for(qp, w);
		if (!h)
			return IBV_WC_REM_ACCESS_ERR;
		if (h->cma) {
			st = cma_write(h, w);
			if (st != IBV_WC_SUCCESS)
				return st;
		} else {
			copy_out((unsigned char *)h + FAKE_PAGE + (w->raddr - h->base), w);
		}
	}
	if (imm) {
		p->in[head % FAKE_INBOUND] = (struct fake_inbound){.imm = w->imm, .len = w->len};
		atomic_store_explicit(&p->in_head, head + 1, memory_order_release);
	} else {
		atomic_thread_fence(memory_order_release);
	}
	return IBV_WC_SUCCESS;
}

static double retry_time(const struct fake_qp *qp)
{
	if (qp->file->timeout == 0) /* 0 is "wait forever" */
		return 1e30;
	return 4.096e-6 * (double)(1ull << qp->file->timeout) * (qp->file->retry_cnt + 1);
}

static void fail_qp(struct fake_qp *qp, const struct fake_swr *w, int status)
{
	fake_debug("QP %u: write to QP %u failed: %s", qp->ibv.qp_num, qp->file->dest_qpn,
		   ibv_wc_status_str(status));
	struct ibv_wc wc = {.wr_id = w->wr_id,
			    .status = status,
			    .opcode = IBV_WC_RDMA_WRITE,
			    .qp_num = qp->ibv.qp_num};
	fake_cq_push(qp->scq, &wc, qp, qp->sq_exec);
	qp->sq_exec++;
	qp->ibv.state = IBV_QPS_ERR;
	atomic_store_explicit(&qp->file->state, IBV_QPS_ERR, memory_order_release);
	fake_qp_flush(qp);
}

/* A QP with a path rate (FAKE_IBVERBS_QP_RATE, FAKE_IBVERBS_SLOW_QP): may
 * its head write @p w go at @p now? Its time is set when it first reaches
 * the head. */
static bool path_ready(struct fake_qp *qp, const struct fake_swr *w, double now)
{
	if (qp->path_Bps <= 0)
		return true;
	if (qp->path_due == 0)
		qp->path_due = (now > qp->path_free ? now : qp->path_free) + w->len / qp->path_Bps;
	return now >= qp->path_due;
}

/* Execute the waiting requests of @p qp in order. */
static void progress_qp(struct fake_qp *qp, double now)
{
	if (qp->ibv.state == IBV_QPS_ERR) {
		fake_qp_flush(qp);
		return;
	}
	while (qp->sq_exec < qp->sq_posted) {
		const struct fake_swr *w = &qp->sq[qp->sq_exec % qp->cap.max_send_wr];
		if (!path_ready(qp, w, now))
			return;
		int st = execute(qp, w, now);
		if (st == FAKE_WAIT) {
			if (qp->stuck_since == 0)
				qp->stuck_since = now;
			if (now - qp->stuck_since < retry_time(qp))
				return;
			st = IBV_WC_RETRY_EXC_ERR;
		}
		qp->stuck_since = 0;
		if (qp->path_due > 0)
			qp->path_free = qp->path_due;
		qp->path_due = 0;
		if (st != IBV_WC_SUCCESS) {
			fail_qp(qp, w, st);
			return;
		}
		if (qp->sig_all || (w->flags & IBV_SEND_SIGNALED)) {
			struct ibv_wc wc = {.wr_id = w->wr_id,
					    .opcode = IBV_WC_RDMA_WRITE,
					    .byte_len = w->len,
					    .qp_num = qp->ibv.qp_num};
			fake_cq_push(qp->scq, &wc, qp, qp->sq_exec);
		}
		qp->sq_exec++;
	}
}

void fake_progress_all(void)
{
	double now = fake_now();
	for (struct fake_qp *qp = fake_qps; qp; qp = qp->next)
		if (qp->sq_exec < qp->sq_posted || qp->ibv.state == IBV_QPS_ERR)
			progress_qp(qp, now);
}

/* Writes with immediate that reached @p qp become receive completions,
 * one posted receive each. */
static void receive(struct fake_qp *qp)
{
	struct fake_qp_file *f = qp->file;
	uint64_t head = atomic_load_explicit(&f->in_head, memory_order_acquire);
	uint64_t tail = atomic_load_explicit(&f->in_tail, memory_order_relaxed);
	if (qp->ibv.state == IBV_QPS_ERR) { /* dropped, as a QP in error drops packets */
		atomic_store_explicit(&f->in_tail, head, memory_order_release);
		return;
	}
	struct fake_cq *cq = qp->rcq;
	for (; tail < head && qp->rq_tail < qp->rq_head && cq->head - cq->tail < cq->cap; tail++) {
		const struct fake_inbound *e = &f->in[tail % FAKE_INBOUND];
		struct ibv_wc wc = {.wr_id = qp->rq[qp->rq_tail++ % qp->cap.max_recv_wr],
				    .status = IBV_WC_SUCCESS,
				    .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
				    .wc_flags = IBV_WC_WITH_IMM,
				    .imm_data = e->imm,
				    .byte_len = e->len,
				    .qp_num = qp->ibv.qp_num,
				    .src_qp = f->dest_qpn};
		fake_cq_push(cq, &wc, NULL, 0);
	}
	atomic_store_explicit(&f->in_tail, tail, memory_order_release);
}

/* ---- the ops the inline wrappers of verbs.h call ---- */

static int check_send(const struct fake_qp *qp, const struct ibv_send_wr *wr, uint32_t *len)
{
	if (qp->ibv.state != IBV_QPS_RTS && qp->ibv.state != IBV_QPS_ERR)
		return EINVAL;
	if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
		fake_debug("opcode %d is not implemented", wr->opcode);
		return EINVAL;
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge)
		return EINVAL;
	if (qp->sq_posted - qp->sq_retired >= qp->cap.max_send_wr)
		return ENOMEM;
	uint64_t total = 0;
	for (int i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if ((wr->send_flags & IBV_SEND_INLINE) && total > qp->cap.max_inline_data)
		return EINVAL;
	if (total > (1ull << 31))
		return EINVAL;
	*len = (uint32_t)total;
	return 0;
}

int fake_post_send(struct ibv_qp *ibv, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct fake_qp *qp = (struct fake_qp *)ibv;
	int err = 0;
	pthread_mutex_lock(&fake_lock);
	for (; wr; wr = wr->next) {
		uint32_t len = 0;
		if ((err = check_send(qp, wr, &len)) != 0)
			break;
		struct fake_swr *w = &qp->sq[qp->sq_posted % qp->cap.max_send_wr];
		*w = (struct fake_swr){.wr_id = wr->wr_id,
				       .opcode = wr->opcode,
				       .flags = wr->send_flags,
				       .imm = wr->imm_data,
				       .raddr = wr->wr.rdma.remote_addr,
				       .rkey = wr->wr.rdma.rkey,
				       .nsge = wr->num_sge,
				       .len = len};
		if (wr->send_flags & IBV_SEND_INLINE) {
			unsigned char *p = w->inl;
			for (int i = 0; i < wr->num_sge; i++) {
				memcpy(p, (const void *)(uintptr_t)wr->sg_list[i].addr,
				       wr->sg_list[i].length);
				p += wr->sg_list[i].length;
			}
		} else if (wr->num_sge) {
			memcpy(w->sge, wr->sg_list, sizeof(*wr->sg_list) * (size_t)wr->num_sge);
		}
		qp->sq_posted++;
	}
	if (err && bad)
		*bad = wr;
	progress_qp(qp, fake_now());
	pthread_mutex_unlock(&fake_lock);
	return err;
}

int fake_post_recv(struct ibv_qp *ibv, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct fake_qp *qp = (struct fake_qp *)ibv;
	int err = 0;
	pthread_mutex_lock(&fake_lock);
	for (; wr; wr = wr->next) {
		if (qp->ibv.state == IBV_QPS_RESET || wr->num_sge < 0 ||
		    (uint32_t)wr->num_sge > qp->cap.max_recv_sge) {
			err = EINVAL;
			break;
		}
		if (qp->rq_head - qp->rq_tail >= qp->cap.max_recv_wr) {
			err = ENOMEM;
			break;
		}
		qp->rq[qp->rq_head++ % qp->cap.max_recv_wr] = wr->wr_id;
	}
	if (err && bad)
		*bad = wr;
	pthread_mutex_unlock(&fake_lock);
	return err;
}

int fake_poll_cq(struct ibv_cq *ibv, int n, struct ibv_wc *wc)
{
	struct fake_cq *cq = (struct fake_cq *)ibv;
	pthread_mutex_lock(&fake_lock);
	fake_progress_all();
	for (struct fake_qp *qp = fake_qps; qp; qp = qp->next)
		if (qp->rcq == cq)
			receive(qp);
	int got = -1;
	if (!cq->overrun)
		for (got = 0; got < n && cq->tail < cq->head; got++) {
			struct fake_cqe *e = &cq->ring[cq->tail++ % cq->cap];
			wc[got] = e->wc;
			if (e->sq_of && e->sq_of->sq_retired < e->sq_idx + 1)
				e->sq_of->sq_retired = e->sq_idx + 1;
		}
	pthread_mutex_unlock(&fake_lock);
	return got;
}
