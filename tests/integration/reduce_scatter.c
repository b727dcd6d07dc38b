/*
 * reduce_scatter.c — ReduceScatter through the public API, over the
 * transport the suite runs with (tests/lib/integ.h), by the tuner's choice
 * and with each algorithm forced. Every case is checked as
 * tests/lib/colls.h says.
 *
 *  - auto and each algorithm (shm, socket: the plans of
 *    tests/lib/integ_matrix.h): counts 0, 1, 7, nranks-1, 4099 and 300001
 *    (up to 3 ranks); out of place, WEFT_IN_PLACE (input in recvbuf,
 *    result at its start) and NCCL's in place (recvbuf = sendbuf + rank *
 *    count: the other blocks of sendbuf must stay as they were), every
 *    form per count (a cheap plan: one, rotating), (datatype, op) samples
 *    in rotation, blocking and non-blocking alternating.
 *  - ring: counts 0, 1, 7, nranks-1, 4099 and 65537, every datatype and op
 *    (a fifth of them at the large counts), all four forms (sendbuf ==
 *    recvbuf too) in rotation; over shm one case out of place large enough
 *    that the ring's partial blocks need a second, short round of the
 *    communicator's scratch, and one in NCCL's in place; shm 1..8 ranks,
 *    socket 2, 3, 5.
 *  - verbs: tests/lib/integ_matrix.c; ofi: tests/integration/collectives.c.
 */
#include <stdio.h>

#include "colls.h"
#include "integ.h"
#include "integ_matrix.h"

static int plan_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	static const enum coll_form forms[3] = {COLL_OUT, COLL_IN_PLACE, COLL_OFFSET};
	const struct integ_plan *plan = arg;
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	size_t counts[6], ncounts = integ_plan_counts(plan, nranks, counts);
	for (size_t k = 0; k < ncounts && !c.error; k++)
		for (int f = 0; f < 3 && !c.error; f++) {
			if (plan->cheap && (size_t)f != k % 3)
				continue;
			struct coll_case cs = {
			    .count = counts[k], .form = forms[f], .nb = ++c.rot % 3 == 0};
			coll_rotation(c.rot, &cs.dt, &cs.op);
			coll_reduce_scatter(&c, &cs);
		}
	return coll_end(&c);
}

static void run(struct coll_ctx *c, size_t count, weft_datatype_t dt, weft_op_t op,
		enum coll_form form)
{
	coll_reduce_scatter(c,
			    &(struct coll_case){.count = count, .dt = dt, .op = op, .form = form});
}

static int ring_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	size_t counts[] = {0, 1, 7, (size_t)nranks - 1, 4099, 65537};
	for (size_t k = 0; k < 6 && !c.error; k++) {
		if (k == 3 && counts[k] <= 1)
			continue;
		for (int dt = 0; dt < WEFT_DATATYPE_COUNT && !c.error; dt++)
			for (int op = 0; op < WEFT_OP_COUNT && !c.error; op++)
				if (counts[k] < 4099 || (dt * WEFT_OP_COUNT + op) % 5 == (int)k % 5)
					run(&c, counts[k], (weft_datatype_t)dt, (weft_op_t)op,
					    (enum coll_form)((k + (size_t)dt + (size_t)op) %
							     COLL_FORMS));
	}
	/* Out of place, the ring keeps n-2 partial blocks in the
	 * communicator's scratch, 4 chunks (4 x 128 KiB on shared memory by
	 * default): this count needs a second, short round of it. */
	if (arg && nranks >= 3 && !c.error) {
		size_t count = ((size_t)4 << 17) / (((size_t)nranks - 2) * 4) + 1001;
		run(&c, count, WEFT_FLOAT32, WEFT_SUM, COLL_OUT);
		if (!c.error)
			run(&c, count, WEFT_INT32, WEFT_MAX, COLL_OFFSET);
	}
	return coll_end(&c);
}

static const int ring_socket[] = {2, 3, 5};

START_TEST(ring)
{
	bool socket = integ_over("socket");
	int nranks = socket ? ring_socket[_i] : _i;
	static int rounds = 1;
	struct integ_env e;
	integ_env_init(&e, 60);
	integ_env_add(&e, "WEFT_ALGO=reduce_scatter:ring");
	char label[96];
	snprintf(label, sizeof(label), "reduce_scatter ring over %s, nranks %d", integ_transport(),
		 nranks);
	struct harness_job job = {
	    .nranks = nranks, .body = ring_body, .arg = socket ? NULL : &rounds, .timeout_s = 120};
	integ_run(&job, &e, label);
}
END_TEST

static void add(Suite *s)
{
	if (integ_over("verbs")) {
		integ_add_verbs(s, WEFT_COLL_REDUCE_SCATTER, false);
	} else {
		integ_add_plans(s, WEFT_COLL_REDUCE_SCATTER, plan_body);
		TCase *tc = integ_tcase(s, "ring", 150);
		if (tc)
			tcase_add_loop_test(tc, ring, integ_over("socket") ? 0 : 1,
					    integ_over("socket") ? 3 : 9);
	}
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"reduce_scatter", "shm socket verbs", add};
	return integ_main(argc, argv, &suite);
}
