/* mpi_allreduce_perf.c — the MPI_Allreduce baseline, printing the same
 * columns as allreduce_perf so perf/compare can set them side by side.
 * Built with -DPERF_MPI against Open MPI (mpi_*) or MPICH (mpich_*). */
#include "perf_common.h"

static void run_allreduce(const struct perf_call *c)
{
	/* counts above INT_MAX would need MPI-4 large-count calls */
	if (c->count > (size_t)0x7fffffff)
		perf_die("count %zu is more than MPI_Allreduce's int count", c->count);
	perf_mpi_check(MPI_Allreduce(c->in_place ? MPI_IN_PLACE : c->sendbuf, c->recvbuf,
				     (int)c->count, perf_mpi_datatype(c->dtype), perf_mpi_op(c->op),
				     MPI_COMM_WORLD),
		       "MPI_Allreduce");
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "mpi_allreduce_perf",
	    .backend = "MPI",
	    .coll = PERF_COLL_ALLREDUCE,
	    .unsupported = perf_mpi_unsupported,
	    .run = run_allreduce,
	};

	return perf_main(argc, argv, &test);
}
