/*
 * test_errors.c — bad input gives a clear status and a message that names
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
 * where a rejected call must not leave the ranks out of step.
 */
#include <check.h>
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "harness.h"

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

static Suite *errors_suite(void)
{
	Suite *s = suite_create("errors");
	TCase *tc = tcase_create("arguments");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, status_strings);
	tcase_add_test(tc, datatype_sizes);
	tcase_add_test(tc, null_buffers);
	tcase_add_test(tc, bad_dtype_and_op);
	tcase_add_test(tc, count_overflow);
	tcase_add_test(tc, null_comm_and_request);
	tcase_add_test(tc, two_rank_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("init");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, init_bad_rank_and_size);
	tcase_add_test(tc, init_garbage_id);
	tcase_add_loop_test(tc, init_env_errors, 0, NENV_CASES);
	tcase_add_test(tc, init_env_works);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(errors_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
