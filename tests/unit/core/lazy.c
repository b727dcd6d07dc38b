/*
 * lazy.c — connections made on a peer's first message
 * (WEFT_CONNECT=lazy, core/p2p.h), over the socket transport on lo:
 *
 *  - ring: a ring AllReduce on 8 local ranks leaves each rank connected
 *    to its two ring neighbours only, counted by the communicator and by
 *    the TCP sockets in /proc/self/fd (WEFT_SOCKET_NSOCKS per connected
 *    peer and nothing else: no call is left open); an AllToAll then
 *    connects every pair;
 *  - both at once: every rank sends to and receives from every other in
 *    one group, so both ranks of each pair start connecting at the same
 *    time: one connection per pair, no duplicate, no deadlock;
 *  - dead peer: a rank that exits after init, before anyone connected to
 *    it: the first AllReduce fails on every survivor within 10 s
 *    (WEFT_TIMEOUT is 60) and not by a timeout, the first to need the
 *    victim (refused) with an error that names it; the others may fail
 *    first on a neighbour that gave up (a ring neighbour of the victim
 *    may hear of the other neighbour's end before its own refusal);
 *  - the setting: WEFT_CONNECT=sometimes fails init naming it; auto is
 *    eager on a few ranks (every peer connected after init).
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/p2p.h"
#include "harness.h"
#include "transports/socket/socket.h"

#define NSOCKS	      2
#define JOB_TIMEOUT_S 120

/* Sockets this process holds (every kind: TCP, UDP, Unix). */
static int open_sockets(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[300], link[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t len = readlink(path, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		n += strncmp(link, "socket:", 7) == 0;
	}
	if (d)
		closedir(d);
	return n;
}

static int allreduce_check(weft_comm_t comm, int nranks, const char *what)
{
	float x[1000];
	for (int i = 0; i < 1000; i++)
		x[i] = (float)i;
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, x, 1000, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "%s", what);
	for (int i = 0; i < 1000; i++)
		if (x[i] != (float)(i * nranks))
			return harness_fail("%s: element %d is %g", what, i, (double)x[i]);
	return 0;
}

/* Accepted sockets of the socket transport still in their handshake. */
static int pending_handshakes(weft_comm_t comm)
{
	for (size_t i = 0; i < comm->ntps; i++)
		if (comm->tps[i] && strcmp(comm->tps[i]->ops->name, "socket") == 0)
			return weft_container_of(comm->tps[i], struct weft_sock_comm, base)
			    ->npending;
	return 0;
}

/* After this rank's collectives: @p want peers connected (-1: any number
 * below nranks - 1), each with NSOCKS sockets more than after init. */
static int check_connected(weft_comm_t comm, int base, int want, const char *when)
{
	/* A call whose caller's connection came up first was closed by the
	 * caller mid-handshake; the listener drops it at its next look at its
	 * door (every few dozen progress calls), so it may still hold it: a
	 * handshake under way is not a connection's socket. */
	int have = weft_p2p_connected_peers(comm);
	int socks = open_sockets() - base - pending_handshakes(comm);
	if (want >= 0 && have != want)
		return harness_fail("%s: %d peers connected, expected %d", when, have, want);
	if (want < 0 && have >= comm->nranks - 1)
		return harness_fail("%s: %d peers connected, expected fewer than %d", when, have,
				    comm->nranks - 1);
	if (socks != have * NSOCKS)
		return harness_fail("%s: %d sockets more than after init for %d peers "
				    "(expected %d)",
				    when, socks, have, have * NSOCKS);
	return 0;
}

/* Outside the library (nothing progresses): every rank got here. */
static void wait_for_all(int nranks)
{
	int *arrived = harness_shared();
	__atomic_add_fetch(arrived, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(arrived, __ATOMIC_SEQ_CST) < nranks)
		usleep(1000);
}

static int ring_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int base = open_sockets();
	if (weft_p2p_connected_peers(comm) != 0)
		return harness_fail("%d peers connected after a lazy init",
				    weft_p2p_connected_peers(comm));
	harness_progress("ring allreduce");
	int ret = allreduce_check(comm, nranks, "ring allreduce");
	if (!ret)
		ret = allreduce_check(comm, nranks, "second ring allreduce");
	if (!ret)
		ret = check_connected(comm, base, 2, "after ring allreduces");
	if (ret)
		return ret;
	/* A rank ahead in the alltoall would ask this one for connections. */
	wait_for_all(nranks);
	harness_progress("alltoall");
	int send[16], recv[16];
	for (int i = 0; i < nranks; i++)
		send[i] = rank * 100 + i;
	weft_status_t st = weft_alltoall(send, recv, 1, WEFT_INT32, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "alltoall");
	for (int i = 0; i < nranks; i++)
		if (recv[i] != i * 100 + rank)
			return harness_fail("alltoall: block %d is %d", i, recv[i]);
	return check_connected(comm, base, nranks - 1, "after alltoall");
}

static const char *const lazy_env[] = {"WEFT_CONNECT=lazy",
				       "WEFT_TRANSPORTS=socket",
				       "WEFT_SOCKET_IFNAME=lo",
				       "WEFT_SOCKET_NSOCKS=2",
				       "WEFT_ALGO=allreduce:ring",
				       "WEFT_TIMEOUT=60",
				       NULL};

START_TEST(ring_connects_neighbours)
{
	struct harness_result res;
	harness_run(8, lazy_env, ring_body, NULL, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* Every pair at once, both ways, several rounds. */
static int both_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int base = open_sockets();
	for (int round = 0; round < 3; round++) {
		int out[16], in[16];
		weft_group_start();
		for (int p = 0; p < nranks; p++) {
			if (p == rank)
				continue;
			out[p] = rank * 1000 + p * 10 + round;
			weft_send(&out[p], 1, WEFT_INT32, p, comm);
			weft_recv(&in[p], 1, WEFT_INT32, p, comm);
		}
		weft_status_t st = weft_group_end();
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "round %d of sends to everyone",
						   round);
		for (int p = 0; p < nranks; p++)
			if (p != rank && in[p] != p * 1000 + rank * 10 + round)
				return harness_fail("round %d: from rank %d came %d", round, p,
						    in[p]);
	}
	return check_connected(comm, base, nranks - 1, "after sends both ways");
}

START_TEST(both_sides_at_once)
{
	struct harness_result res;
	harness_run(4 + _i, lazy_env, both_body, NULL, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* --- a peer that dies before anyone connected to it --- */

#define VICTIM 2

struct death {
	int died;  /* 1 once the victim is about to leave */
	int named; /* survivors whose error names it */
};

static int dead_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct death *d = harness_shared();
	if (rank == VICTIM) {
		__atomic_store_n(&d->died, 1, __ATOMIC_SEQ_CST);
		_exit(0); /* no destroy: the kernel closes the listener */
	}
	while (__atomic_load_n(&d->died, __ATOMIC_SEQ_CST) == 0)
		usleep(1000);
	usleep(200 * 1000); /* the victim's descriptors are closed by now */
	double t0 = harness_now();
	static float x[1000];
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, x, 1000, WEFT_FLOAT32, WEFT_SUM, comm);
	double took = harness_now() - t0;
	const char *msg = weft_comm_last_error(comm);
	if (st == WEFT_SUCCESS)
		return harness_fail("the allreduce succeeded without rank %d", VICTIM);
	if (took > 10) /* WEFT_TIMEOUT is 60 */
		return harness_fail_status(comm, st, "the allreduce took %.1f s to fail", took);
	if (st == WEFT_ERR_TIMEOUT)
		return harness_fail_status(comm, st, "a timeout, not the peer's death");
	char name[32];
	snprintf(name, sizeof(name), "rank %d", VICTIM);
	if (strstr(msg, name))
		__atomic_add_fetch(&d->named, 1, __ATOMIC_SEQ_CST);
	fprintf(stderr, "rank %d: failed after %.2f s, as it should: %s\n", rank, took, msg);
	return 0;
}

START_TEST(dead_peer_named)
{
	struct harness_result res;
	harness_run(4, lazy_env, dead_body, NULL, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	const struct death *d = (const struct death *)res.shared;
	ck_assert_msg(d->named >= 1, "no survivor's error names rank %d", VICTIM);
}
END_TEST

/* --- the setting --- */

static int auto_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	if (weft_p2p_connected_peers(comm) != nranks - 1)
		return harness_fail("WEFT_CONNECT=auto on %d ranks: %d peers connected", nranks,
				    weft_p2p_connected_peers(comm));
	return allreduce_check(comm, nranks, "allreduce");
}

START_TEST(auto_is_eager_on_few_ranks)
{
	static const char *const env[] = {"WEFT_CONNECT=auto", "WEFT_TRANSPORTS=socket",
					  "WEFT_SOCKET_IFNAME=lo", "WEFT_TIMEOUT=60", NULL};
	struct harness_result res;
	harness_run(3, env, auto_body, NULL, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

static int bad_init(int rank, int nranks, weft_status_t status, const char *message, double seconds,
		    void *arg)
{
	if (status != WEFT_ERR_INVALID_ARG || !strstr(message, "WEFT_CONNECT=sometimes"))
		return harness_fail("init failed with %s: %s (expected one naming "
				    "WEFT_CONNECT=sometimes)",
				    weft_status_string(status), message);
	return 0;
}

START_TEST(bad_setting)
{
	static const char *const env[] = {"WEFT_CONNECT=sometimes", "WEFT_TRANSPORTS=socket",
					  "WEFT_SOCKET_IFNAME=lo", "WEFT_TIMEOUT=20", NULL};
	struct harness_job job = {
	    .nranks = 2, .env = env, .timeout_s = 60, .init_failed = bad_init};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lazy");
	TCase *tc = tcase_create("lazy");
	tcase_set_timeout(tc, 150);
	tcase_add_test(tc, ring_connects_neighbours);
	tcase_add_loop_test(tc, both_sides_at_once, 0, 2); /* 4 and 5 ranks */
	tcase_add_test(tc, dead_peer_named);
	tcase_add_test(tc, auto_is_eager_on_few_ranks);
	tcase_add_test(tc, bad_setting);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
