/* task.h — a collective in flight: post, then progress until done, then
 * finalize. Progress never blocks; blocking calls progress inline. */
#ifndef WEFT_TASK_H
#define WEFT_TASK_H

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft.h"

struct weft_comm;
struct weft_task;
struct weft_trace_op;

enum weft_coll_kind {
	WEFT_COLL_ALLREDUCE = 0,
	WEFT_COLL_ALLGATHER,
	WEFT_COLL_REDUCE_SCATTER,
	WEFT_COLL_BROADCAST,
	WEFT_COLL_REDUCE,
	WEFT_COLL_ALLTOALL,
	WEFT_COLL_BARRIER,
	WEFT_COLL_SEND,
	WEFT_COLL_RECV,
	WEFT_COLL_ALLTOALLV,
	WEFT_COLL_GATHER,
	WEFT_COLL_SCATTER,
	WEFT_COLL_COUNT
};

/* AlltoAllv's per-peer blocks, in elements: block j of sendbuf (to rank j)
 * is sendcounts[j] elements at sdispls[j]; block i of recvbuf (from rank
 * i) is recvcounts[i] elements at rdispls[i]. The arrays are the caller's
 * (nranks entries each) and stay valid until the operation completes. */
struct weft_coll_blocks {
	const size_t *sendcounts, *sdispls;
	const size_t *recvcounts, *rdispls;
	size_t send_total, recv_total; /* elements, over every peer (self included) */
};

/* A collective call as the algorithms see it, in place resolved. */
struct weft_coll_args {
	enum weft_coll_kind coll;
	const void *sendbuf; /* never WEFT_IN_PLACE: resolved to the in-place source */
	void *recvbuf;
	/* Elements per rank (reduce_scatter: per block; alltoall, gather,
	 * scatter: per peer; alltoallv: the larger of blocks.send_total and
	 * blocks.recv_total, which the tuner sizes the call by). */
	size_t count;
	weft_datatype_t dtype;
	weft_op_t op;
	size_t esize;
	bool in_place;
	int root; /* broadcast, reduce, gather, scatter: the root; send, recv: the peer */
	struct weft_coll_blocks blocks; /* alltoallv only; zero otherwise */
};

/* Name of a collective ("allreduce"), "unknown" if out of range. */
const char *weft_coll_name(enum weft_coll_kind coll);

/* What runs a task: the algorithm the tuner chose (algorithms/algo.h
 * embeds these in its table). */
struct weft_task_ops {
	/* Set up task->priv. Never moves a message: progress follows. */
	weft_status_t (*post)(struct weft_task *task);
	/* WEFT_SUCCESS when this rank's part is finished, WEFT_INPROGRESS, or an error. */
	weft_status_t (*progress)(struct weft_task *task);
	/* Once, after the last progress, whether it succeeded or not (and when
	 * the communicator kills the task): release what post took. NULL: nothing. */
	void (*finalize)(struct weft_task *task);
	/* Asked once, after the post: does the task's progress need nothing but
	 * itself (no transport, no gate, no other task)? Then a blocking call
	 * on an otherwise idle communicator drives only it between the checks
	 * every wait makes (core/progress.c, weft_task_run): the small
	 * shared-memory AllReduce, whose 8 bytes take a few hundred ns. NULL: no. */
	bool (*alone)(const struct weft_task *task);
};

#define WEFT_TASK_PRIV_BYTES 8192

struct weft_task {
	struct weft_comm *comm;
	const struct weft_task_ops *ops;
	const char *algo_name;
	/* What an algorithm that adapts after its first step may hand the
	 * call to (the shm AllReduce when not every buffer can be mapped):
	 * the tuner's next choice, set with the task; NULL: none. */
	const struct weft_task_ops *fallback_ops;
	const char *fallback_name;
	struct weft_coll_args args;
	uint64_t seq;	      /* upper half of its tags: call number and signature (core/tag.h) */
	uint64_t call;	      /* its number in full (weft_tag_number keeps 12 bits) */
	unsigned group;	      /* weft_group_end batch it was started in; 0: none */
	bool started;	      /* queued on its communicator (weft_task_start) */
	bool posted;	      /* its algorithm has been posted */
	bool group_wait;      /* recorded in a group by a blocking call: weft_group_end waits */
	weft_status_t status; /* WEFT_INPROGRESS while active */
	double last_event;    /* when a message of this task last completed */
	/* weft_request_set_timeout: fail with WEFT_ERR_TIMEOUT at @deadline
	 * (weft_now()), @timeout_s after it was set, running or queued; 0: none. */
	double deadline, timeout_s;
	int waiting_for; /* peer the task waits on, for the timeout message; -1 none */
	/* The message it waits for, as far as the algorithm knows: its tag
	 * step (UINT32_MAX unknown) and whether it is a send. */
	uint32_t waiting_step;
	bool waiting_send;
	uint64_t trace_id; /* its record in the flight recorder (core/trace.h); 0 none */
	struct weft_trace_op *trace_rec; /* where that is, while trace_id is not 0 */
	uint64_t posted_ns;		 /* when it was called, for the metrics (0: not timed) */
	/* It ran alone and ended within its first polls, before anything read
	 * the clock (core/progress.c run_alone): microseconds after its call,
	 * which the recorder's coarse clock cannot tell from the call. */
	bool ended_quick;
	uint64_t started_ns; /* when its algorithm was posted (weft_now_ns) */
	/* Called once when the operation finishes (weft_task_notify); NULL: none. */
	void (*on_complete)(void *arg, weft_status_t status);
	void *on_complete_arg;
	struct weft_task *next;	      /* in the communicator's active list */
	struct weft_task *group_next; /* in the calling thread's open group */
	alignas(64) unsigned char priv[WEFT_TASK_PRIV_BYTES]; /* the algorithm's state */
};

/* Take a task from the communicator's pool (allocating only when the pool
 * is empty) and return it, finished, to the pool. */
struct weft_task *weft_task_get(struct weft_comm *comm);
void weft_task_put(struct weft_task *task);

/* Start a task: assign its sequence number and queue it on its
 * communicator. Operations of one communicator run one after another, in
 * call order (as on an NCCL stream), so messages of different operations
 * never interleave on a connection; only the send/recv of one group run
 * side by side. A task is posted when its turn comes. */
void weft_task_start(struct weft_task *task, unsigned group);

/* weft_task_start in two halves, for weft_task_run: queue the task (its
 * number, the watch), then record it (the clock, the flight recorder, the
 * observers), @p started when its algorithm is already posted. */
void weft_task_queue(struct weft_task *task, unsigned group);
void weft_task_record(struct weft_task *task, bool started);

static inline bool weft_task_is_p2p(const struct weft_task *task)
{
	return task->args.coll == WEFT_COLL_SEND || task->args.coll == WEFT_COLL_RECV;
}

/* The task leaves its communicator's active list, finished or killed: its
 * algorithm's finalize releases what post took (once). */
void weft_task_retire(struct weft_task *task);

/* The task has finished: run its completion callback, if any (once). */
void weft_task_notify(struct weft_task *task);

/* True while this thread runs a completion callback: Weft's entry points
 * then refuse (weft.h, weft_request_on_complete). */
bool weft_task_in_callback(void);

/* The time the recorder and the metrics give an operation's call and end:
 * weft_now_ns() with the metrics on, the coarse clock with the recorder
 * alone, 0 with neither. */
uint64_t weft_task_clock(const struct weft_comm *comm);

/* Note that a message of this task has completed (resets its timeout). */
void weft_task_touch(struct weft_task *task);

#endif
