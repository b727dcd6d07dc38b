/*
 * hier.h — the layout under the hierarchical algorithms, no I/O.
 *
 * Every rank's host, its place in the host's chain (the host's ranks in
 * placement-ring order, starting at the host leader, which heads it), and
 * the host leaders' ring (leaders in placement-ring order, which visits the
 * hosts of a leaf together, so the ring crosses the spine once per leaf).
 */
#ifndef WEFT_PATTERN_HIER_H
#define WEFT_PATTERN_HIER_H

#include <stdbool.h>

struct weft_comm;

struct weft_hier_layout {
	int host;		      /* this rank's host index */
	int local_n;		      /* ranks on this host */
	int chain_pos;		      /* 0 for the host leader */
	int chain_prev;		      /* rank at chain_pos - 1, -1 for the leader */
	int chain_next;		      /* rank at chain_pos + 1, -1 for the last */
	int nleaders;		      /* hosts */
	int leader_pos;		      /* this host's place in the leaders' ring */
	int leader_prev, leader_next; /* neighbouring leaders' ranks (self if one host) */
};

/* This rank's layout, from comm->graph and comm->ring (O(nranks)). */
void weft_hier_layout(const struct weft_comm *comm, struct weft_hier_layout *out);

/* Host of the leader at @p pos of the leaders' ring (O(nranks)). */
int weft_hier_host_at(const struct weft_comm *comm, int pos);

/* Ranks on the most populated host. */
int weft_hier_max_local(const struct weft_comm *comm);

/*
 * The groups a hierarchy reduces in: by host (what allreduce_hier and
 * allgather_hier run) or by leaf (the hier-leaf estimate only: the runtime
 * has no leaf level). A group's chain is its ranks in placement-ring order
 * from its leader, its lowest rank; the leaders' ring is the leaders in
 * placement-ring order.
 */
struct weft_hier_groups {
	int n;		   /* groups */
	const int *of;	   /* [rank] group */
	const int *leader; /* [group] its lowest rank */
};

void weft_hier_groups(const struct weft_comm *comm, bool by_leaf, struct weft_hier_groups *out);

/* Ranks in the most populated group (O(nranks); nranks, the worst case,
 * if the counts cannot be allocated). */
int weft_hier_max_members(const struct weft_comm *comm, const struct weft_hier_groups *gr);

/* Called for each edge of the chains (@p chain: @p from is the rank
 * nearer the leader, @p to the next one down the chain) and of the
 * leaders' ring (@p from sends to @p to). */
typedef void (*weft_hier_edge_fn)(void *ctx, bool chain, int from, int to);

/* Every chain edge (nranks - groups of them) and every edge of the
 * leaders' ring (none for one leader), each once, in O(nranks) time and
 * O(groups) memory. Returns the number of leaders, -1 for lack of memory. */
int weft_hier_walk(const struct weft_comm *comm, const struct weft_hier_groups *gr,
		   weft_hier_edge_fn edge, void *ctx);

/* A hierarchy has something to gain: several hosts, one of them with
 * several ranks. (It runs correctly either way when forced.) */
bool weft_hier_pays(const struct weft_comm *comm);

struct weft_coll_args;

/* weft_hier_pays as an algorithm's supports test (algorithms/algo.h). */
bool weft_hier_supports(const struct weft_comm *comm, const struct weft_coll_args *args);

#endif
