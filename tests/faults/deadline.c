/*
 * deadline.c — an operation bounded by a timeout of its own
 * (weft_request_set_timeout) and the ranks its verdict names
 * (weft_comm_stragglers): torch's monitored barrier on Weft. 3 ranks,
 * WEFT_TIMEOUT=30, so only the request's 1 s timeout can end a wait:
 *
 *  - rank 1 skips a barrier and stays alive outside Weft: ranks 0 and 2
 *    fail with WEFT_ERR_TIMEOUT within 1 s + the verdict's window, the
 *    message says "not finished within its timeout of 1.0 s", and both
 *    list exactly rank 1 as the straggler;
 *  - ranks 1 and 2 skip it: rank 0 lists both;
 *  - queued: rank 2 skips an allreduce, then ranks 0 and 1 start a barrier
 *    behind it (still stuck in the allreduce): the barrier's timeout fires
 *    all the same and names rank 2, the one that never reached it;
 *  - every rank reaches it: success, and no verdict (count -1);
 *  - bad input: 0, a negative and NaN seconds, a NULL count; a NULL
 *    request (nothing to bound) is fine.
 * Over shm and over socket (WEFT_TRANSPORTS=socket on lo).
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define NRANKS	  3
#define DEADLINE  1.0
#define MSG_BYTES 600

enum scene { ONE_SKIPS, TWO_SKIP, QUEUED, ALL_REACH };

struct deadline_case {
	const char *name;
	enum scene scene;
	const char *const *env;
};

struct deadline_shared {
	_Atomic int done;
	double seconds[NRANKS];
	int status[NRANKS];
	int count[NRANKS];
	int stragglers[NRANKS][NRANKS];
	char msg[NRANKS][MSG_BYTES];
};

_Static_assert(sizeof(struct deadline_shared) <= HARNESS_SHARED_BYTES, "fits the shared page");

static const char *const env_shm[] = {"WEFT_TIMEOUT=30", NULL};
static const char *const env_socket[] = {"WEFT_TIMEOUT=30", "WEFT_TRANSPORTS=socket",
					 "WEFT_SOCKET_IFNAME=lo", NULL};

static const struct deadline_case cases[] = {
    {"rank 1 skips, shm", ONE_SKIPS, env_shm},
    {"rank 1 skips, socket", ONE_SKIPS, env_socket},
    {"ranks 1 and 2 skip, shm", TWO_SKIP, env_shm},
    {"queued behind a stuck allreduce, shm", QUEUED, env_shm},
    {"queued behind a stuck allreduce, socket", QUEUED, env_socket},
    {"every rank reaches it, shm", ALL_REACH, env_shm},
};
#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

/* Does @p rank take part in the bounded barrier of @p scene? */
static bool reaches(enum scene scene, int rank)
{
	switch (scene) {
	case ONE_SKIPS: return rank != 1;
	case TWO_SKIP: return rank == 0;
	case QUEUED: return rank != 2;
	case ALL_REACH: return true;
	}
	return true;
}

static void nap(double seconds)
{
	struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Alive outside Weft until the others have their verdict (bounded). */
static void stay_outside(struct deadline_shared *sh, int waiting_for)
{
	for (int i = 0; i < 3000 && atomic_load(&sh->done) < waiting_for; i++)
		nap(0.01);
}

static int bounded_barrier(weft_comm_t comm, int rank, const struct deadline_case *c,
			   struct deadline_shared *sh)
{
	weft_request_t stuck = NULL, req = NULL;
	float buf[16] = {0};
	if (c->scene == QUEUED) { /* rank 2 never joins it */
		weft_status_t st =
		    weft_iallreduce(WEFT_IN_PLACE, buf, 16, WEFT_FLOAT32, WEFT_SUM, comm, &stuck);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "the allreduce rank 2 skips");
	}
	double t0 = harness_now();
	weft_status_t st = weft_ibarrier(comm, &req);
	if (st == WEFT_SUCCESS)
		st = weft_request_set_timeout(req, DEADLINE);
	if (st == WEFT_SUCCESS)
		st = weft_wait(&req);
	sh->seconds[rank] = harness_now() - t0;
	sh->status[rank] = st;
	snprintf(sh->msg[rank], MSG_BYTES, "%s", weft_comm_last_error(comm));
	weft_status_t q =
	    weft_comm_stragglers(comm, sh->stragglers[rank], NRANKS, &sh->count[rank]);
	if (q != WEFT_SUCCESS)
		return harness_fail_status(comm, q, "weft_comm_stragglers");
	if (stuck)
		weft_wait(&stuck); /* failed with the communicator */
	return 0;
}

static int deadline_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct deadline_case *c = arg;
	struct deadline_shared *sh = harness_shared();
	int reached = 0;
	for (int r = 0; r < nranks; r++)
		reached += reaches(c->scene, r);
	if (!reaches(c->scene, rank)) {
		stay_outside(sh, reached);
		return 0;
	}
	int rc = bounded_barrier(comm, rank, c, sh);
	atomic_fetch_add(&sh->done, 1);
	if (c->scene == ALL_REACH && !rc) { /* a healthy communicator goes on */
		weft_status_t st = weft_barrier(comm);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "a barrier after");
	}
	return rc;
}

static void check_rank(const struct deadline_case *c, const struct deadline_shared *sh, int r)
{
	printf("%s: rank %d after %.2f s: %s\n", c->name, r, sh->seconds[r], sh->msg[r]);
	if (c->scene == ALL_REACH) {
		ck_assert_msg(sh->status[r] == WEFT_SUCCESS, "%s: rank %d: %d %s", c->name, r,
			      sh->status[r], sh->msg[r]);
		ck_assert_msg(sh->count[r] == -1, "%s: rank %d: a verdict (%d) with no timeout",
			      c->name, r, sh->count[r]);
		return;
	}
	ck_assert_msg(sh->status[r] == WEFT_ERR_TIMEOUT, "%s: rank %d: status %d: %s", c->name, r,
		      sh->status[r], sh->msg[r]);
	/* Its own deadline, or a peer's that ran out a moment earlier (the
	 * watch tells every rank at once): both are the barrier timing out. */
	ck_assert_msg(strstr(sh->msg[r], "barrier seq") &&
			  (strstr(sh->msg[r], "not finished within its timeout of 1.0 s") ||
			   strstr(sh->msg[r], "(a peer timed out)")),
		      "%s: rank %d: %s", c->name, r, sh->msg[r]);
	/* 1 s, then the verdict's window (0.25 s when every peer answers at
	 * once; up to its 2 s cap on a loaded machine) */
	ck_assert_msg(sh->seconds[r] >= DEADLINE - 0.05 && sh->seconds[r] < DEADLINE + 4,
		      "%s: rank %d failed after %.2f s", c->name, r, sh->seconds[r]);
	int want[NRANKS], n = 0;
	for (int k = 0; k < NRANKS; k++)
		if (!reaches(c->scene, k))
			want[n++] = k;
	ck_assert_msg(sh->count[r] == n, "%s: rank %d lists %d stragglers, not %d", c->name, r,
		      sh->count[r], n);
	for (int k = 0; k < n; k++)
		ck_assert_msg(sh->stragglers[r][k] == want[k], "%s: rank %d names rank %d, not %d",
			      c->name, r, sh->stragglers[r][k], want[k]);
}

START_TEST(deadline)
{
	const struct deadline_case *c = &cases[_i];
	struct harness_job job = {.nranks = NRANKS,
				  .env = c->env,
				  .body = deadline_body,
				  .arg = (void *)c,
				  .timeout_s = 60};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s:\n%s", c->name, res.summary);
	struct deadline_shared sh;
	memcpy(&sh, res.shared, sizeof(sh));
	for (int r = 0; r < NRANKS; r++)
		if (reaches(c->scene, r))
			check_rank(c, &sh, r);
	harness_result_free(&res);
}
END_TEST

static int bad_input_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	weft_request_t req = NULL;
	weft_status_t st = weft_ibarrier(comm, &req);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "ibarrier");
	const double bad[] = {0.0, -1.0, NAN, 1e12};
	for (int i = 0; i < 4; i++)
		if (weft_request_set_timeout(req, bad[i]) != WEFT_ERR_INVALID_ARG)
			return harness_fail("weft_request_set_timeout took %g s", bad[i]);
	if (!strstr(weft_comm_last_error(comm), "is not a timeout"))
		return harness_fail("no clear error: %s", weft_comm_last_error(comm));
	if (weft_request_set_timeout(NULL, 1.0) != WEFT_SUCCESS)
		return harness_fail("a NULL request (nothing to bound) was refused");
	int ranks[NRANKS];
	if (weft_comm_stragglers(comm, ranks, NRANKS, NULL) != WEFT_ERR_INVALID_ARG ||
	    weft_comm_stragglers(comm, NULL, 1, &(int){0}) != WEFT_ERR_INVALID_ARG ||
	    weft_comm_stragglers(NULL, ranks, NRANKS, &(int){0}) != WEFT_ERR_INVALID_ARG)
		return harness_fail("weft_comm_stragglers took a NULL it cannot use");
	/* an invalid argument leaves the communicator and the request usable */
	st = weft_wait(&req);
	return st == WEFT_SUCCESS
		   ? 0
		   : harness_fail_status(comm, st, "the barrier after the bad calls");
}

START_TEST(bad_input)
{
	struct harness_job job = {
	    .nranks = 2, .env = env_shm, .body = bad_input_body, .timeout_s = 60};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	harness_result_free(&res);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("deadline");
	TCase *tc = tcase_create("deadline");
	tcase_set_timeout(tc, 90);
	tcase_add_loop_test(tc, deadline, 0, NCASES);
	tcase_add_test(tc, bad_input);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
