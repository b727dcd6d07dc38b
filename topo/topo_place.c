/*
 * topo_place.c — placement: the ring order the ring algorithms follow.
 *
 * The ring is sorted by (spine, leaf, host, NUMA node, rank), leaves of
 * unknown spine after every known spine. Spines, leaves and hosts are
 * numbered by their first rank (topo_graph.c), so a host's ranks sit
 * together, a leaf's hosts sit together, a spine's leaves sit together. The
 * ring then leaves a leaf exactly once per leaf when there are two or more
 * leaves, and crosses between spines exactly once per spine when there are
 * two or more (the fewest a ring through every leaf, every spine, can
 * manage), and never with one. With no spine known the key is the plain
 * (leaf, host, NUMA node, rank) it was before spines. Every rank sorts the
 * same graph, built from the same cards, with a total order, so every rank
 * gets the same ring.
 *
 * Inside a host, ranks go by NUMA node so that a ring step between two ranks
 * of the same node stays on that node; ranks of unknown NUMA node go last.
 */
#define _GNU_SOURCE /* qsort_r */
#include <limits.h>
#include <stdlib.h>

#include "topo/topo.h"

static int numa_key(const struct weft_topo_graph *g, int r)
{
	return g->numa_of[r] >= 0 ? g->numa_of[r] : INT_MAX;
}

/* Unknown spines sort after every known one. */
static int spine_key(const struct weft_topo_graph *g, int r)
{
	int s = g->leaf_spine[g->leaf_of[r]];
	return s >= 0 ? s : INT_MAX;
}

static int cmp_int(int a, int b)
{
	return (a > b) - (a < b);
}

static int ring_cmp(const void *pa, const void *pb, void *arg)
{
	const struct weft_topo_graph *g = arg;
	int a = *(const int *)pa, b = *(const int *)pb;
	int c;

	if ((c = cmp_int(spine_key(g, a), spine_key(g, b))))
		return c;
	if ((c = cmp_int(g->leaf_of[a], g->leaf_of[b])))
		return c;
	if ((c = cmp_int(g->host_of[a], g->host_of[b])))
		return c;
	if ((c = cmp_int(numa_key(g, a), numa_key(g, b))))
		return c;
	return cmp_int(a, b);
}

void weft_topo_ring_order(const struct weft_topo_graph *g, bool by_rank, int *order)
{
	for (int r = 0; r < g->nranks; r++)
		order[r] = r;
	if (by_rank)
		return;
	/* qsort_r needs no memory of ours, so this cannot fail. */
	qsort_r(order, (size_t)g->nranks, sizeof(*order), ring_cmp, (void *)g);
}

int weft_topo_ring_crossings(const struct weft_topo_graph *g, const int *order)
{
	int n = g->nranks, crossings = 0;

	for (int i = 0; i < n; i++) {
		int next = order[(i + 1) % n];
		if (g->leaf_of[order[i]] != g->leaf_of[next])
			crossings++;
	}
	return crossings;
}

int weft_topo_ring_spine_crossings(const struct weft_topo_graph *g, const int *order)
{
	int n = g->nranks, crossings = 0;

	for (int i = 0; i < n; i++) {
		int sa = g->leaf_spine[g->leaf_of[order[i]]];
		int sb = g->leaf_spine[g->leaf_of[order[(i + 1) % n]]];
		/* two leaves of unknown spine: nothing known, nothing counted */
		if (sa != sb)
			crossings++;
	}
	return crossings;
}
