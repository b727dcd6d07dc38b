/*
 * verbs_settings.c — bad WEFT_IB_* values (and WEFT_SPRAY, which
 * verbs reads too) fail init on every rank with WEFT_ERR_INVALID_ARG and
 * a message that names the variable and the value it was given, promptly
 * (not by a timeout); over the test double, so that the transport gets as
 * far as each setting is read.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "verbs_env.h"

#define JOB_TIMEOUT_S 30.0

/* One bad value each; what the message must show. */
static const char *const bad[][2] = {
    {"WEFT_IB_TC=256", "WEFT_IB_TC=256"},
    {"WEFT_IB_SL=16", "WEFT_IB_SL=16"},
    {"WEFT_IB_TIMEOUT=0", "WEFT_IB_TIMEOUT=0"},
    {"WEFT_IB_RETRY_CNT=many", "WEFT_IB_RETRY_CNT=many"},
    {"WEFT_IB_SLOTS=3", "WEFT_IB_SLOTS=3"},
    {"WEFT_IB_SLOTS=2048", "WEFT_IB_SLOTS=2048"},
    {"WEFT_IB_SLOT_BYTES=100", "WEFT_IB_SLOT_BYTES=100"},
    {"WEFT_IB_SLOT_BYTES=1000", "WEFT_IB_SLOT_BYTES=1000"},
    {"WEFT_IB_STALL=0", "WEFT_IB_STALL=0"},
    {"WEFT_IB_GID_INDEX=300", "WEFT_IB_GID_INDEX=300"},
    {"WEFT_IB_GID_INDEX=x", "WEFT_IB_GID_INDEX=x"},
    {"WEFT_IB_HCA=mlx5_0:x", "WEFT_IB_HCA=mlx5_0:x"},
    {"WEFT_IB_QPS_PER_CONN=9", "WEFT_IB_QPS_PER_CONN=9"},
    {"WEFT_IB_QPS_PER_CONN=0", "WEFT_IB_QPS_PER_CONN=0"},
    {"WEFT_IB_QPS_PER_CONN=2x", "WEFT_IB_QPS_PER_CONN=2x"},
    {"WEFT_SPRAY=fastest", "WEFT_SPRAY=fastest"},
};
#define NBAD (sizeof(bad) / sizeof(bad[0]))

static int expect_invalid(int rank, int nranks, weft_status_t st, const char *msg, double seconds,
			  void *arg)
{
	const char *want = arg;
	if (st != WEFT_ERR_INVALID_ARG && st != WEFT_ERR_REMOTE)
		return harness_fail("init: %s (%s), expected an invalid argument",
				    weft_status_string(st), msg);
	/* Every rank has the bad value, so each names it itself. */
	if (st != WEFT_ERR_INVALID_ARG || !strstr(msg, want) ||
	    (!strstr(msg, "expected") && !strstr(msg, "must be")))
		return harness_fail("init: \"%s\" does not name %s and what was expected", msg,
				    want);
	if (seconds > 5.0)
		return harness_fail("init took %.1f s to fail", seconds);
	return 0;
}

static int body_unexpected(weft_comm_t comm, int rank, int nranks, void *arg)
{
	return harness_fail("init succeeded with %s", (const char *)arg);
}

START_TEST(bad_value)
{
	const char *const more[] = {bad[_i][0], NULL};
	struct harness_job job = {.nranks = 2,
				  .env = verbs_env(more),
				  .body = body_unexpected,
				  .arg = (void *)bad[_i][1],
				  .timeout_s = JOB_TIMEOUT_S,
				  .init_failed = expect_invalid};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s: %s", bad[_i][0], res.summary);
}
END_TEST

/* A bad value is an error even where verbs has nothing to serve with
 * (rdma-core absent): the setting is wrong on every host. */
START_TEST(bad_value_library_absent)
{
	const char *const more[] = {"WEFT_IBVERBS_LIB=/nonexistent/libibverbs.so.1",
				    "WEFT_TRANSPORTS=verbs,socket", "WEFT_IB_TC=-1", NULL};
	struct harness_job job = {.nranks = 2,
				  .env = verbs_env(more),
				  .body = body_unexpected,
				  .arg = "WEFT_IB_TC=-1",
				  .timeout_s = JOB_TIMEOUT_S,
				  .init_failed = expect_invalid};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

static Suite *settings_suite(void)
{
	Suite *s = suite_create("verbs_settings");
	TCase *tc = tcase_create("settings");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, bad_value, 0, NBAD);
	tcase_add_test(tc, bad_value_library_absent);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(settings_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
