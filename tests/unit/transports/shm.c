/*
 * test_shm.c — what is the shared-memory transport's own: its segments
 * (unlinked once every rank mapped them, none left in /dev/shm after the
 * job), the FIFOs' memory on 8 local ranks, and a job where only some
 * pairs share a host. The point-to-point contract over shm (sizes around
 * its inline, slot and single-copy boundaries, reduction, ordering,
 * mismatches, a peer killed or closing) is the conformance suite's
 * (tests/conformance/: the shm, shm-nocma and shm-tiny configurations).
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/comm.h"
#include "harness.h"
#include "p2p_exchange.h"
#include "transports/shm/shm.h"
#include "weft.h"

#define TIMEOUT_S 20.0

/* Shared between the ranks and the parent, which reads it after the job
 * (harness_shared() is gone by then). */
struct shared {
	unsigned char id[WEFT_HS_ID_BYTES]; /* the communicator's (its segments' names) */
	bool have_id;
	int seg_seen_after_init; /* a rank found its segment name still in /dev/shm */
};

static struct shared *g_sh;

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

static const char *const env_shm[] = {"WEFT_TRANSPORTS=shm", NULL};

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
	/* Inline, several slots, single copy (256 KiB and up by default). */
	size_t slot = comm->chunk_bytes;
	const size_t sizes[] = {0, 1, 100, slot + 1, (256u << 10) + 4097, (1u << 20) + 5};
	return p2p_exchange(comm, sizes, sizeof(sizes) / sizeof(sizes[0]), 7, 10);
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
	weft_status_t st = p2p_wait(comm, ptrs, n, 10);
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
