/*
 * describe_topo.c — the self-description's "ranks", "hosts", "leaves" and
 * "spines": what every rank's card says and how the graph grouped them.
 *
 * ranks[] keeps the members that topo/topo_file_json.c reads back
 * (hostname, host, leaf, leaf_source, spine), so a dump is a topology file.
 * hosts[].ranks is the host's chain as the hierarchical algorithms walk it:
 * placement order, starting at the host leader.
 */
#include <stdlib.h>

#include "api/describe.h"
#include "core/comm.h"
#include "topo/topo.h"
#include "topo/topo_local.h"

static json_t *rank_entry(const struct weft_comm *comm, int r)
{
	const struct weft_card *c = &comm->cards[r];
	const struct weft_topo_graph *g = &comm->graph;
	int leaf = g->leaf_of[r];

	return json_pack(
	    "{s:i, s:o, s:i, s:o, s:i, s:i, s:o, s:i, s:o, s:i, s:o, s:o, s:o, s:s}", "rank", r,
	    "host", weft_describe_text(c->host_id), "host_index", g->host_of[r], "hostname",
	    weft_describe_text(c->hostname), "local_rank", (int)c->local_rank, "numa", c->topo.numa,
	    "nic", weft_describe_text(c->topo.nic), "nic_numa", c->topo.nic_numa, "leaf",
	    weft_describe_text(g->leaf_name[leaf]), "leaf_index", leaf, "leaf_id",
	    weft_describe_text(c->topo.leaf_id), "leaf_port", weft_describe_text(c->topo.leaf_port),
	    "spine", weft_describe_text(c->topo.spine), "leaf_source",
	    weft_topo_leaf_source_name(c->topo.leaf_source));
}

static weft_status_t describe_ranks(const struct weft_comm *comm, json_t *root)
{
	json_t *ranks = json_array();
	int bad = 0;

	for (int r = 0; r < comm->nranks && !bad; r++)
		bad |= json_array_append_new(ranks, rank_entry(comm, r));
	bad |= json_object_set_new(root, "ranks", ranks);
	return bad ? WEFT_ERR_NO_MEMORY : WEFT_SUCCESS;
}

/* Every host's ranks in placement order from its leader, as one array
 * indexed by @p start: host h's ranks are chain[start[h] .. start[h + 1]).
 * O(nranks). */
static weft_status_t host_chains(const struct weft_comm *comm, int **chain_out, int **start_out)
{
	const struct weft_topo_graph *g = &comm->graph;
	int n = comm->nranks, nh = g->nhosts;
	int *start = calloc((size_t)nh + 1, sizeof(int));
	int *fill = calloc((size_t)nh, sizeof(int));
	int *lead = calloc((size_t)nh, sizeof(int)); /* leader's place in its bucket */
	int *chain = malloc((size_t)n * sizeof(int)), *tmp = malloc((size_t)n * sizeof(int));

	if (!start || !fill || !lead || !chain || !tmp) {
		free(start);
		free(chain);
		start = chain = NULL;
	} else {
		for (int r = 0; r < n; r++)
			start[g->host_of[r] + 1]++;
		for (int h = 0; h < nh; h++)
			start[h + 1] += start[h];
		for (int p = 0; p < n; p++) { /* buckets in ring order */
			int r = comm->ring[p], h = g->host_of[r];
			if (r == g->host_leader[h])
				lead[h] = fill[h];
			tmp[start[h] + fill[h]++] = r;
		}
		for (int h = 0; h < nh; h++) { /* rotate each to start at its leader */
			int len = start[h + 1] - start[h];
			for (int i = 0; i < len; i++)
				chain[start[h] + i] = tmp[start[h] + (lead[h] + i) % len];
		}
	}
	free(fill);
	free(lead);
	free(tmp);
	*chain_out = chain;
	*start_out = start;
	return chain ? WEFT_SUCCESS : WEFT_ERR_NO_MEMORY;
}

static weft_status_t describe_hosts(const struct weft_comm *comm, json_t *root)
{
	const struct weft_topo_graph *g = &comm->graph;
	int *chain, *start;
	weft_status_t st = host_chains(comm, &chain, &start);
	if (st != WEFT_SUCCESS)
		return st;

	json_t *hosts = json_array();
	int bad = 0;
	for (int h = 0; h < g->nhosts && !bad; h++) {
		int leader = g->host_leader[h];
		const struct weft_card *c = &comm->cards[leader];
		bad |= json_array_append_new(
		    hosts,
		    json_pack("{s:i, s:o, s:o, s:i, s:i, s:o}", "index", h, "hostname",
			      weft_describe_text(c->hostname), "host",
			      weft_describe_text(c->host_id), "leader", leader, "leaf",
			      g->leaf_of[leader], "ranks",
			      weft_describe_ints(chain + start[h], start[h + 1] - start[h])));
	}
	bad |= json_object_set_new(root, "hosts", hosts);
	free(chain);
	free(start);
	return bad ? WEFT_ERR_NO_MEMORY : WEFT_SUCCESS;
}

/* leaves[l]: its hosts and ranks are filled in afterwards, in one pass over
 * each, so the whole is O(nranks). */
static json_t *leaf_entry(const struct weft_topo_graph *g, int l)
{
	int s = g->leaf_spine[l];
	return json_pack("{s:i, s:o, s:s, s:o, s:i, s:i, s:[], s:[]}", "index", l, "name",
			 weft_describe_text(g->leaf_name[l]), "source",
			 weft_topo_leaf_source_name(g->leaf_source[l]), "spine",
			 weft_describe_text(s >= 0 ? g->spine_name[s] : ""), "spine_index", s,
			 "leader", g->leaf_leader[l], "hosts", "ranks");
}

static weft_status_t describe_leaves(const struct weft_comm *comm, json_t *root)
{
	const struct weft_topo_graph *g = &comm->graph;
	json_t *leaves = json_array();
	int bad = 0;

	for (int l = 0; l < g->nleaves && !bad; l++)
		bad |= json_array_append_new(leaves, leaf_entry(g, l));
	for (int h = 0; h < g->nhosts && !bad; h++) {
		json_t *leaf = json_array_get(leaves, (size_t)g->leaf_of[g->host_leader[h]]);
		bad |= json_array_append_new(json_object_get(leaf, "hosts"), json_integer(h));
	}
	for (int r = 0; r < comm->nranks && !bad; r++) {
		json_t *leaf = json_array_get(leaves, (size_t)g->leaf_of[r]);
		bad |= json_array_append_new(json_object_get(leaf, "ranks"), json_integer(r));
	}
	bad |= json_object_set_new(root, "leaves", leaves);
	return bad ? WEFT_ERR_NO_MEMORY : WEFT_SUCCESS;
}

static weft_status_t describe_spines(const struct weft_comm *comm, json_t *root)
{
	const struct weft_topo_graph *g = &comm->graph;
	json_t *spines = json_array();
	int bad = 0;

	for (int s = 0; s < g->nspines && !bad; s++)
		bad |= json_array_append_new(
		    spines, json_pack("{s:i, s:o, s:[]}", "index", s, "name",
				      weft_describe_text(g->spine_name[s]), "leaves"));
	for (int l = 0; l < g->nleaves && !bad; l++) {
		if (g->leaf_spine[l] < 0)
			continue;
		json_t *spine = json_array_get(spines, (size_t)g->leaf_spine[l]);
		bad |= json_array_append_new(json_object_get(spine, "leaves"), json_integer(l));
	}
	bad |= json_object_set_new(root, "spines", spines);
	return bad ? WEFT_ERR_NO_MEMORY : WEFT_SUCCESS;
}

weft_status_t weft_describe_topo(const struct weft_comm *comm, json_t *root)
{
	const struct weft_topo_graph *g = &comm->graph;
	int bad = json_object_set_new(root, "nranks", json_integer(comm->nranks));
	bad |= json_object_set_new(root, "nhosts", json_integer(g->nhosts));
	bad |= json_object_set_new(root, "nleaves", json_integer(g->nleaves));
	bad |= json_object_set_new(root, "nspines", json_integer(g->nspines));
	weft_status_t st = bad ? WEFT_ERR_NO_MEMORY : WEFT_SUCCESS;
	if (st == WEFT_SUCCESS)
		st = describe_ranks(comm, root);
	if (st == WEFT_SUCCESS)
		st = describe_hosts(comm, root);
	if (st == WEFT_SUCCESS)
		st = describe_leaves(comm, root);
	if (st == WEFT_SUCCESS)
		st = describe_spines(comm, root);
	return st;
}
