/*
 * describe_flow.c — the self-description's "tuner"."flow": AllReduce at
 * 8 B, 64 KiB, 4 MiB and 256 MiB, every algorithm with a flow estimate
 * (tune/tune_flow.h) by alpha-beta and by flow, each model's choice among
 * the algorithms the tuner can run and whether they agree, and beside them
 * the estimate-only variants (hier-leaf), which no choice includes.
 */
#include <math.h>

#include "algorithms/algo.h"
#include "api/describe.h"
#include "core/comm.h"
#include "tune/tune.h"
#include "tune/tune_flow.h"
#include "tune/tune_table.h"

struct flow_row {
	json_t *ab, *flow, *latency, *busiest;
	const struct weft_algo *ab_best, *flow_best;
	double ab_min, flow_min;
};

static json_t *us_or_null(bool have, double seconds)
{
	return have ? json_real(seconds * 1e6) : json_null();
}

static json_t *link_of(const struct weft_flow_estimate *e)
{
	if (e->busiest == WEFT_FLOW_LINK_COUNT)
		return json_null();
	return json_pack("{s:s, s:i, s:f}", "link", weft_topo_flow_link_name(e->busiest), "index",
			 e->where, "bytes", e->link_bytes);
}

/* One algorithm's figures in @p row; @p choosable: it may be a choice. */
static int add_algo(const struct weft_comm *comm, const struct weft_algo *a,
		    const struct weft_coll_args *args, struct weft_topo_flow *f, bool choosable,
		    struct flow_row *row)
{
	struct weft_flow_estimate e;
	double ab = weft_tune_table_estimate(comm, a, args);
	bool have = ab >= 0 && weft_tune_flow(comm, a, args, f, &e);
	if (have && choosable && ab < row->ab_min) {
		row->ab_min = ab;
		row->ab_best = a;
	}
	if (have && choosable && e.seconds < row->flow_min) {
		row->flow_min = e.seconds;
		row->flow_best = a;
	}
	return json_object_set_new(row->ab, a->name, us_or_null(have, ab)) |
	       json_object_set_new(row->flow, a->name, us_or_null(have, have ? e.seconds : 0)) |
	       json_object_set_new(row->latency, a->name, us_or_null(have, have ? e.latency : 0)) |
	       json_object_set_new(row->busiest, a->name, have ? link_of(&e) : json_null());
}

static const char *name_of(const struct weft_algo *a)
{
	return a ? a->name : "-";
}

static json_t *size_row(const struct weft_comm *comm, size_t bytes, struct weft_topo_flow *f)
{
	struct weft_coll_args args;
	weft_tune_table_args(comm, WEFT_COLL_ALLREDUCE, bytes, &args);
	struct flow_row row = {json_object(), json_object(), json_object(), json_object(),
			       NULL,	      NULL,	     INFINITY,	    INFINITY};
	int bad = !row.ab || !row.flow || !row.latency || !row.busiest;
	for (const struct weft_algo *const *a = weft_algos_for(WEFT_COLL_ALLREDUCE); *a && !bad;
	     a++)
		if ((*a)->flow)
			bad |= add_algo(comm, *a, &args, f, true, &row);
	for (const struct weft_algo *const *a = weft_algo_variants_for(WEFT_COLL_ALLREDUCE);
	     *a && !bad; a++)
		bad |= add_algo(comm, *a, &args, f, false, &row);
	json_t *out =
	    bad ? NULL
		: json_pack("{s:I, s:I, s:s, s:s, s:b, s:O, s:O, s:O, s:O}", "bytes",
			    (json_int_t)bytes, "count", (json_int_t)args.count, "ab_choice",
			    name_of(row.ab_best), "flow_choice", name_of(row.flow_best), "agree",
			    row.ab_best == row.flow_best, "ab_us", row.ab, "flow_us", row.flow,
			    "latency_us", row.latency, "busiest", row.busiest);
	json_decref(row.ab);
	json_decref(row.flow);
	json_decref(row.latency);
	json_decref(row.busiest);
	return out;
}

static json_t *algo_lists(json_t **variants)
{
	json_t *names = json_array();
	int bad = !names;
	*variants = json_array();
	bad |= !*variants;
	for (const struct weft_algo *const *a = weft_algos_for(WEFT_COLL_ALLREDUCE); *a && !bad;
	     a++)
		if ((*a)->flow)
			bad |= json_array_append_new(names, json_string((*a)->name));
	for (const struct weft_algo *const *a = weft_algo_variants_for(WEFT_COLL_ALLREDUCE);
	     *a && !bad; a++)
		bad |=
		    json_array_append_new(*variants, json_pack("{s:s, s:s}", "name", (*a)->name,
							       "description", (*a)->description));
	if (!bad)
		return names;
	json_decref(names);
	json_decref(*variants);
	*variants = NULL;
	return NULL;
}

static json_t *bandwidths(const struct weft_comm *comm, const struct weft_topo_flow *f)
{
	const struct weft_cost *cls = comm->tuner->links.cls;
	return json_pack("{s:f, s:f, s:f}", "host_uplink", 1.0 / cls[WEFT_LINK_LEAF].beta,
			 "leaf_uplinks", weft_tune_flow_bandwidth(comm, f, WEFT_FLOW_LEAF_UP, 0),
			 "leaf_uplink_per_host", 1.0 / cls[WEFT_LINK_SPINE].beta);
}

weft_status_t weft_describe_flow(const struct weft_comm *comm, json_t *tuner)
{
	struct weft_topo_flow f;
	if (weft_topo_flow_init(&f, &comm->graph) != WEFT_SUCCESS)
		return WEFT_ERR_NO_MEMORY;
	json_t *variants, *names = algo_lists(&variants), *rows = json_array();
	int bad = !names || !rows;
	for (int i = 0; i < WEFT_TUNE_FLOW_SIZES && !bad; i++)
		bad |= json_array_append_new(rows, size_row(comm, weft_tune_flow_sizes[i], &f));
	bad |= json_object_set_new(tuner, "flow",
				   json_pack("{s:s, s:o, s:o, s:o, s:o}", "collective", "allreduce",
					     "algorithms", names, "estimate_only", variants,
					     "bandwidth_Bps", bandwidths(comm, &f), "sizes", rows));
	weft_topo_flow_free(&f);
	return bad ? WEFT_ERR_NO_MEMORY : WEFT_SUCCESS;
}
