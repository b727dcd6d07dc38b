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
 * knock on it mid-job (garbage, a hello with another secret, a call with
 * another secret) are dropped with a warning while the job goes on.
 */
#include <check.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
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

static int dial(unsigned port, const void *data, size_t len)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (const struct sockaddr *)&to, sizeof(to)) != 0 ||
	    send(fd, data, len, MSG_NOSIGNAL) != (ssize_t)len) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int allreduce_ones(weft_comm_t comm, int nranks)
{
	float x = 1;
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, &x, 1, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "allreduce with strangers at the door");
	return x == (float)nranks ? 0 : harness_fail("allreduce gave %g", (double)x);
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
	unsigned char garbage[sizeof(struct weft_sock_hello)];
	memset(garbage, 0xab, sizeof(garbage));
	struct weft_sock_hello bad = {
	    .magic = WEFT_SOCK_HELLO_MAGIC, .secret = 12345, .rank = 0, .index = 0, .nsocks = 2};
	struct weft_sock_hello call = bad;
	call.index = WEFT_SOCK_CALL_INDEX;
	call.rank = nranks - 1;
	int fds[3] = {dial(port, garbage, sizeof(garbage)), dial(port, &bad, sizeof(bad)),
		      dial(port, &call, sizeof(call))};
	char path[256];
	snprintf(path, sizeof(path), "%s/doors_%d.log", (const char *)arg, (int)getpid());
	/* Each allreduce moves the listener along; the drops come within a
	 * few. The ranks agree on when to stop (every rank has its 3). */
	double t0 = harness_now();
	for (int all = 0; !ret && !all;) {
		int mine = harness_count_in_file(path, "dropped a connection") >= 3 ||
			   harness_now() - t0 > 10;
		weft_status_t st = weft_allreduce(&mine, &all, 1, WEFT_INT32, WEFT_MIN, comm);
		if (st != WEFT_SUCCESS)
			ret = harness_fail_status(comm, st, "allreduce with strangers at the door");
	}
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (ret)
		return ret;
	if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0)
		return harness_fail("a stranger could not reach the door at port %u", port);
	int drops = harness_count_in_file(path, "dropped a connection");
	if (drops != 3 || harness_count_in_file(path, "wrong secret") != 2 ||
	    harness_count_in_file(path, "not a Weft handshake") != 1)
		return harness_fail("expected 3 strangers dropped in %s, found %d", path, drops);
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
