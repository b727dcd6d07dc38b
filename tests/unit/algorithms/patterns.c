/*
 * patterns.c — the rank arithmetic of algorithms/patterns/, checked
 * exhaustively for 1..64 indices: pure arithmetic, no communicator.
 *
 *  - recursive doubling / halving (rd.h): partners are symmetric, the fold
 *    pairs every extra index with one distinct lower index, and a simulated
 *    AllReduce (doubling, and halving + doubling) counts every index's
 *    contribution exactly once in every result;
 *  - Bruck (bruck.h): senders and receivers agree on peers and ranges, a
 *    rank only sends blocks it holds, receives each block exactly once, and
 *    ends with all of them; the wrap pieces cover a range exactly;
 *  - trees (tree.h): binomial trees for every root and both trees of the
 *    double binary tree are spanning trees (one root, parents and children
 *    agree, no cycles, depth bounded), and in the double binary tree every
 *    index is interior in at most one tree;
 *  - tree shapes (shape.h): the binary tree, both double binary trees and
 *    the chain are consistent for 1..64 ranks (one root, parents and
 *    children agree, every index reaches the root within the depth);
 *  - hierarchical layouts (hier.h) on synthetic graphs of 1..64 ranks: the
 *    chain inside each host and the leaders' ring through every host.
 */
#include <check.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "algorithms/patterns/bruck.h"
#include "algorithms/patterns/hier.h"
#include "algorithms/patterns/rd.h"
#include "algorithms/patterns/ring.h"
#include "algorithms/patterns/shape.h"
#include "algorithms/patterns/tree.h"
#include "core/comm.h"

#define MAXN 64

/* Check's assertions cost a system call each even when they pass; the
 * loops here make millions of checks, so they use this instead. */
static void expect(bool cond, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void expect(bool cond, int line, const char *fmt, ...)
{
	if (cond)
		return;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ck_abort_msg("line %d: %s", line, msg);
}

static uint64_t all_of(int n)
{
	return n == 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1);
}

/* --- Recursive doubling and halving --- */

START_TEST(rd_fold_and_partners)
{
	for (int n = 1; n <= MAXN; n++) {
		int p = weft_rd_pow2(n), k = weft_rd_nsteps(n);
		expect((1 << k) == (p), __LINE__, "%s", "1 << k == p");
		expect(p <= n && 2 * p > n, __LINE__, "%s", "p <= n && 2 * p > n");
		int folded_into[MAXN] = {0};
		for (int v = 0; v < n; v++) {
			int f = weft_rd_fold_peer(v, n);
			expect(weft_rd_is_extra(v, n) == (v >= p), __LINE__, "%s",
			       "weft_rd_is_extra(v, n) == (v >= p)");
			if (f < 0) {
				expect(v < p && v >= n - p, __LINE__, "%s", "v < p && v >= n - p");
				continue;
			}
			expect((f) < (n), __LINE__, "%s", "f < n");
			expect((weft_rd_fold_peer(f, n)) == (v), __LINE__, "%s",
			       "weft_rd_fold_peer(f, n) == v");
			expect(weft_rd_is_extra(v, n) != weft_rd_is_extra(f, n), __LINE__, "%s",
			       "weft_rd_is_extra(v, n) != weft_rd_is_extra(f, n)");
			if (v >= p)
				folded_into[f]++;
		}
		for (int v = 0; v < p; v++)
			expect((folded_into[v]) <= (1), __LINE__, "%s", "folded_into[v] <= 1");
		for (int v = 0; v < p; v++)
			for (int s = 0; s < k; s++) {
				int u = weft_rd_partner(v, s);
				expect(u >= 0 && u < p && u != v, __LINE__, "%s",
				       "u >= 0 && u < p && u != v");
				expect((weft_rd_partner(u, s)) == (v), __LINE__, "%s",
				       "weft_rd_partner(u, s) == v");
			}
	}
}
END_TEST

/* Contributions held: a set of indices; combining two must not overlap. */
static void combine(uint64_t *into, uint64_t add, int n, int v, const char *what)
{
	expect((*into & add) == 0, __LINE__, "n=%d index %d: %s counts a contribution twice", n, v,
	       what);
	*into |= add;
}

START_TEST(rd_doubling_allreduce)
{
	for (int n = 1; n <= MAXN; n++) {
		int p = weft_rd_pow2(n), k = weft_rd_nsteps(n);
		uint64_t have[MAXN], next[MAXN];
		for (int v = 0; v < n; v++)
			have[v] = (uint64_t)1 << v;
		for (int v = p; v < n; v++) /* pre step */
			combine(&have[weft_rd_fold_peer(v, n)], have[v], n, v, "fold-in");
		for (int s = 0; s < k; s++) {
			memcpy(next, have, sizeof(have));
			for (int v = 0; v < p; v++)
				combine(&next[v], have[weft_rd_partner(v, s)], n, v, "doubling");
			memcpy(have, next, sizeof(have));
		}
		for (int v = p; v < n; v++) /* post step */
			have[v] = have[weft_rd_fold_peer(v, n)];
		for (int v = 0; v < n; v++)
			expect(have[v] == all_of(n), __LINE__, "n=%d index %d misses contributions",
			       n, v);
	}
}
END_TEST

START_TEST(rd_halving_ranges)
{
	for (int n = 1; n <= MAXN; n++) {
		int p = weft_rd_pow2(n), k = weft_rd_nsteps(n);
		int owner[MAXN];
		for (int seg = 0; seg < p; seg++)
			owner[seg] = -1;
		for (int v = 0; v < p; v++) {
			int lo, hi;
			weft_rd_halving_range(v, p, 0, &lo, &hi);
			expect(lo == 0 && hi == p, __LINE__, "%s", "lo == 0 && hi == p");
			for (int s = 0; s < k; s++) {
				int u = weft_rd_partner(v, s), plo, phi, mlo, mhi, ulo, uhi;
				weft_rd_halving_range(v, p, s, &plo, &phi);
				weft_rd_halving_range(u, p, s, &ulo, &uhi);
				expect(plo == ulo && phi == uhi, __LINE__, "%s",
				       "plo == ulo && phi == uhi"); /* partners start alike */
				weft_rd_halving_range(v, p, s + 1, &mlo, &mhi);
				weft_rd_halving_range(u, p, s + 1, &ulo, &uhi);
				expect((mhi - mlo) == ((phi - plo) / 2), __LINE__, "%s",
				       "mhi - mlo == (phi - plo) / 2");
				expect(mhi == ulo || uhi == mlo, __LINE__, "%s",
				       "mhi == ulo || uhi == mlo"); /* disjoint halves */
				expect(((mlo < ulo ? mlo : ulo)) == (plo), __LINE__, "%s",
				       "(mlo < ulo ? mlo : ulo) == plo");
				expect(((mhi > uhi ? mhi : uhi)) == (phi), __LINE__, "%s",
				       "(mhi > uhi ? mhi : uhi) == phi");
			}
			weft_rd_halving_range(v, p, k, &lo, &hi);
			expect((hi) == (lo + 1), __LINE__, "%s", "hi == lo + 1");
			expect((owner[lo]) == (-1), __LINE__, "%s", "owner[lo] == -1");
			owner[lo] = v;
		}
	}
}
END_TEST

/* Rabenseifner simulated on the contribution sets of each segment. */
START_TEST(rd_rabenseifner_allreduce)
{
	static uint64_t have[MAXN][MAXN], next[MAXN][MAXN]; /* [index][segment] */
	for (int n = 1; n <= MAXN; n++) {
		int p = weft_rd_pow2(n), k = weft_rd_nsteps(n);
		for (int v = 0; v < n; v++)
			for (int seg = 0; seg < p; seg++)
				have[v][seg] = (uint64_t)1 << v;
		for (int v = p; v < n; v++)
			for (int seg = 0; seg < p; seg++)
				combine(&have[weft_rd_fold_peer(v, n)][seg], have[v][seg], n, v,
					"fold-in");
		for (int s = 0; s < k; s++) { /* halving: reduce the half we keep */
			memcpy(next, have, sizeof(have));
			for (int v = 0; v < p; v++) {
				int u = weft_rd_partner(v, s), lo, hi;
				weft_rd_halving_range(v, p, s + 1, &lo, &hi);
				for (int seg = lo; seg < hi; seg++)
					combine(&next[v][seg], have[u][seg], n, v, "halving");
			}
			memcpy(have, next, sizeof(have));
		}
		for (int v = 0; v < p; v++) {
			int lo, hi;
			weft_rd_halving_range(v, p, k, &lo, &hi);
			expect(have[v][lo] == all_of(n), __LINE__,
			       "n=%d: segment %d of index %d incomplete", n, lo, v);
		}
		for (int s = k - 1; s >= 0; s--) { /* doubling: take the partner's range */
			memcpy(next, have, sizeof(have));
			for (int v = 0; v < p; v++) {
				int u = weft_rd_partner(v, s), lo, hi;
				weft_rd_halving_range(u, p, s + 1, &lo, &hi);
				for (int seg = lo; seg < hi; seg++)
					next[v][seg] = have[u][seg];
			}
			memcpy(have, next, sizeof(have));
		}
		for (int v = p; v < n; v++)
			memcpy(have[v], have[weft_rd_fold_peer(v, n)], sizeof(have[v]));
		for (int v = 0; v < n; v++)
			for (int seg = 0; seg < p; seg++)
				expect(have[v][seg] == all_of(n), __LINE__,
				       "n=%d index %d segment %d incomplete", n, v, seg);
	}
}
END_TEST

/* Segments of any count: contiguous, in order, covering everything. */
START_TEST(ring_segments)
{
	static const size_t counts[] = {0, 1, 2, 7, 63, 64, 65, 4099};
	for (int n = 1; n <= MAXN; n++)
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
			size_t off = 0;
			for (int seg = 0; seg < n; seg++) {
				expect((weft_seg_offset(counts[c], n, seg)) == (off), __LINE__,
				       "%s", "weft_seg_offset(counts[c], n, seg) == off");
				off += weft_seg_count(counts[c], n, seg);
			}
			expect((off) == (counts[c]), __LINE__, "%s", "off == counts[c]");
			expect((weft_seg_offset(counts[c], n, n)) == (counts[c]), __LINE__, "%s",
			       "weft_seg_offset(counts[c], n, n) == counts[c]");
		}
}
END_TEST

/* --- Bruck --- */

START_TEST(bruck_covers_every_block_once)
{
	for (int n = 1; n <= MAXN; n++) {
		int k = weft_bruck_nsteps(n);
		expect(k == 0 ? n == 1 : ((1 << (k - 1)) < n && n <= (1 << k)), __LINE__, "%s",
		       "k == 0 ? n == 1 : ((1 << (k - 1)) < n && n <= (1 << k))");
		uint64_t have[MAXN], next[MAXN];
		for (int v = 0; v < n; v++)
			have[v] = (uint64_t)1 << v;
		for (int s = 0; s < k; s++) {
			int nb = weft_bruck_nblocks(s, n);
			expect(nb >= 1 && nb <= weft_bruck_dist(s), __LINE__, "%s",
			       "nb >= 1 && nb <= weft_bruck_dist(s)");
			memcpy(next, have, sizeof(have));
			for (int v = 0; v < n; v++) {
				int to = weft_bruck_send_to(v, s, n),
				    from = weft_bruck_recv_from(v, s, n);
				expect(to >= 0 && to < n && from >= 0 && from < n, __LINE__, "%s",
				       "to >= 0 && to < n && from >= 0 && from < n");
				expect((weft_bruck_recv_from(to, s, n)) == (v), __LINE__, "%s",
				       "weft_bruck_recv_from(to, s, n) == v");
				expect((weft_bruck_send_to(from, s, n)) == (v), __LINE__, "%s",
				       "weft_bruck_send_to(from, s, n) == v");
				/* What v receives is what its sender sends. */
				expect((weft_bruck_recv_first(v, s, n)) ==
					   (weft_bruck_send_first(from, s, n)),
				       __LINE__, "%s",
				       "weft_bruck_recv_first(v, s, n) == "
				       "weft_bruck_send_first(from, s, n)");
				int lo[2], len[2];
				int np = weft_bruck_pieces(weft_bruck_send_first(v, s, n), nb, n,
							   lo, len);
				expect(np >= 1 && np <= 2, __LINE__, "%s", "np >= 1 && np <= 2");
				int total = 0;
				for (int i = 0; i < np; i++) {
					expect(lo[i] >= 0 && len[i] > 0 && lo[i] + len[i] <= n,
					       __LINE__, "%s",
					       "lo[i] >= 0 && len[i] > 0 && lo[i] + len[i] <= n");
					for (int b = lo[i]; b < lo[i] + len[i]; b++) {
						expect(
						    (have[v] >> b & 1), __LINE__,
						    "n=%d step %d: rank %d sends block %d it lacks",
						    n, s, v, b);
						expect(!(have[to] >> b & 1) && !(next[to] >> b & 1),
						       __LINE__,
						       "n=%d step %d: rank %d gets block %d twice",
						       n, s, to, b);
						next[to] |= (uint64_t)1 << b;
					}
					total += len[i];
				}
				expect((total) == (nb), __LINE__, "%s", "total == nb");
			}
			memcpy(have, next, sizeof(have));
		}
		for (int v = 0; v < n; v++)
			expect(have[v] == all_of(n), __LINE__, "n=%d: rank %d lacks blocks", n, v);
	}
}
END_TEST

START_TEST(bruck_pieces)
{
	int lo[2], len[2];
	expect((weft_bruck_pieces(3, 0, 5, lo, len)) == (0), __LINE__, "%s",
	       "weft_bruck_pieces(3, 0, 5, lo, len) == 0");
	expect((weft_bruck_pieces(1, 3, 5, lo, len)) == (1), __LINE__, "%s",
	       "weft_bruck_pieces(1, 3, 5, lo, len) == 1");
	expect(lo[0] == 1 && len[0] == 3, __LINE__, "%s", "lo[0] == 1 && len[0] == 3");
	expect((weft_bruck_pieces(3, 4, 5, lo, len)) == (2), __LINE__, "%s",
	       "weft_bruck_pieces(3, 4, 5, lo, len) == 2");
	expect(lo[0] == 3 && len[0] == 2 && lo[1] == 0 && len[1] == 2, __LINE__, "%s",
	       "lo[0] == 3 && len[0] == 2 && lo[1] == 0 && len[1] == 2");
	expect((weft_bruck_pieces(0, 5, 5, lo, len)) == (1), __LINE__, "%s",
	       "weft_bruck_pieces(0, 5, 5, lo, len) == 1");
}
END_TEST

/* --- Trees --- */

typedef void (*shape_fn)(int i, int n, int arg, int *parent, int *children, int *nchildren);

/* A spanning tree: one root, parent/children agree, every index reaches the
 * root without a cycle within @p max_depth hops. Returns the root. */
static int check_tree(int n, shape_fn shape, int arg, int max_children, int max_depth,
		      const char *what)
{
	int parent[MAXN], children[MAXN][32], nch[MAXN], root = -1;
	for (int i = 0; i < n; i++) {
		shape(i, n, arg, &parent[i], children[i], &nch[i]);
		expect(nch[i] <= max_children, __LINE__, "%s n=%d arg %d: %d has %d children", what,
		       n, arg, i, nch[i]);
		if (parent[i] < 0) {
			expect(root < 0, __LINE__, "%s n=%d arg %d: two roots", what, n, arg);
			root = i;
		} else {
			expect(parent[i] < n && parent[i] != i, __LINE__, "%s",
			       "parent[i] < n && parent[i] != i");
		}
	}
	expect(root >= 0, __LINE__, "%s n=%d arg %d: no root", what, n, arg);
	int child_seen[MAXN] = {0};
	for (int i = 0; i < n; i++)
		for (int c = 0; c < nch[i]; c++) {
			int ch = children[i][c];
			expect(ch >= 0 && ch < n && parent[ch] == i, __LINE__,
			       "%s n=%d arg %d: %d lists child %d whose parent is %d", what, n, arg,
			       i, ch, ch >= 0 && ch < n ? parent[ch] : -2);
			child_seen[ch]++;
		}
	for (int i = 0; i < n; i++) {
		expect((child_seen[i]) == (i == root ? 0 : 1), __LINE__, "%s",
		       "every non-root index is one parent's child");
		int hops = 0;
		for (int j = i; parent[j] >= 0; j = parent[j]) {
			hops++;
			expect(hops <= max_depth, __LINE__,
			       "%s n=%d arg %d: %d is %d+ deep (cycle?)", what, n, arg, i, hops);
		}
	}
	return root;
}

static int ceil_log2(int n)
{
	int d = 0;
	while ((1 << d) < n)
		d++;
	return d;
}

static void binomial_shape(int i, int n, int root, int *parent, int *children, int *nchildren)
{
	*parent = weft_binomial_parent(i, root, n);
	*nchildren = weft_binomial_children(i, root, n, children);
}

static void dbtree_shape(int i, int n, int t, int *parent, int *children, int *nchildren)
{
	int c[WEFT_TREE_MAX_CHILDREN];
	weft_dbtree(i, t, n, parent, c);
	*nchildren = 0;
	for (int k = 0; k < WEFT_TREE_MAX_CHILDREN; k++)
		if (c[k] >= 0)
			children[(*nchildren)++] = c[k];
}

static void btree_shape(int i, int n, int unused, int *parent, int *children, int *nchildren)
{
	int c[WEFT_TREE_MAX_CHILDREN];
	weft_btree(i, n, parent, c);
	*nchildren = 0;
	for (int k = 0; k < WEFT_TREE_MAX_CHILDREN; k++)
		if (c[k] >= 0)
			children[(*nchildren)++] = c[k];
}

START_TEST(binomial_trees)
{
	for (int n = 1; n <= MAXN; n++)
		for (int root = 0; root < n; root++) {
			int r = check_tree(n, binomial_shape, root, 32, ceil_log2(n), "binomial");
			expect((r) == (root), __LINE__, "%s", "r == root");
			/* Largest subtree first: children farther away come first. */
			int ch[32], k = weft_binomial_children(root, root, n, ch);
			expect((k) == (ceil_log2(n)), __LINE__, "%s", "k == ceil_log2(n)");
			for (int c = 1; c < k; c++) {
				int d0 = (ch[c - 1] - root + n) % n, d1 = (ch[c] - root + n) % n;
				expect((d0) > (d1), __LINE__, "%s", "d0 > d1");
			}
		}
}
END_TEST

START_TEST(double_binary_trees)
{
	for (int n = 1; n <= MAXN; n++) {
		check_tree(n, btree_shape, 0, 2, ceil_log2(n) + 1, "btree");
		int interior[MAXN] = {0};
		for (int t = 0; t < 2; t++) {
			int root = check_tree(n, dbtree_shape, t, 2, ceil_log2(n) + 1, "dbtree");
			expect((root) == (weft_dbtree_root(t, n)), __LINE__, "%s",
			       "root == weft_dbtree_root(t, n)");
			for (int i = 0; i < n; i++) {
				int parent, c[WEFT_TREE_MAX_CHILDREN];
				weft_dbtree(i, t, n, &parent, c);
				if (c[0] >= 0 || c[1] >= 0)
					interior[i]++;
			}
		}
		for (int i = 0; i < n; i++)
			expect(interior[i] <= 1, __LINE__, "n=%d: %d is interior in both trees", n,
			       i);
	}
}
END_TEST

/* --- Tree shapes (shape.h): the trees the tree algorithms use --- */

static void check_shape(weft_shape_fn shape, const char *what, int n)
{
	int parent[64], child[64][WEFT_TREE_MAX_CHILDREN], roots = 0;
	for (int v = 0; v < n; v++) {
		shape(n, v, &parent[v], child[v]);
		ck_assert_msg(parent[v] >= -1 && parent[v] < n && parent[v] != v,
			      "%s n %d v %d: parent %d", what, n, v, parent[v]);
		roots += parent[v] < 0;
	}
	ck_assert_msg(roots == 1, "%s n %d: %d roots", what, n, roots);
	for (int v = 0; v < n; v++) {
		int seen = 0;
		for (int k = 0; k < WEFT_TREE_MAX_CHILDREN; k++) {
			int ch = child[v][k];
			if (ch < 0)
				continue;
			ck_assert_msg(ch < n && parent[ch] == v,
				      "%s n %d: %d lists child %d whose parent is %d", what, n, v,
				      ch, ch < n ? parent[ch] : -2);
			seen++;
		}
		int want = 0;
		for (int u = 0; u < n; u++)
			want += parent[u] == v;
		ck_assert_msg(seen == want, "%s n %d: %d has %d children, lists %d", what, n, v,
			      want, seen);
		int hops =
		    0; /* every index reaches the root within ceil(log2 n) + 1 hops (chain: n) */
		for (int u = v; parent[u] >= 0 && hops <= n; u = parent[u])
			hops++;
		ck_assert_msg(hops < n || n == 1, "%s n %d: %d does not reach the root", what, n,
			      v);
		if (shape != weft_shape_chain)
			ck_assert_msg(hops <= weft_shape_depth(n) + 1, "%s n %d: %d is %d deep",
				      what, n, v, hops);
	}
}

START_TEST(tree_shapes)
{
	for (int n = 1; n <= 64; n++) {
		check_shape(weft_shape_btree, "btree", n);
		check_shape(weft_shape_dbtree0, "dbtree0", n);
		check_shape(weft_shape_dbtree1, "dbtree1", n);
		check_shape(weft_shape_chain, "chain", n);
	}
}
END_TEST

/* --- Hierarchical layouts (hier.h) on synthetic graphs: chains inside
 * each host and the leaders' ring --- */

static unsigned lcg(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return (*s >> 16) & 0x7fff;
}

struct fake {
	struct weft_comm comm;
	int host_of[64], host_leader[64], ring[64];
	struct weft_hier_layout lay[64];
};

/* Hosts by first rank, leader = lowest rank; ring: rank order or grouped by host. */
static void fake_build(struct fake *f, int n, int nlabels, bool grouped, unsigned *seed)
{
	memset(f, 0, sizeof(*f));
	int label_host[64], nh = 0;
	for (int i = 0; i < 64; i++)
		label_host[i] = -1;
	for (int r = 0; r < n; r++) {
		int label = (int)(lcg(seed) % (unsigned)nlabels);
		if (label_host[label] < 0) {
			label_host[label] = nh;
			f->host_leader[nh++] = r;
		}
		f->host_of[r] = label_host[label];
	}
	/* Grouped: hosts in reverse order, each host's ranks in reverse (so the
	 * leader is last in ring order); else rank order rotated by n / 2. */
	int p = 0;
	for (int h = nh - 1; grouped && h >= 0; h--)
		for (int r = n - 1; r >= 0; r--)
			if (f->host_of[r] == h)
				f->ring[p++] = r;
	for (int i = 0; !grouped && i < n; i++)
		f->ring[p++] = (i + n / 2) % n;
	f->comm.nranks = n;
	f->comm.ring = f->ring;
	f->comm.graph.nranks = n;
	f->comm.graph.nhosts = nh;
	f->comm.graph.host_of = f->host_of;
	f->comm.graph.host_leader = f->host_leader;
	for (int r = 0; r < n; r++) {
		f->comm.rank = r;
		weft_hier_layout(&f->comm, &f->lay[r]);
	}
}

static void fake_check(const struct fake *f)
{
	int n = f->comm.nranks, nh = f->comm.graph.nhosts;
	for (int r = 0; r < n; r++) {
		const struct weft_hier_layout *l = &f->lay[r];
		int m = 0;
		for (int x = 0; x < n; x++)
			m += f->host_of[x] == f->host_of[r];
		ck_assert_int_eq(l->host, f->host_of[r]);
		ck_assert_int_eq(l->local_n, m);
		ck_assert_int_eq(l->nleaders, nh);
		ck_assert_int_eq(l->chain_pos == 0, f->host_leader[l->host] == r);
		ck_assert_int_eq(l->chain_prev < 0, l->chain_pos == 0);
		ck_assert_int_eq(l->chain_next < 0, l->chain_pos == m - 1);
		if (l->chain_next >= 0) {
			ck_assert_int_eq(f->host_of[l->chain_next], l->host);
			ck_assert_int_eq(f->lay[l->chain_next].chain_prev, r);
			ck_assert_int_eq(f->lay[l->chain_next].chain_pos, l->chain_pos + 1);
		}
		/* Every rank of a host agrees on its host's ring position. */
		const struct weft_hier_layout *ll = &f->lay[f->host_leader[l->host]];
		ck_assert_int_eq(l->leader_pos, ll->leader_pos);
		ck_assert_int_eq(l->leader_next, ll->leader_next);
		ck_assert_int_eq(l->leader_prev, ll->leader_prev);
	}
	/* The leaders form one cycle through every host, positions in order. */
	int r = f->host_leader[0], seen = 0;
	do {
		const struct weft_hier_layout *l = &f->lay[r];
		ck_assert_int_eq(weft_hier_host_at(&f->comm, l->leader_pos), l->host);
		int next = l->leader_next;
		ck_assert_int_eq(f->host_leader[f->host_of[next]], next);
		ck_assert_int_eq(f->lay[next].leader_prev, r);
		ck_assert_int_eq(f->lay[next].leader_pos, (l->leader_pos + 1) % nh);
		r = next;
		seen++;
	} while (r != f->host_leader[0] && seen <= nh);
	ck_assert_int_eq(seen, nh);
}

START_TEST(layout_arithmetic)
{
	static struct fake f;
	unsigned seed = 7;
	for (int n = 1; n <= 64; n++)
		for (int labels = 1; labels <= n && labels <= 9; labels++)
			for (int grouped = 0; grouped < 2; grouped++) {
				fake_build(&f, n, labels, grouped, &seed);
				fake_check(&f);
			}
}
END_TEST

static Suite *patterns_suite(void)
{
	Suite *s = suite_create("patterns");
	TCase *tc = tcase_create("arithmetic");
	tcase_add_test(tc, rd_fold_and_partners);
	tcase_add_test(tc, rd_doubling_allreduce);
	tcase_add_test(tc, rd_halving_ranges);
	tcase_add_test(tc, rd_rabenseifner_allreduce);
	tcase_add_test(tc, ring_segments);
	tcase_add_test(tc, bruck_covers_every_block_once);
	tcase_add_test(tc, bruck_pieces);
	tcase_add_test(tc, binomial_trees);
	tcase_add_test(tc, double_binary_trees);
	tcase_add_test(tc, tree_shapes);
	tcase_add_test(tc, layout_arithmetic);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(patterns_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
