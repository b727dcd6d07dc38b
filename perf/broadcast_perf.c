/* broadcast_perf.c — weft_broadcast bandwidth and latency, nccl-tests style
 * (busbw = algbw; -r ROOT, default 0). In place passes sendbuf == recvbuf on
 * every rank; only the root's is read. See perf_common.h. */
#include "perf_common.h"

static void run_broadcast(const struct perf_call *c)
{
	perf_weft_check(weft_broadcast(c->sendbuf, c->recvbuf, c->count,
				       perf_weft_datatype(c->dtype), c->root, perf_weft_comm()),
			"weft_broadcast");
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "broadcast_perf",
	    .backend = "Weft",
	    .coll = PERF_COLL_BROADCAST,
	    .unsupported = NULL,
	    .run = run_broadcast,
	};

	return perf_main(argc, argv, &test);
}
