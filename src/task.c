/* task.c — the task pool, starting tasks, and waiting for them. */
#include "task.h"

#include <stdlib.h>
#include <time.h>

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

/* Spin while the peers are likely running. Once nothing has moved for a
 * while, the ranks we wait for are probably descheduled (more ranks than
 * cores): sleep a little so they get the core. sched_yield alone does not
 * hand the core over under CFS. */
#define WEFT_SPIN_SECONDS 50e-6
#define WEFT_NAP_NS 2000

weft_status_t weft_task_wait(struct weft_task *task)
{
	struct weft_comm *comm = task->comm;
	unsigned spins = 0;
	while (task->status == WEFT_INPROGRESS) {
		double seen = task->last_event;
		weft_status_t st = weft_comm_progress(comm);
		if (st != WEFT_SUCCESS && task->status == WEFT_INPROGRESS)
			task->status = st;
		if (task->last_event != seen) {
			spins = 0;
			continue;
		}
		if ((++spins & 255) == 0 && weft_now() - task->last_event > WEFT_SPIN_SECONDS) {
			struct timespec nap = {0, WEFT_NAP_NS};
			nanosleep(&nap, NULL);
		}
	}
	return task->status;
}
