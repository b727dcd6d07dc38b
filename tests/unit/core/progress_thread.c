/*
 * progress_thread.c — WEFT_PROGRESS_THREAD=1 and completion callbacks.
 *
 *  - with the thread, a non-blocking AllReduce finishes while the caller
 *    only sleeps (no Weft call at all until its callback has run), and the
 *    result is exact; the callback runs once, on another thread;
 *  - without the thread, nothing moves while the caller sleeps, and the
 *    callback runs inside the weft_test that finishes the operation;
 *  - a callback registered after the operation finished runs at once;
 *  - blocking calls and several outstanding operations with the thread
 *    running (the matrix suites run again under the setting in make test);
 *  - weft_comm_abort from another thread fails a waiting rank's operation;
 *  - a bad WEFT_PROGRESS_THREAD is an init error that names it.
 * Over shm and socket.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define JOB_TIMEOUT_S 60.0
#define COUNT	      (1u << 20) /* 4 MiB of floats: many chunks, some time to take */

struct callback {
	_Atomic int calls;
	_Atomic weft_status_t status;
	pthread_t thread; /* where it ran */
};

static void on_done(void *arg, weft_status_t status)
{
	struct callback *cb = arg;
	cb->thread = pthread_self();
	atomic_store(&cb->status, status);
	atomic_fetch_add(&cb->calls, 1);
}

/* Sleep in small steps until the callback ran or @p limit_s passed. */
static bool sleep_until_called(struct callback *cb, double limit_s)
{
	double end = harness_now() + limit_s;
	while (atomic_load(&cb->calls) == 0 && harness_now() < end)
		usleep(1000);
	return atomic_load(&cb->calls) > 0;
}

static int check_result(const float *got, const float *want, size_t count)
{
	char why[256];
	if (harness_compare(got, want, count, WEFT_FLOAT32, why, sizeof(why)) != SIZE_MAX)
		return harness_fail("allreduce result: %s", why);
	return 0;
}

static int body_overlap(weft_comm_t comm, int rank, int nranks, void *arg)
{
	bool threaded = *(const bool *)arg;
	float *buf = malloc(COUNT * sizeof(float)), *want = malloc(COUNT * sizeof(float));
	if (!buf || !want)
		return harness_fail("no memory");
	harness_ar_input(buf, COUNT, WEFT_FLOAT32, WEFT_SUM, rank, nranks, 3);
	harness_ar_expected(want, COUNT, WEFT_FLOAT32, WEFT_SUM, nranks, 3);
	struct callback cb = {0};
	weft_request_t req;
	weft_status_t st =
	    weft_iallreduce(WEFT_IN_PLACE, buf, COUNT, WEFT_FLOAT32, WEFT_SUM, comm, &req);
	if (st == WEFT_SUCCESS)
		st = weft_request_on_complete(req, on_done, &cb);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "iallreduce");
	/* With the thread, the caller never progresses a non-blocking call, so
	 * a callback that ran already ran because the thread had finished. */
	bool early = atomic_load(&cb.calls) > 0;
	if (!threaded && early)
		return harness_fail("the allreduce finished inside its own post");
	harness_progress("sleeping while the allreduce runs");
	bool called = sleep_until_called(&cb, threaded ? 30.0 : 0.5);
	if (threaded && !called)
		return harness_fail("the progress thread did not finish the allreduce in 30 s");
	if (!threaded && called)
		return harness_fail("the allreduce finished with no one to drive it");
	if (threaded && !early && pthread_equal(cb.thread, pthread_self()))
		return harness_fail("the callback ran on the caller's thread");
	while ((st = weft_test(&req)) == WEFT_INPROGRESS)
		;
	if (st != WEFT_SUCCESS || req != NULL)
		return harness_fail_status(comm, st, "weft_test");
	if (atomic_load(&cb.calls) != 1 || atomic_load(&cb.status) != WEFT_SUCCESS)
		return harness_fail("callback ran %d times, status %d", atomic_load(&cb.calls),
				    atomic_load(&cb.status));
	if (!threaded && !pthread_equal(cb.thread, pthread_self()))
		return harness_fail("without the thread the callback ran elsewhere");
	int bad = check_result(buf, want, COUNT);
	free(buf);
	free(want);
	return bad;
}

static void run_job(int nranks, const char *transport, bool threaded, harness_body_fn body)
{
	char tp[64];
	snprintf(tp, sizeof(tp), "WEFT_TRANSPORTS=%s", transport);
	const char *const env[] = {threaded ? "WEFT_PROGRESS_THREAD=1" : "WEFT_PROGRESS_THREAD=0",
				   tp, "WEFT_SOCKET_IFNAME=lo", "WEFT_TIMEOUT=30", NULL};
	struct harness_result res;
	harness_run(nranks, env, body, &threaded, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s, thread %d: %s", transport, threaded, res.summary);
}

START_TEST(overlap_shm)
{
	run_job(2, "shm", true, body_overlap);
	run_job(2, "shm", false, body_overlap);
}
END_TEST

START_TEST(overlap_socket)
{
	run_job(2, "socket", true, body_overlap);
	run_job(3, "socket", true, body_overlap);
}
END_TEST

/* A callback registered once the operation is known to be finished. */
static int body_late_callback(weft_comm_t comm, int rank, int nranks, void *arg)
{
	float x = (float)rank;
	weft_request_t req;
	weft_status_t st =
	    weft_iallreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm, &req);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "iallreduce");
	/* Operations run in call order: once a blocking one returns, the
	 * first is finished too. Then register. */
	struct callback done_cb = {0};
	float probe = 0;
	if (weft_allreduce(WEFT_IN_PLACE, &probe, 1, WEFT_FLOAT32, WEFT_SUM, comm) != WEFT_SUCCESS)
		return harness_fail("probe allreduce failed");
	st = weft_request_on_complete(req, on_done, &done_cb);
	if (st != WEFT_SUCCESS || atomic_load(&done_cb.calls) != 1)
		return harness_fail("a callback on a finished request ran %d times",
				    atomic_load(&done_cb.calls));
	if (!pthread_equal(done_cb.thread, pthread_self()))
		return harness_fail("it should run at once, on the caller's thread");
	if (weft_wait(&req) != WEFT_SUCCESS || x != (float)(nranks * (nranks - 1) / 2))
		return harness_fail("result %g", (double)x);
	if (weft_request_on_complete(NULL, on_done, NULL) != WEFT_ERR_INVALID_ARG)
		return harness_fail("a NULL request was accepted");
	return 0;
}

START_TEST(late_callback)
{
	run_job(2, "shm", true, body_late_callback);
	run_job(2, "socket", false, body_late_callback);
}
END_TEST

/* Rank 1 never joins the second allreduce; rank 0's other thread aborts
 * its communicator while rank 0 waits, which must end the wait. */
static void *aborter(void *arg)
{
	usleep(300 * 1000);
	weft_comm_abort(arg);
	return NULL;
}

static int body_abort(weft_comm_t comm, int rank, int nranks, void *arg)
{
	float x = 1;
	if (weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm) != WEFT_SUCCESS)
		return harness_fail("first allreduce");
	if (rank == 1) {
		sleep(3); /* never calls: rank 0 aborts meanwhile; its abort reaches us */
		return 0;
	}
	pthread_t t;
	if (pthread_create(&t, NULL, aborter, comm) != 0)
		return harness_fail("pthread_create");
	double t0 = harness_now();
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm);
	double took = harness_now() - t0;
	pthread_join(t, NULL);
	if (st != WEFT_ERR_ABORTED)
		return harness_fail_status(comm, st, "expected WEFT_ERR_ABORTED");
	if (took > 10)
		return harness_fail("the abort took %.1f s to end the wait", took);
	return 0;
}

START_TEST(abort_from_another_thread)
{
	run_job(2, "shm", true, body_abort);
	run_job(2, "socket", false, body_abort);
}
END_TEST

static int expect_setting_error(int rank, int nranks, weft_status_t st, const char *msg,
				double seconds, void *arg)
{
	if (rank != 0)
		return 0; /* the others fail because rank 0 left */
	if (st != WEFT_ERR_INVALID_ARG || !strstr(msg, "WEFT_PROGRESS_THREAD=2"))
		return harness_fail("init: %s: %s", weft_status_string(st), msg);
	return 0;
}

static int body_none(weft_comm_t comm, int rank, int nranks, void *arg)
{
	return harness_fail("init should have failed");
}

START_TEST(bad_setting)
{
	const char *const env[] = {"WEFT_PROGRESS_THREAD=2", "WEFT_TIMEOUT=10", NULL};
	struct harness_job job = {
	    .nranks = 2,
	    .env = env,
	    .body = body_none,
	    .timeout_s = JOB_TIMEOUT_S,
	    .init_failed = expect_setting_error,
	};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.rank[0].end == HARNESS_EXITED && res.rank[0].code == 0, "%s",
		      res.summary);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("progress_thread");
	TCase *tc = tcase_create("thread");
	tcase_set_timeout(tc, 4 * JOB_TIMEOUT_S);
	tcase_add_test(tc, overlap_shm);
	tcase_add_test(tc, overlap_socket);
	tcase_add_test(tc, late_callback);
	tcase_add_test(tc, abort_from_another_thread);
	tcase_add_test(tc, bad_setting);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
