/*
 * verbs.c — the RDMA verbs transport: settings, init (collective), score,
 * connect, abort, fini, properties. Objects and protocol: verbs.h.
 *
 * init runs the same allgathers on every rank, whether or not it has a
 * device, so ranks without one (or without libibverbs) still let the
 * others finish:
 *   1. load libibverbs (WEFT_IBVERBS_LIB), choose the port and GID,
 *      register the RMA protocol's region, and for every peer served
 *      create its lanes' QPs (to INIT) and its state line; any step that
 *      finds nothing to use leaves a reason (tp->why) and the transport
 *      serves no peer
 *   2. allgather hellos (step 0 below: whether any rank can use verbs,
 *      whether one failed, and each rank's WEFT_IB_QPS_PER_CONN, which
 *      must agree and sizes the cards), then cards: the port's address (GID or LID), MTU, PSN, the
 *      protocol's card (region, key, geometry), the state lines' address
 *      and key, and per peer its line and the QP number of each lane
 *   3. take every served peer whose card is usable with ours to RTR and
 *      RTS, and join the protocol to it (which posts its receives)
 *   4. allgather which QPs reached RTS: a pair is served only if both
 *      ends got there (a one-sided choice would leave the two ranks on
 *      different transports), and no rank writes before every QP it
 *      writes to is ready.
 *
 * The test double (tests/fake_ibverbs) serves peers only when
 * WEFT_TRANSPORTS names verbs: a job never runs on it by accident.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transports/common/tp_stubs.h"
#include "transports/verbs/verbs.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/parse.h"
#include "util/settings.h"

#define VERBS_CARD_MAGIC 0x5745465456425332ull /* "WEFTVBS2": lanes */
#define PAGE		 4096u
/* A small RDMA write, one way, on the fabrics this is for: the tuner's
 * figure until it measures (no cheaper way to know before the first one). */
#define VERBS_LATENCY_S 2e-6

/* ---- WEFT_TRANSPORTS, as the registry reads it ---- */

static bool spec_lists(const char *spec, const char *name)
{
	struct weft_list l;
	weft_list_init(&l, "WEFT_TRANSPORTS", spec, ',');
	while (weft_list_next(&l))
		if (strcmp(l.item, name) == 0)
			return true;
	return false;
}

static bool shm_enabled(const char *spec)
{
	if (!spec)
		return true;
	return spec[0] == '^' ? !spec_lists(spec + 1, "shm") : spec_lists(spec, "shm");
}

static bool verbs_named(const char *spec)
{
	return spec && spec[0] != '^' && spec_lists(spec, "verbs");
}

/* ---- settings ---- */

static weft_status_t read_byte(const char *name, long lo, long hi, uint8_t *out,
			       const struct weft_tp_env *env)
{
	long v = 0;
	if (!weft_setting_long(name, &v) || v < lo || v > hi)
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "verbs: %s=%s: expected an integer from %ld to %ld", name,
				    weft_setting_str(name), lo, hi);
	*out = (uint8_t)v;
	return WEFT_SUCCESS;
}

static weft_status_t read_settings(struct verbs_tp *tp)
{
	const struct weft_tp_env *env = tp->base.env;
	weft_status_t st = read_byte("WEFT_IB_TC", 0, 255, &tp->tc, env);
	if (st == WEFT_SUCCESS)
		st = read_byte("WEFT_IB_SL", 0, 15, &tp->sl, env);
	if (st == WEFT_SUCCESS)
		st = read_byte("WEFT_IB_TIMEOUT", 1, 31, &tp->timeout, env);
	if (st == WEFT_SUCCESS)
		st = read_byte("WEFT_IB_RETRY_CNT", 0, 7, &tp->retry_cnt, env);
	if (st == WEFT_SUCCESS)
		st = weft_verbs_read_geom(tp);
	if (st == WEFT_SUCCESS)
		st = weft_verbs_read_lanes(tp);
	tp->sysfs = weft_setting_str("WEFT_IB_SYSFS");
	return st;
}

/* Which peers get a QP: all but this rank, and but this host's ranks
 * when shm (which outranks verbs) is enabled. */
static weft_status_t plan_peers(struct verbs_tp *tp)
{
	const struct weft_tp_env *env = tp->base.env;
	bool shm = shm_enabled(weft_setting_str("WEFT_TRANSPORTS"));
	tp->conn_of = calloc((size_t)env->nranks, sizeof(int));
	tp->peer_why = calloc((size_t)env->nranks, 1);
	tp->conns = calloc((size_t)env->nranks, sizeof(struct verbs_conn));
	if (!tp->conn_of || !tp->peer_why || !tp->conns)
		return weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "verbs: no memory");
	for (int p = 0; p < env->nranks; p++) {
		tp->conn_of[p] = -1;
		if (p == env->rank || (shm && weft_tp_same_host(env, p))) {
			tp->peer_why[p] = p == env->rank ? VERBS_PEER_SELF : VERBS_PEER_LOCAL;
			continue;
		}
		struct verbs_conn *c = &tp->conns[tp->nconns];
		c->base = (struct weft_conn){.ops = &weft_tp_verbs_ops, .tp = &tp->base, .peer = p};
		c->tp = tp;
		c->idx = tp->nconns;
		tp->conn_of[p] = tp->nconns++;
		tp->peer_why[p] = VERBS_PEER_NO_VERBS;
	}
	return WEFT_SUCCESS;
}

/* Step 1 on this rank. A hard error (bad settings, no memory) is
 * returned; "nothing to use here" leaves tp->usable false and tp->why. */
static weft_status_t prepare(struct verbs_tp *tp)
{
	weft_status_t st = read_settings(tp);
	if (st == WEFT_SUCCESS)
		st = plan_peers(tp);
	if (st != WEFT_SUCCESS || tp->nconns == 0)
		return st;
	const char *lib = weft_setting_str("WEFT_IBVERBS_LIB");
	tp->ibv = weft_verbs_lib_load(lib, tp->why, sizeof(tp->why));
	if (!tp->ibv)
		return WEFT_SUCCESS;
	if (tp->ibv->fake && !verbs_named(weft_setting_str("WEFT_TRANSPORTS"))) {
		snprintf(tp->why, sizeof(tp->why),
			 "%s is the test double, used only when WEFT_TRANSPORTS names verbs",
			 tp->ibv->name);
		return WEFT_SUCCESS;
	}
	bool found = false;
	st = weft_verbs_dev_open(tp, &found);
	if (st != WEFT_SUCCESS || !found)
		return st;
	tp->psn = ((uint32_t)getpid() * 2654435761u ^ (uint32_t)(weft_now() * 1e6)) & 0xffffff;
	weft_verbs_counters_open(&tp->counters, tp->sysfs, tp->port.dev, tp->port.port);
	st = weft_verbs_rma_init(tp);
	if (st == WEFT_SUCCESS && weft_verbs_qp_setup(tp) == WEFT_SUCCESS) {
		tp->usable = true;
		return WEFT_SUCCESS;
	}
	/* Not registering or not creating QPs leaves tp->why: no verbs here;
	 * anything else (no memory) is an error. */
	weft_verbs_qp_teardown(tp);
	weft_verbs_dev_close(tp);
	return st == WEFT_ERR_NOT_SUPPORTED ? WEFT_SUCCESS : st;
}

/* ---- the cards ---- */

/* Words of one peer entry: the line's index, then a QPN per lane. */
static size_t peer_words(const struct verbs_tp *tp)
{
	return 1 + tp->nlanes;
}

static size_t card_bytes(const struct verbs_tp *tp)
{
	size_t n = sizeof(struct verbs_card) +
		   (size_t)tp->base.env->nranks * peer_words(tp) * sizeof(uint32_t);
	return (n + 7) / 8 * 8; /* the next card's 64-bit fields stay aligned */
}

static struct verbs_card *card_at(const struct verbs_tp *tp, unsigned char *cards, int r)
{
	return (struct verbs_card *)(cards + (size_t)r * card_bytes(tp));
}

/* @p card's entry for rank @p p: [0] the index of its line, [1 + l] lane
 * l's QP number. */
static uint32_t *card_peer(const struct verbs_tp *tp, struct verbs_card *card, int p)
{
	return (uint32_t *)(card + 1) + (size_t)p * peer_words(tp);
}

static void fill_card(struct verbs_tp *tp, struct verbs_card *me, weft_status_t local)
{
	const struct weft_tp_env *env = tp->base.env;
	*me = (struct verbs_card){.magic = VERBS_CARD_MAGIC, .status = local};
	for (int p = 0; p < env->nranks; p++) {
		uint32_t *e = card_peer(tp, me, p);
		memset(e, 0, peer_words(tp) * sizeof(*e));
		e[0] = UINT32_MAX;
	}
	if (!tp->usable || local != WEFT_SUCCESS)
		return;
	me->usable = 1;
	me->link = tp->port.link;
	me->lid = tp->pattr.lid;
	me->mtu = (uint8_t)tp->pattr.active_mtu;
	me->port = (uint8_t)tp->port.port;
	me->psn = tp->psn;
	memcpy(me->gid, tp->gid.raw, 16);
	weft_rma_card(&tp->rma, &me->rma);
	me->ctl_addr = (uint64_t)(uintptr_t)tp->ctlr;
	me->ctl_rkey = tp->ctl_mr->rkey;
	for (int i = 0; i < tp->nconns; i++) {
		uint32_t *e = card_peer(tp, me, tp->conns[i].base.peer);
		e[0] = (uint32_t)i;
		for (unsigned l = 0; l < tp->nlanes; l++)
			e[1 + l] = tp->conns[i].lane[l].qp->qp_num;
	}
}

/* Step 3 for one served peer: its state line there, RTR, RTS, and the
 * protocol joined to it. Not reaching RTS is a pair not served; failing to
 * join (no memory) an error. */
static weft_status_t connect_peer(struct verbs_tp *tp, struct verbs_conn *c, unsigned char *cards)
{
	const struct weft_tp_env *env = tp->base.env;
	struct verbs_card *pc = card_at(tp, cards, c->base.peer);
	const uint32_t *pe = card_peer(tp, pc, env->rank);
	if (!pc->usable || pe[1] == 0 || pe[0] == UINT32_MAX) {
		tp->peer_why[c->base.peer] = VERBS_PEER_REMOTE;
		return WEFT_SUCCESS;
	}
	if (pc->link != (uint32_t)tp->port.link) {
		tp->peer_why[c->base.peer] = VERBS_PEER_LINK;
		return WEFT_SUCCESS;
	}
	c->ctl_addr = pc->ctl_addr + (uint64_t)pe[0] * sizeof(struct verbs_ctl);
	c->ctl_rkey = pc->ctl_rkey;
	int err = weft_verbs_qp_connect(tp, c, pc, pe + 1);
	if (err) {
		weft_log(WEFT_LOG_WARN, WEFT_SUB_NET,
			 "verbs: the QPs to rank %d (QP %u to QP %u, %u lanes) would not go to "
			 "RTR/RTS: %s",
			 c->base.peer, c->lane[0].qp->qp_num, pe[1], tp->nlanes, strerror(err));
		tp->peer_why[c->base.peer] = VERBS_PEER_CONNECT;
		return WEFT_SUCCESS;
	}
	/* Receives posted now, before step 4 lets the peer write. */
	weft_status_t st = weft_verbs_rma_connect(tp, c, pc);
	if (st != WEFT_SUCCESS)
		return st;
	c->up = true; /* until step 4 says the peer got there too */
	tp->peer_why[c->base.peer] = VERBS_PEER_UP;
	return WEFT_SUCCESS;
}

static weft_status_t check_cards(struct verbs_tp *tp, unsigned char *cards)
{
	const struct weft_tp_env *env = tp->base.env;
	for (int r = 0; r < env->nranks; r++) {
		const struct verbs_card *c = card_at(tp, cards, r);
		if (c->magic != VERBS_CARD_MAGIC || c->status != WEFT_SUCCESS)
			return weft_tp_fail(env, WEFT_ERR_REMOTE,
					    "verbs: rank %d could not set up its transport (%s)", r,
					    weft_status_string((weft_status_t)c->status));
		const struct weft_rma_card *g = &c->rma;
		if (tp->usable && c->usable &&
		    (g->nslots != tp->geom.nslots || g->slot_bytes != tp->geom.slot_bytes ||
		     g->ndesc != tp->geom.ndesc || g->nbounce != tp->geom.nbounce ||
		     g->bounce_bytes != tp->geom.bounce_bytes ||
		     g->credit_batch != tp->geom.credit_batch))
			return weft_tp_fail(
			    env, WEFT_ERR_INVALID_ARG,
			    "verbs: rank %d uses %u slots x %llu bytes, this rank %u x %zu (set "
			    "WEFT_IB_SLOTS and WEFT_IB_SLOT_BYTES alike on every rank)",
			    r, g->nslots, (unsigned long long)g->slot_bytes, tp->geom.nslots,
			    tp->geom.slot_bytes);
	}
	return WEFT_SUCCESS;
}

/* Step 4: a pair is served when both ends reached RTS. */
static weft_status_t agree_pairs(struct verbs_tp *tp)
{
	const struct weft_tp_env *env = tp->base.env;
	size_t row = ((size_t)env->nranks + 7) / 8;
	uint8_t *bits = calloc((size_t)env->nranks, row);
	if (!bits) { /* the allgather cannot run without a buffer: fail it too */
		uint8_t none[1];
		env->allgather(env->ctx, none, 0);
		return weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "verbs: no memory");
	}
	uint8_t *mine = bits + (size_t)env->rank * row;
	for (int i = 0; i < tp->nconns; i++)
		if (tp->conns[i].up)
			mine[tp->conns[i].base.peer / 8] |=
			    (uint8_t)(1u << (tp->conns[i].base.peer % 8));
	weft_status_t st = env->allgather(env->ctx, bits, row);
	for (int i = 0; st == WEFT_SUCCESS && i < tp->nconns; i++) {
		struct verbs_conn *c = &tp->conns[i];
		const uint8_t *theirs = bits + (size_t)c->base.peer * row;
		if (c->up && !(theirs[env->rank / 8] & (1u << (env->rank % 8)))) {
			c->up = false;
			tp->peer_why[c->base.peer] = VERBS_PEER_CONNECT;
		}
	}
	free(bits);
	return st;
}

static void log_outcome(struct verbs_tp *tp)
{
	int up = 0;
	for (int i = 0; i < tp->nconns; i++)
		up += tp->conns[i].up;
	if (tp->usable) {
		char gid[48];
		weft_log(
		    WEFT_LOG_INFO, WEFT_SUB_NET,
		    "verbs: %s:%d (%s, gid %d %s %s, lid %#x), %u x %zu B slots, %d of %d "
		    "peers connected, %u QP%s each (spray %s), hw_counters %s",
		    tp->port.dev, tp->port.port,
		    tp->port.link == WEFT_VERBS_LINK_IB ? "InfiniBand" : "RoCE", tp->gid.index,
		    weft_verbs_gid_type_name(tp->gid.type, tp->port.link == WEFT_VERBS_LINK_IB),
		    weft_verbs_gid_str(tp->gid.raw, gid, sizeof(gid)), tp->pattr.lid,
		    tp->geom.nslots, tp->geom.slot_bytes, up, tp->nconns, tp->nlanes,
		    tp->nlanes > 1 ? "s" : "", tp->spray == WEFT_SPRAY_ADAPTIVE ? "adaptive" : "rr",
		    tp->counters.present ? "read for signals" : "absent");
		return;
	}
	if (tp->nconns == 0)
		return;
	bool asked = verbs_named(weft_setting_str("WEFT_TRANSPORTS"));
	weft_log(asked ? WEFT_LOG_WARN : WEFT_LOG_INFO, WEFT_SUB_NET, "verbs: not used: %s",
		 tp->why);
}

static void verbs_fini(struct weft_tp *base);

/*
 * Step 0: whether any rank can use verbs at all, whether any failed, and
 * the lanes per connection, in 12 bytes a rank. Where no rank has a device
 * (most machines) the job stops here: the cards carry a line and the QP
 * numbers per peer, n x 4 (K + 1) bytes on every rank, n^2 in all, too
 * much to send only to learn that no pair is served. A rank that failed
 * fails the job here, as check_cards() would have; so do ranks that
 * disagree on WEFT_IB_QPS_PER_CONN where some rank can use verbs (the
 * lanes of a pair are QPs paired one to one, and the cards' size is
 * computed from it).
 */
struct verbs_hello {
	int32_t status;
	int32_t usable;
	uint32_t nlanes;
};

static weft_status_t check_hellos(struct verbs_tp *tp, const struct verbs_hello *all, bool *any)
{
	const struct weft_tp_env *env = tp->base.env;
	for (int r = 0; r < env->nranks; r++) {
		if (all[r].status != WEFT_SUCCESS)
			return weft_tp_fail(env, WEFT_ERR_REMOTE,
					    "verbs: rank %d could not set up its transport (%s)", r,
					    weft_status_string(all[r].status));
		*any |= all[r].usable != 0;
	}
	for (int r = 0; *any && r < env->nranks; r++)
		if (all[r].nlanes != tp->nlanes)
			return weft_tp_fail(
			    env, WEFT_ERR_INVALID_ARG,
			    "verbs: WEFT_IB_QPS_PER_CONN differs between ranks (rank "
			    "%d has %u QPs per connection, rank %d has %u; set it "
			    "alike on every rank)",
			    env->rank, tp->nlanes, r, all[r].nlanes);
	return WEFT_SUCCESS;
}

static weft_status_t say_hello(struct verbs_tp *tp, weft_status_t local, bool *any)
{
	const struct weft_tp_env *env = tp->base.env;
	struct verbs_hello *all = calloc((size_t)env->nranks, sizeof(*all));
	*any = false;
	if (!all) {
		uint8_t none[1];
		env->allgather(env->ctx, none, 0); /* fails the collective for the others */
		return weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "verbs: no memory");
	}
	all[env->rank] =
	    (struct verbs_hello){local, local == WEFT_SUCCESS && tp->usable, tp->nlanes};
	weft_status_t st = env->allgather(env->ctx, all, sizeof(*all));
	if (local != WEFT_SUCCESS)
		st = local; /* ours is the root cause, and its message is recorded */
	if (st == WEFT_SUCCESS)
		st = check_hellos(tp, all, any);
	free(all);
	return st;
}

/* Steps 1-4 where some rank can use verbs: the cards, then each pair. */
static weft_status_t exchange_cards(struct verbs_tp *tp)
{
	const struct weft_tp_env *env = tp->base.env;
	unsigned char *cards = calloc((size_t)env->nranks, card_bytes(tp));
	if (!cards) {
		uint8_t none[1];
		env->allgather(env->ctx, none, 0);
		return weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "verbs: no memory");
	}
	fill_card(tp, card_at(tp, cards, env->rank), WEFT_SUCCESS);
	weft_status_t st = env->allgather(env->ctx, cards, card_bytes(tp));
	if (st == WEFT_SUCCESS) {
		weft_status_t checked = check_cards(tp, cards);
		for (int i = 0; checked == WEFT_SUCCESS && tp->usable && i < tp->nconns; i++)
			checked = connect_peer(tp, &tp->conns[i], cards);
		st = agree_pairs(tp);
		if (checked != WEFT_SUCCESS)
			st = checked;
	}
	free(cards);
	return st;
}

static weft_status_t verbs_init(const struct weft_tp_env *env, struct weft_tp **out)
{
	*out = NULL;
	struct verbs_tp *tp = calloc(1, sizeof(*tp));
	if (!tp) {
		uint8_t none[1];
		env->allgather(env->ctx, none, 0);
		return weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "verbs: no memory");
	}
	tp->base.ops = &weft_tp_verbs_ops;
	tp->base.env = env;
	tp->base.chunk_bytes = VERBS_CHUNK;
	bool any;
	weft_status_t st = say_hello(tp, prepare(tp), &any);
	if (st == WEFT_SUCCESS && any)
		st = exchange_cards(tp);
	if (st != WEFT_SUCCESS) {
		tp->closing = true; /* no peer uses us: nothing to tell */
		verbs_fini(&tp->base);
		return st;
	}
	log_outcome(tp);
	*out = &tp->base;
	return WEFT_SUCCESS;
}

/* ---- life ---- */

/* Tell every connected peer @p state (a peer waiting on us reads it at
 * its next stall check), and wait a little for the writes to leave. */
static void tell_peers(struct verbs_tp *tp, enum verbs_state state)
{
	for (int i = 0; i < tp->nconns; i++) {
		struct verbs_conn *c = &tp->conns[i];
		uint64_t theirs = atomic_load(&c->ctl->state);
		if (!c->up || c->rc.broken || theirs == VERBS_STATE_CLOSED ||
		    theirs == VERBS_STATE_ABORTED)
			continue;
		c->ctl->state_src = state;
		struct verbs_write w = {.wr_id = weft_verbs_wr_tagged(i, VERBS_WR_STATE),
					.local = &c->ctl->state_src,
					.lkey = tp->ctl_mr->lkey,
					.len = sizeof(uint64_t),
					.raddr = c->ctl_addr + offsetof(struct verbs_ctl, state),
					.rkey = c->ctl_rkey};
		c->state_pending = weft_verbs_post_write(c, 0, &w, true) == 0;
	}
	weft_verbs_qp_drain(tp, VERBS_DRAIN_S);
}

static void verbs_abort(struct weft_tp *base)
{
	struct verbs_tp *tp = verbs_tp_of(base);
	if (!tp->usable || tp->closing)
		return;
	tp->closing = true;
	tell_peers(tp, VERBS_STATE_ABORTED);
	/* In ERR our QPs take no more writes: a peer that writes to us fails
	 * even before it reads our state. */
	for (int i = 0; i < tp->nconns; i++)
		weft_verbs_qp_error(&tp->conns[i]);
	weft_rma_abort(&tp->rma);
}

static void verbs_fini(struct weft_tp *base)
{
	struct verbs_tp *tp = verbs_tp_of(base);
	if (tp->usable && !tp->closing) {
		/* The last writes leave before the QPs go: an eager send is
		 * done once copied, not once delivered. */
		weft_verbs_rma_flush(tp);
		tp->closing = true;
		tell_peers(tp, VERBS_STATE_CLOSED);
	}
	if (tp->ibv) {
		weft_verbs_qp_teardown(tp);
		weft_verbs_dev_close(tp);
	}
	free(tp->conns);
	free(tp->conn_of);
	free(tp->peer_why);
	free(tp);
}

/* ---- connections and properties ---- */

static struct verbs_conn *conn_for(struct verbs_tp *tp, int peer)
{
	const struct weft_tp_env *env = tp->base.env;
	if (peer < 0 || peer >= env->nranks || tp->conn_of[peer] < 0)
		return NULL;
	struct verbs_conn *c = &tp->conns[tp->conn_of[peer]];
	return c->up ? c : NULL;
}

static int verbs_score(struct weft_tp *base, int peer)
{
	return conn_for(verbs_tp_of(base), peer) ? VERBS_SCORE : 0;
}

static weft_status_t verbs_connect(struct weft_tp *base, int peer, struct weft_conn **out)
{
	struct verbs_conn *c = conn_for(verbs_tp_of(base), peer);
	if (!c)
		return weft_tp_fail(base->env, WEFT_ERR_INTERNAL,
				    "verbs: cannot connect to rank %d", peer);
	*out = &c->base; /* connected at init */
	return WEFT_SUCCESS;
}

/* Bandwidth: the port's signalling rate (the lanes share the port). Weft's
 * pacer stays off on verbs: a RoCE NIC runs DCQCN in hardware, and a
 * second controller on top would fight it (verbs.h, "Pacing"). */
/* weft_mem_register's regions stay registered (a pinned entry of the RMA
 * protocol's cache) until deregistered: its messages then register
 * nothing. */
static weft_status_t verbs_mem_reg(struct weft_tp *base, void *buf, size_t len, struct weft_mr **mr,
				   struct weft_mr_key *key)
{
	return weft_mr_cache_pin(&verbs_tp_of(base)->rma.cache, buf, len, mr, key);
}

static void verbs_mem_dereg(struct weft_tp *base, struct weft_mr *mr)
{
	weft_mr_cache_unpin(&verbs_tp_of(base)->rma.cache, mr);
}

static void verbs_props(struct weft_tp *base, int peer, struct weft_tp_props *out)
{
	struct verbs_tp *tp = verbs_tp_of(base);
	*out = (struct weft_tp_props){
	    .latency_s = VERBS_LATENCY_S,
	    .bandwidth_Bps = tp->port_Bps,
	    .ordered = true,
	    .needs_registration = true,
	    .rate_controlled = true, /* core/gate.c leaves these connections unpaced */
	    .source = "provider",
	};
}

static void verbs_describe(struct weft_tp *base, int peer, char *buf, size_t len)
{
	struct verbs_tp *tp = verbs_tp_of(base);
	bool ib = tp->port.link == WEFT_VERBS_LINK_IB;
	char lanes[48];
	weft_verbs_lanes_describe(tp, lanes, sizeof(lanes));
	switch ((enum verbs_peer_why)tp->peer_why[peer]) {
	case VERBS_PEER_UP:
		if (ib)
			snprintf(buf, len, "verbs(%s:%d lid %#x, %u x %zu B slots%s)", tp->port.dev,
				 tp->port.port, tp->pattr.lid, tp->geom.nslots, tp->geom.slot_bytes,
				 lanes);
		else
			snprintf(buf, len, "verbs(%s:%d gid %d %s, %u x %zu B slots%s)",
				 tp->port.dev, tp->port.port, tp->gid.index,
				 weft_verbs_gid_type_name(tp->gid.type, false), tp->geom.nslots,
				 tp->geom.slot_bytes, lanes);
		return;
	case VERBS_PEER_SELF: snprintf(buf, len, "verbs: self"); return;
	case VERBS_PEER_LOCAL:
		snprintf(buf, len, "verbs: not used for rank %d (this host: shm serves it)", peer);
		return;
	case VERBS_PEER_NO_VERBS: snprintf(buf, len, "verbs: unavailable: %s", tp->why); return;
	case VERBS_PEER_REMOTE:
		snprintf(buf, len, "verbs: rank %d has no usable RDMA port (see its log)", peer);
		return;
	case VERBS_PEER_LINK:
		snprintf(buf, len, "verbs: rank %d's port has another link layer than %s:%d (%s)",
			 peer, tp->port.dev, tp->port.port, ib ? "InfiniBand" : "Ethernet");
		return;
	case VERBS_PEER_CONNECT:
		snprintf(buf, len,
			 "verbs: the queue pair with rank %d did not connect (see the log)", peer);
		return;
	}
}

static const struct weft_setting verbs_settings[] = {
    {"WEFT_IBVERBS_LIB", WEFT_IBVERBS_DEFAULT, "the libibverbs the verbs transport loads (dlopen)"},
    {"WEFT_IB_HCA", NULL,
     "RDMA ports to use, as NCCL_IB_HCA: mlx5_0:1,mlx5_1; ^mlx5_2 avoids; =name matches exactly"},
    {"WEFT_IB_GID_INDEX", NULL,
     "RoCE GID index (default: from gid_attrs, RoCE v2 with the IPv4 address of the NIC used)"},
    {"WEFT_IB_TC", "0",
     "traffic class of RoCE packets (DSCP << 2): the fabric's lossless, ECN-marked class"},
    {"WEFT_IB_SL", "0", "service level (InfiniBand virtual lane; priority on some RoCE NICs)"},
    {"WEFT_IB_TIMEOUT", "14",
     "RC ack timeout, 4.096 us * 2^n (14: 67 ms); with the retries, how soon a dead peer shows"},
    {"WEFT_IB_RETRY_CNT", "7", "RC retransmissions before a write to a silent peer fails"},
    {"WEFT_IB_SLOTS", NULL,
     "verbs: landing slots per peer, a power of two (default 16, fewer for large jobs)"},
    {"WEFT_IB_SLOT_BYTES", NULL,
     "verbs: bytes per landing slot; larger messages go by rendezvous (default 16K)"},
    {"WEFT_IB_QPS_PER_CONN", "1",
     "verbs: RC QPs (lanes, 1-8) per peer, as NCCL_IB_QPS_PER_CONNECTION; rendezvous data "
     "spreads over them by WEFT_SPRAY, and on RoCE v2 each has its own UDP source port "
     "for ECMP; the same on every rank"},
    {"WEFT_IB_STALL", NULL,
     "older name of WEFT_PATH_STALL for verbs: seconds a busy connection may stall before the "
     "peer is checked (default 0.1)"},
    {"WEFT_IB_SYSFS", "/sys", "root of the sysfs tree read for RDMA ports and GIDs (tests)"},
};

const struct weft_tp_ops weft_tp_verbs_ops = {
    .size = sizeof(struct weft_tp_ops),
    .name = "verbs",
    .settings = verbs_settings,
    .nsettings = sizeof(verbs_settings) / sizeof(verbs_settings[0]),
    .life = {.init = verbs_init, .fini = verbs_fini, .abort = verbs_abort},
    .conn = {.score = verbs_score, .connect = verbs_connect, .connected = weft_tp_no_connected},
    .msg = {.isend = weft_tp_verbs_isend,
	    .irecv = weft_tp_verbs_irecv,
	    .progress = weft_tp_verbs_progress},
    .mem = {.reg = verbs_mem_reg,
	    .dereg = verbs_mem_dereg,
	    .map = weft_tp_no_map,
	    .unmap = weft_tp_no_unmap},
    .rma = {.write = weft_tp_no_write, .get = weft_tp_no_get},
    .prop = {.props = verbs_props, .describe = verbs_describe, .paths = weft_tp_no_paths},
    .signal = {.signals = weft_tp_verbs_signals, .pace = weft_tp_no_pace},
    .wait = WEFT_TP_NO_WAIT_OPS,
};
