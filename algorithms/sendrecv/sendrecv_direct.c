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
#include "core/comm.h"
#include "core/p2p.h"
#include "tune/tune.h"
#include "algorithms/algo.h"

struct sendrecv_direct {
	struct weft_msg msg;
};

_Static_assert(sizeof(struct sendrecv_direct) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct sendrecv_direct *state(const struct weft_task *task)
{
	return (struct sendrecv_direct *)(void *)task->priv;
}

static weft_status_t direct_post(struct weft_task *task, bool send)
{
	struct weft_msg *m = &state(task)->msg;
	const struct weft_coll_args *a = &task->args;
	*m = (struct weft_msg){
	    .buf = send ? (void *)a->sendbuf : a->recvbuf,
	    .len = a->count * a->esize,
	    .tag = weft_p2p_tag(task->seq, 0),
	    .unit = a->esize,
	};
	task->waiting_for = a->root;
	return send ? weft_p2p_isend(task->comm, a->root, m)
		    : weft_p2p_irecv(task->comm, a->root, m);
}

static weft_status_t send_post(struct weft_task *task)
{
	weft_status_t st = direct_post(task, true);
	return st == WEFT_SUCCESS ? WEFT_INPROGRESS : st;
}

static weft_status_t recv_post(struct weft_task *task)
{
	weft_status_t st = direct_post(task, false);
	return st == WEFT_SUCCESS ? WEFT_INPROGRESS : st;
}

static weft_status_t direct_progress(struct weft_task *task)
{
	struct weft_msg *m = &state(task)->msg;
	if (!m->done) {
		task->waiting_for = task->args.root;
		return WEFT_INPROGRESS;
	}
	weft_task_touch(task);
	return m->status;
}

/* The transport has no path to self (the core rejects peer == rank). */
static bool direct_supports(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	return args->root != comm->rank;
}

static double direct_estimate(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	if (args->root == comm->rank)
		return 0;
	struct weft_cost c = weft_tune_link(comm, comm->rank, args->root);
	return c.alpha + (double)args->count * (double)args->esize * c.beta;
}

const struct weft_algo weft_send_direct = {
    .id = WEFT_ALGO_DIRECT,
    .coll = WEFT_COLL_SEND,
    .name = "direct",
    .description = "the whole buffer as one message to the peer",
    .estimate = direct_estimate,
    .supports = direct_supports,
    .post = send_post,
    .progress = direct_progress,
};

const struct weft_algo weft_recv_direct = {
    .id = WEFT_ALGO_DIRECT,
    .coll = WEFT_COLL_RECV,
    .name = "direct",
    .description = "the whole buffer as one message from the peer",
    .estimate = direct_estimate,
    .supports = direct_supports,
    .post = recv_post,
    .progress = direct_progress,
};
