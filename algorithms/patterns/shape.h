/*
 * shape.h — tree shapes over virtual indices 0..n-1 (0 is the root), and
 * their placement over the ring: what the tree algorithms' schedules are
 * laid out on. Pure arithmetic (patterns/tree.h), no I/O.
 */
#ifndef WEFT_PATTERN_SHAPE_H
#define WEFT_PATTERN_SHAPE_H

#include "algorithms/patterns/tree.h"

struct weft_comm;

/* Parent and children of index @p v among @p n; *parent -1 at the root,
 * unused children -1. */
typedef void (*weft_shape_fn)(int n, int v, int *parent, int child[WEFT_TREE_MAX_CHILDREN]);

/* NCCL's binary tree (weft_btree over all n): the root has one child,
 * inner nodes two. Depth ceil(log2 n). */
void weft_shape_btree(int n, int v, int *parent, int child[WEFT_TREE_MAX_CHILDREN]);

/* Tree 0 and tree 1 of the double binary tree (weft_dbtree): each index
 * is an inner node in at most one of them. Tree 0 is rooted at 0, tree 1
 * at weft_dbtree_root(1, n). */
void weft_shape_dbtree0(int n, int v, int *parent, int child[WEFT_TREE_MAX_CHILDREN]);
void weft_shape_dbtree1(int n, int v, int *parent, int child[WEFT_TREE_MAX_CHILDREN]);

/* A chain 0 -> 1 -> ... -> n-1. */
void weft_shape_chain(int n, int v, int *parent, int child[WEFT_TREE_MAX_CHILDREN]);

/* An upper bound on the depth of weft_shape_btree: ceil(log2 n). */
int weft_shape_depth(int n);

/* One tree as this rank sees it, in rank numbers. */
struct weft_tree_node {
	int parent; /* -1 at the root */
	int child[WEFT_TREE_MAX_CHILDREN];
	int nchildren;
};

/* This rank's place in @p shape laid over the placement ring (neighbours
 * on the ring share a host, then a leaf), rotated so that @p root_rank is
 * the tree's root. */
void weft_shape_place(struct weft_tree_node *t, const struct weft_comm *comm, weft_shape_fn shape,
		      int root_rank);

#endif
