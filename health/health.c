/* health.c — the health services' steps in a communicator's lifecycle
 * (core/service.h), in the order they need:
 *
 *  - init: the metrics' settings and counters, and their observer, before
 *    anything else, so that init's own events are counted;
 *  - start: the detector, which needs the graph, and what rides on the
 *    watch (the detector's datagrams, the agreement's), before the
 *    watch's thread runs;
 *  - ready: the metrics join the exporter once the communicator is whole;
 *  - stop: the metrics leave the exporter first (a render reads the rest);
 *    their counters stay, for the threads that still count into them;
 *  - fini: the detector's state and the metrics' counters, once every
 *    thread that reaches them (the watch's, the progress thread, the
 *    transports') has stopped. The agreement's state goes with the watch
 *    (its fini). */
#include "health/health.h"

#include "core/comm.h"
#include "core/watch.h"
#include "health/agree.h"
#include "health/metrics.h"
#include "health/slowdet.h"
#include "health/slowdet_int.h"

static weft_status_t health_init(struct weft_comm *comm)
{
	weft_status_t st = weft_metrics_init(comm);
	if (st == WEFT_SUCCESS && comm->metrics)
		st = weft_comm_observe(comm, &weft_metrics_observer);
	return st;
}

static weft_status_t health_start(struct weft_comm *comm)
{
	weft_status_t st = weft_slowdet_init(comm);
	if (st == WEFT_SUCCESS && comm->slowdet) {
		st = weft_comm_observe(comm, &weft_slowdet_observer);
		if (st == WEFT_SUCCESS && comm->watch)
			st = weft_watch_serve(comm->watch, &weft_slowdet_watch, comm->slowdet);
	}
	if (st == WEFT_SUCCESS)
		st = weft_agree_attach(comm);
	return st;
}

static void health_fini(struct weft_comm *comm)
{
	weft_slowdet_fini(comm);
	weft_metrics_free(comm);
}

const struct weft_comm_service weft_health_service = {
    .size = sizeof(struct weft_comm_service),
    .name = "health",
    .init = health_init,
    .start = health_start,
    .ready = weft_metrics_register,
    .stop = weft_metrics_leave,
    .fini = health_fini,
};
