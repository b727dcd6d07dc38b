/*
 * shm.c — shared-memory transport: segments, connections, abort. The data
 * path is in shm_fifo.c; the layout and protocol are described in shm.h.
 *
 * init is collective and runs the same allgather steps on every rank,
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

#include "transports/common/tp_stubs.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/settings.h"

static size_t round_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

/* /weft-ID-RANK: the communicator's random id (never the key, from which
 * it is not derived), so that a listing of /dev/shm tells nothing, and a
 * name no one else could have made first. */
static void seg_name(char *buf, size_t len, const unsigned char *id, int rank)
{
	int n = snprintf(buf, len, "/weft-");
	for (int i = 0; i < WEFT_HS_ID_BYTES && n > 0 && (size_t)n < len; i++)
		n += snprintf(buf + n, len - (size_t)n, "%02x", id[i]);
	if (n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "-%d", rank);
}

/* Slots and slot size from the settings, shrunk so that one rank's FIFOs
 * (inbound and outbound, 2 * (nlocal - 1) of them) fit SHM_FIFO_BUDGET. */
static void choose_geometry(struct shm_tp *tp)
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
	size_t nfifo = tp->nlocal > 1 ? 2 * (size_t)(tp->nlocal - 1) : 0;
	long want_slots = slots, want_bytes = bytes;
	while (nfifo * (size_t)slots * (size_t)bytes > SHM_FIFO_BUDGET && slots > 2)
		slots--;
	while (nfifo * (size_t)slots * (size_t)bytes > SHM_FIFO_BUDGET && bytes > SHM_PAGE)
		bytes /= 2;
	if (slots != want_slots || bytes != want_bytes)
		weft_log(WEFT_LOG_INFO, WEFT_SUB_SHM,
			 "%d local ranks: FIFOs shrunk from %ld x %ld to %ld x %ld bytes to stay "
			 "within %lu MiB",
			 tp->nlocal, want_slots, want_bytes, slots, bytes, SHM_FIFO_BUDGET >> 20);
	tp->nslots = (uint32_t)slots;
	tp->slot_bytes = (size_t)bytes;
	tp->fifo_hdr = round_up(
	    sizeof(struct shm_fifo) + (size_t)slots * sizeof(struct weft_slot_hdr), SHM_PAGE);
	tp->fifo_stride = tp->fifo_hdr + (size_t)slots * (size_t)bytes;

	long cma = 1, cma_min = 256 << 10;
	weft_setting_long("WEFT_SHM_CMA", &cma);
	weft_setting_long("WEFT_SHM_CMA_MIN", &cma_min);
	tp->cma = cma != 0;
	tp->cma_min = cma_min > 0 ? (size_t)cma_min : 1;
}

/* Step 1: our segment, pre-faulted. */
static weft_status_t create_segment(struct shm_tp *tp)
{
	const struct weft_tp_env *env = tp->base.env;
	char name[80];
	seg_name(name, sizeof(name), env->id, env->rank);
	tp->seg_len = SHM_PAGE + (size_t)tp->nlocal * tp->fifo_stride;
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return weft_tp_fail_errno(env, errno, "shm: shm_open(%s)", name);
	weft_status_t st = WEFT_SUCCESS;
	if (ftruncate(fd, (off_t)tp->seg_len) != 0) {
		st = weft_tp_fail_errno(env, errno, "shm: ftruncate(%s, %zu)", name, tp->seg_len);
		goto out_unlink;
	}
	void *seg = mmap(NULL, tp->seg_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (seg == MAP_FAILED) {
		st = weft_tp_fail_errno(env, errno, "shm: mmap(%s, %zu)", name, tp->seg_len);
		goto out_unlink;
	}
	/* Reserve, then pre-fault, the control page and the FIFOs peers will
	 * write; our own entry stays a hole. Reserving first turns a full
	 * /dev/shm into an error here instead of a SIGBUS later. */
	int err = posix_fallocate(fd, 0, SHM_PAGE);
	for (int s = 0; s < tp->nlocal && !err; s++)
		if (s != tp->my_local)
			err =
			    posix_fallocate(fd, (off_t)shm_fifo_off(tp, s), (off_t)tp->fifo_stride);
	if (err) {
		st = weft_tp_fail_errno(env, err, "shm: reserving %zu bytes in /dev/shm",
					tp->seg_len);
		munmap(seg, tp->seg_len);
		goto out_unlink;
	}
	memset(seg, 0, SHM_PAGE);
	for (int s = 0; s < tp->nlocal; s++)
		if (s != tp->my_local)
			memset(shm_fifo_at(tp, seg, s), 0, tp->fifo_stride);
	tp->seg = seg;
	tp->ctl = seg;
	tp->ctl->magic = SHM_MAGIC;
	tp->ctl->self_addr = (uint64_t)(uintptr_t)seg;
	tp->ctl->pid = (int32_t)getpid();
	tp->ctl->nslots = tp->nslots;
	tp->ctl->slot_bytes = tp->slot_bytes;
	tp->ctl->nfifo = (uint32_t)tp->nlocal;
	atomic_store_explicit(&tp->ctl->state, SHM_STATE_ALIVE, memory_order_release);
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
		 c->tp->rank_of[c->lpeer], (int)c->pid, n < 0 ? strerror(errno) : "short read");
	return false;
}

/* Step 3 for one peer: its control page and our FIFO in its segment. */
static weft_status_t map_peer(struct shm_tp *tp, struct shm_conn *c)
{
	const struct weft_tp_env *env = tp->base.env;
	int peer = tp->rank_of[c->lpeer];
	char name[80];
	seg_name(name, sizeof(name), env->id, peer);
	int fd = shm_open(name, O_RDWR | O_NOFOLLOW, 0);
	if (fd < 0)
		return weft_tp_fail_errno(env, errno, "shm: shm_open(%s) of rank %d", name, peer);
	weft_status_t st = WEFT_SUCCESS;
	/* Whose is it, and is it what rank `peer` made? Someone else's object
	 * under that name is refused before a byte of it is mapped. */
	struct stat sb;
	size_t want = SHM_PAGE + (size_t)tp->nlocal * tp->fifo_stride;
	if (fstat(fd, &sb) != 0) {
		st = weft_tp_fail_errno(env, errno, "shm: fstat(%s) of rank %d", name, peer);
		goto out_close;
	}
	if (sb.st_uid != geteuid() || (sb.st_mode & 077) || (size_t)sb.st_size != want) {
		st = weft_tp_fail(
		    env, WEFT_ERR_INVALID_ARG,
		    "shm: %s, rank %d's segment, is not what it should be (owner uid "
		    "%u, mode %03o, %lld bytes; expected uid %u, mode 600, %zu bytes): "
		    "set WEFT_SHM_SLOTS and WEFT_SHM_SLOT_BYTES alike on every rank, or "
		    "another user made it",
		    name, peer, (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 0777),
		    (long long)sb.st_size, (unsigned)geteuid(), want);
		goto out_close;
	}
	c->peer_ctl = mmap(NULL, SHM_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (c->peer_ctl == MAP_FAILED) {
		c->peer_ctl = NULL;
		st = weft_tp_fail_errno(env, errno, "shm: mmap of rank %d's control page", peer);
		goto out_close;
	}
	if (c->peer_ctl->magic != SHM_MAGIC || c->peer_ctl->nslots != tp->nslots ||
	    c->peer_ctl->slot_bytes != tp->slot_bytes ||
	    c->peer_ctl->nfifo != (uint32_t)tp->nlocal) {
		st = weft_tp_fail(
		    env, WEFT_ERR_INVALID_ARG,
		    "shm: rank %d uses %u slots x %llu bytes for %u local ranks, this "
		    "rank %u x %zu for %d (set WEFT_SHM_SLOTS and WEFT_SHM_SLOT_BYTES "
		    "alike on every rank)",
		    peer, c->peer_ctl->nslots, (unsigned long long)c->peer_ctl->slot_bytes,
		    c->peer_ctl->nfifo, tp->nslots, tp->slot_bytes, tp->nlocal);
		goto out_close;
	}
	c->pid = c->peer_ctl->pid;
	c->peer_fifo_len = tp->fifo_stride;
	off_t off = (off_t)shm_fifo_off(tp, tp->my_local);
	c->peer_fifo_map = mmap(NULL, c->peer_fifo_len, PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_POPULATE, fd, off);
	if (c->peer_fifo_map == MAP_FAILED) {
		c->peer_fifo_map = NULL;
		st = weft_tp_fail_errno(env, errno, "shm: mmap of the FIFO to rank %d", peer);
		goto out_close;
	}
	c->tx = c->peer_fifo_map;
	c->tx_data = (unsigned char *)c->peer_fifo_map + tp->fifo_hdr;
	c->rx = shm_fifo_at(tp, tp->seg, c->lpeer);
	c->rx_data = (unsigned char *)c->rx + tp->fifo_hdr;
	c->rx->cma_ok = tp->cma && cma_probe(c);
	if (env->peers[peer].sleeps)
		st = weft_tp_shm_bell_open(c, name);

out_close:
	close(fd);
	return st;
}

static weft_status_t allgather_status(const struct weft_tp_env *env, int32_t *all,
				      weft_status_t mine)
{
	all[env->rank] = (int32_t)mine;
	return env->allgather(env->ctx, all, sizeof(int32_t));
}

/* The first local peer whose step failed, or -1. */
static int first_failed_peer(struct shm_tp *tp, const int32_t *all)
{
	for (int l = 0; l < tp->nlocal; l++)
		if (l != tp->my_local && all[tp->rank_of[l]] != WEFT_SUCCESS)
			return tp->rank_of[l];
	return -1;
}

/* The bandwidth of the copies the slots make, on this machine, now: the
 * properties' figure (a second of memcpy of pre-faulted buffers costs
 * about a millisecond here). */
static double measure_copy(void)
{
	const size_t bytes = 1u << 20;
	char *a = malloc(2 * bytes);
	if (!a)
		return 0;
	memset(a, 1, 2 * bytes);
	double t0 = weft_now();
	for (int i = 0; i < 4; i++)
		memcpy(a + (i % 2 ? 0 : bytes), a + (i % 2 ? bytes : 0), bytes);
	double t = weft_now() - t0;
	free(a);
	return t > 0 ? 4.0 * (double)bytes / t : 0;
}

static void shm_fini(struct weft_tp *base);

/* Step 1: the tables, the geometry, our segment and the bounce buffer. */
static weft_status_t setup_local(const struct weft_tp_env *env, struct shm_tp *tp)
{
	tp->base.ops = &weft_tp_shm_ops;
	tp->base.env = env;
	tp->nlocal = env->local_size;
	tp->my_local = env->local_rank;
	tp->rank_of = calloc((size_t)tp->nlocal, sizeof(int));
	tp->conns = calloc((size_t)tp->nlocal, sizeof(struct shm_conn));
	for (int l = 0; tp->conns && l < tp->nlocal; l++)
		tp->conns[l].bell_wr = -1;
	if (!tp->rank_of || !tp->conns || weft_tp_pool_init(&tp->reqs, sizeof(struct shm_req)))
		return weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "shm: no memory");
	for (int r = 0; r < env->nranks; r++)
		if (r == env->rank || weft_tp_same_host(env, r))
			tp->rank_of[env->peers[r].local_rank] = r;
	choose_geometry(tp);
	tp->base.chunk_bytes = tp->slot_bytes;
	if (tp->nlocal == 1)
		return WEFT_SUCCESS;
	tp->copy_Bps = measure_copy();
	weft_status_t st = create_segment(tp);
	if (st == WEFT_SUCCESS && env->wait_fd >= 0) { /* this rank may sleep: its bell */
		char name[80];
		seg_name(name, sizeof(name), env->id, env->rank);
		st = weft_tp_shm_bell_create(tp, name);
		tp->bell_made = true;
	}
	if (st != WEFT_SUCCESS || !tp->cma)
		return st;
	tp->bounce.cap = SHM_BOUNCE_BYTES;
	tp->bounce.buf = mmap(NULL, SHM_BOUNCE_BYTES, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (tp->bounce.buf == MAP_FAILED) {
		tp->bounce.buf = NULL;
		return weft_tp_fail_errno(env, errno, "shm: bounce buffer");
	}
	return WEFT_SUCCESS;
}

/* Step 3: every local peer's control page and our FIFO in its segment. */
static weft_status_t map_peers(struct shm_tp *tp)
{
	weft_status_t st = WEFT_SUCCESS;
	for (int l = 0; st == WEFT_SUCCESS && tp->nlocal > 1 && l < tp->nlocal; l++) {
		if (l == tp->my_local)
			continue;
		struct shm_conn *c = &tp->conns[l];
		c->base.ops = &weft_tp_shm_ops;
		c->base.tp = &tp->base;
		c->base.peer = tp->rank_of[l];
		c->tp = tp;
		c->lpeer = l;
		c->txr.nslots = c->rxr.nslots = tp->nslots;
		c->rxr.credit_batch = 1; /* a store per slot costs nothing here */
		st = map_peer(tp, c);
	}
	return st;
}

/* Steps 2 and 4: did every local peer get as far? */
static weft_status_t check_peers(const struct weft_tp_env *env, struct shm_tp *tp, int32_t *all,
				 weft_status_t st, const char *what)
{
	weft_status_t bst = allgather_status(env, all, st);
	if (bst != WEFT_SUCCESS)
		return bst;
	int bad = st == WEFT_SUCCESS && tp->nlocal > 1 ? first_failed_peer(tp, all) : -1;
	if (bad >= 0)
		return weft_tp_fail(env, WEFT_ERR_REMOTE, "shm: local rank %d could not %s", bad,
				    what);
	return st;
}

static weft_status_t shm_init(const struct weft_tp_env *env, struct weft_tp **out)
{
	*out = NULL;
	struct shm_tp *tp = calloc(1, sizeof(*tp));
	if (tp)
		tp->bell_rd = -1; /* fini closes what is >= 0 */
	int32_t *all = calloc((size_t)env->nranks, sizeof(int32_t));
	int32_t none[1];
	weft_status_t st;
	if (!tp || !all) /* still join the collectives below, so the others fail cleanly */
		st = weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "shm: no memory");
	else
		st = setup_local(env, tp);
	if (!all) { /* the allgather cannot work without a buffer: fail it here */
		env->allgather(env->ctx, none, 0);
		goto out_fail;
	}
	st = check_peers(env, tp, all, st, "create its segment");
	if (st == WEFT_SUCCESS)
		st = map_peers(tp);
	weft_status_t mapped = check_peers(env, tp, all, st, "map the shared segments");
	if (tp && tp->seg) { /* from here on a crash leaves nothing in /dev/shm */
		char name[80], bell[128];
		seg_name(name, sizeof(name), env->id, env->rank);
		shm_unlink(name);
		weft_tp_shm_bell_path(bell, sizeof(bell), name);
		if (tp->bell_made)
			unlink(bell);
	}
	if ((st = mapped) != WEFT_SUCCESS)
		goto out_fail;
	for (int l = 0; l < tp->nlocal; l++)
		if (l != tp->my_local)
			tp->conns[l].tx_cma = tp->cma && tp->conns[l].tx->cma_ok;
	free(all);
	weft_log(WEFT_LOG_INFO, WEFT_SUB_SHM,
		 "%d local ranks, FIFOs of %u x %zu bytes, single-copy %s from %zu bytes, copies "
		 "at %.1f GB/s",
		 tp->nlocal, tp->nslots, tp->slot_bytes, tp->cma ? "on" : "off", tp->cma_min,
		 tp->copy_Bps / 1e9);
	*out = &tp->base;
	return WEFT_SUCCESS;

out_fail:
	free(all);
	if (tp)
		shm_fini(&tp->base);
	return st != WEFT_SUCCESS ? st : WEFT_ERR_NO_MEMORY;
}

static void shm_fini(struct weft_tp *base)
{
	struct shm_tp *tp = weft_container_of(base, struct shm_tp, base);
	if (tp->ctl) { /* a peer still waiting on us hears of it at its next stall check */
		int alive = SHM_STATE_ALIVE;
		atomic_compare_exchange_strong(&tp->ctl->state, &alive, SHM_STATE_CLOSED);
	}
	for (int l = 0; tp->conns && l < tp->nlocal; l++) {
		struct shm_conn *c = &tp->conns[l];
		weft_tp_shm_unmap_all(c);
		if (c->bell_wr >= 0)
			close(c->bell_wr);
		if (c->peer_fifo_map)
			munmap(c->peer_fifo_map, c->peer_fifo_len);
		if (c->peer_ctl)
			munmap(c->peer_ctl, SHM_PAGE);
	}
	if (tp->seg)
		munmap(tp->seg, tp->seg_len);
	if (tp->bounce.buf)
		munmap(tp->bounce.buf, SHM_BOUNCE_BYTES);
	if (tp->bell_rd >= 0)
		close(tp->bell_rd);
	weft_tp_pool_fini(&tp->reqs);
	free(tp->conns);
	free(tp->rank_of);
	free(tp);
}

static int shm_score(struct weft_tp *base, int peer)
{
	struct shm_tp *tp = weft_container_of(base, struct shm_tp, base);
	const struct weft_tp_env *env = base->env;
	if (peer == env->rank || !tp->seg || !weft_tp_same_host(env, peer))
		return 0;
	return 100;
}

static weft_status_t shm_connect(struct weft_tp *base, int peer, struct weft_conn **out)
{
	struct shm_tp *tp = weft_container_of(base, struct shm_tp, base);
	const struct weft_tp_env *env = base->env;
	if (peer < 0 || peer >= env->nranks || peer == env->rank || !tp->seg ||
	    !weft_tp_same_host(env, peer))
		return weft_tp_fail(env, WEFT_ERR_INTERNAL, "shm: cannot connect to rank %d", peer);
	struct shm_conn *c = &tp->conns[env->peers[peer].local_rank];
	c->connected = true; /* everything was mapped in init */
	*out = &c->base;
	return WEFT_SUCCESS;
}

static void shm_abort(struct weft_tp *base)
{
	struct shm_tp *tp = weft_container_of(base, struct shm_tp, base);
	if (tp->ctl)
		atomic_store_explicit(&tp->ctl->state, SHM_STATE_ABORTED, memory_order_release);
	for (int l = 0; l < tp->nlocal; l++) {
		if (l == tp->my_local)
			continue;
		tp->conns[l].broken = true;
		weft_tp_shm_fail_all(&tp->conns[l], WEFT_ERR_ABORTED);
		weft_tp_shm_ring(&tp->conns[l]); /* a peer asleep sees our state at once */
	}
}

/* Latency: a cache line handed from one core to another and back is
 * about this on the machines measured (docs/benchmarks.md, "What was measured"); shared memory
 * gives no cheaper way to know it before the first message. Bandwidth:
 * the copy measured at init. */
#define SHM_LATENCY_S 0.4e-6

static void shm_props(struct weft_tp *base, int peer, struct weft_tp_props *out)
{
	struct shm_tp *tp = weft_container_of(base, struct shm_tp, base);
	*out = (struct weft_tp_props){
	    .latency_s = SHM_LATENCY_S,
	    .bandwidth_Bps = tp->copy_Bps,
	    .ordered = true,
	    .source = tp->copy_Bps > 0 ? "measured" : "default",
	};
}

static void shm_describe(struct weft_tp *base, int peer, char *buf, size_t len)
{
	struct shm_tp *tp = weft_container_of(base, struct shm_tp, base);
	const struct shm_conn *c = &tp->conns[base->env->peers[peer].local_rank];
	snprintf(buf, len, "shm(%u x %zu B slots%s)", tp->nslots, tp->slot_bytes,
		 c->tx_cma ? ", single-copy" : "");
}

static const struct weft_setting shm_settings[] = {
    {"WEFT_SHM_SLOTS", "8", "slots in each shared-memory FIFO"},
    {"WEFT_SHM_SLOT_BYTES", "128K", "bytes per shared-memory FIFO slot (the pipelining chunk)"},
    {"WEFT_SHM_CMA", "1", "use single-copy process_vm_readv for large shared-memory messages"},
    {"WEFT_SHM_CMA_MIN", "256K", "smallest message that takes the single-copy path"},
};

const struct weft_tp_ops weft_tp_shm_ops = {
    .size = sizeof(struct weft_tp_ops),
    .name = "shm",
    .settings = shm_settings,
    .nsettings = sizeof(shm_settings) / sizeof(shm_settings[0]),
    .life = {.init = shm_init, .fini = shm_fini, .abort = shm_abort},
    .conn = {.score = shm_score, .connect = shm_connect, .connected = weft_tp_no_connected},
    .msg = {.isend = weft_tp_shm_isend,
	    .irecv = weft_tp_shm_irecv,
	    .progress = weft_tp_shm_progress},
    .mem = {.reg = weft_tp_shm_reg,
	    .dereg = weft_tp_shm_dereg,
	    .map = weft_tp_shm_map,
	    .unmap = weft_tp_shm_unmap},
    .rma = WEFT_TP_NO_RMA_OPS,
    .prop = {.props = shm_props, .describe = shm_describe, .paths = weft_tp_no_paths},
    .signal = {.signals = weft_tp_no_signals, .pace = weft_tp_no_pace},
    .wait = {.arm = weft_tp_shm_arm,
	     .settle = weft_tp_shm_settle,
	     .disarm = weft_tp_shm_disarm,
	     .wake = weft_tp_shm_wake},
};
