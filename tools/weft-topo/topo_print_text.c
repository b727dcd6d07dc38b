/*
 * topo_print_text.c — a job's description for people: ranks, leaves,
 * spines, the ring, trees, transports per link class and the tuner's table,
 * in the layout weft-topo had when it printed the communicator's internals
 * itself, except that transports are counted per link class where there was
 * a rank-by-rank matrix: every section is a list per rank, host or leaf at
 * most, so nothing grows as ranks squared.
 */
#include <stdbool.h>
#include <string.h>

#include "tools/weft-topo/topo_print.h"

static const char *plural(long long n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static void text_ranks(const json_t *doc, FILE *out)
{
	size_t i;
	const json_t *r;
	fprintf(out, "%-5s %-6s %-16s %-5s %-12s %-5s %-16s %-6s %s\n", "rank", "host", "hostname",
		"numa", "nic", "nicnm", "leaf", "via", "leaf port");
	json_array_foreach(json_object_get(doc, "ranks"), i, r)
	{
		fprintf(out, "%-5lld %-6lld %-16s %-5lld %-12s %-5lld %-16s %-6s %s\n",
			weft_tool_int(r, "rank"), weft_tool_int(r, "host_index"),
			weft_tool_str(r, "hostname"), weft_tool_int(r, "numa"),
			weft_tool_dash(weft_tool_str(r, "nic")), weft_tool_int(r, "nic_numa"),
			weft_tool_str(r, "leaf"), weft_tool_str(r, "leaf_source"),
			weft_tool_dash(weft_tool_str(r, "leaf_port")));
	}
}

static void text_leaves(const json_t *doc, FILE *out)
{
	const json_t *hosts = json_object_get(doc, "hosts"), *l, *h;
	size_t i, k;
	fprintf(out, "\nleaves:\n");
	json_array_foreach(json_object_get(doc, "leaves"), i, l)
	{
		fprintf(out, "  %-16s learned by %-4s leader rank %lld, hosts:",
			weft_tool_str(l, "name"), weft_tool_str(l, "source"),
			weft_tool_int(l, "leader"));
		json_array_foreach(json_object_get(l, "hosts"), k, h)
		{
			json_int_t hi = json_integer_value(h);
			fprintf(out, " %lld(%s)", (long long)hi,
				weft_tool_str(json_array_get(hosts, (size_t)hi), "hostname"));
		}
		fputc('\n', out);
	}
}

static void text_leaf_item(const json_t *leaves, json_int_t l, FILE *out)
{
	fprintf(out, " %lld(%s)", (long long)l,
		weft_tool_str(json_array_get(leaves, (size_t)l), "name"));
}

/* Each spine's own list of leaves, then the leaves of unknown spine: every
 * leaf is visited once per line it is on, however many spines there are. */
static void text_spines(const json_t *doc, FILE *out)
{
	const json_t *spines = json_object_get(doc, "spines"), *s, *l;
	const json_t *leaves = json_object_get(doc, "leaves");
	size_t i, k;
	bool unknown = false;
	if (json_array_size(spines) == 0) {
		fprintf(out, "\nspines: none known\n");
		return;
	}
	fprintf(out, "\nspines:\n");
	json_array_foreach(spines, i, s)
	{
		fprintf(out, "  %-16s leaves:", weft_tool_str(s, "name"));
		json_array_foreach(json_object_get(s, "leaves"), k, l)
		    text_leaf_item(leaves, json_integer_value(l), out);
		fputc('\n', out);
	}
	json_array_foreach(leaves, i, l)
	{
		if (weft_tool_int(l, "spine_index") >= 0)
			continue;
		if (!unknown)
			fprintf(out, "  %-16s leaves:", "(unknown)");
		text_leaf_item(leaves, (json_int_t)i, out);
		unknown = true;
	}
	if (unknown)
		fputc('\n', out);
}

static void text_ring(const json_t *doc, FILE *out)
{
	const json_t *ring = json_object_get(doc, "ring"), *order = json_object_get(ring, "order");
	const json_t *plain = json_object_get(ring, "rank_order"), *r;
	size_t n = json_array_size(order), p;
	fprintf(out, "\nring (placement %s): ", weft_tool_str(ring, "placement"));
	json_array_foreach(order, p, r)
	    fprintf(out, "%lld%s", (long long)json_integer_value(r), p + 1 < n ? " -> " : "");
	fprintf(out, "\n  leaf crossings: %lld (plain rank order: %lld)\n",
		weft_tool_int(ring, "leaf_crossings"), weft_tool_int(plain, "leaf_crossings"));
	fprintf(out, "  spine crossings: %lld (plain rank order: %lld)\n",
		weft_tool_int(ring, "spine_crossings"), weft_tool_int(plain, "spine_crossings"));
}

static void text_ints(const char *label, const json_t *list, const char *sep, FILE *out)
{
	size_t i;
	const json_t *v;
	fprintf(out, "  %s:", label);
	json_array_foreach(list, i, v)
	    fprintf(out, "%s%lld", i ? sep : " ", (long long)json_integer_value(v));
}

void weft_tool_text_tree(const char *label, const json_t *t, FILE *out)
{
	fprintf(out, "  %s: root %lld, depth %lld, leaf crossings %lld, spine crossings %lld\n",
		label, weft_tool_int(t, "root"), weft_tool_int(t, "depth"),
		weft_tool_int(t, "leaf_crossings"), weft_tool_int(t, "spine_crossings"));
}

static void text_trees(const json_t *doc, FILE *out)
{
	const json_t *trees = json_object_get(doc, "trees");
	const json_t *db = json_object_get(trees, "double_binary");
	const json_t *lr = json_object_get(trees, "leader_ring");
	fprintf(out, "\ntrees and leaders:\n");
	text_ints("host leaders", json_object_get(trees, "host_leaders"), " ", out);
	fputc('\n', out);
	text_ints("leaf leaders", json_object_get(trees, "leaf_leaders"), " ", out);
	fputc('\n', out);
	text_ints("host leaders' ring", json_object_get(lr, "order"), " -> ", out);
	fprintf(out, " (leaf crossings: %lld)\n", weft_tool_int(lr, "leaf_crossings"));
	weft_tool_text_tree("double binary tree 0 (allreduce)", json_array_get(db, 0), out);
	weft_tool_text_tree("double binary tree 1 (allreduce)", json_array_get(db, 1), out);
	weft_tool_text_tree("binary tree (broadcast, reduce)", json_object_get(trees, "binary"),
			    out);
}

void weft_tool_text_transports(const json_t *doc, FILE *out)
{
	size_t i;
	const json_t *c, *count;
	const char *name;
	fprintf(out, "\ntransports (pairs of ranks per link class, from each rank's choice):\n");
	json_array_foreach(json_object_get(doc, "transports"), i, c)
	{
		fprintf(out, "  %-6s %8lld pair%s:", weft_tool_str(c, "link"),
			weft_tool_int(c, "pairs"), plural(weft_tool_int(c, "pairs"), "", "s"));
		json_object_foreach(json_object_get(c, "by_transport"), name, count)
		    fprintf(out, " %s %lld", name, (long long)json_integer_value(count));
		fputc('\n', out);
	}
	const json_t *conns = json_object_get(doc, "connections"); /* a real job's only */
	const json_t *peers = json_object_get(conns, "connected_peers");
	if (conns)
		fprintf(out,
			"connections: %s; peers connected per rank before this description: "
			"%lld to %lld (%lld in all)\n",
			weft_tool_str(conns, "mode"), weft_tool_int(peers, "min"),
			weft_tool_int(peers, "max"), weft_tool_int(peers, "total"));
	const json_t *paths = json_object_get(conns, "paths");
	if (paths)
		fprintf(out,
			"paths: %lld sub-flow(s) failed over on %lld rank(s), %lld re-pathed, "
			"%lld replaced, %lld probe(s), %lld frame(s) resent, %lld duplicate(s) "
			"dropped, %lld dark now\n",
			weft_tool_int(paths, "failovers"),
			weft_tool_int(paths, "ranks_failed_over"), weft_tool_int(paths, "repaths"),
			weft_tool_int(paths, "replaced"), weft_tool_int(paths, "probes"),
			weft_tool_int(paths, "resent"), weft_tool_int(paths, "dups"),
			weft_tool_int(paths, "dark"));
}

/* The rows of weft_tune_print(), from the document. */
static void text_collective(const json_t *c, FILE *out)
{
	const json_t *algos = json_object_get(c, "algorithms"), *a, *row;
	size_t i, k;
	fprintf(out, "  %-15s %10s  %-10s", weft_tool_str(c, "name"), "bytes", "choice");
	json_array_foreach(algos, k, a) fprintf(out, " %12s", json_string_value(a));
	fprintf(out, "   (estimates, us)\n");
	json_array_foreach(json_object_get(c, "sizes"), i, row)
	{
		const json_t *est = json_object_get(row, "estimates_us");
		fprintf(out, "  %-15s %10lld  %-10s", "", weft_tool_int(row, "bytes"),
			weft_tool_str(row, "choice"));
		json_array_foreach(algos, k, a)
		{
			const json_t *e = json_object_get(est, json_string_value(a));
			if (json_is_number(e))
				fprintf(out, " %12.1f", json_number_value(e));
			else
				fprintf(out, " %12s", "-");
		}
		fputc('\n', out);
	}
}

/* A number, or "-" for null. */
static void flow_cell(const json_t *e, FILE *out)
{
	if (json_is_number(e))
		fprintf(out, " %11.1f", json_number_value(e));
	else
		fprintf(out, " %11s", "-");
}

/* One row of the flow table: @p what ("a-b", "flow") for every name in
 * @p names (then @p extra), from @p row's member @p key. */
static void flow_line(const json_t *row, const char *what, const char *choice, const char *key,
		      const json_t *names, const json_t *extra, FILE *out)
{
	const json_t *est = json_object_get(row, key), *a;
	size_t k;
	fprintf(out, "  %-5s %-9s", what, choice);
	json_array_foreach(names, k, a) flow_cell(json_object_get(est, json_string_value(a)), out);
	json_array_foreach(extra, k, a)
	    flow_cell(json_object_get(est, weft_tool_str(a, "name")), out);
}

/* Which link decides each algorithm's flow estimate. */
static void flow_links(const json_t *row, const json_t *names, const json_t *extra, FILE *out)
{
	const json_t *busy = json_object_get(row, "busiest"), *a;
	size_t k;
	fprintf(out, "  %10s  %-15s", "", "busiest link");
	json_array_foreach(names, k, a)
	{
		const json_t *l = json_object_get(busy, json_string_value(a));
		fprintf(out, " %11s", json_is_object(l) ? weft_tool_str(l, "link") : "-");
	}
	json_array_foreach(extra, k, a)
	{
		const json_t *l = json_object_get(busy, weft_tool_str(a, "name"));
		fprintf(out, " %11s", json_is_object(l) ? weft_tool_str(l, "link") : "-");
	}
	fputc('\n', out);
}

/* "tuner"."flow": AllReduce by alpha-beta and by flow, per size. */
static void text_flow(const json_t *flow, FILE *out)
{
	const json_t *names = json_object_get(flow, "algorithms"), *a, *row;
	const json_t *extra = json_object_get(flow, "estimate_only");
	const json_t *bw = json_object_get(flow, "bandwidth_Bps");
	size_t i, k;
	if (!json_is_object(flow))
		return;
	fprintf(
	    out,
	    "\nallreduce, alpha-beta against flow (us). flow: the busiest fabric link's bytes / "
	    "its bandwidth\n  (host uplink %.1f GB/s; a leaf's uplinks %.1f GB/s, %.1f per host "
	    "of the widest leaf;\n  no core tier) + the alpha-beta latency terms, no reduction "
	    "time. * estimate only, never chosen:\n",
	    json_number_value(json_object_get(bw, "host_uplink")) / 1e9,
	    json_number_value(json_object_get(bw, "leaf_uplinks")) / 1e9,
	    json_number_value(json_object_get(bw, "leaf_uplink_per_host")) / 1e9);
	json_array_foreach(extra, k, a)
	    fprintf(out, "  * %s: %s\n", weft_tool_str(a, "name"), weft_tool_str(a, "description"));
	fprintf(out, "  %10s  %-5s %-9s", "bytes", "model", "choice");
	json_array_foreach(names, k, a) fprintf(out, " %11s", json_string_value(a));
	json_array_foreach(extra, k, a) fprintf(out, " %10s*", weft_tool_str(a, "name"));
	fputc('\n', out);
	json_array_foreach(json_object_get(flow, "sizes"), i, row)
	{
		bool agree = json_is_true(json_object_get(row, "agree"));
		fprintf(out, "  %10lld", weft_tool_int(row, "bytes"));
		flow_line(row, "a-b", weft_tool_str(row, "ab_choice"), "ab_us", names, extra, out);
		fprintf(out, "\n  %10s", "");
		flow_line(row, "flow", weft_tool_str(row, "flow_choice"), "flow_us", names, extra,
			  out);
		fprintf(out, "%s\n", agree ? "" : "   <- the choices differ");
		flow_links(row, names, extra, out);
	}
}

/* The pacer's mode, and each of the describing rank's paced connections
 * (a model has none: its state is null). */
static void text_pacer(const json_t *pacer, FILE *out)
{
	const json_t *state = json_object_get(pacer, "state"), *l;
	size_t i;
	fprintf(out, "\npacer: %s", weft_tool_str(pacer, "mode"));
	if (!json_is_object(state)) {
		fputc('\n', out);
		return;
	}
	fprintf(out, ", rank %lld's paced connections: %lld\n", weft_tool_int(state, "rank"),
		weft_tool_int(state, "paced"));
	json_array_foreach(json_object_get(state, "links"), i, l)
	{
		const json_t *rate = json_object_get(l, "rate_MBps");
		fprintf(out, "  -> %-5lld ", weft_tool_int(l, "peer"));
		if (json_is_number(rate))
			fprintf(out, "%.1f MB/s", json_number_value(rate));
		else
			fprintf(out, "line rate");
		fprintf(out, ", alpha %.3f, %lld cuts, %lld of %lld delivered marked\n",
			json_number_value(json_object_get(l, "alpha")), weft_tool_int(l, "cuts"),
			weft_tool_int(l, "marks"), weft_tool_int(l, "delivered"));
	}
}

void weft_tool_text_tail(const json_t *doc, FILE *out)
{
	const json_t *c;
	size_t i;
	fprintf(out, "\nalgorithms (tuner's choice per message size):\n");
	json_array_foreach(json_object_get(json_object_get(doc, "tuner"), "collectives"), i, c)
	    text_collective(c, out);
	text_flow(json_object_get(json_object_get(doc, "tuner"), "flow"), out);
	text_pacer(json_object_get(doc, "pacer"), out);
}

int weft_tool_print_job_text(const json_t *doc, FILE *out)
{
	long long n = weft_tool_int(doc, "nranks"), nh = weft_tool_int(doc, "nhosts");
	long long nl = weft_tool_int(doc, "nleaves");
	fprintf(out, "weft-topo: %lld rank%s on %lld host%s under %lld lea%s\n\n", n,
		plural(n, "", "s"), nh, plural(nh, "", "s"), nl, plural(nl, "f", "ves"));
	text_ranks(doc, out);
	text_leaves(doc, out);
	text_spines(doc, out);
	text_ring(doc, out);
	text_trees(doc, out);
	weft_tool_text_transports(doc, out);
	weft_tool_text_tail(doc, out);
	return 0;
}
