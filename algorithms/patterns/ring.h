/* ring.h — ring arithmetic, no I/O. Positions index the ring order
 * (comm->ring), which placement may make differ from rank numbers. */
#ifndef WEFT_PATTERN_RING_H
#define WEFT_PATTERN_RING_H

#include <stddef.h>

static inline int weft_ring_next(int pos, int n)
{
	return (pos + 1) % n;
}

static inline int weft_ring_prev(int pos, int n)
{
	return (pos + n - 1) % n;
}

/* (pos - step) mod n, for any step >= 0. */
static inline int weft_ring_back(int pos, long step, int n)
{
	long r = ((long)pos - step) % n;
	return (int)(r < 0 ? r + n : r);
}

/* Split @p count elements into @p n segments as evenly as possible: the
 * first count % n segments get one more. */
static inline size_t weft_seg_count(size_t count, int n, int seg)
{
	return count / (size_t)n + ((size_t)seg < count % (size_t)n ? 1 : 0);
}

static inline size_t weft_seg_offset(size_t count, int n, int seg)
{
	size_t base = count / (size_t)n, rem = count % (size_t)n;
	return base * (size_t)seg + ((size_t)seg < rem ? (size_t)seg : rem);
}

#endif
