/* half.c — the fp16/bf16 conversions the kernels use, for callers outside
 * them (tests, the perf programs' checks): round to nearest even, NaN stays
 * NaN, fp16 overflow gives infinity. */
#include "reduce/reduce.h"
#include "reduce/reduce_vec.h"

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
