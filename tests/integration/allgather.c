/*
 * allgather.c — AllGather through the public API, over the transport the
 * suite runs with (tests/lib/integ.h), by the tuner's choice and with each
 * algorithm forced. Every case is checked as tests/lib/colls.h says: each
 * rank's block carries bytes that differ per rank, element and case, so a
 * block in the wrong place or a stale block from an earlier case shows.
 *
 *  - auto (shm, socket): for each rank count 1..8, counts {0, 1, 7,
 *    nranks-1, 4099} x every datatype x three forms (out of place;
 *    WEFT_IN_PLACE; sendbuf = recvbuf + rank*count), plus 1M+3-element
 *    cases for three datatypes. Socket, and shm above 4 ranks, rotate the
 *    forms (one per case); above 4 ranks one of the 1M+3 cases runs,
 *    rotating with the rank count.
 *  - each algorithm of the library's table, forced (WEFT_ALGO): counts
 *    {1, 7, nranks-1, 4099, 65537}, forms in rotation; shm at 2, 3, 5, 8
 *    ranks, socket at 2, 3, 5.
 *  - bruck: counts 0, 1, 7, nranks-1, 4099 and 65537, every datatype (a
 *    third at the large counts), forms in rotation; shm 1..8 ranks, socket
 *    2, 3, 5.
 *  - hier (hosts): the layouts of tests/lib/integ_matrix.c, counts {1, 7,
 *    nranks-1, 4099, 65537} over four datatypes, the three forms in
 *    rotation.
 *  - verbs: tests/lib/integ_matrix.c; ofi: tests/integration/collectives.c.
 */
#include <stdio.h>
#include <string.h>

#include "algorithms/algo.h"
#include "colls.h"
#include "integ.h"
#include "integ_matrix.h"

#define BIG_COUNT     ((size_t)(1u << 20) + 3)
#define JOB_TIMEOUT_S 200.0

/* The forms in the order the rotations below take them. */
static const enum coll_form forms[3] = {COLL_OUT, COLL_IN_PLACE, COLL_OFFSET};

static const struct {
	weft_datatype_t dtype;
	enum coll_form form;
} big_cases[] = {
    {WEFT_FLOAT32, COLL_OUT},
    {WEFT_UINT8, COLL_IN_PLACE},
    {WEFT_FLOAT16, COLL_OFFSET},
};

struct matrix {
	bool rotate_forms; /* one form per case, in rotation, rather than all three */
	bool forced_algo;  /* counts {1, 7, nranks-1, 4099, 65537} */
	bool big;	   /* the 1M+3 cases */
};

static void run(struct coll_ctx *c, size_t count, weft_datatype_t dt, enum coll_form form)
{
	coll_allgather(c, &(struct coll_case){.count = count, .dt = dt, .form = form});
}

static int matrix_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct matrix *m = arg;
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	size_t counts[] = {0, 1, 7, (size_t)nranks - 1, 4099, 65537};
	size_t first = m->forced_algo ? 1 : 0, ncounts = m->forced_algo ? 6 : 5;
	for (size_t k = first; k < ncounts && !c.error; k++) {
		if (k == 3 && (counts[k] == 0 || counts[k] == 1 || counts[k] == 7))
			continue;
		for (int dt = 0; dt < WEFT_DATATYPE_COUNT && !c.error; dt++)
			for (int f = 0; f < 3 && !c.error; f++)
				if (!m->rotate_forms || f == (int)((k + (size_t)dt) % 3))
					run(&c, counts[k], (weft_datatype_t)dt, forms[f]);
	}
	for (size_t k = 0; m->big && k < 3 && !c.error; k++)
		if (nranks <= 4 || k == (size_t)nranks % 3) /* above 4 ranks, one, rotating */
			run(&c, BIG_COUNT, big_cases[k].dtype, big_cases[k].form);
	return coll_end(&c);
}

START_TEST(matrix)
{
	struct matrix m = {.rotate_forms = _i > 4 || integ_over("socket"), .big = true};
	integ_run_algo("allgather", NULL, NULL, _i, matrix_body, &m);
}
END_TEST

/* _i / 16: the algorithm's index in the table; _i % 16: the rank count's. */
static const int forced_nranks_shm[] = {2, 3, 5, 8}, forced_nranks_socket[] = {2, 3, 5};

START_TEST(forced)
{
	const struct weft_algo *a = weft_algos_for(WEFT_COLL_ALLGATHER)[_i / 16];
	const int *nranks = integ_over("socket") ? forced_nranks_socket : forced_nranks_shm;
	struct matrix m = {.rotate_forms = true, .forced_algo = true};
	integ_run_algo("allgather", a->name, NULL, nranks[_i % 16], matrix_body, &m);
}
END_TEST

static int bruck_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	size_t counts[] = {0, 1, 7, (size_t)nranks - 1, 4099, 65537};
	for (size_t k = 0; k < 6 && !c.error; k++) {
		if (k == 3 && counts[k] <= 1)
			continue;
		for (int dt = 0; dt < WEFT_DATATYPE_COUNT && !c.error; dt++)
			if (counts[k] < 4099 || dt % 3 == (int)k % 3)
				run(&c, counts[k], (weft_datatype_t)dt,
				    forms[(k + (size_t)dt) % 3]);
	}
	return coll_end(&c);
}

static const int bruck_socket[] = {2, 3, 5};

START_TEST(bruck)
{
	integ_run_algo("allgather", "bruck", NULL, integ_over("socket") ? bruck_socket[_i] : _i,
		       bruck_body, NULL);
}
END_TEST

static int hier_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	static const weft_datatype_t types[] = {WEFT_UINT8, WEFT_FLOAT16, WEFT_INT32, WEFT_FLOAT64};
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	size_t counts[] = {1, 7, (size_t)nranks - 1, 4099, 65537};
	for (size_t k = 0; k < 5 && !c.error && !c.failures; k++) {
		if (k == 2 && (counts[k] <= 1 || counts[k] == 7))
			continue;
		for (size_t d = 0; d < 4 && !c.error; d++)
			run(&c, counts[k], types[d], forms[(k + d) % 3]);
	}
	return coll_end(&c);
}

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void add_shm_socket(Suite *s)
{
	bool socket = integ_over("socket");
	TCase *tc = integ_tcase(s, "auto", JOB_TIMEOUT_S + 30);
	if (tc)
		tcase_add_loop_test(tc, matrix, 1, 9);
	const struct weft_algo *const *algos = weft_algos_for(WEFT_COLL_ALLGATHER);
	for (int a = 0; algos[a]; a++) {
		if (!(tc = integ_tcase(s, algos[a]->name, 4 * JOB_TIMEOUT_S)))
			continue;
		int n = socket ? N(forced_nranks_socket) : N(forced_nranks_shm);
		tcase_add_loop_test(tc, forced, a * 16, a * 16 + n);
		if (strcmp(algos[a]->name, "bruck") == 0)
			tcase_add_loop_test(tc, bruck, socket ? 0 : 1,
					    socket ? N(bruck_socket) : 9);
	}
}

static void add(Suite *s)
{
	if (integ_over("hosts"))
		integ_add_hosts(s, WEFT_COLL_ALLGATHER, hier_body);
	else if (integ_over("verbs"))
		integ_add_verbs(s, WEFT_COLL_ALLGATHER, true);
	else
		add_shm_socket(s);
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"allgather", "shm socket hosts verbs", add};
	return integ_main(argc, argv, &suite);
}
