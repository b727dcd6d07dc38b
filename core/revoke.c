/* revoke.c — a revoked communicator: who revoked it, a peer's revoke heard
 * by the watch, and the status an operation ends with (revoke.h says why;
 * health/revoke_peers.c is this rank revoking it). */
#include "core/revoke.h"

#include "core/comm.h"
#include "core/fail.h"
#include "core/watch.h"
#include "util/log.h"

int weft_comm_revoked_by(const struct weft_comm *comm)
{
	return atomic_load(&comm->revoked) - 1;
}

bool weft_revoke_mark(struct weft_comm *comm, int by)
{
	if (!weft_comm_error_revoked(comm, by))
		return false;
	weft_log(WEFT_LOG_INFO, WEFT_SUB_COLL, "rank %d: communicator revoked by %s%d", comm->rank,
		 by == comm->rank ? "this rank, " : "rank ", by);
	/* The progress thread, or the caller's next progress, fails what is
	 * pending (progress.c); later calls fail at once (api/coll.c). */
	return true;
}

weft_status_t weft_revoke_status_slow(struct weft_comm *comm, weft_status_t st)
{
	if (st == WEFT_ERR_REVOKED)
		return st;
	if (!weft_comm_revoked(comm))
		weft_watch_drain(comm);
	return weft_comm_revoked(comm) ? WEFT_ERR_REVOKED : st;
}
