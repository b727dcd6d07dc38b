/* comm.c — the public communicator calls: init, destroy, abort, errors,
 * rank and size. */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "algorithms/shmem/shmem.h"
#include "api/api.h"
#include "bootstrap/bootstrap.h"
#include "core/comm_init.h"
#include "core/fail.h"
#include "core/progress.h"
#include "core/progress_thread.h"
#include "core/trace.h"
#include "core/watch.h"
#include "health/detect.h"
#include "health/health.h"
#include "tune/tune.h"

weft_status_t weft_api_comm_finish(struct weft_comm *comm, weft_comm_t *out)
{
	weft_status_t st = weft_shmem_init(comm);
	if (st == WEFT_SUCCESS)
		st = weft_tune_init(comm);
	if (st != WEFT_SUCCESS)
		return weft_comm_abandon(comm, st);
	st = weft_comm_ready(comm);
	if (st != WEFT_SUCCESS)
		return st;
	*out = comm;
	return WEFT_SUCCESS;
}

weft_status_t weft_api_config_check(const weft_config_t *config, const char *call,
				    struct weft_err *err)
{
	/* Older callers' configs end before the fields added since. */
	size_t first = offsetof(weft_config_t, timeout_seconds) + sizeof(double);
	if (config && (config->size < first || config->size > sizeof(weft_config_t)))
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s: config->size is %zu, expected %zu "
				    "(initialise with WEFT_CONFIG_INIT)",
				    call, config->size, sizeof(weft_config_t));
	if (config && config->timeout_seconds < 0)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s: config->timeout_seconds is negative", call);
	bool has_pt =
	    config && config->size >= offsetof(weft_config_t, progress_thread) + sizeof(int);
	if (has_pt && (config->progress_thread < -1 || config->progress_thread > 1))
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s: config->progress_thread is %d, expected -1, 0 or 1", call,
				    config->progress_thread);
	bool has_threads =
	    config && config->size >= offsetof(weft_config_t, compute_threads) + sizeof(long);
	if (has_threads && config->compute_threads < 0)
		return weft_err_set(
		    err, WEFT_ERR_INVALID_ARG,
		    "%s: config->compute_threads is %ld, expected 0 (unknown) or more", call,
		    config->compute_threads);
	return WEFT_SUCCESS;
}

weft_status_t weft_comm_init_rank(weft_comm_t *comm, int nranks, weft_unique_id_t id, int rank,
				  const weft_config_t *config)
{
	struct weft_err *ierr = weft_err_init_record();
	weft_err_clear(ierr);
	if (!comm)
		return weft_err_set(ierr, WEFT_ERR_INVALID_ARG,
				    "weft_comm_init_rank: comm is NULL");
	*comm = NULL;
	if (nranks < 1 || nranks > WEFT_MAX_RANKS)
		return weft_err_set(ierr, WEFT_ERR_INVALID_ARG,
				    "weft_comm_init_rank: nranks %d is out of range 1..%d", nranks,
				    WEFT_MAX_RANKS);
	if (rank < 0 || rank >= nranks)
		return weft_err_set(ierr, WEFT_ERR_INVALID_ARG,
				    "weft_comm_init_rank: rank %d is out of range 0..%d", rank,
				    nranks - 1);
	weft_status_t st = weft_api_config_check(config, "weft_comm_init_rank", ierr);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_uid uid;
	memcpy(&uid, id.internal, sizeof(uid));
	st = weft_bootstrap_uid_check(&uid, ierr);
	if (st != WEFT_SUCCESS)
		return st;
	struct weft_comm *c;
	st = weft_comm_create(&c, nranks, &uid, rank, config, NULL, &weft_health_service);
	return st == WEFT_SUCCESS ? weft_api_comm_finish(c, comm) : st;
}

weft_status_t weft_comm_destroy(weft_comm_t comm)
{
	if (!comm)
		return WEFT_ERR_INVALID_ARG;
	if (weft_task_in_callback())
		return weft_err_set(weft_err_init_fresh(), WEFT_ERR_INVALID_ARG, "%s: %s",
				    "weft_comm_destroy", WEFT_API_IN_CALLBACK);

	weft_thread_comm_forget(comm);
	weft_comm_free(comm);
	return WEFT_SUCCESS;
}

weft_status_t weft_comm_abort(weft_comm_t comm)
{
	if (!comm)
		return WEFT_ERR_INVALID_ARG;
	/* Another thread may be inside a call: only raise the flag here; the
	 * owner's next progress closes the transports. With no call in flight,
	 * do it now. */
	atomic_store(&comm->abort_requested, true);
	weft_wait_wake(comm); /* a thread asleep in a wait (WEFT_WAIT) sees it at once */
	int none = WEFT_SUCCESS;
	atomic_compare_exchange_strong(&comm->async_error, &none, (int)WEFT_ERR_ABORTED);
	weft_comm_lock(comm); /* active changes under it, the transports close under it */
	if (comm->pt)	      /* the progress thread closes the transports at once */
		weft_progress_thread_kick(comm);
	else if (!comm->active)
		weft_comm_kill(comm, WEFT_ERR_ABORTED);
	weft_comm_unlock(comm);
	return WEFT_SUCCESS;
}

weft_status_t weft_comm_get_async_error(weft_comm_t comm, weft_status_t *async_error)
{
	if (!comm || !async_error)
		return WEFT_ERR_INVALID_ARG;
	*async_error = (weft_status_t)atomic_load(&comm->async_error);
	return WEFT_SUCCESS;
}

/* A copy per thread: the error record may change under another thread
 * (the progress thread) while the caller reads it. */
const char *weft_comm_last_error(weft_comm_t comm)
{
	static __thread char copy[WEFT_ERR_MSG_BYTES];
	if (!comm)
		return "comm is NULL";
	weft_comm_error_copy(comm, copy, sizeof(copy));
	return copy;
}

/* Without the communicator's lock: a dump may be asked for while another
 * thread waits inside a call (a watchdog's), and shows that call in
 * flight; the recorder's records are written so that a reader sees each
 * one whole or leaves it out (core/trace.h). */
weft_status_t weft_comm_dump(weft_comm_t comm, const char *path)
{
	if (!comm)
		return WEFT_ERR_INVALID_ARG;
	if (!comm->trace)
		return WEFT_ERR_INTERNAL;
	int err = weft_trace_dump(comm->trace, path, "weft_comm_dump");
	if (err == ENOENT && !path)
		return weft_comm_fail(
		    comm, WEFT_ERR_INVALID_ARG,
		    "weft_comm_dump: no path given and WEFT_TRACE_DIR is not set");
	if (err) {
		/* Recorded as a bad argument: a file that cannot be written must
		 * not kill the communicator, as a system error would. */
		weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "weft_comm_dump: cannot write %s: %s",
			       path ? path : comm->trace->path, strerror(err));
		return WEFT_ERR_SYSTEM;
	}
	return WEFT_SUCCESS;
}

weft_status_t weft_comm_rank(weft_comm_t comm, int *rank)
{
	if (!comm || !rank)
		return WEFT_ERR_INVALID_ARG;
	*rank = comm->rank;
	return WEFT_SUCCESS;
}

weft_status_t weft_comm_size(weft_comm_t comm, int *nranks)
{
	if (!comm || !nranks)
		return WEFT_ERR_INVALID_ARG;
	*nranks = comm->nranks;
	return WEFT_SUCCESS;
}

weft_status_t weft_comm_stragglers(weft_comm_t comm, int *ranks, int capacity, int *count)
{
	if (!comm || !count || capacity < 0 || (capacity > 0 && !ranks))
		return WEFT_ERR_INVALID_ARG;
	*count = weft_watch_stragglers(comm, ranks, capacity);
	return WEFT_SUCCESS;
}

weft_status_t weft_comm_failed_ranks(weft_comm_t comm, weft_failed_rank_t *ranks, int capacity,
				     int *count)
{
	const char *bad = !comm			   ? "comm is NULL"
			  : !count		   ? "count is NULL"
			  : capacity < 0	   ? "capacity is negative"
			  : capacity > 0 && !ranks ? "ranks is NULL with a capacity above 0"
						   : NULL;
	if (bad)
		return weft_err_set(weft_err_init_fresh(), WEFT_ERR_INVALID_ARG,
				    "weft_comm_failed_ranks: %s", bad);
	/* The checks that need no peer's answer, made now: without them a
	 * rank killed on this host was named only once a collective waited on
	 * it (weft_fault.h promises them at once). */
	weft_detect_all(comm);
	*count = weft_comm_dead_list(comm, ranks, capacity);
	return WEFT_SUCCESS;
}

const char *weft_rank_failure_string(weft_rank_failure_t how)
{
	return weft_dead_name(how);
}
