/*
 * bruck.h — Bruck allgather arithmetic, no I/O.
 *
 * Index v starts with its own block. At step s (0..ceil(log2 n)-1), with
 * d = 2^s, it holds the blocks v, v+1, ..., v+d-1 (mod n); it sends the
 * first min(d, n-d) of them to v - d and receives as many from v + d, which
 * are the blocks v+d, ..., v+d+min(d,n-d)-1: after the step it holds
 * min(2d, n) consecutive blocks. Block indices are absolute, so a receiver
 * can put every block straight at its final place and the classic final
 * rotation is not needed; a range that wraps past n-1 is moved as two
 * pieces, cut at the same block on both sides.
 */
#ifndef WEFT_PATTERN_BRUCK_H
#define WEFT_PATTERN_BRUCK_H

/* ceil(log2 n); 0 for n = 1. */
static inline int weft_bruck_nsteps(int n)
{
	int k = 0;
	while ((1 << k) < n)
		k++;
	return k;
}

/* Distance of step @p s. */
static inline int weft_bruck_dist(int s)
{
	return 1 << s;
}

static inline int weft_bruck_send_to(int v, int s, int n)
{
	return ((v - weft_bruck_dist(s)) % n + n) % n;
}

static inline int weft_bruck_recv_from(int v, int s, int n)
{
	return (v + weft_bruck_dist(s)) % n;
}

/* Blocks moved at step @p s each way. */
static inline int weft_bruck_nblocks(int s, int n)
{
	int d = weft_bruck_dist(s);
	return d < n - d ? d : n - d;
}

/* First block index sent (v itself) and received (v + d) at step @p s; the
 * ranges are weft_bruck_nblocks() long, modulo n. */
static inline int weft_bruck_send_first(int v, int s, int n)
{
	return v;
}

static inline int weft_bruck_recv_first(int v, int s, int n)
{
	return weft_bruck_recv_from(v, s, n);
}

/* Cut the circular range of @p count blocks from @p first (mod n) into at
 * most two linear pieces: [lo[i], lo[i] + len[i]). Returns the number of
 * pieces (0 if count is 0). */
static inline int weft_bruck_pieces(int first, int count, int n, int lo[2], int len[2])
{
	if (count <= 0)
		return 0;
	lo[0] = first;
	if (first + count <= n) {
		len[0] = count;
		return 1;
	}
	len[0] = n - first;
	lo[1] = 0;
	len[1] = count - len[0];
	return 2;
}

#endif
