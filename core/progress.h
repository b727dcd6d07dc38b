/* progress.h — the one place where operations move (progress.c): the
 * communicator's progress, the wait loop every blocking call and
 * weft_wait run, and killing a communicator's operations. */
#ifndef WEFT_PROGRESS_H
#define WEFT_PROGRESS_H

#include "weft.h"

struct weft_comm;
struct weft_task;

/* Drive every transport, the gate and every active task once. Never blocks.
 * The caller holds the communicator's lock. */
weft_status_t weft_comm_progress(struct weft_comm *comm);

/* Fail every active task with @p status and close the transports so that
 * peers notice. */
void weft_comm_kill(struct weft_comm *comm, weft_status_t status);

/* Progress the communicator until @p task (started) finishes or times out;
 * returns its status. */
weft_status_t weft_task_wait(struct weft_task *task);

/* A blocking call: start @p task (as weft_task_start, outside any group)
 * and wait for it. An idle communicator whose task can run alone
 * (struct weft_task_ops.alone) drives only that task, with no transport
 * between its polls: the latency path of a small shared-memory AllReduce. */
weft_status_t weft_task_run(struct weft_task *task);

/* Remember that this thread started non-blocking work on @p comm, so its
 * waits drive it too; forget it (for every thread) when the communicator
 * is destroyed. */
void weft_thread_comm_add(struct weft_comm *comm);
void weft_thread_comm_forget(struct weft_comm *comm);

/* Call in a polling loop that saw no event since @p last_event: spins at
 * first, then naps so that descheduled peers can run (never sleeps: for
 * loops over several communicators, or without the lock). */
void weft_wait_backoff(const struct weft_comm *comm, unsigned *spins, double last_event);

/* The same in a loop over one communicator with its lock held: a rank
 * that sleeps (WEFT_WAIT, core/wait.h) sleeps there until there is work,
 * the lock released meanwhile. */
void weft_wait_idle(struct weft_comm *comm, unsigned *spins, double last_event);

#endif
