/* fail.c — see fail.h. */
#include "core/fail.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/comm.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

static bool status_is_fatal(weft_status_t st)
{
	return st == WEFT_ERR_REMOTE || st == WEFT_ERR_TIMEOUT || st == WEFT_ERR_ABORTED ||
	       st == WEFT_ERR_SYSTEM || st == WEFT_ERR_INTERNAL || st == WEFT_ERR_REVOKED;
}

weft_status_t weft_comm_fail(struct weft_comm *comm, weft_status_t status, const char *fmt, ...)
{
	char msg[WEFT_ERR_MSG_BYTES];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&comm->err_lock);
	if (!comm->err_kept && !status_is_fatal(comm->err.status))
		weft_err_clear(&comm->err);
	weft_err_set(&comm->err, status, "rank %d: %s", comm->rank, msg);
	pthread_mutex_unlock(&comm->err_lock);
	int none = WEFT_SUCCESS;
	if (status_is_fatal(status))
		atomic_compare_exchange_strong(&comm->async_error, &none, (int)status);
	return status;
}

weft_status_t weft_comm_report(struct weft_comm *comm, weft_status_t status, const char *fmt, ...)
{
	char msg[WEFT_ERR_MSG_BYTES];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&comm->err_lock);
	weft_err_clear(&comm->err);
	weft_err_set(&comm->err, status, "rank %d: %s", comm->rank, msg);
	pthread_mutex_unlock(&comm->err_lock);
	return status;
}

void weft_comm_error_keep(struct weft_comm *comm, weft_status_t status)
{
	pthread_mutex_lock(&comm->err_lock);
	if (!comm->err_kept && comm->err.status == WEFT_SUCCESS)
		weft_err_set(&comm->err, status, "rank %d: the communicator was killed (%s)",
			     comm->rank, weft_status_string(status));
	comm->err_kept = true;
	pthread_mutex_unlock(&comm->err_lock);
}

bool weft_comm_error_revoked(struct weft_comm *comm, int by)
{
	char who[48], before[WEFT_ERR_MSG_BYTES] = "";
	if (by == comm->rank)
		snprintf(who, sizeof(who), "by this rank");
	else
		snprintf(who, sizeof(who), "by rank %d", by);
	pthread_mutex_lock(&comm->err_lock);
	/* The flag under the error lock: a call that fails on seeing it and
	 * records why (weft_comm_error_keep) waits for this sentence. */
	int none = 0;
	if (!atomic_compare_exchange_strong(&comm->revoked, &none, by + 1)) {
		pthread_mutex_unlock(&comm->err_lock);
		return false;
	}
	/* The first error, unless it is this revoke's own (a kill that came
	 * first, from another thread's progress). */
	if (status_is_fatal(comm->err.status) && comm->err.status != WEFT_ERR_REVOKED)
		snprintf(before, sizeof(before), "%s", comm->err.msg);
	weft_err_clear(&comm->err);
	weft_err_set(&comm->err, WEFT_ERR_REVOKED,
		     "rank %d: the communicator was revoked %s (weft_comm_revoke; weft_comm_shrink "
		     "makes one of the survivors)%s%s",
		     comm->rank, who, before[0] ? "; this rank's first error: " : "", before);
	pthread_mutex_unlock(&comm->err_lock);
	atomic_store(&comm->async_error, (int)WEFT_ERR_REVOKED);
	weft_log(WEFT_LOG_INFO, WEFT_SUB_COLL, "rank %d: communicator revoked %s", comm->rank, who);
	/* The progress thread, or the caller's next progress, fails what is
	 * pending (progress.c); later calls fail at once (api/coll.c). */
	return true;
}

void weft_comm_error_copy(struct weft_comm *comm, char *buf, size_t len)
{
	pthread_mutex_lock(&comm->err_lock);
	snprintf(buf, len, "%s", comm->err.msg);
	pthread_mutex_unlock(&comm->err_lock);
}

/* As weft_comm_fail, with strerror(errnum) after the message (as
 * weft_err_errno words it). */
weft_status_t weft_comm_fail_errno(struct weft_comm *comm, int errnum, const char *fmt, ...)
{
	char msg[WEFT_ERR_MSG_BYTES];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return weft_comm_fail(comm, WEFT_ERR_SYSTEM, "%s: %s", msg, strerror(errnum));
}

bool weft_comm_mark_dead(struct weft_comm *comm, int rank, weft_rank_failure_t how)
{
	if (rank < 0 || rank >= comm->nranks || rank == comm->rank || how == WEFT_RANK_ALIVE)
		return false;
	bool fresh = false;
	pthread_mutex_lock(&comm->dead_lock);
	if (atomic_load(&comm->dead_how[rank]) == WEFT_RANK_ALIVE) {
		atomic_store(&comm->dead_how[rank], (unsigned char)how);
		comm->dead_when[rank] = weft_now();
		comm->dead_order[comm->ndead++] = rank;
		fresh = true;
	}
	pthread_mutex_unlock(&comm->dead_lock);
	if (fresh)
		weft_log(WEFT_LOG_INFO, WEFT_SUB_COLL, "rank %d found rank %d dead: %s", comm->rank,
			 rank, weft_dead_name(how));
	return fresh;
}

weft_rank_failure_t weft_comm_dead_how(const struct weft_comm *comm, int rank)
{
	if (rank < 0 || rank >= comm->nranks)
		return WEFT_RANK_ALIVE;
	return (weft_rank_failure_t)atomic_load(&comm->dead_how[rank]);
}

int weft_comm_dead_list(struct weft_comm *comm, weft_failed_rank_t *out, int cap)
{
	struct weft_comm *c = comm;
	double now = weft_now();
	pthread_mutex_lock(&c->dead_lock);
	int n = c->ndead;
	for (int i = 0; i < n && i < cap; i++) {
		int r = c->dead_order[i];
		out[i] = (weft_failed_rank_t){
		    .rank = r,
		    .how = (weft_rank_failure_t)atomic_load(&c->dead_how[r]),
		    .seconds_ago = now - c->dead_when[r],
		};
	}
	pthread_mutex_unlock(&c->dead_lock);
	return n;
}

const char *weft_dead_name(weft_rank_failure_t how)
{
	switch (how) {
	case WEFT_RANK_ALIVE: return "alive";
	case WEFT_RANK_KILLED: return "killed";
	case WEFT_RANK_STOPPED: return "stopped";
	case WEFT_RANK_UNREACHABLE: return "unreachable";
	case WEFT_RANK_EXCLUDED: return "excluded";
	}
	return "unknown";
}
