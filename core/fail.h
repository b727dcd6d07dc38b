/* fail.h — recording an error on a communicator: the sentence that
 * weft_comm_last_error returns, and whether the communicator is dead after
 * it. Killing the communicator's operations is progress's business
 * (weft_comm_kill, core/progress.h). */
#ifndef WEFT_FAIL_H
#define WEFT_FAIL_H

#include <stdbool.h>
#include <stddef.h>

#include "weft.h"

struct weft_comm;

/* Record an error on the communicator ("rank R: " is prefixed) and return
 * @p status. Remote failures, timeouts, aborts, system and internal errors
 * also become the communicator's async error: the communicator is dead
 * after them. The last error is what weft_comm_last_error reports, except
 * that the first fatal one stays: it is the cause of all that follow. */
weft_status_t weft_comm_fail(struct weft_comm *comm, weft_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record why a call that builds on the communicator failed (a shrink):
 * its sentence replaces the last error ("rank R: " is prefixed), and the
 * communicator's health (its async error) is left as it was. Returns
 * @p status. */
weft_status_t weft_comm_report(struct weft_comm *comm, weft_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The communicator died of @p status (weft_comm_kill): the error recorded
 * last is its cause, and stays (or, if none was, one naming the status). */
void weft_comm_error_keep(struct weft_comm *comm, weft_status_t status);

/* Mark the communicator revoked by rank @p by (this rank, or a peer whose
 * revoke the watch heard: any thread),
 * unless it is already: that is its error now, with the first fatal one
 * before it quoted, and its async error. The flag and the sentence change
 * together under the error lock, so that an operation failing because it
 * saw the flag reads this sentence. Returns true if this call revoked it. */
bool weft_comm_error_revoked(struct weft_comm *comm, int by);

/* The last error's text, copied under the error lock into @p buf. */
void weft_comm_error_copy(struct weft_comm *comm, char *buf, size_t len);

/* Same, with ": strerror(errnum)" appended and WEFT_ERR_SYSTEM. */
weft_status_t weft_comm_fail_errno(struct weft_comm *comm, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- The ranks known dead, and how each was found (weft_comm_failed_ranks).
 *
 * One record per communicator, written from any thread (the caller's,
 * the progress thread, the watch's thread, the path failover's rule) and
 * read from any: a byte per rank, set once (the first cause found stays),
 * and the time it was set. Recording a rank dead changes nothing else: it
 * fails no operation and closes nothing (whoever found it does what its
 * rule says); the shrink's agreement and weft_comm_failed_ranks read it. */

/* Record that @p rank of @p comm is dead and how it was found (@p how is
 * not WEFT_RANK_ALIVE). Returns true if this call recorded it, false if it
 * was known already (its first cause stays) or @p rank is not a peer.
 *
 * Who calls it: health/detect.c (the pid check, refused datagrams, silence
 * on the watch), the shrink for the ranks its agreement left out, and a
 * transport's own rule through its environment, env->peer_gone(env->ctx,
 * peer, how) (transports/transport.h; core/comm_init.c points it here):
 * the path failover's, a peer dark on every path and silent on the watch
 * for WEFT_PEER_DEAD seconds, is env->peer_gone(ctx, peer,
 * WEFT_RANK_UNREACHABLE). A rank on another host recorded dead stays so
 * for the shrink; on this host the pid check overrides it. */
bool weft_comm_mark_dead(struct weft_comm *comm, int rank, weft_rank_failure_t how);

/* How @p rank was found dead, or WEFT_RANK_ALIVE if it is not known dead. */
weft_rank_failure_t weft_comm_dead_how(const struct weft_comm *comm, int rank);

/* The ranks known dead, in the order they were found: up to @p cap into
 * @p out; returns how many are known. */
int weft_comm_dead_list(struct weft_comm *comm, weft_failed_rank_t *out, int cap);

/* "killed", "stopped", "unreachable", "excluded" ("alive" for none). */
const char *weft_dead_name(weft_rank_failure_t how);

#endif
