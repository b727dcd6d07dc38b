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
 * Blocks are cut into chunks that the ring pipeline (ring_pipeline.h)
 * overlaps across steps.
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
 * bytes each, one pipeline per round; every rank cuts the same rounds, in
 * place or not.
 * WEFT_AVG divides the finished block once.
 *
 * Cost (S = n * block bytes, the input): (n-1) alpha + (n-1)/n S beta +
 * (n-1)/n S gamma, plus (n-1) alpha per extra round.
 */
#include <math.h>
#include <string.h>

#include "core/comm.h"
#include "reduce/reduce.h"
#include "tune/tune.h"
#include "algorithms/algo.h"
#include "algorithms/patterns/ring.h"
#include "algorithms/engine/ring_pipeline.h"

struct rs_ring {
	struct weft_ring_pipeline rp;
	weft_reduce_fn reduce;
	size_t chunk_elems;
	bool in_place;	    /* input and output at recvbuf */
	size_t round_elems; /* elements of each block per round */
	size_t round, nrounds;
	char *scratch; /* out of place: n-2 slots of round_elems elements */
};

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

static void send_chunk(const struct weft_task *task, uint32_t step, uint32_t chunk,
		       struct weft_ring_chunk *out)
{
	size_t first, elems;
	chunk_span(task, chunk, &first, &elems);
	int block = block_of(task, (long)step + 1);
	if (state(task)->in_place || step == 0)
		out->buf = input_at(task, block, first);
	else
		out->buf = slot_at(task, step - 1, first);
	out->bytes = elems * task->args.esize;
}

static void recv_chunk(const struct weft_task *task, uint32_t step, uint32_t chunk,
		       struct weft_ring_chunk *out)
{
	const struct rs_ring *rs = state(task);
	size_t first, elems;
	chunk_span(task, chunk, &first, &elems);
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

static const struct weft_ring_geometry geometry = {
    .send_chunk = send_chunk,
    .recv_chunk = recv_chunk,
};

static void start_round(struct weft_task *task)
{
	struct rs_ring *rs = state(task);
	uint32_t nchunks = weft_ring_nchunks(task, rs->round_elems, &rs->chunk_elems);
	uint32_t nsteps = (uint32_t)task->comm->nranks - 1;
	weft_ring_pipeline_init(&rs->rp, task, &geometry, nsteps, nchunks);
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
	if (per_round == 0)
		per_round = 1;
	return count < per_round ? count : per_round;
}

/* Round rs->round is complete. In place, the finished block moves to the
 * start of recvbuf only after the last round: until then the start is
 * block 0's input for the rounds to come. */
static void round_done(struct weft_task *task)
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

static weft_status_t rs_progress(struct weft_task *task)
{
	struct rs_ring *rs = state(task);
	while (rs->round < rs->nrounds) {
		weft_status_t st = weft_ring_pipeline_progress(&rs->rp, task);
		if (st != WEFT_SUCCESS)
			return st; /* WEFT_INPROGRESS or a failure */
		round_done(task);
		if (++rs->round < rs->nrounds)
			start_round(task);
	}
	return WEFT_SUCCESS;
}

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
	if (n == 1) {
		if (a->sendbuf != a->recvbuf)
			memmove(a->recvbuf, a->sendbuf, a->count * a->esize);
		return WEFT_INPROGRESS;
	}
	rs->reduce = weft_reduce_kernel(a->dtype, a->op);
	rs->round_elems = round_elems_of(task->comm, a->count, a->esize);
	rs->nrounds = (a->count + rs->round_elems - 1) / rs->round_elems;
	start_round(task);
	weft_status_t st = rs_progress(task);
	return st == WEFT_SUCCESS || st == WEFT_INPROGRESS ? WEFT_INPROGRESS : st;
}

static double rs_estimate(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	int n = comm->nranks;
	if (n == 1)
		return 0;
	struct weft_cost c = weft_tune_ring(comm);
	double block = (double)args->count * (double)args->esize;
	size_t per_round = round_elems_of(comm, args->count, args->esize);
	double rounds = per_round ? ceil((double)args->count / (double)per_round) : 1;
	return rounds * (n - 1) * c.alpha + (n - 1) * block * (c.beta + c.gamma);
}

const struct weft_algo weft_reduce_scatter_ring = {
    .id = WEFT_ALGO_RING,
    .coll = WEFT_COLL_REDUCE_SCATTER,
    .name = "ring",
    .description = "each block gathers its partial sums around the placement ring, chunked and "
		   "pipelined",
    .estimate = rs_estimate,
    .post = rs_post,
    .progress = rs_progress,
};
