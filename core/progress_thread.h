/* progress_thread.h — WEFT_PROGRESS_THREAD=1: a thread per communicator
 * that drives its non-blocking operations (progress_thread.c). */
#ifndef WEFT_PROGRESS_THREAD_H
#define WEFT_PROGRESS_THREAD_H

#include "weft.h"

struct weft_comm;

/* Start follows the config's progress_thread_mode, else reads the setting,
 * and if the answer is 1 starts the thread (after init); stop joins it
 * (before free). */
weft_status_t weft_progress_thread_start(struct weft_comm *comm);
void weft_progress_thread_stop(struct weft_comm *comm);

/* With the communicator's lock held: wake the thread for work just posted. */
void weft_progress_thread_kick(struct weft_comm *comm);

/* A caller started (@p now > 0 waiters) or stopped (0) driving progress
 * itself (core/progress.c): wake the thread to stand aside, or to drive
 * again. Any thread, no lock. */
void weft_progress_thread_waiters(struct weft_comm *comm, int now);

#endif
