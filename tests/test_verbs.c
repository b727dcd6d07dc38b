/*
 * test_verbs.c — what is the verbs transport's own, over the test double
 * for libibverbs (tests/fake_ibverbs, WEFT_IBVERBS_LIB) and the fake sysfs
 * tree: 300 messages on a ring of 4 landing slots wrap the slot and credit
 * counters dozens of times, the large ones by rendezvous (a descriptor
 * each), and a job leaves no file of the double behind. The slot is 16 KiB
 * (WEFT_IB_SLOT_BYTES) so that multi-slot messages stay small.
 * test_verbs_setup.c has what the QPs were told and when verbs serves; the
 * point-to-point contract over verbs (sizes around the eager and
 * rendezvous boundaries, reduction through more bounce pieces than there
 * are, order, a slow receiver, mismatches, a peer killed on one host and
 * on two, abort) is the conformance suite's (tests/conformance/: verbs).
 */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <stdlib.h>

#include "fake_ibverbs/fake_ibverbs_api.h"
#include "verbs_p2p.h"

/* ---- credits wrapping the ring ---- */

#define NQUEUED 300

/* Every message takes one landing slot (rendezvous ones a header-only
 * slot), so 300 of them wrap a 4-slot ring 75 times; one in 50 is larger
 * than the slot and takes a descriptor. */
static int body_ring_wraps(weft_comm_t comm, int rank, int nranks, void *arg)
{
	static size_t lens[NQUEUED];
	for (size_t i = 0; i < NQUEUED; i++)
		lens[i] = i % 50 == 49 ? 3 * SLOT + i : (i * 37) % 3001;
	if (check_verbs_conns(comm) || p2p_exchange(comm, lens, NQUEUED, 9, WAIT_S))
		return 1;
	struct weft_rma_conn *c = &conn_to(comm, 1 - rank)->rc;
	if (c->txr.head < NQUEUED || c->rxr.head != c->txr.head)
		return harness_fail("%llu slots sent, %llu received: the ring did not wrap",
				    (unsigned long long)c->txr.head,
				    (unsigned long long)c->rxr.head);
	if (c->d_head < NQUEUED / 50)
		return harness_fail("%llu descriptors taken: the large messages did not go by "
				    "rendezvous",
				    (unsigned long long)c->d_head);
	return 0;
}

START_TEST(test_ring_wraps)
{
	run_ok(2, env_with(NULL), body_ring_wraps, NULL);
}
END_TEST

/* ---- nothing left in /dev/shm ---- */

START_TEST(test_no_files_left)
{
	struct harness_result res;
	harness_run(3, env_with(NULL), body_sizes, NULL, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
	verbs_find_paths();
	void *h = dlopen(verbs_fake_path, RTLD_NOW);
	ck_assert_msg(h, "%s", dlerror());
	weft_fake_files_fn files = (weft_fake_files_fn)dlsym(h, WEFT_FAKE_FILES);
	ck_assert_ptr_nonnull(files);
	for (int r = 0; r < 3; r++)
		ck_assert_msg(files(res.rank[r].pid) == 0, "rank %d left %d files", r,
			      files(res.rank[r].pid));
}
END_TEST

static Suite *verbs_suite(void)
{
	Suite *s = suite_create("verbs");
	TCase *tc = tcase_create("data");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, test_ring_wraps);
	tcase_add_test(tc, test_no_files_left);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(verbs_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
