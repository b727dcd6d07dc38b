/*
 * reduce_vec.h — what the reduction kernels are made of (kernels.c) and
 * the scaling of WEFT_AVG reuses (scale.c): 32-byte vectors in GCC vector
 * extensions, the fp16/bf16 conversions, the element-wise combine of one
 * vector, and the always_inline loops that take the datatype, the op and
 * the instruction set as constants. Internal to reduce/.
 */
#ifndef WEFT_REDUCE_VEC_H
#define WEFT_REDUCE_VEC_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <immintrin.h>

#include "reduce/reduce.h"

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

/* The lane mask of x < y (less) or x == y, loading both as vectors of type
 * @p vt (the comparison is type-generic: one expression per lane type). */
#define LANE_MASK(vt, mask_t, x, y, less)                                                          \
	({                                                                                         \
		vt a_, b_;                                                                         \
		memcpy(&a_, (x), sizeof a_);                                                       \
		memcpy(&b_, (y), sizeof b_);                                                       \
		(mask_t)((less) ? a_ < b_ : a_ == b_);                                             \
	})

/* Lane masks of x < y or x == y for 16 bytes of dtype. */
static ALWAYS_INLINE v_u8x16 compare_16(const void *x, const void *y, weft_datatype_t dtype,
					enum compare_kind kind)
{
	bool less = kind == CMP_LESS;

	switch (dtype) {
	case WEFT_INT8: return LANE_MASK(v_i8x16, v_u8x16, x, y, less);
	case WEFT_UINT8: return LANE_MASK(v_u8x16, v_u8x16, x, y, less);
	case WEFT_INT32: return LANE_MASK(v_i32x4, v_u8x16, x, y, less);
	case WEFT_UINT32: return LANE_MASK(v_u32x4, v_u8x16, x, y, less);
	case WEFT_INT64: return LANE_MASK(v_i64x2, v_u8x16, x, y, less);
	case WEFT_UINT64: return LANE_MASK(v_u64x2, v_u8x16, x, y, less);
	case WEFT_FLOAT64: return LANE_MASK(v_f64x2, v_u8x16, x, y, less);
	default: /* fp32, and fp16/bf16 widened to it */
		return LANE_MASK(v_f32x4, v_u8x16, x, y, less);
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
	bool less = kind == CMP_LESS;
	v_u8x16 lo, hi;
	v_u8 r;

	if (wide) {
		switch (dtype) {
		case WEFT_INT8: return LANE_MASK(v_i8, v_u8, x, y, less);
		case WEFT_UINT8: return LANE_MASK(v_u8, v_u8, x, y, less);
		case WEFT_INT32: return LANE_MASK(v_i32, v_u8, x, y, less);
		case WEFT_UINT32: return LANE_MASK(v_u32, v_u8, x, y, less);
		case WEFT_INT64: return LANE_MASK(v_i64, v_u8, x, y, less);
		case WEFT_UINT64: return LANE_MASK(v_u64, v_u8, x, y, less);
		case WEFT_FLOAT64: return LANE_MASK(v_f64, v_u8, x, y, less);
		default: return LANE_MASK(v_f32, v_u8, x, y, less);
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

#endif
