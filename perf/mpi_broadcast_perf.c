/* mpi_broadcast_perf.c — the MPI_Bcast baseline, printing the same columns
 * as broadcast_perf. MPI_Bcast has one buffer, so out of place the root
 * first copies sendbuf to recvbuf (timed with the call, as a library that
 * takes two buffers would do the same). */
#include <string.h>

#include "perf_common.h"

static void run_broadcast(const struct perf_call *c)
{
	int count = perf_mpi_count(c->count, "MPI_Bcast");

	if (c->rank == c->root && c->sendbuf != c->recvbuf)
		memcpy(c->recvbuf, c->sendbuf, c->count * perf_dtype_size(c->dtype));
	perf_mpi_check(
	    MPI_Bcast(c->recvbuf, count, perf_mpi_datatype(c->dtype), c->root, MPI_COMM_WORLD),
	    "MPI_Bcast");
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "mpi_broadcast_perf",
	    .backend = "MPI",
	    .coll = PERF_COLL_BROADCAST,
	    .unsupported = perf_mpi_unsupported,
	    .run = run_broadcast,
	};

	return perf_main(argc, argv, &test);
}
