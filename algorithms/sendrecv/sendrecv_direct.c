/*
 * sendrecv_direct.c — point-to-point Send and Recv: one message to or from
 * the peer (args.root).
 *
 * The whole buffer is one message, posted when the call starts. That keeps
 * the API's matching rule for free: sends to a peer meet that peer's
 * receives in the order both were called, because the transport matches
 * messages of one direction in the order they were posted, and a call
 * posts everything it will ever post at once (chunked sends from two
 * concurrent calls would interleave). The transports pipeline a long
 * message themselves (shm slots or single copy, socket frames).
 *
 * The tag carries the task's sequence number, which the core counts per
 * peer and direction for sends and receives (with a bit no collective's
 * number has), so the n-th send to a peer and the peer's n-th receive from
 * us carry the same tag; a send that meets a collective's receive, or a
 * length mismatch, fails with a message naming both instead of corrupting
 * data.
 *
 * Cost (S bytes): T = alpha + S beta over the link between the two ranks.
 */
#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "core/comm.h"

struct sendrecv_direct {
	struct weft_engine eng;
};

WEFT_ENGINE_FIRST(struct sendrecv_direct);
_Static_assert(sizeof(struct sendrecv_direct) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static weft_status_t direct_post(struct weft_task *task, bool send)
{
	struct weft_engine *eng = weft_engine_of(task);
	const struct weft_coll_args *a = &task->args;
	struct weft_xfer x = {
	    .peer = a->root,
	    .buf = send ? (char *)a->sendbuf : (char *)a->recvbuf,
	    .bytes = a->count * a->esize,
	    .step = 0,
	    /* A zero-byte message still goes: it takes its number on both
	     * sides, and a receive posted for more fails naming both sizes. */
	    .signal = true,
	};
	weft_engine_init(eng, NULL);
	weft_engine_add_list(eng, send, &x, 1);
	weft_engine_start(eng, task);
	return WEFT_SUCCESS;
}

static weft_status_t send_post(struct weft_task *task)
{
	return direct_post(task, true);
}

static weft_status_t recv_post(struct weft_task *task)
{
	return direct_post(task, false);
}

/* The transport has no path to self (the core rejects peer == rank). */
static bool direct_supports(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	return args->root != comm->rank;
}

static double direct_estimate(const struct weft_comm *comm, const struct weft_links *links,
			      const struct weft_coll_args *args)
{
	if (args->root == comm->rank)
		return 0;
	struct weft_cost c = links->cls[weft_topo_link(&comm->graph, comm->rank, args->root)];
	return c.alpha + (double)args->count * (double)args->esize * c.beta;
}

const struct weft_algo weft_send_direct = {
    .id = WEFT_ALGO_DIRECT,
    .coll = WEFT_COLL_SEND,
    .name = "direct",
    .description = "the whole buffer as one message to the peer",
    .estimate = direct_estimate,
    .supports = direct_supports,
    .task = {.post = send_post, .progress = weft_engine_task_progress},
};

const struct weft_algo weft_recv_direct = {
    .id = WEFT_ALGO_DIRECT,
    .coll = WEFT_COLL_RECV,
    .name = "direct",
    .description = "the whole buffer as one message from the peer",
    .estimate = direct_estimate,
    .supports = direct_supports,
    .task = {.post = recv_post, .progress = weft_engine_task_progress},
};
