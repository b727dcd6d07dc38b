/*
 * gather_linear.c — Gather: every rank's block straight to the root.
 *
 * The root copies its own block into place (unless in place) and receives
 * the other n-1 blocks, block of rank p into recvbuf + p * B, in the order
 * root+1, root+2, ... (mod n); each other rank sends its block to the root
 * as one message. On the engine: the root has one queue of n-1 receives
 * whose items name their peers, with the engine's window (up to that many
 * senders at once); a sender has a list of one item, tagged with its
 * position in the root's order, so both ends' tags agree.
 *
 * Whole blocks, not chunks: each pair exchanges one message, so the
 * transport checks the two lengths against each other, and pipelines a
 * long message itself.
 *
 * Cost (B = count x esize bytes per block, n ranks): the root's link
 * carries every block, the latencies overlap in its window:
 *   T = alpha + (n - 1) B beta
 * which is optimal in bandwidth at the root. A binomial tree would pay
 * log n latencies instead of one window's worth for tiny blocks on many
 * ranks, and forward blocks through intermediate ranks (staging memory
 * they do not have: their recvbuf is not used).
 */
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "core/comm.h"

struct gather_linear {
	struct weft_engine eng;
};

WEFT_ENGINE_FIRST(struct gather_linear);
_Static_assert(sizeof(struct gather_linear) <= WEFT_TASK_PRIV_BYTES, "task state too big");

/* Root: item k is the block of rank root + 1 + k (mod n). */
static void root_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	const struct weft_coll_args *a = &task->args;
	int peer = (a->root + 1 + (int)k) % task->comm->nranks;
	out->peer = peer;
	out->buf = (char *)a->recvbuf + (size_t)peer * a->count * a->esize;
	out->bytes = a->count * a->esize;
}

static const struct weft_queue_ops root_ops = {.item = root_item};

static weft_status_t linear_post(struct weft_task *task)
{
	struct weft_engine *eng = weft_engine_of(task);
	const struct weft_coll_args *a = &task->args;
	int n = task->comm->nranks, rank = task->comm->rank;
	size_t block = a->count * a->esize;
	weft_engine_init(eng, NULL);
	if (rank == a->root) {
		if (!a->in_place)
			memcpy((char *)a->recvbuf + (size_t)rank * block, a->sendbuf, block);
		weft_engine_add_queue(eng, &root_ops, -1, false, (uint32_t)(n - 1), 0);
	} else {
		struct weft_xfer x = {
		    .peer = a->root,
		    .buf = (char *)a->sendbuf,
		    .bytes = block,
		    .step = (uint32_t)((rank - a->root - 1 + n) % n),
		};
		weft_engine_add_list(eng, true, &x, 1);
	}
	weft_engine_start(eng, task);
	return WEFT_SUCCESS;
}

static double linear_estimate(const struct weft_comm *comm, const struct weft_links *links,
			      const struct weft_coll_args *args)
{
	struct weft_cost c = links->worst;
	double block = (double)args->count * (double)args->esize;
	return c.alpha + (comm->nranks - 1) * block * c.beta;
}

const struct weft_algo weft_gather_linear = {
    .id = WEFT_ALGO_LINEAR,
    .coll = WEFT_COLL_GATHER,
    .name = "linear",
    .description = "every rank sends its block to the root, one message each",
    .estimate = linear_estimate,
    .task = {.post = linear_post, .progress = weft_engine_task_progress},
};
