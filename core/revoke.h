/*
 * revoke.h — revoking a communicator (weft_comm_revoke): every pending and
 * later operation on it, on every rank the watch reaches, fails with
 * WEFT_ERR_REVOKED, so that ranks that were not talking to a dead one stop
 * waiting too, and all of them can shrink it (health/agree.h).
 *
 * The revoker tells every peer over the watch (a REVOKE datagram each,
 * sent again until acknowledged) and closes its connections only once
 * they have acknowledged, or are found gone, or a short bound passed: a
 * peer then knows it was revoked before it sees the connection close, so
 * its operations fail with WEFT_ERR_REVOKED, not WEFT_ERR_REMOTE. A peer
 * that hears of it (the datagram, or the flag every heartbeat and answer
 * carries) marks the communicator revoked; its pending operations fail at
 * their next progress, its later calls at once. And an operation that
 * failed because a peer's connection closed first reads the datagrams
 * already waiting at the watch (weft_watch_drain) before it says why.
 */
#ifndef WEFT_REVOKE_H
#define WEFT_REVOKE_H

#include <stdbool.h>

#include "weft.h"

struct weft_comm;

/* Who revoked it (a rank), or -1. */
int weft_comm_revoked_by(const struct weft_comm *comm);

/* An operation ended with @p st: if it failed and the communicator is
 * revoked (a revoke waiting at the watch's socket counts), the failure is
 * the revoke's. Inline for the successes (every operation ends here). */
weft_status_t weft_revoke_status_slow(struct weft_comm *comm, weft_status_t st);

static inline weft_status_t weft_revoke_status(struct weft_comm *comm, weft_status_t st)
{
	return st == WEFT_SUCCESS || st == WEFT_INPROGRESS ? st : weft_revoke_status_slow(comm, st);
}

#endif
