/* reduce.h — local reduction kernels, one per (datatype, op), chosen at run
 * time for the CPU (SSE2 baseline, AVX2 where present; never -march=native). */
#ifndef WEFT_REDUCE_H
#define WEFT_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "weft.h"

/* dst[i] = a[i] op b[i] for i < count. dst may alias a or b exactly (not
 * partially). For WEFT_AVG the kernel sums ; the caller divides once at the
 * end with weft_reduce_scale(). fp16/bf16 are widened to fp32, combined and
 * rounded back to nearest even. Pointers need no particular alignment. */
typedef void (*weft_reduce_fn)(void *dst, const void *a, const void *b, size_t count);

/* The kernel for (dtype, op), or NULL if either is invalid. */
weft_reduce_fn weft_reduce_kernel(weft_datatype_t dtype, weft_op_t op);

/* buf[i] /= divisor (>= 1) for i < count (the last step of WEFT_AVG). Integer types
 * truncate toward zero; fp16/bf16 divide in fp32. */
void weft_reduce_scale(void *buf, size_t count, weft_datatype_t dtype, int divisor);

/* Name of the instruction set the kernels were dispatched to ("avx2" or "generic"). */
const char *weft_reduce_isa(void);

/* Check WEFT_ISA, which the dispatch reads once, at the first kernel
 * lookup of the process: unset (the CPU's best), "generic" (the SSE2
 * kernels even where AVX2 is present) or "avx2". Returns WEFT_SUCCESS,
 * WEFT_ERR_INVALID_ARG for any other value, or WEFT_ERR_NOT_SUPPORTED for
 * avx2 on a CPU without it, with a sentence naming the value in @p why. */
weft_status_t weft_reduce_isa_check(char *why, size_t why_bytes);

/* Conversions used by the kernels and by tests. Round to nearest even; NaN
 * stays NaN; fp16 overflow gives infinity. */
float weft_half_to_float(uint16_t h);
uint16_t weft_float_to_half(float f);
float weft_bf16_to_float(uint16_t b);
uint16_t weft_float_to_bf16(float f);

#endif
