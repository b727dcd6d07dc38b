/*
 * alltoallv_pairwise.c — AlltoAllv (per-peer counts and displacements) by
 * n-1 pairwise exchanges.
 *
 * A rank first copies its block to itself (sendcounts[rank] elements from
 * sdispls[rank] to rdispls[rank]). At step s = 1..n-1 it sends its block for
 * rank (rank + s) mod n and receives the block of rank (rank - s) mod n, as
 * AlltoAll does; a pair of ranks talks at exactly one step in each
 * direction, so the sender's item s-1 meets the receiver's item s-1 and the
 * default tags agree. On the engine: one queue of receives and one of
 * sends whose items name their peers, each with the engine's window (up to
 * that many steps overlap).
 *
 * Each block is one message, not chunks: block sizes differ per pair, and
 * a whole message lets the transport check the sender's length against
 * the receiver's at once (a mismatch fails where the bytes arrive, with
 * both sizes named), where chunk counts that disagree would only time out.
 * The transports pipeline long messages themselves. A block of zero
 * elements still goes, as an empty message: each side's count is its own
 * (a sender may give 0 where the receiver expects 5), and only a message
 * lets the receiver check the two against each other, as it does for the
 * others.
 *
 * Cost (S_j bytes to rank j, R_i bytes from rank i, n ranks):
 *   T = (n - 1) alpha + max(sum S_j, sum R_i) beta
 * The bytes are optimal (everything must leave and arrive once); the
 * latencies are n - 1, as AlltoAll's pairwise exchange.
 */
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "core/comm.h"

struct alltoallv_pairwise {
	struct weft_engine eng;
};

WEFT_ENGINE_FIRST(struct alltoallv_pairwise);
_Static_assert(sizeof(struct alltoallv_pairwise) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static void send_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	const struct weft_coll_args *a = &task->args;
	int n = task->comm->nranks;
	int peer = (task->comm->rank + (int)k + 1) % n;
	out->peer = peer;
	out->bytes = a->blocks.sendcounts[peer] * a->esize;
	/* sendbuf may be NULL where every block is empty */
	out->buf = out->bytes ? (char *)a->sendbuf + a->blocks.sdispls[peer] * a->esize : NULL;
	out->signal = true;
}

static void recv_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	const struct weft_coll_args *a = &task->args;
	int n = task->comm->nranks;
	int peer = (task->comm->rank - (int)k - 1 + n) % n;
	out->peer = peer;
	out->bytes = a->blocks.recvcounts[peer] * a->esize;
	out->buf = out->bytes ? (char *)a->recvbuf + a->blocks.rdispls[peer] * a->esize : NULL;
	out->signal = true;
}

static const struct weft_queue_ops recv_ops = {.item = recv_item};
static const struct weft_queue_ops send_ops = {.item = send_item};

static weft_status_t pairwise_post(struct weft_task *task)
{
	struct alltoallv_pairwise *ap = (struct alltoallv_pairwise *)(void *)task->priv;
	const struct weft_coll_args *a = &task->args;
	int rank = task->comm->rank;
	uint32_t steps = (uint32_t)(task->comm->nranks - 1);
	size_t own = a->blocks.sendcounts[rank] * a->esize; /* == recvcounts[rank]: checked */
	if (own)
		memcpy((char *)a->recvbuf + a->blocks.rdispls[rank] * a->esize,
		       (const char *)a->sendbuf + a->blocks.sdispls[rank] * a->esize, own);
	weft_engine_init(&ap->eng, NULL);
	weft_engine_add_queue(&ap->eng, &recv_ops, -1, false, steps, 0);
	weft_engine_add_queue(&ap->eng, &send_ops, -1, true, steps, 0);
	weft_engine_start(&ap->eng, task);
	return WEFT_SUCCESS;
}

static double pairwise_estimate(const struct weft_comm *comm, const struct weft_links *links,
				const struct weft_coll_args *args)
{
	struct weft_cost c = links->worst;
	size_t elems = args->blocks.send_total > args->blocks.recv_total ? args->blocks.send_total
									 : args->blocks.recv_total;
	return (comm->nranks - 1) * c.alpha + (double)elems * (double)args->esize * c.beta;
}

const struct weft_algo weft_alltoallv_pairwise = {
    .id = WEFT_ALGO_PAIRWISE,
    .coll = WEFT_COLL_ALLTOALLV,
    .name = "pairwise",
    .description = "n-1 steps: send to rank+s, receive from rank-s, one message per block",
    .estimate = pairwise_estimate,
    .task = {.post = pairwise_post, .progress = weft_engine_task_progress},
};
