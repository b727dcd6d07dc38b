/*
 * verbs_rma.c — the verbs transport's message path: the shared RMA
 * protocol (transports/common/rma_proto.h, which ofi's rma path runs too)
 * over the primitives of verbs_qp.c. This file only gives it:
 *   write with immediate   IBV_WR_RDMA_WRITE_WITH_IMM, signaled, wr_id the
 *                          protocol's op; the immediate in network order
 *   receives for them      zero-SGE receive work requests
 *   completions            ibv_poll_cq, errors with ibv_wc_status_str and
 *                          what the peer's state line says
 *   registration           ibv_reg_mr (local write, remote write)
 *   peer_gone              the peer's state line (it aborted or destroyed
 *                          its communicator)
 * and, for rendezvous data, the lane it goes on (verbs_lanes.c).
 */
#include <errno.h>
#include <stdalign.h>
#include <stdio.h>
#include <string.h>

#include "transports/verbs/verbs.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/settings.h"

_Static_assert(alignof(struct weft_rma_op) > VERBS_WR_TAG_MASK,
	       "an op's address leaves the wr_id's tag bits clear");

static struct verbs_tp *tp_of(struct weft_rma *rp)
{
	return weft_container_of(rp, struct verbs_tp, rma);
}

static const char *host_of(const struct verbs_conn *c)
{
	return c->tp->base.env->peers[c->base.peer].hostname;
}

static weft_status_t prim_write(struct weft_rma_conn *rc, struct weft_rma_op *op, const void *src,
				size_t len, void *src_desc, uint64_t raddr, uint64_t rkey,
				uint32_t imm)
{
	struct verbs_conn *c = verbs_conn_of(rc);
	const struct ibv_mr *mr = src_desc;
	/* Rendezvous data may go on any lane; the rest stays on lane 0. */
	unsigned lane =
	    op->kind == WEFT_RMA_IMM_DATA && c->tp->nlanes > 1 ? weft_verbs_lane_pick(c) : 0;
	struct verbs_write w = {.wr_id = (uint64_t)(uintptr_t)op,
				.local = src,
				.lkey = mr ? mr->lkey : 0,
				.len = (uint32_t)len,
				.raddr = raddr,
				.rkey = (uint32_t)rkey,
				.imm = true,
				.imm_value = imm};
	int err = weft_verbs_post_write(c, lane, &w, false);
	if (err == 0) {
		weft_verbs_lane_posted(c, lane, op);
		return WEFT_SUCCESS;
	}
	if (err == EAGAIN)
		return WEFT_INPROGRESS;
	snprintf(c->tp->rma.why, sizeof(c->tp->rma.why), "ibv_post_send to rank %d (host %s): %s",
		 c->base.peer, host_of(c), strerror(err));
	return WEFT_ERR_REMOTE;
}

/* The protocol asks for its depth once, at connect: every lane gets it.
 * Then one for each remote completion it took: the lane that consumed it
 * (take() in verbs_qp.c counted it there). */
static int post_recvs(struct verbs_conn *c, unsigned n)
{
	unsigned nlanes = c->tp->nlanes;
	int err = 0;
	if (!c->recvs_posted) {
		for (unsigned l = 0; !err && l < nlanes; l++)
			err = weft_verbs_post_recvs(c, l, n);
		c->recvs_posted = err == 0;
		return err;
	}
	for (unsigned l = 0; !err && n > 0 && l < nlanes; l++) {
		struct verbs_lane *lane = &c->lane[l];
		unsigned k = lane->rq_owed < n ? lane->rq_owed : n;
		err = k ? weft_verbs_post_recvs(c, l, k) : 0;
		if (!err) {
			lane->rq_owed -= k;
			n -= k;
		}
	}
	return err;
}

static weft_status_t prim_post_recvs(struct weft_rma_conn *rc, unsigned n)
{
	struct verbs_conn *c = verbs_conn_of(rc);
	int err = post_recvs(c, n);
	if (err == 0)
		return WEFT_SUCCESS;
	weft_log(WEFT_LOG_WARN, WEFT_SUB_NET, "verbs: ibv_post_recv for rank %d: %s", c->base.peer,
		 strerror(err));
	return WEFT_ERR_SYSTEM;
}

static int prim_poll(struct weft_rma *rp, struct weft_rma_cqe *out, int max)
{
	return weft_verbs_poll(tp_of(rp), out, max);
}

static const char *left_why(enum verbs_state state)
{
	switch (state) {
	case VERBS_STATE_ABORTED: return "it aborted its communicator";
	case VERBS_STATE_CLOSED:
		return "it destroyed its communicator while this rank still waits for it "
		       "(mismatched calls across ranks?)";
	default: return NULL;
	}
}

static bool prim_peer_gone(struct weft_rma_conn *rc, char *why, size_t len)
{
	const char *left = left_why(weft_verbs_peer_state(verbs_conn_of(rc)));
	if (left)
		snprintf(why, len, "%s", left);
	return left != NULL;
}

void weft_verbs_wc_why(struct verbs_conn *c, const struct ibv_wc *wc, char *buf, size_t len)
{
	const char *what = weft_verbs_wc_str(c->tp->ibv, wc->status);
	const char *left = left_why(weft_verbs_peer_state(c));
	if (left)
		snprintf(buf, len, "%s: peer rank %d (host %s): %s", what, c->base.peer, host_of(c),
			 left);
	else if (wc->status == IBV_WC_RETRY_EXC_ERR)
		snprintf(buf, len,
			 "peer rank %d (host %s) does not answer: %s (it died, or the path to it "
			 "is down)",
			 c->base.peer, host_of(c), what);
	else
		snprintf(buf, len, "%s (status %d, vendor error %#x) with peer rank %d (host %s)",
			 what, (int)wc->status, wc->vendor_err, c->base.peer, host_of(c));
}

static weft_status_t prim_reg(void *ctx, void *buf, size_t len, struct weft_mr_reg *out)
{
	struct verbs_tp *tp = tp_of(ctx);
	struct ibv_mr *mr =
	    tp->ibv->reg_mr(tp->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr) {
		int e = errno;
		snprintf(tp->why, sizeof(tp->why), "ibv_reg_mr(%zu bytes): %s%s", len, strerror(e),
			 e == ENOMEM || e == EPERM
			     ? " (the locked-memory limit, ulimit -l, may be too low)"
			     : "");
		if (tp->usable)
			weft_log(WEFT_LOG_WARN, WEFT_SUB_NET, "verbs: %s", tp->why);
		return tp->usable ? WEFT_ERR_SYSTEM : WEFT_ERR_NOT_SUPPORTED;
	}
	*out = (struct weft_mr_reg){
	    .handle = mr,
	    .desc = mr,
	    .key = {.addr = (uint64_t)(uintptr_t)buf, .len = len, .key = mr->rkey},
	};
	return WEFT_SUCCESS;
}

static void prim_dereg(void *ctx, struct weft_mr_reg *reg)
{
	if (reg->handle)
		tp_of(ctx)->ibv->dereg_mr(reg->handle);
	reg->handle = NULL;
}

static const struct weft_rma_prims prims = {
    .size = sizeof(struct weft_rma_prims),
    .write_imm = prim_write,
    .post_imm_recvs = prim_post_recvs,
    .poll = prim_poll,
    .peer_gone = prim_peer_gone,
    .mr = {.reg = prim_reg, .dereg = prim_dereg},
    .src_needs_reg = true, /* every local SGE takes an lkey */
};

static weft_status_t bad_setting(const struct weft_tp_env *env, const char *name,
				 const char *expected)
{
	return weft_tp_fail(env, WEFT_ERR_INVALID_ARG, "verbs: %s=%s: expected %s", name,
			    weft_setting_str(name), expected);
}

/* The slot settings as the RMA protocol reads them, then the stall. */
weft_status_t weft_verbs_read_geom(struct verbs_tp *tp)
{
	const struct weft_tp_env *env = tp->base.env;
	struct weft_rma_geom *g = &tp->geom;
	static const struct weft_rma_geom_settings settings = {
	    .slots = "WEFT_IB_SLOTS",
	    .slot_bytes = "WEFT_IB_SLOT_BYTES",
	    .budget = VERBS_BUDGET,
	    .bad = bad_setting,
	};
	weft_status_t st = weft_rma_geom_read(g, env, &settings);
	if (st != WEFT_SUCCESS)
		return st;
	return weft_tp_read_stall(env, "verbs", "WEFT_IB_STALL", 0.001, 60, &g->stall_s);
}

weft_status_t weft_verbs_rma_init(struct verbs_tp *tp)
{
	/* One write moves at most a message of the port's largest size (and
	 * what an SGE's 32-bit length holds). */
	uint32_t max = tp->pattr.max_msg_sz;
	tp->geom.max_write = max && max < (1u << 30) ? max : (1u << 30);
	/* With lanes, pieces small enough that one chunk spreads over them. */
	if (tp->nlanes > 1 && tp->geom.max_write > VERBS_LANE_PIECE)
		tp->geom.max_write = VERBS_LANE_PIECE;
	tp->rma_ready = true; /* from here on, teardown frees what init made */
	return weft_rma_init(&tp->rma, &prims, tp->base.env, &tp->geom, "verbs");
}

weft_status_t weft_verbs_rma_connect(struct verbs_tp *tp, struct verbs_conn *c,
				     const struct verbs_card *card)
{
	struct weft_verbs_sample s;
	if (weft_verbs_counters_read(&tp->counters, &s)) {
		c->seen_tx = s.tx_packets;
		c->seen_ce = s.cnp_handled;
	}
	return weft_rma_conn_init(&tp->rma, &c->rc, c->base.peer, &card->rma);
}

/* Before closing in order: what was written but not completed leaves now
 * (an eager send is done once copied, and a rank that exits right after
 * its last send would lose it). Bounded: a peer that does not take the
 * writes fails them, or the time runs out. */
void weft_verbs_rma_flush(struct verbs_tp *tp)
{
	double limit = tp->base.env->timeout_s < 5 ? tp->base.env->timeout_s : 5;
	double end = weft_now() + limit;
	while (weft_rma_writes_pending(&tp->rma) && weft_now() < end)
		if (weft_rma_progress(&tp->rma) != WEFT_SUCCESS)
			return;
}

weft_status_t weft_tp_verbs_isend(struct weft_conn *conn, struct weft_msg *msg)
{
	return weft_rma_isend(&weft_container_of(conn, struct verbs_conn, base)->rc, msg);
}

weft_status_t weft_tp_verbs_irecv(struct weft_conn *conn, struct weft_msg *msg)
{
	return weft_rma_irecv(&weft_container_of(conn, struct verbs_conn, base)->rc, msg);
}

weft_status_t weft_tp_verbs_progress(struct weft_tp *base)
{
	struct verbs_tp *tp = verbs_tp_of(base);
	if (!tp->usable || tp->closing)
		return WEFT_SUCCESS;
	return weft_rma_progress(&tp->rma);
}
