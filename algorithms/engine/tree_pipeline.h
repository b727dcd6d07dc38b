/*
 * tree_pipeline.h — the engine under the tree algorithms (double binary tree
 * AllReduce, tree/chain Broadcast, tree Reduce).
 *
 * A tree collective moves a part of the vector along one tree: up (each rank
 * receives the part from each child, reducing it on arrival into an
 * accumulator, then sends the accumulator to its parent) and/or down (each
 * rank receives the part from its parent and forwards it to each child).
 * The part is cut into chunks; chunk j moves as soon as it is ready, so the
 * levels of the tree overlap: a pipeline. Up to two trees run at once, each
 * with its own part (the double binary tree).
 *
 * Ordering. The transport matches the messages of one direction between two
 * ranks in the order they were posted, and in a double binary tree the same
 * pair may be linked in both trees (A is B's child in tree 0 and its parent
 * in tree 1). So every (peer, direction) is a link with a fixed merge order
 * of its streams that both ends compute alike: each message has a key, up
 * chunk j of tree t has key 4j + 2t, down chunk j has key 4(j + lag) + 2t + 1,
 * and a link posts its messages strictly by increasing key. The lag lets the
 * up stream of one tree run ahead of the down stream of the other on a
 * shared link. No deadlock: a message only ever waits for messages of a
 * smaller key, or of the same key further along its own tree (acyclic), so
 * by induction on the key every message is posted and completes. The key is
 * also the message's step in its tag.
 *
 * Reductions are applied in a fixed order (own data, then child 0, then
 * child 1: the receive from child 1 is posted only once child 0's chunk has
 * arrived), so results are the same bits on every run.
 */
#ifndef WEFT_TREE_PIPELINE_H
#define WEFT_TREE_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "reduce/reduce.h"
#include "core/task.h"
#include "transports/transport.h"

struct weft_comm;

#define WEFT_TP_MAX_TREES    2
#define WEFT_TP_MAX_CHILDREN 2
/* Distinct (peer, direction) pairs: 3 neighbours per tree, both ways. */
#define WEFT_TP_MAX_LINKS  (2 * WEFT_TP_MAX_TREES * (WEFT_TP_MAX_CHILDREN + 1))
#define WEFT_TP_MAX_WINDOW 8

/* One tree as this rank sees it, in rank numbers. */
struct weft_tp_tree {
	int parent; /* -1 at the root */
	int child[WEFT_TP_MAX_CHILDREN];
	int nchildren;
	size_t elem_off, elems; /* the part of the vector that this tree carries */
};

struct weft_tp_config {
	struct weft_tp_tree tree[WEFT_TP_MAX_TREES];
	int ntrees;
	bool up, down;	    /* phases: reduce toward the root, then/or spread from it */
	size_t chunk_elems; /* pipelining chunk; the same on every rank */
	/* Up phase, non-root ranks: where partial sums accumulate. NULL: in
	 * recvbuf (allreduce). Otherwise slots of chunk_elems elements reused
	 * round-robin (reduce, whose non-root recvbuf may be NULL); one tree only. */
	char *staging;
	uint32_t nslots;
	/* Message slots lent by the algorithm (its own task->priv). */
	struct weft_msg *pool;
	uint32_t pool_cap;
};

struct weft_tp_stream {
	uint8_t kind; /* enum in tree_pipeline.c */
	uint8_t tree;
	uint8_t child; /* index among the tree's children (up recv, down send) */
	uint32_t posted, done;
};

struct weft_tp_link {
	int peer;
	bool send;
	uint8_t nstreams;
	struct weft_tp_stream s[WEFT_TP_MAX_TREES];
	uint16_t first, window; /* its message slots: pool[first .. first + window) */
	uint32_t posted, reaped;
	uint8_t slot_stream[WEFT_TP_MAX_WINDOW]; /* which stream each slot carries */
};

struct weft_tree_pipeline {
	struct weft_tp_config cfg;
	uint32_t nchunks[WEFT_TP_MAX_TREES];
	uint32_t lag;
	weft_reduce_fn reduce;
	/* Progress per tree, for readiness: chunks finished per stream kind. */
	uint32_t up_recv_done[WEFT_TP_MAX_TREES][WEFT_TP_MAX_CHILDREN];
	uint32_t up_send_done[WEFT_TP_MAX_TREES];
	uint32_t down_recv_done[WEFT_TP_MAX_TREES];
	struct weft_tp_link link[WEFT_TP_MAX_LINKS];
	int nlinks;
};

/* Set up the pipeline for @p task. cfg->chunk_elems may grow (tags hold the
 * chunk index in 32 bits); every rank computes the same. */
void weft_tree_pipeline_init(struct weft_tree_pipeline *tp, const struct weft_task *task,
			     const struct weft_tp_config *cfg);

/* Post what can be posted, reap what finished. WEFT_SUCCESS when this rank's
 * messages are all done, WEFT_INPROGRESS, or a failed message's status. */
weft_status_t weft_tree_pipeline_progress(struct weft_tree_pipeline *tp, struct weft_task *task);

/* Tree shapes over virtual indices 0..n-1 (0 is the root); *parent is -1 at
 * the root, unused children are -1. */

/* NCCL's binary tree (patterns/tree.h weft_btree over all n): the root has
 * one child; inner nodes two. Depth ceil(log2 n). */
void weft_tp_btree(int n, int v, int *parent, int child[WEFT_TP_MAX_CHILDREN]);

/* Tree 0 and tree 1 of the double binary tree (patterns/tree.h
 * weft_dbtree): each index is an inner node in at most one of them. Tree 0
 * is rooted at 0, tree 1 at weft_dbtree_root(1, n). */
void weft_tp_dbtree0(int n, int v, int *parent, int child[WEFT_TP_MAX_CHILDREN]);
void weft_tp_dbtree1(int n, int v, int *parent, int child[WEFT_TP_MAX_CHILDREN]);

/* A chain 0 -> 1 -> ... -> n-1. */
void weft_tp_chain(int n, int v, int *parent, int child[WEFT_TP_MAX_CHILDREN]);

/* An upper bound on the depth of weft_tp_btree: ceil(log2 n). */
int weft_tp_btree_depth(int n);

typedef void (*weft_tp_shape_fn)(int n, int v, int *parent, int child[WEFT_TP_MAX_CHILDREN]);

/* This rank's place in @p shape laid over the placement ring (neighbours on
 * the ring share a host, then a leaf), rotated so that @p root_rank is the
 * tree's root: parent and children as rank numbers. elem_off and elems are
 * left to the caller. */
void weft_tp_tree_place(struct weft_tp_tree *t, const struct weft_comm *comm,
			weft_tp_shape_fn shape, int root_rank);

#endif
