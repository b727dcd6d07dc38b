/*
 * test_colls_v.c — AlltoAllv, Gather and Scatter through the public API.
 *
 * For each transport (shm, the default on one host; socket over lo) and
 * rank counts 1..8 (socket 2..6), one set of rank processes runs every case
 * in turn:
 *
 *  - alltoallv: per-pair counts that differ (some zero: pattern "uneven"),
 *    a rank that neither sends nor receives while the others exchange
 *    ("one idle": its task must still run, or the sequence numbers of the
 *    next collectives would part), and all blocks empty; send blocks laid
 *    out in reverse rank order with gaps, receive blocks in rank order
 *    with one-element gaps that must stay untouched; element sizes 1, 2,
 *    4 and 8;
 *  - gather and scatter, roots 0, last and middle, out of place, in place
 *    with WEFT_IN_PLACE and by pointer (the root's block already in
 *    place), a non-root's unused buffer passed as NULL or as a buffer that
 *    must stay untouched; counts 0, 1, 7, nranks-1, 4099 and 300001 for
 *    2-3 ranks;
 *  - blocking and non-blocking forms alternate; every element is checked,
 *    guard bytes around every buffer and the inputs must be unchanged;
 *  - several of them and an allreduce outstanding at once, waited for in
 *    orders that differ between ranks;
 *  - bad input: NULL arrays and buffers, blocks beyond the address space,
 *    a block to itself whose send and receive counts differ, overlapping
 *    buffers, bad roots, WEFT_IN_PLACE off the root, NULL requests: each
 *    WEFT_ERR_INVALID_ARG with a message naming the parameter, and the
 *    communicator stays usable.
 */
#include <check.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define G		   HARNESS_GUARD_BYTES
#define BIG_COUNT	   ((size_t)300001)
#define MAX_FAILURES_SHOWN 8
#define JOB_TIMEOUT_S	   120.0

struct ctx {
	weft_comm_t comm;
	int rank, nranks;
	bool cheap;
	unsigned salt;
	int failures;
};

enum case_result { CASE_OK, CASE_WRONG, CASE_ERROR };

/* [guard | data | guard], data filled with 0xcd: untouched bytes show. */
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
	memset(g->data, 0xcd, bytes);
	return true;
}

static void gbuf_free(struct gbuf *g)
{
	if (g->data)
		free(g->data - G);
	g->data = NULL;
}

static bool gbuf_guard_bad(const struct gbuf *g, const char *what, char *why, size_t cap)
{
	if (!g->data)
		return false;
	if (harness_guard_check(g->data - G, G) >= 0 ||
	    harness_guard_check(g->data + g->bytes, G) >= 0) {
		snprintf(why, cap, "a guard around %s was written", what);
		return true;
	}
	return false;
}

/* The first byte of [p, p + bytes) that is not 0xcd, or SIZE_MAX. */
static size_t first_written(const unsigned char *p, size_t bytes)
{
	for (size_t k = 0; k < bytes; k++)
		if (p[k] != 0xcd)
			return k;
	return SIZE_MAX;
}

static weft_status_t complete(weft_status_t st, weft_request_t *req)
{
	return st != WEFT_SUCCESS ? st : weft_wait(req);
}

static enum case_result wrong(struct ctx *c, const char *name, const char *why)
{
	if (++c->failures <= MAX_FAILURES_SHOWN)
		harness_fail("%s: %s", name, why);
	return CASE_WRONG;
}

/* ---- AlltoAllv */
enum v_pattern { V_UNEVEN, V_ONE_IDLE, V_EMPTY, V_PATTERNS };
static const char *const v_names[V_PATTERNS] = {"uneven", "one idle", "all empty"};

/* Elements rank i sends rank j. */
static size_t v_count(enum v_pattern p, size_t base, int i, int j, int n)
{
	switch (p) {
	case V_UNEVEN: return (i * 7 + j * 3) % 4 == 1 ? 0 : base + (size_t)((i * 5 + j * 11) % 13);
	case V_ONE_IDLE: return i == n - 1 || j == n - 1 ? 0 : base + (size_t)(i + 2 * j);
	default: return 0;
	}
}

struct v_layout {
	size_t *scount, *sdispl, *rcount, *rdispl;
	size_t send_elems, recv_elems; /* buffer sizes, gaps included */
};

/* Send blocks in reverse rank order with @p gap elements between them;
 * receive blocks in rank order with one element between them. */
static bool v_layout(struct v_layout *l, enum v_pattern p, size_t base, int rank, int n, size_t gap)
{
	l->scount = calloc((size_t)n, sizeof(size_t));
	l->sdispl = calloc((size_t)n, sizeof(size_t));
	l->rcount = calloc((size_t)n, sizeof(size_t));
	l->rdispl = calloc((size_t)n, sizeof(size_t));
	if (!l->scount || !l->sdispl || !l->rcount || !l->rdispl)
		return false;
	size_t off = 0;
	for (int j = n - 1; j >= 0; j--) {
		l->scount[j] = v_count(p, base, rank, j, n);
		l->sdispl[j] = off;
		off += l->scount[j] + gap;
	}
	l->send_elems = off;
	off = 0;
	for (int i = 0; i < n; i++) {
		l->rcount[i] = v_count(p, base, i, rank, n);
		l->rdispl[i] = off;
		off += l->rcount[i] + 1;
	}
	l->recv_elems = off;
	return true;
}

static void v_layout_free(struct v_layout *l)
{
	free(l->scount);
	free(l->sdispl);
	free(l->rcount);
	free(l->rdispl);
}

/* Every received block right, every gap untouched. */
static bool v_check(const struct ctx *c, const struct v_layout *l, const unsigned char *recv,
		    weft_datatype_t dt, unsigned salt, char *why, size_t cap)
{
	size_t esz = harness_dtype_size(dt), at = 0;
	unsigned char *want = malloc(BIG_COUNT * 8);
	bool ok = want != NULL;
	for (int i = 0; i < c->nranks && ok; i++) {
		size_t gap_bytes = (l->rdispl[i] - at) * esz;
		if (first_written(recv + at * esz, gap_bytes) != SIZE_MAX) {
			snprintf(why, cap, "the gap before the block from rank %d was written", i);
			ok = false;
			break;
		}
		harness_ag_input(want, l->rcount[i], dt, i * c->nranks + c->rank, salt);
		char more[200];
		if (harness_compare(recv + l->rdispl[i] * esz, want, l->rcount[i], dt, more,
				    sizeof(more)) != SIZE_MAX) {
			snprintf(why, cap, "block from rank %d: %s", i, more);
			ok = false;
		}
		at = l->rdispl[i] + l->rcount[i];
	}
	if (ok && first_written(recv + at * esz, (l->recv_elems - at) * esz) != SIZE_MAX) {
		snprintf(why, cap, "the gap after the last block was written");
		ok = false;
	}
	if (!want)
		snprintf(why, cap, "out of memory");
	free(want);
	return ok;
}

static enum case_result v_case(struct ctx *c, enum v_pattern p, size_t base, weft_datatype_t dt,
			       bool nb)
{
	int n = c->nranks, rank = c->rank;
	unsigned salt = ++c->salt;
	size_t esz = harness_dtype_size(dt), gap = salt % 3;
	char name[160];
	snprintf(name, sizeof(name), "%salltoallv nranks %d %s %s base %zu", nb ? "i" : "", n,
		 harness_dtype_name(dt), v_names[p], base);
	harness_progress("%s", name);
	struct v_layout l = {0};
	struct gbuf send = {0}, recv = {0};
	unsigned char *orig = NULL;
	enum case_result res = CASE_OK;
	if (!v_layout(&l, p, base, rank, n, gap) || !gbuf_alloc(&send, l.send_elems * esz) ||
	    !gbuf_alloc(&recv, l.recv_elems * esz) || !(orig = malloc(l.send_elems * esz + 1))) {
		harness_fail("%s: out of memory", name);
		res = CASE_ERROR;
		goto out_free;
	}
	for (int j = 0; j < n; j++)
		harness_ag_input(send.data + l.sdispl[j] * esz, l.scount[j], dt, rank * n + j,
				 salt);
	memcpy(orig, send.data, l.send_elems * esz);
	weft_request_t req = NULL;
	weft_status_t st = nb ? weft_ialltoallv(send.data, l.scount, l.sdispl, recv.data, l.rcount,
						l.rdispl, dt, c->comm, &req)
			      : weft_alltoallv(send.data, l.scount, l.sdispl, recv.data, l.rcount,
					       l.rdispl, dt, c->comm);
	if (nb && st == WEFT_SUCCESS && !req) {
		res = wrong(c, name, "weft_ialltoallv: success and a NULL request");
		goto out_free;
	}
	st = complete(st, &req);
	if (st != WEFT_SUCCESS) {
		harness_fail_status(c->comm, st, "%s", name);
		res = CASE_ERROR;
		goto out_free;
	}
	char why[256] = "";
	if (!v_check(c, &l, recv.data, dt, salt, why, sizeof(why)) ||
	    gbuf_guard_bad(&recv, "recvbuf", why, sizeof(why)) ||
	    gbuf_guard_bad(&send, "sendbuf", why, sizeof(why)))
		res = wrong(c, name, why);
	else if (memcmp(send.data, orig, l.send_elems * esz) != 0)
		res = wrong(c, name, "sendbuf was modified");
out_free:
	gbuf_free(&send);
	gbuf_free(&recv);
	free(orig);
	v_layout_free(&l);
	return res;
}

/* ---- Gather and Scatter */
enum root_form { RF_OUT, RF_IN_PLACE, RF_POINTER, RF_FORMS };
static const char *const rf_names[RF_FORMS] = {"out-of-place", "WEFT_IN_PLACE",
					       "in place by pointer"};

/* Gather: rank r's block carries seed r + 1; the root's recvbuf gets them all. */
static enum case_result gather_case(struct ctx *c, size_t count, weft_datatype_t dt, int root,
				    enum root_form form, bool nb)
{
	int n = c->nranks, rank = c->rank;
	unsigned salt = ++c->salt;
	bool is_root = rank == root, null_unused = !is_root && salt % 2;
	size_t blk = count * harness_dtype_size(dt), all = blk * (size_t)n;
	char name[192];
	snprintf(name, sizeof(name), "%sgather nranks %d %s count %zu root %d %s%s", nb ? "i" : "",
		 n, harness_dtype_name(dt), count, root, rf_names[form],
		 null_unused ? " (NULL recvbuf off the root)" : "");
	harness_progress("%s", name);
	struct gbuf send = {0}, recv = {0};
	unsigned char *want = malloc(all + 1);
	enum case_result res = CASE_OK;
	bool own_send = !is_root || form == RF_OUT;
	if (!want || (own_send && !gbuf_alloc(&send, blk)) ||
	    ((is_root || !null_unused) && !gbuf_alloc(&recv, is_root ? all : blk))) {
		harness_fail("%s: out of memory", name);
		res = CASE_ERROR;
		goto out_free;
	}
	for (int r = 0; r < n; r++)
		harness_ag_input(want + (size_t)r * blk, count, dt, r + 1, salt);
	unsigned char *mine = is_root ? recv.data + (size_t)root * blk : NULL;
	if (own_send)
		memcpy(send.data, want + (size_t)rank * blk, blk);
	else
		memcpy(mine, want + (size_t)rank * blk, blk);
	const void *sendarg = own_send ? send.data : form == RF_IN_PLACE ? WEFT_IN_PLACE : mine;
	weft_request_t req = NULL;
	weft_status_t st = nb ? weft_igather(sendarg, recv.data, count, dt, root, c->comm, &req)
			      : weft_gather(sendarg, recv.data, count, dt, root, c->comm);
	st = complete(st, &req);
	if (st != WEFT_SUCCESS) {
		harness_fail_status(c->comm, st, "%s", name);
		res = CASE_ERROR;
		goto out_free;
	}
	char why[256] = "";
	if (is_root &&
	    harness_compare(recv.data, want, all, WEFT_UINT8, why, sizeof(why)) != SIZE_MAX)
		res = wrong(c, name, why);
	else if (gbuf_guard_bad(&recv, "recvbuf", why, sizeof(why)) ||
		 gbuf_guard_bad(&send, "sendbuf", why, sizeof(why)))
		res = wrong(c, name, why);
	else if (own_send && memcmp(send.data, want + (size_t)rank * blk, blk) != 0)
		res = wrong(c, name, "sendbuf was modified");
	else if (!is_root && recv.data && first_written(recv.data, blk) != SIZE_MAX)
		res = wrong(c, name, "a non-root's recvbuf was written");
out_free:
	gbuf_free(&send);
	gbuf_free(&recv);
	free(want);
	return res;
}

/* Scatter: block r of the root's sendbuf carries seed r + 1. */
static enum case_result scatter_case(struct ctx *c, size_t count, weft_datatype_t dt, int root,
				     enum root_form form, bool nb)
{
	int n = c->nranks, rank = c->rank;
	unsigned salt = ++c->salt;
	bool is_root = rank == root, null_unused = !is_root && salt % 2;
	size_t blk = count * harness_dtype_size(dt), all = blk * (size_t)n;
	char name[192];
	snprintf(name, sizeof(name), "%sscatter nranks %d %s count %zu root %d %s%s", nb ? "i" : "",
		 n, harness_dtype_name(dt), count, root, rf_names[form],
		 null_unused ? " (NULL sendbuf off the root)" : "");
	harness_progress("%s", name);
	struct gbuf send = {0}, recv = {0};
	unsigned char *want = malloc(all + 1);
	enum case_result res = CASE_OK;
	bool own_recv = !is_root || form == RF_OUT;
	if (!want || (own_recv && !gbuf_alloc(&recv, blk)) ||
	    ((is_root || !null_unused) && !gbuf_alloc(&send, is_root ? all : blk))) {
		harness_fail("%s: out of memory", name);
		res = CASE_ERROR;
		goto out_free;
	}
	for (int r = 0; r < n; r++)
		harness_ag_input(want + (size_t)r * blk, count, dt, r + 1, salt);
	if (is_root)
		memcpy(send.data, want, all);
	unsigned char *mine = is_root ? send.data + (size_t)root * blk : NULL;
	void *recvarg = own_recv ? recv.data : form == RF_IN_PLACE ? (void *)WEFT_IN_PLACE : mine;
	weft_request_t req = NULL;
	weft_status_t st = nb ? weft_iscatter(send.data, recvarg, count, dt, root, c->comm, &req)
			      : weft_scatter(send.data, recvarg, count, dt, root, c->comm);
	st = complete(st, &req);
	if (st != WEFT_SUCCESS) {
		harness_fail_status(c->comm, st, "%s", name);
		res = CASE_ERROR;
		goto out_free;
	}
	char why[256] = "";
	const unsigned char *got = own_recv ? recv.data : mine;
	if (harness_compare(got, want + (size_t)rank * blk, blk, WEFT_UINT8, why, sizeof(why)) !=
	    SIZE_MAX)
		res = wrong(c, name, why);
	else if (gbuf_guard_bad(&recv, "recvbuf", why, sizeof(why)) ||
		 gbuf_guard_bad(&send, "sendbuf", why, sizeof(why)))
		res = wrong(c, name, why);
	else if (is_root && memcmp(send.data, want, all) != 0)
		res = wrong(c, name, "the root's sendbuf was modified");
	else if (!is_root && send.data && first_written(send.data, blk) != SIZE_MAX)
		res = wrong(c, name, "a non-root's sendbuf was written");
out_free:
	gbuf_free(&send);
	gbuf_free(&recv);
	free(want);
	return res;
}

/* ---- Several outstanding at once, waited for in rank-dependent orders. */
static int mixed_outstanding(struct ctx *c, int round)
{
	int n = c->nranks, rank = c->rank, ret = 0, root = (round + 1) % n;
	const size_t cnt = 1031;
	struct v_layout l = {0};
	unsigned salt = ++c->salt * 5;
	float *g_in = malloc(cnt * 4), *g_out = malloc(cnt * 4 * (size_t)n);
	float *s_in = malloc(cnt * 4 * (size_t)n), *s_out = malloc(cnt * 4);
	float *ar = malloc(cnt * 4), *ar_want = malloc(cnt * 4);
	unsigned char *v_in = NULL, *v_out = NULL, *want = malloc(cnt * 4 * (size_t)n);
	weft_request_t req[4] = {NULL};
	static const char *const names[4] = {"ialltoallv", "igather", "iscatter", "iallreduce"};
	if (!g_in || !g_out || !s_in || !s_out || !ar || !ar_want || !want ||
	    !v_layout(&l, round ? V_ONE_IDLE : V_UNEVEN, 300, rank, n, 1) ||
	    !(v_in = malloc(l.send_elems * 2 + 1)) || !(v_out = malloc(l.recv_elems * 2 + 1))) {
		ret = harness_fail("out of memory");
		goto out_free;
	}
	memset(v_out, 0xcd, l.recv_elems * 2);
	for (int j = 0; j < n; j++)
		harness_ag_input(v_in + l.sdispl[j] * 2, l.scount[j], WEFT_FLOAT16, rank * n + j,
				 salt);
	harness_ag_input(g_in, cnt, WEFT_FLOAT32, rank + 1, salt + 1);
	for (int r = 0; r < n; r++)
		harness_ag_input(s_in + (size_t)r * cnt, cnt, WEFT_FLOAT32, r + 7, salt + 2);
	harness_ar_input(ar, cnt, WEFT_FLOAT32, WEFT_SUM, rank, n, salt + 3);
	harness_ar_expected(ar_want, cnt, WEFT_FLOAT32, WEFT_SUM, n, salt + 3);
	harness_progress("mixed outstanding round %d: post", round);
	weft_status_t st[4];
	st[0] = weft_ialltoallv(v_in, l.scount, l.sdispl, v_out, l.rcount, l.rdispl, WEFT_FLOAT16,
				c->comm, &req[0]);
	st[1] = weft_igather(g_in, rank == root ? g_out : NULL, cnt, WEFT_FLOAT32, root, c->comm,
			     &req[1]);
	st[2] = weft_iscatter(rank == root ? s_in : NULL, s_out, cnt, WEFT_FLOAT32, root, c->comm,
			      &req[2]);
	st[3] = weft_iallreduce(WEFT_IN_PLACE, ar, cnt, WEFT_FLOAT32, WEFT_SUM, c->comm, &req[3]);
	for (int k = 0; k < 4 && !ret; k++)
		if (st[k] != WEFT_SUCCESS)
			ret = harness_fail_status(c->comm, st[k], "mixed: post %s", names[k]);
	for (int j = 0; j < 4 && !ret; j++) {
		int k = (rank + round) % 2 ? 3 - j : (j + rank) % 4;
		harness_progress("mixed outstanding round %d: wait %s", round, names[k]);
		weft_status_t w = weft_wait(&req[k]);
		if (w != WEFT_SUCCESS)
			ret = harness_fail_status(c->comm, w, "mixed: weft_wait(%s)", names[k]);
	}
	char why[256];
	if (!ret && !v_check(c, &l, v_out, WEFT_FLOAT16, salt, why, sizeof(why)))
		ret = harness_fail("mixed: ialltoallv: %s", why);
	for (int r = 0; r < n && !ret && rank == root; r++) {
		harness_ag_input(want, cnt, WEFT_FLOAT32, r + 1, salt + 1);
		if (harness_compare(g_out + (size_t)r * cnt, want, cnt, WEFT_FLOAT32, why,
				    sizeof(why)) != SIZE_MAX)
			ret = harness_fail("mixed: igather block %d: %s", r, why);
	}
	if (!ret) {
		harness_ag_input(want, cnt, WEFT_FLOAT32, rank + 7, salt + 2);
		if (harness_compare(s_out, want, cnt, WEFT_FLOAT32, why, sizeof(why)) != SIZE_MAX)
			ret = harness_fail("mixed: iscatter: %s", why);
	}
	if (!ret && harness_compare(ar, ar_want, cnt, WEFT_FLOAT32, why, sizeof(why)) != SIZE_MAX)
		ret = harness_fail("mixed: iallreduce: %s", why);
out_free:
	free(g_in);
	free(g_out);
	free(s_in);
	free(s_out);
	free(ar);
	free(ar_want);
	free(v_in);
	free(v_out);
	free(want);
	v_layout_free(&l);
	return ret;
}

/* ---- Bad input: local checks, so every rank makes the same calls (or
 * ones that never start an operation) and the ranks stay in step. */
static bool mentions(const char *msg, const char *word)
{
	for (const char *p = msg ? msg : ""; *p; p++) {
		size_t k = 0;
		while (word[k] && tolower((unsigned char)p[k]) == tolower((unsigned char)word[k]))
			k++;
		if (!word[k])
			return true;
	}
	return false;
}

static int expect_invalid(struct ctx *c, weft_status_t st, const char *call, const char *word)
{
	const char *msg = weft_comm_last_error(c->comm);
	if (st != WEFT_ERR_INVALID_ARG)
		return harness_fail("%s: returned %s (%d), expected invalid argument; \"%s\"", call,
				    weft_status_string(st), (int)st, msg);
	if (!mentions(msg, word))
		return harness_fail("%s: message \"%s\" does not name '%s'", call, msg, word);
	return 0;
}

static int bad_alltoallv(struct ctx *c)
{
	weft_comm_t comm = c->comm;
	int n = c->nranks, me = c->rank, ret = 0;
	size_t cnt[8], dsp[8], cnt2[8], huge[8];
	float buf[64], out[64];
	for (int r = 0; r < n; r++) {
		cnt[r] = 2;
		dsp[r] = (size_t)r * 2;
		cnt2[r] = r == me ? 3 : 2;
		huge[r] = r == n - 1 ? SIZE_MAX / 2 : 0;
	}
	ret |= expect_invalid(c, weft_alltoallv(buf, NULL, dsp, out, cnt, dsp, WEFT_FLOAT32, comm),
			      "alltoallv(NULL sendcounts)", "sendcounts");
	ret |= expect_invalid(c, weft_alltoallv(buf, cnt, NULL, out, cnt, dsp, WEFT_FLOAT32, comm),
			      "alltoallv(NULL sdispls)", "sdispls");
	ret |= expect_invalid(c, weft_alltoallv(buf, cnt, dsp, out, NULL, dsp, WEFT_FLOAT32, comm),
			      "alltoallv(NULL recvcounts)", "recvcounts");
	ret |= expect_invalid(c, weft_alltoallv(buf, cnt, dsp, out, cnt, NULL, WEFT_FLOAT32, comm),
			      "alltoallv(NULL rdispls)", "rdispls");
	ret |= expect_invalid(c, weft_alltoallv(NULL, cnt, dsp, out, cnt, dsp, WEFT_FLOAT32, comm),
			      "alltoallv(NULL sendbuf)", "sendbuf");
	ret |= expect_invalid(c, weft_alltoallv(buf, cnt, dsp, NULL, cnt, dsp, WEFT_FLOAT32, comm),
			      "alltoallv(NULL recvbuf)", "recvbuf");
	ret |= expect_invalid(
	    c, weft_alltoallv(WEFT_IN_PLACE, cnt, dsp, out, cnt, dsp, WEFT_FLOAT32, comm),
	    "alltoallv(WEFT_IN_PLACE)", "in place");
	ret |= expect_invalid(
	    c, weft_alltoallv(buf, cnt, dsp, out, cnt, dsp, WEFT_DATATYPE_COUNT, comm),
	    "alltoallv(bad datatype)", "datatype");
	ret |= expect_invalid(c, weft_alltoallv(buf, huge, dsp, out, cnt, dsp, WEFT_FLOAT32, comm),
			      "alltoallv(sendcount overflow)", "overflow");
	ret |= expect_invalid(c, weft_alltoallv(buf, cnt, dsp, out, cnt, huge, WEFT_FLOAT32, comm),
			      "alltoallv(rdispl overflow)", "overflow");
	ret |= expect_invalid(c, weft_alltoallv(buf, cnt2, dsp, out, cnt, dsp, WEFT_FLOAT32, comm),
			      "alltoallv(sendcounts[rank] != recvcounts[rank])", "itself");
	ret |=
	    expect_invalid(c, weft_alltoallv(buf, cnt, dsp, buf + 1, cnt, dsp, WEFT_FLOAT32, comm),
			   "alltoallv(overlapping buffers)", "overlap");
	weft_request_t req = (weft_request_t)(uintptr_t)1;
	ret |= expect_invalid(
	    c, weft_ialltoallv(buf, cnt, dsp, NULL, cnt, dsp, WEFT_FLOAT32, comm, &req),
	    "ialltoallv(NULL recvbuf)", "recvbuf");
	if (req)
		ret |= harness_fail("ialltoallv(NULL recvbuf): failed but left a request");
	ret |= expect_invalid(
	    c, weft_ialltoallv(buf, cnt, dsp, out, cnt, dsp, WEFT_FLOAT32, comm, NULL),
	    "ialltoallv(NULL request)", "request");
	return ret;
}

static int bad_rooted(struct ctx *c)
{
	weft_comm_t comm = c->comm;
	int n = c->nranks, me = c->rank, mid = n / 2, ret = 0;
	float a[8], b[8 * 8];
	weft_request_t req = (weft_request_t)(uintptr_t)1;
	ret |= expect_invalid(c, weft_gather(a, b, 4, WEFT_FLOAT32, -1, comm), "gather(root -1)",
			      "root");
	ret |= expect_invalid(c, weft_scatter(b, a, 4, WEFT_FLOAT32, n, comm),
			      "scatter(root nranks)", "root");
	ret |= expect_invalid(c, weft_gather(a, b, 4, WEFT_DATATYPE_COUNT, 0, comm),
			      "gather(bad datatype)", "datatype");
	ret |= expect_invalid(c, weft_scatter(b, a, SIZE_MAX / 2, WEFT_FLOAT32, 0, comm),
			      "scatter(count overflow)", "overflow");
	ret |= expect_invalid(c, weft_igather(a, b, 4, WEFT_FLOAT32, n + 3, comm, &req),
			      "igather(root nranks+3)", "root");
	if (req)
		ret |= harness_fail("igather(bad root): failed but left a request");
	ret |= expect_invalid(c, weft_iscatter(b, a, 4, WEFT_FLOAT32, 0, comm, NULL),
			      "iscatter(NULL request)", "request");
	if (me == mid) { /* the root's own checks; the others would start the call */
		ret |= expect_invalid(c, weft_gather(a, NULL, 4, WEFT_FLOAT32, mid, comm),
				      "gather(NULL recvbuf on the root)", "recvbuf");
		ret |= expect_invalid(c, weft_gather(NULL, b, 4, WEFT_FLOAT32, mid, comm),
				      "gather(NULL sendbuf on the root)", "sendbuf");
		ret |= expect_invalid(c, weft_gather(b + 1, b, 4, WEFT_FLOAT32, mid, comm),
				      "gather(sendbuf inside recvbuf)", "overlap");
		ret |= expect_invalid(c, weft_scatter(NULL, a, 4, WEFT_FLOAT32, mid, comm),
				      "scatter(NULL sendbuf on the root)", "sendbuf");
		ret |= expect_invalid(c, weft_scatter(b, NULL, 4, WEFT_FLOAT32, mid, comm),
				      "scatter(NULL recvbuf on the root)", "recvbuf");
		ret |= expect_invalid(c, weft_scatter(b, b + 1, 4, WEFT_FLOAT32, mid, comm),
				      "scatter(recvbuf inside sendbuf)", "overlap");
	} else {
		ret |= expect_invalid(c, weft_gather(WEFT_IN_PLACE, b, 4, WEFT_FLOAT32, mid, comm),
				      "gather(WEFT_IN_PLACE off the root)", "root only");
		ret |= expect_invalid(c, weft_gather(NULL, b, 4, WEFT_FLOAT32, mid, comm),
				      "gather(NULL sendbuf off the root)", "sendbuf");
		ret |= expect_invalid(
		    c, weft_scatter(b, (void *)WEFT_IN_PLACE, 4, WEFT_FLOAT32, mid, comm),
		    "scatter(WEFT_IN_PLACE off the root)", "root only");
		ret |= expect_invalid(c, weft_scatter(b, NULL, 4, WEFT_FLOAT32, mid, comm),
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

/* ---- the matrix */
static int matrix_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct ctx c = {.comm = comm, .rank = rank, .nranks = nranks, .cheap = arg != NULL};
	static const weft_datatype_t types[] = {WEFT_UINT8, WEFT_FLOAT16, WEFT_INT32, WEFT_FLOAT64};
	size_t counts[6], nc = 0;
	counts[nc++] = 0;
	counts[nc++] = 1;
	counts[nc++] = 7;
	if (nranks - 1 > 1 && nranks - 1 != 7)
		counts[nc++] = (size_t)nranks - 1;
	counts[nc++] = 4099;
	if (nranks <= 3 && !c.cheap)
		counts[nc++] = BIG_COUNT;
	int roots[3] = {0, nranks - 1, nranks / 2};
	int nroots = nranks > 2 ? 3 : nranks;
	enum case_result res = CASE_OK;
	unsigned rot = 0;
	static const size_t bases[] = {0, 1, 100, 70000};
	for (int p = 0; p < V_PATTERNS && res != CASE_ERROR; p++)
		for (size_t b = 0; b < 4 && res != CASE_ERROR; b++) {
			if ((p == V_EMPTY && b) || (c.cheap && b % 2 != (size_t)p % 2))
				continue;
			rot++;
			res = v_case(&c, (enum v_pattern)p, bases[b], types[rot % 4], rot % 2);
		}
	for (size_t k = 0; k < nc && res != CASE_ERROR; k++)
		for (int r = 0; r < nroots && res != CASE_ERROR; r++)
			for (int f = 0; f < RF_FORMS && res != CASE_ERROR; f++) {
				bool few = c.cheap || counts[k] == BIG_COUNT;
				if (few && (size_t)f != (k + (size_t)r) % RF_FORMS)
					continue;
				rot++;
				res = gather_case(&c, counts[k], types[rot % 4], roots[r],
						  (enum root_form)f, rot % 3 == 0);
				if (res == CASE_ERROR)
					break;
				res = scatter_case(&c, counts[k], types[(rot + 1) % 4], roots[r],
						   (enum root_form)f, rot % 3 == 1);
			}
	int ret = res == CASE_ERROR ? 2 : c.failures ? 1 : 0;
	if (c.failures > MAX_FAILURES_SHOWN)
		harness_fail("... %d wrong cases in all", c.failures);
	for (int round = 0; round < 2 && ret == 0; round++)
		ret = mixed_outstanding(&c, round);
	if (ret == 0 && !c.cheap && nranks <= 8) {
		harness_progress("bad input");
		ret = bad_alltoallv(&c) | bad_rooted(&c);
		/* Still usable after the rejected calls. */
		if (ret == 0 && v_case(&c, V_UNEVEN, 5, WEFT_INT32, false) != CASE_OK)
			ret = 1;
	}
	return ret;
}

static const char *const env_shm[] = {"WEFT_TIMEOUT=60", NULL};
static const char *const env_socket[] = {"WEFT_TIMEOUT=60", "WEFT_TRANSPORTS=socket",
					 "WEFT_SOCKET_IFNAME=lo", NULL};

static void run_job(int nranks, const char *const *env, const char *label, bool cheap)
{
	struct harness_result res;
	harness_run(nranks, env, matrix_body, cheap ? (void *)1 : NULL, JOB_TIMEOUT_S, &res);
	printf("colls_v %s nranks %d: %.1f s\n", label, nranks, res.seconds);
	fflush(stdout);
	ck_assert_msg(res.ok, "colls_v %s, nranks %d:\n%s", label, nranks, res.summary);
}

START_TEST(shm)
{
	run_job(_i, env_shm, "shm", _i >= 7);
}
END_TEST

START_TEST(socket)
{
	run_job(_i, env_socket, "socket", _i >= 5);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("colls_v");
	TCase *tc = tcase_create("matrix");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, shm, 1, 9);
	tcase_add_loop_test(tc, socket, 2, 7);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
