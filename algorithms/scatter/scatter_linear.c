/*
 * scatter_linear.c — Scatter: the root sends block p of its sendbuf
 * straight to rank p.
 *
 * The root copies its own block into its recvbuf (unless in place) and
 * sends the other n-1 blocks in the order root+1, root+2, ... (mod n);
 * each other rank receives its block as one message. On the engine: the
 * root has one queue of n-1 sends whose items name their peers, with the
 * engine's window; a receiver has a list of one item, tagged with its
 * position in the root's order. Whole blocks, as in gather_linear.c, so
 * the transport matches the two lengths.
 *
 * Cost (B = count x esize bytes per block, n ranks): every block leaves
 * over the root's link, the latencies overlap in its window:
 *   T = alpha + (n - 1) B beta
 * optimal in bandwidth at the root (a binomial tree would trade one
 * latency for log n and need staging on the intermediate ranks).
 */
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "core/comm.h"

struct scatter_linear {
	struct weft_engine eng;
};

WEFT_ENGINE_FIRST(struct scatter_linear);
_Static_assert(sizeof(struct scatter_linear) <= WEFT_TASK_PRIV_BYTES, "task state too big");

/* Root: item k is the block of rank root + 1 + k (mod n). */
static void root_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	const struct weft_coll_args *a = &task->args;
	int peer = (a->root + 1 + (int)k) % task->comm->nranks;
	out->peer = peer;
	out->buf = (char *)a->sendbuf + (size_t)peer * a->count * a->esize;
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
			memcpy(a->recvbuf, (const char *)a->sendbuf + (size_t)rank * block, block);
		weft_engine_add_queue(eng, &root_ops, -1, true, (uint32_t)(n - 1), 0);
	} else {
		struct weft_xfer x = {
		    .peer = a->root,
		    .buf = a->recvbuf,
		    .bytes = block,
		    .step = (uint32_t)((rank - a->root - 1 + n) % n),
		};
		weft_engine_add_list(eng, false, &x, 1);
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

const struct weft_algo weft_scatter_linear = {
    .id = WEFT_ALGO_LINEAR,
    .coll = WEFT_COLL_SCATTER,
    .name = "linear",
    .description = "the root sends each rank its block, one message each",
    .estimate = linear_estimate,
    .task = {.post = linear_post, .progress = weft_engine_task_progress},
};
