/* scale.c — weft_reduce_scale, the last step of WEFT_AVG: divide once the
 * sum is complete (integers truncate toward zero, fp16/bf16 divide in fp32). */
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/reduce_kernels.h"
#include "reduce/reduce_vec.h"
#include "util/dtype.h"

/* fp32 or fp64 (@p wide): a vector at a time, then the tail element-wise;
 * the same division either way, so body and tail agree. */
static ALWAYS_INLINE void scale_fp(unsigned char *p, size_t count, int divisor, bool wide)
{
	size_t esize = wide ? sizeof(double) : sizeof(float), bytes = count * esize, i = 0;

	for (; i + VEC_BYTES <= bytes; i += VEC_BYTES) {
		if (wide) {
			v_f64 v;
			memcpy(&v, p + i, sizeof v);
			v = v / (double)divisor;
			memcpy(p + i, &v, sizeof v);
		} else {
			v_f32 v;
			memcpy(&v, p + i, sizeof v);
			v = v / (float)divisor;
			memcpy(p + i, &v, sizeof v);
		}
	}
	for (; i < bytes; i += esize) {
		if (wide) {
			double d;
			memcpy(&d, p + i, sizeof d);
			d /= (double)divisor;
			memcpy(p + i, &d, sizeof d);
		} else {
			float f;
			memcpy(&f, p + i, sizeof f);
			f /= (float)divisor;
			memcpy(p + i, &f, sizeof f);
		}
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
	case WEFT_FLOAT32: scale_fp(buf, count, divisor, false); break;
	case WEFT_FLOAT64: scale_fp(buf, count, divisor, true); break;
	case WEFT_FLOAT16:
		if (weft_reduce_use_avx2())
			scale_half_f16c(buf, count, divisor);
		else
			scale_16(buf, count, dtype, divisor);
		break;
	case WEFT_BFLOAT16: scale_16(buf, count, dtype, divisor); break;
	default: scale_integer(buf, count, dtype, divisor); break;
	}
}
