/*
 * perf_rt_mpi.c — the runtime under the sweep when the perf programs are
 * MPI baselines (built with -DPERF_MPI): start-up, barrier, reductions of
 * timings and error counts, shut-down, all over MPI_COMM_WORLD. Empty in
 * the Weft build.
 */
#include "perf_int.h"

#ifdef PERF_MPI
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

MPI_Datatype perf_mpi_datatype(enum perf_dtype dtype)
{
	switch (dtype) {
	case PERF_INT8: return MPI_INT8_T;
	case PERF_UINT8: return MPI_UINT8_T;
	case PERF_INT32: return MPI_INT32_T;
	case PERF_UINT32: return MPI_UINT32_T;
	case PERF_INT64: return MPI_INT64_T;
	case PERF_UINT64: return MPI_UINT64_T;
	case PERF_FLOAT: return MPI_FLOAT;
	case PERF_DOUBLE: return MPI_DOUBLE;
	default: return MPI_DATATYPE_NULL;
	}
}

MPI_Op perf_mpi_op(enum perf_op op)
{
	switch (op) {
	case PERF_SUM: return MPI_SUM;
	case PERF_PROD: return MPI_PROD;
	case PERF_MIN: return MPI_MIN;
	case PERF_MAX: return MPI_MAX;
	default: return MPI_OP_NULL;
	}
}

const char *perf_mpi_unsupported(enum perf_dtype dtype, enum perf_op op)
{
	if (perf_mpi_datatype(dtype) == MPI_DATATYPE_NULL)
		return "MPI has no half or bfloat16 datatype";
	if (perf_coll_info(perf_g_test->coll)->has_op && perf_mpi_op(op) == MPI_OP_NULL)
		return "MPI has no avg reduction";
	return NULL;
}

void perf_mpi_check(int err, const char *what)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (err == MPI_SUCCESS)
		return;
	MPI_Error_string(err, msg, &len);
	perf_die("%s failed: %s", what, msg);
}

int perf_mpi_count(size_t count, const char *what)
{
	/* counts above INT_MAX would need MPI-4 large-count calls */
	if (count > (size_t)0x7fffffff)
		perf_die("count %zu is more than %s's int count", count, what);
	return (int)count;
}

/* MPI's own launch tells the rank: MPI_Init early, for an option error,
 * is cheaper than a second table of launcher variables. */
static void mpi_up(void)
{
	int up = 0;

	MPI_Initialized(&up);
	if (!up)
		perf_mpi_check(MPI_Init(NULL, NULL), "MPI_Init");
}

int perf_rt_launcher_rank(void)
{
	int rank = -1;

	mpi_up();
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	return rank;
}

void perf_rt_exit(int code)
{
	int up = 0, down = 0;

	MPI_Initialized(&up);
	MPI_Finalized(&down);
	if (up && !down)
		MPI_Finalize();
	exit(code);
}

void perf_rt_init(const struct perf_opts *o)
{
	mpi_up();
	/* errors come back to us, so they are reported with the call's name */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &perf_g_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &perf_g_nranks);
}

void perf_rt_barrier(void)
{
	perf_mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

double perf_rt_max_double(double v)
{
	double out;

	perf_mpi_check(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
		       "MPI_Allreduce");
	return out;
}

void perf_rt_sum_i64(int64_t *v, int n)
{
	perf_mpi_check(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD),
		       "MPI_Allreduce");
}

void perf_rt_gather_info(const struct perf_rank_info *mine, struct perf_rank_info *all)
{
	perf_mpi_check(MPI_Gather(mine, (int)sizeof(*mine), MPI_BYTE, all, (int)sizeof(*mine),
				  MPI_BYTE, 0, MPI_COMM_WORLD),
		       "MPI_Gather");
}

double perf_rt_wtime(void)
{
	return MPI_Wtime();
}

void perf_rt_describe(char *buf, size_t len)
{
	char v[MPI_MAX_LIBRARY_VERSION_STRING];
	int n = 0;

	MPI_Get_library_version(v, &n);
	v[strcspn(v, "\n,")] = 0;
	snprintf(buf, len, "Backend: %s (%.200s)", perf_g_test->backend, v);
}

void perf_rt_finalize(void)
{
	MPI_Finalize();
}

void *perf_rt_buf_alloc(size_t bytes)
{
	void *p;

	if (posix_memalign(&p, 4096, bytes))
		perf_die("cannot allocate %zu bytes", bytes);
	return p;
}

void perf_rt_buf_free(void *p)
{
	free(p);
}

void perf_rt_abort(void)
{
	int up = 0;

	MPI_Initialized(&up);
	if (up)
		MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}
#endif /* PERF_MPI */
