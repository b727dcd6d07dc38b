/*
 * ofi_rma.c — the rma path: transports/common/rma_proto.h over libfabric.
 * The protocol is the one the verbs transport runs; this file only gives
 * it its primitives:
 *   write with immediate   fi_writedata, the immediate in the CQ data's
 *                          lower 32 bits and, where the provider carries 8
 *                          bytes, this rank in the upper 32 (so that the
 *                          target knows the writer without FI_SOURCE)
 *   receives for them      only in FI_RX_CQ_DATA mode: zero-byte fi_recv
 *   completions            fi_cq_read (fi_cq_readfrom with FI_SOURCE);
 *                          errors through fi_cq_readerr with fi_strerror
 *                          and the provider's own text
 *   registration           ofi_mr.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/ofi/ofi.h"
#include "util/log.h"

/* One rank's RMA region stays within this. */
#define OFI_RMA_BUDGET (64ul << 20)

_Static_assert(sizeof(((struct weft_rma_op *)0)->prov) >= sizeof(struct fi_context2),
	       "an op's provider context holds a struct fi_context2");

static struct ofi_tp *tp_of(struct weft_rma *rp)
{
	return weft_container_of(rp, struct ofi_tp, rma);
}

static struct ofi_conn *conn_of(struct weft_rma_conn *c)
{
	return weft_container_of(c, struct ofi_conn, rc);
}

static bool rx_cq_data(const struct ofi_tp *tp)
{
	return tp->info->mode & FI_RX_CQ_DATA;
}

static weft_status_t prim_write(struct weft_rma_conn *rc, struct weft_rma_op *op, const void *src,
				size_t len, void *src_desc, uint64_t raddr, uint64_t rkey,
				uint32_t imm)
{
	struct ofi_conn *c = conn_of(rc);
	struct ofi_tp *tp = c->tp;
	uint64_t data = imm;
	if (tp->rank_in_data)
		data |= (uint64_t)tp->base.env->rank << 32;
	int ret = weft_ofi_retry_connect(
	    c, (int)fi_writedata(tp->ep, src, len, src_desc, data, c->addr, raddr, rkey, op->prov));
	if (ret == 0)
		return WEFT_SUCCESS;
	if (ret == -FI_EAGAIN)
		return WEFT_INPROGRESS;
	snprintf(tp->rma.why, sizeof(tp->rma.why), "fi_writedata: %s", weft_ofi_strerror(tp, ret));
	return WEFT_ERR_REMOTE;
}

/* In FI_RX_CQ_DATA mode every remote CQ data consumes a posted receive. */
static weft_status_t post_imm(struct ofi_tp *tp)
{
	while (tp->imm_owed) {
		struct fi_context2 *ctx = &tp->imm_ctx[tp->imm_owed % tp->nimm_ctx];
		ssize_t ret = fi_recv(tp->ep, NULL, 0, NULL, FI_ADDR_UNSPEC, ctx);
		if (ret == -FI_EAGAIN)
			return WEFT_SUCCESS;
		if (ret)
			return weft_ofi_fail(tp, (int)ret, "posting a receive for remote CQ data");
		tp->imm_owed--;
	}
	return WEFT_SUCCESS;
}

static weft_status_t prim_post_recvs(struct weft_rma_conn *rc, unsigned n)
{
	struct ofi_tp *tp = conn_of(rc)->tp;
	if (!rx_cq_data(tp))
		return WEFT_SUCCESS;
	tp->imm_owed += n;
	return post_imm(tp);
}

static bool is_imm_ctx(const struct ofi_tp *tp, const void *ctx)
{
	return tp->imm_ctx && (const char *)ctx >= (const char *)tp->imm_ctx &&
	       (const char *)ctx < (const char *)(tp->imm_ctx + tp->nimm_ctx);
}

static struct weft_rma_conn *writer(struct ofi_tp *tp, uint64_t data, fi_addr_t src)
{
	int rank = -1;
	if (tp->rank_in_data) {
		rank = (int)(data >> 32);
	} else {
		for (int r = 0; r < tp->base.env->nranks && rank < 0; r++)
			if (tp->addrs[r] == src)
				rank = r;
	}
	if (rank < 0 || rank >= tp->base.env->nranks || !tp->conns[rank].tp)
		return NULL;
	return &tp->conns[rank].rc;
}

static void read_error(struct ofi_tp *tp, struct weft_rma_cqe *out, int *n)
{
	struct fi_cq_err_entry e = {0};
	if (fi_cq_readerr(tp->cq, &e, 0) != 1)
		return;
	if (!e.op_context || is_imm_ctx(tp, e.op_context)) {
		weft_log(WEFT_LOG_WARN, WEFT_SUB_NET, "ofi: a remote write failed here: %s",
			 weft_ofi_strerror(tp, e.err));
		return;
	}
	struct weft_rma_cqe *x = &out[(*n)++];
	*x = (struct weft_rma_cqe){
	    .kind = WEFT_RMA_CQE_LOCAL, .status = WEFT_ERR_REMOTE, .op = e.op_context};
	char prov[96] = "";
	fi_cq_strerror(tp->cq, e.prov_errno, e.err_data, prov, sizeof(prov));
	snprintf(x->why, sizeof(x->why), "%s%s%s%s", weft_ofi_strerror(tp, e.err),
		 prov[0] ? " (" : "", prov, prov[0] ? ")" : "");
}

/* A peer's write landing here, as opposed to the local completion of ours:
 * some providers (sockets) flag local completions of fi_writedata with
 * FI_REMOTE_CQ_DATA too. */
static bool remote_write(uint64_t flags)
{
	return (flags & FI_REMOTE_WRITE) ||
	       ((flags & FI_REMOTE_CQ_DATA) && !(flags & (FI_WRITE | FI_SEND)));
}

static int prim_poll(struct weft_rma *rp, struct weft_rma_cqe *out, int max)
{
	struct ofi_tp *tp = tp_of(rp);
	struct fi_cq_tagged_entry ev[16];
	fi_addr_t src[16];
	int want = max < 16 ? max : 16, n = 0;
	ssize_t got = tp->rank_in_data ? fi_cq_read(tp->cq, ev, (size_t)want)
				       : fi_cq_readfrom(tp->cq, ev, (size_t)want, src);
	if (got == -FI_EAGAIN)
		return 0;
	if (got == -FI_EAVAIL) {
		read_error(tp, out, &n);
		return n;
	}
	if (got < 0) {
		weft_ofi_fail(tp, (int)got, "fi_cq_read");
		return WEFT_ERR_SYSTEM;
	}
	for (ssize_t i = 0; i < got; i++) {
		if (remote_write(ev[i].flags))
			out[n++] = (struct weft_rma_cqe){
			    .kind = WEFT_RMA_CQE_REMOTE,
			    .conn = writer(tp, ev[i].data, tp->rank_in_data ? 0 : src[i]),
			    .imm = (uint32_t)ev[i].data};
		else if (!is_imm_ctx(tp, ev[i].op_context))
			out[n++] = (struct weft_rma_cqe){.kind = WEFT_RMA_CQE_LOCAL,
							 .status = WEFT_SUCCESS,
							 .op = ev[i].op_context};
	}
	return n;
}

static bool prim_peer_gone(struct weft_rma_conn *rc, char *why, size_t len)
{
	struct ofi_conn *c = conn_of(rc);
	return weft_ofi_peer_gone(c->tp, c->base.peer, why, len);
}

static weft_status_t prim_reg(void *ctx, void *buf, size_t len, struct weft_mr_reg *out)
{
	return weft_ofi_mr_reg(tp_of(ctx), buf, len, out);
}

static void prim_dereg(void *ctx, struct weft_mr_reg *reg)
{
	weft_ofi_mr_dereg(tp_of(ctx), reg);
}

static const struct weft_rma_prims prims = {
    .size = sizeof(struct weft_rma_prims),
    .write_imm = prim_write,
    .post_imm_recvs = prim_post_recvs,
    .poll = prim_poll,
    .peer_gone = prim_peer_gone,
    .mr = {.reg = prim_reg, .dereg = prim_dereg},
};

static const struct weft_rma_prims prims_local = {
    .size = sizeof(struct weft_rma_prims),
    .write_imm = prim_write,
    .post_imm_recvs = prim_post_recvs,
    .poll = prim_poll,
    .peer_gone = prim_peer_gone,
    .mr = {.reg = prim_reg, .dereg = prim_dereg},
    .src_needs_reg = true,
};

static weft_status_t read_geom(struct ofi_tp *tp, struct weft_rma_geom *g)
{
	static const struct weft_rma_geom_settings settings = {
	    .slots = "WEFT_OFI_SLOTS",
	    .slot_bytes = "WEFT_OFI_SLOT_BYTES",
	    .budget = OFI_RMA_BUDGET,
	    .bad = weft_ofi_bad_setting,
	};
	weft_status_t st = weft_rma_geom_read(g, tp->base.env, &settings);
	if (st != WEFT_SUCCESS)
		return st;
	g->stall_s = tp->stall_s;
	uint64_t max = tp->info->ep_attr->max_msg_size;
	g->max_write = max && max < (1ull << 40) ? (size_t)max : 0;
	return WEFT_SUCCESS;
}

weft_status_t weft_ofi_rma_init(struct ofi_tp *tp)
{
	struct weft_rma_geom g;
	weft_status_t st = read_geom(tp, &g);
	if (st != WEFT_SUCCESS)
		return st;
	if (rx_cq_data(tp)) {
		tp->nimm_ctx = (size_t)weft_rma_imm_depth(&g) * (size_t)tp->base.env->nranks;
		tp->imm_ctx = calloc(tp->nimm_ctx, sizeof(*tp->imm_ctx));
		if (!tp->imm_ctx)
			return weft_tp_fail(tp->base.env, WEFT_ERR_NO_MEMORY, "ofi: no memory");
	}
	bool local = tp->info->domain_attr->mr_mode & FI_MR_LOCAL;
	return weft_rma_init(&tp->rma, local ? &prims_local : &prims, tp->base.env, &g, "ofi");
}

weft_status_t weft_ofi_rma_connect(struct ofi_tp *tp, int peer)
{
	return weft_rma_conn_init(&tp->rma, &tp->conns[peer].rc, peer, &tp->cards[peer].rma);
}

weft_status_t weft_ofi_rma_isend(struct weft_conn *conn, struct weft_msg *msg)
{
	return weft_rma_isend(&weft_container_of(conn, struct ofi_conn, base)->rc, msg);
}

weft_status_t weft_ofi_rma_irecv(struct weft_conn *conn, struct weft_msg *msg)
{
	return weft_rma_irecv(&weft_container_of(conn, struct ofi_conn, base)->rc, msg);
}

weft_status_t weft_ofi_rma_progress(struct ofi_tp *tp)
{
	weft_status_t st = tp->imm_owed ? post_imm(tp) : WEFT_SUCCESS;
	return st != WEFT_SUCCESS ? st : weft_rma_progress(&tp->rma);
}
