/*
 * barrier.c — Barrier through the public API, over the transport the suite
 * runs with (tests/lib/integ.h), by the tuner's choice and with each
 * algorithm forced.
 *
 *  - auto (shm 1..8 ranks, socket 2, 3, 5, 7, 8): one rank sleeps 50 ms
 *    before entering; no rank may leave before the last one entered (entry
 *    times compared on CLOCK_MONOTONIC, gathered with an allgather), with
 *    weft_barrier and with weft_ibarrier polled by weft_test (which must
 *    hand back a request); then 16 back to back. Socket at 4 and 6 ranks,
 *    and every algorithm forced (shm 2, 3, 5, 8, socket 3, 5): four
 *    barriers, blocking and weft_ibarrier + weft_wait alternating.
 *  - dissemination: 12 rounds in which a different rank is 2 ms late;
 *    nobody may leave round k before everybody entered it (seen through
 *    memory the ranks share), before and after other traffic (allreduces
 *    and allgathers); shm 1..8 ranks, socket 2, 3, 5.
 *  - verbs: tests/lib/integ_matrix.c; ofi: tests/integration/collectives.c.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/algo.h"
#include "colls.h"
#include "integ.h"
#include "integ_matrix.h"

#define BARRIER_ROUNDS 12

/* Three trials, each with one rank 50 ms late: nobody leaves before the
 * last rank entered (the order is what is checked, so the lateness need only
 * be well above a wake-up: a barrier that let a rank go early would let it
 * go 50 ms before the sleeper entered). */
static int timing_trial(weft_comm_t comm, int rank, int n, int trial, double *enters)
{
	int sleeper = trial == 0 ? n - 1 : trial == 1 ? 0 : n / 2;
	bool nb = trial == 2;
	harness_progress("%sbarrier trial %d: rank %d sleeps 50 ms", nb ? "i" : "", trial, sleeper);
	if (rank == sleeper) {
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	double enter = harness_now();
	weft_status_t st;
	if (nb) {
		weft_request_t req = NULL;
		st = weft_ibarrier(comm, &req);
		if (st == WEFT_SUCCESS && !req)
			return harness_fail("weft_ibarrier: success and a NULL request");
		while (st == WEFT_SUCCESS && req)
			if ((st = weft_test(&req)) == WEFT_INPROGRESS)
				st = WEFT_SUCCESS;
	} else {
		st = weft_barrier(comm);
	}
	double leave = harness_now();
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "barrier trial %d", trial);
	st = weft_allgather(&enter, enters, 1, WEFT_FLOAT64, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "allgather of barrier entry times");
	for (int r = 0; r < n; r++)
		if (leave < enters[r])
			return harness_fail(
			    "%sbarrier trial %d: left at %.4f s, %.4f s before rank "
			    "%d entered",
			    nb ? "i" : "", trial, leave, enters[r] - leave, r);
	/* The sleeper entered >= 50 ms after it left the previous call. */
	if (n > 1 && leave - enters[sleeper] < 0)
		return harness_fail("%sbarrier trial %d: left before rank %d ended its 50 ms sleep",
				    nb ? "i" : "", trial, sleeper);
	return 0;
}

static int timing_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	double *enters = calloc((size_t)nranks, sizeof(double));
	if (!enters)
		return harness_fail("out of memory");
	int ret = 0;
	for (int trial = 0; trial < 3 && !ret; trial++)
		ret = timing_trial(comm, rank, nranks, trial, enters);
	for (int k = 0; k < 16 && !ret; k++) {
		harness_progress("back-to-back barrier %d", k);
		weft_status_t st = weft_barrier(comm);
		if (st != WEFT_SUCCESS)
			ret = harness_fail_status(comm, st, "back-to-back barrier %d", k);
	}
	free(enters);
	return ret;
}

static int four_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	for (int k = 0; k < 4; k++) {
		harness_progress("barrier %d", k);
		weft_request_t req = NULL;
		weft_status_t st =
		    k % 2 ? weft_barrier(comm) : coll_complete(weft_ibarrier(comm, &req), &req);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "barrier %d", k);
	}
	return 0;
}

/* Rounds in which a different rank is late each time; entered[r] is the
 * last round rank r entered. */
static void rounds(struct coll_ctx *c, int *round)
{
	_Atomic int *entered = harness_shared();
	for (int k = 0; k < BARRIER_ROUNDS && !c->error; k++) {
		int now = ++*round;
		char name[96];
		snprintf(name, sizeof(name), "barrier dissemination nranks %d round %d", c->nranks,
			 now);
		harness_progress("%s", name);
		if (c->rank == now % c->nranks) {
			struct timespec late = {0, 2000000};
			nanosleep(&late, NULL);
		}
		atomic_store(&entered[c->rank], now);
		c->cases++;
		if (coll_status(c, name, weft_barrier(c->comm)) != COLL_OK)
			return;
		for (int r = 0; r < c->nranks; r++) {
			int seen = atomic_load(&entered[r]);
			char why[128] = "";
			if (seen < now)
				snprintf(why, sizeof(why),
					 "left before rank %d entered (it is at round %d)", r,
					 seen);
			coll_verdict(c, name, why);
		}
	}
}

static int dissem_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	int round = 0;
	rounds(&c, &round);
	static const size_t counts[] = {7, 4099, 65537};
	for (size_t k = 0; k < 3 && !c.error; k++) {
		coll_allreduce(&c, &(struct coll_case){.count = counts[k], .dt = WEFT_FLOAT32});
		if (!c.error)
			coll_allgather(&c,
				       &(struct coll_case){.count = counts[k], .dt = WEFT_INT8});
	}
	if (!c.error)
		rounds(&c, &round); /* again, after other traffic */
	return coll_end(&c);
}

START_TEST(timing)
{
	bool quiet = integ_over("socket") && (_i == 4 || _i == 6);
	integ_run_algo("barrier", NULL, NULL, _i, quiet ? four_body : timing_body, NULL);
}
END_TEST

/* _i / 16: the algorithm's index in the table; _i % 16: the rank count's. */
static const int forced_shm[] = {2, 3, 5, 8}, forced_socket[] = {3, 5};

START_TEST(forced)
{
	const struct weft_algo *a = weft_algos_for(WEFT_COLL_BARRIER)[_i / 16];
	integ_run_algo("barrier", a->name, NULL,
		       integ_over("socket") ? forced_socket[_i % 16] : forced_shm[_i % 16],
		       four_body, NULL);
}
END_TEST

static const int dissem_socket[] = {2, 3, 5};

START_TEST(dissemination)
{
	integ_run_algo("barrier", "dissemination", NULL,
		       integ_over("socket") ? dissem_socket[_i] : _i, dissem_body, NULL);
}
END_TEST

static void add(Suite *s)
{
	bool socket = integ_over("socket");
	if (integ_over("verbs")) {
		integ_add_verbs(s, WEFT_COLL_BARRIER, false);
		return;
	}
	TCase *tc = integ_tcase(s, "auto", 150);
	if (tc)
		tcase_add_loop_test(tc, timing, socket ? 2 : 1, 9);
	const struct weft_algo *const *algos = weft_algos_for(WEFT_COLL_BARRIER);
	for (int a = 0; algos[a]; a++) {
		if (!(tc = integ_tcase(s, algos[a]->name, 150)))
			continue;
		tcase_add_loop_test(tc, forced, a * 16, a * 16 + (socket ? 2 : 4));
		if (strcmp(algos[a]->name, "dissemination") == 0)
			tcase_add_loop_test(tc, dissemination, socket ? 0 : 1, socket ? 3 : 9);
	}
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"barrier", "shm socket verbs", add};
	return integ_main(argc, argv, &suite);
}
