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

/* A hierarchy has something to gain: several hosts, one of them with
 * several ranks. (It runs correctly either way when forced.) */
bool weft_hier_pays(const struct weft_comm *comm);

struct weft_coll_args;

/* weft_hier_pays as an algorithm's supports test (algorithms/algo.h). */
bool weft_hier_supports(const struct weft_comm *comm, const struct weft_coll_args *args);

#endif
