/* allgather_perf.c — weft_allgather bandwidth and latency, nccl-tests style.
 * In place passes recvbuf + rank * count as sendbuf. See perf_common.h. */
#include "perf_common.h"

static void run_allgather(const struct perf_call *c)
{
	perf_weft_check(weft_allgather(c->sendbuf, c->recvbuf, c->count,
				       perf_weft_datatype(c->dtype), perf_weft_comm()),
			"weft_allgather");
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "allgather_perf",
	    .backend = "Weft",
	    .coll = PERF_COLL_ALLGATHER,
	    .unsupported = NULL,
	    .run = run_allgather,
	};

	return perf_main(argc, argv, &test);
}
