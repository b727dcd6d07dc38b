/*
 * reduce.c — Reduce through the public API, over the transport the
 * suite runs with (tests/lib/integ.h), by the tuner's choice and with each
 * algorithm forced. Every case is checked as tests/lib/colls.h says.
 *
 *  - auto and each algorithm (shm, socket: the plans of
 *    tests/lib/integ_matrix.h): counts 0, 1, 7, nranks-1, 4099 and 300001
 *    (up to 3 ranks), roots 0, last and middle, the root out of place,
 *    WEFT_IN_PLACE or sendbuf == recvbuf; a non-root passes a NULL recvbuf
 *    every other case, else one that must stay untouched (its WEFT_IN_PLACE
 *    form: an ordinary sendbuf; its sendbuf == recvbuf form: unchanged);
 *    every root and form per count (a cheap plan: one of each, rotating;
 *    the large count: one form per root), (datatype, op) samples in
 *    rotation, blocking and non-blocking alternating.
 *  - tree: the walk of tests/lib/colls.h, every rank but the root passing
 *    its input out of place and a NULL recvbuf; shm at 1..8 ranks, and
 *    with 4 KiB slots (the root reuses its staging slots) at 2, 3, 5, 8;
 *    socket at 2, 3.
 *  - verbs: tests/lib/integ_matrix.c; ofi: tests/integration/collectives.c.
 */
#include <stdio.h>

#include "colls.h"
#include "integ.h"
#include "integ_matrix.h"

static int plan_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	static const enum coll_form forms[3] = {COLL_OUT, COLL_IN_PLACE, COLL_SAME};
	const struct integ_plan *plan = arg;
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	size_t counts[6], ncounts = integ_plan_counts(plan, nranks, counts);
	int roots[3];
	size_t nroots = integ_roots(nranks, roots);
	for (size_t k = 0; k < ncounts && !c.error; k++)
		for (size_t r = 0; r < nroots && !c.error; r++)
			for (int f = 0; f < 3 && !c.error; f++) {
				if (plan->cheap &&
				    (r != (k + 1) % nroots || (size_t)f != (k + 1) % 3))
					continue;
				if (!plan->cheap && counts[k] == INTEG_PLAN_BIG &&
				    (size_t)f != r % 3)
					continue;
				struct coll_case cs = {.count = counts[k],
						       .form = forms[f],
						       .root = roots[r],
						       .nb = ++c.rot % 3 == 2};
				coll_rotation(c.rot, &cs.dt, &cs.op);
				coll_reduce(&c, &cs);
			}
	return coll_end(&c);
}

static void walk_case(struct coll_ctx *c, size_t k, int s, const struct coll_case *cs)
{
	coll_reduce(c, cs);
}

static int walk_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	coll_walk(&c, walk_case);
	return coll_end(&c);
}

static const int tree_socket[] = {2, 3}, small_chunks[] = {2, 3, 5, 8};

START_TEST(tree)
{
	integ_run_algo("reduce", "tree", NULL, integ_over("socket") ? tree_socket[_i] : _i,
		       walk_body, NULL);
}
END_TEST

/* 4 KiB chunks: hundreds per call; the root reuses its staging slots. */
START_TEST(tree_small_chunks)
{
	integ_run_algo("reduce", "tree", "WEFT_SHM_SLOT_BYTES=4096", small_chunks[_i], walk_body,
		       NULL);
}
END_TEST

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void add(Suite *s)
{
	bool socket = integ_over("socket");
	if (integ_over("verbs")) {
		integ_add_verbs(s, WEFT_COLL_REDUCE, false);
		return;
	}
	integ_add_plans(s, WEFT_COLL_REDUCE, plan_body);
	TCase *tc = integ_tcase(s, "tree", 150);
	if (tc) {
		tcase_add_loop_test(tc, tree, socket ? 0 : 1, socket ? N(tree_socket) : 9);
		if (!socket)
			tcase_add_loop_test(tc, tree_small_chunks, 0, N(small_chunks));
	}
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"reduce", "shm socket verbs", add};
	return integ_main(argc, argv, &suite);
}
