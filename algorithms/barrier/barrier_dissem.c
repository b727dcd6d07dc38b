/*
 * barrier_dissem.c — dissemination barrier.
 *
 * At step s (d = 2^s, ceil(log2 n) steps) rank r sends an empty message to
 * rank r+d and waits for the one from rank r-d (mod n). After step s a rank
 * knows that the 2^(s+1) ranks r, r-1, ..., r-2^(s+1)+1 have entered, so
 * after the last step it knows all n have. Unlike a gather-then-release
 * tree it has no root and every step is one message each way, for any n.
 * Both transports move zero-length messages (a header alone).
 *
 * Cost: ceil(log2 n) alpha.
 */
#include "core/comm.h"
#include "tune/tune.h"
#include "algorithms/algo.h"
#include "algorithms/engine/lockstep.h"
#include "algorithms/patterns/bruck.h" /* ceil(log2 n) rounds, as Bruck */

struct barrier_dissem {
	struct weft_lockstep ls;
	char token; /* a valid address for the empty messages */
};

_Static_assert(sizeof(struct barrier_dissem) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct barrier_dissem *state(struct weft_task *task)
{
	return (struct barrier_dissem *)(void *)task->priv;
}

static void plan(struct weft_task *task, uint32_t step, struct weft_lockstep_step *out)
{
	int n = task->comm->nranks, r = task->comm->rank, d = 1 << step;
	out->send[0] = (struct weft_xfer){.peer = (r + d) % n, .buf = &state(task)->token};
	out->recv[0] = (struct weft_xfer){.peer = (r - d % n + n) % n, .buf = &state(task)->token};
}

static const struct weft_lockstep_ops lockstep_ops = {
    .plan = plan,
};

static weft_status_t dissem_post(struct weft_task *task)
{
	struct barrier_dissem *b = state(task);
	weft_lockstep_init(&b->ls, &lockstep_ops, (uint32_t)weft_bruck_nsteps(task->comm->nranks));
	weft_status_t st = weft_lockstep_progress(&b->ls, task);
	return st == WEFT_SUCCESS ? WEFT_INPROGRESS : st;
}

static weft_status_t dissem_progress(struct weft_task *task)
{
	return weft_lockstep_progress(&state(task)->ls, task);
}

static double dissem_estimate(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	return weft_bruck_nsteps(comm->nranks) * weft_tune_worst(comm).alpha;
}

const struct weft_algo weft_barrier_dissem = {
    .id = WEFT_ALGO_DISSEM,
    .coll = WEFT_COLL_BARRIER,
    .name = "dissemination",
    .description = "dissemination: ceil(log2 n) rounds of one empty message each way",
    .estimate = dissem_estimate,
    .post = dissem_post,
    .progress = dissem_progress,
};
