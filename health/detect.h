/*
 * detect.h — is a rank of a communicator gone? The checks a rank can make
 * at once, without waiting for anyone:
 *
 *  - on this host, the pid check is the truth: a process that is gone (or
 *    a zombie) is dead for certain ("killed"); one stopped by a signal
 *    that has not answered the watch for WEFT_PEER_DEAD seconds is
 *    "stopped"; one that runs is alive, whatever else was heard;
 *  - on another host: a rank already recorded dead (core/fail.h: by these
 *    checks, by the path failover's rule) stays so; a rank whose host
 *    refused the watch's datagrams (ICMP port unreachable: its process
 *    exited, or it destroyed the communicator) is "killed"; one asked on
 *    the watch and silent for WEFT_PEER_DEAD seconds is "unreachable".
 *
 * What is found is recorded (weft_comm_mark_dead), so that
 * weft_comm_failed_ranks shows it.
 */
#ifndef WEFT_DETECT_H
#define WEFT_DETECT_H

#include <stdbool.h>

#include "weft.h"

struct weft_comm;

/* WEFT_PEER_DEAD, at most the communicator's timeout. */
double weft_detect_silence(const struct weft_comm *comm);

/* How rank @p r stands at @p now: WEFT_RANK_ALIVE or how it is gone.
 * Silence counts only when @p silence > 0 (seconds). The caller holds the
 * watch's lock (watch_int.h), or the communicator has no watch. */
weft_rank_failure_t weft_detect_locked(struct weft_comm *comm, int r, double now, double silence);

/* The same, taking the watch's lock. */
weft_rank_failure_t weft_detect(struct weft_comm *comm, int r, double now, double silence);

/* Every peer, with WEFT_PEER_DEAD as the silence (weft_comm_failed_ranks). */
void weft_detect_all(struct weft_comm *comm);

/* A rank on this host that runs but whose watch socket is closed: it has
 * left the communicator (destroyed it), and will never answer. With the
 * watch's lock held. */
bool weft_detect_left_locked(struct weft_comm *comm, int r);

#endif
