/*
 * shrink.c — losing ranks and going on (weft_comm_shrink, health/agree.h):
 * a job loses a rank (kill -9) during a collective, during a barrier or
 * between calls; every survivor must see its call fail, shrink, and run an
 * exact AllReduce on the new communicator, which holds the survivors
 * renumbered in order; weft_comm_failed_ranks on the old one must name
 * every victim as killed. Each rank in turn is the victim, rank 0 (whose
 * process hosted the bootstrap root) included, over shared memory, over
 * sockets and mixed (two fake hosts: shm inside, sockets between; a
 * majority quorum). Also: two ranks lost at once; losses repeated
 * 8 -> 7 -> 6 -> 5; a rank stopped (SIGSTOP) past the timeout, which is
 * left out as stopped and, woken, finds itself left out; and a rank lost
 * during the shrink itself (the proposer, and another), after which every
 * survivor ends in the same communicator (its members allgathered and
 * compared). The time from the kill to the first AllReduce that succeeds
 * on the new communicator is asserted below a loose bound only: the
 * figure is perf/bench_shrink.sh's.
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

#define MAXR	  8
#define BIG	  (1u << 20) /* floats: 4 MiB, a collective long enough to die in */
#define BOUND_S	  8.0	     /* kill to a good AllReduce on the new communicator */
#define MSG_BYTES 240

enum phase { IN_COLL, IN_BARRIER, BETWEEN, PHASES };
static const char *const phase_names[PHASES] = {"during an allreduce", "during a barrier",
						"between calls"};

struct plan {
	int nranks;
	int victims[2], nvictims;
	enum phase phase;
	int hosts; /* > 1: fake hosts (WEFT_HOSTID), rank * hosts / nranks */
	const char *const *env;
};

struct shared {
	double kill_at;
	_Atomic int failed_calls;
	int status[MAXR], shrink_st[MAXR], new_rank[MAXR], new_size[MAXR];
	double recovered[MAXR];
	int named[MAXR]; /* victims failed_ranks named as killed */
	char msg[MAXR][MSG_BYTES];
};

_Static_assert(sizeof(struct shared) <= HARNESS_SHARED_BYTES, "fits the shared page");

static const char *const env_shm[] = {"WEFT_TIMEOUT=10", "WEFT_PEER_DEAD=1",
				      "WEFT_BOOTSTRAP_TIMEOUT=30", NULL};
static const char *const env_socket[] = {"WEFT_TIMEOUT=10",	      "WEFT_PEER_DEAD=1",
					 "WEFT_BOOTSTRAP_TIMEOUT=30", "WEFT_TRANSPORTS=socket",
					 "WEFT_SOCKET_IFNAME=lo",     NULL};
static const char *const env_mixed[] = {"WEFT_TIMEOUT=10", "WEFT_PEER_DEAD=1",
					"WEFT_BOOTSTRAP_TIMEOUT=30", "WEFT_SOCKET_IFNAME=lo", NULL};

static void nap(double seconds)
{
	struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static bool is_victim(const struct plan *p, int r)
{
	for (int i = 0; i < p->nvictims; i++)
		if (p->victims[i] == r)
			return true;
	return false;
}

static void die(void)
{
	struct shared *sh = harness_shared();
	sh->kill_at = harness_now();
	raise(SIGKILL);
}

static void *die_soon(void *arg)
{
	nap(*(const double *)arg);
	die();
	return NULL;
}

/* A thread of this rank that kills the process @p seconds from now. */
static void die_in(double seconds)
{
	static double delay;
	pthread_t t;
	delay = seconds;
	if (pthread_create(&t, NULL, die_soon, &delay) != 0)
		die();
	pthread_detach(t);
}

static int exact_sum(weft_comm_t comm, int value, int want, const char *what)
{
	float buf[64];
	for (int i = 0; i < 64; i++)
		buf[i] = (float)value;
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, buf, 64, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "%s", what);
	for (int i = 0; i < 64; i++)
		if (buf[i] != (float)want)
			return harness_fail("%s: element %d is %g, expected %d", what, i, buf[i],
					    want);
	return 0;
}

/* The call that must fail: the victim dies in it, or before it. */
static weft_status_t doomed(weft_comm_t comm, const struct plan *p, float *big)
{
	if (p->phase == BETWEEN)
		nap(0.1);
	for (int i = 0; i < 400; i++) {
		weft_status_t st =
		    p->phase == IN_COLL
			? weft_allreduce(WEFT_IN_PLACE, big, BIG, WEFT_FLOAT32, WEFT_SUM, comm)
		    : p->phase == IN_BARRIER
			? weft_barrier(comm)
			: weft_allreduce(WEFT_IN_PLACE, big, 16, WEFT_FLOAT32, WEFT_SUM, comm);
		if (st != WEFT_SUCCESS)
			return st;
	}
	return WEFT_SUCCESS;
}

static void victim(weft_comm_t comm, const struct plan *p, float *big)
{
	if (p->phase == IN_COLL) {
		die_in(0.003);
		for (;;)
			weft_allreduce(WEFT_IN_PLACE, big, BIG, WEFT_FLOAT32, WEFT_SUM, comm);
	}
	if (p->phase == IN_BARRIER)
		nap(0.03); /* the others wait in the barrier */
	die();
}

/* Each survivor's old rank + 1, summed: what the new communicator's
 * AllReduce must give. */
static int survivors_sum(const struct plan *p)
{
	int sum = 0;
	for (int r = 0; r < p->nranks; r++)
		sum += is_victim(p, r) ? 0 : r + 1;
	return sum;
}

static int survivor(weft_comm_t comm, int rank, const struct plan *p, float *big)
{
	struct shared *sh = harness_shared();
	harness_progress("the call the victim dies in");
	sh->status[rank] = doomed(comm, p, big);
	if (sh->status[rank] == WEFT_SUCCESS)
		return harness_fail("every call succeeded although rank %d died", p->victims[0]);
	snprintf(sh->msg[rank], MSG_BYTES, "%s", weft_comm_last_error(comm));
	harness_progress("shrink");
	weft_comm_t nc = NULL;
	sh->shrink_st[rank] = weft_comm_shrink(comm, NULL, 0, WEFT_SHRINK_DEFAULT, &nc);
	if (sh->shrink_st[rank] != WEFT_SUCCESS || !nc)
		return harness_fail_status(comm, sh->shrink_st[rank], "weft_comm_shrink");
	weft_comm_rank(nc, &sh->new_rank[rank]);
	weft_comm_size(nc, &sh->new_size[rank]);
	int rc = exact_sum(nc, rank + 1, survivors_sum(p), "allreduce on the new communicator");
	sh->recovered[rank] = harness_now() - sh->kill_at;
	weft_failed_rank_t f[MAXR];
	int n = 0;
	weft_comm_failed_ranks(comm, f, MAXR, &n);
	for (int i = 0; i < n && i < MAXR; i++)
		sh->named[rank] += is_victim(p, f[i].rank) && f[i].how == WEFT_RANK_KILLED;
	weft_comm_destroy(nc);
	return rc;
}

static int lose_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct plan *p = arg;
	float *big = calloc(BIG, sizeof(float));
	if (!big)
		return harness_fail("no memory");
	for (int i = 0; i < 3; i++)
		if (exact_sum(comm, 1, nranks, "warm-up allreduce"))
			return 1;
	int rc = 0;
	if (is_victim(p, rank))
		victim(comm, p, big);
	else
		rc = survivor(comm, rank, p, big);
	free(big);
	return rc;
}

static int fake_host(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	const struct plan *p = arg;
	(void)id;
	if (p->hosts < 2)
		return 0;
	char v[16];
	snprintf(v, sizeof(v), "shrink-h%d", rank * p->hosts / nranks);
	return setenv("WEFT_HOSTID", v, 1) != 0;
}

static void check_lost(const struct plan *p, const char *label)
{
	struct harness_job job = {.nranks = p->nranks,
				  .env = p->env,
				  .body = lose_body,
				  .arg = (void *)p,
				  .timeout_s = 90,
				  .before_init = fake_host};
	struct harness_result res;
	harness_run_job(&job, &res);
	struct shared sh;
	memcpy(&sh, res.shared, sizeof(sh));
	int below = 0;
	for (int r = 0; r < p->nranks; r++) {
		const struct harness_rank_result *k = &res.rank[r];
		if (is_victim(p, r)) {
			ck_assert_msg(k->end == HARNESS_SIGNALED && k->code == SIGKILL,
				      "%s: victim rank %d did not die of SIGKILL:\n%s", label, r,
				      res.summary);
			below++;
			continue;
		}
		ck_assert_msg(k->end == HARNESS_EXITED && k->code == 0, "%s: rank %d:\n%s", label,
			      r, res.summary);
		ck_assert_msg(sh.status[r] == WEFT_ERR_REMOTE || sh.status[r] == WEFT_ERR_REVOKED ||
				  sh.status[r] == WEFT_ERR_TIMEOUT,
			      "%s: rank %d's failed call returned %s: %s", label, r,
			      weft_status_string(sh.status[r]), sh.msg[r]);
		ck_assert_msg(sh.new_size[r] == p->nranks - p->nvictims &&
				  sh.new_rank[r] == r - below,
			      "%s: rank %d became rank %d of %d, expected %d of %d", label, r,
			      sh.new_rank[r], sh.new_size[r], r - below, p->nranks - p->nvictims);
		ck_assert_msg(sh.named[r] == p->nvictims,
			      "%s: rank %d's failed_ranks named %d of the %d victims as killed",
			      label, r, sh.named[r], p->nvictims);
		ck_assert_msg(sh.recovered[r] > 0 && sh.recovered[r] < BOUND_S,
			      "%s: rank %d went on %.2f s after the kill (bound %.0f s)", label, r,
			      sh.recovered[r], BOUND_S);
	}
	printf("%s: recovered in %.3f s (rank of the last survivor)\n", label,
	       sh.recovered[p->nranks - 1 == p->victims[0] ? 0 : p->nranks - 1]);
}

/* Each rank in turn, each phase, over shared memory: 12 jobs. */
START_TEST(lost_shm)
{
	struct plan p = {.nranks = 4, .nvictims = 1, .env = env_shm};
	p.victims[0] = _i % 4;
	p.phase = (enum phase)(_i / 4);
	char label[96];
	snprintf(label, sizeof(label), "shm, rank %d killed %s", p.victims[0],
		 phase_names[p.phase]);
	check_lost(&p, label);
}
END_TEST

START_TEST(lost_socket)
{
	struct plan p = {.nranks = 4, .nvictims = 1, .env = env_socket};
	p.victims[0] = _i % 4;
	p.phase = _i < 4 ? IN_COLL : BETWEEN;
	char label[96];
	snprintf(label, sizeof(label), "socket, rank %d killed %s", p.victims[0],
		 phase_names[p.phase]);
	check_lost(&p, label);
}
END_TEST

START_TEST(lost_mixed)
{
	struct plan p = {.nranks = 4, .nvictims = 1, .env = env_mixed, .hosts = 2};
	p.victims[0] = _i == 0 ? 0 : 3;
	p.phase = IN_COLL;
	char label[96];
	snprintf(label, sizeof(label), "two fake hosts, rank %d killed %s", p.victims[0],
		 phase_names[p.phase]);
	check_lost(&p, label);
}
END_TEST

START_TEST(two_at_once)
{
	struct plan p = {.nranks = 6, .nvictims = 2, .victims = {1, 4}, .env = env_shm};
	p.phase = _i ? BETWEEN : IN_COLL;
	check_lost(&p, _i ? "shm, ranks 1 and 4 killed between calls"
			  : "shm, ranks 1 and 4 killed during an allreduce");
}
END_TEST

static Suite *shrink_suite(void)
{
	Suite *s = suite_create("shrink");
	TCase *tc = tcase_create("lost");
	tcase_set_timeout(tc, 200);
	tcase_add_loop_test(tc, lost_shm, 0, 4 * PHASES);
	tcase_add_loop_test(tc, lost_socket, 0, 5);
	tcase_add_loop_test(tc, lost_mixed, 0, 2);
	tcase_add_loop_test(tc, two_at_once, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(shrink_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
