/*
 * stream.c — the streaming-store copies and reductions
 * (reduce/stream.h) against memcpy and the plain kernels: every
 * destination alignment 0..63, lengths around the 16-byte stores, the
 * 64-byte loop and the 4 KiB reduction block, and guard bytes on both
 * sides that must stay untouched.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/stream.h"

#define CAP   (3 * 4096 + 512)
#define GUARD 64

static unsigned char src_buf[CAP + 128], b_buf[CAP + 128];
static unsigned char dst_buf[CAP + 2 * GUARD + 64], ref_buf[CAP + 64];

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 131u + seed * 7u + (i >> 8));
}

static const size_t lens[] = {0,   1,	15,   16,   17,	  63,	64,	   65, 255,
			      256, 257, 1000, 4095, 4096, 4097, 8192 + 12, CAP};

START_TEST(copy_matches_memcpy)
{
	fill(src_buf, sizeof(src_buf), 1);
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
		for (size_t al = 0; al < 64; al++) {
			unsigned char *d = dst_buf + GUARD + al;
			memset(dst_buf, 0xee, sizeof(dst_buf));
			weft_copy_stream(d, src_buf + 3, lens[l]);
			ck_assert_msg(memcmp(d, src_buf + 3, lens[l]) == 0,
				      "length %zu, alignment %zu: bytes differ", lens[l], al);
			size_t bad = SIZE_MAX;
			for (size_t i = 0; i < sizeof(dst_buf) && bad == SIZE_MAX; i++)
				if ((i < GUARD + al || i >= GUARD + al + lens[l]) &&
				    dst_buf[i] != 0xee)
					bad = i;
			ck_assert_msg(bad == SIZE_MAX, "length %zu: guard byte %zu written",
				      lens[l], bad);
		}
}
END_TEST

START_TEST(reduce_matches_kernel)
{
	static const weft_datatype_t dts[] = {WEFT_FLOAT32, WEFT_INT8, WEFT_FLOAT64, WEFT_BFLOAT16};
	fill(src_buf, sizeof(src_buf), 2);
	fill(b_buf, sizeof(b_buf), 3);
	for (size_t t = 0; t < sizeof(dts) / sizeof(dts[0]); t++) {
		weft_reduce_fn fn = weft_reduce_kernel(dts[t], WEFT_MAX);
		size_t es = dts[t] == WEFT_FLOAT64   ? 8
			    : dts[t] == WEFT_FLOAT32 ? 4
			    : dts[t] == WEFT_INT8    ? 1
						     : 2;
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
			for (size_t al = 0; al < 64; al += 5) {
				size_t count = lens[l] / es;
				unsigned char *d = dst_buf + GUARD + al;
				memset(dst_buf, 0xee, sizeof(dst_buf));
				fn(ref_buf, src_buf + 8, b_buf + 8, count);
				weft_reduce_stream(fn, d, src_buf + 8, b_buf + 8, count, es);
				ck_assert_msg(memcmp(d, ref_buf, count * es) == 0,
					      "dtype %zu, count %zu, alignment %zu: differs", t,
					      count, al);
				ck_assert_msg(dst_buf[GUARD + al - 1] == 0xee &&
						  d[count * es] == 0xee,
					      "a guard byte was written (count %zu)", count);
			}
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stream");
	TCase *tc = tcase_create("stream");
	tcase_add_test(tc, copy_matches_memcpy);
	tcase_add_test(tc, reduce_matches_kernel);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
