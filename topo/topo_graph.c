/*
 * topo_graph.c — the topology graph built from every rank's card: which
 * ranks share a host, which hosts share a leaf switch, which leaves share a
 * spine, and the link class of any pair of ranks.
 *
 * Every rank builds the graph from the same table of cards, so the numbering
 * must depend on nothing but that table: hosts, leaves and spines are
 * numbered in the order of their first (lowest) rank. Grouping sorts indices
 * by name, so the build is O(n log n) in ranks, not O(n^2) string compares.
 *
 * A leaf belongs to a host, not to a rank: ranks on one host that name
 * different leaves (several NICs cabled to different switches) would make the
 * rank -> host -> leaf hierarchy a lie, so the host takes the leaf of its
 * lowest rank that knows one. A host whose ranks know no leaf is a leaf of its
 * own: no knowledge, no savings, and crossings counted honestly.
 *
 * A spine belongs to a leaf in the same way: the leaf takes the spine of its
 * lowest rank that names one. A rank that names another leaf than the one
 * its host was put under does not speak for this leaf's spine. A leaf whose
 * ranks name no spine has spine -1: the ring puts such leaves last.
 */
#define _GNU_SOURCE /* qsort_r */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"
#include "util/log.h"

/* A name held in a fixed-size card field that may lack its NUL (cards come
 * off the wire). */
struct name_ref {
	const char *s;
	size_t len;
};

static struct name_ref card_field(const char *field)
{
	struct name_ref r = {field, strnlen(field, WEFT_TOPO_NAME_BYTES)};
	return r;
}

/* The leaf key of a card: its chassis id, else the leaf's name, else none. */
static struct name_ref leaf_key(const struct weft_topo_card *c)
{
	struct name_ref r = card_field(c->leaf_id);
	if (r.len == 0)
		r = card_field(c->leaf_name);
	return r;
}

/* Copy a card field into a display name, truncated and NUL-terminated. */
static void copy_name(char *out, struct name_ref name)
{
	size_t n = name.len < WEFT_TOPO_NAME_BYTES - 1 ? name.len : WEFT_TOPO_NAME_BYTES - 1;
	memcpy(out, name.s, n);
	out[n] = '\0';
}

static int name_cmp(struct name_ref a, struct name_ref b)
{
	size_t n = a.len < b.len ? a.len : b.len;
	int c = memcmp(a.s, b.s, n);
	if (c)
		return c;
	return (a.len > b.len) - (a.len < b.len);
}

/* ---- grouping: sort indices by name, ties by index ----------------------- */

struct group_ctx {
	const struct name_ref *names;
};

static int group_cmp(const void *pa, const void *pb, void *arg)
{
	const struct group_ctx *ctx = arg;
	int a = *(const int *)pa, b = *(const int *)pb;
	int c = name_cmp(ctx->names[a], ctx->names[b]);
	if (c)
		return c;
	return (a > b) - (a < b);
}

/*
 * rep[i] = the lowest index j with names[j] equal to names[i], for the
 * indices listed in @p idx (n of them; sorted in place). Indices not listed
 * keep whatever rep[] held.
 */
static void group_by_name(int *idx, int n, const struct name_ref *names, int *rep)
{
	struct group_ctx ctx = {names};
	qsort_r(idx, (size_t)n, sizeof(*idx), group_cmp, &ctx);
	for (int i = 0; i < n; i++) {
		if (i > 0 && name_cmp(names[idx[i - 1]], names[idx[i]]) == 0)
			rep[idx[i]] = rep[idx[i - 1]];
		else
			rep[idx[i]] = idx[i];
	}
}

/* ---- build ---------------------------------------------------------------- */

static weft_status_t check_input(int nranks, const struct weft_topo_rank *ranks,
				 struct weft_err *err)
{
	if (nranks <= 0 || !ranks)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "topology graph: %d ranks (need at least one)", nranks);
	for (int r = 0; r < nranks; r++) {
		if (!ranks[r].host_id || !ranks[r].card)
			return weft_err_set(err, WEFT_ERR_INVALID_ARG,
					    "topology graph: rank %d has no %s", r,
					    ranks[r].host_id ? "topology card" : "host id");
	}
	return WEFT_SUCCESS;
}

static bool alloc_graph(struct weft_topo_graph *g, int nranks)
{
	size_t n = (size_t)nranks;
	g->host_of = calloc(n, sizeof(*g->host_of));
	g->leaf_of = calloc(n, sizeof(*g->leaf_of));
	g->numa_of = calloc(n, sizeof(*g->numa_of));
	/* Hosts and leaves number at most nranks; trimming is not worth a
	 * second allocation that could fail. */
	g->host_leader = calloc(n, sizeof(*g->host_leader));
	g->leaf_leader = calloc(n, sizeof(*g->leaf_leader));
	g->leaf_name = calloc(n, sizeof(*g->leaf_name));
	g->leaf_source = calloc(n, sizeof(*g->leaf_source));
	g->leaf_spine = calloc(n, sizeof(*g->leaf_spine));
	g->spine_name = calloc(n, sizeof(*g->spine_name));
	return g->host_of && g->leaf_of && g->numa_of && g->host_leader && g->leaf_leader &&
	       g->leaf_name && g->leaf_source && g->leaf_spine && g->spine_name;
}

/* hosts: host_of[], host_leader[], nhosts. */
static void number_hosts(struct weft_topo_graph *g, const struct weft_topo_rank *ranks,
			 struct name_ref *names, int *idx, int *rep)
{
	int n = g->nranks;
	for (int r = 0; r < n; r++) {
		names[r].s = ranks[r].host_id;
		names[r].len = strlen(ranks[r].host_id);
		idx[r] = r;
	}
	group_by_name(idx, n, names, rep);
	g->nhosts = 0;
	for (int r = 0; r < n; r++) {
		if (rep[r] == r) {
			g->host_leader[g->nhosts] = r;
			g->host_of[r] = g->nhosts++;
		} else {
			g->host_of[r] = g->host_of[rep[r]];
		}
	}
}

/* card_rank[h]: the rank whose card gives host h its leaf, the lowest rank
 * on the host that knows one, or -1. One pass, so unknown leaves cost O(n). */
static void find_leaf_cards(const struct weft_topo_graph *g, const struct weft_topo_rank *ranks,
			    int *card_rank)
{
	for (int h = 0; h < g->nhosts; h++)
		card_rank[h] = -1;
	for (int r = 0; r < g->nranks; r++) {
		int h = g->host_of[r];
		if (card_rank[h] < 0 && leaf_key(ranks[r].card).len > 0)
			card_rank[h] = r;
	}
}

static void warn_split_hosts(const struct weft_topo_graph *g, const struct weft_topo_rank *ranks,
			     const int *card_rank)
{
	for (int r = 0; r < g->nranks; r++) {
		int c = card_rank[g->host_of[r]];
		struct name_ref mine = leaf_key(ranks[r].card);
		if (c < 0 || mine.len == 0 || name_cmp(mine, leaf_key(ranks[c].card)) == 0)
			continue;
		weft_log(
		    WEFT_LOG_INFO, WEFT_SUB_TOPO,
		    "rank %d names leaf %.*s but its host %s counts as under %.*s (from rank %d)",
		    r, (int)mine.len, mine.s, ranks[r].host_id, (int)leaf_key(ranks[c].card).len,
		    leaf_key(ranks[c].card).s, c);
		return; /* one line is enough to explain the choice */
	}
}

static void set_leaf_display(struct weft_topo_graph *g, int leaf, const struct weft_topo_rank *rk,
			     bool known)
{
	char *out = g->leaf_name[leaf];
	if (known) {
		struct name_ref name = card_field(rk->card->leaf_name);
		if (name.len == 0)
			name = card_field(rk->card->leaf_id);
		/* the card field may fill all 64 bytes without a NUL */
		copy_name(out, name);
		g->leaf_source[leaf] = rk->card->leaf_source;
	} else {
		const char *host = rk->hostname && rk->hostname[0] ? rk->hostname : rk->host_id;
		snprintf(out, WEFT_TOPO_NAME_BYTES, "host:%s", host);
		g->leaf_source[leaf] = WEFT_LEAF_NONE;
	}
}

/* leaves: leaf_of[], leaf_leader[], leaf_name[], leaf_source[], nleaves.
 * Works on hosts (index h), which are already numbered by first rank. */
static void number_leaves(struct weft_topo_graph *g, const struct weft_topo_rank *ranks,
			  struct name_ref *names, int *idx, int *rep, int *card_rank,
			  int *leaf_of_host)
{
	int nh = g->nhosts, nknown = 0;

	find_leaf_cards(g, ranks, card_rank);
	for (int h = 0; h < nh; h++) {
		if (card_rank[h] >= 0) {
			names[h] = leaf_key(ranks[card_rank[h]].card);
			idx[nknown++] = h;
		}
		rep[h] = h; /* unknown: a leaf of its own */
	}
	warn_split_hosts(g, ranks, card_rank);
	group_by_name(idx, nknown, names, rep);

	g->nleaves = 0;
	for (int h = 0; h < nh; h++) {
		if (rep[h] != h) {
			leaf_of_host[h] = leaf_of_host[rep[h]];
			continue;
		}
		int leaf = g->nleaves++;
		int r = card_rank[h] >= 0 ? card_rank[h] : g->host_leader[h];
		leaf_of_host[h] = leaf;
		g->leaf_leader[leaf] = g->host_leader[h];
		set_leaf_display(g, leaf, &ranks[r], card_rank[h] >= 0);
	}
	for (int r = 0; r < g->nranks; r++)
		g->leaf_of[r] = leaf_of_host[g->host_of[r]];
}

/* Whether rank r's card may name its leaf's spine: it names no leaf, or the
 * leaf its host was put under (card_rank: from number_leaves). */
static bool speaks_for_leaf(const struct weft_topo_graph *g, const struct weft_topo_rank *ranks,
			    const int *card_rank, int r)
{
	struct name_ref mine = leaf_key(ranks[r].card);
	int c = card_rank[g->host_of[r]];
	return mine.len == 0 || (c >= 0 && name_cmp(mine, leaf_key(ranks[c].card)) == 0);
}

/* spine_rank[l]: the rank whose card gives leaf l its spine, or -1. */
static void find_spine_cards(const struct weft_topo_graph *g, const struct weft_topo_rank *ranks,
			     const int *card_rank, int *spine_rank)
{
	for (int l = 0; l < g->nleaves; l++)
		spine_rank[l] = -1;
	for (int r = 0; r < g->nranks; r++) {
		int l = g->leaf_of[r];
		if (spine_rank[l] < 0 && card_field(ranks[r].card->spine).len > 0 &&
		    speaks_for_leaf(g, ranks, card_rank, r))
			spine_rank[l] = r;
	}
}

/* spines: leaf_spine[], spine_name[], nspines. Works on leaves, already
 * numbered by first rank, so numbering spines in leaf order numbers them by
 * first rank too. */
static void number_spines(struct weft_topo_graph *g, const struct weft_topo_rank *ranks,
			  struct name_ref *names, int *idx, int *rep, const int *card_rank,
			  int *spine_rank)
{
	int nl = g->nleaves, nknown = 0;

	find_spine_cards(g, ranks, card_rank, spine_rank);
	for (int l = 0; l < nl; l++) {
		if (spine_rank[l] >= 0) {
			names[l] = card_field(ranks[spine_rank[l]].card->spine);
			idx[nknown++] = l;
		}
		rep[l] = l;
	}
	group_by_name(idx, nknown, names, rep);

	g->nspines = 0;
	for (int l = 0; l < nl; l++) {
		if (spine_rank[l] < 0) {
			g->leaf_spine[l] = -1;
		} else if (rep[l] != l) {
			g->leaf_spine[l] = g->leaf_spine[rep[l]];
		} else {
			g->leaf_spine[l] = g->nspines;
			copy_name(g->spine_name[g->nspines++], names[l]);
		}
	}
}

weft_status_t weft_topo_graph_build(struct weft_topo_graph *g, int nranks,
				    const struct weft_topo_rank *ranks, struct weft_err *err)
{
	weft_status_t st;
	struct name_ref *names = NULL;
	int *idx = NULL, *rep = NULL, *card_rank = NULL, *leaf_of_host = NULL, *spine_rank = NULL;

	memset(g, 0, sizeof(*g));
	st = check_input(nranks, ranks, err);
	if (st != WEFT_SUCCESS)
		return st;

	g->nranks = nranks;
	names = calloc((size_t)nranks, sizeof(*names));
	idx = calloc((size_t)nranks, sizeof(*idx));
	rep = calloc((size_t)nranks, sizeof(*rep));
	card_rank = calloc((size_t)nranks, sizeof(*card_rank));
	leaf_of_host = calloc((size_t)nranks, sizeof(*leaf_of_host));
	spine_rank = calloc((size_t)nranks, sizeof(*spine_rank));
	if (!names || !idx || !rep || !card_rank || !leaf_of_host || !spine_rank ||
	    !alloc_graph(g, nranks)) {
		weft_topo_graph_free(g);
		st = weft_err_set(err, WEFT_ERR_NO_MEMORY, "topology graph for %d ranks", nranks);
		goto out_free_scratch;
	}

	for (int r = 0; r < nranks; r++)
		g->numa_of[r] = ranks[r].card->numa >= 0 ? ranks[r].card->numa : -1;
	number_hosts(g, ranks, names, idx, rep);
	number_leaves(g, ranks, names, idx, rep, card_rank, leaf_of_host);
	number_spines(g, ranks, names, idx, rep, card_rank, spine_rank);
	weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
		 "graph: %d ranks on %d hosts under %d leaves, %d known spines", g->nranks,
		 g->nhosts, g->nleaves, g->nspines);
	st = WEFT_SUCCESS;

out_free_scratch:
	free(spine_rank);
	free(leaf_of_host);
	free(card_rank);
	free(rep);
	free(idx);
	free(names);
	return st;
}

void weft_topo_graph_free(struct weft_topo_graph *g)
{
	if (!g)
		return;
	free(g->host_of);
	free(g->leaf_of);
	free(g->numa_of);
	free(g->host_leader);
	free(g->leaf_leader);
	free(g->leaf_name);
	free(g->leaf_source);
	free(g->leaf_spine);
	free(g->spine_name);
	memset(g, 0, sizeof(*g));
}

/* ---- link classes ---------------------------------------------------------- */

enum weft_link_class weft_topo_link(const struct weft_topo_graph *g, int a, int b)
{
	/* Out of range: assume the worst link rather than crash. */
	if (a < 0 || b < 0 || a >= g->nranks || b >= g->nranks)
		return WEFT_LINK_SPINE;
	if (a == b)
		return WEFT_LINK_SELF;
	if (g->host_of[a] == g->host_of[b]) {
		if (g->numa_of[a] >= 0 && g->numa_of[a] == g->numa_of[b])
			return WEFT_LINK_NUMA;
		return WEFT_LINK_HOST;
	}
	if (g->leaf_of[a] == g->leaf_of[b])
		return WEFT_LINK_LEAF;
	return WEFT_LINK_SPINE;
}

const char *weft_topo_link_name(enum weft_link_class c)
{
	switch (c) {
	case WEFT_LINK_SELF: return "self";
	case WEFT_LINK_NUMA: return "numa";
	case WEFT_LINK_HOST: return "host";
	case WEFT_LINK_LEAF: return "leaf";
	case WEFT_LINK_SPINE: return "spine";
	case WEFT_LINK_CLASS_COUNT: break;
	}
	return "unknown";
}
