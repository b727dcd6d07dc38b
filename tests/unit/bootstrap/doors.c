/*
 * doors.c — no listening socket is left open once init returns: the
 * bootstrap root closes its listener when every rank has joined, and the
 * socket transport closes its TCP listener once every peer is connected
 * (a stranger then finds the port closed instead of a socket that accepts
 * and reads it). Counted from /proc: this process's socket inodes against
 * the LISTEN entries of /proc/net/tcp and tcp6 (loopback only).
 *
 * Connecting lazily (WEFT_CONNECT=lazy) the transport's listener must stay
 * open for the peers still to come: one door per rank, and strangers that
 * knock on it mid-job (garbage, a handshake made with another key, a call
 * made with another key) are dropped with a warning while the job goes on.
 */
#include <check.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/comm.h"
#include "harness.h"
#include "stranger.h"
#include "transports/socket/socket.h"

/* TCP sockets of this process in LISTEN (state 0A); the port of the last
 * one into *port if not NULL. */
static int listening_at(unsigned *port)
{
	int count = 0;
	const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	for (int f = 0; f < 2; f++) {
		FILE *fp = fopen(files[f], "r");
		char line[512];
		while (fp && fgets(line, sizeof(line), fp)) {
			char state[8];
			unsigned long inode;
			unsigned p;
			if (sscanf(line, "%*s %*[0-9A-Fa-f]:%x %*s %7s %*s %*s %*s %*s %*s %lu", &p,
				   state, &inode) == 3 &&
			    strcmp(state, "0A") == 0 && harness_own_socket(inode)) {
				count++;
				if (port)
					*port = p;
			}
		}
		if (fp)
			fclose(fp);
	}
	return count;
}

static int listening(void)
{
	return listening_at(NULL);
}

static int doors_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int n = listening();
	if (n != 0)
		return harness_fail("%d TCP listener(s) still open after init", n);
	float x = 1;
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "allreduce after the doors closed");
	return x == (float)nranks ? 0 : harness_fail("allreduce gave %g", (double)x);
}

START_TEST(no_listener_after_init)
{
	static const char *const env[] = {"WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo",
					  "WEFT_CONNECT=eager", "WEFT_TIMEOUT=30", NULL};
	struct harness_result res;
	harness_run(3, env, doors_body, NULL, 60, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

START_TEST(no_listener_after_env_init)
{
	static const char *const env[] = {"WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo",
					  "WEFT_CONNECT=eager", "WEFT_TIMEOUT=30", NULL};
	struct harness_job job = {
	    .nranks = 3, .env = env, .body = doors_body, .timeout_s = 60, .init = HARNESS_INIT_ENV};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* --- lazily: the door stays open, and strangers find it mid-job --- */

static int allreduce_ones(weft_comm_t comm, int nranks)
{
	float x = 1;
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "allreduce with strangers at the door");
	return x == (float)nranks ? 0 : harness_fail("allreduce gave %g", (double)x);
}

struct knock {
	unsigned port;
	const unsigned char *id;
	int nranks;
	int fds[3];
};

static void *knock_main(void *arg)
{
	struct knock *k = arg;
	struct weft_sock_hello data = {.index = 0, .nsocks = 2, .gen = 1};
	k->fds[0] = stranger_dial(k->port, STRANGER_GARBAGE, WEFT_HS_SOCKET, NULL, 0, 1, NULL, 0);
	k->fds[1] = stranger_dial(k->port, STRANGER_WRONG_KEY, WEFT_HS_SOCKET, k->id, 0, 1, &data,
				  sizeof(data));
	k->fds[2] = stranger_dial(k->port, STRANGER_WRONG_KEY, WEFT_HS_CALL, k->id, k->nranks - 1,
				  1, &data, sizeof(data));
	return NULL;
}

static int strangers_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	unsigned port = 0;
	int n = listening_at(&port);
	if (n != 1)
		return harness_fail("%d TCP listener(s) open after a lazy init, expected 1", n);
	int ret = allreduce_ones(comm, nranks);
	if (ret)
		return ret;
	/* Knocking on rank 1's door, from a thread (the door answers only
	 * while rank 1 progresses): garbage, rank 0 with the wrong key, and a
	 * call from the last rank with the wrong key. */
	struct knock k = {.port = port,
			  .id = ((const struct weft_comm *)comm)->id,
			  .nranks = nranks,
			  .fds = {-1, -1, -1}};
	pthread_t knocker;
	if (rank == 1 && pthread_create(&knocker, NULL, knock_main, &k) != 0)
		return harness_fail("pthread_create");
	int *fds = k.fds;
	char path[256];
	snprintf(path, sizeof(path), "%s/doors_%d.log", (const char *)arg, (int)getpid());
	/* Each allreduce moves the listener along; the drops come within a
	 * few. The ranks agree on when to stop (every rank has its 3). */
	double t0 = harness_now();
	for (int all = 0; !ret && !all;) {
		int mine = rank != 1 || harness_count_in_file(path, "dropped a connection") >= 3 ||
			   harness_now() - t0 > 10;
		weft_status_t st = weft_allreduce(&mine, &all, 1, WEFT_INT32, WEFT_MIN, comm);
		if (st != WEFT_SUCCESS)
			ret = harness_fail_status(comm, st, "allreduce with strangers at the door");
	}
	if (rank == 1)
		pthread_join(knocker, NULL);
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (ret)
		return ret;
	if (rank != 1)
		return allreduce_ones(comm, nranks);
	if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0)
		return harness_fail("a stranger could not reach the door at port %u", port);
	int drops = harness_count_in_file(path, "dropped a connection");
	if (drops != 3 || harness_count_in_file(path, "failed authentication") != 2 ||
	    harness_count_in_file(path, "not a Weft handshake") != 1)
		return harness_fail("expected 3 strangers dropped in %s (2 failing "
				    "authentication, 1 not a handshake), found %d",
				    path, drops);
	return allreduce_ones(comm, nranks);
}

START_TEST(lazy_door_drops_strangers)
{
	char dir[] = "/tmp/weft_doors_XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char logenv[300];
	snprintf(logenv, sizeof(logenv), "WEFT_DEBUG_FILE=%s/doors_%%p.log", dir);
	const char *const env[] = {"WEFT_TRANSPORTS=socket",
				   "WEFT_SOCKET_IFNAME=lo",
				   "WEFT_CONNECT=lazy",
				   "WEFT_SOCKET_NSOCKS=2",
				   "WEFT_TIMEOUT=30",
				   "WEFT_DEBUG=WARN",
				   "WEFT_DEBUG_SUBSYS=NET",
				   logenv,
				   NULL};
	struct harness_result res;
	harness_run(3, env, strangers_body, dir, 60, &res);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("doors");
	TCase *tc = tcase_create("listeners");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, no_listener_after_init);
	tcase_add_test(tc, no_listener_after_env_init);
	tcase_add_test(tc, lazy_door_drops_strangers);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
