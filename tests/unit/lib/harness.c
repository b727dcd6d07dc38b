/*
 * harness.c — the multi-rank harness itself: that it reports what the
 * other suites rely on. A hung rank is killed at the deadline and named with
 * its last progress note; exit codes, signals and failure messages reach the
 * result per rank; absent ranks are not started; the shared area comes back;
 * init through the environment works. The rounding test data (harness.h) is
 * what it claims: for 1..8 ranks, every partial result over a proper subset
 * of the ranks is exactly representable (checked over every subset; for
 * products, one that rounds leaves only powers of two to multiply), the
 * expected value is the full result rounded once to nearest even, and it
 * differs from the truncated result often enough that a rounding bug shows.
 */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* Every rank has finished init once this returns (see integration/failures.c,
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
	/* Which error is integration/failures.c's business (missing_rank); here only
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

/* @p x rounded to @p p significant bits, to nearest even (the default mode). */
static long double round_bits_to(long double x, int p)
{
	if (x == 0)
		return 0;
	int e;
	long double f = frexpl(x, &e);
	return ldexpl(nearbyintl(ldexpl(f, p)), e - p);
}

static int type_bits(weft_datatype_t dt)
{
	return dt == WEFT_FLOAT16 ? 11 : dt == WEFT_BFLOAT16 ? 8 : dt == WEFT_FLOAT32 ? 24 : 53;
}

/* Exactly representable and normal (fp16's range is the one that binds). */
static bool representable(long double x, weft_datatype_t dt)
{
	if (dt == WEFT_FLOAT16 && x != 0 && (fabsl(x) > 65504 || fabsl(x) < 0x1p-14L))
		return false;
	return round_bits_to(x, type_bits(dt)) == x;
}

#define ROUND_ELEMS 300

/* Checks one (dtype, op, nranks) of the rounding data; returns how many
 * elements the truncated result gets wrong. long double (64-bit
 * significand) holds every partial sum exactly, and every partial product
 * but fp64's (106 bits), which is left out of the subset check. */
static size_t check_round_pattern(weft_datatype_t dt, weft_op_t op, int n)
{
	static double vals[8][ROUND_ELEMS];
	unsigned char buf[ROUND_ELEMS * 8], want[ROUND_ELEMS * 8], trunc[ROUND_ELEMS * 8];
	for (int r = 0; r < n; r++) {
		harness_round_input(buf, ROUND_ELEMS, dt, op, r, n, 5);
		for (size_t i = 0; i < ROUND_ELEMS; i++)
			vals[r][i] = harness_elem_load(buf, i, dt);
	}
	harness_round_expected(want, ROUND_ELEMS, dt, op, n, 5);
	harness_round_truncated(trunc, ROUND_ELEMS, dt, op, n, 5);
	const char *what = harness_dtype_name(dt), *how = harness_op_name(op);
	bool exact_products = op != WEFT_PROD || dt != WEFT_FLOAT64;
	size_t sensitive = 0;
	for (size_t i = 0; i < ROUND_ELEMS; i++) {
		for (int r = 0; r < n; r++)
			ck_assert_msg(representable(vals[r][i], dt),
				      "%s %s n %d elem %zu rank %d: %a", what, how, n, i, r,
				      vals[r][i]);
		long double got = harness_elem_load(want, i, dt);
		for (unsigned mask = 1; exact_products && mask < (1u << n) - 1; mask++) {
			long double acc = op == WEFT_PROD ? 1 : 0, rest = 1;
			for (int r = 0; r < n; r++)
				if (mask & (1u << r))
					acc = op == WEFT_PROD ? acc * vals[r][i] : acc + vals[r][i];
				else
					rest *= vals[r][i];
			/* A product that rounds must hold both significands, and the
			 * other ranks' factors must then be exact powers of two that
			 * take the rounded value to the expected result unchanged. */
			bool ok = representable(acc, dt) ||
				  (op == WEFT_PROD && representable(rest, dt) &&
				   round_bits_to(acc, type_bits(dt)) * rest == got);
			ck_assert_msg(ok,
				      "%s %s n %d elem %zu: ranks 0x%x combine to %La, which needs "
				      "rounding",
				      what, how, n, i, mask, acc);
		}
		/* The full result, rounded once, and a left fold that rounds
		 * after every step as the library does: both give what the
		 * data promises. */
		long double all = op == WEFT_PROD ? 1 : 0, fold = vals[0][i];
		for (int r = 0; r < n; r++)
			all = op == WEFT_PROD ? all * vals[r][i] : all + vals[r][i];
		for (int r = 1; r < n; r++)
			fold = round_bits_to(
			    op == WEFT_PROD ? fold * vals[r][i] : fold + vals[r][i], type_bits(dt));
		if (op == WEFT_AVG) {
			/* fp64: 64 bits are too few to round a quotient twice safely;
			 * check |want - T/n| <= half an ulp of want instead. */
			if (dt == WEFT_FLOAT64) {
				long double ulp = got == 0 ? 0 : ldexpl(1, ilogbl(got) - 52);
				ck_assert_msg(fabsl(got * n - all) <= ulp * n / 2,
					      "avg fp64 n %d elem %zu: %La for %La / %d", n, i, got,
					      all, n);
			} else {
				ck_assert_msg(got == round_bits_to(all / n, type_bits(dt)),
					      "avg %s n %d elem %zu: expected %La for %La / %d",
					      what, n, i, got, all, n);
			}
		} else if (exact_products) {
			ck_assert_msg(got == round_bits_to(all, type_bits(dt)) && got == fold,
				      "%s %s n %d elem %zu: expected %La, exact %La, fold %La",
				      what, how, n, i, got, all, fold);
		}
		sensitive += got != (long double)harness_elem_load(trunc, i, dt);
	}
	return sensitive;
}

START_TEST(round_patterns_are_order_free)
{
	static const weft_datatype_t dts[] = {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32,
					      WEFT_FLOAT64};
	static const weft_op_t ops[] = {WEFT_SUM, WEFT_PROD, WEFT_AVG};
	for (size_t d = 0; d < 4; d++)
		for (size_t o = 0; o < 3; o++)
			for (int n = 1; n <= 8; n++) {
				ck_assert(harness_round_supported(dts[d], ops[o]));
				size_t sensitive = check_round_pattern(dts[d], ops[o], n);
				/* Averages over 2^k ranks divide exactly; one rank
				 * combines nothing. Everything else must catch a
				 * truncation on a good share of the elements. */
				bool can_round = n > 1 && (ops[o] != WEFT_AVG || (n & (n - 1)));
				if (can_round)
					ck_assert_msg(sensitive >= ROUND_ELEMS / 5,
						      "%s %s n %d: only %zu of %d elements tell "
						      "rounding from truncation",
						      harness_dtype_name(dts[d]),
						      harness_op_name(ops[o]), n, sensitive,
						      ROUND_ELEMS);
			}
	ck_assert(!harness_round_supported(WEFT_INT32, WEFT_SUM));
	ck_assert(!harness_round_supported(WEFT_FLOAT32, WEFT_MAX));
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
	tcase_add_test(tc, round_patterns_are_order_free);
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
