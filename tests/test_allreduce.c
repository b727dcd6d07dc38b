/*
 * test_allreduce.c — the AllReduce correctness matrix.
 *
 * For each transport (shm, the default on one host; socket over lo) and each
 * rank count 1..8, one set of rank processes runs every case in turn:
 * counts {0, 1, 7, nranks-1, 4099} x every datatype x every op x three
 * buffer forms (out of place, sendbuf == recvbuf, WEFT_IN_PLACE), plus
 * (datatype, op, form) cases of 1M+3 elements. Every element is checked
 * against an exact expected value, the guard bytes around the output (and,
 * out of place, the input) must be untouched, and out of place the input
 * must be unchanged. Forking once per (transport, nranks) rather than per
 * case keeps the suite fast; the failure message names the case.
 *
 * To keep CI within minutes on 2 cores: shm runs all three forms per case up
 * to 4 ranks and rotates them (one form per case, each form still meeting
 * every datatype and op across the counts) above; socket, whose small
 * messages cost most when 8 ranks share 2 cores, always rotates; above 4
 * ranks half the 1M+3 cases run, alternating with the rank count.
 * TEST_TIMES=1 makes rank 0 print how long each group of cases took.
 *
 * Every job also runs the rounding data of harness.h: fp16, bf16, fp32 and
 * fp64 with sum, prod and avg at counts 7 and 4099 (and two of the 1M+3
 * cases), inputs whose results must be rounded, once, to nearest even (the
 * plain data above is exact in every type, so it cannot tell rounding from
 * truncation).
 *
 * A second set forces each allreduce algorithm in the library's table in
 * turn (WEFT_ALGO) on a smaller matrix: counts {1, 7, nranks-1, 4099, 65537},
 * over shm and over socket. A third runs the shm matrix with
 * WEFT_ISA=generic, so that the generic kernels are used (and checked to be)
 * even on an AVX2 machine.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"
#include "harness.h"
#include "reduce/reduce.h"

enum form { FORM_OUT, FORM_SAME, FORM_IN_PLACE, FORM_COUNT };

static const char *const form_names[FORM_COUNT] = {
    [FORM_OUT] = "out-of-place",
    [FORM_SAME] = "sendbuf==recvbuf",
    [FORM_IN_PLACE] = "WEFT_IN_PLACE",
};

#define BIG_COUNT	   ((size_t)(1u << 20) + 3)
#define MAX_FAILURES_SHOWN 8

struct big_case {
	weft_datatype_t dtype;
	weft_op_t op;
	enum form form;
	bool round; /* the rounding data (harness_round_*) */
};

/* Large cases: each dtype width and each op at least once, and fp16/bf16,
 * whose accumulation in fp32 matters most over long vectors. */
static const struct big_case big_cases[] = {
    {WEFT_FLOAT32, WEFT_SUM, FORM_OUT, false},	    {WEFT_FLOAT16, WEFT_SUM, FORM_IN_PLACE, false},
    {WEFT_BFLOAT16, WEFT_AVG, FORM_SAME, false},    {WEFT_INT32, WEFT_MAX, FORM_OUT, false},
    {WEFT_FLOAT64, WEFT_MIN, FORM_IN_PLACE, false}, {WEFT_UINT8, WEFT_PROD, FORM_OUT, false},
    {WEFT_FLOAT16, WEFT_SUM, FORM_OUT, true},	    {WEFT_BFLOAT16, WEFT_AVG, FORM_IN_PLACE, true},
};

struct matrix {
	bool rotate_forms; /* one form per case, in rotation, rather than all three */
	bool forced_algo;  /* counts {1, 7, nranks-1, 4099, 65537} rather than {0, 1, 7, nranks-1,
			      4099} */
	bool big;	   /* the 1M+3 cases */
	bool generic_isa;  /* WEFT_ISA=generic: check that the kernels are the generic ones */
	int failures;	   /* wrong results seen on this rank */
};

/* Buffers of the largest case, reused: [guard | data | guard]. */
struct bufs {
	unsigned char *send, *recv; /* data start; guards at -G and +bytes */
	unsigned char *want, *orig;
	size_t cap;
};

static bool bufs_alloc(struct bufs *b, size_t cap)
{
	b->cap = cap;
	unsigned char *s = malloc(cap + 2 * HARNESS_GUARD_BYTES);
	unsigned char *r = malloc(cap + 2 * HARNESS_GUARD_BYTES);
	b->want = malloc(cap ? cap : 1);
	b->orig = malloc(cap ? cap : 1);
	b->send = s ? s + HARNESS_GUARD_BYTES : NULL;
	b->recv = r ? r + HARNESS_GUARD_BYTES : NULL;
	return s && r && b->want && b->orig;
}

static void bufs_free(struct bufs *b)
{
	if (b->send)
		free(b->send - HARNESS_GUARD_BYTES);
	if (b->recv)
		free(b->recv - HARNESS_GUARD_BYTES);
	free(b->want);
	free(b->orig);
}

static void guards_fill(unsigned char *data, size_t bytes)
{
	harness_guard_fill(data - HARNESS_GUARD_BYTES, HARNESS_GUARD_BYTES);
	harness_guard_fill(data + bytes, HARNESS_GUARD_BYTES);
}

/* "" if both guards are intact, else which one changed. */
static const char *guards_check(const unsigned char *data, size_t bytes)
{
	if (harness_guard_check(data - HARNESS_GUARD_BYTES, HARNESS_GUARD_BYTES) >= 0)
		return "the guard before";
	if (harness_guard_check(data + bytes, HARNESS_GUARD_BYTES) >= 0)
		return "the guard after";
	return "";
}

enum case_result { CASE_OK, CASE_WRONG, CASE_ERROR };

/* One allreduce; a wrong result lets the matrix go on, an error status stops it. */
static enum case_result run_case(weft_comm_t comm, int rank, int nranks, struct bufs *b,
				 struct matrix *m, size_t count, weft_datatype_t dt, weft_op_t op,
				 enum form form, unsigned salt, bool round)
{
	char name[160];
	snprintf(name, sizeof(name), "allreduce nranks %d %s %s%s count %zu %s", nranks,
		 harness_dtype_name(dt), harness_op_name(op), round ? " (rounding data)" : "",
		 count, form_names[form]);
	harness_progress("%s", name);

	size_t bytes = count * harness_dtype_size(dt);
	unsigned char *input = form == FORM_OUT ? b->send : b->recv;
	guards_fill(b->send, bytes);
	guards_fill(b->recv, bytes);
	if (round)
		harness_round_input(input, count, dt, op, rank, nranks, salt);
	else
		harness_ar_input(input, count, dt, op, rank, nranks, salt);
	if (form == FORM_OUT) {
		memset(b->recv, 0xcd, bytes); /* every element must be written */
		memcpy(b->orig, b->send, bytes);
	}
	const void *sendarg = form == FORM_OUT	  ? b->send
			      : form == FORM_SAME ? b->recv
						  : WEFT_IN_PLACE;

	weft_status_t st = weft_allreduce(sendarg, b->recv, count, dt, op, comm);
	if (st != WEFT_SUCCESS) {
		harness_fail_status(comm, st, "%s", name);
		return CASE_ERROR;
	}

	char why[256] = "";
	const char *guard;
	if (round)
		harness_round_expected(b->want, count, dt, op, nranks, salt);
	else
		harness_ar_expected(b->want, count, dt, op, nranks, salt);
	if (harness_compare(b->recv, b->want, count, dt, why, sizeof(why)) == SIZE_MAX) {
		guard = guards_check(b->recv, bytes);
		if (*guard)
			snprintf(why, sizeof(why), "%s recvbuf was written", guard);
	}
	if (!why[0] && form == FORM_OUT) {
		guard = guards_check(b->send, bytes);
		if (*guard)
			snprintf(why, sizeof(why), "%s sendbuf was written", guard);
		else if (memcmp(b->send, b->orig, bytes) != 0)
			snprintf(why, sizeof(why), "sendbuf was modified");
	}
	if (!why[0])
		return CASE_OK;
	if (++m->failures <= MAX_FAILURES_SHOWN)
		harness_fail("%s: %s", name, why);
	return CASE_WRONG;
}

/* The rounding data: every floating-point type with sum, prod and avg, at
 * counts 7 and 4099, the buffer forms in rotation. */
static enum case_result rounding_cases(weft_comm_t comm, int rank, int nranks, struct bufs *b,
				       struct matrix *m, unsigned *salt)
{
	static const weft_datatype_t floats[] = {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32,
						 WEFT_FLOAT64};
	static const weft_op_t ops[] = {WEFT_SUM, WEFT_PROD, WEFT_AVG};
	static const size_t counts[] = {7, 4099};
	enum case_result res = CASE_OK;
	unsigned k = 0;
	for (size_t c = 0; c < 2; c++)
		for (size_t d = 0; d < 4; d++)
			for (size_t o = 0; o < 3 && res != CASE_ERROR; o++, k++)
				res = run_case(comm, rank, nranks, b, m, counts[c], floats[d],
					       ops[o], (enum form)(k % FORM_COUNT), ++*salt, true);
	return res;
}

static int matrix_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct matrix *m = arg;
	if (m->generic_isa && strcmp(weft_reduce_isa(), "generic") != 0)
		return harness_fail("WEFT_ISA=generic, but the kernels are %s", weft_reduce_isa());
	struct bufs b;
	size_t cap = (m->big ? BIG_COUNT : 65537) * 8;
	if (!bufs_alloc(&b, cap)) {
		bufs_free(&b);
		return harness_fail("out of memory for %zu-byte buffers", cap);
	}
	size_t counts[] = {0, 1, 7, (size_t)nranks - 1, 4099, 65537};
	size_t first = m->forced_algo ? 1 : 0, ncounts = m->forced_algo ? 6 : 5;
	unsigned salt = 0;
	enum case_result res = CASE_OK;
	/* TEST_TIMES=1: rank 0 prints how long each group of cases took. */
	bool times = rank == 0 && getenv("TEST_TIMES");
	double t = harness_now();
	for (size_t c = first; c < ncounts && res != CASE_ERROR; c++) {
		size_t count = counts[c];
		if (c == 3 && (count == 0 || count == 1 || count == 7))
			continue; /* nranks-1 repeats a count already run */
		if (times && c > first) {
			fprintf(stderr, "  count %zu: %.2f s\n", counts[c - 1], harness_now() - t);
			t = harness_now();
		}
		for (int dt = 0; dt < WEFT_DATATYPE_COUNT && res != CASE_ERROR; dt++)
			for (int op = 0; op < WEFT_OP_COUNT && res != CASE_ERROR; op++)
				for (int f = 0; f < FORM_COUNT && res != CASE_ERROR; f++) {
					if (m->rotate_forms &&
					    f != (int)((c + (size_t)dt + (size_t)op) % FORM_COUNT))
						continue;
					salt++;
					res = run_case(comm, rank, nranks, &b, m, count,
						       (weft_datatype_t)dt, (weft_op_t)op,
						       (enum form)f, salt, false);
				}
	}
	res = res == CASE_ERROR ? res : rounding_cases(comm, rank, nranks, &b, m, &salt);
	if (times) {
		fprintf(stderr, "  last small count: %.2f s\n", harness_now() - t);
		t = harness_now();
	}
	for (size_t k = 0;
	     m->big && k < sizeof(big_cases) / sizeof(big_cases[0]) && res != CASE_ERROR; k++) {
		if (nranks > 4 && (k + (size_t)nranks) % 2)
			continue; /* above 4 ranks, half the large cases, alternating */
		res = run_case(comm, rank, nranks, &b, m, BIG_COUNT, big_cases[k].dtype,
			       big_cases[k].op, big_cases[k].form, ++salt, big_cases[k].round);
		if (times) {
			fprintf(stderr, "  %zu %s %s: %.2f s\n", BIG_COUNT,
				harness_dtype_name(big_cases[k].dtype),
				harness_op_name(big_cases[k].op), harness_now() - t);
			t = harness_now();
		}
	}
	bufs_free(&b);
	if (res == CASE_ERROR)
		return 2;
	if (m->failures > MAX_FAILURES_SHOWN)
		harness_fail("... %d wrong cases in all", m->failures);
	return m->failures ? 1 : 0;
}

static const char *const env_shm[] = {"WEFT_TIMEOUT=60", NULL};
static const char *const env_socket[] = {"WEFT_TIMEOUT=60", "WEFT_TRANSPORTS=socket",
					 "WEFT_SOCKET_IFNAME=lo", NULL};

#define JOB_TIMEOUT_S 200.0

static void run_matrix(int nranks, const char *const *env, const char *label, struct matrix m)
{
	struct harness_result res;
	harness_run(nranks, env, matrix_body, &m, JOB_TIMEOUT_S, &res);
	printf("allreduce matrix %s nranks %d: %.1f s\n", label, nranks, res.seconds);
	fflush(stdout);
	ck_assert_msg(res.ok, "allreduce matrix %s, nranks %d:\n%s", label, nranks, res.summary);
}

START_TEST(matrix_shm)
{
	/* All three forms for every case up to 4 ranks; above, in rotation. */
	run_matrix(_i, env_shm, "shm", (struct matrix){.rotate_forms = _i > 4, .big = true});
}
END_TEST

START_TEST(matrix_socket)
{
	run_matrix(_i, env_socket, "socket", (struct matrix){.rotate_forms = true, .big = true});
}
END_TEST

/* Each allreduce algorithm of the library's table, forced, on a smaller
 * matrix: every dtype and op, counts 1, 7, nranks-1, 4099, 65537, one form
 * per case in rotation. */
static const int algo_nranks[] = {2, 3, 4, 5, 8};

static void run_forced(int nranks, bool socket)
{
	const struct weft_algo *const *algos = weft_algos_for(WEFT_COLL_ALLREDUCE);
	ck_assert_ptr_nonnull(algos);
	for (size_t a = 0; algos[a]; a++) {
		char algo_env[128];
		snprintf(algo_env, sizeof(algo_env), "WEFT_ALGO=allreduce:%s", algos[a]->name);
		const char *const env[] = {"WEFT_TIMEOUT=60", algo_env, "WEFT_SOCKET_IFNAME=lo",
					   socket ? "WEFT_TRANSPORTS=socket" : NULL, NULL};
		struct harness_result res;
		struct matrix m = {.rotate_forms = true, .forced_algo = true};
		harness_run(nranks, env, matrix_body, &m, JOB_TIMEOUT_S, &res);
		printf("allreduce %s %s nranks %d: %.1f s\n", socket ? "socket" : "shm", algo_env,
		       nranks, res.seconds);
		fflush(stdout);
		ck_assert_msg(res.ok, "allreduce over %s with %s, nranks %d:\n%s",
			      socket ? "socket" : "shm", algo_env, nranks, res.summary);
	}
}

START_TEST(forced_algorithms)
{
	run_forced(algo_nranks[_i], false);
}
END_TEST

static const int algo_nranks_socket[] = {2, 3, 5};

START_TEST(forced_algorithms_socket)
{
	run_forced(algo_nranks_socket[_i], true);
}
END_TEST

/* The generic kernels as the library dispatches them, on an AVX2 machine too. */
static const int generic_nranks[] = {2, 3, 5};

START_TEST(matrix_generic_isa)
{
	static const char *const env[] = {"WEFT_TIMEOUT=60", "WEFT_ISA=generic", NULL};
	run_matrix(generic_nranks[_i], env, "shm WEFT_ISA=generic",
		   (struct matrix){.rotate_forms = true, .generic_isa = true});
}
END_TEST

static Suite *allreduce_suite(void)
{
	Suite *s = suite_create("allreduce");
	TCase *tc = tcase_create("shm");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, matrix_shm, 1, 9);
	suite_add_tcase(s, tc);

	tc = tcase_create("socket");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, matrix_socket, 1, 9);
	suite_add_tcase(s, tc);

	tc = tcase_create("algorithms");
	tcase_set_timeout(tc, 4 * JOB_TIMEOUT_S);
	tcase_add_loop_test(tc, forced_algorithms, 0,
			    (int)(sizeof(algo_nranks) / sizeof(algo_nranks[0])));
	tcase_add_loop_test(tc, forced_algorithms_socket, 0,
			    (int)(sizeof(algo_nranks_socket) / sizeof(algo_nranks_socket[0])));
	suite_add_tcase(s, tc);

	tc = tcase_create("generic_isa");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, matrix_generic_isa, 0,
			    (int)(sizeof(generic_nranks) / sizeof(generic_nranks[0])));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(allreduce_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
