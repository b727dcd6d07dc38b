/*
 * revoke.c — weft_comm_revoke, and the shrink's rules and bad uses:
 *
 *  - a revoke wakes ranks that wait for this one in a collective
 *    (WEFT_ERR_REVOKED within a second, naming who revoked; a request
 *    outstanding completes with it at its wait), and a rank
 *    outside Weft fails its next call at once; from a second thread it
 *    fails the call its own main thread waits in; the revoked
 *    communicator shrinks to a copy of itself (nobody is gone); a split
 *    child of it stays usable;
 *  - a healthy communicator shrinks by its exclude list (the excluded rank
 *    gets NULL) and stays usable; lists that differ fail on every rank;
 *    bad arguments and operations in flight (a request open, another
 *    thread waiting in an allreduce) are refused with a sentence;
 *  - quorum: across (fake) hosts a 2-rank job that loses one cannot
 *    shrink ("no quorum"), on one host it can;
 *  - a transport's own rule (the path failover's) records a peer on
 *    another host unreachable through env->peer_gone: failed_ranks names
 *    it, a shrink leaves it out, and that rank, alive, learns so;
 *  - a rank killed on this host is named by failed_ranks with no
 *    collective waiting on it (its pid check is made when asked).
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

#include "core/comm.h"
#include "harness.h"
#include "transports/transport.h"

#define MAXR 4

struct shared {
	_Atomic int refused; /* bad_uses: rank 0's shrink returned */
	double revoked_at;
	double failed_after[MAXR];
	int status[MAXR];
	int left_out_heard; /* transport_finds_unreachable: rank 3's shrink returned */
	char msg[MAXR][200];
};

_Static_assert(sizeof(struct shared) <= HARNESS_SHARED_BYTES, "fits the shared page");

static const char *const env_shm[] = {"WEFT_TIMEOUT=10", "WEFT_PEER_DEAD=1",
				      "WEFT_BOOTSTRAP_TIMEOUT=30", NULL};

static void nap(double seconds)
{
	struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static weft_status_t sum(weft_comm_t comm, float value, float want)
{
	float buf[16];
	for (int i = 0; i < 16; i++)
		buf[i] = value;
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, buf, 16, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st == WEFT_SUCCESS && buf[0] != want)
		return harness_fail("allreduce gave %g, expected %g", buf[0], want)
			   ? WEFT_ERR_INTERNAL
			   : st;
	return st;
}

static int expect(weft_comm_t comm, weft_status_t st, weft_status_t want, const char *says,
		  const char *call)
{
	const char *msg = weft_comm_last_error(comm);
	if (st != want || (says && !strstr(msg, says)))
		return harness_fail("%s returned %s (%s), expected %s with \"%s\"", call,
				    weft_status_string(st), msg, weft_status_string(want),
				    says ? says : "");
	return 0;
}

/* Shrink a communicator nobody left: a copy of all n ranks, exact. */
static int shrink_copy(weft_comm_t comm, int rank, int n)
{
	weft_comm_t nc = NULL;
	weft_status_t st = weft_comm_shrink(comm, NULL, 0, WEFT_SHRINK_DEFAULT, &nc);
	if (st != WEFT_SUCCESS || !nc)
		return harness_fail_status(comm, st, "shrink of the revoked communicator");
	int r = -1, size = 0;
	weft_comm_rank(nc, &r);
	weft_comm_size(nc, &size);
	int rc = r != rank || size != n ? harness_fail("became %d of %d", r, size) : 0;
	if (!rc && sum(nc, 1, (float)n) != WEFT_SUCCESS)
		rc = harness_fail_status(nc, WEFT_ERR_INTERNAL, "allreduce on the copy");
	weft_comm_destroy(nc);
	return rc;
}

static int revoke_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct shared *sh = harness_shared();
	weft_comm_t half = NULL;
	(void)arg;
	weft_status_t st = weft_comm_split(comm, rank < 2 ? 0 : 1, 0, &half);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "split");
	if (rank == 0) {
		nap(0.1); /* the others wait in the allreduce */
		sh->revoked_at = harness_now();
		if (weft_comm_revoke(comm) != WEFT_SUCCESS)
			return harness_fail("revoke");
		st = sum(comm, 1, (float)nranks);
		if (expect(comm, st, WEFT_ERR_REVOKED, "weft_comm_shrink", "an allreduce after it"))
			return 1;
	} else if (rank == 3) {
		nap(0.5); /* outside Weft while it happens */
		double t0 = harness_now();
		st = sum(comm, 1, (float)nranks);
		if (expect(comm, st, WEFT_ERR_REVOKED, "revoked by rank 0", "the next allreduce"))
			return 1;
		if (harness_now() - t0 > 0.2)
			return harness_fail("the next call took %.2f s to fail",
					    harness_now() - t0);
	} else if (rank == 2) { /* a request outstanding: its wait fails */
		float buf[16] = {0};
		weft_request_t req;
		st = weft_iallreduce(WEFT_IN_PLACE, buf, 16, WEFT_FLOAT32, WEFT_SUM, comm, &req);
		if (st == WEFT_SUCCESS)
			st = weft_wait(&req);
		sh->failed_after[rank] = harness_now() - sh->revoked_at;
		if (expect(comm, st, WEFT_ERR_REVOKED, "revoked by rank 0",
			   "the wait for an outstanding iallreduce"))
			return 1;
	} else {
		st = sum(comm, 1, (float)nranks);
		sh->failed_after[rank] = harness_now() - sh->revoked_at;
		if (expect(comm, st, WEFT_ERR_REVOKED, "revoked by rank 0",
			   "the waiting allreduce"))
			return 1;
	}
	if (sum(half, 1, 2) != WEFT_SUCCESS) /* the split child: nobody of it failed */
		return harness_fail_status(half, WEFT_ERR_INTERNAL, "allreduce on the split child");
	weft_comm_destroy(half);
	return shrink_copy(comm, rank, nranks);
}

START_TEST(revoke_reaches_everyone)
{
	struct harness_result res;
	harness_run(4, env_shm, revoke_body, NULL, 60, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	struct shared sh;
	memcpy(&sh, res.shared, sizeof(sh));
	for (int r = 1; r <= 2; r++)
		ck_assert_msg(sh.failed_after[r] > 0 && sh.failed_after[r] < 1.0,
			      "rank %d's allreduce failed %.2f s after the revoke", r,
			      sh.failed_after[r]);
}
END_TEST

static void *revoke_later(void *arg)
{
	nap(0.1);
	weft_comm_revoke(arg);
	return NULL;
}

static int thread_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	(void)arg;
	if (rank == 1) {
		pthread_t t;
		pthread_create(&t, NULL, revoke_later, comm);
		weft_status_t st = sum(comm, 1, (float)nranks); /* rank 0 never comes */
		pthread_join(t, NULL);
		if (expect(comm, st, WEFT_ERR_REVOKED, "revoked by this rank", "the allreduce"))
			return 1;
	} else {
		nap(0.4);
		weft_status_t st = sum(comm, 1, (float)nranks);
		if (expect(comm, st, WEFT_ERR_REVOKED, "revoked by rank 1", "the allreduce"))
			return 1;
	}
	return shrink_copy(comm, rank, nranks);
}

START_TEST(revoke_from_another_thread)
{
	struct harness_result res;
	harness_run(2, env_shm, thread_body, NULL, 60, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* ---- a healthy communicator, shrunk by its list */

static int healthy_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	(void)arg;
	const int out[1] = {2};
	weft_comm_t nc = NULL;
	weft_status_t st = weft_comm_shrink(comm, out, 1, WEFT_SHRINK_DEFAULT, &nc);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "shrink by the list");
	if (rank == 2 && nc)
		return harness_fail("the excluded rank got a communicator");
	if (rank != 2) {
		int r = -1, n = 0;
		weft_comm_rank(nc, &r);
		weft_comm_size(nc, &n);
		if (n != nranks - 1 || r != (rank < 2 ? rank : rank - 1))
			return harness_fail("became %d of %d", r, n);
		if (sum(nc, 1, (float)(nranks - 1)) != WEFT_SUCCESS)
			return harness_fail_status(nc, WEFT_ERR_INTERNAL,
						   "allreduce on the new one");
		weft_comm_destroy(nc);
	}
	if (sum(comm, 1, (float)nranks) != WEFT_SUCCESS) /* the parent goes on */
		return harness_fail_status(comm, WEFT_ERR_INTERNAL, "allreduce on the parent");
	/* Lists that differ: every rank fails, naming the two ranks. */
	const int mine[1] = {rank < 2 ? 3 : 1};
	st = weft_comm_shrink(comm, mine, 1, WEFT_SHRINK_DEFAULT, &nc);
	if (expect(comm, st, WEFT_ERR_INVALID_ARG, "different exclude lists",
		   "shrink, lists differ"))
		return 1;
	return sum(comm, 1, (float)nranks) == WEFT_SUCCESS
		   ? 0
		   : harness_fail_status(comm, WEFT_ERR_INTERNAL, "allreduce after the refusal");
}

START_TEST(healthy_shrink)
{
	struct harness_result res;
	harness_run(4, env_shm, healthy_body, NULL, 60, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* ---- bad uses */

struct busy {
	weft_comm_t comm;
	float buf[16]; /* as sum()'s */
	_Atomic int posted;
	weft_status_t st;
};

/* An operation in another thread: posted, then waited for. */
static void *busy_thread(void *arg)
{
	struct busy *b = arg;
	weft_request_t req;
	for (int i = 0; i < 16; i++)
		b->buf[i] = 1;
	b->st = weft_iallreduce(WEFT_IN_PLACE, b->buf, 16, WEFT_FLOAT32, WEFT_SUM, b->comm, &req);
	atomic_store(&b->posted, 1);
	if (b->st == WEFT_SUCCESS)
		b->st = weft_wait(&req);
	return NULL;
}

/* Rank 0 shrinks while its other thread waits in an allreduce that the
 * other ranks join only once that shrink has returned. */
static int shrink_while_busy(weft_comm_t comm, int rank, int nranks)
{
	struct shared *sh = harness_shared();
	if (rank != 0) {
		for (int i = 0; i < 2000 && !atomic_load(&sh->refused); i++)
			nap(0.005);
		return sum(comm, 1, (float)nranks) == WEFT_SUCCESS
			   ? 0
			   : harness_fail_status(comm, WEFT_ERR_INTERNAL, "the late allreduce");
	}
	struct busy b = {.comm = comm};
	pthread_t t;
	weft_comm_t nc = (weft_comm_t)1;
	pthread_create(&t, NULL, busy_thread, &b);
	while (!atomic_load(&b.posted))
		nap(0.001);
	weft_status_t st = weft_comm_shrink(comm, NULL, 0, 0, &nc);
	atomic_store(&sh->refused, 1);
	pthread_join(t, NULL);
	if (expect(comm, st, WEFT_ERR_INVALID_ARG, "in flight",
		   "shrink while another thread waits in an allreduce"))
		return 1;
	if (nc)
		return harness_fail("newcomm not set to NULL");
	if (b.st != WEFT_SUCCESS || b.buf[0] != (float)nranks)
		return harness_fail_status(comm, b.st, "the other thread's allreduce");
	return 0;
}

static int bad_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	weft_comm_t nc = (weft_comm_t)1;
	(void)arg;
	const int far[1] = {nranks}, twice[2] = {1, 1};
	weft_status_t st = weft_comm_shrink(comm, far, 1, 0, &nc);
	if (expect(comm, st, WEFT_ERR_INVALID_ARG, "not a rank", "shrink, rank out of range") || nc)
		return nc ? harness_fail("newcomm not set to NULL") : 1;
	st = weft_comm_shrink(comm, twice, 2, 0, &nc);
	if (expect(comm, st, WEFT_ERR_INVALID_ARG, "twice", "shrink, a rank twice"))
		return 1;
	st = weft_comm_shrink(comm, NULL, 1, 0, &nc);
	if (expect(comm, st, WEFT_ERR_INVALID_ARG, "exclude is NULL", "shrink, NULL list"))
		return 1;
	st = weft_comm_shrink(comm, NULL, 0, 0x10, &nc);
	if (expect(comm, st, WEFT_ERR_INVALID_ARG, "flags", "shrink, bad flags"))
		return 1;
	st = weft_comm_shrink(comm, NULL, 0, 0, NULL);
	if (expect(comm, st, WEFT_ERR_INVALID_ARG, "newcomm is NULL", "shrink, NULL newcomm"))
		return 1;
	if (weft_comm_shrink(NULL, NULL, 0, 0, &nc) != WEFT_ERR_INVALID_ARG ||
	    weft_comm_revoke(NULL) != WEFT_ERR_INVALID_ARG)
		return harness_fail("a NULL communicator was not refused");
	int count = -1;
	if (weft_comm_failed_ranks(comm, NULL, 1, &count) != WEFT_ERR_INVALID_ARG ||
	    weft_comm_failed_ranks(comm, NULL, 0, &count) != WEFT_SUCCESS || count != 0)
		return harness_fail("failed_ranks: bad arguments or a healthy count of %d", count);
	/* An operation in flight on a healthy communicator. */
	float buf[8] = {1, 1, 1, 1, 1, 1, 1, 1};
	weft_request_t req;
	st = weft_iallreduce(WEFT_IN_PLACE, buf, 8, WEFT_FLOAT32, WEFT_SUM, comm, &req);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "iallreduce");
	st = weft_comm_shrink(comm, NULL, 0, 0, &nc);
	if (expect(comm, st, WEFT_ERR_INVALID_ARG, "in flight", "shrink with a request open"))
		return 1;
	st = weft_wait(&req);
	if (st != WEFT_SUCCESS || buf[0] != (float)nranks)
		return harness_fail_status(comm, st, "the iallreduce after the refused shrink");
	return shrink_while_busy(comm, rank, nranks);
}

START_TEST(bad_uses)
{
	struct harness_result res;
	harness_run(3, env_shm, bad_body, NULL, 60, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* ---- quorum */

static int quorum_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct shared *sh = harness_shared();
	(void)nranks;
	(void)arg;
	if (sum(comm, 1, 2) != WEFT_SUCCESS)
		return harness_fail("warm-up");
	if (rank == 1)
		raise(SIGKILL);
	weft_status_t st = WEFT_SUCCESS;
	for (int i = 0; i < 400 && st == WEFT_SUCCESS; i++)
		st = sum(comm, 1, 2);
	weft_comm_t nc = NULL;
	sh->status[0] = weft_comm_shrink(comm, NULL, 0, 0, &nc);
	snprintf(sh->msg[0], sizeof(sh->msg[0]), "%s", weft_comm_last_error(comm));
	if (nc) {
		int n = 0;
		weft_comm_size(nc, &n);
		if (n != 1 || sum(nc, 5, 5) != WEFT_SUCCESS)
			return harness_fail("the shrunk communicator of one rank");
		weft_comm_destroy(nc);
	}
	return 0;
}

static int two_hosts(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	char v[16];
	(void)nranks;
	(void)id;
	if (!arg)
		return 0;
	snprintf(v, sizeof(v), "quorum-h%d", rank);
	return setenv("WEFT_HOSTID", v, 1) != 0;
}

START_TEST(quorum_of_two)
{
	static const char *const env_lo[] = {"WEFT_TIMEOUT=10", "WEFT_PEER_DEAD=1",
					     "WEFT_SOCKET_IFNAME=lo", NULL};
	bool hosts = _i == 1;
	struct harness_job job = {.nranks = 2,
				  .env = env_lo,
				  .body = quorum_body,
				  .arg = hosts ? (void *)1 : NULL,
				  .timeout_s = 60,
				  .before_init = two_hosts};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.rank[0].end == HARNESS_EXITED && res.rank[0].code == 0, "%s",
		      res.summary);
	struct shared sh;
	memcpy(&sh, res.shared, sizeof(sh));
	if (hosts)
		ck_assert_msg(sh.status[0] == WEFT_ERR_REMOTE && strstr(sh.msg[0], "no quorum") &&
				  strstr(sh.msg[0], "not reached: 1 (killed)"),
			      "across hosts the survivor's shrink returned %s: %s",
			      weft_status_string(sh.status[0]), sh.msg[0]);
	else
		ck_assert_msg(sh.status[0] == WEFT_SUCCESS,
			      "on one host the shrink returned %s: %s",
			      weft_status_string(sh.status[0]), sh.msg[0]);
}
END_TEST

/* ---- a rank a transport found unreachable */

static int gone_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct shared *sh = harness_shared();
	(void)arg;
	if (sum(comm, 1, (float)nranks) != WEFT_SUCCESS)
		return harness_fail("warm-up");
	if (rank != 3) { /* what the path failover does when rank 3 goes dark */
		comm->env->peer_gone(comm->env->ctx, 3, WEFT_RANK_UNREACHABLE);
		weft_failed_rank_t f[MAXR];
		int n = 0;
		weft_comm_failed_ranks(comm, f, MAXR, &n);
		if (n != 1 || f[0].rank != 3 || f[0].how != WEFT_RANK_UNREACHABLE)
			return harness_fail("failed_ranks: %d ranks, the first %d (%s)", n,
					    n ? f[0].rank : -1,
					    n ? weft_rank_failure_string(f[0].how) : "-");
	}
	weft_comm_t nc = NULL;
	weft_status_t st = weft_comm_shrink(comm, NULL, 0, WEFT_SHRINK_DEFAULT, &nc);
	snprintf(sh->msg[rank], sizeof(sh->msg[rank]), "%s", weft_comm_last_error(comm));
	__atomic_store_n(&sh->status[rank], st, __ATOMIC_RELEASE);
	if (rank == 3) {
		__atomic_store_n(&sh->left_out_heard, 1, __ATOMIC_RELEASE);
		return nc ? harness_fail("the unreachable rank got a communicator") : 0;
	}
	/* Rank 3 learns it was left out by asking the survivors, who answer
	 * while they hold the old communicator (weft_fault.h): keep it until
	 * rank 3's call returned, or 10 s. Destroyed at once, it raced: rank 3
	 * then found every survivor gone ("no quorum"), 2 runs in 5 once
	 * communicators started 80 ms faster. */
	for (double t0 = harness_now();
	     !__atomic_load_n(&sh->left_out_heard, __ATOMIC_ACQUIRE) && harness_now() - t0 < 10;)
		nap(0.005);
	int r = -1, n = 0;
	if (st != WEFT_SUCCESS || !nc)
		return harness_fail_status(comm, st, "shrink without the unreachable rank");
	weft_comm_rank(nc, &r);
	weft_comm_size(nc, &n);
	int rc = r != rank || n != 3 ? harness_fail("became %d of %d", r, n) : 0;
	if (!rc && sum(nc, 1, 3) != WEFT_SUCCESS)
		rc = harness_fail_status(nc, WEFT_ERR_INTERNAL, "allreduce on the shrunk one");
	weft_comm_destroy(nc);
	return rc;
}

static int own_host(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	char v[16];
	(void)nranks;
	(void)id;
	(void)arg;
	snprintf(v, sizeof(v), "gone-h%d", rank);
	return setenv("WEFT_HOSTID", v, 1) != 0;
}

START_TEST(transport_finds_unreachable)
{
	static const char *const env_lo[] = {"WEFT_TIMEOUT=10", "WEFT_PEER_DEAD=1",
					     "WEFT_SOCKET_IFNAME=lo", NULL};
	struct harness_job job = {.nranks = 4,
				  .env = env_lo,
				  .body = gone_body,
				  .timeout_s = 60,
				  .before_init = own_host};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	struct shared sh;
	memcpy(&sh, res.shared, sizeof(sh));
	ck_assert_msg(sh.status[3] == WEFT_ERR_REVOKED && strstr(sh.msg[3], "left out") &&
			  strstr(sh.msg[3], "unreachable"),
		      "the unreachable rank's shrink returned %s: %s",
		      weft_status_string(sh.status[3]), sh.msg[3]);
}
END_TEST

/* ---- a rank killed on this host, no collective waiting on it */

static int killed_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct shared *sh = harness_shared();
	(void)arg;
	if (sum(comm, 1, (float)nranks) != WEFT_SUCCESS)
		return harness_fail("warm-up");
	if (rank == 2)
		raise(SIGKILL);
	/* The pid check needs no peer's answer: failed_ranks makes it when
	 * asked, so the victim is named once its pid is gone (the harness
	 * reaps it at once), with no collective waiting on it. */
	double t0 = harness_now();
	weft_failed_rank_t f[MAXR];
	int n = 0;
	while (n == 0 && harness_now() - t0 < 3) {
		weft_comm_failed_ranks(comm, f, MAXR, &n);
		nap(0.005);
	}
	sh->failed_after[rank] = harness_now() - t0;
	if (n != 1 || f[0].rank != 2 || f[0].how != WEFT_RANK_KILLED)
		return harness_fail("failed_ranks after %.2f s: %d ranks, the first %d (%s)",
				    sh->failed_after[rank], n, n ? f[0].rank : -1,
				    n ? weft_rank_failure_string(f[0].how) : "-");
	weft_comm_abort(comm);
	return 0;
}

START_TEST(killed_named_without_collective)
{
	struct harness_result res;
	harness_run(3, env_shm, killed_body, NULL, 60, &res);
	ck_assert_msg(res.rank[0].end == HARNESS_EXITED && res.rank[0].code == 0 &&
			  res.rank[1].end == HARNESS_EXITED && res.rank[1].code == 0,
		      "%s", res.summary);
	ck_assert_msg(res.rank[2].end == HARNESS_SIGNALED && res.rank[2].code == SIGKILL,
		      "rank 2 was to die of SIGKILL: %s", res.summary);
	struct shared sh;
	memcpy(&sh, res.shared, sizeof(sh));
	printf("revoke: rank 2 killed, failed_ranks named it after %.3f s (rank 0), %.3f s "
	       "(rank 1)\n",
	       sh.failed_after[0], sh.failed_after[1]);
}
END_TEST

static Suite *revoke_suite(void)
{
	Suite *s = suite_create("revoke");
	TCase *tc = tcase_create("revoke");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, revoke_reaches_everyone);
	tcase_add_test(tc, revoke_from_another_thread);
	tcase_add_test(tc, healthy_shrink);
	tcase_add_test(tc, bad_uses);
	tcase_add_loop_test(tc, quorum_of_two, 0, 2);
	tcase_add_test(tc, transport_finds_unreachable);
	tcase_add_test(tc, killed_named_without_collective);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(revoke_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
