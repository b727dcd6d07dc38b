/* mpi_reduce_perf.c — the MPI_Reduce baseline, printing the same columns as
 * reduce_perf. In place the root passes MPI_IN_PLACE. Non-roots pass their
 * recvbuf out of place (MPI ignores it; MPICH 4.0 crashed on NULL there
 * from 32 KiB) and NULL in place, where recvbuf is their sendbuf. */
#include <stddef.h>

#include "perf_common.h"

static void run_reduce(const struct perf_call *c)
{
	int count = perf_mpi_count(c->count, "MPI_Reduce");
	bool root = c->rank == c->root;
	const void *send = c->in_place && root ? MPI_IN_PLACE : c->sendbuf;

	perf_mpi_check(MPI_Reduce(send, root || !c->in_place ? c->recvbuf : NULL, count,
				  perf_mpi_datatype(c->dtype), perf_mpi_op(c->op), c->root,
				  MPI_COMM_WORLD),
		       "MPI_Reduce");
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "mpi_reduce_perf",
	    .backend = "MPI",
	    .coll = PERF_COLL_REDUCE,
	    .unsupported = perf_mpi_unsupported,
	    .run = run_reduce,
	};

	return perf_main(argc, argv, &test);
}
