/*
 * test_socket.c — what is the TCP transport's own: strangers with garbage
 * on the listener during connect, the TCP_INFO signals of its sockets (one
 * per socket), and a bad WEFT_SOCKET_IFNAME. Forked ranks with
 * WEFT_TRANSPORTS=socket on loopback; messages striped over 2 sockets in
 * chunks of 64 KiB (WEFT_SOCKET_CHUNK) so that multi-chunk ones stay small.
 * The point-to-point contract over TCP (sizes, reduction, order,
 * mismatches, a peer killed or closing; one socket, sprayed round robin and
 * adaptively, lazy connections) is the conformance suite's
 * (tests/conformance/: the socket* configurations).
 *
 * Everything binds and connects to 127.0.0.1 only.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "harness.h"
#include "p2p_exchange.h"
#include "stranger.h"
#include "transports/socket/socket.h"

#define CHUNK	      (64u << 10)
#define JOB_TIMEOUT_S 20.0
#define WAIT_S	      8.0

static const char *const sock_env[] = {
    "WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo", "WEFT_SOCKET_CHUNK=64K",
    "WEFT_SOCKET_NSOCKS=2",   "WEFT_TIMEOUT=10",       NULL,
};

static int check_socket_conns(weft_comm_t comm)
{
	for (int p = 0; p < comm->nranks; p++) {
		if (p == comm->rank)
			continue;
		struct weft_conn *c = comm->peers[p].conn;
		if (!c || c->ops != &weft_tp_socket_ops)
			return harness_fail("peer %d is not on the socket transport", p);
	}
	return 0;
}

/* --- every size between every pair --- */

static const size_t sizes[] = {0, 1, 8, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5, 2 * CHUNK};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Striped messages between every pair work, and only over sockets. */
static int body_sizes(weft_comm_t comm, int rank, int nranks, void *arg)
{
	return check_socket_conns(comm) || p2p_exchange(comm, sizes, NSIZES, 1, WAIT_S);
}

static void run_ok(int nranks, const char *const *env, harness_body_fn body, void *arg)
{
	struct harness_result res;
	harness_run(nranks, env ? env : sock_env, body, arg, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}

/* --- strangers on the listener during connect ---
 *
 * The test replaces connect() for the library linked into it: in rank 0,
 * the first connect to an address other than the bootstrap root is the
 * socket transport dialling rank 1's listener. Before letting it through,
 * rank 0 plays stranger on the same address: garbage, a handshake for
 * another communicator made with another key, half a hello that never
 * finishes, and a connection closed at once.
 * Rank 1 must drop the three finished ones with a warning and connect. */

static bool stranger_armed;
static struct sockaddr_in stranger_root;
static int stranger_fds[4] = {-1, -1, -1, -1};

static int raw_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	return (int)syscall(SYS_connect, fd, addr, len);
}

static int dial(const struct sockaddr_in *to, const void *data, size_t len)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || raw_connect(fd, (const struct sockaddr *)to, sizeof(*to)) != 0)
		return -1;
	if (len && send(fd, data, len, MSG_NOSIGNAL) != (ssize_t)len) {
		close(fd);
		return -1;
	}
	return fd;
}

static void play_stranger(const struct sockaddr_in *to)
{
	unsigned port = ntohs(to->sin_port);
	struct weft_sock_hello data = {.index = 0, .nsocks = 2, .gen = 1};
	unsigned char id[WEFT_HS_ID_BYTES] = {0}; /* a stranger does not know it */
	stranger_fds[0] =
	    stranger_dial(port, STRANGER_GARBAGE, WEFT_HS_SOCKET, NULL, 0, 1, NULL, 0);
	stranger_fds[1] =
	    stranger_dial(port, STRANGER_WRONG_KEY, WEFT_HS_SOCKET, id, 0, 1, &data, sizeof(data));
	stranger_fds[2] = stranger_dial(port, STRANGER_SILENT, WEFT_HS_SOCKET, NULL, 0, 1, NULL, 0);
	if (stranger_fds[2] >= 0)
		send(stranger_fds[2], "0123456789", 10, MSG_NOSIGNAL); /* a hello cut short */
	int fd = dial(to, NULL, 0);
	if (fd >= 0)
		close(fd);
}

int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	const struct sockaddr_in *in = (const struct sockaddr_in *)addr.__sockaddr_in__;
	if (stranger_armed && in->sin_family == AF_INET && in->sin_port != stranger_root.sin_port) {
		stranger_armed = false;
		play_stranger(in);
	}
	return raw_connect(fd, addr.__sockaddr__, len);
}

static int stranger_before_init(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	if (rank != 0)
		return 0;
	struct weft_uid uid;
	memcpy(&uid, id, sizeof(uid));
	memcpy(&stranger_root, &uid.addr, sizeof(stranger_root));
	stranger_armed = true;
	return 0;
}

static int body_stranger(weft_comm_t comm, int rank, int nranks, void *arg)
{
	if (rank == 0 && stranger_fds[0] < 0)
		return harness_fail("the stranger did not get to dial rank 1");
	if (rank == 1) {
		char path[256];
		snprintf(path, sizeof(path), "%s/sock_%d.log", (const char *)arg, (int)getpid());
		int drops = harness_count_in_file(path, "dropped a connection");
		if (drops < 3 || harness_count_in_file(path, "another communicator") < 1 ||
		    harness_count_in_file(path, "not a Weft handshake") < 1)
			return harness_fail("expected 3 dropped strangers in %s, found %d", path,
					    drops);
	}
	int ret = body_sizes(comm, rank, nranks, NULL);
	for (int i = 0; i < 4; i++)
		if (stranger_fds[i] >= 0)
			close(stranger_fds[i]);
	return ret;
}

START_TEST(test_stranger)
{
	char dir[] = "/tmp/weft_sock_XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char logenv[300];
	snprintf(logenv, sizeof(logenv), "WEFT_DEBUG_FILE=%s/sock_%%p.log", dir);
	const char *const env[] = {"WEFT_TRANSPORTS=socket",
				   "WEFT_SOCKET_CHUNK=64K",
				   "WEFT_DEBUG=WARN",
				   "WEFT_DEBUG_SUBSYS=NET",
				   logenv,
				   NULL};
	struct harness_job job = {.nranks = 2,
				  .env = env,
				  .body = body_stranger,
				  .arg = dir,
				  .timeout_s = JOB_TIMEOUT_S,
				  .before_init = stranger_before_init};
	struct harness_result res;
	harness_run_job(&job, &res);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* --- TCP_INFO, for the pacer --- */

static int body_tcp_info(weft_comm_t comm, int rank, int nranks, void *arg)
{
	if (body_sizes(comm, rank, nranks, NULL))
		return 1;
	struct weft_conn *conn = comm->peers[1 - rank].conn;
	struct weft_tp_signal sig[4], again[4];
	int n = conn->ops->signal.signals(conn, sig, 4);
	if (n != 2)
		return harness_fail("signals of %d sub-flows, expected the 2 sockets", n);
	for (int i = 0; i < n; i++) {
		if (sig[i].delivered == 0 || sig[i].bytes_acked == 0 || sig[i].rtt_us == 0)
			return harness_fail("socket %d: delivered %u, acked %llu, rtt %u us", i,
					    sig[i].delivered,
					    (unsigned long long)sig[i].bytes_acked, sig[i].rtt_us);
		if (sig[i].delivered_ce > sig[i].delivered)
			return harness_fail("more CE marks than segments");
	}
	/* Deltas: nothing moved since, so (almost) nothing is new. */
	if (conn->ops->signal.signals(conn, again, 1) != 1)
		return harness_fail("signals ignored max");
	if (again[0].delivered >= sig[0].delivered)
		return harness_fail("second query gave %u segments again (not a delta)",
				    again[0].delivered);
	return 0;
}

START_TEST(test_tcp_info)
{
	run_ok(2, NULL, body_tcp_info, NULL);
}
END_TEST

/* --- bad settings are named --- */

static int expect_ifname_error(int rank, int nranks, weft_status_t st, const char *msg,
			       double seconds, void *arg)
{
	if (st != WEFT_ERR_INVALID_ARG && st != WEFT_ERR_REMOTE)
		return harness_fail("init: %s: %s", weft_status_string(st), msg);
	if (!strstr(msg, "nosuchif0"))
		return harness_fail("init error \"%s\" does not name the interface", msg);
	return 0;
}

/* The bootstrap root also follows WEFT_SOCKET_IFNAME: set it only after
 * the id exists, so that only the transport sees the bad name. */
static int set_bad_ifname(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	return setenv("WEFT_SOCKET_IFNAME", "nosuchif0", 1) == 0 ? 0 : HARNESS_EXIT_SETUP;
}

START_TEST(test_bad_ifname)
{
	const char *const env[] = {"WEFT_TRANSPORTS=socket", NULL};
	struct harness_job job = {.nranks = 2,
				  .env = env,
				  .timeout_s = JOB_TIMEOUT_S,
				  .before_init = set_bad_ifname,
				  .init_failed = expect_ifname_error};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

static Suite *socket_suite(void)
{
	Suite *s = suite_create("socket");
	TCase *tc = tcase_create("data");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_tcp_info);
	suite_add_tcase(s, tc);
	TCase *tf = tcase_create("failures");
	tcase_set_timeout(tf, 60);
	tcase_add_test(tf, test_stranger);
	tcase_add_test(tf, test_bad_ifname);
	suite_add_tcase(s, tf);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(socket_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
