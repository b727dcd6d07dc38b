/*
 * colls.c — checked calls of AllReduce, AllGather, ReduceScatter,
 * Broadcast, Reduce and AlltoAll (colls.h).
 */
#include "colls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void coll_init(struct coll_ctx *c, weft_comm_t comm, int rank, int nranks)
{
	memset(c, 0, sizeof(*c));
	c->comm = comm;
	c->rank = rank;
	c->nranks = nranks;
}

int coll_end(struct coll_ctx *c)
{
	if (c->failures > COLL_SHOWN)
		harness_fail("... %d wrong cases in all", c->failures);
	return c->error ? 2 : c->failures ? 1 : 0;
}

enum coll_result coll_verdict(struct coll_ctx *c, const char *name, const char *why)
{
	if (!why[0])
		return COLL_OK;
	if (++c->failures <= COLL_SHOWN)
		harness_fail("%s: %s", name, why);
	return COLL_WRONG;
}

enum coll_result coll_status(struct coll_ctx *c, const char *name, weft_status_t st)
{
	if (st == WEFT_SUCCESS)
		return COLL_OK;
	harness_fail_status(c->comm, st, "%s", name);
	c->error = true;
	return COLL_ERROR;
}

weft_status_t coll_complete(weft_status_t st, weft_request_t *req)
{
	return st != WEFT_SUCCESS ? st : weft_wait(req);
}

static enum coll_result out_of_memory(struct coll_ctx *c, const char *name)
{
	harness_fail("%s: out of memory", name);
	c->error = true;
	return COLL_ERROR;
}

static void *xmalloc(size_t bytes)
{
	return malloc(bytes ? bytes : 1);
}

static const char *const form_names[COLL_FORMS] = {
    [COLL_OUT] = "out-of-place",
    [COLL_SAME] = "sendbuf==recvbuf",
    [COLL_IN_PLACE] = "WEFT_IN_PLACE",
    [COLL_OFFSET] = "in place at rank*count",
};

/* "iallreduce nranks 3 fp16 sum (rounding data) count 7 root 2 WEFT_IN_PLACE";
 * noted as the rank's last step too. */
static void case_name(char *buf, size_t cap, const char *coll, const struct coll_ctx *c,
		      const struct coll_case *k, bool op, bool root)
{
	char at[32] = "";
	if (root)
		snprintf(at, sizeof(at), " root %d", k->root);
	snprintf(buf, cap, "%s%s nranks %d %s%s%s%s count %zu%s %s%s", k->nb ? "i" : "", coll,
		 c->nranks, harness_dtype_name(k->dt), op ? " " : "",
		 op ? harness_op_name(k->op) : "", k->round ? " (rounding data)" : "", k->count, at,
		 form_names[k->form], k->nonroot_null ? " (NULL off the root)" : "");
	harness_progress("%s", buf);
}

static void input(const struct coll_case *k, void *buf, size_t count, int rank, int n,
		  unsigned salt)
{
	if (k->round)
		harness_round_input(buf, count, k->dt, k->op, rank, n, salt);
	else
		harness_ar_input(buf, count, k->dt, k->op, rank, n, salt);
}

static void expected(const struct coll_case *k, void *buf, size_t count, int n, unsigned salt)
{
	if (k->round)
		harness_round_expected(buf, count, k->dt, k->op, n, salt);
	else
		harness_ar_expected(buf, count, k->dt, k->op, n, salt);
}

/* why[0] set if a guard of @p b changed. */
static bool guard_bad(const struct harness_buf *b, const char *what, char *why, size_t cap)
{
	const char *g = harness_buf_guards(b);
	if (!*g)
		return false;
	snprintf(why, cap, "%s %s was written", g, what);
	return true;
}

enum coll_result coll_allreduce(struct coll_ctx *c, const struct coll_case *k)
{
	char name[224], why[256] = "";
	case_name(name, sizeof(name), "allreduce", c, k, true, false);
	size_t bytes = k->count * harness_dtype_size(k->dt);
	unsigned salt = ++c->salt;
	bool out = k->form == COLL_OUT;
	struct harness_buf send = {0}, recv = {0};
	unsigned char *want = xmalloc(bytes), *orig = xmalloc(bytes);
	enum coll_result res;
	c->cases++;
	if (!want || !orig || !harness_buf_alloc(&recv, bytes) ||
	    (out && !harness_buf_alloc(&send, bytes))) {
		res = out_of_memory(c, name);
		goto out_free;
	}
	unsigned char *in = out ? send.data : recv.data;
	input(k, in, k->count, c->rank, c->nranks, salt);
	memcpy(orig, in, bytes);
	const void *sendarg = out ? send.data : k->form == COLL_SAME ? recv.data : WEFT_IN_PLACE;
	weft_request_t req = NULL;
	weft_status_t st =
	    k->nb ? weft_iallreduce(sendarg, recv.data, k->count, k->dt, k->op, c->comm, &req)
		  : weft_allreduce(sendarg, recv.data, k->count, k->dt, k->op, c->comm);
	if ((res = coll_status(c, name, coll_complete(st, &req))) != COLL_OK)
		goto out_free;
	expected(k, want, k->count, c->nranks, salt);
	if (harness_compare(recv.data, want, k->count, k->dt, why, sizeof(why)) == SIZE_MAX &&
	    !guard_bad(&recv, "recvbuf", why, sizeof(why)) &&
	    !guard_bad(&send, "sendbuf", why, sizeof(why)) && out &&
	    memcmp(send.data, orig, bytes) != 0)
		snprintf(why, sizeof(why), "sendbuf was modified");
	res = coll_verdict(c, name, why);
out_free:
	harness_buf_free(&send);
	harness_buf_free(&recv);
	free(want);
	free(orig);
	return res;
}

/* A byte-wise comparison of @p bytes that names the block (of @p block
 * bytes, one per rank) and element where they first differ. */
static void compare_blocks(const unsigned char *got, const unsigned char *want, size_t bytes,
			   size_t block, size_t esize, char *why, size_t cap)
{
	size_t bad = harness_compare(got, want, bytes, WEFT_UINT8, NULL, 0);
	if (bad == SIZE_MAX)
		return;
	size_t nbad = 0;
	for (size_t k = bad; k < bytes; k++)
		nbad += got[k] != want[k];
	snprintf(why, cap,
		 "block %zu (rank %zu's) element %zu byte %zu: got 0x%02x, expected 0x%02x "
		 "(%zu bytes differ)",
		 bad / block, bad / block, (bad % block) / esize, bad % esize, got[bad], want[bad],
		 nbad);
}

enum coll_result coll_allgather(struct coll_ctx *c, const struct coll_case *k)
{
	char name[224], why[256] = "";
	case_name(name, sizeof(name), "allgather", c, k, false, false);
	size_t es = harness_dtype_size(k->dt), blk = k->count * es, all = blk * (size_t)c->nranks;
	unsigned salt = ++c->salt;
	bool out = k->form == COLL_OUT;
	struct harness_buf send = {0}, recv = {0};
	unsigned char *want = xmalloc(all), *orig = xmalloc(blk);
	enum coll_result res;
	c->cases++;
	if (!want || !orig || !harness_buf_alloc(&recv, all) ||
	    (out && !harness_buf_alloc(&send, blk))) {
		res = out_of_memory(c, name);
		goto out_free;
	}
	for (int r = 0; r < c->nranks; r++)
		harness_ag_input(want + (size_t)r * blk, k->count, k->dt, r, salt);
	unsigned char *mine = recv.data + (size_t)c->rank * blk;
	const void *sendarg = out ? send.data : k->form == COLL_IN_PLACE ? WEFT_IN_PLACE : mine;
	memcpy(out ? send.data : mine, want + (size_t)c->rank * blk, blk);
	memcpy(orig, want + (size_t)c->rank * blk, blk);
	weft_request_t req = NULL;
	weft_status_t st = k->nb
			       ? weft_iallgather(sendarg, recv.data, k->count, k->dt, c->comm, &req)
			       : weft_allgather(sendarg, recv.data, k->count, k->dt, c->comm);
	if ((res = coll_status(c, name, coll_complete(st, &req))) != COLL_OK)
		goto out_free;
	compare_blocks(recv.data, want, all, blk ? blk : 1, es, why, sizeof(why));
	if (!why[0] && !guard_bad(&recv, "recvbuf", why, sizeof(why)) &&
	    !guard_bad(&send, "sendbuf", why, sizeof(why)) && out &&
	    memcmp(send.data, orig, blk) != 0)
		snprintf(why, sizeof(why), "sendbuf was modified");
	res = coll_verdict(c, name, why);
out_free:
	harness_buf_free(&send);
	harness_buf_free(&recv);
	free(want);
	free(orig);
	return res;
}

/* The input lives in @p in (n blocks) in every form; out of place the
 * result goes to @p out, else into @p in: at its start (sendbuf ==
 * recvbuf, WEFT_IN_PLACE) or at this rank's block (COLL_OFFSET). */
static void rs_check(const struct coll_ctx *c, const struct coll_case *k,
		     const struct harness_buf *in, const struct harness_buf *out,
		     const unsigned char *result, const unsigned char *want,
		     const unsigned char *orig, char *why, size_t cap)
{
	size_t blk = k->count * harness_dtype_size(k->dt), n = (size_t)c->nranks;
	if (harness_compare(result, want + (size_t)c->rank * blk, k->count, k->dt, why, cap) !=
		SIZE_MAX ||
	    guard_bad(out, "recvbuf", why, cap) ||
	    guard_bad(in, k->form == COLL_OUT ? "sendbuf" : "the in-place buffer", why, cap))
		return;
	if (k->form == COLL_OUT && memcmp(in->data, orig, n * blk) != 0)
		snprintf(why, cap, "sendbuf was modified");
	for (size_t r = 0; k->form == COLL_OFFSET && !why[0] && r < n; r++)
		if (r != (size_t)c->rank && memcmp(in->data + r * blk, orig + r * blk, blk))
			snprintf(why, cap, "block %zu of sendbuf was modified", r);
}

enum coll_result coll_reduce_scatter(struct coll_ctx *c, const struct coll_case *k)
{
	char name[224], why[256] = "";
	case_name(name, sizeof(name), "reduce_scatter", c, k, true, false);
	size_t blk = k->count * harness_dtype_size(k->dt), n = (size_t)c->nranks, all = blk * n;
	unsigned salt = ++c->salt;
	bool out = k->form == COLL_OUT;
	struct harness_buf in = {0}, res_buf = {0};
	unsigned char *want = xmalloc(all), *orig = xmalloc(all);
	enum coll_result res;
	c->cases++;
	if (!want || !orig || !harness_buf_alloc(&in, all) ||
	    (out && !harness_buf_alloc(&res_buf, blk))) {
		res = out_of_memory(c, name);
		goto out_free;
	}
	input(k, in.data, k->count * n, c->rank, c->nranks, salt);
	memcpy(orig, in.data, all);
	const void *sendarg = k->form == COLL_IN_PLACE ? WEFT_IN_PLACE : in.data;
	unsigned char *result = out			 ? res_buf.data
				: k->form == COLL_OFFSET ? in.data + (size_t)c->rank * blk
							 : in.data;
	weft_request_t req = NULL;
	weft_status_t st =
	    k->nb ? weft_ireduce_scatter(sendarg, result, k->count, k->dt, k->op, c->comm, &req)
		  : weft_reduce_scatter(sendarg, result, k->count, k->dt, k->op, c->comm);
	if ((res = coll_status(c, name, coll_complete(st, &req))) != COLL_OK)
		goto out_free;
	expected(k, want, k->count * n, c->nranks, salt);
	rs_check(c, k, &in, &res_buf, result, want, orig, why, sizeof(why));
	res = coll_verdict(c, name, why);
out_free:
	harness_buf_free(&in);
	harness_buf_free(&res_buf);
	free(want);
	free(orig);
	return res;
}

/* The sendbuf a broadcast passes on this rank, after filling what it holds. */
static const void *bc_sendarg(const struct coll_ctx *c, const struct coll_case *k,
			      struct harness_buf *send, struct harness_buf *recv,
			      const unsigned char *want, unsigned salt)
{
	size_t bytes = k->count * harness_dtype_size(k->dt);
	if (c->rank == k->root) {
		memcpy(k->form == COLL_OUT ? send->data : recv->data, want, bytes);
		return k->form == COLL_OUT    ? send->data
		       : k->form == COLL_SAME ? (const void *)recv->data
					      : WEFT_IN_PLACE;
	}
	if (k->nonroot_null)
		return NULL;
	if (k->form == COLL_OUT && send->data) /* .nonroot_buffer: not to be read */
		harness_ag_input(send->data, k->count, k->dt, c->rank + 64, salt);
	return k->form == COLL_OUT ? send->data : k->form == COLL_SAME ? recv->data : WEFT_IN_PLACE;
}

enum coll_result coll_broadcast(struct coll_ctx *c, const struct coll_case *k)
{
	char name[224], why[256] = "";
	case_name(name, sizeof(name), "broadcast", c, k, false, true);
	size_t bytes = k->count * harness_dtype_size(k->dt);
	unsigned salt = ++c->salt;
	bool is_root = c->rank == k->root;
	bool separate = k->form == COLL_OUT && (is_root || (k->nonroot_buffer && !k->nonroot_null));
	struct harness_buf send = {0}, recv = {0};
	unsigned char *want = xmalloc(bytes), *orig = xmalloc(bytes);
	enum coll_result res;
	c->cases++;
	if (!want || !orig || !harness_buf_alloc(&recv, bytes) ||
	    (separate && !harness_buf_alloc(&send, bytes))) {
		res = out_of_memory(c, name);
		goto out_free;
	}
	harness_ag_input(want, k->count, k->dt, k->root + 1, salt);
	const void *sendarg = bc_sendarg(c, k, &send, &recv, want, salt);
	if (separate)
		memcpy(orig, send.data, bytes);
	weft_request_t req = NULL;
	weft_status_t st =
	    k->nb ? weft_ibroadcast(sendarg, recv.data, k->count, k->dt, k->root, c->comm, &req)
		  : weft_broadcast(sendarg, recv.data, k->count, k->dt, k->root, c->comm);
	if ((res = coll_status(c, name, coll_complete(st, &req))) != COLL_OK)
		goto out_free;
	compare_blocks(recv.data, want, bytes, bytes ? bytes : 1, harness_dtype_size(k->dt), why,
		       sizeof(why));
	if (!why[0] && !guard_bad(&recv, "recvbuf", why, sizeof(why)) &&
	    !guard_bad(&send, "sendbuf", why, sizeof(why)) && separate &&
	    memcmp(send.data, orig, bytes) != 0)
		snprintf(why, sizeof(why), "%s sendbuf was modified",
			 is_root ? "the root's" : "a non-root's");
	res = coll_verdict(c, name, why);
out_free:
	harness_buf_free(&send);
	harness_buf_free(&recv);
	free(want);
	free(orig);
	return res;
}

/* Where a reduce's input lives on this rank, and what it passes. */
struct rd_plan {
	bool input_in_recv; /* sendbuf == recvbuf, or WEFT_IN_PLACE on the root */
	bool null_recv;	    /* a non-root's NULL recvbuf */
	bool in_place;	    /* WEFT_IN_PLACE on the root */
};

static struct rd_plan rd_plan(const struct coll_ctx *c, const struct coll_case *k, unsigned salt)
{
	bool is_root = c->rank == k->root;
	enum coll_form f = !is_root && k->nonroot_null ? COLL_OUT : k->form;
	struct rd_plan p = {
	    .input_in_recv = f == COLL_SAME || (f == COLL_IN_PLACE && is_root),
	    .null_recv = !is_root && (k->nonroot_null || (f != COLL_SAME && salt % 2)),
	    .in_place = f == COLL_IN_PLACE && is_root,
	};
	return p;
}

static void rd_check(const struct coll_ctx *c, const struct coll_case *k, struct rd_plan p,
		     const struct harness_buf *send, const struct harness_buf *recv,
		     const unsigned char *want, const unsigned char *orig, char *why, size_t cap)
{
	size_t bytes = k->count * harness_dtype_size(k->dt);
	bool is_root = c->rank == k->root;
	if ((is_root && harness_compare(recv->data, want, k->count, k->dt, why, cap) != SIZE_MAX) ||
	    guard_bad(recv, "recvbuf", why, cap) || guard_bad(send, "sendbuf", why, cap))
		return;
	if (!p.input_in_recv && memcmp(send->data, orig, bytes) != 0)
		snprintf(why, cap, "sendbuf was modified");
	else if (!is_root && p.input_in_recv && memcmp(recv->data, orig, bytes) != 0)
		snprintf(why, cap, "a non-root's sendbuf (== recvbuf) was modified");
	else if (!is_root && !p.input_in_recv && recv->data) {
		size_t at = harness_first_written(recv->data, bytes);
		if (at != SIZE_MAX)
			snprintf(why, cap, "a non-root's recvbuf was written (byte %zu)", at);
	}
}

enum coll_result coll_reduce(struct coll_ctx *c, const struct coll_case *k)
{
	char name[224], why[256] = "";
	case_name(name, sizeof(name), "reduce", c, k, true, true);
	size_t bytes = k->count * harness_dtype_size(k->dt);
	unsigned salt = ++c->salt;
	struct rd_plan p = rd_plan(c, k, salt);
	struct harness_buf send = {0}, recv = {0};
	unsigned char *want = xmalloc(bytes), *orig = xmalloc(bytes);
	enum coll_result res;
	c->cases++;
	if (!want || !orig || (!p.input_in_recv && !harness_buf_alloc(&send, bytes)) ||
	    (!p.null_recv && !harness_buf_alloc(&recv, bytes))) {
		res = out_of_memory(c, name);
		goto out_free;
	}
	unsigned char *in = p.input_in_recv ? recv.data : send.data;
	input(k, in, k->count, c->rank, c->nranks, salt);
	memcpy(orig, in, bytes);
	const void *sendarg = p.in_place ? WEFT_IN_PLACE : in;
	weft_request_t req = NULL;
	weft_status_t st =
	    k->nb ? weft_ireduce(sendarg, recv.data, k->count, k->dt, k->op, k->root, c->comm, &req)
		  : weft_reduce(sendarg, recv.data, k->count, k->dt, k->op, k->root, c->comm);
	if ((res = coll_status(c, name, coll_complete(st, &req))) != COLL_OK)
		goto out_free;
	expected(k, want, k->count, c->nranks, salt);
	rd_check(c, k, p, &send, &recv, want, orig, why, sizeof(why));
	res = coll_verdict(c, name, why);
out_free:
	harness_buf_free(&send);
	harness_buf_free(&recv);
	free(want);
	free(orig);
	return res;
}

/* Block j of rank i's sendbuf carries seed i * nranks + j. */
enum coll_result coll_alltoall(struct coll_ctx *c, const struct coll_case *k)
{
	char name[224], why[256] = "";
	case_name(name, sizeof(name), "alltoall", c, k, false, false);
	int n = c->nranks;
	size_t es = harness_dtype_size(k->dt), blk = k->count * es, all = blk * (size_t)n;
	unsigned salt = ++c->salt;
	struct harness_buf send = {0}, recv = {0};
	unsigned char *want = xmalloc(all), *orig = xmalloc(all);
	enum coll_result res;
	c->cases++;
	if (!want || !orig || !harness_buf_alloc(&send, all) || !harness_buf_alloc(&recv, all)) {
		res = out_of_memory(c, name);
		goto out_free;
	}
	for (int j = 0; j < n; j++) {
		harness_ag_input(send.data + (size_t)j * blk, k->count, k->dt, c->rank * n + j,
				 salt);
		harness_ag_input(want + (size_t)j * blk, k->count, k->dt, j * n + c->rank, salt);
	}
	memcpy(orig, send.data, all);
	weft_request_t req = NULL;
	weft_status_t st =
	    k->nb ? weft_ialltoall(send.data, recv.data, k->count, k->dt, c->comm, &req)
		  : weft_alltoall(send.data, recv.data, k->count, k->dt, c->comm);
	if ((res = coll_status(c, name, coll_complete(st, &req))) != COLL_OK)
		goto out_free;
	compare_blocks(recv.data, want, all, blk ? blk : 1, es, why, sizeof(why));
	if (!why[0] && !guard_bad(&recv, "recvbuf", why, sizeof(why)) &&
	    !guard_bad(&send, "sendbuf", why, sizeof(why)) && memcmp(send.data, orig, all) != 0)
		snprintf(why, sizeof(why), "sendbuf was modified");
	res = coll_verdict(c, name, why);
out_free:
	harness_buf_free(&send);
	harness_buf_free(&recv);
	free(want);
	free(orig);
	return res;
}

int coll_samples(size_t shift, bool half, weft_datatype_t dt[COLL_SAMPLES_MAX],
		 weft_op_t op[COLL_SAMPLES_MAX])
{
	int k = 0, ci = (int)shift;
	for (int d = 0; d < WEFT_DATATYPE_COUNT; d++) {
		if (half && (d + ci) % 2)
			continue;
		dt[k] = (weft_datatype_t)d;
		op[k++] = (weft_op_t)((d + ci) % WEFT_OP_COUNT);
	}
	for (int o = 0; o < WEFT_OP_COUNT; o++) {
		dt[k] = (weft_datatype_t)((o * 3 + ci + 1) % WEFT_DATATYPE_COUNT);
		op[k++] = (weft_op_t)o;
	}
	return k;
}

void coll_rotation(unsigned rot, weft_datatype_t *dt, weft_op_t *op)
{
	static const struct {
		weft_datatype_t dt;
		weft_op_t op;
	} pairs[] = {
	    {WEFT_FLOAT32, WEFT_SUM},  {WEFT_FLOAT16, WEFT_AVG},  {WEFT_INT32, WEFT_MAX},
	    {WEFT_BFLOAT16, WEFT_SUM}, {WEFT_UINT8, WEFT_MIN},	  {WEFT_FLOAT64, WEFT_PROD},
	    {WEFT_INT64, WEFT_AVG},    {WEFT_BFLOAT16, WEFT_AVG}, {WEFT_UINT64, WEFT_SUM},
	    {WEFT_INT8, WEFT_PROD},    {WEFT_FLOAT16, WEFT_MIN},  {WEFT_UINT32, WEFT_MAX},
	    {WEFT_FLOAT32, WEFT_AVG},  {WEFT_UINT32, WEFT_AVG},	  {WEFT_INT8, WEFT_SUM},
	};
	*dt = pairs[rot % (sizeof(pairs) / sizeof(pairs[0]))].dt;
	*op = pairs[rot % (sizeof(pairs) / sizeof(pairs[0]))].op;
}

void coll_walk(struct coll_ctx *c, coll_walk_fn one)
{
	int n = c->nranks;
	size_t counts[] = {0, 1, 7, (size_t)n - 1, 4099, COLL_WALK_BIG};
	int roots[3] = {0, n - 1, n / 2};
	for (size_t k = 0; k < 6 && !c->error; k++) {
		if (k == 3 && (counts[k] == 0 || counts[k] == 1 || counts[k] == 7))
			continue; /* nranks-1 repeats a count already run */
		weft_datatype_t dt[COLL_SAMPLES_MAX];
		weft_op_t op[COLL_SAMPLES_MAX];
		int ns = coll_samples(k, n > 4 || k == 5, dt, op);
		if (k == 5)
			ns = 3;
		for (int s = 0; s < ns && !c->error; s++) {
			struct coll_case cs = {
			    .count = counts[k],
			    .dt = dt[s],
			    .op = op[s],
			    .form = (enum coll_form)((k + (size_t)s) % 3),
			    .root = roots[((size_t)s + k) % 3],
			    .nonroot_null = true,
			};
			one(c, k, s, &cs);
		}
	}
}
