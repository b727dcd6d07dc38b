/*
 * ofi_tagged.c — the tagged path: every message is one fi_tsend (or
 * fi_tinject when it fits) matched by one directed fi_trecv; the provider
 * runs its own eager and rendezvous protocols (rxm: eager up to 16 KiB).
 *
 * Tags: bit 63 marks control traffic (liveness probes), then 7 bits of the
 * communicator, 24 of the operation word, 32 of its step (fewer word bits
 * where the provider's tag is shorter). A collective keeps the top of its
 * word (the call number, then its signature: transport.h), a send or
 * receive its p2p flag and the low bits of its number. A receive matches
 * its peer and tag, except that a collective's signature is left out of
 * the match (the ignore mask): the full word rides in the upper half of
 * the CQ data and is compared when the message lands, so that ranks that
 * called different collectives, or one with different arguments, fail at
 * the first message with env->explain's account instead of never matching.
 * Messages complete in whatever order they arrive. Lengths are checked
 * too: a longer message truncates (FI_ETRUNC), a shorter one completes
 * short, and the sender's length rides in the lower half of the CQ data
 * (rxm truncates a longer eager message without a word); both are
 * reported with both lengths. Where the provider carries only 4 bytes of
 * CQ data, the word is what the tag carried (the completion's tag).
 *
 * Reducing receives land in the destination and are reduced there when
 * it does not overlap the local operand (the kernels may alias dst with
 * their second input), else in a bounce buffer of the connection.
 *
 * A post that finds the provider's queue full (-FI_EAGAIN) waits in
 * pendq and is posted again from progress, in order. Operations stay
 * owned by the provider until their completion arrives, even after their
 * message has failed: a failed connection's receives are cancelled and
 * their requests freed when the cancellation completes (or at fini, after
 * the endpoint is closed).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "transports/ofi/ofi.h"
#include "util/log.h"
#include "util/proc.h"

#define OFI_CQ_BATCH  16
#define OFI_CQ_ROUNDS 4

static struct ofi_req *req_of(struct weft_tp_req *r)
{
	return r ? weft_container_of(r, struct ofi_req, base) : NULL;
}

static uint64_t ctrl_bit(const struct ofi_tp *tp)
{
	return 1ull << (32 + tp->tag_seq_bits + 7);
}

/* The operation word's bits in the ofi tag (tag_seq_bits of them). */
static uint64_t word_bits(const struct ofi_tp *tp, uint32_t word)
{
	unsigned n = tp->tag_seq_bits;
	if (word & WEFT_TAG_P2P)
		return 1ull << (n - 1) | (word & ((1u << (n - 1)) - 1));
	return word >> (32 - n);
}

static uint64_t ofi_tag(const struct ofi_tp *tp, uint64_t wtag)
{
	return tp->comm_bits | word_bits(tp, (uint32_t)(wtag >> 32)) << 32 | (wtag & 0xffffffffull);
}

/* What a receive leaves out of the match: a collective's signature. */
static uint64_t ofi_ignore(const struct ofi_tp *tp, uint64_t wtag)
{
	if ((uint32_t)(wtag >> 32) & WEFT_TAG_P2P)
		return 0;
	return (uint64_t)(WEFT_TAG_SIGNATURE >> (32 - tp->tag_seq_bits)) << 32;
}

/* Which endpoint a message takes: from the bits of its ofi tag that a
 * receive matches (not a collective's signature, so that a mismatched
 * call still lands where the receive waits and is reported at once), the
 * same on both sides. A mix of every bit (MurmurHash3's finaliser), so an
 * operation's chunks spread over every endpoint whatever the stride of
 * their steps: a rank's steps to one peer are often every other one (a
 * ring of two sends the even, its peer the odd), which step % neps would
 * put on half the endpoints. */
static unsigned flow_of(const struct ofi_tp *tp, uint64_t wtag)
{
	if (tp->neps < 2)
		return 0;
	uint64_t x = ofi_tag(tp, wtag) & ~ofi_ignore(tp, wtag);
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (unsigned)(x % tp->neps);
}

static bool word_in_data(const struct ofi_tp *tp)
{
	return tp->info->domain_attr->cq_data_size >= 8;
}

/* What a send's CQ data carries: its word and the low half of its length
 * (the receiver knows the rest of the length: the same or truncated). */
static uint64_t send_data(const struct ofi_tp *tp, const struct weft_msg *m)
{
	uint64_t len = m->len & 0xffffffffull;
	return word_in_data(tp) ? (m->tag >> 32) << 32 | len : len;
}

static bool need_desc(const struct ofi_tp *tp)
{
	return tp->info->domain_attr->mr_mode & FI_MR_LOCAL;
}

static weft_status_t cache_reg(void *ctx, void *buf, size_t len, struct weft_mr_reg *out)
{
	return weft_ofi_mr_reg(ctx, buf, len, out);
}

static void cache_dereg(void *ctx, struct weft_mr_reg *reg)
{
	weft_ofi_mr_dereg(ctx, reg);
}

static const struct weft_mr_cache_ops cache_ops = {.reg = cache_reg, .dereg = cache_dereg};

static int post_probe_sink(struct ofi_tp *tp)
{
	struct ofi_req *r = &tp->probe_rx;
	r->op = OFI_OP_PROBE_RECV;
	return (int)fi_trecv(tp->ep, &tp->probe_sink, sizeof(tp->probe_sink), tp->probe_mr.desc,
			     FI_ADDR_UNSPEC, ctrl_bit(tp), ~ctrl_bit(tp), &r->ctx);
}

weft_status_t weft_ofi_tagged_init(struct ofi_tp *tp)
{
	uint64_t fmt = tp->info->ep_attr->mem_tag_format;
	unsigned bits = !fmt || (fmt >> 63) ? 64 : 64 - (unsigned)__builtin_clzll(fmt);
	if (bits < 48)
		return weft_tp_fail(tp->base.env, WEFT_ERR_NOT_SUPPORTED,
				    "ofi: %s tags carry %u bits, Weft needs 48",
				    tp->info->fabric_attr->prov_name, bits);
	tp->tag_seq_bits = bits - 40;
	/* Which communicator: a hash of its id, so that a late message of
	 * another one sharing an address never matches. */
	tp->comm_bits = ((tp->base.env->comm_id * 0x9e3779b97f4a7c15ull) >> 57)
			<< (32 + tp->tag_seq_bits);
	tp->work = calloc((size_t)tp->base.env->nranks, sizeof(*tp->work));
	if (!tp->work || weft_tp_pool_init(&tp->reqs, sizeof(struct ofi_req)) != WEFT_SUCCESS)
		return weft_tp_fail(tp->base.env, WEFT_ERR_NO_MEMORY, "ofi: no memory");
	weft_mr_cache_init(&tp->cache, &cache_ops, tp);
	if (need_desc(tp)) {
		weft_status_t st =
		    weft_ofi_mr_reg(tp, &tp->probe_sink, sizeof(tp->probe_sink), &tp->probe_mr);
		if (st != WEFT_SUCCESS)
			return st;
	}
	int ret = post_probe_sink(tp);
	return ret ? weft_ofi_fail(tp, ret, "posting the probe receive") : WEFT_SUCCESS;
}

/* The endpoint is closed: requests go with their pool and registrations
 * with the cache; messages still queued are not touched (their posters
 * may be gone). */
void weft_ofi_tagged_fini(struct ofi_tp *tp)
{
	for (int r = 0; tp->conns && r < tp->base.env->nranks; r++) {
		struct ofi_conn *c = &tp->conns[r];
		for (struct weft_tp_req *q = c->reqs.head; q; q = q->next)
			if (req_of(q)->bounce != c->bounce[0] && req_of(q)->bounce != c->bounce[1])
				free(req_of(q)->bounce);
		for (int b = 0; b < 2; b++)
			free(c->bounce[b]);
	}
	weft_mr_cache_fini(&tp->cache);
	weft_ofi_mr_dereg(tp, &tp->probe_mr);
	free(tp->work);
	weft_tp_pool_fini(&tp->reqs);
}

/* ---- failures ---- */

static weft_status_t conn_fail(struct ofi_conn *c, weft_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static weft_status_t conn_fail(struct ofi_conn *c, weft_status_t status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	weft_tp_vfail_once(c->tp->base.env, c->broken, &c->tp->error, status, fmt, ap);
	va_end(ap);
	weft_ofi_tagged_fail_conn(c, status);
	return c->fail_status;
}

/* The request's message is done; the request goes when the provider is
 * done with it too (@p provider_done) or, orphaned, at its completion. */
static void finish(struct ofi_req *r, weft_status_t status, bool provider_done)
{
	struct ofi_tp *tp = r->conn->tp;
	struct weft_msg *m = r->base.msg;
	r->base.msg = NULL;
	if (r->bounce && r->bounce != r->conn->bounce[0] && r->bounce != r->conn->bounce[1])
		free(r->bounce); /* a one-off for a message larger than the bounce */
	for (int b = 0; b < 2; b++)
		if (r->bounce == r->conn->bounce[b])
			r->conn->bounce_busy[b] = false;
	r->bounce = NULL;
	if (m)
		r->conn->nmsgs--;
	if (provider_done) {
		if (r->posted)
			weft_reqq_unlink(&r->conn->reqs, &r->base);
		if (r->mr)
			weft_mr_cache_put(&tp->cache, r->mr);
		weft_tp_pool_put(&tp->reqs, r);
	}
	if (m)
		weft_msg_complete(m, status);
}

void weft_ofi_tagged_fail_conn(struct ofi_conn *c, weft_status_t status)
{
	struct ofi_tp *tp = c->tp;
	if (!c->broken)
		c->fail_status = status;
	c->broken = true;
	for (struct weft_tp_req *q = tp->pendq.head, *next; q; q = next) {
		next = q->next;
		struct ofi_req *r = req_of(q);
		if (r->conn == c) {
			weft_reqq_unlink(&tp->pendq, q);
			finish(r, c->fail_status, true);
		}
	}
	for (struct weft_tp_req *q = c->reqs.head; q; q = q->next) {
		struct ofi_req *r = req_of(q);
		if (!r->base.msg)
			continue;
		if (r->op == OFI_OP_RECV && !tp->ep_closed)
			fi_cancel(&tp->eps[r->flow]->fid, &r->ctx);
		finish(r, c->fail_status, false);
	}
}

/* ---- posting ---- */

/* Where a receive lands: the destination, or a bounce buffer when a
 * reduction's operands overlap it. NULL: no bounce free yet. */
static void *recv_target(struct ofi_conn *c, struct ofi_req *r, struct weft_msg *m)
{
	const char *b = m->buf, *l = m->local;
	if (!m->reduce || !m->len || b + m->len <= l || l + m->len <= b)
		return m->buf;
	if (m->len > c->tp->chunk)
		return r->bounce = malloc(m->len);
	for (int k = 0; k < 2; k++) {
		if (c->bounce_busy[k])
			continue;
		if (!c->bounce[k])
			c->bounce[k] = malloc(c->tp->chunk);
		if (!c->bounce[k])
			return NULL;
		c->bounce_busy[k] = true;
		return r->bounce = c->bounce[k];
	}
	return NULL;
}

/* 0, -FI_EAGAIN (try again later), 1 (no bounce yet), or a libfabric error. */
static int post(struct ofi_req *r)
{
	struct ofi_conn *c = r->conn;
	struct ofi_tp *tp = c->tp;
	struct weft_msg *m = r->base.msg;
	uint64_t tag = ofi_tag(tp, m->tag);
	void *buf = m->buf;
	if (r->op == OFI_OP_RECV)
		buf = r->bounce ? r->bounce : recv_target(c, r, m);
	/* NULL is "no bounce yet" only for bytes: a zero-byte receive may
	 * have no buffer at all. */
	if (r->op == OFI_OP_RECV && !buf && m->len)
		return 1;
	if (need_desc(tp) && m->len && !r->mr) {
		weft_status_t st = weft_mr_cache_get(&tp->cache, buf, m->len, &r->mr);
		if (st != WEFT_SUCCESS)
			return -FI_ENOMEM;
	}
	void *desc = r->mr ? r->mr->reg.desc : NULL;
	struct fid_ep *ep = tp->eps[r->flow];
	fi_addr_t addr = c->addrs[r->flow];
	if (r->op == OFI_OP_RECV)
		return (int)fi_trecv(ep, buf, m->len, desc, addr, tag, ofi_ignore(tp, m->tag),
				     &r->ctx);
	return weft_ofi_retry_connect(
	    c, (int)fi_tsenddata(ep, buf, m->len, desc, send_data(tp, m), addr, tag, &r->ctx));
}

static weft_status_t post_failed(struct ofi_req *r, int ret)
{
	struct ofi_conn *c = r->conn;
	const char *what = r->op == OFI_OP_RECV ? "fi_trecv from" : "fi_tsend to";
	finish(r, WEFT_ERR_REMOTE, true);
	return conn_fail(c, WEFT_ERR_REMOTE, "ofi: %s rank %d: %s", what, c->base.peer,
			 weft_ofi_strerror(c->tp, ret));
}

/* Hand @p r to the provider or queue it; false if it must wait (pendq). */
static bool try_post(struct ofi_req *r, weft_status_t *st)
{
	int ret = post(r);
	*st = WEFT_SUCCESS;
	if (ret == -FI_EAGAIN || ret == 1)
		return false;
	if (ret) {
		*st = post_failed(r, ret);
		return true;
	}
	r->posted = true;
	weft_reqq_push(&r->conn->reqs, &r->base);
	return true;
}

static struct ofi_req *new_req(struct ofi_conn *c, struct weft_msg *m, enum ofi_op op,
			       weft_status_t *st)
{
	struct ofi_req *r = weft_tp_req_start(&c->tp->reqs, c->tp->base.env, "ofi", m,
					      c->broken ? c->fail_status : WEFT_SUCCESS, st);
	if (!r)
		return NULL;
	r->op = op;
	r->flow = flow_of(c->tp, m->tag);
	r->conn = c;
	c->nmsgs++;
	if (!c->on_work) { /* the watchdog watches it from now on */
		c->on_work = true;
		c->tp->work[c->tp->nwork++] = c;
	}
	return r;
}

static weft_status_t submit(struct ofi_req *r)
{
	struct ofi_tp *tp = r->conn->tp;
	weft_status_t st = WEFT_SUCCESS;
	/* Behind what already waits, so that posts keep their order. */
	if (tp->pendq.head || !try_post(r, &st))
		weft_reqq_push(&tp->pendq, &r->base);
	return st;
}

weft_status_t weft_ofi_tagged_isend(struct weft_conn *conn, struct weft_msg *m)
{
	struct ofi_conn *c = weft_container_of(conn, struct ofi_conn, base);
	weft_status_t st;
	/* Never fi_tinject: it is done on return, before the provider has
	 * sent anything, and a rank that exits then loses the message. A
	 * completion says the bytes are out (rxm injects small ones itself). */
	struct ofi_req *r = new_req(c, m, OFI_OP_SEND, &st);
	return r ? submit(r) : st;
}

weft_status_t weft_ofi_tagged_irecv(struct weft_conn *conn, struct weft_msg *m)
{
	struct ofi_conn *c = weft_container_of(conn, struct ofi_conn, base);
	weft_status_t st;
	struct ofi_req *r = new_req(c, m, OFI_OP_RECV, &st);
	return r ? submit(r) : st;
}

/* Post what waits, in order, until the provider pushes back. A receive
 * that waits for a bounce buffer of its connection keeps its place but
 * holds nobody else up: the buffer it waits for is freed by a message that
 * may need one of the posts behind it. */
static void drain_pending(struct ofi_tp *tp)
{
	struct weft_tp_req *q = tp->pendq.head;
	while (q) {
		struct weft_tp_req *next = q->next;
		struct ofi_req *r = req_of(q);
		int ret = post(r);
		if (ret == -FI_EAGAIN)
			return;
		if (ret != 1) {
			weft_reqq_unlink(&tp->pendq, q);
			if (ret) {
				post_failed(r, ret);
				next = tp->pendq.head; /* the failure took its conn's out */
			} else {
				r->posted = true;
				weft_reqq_push(&r->conn->reqs, &r->base);
			}
		}
		q = next;
	}
}

/* ---- completions ---- */

/* What the sender said of its message. */
struct sent {
	uint32_t word; /* its operation word */
	uint64_t len;
};

/* From a receive's completion: the CQ data (the word, the low half of the
 * length), else the tag that matched and what landed. */
static struct sent sent_of(const struct ofi_tp *tp, const struct weft_msg *m,
			   const struct fi_cq_tagged_entry *e)
{
	uint32_t want = (uint32_t)(m->tag >> 32);
	struct sent s = {.word = want, .len = e->len};
	unsigned n = tp->tag_seq_bits;
	if (!(want & WEFT_TAG_P2P) && (e->flags & FI_TAGGED))
		s.word = (uint32_t)(((e->tag >> 32) & ((1ull << n) - 1)) << (32 - n)) |
			 (want & ((1u << (32 - n)) - 1));
	if (!(e->flags & FI_REMOTE_CQ_DATA))
		return s;
	s.len = (e->len & ~0xffffffffull) | (e->data & 0xffffffffull);
	if (word_in_data(tp))
		s.word = (uint32_t)(e->data >> 32);
	return s;
}

/* A message of another call, or of another length: both tags and both
 * lengths, and what the communicator makes of the tags. */
static void recv_mismatch(struct ofi_req *r, struct sent s, size_t got)
{
	struct ofi_conn *c = r->conn;
	const struct weft_tp_env *env = c->tp->base.env;
	const struct weft_msg *m = r->base.msg;
	uint64_t want = m->tag, tag = (uint64_t)s.word << 32 | (want & 0xffffffffull);
	size_t len = m->len;
	char why[256];
	env->explain(env->ctx, tag, want, c->base.peer, why, sizeof(why));
	finish(r, WEFT_ERR_REMOTE, true);
	conn_fail(c, WEFT_ERR_REMOTE,
		  "ofi: peer rank %d sent tag %#llx with %llu bytes where the receive posted here "
		  "has tag %#llx with %zu bytes: %s",
		  c->base.peer, (unsigned long long)tag,
		  (unsigned long long)(s.len != len ? s.len : got), (unsigned long long)want, len,
		  why[0] ? why : "mismatched calls across ranks?");
}

static void recv_done(struct ofi_req *r, size_t got, struct sent s)
{
	struct weft_msg *m = r->base.msg;
	if (s.word != (uint32_t)(m->tag >> 32) || got != m->len || s.len != m->len) {
		recv_mismatch(r, s, got);
		return;
	}
	if (m->reduce && m->len)
		weft_msg_deliver(m, 0, r->bounce ? r->bounce : m->buf, m->len);
	finish(r, WEFT_SUCCESS, true);
}

static void on_completion(struct ofi_tp *tp, const struct fi_cq_tagged_entry *e)
{
	struct ofi_req *r = weft_container_of(e->op_context, struct ofi_req, ctx);
	if (r->op == OFI_OP_PROBE_RECV) {
		if (!tp->ep_closed && post_probe_sink(tp))
			weft_log(WEFT_LOG_WARN, WEFT_SUB_NET,
				 "ofi: could not repost the probe receive");
		return;
	}
	r->conn->moved = true;
	if (r->op == OFI_OP_PROBE) {
		r->conn->probing = false;
		return;
	}
	if (!r->base.msg) /* orphaned by a failure: only the request is left */
		finish(r, WEFT_SUCCESS, true);
	else if (r->op == OFI_OP_RECV)
		recv_done(r, e->len, sent_of(tp, r->base.msg, e));
	else
		finish(r, WEFT_SUCCESS, true);
}

static void on_error(struct ofi_tp *tp, const struct fi_cq_err_entry *e)
{
	if (!e->op_context)
		return;
	struct ofi_req *r = weft_container_of(e->op_context, struct ofi_req, ctx);
	if (r->op == OFI_OP_PROBE_RECV)
		return;
	struct ofi_conn *c = r->conn;
	if (r->op == OFI_OP_PROBE)
		c->probing = false;
	else if (e->err == FI_ETRUNC && r->op == OFI_OP_RECV && r->base.msg) {
		/* Longer than the receive, whatever the entry says (rxm's
		 * expected path leaves olen 0 and the data unflagged). */
		struct weft_msg *m = r->base.msg;
		bool data = (e->flags & FI_REMOTE_CQ_DATA) && word_in_data(tp);
		struct sent s = {.word =
				     data ? (uint32_t)(e->data >> 32) : (uint32_t)(m->tag >> 32),
				 .len = (m->len & ~0xffffffffull) | (e->data & 0xffffffffull)};
		if (s.len <= m->len)
			s.len = m->len + (e->olen ? e->olen : 1);
		recv_done(r, s.len, s);
		return;
	} else if (r->op != OFI_OP_PROBE) {
		finish(r, c->broken ? c->fail_status : WEFT_ERR_REMOTE, true);
	}
	if (c->broken) /* ours, cancelled by a failure already recorded */
		return;
	char prov[128] = "";
	fi_cq_strerror(tp->cq, e->prov_errno, e->err_data, prov, sizeof(prov));
	conn_fail(c, WEFT_ERR_REMOTE, "ofi: %s rank %d failed: %s (%s)",
		  r->op == OFI_OP_RECV ? "receive from" : "send to", c->base.peer,
		  weft_ofi_strerror(tp, e->err), prov);
}

static weft_status_t read_cq(struct ofi_tp *tp)
{
	struct fi_cq_tagged_entry ev[OFI_CQ_BATCH];
	for (int round = 0; round < OFI_CQ_ROUNDS; round++) {
		ssize_t n = fi_cq_read(tp->cq, ev, OFI_CQ_BATCH);
		if (n == -FI_EAGAIN)
			return WEFT_SUCCESS;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			if (fi_cq_readerr(tp->cq, &err, 0) == 1)
				on_error(tp, &err);
			continue;
		}
		if (n < 0)
			return weft_ofi_fail(tp, (int)n, "fi_cq_read");
		for (ssize_t i = 0; i < n; i++)
			on_completion(tp, &ev[i]);
		if (n < OFI_CQ_BATCH)
			return WEFT_SUCCESS;
	}
	return WEFT_SUCCESS;
}

/* ---- liveness ---- */

static void check_peer(struct ofi_conn *c)
{
	struct ofi_tp *tp = c->tp;
	const struct weft_tp_env *env = tp->base.env;
	int peer = c->base.peer;
	if (weft_tp_same_host(env, peer) && env->peers[peer].pid > 0 &&
	    !weft_pid_alive(env->peers[peer].pid)) {
		conn_fail(c, WEFT_ERR_REMOTE, "ofi: peer rank %d (pid %d) died", peer,
			  env->peers[peer].pid);
		return;
	}
	char why[160];
	if (weft_ofi_peer_gone(tp, peer, why, sizeof(why))) {
		conn_fail(c, WEFT_ERR_REMOTE, "ofi: peer rank %d is gone: %s", peer, why);
		return;
	}
	if (c->probing)
		return;
	/* A provider that notices fails a send to a peer that is gone; the
	 * peer's probe receive swallows it otherwise. */
	c->probe.op = OFI_OP_PROBE;
	c->probe.conn = c;
	int ret = (int)fi_tsend(tp->ep, &tp->probe_sink, 0, tp->probe_mr.desc, c->addr,
				ctrl_bit(tp), &c->probe.ctx);
	if (ret == 0)
		c->probing = true;
	else if (ret != -FI_EAGAIN)
		conn_fail(c, WEFT_ERR_REMOTE, "ofi: probing rank %d: %s", peer,
			  weft_ofi_strerror(tp, ret));
}

bool weft_ofi_tagged_sends_pending(const struct ofi_tp *tp)
{
	for (int p = 0; p < tp->base.env->nranks; p++)
		for (struct weft_tp_req *q = tp->conns[p].reqs.head; q; q = q->next)
			if (req_of(q)->op == OFI_OP_SEND)
				return true;
	return false;
}

weft_status_t weft_ofi_tagged_progress(struct ofi_tp *tp)
{
	if (tp->pendq.head)
		drain_pending(tp);
	weft_status_t st = read_cq(tp);
	if (st != WEFT_SUCCESS)
		return st;
	int keep = 0;
	for (int i = 0; i < tp->nwork; i++) {
		struct ofi_conn *c = tp->work[i];
		if (c->moved || !c->nmsgs)
			weft_watchdog_moved(&c->wd);
		else if (!c->broken && weft_watchdog_due(&c->wd, tp->stall_s))
			check_peer(c);
		c->moved = false;
		c->on_work = !c->broken && (c->nmsgs || c->probing);
		if (c->on_work)
			tp->work[keep++] = c;
	}
	tp->nwork = keep;
	st = tp->error;
	tp->error = WEFT_SUCCESS;
	return st;
}
