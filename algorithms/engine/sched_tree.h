/*
 * sched_tree.h — the schedule under the tree algorithms (double binary tree
 * AllReduce, tree/chain Broadcast, tree Reduce), on the engine.
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
 * in tree 1). So every (peer, direction) is a link, one engine queue, onto
 * which the link's streams are merged in a fixed order that both ends
 * compute alike: each message has a key, up chunk j of tree t has key
 * 4j + 2t, down chunk j has key 4(j + lag) + 2t + 1, and a link posts its
 * messages strictly by increasing key. The lag lets the up stream of one
 * tree run ahead of the down stream of the other on a shared link. No
 * deadlock: a message only ever waits for messages of a smaller key, or of
 * the same key further along its own tree (acyclic), so by induction on
 * the key every message is posted and completes. The key is also the
 * message's step in its tag.
 *
 * Reductions are applied in a fixed order (own data, then child 0, then
 * child 1: the receive from child 1 is posted only once child 0's chunk has
 * arrived), so results are the same bits on every run.
 */
#ifndef WEFT_SCHED_TREE_H
#define WEFT_SCHED_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include "algorithms/engine/engine.h"
#include "algorithms/patterns/shape.h"

#define WEFT_TREE_MAX_TREES 2

/* One tree as this rank sees it, and the part of the vector it carries. */
struct weft_tree_part {
	struct weft_tree_node node;
	size_t elem_off, elems;
};

struct weft_tree_config {
	struct weft_tree_part tree[WEFT_TREE_MAX_TREES];
	int ntrees;
	bool up, down; /* phases: reduce toward the root, then/or spread from it */
	/* Up phase, non-root ranks: where partial sums accumulate. NULL: in
	 * recvbuf (allreduce). Otherwise slots of one chunk each, reused
	 * round-robin (reduce, whose non-root recvbuf may be NULL); one tree only. */
	char *staging;
	uint32_t nslots;
};

struct weft_tree_stream {
	uint8_t kind; /* enum in sched_tree.c */
	uint8_t tree;
	uint8_t child; /* index among the tree's children (up recv, down send) */
	uint32_t posted, done;
};

/* A (peer, direction) with its streams; its engine queue has the same index. */
struct weft_tree_link {
	uint8_t nstreams;
	struct weft_tree_stream s[WEFT_TREE_MAX_TREES];
	uint8_t slot_stream[WEFT_ENGINE_WINDOW]; /* stream of item k, at k % window */
};

struct weft_tree_sched {
	struct weft_tree_config cfg;
	size_t chunk_elems;
	uint32_t nchunks[WEFT_TREE_MAX_TREES];
	uint32_t lag;
	weft_reduce_fn reduce;
	/* Progress per tree, for readiness: chunks finished per stream kind. */
	uint32_t up_recv_done[WEFT_TREE_MAX_TREES][WEFT_TREE_MAX_CHILDREN];
	uint32_t up_send_done[WEFT_TREE_MAX_TREES];
	uint32_t down_recv_done[WEFT_TREE_MAX_TREES];
	struct weft_tree_link link[WEFT_ENGINE_MAX_QUEUES];
};

/* The state of every tree algorithm, at the start of task->priv. */
struct weft_tree_task {
	struct weft_engine eng;
	struct weft_tree_sched sched;
};

/* Lay out the links of @p cfg for @p task and start the engine on them.
 * Chunks are the communicator's, grown if the keys would not fit the
 * 32-bit step of the tag; every rank computes the same. */
void weft_tree_sched_start(struct weft_task *task, const struct weft_tree_config *cfg);

#endif
