/* task.c — the task pool, starting tasks, and waiting for them. */
#include "task.h"

#include <sched.h>
#include <stdlib.h>

#include "../algorithms/algo.h"
#include "comm.h"

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

weft_status_t weft_task_start(struct weft_task *task)
{
	struct weft_comm *comm = task->comm;
	task->seq = comm->seq++;
	task->last_event = weft_now();
	task->status = task->algo->post(task);
	if (task->status != WEFT_INPROGRESS && task->status != WEFT_SUCCESS) {
		weft_status_t st = task->status;
		weft_task_put(task);
		return st;
	}
	task->status = WEFT_INPROGRESS;
	struct weft_task **link = &comm->active;
	while (*link)
		link = &(*link)->next;
	*link = task;
	return WEFT_SUCCESS;
}

/* Spin while the peers are likely running; once a wait grows long (or the
 * host is oversubscribed), yield the core on every round so that the ranks
 * we wait for can run. */
weft_status_t weft_task_wait(struct weft_task *task)
{
	struct weft_comm *comm = task->comm;
	unsigned spins = 0;
	while (task->status == WEFT_INPROGRESS) {
		weft_status_t st = weft_comm_progress(comm);
		if (st != WEFT_SUCCESS && task->status == WEFT_INPROGRESS)
			task->status = st;
		if (++spins > 2048)
			sched_yield();
	}
	return task->status;
}
