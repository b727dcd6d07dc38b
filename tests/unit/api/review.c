/*
 * review.c — the defects a review of the source found (the security
 * issue's section 3), one case each; each failed on the code before it:
 *  - a communicator killed by a non-fatal status (no memory, an invalid
 *    argument inside a task) failed the call, then let the next one wait
 *    forever while weft_comm_get_async_error said success;
 *  - two unique ids made in one process: init with the first waited for
 *    the second's root to give up;
 *  - zero-count blocks: a send of 0 against a receive of 5 (alltoallv, and
 *    send/recv) waited out the timeout, or let the receive take the next
 *    send, where weft.h promises a failure naming both sizes;
 *  - ReduceScatter's ring ran its slots past a scratch too small for them;
 *  - a completion callback that called Weft could deadlock (lock order);
 *  - the error record was written without a lock from the caller's thread
 *    while the progress thread wrote it (a TSan case: tsan-quick).
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithms/algo.h"
#include "core/comm.h"
#include "core/progress.h"
#include "core/task.h"
#include "harness.h"

#define JOB_S 30

static const char *const shm_env[] = {"WEFT_TRANSPORTS=shm", "WEFT_TIMEOUT=60", NULL};
static const char *const sock_env[] = {"WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo",
				       "WEFT_TIMEOUT=60", NULL};

static void run_ok(int nranks, const char *const *env, harness_body_fn body, void *arg)
{
	struct harness_result res;
	harness_run(nranks, env, body, arg, JOB_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}

/* ---- a killed communicator is failed, not silent ---- */

static int body_kill_nonfatal(weft_comm_t comm, int rank, int nranks, void *arg)
{
	float x = 1;
	if (rank == 0) {
		weft_comm_lock(comm);
		weft_comm_kill(comm, WEFT_ERR_NO_MEMORY); /* as a task that ran out would */
		weft_comm_unlock(comm);
	}
	double t0 = harness_now();
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st == WEFT_SUCCESS)
		return harness_fail("an allreduce after the kill succeeded");
	if (harness_now() - t0 > 5)
		return harness_fail("the allreduce after the kill took %.1f s to fail",
				    harness_now() - t0);
	weft_status_t async = WEFT_SUCCESS;
	weft_comm_get_async_error(comm, &async);
	if (rank == 0 && async != WEFT_ERR_NO_MEMORY)
		return harness_fail("async error after the kill: %s", weft_status_string(async));
	if (rank == 0 &&
	    weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm) == WEFT_SUCCESS)
		return harness_fail("a second allreduce after the kill succeeded");
	return 0;
}

START_TEST(killed_is_failed)
{
	run_ok(2, shm_env, body_kill_nonfatal, NULL);
}
END_TEST

/* ---- two ids, then init with the first ---- */

START_TEST(two_ids_do_not_wait_on_each_other)
{
	setenv("WEFT_BOOTSTRAP_TIMEOUT", "20", 1);
	setenv("WEFT_SOCKET_IFNAME", "lo", 1);
	weft_unique_id_t a, b;
	ck_assert_int_eq(weft_get_unique_id(&a), WEFT_SUCCESS);
	ck_assert_int_eq(weft_get_unique_id(&b), WEFT_SUCCESS);
	weft_comm_t ca = NULL, cb = NULL;
	double t0 = harness_now();
	ck_assert_int_eq(weft_comm_init_rank(&ca, 1, a, 0, NULL), WEFT_SUCCESS);
	double took = harness_now() - t0;
	ck_assert_msg(took < 5, "init with the first id took %.1f s (waited for the second root)",
		      took);
	ck_assert_int_eq(weft_comm_init_rank(&cb, 1, b, 0, NULL), WEFT_SUCCESS);
	weft_comm_destroy(ca);
	weft_comm_destroy(cb);
	unsetenv("WEFT_BOOTSTRAP_TIMEOUT");
	unsetenv("WEFT_SOCKET_IFNAME");
}
END_TEST

/* ---- zero-count blocks against non-empty ones ---- */

static int expect_sizes_named(weft_comm_t comm, weft_status_t st, double t0, const char *what,
			      const char *size_a, const char *size_b)
{
	if (st == WEFT_SUCCESS)
		return harness_fail("%s succeeded", what);
	if (harness_now() - t0 > 10)
		return harness_fail("%s took %.1f s to fail", what, harness_now() - t0);
	const char *msg = weft_comm_last_error(comm);
	if (size_a && (!strstr(msg, size_a) || !strstr(msg, size_b)))
		return harness_fail("%s: \"%s\" does not name %s and %s", what, msg, size_a,
				    size_b);
	return 0;
}

/* Rank 0 sends rank 1 @p send elements, rank 1 expects @p recv: whoever
 * receives names both sizes; the other fails too (its peer closes). */
static int alltoallv_mismatch(weft_comm_t comm, int rank, size_t send, size_t recv)
{
	int32_t sbuf[8] = {0}, rbuf[8] = {0};
	size_t sc[2] = {0, 0}, rc[2] = {0, 0}, disp[2] = {0, 0};
	if (rank == 0)
		sc[1] = send;
	else
		rc[0] = recv;
	char a[32], b[32];
	snprintf(a, sizeof(a), "%zu bytes", send * sizeof(int32_t));
	snprintf(b, sizeof(b), "%zu bytes", recv * sizeof(int32_t));
	double t0 = harness_now();
	weft_status_t st = weft_alltoallv(sbuf, sc, disp, rbuf, rc, disp, WEFT_INT32, comm);
	if (rank == 1)
		return expect_sizes_named(comm, st, t0, "alltoallv with blocks 0 against 5", a, b);
	/* The sender's part may have gone through: its next call hears of it. */
	if (st == WEFT_SUCCESS)
		st = weft_barrier(comm);
	return expect_sizes_named(comm, st, t0, "the sender's next call", NULL, NULL);
}

static int body_alltoallv_zero(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const size_t *sizes = arg;
	return alltoallv_mismatch(comm, rank, sizes[0], sizes[1]);
}

START_TEST(alltoallv_zero_against_five)
{
	static const size_t cases[2][2] = {{0, 5}, {5, 0}};
	run_ok(2, shm_env, body_alltoallv_zero, (void *)cases[_i]);
}
END_TEST

static int body_send_zero(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int32_t buf[5] = {1, 2, 3, 4, 5};
	double t0 = harness_now();
	if (rank == 0) {
		weft_status_t st = weft_send(NULL, 0, WEFT_INT32, 1, comm);
		/* the next send is the one a receive of 5 must not take */
		if (st == WEFT_SUCCESS)
			weft_send(buf, 5, WEFT_INT32, 1, comm);
		return 0;
	}
	weft_status_t st = weft_recv(buf, 5, WEFT_INT32, 0, comm);
	return expect_sizes_named(comm, st, t0, "a receive of 5 meeting a send of 0", "0 bytes",
				  "20 bytes");
}

START_TEST(send_zero_against_receive_five)
{
	run_ok(2, sock_env, body_send_zero, NULL);
}
END_TEST

/* ---- ReduceScatter's scratch ---- */

START_TEST(reduce_scatter_scratch_bound)
{
	/* Every communicator's scratch holds a slot per rank past two. */
	ck_assert_uint_ge(weft_comm_scratch_bytes(3000, 4096), (size_t)2998 * 8);
	/* One too small rules the ring out instead of running past it. */
	struct weft_comm comm;
	memset(&comm, 0, sizeof(comm));
	pthread_mutex_init(&comm.err_lock, NULL);
	comm.nranks = 3000;
	comm.scratch_bytes = 16384;
	comm.scratch = malloc(comm.scratch_bytes);
	double buf[8], in[8];
	struct weft_coll_args args = {.coll = WEFT_COLL_REDUCE_SCATTER,
				      .sendbuf = buf,
				      .recvbuf = buf,
				      .count = 4,
				      .dtype = WEFT_FLOAT64,
				      .op = WEFT_SUM,
				      .esize = 8};
	ck_assert(!weft_reduce_scatter_ring.supports(&comm, &args));
	struct weft_task *task = calloc(1, sizeof(*task));
	task->comm = &comm;
	task->args = args;
	task->args.sendbuf = in; /* out of place: the scratch path */
	ck_assert_int_eq(weft_reduce_scatter_ring.task.post(task), WEFT_ERR_INTERNAL);
	ck_assert_msg(strstr(comm.err.msg, "scratch"), "%s", comm.err.msg);
	free(task);
	free(comm.scratch);
	pthread_mutex_destroy(&comm.err_lock);
}
END_TEST

/* ---- completion callbacks may not call Weft ---- */

struct cb_state {
	weft_comm_t other;
	weft_status_t got;
	char msg[256];
};

static void cb_calls_weft(void *arg, weft_status_t status)
{
	struct cb_state *s = arg;
	s->got = weft_barrier(s->other); /* would take another communicator's lock */
	snprintf(s->msg, sizeof(s->msg), "%s", weft_init_last_error());
}

static int body_callback(weft_comm_t comm, int rank, int nranks, void *arg)
{
	weft_comm_t other = NULL;
	weft_status_t st = weft_comm_split(comm, 0, rank, &other);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "split");
	struct cb_state s = {.other = other, .got = WEFT_SUCCESS};
	float x = 1;
	weft_request_t req = NULL;
	if (rank == 1)
		usleep(300000); /* rank 0's allreduce is pending when its callback is set */
	st = weft_iallreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm, &req);
	if (st == WEFT_SUCCESS && rank == 0)
		st = weft_request_on_complete(req, cb_calls_weft, &s);
	if (st == WEFT_SUCCESS)
		st = weft_wait(&req);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "iallreduce");
	weft_comm_destroy(other);
	/* The callback ran in the progress thread under the lock: refused. */
	if (rank == 0 && (s.got != WEFT_ERR_INVALID_ARG || !strstr(s.msg, "completion callback")))
		return harness_fail("the callback's weft_barrier gave %s: %s",
				    weft_status_string(s.got), s.msg);
	return 0;
}

START_TEST(callback_may_not_call_weft)
{
	static const char *const env[] = {"WEFT_TRANSPORTS=shm", "WEFT_PROGRESS_THREAD=1",
					  "WEFT_TIMEOUT=30", NULL};
	run_ok(2, env, body_callback, NULL);
}
END_TEST

/* ---- the error record from two threads (TSan) ---- */

static int body_err_race(weft_comm_t comm, int rank, int nranks, void *arg)
{
	if (rank == 0) {
		usleep(200000);
		_exit(0); /* dies without a word: rank 1's progress thread notes it */
	}
	float x = 1;
	weft_request_t req = NULL;
	weft_status_t st =
	    weft_iallreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm, &req);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "iallreduce");
	double t0 = harness_now();
	size_t seen = 0;
	while (harness_now() - t0 < 1.0) { /* argument errors: written from this thread */
		weft_allreduce(WEFT_IN_PLACE, NULL, 1, WEFT_FLOAT32, WEFT_SUM, comm);
		seen += strlen(weft_comm_last_error(comm));
	}
	st = weft_wait(&req);
	return st != WEFT_SUCCESS && seen ? 0 : harness_fail("the dead peer went unnoticed");
}

START_TEST(error_record_two_threads)
{
	static const char *const env[] = {"WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo",
					  "WEFT_PROGRESS_THREAD=1", "WEFT_TIMEOUT=20", NULL};
	struct harness_result res;
	harness_run(2, env, body_err_race, NULL, JOB_S, &res);
	ck_assert_msg(res.rank[1].end == HARNESS_EXITED && res.rank[1].code == 0, "%s",
		      res.summary);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("review");
	TCase *tc = tcase_create("defects");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, killed_is_failed);
	tcase_add_test(tc, two_ids_do_not_wait_on_each_other);
	tcase_add_loop_test(tc, alltoallv_zero_against_five, 0, 2);
	tcase_add_test(tc, send_zero_against_receive_five);
	tcase_add_test(tc, reduce_scatter_scratch_bound);
	tcase_add_test(tc, callback_may_not_call_weft);
	tcase_add_test(tc, error_record_two_threads);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
