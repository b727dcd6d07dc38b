/*
 * test_nonblocking.c — weft_iallreduce / weft_iallgather with weft_test and
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
 *  - count 0 and weft_wait straight after the post.
 * Over shm and socket, for several rank counts.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

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

static const char *const env_shm[] = {"WEFT_TIMEOUT=60", NULL};
static const char *const env_socket[] = {"WEFT_TIMEOUT=60", "WEFT_TRANSPORTS=socket",
					 "WEFT_SOCKET_IFNAME=lo", NULL};

struct variant {
	const char *label;
	const char *const *env;
	int nranks;
};

static const struct variant variants[] = {
    {"shm", env_shm, 2},       {"shm", env_shm, 3},	  {"shm", env_shm, 5},
    {"shm", env_shm, 8},       {"socket", env_socket, 2}, {"socket", env_socket, 3},
    {"socket", env_socket, 5},
};
#define NVARIANTS     ((int)(sizeof(variants) / sizeof(variants[0])))
#define JOB_TIMEOUT_S 120.0

static void run(const char *what, harness_body_fn body, void *arg, int v)
{
	struct harness_result res;
	harness_run(variants[v].nranks, variants[v].env, body, arg, JOB_TIMEOUT_S, &res);
	printf("%s %s nranks %d: %.1f s\n", what, variants[v].label, variants[v].nranks,
	       res.seconds);
	fflush(stdout);
	ck_assert_msg(res.ok, "%s over %s, nranks %d:\n%s", what, variants[v].label,
		      variants[v].nranks, res.summary);
}

START_TEST(test_loop)
{
	run("iallreduce + weft_test loop", body_test_loop, NULL, _i);
}
END_TEST

START_TEST(many_outstanding)
{
	int rounds = 12;
	run("six outstanding operations", body_many, &rounds, _i);
}
END_TEST

START_TEST(blocking_while_outstanding)
{
	run("blocking calls while an iallreduce is outstanding", body_blocking_while_outstanding,
	    NULL, _i);
}
END_TEST

START_TEST(zero_and_wait)
{
	run("count 0 and weft_wait", body_zero_and_wait, NULL, _i);
}
END_TEST

static Suite *nonblocking_suite(void)
{
	Suite *s = suite_create("nonblocking");
	TCase *tc = tcase_create("nonblocking");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, test_loop, 0, NVARIANTS);
	tcase_add_loop_test(tc, many_outstanding, 0, NVARIANTS);
	tcase_add_loop_test(tc, blocking_while_outstanding, 0, NVARIANTS);
	tcase_add_loop_test(tc, zero_and_wait, 0, NVARIANTS);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(nonblocking_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
