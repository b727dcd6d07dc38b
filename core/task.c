/* task.c — the task pool, starting and retiring tasks. */
#include "core/task.h"

#include <stdlib.h>

#include "core/comm.h"
#include "core/tag.h"
#include "core/trace.h"
#include "core/watch.h"
#include "util/clock.h"

static const char *const coll_names[WEFT_COLL_COUNT] = {
    [WEFT_COLL_ALLREDUCE] = "allreduce",
    [WEFT_COLL_ALLGATHER] = "allgather",
    [WEFT_COLL_REDUCE_SCATTER] = "reduce_scatter",
    [WEFT_COLL_BROADCAST] = "broadcast",
    [WEFT_COLL_REDUCE] = "reduce",
    [WEFT_COLL_ALLTOALL] = "alltoall",
    [WEFT_COLL_BARRIER] = "barrier",
    [WEFT_COLL_SEND] = "send",
    [WEFT_COLL_RECV] = "recv",
    [WEFT_COLL_ALLTOALLV] = "alltoallv",
    [WEFT_COLL_GATHER] = "gather",
    [WEFT_COLL_SCATTER] = "scatter",
};

const char *weft_coll_name(enum weft_coll_kind coll)
{
	return (unsigned)coll < WEFT_COLL_COUNT ? coll_names[coll] : "unknown";
}

struct weft_task *weft_task_get(struct weft_comm *comm)
{
	struct weft_task *t = comm->free_tasks;
	if (t)
		comm->free_tasks = t->next;
	else if (posix_memalign((void **)&t, 64, sizeof(*t)) != 0)
		return NULL;
	t->comm = comm;
	t->next = NULL;
	t->on_complete = NULL;
	t->status = WEFT_INPROGRESS;
	t->waiting_for = -1;
	t->waiting_step = UINT32_MAX;
	t->waiting_send = false;
	t->trace_id = 0;
	t->deadline = 0;
	return t;
}

void weft_task_put(struct weft_task *task)
{
	struct weft_comm *comm = task->comm;
	task->next = comm->free_tasks;
	comm->free_tasks = task;
}

void weft_task_retire(struct weft_task *task)
{
	task->next = NULL;
	if (task->posted && task->ops->finalize)
		task->ops->finalize(task);
	task->posted = false;
}

/* Callbacks run with their communicator's lock held (weft.h): one that
 * called Weft could take another communicator's lock in the opposite
 * order of a thread that waits on both, or its own again. The entry points
 * refuse while a callback runs in this thread (weft_task_in_callback). */
static __thread int in_callback;
/* Callbacks running in any thread: every entry point asks, and a thread-local
 * in a shared library costs a call to __tls_get_addr (a tenth of an 8-byte
 * AllReduce's overhead); while no callback runs anywhere, this one relaxed
 * load answers. */
static _Atomic int callbacks_running;

void weft_task_notify(struct weft_task *task)
{
	void (*fn)(void *, weft_status_t) = task->on_complete;
	task->on_complete = NULL;
	if (!fn)
		return;
	atomic_fetch_add_explicit(&callbacks_running, 1, memory_order_relaxed);
	in_callback++;
	fn(task->on_complete_arg, task->status);
	in_callback--;
	atomic_fetch_sub_explicit(&callbacks_running, 1, memory_order_relaxed);
}

bool weft_task_in_callback(void)
{
	/* This thread's own increment is visible to it whatever the order. */
	if (atomic_load_explicit(&callbacks_running, memory_order_relaxed) == 0)
		return false;
	return in_callback > 0;
}

void weft_task_touch(struct weft_task *task)
{
	task->last_event = weft_now();
	weft_wait_moved(task->comm);
}

/* Collectives are numbered in call order, which every rank shares; sends
 * and receives per peer and direction, which is what both ends share. The
 * number and the call's signature make the upper half of every tag of the
 * task (core/tag.h), so that mismatched calls fail at the first message.
 * *call is the number in full (the tag keeps 12 bits of a collective's). */
static uint64_t next_seq(struct weft_comm *comm, const struct weft_task *task, uint64_t *call)
{
	switch (task->args.coll) {
	case WEFT_COLL_SEND:
		*call = comm->p2p_sent[task->args.root]++;
		return weft_tag_p2p_word(*call);
	case WEFT_COLL_RECV:
		*call = comm->p2p_received[task->args.root]++;
		return weft_tag_p2p_word(*call);
	default: *call = comm->seq++; return weft_tag_coll_word(*call, &task->args);
	}
}

/* The flight recorder and the observers time operations from the call:
 * an observer that asks for precise_clock (core/service.h: the metrics'
 * histograms) needs the clock (about 20 ns a read here, a tenth of an
 * 8-byte AllReduce's own cost); the recorder alone takes the coarse one
 * (its tick, a quarter of that), which is plenty to tell when a job
 * stopped. */
uint64_t weft_task_clock(const struct weft_comm *comm)
{
	if (comm->observe.precise_clock)
		return weft_now_ns();
	return comm->trace && comm->trace->cap ? weft_now_coarse_ns() : 0;
}

void weft_task_record(struct weft_task *task, bool started)
{
	struct weft_comm *comm = task->comm;
	task->posted_ns = weft_task_clock(comm);
	weft_trace_posted(task, task->call, started ? task->posted_ns : 0);
	weft_observe_started(&comm->observe, task, task->call);
}

void weft_task_start(struct weft_task *task, unsigned group)
{
	weft_task_queue(task, group);
	weft_task_record(task, false);
}

void weft_task_queue(struct weft_task *task, unsigned group)
{
	struct weft_comm *comm = task->comm;
	task->seq = next_seq(comm, task, &task->call);
	task->group = group;
	task->trace_id = 0;
	if (!weft_task_is_p2p(task)) {
		uint64_t call = weft_tag_number((uint32_t)task->seq);
		comm->recent_calls[call % WEFT_RECENT_CALLS] = task->seq | (1ull << 32);
		weft_watch_op_started(comm, call, (int)task->args.coll);
		if (comm->shmem && comm->shmem_announce)
			comm->shmem_announce(comm->shmem, comm->seq - 1, (uint32_t)task->seq);
	}
	task->started = true;
	task->posted = false;
	task->status = WEFT_INPROGRESS;
	task->waiting_for = -1;
	task->waiting_step = UINT32_MAX;
	task->waiting_send = false;
	task->ended_quick = false;
	task->last_event = 0; /* the post sets it (a wait compares it before) */
	task->next = NULL;
	weft_wait_moved(comm);
	struct weft_task **link = &comm->active;
	while (*link)
		link = &(*link)->next;
	*link = task;
}
