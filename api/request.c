/* request.c — weft_test, weft_wait and completion callbacks. */
#include "api/api.h"
#include "core/fail.h"
#include "core/progress.h"
#include "core/task.h"
#include "util/clock.h"

weft_status_t weft_test(weft_request_t *request)
{
	if (!request)
		return WEFT_ERR_INVALID_ARG;
	if (weft_task_in_callback())
		return weft_err_set(weft_err_init_fresh(), WEFT_ERR_INVALID_ARG, "%s: %s",
				    "weft_test", WEFT_API_IN_CALLBACK);

	struct weft_task *task = *request;
	if (!task) /* a zero-count call, or already completed */
		return WEFT_SUCCESS;
	struct weft_comm *comm = task->comm;
	/* Under the lock: a progress thread may be finishing the task now. */
	weft_comm_lock(comm);
	if (task->status == WEFT_INPROGRESS) {
		weft_status_t st = weft_comm_progress(comm);
		if (st != WEFT_SUCCESS && task->status == WEFT_INPROGRESS && task->posted)
			task->status = st;
	}
	weft_status_t st = task->status;
	weft_comm_unlock(comm);
	if (st == WEFT_INPROGRESS)
		return WEFT_INPROGRESS;
	weft_task_put(task);
	*request = NULL;
	return st;
}

weft_status_t weft_wait(weft_request_t *request)
{
	if (!request)
		return WEFT_ERR_INVALID_ARG;
	if (weft_task_in_callback())
		return weft_err_set(weft_err_init_fresh(), WEFT_ERR_INVALID_ARG, "%s: %s",
				    "weft_wait", WEFT_API_IN_CALLBACK);

	struct weft_task *task = *request;
	if (!task)
		return WEFT_SUCCESS;
	if (!task->started)
		return weft_comm_fail(
		    task->comm, WEFT_ERR_INVALID_ARG,
		    "weft_wait: the request's group has not ended (weft_group_end)");
	weft_status_t st = weft_task_wait(task);
	weft_task_put(task);
	*request = NULL;
	return st;
}

weft_status_t weft_request_on_complete(weft_request_t request,
				       void (*fn)(void *arg, weft_status_t status), void *arg)
{
	if (!request || !fn)
		return weft_err_set(weft_err_init_record(), WEFT_ERR_INVALID_ARG,
				    "weft_request_on_complete: %s is NULL",
				    request ? "fn" : "request");
	struct weft_comm *comm = request->comm;
	weft_comm_lock(comm);
	weft_status_t st = request->status;
	if (st == WEFT_INPROGRESS) {
		request->on_complete = fn;
		request->on_complete_arg = arg;
	}
	weft_comm_unlock(comm);
	if (st != WEFT_INPROGRESS) /* finished already: now, in this thread */
		fn(arg, st);
	return WEFT_SUCCESS;
}

weft_status_t weft_request_set_timeout(weft_request_t request, double seconds)
{
	if (!request) /* a call with nothing to do: finished already */
		return WEFT_SUCCESS;
	struct weft_comm *comm = request->comm;
	if (!(seconds > 0 && seconds < 1e9)) /* NaN too */
		return weft_comm_fail(
		    comm, WEFT_ERR_INVALID_ARG,
		    "weft_request_set_timeout: %g s is not a timeout (0 < s < 1e9)", seconds);
	weft_comm_lock(comm);
	if (request->status == WEFT_INPROGRESS) {
		request->timeout_s = seconds;
		request->deadline = weft_now() + seconds;
		comm->deadlines = true;
	}
	weft_comm_unlock(comm);
	return WEFT_SUCCESS;
}
