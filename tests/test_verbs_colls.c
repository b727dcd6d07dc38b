/*
 * test_verbs_colls.c — every collective through the public API over the
 * verbs transport on the test double (WEFT_TRANSPORTS=verbs,
 * WEFT_IBVERBS_LIB=build/tests/libfake_ibverbs.so), and the failures a
 * job over verbs must survive.
 *
 *  - at 2, 3 and 4 ranks: allreduce, allgather, reduce_scatter, broadcast,
 *    reduce, alltoall, send/recv (a ring, in a group) and barrier, counts
 *    0, 1, 7, nranks - 1, 4099 and 70001, (datatype, op) pairs in
 *    rotation, in place and out of place in turn, every element checked
 *    against an exact value;
 *  - at 3 ranks, each allreduce and allgather algorithm forced in turn;
 *  - a rank killed (SIGKILL) between allreduces, and a rank that aborts:
 *    every survivor fails with WEFT_ERR_REMOTE within 5 s, with a message,
 *    including the ranks that only hear of it from another survivor.
 */
#define _GNU_SOURCE
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"
#include "harness.h"
#include "verbs_env.h"

#define JOB_TIMEOUT_S 120.0

struct sample {
	weft_datatype_t dt;
	weft_op_t op;
};

static const struct sample samples[] = {
    {WEFT_FLOAT32, WEFT_SUM},  {WEFT_FLOAT16, WEFT_AVG}, {WEFT_INT32, WEFT_MAX},
    {WEFT_BFLOAT16, WEFT_SUM}, {WEFT_UINT8, WEFT_MIN},	 {WEFT_FLOAT64, WEFT_PROD},
    {WEFT_INT64, WEFT_AVG},    {WEFT_UINT64, WEFT_SUM},	 {WEFT_INT8, WEFT_PROD},
};
#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))

static const char *const verbs_extra[] = {"WEFT_IB_SLOTS=4", "WEFT_IB_SLOT_BYTES=32K", NULL};

struct ctx {
	weft_comm_t comm;
	int rank, nranks;
	unsigned salt;
	size_t es; /* element size of the current case */
};

static int compare(struct ctx *c, const char *what, const void *got, const void *want, size_t count,
		   weft_datatype_t dt, bool in_place)
{
	char why[256];
	if (harness_compare(got, want, count, dt, why, sizeof(why)) == SIZE_MAX)
		return 0;
	return harness_fail("%s %s count %zu %s: %s", what, harness_dtype_name(dt), count,
			    in_place ? "in place" : "out of place", why);
}

static void *zalloc(size_t n)
{
	return calloc(1, n ? n : 1);
}

static int ar_case(struct ctx *c, size_t count, struct sample s, bool in_place)
{
	size_t bytes = count * harness_dtype_size(s.dt);
	char *in = zalloc(bytes), *out = zalloc(bytes), *want = zalloc(bytes);
	harness_ar_input(in, count, s.dt, s.op, c->rank, c->nranks, c->salt);
	harness_ar_expected(want, count, s.dt, s.op, c->nranks, c->salt);
	memcpy(out, in, bytes);
	weft_status_t st =
	    weft_allreduce(in_place ? WEFT_IN_PLACE : in, out, count, s.dt, s.op, c->comm);
	int ret = st != WEFT_SUCCESS ? harness_fail_status(c->comm, st, "allreduce %zu", count)
				     : compare(c, "allreduce", out, want, count, s.dt, in_place);
	free(in);
	free(out);
	free(want);
	return ret;
}

static int ag_case(struct ctx *c, size_t count, weft_datatype_t dt, bool in_place)
{
	size_t block = count * harness_dtype_size(dt), n = (size_t)c->nranks;
	char *in = zalloc(block), *out = zalloc(n * block), *want = zalloc(n * block);
	for (int r = 0; r < c->nranks; r++)
		harness_ag_input(want + (size_t)r * block, count, dt, r, c->salt);
	memcpy(in, want + (size_t)c->rank * block, block);
	if (in_place)
		memcpy(out + (size_t)c->rank * block, in, block);
	weft_status_t st = weft_allgather(in_place ? WEFT_IN_PLACE : in, out, count, dt, c->comm);
	int ret = st != WEFT_SUCCESS ? harness_fail_status(c->comm, st, "allgather %zu", count)
				     : compare(c, "allgather", out, want, n * count, dt, in_place);
	free(in);
	free(out);
	free(want);
	return ret;
}

static int rs_case(struct ctx *c, size_t count, struct sample s, bool in_place)
{
	size_t es = harness_dtype_size(s.dt), n = (size_t)c->nranks;
	char *in = zalloc(n * count * es), *out = zalloc(n * count * es),
	     *want = zalloc(n * count * es);
	harness_ar_input(in, n * count, s.dt, s.op, c->rank, c->nranks, c->salt);
	harness_ar_expected(want, n * count, s.dt, s.op, c->nranks, c->salt);
	if (in_place)
		memcpy(out, in, n * count * es);
	weft_status_t st =
	    weft_reduce_scatter(in_place ? WEFT_IN_PLACE : in, out, count, s.dt, s.op, c->comm);
	int ret = st != WEFT_SUCCESS
		      ? harness_fail_status(c->comm, st, "reduce_scatter %zu", count)
		      : compare(c, "reduce_scatter", out, want + (size_t)c->rank * count * es,
				count, s.dt, in_place);
	free(in);
	free(out);
	free(want);
	return ret;
}

static int bc_case(struct ctx *c, size_t count, weft_datatype_t dt, bool in_place)
{
	int root = (int)(c->salt % (unsigned)c->nranks);
	size_t bytes = count * harness_dtype_size(dt);
	char *buf = zalloc(bytes), *want = zalloc(bytes), *src = zalloc(bytes);
	harness_ag_input(want, count, dt, root, c->salt);
	if (c->rank == root) {
		memcpy(src, want, bytes);
		if (in_place)
			memcpy(buf, want, bytes);
	}
	weft_status_t st = weft_broadcast(in_place && c->rank == root ? WEFT_IN_PLACE : src, buf,
					  count, dt, root, c->comm);
	int ret = st != WEFT_SUCCESS ? harness_fail_status(c->comm, st, "broadcast %zu", count)
				     : compare(c, "broadcast", buf, want, count, dt, in_place);
	free(buf);
	free(want);
	free(src);
	return ret;
}

static int rd_case(struct ctx *c, size_t count, struct sample s, bool in_place)
{
	int root = (int)((c->salt + 1) % (unsigned)c->nranks);
	size_t bytes = count * harness_dtype_size(s.dt);
	char *in = zalloc(bytes), *out = zalloc(bytes), *want = zalloc(bytes);
	harness_ar_input(in, count, s.dt, s.op, c->rank, c->nranks, c->salt);
	harness_ar_expected(want, count, s.dt, s.op, c->nranks, c->salt);
	bool ip = in_place && c->rank == root;
	if (ip)
		memcpy(out, in, bytes);
	weft_status_t st =
	    weft_reduce(ip ? WEFT_IN_PLACE : in, out, count, s.dt, s.op, root, c->comm);
	int ret = st != WEFT_SUCCESS ? harness_fail_status(c->comm, st, "reduce %zu", count)
		  : c->rank == root  ? compare(c, "reduce", out, want, count, s.dt, ip)
				     : 0;
	free(in);
	free(out);
	free(want);
	return ret;
}

static int a2a_case(struct ctx *c, size_t count, weft_datatype_t dt)
{
	size_t block = count * harness_dtype_size(dt), n = (size_t)c->nranks;
	char *in = zalloc(n * block), *out = zalloc(n * block), *want = zalloc(n * block);
	for (int j = 0; j < c->nranks; j++) {
		harness_ag_input(in + (size_t)j * block, count, dt, c->rank * 16 + j, c->salt);
		harness_ag_input(want + (size_t)j * block, count, dt, j * 16 + c->rank, c->salt);
	}
	weft_status_t st = weft_alltoall(in, out, count, dt, c->comm);
	int ret = st != WEFT_SUCCESS ? harness_fail_status(c->comm, st, "alltoall %zu", count)
				     : compare(c, "alltoall", out, want, n * count, dt, false);
	free(in);
	free(out);
	free(want);
	return ret;
}

/* Send and receive around the ring, both at once in a group. */
static int sr_case(struct ctx *c, size_t count, weft_datatype_t dt)
{
	size_t bytes = count * harness_dtype_size(dt);
	int next = (c->rank + 1) % c->nranks, prev = (c->rank + c->nranks - 1) % c->nranks;
	char *in = zalloc(bytes), *out = zalloc(bytes), *want = zalloc(bytes);
	harness_ag_input(in, count, dt, c->rank, c->salt);
	harness_ag_input(want, count, dt, prev, c->salt);
	weft_status_t st = weft_group_start();
	if (st == WEFT_SUCCESS)
		st = weft_send(in, count, dt, next, c->comm);
	if (st == WEFT_SUCCESS)
		st = weft_recv(out, count, dt, prev, c->comm);
	weft_status_t end = weft_group_end();
	if (st == WEFT_SUCCESS)
		st = end;
	int ret = st != WEFT_SUCCESS ? harness_fail_status(c->comm, st, "send/recv %zu", count)
				     : compare(c, "send/recv", out, want, count, dt, false);
	free(in);
	free(out);
	free(want);
	return ret;
}

/* arg: NULL, every collective; "allreduce"/"allgather": that one only. */
static int matrix_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const char *only = arg;
	const size_t counts[] = {0, 1, 7, (size_t)nranks - 1, 4099, 70001};
	struct ctx c = {.comm = comm, .rank = rank, .nranks = nranks};
	unsigned rot = 0;
	int ret = 0;
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]) && !ret; k++) {
		size_t n = counts[k];
		for (int coll = 0; coll < 7 && !ret; coll++) {
			struct sample s = samples[rot % NSAMPLES];
			bool in_place = rot % 2;
			c.salt = ++rot;
			harness_progress("collective %d count %zu", coll, n);
			if (only && !((coll == 0 && strcmp(only, "allreduce") == 0) ||
				      (coll == 1 && strcmp(only, "allgather") == 0)))
				continue;
			switch (coll) {
			case 0: ret = ar_case(&c, n, s, in_place); break;
			case 1: ret = ag_case(&c, n, s.dt, in_place); break;
			case 2: ret = rs_case(&c, n, s, in_place); break;
			case 3: ret = bc_case(&c, n, s.dt, in_place); break;
			case 4: ret = rd_case(&c, n, s, in_place); break;
			case 5: ret = a2a_case(&c, n, s.dt); break;
			default: ret = sr_case(&c, n, s.dt); break;
			}
		}
	}
	for (int k = 0; k < 3 && !ret; k++) {
		weft_status_t st = weft_barrier(comm);
		if (st != WEFT_SUCCESS)
			ret = harness_fail_status(comm, st, "barrier %d", k);
	}
	return ret;
}

static void run_job(int nranks, const char *algo_env, void *arg)
{
	const char *extra[4] = {verbs_extra[0], verbs_extra[1], algo_env, NULL};
	struct harness_result res;
	harness_run(nranks, verbs_env(extra), matrix_body, arg, JOB_TIMEOUT_S, &res);
	printf("verbs colls nranks %d%s%s: %.1f s\n", nranks, algo_env ? " " : "",
	       algo_env ? algo_env : "", res.seconds);
	fflush(stdout);
	ck_assert_msg(res.ok, "nranks %d %s:\n%s", nranks, algo_env ? algo_env : "", res.summary);
}

START_TEST(matrix)
{
	run_job(2 + _i, NULL, NULL);
}
END_TEST

START_TEST(forced)
{
	static const enum weft_coll_kind colls[] = {WEFT_COLL_ALLREDUCE, WEFT_COLL_ALLGATHER};
	for (size_t c = 0; c < 2; c++) {
		const struct weft_algo *const *algos = weft_algos_for(colls[c]);
		for (size_t k = 0; algos && algos[k]; k++) {
			char spec[128];
			snprintf(spec, sizeof(spec), "WEFT_ALGO=%s:%s", weft_coll_name(colls[c]),
				 algos[k]->name);
			run_job(3, spec, (void *)weft_coll_name(colls[c]));
		}
	}
}
END_TEST

/* ---- failures ---- */

struct death {
	bool abort; /* weft_comm_abort instead of SIGKILL */
	int victim, at_iter;
};

static int64_t *death_ns(void)
{
	return harness_shared();
}

static int death_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct death *d = arg;
	enum { N = 4099 };
	float *buf = malloc(N * sizeof(float));
	if (!buf)
		return harness_fail("out of memory");
	for (int iter = 0; iter < 10000; iter++) {
		if (rank == d->victim && iter == d->at_iter) {
			__atomic_store_n(death_ns(), (int64_t)(harness_now() * 1e9),
					 __ATOMIC_SEQ_CST);
			if (!d->abort)
				kill(getpid(), SIGKILL);
			weft_comm_abort(comm);
			weft_status_t st =
			    weft_allreduce(WEFT_IN_PLACE, buf, N, WEFT_FLOAT32, WEFT_SUM, comm);
			free(buf);
			return st == WEFT_ERR_ABORTED ? 0 : harness_fail("after abort: %d", st);
		}
		for (int i = 0; i < N; i++)
			buf[i] = 1.0f;
		harness_progress("allreduce %d", iter);
		weft_status_t st =
		    weft_allreduce(WEFT_IN_PLACE, buf, N, WEFT_FLOAT32, WEFT_SUM, comm);
		if (st == WEFT_SUCCESS) {
			if (buf[N - 1] != (float)nranks)
				return harness_fail("allreduce %d: %g", iter, buf[N - 1]);
			continue;
		}
		int64_t died = __atomic_load_n(death_ns(), __ATOMIC_SEQ_CST);
		double after = harness_now() - (double)died * 1e-9;
		const char *msg = weft_comm_last_error(comm);
		free(buf);
		if (!died)
			return harness_fail_status(comm, st, "allreduce %d failed first", iter);
		if (st != WEFT_ERR_REMOTE)
			return harness_fail_status(comm, st, "expected WEFT_ERR_REMOTE");
		if (after > 5.0)
			return harness_fail("noticed %.1f s after the victim's end", after);
		if (!msg || !strstr(msg, "verbs"))
			return harness_fail("message \"%s\" does not come from verbs", msg);
		fprintf(stderr, "rank %d: failed %.2f s after rank %d's %s: %s\n", rank, after,
			d->victim, d->abort ? "abort" : "death", msg);
		return 0;
	}
	return harness_fail("no error after 10000 allreduces");
}

static void run_death(int nranks, struct death d)
{
	struct harness_result res;
	harness_run(nranks, verbs_env(verbs_extra), death_body, &d, JOB_TIMEOUT_S, &res);
	for (int r = 0; r < nranks; r++) {
		const struct harness_rank_result *rr = &res.rank[r];
		if (r == d.victim && !d.abort)
			ck_assert_msg(rr->end == HARNESS_SIGNALED, "the victim lived: %s",
				      res.summary);
		else
			ck_assert_msg(rr->end == HARNESS_EXITED && rr->code == 0, "%s",
				      res.summary);
	}
}

START_TEST(peer_killed)
{
	run_death(4, (struct death){.victim = 1 + _i, .at_iter = 15});
}
END_TEST

START_TEST(peer_aborts)
{
	run_death(3, (struct death){.abort = true, .victim = 2, .at_iter = 10});
}
END_TEST

static Suite *colls_suite(void)
{
	Suite *s = suite_create("verbs_colls");
	TCase *tc = tcase_create("matrix");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, matrix, 0, 3); /* 2, 3, 4 ranks */
	suite_add_tcase(s, tc);
	TCase *tf = tcase_create("forced");
	tcase_set_timeout(tf, 4 * JOB_TIMEOUT_S);
	tcase_add_test(tf, forced);
	suite_add_tcase(s, tf);
	TCase *td = tcase_create("failures");
	tcase_set_timeout(td, JOB_TIMEOUT_S);
	tcase_add_loop_test(td, peer_killed, 0, 2);
	tcase_add_test(td, peer_aborts);
	suite_add_tcase(s, td);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(colls_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
