/*
 * test_allgather.c — the AllGather correctness matrix.
 *
 * For each transport (shm; socket over lo) and each rank count 1..8, one set
 * of rank processes runs counts {0, 1, 7, nranks-1, 4099} x every datatype x
 * three forms (out of place; WEFT_IN_PLACE; sendbuf = recvbuf + rank*count),
 * plus 1M+3-element cases for three datatypes. To keep CI time down,
 * socket, and shm above 4 ranks, rotate the forms (one per case), and above
 * 4 ranks one of the 1M+3 cases runs, rotating with the rank count. Each rank's block carries
 * bytes that differ per rank, element and case, so a block in the wrong place
 * or a stale block from an earlier case shows. The output is checked in full,
 * guard bytes around it must be untouched, and out of place the input must
 * be unchanged. A second set forces each allgather algorithm in turn, over
 * shm and over socket.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"
#include "harness.h"

enum form { FORM_OUT, FORM_IN_PLACE, FORM_OFFSET, FORM_COUNT };

static const char *const form_names[FORM_COUNT] = {
    [FORM_OUT] = "out-of-place",
    [FORM_IN_PLACE] = "WEFT_IN_PLACE",
    [FORM_OFFSET] = "sendbuf=recvbuf+rank*count",
};

#define BIG_COUNT	   ((size_t)(1u << 20) + 3)
#define MAX_FAILURES_SHOWN 8

struct big_case {
	weft_datatype_t dtype;
	enum form form;
};

static const struct big_case big_cases[] = {
    {WEFT_FLOAT32, FORM_OUT},
    {WEFT_UINT8, FORM_IN_PLACE},
    {WEFT_FLOAT16, FORM_OFFSET},
};
#define BIG_MAX_ESIZE 4

struct matrix {
	bool rotate_forms; /* one form per case, in rotation, rather than all three */
	bool forced_algo;  /* counts {1, 7, nranks-1, 4099, 65537} rather than {0, 1, 7, nranks-1,
			      4099} */
	bool big;	   /* the 1M+3 cases */
	int failures;	   /* wrong results seen on this rank */
};

struct bufs {
	unsigned char *send, *recv, *want, *orig; /* send and recv have guards around them */
};

static unsigned char *guarded_alloc(size_t bytes)
{
	unsigned char *p = malloc(bytes + 2 * HARNESS_GUARD_BYTES);
	return p ? p + HARNESS_GUARD_BYTES : NULL;
}

static void guarded_free(unsigned char *p)
{
	if (p)
		free(p - HARNESS_GUARD_BYTES);
}

static void guards_fill(unsigned char *data, size_t bytes)
{
	harness_guard_fill(data - HARNESS_GUARD_BYTES, HARNESS_GUARD_BYTES);
	harness_guard_fill(data + bytes, HARNESS_GUARD_BYTES);
}

static const char *guards_check(const unsigned char *data, size_t bytes)
{
	if (harness_guard_check(data - HARNESS_GUARD_BYTES, HARNESS_GUARD_BYTES) >= 0)
		return "the guard before";
	if (harness_guard_check(data + bytes, HARNESS_GUARD_BYTES) >= 0)
		return "the guard after";
	return "";
}

enum case_result { CASE_OK, CASE_WRONG, CASE_ERROR };

static enum case_result run_case(weft_comm_t comm, int rank, int nranks, struct bufs *b,
				 struct matrix *m, size_t count, weft_datatype_t dt, enum form form,
				 unsigned salt)
{
	char name[160];
	snprintf(name, sizeof(name), "allgather nranks %d %s count %zu %s", nranks,
		 harness_dtype_name(dt), count, form_names[form]);
	harness_progress("%s", name);

	size_t bytes = count * harness_dtype_size(dt), total = bytes * (size_t)nranks;
	unsigned char *mine = b->recv + (size_t)rank * bytes;
	guards_fill(b->recv, total);
	guards_fill(b->send, bytes);
	memset(b->recv, 0xcd, total); /* every block must be written */
	const void *sendarg;
	switch (form) {
	case FORM_OUT:
		harness_ag_input(b->send, count, dt, rank, salt);
		memcpy(b->orig, b->send, bytes);
		sendarg = b->send;
		break;
	case FORM_IN_PLACE:
		harness_ag_input(mine, count, dt, rank, salt);
		sendarg = WEFT_IN_PLACE;
		break;
	default:
		harness_ag_input(mine, count, dt, rank, salt);
		sendarg = mine;
		break;
	}

	weft_status_t st = weft_allgather(sendarg, b->recv, count, dt, comm);
	if (st != WEFT_SUCCESS) {
		harness_fail_status(comm, st, "%s", name);
		return CASE_ERROR;
	}

	for (int r = 0; r < nranks; r++)
		harness_ag_input(b->want + (size_t)r * bytes, count, dt, r, salt);
	char why[256] = "";
	const char *guard;
	size_t bad = harness_compare(b->recv, b->want, total, WEFT_UINT8, NULL, 0);
	if (bad != SIZE_MAX) {
		size_t nbad = 0;
		for (size_t k = bad; k < total; k++)
			nbad += b->recv[k] != b->want[k];
		snprintf(why, sizeof(why),
			 "block %zu (rank %zu's) element %zu byte %zu: got 0x%02x, expected 0x%02x "
			 "(%zu bytes differ)",
			 bad / bytes, bad / bytes, (bad % bytes) / harness_dtype_size(dt),
			 bad % harness_dtype_size(dt), b->recv[bad], b->want[bad], nbad);
	} else if (*(guard = guards_check(b->recv, total))) {
		snprintf(why, sizeof(why), "%s recvbuf was written", guard);
	} else if (form == FORM_OUT && *(guard = guards_check(b->send, bytes))) {
		snprintf(why, sizeof(why), "%s sendbuf was written", guard);
	} else if (form == FORM_OUT && memcmp(b->send, b->orig, bytes) != 0) {
		snprintf(why, sizeof(why), "sendbuf was modified");
	}
	if (!why[0])
		return CASE_OK;
	if (++m->failures <= MAX_FAILURES_SHOWN)
		harness_fail("%s: %s", name, why);
	return CASE_WRONG;
}

static int matrix_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct matrix *m = arg;
	size_t per_rank = m->big ? BIG_COUNT * BIG_MAX_ESIZE : 65537 * 8;
	if (per_rank < 4099 * 8)
		per_rank = 4099 * 8;
	struct bufs b = {
	    .send = guarded_alloc(per_rank),
	    .recv = guarded_alloc(per_rank * (size_t)nranks),
	    .want = malloc(per_rank * (size_t)nranks),
	    .orig = malloc(per_rank),
	};
	int ret = 0;
	if (!b.send || !b.recv || !b.want || !b.orig) {
		ret = harness_fail("out of memory");
		goto out_free;
	}

	size_t counts[] = {0, 1, 7, (size_t)nranks - 1, 4099, 65537};
	size_t first = m->forced_algo ? 1 : 0, ncounts = m->forced_algo ? 6 : 5;
	unsigned salt = 0;
	enum case_result res = CASE_OK;
	for (size_t c = first; c < ncounts && res != CASE_ERROR; c++) {
		size_t count = counts[c];
		if (c == 3 && (count == 0 || count == 1 || count == 7))
			continue;
		for (int dt = 0; dt < WEFT_DATATYPE_COUNT && res != CASE_ERROR; dt++)
			for (int f = 0; f < FORM_COUNT && res != CASE_ERROR; f++) {
				if (m->rotate_forms && f != (int)((c + (size_t)dt) % FORM_COUNT))
					continue;
				res = run_case(comm, rank, nranks, &b, m, count,
					       (weft_datatype_t)dt, (enum form)f, ++salt);
			}
	}
	for (size_t k = 0;
	     m->big && k < sizeof(big_cases) / sizeof(big_cases[0]) && res != CASE_ERROR; k++) {
		if (nranks > 4 && k != (size_t)nranks % 3)
			continue; /* above 4 ranks, one large case, rotating with the rank count */
		res = run_case(comm, rank, nranks, &b, m, BIG_COUNT, big_cases[k].dtype,
			       big_cases[k].form, ++salt);
	}
	if (res == CASE_ERROR)
		ret = 2;
	else if (m->failures)
		ret = 1;
	if (m->failures > MAX_FAILURES_SHOWN)
		harness_fail("... %d wrong cases in all", m->failures);
out_free:
	guarded_free(b.send);
	guarded_free(b.recv);
	free(b.want);
	free(b.orig);
	return ret;
}

static const char *const env_shm[] = {"WEFT_TIMEOUT=60", NULL};
static const char *const env_socket[] = {"WEFT_TIMEOUT=60", "WEFT_TRANSPORTS=socket",
					 "WEFT_SOCKET_IFNAME=lo", NULL};

#define JOB_TIMEOUT_S 200.0

static void run_matrix(int nranks, const char *const *env, const char *label, struct matrix m)
{
	struct harness_result res;
	harness_run(nranks, env, matrix_body, &m, JOB_TIMEOUT_S, &res);
	printf("allgather matrix %s nranks %d: %.1f s\n", label, nranks, res.seconds);
	fflush(stdout);
	ck_assert_msg(res.ok, "allgather matrix %s, nranks %d:\n%s", label, nranks, res.summary);
}

START_TEST(matrix_shm)
{
	/* All three forms for every case up to 4 ranks; above, in rotation. */
	run_matrix(_i, env_shm, "shm", (struct matrix){.rotate_forms = _i > 4, .big = true});
}
END_TEST

START_TEST(matrix_socket)
{
	run_matrix(_i, env_socket, "socket", (struct matrix){.rotate_forms = true, .big = true});
}
END_TEST

static const int algo_nranks[] = {2, 3, 5, 8};

static void run_forced(int nranks, bool socket)
{
	const struct weft_algo *const *algos = weft_algos_for(WEFT_COLL_ALLGATHER);
	ck_assert_ptr_nonnull(algos);
	for (size_t a = 0; algos[a]; a++) {
		char algo_env[128];
		snprintf(algo_env, sizeof(algo_env), "WEFT_ALGO=allgather:%s", algos[a]->name);
		const char *const env[] = {"WEFT_TIMEOUT=60", algo_env, "WEFT_SOCKET_IFNAME=lo",
					   socket ? "WEFT_TRANSPORTS=socket" : NULL, NULL};
		struct harness_result res;
		struct matrix m = {.rotate_forms = true, .forced_algo = true};
		harness_run(nranks, env, matrix_body, &m, JOB_TIMEOUT_S, &res);
		printf("allgather %s %s nranks %d: %.1f s\n", socket ? "socket" : "shm", algo_env,
		       nranks, res.seconds);
		fflush(stdout);
		ck_assert_msg(res.ok, "allgather over %s with %s, nranks %d:\n%s",
			      socket ? "socket" : "shm", algo_env, nranks, res.summary);
	}
}

START_TEST(forced_algorithms)
{
	run_forced(algo_nranks[_i], false);
}
END_TEST

static const int algo_nranks_socket[] = {2, 3, 5};

START_TEST(forced_algorithms_socket)
{
	run_forced(algo_nranks_socket[_i], true);
}
END_TEST

static Suite *allgather_suite(void)
{
	Suite *s = suite_create("allgather");
	TCase *tc = tcase_create("shm");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, matrix_shm, 1, 9);
	suite_add_tcase(s, tc);

	tc = tcase_create("socket");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, matrix_socket, 1, 9);
	suite_add_tcase(s, tc);

	tc = tcase_create("algorithms");
	tcase_set_timeout(tc, 4 * JOB_TIMEOUT_S);
	tcase_add_loop_test(tc, forced_algorithms, 0,
			    (int)(sizeof(algo_nranks) / sizeof(algo_nranks[0])));
	tcase_add_loop_test(tc, forced_algorithms_socket, 0,
			    (int)(sizeof(algo_nranks_socket) / sizeof(algo_nranks_socket[0])));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(allgather_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
