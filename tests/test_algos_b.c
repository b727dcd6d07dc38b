/*
 * test_algos_b.c — tree AllReduce, tree/ring Broadcast, tree Reduce,
 * pairwise AlltoAll and direct Send/Recv, through the public API, each
 * algorithm forced with WEFT_ALGO.
 *
 * One job per (rank count 1..8, configuration) runs every case in turn, so
 * the suite forks little: counts 0, 1, 7, nranks-1, 4099 and a multi-chunk
 * one; roots 0, last and middle; a rotation of datatypes and ops that meets
 * every datatype and every op (avg, fp16 and bf16 included) at every count;
 * out of place, sendbuf == recvbuf and WEFT_IN_PLACE. Results are exact
 * (harness inputs), guard bytes around outputs must survive, out-of-place
 * inputs must be unchanged. Send/recv: pairs in both directions, blocking;
 * rings with isend/irecv in a group and with blocking calls in a group;
 * several messages to one peer arriving in call order. A send and a
 * receive of different lengths must fail with WEFT_ERR_REMOTE naming both
 * lengths, within 5 s (not by timing out), over shm and socket.
 *
 * Configurations: the default shm transport; shm with 4 KiB slots (many
 * chunks: windows, the two trees sharing links, staging-slot reuse);
 * socket over lo at 2 and 3 ranks. The tree shapes the algorithms use
 * are checked for consistency for 1..64 ranks without forking.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithms/patterns/shape.h"
#include "harness.h"

#define BIG_COUNT	   ((size_t)300001)
#define MAX_FAILURES_SHOWN 6
#define JOB_TIMEOUT_S	   120.0

enum form { FORM_OUT, FORM_SAME, FORM_IN_PLACE, FORM_COUNT };
static const char *const form_names[FORM_COUNT] = {"out-of-place", "sendbuf==recvbuf",
						   "WEFT_IN_PLACE"};

struct ctx {
	weft_comm_t comm;
	int rank, nranks;
	unsigned char *send, *recv, *want, *orig; /* data starts; guards around send/recv */
	size_t cap;
	int failures;
	unsigned salt;
	bool small; /* fewer dtype/op samples (oversubscribed jobs) */
};

static bool ctx_alloc(struct ctx *c, size_t cap)
{
	c->cap = cap;
	unsigned char *s = malloc(cap + 2 * HARNESS_GUARD_BYTES);
	unsigned char *r = malloc(cap + 2 * HARNESS_GUARD_BYTES);
	c->want = malloc(cap);
	c->orig = malloc(cap);
	c->send = s ? s + HARNESS_GUARD_BYTES : NULL;
	c->recv = r ? r + HARNESS_GUARD_BYTES : NULL;
	return s && r && c->want && c->orig;
}

static void ctx_free(struct ctx *c)
{
	if (c->send)
		free(c->send - HARNESS_GUARD_BYTES);
	if (c->recv)
		free(c->recv - HARNESS_GUARD_BYTES);
	free(c->want);
	free(c->orig);
}

static void guards_fill(unsigned char *data, size_t bytes)
{
	harness_guard_fill(data - HARNESS_GUARD_BYTES, HARNESS_GUARD_BYTES);
	harness_guard_fill(data + bytes, HARNESS_GUARD_BYTES);
}

static bool guards_ok(const unsigned char *data, size_t bytes)
{
	return harness_guard_check(data - HARNESS_GUARD_BYTES, HARNESS_GUARD_BYTES) < 0 &&
	       harness_guard_check(data + bytes, HARNESS_GUARD_BYTES) < 0;
}

/* 1 = wrong (go on), 2 = error status (stop: the communicator may be dead). */
static int wrong(struct ctx *c, const char *name, const char *why)
{
	if (++c->failures <= MAX_FAILURES_SHOWN)
		harness_fail("%s: %s", name, why);
	return 1;
}

static int check_out(struct ctx *c, const char *name, const unsigned char *got, size_t count,
		     weft_datatype_t dt)
{
	char why[256] = "";
	if (harness_compare(got, c->want, count, dt, why, sizeof(why)) != SIZE_MAX)
		return wrong(c, name, why);
	if (!guards_ok(got, count * harness_dtype_size(dt)))
		return wrong(c, name, "a guard around the output was written");
	return 0;
}

static int check_input_kept(struct ctx *c, const char *name, size_t bytes)
{
	if (!guards_ok(c->send, bytes))
		return wrong(c, name, "a guard around sendbuf was written");
	if (memcmp(c->send, c->orig, bytes) != 0)
		return wrong(c, name, "sendbuf was modified");
	return 0;
}

/* --- AllReduce ---------------------------------------------------------- */

static int allreduce_case(struct ctx *c, size_t count, weft_datatype_t dt, weft_op_t op,
			  enum form form)
{
	char name[160];
	snprintf(name, sizeof(name), "allreduce nranks %d %s %s count %zu %s", c->nranks,
		 harness_dtype_name(dt), harness_op_name(op), count, form_names[form]);
	harness_progress("%s", name);
	size_t bytes = count * harness_dtype_size(dt);
	unsigned salt = ++c->salt;
	unsigned char *input = form == FORM_OUT ? c->send : c->recv;
	guards_fill(c->send, bytes);
	guards_fill(c->recv, bytes);
	harness_ar_input(input, count, dt, op, c->rank, c->nranks, salt);
	if (form == FORM_OUT) {
		memset(c->recv, 0xcd, bytes);
		memcpy(c->orig, c->send, bytes);
	}
	const void *sendarg = form == FORM_OUT	  ? c->send
			      : form == FORM_SAME ? c->recv
						  : WEFT_IN_PLACE;
	weft_status_t st = weft_allreduce(sendarg, c->recv, count, dt, op, c->comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(c->comm, st, "%s", name), 2;
	harness_ar_expected(c->want, count, dt, op, c->nranks, salt);
	int r = check_out(c, name, c->recv, count, dt);
	if (!r && form == FORM_OUT)
		r = check_input_kept(c, name, bytes);
	return r;
}

/* --- Reduce --------------------------------------------------------------- */

static int reduce_case(struct ctx *c, size_t count, weft_datatype_t dt, weft_op_t op,
		       enum form form, int root)
{
	char name[160];
	snprintf(name, sizeof(name), "reduce nranks %d root %d %s %s count %zu %s", c->nranks, root,
		 harness_dtype_name(dt), harness_op_name(op), count, form_names[form]);
	harness_progress("%s", name);
	size_t bytes = count * harness_dtype_size(dt);
	unsigned salt = ++c->salt;
	bool me = c->rank == root;
	/* Non-roots: input in sendbuf, recvbuf NULL (the API allows it). */
	enum form f = me ? form : FORM_OUT;
	unsigned char *input = f == FORM_OUT ? c->send : c->recv;
	guards_fill(c->send, bytes);
	guards_fill(c->recv, bytes);
	harness_ar_input(input, count, dt, op, c->rank, c->nranks, salt);
	memcpy(c->orig, c->send, bytes);
	if (me && f == FORM_OUT)
		memset(c->recv, 0xcd, bytes);
	const void *sendarg = f == FORM_OUT ? c->send : f == FORM_SAME ? c->recv : WEFT_IN_PLACE;
	weft_status_t st = weft_reduce(sendarg, me ? c->recv : NULL, count, dt, op, root, c->comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(c->comm, st, "%s", name), 2;
	int r = 0;
	if (me) {
		harness_ar_expected(c->want, count, dt, op, c->nranks, salt);
		r = check_out(c, name, c->recv, count, dt);
	}
	if (!r && f == FORM_OUT)
		r = check_input_kept(c, name, bytes);
	return r;
}

/* --- Broadcast ------------------------------------------------------------ */

static int broadcast_case(struct ctx *c, size_t count, weft_datatype_t dt, enum form form, int root)
{
	char name[160];
	snprintf(name, sizeof(name), "broadcast nranks %d root %d %s count %zu %s", c->nranks, root,
		 harness_dtype_name(dt), count, form_names[form]);
	harness_progress("%s", name);
	size_t bytes = count * harness_dtype_size(dt);
	unsigned salt = ++c->salt;
	bool me = c->rank == root;
	guards_fill(c->send, bytes);
	guards_fill(c->recv, bytes);
	harness_ag_input(c->want, count, dt, root, salt);
	const void *sendarg = NULL;
	if (me && form == FORM_OUT) {
		memcpy(c->send, c->want, bytes);
		memcpy(c->orig, c->send, bytes);
		memset(c->recv, 0xcd, bytes);
		sendarg = c->send;
	} else if (me) {
		memcpy(c->recv, c->want, bytes);
		sendarg = form == FORM_SAME ? c->recv : WEFT_IN_PLACE;
	} else {
		memset(c->recv, 0xcd, bytes);
	}
	weft_status_t st = weft_broadcast(sendarg, c->recv, count, dt, root, c->comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(c->comm, st, "%s", name), 2;
	int r = check_out(c, name, c->recv, count, dt);
	if (!r && me && form == FORM_OUT)
		r = check_input_kept(c, name, bytes);
	return r;
}

/* --- AlltoAll ------------------------------------------------------------- */

static unsigned a2a_salt(unsigned salt, int from, int to)
{
	return salt * 4096u + (unsigned)from * 64u + (unsigned)to;
}

static int alltoall_case(struct ctx *c, size_t count, weft_datatype_t dt)
{
	char name[160];
	snprintf(name, sizeof(name), "alltoall nranks %d %s count %zu", c->nranks,
		 harness_dtype_name(dt), count);
	harness_progress("%s", name);
	size_t esz = harness_dtype_size(dt), block = count * esz, bytes = block * (size_t)c->nranks;
	unsigned salt = ++c->salt;
	guards_fill(c->send, bytes);
	guards_fill(c->recv, bytes);
	for (int j = 0; j < c->nranks; j++) {
		harness_ag_input(c->send + (size_t)j * block, count, dt, c->rank,
				 a2a_salt(salt, c->rank, j));
		harness_ag_input(c->want + (size_t)j * block, count, dt, j,
				 a2a_salt(salt, j, c->rank));
	}
	memcpy(c->orig, c->send, bytes);
	memset(c->recv, 0xcd, bytes);
	weft_status_t st = weft_alltoall(c->send, c->recv, count, dt, c->comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(c->comm, st, "%s", name), 2;
	int r = check_out(c, name, c->recv, count * (size_t)c->nranks, dt);
	if (!r)
		r = check_input_kept(c, name, bytes);
	return r;
}

/* --- Send / Recv ---------------------------------------------------------- */

static unsigned p2p_salt(unsigned salt, int from, int to, int k)
{
	return salt * 4096u + (unsigned)from * 64u + (unsigned)to + (unsigned)k * 7u;
}

/* Pairs (0,1), (2,3), ...: even sends then receives, odd the reverse. */
static int pairs_case(struct ctx *c, size_t count, weft_datatype_t dt)
{
	char name[160];
	snprintf(name, sizeof(name), "send/recv pairs nranks %d %s count %zu", c->nranks,
		 harness_dtype_name(dt), count);
	harness_progress("%s", name);
	unsigned salt = ++c->salt;
	int peer = c->rank ^ 1;
	if (peer >= c->nranks)
		return 0;
	size_t bytes = count * harness_dtype_size(dt);
	harness_ag_input(c->send, count, dt, c->rank, p2p_salt(salt, c->rank, peer, 0));
	memcpy(c->orig, c->send, bytes);
	guards_fill(c->recv, bytes);
	memset(c->recv, 0xcd, bytes);
	weft_status_t st;
	if (c->rank % 2 == 0) {
		st = weft_send(c->send, count, dt, peer, c->comm);
		if (st == WEFT_SUCCESS)
			st = weft_recv(c->recv, count, dt, peer, c->comm);
	} else {
		st = weft_recv(c->recv, count, dt, peer, c->comm);
		if (st == WEFT_SUCCESS)
			st = weft_send(c->send, count, dt, peer, c->comm);
	}
	if (st != WEFT_SUCCESS)
		return harness_fail_status(c->comm, st, "%s", name), 2;
	harness_ag_input(c->want, count, dt, peer, p2p_salt(salt, peer, c->rank, 0));
	int r = check_out(c, name, c->recv, count, dt);
	if (!r && memcmp(c->send, c->orig, bytes) != 0)
		r = wrong(c, name, "the send buffer was modified");
	return r;
}

/* A ring: NMSG messages to the next rank and from the previous one, all in
 * one group; non-blocking calls or blocking ones, by @p blocking. They must
 * arrive in call order. */
#define NMSG 3
static int ring_case(struct ctx *c, size_t count, weft_datatype_t dt, bool blocking)
{
	char name[160];
	snprintf(name, sizeof(name), "send/recv ring (%s, group) nranks %d %s count %zu",
		 blocking ? "blocking" : "isend/irecv", c->nranks, harness_dtype_name(dt), count);
	harness_progress("%s", name);
	if (c->nranks < 2)
		return 0;
	unsigned salt = ++c->salt;
	int n = c->nranks, next = (c->rank + 1) % n, prev = (c->rank + n - 1) % n;
	size_t bytes = count * harness_dtype_size(dt);
	for (int k = 0; k < NMSG; k++) {
		harness_ag_input(c->send + (size_t)k * bytes, count, dt, c->rank,
				 p2p_salt(salt, c->rank, next, k));
		harness_ag_input(c->want + (size_t)k * bytes, count, dt, prev,
				 p2p_salt(salt, prev, c->rank, k));
	}
	guards_fill(c->recv, NMSG * bytes);
	memset(c->recv, 0xcd, NMSG * bytes);
	weft_request_t req[2 * NMSG] = {0};
	weft_status_t st = weft_group_start();
	for (int k = 0; k < NMSG && st == WEFT_SUCCESS; k++) {
		if (blocking) {
			st = weft_send(c->send + (size_t)k * bytes, count, dt, next, c->comm);
			if (st == WEFT_SUCCESS)
				st = weft_recv(c->recv + (size_t)k * bytes, count, dt, prev,
					       c->comm);
		} else {
			st = weft_isend(c->send + (size_t)k * bytes, count, dt, next, c->comm,
					&req[2 * k]);
			if (st == WEFT_SUCCESS)
				st = weft_irecv(c->recv + (size_t)k * bytes, count, dt, prev,
						c->comm, &req[2 * k + 1]);
		}
	}
	weft_status_t end = weft_group_end();
	if (st == WEFT_SUCCESS)
		st = end;
	for (int k = 0; k < 2 * NMSG; k++) {
		weft_status_t w = weft_wait(&req[k]);
		if (st == WEFT_SUCCESS)
			st = w;
	}
	if (st != WEFT_SUCCESS)
		return harness_fail_status(c->comm, st, "%s", name), 2;
	return check_out(c, name, c->recv, NMSG * count, dt);
}

/* --- The matrix ------------------------------------------------------------ */

enum colls {
	DO_ALLREDUCE = 1 << 0,
	DO_REDUCE = 1 << 1,
	DO_BROADCAST = 1 << 2,
	DO_ALLTOALL = 1 << 3,
	DO_P2P = 1 << 4,
	DO_ALL = 0x1f,
};

struct job {
	unsigned colls;
	bool big;
};

/* The (dtype, op) samples for count index @p ci: every dtype once (op in
 * rotation) and every op once (dtype in rotation), shifted per count. */
static int samples(size_t ci, bool small, weft_datatype_t dt[], weft_op_t op[])
{
	int k = 0;
	for (int d = 0; d < WEFT_DATATYPE_COUNT; d++) {
		if (small && (d + (int)ci) % 2)
			continue;
		dt[k] = (weft_datatype_t)d;
		op[k++] = (weft_op_t)((d + (int)ci) % WEFT_OP_COUNT);
	}
	for (int o = 0; o < WEFT_OP_COUNT; o++) {
		dt[k] = (weft_datatype_t)((o * 3 + (int)ci + 1) % WEFT_DATATYPE_COUNT);
		op[k++] = (weft_op_t)o;
	}
	return k;
}

static int body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct job *job = arg;
	struct ctx c = {.comm = comm, .rank = rank, .nranks = nranks, .small = nranks > 4};
	if (!ctx_alloc(&c, (BIG_COUNT + 64) * 8 * NMSG)) {
		ctx_free(&c);
		return harness_fail("out of memory");
	}
	size_t counts[] = {0, 1, 7, (size_t)nranks - 1, 4099, BIG_COUNT};
	size_t ncounts = job->big ? 6 : 5;
	int roots[] = {0, nranks - 1, nranks / 2};
	int r = 0;
	for (size_t ci = 0; ci < ncounts && r < 2; ci++) {
		size_t count = counts[ci];
		if (ci == 3 && (count == 0 || count == 1 || count == 7))
			continue;
		bool big = ci == 5;
		weft_datatype_t dt[WEFT_DATATYPE_COUNT + WEFT_OP_COUNT];
		weft_op_t op[WEFT_DATATYPE_COUNT + WEFT_OP_COUNT];
		int ns = samples(ci, c.small || big, dt, op);
		if (big)
			ns = 3;
		for (int s = 0; s < ns && r < 2; s++) {
			enum form f = (enum form)((ci + (size_t)s) % FORM_COUNT);
			int root = roots[((size_t)s + ci) % 3];
			if (job->colls & DO_ALLREDUCE)
				r |= allreduce_case(&c, count, dt[s], op[s], f);
			if ((job->colls & DO_REDUCE) && r < 2)
				r |= reduce_case(&c, count, dt[s], op[s], f, root);
			if ((job->colls & DO_BROADCAST) && r < 2 && s < 4)
				r |= broadcast_case(&c, count, dt[s], f, root);
			if ((job->colls & DO_ALLTOALL) && r < 2 && s < 2)
				r |= alltoall_case(&c, big ? count / 8 : count, dt[s]);
			if ((job->colls & DO_P2P) && r < 2 && s < 2) {
				r |= pairs_case(&c, count, dt[s]);
				if (r < 2)
					r |= ring_case(&c, count, dt[s], s % 2 == 0);
			}
		}
	}
	ctx_free(&c);
	if (c.failures > MAX_FAILURES_SHOWN)
		harness_fail("... %d wrong cases in all", c.failures);
	return r;
}

#define ALGOS "allreduce:tree;reduce:tree;alltoall:pairwise;send:direct;recv:direct"

static void run_job(int nranks, const char *const *env, const char *label, struct job job)
{
	struct harness_result res;
	harness_run(nranks, env, body, &job, JOB_TIMEOUT_S, &res);
	printf("algos_b %s nranks %d: %.1f s\n", label, nranks, res.seconds);
	fflush(stdout);
	ck_assert_msg(res.ok, "%s, nranks %d:\n%s", label, nranks, res.summary);
}

START_TEST(shm_all)
{
	const char *const env[] = {"WEFT_TIMEOUT=30", "WEFT_ALGO=" ALGOS ";broadcast:tree", NULL};
	run_job(_i, env, "shm, broadcast:tree", (struct job){.colls = DO_ALL, .big = true});
}
END_TEST

static const int ring_nranks[] = {1, 2, 3, 5, 8};

START_TEST(shm_broadcast_ring)
{
	const char *const env[] = {"WEFT_TIMEOUT=30", "WEFT_ALGO=broadcast:ring", NULL};
	run_job(ring_nranks[_i], env, "shm, broadcast:ring",
		(struct job){.colls = DO_BROADCAST, .big = true});
}
END_TEST

/* 4 KiB chunks: hundreds per call, so windows wrap, the two trees of the
 * allreduce share links for long, reduce reuses its staging slots. */
static const int small_chunk_nranks[] = {2, 3, 5, 8};

START_TEST(shm_small_chunks)
{
	const char *const env[] = {"WEFT_TIMEOUT=30", "WEFT_SHM_SLOT_BYTES=4096",
				   "WEFT_ALGO=" ALGOS ";broadcast:ring", NULL};
	run_job(small_chunk_nranks[_i], env, "shm 4K slots",
		(struct job){.colls = DO_ALLREDUCE | DO_REDUCE | DO_BROADCAST, .big = true});
}
END_TEST

static const int socket_nranks[] = {2, 3};

START_TEST(socket_all)
{
	const char *const env[] = {"WEFT_TIMEOUT=30", "WEFT_TRANSPORTS=socket",
				   "WEFT_SOCKET_IFNAME=lo", "WEFT_ALGO=" ALGOS ";broadcast:tree",
				   NULL};
	run_job(socket_nranks[_i], env, "socket", (struct job){.colls = DO_ALL, .big = true});
}
END_TEST

/* Rank 0 sends 5 elements, rank 1 posts a receive of 7: rank 1 must fail
 * with WEFT_ERR_REMOTE within 5 s (WEFT_TIMEOUT is 30: a timeout does not
 * count) and a message naming both lengths; rank 0 may succeed (its bytes
 * left) and waits for rank 1's verdict, so that its exit cannot be what
 * rank 1 reports instead. */
static int mismatch_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int32_t buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	volatile int *done = harness_shared();
	harness_progress("length mismatch, rank %d", rank);
	if (rank == 0) {
		weft_status_t st = weft_send(buf, 5, WEFT_INT32, 1, comm);
		if (st != WEFT_SUCCESS && st != WEFT_ERR_REMOTE)
			return harness_fail_status(comm, st, "send of 5 elements");
		for (double t0 = harness_now(); !*done && harness_now() - t0 < 10;)
			usleep(1000);
		return 0;
	}
	double t0 = harness_now();
	weft_status_t st = weft_recv(buf, 7, WEFT_INT32, 0, comm);
	double took = harness_now() - t0;
	*done = 1;
	const char *msg = weft_comm_last_error(comm);
	if (st != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, st, "a receive of 7 elements met a send of 5");
	if (took > 5)
		return harness_fail("the length mismatch took %.1f s to fail", took);
	if (!strstr(msg, "20 bytes") || !strstr(msg, "28 bytes"))
		return harness_fail("the message does not name both lengths (20 and 28 bytes): %s",
				    msg);
	return 0;
}

START_TEST(p2p_length_mismatch)
{
	const char *const shm[] = {"WEFT_TIMEOUT=30", "WEFT_ALGO=send:direct;recv:direct", NULL};
	const char *const socket[] = {"WEFT_TIMEOUT=30", "WEFT_ALGO=send:direct;recv:direct",
				      "WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo", NULL};
	struct harness_result res;
	harness_run(2, _i ? socket : shm, mismatch_body, NULL, 30, &res);
	printf("algos_b length mismatch over %s: %.1f s\n", _i ? "socket" : "shm", res.seconds);
	ck_assert_msg(res.ok, "length mismatch over %s:\n%s", _i ? "socket" : "shm", res.summary);
}
END_TEST

/* --- Tree shapes, no I/O --------------------------------------------------- */

static void check_shape(weft_shape_fn shape, const char *what, int n)
{
	int parent[64], child[64][WEFT_TREE_MAX_CHILDREN], roots = 0;
	for (int v = 0; v < n; v++) {
		shape(n, v, &parent[v], child[v]);
		ck_assert_msg(parent[v] >= -1 && parent[v] < n && parent[v] != v,
			      "%s n %d v %d: parent %d", what, n, v, parent[v]);
		roots += parent[v] < 0;
	}
	ck_assert_msg(roots == 1, "%s n %d: %d roots", what, n, roots);
	for (int v = 0; v < n; v++) {
		int seen = 0;
		for (int k = 0; k < WEFT_TREE_MAX_CHILDREN; k++) {
			int ch = child[v][k];
			if (ch < 0)
				continue;
			ck_assert_msg(ch < n && parent[ch] == v,
				      "%s n %d: %d lists child %d whose parent is %d", what, n, v,
				      ch, ch < n ? parent[ch] : -2);
			seen++;
		}
		int want = 0;
		for (int u = 0; u < n; u++)
			want += parent[u] == v;
		ck_assert_msg(seen == want, "%s n %d: %d has %d children, lists %d", what, n, v,
			      want, seen);
		int hops =
		    0; /* every index reaches the root within ceil(log2 n) + 1 hops (chain: n) */
		for (int u = v; parent[u] >= 0 && hops <= n; u = parent[u])
			hops++;
		ck_assert_msg(hops < n || n == 1, "%s n %d: %d does not reach the root", what, n,
			      v);
		if (shape != weft_shape_chain)
			ck_assert_msg(hops <= weft_shape_depth(n) + 1, "%s n %d: %d is %d deep",
				      what, n, v, hops);
	}
}

START_TEST(tree_shapes)
{
	for (int n = 1; n <= 64; n++) {
		check_shape(weft_shape_btree, "btree", n);
		check_shape(weft_shape_dbtree0, "dbtree0", n);
		check_shape(weft_shape_dbtree1, "dbtree1", n);
		check_shape(weft_shape_chain, "chain", n);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("algos_b");
	TCase *tc = tcase_create("shapes");
	tcase_add_test(tc, tree_shapes);
	suite_add_tcase(s, tc);

	tc = tcase_create("shm");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, shm_all, 1, 9);
	tcase_add_loop_test(tc, shm_broadcast_ring, 0,
			    (int)(sizeof(ring_nranks) / sizeof(ring_nranks[0])));
	tcase_add_loop_test(tc, shm_small_chunks, 0,
			    (int)(sizeof(small_chunk_nranks) / sizeof(small_chunk_nranks[0])));
	tcase_add_loop_test(tc, p2p_length_mismatch, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("socket");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, socket_all, 0,
			    (int)(sizeof(socket_nranks) / sizeof(socket_nranks[0])));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
