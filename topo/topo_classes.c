/*
 * topo_classes.c — how many pairs of ranks each link class joins, from the
 * graph's groups rather than from every pair, so that a job of 100,000
 * ranks costs some 100,000 steps, not 10^10.
 *
 * A pair's class (weft_topo_link) depends only on whether the two ranks
 * share a host, a known NUMA node, a leaf; a group of k ranks holds k(k-1)
 * ordered pairs, so counting ranks per group answers it. NUMA groups are
 * found by sorting ranks by (host, node): node numbers come off the wire
 * and may be anything, so no table is indexed by them.
 */
#define _GNU_SOURCE /* qsort_r */
#include <stdlib.h>

#include "topo/topo.h"

static int host_numa_cmp(const void *pa, const void *pb, void *arg)
{
	const struct weft_topo_graph *g = arg;
	int a = *(const int *)pa, b = *(const int *)pb;
	if (g->host_of[a] != g->host_of[b])
		return (g->host_of[a] > g->host_of[b]) - (g->host_of[a] < g->host_of[b]);
	return (g->numa_of[a] > g->numa_of[b]) - (g->numa_of[a] < g->numa_of[b]);
}

/* Ordered pairs of ranks on one host and one known NUMA node. */
static weft_status_t numa_pairs(const struct weft_topo_graph *g, uint64_t *pairs)
{
	int *idx = malloc((size_t)g->nranks * sizeof(int)), n = 0;
	if (!idx)
		return WEFT_ERR_NO_MEMORY;
	for (int r = 0; r < g->nranks; r++)
		if (g->numa_of[r] >= 0)
			idx[n++] = r;
	qsort_r(idx, (size_t)n, sizeof(int), host_numa_cmp, (void *)g);
	*pairs = 0;
	for (int i = 0, run = 0; i < n; i++) {
		bool same = i > 0 && host_numa_cmp(&idx[i - 1], &idx[i], (void *)g) == 0;
		run = same ? run + 1 : 0; /* ranks before this one in its group */
		*pairs += 2 * (uint64_t)run;
	}
	free(idx);
	return WEFT_SUCCESS;
}

/* Sum over groups of k(k-1), the groups given by @p group_of (@p ngroups). */
static weft_status_t group_pairs(const struct weft_topo_graph *g, const int *group_of, int ngroups,
				 uint64_t *pairs)
{
	uint64_t *count = calloc((size_t)ngroups, sizeof(*count));
	if (!count)
		return WEFT_ERR_NO_MEMORY;
	*pairs = 0;
	for (int r = 0; r < g->nranks; r++)
		*pairs += 2 * count[group_of[r]]++;
	free(count);
	return WEFT_SUCCESS;
}

weft_status_t weft_topo_class_pairs(const struct weft_topo_graph *g,
				    uint64_t pairs[WEFT_LINK_CLASS_COUNT])
{
	uint64_t n = (uint64_t)g->nranks, numa = 0, host = 0, leaf = 0;
	weft_status_t st = numa_pairs(g, &numa);
	if (st == WEFT_SUCCESS)
		st = group_pairs(g, g->host_of, g->nhosts, &host);
	if (st == WEFT_SUCCESS)
		st = group_pairs(g, g->leaf_of, g->nleaves, &leaf);
	for (int c = 0; c < WEFT_LINK_CLASS_COUNT; c++)
		pairs[c] = 0;
	if (st != WEFT_SUCCESS)
		return st;
	pairs[WEFT_LINK_SELF] = n;
	pairs[WEFT_LINK_NUMA] = numa;
	pairs[WEFT_LINK_HOST] = host - numa;
	pairs[WEFT_LINK_LEAF] = leaf - host;
	pairs[WEFT_LINK_SPINE] = n * (n - 1) - leaf;
	return WEFT_SUCCESS;
}
