/* detect.c — see detect.h. */
#include "health/detect.h"

#include <pthread.h>

#include "core/comm.h"
#include "core/fail.h"
#include "core/watch_int.h"
#include "util/proc.h"
#include "util/settings.h"

double weft_detect_silence(const struct weft_comm *comm)
{
	double t = 5;
	weft_setting_double("WEFT_PEER_DEAD", &t);
	if (!(t > 0))
		t = 5;
	return t < comm->timeout_s ? t : comm->timeout_s;
}

static double silent_for(const struct weft_comm *comm, int r, double now)
{
	const struct weft_watch *w = comm->watch;
	if (!w || w->view[r].asked == 0)
		return 0;
	return now - w->view[r].asked;
}

static weft_rank_failure_t found(struct weft_comm *comm, int r, weft_rank_failure_t how)
{
	weft_comm_mark_dead(comm, r, how);
	return how;
}

weft_rank_failure_t weft_detect_locked(struct weft_comm *comm, int r, double now, double silence)
{
	if (r == comm->rank || r < 0 || r >= comm->nranks)
		return WEFT_RANK_ALIVE;
	bool quiet = silence > 0 && silent_for(comm, r, now) >= silence;
	if (weft_comm_same_host(comm, r)) {
		switch (weft_pid_state((pid_t)comm->cards[r].pid)) {
		case WEFT_PID_GONE: return found(comm, r, WEFT_RANK_KILLED);
		case WEFT_PID_STOPPED:
			return quiet ? found(comm, r, WEFT_RANK_STOPPED) : WEFT_RANK_ALIVE;
		case WEFT_PID_RUNNING: return WEFT_RANK_ALIVE;
		}
	}
	weft_rank_failure_t how = weft_comm_dead_how(comm, r);
	if (how != WEFT_RANK_ALIVE && how != WEFT_RANK_EXCLUDED)
		return how;
	if (comm->watch && comm->watch->view[r].refused > 0)
		return found(comm, r, WEFT_RANK_KILLED);
	return quiet ? found(comm, r, WEFT_RANK_UNREACHABLE) : WEFT_RANK_ALIVE;
}

weft_rank_failure_t weft_detect(struct weft_comm *comm, int r, double now, double silence)
{
	struct weft_watch *w = comm->watch;
	if (w)
		pthread_mutex_lock(&w->lock);
	weft_rank_failure_t how = weft_detect_locked(comm, r, now, silence);
	if (w)
		pthread_mutex_unlock(&w->lock);
	return how;
}

void weft_detect_all(struct weft_comm *comm)
{
	double now = weft_now(), silence = weft_detect_silence(comm);
	for (int r = 0; r < comm->nranks; r++)
		if (r != comm->rank)
			weft_detect(comm, r, now, silence);
}

bool weft_detect_left_locked(struct weft_comm *comm, int r)
{
	return comm->watch && comm->watch->view[r].refused > 0 && weft_comm_same_host(comm, r) &&
	       weft_pid_state((pid_t)comm->cards[r].pid) == WEFT_PID_RUNNING;
}
