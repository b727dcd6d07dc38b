/*
 * allreduce.c — AllReduce through the public API, over the transport the
 * suite runs with (tests/lib/integ.h), by the tuner's choice and with each
 * algorithm forced. Every case is checked as tests/lib/colls.h says.
 *
 *  - auto (shm, socket): for each rank count 1..8, one set of rank
 *    processes runs counts {0, 1, 7, nranks-1, 4099} x every datatype x
 *    every op x three buffer forms (out of place, sendbuf == recvbuf,
 *    WEFT_IN_PLACE), the rounding data (fp16, bf16, fp32 and fp64 with sum,
 *    prod and avg at counts 7 and 4099: the plain data is exact in every
 *    type, so it cannot tell rounding from truncation) and (datatype, op,
 *    form) cases of 1M+3 elements, two of them with the rounding data. To
 *    keep CI within minutes on 2 cores: shm runs all three forms per case
 *    up to 4 ranks and rotates them above (each form still meeting every
 *    datatype and op across the counts); socket, whose small messages
 *    cost most when 8 ranks share 2 cores, always rotates; above 4 ranks
 *    half the 1M+3 cases run, alternating with the rank count. Over shm
 *    also with WEFT_ISA=generic (2, 3, 5 ranks), checked to be the kernels
 *    in use even on an AVX2 machine.
 *  - each algorithm of the library's table, forced (WEFT_ALGO), on a
 *    smaller matrix: counts {1, 7, nranks-1, 4099, 65537}, forms in
 *    rotation; shm at 2, 3, 4, 5 and 8 ranks, socket at 2, 3 and 5.
 *  - rhd: counts 0, 1, 7, nranks-1, both sides of its switch from doubling
 *    to halving (768 and 769 fp32), 4099 and 65537, every datatype and op
 *    (a sample at the large counts), forms in rotation; shm 1..8 ranks,
 *    socket 2, 3, 5.
 *  - tree: the walk of tests/lib/colls.h (counts 0, 1, 7, nranks-1, 4099
 *    and 300001, samples that meet every datatype and op at every count,
 *    the three forms in rotation); shm 1..8 ranks, and with 4 KiB
 *    slots (hundreds of chunks: windows wrap, the two trees share links
 *    for long) at 2, 3, 5, 8; socket at 2 and 3.
 *  - hier (hosts): the layouts of tests/lib/integ_matrix.c, counts {1, 7,
 *    nranks-1, 4099, 65537} over samples of datatypes and ops, in place and
 *    out of place, and two cases of 1M+3 (several MiB through CMA and TCP).
 *  - verbs: tests/lib/integ_matrix.c; ofi: tests/integration/collectives.c.
 *
 * TEST_TIMES=1 makes rank 0 of the auto matrix print how long each group
 * of cases took.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"
#include "colls.h"
#include "integ.h"
#include "integ_matrix.h"
#include "reduce/reduce.h"

#define BIG_COUNT     ((size_t)(1u << 20) + 3)
#define JOB_TIMEOUT_S 200.0

struct big_case {
	weft_datatype_t dtype;
	weft_op_t op;
	enum coll_form form;
	bool round;
};

/* Large cases: each dtype width and each op at least once, and fp16/bf16,
 * whose accumulation in fp32 matters most over long vectors. */
static const struct big_case big_cases[] = {
    {WEFT_FLOAT32, WEFT_SUM, COLL_OUT, false},	    {WEFT_FLOAT16, WEFT_SUM, COLL_IN_PLACE, false},
    {WEFT_BFLOAT16, WEFT_AVG, COLL_SAME, false},    {WEFT_INT32, WEFT_MAX, COLL_OUT, false},
    {WEFT_FLOAT64, WEFT_MIN, COLL_IN_PLACE, false}, {WEFT_UINT8, WEFT_PROD, COLL_OUT, false},
    {WEFT_FLOAT16, WEFT_SUM, COLL_OUT, true},	    {WEFT_BFLOAT16, WEFT_AVG, COLL_IN_PLACE, true},
};
#define NBIG (sizeof(big_cases) / sizeof(big_cases[0]))

struct matrix {
	bool rotate_forms; /* one form per case, in rotation, rather than all three */
	bool forced_algo;  /* counts {1, 7, nranks-1, 4099, 65537} */
	bool big;	   /* the 1M+3 cases */
	bool generic_isa;  /* WEFT_ISA=generic: check that the kernels are the generic ones */
};

static void run(struct coll_ctx *c, size_t count, weft_datatype_t dt, weft_op_t op,
		enum coll_form form, bool round)
{
	coll_allreduce(c, &(struct coll_case){
			      .count = count, .dt = dt, .op = op, .form = form, .round = round});
}

/* The rounding data: every floating-point type with sum, prod and avg, at
 * counts 7 and 4099, the buffer forms in rotation. */
static void rounding_cases(struct coll_ctx *c)
{
	static const weft_datatype_t floats[] = {WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32,
						 WEFT_FLOAT64};
	static const weft_op_t ops[] = {WEFT_SUM, WEFT_PROD, WEFT_AVG};
	static const size_t counts[] = {7, 4099};
	unsigned k = 0;
	for (size_t n = 0; n < 2; n++)
		for (size_t d = 0; d < 4; d++)
			for (size_t o = 0; o < 3 && !c->error; o++, k++)
				run(c, counts[n], floats[d], ops[o], (enum coll_form)(k % 3), true);
}

/* TEST_TIMES=1: rank 0 prints how long each group of cases took. */
static void times(const struct coll_ctx *c, const char *what, size_t count, double *t)
{
	if (c->rank != 0 || !getenv("TEST_TIMES"))
		return;
	fprintf(stderr, "  %s %zu: %.2f s\n", what, count, harness_now() - *t);
	*t = harness_now();
}

static int matrix_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct matrix *m = arg;
	if (m->generic_isa && strcmp(weft_reduce_isa(), "generic") != 0)
		return harness_fail("WEFT_ISA=generic, but the kernels are %s", weft_reduce_isa());
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	size_t counts[] = {0, 1, 7, (size_t)nranks - 1, 4099, 65537};
	size_t first = m->forced_algo ? 1 : 0, ncounts = m->forced_algo ? 6 : 5;
	double t = harness_now();
	for (size_t k = first; k < ncounts && !c.error; k++) {
		if (k == 3 && (counts[k] == 0 || counts[k] == 1 || counts[k] == 7))
			continue; /* nranks-1 repeats a count already run */
		for (int dt = 0; dt < WEFT_DATATYPE_COUNT && !c.error; dt++)
			for (int op = 0; op < WEFT_OP_COUNT && !c.error; op++)
				for (int f = 0; f < 3 && !c.error; f++)
					if (!m->rotate_forms ||
					    f == (int)((k + (size_t)dt + (size_t)op) % 3))
						run(&c, counts[k], (weft_datatype_t)dt,
						    (weft_op_t)op, (enum coll_form)f, false);
		times(&c, "count", counts[k], &t);
	}
	if (!c.error)
		rounding_cases(&c);
	for (size_t k = 0; m->big && k < NBIG && !c.error; k++) {
		if (nranks > 4 && (k + (size_t)nranks) % 2)
			continue; /* above 4 ranks, half the large cases, alternating */
		run(&c, BIG_COUNT, big_cases[k].dtype, big_cases[k].op, big_cases[k].form,
		    big_cases[k].round);
		times(&c, "large case", k, &t);
	}
	return coll_end(&c);
}

static void run_matrix(int nranks, const char *algo, const char *setting, struct matrix m)
{
	struct integ_env e;
	integ_env_init(&e, 60);
	if (algo)
		integ_env_addf(&e, "WEFT_ALGO=allreduce:%s", algo);
	if (setting)
		integ_env_add(&e, setting);
	char label[128];
	snprintf(label, sizeof(label), "allreduce %s over %s%s%s, nranks %d", algo ? algo : "auto",
		 integ_transport(), setting ? " " : "", setting ? setting : "", nranks);
	struct harness_job job = {
	    .nranks = nranks, .body = matrix_body, .arg = &m, .timeout_s = JOB_TIMEOUT_S};
	integ_run(&job, &e, label);
}

START_TEST(matrix)
{
	/* All three forms for every case up to 4 ranks over shm; else in rotation. */
	run_matrix(_i, NULL, NULL,
		   (struct matrix){.rotate_forms = _i > 4 || integ_over("socket"), .big = true});
}
END_TEST

static const int generic_nranks[] = {2, 3, 5};

START_TEST(matrix_generic_isa)
{
	run_matrix(generic_nranks[_i], NULL, "WEFT_ISA=generic",
		   (struct matrix){.rotate_forms = true, .generic_isa = true});
}
END_TEST

/* The algorithm of the table each forced test runs: _i / 16 its index,
 * _i % 16 the index of the rank count. */
static const int forced_nranks_shm[] = {2, 3, 4, 5, 8}, forced_nranks_socket[] = {2, 3, 5};

START_TEST(forced)
{
	const struct weft_algo *a = weft_algos_for(WEFT_COLL_ALLREDUCE)[_i / 16];
	const int *nranks = integ_over("socket") ? forced_nranks_socket : forced_nranks_shm;
	run_matrix(nranks[_i % 16], a->name, NULL,
		   (struct matrix){.rotate_forms = true, .forced_algo = true});
}
END_TEST

/* rhd: 768 and 769 fp32 sit on both sides of its doubling/halving switch. */
static int rhd_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	size_t counts[] = {0, 1, 7, (size_t)nranks - 1, 768, 769, 4099, 65537};
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]) && !c.error; k++) {
		if (k == 3 && counts[k] <= 1)
			continue;
		bool big = counts[k] >= 4099;
		for (int dt = 0; dt < WEFT_DATATYPE_COUNT && !c.error; dt++)
			for (int op = 0; op < WEFT_OP_COUNT && !c.error; op++)
				if (!big || (dt * WEFT_OP_COUNT + op) % 4 == (int)k % 4)
					run(&c, counts[k], (weft_datatype_t)dt, (weft_op_t)op,
					    (enum coll_form)((k + (size_t)dt + (size_t)op) % 3),
					    false);
	}
	return coll_end(&c);
}

/* tree: the walk of colls.h, every sample. */
static void tree_case(struct coll_ctx *c, size_t k, int s, const struct coll_case *cs)
{
	coll_allreduce(c, cs);
}

static int tree_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	coll_walk(&c, tree_case);
	return coll_end(&c);
}

static const int few_socket[] = {2, 3, 5}, tree_socket[] = {2, 3}, small_chunks[] = {2, 3, 5, 8};

START_TEST(rhd)
{
	integ_run_algo("allreduce", "rhd", NULL, integ_over("socket") ? few_socket[_i] : _i,
		       rhd_body, NULL);
}
END_TEST

START_TEST(tree)
{
	integ_run_algo("allreduce", "tree", NULL, integ_over("socket") ? tree_socket[_i] : _i,
		       tree_body, NULL);
}
END_TEST

/* 4 KiB chunks: hundreds per call, so windows wrap and the two trees of
 * the allreduce share links for long. */
START_TEST(tree_small_chunks)
{
	integ_run_algo("allreduce", "tree", "WEFT_SHM_SLOT_BYTES=4096", small_chunks[_i], tree_body,
		       NULL);
}
END_TEST

/* hier: samples of datatypes and ops, avg included, in place and out. */
static int hier_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	static const struct {
		weft_datatype_t dt;
		weft_op_t op;
	} samples[] = {
	    {WEFT_FLOAT32, WEFT_SUM},  {WEFT_INT32, WEFT_MAX},	 {WEFT_FLOAT16, WEFT_SUM},
	    {WEFT_BFLOAT16, WEFT_AVG}, {WEFT_FLOAT64, WEFT_AVG}, {WEFT_INT64, WEFT_AVG},
	    {WEFT_INT8, WEFT_PROD},    {WEFT_UINT64, WEFT_MIN},	 {WEFT_UINT8, WEFT_SUM},
	};
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	size_t counts[] = {1, 7, (size_t)nranks - 1, 4099, 65537};
	for (size_t k = 0; k < 5 && !c.error && !c.failures; k++) {
		if (k == 2 && (counts[k] <= 1 || counts[k] == 7))
			continue;
		for (size_t s = 0; s < sizeof(samples) / sizeof(samples[0]) && !c.error; s++)
			if (counts[k] != 65537 || s % 3 == 0) /* keep the large cases few */
				run(&c, counts[k], samples[s].dt, samples[s].op,
				    (k + s) % 2 ? COLL_IN_PLACE : COLL_OUT, false);
	}
	if (!c.error && !c.failures)
		run(&c, BIG_COUNT, WEFT_FLOAT32, WEFT_SUM, COLL_OUT, false);
	if (!c.error && !c.failures)
		run(&c, BIG_COUNT, WEFT_BFLOAT16, WEFT_AVG, COLL_IN_PLACE, false);
	return coll_end(&c);
}

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void add_shm_socket(Suite *s)
{
	bool socket = integ_over("socket");
	TCase *tc = integ_tcase(s, "auto", JOB_TIMEOUT_S + 30);
	if (tc) {
		tcase_add_loop_test(tc, matrix, 1, 9);
		if (!socket)
			tcase_add_loop_test(tc, matrix_generic_isa, 0, N(generic_nranks));
	}
	const struct weft_algo *const *algos = weft_algos_for(WEFT_COLL_ALLREDUCE);
	for (int a = 0; algos[a]; a++) {
		if (!(tc = integ_tcase(s, algos[a]->name, 4 * JOB_TIMEOUT_S)))
			continue;
		int n = socket ? N(forced_nranks_socket) : N(forced_nranks_shm);
		tcase_add_loop_test(tc, forced, a * 16, a * 16 + n);
		if (strcmp(algos[a]->name, "rhd") == 0)
			tcase_add_loop_test(tc, rhd, socket ? 0 : 1, socket ? N(few_socket) : 9);
		if (strcmp(algos[a]->name, "tree") == 0) {
			tcase_add_loop_test(tc, tree, socket ? 0 : 1, socket ? N(tree_socket) : 9);
			if (!socket)
				tcase_add_loop_test(tc, tree_small_chunks, 0, N(small_chunks));
		}
	}
}

static void add(Suite *s)
{
	if (integ_over("hosts"))
		integ_add_hosts(s, WEFT_COLL_ALLREDUCE, hier_body);
	else if (integ_over("verbs"))
		integ_add_verbs(s, WEFT_COLL_ALLREDUCE, true);
	else
		add_shm_socket(s);
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"allreduce", "shm socket hosts verbs", add};
	return integ_main(argc, argv, &suite);
}
