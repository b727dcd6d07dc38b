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
#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "algorithms/patterns/bruck.h" /* ceil(log2 n) rounds, as Bruck */
#include "core/comm.h"

struct barrier_dissem {
	struct weft_engine eng;
	char token; /* a valid address for the empty messages */
};

WEFT_ENGINE_FIRST(struct barrier_dissem);
_Static_assert(sizeof(struct barrier_dissem) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct barrier_dissem *state(struct weft_task *task)
{
	return (struct barrier_dissem *)(void *)task->priv;
}

static bool step_begin(struct weft_task *task, uint32_t step)
{
	int n = task->comm->nranks, r = task->comm->rank, d = 1 << step;
	if ((int)step >= weft_bruck_nsteps(n))
		return false;
	char *token = &state(task)->token;
	struct weft_step st;
	weft_step_clear(&st);
	st.send[0] = (struct weft_xfer){.peer = (r + d) % n, .buf = token, .signal = true};
	st.recv[0] = (struct weft_xfer){.peer = (r - d % n + n) % n, .buf = token, .signal = true};
	weft_engine_add_step(&state(task)->eng, step, &st);
	return true;
}

static const struct weft_engine_ops schedule = {.phase_begin = step_begin};

static weft_status_t dissem_post(struct weft_task *task)
{
	struct barrier_dissem *b = state(task);
	weft_engine_init(&b->eng, &schedule);
	weft_engine_start(&b->eng, task);
	return WEFT_SUCCESS;
}

static double dissem_estimate(const struct weft_comm *comm, const struct weft_links *links,
			      const struct weft_coll_args *args)
{
	return weft_bruck_nsteps(comm->nranks) * links->worst.alpha;
}

const struct weft_algo weft_barrier_dissem = {
    .id = WEFT_ALGO_DISSEM,
    .coll = WEFT_COLL_BARRIER,
    .name = "dissemination",
    .description = "dissemination: ceil(log2 n) rounds of one empty message each way",
    .estimate = dissem_estimate,
    .task = {.post = dissem_post, .progress = weft_engine_task_progress},
};
