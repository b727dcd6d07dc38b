/*
 * broadcast.c — Broadcast through the public API, over the transport the
 * suite runs with (tests/lib/integ.h), by the tuner's choice and with each
 * algorithm forced. Every case is checked as tests/lib/colls.h says.
 *
 *  - auto and each algorithm (shm, socket: the plans of
 *    tests/lib/integ_matrix.h): counts 0, 1, 7, nranks-1, 4099 and 300001
 *    (up to 3 ranks), roots 0, last and middle, the root out of place (the
 *    others passing a NULL sendbuf), WEFT_IN_PLACE or sendbuf == recvbuf
 *    (the others the same form): every root and form per count (a cheap
 *    plan: one of each, rotating; the large count: one form per root),
 *    five datatypes in rotation, blocking and non-blocking alternating.
 *  - tree and ring: the walk of tests/lib/colls.h, its first four samples
 *    at each count, every rank but the root passing NULL; tree over shm at
 *    1..8 ranks and socket at 2, 3; ring over shm at 1, 2, 3, 5, 8, and
 *    with 4 KiB slots (hundreds of chunks per call) at 2, 3, 5, 8.
 *  - verbs: tests/lib/integ_matrix.c; ofi: tests/integration/collectives.c.
 */
#include <stdio.h>

#include "colls.h"
#include "integ.h"
#include "integ_matrix.h"

static int plan_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	static const enum coll_form forms[3] = {COLL_OUT, COLL_IN_PLACE, COLL_SAME};
	static const weft_datatype_t types[] = {WEFT_UINT8, WEFT_FLOAT32, WEFT_BFLOAT16, WEFT_INT64,
						WEFT_FLOAT16};
	const struct integ_plan *plan = arg;
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	size_t counts[6], ncounts = integ_plan_counts(plan, nranks, counts);
	int roots[3];
	size_t nroots = integ_roots(nranks, roots);
	for (size_t k = 0; k < ncounts && !c.error; k++)
		for (size_t r = 0; r < nroots && !c.error; r++)
			for (int f = 0; f < 3 && !c.error; f++) {
				if (plan->cheap && (r != k % nroots || (size_t)f != k % 3))
					continue;
				if (!plan->cheap && counts[k] == INTEG_PLAN_BIG &&
				    (size_t)f != r % 3)
					continue;
				c.rot++;
				coll_broadcast(&c, &(struct coll_case){.count = counts[k],
								       .dt = types[c.rot % 5],
								       .form = forms[f],
								       .root = roots[r],
								       .nb = c.rot % 3 == 1});
			}
	return coll_end(&c);
}

static void walk_case(struct coll_ctx *c, size_t k, int s, const struct coll_case *cs)
{
	if (s < 4)
		coll_broadcast(c, cs);
}

static int walk_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	coll_walk(&c, walk_case);
	return coll_end(&c);
}

static const int tree_socket[] = {2, 3}, ring_shm[] = {1, 2, 3, 5, 8},
		 small_chunks[] = {2, 3, 5, 8};

START_TEST(tree)
{
	integ_run_algo("broadcast", "tree", NULL, integ_over("socket") ? tree_socket[_i] : _i,
		       walk_body, NULL);
}
END_TEST

START_TEST(ring)
{
	integ_run_algo("broadcast", "ring", NULL, ring_shm[_i], walk_body, NULL);
}
END_TEST

/* 4 KiB chunks: hundreds per call, so windows wrap. */
START_TEST(ring_small_chunks)
{
	integ_run_algo("broadcast", "ring", "WEFT_SHM_SLOT_BYTES=4096", small_chunks[_i], walk_body,
		       NULL);
}
END_TEST

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void add(Suite *s)
{
	bool socket = integ_over("socket");
	if (integ_over("verbs")) {
		integ_add_verbs(s, WEFT_COLL_BROADCAST, false);
		return;
	}
	integ_add_plans(s, WEFT_COLL_BROADCAST, plan_body);
	TCase *tc = integ_tcase(s, "tree", 150);
	if (tc)
		tcase_add_loop_test(tc, tree, socket ? 0 : 1, socket ? N(tree_socket) : 9);
	if (!socket && (tc = integ_tcase(s, "ring", 150))) {
		tcase_add_loop_test(tc, ring, 0, N(ring_shm));
		tcase_add_loop_test(tc, ring_small_chunks, 0, N(small_chunks));
	}
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"broadcast", "shm socket verbs", add};
	return integ_main(argc, argv, &suite);
}
