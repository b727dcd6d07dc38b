/*
 * shmem.c — the shared-memory module's regions (shmem.h): set up at
 * communicator creation, torn down with the communicator, and the one
 * wait helper the module's protocols poll with.
 *
 * weft_shmem_init, collective, same steps on every rank of a communicator
 * whose ranks are all on this host (the cards say so alike everywhere):
 *   1. allocate this rank's region (util/memfd.h) and describe it with the
 *      shm transport's reg op; a rank that cannot (no memory, a peer not
 *      served by shm, WEFT_SHMEM=0) says "no"
 *   2. allgather {ok, stage bytes, key}
 *   3. if every rank said yes with the same stage size: map every peer's
 *      region (weft_p2p_map: /proc/<pid>/fd, checked by generation)
 *   4. allgather "mapped"; unless every rank mapped every region, every
 *      rank unmaps and frees: the module is off for this communicator.
 */
#include "algorithms/shmem/shmem.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/comm.h"
#include "core/fail.h"
#include "core/p2p.h"
#include "core/tag.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/memfd.h"
#include "util/proc.h"
#include "util/settings.h"

struct shmem_card {
	int32_t ok;
	int32_t staged;
	uint64_t stage_bytes;
	struct weft_mr_key key;
};

static void shmem_free(struct weft_shmem *sh)
{
	if (!sh)
		return;
	/* Peers' regions are the transport's mappings, released with it. */
	if (sh->mine) {
		struct weft_err err;
		weft_err_clear(&err);
		weft_memfd_free(sh->mine, &err);
	}
	if (sh->tmp)
		munmap(sh->tmp, sh->tmp_bytes);
	free(sh->region);
	free(sh->pid);
	free(sh);
}

static void shmem_abort(struct weft_shmem *sh)
{
	if (sh && sh->mine)
		atomic_store_explicit(&shmem_ctl_of(sh, sh->rank)->state, SHMEM_ABORTED,
				      memory_order_release);
}

static bool all_shm(const struct weft_comm *comm)
{
	for (int p = 0; p < comm->nranks; p++)
		if (p != comm->rank && strcmp(weft_comm_peer_transport(comm, p), "shm") != 0)
			return false;
	return true;
}

/* Step 1: this rank's region, described for the peers. */
static bool setup_mine(struct weft_comm *comm, struct weft_shmem *sh, struct shmem_card *card)
{
	long on = 1, stage = SHMEM_STAGE_DEFAULT, staged = 0;
	weft_setting_long("WEFT_SHMEM", &on);
	weft_setting_long("WEFT_SHMEM_STAGED", &staged);
	sh->staged = staged != 0;
	card->staged = sh->staged;
	weft_setting_long("WEFT_SHMEM_STAGE", &stage);
	if (stage < 4096)
		stage = 4096;
	sh->stage_bytes = (size_t)stage / 4096 * 4096;
	card->stage_bytes = sh->stage_bytes;
	if (!on || !all_shm(comm))
		return false;
	/* Staging slots only where they are used: with 8 local ranks each
	 * rank maps 8 regions. */
	sh->region_len = SHMEM_STAGE + (sh->staged ? 4 * sh->stage_bytes : 0);
	sh->tmp_bytes = 16u << 10;
	sh->tmp = mmap(NULL, sh->tmp_bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (sh->tmp == MAP_FAILED) {
		sh->tmp = NULL;
		return false;
	}
	struct weft_err err;
	weft_err_clear(&err);
	if (weft_memfd_alloc(sh->region_len, &sh->mine, &err) != WEFT_SUCCESS)
		return false;
	struct weft_mr *mr;
	int peer = (comm->rank + 1) % comm->nranks;
	if (weft_p2p_reg(comm, peer, sh->mine, sh->region_len, &mr, &card->key) != WEFT_SUCCESS)
		return false;
	weft_p2p_dereg(comm, peer, mr);
	return true;
}

/* Step 3: every peer's region. */
static bool map_peers(struct weft_comm *comm, struct weft_shmem *sh, const struct shmem_card *all)
{
	sh->region[sh->rank] = sh->mine;
	for (int p = 0; p < sh->n; p++) {
		sh->pid[p] = comm->cards[p].pid;
		if (p == sh->rank)
			continue;
		void *addr;
		if (weft_p2p_map(comm, p, &all[p].key, &addr) != WEFT_SUCCESS)
			return false;
		sh->region[p] = addr;
	}
	return true;
}

/* Every rank set up its region, with the same settings (they decide the
 * protocol, which must be the same everywhere). */
static bool all_ok(const struct shmem_card *all, int n, const struct weft_shmem *sh)
{
	for (int p = 0; p < n; p++)
		if (!all[p].ok || all[p].stage_bytes != sh->stage_bytes ||
		    (all[p].staged != 0) != sh->staged)
			return false;
	return true;
}

static weft_status_t run_steps(struct weft_comm *comm, struct weft_shmem *sh,
			       struct shmem_card *all)
{
	struct shmem_card *me = &all[comm->rank];
	me->ok = setup_mine(comm, sh, me);
	weft_status_t st = weft_comm_allgather(comm, all, sizeof(*all));
	if (st != WEFT_SUCCESS)
		return st;
	bool ok = all_ok(all, sh->n, sh) && map_peers(comm, sh, all);
	for (int p = 0; p < sh->n; p++)
		all[p].ok = 0;
	me->ok = ok;
	st = weft_comm_allgather(comm, all, sizeof(*all));
	if (st != WEFT_SUCCESS)
		return st;
	for (int p = 0; p < sh->n; p++)
		if (!all[p].ok)
			return WEFT_ERR_NOT_SUPPORTED;
	return WEFT_SUCCESS;
}

static bool all_local(const struct weft_comm *comm)
{
	for (int p = 0; p < comm->nranks; p++)
		if (!weft_comm_same_host(comm, p))
			return false;
	return comm->nranks > 1;
}

weft_status_t weft_shmem_init(struct weft_comm *comm)
{
	if (!all_local(comm))
		return WEFT_SUCCESS;
	struct weft_shmem *sh = calloc(1, sizeof(*sh));
	struct shmem_card *all = calloc((size_t)comm->nranks, sizeof(*all));
	if (sh) {
		sh->n = comm->nranks;
		sh->rank = comm->rank;
		sh->region = calloc((size_t)sh->n, sizeof(*sh->region));
		sh->pid = calloc((size_t)sh->n, sizeof(*sh->pid));
	}
	if (!all || !sh || !sh->region || !sh->pid) {
		/* The others are in the allgather: fail it for them too. */
		free(all);
		shmem_free(sh);
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "shm algorithms: no memory");
	}
	weft_status_t st = run_steps(comm, sh, all);
	free(all);
	if (st == WEFT_SUCCESS) {
		comm->shmem = sh;
		comm->shmem_free = shmem_free;
		comm->shmem_abort = shmem_abort;
		comm->shmem_announce = weft_shmem_announce;
		weft_log(WEFT_LOG_INFO, WEFT_SUB_SHM,
			 "shm algorithms on: %d ranks, regions of %zu bytes (staging %zu bytes)",
			 sh->n, sh->region_len, sh->stage_bytes);
		return WEFT_SUCCESS;
	}
	/* Mapped peers' regions stay in the transport's cache until it closes. */
	shmem_free(sh);
	if (st == WEFT_ERR_NOT_SUPPORTED) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_SHM,
			 "shm algorithms off: not every rank could map every region");
		return WEFT_SUCCESS;
	}
	return st;
}

/* After this long without the flag, look at the peer (and again as often). */
#define SHMEM_STALL_S 0.1

void weft_shmem_ring(struct weft_comm *comm)
{
	if (!comm->wait.peers) /* no local peer ever sleeps: nothing to do */
		return;
	for (int p = 0; p < comm->shmem->n; p++)
		if (p != comm->rank)
			weft_p2p_wake(comm, p);
}

void weft_shmem_announce(struct weft_shmem *sh, uint64_t number, uint32_t word)
{
	sh->op = ((number + 1) << 32) | word; /* 0: nothing announced yet */
	atomic_store_explicit(&shmem_ctl_of(sh, sh->rank)->op, sh->op, memory_order_release);
}

/* Has peer @p r started a call of the number this rank is in, with other
 * arguments? Then fail as a mismatched message would (core/tag.h). A peer
 * at another number is only behind or ahead: not a mismatch. */
static bool mismatched(struct weft_comm *comm, int r, weft_status_t *st)
{
	struct weft_shmem *sh = comm->shmem;
	uint64_t peer = atomic_load_explicit(&shmem_ctl_of(sh, r)->op, memory_order_acquire);
	if ((peer >> 32) != (sh->op >> 32))
		return false;
	return weft_shmem_mismatch(comm, r, (uint32_t)peer, (uint32_t)sh->op, st);
}

bool weft_shmem_mismatch(struct weft_comm *comm, int r, uint32_t theirs, uint32_t mine,
			 weft_status_t *st)
{
	if (theirs == mine)
		return false;
	char why[256];
	weft_tag_explain(theirs, mine, r, why, sizeof(why));
	*st = weft_comm_fail(comm, WEFT_ERR_REMOTE, "shm: %s", why);
	return true;
}

bool weft_shmem_reached(struct weft_comm *comm, int r, _Atomic uint64_t *flag, uint64_t want,
			weft_status_t *st)
{
	struct weft_shmem *sh = comm->shmem;
	if (atomic_load_explicit(flag, memory_order_acquire) >= want) {
		if (flag == sh->stall_flag)
			sh->stall_flag = NULL;
		return true;
	}
	*st = WEFT_INPROGRESS;
	/* The stall is timed per flag: flags already reached on the way to
	 * this one (a loop over the peers) must not restart it. */
	if (flag != sh->stall_flag) {
		sh->stall_flag = flag;
		sh->stall_since = 0;
	}
	/* Every 16th poll: a rank that sleeps in its waits (WEFT_WAIT=block)
	 * polls a few dozen times a second, and must still find a dead or
	 * mismatched peer within a fraction of a second; the coarse clock
	 * costs a few nanoseconds. */
	if ((++sh->polls & 15) != 0 || mismatched(comm, r, st))
		return false;
	double now = weft_now_coarse();
	if (sh->stall_since == 0 || now - sh->stall_since < SHMEM_STALL_S) {
		if (sh->stall_since == 0)
			sh->stall_since = now;
		return false;
	}
	sh->stall_since = now;
	if (atomic_load_explicit(&shmem_ctl_of(sh, r)->state, memory_order_acquire) != SHMEM_ALIVE)
		*st = weft_comm_fail(comm, WEFT_ERR_REMOTE,
				     "shm: peer rank %d (pid %d) aborted its communicator", r,
				     sh->pid[r]);
	else if (!weft_pid_alive(sh->pid[r]))
		*st = weft_comm_fail(comm, WEFT_ERR_REMOTE, "shm: peer rank %d (pid %d) died", r,
				     sh->pid[r]);
	return false;
}
