/* allreduce_perf.c — weft_allreduce bandwidth and latency, nccl-tests style.
 * See perf_common.h for the options and what is measured. */
#include "perf_common.h"

static void run_allreduce(const struct perf_call *c)
{
	perf_weft_check(weft_allreduce(c->sendbuf, c->recvbuf, c->count,
				       perf_weft_datatype(c->dtype), perf_weft_op(c->op),
				       perf_weft_comm()),
			"weft_allreduce");
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "allreduce_perf",
	    .backend = "Weft",
	    .coll = PERF_COLL_ALLREDUCE,
	    .unsupported = NULL,
	    .run = run_allreduce,
	};

	return perf_main(argc, argv, &test);
}
