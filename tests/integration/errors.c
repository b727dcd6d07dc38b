/*
 * errors.c — bad input gives a clear status and a message that names
 * the problem; never a crash, never a hang, and the communicator stays
 * usable afterwards.
 *
 * Covered: NULL buffers with count > 0 (blocking and non-blocking, both
 * collectives), count 0 with NULL buffers (a valid no-op), invalid datatype
 * and op, count overflow (count * size, and for allgather count * nranks *
 * size), NULL communicator, NULL request, weft_comm_init_rank with a bad
 * rank, size, config or unique id (garbage, wrong magic, wrong version, bad
 * address length), weft_get_unique_id(NULL), weft_status_string for every
 * code and unknown ones, weft_datatype_size, weft_version, and
 * weft_comm_init_env with missing or malformed variables (the message names
 * the variable) plus one that works.
 *
 * Messages must contain the exact phrase that names the call and the
 * parameter, with its value ("weft_allreduce: invalid op 99"), not merely a
 * keyword.
 *
 * Most tests run in the Check process on a one-rank communicator (argument
 * checks are local); one runs on two ranks, where count * nranks matters and
 * where a rejected call must not leave the ranks out of step (over shm).
 *
 * The collectives' own bad input, on every rank of a job (over the
 * transport the suite runs with, tests/lib/integ.h): invalid roots, NULL
 * buffers, overlapping alltoall buffers, bad datatype/op, count overflow,
 * NULL request or communicator give WEFT_ERR_INVALID_ARG with a message
 * that names the call and the argument, with its value where it has one
 * ("weft_reduce: root -1 is not a rank", "weft_broadcast: invalid datatype
 * 10"); count 0 with NULL buffers is a valid no-op; alltoallv, gather and
 * scatter with NULL arrays and buffers, blocks beyond the address space, a
 * block to itself whose send and receive counts differ, overlapping
 * buffers, bad roots, WEFT_IN_PLACE off the root, NULL requests likewise.
 * A broadcast and an alltoallv after them must still work.
 */
#include <check.h>
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "colls.h"
#include "harness.h"
#include "integ.h"

/* True if @p msg contains one of the '|'-separated words, ignoring case. */
static bool mentions(const char *msg, const char *words)
{
	if (!msg)
		return false;
	char hay[1024];
	size_t n = 0;
	for (; msg[n] && n + 1 < sizeof(hay); n++)
		hay[n] = (char)tolower((unsigned char)msg[n]);
	hay[n] = '\0';
	char list[256];
	snprintf(list, sizeof(list), "%s", words);
	char *save = NULL;
	for (char *w = strtok_r(list, "|", &save); w; w = strtok_r(NULL, "|", &save)) {
		for (char *c = w; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		if (strstr(hay, w))
			return true;
	}
	return false;
}

/* @p st must be @p want, with a non-empty message naming one of @p words. */
static void assert_error(weft_status_t st, weft_status_t want, const char *msg, const char *words,
			 const char *what)
{
	ck_assert_msg(st == want, "%s: returned %s (%d), expected %s; message \"%s\"", what,
		      weft_status_string(st), (int)st, weft_status_string(want),
		      msg ? msg : "(null)");
	ck_assert_msg(msg && *msg, "%s: empty error message", what);
	ck_assert_msg(mentions(msg, words), "%s: message \"%s\" names none of %s", what, msg,
		      words);
}

/* @p st must be @p want, with a message that contains @p phrase exactly: the
 * call and the parameter, with its value where it has one ("weft_allreduce:
 * invalid op 99"), not a word that any message might hold. */
static void assert_says(weft_status_t st, weft_status_t want, const char *msg, const char *phrase,
			const char *what)
{
	ck_assert_msg(st == want, "%s: returned %s (%d), expected %s; message \"%s\"", what,
		      weft_status_string(st), (int)st, weft_status_string(want),
		      msg ? msg : "(null)");
	ck_assert_msg(msg && strstr(msg, phrase), "%s: message \"%s\" does not say \"%s\"", what,
		      msg ? msg : "(null)", phrase);
}

static weft_comm_t solo_comm(void)
{
	weft_unique_id_t id;
	weft_status_t st = weft_get_unique_id(&id);
	ck_assert_msg(st == WEFT_SUCCESS, "weft_get_unique_id: %s: %s", weft_status_string(st),
		      weft_init_last_error());
	weft_comm_t comm = NULL;
	st = weft_comm_init_rank(&comm, 1, id, 0, NULL);
	ck_assert_msg(st == WEFT_SUCCESS, "weft_comm_init_rank(1 rank): %s: %s",
		      weft_status_string(st), weft_init_last_error());
	ck_assert_ptr_nonnull(comm);
	return comm;
}

/* The communicator still works and is not marked failed. */
static void assert_usable(weft_comm_t comm)
{
	float in[3] = {1.5f, -2.0f, 4.0f}, out[3] = {0};
	weft_status_t st = weft_allreduce(in, out, 3, WEFT_FLOAT32, WEFT_SUM, comm);
	ck_assert_msg(st == WEFT_SUCCESS, "allreduce after rejected calls: %s: %s",
		      weft_status_string(st), weft_comm_last_error(comm));
	ck_assert(out[0] == 1.5f && out[1] == -2.0f && out[2] == 4.0f);
	weft_status_t async = WEFT_ERR_INTERNAL;
	ck_assert_int_eq(weft_comm_get_async_error(comm, &async), WEFT_SUCCESS);
	ck_assert_msg(async == WEFT_SUCCESS, "async error %s after argument errors",
		      weft_status_string(async));
}

START_TEST(status_strings)
{
	static const weft_status_t codes[] = {
	    WEFT_SUCCESS,      WEFT_INPROGRESS,	 WEFT_ERR_INVALID_ARG, WEFT_ERR_NO_MEMORY,
	    WEFT_ERR_SYSTEM,   WEFT_ERR_REMOTE,	 WEFT_ERR_TIMEOUT,     WEFT_ERR_NOT_SUPPORTED,
	    WEFT_ERR_INTERNAL, WEFT_ERR_ABORTED,
	};
	size_t n = sizeof(codes) / sizeof(codes[0]);
	for (size_t i = 0; i < n; i++) {
		const char *s = weft_status_string(codes[i]);
		ck_assert_msg(s && *s, "weft_status_string(%d) is empty", (int)codes[i]);
		for (size_t j = 0; j < i; j++)
			ck_assert_msg(strcmp(s, weft_status_string(codes[j])) != 0,
				      "codes %d and %d share the name \"%s\"", (int)codes[i],
				      (int)codes[j], s);
	}
	static const int unknown[] = {2, -9, -100, 1000, INT_MIN, INT_MAX};
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		const char *s = weft_status_string((weft_status_t)unknown[i]);
		ck_assert_msg(s && *s, "weft_status_string(%d) is empty", unknown[i]);
		for (size_t j = 0; j < n; j++)
			ck_assert_msg(strcmp(s, weft_status_string(codes[j])) != 0,
				      "unknown code %d is named like code %d: \"%s\"", unknown[i],
				      (int)codes[j], s);
	}
}
END_TEST

START_TEST(datatype_sizes)
{
	static const size_t want[WEFT_DATATYPE_COUNT] = {
	    [WEFT_INT8] = 1,	[WEFT_UINT8] = 1,   [WEFT_INT32] = 4,	[WEFT_UINT32] = 4,
	    [WEFT_INT64] = 8,	[WEFT_UINT64] = 8,  [WEFT_FLOAT16] = 2, [WEFT_BFLOAT16] = 2,
	    [WEFT_FLOAT32] = 4, [WEFT_FLOAT64] = 8,
	};
	for (int d = 0; d < WEFT_DATATYPE_COUNT; d++)
		ck_assert_msg(weft_datatype_size((weft_datatype_t)d) == want[d],
			      "weft_datatype_size(%s) = %zu",
			      harness_dtype_name((weft_datatype_t)d),
			      weft_datatype_size((weft_datatype_t)d));
	ck_assert_uint_eq(weft_datatype_size(WEFT_DATATYPE_COUNT), 0);
	ck_assert_uint_eq(weft_datatype_size((weft_datatype_t)-1), 0);
	ck_assert_uint_eq(weft_datatype_size((weft_datatype_t)1000), 0);

	char want_version[32];
	snprintf(want_version, sizeof(want_version), "%d.%d.%d", WEFT_VERSION_MAJOR,
		 WEFT_VERSION_MINOR, WEFT_VERSION_PATCH);
	ck_assert_ptr_nonnull(weft_version());
	ck_assert_str_eq(weft_version(), want_version);
}
END_TEST

/* One call of each of the four collectives with the given arguments. */
enum call { CALL_ALLREDUCE, CALL_IALLREDUCE, CALL_ALLGATHER, CALL_IALLGATHER, CALL_COUNT };
static const char *const call_names[CALL_COUNT] = {"weft_allreduce", "weft_iallreduce",
						   "weft_allgather", "weft_iallgather"};

static weft_status_t call(enum call c, const void *send, void *recv, size_t count,
			  weft_datatype_t dt, weft_op_t op, weft_comm_t comm)
{
	weft_request_t req = (weft_request_t)(uintptr_t)0x1; /* must be set to NULL on failure */
	weft_status_t st;
	switch (c) {
	case CALL_ALLREDUCE: return weft_allreduce(send, recv, count, dt, op, comm);
	case CALL_ALLGATHER: return weft_allgather(send, recv, count, dt, comm);
	case CALL_IALLREDUCE: st = weft_iallreduce(send, recv, count, dt, op, comm, &req); break;
	default: st = weft_iallgather(send, recv, count, dt, comm, &req); break;
	}
	if (st == WEFT_SUCCESS && req) /* only the count 0 cases get here */
		st = weft_wait(&req);
	ck_assert_msg(req == NULL || st == WEFT_SUCCESS,
		      "%s failed (%s) but left the request non-NULL", call_names[c],
		      weft_status_string(st));
	return st;
}

START_TEST(null_buffers)
{
	weft_comm_t comm = solo_comm();
	float buf[8] = {0};
	for (int c = 0; c < CALL_COUNT; c++) {
		char what[96], says[96];
		snprintf(what, sizeof(what), "%s(sendbuf NULL, count 4)", call_names[c]);
		snprintf(says, sizeof(says), "%s: sendbuf", call_names[c]);
		weft_status_t st = call(c, NULL, buf, 4, WEFT_FLOAT32, WEFT_SUM, comm);
		assert_error(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm), "sendbuf|send",
			     what);
		assert_says(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm), says, what);
		assert_says(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm), "is NULL", what);
		snprintf(what, sizeof(what), "%s(recvbuf NULL, count 4)", call_names[c]);
		snprintf(says, sizeof(says), "%s: recvbuf is NULL", call_names[c]);
		st = call(c, buf, NULL, 4, WEFT_FLOAT32, WEFT_SUM, comm);
		assert_error(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm), "recvbuf|recv",
			     what);
		assert_says(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm), says, what);
		snprintf(what, sizeof(what), "%s(WEFT_IN_PLACE, recvbuf NULL, count 4)",
			 call_names[c]);
		st = call(c, WEFT_IN_PLACE, NULL, 4, WEFT_FLOAT32, WEFT_SUM, comm);
		assert_error(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm), "recvbuf|recv",
			     what);
		assert_says(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm), says, what);
		snprintf(what, sizeof(what), "%s(both NULL, count 1)", call_names[c]);
		st = call(c, NULL, NULL, 1, WEFT_INT8, WEFT_MAX, comm);
		assert_error(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm), "buf|null",
			     what);
		assert_says(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm), says, what);
		/* count 0 is a valid no-op, whatever the pointers */
		st = call(c, NULL, NULL, 0, WEFT_FLOAT32, WEFT_SUM, comm);
		ck_assert_msg(st == WEFT_SUCCESS, "%s(NULL, NULL, count 0): %s: %s", call_names[c],
			      weft_status_string(st), weft_comm_last_error(comm));
	}
	assert_usable(comm);
	ck_assert_int_eq(weft_comm_destroy(comm), WEFT_SUCCESS);
}
END_TEST

START_TEST(bad_dtype_and_op)
{
	weft_comm_t comm = solo_comm();
	float buf[8] = {0}, out[8];
	static const int bad_dtypes[] = {WEFT_DATATYPE_COUNT, -1, 77, INT_MIN};
	static const int bad_ops[] = {WEFT_OP_COUNT, -1, 99};
	for (int c = 0; c < CALL_COUNT; c++) {
		for (size_t k = 0; k < sizeof(bad_dtypes) / sizeof(bad_dtypes[0]); k++) {
			char what[96];
			char says[96];
			snprintf(what, sizeof(what), "%s(dtype %d)", call_names[c], bad_dtypes[k]);
			snprintf(says, sizeof(says), "%s: invalid datatype %d", call_names[c],
				 bad_dtypes[k]);
			weft_status_t st =
			    call(c, buf, out, 2, (weft_datatype_t)bad_dtypes[k], WEFT_SUM, comm);
			assert_error(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm),
				     "datatype|dtype|type", what);
			assert_says(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm), says,
				    what);
		}
		if (c == CALL_ALLGATHER || c == CALL_IALLGATHER)
			continue; /* allgather has no op */
		for (size_t k = 0; k < sizeof(bad_ops) / sizeof(bad_ops[0]); k++) {
			char what[96];
			char says[96];
			snprintf(what, sizeof(what), "%s(op %d)", call_names[c], bad_ops[k]);
			snprintf(says, sizeof(says), "%s: invalid op %d", call_names[c],
				 bad_ops[k]);
			weft_status_t st =
			    call(c, buf, out, 2, WEFT_FLOAT32, (weft_op_t)bad_ops[k], comm);
			assert_error(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm), "op",
				     what);
			assert_says(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm), says,
				    what);
		}
	}
	assert_usable(comm);
	ck_assert_int_eq(weft_comm_destroy(comm), WEFT_SUCCESS);
}
END_TEST

START_TEST(count_overflow)
{
	weft_comm_t comm = solo_comm();
	char buf[64];
	static const struct {
		size_t count;
		weft_datatype_t dt;
	} cases[] = {
	    {SIZE_MAX / 2, WEFT_FLOAT32},     {SIZE_MAX / 4 + 1, WEFT_FLOAT32},
	    {SIZE_MAX, WEFT_UINT8}, /* no overflow, but no buffer can be SIZE_MAX bytes */
	    {SIZE_MAX / 8 + 1, WEFT_FLOAT64}, {SIZE_MAX / 2 + 1, WEFT_BFLOAT16},
	};
	for (int c = 0; c < CALL_COUNT; c++) {
		for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
			char what[128];
			char says[96];
			snprintf(what, sizeof(what), "%s(count %zu of %s)", call_names[c],
				 cases[k].count, harness_dtype_name(cases[k].dt));
			snprintf(says, sizeof(says), "%s: count %zu", call_names[c],
				 cases[k].count);
			weft_status_t st =
			    call(c, buf, buf + 32, cases[k].count, cases[k].dt, WEFT_SUM, comm);
			assert_error(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm),
				     "count|overflow|too large|too big", what);
			assert_says(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm), says,
				    what);
			assert_says(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm),
				    "overflows", what);
		}
	}
	assert_usable(comm);
	ck_assert_int_eq(weft_comm_destroy(comm), WEFT_SUCCESS);
}
END_TEST

START_TEST(null_comm_and_request)
{
	float buf[4] = {0}, out[4];
	for (int c = 0; c < CALL_COUNT; c++) {
		weft_status_t st = call(c, buf, out, 4, WEFT_FLOAT32, WEFT_SUM, NULL);
		ck_assert_msg(st == WEFT_ERR_INVALID_ARG, "%s(comm NULL): %s", call_names[c],
			      weft_status_string(st));
		/* Each call's own message, not the first one of the thread. */
		char what[96], says[96];
		snprintf(what, sizeof(what), "%s(comm NULL)", call_names[c]);
		snprintf(says, sizeof(says), "%s: comm is NULL", call_names[c]);
		assert_says(st, WEFT_ERR_INVALID_ARG, weft_init_last_error(), says, what);
	}
	int r = -1;
	ck_assert_int_eq(weft_comm_rank(NULL, &r), WEFT_ERR_INVALID_ARG);
	ck_assert_int_eq(weft_comm_size(NULL, &r), WEFT_ERR_INVALID_ARG);
	ck_assert_int_eq(weft_comm_destroy(NULL), WEFT_ERR_INVALID_ARG);
	ck_assert_int_eq(weft_comm_abort(NULL), WEFT_ERR_INVALID_ARG);
	weft_status_t async;
	ck_assert_int_eq(weft_comm_get_async_error(NULL, &async), WEFT_ERR_INVALID_ARG);
	ck_assert_ptr_nonnull(weft_comm_last_error(NULL));
	ck_assert_int_eq(weft_test(NULL), WEFT_ERR_INVALID_ARG);
	ck_assert_int_eq(weft_wait(NULL), WEFT_ERR_INVALID_ARG);

	weft_comm_t comm = solo_comm();
	/* the call first, then its message (an argument list has no order) */
	weft_status_t st = weft_iallreduce(buf, out, 4, WEFT_FLOAT32, WEFT_SUM, comm, NULL);
	assert_says(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm),
		    "weft_iallreduce: request is NULL", "weft_iallreduce(request NULL)");
	st = weft_iallgather(buf, out, 4, WEFT_FLOAT32, comm, NULL);
	assert_says(st, WEFT_ERR_INVALID_ARG, weft_comm_last_error(comm),
		    "weft_iallgather: request is NULL", "weft_iallgather(request NULL)");
	ck_assert_int_eq(weft_comm_rank(comm, NULL), WEFT_ERR_INVALID_ARG);
	ck_assert_int_eq(weft_comm_size(comm, NULL), WEFT_ERR_INVALID_ARG);
	ck_assert_int_eq(weft_comm_get_async_error(comm, NULL), WEFT_ERR_INVALID_ARG);
	/* A request that has finished (NULL) is done: test and wait say so. */
	weft_request_t done = NULL;
	ck_assert_int_eq(weft_test(&done), WEFT_SUCCESS);
	ck_assert_int_eq(weft_wait(&done), WEFT_SUCCESS);
	ck_assert_int_eq(weft_comm_rank(comm, &r), WEFT_SUCCESS);
	ck_assert_int_eq(r, 0);
	ck_assert_int_eq(weft_comm_size(comm, &r), WEFT_SUCCESS);
	ck_assert_int_eq(r, 1);
	assert_usable(comm);
	ck_assert_int_eq(weft_comm_destroy(comm), WEFT_SUCCESS);
}
END_TEST

static void assert_init_fails(int nranks, weft_unique_id_t id, int rank,
			      const weft_config_t *config, const char *says, const char *what)
{
	weft_comm_t comm = (weft_comm_t)(uintptr_t)0x1;
	double t0 = harness_now();
	weft_status_t st = weft_comm_init_rank(&comm, nranks, id, rank, config);
	double took = harness_now() - t0;
	assert_says(st, WEFT_ERR_INVALID_ARG, weft_init_last_error(), says, what);
	ck_assert_msg(comm == NULL, "%s: failed but left *comm non-NULL", what);
	ck_assert_msg(took < 2.0, "%s: took %.1f s to reject", what, took);
}

START_TEST(init_bad_rank_and_size)
{
	setenv("WEFT_BOOTSTRAP_TIMEOUT", "3", 1);
	weft_unique_id_t id;
	ck_assert_int_eq(weft_get_unique_id(&id), WEFT_SUCCESS);
	assert_init_fails(2, id, -1, NULL, "weft_comm_init_rank: rank -1 is out of range",
			  "init_rank(rank -1 of 2)");
	assert_init_fails(2, id, 2, NULL, "weft_comm_init_rank: rank 2 is out of range",
			  "init_rank(rank 2 of 2)");
	assert_init_fails(2, id, INT_MAX, NULL,
			  "weft_comm_init_rank: rank 2147483647 is out of range",
			  "init_rank(rank INT_MAX of 2)");
	assert_init_fails(0, id, 0, NULL, "weft_comm_init_rank: nranks 0 is out of range",
			  "init_rank(nranks 0)");
	assert_init_fails(-3, id, 0, NULL, "weft_comm_init_rank: nranks -3 is out of range",
			  "init_rank(nranks -3)");
	assert_init_fails(INT_MIN, id, 0, NULL,
			  "weft_comm_init_rank: nranks -2147483648 is out of range",
			  "init_rank(nranks INT_MIN)");

	weft_config_t bad_size = WEFT_CONFIG_INIT;
	bad_size.size = 3;
	assert_init_fails(1, id, 0, &bad_size, "weft_comm_init_rank: config->size is 3",
			  "init_rank(config.size 3)");
	weft_config_t bad_timeout = WEFT_CONFIG_INIT;
	bad_timeout.timeout_seconds = -1.0;
	assert_init_fails(1, id, 0, &bad_timeout,
			  "weft_comm_init_rank: config->timeout_seconds is negative",
			  "init_rank(config.timeout_seconds -1)");

	ck_assert_int_eq(weft_comm_init_rank(NULL, 1, id, 0, NULL), WEFT_ERR_INVALID_ARG);
	ck_assert_msg(*weft_init_last_error(), "init_rank(comm NULL): empty message");
	ck_assert_int_eq(weft_get_unique_id(NULL), WEFT_ERR_INVALID_ARG);

	/* The id is still good after all that. */
	weft_comm_t comm = NULL;
	weft_status_t st = weft_comm_init_rank(&comm, 1, id, 0, NULL);
	ck_assert_msg(st == WEFT_SUCCESS, "init_rank after rejected calls: %s: %s",
		      weft_status_string(st), weft_init_last_error());
	assert_usable(comm);
	ck_assert_int_eq(weft_comm_destroy(comm), WEFT_SUCCESS);
}
END_TEST

START_TEST(init_garbage_id)
{
	setenv("WEFT_BOOTSTRAP_TIMEOUT", "3", 1);
	weft_unique_id_t good, id;
	ck_assert_int_eq(weft_get_unique_id(&good), WEFT_SUCCESS);
	struct weft_uid uid;
	memcpy(&uid, good.internal, sizeof(uid));
	ck_assert_msg(uid.magic == WEFT_UID_MAGIC, "weft_get_unique_id wrote magic 0x%llx",
		      (unsigned long long)uid.magic);

	memset(&id, 0, sizeof(id));
	assert_init_fails(1, id, 0, NULL, "unique id is invalid (bad magic",
			  "init_rank(all-zero id)");

	for (size_t k = 0; k < sizeof(id.internal); k++)
		id.internal[k] = (char)(k * 71 + 13);
	assert_init_fails(1, id, 0, NULL, "unique id is invalid (bad magic",
			  "init_rank(garbage id)");

	struct weft_uid bad = uid;
	bad.magic ^= 0x100;
	memcpy(id.internal, &bad, sizeof(bad));
	assert_init_fails(2, id, 1, NULL, "unique id is invalid (bad magic",
			  "init_rank(id with a wrong magic)");

	bad = uid;
	bad.version += 7;
	memcpy(id.internal, &bad, sizeof(bad));
	assert_init_fails(2, id, 1, NULL, "unique id is invalid (version",
			  "init_rank(id with a wrong version)");

	bad = uid;
	bad.addr_len = 1000;
	memcpy(id.internal, &bad, sizeof(bad));
	assert_init_fails(2, id, 1, NULL, "length 1000)", "init_rank(id with address length 1000)");

	bad = uid;
	bad.addr.sa.sa_family = AF_UNIX;
	memcpy(id.internal, &bad, sizeof(bad));
	assert_init_fails(2, id, 1, NULL, "unique id is invalid (address family 1,",
			  "init_rank(id with address family AF_UNIX)");
}
END_TEST

/* Two ranks: overflow of count * nranks, and rejected calls that must not
 * consume a sequence number (the next good calls still match up). */
static int two_rank_errors_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	char buf[64] = {0};
	size_t half = SIZE_MAX / 4 / 2 + 1; /* fits as count * 4 bytes, not times 2 ranks */
	weft_request_t req = NULL;
	weft_status_t st = weft_allgather(buf, buf + 32, half, WEFT_FLOAT32, comm);
	if (st != WEFT_ERR_INVALID_ARG)
		return harness_fail_status(
		    comm, st, "allgather(count %zu fp32, 2 ranks): expected invalid argument",
		    half);
	if (!*weft_comm_last_error(comm))
		return harness_fail("allgather count*nranks overflow: empty message");
	st = weft_iallgather(buf, buf + 32, half, WEFT_FLOAT32, comm, &req);
	if (st != WEFT_ERR_INVALID_ARG || req != NULL)
		return harness_fail_status(comm, st,
					   "iallgather(count %zu fp32, 2 ranks): expected invalid "
					   "argument and a NULL request",
					   half);
	/* Only rank 1 makes a bad call: the ranks must stay in step. */
	if (rank == 1 &&
	    (st = weft_allreduce(NULL, buf, 4, WEFT_INT32, WEFT_SUM, comm)) != WEFT_ERR_INVALID_ARG)
		return harness_fail_status(comm, st, "allreduce(sendbuf NULL)");
	int32_t in[4] = {rank, 1, -rank, 7}, out[4];
	st = weft_allreduce(in, out, 4, WEFT_INT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "allreduce after rejected calls");
	if (out[0] != 1 || out[1] != 2 || out[2] != -1 || out[3] != 14)
		return harness_fail("allreduce after rejected calls: got %d %d %d %d", out[0],
				    out[1], out[2], out[3]);
	int32_t g[4];
	st = weft_allgather(&in[0], g, 1, WEFT_INT32, comm);
	if (st != WEFT_SUCCESS || g[0] != 0 || g[1] != 1)
		return harness_fail_status(comm, st, "allgather after rejected calls (got %d %d)",
					   g[0], g[1]);
	return 0;
}

START_TEST(two_rank_errors)
{
	static const char *const env[] = {"WEFT_TIMEOUT=20", NULL};
	struct harness_result res;
	harness_run(2, env, two_rank_errors_body, NULL, 60, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* --- weft_comm_init_env --- */

static void clear_launcher_env(void)
{
	static const char *const vars[] = {
	    "WEFT_RANK",
	    "WEFT_NRANKS",
	    "WEFT_ROOT",
	    "WEFT_SECRET",
	    "OMPI_COMM_WORLD_RANK",
	    "OMPI_COMM_WORLD_SIZE",
	    "OMPI_COMM_WORLD_LOCAL_SIZE",
	    "OMPI_COMM_WORLD_LOCAL_RANK",
	    "OMPI_MCA_orte_ess_num_procs",
	    "OMPI_MCA_ess_base_jobid",
	    "PMI_RANK",
	    "PMI_SIZE",
	    "PMI_LOCAL_SIZE",
	    "MPI_LOCALNRANKS",
	    "PMIX_RANK",
	    "PMIX_NAMESPACE",
	    "SLURM_PROCID",
	    "SLURM_NTASKS",
	    "SLURM_JOB_ID",
	    "SLURM_STEP_ID",
	    "SLURM_NNODES",
	    "SLURM_JOB_NUM_NODES",
	    "SLURM_LOCALID",
	    "SLURM_NPROCS",
	};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

struct env_case {
	const char *set[5]; /* KEY=VALUE */
	const char *names;  /* the message must name one of these */
};

static const struct env_case env_cases[] = {
    {{NULL}, "WEFT_RANK|rank"},
    {{"WEFT_RANK=0"}, "WEFT_NRANKS"},
    {{"WEFT_NRANKS=2"}, "WEFT_RANK"},
    {{"WEFT_RANK=abc", "WEFT_NRANKS=2"}, "WEFT_RANK"},
    {{"WEFT_RANK=1x", "WEFT_NRANKS=2"}, "WEFT_RANK"},
    {{"WEFT_RANK=", "WEFT_NRANKS=2"}, "WEFT_RANK"},
    {{"WEFT_RANK=-1", "WEFT_NRANKS=2"}, "WEFT_RANK"},
    {{"WEFT_RANK=0", "WEFT_NRANKS=two"}, "WEFT_NRANKS"},
    {{"WEFT_RANK=0", "WEFT_NRANKS=0"}, "WEFT_NRANKS"},
    {{"WEFT_RANK=0", "WEFT_NRANKS=99999999999999"}, "WEFT_NRANKS"},
    {{"WEFT_RANK=2", "WEFT_NRANKS=2"}, "WEFT_RANK"},
    {{"WEFT_RANK=0", "WEFT_NRANKS=2", "WEFT_SECRET=0123456789abcdef", "WEFT_ROOT=localhost"},
     "WEFT_ROOT"},
    {{"WEFT_RANK=0", "WEFT_NRANKS=2", "WEFT_SECRET=0123456789abcdef", "WEFT_ROOT=127.0.0.1:"},
     "WEFT_ROOT"},
    {{"WEFT_RANK=0", "WEFT_NRANKS=2", "WEFT_SECRET=0123456789abcdef", "WEFT_ROOT=127.0.0.1:http"},
     "WEFT_ROOT"},
    {{"WEFT_RANK=0", "WEFT_NRANKS=2", "WEFT_SECRET=0123456789abcdef", "WEFT_ROOT=127.0.0.1:70000"},
     "WEFT_ROOT"},
    {{"WEFT_RANK=0", "WEFT_NRANKS=2", "WEFT_SECRET=0123456789abcdef", "WEFT_ROOT=127.0.0.1:-5"},
     "WEFT_ROOT"},
    {{"WEFT_RANK=1", "WEFT_NRANKS=2", "WEFT_SECRET=0123456789abcdef", "WEFT_ROOT=999.1.2.3:1234"},
     "WEFT_ROOT"},
    {{"WEFT_RANK=1", "WEFT_NRANKS=2", "WEFT_SECRET=0123456789abcdef", "WEFT_ROOT=[::1:1234"},
     "WEFT_ROOT"},
    {{"WEFT_RANK=0", "WEFT_NRANKS=2", "WEFT_ROOT=127.0.0.1:1", "WEFT_SECRET=xyz"}, "WEFT_SECRET"},
    {{"WEFT_RANK=0", "WEFT_NRANKS=2", "WEFT_ROOT=127.0.0.1:1", "WEFT_SECRET=0123"}, "WEFT_SECRET"},
    {{"WEFT_RANK=0", "WEFT_NRANKS=2", "WEFT_ROOT=127.0.0.1:1", "WEFT_SECRET=0123456789abcdefgh"},
     "WEFT_SECRET"},
    {{"OMPI_COMM_WORLD_RANK=x", "OMPI_COMM_WORLD_SIZE=2"}, "OMPI_COMM_WORLD_RANK"},
    {{"OMPI_COMM_WORLD_RANK=0"}, "OMPI_COMM_WORLD_SIZE"},
    {{"PMI_RANK=3", "PMI_SIZE=2"}, "PMI_RANK|rank"},
    {{"SLURM_PROCID=0"}, "SLURM_NTASKS"},
};
#define NENV_CASES ((int)(sizeof(env_cases) / sizeof(env_cases[0])))

START_TEST(init_env_errors)
{
	const struct env_case *c = &env_cases[_i];
	clear_launcher_env();
	setenv("WEFT_BOOTSTRAP_TIMEOUT", "3", 1);
	char what[256] = "weft_comm_init_env with";
	for (int k = 0; k < 5 && c->set[k]; k++) {
		const char *eq = strchr(c->set[k], '=');
		char key[64];
		snprintf(key, sizeof(key), "%.*s", (int)(eq - c->set[k]), c->set[k]);
		ck_assert_int_eq(setenv(key, eq + 1, 1), 0);
		strncat(what, " ", sizeof(what) - strlen(what) - 1);
		strncat(what, c->set[k], sizeof(what) - strlen(what) - 1);
	}
	weft_comm_t comm = (weft_comm_t)(uintptr_t)0x1;
	double t0 = harness_now();
	weft_status_t st = weft_comm_init_env(&comm, NULL);
	double took = harness_now() - t0;
	assert_error(st, WEFT_ERR_INVALID_ARG, weft_init_last_error(), c->names, what);
	ck_assert_msg(comm == NULL, "%s: failed but left *comm non-NULL", what);
	ck_assert_msg(took < 2.0, "%s: took %.1f s to fail", what, took);
}
END_TEST

static int init_env_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int r = -1, n = -1;
	if (weft_comm_rank(comm, &r) != WEFT_SUCCESS || weft_comm_size(comm, &n) != WEFT_SUCCESS ||
	    r != rank || n != nranks)
		return harness_fail("weft_comm_rank/size: %d of %d, expected %d of %d", r, n, rank,
				    nranks);
	float v[5];
	harness_ar_input(v, 5, WEFT_FLOAT32, WEFT_SUM, rank, nranks, 0);
	float want[5];
	harness_ar_expected(want, 5, WEFT_FLOAT32, WEFT_SUM, nranks, 0);
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, v, 5, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "allreduce");
	char why[200];
	if (harness_compare(v, want, 5, WEFT_FLOAT32, why, sizeof(why)) != SIZE_MAX)
		return harness_fail("allreduce: %s", why);
	return 0;
}

START_TEST(init_env_works)
{
	static const char *const env[] = {"WEFT_TIMEOUT=20", "WEFT_BOOTSTRAP_TIMEOUT=20", NULL};
	struct harness_job job = {
	    .nranks = 3,
	    .env = env,
	    .body = init_env_body,
	    .timeout_s = 60,
	    .init = HARNESS_INIT_ENV,
	};
	struct harness_result res;
	clear_launcher_env();
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "weft_comm_init_env with WEFT_RANK/NRANKS/ROOT/SECRET:\n%s",
		      res.summary);
}
END_TEST

/* --- Bad input to the collectives, on every rank of a job: local checks,
 * so every rank makes the same calls (or a subset that never starts an
 * operation) and the ranks stay in step; afterwards the communicator must
 * still work. */

/* @p st must be WEFT_ERR_INVALID_ARG with a message that contains @p says,
 * which names the call and the parameter ("weft_reduce: root -1 is not a
 * rank"), and @p also unless it is NULL. */
static int expect_invalid(struct coll_ctx *c, weft_status_t st, const char *call, const char *says,
			  const char *also)
{
	return harness_expect_invalid(c->comm, st, call, says, also);
}

/* The same, with a message that names @p word. */
static int expect_named(struct coll_ctx *c, weft_status_t st, const char *call, const char *word)
{
	return harness_expect_invalid(c->comm, st, call, word, NULL);
}

static int expect_request_null(weft_request_t req, const char *call)
{
	if (req != NULL)
		return harness_fail("%s: failed but left a non-NULL request", call);
	return 0;
}

/* The messages that name a call and a parameter's value. */
static const char *dtype_msg(const char *call, char *buf, int dtype)
{
	snprintf(buf, 64, "%s: invalid datatype %d", call, dtype);
	return buf;
}

static const char *op_msg(const char *call, char *buf, int op)
{
	snprintf(buf, 64, "%s: invalid op %d", call, op);
	return buf;
}

static const char *root_msg(const char *call, char *buf, int root)
{
	snprintf(buf, 64, "%s: root %d is not a rank", call, root);
	return buf;
}

static const char *count_msg(const char *call, char *buf, size_t count)
{
	snprintf(buf, 64, "%s: count %zu", call, count);
	return buf;
}

static int bad_input(struct coll_ctx *c)
{
	weft_comm_t comm = c->comm;
	int n = c->nranks, rank = c->rank, ret = 0;
	int mid = n / 2;
	float a[64] = {0}, b[64 * 8] = {0};
	float big[16 * 8];
	weft_request_t req;
	char bad_dt[64], bad_op[64], bad_root[64], huge[64];
	harness_progress("bad input");

	/* reduce_scatter */
	ret |= expect_invalid(c, weft_reduce_scatter(NULL, b, 4, WEFT_FLOAT32, WEFT_SUM, comm),
			      "reduce_scatter(NULL sendbuf)", "weft_reduce_scatter: sendbuf",
			      "is NULL");
	ret |= expect_invalid(c, weft_reduce_scatter(b, NULL, 4, WEFT_FLOAT32, WEFT_SUM, comm),
			      "reduce_scatter(NULL recvbuf)",
			      "weft_reduce_scatter: recvbuf is NULL", NULL);
	ret |= expect_invalid(
	    c, weft_reduce_scatter(WEFT_IN_PLACE, NULL, 4, WEFT_FLOAT32, WEFT_SUM, comm),
	    "reduce_scatter(WEFT_IN_PLACE, NULL recvbuf)", "weft_reduce_scatter: recvbuf is NULL",
	    NULL);
	ret |= expect_invalid(c, weft_reduce_scatter(b, a, 4, WEFT_DATATYPE_COUNT, WEFT_SUM, comm),
			      "reduce_scatter(bad datatype)",
			      dtype_msg("weft_reduce_scatter", bad_dt, WEFT_DATATYPE_COUNT), NULL);
	ret |= expect_invalid(c, weft_reduce_scatter(b, a, 4, WEFT_FLOAT32, WEFT_OP_COUNT, comm),
			      "reduce_scatter(bad op)",
			      op_msg("weft_reduce_scatter", bad_op, WEFT_OP_COUNT), NULL);
	ret |=
	    expect_invalid(c, weft_reduce_scatter(b, a, SIZE_MAX / 4, WEFT_FLOAT32, WEFT_SUM, comm),
			   "reduce_scatter(count overflow)",
			   count_msg("weft_reduce_scatter", huge, SIZE_MAX / 4), "overflows");
	ret |= expect_invalid(c, weft_ireduce_scatter(b, a, 4, WEFT_FLOAT32, WEFT_SUM, comm, NULL),
			      "ireduce_scatter(NULL request)",
			      "weft_ireduce_scatter: request is NULL", NULL);
	req = (weft_request_t)(uintptr_t)1;
	ret |= expect_invalid(
	    c, weft_ireduce_scatter(NULL, a, 4, WEFT_FLOAT32, WEFT_SUM, comm, &req),
	    "ireduce_scatter(NULL sendbuf)", "weft_ireduce_scatter: sendbuf", "is NULL");
	ret |= expect_request_null(req, "ireduce_scatter(NULL sendbuf)");

	/* broadcast */
	ret |= expect_invalid(c, weft_broadcast(a, a, 4, WEFT_FLOAT32, -1, comm),
			      "broadcast(root -1)", "weft_broadcast: root -1 is not a rank", NULL);
	ret |=
	    expect_invalid(c, weft_broadcast(a, a, 4, WEFT_FLOAT32, n, comm),
			   "broadcast(root nranks)", root_msg("weft_broadcast", bad_root, n), NULL);
	ret |= expect_invalid(c, weft_broadcast(a, NULL, 4, WEFT_FLOAT32, 0, comm),
			      "broadcast(NULL recvbuf)", "weft_broadcast: recvbuf is NULL", NULL);
	ret |= expect_invalid(c, weft_broadcast(a, a, 4, WEFT_DATATYPE_COUNT, 0, comm),
			      "broadcast(bad datatype)",
			      dtype_msg("weft_broadcast", bad_dt, WEFT_DATATYPE_COUNT), NULL);
	if (rank == mid) /* only the root reads sendbuf; the others would start a broadcast */
		ret |= expect_invalid(c, weft_broadcast(NULL, a, 4, WEFT_FLOAT32, mid, comm),
				      "broadcast(NULL sendbuf on the root)",
				      "weft_broadcast: sendbuf on the root is NULL", NULL);
	req = (weft_request_t)(uintptr_t)1;
	ret |= expect_invalid(c, weft_ibroadcast(a, a, 4, WEFT_FLOAT32, n + 5, comm, &req),
			      "ibroadcast(root nranks+5)",
			      root_msg("weft_ibroadcast", bad_root, n + 5), NULL);
	ret |= expect_request_null(req, "ibroadcast(bad root)");

	/* reduce */
	ret |= expect_invalid(c, weft_reduce(a, a, 4, WEFT_FLOAT32, WEFT_SUM, -1, comm),
			      "reduce(root -1)", "weft_reduce: root -1 is not a rank", NULL);
	ret |= expect_invalid(c, weft_reduce(a, a, 4, WEFT_FLOAT32, WEFT_SUM, n, comm),
			      "reduce(root nranks)", root_msg("weft_reduce", bad_root, n), NULL);
	ret |= expect_invalid(c, weft_reduce(NULL, a, 4, WEFT_FLOAT32, WEFT_SUM, 0, comm),
			      "reduce(NULL sendbuf)", "weft_reduce: sendbuf is NULL", NULL);
	ret |= expect_invalid(c, weft_reduce(a, a, 4, WEFT_FLOAT32, WEFT_OP_COUNT, 0, comm),
			      "reduce(bad op)", op_msg("weft_reduce", bad_op, WEFT_OP_COUNT), NULL);
	if (rank == mid)
		ret |= expect_invalid(c, weft_reduce(a, NULL, 4, WEFT_FLOAT32, WEFT_SUM, mid, comm),
				      "reduce(NULL recvbuf on the root)",
				      "weft_reduce: recvbuf on the root is NULL", NULL);
	if (rank != mid) /* WEFT_IN_PLACE means nothing off the root: no input */
		ret |= expect_invalid(
		    c, weft_reduce(WEFT_IN_PLACE, a, 4, WEFT_FLOAT32, WEFT_SUM, mid, comm),
		    "reduce(WEFT_IN_PLACE off the root)", "weft_reduce: sendbuf is NULL", NULL);
	req = (weft_request_t)(uintptr_t)1;
	ret |= expect_invalid(c, weft_ireduce(a, a, 4, WEFT_FLOAT32, WEFT_SUM, -7, comm, &req),
			      "ireduce(root -7)", "weft_ireduce: root -7 is not a rank", NULL);
	ret |= expect_request_null(req, "ireduce(bad root)");

	/* alltoall: 4 floats per peer */
	ret |= expect_invalid(c, weft_alltoall(big, big, 4, WEFT_FLOAT32, comm),
			      "alltoall(sendbuf == recvbuf)",
			      "weft_alltoall: sendbuf and recvbuf overlap", NULL);
	ret |= expect_invalid(c, weft_alltoall(big, big + 1, 4, WEFT_FLOAT32, comm),
			      "alltoall(recvbuf = sendbuf + 1 element)",
			      "weft_alltoall: sendbuf and recvbuf overlap", NULL);
	ret |= expect_invalid(c, weft_alltoall(big + 4 * n - 1, big, 4, WEFT_FLOAT32, comm),
			      "alltoall(sendbuf overlaps the end of recvbuf)",
			      "weft_alltoall: sendbuf and recvbuf overlap", NULL);
	ret |= expect_invalid(c, weft_alltoall(WEFT_IN_PLACE, big, 4, WEFT_FLOAT32, comm),
			      "alltoall(WEFT_IN_PLACE)", "weft_alltoall: sendbuf is NULL", NULL);
	ret |= expect_invalid(c, weft_alltoall(NULL, big, 4, WEFT_FLOAT32, comm),
			      "alltoall(NULL sendbuf)", "weft_alltoall: sendbuf is NULL", NULL);
	ret |= expect_invalid(c, weft_alltoall(big, NULL, 4, WEFT_FLOAT32, comm),
			      "alltoall(NULL recvbuf)", "weft_alltoall: recvbuf is NULL", NULL);
	ret |= expect_invalid(c, weft_alltoall(big, b, SIZE_MAX / 2, WEFT_FLOAT32, comm),
			      "alltoall(count overflow)",
			      count_msg("weft_alltoall", huge, SIZE_MAX / 2), "overflows");
	req = (weft_request_t)(uintptr_t)1;
	ret |= expect_invalid(c, weft_ialltoall(big, big + 2, 4, WEFT_FLOAT32, comm, &req),
			      "ialltoall(overlap)", "weft_ialltoall: sendbuf and recvbuf overlap",
			      NULL);
	ret |= expect_request_null(req, "ialltoall(overlap)");

	/* barrier */
	ret |= expect_invalid(c, weft_ibarrier(comm, NULL), "ibarrier(NULL request)",
			      "weft_ibarrier: request is NULL", NULL);
	weft_status_t st = weft_barrier(NULL);
	if (st != WEFT_ERR_INVALID_ARG)
		ret |= harness_fail("weft_barrier(NULL): %s, expected invalid argument",
				    weft_status_string(st));
	req = (weft_request_t)(uintptr_t)1;
	st = weft_ibarrier(NULL, &req);
	if (st != WEFT_ERR_INVALID_ARG || req)
		ret |= harness_fail("weft_ibarrier(NULL comm): %s, request %p",
				    weft_status_string(st), (void *)req);
	st = weft_broadcast(a, a, 4, WEFT_FLOAT32, 0, NULL);
	if (st != WEFT_ERR_INVALID_ARG ||
	    !harness_mentions(weft_init_last_error(), "weft_broadcast: comm is NULL"))
		ret |= harness_fail("weft_broadcast(NULL comm): %s, message \"%s\"",
				    weft_status_string(st), weft_init_last_error());

	/* Count 0 with NULL buffers: a valid no-op everywhere, blocking or not. */
	harness_progress("count 0 with NULL buffers");
	struct {
		const char *call;
		weft_status_t st;
	} zero[] = {
	    {"reduce_scatter", weft_reduce_scatter(NULL, NULL, 0, WEFT_FLOAT32, WEFT_SUM, comm)},
	    {"broadcast", weft_broadcast(NULL, NULL, 0, WEFT_INT8, n - 1, comm)},
	    {"reduce", weft_reduce(NULL, NULL, 0, WEFT_FLOAT16, WEFT_AVG, 0, comm)},
	    {"alltoall", weft_alltoall(NULL, NULL, 0, WEFT_UINT64, comm)},
	};
	for (size_t k = 0; k < sizeof(zero) / sizeof(zero[0]); k++)
		if (zero[k].st != WEFT_SUCCESS)
			ret |= harness_fail_status(comm, zero[k].st, "%s count 0 with NULL buffers",
						   zero[k].call);
	req = NULL;
	st = coll_complete(weft_ialltoall(NULL, NULL, 0, WEFT_INT32, comm, &req), &req);
	if (st != WEFT_SUCCESS)
		ret |= harness_fail_status(comm, st, "ialltoall count 0 with NULL buffers");
	req = NULL;
	st = coll_complete(weft_ireduce(NULL, NULL, 0, WEFT_INT32, WEFT_MAX, n - 1, comm, &req),
			   &req);
	if (st != WEFT_SUCCESS)
		ret |= harness_fail_status(comm, st, "ireduce count 0 with NULL buffers");
	return ret ? 1 : 0;
}

static int bad_alltoallv(struct coll_ctx *c)
{
	weft_comm_t comm = c->comm;
	int n = c->nranks, me = c->rank, ret = 0;
	size_t cnt[8], dsp[8], cnt2[8], huge[8];
	float buf[64] = {0}, out[64];
	for (int r = 0; r < n; r++) {
		cnt[r] = 2;
		dsp[r] = (size_t)r * 2;
		cnt2[r] = r == me ? 3 : 2;
		huge[r] = r == n - 1 ? SIZE_MAX / 2 : 0;
	}
	ret |= expect_named(c, weft_alltoallv(buf, NULL, dsp, out, cnt, dsp, WEFT_FLOAT32, comm),
			    "alltoallv(NULL sendcounts)", "sendcounts");
	ret |= expect_named(c, weft_alltoallv(buf, cnt, NULL, out, cnt, dsp, WEFT_FLOAT32, comm),
			    "alltoallv(NULL sdispls)", "sdispls");
	ret |= expect_named(c, weft_alltoallv(buf, cnt, dsp, out, NULL, dsp, WEFT_FLOAT32, comm),
			    "alltoallv(NULL recvcounts)", "recvcounts");
	ret |= expect_named(c, weft_alltoallv(buf, cnt, dsp, out, cnt, NULL, WEFT_FLOAT32, comm),
			    "alltoallv(NULL rdispls)", "rdispls");
	ret |= expect_named(c, weft_alltoallv(NULL, cnt, dsp, out, cnt, dsp, WEFT_FLOAT32, comm),
			    "alltoallv(NULL sendbuf)", "sendbuf");
	ret |= expect_named(c, weft_alltoallv(buf, cnt, dsp, NULL, cnt, dsp, WEFT_FLOAT32, comm),
			    "alltoallv(NULL recvbuf)", "recvbuf");
	ret |= expect_named(
	    c, weft_alltoallv(WEFT_IN_PLACE, cnt, dsp, out, cnt, dsp, WEFT_FLOAT32, comm),
	    "alltoallv(WEFT_IN_PLACE)", "in place");
	ret |=
	    expect_named(c, weft_alltoallv(buf, cnt, dsp, out, cnt, dsp, WEFT_DATATYPE_COUNT, comm),
			 "alltoallv(bad datatype)", "datatype");
	ret |= expect_named(c, weft_alltoallv(buf, huge, dsp, out, cnt, dsp, WEFT_FLOAT32, comm),
			    "alltoallv(sendcount overflow)", "overflow");
	ret |= expect_named(c, weft_alltoallv(buf, cnt, dsp, out, cnt, huge, WEFT_FLOAT32, comm),
			    "alltoallv(rdispl overflow)", "overflow");
	ret |= expect_named(c, weft_alltoallv(buf, cnt2, dsp, out, cnt, dsp, WEFT_FLOAT32, comm),
			    "alltoallv(sendcounts[rank] != recvcounts[rank])", "itself");
	ret |= expect_named(c, weft_alltoallv(buf, cnt, dsp, buf + 1, cnt, dsp, WEFT_FLOAT32, comm),
			    "alltoallv(overlapping buffers)", "overlap");
	weft_request_t req = (weft_request_t)(uintptr_t)1;
	ret |= expect_named(
	    c, weft_ialltoallv(buf, cnt, dsp, NULL, cnt, dsp, WEFT_FLOAT32, comm, &req),
	    "ialltoallv(NULL recvbuf)", "recvbuf");
	if (req)
		ret |= harness_fail("ialltoallv(NULL recvbuf): failed but left a request");
	ret |=
	    expect_named(c, weft_ialltoallv(buf, cnt, dsp, out, cnt, dsp, WEFT_FLOAT32, comm, NULL),
			 "ialltoallv(NULL request)", "request");
	return ret;
}

static int bad_rooted(struct coll_ctx *c)
{
	weft_comm_t comm = c->comm;
	int n = c->nranks, me = c->rank, mid = n / 2, ret = 0;
	float a[8], b[8 * 8];
	weft_request_t req = (weft_request_t)(uintptr_t)1;
	ret |= expect_named(c, weft_gather(a, b, 4, WEFT_FLOAT32, -1, comm), "gather(root -1)",
			    "root");
	ret |= expect_named(c, weft_scatter(b, a, 4, WEFT_FLOAT32, n, comm), "scatter(root nranks)",
			    "root");
	ret |= expect_named(c, weft_gather(a, b, 4, WEFT_DATATYPE_COUNT, 0, comm),
			    "gather(bad datatype)", "datatype");
	ret |= expect_named(c, weft_scatter(b, a, SIZE_MAX / 2, WEFT_FLOAT32, 0, comm),
			    "scatter(count overflow)", "overflow");
	ret |= expect_named(c, weft_igather(a, b, 4, WEFT_FLOAT32, n + 3, comm, &req),
			    "igather(root nranks+3)", "root");
	if (req)
		ret |= harness_fail("igather(bad root): failed but left a request");
	ret |= expect_named(c, weft_iscatter(b, a, 4, WEFT_FLOAT32, 0, comm, NULL),
			    "iscatter(NULL request)", "request");
	if (me == mid) { /* the root's own checks; the others would start the call */
		ret |= expect_named(c, weft_gather(a, NULL, 4, WEFT_FLOAT32, mid, comm),
				    "gather(NULL recvbuf on the root)", "recvbuf");
		ret |= expect_named(c, weft_gather(NULL, b, 4, WEFT_FLOAT32, mid, comm),
				    "gather(NULL sendbuf on the root)", "sendbuf");
		ret |= expect_named(c, weft_gather(b + 1, b, 4, WEFT_FLOAT32, mid, comm),
				    "gather(sendbuf inside recvbuf)", "overlap");
		ret |= expect_named(c, weft_scatter(NULL, a, 4, WEFT_FLOAT32, mid, comm),
				    "scatter(NULL sendbuf on the root)", "sendbuf");
		ret |= expect_named(c, weft_scatter(b, NULL, 4, WEFT_FLOAT32, mid, comm),
				    "scatter(NULL recvbuf on the root)", "recvbuf");
		ret |= expect_named(c, weft_scatter(b, b + 1, 4, WEFT_FLOAT32, mid, comm),
				    "scatter(recvbuf inside sendbuf)", "overlap");
	} else {
		ret |= expect_named(c, weft_gather(WEFT_IN_PLACE, b, 4, WEFT_FLOAT32, mid, comm),
				    "gather(WEFT_IN_PLACE off the root)", "root only");
		ret |= expect_named(c, weft_gather(NULL, b, 4, WEFT_FLOAT32, mid, comm),
				    "gather(NULL sendbuf off the root)", "sendbuf");
		ret |= expect_named(
		    c, weft_scatter(b, (void *)WEFT_IN_PLACE, 4, WEFT_FLOAT32, mid, comm),
		    "scatter(WEFT_IN_PLACE off the root)", "root only");
		ret |= expect_named(c, weft_scatter(b, NULL, 4, WEFT_FLOAT32, mid, comm),
				    "scatter(NULL recvbuf off the root)", "recvbuf");
	}
	/* Count 0 with NULL buffers: a no-op everywhere. */
	weft_status_t st = weft_gather(NULL, NULL, 0, WEFT_INT8, 0, comm);
	if (st == WEFT_SUCCESS)
		st = weft_scatter(NULL, NULL, 0, WEFT_INT8, n - 1, comm);
	if (st != WEFT_SUCCESS)
		ret |= harness_fail_status(comm, st, "gather/scatter count 0 with NULL buffers");
	return ret;
}

/* arg: which of the two sets (BAD_*). */
enum { BAD_COLLS = 1, BAD_V = 2 };

static int bad_input_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int which = *(const int *)arg, ret = 0;
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	if (which & BAD_COLLS) {
		ret = bad_input(&c);
		/* Still usable after the rejected calls. */
		if (!ret && coll_broadcast(&c, &(struct coll_case){.count = 33,
								   .dt = WEFT_INT32,
								   .root = nranks - 1}) != COLL_OK)
			ret = 1;
	}
	if (!ret && (which & BAD_V)) {
		harness_progress("bad input (alltoallv, gather, scatter)");
		ret = bad_alltoallv(&c) | bad_rooted(&c);
		if (!ret && coll_alltoallv(&c, COLL_V_UNEVEN, 5, WEFT_INT32, false) != COLL_OK)
			ret = 1;
	}
	return ret ? ret : coll_end(&c);
}

/* Over shm 1..8 ranks (alltoallv, gather and scatter to 6), socket 2..8
 * (the first set not at 4 and 6, the second to 4). */
START_TEST(bad_input_job)
{
	bool socket = integ_over("socket");
	int which = (!socket || (_i != 4 && _i != 6) ? BAD_COLLS : 0) |
		    (_i <= (socket ? 4 : 6) ? BAD_V : 0);
	if (!which)
		return;
	struct integ_env e;
	integ_env_init(&e, 60);
	char label[96];
	snprintf(label, sizeof(label), "bad input over %s, nranks %d", integ_transport(), _i);
	struct harness_job job = {
	    .nranks = _i, .body = bad_input_body, .arg = &which, .timeout_s = 120};
	integ_run(&job, &e, label);
}
END_TEST

static void add(Suite *s)
{
	TCase *tc;
	if (integ_over("shm") && (tc = integ_tcase(s, "auto", 60))) {
		tcase_add_test(tc, status_strings);
		tcase_add_test(tc, datatype_sizes);
		tcase_add_test(tc, null_buffers);
		tcase_add_test(tc, bad_dtype_and_op);
		tcase_add_test(tc, count_overflow);
		tcase_add_test(tc, null_comm_and_request);
		tcase_add_test(tc, two_rank_errors);
		tcase_add_test(tc, init_bad_rank_and_size);
		tcase_add_test(tc, init_garbage_id);
		tcase_add_loop_test(tc, init_env_errors, 0, NENV_CASES);
		tcase_add_test(tc, init_env_works);
	}
	if ((tc = integ_tcase(s, "auto", 150)))
		tcase_add_loop_test(tc, bad_input_job, integ_over("socket") ? 2 : 1, 9);
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"errors", "shm socket", add};
	return integ_main(argc, argv, &suite);
}
