/* topo_dump.c — what a communicator decided, for people (text), tools
 * (JSON, which WEFT_TOPO_FILE can read back) and pictures (Graphviz DOT). */
#include "topo/topo_dump.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"
#include "core/comm.h"
#include "topo/topo_local.h"
#include "transports/registry.h"
#include "tune/tune.h"

static const char *tp_name(const struct weft_topo_job *job, int a, int b)
{
	if (a == b)
		return "self";
	size_t count, idx = job->transport[(size_t)a * (size_t)job->comm->nranks + (size_t)b];
	const struct weft_tp_ops *const *all = weft_registry_all(&count);
	return idx < count ? all[idx]->name : "none";
}

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static const char *leaf_of_rank(const struct weft_topo_job *job, int r)
{
	return job->graph->leaf_name[job->graph->leaf_of[r]];
}

/* The display name of leaf l's spine, "" if unknown. */
static const char *spine_of_leaf(const struct weft_topo_graph *g, int l)
{
	return g->leaf_spine[l] >= 0 ? g->spine_name[g->leaf_spine[l]] : "";
}

/* One line of the "spines:" section: the leaves under spine s (-1: the
 * leaves of unknown spine), skipped if there are none. */
static void text_spine_line(const struct weft_topo_graph *g, int s, FILE *out)
{
	bool any = false;
	for (int l = 0; l < g->nleaves; l++) {
		if (g->leaf_spine[l] != s)
			continue;
		if (!any)
			fprintf(out, "  %-16s leaves:", s >= 0 ? g->spine_name[s] : "(unknown)");
		fprintf(out, " %d(%s)", l, g->leaf_name[l]);
		any = true;
	}
	if (any)
		fputc('\n', out);
}

static void text_spines(const struct weft_topo_graph *g, FILE *out)
{
	if (g->nspines == 0) {
		fprintf(out, "\nspines: none known\n");
		return;
	}
	fprintf(out, "\nspines:\n");
	for (int s = 0; s < g->nspines; s++)
		text_spine_line(g, s, out);
	text_spine_line(g, -1, out);
}

static void text_dump(const struct weft_topo_job *job, FILE *out)
{
	const struct weft_comm *comm = job->comm;
	const struct weft_topo_graph *g = job->graph;
	int n = comm->nranks;
	fprintf(out, "weft-topo: %d rank%s on %d host%s under %d lea%s\n\n", n, n == 1 ? "" : "s",
		g->nhosts, g->nhosts == 1 ? "" : "s", g->nleaves, g->nleaves == 1 ? "f" : "ves");
	fprintf(out, "%-5s %-6s %-16s %-5s %-12s %-5s %-16s %-6s %s\n", "rank", "host", "hostname",
		"numa", "nic", "nicnm", "leaf", "via", "leaf port");
	for (int r = 0; r < n; r++) {
		const struct weft_card *c = &comm->cards[r];
		fprintf(out, "%-5d %-6d %-16s %-5d %-12s %-5d %-16s %-6s %s\n", r, g->host_of[r],
			c->hostname, c->topo.numa, c->topo.nic[0] ? c->topo.nic : "-",
			c->topo.nic_numa, leaf_of_rank(job, r),
			weft_topo_leaf_source_name(c->topo.leaf_source),
			c->topo.leaf_port[0] ? c->topo.leaf_port : "-");
	}
	fprintf(out, "\nleaves:\n");
	for (int l = 0; l < g->nleaves; l++) {
		fprintf(out, "  %-16s learned by %-4s leader rank %d, hosts:", g->leaf_name[l],
			weft_topo_leaf_source_name(g->leaf_source[l]), g->leaf_leader[l]);
		for (int h = 0; h < g->nhosts; h++)
			if (g->leaf_of[g->host_leader[h]] == l)
				fprintf(out, " %d(%s)", h, comm->cards[g->host_leader[h]].hostname);
		fputc('\n', out);
	}
	text_spines(g, out);
	fprintf(out, "\nring (placement %s): ", job->by_rank ? "rank" : "topo");
	for (int p = 0; p < n; p++)
		fprintf(out, "%d%s", comm->ring[p], p + 1 < n ? " -> " : "\n");
	fprintf(out, "  leaf crossings: %d (plain rank order: %d)\n",
		weft_topo_ring_crossings(g, comm->ring), job->rank_order_crossings);
	fprintf(out, "  spine crossings: %d\n", weft_topo_ring_spine_crossings(g, comm->ring));
	fprintf(out, "\ntrees (leaders):\n  host leaders:");
	for (int h = 0; h < g->nhosts; h++)
		fprintf(out, " %d", g->host_leader[h]);
	fprintf(out, "\n  leaf leaders:");
	for (int l = 0; l < g->nleaves; l++)
		fprintf(out, " %d", g->leaf_leader[l]);
	fprintf(out, "\n\ntransports (row: from, column: to):\n      ");
	for (int b = 0; b < n; b++)
		fprintf(out, "%-7d", b);
	fputc('\n', out);
	for (int a = 0; a < n; a++) {
		fprintf(out, "  %-3d ", a);
		for (int b = 0; b < n; b++)
			fprintf(out, "%-7s", tp_name(job, a, b));
		fputc('\n', out);
	}
	fprintf(out, "\nalgorithms (tuner's choice per message size):\n");
	weft_tune_print(comm, out);
	fprintf(out, "\npacer: not built yet (off)\n");
}

static void json_dump(const struct weft_topo_job *job, FILE *out)
{
	const struct weft_comm *comm = job->comm;
	const struct weft_topo_graph *g = job->graph;
	int n = comm->nranks;
	fprintf(out,
		"{\n  \"nranks\": %d,\n  \"nhosts\": %d,\n  \"nleaves\": %d,\n  \"nspines\": %d,\n"
		"  \"ranks\": [\n",
		n, g->nhosts, g->nleaves, g->nspines);
	for (int r = 0; r < n; r++) {
		const struct weft_card *c = &comm->cards[r];
		fprintf(out, "    {\"rank\": %d, \"host\": ", r);
		json_str(out, c->host_id);
		fprintf(out, ", \"host_index\": %d, \"hostname\": ", g->host_of[r]);
		json_str(out, c->hostname);
		fprintf(out, ", \"numa\": %d, \"nic\": ", c->topo.numa);
		json_str(out, c->topo.nic);
		fprintf(out, ", \"nic_numa\": %d, \"leaf\": ", c->topo.nic_numa);
		json_str(out, leaf_of_rank(job, r));
		fprintf(out, ", \"leaf_id\": ");
		json_str(out, c->topo.leaf_id);
		fprintf(out, ", \"leaf_port\": ");
		json_str(out, c->topo.leaf_port);
		fprintf(out, ", \"spine\": ");
		json_str(out, c->topo.spine);
		fprintf(out, ", \"leaf_source\": \"%s\"}%s\n",
			weft_topo_leaf_source_name(c->topo.leaf_source), r + 1 < n ? "," : "");
	}
	fprintf(out, "  ],\n  \"leaves\": [\n");
	for (int l = 0; l < g->nleaves; l++) {
		fprintf(out, "    {\"name\": ");
		json_str(out, g->leaf_name[l]);
		fprintf(out, ", \"spine\": ");
		json_str(out, spine_of_leaf(g, l));
		fprintf(out, ", \"source\": \"%s\", \"leader\": %d, \"ranks\": [",
			weft_topo_leaf_source_name(g->leaf_source[l]), g->leaf_leader[l]);
		bool first = true;
		for (int r = 0; r < n; r++) {
			if (g->leaf_of[r] != l)
				continue;
			fprintf(out, "%s%d", first ? "" : ", ", r);
			first = false;
		}
		fprintf(out, "]}%s\n", l + 1 < g->nleaves ? "," : "");
	}
	fprintf(out, "  ],\n  \"host_leaders\": [");
	for (int h = 0; h < g->nhosts; h++)
		fprintf(out, "%s%d", h ? ", " : "", g->host_leader[h]);
	fprintf(out, "],\n  \"ring\": {\"placement\": \"%s\", \"order\": [",
		job->by_rank ? "rank" : "topo");
	for (int p = 0; p < n; p++)
		fprintf(out, "%s%d", p ? ", " : "", comm->ring[p]);
	fprintf(out,
		"], \"leaf_crossings\": %d, \"rank_order_leaf_crossings\": %d, "
		"\"spine_crossings\": %d},\n",
		weft_topo_ring_crossings(g, comm->ring), job->rank_order_crossings,
		weft_topo_ring_spine_crossings(g, comm->ring));
	fprintf(out, "  \"transports\": [");
	bool first = true;
	for (int a = 0; a < n; a++) {
		for (int b = 0; b < n; b++) {
			if (a == b)
				continue;
			fprintf(out,
				"%s\n    {\"from\": %d, \"to\": %d, \"transport\": \"%s\", "
				"\"link\": \"%s\"}",
				first ? "" : ",", a, b, tp_name(job, a, b),
				weft_topo_link_name(weft_topo_link(g, a, b)));
			first = false;
		}
	}
	fprintf(out, "\n  ],\n  \"algorithms\": {");
	static const size_t sizes[] = {8, 4096, 65536, 1 << 20, 16 << 20, 256 << 20};
	for (int c = 0; c < WEFT_COLL_COUNT; c++) {
		fprintf(out, "%s\n    \"%s\": {", c ? "," : "",
			weft_coll_name((enum weft_coll_kind)c));
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			struct weft_coll_args args = {.coll = (enum weft_coll_kind)c,
						      .count = sizes[i] / 4,
						      .dtype = WEFT_FLOAT32,
						      .op = WEFT_SUM,
						      .esize = 4};
			const struct weft_algo *a =
			    weft_algos_for(args.coll)[0] ? weft_tune_select(comm, &args) : NULL;
			fprintf(out, "%s\"%zu\": \"%s\"", i ? ", " : "", sizes[i],
				a ? a->name : "none");
		}
		fputc('}', out);
	}
	fprintf(out, "\n  },\n  \"pacer\": \"off\"\n}\n");
}

/* Leaf l's cluster with its hosts and ranks, indented by @p ind spaces
 * (deeper inside a spine's cluster). */
static void dot_leaf(const struct weft_topo_job *job, int l, int ind, FILE *out)
{
	const struct weft_comm *comm = job->comm;
	const struct weft_topo_graph *g = job->graph;
	fprintf(out,
		"%*ssubgraph cluster_leaf%d {\n%*slabel=\"leaf %s (%s)\";\n%*s"
		"style=filled; fillcolor=\"#eef3fb\";\n",
		ind, "", l, ind + 2, "", g->leaf_name[l],
		weft_topo_leaf_source_name(g->leaf_source[l]), ind + 2, "");
	for (int h = 0; h < g->nhosts; h++) {
		int leader = g->host_leader[h];
		if (g->leaf_of[leader] != l)
			continue;
		fprintf(out,
			"%*ssubgraph cluster_host%d {\n%*slabel=\"host %d: %s\";\n"
			"%*sstyle=filled; fillcolor=\"#ffffff\";\n",
			ind + 2, "", h, ind + 4, "", h, comm->cards[leader].hostname, ind + 4, "");
		for (int r = 0; r < comm->nranks; r++)
			if (g->host_of[r] == h)
				fprintf(out, "%*sr%d [label=\"rank %d\\n%s\"];\n", ind + 4, "", r,
					r, comm->cards[r].topo.nic);
		fprintf(out, "%*s}\n", ind + 2, "");
	}
	fprintf(out, "%*s}\n", ind, "");
}

static void dot_dump(const struct weft_topo_job *job, FILE *out)
{
	const struct weft_comm *comm = job->comm;
	const struct weft_topo_graph *g = job->graph;
	int n = comm->nranks;
	fprintf(out, "digraph weft {\n  compound=true;\n  node [shape=box, style=rounded];\n");
	for (int s = 0; s < g->nspines; s++) {
		fprintf(out,
			"  subgraph cluster_spine%d {\n    label=\"spine %s\";\n    "
			"style=filled; fillcolor=\"#f6f0e4\";\n",
			s, g->spine_name[s]);
		for (int l = 0; l < g->nleaves; l++)
			if (g->leaf_spine[l] == s)
				dot_leaf(job, l, 4, out);
		fprintf(out, "  }\n");
	}
	for (int l = 0; l < g->nleaves; l++)
		if (g->leaf_spine[l] < 0)
			dot_leaf(job, l, 2, out);
	for (int p = 0; p < n && n > 1; p++) {
		int a = comm->ring[p], b = comm->ring[(p + 1) % n];
		bool cross = g->leaf_of[a] != g->leaf_of[b];
		fprintf(out, "  r%d -> r%d [color=\"%s\", penwidth=%d%s];\n", a, b,
			cross ? "red" : "darkgreen", cross ? 3 : 2,
			cross ? ", label=\"spine\"" : "");
	}
	fprintf(out,
		"  label=\"ring order, %d leaf crossing(s), %d spine crossing(s); red edges "
		"cross the spine\";\n}\n",
		weft_topo_ring_crossings(g, comm->ring),
		weft_topo_ring_spine_crossings(g, comm->ring));
}

/* An Open MPI rankfile that puts consecutive ranks on one host, then one
 * leaf: rank i goes where ring position i is. */
static void rankfile_dump(const struct weft_topo_job *job, FILE *out)
{
	const struct weft_comm *comm = job->comm;
	int n = comm->nranks;
	fprintf(
	    out,
	    "# Open MPI rankfile from weft-topo: consecutive ranks share a host, then a leaf\n");
	for (int p = 0; p < n; p++) {
		int r = comm->ring[p];
		fprintf(out, "rank %d=%s slot=%u\n", p, comm->cards[r].hostname,
			comm->cards[r].local_rank);
	}
}

weft_status_t weft_topo_dump(const struct weft_topo_job *job, enum weft_topo_format format,
			     FILE *out)
{
	switch (format) {
	case WEFT_TOPO_TEXT: text_dump(job, out); break;
	case WEFT_TOPO_JSON: json_dump(job, out); break;
	case WEFT_TOPO_DOT: dot_dump(job, out); break;
	case WEFT_TOPO_RANKFILE: rankfile_dump(job, out); break;
	default: return WEFT_ERR_INVALID_ARG;
	}
	return WEFT_SUCCESS;
}

weft_status_t weft_topo_job_gather(struct weft_comm *comm, struct weft_topo_job *job)
{
	int n = comm->nranks;
	memset(job, 0, sizeof(*job));
	job->comm = comm;
	job->graph = &comm->graph;
	job->by_rank = comm->placement_by_rank;
	job->transport = calloc((size_t)n * (size_t)n, 1);
	int *identity = calloc((size_t)n, sizeof(int));
	if (!job->transport || !identity) {
		free(identity);
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "weft-topo: no memory");
	}
	for (int r = 0; r < n; r++)
		identity[r] = r;
	job->rank_order_crossings = weft_topo_ring_crossings(&comm->graph, identity);
	free(identity);
	uint8_t *mine = job->transport + (size_t)comm->rank * (size_t)n;
	for (int b = 0; b < n; b++) {
		mine[b] = UINT8_MAX;
		for (size_t i = 0; i < comm->ntps; i++)
			if (comm->peers[b].tp && comm->peers[b].tp == comm->tps[i])
				mine[b] = (uint8_t)i;
	}
	return weft_allgather(WEFT_IN_PLACE, job->transport, (size_t)n, WEFT_UINT8, comm);
}

void weft_topo_job_free(struct weft_topo_job *job)
{
	free(job->transport);
	job->transport = NULL;
}
