/*
 * wait.c — WEFT_WAIT (core/wait.c): how a waiting rank waits.
 *
 *  - the decision: spin and block as asked; auto blocks when the host's
 *    ranks' compute threads (here OMP_NUM_THREADS) outnumber the CPUs of
 *    their affinity masks, computed here from this process's mask (the
 *    ranks inherit it), so the test holds on any machine; the rank's
 *    weft_comm_describe says what it decided;
 *  - a rank that blocks, waiting for a peer that comes 250 ms late, sleeps
 *    (the describe's count of sleeps grows), is woken by the peer's data
 *    in each call (not by a sleep's 100 ms running out: a lost wake-up),
 *    and gets the exact result: over shm (the FIFO bell, the small AllReduce's slots, the shm
 *    AllReduce's counters with weft_mem_alloc buffers), over sockets
 *    (epoll on the queued sockets), non-blocking with the progress thread
 *    (a post wakes the sleeping thread);
 *  - a rank blocked in an 8-byte AllReduce for a peer 250 ms late uses at
 *    most 2 % of a core (10 % in sanitizer builds; its process's CPU
 *    time, every thread: the watch, a progress thread) over the wait,
 *    over shm and sockets, with and without a progress thread: the
 *    median of 3 calls (WEFT_WAIT=spin
 *    uses most of a core here; build/idle_perf is the benchmark);
 *  - weft_comm_abort from another thread wakes a sleeping waiter
 *    (WEFT_WAIT_SPIN=0: it sleeps at once), which fails with
 *    WEFT_ERR_ABORTED in bounded time;
 *  - a peer's timeout ends a sleeping wait (the job's verdict: the watch
 *    tells the ranks waiting in the same call, and wakes them): of 3
 *    ranks, rank 2 skips an AllReduce, rank 1 (WEFT_TIMEOUT=1) times out,
 *    and rank 0, asleep with WEFT_TIMEOUT=60, fails with WEFT_ERR_TIMEOUT
 *    naming rank 2 within seconds, not at its own timeout;
 *  - bad WEFT_WAIT and WEFT_WAIT_SPIN values are init errors naming them.
 */
#define _GNU_SOURCE
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "harness.h"

#define JOB_TIMEOUT_S 60.0
/* How late the late peer is: not a multiple of a sleep's longest (100 ms,
 * core/wait.c), so that its data lands in the middle of the third sleep,
 * 50 ms from either end. At 300 ms it landed as that sleep ran out: one
 * call in CI (asan-quick) caught the data while spinning after a third
 * timed-out sleep, and a test that cannot tell a wake-up from a timeout
 * could not see a lost one either. */
#define LATE_US 250000

/* A number member of weft_comm_describe's "wait" object; -1: none. */
static long describe_number(weft_comm_t comm, const char *key, char *mode, size_t len)
{
	char *json = NULL;
	if (weft_comm_describe(comm, &json) != WEFT_SUCCESS)
		return -1;
	const char *w = strstr(json, "\"wait\":{");
	long v = -1;
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = w ? strstr(w, pat) : NULL;
	if (p)
		v = strtol(p + strlen(pat), NULL, 10);
	const char *m = w ? strstr(w, "\"waits\":\"") : NULL;
	if (mode && m)
		snprintf(mode, len, "%.5s", m + 9);
	weft_describe_free(json);
	return v;
}

/* ---- the decision ---- */

static int body_decided(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const char *want = arg;
	char mode[8] = "";
	describe_number(comm, "sleeps", mode, sizeof(mode));
	if (strncmp(mode, want, strlen(want)) != 0)
		return harness_fail("waits %s, expected %s", mode, want);
	return 0;
}

static void decided(const char *wait, const char *threads, const char *want)
{
	char w[64], t[64];
	snprintf(w, sizeof(w), "WEFT_WAIT=%s", wait);
	snprintf(t, sizeof(t), "OMP_NUM_THREADS=%s", threads);
	const char *const env[] = {w, t, "WEFT_SOCKET_IFNAME=lo", "WEFT_TIMEOUT=30", NULL};
	struct harness_result res;
	harness_run(2, env, body_decided, (void *)want, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "WEFT_WAIT=%s OMP_NUM_THREADS=%s: %s", wait, threads, res.summary);
}

START_TEST(decision)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	ck_assert(sched_getaffinity(0, sizeof(set), &set) == 0);
	int cpus = CPU_COUNT(&set);
	decided("spin", "1000", "spin");
	decided("block", "1", "block");
	decided("auto", "1000", "block");
	decided("auto", "1", 2 > cpus ? "block" : "spin");
	decided("AUTO", "4,2", 2 * 4 > cpus ? "block" : "spin"); /* OpenMP's nested list */
}
END_TEST

/* ---- sleeping while a peer is late ---- */

struct late {
	size_t count;
	bool mem_alloc, nonblocking;
};

static int late_call(weft_comm_t comm, float *buf, const struct late *l)
{
	if (!l->nonblocking)
		return weft_allreduce(WEFT_IN_PLACE, buf, l->count, WEFT_FLOAT32, WEFT_SUM, comm);
	weft_request_t req;
	weft_status_t st =
	    weft_iallreduce(WEFT_IN_PLACE, buf, l->count, WEFT_FLOAT32, WEFT_SUM, comm, &req);
	if (st != WEFT_SUCCESS)
		return st;
	usleep(LATE_US / 2); /* the progress thread drives it meanwhile, asleep mostly */
	return weft_wait(&req);
}

static int body_late(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct late *l = arg;
	size_t bytes = l->count * sizeof(float);
	float *buf = NULL, *want = malloc(bytes);
	weft_status_t st = l->mem_alloc
			       ? weft_mem_alloc(comm, bytes, (void **)&buf)
			       : ((buf = malloc(bytes)) ? WEFT_SUCCESS : WEFT_ERR_NO_MEMORY);
	if (st != WEFT_SUCCESS || !want)
		return harness_fail("no memory");
	long before = describe_number(comm, "sleeps", NULL, 0);
	long quiet_before = describe_number(comm, "timeouts", NULL, 0);
	for (int call = 0; call < 3; call++) {
		harness_ar_input(buf, l->count, WEFT_FLOAT32, WEFT_SUM, rank, nranks,
				 (unsigned)call);
		harness_ar_expected(want, l->count, WEFT_FLOAT32, WEFT_SUM, nranks, (unsigned)call);
		if (rank == nranks - 1)
			usleep(LATE_US);
		harness_progress("call %d", call);
		if ((st = late_call(comm, buf, l)) != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "allreduce %d", call);
		char why[256];
		if (harness_compare(buf, want, l->count, WEFT_FLOAT32, why, sizeof(why)) !=
		    SIZE_MAX)
			return harness_fail("call %d: %s", call, why);
	}
	long after = describe_number(comm, "sleeps", NULL, 0);
	long quiet = describe_number(comm, "timeouts", NULL, 0) - quiet_before;
	if (rank == 0 && after <= before)
		return harness_fail("rank 0 waited 3 x %d ms and never slept (sleeps %ld -> %ld)",
				    LATE_US / 1000, before, after);
	/* A sleep ends when something wakes it, or after at most 100 ms: a
	 * wake-up lost would leave every sleep to run out its time. */
	if (rank == 0 && after - before - quiet < 3)
		return harness_fail(
		    "of rank 0's %ld sleeps %ld ran out their time: the late peer's "
		    "data woke it fewer than 3 times in 3 calls",
		    after - before, quiet);
	if (l->mem_alloc)
		weft_mem_free(comm, buf);
	else
		free(buf);
	free(want);
	return 0;
}

static void late_job(int nranks, const char *transport, struct late *l, const char *extra)
{
	char tp[64];
	snprintf(tp, sizeof(tp), "WEFT_TRANSPORTS=%s", transport);
	const char *const env[] = {"WEFT_WAIT=block", tp,  extra, "WEFT_SOCKET_IFNAME=lo",
				   "WEFT_TIMEOUT=30", NULL};
	struct harness_result res;
	harness_run(nranks, env, body_late, l, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s, %zu floats, %s: %s", transport, l->count, extra, res.summary);
}

START_TEST(late_peer_shm)
{
	struct late small = {.count = 2}, big = {.count = 1u << 18, .mem_alloc = true};
	struct late fifo = {.count = 1u << 16};
	late_job(2, "shm", &small, "WEFT_PROGRESS_THREAD=0");  /* the latency path's slots */
	late_job(3, "shm", &big, "WEFT_PROGRESS_THREAD=0");    /* the shm AllReduce's counters */
	late_job(3, "shm", &fifo, "WEFT_ALGO=allreduce:ring"); /* the FIFOs */
}
END_TEST

START_TEST(late_peer_socket)
{
	struct late mid = {.count = 1u << 16}, nb = {.count = 1u << 12, .nonblocking = true};
	late_job(3, "socket", &mid, "WEFT_PROGRESS_THREAD=0");
	late_job(2, "socket", &nb, "WEFT_PROGRESS_THREAD=1");
	late_job(2, "shm", &nb, "WEFT_PROGRESS_THREAD=1");
}
END_TEST

/* ---- what a sleeper costs the cores ---- */

#define IDLE_CALLS 3
/* Under ThreadSanitizer or ASan each wake-up and each lock costs many times
 * what it does in the release build (the failed CI run of stop 33 saw
 * 2.3 % under TSan), so there the bound is 10 %: still far under a spinning
 * waiter's share (most of a core), which is what the case guards against. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define IDLE_MAX_PERCENT 10.0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define IDLE_MAX_PERCENT 10.0
#endif
#endif
#ifndef IDLE_MAX_PERCENT
#define IDLE_MAX_PERCENT 2.0
#endif

static double cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int body_idle(weft_comm_t comm, int rank, int nranks, void *arg)
{
	float x[2] = {1, 1};
	double share[IDLE_CALLS];
	for (int call = 0; call < IDLE_CALLS + 1; call++) { /* the first connects */
		if (call > 0 && rank == nranks - 1)
			usleep(LATE_US);
		double c0 = cpu_seconds(), t0 = harness_now();
		weft_status_t st =
		    weft_allreduce(WEFT_IN_PLACE, x, 2, WEFT_FLOAT32, WEFT_SUM, comm);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "allreduce %d", call);
		if (call > 0)
			share[call - 1] = (cpu_seconds() - c0) / (harness_now() - t0);
	}
	if (rank == nranks - 1)
		return 0;
	qsort(share, IDLE_CALLS, sizeof(double), cmp_double);
	if (share[IDLE_CALLS / 2] * 100 > IDLE_MAX_PERCENT)
		return harness_fail(
		    "rank %d, blocked %d ms for a late peer, used %.1f %% of a core "
		    "(median of %d calls; at most %.0f %%)",
		    rank, LATE_US / 1000, share[IDLE_CALLS / 2] * 100, IDLE_CALLS,
		    IDLE_MAX_PERCENT);
	return 0;
}

START_TEST(idle_cpu)
{
	static const char *const cases[][2] = {
	    {"WEFT_TRANSPORTS=shm", "WEFT_PROGRESS_THREAD=0"},
	    {"WEFT_TRANSPORTS=socket", "WEFT_PROGRESS_THREAD=0"},
	    {"WEFT_TRANSPORTS=shm", "WEFT_PROGRESS_THREAD=1"},
	};
	for (int i = 0; i < 3; i++) {
		const char *const env[] = {"WEFT_WAIT=block",	    cases[i][0],       cases[i][1],
					   "WEFT_SOCKET_IFNAME=lo", "WEFT_TIMEOUT=30", NULL};
		struct harness_result res;
		harness_run(2, env, body_idle, NULL, JOB_TIMEOUT_S, &res);
		ck_assert_msg(res.ok, "%s %s: %s", cases[i][0], cases[i][1], res.summary);
	}
}
END_TEST

/* ---- an abort wakes a sleeper ---- */

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
		sleep(3); /* never calls: rank 0 aborts meanwhile */
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
	if (took > 5)
		return harness_fail("the abort took %.1f s to wake the wait", took);
	return 0;
}

START_TEST(abort_wakes_sleeper)
{
	static const char *const tps[] = {"WEFT_TRANSPORTS=shm", "WEFT_TRANSPORTS=socket"};
	for (int i = 0; i < 2; i++) {
		const char *const env[] = {"WEFT_WAIT=block",	    "WEFT_WAIT_SPIN=0", tps[i],
					   "WEFT_SOCKET_IFNAME=lo", "WEFT_TIMEOUT=30",	NULL};
		struct harness_result res;
		harness_run(2, env, body_abort, NULL, JOB_TIMEOUT_S, &res);
		ck_assert_msg(res.ok, "%s: %s", tps[i], res.summary);
	}
}
END_TEST

/* ---- a peer's timeout ends a sleeping wait ---- */

static int told_before_init(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	return setenv("WEFT_TIMEOUT", rank == 1 ? "1" : "60", 1) != 0;
}

static int body_told(weft_comm_t comm, int rank, int nranks, void *arg)
{
	float x = 1;
	if (weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm) != WEFT_SUCCESS)
		return harness_fail("first allreduce");
	if (rank == 2) {
		sleep(4); /* never calls */
		return 0;
	}
	double t0 = harness_now();
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm);
	double took = harness_now() - t0;
	if (st != WEFT_ERR_TIMEOUT)
		return harness_fail_status(comm, st, "expected WEFT_ERR_TIMEOUT");
	const char *msg = weft_comm_last_error(comm);
	if (!strstr(msg, "rank 2 never reached"))
		return harness_fail("rank %d: the verdict does not name rank 2: %s", rank, msg);
	if (rank == 0 && took > 10)
		return harness_fail("rank 0 asleep learnt of rank 1's timeout after %.1f s: %s",
				    took, msg);
	return 0;
}

START_TEST(peer_timeout_wakes_sleeper)
{
	static const char *const tps[] = {"WEFT_TRANSPORTS=shm", "WEFT_TRANSPORTS=socket"};
	for (int i = 0; i < 2; i++) {
		const char *const env[] = {"WEFT_WAIT=block", "WEFT_WAIT_SPIN=0", tps[i],
					   "WEFT_SOCKET_IFNAME=lo", NULL};
		struct harness_job job = {
		    .nranks = 3,
		    .env = env,
		    .body = body_told,
		    .timeout_s = JOB_TIMEOUT_S,
		    .before_init = told_before_init,
		};
		struct harness_result res;
		harness_run_job(&job, &res);
		ck_assert_msg(res.ok, "%s: %s", tps[i], res.summary);
		harness_result_free(&res);
	}
}
END_TEST

/* ---- bad values ---- */

static int expect_setting_error(int rank, int nranks, weft_status_t st, const char *msg,
				double seconds, void *arg)
{
	if (rank != 0)
		return 0; /* the others fail because rank 0 left */
	if (st != WEFT_ERR_INVALID_ARG || !strstr(msg, (const char *)arg))
		return harness_fail("init: %s: %s", weft_status_string(st), msg);
	return 0;
}

static int body_none(weft_comm_t comm, int rank, int nranks, void *arg)
{
	return harness_fail("init should have failed");
}

START_TEST(bad_settings)
{
	static const char *const bad[] = {"WEFT_WAIT=nap", "WEFT_WAIT_SPIN=-5"};
	for (int i = 0; i < 2; i++) {
		const char *const env[] = {bad[i], "WEFT_TIMEOUT=10", NULL};
		struct harness_job job = {
		    .nranks = 2,
		    .env = env,
		    .body = body_none,
		    .arg = (void *)bad[i],
		    .timeout_s = JOB_TIMEOUT_S,
		    .init_failed = expect_setting_error,
		};
		struct harness_result res;
		harness_run_job(&job, &res);
		ck_assert_msg(res.rank[0].end == HARNESS_EXITED && res.rank[0].code == 0, "%s: %s",
			      bad[i], res.summary);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("wait");
	TCase *tc = tcase_create("wait");
	tcase_set_timeout(tc, 6 * JOB_TIMEOUT_S);
	tcase_add_test(tc, decision);
	tcase_add_test(tc, late_peer_shm);
	tcase_add_test(tc, late_peer_socket);
	tcase_add_test(tc, idle_cpu);
	tcase_add_test(tc, abort_wakes_sleeper);
	tcase_add_test(tc, peer_timeout_wakes_sleeper);
	tcase_add_test(tc, bad_settings);
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
