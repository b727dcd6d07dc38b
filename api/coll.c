/* coll.c — the public collective and point-to-point calls: check the
 * arguments, resolve in place, pick the algorithm, run or queue the task.
 * The checks and the running are shared with coll_blocks.c (alltoallv,
 * gather, scatter) through api.h. Groups are in group.c, requests in
 * request.c. */
#include <stdint.h>
#include <string.h>

#include "algorithms/algo.h"
#include "api/api.h"
#include "core/comm.h"
#include "core/fail.h"
#include "core/progress.h"
#include "core/progress_thread.h"
#include "core/task.h"
#include "tune/tune.h"
#include "util/dtype.h"

weft_status_t weft_api_check_comm(struct weft_comm *comm, const char *call)
{
	if (!comm)
		return weft_err_set(weft_err_init_fresh(), WEFT_ERR_INVALID_ARG, "%s: comm is NULL",
				    call);
	if (weft_task_in_callback())
		return weft_err_set(weft_err_init_fresh(), WEFT_ERR_INVALID_ARG, "%s: %s", call,
				    WEFT_API_IN_CALLBACK);
	weft_status_t async = (weft_status_t)atomic_load(&comm->async_error);
	if (async != WEFT_SUCCESS) {
		char earlier[WEFT_ERR_MSG_BYTES];
		weft_comm_error_copy(comm, earlier, sizeof(earlier));
		if (async == WEFT_ERR_REVOKED)
			return weft_comm_fail(comm, async,
					      "%s: the communicator is revoked; weft_comm_shrink "
					      "makes one of the survivors (%s)",
					      call, earlier);
		return weft_comm_fail(comm, async, "%s: the communicator failed earlier: %s", call,
				      earlier[0] ? earlier : weft_status_string(async));
	}
	return WEFT_SUCCESS;
}

/* The checks every data call shares. nblocks: how many count-sized blocks
 * the largest buffer holds. */
weft_status_t weft_api_check_data(struct weft_comm *comm, const char *call, size_t count,
				  size_t nblocks, weft_datatype_t dtype)
{
	if (!weft_dtype_valid(dtype))
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "%s: invalid datatype %d", call,
				      (int)dtype);
	size_t esize = weft_datatype_size(dtype), bytes;
	/* Overflow-checked products, not divisions: two 64-bit divides are a
	 * tenth of an 8-byte AllReduce. */
	if (__builtin_mul_overflow(count, esize, &bytes) ||
	    __builtin_mul_overflow(bytes, nblocks, &bytes) || bytes > (size_t)PTRDIFF_MAX)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "%s: count %zu of %s overflows the address space", call,
				      count, weft_dtype_name(dtype));
	return WEFT_SUCCESS;
}

static weft_status_t check_op(struct weft_comm *comm, const char *call, weft_op_t op)
{
	if (!weft_op_valid(op))
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "%s: invalid op %d", call,
				      (int)op);
	return WEFT_SUCCESS;
}

weft_status_t weft_api_check_rank(struct weft_comm *comm, const char *call, const char *what, int r)
{
	if (r < 0 || r >= comm->nranks)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "%s: %s %d is not a rank (0..%d)",
				      call, what, r, comm->nranks - 1);
	return WEFT_SUCCESS;
}

weft_status_t weft_api_check_buf(struct weft_comm *comm, const char *call, const char *what,
				 const void *buf, size_t count)
{
	if (count > 0 && !buf)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "%s: %s is NULL", call, what);
	return WEFT_SUCCESS;
}

/* The checks of the calls where every rank passes both buffers (allreduce,
 * allgather, reduce_scatter): @p nblocks count-sized blocks in the larger
 * buffer (0: nranks), @p op checked unless NULL. */
static weft_status_t check_symmetric(struct weft_comm *comm, const char *call, const void *sendbuf,
				     const void *recvbuf, size_t count, size_t nblocks,
				     weft_datatype_t dtype, const weft_op_t *op)
{
	weft_status_t st = weft_api_check_comm(comm, call);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_data(comm, call, count,
					 nblocks == 0 ? (size_t)comm->nranks : nblocks, dtype);
	if (st == WEFT_SUCCESS && op)
		st = check_op(comm, call, *op);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_buf(comm, call, "recvbuf", recvbuf, count);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_buf(comm, call, "sendbuf (use WEFT_IN_PLACE for in place)",
					sendbuf, count);
	return st;
}

/* ---- running one call. */
weft_status_t weft_api_run(struct weft_comm *comm, const struct weft_coll_args *args,
			   weft_request_t *request)
{
	if (request)
		*request = NULL;
	/* Nothing to move anywhere: every rank knows it (a collective's count
	 * is the same on all), so all skip and the sequence numbers stay in
	 * step. Not so for alltoallv, where one rank's blocks may all be
	 * empty while others exchange, nor for a send or receive, whose
	 * count is one side's: they must still take their number and meet
	 * the other side (which checks the sizes). */
	if (args->count == 0 && args->coll != WEFT_COLL_BARRIER &&
	    args->coll != WEFT_COLL_ALLTOALLV && args->coll != WEFT_COLL_SEND &&
	    args->coll != WEFT_COLL_RECV)
		return WEFT_SUCCESS;
	const struct weft_algo *algo = weft_tune_choose(comm, args);
	if (!algo)
		return weft_comm_fail(comm, WEFT_ERR_NOT_SUPPORTED,
				      "%s: no algorithm in this build", weft_coll_name(args->coll));
	struct weft_task *task = weft_task_get(comm);
	if (!task)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "%s: no memory for a task",
				      weft_coll_name(args->coll));
	task->args = *args;
	task->ops = &algo->task;
	task->algo_name = algo->name;
	task->fallback_ops = NULL;
	task->fallback_name = NULL;
	if (algo->adapts_from && args->count * args->esize >= algo->adapts_from) {
		const struct weft_algo *alt = weft_tune_select_other(comm, args, algo);
		task->fallback_ops = alt ? &alt->task : NULL;
		task->fallback_name = alt ? alt->name : NULL;
	}
	task->started = false;
	if (weft_api_group_record(task, request))
		return WEFT_SUCCESS;
	task->group_wait = false;
	if (request) {
		/* Non-blocking: it moves in the progress thread, or inside the
		 * caller's next Weft calls; posting never runs it (an iallreduce
		 * that finished inside its own post would not overlap anything). */
		weft_comm_lock(comm);
		weft_task_start(task, 0);
		*request = task;
		weft_progress_thread_kick(comm);
		weft_comm_unlock(comm);
		weft_thread_comm_add(comm);
		return WEFT_SUCCESS;
	}
	weft_status_t st = weft_task_run(task);
	weft_task_put(task);
	return st;
}

struct weft_coll_args weft_api_args(enum weft_coll_kind coll, const void *sendbuf, void *recvbuf,
				    size_t count, weft_datatype_t dtype, weft_op_t op, int root)
{
	struct weft_coll_args a = {
	    .coll = coll,
	    .sendbuf = sendbuf,
	    .recvbuf = recvbuf,
	    .count = count,
	    .dtype = dtype,
	    .op = op,
	    .esize = weft_datatype_size(dtype),
	    .root = root,
	};
	return a;
}

/* Non-blocking calls: the request must exist, and is NULL after any failure. */
weft_status_t weft_api_need_request(struct weft_comm *comm, weft_request_t *request,
				    const char *call)
{
	if (request) {
		*request = NULL;
		return WEFT_SUCCESS;
	}
	if (comm)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "%s: request is NULL", call);
	return weft_err_set(weft_err_init_fresh(), WEFT_ERR_INVALID_ARG, "%s: request is NULL",
			    call);
}

/* ---- AllReduce and ReduceScatter: symmetric reductions, in place when
 * sendbuf is WEFT_IN_PLACE or recvbuf. For ReduceScatter in place the input
 * is recvbuf, which holds nranks blocks, and block `rank` ends at its start;
 * recvbuf == sendbuf + rank * count (NCCL's in place) needs nothing special:
 * the algorithms write only this rank's block of the output, reducing into
 * it from exactly the same address. */
static weft_status_t reduction(enum weft_coll_kind kind, const void *sendbuf, void *recvbuf,
			       size_t count, weft_datatype_t dtype, weft_op_t op,
			       struct weft_comm *comm, weft_request_t *request, const char *call)
{
	size_t nblocks = kind == WEFT_COLL_ALLREDUCE ? 1 : 0; /* 0: nranks blocks */
	weft_status_t st =
	    check_symmetric(comm, call, sendbuf, recvbuf, count, nblocks, dtype, &op);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_coll_args a = weft_api_args(kind, sendbuf, recvbuf, count, dtype, op, 0);
	a.in_place = sendbuf == WEFT_IN_PLACE || sendbuf == recvbuf;
	if (a.in_place)
		a.sendbuf = recvbuf;
	return weft_api_run(comm, &a, request);
}

weft_status_t weft_allreduce(const void *sendbuf, void *recvbuf, size_t count,
			     weft_datatype_t dtype, weft_op_t op, weft_comm_t comm)
{
	return reduction(WEFT_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, comm, NULL,
			 "weft_allreduce");
}

weft_status_t weft_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
			      weft_datatype_t dtype, weft_op_t op, weft_comm_t comm,
			      weft_request_t *request)
{
	weft_status_t st = weft_api_need_request(comm, request, "weft_iallreduce");
	return st ? st
		  : reduction(WEFT_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, comm,
			      request, "weft_iallreduce");
}

/* ---- AllGather */
static weft_status_t allgather(const void *sendbuf, void *recvbuf, size_t count,
			       weft_datatype_t dtype, struct weft_comm *comm,
			       weft_request_t *request, const char *call)
{
	weft_status_t st = check_symmetric(comm, call, sendbuf, recvbuf, count, 0, dtype, NULL);
	if (st != WEFT_SUCCESS)
		return st;
	size_t esize = weft_datatype_size(dtype);
	char *mine = (char *)recvbuf + (size_t)comm->rank * count * esize;
	struct weft_coll_args a =
	    weft_api_args(WEFT_COLL_ALLGATHER, sendbuf, recvbuf, count, dtype, WEFT_SUM, 0);
	a.in_place = sendbuf == WEFT_IN_PLACE || sendbuf == mine;
	if (a.in_place)
		a.sendbuf = mine;
	return weft_api_run(comm, &a, request);
}

weft_status_t weft_allgather(const void *sendbuf, void *recvbuf, size_t count,
			     weft_datatype_t dtype, weft_comm_t comm)
{
	return allgather(sendbuf, recvbuf, count, dtype, comm, NULL, "weft_allgather");
}

weft_status_t weft_iallgather(const void *sendbuf, void *recvbuf, size_t count,
			      weft_datatype_t dtype, weft_comm_t comm, weft_request_t *request)
{
	weft_status_t st = weft_api_need_request(comm, request, "weft_iallgather");
	return st ? st
		  : allgather(sendbuf, recvbuf, count, dtype, comm, request, "weft_iallgather");
}

/* ---- ReduceScatter */
weft_status_t weft_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
				  weft_datatype_t dtype, weft_op_t op, weft_comm_t comm)
{
	return reduction(WEFT_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, comm,
			 NULL, "weft_reduce_scatter");
}

weft_status_t weft_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
				   weft_datatype_t dtype, weft_op_t op, weft_comm_t comm,
				   weft_request_t *request)
{
	weft_status_t st = weft_api_need_request(comm, request, "weft_ireduce_scatter");
	return st ? st
		  : reduction(WEFT_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op,
			      comm, request, "weft_ireduce_scatter");
}

/* ---- Broadcast */
static weft_status_t broadcast(const void *sendbuf, void *recvbuf, size_t count,
			       weft_datatype_t dtype, int root, struct weft_comm *comm,
			       weft_request_t *request, const char *call)
{
	weft_status_t st = weft_api_check_comm(comm, call);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_data(comm, call, count, 1, dtype);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_rank(comm, call, "root", root);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_buf(comm, call, "recvbuf", recvbuf, count);
	if (st == WEFT_SUCCESS && comm->rank == root)
		st = weft_api_check_buf(comm, call, "sendbuf on the root", sendbuf, count);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_coll_args a =
	    weft_api_args(WEFT_COLL_BROADCAST, sendbuf, recvbuf, count, dtype, WEFT_SUM, root);
	a.in_place = comm->rank != root || sendbuf == WEFT_IN_PLACE || sendbuf == recvbuf;
	if (a.in_place)
		a.sendbuf = recvbuf;
	return weft_api_run(comm, &a, request);
}

weft_status_t weft_broadcast(const void *sendbuf, void *recvbuf, size_t count,
			     weft_datatype_t dtype, int root, weft_comm_t comm)
{
	return broadcast(sendbuf, recvbuf, count, dtype, root, comm, NULL, "weft_broadcast");
}

weft_status_t weft_ibroadcast(const void *sendbuf, void *recvbuf, size_t count,
			      weft_datatype_t dtype, int root, weft_comm_t comm,
			      weft_request_t *request)
{
	weft_status_t st = weft_api_need_request(comm, request, "weft_ibroadcast");
	return st ? st
		  : broadcast(sendbuf, recvbuf, count, dtype, root, comm, request,
			      "weft_ibroadcast");
}

/* ---- Reduce */
static weft_status_t reduce(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
			    weft_op_t op, int root, struct weft_comm *comm, weft_request_t *request,
			    const char *call)
{
	weft_status_t st = weft_api_check_comm(comm, call);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_data(comm, call, count, 1, dtype);
	if (st == WEFT_SUCCESS)
		st = check_op(comm, call, op);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_rank(comm, call, "root", root);
	if (st == WEFT_SUCCESS && comm->rank == root)
		st = weft_api_check_buf(comm, call, "recvbuf on the root", recvbuf, count);
	bool in_place = comm->rank == root && (sendbuf == WEFT_IN_PLACE || sendbuf == recvbuf);
	if (st == WEFT_SUCCESS && !in_place)
		st = weft_api_check_buf(comm, call, "sendbuf",
					sendbuf == WEFT_IN_PLACE ? NULL : sendbuf, count);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_coll_args a =
	    weft_api_args(WEFT_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root);
	a.in_place = in_place;
	if (in_place)
		a.sendbuf = recvbuf;
	return weft_api_run(comm, &a, request);
}

weft_status_t weft_reduce(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
			  weft_op_t op, int root, weft_comm_t comm)
{
	return reduce(sendbuf, recvbuf, count, dtype, op, root, comm, NULL, "weft_reduce");
}

weft_status_t weft_ireduce(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
			   weft_op_t op, int root, weft_comm_t comm, weft_request_t *request)
{
	weft_status_t st = weft_api_need_request(comm, request, "weft_ireduce");
	return st ? st
		  : reduce(sendbuf, recvbuf, count, dtype, op, root, comm, request, "weft_ireduce");
}

/* ---- AlltoAll */
bool weft_api_overlap(const void *a, const void *b, size_t bytes)
{
	uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
	return bytes && x < y + bytes && y < x + bytes;
}

static weft_status_t alltoall(const void *sendbuf, void *recvbuf, size_t count,
			      weft_datatype_t dtype, struct weft_comm *comm,
			      weft_request_t *request, const char *call)
{
	weft_status_t st = weft_api_check_comm(comm, call);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_data(comm, call, count, (size_t)comm->nranks, dtype);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_buf(comm, call, "recvbuf", recvbuf, count);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_buf(comm, call, "sendbuf",
					sendbuf == WEFT_IN_PLACE ? NULL : sendbuf, count);
	if (st != WEFT_SUCCESS)
		return st;
	size_t bytes = count * weft_datatype_size(dtype) * (size_t)comm->nranks;
	if (weft_api_overlap(sendbuf, recvbuf, bytes))
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "%s: sendbuf and recvbuf overlap (in place is not supported)",
				      call);
	struct weft_coll_args a =
	    weft_api_args(WEFT_COLL_ALLTOALL, sendbuf, recvbuf, count, dtype, WEFT_SUM, 0);
	return weft_api_run(comm, &a, request);
}

weft_status_t weft_alltoall(const void *sendbuf, void *recvbuf, size_t count, weft_datatype_t dtype,
			    weft_comm_t comm)
{
	return alltoall(sendbuf, recvbuf, count, dtype, comm, NULL, "weft_alltoall");
}

weft_status_t weft_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
			     weft_datatype_t dtype, weft_comm_t comm, weft_request_t *request)
{
	weft_status_t st = weft_api_need_request(comm, request, "weft_ialltoall");
	return st ? st : alltoall(sendbuf, recvbuf, count, dtype, comm, request, "weft_ialltoall");
}

/* ---- Barrier */
static weft_status_t barrier(struct weft_comm *comm, weft_request_t *request, const char *call)
{
	weft_status_t st = weft_api_check_comm(comm, call);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_coll_args a =
	    weft_api_args(WEFT_COLL_BARRIER, NULL, NULL, 0, WEFT_UINT8, WEFT_SUM, 0);
	return weft_api_run(comm, &a, request);
}

weft_status_t weft_barrier(weft_comm_t comm)
{
	return barrier(comm, NULL, "weft_barrier");
}

weft_status_t weft_ibarrier(weft_comm_t comm, weft_request_t *request)
{
	weft_status_t st = weft_api_need_request(comm, request, "weft_ibarrier");
	return st ? st : barrier(comm, request, "weft_ibarrier");
}

/* ---- Send / Recv */
static weft_status_t p2p(enum weft_coll_kind coll, const void *buf, size_t count,
			 weft_datatype_t dtype, int peer, struct weft_comm *comm,
			 weft_request_t *request, const char *call)
{
	weft_status_t st = weft_api_check_comm(comm, call);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_data(comm, call, count, 1, dtype);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_rank(comm, call, "peer", peer);
	if (st == WEFT_SUCCESS && peer == comm->rank)
		st = weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "%s: peer %d is this rank", call,
				    peer);
	if (st == WEFT_SUCCESS)
		st = weft_api_check_buf(comm, call, "buf", buf, count);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_coll_args a = weft_api_args(coll, coll == WEFT_COLL_SEND ? buf : NULL,
						coll == WEFT_COLL_RECV ? (void *)buf : NULL, count,
						dtype, WEFT_SUM, peer);
	return weft_api_run(comm, &a, request);
}

weft_status_t weft_send(const void *buf, size_t count, weft_datatype_t dtype, int peer,
			weft_comm_t comm)
{
	return p2p(WEFT_COLL_SEND, buf, count, dtype, peer, comm, NULL, "weft_send");
}

weft_status_t weft_recv(void *buf, size_t count, weft_datatype_t dtype, int peer, weft_comm_t comm)
{
	return p2p(WEFT_COLL_RECV, buf, count, dtype, peer, comm, NULL, "weft_recv");
}

weft_status_t weft_isend(const void *buf, size_t count, weft_datatype_t dtype, int peer,
			 weft_comm_t comm, weft_request_t *request)
{
	weft_status_t st = weft_api_need_request(comm, request, "weft_isend");
	return st ? st : p2p(WEFT_COLL_SEND, buf, count, dtype, peer, comm, request, "weft_isend");
}

weft_status_t weft_irecv(void *buf, size_t count, weft_datatype_t dtype, int peer, weft_comm_t comm,
			 weft_request_t *request)
{
	weft_status_t st = weft_api_need_request(comm, request, "weft_irecv");
	return st ? st : p2p(WEFT_COLL_RECV, buf, count, dtype, peer, comm, request, "weft_irecv");
}
