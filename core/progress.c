/*
 * progress.c — the one place where operations move: the communicator's
 * progress (transports, the gate's held sends, then the active tasks in
 * call order, with their timeouts), and the wait loop every blocking call
 * and weft_wait run (backoff, and the other communicators of the thread).
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "core/progress.h"
#include "core/progress_thread.h"

#include "core/comm.h"
#include "core/fail.h"
#include "core/p2p.h"
#include "core/revoke.h"
#include "core/stats.h"
#include "core/tag.h"
#include "core/task.h"
#include "core/trace.h"
#include "core/watch.h"
#include "transports/transport.h"

/* May @p t run now? The oldest task always may; a send or receive also
 * when every task before it is a send or receive (grouped or not, as MPI's
 * non-blocking point to point): they all run side by side, posted in call
 * order, so each connection still sees its messages in call order and a
 * collective still waits for the point to point started before it (and
 * the point to point started after it for the collective). Ranks that
 * exchange with isend/irecv outside a group then cannot deadlock on a send
 * that waits for its receiver. @p p2p_before: every task before @p t is a
 * send or receive. */
static bool may_run(const struct weft_comm *comm, const struct weft_task *t, bool p2p_before)
{
	return t == comm->active || (p2p_before && weft_task_is_p2p(t));
}

/* A peer timed out in an operation this rank is in too (or in a later
 * one): it is stuck as well, so it fails now and gives the same verdict. */
static bool peer_stuck_too(const struct weft_comm *comm, const struct weft_task *t)
{
	if (weft_task_is_p2p(t))
		return true;
	uint64_t call = weft_tag_number((uint32_t)t->seq);
	return call + 1 >= weft_watch_peer_timed_out_call(comm);
}

static bool past_deadline(const struct weft_task *t, double now)
{
	return t->deadline > 0 && now >= t->deadline;
}

/* The timeout: the job-wide verdict (core/watch.h) follows the local view. */
static weft_status_t timed_out(struct weft_comm *comm, struct weft_task *t, double now, bool told)
{
	char why[96], who[48] = "";
	if (past_deadline(t, now))
		snprintf(why, sizeof(why), "not finished within its timeout of %.1f s%s",
			 t->timeout_s, t->posted ? "" : " (queued behind earlier operations)");
	else
		snprintf(why, sizeof(why), "no progress for %.1f s", now - t->last_event);
	if (t->waiting_for >= 0)
		snprintf(who, sizeof(who), " waiting for rank %d", t->waiting_for);
	char verdict[WEFT_ERR_MSG_BYTES], connecting[128], dark[160];
	weft_watch_verdict(comm, t, verdict, sizeof(verdict));
	weft_p2p_connecting_note(comm, connecting, sizeof(connecting));
	weft_p2p_dark_note(comm, t->waiting_for, dark, sizeof(dark));
	weft_trace_event(comm, WEFT_EV_TIMEOUT, t->waiting_for, "%s seq %llu: %s%s",
			 weft_coll_name(t->args.coll),
			 (unsigned long long)weft_tag_number((uint32_t)t->seq), why, who);
	return weft_comm_fail(comm, WEFT_ERR_TIMEOUT, "%s seq %llu: %s%s%s%s%s; %s",
			      weft_coll_name(t->args.coll),
			      (unsigned long long)weft_tag_number((uint32_t)t->seq), why, who,
			      told ? " (a peer timed out)" : "", connecting, dark,
			      verdict[0] ? verdict : "no verdict (no watch)");
}

/* Has @p t been stuck past the timeout or its deadline, or has a peer
 * timed out in it? */
static weft_status_t check_stuck(struct weft_comm *comm, struct weft_task *t, double now)
{
	bool told = weft_watch_peer_timed_out(comm) && peer_stuck_too(comm, t);
	if (now - t->last_event <= comm->timeout_s && !told && !past_deadline(t, now))
		return WEFT_INPROGRESS;
	return timed_out(comm, t, now, told);
}

/* The tasks from @p t on cannot run yet, but one may pass the deadline its
 * request was given (weft_request_set_timeout): a rank stuck in an earlier
 * operation must not hide the ranks that never reached this one. */
static weft_status_t check_queued(struct weft_comm *comm, struct weft_task *t, double now)
{
	if (!comm->deadlines)
		return WEFT_SUCCESS;
	for (; t; t = t->next) {
		if (t->deadline == 0)
			continue;
		if (now == 0)
			now = weft_now();
		if (past_deadline(t, now)) {
			weft_status_t st = timed_out(comm, t, now, false);
			weft_comm_kill(comm, st);
			return st;
		}
	}
	return WEFT_SUCCESS;
}

/* Post @p t; its timeout counts from now. */
static weft_status_t post_task(struct weft_task *t)
{
	uint64_t ns = weft_now_ns();
	t->posted = true;
	t->started_ns = ns;
	t->last_event = (double)ns * 1e-9;
	weft_trace_started(t, ns);
	return t->ops->post(t);
}

static weft_status_t step_task(struct weft_comm *comm, struct weft_task *t, double *now)
{
	if (!t->posted) {
		weft_status_t st = post_task(t);
		if (st != WEFT_SUCCESS)
			return st;
	}
	weft_status_t st = t->ops->progress(t);
	if (st != WEFT_INPROGRESS)
		return st;
	weft_trace_waiting(t);
	if (*now == 0)
		*now = weft_now();
	return check_stuck(comm, t, *now);
}

/* @p t, at *link in the active list, finished with @p st: it leaves the
 * list (the request still owns it), the watch hears of a collective's end,
 * its algorithm releases what it took, its callback runs, and a failure
 * kills the communicator. */
/* The recorder and the observers (core/service.h) hear that @p t ended.
 * One that ended quick is timed at its call without a second read of the
 * coarse clock (its tick is milliseconds, the operation microseconds):
 * the two reads were most of what the recorder cost an 8-byte AllReduce
 * over shared memory (docs/observability.md); the precise clock, which
 * the metrics' histograms ask for, is always read. */
static void record_end(struct weft_comm *comm, struct weft_task *t, weft_status_t st)
{
	uint64_t ns =
	    t->ended_quick && !comm->observe.precise_clock ? t->posted_ns : weft_task_clock(comm);
	weft_trace_finished(t, st, ns);
	weft_observe_done(&comm->observe, t, st, ns);
}

static weft_status_t finish_task(struct weft_comm *comm, struct weft_task **link,
				 struct weft_task *t, weft_status_t st)
{
	st = weft_revoke_status(comm, st);
	t->status = st;
	record_end(comm, t, st);
	*link = t->next;
	weft_wait_moved(comm);
	if (!weft_task_is_p2p(t))
		weft_watch_op_finished(comm, weft_tag_number((uint32_t)t->seq));
	weft_task_retire(t);
	weft_task_notify(t);
	if (st != WEFT_SUCCESS)
		weft_comm_kill(comm, st);
	return st;
}

static weft_status_t progress_tasks(struct weft_comm *comm)
{
	double now = 0;
	struct weft_task **link = &comm->active;
	bool p2p_before = true;
	while (*link) {
		struct weft_task *t = *link;
		if (!may_run(comm, t, p2p_before))
			return check_queued(comm, t, now);
		weft_status_t st = step_task(comm, t, &now);
		if (st == WEFT_INPROGRESS) {
			t->status = st;
			p2p_before = p2p_before && weft_task_is_p2p(t);
			link = &t->next;
			continue;
		}
		if (finish_task(comm, link, t, st) != WEFT_SUCCESS)
			return st;
	}
	return WEFT_SUCCESS;
}

/* The communicator died of @p status: an event, and the recorder
 * written out (WEFT_TRACE_DIR), after the tasks' ends were recorded. */
static void died(struct weft_comm *comm, weft_status_t status)
{
	char why[WEFT_ERR_MSG_BYTES];
	weft_comm_error_copy(comm, why, sizeof(why));
	if (status == WEFT_ERR_ABORTED)
		weft_trace_event(comm, WEFT_EV_ABORT, -1, "%s", why);
	else if (status != WEFT_ERR_TIMEOUT) /* the timeout was recorded as one */
		weft_trace_event(comm, WEFT_EV_FAILURE, -1, "%s", why);
	weft_trace_dump_auto(comm, status == WEFT_ERR_TIMEOUT	? "timeout"
				   : status == WEFT_ERR_ABORTED ? "abort"
								: weft_status_string(status));
}

void weft_comm_kill(struct weft_comm *comm, weft_status_t status)
{
	if (comm->aborted)
		return;
	status = weft_revoke_status(comm, status);
	comm->aborted = true;
	/* Dead, whatever killed it (an invalid argument or no memory inside a
	 * task too): every later call fails with this at once, and
	 * weft_comm_get_async_error says so, instead of a call waiting for
	 * progress that a killed communicator never makes. */
	int none = WEFT_SUCCESS;
	atomic_compare_exchange_strong(&comm->async_error, &none,
				       (int)(status != WEFT_SUCCESS ? status : WEFT_ERR_INTERNAL));
	weft_comm_error_keep(comm, (weft_status_t)atomic_load(&comm->async_error));
	if (comm->shmem && comm->shmem_abort)
		comm->shmem_abort(comm->shmem);
	for (size_t i = 0; i < comm->ntps; i++)
		if (comm->tps[i])
			comm->tps[i]->ops->life.abort(comm->tps[i]);
	weft_p2p_abort(comm, status);
	while (comm->active) {
		struct weft_task *t = comm->active;
		comm->active = t->next;
		if (t->status == WEFT_INPROGRESS) {
			t->status = status;
			record_end(comm, t, status);
		}
		weft_task_retire(t);
		weft_task_notify(t);
	}
	died(comm, status);
}

weft_status_t weft_comm_progress(struct weft_comm *comm)
{
	if (atomic_load(&comm->abort_requested) && !comm->aborted) {
		weft_comm_fail(comm, WEFT_ERR_ABORTED, "communicator aborted by weft_comm_abort");
		weft_comm_kill(comm, WEFT_ERR_ABORTED);
	}
	if (weft_comm_revoked(comm) && !comm->aborted)
		weft_comm_kill(comm, WEFT_ERR_REVOKED);
	if (comm->aborted)
		return (weft_status_t)atomic_load(&comm->async_error);
	for (size_t i = 0; i < comm->ntps; i++) {
		struct weft_tp *tp = comm->tps[i];
		if (!tp)
			continue;
		weft_status_t st = tp->ops->msg.progress(tp);
		if (st != WEFT_SUCCESS && st != WEFT_INPROGRESS) {
			st = weft_revoke_status(comm, st);
			weft_comm_kill(comm, st);
			return st;
		}
	}
	weft_status_t st = weft_p2p_progress(comm);
	if (st != WEFT_SUCCESS) {
		st = weft_revoke_status(comm, st);
		weft_comm_kill(comm, st);
		return st;
	}
	weft_stats_tick(comm);
	weft_observe_tick(&comm->observe, comm);
	return progress_tasks(comm);
}

/* Count the callers that drive progress themselves (a blocking call, a
 * wait): the progress thread stands aside while there are any. */
static void comm_waiter(struct weft_comm *comm, int delta)
{
	if (comm->pt) /* only a progress thread reads it; it wakes to stand aside or drive */
		weft_progress_thread_waiters(comm, atomic_fetch_add(&comm->waiters, delta) + delta);
}

/* Spin while the peers are likely running. With more local ranks than
 * cores (oversubscribed), a rank we wait for is probably descheduled:
 * once nothing has moved for a while, nap so that it gets the core
 * (sched_yield alone does not hand the core over under CFS). Otherwise
 * only yield now and then, to be polite to other work on the machine.
 * A rank that sleeps (WEFT_WAIT, core/wait.c) does so once nothing has
 * moved for its spin budget, and naps where it cannot sleep. */
#define WEFT_SPIN_SECONDS 50e-6
#define WEFT_NAP_NS	  2000
#define WEFT_SLEEPLESS_NS 50000 /* a rank that would sleep and cannot */

static bool thread_has_others(const struct weft_comm *self);

/* The deadline of the oldest active task (its timeout), 0 if none. */
static double deadline_of(const struct weft_comm *comm)
{
	const struct weft_task *t = comm->active;
	return t && t->last_event > 0 ? t->last_event + comm->timeout_s : 0;
}

static void sleep_or_nap(struct weft_comm *comm)
{
	if (thread_has_others(comm) || !weft_wait_sleep(comm, deadline_of(comm))) {
		struct timespec nap = {0, WEFT_SLEEPLESS_NS};
		nanosleep(&nap, NULL);
	}
}

void weft_wait_backoff(const struct weft_comm *comm, unsigned *spins, double last_event)
{
	if ((++*spins & 255) != 0)
		return;
	if (comm->wait.block) { /* would sleep, but this caller cannot: nap */
		if (weft_now() - last_event > comm->wait.spin_s) {
			struct timespec nap = {0, WEFT_SLEEPLESS_NS};
			nanosleep(&nap, NULL);
		}
		return;
	}
	if (!comm->oversubscribed) {
		if ((*spins & 0xffff) == 0)
			sched_yield();
		return;
	}
	if (weft_now() - last_event > WEFT_SPIN_SECONDS) {
		struct timespec nap = {0, WEFT_NAP_NS};
		nanosleep(&nap, NULL);
	}
}

void weft_wait_idle(struct weft_comm *comm, unsigned *spins, double last_event)
{
	if (!comm->wait.block) {
		weft_wait_backoff(comm, spins, last_event);
		return;
	}
	if ((++*spins & 15) == 0 && weft_now() - last_event > comm->wait.spin_s) {
		sleep_or_nap(comm);
		*spins = 0;
	}
}

/* Communicators with non-blocking operations started from some thread,
 * with that thread. A wait drives the others of its own thread too, as an
 * MPI wait does, so that ranks may wait for operations on different
 * communicators in different orders. The table is shared and locked so that
 * a communicator destroyed from another thread is never driven after it is
 * gone: destroy takes the same lock. */
#define WEFT_WAIT_COMMS 64
static pthread_mutex_t wait_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct weft_comm *comm;
	pthread_t thread;
} wait_comms[WEFT_WAIT_COMMS];

void weft_thread_comm_add(struct weft_comm *comm)
{
	pthread_t self = pthread_self();
	pthread_mutex_lock(&wait_lock);
	int free_slot = -1;
	bool known = false;
	for (int i = 0; i < WEFT_WAIT_COMMS && !known; i++) {
		if (wait_comms[i].comm == comm && pthread_equal(wait_comms[i].thread, self))
			known = true;
		else if (!wait_comms[i].comm && free_slot < 0)
			free_slot = i;
	}
	if (!known && free_slot >= 0) { /* beyond the table, waits drive only their own */
		wait_comms[free_slot].comm = comm;
		wait_comms[free_slot].thread = self;
	}
	pthread_mutex_unlock(&wait_lock);
}

void weft_thread_comm_forget(struct weft_comm *comm)
{
	pthread_mutex_lock(&wait_lock);
	for (int i = 0; i < WEFT_WAIT_COMMS; i++)
		if (wait_comms[i].comm == comm)
			wait_comms[i].comm = NULL;
	pthread_mutex_unlock(&wait_lock);
}

/* Does this thread have work started on another communicator? A sleep
 * on this one's wait set would not hear of it. */
static bool thread_has_others(const struct weft_comm *self)
{
	pthread_t me = pthread_self();
	bool others = false;
	/* Called under this communicator's lock, while progress_others takes
	 * wait_lock before communicators' locks: never wait for it here (a
	 * lock-order inversion, TSan in split_group). Busy: say there may be
	 * others, and nap rather than sleep. */
	if (pthread_mutex_trylock(&wait_lock) != 0)
		return true;
	for (int i = 0; i < WEFT_WAIT_COMMS && !others; i++)
		others = wait_comms[i].comm && wait_comms[i].comm != self &&
			 pthread_equal(wait_comms[i].thread, me);
	pthread_mutex_unlock(&wait_lock);
	return others;
}

static void progress_others(const struct weft_comm *self)
{
	pthread_t me = pthread_self();
	pthread_mutex_lock(&wait_lock);
	for (int i = 0; i < WEFT_WAIT_COMMS; i++) {
		struct weft_comm *c = wait_comms[i].comm;
		if (!c || c == self || !pthread_equal(wait_comms[i].thread, me))
			continue;
		weft_comm_lock(c);
		bool active = c->active != NULL;
		if (active)
			weft_comm_progress(c); /* its errors land in its own tasks */
		weft_comm_unlock(c);
		if (!active)
			wait_comms[i].comm = NULL;
	}
	pthread_mutex_unlock(&wait_lock);
}

/* The wait loop, with the lock held: drive this communicator (and the
 * thread's others) until @p task is done. */
static weft_status_t wait_locked(struct weft_comm *comm, struct weft_task *task)
{
	unsigned spins = 0;
	uint64_t last = comm->observe.waits ? weft_now_ns() : 0; /* observers' wait accounting */
	while (task->status == WEFT_INPROGRESS) {
		double seen = task->last_event;
		weft_comm_unlock(comm);
		progress_others(comm);
		weft_comm_lock(comm);
		weft_status_t st = weft_comm_progress(comm);
		if (st != WEFT_SUCCESS && task->status == WEFT_INPROGRESS)
			task->status = st;
		if (comm->observe.waits)
			weft_observe_waited(&comm->observe, comm, task, &last);
		if (task->last_event != seen)
			spins = 0;
		else if (task->status == WEFT_INPROGRESS)
			weft_wait_idle(comm, &spins, task->last_event);
	}
	return task->status;
}

/* Polls of a task alone between the checks of a whole progress. */
#define WEFT_ALONE_POLLS 1024

/* @p task, posted, is the only one in flight and needs nothing but itself
 * (struct weft_task_ops.alone): poll its progress alone. Every
 * WEFT_ALONE_POLLS polls the communicator's whole progress runs instead
 * (transports, abort, the timeout and the watch's verdict, as for any
 * task), so that nothing else waits long. The clock is first read there,
 * not at the post: its 20-50 ns would be a tenth of an 8-byte AllReduce,
 * and the timeout then counts from a few microseconds after the post. */
static weft_status_t run_alone(struct weft_comm *comm, struct weft_task *task)
{
	unsigned spins = 0;
	for (unsigned polls = 1; task->status == WEFT_INPROGRESS; polls++) {
		if (polls % WEFT_ALONE_POLLS == 0) {
			if (task->last_event == 0)
				task->last_event = weft_now();
			weft_status_t st = weft_comm_progress(comm);
			if (st != WEFT_SUCCESS && task->status == WEFT_INPROGRESS)
				task->status = st;
			continue;
		}
		weft_status_t st = task->ops->progress(task);
		if (st != WEFT_INPROGRESS) {
			task->ended_quick = task->last_event == 0; /* no clock read yet */
			return finish_task(comm, &comm->active, task, st);
		}
		weft_wait_idle(comm, &spins, task->last_event);
	}
	return task->status;
}

/* A blocking call drives progress itself, even with a progress thread
 * (which stands aside meanwhile): no hand-over between threads per message. */
weft_status_t weft_task_wait(struct weft_task *task)
{
	struct weft_comm *comm = task->comm;
	comm_waiter(comm, 1);
	weft_comm_lock(comm);
	weft_status_t st = wait_locked(comm, task);
	weft_comm_unlock(comm);
	comm_waiter(comm, -1);
	return st;
}

weft_status_t weft_task_run(struct weft_task *task)
{
	struct weft_comm *comm = task->comm;
	comm_waiter(comm, 1);
	weft_comm_lock(comm);
	weft_task_queue(task, 0);
	weft_status_t st;
	if (comm->active == task && !comm->aborted && task->ops->alone) {
		/* Alone, the clock is read later (run_alone), unless a wait
		 * that gives the core away needs it from the start. */
		task->posted = true;
		task->last_event = comm->oversubscribed || comm->wait.block ? weft_now() : 0;
		st = task->ops->post(task);
		/* Recorded (posted and started at once) only now that its data
		 * is out, so that the clock's read and the recorder's stores
		 * overlap the wait for the peers' data, mostly: before its
		 * post they cost 5 % of an 8-byte AllReduce over shared
		 * memory, here 1-4 % (docs/bench/issue29-recorder.txt). A post
		 * never moves a message: the stamp is as good. */
		weft_task_record(task, true);
		if (st != WEFT_SUCCESS)
			st = finish_task(comm, &comm->active, task, st);
		else if (task->ops->alone && task->ops->alone(task))
			st = run_alone(comm, task);
		else {
			task->last_event = weft_now(); /* handed on: an ordinary wait */
			st = wait_locked(comm, task);
		}
	} else {
		weft_task_record(task, false);
		st = wait_locked(comm, task);
	}
	weft_comm_unlock(comm);
	comm_waiter(comm, -1);
	return st;
}
