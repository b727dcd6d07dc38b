/* revoke.c — a revoked communicator: who revoked it, and the status an
 * operation ends with (revoke.h says why; core/fail.c marks it revoked, for
 * the watch that heard a peer's revoke or for health/revoke_peers.c). */
#include "core/revoke.h"

#include "core/comm.h"
#include "core/watch.h"

int weft_comm_revoked_by(const struct weft_comm *comm)
{
	return atomic_load(&comm->revoked) - 1;
}

weft_status_t weft_revoke_status_slow(struct weft_comm *comm, weft_status_t st)
{
	if (st == WEFT_ERR_REVOKED)
		return st;
	if (!weft_comm_revoked(comm))
		weft_watch_drain(comm);
	return weft_comm_revoked(comm) ? WEFT_ERR_REVOKED : st;
}
