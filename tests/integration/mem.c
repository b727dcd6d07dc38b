/*
 * mem.c — weft_mem_alloc/free/register/deregister and the collectives
 * on their buffers; the intra-host shm AllReduce (algorithms/shmem/) in
 * its three forms: mapped in place, staged, and the latency path.
 *
 *  - semantics (one rank): allocation is zeroed, page aligned and local;
 *    free and reuse give a new generation; a pointer inside an allocation,
 *    a freed one, NULL and size 0 are refused with a message naming them;
 *    register/deregister likewise; a malloc pointer is not found (the
 *    ordinary path);
 *  - a stale mapping is never used: rank 1 frees its buffer and allocates
 *    another that gets the same descriptor number (checked: the premise of
 *    the test) but new contents; a peer that matched its cached mapping by
 *    descriptor alone would reduce the old pages and fail;
 *  - every collective on weft_mem buffers, and on mixes (even ranks
 *    weft_mem, odd ranks malloc; sendbuf weft_mem and recvbuf malloc), in
 *    place and out, odd counts, 1..8 ranks, shm and socket; the shm
 *    AllReduce with its defaults (plain and mixed buffers handed to the
 *    tuner's next choice) and staged (WEFT_SHMEM_STAGED=1, slots of 8 KiB,
 *    so that the staged path runs many rounds);
 *  - the latency path: counts around the 48-byte inline limit and the
 *    4 KiB cap, every dtype and op, blocking and non-blocking forms mixed
 *    across ranks in the same call (the task form and the inline form
 *    must meet), and a blocking call behind an unfinished iallreduce.
 * Every result is compared exactly with harness_ar_expected; guard bytes
 * around every buffer must be untouched.
 *
 * Over the transport the suite runs with (tests/lib/integ.h): shm (every
 * case above but the socket matrix; the stale mapping and the latency path
 * force the shm algorithm: its case "shm", the rest "auto"), socket (the
 * collectives on weft_mem buffers at 2, 3 and 5 ranks).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "integ.h"
#include "util/memfd.h"

#define JOB_TIMEOUT_S 240
#define G	      HARNESS_GUARD_BYTES

/* ---- buffers: weft_mem or malloc, with guards ---- */

struct tbuf {
	unsigned char *p; /* data; guards at p - G and p + bytes */
	bool mem;
};

static bool tbuf_alloc(weft_comm_t comm, struct tbuf *b, size_t bytes, bool mem)
{
	void *base = NULL;
	b->mem = mem;
	if (mem) {
		if (weft_mem_alloc(comm, bytes + 2 * G, &base) != WEFT_SUCCESS)
			return false;
	} else if (!(base = malloc(bytes + 2 * G))) {
		return false;
	}
	b->p = (unsigned char *)base + G;
	return true;
}

static void tbuf_free(weft_comm_t comm, struct tbuf *b)
{
	if (!b->p)
		return;
	if (b->mem)
		weft_mem_free(comm, b->p - G);
	else
		free(b->p - G);
	b->p = NULL;
}

static void guard(struct tbuf *b, size_t bytes)
{
	harness_guard_fill(b->p - G, G);
	harness_guard_fill(b->p + bytes, G);
}

static bool guard_ok(const struct tbuf *b, size_t bytes)
{
	return harness_guard_check(b->p - G, G) < 0 && harness_guard_check(b->p + bytes, G) < 0;
}

/* ---- semantics ---- */

static int expect_invalid(weft_comm_t comm, weft_status_t st, const char *what, const char *word)
{
	if (st != WEFT_ERR_INVALID_ARG)
		return harness_fail("%s: got %s, want WEFT_ERR_INVALID_ARG", what,
				    weft_status_string(st));
	if (comm && !strstr(weft_comm_last_error(comm), word))
		return harness_fail("%s: message \"%s\" does not name \"%s\"", what,
				    weft_comm_last_error(comm), word);
	return 0;
}

static int alloc_checks(weft_comm_t comm)
{
	void *p = (void *)1;
	int bad = expect_invalid(comm, weft_mem_alloc(comm, 0, &p), "alloc size 0", "size");
	if (!bad && p != NULL)
		bad = harness_fail("alloc size 0 left *ptr set");
	bad |= expect_invalid(comm, weft_mem_alloc(comm, 64, NULL), "alloc ptr NULL", "ptr");
	bad |= expect_invalid(NULL, weft_mem_alloc(NULL, 64, &p), "alloc comm NULL", "");
	weft_status_t st = weft_mem_alloc(comm, 10000, &p);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "weft_mem_alloc(10000)");
	unsigned char *c = p;
	for (size_t i = 0; i < 10000 && !bad; i++)
		if (c[i])
			bad = harness_fail("allocation not zeroed at %zu", i);
	if ((uintptr_t)p % 4096)
		bad |= harness_fail("allocation %p not page aligned", p);
	memset(p, 0x5a, 10000);
	struct weft_memfd_info a, b;
	if (!weft_memfd_find(c + 100, 200, &a) || a.base != p)
		bad |= harness_fail("a range inside the allocation is not found");
	if (weft_memfd_find(c + 9000, 5000, &b))
		bad |= harness_fail("a range past the allocation's end is found");
	bad |= expect_invalid(comm, weft_mem_free(comm, c + 64), "free inside", "weft_mem_alloc");
	bad |= expect_invalid(comm, weft_mem_free(comm, NULL), "free NULL", "ptr");
	if ((st = weft_mem_free(comm, p)) != WEFT_SUCCESS)
		bad |= harness_fail_status(comm, st, "weft_mem_free");
	bad |= expect_invalid(comm, weft_mem_free(comm, p), "double free", "weft_mem_alloc");
	void *q;
	if ((st = weft_mem_alloc(comm, 10000, &q)) != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "weft_mem_alloc again");
	if (!weft_memfd_find(q, 1, &b) || b.gen <= a.gen)
		bad |= harness_fail("reallocation: generation %llu after %llu (must grow)",
				    (unsigned long long)b.gen, (unsigned long long)a.gen);
	weft_mem_free(comm, q);
	return bad;
}

static int register_checks(weft_comm_t comm)
{
	char *m = malloc(4096);
	weft_mem_handle_t h = NULL;
	int bad =
	    expect_invalid(comm, weft_mem_register(comm, NULL, 1, &h), "register buf NULL", "buf");
	bad |= expect_invalid(comm, weft_mem_register(comm, m, 0, &h), "register size 0", "size");
	bad |= expect_invalid(comm, weft_mem_register(comm, m, 1, NULL), "register handle NULL",
			      "handle");
	weft_status_t st = weft_mem_register(comm, m, 4096, &h);
	if (st != WEFT_SUCCESS || !h)
		bad |= harness_fail_status(comm, st, "weft_mem_register");
	struct weft_memfd_info a;
	if (weft_memfd_find(m, 1, &a))
		bad |= harness_fail("registered malloc memory is found as mappable");
	if ((st = weft_mem_deregister(comm, h)) != WEFT_SUCCESS)
		bad |= harness_fail_status(comm, st, "weft_mem_deregister");
	bad |=
	    expect_invalid(comm, weft_mem_deregister(comm, h), "double deregister", "registration");
	free(m);
	return bad;
}

static int semantics_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	size_t before = weft_memfd_count();
	int bad = alloc_checks(comm) | register_checks(comm);
	if (weft_memfd_count() != before)
		bad |= harness_fail("%zu allocations leaked", weft_memfd_count() - before);
	return bad;
}

START_TEST(semantics)
{
	struct harness_result res;
	harness_run(1, NULL, semantics_body, NULL, 60, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* ---- a stale mapping is never used ---- */

#define STALE_COUNT (256u << 10) /* int32: 1 MiB, far above the latency path */

static int stale_round(weft_comm_t comm, int rank, int32_t *buf, int32_t mine, int32_t other)
{
	for (size_t i = 0; i < STALE_COUNT; i++)
		buf[i] = mine + (int32_t)(i % 7);
	weft_status_t st =
	    weft_allreduce(WEFT_IN_PLACE, buf, STALE_COUNT, WEFT_INT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "allreduce");
	for (size_t i = 0; i < STALE_COUNT; i++)
		if (buf[i] != mine + other + 2 * (int32_t)(i % 7))
			return harness_fail("element %zu: %d, want %d", i, buf[i],
					    mine + other + 2 * (int32_t)(i % 7));
	return 0;
}

static int stale_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	void *a, *b;
	size_t bytes = STALE_COUNT * 4;
	if (weft_mem_alloc(comm, bytes, &a) != WEFT_SUCCESS)
		return harness_fail("alloc");
	/* Rank 1's value changes between the calls; rank 0's does not. */
	int bad = stale_round(comm, rank, a, rank ? 1000 : 1, rank ? 1 : 1000);
	struct weft_memfd_info ia, ib;
	weft_memfd_find(a, 1, &ia);
	if (rank == 1)
		weft_mem_free(comm, a);
	if (weft_mem_alloc(comm, bytes, &b) != WEFT_SUCCESS)
		return harness_fail("alloc 2");
	weft_memfd_find(b, 1, &ib);
	if (rank == 1 && (ib.fd != ia.fd || ib.gen == ia.gen || ib.len != ia.len))
		bad |= harness_fail(
		    "premise: new allocation has fd %d gen %llu, old fd %d gen %llu", ib.fd,
		    (unsigned long long)ib.gen, ia.fd, (unsigned long long)ia.gen);
	bad |= stale_round(comm, rank, rank ? b : a, rank ? 2000 : 1, rank ? 1 : 2000);
	if (rank == 0)
		weft_mem_free(comm, a);
	weft_mem_free(comm, b);
	return bad;
}

START_TEST(stale_mapping)
{
	const char *const env[] = {"WEFT_ALGO=allreduce:shm", NULL};
	struct harness_result res;
	harness_run(2, env, stale_body, NULL, 60, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* ---- every collective on weft_mem buffers and mixes ---- */

enum mix {
	MIX_ALL = 0, /* every buffer from weft_mem_alloc */
	MIX_RANKS,   /* even ranks weft_mem, odd ranks malloc */
	MIX_SIDES,   /* sendbuf weft_mem, recvbuf malloc */
	MIX_NONE,    /* malloc everywhere (the staged path) */
	MIX_COUNT
};
static const char *const mix_names[] = {"all weft_mem", "even ranks weft_mem", "sendbuf weft_mem",
					"plain"};

struct mcase {
	struct tbuf send, recv;
	unsigned char *want;
	size_t cap; /* bytes of each buffer */
	enum mix mix;
	int failures;
};

static int check_out(struct mcase *m, const char *name, const void *got, const void *want,
		     size_t count, weft_datatype_t dt, size_t bytes)
{
	char why[256] = "";
	if (harness_compare(got, want, count, dt, why, sizeof(why)) == SIZE_MAX &&
	    (!guard_ok(&m->send, m->cap) || !guard_ok(&m->recv, bytes)))
		snprintf(why, sizeof(why), "a guard byte was written");
	if (!why[0])
		return 0;
	m->failures++;
	return harness_fail("%s (%s): %s", name, mix_names[m->mix], why);
}

static const struct {
	weft_datatype_t dt;
	weft_op_t op;
} samples[] = {
    {WEFT_FLOAT32, WEFT_SUM}, {WEFT_INT32, WEFT_MAX}, {WEFT_BFLOAT16, WEFT_SUM},
    {WEFT_FLOAT64, WEFT_AVG}, {WEFT_INT8, WEFT_PROD}, {WEFT_UINT64, WEFT_MIN},
    {WEFT_FLOAT16, WEFT_AVG}, {WEFT_UINT8, WEFT_SUM}, {WEFT_INT64, WEFT_AVG},
};
#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))

static int allreduce_case(weft_comm_t comm, int rank, int nranks, struct mcase *m, size_t count,
			  weft_datatype_t dt, weft_op_t op, int k, bool in_place, bool nonblocking)
{
	size_t bytes = count * harness_dtype_size(dt);
	char name[160];
	snprintf(name, sizeof(name), "allreduce %s %s count %zu %s%s", harness_dtype_name(dt),
		 harness_op_name(op), count, in_place ? "in place" : "out of place",
		 nonblocking ? " (iallreduce)" : "");
	harness_progress("%s", name);
	guard(&m->send, m->cap);
	guard(&m->recv, bytes);
	unsigned char *in = in_place ? m->recv.p : m->send.p;
	harness_ar_input(in, count, dt, op, rank, nranks, (unsigned)k);
	if (!in_place)
		memset(m->recv.p, 0xcd, bytes);
	const void *sb = in_place ? WEFT_IN_PLACE : m->send.p;
	weft_status_t st;
	if (nonblocking) {
		weft_request_t req;
		st = weft_iallreduce(sb, m->recv.p, count, dt, op, comm, &req);
		if (st == WEFT_SUCCESS)
			st = weft_wait(&req);
	} else {
		st = weft_allreduce(sb, m->recv.p, count, dt, op, comm);
	}
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "%s", name);
	harness_ar_expected(m->want, count, dt, op, nranks, (unsigned)k);
	return check_out(m, name, m->recv.p, m->want, count, dt, bytes);
}

static int allgather_case(weft_comm_t comm, int rank, int nranks, struct mcase *m, size_t count,
			  bool in_place)
{
	size_t esz = 4, block = count * esz;
	char name[96];
	snprintf(name, sizeof(name), "allgather count %zu %s", count,
		 in_place ? "in place" : "out of place");
	harness_progress("%s", name);
	guard(&m->recv, block * (size_t)nranks);
	for (int r = 0; r < nranks; r++)
		harness_ag_input(m->want + (size_t)r * block, count, WEFT_INT32, r, 3);
	unsigned char *mine = m->recv.p + (size_t)rank * block;
	memset(m->recv.p, 0xcd, block * (size_t)nranks);
	if (in_place)
		memcpy(mine, m->want + (size_t)rank * block, block);
	else
		memcpy(m->send.p, m->want + (size_t)rank * block, block);
	weft_status_t st = weft_allgather(in_place ? WEFT_IN_PLACE : m->send.p, m->recv.p, count,
					  WEFT_INT32, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "%s", name);
	return check_out(m, name, m->recv.p, m->want, count * (size_t)nranks, WEFT_INT32,
			 block * (size_t)nranks);
}

static int broadcast_case(weft_comm_t comm, int rank, int nranks, struct mcase *m, size_t count,
			  int root)
{
	char name[96];
	snprintf(name, sizeof(name), "broadcast count %zu root %d", count, root);
	harness_progress("%s", name);
	size_t bytes = count * 4;
	guard(&m->recv, bytes);
	harness_ag_input(m->want, count, WEFT_INT32, root, 5);
	memset(m->recv.p, 0xcd, bytes);
	if (rank == root)
		memcpy(m->send.p, m->want, bytes);
	weft_status_t st = weft_broadcast(m->send.p, m->recv.p, count, WEFT_INT32, root, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "%s", name);
	return check_out(m, name, m->recv.p, m->want, count, WEFT_INT32, bytes);
}

static int reduce_case(weft_comm_t comm, int rank, int nranks, struct mcase *m, size_t count,
		       int root)
{
	char name[96];
	snprintf(name, sizeof(name), "reduce float sum count %zu root %d", count, root);
	harness_progress("%s", name);
	size_t bytes = count * 4;
	guard(&m->recv, bytes);
	harness_ar_input(m->send.p, count, WEFT_FLOAT32, WEFT_SUM, rank, nranks, 7);
	memset(m->recv.p, 0xcd, bytes);
	weft_status_t st =
	    weft_reduce(m->send.p, m->recv.p, count, WEFT_FLOAT32, WEFT_SUM, root, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "%s", name);
	if (rank != root)
		return 0;
	harness_ar_expected(m->want, count, WEFT_FLOAT32, WEFT_SUM, nranks, 7);
	return check_out(m, name, m->recv.p, m->want, count, WEFT_FLOAT32, bytes);
}

static int reduce_scatter_case(weft_comm_t comm, int rank, int nranks, struct mcase *m,
			       size_t count)
{
	char name[96];
	snprintf(name, sizeof(name), "reduce_scatter int32 sum count %zu", count);
	harness_progress("%s", name);
	size_t all = count * (size_t)nranks, bytes = count * 4;
	guard(&m->recv, bytes);
	harness_ar_input(m->send.p, all, WEFT_INT32, WEFT_SUM, rank, nranks, 9);
	memset(m->recv.p, 0xcd, bytes);
	weft_status_t st =
	    weft_reduce_scatter(m->send.p, m->recv.p, count, WEFT_INT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "%s", name);
	harness_ar_expected(m->want, all, WEFT_INT32, WEFT_SUM, nranks, 9);
	return check_out(m, name, m->recv.p, m->want + (size_t)rank * bytes, count, WEFT_INT32,
			 bytes);
}

/* Block (src -> dst) holds harness_ag_input of rank src with salt dst. */
static int alltoall_case(weft_comm_t comm, int rank, int nranks, struct mcase *m, size_t count)
{
	char name[96];
	snprintf(name, sizeof(name), "alltoall count %zu", count);
	harness_progress("%s", name);
	size_t block = count * 4, bytes = block * (size_t)nranks;
	guard(&m->recv, bytes);
	for (int d = 0; d < nranks; d++) {
		harness_ag_input(m->send.p + (size_t)d * block, count, WEFT_INT32, rank,
				 (unsigned)d);
		harness_ag_input(m->want + (size_t)d * block, count, WEFT_INT32, d, (unsigned)rank);
	}
	memset(m->recv.p, 0xcd, bytes);
	weft_status_t st = weft_alltoall(m->send.p, m->recv.p, count, WEFT_INT32, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "%s", name);
	return check_out(m, name, m->recv.p, m->want, count * (size_t)nranks, WEFT_INT32, bytes);
}

static int other_colls(weft_comm_t comm, int rank, int nranks, struct mcase *m)
{
	static const size_t counts[] = {1, 7, 4099};
	int bad = 0;
	for (size_t c = 0; c < 3 && !bad; c++) {
		size_t n = counts[c];
		bad |= allgather_case(comm, rank, nranks, m, n, c % 2 == 0);
		bad |= allgather_case(comm, rank, nranks, m, n, c % 2 == 1);
		bad |= broadcast_case(comm, rank, nranks, m, n, (int)c % nranks);
		bad |= reduce_case(comm, rank, nranks, m, n, nranks - 1);
		bad |= reduce_scatter_case(comm, rank, nranks, m, n);
		bad |= alltoall_case(comm, rank, nranks, m, n);
	}
	return bad;
}

static int allreduce_cases(weft_comm_t comm, int rank, int nranks, struct mcase *m)
{
	size_t counts[] = {1, 7, (size_t)nranks + 1, 15, 1000, 1025, 4099, 300001};
	size_t ncounts = nranks <= 3 ? 8 : 7;
	int bad = 0, k = (int)m->mix;
	for (size_t c = 0; c < ncounts && !bad; c++)
		for (int form = 0; form < 2 && !bad; form++, k++)
			bad |= allreduce_case(comm, rank, nranks, m, counts[c],
					      samples[k % NSAMPLES].dt, samples[k % NSAMPLES].op, k,
					      form == 1, (k + rank) % 3 == 0);
	return bad;
}

struct matrix_arg {
	bool all_colls;
};

static int matrix_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct matrix_arg *ma = arg;
	struct mcase m = {.cap = 300001 * 8};
	if (m.cap < 4099 * 4 * (size_t)nranks)
		m.cap = 4099 * 4 * (size_t)nranks;
	int bad = 0;
	for (int mix = 0; mix < MIX_COUNT && !bad; mix++) {
		bool smem =
		    mix == MIX_ALL || mix == MIX_SIDES || (mix == MIX_RANKS && rank % 2 == 0);
		bool rmem = mix == MIX_ALL || (mix == MIX_RANKS && rank % 2 == 0);
		m.mix = (enum mix)mix;
		m.want = malloc(m.cap);
		if (!m.want || !tbuf_alloc(comm, &m.send, m.cap, smem) ||
		    !tbuf_alloc(comm, &m.recv, m.cap, rmem))
			bad = harness_fail("cannot allocate %zu-byte buffers (%s)", m.cap,
					   mix_names[mix]);
		if (!bad)
			bad = allreduce_cases(comm, rank, nranks, &m);
		if (!bad && ma->all_colls && mix != MIX_NONE)
			bad = other_colls(comm, rank, nranks, &m);
		tbuf_free(comm, &m.send);
		tbuf_free(comm, &m.recv);
		free(m.want);
	}
	return bad;
}

START_TEST(matrix_shm)
{
	const char *const env[] = {"WEFT_SHMEM_STAGED=1", "WEFT_SHMEM_STAGE=8K", "WEFT_TIMEOUT=60",
				   NULL};
	struct matrix_arg ma = {.all_colls = true};
	struct harness_result res;
	harness_run(_i, env, matrix_body, &ma, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* The defaults: plain and mixed buffers handed to the tuner's next choice. */
START_TEST(matrix_shm_default_stage)
{
	const char *const env[] = {"WEFT_TIMEOUT=60", NULL};
	struct matrix_arg ma = {.all_colls = false};
	struct harness_result res;
	harness_run(_i, env, matrix_body, &ma, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

static const int socket_nranks[] = {2, 3, 5};

START_TEST(matrix_socket)
{
	const char *const env[] = {"WEFT_TRANSPORTS=socket", "WEFT_SOCKET_IFNAME=lo",
				   "WEFT_TIMEOUT=60", NULL};
	struct matrix_arg ma = {.all_colls = true};
	struct harness_result res;
	harness_run(socket_nranks[_i], env, matrix_body, &ma, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* ---- the latency path ---- */

/* Internal: the communicator's sequence number moves for a task, and for
 * the inline form too (tags of later calls must stay aligned). */
#include "algorithms/shmem/shmem.h"
#include "core/comm.h"

static int small_case(weft_comm_t comm, int rank, int nranks, struct mcase *m, size_t count,
		      weft_datatype_t dt, weft_op_t op, int k)
{
	bool in_place = k % 2, nonblocking = (k + rank) % 2 == 1;
	uint64_t calls = comm->shmem ? comm->shmem->calls : 0;
	int bad = allreduce_case(comm, rank, nranks, m, count, dt, op, k, in_place, nonblocking);
	if (!bad && comm->shmem && comm->shmem->calls != calls + 1)
		bad = harness_fail("count %zu: the shm module ran %llu calls, want 1", count,
				   (unsigned long long)(comm->shmem->calls - calls));
	return bad;
}

/* A blocking small call while an iallreduce is still in flight takes the
 * task form on this rank; its peers may take the inline form. */
static int behind_case(weft_comm_t comm, int rank, int nranks, struct mcase *m)
{
	size_t big = 65536, small = 5;
	float *x = (float *)(void *)m->send.p, *want = (float *)(void *)m->want;
	harness_ar_input(x, big, WEFT_FLOAT32, WEFT_SUM, rank, nranks, 11);
	weft_request_t req = NULL;
	weft_status_t st = WEFT_SUCCESS;
	if (rank % 2 == 0)
		st = weft_iallreduce(WEFT_IN_PLACE, x, big, WEFT_FLOAT32, WEFT_SUM, comm, &req);
	else
		st = weft_allreduce(WEFT_IN_PLACE, x, big, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "behind: the large call");
	int bad =
	    allreduce_case(comm, rank, nranks, m, small, WEFT_INT32, WEFT_SUM, 12, true, false);
	if (req && (st = weft_wait(&req)) != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "behind: wait");
	harness_ar_expected(want, big, WEFT_FLOAT32, WEFT_SUM, nranks, 11);
	char why[256];
	if (!bad && harness_compare(x, want, big, WEFT_FLOAT32, why, sizeof(why)) != SIZE_MAX)
		bad = harness_fail("behind: the large call: %s", why);
	return bad;
}

static int small_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	struct mcase m = {.cap = 65536 * 4 + SHMEM_SMALL_MAX, .mix = (enum mix)(intptr_t)arg};
	bool mem = m.mix == MIX_ALL;
	m.want = malloc(m.cap);
	if (!m.want || !tbuf_alloc(comm, &m.send, m.cap, mem) ||
	    !tbuf_alloc(comm, &m.recv, m.cap, mem))
		return harness_fail("cannot allocate buffers");
	int bad = 0, k = 0;
	for (int dt = 0; dt < WEFT_DATATYPE_COUNT && !bad; dt++) {
		size_t es = harness_dtype_size((weft_datatype_t)dt);
		size_t counts[] = {1,
				   2,
				   SHMEM_INLINE / es,
				   SHMEM_INLINE / es + 1,
				   255,
				   SHMEM_SMALL_MAX / es,
				   SHMEM_SMALL_MAX / es + 1};
		for (int op = 0; op < WEFT_OP_COUNT && !bad; op++)
			for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]) && !bad; c++)
				bad = small_case(comm, rank, nranks, &m, counts[c],
						 (weft_datatype_t)dt, (weft_op_t)op, k++);
	}
	for (int i = 0; i < 3 && !bad; i++)
		bad = behind_case(comm, rank, nranks, &m);
	tbuf_free(comm, &m.send);
	tbuf_free(comm, &m.recv);
	free(m.want);
	return bad;
}

static const int small_nranks[] = {2, 3, 4, 8};

/* Forced, so that the check of the module's call count does not depend on
 * the tuner's calibration on a loaded machine (what it chooses is
 * unit/tune's business). */
START_TEST(latency_path)
{
	const char *const env[] = {"WEFT_TIMEOUT=60", "WEFT_ALGO=allreduce:shm", NULL};
	struct harness_result res;
	harness_run(small_nranks[_i], env, small_body,
		    (void *)(intptr_t)(_i % 2 ? MIX_ALL : MIX_NONE), JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* The same cases with the progress thread driving the task forms. */
START_TEST(latency_path_thread)
{
	const char *const env[] = {"WEFT_TIMEOUT=60", "WEFT_PROGRESS_THREAD=1",
				   "WEFT_ALGO=allreduce:shm", NULL};
	struct harness_result res;
	harness_run(2, env, small_body, (void *)(intptr_t)MIX_NONE, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

static void add(Suite *s)
{
	TCase *tc;
	if (integ_over("socket")) {
		if ((tc = integ_tcase(s, "auto", JOB_TIMEOUT_S + 30)))
			tcase_add_loop_test(
			    tc, matrix_socket, 0,
			    (int)(sizeof(socket_nranks) / sizeof(socket_nranks[0])));
		return;
	}
	if ((tc = integ_tcase(s, "auto", JOB_TIMEOUT_S + 30))) {
		tcase_add_test(tc, semantics);
		tcase_add_loop_test(tc, matrix_shm, 1, 9);
		tcase_add_loop_test(tc, matrix_shm_default_stage, 2, 4);
	}
	/* Forced: the shm algorithm (algorithms/shmem/). */
	if ((tc = integ_tcase(s, "shm", JOB_TIMEOUT_S + 30))) {
		tcase_add_test(tc, stale_mapping);
		tcase_add_loop_test(tc, latency_path, 0,
				    (int)(sizeof(small_nranks) / sizeof(small_nranks[0])));
		tcase_add_test(tc, latency_path_thread);
	}
}

int main(int argc, char **argv)
{
	static const struct integ_suite suite = {"mem", "shm socket", add};
	return integ_main(argc, argv, &suite);
}
