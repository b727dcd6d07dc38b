/*
 * allgather_bruck.c — Bruck AllGather, any rank count.
 *
 * At step s (d = 2^s, ceil(log2 n) steps) rank v holds blocks v..v+d-1
 * (mod n); it sends the first min(d, n-d) of them to rank v-d and receives
 * as many, the blocks v+d.., from rank v+d (patterns/bruck.h). Blocks keep
 * their absolute index, so each lands directly at its final place in
 * recvbuf: no rotation at the end and no scratch. A range that wraps past
 * the last block moves as two messages, cut at the same block on both
 * sides. Ranks are taken by number, not by ring position: with another
 * placement the ranges of positions would be scattered in recvbuf, and
 * the steps that carry the most data cross the whole job either way.
 *
 * Cost: ceil(log2 n) alpha + (n-1)/n S beta, S the gathered size: the
 * latency of recursive doubling with the bandwidth of the ring.
 */
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "algorithms/patterns/bruck.h"
#include "core/comm.h"

struct allgather_bruck {
	struct weft_engine eng;
};

WEFT_ENGINE_FIRST(struct allgather_bruck);
_Static_assert(sizeof(struct allgather_bruck) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct allgather_bruck *state(struct weft_task *task)
{
	return (struct allgather_bruck *)(void *)task->priv;
}

static bool step_begin(struct weft_task *task, uint32_t step)
{
	const struct weft_comm *comm = task->comm;
	int n = comm->nranks, v = comm->rank, s = (int)step;
	if (s >= weft_bruck_nsteps(n))
		return false;
	struct weft_step plan, *out = &plan;
	weft_step_clear(out);
	int nblocks = weft_bruck_nblocks(s, n);
	size_t block = task->args.count * task->args.esize;
	char *base = task->args.recvbuf;
	int lo[2], len[2];

	int k = weft_bruck_pieces(weft_bruck_send_first(v, s, n), nblocks, n, lo, len);
	for (int i = 0; i < k; i++) {
		out->send[i].peer = weft_bruck_send_to(v, s, n);
		out->send[i].buf = base + (size_t)lo[i] * block;
		out->send[i].bytes = (size_t)len[i] * block;
	}
	k = weft_bruck_pieces(weft_bruck_recv_first(v, s, n), nblocks, n, lo, len);
	for (int i = 0; i < k; i++) {
		out->recv[i].peer = weft_bruck_recv_from(v, s, n);
		out->recv[i].buf = base + (size_t)lo[i] * block;
		out->recv[i].bytes = (size_t)len[i] * block;
	}
	weft_engine_add_step(&state(task)->eng, step, out);
	return true;
}

static const struct weft_engine_ops schedule = {.phase_begin = step_begin};

static weft_status_t bruck_post(struct weft_task *task)
{
	struct allgather_bruck *b = state(task);
	const struct weft_coll_args *a = &task->args;
	const struct weft_comm *comm = task->comm;
	if (!a->in_place)
		memcpy((char *)a->recvbuf + (size_t)comm->rank * a->count * a->esize, a->sendbuf,
		       a->count * a->esize);
	weft_engine_init(&b->eng, &schedule);
	weft_engine_start(&b->eng, task);
	return WEFT_SUCCESS;
}

static double bruck_estimate(const struct weft_comm *comm, const struct weft_links *links,
			     const struct weft_coll_args *args)
{
	int n = comm->nranks;
	if (n == 1)
		return 0;
	struct weft_cost c = links->worst;
	double block = (double)args->count * (double)args->esize;
	return weft_bruck_nsteps(n) * c.alpha + (n - 1) * block * c.beta;
}

const struct weft_algo weft_allgather_bruck = {
    .id = WEFT_ALGO_BRUCK,
    .coll = WEFT_COLL_ALLGATHER,
    .name = "bruck",
    .description = "Bruck: ceil(log2 n) steps of doubling block ranges, any rank count, "
		   "blocks placed directly (no final rotation)",
    .estimate = bruck_estimate,
    .task = {.post = bruck_post, .progress = weft_engine_task_progress},
};
