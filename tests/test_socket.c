/*
 * test_socket.c — the TCP transport on its own data path: forked ranks with
 * WEFT_TRANSPORTS=socket on loopback exchange tagged messages through the
 * point-to-point layer and drive only the socket transport's progress.
 *
 * Covered: sizes 0, 1, 8, chunk-1, chunk, chunk+1 and striped multi-chunk
 * messages between every pair of 2..4 ranks; reduce receives with odd
 * element counts; many queued messages arriving in order; tag and length
 * mismatches; strangers with garbage on the listener during connect; a peer
 * killed mid-transfer (both directions); abort; TCP_INFO.
 *
 * The chunk is 64 KiB in these tests (WEFT_SOCKET_CHUNK) so that striped
 * messages stay small. Everything binds and connects to 127.0.0.1 only.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/p2p_msg.h"
#include "harness.h"
#include "reduce/reduce.h"
#include "stranger.h"
#include "transports/socket/socket.h"

#define CHUNK	      (64u << 10)
#define JOB_TIMEOUT_S 20.0
#define WAIT_S	      8.0

static const char *const sock_env[] = {
    "WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo", "WEFT_SOCKET_CHUNK=64K",
    "WEFT_SOCKET_NSOCKS=2",   "WEFT_TIMEOUT=10",       NULL,
};

static struct weft_tp *sock_tc(weft_comm_t comm)
{
	for (size_t i = 0; i < comm->ntps; i++)
		if (comm->tps[i] && comm->tps[i]->ops == &weft_tp_socket_ops)
			return comm->tps[i];
	return NULL;
}

/* Bytes moved so far of the oldest message in flight to or from @p peer. */
static size_t head_xferred(weft_comm_t comm, int peer)
{
	struct weft_sock_conn *c =
	    weft_container_of(comm->peers[peer].conn, struct weft_sock_conn, base);
	const struct weft_tp_req *r = c->sendq.q.head ? c->sendq.q.head : c->recvq.q.head;
	return r ? r->xferred : 0;
}

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

/* Drive the socket transport until every message is done or the time runs
 * out. Returns the first failed message's status, WEFT_ERR_TIMEOUT, or 0. */
static weft_status_t drive(weft_comm_t comm, struct weft_msg *const *msgs, int n, double limit_s)
{
	struct weft_tp *tc = sock_tc(comm);
	double end = harness_now() + limit_s;
	for (;;) {
		tc->ops->msg.progress(tc);
		weft_p2p_progress(comm); /* sends the pacing gate held back */
		int open = 0;
		for (int i = 0; i < n; i++) {
			if (!msgs[i]->done)
				open++;
			else if (msgs[i]->status != WEFT_SUCCESS)
				return msgs[i]->status;
		}
		if (!open)
			return WEFT_SUCCESS;
		if (harness_now() > end)
			return WEFT_ERR_TIMEOUT;
	}
}

/* Exchange a few bytes with every peer. A body that ends early on rank 0
 * calls this first: the bootstrap root lives in rank 0's process, and a
 * peer still finishing its init must not see it vanish. */
static int sync_peers(weft_comm_t comm)
{
	uint64_t out = 1, in[HARNESS_MAX_RANKS];
	struct weft_msg msgs[2 * HARNESS_MAX_RANKS];
	struct weft_msg *ptrs[2 * HARNESS_MAX_RANKS];
	int n = 0;
	for (int p = 0; p < comm->nranks; p++) {
		if (p == comm->rank)
			continue;
		msgs[n] = (struct weft_msg){.buf = &out, .len = sizeof(out), .tag = UINT32_MAX};
		msgs[n + 1] =
		    (struct weft_msg){.buf = &in[p], .len = sizeof(out), .tag = UINT32_MAX};
		if (weft_p2p_isend_msg(comm, p, &msgs[n]) != WEFT_SUCCESS ||
		    weft_p2p_irecv_msg(comm, p, &msgs[n + 1]) != WEFT_SUCCESS)
			return harness_fail("sync: post to %d failed", p);
		ptrs[n] = &msgs[n];
		ptrs[n + 1] = &msgs[n + 1];
		n += 2;
	}
	weft_status_t st = drive(comm, ptrs, n, WAIT_S);
	return st == WEFT_SUCCESS ? 0 : harness_fail_status(comm, st, "sync");
}

static unsigned char pattern(int from, int to, size_t i, unsigned salt)
{
	return (unsigned char)(from * 37 + to * 11 + salt * 101 + i * 7 + (i >> 9));
}

static void fill(unsigned char *buf, size_t len, int from, int to, unsigned salt)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(from, to, i, salt);
}

static int verify(const unsigned char *buf, size_t len, int from, int to, unsigned salt)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern(from, to, i, salt))
			return harness_fail(
			    "message %u from rank %d: byte %zu of %zu is %u, expected %u", salt,
			    from, i, len, buf[i], pattern(from, to, i, salt));
	return 0;
}

/* --- every size between every pair --- */

static const size_t sizes[] = {0, 1, 8, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5, 2 * CHUNK};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int body_sizes(weft_comm_t comm, int rank, int nranks, void *arg)
{
	if (check_socket_conns(comm))
		return 1;
	size_t total = 0;
	for (size_t k = 0; k < NSIZES; k++)
		total += sizes[k];
	int npeers = nranks - 1;
	unsigned char *sbuf = malloc(total * (size_t)npeers + 1);
	unsigned char *rbuf = malloc(total * (size_t)npeers + 1);
	struct weft_msg *msgs = calloc(2 * NSIZES * (size_t)npeers, sizeof(*msgs));
	struct weft_msg **ptrs = calloc(2 * NSIZES * (size_t)npeers, sizeof(*ptrs));
	if (!sbuf || !rbuf || !msgs || !ptrs)
		return harness_fail("out of memory");
	memset(rbuf, 0xee, total * (size_t)npeers);
	int n = 0;
	size_t off = 0;
	harness_progress("posting");
	for (int p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		for (size_t k = 0; k < NSIZES; k++) {
			struct weft_msg *s = &msgs[n], *r = &msgs[n + 1];
			fill(sbuf + off, sizes[k], rank, p, (unsigned)k);
			*s = (struct weft_msg){.buf = sbuf + off,
					       .len = sizes[k],
					       .tag = weft_p2p_tag(1, (uint32_t)k)};
			*r = (struct weft_msg){.buf = rbuf + off,
					       .len = sizes[k],
					       .tag = weft_p2p_tag(1, (uint32_t)k)};
			weft_status_t st = weft_p2p_isend_msg(comm, p, s);
			if (st == WEFT_SUCCESS)
				st = weft_p2p_irecv_msg(comm, p, r);
			if (st != WEFT_SUCCESS)
				return harness_fail_status(comm, st, "posting to %d", p);
			ptrs[n] = s;
			ptrs[n + 1] = r;
			n += 2;
			off += sizes[k];
		}
	}
	harness_progress("exchanging");
	weft_status_t st = drive(comm, ptrs, n, WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "exchange");
	off = 0;
	n = 0;
	for (int p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		for (size_t k = 0; k < NSIZES; k++, n += 2) {
			if (msgs[n].status != WEFT_SUCCESS || msgs[n + 1].status != WEFT_SUCCESS)
				return harness_fail("size %zu: status %d/%d", sizes[k],
						    msgs[n].status, msgs[n + 1].status);
			if (verify(rbuf + off, sizes[k], p, rank, (unsigned)k))
				return 1;
			off += sizes[k];
		}
	}
	free(sbuf);
	free(rbuf);
	free(msgs);
	free(ptrs);
	return 0;
}

static void run_ok(int nranks, const char *const *env, harness_body_fn body, void *arg)
{
	struct harness_result res;
	harness_run(nranks, env ? env : sock_env, body, arg, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}

START_TEST(test_sizes)
{
	run_ok(2 + _i, NULL, body_sizes, NULL);
}
END_TEST

START_TEST(test_sizes_one_socket)
{
	static const char *const env[] = {"WEFT_TRANSPORTS=socket", "WEFT_SOCKET_NSOCKS=1",
					  "WEFT_SOCKET_CHUNK=64K", NULL};
	run_ok(2, env, body_sizes, NULL);
}
END_TEST

/* --- reduce receives: odd element counts, fragments split anywhere --- */

static int body_reduce(weft_comm_t comm, int rank, int nranks, void *arg)
{
	static const size_t counts[] = {1, 7, CHUNK / 8 - 1, CHUNK / 8 + 3, 5 * CHUNK / 8 + 13};
	int peer = 1 - rank;
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		for (int dt = 0; dt < 2; dt++) {
			weft_datatype_t dtype = dt ? WEFT_FLOAT64 : WEFT_INT32;
			size_t unit = dt ? 8 : 4, count = counts[k], len = count * unit;
			char *mine = malloc(len + 1), *theirs = malloc(len + 1),
			     *out = malloc(len + 1);
			if (!mine || !theirs || !out)
				return harness_fail("out of memory");
			for (size_t i = 0; i < count; i++) {
				if (dt) {
					((double *)mine)[i] = (double)(i % 1000) + rank * 0.5;
					((double *)theirs)[i] = (double)(i % 1000) + peer * 0.5;
				} else {
					((int32_t *)mine)[i] =
					    (int32_t)(i * 3 + (size_t)rank * 1000);
					((int32_t *)theirs)[i] =
					    (int32_t)(i * 3 + (size_t)peer * 1000);
				}
			}
			uint64_t tag = weft_p2p_tag(2 + k, (uint32_t)dt);
			struct weft_msg s = {.buf = mine, .len = len, .tag = tag};
			struct weft_msg r = {.buf = out,
					     .len = len,
					     .tag = tag,
					     .unit = unit,
					     .reduce = weft_reduce_kernel(dtype, WEFT_SUM),
					     .local = mine};
			weft_status_t st = weft_p2p_isend_msg(comm, peer, &s);
			if (st == WEFT_SUCCESS)
				st = weft_p2p_irecv_msg(comm, peer, &r);
			struct weft_msg *both[] = {&s, &r};
			if (st == WEFT_SUCCESS)
				st = drive(comm, both, 2, WAIT_S);
			if (st != WEFT_SUCCESS)
				return harness_fail_status(comm, st, "reduce of %zu elements",
							   count);
			for (size_t i = 0; i < count; i++) {
				bool ok = dt ? ((double *)out)[i] == 2.0 * (double)(i % 1000) + 0.5
					     : ((int32_t *)out)[i] == (int32_t)(i * 6 + 1000);
				if (!ok)
					return harness_fail(
					    "reduce %s count %zu: element %zu wrong",
					    dt ? "fp64" : "int32", count, i);
			}
			free(mine);
			free(theirs);
			free(out);
		}
	}
	return 0;
}

START_TEST(test_reduce_odd)
{
	run_ok(2, NULL, body_reduce, NULL);
}
END_TEST

/* --- many queued messages keep their order --- */

#define NQUEUED 300

static size_t queued_len(size_t i)
{
	return i % 50 == 49 ? CHUNK + i : (i * 37) % 3001;
}

static int body_order(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int peer = 1 - rank;
	static struct weft_msg s[NQUEUED], r[NQUEUED];
	static struct weft_msg *ptrs[2 * NQUEUED];
	unsigned char *sbuf[NQUEUED], *rbuf[NQUEUED];
	for (size_t i = 0; i < NQUEUED; i++) {
		size_t len = queued_len(i);
		sbuf[i] = malloc(len + 1);
		rbuf[i] = malloc(len + 1);
		if (!sbuf[i] || !rbuf[i])
			return harness_fail("out of memory");
		fill(sbuf[i], len, rank, peer, (unsigned)i);
		s[i] = (struct weft_msg){
		    .buf = sbuf[i], .len = len, .tag = weft_p2p_tag(9, (uint32_t)i)};
		r[i] = (struct weft_msg){
		    .buf = rbuf[i], .len = len, .tag = weft_p2p_tag(9, (uint32_t)i)};
		/* Rank 1 posts its receives before its sends, rank 0 after. */
		weft_status_t st = rank ? weft_p2p_irecv_msg(comm, peer, &r[i])
					: weft_p2p_isend_msg(comm, peer, &s[i]);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "post %zu", i);
		ptrs[2 * i] = &s[i];
		ptrs[2 * i + 1] = &r[i];
	}
	for (size_t i = 0; i < NQUEUED; i++) {
		weft_status_t st = rank ? weft_p2p_isend_msg(comm, peer, &s[i])
					: weft_p2p_irecv_msg(comm, peer, &r[i]);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "post %zu", i);
	}
	weft_status_t st = drive(comm, ptrs, 2 * NQUEUED, WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "queued exchange");
	for (size_t i = 0; i < NQUEUED; i++) {
		if (verify(rbuf[i], queued_len(i), peer, rank, (unsigned)i))
			return 1;
		free(sbuf[i]);
		free(rbuf[i]);
	}
	return 0;
}

START_TEST(test_order)
{
	run_ok(2, NULL, body_order, NULL);
}
END_TEST

/* --- tag and length mismatches --- */

/* Rank 0 sends tag 5 with 100 bytes to ranks 1 and 2. Rank 1 expects tag 6,
 * rank 2 expects 120 bytes. */
static int body_mismatch(weft_comm_t comm, int rank, int nranks, void *arg)
{
	char buf[128] = {0};
	if (sync_peers(comm))
		return 1;
	if (rank == 0) {
		struct weft_msg s1 = {.buf = buf, .len = 100, .tag = 5}, s2 = s1;
		weft_p2p_isend_msg(comm, 1, &s1);
		weft_p2p_isend_msg(comm, 2, &s2);
		struct weft_msg *both[] = {&s1, &s2};
		weft_status_t st = drive(comm, both, 2, WAIT_S);
		return st == WEFT_SUCCESS ? 0 : harness_fail_status(comm, st, "sends");
	}
	struct weft_msg r = {.buf = buf, .len = rank == 1 ? 100 : 120, .tag = rank == 1 ? 6 : 5};
	weft_p2p_irecv_msg(comm, 0, &r);
	struct weft_msg *one[] = {&r};
	weft_status_t st = drive(comm, one, 1, WAIT_S);
	if (st != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, st, "expected WEFT_ERR_REMOTE");
	const char *msg = weft_comm_last_error(comm);
	const char *want1 = rank == 1 ? "tag 0x5" : "100 bytes";
	const char *want2 = rank == 1 ? "tag 0x6" : "120 bytes";
	if (!strstr(msg, want1) || !strstr(msg, want2) || !strstr(msg, "peer rank 0"))
		return harness_fail("error \"%s\" does not name '%s' and '%s'", msg, want1, want2);
	return 0;
}

START_TEST(test_mismatch)
{
	run_ok(3, NULL, body_mismatch, NULL);
}
END_TEST

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
	struct weft_sock_hello data = {.index = 0, .nsocks = 2};
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

/* --- a peer killed mid-transfer --- */

#define BIG (8u << 20)

/* arg: the rank that dies; it dies after part of the big message moved. */
static int body_killed(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int victim = *(const int *)arg, peer = 1 - rank;
	if (sync_peers(comm))
		return 1;
	char *buf = malloc(BIG);
	char small[8];
	if (!buf)
		return harness_fail("out of memory");
	memset(buf, 1, BIG);
	struct weft_msg big = {.buf = buf, .len = BIG, .tag = 77};
	struct weft_msg r = {.buf = small, .len = sizeof(small), .tag = 78};
	/* Rank 0 sends the big message, rank 1 receives it; both wait for a
	 * small one that never comes. */
	weft_status_t st =
	    rank == 0 ? weft_p2p_isend_msg(comm, peer, &big) : weft_p2p_irecv_msg(comm, peer, &big);
	if (st == WEFT_SUCCESS)
		st = weft_p2p_irecv_msg(comm, peer, &r);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "post");
	struct weft_tp *tc = sock_tc(comm);
	if (rank == victim) {
		double end = harness_now() + WAIT_S;
		/* Moved some of it, or all: loopback's socket buffers can take
		 * the whole message between two looks, and then the head is
		 * the small receive, which never moves. */
		while (!big.done && head_xferred(comm, peer) == 0 && harness_now() < end) {
			tc->ops->msg.progress(tc);
			weft_p2p_progress(comm);
		}
		harness_progress("killing myself after %zu bytes%s", head_xferred(comm, peer),
				 big.done ? " (the big message done)" : "");
		raise(SIGKILL);
	}
	double t0 = harness_now();
	struct weft_msg *both[] = {&big, &r};
	st = drive(comm, both, 2, WAIT_S);
	double took = harness_now() - t0;
	if (st != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, st, "expected WEFT_ERR_REMOTE");
	if (took > 5.0)
		return harness_fail("the peer's death took %.1f s to notice", took);
	if (!r.done || r.status != WEFT_ERR_REMOTE)
		return harness_fail("the pending receive was not failed");
	const char *msg = weft_comm_last_error(comm);
	if (!strstr(msg, "peer rank 1") && !strstr(msg, "peer rank 0"))
		return harness_fail("error \"%s\" does not name the peer", msg);
	free(buf);
	return 0;
}

START_TEST(test_killed)
{
	int victim = _i;
	struct harness_result res;
	harness_run(2, sock_env, body_killed, &victim, JOB_TIMEOUT_S, &res);
	int survivor = 1 - victim;
	ck_assert_msg(res.rank[survivor].end == HARNESS_EXITED && res.rank[survivor].code == 0,
		      "survivor: %s", res.summary);
	ck_assert_msg(res.rank[victim].end == HARNESS_SIGNALED, "victim did not die: %s",
		      res.summary);
}
END_TEST

/* --- abort fails what is queued; the peer sees the connection close --- */

static int body_abort(weft_comm_t comm, int rank, int nranks, void *arg)
{
	char buf[64];
	if (sync_peers(comm))
		return 1;
	struct weft_msg r = {.buf = buf, .len = sizeof(buf), .tag = 1};
	weft_status_t st = weft_p2p_irecv_msg(comm, 1 - rank, &r);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "post");
	struct weft_tp *tc = sock_tc(comm);
	if (rank == 0) {
		tc->ops->life.abort(tc);
		if (!r.done || r.status != WEFT_ERR_ABORTED)
			return harness_fail("abort left the receive %s",
					    r.done ? "failed wrongly" : "queued");
		struct weft_msg late = {.buf = buf, .len = 1, .tag = 2};
		if (weft_p2p_isend_msg(comm, 1, &late) != WEFT_ERR_ABORTED || !late.done)
			return harness_fail("a send after abort was accepted");
		return 0;
	}
	struct weft_msg *one[] = {&r};
	st = drive(comm, one, 1, WAIT_S);
	return st == WEFT_ERR_REMOTE ? 0
				     : harness_fail_status(comm, st, "expected WEFT_ERR_REMOTE");
}

START_TEST(test_abort)
{
	run_ok(2, NULL, body_abort, NULL);
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
	tcase_add_loop_test(tc, test_sizes, 0, 3); /* 2, 3 and 4 ranks */
	tcase_add_test(tc, test_sizes_one_socket);
	tcase_add_test(tc, test_reduce_odd);
	tcase_add_test(tc, test_order);
	tcase_add_test(tc, test_mismatch);
	tcase_add_test(tc, test_tcp_info);
	suite_add_tcase(s, tc);
	TCase *tf = tcase_create("failures");
	tcase_set_timeout(tf, 60);
	tcase_add_test(tf, test_stranger);
	tcase_add_loop_test(tf, test_killed, 0, 2); /* rank 0 dies, then rank 1 */
	tcase_add_test(tf, test_abort);
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
