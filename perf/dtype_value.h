/*
 * dtype_value.h — one element of a Weft datatype to and from a double: what
 * the perf driver's check (perf_check.c) writes and reads, and the tests'
 * data too (tests/lib/harness_data.c).
 *
 * Header only, on libc: the perf programs, the MPI baselines among them,
 * compile their own files and link no libweft (scripts/check-layers: perf
 * sees the public header only), and the tests may include anything.
 * Datatypes are numbered as weft_datatype_t and enum perf_dtype number them
 * (int8, uint8, int32, uint32, int64, uint64, fp16, bf16, fp32, fp64); the
 * users check that with a static assertion.
 *
 * Integers are written modulo their width: a negative value through int64
 * (so -1 is all ones in every width), a positive one through uint64 (so
 * values above 2^63 still fit a uint64). fp16 and bf16 round to nearest
 * even, as the library's kernels do.
 */
#ifndef WEFT_DTYPE_VALUE_H
#define WEFT_DTYPE_VALUE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum dtype_value_kind {
	DV_INT8,
	DV_UINT8,
	DV_INT32,
	DV_UINT32,
	DV_INT64,
	DV_UINT64,
	DV_FLOAT16,
	DV_BFLOAT16,
	DV_FLOAT32,
	DV_FLOAT64,
	DV_COUNT
};

static const size_t dv_sizes[DV_COUNT] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};

static inline size_t dv_size(int dtype)
{
	return (unsigned)dtype < DV_COUNT ? dv_sizes[dtype] : 0;
}

/* IEEE binary32 -> binary16, to nearest even; NaN stays NaN, beyond the
 * largest half (65504 and half an ulp) infinity. */
static inline uint16_t dv_float_to_half(float f)
{
	uint32_t x, sign, absx, h, rem;

	memcpy(&x, &f, sizeof(x));
	sign = (x >> 16) & 0x8000;
	absx = x & 0x7fffffff;
	if (absx > 0x7f800000)
		return (uint16_t)(sign | 0x7e00); /* NaN */
	if (absx >= 0x477ff000)
		return (uint16_t)(sign | 0x7c00); /* rounds to infinity */
	if (absx < 0x38800000) {		  /* below 2^-14: subnormal half */
		float a;
		memcpy(&a, &absx, sizeof(a));
		return (uint16_t)(sign | (uint32_t)lrintf(a * 0x1p24f));
	}
	h = (absx >> 13) - ((127 - 15) << 10);
	rem = absx & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++; /* may carry into the exponent, which is right */
	return (uint16_t)(sign | h);
}

static inline float dv_half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
	float f;

	if (e == 0) {
		f = ldexpf((float)m, -24);
		return sign ? -f : f;
	}
	x = sign | (e == 31 ? 0x7f800000 | (m << 13) : ((e + 112) << 23) | (m << 13));
	memcpy(&f, &x, sizeof(f));
	return f;
}

static inline uint16_t dv_float_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40); /* NaN stays quiet NaN */
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

static inline float dv_bf16_to_float(uint16_t b)
{
	uint32_t x = (uint32_t)b << 16;
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

/* Write @p v as one element of @p dtype at @p out. */
static inline void dv_store(void *out, int dtype, double v)
{
	uint64_t bits = v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;
	uint16_t h;
	float f;

	switch (dtype) {
	case DV_INT8:
	case DV_UINT8: {
		uint8_t x = (uint8_t)bits;
		memcpy(out, &x, 1);
		break;
	}
	case DV_INT32:
	case DV_UINT32: {
		uint32_t x = (uint32_t)bits;
		memcpy(out, &x, 4);
		break;
	}
	case DV_INT64:
	case DV_UINT64: memcpy(out, &bits, 8); break;
	case DV_FLOAT16:
		h = dv_float_to_half((float)v);
		memcpy(out, &h, 2);
		break;
	case DV_BFLOAT16:
		h = dv_float_to_bf16((float)v);
		memcpy(out, &h, 2);
		break;
	case DV_FLOAT32:
		f = (float)v;
		memcpy(out, &f, 4);
		break;
	case DV_FLOAT64: memcpy(out, &v, 8); break;
	default: break;
	}
}

/* One element of @p dtype at @p in, as a double (exact up to 2^53). */
static inline double dv_load(const void *in, int dtype)
{
	union {
		int8_t i8;
		uint8_t u8;
		int32_t i32;
		uint32_t u32;
		int64_t i64;
		uint64_t u64;
		uint16_t h;
		float f;
		double d;
	} v;

	memcpy(&v, in, dv_size(dtype));
	switch (dtype) {
	case DV_INT8: return v.i8;
	case DV_UINT8: return v.u8;
	case DV_INT32: return v.i32;
	case DV_UINT32: return v.u32;
	case DV_INT64: return (double)v.i64;
	case DV_UINT64: return (double)v.u64;
	case DV_FLOAT16: return dv_half_to_float(v.h);
	case DV_BFLOAT16: return dv_bf16_to_float(v.h);
	case DV_FLOAT32: return v.f;
	case DV_FLOAT64: return v.d;
	default: return NAN;
	}
}

#endif
