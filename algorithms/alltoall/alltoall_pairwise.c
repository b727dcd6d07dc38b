/*
 * alltoall_pairwise.c — AlltoAll by n-1 pairwise exchanges.
 *
 * A rank first copies its own block (sendbuf block rank -> recvbuf block
 * rank). At step s = 1..n-1 it sends block (rank + s) mod n to rank
 * (rank + s) mod n and receives block (rank - s) mod n from rank
 * (rank - s) mod n; every pair of ranks talks at exactly one step in each
 * direction, so the order of messages between two ranks is simply the order
 * of their chunks. Blocks are cut into chunks (comm->chunk_bytes); up to
 * ALLTOALL_WINDOW chunks are in flight each way, so consecutive steps
 * overlap a little without every rank flooding every peer at once.
 *
 * Cost (B = count x esize bytes per block, n ranks):
 *   T = (n - 1) (alpha + B beta)
 * which is optimal in bandwidth ((n-1) B must leave every rank) and pays
 * n - 1 latencies (Bruck's log n would win for tiny blocks on large n).
 */
#include <string.h>

#include "core/comm.h"
#include "core/p2p.h"
#include "tune/tune.h"
#include "algorithms/algo.h"

#define ALLTOALL_WINDOW 8

struct alltoall_pairwise {
	size_t chunk;	  /* bytes, a multiple of esize */
	uint32_t nchunks; /* per block */
	uint32_t total;	  /* (n - 1) * nchunks */
	uint32_t send_posted, send_done, recv_posted, recv_done;
	struct weft_msg sends[ALLTOALL_WINDOW];
	struct weft_msg recvs[ALLTOALL_WINDOW];
};

_Static_assert(sizeof(struct alltoall_pairwise) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct alltoall_pairwise *state(const struct weft_task *task)
{
	return (struct alltoall_pairwise *)(void *)task->priv;
}

/* Message @p k (step k / nchunks + 1, chunk k % nchunks) to or from @p peer. */
static void chunk_of(const struct weft_task *task, uint32_t k, bool send, int *peer, size_t *off,
		     size_t *len)
{
	const struct alltoall_pairwise *ap = state(task);
	int n = task->comm->nranks, rank = task->comm->rank;
	int s = (int)(k / ap->nchunks) + 1;
	size_t block = task->args.count * task->args.esize;
	size_t first = (size_t)(k % ap->nchunks) * ap->chunk;
	*peer = send ? (rank + s) % n : (rank - s + n) % n;
	*off = (size_t)*peer * block + first;
	*len = block - first < ap->chunk ? block - first : ap->chunk;
}

static weft_status_t post_one(struct weft_task *task, bool send)
{
	struct alltoall_pairwise *ap = state(task);
	uint32_t k = send ? ap->send_posted : ap->recv_posted;
	struct weft_msg *m =
	    send ? &ap->sends[k % ALLTOALL_WINDOW] : &ap->recvs[k % ALLTOALL_WINDOW];
	int peer;
	size_t off, len;
	chunk_of(task, k, send, &peer, &off, &len);
	m->buf = send ? (char *)task->args.sendbuf + off : (char *)task->args.recvbuf + off;
	m->len = len;
	m->tag = weft_p2p_tag(task->seq, k);
	m->reduce = NULL;
	m->local = NULL;
	m->unit = task->args.esize;
	if (send) {
		ap->send_posted++;
		return weft_p2p_isend(task->comm, peer, m);
	}
	ap->recv_posted++;
	return weft_p2p_irecv(task->comm, peer, m);
}

static weft_status_t pairwise_progress(struct weft_task *task)
{
	struct alltoall_pairwise *ap = state(task);
	bool moved;
	do {
		moved = false;
		while (ap->recv_done < ap->recv_posted &&
		       ap->recvs[ap->recv_done % ALLTOALL_WINDOW].done) {
			weft_status_t st = ap->recvs[ap->recv_done % ALLTOALL_WINDOW].status;
			if (st != WEFT_SUCCESS)
				return st;
			ap->recv_done++;
			moved = true;
		}
		while (ap->send_done < ap->send_posted &&
		       ap->sends[ap->send_done % ALLTOALL_WINDOW].done) {
			weft_status_t st = ap->sends[ap->send_done % ALLTOALL_WINDOW].status;
			if (st != WEFT_SUCCESS)
				return st;
			ap->send_done++;
			moved = true;
		}
		while (ap->recv_posted < ap->total &&
		       ap->recv_posted - ap->recv_done < ALLTOALL_WINDOW) {
			weft_status_t st = post_one(task, false);
			if (st != WEFT_SUCCESS)
				return st;
			moved = true;
		}
		while (ap->send_posted < ap->total &&
		       ap->send_posted - ap->send_done < ALLTOALL_WINDOW) {
			weft_status_t st = post_one(task, true);
			if (st != WEFT_SUCCESS)
				return st;
			moved = true;
		}
		if (moved)
			weft_task_touch(task);
	} while (moved);
	if (ap->recv_done == ap->total && ap->send_done == ap->total)
		return WEFT_SUCCESS;
	int n = task->comm->nranks, rank = task->comm->rank;
	if (ap->recv_done < ap->total)
		task->waiting_for = (rank - (int)(ap->recv_done / ap->nchunks) - 1 + n) % n;
	else
		task->waiting_for = (rank + (int)(ap->send_done / ap->nchunks) + 1) % n;
	return WEFT_INPROGRESS;
}

static weft_status_t pairwise_post(struct weft_task *task)
{
	struct alltoall_pairwise *ap = state(task);
	const struct weft_coll_args *a = &task->args;
	int n = task->comm->nranks;
	size_t block = a->count * a->esize;
	memcpy((char *)a->recvbuf + (size_t)task->comm->rank * block,
	       (const char *)a->sendbuf + (size_t)task->comm->rank * block, block);
	size_t chunk = task->comm->chunk_bytes / a->esize * a->esize;
	if (chunk == 0)
		chunk = a->esize;
	size_t nchunks = (block + chunk - 1) / chunk;
	/* Message indices (n - 1) * nchunks count in 32 bits: grow huge chunks. */
	while (nchunks * (size_t)n > UINT32_MAX / 2) {
		chunk *= 2;
		nchunks = (block + chunk - 1) / chunk;
	}
	*ap = (struct alltoall_pairwise){
	    .chunk = chunk,
	    .nchunks = (uint32_t)nchunks,
	    .total = (uint32_t)nchunks * (uint32_t)(n - 1),
	};
	weft_status_t st = pairwise_progress(task);
	return st == WEFT_SUCCESS ? WEFT_INPROGRESS : st;
}

static double pairwise_estimate(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	struct weft_cost c = weft_tune_worst(comm);
	double block = (double)args->count * (double)args->esize;
	return (comm->nranks - 1) * (c.alpha + block * c.beta);
}

const struct weft_algo weft_alltoall_pairwise = {
    .id = WEFT_ALGO_PAIRWISE,
    .coll = WEFT_COLL_ALLTOALL,
    .name = "pairwise",
    .description = "n-1 steps: send to rank+s, receive from rank-s, chunked",
    .estimate = pairwise_estimate,
    .post = pairwise_post,
    .progress = pairwise_progress,
};
