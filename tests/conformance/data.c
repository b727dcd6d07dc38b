/*
 * data.c — the conformance cases about what arrives: every size between
 * every pair, zero-byte messages, post order per direction (or matching by
 * tag, where the transport says it is not ordered), hundreds of messages in
 * flight both ways with a slow receiver, reduce-on-arrival in whole
 * elements, and streaming receives.
 */
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "core/progress.h"
#include "reduce/reduce.h"
#include "transports/transport.h"

/* ---- sizes ---- */

/* Around every transport's boundaries: shm's inline bytes and slots, the
 * landing slot of verbs and ofi's rma path (64 bytes of header: 16320 is
 * the largest eager message of a 16 KiB slot), libfabric's inject and rxm
 * eager limits, socket chunks (64 KiB here) and several of them, shm's
 * single-copy threshold (64 KiB in shm-tiny, 256 KiB by default) and a page
 * past it, several bounce pieces, 1 MiB. The transport's own chunk adds
 * four more (sizes_of). */
static const size_t fixed_sizes[] = {
    0,	   1,	  8,	 31,	 32,	 33,	 64,	 65,	 100,	 4095,
    4096,  4097,  16320, 16321,	 16383,	 16384,	 16385,	 32768,	 65535,	 65536,
    65537, 69633, 81927, 131072, 196613, 262144, 266241, 393221, 524288, (1u << 20) + 5,
};
#define NFIXED (sizeof(fixed_sizes) / sizeof(fixed_sizes[0]))
#define NSIZES (NFIXED + 4)

static size_t sizes_of(weft_comm_t comm, size_t *out)
{
	size_t n = 0, c = conf_chunk(comm);
	for (size_t i = 0; i < NFIXED; i++)
		out[n++] = fixed_sizes[i];
	if (c) {
		out[n++] = c - 1;
		out[n++] = c;
		out[n++] = c + 1;
		out[n++] = 5 * c + 3;
	}
	return n;
}

/* Message k of every size to and from every peer, all in flight at once;
 * odd ranks post their receives first, even ranks their sends. */
static int body_sizes(weft_comm_t comm, int rank, int nranks, void *arg)
{
	size_t sizes[NSIZES], ns = sizes_of(comm, sizes);
	int n = 2 * (int)ns * (nranks - 1);
	struct weft_msg *msgs = calloc((size_t)n, sizeof(*msgs));
	struct weft_msg **ptrs = calloc((size_t)n, sizeof(*ptrs));
	int *peer_of = calloc((size_t)n, sizeof(*peer_of));
	bool *is_recv = calloc((size_t)n, sizeof(*is_recv));
	if (!msgs || !ptrs || !peer_of || !is_recv)
		return harness_fail("out of memory");
	int i = 0;
	for (int pass = 0; pass < 2; pass++)
		for (int p = 0; p < nranks; p++)
			for (size_t k = 0; p != rank && k < ns; k++, i++) {
				bool recv = (rank % 2 == 1) == (pass == 0);
				struct weft_msg *m = &msgs[i];
				*m = (struct weft_msg){.buf = malloc(sizes[k] + CONF_GUARD),
						       .len = sizes[k],
						       .tag = weft_p2p_tag(1, (uint32_t)k)};
				if (!m->buf)
					return harness_fail("out of memory");
				if (recv)
					conf_guard_fill((char *)m->buf + sizes[k]);
				else
					p2p_fill(m->buf, sizes[k], rank, p, (unsigned)k);
				weft_status_t st = recv ? weft_p2p_irecv_msg(comm, p, m)
							: weft_p2p_isend_msg(comm, p, m);
				if (st != WEFT_SUCCESS)
					return harness_fail_status(comm, st, "posting to %d", p);
				ptrs[i] = m;
				peer_of[i] = p;
				is_recv[i] = recv;
			}
	harness_progress("exchanging %d messages", n);
	weft_status_t st = p2p_wait(comm, ptrs, n, CONF_WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "exchange");
	for (i = 0; i < n; i++) {
		struct weft_msg *m = &msgs[i];
		unsigned k = (unsigned)(m->tag & 0xffffffffu);
		if (m->status != WEFT_SUCCESS)
			return harness_fail("%zu bytes with rank %d: status %d", m->len, peer_of[i],
					    m->status);
		if (!is_recv[i])
			continue;
		if (p2p_verify(m->buf, m->len, peer_of[i], rank, k))
			return 1;
		if (!conf_guard_ok((char *)m->buf + m->len))
			return harness_fail("%zu bytes from rank %d: wrote past the end", m->len,
					    peer_of[i]);
	}
	for (i = 0; i < n; i++)
		free(msgs[i].buf);
	free(msgs);
	free(ptrs);
	free(peer_of);
	free(is_recv);
	return 0;
}

START_TEST(sizes)
{
	static const int nranks[] = {2, 4};
	conf_run(nranks[_i], body_sizes, NULL, true);
}
END_TEST

/* ---- zero bytes ---- */

/* Zero-byte messages (no buffer at all, a buffer that must stay untouched,
 * a reducing and a streaming receive) between one- and eight-byte ones,
 * both ways at once: each completes, takes nothing from its neighbours'
 * bytes and writes nothing. */
#define NZERO 48

static int body_zero(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int peer = 1 - rank;
	static struct weft_msg s[NZERO], r[NZERO];
	static unsigned char sbuf[NZERO][8], rbuf[NZERO][8 + CONF_GUARD];
	struct weft_msg *ptrs[2 * NZERO];
	weft_reduce_fn sum = weft_reduce_kernel(WEFT_INT32, WEFT_SUM);
	for (int i = 0; i < NZERO; i++) {
		size_t len = i % 3 == 0 ? (size_t)(i % 2 ? 1 : 8) : 0;
		uint64_t tag = weft_p2p_tag(2, (uint32_t)i);
		p2p_fill(sbuf[i], len, rank, peer, (unsigned)i);
		memset(rbuf[i], 0xee, sizeof(rbuf[i]));
		s[i] =
		    (struct weft_msg){.buf = len || i % 2 ? sbuf[i] : NULL, .len = len, .tag = tag};
		r[i] =
		    (struct weft_msg){.buf = len || i % 2 ? rbuf[i] : NULL, .len = len, .tag = tag};
		if (!len && i % 4 == 1)
			r[i] = (struct weft_msg){
			    .buf = rbuf[i], .tag = tag, .unit = 4, .reduce = sum, .local = sbuf[i]};
		if (!len && i % 4 == 2)
			r[i].stream = true;
		ptrs[2 * i] = &s[i];
		ptrs[2 * i + 1] = &r[i];
	}
	for (int i = 0; i < NZERO; i++) {
		weft_status_t st = weft_p2p_isend_msg(comm, peer, &s[i]);
		if (st == WEFT_SUCCESS)
			st = weft_p2p_irecv_msg(comm, peer, &r[i]);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "post %d", i);
	}
	weft_status_t st = p2p_wait(comm, ptrs, 2 * NZERO, CONF_WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "zero-byte exchange");
	for (int i = 0; i < NZERO; i++) {
		if (p2p_verify(rbuf[i], r[i].len, peer, rank, (unsigned)i))
			return 1;
		for (size_t j = r[i].len; j < sizeof(rbuf[i]); j++)
			if (rbuf[i][j] != 0xee)
				return harness_fail("message %d (%zu bytes): wrote byte %zu", i,
						    r[i].len, j);
	}
	return 0;
}

START_TEST(zero_bytes)
{
	conf_run(2, body_zero, NULL, true);
}
END_TEST

/* ---- pairs of messages, one each way ---- */

/* Send and receive @p i with @p peer: @p len bytes of pattern @p i, tag
 * @p tag; ptrs gets both. */
static int pair_make(struct weft_msg *s, struct weft_msg *r, struct weft_msg **ptrs, size_t i,
		     size_t len, uint64_t tag, int rank, int peer)
{
	s[i] = (struct weft_msg){.buf = malloc(len + 1), .len = len, .tag = tag};
	r[i] = (struct weft_msg){.buf = malloc(len + 1), .len = len, .tag = tag};
	if (!s[i].buf || !r[i].buf)
		return harness_fail("out of memory");
	p2p_fill(s[i].buf, len, rank, peer, (unsigned)i);
	ptrs[2 * i] = &s[i];
	ptrs[2 * i + 1] = &r[i];
	return 0;
}

/* Every receive of @p n holds the message of its index; all freed. */
static int pairs_check(struct weft_msg *s, struct weft_msg *r, size_t n, int rank, int peer)
{
	int ret = 0;
	for (size_t i = 0; i < n; i++) {
		if (!ret && p2p_verify(r[i].buf, r[i].len, peer, rank, (unsigned)i))
			ret = harness_fail("receive %zu held another message", i);
		free(s[i].buf);
		free(r[i].buf);
	}
	return ret;
}

/* ---- ordering ---- */

/* Per direction, in post order. An ordered transport meets the n-th send
 * with the n-th receive: every message has the same tag, its own length
 * and bytes, so a receive met out of order fails on the length or holds
 * another message's bytes. A transport that matches by tag (not ordered,
 * transports/transport.h) must match each receive, posted in the reverse
 * order of the sends, to the send of its tag. */
#define NORDER 64

static size_t order_len(size_t i, size_t chunk)
{
	return i % 16 == 15 ? chunk + i : (i * 37) % 3001;
}

static int body_ordering(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int peer = 1 - rank;
	bool ordered = conf_ordered(comm, peer);
	size_t chunk = conf_chunk(comm) ? conf_chunk(comm) : 65536;
	static struct weft_msg s[NORDER], r[NORDER];
	struct weft_msg *ptrs[2 * NORDER];
	for (size_t i = 0; i < NORDER; i++)
		if (pair_make(s, r, ptrs, i, order_len(i, chunk),
			      weft_p2p_tag(3, ordered ? 0 : (uint32_t)i), rank, peer))
			return 1;
	for (size_t i = 0; i < NORDER; i++) {
		size_t j = ordered ? i : NORDER - 1 - i;
		weft_status_t st = weft_p2p_isend_msg(comm, peer, &s[i]);
		if (st == WEFT_SUCCESS)
			st = weft_p2p_irecv_msg(comm, peer, &r[j]);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "post %zu", i);
	}
	weft_status_t st = p2p_wait(comm, ptrs, 2 * NORDER, CONF_WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "%s exchange",
					   ordered ? "same-tag" : "reverse-posted");
	if (pairs_check(s, r, NORDER, rank, peer))
		return harness_fail("%s", ordered ? "not met in post order" : "not met by tag");
	return 0;
}

START_TEST(ordering)
{
	conf_run(2, body_ordering, NULL, true);
}
END_TEST

/* ---- many in flight ---- */

/* 300 messages each way, small and over a chunk, every one posted before
 * any completes. Rank 0 posts its sends, then its receives; rank 1 is slow,
 * not dead: it only progresses for a while (rank 0's sends stall on its
 * flow control meanwhile, and its stall checks must find rank 1 alive and
 * wait on), then posts its receives before its sends. */
#define NFLIGHT 300
#define SLOW_S	0.3

static size_t flight_len(size_t i, size_t chunk)
{
	if (i % 50 == 49)
		return chunk + i;
	return i % 50 == 24 ? 70000 + i : (i * 37) % 3001;
}

static int post_all(weft_comm_t comm, int peer, struct weft_msg *m, bool send)
{
	for (size_t i = 0; i < NFLIGHT; i++) {
		weft_status_t st = send ? weft_p2p_isend_msg(comm, peer, &m[i])
					: weft_p2p_irecv_msg(comm, peer, &m[i]);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "post %s %zu", send ? "send" : "recv",
						   i);
	}
	return 0;
}

static int body_in_flight(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int peer = 1 - rank;
	size_t chunk = conf_chunk(comm) ? conf_chunk(comm) : 65536;
	static struct weft_msg s[NFLIGHT], r[NFLIGHT];
	static struct weft_msg *ptrs[2 * NFLIGHT];
	for (size_t i = 0; i < NFLIGHT; i++)
		if (pair_make(s, r, ptrs, i, flight_len(i, chunk), weft_p2p_tag(4, (uint32_t)i),
			      rank, peer))
			return 1;
	if (rank == 1) {
		harness_progress("slow receiver");
		for (double end = harness_now() + SLOW_S; harness_now() < end;) {
			weft_status_t st = weft_comm_progress(comm);
			if (st != WEFT_SUCCESS && st != WEFT_INPROGRESS)
				return harness_fail_status(comm, st, "progress while slow");
		}
	}
	if (post_all(comm, peer, rank ? r : s, rank == 0) ||
	    post_all(comm, peer, rank ? s : r, rank != 0))
		return 1;
	weft_status_t st = p2p_wait(comm, ptrs, 2 * NFLIGHT, CONF_WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "%d messages in flight", 2 * NFLIGHT);
	return pairs_check(s, r, NFLIGHT, rank, peer);
}

START_TEST(in_flight)
{
	conf_run(2, body_in_flight, NULL, true);
}
END_TEST

/* ---- reduce on arrival ---- */

/* The kernel the transport is handed, wrapped: every piece must start at a
 * whole element of the receive and the pieces must cover each element
 * exactly once (one reducing receive is in flight at a time). */
static struct {
	weft_reduce_fn real;
	const char *buf;
	size_t unit, elems, bad_off;
	bool bad;
} rec;

static void recording_kernel(void *dst, const void *a, const void *b, size_t count)
{
	size_t off = (size_t)((const char *)dst - rec.buf);
	if (off % rec.unit && !rec.bad) {
		rec.bad = true;
		rec.bad_off = off;
	}
	rec.elems += count;
	rec.real(dst, a, b, count);
}

struct dtype_case {
	weft_datatype_t dtype;
	size_t unit;
	const char *name;
};

static const struct dtype_case dtypes[] = {
    {WEFT_BFLOAT16, 2, "bf16"},
    {WEFT_INT32, 4, "int32"},
    {WEFT_FLOAT64, 8, "fp64"},
};

/* Small integers, exact in every type, different per rank and element. */
static double value(int rank, size_t i)
{
	return (double)((i * 7 + (size_t)rank * 3) % 61);
}

/* Odd counts, around a 16 KiB slot and the chunk in elements, more than
 * the bounce pieces together. */
static size_t counts_of(size_t chunk, size_t unit, size_t *out)
{
	static const size_t fixed[] = {1, 7, 2047, 2049, 2051, 10253, 65537, 100003, 300001};
	size_t n = 0;
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		out[n++] = fixed[i];
	if (chunk >= 2 * unit) {
		out[n++] = chunk / unit - 1;
		out[n++] = chunk / unit + 3;
		out[n++] = 5 * chunk / unit + 13;
	}
	return n;
}

/* One ring step: send @p count elements to next, reduce prev's into ours
 * (in place every other count); check every element, the guard, and the
 * pieces the kernel saw. */
static int reduce_step(weft_comm_t comm, const struct dtype_case *d, size_t count, bool in_place)
{
	int rank = comm->rank, n = comm->nranks;
	int next = (rank + 1) % n, prev = (rank + n - 1) % n;
	size_t len = count * d->unit;
	char *src = malloc(len), *local = malloc(len), *dst = malloc(len + CONF_GUARD);
	if (!src || !local || !dst)
		return harness_fail("out of memory");
	for (size_t i = 0; i < count; i++) {
		harness_elem_store(src, i, d->dtype, value(rank, i));
		harness_elem_store(local, i, d->dtype, value(rank + 100, i));
	}
	conf_guard_fill(dst + len);
	if (in_place)
		memcpy(dst, local, len);
	rec.real = weft_reduce_kernel(d->dtype, WEFT_SUM);
	rec.buf = dst;
	rec.unit = d->unit;
	rec.elems = 0;
	rec.bad = false;
	uint64_t tag = weft_p2p_tag(5, (uint32_t)(count * 4 + d->unit));
	struct weft_msg tx = {.buf = src, .len = len, .tag = tag};
	struct weft_msg rx = {.buf = dst,
			      .len = len,
			      .tag = tag,
			      .unit = d->unit,
			      .reduce = recording_kernel,
			      .local = in_place ? dst : local};
	struct weft_msg *both[] = {&tx, &rx};
	weft_status_t st = weft_p2p_irecv_msg(comm, prev, &rx);
	if (st == WEFT_SUCCESS)
		st = weft_p2p_isend_msg(comm, next, &tx);
	if (st == WEFT_SUCCESS)
		st = p2p_wait(comm, both, 2, CONF_WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "reduce %zu %s", count, d->name);
	if (rec.bad)
		return harness_fail("reduce %zu %s: a piece at byte %zu, not a whole element",
				    count, d->name, rec.bad_off);
	if (rec.elems != count)
		return harness_fail("reduce %zu %s: the pieces reduced %zu elements", count,
				    d->name, rec.elems);
	for (size_t i = 0; i < count; i++) {
		double got = harness_elem_load(dst, i, d->dtype);
		if (got != value(prev, i) + value(rank + 100, i))
			return harness_fail("reduce %zu %s%s: element %zu is %g", count, d->name,
					    in_place ? " in place" : "", i, got);
	}
	if (!conf_guard_ok(dst + len))
		return harness_fail("reduce %zu %s: wrote past the end", count, d->name);
	free(src);
	free(local);
	free(dst);
	return 0;
}

static int body_reduce(weft_comm_t comm, int rank, int nranks, void *arg)
{
	for (size_t t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]); t++) {
		size_t counts[16], nc = counts_of(conf_chunk(comm), dtypes[t].unit, counts);
		for (size_t k = 0; k < nc; k++)
			if (reduce_step(comm, &dtypes[t], counts[k], k % 2))
				return 1;
	}
	return 0;
}

/* _i: 2 ranks (both ways with one peer at once) or a ring of 3. */
START_TEST(reduce)
{
	conf_run(2 + _i, body_reduce, NULL, true);
}
END_TEST

/* ---- streaming receives ---- */

/* Receives that ask for streaming stores (struct weft_msg.stream), copying
 * and reducing, into destinations off every alignment the stores care for,
 * with guard bytes on both sides: the same bytes as any receive. */
static const size_t stream_sizes[] = {1, 15, 16, 17, 63, 64, 65, 4095, 4097, 100000, 1048581};
#define NSTREAM (sizeof(stream_sizes) / sizeof(stream_sizes[0]))

struct stream_rx {
	char *mem, *dst;
	double *local;
};

static int body_stream(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int peer = 1 - rank;
	weft_reduce_fn sum = weft_reduce_kernel(WEFT_FLOAT64, WEFT_SUM);
	static struct weft_msg s[2 * NSTREAM], r[2 * NSTREAM];
	static struct stream_rx rx[2 * NSTREAM];
	struct weft_msg *ptrs[4 * NSTREAM];
	for (size_t k = 0; k < 2 * NSTREAM; k++) {
		bool red = k >= NSTREAM;
		size_t len = red ? stream_sizes[k - NSTREAM] / 8 * 8 + 8 : stream_sizes[k];
		size_t skew = red ? 8 * (k % 3) : k % 7; /* reduce: whole elements */
		struct stream_rx *x = &rx[k];
		x->mem = malloc(len + 2 * CONF_GUARD + 64);
		x->local = malloc(len);
		char *src = malloc(len);
		if (!x->mem || !x->local || !src)
			return harness_fail("out of memory");
		x->dst = x->mem + CONF_GUARD + skew;
		conf_guard_fill(x->mem + skew);
		conf_guard_fill(x->dst + len);
		p2p_fill(src, len, rank, peer, (unsigned)k);
		for (size_t i = 0; red && i < len / 8; i++) {
			((double *)src)[i] = value(rank, i);
			x->local[i] = value(peer + 100, i);
		}
		uint64_t tag = weft_p2p_tag(6, (uint32_t)k);
		s[k] = (struct weft_msg){.buf = src, .len = len, .tag = tag};
		r[k] = (struct weft_msg){.buf = x->dst,
					 .len = len,
					 .tag = tag,
					 .unit = red ? 8 : 1,
					 .reduce = red ? sum : NULL,
					 .local = red ? x->local : NULL,
					 .stream = true};
		ptrs[2 * k] = &s[k];
		ptrs[2 * k + 1] = &r[k];
		weft_status_t st = weft_p2p_isend_msg(comm, peer, &s[k]);
		if (st == WEFT_SUCCESS)
			st = weft_p2p_irecv_msg(comm, peer, &r[k]);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "post %zu", k);
	}
	weft_status_t st = p2p_wait(comm, ptrs, 4 * (int)NSTREAM, CONF_WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "streaming exchange");
	for (size_t k = 0; k < 2 * NSTREAM; k++) {
		const struct stream_rx *x = &rx[k];
		size_t len = r[k].len;
		if (!conf_guard_ok(x->dst - CONF_GUARD) || !conf_guard_ok(x->dst + len))
			return harness_fail("streaming receive of %zu bytes wrote outside it", len);
		if (k < NSTREAM && p2p_verify(x->dst, len, peer, rank, (unsigned)k))
			return 1;
		for (size_t i = 0; k >= NSTREAM && i < len / 8; i++) {
			double got;
			memcpy(&got, x->dst + 8 * i, 8);
			if (got != value(peer, i) + value(peer + 100, i))
				return harness_fail("streaming reduce of %zu bytes: [%zu] = %g",
						    len, i, got);
		}
		free(x->mem);
		free(x->local);
		free(s[k].buf);
	}
	return 0;
}

START_TEST(stream)
{
	conf_run(2, body_stream, NULL, true);
}
END_TEST

void conf_data_cases(Suite *s)
{
	conf_add_case(s, "sizes", sizes, 2);
	conf_add_case(s, "zero_bytes", zero_bytes, 1);
	conf_add_case(s, "ordering", ordering, 1);
	conf_add_case(s, "in_flight", in_flight, 1);
	conf_add_case(s, "reduce", reduce, 2);
	conf_add_case(s, "stream", stream, 1);
}
