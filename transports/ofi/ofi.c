/*
 * ofi.c — the libfabric transport's life: settings, when to load
 * libfabric at all, the endpoint and its card, connections, score,
 * properties, abort, and the ops table. The tagged path is in
 * ofi_tagged.c, the rma path in ofi_rma.c; the objects are described in
 * ofi.h.
 *
 * When ofi wakes up. Loading libfabric and asking it for providers costs
 * about 0.2 s per process here, and its software providers (tcp, sockets,
 * udp) move less than the socket transport, so they never outrank it. So
 * a communicator's init opens libfabric only when it could be chosen: the
 * user asked for it (WEFT_TRANSPORTS names ofi or leaves out socket,
 * WEFT_OFI_PROVIDER or FI_PROVIDER is set), or the host shows RDMA
 * hardware (/sys/class/infiniband, /dev/cxi0, /dev/hfi1_0). Otherwise it
 * stays idle: it serves nobody and weft-topo says why. Asked for and
 * failing is an error; not asked for and failing is idle, logged at INFO.
 *
 * init is collective and runs the same steps on every rank, usable or
 * not: build the endpoint, allgather the cards, insert every usable
 * peer's name into the address vector. A peer whose card says it is not
 * usable, or uses another provider, scores 0 on both sides.
 */
#include "transports/ofi/ofi.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/common/tp_stubs.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/proc.h"
#include "util/settings.h"

/* Scores: below the socket transport (10) over software providers, above
 * it (below shm, 100) with hardware behind. */
#define OFI_SCORE_SOFT 5
#define OFI_SCORE_HW   50

static struct ofi_tp *to_tp(struct weft_tp *base)
{
	return weft_container_of(base, struct ofi_tp, base);
}

static weft_status_t read_settings(struct ofi_tp *tp)
{
	const struct weft_tp_env *env = tp->base.env;
	tp->neps = 1;
	const char *proto = weft_setting_str("WEFT_OFI_PROTO");
	if (strcmp(proto, "tagged") == 0)
		tp->proto = OFI_PROTO_TAGGED;
	else if (strcmp(proto, "rma") == 0)
		tp->proto = OFI_PROTO_RMA;
	else
		return weft_ofi_bad_setting(env, "WEFT_OFI_PROTO", "tagged or rma");
	long chunk = 0;
	if (!weft_setting_long("WEFT_OFI_CHUNK", &chunk) || chunk < 4096 || chunk > (64L << 20))
		return weft_ofi_bad_setting(env, "WEFT_OFI_CHUNK", "a size from 4K to 64M");
	tp->chunk = (size_t)chunk & ~(size_t)4095;
	tp->base.chunk_bytes = tp->chunk;
	double stall = 0.1;
	weft_status_t st = weft_tp_read_stall(env, "ofi", "WEFT_OFI_STALL", 0.001, 60, &stall);
	if (st != WEFT_SUCCESS)
		return st;
	tp->stall_s = stall;
	long eps = 1;
	if (!weft_setting_long("WEFT_OFI_EPS", &eps) || eps < 1 || eps > OFI_EPS_MAX)
		return weft_ofi_bad_setting(env, "WEFT_OFI_EPS", "endpoints from 1 to 8");
	if (eps > 1 && tp->proto == OFI_PROTO_RMA)
		return weft_ofi_bad_setting(env, "WEFT_OFI_EPS",
					    "1 with WEFT_OFI_PROTO=rma (sub-flows are the "
					    "tagged path's)");
	tp->neps = (unsigned)eps;
	return WEFT_SUCCESS;
}

/*
 * Over rxm, every message of the tagged path goes eager, up to the chunk.
 * rxm (libfabric 1.17) sends a message above its eager limit (16 KiB) by
 * rendezvous, and one that arrives before its receive is posted waits as
 * a header naming its connection. When that peer dies or closes, rxm
 * closes the connection but leaves the header queued; the receive that
 * matches it later reads over the closed connection and the process dies
 * of a NULL endpoint (fi_readv in rxm_rndv_read): a survivor of a failed
 * peer crashed in fi_trecv so. An eager message is whole once it is
 * queued, so it outlives its connection. Over tcp, rxm's eager path
 * receives straight into a posted buffer and sends from the user's
 * (dynamic receive buffers, direct send), so nothing is copied that
 * rendezvous did not copy; an unexpected message waits in a buffer of its
 * size, which the pipeline's chunks bound. rxm reads its settings from
 * the environment when the endpoint opens; one the user set stays.
 */
static void rxm_eager_chunks(const struct ofi_tp *tp)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	if (tp->proto != OFI_PROTO_TAGGED || !strstr(tp->info->fabric_attr->prov_name, "ofi_rxm"))
		return;
	char value[32];
	snprintf(value, sizeof(value), "%zu", tp->chunk);
	pthread_mutex_lock(&lock);
	if (!getenv("FI_OFI_RXM_EAGER_LIMIT")) {
		setenv("FI_OFI_RXM_EAGER_LIMIT", value, 0);
		weft_log(WEFT_LOG_INFO, WEFT_SUB_NET,
			 "ofi: FI_OFI_RXM_EAGER_LIMIT=%s (messages up to the chunk go eager)",
			 value);
	}
	pthread_mutex_unlock(&lock);
}

/* fabric, domain, completion queue, address vector, endpoint. */
static weft_status_t open_endpoint(struct ofi_tp *tp)
{
	struct fi_info *i = tp->info;
	rxm_eager_chunks(tp);
	int ret = tp->lib.fabric(i->fabric_attr, &tp->fabric, NULL);
	if (ret)
		return weft_ofi_fail(tp, ret, "fi_fabric(%s)", i->fabric_attr->prov_name);
	if ((ret = fi_domain(tp->fabric, i, &tp->domain, NULL)))
		return weft_ofi_fail(tp, ret, "fi_domain(%s)", i->domain_attr->name);
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	if ((ret = fi_cq_open(tp->domain, &cq_attr, &tp->cq, NULL)))
		return weft_ofi_fail(tp, ret, "fi_cq_open");
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = (size_t)tp->base.env->nranks};
	if ((ret = fi_av_open(tp->domain, &av_attr, &tp->av, NULL)))
		return weft_ofi_fail(tp, ret, "fi_av_open");
	if (tp->neps > 1 && (i->domain_attr->mr_mode & FI_MR_ENDPOINT))
		return weft_tp_fail(tp->base.env, WEFT_ERR_NOT_SUPPORTED,
				    "ofi: %s binds registrations to one endpoint: WEFT_OFI_EPS=%u "
				    "needs a provider without FI_MR_ENDPOINT",
				    i->fabric_attr->prov_name, tp->neps);
	for (unsigned e = 0; e < tp->neps; e++) {
		struct fid_ep *ep;
		if ((ret = fi_endpoint(tp->domain, i, &ep, NULL)))
			return weft_ofi_fail(tp, ret, "fi_endpoint %u of %u", e + 1, tp->neps);
		tp->eps[e] = ep;
		if ((ret = fi_ep_bind(ep, &tp->cq->fid, FI_TRANSMIT | FI_RECV)) ||
		    (ret = fi_ep_bind(ep, &tp->av->fid, 0)))
			return weft_ofi_fail(tp, ret, "fi_ep_bind");
		if ((ret = fi_enable(ep)))
			return weft_ofi_fail(tp, ret, "fi_enable");
	}
	tp->ep = tp->eps[0];
	return WEFT_SUCCESS;
}

/* Every endpoint's name, one after the other, all of one length. */
static weft_status_t card_names(struct ofi_tp *tp, struct ofi_card *card)
{
	size_t off = 0;
	for (unsigned e = 0; e < tp->neps; e++) {
		size_t len = sizeof(card->name) - off;
		int ret = fi_getname(&tp->eps[e]->fid, card->name + off, &len);
		if (ret == -FI_ETOOSMALL)
			return weft_tp_fail(tp->base.env, WEFT_ERR_NOT_SUPPORTED,
					    "ofi: %u endpoint names of %s do not fit a card's %zu "
					    "bytes (set WEFT_OFI_EPS lower)",
					    tp->neps, tp->info->fabric_attr->prov_name,
					    sizeof(card->name));
		if (!ret && e > 0 && len != card->namelen)
			return weft_tp_fail(tp->base.env, WEFT_ERR_NOT_SUPPORTED,
					    "ofi: %s gave endpoint names of %zu and %u bytes "
					    "(WEFT_OFI_EPS needs them alike)",
					    tp->info->fabric_attr->prov_name, len, card->namelen);
		if (ret)
			return weft_ofi_fail(tp, ret, "fi_getname");
		card->namelen = (uint32_t)len;
		off += len;
	}
	card->neps = tp->neps;
	return WEFT_SUCCESS;
}

/* While ofi only looks around (not asked for), its failures are reasons to
 * stay idle, not errors of the communicator: they land in idle_buf. */
static weft_status_t quiet_fail(void *ctx, weft_status_t status, const char *msg)
{
	struct ofi_tp *tp = ctx;
	if (!tp->idle) {
		snprintf(tp->idle_buf, sizeof(tp->idle_buf), "%s", msg);
		tp->idle = tp->idle_buf;
	}
	return status;
}

/* Everything up to the card. */
static weft_status_t setup_local(struct ofi_tp *tp, struct ofi_card *card)
{
	weft_status_t st = WEFT_ERR_NOT_SUPPORTED;
	if (!weft_ofi_lib_load(&tp->lib, tp->idle_buf, sizeof(tp->idle_buf)))
		return weft_tp_fail(tp->base.env, st, "ofi: %s", tp->idle_buf);
	st = weft_ofi_choose(tp);
	if (st == WEFT_SUCCESS)
		st = open_endpoint(tp);
	if (st == WEFT_SUCCESS)
		st = tp->proto == OFI_PROTO_RMA ? weft_ofi_rma_init(tp) : weft_ofi_tagged_init(tp);
	if (st != WEFT_SUCCESS)
		return st;
	weft_live_open(&tp->live, tp->base.env, &card->live);
	st = card_names(tp, card);
	if (st != WEFT_SUCCESS)
		return st;
	snprintf(card->prov, sizeof(card->prov), "%s", tp->info->fabric_attr->prov_name);
	if (tp->proto == OFI_PROTO_RMA)
		weft_rma_card(&tp->rma, &card->rma);
	return WEFT_SUCCESS;
}

/* Asked for: setup with the communicator's errors. Not asked for: look
 * only where there is hardware, and quietly. */
static weft_status_t setup(struct ofi_tp *tp, struct ofi_card *card, bool asked)
{
	if (asked)
		return setup_local(tp, card);
	if (!weft_ofi_hardware_visible()) {
		tp->idle = "no RDMA device here and ofi not asked for (WEFT_TRANSPORTS, "
			   "WEFT_OFI_PROVIDER, FI_PROVIDER)";
		return WEFT_ERR_NOT_SUPPORTED;
	}
	const struct weft_tp_env *env = tp->base.env;
	tp->quiet_env = *env;
	tp->quiet_env.ctx = tp;
	tp->quiet_env.fail = quiet_fail;
	tp->base.env = &tp->quiet_env;
	weft_status_t st = setup_local(tp, card);
	tp->base.env = env;
	tp->rma.env = env; /* from here on, failures are the communicator's */
	return st;
}

static bool usable_peer(const struct ofi_tp *tp, int r)
{
	const struct ofi_card *c = &tp->cards[r];
	return c->magic == OFI_CARD_MAGIC && c->status == WEFT_SUCCESS &&
	       strcmp(c->prov, tp->cards[tp->base.env->rank].prov) == 0;
}

/* After the allgather: the same path everywhere, and every usable peer in
 * the address vector at its rank's index. */
static weft_status_t join_peers(struct ofi_tp *tp, bool asked)
{
	const struct weft_tp_env *env = tp->base.env;
	for (int r = 0; r < env->nranks; r++) {
		const struct ofi_card *c = &tp->cards[r];
		if (asked && (c->magic != OFI_CARD_MAGIC || c->status != WEFT_SUCCESS))
			return weft_tp_fail(env, WEFT_ERR_REMOTE,
					    "ofi: rank %d could not open libfabric (%s)", r,
					    weft_status_string((weft_status_t)c->status));
		if (asked && !usable_peer(tp, r))
			return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
					    "ofi: rank %d uses provider %s, this rank %s (set "
					    "WEFT_OFI_PROVIDER alike on every rank)",
					    r, c->prov, tp->cards[env->rank].prov);
		if (usable_peer(tp, r) && c->proto != (uint32_t)tp->proto)
			return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
					    "ofi: WEFT_OFI_PROTO differs between ranks (rank %d "
					    "runs %s, rank %d %s)",
					    env->rank, tp->proto ? "rma" : "tagged", r,
					    c->proto ? "rma" : "tagged");
		if (usable_peer(tp, r) && c->neps != tp->neps)
			return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
					    "ofi: WEFT_OFI_EPS differs between ranks (rank %d has "
					    "%u endpoints, rank %d has %u)",
					    env->rank, tp->neps, r, c->neps);
	}
	for (int r = 0; r < env->nranks; r++) {
		fi_addr_t *at = &tp->addrs[(size_t)r * tp->neps];
		for (unsigned e = 0; e < tp->neps; e++)
			at[e] = FI_ADDR_NOTAVAIL;
		/* FI_AV_TABLE hands out indices in insertion order: insert one
		 * name at a time and keep what comes back. */
		for (unsigned e = 0; usable_peer(tp, r) && e < tp->neps; e++) {
			const struct ofi_card *c = &tp->cards[r];
			int ret = fi_av_insert(tp->av, c->name + (size_t)e * c->namelen, 1, &at[e],
					       0, NULL);
			if (ret != 1)
				return weft_ofi_fail(tp, ret < 0 ? ret : -FI_EADDRNOTAVAIL,
						     "fi_av_insert of rank %d's endpoint %u", r, e);
		}
	}
	return WEFT_SUCCESS;
}

static void ofi_fini(struct weft_tp *base);
static weft_status_t ofi_progress(struct weft_tp *base);

/* The cards travel only if some rank can use them: first one status word
 * per rank (all that a job without RDMA exchanges), then, when a rank is
 * usable, the cards themselves. */
static weft_status_t exchange(struct ofi_tp *tp, weft_status_t mine)
{
	const struct weft_tp_env *env = tp->base.env;
	int32_t *all = calloc((size_t)env->nranks, sizeof(*all)), none[1];
	if (!all) {
		env->allgather(env->ctx, none, 0); /* fails the collective for the others */
		return weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "ofi: no memory");
	}
	all[env->rank] = mine;
	weft_status_t st = env->allgather(env->ctx, all, sizeof(*all));
	bool any = false;
	for (int r = 0; r < env->nranks; r++)
		any |= all[r] == WEFT_SUCCESS;
	free(all);
	if (st != WEFT_SUCCESS || !any)
		return st;
	return env->allgather(env->ctx, tp->cards, sizeof(*tp->cards));
}

/* After the exchange: an error, idle, or joined. */
static weft_status_t settle(struct ofi_tp *tp, weft_status_t st, weft_status_t gst, bool asked)
{
	if (gst != WEFT_SUCCESS)
		return st != WEFT_SUCCESS ? st : gst; /* our own failure is the root cause */
	if (st == WEFT_SUCCESS)
		return join_peers(tp, asked);
	if (asked || st == WEFT_ERR_INVALID_ARG)
		return st;
	if (!tp->idle) {
		snprintf(tp->idle_buf, sizeof(tp->idle_buf), "libfabric could not be set up (%s)",
			 weft_status_string(st));
		tp->idle = tp->idle_buf;
	}
	weft_log(WEFT_LOG_INFO, WEFT_SUB_NET, "ofi: idle: %s", tp->idle);
	return WEFT_SUCCESS;
}

static weft_status_t ofi_init(const struct weft_tp_env *env, struct weft_tp **out)
{
	*out = NULL;
	struct ofi_tp *tp = calloc(1, sizeof(*tp));
	struct ofi_card *cards = calloc((size_t)env->nranks, sizeof(*cards));
	if (!tp || !cards) {
		char none[1];
		free(tp);
		free(cards);
		env->allgather(env->ctx, none, 0); /* fails the collective for the others */
		return weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "ofi: no memory");
	}
	tp->base.ops = &weft_tp_ofi_ops;
	tp->base.env = env;
	tp->live.listen_fd = -1;
	tp->cards = cards;
	bool asked = weft_ofi_requested();
	struct ofi_card *card = &cards[env->rank];
	weft_status_t st = read_settings(tp);
	tp->conns = calloc((size_t)env->nranks, sizeof(*tp->conns));
	tp->addrs = calloc((size_t)env->nranks * tp->neps, sizeof(*tp->addrs));
	if (st == WEFT_SUCCESS && (!tp->conns || !tp->addrs))
		st = weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "ofi: no memory");
	if (st == WEFT_SUCCESS)
		st = setup(tp, card, asked);
	card->magic = OFI_CARD_MAGIC;
	card->status = st;
	card->proto = tp->proto;
	/* Every rank takes part, so that the others learn why instead of
	 * waiting for us until the timeout. */
	st = settle(tp, st, exchange(tp, st), asked);
	if (st != WEFT_SUCCESS) {
		ofi_fini(&tp->base);
		return st;
	}
	/* A peer's first write must find our receives for it posted. */
	tp->base.connect_at_init = tp->proto == OFI_PROTO_RMA;
	*out = &tp->base;
	return WEFT_SUCCESS;
}

/* Close @p fid (named @p what for the log); a close the provider refuses
 * leaves its descriptors behind, so it is said. */
static void close_fid(struct ofi_tp *tp, struct fid *fid, const char *what)
{
	int ret = fid ? fi_close(fid) : 0;
	if (ret)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_NET, "ofi: fi_close(%s): %s", what,
			 weft_ofi_strerror(tp, ret));
}

static void close_endpoint(struct ofi_tp *tp)
{
	for (unsigned e = 0; !tp->ep_closed && e < OFI_EPS_MAX; e++)
		close_fid(tp, tp->eps[e] ? &tp->eps[e]->fid : NULL, "endpoint");
	tp->ep_closed = true;
}

/* Before an abort closes the endpoint under operations still posted:
 * cancel the receives and read what the provider reports, for at most
 * 100 ms (50 empty reads in a row end it sooner), so that the close does
 * not tear down queues with work in them (tcp;ofi_rxm crashed in fi_close
 * so in the fault loop). The completions are dropped: every message
 * fails with the abort after. */
static void cancel_posted(struct ofi_tp *tp)
{
	if (tp->idle || !tp->ep || tp->ep_closed)
		return;
	struct fid *ep = &tp->ep->fid;
	for (int r = 0; tp->proto == OFI_PROTO_TAGGED && tp->conns && r < tp->base.env->nranks; r++)
		for (struct weft_tp_req *q = tp->conns[r].reqs.head; q; q = q->next) {
			struct ofi_req *o = weft_container_of(q, struct ofi_req, base);
			if (o->posted)
				fi_cancel(&tp->eps[o->flow]->fid, &o->ctx);
		}
	for (size_t i = 0; tp->imm_ctx && i < tp->nimm_ctx; i++)
		fi_cancel(ep, &tp->imm_ctx[i]);
	double end = weft_now() + 0.1;
	for (int empty = 0; empty < 50 && weft_now() < end;) {
		struct fi_cq_tagged_entry ev[16];
		ssize_t n = fi_cq_read(tp->cq, ev, 16);
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry e;
			memset(&e, 0, sizeof(e));
			fi_cq_readerr(tp->cq, &e, 0);
			empty = 0;
		} else if (n > 0) {
			empty = 0;
		} else {
			empty++;
		}
	}
}

static void ofi_abort(struct weft_tp *base)
{
	struct ofi_tp *tp = to_tp(base);
	/* Closing the endpoint is what peers notice; nothing lands in our
	 * buffers after it. */
	cancel_posted(tp);
	close_endpoint(tp);
	weft_live_close(&tp->live);
	if (tp->idle)
		return;
	if (tp->proto == OFI_PROTO_RMA && tp->rma.conns)
		weft_rma_abort(&tp->rma);
	for (int r = 0; tp->proto == OFI_PROTO_TAGGED && r < base->env->nranks; r++)
		if (tp->conns[r].tp)
			weft_ofi_tagged_fail_conn(&tp->conns[r], WEFT_ERR_ABORTED);
}

/* Before closing in order: what was sent but has not left yet leaves now
 * (a send is done once its bytes are the provider's, and a rank that
 * exits right after its last send would lose them). Bounded: a peer that
 * does not take them fails them, or the time runs out. */
static void flush(struct ofi_tp *tp)
{
	double end = weft_now() + (tp->base.env->timeout_s < 5 ? tp->base.env->timeout_s : 5);
	for (;;) {
		bool pending = tp->proto == OFI_PROTO_RMA ? weft_rma_writes_pending(&tp->rma)
							  : weft_ofi_tagged_sends_pending(tp);
		if (!pending || weft_now() > end)
			return;
		if (ofi_progress(&tp->base) != WEFT_SUCCESS)
			return;
	}
}

static void ofi_fini(struct weft_tp *base)
{
	struct ofi_tp *tp = to_tp(base);
	if (!tp->idle && tp->ep && !tp->ep_closed &&
	    (tp->rma.conns || tp->proto == OFI_PROTO_TAGGED))
		flush(tp);
	close_endpoint(tp);
	weft_live_fini(&tp->live);
	if (tp->proto == OFI_PROTO_RMA && tp->rma.conns)
		weft_rma_fini(&tp->rma);
	if (tp->proto == OFI_PROTO_TAGGED)
		weft_ofi_tagged_fini(tp);
	free(tp->imm_ctx);
	close_fid(tp, tp->av ? &tp->av->fid : NULL, "address vector");
	close_fid(tp, tp->cq ? &tp->cq->fid : NULL, "completion queue");
	close_fid(tp, tp->domain ? &tp->domain->fid : NULL, "domain");
	close_fid(tp, tp->fabric ? &tp->fabric->fid : NULL, "fabric");
	if (tp->info)
		tp->lib.freeinfo(tp->info);
	free(tp->addrs);
	free(tp->conns);
	free(tp->cards);
	free(tp);
}

static int ofi_score(struct weft_tp *base, int peer)
{
	struct ofi_tp *tp = to_tp(base);
	const struct weft_tp_env *env = base->env;
	if (tp->idle || peer == env->rank || !usable_peer(tp, peer))
		return 0;
	/* libfabric's shm provider reaches this host only. */
	if (strcmp(tp->info->fabric_attr->prov_name, "shm") == 0 && !weft_tp_same_host(env, peer))
		return 0;
	return tp->hardware ? OFI_SCORE_HW : OFI_SCORE_SOFT;
}

static weft_status_t ofi_connect(struct weft_tp *base, int peer, struct weft_conn **out)
{
	struct ofi_tp *tp = to_tp(base);
	*out = NULL;
	if (ofi_score(base, peer) == 0)
		return weft_tp_fail(base->env, WEFT_ERR_INTERNAL, "ofi: cannot connect to rank %d",
				    peer);
	struct ofi_conn *c = &tp->conns[peer];
	if (!c->tp) {
		c->base.ops = &weft_tp_ofi_ops;
		c->base.tp = base;
		c->base.peer = peer;
		c->tp = tp;
		c->addrs = &tp->addrs[(size_t)peer * tp->neps];
		c->addr = c->addrs[0];
		/* The provider connects on the first message (rxm does); nothing
		 * here waits. */
		if (tp->proto == OFI_PROTO_RMA) {
			weft_status_t st = weft_ofi_rma_connect(tp, peer);
			if (st != WEFT_SUCCESS)
				return st;
		}
	}
	*out = &c->base;
	return WEFT_SUCCESS;
}

static weft_status_t ofi_isend(struct weft_conn *conn, struct weft_msg *msg)
{
	struct ofi_tp *tp = to_tp(conn->tp);
	return tp->proto == OFI_PROTO_RMA ? weft_ofi_rma_isend(conn, msg)
					  : weft_ofi_tagged_isend(conn, msg);
}

static weft_status_t ofi_irecv(struct weft_conn *conn, struct weft_msg *msg)
{
	struct ofi_tp *tp = to_tp(conn->tp);
	return tp->proto == OFI_PROTO_RMA ? weft_ofi_rma_irecv(conn, msg)
					  : weft_ofi_tagged_irecv(conn, msg);
}

static weft_status_t ofi_progress(struct weft_tp *base)
{
	struct ofi_tp *tp = to_tp(base);
	weft_live_serve(&tp->live); /* peers' probes, strangers: bounded, every 10 ms */
	if (tp->idle || tp->ep_closed)
		return WEFT_SUCCESS;
	return tp->proto == OFI_PROTO_RMA ? weft_ofi_rma_progress(tp)
					  : weft_ofi_tagged_progress(tp);
}

/* Where the provider gives no figures: what ofi_stream measured here over
 * tcp;ofi_rxm on loopback (docs/benchmarks.md, "ofi"), and a 100 Gb/s NIC. */
#define OFI_SOFT_LATENCY_S 25e-6
#define OFI_SOFT_BPS	   1.5e9
#define OFI_HW_LATENCY_S   2e-6
#define OFI_HW_BPS	   12.5e9

bool weft_ofi_peer_gone(struct ofi_tp *tp, int peer, char *why, size_t len)
{
	/* A host that does not answer at all is given up after this long. */
	const struct weft_tp_env *env = tp->base.env;
	double give_up = env->timeout_s < 10 ? env->timeout_s : 10;
	if (weft_live_check(&tp->live, peer, &tp->cards[peer].live, give_up, why, len) !=
	    WEFT_LIVE_GONE)
		return false;
	/* A peer on this host that died between its pid check and the probe:
	 * say so, as the pid check would have. */
	if (weft_tp_same_host(env, peer) && env->peers[peer].pid > 0 &&
	    !weft_pid_alive(env->peers[peer].pid))
		snprintf(why, len, "the process (pid %d) died", env->peers[peer].pid);
	return true;
}

/* The registration cache a message of this communicator would use: the
 * RMA protocol's, or the tagged path's where the provider wants local
 * descriptors (FI_MR_LOCAL); NULL where nothing is registered. */
static struct weft_mr_cache *reg_cache(struct ofi_tp *tp)
{
	if (tp->proto == OFI_PROTO_RMA)
		return &tp->rma.cache;
	return tp->info && (tp->info->domain_attr->mr_mode & FI_MR_LOCAL) ? &tp->cache : NULL;
}

/* weft_mem_register's regions stay registered (a pinned cache entry) until
 * deregistered: its messages then register nothing. */
static weft_status_t ofi_mem_reg(struct weft_tp *base, void *buf, size_t len, struct weft_mr **mr,
				 struct weft_mr_key *key)
{
	struct weft_mr_cache *c = reg_cache(to_tp(base));
	*mr = NULL;
	return c ? weft_mr_cache_pin(c, buf, len, mr, key) : WEFT_ERR_NOT_SUPPORTED;
}

static void ofi_mem_dereg(struct weft_tp *base, struct weft_mr *mr)
{
	struct weft_mr_cache *c = reg_cache(to_tp(base));
	if (c)
		weft_mr_cache_unpin(c, mr);
}

static void ofi_props(struct weft_tp *base, int peer, struct weft_tp_props *out)
{
	struct ofi_tp *tp = to_tp(base);
	const struct fi_info *i = tp->info;
	size_t speed = i && i->nic && i->nic->link_attr ? i->nic->link_attr->speed : 0;
	*out = (struct weft_tp_props){
	    .latency_s = tp->hardware ? OFI_HW_LATENCY_S : OFI_SOFT_LATENCY_S,
	    .bandwidth_Bps = speed	    ? (double)speed / 8
			     : tp->hardware ? OFI_HW_BPS
					    : OFI_SOFT_BPS,
	    .max_msg = i && i->ep_attr->max_msg_size < SIZE_MAX ? i->ep_attr->max_msg_size : 0,
	    .ordered = tp->proto == OFI_PROTO_RMA,
	    .needs_registration = tp->idle == NULL && reg_cache(tp) != NULL,
	    .source = speed ? "provider" : "default",
	};
}

static void ofi_describe(struct weft_tp *base, int peer, char *buf, size_t len)
{
	struct ofi_tp *tp = to_tp(base);
	if (tp->idle)
		snprintf(buf, len, "ofi(idle: %s)", tp->idle);
	else if (tp->neps > 1)
		snprintf(buf, len, "ofi(%s, %u endpoints)", tp->info->fabric_attr->prov_name,
			 tp->neps);
	else
		snprintf(buf, len, "ofi(%s)", tp->info->fabric_attr->prov_name);
}

static const struct weft_setting ofi_settings[] = {
    {"WEFT_OFI_PROVIDER", NULL,
     "libfabric provider, e.g. 'tcp;ofi_rxm' or 'verbs;ofi_rxm' (default: FI_PROVIDER, else "
     "the first that fits)"},
    {"WEFT_OFI_PROTO", "tagged",
     "ofi path: 'tagged' (fi_tsend/fi_trecv) or 'rma' (writes with immediate data into "
     "landing slots and receiver-registered buffers: the protocol verbs runs)"},
    {"WEFT_OFI_CHUNK", "512K", "bytes per pipelined chunk over libfabric"},
    {"WEFT_OFI_EPS", "1",
     "tagged path: endpoints per rank (1-8), sub-flows a message's tag picks; over a "
     "connection-based provider each has its own connections, and ECMP its own path"},
    {"WEFT_OFI_SLOTS", NULL,
     "rma: landing slots per peer, a power of two (default 16, fewer "
     "for large jobs)"},
    {"WEFT_OFI_SLOT_BYTES", NULL,
     "rma: bytes per landing slot; larger messages go by rendezvous (default 16K)"},
    {"WEFT_OFI_STALL", NULL,
     "older name of WEFT_PATH_STALL for ofi: seconds a busy connection may stall before the "
     "peer's liveness is checked (default 0.1)"},
    {"WEFT_OFI_LIB", "libfabric.so.1", "the libfabric library to load"},
};

/* Signals: libfabric's endpoint API gives no congestion feedback (no ECN or
 * CNP counts, no RTT) from any provider, so the entry is the stub; the RDMA
 * device's hw_counters are the verbs transport's to read. mem and rma: the
 * contract's registration and one-sided ops have no caller yet; the rma
 * path registers through its own cache (ofi_mr.c). */
const struct weft_tp_ops weft_tp_ofi_ops = {
    .size = sizeof(struct weft_tp_ops),
    .name = "ofi",
    .settings = ofi_settings,
    .nsettings = sizeof(ofi_settings) / sizeof(ofi_settings[0]),
    .life = {.init = ofi_init, .fini = ofi_fini, .abort = ofi_abort},
    .conn = {.score = ofi_score, .connect = ofi_connect, .connected = weft_tp_no_connected},
    .msg = {.isend = ofi_isend, .irecv = ofi_irecv, .progress = ofi_progress},
    .mem = {.reg = ofi_mem_reg,
	    .dereg = ofi_mem_dereg,
	    .map = weft_tp_no_map,
	    .unmap = weft_tp_no_unmap},
    .rma = WEFT_TP_NO_RMA_OPS,
    .prop = {.props = ofi_props, .describe = ofi_describe, .paths = weft_tp_no_paths},
    .signal = {.signals = weft_tp_no_signals, .pace = weft_tp_no_pace},
    .wait = WEFT_TP_NO_WAIT_OPS,
};
