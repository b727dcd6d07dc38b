/* mpi_reducescatter_perf.c — the MPI_Reduce_scatter_block baseline,
 * printing the same columns as reducescatter_perf. In place uses
 * MPI_IN_PLACE, which in MPI takes the input from recvbuf (the whole
 * nranks x count array) and leaves the result at its start; the driver's
 * in-place layout is NCCL's (recvbuf = sendbuf + rank * count), so the
 * baseline passes sendbuf as MPI's buffer and moves its block into place
 * afterwards. The move is timed with the call. */
#include <string.h>

#include "perf_common.h"

static void run_reduce_scatter(const struct perf_call *c)
{
	MPI_Datatype dt = perf_mpi_datatype(c->dtype);
	int count = perf_mpi_count(c->count, "MPI_Reduce_scatter_block");

	if (c->in_place) {
		void *whole = (void *)c->sendbuf;
		perf_mpi_check(MPI_Reduce_scatter_block(MPI_IN_PLACE, whole, count, dt,
							perf_mpi_op(c->op), MPI_COMM_WORLD),
			       "MPI_Reduce_scatter_block");
		if (c->recvbuf != whole)
			memmove(c->recvbuf, whole, c->count * perf_dtype_size(c->dtype));
		return;
	}
	perf_mpi_check(MPI_Reduce_scatter_block(c->sendbuf, c->recvbuf, count, dt,
						perf_mpi_op(c->op), MPI_COMM_WORLD),
		       "MPI_Reduce_scatter_block");
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "mpi_reducescatter_perf",
	    .backend = "MPI",
	    .coll = PERF_COLL_REDUCE_SCATTER,
	    .unsupported = perf_mpi_unsupported,
	    .run = run_reduce_scatter,
	};

	return perf_main(argc, argv, &test);
}
