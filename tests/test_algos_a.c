/*
 * test_algos_a.c — recursive halving-doubling AllReduce ("rhd"), Bruck
 * AllGather ("bruck"), ring ReduceScatter ("ring") and the dissemination
 * barrier, each forced with WEFT_ALGO and driven through the public API.
 *
 * One set of rank processes per (transport, nranks) runs every case in
 * turn; ranks 1..8 on shared memory, a few rank counts over sockets. Counts
 * 0, 1, 7, nranks-1, both sides of rhd's switch from doubling to halving,
 * 4099 and 65537 elements, every datatype and op (a sample at the large
 * counts), in place and out of place in rotation. ReduceScatter also runs
 * one case large enough to need several scratch rounds out of place (on
 * shared memory only, to keep the suite fast). Every
 * element is checked against an exact expected value, the guard bytes
 * around outputs must be untouched, and inputs must be unchanged where the
 * API says so. The barrier is checked through shared memory: nobody may
 * leave round k before everybody has entered it.
 */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define MAX_FAILURES_SHOWN 8
#define BARRIER_ROUNDS	   12

enum form { FORM_OUT, FORM_SAME, FORM_IN_PLACE, FORM_NCCL, FORM_COUNT };

static const char *const form_names[FORM_COUNT] = {
    [FORM_OUT] = "out-of-place",
    [FORM_SAME] = "sendbuf==recvbuf",
    [FORM_IN_PLACE] = "WEFT_IN_PLACE",
    [FORM_NCCL] = "recvbuf==sendbuf+rank*count",
};

struct ctx {
	weft_comm_t comm;
	int rank, nranks;
	unsigned salt;
	int failures;
	int barrier_round; /* rounds of barrier_cases() so far */
	bool rounds_case;  /* run ReduceScatter's multi-round case */
	bool error;	   /* a call failed: stop */
};

/* A buffer with guard bytes on both sides. */
struct gbuf {
	unsigned char *raw, *data;
	size_t bytes;
};

static bool gbuf_alloc(struct gbuf *g, size_t bytes)
{
	g->bytes = bytes;
	g->raw = malloc(bytes + 2 * HARNESS_GUARD_BYTES);
	if (!g->raw)
		return false;
	g->data = g->raw + HARNESS_GUARD_BYTES;
	harness_guard_fill(g->raw, HARNESS_GUARD_BYTES);
	harness_guard_fill(g->data + bytes, HARNESS_GUARD_BYTES);
	return true;
}

/* "" if the guards are intact. */
static const char *gbuf_guards(const struct gbuf *g)
{
	if (harness_guard_check(g->raw, HARNESS_GUARD_BYTES) >= 0)
		return "the guard before";
	if (harness_guard_check(g->data + g->bytes, HARNESS_GUARD_BYTES) >= 0)
		return "the guard after";
	return "";
}

static void gbuf_free(struct gbuf *g)
{
	free(g->raw);
	g->raw = g->data = NULL;
}

/* Record the outcome of one case; @p why is "" when it passed. */
static void verdict(struct ctx *c, const char *name, const char *why)
{
	if (!why[0])
		return;
	if (++c->failures <= MAX_FAILURES_SHOWN)
		harness_fail("%s: %s", name, why);
}

static bool call_failed(struct ctx *c, weft_status_t st, const char *name)
{
	if (st == WEFT_SUCCESS)
		return false;
	harness_fail_status(c->comm, st, "%s", name);
	c->error = true;
	return true;
}

/* --- AllReduce --- */

static void allreduce_case(struct ctx *c, size_t count, weft_datatype_t dt, weft_op_t op,
			   enum form form)
{
	char name[160], why[256] = "";
	snprintf(name, sizeof(name), "allreduce rhd nranks %d %s %s count %zu %s", c->nranks,
		 harness_dtype_name(dt), harness_op_name(op), count, form_names[form]);
	harness_progress("%s", name);
	size_t bytes = count * harness_dtype_size(dt);
	struct gbuf send = {0}, recv = {0};
	unsigned char *want = malloc(bytes + 1), *orig = malloc(bytes + 1);
	if (!gbuf_alloc(&send, bytes) || !gbuf_alloc(&recv, bytes) || !want || !orig) {
		snprintf(why, sizeof(why), "out of memory");
		goto out_free;
	}
	c->salt++;
	unsigned char *input = form == FORM_OUT ? send.data : recv.data;
	harness_ar_input(input, count, dt, op, c->rank, c->nranks, c->salt);
	memcpy(orig, send.data, bytes);
	if (form == FORM_OUT)
		memset(recv.data, 0xcd, bytes);
	const void *sendarg = form == FORM_OUT	  ? send.data
			      : form == FORM_SAME ? recv.data
						  : WEFT_IN_PLACE;
	if (call_failed(c, weft_allreduce(sendarg, recv.data, count, dt, op, c->comm), name))
		goto out_free;
	harness_ar_expected(want, count, dt, op, c->nranks, c->salt);
	if (harness_compare(recv.data, want, count, dt, why, sizeof(why)) == SIZE_MAX) {
		const char *guard = gbuf_guards(&recv);
		if (*guard)
			snprintf(why, sizeof(why), "%s recvbuf was written", guard);
		else if (form == FORM_OUT &&
			 (*gbuf_guards(&send) || memcmp(send.data, orig, bytes)))
			snprintf(why, sizeof(why), "sendbuf or its guards were modified");
	}
	verdict(c, name, why);
out_free:
	gbuf_free(&send);
	gbuf_free(&recv);
	free(want);
	free(orig);
}

static void allreduce_cases(struct ctx *c)
{
	/* 768 and 769 float32 sit on both sides of rhd's doubling/halving switch. */
	size_t counts[] = {0, 1, 7, (size_t)c->nranks - 1, 768, 769, 4099, 65537};
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]) && !c->error; k++) {
		if (k == 3 && counts[k] <= 1)
			continue;
		bool big = counts[k] >= 4099;
		for (int dt = 0; dt < WEFT_DATATYPE_COUNT && !c->error; dt++)
			for (int op = 0; op < WEFT_OP_COUNT && !c->error; op++) {
				if (big && (dt * WEFT_OP_COUNT + op) % 4 != (int)k % 4)
					continue;
				enum form f = (enum form)((k + (size_t)dt + (size_t)op) % 3);
				allreduce_case(c, counts[k], (weft_datatype_t)dt, (weft_op_t)op, f);
			}
	}
}

/* --- AllGather --- */

static void allgather_case(struct ctx *c, size_t count, weft_datatype_t dt, enum form form)
{
	char name[160], why[256] = "";
	snprintf(name, sizeof(name), "allgather bruck nranks %d %s count %zu %s", c->nranks,
		 harness_dtype_name(dt), count, form_names[form]);
	harness_progress("%s", name);
	size_t esize = harness_dtype_size(dt), block = count * esize, n = (size_t)c->nranks;
	struct gbuf send = {0}, recv = {0};
	unsigned char *want = malloc(n * block + 1), *orig = malloc(block + 1);
	if (!gbuf_alloc(&send, block) || !gbuf_alloc(&recv, n * block) || !want || !orig) {
		snprintf(why, sizeof(why), "out of memory");
		goto out_free;
	}
	c->salt++;
	for (int r = 0; r < c->nranks; r++)
		harness_ag_input(want + (size_t)r * block, count, dt, r, c->salt);
	memset(recv.data, 0xcd, n * block);
	unsigned char *mine = recv.data + (size_t)c->rank * block;
	const void *sendarg;
	if (form == FORM_OUT) {
		harness_ag_input(send.data, count, dt, c->rank, c->salt);
		memcpy(orig, send.data, block);
		sendarg = send.data;
	} else {
		harness_ag_input(mine, count, dt, c->rank, c->salt);
		sendarg = form == FORM_IN_PLACE ? WEFT_IN_PLACE : mine;
	}
	if (call_failed(c, weft_allgather(sendarg, recv.data, count, dt, c->comm), name))
		goto out_free;
	if (harness_compare(recv.data, want, n * count, dt, why, sizeof(why)) == SIZE_MAX) {
		const char *guard = gbuf_guards(&recv);
		if (*guard)
			snprintf(why, sizeof(why), "%s recvbuf was written", guard);
		else if (form == FORM_OUT &&
			 (*gbuf_guards(&send) || memcmp(send.data, orig, block)))
			snprintf(why, sizeof(why), "sendbuf or its guards were modified");
	}
	verdict(c, name, why);
out_free:
	gbuf_free(&send);
	gbuf_free(&recv);
	free(want);
	free(orig);
}

static void allgather_cases(struct ctx *c)
{
	size_t counts[] = {0, 1, 7, (size_t)c->nranks - 1, 4099, 65537};
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]) && !c->error; k++) {
		if (k == 3 && counts[k] <= 1)
			continue;
		for (int dt = 0; dt < WEFT_DATATYPE_COUNT && !c->error; dt++) {
			if (counts[k] >= 4099 && dt % 3 != (int)k % 3)
				continue;
			allgather_case(c, counts[k], (weft_datatype_t)dt,
				       (enum form)((k + (size_t)dt) % 3));
		}
	}
}

/* --- ReduceScatter --- */

static void reduce_scatter_case(struct ctx *c, size_t count, weft_datatype_t dt, weft_op_t op,
				enum form form)
{
	char name[160], why[256] = "";
	snprintf(name, sizeof(name), "reduce_scatter ring nranks %d %s %s count %zu %s", c->nranks,
		 harness_dtype_name(dt), harness_op_name(op), count, form_names[form]);
	harness_progress("%s", name);
	size_t esize = harness_dtype_size(dt), block = count * esize, n = (size_t)c->nranks;
	size_t total = n * count;
	struct gbuf send = {0}, recv = {0};
	unsigned char *want = malloc(n * block + 1), *orig = malloc(n * block + 1);
	/* Out of place: input in send, result in recv (one block). In place
	 * (MPI): all in recv. NCCL: input in send, recv inside it. */
	size_t recv_bytes = form == FORM_OUT ? block : form == FORM_NCCL ? 0 : n * block;
	if (!gbuf_alloc(&send, form == FORM_OUT || form == FORM_NCCL ? n * block : 0) ||
	    !gbuf_alloc(&recv, recv_bytes) || !want || !orig) {
		snprintf(why, sizeof(why), "out of memory");
		goto out_free;
	}
	c->salt++;
	unsigned char *input = form == FORM_OUT || form == FORM_NCCL ? send.data : recv.data;
	harness_ar_input(input, total, dt, op, c->rank, c->nranks, c->salt);
	memcpy(orig, input, n * block);
	if (form == FORM_OUT)
		memset(recv.data, 0xcd, block);
	const void *sendarg = form == FORM_IN_PLACE ? WEFT_IN_PLACE
			      : form == FORM_SAME   ? recv.data
						    : send.data;
	void *recvarg = form == FORM_NCCL ? send.data + (size_t)c->rank * block : recv.data;
	if (call_failed(c, weft_reduce_scatter(sendarg, recvarg, count, dt, op, c->comm), name))
		goto out_free;
	harness_ar_expected(want, total, dt, op, c->nranks, c->salt);
	if (harness_compare(recvarg, want + (size_t)c->rank * block, count, dt, why, sizeof(why)) ==
	    SIZE_MAX) {
		const char *guard = gbuf_guards(&recv);
		if (!*guard)
			guard = gbuf_guards(&send);
		if (*guard)
			snprintf(why, sizeof(why), "%s a buffer was written", guard);
		else if (form == FORM_OUT && memcmp(send.data, orig, n * block))
			snprintf(why, sizeof(why), "sendbuf was modified");
		for (size_t r = 0; form == FORM_NCCL && !why[0] && r < n; r++)
			if (r != (size_t)c->rank &&
			    memcmp(send.data + r * block, orig + r * block, block))
				snprintf(why, sizeof(why), "block %zu of sendbuf was modified", r);
	}
	verdict(c, name, why);
out_free:
	gbuf_free(&send);
	gbuf_free(&recv);
	free(want);
	free(orig);
}

static void reduce_scatter_cases(struct ctx *c)
{
	size_t counts[] = {0, 1, 7, (size_t)c->nranks - 1, 4099, 65537};
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]) && !c->error; k++) {
		if (k == 3 && counts[k] <= 1)
			continue;
		bool big = counts[k] >= 4099;
		for (int dt = 0; dt < WEFT_DATATYPE_COUNT && !c->error; dt++)
			for (int op = 0; op < WEFT_OP_COUNT && !c->error; op++) {
				if (big && (dt * WEFT_OP_COUNT + op) % 5 != (int)k % 5)
					continue;
				enum form f =
				    (enum form)((k + (size_t)dt + (size_t)op) % FORM_COUNT);
				reduce_scatter_case(c, counts[k], (weft_datatype_t)dt,
						    (weft_op_t)op, f);
			}
	}
	/* Out of place, the ring keeps n-2 partial blocks in the
	 * communicator's scratch, 4 chunks (4 x 128 KiB on shared memory by
	 * default): this count needs a second, short round of it. */
	if (c->rounds_case && c->nranks >= 3 && !c->error) {
		size_t count = ((size_t)4 << 17) / (((size_t)c->nranks - 2) * 4) + 1001;
		reduce_scatter_case(c, count, WEFT_FLOAT32, WEFT_SUM, FORM_OUT);
		if (!c->error)
			reduce_scatter_case(c, count, WEFT_INT32, WEFT_MAX, FORM_NCCL);
	}
}

/* --- Barrier --- */

static void barrier_cases(struct ctx *c)
{
	_Atomic int *entered = harness_shared(); /* [rank]: last round entered */
	for (int k = 0; k < BARRIER_ROUNDS && !c->error; k++) {
		int round = ++c->barrier_round;
		char name[96];
		snprintf(name, sizeof(name), "barrier dissemination nranks %d round %d", c->nranks,
			 round);
		harness_progress("%s", name);
		/* A different rank is late each round. */
		if (c->rank == round % c->nranks) {
			struct timespec late = {0, 2000000};
			nanosleep(&late, NULL);
		}
		atomic_store(&entered[c->rank], round);
		if (call_failed(c, weft_barrier(c->comm), name))
			return;
		for (int r = 0; r < c->nranks; r++) {
			int seen = atomic_load(&entered[r]);
			if (seen < round) {
				char why[128];
				snprintf(why, sizeof(why),
					 "left before rank %d entered (it is at round %d)", r,
					 seen);
				verdict(c, name, why);
			}
		}
	}
}

/* TEST_TIMES=1: rank 0 prints how long each part took. */
static void part_done(const struct ctx *c, const char *what, double *t)
{
	if (c->rank != 0 || !getenv("TEST_TIMES"))
		return;
	fprintf(stderr, "  nranks %d %s: %.2f s\n", c->nranks, what, harness_now() - *t);
	*t = harness_now();
}

static int body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct ctx c = {.comm = comm, .rank = rank, .nranks = nranks, .rounds_case = arg != NULL};
	double t = harness_now();
	barrier_cases(&c);
	part_done(&c, "barrier", &t);
	if (!c.error)
		allreduce_cases(&c);
	part_done(&c, "allreduce", &t);
	if (!c.error)
		allgather_cases(&c);
	part_done(&c, "allgather", &t);
	if (!c.error)
		reduce_scatter_cases(&c);
	part_done(&c, "reduce_scatter", &t);
	if (!c.error)
		barrier_cases(&c); /* again, after other traffic */
	if (c.error)
		return 2;
	if (c.failures > MAX_FAILURES_SHOWN)
		harness_fail("... %d wrong cases in all", c.failures);
	return c.failures ? 1 : 0;
}

#define FORCED "WEFT_ALGO=allreduce:rhd;allgather:bruck;reduce_scatter:ring;barrier:dissemination"

static const char *const env_shm[] = {"WEFT_TIMEOUT=60", FORCED, NULL};
static const char *const env_socket[] = {"WEFT_TIMEOUT=60", FORCED, "WEFT_TRANSPORTS=socket",
					 "WEFT_SOCKET_IFNAME=lo", NULL};

#define JOB_TIMEOUT_S 120.0

static void run_job(int nranks, const char *const *env, const char *label, bool rounds_case)
{
	struct harness_result res;
	static int yes = 1;
	harness_run(nranks, env, body, rounds_case ? &yes : NULL, JOB_TIMEOUT_S, &res);
	printf("algos_a %s nranks %d: %.1f s\n", label, nranks, res.seconds);
	fflush(stdout);
	ck_assert_msg(res.ok, "algos_a %s, nranks %d:\n%s", label, nranks, res.summary);
}

START_TEST(shm)
{
	run_job(_i, env_shm, "shm", true);
}
END_TEST

static const int socket_nranks[] = {2, 3, 5};

START_TEST(socket)
{
	run_job(socket_nranks[_i], env_socket, "socket", false);
}
END_TEST

static Suite *algos_suite(void)
{
	Suite *s = suite_create("algos_a");
	TCase *tc = tcase_create("shm");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, shm, 1, 9);
	suite_add_tcase(s, tc);

	tc = tcase_create("socket");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, socket, 0, (int)(sizeof(socket_nranks) / sizeof(socket_nranks[0])));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(algos_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
