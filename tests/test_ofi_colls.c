/*
 * test_ofi_colls.c — every collective with every algorithm of the
 * library's table over the libfabric transport, through the public API:
 * tcp;ofi_rxm and sockets (pinned to lo), WEFT_OFI_PROTO=tagged and rma,
 * 1 to 8 ranks, and the tagged path over 3 endpoints (3 ranks) and 8 (2
 * ranks: WEFT_OFI_EPS).
 *
 * One set of rank processes per (provider, path, nranks) runs every case
 * in turn, forcing each algorithm through the communicator's tuner between
 * calls (as WEFT_ALGO would at init), then the tuner's own choice: counts
 * 0, 1, 7, 4099 and, up to 3 ranks, 65537 (several 64 KiB chunks:
 * WEFT_OFI_CHUNK=64K), out of place and in place in rotation, (datatype,
 * op) samples in rotation, roots first, last and middle. Every element is
 * checked against an exact value (harness.h). The matrices of shm and
 * socket live in test_colls, test_allreduce and test_allgather; this one
 * is smaller per case and wider in algorithms, so that every algorithm's
 * message pattern (windows, out-of-order completion on the tagged path,
 * reducing receives through the rma bounce) meets both ofi paths.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"
#include "core/comm.h"
#include "harness.h"
#include "ofi_warm_up.h"
#include "tune/tune.h"

#define JOB_TIMEOUT_S 150.0
#define BIG	      ((size_t)65537)

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

struct ctx {
	weft_comm_t comm;
	int rank, n;
	unsigned salt;
	char name[160];
};

static int wrong(struct ctx *c, const void *got, const void *want, size_t count, weft_datatype_t dt)
{
	char why[256];
	if (harness_compare(got, want, count, dt, why, sizeof(why)) == SIZE_MAX)
		return 0;
	return harness_fail("%s: %s", c->name, why);
}

static int failed(struct ctx *c, weft_status_t st)
{
	return st == WEFT_SUCCESS ? 0 : harness_fail_status(c->comm, st, "%s", c->name);
}

static void *xcalloc(size_t n)
{
	return calloc(1, n ? n : 1);
}

static int case_allreduce(struct ctx *c, size_t count, struct sample s, bool in_place)
{
	size_t bytes = count * harness_dtype_size(s.dt);
	char *in = xcalloc(bytes), *out = xcalloc(bytes), *want = xcalloc(bytes);
	harness_ar_input(in, count, s.dt, s.op, c->rank, c->n, c->salt);
	harness_ar_expected(want, count, s.dt, s.op, c->n, c->salt);
	if (in_place)
		memcpy(out, in, bytes);
	int ret = failed(
	    c, weft_allreduce(in_place ? WEFT_IN_PLACE : in, out, count, s.dt, s.op, c->comm));
	ret = ret ? ret : wrong(c, out, want, count, s.dt);
	free(in);
	free(out);
	free(want);
	return ret;
}

static int case_reduce_scatter(struct ctx *c, size_t count, struct sample s, bool in_place)
{
	size_t es = harness_dtype_size(s.dt), all = count * (size_t)c->n;
	char *in = xcalloc(all * es), *out = xcalloc(count * es), *want = xcalloc(all * es);
	harness_ar_input(in, all, s.dt, s.op, c->rank, c->n, c->salt);
	harness_ar_expected(want, all, s.dt, s.op, c->n, c->salt);
	weft_status_t st = in_place
			       ? weft_reduce_scatter(WEFT_IN_PLACE, in, count, s.dt, s.op, c->comm)
			       : weft_reduce_scatter(in, out, count, s.dt, s.op, c->comm);
	int ret = failed(c, st);
	ret = ret ? ret
		  : wrong(c, in_place ? in : out, want + (size_t)c->rank * count * es, count, s.dt);
	free(in);
	free(out);
	free(want);
	return ret;
}

static int case_allgather(struct ctx *c, size_t count, weft_datatype_t dt, bool in_place)
{
	size_t es = harness_dtype_size(dt), blk = count * es;
	char *in = xcalloc(blk), *out = xcalloc(blk * (size_t)c->n),
	     *want = xcalloc(blk * (size_t)c->n);
	for (int r = 0; r < c->n; r++)
		harness_ag_input(want + (size_t)r * blk, count, dt, r, c->salt);
	memcpy(in, want + (size_t)c->rank * blk, blk);
	if (in_place)
		memcpy(out + (size_t)c->rank * blk, in, blk);
	int ret = failed(c, weft_allgather(in_place ? WEFT_IN_PLACE : in, out, count, dt, c->comm));
	ret = ret ? ret : wrong(c, out, want, count * (size_t)c->n, dt);
	free(in);
	free(out);
	free(want);
	return ret;
}

static int case_broadcast(struct ctx *c, size_t count, weft_datatype_t dt, int root, bool in_place)
{
	size_t bytes = count * harness_dtype_size(dt);
	char *buf = xcalloc(bytes), *out = xcalloc(bytes), *want = xcalloc(bytes);
	harness_ag_input(want, count, dt, root + 1, c->salt);
	if (c->rank == root)
		memcpy(buf, want, bytes);
	weft_status_t st = in_place ? weft_broadcast(WEFT_IN_PLACE, buf, count, dt, root, c->comm)
				    : weft_broadcast(buf, out, count, dt, root, c->comm);
	int ret = failed(c, st);
	ret = ret ? ret : wrong(c, in_place ? buf : out, want, count, dt);
	free(buf);
	free(out);
	free(want);
	return ret;
}

static int case_reduce(struct ctx *c, size_t count, struct sample s, int root, bool in_place)
{
	size_t bytes = count * harness_dtype_size(s.dt);
	char *in = xcalloc(bytes), *out = xcalloc(bytes), *want = xcalloc(bytes);
	harness_ar_input(in, count, s.dt, s.op, c->rank, c->n, c->salt);
	harness_ar_expected(want, count, s.dt, s.op, c->n, c->salt);
	bool ip = in_place && c->rank == root;
	if (ip)
		memcpy(out, in, bytes);
	int ret =
	    failed(c, weft_reduce(ip ? WEFT_IN_PLACE : in, out, count, s.dt, s.op, root, c->comm));
	if (!ret && c->rank == root)
		ret = wrong(c, out, want, count, s.dt);
	free(in);
	free(out);
	free(want);
	return ret;
}

static int case_alltoall(struct ctx *c, size_t count, weft_datatype_t dt)
{
	size_t es = harness_dtype_size(dt), blk = count * es, all = blk * (size_t)c->n;
	char *in = xcalloc(all), *out = xcalloc(all), *want = xcalloc(all);
	for (int j = 0; j < c->n; j++) {
		harness_ag_input(in + (size_t)j * blk, count, dt, c->rank * 100 + j, c->salt);
		harness_ag_input(want + (size_t)j * blk, count, dt, j * 100 + c->rank, c->salt);
	}
	int ret = failed(c, weft_alltoall(in, out, count, dt, c->comm));
	ret = ret ? ret : wrong(c, out, want, count * (size_t)c->n, dt);
	free(in);
	free(out);
	free(want);
	return ret;
}

/* One call of @p coll with the k-th count; rotating sample, form, root. */
static int one_case(struct ctx *c, enum weft_coll_kind coll, size_t count, unsigned rot)
{
	struct sample s = samples[rot % NSAMPLES];
	bool in_place = rot % 2;
	int roots[3] = {0, c->n - 1, c->n / 2}, root = roots[rot % 3];
	c->salt++;
	switch (coll) {
	case WEFT_COLL_ALLREDUCE: return case_allreduce(c, count, s, in_place);
	case WEFT_COLL_REDUCE_SCATTER: return case_reduce_scatter(c, count, s, in_place);
	case WEFT_COLL_ALLGATHER: return case_allgather(c, count, s.dt, in_place);
	case WEFT_COLL_BROADCAST: return case_broadcast(c, count, s.dt, root, in_place);
	case WEFT_COLL_REDUCE: return case_reduce(c, count, s, root, in_place);
	case WEFT_COLL_ALLTOALL: return case_alltoall(c, count, s.dt);
	case WEFT_COLL_BARRIER: return failed(c, weft_barrier(c->comm));
	default: return 0;
	}
}

static const enum weft_coll_kind colls[] = {
    WEFT_COLL_ALLREDUCE, WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_ALLGATHER, WEFT_COLL_BROADCAST,
    WEFT_COLL_REDUCE,	 WEFT_COLL_ALLTOALL,	   WEFT_COLL_BARRIER,
};

/* Force @p algo (NULL: the tuner's choice) for @p coll from the next call. */
static void force(weft_comm_t comm, enum weft_coll_kind coll, const struct weft_algo *algo)
{
	comm->tuner->forced[coll] = algo;
	comm->tuner->memo[coll].algo = NULL;
}

static int matrix_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct ctx c = {.comm = comm, .rank = rank, .n = nranks};
	size_t counts[] = {0, 1, 7, 4099, BIG};
	size_t ncounts = nranks <= 3 ? 5 : 4;
	unsigned rot = 0;
	for (size_t k = 0; k < sizeof(colls) / sizeof(colls[0]); k++) {
		const struct weft_algo *const *algos = weft_algos_for(colls[k]);
		for (size_t a = 0; algos && (a == 0 || algos[a - 1]); a++) {
			const struct weft_algo *algo = algos[a]; /* NULL last: the tuner's choice */
			force(comm, colls[k], algo);
			for (size_t i = 0; i < ncounts; i++) {
				snprintf(c.name, sizeof(c.name), "%s/%s nranks %d count %zu rot %u",
					 weft_coll_name(colls[k]), algo ? algo->name : "auto",
					 nranks, counts[i], rot);
				harness_progress("%s", c.name);
				int ret = one_case(&c, colls[k], counts[i], rot++);
				if (ret)
					return ret;
			}
		}
		force(comm, colls[k], NULL);
	}
	return 0;
}

struct job {
	const char *prov, *proto;
	int nranks;
	int eps; /* WEFT_OFI_EPS (0: unset) */
};

static const struct job jobs_all[] = {
    {"tcp;ofi_rxm", "tagged", 1, 0}, {"tcp;ofi_rxm", "tagged", 2, 0},
    {"tcp;ofi_rxm", "tagged", 3, 0}, {"tcp;ofi_rxm", "tagged", 5, 0},
    {"tcp;ofi_rxm", "tagged", 8, 0}, {"tcp;ofi_rxm", "rma", 2, 0},
    {"tcp;ofi_rxm", "rma", 3, 0},    {"tcp;ofi_rxm", "rma", 5, 0},
    {"tcp;ofi_rxm", "rma", 8, 0},    {"sockets", "tagged", 2, 0},
    {"sockets", "tagged", 4, 0},     {"sockets", "rma", 3, 0},
    {"sockets", "rma", 4, 0},	     {"tcp;ofi_rxm", "tagged", 3, 3},
    {"tcp;ofi_rxm", "tagged", 2, 8},
};
#define NJOBS ((int)(sizeof(jobs_all) / sizeof(jobs_all[0])))
static const struct job *const jobs = jobs_all;

START_TEST(matrix)
{
	const struct job *j = &jobs[_i];
	char prov[64], proto[64], eps[32];
	snprintf(prov, sizeof(prov), "WEFT_OFI_PROVIDER=%s", j->prov);
	snprintf(proto, sizeof(proto), "WEFT_OFI_PROTO=%s", j->proto);
	snprintf(eps, sizeof(eps), "WEFT_OFI_EPS=%d", j->eps ? j->eps : 1);
	const char *const env[] = {"WEFT_TRANSPORTS=ofi",
				   "FI_TCP_IFACE=lo",
				   "FI_SOCKETS_IFACE=lo",
				   "WEFT_OFI_CHUNK=64K",
				   "WEFT_TIMEOUT=60",
				   prov,
				   proto,
				   eps,
				   NULL};
	struct harness_result res;
	harness_run(j->nranks, env, matrix_body, NULL, JOB_TIMEOUT_S, &res);
	printf("ofi colls %s %s nranks %d %s: %.1f s\n", j->prov, j->proto, j->nranks, eps,
	       res.seconds);
	fflush(stdout);
	ck_assert_msg(res.ok, "%s %s nranks %d %s:\n%s", j->prov, j->proto, j->nranks, eps,
		      res.summary);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ofi_colls");
	TCase *tc = tcase_create("matrix");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, matrix, 0, NJOBS);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("FI_SOCKETS_IFACE", "lo", 1);
	ofi_warm_up();
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed_tests = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed_tests ? EXIT_FAILURE : EXIT_SUCCESS;
}
