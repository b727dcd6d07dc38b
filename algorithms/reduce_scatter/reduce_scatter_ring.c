/*
 * reduce_scatter_ring.c — ring ReduceScatter, chunked and pipelined.
 *
 * The input holds n blocks, block b destined for rank b. At step s
 * (0..n-2) the rank at ring position p sends the partial sum of the block
 * of position (p - s - 1) mod n to the next rank and receives the partial
 * sum of the block of position (p - s - 2) mod n from the previous one,
 * reducing it with its own input for that block as it arrives. A block
 * starts at the position after its owner and travels n-1 hops, so at the
 * last step every rank receives the complete reduction of its own block.
 * Blocks are cut into chunks that the engine pipelines across steps (a
 * queue of receives from the previous rank, one of sends to the next that
 * follows it one step behind).
 *
 * Where the partial sums wait between arriving and leaving again:
 *  - in place (sendbuf == recvbuf, the input in recvbuf, the result to its
 *    start), on ranks other than 0: in the input blocks themselves, as
 *    AllReduce's ring does; at the end the finished block moves from its
 *    place (offset rank) to the start of recvbuf. The other blocks of
 *    recvbuf are left with partial sums.
 *  - otherwise (out of place, recvbuf == sendbuf + rank * count as NCCL,
 *    and rank 0 in place, which is the same call): the input is read-only
 *    and the output holds one block, which is not enough — a chunk must be
 *    able to arrive while the previous step's chunk in the same place is
 *    still being sent — so partials go to scratch, one slot per step (n-2
 *    slots). Only this rank's own block of the output is written.
 * The scratch is the communicator's (one collective runs at a time), so
 * the blocks are processed in rounds of at most scratch_bytes / (n-2)
 * bytes each, one pipeline per round (a phase of the engine's schedule);
 * every rank cuts the same rounds, in place or not.
 * WEFT_AVG divides the finished block once.
 *
 * Cost (S = n * block bytes, the input): (n-1) alpha + (n-1)/n S beta +
 * (n-1)/n S gamma, plus (n-1) alpha per extra round.
 */
#include <math.h>
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "algorithms/patterns/ring.h"
#include "core/comm.h"
#include "core/fail.h"
#include "reduce/reduce.h"

enum { Q_RECV = 0, Q_SEND };

struct rs_ring {
	struct weft_engine eng;
	weft_reduce_fn reduce;
	size_t chunk_elems;
	uint32_t nchunks;   /* per block per round */
	bool in_place;	    /* input and output at recvbuf */
	size_t round_elems; /* elements of each block per round */
	size_t round, nrounds;
	char *scratch; /* out of place: n-2 slots of round_elems elements */
};

WEFT_ENGINE_FIRST(struct rs_ring);
_Static_assert(sizeof(struct rs_ring) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct rs_ring *state(const struct weft_task *task)
{
	return (struct rs_ring *)(void *)task->priv;
}

/* Elements [*first, *first + *elems) of every block that chunk @p chunk of
 * the current round covers (*elems may be 0). */
static void chunk_span(const struct weft_task *task, uint32_t chunk, size_t *first, size_t *elems)
{
	const struct rs_ring *rs = state(task);
	size_t count = task->args.count;
	size_t round_lo = rs->round * rs->round_elems;
	size_t round_hi = round_lo + rs->round_elems < count ? round_lo + rs->round_elems : count;
	size_t lo = round_lo + (size_t)chunk * rs->chunk_elems;
	*first = lo < round_hi ? lo : round_hi;
	if (lo >= round_hi)
		*elems = 0;
	else
		*elems = round_hi - lo < rs->chunk_elems ? round_hi - lo : rs->chunk_elems;
}

static char *input_at(const struct weft_task *task, int block, size_t elem)
{
	const struct weft_coll_args *a = &task->args;
	return (char *)a->sendbuf + ((size_t)block * a->count + elem) * a->esize;
}

static char *slot_at(const struct weft_task *task, uint32_t slot, size_t elem)
{
	const struct rs_ring *rs = state(task);
	size_t in_round = elem - rs->round * rs->round_elems;
	return rs->scratch + ((size_t)slot * rs->round_elems + in_round) * task->args.esize;
}

static int block_of(const struct weft_task *task, long back)
{
	const struct weft_comm *comm = task->comm;
	return comm->ring[weft_ring_back(comm->ring_pos, back, comm->nranks)];
}

static void send_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	uint32_t step = k / state(task)->nchunks;
	size_t first, elems;
	chunk_span(task, k % state(task)->nchunks, &first, &elems);
	int block = block_of(task, (long)step + 1);
	if (state(task)->in_place || step == 0)
		out->buf = input_at(task, block, first);
	else
		out->buf = slot_at(task, step - 1, first);
	out->bytes = elems * task->args.esize;
}

static bool send_ready(const struct weft_task *task, int q, uint32_t k)
{
	return weft_engine_follows(&state(task)->eng, Q_RECV, k, state(task)->nchunks);
}

static void recv_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	const struct rs_ring *rs = state(task);
	uint32_t step = k / rs->nchunks;
	size_t first, elems;
	chunk_span(task, k % rs->nchunks, &first, &elems);
	int block = block_of(task, (long)step + 2);
	out->local = input_at(task, block, first);
	if (rs->in_place)
		out->buf = input_at(task, block, first);
	else if (step == (uint32_t)task->comm->nranks - 2) /* our own block, finished */
		out->buf = (char *)task->args.recvbuf + first * task->args.esize;
	else
		out->buf = slot_at(task, step, first);
	out->bytes = elems * task->args.esize;
	out->reduce = rs->reduce;
}

static const struct weft_queue_ops recv_ops = {.item = recv_item};
static const struct weft_queue_ops send_ops = {.item = send_item, .ready = send_ready};

/* Phase p of the schedule is round p: one ring pipeline over its part of
 * every block. */
static bool round_begin(struct weft_task *task, uint32_t phase)
{
	struct rs_ring *rs = state(task);
	const struct weft_comm *comm = task->comm;
	int n = comm->nranks;
	rs->round = phase;
	if (rs->round >= rs->nrounds)
		return false;
	rs->nchunks = weft_engine_chunks(task, rs->round_elems, (UINT32_MAX / 2) / (uint64_t)n,
					 &rs->chunk_elems);
	uint32_t total = ((uint32_t)n - 1) * rs->nchunks;
	weft_engine_add_queue(&rs->eng, &recv_ops, comm->ring[weft_ring_prev(comm->ring_pos, n)],
			      false, total, 0);
	weft_engine_add_queue(&rs->eng, &send_ops, comm->ring[weft_ring_next(comm->ring_pos, n)],
			      true, total, 0);
	return true;
}

/* Elements of each block per round: every rank must cut the same rounds
 * (their chunks are the messages), whichever buffers it passed, so this
 * depends on the call's shape and the agreed scratch size only. */
static size_t round_elems_of(const struct weft_comm *comm, size_t count, size_t esize)
{
	int n = comm->nranks;
	if (n <= 2)
		return count;
	size_t per_round = comm->scratch_bytes / (((size_t)n - 2) * esize);
	return count < per_round ? count : per_round; /* 0: the slots do not fit */
}

/* Out of place the partials wait in n - 2 slots of at least one element:
 * a scratch too small for them (weft_comm_scratch_bytes sizes every
 * communicator's so that this never happens) rules the algorithm out
 * rather than letting a slot run past it. */
static bool rs_supports(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	return args->count == 0 || round_elems_of(comm, args->count, args->esize) > 0;
}

/* Round @p phase is complete. In place, the finished block moves to the
 * start of recvbuf only after the last round: until then the start is
 * block 0's input for the rounds to come. */
static void round_done(struct weft_task *task, uint32_t phase)
{
	struct rs_ring *rs = state(task);
	const struct weft_coll_args *a = &task->args;
	int n = task->comm->nranks;
	if (rs->in_place) {
		if (rs->round + 1 < rs->nrounds)
			return;
		memmove(a->recvbuf, input_at(task, task->comm->rank, 0), a->count * a->esize);
		if (a->op == WEFT_AVG)
			weft_reduce_scale(a->recvbuf, a->count, a->dtype, n);
		return;
	}
	if (a->op == WEFT_AVG) {
		size_t lo = rs->round * rs->round_elems;
		size_t len = a->count - lo < rs->round_elems ? a->count - lo : rs->round_elems;
		weft_reduce_scale((char *)a->recvbuf + lo * a->esize, len, a->dtype, n);
	}
}

static const struct weft_engine_ops schedule = {
    .phase_begin = round_begin,
    .phase_done = round_done,
};

static weft_status_t rs_post(struct weft_task *task)
{
	struct rs_ring *rs = state(task);
	const struct weft_coll_args *a = &task->args;
	int n = task->comm->nranks;
	rs->scratch = task->comm->scratch; /* one collective runs at a time: ours */
	rs->round = 0;
	rs->nrounds = 0;
	/* On rank 0, sendbuf == recvbuf is also NCCL's in place, whose output
	 * is its own block: the out-of-place path serves it without touching
	 * the other blocks. */
	rs->in_place = a->sendbuf == a->recvbuf && task->comm->rank != 0;
	weft_engine_init(&rs->eng, &schedule);
	if (n == 1) {
		if (a->sendbuf != a->recvbuf)
			memmove(a->recvbuf, a->sendbuf, a->count * a->esize);
	} else {
		rs->reduce = weft_reduce_kernel(a->dtype, a->op);
		rs->round_elems = round_elems_of(task->comm, a->count, a->esize);
		if (rs->round_elems == 0)
			return weft_comm_fail(
			    task->comm, WEFT_ERR_INTERNAL,
			    "reduce_scatter ring: %zu bytes of scratch cannot hold "
			    "a slot for each of %d ranks",
			    task->comm->scratch_bytes, n - 2);
		rs->nrounds = (a->count + rs->round_elems - 1) / rs->round_elems;
	}
	weft_engine_start(&rs->eng, task);
	return WEFT_SUCCESS;
}

static double rs_estimate(const struct weft_comm *comm, const struct weft_links *links,
			  const struct weft_coll_args *args)
{
	int n = comm->nranks;
	if (n == 1)
		return 0;
	struct weft_cost c = links->ring;
	double block = (double)args->count * (double)args->esize;
	size_t per_round = round_elems_of(comm, args->count, args->esize);
	if (per_round == 0)
		return INFINITY;
	double rounds = ceil((double)args->count / (double)per_round);
	return rounds * (n - 1) * c.alpha + (n - 1) * block * (c.beta + c.gamma);
}

const struct weft_algo weft_reduce_scatter_ring = {
    .id = WEFT_ALGO_RING,
    .coll = WEFT_COLL_REDUCE_SCATTER,
    .name = "ring",
    .description = "each block gathers its partial sums around the placement ring, chunked and "
		   "pipelined",
    .estimate = rs_estimate,
    .supports = rs_supports,
    .task = {.post = rs_post, .progress = weft_engine_task_progress},
};
