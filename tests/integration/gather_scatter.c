/*
 * gather_scatter.c — Gather and Scatter through the public API, over the
 * transport the suite runs with (tests/lib/integ.h), by the tuner's
 * choice. Every case is checked as tests/lib/colls.h says.
 *
 * For each rank count (shm 1..8, socket 2..6), one set of rank processes
 * runs gather and scatter in turn: counts 0, 1, 7, nranks-1, 4099 and
 * 300001 (2-3 ranks), roots 0, last and middle, out of place, in place
 * with WEFT_IN_PLACE and by pointer (the root's block already in place), a
 * non-root's unused buffer passed as NULL or as a buffer that must stay
 * untouched; element sizes 1, 2, 4 and 8 in rotation; blocking and
 * non-blocking forms alternating. Cheap jobs (shm from 7 ranks, socket
 * from 5) and the large count take one form per (count, root).
 */
#include <stdio.h>

#include "colls.h"
#include "integ.h"

#define BIG_COUNT ((size_t)300001)

static int body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	static const weft_datatype_t types[] = {WEFT_UINT8, WEFT_FLOAT16, WEFT_INT32, WEFT_FLOAT64};
	static const enum coll_form forms[3] = {COLL_OUT, COLL_IN_PLACE, COLL_OFFSET};
	bool cheap = arg != NULL;
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	size_t counts[6], nc = 0;
	counts[nc++] = 0;
	counts[nc++] = 1;
	counts[nc++] = 7;
	if (nranks - 1 > 1 && nranks - 1 != 7)
		counts[nc++] = (size_t)nranks - 1;
	counts[nc++] = 4099;
	if (nranks <= 3 && !cheap)
		counts[nc++] = BIG_COUNT;
	int roots[3] = {0, nranks - 1, nranks / 2};
	int nroots = nranks > 2 ? 3 : nranks;
	for (size_t k = 0; k < nc && !c.error; k++)
		for (int r = 0; r < nroots && !c.error; r++)
			for (int f = 0; f < 3 && !c.error; f++) {
				bool few = cheap || counts[k] == BIG_COUNT;
				if (few && (size_t)f != (k + (size_t)r) % 3)
					continue;
				c.rot++;
				struct coll_case g = {.count = counts[k],
						      .dt = types[c.rot % 4],
						      .form = forms[f],
						      .root = roots[r],
						      .nb = c.rot % 3 == 0};
				if (coll_gather(&c, &g) == COLL_ERROR)
					break;
				struct coll_case s = g;
				s.dt = types[(c.rot + 1) % 4];
				s.nb = c.rot % 3 == 1;
				coll_scatter(&c, &s);
			}
	return coll_end(&c);
}

START_TEST(matrix)
{
	static int cheap = 1;
	bool is_cheap = _i >= (integ_over("socket") ? 5 : 7);
	struct integ_env e;
	integ_env_init(&e, 60);
	char label[96];
	snprintf(label, sizeof(label), "gather/scatter over %s, nranks %d%s", integ_transport(), _i,
		 is_cheap ? " (cheap)" : "");
	struct harness_job job = {
	    .nranks = _i, .body = body, .arg = is_cheap ? &cheap : NULL, .timeout_s = 120};
	integ_run(&job, &e, label);
}
END_TEST

static void add(Suite *s)
{
	TCase *tc = integ_tcase(s, "auto", 150);
	if (tc)
		tcase_add_loop_test(tc, matrix, integ_over("socket") ? 2 : 1,
				    integ_over("socket") ? 7 : 9);
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"gather_scatter", "shm socket", add};
	return integ_main(argc, argv, &suite);
}
