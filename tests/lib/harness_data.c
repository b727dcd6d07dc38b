/*
 * harness_data.c — the test data of harness.h: inputs whose results are
 * exact in every datatype, inputs whose results must be rounded once, the
 * comparison and the guard bytes. An element is written and read by
 * perf/dtype_value.h, which the perf driver's check uses too.
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/dtype_value.h"

static const struct {
	const char *name;
	size_t size;
} dtypes[WEFT_DATATYPE_COUNT] = {
    [WEFT_INT8] = {"int8", 1},	   [WEFT_UINT8] = {"uint8", 1},	  [WEFT_INT32] = {"int32", 4},
    [WEFT_UINT32] = {"uint32", 4}, [WEFT_INT64] = {"int64", 8},	  [WEFT_UINT64] = {"uint64", 8},
    [WEFT_FLOAT16] = {"fp16", 2},  [WEFT_BFLOAT16] = {"bf16", 2}, [WEFT_FLOAT32] = {"fp32", 4},
    [WEFT_FLOAT64] = {"fp64", 8},
};

static const char *const op_names[WEFT_OP_COUNT] = {
    [WEFT_SUM] = "sum", [WEFT_PROD] = "prod", [WEFT_MIN] = "min",
    [WEFT_MAX] = "max", [WEFT_AVG] = "avg",
};

const char *harness_dtype_name(weft_datatype_t dtype)
{
	return (unsigned)dtype < WEFT_DATATYPE_COUNT ? dtypes[dtype].name : "bad-dtype";
}

const char *harness_op_name(weft_op_t op)
{
	return (unsigned)op < WEFT_OP_COUNT ? op_names[op] : "bad-op";
}

size_t harness_dtype_size(weft_datatype_t dtype)
{
	return (unsigned)dtype < WEFT_DATATYPE_COUNT ? dtypes[dtype].size : 0;
}

enum kind { KIND_SIGNED, KIND_UNSIGNED, KIND_FLOAT };

static enum kind kind_of(weft_datatype_t dtype)
{
	switch (dtype) {
	case WEFT_UINT8:
	case WEFT_UINT32:
	case WEFT_UINT64: return KIND_UNSIGNED;
	case WEFT_FLOAT16:
	case WEFT_BFLOAT16:
	case WEFT_FLOAT32:
	case WEFT_FLOAT64: return KIND_FLOAT;
	default: return KIND_SIGNED;
	}
}

_Static_assert((int)WEFT_INT8 == (int)DV_INT8 && (int)WEFT_UINT64 == (int)DV_UINT64 &&
		   (int)WEFT_FLOAT16 == (int)DV_FLOAT16 && (int)WEFT_BFLOAT16 == (int)DV_BFLOAT16 &&
		   (int)WEFT_FLOAT64 == (int)DV_FLOAT64 &&
		   (int)WEFT_DATATYPE_COUNT == (int)DV_COUNT,
	       "weft_datatype_t in dtype_value.h's order");

double harness_elem_load(const void *buf, size_t i, weft_datatype_t dtype)
{
	return dv_load((const unsigned char *)buf + i * harness_dtype_size(dtype), (int)dtype);
}

void harness_elem_store(void *buf, size_t i, weft_datatype_t dtype, double v)
{
	dv_store((unsigned char *)buf + i * harness_dtype_size(dtype), (int)dtype, v);
}

/* min/max keys run from -11 to 11; scaled so that they cover the type's range. */
static double minmax_scale(weft_datatype_t dtype)
{
	switch (dtype) {
	case WEFT_INT8:
	case WEFT_UINT8: return 11.0;
	case WEFT_INT32: return 67108864.0;	       /* 2^26 */
	case WEFT_UINT32: return 134217728.0;	       /* 2^27: crosses 2^31 */
	case WEFT_INT64: return 288230376151711744.0;  /* 2^58 */
	case WEFT_UINT64: return 576460752303423488.0; /* 2^59: crosses 2^63 */
	default: return 0.5;
	}
}

/* The unscaled integer of the avg pattern for ranks below nranks - 1. */
static long avg_key(int rank, size_t i)
{
	return (long)((rank * 5 + i) % 9) - 4;
}

static double ar_value(weft_datatype_t dtype, weft_op_t op, int rank, int nranks, size_t i)
{
	enum kind kind = kind_of(dtype);
	double unit = kind == KIND_FLOAT ? 0.5 : 1.0;
	switch (op) {
	case WEFT_SUM: {
		long v = (long)((rank * 3 + i) % 7);
		return kind == KIND_UNSIGNED ? (double)v : (double)(v - 3) * unit;
	}
	case WEFT_PROD: {
		double v = (rank + i) % 3 == 0				 ? 2.0
			   : ((rank + i) % 3 == 1 && kind == KIND_FLOAT) ? 0.5
									 : 1.0;
		return (kind != KIND_UNSIGNED && (rank + 2 * i) % 5 == 1) ? -v : v;
	}
	case WEFT_MIN:
	case WEFT_MAX: {
		long key = (long)((rank * 7 + i * 3) % 23) - 11;
		return (double)(kind == KIND_UNSIGNED ? key + 11 : key) * minmax_scale(dtype);
	}
	case WEFT_AVG: {
		if (kind == KIND_UNSIGNED)
			return (double)(avg_key(rank, i) + 4);
		if (kind == KIND_SIGNED || rank < nranks - 1)
			return (double)avg_key(rank, i) * unit;
		/* Floating point: the last rank makes the sum a multiple of nranks. */
		long sum = 0;
		for (int r = 0; r < nranks - 1; r++)
			sum += avg_key(r, i);
		long last = ((-sum) % nranks + nranks) % nranks + nranks * (long)(i % 3 - 1);
		return (double)last * unit;
	}
	default: return 0;
	}
}

/* Every pattern above repeats with a period dividing 7245 = 9 * 5 * 7 * 23
 * elements; long buffers are filled by copying the first period, which keeps
 * the 1M-element cases cheap for 8 ranks on 2 cores. */
#define AR_PERIOD 7245u

static void repeat_period(void *buf, size_t count, weft_datatype_t dtype)
{
	size_t size = harness_dtype_size(dtype);
	for (size_t done = AR_PERIOD; done < count;) {
		size_t n = count - done < done ? count - done : done;
		memcpy((char *)buf + done * size, buf, n * size);
		done += n;
	}
}

void harness_ar_input(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op, int rank,
		      int nranks, unsigned salt)
{
	size_t direct = count < AR_PERIOD ? count : AR_PERIOD;
	for (size_t i = 0; i < direct; i++)
		harness_elem_store(buf, i, dtype,
				   ar_value(dtype, op, rank, nranks, i + salt * 13u));
	repeat_period(buf, count, dtype);
}

void harness_ar_expected(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op, int nranks,
			 unsigned salt)
{
	size_t direct = count < AR_PERIOD ? count : AR_PERIOD;
	for (size_t i = 0; i < direct; i++) {
		size_t k = i + salt * 13u;
		double acc = ar_value(dtype, op, 0, nranks, k);
		for (int r = 1; r < nranks; r++) {
			double v = ar_value(dtype, op, r, nranks, k);
			switch (op) {
			case WEFT_SUM:
			case WEFT_AVG: acc += v; break;
			case WEFT_PROD: acc *= v; break;
			case WEFT_MIN: acc = v < acc ? v : acc; break;
			case WEFT_MAX: acc = v > acc ? v : acc; break;
			default: break;
			}
		}
		if (op == WEFT_AVG)
			acc = kind_of(dtype) == KIND_FLOAT ? acc / nranks
							   : (double)((long long)acc / nranks);
		harness_elem_store(buf, i, dtype, acc);
	}
	repeat_period(buf, count, dtype);
}

/* --- test data that must be rounded (see harness.h) ---
 *
 * p is the precision of the type in bits (11 fp16, 8 bf16, 24 fp32, 53 fp64)
 * and L = 2^p. Values are integers times a unit 2^s, and stay in the normal
 * range of the type, where an integer number of units is exactly
 * representable if its odd part is below L: every integer of magnitude at
 * most L is, and between L and 2L only the even ones are.
 *
 * SUM (n >= 2 ranks). E = 2 floor(L / (2 (n-1))), so (n-1) E <= L, and
 * D = L - (n-1) E >= 0; the holder's o is odd in (D, D + E). A proper subset
 * of the ranks either lacks the holder and sums to k E, k <= n-1, at most L
 * units (exact); or it holds it and lacks another rank and sums to o + k E,
 * k <= n-2, positive and below D + E + (n-2) E = L (exact). The full sum
 * T = o + (n-1) E is odd and in (L, L + E), within (L, 2L]: a tie between two
 * even neighbours. The kernels add two exact partial sums: fp16/bf16 in fp32,
 * exactly (T < 2^(p+1) <= 2^24), then round to the storage type once;
 * fp32/fp64 round in the addition itself, once.
 *
 * PROD. Holders a != b have m 2^(s-p) with m odd in (L/2, L); the others
 * +-1 or +-2. A subset without both holders multiplies to a holder's value
 * times a power of two, or to a power of two: exact. With both, to
 * m_a m_b 2^(...) times a power of two: m_a m_b is odd with 2p-1 or 2p bits,
 * so it rounds once (fp16/bf16: the fp32 product of the two significands is
 * exact, the conversion back rounds), and multiplying a rounded value by a
 * power of two is exact, so every order gives RN(m_a m_b) 2^(...).
 *
 * AVG. Rank r holds k_r 2^s, k_r in [-15, 15]: any subset sums to at most
 * 15 * 16 = 240 < 2^8 units, exact in every type. The library divides the
 * exact sum T by n once: fp32/fp64 in their own precision, fp16/bf16 in fp32
 * and then to the storage type, which is still the correctly rounded T / n,
 * since fp32 has 24 >= 2p + 2 bits (a double rounding of a quotient is
 * harmless then, Figueroa 1995). Only when n is not a power of two can T / n
 * be inexact.
 *
 * The expected values are computed in integers and rounded once by
 * round_ratio(), so the test itself does no double rounding. */

static int round_bits(weft_datatype_t dtype)
{
	switch (dtype) {
	case WEFT_FLOAT16: return 11;
	case WEFT_BFLOAT16: return 8;
	case WEFT_FLOAT32: return 24;
	case WEFT_FLOAT64: return 53;
	default: return 0;
	}
}

bool harness_round_supported(weft_datatype_t dtype, weft_op_t op)
{
	return round_bits(dtype) > 0 && (op == WEFT_SUM || op == WEFT_PROD || op == WEFT_AVG);
}

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t round_hash(uint64_t k, weft_datatype_t dtype, weft_op_t op, int who)
{
	return mix64(mix64(k) ^ ((uint64_t)dtype << 40) ^ ((uint64_t)op << 48) ^
		     ((uint64_t)(who + 1) << 56));
}

/* num / den (den > 0) rounded to @p p significant bits: to nearest even,
 * or toward zero. Exact integer arithmetic; the result fits a double. */
static double round_ratio(__int128 num, int64_t den, int p, bool nearest)
{
	if (num == 0)
		return 0;
	bool neg = num < 0;
	unsigned __int128 a = neg ? (unsigned __int128)-num : (unsigned __int128)num;
	unsigned __int128 d = (unsigned __int128)den;
	int shift = 0; /* the result is q 2^-shift */
	while (a < (d << (p - 1))) {
		a <<= 1;
		shift++;
	}
	while (a >= (d << p)) {
		d <<= 1;
		shift--;
	}
	unsigned __int128 q = a / d, r = a % d;
	if (nearest && (2 * r > d || (2 * r == d && (q & 1))))
		q++; /* may reach 2^p: still exact */
	double v = ldexp((double)q, -shift);
	return neg ? -v : v;
}

/* Unit exponents that keep every value and result normal (fp16 is tight). */
static int round_scale(weft_datatype_t dtype, weft_op_t op, uint64_t h)
{
	int lo = -30, hi = 30;
	if (dtype == WEFT_FLOAT16) {
		lo = op == WEFT_SUM ? -12 : op == WEFT_PROD ? -6 : -10;
		hi = op == WEFT_SUM ? 2 : op == WEFT_PROD ? 0 : 6;
	}
	return lo + (int)(h % (uint64_t)(hi - lo + 1));
}

static double round_sum(weft_datatype_t dtype, int rank, int n, uint64_t k, bool result,
			bool nearest)
{
	int p = round_bits(dtype);
	int64_t L = (int64_t)1 << p;
	uint64_t h = round_hash(k, dtype, WEFT_SUM, -1);
	int s = round_scale(dtype, WEFT_SUM, h);
	double sign = (h >> 20) & 1 ? -1.0 : 1.0;
	uint64_t pick = h >> 21;
	if (n == 1) /* nothing to combine: any p-bit odd value */
		return sign * ldexp((double)(2 * (int64_t)(pick % (uint64_t)(L / 2)) + 1), s);
	int64_t E = 2 * (L / (2 * (int64_t)(n - 1))), D = L - (int64_t)(n - 1) * E;
	int64_t o = D + 1 + 2 * (int64_t)(pick % (uint64_t)(E / 2));
	if (result)
		return sign * ldexp(round_ratio(o + (int64_t)(n - 1) * E, 1, p, nearest), s);
	return sign * ldexp((double)(rank == (int)(k % (uint64_t)n) ? o : E), s);
}

static double round_prod(weft_datatype_t dtype, int rank, int n, uint64_t k, bool result,
			 bool nearest)
{
	int p = round_bits(dtype);
	int64_t L = (int64_t)1 << p;
	int a = (int)(k % (uint64_t)n);
	int b = n > 1 ? (int)((a + 1 + (k / (uint64_t)n) % (uint64_t)(n - 1)) % (uint64_t)n) : -1;
	uint64_t ha = round_hash(k, dtype, WEFT_PROD, a), hb = round_hash(k, dtype, WEFT_PROD, b);
	int64_t ma = L / 2 + 1 + 2 * (int64_t)((ha >> 16) % (uint64_t)(L / 4));
	int64_t mb = L / 2 + 1 + 2 * (int64_t)((hb >> 16) % (uint64_t)(L / 4));
	int sa = round_scale(dtype, WEFT_PROD, ha);
	int sb = dtype == WEFT_FLOAT16 ? 0 : round_scale(dtype, WEFT_PROD, hb);
	if (!result) {
		uint64_t h = round_hash(k, dtype, WEFT_PROD, rank);
		double sign = (h >> 8) & 1 ? -1.0 : 1.0;
		if (rank == a)
			return sign * ldexp((double)ma, sa - p);
		if (rank == b)
			return sign * ldexp((double)mb, sb - p);
		return sign * ldexp(1.0, (int)(h & 1));
	}
	double sign = 1.0;
	int twos = 0;
	for (int r = 0; r < n; r++) {
		uint64_t h = round_hash(k, dtype, WEFT_PROD, r);
		if ((h >> 8) & 1)
			sign = -sign;
		if (r != a && r != b)
			twos += (int)(h & 1);
	}
	if (n == 1)
		return sign * ldexp((double)ma, sa - p);
	return sign * ldexp(round_ratio((__int128)ma * mb, 1, p, nearest), sa + sb - 2 * p + twos);
}

static double round_avg(weft_datatype_t dtype, int rank, int n, uint64_t k, bool result,
			bool nearest)
{
	int s = round_scale(dtype, WEFT_AVG, round_hash(k, dtype, WEFT_AVG, -1));
	if (!result)
		return ldexp((double)((int)(round_hash(k, dtype, WEFT_AVG, rank) % 31) - 15), s);
	int64_t sum = 0;
	for (int r = 0; r < n; r++)
		sum += (int)(round_hash(k, dtype, WEFT_AVG, r) % 31) - 15;
	return ldexp(round_ratio(sum, n, round_bits(dtype), nearest), s);
}

static double round_elem(weft_datatype_t dtype, weft_op_t op, int rank, int n, uint64_t k,
			 bool result, bool nearest)
{
	switch (op) {
	case WEFT_SUM: return round_sum(dtype, rank, n, k, result, nearest);
	case WEFT_PROD: return round_prod(dtype, rank, n, k, result, nearest);
	default: return round_avg(dtype, rank, n, k, result, nearest);
	}
}

static void round_fill(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op, int rank,
		       int nranks, unsigned salt, bool result, bool nearest)
{
	if (!harness_round_supported(dtype, op) || nranks < 1)
		return;
	size_t direct = count < AR_PERIOD ? count : AR_PERIOD;
	for (size_t i = 0; i < direct; i++)
		harness_elem_store(
		    buf, i, dtype,
		    round_elem(dtype, op, rank, nranks, i + salt * 13u, result, nearest));
	repeat_period(buf, count, dtype);
}

void harness_round_input(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op, int rank,
			 int nranks, unsigned salt)
{
	round_fill(buf, count, dtype, op, rank, nranks, salt, false, true);
}

void harness_round_expected(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op,
			    int nranks, unsigned salt)
{
	round_fill(buf, count, dtype, op, 0, nranks, salt, true, true);
}

void harness_round_truncated(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op,
			     int nranks, unsigned salt)
{
	round_fill(buf, count, dtype, op, 0, nranks, salt, true, false);
}

void harness_ag_input(void *buf, size_t count, weft_datatype_t dtype, int rank, unsigned salt)
{
	size_t size = harness_dtype_size(dtype);
	unsigned char *p = buf;
	for (size_t i = 0; i < count; i++)
		for (size_t j = 0; j < size; j++)
			p[i * size + j] =
			    (unsigned char)(rank * 37 + (i + salt * 7u) * 11u + j * 101u + 1u);
}

static bool elem_equal(const void *a, const void *b, size_t i, weft_datatype_t dtype)
{
	size_t size = harness_dtype_size(dtype);
	if (memcmp((const char *)a + i * size, (const char *)b + i * size, size) == 0)
		return true;
	return kind_of(dtype) == KIND_FLOAT &&
	       harness_elem_load(a, i, dtype) == harness_elem_load(b, i, dtype);
}

size_t harness_compare(const void *got, const void *want, size_t count, weft_datatype_t dtype,
		       char *why, size_t why_bytes)
{
	size_t first = SIZE_MAX, bad = 0;
	for (size_t i = 0; i < count; i++) {
		if (elem_equal(got, want, i, dtype))
			continue;
		if (first == SIZE_MAX)
			first = i;
		bad++;
	}
	if (first != SIZE_MAX && why)
		snprintf(why, why_bytes,
			 "element %zu of %zu: got %.17g, expected %.17g (%zu elements differ)",
			 first, count, harness_elem_load(got, first, dtype),
			 harness_elem_load(want, first, dtype), bad);
	return first;
}

void harness_guard_fill(void *guard, size_t bytes)
{
	unsigned char *p = guard;
	for (size_t k = 0; k < bytes; k++)
		p[k] = (unsigned char)(0xa5u ^ (k * 7u));
}

long harness_guard_check(const void *guard, size_t bytes)
{
	const unsigned char *p = guard;
	for (size_t k = 0; k < bytes; k++)
		if (p[k] != (unsigned char)(0xa5u ^ (k * 7u)))
			return (long)k;
	return -1;
}

bool harness_buf_alloc(struct harness_buf *b, size_t bytes)
{
	unsigned char *p = malloc(bytes + 2 * HARNESS_GUARD_BYTES);
	b->data = p ? p + HARNESS_GUARD_BYTES : NULL;
	b->bytes = bytes;
	if (!p)
		return false;
	harness_guard_fill(p, HARNESS_GUARD_BYTES);
	harness_guard_fill(b->data + bytes, HARNESS_GUARD_BYTES);
	memset(b->data, HARNESS_UNWRITTEN, bytes);
	return true;
}

void harness_buf_free(struct harness_buf *b)
{
	if (b->data)
		free(b->data - HARNESS_GUARD_BYTES);
	b->data = NULL;
}

const char *harness_buf_guards(const struct harness_buf *b)
{
	if (!b->data)
		return "";
	if (harness_guard_check(b->data - HARNESS_GUARD_BYTES, HARNESS_GUARD_BYTES) >= 0)
		return "the guard before";
	if (harness_guard_check(b->data + b->bytes, HARNESS_GUARD_BYTES) >= 0)
		return "the guard after";
	return "";
}

size_t harness_first_written(const unsigned char *p, size_t bytes)
{
	for (size_t k = 0; k < bytes; k++)
		if (p[k] != HARNESS_UNWRITTEN)
			return k;
	return SIZE_MAX;
}
