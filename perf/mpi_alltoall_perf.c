/* mpi_alltoall_perf.c — the MPI_Alltoall baseline, printing the same
 * columns as alltoall_perf (no in-place columns, as for Weft). */
#include "perf_common.h"

static void run_alltoall(const struct perf_call *c)
{
	MPI_Datatype dt = perf_mpi_datatype(c->dtype);
	int count = perf_mpi_count(c->count, "MPI_Alltoall");

	perf_mpi_check(MPI_Alltoall(c->sendbuf, count, dt, c->recvbuf, count, dt, MPI_COMM_WORLD),
		       "MPI_Alltoall");
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "mpi_alltoall_perf",
	    .backend = "MPI",
	    .coll = PERF_COLL_ALLTOALL,
	    .unsupported = perf_mpi_unsupported,
	    .run = run_alltoall,
	};

	return perf_main(argc, argv, &test);
}
