/*
 * rd.h — recursive doubling and recursive halving arithmetic, no I/O.
 *
 * Indices here are virtual (the algorithms map them to ranks, e.g. through
 * the placement ring). Recursive doubling and halving need a power of two,
 * p = 2^k <= n; the r = n - p extra indices p..n-1 are folded into the first
 * r: before the main exchange, index p + i hands its data to index i (a
 * "pre step"), which then stands for both; after it, index i hands the
 * result back (a "post step"). Indices r..p-1 have no fold partner.
 *
 * Doubling: at step s (0..k-1) index v exchanges with v ^ (1 << s).
 *
 * Halving (the reduce-scatter half of Rabenseifner): the vector is cut into
 * p segments; at step s index v exchanges with v ^ (1 << s), keeps the half
 * of its current segment range selected by bit s of v and sends the other
 * half (which is the half its partner keeps). After k steps every index
 * holds one segment, each a different one. The short exchanges (distance
 * 1, usually neighbours on the ring, often on one host) carry the big
 * halves. The allgather half runs the same steps in reverse, each index
 * sending what it holds and receiving its partner's part.
 */
#ifndef WEFT_PATTERN_RD_H
#define WEFT_PATTERN_RD_H

#include <stdbool.h>

/* Largest power of two <= n (n >= 1). */
static inline int weft_rd_pow2(int n)
{
	int p = 1;
	while (p * 2 <= n)
		p *= 2;
	return p;
}

/* log2 of weft_rd_pow2(n): the number of doubling (or halving) steps. */
static inline int weft_rd_nsteps(int n)
{
	int k = 0;
	while ((2 << k) <= n)
		k++;
	return k;
}

/* True if @p v is one of the extra indices folded away (v >= p). */
static inline bool weft_rd_is_extra(int v, int n)
{
	return v >= weft_rd_pow2(n);
}

/* The fold partner of @p v: v - p for an extra index, v + p for an index
 * that stands for an extra one, -1 for the others. */
static inline int weft_rd_fold_peer(int v, int n)
{
	int p = weft_rd_pow2(n);
	if (v >= p)
		return v - p;
	if (v < n - p)
		return v + p;
	return -1;
}

/* Partner of @p v (v < p) at doubling or halving step @p s. */
static inline int weft_rd_partner(int v, int s)
{
	return v ^ (1 << s);
}

/* Segment range [*lo, *hi) of p = 2^k segments that index @p v (v < p)
 * holds after @p done halving steps (done = 0: all of them). What v sends
 * at step s is weft_rd_halving_range(partner, p, s + 1). */
static inline void weft_rd_halving_range(int v, int p, int done, int *lo, int *hi)
{
	int l = 0, size = p;
	for (int s = 0; s < done; s++) {
		size /= 2;
		if ((v >> s) & 1)
			l += size;
	}
	*lo = l;
	*hi = l + size;
}

#endif
