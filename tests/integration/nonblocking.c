/*
 * nonblocking.c — weft_iallreduce / weft_iallgather with weft_test and
 * weft_wait.
 *
 *  - test loop: post, then weft_test until done; the request must come back
 *    NULL and the result be exact (several sizes, pipelined ones included);
 *  - many outstanding: six operations of different collectives, datatypes,
 *    ops, counts and forms in flight on one communicator at once, completed
 *    in a different order every round (one weft_wait, then weft_test round
 *    robin): each result must be its own, never a neighbour's;
 *  - blocking while outstanding: a blocking allreduce and allgather issued
 *    while a large iallreduce is still in flight;
 *  - count 0 and weft_wait straight after the post;
 *  - mixed outstanding: ireduce_scatter, ibroadcast, ireduce, ialltoall and
 *    ibarrier posted together, and ialltoallv, igather, iscatter and
 *    iallreduce, waited for in orders that differ between ranks, two
 *    rounds each (shm 1..8 ranks, socket 2..8, the alltoallv rounds to 6);
 *    the first set also with the k-th algorithm of each of its
 *    collectives forced in turn (the "forced" case: shm 2, 3, 5, 8 ranks,
 *    socket 3, 5).
 * Over the transport the suite runs with (tests/lib/integ.h): shm at 2, 3,
 * 5, 8 ranks, socket at 2, 3, 5. Its cases (tests/lib/integ.h): "auto"
 * (the first four, by the tuner's choice), "mixed" and "forced" (the mixed
 * rounds with the algorithms forced).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"
#include "colls.h"
#include "harness.h"
#include "integ.h"

#define WAIT_LIMIT_S 60.0

struct slot {
	bool gather;
	weft_datatype_t dt;
	weft_op_t op;
	size_t count;
	bool in_place;
	unsigned salt;
	unsigned char *send, *recv, *want; /* recv has guards around it */
	size_t recv_bytes;
	weft_request_t req;
	bool done;
	char name[128];
};

static bool slot_setup(struct slot *s, int rank, int nranks)
{
	size_t size = harness_dtype_size(s->dt), bytes = s->count * size;
	s->recv_bytes = s->gather ? bytes * (size_t)nranks : bytes;
	s->send = malloc(bytes ? bytes : 1);
	unsigned char *r = malloc(s->recv_bytes + 2 * HARNESS_GUARD_BYTES);
	s->want = malloc(s->recv_bytes ? s->recv_bytes : 1);
	s->recv = r ? r + HARNESS_GUARD_BYTES : NULL;
	if (!s->send || !r || !s->want)
		return false;
	snprintf(s->name, sizeof(s->name), "i%s %s %s count %zu%s salt %u",
		 s->gather ? "allgather" : "allreduce", harness_dtype_name(s->dt),
		 s->gather ? "" : harness_op_name(s->op), s->count, s->in_place ? " in place" : "",
		 s->salt);
	harness_guard_fill(r, HARNESS_GUARD_BYTES);
	harness_guard_fill(s->recv + s->recv_bytes, HARNESS_GUARD_BYTES);
	memset(s->recv, 0xcd, s->recv_bytes);
	unsigned char *in =
	    s->in_place ? (s->gather ? s->recv + (size_t)rank * bytes : s->recv) : s->send;
	if (s->gather) {
		harness_ag_input(in, s->count, s->dt, rank, s->salt);
		for (int q = 0; q < nranks; q++)
			harness_ag_input(s->want + (size_t)q * bytes, s->count, s->dt, q, s->salt);
	} else {
		harness_ar_input(in, s->count, s->dt, s->op, rank, nranks, s->salt);
		harness_ar_expected(s->want, s->count, s->dt, s->op, nranks, s->salt);
	}
	s->req = NULL;
	s->done = false;
	return true;
}

static void slot_free(struct slot *s)
{
	free(s->send);
	if (s->recv)
		free(s->recv - HARNESS_GUARD_BYTES);
	free(s->want);
	s->send = s->recv = s->want = NULL;
}

static weft_status_t slot_post(weft_comm_t comm, struct slot *s)
{
	harness_progress("post %s", s->name);
	const void *src = s->in_place ? WEFT_IN_PLACE : s->send;
	if (s->gather)
		return weft_iallgather(src, s->recv, s->count, s->dt, comm, &s->req);
	return weft_iallreduce(src, s->recv, s->count, s->dt, s->op, comm, &s->req);
}

static int slot_verify(const struct slot *s, const char *context)
{
	char why[256];
	weft_datatype_t dt = s->gather ? WEFT_UINT8 : s->dt;
	size_t n = s->gather ? s->recv_bytes : s->count;
	if (harness_compare(s->recv, s->want, n, dt, why, sizeof(why)) != SIZE_MAX)
		return harness_fail("%s: %s: %s", context, s->name, why);
	if (harness_guard_check(s->recv - HARNESS_GUARD_BYTES, HARNESS_GUARD_BYTES) >= 0 ||
	    harness_guard_check(s->recv + s->recv_bytes, HARNESS_GUARD_BYTES) >= 0)
		return harness_fail("%s: %s: a guard around recvbuf was written", context, s->name);
	return 0;
}

/* weft_test until the request finishes; checks the request contract. */
static int test_until_done(weft_comm_t comm, struct slot *s, const char *context)
{
	double deadline = harness_now() + WAIT_LIMIT_S;
	for (;;) {
		weft_status_t st = weft_test(&s->req);
		if (st == WEFT_INPROGRESS) {
			if (s->req == NULL)
				return harness_fail(
				    "%s: %s: weft_test returned in progress and a NULL request",
				    context, s->name);
			if (harness_now() > deadline)
				return harness_fail(
				    "%s: %s: not finished after %.0f s of weft_test", context,
				    s->name, WAIT_LIMIT_S);
			continue;
		}
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "%s: weft_test(%s)", context, s->name);
		if (s->req != NULL)
			return harness_fail("%s: %s: finished but the request is not NULL", context,
					    s->name);
		s->done = true;
		return 0;
	}
}

static int body_test_loop(weft_comm_t comm, int rank, int nranks, void *arg)
{
	static const size_t counts[] = {1, 4099, 262147};
	int ret = 0;
	for (size_t k = 0; k < 3 && !ret; k++) {
		struct slot s = {
		    .dt = WEFT_FLOAT32, .op = WEFT_SUM, .count = counts[k], .salt = (unsigned)k};
		if (!slot_setup(&s, rank, nranks)) {
			slot_free(&s);
			return harness_fail("out of memory");
		}
		weft_status_t st = slot_post(comm, &s);
		if (st != WEFT_SUCCESS)
			ret = harness_fail_status(comm, st, "test loop: post %s", s.name);
		else if (s.req == NULL)
			ret = harness_fail(
			    "test loop: %s: post returned success and a NULL request", s.name);
		if (!ret)
			ret = test_until_done(comm, &s, "test loop");
		if (!ret)
			ret = slot_verify(&s, "test loop");
		slot_free(&s);
	}
	return ret;
}

#define NSLOTS 6

static void many_slots(struct slot *slots, int round)
{
	const struct slot proto[NSLOTS] = {
	    {.dt = WEFT_INT32, .op = WEFT_SUM, .count = 4099},
	    {.dt = WEFT_FLOAT16, .op = WEFT_MAX, .count = 1000, .in_place = true},
	    {.gather = true, .dt = WEFT_UINT8, .count = 777},
	    {.dt = WEFT_FLOAT64, .op = WEFT_PROD, .count = 7},
	    {.gather = true, .dt = WEFT_FLOAT32, .count = 4099, .in_place = true},
	    {.dt = WEFT_INT8, .op = WEFT_AVG, .count = 200003},
	};
	for (int k = 0; k < NSLOTS; k++) {
		slots[k] = proto[k];
		slots[k].salt = (unsigned)(round * NSLOTS + k);
	}
}

static int body_many(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int rounds = *(int *)arg, ret = 0;
	for (int round = 0; round < rounds && !ret; round++) {
		struct slot slots[NSLOTS];
		char context[64];
		snprintf(context, sizeof(context), "many outstanding, round %d", round);
		many_slots(slots, round);
		for (int k = 0; k < NSLOTS; k++)
			if (!slot_setup(&slots[k], rank, nranks))
				ret = harness_fail("out of memory");
		for (int k = 0; k < NSLOTS && !ret; k++) {
			weft_status_t st = slot_post(comm, &slots[k]);
			if (st != WEFT_SUCCESS)
				ret = harness_fail_status(comm, st, "%s: post %s", context,
							  slots[k].name);
		}
		/* One weft_wait on a slot that changes every round, then the rest by weft_test. */
		int first = (round * 5 + 3) % NSLOTS;
		if (!ret) {
			harness_progress("%s: weft_wait %s", context, slots[first].name);
			weft_status_t st = weft_wait(&slots[first].req);
			if (st != WEFT_SUCCESS)
				ret = harness_fail_status(comm, st, "%s: weft_wait(%s)", context,
							  slots[first].name);
			else if (slots[first].req != NULL)
				ret = harness_fail("%s: weft_wait left the request non-NULL",
						   context);
			slots[first].done = true;
		}
		double deadline = harness_now() + WAIT_LIMIT_S;
		for (int left = NSLOTS - 1; left > 0 && !ret;) {
			for (int j = 0; j < NSLOTS && !ret; j++) {
				int k = (round % 2) ? NSLOTS - 1 - j
						    : j; /* alternate the polling order */
				if (slots[k].done)
					continue;
				weft_status_t st = weft_test(&slots[k].req);
				if (st == WEFT_INPROGRESS)
					continue;
				if (st != WEFT_SUCCESS)
					ret = harness_fail_status(comm, st, "%s: weft_test(%s)",
								  context, slots[k].name);
				else if (slots[k].req != NULL)
					ret = harness_fail("%s: %s finished, request not NULL",
							   context, slots[k].name);
				slots[k].done = true;
				left--;
			}
			if (!ret && left > 0 && harness_now() > deadline) {
				harness_progress("%s: %d not finished", context, left);
				ret = harness_fail("%s: %d operations not finished after %.0f s",
						   context, left, WAIT_LIMIT_S);
			}
		}
		for (int k = 0; k < NSLOTS && !ret; k++)
			ret = slot_verify(&slots[k], context);
		for (int k = 0; k < NSLOTS; k++)
			slot_free(&slots[k]);
	}
	return ret;
}

/* Blocking calls while a large non-blocking one is in flight: the blocking
 * ones must complete (they are later in the order on every rank). */
static int body_blocking_while_outstanding(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct slot a = {.dt = WEFT_FLOAT32, .op = WEFT_SUM, .count = 262147, .salt = 1};
	struct slot b = {.dt = WEFT_INT32, .op = WEFT_MAX, .count = 4099, .salt = 2};
	struct slot c = {.gather = true, .dt = WEFT_FLOAT64, .count = 513, .salt = 3};
	int ret = 0;
	if (!slot_setup(&a, rank, nranks) || !slot_setup(&b, rank, nranks) ||
	    !slot_setup(&c, rank, nranks)) {
		ret = harness_fail("out of memory");
		goto out;
	}
	weft_status_t st = slot_post(comm, &a);
	if (st != WEFT_SUCCESS) {
		ret = harness_fail_status(comm, st, "post %s", a.name);
		goto out;
	}
	harness_progress("blocking allreduce while %s is outstanding", a.name);
	st = weft_allreduce(b.send, b.recv, b.count, b.dt, b.op, comm);
	if (st != WEFT_SUCCESS) {
		ret = harness_fail_status(comm, st, "blocking allreduce while %s is outstanding",
					  a.name);
		goto out;
	}
	harness_progress("blocking allgather while %s is outstanding", a.name);
	st = weft_allgather(c.send, c.recv, c.count, c.dt, comm);
	if (st != WEFT_SUCCESS) {
		ret = harness_fail_status(comm, st, "blocking allgather while %s is outstanding",
					  a.name);
		goto out;
	}
	harness_progress("weft_wait %s", a.name);
	st = weft_wait(&a.req);
	if (st != WEFT_SUCCESS) {
		ret = harness_fail_status(comm, st, "weft_wait(%s) after blocking calls", a.name);
		goto out;
	}
	ret = slot_verify(&a, "outstanding") || slot_verify(&b, "blocking") ||
	      slot_verify(&c, "blocking");
out:
	slot_free(&a);
	slot_free(&b);
	slot_free(&c);
	return ret;
}

/* Count 0 (a valid no-op) through the non-blocking calls, and weft_wait
 * right after a post. */
static int body_zero_and_wait(weft_comm_t comm, int rank, int nranks, void *arg)
{
	char buf[16];
	weft_request_t req = NULL;
	harness_progress("iallreduce count 0");
	weft_status_t st = weft_iallreduce(buf, buf, 0, WEFT_FLOAT32, WEFT_SUM, comm, &req);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "iallreduce count 0");
	if (req && (st = weft_wait(&req)) != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "weft_wait(iallreduce count 0)");
	req = NULL;
	harness_progress("iallgather count 0");
	st = weft_iallgather(buf, buf, 0, WEFT_INT64, comm, &req);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "iallgather count 0");
	if (req && (st = weft_wait(&req)) != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "weft_wait(iallgather count 0)");

	struct slot s = {.gather = true, .dt = WEFT_BFLOAT16, .count = 4099, .salt = 9};
	int ret = 0;
	if (!slot_setup(&s, rank, nranks)) {
		ret = harness_fail("out of memory");
	} else if ((st = slot_post(comm, &s)) != WEFT_SUCCESS) {
		ret = harness_fail_status(comm, st, "post %s", s.name);
	} else if ((st = weft_wait(&s.req)) != WEFT_SUCCESS) {
		ret = harness_fail_status(comm, st, "weft_wait(%s)", s.name);
	} else if (s.req != NULL) {
		ret = harness_fail("weft_wait(%s) left the request non-NULL", s.name);
	} else {
		ret = slot_verify(&s, "wait after post");
	}
	slot_free(&s);
	return ret;
}

/* ---- Several non-blocking operations of different kinds in flight on one
 * communicator at once, completed in an order that differs between ranks:
 * each result must be its own. */

struct mixed {
	int n, rank;
	float *rs_in, *rs_out, *rs_want;
	int32_t *bc, *bc_want;
	uint16_t *rd_in, *rd_out, *rd_want;
	uint8_t *a2a_in, *a2a_out, *a2a_want;
};

enum { RS_COUNT = 4099, BC_COUNT = 4099, RD_COUNT = 1001, A2A_COUNT = 513 };

static void mixed_free(struct mixed *m)
{
	free(m->rs_in);
	free(m->rs_out);
	free(m->rs_want);
	free(m->bc);
	free(m->bc_want);
	free(m->rd_in);
	free(m->rd_out);
	free(m->rd_want);
	free(m->a2a_in);
	free(m->a2a_out);
	free(m->a2a_want);
}

static bool mixed_alloc(struct mixed *m, int rank, int n)
{
	*m = (struct mixed){.n = n, .rank = rank};
	size_t un = (size_t)n;
	m->rs_in = malloc(RS_COUNT * un * 4), m->rs_out = malloc(RS_COUNT * 4);
	m->rs_want = malloc(RS_COUNT * un * 4);
	m->bc = malloc(BC_COUNT * 4), m->bc_want = malloc(BC_COUNT * 4);
	m->rd_in = malloc(RD_COUNT * 2), m->rd_out = malloc(RD_COUNT * 2);
	m->rd_want = malloc(RD_COUNT * 2);
	m->a2a_in = malloc(A2A_COUNT * un), m->a2a_out = malloc(A2A_COUNT * un);
	m->a2a_want = malloc(A2A_COUNT * un);
	return m->rs_in && m->rs_out && m->rs_want && m->bc && m->bc_want && m->rd_in &&
	       m->rd_out && m->rd_want && m->a2a_in && m->a2a_out && m->a2a_want;
}

static void mixed_fill(struct mixed *m, unsigned salt, int bc_root)
{
	int n = m->n, rank = m->rank;
	harness_ar_input(m->rs_in, RS_COUNT * (size_t)n, WEFT_FLOAT32, WEFT_SUM, rank, n, salt);
	harness_ar_expected(m->rs_want, RS_COUNT * (size_t)n, WEFT_FLOAT32, WEFT_SUM, n, salt);
	harness_ag_input(m->bc_want, BC_COUNT, WEFT_INT32, bc_root + 1, salt + 1);
	if (rank == bc_root)
		memcpy(m->bc, m->bc_want, BC_COUNT * 4);
	else
		memset(m->bc, 0xcd, BC_COUNT * 4);
	harness_ar_input(m->rd_in, RD_COUNT, WEFT_BFLOAT16, WEFT_AVG, rank, n, salt + 2);
	harness_ar_expected(m->rd_want, RD_COUNT, WEFT_BFLOAT16, WEFT_AVG, n, salt + 2);
	for (int j = 0; j < n; j++) {
		harness_ag_input(m->a2a_in + (size_t)j * A2A_COUNT, A2A_COUNT, WEFT_UINT8,
				 rank * n + j, salt + 3);
		harness_ag_input(m->a2a_want + (size_t)j * A2A_COUNT, A2A_COUNT, WEFT_UINT8,
				 j * n + rank, salt + 3);
	}
}

static int mixed_check(const struct mixed *m, int rd_root)
{
	char why[256];
	if (harness_compare(m->rs_out, m->rs_want + (size_t)m->rank * RS_COUNT, RS_COUNT,
			    WEFT_FLOAT32, why, sizeof(why)) != SIZE_MAX)
		return harness_fail("mixed outstanding: ireduce_scatter: %s", why);
	if (harness_compare(m->bc, m->bc_want, BC_COUNT, WEFT_INT32, why, sizeof(why)) != SIZE_MAX)
		return harness_fail("mixed outstanding: ibroadcast: %s", why);
	if (m->rank == rd_root && harness_compare(m->rd_out, m->rd_want, RD_COUNT, WEFT_BFLOAT16,
						  why, sizeof(why)) != SIZE_MAX)
		return harness_fail("mixed outstanding: ireduce: %s", why);
	if (harness_compare(m->a2a_out, m->a2a_want, A2A_COUNT * (size_t)m->n, WEFT_UINT8, why,
			    sizeof(why)) != SIZE_MAX)
		return harness_fail("mixed outstanding: ialltoall: %s", why);
	return 0;
}

/* ireduce_scatter, ibroadcast, ireduce, ialltoall and ibarrier at once. */
static int mixed_round(weft_comm_t comm, int rank, int n, int round, unsigned salt)
{
	int bc_root = n - 1, rd_root = n / 2, ret = 0;
	struct mixed m;
	weft_request_t req[5] = {NULL};
	static const char *const names[5] = {"ireduce_scatter", "ibroadcast", "ireduce",
					     "ialltoall", "ibarrier"};
	if (!mixed_alloc(&m, rank, n)) {
		mixed_free(&m);
		return harness_fail("out of memory");
	}
	mixed_fill(&m, salt, bc_root);
	harness_progress("mixed outstanding round %d: post", round);
	weft_status_t st[5];
	st[0] = weft_ireduce_scatter(m.rs_in, m.rs_out, RS_COUNT, WEFT_FLOAT32, WEFT_SUM, comm,
				     &req[0]);
	st[1] = weft_ibroadcast(rank == bc_root ? WEFT_IN_PLACE : NULL, m.bc, BC_COUNT, WEFT_INT32,
				bc_root, comm, &req[1]);
	st[2] = weft_ireduce(m.rd_in, rank == rd_root ? m.rd_out : NULL, RD_COUNT, WEFT_BFLOAT16,
			     WEFT_AVG, rd_root, comm, &req[2]);
	st[3] = weft_ialltoall(m.a2a_in, m.a2a_out, A2A_COUNT, WEFT_UINT8, comm, &req[3]);
	st[4] = weft_ibarrier(comm, &req[4]);
	for (int k = 0; k < 5 && !ret; k++)
		if (st[k] != WEFT_SUCCESS)
			ret = harness_fail_status(comm, st[k], "mixed outstanding: post %s",
						  names[k]);
	for (int j = 0; j < 5 && !ret; j++) {
		int k = (rank + round) % 2 ? 4 - j : (j + rank) % 5;
		harness_progress("mixed outstanding round %d: wait %s", round, names[k]);
		weft_status_t w = weft_wait(&req[k]);
		if (w != WEFT_SUCCESS)
			ret = harness_fail_status(comm, w, "mixed outstanding: weft_wait(%s)",
						  names[k]);
	}
	if (!ret)
		ret = mixed_check(&m, rd_root);
	mixed_free(&m);
	return ret;
}

/* ialltoallv, igather, iscatter and iallreduce at once. */
static int mixed_v_round(weft_comm_t comm, int rank, int n, int round, unsigned salt)
{
	int ret = 0, root = (round + 1) % n;
	const size_t cnt = 1031;
	struct coll_ctx c;
	coll_init(&c, comm, rank, n);
	struct coll_v_layout l = {0};
	float *g_in = malloc(cnt * 4), *g_out = malloc(cnt * 4 * (size_t)n);
	float *s_in = malloc(cnt * 4 * (size_t)n), *s_out = malloc(cnt * 4);
	float *ar = malloc(cnt * 4), *ar_want = malloc(cnt * 4);
	unsigned char *v_in = NULL, *v_out = NULL, *want = malloc(cnt * 4 * (size_t)n);
	weft_request_t req[4] = {NULL};
	static const char *const names[4] = {"ialltoallv", "igather", "iscatter", "iallreduce"};
	if (!g_in || !g_out || !s_in || !s_out || !ar || !ar_want || !want ||
	    !coll_v_layout(&l, round ? COLL_V_ONE_IDLE : COLL_V_UNEVEN, 300, rank, n, 1) ||
	    !(v_in = malloc(l.send_elems * 2 + 1)) || !(v_out = malloc(l.recv_elems * 2 + 1))) {
		ret = harness_fail("out of memory");
		goto out_free;
	}
	memset(v_out, HARNESS_UNWRITTEN, l.recv_elems * 2);
	for (int j = 0; j < n; j++)
		harness_ag_input(v_in + l.sdispl[j] * 2, l.scount[j], WEFT_FLOAT16, rank * n + j,
				 salt);
	harness_ag_input(g_in, cnt, WEFT_FLOAT32, rank + 1, salt + 1);
	for (int r = 0; r < n; r++)
		harness_ag_input(s_in + (size_t)r * cnt, cnt, WEFT_FLOAT32, r + 7, salt + 2);
	harness_ar_input(ar, cnt, WEFT_FLOAT32, WEFT_SUM, rank, n, salt + 3);
	harness_ar_expected(ar_want, cnt, WEFT_FLOAT32, WEFT_SUM, n, salt + 3);
	harness_progress("mixed outstanding (v) round %d: post", round);
	weft_status_t st[4];
	st[0] = weft_ialltoallv(v_in, l.scount, l.sdispl, v_out, l.rcount, l.rdispl, WEFT_FLOAT16,
				comm, &req[0]);
	st[1] =
	    weft_igather(g_in, rank == root ? g_out : NULL, cnt, WEFT_FLOAT32, root, comm, &req[1]);
	st[2] = weft_iscatter(rank == root ? s_in : NULL, s_out, cnt, WEFT_FLOAT32, root, comm,
			      &req[2]);
	st[3] = weft_iallreduce(WEFT_IN_PLACE, ar, cnt, WEFT_FLOAT32, WEFT_SUM, comm, &req[3]);
	for (int k = 0; k < 4 && !ret; k++)
		if (st[k] != WEFT_SUCCESS)
			ret = harness_fail_status(comm, st[k], "mixed: post %s", names[k]);
	for (int j = 0; j < 4 && !ret; j++) {
		int k = (rank + round) % 2 ? 3 - j : (j + rank) % 4;
		harness_progress("mixed outstanding (v) round %d: wait %s", round, names[k]);
		weft_status_t w = weft_wait(&req[k]);
		if (w != WEFT_SUCCESS)
			ret = harness_fail_status(comm, w, "mixed: weft_wait(%s)", names[k]);
	}
	char why[256];
	if (!ret && !coll_v_check(&c, &l, v_out, WEFT_FLOAT16, salt, why, sizeof(why)))
		ret = harness_fail("mixed: ialltoallv: %s", why);
	for (int r = 0; r < n && !ret && rank == root; r++) {
		harness_ag_input(want, cnt, WEFT_FLOAT32, r + 1, salt + 1);
		if (harness_compare(g_out + (size_t)r * cnt, want, cnt, WEFT_FLOAT32, why,
				    sizeof(why)) != SIZE_MAX)
			ret = harness_fail("mixed: igather block %d: %s", r, why);
	}
	if (!ret) {
		harness_ag_input(want, cnt, WEFT_FLOAT32, rank + 7, salt + 2);
		if (harness_compare(s_out, want, cnt, WEFT_FLOAT32, why, sizeof(why)) != SIZE_MAX)
			ret = harness_fail("mixed: iscatter: %s", why);
	}
	if (!ret && harness_compare(ar, ar_want, cnt, WEFT_FLOAT32, why, sizeof(why)) != SIZE_MAX)
		ret = harness_fail("mixed: iallreduce: %s", why);
out_free:
	free(g_in);
	free(g_out);
	free(s_in);
	free(s_out);
	free(ar);
	free(ar_want);
	free(v_in);
	free(v_out);
	free(want);
	coll_v_layout_free(&l);
	return ret;
}

/* arg: which rounds (MIXED_*). */
enum { MIXED = 1, MIXED_V = 2 };

static int body_mixed(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int which = *(const int *)arg, ret = 0;
	for (int round = 0; round < 2 && !ret && (which & MIXED); round++)
		ret = mixed_round(comm, rank, nranks, round, (unsigned)(round + 1) * 7);
	for (int round = 0; round < 2 && !ret && (which & MIXED_V); round++)
		ret = mixed_v_round(comm, rank, nranks, round, (unsigned)(round + 1) * 5);
	return ret;
}

/* ---- jobs */

#define JOB_TIMEOUT_S 120.0

static void run(const char *what, harness_body_fn body, void *arg, int nranks, const char *setting)
{
	struct integ_env e;
	integ_env_init(&e, 60);
	if (setting)
		integ_env_add(&e, setting);
	char label[384];
	snprintf(label, sizeof(label), "%s over %s%s%s, nranks %d", what, integ_transport(),
		 setting ? " " : "", setting ? setting : "", nranks);
	struct harness_job job = {
	    .nranks = nranks, .body = body, .arg = arg, .timeout_s = JOB_TIMEOUT_S};
	integ_run(&job, &e, label);
}

static const int shm_nranks[] = {2, 3, 5, 8}, socket_nranks[] = {2, 3, 5};

static int nranks_of(int i)
{
	return integ_over("socket") ? socket_nranks[i] : shm_nranks[i];
}

START_TEST(test_loop)
{
	run("iallreduce + weft_test loop", body_test_loop, NULL, nranks_of(_i), NULL);
}
END_TEST

START_TEST(many_outstanding)
{
	int rounds = 12;
	run("six outstanding operations", body_many, &rounds, nranks_of(_i), NULL);
}
END_TEST

START_TEST(blocking_while_outstanding)
{
	run("blocking calls while an iallreduce is outstanding", body_blocking_while_outstanding,
	    NULL, nranks_of(_i), NULL);
}
END_TEST

START_TEST(zero_and_wait)
{
	run("count 0 and weft_wait", body_zero_and_wait, NULL, nranks_of(_i), NULL);
}
END_TEST

/* shm 1..8 ranks, socket 2..8; the alltoallv rounds over socket to 6. */
START_TEST(mixed)
{
	int which = MIXED | (integ_over("socket") && _i > 6 ? 0 : MIXED_V);
	run("mixed outstanding", body_mixed, &which, _i, NULL);
}
END_TEST

/* WEFT_ALGO naming the k-th algorithm of every collective mixed_round
 * posts that has one; false when none has a k-th. */
static bool forced_spec(size_t k, char *buf, size_t cap)
{
	static const enum weft_coll_kind colls[] = {WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_BROADCAST,
						    WEFT_COLL_REDUCE, WEFT_COLL_ALLTOALL,
						    WEFT_COLL_BARRIER};
	size_t len = (size_t)snprintf(buf, cap, "WEFT_ALGO=");
	bool any = false;
	for (size_t c = 0; c < sizeof(colls) / sizeof(colls[0]); c++) {
		const struct weft_algo *const *algos = weft_algos_for(colls[c]);
		size_t have = 0;
		while (algos && algos[have])
			have++;
		if (k >= have)
			continue;
		len += (size_t)snprintf(buf + len, cap - len, "%s%s:%s", any ? ";" : "",
					weft_coll_name(colls[c]), algos[k]->name);
		any = true;
	}
	return any;
}

static const int forced_shm[] = {2, 3, 5, 8}, forced_socket[] = {3, 5};

START_TEST(mixed_forced)
{
	int nranks = integ_over("socket") ? forced_socket[_i] : forced_shm[_i];
	int which = MIXED;
	char spec[256];
	for (size_t k = 0; forced_spec(k, spec, sizeof(spec)); k++)
		run("mixed outstanding", body_mixed, &which, nranks, spec);
}
END_TEST

static void add(Suite *s)
{
	bool socket = integ_over("socket");
	int n = socket ? 3 : 4;
	TCase *tc = integ_tcase(s, "auto", JOB_TIMEOUT_S + 30);
	if (tc) {
		tcase_add_loop_test(tc, test_loop, 0, n);
		tcase_add_loop_test(tc, many_outstanding, 0, n);
		tcase_add_loop_test(tc, blocking_while_outstanding, 0, n);
		tcase_add_loop_test(tc, zero_and_wait, 0, n);
	}
	if ((tc = integ_tcase(s, "mixed", JOB_TIMEOUT_S + 30)))
		tcase_add_loop_test(tc, mixed, socket ? 2 : 1, 9);
	if ((tc = integ_tcase(s, "forced", 3 * JOB_TIMEOUT_S)))
		tcase_add_loop_test(tc, mixed_forced, 0, socket ? 2 : 4);
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"nonblocking", "shm socket", add};
	return integ_main(argc, argv, &suite);
}
