/* hier.c — see hier.h. */
#include "algorithms/patterns/hier.h"

#include <stdlib.h>

#include "core/comm.h"

static bool is_leader(const struct weft_topo_graph *g, int r)
{
	return g->host_leader[g->host_of[r]] == r;
}

void weft_hier_layout(const struct weft_comm *comm, struct weft_hier_layout *out)
{
	const struct weft_topo_graph *g = &comm->graph;
	int n = comm->nranks, me = comm->rank;
	int host = g->host_of[me], leader = g->host_leader[host];
	int lead_pos = 0;
	for (int p = 0; p < n; p++)
		if (comm->ring[p] == leader)
			lead_pos = p;

	/* The chain: this host's ranks in ring order, starting at its leader. */
	*out = (struct weft_hier_layout){.host = host, .chain_prev = -1, .chain_next = -1};
	int prev = -1;
	bool seen_me = false;
	for (int i = 0; i < n; i++) {
		int r = comm->ring[(lead_pos + i) % n];
		if (g->host_of[r] != host)
			continue;
		if (r == me) {
			out->chain_pos = out->local_n;
			out->chain_prev = prev;
			seen_me = true;
		} else if (seen_me && out->chain_next < 0) {
			out->chain_next = r;
		}
		prev = r;
		out->local_n++;
	}

	/* The leaders' ring, in ring order. */
	int first = -1, last = -1, before = -1;
	out->leader_next = -1;
	for (int p = 0; p < n; p++) {
		int r = comm->ring[p];
		if (!is_leader(g, r))
			continue;
		if (first < 0)
			first = r;
		if (r == leader) {
			out->leader_pos = out->nleaders;
			out->leader_prev = last; /* -1 if first: fixed below */
		} else if (before == leader) {
			out->leader_next = r;
		}
		before = r;
		last = r;
		out->nleaders++;
	}
	if (out->leader_prev < 0)
		out->leader_prev = last;
	if (out->leader_next < 0)
		out->leader_next = first;
}

int weft_hier_host_at(const struct weft_comm *comm, int pos)
{
	const struct weft_topo_graph *g = &comm->graph;
	for (int p = 0, i = 0; p < comm->nranks; p++) {
		int r = comm->ring[p];
		if (is_leader(g, r) && i++ == pos)
			return g->host_of[r];
	}
	return -1;
}

int weft_hier_max_local(const struct weft_comm *comm)
{
	int m = 1;
	for (int r = 0; r < comm->nranks; r++)
		if ((int)comm->cards[r].local_count > m)
			m = (int)comm->cards[r].local_count;
	return m;
}

void weft_hier_groups(const struct weft_comm *comm, bool by_leaf, struct weft_hier_groups *out)
{
	const struct weft_topo_graph *g = &comm->graph;
	out->n = by_leaf ? g->nleaves : g->nhosts;
	out->of = by_leaf ? g->leaf_of : g->host_of;
	out->leader = by_leaf ? g->leaf_leader : g->host_leader;
}

int weft_hier_max_members(const struct weft_comm *comm, const struct weft_hier_groups *gr)
{
	int *count = calloc((size_t)gr->n, sizeof(int)), m = 1;
	if (!count)
		return comm->nranks;
	for (int r = 0; r < comm->nranks; r++)
		if (++count[gr->of[r]] > m)
			m = count[gr->of[r]];
	free(count);
	return m;
}

/* The chains: a group's members in ring order, wrapping round to start at
 * its leader (as weft_hier_layout walks them), are the edges between
 * members that follow each other in ring order, except the one into the
 * leader. */
static void walk_chains(const struct weft_comm *comm, const struct weft_hier_groups *gr, int *first,
			int *last, weft_hier_edge_fn edge, void *ctx)
{
	for (int k = 0; k < gr->n; k++)
		first[k] = last[k] = -1;
	for (int p = 0; p < comm->nranks; p++) {
		int r = comm->ring[p], k = gr->of[r];
		if (last[k] >= 0 && r != gr->leader[k])
			edge(ctx, true, last[k], r);
		if (first[k] < 0)
			first[k] = r;
		last[k] = r;
	}
	for (int k = 0; k < gr->n; k++)
		if (first[k] >= 0 && first[k] != gr->leader[k])
			edge(ctx, true, last[k], first[k]);
}

static int walk_leaders(const struct weft_comm *comm, const struct weft_hier_groups *gr,
			weft_hier_edge_fn edge, void *ctx)
{
	int first = -1, prev = -1, count = 0;
	for (int p = 0; p < comm->nranks; p++) {
		int r = comm->ring[p];
		if (gr->leader[gr->of[r]] != r)
			continue;
		if (prev >= 0)
			edge(ctx, false, prev, r);
		else
			first = r;
		prev = r;
		count++;
	}
	if (count > 1)
		edge(ctx, false, prev, first);
	return count;
}

int weft_hier_walk(const struct weft_comm *comm, const struct weft_hier_groups *gr,
		   weft_hier_edge_fn edge, void *ctx)
{
	int *first = malloc(2 * (size_t)gr->n * sizeof(int));
	if (!first)
		return -1;
	walk_chains(comm, gr, first, first + gr->n, edge, ctx);
	free(first);
	return walk_leaders(comm, gr, edge, ctx);
}

bool weft_hier_pays(const struct weft_comm *comm)
{
	return comm->graph.nhosts > 1 && weft_hier_max_local(comm) > 1;
}

bool weft_hier_supports(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	return weft_hier_pays(comm);
}
