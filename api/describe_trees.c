/*
 * describe_trees.c — the self-description's "ring" and "trees": the
 * placement ring and the trees and leaders the algorithms lay over it.
 *
 * The trees are computed here from the graph and the ring with the rules
 * the algorithms follow, not taken from the algorithms' engines:
 *  - the double binary tree of the tree AllReduce: patterns/tree.h
 *    weft_dbtree over ring positions, both trees rooted at ring position 0
 *    (tree 1 at weft_dbtree_root(1, n) of the same numbering);
 *  - the binary tree of the tree Broadcast and Reduce: weft_btree over ring
 *    positions rotated so the call's root is position 0 (shown for root 0;
 *    another root rotates it, with the same depth);
 *  - the hierarchical algorithms' leaders: each host's lowest rank leads
 *    it, each leaf's lowest rank leads the leaf, and the host leaders form
 *    a ring in placement order.
 * A tree's edges are counted as the ring's are: those that join different
 * leaves, and those that join leaves of different spines.
 */
#include <stdlib.h>

#include "algorithms/patterns/tree.h"
#include "api/describe.h"
#include "core/comm.h"
#include "topo/topo.h"

weft_status_t weft_describe_ring(const struct weft_comm *comm, json_t *root)
{
	const struct weft_topo_graph *g = &comm->graph;
	int n = comm->nranks;
	int *identity = malloc((size_t)n * sizeof(int));
	if (!identity)
		return WEFT_ERR_NO_MEMORY;
	for (int r = 0; r < n; r++)
		identity[r] = r;
	json_t *ring = json_pack("{s:s, s:o, s:i, s:i, s:{s:i, s:i}}", "placement",
				 comm->placement_by_rank ? "rank" : "topo", "order",
				 weft_describe_ints(comm->ring, n), "leaf_crossings",
				 weft_topo_ring_crossings(g, comm->ring), "spine_crossings",
				 weft_topo_ring_spine_crossings(g, comm->ring), "rank_order",
				 "leaf_crossings", weft_topo_ring_crossings(g, identity),
				 "spine_crossings", weft_topo_ring_spine_crossings(g, identity));
	free(identity);
	return json_object_set_new(root, "ring", ring) ? WEFT_ERR_NO_MEMORY : WEFT_SUCCESS;
}

/* A tree over ring positions: index v sits at ring position (v + rot) % n. */
struct tree_shape {
	int tree; /* double binary tree: 0 or 1; -1: the binary tree */
	int rot;
};

static int shape_parent(const struct tree_shape *s, int v, int n)
{
	int parent, child[WEFT_TREE_MAX_CHILDREN];
	if (n == 1)
		return -1;
	if (s->tree < 0)
		weft_btree(v, n, &parent, child);
	else
		weft_dbtree(v, s->tree, n, &parent, child);
	return parent;
}

static int rank_at(const struct weft_comm *comm, const struct tree_shape *s, int v)
{
	return comm->ring[(v + s->rot) % comm->nranks];
}

/* Depth (edges on the longest path from the root) and crossings of one
 * tree. Walking up from every index is O(n log n): the shapes are balanced. */
static json_t *tree_entry(const struct weft_comm *comm, const struct tree_shape *s, int root_v)
{
	const struct weft_topo_graph *g = &comm->graph;
	int n = comm->nranks, depth = 0, leaf_x = 0, spine_x = 0;

	for (int v = 0; v < n; v++) {
		int p = shape_parent(s, v, n), d = 0;
		if (p >= 0) {
			int la = g->leaf_of[rank_at(comm, s, v)],
			    lb = g->leaf_of[rank_at(comm, s, p)];
			leaf_x += la != lb;
			spine_x += g->leaf_spine[la] != g->leaf_spine[lb];
		}
		for (int u = v; (u = shape_parent(s, u, n)) >= 0 && d <= n;)
			d++;
		if (d > depth)
			depth = d;
	}
	return json_pack("{s:i, s:i, s:i, s:i}", "root", rank_at(comm, s, root_v), "depth", depth,
			 "leaf_crossings", leaf_x, "spine_crossings", spine_x);
}

static int ring_pos_of(const struct weft_comm *comm, int rank)
{
	for (int p = 0; p < comm->nranks; p++)
		if (comm->ring[p] == rank)
			return p;
	return 0;
}

/* The host leaders in placement order, and how often their ring crosses
 * between leaves. */
static json_t *leader_ring(const struct weft_comm *comm)
{
	const struct weft_topo_graph *g = &comm->graph;
	json_t *order = json_array();
	int bad = 0, first = -1, prev = -1, crossings = 0;

	for (int p = 0; p < comm->nranks && !bad; p++) {
		int r = comm->ring[p];
		if (g->host_leader[g->host_of[r]] != r)
			continue;
		bad |= json_array_append_new(order, json_integer(r));
		crossings += prev >= 0 && g->leaf_of[prev] != g->leaf_of[r];
		if (first < 0)
			first = r;
		prev = r;
	}
	crossings += prev != first && g->leaf_of[prev] != g->leaf_of[first];
	if (bad) {
		json_decref(order);
		return NULL;
	}
	return json_pack("{s:o, s:i}", "order", order, "leaf_crossings", crossings);
}

weft_status_t weft_describe_trees(const struct weft_comm *comm, json_t *root)
{
	const struct weft_topo_graph *g = &comm->graph;
	int n = comm->nranks;
	struct tree_shape db0 = {0, 0}, db1 = {1, 0}, bin = {-1, ring_pos_of(comm, 0)};

	json_t *trees = json_pack(
	    "{s:[o, o], s:o, s:o, s:o, s:o}", "double_binary", tree_entry(comm, &db0, 0),
	    tree_entry(comm, &db1, weft_dbtree_root(1, n)), "binary", tree_entry(comm, &bin, 0),
	    "host_leaders", weft_describe_ints(g->host_leader, g->nhosts), "leaf_leaders",
	    weft_describe_ints(g->leaf_leader, g->nleaves), "leader_ring", leader_ring(comm));
	return json_object_set_new(root, "trees", trees) ? WEFT_ERR_NO_MEMORY : WEFT_SUCCESS;
}
