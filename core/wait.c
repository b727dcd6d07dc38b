/*
 * wait.c — WEFT_WAIT: how a rank waits for its peers.
 *
 * spin   poll progress until the operation is done (as before: yield now
 *        and then, nap when the host has more ranks than cores). The
 *        fastest wait when every rank has a core of its own.
 * block  poll for WEFT_WAIT_SPIN (a budget of microseconds without an
 *        event), then sleep in the kernel until there is work: epoll over
 *        the sockets whose messages are queued (SO_RCVLOWAT so that a large
 *        fragment wakes the rank once, not per packet), a local peer's
 *        bell (the shm transport: a flag in shared memory and a FIFO the
 *        peer writes one byte to when it finds the flag raised), and an
 *        eventfd for this process's other threads (a post while the
 *        progress thread sleeps, weft_comm_abort, a revoke, the watch's
 *        verdict). A sleeping rank leaves its core to the threads that
 *        compute; the price is the wake-up, tens of microseconds here.
 * auto   block when the machine is oversubscribed: its ranks' compute
 *        threads (each rank's weft_config_t.compute_threads, which the
 *        torch backend sets to torch.get_num_threads(); else
 *        OMP_NUM_THREADS; else 1), summed over the ranks that run on this
 *        kernel (the same boot id: network namespaces, as on the test
 *        fabric, share the cores), outnumber the CPUs in the union of
 *        their affinity masks. Otherwise spin.
 *
 * The cards carry each rank's WEFT_WAIT, compute threads and affinity
 * mask, so every rank of a host reaches the same verdict for each of its
 * local peers: a peer that never sleeps is never woken, and a job that
 * spins pays nothing for the bells (not even a fence).
 *
 * Sleeping without missing a wake-up (weft_wait_sleep, the lock held):
 *   1. arm: every transport that serves a peer makes sure that whatever
 *      could move next is announced: shm raises its "asleep" flag (then
 *      a seq_cst fence; a peer stores its data, fences and reads the flag:
 *      one of the two sees the other). A transport with no wait object
 *      (ofi, verbs) refuses: the caller naps instead.
 *   2. one more progress pass: what raced with the flags moves now; the
 *      activity counter (posts, completions, tasks started and finished,
 *      weft_wait_moved) says whether anything did.
 *   3. settle: each transport checks that nothing is left it could do at
 *      once (shm: an arrived slot, free slots for a queued send, a
 *      single-copy read under way) and sets its descriptors' interest to
 *      what is queued now (level-triggered, so data already there wakes
 *      the rank at once).
 *   4. epoll_wait, the lock released, at most WAIT_LIVENESS_S (peers that
 *      die are noticed by the transports' stall checks, which need a pass
 *      now and then) or until the operation's deadline; then disarm.
 * One thread of a rank sleeps at a time (armed); a second one naps.
 */
#define _GNU_SOURCE
#include "core/wait.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/fail.h"
#include "core/progress.h"
#include "transports/transport.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/settings.h"

/* The longest sleep: a pass at least this often keeps the stall checks of
 * the transports (a dead peer) and the timeouts going. */
#define WAIT_LIVENESS_S 0.1
/* The longest sleep while the gate holds sends for the pacer's clock. */
#define WAIT_HELD_S 1e-3

static const char *const mode_names[] = {"spin", "block", "auto"};

static weft_status_t parse_mode(struct weft_comm *comm, int32_t *mode)
{
	const char *s = weft_setting_str("WEFT_WAIT");
	for (int32_t m = 0; m < 3; m++)
		if (strcasecmp(s, mode_names[m]) == 0) {
			*mode = m;
			return WEFT_SUCCESS;
		}
	return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
			      "WEFT_WAIT=%s: expected spin, block or auto", s);
}

/* OMP_NUM_THREADS's first level ("4" or "4,2"), else 1: not ours to
 * refuse, so anything else reads as 1. */
static int32_t omp_threads(void)
{
	const char *s = getenv("OMP_NUM_THREADS");
	char *end;
	long v = s ? strtol(s, &end, 10) : 0;
	if (!s || end == s || (*end && *end != ',') || v < 1 || v > 1 << 20)
		return 1;
	return (int32_t)v;
}

weft_status_t weft_wait_card(struct weft_wait_card *card, int config_threads,
			     struct weft_comm *comm)
{
	memset(card, 0, sizeof(*card));
	weft_status_t st = parse_mode(comm, &card->mode);
	if (st != WEFT_SUCCESS)
		return st;
	card->compute_threads = config_threads > 0 ? config_threads : omp_threads();
	cpu_set_t set;
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) != 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		for (long c = 0; c < n && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, &set);
	}
	for (int c = 0; c < WEFT_WAIT_CPU_BYTES * 8 && c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			card->cpus[c / 8] |= (uint8_t)(1u << (c % 8));
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (f) {
		if (!fgets(card->machine, sizeof(card->machine), f))
			card->machine[0] = '\0';
		card->machine[strcspn(card->machine, "\n")] = '\0';
		fclose(f);
	}
	return WEFT_SUCCESS;
}

/* Does rank @p r share this rank's CPUs? The same kernel (boot id), or,
 * where that is unknown, the same host. Network namespaces on one machine
 * (a test fabric) are hosts of their own but share its cores. */
static bool same_machine(const struct weft_comm *comm, int r)
{
	const char *a = comm->cards[r].wait.machine, *b = comm->cards[comm->rank].wait.machine;
	if (!a[0] || !b[0])
		return weft_comm_same_host(comm, r);
	return strncmp(a, b, sizeof(comm->cards[r].wait.machine)) == 0;
}

/* Do the compute threads of the ranks on this machine outnumber the CPUs
 * they may run on (the union of their masks)? */
static bool host_oversubscribed(const struct weft_comm *comm, long *threads, int *cpus)
{
	uint8_t mask[WEFT_WAIT_CPU_BYTES] = {0};
	*threads = 0;
	for (int r = 0; r < comm->nranks; r++) {
		if (!same_machine(comm, r))
			continue;
		const struct weft_wait_card *c = &comm->cards[r].wait;
		*threads += c->compute_threads > 0 ? c->compute_threads : 1;
		for (int i = 0; i < WEFT_WAIT_CPU_BYTES; i++)
			mask[i] |= c->cpus[i];
	}
	*cpus = 0;
	for (int i = 0; i < WEFT_WAIT_CPU_BYTES; i++)
		*cpus += __builtin_popcount(mask[i]);
	return *cpus > 0 && *threads > *cpus;
}

bool weft_wait_rank_blocks(const struct weft_comm *comm, int r)
{
	int32_t mode = comm->cards[r].wait.mode;
	return mode == WEFT_WAIT_BLOCK || (mode == WEFT_WAIT_AUTO && comm->wait.host_over);
}

static weft_status_t open_set(struct weft_comm *comm)
{
	struct weft_wait *w = &comm->wait;
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0)
		return weft_comm_fail_errno(comm, errno, "WEFT_WAIT: epoll_create1");
	w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->evfd < 0)
		return weft_comm_fail_errno(comm, errno, "WEFT_WAIT: eventfd");
	struct epoll_event ev = {.events = EPOLLIN};
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &ev) != 0)
		return weft_comm_fail_errno(comm, errno, "WEFT_WAIT: epoll_ctl");
	return WEFT_SUCCESS;
}

weft_status_t weft_wait_init(struct weft_comm *comm)
{
	struct weft_wait *w = &comm->wait;
	w->epfd = w->evfd = -1;
	double spin_us = 50;
	if (!weft_setting_double("WEFT_WAIT_SPIN", &spin_us) || spin_us < 0 || spin_us > 1e6)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "WEFT_WAIT_SPIN=%s: expected microseconds from 0 to 1000000",
				      weft_setting_str("WEFT_WAIT_SPIN"));
	w->spin_s = spin_us * 1e-6;
	long threads;
	int cpus;
	w->host_over = host_oversubscribed(comm, &threads, &cpus);
	w->block = weft_wait_rank_blocks(comm, comm->rank);
	for (int r = 0; r < comm->nranks && !w->peers; r++)
		w->peers = r != comm->rank && weft_comm_same_host(comm, r) &&
			   weft_wait_rank_blocks(comm, r);
	weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT,
		 "WEFT_WAIT=%s: %s (this machine: %ld compute threads on %d CPUs%s)",
		 mode_names[comm->cards[comm->rank].wait.mode],
		 w->block ? "waits sleep after the spin budget" : "waits spin", threads, cpus,
		 w->host_over ? ", oversubscribed" : "");
	return w->block ? open_set(comm) : WEFT_SUCCESS;
}

void weft_wait_fini(struct weft_comm *comm)
{
	struct weft_wait *w = &comm->wait;
	if (w->evfd >= 0)
		close(w->evfd);
	if (w->epfd >= 0)
		close(w->epfd);
	w->evfd = w->epfd = -1;
}

void weft_wait_wake(struct weft_comm *comm)
{
	int fd = comm->wait.evfd;
	uint64_t one = 1;
	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is full, so a wake is pending anyway. */
	}
}

/* Does transport @p i serve any peer? Known once the transports are
 * chosen; asked at each sleep, so counted once. */
static bool serves(struct weft_comm *comm, size_t i)
{
	struct weft_wait *w = &comm->wait;
	if (!w->used_known) {
		for (int p = 0; p < comm->nranks; p++)
			for (size_t k = 0; comm->peers[p].tp && k < comm->ntps && k < 32; k++)
				if (comm->tps[k] == comm->peers[p].tp)
					w->used |= 1u << k;
		w->used_known = true;
	}
	return i < 32 && (w->used >> i) & 1u;
}

enum wait_step { STEP_ARM, STEP_SETTLE, STEP_DISARM };

/* Step @p step over every transport that serves a peer; false at the
 * first that refuses. */
static bool each_tp(struct weft_comm *comm, enum wait_step step)
{
	for (size_t i = 0; i < comm->ntps; i++) {
		struct weft_tp *tp = comm->tps[i];
		if (!tp || !serves(comm, i))
			continue;
		if (step == STEP_DISARM)
			tp->ops->wait.disarm(tp);
		else if (!(step == STEP_ARM ? tp->ops->wait.arm(tp) : tp->ops->wait.settle(tp)))
			return false;
	}
	return true;
}

/* How long to sleep at most: until @p deadline, the liveness bound, or
 * the pacer's next release while the gate holds sends; in ms, >= 1. */
static int sleep_ms(const struct weft_comm *comm, double deadline)
{
	double t = comm->held_links ? WAIT_HELD_S : WAIT_LIVENESS_S;
	if (deadline > 0) {
		double left = deadline - weft_now();
		t = left < t ? left : t;
	}
	int ms = (int)(t * 1e3 + 0.999);
	return ms < 1 ? 1 : ms;
}

static void sleep_unlocked(struct weft_comm *comm, int ms)
{
	struct weft_wait *w = &comm->wait;
	struct epoll_event ev[8];
	weft_comm_unlock(comm);
	uint64_t t0 = weft_now_ns();
	int n = epoll_wait(w->epfd, ev, 8, ms);
	atomic_fetch_add_explicit(&w->slept_ns, weft_now_ns() - t0, memory_order_relaxed);
	weft_comm_lock(comm);
	atomic_fetch_add_explicit(&w->sleeps, 1, memory_order_relaxed);
	if (n == 0)
		atomic_fetch_add_explicit(&w->timeouts, 1, memory_order_relaxed);
	uint64_t count;
	if (n > 0 && read(w->evfd, &count, sizeof(count)) == (ssize_t)sizeof(count))
		atomic_fetch_add_explicit(&w->woken, 1, memory_order_relaxed);
}

bool weft_wait_sleep(struct weft_comm *comm, double deadline)
{
	struct weft_wait *w = &comm->wait;
	bool idle = false;
	if (!w->block || atomic_load(&w->armed))
		return false;
	atomic_store(&w->armed, true);
	bool can = each_tp(comm, STEP_ARM);
	if (can) {
		uint64_t before = w->activity;
		weft_comm_progress(comm); /* its errors land in the tasks */
		idle = w->activity == before && !comm->aborted &&
		       !atomic_load(&comm->abort_requested) && each_tp(comm, STEP_SETTLE);
	}
	if (idle)
		sleep_unlocked(comm, sleep_ms(comm, deadline));
	each_tp(comm, STEP_DISARM);
	atomic_store(&w->armed, false);
	return can;
}
