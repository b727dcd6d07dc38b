/*
 * sendrecv.c — point-to-point Send and Recv through the public API, over
 * the transport the suite runs with (tests/lib/integ.h), with the direct
 * algorithm (WEFT_ALGO=send:direct;recv:direct).
 *
 *  - direct: the walk of tests/lib/colls.h, its first two samples at each
 *    count: pairs (0,1), (2,3), ... in both directions, blocking (even
 *    ranks send first, odd ranks receive first); a ring of 3 messages to
 *    the next rank and from the previous one, all in one group, with
 *    isend/irecv or with blocking calls, which must arrive in call order;
 *    pairs exchanging with isend then irecv outside a group (they run side
 *    by side: a send that waits for its receiver must not deadlock);
 *    results exact, guards intact, send buffers unchanged; shm at 1..8
 *    ranks, socket at 2, 3.
 *  - a send and a receive of different lengths (5 and 7 int32) fail with
 *    WEFT_ERR_REMOTE naming both lengths within 5 s, not by timing out
 *    (WEFT_TIMEOUT is 30), over shm and socket.
 *  - verbs (auto): a ring of one send and one receive in a group, counts 0,
 *    1, 7, nranks-1, 4099 and 70001, at 2, 3 and 4 ranks.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "colls.h"
#include "integ.h"

#define NMSG 3

static unsigned p2p_salt(unsigned salt, int from, int to, int k)
{
	return salt * 4096u + (unsigned)from * 64u + (unsigned)to + (unsigned)k * 7u;
}

/* Pairs (0,1), (2,3), ...: even sends then receives, odd the reverse. */
static void pairs_case(struct coll_ctx *c, size_t count, weft_datatype_t dt)
{
	char name[160], why[256] = "";
	snprintf(name, sizeof(name), "send/recv pairs nranks %d %s count %zu", c->nranks,
		 harness_dtype_name(dt), count);
	harness_progress("%s", name);
	unsigned salt = ++c->salt;
	int peer = c->rank ^ 1;
	if (peer >= c->nranks)
		return;
	c->cases++;
	size_t bytes = count * harness_dtype_size(dt);
	struct harness_buf send = {0}, recv = {0}, want = {0};
	if (!harness_buf_alloc(&send, bytes) || !harness_buf_alloc(&recv, bytes) ||
	    !harness_buf_alloc(&want, 2 * bytes)) {
		coll_verdict(c, name, "out of memory");
		c->error = true;
		goto out_free;
	}
	harness_ag_input(send.data, count, dt, c->rank, p2p_salt(salt, c->rank, peer, 0));
	memcpy(want.data + bytes, send.data, bytes); /* the original */
	weft_status_t st;
	if (c->rank % 2 == 0) {
		st = weft_send(send.data, count, dt, peer, c->comm);
		if (st == WEFT_SUCCESS)
			st = weft_recv(recv.data, count, dt, peer, c->comm);
	} else {
		st = weft_recv(recv.data, count, dt, peer, c->comm);
		if (st == WEFT_SUCCESS)
			st = weft_send(send.data, count, dt, peer, c->comm);
	}
	if (coll_status(c, name, st) != COLL_OK)
		goto out_free;
	harness_ag_input(want.data, count, dt, peer, p2p_salt(salt, peer, c->rank, 0));
	const char *g;
	if (harness_compare(recv.data, want.data, count, dt, why, sizeof(why)) != SIZE_MAX) {
		/* why says it */
	} else if (*(g = harness_buf_guards(&recv)))
		snprintf(why, sizeof(why), "%s the receive buffer was written", g);
	else if (memcmp(send.data, want.data + bytes, bytes) != 0)
		snprintf(why, sizeof(why), "the send buffer was modified");
	coll_verdict(c, name, why);
out_free:
	harness_buf_free(&send);
	harness_buf_free(&recv);
	harness_buf_free(&want);
}

/* Pairs (0,1), (2,3), ... exchange with isend then irecv, outside a group,
 * and wait for both: the two run side by side (weft.h), so a send that
 * waits for its receiver (a large one) cannot deadlock the pair. */
static void exchange_case(struct coll_ctx *c, size_t count, weft_datatype_t dt)
{
	char name[160], why[256] = "";
	snprintf(name, sizeof(name), "isend/irecv exchange (no group) nranks %d %s count %zu",
		 c->nranks, harness_dtype_name(dt), count);
	harness_progress("%s", name);
	int peer = c->rank ^ 1;
	if (peer >= c->nranks)
		return;
	c->cases++;
	unsigned salt = ++c->salt;
	size_t bytes = count * harness_dtype_size(dt);
	struct harness_buf send = {0}, recv = {0}, want = {0};
	if (!harness_buf_alloc(&send, bytes) || !harness_buf_alloc(&recv, bytes) ||
	    !harness_buf_alloc(&want, bytes)) {
		coll_verdict(c, name, "out of memory");
		c->error = true;
		goto out_free;
	}
	harness_ag_input(send.data, count, dt, c->rank, p2p_salt(salt, c->rank, peer, 1));
	harness_ag_input(want.data, count, dt, peer, p2p_salt(salt, peer, c->rank, 1));
	weft_request_t req[2] = {0};
	weft_status_t st = weft_isend(send.data, count, dt, peer, c->comm, &req[0]);
	if (st == WEFT_SUCCESS)
		st = weft_irecv(recv.data, count, dt, peer, c->comm, &req[1]);
	for (int k = 0; k < 2; k++) {
		weft_status_t w = weft_wait(&req[k]);
		if (st == WEFT_SUCCESS)
			st = w;
	}
	if (coll_status(c, name, st) != COLL_OK)
		goto out_free;
	if (harness_compare(recv.data, want.data, count, dt, why, sizeof(why)) == SIZE_MAX &&
	    *harness_buf_guards(&recv))
		snprintf(why, sizeof(why), "%s the receive buffer was written",
			 harness_buf_guards(&recv));
	coll_verdict(c, name, why);
out_free:
	harness_buf_free(&send);
	harness_buf_free(&recv);
	harness_buf_free(&want);
}

/* A ring: NMSG messages to the next rank and from the previous one, all in
 * one group; non-blocking calls or blocking ones. In call order. */
static void ring_case(struct coll_ctx *c, size_t count, weft_datatype_t dt, bool blocking)
{
	char name[160], why[256] = "";
	snprintf(name, sizeof(name), "send/recv ring (%s, group) nranks %d %s count %zu",
		 blocking ? "blocking" : "isend/irecv", c->nranks, harness_dtype_name(dt), count);
	harness_progress("%s", name);
	if (c->nranks < 2)
		return;
	c->cases++;
	unsigned salt = ++c->salt;
	int n = c->nranks, next = (c->rank + 1) % n, prev = (c->rank + n - 1) % n;
	size_t bytes = count * harness_dtype_size(dt);
	struct harness_buf send = {0}, recv = {0}, want = {0};
	if (!harness_buf_alloc(&send, NMSG * bytes) || !harness_buf_alloc(&recv, NMSG * bytes) ||
	    !harness_buf_alloc(&want, NMSG * bytes)) {
		coll_verdict(c, name, "out of memory");
		c->error = true;
		goto out_free;
	}
	for (int k = 0; k < NMSG; k++) {
		harness_ag_input(send.data + (size_t)k * bytes, count, dt, c->rank,
				 p2p_salt(salt, c->rank, next, k));
		harness_ag_input(want.data + (size_t)k * bytes, count, dt, prev,
				 p2p_salt(salt, prev, c->rank, k));
	}
	weft_request_t req[2 * NMSG] = {0};
	weft_status_t st = weft_group_start();
	for (int k = 0; k < NMSG && st == WEFT_SUCCESS; k++) {
		unsigned char *s = send.data + (size_t)k * bytes,
			      *r = recv.data + (size_t)k * bytes;
		st = blocking ? weft_send(s, count, dt, next, c->comm)
			      : weft_isend(s, count, dt, next, c->comm, &req[2 * k]);
		if (st == WEFT_SUCCESS)
			st = blocking ? weft_recv(r, count, dt, prev, c->comm)
				      : weft_irecv(r, count, dt, prev, c->comm, &req[2 * k + 1]);
	}
	weft_status_t end = weft_group_end();
	if (st == WEFT_SUCCESS)
		st = end;
	for (int k = 0; k < 2 * NMSG; k++) {
		weft_status_t w = weft_wait(&req[k]);
		if (st == WEFT_SUCCESS)
			st = w;
	}
	if (coll_status(c, name, st) != COLL_OK)
		goto out_free;
	if (harness_compare(recv.data, want.data, NMSG * count, dt, why, sizeof(why)) == SIZE_MAX &&
	    *harness_buf_guards(&recv))
		snprintf(why, sizeof(why), "%s the receive buffer was written",
			 harness_buf_guards(&recv));
	coll_verdict(c, name, why);
out_free:
	harness_buf_free(&send);
	harness_buf_free(&recv);
	harness_buf_free(&want);
}

static void walk_case(struct coll_ctx *c, size_t k, int s, const struct coll_case *cs)
{
	if (s >= 2)
		return;
	pairs_case(c, cs->count, cs->dt);
	if (!c->error)
		exchange_case(c, cs->count, cs->dt);
	if (!c->error)
		ring_case(c, cs->count, cs->dt, s % 2 == 0);
}

static int walk_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	coll_walk(&c, walk_case);
	return coll_end(&c);
}

/* Send and receive around the ring, both at once in a group. */
static void ring_one(struct coll_ctx *c, size_t count, weft_datatype_t dt)
{
	char name[160], why[256] = "";
	snprintf(name, sizeof(name), "send/recv ring (one each, group) nranks %d %s count %zu",
		 c->nranks, harness_dtype_name(dt), count);
	harness_progress("%s", name);
	c->cases++;
	unsigned salt = ++c->salt;
	size_t bytes = count * harness_dtype_size(dt);
	int next = (c->rank + 1) % c->nranks, prev = (c->rank + c->nranks - 1) % c->nranks;
	struct harness_buf in = {0}, out = {0}, want = {0};
	if (!harness_buf_alloc(&in, bytes) || !harness_buf_alloc(&out, bytes) ||
	    !harness_buf_alloc(&want, bytes)) {
		coll_verdict(c, name, "out of memory");
		c->error = true;
		goto out_free;
	}
	harness_ag_input(in.data, count, dt, c->rank, salt);
	harness_ag_input(want.data, count, dt, prev, salt);
	weft_status_t st = weft_group_start();
	if (st == WEFT_SUCCESS)
		st = weft_send(in.data, count, dt, next, c->comm);
	if (st == WEFT_SUCCESS)
		st = weft_recv(out.data, count, dt, prev, c->comm);
	weft_status_t end = weft_group_end();
	if (coll_status(c, name, st == WEFT_SUCCESS ? end : st) != COLL_OK)
		goto out_free;
	harness_compare(out.data, want.data, count, dt, why, sizeof(why));
	coll_verdict(c, name, why);
out_free:
	harness_buf_free(&in);
	harness_buf_free(&out);
	harness_buf_free(&want);
}

static int verbs_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	static const weft_datatype_t types[] = {WEFT_FLOAT32,  WEFT_FLOAT16, WEFT_INT32,
						WEFT_BFLOAT16, WEFT_UINT8,   WEFT_FLOAT64};
	const size_t counts[] = {0, 1, 7, (size_t)nranks - 1, 4099, 70001};
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	for (size_t k = 0; k < 6 && !c.error; k++)
		ring_one(&c, counts[k], types[k]);
	return coll_end(&c);
}

static void run_job(const char *what, int nranks, harness_body_fn body, int timeout_s)
{
	struct integ_env e;
	integ_env_init(&e, timeout_s);
	if (!integ_over("verbs"))
		integ_env_add(&e, "WEFT_ALGO=send:direct;recv:direct");
	char label[96];
	snprintf(label, sizeof(label), "send/recv %s over %s, nranks %d", what, integ_transport(),
		 nranks);
	struct harness_job job = {.nranks = nranks, .body = body, .timeout_s = 120};
	integ_run(&job, &e, label);
}

static const int direct_socket[] = {2, 3};

START_TEST(direct)
{
	run_job("direct", integ_over("socket") ? direct_socket[_i] : _i, walk_body, 30);
}
END_TEST

START_TEST(verbs_ring)
{
	run_job("ring", 2 + _i, verbs_body, 20);
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

START_TEST(length_mismatch)
{
	run_job("length mismatch", 2, mismatch_body, 30);
}
END_TEST

static void add(Suite *s)
{
	bool socket = integ_over("socket");
	TCase *tc;
	if (integ_over("verbs")) {
		if ((tc = integ_tcase(s, "auto", 150)))
			tcase_add_loop_test(tc, verbs_ring, 0, 3); /* 2, 3, 4 ranks */
		return;
	}
	if ((tc = integ_tcase(s, "direct", 150))) {
		tcase_add_loop_test(tc, direct, socket ? 0 : 1, socket ? 2 : 9);
		tcase_add_test(tc, length_mismatch);
	}
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"sendrecv", "shm socket verbs", add};
	return integ_main(argc, argv, &suite);
}
