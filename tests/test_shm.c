/*
 * test_shm.c — the shared-memory transport, driven through the
 * point-to-point layer (weft_p2p_*) on 2..4 forked ranks with
 * WEFT_TRANSPORTS=shm: message sizes around the inline, slot and
 * single-copy boundaries, with and without reduction, many queued
 * messages, tag/length mismatches, a peer killed mid-transfer, abort, and
 * no /dev/shm leftovers.
 */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/p2p_msg.h"
#include "core/progress.h"
#include "harness.h"
#include "reduce/reduce.h"
#include "transports/shm/shm.h"
#include "util/settings.h"
#include "weft.h"

#define TIMEOUT_S 20.0
#define MAX_SIZES 16

/* Shared between the ranks and the parent, which reads it after the job
 * (harness_shared() is gone by then). */
struct shared {
	unsigned char id[WEFT_HS_ID_BYTES]; /* the communicator's (its segments' names) */
	bool have_id;
	int seg_seen_after_init; /* a rank found its segment name still in /dev/shm */
};

static struct shared *g_sh;

static uint8_t pattern(int from, int to, size_t size, size_t i)
{
	return (uint8_t)(from * 31 + to * 7 + size * 13 + i * 101 + (i >> 9));
}

static bool segment_exists(const unsigned char *id)
{
	char prefix[64];
	int len = snprintf(prefix, sizeof(prefix), "weft-");
	for (int i = 0; i < WEFT_HS_ID_BYTES; i++)
		len += snprintf(prefix + len, sizeof(prefix) - (size_t)len, "%02x", id[i]);
	DIR *d = opendir("/dev/shm");
	if (!d)
		return false;
	bool found = false;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
			found = true;
	closedir(d);
	return found;
}

static void note_secret(weft_comm_t comm)
{
	struct shared *sh = g_sh;
	memcpy(sh->id, comm->id, sizeof(sh->id));
	sh->have_id = true;
	if (segment_exists(comm->id))
		sh->seg_seen_after_init = 1;
}

/* Progress until every message is done, an error, or the deadline. */
static weft_status_t wait_all(weft_comm_t comm, struct weft_msg **msgs, int n, double limit_s)
{
	double end = harness_now() + limit_s;
	for (;;) {
		bool all = true;
		for (int i = 0; i < n; i++) {
			if (msgs[i]->done && msgs[i]->status != WEFT_SUCCESS)
				return msgs[i]->status;
			all &= msgs[i]->done;
		}
		if (all)
			return WEFT_SUCCESS;
		weft_status_t st = weft_comm_progress(comm);
		if (st != WEFT_SUCCESS && st != WEFT_INPROGRESS)
			return st;
		if (harness_now() > end)
			return WEFT_ERR_TIMEOUT;
	}
}

static size_t test_sizes(weft_comm_t comm, size_t *sizes)
{
	size_t slot = comm->chunk_bytes, n = 0;
	long cma_min = 256 << 10;
	weft_setting_long("WEFT_SHM_CMA_MIN", &cma_min);
	size_t base[] = {0,
			 1,
			 8,
			 31,
			 32,
			 33,
			 100,
			 slot - 1,
			 slot,
			 slot + 1,
			 5 * slot + 3,
			 (size_t)cma_min,
			 (size_t)cma_min + 4097,
			 (1u << 20) + 5};
	for (size_t i = 0; i < sizeof(base) / sizeof(base[0]) && n < MAX_SIZES; i++)
		sizes[n++] = base[i];
	return n;
}

/* Every rank sends every size to every other rank, all posted at once, then
 * checks what it got. Exercises ordering and interleaved progress too. */
static int body_sizes(weft_comm_t comm, int rank, int nranks, void *arg)
{
	note_secret(comm);
	size_t sizes[MAX_SIZES];
	size_t ns = test_sizes(comm, sizes);
	int nmsg = 2 * (nranks - 1) * (int)ns;
	struct weft_msg *msgs = calloc((size_t)nmsg, sizeof(*msgs));
	struct weft_msg **ptrs = calloc((size_t)nmsg, sizeof(*ptrs));
	int k = 0;
	for (int p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		for (size_t s = 0; s < ns; s++) {
			struct weft_msg *tx = &msgs[k], *rx = &msgs[k + 1];
			tx->len = rx->len = sizes[s];
			tx->buf = malloc(sizes[s] + 1);
			rx->buf = malloc(sizes[s] + 1);
			for (size_t i = 0; i < sizes[s]; i++)
				((uint8_t *)tx->buf)[i] = pattern(rank, p, sizes[s], i);
			memset(rx->buf, 0xee, sizes[s] + 1);
			tx->tag = rx->tag = weft_p2p_tag(7, (uint32_t)s);
			tx->unit = rx->unit = 1;
			ptrs[k] = tx;
			ptrs[k + 1] = rx;
			k += 2;
		}
	}
	/* Receives first on odd ranks, sends first on even ones. */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < nmsg; i++) {
			bool send = (i % 2 == 0);
			if (send != ((rank % 2 == 0) == (pass == 0)))
				continue;
			int peer = -1, c = i / (2 * (int)ns);
			for (int p = 0, seen = 0; p < nranks; p++)
				if (p != rank && seen++ == c)
					peer = p;
			weft_status_t st = send ? weft_p2p_isend_msg(comm, peer, ptrs[i])
						: weft_p2p_irecv_msg(comm, peer, ptrs[i]);
			if (st != WEFT_SUCCESS)
				return harness_fail_status(comm, st, "post %d", i);
		}
	harness_progress("waiting for %d messages", nmsg);
	weft_status_t st = wait_all(comm, ptrs, nmsg, 10);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "exchange");
	for (int i = 1; i < nmsg; i += 2) {
		int c = i / (2 * (int)ns), peer = -1;
		for (int p = 0, seen = 0; p < nranks; p++)
			if (p != rank && seen++ == c)
				peer = p;
		const uint8_t *b = ptrs[i]->buf;
		size_t len = ptrs[i]->len;
		for (size_t j = 0; j < len; j++)
			if (b[j] != pattern(peer, rank, len, j))
				return harness_fail(
				    "from rank %d, %zu bytes: byte %zu is %u, expected %u", peer,
				    len, j, b[j], pattern(peer, rank, len, j));
		if (b[len] != 0xee)
			return harness_fail("from rank %d, %zu bytes: wrote past the end", peer,
					    len);
		if (ptrs[i]->status != WEFT_SUCCESS)
			return harness_fail("from rank %d, %zu bytes: status %d", peer, len,
					    ptrs[i]->status);
	}
	for (int i = 0; i < nmsg; i++)
		free(ptrs[i]->buf);
	free(ptrs);
	free(msgs);
	return 0;
}

/* Ring of reducing receives: rank r sends its int32 vector to r+1 and
 * reduces what r-1 sends into its own. */
static int body_reduce(weft_comm_t comm, int rank, int nranks, void *arg)
{
	note_secret(comm);
	size_t sizes[MAX_SIZES];
	size_t ns = test_sizes(comm, sizes);
	weft_reduce_fn sum = weft_reduce_kernel(WEFT_INT32, WEFT_SUM);
	int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
	for (size_t s = 0; s < ns; s++) {
		size_t count = sizes[s] / 4, len = count * 4;
		int32_t *src = malloc(len + 4), *local = malloc(len + 4), *dst = malloc(len + 4);
		for (size_t i = 0; i < count; i++) {
			src[i] = (int32_t)(rank * 1000003 + i);
			local[i] = (int32_t)(i * 7 - rank);
		}
		dst[count] = 0x5a5a5a5a;
		struct weft_msg tx = {.buf = src, .len = len, .tag = s, .unit = 4};
		struct weft_msg rx = {
		    .buf = dst, .len = len, .tag = s, .unit = 4, .reduce = sum, .local = local};
		/* Also in place (buf == local) every other size. */
		if (s % 2) {
			memcpy(dst, local, len);
			rx.local = dst;
		}
		struct weft_msg *both[2] = {&tx, &rx};
		weft_status_t st = weft_p2p_irecv_msg(comm, prev, &rx);
		if (st == WEFT_SUCCESS)
			st = weft_p2p_isend_msg(comm, next, &tx);
		if (st == WEFT_SUCCESS)
			st = wait_all(comm, both, 2, 10);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "reduce %zu bytes", len);
		for (size_t i = 0; i < count; i++) {
			int32_t want = (int32_t)(prev * 1000003 + i) + (int32_t)(i * 7 - rank);
			if (dst[i] != want)
				return harness_fail("reduce %zu bytes: [%zu] = %d, expected %d",
						    len, i, dst[i], want);
		}
		if (dst[count] != 0x5a5a5a5a)
			return harness_fail("reduce %zu bytes: wrote past the end", len);
		free(src);
		free(local);
		free(dst);
	}
	return 0;
}

/* Many small and medium messages queued at once between ranks 0 and 1,
 * posted in opposite orders of sends and receives. */
static int body_ordering(weft_comm_t comm, int rank, int nranks, void *arg)
{
	enum { N = 300 };
	static struct weft_msg msgs[N];
	static struct weft_msg *ptrs[N];
	static uint32_t bufs[N][64];
	if (rank > 1)
		return 0;
	int peer = 1 - rank;
	for (int i = 0; i < N; i++) {
		size_t len = 4 * (size_t)(i % 64 + (i % 3 == 0 ? 0 : 1)) % 257;
		len -= len % 4;
		for (int j = 0; j < 64; j++)
			bufs[i][j] = rank == 0 ? (uint32_t)(i * 1000 + j) : 0xffffffffu;
		msgs[i] = (struct weft_msg){
		    .buf = bufs[i], .len = len, .tag = weft_p2p_tag(1, i), .unit = 1};
		ptrs[i] = &msgs[i];
		weft_status_t st = rank == 0 ? weft_p2p_isend_msg(comm, peer, &msgs[i])
					     : weft_p2p_irecv_msg(comm, peer, &msgs[i]);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "post %d", i);
	}
	weft_status_t st = wait_all(comm, ptrs, N, 10);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "ordering");
	for (int i = 0; rank == 1 && i < N; i++)
		for (size_t j = 0; j < msgs[i].len / 4; j++)
			if (bufs[i][j] != (uint32_t)(i * 1000 + j))
				return harness_fail("message %d word %zu: %u", i, j, bufs[i][j]);
	return 0;
}

/* arg selects the mismatch: 0 length, 1 tag, 2 length of a single-copy message. */
static int body_mismatch(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int kind = *(int *)arg;
	size_t big = 1 << 20;
	char *buf = calloc(1, 2 * big);
	struct weft_msg m = {.buf = buf, .len = kind == 2 ? big : 100, .tag = 5, .unit = 1};
	struct weft_msg *one[1] = {&m};
	if (rank == 0) {
		if (weft_p2p_isend_msg(comm, 1, &m) != WEFT_SUCCESS)
			return harness_fail("isend");
		/* The receiver fails; we must hear of it, not hang. */
		struct weft_msg r = {.buf = buf, .len = 8, .tag = 6, .unit = 1};
		struct weft_msg *rr[1] = {&r};
		weft_p2p_irecv_msg(comm, 1, &r);
		double t0 = harness_now();
		weft_status_t st = wait_all(comm, rr, 1, 5);
		if (st != WEFT_ERR_REMOTE)
			return harness_fail_status(comm, st, "sender: expected a remote error");
		if (harness_now() - t0 > 2)
			return harness_fail("sender: took %.2f s to notice", harness_now() - t0);
		return 0;
	}
	if (rank != 1)
		return 0;
	if (kind == 1)
		m.tag = 9;
	else
		m.len = kind == 2 ? 2 * big : 200;
	weft_p2p_irecv_msg(comm, 0, &m);
	weft_status_t st = wait_all(comm, one, 1, 5);
	if (st != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, st, "receiver: expected a remote error");
	const char *e = weft_comm_last_error(comm);
	if (!strstr(e, "tag") || !strstr(e, kind == 2 ? "1048576" : "100"))
		return harness_fail("receiver: error does not name both sides: %s", e);
	return 0;
}

/* Rank 0 dies in the middle of a big transfer; rank 1 must fail, fast.
 * arg: 0 rank 0 dies while sending, 1 rank 1 (the receiver) dies. */
static int body_kill(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int victim = *(int *)arg;
	size_t len = 8u << 20;
	char *buf = calloc(1, len);
	struct weft_msg m = {.buf = buf, .len = len, .tag = 1, .unit = 1};
	struct weft_msg *one[1] = {&m};
	/* Both ranks out of init first: rank 0 also hosts the bootstrap root. */
	uint64_t ping = 1, pong = 0;
	struct weft_msg ps = {.buf = &ping, .len = 8, .tag = 0, .unit = 1};
	struct weft_msg pr = {.buf = &pong, .len = 8, .tag = 0, .unit = 1};
	struct weft_msg *pp[2] = {&ps, &pr};
	weft_p2p_isend_msg(comm, 1 - rank, &ps);
	weft_p2p_irecv_msg(comm, 1 - rank, &pr);
	if (wait_all(comm, pp, 2, 5) != WEFT_SUCCESS || pong != 1)
		return harness_fail("ping");
	if (rank == victim) {
		if (rank == 0) {
			weft_p2p_isend_msg(comm, 1, &m);
			for (int i = 0; i < 3; i++)
				weft_comm_progress(comm);
		} else {
			/* Take part of the message, then die. */
			weft_p2p_irecv_msg(comm, 0, &m);
			usleep(20000);
			weft_comm_progress(comm);
		}
		raise(SIGKILL);
	}
	if (rank == 0) {
		weft_p2p_isend_msg(comm, 1, &m);
	} else {
		usleep(20000);
		weft_p2p_irecv_msg(comm, 0, &m);
	}
	double t0 = harness_now();
	weft_status_t st = wait_all(comm, one, 1, 5);
	double dt = harness_now() - t0;
	if (st != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, st, "survivor: expected a remote error");
	if (dt > 1.0)
		return harness_fail("survivor: took %.2f s to notice", dt);
	return 0;
}

static int body_abort(weft_comm_t comm, int rank, int nranks, void *arg)
{
	char buf[64];
	struct weft_msg m = {.buf = buf, .len = sizeof(buf), .tag = 3, .unit = 1};
	struct weft_msg *one[1] = {&m};
	weft_p2p_irecv_msg(comm, 1 - rank, &m);
	if (rank == 0) {
		weft_comm_abort(comm);
		weft_status_t st = wait_all(comm, one, 1, 5);
		if (st != WEFT_ERR_ABORTED)
			return harness_fail_status(comm, st, "aborter: expected aborted");
		return 0;
	}
	weft_status_t st = wait_all(comm, one, 1, 5);
	if (st != WEFT_ERR_REMOTE)
		return harness_fail_status(comm, st, "peer: expected a remote error");
	if (!strstr(weft_comm_last_error(comm), "abort"))
		return harness_fail("peer: %s", weft_comm_last_error(comm));
	return 0;
}

static const char *const env_shm[] = {"WEFT_TRANSPORTS=shm", NULL};
static const char *const env_eager[] = {"WEFT_TRANSPORTS=shm", "WEFT_SHM_CMA=0", NULL};
static const char *const env_tiny[] = {"WEFT_TRANSPORTS=shm", "WEFT_SHM_SLOTS=2",
				       "WEFT_SHM_SLOT_BYTES=4K", "WEFT_SHM_CMA_MIN=64K", NULL};

static void run_ok(int nranks, const char *const *env, harness_body_fn body, void *arg)
{
	memset(g_sh, 0, sizeof(*g_sh));
	struct harness_result res;
	harness_run(nranks, env, body, arg, TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	struct shared *sh = g_sh;
	ck_assert_msg(!sh->seg_seen_after_init, "segment still linked after init");
	ck_assert_msg(!sh->have_id || !segment_exists(sh->id), "/dev/shm/weft-* left behind");
}

START_TEST(sizes_np2)
{
	run_ok(2, env_shm, body_sizes, NULL);
}
END_TEST
START_TEST(sizes_np3_eager)
{
	run_ok(3, env_eager, body_sizes, NULL);
}
END_TEST
START_TEST(sizes_np4_tiny_slots)
{
	run_ok(4, env_tiny, body_sizes, NULL);
}
END_TEST
START_TEST(reduce_np2)
{
	run_ok(2, env_shm, body_reduce, NULL);
}
END_TEST
START_TEST(reduce_np3_eager)
{
	run_ok(3, env_eager, body_reduce, NULL);
}
END_TEST
START_TEST(reduce_np2_tiny_slots)
{
	run_ok(2, env_tiny, body_reduce, NULL);
}
END_TEST
START_TEST(ordering)
{
	run_ok(2, env_tiny, body_ordering, NULL);
}
END_TEST

START_TEST(mismatch)
{
	int kind = _i;
	run_ok(2, env_shm, body_mismatch, &kind);
}
END_TEST

START_TEST(peer_killed)
{
	/* 0: sender dies (eager), 1: receiver dies (eager),
	 * 2: sender dies (single copy), 3: receiver dies (single copy). */
	int victim = _i % 2;
	const char *const *env = _i < 2 ? env_eager : env_shm;
	memset(g_sh, 0, sizeof(*g_sh));
	struct harness_result res;
	harness_run(2, env, body_kill, &victim, TIMEOUT_S, &res);
	int survivor = 1 - victim;
	ck_assert_msg(res.rank[victim].end == HARNESS_SIGNALED, "victim did not die: %s",
		      res.summary);
	ck_assert_msg(res.rank[survivor].end == HARNESS_EXITED && res.rank[survivor].code == 0,
		      "survivor: %s", res.summary);
}
END_TEST

START_TEST(abort_peer)
{
	run_ok(2, env_shm, body_abort, NULL);
}
END_TEST

/* Ranks 0 and 1 share a host, rank 2 is alone: every rank still runs the
 * same shm init steps, and 0 <-> 1 go over shm, the rest over TCP. */
static int split_hosts(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	return setenv("WEFT_HOSTID", rank < 2 ? "test-shm-host-a" : "test-shm-host-b", 1) != 0;
}

static int body_split(weft_comm_t comm, int rank, int nranks, void *arg)
{
	note_secret(comm);
	for (int p = 0; p < nranks; p++) {
		bool want_shm = p != rank && rank < 2 && p < 2;
		if (p != rank && (comm->peers[p].tp->ops == &weft_tp_shm_ops) != want_shm)
			return harness_fail("peer %d: over %s", p, comm->peers[p].tp->ops->name);
	}
	return body_sizes(comm, rank, nranks, arg);
}

/* Shared pages this rank has mapped (its segment and its FIFOs in the
 * peers'), in KiB, from /proc/self/status. */
static long rss_shmem_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "RssShmem: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

static int body_budget(weft_comm_t comm, int rank, int nranks, void *arg)
{
	note_secret(comm);
	long kib = rss_shmem_kib();
	/* 7 inbound + 7 outbound FIFOs of 8 x 128 KiB, plus headers, and the
	 * 8 regions of the shm AllReduce (algorithms/shmem/: 16 KiB each
	 * without staging slots, the default). */
	if (kib > 20 * 1024)
		return harness_fail("RssShmem %ld KiB with %d local ranks", kib, nranks);
	/* Rank 0 hosts the bootstrap root: it leaves only once every rank has
	 * finished its init (each sends it a word over shm). */
	uint64_t words[8] = {0};
	struct weft_msg m[8];
	struct weft_msg *ptrs[8];
	int n = 0;
	for (int p = 0; p < nranks && p < 8; p++) {
		if (p == rank || (rank != 0 && p != 0))
			continue;
		m[n] = (struct weft_msg){.buf = &words[p], .len = 8, .tag = 1, .unit = 1};
		ptrs[n] = &m[n];
		weft_status_t st = rank == 0 ? weft_p2p_irecv_msg(comm, p, &m[n])
					     : weft_p2p_isend_msg(comm, 0, &m[n]);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "post");
		n++;
	}
	weft_status_t st = wait_all(comm, ptrs, n, 10);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "gather to rank 0");
	return 0;
}

START_TEST(memory_budget_np8)
{
	run_ok(8, env_shm, body_budget, NULL);
}
END_TEST

START_TEST(split_hosts_np3)
{
	memset(g_sh, 0, sizeof(*g_sh));
	struct harness_job job = {
	    .nranks = 3, .body = body_split, .timeout_s = TIMEOUT_S, .before_init = split_hosts};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	ck_assert_msg(!g_sh->have_id || !segment_exists(g_sh->id), "/dev/shm/weft-* left behind");
}
END_TEST

static Suite *shm_suite(void)
{
	Suite *s = suite_create("shm");
	TCase *tc = tcase_create("shm");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, sizes_np2);
	tcase_add_test(tc, sizes_np3_eager);
	tcase_add_test(tc, sizes_np4_tiny_slots);
	tcase_add_test(tc, reduce_np2);
	tcase_add_test(tc, reduce_np3_eager);
	tcase_add_test(tc, reduce_np2_tiny_slots);
	tcase_add_test(tc, ordering);
	tcase_add_loop_test(tc, mismatch, 0, 3);
	tcase_add_loop_test(tc, peer_killed, 0, 4);
	tcase_add_test(tc, abort_peer);
	tcase_add_test(tc, split_hosts_np3);
	tcase_add_test(tc, memory_budget_np8);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (g_sh == MAP_FAILED)
		return EXIT_FAILURE;
	SRunner *sr = srunner_create(shm_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
