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
#include <sys/types.h>

#include "weft.h"

struct sockaddr_storage;
struct weft_comm;
struct weft_task;
struct weft_watch;

/* A service that rides on the watch (core/service.h; health/: the
 * slow-rank detector, the shrink's agreement): its own datagrams on the
 * watch's socket (authenticated with the watch's key, from the ranks'
 * registered addresses: the service checks), and periodic work in the
 * watch's thread. Entries left NULL are empty. */
struct weft_watch_service {
	size_t size; /* sizeof(struct weft_watch_service) */
	const char *name;
	/* A datagram of @p len bytes from @p from that is not the watch's own
	 * (it does not start with the watch's magic): true if it was this
	 * service's (taken, or dropped and counted in w->dropped); false
	 * leaves it to the next service. The reading thread, with the watch's
	 * rx_lock held (watch_int.h). */
	bool (*take)(void *ctx, struct weft_watch *w, const unsigned char *buf, ssize_t len,
		     const struct sockaddr_storage *from);
	/* The watch's thread, every turn, with rx_lock held: its periodic
	 * work at @p now_ns (weft_now_ns()). Returns the weft_now_ns() by
	 * which it wants its next turn; UINT64_MAX: no wish. */
	uint64_t (*tick)(void *ctx, struct weft_watch *w, uint64_t now_ns);
	/* The watch is freed: free @p ctx (if the service gave it up). */
	void (*fini)(void *ctx);
};

/* How many services a watch carries. */
#define WEFT_WATCH_SERVICES 4

/* Register @p svc (static) with @p ctx on @p w, before its thread runs (a
 * service's start step, core/service.h). Services see a datagram in the
 * order they registered. WEFT_ERR_INTERNAL when the table is full. */
weft_status_t weft_watch_serve(struct weft_watch *w, const struct weft_watch_service *svc,
			       void *ctx);

/* The @p ctx that @p svc registered on @p w, or NULL. */
void *weft_watch_service_ctx(const struct weft_watch *w, const struct weft_watch_service *svc);

/* Start the thread of a watch that weft_watch_start opened. */
weft_status_t weft_watch_run(struct weft_comm *comm);

/* During init, through the bootstrap (every rank calls it at the same
 * point): open the socket, exchange addresses; weft_watch_run starts the
 * thread once the services registered (comm_init.c). */
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

/* For a transport that can reach @p peer on no path (env->peer_silence,
 * transports/transport.h): for how many seconds this rank has asked the
 * peer on the watch and heard nothing, 0 while it answers. Asks as it is
 * called: a query at most every 100 ms while nothing was heard from the
 * peer for that long (heartbeats reach only the two neighbours, and only
 * every WEFT_TIMEOUT/4), which a live peer's watch thread answers at once,
 * computing or not. So silence counts from the first unanswered query: a
 * peer the watch has not heard lately is not silent until it has been
 * asked. < 0: no watch to ask (one rank, or not running yet or any more).
 * Any thread. */
double weft_watch_silence(struct weft_comm *comm, int peer);

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
