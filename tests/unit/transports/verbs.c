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

/*
 * weft_mem_register's region stays registered with the transport: ten
 * AllReduces of a registered 2 MiB buffer make no registration on the
 * double (its ibv_reg_mr count does not move), where the same loop on an
 * unregistered buffer registers per message; deregistering gives it back.
 */
#define REG_COUNT (512u << 10) /* floats: 2 MiB, past the slots: rendezvous */

static int reg_loop(weft_comm_t comm, float *buf, weft_fake_mr_counts_fn counts, uint64_t *made)
{
	uint64_t before, after, dummy;
	counts(&before, &dummy);
	for (int i = 0; i < 10; i++) {
		weft_status_t st =
		    weft_allreduce(WEFT_IN_PLACE, buf, REG_COUNT, WEFT_FLOAT32, WEFT_SUM, comm);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "allreduce %d", i);
	}
	counts(&after, &dummy);
	*made = after - before;
	return 0;
}

static int body_registered(weft_comm_t comm, int rank, int nranks, void *arg)
{
	verbs_find_paths();
	void *h = dlopen(verbs_fake_path, RTLD_NOW | RTLD_NOLOAD);
	weft_fake_mr_counts_fn counts =
	    h ? (weft_fake_mr_counts_fn)dlsym(h, WEFT_FAKE_MR_COUNTS) : NULL;
	if (!counts)
		return harness_fail("the double is not loaded: %s", dlerror());
	float *buf = calloc(REG_COUNT, sizeof(float)), *plain = calloc(REG_COUNT, sizeof(float));
	weft_mem_handle_t reg = NULL;
	uint64_t with = 0, without = 0, regs, deregs, regs2, deregs2;
	int ret = !buf || !plain ? harness_fail("no memory") : 0;
	weft_status_t st =
	    ret ? WEFT_SUCCESS : weft_mem_register(comm, buf, REG_COUNT * sizeof(float), &reg);
	if (st != WEFT_SUCCESS)
		ret = harness_fail_status(comm, st, "weft_mem_register");
	if (!ret)
		ret = reg_loop(comm, buf, counts, &with);
	if (!ret)
		ret = reg_loop(comm, plain, counts, &without);
	counts(&regs, &deregs);
	if (!ret && (st = weft_mem_deregister(comm, reg)) != WEFT_SUCCESS)
		ret = harness_fail_status(comm, st, "weft_mem_deregister");
	counts(&regs2, &deregs2);
	if (!ret && with != 0)
		ret = harness_fail("10 allreduces of a registered buffer made %llu registrations",
				   (unsigned long long)with);
	if (!ret && without == 0)
		ret = harness_fail("an unregistered buffer registered nothing: the count is blind");
	if (!ret && deregs2 != deregs + 1)
		ret = harness_fail("deregistering made %llu deregistrations, expected 1",
				   (unsigned long long)(deregs2 - deregs));
	free(buf);
	free(plain);
	return ret;
}

START_TEST(test_registered_stays)
{
	struct harness_result res;
	harness_run(2, env_with(NULL), body_registered, NULL, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

static Suite *verbs_suite(void)
{
	Suite *s = suite_create("verbs");
	TCase *tc = tcase_create("data");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, test_ring_wraps);
	tcase_add_test(tc, test_no_files_left);
	tcase_add_test(tc, test_registered_stays);
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
