/* mpi_sendrecv_perf.c — the MPI_Sendrecv baseline, printing the same
 * columns as sendrecv_perf: send to rank+1, receive from rank-1. */
#include "perf_common.h"

static void run_sendrecv(const struct perf_call *c)
{
	MPI_Datatype dt = perf_mpi_datatype(c->dtype);
	int count = perf_mpi_count(c->count, "MPI_Sendrecv");
	int next = (c->rank + 1) % c->nranks, prev = (c->rank + c->nranks - 1) % c->nranks;

	perf_mpi_check(MPI_Sendrecv(c->sendbuf, count, dt, next, 0, c->recvbuf, count, dt, prev, 0,
				    MPI_COMM_WORLD, MPI_STATUS_IGNORE),
		       "MPI_Sendrecv");
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "mpi_sendrecv_perf",
	    .backend = "MPI",
	    .coll = PERF_COLL_SENDRECV,
	    .unsupported = perf_mpi_unsupported,
	    .run = run_sendrecv,
	};

	return perf_main(argc, argv, &test);
}
