/* topo_flow.c — see topo_flow.h. */
#include "topo/topo_flow.h"

#include <stdlib.h>
#include <string.h>

int weft_topo_flow_links(const struct weft_topo_flow *f, enum weft_flow_link kind)
{
	return kind == WEFT_FLOW_HOST_UP || kind == WEFT_FLOW_HOST_DOWN ? f->g->nhosts
									: f->g->nleaves;
}

weft_status_t weft_topo_flow_init(struct weft_topo_flow *f, const struct weft_topo_graph *g)
{
	memset(f, 0, sizeof(*f));
	f->g = g;
	bool bad = false;
	for (int k = 0; k < WEFT_FLOW_LINK_COUNT; k++) {
		int n = weft_topo_flow_links(f, (enum weft_flow_link)k);
		f->bytes[k] = calloc(n > 0 ? (size_t)n : 1, sizeof(double));
		bad |= !f->bytes[k];
	}
	f->leaf_hosts = calloc(g->nleaves > 0 ? (size_t)g->nleaves : 1, sizeof(int));
	if (bad || !f->leaf_hosts) {
		weft_topo_flow_free(f);
		return WEFT_ERR_NO_MEMORY;
	}
	/* A host's leaf is its leader's (every rank of a host shares a leaf). */
	for (int h = 0; h < g->nhosts; h++) {
		int n = ++f->leaf_hosts[g->leaf_of[g->host_leader[h]]];
		f->widest_leaf = n > f->widest_leaf ? n : f->widest_leaf;
	}
	return WEFT_SUCCESS;
}

void weft_topo_flow_clear(struct weft_topo_flow *f)
{
	for (int k = 0; k < WEFT_FLOW_LINK_COUNT; k++)
		memset(f->bytes[k], 0,
		       (size_t)weft_topo_flow_links(f, (enum weft_flow_link)k) * sizeof(double));
	f->transfers = 0;
}

void weft_topo_flow_add(struct weft_topo_flow *f, int from, int to, double bytes)
{
	const struct weft_topo_graph *g = f->g;
	f->transfers++;
	int ha = g->host_of[from], hb = g->host_of[to];
	if (ha == hb)
		return;
	f->bytes[WEFT_FLOW_HOST_UP][ha] += bytes;
	f->bytes[WEFT_FLOW_HOST_DOWN][hb] += bytes;
	int la = g->leaf_of[from], lb = g->leaf_of[to];
	if (la == lb)
		return;
	f->bytes[WEFT_FLOW_LEAF_UP][la] += bytes;
	f->bytes[WEFT_FLOW_LEAF_DOWN][lb] += bytes;
}

const char *weft_topo_flow_link_name(enum weft_flow_link kind)
{
	static const char *const names[WEFT_FLOW_LINK_COUNT] = {
	    [WEFT_FLOW_HOST_UP] = "host-up",
	    [WEFT_FLOW_HOST_DOWN] = "host-down",
	    [WEFT_FLOW_LEAF_UP] = "leaf-up",
	    [WEFT_FLOW_LEAF_DOWN] = "leaf-down",
	};
	return kind >= 0 && kind < WEFT_FLOW_LINK_COUNT ? names[kind] : "none";
}

void weft_topo_flow_free(struct weft_topo_flow *f)
{
	for (int k = 0; k < WEFT_FLOW_LINK_COUNT; k++) {
		free(f->bytes[k]);
		f->bytes[k] = NULL;
	}
	free(f->leaf_hosts);
	f->leaf_hosts = NULL;
}
