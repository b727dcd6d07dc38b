/* mpi_allgather_perf.c — the MPI_Allgather baseline, printing the same
 * columns as allgather_perf. In place uses MPI_IN_PLACE. */
#include "perf_common.h"

static void run_allgather(const struct perf_call *c)
{
	MPI_Datatype dt = perf_mpi_datatype(c->dtype);

	if (c->count > (size_t)0x7fffffff)
		perf_die("count %zu is more than MPI_Allgather's int count", c->count);
	perf_mpi_check(MPI_Allgather(c->in_place ? MPI_IN_PLACE : c->sendbuf, (int)c->count, dt,
				     c->recvbuf, (int)c->count, dt, MPI_COMM_WORLD),
		       "MPI_Allgather");
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "mpi_allgather_perf",
	    .backend = "MPI",
	    .coll = PERF_COLL_ALLGATHER,
	    .unsupported = perf_mpi_unsupported,
	    .run = run_allgather,
	};

	return perf_main(argc, argv, &test);
}
