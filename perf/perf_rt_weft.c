/*
 * perf_rt_weft.c — the runtime under the sweep in the Weft programs:
 * start-up (local launcher -np, a launcher's environment, or one rank),
 * barrier and reductions of timings and counts over Weft itself, shut-down.
 * Empty in the MPI build.
 */
#include "perf_int.h"

#ifndef PERF_MPI
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static weft_comm_t g_comm;
static const char *g_launch = "single rank";

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

/* The variable that says a launcher started us, or NULL. */
static const char *launcher_var(void)
{
	static const char *const vars[] = {"WEFT_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (getenv(vars[i]))
			return vars[i];
	return NULL;
}

static void init_local(const struct perf_opts *o)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	bool bind =
	    o->bind == PERF_BIND_CORE || (o->bind == PERF_BIND_AUTO && o->np <= 2 && o->np <= cpus);
	weft_unique_id_t id;
	weft_status_t st;

	perf_g_rank = perf_launch_local(o->np, bind, &id);
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

void perf_rt_init(const struct perf_opts *o)
{
	const char *var = launcher_var();
	weft_status_t st;
	char algo[256];

	if (o->algo) {
		perf_algo_setting(algo, sizeof(algo), o->algo);
		setenv("WEFT_ALGO", algo, 1);
	}
	if (o->np > 0) {
		if (var)
			perf_usage_error("-np: a launcher already started this process (%s is set)",
					 var);
		init_local(o);
	} else if (var) {
		perf_g_rank = perf_launcher_rank();
		g_launch = "launcher environment";
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
