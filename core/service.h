/*
 * service.h — how the services above the core (health/: the metrics, the
 * slow-rank detector, the shrink's agreement) plug into a communicator.
 * The core carries operations, a frame channel (the watch) and a
 * communicator's lifecycle; a service observes them or rides on them
 * through the three tables below, and the core never calls one by name.
 *
 *  - struct weft_comm_service: the lifecycle. Whoever creates a
 *    communicator (api/) hands weft_comm_create the table of the services
 *    it wants; comm_init.c calls each step at its point of init and free,
 *    in the order the services need (below).
 *  - struct weft_comm_observer: what a service hears of operations. A
 *    service attaches one (weft_comm_observe) from its init or start step,
 *    only when it is on: a communicator without observers pays one
 *    predictable branch per operation and per progress, nothing more.
 *  - struct weft_watch_service (core/watch.h): datagrams on the watch's
 *    socket that are not the watch's own, and periodic work in its thread.
 *
 * Every table is filled with designated initialisers, its size first so
 * that it can grow; an entry left NULL is an empty step.
 */
#ifndef WEFT_SERVICE_H
#define WEFT_SERVICE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/trace.h"
#include "weft.h"

struct weft_comm;
struct weft_task;

/* A communicator's lifecycle, as a service sees it. The steps of init
 * run once each, in this order; a failure (with a sentence on the
 * communicator: weft_comm_fail) fails init, and the communicator is then
 * freed with stop and fini, which must be safe on a service that did not
 * finish its init. */
struct weft_comm_service {
	size_t size; /* sizeof(struct weft_comm_service) */
	const char *name;
	/* The communicator is allocated, its recorder ready; nothing is
	 * joined yet: read the settings (a bad value fails init, naming it)
	 * and make the state that counts events from here on. */
	weft_status_t (*init)(struct weft_comm *comm);
	/* Graph, connections and the watch's socket stand; the watch's thread
	 * does not run yet: register what rides on the watch
	 * (weft_watch_serve), and what needs the graph. */
	weft_status_t (*start)(struct weft_comm *comm);
	/* Every rank passed init's closing barrier: the communicator is
	 * handed to its caller. */
	void (*ready)(struct weft_comm *comm);
	/* The first step of freeing it, while everything still runs: stop
	 * reading the communicator from other threads (an exporter). */
	void (*stop)(struct weft_comm *comm);
	/* After the progress thread, the watch and the transports stopped
	 * (no thread left that could reach the service): free the state. */
	void (*fini)(struct weft_comm *comm);
};

/* What a service hears of a communicator's operations: the thread that
 * drives the communicator (the caller's, or its progress thread), under
 * the communicator's lock, except event (any thread). */
struct weft_comm_observer {
	size_t size; /* sizeof(struct weft_comm_observer) */
	const char *name;
	/* It wants the operations' times in ns (weft_now_ns), not the
	 * recorder's coarse clock (core/task.h: weft_task_clock). */
	bool precise_clock;
	/* It wants the wait loop's accounting (waited below). */
	bool waits;
	/* An operation was posted as call number @p call (a collective's). */
	void (*started)(struct weft_task *task, uint64_t call);
	/* An operation ended with @p status at @p now_ns (weft_task_clock). */
	void (*done)(struct weft_task *task, weft_status_t status, uint64_t now_ns);
	/* The wait loop, after each progress while @p task waits: @p last is
	 * the weft_now_ns() of the previous iteration, to update. */
	void (*waited)(struct weft_comm *comm, const struct weft_task *task, uint64_t *last);
	/* Every WEFT_OBSERVE_TICK-th progress of the communicator. */
	void (*tick)(struct weft_comm *comm);
	/* An event of the flight recorder (core/trace.h), from any thread. */
	void (*event)(struct weft_comm *comm, enum weft_trace_event_kind kind);
};

/* Observers per communicator (the metrics and the detector today). */
#define WEFT_OBSERVERS_MAX 4
/* Progresses between two ticks: the cheap counter is the core's. */
#define WEFT_OBSERVE_TICK 64

/* A communicator's observers (struct weft_comm's observe). */
struct weft_observers {
	/* copies, an entry left NULL filled with an empty one (service.c) */
	struct weft_comm_observer list[WEFT_OBSERVERS_MAX];
	/* Raised (release) after list[n] is written: an event from another
	 * thread during init sees a whole entry or none. */
	_Atomic int n;
	bool precise_clock, waits; /* any observer's */
	unsigned polls;		   /* progresses, for tick */
};

/* Attach (a copy of) @p obs to @p comm, during init (from a service's init or
 * start step, before another thread drives it). Returns WEFT_SUCCESS, or
 * WEFT_ERR_INTERNAL with a sentence on @p comm when the table is full. */
weft_status_t weft_comm_observe(struct weft_comm *comm, const struct weft_comm_observer *obs);

/* ---- the core's side: each a loop over what is attached ---- */

static inline void weft_observe_started(const struct weft_observers *o, struct weft_task *task,
					uint64_t call)
{
	for (int i = 0, n = atomic_load_explicit(&o->n, memory_order_acquire); i < n; i++)
		o->list[i].started(task, call);
}

static inline void weft_observe_done(const struct weft_observers *o, struct weft_task *task,
				     weft_status_t status, uint64_t now_ns)
{
	for (int i = 0, n = atomic_load_explicit(&o->n, memory_order_acquire); i < n; i++)
		o->list[i].done(task, status, now_ns);
}

static inline void weft_observe_waited(const struct weft_observers *o, struct weft_comm *comm,
				       const struct weft_task *task, uint64_t *last)
{
	for (int i = 0, n = atomic_load_explicit(&o->n, memory_order_acquire); i < n; i++)
		o->list[i].waited(comm, task, last);
}

static inline void weft_observe_tick(struct weft_observers *o, struct weft_comm *comm)
{
	if (atomic_load_explicit(&o->n, memory_order_relaxed) == 0 ||
	    (++o->polls & (WEFT_OBSERVE_TICK - 1)))
		return;
	for (int i = 0, n = atomic_load_explicit(&o->n, memory_order_acquire); i < n; i++)
		o->list[i].tick(comm);
}

static inline void weft_observe_event(const struct weft_observers *o, struct weft_comm *comm,
				      enum weft_trace_event_kind kind)
{
	for (int i = 0, n = atomic_load_explicit(&o->n, memory_order_acquire); i < n; i++)
		o->list[i].event(comm, kind);
}

#endif
