/*
 * rma_proto.c — the RMA protocol's setup (geometry, region, connections),
 * the completions it reads through the transport's poll, failures and
 * liveness. The send side is in rma_proto_tx.c, the receive side in
 * rma_proto_rx.c; the protocol is described in rma_proto.h.
 */
#include "transports/common/rma_proto_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/log.h"
#include "util/proc.h"
#include "util/settings.h"

#define RMA_POLL_BATCH	16
#define RMA_POLL_ROUNDS 4

static size_t round_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

static size_t block_bytes(const struct weft_rma_geom *g)
{
	return round_up(weft_rma_off_st_ctrl(g) + WEFT_RMA_LINE, WEFT_MR_PAGE);
}

void weft_rma_geom_default(struct weft_rma_geom *g, int nranks, size_t budget)
{
	*g = (struct weft_rma_geom){
	    .nslots = 16,
	    .ndesc = 16,
	    .nbounce = 4,
	    .credit_batch = 4,
	    .slot_bytes = 16u << 10,
	    .bounce_bytes = 128u << 10,
	    .stall_s = 0.1,
	};
	size_t peers = nranks > 1 ? (size_t)nranks : 1;
	while (peers * block_bytes(g) > budget && g->nslots > 4)
		g->nslots /= 2;
	while (peers * block_bytes(g) > budget && g->nbounce > 1)
		g->nbounce--;
	while (peers * block_bytes(g) > budget && g->bounce_bytes > (16u << 10))
		g->bounce_bytes /= 2;
	while (peers * block_bytes(g) > budget && g->slot_bytes > 4096)
		g->slot_bytes /= 2;
	if (g->credit_batch > g->nslots / 2)
		g->credit_batch = g->nslots / 2;
}

weft_status_t weft_rma_geom_read(struct weft_rma_geom *g, const struct weft_tp_env *env,
				 const struct weft_rma_geom_settings *s)
{
	long v = 0;
	weft_rma_geom_default(g, env->nranks, s->budget);
	if (weft_setting_str(s->slots)) {
		if (!weft_setting_long(s->slots, &v) || v < 2 || v > 1024 || (v & (v - 1)))
			return s->bad(env, s->slots, "a power of two from 2 to 1024");
		g->nslots = (uint32_t)v;
		if (g->credit_batch > g->nslots / 2)
			g->credit_batch = g->nslots / 2;
	}
	if (weft_setting_str(s->slot_bytes)) {
		if (!weft_setting_long(s->slot_bytes, &v) || v < 256 || v > (1L << 20) || v % 64)
			return s->bad(env, s->slot_bytes, "a multiple of 64 from 256 to 1M");
		g->slot_bytes = (size_t)v;
	}
	return WEFT_SUCCESS;
}

unsigned weft_rma_imm_depth(const struct weft_rma_geom *g)
{
	/* Slots and slot credits, descriptors with their data and credits,
	 * one probe, and a margin. */
	unsigned batch = g->credit_batch ? g->credit_batch : 1;
	return g->nslots + g->nslots / batch + 3 * g->ndesc + 4;
}

static bool geom_valid(const struct weft_rma_geom *g)
{
	bool pow2 =
	    g->nslots && !(g->nslots & (g->nslots - 1)) && g->ndesc && !(g->ndesc & (g->ndesc - 1));
	return pow2 && g->nbounce >= 1 && g->nbounce <= 64 && g->credit_batch >= 1 &&
	       g->credit_batch <= g->nslots && g->slot_bytes >= 2 * sizeof(struct weft_slot_hdr) &&
	       g->slot_bytes % WEFT_RMA_LINE == 0 && g->bounce_bytes >= WEFT_RMA_LINE &&
	       g->bounce_bytes % WEFT_RMA_LINE == 0 && g->stall_s > 0;
}

weft_status_t weft_rma_init(struct weft_rma *rp, const struct weft_rma_prims *prims,
			    const struct weft_tp_env *env, const struct weft_rma_geom *geom,
			    const char *name)
{
	*rp = (struct weft_rma){.prims = prims, .env = env, .geom = *geom, .name = name};
	if (!geom_valid(geom))
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "%s: RMA geometry %u slots x %zu, %u descriptors, %u x %zu "
				    "bounce, credit batch %u is not usable",
				    name, geom->nslots, geom->slot_bytes, geom->ndesc,
				    geom->nbounce, geom->bounce_bytes, geom->credit_batch);
	rp->block_bytes = block_bytes(geom);
	rp->region_bytes = (size_t)env->nranks * rp->block_bytes;
	rp->conns = calloc((size_t)env->nranks, sizeof(*rp->conns));
	rp->active = calloc((size_t)env->nranks, sizeof(*rp->active));
	rp->work = calloc((size_t)env->nranks, sizeof(*rp->work));
	if (!rp->conns || !rp->active || !rp->work ||
	    weft_tp_pool_init(&rp->reqs, sizeof(struct weft_rma_req)) != WEFT_SUCCESS ||
	    weft_tp_pool_init(&rp->ops, sizeof(struct weft_rma_op)) != WEFT_SUCCESS)
		return weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "%s: no memory", name);
	void *region = mmap(NULL, rp->region_bytes, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		return weft_tp_fail_errno(env, errno, "%s: %zu bytes for the RMA region", name,
					  rp->region_bytes);
	rp->region = region;
	/* Fault in every peer's block now (first touches cost ~12 us a page
	 * here, and pinning providers want the pages present); ours stays a
	 * hole. */
	for (int p = 0; p < env->nranks; p++)
		if (p != env->rank)
			memset(rp->region + (size_t)p * rp->block_bytes, 0, rp->block_bytes);
	weft_status_t st = prims->mr.reg(rp, rp->region, rp->region_bytes, &rp->region_reg);
	if (st != WEFT_SUCCESS) {
		munmap(rp->region, rp->region_bytes);
		rp->region = NULL;
		return st;
	}
	weft_mr_cache_init(&rp->cache, &prims->mr, rp);
	return WEFT_SUCCESS;
}

void weft_rma_card(const struct weft_rma *rp, struct weft_rma_card *out)
{
	const struct weft_rma_geom *g = &rp->geom;
	*out = (struct weft_rma_card){
	    .base = rp->region_reg.key.addr,
	    .key = rp->region_reg.key.key,
	    .slot_bytes = g->slot_bytes,
	    .bounce_bytes = g->bounce_bytes,
	    .nslots = g->nslots,
	    .ndesc = g->ndesc,
	    .nbounce = g->nbounce,
	    .credit_batch = g->credit_batch,
	};
}

static bool same_geom(const struct weft_rma_card *a, const struct weft_rma_card *b)
{
	return a->slot_bytes == b->slot_bytes && a->bounce_bytes == b->bounce_bytes &&
	       a->nslots == b->nslots && a->ndesc == b->ndesc && a->nbounce == b->nbounce &&
	       a->credit_batch == b->credit_batch;
}

weft_status_t weft_rma_conn_init(struct weft_rma *rp, struct weft_rma_conn *c, int peer,
				 const struct weft_rma_card *card)
{
	const struct weft_rma_geom *g = &rp->geom;
	struct weft_rma_card mine;
	weft_rma_card(rp, &mine);
	if (!same_geom(&mine, card))
		return weft_tp_fail(rp->env, WEFT_ERR_INVALID_ARG,
				    "%s: rank %d uses %u slots x %llu bytes and %u bounce pieces "
				    "x %llu, this rank %u x %llu and %u x %llu (set the slot "
				    "settings alike on every rank)",
				    rp->name, peer, card->nslots,
				    (unsigned long long)card->slot_bytes, card->nbounce,
				    (unsigned long long)card->bounce_bytes, mine.nslots,
				    (unsigned long long)mine.slot_bytes, mine.nbounce,
				    (unsigned long long)mine.bounce_bytes);
	memset(c, 0, sizeof(*c));
	c->rp = rp;
	c->peer = peer;
	c->card = *card;
	/* Our block in the peer's region is at our rank's offset, and the
	 * peer's in ours at its rank's. */
	uint64_t theirs = card->base + (uint64_t)rp->env->rank * rp->block_bytes;
	c->r_slots = theirs;
	c->r_descs = theirs + weft_rma_off_descs(g);
	c->r_ctrl = theirs + weft_rma_off_ctrl(g);
	unsigned char *ours = rp->region + (size_t)peer * rp->block_bytes;
	c->slots = ours;
	c->descs = ours + weft_rma_off_descs(g);
	c->bounce = ours + weft_rma_off_bounce(g);
	c->st_slots = ours + weft_rma_off_st_slots(g);
	c->st_descs = ours + weft_rma_off_st_descs(g);
	c->st_ctrl = ours + weft_rma_off_st_ctrl(g);
	c->txr.nslots = c->rxr.nslots = g->nslots;
	c->rxr.credit_batch = g->credit_batch;
	c->bounce_free = g->nbounce == 64 ? ~0ull : (1ull << g->nbounce) - 1;
	c->s_arrived = calloc(g->nslots, sizeof(*c->s_arrived));
	c->d_arrived = calloc(g->ndesc, sizeof(*c->d_arrived));
	c->dtab = calloc(g->ndesc, sizeof(*c->dtab));
	if (!c->s_arrived || !c->d_arrived || !c->dtab)
		return weft_tp_fail(rp->env, WEFT_ERR_NO_MEMORY, "%s: no memory", rp->name);
	rp->conns[peer] = c;
	rp->active[rp->nactive++] = c;
	weft_status_t st = rp->prims->post_imm_recvs(c, weft_rma_imm_depth(g));
	if (st != WEFT_SUCCESS)
		return weft_tp_fail(rp->env, st, "%s: cannot post receives for rank %d", rp->name,
				    peer);
	c->connected = true;
	return WEFT_SUCCESS;
}

/* ---- Requests ---- */

void weft_rma_finish(struct weft_rma_conn *c, struct weft_tp_reqq *q, struct weft_rma_req *r,
		     weft_status_t status)
{
	struct weft_rma *rp = c->rp;
	weft_reqq_unlink(q, &r->base);
	struct weft_msg *m = r->base.msg;
	if (r->mr)
		weft_mr_cache_put(&rp->cache, r->mr);
	weft_tp_pool_put(&rp->reqs, r);
	weft_msg_complete(m, status);
}

struct weft_rma_req *weft_rma_new_req(struct weft_rma_conn *c, struct weft_msg *m,
				      weft_status_t *st)
{
	weft_status_t refused = c->broken ? c->fail_status : WEFT_SUCCESS;
	if (c->gone) {
		c->gone = false;
		weft_tp_fail(c->rp->env, refused, "%s: peer rank %d is gone (%s)", c->rp->name,
			     c->peer, c->gone_why);
	}
	if (!refused && !c->connected)
		refused = weft_tp_fail(c->rp->env, WEFT_ERR_INTERNAL,
				       "%s: message posted to rank %d before it was connected",
				       c->rp->name, c->peer);
	return weft_tp_req_start(&c->rp->reqs, c->rp->env, c->rp->name, m, refused, st);
}

static void fail_queue(struct weft_rma_conn *c, struct weft_tp_reqq *q, weft_status_t status)
{
	while (q->head)
		weft_rma_finish(c, q, weft_rma_req_of(q->head), status);
}

void weft_rma_conn_fail(struct weft_rma_conn *c, weft_status_t status)
{
	if (!c->broken)
		c->fail_status = status;
	c->broken = true;
	/* Writes still in flight may complete later: they find the
	 * connection broken and touch no request (weft_rma_tx_on_written). */
	c->tx_slot = c->tx_desc = c->rx_slot = c->rx_desc = NULL;
	for (uint32_t i = 0; c->dtab && i < c->rp->geom.ndesc; i++)
		c->dtab[i].req = NULL;
	fail_queue(c, &c->sendq, c->fail_status);
	fail_queue(c, &c->recvq, c->fail_status);
}

weft_status_t weft_rma_fail(struct weft_rma_conn *c, weft_status_t status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	weft_tp_vfail_once(c->rp->env, c->broken, &c->rp->error, status, fmt, ap);
	va_end(ap);
	weft_rma_conn_fail(c, status);
	return c->fail_status;
}

void weft_rma_abort(struct weft_rma *rp)
{
	for (int i = 0; i < rp->nactive; i++)
		weft_rma_conn_fail(rp->active[i], WEFT_ERR_ABORTED);
}

void weft_rma_fini(struct weft_rma *rp)
{
	for (int i = 0; rp->active && i < rp->nactive; i++) {
		struct weft_rma_conn *c = rp->active[i];
		free(c->s_arrived);
		free(c->d_arrived);
		free(c->dtab);
		c->s_arrived = c->d_arrived = NULL;
		c->dtab = NULL;
	}
	/* The requests go with their pool; the registrations they held with
	 * the cache. */
	weft_mr_cache_fini(&rp->cache);
	if (rp->region) {
		rp->prims->mr.dereg(rp, &rp->region_reg);
		munmap(rp->region, rp->region_bytes);
	}
	weft_tp_pool_fini(&rp->reqs);
	weft_tp_pool_fini(&rp->ops);
	free(rp->conns);
	free(rp->active);
	free(rp->work);
	memset(rp, 0, sizeof(*rp));
}

/* ---- Writes and their completions ---- */

/* A write failed: an error of the operations queued on @p c, or, with
 * none queued, a quiet end of the connection. */
static void write_failed(struct weft_rma_conn *c, weft_status_t status, const char *why)
{
	if (c->broken)
		return;
	if (weft_rma_conn_busy(c)) {
		weft_rma_fail(c, status, "%s: write to rank %d failed: %s", c->rp->name, c->peer,
			      why[0] ? why : weft_status_string(status));
		return;
	}
	snprintf(c->gone_why, sizeof(c->gone_why), "a write to it failed: %s",
		 why[0] ? why : weft_status_string(status));
	c->gone = true;
	weft_rma_conn_fail(c, status);
}

weft_status_t weft_rma_post(struct weft_rma_conn *c, uint32_t imm, const void *src, size_t len,
			    void *src_desc, uint64_t raddr, uint64_t rkey, struct weft_rma_req *req,
			    uint64_t desc)
{
	struct weft_rma *rp = c->rp;
	struct weft_rma_op *op = weft_tp_pool_get(&rp->ops);
	if (!op)
		return weft_rma_fail(c, WEFT_ERR_NO_MEMORY, "%s: no memory for a write", rp->name);
	op->kind = imm >> WEFT_RMA_IMM_BITS;
	op->conn = c;
	op->req = req;
	op->desc = desc;
	op->len = len;
	rp->why[0] = '\0';
	weft_status_t st = rp->prims->write_imm(c, op, src, len, src_desc, raddr, rkey, imm);
	if (st == WEFT_SUCCESS) {
		c->moved = true;
		rp->inflight++;
		return st;
	}
	weft_tp_pool_put(&rp->ops, op);
	if (st == WEFT_INPROGRESS)
		return st;
	write_failed(c, st, rp->why);
	return c->fail_status;
}

static void on_local(struct weft_rma *rp, struct weft_rma_cqe *e)
{
	struct weft_rma_op *op = e->op;
	struct weft_rma_conn *c = op->conn;
	rp->inflight--;
	weft_rma_mark(c);
	if (op->kind == WEFT_RMA_IMM_PROBE)
		c->probing = false;
	if (e->status != WEFT_SUCCESS)
		write_failed(c, e->status, e->why);
	else if (!c->broken && op->kind == WEFT_RMA_IMM_DATA)
		weft_rma_tx_on_written(c, op);
	c->moved = true;
	weft_tp_pool_put(&rp->ops, op);
}

static void on_remote(struct weft_rma_cqe *e)
{
	struct weft_rma_conn *c = e->conn;
	if (!c || !c->connected)
		return; /* a write from no connection of ours: nothing waits for it */
	c->rp->prims->post_imm_recvs(c, 1);
	if (c->broken)
		return;
	c->moved = true;
	weft_rma_mark(c);
	uint32_t value = e->imm & WEFT_RMA_IMM_MASK;
	switch (e->imm >> WEFT_RMA_IMM_BITS) {
	case WEFT_RMA_IMM_SLOT: weft_rma_rx_on_slot(c, value); break;
	case WEFT_RMA_IMM_DESC: weft_rma_tx_on_desc(c, value); break;
	case WEFT_RMA_IMM_DATA: weft_rma_rx_on_data(c, value); break;
	case WEFT_RMA_IMM_SLOT_CREDIT: weft_rma_tx_on_credit(c, value); break;
	case WEFT_RMA_IMM_DESC_CREDIT: weft_rma_rx_on_credit(c, value); break;
	case WEFT_RMA_IMM_PROBE: break;
	default:
		weft_rma_fail(c, WEFT_ERR_REMOTE, "%s: rank %d sent an unknown immediate %#x",
			      c->rp->name, c->peer, e->imm);
	}
}

/* ---- Liveness ---- */

static void check_peer(struct weft_rma_conn *c)
{
	struct weft_rma *rp = c->rp;
	const struct weft_tp_env *env = rp->env;
	if (weft_tp_same_host(env, c->peer) && env->peers[c->peer].pid > 0 &&
	    !weft_pid_alive(env->peers[c->peer].pid)) {
		weft_rma_fail(c, WEFT_ERR_REMOTE, "%s: peer rank %d (pid %d) died", rp->name,
			      c->peer, env->peers[c->peer].pid);
		return;
	}
	char why[160];
	if (rp->prims->peer_gone && rp->prims->peer_gone(c, why, sizeof(why))) {
		weft_rma_fail(c, WEFT_ERR_REMOTE, "%s: peer rank %d is gone: %s", rp->name, c->peer,
			      why);
		return;
	}
	if (c->probing)
		return;
	/* A provider that notices fails a write to a peer that is gone; the
	 * probe lands in the peer's control line, which nobody reads. */
	weft_status_t st = weft_rma_post(c, weft_rma_imm(WEFT_RMA_IMM_PROBE, 0), c->st_ctrl, 8,
					 rp->region_reg.desc, c->r_ctrl, c->card.key, NULL, 0);
	c->probing = st == WEFT_SUCCESS;
}

static void conn_progress(struct weft_rma_conn *c)
{
	bool busy = weft_rma_conn_busy(c);
	if (c->recvq.head || c->owe_slot_credit)
		weft_rma_rx_progress(c);
	if (!c->broken && (c->sendq.head || c->owe_desc_credit))
		weft_rma_tx_progress(c);
	if (c->broken || !busy)
		return;
	if (c->moved)
		weft_watchdog_moved(&c->wd);
	else if (weft_watchdog_due(&c->wd, c->rp->geom.stall_s))
		check_peer(c);
}

weft_status_t weft_rma_progress(struct weft_rma *rp)
{
	struct weft_rma_cqe ev[RMA_POLL_BATCH];
	for (int round = 0; round < RMA_POLL_ROUNDS; round++) {
		int n = rp->prims->poll(rp, ev, RMA_POLL_BATCH);
		if (n < 0)
			return weft_tp_fail(rp->env, (weft_status_t)n,
					    "%s: reading the completion queue failed", rp->name);
		for (int i = 0; i < n; i++) {
			if (ev[i].kind == WEFT_RMA_CQE_LOCAL)
				on_local(rp, &ev[i]);
			else
				on_remote(&ev[i]);
		}
		if (n < RMA_POLL_BATCH)
			break;
	}
	int keep = 0;
	for (int i = 0; i < rp->nwork; i++) {
		struct weft_rma_conn *c = rp->work[i];
		if (!c->broken)
			conn_progress(c);
		c->moved = false;
		c->on_work = !c->broken && (weft_rma_conn_busy(c) || c->owe_slot_credit ||
					    c->owe_desc_credit || c->probing);
		if (c->on_work)
			rp->work[keep++] = c;
	}
	rp->nwork = keep;
	/* A failure is returned once, by the call in which it happened. */
	weft_status_t st = rp->error;
	rp->error = WEFT_SUCCESS;
	return st;
}
