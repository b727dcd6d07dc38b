/*
 * topo_print_model.c — weft-topo --model for people. A modelled job may
 * have 100,000 ranks, so where the job's text lists every rank, host or
 * leaf, this prints how many there are and the first few (and asks the
 * library for a brief document, WEFT_MODEL_BRIEF, with no more); the rest of the
 * document is printed as for a job (the tuner's table, transports per link
 * class), then the model's steps with their time and peak memory. The
 * JSON (--format json) has everything.
 */
#include "tools/weft-topo/topo_print.h"

#define SHOWN 8 /* items of a long list printed before "..." */

/* "N (a b c ...)": the count (@p n: the list may be cut, WEFT_MODEL_BRIEF)
 * and the first SHOWN items. */
static void text_list(const char *label, long long n, const json_t *list, const char *sep,
		      FILE *out)
{
	size_t have = json_array_size(list), i;
	fprintf(out, "  %s: %lld (", label, n);
	for (i = 0; i < have && i < SHOWN; i++)
		fprintf(out, "%s%lld", i ? sep : "",
			(long long)json_integer_value(json_array_get(list, i)));
	if (n > (long long)i)
		fprintf(out, "%s...", sep);
	fprintf(out, ")\n");
}

static void model_head(const json_t *doc, FILE *out)
{
	const json_t *m = json_object_get(doc, "model");
	fprintf(out,
		"weft-topo --model %s: %lld ranks on %lld hosts under %lld leaves, %lld spines\n",
		weft_tool_str(m, "topology_file"), weft_tool_int(doc, "nranks"),
		weft_tool_int(doc, "nhosts"), weft_tool_int(doc, "nleaves"),
		weft_tool_int(doc, "nspines"));
	fprintf(out, "  order %s, %lld ranks per host\n", weft_tool_str(m, "order"),
		weft_tool_int(m, "ranks_per_host"));
}

static void model_ring(const json_t *doc, FILE *out)
{
	const json_t *ring = json_object_get(doc, "ring");
	const json_t *plain = json_object_get(ring, "rank_order");
	fprintf(out, "\nring (placement %s):\n", weft_tool_str(ring, "placement"));
	text_list("order", weft_tool_int(doc, "nranks"), json_object_get(ring, "order"), " -> ",
		  out);
	fprintf(out, "  leaf crossings: %lld (plain rank order: %lld)\n",
		weft_tool_int(ring, "leaf_crossings"), weft_tool_int(plain, "leaf_crossings"));
	fprintf(out, "  spine crossings: %lld (plain rank order: %lld)\n",
		weft_tool_int(ring, "spine_crossings"), weft_tool_int(plain, "spine_crossings"));
}

static void model_trees(const json_t *doc, FILE *out)
{
	const json_t *trees = json_object_get(doc, "trees");
	const json_t *db = json_object_get(trees, "double_binary");
	const json_t *lr = json_object_get(trees, "leader_ring");
	fprintf(out, "\ntrees and leaders:\n");
	long long nh = weft_tool_int(doc, "nhosts"), nl = weft_tool_int(doc, "nleaves");
	text_list("host leaders", nh, json_object_get(trees, "host_leaders"), " ", out);
	text_list("leaf leaders", nl, json_object_get(trees, "leaf_leaders"), " ", out);
	text_list("host leaders' ring", nh, json_object_get(lr, "order"), " -> ", out);
	fprintf(out, "  host leaders' ring leaf crossings: %lld\n",
		weft_tool_int(lr, "leaf_crossings"));
	weft_tool_text_tree("double binary tree 0 (allreduce)", json_array_get(db, 0), out);
	weft_tool_text_tree("double binary tree 1 (allreduce)", json_array_get(db, 1), out);
	weft_tool_text_tree("binary tree (broadcast, reduce)", json_object_get(trees, "binary"),
			    out);
}

static void model_steps(const json_t *doc, FILE *out)
{
	const json_t *s;
	size_t i;
	double total = 0;
	fprintf(out, "\nmodel steps:      seconds   peak RSS (MiB, the process so far)\n");
	json_array_foreach(json_object_get(json_object_get(doc, "model"), "steps"), i, s)
	{
		double sec = json_number_value(json_object_get(s, "seconds"));
		total += sec;
		fprintf(out, "  %-12s %10.3f   %8.1f\n", weft_tool_str(s, "name"), sec,
			(double)weft_tool_int(s, "peak_rss_kib") / 1024.0);
	}
	fprintf(out, "  %-12s %10.3f\n", "library", total);
}

int weft_tool_print_model_text(const json_t *doc, FILE *out)
{
	model_head(doc, out);
	model_ring(doc, out);
	model_trees(doc, out);
	weft_tool_text_transports(doc, out);
	weft_tool_text_tail(doc, out);
	model_steps(doc, out);
	return 0;
}
