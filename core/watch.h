/*
 * watch.h — the job's out-of-band watch: a side channel, independent of the
 * data path, that lets the ranks still alive agree, when an operation times
 * out, on which rank(s) never reached it and which merely waited.
 *
 * Each communicator has one UDP socket on the address it offers its peers
 * and one thread blocked on it (off the hot path). The thread sends a
 * heartbeat with this rank's state (last collective started and finished)
 * to its two neighbours in rank order every heartbeat period, and answers
 * queries. At a timeout the rank asks every peer for its state, waits a
 * bounded window for the answers, and writes the verdict. A query says which
 * operation timed out, so that a peer waiting in it declares the timeout
 * too: every survivor reports the same verdict, rather than the first one's
 * abort making the others report it as the failure. Datagrams carry the
 * job's secret and must come from the peer's registered address.
 * Traffic: two heartbeats per rank per period; at a timeout at most one
 * query per peer per 50 ms for the window.
 */
#ifndef WEFT_WATCH_H
#define WEFT_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft.h"

struct weft_comm;
struct weft_task;

/* During init, through the bootstrap (every rank calls it at the same
 * point): open the socket, exchange addresses, start the thread. */
weft_status_t weft_watch_start(struct weft_comm *comm);

/* Stop the thread and close the socket (safe on a comm without a watch). */
void weft_watch_stop(struct weft_comm *comm);

/* Read every datagram waiting at the watch's socket now, in the calling
 * thread (the watch's thread does it too, as they come): an operation
 * that failed because a peer closed its connection first asks whether
 * that peer's revoke is already waiting (core/revoke.h). */
void weft_watch_drain(struct weft_comm *comm);

/* This rank started / finished collective number @p call. */
void weft_watch_op_started(struct weft_comm *comm, uint64_t call, int coll);
void weft_watch_op_finished(struct weft_comm *comm, uint64_t call);

/* True when a peer told us it timed out in an operation this rank is
 * waiting in too (one atomic load). */
bool weft_watch_peer_timed_out(const struct weft_comm *comm);

/* The call (number + 1) a peer timed out in; UINT64_MAX for a send/recv. */
uint64_t weft_watch_peer_timed_out_call(const struct weft_comm *comm);

/* The address rank @p rank registered for its watch, as text (its IP,
 * which names a host where host names repeat); "-" without a watch. */
void weft_watch_addr(const struct weft_comm *comm, int rank, char *buf, size_t len);

/* At a timeout of @p task: ask the peers, and write the job-wide verdict
 * ("verdict: rank 1 never reached allreduce seq 5 (...); ranks 0,2 waited
 * in allreduce seq 5") into @p buf. Blocks for a bounded window (at most
 * min(2 s, WEFT_TIMEOUT/4) beyond the answers). Logs every rank's state
 * at WEFT_DEBUG=INFO. */
void weft_watch_verdict(struct weft_comm *comm, const struct weft_task *task, char *buf,
			size_t size);

/* The ranks the last verdict on @p comm named as never having reached the
 * operation that timed out, or as stopped inside it (not answering), in
 * increasing order: the first @p capacity of them in @p ranks. Returns how
 * many there are, or -1 when no verdict was taken (no timeout yet, or a
 * communicator of one rank, which has no watch). Any thread. */
int weft_watch_stragglers(struct weft_comm *comm, int *ranks, int capacity);

#endif
