/*
 * stats.h — per-connection counters in a file, for operators
 * (WEFT_STATS_FILE, WEFT_STATS_INTERVAL; weft-topo --stats reads them).
 *
 * Every WEFT_STATS_INTERVAL seconds, and once more when the communicator is
 * destroyed, each rank writes one JSON object per line for each of its
 * connections that has sent anything: bytes and messages the gate admitted,
 * the transport's congestion signals summed since init (CE marks, segments
 * delivered, the last RTT, bytes per sub-flow and their shares), and the
 * pacer's state. Each rank writes its own file: %r in the path is its rank,
 * %h its host name, and a path without %r gets ".RANK" appended. A later
 * communicator of the same process (a split) writes beside the first's
 * file, with the first's rank and ".commN" appended: its own rank is not
 * unique in the job, and no two processes may write one file.
 *
 * The writing is off the hot path: progress checks the clock (which the
 * gate reads anyway) and, once per interval, builds the lines with jansson
 * into a stdio buffer and flushes it. No thread.
 */
#ifndef WEFT_STATS_H
#define WEFT_STATS_H

#include "util/error.h"

struct weft_comm;

/* WEFT_STATS_INTERVAL (always checked: a malformed value is
 * WEFT_ERR_INVALID_ARG naming it) and, if WEFT_STATS_FILE is set, the
 * statistics' state on @p comm (comm->stats). The clock of the lines'
 * "t" starts here. */
weft_status_t weft_stats_init(struct weft_comm *comm);

/* The connections are up: open this rank's file. Failure is recorded on
 * @p comm. No-op without WEFT_STATS_FILE. */
weft_status_t weft_stats_open(struct weft_comm *comm);

/* From progress: write every connection's line if the interval is over. */
void weft_stats_tick(struct weft_comm *comm);

/* The last lines, and close the file (before the transports close). */
void weft_stats_close(struct weft_comm *comm);

/* What keeping paths has done on all of this rank's connections, summed
 * into @p sum (its note left empty): the socket transport's failovers,
 * re-paths and the rest, zero where a transport keeps none. Takes the
 * communicator's lock (a progress thread moves the counters). */
struct weft_tp_paths;
void weft_stats_paths_sum(struct weft_comm *comm, struct weft_tp_paths *sum);

#endif
