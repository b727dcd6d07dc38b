/*
 * test_verbs.c — the verbs transport on its own data path, over the test
 * double for libibverbs (tests/fake_ibverbs, WEFT_IBVERBS_LIB) and the
 * fake sysfs tree: forked ranks with WEFT_TRANSPORTS=verbs exchange tagged
 * messages through the point-to-point layer and drive only the verbs
 * transport's progress, so every RDMA write, immediate, credit and
 * completion below went through the QPs the transport set up.
 *
 * Covered: sizes 0, 1, 8, the largest eager message and the smallest
 * rendezvous one, slot-1, slot, slot+1 and many slots between every pair
 * of 2..4 ranks; reduce receives with odd element counts, through more
 * bounce pieces than there are; 300 queued messages on a ring of 4 slots
 * (the slot and credit counters wrap the ring dozens of times, the large
 * ones by rendezvous) and a receiver that is slow, not dead; tag and
 * length mismatches; a peer killed mid-transfer in both directions, on
 * one host and on two; abort; no file left behind.
 * test_verbs_setup.c has what the QPs were told and when verbs serves.
 *
 * The slot is 16 KiB in these tests (WEFT_IB_SLOT_BYTES) so that
 * multi-slot messages stay small.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_ibverbs/fake_ibverbs_api.h"
#include "reduce/reduce.h"
#include "verbs_p2p.h"

START_TEST(test_sizes)
{
	run_ok(2 + _i, env_with(NULL), body_sizes, NULL);
}
END_TEST

/* ---- reduce receives: odd element counts across slots ---- */

static int body_reduce(weft_comm_t comm, int rank, int nranks, void *arg)
{
	/* The last is larger than the bounce pieces together (4 x 128K): they
	 * are reduced from and handed out again. */
	static const size_t counts[] = {1,     7, SLOT / 8 - 1, SLOT / 8 + 3, 5 * SLOT / 8 + 13,
					100003};
	int peer = 1 - rank;
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		for (int dt = 0; dt < 2; dt++) {
			weft_datatype_t dtype = dt ? WEFT_FLOAT64 : WEFT_INT32;
			size_t unit = dt ? 8 : 4, count = counts[k], len = count * unit;
			char *mine = malloc(len + 1), *out = malloc(len + 1);
			if (!mine || !out)
				return harness_fail("out of memory");
			for (size_t i = 0; i < count; i++) {
				if (dt)
					((double *)mine)[i] = (double)(i % 1000) + rank * 0.5;
				else
					((int32_t *)mine)[i] =
					    (int32_t)(i * 3 + (size_t)rank * 1000);
			}
			uint64_t tag = weft_p2p_tag(2 + k, (uint32_t)dt);
			struct weft_msg s = {.buf = mine, .len = len, .tag = tag};
			struct weft_msg r = {.buf = out,
					     .len = len,
					     .tag = tag,
					     .unit = unit,
					     .reduce = weft_reduce_kernel(dtype, WEFT_SUM),
					     .local = mine};
			weft_status_t st = weft_p2p_isend_msg(comm, peer, &s);
			if (st == WEFT_SUCCESS)
				st = weft_p2p_irecv_msg(comm, peer, &r);
			struct weft_msg *both[] = {&s, &r};
			if (st == WEFT_SUCCESS)
				st = drive(comm, both, 2, WAIT_S);
			if (st != WEFT_SUCCESS)
				return harness_fail_status(comm, st, "reduce of %zu", count);
			for (size_t i = 0; i < count; i++) {
				bool ok = dt ? ((double *)out)[i] == 2.0 * (double)(i % 1000) + 0.5
					     : ((int32_t *)out)[i] == (int32_t)(i * 6 + 1000);
				if (!ok)
					return harness_fail("reduce %s count %zu: element %zu",
							    dt ? "fp64" : "int32", count, i);
			}
			free(mine);
			free(out);
		}
	}
	return 0;
}

START_TEST(test_reduce_odd)
{
	run_ok(2, env_with(NULL), body_reduce, NULL);
}
END_TEST

/* ---- many queued messages: order, and credits wrapping the ring ---- */

#define NQUEUED 300

static size_t queued_len(size_t i)
{
	return i % 50 == 49 ? 3 * SLOT + i : (i * 37) % 3001;
}

/* arg: seconds rank 1 waits before it posts any receive (slow, not dead). */
static int body_order(weft_comm_t comm, int rank, int nranks, void *arg)
{
	double delay = arg ? *(const double *)arg : 0;
	int peer = 1 - rank;
	static struct weft_msg s[NQUEUED], r[NQUEUED];
	static struct weft_msg *ptrs[2 * NQUEUED];
	unsigned char *sbuf[NQUEUED], *rbuf[NQUEUED];
	for (size_t i = 0; i < NQUEUED; i++) {
		size_t len = queued_len(i);
		sbuf[i] = malloc(len + 1);
		rbuf[i] = malloc(len + 1);
		if (!sbuf[i] || !rbuf[i])
			return harness_fail("out of memory");
		fill(sbuf[i], len, rank, peer, (unsigned)i);
		uint64_t tag = weft_p2p_tag(9, (uint32_t)i);
		s[i] = (struct weft_msg){.buf = sbuf[i], .len = len, .tag = tag};
		r[i] = (struct weft_msg){.buf = rbuf[i], .len = len, .tag = tag};
		ptrs[2 * i] = &s[i];
		ptrs[2 * i + 1] = &r[i];
		if (weft_p2p_isend_msg(comm, peer, &s[i]) != WEFT_SUCCESS)
			return harness_fail("post send %zu", i);
	}
	if (rank == 1 && delay > 0) {
		/* Rank 0's sends stall on credits meanwhile: its stall checks
		 * probe this rank, find it alive, and wait on. */
		struct weft_tp *tp = verbs_of(comm);
		for (double end = harness_now() + delay; harness_now() < end;)
			tp->ops->msg.progress(tp);
	}
	for (size_t i = 0; i < NQUEUED; i++)
		if (weft_p2p_irecv_msg(comm, peer, &r[i]) != WEFT_SUCCESS)
			return harness_fail("post receive %zu", i);
	weft_status_t st = drive(comm, ptrs, 2 * NQUEUED, WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "queued exchange");
	for (size_t i = 0; i < NQUEUED; i++) {
		if (verify(rbuf[i], queued_len(i), peer, rank, (unsigned)i))
			return 1;
		free(sbuf[i]);
		free(rbuf[i]);
	}
	/* Every message takes one landing slot (rendezvous ones a header-only
	 * slot), so 300 of them wrap a 4-slot ring 75 times. */
	struct weft_rma_conn *c = &conn_to(comm, peer)->rc;
	if (c->txr.head < NQUEUED || c->rxr.head != c->txr.head)
		return harness_fail("%llu slots sent, %llu received: the ring did not wrap",
				    (unsigned long long)c->txr.head,
				    (unsigned long long)c->rxr.head);
	if (c->d_head < NQUEUED / 50)
		return harness_fail("%llu descriptors taken: the large messages did not go by "
				    "rendezvous",
				    (unsigned long long)c->d_head);
	return 0;
}

START_TEST(test_order)
{
	run_ok(2, env_with(NULL), body_order, NULL);
}
END_TEST

START_TEST(test_slow_receiver)
{
	static const double delay = 0.6;
	run_ok(2, env_with(NULL), body_order, (void *)&delay);
}
END_TEST

/* ---- tag and length mismatches ---- */

static int body_mismatch(weft_comm_t comm, int rank, int nranks, void *arg)
{
	char buf[128] = {0};
	if (sync_peers(comm))
		return 1;
	if (rank == 0) {
		struct weft_msg s1 = {.buf = buf, .len = 100, .tag = 5}, s2 = s1;
		weft_p2p_isend_msg(comm, 1, &s1);
		weft_p2p_isend_msg(comm, 2, &s2);
		struct weft_msg *both[] = {&s1, &s2};
		weft_status_t st = drive(comm, both, 2, WAIT_S);
		return st == WEFT_SUCCESS ? 0 : harness_fail_status(comm, st, "sends");
	}
	struct weft_msg r = {.buf = buf, .len = rank == 1 ? 100 : 120, .tag = rank == 1 ? 6 : 5};
	weft_p2p_irecv_msg(comm, 0, &r);
	struct weft_msg *one[] = {&r};
	weft_status_t st = drive(comm, one, 1, WAIT_S);
	if (st != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, st, "expected WEFT_ERR_REMOTE");
	const char *msg = weft_comm_last_error(comm);
	const char *want1 = rank == 1 ? "tag 0x5" : "100 bytes";
	const char *want2 = rank == 1 ? "tag 0x6" : "120 bytes";
	if (!strstr(msg, want1) || !strstr(msg, want2) || !strstr(msg, "peer rank 0"))
		return harness_fail("error \"%s\" does not name '%s' and '%s'", msg, want1, want2);
	return 0;
}

START_TEST(test_mismatch)
{
	run_ok(3, env_with(NULL), body_mismatch, NULL);
}
END_TEST

/* ---- a peer killed mid-transfer ---- */

#define BIG (2u << 20)

static size_t head_xferred(weft_comm_t comm, int peer)
{
	struct weft_rma_conn *c = &conn_to(comm, peer)->rc;
	const struct weft_tp_req *r = c->sendq.head ? c->sendq.head : c->recvq.head;
	return r ? r->xferred : 0;
}

/* Which rank dies, and whether the two ranks are on one "host". */
struct killed_arg {
	int victim;
	bool two_hosts;
};

/* Each rank a "host" of its own: no pid checks across them. */
static int own_host(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	char host[32];
	snprintf(host, sizeof(host), "vk-%d", rank);
	return setenv("WEFT_HOSTID", host, 1) ? HARNESS_EXIT_SETUP : 0;
}

static int set_host(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	const struct killed_arg *k = arg;
	return k->two_hosts ? own_host(rank, nranks, id, arg) : 0;
}

/* The rank that dies does so after part of the big message moved. On one
 * host the survivor's watchdog finds the pid gone; across hosts, the probe
 * write fails when the RC retries run out (the double's retry time). */
static int body_killed(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct killed_arg *k = arg;
	int victim = k->victim, peer = 1 - rank;
	if (sync_peers(comm))
		return 1;
	char *buf = malloc(BIG), small[8];
	if (!buf)
		return harness_fail("out of memory");
	memset(buf, 1, BIG);
	struct weft_msg big = {.buf = buf, .len = BIG, .tag = 77};
	struct weft_msg r = {.buf = small, .len = sizeof(small), .tag = 78};
	weft_status_t st =
	    rank == 0 ? weft_p2p_isend_msg(comm, peer, &big) : weft_p2p_irecv_msg(comm, peer, &big);
	if (st == WEFT_SUCCESS)
		st = weft_p2p_irecv_msg(comm, peer, &r);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "post");
	struct weft_tp *tp = verbs_of(comm);
	if (rank == victim) {
		double end = harness_now() + WAIT_S;
		/* One rendezvous write may move all of it: then it is done. */
		while (head_xferred(comm, peer) == 0 && !big.done && harness_now() < end) {
			tp->ops->msg.progress(tp);
			weft_p2p_progress(comm);
		}
		harness_progress("killing myself after %zu bytes",
				 big.done ? big.len : head_xferred(comm, peer));
		raise(SIGKILL);
	}
	double t0 = harness_now();
	struct weft_msg *both[] = {&big, &r};
	st = drive(comm, both, 2, WAIT_S);
	double took = harness_now() - t0;
	if (st != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, st, "expected WEFT_ERR_REMOTE");
	if (took > 5.0)
		return harness_fail("the peer's death took %.1f s to notice", took);
	if (!r.done || r.status != WEFT_ERR_REMOTE)
		return harness_fail("the pending receive was not failed");
	const char *msg = weft_comm_last_error(comm);
	const char *want = k->two_hosts ? "does not answer" : "died";
	if (!strstr(msg, want) || !strstr(msg, victim ? "rank 1" : "rank 0"))
		return harness_fail("error \"%s\" does not say the peer is gone (%s)", msg, want);
	fprintf(stderr, "rank %d: noticed in %.2f s: %s\n", rank, took, msg);
	free(buf);
	return 0;
}

START_TEST(test_killed)
{
	struct killed_arg k = {.victim = _i % 2, .two_hosts = _i >= 2};
	struct harness_job job = {.nranks = 2,
				  .env = env_with(NULL),
				  .body = body_killed,
				  .arg = &k,
				  .timeout_s = JOB_TIMEOUT_S,
				  .before_init = set_host};
	struct harness_result res;
	harness_run_job(&job, &res);
	int survivor = 1 - k.victim;
	ck_assert_msg(res.rank[survivor].end == HARNESS_EXITED && res.rank[survivor].code == 0,
		      "survivor: %s", res.summary);
	ck_assert_msg(res.rank[k.victim].end == HARNESS_SIGNALED, "victim did not die: %s",
		      res.summary);
}
END_TEST

/* ---- abort fails what is queued; the peer reads the state line ----
 * On two "hosts": on one, the survivor's watchdog may find the aborted
 * rank's pid gone first (it exits at once), and says that instead. */

static int body_abort(weft_comm_t comm, int rank, int nranks, void *arg)
{
	char buf[64];
	if (sync_peers(comm))
		return 1;
	struct weft_msg r = {.buf = buf, .len = sizeof(buf), .tag = 1};
	weft_status_t st = weft_p2p_irecv_msg(comm, 1 - rank, &r);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "post");
	struct weft_tp *tp = verbs_of(comm);
	if (rank == 0) {
		tp->ops->life.abort(tp);
		if (!r.done || r.status != WEFT_ERR_ABORTED)
			return harness_fail("abort left the receive %s",
					    r.done ? "failed wrongly" : "queued");
		struct weft_msg late = {.buf = buf, .len = 1, .tag = 2};
		if (weft_p2p_isend_msg(comm, 1, &late) != WEFT_ERR_ABORTED || !late.done)
			return harness_fail("a send after abort was accepted");
		return 0;
	}
	double t0 = harness_now();
	struct weft_msg *one[] = {&r};
	st = drive(comm, one, 1, WAIT_S);
	if (st != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, st, "expected WEFT_ERR_REMOTE");
	if (!strstr(weft_comm_last_error(comm), "aborted"))
		return harness_fail("error \"%s\" does not say aborted",
				    weft_comm_last_error(comm));
	return harness_now() - t0 < 2.0
		   ? 0
		   : harness_fail("abort took %.1f s to notice", harness_now() - t0);
}

START_TEST(test_abort)
{
	struct harness_job job = {.nranks = 2,
				  .env = env_with(NULL),
				  .body = body_abort,
				  .timeout_s = JOB_TIMEOUT_S,
				  .before_init = own_host};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* ---- nothing left in /dev/shm ---- */

START_TEST(test_no_files_left)
{
	struct harness_result res;
	harness_run(3, env_with(NULL), body_sizes, NULL, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	verbs_find_paths();
	void *h = dlopen(verbs_fake_path, RTLD_NOW);
	ck_assert_msg(h, "%s", dlerror());
	weft_fake_files_fn files = (weft_fake_files_fn)dlsym(h, WEFT_FAKE_FILES);
	ck_assert_ptr_nonnull(files);
	for (int r = 0; r < 3; r++)
		ck_assert_msg(files(res.rank[r].pid) == 0, "rank %d left %d files", r,
			      files(res.rank[r].pid));
}
END_TEST

static Suite *verbs_suite(void)
{
	Suite *s = suite_create("verbs");
	TCase *tc = tcase_create("data");
	tcase_set_timeout(tc, 90);
	tcase_add_loop_test(tc, test_sizes, 0, 3); /* 2, 3 and 4 ranks */
	tcase_add_test(tc, test_reduce_odd);
	tcase_add_test(tc, test_order);
	tcase_add_test(tc, test_slow_receiver);
	tcase_add_test(tc, test_mismatch);
	tcase_add_test(tc, test_no_files_left);
	suite_add_tcase(s, tc);
	TCase *tf = tcase_create("failures");
	tcase_set_timeout(tf, 90);
	/* rank 0 dies, then rank 1; on one host, then on two */
	tcase_add_loop_test(tf, test_killed, 0, 4);
	tcase_add_test(tf, test_abort);
	suite_add_tcase(s, tf);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(verbs_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
