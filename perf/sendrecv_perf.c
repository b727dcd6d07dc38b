/* sendrecv_perf.c — weft_send/weft_recv bandwidth and latency, nccl-tests
 * style: every rank sends count elements to rank+1 and receives as many
 * from rank-1 (mod nranks), both in one group; busbw = algbw. There is no
 * in-place form (the in-place columns print N/A). -a ALGO forces the send
 * and the recv algorithm. See perf_common.h. */
#include "perf_common.h"

static void run_sendrecv(const struct perf_call *c)
{
	weft_comm_t comm = perf_weft_comm();
	weft_datatype_t dt = perf_weft_datatype(c->dtype);
	int next = (c->rank + 1) % c->nranks, prev = (c->rank + c->nranks - 1) % c->nranks;

	if (c->nranks < 2)
		perf_die(
		    "sendrecv needs at least 2 ranks (weft_send refuses this rank as its peer)");
	perf_weft_check(weft_group_start(), "weft_group_start");
	perf_weft_check(weft_send(c->sendbuf, c->count, dt, next, comm), "weft_send");
	perf_weft_check(weft_recv(c->recvbuf, c->count, dt, prev, comm), "weft_recv");
	perf_weft_check(weft_group_end(), "weft_group_end (send and recv)");
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "sendrecv_perf",
	    .backend = "Weft",
	    .coll = PERF_COLL_SENDRECV,
	    .unsupported = NULL,
	    .run = run_sendrecv,
	};

	return perf_main(argc, argv, &test);
}
