/*
 * scatter_linear.c — Scatter: the root sends block p of its sendbuf
 * straight to rank p.
 *
 * The root copies its own block into its recvbuf (unless in place) and
 * sends the other n-1 blocks in the order root+1, root+2, ... (mod n), up
 * to the engine's window at once; each other rank receives its block as
 * one message. It is the linear-root schedule from the root
 * (engine/sched_linear.h, which Gather runs the other way).
 *
 * Cost (B = count x esize bytes per block, n ranks): every block leaves
 * over the root's link, the latencies overlap in its window:
 *   T = alpha + (n - 1) B beta
 * optimal in bandwidth at the root (a binomial tree would trade one
 * latency for log n and need staging on the intermediate ranks).
 */
#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "algorithms/engine/sched_linear.h"

static weft_status_t linear_post(struct weft_task *task)
{
	return weft_linear_sched_post(task, WEFT_LINEAR_FROM_ROOT);
}

const struct weft_algo weft_scatter_linear = {
    .id = WEFT_ALGO_LINEAR,
    .coll = WEFT_COLL_SCATTER,
    .name = "linear",
    .description = "the root sends each rank its block, one message each",
    .estimate = weft_linear_sched_estimate,
    .task = {.post = linear_post, .progress = weft_engine_task_progress},
};
