/* task.c — the task pool, starting tasks, and waiting for them. */
#include "core/task.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "algorithms/algo.h"
#include "core/comm.h"
#include "core/tag.h"

struct weft_task *weft_task_get(struct weft_comm *comm)
{
	struct weft_task *t = comm->free_tasks;
	if (t)
		comm->free_tasks = t->next;
	else if (posix_memalign((void **)&t, 64, sizeof(*t)) != 0)
		return NULL;
	t->comm = comm;
	t->next = NULL;
	t->status = WEFT_INPROGRESS;
	t->waiting_for = -1;
	return t;
}

void weft_task_put(struct weft_task *task)
{
	struct weft_comm *comm = task->comm;
	task->next = comm->free_tasks;
	comm->free_tasks = task;
}

void weft_task_touch(struct weft_task *task)
{
	task->last_event = weft_now();
}

/* Collectives are numbered in call order, which every rank shares; sends
 * and receives per peer and direction, which is what both ends share. The
 * number and the call's signature make the upper half of every tag of the
 * task (core/tag.h), so that mismatched calls fail at the first message. */
static uint64_t next_seq(struct weft_comm *comm, const struct weft_task *task)
{
	switch (task->args.coll) {
	case WEFT_COLL_SEND: return weft_tag_p2p_word(comm->p2p_sent[task->args.root]++);
	case WEFT_COLL_RECV: return weft_tag_p2p_word(comm->p2p_received[task->args.root]++);
	default: return weft_tag_coll_word(comm->seq++, &task->args);
	}
}

void weft_task_start(struct weft_task *task, unsigned group)
{
	struct weft_comm *comm = task->comm;
	task->seq = next_seq(comm, task);
	if (!weft_task_is_p2p(task))
		comm->recent_calls[weft_tag_number((uint32_t)task->seq) % WEFT_RECENT_CALLS] =
		    task->seq | (1ull << 32);
	task->group = group;
	task->started = true;
	task->posted = false;
	task->status = WEFT_INPROGRESS;
	task->waiting_for = -1;
	task->next = NULL;
	struct weft_task **link = &comm->active;
	while (*link)
		link = &(*link)->next;
	*link = task;
}

/* Spin while the peers are likely running. With more local ranks than
 * cores (oversubscribed), a rank we wait for is probably descheduled:
 * once nothing has moved for a while, nap so that it gets the core
 * (sched_yield alone does not hand the core over under CFS). Otherwise
 * only yield now and then, to be polite to other work on the machine. */
#define WEFT_SPIN_SECONDS 50e-6
#define WEFT_NAP_NS	  2000

void weft_wait_backoff(const struct weft_comm *comm, unsigned *spins, double last_event)
{
	if ((++*spins & 255) != 0)
		return;
	if (!comm->oversubscribed) {
		if ((*spins & 0xffff) == 0)
			sched_yield();
		return;
	}
	if (weft_now() - last_event > WEFT_SPIN_SECONDS) {
		struct timespec nap = {0, WEFT_NAP_NS};
		nanosleep(&nap, NULL);
	}
}

/* Communicators with non-blocking operations started from some thread,
 * with that thread. A wait drives the others of its own thread too, as an
 * MPI wait does, so that ranks may wait for operations on different
 * communicators in different orders. The table is shared and locked so that
 * a communicator destroyed from another thread is never driven after it is
 * gone: destroy takes the same lock. */
#define WEFT_WAIT_COMMS 64
static pthread_mutex_t wait_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct weft_comm *comm;
	pthread_t thread;
} wait_comms[WEFT_WAIT_COMMS];

void weft_thread_comm_add(struct weft_comm *comm)
{
	pthread_t self = pthread_self();
	pthread_mutex_lock(&wait_lock);
	int free_slot = -1;
	bool known = false;
	for (int i = 0; i < WEFT_WAIT_COMMS && !known; i++) {
		if (wait_comms[i].comm == comm && pthread_equal(wait_comms[i].thread, self))
			known = true;
		else if (!wait_comms[i].comm && free_slot < 0)
			free_slot = i;
	}
	if (!known && free_slot >= 0) { /* beyond the table, waits drive only their own */
		wait_comms[free_slot].comm = comm;
		wait_comms[free_slot].thread = self;
	}
	pthread_mutex_unlock(&wait_lock);
}

void weft_thread_comm_forget(struct weft_comm *comm)
{
	pthread_mutex_lock(&wait_lock);
	for (int i = 0; i < WEFT_WAIT_COMMS; i++)
		if (wait_comms[i].comm == comm)
			wait_comms[i].comm = NULL;
	pthread_mutex_unlock(&wait_lock);
}

static void progress_others(const struct weft_comm *self)
{
	pthread_t me = pthread_self();
	pthread_mutex_lock(&wait_lock);
	for (int i = 0; i < WEFT_WAIT_COMMS; i++) {
		struct weft_comm *c = wait_comms[i].comm;
		if (!c || c == self || !pthread_equal(wait_comms[i].thread, me))
			continue;
		if (c->active)
			weft_comm_progress(c); /* its errors land in its own tasks */
		else
			wait_comms[i].comm = NULL;
	}
	pthread_mutex_unlock(&wait_lock);
}

weft_status_t weft_task_wait(struct weft_task *task)
{
	struct weft_comm *comm = task->comm;
	unsigned spins = 0;
	while (task->status == WEFT_INPROGRESS) {
		double seen = task->last_event;
		progress_others(comm);
		weft_status_t st = weft_comm_progress(comm);
		if (st != WEFT_SUCCESS && task->status == WEFT_INPROGRESS)
			task->status = st;
		if (task->last_event != seen)
			spins = 0;
		else
			weft_wait_backoff(comm, &spins, task->last_event);
	}
	return task->status;
}
