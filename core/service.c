/* service.c — attaching an observer (service.h says why). */
#include "core/service.h"

#include "core/comm.h"
#include "core/fail.h"

static void no_started(struct weft_task *task, uint64_t call)
{
}

static void no_done(struct weft_task *task, weft_status_t status, uint64_t now_ns)
{
}

static void no_waited(struct weft_comm *comm, const struct weft_task *task, uint64_t *last)
{
}

static void no_tick(struct weft_comm *comm)
{
}

static void no_event(struct weft_comm *comm, enum weft_trace_event_kind kind)
{
}

weft_status_t weft_comm_observe(struct weft_comm *comm, const struct weft_comm_observer *obs)
{
	struct weft_observers *o = &comm->observe;
	int n = atomic_load_explicit(&o->n, memory_order_relaxed);
	if (n >= WEFT_OBSERVERS_MAX || obs->size > sizeof(*obs))
		return weft_comm_fail(comm, WEFT_ERR_INTERNAL, "init: cannot attach observer %s",
				      obs->name);
	/* The loops call every entry: an empty one never tests for NULL. */
	struct weft_comm_observer *c = &o->list[n];
	*c = *obs;
	c->started = c->started ? c->started : no_started;
	c->done = c->done ? c->done : no_done;
	c->waited = c->waited ? c->waited : no_waited;
	c->tick = c->tick ? c->tick : no_tick;
	c->event = c->event ? c->event : no_event;
	o->precise_clock |= obs->precise_clock;
	o->waits |= obs->waits;
	atomic_store_explicit(&o->n, n + 1, memory_order_release);
	return WEFT_SUCCESS;
}
