/*
 * alltoall.c — AlltoAll and AlltoAllv through the public API, over the
 * transport the suite runs with (tests/lib/integ.h), by the tuner's choice
 * and with each algorithm forced. Every case is checked as
 * tests/lib/colls.h says: every (source, destination) block distinct.
 *
 *  - auto and each algorithm (shm, socket: the plans of
 *    tests/lib/integ_matrix.h): counts 0, 1, 7, nranks-1, 4099 and 300001
 *    (up to 3 ranks), element sizes 1, 2, 4 and 8 (a cheap plan and the
 *    large count: one, rotating), blocking and non-blocking alternating.
 *  - pairwise: the walk of tests/lib/colls.h, its first two samples at
 *    each count (the largest count divided by 8: n^2 blocks); shm at 1..8
 *    ranks, socket at 2, 3.
 *  - alltoallv (auto): per-pair counts that differ (some zero: "uneven"),
 *    a rank that neither sends nor receives while the others exchange
 *    ("one idle": its task must still run, or the sequence numbers of the
 *    next collectives would part), and all blocks empty; send blocks laid
 *    out in reverse rank order with gaps, receive blocks in rank order with
 *    one-element gaps that must stay untouched; element sizes 1, 2, 4 and
 *    8, bases 0, 1, 100 and 70000 elements (cheap jobs: half of them);
 *    shm at 1..8 ranks (cheap from 7), socket at 2..6 (cheap from 5).
 *  - verbs: tests/lib/integ_matrix.c; ofi: tests/integration/collectives.c.
 */
#include <stdio.h>

#include "colls.h"
#include "integ.h"
#include "integ_matrix.h"

static int plan_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	static const weft_datatype_t types[] = {WEFT_INT8, WEFT_FLOAT16, WEFT_UINT32, WEFT_FLOAT64};
	const struct integ_plan *plan = arg;
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	size_t counts[6], ncounts = integ_plan_counts(plan, nranks, counts);
	for (size_t k = 0; k < ncounts && !c.error; k++)
		for (int d = 0; d < 4 && !c.error; d++) {
			if ((plan->cheap || counts[k] == INTEG_PLAN_BIG) && (size_t)d != k % 4)
				continue;
			c.rot++;
			coll_alltoall(&c, &(struct coll_case){.count = counts[k],
							      .dt = types[d],
							      .nb = c.rot % 2 == 0});
		}
	return coll_end(&c);
}

static void walk_case(struct coll_ctx *c, size_t k, int s, const struct coll_case *cs)
{
	if (s >= 2)
		return;
	struct coll_case small = *cs;
	if (small.count == COLL_WALK_BIG)
		small.count /= 8;
	coll_alltoall(c, &small);
}

static int walk_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	coll_walk(&c, walk_case);
	return coll_end(&c);
}

static int v_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	static const weft_datatype_t types[] = {WEFT_UINT8, WEFT_FLOAT16, WEFT_INT32, WEFT_FLOAT64};
	static const size_t bases[] = {0, 1, 100, 70000};
	bool cheap = arg != NULL;
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	for (int p = 0; p < COLL_V_PATTERNS && !c.error; p++)
		for (size_t b = 0; b < 4 && !c.error; b++) {
			if ((p == COLL_V_EMPTY && b) || (cheap && b % 2 != (size_t)p % 2))
				continue;
			c.rot++;
			coll_alltoallv(&c, (enum coll_v_pattern)p, bases[b], types[c.rot % 4],
				       c.rot % 2);
		}
	return coll_end(&c);
}

static const int pairwise_socket[] = {2, 3};

START_TEST(pairwise)
{
	integ_run_algo("alltoall", "pairwise", NULL,
		       integ_over("socket") ? pairwise_socket[_i] : _i, walk_body, NULL);
}
END_TEST

START_TEST(alltoallv)
{
	static int cheap = 1;
	integ_run_algo("alltoallv", NULL, NULL, _i, v_body,
		       _i >= (integ_over("socket") ? 5 : 7) ? &cheap : NULL);
}
END_TEST

static void add(Suite *s)
{
	bool socket = integ_over("socket");
	if (integ_over("verbs")) {
		integ_add_verbs(s, WEFT_COLL_ALLTOALL, false);
		return;
	}
	integ_add_plans(s, WEFT_COLL_ALLTOALL, plan_body);
	TCase *tc = integ_tcase(s, "pairwise", 150);
	if (tc)
		tcase_add_loop_test(tc, pairwise, socket ? 0 : 1, socket ? 2 : 9);
	if ((tc = integ_tcase(s, "auto", 150)))
		tcase_add_loop_test(tc, alltoallv, socket ? 2 : 1, socket ? 7 : 9);
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"alltoall", "shm socket verbs", add};
	return integ_main(argc, argv, &suite);
}
