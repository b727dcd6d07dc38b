/* stream.h — copies and reductions whose destination is written with
 * non-temporal (streaming) stores: for outputs that will not be read
 * soon by this core, larger than the caches. A normal store first reads
 * the destination line (write-allocate); for an out-of-place reduction
 * that is a third stream of memory traffic beside the two inputs, and it
 * is what made out-of-place AllReduce 25-45 % slower than in place from
 * 2 MiB up (docs/tuning.md, "Streaming stores and the out-of-place gap"). Streaming stores skip
 * that read and do not evict the inputs from the cache. */
#ifndef WEFT_REDUCE_STREAM_H
#define WEFT_REDUCE_STREAM_H

#include <stddef.h>

#include "reduce/reduce.h"

/* memcpy(dst, src, len) with streaming stores (ordered before return). */
void weft_copy_stream(void *dst, const void *src, size_t len);

/* fn(dst, a, b, count) with dst written by streaming stores: reduced a
 * block at a time into a buffer that stays in L1, then streamed out.
 * dst must not overlap a or b (use fn itself for in place). */
void weft_reduce_stream(weft_reduce_fn fn, void *dst, const void *a, const void *b, size_t count,
			size_t esize);

#endif
