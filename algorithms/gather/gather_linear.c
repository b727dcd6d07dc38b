/*
 * gather_linear.c — Gather: every rank's block straight to the root.
 *
 * The root copies its own block into place (unless in place) and receives
 * the other n-1 blocks, block of rank p into recvbuf + p * B, in the order
 * root+1, root+2, ... (mod n), up to the engine's window of senders at
 * once; each other rank sends its block to the root as one message. It is
 * the linear-root schedule toward the root (engine/sched_linear.h, which
 * Scatter runs the other way).
 *
 * Cost (B = count x esize bytes per block, n ranks): the root's link
 * carries every block, the latencies overlap in its window:
 *   T = alpha + (n - 1) B beta
 * which is optimal in bandwidth at the root. A binomial tree would pay
 * log n latencies instead of one window's worth for tiny blocks on many
 * ranks, and forward blocks through intermediate ranks (staging memory
 * they do not have: their recvbuf is not used).
 */
#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "algorithms/engine/sched_linear.h"

static weft_status_t linear_post(struct weft_task *task)
{
	return weft_linear_sched_post(task, WEFT_LINEAR_TO_ROOT);
}

const struct weft_algo weft_gather_linear = {
    .id = WEFT_ALGO_LINEAR,
    .coll = WEFT_COLL_GATHER,
    .name = "linear",
    .description = "every rank sends its block to the root, one message each",
    .estimate = weft_linear_sched_estimate,
    .task = {.post = linear_post, .progress = weft_engine_task_progress},
};
