/*
 * sched_linear.h — the linear-root schedule under Gather and Scatter
 * (gather_linear.c, scatter_linear.c), on the engine: the two are one
 * schedule run in opposite directions.
 *
 * The root copies its own block (unless in place) and exchanges one whole
 * block with each other rank, in the order root+1, root+2, ... (mod n):
 * toward the root (Gather) the block of rank p lands at recvbuf + p * B;
 * from the root (Scatter) block p of sendbuf leaves for rank p, into its
 * recvbuf. The root has one queue of n-1 items that name their peers, with
 * the engine's window (up to that many peers at once); every other rank
 * has a list of one item, tagged with its position in the root's order, so
 * both ends' tags agree.
 *
 * Whole blocks, not chunks: each pair exchanges one message, so the
 * transport checks the two lengths against each other, and pipelines a
 * long message itself.
 *
 * Cost (B = count x esize bytes per block, n ranks): every block crosses
 * the root's link, the latencies overlap in its window:
 *   T = alpha + (n - 1) B beta
 */
#ifndef WEFT_SCHED_LINEAR_H
#define WEFT_SCHED_LINEAR_H

#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"

enum weft_linear_dir {
	WEFT_LINEAR_TO_ROOT,   /* Gather: every rank's block to the root */
	WEFT_LINEAR_FROM_ROOT, /* Scatter: the root's blocks to every rank */
};

/* The state of both algorithms, at the start of task->priv. */
struct weft_linear_task {
	struct weft_engine eng;
	enum weft_linear_dir dir;
};

/* Copy the root's own block and start the engine on the schedule of
 * @p dir for @p task. */
weft_status_t weft_linear_sched_post(struct weft_task *task, enum weft_linear_dir dir);

/* The cost above, either direction (an algorithm's estimate). */
double weft_linear_sched_estimate(const struct weft_comm *comm, const struct weft_links *links,
				  const struct weft_coll_args *args);

#endif
