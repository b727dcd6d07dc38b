/* hier.c — see hier.h. */
#include "algorithms/patterns/hier.h"

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

bool weft_hier_pays(const struct weft_comm *comm)
{
	return comm->graph.nhosts > 1 && weft_hier_max_local(comm) > 1;
}

bool weft_hier_supports(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	return weft_hier_pays(comm);
}
