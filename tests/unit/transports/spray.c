/*
 * spray.c — the TCP transport's sub-flows under WEFT_SPRAY=adaptive:
 * forked ranks on loopback with four sockets per peer.
 *
 * Covered: AllReduce results at sizes from one element to several
 * fragments per socket, with sends on every socket at once and fragments
 * of later messages arriving before earlier ones are done; where the bytes
 * went when one sub-flow is slow (the kernel paces it: SO_MAX_PACING_RATE
 * on rank 0's socket 0) — sprayed, the slow socket carries far less than
 * its round-robin quarter; in round robin, exactly its quarter; and a
 * WEFT_SPRAY that differs between ranks, or is not a mode, named at init.
 *
 * The fragment is 64 KiB (the sprayed default). Everything binds and
 * connects to 127.0.0.1 only.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/comm.h"
#include "harness.h"
#include "transports/socket/socket.h"

#define NSOCKS	      4
#define JOB_TIMEOUT_S 40.0

static const char *const spray_env[] = {
    "WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo", "WEFT_SOCKET_NSOCKS=4",
    "WEFT_SPRAY=adaptive",    "WEFT_TIMEOUT=20",       NULL,
};
static const char *const rr_env[] = {
    "WEFT_TRANSPORTS=socket",
    "WEFT_SOCKET_IFNAME=lo",
    "WEFT_SOCKET_NSOCKS=4",
    "WEFT_SPRAY=rr",
    "WEFT_SOCKET_CHUNK=64K",
    "WEFT_TIMEOUT=20",
    NULL,
};

static struct weft_sock_conn *sock_conn(weft_comm_t comm, int peer)
{
	struct weft_conn *c = comm->peers[peer].conn;
	if (!c || c->ops != &weft_tp_socket_ops)
		return NULL;
	return weft_container_of(c, struct weft_sock_conn, base);
}

/* --- results --- */

static const size_t counts[] = {1, 1000, 16384, 16385, 100000, 262144 + 7, 1 << 20};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

static int body_allreduce(weft_comm_t comm, int rank, int nranks, void *arg)
{
	size_t max = counts[NCOUNTS - 1];
	float *in = malloc(max * sizeof(float)), *out = malloc(max * sizeof(float));
	if (!in || !out)
		return harness_fail("out of memory");
	for (int p = 0; p < nranks; p++)
		if (p != rank && !sock_conn(comm, p))
			return harness_fail("peer %d is not on the socket transport", p);
	for (size_t k = 0; k < NCOUNTS; k++) {
		size_t n = counts[k];
		for (size_t i = 0; i < n; i++)
			in[i] = (float)((i % 1000) + (size_t)rank * 3);
		memset(out, 0xee, n * sizeof(float));
		harness_progress("allreduce of %zu floats", n);
		weft_status_t st = weft_allreduce(in, out, n, WEFT_FLOAT32, WEFT_SUM, comm);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "allreduce of %zu floats", n);
		for (size_t i = 0; i < n; i++) {
			float want = (float)((i % 1000) * (size_t)nranks +
					     (size_t)(3 * nranks * (nranks - 1) / 2));
			if (out[i] != want)
				return harness_fail("%zu floats: element %zu is %g, expected %g", n,
						    i, (double)out[i], (double)want);
		}
	}
	free(in);
	free(out);
	return 0;
}

START_TEST(test_allreduce)
{
	struct harness_result res;
	harness_run(2 + _i, spray_env, body_allreduce, NULL, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* --- where the bytes go when one sub-flow is slow --- */

#define SLOW_BPS  (2u << 20) /* socket 0's pacing rate: 2 MB/s */
#define MSG_BYTES (4u << 20)
#define NMSGS	  8

static int body_weights(weft_comm_t comm, int rank, int nranks, void *arg)
{
	bool adaptive = *(const bool *)arg;
	struct weft_sock_conn *c = sock_conn(comm, 1 - rank);
	if (!c)
		return harness_fail("peer %d is not on the socket transport", 1 - rank);
	unsigned char *buf = malloc(MSG_BYTES);
	if (!buf)
		return harness_fail("out of memory");
	if (rank == 0) {
		uint64_t rate = SLOW_BPS;
		if (setsockopt(c->sock[0].fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate,
			       sizeof(rate)) != 0)
			return harness_fail("SO_MAX_PACING_RATE: %m");
	}
	for (int k = 0; k < NMSGS; k++) {
		weft_status_t st;
		if (rank == 0) {
			memset(buf, k + 1, MSG_BYTES);
			st = weft_send(buf, MSG_BYTES, WEFT_UINT8, 1, comm);
		} else {
			st = weft_recv(buf, MSG_BYTES, WEFT_UINT8, 0, comm);
			for (size_t i = 0; st == WEFT_SUCCESS && i < MSG_BYTES; i++)
				if (buf[i] != (unsigned char)(k + 1))
					return harness_fail("message %d: byte %zu is %u", k, i,
							    buf[i]);
		}
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "message %d", k);
	}
	free(buf);
	if (rank == 1)
		return 0;
	uint64_t total = 0;
	for (int s = 0; s < NSOCKS; s++)
		total += c->sock[s].tx_bytes;
	if (total != (uint64_t)NMSGS * MSG_BYTES)
		return harness_fail("sockets carried %llu bytes, sent %u",
				    (unsigned long long)total, NMSGS * MSG_BYTES);
	double share0 = (double)c->sock[0].tx_bytes / (double)total;
	char shares[128];
	snprintf(shares, sizeof(shares), "%.3f %.3f %.3f %.3f", share0,
		 (double)c->sock[1].tx_bytes / (double)total,
		 (double)c->sock[2].tx_bytes / (double)total,
		 (double)c->sock[3].tx_bytes / (double)total);
	fprintf(stderr, "%s: shares of the sockets (socket 0 slow): %s\n",
		adaptive ? "adaptive" : "rr", shares);
	/* Round robin places by length: a quarter each, the slow one too.
	 * Sprayed, the slow socket (2 MB/s against loopback's GB/s) takes
	 * few fragments: at most a tenth. Every other socket works, but
	 * their shares are not equal (whichever has room first takes the
	 * next fragment; 0.71/0.15/0.10 seen): at least 2 % each. */
	if (!adaptive)
		return c->sock[0].tx_bytes * NSOCKS == total
			   ? 0
			   : harness_fail("rr: shares %s, expected a quarter each", shares);
	if (share0 > 0.10)
		return harness_fail("adaptive: the slow socket carried %.3f of the bytes (%s)",
				    share0, shares);
	for (int s = 1; s < NSOCKS; s++)
		if ((double)c->sock[s].tx_bytes < 0.02 * (double)total)
			return harness_fail("adaptive: socket %d idle (%s)", s, shares);
	return 0;
}

START_TEST(test_weights)
{
	static const bool adaptive = true, rr = false;
	struct harness_result res;
	harness_run(2, _i ? rr_env : spray_env, body_weights, (void *)(_i ? &rr : &adaptive),
		    JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* --- bad or differing settings --- */

static int expect_spray_error(int rank, int nranks, weft_status_t st, const char *msg,
			      double seconds, void *arg)
{
	const char *want = arg;
	if (st == WEFT_SUCCESS)
		return harness_fail("init succeeded");
	if (!strstr(msg, want))
		return harness_fail("init error \"%s\" does not name '%s'", msg, want);
	return 0;
}

static int set_rank_spray(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	const char *value = arg;
	if (strcmp(value, "differ") == 0)
		return setenv("WEFT_SPRAY", rank == 0 ? "adaptive" : "rr", 1) == 0
			   ? 0
			   : HARNESS_EXIT_SETUP;
	return setenv("WEFT_SPRAY", value, 1) == 0 ? 0 : HARNESS_EXIT_SETUP;
}

START_TEST(test_bad_spray)
{
	/* Every rank says what is wrong: a mode that is none, or ranks that
	 * would cut messages differently. */
	static const char *const env[] = {"WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo",
					  "WEFT_TIMEOUT=10", NULL};
	const char *value = _i ? "differ" : "spiral";
	struct harness_job job = {.nranks = 2,
				  .env = env,
				  .timeout_s = JOB_TIMEOUT_S,
				  .arg = (void *)value,
				  .before_init = set_rank_spray,
				  .init_failed = expect_spray_error};
	job.arg = (void *)value;
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

static Suite *spray_suite(void)
{
	Suite *s = suite_create("spray");
	TCase *tc = tcase_create("spray");
	tcase_set_timeout(tc, 90);
	tcase_add_loop_test(tc, test_allreduce, 0, 2); /* 2 and 3 ranks */
	tcase_add_loop_test(tc, test_weights, 0, 2);   /* adaptive, then rr */
	tcase_add_loop_test(tc, test_bad_spray, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(spray_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
