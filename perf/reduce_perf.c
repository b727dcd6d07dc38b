/* reduce_perf.c — weft_reduce bandwidth and latency, nccl-tests style
 * (busbw = algbw; -r ROOT, default 0). The check also requires that the
 * non-roots' recvbuf is left alone. In place passes sendbuf == recvbuf on
 * every rank. See perf_common.h. */
#include "perf_common.h"

static void run_reduce(const struct perf_call *c)
{
	perf_weft_check(weft_reduce(c->sendbuf, c->recvbuf, c->count, perf_weft_datatype(c->dtype),
				    perf_weft_op(c->op), c->root, perf_weft_comm()),
			"weft_reduce");
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "reduce_perf",
	    .backend = "Weft",
	    .coll = PERF_COLL_REDUCE,
	    .unsupported = NULL,
	    .run = run_reduce,
	};

	return perf_main(argc, argv, &test);
}
