/*
 * slowdet.h — the online detector: a slow link or a slow rank, named on
 * every rank while the job runs, and cleared when it recovers.
 *
 * What it measures (each rank, at no cost an operation would notice):
 *  - per connection, the path's rate: bytes the peer acknowledged over
 *    the time the connection had data out, less the time the receiver's
 *    window held it back (TCP_INFO's tcpi_bytes_acked, tcpi_busy_time,
 *    tcpi_rwnd_limited, read by the gate). A connection that only waits
 *    for data still shows what its path can carry when it has some, and
 *    a slow receiver does not make its path look slow;
 *  - how much of its time the rank spends blocked in Weft waiting for
 *    peers (the wait loop's own iterations; gaps in them that the rank
 *    did not sleep on purpose, when the process did not run, counted
 *    apart as stalls);
 *  - how late each peer's first message of an operation came (less the
 *    time this rank itself did not run meanwhile);
 *  - the share of the time the process did not run when it asked to: the
 *    watch's thread wakes every 10 ms and adds up how late it woke
 *    (slowdet_watch.c).
 *
 * What carries it: the watch's UDP socket (core/watch.h), at a period of
 * its own, WEFT_DETECT_PERIOD (0.2 s): every rank sends rank 0 one
 * datagram per period (its busiest connections' bytes and path times,
 * its peers' lateness, its wait share; 280 bytes, authenticated like
 * every watch datagram); rank 0
 * decides and sends every rank the verdict when it changes. A gather to
 * one rank and a broadcast from it, never an all-to-all; no data frame
 * carries anything more.
 *
 * How it decides (rank 0, every period, over the latest sample of each
 * rank; slowdet_stats.c):
 *  - a host's uplink is slow when the best rate of any connection into or
 *    out of the host is well below the job's: robust statistics across
 *    hosts, median and MAD of the logarithms, at least 2x below the median
 *    and 3 scaled MADs (a throttled NIC slows every connection through it;
 *    a slow peer elsewhere slows only one of a host's connections);
 *  - a rank holds the job up when its process did not run far more of
 *    the time than the job's median (median and MAD again, at least 10
 *    points and twice the median: stopped, or starved of CPU alone), or
 *    when its first messages of an operation reach the ranks it feeds far
 *    later than the job's median (at least 10 ms and twice the median: it
 *    calls late); not named when its host's uplink is (the link explains
 *    it), nor for lateness while another rank does not run;
 *  - either for WEFT_DETECT_CONFIRM periods in a row before it is named
 *    (an uplink 4x below the median or more: one fewer, its rate being a
 *    window of periods already), and as many clean ones before it is
 *    cleared.
 * Named: a WARN line on every rank ("slow: rank 1 (h3, 10.77.5.13) uplink
 * to leaf2 at 9.1 MB/s, the job's median 36.4 MB/s, for 12 operations"),
 * an event in the flight recorder, and the weft_slow gauge in the
 * metrics; cleared: a WARN line, an event, and the gauge at 0.
 *
 * Needs 3 ranks or more (with 2, there is no majority to compare with),
 * and connections that report TCP_INFO (socket) for slow links; slow ranks
 * are found over any transport.
 */
#ifndef WEFT_SLOWDET_H
#define WEFT_SLOWDET_H

#include <stdbool.h>
#include <stdint.h>

#include "core/service.h"
#include "util/counter.h"
#include "weft.h"

struct weft_comm;
struct weft_task;
struct weft_metrics;
struct weft_mout;

/* What the thread that drives the communicator publishes for the watch. */
struct weft_slowdet_pub {
	weft_counter_t wait_ns;	 /* blocked in a wait, running */
	weft_counter_t stall_ns; /* blocked in a wait, not running (gaps) */
	weft_counter_t ops;	 /* operations finished */
	weft_counter_t *wait_on; /* [peer] ns of wait_ns spent waiting on it */
	/* [peer] the first message of an operation from it: how long after
	 * this rank posted the operation it came, summed, and how many */
	weft_counter_t *late_ns, *late_n;
};

/* WEFT_DETECT, WEFT_DETECT_PERIOD, WEFT_DETECT_CONFIRM (a bad value fails
 * init, naming it), and the state (comm->slowdet; NULL when off). */
weft_status_t weft_slowdet_init(struct weft_comm *comm);
void weft_slowdet_fini(struct weft_comm *comm);

/* The wait loop: call with @p last the time of the previous iteration
 * (weft_now_ns(), updated), after each progress while @p task waits. */
void weft_slowdet_waited(struct weft_comm *comm, const struct weft_task *task, uint64_t *last);

/* From progress (every WEFT_OBSERVE_TICK-th): every WEFT_DETECT_PERIOD / 2, read the signals of the
 * connections that carried data since (the gate's sample). */
void weft_slowdet_tick(struct weft_comm *comm);

/* The first message of @p task's first step from @p peer arrived (the
 * engine's note): how late after this rank posted the operation. A rank
 * whose first messages come late to the ranks that wait for them arrived
 * late itself (stopped, starved, or called late). */
void weft_slowdet_first(const struct weft_task *task, int peer);

/* The driving thread's side above, and the operations it finishes
 * (counted for the samples), as the communicator's observer
 * (core/service.h), attached by health/health.c when the detector is on. */
extern const struct weft_comm_observer weft_slowdet_observer;

/* The metrics' series of the detector (weft_slow, weft_wait_seconds_total,
 * weft_stall_seconds_total). */
void weft_slowdet_render(const struct weft_metrics *list, struct weft_mout *o);

#endif
