/*
 * perf_rt_weft.c — the runtime under the sweep in the Weft programs:
 * start-up (the shared local launcher for -np, a launcher found by
 * weft_launch_query, or one rank),
 * barrier and reductions of timings and counts over Weft itself, shut-down.
 * Empty in the MPI build.
 */
#define _GNU_SOURCE
#include "perf_int.h"

#ifndef PERF_MPI
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/launch/local_launch.h"

#define CHILD_GRACE_SECONDS 5.0 /* how long -np survivors get after a rank fails */

static weft_comm_t g_comm;
static bool g_mem_alloc; /* -R */
static const char *g_launch = "single rank";
static char g_launch_buf[64];

weft_comm_t perf_weft_comm(void)
{
	return g_comm;
}

weft_datatype_t perf_weft_datatype(enum perf_dtype dtype)
{
	static const weft_datatype_t map[PERF_DTYPE_COUNT] = {
	    [PERF_INT8] = WEFT_INT8,	 [PERF_UINT8] = WEFT_UINT8,
	    [PERF_INT32] = WEFT_INT32,	 [PERF_UINT32] = WEFT_UINT32,
	    [PERF_INT64] = WEFT_INT64,	 [PERF_UINT64] = WEFT_UINT64,
	    [PERF_HALF] = WEFT_FLOAT16,	 [PERF_BFLOAT16] = WEFT_BFLOAT16,
	    [PERF_FLOAT] = WEFT_FLOAT32, [PERF_DOUBLE] = WEFT_FLOAT64,
	};
	return map[dtype];
}

weft_op_t perf_weft_op(enum perf_op op)
{
	static const weft_op_t map[PERF_OP_COUNT] = {
	    [PERF_SUM] = WEFT_SUM, [PERF_PROD] = WEFT_PROD, [PERF_MIN] = WEFT_MIN,
	    [PERF_MAX] = WEFT_MAX, [PERF_AVG] = WEFT_AVG,
	};
	return map[op];
}

void perf_weft_check(weft_status_t st, const char *what)
{
	if (st != WEFT_SUCCESS)
		perf_die("%s failed: %s: %s", what, weft_status_string(st),
			 weft_comm_last_error(g_comm));
}

static void init_failed(weft_status_t st, const char *what)
{
	fflush(stdout);
	fprintf(stderr, "%s: rank %d: %s failed: %s: %s\n", perf_g_prog, perf_g_rank, what,
		weft_status_string(st), weft_init_last_error());
	exit(1);
}

/* Pin this rank to the (rank mod n)-th CPU it is allowed on. Open MPI's
 * default for np <= 2 is the same, so perf/compare compares like with like. */
static void bind_rank(int rank)
{
	cpu_set_t allowed, mine;
	int k, want;

	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		return;
	want = rank % CPU_COUNT(&allowed);
	for (k = 0; k < CPU_SETSIZE; k++)
		if (CPU_ISSET(k, &allowed) && want-- == 0)
			break;
	CPU_ZERO(&mine);
	CPU_SET(k, &mine);
	if (sched_setaffinity(0, sizeof(mine), &mine))
		fprintf(stderr, "%s: rank %d: cannot bind to cpu %d: %s\n", perf_g_prog, rank, k,
			strerror(errno));
}

/* -np N: the shared local launcher forks N ranks; the launcher process
 * waits for them here and exits with their verdict. */
static void init_local(const struct perf_opts *o)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	bool bind =
	    o->bind == PERF_BIND_CORE || (o->bind == PERF_BIND_AUTO && o->np <= 2 && o->np <= cpus);
	struct weft_local_job job = {
	    .nranks = o->np, .name = perf_g_prog, .grace_s = CHILD_GRACE_SECONDS};
	weft_unique_id_t id;
	weft_status_t st;
	char why[256];
	int rank;

	if (weft_local_start(&job, &rank, why, sizeof(why)) != WEFT_SUCCESS) {
		fprintf(stderr, "%s: cannot start the local ranks: %s\n", perf_g_prog, why);
		exit(1);
	}
	if (rank < 0)
		exit(weft_local_wait(&job) ? 1 : 0);
	perf_g_rank = rank;
	if (bind)
		bind_rank(rank);
	if (weft_local_get_id(&job, rank, &id, why, sizeof(why)) != WEFT_SUCCESS) {
		fprintf(stderr, "%s: rank %d: %s\n", perf_g_prog, rank, why);
		exit(1);
	}
	weft_local_free(&job);
	perf_g_nranks = o->np;
	g_launch = "local launcher -np";
	st = weft_comm_init_rank(&g_comm, perf_g_nranks, id, perf_g_rank, NULL);
	if (st != WEFT_SUCCESS)
		init_failed(st, "weft_comm_init_rank");
}

static void init_single(void)
{
	weft_unique_id_t id;
	weft_status_t st;

	perf_g_rank = 0;
	perf_g_nranks = 1;
	st = weft_get_unique_id(&id);
	if (st != WEFT_SUCCESS)
		init_failed(st, "weft_get_unique_id");
	st = weft_comm_init_rank(&g_comm, 1, id, 0, NULL);
	if (st != WEFT_SUCCESS)
		init_failed(st, "weft_comm_init_rank");
}

/* The launcher's word, or an exit: variables that are there but unusable
 * must never turn into N separate one-rank jobs. */
static void query_launcher(weft_launch_info_t *info)
{
	weft_status_t st = weft_launch_query(info);

	if (st == WEFT_SUCCESS)
		return;
	fflush(stdout);
	fprintf(stderr, "%s: cannot tell this process's rank: %s: %s\n", perf_g_prog,
		weft_status_string(st), weft_init_last_error());
	exit(1);
}

int perf_rt_launcher_rank(void)
{
	weft_launch_info_t info = WEFT_LAUNCH_INFO_INIT;

	return weft_launch_query(&info) == WEFT_SUCCESS ? info.rank : -1;
}

void perf_rt_exit(int code)
{
	exit(code);
}

void perf_rt_init(const struct perf_opts *o)
{
	weft_launch_info_t info = WEFT_LAUNCH_INFO_INIT;
	weft_status_t st;
	char algo[256];

	g_mem_alloc = o->mem_alloc;
	query_launcher(&info);
	if (o->algo) {
		perf_algo_setting(algo, sizeof(algo), o->algo);
		setenv("WEFT_ALGO", algo, 1);
	}
	if (o->np > 0) {
		/* Under a one-rank launch (srun -n 1) -np still makes its own job. */
		if (info.nranks > 1)
			perf_usage_error("-np: %s already started this process as rank %d of %d",
					 info.launcher, info.rank, info.nranks);
		init_local(o);
	} else if (strcmp(info.launcher, "none") != 0) {
		snprintf(g_launch_buf, sizeof(g_launch_buf), "launcher: %s", info.launcher);
		g_launch = g_launch_buf;
		perf_g_rank = info.rank;
		st = weft_comm_init_env(&g_comm, NULL);
		if (st != WEFT_SUCCESS)
			init_failed(st, "weft_comm_init_env");
		perf_weft_check(weft_comm_size(g_comm, &perf_g_nranks), "weft_comm_size");
		perf_weft_check(weft_comm_rank(g_comm, &perf_g_rank), "weft_comm_rank");
	} else {
		init_single();
	}
}

void perf_rt_barrier(void)
{
	int32_t in = 1, out = 0;

	perf_weft_check(weft_allreduce(&in, &out, 1, WEFT_INT32, WEFT_SUM, g_comm),
			"weft_allreduce (barrier)");
}

double perf_rt_max_double(double v)
{
	double out = 0;

	perf_weft_check(weft_allreduce(&v, &out, 1, WEFT_FLOAT64, WEFT_MAX, g_comm),
			"weft_allreduce (max time)");
	return out;
}

void perf_rt_sum_i64(int64_t *v, int n)
{
	perf_weft_check(weft_allreduce(v, v, (size_t)n, WEFT_INT64, WEFT_SUM, g_comm),
			"weft_allreduce (error counts)");
}

/* Every rank's record lands in its own slot; the others are zero, so a sum
 * is a gather that needs nothing but allreduce. */
void perf_rt_gather_info(const struct perf_rank_info *mine, struct perf_rank_info *all)
{
	memset(all, 0, (size_t)perf_g_nranks * sizeof(*all));
	all[perf_g_rank] = *mine;
	perf_weft_check(weft_allreduce(all, all, (size_t)perf_g_nranks * sizeof(*all), WEFT_UINT8,
				       WEFT_SUM, g_comm),
			"weft_allreduce (rank table)");
}

double perf_rt_wtime(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void perf_rt_describe(char *buf, size_t len)
{
	const char *tp = getenv("WEFT_TRANSPORTS");

	snprintf(buf, len, "Backend: %s %s (%s%s%s)", perf_g_test->backend, weft_version(),
		 g_launch, tp ? ", WEFT_TRANSPORTS=" : "", tp ? tp : "");
}

void *perf_rt_buf_alloc(size_t bytes)
{
	void *p;

	if (!g_mem_alloc) {
		if (posix_memalign(&p, 4096, bytes))
			perf_die("cannot allocate %zu bytes", bytes);
		return p;
	}
	weft_status_t st = weft_mem_alloc(g_comm, bytes, &p);
	if (st != WEFT_SUCCESS)
		perf_die("-R: weft_mem_alloc(%zu): %s: %s", bytes, weft_status_string(st),
			 weft_comm_last_error(g_comm));
	return p;
}

void perf_rt_buf_free(void *p)
{
	if (g_mem_alloc)
		weft_mem_free(g_comm, p);
	else
		free(p);
}

void perf_rt_finalize(void)
{
	weft_comm_destroy(g_comm);
	g_comm = NULL;
}

void perf_rt_abort(void)
{
	if (g_comm)
		weft_comm_abort(g_comm);
	exit(1);
}
#endif /* !PERF_MPI */
