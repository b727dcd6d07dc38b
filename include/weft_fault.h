/*
 * weft_fault.h — surviving a lost rank: revoke a communicator, shrink it to
 * its survivors without the launcher, and ask which ranks are known dead
 * or never came.
 * Part of Weft's public interface: include <weft.h>, which includes this
 * file (its conventions hold here). docs/reliability.md says how the
 * survivors agree and why that is correct.
 */
#ifndef WEFT_FAULT_H
#define WEFT_FAULT_H

#include "weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Revoke a communicator: every pending and later operation on @p comm, on
 * this rank and on every rank that can be reached, fails promptly with
 * WEFT_ERR_REVOKED — so that ranks that were not waiting for a dead peer
 * stop waiting too, and all of them can shrink it. This rank tells every
 * peer over the communicator's out-of-band watch (authenticated UDP
 * datagrams) and closes its connections once they have acknowledged, or
 * are found gone, or 0.25 s passed; a peer that misses the datagram hears
 * of it from the next heartbeat or answer, which carry it. Revoking twice
 * is harmless. Communicators split from @p comm are not revoked: they stay
 * usable while none of their own members failed. The revoked communicator
 * can still be shrunk (weft_comm_shrink), asked for its failed ranks, and
 * destroyed; nothing else.
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG (comm NULL, called from a
 *         completion callback).
 * Blocking: at most 0.25 s, for the acknowledgements.
 * Thread safety: may be called from any thread (an operation in flight in
 * another thread fails with WEFT_ERR_REVOKED).
 */
WEFT_API weft_status_t weft_comm_revoke(weft_comm_t comm);

#define WEFT_SHRINK_DEFAULT 0 /**< shrink; refuse while operations are in flight */
#define WEFT_SHRINK_ABORT   1 /**< revoke @p comm first: operations in flight fail */

/**
 * Shrink: the ranks of @p comm that are alive agree on who is gone and
 * build a new communicator of the others, ranks renumbered in the order of
 * their rank in @p comm — without the launcher, without a fresh unique id,
 * and whichever rank died (rank 0, whose process hosted the bootstrap,
 * included). Collective over the live ranks of @p comm: every one of them
 * calls it, with the same exclude list.
 *
 * Who is gone: a rank whose process is gone (a pid check on this host;
 * on another, its host refuses the watch's datagrams), one stopped on this
 * host and silent past WEFT_PEER_DEAD seconds, one silent on the watch
 * past WEFT_PEER_DEAD (unreachable), and the ranks of @p exclude, which
 * must call it too and get *newcomm = NULL. A rank left out because it
 * was found gone by mistake (it was stopped, or cut off) gets
 * WEFT_ERR_REVOKED and no communicator, if it asks while the survivors
 * still hold @p comm: once they have destroyed it, nobody answers, and it
 * fails with WEFT_ERR_REMOTE (no quorum) instead.
 *
 * The agreement is Paxos (single-decree, over the watch's authenticated
 * datagrams): every rank that builds a communicator from this call builds
 * the same one, even when ranks see different failures or one dies during
 * the call (then the call agrees again, without it). Quorum: on one host
 * any survivors may go on; across hosts more than half of @p comm's ranks
 * must take part, else the call fails with WEFT_ERR_REMOTE, "no quorum",
 * naming the ranks it reached — so the two halves of a partition never
 * both go on. A 2-rank communicator across hosts cannot shrink; on one
 * host it can. docs/reliability.md says why this is correct.
 *
 * A communicator that failed (a peer died, a timeout) is revoked first
 * (weft_comm_revoke). A healthy one may be shrunk too, by its exclude
 * list alone (NULL, 0: a copy of it); it stays usable unless
 * WEFT_SHRINK_ABORT is given, and operations still in flight on it (in
 * another thread, or requests not yet completed) make the call fail with
 * WEFT_ERR_INVALID_ARG unless WEFT_SHRINK_ABORT revokes them. The new
 * communicator's key and id are derived from @p comm's key, the agreed
 * membership and the attempt's number; its topology, ring, tuner and
 * transports are set up for the new membership (every connection proves
 * the new key). @p comm must still be destroyed.
 *
 * @param exclude   ranks of @p comm to leave out (NULL when @p nexclude is 0).
 * @param flags     WEFT_SHRINK_DEFAULT or WEFT_SHRINK_ABORT.
 * @param[out] newcomm  the new communicator; NULL on a rank that excluded itself.
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG (a NULL argument, a rank out of
 *         range or listed twice, unknown flags, operations in flight, ranks
 *         that passed different lists, every rank left out, inside a group
 *         or a completion callback); WEFT_ERR_REVOKED (this rank was left
 *         out); WEFT_ERR_REMOTE (no quorum; a rank alive on this host that
 *         left the communicator); WEFT_ERR_TIMEOUT (no decision within the
 *         communicator's timeout: the message names the ranks that did not
 *         call it); WEFT_ERR_NO_MEMORY; WEFT_ERR_SYSTEM. The message is in
 *         weft_comm_last_error(comm).
 * Blocking: yes, until the new communicator is up (or the timeout).
 * Thread safety: as any call on @p comm.
 */
WEFT_API weft_status_t weft_comm_shrink(weft_comm_t comm, const int *exclude, int nexclude,
					int flags, weft_comm_t *newcomm);

/** How a rank of a communicator was found dead (weft_comm_failed_ranks). */
typedef enum weft_rank_failure {
	WEFT_RANK_ALIVE = 0,	   /**< not known dead */
	WEFT_RANK_KILLED = 1,	   /**< its process is gone: on this host a pid check says so; on
				    *   another, its host refused the watch's datagrams (the process
				    *   exited, or destroyed the communicator) */
	WEFT_RANK_STOPPED = 2,	   /**< on this host, stopped (SIGSTOP, a debugger) and silent
				    *   past the timeout */
	WEFT_RANK_UNREACHABLE = 3, /**< dark on every path and silent on the watch for
				    *   WEFT_PEER_DEAD seconds (a host or link lost) */
	WEFT_RANK_EXCLUDED = 4,	   /**< named in the exclude list of a shrink */
} weft_rank_failure_t;

/** A rank known dead, and how it was found. */
typedef struct weft_failed_rank {
	int rank;		 /**< in the communicator asked */
	weft_rank_failure_t how; /**< never WEFT_RANK_ALIVE */
	double seconds_ago;	 /**< since this rank learned it */
} weft_failed_rank_t;

/** Name of a weft_rank_failure_t ("killed", "stopped", ...). Never NULL. */
WEFT_API const char *weft_rank_failure_string(weft_rank_failure_t how);

/**
 * The ranks of @p comm this rank knows to be dead, in the order it learned
 * of them, and how each was found: from the checks it can make at once
 * (a pid check of the ranks on this host, datagrams the ranks' hosts
 * refused, peers silent on the watch past WEFT_PEER_DEAD), and from the
 * agreement of weft_comm_shrink(), which names every rank it excluded on
 * every survivor. Sends nothing and waits for nothing.
 *
 * @param[out] ranks  room for @p capacity entries (may be NULL when
 *                    @p capacity is 0): filled with the first of them.
 * @param[out] count  how many ranks are known dead (may exceed @p capacity).
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG (comm or count NULL, capacity
 *         negative, ranks NULL with capacity > 0).
 * Thread safety: may be called from any thread.
 */
WEFT_API weft_status_t weft_comm_failed_ranks(weft_comm_t comm, weft_failed_rank_t *ranks,
					      int capacity, int *count);

/**
 * The ranks the job-wide verdict of the last timeout on @p comm
 * (docs/reliability.md) found had never reached the operation, or had
 * stopped inside it: the first @p capacity in @p ranks, increasing; *count
 * is how many (0: every rank reached it; -1: no verdict was taken).
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG (a NULL it needs, capacity < 0).
 * Thread safety: may be called from any thread.
 */
WEFT_API weft_status_t weft_comm_stragglers(weft_comm_t comm, int *ranks, int capacity, int *count);

#ifdef __cplusplus
}
#endif

#endif
