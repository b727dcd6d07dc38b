/*
 * reduce.c — the reduction kernels against a scalar reference written
 * here, independently of reduce.c: every (datatype, op), odd lengths,
 * misaligned and aliased pointers, both instruction-set paths, fp16/bf16
 * rounding edges, weft_reduce_scale and the datatype/op names; WEFT_ISA
 * (generic, avx2, an unknown value, and communicator creation rejecting the
 * unknown one). `make test` runs this suite a second time with
 * WEFT_ISA=generic, where only the generic path is there to test.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cpuid.h>

#include "reduce/reduce.h"
#include "reduce/reduce_isa.h"
#include "util/dtype.h"
#include "weft.h"

static const size_t lengths[] = {0, 1, 7, 33, 1003};

/* Byte offsets of dst, a and b inside their buffers: aligned, misaligned by
 * whole elements, and misaligned by odd byte counts. */
static const size_t offsets[][3] = {{0, 0, 0}, {1, 2, 3}, {8, 4, 0}, {5, 0, 17}, {0, 33, 64}};

#define MAX_BYTES (1003 * 8 + 128)

/* ---- helpers ------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
	/* xorshift64*: deterministic, so a failure reproduces */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static float f32_of_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static uint32_t bits_of_f32(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static bool is_nan16(weft_datatype_t dt, uint16_t h)
{
	if (dt == WEFT_FLOAT16)
		return (h & 0x7c00) == 0x7c00 && (h & 0x03ff);
	return (h & 0x7f80) == 0x7f80 && (h & 0x007f);
}

/* Random element: integers get random bits; floats a mix of ordinary values,
 * random bit patterns and specials (±0, ±inf, NaN, subnormals, extremes). */
static void random_element(weft_datatype_t dt, unsigned char *p)
{
	uint64_t r = rng_next();
	unsigned pick = (unsigned)(r >> 56) % 16;

	switch (dt) {
	case WEFT_FLOAT32: {
		static const uint32_t special[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000,
						   0x7fc00000, 0xffc12345, 0x00000001, 0x807fffff,
						   0x7f7fffff, 0x3f800000};
		float f;
		if (pick < 3)
			f = f32_of_bits(special[(r >> 8) % 10]);
		else if (pick < 6)
			f = f32_of_bits((uint32_t)r);
		else
			f = (float)((int32_t)(r & 0xffff) - 32768) / 256.0f;
		memcpy(p, &f, 4);
		break;
	}
	case WEFT_FLOAT64: {
		static const uint64_t special[] = {0,
						   0x8000000000000000ull,
						   0x7ff0000000000000ull,
						   0xfff0000000000000ull,
						   0x7ff8000000000000ull,
						   0xfff8000000012345ull,
						   1,
						   0x7fefffffffffffffull};
		double f;
		if (pick < 3)
			memcpy(&f, &special[(r >> 8) % 8], 8);
		else if (pick < 6)
			memcpy(&f, &r, 8);
		else
			f = (double)((int64_t)(r & 0xffffff) - 0x800000) / 1024.0;
		memcpy(p, &f, 8);
		break;
	}
	case WEFT_FLOAT16:
	case WEFT_BFLOAT16: {
		uint16_t h = (uint16_t)r;
		if (pick < 3)
			h &= 0x8000; /* ±0 */
		memcpy(p, &h, 2);
		break;
	}
	default: memcpy(p, &r, weft_datatype_size(dt)); break;
	}
}

static void random_fill(weft_datatype_t dt, unsigned char *p, size_t count)
{
	size_t size = weft_datatype_size(dt);
	for (size_t i = 0; i < count; i++)
		random_element(dt, p + i * size);
}

/* ---- the reference ------------------------------------------------------- */

/* IEEE 754-2019 minimum/maximum: NaN wins, -0 < +0. */
static double ref_min_max(double x, double y, bool is_max)
{
	if (isnan(x) || isnan(y))
		return NAN;
	if (x == y) {
		if (x == 0 && signbit(x) != signbit(y))
			return is_max ? 0.0 : -0.0;
		return x;
	}
	return ((x < y) != is_max) ? x : y;
}

static float ref_float(weft_op_t op, float x, float y)
{
	switch (op) {
	case WEFT_SUM:
	case WEFT_AVG: return x + y;
	case WEFT_PROD: return x * y;
	default: return (float)ref_min_max(x, y, op == WEFT_MAX);
	}
}

static double ref_double(weft_op_t op, double x, double y)
{
	switch (op) {
	case WEFT_SUM:
	case WEFT_AVG: return x + y;
	case WEFT_PROD: return x * y;
	default: return ref_min_max(x, y, op == WEFT_MAX);
	}
}

/* Integer ops on int64/uint64 wide values, truncated to the element size by
 * the caller: modular sum and product, signed or unsigned min/max. */
static uint64_t ref_integer(weft_op_t op, uint64_t x, uint64_t y, bool is_signed)
{
	switch (op) {
	case WEFT_SUM:
	case WEFT_AVG: return x + y;
	case WEFT_PROD: return x * y;
	case WEFT_MIN:
		if (is_signed)
			return (int64_t)x < (int64_t)y ? x : y;
		return x < y ? x : y;
	default:
		if (is_signed)
			return (int64_t)x > (int64_t)y ? x : y;
		return x > y ? x : y;
	}
}

/* Load an integer element widened to 64 bits (sign-extended if signed). */
static uint64_t load_integer(weft_datatype_t dt, const unsigned char *p)
{
	switch (dt) {
	case WEFT_INT8: {
		int8_t v;
		memcpy(&v, p, 1);
		return (uint64_t)(int64_t)v;
	}
	case WEFT_UINT8: return *p;
	case WEFT_INT32: {
		int32_t v;
		memcpy(&v, p, 4);
		return (uint64_t)(int64_t)v;
	}
	case WEFT_UINT32: {
		uint32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	default: {
		uint64_t v;
		memcpy(&v, p, 8);
		return v;
	}
	}
}

static void ref_element(weft_datatype_t dt, weft_op_t op, const unsigned char *a,
			const unsigned char *b, unsigned char *r)
{
	switch (dt) {
	case WEFT_FLOAT32: {
		float x, y, z;
		memcpy(&x, a, 4);
		memcpy(&y, b, 4);
		z = ref_float(op, x, y);
		memcpy(r, &z, 4);
		break;
	}
	case WEFT_FLOAT64: {
		double x, y, z;
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		z = ref_double(op, x, y);
		memcpy(r, &z, 8);
		break;
	}
	case WEFT_FLOAT16:
	case WEFT_BFLOAT16: {
		uint16_t x, y, z;
		memcpy(&x, a, 2);
		memcpy(&y, b, 2);
		if (dt == WEFT_FLOAT16)
			z = weft_float_to_half(
			    ref_float(op, weft_half_to_float(x), weft_half_to_float(y)));
		else
			z = weft_float_to_bf16(
			    ref_float(op, weft_bf16_to_float(x), weft_bf16_to_float(y)));
		memcpy(r, &z, 2);
		break;
	}
	default: {
		bool is_signed = dt == WEFT_INT8 || dt == WEFT_INT32 || dt == WEFT_INT64;
		uint64_t z = ref_integer(op, load_integer(dt, a), load_integer(dt, b), is_signed);
		memcpy(r, &z, weft_datatype_size(dt)); /* little-endian: the low bytes */
		break;
	}
	}
}

/* Equal bits, or both NaN (NaN payloads are not part of the contract). */
static bool same_element(weft_datatype_t dt, const unsigned char *x, const unsigned char *y)
{
	size_t size = weft_datatype_size(dt);

	if (memcmp(x, y, size) == 0)
		return true;
	switch (dt) {
	case WEFT_FLOAT32: {
		float u, v;
		memcpy(&u, x, 4);
		memcpy(&v, y, 4);
		return isnan(u) && isnan(v);
	}
	case WEFT_FLOAT64: {
		double u, v;
		memcpy(&u, x, 8);
		memcpy(&v, y, 8);
		return isnan(u) && isnan(v);
	}
	case WEFT_FLOAT16:
	case WEFT_BFLOAT16: {
		uint16_t u, v;
		memcpy(&u, x, 2);
		memcpy(&v, y, 2);
		return is_nan16(dt, u) && is_nan16(dt, v);
	}
	default: return false;
	}
}

/* Index of the first element of got that differs from the reference of
 * a op b, or count if none. */
static size_t first_mismatch(weft_datatype_t dt, weft_op_t op, const unsigned char *got,
			     const unsigned char *a, const unsigned char *b, size_t count)
{
	size_t size = weft_datatype_size(dt);
	unsigned char want[8];

	for (size_t i = 0; i < count; i++) {
		ref_element(dt, op, a + i * size, b + i * size, want);
		if (!same_element(dt, got + i * size, want))
			return i;
	}
	return count;
}

static bool have_avx2(void)
{
	weft_reduce_force_generic(false);
	return strcmp(weft_reduce_isa(), "avx2") == 0;
}

static unsigned char *xmalloc(size_t n)
{
	unsigned char *p = malloc(n);
	ck_assert_ptr_nonnull(p);
	return p;
}

/* ---- kernels against the reference ---------------------------------------- */

/* One dtype (the loop index), every op, length and offset, each ISA path. */
static void check_kernels_match_reference(weft_datatype_t dt)
{
	size_t size = weft_datatype_size(dt);
	unsigned char *bufa = xmalloc(MAX_BYTES), *bufb = xmalloc(MAX_BYTES);
	unsigned char *bufd = xmalloc(MAX_BYTES), *guard = xmalloc(MAX_BYTES);
	int paths = have_avx2() ? 2 : 1;

	for (int path = 0; path < paths; path++) {
		weft_reduce_force_generic(path == 1);
		for (int op = 0; op < WEFT_OP_COUNT; op++) {
			weft_reduce_fn fn = weft_reduce_kernel(dt, (weft_op_t)op);
			ck_assert_ptr_nonnull(fn);
			for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
				size_t n = lengths[l];
				for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
					unsigned char *d = bufd + offsets[o][0];
					unsigned char *a = bufa + offsets[o][1];
					unsigned char *b = bufb + offsets[o][2];
					random_fill(dt, a, n);
					random_fill(dt, b, n);
					memset(bufd, 0xa5, MAX_BYTES);
					memcpy(guard, bufd, MAX_BYTES);
					fn(d, a, b, n);
					size_t bad = first_mismatch(dt, (weft_op_t)op, d, a, b, n);
					ck_assert_msg(bad == n,
						      "%s %s isa %s n=%zu offsets %zu/%zu/%zu: "
						      "element %zu wrong",
						      weft_dtype_name(dt),
						      weft_op_name((weft_op_t)op),
						      weft_reduce_isa(), n, offsets[o][0],
						      offsets[o][1], offsets[o][2], bad);
					/* nothing written outside dst[0, n) */
					ck_assert(memcmp(bufd, guard, offsets[o][0]) == 0);
					ck_assert(
					    memcmp(d + n * size, guard + offsets[o][0] + n * size,
						   MAX_BYTES - offsets[o][0] - n * size) == 0);
				}
			}
		}
	}
	weft_reduce_force_generic(false);
	free(bufa);
	free(bufb);
	free(bufd);
	free(guard);
}

/* Every datatype in one test: each forked test costs tens of ms under ASan. */
START_TEST(test_kernels_match_reference)
{
	for (int dt = 0; dt < WEFT_DATATYPE_COUNT; dt++)
		check_kernels_match_reference((weft_datatype_t)dt);
}
END_TEST

/* dst == a, dst == b and dst == a == b. */
static void check_kernels_in_place(weft_datatype_t dt)
{
	size_t n = 1003, bytes = n * weft_datatype_size(dt);
	unsigned char *a = xmalloc(bytes + 1), *b = xmalloc(bytes + 1);
	unsigned char *a0 = xmalloc(bytes), *b0 = xmalloc(bytes), *want = xmalloc(bytes);
	int paths = have_avx2() ? 2 : 1;

	for (int path = 0; path < paths; path++) {
		weft_reduce_force_generic(path == 1);
		for (int op = 0; op < WEFT_OP_COUNT; op++) {
			weft_reduce_fn fn = weft_reduce_kernel(dt, (weft_op_t)op);
			/* +1: misaligned as well */
			random_fill(dt, a0, n);
			random_fill(dt, b0, n);

			memcpy(a + 1, a0, bytes);
			memcpy(b + 1, b0, bytes);
			fn(a + 1, a + 1, b + 1, n);
			ck_assert_msg(first_mismatch(dt, (weft_op_t)op, a + 1, a0, b0, n) == n,
				      "%s %s %s: dst == a", weft_dtype_name(dt),
				      weft_op_name((weft_op_t)op), weft_reduce_isa());

			memcpy(a + 1, a0, bytes);
			fn(b + 1, a + 1, b + 1, n);
			ck_assert_msg(first_mismatch(dt, (weft_op_t)op, b + 1, a0, b0, n) == n,
				      "%s %s %s: dst == b", weft_dtype_name(dt),
				      weft_op_name((weft_op_t)op), weft_reduce_isa());

			memcpy(a, a0, bytes);
			fn(a, a, a, n);
			ck_assert_msg(first_mismatch(dt, (weft_op_t)op, a, a0, a0, n) == n,
				      "%s %s %s: dst == a == b", weft_dtype_name(dt),
				      weft_op_name((weft_op_t)op), weft_reduce_isa());
		}
	}
	weft_reduce_force_generic(false);
	free(a);
	free(b);
	free(a0);
	free(b0);
	free(want);
}

/* Every datatype in one test: each forked test costs tens of ms under ASan. */
START_TEST(test_kernels_in_place)
{
	for (int dt = 0; dt < WEFT_DATATYPE_COUNT; dt++)
		check_kernels_in_place((weft_datatype_t)dt);
}
END_TEST

/* The avx2 and generic kernels give the same bits (NaN payloads aside: the
 * reference does not define them, but the two paths should still agree on
 * NaN-ness). */
static void check_isa_paths_agree(weft_datatype_t dt)
{
	size_t n = 4099, bytes = n * weft_datatype_size(dt);
	unsigned char *a = xmalloc(bytes), *b = xmalloc(bytes);
	unsigned char *r1 = xmalloc(bytes), *r2 = xmalloc(bytes);

	for (int op = 0; op < WEFT_OP_COUNT; op++) {
		random_fill(dt, a, n);
		random_fill(dt, b, n);
		weft_reduce_force_generic(false);
		weft_reduce_kernel(dt, (weft_op_t)op)(r1, a, b, n);
		weft_reduce_force_generic(true);
		weft_reduce_kernel(dt, (weft_op_t)op)(r2, a, b, n);
		for (size_t i = 0; i < n; i++) {
			size_t at = i * weft_datatype_size(dt);
			if (!same_element(dt, r1 + at, r2 + at))
				ck_abort_msg("%s %s: element %zu differs", weft_dtype_name(dt),
					     weft_op_name((weft_op_t)op), i);
		}
	}
	weft_reduce_force_generic(false);
	free(a);
	free(b);
	free(r1);
	free(r2);
}

/* Every datatype in one test: each forked test costs tens of ms under ASan. */
START_TEST(test_isa_paths_agree)
{
	if (!have_avx2()) {
		fprintf(stderr, "test_isa_paths_agree: only the generic path here (no AVX2+F16C, "
				"or WEFT_ISA=generic)\n");
		return;
	}
	for (int dt = 0; dt < WEFT_DATATYPE_COUNT; dt++)
		check_isa_paths_agree((weft_datatype_t)dt);
}
END_TEST

/* Every fp16 value as a, against random b, through the avx2 (F16C) and
 * generic (software) paths: the same bits exactly, except that which NaN
 * payload comes out of NaN + NaN depends on the compiler's operand order. */
START_TEST(test_half_paths_agree_exactly)
{
	size_t n = 65536;
	uint16_t *a = (uint16_t *)xmalloc(n * 2), *b = (uint16_t *)xmalloc(n * 2);
	uint16_t *r1 = (uint16_t *)xmalloc(n * 2), *r2 = (uint16_t *)xmalloc(n * 2);

	if (!have_avx2())
		goto out_free;
	for (int round = 0; round < 8; round++) {
		for (size_t i = 0; i < n; i++) {
			a[i] = (uint16_t)i;
			b[i] = round == 0 ? 0 : (uint16_t)rng_next();
		}
		for (int op = 0; op < WEFT_OP_COUNT; op++) {
			weft_reduce_force_generic(false);
			weft_reduce_kernel(WEFT_FLOAT16, (weft_op_t)op)(r1, a, b, n);
			weft_reduce_force_generic(true);
			weft_reduce_kernel(WEFT_FLOAT16, (weft_op_t)op)(r2, a, b, n);
			for (size_t i = 0; i < n; i++)
				if (r1[i] != r2[i] && !(is_nan16(WEFT_FLOAT16, r1[i]) &&
							is_nan16(WEFT_FLOAT16, r2[i])))
					ck_abort_msg("half %s %04x,%04x: avx2 %04x generic %04x",
						     weft_op_name((weft_op_t)op), a[i], b[i], r1[i],
						     r2[i]);
		}
	}
	weft_reduce_force_generic(false);
out_free:
	free(a);
	free(b);
	free(r1);
	free(r2);
}
END_TEST

START_TEST(test_kernel_lookup)
{
	weft_reduce_force_generic(false);
	ck_assert_ptr_null(weft_reduce_kernel(WEFT_DATATYPE_COUNT, WEFT_SUM));
	ck_assert_ptr_null(weft_reduce_kernel((weft_datatype_t)-1, WEFT_SUM));
	ck_assert_ptr_null(weft_reduce_kernel(WEFT_FLOAT32, WEFT_OP_COUNT));
	ck_assert_ptr_null(weft_reduce_kernel(WEFT_FLOAT32, (weft_op_t)-1));
	for (int dt = 0; dt < WEFT_DATATYPE_COUNT; dt++)
		ck_assert_ptr_eq(weft_reduce_kernel((weft_datatype_t)dt, WEFT_AVG),
				 weft_reduce_kernel((weft_datatype_t)dt, WEFT_SUM));

	const char *isa = weft_reduce_isa();
	ck_assert(strcmp(isa, "avx2") == 0 || strcmp(isa, "generic") == 0);
	weft_reduce_force_generic(true);
	ck_assert_str_eq(weft_reduce_isa(), "generic");
	weft_reduce_force_generic(false);
	ck_assert_str_eq(weft_reduce_isa(), isa);
}
END_TEST

/* Float min/max: NaN propagates, -0 < +0, and op(a,b) == op(b,a) bitwise. */
START_TEST(test_float_min_max_semantics)
{
	const float nz = -0.0f, pz = 0.0f, inf = INFINITY;
	float a[6] = {nz, pz, NAN, 1.0f, -inf, 2.0f};
	float b[6] = {pz, nz, 1.0f, NAN, 3.0f, 2.0f};
	float r[6];
	int paths = have_avx2() ? 2 : 1;

	for (int path = 0; path < paths; path++) {
		weft_reduce_force_generic(path == 1);
		weft_reduce_kernel(WEFT_FLOAT32, WEFT_MIN)(r, a, b, 6);
		ck_assert_uint_eq(bits_of_f32(r[0]), 0x80000000);
		ck_assert_uint_eq(bits_of_f32(r[1]), 0x80000000);
		ck_assert(isnan(r[2]) && isnan(r[3]));
		ck_assert(r[4] == -inf && r[5] == 2.0f);
		weft_reduce_kernel(WEFT_FLOAT32, WEFT_MAX)(r, a, b, 6);
		ck_assert_uint_eq(bits_of_f32(r[0]), 0);
		ck_assert_uint_eq(bits_of_f32(r[1]), 0);
		ck_assert(isnan(r[2]) && isnan(r[3]));
		ck_assert(r[4] == 3.0f && r[5] == 2.0f);

		/* commutative to the bit, NaN payloads included */
		for (int op = WEFT_MIN; op <= WEFT_MAX; op++) {
			float x[64], y[64], xy[64], yx[64];
			random_fill(WEFT_FLOAT32, (unsigned char *)x, 64);
			random_fill(WEFT_FLOAT32, (unsigned char *)y, 64);
			weft_reduce_kernel(WEFT_FLOAT32, (weft_op_t)op)(xy, x, y, 64);
			weft_reduce_kernel(WEFT_FLOAT32, (weft_op_t)op)(yx, y, x, 64);
			ck_assert(memcmp(xy, yx, sizeof xy) == 0);
		}
	}
	weft_reduce_force_generic(false);
}
END_TEST

/* ---- fp16 / bf16 conversions ---------------------------------------------- */

/* The value of an fp16 bit pattern, decoded independently with ldexp. */
static double half_value(uint16_t h)
{
	int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
	double v = exp == 0 ? ldexp(man, -24) : ldexp(1024 + man, exp - 25);
	return (h & 0x8000) ? -v : v;
}

START_TEST(test_half_to_float_all)
{
	for (uint32_t i = 0; i < 65536; i++) {
		uint16_t h = (uint16_t)i;
		float f = weft_half_to_float(h);
		if ((h & 0x7c00) == 0x7c00) {
			uint32_t sign = (uint32_t)(h & 0x8000) << 16;
			uint32_t want = sign | 0x7f800000 | (uint32_t)(h & 0x3ff) << 13;
			if (h & 0x3ff)
				want |= 0x400000; /* NaN: quieted, payload kept */
			if (bits_of_f32(f) != want)
				ck_abort_msg("%04x -> %08x", h, bits_of_f32(f));
		} else {
			if ((double)f != half_value(h) || !!signbit(f) != !!(h & 0x8000))
				ck_abort_msg("%04x -> %a", h, (double)f);
		}
	}
}
END_TEST

/* Round to nearest even at every boundary between consecutive fp16 values:
 * just below the midpoint, at it (ties to even) and just above, for the
 * subnormal range, the normals, and the overflow threshold 65520. */
START_TEST(test_float_to_half_rounding)
{
	for (uint16_t h = 0; h < 0x7c00; h++) {
		double lo = half_value(h);
		double hi = h == 0x7bff ? 65536.0 : half_value((uint16_t)(h + 1));
		float mid = (float)((lo + hi) / 2); /* exact: 12 significant bits */
		uint16_t even = (h & 1) ? (uint16_t)(h + 1) : h;
		for (int neg = 0; neg < 2; neg++) {
			float s = neg ? -1.0f : 1.0f;
			uint16_t sign = neg ? 0x8000 : 0;
			if (weft_float_to_half(s * (float)lo) != (sign | h) ||
			    weft_float_to_half(s * nextafterf(mid, 0)) != (sign | h) ||
			    weft_float_to_half(s * mid) != (sign | even) ||
			    weft_float_to_half(s * nextafterf(mid, INFINITY)) != (sign | (h + 1)))
				ck_abort_msg("fp16 rounding around %04x (sign %d)", h, neg);
		}
	}
	ck_assert_uint_eq(weft_float_to_half(65504.0f), 0x7bff);
	ck_assert_uint_eq(weft_float_to_half(65519.99f), 0x7bff);
	ck_assert_uint_eq(weft_float_to_half(65520.0f), 0x7c00);
	ck_assert_uint_eq(weft_float_to_half(1e10f), 0x7c00);
	ck_assert_uint_eq(weft_float_to_half(-1e10f), 0xfc00);
	ck_assert_uint_eq(weft_float_to_half(INFINITY), 0x7c00);
	ck_assert_uint_eq(weft_float_to_half(-INFINITY), 0xfc00);
	ck_assert_uint_eq(weft_float_to_half(0x1p-149f), 0x0000); /* fp32 subnormal */
	ck_assert_uint_eq(weft_float_to_half(-0x1p-149f), 0x8000);
	ck_assert_uint_eq(weft_float_to_half(0x1p-25f), 0x0000);   /* tie to even: 0 */
	ck_assert_uint_eq(weft_float_to_half(0x1.8p-24f), 0x0002); /* tie to even: 2 */
	/* NaN stays NaN, even when only low payload bits are set; quiet bit set */
	ck_assert_uint_eq(weft_float_to_half(f32_of_bits(0x7f800001)), 0x7e00);
	ck_assert_uint_eq(weft_float_to_half(f32_of_bits(0xffc00000)), 0xfe00);
	ck_assert_uint_eq(weft_float_to_half(f32_of_bits(0x7fa02000)), 0x7f01);
}
END_TEST

START_TEST(test_bf16_conversions)
{
	for (uint32_t i = 0; i < 65536; i++)
		if (bits_of_f32(weft_bf16_to_float((uint16_t)i)) != i << 16)
			ck_abort_msg("bf16 %04x widened wrong", i);

	for (uint16_t h = 0; h < 0x7f80; h++) {
		double lo = weft_bf16_to_float(h);
		double hi = h == 0x7f7f ? 0x1p128 : weft_bf16_to_float((uint16_t)(h + 1));
		float mid = (float)((lo + hi) / 2); /* exact: 9 significant bits */
		uint16_t even = (h & 1) ? (uint16_t)(h + 1) : h;
		for (int neg = 0; neg < 2; neg++) {
			float s = neg ? -1.0f : 1.0f;
			uint16_t sign = neg ? 0x8000 : 0;
			if (weft_float_to_bf16(s * (float)lo) != (sign | h) ||
			    weft_float_to_bf16(s * nextafterf(mid, 0)) != (sign | h) ||
			    weft_float_to_bf16(s * mid) != (sign | even) ||
			    weft_float_to_bf16(s * nextafterf(mid, INFINITY)) != (sign | (h + 1)))
				ck_abort_msg("bf16 rounding around %04x (sign %d)", h, neg);
		}
	}
	ck_assert_uint_eq(weft_float_to_bf16(INFINITY), 0x7f80);
	ck_assert_uint_eq(weft_float_to_bf16(FLT_MAX), 0x7f80); /* rounds up past the max */
	/* NaN whose payload lives only in the low 16 bits must stay NaN */
	ck_assert_uint_eq(weft_float_to_bf16(f32_of_bits(0x7f800001)), 0x7fc0);
	ck_assert_uint_eq(weft_float_to_bf16(f32_of_bits(0xffffffff)), 0xffff);
	ck_assert(isnan(weft_bf16_to_float(weft_float_to_bf16(NAN))));
}
END_TEST

struct edge16 {
	weft_datatype_t dt;
	weft_op_t op;
	uint16_t a, b, want;
	const char *what;
};

/* Rounding edges seen through the kernels, on both paths. */
START_TEST(test_16bit_kernel_edges)
{
	static const struct edge16 cases[] = {
	    {WEFT_FLOAT16, WEFT_SUM, 0x6800, 0x3c00, 0x6800, "2048+1 ties to even 2048"},
	    {WEFT_FLOAT16, WEFT_SUM, 0x6801, 0x3c00, 0x6802, "2050+1 ties to even 2052"},
	    {WEFT_FLOAT16, WEFT_SUM, 0x7bff, 0x4c00, 0x7c00, "65504+16 overflows to inf"},
	    {WEFT_FLOAT16, WEFT_SUM, 0x7bff, 0x4800, 0x7bff, "65504+8 stays 65504"},
	    {WEFT_FLOAT16, WEFT_SUM, 0x0001, 0x0001, 0x0002, "subnormal + subnormal"},
	    {WEFT_FLOAT16, WEFT_SUM, 0x03ff, 0x0001, 0x0400, "largest subnormal + 1 ulp"},
	    {WEFT_FLOAT16, WEFT_PROD, 0x0001, 0x3800, 0x0000, "2^-25 ties to 0"},
	    {WEFT_FLOAT16, WEFT_PROD, 0x0003, 0x3800, 0x0002, "1.5 ulp ties to 2"},
	    {WEFT_FLOAT16, WEFT_SUM, 0x7c00, 0xfc00, 0xfe00, "inf + -inf is NaN"},
	    {WEFT_FLOAT16, WEFT_SUM, 0x7c00, 0x3c00, 0x7c00, "inf + 1"},
	    {WEFT_FLOAT16, WEFT_SUM, 0x7d00, 0x3c00, 0x7f00, "NaN + 1 is the quieted NaN"},
	    {WEFT_FLOAT16, WEFT_MIN, 0x8000, 0x0000, 0x8000, "min(-0,+0)"},
	    {WEFT_FLOAT16, WEFT_MAX, 0x8000, 0x0000, 0x0000, "max(-0,+0)"},
	    {WEFT_FLOAT16, WEFT_MAX, 0x7e00, 0x3c00, 0x7e00, "max(NaN,1)"},
	    {WEFT_BFLOAT16, WEFT_SUM, 0x4380, 0x3f80, 0x4380, "256+1 ties to even 256"},
	    {WEFT_BFLOAT16, WEFT_SUM, 0x4381, 0x3f80, 0x4382, "258+1 ties to even 260"},
	    {WEFT_BFLOAT16, WEFT_SUM, 0x7f7f, 0x7f7f, 0x7f80, "max + max overflows to inf"},
	    {WEFT_BFLOAT16, WEFT_SUM, 0x0001, 0x0001, 0x0002, "subnormal + subnormal"},
	    {WEFT_BFLOAT16, WEFT_SUM, 0x7fc1, 0x3f80, 0x7fc1, "NaN + 1 keeps the NaN"},
	    {WEFT_BFLOAT16, WEFT_SUM, 0xff80, 0x7f80, 0xffc0, "-inf + inf is NaN"},
	    {WEFT_BFLOAT16, WEFT_MIN, 0x0000, 0x8000, 0x8000, "min(+0,-0)"},
	};
	int paths = have_avx2() ? 2 : 1;

	for (int path = 0; path < paths; path++) {
		weft_reduce_force_generic(path == 1);
		for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
			const struct edge16 *e = &cases[c];
			/* 19 copies: the full-vector loop and the tail both see it */
			uint16_t a[19], b[19], r[19];
			for (int i = 0; i < 19; i++) {
				a[i] = e->a;
				b[i] = e->b;
			}
			weft_reduce_kernel(e->dt, e->op)(r, a, b, 19);
			for (int i = 0; i < 19; i++)
				ck_assert_msg(r[i] == e->want, "%s (%s): got %04x want %04x",
					      e->what, weft_reduce_isa(), r[i], e->want);
		}
	}
	weft_reduce_force_generic(false);
}
END_TEST

/* ---- scale ----------------------------------------------------------------- */

START_TEST(test_scale_integers)
{
	int32_t i32[] = {-7, 7, -1, 0, INT32_MIN, INT32_MAX, -6};
	int32_t i32_want[] = {-3, 3, 0, 0, INT32_MIN / 2, INT32_MAX / 2, -3};
	weft_reduce_scale(i32, 7, WEFT_INT32, 2);
	ck_assert(memcmp(i32, i32_want, sizeof i32) == 0);

	int8_t i8[] = {-128, 127, -5, 5};
	int8_t i8_want[] = {-42, 42, -1, 1};
	weft_reduce_scale(i8, 4, WEFT_INT8, 3);
	ck_assert(memcmp(i8, i8_want, sizeof i8) == 0);

	uint8_t u8[] = {255, 1, 200};
	uint8_t u8_want[] = {127, 0, 100};
	weft_reduce_scale(u8, 3, WEFT_UINT8, 2);
	ck_assert(memcmp(u8, u8_want, sizeof u8) == 0);

	uint32_t u32[] = {UINT32_MAX, 9};
	uint32_t u32_want[] = {UINT32_MAX / 7, 1};
	weft_reduce_scale(u32, 2, WEFT_UINT32, 7);
	ck_assert(memcmp(u32, u32_want, sizeof u32) == 0);

	int64_t i64[] = {INT64_MIN, INT64_MAX, -10};
	int64_t i64_want[] = {INT64_MIN / 3, INT64_MAX / 3, -3};
	weft_reduce_scale(i64, 3, WEFT_INT64, 3);
	ck_assert(memcmp(i64, i64_want, sizeof i64) == 0);

	uint64_t u64[] = {UINT64_MAX, 5};
	uint64_t u64_want[] = {UINT64_MAX / 5, 1};
	weft_reduce_scale(u64, 2, WEFT_UINT64, 5);
	ck_assert(memcmp(u64, u64_want, sizeof u64) == 0);

	/* divisor 1 and count 0 change nothing */
	int32_t same[] = {5, -5};
	weft_reduce_scale(same, 2, WEFT_INT32, 1);
	ck_assert(same[0] == 5 && same[1] == -5);
	weft_reduce_scale(NULL, 0, WEFT_INT32, 4);
}
END_TEST

START_TEST(test_scale_floats)
{
	size_t n = 1003;
	unsigned char *buf = xmalloc(n * 8 + 1);
	float *want = (float *)xmalloc(n * sizeof(float));
	double *wantd = (double *)xmalloc(n * sizeof(double));

	/* misaligned by one byte on purpose */
	random_fill(WEFT_FLOAT32, buf + 1, n);
	memcpy(want, buf + 1, n * 4);
	for (size_t i = 0; i < n; i++)
		want[i] /= 3.0f;
	weft_reduce_scale(buf + 1, n, WEFT_FLOAT32, 3);
	for (size_t i = 0; i < n; i++)
		if (!same_element(WEFT_FLOAT32, buf + 1 + 4 * i, (unsigned char *)&want[i]))
			ck_abort_msg("float scale: element %zu", i);

	random_fill(WEFT_FLOAT64, buf + 1, n);
	memcpy(wantd, buf + 1, n * 8);
	for (size_t i = 0; i < n; i++)
		wantd[i] /= 7.0;
	weft_reduce_scale(buf + 1, n, WEFT_FLOAT64, 7);
	for (size_t i = 0; i < n; i++)
		if (!same_element(WEFT_FLOAT64, buf + 1 + 8 * i, (unsigned char *)&wantd[i]))
			ck_abort_msg("double scale: element %zu", i);

	free(buf);
	free(want);
	free(wantd);
}
END_TEST

/* Every fp16 and bf16 value divided by 3 and by 6: divide in fp32, round
 * once; on both paths. */
START_TEST(test_scale_16bit_all)
{
	size_t n = 65536;
	uint16_t *h = (uint16_t *)xmalloc(n * 2);
	static const int divisors[] = {3, 6};
	int paths = have_avx2() ? 2 : 1;

	for (int path = 0; path < 2 * paths; path++) {
		int dt = path % 2 ? WEFT_BFLOAT16 : WEFT_FLOAT16;
		weft_reduce_force_generic(path >= 2);
		for (size_t k = 0; k < 2; k++) {
			int d = divisors[k];
			for (size_t i = 0; i < n; i++)
				h[i] = (uint16_t)i;
			weft_reduce_scale(h, n - 1, (weft_datatype_t)dt, d); /* odd count */
			for (size_t i = 0; i < n; i++) {
				uint16_t x = (uint16_t)i, want;
				if (i == n - 1)
					want = x; /* past count: untouched */
				else if (dt == WEFT_FLOAT16)
					want = weft_float_to_half(weft_half_to_float(x) / (float)d);
				else
					want = weft_float_to_bf16(weft_bf16_to_float(x) / (float)d);
				if (h[i] != want && !(is_nan16((weft_datatype_t)dt, h[i]) &&
						      is_nan16((weft_datatype_t)dt, want)))
					ck_abort_msg("%s %04x / %d: got %04x want %04x",
						     weft_dtype_name((weft_datatype_t)dt), x, d,
						     h[i], want);
			}
		}
	}
	weft_reduce_force_generic(false);
	/* a value that needs the fp32 division: 1/3 in fp16 */
	uint16_t one = 0x3c00;
	weft_reduce_scale(&one, 1, WEFT_FLOAT16, 3);
	ck_assert_uint_eq(one, 0x3555);
	free(h);
}
END_TEST

/* ---- names and sizes ------------------------------------------------------- */

START_TEST(test_names_and_sizes)
{
	static const char *const names[] = {"int8",   "uint8", "int32",	   "uint32", "int64",
					    "uint64", "half",  "bfloat16", "float",  "double"};
	static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
	static const char *const ops[] = {"sum", "prod", "min", "max", "avg"};

	for (int dt = 0; dt < WEFT_DATATYPE_COUNT; dt++) {
		ck_assert_str_eq(weft_dtype_name((weft_datatype_t)dt), names[dt]);
		ck_assert_uint_eq(weft_datatype_size((weft_datatype_t)dt), sizes[dt]);
	}
	for (int op = 0; op < WEFT_OP_COUNT; op++)
		ck_assert_str_eq(weft_op_name((weft_op_t)op), ops[op]);
	ck_assert_str_eq(weft_dtype_name(WEFT_DATATYPE_COUNT), "invalid");
	ck_assert_str_eq(weft_dtype_name((weft_datatype_t)-1), "invalid");
	ck_assert_str_eq(weft_op_name(WEFT_OP_COUNT), "invalid");
	ck_assert_str_eq(weft_op_name((weft_op_t)-3), "invalid");
	ck_assert_uint_eq(weft_datatype_size(WEFT_DATATYPE_COUNT), 0);
	ck_assert_uint_eq(weft_datatype_size((weft_datatype_t)-1), 0);
}
END_TEST

/* ---- WEFT_ISA ------------------------------------------------------------ */

/* What the CPU can do, asked here rather than of the library (whose answer
 * WEFT_ISA changes): AVX2, and F16C from CPUID leaf 1. */
static bool cpu_can_avx2(void)
{
	unsigned int eax, ebx, ecx, edx;
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
	       (ecx & bit_F16C);
}

/* The dispatch reads WEFT_ISA once per process: each case runs in a fresh
 * child with @p value set (NULL: unset) and exits with @p fn's result. */
static void with_isa(const char *value, int (*fn)(void))
{
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (value)
			setenv("WEFT_ISA", value, 1);
		else
			unsetenv("WEFT_ISA");
		_exit(fn());
	}
	int status = 0;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "WEFT_ISA=%s: the check failed (status %d; see stderr)",
		      value ? value : "(unset)", status);
}

static int child_fail(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	return 1;
}

static int isa_unset(void)
{
	const char *want = cpu_can_avx2() ? "avx2" : "generic";
	char why[160];
	if (weft_reduce_isa_check(why, sizeof(why)) != WEFT_SUCCESS)
		return child_fail("WEFT_ISA unset: check says \"%s\"%s", why, "");
	if (strcmp(weft_reduce_isa(), want) != 0)
		return child_fail("WEFT_ISA unset: kernels are %s, expected %s", weft_reduce_isa(),
				  want);
	return 0;
}

/* generic is kept even when the test hook lets go (it falls back to the
 * setting, not to the CPU), and the kernels still compute the right thing. */
static int isa_generic(void)
{
	char why[160];
	if (weft_reduce_isa_check(why, sizeof(why)) != WEFT_SUCCESS)
		return child_fail("WEFT_ISA=generic: check says \"%s\"%s", why, "");
	if (strcmp(weft_reduce_isa(), "generic") != 0)
		return child_fail("WEFT_ISA=generic: kernels are %s%s", weft_reduce_isa(), "");
	weft_reduce_force_generic(true);
	weft_reduce_force_generic(false);
	if (strcmp(weft_reduce_isa(), "generic") != 0)
		return child_fail("WEFT_ISA=generic: after the test hook, kernels are %s%s",
				  weft_reduce_isa(), "");
	/* (1 + 2^-10) + 2^-11: a tie that nearest-even rounds up, truncation down */
	uint16_t a = 0x3c01, b = 0x1000, d = 0;
	weft_reduce_kernel(WEFT_FLOAT16, WEFT_SUM)(&d, &a, &b, 1);
	if (d != 0x3c02)
		return child_fail("WEFT_ISA=generic: (1 + 2^-10) + 2^-11 in fp16 gave %s%s",
				  d == 0x3c01 ? "0x3c01 (truncated)" : "neither neighbour", "");
	return 0;
}

static int isa_avx2(void)
{
	char why[160];
	weft_status_t st = weft_reduce_isa_check(why, sizeof(why));
	if (cpu_can_avx2()) {
		if (st != WEFT_SUCCESS || strcmp(weft_reduce_isa(), "avx2") != 0)
			return child_fail("WEFT_ISA=avx2 on an AVX2 CPU: \"%s\", kernels %s", why,
					  weft_reduce_isa());
		return 0;
	}
	if (st != WEFT_ERR_NOT_SUPPORTED || !strstr(why, "WEFT_ISA=avx2"))
		return child_fail("WEFT_ISA=avx2 without AVX2: %s \"%s\"", weft_status_string(st),
				  why);
	if (strcmp(weft_reduce_isa(), "generic") != 0)
		return child_fail("WEFT_ISA=avx2 without AVX2: kernels are %s%s", weft_reduce_isa(),
				  "");
	return 0;
}

/* An unknown value: the check names it (the kernels, which cannot fail,
 * keep the CPU's best), and creating a communicator fails with it. */
static int isa_unknown(void)
{
	char why[160];
	weft_status_t st = weft_reduce_isa_check(why, sizeof(why));
	if (st != WEFT_ERR_INVALID_ARG || !strstr(why, "WEFT_ISA=sse9: expected generic or avx2"))
		return child_fail("WEFT_ISA=sse9: %s \"%s\"", weft_status_string(st), why);
	const char *want = cpu_can_avx2() ? "avx2" : "generic";
	if (strcmp(weft_reduce_isa(), want) != 0)
		return child_fail("WEFT_ISA=sse9: kernels are %s, expected %s", weft_reduce_isa(),
				  want);
	weft_unique_id_t id;
	weft_comm_t comm = NULL;
	if (weft_get_unique_id(&id) != WEFT_SUCCESS)
		return child_fail("weft_get_unique_id: %s%s", weft_init_last_error(), "");
	st = weft_comm_init_rank(&comm, 1, id, 0, NULL);
	if (st != WEFT_ERR_INVALID_ARG || comm ||
	    !strstr(weft_init_last_error(), "WEFT_ISA=sse9: expected generic or avx2"))
		return child_fail("weft_comm_init_rank with WEFT_ISA=sse9: %s \"%s\"",
				  weft_status_string(st), weft_init_last_error());
	return 0;
}

START_TEST(test_isa_setting)
{
	with_isa(NULL, isa_unset);
	with_isa("", isa_unset);
	with_isa("generic", isa_generic);
	with_isa("avx2", isa_avx2);
	with_isa("sse9", isa_unknown);
}
END_TEST

static Suite *reduce_suite(void)
{
	Suite *s = suite_create("reduce");
	TCase *tc = tcase_create("kernels");

	tcase_add_test(tc, test_kernels_match_reference);
	tcase_add_test(tc, test_kernels_in_place);
	tcase_add_test(tc, test_isa_paths_agree);
	tcase_add_test(tc, test_half_paths_agree_exactly);
	tcase_add_test(tc, test_kernel_lookup);
	tcase_add_test(tc, test_float_min_max_semantics);
	tcase_add_test(tc, test_isa_setting);
	suite_add_tcase(s, tc);

	tc = tcase_create("conversions");
	tcase_add_test(tc, test_half_to_float_all);
	tcase_add_test(tc, test_float_to_half_rounding);
	tcase_add_test(tc, test_bf16_conversions);
	tcase_add_test(tc, test_16bit_kernel_edges);
	suite_add_tcase(s, tc);

	tc = tcase_create("scale");
	tcase_add_test(tc, test_scale_integers);
	tcase_add_test(tc, test_scale_floats);
	tcase_add_test(tc, test_scale_16bit_all);
	suite_add_tcase(s, tc);

	tc = tcase_create("names");
	tcase_add_test(tc, test_names_and_sizes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(reduce_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
