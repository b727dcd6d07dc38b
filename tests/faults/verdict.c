/*
 * verdict.c — the job-wide verdict at a timeout (core/watch.h): with
 * 3 ranks and WEFT_TIMEOUT=2, one rank stopped (SIGSTOP) before an
 * allreduce, or one that skips it and stays alive outside Weft, every
 * survivor must fail with WEFT_ERR_TIMEOUT within 2 x WEFT_TIMEOUT, and its
 * last error must name the straggler as the one that never reached that
 * allreduce and the others as the ones that waited: the same verdict on
 * every survivor, whichever rank they were waiting for (the rank 0
 * blamed the healthy rank 2). Also with rank 0, the bootstrap root's
 * process, as the stopped one. What each survivor logged is captured
 * (harness.h, capture_stderr) and asserted on too: a WARN line of its own
 * rank with that verdict, and none that blames another rank.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define NRANKS	  3
#define TIMEOUT_S 2.0
#define WARMUP	  3 /* allreduces before the stuck one: it is seq 3 */
#define MSG_BYTES 600

enum culprit_mode { STOPPED, SKIPPED };

struct verdict_case {
	const char *name;
	int culprit;
	enum culprit_mode mode;
	const char *const *env;
};

struct verdict_shared {
	_Atomic int done;
	_Atomic int culprit_pid;
	double seconds[NRANKS];
	int status[NRANKS];
	char msg[NRANKS][MSG_BYTES];
};

_Static_assert(sizeof(struct verdict_shared) <= HARNESS_SHARED_BYTES, "fits the shared page");

static const char *const env_shm[] = {"WEFT_TIMEOUT=2", "WEFT_BOOTSTRAP_TIMEOUT=20", NULL};
static const char *const env_socket[] = {"WEFT_TIMEOUT=2", "WEFT_BOOTSTRAP_TIMEOUT=20",
					 "WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo", NULL};

static const struct verdict_case cases[] = {
    {"rank 1 stopped, shm", 1, STOPPED, env_shm},
    {"rank 1 stopped, socket", 1, STOPPED, env_socket},
    {"rank 0 (root) stopped, shm", 0, STOPPED, env_shm},
    {"rank 1 skipped the call, shm", 1, SKIPPED, env_shm},
    {"rank 2 skipped the call, socket", 2, SKIPPED, env_socket},
};
#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

static void nap(double seconds)
{
	struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int culprit(const struct verdict_case *c, struct verdict_shared *sh)
{
	if (c->mode == STOPPED) {
		atomic_store(&sh->culprit_pid, (int)getpid());
		raise(SIGSTOP); /* the last survivor to fail sends SIGCONT */
		return 0;
	}
	/* Alive, outside Weft, until both survivors have their verdict
	 * (bounded: the harness's deadline is far beyond). */
	for (int i = 0; i < 3000 && atomic_load(&sh->done) < NRANKS - 1; i++)
		nap(0.01);
	return 0;
}

static int verdict_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct verdict_case *c = arg;
	struct verdict_shared *sh = harness_shared();
	float buf[64] = {0};
	for (int i = 0; i < WARMUP; i++) {
		weft_status_t st =
		    weft_allreduce(WEFT_IN_PLACE, buf, 64, WEFT_FLOAT32, WEFT_SUM, comm);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "warm-up allreduce %d", i);
	}
	if (rank == c->culprit)
		return culprit(c, sh);
	harness_progress("the stuck allreduce");
	double t0 = harness_now();
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, buf, 64, WEFT_FLOAT32, WEFT_SUM, comm);
	sh->seconds[rank] = harness_now() - t0;
	sh->status[rank] = st;
	snprintf(sh->msg[rank], MSG_BYTES, "%s", weft_comm_last_error(comm));
	if (atomic_fetch_add(&sh->done, 1) + 1 == nranks - 1 && c->mode == STOPPED)
		kill((pid_t)atomic_load(&sh->culprit_pid), SIGCONT);
	return 0;
}

/* What survivor @p r logged: a WARN line of its own with the verdict, and
 * no line that blames another rank than the straggler. */
static void check_log(const struct harness_result *res, const struct verdict_case *c, int r,
		      const char *straggler, const char *waited)
{
	char own[32], line[1024];
	snprintf(own, sizeof(own), " rank %d: ", r);
	ck_assert_msg(harness_log_line(res, r, line, sizeof(line), " weft WARN ", own, straggler,
				       waited, NULL),
		      "%s: rank %d logged no WARN line with \"%s\" and \"%s\":\n%s", c->name, r,
		      straggler, waited, res->rank[r].log ? res->rank[r].log : "(nothing)");
	for (int other = 0; other < NRANKS; other++) {
		char blame[64];
		snprintf(blame, sizeof(blame), "verdict: rank %d never reached", other);
		ck_assert_msg(other == c->culprit ||
				  !harness_log_line(res, r, line, sizeof(line), blame, NULL),
			      "%s: rank %d blames rank %d, not rank %d: %s", c->name, r, other,
			      c->culprit, line);
	}
}

START_TEST(verdict)
{
	const struct verdict_case *c = &cases[_i];
	struct harness_job job = {
	    .nranks = NRANKS,
	    .env = c->env,
	    .body = verdict_body,
	    .arg = (void *)c,
	    .timeout_s = 60,
	    .capture_stderr = true,
	};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s:\n%s", c->name, res.summary);
	struct verdict_shared sh;
	memcpy(&sh, res.shared, sizeof(sh));
	char straggler[96], waited[96];
	snprintf(straggler, sizeof(straggler),
		 "verdict: rank %d never reached allreduce seq %d (%s", c->culprit, WARMUP,
		 c->mode == STOPPED ? "not answering" : "alive, outside Weft");
	int w[2], n = 0;
	for (int r = 0; r < NRANKS; r++)
		if (r != c->culprit)
			w[n++] = r;
	snprintf(waited, sizeof(waited), "; ranks %d,%d waited in allreduce seq %d", w[0], w[1],
		 WARMUP);
	for (int i = 0; i < 2; i++) {
		int r = w[i];
		printf("%s: rank %d after %.2f s: %s\n", c->name, r, sh.seconds[r], sh.msg[r]);
		ck_assert_msg(sh.status[r] == WEFT_ERR_TIMEOUT, "%s: rank %d: status %d: %s",
			      c->name, r, sh.status[r], sh.msg[r]);
		ck_assert_msg(strstr(sh.msg[r], straggler), "%s: rank %d: no \"%s\" in: %s",
			      c->name, r, straggler, sh.msg[r]);
		ck_assert_msg(strstr(sh.msg[r], waited), "%s: rank %d: no \"%s\" in: %s", c->name,
			      r, waited, sh.msg[r]);
		ck_assert_msg(sh.seconds[r] <= 2 * TIMEOUT_S, "%s: rank %d failed after %.2f s",
			      c->name, r, sh.seconds[r]);
		check_log(&res, c, r, straggler, waited);
	}
	harness_result_free(&res);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("verdict");
	TCase *tc = tcase_create("timeout");
	tcase_set_timeout(tc, 90);
	tcase_add_loop_test(tc, verdict, 0, NCASES);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
