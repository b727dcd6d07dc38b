/*
 * perf_check.c — datatypes, the check patterns and guarded buffers of the
 * perf driver.
 *
 * A check call runs on a known pattern: every element of the result is
 * compared with the value computed locally (#wrong), and guard bytes around
 * the buffers must be untouched ("Out of bounds values").
 *
 * Inputs are small integers, so sums, products, minima and maxima are exact
 * in every datatype including half and bfloat16 (up to about 40 ranks for
 * int8 sums); avg of a floating type is compared with a tolerance because an
 * implementation may scale before or after summing. Collectives that only
 * move data use values in -50..50 that depend on the sending rank (and for
 * alltoall on the receiving one), so a block in the wrong place is wrong.
 *
 * Each buffer is made of blocks of count elements (one, or nranks), and
 * every block holds a pattern periodic in the element index: one period of
 * each block is a table, and filling and checking run at memcpy/memcmp speed
 * even for buffers of hundreds of MiB. ReduceScatter shifts the phase of
 * block j by j elements, so each rank's result differs from its neighbours'.
 */
#include "perf_int.h"

#include "dtype_value.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_BYTES 4096  /* checked on each side of every buffer */
#define GUARD_FILL  0x5a  /* what the guards hold */
#define POISON_FILL 0x7f  /* what a result buffer holds before the check */
#define CHECK_CHUNK 65536 /* bytes compared at once before looking closer */
#define DATA_PERIOD 101	  /* period of the data-movement pattern */

/* ---- datatypes ------------------------------------------------------- */

static const struct {
	const char *name;
	size_t size;
	bool is_signed;
	bool is_float;
	double eps; /* unit roundoff, floating types */
} dtypes[PERF_DTYPE_COUNT] = {
    [PERF_INT8] = {"int8", 1, true, false, 0},
    [PERF_UINT8] = {"uint8", 1, false, false, 0},
    [PERF_INT32] = {"int32", 4, true, false, 0},
    [PERF_UINT32] = {"uint32", 4, false, false, 0},
    [PERF_INT64] = {"int64", 8, true, false, 0},
    [PERF_UINT64] = {"uint64", 8, false, false, 0},
    [PERF_HALF] = {"half", 2, true, true, 0x1p-11},
    [PERF_BFLOAT16] = {"bfloat16", 2, true, true, 0x1p-8},
    [PERF_FLOAT] = {"float", 4, true, true, 0x1p-24},
    [PERF_DOUBLE] = {"double", 8, true, true, 0x1p-53},
};

static const char *const op_names[PERF_OP_COUNT] = {
    [PERF_SUM] = "sum", [PERF_PROD] = "prod", [PERF_MIN] = "min",
    [PERF_MAX] = "max", [PERF_AVG] = "avg",
};

size_t perf_dtype_size(enum perf_dtype dtype)
{
	return (unsigned)dtype < PERF_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *perf_dtype_name(enum perf_dtype dtype)
{
	return (unsigned)dtype < PERF_DTYPE_COUNT ? dtypes[dtype].name : "?";
}

const char *perf_op_name(enum perf_op op)
{
	return (unsigned)op < PERF_OP_COUNT ? op_names[op] : "?";
}

bool perf_dtype_is_float(enum perf_dtype dtype)
{
	return (unsigned)dtype < PERF_DTYPE_COUNT && dtypes[dtype].is_float;
}

int perf_dtype_lookup(const char *s)
{
	static const struct {
		const char *alias;
		enum perf_dtype dt;
	} aliases[] = {
	    {"char", PERF_INT8},  {"int", PERF_INT32},	    {"float16", PERF_HALF},
	    {"fp16", PERF_HALF},  {"bf16", PERF_BFLOAT16},  {"float32", PERF_FLOAT},
	    {"fp32", PERF_FLOAT}, {"float64", PERF_DOUBLE}, {"fp64", PERF_DOUBLE},
	};

	if (strcmp(s, "all") == 0)
		return -1;
	for (int d = 0; d < PERF_DTYPE_COUNT; d++)
		if (strcmp(s, dtypes[d].name) == 0)
			return d;
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcmp(s, aliases[i].alias) == 0)
			return (int)aliases[i].dt;
	return -2;
}

int perf_op_lookup(const char *s)
{
	if (strcmp(s, "all") == 0)
		return -1;
	for (int o = 0; o < PERF_OP_COUNT; o++)
		if (strcmp(s, op_names[o]) == 0)
			return o;
	return -2;
}

/* dtype_value.h numbers the datatypes as enum perf_dtype does. */
_Static_assert((int)PERF_INT8 == (int)DV_INT8 && (int)PERF_UINT64 == (int)DV_UINT64 &&
		   (int)PERF_HALF == (int)DV_FLOAT16 && (int)PERF_BFLOAT16 == (int)DV_BFLOAT16 &&
		   (int)PERF_DOUBLE == (int)DV_FLOAT64 && (int)PERF_DTYPE_COUNT == (int)DV_COUNT,
	       "perf_dtype in dtype_value.h's order");

/* ---- values ------------------------------------------------------------ */

/* Data-movement collectives: the value keyed by key (the sending rank, or
 * sender x nranks + receiver for alltoall) at element i. 29 is invertible
 * modulo 101, so keys below 101 give distinct sequences. */
static double data_value(enum perf_dtype dt, size_t key, size_t i)
{
	return (double)((i * 13 + key * 29 + 5) % DATA_PERIOD) - (dtypes[dt].is_signed ? 50 : 0);
}

/* Reductions: rank r's input at element i. Signed types include negative
 * values. */
static double reduce_input(enum perf_op op, enum perf_dtype dt, int r, int n, size_t i)
{
	size_t ur = (size_t)r;
	bool neg = dtypes[dt].is_signed;
	double v;

	switch (op) {
	case PERF_SUM:
	case PERF_AVG: return (double)((i * 7 + ur * 3 + 1) % 4) - (neg ? 1 : 0);
	case PERF_PROD:
		/* one rank contributes 2, the others 1 (or -1): the product stays tiny */
		v = (i + ur) % (size_t)n == 0 ? 2 : 1;
		if (neg && (i * 3 + ur) % 7 == 0)
			v = -v;
		return v;
	default: return (double)((i * 13 + ur * 29 + 5) % 17) - (neg ? 8 : 0);
	}
}

/* A period, in elements, of every rank's reduce_input(). */
static size_t reduce_period(enum perf_op op, enum perf_dtype dt, int n)
{
	switch (op) {
	case PERF_SUM:
	case PERF_AVG: return 4;
	case PERF_PROD: return dtypes[dt].is_signed && n % 7 ? 7 * (size_t)n : (size_t)n;
	default: return 17;
	}
}

static double reduced_value(enum perf_op op, enum perf_dtype dt, int n, size_t i)
{
	double acc = reduce_input(op, dt, 0, n, i);

	for (int r = 1; r < n; r++) {
		double v = reduce_input(op, dt, r, n, i);
		switch (op) {
		case PERF_PROD: acc *= v; break;
		case PERF_MIN: acc = v < acc ? v : acc; break;
		case PERF_MAX: acc = v > acc ? v : acc; break;
		default: acc += v; break;
		}
	}
	if (op == PERF_AVG)
		acc = dtypes[dt].is_float ? acc / n : (double)((int64_t)acc / n);
	return acc;
}

/* ---- patterns ---------------------------------------------------------- */

/* One period of each block of this rank's input and expected output. */
struct perf_pattern {
	enum perf_dtype dt;
	size_t period; /* elements */
	size_t tsize;
	size_t in_blocks, out_blocks;
	unsigned char *in;     /* in_blocks tables: this rank's input */
	unsigned char *out;    /* out_blocks tables: the expected result */
	unsigned char *poison; /* one table of POISON_FILL: "left alone" */
	bool tolerant;	       /* floating avg: compare with a tolerance */
	bool recv_unused;      /* reduce on a non-root: recvbuf must stay as it was */
};

static unsigned char *table(const struct perf_pattern *p, unsigned char *tabs, size_t block)
{
	return tabs + block * p->period * p->tsize;
}

/* Fill the tables of pattern p for this rank of the current collective. */
static void pattern_fill_tables(struct perf_pattern *p, enum perf_op op, int root)
{
	enum perf_dtype dt = p->dt;
	int n = perf_g_nranks, me = perf_g_rank;
	size_t un = (size_t)n, ume = (size_t)me;

	for (size_t i = 0; i < p->period; i++) {
		for (size_t b = 0; b < p->in_blocks; b++) {
			double v;
			switch (perf_g_test->coll) {
			case PERF_COLL_ALLREDUCE:
			case PERF_COLL_REDUCE: v = reduce_input(op, dt, me, n, i); break;
			case PERF_COLL_REDUCE_SCATTER:
				v = reduce_input(op, dt, me, n, i + b);
				break;
			case PERF_COLL_ALLTOALL: v = data_value(dt, ume * un + b, i); break;
			default: v = data_value(dt, ume, i); break;
			}
			dv_store(table(p, p->in, b) + i * p->tsize, (int)dt, v);
		}
		for (size_t b = 0; b < p->out_blocks; b++) {
			double v;
			switch (perf_g_test->coll) {
			case PERF_COLL_ALLREDUCE:
			case PERF_COLL_REDUCE: v = reduced_value(op, dt, n, i); break;
			case PERF_COLL_REDUCE_SCATTER: v = reduced_value(op, dt, n, i + ume); break;
			case PERF_COLL_ALLGATHER: v = data_value(dt, b, i); break;
			case PERF_COLL_BROADCAST: v = data_value(dt, (size_t)root, i); break;
			case PERF_COLL_ALLTOALL: v = data_value(dt, b * un + ume, i); break;
			case PERF_COLL_SENDRECV: v = data_value(dt, (ume + un - 1) % un, i); break;
			default: v = 0; break;
			}
			dv_store(table(p, p->out, b) + i * p->tsize, (int)dt, v);
		}
	}
}

struct perf_pattern *perf_pattern_new(enum perf_dtype dt, enum perf_op op, int root)
{
	const struct perf_coll_info *ci = perf_coll_info(perf_g_test->coll);
	struct perf_pattern *p = calloc(1, sizeof(*p));
	size_t bytes;

	if (!p)
		perf_die("out of memory for the check pattern");
	p->dt = dt;
	p->tsize = dtypes[dt].size;
	p->period = ci->has_op ? reduce_period(op, dt, perf_g_nranks) : DATA_PERIOD;
	p->in_blocks = perf_send_blocks();
	p->out_blocks = perf_recv_blocks();
	p->tolerant = ci->has_op && op == PERF_AVG && dtypes[dt].is_float;
	p->recv_unused = perf_g_test->coll == PERF_COLL_REDUCE && perf_g_rank != root;
	bytes = p->period * p->tsize;
	p->in = malloc(bytes * p->in_blocks);
	p->out = malloc(bytes * p->out_blocks);
	p->poison = malloc(bytes);
	if (!p->in || !p->out || !p->poison)
		perf_die("out of memory for the check pattern");
	memset(p->poison, POISON_FILL, bytes);
	pattern_fill_tables(p, op, root);
	return p;
}

void perf_pattern_free(struct perf_pattern *p)
{
	if (!p)
		return;
	free(p->in);
	free(p->out);
	free(p->poison);
	free(p);
}

/* Fill count elements with a periodic table, doubling the copied span. */
static void fill_periodic(unsigned char *buf, size_t count, const unsigned char *tab, size_t period,
			  size_t tsize)
{
	size_t total = count * tsize, block = period * tsize, filled;

	if (total <= block) {
		memcpy(buf, tab, total);
		return;
	}
	memcpy(buf, tab, block);
	for (filled = block; filled < total;) {
		size_t n = filled < total - filled ? filled : total - filled;
		memcpy(buf + filled, buf, n);
		filled += n;
	}
}

void perf_pattern_fill_input(const struct perf_pattern *p, unsigned char *buf, size_t bytes)
{
	fill_periodic(buf, bytes / p->tsize, p->in, p->period, p->tsize);
}

/* Fill the blocks of a buffer of blocks x count elements from tables. */
static void fill_blocks(const struct perf_pattern *p, unsigned char *buf, size_t count,
			size_t blocks, unsigned char *tabs)
{
	for (size_t b = 0; b < blocks; b++)
		fill_periodic(buf + b * count * p->tsize, count, table(p, tabs, b), p->period,
			      p->tsize);
}

static bool element_ok(const struct perf_pattern *p, const unsigned char *got,
		       const unsigned char *want)
{
	double g, w;

	if (memcmp(got, want, p->tsize) == 0)
		return true;
	if (!p->tolerant)
		return false;
	g = dv_load(got, (int)p->dt);
	w = dv_load(want, (int)p->dt);
	return fabs(g - w) <=
	       dtypes[p->dt].eps * 2 * (perf_g_nranks + 1) * (fabs(w) > 1 ? fabs(w) : 1);
}

/* Wrong elements among count, against the periodic table tab. */
static int64_t check_periodic(const struct perf_pattern *p, const unsigned char *buf, size_t count,
			      const unsigned char *tab)
{
	size_t block = p->period * p->tsize;
	size_t reps = CHECK_CHUNK / block ? CHECK_CHUNK / block : 1;
	size_t chunk = reps * block, total = count * p->tsize;
	static unsigned char *cmp;
	static size_t cmp_bytes;
	int64_t wrong = 0;

	if (cmp_bytes < chunk) {
		free(cmp);
		cmp = malloc(chunk);
		if (!cmp)
			perf_die("out of memory for the check");
		cmp_bytes = chunk;
	}
	fill_periodic(cmp, chunk / p->tsize, tab, p->period, p->tsize);
	for (size_t off = 0; off < total; off += chunk) {
		size_t n = total - off < chunk ? total - off : chunk;
		if (memcmp(buf + off, cmp, n) == 0)
			continue;
		for (size_t e = 0; e < n; e += p->tsize)
			wrong += !element_ok(p, buf + off + e, cmp + e);
	}
	return wrong;
}

/* ---- buffers ----------------------------------------------------------- */

void perf_buf_alloc(struct perf_buf *b, size_t bytes)
{
	size_t total = GUARD_BYTES + bytes + GUARD_BYTES;
	void *p = perf_rt_buf_alloc(total);

	memset(p, 0, total); /* fault every page in before timing */
	b->base = p;
	b->p = b->base + GUARD_BYTES;
	b->bytes = bytes;
}

void perf_buf_free(struct perf_buf *b)
{
	perf_rt_buf_free(b->base);
	b->base = b->p = NULL;
}

/* Arm the guards around [p, p + used). */
static void guard_set(unsigned char *p, size_t used)
{
	memset(p - GUARD_BYTES, GUARD_FILL, GUARD_BYTES);
	memset(p + used, GUARD_FILL, GUARD_BYTES);
}

static int64_t guard_count(const unsigned char *p, size_t used)
{
	int64_t bad = 0;

	for (size_t i = 0; i < GUARD_BYTES; i++)
		bad += (p[(ptrdiff_t)i - GUARD_BYTES] != GUARD_FILL) + (p[used + i] != GUARD_FILL);
	return bad;
}

/* ---- the check call ------------------------------------------------------ */

/* The regions of a call: in place, one buffer (the larger of the two, which
 * holds the other); otherwise the send and the receive buffers. */
struct regions {
	unsigned char *send, *recv, *whole;
	size_t send_bytes, recv_bytes, whole_bytes;
};

static struct regions call_regions(const struct perf_pattern *p, const struct perf_call *c)
{
	struct regions r = {
	    .send = (unsigned char *)c->sendbuf,
	    .recv = c->recvbuf,
	    .send_bytes = c->count * p->tsize * p->in_blocks,
	    .recv_bytes = c->count * p->tsize * p->out_blocks,
	};

	if (c->in_place) {
		bool recv_holds = p->out_blocks >= p->in_blocks;
		r.whole = recv_holds ? r.recv : r.send;
		r.whole_bytes = recv_holds ? r.recv_bytes : r.send_bytes;
	}
	return r;
}

void perf_check_prepare(const struct perf_pattern *p, const struct perf_call *c)
{
	struct regions r = call_regions(p, c);

	memset(r.recv, POISON_FILL, r.recv_bytes);
	if (c->in_place && r.whole == r.send)
		memset(r.whole, POISON_FILL, r.whole_bytes);
	fill_blocks(p, r.send, c->count, p->in_blocks, p->in);
	if (c->in_place) {
		guard_set(r.whole, r.whole_bytes);
	} else {
		guard_set(r.recv, r.recv_bytes);
		guard_set(r.send, r.send_bytes);
	}
}

void perf_check_result(const struct perf_pattern *p, const struct perf_call *c, int64_t *wrong,
		       int64_t *oob)
{
	struct regions r = call_regions(p, c);
	int64_t w = 0;

	if (p->recv_unused) {
		/* reduce, non-root: out of place the buffer is not to be written;
		 * in place it is this rank's input, not to be changed */
		w = check_periodic(p, r.recv, c->count, c->in_place ? p->in : p->poison);
	} else {
		for (size_t b = 0; b < p->out_blocks; b++)
			w += check_periodic(p, r.recv + b * c->count * p->tsize, c->count,
					    table(p, p->out, b));
	}
	*wrong = w;
	if (c->in_place)
		*oob = guard_count(r.whole, r.whole_bytes);
	else
		*oob = guard_count(r.recv, r.recv_bytes) + guard_count(r.send, r.send_bytes);
}
