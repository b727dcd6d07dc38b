/*
 * rma_proto.c — the shared RMA protocol (transports/common/rma_proto.h)
 * against a fake set of primitives, in one process: the code that ofi's rma
 * path and the verbs transport both run, tested without either.
 *
 * The fake fabric holds NEP endpoints. A write with immediate is queued
 * and delivered later, in an order picked by a seeded random generator:
 * the bytes are copied into the target's registered memory (the key and
 * the address range are checked), then a remote completion is queued at
 * the target and a local one at the source. Options per test: addresses as
 * virtual addresses or as offsets (FI_MR_VIRT_ADDR or not), sources that
 * must be registered (FI_MR_LOCAL, verbs), a full queue every n-th post,
 * a peer that fails every write (a connection-oriented provider after a
 * death) or one that swallows them (a silent provider), and a count of
 * posted receives for immediates that must never go negative (verbs).
 *
 * Covered: every size class (0, inline, eager limit, one past it, several
 * bounce pieces, 1 MiB) in both directions with receives posted before and
 * after the sends; reducing receives (odd counts, in place, through bounce
 * pieces); 300 queued messages over a tiny geometry (credits and
 * descriptor rings wrap many times); counters started just below the
 * 28-bit wrap of the immediates; tag and length mismatches, reported with
 * both values; a dead peer (write errors) and a silent dead peer (the
 * watchdog's pid check); abort; the registration cache.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "reduce/reduce.h"
#include "transports/common/mr_cache.h"
#include "transports/common/rma_proto_impl.h"
#include "util/clock.h"
#include "util/error.h"

#define NEP	   3
#define MAX_FLY	   4096
#define MAX_EVENTS 8192
#define MAX_REGS   512

struct fake_reg {
	bool used;
	unsigned char *base;
	size_t len;
	uint64_t key;
};

struct fake_conn {
	struct weft_rma_conn rc;
	long recvs; /* receives for immediates posted by this side for the peer */
};

struct fake_ep {
	struct weft_rma rp;
	struct weft_tp_env env;
	struct weft_tp_peer peers[NEP];
	struct fake_conn conns[NEP];
	struct weft_rma_cqe *events;
	int nevents;
	struct fake_reg regs[MAX_REGS];
	int nregs_live;
	char error[WEFT_ERR_MSG_BYTES];
	weft_status_t error_status;
	bool dead;   /* writes to it fail */
	bool silent; /* writes to it vanish */
};

struct flight {
	int from, to;
	struct weft_rma_op *op;
	const void *src;
	size_t len;
	uint64_t raddr, rkey;
	uint32_t imm;
};

static struct fabric {
	struct fake_ep ep[NEP];
	struct flight fly[MAX_FLY];
	int nfly;
	bool virt;	/* remote addresses are virtual addresses */
	bool local_reg; /* sources must be registered */
	unsigned eagain_every;
	unsigned posts;
	unsigned seed;
	uint64_t next_key;
	char problem[256]; /* the first thing the fake caught the protocol doing wrong */
} F;

static void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void problem(const char *fmt, ...)
{
	if (F.problem[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(F.problem, sizeof(F.problem), fmt, ap);
	va_end(ap);
}

static struct fake_ep *ep_of(struct weft_rma *rp)
{
	return weft_container_of(rp, struct fake_ep, rp);
}

static struct fake_conn *fc_of(struct weft_rma_conn *c)
{
	return weft_container_of(c, struct fake_conn, rc);
}

static int rank_of(const struct fake_ep *e)
{
	return (int)(e - F.ep);
}

/* ---- registrations ---- */

static weft_status_t fake_reg(void *ctx, void *buf, size_t len, struct weft_mr_reg *out)
{
	struct fake_ep *e = ep_of(ctx);
	for (int i = 0; i < MAX_REGS; i++) {
		struct fake_reg *r = &e->regs[i];
		if (r->used)
			continue;
		*r = (struct fake_reg){.used = true, .base = buf, .len = len, .key = ++F.next_key};
		e->nregs_live++;
		out->handle = r;
		out->desc = r;
		out->key = (struct weft_mr_key){
		    .addr = F.virt ? (uint64_t)(uintptr_t)buf : 0, .len = len, .key = r->key};
		return WEFT_SUCCESS;
	}
	return WEFT_ERR_NO_MEMORY;
}

static void fake_dereg(void *ctx, struct weft_mr_reg *reg)
{
	struct fake_ep *e = ep_of(ctx);
	struct fake_reg *r = reg->handle;
	if (!r || !r->used)
		problem("deregistering a registration that is not live");
	else
		r->used = false;
	e->nregs_live--;
}

/* The target's bytes for [raddr, raddr + len) under @p key, or NULL. */
static unsigned char *resolve(struct fake_ep *t, uint64_t raddr, uint64_t key, size_t len)
{
	for (int i = 0; i < MAX_REGS; i++) {
		struct fake_reg *r = &t->regs[i];
		if (!r->used || r->key != key)
			continue;
		uint64_t base = F.virt ? (uint64_t)(uintptr_t)r->base : 0;
		if (raddr < base || raddr + len > base + r->len)
			return NULL;
		return r->base + (raddr - base);
	}
	return NULL;
}

/* ---- the primitives ---- */

static weft_status_t fake_write(struct weft_rma_conn *c, struct weft_rma_op *op, const void *src,
				size_t len, void *src_desc, uint64_t raddr, uint64_t rkey,
				uint32_t imm)
{
	struct fake_ep *e = ep_of(c->rp);
	if (F.eagain_every && ++F.posts % F.eagain_every == 0)
		return WEFT_INPROGRESS;
	if (F.nfly == MAX_FLY)
		return WEFT_INPROGRESS;
	if (F.local_reg) {
		struct fake_reg *r = src_desc;
		if (!r || !r->used || (const unsigned char *)src < r->base ||
		    (const unsigned char *)src + len > r->base + r->len)
			problem("write of %zu bytes from a source outside its registration", len);
	}
	F.fly[F.nfly++] = (struct flight){.from = rank_of(e),
					  .to = c->peer,
					  .op = op,
					  .src = src,
					  .len = len,
					  .raddr = raddr,
					  .rkey = rkey,
					  .imm = imm};
	return WEFT_SUCCESS;
}

static weft_status_t fake_post_recvs(struct weft_rma_conn *c, unsigned n)
{
	fc_of(c)->recvs += n;
	return WEFT_SUCCESS;
}

static void push_event(struct fake_ep *e, const struct weft_rma_cqe *ev)
{
	if (e->nevents == MAX_EVENTS)
		problem("completion queue overflow");
	else
		e->events[e->nevents++] = *ev;
}

static int fake_poll(struct weft_rma *rp, struct weft_rma_cqe *out, int max)
{
	struct fake_ep *e = ep_of(rp);
	int n = e->nevents < max ? e->nevents : max;
	memcpy(out, e->events, (size_t)n * sizeof(*out));
	memmove(e->events, e->events + n, (size_t)(e->nevents - n) * sizeof(*out));
	e->nevents -= n;
	return n;
}

static const struct weft_rma_prims fake_prims = {
    .size = sizeof(struct weft_rma_prims),
    .write_imm = fake_write,
    .post_imm_recvs = fake_post_recvs,
    .poll = fake_poll,
    .mr = {.reg = fake_reg, .dereg = fake_dereg},
};

static struct weft_rma_prims prims_local_reg;

/* Deliver one write in flight, picked at random. */
static void deliver_one(void)
{
	int k = (int)(rand_r(&F.seed) % (unsigned)F.nfly);
	struct flight f = F.fly[k];
	F.fly[k] = F.fly[--F.nfly];
	struct fake_ep *src = &F.ep[f.from], *dst = &F.ep[f.to];
	struct weft_rma_cqe local = {.kind = WEFT_RMA_CQE_LOCAL, .op = f.op};
	if (dst->silent)
		return;
	if (dst->dead) {
		local.status = WEFT_ERR_REMOTE;
		snprintf(local.why, sizeof(local.why), "Connection refused");
		push_event(src, &local);
		return;
	}
	unsigned char *to = resolve(dst, f.raddr, f.rkey, f.len);
	if (!to) {
		problem("write of %zu bytes from %d to %d at %#llx key %llu: not registered there",
			f.len, f.from, f.to, (unsigned long long)f.raddr,
			(unsigned long long)f.rkey);
		return;
	}
	memcpy(to, f.src, f.len);
	struct fake_conn *fc = &dst->conns[f.from];
	if (--fc->recvs < 0)
		problem("rank %d took an immediate from %d with no receive posted", f.to, f.from);
	struct weft_rma_cqe remote = {.kind = WEFT_RMA_CQE_REMOTE, .conn = &fc->rc, .imm = f.imm};
	push_event(dst, &remote);
	push_event(src, &local);
}

/* ---- setup ---- */

static weft_status_t fake_allgather(void *ctx, void *buf, size_t bytes)
{
	return WEFT_SUCCESS;
}

/* What the communicator would make of a tag mismatch, in a form the
 * mismatch test can check: whose tag is whose. */
static void fake_explain(void *ctx, uint64_t sent, uint64_t want, int peer, char *buf, size_t len)
{
	snprintf(buf, len, "explained: rank %d's %#llx, here %#llx", peer, (unsigned long long)sent,
		 (unsigned long long)want);
}

static weft_status_t fake_fail(void *ctx, weft_status_t status, const char *msg)
{
	struct fake_ep *e = ctx;
	if (!e->error[0]) {
		snprintf(e->error, sizeof(e->error), "%s", msg);
		e->error_status = status;
	}
	return status;
}

struct setup {
	struct weft_rma_geom geom;
	bool virt, local_reg;
	unsigned eagain_every;
	uint64_t start; /* counters of every connection start here */
};

static void default_geom(struct weft_rma_geom *g)
{
	*g = (struct weft_rma_geom){.nslots = 8,
				    .ndesc = 8,
				    .nbounce = 2,
				    .credit_batch = 2,
				    .slot_bytes = 1024,
				    .bounce_bytes = 4096,
				    .stall_s = 0.02};
}

/* Start every connection's counters at @p start on both sides. */
static void shift_counters(struct weft_rma_conn *c, uint64_t start)
{
	c->tx_posted = c->rx_posted = start;
	c->txr.head = c->txr.tail = start;
	atomic_store(&c->tx_credit, start);
	c->rxr.head = c->rxr.returned = start;
	c->d_head = c->d_returned = c->d_next = c->d_credit = start;
}

static void fabric_up(const struct setup *s)
{
	memset(&F, 0, sizeof(F));
	F.virt = s->virt;
	F.local_reg = s->local_reg;
	F.eagain_every = s->eagain_every;
	F.seed = 12345;
	prims_local_reg = fake_prims;
	prims_local_reg.src_needs_reg = true;
	struct weft_rma_card cards[NEP];
	for (int r = 0; r < NEP; r++) {
		struct fake_ep *e = &F.ep[r];
		e->events = calloc(MAX_EVENTS, sizeof(*e->events));
		ck_assert_ptr_nonnull(e->events);
		for (int p = 0; p < NEP; p++)
			e->peers[p] = (struct weft_tp_peer){
			    .host_id = "fake-host", .hostname = "fake", .pid = getpid(), .nic = ""};
		e->env = (struct weft_tp_env){.rank = r,
					      .nranks = NEP,
					      .local_size = NEP,
					      .local_rank = r,
					      .timeout_s = 10,
					      .peers = e->peers,
					      .ctx = e,
					      .allgather = fake_allgather,
					      .fail = fake_fail,
					      .explain = fake_explain};
		weft_status_t st =
		    weft_rma_init(&e->rp, s->local_reg ? &prims_local_reg : &fake_prims, &e->env,
				  &s->geom, "fake");
		ck_assert_msg(st == WEFT_SUCCESS, "init: %s", e->error);
		weft_rma_card(&e->rp, &cards[r]);
	}
	for (int r = 0; r < NEP; r++)
		for (int p = 0; p < NEP; p++) {
			if (p == r)
				continue;
			struct weft_rma_conn *c = &F.ep[r].conns[p].rc;
			weft_status_t st = weft_rma_conn_init(&F.ep[r].rp, c, p, &cards[p]);
			ck_assert_msg(st == WEFT_SUCCESS, "connect: %s", F.ep[r].error);
			shift_counters(c, s->start);
		}
}

static void fabric_down(void)
{
	for (int r = 0; r < NEP; r++) {
		weft_rma_fini(&F.ep[r].rp);
		ck_assert_msg(F.ep[r].nregs_live == 0, "rank %d: %d registrations left", r,
			      F.ep[r].nregs_live);
		free(F.ep[r].events);
	}
}

static struct weft_rma_conn *conn(int from, int to)
{
	return &F.ep[from].conns[to].rc;
}

/* Progress everything until every message is done, one fails, or the
 * budget of rounds runs out; returns the first failure or WEFT_ERR_TIMEOUT. */
static weft_status_t run(struct weft_msg **msgs, int n, int rounds)
{
	for (int round = 0; round < rounds; round++) {
		for (int d = 0; d < 3 && F.nfly; d++)
			deliver_one();
		for (int r = 0; r < NEP; r++)
			weft_rma_progress(&F.ep[r].rp);
		bool all = true;
		for (int i = 0; i < n; i++) {
			if (msgs[i]->done && msgs[i]->status != WEFT_SUCCESS)
				return msgs[i]->status;
			all &= msgs[i]->done;
		}
		if (all)
			return WEFT_SUCCESS;
	}
	return WEFT_ERR_TIMEOUT;
}

static unsigned char pattern(int from, int to, size_t i, unsigned salt)
{
	return (unsigned char)(from * 37 + to * 11 + salt * 101 + i * 7 + (i >> 9));
}

/* ---- tests ---- */

static const struct setup setups[] = {
    {.virt = true},
    {.virt = false, .local_reg = true},
    {.virt = true, .local_reg = true, .eagain_every = 3},
    {.virt = false, .eagain_every = 7, .start = (1ull << 28) - 5},
};
#define NSETUPS ((int)(sizeof(setups) / sizeof(setups[0])))

/* Every size between every pair, in both directions; odd ranks post their
 * receives first. */
START_TEST(sizes)
{
	struct setup s = setups[_i];
	default_geom(&s.geom);
	fabric_up(&s);
	size_t em = weft_rma_eager_max(&s.geom);
	const size_t lens[] = {
	    0, 1, 32, 48, em - 1, em, em + 1, 3 * s.geom.bounce_bytes + 5, (1u << 20) + 3};
	enum { NL = sizeof(lens) / sizeof(lens[0]) };
	static struct weft_msg msgs[NEP][NEP][2][NL];
	struct weft_msg *all[NEP * NEP * 2 * NL];
	int n = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int a = 0; a < NEP; a++)
			for (int b = 0; b < NEP; b++) {
				if (a == b)
					continue;
				for (size_t k = 0; k < NL; k++) {
					bool recv = (a % 2 == 1) == (pass == 0);
					struct weft_msg *m = &msgs[a][b][recv][k];
					*m = (struct weft_msg){.len = lens[k],
							       .tag = 100 + k,
							       .buf = malloc(lens[k] + 1)};
					for (size_t i = 0; !recv && i < lens[k]; i++)
						((unsigned char *)m->buf)[i] =
						    pattern(a, b, i, (unsigned)k);
					weft_status_t st = recv ? weft_rma_irecv(conn(a, b), m)
								: weft_rma_isend(conn(a, b), m);
					ck_assert_int_eq(st, WEFT_SUCCESS);
					all[n++] = m;
				}
			}
	weft_status_t st = run(all, n, 200000);
	ck_assert_msg(!F.problem[0], "%s", F.problem);
	ck_assert_msg(st == WEFT_SUCCESS, "run: %s (%s)", weft_status_string(st), F.ep[0].error);
	/* Sends are done before their writes have left; closing in order
	 * waits for the writes, and they all complete. */
	while (F.nfly)
		deliver_one();
	for (int r = 0; r < NEP; r++) {
		weft_rma_progress(&F.ep[r].rp);
		ck_assert(!weft_rma_writes_pending(&F.ep[r].rp));
	}
	for (int a = 0; a < NEP; a++)
		for (int b = 0; b < NEP; b++)
			for (size_t k = 0; a != b && k < NL; k++) {
				const unsigned char *got = msgs[b][a][1][k].buf;
				for (size_t i = 0; i < lens[k]; i++)
					if (got[i] != pattern(a, b, i, (unsigned)k))
						ck_abort_msg("%d -> %d, %zu bytes: byte %zu is %u, "
							     "not %u",
							     a, b, lens[k], i, got[i],
							     pattern(a, b, i, (unsigned)k));
			}
	for (int i = 0; i < n; i++)
		free(all[i]->buf);
	fabric_down();
}
END_TEST

/* Reducing receives: int32 sums, odd counts, eager and over several bounce
 * pieces, in place and out of place. */
START_TEST(reduce)
{
	struct setup s = setups[_i];
	default_geom(&s.geom);
	s.geom.bounce_bytes = 4096 + 64; /* the larger messages take several pieces */
	fabric_up(&s);
	weft_reduce_fn sum = weft_reduce_kernel(WEFT_INT64, WEFT_SUM);
	const size_t counts[] = {1, 7, 127, 513, 5 * 1024 + 3};
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		size_t count = counts[k], len = count * 8;
		int64_t *src = malloc(len), *local = malloc(len), *dst = malloc(len + 8);
		for (size_t i = 0; i < count; i++) {
			src[i] = (int64_t)(i * 3 + 1);
			local[i] = (int64_t)(1000000 + i);
		}
		dst[count] = 0x5a5a;
		bool in_place = k % 2;
		if (in_place)
			memcpy(dst, local, len);
		struct weft_msg tx = {.buf = src, .len = len, .tag = k};
		struct weft_msg rx = {.buf = dst,
				      .len = len,
				      .tag = k,
				      .unit = 8,
				      .reduce = sum,
				      .local = in_place ? dst : local};
		ck_assert_int_eq(weft_rma_irecv(conn(1, 0), &rx), WEFT_SUCCESS);
		ck_assert_int_eq(weft_rma_isend(conn(0, 1), &tx), WEFT_SUCCESS);
		struct weft_msg *both[] = {&tx, &rx};
		weft_status_t st = run(both, 2, 100000);
		ck_assert_msg(!F.problem[0], "%s", F.problem);
		ck_assert_msg(st == WEFT_SUCCESS, "count %zu: %s", count, F.ep[1].error);
		for (size_t i = 0; i < count; i++)
			if (dst[i] != (int64_t)(i * 3 + 1 + 1000000 + i))
				ck_abort_msg("count %zu: element %zu is %lld", count, i,
					     (long long)dst[i]);
		ck_assert_int_eq(dst[count], 0x5a5a);
		free(src);
		free(local);
		free(dst);
	}
	fabric_down();
}
END_TEST

/* 300 queued messages over 4 slots, 4 descriptors and one bounce piece:
 * the rings and their credits wrap many times; mixed sizes and reductions. */
START_TEST(queued)
{
	struct setup s = setups[_i];
	default_geom(&s.geom);
	s.geom.nslots = 4;
	s.geom.ndesc = 4;
	s.geom.nbounce = 1;
	s.geom.credit_batch = 2;
	s.geom.slot_bytes = 256;
	s.geom.bounce_bytes = 512;
	fabric_up(&s);
	enum { N = 300 };
	static struct weft_msg tx[N], rx[N];
	static int64_t sbuf[N][200], rbuf[N][200], loc[N][200];
	struct weft_msg *all[2 * N];
	weft_reduce_fn sum = weft_reduce_kernel(WEFT_INT64, WEFT_SUM);
	for (int i = 0; i < N; i++) {
		size_t count = (size_t)(i * 37) % 200;
		for (size_t j = 0; j < count; j++) {
			sbuf[i][j] = i * 1000 + (int64_t)j;
			loc[i][j] = 7;
		}
		tx[i] = (struct weft_msg){.buf = sbuf[i], .len = count * 8, .tag = (uint64_t)i};
		rx[i] = (struct weft_msg){.buf = rbuf[i], .len = count * 8, .tag = (uint64_t)i};
		if (i % 3 == 0) {
			rx[i].reduce = sum;
			rx[i].local = loc[i];
			rx[i].unit = 8;
		}
		/* The receiver posts its first half before any send. */
		if (i < N / 2)
			ck_assert_int_eq(weft_rma_irecv(conn(2, 0), &rx[i]), WEFT_SUCCESS);
		all[2 * i] = &tx[i];
		all[2 * i + 1] = &rx[i];
	}
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(weft_rma_isend(conn(0, 2), &tx[i]), WEFT_SUCCESS);
		if (i >= N / 2)
			ck_assert_int_eq(weft_rma_irecv(conn(2, 0), &rx[i]), WEFT_SUCCESS);
	}
	weft_status_t st = run(all, 2 * N, 400000);
	ck_assert_msg(!F.problem[0], "%s", F.problem);
	ck_assert_msg(st == WEFT_SUCCESS, "%s", F.ep[2].error);
	for (int i = 0; i < N; i++)
		for (size_t j = 0; j < rx[i].len / 8; j++)
			if (rbuf[i][j] != i * 1000 + (int64_t)j + (i % 3 == 0 ? 7 : 0))
				ck_abort_msg("message %d element %zu", i, j);
	fabric_down();
}
END_TEST

/* arg: 0 tag, 1 sender eager / receiver large, 2 sender large / receiver
 * eager, 3 both large, lengths differ. */
START_TEST(mismatch)
{
	struct setup s = setups[0];
	default_geom(&s.geom);
	fabric_up(&s);
	size_t em = weft_rma_eager_max(&s.geom);
	static const struct {
		uint64_t stag, rtag;
		size_t slen, rlen;
	} cases[] = {{5, 6, 100, 100}, {5, 5, 100, 5000}, {5, 5, 5000, 100}, {5, 5, 5000, 6000}};
	size_t slen = cases[_i].slen, rlen = cases[_i].rlen;
	ck_assert(slen != rlen || cases[_i].stag != cases[_i].rtag);
	ck_assert(100 <= em && 5000 > em);
	char *sb = calloc(1, slen), *rb = calloc(1, rlen);
	struct weft_msg tx = {.buf = sb, .len = slen, .tag = cases[_i].stag};
	struct weft_msg rx = {.buf = rb, .len = rlen, .tag = cases[_i].rtag};
	weft_rma_irecv(conn(1, 0), &rx);
	weft_rma_isend(conn(0, 1), &tx);
	struct weft_msg *both[] = {&tx, &rx};
	weft_status_t st = run(both, 2, 10000);
	ck_assert_msg(!F.problem[0], "%s", F.problem);
	ck_assert_msg(st == WEFT_ERR_REMOTE, "status %s", weft_status_string(st));
	/* Whichever side noticed names both tags and both lengths. */
	const char *e = F.ep[1].error[0] ? F.ep[1].error : F.ep[0].error;
	char want[4][32];
	snprintf(want[0], sizeof(want[0]), "%#llx", (unsigned long long)cases[_i].stag);
	snprintf(want[1], sizeof(want[1]), "%#llx", (unsigned long long)cases[_i].rtag);
	snprintf(want[2], sizeof(want[2]), "%zu", slen);
	snprintf(want[3], sizeof(want[3]), "%zu", rlen);
	for (int k = 0; k < 4; k++)
		ck_assert_msg(strstr(e, want[k]), "error \"%s\" does not name %s", e, want[k]);
	ck_assert_msg(strstr(e, "rank"), "error \"%s\" names no rank", e);
	/* And says what the communicator makes of the two tags (env->explain),
	 * the peer's as the peer's: the receiver saw the sender's, the sender
	 * the receiver's descriptor. */
	char expl[96];
	bool rx_side = F.ep[1].error[0];
	snprintf(expl, sizeof(expl), "explained: rank %d's %#llx, here %#llx", rx_side ? 0 : 1,
		 (unsigned long long)(rx_side ? cases[_i].stag : cases[_i].rtag),
		 (unsigned long long)(rx_side ? cases[_i].rtag : cases[_i].stag));
	ck_assert_msg(strstr(e, expl), "error \"%s\" does not say \"%s\"", e, expl);
	free(sb);
	free(rb);
	fabric_down();
}
END_TEST

/* A pid that is certainly dead: a child that exited and was reaped. */
static pid_t dead_pid(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	return pid;
}

/* arg 0: the peer fails every write (a connection-oriented provider);
 * 1: it swallows them and its pid is dead (the watchdog's pid check);
 * 2: it swallows them and is on another host (the probe stays
 *    outstanding: the operation's own timeout is what ends it). */
START_TEST(dead_peer)
{
	struct setup s = setups[_i == 0 ? 1 : 0];
	default_geom(&s.geom);
	fabric_up(&s);
	if (_i == 0)
		F.ep[1].dead = true;
	else
		F.ep[1].silent = true;
	if (_i == 1)
		F.ep[0].peers[1].pid = dead_pid();
	if (_i == 2)
		F.ep[0].peers[1].host_id = "another-host";
	char buf[100000];
	struct weft_msg rx = {.buf = buf, .len = sizeof(buf), .tag = 1};
	ck_assert_int_eq(weft_rma_irecv(conn(0, 1), &rx), WEFT_SUCCESS);
	struct weft_msg *one[] = {&rx};
	double t0 = weft_now();
	weft_status_t st = WEFT_ERR_TIMEOUT;
	while (st == WEFT_ERR_TIMEOUT && weft_now() - t0 < 1.0)
		st = run(one, 1, 1000);
	double dt = weft_now() - t0;
	if (_i == 2) {
		ck_assert_msg(st == WEFT_ERR_TIMEOUT, "status %s", weft_status_string(st));
		ck_assert(conn(0, 1)->probing);
	} else {
		ck_assert_msg(st == WEFT_ERR_REMOTE, "status %s after %.2f s",
			      weft_status_string(st), dt);
		ck_assert_msg(dt < 0.5, "took %.2f s", dt);
		ck_assert_msg(strstr(F.ep[0].error, "rank 1"), "%s", F.ep[0].error);
		ck_assert_msg(strstr(F.ep[0].error, _i == 0 ? "Connection refused" : "died"), "%s",
			      F.ep[0].error);
	}
	F.nfly = 0;
	fabric_down();
}
END_TEST

/* A peer that finished and left: the credit this side owes it fails to
 * go, which is no error of any operation; a message posted to it later
 * fails, and says why. */
START_TEST(gone_quietly)
{
	struct setup s = setups[0];
	default_geom(&s.geom);
	fabric_up(&s);
	char a[16] = "x", b[16];
	struct weft_msg tx[2], rx[2];
	struct weft_msg *all[4];
	for (int i = 0; i < 2; i++) {
		tx[i] = (struct weft_msg){.buf = a, .len = sizeof(a), .tag = (uint64_t)i};
		rx[i] = (struct weft_msg){.buf = b, .len = sizeof(b), .tag = (uint64_t)i};
		weft_rma_isend(conn(1, 0), &tx[i]);
		all[2 * i] = &tx[i];
		all[2 * i + 1] = &rx[i];
	}
	/* Both slots land at rank 0 before rank 1 goes. */
	while (F.nfly)
		deliver_one();
	F.ep[1].dead = true;
	for (int i = 0; i < 2; i++)
		weft_rma_irecv(conn(0, 1), &rx[i]);
	ck_assert_int_eq(run(all, 4, 1000), WEFT_SUCCESS);
	while (F.nfly)
		deliver_one(); /* the credit return fails */
	weft_rma_progress(&F.ep[0].rp);
	ck_assert_msg(!F.ep[0].error[0], "an error was recorded: %s", F.ep[0].error);
	ck_assert(conn(0, 1)->broken);
	struct weft_msg late = {.buf = a, .len = 1, .tag = 9};
	ck_assert_int_eq(weft_rma_isend(conn(0, 1), &late), WEFT_ERR_REMOTE);
	ck_assert_msg(strstr(F.ep[0].error, "gone") && strstr(F.ep[0].error, "Connection refused"),
		      "%s", F.ep[0].error);
	fabric_down();
}
END_TEST

START_TEST(abort_all)
{
	struct setup s = setups[0];
	default_geom(&s.geom);
	fabric_up(&s);
	char a[10], b[5000];
	struct weft_msg rx = {.buf = a, .len = sizeof(a), .tag = 1};
	struct weft_msg tx = {.buf = b, .len = sizeof(b), .tag = 2};
	weft_rma_irecv(conn(0, 1), &rx);
	weft_rma_isend(conn(0, 2), &tx);
	weft_rma_abort(&F.ep[0].rp);
	ck_assert(rx.done && rx.status == WEFT_ERR_ABORTED);
	ck_assert(tx.done && tx.status == WEFT_ERR_ABORTED);
	struct weft_msg again = {.buf = a, .len = 1, .tag = 3};
	ck_assert_int_eq(weft_rma_isend(conn(0, 1), &again), WEFT_ERR_ABORTED);
	ck_assert(again.done);
	F.nfly = 0;
	fabric_down();
}
END_TEST

START_TEST(geometry)
{
	struct weft_rma_geom g;
	weft_rma_geom_default(&g, 8, 64u << 20);
	ck_assert_uint_eq(g.nslots, 16);
	weft_rma_geom_default(&g, 4096, 64u << 20);
	ck_assert_uint_ge(g.nslots, 4);
	ck_assert_uint_le(g.credit_batch, g.nslots / 2);
	/* A geometry the protocol cannot run is refused with a message. */
	struct fake_ep *e = &F.ep[0];
	memset(e, 0, sizeof(*e));
	e->env =
	    (struct weft_tp_env){.nranks = 2, .ctx = e, .fail = fake_fail, .explain = fake_explain};
	default_geom(&g);
	g.nslots = 6;
	ck_assert_int_eq(weft_rma_init(&e->rp, &fake_prims, &e->env, &g, "fake"),
			 WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(e->error, "6 slots"), "%s", e->error);
	weft_rma_fini(&e->rp);
	ck_assert_uint_eq(weft_rma_widen((1ull << 28) - 2, 3), (1ull << 28) + 3);
	ck_assert_uint_eq(weft_rma_widen(5, 5), 5);
}
END_TEST

START_TEST(mr_cache)
{
	struct fake_ep *e = &F.ep[0];
	memset(e, 0, sizeof(*e));
	static const struct weft_mr_cache_ops ops = {.reg = fake_reg, .dereg = fake_dereg};
	struct weft_mr_cache c;
	weft_mr_cache_init(&c, &ops, &e->rp);
	static char buf[5 * 4096] __attribute__((aligned(4096)));
	struct weft_mr_entry *a, *b, *d;
	ck_assert_int_eq(weft_mr_cache_get(&c, buf + 100, 8000, &a), WEFT_SUCCESS);
	ck_assert_uint_eq(a->lo, (uintptr_t)buf);
	ck_assert_uint_eq(a->hi, (uintptr_t)buf + 2 * 4096);
	/* Inside the pages of a live entry: shared. */
	ck_assert_int_eq(weft_mr_cache_get(&c, buf + 4096, 100, &b), WEFT_SUCCESS);
	ck_assert_ptr_eq(a, b);
	ck_assert_uint_eq(c.hits, 1);
	/* Past them: a new registration. */
	ck_assert_int_eq(weft_mr_cache_get(&c, buf + 2 * 4096, 4097, &d), WEFT_SUCCESS);
	ck_assert_ptr_ne(a, d);
	ck_assert_int_eq(e->nregs_live, 2);
	ck_assert_uint_eq(weft_mr_remote_addr(a, buf + 100), a->reg.key.addr + 100);
	weft_mr_cache_put(&c, a);
	ck_assert_int_eq(e->nregs_live, 2); /* b still holds it */
	weft_mr_cache_put(&c, b);
	ck_assert_int_eq(e->nregs_live, 1);
	/* Released means gone: the same pages register afresh. */
	ck_assert_int_eq(weft_mr_cache_get(&c, buf + 100, 10, &a), WEFT_SUCCESS);
	ck_assert_uint_eq(c.regs, 3);
	weft_mr_cache_fini(&c);
	ck_assert_int_eq(e->nregs_live, 0);
}
END_TEST

static Suite *rma_suite(void)
{
	Suite *s = suite_create("rma_proto");
	TCase *tc = tcase_create("fake");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, sizes, 0, NSETUPS);
	tcase_add_loop_test(tc, reduce, 0, NSETUPS);
	tcase_add_loop_test(tc, queued, 0, NSETUPS);
	tcase_add_loop_test(tc, mismatch, 0, 4);
	tcase_add_loop_test(tc, dead_peer, 0, 3);
	tcase_add_test(tc, gone_quietly);
	tcase_add_test(tc, abort_all);
	tcase_add_test(tc, geometry);
	tcase_add_test(tc, mr_cache);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(rma_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
