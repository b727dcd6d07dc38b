/* alltoall_perf.c — weft_alltoall bandwidth and latency, nccl-tests style:
 * size is count per peer x nranks x type size, busbw = algbw x (n-1)/n.
 * Weft has no in-place AlltoAll (overlapping buffers are refused), so the
 * in-place columns print N/A. See perf_common.h. */
#include "perf_common.h"

static void run_alltoall(const struct perf_call *c)
{
	perf_weft_check(weft_alltoall(c->sendbuf, c->recvbuf, c->count,
				      perf_weft_datatype(c->dtype), perf_weft_comm()),
			"weft_alltoall");
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "alltoall_perf",
	    .backend = "Weft",
	    .coll = PERF_COLL_ALLTOALL,
	    .unsupported = NULL,
	    .run = run_alltoall,
	};

	return perf_main(argc, argv, &test);
}
