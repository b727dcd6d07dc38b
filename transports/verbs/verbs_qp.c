/*
 * verbs_qp.c — the verbs transport's queue pairs and state lines, and the
 * primitives the shared RMA protocol runs on (verbs_rma.c hands them to
 * it): post a signaled RDMA write with immediate, post receives for
 * immediates, read completions. See verbs.h.
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

static size_t round_page(size_t n)
{
	return (n + PAGE - 1) / PAGE * PAGE;
}

/* One state line per peer, registered for the peers' writes. */
static weft_status_t map_ctl(struct verbs_tp *tp)
{
	tp->ctl_len = round_page((size_t)tp->nconns * sizeof(struct verbs_ctl));
	void *p = mmap(NULL, tp->ctl_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED) {
		snprintf(tp->why, sizeof(tp->why), "mmap of %zu bytes of state lines: %s",
			 tp->ctl_len, strerror(errno));
		return WEFT_ERR_NOT_SUPPORTED;
	}
	tp->ctlr = p;
	tp->ctl_mr = tp->ibv->reg_mr(tp->pd, tp->ctlr, tp->ctl_len,
				     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (tp->ctl_mr)
		return WEFT_SUCCESS;
	snprintf(tp->why, sizeof(tp->why), "ibv_reg_mr(state lines, %zu bytes): %s", tp->ctl_len,
		 strerror(errno));
	return WEFT_ERR_NOT_SUPPORTED;
}

static weft_status_t create_qp(struct verbs_tp *tp, struct verbs_conn *c, struct verbs_lane *l)
{
	struct ibv_qp_init_attr ia = {
	    .qp_context = c,
	    .send_cq = tp->cq,
	    .recv_cq = tp->cq,
	    .cap = {.max_send_wr = tp->sq_depth,
		    .max_recv_wr = tp->rq_depth,
		    .max_send_sge = 1,
		    .max_recv_sge = 1},
	    .qp_type = IBV_QPT_RC,
	};
	l->qp = tp->ibv->create_qp(tp->pd, &ia);
	if (!l->qp) {
		snprintf(tp->why, sizeof(tp->why), "ibv_create_qp (%u + %u entries): %s",
			 tp->sq_depth, tp->rq_depth, strerror(errno));
		return WEFT_ERR_NOT_SUPPORTED;
	}
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_INIT,
	    .pkey_index = 0,
	    .port_num = (uint8_t)tp->port.port,
	    .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};
	int err = tp->ibv->modify_qp(
	    l->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	/* The protocol posts the receives when it joins the peer (from INIT
	 * on they may be posted), before any peer can write. */
	if (err) {
		snprintf(tp->why, sizeof(tp->why), "QP %u to INIT: %s", l->qp->qp_num,
			 strerror(err));
		return WEFT_ERR_NOT_SUPPORTED;
	}
	return WEFT_SUCCESS;
}

weft_status_t weft_verbs_qp_setup(struct verbs_tp *tp)
{
	weft_status_t st = map_ctl(tp);
	if (st != WEFT_SUCCESS)
		return st;
	/* Every write the protocol can have in flight to one peer is bounded
	 * by what it can have landing there: the same depth both ways, plus
	 * the state write. Any lane may take all of a connection's data
	 * writes, so each gets the whole depth (receives cost no memory but
	 * their entries). */
	tp->rq_depth = weft_rma_imm_depth(&tp->geom);
	tp->sq_depth = tp->rq_depth + 1;
	if (tp->max_wr && tp->sq_depth > tp->max_wr)
		tp->sq_depth = tp->max_wr;
	if (tp->max_wr && tp->rq_depth > tp->max_wr) {
		snprintf(tp->why, sizeof(tp->why),
			 "the device takes %u work requests per queue, the protocol needs %u "
			 "(fewer WEFT_IB_SLOTS)",
			 tp->max_wr, tp->rq_depth);
		return WEFT_ERR_NOT_SUPPORTED;
	}
	int cqe = tp->nconns * (int)(tp->nlanes * (tp->sq_depth + tp->rq_depth)) + 1;
	tp->cq = tp->ibv->create_cq(tp->ctx, cqe, NULL, NULL, 0);
	if (!tp->cq) {
		snprintf(tp->why, sizeof(tp->why), "ibv_create_cq(%d): %s", cqe, strerror(errno));
		return WEFT_ERR_NOT_SUPPORTED;
	}
	for (int i = 0; st == WEFT_SUCCESS && i < tp->nconns; i++) {
		struct verbs_conn *c = &tp->conns[i];
		c->ctl = (struct verbs_ctl *)(tp->ctlr + (size_t)i * sizeof(struct verbs_ctl));
		for (unsigned l = 0; st == WEFT_SUCCESS && l < tp->nlanes; l++)
			st = create_qp(tp, c, &c->lane[l]);
	}
	return st;
}

/* The QPs and the CQ first (no completion may arrive after this), then the
 * protocol's registrations, then the state lines. */
void weft_verbs_qp_teardown(struct verbs_tp *tp)
{
	const struct weft_ibv *ibv = tp->ibv;
	for (int i = 0; i < tp->nconns; i++)
		for (unsigned l = 0; l < VERBS_MAX_LANES; l++) {
			struct verbs_lane *lane = &tp->conns[i].lane[l];
			if (lane->qp)
				ibv->destroy_qp(lane->qp);
			lane->qp = NULL;
		}
	if (tp->cq && ibv->destroy_cq(tp->cq) != 0)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_NET, "verbs: ibv_destroy_cq: still in use");
	tp->cq = NULL;
	if (tp->rma_ready)
		weft_rma_fini(&tp->rma);
	tp->rma_ready = false;
	if (tp->ctl_mr)
		ibv->dereg_mr(tp->ctl_mr);
	tp->ctl_mr = NULL;
	if (tp->ctlr)
		munmap(tp->ctlr, tp->ctl_len);
	tp->ctlr = NULL;
}

static int to_rtr(struct verbs_tp *tp, struct ibv_qp *qp, const struct verbs_card *peer,
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
	return tp->ibv->modify_qp(qp, &a,
				  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER);
}

static int to_rts(struct verbs_tp *tp, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_RTS,
	    .timeout = tp->timeout,
	    .retry_cnt = tp->retry_cnt,
	    .rnr_retry = 7, /* "forever": receives are always posted ahead */
	    .sq_psn = tp->psn,
	    .max_rd_atomic = 1,
	};
	return tp->ibv->modify_qp(qp, &a,
				  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int weft_verbs_qp_connect(struct verbs_tp *tp, struct verbs_conn *c, const struct verbs_card *peer,
			  const uint32_t *qpn)
{
	int err = 0;
	for (unsigned l = 0; !err && l < tp->nlanes; l++) {
		err = qpn[l] ? to_rtr(tp, c->lane[l].qp, peer, qpn[l]) : EINVAL;
		if (!err)
			err = to_rts(tp, c->lane[l].qp);
	}
	return err;
}

void weft_verbs_qp_error(struct verbs_conn *c)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	for (unsigned l = 0; l < VERBS_MAX_LANES; l++)
		if (c->lane[l].qp)
			c->tp->ibv->modify_qp(c->lane[l].qp, &a, IBV_QP_STATE);
}

/* ---- primitives ---- */

int weft_verbs_post_write(struct verbs_conn *c, unsigned lane, const struct verbs_write *w,
			  bool last)
{
	struct verbs_lane *l = &c->lane[lane];
	if (l->sq_out + (last ? 0 : 1) >= c->tp->sq_depth)
		return EAGAIN;
	struct ibv_sge sge = {
	    .addr = (uint64_t)(uintptr_t)w->local, .length = w->len, .lkey = w->lkey};
	struct ibv_send_wr wr = {
	    .wr_id = w->wr_id,
	    .sg_list = w->len ? &sge : NULL,
	    .num_sge = w->len ? 1 : 0,
	    .opcode = w->imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
	    .send_flags = IBV_SEND_SIGNALED,
	    .imm_data = htonl(w->imm_value),
	    .wr.rdma = {.remote_addr = w->raddr, .rkey = w->rkey},
	};
	struct ibv_send_wr *bad = NULL;
	int err = ibv_post_send(l->qp, &wr, &bad); /* verbs.h inline: ctx->ops */
	if (err)
		return err;
	l->sq_out++;
	return 0;
}

int weft_verbs_post_recvs(struct verbs_conn *c, unsigned lane, uint32_t n)
{
	/* No scatter list: a write with immediate places its data by address
	 * and consumes the receive only for the immediate. */
	for (uint32_t i = 0; i < n; i++) {
		struct ibv_recv_wr wr = {.wr_id = weft_verbs_wr_recv(c->idx, lane)};
		struct ibv_recv_wr *bad = NULL;
		int err = ibv_post_recv(c->lane[lane].qp, &wr, &bad); /* verbs.h inline: ctx->ops */
		if (err)
			return err;
	}
	return 0;
}

/* One completion in the protocol's form; false when it is not the
 * protocol's (a state write, a receive flushed by an error the protocol
 * hears of through a write, a connection unknown). */
static bool take(struct verbs_tp *tp, const struct ibv_wc *wc, struct weft_rma_cqe *out)
{
	uint64_t tag = wc->wr_id & VERBS_WR_TAG_MASK;
	if (tag == VERBS_WR_OP) {
		struct weft_rma_op *op = (struct weft_rma_op *)(uintptr_t)wc->wr_id;
		struct verbs_conn *c = verbs_conn_of(op->conn);
		c->lane[weft_verbs_lane_done(c, op, wc->status == IBV_WC_SUCCESS)].sq_out--;
		*out = (struct weft_rma_cqe){.kind = WEFT_RMA_CQE_LOCAL, .op = op};
		out->status = wc->status == IBV_WC_SUCCESS ? WEFT_SUCCESS : WEFT_ERR_REMOTE;
		if (wc->status != IBV_WC_SUCCESS)
			weft_verbs_wc_why(c, wc, out->why, sizeof(out->why));
		return true;
	}
	uint64_t idx = wc->wr_id >> 4, lane = 0;
	if (tag == VERBS_WR_RECV) {
		lane = idx % VERBS_MAX_LANES;
		idx /= VERBS_MAX_LANES;
	}
	if (idx >= (uint64_t)tp->nconns || lane >= tp->nlanes)
		return false;
	struct verbs_conn *c = &tp->conns[idx];
	if (tag == VERBS_WR_STATE) {
		c->lane[0].sq_out--;
		c->state_pending = false;
		return false;
	}
	if (tag != VERBS_WR_RECV || wc->status != IBV_WC_SUCCESS ||
	    wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM))
		return false;
	/* The protocol reposts one receive for each it takes: on this lane. */
	c->lane[lane].rq_owed++;
	*out = (struct weft_rma_cqe){
	    .kind = WEFT_RMA_CQE_REMOTE, .conn = &c->rc, .imm = ntohl(wc->imm_data)};
	return true;
}

int weft_verbs_poll(struct verbs_tp *tp, struct weft_rma_cqe *out, int max)
{
	struct ibv_wc wc[VERBS_POLL_BATCH];
	int want = max < VERBS_POLL_BATCH ? max : VERBS_POLL_BATCH;
	int n = ibv_poll_cq(tp->cq, want, wc); /* verbs.h inline: ctx->ops */
	if (n < 0)
		return WEFT_ERR_SYSTEM;
	int k = 0;
	for (int i = 0; i < n; i++)
		k += take(tp, &wc[i], &out[k]);
	return k;
}

/* The protocol is done (fini, after its flush) or failed (abort): what
 * else this reads is not its any more. */
void weft_verbs_qp_drain(struct verbs_tp *tp, double seconds)
{
	struct weft_rma_cqe ev[VERBS_POLL_BATCH];
	double end = weft_now() + seconds;
	for (;;) {
		bool busy = false;
		for (int i = 0; i < tp->nconns && !busy; i++)
			busy = tp->conns[i].state_pending;
		if (!busy || weft_now() > end || weft_verbs_poll(tp, ev, VERBS_POLL_BATCH) < 0)
			return;
	}
}
