/*
 * verbs_qp.c — the verbs transport's registered regions and queue pairs,
 * and the primitives its message path (and the shared RMA protocol to
 * come) runs on: post an RDMA write, with or without immediate; post
 * receives for immediates; read completions. See verbs.h.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "transports/verbs/verbs.h"
#include "util/clock.h"
#include "util/log.h"

#define PAGE 4096u

/* wr_id: kind (8 bits) | connection (24 bits) | send queue number (32 bits) */
static inline uint64_t wr_id(enum verbs_wr_kind kind, int idx, uint64_t seq)
{
	return (uint64_t)kind << 56 | (uint64_t)(idx & 0xffffff) << 32 | (uint32_t)seq;
}

static size_t round_page(size_t n)
{
	return (n + PAGE - 1) / PAGE * PAGE;
}

/* A page-aligned region, faulted in now (registration pins it anyway). */
static unsigned char *map_region(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static weft_status_t reg(struct verbs_tp *tp, void *addr, size_t len, int access,
			 struct ibv_mr **mr, const char *what)
{
	*mr = tp->ibv->reg_mr(tp->pd, addr, len, access);
	if (*mr)
		return WEFT_SUCCESS;
	int e = errno;
	snprintf(tp->why, sizeof(tp->why), "ibv_reg_mr(%s, %zu bytes): %s%s", what, len,
		 strerror(e),
		 e == ENOMEM || e == EPERM ? " (the locked-memory limit, ulimit -l, may be too low)"
					   : "");
	return WEFT_ERR_NOT_SUPPORTED;
}

static weft_status_t map_regions(struct verbs_tp *tp)
{
	size_t ring = (size_t)tp->nslots * tp->stride;
	tp->land_len = round_page((size_t)tp->nconns * ring);
	tp->stage_len = tp->land_len;
	tp->ctl_len = round_page((size_t)tp->nconns * sizeof(struct verbs_ctl));
	tp->land = map_region(tp->land_len);
	tp->stage = map_region(tp->stage_len);
	tp->ctlr = map_region(tp->ctl_len);
	if (!tp->land || !tp->stage || !tp->ctlr) {
		snprintf(tp->why, sizeof(tp->why), "mmap of %zu bytes of rings: %s",
			 tp->land_len + tp->stage_len, strerror(errno));
		return WEFT_ERR_NOT_SUPPORTED;
	}
	int remote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	weft_status_t st = reg(tp, tp->land, tp->land_len, remote, &tp->land_mr, "landing slots");
	if (st == WEFT_SUCCESS)
		st = reg(tp, tp->stage, tp->stage_len, IBV_ACCESS_LOCAL_WRITE, &tp->stage_mr,
			 "staging slots");
	if (st == WEFT_SUCCESS)
		st = reg(tp, tp->ctlr, tp->ctl_len, remote, &tp->ctl_mr, "control lines");
	return st;
}

static weft_status_t create_qp(struct verbs_tp *tp, struct verbs_conn *c)
{
	struct ibv_qp_init_attr ia = {
	    .qp_context = c,
	    .send_cq = tp->cq,
	    .recv_cq = tp->cq,
	    .cap = {.max_send_wr = tp->sq_depth,
		    .max_recv_wr = tp->nslots,
		    .max_send_sge = 1,
		    .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC,
	};
	c->qp = tp->ibv->create_qp(tp->pd, &ia);
	if (!c->qp) {
		snprintf(tp->why, sizeof(tp->why), "ibv_create_qp (%u + %u entries): %s",
			 tp->sq_depth, tp->nslots, strerror(errno));
		return WEFT_ERR_NOT_SUPPORTED;
	}
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_INIT,
	    .pkey_index = 0,
	    .port_num = (uint8_t)tp->port.port,
	    .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};
	int err = tp->ibv->modify_qp(
	    c->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	/* Receives may be posted from INIT on: all of them now, before any
	 * peer can write. */
	if (!err)
		err = weft_verbs_post_recvs(c, tp->nslots);
	if (err) {
		snprintf(tp->why, sizeof(tp->why), "QP %u to INIT: %s", c->qp->qp_num,
			 strerror(err));
		return WEFT_ERR_NOT_SUPPORTED;
	}
	return WEFT_SUCCESS;
}

static void place_conn(struct verbs_tp *tp, struct verbs_conn *c)
{
	size_t ring = (size_t)tp->nslots * tp->stride;
	c->land = tp->land + (size_t)c->idx * ring;
	c->stage = tp->stage + (size_t)c->idx * ring;
	c->ctl = (struct verbs_ctl *)(tp->ctlr + (size_t)c->idx * sizeof(struct verbs_ctl));
	c->txr.nslots = c->rxr.nslots = tp->nslots;
	/* A credit write per quarter of the ring: fewer writes, and the sender
	 * never waits for more than a quarter of the slots. */
	c->rxr.credit_batch = tp->nslots >= 4 ? tp->nslots / 4 : 1;
}

weft_status_t weft_verbs_qp_setup(struct verbs_tp *tp)
{
	weft_status_t st = map_regions(tp);
	if (st != WEFT_SUCCESS)
		return st;
	tp->sq_depth = 2 * tp->nslots + 8;
	if (tp->max_wr && tp->sq_depth > tp->max_wr)
		tp->sq_depth = tp->max_wr;
	int cqe = tp->nconns * (int)(tp->sq_depth + tp->nslots) + 1;
	tp->cq = tp->ibv->create_cq(tp->ctx, cqe, NULL, NULL, 0);
	if (!tp->cq) {
		snprintf(tp->why, sizeof(tp->why), "ibv_create_cq(%d): %s", cqe, strerror(errno));
		return WEFT_ERR_NOT_SUPPORTED;
	}
	for (int i = 0; st == WEFT_SUCCESS && i < tp->nconns; i++) {
		place_conn(tp, &tp->conns[i]);
		st = create_qp(tp, &tp->conns[i]);
	}
	return st;
}

void weft_verbs_qp_teardown(struct verbs_tp *tp)
{
	const struct weft_ibv *ibv = tp->ibv;
	for (int i = 0; i < tp->nconns; i++)
		if (tp->conns[i].qp) {
			ibv->destroy_qp(tp->conns[i].qp);
			tp->conns[i].qp = NULL;
		}
	if (tp->cq && ibv->destroy_cq(tp->cq) != 0)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_NET, "verbs: ibv_destroy_cq: still in use");
	tp->cq = NULL;
	struct ibv_mr **mrs[] = {&tp->land_mr, &tp->stage_mr, &tp->ctl_mr};
	for (size_t i = 0; i < sizeof(mrs) / sizeof(mrs[0]); i++)
		if (*mrs[i]) {
			ibv->dereg_mr(*mrs[i]);
			*mrs[i] = NULL;
		}
	if (tp->land)
		munmap(tp->land, tp->land_len);
	if (tp->stage)
		munmap(tp->stage, tp->stage_len);
	if (tp->ctlr)
		munmap(tp->ctlr, tp->ctl_len);
	tp->land = tp->stage = tp->ctlr = NULL;
}

static int to_rtr(struct verbs_tp *tp, struct verbs_conn *c, const struct verbs_card *peer,
		  uint32_t qpn)
{
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_RTR,
	    .path_mtu =
		peer->mtu < tp->pattr.active_mtu ? (enum ibv_mtu)peer->mtu : tp->pattr.active_mtu,
	    .dest_qp_num = qpn,
	    .rq_psn = peer->psn,
	    .max_dest_rd_atomic = 1,
	    .min_rnr_timer = 12, /* 0.64 ms; never needed: receives are posted ahead */
	    .ah_attr = {.sl = tp->sl, .port_num = (uint8_t)tp->port.port},
	};
	if (tp->port.link == WEFT_VERBS_LINK_ETH) {
		/* RoCE: routed by the GRH; the traffic class carries the DSCP
		 * (tc >> 2) that puts the flow in the fabric's lossless,
		 * ECN-marked class. */
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)tp->gid.index;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.grh.traffic_class = tp->tc;
	} else {
		a.ah_attr.dlid = peer->lid; /* InfiniBand: within the subnet, by LID */
	}
	return tp->ibv->modify_qp(c->qp, &a,
				  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER);
}

int weft_verbs_qp_connect(struct verbs_tp *tp, struct verbs_conn *c, const struct verbs_card *peer,
			  uint32_t qpn)
{
	int err = to_rtr(tp, c, peer, qpn);
	if (err)
		return err;
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_RTS,
	    .timeout = tp->timeout,
	    .retry_cnt = tp->retry_cnt,
	    .rnr_retry = 7, /* "forever": receives are always posted ahead */
	    .sq_psn = tp->psn,
	    .max_rd_atomic = 1,
	};
	return tp->ibv->modify_qp(c->qp, &a,
				  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* ---- primitives ---- */

int weft_verbs_post_write(struct verbs_conn *c, enum verbs_wr_kind kind, const void *local,
			  uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey, bool imm,
			  uint32_t imm_value)
{
	/* Probes and state writes always find room: data and credits leave
	 * two entries free for them. */
	bool always = kind == VERBS_WR_PROBE || kind == VERBS_WR_STATE;
	uint32_t room = weft_verbs_sq_room(c);
	if (room == 0 || (!always && room <= 2))
		return EAGAIN;
	bool sig = always || c->sq_posted % VERBS_SIGNAL_EVERY == VERBS_SIGNAL_EVERY - 1 ||
		   room <= VERBS_SIGNAL_EVERY + 2;
	struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)local, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {
	    .wr_id = wr_id(kind, c->idx, c->sq_posted),
	    .sg_list = len ? &sge : NULL,
	    .num_sge = len ? 1 : 0,
	    .opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
	    .send_flags = sig ? IBV_SEND_SIGNALED : 0,
	    .imm_data = htonl(imm_value),
	    .wr.rdma = {.remote_addr = raddr, .rkey = rkey},
	};
	struct ibv_send_wr *bad = NULL;
	int err = ibv_post_send(c->qp, &wr, &bad); /* verbs.h inline: ctx->ops */
	if (err)
		return err;
	c->sq_posted++;
	return 0;
}

int weft_verbs_post_recvs(struct verbs_conn *c, uint32_t n)
{
	/* No scatter list: a write with immediate places its data by address
	 * and consumes the receive only for the immediate. */
	for (uint32_t i = 0; i < n; i++) {
		struct ibv_recv_wr wr = {.wr_id = wr_id(VERBS_WR_RECV, c->idx, 0)};
		struct ibv_recv_wr *bad = NULL;
		int err = ibv_post_recv(c->qp, &wr, &bad); /* verbs.h inline: ctx->ops */
		if (err)
			return err;
	}
	return 0;
}

/* A send completion (or its error) retires its request and every one
 * posted before it on the connection. */
static void retire(struct verbs_conn *c, uint32_t seq)
{
	uint64_t n = (uint32_t)(seq + 1 - (uint32_t)c->sq_done);
	if (n <= c->sq_posted - c->sq_done)
		c->sq_done += n;
}

static void dispatch(struct verbs_tp *tp, const struct ibv_wc *wc)
{
	enum verbs_wr_kind kind = (enum verbs_wr_kind)(wc->wr_id >> 56);
	uint32_t idx = (uint32_t)(wc->wr_id >> 32) & 0xffffff;
	if (idx >= (uint32_t)tp->nconns)
		return;
	struct verbs_conn *c = &tp->conns[idx];
	if (kind != VERBS_WR_RECV)
		retire(c, (uint32_t)wc->wr_id);
	if (kind == VERBS_WR_STATE)
		c->state_pending = false;
	if (wc->status != IBV_WC_SUCCESS)
		weft_verbs_on_error(c, kind, wc->status, wc->vendor_err);
	else if (kind == VERBS_WR_RECV)
		weft_verbs_on_recv(c, ntohl(wc->imm_data), wc->byte_len);
	else if (kind == VERBS_WR_PROBE)
		weft_verbs_on_probe(c);
}

int weft_verbs_poll(struct verbs_tp *tp)
{
	struct ibv_wc wc[VERBS_POLL_BATCH];
	int n = ibv_poll_cq(tp->cq, VERBS_POLL_BATCH, wc); /* verbs.h inline: ctx->ops */
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++)
		dispatch(tp, &wc[i]);
	return n;
}

void weft_verbs_qp_drain(struct verbs_tp *tp, double seconds)
{
	double end = weft_now() + seconds;
	for (;;) {
		bool busy = false;
		for (int i = 0; i < tp->nconns && !busy; i++)
			busy = tp->conns[i].state_pending;
		if (!busy || weft_now() > end || weft_verbs_poll(tp) < 0)
			return;
	}
}
