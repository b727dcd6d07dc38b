/*
 * test_harness.c — the multi-rank harness itself: that it reports what the
 * other suites rely on. A hung rank is killed at the deadline and named with
 * its last progress note; exit codes, signals and failure messages reach the
 * result per rank; absent ranks are not started; the shared area comes back;
 * init through the environment works.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* Every rank has finished init once this returns (see test_failures.c,
 * init_then_exit, for what happens to a rank that exits sooner). */
static int sync_ranks(weft_comm_t comm)
{
	int32_t x = 1;
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_INT32, WEFT_SUM, comm);
	return st == WEFT_SUCCESS ? 0 : harness_fail_status(comm, st, "sync allreduce");
}

static int ends_differently(weft_comm_t comm, int rank, int nranks, void *arg)
{
	if (sync_ranks(comm))
		return 3;
	int *counter = harness_shared();
	__atomic_add_fetch(counter, 1, __ATOMIC_SEQ_CST);
	switch (rank) {
	case 1: return harness_fail("rank one says %d", 42);
	case 2:
		harness_progress("about to hang");
		for (;;)
			pause();
	case 3: raise(SIGKILL); return 0;
	default: return 0;
	}
}

START_TEST(outcomes_are_reported)
{
	struct harness_result res;
	double t0 = harness_now();
	harness_run(4, NULL, ends_differently, NULL, 3.0, &res);
	double took = harness_now() - t0;
	ck_assert(!res.ok);
	ck_assert_msg(took < 6.0, "the job took %.1f s with a 3 s deadline", took);
	ck_assert_int_eq(res.rank[0].end, HARNESS_EXITED);
	ck_assert_int_eq(res.rank[0].code, 0);
	ck_assert_int_eq(res.rank[1].end, HARNESS_EXITED);
	ck_assert_int_eq(res.rank[1].code, 1);
	ck_assert_str_eq(res.rank[1].failure, "rank one says 42");
	ck_assert_int_eq(res.rank[2].end, HARNESS_HUNG);
	ck_assert_str_eq(res.rank[2].progress, "about to hang");
	ck_assert_int_eq(res.rank[3].end, HARNESS_SIGNALED);
	ck_assert_int_eq(res.rank[3].code, SIGKILL);
	ck_assert_msg(strstr(res.summary, "rank 2 HUNG") && strstr(res.summary, "about to hang"),
		      "summary: %s", res.summary);
	int counter;
	memcpy(&counter, res.shared, sizeof(counter));
	ck_assert_int_eq(counter, 4);
	/* The hung rank was killed: its PID is gone. */
	ck_assert(kill(res.rank[2].pid, 0) != 0);
}
END_TEST

static int count_ranks(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int n = -1, r = -1;
	weft_comm_size(comm, &n);
	weft_comm_rank(comm, &r);
	if (n != nranks || r != rank)
		return harness_fail("comm says rank %d of %d, harness %d of %d", r, n, rank,
				    nranks);
	return sync_ranks(comm);
}

START_TEST(every_rank_count)
{
	for (int n = 1; n <= 8; n++) {
		struct harness_result res;
		harness_run(n, NULL, count_ranks, NULL, 30, &res);
		ck_assert_msg(res.ok, "nranks %d: %s", n, res.summary);
	}
}
END_TEST

static int absent_init_failed(int rank, int nranks, weft_status_t st, const char *msg,
			      double seconds, void *arg)
{
	/* Which error is test_failures.c's business (missing_rank); here only
	 * that init did not succeed without rank 1. */
	return st != WEFT_SUCCESS ? 0 : harness_fail("init succeeded without rank 1");
}

START_TEST(absent_rank_not_started)
{
	static const char *const env[] = {"WEFT_BOOTSTRAP_TIMEOUT=1", NULL};
	struct harness_job job = {
	    .nranks = 3,
	    .env = env,
	    .timeout_s = 20,
	    .absent_ranks = 1u << 1,
	    .init_failed = absent_init_failed,
	};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_int_eq(res.rank[1].end, HARNESS_NOT_STARTED);
	ck_assert_int_eq(res.rank[1].pid, 0);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

static int env_seen(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const char *v = getenv("HARNESS_TEST_VALUE");
	if (!v || strcmp(v, "a=b c") != 0)
		return harness_fail("HARNESS_TEST_VALUE is \"%s\"", v ? v : "(unset)");
	return sync_ranks(comm);
}

START_TEST(env_reaches_ranks)
{
	static const char *const env[] = {"HARNESS_TEST_VALUE=a=b c", NULL};
	struct harness_result res;
	harness_run(2, env, env_seen, NULL, 30, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	ck_assert_ptr_null(getenv("HARNESS_TEST_VALUE")); /* only the ranks got it */

	struct harness_job job = {
	    .nranks = 3,
	    .env = env,
	    .body = env_seen,
	    .timeout_s = 30,
	    .init = HARNESS_INIT_ENV,
	};
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "weft_comm_init_env: %s", res.summary);
}
END_TEST

static Suite *harness_suite(void)
{
	Suite *s = suite_create("harness");
	TCase *tc = tcase_create("harness");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, outcomes_are_reported);
	tcase_add_test(tc, every_rank_count);
	tcase_add_test(tc, absent_rank_not_started);
	tcase_add_test(tc, env_reaches_ranks);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(harness_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
