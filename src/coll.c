/* coll.c — the public collective calls: check the arguments, resolve in
 * place, pick the algorithm, run the task. */
#include <stdint.h>
#include <string.h>

#include "../algorithms/algo.h"
#include "comm.h"
#include "dtype.h"
#include "task.h"

static weft_status_t check_comm(struct weft_comm *comm, const char *call)
{
	if (!comm)
		return weft_err_set(weft_err_init_record(), WEFT_ERR_INVALID_ARG, "%s: comm is NULL", call);
	weft_status_t async = (weft_status_t)atomic_load(&comm->async_error);
	if (async != WEFT_SUCCESS)
		return weft_comm_fail(comm, async, "%s: the communicator failed earlier: %s", call,
				      comm->err.msg);
	return WEFT_SUCCESS;
}

static weft_status_t check_args(struct weft_comm *comm, const char *call, const void *sendbuf,
				const void *recvbuf, size_t count, size_t nblocks,
				weft_datatype_t dtype, weft_op_t op, bool needs_op)
{
	if (!weft_dtype_valid(dtype))
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "%s: invalid datatype %d", call,
				      (int)dtype);
	if (needs_op && !weft_op_valid(op))
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "%s: invalid op %d", call, (int)op);
	size_t esize = weft_datatype_size(dtype);
	if (count > SIZE_MAX / esize / nblocks || count * esize * nblocks > (size_t)PTRDIFF_MAX)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "%s: count %zu of %s overflows the address space", call, count,
				      weft_dtype_name(dtype));
	if (count > 0 && !recvbuf)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "%s: recvbuf is NULL", call);
	if (count > 0 && !sendbuf)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "%s: sendbuf is NULL (use WEFT_IN_PLACE for in place)", call);
	return WEFT_SUCCESS;
}

static weft_status_t start(struct weft_comm *comm, const struct weft_coll_args *args,
			   struct weft_task **out)
{
	struct weft_task *task = weft_task_get(comm);
	if (!task)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "%s: no memory for a task",
				      weft_coll_name(args->coll));
	task->args = *args;
	task->algo = weft_tune_select(comm, args);
	weft_status_t st = weft_task_start(task);
	if (st != WEFT_SUCCESS)
		return st;
	*out = task;
	return WEFT_SUCCESS;
}

static weft_status_t run(struct weft_comm *comm, const struct weft_coll_args *args,
			 weft_request_t *request)
{
	if (args->count == 0) {
		if (request)
			*request = NULL;
		return WEFT_SUCCESS;
	}
	struct weft_task *task = NULL;
	weft_status_t st = start(comm, args, &task);
	if (st != WEFT_SUCCESS)
		return st;
	if (request) {
		*request = task;
		return WEFT_SUCCESS;
	}
	st = weft_task_wait(task);
	weft_task_put(task);
	return st;
}

static weft_status_t allreduce(const void *sendbuf, void *recvbuf, size_t count,
			       weft_datatype_t dtype, weft_op_t op, struct weft_comm *comm,
			       weft_request_t *request, const char *call)
{
	weft_status_t st = check_comm(comm, call);
	if (st == WEFT_SUCCESS)
		st = check_args(comm, call, sendbuf, recvbuf, count, 1, dtype, op, true);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_coll_args args = {
		.coll = WEFT_COLL_ALLREDUCE, .recvbuf = recvbuf, .count = count, .dtype = dtype,
		.op = op, .esize = weft_datatype_size(dtype),
	};
	args.in_place = sendbuf == WEFT_IN_PLACE || sendbuf == recvbuf;
	args.sendbuf = args.in_place ? recvbuf : sendbuf;
	return run(comm, &args, request);
}

weft_status_t weft_allreduce(const void *sendbuf, void *recvbuf, size_t count,
			     weft_datatype_t dtype, weft_op_t op, weft_comm_t comm)
{
	return allreduce(sendbuf, recvbuf, count, dtype, op, comm, NULL, "weft_allreduce");
}

weft_status_t weft_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
			      weft_datatype_t dtype, weft_op_t op, weft_comm_t comm,
			      weft_request_t *request)
{
	if (!request)
		return comm ? weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "weft_iallreduce: request is NULL")
			    : WEFT_ERR_INVALID_ARG;
	*request = NULL;
	return allreduce(sendbuf, recvbuf, count, dtype, op, comm, request, "weft_iallreduce");
}

static weft_status_t allgather(const void *sendbuf, void *recvbuf, size_t count,
			       weft_datatype_t dtype, struct weft_comm *comm,
			       weft_request_t *request, const char *call)
{
	weft_status_t st = check_comm(comm, call);
	if (st == WEFT_SUCCESS)
		st = check_args(comm, call, sendbuf, recvbuf, count, (size_t)comm->nranks, dtype,
				WEFT_SUM, false);
	if (st != WEFT_SUCCESS)
		return st;
	size_t esize = weft_datatype_size(dtype);
	char *mine = (char *)recvbuf + (size_t)comm->rank * count * esize;
	struct weft_coll_args args = {
		.coll = WEFT_COLL_ALLGATHER, .recvbuf = recvbuf, .count = count, .dtype = dtype,
		.op = WEFT_SUM, .esize = esize,
	};
	args.in_place = sendbuf == WEFT_IN_PLACE || sendbuf == mine;
	args.sendbuf = args.in_place ? mine : sendbuf;
	return run(comm, &args, request);
}

weft_status_t weft_allgather(const void *sendbuf, void *recvbuf, size_t count,
			     weft_datatype_t dtype, weft_comm_t comm)
{
	return allgather(sendbuf, recvbuf, count, dtype, comm, NULL, "weft_allgather");
}

weft_status_t weft_iallgather(const void *sendbuf, void *recvbuf, size_t count,
			      weft_datatype_t dtype, weft_comm_t comm, weft_request_t *request)
{
	if (!request)
		return comm ? weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "weft_iallgather: request is NULL")
			    : WEFT_ERR_INVALID_ARG;
	*request = NULL;
	return allgather(sendbuf, recvbuf, count, dtype, comm, request, "weft_iallgather");
}

weft_status_t weft_test(weft_request_t *request)
{
	if (!request)
		return WEFT_ERR_INVALID_ARG;
	struct weft_task *task = *request;
	if (!task) /* a zero-count call, or already completed */
		return WEFT_SUCCESS;
	if (task->status == WEFT_INPROGRESS) {
		weft_status_t st = weft_comm_progress(task->comm);
		if (st != WEFT_SUCCESS && task->status == WEFT_INPROGRESS)
			task->status = st;
	}
	if (task->status == WEFT_INPROGRESS)
		return WEFT_INPROGRESS;
	weft_status_t st = task->status;
	weft_task_put(task);
	*request = NULL;
	return st;
}

weft_status_t weft_wait(weft_request_t *request)
{
	if (!request)
		return WEFT_ERR_INVALID_ARG;
	struct weft_task *task = *request;
	if (!task)
		return WEFT_SUCCESS;
	weft_status_t st = weft_task_wait(task);
	weft_task_put(task);
	*request = NULL;
	return st;
}
