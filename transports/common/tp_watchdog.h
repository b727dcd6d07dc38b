/*
 * tp_watchdog.h — liveness of a stalled connection: the stall check the
 * shm transport started with, shared by every transport that can wait on a
 * peer which says nothing when it dies (shm, ofi over a silent provider,
 * the RMA protocol of rma_proto.h).
 *
 * A connection with messages queued that moves nothing is stalled. The
 * coarse clock is read once every WEFT_WATCHDOG_POLLS idle polls, so an
 * idle poll mostly costs a counter increment. Few polls: a rank that
 * sleeps in its waits (WEFT_WAIT=block) polls a few dozen times a second,
 * and a dead peer must still be found within a second or so. Once the
 * stall has lasted @p stall_s the watchdog says a check is due, and again
 * every @p stall_s after that. What the check is belongs to the
 * transport: a shared state word, the peer's pid when it runs on this
 * host, a probe the provider must deliver or fail.
 */
#ifndef WEFT_TP_WATCHDOG_H
#define WEFT_TP_WATCHDOG_H

#include <stdbool.h>

#define WEFT_WATCHDOG_POLLS 16

struct weft_watchdog {
	unsigned polls; /* idle polls since the clock was last read */
	double since;	/* when the stall was first seen (0: not stalled) */
};

/* The connection moved: the stall, if any, is over. */
static inline void weft_watchdog_moved(struct weft_watchdog *w)
{
	w->polls = 0;
	w->since = 0;
}

/* One idle poll of a busy connection; true when a check of the peer is due. */
bool weft_watchdog_due(struct weft_watchdog *w, double stall_s);

#endif
