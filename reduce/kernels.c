/*
 * kernels.c — local reduction kernels: dst[i] = a[i] op b[i].
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
#include "reduce/reduce_kernels.h"
#include "reduce/reduce_vec.h"

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

/* Per (dtype, op): the generic kernel and the AVX2 one. WEFT_AVG sums;
 * weft_reduce_scale() divides at the end. */
struct kernel_pair {
	weft_reduce_fn generic, avx2;
};

static const struct kernel_pair kernels[WEFT_DATATYPE_COUNT][WEFT_OP_COUNT] =
    {
	[WEFT_INT8] =
	    {
		[WEFT_SUM] = {generic_sum_int8, avx2_sum_int8},
		[WEFT_PROD] = {generic_prod_int8, avx2_prod_int8},
		[WEFT_MIN] = {generic_min_int8, avx2_min_int8},
		[WEFT_MAX] = {generic_max_int8, avx2_max_int8},
		[WEFT_AVG] = {generic_sum_int8, avx2_sum_int8},
	    },
	[WEFT_UINT8] =
	    {
		[WEFT_SUM] = {generic_sum_uint8, avx2_sum_uint8},
		[WEFT_PROD] = {generic_prod_uint8, avx2_prod_uint8},
		[WEFT_MIN] = {generic_min_uint8, avx2_min_uint8},
		[WEFT_MAX] = {generic_max_uint8, avx2_max_uint8},
		[WEFT_AVG] = {generic_sum_uint8, avx2_sum_uint8},
	    },
	[WEFT_INT32] =
	    {
		[WEFT_SUM] = {generic_sum_int32, avx2_sum_int32},
		[WEFT_PROD] = {generic_prod_int32, avx2_prod_int32},
		[WEFT_MIN] = {generic_min_int32, avx2_min_int32},
		[WEFT_MAX] = {generic_max_int32, avx2_max_int32},
		[WEFT_AVG] = {generic_sum_int32, avx2_sum_int32},
	    },
	[WEFT_UINT32] =
	    {
		[WEFT_SUM] = {generic_sum_uint32, avx2_sum_uint32},
		[WEFT_PROD] = {generic_prod_uint32, avx2_prod_uint32},
		[WEFT_MIN] = {generic_min_uint32, avx2_min_uint32},
		[WEFT_MAX] = {generic_max_uint32, avx2_max_uint32},
		[WEFT_AVG] = {generic_sum_uint32, avx2_sum_uint32},
	    },
	[WEFT_INT64] =
	    {
		[WEFT_SUM] = {generic_sum_int64, avx2_sum_int64},
		[WEFT_PROD] = {generic_prod_int64, avx2_prod_int64},
		[WEFT_MIN] = {generic_min_int64, avx2_min_int64},
		[WEFT_MAX] = {generic_max_int64, avx2_max_int64},
		[WEFT_AVG] = {generic_sum_int64, avx2_sum_int64},
	    },
	[WEFT_UINT64] =
	    {
		[WEFT_SUM] = {generic_sum_uint64, avx2_sum_uint64},
		[WEFT_PROD] = {generic_prod_uint64, avx2_prod_uint64},
		[WEFT_MIN] = {generic_min_uint64, avx2_min_uint64},
		[WEFT_MAX] = {generic_max_uint64, avx2_max_uint64},
		[WEFT_AVG] = {generic_sum_uint64, avx2_sum_uint64},
	    },
	[WEFT_FLOAT16] =
	    {
		[WEFT_SUM] = {generic_sum_half, avx2_sum_half},
		[WEFT_PROD] = {generic_prod_half, avx2_prod_half},
		[WEFT_MIN] = {generic_min_half, avx2_min_half},
		[WEFT_MAX] = {generic_max_half, avx2_max_half},
		[WEFT_AVG] = {generic_sum_half, avx2_sum_half},
	    },
	[WEFT_BFLOAT16] =
	    {
		[WEFT_SUM] = {generic_sum_bfloat16, avx2_sum_bfloat16},
		[WEFT_PROD] = {generic_prod_bfloat16, avx2_prod_bfloat16},
		[WEFT_MIN] = {generic_min_bfloat16, avx2_min_bfloat16},
		[WEFT_MAX] = {generic_max_bfloat16, avx2_max_bfloat16},
		[WEFT_AVG] = {generic_sum_bfloat16, avx2_sum_bfloat16},
	    },
	[WEFT_FLOAT32] =
	    {
		[WEFT_SUM] = {generic_sum_float, avx2_sum_float},
		[WEFT_PROD] = {generic_prod_float, avx2_prod_float},
		[WEFT_MIN] = {generic_min_float, avx2_min_float},
		[WEFT_MAX] = {generic_max_float, avx2_max_float},
		[WEFT_AVG] = {generic_sum_float, avx2_sum_float},
	    },
	[WEFT_FLOAT64] =
	    {
		[WEFT_SUM] = {generic_sum_double, avx2_sum_double},
		[WEFT_PROD] = {generic_prod_double, avx2_prod_double},
		[WEFT_MIN] = {generic_min_double, avx2_min_double},
		[WEFT_MAX] = {generic_max_double, avx2_max_double},
		[WEFT_AVG] = {generic_sum_double, avx2_sum_double},
	    },
};

weft_reduce_fn weft_reduce_table(bool avx2, weft_datatype_t dtype, weft_op_t op)
{
	return avx2 ? kernels[dtype][op].avx2 : kernels[dtype][op].generic;
}
