/* wait.h — how a rank waits (WEFT_WAIT): spin, or spin for a bounded
 * budget and then sleep in the kernel until a peer's data or another
 * thread wakes it (wait.c says how, and why). */
#ifndef WEFT_WAIT_H
#define WEFT_WAIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "weft.h"

struct weft_comm;
struct weft_card;

/* WEFT_WAIT, as asked (and carried in the cards, so every rank knows
 * which local peers may sleep). */
enum weft_wait_mode {
	WEFT_WAIT_SPIN = 0,
	WEFT_WAIT_BLOCK,
	WEFT_WAIT_AUTO, /* block when the host's ranks' compute threads outnumber its cores */
};

/* The card's bytes for the affinity mask: the first 1024 CPUs. */
#define WEFT_WAIT_CPU_BYTES 128

/* What a card says about how its rank waits (struct weft_card.wait). */
struct weft_wait_card {
	int32_t mode;			   /* enum weft_wait_mode */
	int32_t compute_threads;	   /* threads that compute beside it (>= 1) */
	uint8_t cpus[WEFT_WAIT_CPU_BYTES]; /* its affinity mask, bit c for CPU c */
	/* The kernel it runs on (/proc/sys/kernel/random/boot_id): ranks of one
	 * kernel share its CPUs whatever their host ids (network namespaces,
	 * WEFT_HOSTID) say. */
	char machine[40];
};

struct weft_wait {
	bool block;	/* this rank sleeps after the spin budget */
	bool host_over; /* this machine's ranks' compute threads outnumber its cores */
	bool peers;	/* some local peer may sleep: stores it waits for must wake it */
	double spin_s;	/* WEFT_WAIT_SPIN */
	int epfd;	/* the wait set: transports' descriptors and evfd; -1 unless block */
	int evfd;	/* weft_wait_wake: another thread (a post, an abort) */
	/* A thread of this rank sleeps, or is about to: one at a time. Read
	 * without the lock by a thread that may have to wake it. */
	_Atomic bool armed;
	uint32_t used; /* bit i: comm->tps[i] serves some peer (counted at the first sleep) */
	bool used_known;
	/* Counted by what a sleeper must not miss: posts, completions, tasks
	 * started and finished (weft_wait_moved, core/comm.h). */
	uint64_t activity;
	/* Sleeps taken, those that ran out their time (nothing woke them),
	 * and those another thread's wake cut short (for tests and weft-topo). */
	_Atomic uint64_t sleeps, timeouts, woken;
	/* Nanoseconds spent asleep in epoll_wait on purpose: a gap in a wait
	 * loop that this covers is a wait, not a stall (health/slowdet.c). */
	_Atomic uint64_t slept_ns;
};

/* This rank's card fields: WEFT_WAIT (a bad value fails, naming it), the
 * compute threads (@p config_threads if > 0, else OMP_NUM_THREADS, else 1)
 * and the affinity mask. */
weft_status_t weft_wait_card(struct weft_wait_card *card, int config_threads,
			     struct weft_comm *comm);

/* After the cards are exchanged: decide whether this rank, and each local
 * peer, sleeps when it waits (the same answer on every rank of the host),
 * and set up the wait set when this rank does; before the transports,
 * which add their descriptors to it. Release with fini. */
weft_status_t weft_wait_init(struct weft_comm *comm);
void weft_wait_fini(struct weft_comm *comm);

/* After init: does local rank @p r sleep when it waits? */
bool weft_wait_rank_blocks(const struct weft_comm *comm, int r);

/* Called by a wait loop whose operations saw no event for the spin
 * budget, with the communicator's lock held: sleep until a transport's
 * descriptor, a local peer's bell or weft_wait_wake says there is work, at
 * most until @p deadline (weft_now() seconds; 0: a short bound). The lock is
 * released while asleep. Returns false without sleeping when this rank
 * cannot sleep now (a transport without a wait object, another thread
 * asleep): the caller naps instead. */
bool weft_wait_sleep(struct weft_comm *comm, double deadline);

/* Wake whichever thread of this rank sleeps in weft_wait_sleep (any thread,
 * any time, no lock: a post from another thread, an abort, a revoke, the
 * watch's verdict). */
void weft_wait_wake(struct weft_comm *comm);

#endif
