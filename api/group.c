/* group.c — weft_group_start/weft_group_end: the calls made between them
 * are recorded on the calling thread and start together at the end. */
#include <stdatomic.h>

#include "api/api.h"
#include "core/progress.h"
#include "core/progress_thread.h"
#include "core/task.h"

/* Per thread, nestable. */
static __thread int group_depth;
static __thread struct weft_task *group_head, *group_tail;
static _Atomic unsigned group_counter;

weft_status_t weft_group_start(void)
{
	if (weft_task_in_callback())
		return weft_err_set(weft_err_init_fresh(), WEFT_ERR_INVALID_ARG, "%s: %s",
				    "weft_group_start", WEFT_API_IN_CALLBACK);
	group_depth++;
	return WEFT_SUCCESS;
}

weft_status_t weft_group_end(void)
{
	if (weft_task_in_callback())
		return weft_err_set(weft_err_init_fresh(), WEFT_ERR_INVALID_ARG, "%s: %s",
				    "weft_group_end", WEFT_API_IN_CALLBACK);

	if (group_depth == 0)
		return weft_err_set(weft_err_init_fresh(), WEFT_ERR_INVALID_ARG,
				    "weft_group_end without weft_group_start");
	if (--group_depth > 0)
		return WEFT_SUCCESS;
	unsigned id;
	do
		id = atomic_fetch_add(&group_counter, 1) + 1;
	while (id == 0);
	struct weft_task *list = group_head;
	group_head = group_tail = NULL;
	for (struct weft_task *t = list; t; t = t->group_next) {
		weft_comm_lock(t->comm);
		weft_task_start(t, id);
		weft_progress_thread_kick(t->comm);
		weft_comm_unlock(t->comm);
	}

	/* Progress every communicator of the group until the blocking members
	 * are done: they may depend on each other across communicators. A
	 * member's status is read under its communicator's lock: a progress
	 * thread sets it first and then, in the same hold, unlinks the task
	 * through its next (core/progress.c finish_task); returning a task to
	 * the pool seen done before that hold ends would overwrite that link
	 * and put a finished task back in the active list (CI saw sends and
	 * receives out of step, one run in 60 with WEFT_PROGRESS_THREAD=1). */
	unsigned spins = 0;
	double last = weft_now();
	const struct weft_comm *any = list ? list->comm : NULL;
	for (bool pending = true; pending;) {
		bool moved = false;
		pending = false;
		for (struct weft_task *t = list; t; t = t->group_next) {
			if (!t->group_wait)
				continue;
			weft_comm_lock(t->comm);
			if (t->status == WEFT_INPROGRESS) {
				double seen = t->last_event;
				weft_status_t st = weft_comm_progress(t->comm);
				if (st != WEFT_SUCCESS && t->status == WEFT_INPROGRESS)
					t->status = st;
				if (t->last_event != seen || t->status != WEFT_INPROGRESS) {
					moved = true;
					last = t->last_event;
				}
				pending = pending || t->status == WEFT_INPROGRESS;
			}
			weft_comm_unlock(t->comm);
		}
		if (moved)
			spins = 0;
		else if (pending)
			weft_wait_backoff(any, &spins, last);
	}
	weft_status_t first = WEFT_SUCCESS;
	for (struct weft_task *t = list, *next; t; t = next) {
		next = t->group_next;
		if (!t->group_wait)
			continue;
		if (first == WEFT_SUCCESS && t->status != WEFT_SUCCESS)
			first = t->status;
		weft_task_put(t);
	}
	return first;
}

bool weft_api_group_open(void)
{
	return group_depth > 0;
}

bool weft_api_group_record(struct weft_task *task, weft_request_t *request)
{
	if (group_depth == 0)
		return false;
	task->group_wait = !request;
	task->group_next = NULL;
	if (group_tail)
		group_tail->group_next = task;
	else
		group_head = task;
	group_tail = task;
	if (request) {
		*request = task;
		weft_thread_comm_add(task->comm);
	}
	return true;
}
