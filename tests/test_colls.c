/*
 * test_colls.c — ReduceScatter, Broadcast, Reduce, AlltoAll and Barrier
 * through the public API.
 *
 * For each transport (shm, the default on one host; socket over lo) and
 * rank counts 1..8, one set of rank processes runs every case in turn:
 *
 *  - reduce_scatter: out of place, WEFT_IN_PLACE (input in recvbuf, result
 *    at its start) and NCCL's in place (recvbuf = sendbuf + rank * count);
 *  - broadcast and reduce, roots 0, last and middle: out of place (the
 *    buffers a non-root does not use passed as NULL, or as a buffer that
 *    must stay untouched), WEFT_IN_PLACE and sendbuf == recvbuf on the root;
 *  - alltoall: every (source, destination) block distinct;
 *  - counts 0, 1, 7, nranks-1, 4099, and 300001 for 2-3 ranks; (datatype,
 *    op) samples in rotation, avg, fp16 and bf16 included; blocking and
 *    non-blocking forms alternate;
 *  - every element is checked against an exact value, guard bytes around
 *    every buffer must be untouched, and inputs must be unchanged;
 *  - barrier: one rank sleeps 200 ms before entering; no rank may leave
 *    before the last one entered (entry times compared on CLOCK_MONOTONIC);
 *    blocking and weft_ibarrier + weft_test;
 *  - bad input: invalid root, NULL buffers, overlapping alltoall buffers,
 *    bad datatype/op, count overflow, NULL request or communicator give
 *    WEFT_ERR_INVALID_ARG with a message that names the call and the
 *    argument, with its value where it has one ("weft_reduce: root -1 is not
 *    a rank", "weft_broadcast: invalid datatype 10"), and the communicator
 *    stays usable; count 0 with NULL buffers is a valid no-op.
 *
 * A second set forces each algorithm of the library's table in turn
 * (WEFT_ALGO=<coll>:<name>, from weft_algos_for()) on a smaller matrix.
 * Eight ranks on 2 cores are slow, so their jobs run few cases.
 * TEST_TIMES=1 makes rank 0 print how long each collective took.
 */
#include <check.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/algo.h"
#include "harness.h"

#define G		   HARNESS_GUARD_BYTES
#define BIG_COUNT	   ((size_t)300001)
#define MAX_FAILURES_SHOWN 8
#define JOB_TIMEOUT_S	   120.0

struct sample {
	weft_datatype_t dt;
	weft_op_t op;
};

/* (datatype, op) pairs taken in rotation: every type and op, avg with
 * integers and the half types. */
static const struct sample samples[] = {
    {WEFT_FLOAT32, WEFT_SUM},  {WEFT_FLOAT16, WEFT_AVG},  {WEFT_INT32, WEFT_MAX},
    {WEFT_BFLOAT16, WEFT_SUM}, {WEFT_UINT8, WEFT_MIN},	  {WEFT_FLOAT64, WEFT_PROD},
    {WEFT_INT64, WEFT_AVG},    {WEFT_BFLOAT16, WEFT_AVG}, {WEFT_UINT64, WEFT_SUM},
    {WEFT_INT8, WEFT_PROD},    {WEFT_FLOAT16, WEFT_MIN},  {WEFT_UINT32, WEFT_MAX},
    {WEFT_FLOAT32, WEFT_AVG},  {WEFT_UINT32, WEFT_AVG},	  {WEFT_INT8, WEFT_SUM},
};
#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))

struct plan {
	bool cheap;  /* few cases: 8 ranks, forced algorithms */
	bool big;    /* the BIG_COUNT cases */
	bool extras; /* bad input and barrier timing */
};

struct ctx {
	weft_comm_t comm;
	int rank, nranks;
	const struct plan *plan;
	unsigned salt; /* changes every case, so stale data never passes */
	int failures;
};

enum case_result { CASE_OK, CASE_WRONG, CASE_ERROR };

/* ---- buffers with guards: [guard | data | guard] */
struct gbuf {
	unsigned char *data;
	size_t bytes;
};

static bool gbuf_alloc(struct gbuf *g, size_t bytes)
{
	unsigned char *p = malloc(bytes + 2 * G);
	g->data = p ? p + G : NULL;
	g->bytes = bytes;
	if (!p)
		return false;
	harness_guard_fill(p, G);
	harness_guard_fill(p + G + bytes, G);
	memset(g->data, 0xcd, bytes); /* every element of a result must be written */
	return true;
}

static void gbuf_free(struct gbuf *g)
{
	if (g->data)
		free(g->data - G);
	g->data = NULL;
}

/* true if a guard of @p g changed; says which in @p why. */
static bool gbuf_guard_bad(const struct gbuf *g, const char *what, char *why, size_t cap)
{
	if (!g->data)
		return false;
	if (harness_guard_check(g->data - G, G) >= 0) {
		snprintf(why, cap, "the guard before %s was written", what);
		return true;
	}
	if (harness_guard_check(g->data + g->bytes, G) >= 0) {
		snprintf(why, cap, "the guard after %s was written", what);
		return true;
	}
	return false;
}

static void *xmalloc(size_t bytes)
{
	return malloc(bytes ? bytes : 1);
}

/* Finish a call: blocking ones come with a NULL request, which weft_wait
 * accepts; a non-blocking count-0 call may return one too. */
static weft_status_t complete(weft_status_t st, weft_request_t *req)
{
	if (st != WEFT_SUCCESS)
		return st;
	return weft_wait(req);
}

static enum case_result wrong(struct ctx *c, const char *name, const char *why)
{
	if (++c->failures <= MAX_FAILURES_SHOWN)
		harness_fail("%s: %s", name, why);
	return CASE_WRONG;
}

/* ---- ReduceScatter */
enum rs_form { RS_OUT, RS_IN_PLACE, RS_NCCL, RS_FORMS };
static const char *const rs_form_names[RS_FORMS] = {"out-of-place", "WEFT_IN_PLACE",
						    "recvbuf=sendbuf+rank*count"};

static enum case_result rs_case(struct ctx *c, size_t count, struct sample s, enum rs_form form,
				bool nb)
{
	int n = c->nranks, rank = c->rank;
	unsigned salt = ++c->salt;
	char name[192];
	snprintf(name, sizeof(name), "%sreduce_scatter nranks %d %s %s count %zu %s", nb ? "i" : "",
		 n, harness_dtype_name(s.dt), harness_op_name(s.op), count, rs_form_names[form]);
	harness_progress("%s", name);
	size_t esz = harness_dtype_size(s.dt), blk = count * esz, all = blk * (size_t)n;
	struct gbuf in = {0}, out = {0};
	unsigned char *want = xmalloc(all), *orig = xmalloc(all);
	enum case_result res = CASE_OK;
	if (!want || !orig || !gbuf_alloc(&in, all) || (form == RS_OUT && !gbuf_alloc(&out, blk))) {
		harness_fail("%s: out of memory", name);
		res = CASE_ERROR;
		goto out_free;
	}
	harness_ar_input(in.data, count * (size_t)n, s.dt, s.op, rank, n, salt);
	memcpy(orig, in.data, all);
	harness_ar_expected(want, count * (size_t)n, s.dt, s.op, n, salt);

	const void *sendarg = form == RS_IN_PLACE ? WEFT_IN_PLACE : in.data;
	unsigned char *result = form == RS_OUT	      ? out.data
				: form == RS_IN_PLACE ? in.data
						      : in.data + (size_t)rank * blk;
	weft_request_t req = NULL;
	weft_status_t st =
	    nb ? weft_ireduce_scatter(sendarg, result, count, s.dt, s.op, c->comm, &req)
	       : weft_reduce_scatter(sendarg, result, count, s.dt, s.op, c->comm);
	st = complete(st, &req);
	if (st != WEFT_SUCCESS) {
		harness_fail_status(c->comm, st, "%s", name);
		res = CASE_ERROR;
		goto out_free;
	}
	char why[256] = "";
	if (harness_compare(result, want + (size_t)rank * blk, count, s.dt, why, sizeof(why)) !=
		SIZE_MAX ||
	    gbuf_guard_bad(&out, "recvbuf", why, sizeof(why)) ||
	    gbuf_guard_bad(&in, form == RS_OUT ? "sendbuf" : "the in-place buffer", why,
			   sizeof(why)))
		res = wrong(c, name, why);
	else if (form == RS_OUT && memcmp(in.data, orig, all) != 0)
		res = wrong(c, name, "sendbuf was modified");
out_free:
	gbuf_free(&in);
	gbuf_free(&out);
	free(want);
	free(orig);
	return res;
}

/* ---- Broadcast */
enum root_form { RF_OUT, RF_IN_PLACE, RF_SAME, RF_FORMS };
static const char *const root_form_names[RF_FORMS] = {"out-of-place", "WEFT_IN_PLACE",
						      "sendbuf==recvbuf"};

static enum case_result bc_case(struct ctx *c, size_t count, weft_datatype_t dt, int root,
				enum root_form form, bool nb)
{
	int rank = c->rank;
	unsigned salt = ++c->salt;
	bool is_root = rank == root;
	char name[192];
	snprintf(name, sizeof(name), "%sbroadcast nranks %d %s count %zu root %d %s", nb ? "i" : "",
		 c->nranks, harness_dtype_name(dt), count, root, root_form_names[form]);
	harness_progress("%s", name);
	size_t bytes = count * harness_dtype_size(dt);
	struct gbuf send = {0}, recv = {0};
	unsigned char *want = xmalloc(bytes);
	enum case_result res = CASE_OK;
	bool separate = is_root && form == RF_OUT;
	if (!want || !gbuf_alloc(&recv, bytes) || (separate && !gbuf_alloc(&send, bytes))) {
		harness_fail("%s: out of memory", name);
		res = CASE_ERROR;
		goto out_free;
	}
	harness_ag_input(want, count, dt, root + 1, salt);
	if (is_root)
		memcpy(separate ? send.data : recv.data, want, bytes);
	/* Non-roots: NULL out of place (allowed), else the same form as the root. */
	const void *sendarg = form == RF_IN_PLACE ? WEFT_IN_PLACE
			      : form == RF_SAME	  ? (const void *)recv.data
						  : (const void *)send.data;
	weft_request_t req = NULL;
	weft_status_t st = nb ? weft_ibroadcast(sendarg, recv.data, count, dt, root, c->comm, &req)
			      : weft_broadcast(sendarg, recv.data, count, dt, root, c->comm);
	st = complete(st, &req);
	if (st != WEFT_SUCCESS) {
		harness_fail_status(c->comm, st, "%s", name);
		res = CASE_ERROR;
		goto out_free;
	}
	char why[256] = "";
	if (harness_compare(recv.data, want, bytes, WEFT_UINT8, why, sizeof(why)) != SIZE_MAX ||
	    gbuf_guard_bad(&recv, "recvbuf", why, sizeof(why)) ||
	    gbuf_guard_bad(&send, "sendbuf", why, sizeof(why)))
		res = wrong(c, name, why);
	else if (separate && memcmp(send.data, want, bytes) != 0)
		res = wrong(c, name, "the root's sendbuf was modified");
out_free:
	gbuf_free(&send);
	gbuf_free(&recv);
	free(want);
	return res;
}

/* ---- Reduce */
static enum case_result rd_case(struct ctx *c, size_t count, struct sample s, int root,
				enum root_form form, bool nb)
{
	int n = c->nranks, rank = c->rank;
	unsigned salt = ++c->salt;
	bool is_root = rank == root;
	/* A non-root's recvbuf out of place: NULL every other case, else a
	 * buffer that must stay untouched. */
	bool null_recv = !is_root && form != RF_SAME && (salt % 2);
	char name[192];
	snprintf(name, sizeof(name), "%sreduce nranks %d %s %s count %zu root %d %s%s",
		 nb ? "i" : "", n, harness_dtype_name(s.dt), harness_op_name(s.op), count, root,
		 root_form_names[form], null_recv ? " (NULL recvbuf off the root)" : "");
	harness_progress("%s", name);
	size_t bytes = count * harness_dtype_size(s.dt);
	struct gbuf send = {0}, recv = {0};
	unsigned char *want = xmalloc(bytes), *orig = xmalloc(bytes);
	enum case_result res = CASE_OK;
	/* Where this rank's input lives: in recvbuf for the in-place forms
	 * (a non-root's WEFT_IN_PLACE form passes an ordinary sendbuf). */
	bool input_in_recv = form == RF_SAME || (form == RF_IN_PLACE && is_root);
	bool need_send = !input_in_recv;
	if (!want || !orig || (need_send && !gbuf_alloc(&send, bytes)) ||
	    (!null_recv && !gbuf_alloc(&recv, bytes))) {
		harness_fail("%s: out of memory", name);
		res = CASE_ERROR;
		goto out_free;
	}
	unsigned char *input = input_in_recv ? recv.data : send.data;
	harness_ar_input(input, count, s.dt, s.op, rank, n, salt);
	memcpy(orig, input, bytes);
	harness_ar_expected(want, count, s.dt, s.op, n, salt);
	const void *sendarg =
	    input_in_recv ? (form == RF_IN_PLACE ? WEFT_IN_PLACE : recv.data) : send.data;
	weft_request_t req = NULL;
	weft_status_t st =
	    nb ? weft_ireduce(sendarg, recv.data, count, s.dt, s.op, root, c->comm, &req)
	       : weft_reduce(sendarg, recv.data, count, s.dt, s.op, root, c->comm);
	st = complete(st, &req);
	if (st != WEFT_SUCCESS) {
		harness_fail_status(c->comm, st, "%s", name);
		res = CASE_ERROR;
		goto out_free;
	}
	char why[256] = "";
	if (is_root && harness_compare(recv.data, want, count, s.dt, why, sizeof(why)) != SIZE_MAX)
		res = wrong(c, name, why);
	else if (gbuf_guard_bad(&recv, "recvbuf", why, sizeof(why)) ||
		 gbuf_guard_bad(&send, "sendbuf", why, sizeof(why)))
		res = wrong(c, name, why);
	else if (need_send && memcmp(send.data, orig, bytes) != 0)
		res = wrong(c, name, "sendbuf was modified");
	else if (!is_root && input_in_recv && memcmp(recv.data, orig, bytes) != 0)
		res = wrong(c, name, "a non-root's sendbuf (== recvbuf) was modified");
	else if (!is_root && !input_in_recv && recv.data) {
		for (size_t k = 0; k < bytes && res == CASE_OK; k++)
			if (recv.data[k] != 0xcd) {
				snprintf(why, sizeof(why),
					 "a non-root's recvbuf was written (byte %zu)", k);
				res = wrong(c, name, why);
			}
	}
out_free:
	gbuf_free(&send);
	gbuf_free(&recv);
	free(want);
	free(orig);
	return res;
}

/* ---- AlltoAll: block j of rank i carries seed i * nranks + j. */
static enum case_result a2a_case(struct ctx *c, size_t count, weft_datatype_t dt, bool nb)
{
	int n = c->nranks, rank = c->rank;
	unsigned salt = ++c->salt;
	char name[192];
	snprintf(name, sizeof(name), "%salltoall nranks %d %s count %zu", nb ? "i" : "", n,
		 harness_dtype_name(dt), count);
	harness_progress("%s", name);
	size_t blk = count * harness_dtype_size(dt), all = blk * (size_t)n;
	struct gbuf send = {0}, recv = {0};
	unsigned char *want = xmalloc(all), *orig = xmalloc(all);
	enum case_result res = CASE_OK;
	if (!want || !orig || !gbuf_alloc(&send, all) || !gbuf_alloc(&recv, all)) {
		harness_fail("%s: out of memory", name);
		res = CASE_ERROR;
		goto out_free;
	}
	for (int j = 0; j < n; j++) {
		harness_ag_input(send.data + (size_t)j * blk, count, dt, rank * n + j, salt);
		harness_ag_input(want + (size_t)j * blk, count, dt, j * n + rank, salt);
	}
	memcpy(orig, send.data, all);
	weft_request_t req = NULL;
	weft_status_t st = nb ? weft_ialltoall(send.data, recv.data, count, dt, c->comm, &req)
			      : weft_alltoall(send.data, recv.data, count, dt, c->comm);
	st = complete(st, &req);
	if (st != WEFT_SUCCESS) {
		harness_fail_status(c->comm, st, "%s", name);
		res = CASE_ERROR;
		goto out_free;
	}
	char why[256] = "";
	size_t bad = harness_compare(recv.data, want, all, WEFT_UINT8, why, sizeof(why));
	if (bad != SIZE_MAX) {
		char more[320];
		snprintf(more, sizeof(more), "block from rank %zu: %s", blk ? bad / blk : 0, why);
		res = wrong(c, name, more);
	} else if (gbuf_guard_bad(&recv, "recvbuf", why, sizeof(why)) ||
		   gbuf_guard_bad(&send, "sendbuf", why, sizeof(why))) {
		res = wrong(c, name, why);
	} else if (memcmp(send.data, orig, all) != 0) {
		res = wrong(c, name, "sendbuf was modified");
	}
out_free:
	gbuf_free(&send);
	gbuf_free(&recv);
	free(want);
	free(orig);
	return res;
}

/* ---- Barrier: nobody leaves before the last rank entered. */
static int barrier_timing(struct ctx *c)
{
	int n = c->nranks;
	double *enters = calloc((size_t)n, sizeof(double));
	if (!enters)
		return harness_fail("out of memory");
	int ret = 0;
	for (int trial = 0; trial < 3 && !ret; trial++) {
		int sleeper = trial == 0 ? n - 1 : trial == 1 ? 0 : n / 2;
		bool nb = trial == 2;
		harness_progress("%sbarrier trial %d: rank %d sleeps 200 ms", nb ? "i" : "", trial,
				 sleeper);
		if (c->rank == sleeper) {
			struct timespec ts = {0, 200 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
		double enter = harness_now();
		weft_status_t st;
		if (nb) {
			weft_request_t req = NULL;
			st = weft_ibarrier(c->comm, &req);
			if (st == WEFT_SUCCESS && !req)
				st = WEFT_ERR_INTERNAL,
				harness_fail("weft_ibarrier: success and a NULL request");
			while (st == WEFT_SUCCESS && req)
				if ((st = weft_test(&req)) == WEFT_INPROGRESS)
					st = WEFT_SUCCESS;
		} else {
			st = weft_barrier(c->comm);
		}
		double leave = harness_now();
		if (st != WEFT_SUCCESS) {
			ret = harness_fail_status(c->comm, st, "barrier trial %d", trial);
			break;
		}
		st = weft_allgather(&enter, enters, 1, WEFT_FLOAT64, c->comm);
		if (st != WEFT_SUCCESS) {
			ret = harness_fail_status(c->comm, st, "allgather of barrier entry times");
			break;
		}
		for (int r = 0; r < n && !ret; r++)
			if (leave < enters[r])
				ret =
				    harness_fail("%sbarrier trial %d: left at %.4f s, %.4f s "
						 "before rank %d entered",
						 nb ? "i" : "", trial, leave, enters[r] - leave, r);
		/* The sleeper entered >= 200 ms after it left the previous call;
		 * nobody may have left before that. */
		if (!ret && n > 1 && leave - enters[sleeper] < 0)
			ret = harness_fail(
			    "%sbarrier trial %d: left before rank %d ended its 200 ms sleep",
			    nb ? "i" : "", trial, sleeper);
	}
	for (int k = 0; k < 16 && !ret; k++) {
		harness_progress("back-to-back barrier %d", k);
		weft_status_t st = weft_barrier(c->comm);
		if (st != WEFT_SUCCESS)
			ret = harness_fail_status(c->comm, st, "back-to-back barrier %d", k);
	}
	free(enters);
	return ret;
}

/* ---- Bad input: local checks, so every rank makes the same calls (or a
 * subset that never starts an operation) and the ranks stay in step. */
static bool mentions(const char *msg, const char *word)
{
	if (!msg)
		return false;
	for (const char *p = msg; *p; p++) {
		size_t k = 0;
		while (word[k] && tolower((unsigned char)p[k]) == tolower((unsigned char)word[k]))
			k++;
		if (!word[k])
			return true;
	}
	return false;
}

/* @p st must be WEFT_ERR_INVALID_ARG with a message that contains @p says,
 * which names the call and the parameter ("weft_reduce: root -1 is not a
 * rank"), and @p also unless it is NULL. */
static int expect_invalid(struct ctx *c, weft_status_t st, const char *call, const char *says,
			  const char *also)
{
	const char *msg = c->comm ? weft_comm_last_error(c->comm) : "";
	if (st != WEFT_ERR_INVALID_ARG)
		return harness_fail(
		    "%s: returned %s (%d), expected invalid argument; message \"%s\"", call,
		    weft_status_string(st), (int)st, msg);
	if (!mentions(msg, says) || (also && !mentions(msg, also)))
		return harness_fail("%s: message \"%s\" does not say \"%s\"%s%s", call, msg, says,
				    also ? " and " : "", also ? also : "");
	return 0;
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

static int bad_input(struct ctx *c)
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
	    !mentions(weft_init_last_error(), "weft_broadcast: comm is NULL"))
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
	st = complete(weft_ialltoall(NULL, NULL, 0, WEFT_INT32, comm, &req), &req);
	if (st != WEFT_SUCCESS)
		ret |= harness_fail_status(comm, st, "ialltoall count 0 with NULL buffers");
	req = NULL;
	st = complete(weft_ireduce(NULL, NULL, 0, WEFT_INT32, WEFT_MAX, n - 1, comm, &req), &req);
	if (st != WEFT_SUCCESS)
		ret |= harness_fail_status(comm, st, "ireduce count 0 with NULL buffers");
	return ret ? 1 : 0;
}

/* ---- Several non-blocking operations of different kinds in flight on one
 * communicator at once, completed in an order that differs between ranks:
 * each result must be its own. */
static int mixed_outstanding(struct ctx *c, int round)
{
	int n = c->nranks, rank = c->rank, ret = 0;
	int bc_root = n - 1, rd_root = n / 2;
	const size_t rs_count = 4099, bc_count = 4099, rd_count = 1001, a2a_count = 513;
	unsigned salt = ++c->salt * 7;
	float *rs_in = malloc(rs_count * (size_t)n * 4), *rs_out = malloc(rs_count * 4);
	float *rs_want = malloc(rs_count * (size_t)n * 4);
	int32_t *bc = malloc(bc_count * 4), *bc_want = malloc(bc_count * 4);
	uint16_t *rd_in = malloc(rd_count * 2), *rd_out = malloc(rd_count * 2),
		 *rd_want = malloc(rd_count * 2);
	uint8_t *a2a_in = malloc(a2a_count * (size_t)n), *a2a_out = malloc(a2a_count * (size_t)n);
	uint8_t *a2a_want = malloc(a2a_count * (size_t)n);
	weft_request_t req[5] = {NULL};
	static const char *const names[5] = {"ireduce_scatter", "ibroadcast", "ireduce",
					     "ialltoall", "ibarrier"};
	if (!rs_in || !rs_out || !rs_want || !bc || !bc_want || !rd_in || !rd_out || !rd_want ||
	    !a2a_in || !a2a_out || !a2a_want) {
		ret = harness_fail("out of memory");
		goto out_free;
	}
	harness_ar_input(rs_in, rs_count * (size_t)n, WEFT_FLOAT32, WEFT_SUM, rank, n, salt);
	harness_ar_expected(rs_want, rs_count * (size_t)n, WEFT_FLOAT32, WEFT_SUM, n, salt);
	harness_ag_input(bc_want, bc_count, WEFT_INT32, bc_root + 1, salt + 1);
	if (rank == bc_root)
		memcpy(bc, bc_want, bc_count * 4);
	else
		memset(bc, 0xcd, bc_count * 4);
	harness_ar_input(rd_in, rd_count, WEFT_BFLOAT16, WEFT_AVG, rank, n, salt + 2);
	harness_ar_expected(rd_want, rd_count, WEFT_BFLOAT16, WEFT_AVG, n, salt + 2);
	for (int j = 0; j < n; j++) {
		harness_ag_input(a2a_in + (size_t)j * a2a_count, a2a_count, WEFT_UINT8,
				 rank * n + j, salt + 3);
		harness_ag_input(a2a_want + (size_t)j * a2a_count, a2a_count, WEFT_UINT8,
				 j * n + rank, salt + 3);
	}
	harness_progress("mixed outstanding round %d: post", round);
	weft_status_t st[5];
	st[0] =
	    weft_ireduce_scatter(rs_in, rs_out, rs_count, WEFT_FLOAT32, WEFT_SUM, c->comm, &req[0]);
	st[1] = weft_ibroadcast(rank == bc_root ? WEFT_IN_PLACE : NULL, bc, bc_count, WEFT_INT32,
				bc_root, c->comm, &req[1]);
	st[2] = weft_ireduce(rd_in, rank == rd_root ? rd_out : NULL, rd_count, WEFT_BFLOAT16,
			     WEFT_AVG, rd_root, c->comm, &req[2]);
	st[3] = weft_ialltoall(a2a_in, a2a_out, a2a_count, WEFT_UINT8, c->comm, &req[3]);
	st[4] = weft_ibarrier(c->comm, &req[4]);
	for (int k = 0; k < 5 && !ret; k++)
		if (st[k] != WEFT_SUCCESS)
			ret = harness_fail_status(c->comm, st[k], "mixed outstanding: post %s",
						  names[k]);
	for (int j = 0; j < 5 && !ret; j++) {
		int k = (rank + round) % 2 ? 4 - j : (j + rank) % 5;
		harness_progress("mixed outstanding round %d: wait %s", round, names[k]);
		weft_status_t w = weft_wait(&req[k]);
		if (w != WEFT_SUCCESS)
			ret = harness_fail_status(c->comm, w, "mixed outstanding: weft_wait(%s)",
						  names[k]);
	}
	char why[256];
	if (!ret && harness_compare(rs_out, rs_want + (size_t)rank * rs_count, rs_count,
				    WEFT_FLOAT32, why, sizeof(why)) != SIZE_MAX)
		ret = harness_fail("mixed outstanding: ireduce_scatter: %s", why);
	if (!ret &&
	    harness_compare(bc, bc_want, bc_count, WEFT_INT32, why, sizeof(why)) != SIZE_MAX)
		ret = harness_fail("mixed outstanding: ibroadcast: %s", why);
	if (!ret && rank == rd_root &&
	    harness_compare(rd_out, rd_want, rd_count, WEFT_BFLOAT16, why, sizeof(why)) != SIZE_MAX)
		ret = harness_fail("mixed outstanding: ireduce: %s", why);
	if (!ret && harness_compare(a2a_out, a2a_want, a2a_count * (size_t)n, WEFT_UINT8, why,
				    sizeof(why)) != SIZE_MAX)
		ret = harness_fail("mixed outstanding: ialltoall: %s", why);
out_free:
	free(rs_in);
	free(rs_out);
	free(rs_want);
	free(bc);
	free(bc_want);
	free(rd_in);
	free(rd_out);
	free(rd_want);
	free(a2a_in);
	free(a2a_out);
	free(a2a_want);
	return ret;
}

/* ---- the matrix */
static size_t pick_counts(const struct ctx *c, size_t *counts)
{
	int n = c->nranks;
	size_t k = 0;
	counts[k++] = 0;
	counts[k++] = 1;
	counts[k++] = 7;
	if (n - 1 > 1 && n - 1 != 7)
		counts[k++] = (size_t)n - 1;
	counts[k++] = 4099;
	if (c->plan->big && n <= 3)
		counts[k++] = BIG_COUNT;
	return k;
}

static size_t pick_roots(int n, int *roots)
{
	size_t k = 0;
	roots[k++] = 0;
	if (n > 1)
		roots[k++] = n - 1;
	if (n > 2)
		roots[k++] = n / 2;
	return k;
}

static void print_time(struct ctx *c, const char *what, double *t)
{
	if (c->rank == 0 && getenv("TEST_TIMES")) {
		fprintf(stderr, "  nranks %d %s: %.2f s\n", c->nranks, what, harness_now() - *t);
		*t = harness_now();
	}
}

static int matrix_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct ctx c = {.comm = comm, .rank = rank, .nranks = nranks, .plan = arg};
	bool cheap = c.plan->cheap;
	size_t counts[8], ncounts = pick_counts(&c, counts);
	int roots[3];
	size_t nroots = pick_roots(nranks, roots);
	enum case_result res = CASE_OK;
	unsigned rot = 0; /* rotation of samples, forms and roots */
	double t = harness_now();

	/* ReduceScatter: full: every form per count with a rotating sample;
	 * cheap: one form per count. */
	for (size_t k = 0; k < ncounts && res != CASE_ERROR; k++)
		for (int f = 0; f < RS_FORMS && res != CASE_ERROR; f++) {
			if (cheap && (size_t)f != k % RS_FORMS)
				continue;
			rot++;
			res = rs_case(&c, counts[k], samples[rot % NSAMPLES], (enum rs_form)f,
				      rot % 3 == 0);
		}
	print_time(&c, "reduce_scatter", &t);

	/* Broadcast: full: every root x form; cheap: one (root, form) per count. */
	static const weft_datatype_t bc_types[] = {WEFT_UINT8, WEFT_FLOAT32, WEFT_BFLOAT16,
						   WEFT_INT64, WEFT_FLOAT16};
	for (size_t k = 0; k < ncounts && res != CASE_ERROR; k++)
		for (size_t r = 0; r < nroots && res != CASE_ERROR; r++)
			for (int f = 0; f < RF_FORMS && res != CASE_ERROR; f++) {
				if (cheap && (r != k % nroots || (size_t)f != k % RF_FORMS))
					continue;
				if (!cheap && counts[k] == BIG_COUNT && (size_t)f != r % RF_FORMS)
					continue;
				rot++;
				res = bc_case(&c, counts[k], bc_types[rot % 5], roots[r],
					      (enum root_form)f, rot % 3 == 1);
			}
	print_time(&c, "broadcast", &t);

	/* Reduce: as broadcast, with (datatype, op) samples. */
	for (size_t k = 0; k < ncounts && res != CASE_ERROR; k++)
		for (size_t r = 0; r < nroots && res != CASE_ERROR; r++)
			for (int f = 0; f < RF_FORMS && res != CASE_ERROR; f++) {
				if (cheap &&
				    (r != (k + 1) % nroots || (size_t)f != (k + 1) % RF_FORMS))
					continue;
				if (!cheap && counts[k] == BIG_COUNT && (size_t)f != r % RF_FORMS)
					continue;
				rot++;
				res = rd_case(&c, counts[k], samples[rot % NSAMPLES], roots[r],
					      (enum root_form)f, rot % 3 == 2);
			}
	print_time(&c, "reduce", &t);

	/* AlltoAll: element sizes 1, 2, 4, 8. */
	static const weft_datatype_t a2a_types[] = {WEFT_INT8, WEFT_FLOAT16, WEFT_UINT32,
						    WEFT_FLOAT64};
	for (size_t k = 0; k < ncounts && res != CASE_ERROR; k++)
		for (int d = 0; d < 4 && res != CASE_ERROR; d++) {
			if ((cheap || counts[k] == BIG_COUNT) && (size_t)d != k % 4)
				continue;
			rot++;
			res = a2a_case(&c, counts[k], a2a_types[d], rot % 2 == 0);
		}
	print_time(&c, "alltoall", &t);

	int ret = res == CASE_ERROR ? 2 : c.failures ? 1 : 0;
	if (c.failures > MAX_FAILURES_SHOWN)
		harness_fail("... %d wrong cases in all", c.failures);
	for (int round = 0; round < 2 && ret == 0; round++)
		ret = mixed_outstanding(&c, round);
	print_time(&c, "mixed outstanding", &t);
	if (ret == 0 && c.plan->extras) {
		ret = bad_input(&c);
		print_time(&c, "bad input", &t);
		/* Still usable after the rejected calls. */
		if (ret == 0 && bc_case(&c, 33, WEFT_INT32, nranks - 1, RF_OUT, false) != CASE_OK)
			ret = 1;
		if (ret == 0)
			ret = barrier_timing(&c);
		print_time(&c, "barrier", &t);
	} else if (ret == 0) {
		for (int k = 0; k < 4 && ret == 0; k++) {
			harness_progress("barrier %d", k);
			weft_request_t req = NULL;
			weft_status_t st =
			    k % 2 ? weft_barrier(comm) : complete(weft_ibarrier(comm, &req), &req);
			if (st != WEFT_SUCCESS)
				ret = harness_fail_status(comm, st, "barrier %d", k);
		}
	}
	return ret;
}

/* ---- jobs */
static const char *const env_shm[] = {"WEFT_TIMEOUT=60", NULL};
static const char *const env_socket[] = {"WEFT_TIMEOUT=60", "WEFT_TRANSPORTS=socket",
					 "WEFT_SOCKET_IFNAME=lo", NULL};

static void run_job(int nranks, const char *const *base_env, const char *algo_env,
		    const char *label, struct plan plan)
{
	const char *env[8];
	size_t k = 0;
	for (; base_env[k]; k++)
		env[k] = base_env[k];
	if (algo_env)
		env[k++] = algo_env;
	env[k] = NULL;
	struct harness_result res;
	harness_run(nranks, env, matrix_body, &plan, JOB_TIMEOUT_S, &res);
	printf("colls %s%s%s nranks %d: %.1f s\n", label, algo_env ? " " : "",
	       algo_env ? algo_env : "", nranks, res.seconds);
	fflush(stdout);
	ck_assert_msg(res.ok, "colls %s %s, nranks %d:\n%s", label, algo_env ? algo_env : "auto",
		      nranks, res.summary);
}

START_TEST(auto_shm)
{
	run_job(_i, env_shm, NULL, "shm",
		(struct plan){.cheap = _i == 8, .big = true, .extras = true});
}
END_TEST

START_TEST(auto_socket)
{
	run_job(_i, env_socket, NULL, "socket",
		(struct plan){.cheap = _i >= 6, .big = _i == 2, .extras = _i != 4 && _i != 6});
}
END_TEST

/* WEFT_ALGO naming the k-th algorithm of every collective tested here that
 * has one; false when none has a k-th. */
static bool forced_spec(size_t k, char *buf, size_t cap)
{
	static const enum weft_coll_kind colls[] = {WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_BROADCAST,
						    WEFT_COLL_REDUCE, WEFT_COLL_ALLTOALL,
						    WEFT_COLL_BARRIER};
	size_t len = (size_t)snprintf(buf, cap, "WEFT_ALGO=");
	bool any = false;
	for (size_t c = 0; c < sizeof(colls) / sizeof(colls[0]); c++) {
		const struct weft_algo *const *algos = weft_algos_for(colls[c]);
		size_t have = 0;
		while (algos && algos[have])
			have++;
		if (k >= have)
			continue;
		len += (size_t)snprintf(buf + len, cap - len, "%s%s:%s", any ? ";" : "",
					weft_coll_name(colls[c]), algos[k]->name);
		any = true;
	}
	return any;
}

static const int forced_nranks[] = {2, 3, 5, 8};
#define NFORCED ((int)(sizeof(forced_nranks) / sizeof(forced_nranks[0])))

START_TEST(forced_shm)
{
	int nranks = forced_nranks[_i];
	char spec[256];
	for (size_t k = 0; forced_spec(k, spec, sizeof(spec)); k++)
		run_job(nranks, env_shm, spec, "shm",
			(struct plan){.cheap = nranks == 8, .big = nranks <= 3});
}
END_TEST

START_TEST(forced_socket)
{
	char spec[256];
	int nranks = _i == 0 ? 3 : 5;
	for (size_t k = 0; forced_spec(k, spec, sizeof(spec)); k++)
		run_job(nranks, env_socket, spec, "socket", (struct plan){.big = nranks == 3});
}
END_TEST

static Suite *colls_suite(void)
{
	Suite *s = suite_create("colls");
	TCase *tc = tcase_create("auto");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, auto_shm, 1, 9);
	tcase_add_loop_test(tc, auto_socket, 2, 9); /* one rank has no peer to reach */
	suite_add_tcase(s, tc);

	tc = tcase_create("forced");
	tcase_set_timeout(tc, 3 * JOB_TIMEOUT_S);
	tcase_add_loop_test(tc, forced_shm, 0, NFORCED);
	tcase_add_loop_test(tc, forced_socket, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(colls_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
