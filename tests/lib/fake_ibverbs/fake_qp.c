/*
 * fake_qp.c — the fake libibverbs' RC queue pairs: creation with their
 * /dev/shm file, the state machine RESET -> INIT -> RTR -> RTS (and ERR,
 * RESET from anywhere) with the attribute masks each step requires, flush,
 * and destruction. See fake_ibverbs.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_ibverbs.h"

static uint32_t qp_counter;
static unsigned qps_created;

/* A rate in bytes per second from @p v, or -1 when it is not one. */
static double parse_rate(const char *v, const char *name, const char *whole)
{
	char *end = NULL;
	double rate = strtod(v, &end);
	if (end == v || *end || !(rate > 0)) {
		fprintf(stderr, "fake ibverbs: %s=%s: expected %s\n", name, whole,
			strcmp(name, "FAKE_IBVERBS_QP_RATE") ? "N:RATE" : "RATE (bytes/s)");
		return -1;
	}
	return rate;
}

/* The rate of the QP created @p index-th: FAKE_IBVERBS_SLOW_QP=N:RATE for
 * the N-th, else FAKE_IBVERBS_QP_RATE, else 0 (not paced); -1 when a value
 * is malformed. */
static double path_rate(unsigned index)
{
	const char *slow = getenv("FAKE_IBVERBS_SLOW_QP"), *all = getenv("FAKE_IBVERBS_QP_RATE");
	double base = all && *all ? parse_rate(all, "FAKE_IBVERBS_QP_RATE", all) : 0;
	if (base < 0 || !slow || !*slow)
		return base;
	char *end = NULL;
	unsigned long n = strtoul(slow, &end, 10);
	if (end == slow || *end != ':')
		return parse_rate("", "FAKE_IBVERBS_SLOW_QP", slow);
	double rate = parse_rate(end + 1, "FAKE_IBVERBS_SLOW_QP", slow);
	return rate < 0 || n == index ? rate : base;
}

struct fake_qp *fake_qp_by_num(uint32_t qpn)
{
	for (struct fake_qp *q = fake_qps; q; q = q->next)
		if (q->ibv.qp_num == qpn)
			return q;
	return NULL;
}

/* A QP number nobody on this host uses: its file is created exclusively. */
static int create_file(struct fake_qp *qp)
{
	uint32_t seed = (uint32_t)getpid() * 2654435761u;
	for (int tries = 0; tries < 1000; tries++) {
		uint32_t qpn = (seed + ++qp_counter * 7919u) & 0xffffffu;
		if (qpn < 2)
			continue;
		snprintf(qp->path, sizeof(qp->path), "/" FAKE_SHM_PREFIX "qp-%u", qpn);
		int fd = shm_open(qp->path, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fd < 0 && errno == EEXIST)
			continue;
		if (fd < 0)
			return errno;
		void *map = MAP_FAILED;
		if (ftruncate(fd, sizeof(struct fake_qp_file)) == 0)
			map = mmap(NULL, sizeof(struct fake_qp_file), PROT_READ | PROT_WRITE,
				   MAP_SHARED, fd, 0);
		int err = map == MAP_FAILED ? errno : 0;
		close(fd);
		if (err) {
			shm_unlink(qp->path);
			return err;
		}
		qp->file = map;
		qp->file->pid = (int32_t)getpid();
		qp->file->qpn = qpn;
		qp->file->pd_id = qp->pd->id;
		atomic_store(&qp->file->state, IBV_QPS_RESET);
		qp->file->magic = FAKE_QP_MAGIC;
		qp->ibv.qp_num = qpn;
		return 0;
	}
	return EAGAIN;
}

static int check_caps(const struct ibv_qp_init_attr *a)
{
	const struct ibv_qp_cap *c = &a->cap;
	if (a->qp_type != IBV_QPT_RC || !a->send_cq || !a->recv_cq || a->srq)
		return EINVAL;
	if (c->max_send_wr < 1 || c->max_send_wr > FAKE_MAX_WR || c->max_recv_wr < 1 ||
	    c->max_recv_wr > FAKE_MAX_WR || c->max_send_sge > FAKE_MAX_SGE ||
	    c->max_recv_sge > FAKE_MAX_SGE || c->max_inline_data > FAKE_MAX_INLINE)
		return EINVAL;
	return 0;
}

FAKE_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *ibv_pd, struct ibv_qp_init_attr *a)
{
	int err = check_caps(a);
	struct fake_qp *qp = err ? NULL : calloc(1, sizeof(*qp));
	if (!err && !qp)
		err = ENOMEM;
	if (qp) {
		qp->sq = calloc(a->cap.max_send_wr, sizeof(*qp->sq));
		qp->rq = calloc(a->cap.max_recv_wr, sizeof(*qp->rq));
		if (!qp->sq || !qp->rq)
			err = ENOMEM;
	}
	pthread_mutex_lock(&fake_lock);
	if (!err) {
		qp->index = qps_created;
		qp->path_Bps = path_rate(qp->index);
		err = qp->path_Bps < 0 ? EINVAL : 0;
	}
	if (!err) {
		qp->pd = (struct fake_pd *)ibv_pd;
		err = create_file(qp);
	}
	if (err) {
		pthread_mutex_unlock(&fake_lock);
		if (qp) {
			free(qp->sq);
			free(qp->rq);
		}
		free(qp);
		errno = err;
		return NULL;
	}
	qp->cap = a->cap;
	qp->sig_all = a->sq_sig_all != 0;
	qp->scq = (struct fake_cq *)a->send_cq;
	qp->rcq = (struct fake_cq *)a->recv_cq;
	qp->scq->users++;
	qp->rcq->users++;
	qp->pd->users++;
	qp->ibv.context = ibv_pd->context;
	qp->ibv.qp_context = a->qp_context;
	qp->ibv.pd = ibv_pd;
	qp->ibv.send_cq = a->send_cq;
	qp->ibv.recv_cq = a->recv_cq;
	qp->ibv.state = IBV_QPS_RESET;
	qp->ibv.qp_type = IBV_QPT_RC;
	qp->ibv.handle = qp->ibv.qp_num;
	qp->next = fake_qps;
	fake_qps = qp;
	qps_created++;
	pthread_mutex_unlock(&fake_lock);
	return &qp->ibv;
}

static struct fake_dev *dev_of(const struct fake_qp *qp)
{
	return ((struct fake_ctx *)qp->ibv.context)->dev;
}

static bool has(int mask, int need)
{
	return (mask & need) == need;
}

static int to_init(struct fake_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	struct fake_dev *d = dev_of(qp);
	if (qp->ibv.state == IBV_QPS_RESET &&
	    !has(mask, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return EINVAL;
	if (mask & IBV_QP_PORT) {
		if (a->port_num < 1 || a->port_num > d->nports)
			return EINVAL;
		qp->file->port = a->port_num;
		qp->file->link_layer = (uint32_t)d->port[a->port_num].link_layer;
	}
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
		return EINVAL;
	if (mask & IBV_QP_ACCESS_FLAGS)
		qp->file->access = (uint32_t)a->qp_access_flags;
	return 0;
}

/* The address vector: RoCE needs a GRH with a source GID of the port;
 * InfiniBand needs a destination LID. */
static int set_av(struct fake_qp *qp, const struct ibv_ah_attr *ah)
{
	struct fake_qp_file *f = qp->file;
	const struct fake_port *pt = &dev_of(qp)->port[f->port];
	if (ah->port_num != f->port)
		return EINVAL;
	bool roce = pt->link_layer == IBV_LINK_LAYER_ETHERNET;
	if (roce && !ah->is_global)
		return EINVAL;
	if (!roce && ah->dlid == 0)
		return EINVAL;
	union ibv_gid sgid = {0};
	if (ah->is_global) {
		static const uint8_t zero[16];
		if (fake_port_gid(dev_of(qp), (int)f->port, ah->grh.sgid_index, &sgid) != 0 ||
		    memcmp(sgid.raw, zero, 16) == 0)
			return EINVAL;
		memcpy(f->dgid, ah->grh.dgid.raw, 16);
		f->traffic_class = ah->grh.traffic_class;
		f->hop_limit = ah->grh.hop_limit;
	}
	memcpy(f->sgid, sgid.raw, 16);
	f->sgid_index = ah->grh.sgid_index;
	f->is_global = ah->is_global;
	f->slid = pt->lid;
	f->dlid = ah->dlid;
	f->sl = ah->sl;
	return 0;
}

static int to_rtr(struct fake_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	if (!has(mask, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return EINVAL;
	struct fake_port *pt = &dev_of(qp)->port[qp->file->port];
	enum ibv_mtu active =
	    pt->link_layer == IBV_LINK_LAYER_INFINIBAND ? IBV_MTU_4096 : IBV_MTU_1024;
	if (a->path_mtu < IBV_MTU_256 || a->path_mtu > active || a->dest_qp_num > 0xffffff ||
	    a->rq_psn > 0xffffff)
		return EINVAL;
	int err = set_av(qp, &a->ah_attr);
	if (err)
		return err;
	qp->file->dest_qpn = a->dest_qp_num;
	qp->file->rq_psn = a->rq_psn;
	qp->file->mtu = a->path_mtu;
	return 0;
}

static int to_rts(struct fake_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	if (qp->ibv.state == IBV_QPS_RTR &&
	    !has(mask, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			   IBV_QP_MAX_QP_RD_ATOMIC))
		return EINVAL;
	if (((mask & IBV_QP_TIMEOUT) && a->timeout > 31) ||
	    ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7) ||
	    ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7) ||
	    ((mask & IBV_QP_SQ_PSN) && a->sq_psn > 0xffffff))
		return EINVAL;
	if (mask & IBV_QP_TIMEOUT)
		qp->file->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		qp->file->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		qp->file->rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_SQ_PSN)
		qp->file->sq_psn = a->sq_psn;
	return 0;
}

static void forget_peer(struct fake_qp *qp)
{
	for (int i = 0; i < qp->nrmr; i++)
		munmap(qp->rmr[i].hdr, qp->rmr[i].maplen);
	qp->nrmr = 0;
	if (qp->peer)
		munmap(qp->peer, sizeof(*qp->peer));
	qp->peer = NULL;
	qp->stuck_since = 0;
}

/* Everything posted completes with IBV_WC_WR_FLUSH_ERR. */
void fake_qp_flush(struct fake_qp *qp)
{
	for (; qp->sq_exec < qp->sq_posted; qp->sq_exec++) {
		const struct fake_swr *w = &qp->sq[qp->sq_exec % qp->cap.max_send_wr];
		struct ibv_wc wc = {.wr_id = w->wr_id,
				    .status = IBV_WC_WR_FLUSH_ERR,
				    .opcode = IBV_WC_RDMA_WRITE,
				    .qp_num = qp->ibv.qp_num};
		fake_cq_push(qp->scq, &wc, qp, qp->sq_exec);
	}
	for (; qp->rq_tail < qp->rq_head; qp->rq_tail++) {
		struct ibv_wc wc = {.wr_id = qp->rq[qp->rq_tail % qp->cap.max_recv_wr],
				    .status = IBV_WC_WR_FLUSH_ERR,
				    .opcode = IBV_WC_RECV,
				    .qp_num = qp->ibv.qp_num};
		fake_cq_push(qp->rcq, &wc, NULL, 0);
	}
}

static int transition(struct fake_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	enum ibv_qp_state cur = qp->ibv.state, next = a->qp_state;
	if ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state != cur)
		return EINVAL;
	if (next == IBV_QPS_RESET) { /* emptied without completions */
		qp->sq_posted = qp->sq_exec = qp->sq_retired = 0;
		qp->rq_head = qp->rq_tail = 0;
		forget_peer(qp);
		return 0;
	}
	if (next == IBV_QPS_ERR)
		return 0;
	if ((cur == IBV_QPS_RESET || cur == IBV_QPS_INIT) && next == IBV_QPS_INIT)
		return to_init(qp, a, mask);
	if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR)
		return to_rtr(qp, a, mask);
	if ((cur == IBV_QPS_RTR || cur == IBV_QPS_RTS) && next == IBV_QPS_RTS)
		return to_rts(qp, a, mask);
	return EINVAL;
}

FAKE_EXPORT int ibv_modify_qp(struct ibv_qp *ibv, struct ibv_qp_attr *a, int mask)
{
	struct fake_qp *qp = (struct fake_qp *)ibv;
	if (!(mask & IBV_QP_STATE))
		return EINVAL;
	pthread_mutex_lock(&fake_lock);
	int err = transition(qp, a, mask);
	if (!err) {
		fake_debug("QP %u: %d -> %d", ibv->qp_num, ibv->state, a->qp_state);
		qp->ibv.state = a->qp_state;
		atomic_store_explicit(&qp->file->state, (uint32_t)a->qp_state,
				      memory_order_release);
		if (a->qp_state == IBV_QPS_ERR)
			fake_qp_flush(qp);
	}
	pthread_mutex_unlock(&fake_lock);
	return err;
}

FAKE_EXPORT int ibv_destroy_qp(struct ibv_qp *ibv)
{
	struct fake_qp *qp = (struct fake_qp *)ibv;
	pthread_mutex_lock(&fake_lock);
	for (struct fake_qp **p = &fake_qps; *p; p = &(*p)->next)
		if (*p == qp) {
			*p = qp->next;
			break;
		}
	/* Completions still in the CQs must not retire a freed queue. */
	struct fake_cq *cqs[2] = {qp->scq, qp->rcq};
	for (int k = 0; k < 2; k++)
		for (uint64_t i = cqs[k]->tail; i < cqs[k]->head; i++)
			if (cqs[k]->ring[i % cqs[k]->cap].sq_of == qp)
				cqs[k]->ring[i % cqs[k]->cap].sq_of = NULL;
	atomic_store_explicit(&qp->file->state, FAKE_QPS_GONE, memory_order_release);
	munmap(qp->file, sizeof(*qp->file));
	shm_unlink(qp->path);
	forget_peer(qp);
	qp->scq->users--;
	qp->rcq->users--;
	qp->pd->users--;
	pthread_mutex_unlock(&fake_lock);
	free(qp->sq);
	free(qp->rq);
	free(qp);
	return 0;
}
