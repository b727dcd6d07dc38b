/*
 * shm.c — shared-memory transport: segments, connections, abort. The data
 * path is in shm_fifo.c; the layout and protocol are described in shm.h.
 *
 * comm_init is collective and runs the same bootstrap steps on every rank,
 * local peers or not:
 *   1. create, size, map and pre-fault our segment (first touches cost
 *      ~12 us per page here: never on the hot path)
 *   2. allgather "segment ok"
 *   3. map the control page and our FIFO (pre-populated) of every local
 *      peer's segment; probe process_vm_readv on each peer and publish in
 *      our inbound FIFO whether we can read that sender (cma_ok)
 *   4. allgather "mapped ok", then shm_unlink our segment: from here on a
 *      crash leaves nothing behind in /dev/shm.
 */
#define _GNU_SOURCE
#include "transports/shm/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "util/log.h"
#include "util/settings.h"

static size_t round_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

static void seg_name(char *buf, size_t len, uint64_t secret, int rank)
{
	snprintf(buf, len, "/weft-%016llx-%d", (unsigned long long)secret, rank);
}

static int shm_score(struct weft_tp_comm *base, int peer)
{
	struct shm_tc *tc = weft_container_of(base, struct shm_tc, base);
	struct weft_comm *comm = base->comm;
	if (peer == comm->rank || !tc->seg || !weft_comm_same_host(comm, peer))
		return 0;
	return 100;
}

/* Slots and slot size from the settings, shrunk so that one rank's FIFOs
 * (inbound and outbound, 2 * (nlocal - 1) of them) fit SHM_FIFO_BUDGET. */
static void choose_geometry(struct shm_tc *tc)
{
	long slots = 8, bytes = 128 << 10;
	weft_setting_long("WEFT_SHM_SLOTS", &slots);
	weft_setting_long("WEFT_SHM_SLOT_BYTES", &bytes);
	if (slots < 2)
		slots = 2;
	if (slots > 1024)
		slots = 1024;
	if (bytes < SHM_PAGE)
		bytes = SHM_PAGE;
	bytes = (long)round_up((size_t)bytes, SHM_PAGE);
	size_t nfifo = tc->nlocal > 1 ? 2 * (size_t)(tc->nlocal - 1) : 0;
	long want_slots = slots, want_bytes = bytes;
	while (nfifo * (size_t)slots * (size_t)bytes > SHM_FIFO_BUDGET && slots > 2)
		slots--;
	while (nfifo * (size_t)slots * (size_t)bytes > SHM_FIFO_BUDGET && bytes > SHM_PAGE)
		bytes /= 2;
	if (slots != want_slots || bytes != want_bytes)
		weft_log(WEFT_LOG_INFO, WEFT_SUB_SHM,
			 "%d local ranks: FIFOs shrunk from %ld x %ld to %ld x %ld bytes to stay "
			 "within %lu MiB",
			 tc->nlocal, want_slots, want_bytes, slots, bytes, SHM_FIFO_BUDGET >> 20);
	tc->nslots = (uint32_t)slots;
	tc->slot_bytes = (size_t)bytes;
	tc->fifo_hdr =
	    round_up(sizeof(struct shm_fifo) + (size_t)slots * sizeof(struct shm_slot), SHM_PAGE);
	tc->fifo_stride = tc->fifo_hdr + (size_t)slots * (size_t)bytes;

	long cma = 1, cma_min = 256 << 10;
	weft_setting_long("WEFT_SHM_CMA", &cma);
	weft_setting_long("WEFT_SHM_CMA_MIN", &cma_min);
	tc->cma = cma != 0;
	tc->cma_min = cma_min > 0 ? (size_t)cma_min : 1;
}

/* Step 1: our segment, pre-faulted. */
static weft_status_t create_segment(struct shm_tc *tc)
{
	struct weft_comm *comm = tc->base.comm;
	char name[64];
	seg_name(name, sizeof(name), comm->secret, comm->rank);
	tc->seg_len = SHM_PAGE + (size_t)tc->nlocal * tc->fifo_stride;
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return weft_comm_fail_errno(comm, errno, "shm: shm_open(%s)", name);
	weft_status_t st = WEFT_SUCCESS;
	if (ftruncate(fd, (off_t)tc->seg_len) != 0) {
		st =
		    weft_comm_fail_errno(comm, errno, "shm: ftruncate(%s, %zu)", name, tc->seg_len);
		goto out_unlink;
	}
	void *seg = mmap(NULL, tc->seg_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (seg == MAP_FAILED) {
		st = weft_comm_fail_errno(comm, errno, "shm: mmap(%s, %zu)", name, tc->seg_len);
		goto out_unlink;
	}
	/* Reserve, then pre-fault, the control page and the FIFOs peers will
	 * write; our own entry stays a hole. Reserving first turns a full
	 * /dev/shm into an error here instead of a SIGBUS later. */
	int err = posix_fallocate(fd, 0, SHM_PAGE);
	for (int s = 0; s < tc->nlocal && !err; s++)
		if (s != tc->my_local)
			err =
			    posix_fallocate(fd, (off_t)shm_fifo_off(tc, s), (off_t)tc->fifo_stride);
	if (err) {
		st = weft_comm_fail_errno(comm, err, "shm: reserving %zu bytes in /dev/shm",
					  tc->seg_len);
		munmap(seg, tc->seg_len);
		goto out_unlink;
	}
	memset(seg, 0, SHM_PAGE);
	for (int s = 0; s < tc->nlocal; s++)
		if (s != tc->my_local)
			memset(shm_fifo_at(tc, seg, s), 0, tc->fifo_stride);
	tc->seg = seg;
	tc->ctl = seg;
	tc->ctl->magic = SHM_MAGIC;
	tc->ctl->self_addr = (uint64_t)(uintptr_t)seg;
	tc->ctl->pid = (int32_t)getpid();
	tc->ctl->nslots = tc->nslots;
	tc->ctl->slot_bytes = tc->slot_bytes;
	tc->ctl->nfifo = (uint32_t)tc->nlocal;
	atomic_store_explicit(&tc->ctl->state, SHM_STATE_ALIVE, memory_order_release);
	close(fd);
	return WEFT_SUCCESS;

out_unlink:
	shm_unlink(name);
	close(fd);
	return st;
}

/* Can we read @p c's peer's memory? Probe once at init: afterwards a
 * failure is an error, not a reason to change protocol mid-stream. */
static bool cma_probe(struct shm_conn *c)
{
	uint64_t magic = 0;
	struct iovec local = {&magic, sizeof(magic)};
	struct iovec remote = {(void *)(uintptr_t)c->peer_ctl->self_addr, sizeof(magic)};
	ssize_t n = process_vm_readv(c->pid, &local, 1, &remote, 1, 0);
	if (n == (ssize_t)sizeof(magic) && magic == SHM_MAGIC)
		return true;
	weft_log(WEFT_LOG_INFO, WEFT_SUB_SHM,
		 "single-copy (process_vm_readv) from rank %d (pid %d) unavailable: %s; "
		 "large messages from it take the eager path",
		 c->tc->rank_of[c->lpeer], (int)c->pid, n < 0 ? strerror(errno) : "short read");
	return false;
}

/* Step 3 for one peer: its control page and our FIFO in its segment. */
static weft_status_t map_peer(struct shm_tc *tc, struct shm_conn *c)
{
	struct weft_comm *comm = tc->base.comm;
	int peer = tc->rank_of[c->lpeer];
	char name[64];
	seg_name(name, sizeof(name), comm->secret, peer);
	int fd = shm_open(name, O_RDWR, 0);
	if (fd < 0)
		return weft_comm_fail_errno(comm, errno, "shm: shm_open(%s) of rank %d", name,
					    peer);
	weft_status_t st = WEFT_SUCCESS;
	c->peer_ctl = mmap(NULL, SHM_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (c->peer_ctl == MAP_FAILED) {
		c->peer_ctl = NULL;
		st = weft_comm_fail_errno(comm, errno, "shm: mmap of rank %d's control page", peer);
		goto out_close;
	}
	if (c->peer_ctl->magic != SHM_MAGIC || c->peer_ctl->nslots != tc->nslots ||
	    c->peer_ctl->slot_bytes != tc->slot_bytes ||
	    c->peer_ctl->nfifo != (uint32_t)tc->nlocal) {
		st = weft_comm_fail(
		    comm, WEFT_ERR_INVALID_ARG,
		    "shm: rank %d uses %u slots x %llu bytes for %u local ranks, this "
		    "rank %u x %zu for %d (set WEFT_SHM_SLOTS and WEFT_SHM_SLOT_BYTES "
		    "alike on every rank)",
		    peer, c->peer_ctl->nslots, (unsigned long long)c->peer_ctl->slot_bytes,
		    c->peer_ctl->nfifo, tc->nslots, tc->slot_bytes, tc->nlocal);
		goto out_close;
	}
	c->pid = c->peer_ctl->pid;
	c->peer_fifo_len = tc->fifo_stride;
	off_t off = (off_t)shm_fifo_off(tc, tc->my_local);
	c->peer_fifo_map = mmap(NULL, c->peer_fifo_len, PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_POPULATE, fd, off);
	if (c->peer_fifo_map == MAP_FAILED) {
		c->peer_fifo_map = NULL;
		st = weft_comm_fail_errno(comm, errno, "shm: mmap of the FIFO to rank %d", peer);
		goto out_close;
	}
	c->tx = c->peer_fifo_map;
	c->tx_data = (unsigned char *)c->peer_fifo_map + tc->fifo_hdr;
	c->rx = shm_fifo_at(tc, tc->seg, c->lpeer);
	c->rx_data = (unsigned char *)c->rx + tc->fifo_hdr;
	c->rx->cma_ok = tc->cma && cma_probe(c);

out_close:
	close(fd);
	return st;
}

static weft_status_t allgather_status(struct weft_comm *comm, int32_t *all, weft_status_t mine)
{
	all[comm->rank] = (int32_t)mine;
	return weft_bootstrap_allgather(comm->bs, all, sizeof(int32_t), &comm->err);
}

/* The first local peer whose step failed, or -1. */
static int first_failed_peer(struct shm_tc *tc, const int32_t *all)
{
	for (int l = 0; l < tc->nlocal; l++)
		if (l != tc->my_local && all[tc->rank_of[l]] != WEFT_SUCCESS)
			return tc->rank_of[l];
	return -1;
}

static void shm_comm_fini(struct weft_tp_comm *base);

static weft_status_t shm_comm_init(struct weft_comm *comm, struct weft_tp_comm **out)
{
	*out = NULL;
	struct shm_tc *tc = calloc(1, sizeof(*tc));
	int32_t *all = calloc((size_t)comm->nranks, sizeof(int32_t));
	struct weft_card *me = &comm->cards[comm->rank];
	weft_status_t st = WEFT_SUCCESS, bst;
	if (tc) {
		tc->base.ops = &weft_tp_shm_ops;
		tc->base.comm = comm;
		tc->nlocal = (int)me->local_count;
		tc->my_local = (int)me->local_rank;
		tc->rank_of = calloc((size_t)tc->nlocal, sizeof(int));
		tc->conns = calloc((size_t)tc->nlocal, sizeof(struct shm_conn));
	}
	if (!tc || !all || !tc->rank_of || !tc->conns) {
		/* Still join the collectives below, so the others fail cleanly. */
		st = weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "shm: no memory");
	} else {
		for (int r = 0; r < comm->nranks; r++)
			if (r == comm->rank || weft_comm_same_host(comm, r))
				tc->rank_of[comm->cards[r].local_rank] = r;
		choose_geometry(tc);
		tc->base.chunk_bytes = tc->slot_bytes;
		if (tc->nlocal > 1) {
			st = create_segment(tc);
			if (st == WEFT_SUCCESS && tc->cma) {
				tc->bounce =
				    mmap(NULL, SHM_BOUNCE_BYTES, PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
				if (tc->bounce == MAP_FAILED) {
					tc->bounce = NULL;
					st =
					    weft_comm_fail_errno(comm, errno, "shm: bounce buffer");
				}
			}
		}
	}

	/* Step 2. */
	int32_t dummy[1];
	int32_t *gbuf = all ? all : dummy; /* without memory the allgather fails anyway */
	bst = all ? allgather_status(comm, gbuf, st) : WEFT_ERR_NO_MEMORY;
	if (bst != WEFT_SUCCESS)
		goto out_fail;
	if (st == WEFT_SUCCESS && tc->nlocal > 1) {
		int bad = first_failed_peer(tc, all);
		if (bad >= 0)
			st = weft_comm_fail(comm, WEFT_ERR_REMOTE,
					    "shm: local rank %d could not create its segment", bad);
	}
	/* Step 3. */
	for (int l = 0; st == WEFT_SUCCESS && tc->nlocal > 1 && l < tc->nlocal; l++) {
		if (l == tc->my_local)
			continue;
		struct shm_conn *c = &tc->conns[l];
		c->base.ops = &weft_tp_shm_ops;
		c->base.tc = &tc->base;
		c->base.peer = tc->rank_of[l];
		c->tc = tc;
		c->lpeer = l;
		st = map_peer(tc, c);
	}
	/* Step 4. */
	bst = allgather_status(comm, all, st);
	if (tc && tc->seg) {
		char name[64];
		seg_name(name, sizeof(name), comm->secret, comm->rank);
		shm_unlink(name);
	}
	if (bst != WEFT_SUCCESS)
		goto out_fail;
	if (st == WEFT_SUCCESS && tc->nlocal > 1) {
		int bad = first_failed_peer(tc, all);
		if (bad >= 0)
			st = weft_comm_fail(comm, WEFT_ERR_REMOTE,
					    "shm: local rank %d could not map the shared segments",
					    bad);
	}
	if (st != WEFT_SUCCESS)
		goto out_fail;
	for (int l = 0; l < tc->nlocal; l++) {
		struct shm_conn *c = &tc->conns[l];
		if (l != tc->my_local)
			c->tx_cma = tc->cma && c->tx->cma_ok;
	}
	free(all);
	weft_log(WEFT_LOG_INFO, WEFT_SUB_SHM,
		 "%d local ranks, FIFOs of %u x %zu bytes, single-copy %s from %zu bytes",
		 tc->nlocal, tc->nslots, tc->slot_bytes, tc->cma ? "on" : "off", tc->cma_min);
	*out = &tc->base;
	return WEFT_SUCCESS;

out_fail:
	free(all);
	if (tc)
		shm_comm_fini(&tc->base);
	return st != WEFT_SUCCESS ? st : bst;
}

static void shm_comm_fini(struct weft_tp_comm *base)
{
	struct shm_tc *tc = weft_container_of(base, struct shm_tc, base);
	if (tc->ctl) { /* a peer still waiting on us hears of it at its next stall check */
		int alive = SHM_STATE_ALIVE;
		atomic_compare_exchange_strong(&tc->ctl->state, &alive, SHM_STATE_CLOSED);
	}
	for (int l = 0; tc->conns && l < tc->nlocal; l++) {
		struct shm_conn *c = &tc->conns[l];
		if (c->peer_fifo_map)
			munmap(c->peer_fifo_map, c->peer_fifo_len);
		if (c->peer_ctl)
			munmap(c->peer_ctl, SHM_PAGE);
	}
	if (tc->seg)
		munmap(tc->seg, tc->seg_len);
	if (tc->bounce)
		munmap(tc->bounce, SHM_BOUNCE_BYTES);
	free(tc->conns);
	free(tc->rank_of);
	free(tc);
}

static weft_status_t shm_connect(struct weft_tp_comm *base, int peer, struct weft_conn **out)
{
	struct shm_tc *tc = weft_container_of(base, struct shm_tc, base);
	struct weft_comm *comm = base->comm;
	if (peer < 0 || peer >= comm->nranks || peer == comm->rank || !tc->seg ||
	    !weft_comm_same_host(comm, peer))
		return weft_comm_fail(comm, WEFT_ERR_INTERNAL, "shm: cannot connect to rank %d",
				      peer);
	struct shm_conn *c = &tc->conns[comm->cards[peer].local_rank];
	c->connected = true; /* everything was mapped in comm_init */
	*out = &c->base;
	return WEFT_SUCCESS;
}

static void shm_abort(struct weft_tp_comm *base)
{
	struct shm_tc *tc = weft_container_of(base, struct shm_tc, base);
	if (tc->ctl)
		atomic_store_explicit(&tc->ctl->state, SHM_STATE_ABORTED, memory_order_release);
	for (int l = 0; l < tc->nlocal; l++) {
		if (l == tc->my_local)
			continue;
		tc->conns[l].broken = true;
		weft_tp_shm_fail_all(&tc->conns[l], WEFT_ERR_ABORTED);
	}
}

const struct weft_tp_ops weft_tp_shm_ops = {
    .size = sizeof(struct weft_tp_ops),
    .name = "shm",
    .score = shm_score,
    .comm_init = shm_comm_init,
    .comm_fini = shm_comm_fini,
    .connect = shm_connect,
    .isend = weft_tp_shm_isend,
    .irecv = weft_tp_shm_irecv,
    .progress = weft_tp_shm_progress,
    .abort = shm_abort,
};
