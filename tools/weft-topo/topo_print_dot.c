/*
 * topo_print_dot.c — a job as a Graphviz picture (spines around leaves
 * around hosts around ranks, ring edges green inside a leaf and red across
 * it) and as an Open MPI rankfile that gives consecutive rank numbers
 * consecutive ring positions: rank i goes where ring position i is.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "tools/weft-topo/topo_print.h"

/* @p s inside a DOT double-quoted string: quotes and backslashes escaped,
 * so a host or switch name cannot end the label early. */
static void dot_str(const char *s, FILE *out)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', out);
		fputc(*s == '\n' ? ' ' : *s, out);
	}
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* Host h's ranks in rank order, one node each. */
static void dot_host_ranks(const json_t *doc, const json_t *host, int ind, FILE *out)
{
	const json_t *ranks = json_object_get(doc, "ranks");
	const json_t *list = json_object_get(host, "ranks");
	size_t n = json_array_size(list);
	int *r = malloc((n ? n : 1) * sizeof(int));
	if (!r)
		return;
	for (size_t i = 0; i < n; i++)
		r[i] = (int)json_integer_value(json_array_get(list, i));
	qsort(r, n, sizeof(int), cmp_int);
	for (size_t i = 0; i < n; i++) {
		fprintf(out, "%*sr%d [label=\"rank %d\\n", ind, "", r[i], r[i]);
		dot_str(weft_tool_str(json_array_get(ranks, (size_t)r[i]), "nic"), out);
		fprintf(out, "\"];\n");
	}
	free(r);
}

/* Leaf l's cluster with its hosts and ranks, indented by @p ind spaces
 * (deeper inside a spine's cluster). */
static void dot_leaf(const json_t *doc, const json_t *leaf, int ind, FILE *out)
{
	const json_t *hosts = json_object_get(doc, "hosts"), *h;
	size_t i;
	fprintf(out, "%*ssubgraph cluster_leaf%lld {\n%*slabel=\"leaf ", ind, "",
		weft_tool_int(leaf, "index"), ind + 2, "");
	dot_str(weft_tool_str(leaf, "name"), out);
	fprintf(out, " (%s)\";\n%*sstyle=filled; fillcolor=\"#eef3fb\";\n",
		weft_tool_str(leaf, "source"), ind + 2, "");
	json_array_foreach(json_object_get(leaf, "hosts"), i, h)
	{
		json_int_t hi = json_integer_value(h);
		const json_t *host = json_array_get(hosts, (size_t)hi);
		fprintf(out, "%*ssubgraph cluster_host%lld {\n%*slabel=\"host %lld: ", ind + 2, "",
			(long long)hi, ind + 4, "", (long long)hi);
		dot_str(weft_tool_str(host, "hostname"), out);
		fprintf(out, "\";\n%*sstyle=filled; fillcolor=\"#ffffff\";\n", ind + 4, "");
		dot_host_ranks(doc, host, ind + 4, out);
		fprintf(out, "%*s}\n", ind + 2, "");
	}
	fprintf(out, "%*s}\n", ind, "");
}

static void dot_clusters(const json_t *doc, FILE *out)
{
	const json_t *leaves = json_object_get(doc, "leaves"), *s, *l;
	size_t i, k;
	json_array_foreach(json_object_get(doc, "spines"), i, s)
	{
		fprintf(out, "  subgraph cluster_spine%zu {\n    label=\"spine ", i);
		dot_str(weft_tool_str(s, "name"), out);
		fprintf(out, "\";\n    style=filled; fillcolor=\"#f6f0e4\";\n");
		json_array_foreach(json_object_get(s, "leaves"), k, l)
		    dot_leaf(doc, json_array_get(leaves, (size_t)json_integer_value(l)), 4, out);
		fprintf(out, "  }\n");
	}
	json_array_foreach(leaves, i, l) if (weft_tool_int(l, "spine_index") < 0)
	    dot_leaf(doc, l, 2, out);
}

int weft_tool_print_job_dot(const json_t *doc, FILE *out)
{
	const json_t *ranks = json_object_get(doc, "ranks");
	const json_t *ring = json_object_get(doc, "ring"), *order = json_object_get(ring, "order");
	size_t n = json_array_size(order);
	fprintf(out, "digraph weft {\n  compound=true;\n  node [shape=box, style=rounded];\n");
	dot_clusters(doc, out);
	for (size_t p = 0; p < n && n > 1; p++) {
		json_int_t a = json_integer_value(json_array_get(order, p));
		json_int_t b = json_integer_value(json_array_get(order, (p + 1) % n));
		bool cross = weft_tool_int(json_array_get(ranks, (size_t)a), "leaf_index") !=
			     weft_tool_int(json_array_get(ranks, (size_t)b), "leaf_index");
		fprintf(out, "  r%lld -> r%lld [color=\"%s\", penwidth=%d%s];\n", (long long)a,
			(long long)b, cross ? "red" : "darkgreen", cross ? 3 : 2,
			cross ? ", label=\"spine\"" : "");
	}
	fprintf(out,
		"  label=\"ring order, %lld leaf crossing(s), %lld spine crossing(s); red edges "
		"cross the spine\";\n}\n",
		weft_tool_int(ring, "leaf_crossings"), weft_tool_int(ring, "spine_crossings"));
	return 0;
}

int weft_tool_print_job_rankfile(const json_t *doc, FILE *out)
{
	const json_t *ranks = json_object_get(doc, "ranks"), *r;
	size_t p;
	fprintf(out, "# Open MPI rankfile from weft-topo: consecutive ranks share a host, "
		     "then a leaf\n");
	json_array_foreach(json_object_get(json_object_get(doc, "ring"), "order"), p, r)
	{
		const json_t *rank = json_array_get(ranks, (size_t)json_integer_value(r));
		fprintf(out, "rank %zu=%s slot=%lld\n", p, weft_tool_str(rank, "hostname"),
			weft_tool_int(rank, "local_rank"));
	}
	return 0;
}
