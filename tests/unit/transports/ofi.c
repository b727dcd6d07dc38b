/*
 * test_ofi.c — the libfabric transport through the point-to-point layer on
 * forked ranks, over tcp;ofi_rxm and sockets (pinned to lo: FI_TCP_IFACE,
 * FI_SOCKETS_IFACE), on both paths (WEFT_OFI_PROTO=tagged and rma).
 *
 * Covered: sizes around every boundary (inject, the rxm eager limit, the
 * rma landing slot, several bounce pieces, 1 MiB) between every pair of
 * 2-3 ranks, posted in both orders; reducing receives with odd counts, in
 * place and out of place; 300 queued messages; length mismatches (both
 * paths, longer and shorter, eager and large) and tag mismatches (rma),
 * reported with both values; kill -9 of
 * a peer on one host (the pid check) and on "another host" (WEFT_HOSTID:
 * the provider's errors on probes), with every survivor failing with
 * WEFT_ERR_REMOTE within 5 s (the time is printed); abort; a job with shm
 * between some pairs and ofi between others; scores and descriptions; a
 * provider that does not exist, one that lacks what Weft needs (mrail), a
 * missing library (an error when ofi was asked for, idle when it was not); and
 * every setting's parsing.
 *
 * The test process loads libfabric and asks it for providers once before
 * forking, so that the ranks inherit what costs ~0.2 s per process.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <linux/tcp.h> /* tcpi_bytes_acked: glibc's <netinet/tcp.h> lacks it */
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/p2p_msg.h"
#include "core/progress.h"
#include "harness.h"
#include "reduce/reduce.h"
#include "transports/ofi/ofi.h"
#include "transports/shm/shm.h"
#include "util/settings.h"

#define JOB_TIMEOUT_S 40.0
#define WAIT_S	      10.0
#define KILL_BOUND_S  5.0

struct variant {
	const char *prov, *proto;
};

static const struct variant variants[] = {
    {"tcp;ofi_rxm", "tagged"},
    {"tcp;ofi_rxm", "rma"},
    {"sockets", "tagged"},
    {"sockets", "rma"},
};
#define NVARIANTS ((int)(sizeof(variants) / sizeof(variants[0])))

/* "KEY=VALUE" strings of one job: the variant and any extras. */
struct env_set {
	char prov[64], proto[64];
	const char *v[16];
};

static const char *const *make_env(struct env_set *e, const struct variant *v,
				   const char *const *extra)
{
	snprintf(e->prov, sizeof(e->prov), "WEFT_OFI_PROVIDER=%s", v->prov ? v->prov : "");
	snprintf(e->proto, sizeof(e->proto), "WEFT_OFI_PROTO=%s", v->proto);
	size_t k = 0;
	e->v[k++] = "WEFT_TRANSPORTS=ofi";
	e->v[k++] = "FI_TCP_IFACE=lo";
	e->v[k++] = "FI_SOCKETS_IFACE=lo";
	e->v[k++] = "WEFT_TIMEOUT=20";
	if (v->prov)
		e->v[k++] = e->prov;
	e->v[k++] = e->proto;
	for (size_t i = 0; extra && extra[i] && k + 1 < sizeof(e->v) / sizeof(e->v[0]); i++)
		e->v[k++] = extra[i];
	e->v[k] = NULL;
	return e->v;
}

/* Progress the communicator until every message is done, one fails, or
 * the time runs out. */
static weft_status_t wait_all(weft_comm_t comm, struct weft_msg **msgs, int n, double limit_s)
{
	double end = harness_now() + limit_s;
	for (;;) {
		bool all = true;
		for (int i = 0; i < n; i++) {
			if (msgs[i]->done && msgs[i]->status != WEFT_SUCCESS)
				return msgs[i]->status;
			all &= msgs[i]->done;
		}
		if (all)
			return WEFT_SUCCESS;
		weft_status_t st = weft_comm_progress(comm);
		if (st != WEFT_SUCCESS && st != WEFT_INPROGRESS)
			return st;
		if (harness_now() > end)
			return WEFT_ERR_TIMEOUT;
	}
}

/* Exchange a word with every peer: everybody is past init (rank 0 hosts
 * the bootstrap root) and every connection has carried a message. */
static int sync_peers(weft_comm_t comm, uint32_t step)
{
	uint64_t out = 1, in[HARNESS_MAX_RANKS];
	struct weft_msg m[2 * HARNESS_MAX_RANKS];
	struct weft_msg *p[2 * HARNESS_MAX_RANKS];
	int n = 0;
	for (int r = 0; r < comm->nranks; r++) {
		if (r == comm->rank)
			continue;
		m[n] = (struct weft_msg){.buf = &out, .len = 8, .tag = weft_p2p_tag(999, step)};
		m[n + 1] =
		    (struct weft_msg){.buf = &in[r], .len = 8, .tag = weft_p2p_tag(999, step)};
		if (weft_p2p_isend_msg(comm, r, &m[n]) || weft_p2p_irecv_msg(comm, r, &m[n + 1]))
			return harness_fail("sync: posting to %d failed", r);
		p[n] = &m[n];
		p[n + 1] = &m[n + 1];
		n += 2;
	}
	weft_status_t st = wait_all(comm, p, n, WAIT_S);
	return st == WEFT_SUCCESS ? 0 : harness_fail_status(comm, st, "sync");
}

static unsigned char pattern(int from, int to, size_t i, unsigned salt)
{
	return (unsigned char)(from * 37 + to * 11 + salt * 101 + i * 7 + (i >> 9));
}

static int check_ofi_conns(weft_comm_t comm)
{
	for (int p = 0; p < comm->nranks; p++)
		if (p != comm->rank && comm->peers[p].tp->ops != &weft_tp_ofi_ops)
			return harness_fail("peer %d is over %s, not ofi", p,
					    comm->peers[p].tp->ops->name);
	return 0;
}

static void run_ok(const struct harness_job *job)
{
	struct harness_result res;
	harness_run_job(job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}

/* ---- every size between every pair ---- */

static const size_t sizes[] = {
    0, 1, 8, 64, 65, 16320, 16321, 16384, 16385, 3 * 131072 + 5, 512 << 10, (1 << 20) + 5};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Message k to or from peer p; odd ranks post their receives first. */
static int post_sizes(weft_comm_t comm, struct weft_msg *msgs, struct weft_msg **ptrs)
{
	int rank = comm->rank, n = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int p = 0; p < comm->nranks; p++)
			for (size_t k = 0; p != rank && k < NSIZES; k++) {
				bool recv = (rank % 2 == 1) == (pass == 0);
				struct weft_msg *m = &msgs[n];
				*m = (struct weft_msg){.buf = malloc(sizes[k] + 1),
						       .len = sizes[k],
						       .tag = weft_p2p_tag(1, (uint32_t)k)};
				if (!m->buf)
					return harness_fail("out of memory");
				for (size_t i = 0; !recv && i < sizes[k]; i++)
					((unsigned char *)m->buf)[i] =
					    pattern(rank, p, i, (unsigned)k);
				weft_status_t st = recv ? weft_p2p_irecv_msg(comm, p, m)
							: weft_p2p_isend_msg(comm, p, m);
				if (st != WEFT_SUCCESS)
					return harness_fail_status(comm, st, "posting to %d", p);
				ptrs[n++] = m;
			}
	return 0;
}

static int body_sizes(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int n = 2 * (int)NSIZES * (nranks - 1);
	struct weft_msg *msgs = calloc((size_t)n, sizeof(*msgs));
	struct weft_msg **ptrs = calloc((size_t)n, sizeof(*ptrs));
	if (!msgs || !ptrs || check_ofi_conns(comm) || post_sizes(comm, msgs, ptrs))
		return 1;
	harness_progress("exchanging %d messages", n);
	weft_status_t st = wait_all(comm, ptrs, n, WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "exchange");
	int i = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int p = 0; p < nranks; p++)
			for (size_t k = 0; p != rank && k < NSIZES; k++, i++) {
				bool recv = (rank % 2 == 1) == (pass == 0);
				const unsigned char *b = msgs[i].buf;
				for (size_t j = 0; recv && j < sizes[k]; j++)
					if (b[j] != pattern(p, rank, j, (unsigned)k))
						return harness_fail("from %d, %zu bytes: byte %zu",
								    p, sizes[k], j);
				free(msgs[i].buf);
			}
	free(msgs);
	free(ptrs);
	return sync_peers(comm, 1);
}

START_TEST(sizes_all)
{
	struct env_set e;
	struct harness_job job = {.nranks = 2 + _i % 2,
				  .env = make_env(&e, &variants[_i], NULL),
				  .body = body_sizes,
				  .timeout_s = JOB_TIMEOUT_S};
	run_ok(&job);
}
END_TEST

/* ---- reducing receives ---- */

static int body_reduce(weft_comm_t comm, int rank, int nranks, void *arg)
{
	static const size_t counts[] = {1, 7, 2047, 2049, 65537, 300001};
	weft_reduce_fn sum = weft_reduce_kernel(WEFT_INT32, WEFT_SUM);
	int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		size_t count = counts[k], len = count * 4;
		int32_t *src = malloc(len), *local = malloc(len), *dst = malloc(len + 4);
		if (!src || !local || !dst)
			return harness_fail("out of memory");
		for (size_t i = 0; i < count; i++) {
			src[i] = (int32_t)(rank * 1000003 + i);
			local[i] = (int32_t)(i * 7 - (size_t)rank);
		}
		dst[count] = 0x5a5a5a5a;
		bool in_place = k % 2;
		if (in_place)
			memcpy(dst, local, len);
		uint64_t tag = weft_p2p_tag(2, (uint32_t)k);
		struct weft_msg tx = {.buf = src, .len = len, .tag = tag};
		struct weft_msg rx = {.buf = dst,
				      .len = len,
				      .tag = tag,
				      .unit = 4,
				      .reduce = sum,
				      .local = in_place ? dst : local};
		struct weft_msg *both[] = {&tx, &rx};
		weft_status_t st = weft_p2p_irecv_msg(comm, prev, &rx);
		if (st == WEFT_SUCCESS)
			st = weft_p2p_isend_msg(comm, next, &tx);
		if (st == WEFT_SUCCESS)
			st = wait_all(comm, both, 2, WAIT_S);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "reduce of %zu elements", count);
		for (size_t i = 0; i < count; i++)
			if (dst[i] !=
			    (int32_t)(prev * 1000003 + i) + (int32_t)(i * 7 - (size_t)rank))
				return harness_fail("count %zu: element %zu is %d", count, i,
						    dst[i]);
		if (dst[count] != 0x5a5a5a5a)
			return harness_fail("count %zu: wrote past the end", count);
		free(src);
		free(local);
		free(dst);
	}
	return sync_peers(comm, 2);
}

START_TEST(reduce_ring)
{
	struct env_set e;
	struct harness_job job = {.nranks = 3,
				  .env = make_env(&e, &variants[_i], NULL),
				  .body = body_reduce,
				  .timeout_s = JOB_TIMEOUT_S};
	run_ok(&job);
}
END_TEST

/* ---- many queued messages ---- */

#define NQUEUED 300

static size_t queued_len(size_t i)
{
	return i % 50 == 49 ? 70000 + i : (i * 37) % 3001;
}

static int body_queued(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int peer = 1 - rank;
	static struct weft_msg s[NQUEUED], r[NQUEUED];
	static struct weft_msg *ptrs[2 * NQUEUED];
	for (size_t i = 0; i < NQUEUED; i++) {
		size_t len = queued_len(i);
		s[i] = (struct weft_msg){
		    .buf = malloc(len + 1), .len = len, .tag = weft_p2p_tag(3, (uint32_t)i)};
		r[i] = (struct weft_msg){
		    .buf = malloc(len + 1), .len = len, .tag = weft_p2p_tag(3, (uint32_t)i)};
		if (!s[i].buf || !r[i].buf)
			return harness_fail("out of memory");
		for (size_t j = 0; j < len; j++)
			((unsigned char *)s[i].buf)[j] = pattern(rank, peer, j, (unsigned)i);
		ptrs[2 * i] = &s[i];
		ptrs[2 * i + 1] = &r[i];
	}
	/* Rank 1 posts every receive before its first send, rank 0 after. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < NQUEUED; i++) {
			bool recv = (rank == 1) == (pass == 0);
			weft_status_t st = recv ? weft_p2p_irecv_msg(comm, peer, &r[i])
						: weft_p2p_isend_msg(comm, peer, &s[i]);
			if (st != WEFT_SUCCESS)
				return harness_fail_status(comm, st, "post %zu", i);
		}
	weft_status_t st = wait_all(comm, ptrs, 2 * NQUEUED, WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "queued exchange");
	for (size_t i = 0; i < NQUEUED; i++) {
		for (size_t j = 0; j < r[i].len; j++)
			if (((unsigned char *)r[i].buf)[j] != pattern(peer, rank, j, (unsigned)i))
				return harness_fail("message %zu byte %zu", i, j);
		free(s[i].buf);
		free(r[i].buf);
	}
	return sync_peers(comm, 3);
}

START_TEST(queued)
{
	struct env_set e;
	struct harness_job job = {.nranks = 2,
				  .env = make_env(&e, &variants[_i], NULL),
				  .body = body_queued,
				  .timeout_s = JOB_TIMEOUT_S};
	run_ok(&job);
}
END_TEST

/* ---- mismatches ---- */

struct mismatch {
	uint64_t stag, rtag;
	size_t slen, rlen;
};

/* Rank 0 sends, rank 1 receives something else; the receiver (or, for a
 * large message, either side) fails with both values named. */
static int body_mismatch(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct mismatch *mm = arg;
	if (sync_peers(comm, 4))
		return 1;
	size_t len = rank == 0 ? mm->slen : mm->rlen;
	char *buf = calloc(1, len + 1);
	struct weft_msg m = {.buf = buf, .len = len, .tag = rank == 0 ? mm->stag : mm->rtag};
	struct weft_msg *one[] = {&m};
	weft_status_t st =
	    rank == 0 ? weft_p2p_isend_msg(comm, 1, &m) : weft_p2p_irecv_msg(comm, 0, &m);
	if (st == WEFT_SUCCESS)
		st = wait_all(comm, one, 1, WAIT_S);
	if (rank == 0)
		return st == WEFT_SUCCESS || st == WEFT_ERR_REMOTE
			   ? 0
			   : harness_fail_status(comm, st, "sender");
	if (st != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, st, "receiver: expected WEFT_ERR_REMOTE");
	const char *e = weft_comm_last_error(comm);
	char want[4][32];
	snprintf(want[0], sizeof(want[0]), "%#llx", (unsigned long long)mm->stag);
	snprintf(want[1], sizeof(want[1]), "%#llx", (unsigned long long)mm->rtag);
	snprintf(want[2], sizeof(want[2]), "%zu", mm->slen);
	snprintf(want[3], sizeof(want[3]), "%zu", mm->rlen);
	for (int k = 0; k < 4; k++)
		if (!strstr(e, want[k]))
			return harness_fail("error \"%s\" does not name %s", e, want[k]);
	return 0;
}

START_TEST(mismatch)
{
	/* Lengths on both paths (shorter and longer, small and large; rxm
	 * truncates a longer eager message without a word: the length in the
	 * CQ data shows it); tags on rma only: the tagged path never matches a
	 * wrong tag (a stall). */
	static const struct mismatch cases[] = {
	    {5, 5, 100, 200},	{5, 5, 300000, 200000}, {5, 5, 100, 100000},
	    {5, 5, 4000, 3996}, {5, 9, 100, 100},
	};
	int c = _i % 5, v = _i / 5;
	if (c == 4 && v == 0)
		return;
	struct env_set e;
	struct harness_job job = {.nranks = 2,
				  .env = make_env(&e, &variants[v], NULL),
				  .body = body_mismatch,
				  .arg = (void *)&cases[c],
				  .timeout_s = JOB_TIMEOUT_S};
	run_ok(&job);
}
END_TEST

/* ---- a peer killed ---- */

struct kill_args {
	int victim;
	bool sender; /* the victim dies sending (else receiving) */
};

/* The victim posts one direction of a large exchange with every survivor
 * and dies in the middle. Every survivor also waits for a message the
 * victim never sends (a provider may complete a send once the bytes are
 * the receiver's, matched or not: sockets does, so the other direction
 * alone can finish), so every survivor must fail, and with
 * WEFT_ERR_REMOTE (whatever its other messages say once the communicator
 * is down). */
static int body_kill(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct kill_args *ka = arg;
	if (sync_peers(comm, 5))
		return 1;
	size_t len = 8u << 20;
	struct weft_msg m[2 * HARNESS_MAX_RANKS];
	struct weft_msg *p[2 * HARNESS_MAX_RANKS];
	int n = 0;
	for (int r = 0; r < nranks; r++) {
		if (r == rank || (rank != ka->victim && r != ka->victim))
			continue;
		bool send = rank != ka->victim || ka->sender,
		     recv = rank != ka->victim || !ka->sender;
		for (int k = 0; k < 2; k++) {
			if (!(k ? recv : send))
				continue;
			m[n] = (struct weft_msg){.buf = calloc(1, len), .len = len, .tag = 7};
			k ? weft_p2p_irecv_msg(comm, r, &m[n]) : weft_p2p_isend_msg(comm, r, &m[n]);
			p[n] = &m[n];
			n++;
		}
		if (rank != ka->victim) {
			m[n] = (struct weft_msg){.buf = calloc(1, 64), .len = 64, .tag = 8};
			weft_p2p_irecv_msg(comm, r, &m[n]);
			p[n] = &m[n];
			n++;
		}
	}
	if (rank == ka->victim) {
		for (int i = 0; i < 50; i++)
			weft_comm_progress(comm);
		raise(SIGKILL);
	}
	double t0 = harness_now();
	weft_status_t st = wait_all(comm, p, n, 2 * KILL_BOUND_S), async = WEFT_SUCCESS;
	double dt = harness_now() - t0;
	double *times = harness_shared();
	times[rank] = dt;
	weft_comm_get_async_error(comm, &async);
	if (st == WEFT_SUCCESS || st == WEFT_ERR_TIMEOUT || async != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, async,
					   "survivor: expected WEFT_ERR_REMOTE after "
					   "%.2f s (first message: %s)",
					   dt, weft_status_string(st));
	if (dt > KILL_BOUND_S)
		return harness_fail("survivor: took %.2f s to notice", dt);
	return 0;
}

static int split_hosts(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	char host[32];
	snprintf(host, sizeof(host), "test-ofi-host-%d", rank);
	return setenv("WEFT_HOSTID", host, 1) != 0;
}

/* _i: variant (tcp and sockets, tagged and rma) x one host or several x
 * victim role. */
START_TEST(peer_killed)
{
	int v = _i % NVARIANTS, hosts = (_i / NVARIANTS) % 2;
	struct kill_args ka = {.victim = 1 + (_i / (2 * NVARIANTS)) % 2,
			       .sender = (_i / (2 * NVARIANTS)) % 2 == 0};
	struct env_set e;
	struct harness_job job = {.nranks = 3,
				  .env = make_env(&e, &variants[v], NULL),
				  .body = body_kill,
				  .arg = &ka,
				  .timeout_s = JOB_TIMEOUT_S,
				  .before_init = hosts ? split_hosts : NULL};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.rank[ka.victim].end == HARNESS_SIGNALED, "victim did not die: %s",
		      res.summary);
	const double *times = (const double *)res.shared;
	for (int r = 0; r < 3; r++) {
		if (r == ka.victim)
			continue;
		ck_assert_msg(res.rank[r].end == HARNESS_EXITED && res.rank[r].code == 0,
			      "survivor %d: %s", r, res.summary);
		printf("ofi kill -9 (%s %s, %s, victim %s): rank %d noticed in %.3f s\n",
		       variants[v].prov, variants[v].proto, hosts ? "hosts apart" : "one host",
		       ka.sender ? "sending" : "receiving", r, times[r]);
	}
	fflush(stdout);
}
END_TEST

/* ---- abort ---- */

static int body_abort(weft_comm_t comm, int rank, int nranks, void *arg)
{
	if (sync_peers(comm, 6))
		return 1;
	char buf[64];
	struct weft_msg m = {.buf = buf, .len = sizeof(buf), .tag = 3};
	struct weft_msg *one[] = {&m};
	weft_p2p_irecv_msg(comm, 1 - rank, &m);
	if (rank == 0) {
		weft_comm_abort(comm);
		weft_status_t st = wait_all(comm, one, 1, 5);
		return st == WEFT_ERR_ABORTED ? 0 : harness_fail_status(comm, st, "aborter");
	}
	weft_status_t st = wait_all(comm, one, 1, 5);
	return st == WEFT_ERR_REMOTE ? 0 : harness_fail_status(comm, st, "peer: expected remote");
}

START_TEST(abort_peer)
{
	struct env_set e;
	struct harness_job job = {.nranks = 2,
				  .env = make_env(&e, &variants[_i], NULL),
				  .body = body_abort,
				  .timeout_s = JOB_TIMEOUT_S,
				  .before_init = split_hosts};
	run_ok(&job);
}
END_TEST

/* ---- shm between some pairs, ofi between others ---- */

static int two_hosts(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	return setenv("WEFT_HOSTID", rank < 2 ? "test-ofi-a" : "test-ofi-b", 1) != 0;
}

static int body_mixed(weft_comm_t comm, int rank, int nranks, void *arg)
{
	for (int p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		bool local = (p < 2) == (rank < 2);
		const struct weft_tp_ops *want = local ? &weft_tp_shm_ops : &weft_tp_ofi_ops;
		if (comm->peers[p].tp->ops != want)
			return harness_fail("peer %d: over %s", p, comm->peers[p].tp->ops->name);
	}
	int bufs[4][2] = {{0}};
	struct weft_msg m[8];
	struct weft_msg *ptr[8];
	int n = 0;
	for (int p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		bufs[p][0] = rank * 10 + p;
		m[n] = (struct weft_msg){.buf = &bufs[p][0], .len = 4, .tag = 1};
		m[n + 1] = (struct weft_msg){.buf = &bufs[p][1], .len = 4, .tag = 1};
		weft_p2p_isend_msg(comm, p, &m[n]);
		weft_p2p_irecv_msg(comm, p, &m[n + 1]);
		ptr[n] = &m[n];
		ptr[n + 1] = &m[n + 1];
		n += 2;
	}
	weft_status_t st = wait_all(comm, ptr, n, WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "exchange");
	for (int p = 0; p < nranks; p++)
		if (p != rank && bufs[p][1] != p * 10 + rank)
			return harness_fail("from %d: %d", p, bufs[p][1]);
	/* And a collective across both. */
	float x[1000], want = 0;
	for (int i = 0; i < 1000; i++)
		x[i] = (float)(rank + 1);
	for (int r = 0; r < nranks; r++)
		want += (float)(r + 1);
	st = weft_allreduce(WEFT_IN_PLACE, x, 1000, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "allreduce");
	for (int i = 0; i < 1000; i++)
		if (x[i] != want)
			return harness_fail("allreduce: [%d] = %f", i, (double)x[i]);
	return 0;
}

START_TEST(shm_and_ofi)
{
	static const char *const extra[] = {"WEFT_TRANSPORTS=shm,ofi", NULL};
	struct env_set e;
	struct harness_job job = {.nranks = 4,
				  .env = make_env(&e, &variants[_i], extra),
				  .body = body_mixed,
				  .timeout_s = JOB_TIMEOUT_S,
				  .before_init = two_hosts};
	run_ok(&job);
}
END_TEST

/* ---- scores, descriptions, properties ---- */

static int body_describe(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const char *proto = arg;
	struct weft_tp *tp = NULL, *sock = NULL;
	for (size_t i = 0; i < comm->ntps; i++) {
		if (comm->tps[i] && comm->tps[i]->ops == &weft_tp_ofi_ops)
			tp = comm->tps[i];
		else if (comm->tps[i] && strcmp(comm->tps[i]->ops->name, "socket") == 0)
			sock = comm->tps[i];
	}
	if (!tp || !sock)
		return harness_fail("ofi or socket missing");
	int peer = 1 - rank;
	char d[128];
	tp->ops->prop.describe(tp, peer, d, sizeof(d));
	if (strcmp(d, "ofi(tcp;ofi_rxm)") != 0)
		return harness_fail("describe: \"%s\"", d);
	/* tcp;ofi_rxm never outranks the socket transport. */
	int s_ofi = tp->ops->conn.score(tp, peer), s_sock = sock->ops->conn.score(sock, peer);
	if (s_ofi <= 0 || s_ofi >= s_sock)
		return harness_fail("scores: ofi %d, socket %d", s_ofi, s_sock);
	if (comm->peers[peer].tp != sock)
		return harness_fail("peer served by %s", comm->peers[peer].tp->ops->name);
	struct weft_tp_props props;
	tp->ops->prop.props(tp, peer, &props);
	if (props.ordered != (strcmp(proto, "rma") == 0) || props.bandwidth_Bps <= 0 ||
	    props.latency_s <= 0)
		return harness_fail("props: ordered %d bw %g lat %g", props.ordered,
				    props.bandwidth_Bps, props.latency_s);
	return 0;
}

START_TEST(describe_and_score)
{
	static const char *const extra[] = {"WEFT_TRANSPORTS=socket,ofi", "WEFT_SOCKET_IFNAME=lo",
					    NULL};
	struct env_set e;
	struct harness_job job = {.nranks = 2,
				  .env = make_env(&e, &variants[_i], extra),
				  .body = body_describe,
				  .arg = (void *)variants[_i].proto,
				  .timeout_s = JOB_TIMEOUT_S};
	run_ok(&job);
}
END_TEST

/* Not asked for and no RDMA device: idle, the job runs without it. */
static int body_idle(weft_comm_t comm, int rank, int nranks, void *arg)
{
	for (size_t i = 0; i < comm->ntps; i++) {
		struct weft_tp *tp = comm->tps[i];
		if (!tp || tp->ops != &weft_tp_ofi_ops)
			continue;
		char d[256];
		tp->ops->prop.describe(tp, 1 - rank, d, sizeof(d));
		if (!strstr(d, "idle") || tp->ops->conn.score(tp, 1 - rank) != 0)
			return harness_fail("ofi not idle: \"%s\"", d);
		return weft_barrier(comm) == WEFT_SUCCESS ? 0 : harness_fail("barrier");
	}
	return harness_fail("no ofi transport");
}

START_TEST(idle_unless_asked)
{
	/* 0: nothing set; 1: a library that does not exist, not asked for. */
	static const char *const env1[] = {"WEFT_OFI_LIB=libweft-no-such-fabric.so.1", NULL};
	struct harness_job job = {
	    .nranks = 2, .env = _i ? env1 : NULL, .body = body_idle, .timeout_s = JOB_TIMEOUT_S};
	if (weft_ofi_hardware_visible() || getenv("FI_PROVIDER") || getenv("WEFT_OFI_PROVIDER") ||
	    getenv("WEFT_TRANSPORTS"))
		return; /* ofi would wake up here */
	run_ok(&job);
}
END_TEST

/* ---- init errors: providers, the library, settings ---- */

struct init_error {
	const char *prov; /* WEFT_OFI_PROVIDER, or NULL */
	const char *env[3];
	const char *want[3]; /* substrings of the message */
	weft_status_t status;
};

static const struct init_error init_errors[] = {
    {"bogus",
     {NULL},
     {"WEFT_OFI_PROVIDER=bogus", "no such provider", "tcp;ofi_rxm"},
     WEFT_ERR_INVALID_ARG},
    {NULL,
     {"FI_PROVIDER=bogus"},
     {"FI_PROVIDER=bogus", "no such provider", "sockets"},
     WEFT_ERR_INVALID_ARG},
    /* built into libfabric, but there is no Omni-Path device here */
    {"psm2", {NULL}, {"psm2", "no such provider", "tcp;ofi_rxm"}, WEFT_ERR_INVALID_ARG},
    /* exists (multi-rail over rxm, given rails), but has no RMA with
     * remote CQ data: lacks what Weft needs */
    {"tcp;ofi_rxm;ofi_mrail",
     {"FI_OFI_MRAIL_ADDR=127.0.0.1"},
     {"WEFT_OFI_PROVIDER=tcp;ofi_rxm;ofi_mrail", "lacks what Weft needs",
      "would work: tcp;ofi_rxm"},
     WEFT_ERR_NOT_SUPPORTED},
    {"tcp;ofi_rxm",
     {"WEFT_OFI_LIB=libweft-no-such-fabric.so.1"},
     {"libweft-no-such-fabric", "WEFT_OFI_LIB"},
     WEFT_ERR_NOT_SUPPORTED},
    {"tcp;ofi_rxm",
     {"WEFT_OFI_PROTO=fast"},
     {"WEFT_OFI_PROTO=fast", "tagged or rma"},
     WEFT_ERR_INVALID_ARG},
    {"tcp;ofi_rxm", {"WEFT_OFI_CHUNK=1"}, {"WEFT_OFI_CHUNK=1", "4K"}, WEFT_ERR_INVALID_ARG},
    {"tcp;ofi_rxm", {"WEFT_OFI_CHUNK=big"}, {"WEFT_OFI_CHUNK=big"}, WEFT_ERR_INVALID_ARG},
    {"tcp;ofi_rxm",
     {"WEFT_OFI_SLOTS=3", "WEFT_OFI_PROTO=rma"},
     {"WEFT_OFI_SLOTS=3", "power of two"},
     WEFT_ERR_INVALID_ARG},
    {"tcp;ofi_rxm",
     {"WEFT_OFI_SLOT_BYTES=100", "WEFT_OFI_PROTO=rma"},
     {"WEFT_OFI_SLOT_BYTES=100", "multiple of 64"},
     WEFT_ERR_INVALID_ARG},
    {"tcp;ofi_rxm", {"WEFT_OFI_STALL=0"}, {"WEFT_OFI_STALL=0"}, WEFT_ERR_INVALID_ARG},
    {"tcp;ofi_rxm", {"WEFT_OFI_EPS=9"}, {"WEFT_OFI_EPS=9", "1 to 8"}, WEFT_ERR_INVALID_ARG},
    {"tcp;ofi_rxm",
     {"WEFT_OFI_EPS=2", "WEFT_OFI_PROTO=rma"},
     {"WEFT_OFI_EPS=2", "tagged path"},
     WEFT_ERR_INVALID_ARG},
};
#define NINIT_ERRORS ((int)(sizeof(init_errors) / sizeof(init_errors[0])))

static int expect_init_error(int rank, int nranks, weft_status_t status, const char *message,
			     double seconds, void *arg)
{
	const struct init_error *ie = arg;
	if (status != ie->status)
		return harness_fail("init: %s, expected %s: %s", weft_status_string(status),
				    weft_status_string(ie->status), message);
	for (int k = 0; k < 3 && ie->want[k]; k++)
		if (!strstr(message, ie->want[k]))
			return harness_fail("init error \"%s\" does not say \"%s\"", message,
					    ie->want[k]);
	return 0;
}

static int body_unreached(weft_comm_t comm, int rank, int nranks, void *arg)
{
	return harness_fail("init succeeded");
}

START_TEST(init_error)
{
	const struct init_error *ie = &init_errors[_i];
	struct variant v = {ie->prov, "tagged"};
	struct env_set e;
	struct harness_job job = {.nranks = 2,
				  .env = make_env(&e, &v, ie->env),
				  .body = body_unreached,
				  .arg = (void *)ie,
				  .timeout_s = JOB_TIMEOUT_S,
				  .init_failed = expect_init_error};
	run_ok(&job);
}
END_TEST

START_TEST(settings_listed)
{
	static const char *const names[] = {
	    "WEFT_OFI_PROVIDER",   "WEFT_OFI_PROTO", "WEFT_OFI_CHUNK", "WEFT_OFI_SLOTS",
	    "WEFT_OFI_SLOT_BYTES", "WEFT_OFI_STALL", "WEFT_OFI_LIB",   "WEFT_OFI_EPS"};
	size_t n;
	const struct weft_setting *all = weft_settings_all(&n);
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		bool found = false;
		for (size_t i = 0; i < n; i++)
			found |= strcmp(all[i].name, names[k]) == 0 && all[i].help[0];
		ck_assert_msg(found, "%s is not declared", names[k]);
	}
}
END_TEST

/* ---- sub-flows (WEFT_OFI_EPS) ---- */

/* This process's TCP sockets that sent at least @p least bytes (acked:
 * TCP_INFO's tcpi_bytes_acked), libfabric's among them. */
static int busy_sockets(uint64_t least)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++) {
		struct tcp_info ti;
		socklen_t len = sizeof(ti);
		memset(&ti, 0, sizeof(ti));
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
		    ti.tcpi_bytes_acked >= least)
			n++;
	}
	return n;
}

/* An 8 MiB AllReduce on 2 ranks over WEFT_OFI_EPS=@p arg endpoints: right,
 * described with its endpoints, and every endpoint's connection carried a
 * share (each rank sends 8 MiB: with k endpoints, k sockets of at least
 * 8 MiB / (4 k)), against one busy socket with 1 endpoint. */
static int body_subflows(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int eps = *(const int *)arg;
	size_t count = 2u << 20, bytes = count * sizeof(float);
	float *buf = malloc(bytes);
	if (!buf)
		return harness_fail("out of memory");
	for (size_t i = 0; i < count; i++)
		buf[i] = (float)((rank + 1) * (i % 1000));
	weft_status_t st = weft_allreduce(buf, buf, count, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "allreduce");
	for (size_t i = 0; i < count; i++)
		if (buf[i] != (float)(3 * (i % 1000)))
			return harness_fail("element %zu is %g", i, buf[i]);
	free(buf);
	char d[256] = "";
	struct weft_tp *tp = comm->peers[1 - rank].tp;
	tp->ops->prop.describe(tp, 1 - rank, d, sizeof(d));
	char want[32];
	snprintf(want, sizeof(want), "%d endpoints", eps);
	if (tp->ops != &weft_tp_ofi_ops || (eps > 1) != (strstr(d, want) != NULL))
		return harness_fail("described as \"%s\"", d);
	int busy = busy_sockets(bytes / (4 * (size_t)eps));
	if (eps > 1 ? busy < eps : busy != 1)
		return harness_fail("%d endpoints: %d sockets carried a share", eps, busy);
	return weft_barrier(comm) == WEFT_SUCCESS ? 0 : harness_fail("barrier");
}

START_TEST(subflows)
{
	static const int eps[] = {1, 4};
	char set[32];
	snprintf(set, sizeof(set), "WEFT_OFI_EPS=%d", eps[_i]);
	/* 64 KiB chunks: 128 per rank, so that the hash leaves no endpoint
	 * below a quarter of its share (about 1e-7; 512 KiB chunks, 16 per
	 * rank, would leave one empty in some 4 % of jobs). */
	const char *const extra[] = {set, "WEFT_ALGO=allreduce:ring", "WEFT_OFI_CHUNK=64K", NULL};
	struct env_set e;
	struct harness_job job = {.nranks = 2,
				  .env = make_env(&e, &variants[0], extra),
				  .body = body_subflows,
				  .arg = (void *)&eps[_i],
				  .timeout_s = JOB_TIMEOUT_S};
	run_ok(&job);
}
END_TEST

/* Ranks that disagree on WEFT_OFI_EPS fail init, naming it. */
static int eps_differ(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	return setenv("WEFT_OFI_EPS", rank ? "2" : "3", 1) != 0;
}

START_TEST(subflows_differ)
{
	static const struct init_error ie = {"tcp;ofi_rxm",
					     {NULL},
					     {"WEFT_OFI_EPS differs", "has 2", "has 3"},
					     WEFT_ERR_INVALID_ARG};
	struct env_set e;
	struct harness_job job = {.nranks = 2,
				  .env = make_env(&e, &variants[0], NULL),
				  .body = body_unreached,
				  .arg = (void *)&ie,
				  .before_init = eps_differ,
				  .timeout_s = JOB_TIMEOUT_S,
				  .init_failed = expect_init_error};
	run_ok(&job);
}
END_TEST

static Suite *ofi_suite(void)
{
	Suite *s = suite_create("ofi");
	TCase *tc = tcase_create("data");
	tcase_set_timeout(tc, 4 * JOB_TIMEOUT_S);
	tcase_add_loop_test(tc, sizes_all, 0, NVARIANTS);
	tcase_add_loop_test(tc, reduce_ring, 0, NVARIANTS);
	tcase_add_loop_test(tc, queued, 0, 2);
	tcase_add_loop_test(tc, mismatch, 0, 10);
	tcase_add_loop_test(tc, shm_and_ofi, 0, 2);
	tcase_add_loop_test(tc, describe_and_score, 0, 2);
	tcase_add_loop_test(tc, subflows, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("failures");
	tcase_set_timeout(tc, 2 * JOB_TIMEOUT_S);
	tcase_add_loop_test(tc, peer_killed, 0, 4 * NVARIANTS);
	tcase_add_loop_test(tc, abort_peer, 0, 2);
	tcase_add_loop_test(tc, idle_unless_asked, 0, 2);
	tcase_add_loop_test(tc, init_error, 0, NINIT_ERRORS);
	tcase_add_test(tc, subflows_differ);
	tcase_add_test(tc, settings_listed);
	suite_add_tcase(s, tc);
	return s;
}

/* Load libfabric and let it initialise its providers once, here, so that
 * every forked rank inherits them. */
static void warm_up(void)
{
	void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
		       struct fi_info **) = h ? dlsym(h, "fi_getinfo") : NULL;
	void (*freeinfo)(struct fi_info *) = h ? dlsym(h, "fi_freeinfo") : NULL;
	struct fi_info *info = NULL;
	if (getinfo && freeinfo && getinfo(OFI_API, NULL, NULL, 0, NULL, &info) == 0)
		freeinfo(info);
}

int main(void)
{
	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("FI_SOCKETS_IFACE", "lo", 1);
	setenv("FI_UDP_IFACE", "lo", 1);
	/* Rails for mrail (the provider that lacks RMA), read when libfabric
	 * initialises its providers. */
	setenv("FI_OFI_MRAIL_ADDR", "127.0.0.1", 1);
	warm_up();
	SRunner *sr = srunner_create(ofi_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
