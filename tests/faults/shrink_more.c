/*
 * shrink_more.c — the harder losses (weft_comm_shrink): ranks lost one
 * after another (8 -> 7 -> 6 -> 5, each loss shrinking the communicator
 * the last shrink made); a rank stopped (SIGSTOP) past the timeout, which
 * the others leave out as "stopped" and which, woken, learns it was left
 * out (WEFT_ERR_REVOKED from its own shrink); and a rank lost during the
 * shrink itself — the proposer (the lowest survivor, whose process hosts
 * the new root) and another, each at several moments from the start of
 * the agreement to the end of the build — after which every survivor must
 * end in one and the same communicator: its members (their ranks in the
 * first one) are allgathered and compared with the survivors, and an
 * AllReduce over it is exact.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define MAXR 8

struct shared {
	_Atomic int pid[MAXR];
	_Atomic int woken_done;
	_Atomic int survivors_done;
	int final_size[MAXR];
	int members[MAXR][MAXR]; /* each survivor's final communicator, in first ranks */
	int stop_shrink_st;
	char stop_msg[240];
	int stop_how[MAXR]; /* how failed_ranks named the stopped rank */
};

_Static_assert(sizeof(struct shared) <= HARNESS_SHARED_BYTES, "fits the shared page");

static const char *const env_shm[] = {"WEFT_TIMEOUT=10", "WEFT_PEER_DEAD=1",
				      "WEFT_BOOTSTRAP_TIMEOUT=30", NULL};
static const char *const env_stop[] = {"WEFT_TIMEOUT=2", "WEFT_PEER_DEAD=1",
				       "WEFT_BOOTSTRAP_TIMEOUT=30", NULL};

static void nap(double seconds)
{
	struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static weft_status_t sum_ranks(weft_comm_t comm, int value, float *out)
{
	float buf[32];
	for (int i = 0; i < 32; i++)
		buf[i] = (float)value;
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, buf, 32, WEFT_FLOAT32, WEFT_SUM, comm);
	*out = buf[0];
	return st;
}

/* Allreduce on @p cur until it works, shrinking it whenever it fails (at
 * most @p tries times); its members, in first ranks, into @p members. */
static int settle(weft_comm_t *cur, int first_rank, int tries, int *members, int *size)
{
	for (int t = 0;; t++) {
		float got;
		weft_status_t st = sum_ranks(*cur, 1, &got);
		int n = 0;
		weft_comm_size(*cur, &n);
		if (st == WEFT_SUCCESS && got == (float)n)
			break;
		if (st == WEFT_SUCCESS)
			return harness_fail("allreduce gave %g, expected %d", got, n);
		if (t == tries)
			return harness_fail_status(*cur, st, "allreduce after %d shrinks", t);
		weft_comm_t nc = NULL;
		st = weft_comm_shrink(*cur, NULL, 0, WEFT_SHRINK_DEFAULT, &nc);
		if (st != WEFT_SUCCESS || !nc)
			return harness_fail_status(*cur, st, "shrink %d", t + 1);
		*cur = nc; /* the older ones are destroyed at the end (they may be the harness's) */
	}
	int r = 0;
	weft_comm_rank(*cur, &r);
	weft_comm_size(*cur, size);
	int32_t all[MAXR] = {0};
	all[r] = first_rank;
	weft_status_t st = weft_allgather(WEFT_IN_PLACE, all, 1, WEFT_INT32, *cur);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(*cur, st, "allgather of the members");
	for (int i = 0; i < *size && i < MAXR; i++)
		members[i] = all[i];
	return 0;
}

/* ---- repeated losses: 8 -> 7 -> 6 -> 5 */

static const int repeated_victims[3] = {3, 0, 6}; /* first ranks, one per round */

static int repeated_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct shared *sh = harness_shared();
	weft_comm_t cur = comm, made[3] = {NULL, NULL, NULL};
	(void)arg;
	for (int round = 0; round < 3; round++) {
		float got;
		if (rank == repeated_victims[round]) {
			nap(0.01);
			raise(SIGKILL);
		}
		weft_status_t st = WEFT_SUCCESS;
		for (int i = 0; i < 200 && st == WEFT_SUCCESS; i++)
			st = sum_ranks(cur, 1, &got);
		if (st == WEFT_SUCCESS)
			return harness_fail("round %d: rank %d died and every call succeeded",
					    round, repeated_victims[round]);
		st = weft_comm_shrink(cur, NULL, 0, WEFT_SHRINK_DEFAULT, &made[round]);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(cur, st, "round %d: shrink", round);
		cur = made[round];
		int n = 0;
		weft_comm_size(cur, &n);
		if (n != nranks - round - 1)
			return harness_fail("round %d: %d ranks after the shrink, expected %d",
					    round, n, nranks - round - 1);
	}
	int rc = settle(&cur, rank, 0, sh->members[rank], &sh->final_size[rank]);
	for (int i = 2; i >= 0; i--)
		weft_comm_destroy(made[i]);
	return rc;
}

START_TEST(repeated_losses)
{
	struct harness_result res;
	harness_run(MAXR, env_shm, repeated_body, NULL, 120, &res);
	struct shared sh;
	memcpy(&sh, res.shared, sizeof(sh));
	for (int r = 0; r < MAXR; r++) {
		bool victim = r == 3 || r == 0 || r == 6;
		if (victim) {
			ck_assert_msg(res.rank[r].end == HARNESS_SIGNALED, "victim %d:\n%s", r,
				      res.summary);
			continue;
		}
		ck_assert_msg(res.rank[r].end == HARNESS_EXITED && res.rank[r].code == 0,
			      "rank %d:\n%s", r, res.summary);
		ck_assert_int_eq(sh.final_size[r], 5);
		const int want[5] = {1, 2, 4, 5, 7};
		for (int i = 0; i < 5; i++)
			ck_assert_msg(
			    sh.members[r][i] == want[i],
			    "rank %d: member %d of the last communicator is first rank %d, "
			    "expected %d",
			    r, i, sh.members[r][i], want[i]);
	}
}
END_TEST

/* ---- a rank stopped past the timeout */

static int stop_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct shared *sh = harness_shared();
	float got;
	(void)arg;
	atomic_store(&sh->pid[rank], (int)getpid());
	if (sum_ranks(comm, 1, &got) != WEFT_SUCCESS)
		return harness_fail("warm-up");
	if (rank == 1) {
		raise(SIGSTOP); /* rank 0 wakes it once the others went on */
		/* The allreduce it was about to start may still complete from
		 * what its peers left in shared memory before they gave up
		 * (docs/reliability.md); the ones after it may not. */
		weft_status_t st = WEFT_SUCCESS;
		for (int i = 0; i < 3 && st == WEFT_SUCCESS; i++)
			st = sum_ranks(comm, 1, &got);
		weft_comm_t nc = NULL;
		if (st != WEFT_ERR_REVOKED)
			return harness_fail_status(comm, st,
						   "woken: allreduces on the old "
						   "communicator, expected revoked");
		sh->stop_shrink_st = weft_comm_shrink(comm, NULL, 0, WEFT_SHRINK_DEFAULT, &nc);
		snprintf(sh->stop_msg, sizeof(sh->stop_msg), "%s", weft_comm_last_error(comm));
		atomic_store(&sh->woken_done, 1);
		if (nc)
			weft_comm_destroy(nc);
		return 0;
	}
	weft_status_t st = sum_ranks(comm, 1, &got);
	if (st != WEFT_ERR_TIMEOUT && st != WEFT_ERR_REVOKED)
		return harness_fail_status(comm, st, "the allreduce rank 1 stopped in");
	weft_comm_t nc = NULL;
	st = weft_comm_shrink(comm, NULL, 0, WEFT_SHRINK_DEFAULT, &nc);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "shrink");
	int rc = settle(&nc, rank, 0, sh->members[rank], &sh->final_size[rank]);
	weft_failed_rank_t f[MAXR];
	int n = 0;
	weft_comm_failed_ranks(comm, f, MAXR, &n);
	for (int i = 0; i < n; i++)
		if (f[i].rank == 1)
			sh->stop_how[rank] = f[i].how;
	/* Wake rank 1 and keep the old communicator until it has tried. */
	if (atomic_fetch_add(&sh->survivors_done, 1) + 1 == nranks - 1)
		kill((pid_t)atomic_load(&sh->pid[1]), SIGCONT);
	for (int i = 0; i < 2000 && !atomic_load(&sh->woken_done); i++)
		nap(0.01);
	weft_comm_destroy(nc);
	return rc;
}

START_TEST(stopped_past_the_timeout)
{
	struct harness_result res;
	harness_run(3, env_stop, stop_body, NULL, 90, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	struct shared sh;
	memcpy(&sh, res.shared, sizeof(sh));
	for (int r = 0; r < 3; r += 2) {
		ck_assert_int_eq(sh.final_size[r], 2);
		ck_assert_msg(sh.stop_how[r] == WEFT_RANK_STOPPED,
			      "rank %d: failed_ranks says rank 1 is %s, expected stopped", r,
			      weft_rank_failure_string((weft_rank_failure_t)sh.stop_how[r]));
	}
	ck_assert_msg(sh.stop_shrink_st == WEFT_ERR_REVOKED && strstr(sh.stop_msg, "left out"),
		      "the woken rank's shrink returned %s: %s",
		      weft_status_string(sh.stop_shrink_st), sh.stop_msg);
}
END_TEST

/* ---- a rank lost during the shrink */

struct during {
	int lost;	/* dies in an allreduce first */
	int in_shrink;	/* then this one dies during the shrink */
	double after_s; /* this long after it entered weft_comm_shrink */
};

static void *die_later(void *arg)
{
	nap(*(const double *)arg);
	raise(SIGKILL);
	return NULL;
}

static int during_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct during *d = arg;
	struct shared *sh = harness_shared();
	float got;
	if (sum_ranks(comm, 1, &got) != WEFT_SUCCESS)
		return harness_fail("warm-up");
	if (rank == d->lost) {
		nap(0.005);
		raise(SIGKILL);
	}
	weft_status_t st = WEFT_SUCCESS;
	for (int i = 0; i < 400 && st == WEFT_SUCCESS; i++)
		st = sum_ranks(comm, 1, &got);
	if (st == WEFT_SUCCESS)
		return harness_fail("rank %d died and every call succeeded", d->lost);
	if (rank == d->in_shrink) {
		static double delay;
		pthread_t t;
		delay = d->after_s;
		if (pthread_create(&t, NULL, die_later, &delay) != 0)
			raise(SIGKILL);
	}
	weft_comm_t nc = NULL;
	st = weft_comm_shrink(comm, NULL, 0, WEFT_SHRINK_DEFAULT, &nc);
	if (rank == d->in_shrink)
		for (;;)
			nap(1); /* its thread ends it */
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "shrink");
	weft_comm_t cur = nc;
	int rc = settle(&cur, rank, 2, sh->members[rank], &sh->final_size[rank]);
	(void)nranks;
	return rc;
}

static const struct during during_cases[] = {
    {4, 0, 0.0}, {4, 0, 0.002}, {4, 0, 0.01}, {4, 0, 0.05}, {4, 2, 0.001}, {4, 2, 0.02},
};

START_TEST(lost_during_shrink)
{
	const struct during *d = &during_cases[_i];
	struct harness_result res;
	harness_run(5, env_shm, during_body, (void *)d, 90, &res);
	struct shared sh;
	memcpy(&sh, res.shared, sizeof(sh));
	int want[3], nwant = 0;
	for (int r = 0; r < 5; r++)
		if (r != d->lost && r != d->in_shrink)
			want[nwant++] = r;
	for (int r = 0; r < 5; r++) {
		if (r == d->lost || r == d->in_shrink) {
			ck_assert_msg(res.rank[r].end == HARNESS_SIGNALED,
				      "case %d, victim %d:\n%s", _i, r, res.summary);
			continue;
		}
		ck_assert_msg(res.rank[r].end == HARNESS_EXITED && res.rank[r].code == 0,
			      "case %d (rank %d dies %.3f s into the shrink), rank %d:\n%s", _i,
			      d->in_shrink, d->after_s, r, res.summary);
		ck_assert_int_eq(sh.final_size[r], 3);
		for (int i = 0; i < 3; i++)
			ck_assert_msg(sh.members[r][i] == want[i],
				      "case %d: rank %d ended with first rank %d as member %d, "
				      "expected %d",
				      _i, r, sh.members[r][i], i, want[i]);
	}
}
END_TEST

static Suite *shrink_more_suite(void)
{
	Suite *s = suite_create("shrink_more");
	TCase *tc = tcase_create("more");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, repeated_losses);
	tcase_add_test(tc, stopped_past_the_timeout);
	tcase_add_loop_test(tc, lost_during_shrink, 0,
			    (int)(sizeof(during_cases) / sizeof(during_cases[0])));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(shrink_more_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
