/* reducescatter_perf.c — weft_reduce_scatter bandwidth and latency,
 * nccl-tests style: size is count per rank x nranks x type size, busbw =
 * algbw x (n-1)/n. In place passes recvbuf = sendbuf + rank * count (NCCL's
 * form). See perf_common.h. */
#include "perf_common.h"

static void run_reduce_scatter(const struct perf_call *c)
{
	perf_weft_check(weft_reduce_scatter(c->sendbuf, c->recvbuf, c->count,
					    perf_weft_datatype(c->dtype), perf_weft_op(c->op),
					    perf_weft_comm()),
			"weft_reduce_scatter");
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "reducescatter_perf",
	    .backend = "Weft",
	    .coll = PERF_COLL_REDUCE_SCATTER,
	    .unsupported = NULL,
	    .run = run_reduce_scatter,
	};

	return perf_main(argc, argv, &test);
}
