/*
 * tune_flow.h — a flow-level estimate of a collective beside the
 * alpha-beta one: the bytes the algorithm puts on every fabric link
 * (algo->flow, topo/topo_flow.h) divided by the link's bandwidth, the
 * busiest link deciding, plus the alpha-beta estimate's latency terms (its
 * estimate for one element). The reduction's time (gamma) is left out: it
 * is the same kernels either way and says nothing of the fabric.
 *
 * Bandwidths come from the tuner's link classes: a host's uplink carries
 * 1 / beta of the leaf class (the NIC); a leaf's uplinks to the spines
 * together carry 1 / beta of the spine class (a NIC's share of an
 * oversubscribed tier when every host sends across it, tune_costs.c) for
 * every host of the job's widest leaf: leaves are built alike, and one
 * with fewer of the job's hosts under it (the last of a partly filled
 * tree) has as many uplinks. The alpha-beta
 * formulas charge every byte the slowest class an algorithm touches; the
 * flow estimate charges it the link it actually crosses, shared with the
 * other flows on it.
 */
#ifndef WEFT_TUNE_FLOW_H
#define WEFT_TUNE_FLOW_H

#include <stdbool.h>
#include <stddef.h>

#include "algorithms/algo.h"
#include "core/task.h"
#include "topo/topo_flow.h"

struct weft_comm;

#define WEFT_TUNE_FLOW_SIZES 4

/* 8 B, 64 KiB, 4 MiB, 256 MiB: the sizes of the flow table (issue 13). */
extern const size_t weft_tune_flow_sizes[WEFT_TUNE_FLOW_SIZES];

struct weft_flow_estimate {
	double seconds;		     /* latency + link_seconds */
	double latency;		     /* the alpha-beta estimate for one element */
	double link_seconds;	     /* the busiest link's bytes / its bandwidth */
	double link_bytes;	     /* what the busiest link carries */
	enum weft_flow_link busiest; /* WEFT_FLOW_LINK_COUNT: no fabric link is used */
	int where;		     /* its host or leaf index, -1 for none */
};

/* Bytes per second of link @p index of @p kind (a host's or a leaf's). */
double weft_tune_flow_bandwidth(const struct weft_comm *comm, const struct weft_topo_flow *f,
				enum weft_flow_link kind, int index);

/* @p algo's flow estimate for @p args into @p out, using @p f (of the
 * communicator's graph; cleared first) for the loads. False, and @p out
 * untouched, where @p algo has no flow or estimate or does not support the
 * call. O(n log n) for n ranks, O(hosts + leaves) memory in @p f. */
bool weft_tune_flow(const struct weft_comm *comm, const struct weft_algo *algo,
		    const struct weft_coll_args *args, struct weft_topo_flow *f,
		    struct weft_flow_estimate *out);

#endif
