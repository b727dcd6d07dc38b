/*
 * reduce.c — local reduction kernels: dst[i] = a[i] op b[i].
 *
 * How the kernels are built. Each kernel is one loop over 32-byte vectors
 * written with GCC vector extensions. The loops (reduce_loop; reduce_loop_16,
 * reduce_loop_f16c and reduce_loop_bf16_avx2 for the 16-bit floats) and the
 * element-wise combine helpers are always_inline and take the datatype, the
 * op and the instruction set as arguments; every kernel is a one-line
 * function that calls them with constants, so the switches fold away and
 * each kernel is straight-line vector code. Every kernel exists twice:
 *
 *   avx2_*     compiled with target("avx2,f16c"): a 32-byte vector is one ymm
 *              register, fp16 is converted with vcvtph2ps / vcvtps2ph, bf16
 *              with AVX2 unpack/pack;
 *   generic_*  compiled with the x86-64 baseline flags: GCC splits each
 *              32-byte vector into SSE2 halves (comparisons are split by
 *              hand, see compare()), fp16 is converted in software.
 *
 * weft_reduce_kernel() picks one table, once, with __builtin_cpu_supports.
 * No -m flag is needed on the command line, so the library runs on any
 * x86-64 and is fast where AVX2 is present. (Every AVX2 CPU has F16C; a CPU
 * without it gets the generic table.) WEFT_ISA=generic makes an AVX2 machine
 * use the generic table too, so that tests (and users chasing a kernel bug)
 * can run both paths through the whole library.
 *
 * The last partial vector is copied into a zero-padded vector, combined by
 * the same code and copied back, so tail and body agree bit for bit by
 * construction: no op has a separate scalar version.
 *
 * Loads and stores go through memcpy, so pointers need no alignment at all.
 * Each vector of a and b is loaded before the same bytes of dst are stored,
 * which is what makes dst == a and dst == b (exact aliasing) safe.
 *
 * Semantics:
 *  - Integers: sum and product wrap modulo 2^bits (computed on unsigned
 *    lanes, so there is no signed overflow); min and max honour signedness.
 *  - Floats: sum and product are IEEE operations in the current rounding
 *    mode; which payload NaN + NaN gives is unspecified (the compiler may
 *    swap the operands, and x86 keeps the first one's). Min and max are
 *    IEEE 754-2019 minimum/maximum: a NaN in either operand gives a NaN,
 *    and -0 < +0. They are bitwise commutative
 *    (op(a,b) and op(b,a) give the same bits, also for NaN and signed zeros),
 *    so ranks that combine the same values in a different order still get
 *    identical results. Plain comparisons (x < y ? x : y) would not be, and
 *    fminf would hide NaNs, which training jobs want to see.
 *  - fp16 and bf16 are widened to fp32, combined and rounded back to nearest
 *    even (fp16 NaNs come out quiet, as F16C makes them). fp32 has at least
 *    2p+2 significand bits for both (p = 11 and 8), so the double rounding
 *    gives the correctly rounded fp16/bf16 sum, product or quotient.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <cpuid.h>
#include <immintrin.h>

#include "reduce/reduce.h"
#include "reduce/reduce_isa.h"
#include "util/dtype.h"
#include "util/log.h"
#include "util/settings.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))
#define AVX2_TARGET   __attribute__((target("avx2,f16c")))

#define VEC_BYTES 32

typedef uint8_t v_u8 __attribute__((vector_size(VEC_BYTES)));
typedef int8_t v_i8 __attribute__((vector_size(VEC_BYTES)));
typedef uint32_t v_u32 __attribute__((vector_size(VEC_BYTES)));
typedef int32_t v_i32 __attribute__((vector_size(VEC_BYTES)));
typedef uint64_t v_u64 __attribute__((vector_size(VEC_BYTES)));
typedef int64_t v_i64 __attribute__((vector_size(VEC_BYTES)));
typedef float v_f32 __attribute__((vector_size(VEC_BYTES)));
typedef double v_f64 __attribute__((vector_size(VEC_BYTES)));
/* Eight fp16 or bf16 values: they widen to one v_f32. */
typedef uint16_t v_u16x8 __attribute__((vector_size(16)));

/* The helpers below return 32-byte vectors by value (and take them by
 * pointer, which keeps GCC from noting the GCC 4.6 parameter ABI change).
 * They are all always_inline, so no call crosses an ABI boundary and the
 * warning that AVX and non-AVX code return such vectors differently does not
 * apply. */
#pragma GCC diagnostic ignored "-Wpsabi"

/* ---- scalar fp16 / bf16 conversions ------------------------------------- */

static inline uint32_t float_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static inline float bits_float(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

/* NaNs are quieted with their payload kept, exactly as vcvtph2ps does, so the
 * software and F16C paths agree bit for bit. */
static inline float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff;

	if (exp == 0x1f)
		return bits_float(sign | 0x7f800000 | man << 13 | (man ? 0x400000 : 0));
	if (exp == 0) /* zero or subnormal: man * 2^-24 is exact in fp32 */
		return bits_float(sign | float_bits((float)man * 0x1p-24f));
	return bits_float(sign | (exp + 112) << 23 | man << 13);
}

/* Round to nearest even with integer arithmetic only (independent of MXCSR).
 * NaN: quiet bit set, top payload bits kept, as vcvtps2ph does. */
static inline uint16_t float_to_half(float f)
{
	uint32_t x = float_bits(f);
	uint16_t sign = (x >> 16) & 0x8000;
	uint32_t ax = x & 0x7fffffff;

	if (ax > 0x7f800000)
		return sign | 0x7e00 | ((ax >> 13) & 0x3ff);
	if (ax >= 0x47800000) /* >= 65536 or infinity */
		return sign | 0x7c00;
	if (ax < 0x38800000) { /* below 2^-14: half subnormal or zero */
		uint32_t exp = ax >> 23;
		if (exp < 102) /* below 2^-25: rounds to zero */
			return sign;
		/* value / 2^-24 = m * 2^(exp - 126); shift right by s in [14, 24] */
		uint32_t m = (ax & 0x7fffff) | 0x800000;
		uint32_t s = 126 - exp;
		uint32_t q = m >> s;
		uint32_t rem = m & ((1u << s) - 1);
		uint32_t halfway = 1u << (s - 1);
		if (rem > halfway || (rem == halfway && (q & 1)))
			q++; /* may carry into the smallest normal, 0x400: correct */
		return sign | (uint16_t)q;
	}
	/* Normal: rebias, add just under half an ulp plus the lowest kept bit
	 * (ties go to even); a carry out of the mantissa bumps the exponent,
	 * up to infinity for [65520, 65536). */
	ax -= 112u << 23;
	ax += 0xfff + ((ax >> 13) & 1);
	return sign | (uint16_t)(ax >> 13);
}

static inline float bf16_to_float(uint16_t b)
{
	return bits_float((uint32_t)b << 16);
}

static inline uint16_t float_to_bf16(float f)
{
	uint32_t x = float_bits(f);

	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40); /* NaN: keep it one, quietly */
	return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

float weft_half_to_float(uint16_t h)
{
	return half_to_float(h);
}

uint16_t weft_float_to_half(float f)
{
	return float_to_half(f);
}

float weft_bf16_to_float(uint16_t b)
{
	return bf16_to_float(b);
}

uint16_t weft_float_to_bf16(float f)
{
	return float_to_bf16(f);
}

/* ---- element-wise combine on one vector --------------------------------- */

typedef int8_t v_i8x16 __attribute__((vector_size(16)));
typedef uint8_t v_u8x16 __attribute__((vector_size(16)));
typedef int32_t v_i32x4 __attribute__((vector_size(16)));
typedef uint32_t v_u32x4 __attribute__((vector_size(16)));
typedef int64_t v_i64x2 __attribute__((vector_size(16)));
typedef uint64_t v_u64x2 __attribute__((vector_size(16)));
typedef float v_f32x4 __attribute__((vector_size(16)));
typedef double v_f64x2 __attribute__((vector_size(16)));

enum compare_kind { CMP_LESS, CMP_EQUAL };

/* Lane masks of x < y or x == y for 16 bytes of dtype. */
static ALWAYS_INLINE v_u8x16 compare_16(const void *x, const void *y, weft_datatype_t dtype,
					enum compare_kind kind)
{
	bool less = kind == CMP_LESS;

	switch (dtype) {
	case WEFT_INT8: {
		v_i8x16 a, b;
		memcpy(&a, x, 16);
		memcpy(&b, y, 16);
		return (v_u8x16)(less ? a < b : a == b);
	}
	case WEFT_UINT8: {
		v_u8x16 a, b;
		memcpy(&a, x, 16);
		memcpy(&b, y, 16);
		return (v_u8x16)(less ? a < b : a == b);
	}
	case WEFT_INT32: {
		v_i32x4 a, b;
		memcpy(&a, x, 16);
		memcpy(&b, y, 16);
		return (v_u8x16)(less ? a < b : a == b);
	}
	case WEFT_UINT32: {
		v_u32x4 a, b;
		memcpy(&a, x, 16);
		memcpy(&b, y, 16);
		return (v_u8x16)(less ? a < b : a == b);
	}
	case WEFT_INT64: {
		v_i64x2 a, b;
		memcpy(&a, x, 16);
		memcpy(&b, y, 16);
		return (v_u8x16)(less ? a < b : a == b);
	}
	case WEFT_UINT64: {
		v_u64x2 a, b;
		memcpy(&a, x, 16);
		memcpy(&b, y, 16);
		return (v_u8x16)(less ? a < b : a == b);
	}
	case WEFT_FLOAT64: {
		v_f64x2 a, b;
		memcpy(&a, x, 16);
		memcpy(&b, y, 16);
		return (v_u8x16)(less ? a < b : a == b);
	}
	default: { /* fp32, and fp16/bf16 widened to it */
		v_f32x4 a, b;
		memcpy(&a, x, 16);
		memcpy(&b, y, 16);
		return (v_u8x16)(less ? a < b : a == b);
	}
	}
}

/* Lane masks (all ones where true) of x < y or x == y for one 32-byte vector
 * of dtype. With AVX2 (wide) a 32-byte comparison is one instruction.
 * Without AVX, GCC 12 compares 32-byte vectors one lane at a time in scalar
 * code (5-20x slower), so the generic kernels compare the two 16-byte
 * halves, which SSE2 has instructions for (64-bit integers excepted). */
static ALWAYS_INLINE v_u8 compare(const void *x, const void *y, weft_datatype_t dtype,
				  enum compare_kind kind, bool wide)
{
	const unsigned char *px = x, *py = y;
	v_u8x16 lo, hi;
	v_u8 r;

	if (wide) {
		switch (dtype) {
		case WEFT_INT8: {
			v_i8 a, b;
			memcpy(&a, x, 32);
			memcpy(&b, y, 32);
			return (v_u8)(kind == CMP_LESS ? a < b : a == b);
		}
		case WEFT_UINT8: {
			v_u8 a, b;
			memcpy(&a, x, 32);
			memcpy(&b, y, 32);
			return (v_u8)(kind == CMP_LESS ? a < b : a == b);
		}
		case WEFT_INT32: {
			v_i32 a, b;
			memcpy(&a, x, 32);
			memcpy(&b, y, 32);
			return (v_u8)(kind == CMP_LESS ? a < b : a == b);
		}
		case WEFT_UINT32: {
			v_u32 a, b;
			memcpy(&a, x, 32);
			memcpy(&b, y, 32);
			return (v_u8)(kind == CMP_LESS ? a < b : a == b);
		}
		case WEFT_INT64: {
			v_i64 a, b;
			memcpy(&a, x, 32);
			memcpy(&b, y, 32);
			return (v_u8)(kind == CMP_LESS ? a < b : a == b);
		}
		case WEFT_UINT64: {
			v_u64 a, b;
			memcpy(&a, x, 32);
			memcpy(&b, y, 32);
			return (v_u8)(kind == CMP_LESS ? a < b : a == b);
		}
		case WEFT_FLOAT64: {
			v_f64 a, b;
			memcpy(&a, x, 32);
			memcpy(&b, y, 32);
			return (v_u8)(kind == CMP_LESS ? a < b : a == b);
		}
		default: {
			v_f32 a, b;
			memcpy(&a, x, 32);
			memcpy(&b, y, 32);
			return (v_u8)(kind == CMP_LESS ? a < b : a == b);
		}
		}
	}
	lo = compare_16(px, py, dtype, kind);
	hi = compare_16(px + 16, py + 16, dtype, kind);
	memcpy(&r, &lo, 16);
	memcpy((unsigned char *)&r + 16, &hi, 16);
	return r;
}

/* Integers of any width: sum and product on unsigned lanes (they wrap, no
 * undefined behaviour); min and max by the signed or unsigned comparison
 * that dtype calls for. */
static ALWAYS_INLINE v_u8 combine_integer(const v_u8 *px, const v_u8 *py, weft_datatype_t dtype,
					  weft_op_t op, bool wide)
{
	v_u8 x = *px, y = *py;

	switch (op) {
	case WEFT_MIN:
	case WEFT_MAX: {
		v_u8 lt = compare(px, py, dtype, CMP_LESS, wide);
		return op == WEFT_MIN ? (lt & x) | (~lt & y) : (lt & y) | (~lt & x);
	}
	case WEFT_PROD:
		if (dtype == WEFT_INT8 || dtype == WEFT_UINT8)
			return x * y;
		if (dtype == WEFT_INT32 || dtype == WEFT_UINT32)
			return (v_u8)((v_u32)x * (v_u32)y);
		return (v_u8)((v_u64)x * (v_u64)y);
	default: /* WEFT_SUM, WEFT_AVG */
		if (dtype == WEFT_INT8 || dtype == WEFT_UINT8)
			return x + y;
		if (dtype == WEFT_INT32 || dtype == WEFT_UINT32)
			return (v_u8)((v_u32)x + (v_u32)y);
		return (v_u8)((v_u64)x + (v_u64)y);
	}
}

/* IEEE 754-2019 minimum / maximum, bitwise commutative (see the top). When
 * neither operand is smaller they are equal or one is a NaN: x|y turns
 * {-0,+0} into -0 and keeps a NaN a NaN (all-ones exponent, non-zero
 * mantissa); x&y turns {-0,+0} into +0 and is x for any other equal pair.
 * The lane masks work the same for fp32 and fp64: they are bit patterns. */
static ALWAYS_INLINE v_u8 min_max_float(const void *x, const void *y, weft_datatype_t dtype,
					bool is_max, bool wide)
{
	v_u8 xi, yi;
	v_u8 lt = compare(x, y, dtype, CMP_LESS, wide);
	v_u8 gt = compare(y, x, dtype, CMP_LESS, wide);

	memcpy(&xi, x, 32);
	memcpy(&yi, y, 32);
	if (!is_max)
		return (lt & xi) | (gt & yi) | (~(lt | gt) & (xi | yi));

	v_u8 eq = compare(x, y, dtype, CMP_EQUAL, wide);
	return (gt & xi) | (lt & yi) | (eq & xi & yi) | (~(lt | gt | eq) & (xi | yi));
}

static ALWAYS_INLINE v_f32 combine_float(const v_f32 *px, const v_f32 *py, weft_op_t op, bool wide)
{
	switch (op) {
	case WEFT_PROD: return *px * *py;
	case WEFT_MIN:
	case WEFT_MAX: return (v_f32)min_max_float(px, py, WEFT_FLOAT32, op == WEFT_MAX, wide);
	default: return *px + *py;
	}
}

/* combine_float for the AVX2-target functions: clang rejects calls from
 * them to non-AVX functions that return 32-byte vectors, even inlined. */
static ALWAYS_INLINE void combine_float_to(v_f32 *r, const v_f32 *px, const v_f32 *py, weft_op_t op)
{
	*r = combine_float(px, py, op, true);
}

static ALWAYS_INLINE v_f64 combine_double(const v_f64 *px, const v_f64 *py, weft_op_t op, bool wide)
{
	switch (op) {
	case WEFT_PROD: return *px * *py;
	case WEFT_MIN:
	case WEFT_MAX: return (v_f64)min_max_float(px, py, WEFT_FLOAT64, op == WEFT_MAX, wide);
	default: return *px + *py;
	}
}

/* One 32-byte vector of any datatype except fp16/bf16: a and b are read
 * whole before r is written, so r may be a or b. */
static ALWAYS_INLINE void combine(v_u8 *r, const v_u8 *a, const v_u8 *b, weft_datatype_t dtype,
				  weft_op_t op, bool wide)
{
	if (dtype == WEFT_FLOAT32) {
		v_f32 x = (v_f32)*a, y = (v_f32)*b;
		*r = (v_u8)combine_float(&x, &y, op, wide);
	} else if (dtype == WEFT_FLOAT64) {
		v_f64 x = (v_f64)*a, y = (v_f64)*b;
		*r = (v_u8)combine_double(&x, &y, op, wide);
	} else {
		*r = combine_integer(a, b, dtype, op, wide);
	}
}

/* ---- loops --------------------------------------------------------------- */

/* `wide` is true in the avx2 kernels and false in the generic ones; it is a
 * constant in every kernel, so only one side of each test is compiled. */

/* One vector at byte offset 0 of d, a and b, loaded whole before the store. */
static ALWAYS_INLINE void reduce_vec(unsigned char *d, const unsigned char *a,
				     const unsigned char *b, weft_datatype_t dtype, weft_op_t op,
				     bool wide)
{
	v_u8 x, y, r;

	memcpy(&x, a, sizeof x);
	memcpy(&y, b, sizeof y);
	combine(&r, &x, &y, dtype, op, wide);
	memcpy(d, &r, sizeof r);
}

static ALWAYS_INLINE size_t element_size(weft_datatype_t dtype)
{
	switch (dtype) {
	case WEFT_INT8:
	case WEFT_UINT8: return 1;
	case WEFT_FLOAT16:
	case WEFT_BFLOAT16: return 2;
	case WEFT_INT32:
	case WEFT_UINT32:
	case WEFT_FLOAT32: return 4;
	default: return 8;
	}
}

static ALWAYS_INLINE void reduce_loop(void *dst, const void *a, const void *b, size_t count,
				      weft_datatype_t dtype, weft_op_t op, bool wide)
{
	unsigned char *d = dst;
	const unsigned char *pa = a, *pb = b;
	size_t bytes = count * element_size(dtype);
	size_t i = 0;

	/* Four vectors per iteration to keep several loads in flight. */
	for (; i + 4 * VEC_BYTES <= bytes; i += 4 * VEC_BYTES) {
		reduce_vec(d + i, pa + i, pb + i, dtype, op, wide);
		reduce_vec(d + i + 32, pa + i + 32, pb + i + 32, dtype, op, wide);
		reduce_vec(d + i + 64, pa + i + 64, pb + i + 64, dtype, op, wide);
		reduce_vec(d + i + 96, pa + i + 96, pb + i + 96, dtype, op, wide);
	}
	for (; i + VEC_BYTES <= bytes; i += VEC_BYTES)
		reduce_vec(d + i, pa + i, pb + i, dtype, op, wide);
	if (i < bytes) {
		v_u8 x = {0}, y = {0}, r;
		memcpy(&x, pa + i, bytes - i);
		memcpy(&y, pb + i, bytes - i);
		combine(&r, &x, &y, dtype, op, wide);
		memcpy(d + i, &r, bytes - i);
	}
}

/* Masks from the sign bit of an unsigned subtraction: all ones where
 * x < y (as unsigned 32-bit values below 2^31), zero elsewhere. Used instead
 * of comparisons in the fp16/bf16 conversions, which must stay vector code
 * without AVX (see compare()). */
static ALWAYS_INLINE v_u32 mask_below(const v_u32 *x, uint32_t y)
{
	return -((*x - y) >> 31);
}

/* fp16 to fp32 without F16C, eight lanes; same bits as half_to_float(). */
static ALWAYS_INLINE v_f32 widen_half_soft(v_u16x8 h16)
{
	v_u32 h = __builtin_convertvector(h16, v_u32);
	v_u32 sign = (h & 0x8000) << 16;
	v_u32 em = h & 0x7fff;
	v_u32 special = ~mask_below(&em, 0x7c00); /* inf or NaN */
	v_u32 nan = ~mask_below(&em, 0x7c01);
	v_u32 tiny = mask_below(&em, 0x0400); /* zero or subnormal */
	v_u32 normal = (em << 13) + (112u << 23);
	v_u32 infnan = (em << 13) | 0x7f800000 | (nan & 0x400000);
	/* em * 2^-24 is exact in fp32, whatever the rounding mode */
	v_u32 sub = (v_u32)(__builtin_convertvector((v_i32)em, v_f32) * 0x1p-24f);

	return (v_f32)(sign | (special & infnan) | (tiny & sub) | (~(special | tiny) & normal));
}

/* fp32 to fp16 without F16C, eight lanes; same bits as float_to_half().
 * Lanes that round to an fp16 subnormal need a shift that differs per lane,
 * which SSE2 lacks, so they are redone one at a time with float_to_half();
 * they are rare in real data. */
static ALWAYS_INLINE v_u16x8 narrow_half_soft(const v_f32 *pf)
{
	v_u32 x = (v_u32)*pf;
	v_u32 sign = (x >> 16) & 0x8000;
	v_u32 ax = x & 0x7fffffff;
	v_u32 nan = ~mask_below(&ax, 0x7f800001);
	v_u32 big = ~mask_below(&ax, 0x47800000); /* >= 65536, inf or NaN */
	v_u32 tiny = mask_below(&ax, 0x38800000);
	v_u32 t = ax - (112u << 23);
	v_u32 normal = (t + 0xfff + ((t >> 13) & 1)) >> 13;
	v_u32 nan_half = 0x7e00 | ((ax >> 13) & 0x3ff);
	v_u32 r = sign | (nan & nan_half) | (~nan & big & 0x7c00) | (~big & normal);
	v_u16x8 h = __builtin_convertvector(r, v_u16x8);
	uint64_t any[4];

	memcpy(any, &tiny, sizeof any);
	if (any[0] | any[1] | any[2] | any[3]) {
		float f[8];
		uint32_t lane[8];
		memcpy(f, pf, sizeof f);
		memcpy(lane, &tiny, sizeof lane);
		for (int i = 0; i < 8; i++)
			if (lane[i])
				h[i] = float_to_half(f[i]);
	}
	return h;
}

/* fp16 or bf16 (the top half of an fp32) to fp32. */
static ALWAYS_INLINE v_f32 widen_16(v_u16x8 h, weft_datatype_t dtype)
{
	if (dtype == WEFT_BFLOAT16)
		return (v_f32)(__builtin_convertvector(h, v_u32) << 16);
	return widen_half_soft(h);
}

/* Same rounding as float_to_bf16 / float_to_half, eight lanes at a time. */
static ALWAYS_INLINE v_u16x8 narrow_16(const v_f32 *pf, weft_datatype_t dtype)
{
	if (dtype == WEFT_BFLOAT16) {
		v_u32 x = (v_u32)*pf, ax = x & 0x7fffffff;
		v_u32 nan = ~mask_below(&ax, 0x7f800001);
		v_u32 rounded = (x + 0x7fff + ((x >> 16) & 1)) >> 16;
		v_u32 quiet = (x >> 16) | 0x40;
		return __builtin_convertvector((nan & quiet) | (~nan & rounded), v_u16x8);
	}
	return narrow_half_soft(pf);
}

/* Eight fp16 (software conversion) or bf16 values, n <= 16 bytes of each. */
static ALWAYS_INLINE void reduce_8_16(unsigned char *d, const unsigned char *a,
				      const unsigned char *b, size_t n, weft_datatype_t dtype,
				      weft_op_t op, bool wide)
{
	v_u16x8 x = {0}, y = {0}, r;

	memcpy(&x, a, n);
	memcpy(&y, b, n);
	v_f32 fx = widen_16(x, dtype), fy = widen_16(y, dtype);
	v_f32 f = combine_float(&fx, &fy, op, wide);
	r = narrow_16(&f, dtype);
	memcpy(d, &r, n);
}

static ALWAYS_INLINE void reduce_loop_16(void *dst, const void *a, const void *b, size_t count,
					 weft_datatype_t dtype, weft_op_t op, bool wide)
{
	unsigned char *d = dst;
	const unsigned char *pa = a, *pb = b;
	size_t bytes = count * 2;
	size_t i = 0;

	for (; i + 16 <= bytes; i += 16)
		reduce_8_16(d + i, pa + i, pb + i, 16, dtype, op, wide);
	if (i < bytes)
		reduce_8_16(d + i, pa + i, pb + i, bytes - i, dtype, op, wide);
}

/* Eight fp16 values with F16C. The rounding mode is given in the
 * instruction (nearest even), not taken from MXCSR. */
static AVX2_TARGET ALWAYS_INLINE void reduce_8_f16c(unsigned char *d, const unsigned char *a,
						    const unsigned char *b, size_t n, weft_op_t op)
{
	__m128i x = _mm_setzero_si128(), y = _mm_setzero_si128(), r;

	memcpy(&x, a, n);
	memcpy(&y, b, n);
	v_f32 fx = (v_f32)_mm256_cvtph_ps(x), fy = (v_f32)_mm256_cvtph_ps(y);
	v_f32 f;
	combine_float_to(&f, &fx, &fy, op);
	r = _mm256_cvtps_ph((__m256)f, _MM_FROUND_TO_NEAREST_INT);
	memcpy(d, &r, n);
}

static AVX2_TARGET ALWAYS_INLINE void reduce_loop_f16c(void *dst, const void *a, const void *b,
						       size_t count, weft_op_t op)
{
	unsigned char *d = dst;
	const unsigned char *pa = a, *pb = b;
	size_t bytes = count * 2;
	size_t i = 0;

	for (; i + 32 <= bytes; i += 32) {
		reduce_8_f16c(d + i, pa + i, pb + i, 16, op);
		reduce_8_f16c(d + i + 16, pa + i + 16, pb + i + 16, 16, op);
	}
	for (; i + 16 <= bytes; i += 16)
		reduce_8_f16c(d + i, pa + i, pb + i, 16, op);
	if (i < bytes)
		reduce_8_f16c(d + i, pa + i, pb + i, bytes - i, op);
}

/* fp32 to bf16, eight lanes, result in the low 16 bits of each 32-bit lane.
 * Unlike narrow_16 this has no NaN case, because it only ever sees results
 * of combining bf16 values: x86 returns an input NaN (quieted) or the
 * default NaN 0xffc00000, so a NaN here has its low 16 bits clear, and
 * rounding then leaves it as it is. */
static AVX2_TARGET ALWAYS_INLINE __m256i narrow_bf16_avx2(__m256 f)
{
	__m256i x = _mm256_castps_si256(f);
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
	__m256i rounded = _mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));

	return _mm256_srli_epi32(rounded, 16);
}

/* Sixteen bf16 values, n <= 32 bytes of each. Interleaving with zero puts
 * each bf16 in the top half of a 32-bit lane, which is its fp32 value. The
 * unpacks and the pack both work within 128-bit lanes, so the pack puts the
 * elements back in the order the unpacks took them from. */
static AVX2_TARGET ALWAYS_INLINE void reduce_16_bf16_avx2(unsigned char *d, const unsigned char *a,
							  const unsigned char *b, size_t n,
							  weft_op_t op)
{
	__m256i zero = _mm256_setzero_si256(), x = zero, y = zero, r;

	memcpy(&x, a, n);
	memcpy(&y, b, n);
	v_f32 xl = (v_f32)_mm256_unpacklo_epi16(zero, x),
	      yl = (v_f32)_mm256_unpacklo_epi16(zero, y);
	v_f32 xh = (v_f32)_mm256_unpackhi_epi16(zero, x),
	      yh = (v_f32)_mm256_unpackhi_epi16(zero, y);
	v_f32 lo, hi;
	combine_float_to(&lo, &xl, &yl, op);
	combine_float_to(&hi, &xh, &yh, op);
	r = _mm256_packus_epi32(narrow_bf16_avx2((__m256)lo), narrow_bf16_avx2((__m256)hi));
	memcpy(d, &r, n);
}

static AVX2_TARGET ALWAYS_INLINE void reduce_loop_bf16_avx2(void *dst, const void *a, const void *b,
							    size_t count, weft_op_t op)
{
	unsigned char *d = dst;
	const unsigned char *pa = a, *pb = b;
	size_t bytes = count * 2;
	size_t i = 0;

	for (; i + 32 <= bytes; i += 32)
		reduce_16_bf16_avx2(d + i, pa + i, pb + i, 32, op);
	if (i < bytes)
		reduce_16_bf16_avx2(d + i, pa + i, pb + i, bytes - i, op);
}

static ALWAYS_INLINE void reduce_generic(void *dst, const void *a, const void *b, size_t count,
					 weft_datatype_t dtype, weft_op_t op)
{
	if (dtype == WEFT_FLOAT16 || dtype == WEFT_BFLOAT16)
		reduce_loop_16(dst, a, b, count, dtype, op, false);
	else
		reduce_loop(dst, a, b, count, dtype, op, false);
}

static AVX2_TARGET ALWAYS_INLINE void reduce_avx2(void *dst, const void *a, const void *b,
						  size_t count, weft_datatype_t dtype, weft_op_t op)
{
	if (dtype == WEFT_FLOAT16)
		reduce_loop_f16c(dst, a, b, count, op);
	else if (dtype == WEFT_BFLOAT16)
		reduce_loop_bf16_avx2(dst, a, b, count, op);
	else
		reduce_loop(dst, a, b, count, dtype, op, true);
}

/* ---- the kernels --------------------------------------------------------- */

/* Defines the generic and the AVX2 kernel of one (dtype, op). Both names are
 * written out in full at each use, so they can be found with grep. */
#define DEFINE_KERNELS(generic_name, avx2_name, dtype, op)                                         \
	static void generic_name(void *dst, const void *a, const void *b, size_t count)            \
	{                                                                                          \
		reduce_generic(dst, a, b, count, dtype, op);                                       \
	}                                                                                          \
	static AVX2_TARGET void avx2_name(void *dst, const void *a, const void *b, size_t count)   \
	{                                                                                          \
		reduce_avx2(dst, a, b, count, dtype, op);                                          \
	}

DEFINE_KERNELS(generic_sum_int8, avx2_sum_int8, WEFT_INT8, WEFT_SUM)
DEFINE_KERNELS(generic_prod_int8, avx2_prod_int8, WEFT_INT8, WEFT_PROD)
DEFINE_KERNELS(generic_min_int8, avx2_min_int8, WEFT_INT8, WEFT_MIN)
DEFINE_KERNELS(generic_max_int8, avx2_max_int8, WEFT_INT8, WEFT_MAX)
DEFINE_KERNELS(generic_sum_uint8, avx2_sum_uint8, WEFT_UINT8, WEFT_SUM)
DEFINE_KERNELS(generic_prod_uint8, avx2_prod_uint8, WEFT_UINT8, WEFT_PROD)
DEFINE_KERNELS(generic_min_uint8, avx2_min_uint8, WEFT_UINT8, WEFT_MIN)
DEFINE_KERNELS(generic_max_uint8, avx2_max_uint8, WEFT_UINT8, WEFT_MAX)
DEFINE_KERNELS(generic_sum_int32, avx2_sum_int32, WEFT_INT32, WEFT_SUM)
DEFINE_KERNELS(generic_prod_int32, avx2_prod_int32, WEFT_INT32, WEFT_PROD)
DEFINE_KERNELS(generic_min_int32, avx2_min_int32, WEFT_INT32, WEFT_MIN)
DEFINE_KERNELS(generic_max_int32, avx2_max_int32, WEFT_INT32, WEFT_MAX)
DEFINE_KERNELS(generic_sum_uint32, avx2_sum_uint32, WEFT_UINT32, WEFT_SUM)
DEFINE_KERNELS(generic_prod_uint32, avx2_prod_uint32, WEFT_UINT32, WEFT_PROD)
DEFINE_KERNELS(generic_min_uint32, avx2_min_uint32, WEFT_UINT32, WEFT_MIN)
DEFINE_KERNELS(generic_max_uint32, avx2_max_uint32, WEFT_UINT32, WEFT_MAX)
DEFINE_KERNELS(generic_sum_int64, avx2_sum_int64, WEFT_INT64, WEFT_SUM)
DEFINE_KERNELS(generic_prod_int64, avx2_prod_int64, WEFT_INT64, WEFT_PROD)
DEFINE_KERNELS(generic_min_int64, avx2_min_int64, WEFT_INT64, WEFT_MIN)
DEFINE_KERNELS(generic_max_int64, avx2_max_int64, WEFT_INT64, WEFT_MAX)
DEFINE_KERNELS(generic_sum_uint64, avx2_sum_uint64, WEFT_UINT64, WEFT_SUM)
DEFINE_KERNELS(generic_prod_uint64, avx2_prod_uint64, WEFT_UINT64, WEFT_PROD)
DEFINE_KERNELS(generic_min_uint64, avx2_min_uint64, WEFT_UINT64, WEFT_MIN)
DEFINE_KERNELS(generic_max_uint64, avx2_max_uint64, WEFT_UINT64, WEFT_MAX)
DEFINE_KERNELS(generic_sum_half, avx2_sum_half, WEFT_FLOAT16, WEFT_SUM)
DEFINE_KERNELS(generic_prod_half, avx2_prod_half, WEFT_FLOAT16, WEFT_PROD)
DEFINE_KERNELS(generic_min_half, avx2_min_half, WEFT_FLOAT16, WEFT_MIN)
DEFINE_KERNELS(generic_max_half, avx2_max_half, WEFT_FLOAT16, WEFT_MAX)
DEFINE_KERNELS(generic_sum_bfloat16, avx2_sum_bfloat16, WEFT_BFLOAT16, WEFT_SUM)
DEFINE_KERNELS(generic_prod_bfloat16, avx2_prod_bfloat16, WEFT_BFLOAT16, WEFT_PROD)
DEFINE_KERNELS(generic_min_bfloat16, avx2_min_bfloat16, WEFT_BFLOAT16, WEFT_MIN)
DEFINE_KERNELS(generic_max_bfloat16, avx2_max_bfloat16, WEFT_BFLOAT16, WEFT_MAX)
DEFINE_KERNELS(generic_sum_float, avx2_sum_float, WEFT_FLOAT32, WEFT_SUM)
DEFINE_KERNELS(generic_prod_float, avx2_prod_float, WEFT_FLOAT32, WEFT_PROD)
DEFINE_KERNELS(generic_min_float, avx2_min_float, WEFT_FLOAT32, WEFT_MIN)
DEFINE_KERNELS(generic_max_float, avx2_max_float, WEFT_FLOAT32, WEFT_MAX)
DEFINE_KERNELS(generic_sum_double, avx2_sum_double, WEFT_FLOAT64, WEFT_SUM)
DEFINE_KERNELS(generic_prod_double, avx2_prod_double, WEFT_FLOAT64, WEFT_PROD)
DEFINE_KERNELS(generic_min_double, avx2_min_double, WEFT_FLOAT64, WEFT_MIN)
DEFINE_KERNELS(generic_max_double, avx2_max_double, WEFT_FLOAT64, WEFT_MAX)

/* WEFT_AVG sums; weft_reduce_scale() divides at the end. */
static const weft_reduce_fn generic_kernels[WEFT_DATATYPE_COUNT][WEFT_OP_COUNT] = {
    [WEFT_INT8] = {[WEFT_SUM] = generic_sum_int8,
		   [WEFT_PROD] = generic_prod_int8,
		   [WEFT_MIN] = generic_min_int8,
		   [WEFT_MAX] = generic_max_int8,
		   [WEFT_AVG] = generic_sum_int8},
    [WEFT_UINT8] = {[WEFT_SUM] = generic_sum_uint8,
		    [WEFT_PROD] = generic_prod_uint8,
		    [WEFT_MIN] = generic_min_uint8,
		    [WEFT_MAX] = generic_max_uint8,
		    [WEFT_AVG] = generic_sum_uint8},
    [WEFT_INT32] = {[WEFT_SUM] = generic_sum_int32,
		    [WEFT_PROD] = generic_prod_int32,
		    [WEFT_MIN] = generic_min_int32,
		    [WEFT_MAX] = generic_max_int32,
		    [WEFT_AVG] = generic_sum_int32},
    [WEFT_UINT32] = {[WEFT_SUM] = generic_sum_uint32,
		     [WEFT_PROD] = generic_prod_uint32,
		     [WEFT_MIN] = generic_min_uint32,
		     [WEFT_MAX] = generic_max_uint32,
		     [WEFT_AVG] = generic_sum_uint32},
    [WEFT_INT64] = {[WEFT_SUM] = generic_sum_int64,
		    [WEFT_PROD] = generic_prod_int64,
		    [WEFT_MIN] = generic_min_int64,
		    [WEFT_MAX] = generic_max_int64,
		    [WEFT_AVG] = generic_sum_int64},
    [WEFT_UINT64] = {[WEFT_SUM] = generic_sum_uint64,
		     [WEFT_PROD] = generic_prod_uint64,
		     [WEFT_MIN] = generic_min_uint64,
		     [WEFT_MAX] = generic_max_uint64,
		     [WEFT_AVG] = generic_sum_uint64},
    [WEFT_FLOAT16] = {[WEFT_SUM] = generic_sum_half,
		      [WEFT_PROD] = generic_prod_half,
		      [WEFT_MIN] = generic_min_half,
		      [WEFT_MAX] = generic_max_half,
		      [WEFT_AVG] = generic_sum_half},
    [WEFT_BFLOAT16] = {[WEFT_SUM] = generic_sum_bfloat16,
		       [WEFT_PROD] = generic_prod_bfloat16,
		       [WEFT_MIN] = generic_min_bfloat16,
		       [WEFT_MAX] = generic_max_bfloat16,
		       [WEFT_AVG] = generic_sum_bfloat16},
    [WEFT_FLOAT32] = {[WEFT_SUM] = generic_sum_float,
		      [WEFT_PROD] = generic_prod_float,
		      [WEFT_MIN] = generic_min_float,
		      [WEFT_MAX] = generic_max_float,
		      [WEFT_AVG] = generic_sum_float},
    [WEFT_FLOAT64] = {[WEFT_SUM] = generic_sum_double,
		      [WEFT_PROD] = generic_prod_double,
		      [WEFT_MIN] = generic_min_double,
		      [WEFT_MAX] = generic_max_double,
		      [WEFT_AVG] = generic_sum_double},
};

static const weft_reduce_fn avx2_kernels[WEFT_DATATYPE_COUNT][WEFT_OP_COUNT] = {
    [WEFT_INT8] = {[WEFT_SUM] = avx2_sum_int8,
		   [WEFT_PROD] = avx2_prod_int8,
		   [WEFT_MIN] = avx2_min_int8,
		   [WEFT_MAX] = avx2_max_int8,
		   [WEFT_AVG] = avx2_sum_int8},
    [WEFT_UINT8] = {[WEFT_SUM] = avx2_sum_uint8,
		    [WEFT_PROD] = avx2_prod_uint8,
		    [WEFT_MIN] = avx2_min_uint8,
		    [WEFT_MAX] = avx2_max_uint8,
		    [WEFT_AVG] = avx2_sum_uint8},
    [WEFT_INT32] = {[WEFT_SUM] = avx2_sum_int32,
		    [WEFT_PROD] = avx2_prod_int32,
		    [WEFT_MIN] = avx2_min_int32,
		    [WEFT_MAX] = avx2_max_int32,
		    [WEFT_AVG] = avx2_sum_int32},
    [WEFT_UINT32] = {[WEFT_SUM] = avx2_sum_uint32,
		     [WEFT_PROD] = avx2_prod_uint32,
		     [WEFT_MIN] = avx2_min_uint32,
		     [WEFT_MAX] = avx2_max_uint32,
		     [WEFT_AVG] = avx2_sum_uint32},
    [WEFT_INT64] = {[WEFT_SUM] = avx2_sum_int64,
		    [WEFT_PROD] = avx2_prod_int64,
		    [WEFT_MIN] = avx2_min_int64,
		    [WEFT_MAX] = avx2_max_int64,
		    [WEFT_AVG] = avx2_sum_int64},
    [WEFT_UINT64] = {[WEFT_SUM] = avx2_sum_uint64,
		     [WEFT_PROD] = avx2_prod_uint64,
		     [WEFT_MIN] = avx2_min_uint64,
		     [WEFT_MAX] = avx2_max_uint64,
		     [WEFT_AVG] = avx2_sum_uint64},
    [WEFT_FLOAT16] = {[WEFT_SUM] = avx2_sum_half,
		      [WEFT_PROD] = avx2_prod_half,
		      [WEFT_MIN] = avx2_min_half,
		      [WEFT_MAX] = avx2_max_half,
		      [WEFT_AVG] = avx2_sum_half},
    [WEFT_BFLOAT16] = {[WEFT_SUM] = avx2_sum_bfloat16,
		       [WEFT_PROD] = avx2_prod_bfloat16,
		       [WEFT_MIN] = avx2_min_bfloat16,
		       [WEFT_MAX] = avx2_max_bfloat16,
		       [WEFT_AVG] = avx2_sum_bfloat16},
    [WEFT_FLOAT32] = {[WEFT_SUM] = avx2_sum_float,
		      [WEFT_PROD] = avx2_prod_float,
		      [WEFT_MIN] = avx2_min_float,
		      [WEFT_MAX] = avx2_max_float,
		      [WEFT_AVG] = avx2_sum_float},
    [WEFT_FLOAT64] = {[WEFT_SUM] = avx2_sum_double,
		      [WEFT_PROD] = avx2_prod_double,
		      [WEFT_MIN] = avx2_min_double,
		      [WEFT_MAX] = avx2_max_double,
		      [WEFT_AVG] = avx2_sum_double},
};

/* ---- dispatch ------------------------------------------------------------ */

static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static bool cpu_has_avx2;  /* AVX2 and F16C, both used by the avx2 kernels */
static bool isa_generic;   /* WEFT_ISA=generic, or avx2 asked of a CPU without it */
static bool force_generic; /* the test hook */

enum isa_request { ISA_DEFAULT, ISA_GENERIC, ISA_AVX2, ISA_UNKNOWN };

static enum isa_request isa_request(const char *v)
{
	if (!v || !*v)
		return ISA_DEFAULT;
	if (strcmp(v, "generic") == 0)
		return ISA_GENERIC;
	if (strcmp(v, "avx2") == 0)
		return ISA_AVX2;
	return ISA_UNKNOWN;
}

/* What is wrong with WEFT_ISA on this CPU, if anything (see reduce.h). */
static weft_status_t isa_problem(char *why, size_t why_bytes)
{
	const char *v = weft_setting_str("WEFT_ISA");
	if (why_bytes)
		why[0] = '\0';
	switch (isa_request(v)) {
	case ISA_UNKNOWN:
		snprintf(why, why_bytes, "WEFT_ISA=%s: expected generic or avx2", v);
		return WEFT_ERR_INVALID_ARG;
	case ISA_AVX2:
		if (cpu_has_avx2)
			return WEFT_SUCCESS;
		snprintf(why, why_bytes,
			 "WEFT_ISA=avx2: this CPU lacks AVX2 or F16C (use generic)");
		return WEFT_ERR_NOT_SUPPORTED;
	default: return WEFT_SUCCESS;
	}
}

static void detect_cpu(void)
{
	unsigned int eax, ebx, ecx, edx;
	bool f16c;

	/* F16C from CPUID leaf 1 (ECX bit 29): older GCCs and clang do not know
	 * "f16c" in __builtin_cpu_supports. The "avx2" test also checks that
	 * the OS saves the ymm registers, which F16C needs too. */
	f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
	__builtin_cpu_init();
	cpu_has_avx2 = __builtin_cpu_supports("avx2") && f16c;

	/* A kernel lookup cannot fail, so a bad WEFT_ISA only warns here and
	 * keeps the CPU's best; communicator creation rejects it with an
	 * error (weft_reduce_isa_check), so a job never runs with it. */
	char why[160];
	if (isa_problem(why, sizeof(why)) != WEFT_SUCCESS)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_ALL, "%s; the kernels use %s", why,
			 cpu_has_avx2 ? "avx2" : "generic");
	isa_generic = isa_request(weft_setting_str("WEFT_ISA")) == ISA_GENERIC;
}

weft_status_t weft_reduce_isa_check(char *why, size_t why_bytes)
{
	pthread_once(&detect_once, detect_cpu);
	return isa_problem(why, why_bytes);
}

static bool use_avx2(void)
{
	pthread_once(&detect_once, detect_cpu);
	return cpu_has_avx2 && !isa_generic && !force_generic;
}

void weft_reduce_force_generic(bool on)
{
	force_generic = on;
}

const char *weft_reduce_isa(void)
{
	return use_avx2() ? "avx2" : "generic";
}

weft_reduce_fn weft_reduce_kernel(weft_datatype_t dtype, weft_op_t op)
{
	if (!weft_dtype_valid(dtype) || !weft_op_valid(op))
		return NULL;
	return use_avx2() ? avx2_kernels[dtype][op] : generic_kernels[dtype][op];
}

/* ---- scale (the last step of WEFT_AVG) ------------------------------------ */

static void scale_float(unsigned char *p, size_t count, int divisor)
{
	size_t bytes = count * sizeof(float), i = 0;
	v_f32 v;

	for (; i + sizeof v <= bytes; i += sizeof v) {
		memcpy(&v, p + i, sizeof v);
		v = v / (float)divisor;
		memcpy(p + i, &v, sizeof v);
	}
	for (; i < bytes; i += sizeof(float)) {
		float f;
		memcpy(&f, p + i, sizeof f);
		f /= (float)divisor;
		memcpy(p + i, &f, sizeof f);
	}
}

static void scale_double(unsigned char *p, size_t count, int divisor)
{
	size_t bytes = count * sizeof(double), i = 0;
	v_f64 v;

	for (; i + sizeof v <= bytes; i += sizeof v) {
		memcpy(&v, p + i, sizeof v);
		v = v / (double)divisor;
		memcpy(p + i, &v, sizeof v);
	}
	for (; i < bytes; i += sizeof(double)) {
		double f;
		memcpy(&f, p + i, sizeof f);
		f /= (double)divisor;
		memcpy(p + i, &f, sizeof f);
	}
}

/* fp16/bf16: eight at a time through the same conversions as the kernels. */
static void scale_16(unsigned char *p, size_t count, weft_datatype_t dtype, int divisor)
{
	size_t bytes = count * 2, i = 0;
	v_u16x8 h;

	while (i < bytes) {
		size_t n = bytes - i < sizeof h ? bytes - i : sizeof h;
		h = (v_u16x8){0};
		memcpy(&h, p + i, n);
		v_f32 f = widen_16(h, dtype) / (float)divisor;
		h = narrow_16(&f, dtype);
		memcpy(p + i, &h, n);
		i += n;
	}
}

/* fp16 with F16C: the software conversions are several times slower. */
static AVX2_TARGET void scale_half_f16c(unsigned char *p, size_t count, int divisor)
{
	size_t bytes = count * 2, i = 0;
	__m256 d = _mm256_set1_ps((float)divisor);

	while (i < bytes) {
		size_t n = bytes - i < 16 ? bytes - i : 16;
		__m128i h = _mm_setzero_si128();
		memcpy(&h, p + i, n);
		h = _mm256_cvtps_ph(_mm256_div_ps(_mm256_cvtph_ps(h), d),
				    _MM_FROUND_TO_NEAREST_INT);
		memcpy(p + i, &h, n);
		i += n;
	}
}

/* C division truncates toward zero, which is what WEFT_AVG promises. */
static void scale_integer(unsigned char *p, size_t count, weft_datatype_t dtype, int divisor)
{
	for (size_t i = 0; i < count; i++) {
		switch (dtype) {
		case WEFT_INT8: {
			int8_t v;
			memcpy(&v, p + i, 1);
			v = (int8_t)(v / divisor);
			memcpy(p + i, &v, 1);
			break;
		}
		case WEFT_UINT8: {
			uint8_t v;
			memcpy(&v, p + i, 1);
			v = (uint8_t)(v / (unsigned)divisor);
			memcpy(p + i, &v, 1);
			break;
		}
		case WEFT_INT32: {
			int32_t v;
			memcpy(&v, p + 4 * i, 4);
			v /= divisor;
			memcpy(p + 4 * i, &v, 4);
			break;
		}
		case WEFT_UINT32: {
			uint32_t v;
			memcpy(&v, p + 4 * i, 4);
			v /= (uint32_t)divisor;
			memcpy(p + 4 * i, &v, 4);
			break;
		}
		case WEFT_INT64: {
			int64_t v;
			memcpy(&v, p + 8 * i, 8);
			v /= divisor;
			memcpy(p + 8 * i, &v, 8);
			break;
		}
		default: { /* WEFT_UINT64 */
			uint64_t v;
			memcpy(&v, p + 8 * i, 8);
			v /= (uint64_t)divisor;
			memcpy(p + 8 * i, &v, 8);
			break;
		}
		}
	}
}

void weft_reduce_scale(void *buf, size_t count, weft_datatype_t dtype, int divisor)
{
	/* The divisor is a rank count; anything below 1 is a caller bug and
	 * leaves the buffer alone rather than dividing by zero. */
	if (divisor <= 1 || count == 0 || !weft_dtype_valid(dtype))
		return;

	switch (dtype) {
	case WEFT_FLOAT32: scale_float(buf, count, divisor); break;
	case WEFT_FLOAT64: scale_double(buf, count, divisor); break;
	case WEFT_FLOAT16:
		if (use_avx2())
			scale_half_f16c(buf, count, divisor);
		else
			scale_16(buf, count, dtype, divisor);
		break;
	case WEFT_BFLOAT16: scale_16(buf, count, dtype, divisor); break;
	default: scale_integer(buf, count, dtype, divisor); break;
	}
}
