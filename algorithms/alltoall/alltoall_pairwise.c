/*
 * alltoall_pairwise.c — AlltoAll by n-1 pairwise exchanges.
 *
 * A rank first copies its own block (sendbuf block rank -> recvbuf block
 * rank). At step s = 1..n-1 it sends block (rank + s) mod n to rank
 * (rank + s) mod n and receives block (rank - s) mod n from rank
 * (rank - s) mod n; every pair of ranks talks at exactly one step in each
 * direction, so the order of messages between two ranks is simply the order
 * of their chunks. Blocks are cut into chunks (comm->chunk_bytes); on the
 * engine, one queue of receives and one of sends whose items name their
 * peers, each with the engine's window, so consecutive steps overlap a
 * little without every rank flooding every peer at once.
 *
 * Cost (B = count x esize bytes per block, n ranks):
 *   T = (n - 1) (alpha + B beta)
 * which is optimal in bandwidth ((n-1) B must leave every rank) and pays
 * n - 1 latencies (Bruck's log n would win for tiny blocks on large n).
 */
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "core/comm.h"

struct alltoall_pairwise {
	struct weft_engine eng;
	size_t chunk_elems;
	uint32_t nchunks; /* per block */
};

WEFT_ENGINE_FIRST(struct alltoall_pairwise);
_Static_assert(sizeof(struct alltoall_pairwise) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct alltoall_pairwise *state(const struct weft_task *task)
{
	return (struct alltoall_pairwise *)(void *)task->priv;
}

/* Message @p k (step k / nchunks + 1, chunk k % nchunks) to or from its peer. */
static void chunk_of(struct weft_task *task, uint32_t k, bool send, struct weft_xfer *out)
{
	const struct alltoall_pairwise *ap = state(task);
	int n = task->comm->nranks, rank = task->comm->rank;
	int s = (int)(k / ap->nchunks) + 1;
	size_t off, len;
	out->peer = send ? (rank + s) % n : (rank - s + n) % n;
	weft_engine_chunk_span(task, (size_t)out->peer * task->args.count, task->args.count,
			       ap->chunk_elems, k % ap->nchunks, &off, &len);
	out->buf = send ? (char *)task->args.sendbuf + off : (char *)task->args.recvbuf + off;
	out->bytes = len;
}

static void send_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	chunk_of(task, k, true, out);
}

static void recv_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	chunk_of(task, k, false, out);
}

static const struct weft_queue_ops recv_ops = {.item = recv_item};
static const struct weft_queue_ops send_ops = {.item = send_item};

static weft_status_t pairwise_post(struct weft_task *task)
{
	struct alltoall_pairwise *ap = state(task);
	const struct weft_coll_args *a = &task->args;
	int n = task->comm->nranks;
	size_t block = a->count * a->esize;
	memcpy((char *)a->recvbuf + (size_t)task->comm->rank * block,
	       (const char *)a->sendbuf + (size_t)task->comm->rank * block, block);
	/* Message indices (n - 1) * nchunks count in 31 bits. */
	ap->nchunks =
	    weft_engine_chunks(task, a->count, (UINT32_MAX / 2) / (uint64_t)n, &ap->chunk_elems);
	uint32_t total = ap->nchunks * (uint32_t)(n - 1);
	weft_engine_init(&ap->eng, NULL);
	weft_engine_add_queue(&ap->eng, &recv_ops, -1, false, total, 0);
	weft_engine_add_queue(&ap->eng, &send_ops, -1, true, total, 0);
	weft_engine_start(&ap->eng, task);
	return WEFT_SUCCESS;
}

static double pairwise_estimate(const struct weft_comm *comm, const struct weft_links *links,
				const struct weft_coll_args *args)
{
	struct weft_cost c = links->worst;
	double block = (double)args->count * (double)args->esize;
	return (comm->nranks - 1) * (c.alpha + block * c.beta);
}

const struct weft_algo weft_alltoall_pairwise = {
    .id = WEFT_ALGO_PAIRWISE,
    .coll = WEFT_COLL_ALLTOALL,
    .name = "pairwise",
    .description = "n-1 steps: send to rank+s, receive from rank-s, chunked",
    .estimate = pairwise_estimate,
    .task = {.post = pairwise_post, .progress = weft_engine_task_progress},
};
