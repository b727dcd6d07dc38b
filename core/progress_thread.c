/*
 * progress_thread.c — WEFT_PROGRESS_THREAD=1: a thread per communicator
 * that drives its non-blocking operations while the caller computes.
 *
 * With the thread, the communicator has a lock, and every call that
 * touches its operations holds it (weft_comm_lock): the thread's progress,
 * the caller's posts, tests and waits. A blocking call still drives
 * progress itself (a message then costs no hand-over between threads);
 * while it does, the thread stands aside (waiters > 0), asleep on its
 * condition until the last waiter leaves. With nothing active the thread
 * sleeps on the condition, which a post signals; with work it spins while
 * messages move and, once they stop, naps (so that a peer descheduled on
 * a busy host gets the core) or, where the rank sleeps in its waits
 * (WEFT_WAIT, core/wait.h), sleeps until there is work: a post wakes it
 * (weft_progress_thread_kick), as does a waiter that arrives.
 *
 * Completion callbacks (weft_task.on_complete) run in whichever thread
 * finishes the operation, with the lock held.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "core/progress_thread.h"

#include "core/comm.h"
#include "core/fail.h"
#include "core/progress.h"
#include "core/revoke.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/settings.h"

#define PT_SPIN_SECONDS 50e-6 /* keep spinning this long after the last event */
#define PT_NAP_NS	20000 /* then nap this long between polls */
#define PT_IDLE_MS	10    /* with nothing active, wake up this often anyway */
#define PT_ASIDE_MS	2     /* standing aside, look again this often (a lost signal) */

struct weft_progress_thread {
	pthread_t thread;
	pthread_cond_t cond; /* with the communicator's lock */
	bool stop;
};

static void nap(long ns)
{
	struct timespec t = {0, ns};
	nanosleep(&t, NULL);
}

/* When the oldest active operation last saw a message complete. */
static double last_event(const struct weft_comm *comm)
{
	return comm->active ? comm->active->last_event : 0;
}

static void idle_wait(struct weft_comm *comm, struct weft_progress_thread *pt, long ms)
{
	struct timespec until = weft_wall_after((double)ms * 1e-3);
	pthread_cond_timedwait(&pt->cond, &comm->lock, &until);
}

static void *pt_main(void *arg)
{
	struct weft_comm *comm = arg;
	struct weft_progress_thread *pt = comm->pt;
	double quiet_since = 0;
	uint64_t waited = 0; /* the detector's accounting: the last pass over work; 0 none */
	pthread_mutex_lock(&comm->lock);
	while (!pt->stop) {
		bool abort = (atomic_load(&comm->abort_requested) || weft_comm_revoked(comm)) &&
			     !comm->aborted;
		if (!comm->active && !abort) {
			waited = 0;
			idle_wait(comm, pt, PT_IDLE_MS);
			continue;
		}
		if (atomic_load(&comm->waiters) > 0) { /* a blocking call drives (and counts) */
			waited = 0;
			idle_wait(comm, pt, PT_ASIDE_MS);
			continue;
		}
		double before = last_event(comm);
		uint64_t activity = comm->wait.activity;
		weft_comm_progress(comm); /* errors land in the tasks */
		if (comm->observe.waits && comm->active && waited)
			weft_observe_waited(&comm->observe, comm, comm->active, &waited);
		else if (comm->observe.waits)
			waited = comm->active ? weft_now_ns() : 0;
		bool moved = last_event(comm) != before || comm->wait.activity != activity;
		double now = weft_now();
		if (moved || quiet_since == 0)
			quiet_since = now;
		bool quiet =
		    now - quiet_since > (comm->wait.block ? comm->wait.spin_s : PT_SPIN_SECONDS);
		/* Slept (the lock held again), or found work on the way. */
		bool slept = quiet && comm->wait.block && weft_wait_sleep(comm, 0);
		if (slept)
			quiet_since = 0;
		pthread_mutex_unlock(&comm->lock);
		if (quiet && !slept)
			nap(PT_NAP_NS);
		pthread_mutex_lock(&comm->lock);
	}
	pthread_mutex_unlock(&comm->lock);
	return NULL;
}

weft_status_t weft_progress_thread_start(struct weft_comm *comm)
{
	long on = comm->progress_thread_mode > 0;
	if (comm->progress_thread_mode == 0 &&
	    (!weft_setting_long("WEFT_PROGRESS_THREAD", &on) || (on != 0 && on != 1)))
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "WEFT_PROGRESS_THREAD=%s: expected 0 or 1",
				      weft_setting_str("WEFT_PROGRESS_THREAD"));
	if (!on)
		return WEFT_SUCCESS;
	struct weft_progress_thread *pt = calloc(1, sizeof(*pt));
	if (!pt)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "progress thread: no memory");
	pthread_cond_init(&pt->cond, NULL);
	comm->pt = pt;
	int err = pthread_create(&pt->thread, NULL, pt_main, comm);
	if (err) {
		comm->pt = NULL;
		pthread_cond_destroy(&pt->cond);
		free(pt);
		return weft_comm_fail_errno(comm, err, "progress thread: pthread_create");
	}
	weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT, "progress thread started");
	return WEFT_SUCCESS;
}

void weft_progress_thread_stop(struct weft_comm *comm)
{
	struct weft_progress_thread *pt = comm->pt;
	if (!pt)
		return;
	pthread_mutex_lock(&comm->lock);
	pt->stop = true;
	pthread_cond_signal(&pt->cond);
	pthread_mutex_unlock(&comm->lock);
	pthread_join(pt->thread, NULL);
	comm->pt = NULL;
	pthread_cond_destroy(&pt->cond);
	free(pt);
}

void weft_progress_thread_kick(struct weft_comm *comm)
{
	if (!comm->pt)
		return;
	pthread_cond_signal(&comm->pt->cond);
	if (atomic_load(&comm->wait.armed)) /* asleep in the wait set */
		weft_wait_wake(comm);
}

void weft_progress_thread_waiters(struct weft_comm *comm, int now)
{
	if (now == 0) /* the last waiter left: the thread drives again */
		pthread_cond_signal(&comm->pt->cond);
	else if (atomic_load(&comm->wait.armed)) /* asleep: wake it to stand aside */
		weft_wait_wake(comm);
}
