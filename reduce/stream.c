/* stream.c — see stream.h. SSE2 streaming stores (every x86-64 has them);
 * 16 bytes per store is enough to reach the memory bandwidth. Elsewhere,
 * plain memcpy. */
#include "reduce/stream.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>

void weft_copy_stream(void *dst, const void *src, size_t len)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	size_t head = (16 - ((uintptr_t)d & 15)) & 15;
	if (len < 256) {
		memcpy(d, s, len);
		return;
	}
	memcpy(d, s, head);
	d += head;
	s += head;
	len -= head;
	size_t i = 0;
	for (; i + 64 <= len; i += 64) {
		__m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		__m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16));
		__m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 32));
		__m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 48));
		_mm_stream_si128((__m128i *)(void *)(d + i), x0);
		_mm_stream_si128((__m128i *)(void *)(d + i + 16), x1);
		_mm_stream_si128((__m128i *)(void *)(d + i + 32), x2);
		_mm_stream_si128((__m128i *)(void *)(d + i + 48), x3);
	}
	memcpy(d + i, s + i, len - i);
	_mm_sfence();
}
#else
void weft_copy_stream(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
}
#endif

/* A block of the reduction: small enough to stay in L1 with its inputs'
 * lines, large enough that the kernel call costs nothing. */
#define STREAM_BLOCK 4096

void weft_reduce_stream(weft_reduce_fn fn, void *dst, const void *a, const void *b, size_t count,
			size_t esize)
{
	_Alignas(64) unsigned char tmp[STREAM_BLOCK];
	size_t per = STREAM_BLOCK / esize;
	unsigned char *d = dst;
	const unsigned char *pa = a, *pb = b;
	for (size_t i = 0; i < count; i += per) {
		size_t n = count - i < per ? count - i : per;
		fn(tmp, pa + i * esize, pb + i * esize, n);
		weft_copy_stream(d + i * esize, tmp, n * esize);
	}
}
