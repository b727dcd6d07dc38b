/*
 * tree.h — tree arithmetic, no I/O: binomial trees rooted at any index, and
 * the two complementary binary trees of a double binary tree.
 *
 * Binomial tree: with v = (i - root) mod n, the parent of v > 0 is v with
 * its lowest set bit cleared; the children of v are v + 2^j for every 2^j
 * below v's lowest set bit (every 2^j < n for the root) with v + 2^j < n.
 * ceil(log2 n) levels; used for broadcast and reduce with a root.
 *
 * Double binary tree (as in NCCL): tree 0 is an in-order binary tree over
 * the indices — an index whose lowest set bit is b has children i - b/2 and
 * i + b/2 (the latter clipped to the largest i + b/2^m < n), so every odd
 * index is a leaf — hung below index 0, whose only child is the top of
 * that tree. For even n, tree 1 is tree 0 mirrored (i -> n-1-i), which
 * turns the even indices, the possible interior nodes of tree 0, into
 * leaves. For odd n, both trees are built over the first n-1 indices (an
 * even count) and index n-1 hangs as a leaf under each tree's root, which
 * then has two children. Every index is thus interior in at most one tree,
 * so splitting the data between the two trees uses every link about
 * equally in both directions.
 */
#ifndef WEFT_PATTERN_TREE_H
#define WEFT_PATTERN_TREE_H

#define WEFT_TREE_MAX_CHILDREN 2

/* --- Binomial --- */

/* Parent of index @p i in the binomial tree rooted at @p root; -1 for the root. */
static inline int weft_binomial_parent(int i, int root, int n)
{
	int v = ((i - root) % n + n) % n;
	if (v == 0)
		return -1;
	return ((v & (v - 1)) + root) % n;
}

/* Children of @p i, largest subtree first, into @p out (room for 32 is
 * always enough for int indices); returns how many. */
static inline int weft_binomial_children(int i, int root, int n, int *out)
{
	int v = ((i - root) % n + n) % n;
	int low = v ? (v & -v) : 0; /* children below the lowest set bit; root: all */
	int top = 1;
	while (top < n && (v == 0 || top < low))
		top <<= 1;
	int k = 0;
	for (int b = top >> 1; b >= 1; b >>= 1)
		if ((v == 0 || b < low) && v + b < n)
			out[k++] = (v + b + root) % n;
	return k;
}

/* --- Double binary tree --- */

/* The in-order tree of tree 0 over @p m indices (m >= 1): parent and up to
 * two children of @p i, -1 where there is none. */
static inline void weft_btree(int i, int m, int *parent, int child[WEFT_TREE_MAX_CHILDREN])
{
	child[0] = child[1] = -1;
	if (i == 0) {
		*parent = -1;
		if (m > 1) {
			int top = 1;
			while (top * 2 < m)
				top *= 2;
			child[0] = top;
		}
		return;
	}
	int bit = i & -i;
	int up = (i ^ bit) | (bit << 1);
	if (up >= m)
		up = i ^ bit;
	*parent = up;
	int low = bit >> 1;
	if (low == 0)
		return;
	child[0] = i - low;
	while (low > 0 && i + low >= m)
		low >>= 1;
	if (low > 0)
		child[1] = i + low;
}

/* Parent and children of @p i in tree @p t (0 or 1) of the double binary
 * tree over @p n indices; -1 where there is none. */
static inline void weft_dbtree(int i, int t, int n, int *parent, int child[WEFT_TREE_MAX_CHILDREN])
{
	int m = n % 2 ? n - 1 : n; /* even: the mirror works */
	child[0] = child[1] = -1;
	*parent = -1;
	if (n == 1)
		return;
	if (i == m) { /* odd n: the last index, a leaf under both roots */
		*parent = t == 0 ? 0 : m - 1;
		return;
	}
	int j = t == 0 ? i : m - 1 - i;
	int p, c[WEFT_TREE_MAX_CHILDREN];
	weft_btree(j, m, &p, c);
	if (t == 1) {
		p = p < 0 ? -1 : m - 1 - p;
		for (int k = 0; k < WEFT_TREE_MAX_CHILDREN; k++)
			c[k] = c[k] < 0 ? -1 : m - 1 - c[k];
	}
	*parent = p;
	child[0] = c[0];
	child[1] = c[1];
	if (m < n && p < 0) /* the root adopts the last index */
		child[1] = m;
}

/* Root of tree @p t over @p n indices. */
static inline int weft_dbtree_root(int t, int n)
{
	int m = n % 2 ? n - 1 : n;
	return t == 0 || n == 1 ? 0 : m - 1;
}

#endif
