/*
 * topo_flow.h — the bytes a collective puts on the fabric's links, for the
 * tuner's flow estimate (tune/tune_flow.c): per host, its uplink to its
 * leaf in each direction; per leaf, its uplinks to the spines taken
 * together, in each direction. An algorithm adds its transfers pair by
 * pair; a transfer inside a host touches no fabric link, one between hosts
 * of a leaf touches the two host uplinks, one between leaves the leaves'
 * uplinks too. Memory O(hosts + leaves), never per pair; each transfer O(1).
 * Links above the spines (a core tier) are not modelled.
 */
#ifndef WEFT_TOPO_FLOW_H
#define WEFT_TOPO_FLOW_H

#include <stdint.h>

#include "topo/topo.h"
#include "util/error.h"

enum weft_flow_link {
	WEFT_FLOW_HOST_UP = 0, /* host to its leaf: bytes the host sends to other hosts */
	WEFT_FLOW_HOST_DOWN,   /* leaf to host: bytes the host receives from other hosts */
	WEFT_FLOW_LEAF_UP,     /* leaf to spines: bytes leaving the leaf */
	WEFT_FLOW_LEAF_DOWN,   /* spines to leaf: bytes entering the leaf */
	WEFT_FLOW_LINK_COUNT
};

struct weft_topo_flow {
	const struct weft_topo_graph *g;
	double *bytes[WEFT_FLOW_LINK_COUNT]; /* [host] for HOST_*, [leaf] for LEAF_* */
	int *leaf_hosts;		     /* [leaf] hosts of the job under it */
	int widest_leaf;		     /* the most hosts of the job under one leaf */
	uint64_t transfers;		     /* added since the last clear */
};

/* Empty loads for @p g's hosts and leaves (WEFT_ERR_NO_MEMORY: @p f holds
 * nothing and may be passed to weft_topo_flow_free()). @p g must outlive @p f. */
weft_status_t weft_topo_flow_init(struct weft_topo_flow *f, const struct weft_topo_graph *g);

/* Every load back to 0. */
void weft_topo_flow_clear(struct weft_topo_flow *f);

/* @p bytes from rank @p from to rank @p to. */
void weft_topo_flow_add(struct weft_topo_flow *f, int from, int to, double bytes);

/* Hosts (HOST_*) or leaves (LEAF_*) that a link kind has one of. */
int weft_topo_flow_links(const struct weft_topo_flow *f, enum weft_flow_link kind);

/* "host-up", "host-down", "leaf-up", "leaf-down". */
const char *weft_topo_flow_link_name(enum weft_flow_link kind);

void weft_topo_flow_free(struct weft_topo_flow *f);

#endif
