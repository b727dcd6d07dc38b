/* revoke_peers.c — this rank revokes a communicator: it tells every peer
 * over the watch and then fails what is pending (core/revoke.h says why and
 * what a peer does when it hears). */
#include "health/revoke_peers.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/comm.h"
#include "core/fail.h"
#include "core/progress.h"
#include "core/progress_thread.h"
#include "core/revoke.h"
#include "core/watch.h"
#include "core/watch_int.h"
#include "health/detect.h"
#include "util/clock.h"
#include "util/log.h"

/* REVOKE to every peer not found gone, again every 20 ms, until each has
 * acknowledged or is gone, or WEFT_REVOKE_WAIT_S passed. */
static void tell_peers(struct weft_comm *comm)
{
	struct weft_watch *w = comm->watch;
	if (!w)
		return;
	double start = weft_now(), *sent = calloc((size_t)w->nranks, sizeof(*sent));
	if (!sent)
		return;
	pthread_mutex_lock(&w->lock);
	for (int r = 0; r < w->nranks; r++)
		w->view[r].revoke_acked = false;
	for (;;) {
		double now = weft_now();
		int pending = 0;
		for (int r = 0; r < w->nranks; r++) {
			if (r == w->rank || w->view[r].revoke_acked ||
			    weft_detect_locked(comm, r, now, 0) != WEFT_RANK_ALIVE)
				continue;
			pending++;
			if (now - sent[r] >= 0.02) {
				watch_send(w, r, WATCH_REVOKE);
				sent[r] = now;
			}
		}
		if (!pending || now - start >= WEFT_REVOKE_WAIT_S)
			break;
		watch_wait_changed(w, 0.005);
	}
	pthread_mutex_unlock(&w->lock);
	free(sent);
}

void weft_revoke(struct weft_comm *comm)
{
	weft_comm_error_revoked(comm, comm->rank);
	tell_peers(comm);
	/* As weft_comm_abort: a call in flight in another thread (or the
	 * progress thread) fails its operations at its next progress; with
	 * none, close the connections now, so that peers waiting on this rank
	 * fail at once. */
	weft_comm_lock(comm);
	if (comm->pt)
		weft_progress_thread_kick(comm);
	else if (!comm->active)
		weft_comm_kill(comm, WEFT_ERR_REVOKED);
	weft_comm_unlock(comm);
}
