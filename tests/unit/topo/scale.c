/*
 * scale.c — what replaced pair-by-pair loops, against the
 * pair-by-pair answer on small jobs:
 *   - weft_topo_class_pairs (pairs per link class from the graph's groups)
 *     against weft_topo_link over every pair, on random jobs: 1..40 ranks on
 *     random hosts, leaves and NUMA nodes (some unknown, some far apart),
 *     plus the corners (one rank, one host, every rank its own leaf);
 *   - the tuner's slowest links (worst, intra_host, inter_host, intra_leaf,
 *     inter_leaf), computed from those counts, against the slowest class
 *     over every pair, every pair on one host, every pair of host leaders,
 *     every pair under one leaf and every pair of leaf leaders;
 *   - the hierarchy's walk (weft_hier_walk) by host against every rank's
 *     weft_hier_layout, and by leaf (the hier-leaf estimate) against each
 *     leaf's chain found rank by rank: exactly one leader per leaf, every
 *     other rank once at the end of a chain edge;
 *   - the flow estimate's link loads (topo/topo_flow.h) of the tree
 *     AllReduce against its trees placed rank by rank (weft_shape_place),
 *     and of every AllReduce algorithm: bytes up equal bytes down.
 * Random jobs use a fixed seed, so a failure names a job that fails again.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/patterns/hier.h"
#include "algorithms/patterns/shape.h"
#include "core/comm.h"
#include "topo/topo_flow.h"
#include "tune/tune.h"

#define MAX_RANKS 40

struct job {
	struct weft_comm comm;
	struct weft_card cards[MAX_RANKS];
	int ring[MAX_RANKS];
};

static unsigned next(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return (*s >> 16) & 0x7fff;
}

/* A job of @p n ranks over at most @p hosts hosts and @p leaves leaves. */
static void job_make(struct job *j, int n, int hosts, int leaves, unsigned *seed)
{
	struct weft_topo_rank in[MAX_RANKS];
	memset(j, 0, sizeof(*j));
	for (int r = 0; r < n; r++) {
		struct weft_card *c = &j->cards[r];
		int h = (int)(next(seed) % (unsigned)hosts);
		snprintf(c->host_id, sizeof(c->host_id), "h%d", h);
		snprintf(c->hostname, sizeof(c->hostname), "h%d", h);
		/* the leaf follows the host, as a topology file has it */
		snprintf(c->topo.leaf_name, sizeof(c->topo.leaf_name), "l%d", h % leaves);
		c->topo.leaf_source = WEFT_LEAF_FILE;
		unsigned u = next(seed) % 4;
		c->topo.numa = u == 3 ? -1 : (u == 2 ? 1000000 : (int)u); /* unknown, far */
		c->topo.nic_numa = -1;
		in[r].host_id = c->host_id;
		in[r].hostname = c->hostname;
		in[r].card = &c->topo;
	}
	ck_assert_int_eq(weft_topo_graph_build(&j->comm.graph, n, in, &j->comm.err), WEFT_SUCCESS);
	weft_topo_ring_order(&j->comm.graph, false, j->ring);
	j->comm.nranks = n;
	j->comm.rank = 1 % n;
	j->comm.ring = j->ring;
	j->comm.cards = j->cards;
	j->comm.chunk_bytes = 512 << 10;
}

static void job_free(struct job *j)
{
	if (j->comm.tuner_free)
		j->comm.tuner_free(j->comm.tuner);
	weft_topo_graph_free(&j->comm.graph);
}

static void check_pairs(const struct weft_topo_graph *g, const char *what)
{
	uint64_t want[WEFT_LINK_CLASS_COUNT] = {0}, got[WEFT_LINK_CLASS_COUNT];
	for (int a = 0; a < g->nranks; a++)
		for (int b = 0; b < g->nranks; b++)
			want[weft_topo_link(g, a, b)]++;
	ck_assert_int_eq(weft_topo_class_pairs(g, got), WEFT_SUCCESS);
	for (int c = 0; c < WEFT_LINK_CLASS_COUNT; c++)
		ck_assert_msg(got[c] == want[c], "%s: class %s: %llu pairs, want %llu", what,
			      weft_topo_link_name((enum weft_link_class)c),
			      (unsigned long long)got[c], (unsigned long long)want[c]);
}

START_TEST(class_pairs_random)
{
	unsigned seed = 7;
	for (int trial = 0; trial < 300; trial++) {
		struct job j;
		int n = 1 + (int)(next(&seed) % MAX_RANKS);
		int hosts = 1 + (int)(next(&seed) % 12), leaves = 1 + (int)(next(&seed) % 5);
		char what[64];
		job_make(&j, n, hosts, leaves, &seed);
		snprintf(what, sizeof(what), "trial %d (%d ranks)", trial, n);
		check_pairs(&j.comm.graph, what);
		job_free(&j);
	}
}
END_TEST

/* One host, one rank, and every host its own leaf. */
START_TEST(class_pairs_corners)
{
	unsigned seed = 1;
	struct job j;
	job_make(&j, 1, 1, 1, &seed);
	check_pairs(&j.comm.graph, "one rank");
	job_free(&j);
	job_make(&j, MAX_RANKS, 1, 1, &seed);
	check_pairs(&j.comm.graph, "one host");
	job_free(&j);
	job_make(&j, MAX_RANKS, 1000, 1000, &seed);
	check_pairs(&j.comm.graph, "a leaf per host");
	job_free(&j);
}
END_TEST

static bool is_leader(const struct weft_topo_graph *g, int r)
{
	return g->host_leader[g->host_of[r]] == r;
}

static bool is_leaf_leader(const struct weft_topo_graph *g, int r)
{
	return g->leaf_leader[g->leaf_of[r]] == r;
}

/* Whether pair (a, b) is among those @p which admits (brute_worst). */
static bool admits(const struct weft_topo_graph *g, int which, int a, int b)
{
	switch (which) {
	case 1: return g->host_of[a] == g->host_of[b];
	case 2: return is_leader(g, a) && is_leader(g, b);
	case 3: return g->leaf_of[a] == g->leaf_of[b];
	case 4: return is_leaf_leader(g, a) && is_leaf_leader(g, b);
	default: return true;
	}
}

/* The slowest cost over pairs (a < b) that @p which admits: 0 any, 1 one
 * host, 2 host leaders, 3 one leaf, 4 leaf leaders; as the tuner computed
 * the first three before. */
static struct weft_cost brute_worst(const struct weft_comm *comm, int which)
{
	const struct weft_topo_graph *g = &comm->graph;
	const struct weft_cost *cls = comm->tuner->links.cls;
	struct weft_cost w = {0, 0, cls[WEFT_LINK_NUMA].gamma};
	for (int a = 0; a < comm->nranks; a++) {
		for (int b = a + 1; b < comm->nranks; b++) {
			if (!admits(g, which, a, b))
				continue;
			struct weft_cost c = cls[weft_topo_link(g, a, b)];
			w.alpha = fmax(w.alpha, c.alpha);
			w.beta = fmax(w.beta, c.beta);
			w.gamma = fmax(w.gamma, c.gamma);
		}
	}
	return w;
}

static void check_cost(struct weft_cost got, struct weft_cost want, const char *what, int trial)
{
	ck_assert_msg(got.alpha == want.alpha && got.beta == want.beta && got.gamma == want.gamma,
		      "trial %d: %s: (%g, %g, %g), want (%g, %g, %g)", trial, what, got.alpha,
		      got.beta, got.gamma, want.alpha, want.beta, want.gamma);
}

START_TEST(tuner_links_random)
{
	unsigned seed = 11;
	unsetenv("WEFT_ALGO");
	unsetenv("WEFT_TUNE");
	unsetenv("WEFT_TUNE_CALIBRATE");
	for (int trial = 0; trial < 200; trial++) {
		struct job j;
		int n = 1 + (int)(next(&seed) % MAX_RANKS);
		job_make(&j, n, 1 + (int)(next(&seed) % 12), 1 + (int)(next(&seed) % 5), &seed);
		ck_assert_int_eq(weft_tune_init(&j.comm), WEFT_SUCCESS);
		const struct weft_links *l = &j.comm.tuner->links;
		check_cost(l->worst, brute_worst(&j.comm, 0), "worst", trial);
		check_cost(l->intra_host, brute_worst(&j.comm, 1), "intra_host", trial);
		check_cost(l->inter_host, brute_worst(&j.comm, 2), "inter_host", trial);
		check_cost(l->intra_leaf, brute_worst(&j.comm, 3), "intra_leaf", trial);
		check_cost(l->inter_leaf, brute_worst(&j.comm, 4), "inter_leaf", trial);
		job_free(&j);
	}
}
END_TEST

/* ---- the hierarchy's walk ---- */

struct edges {
	int nchain, nring;
	int chain_from[MAX_RANKS]; /* [to] -1: none seen */
	int ring_to[MAX_RANKS];	   /* [from] -1: none seen */
	int ring_seen[MAX_RANKS];  /* [to] times */
};

static void record(void *ctx, bool chain, int from, int to)
{
	struct edges *e = ctx;
	if (chain) {
		ck_assert_int_eq(e->chain_from[to], -1); /* each rank ends one edge */
		e->chain_from[to] = from;
		e->nchain++;
	} else {
		ck_assert_int_eq(e->ring_to[from], -1);
		e->ring_to[from] = to;
		e->ring_seen[to]++;
		e->nring++;
	}
}

static int walk(const struct weft_comm *comm, bool by_leaf, struct edges *e)
{
	struct weft_hier_groups gr;
	weft_hier_groups(comm, by_leaf, &gr);
	memset(e, 0, sizeof(*e));
	for (int r = 0; r < MAX_RANKS; r++)
		e->chain_from[r] = e->ring_to[r] = -1;
	return weft_hier_walk(comm, &gr, record, e);
}

/* Who comes before @p r in its group's chain: the group's ranks in ring
 * order from its leader (-1 for the leader), found by walking the ring. */
static int chain_prev(const struct weft_comm *comm, const int *of, const int *leader, int r)
{
	int n = comm->nranks, start = 0, prev = -1;
	for (int p = 0; p < n; p++)
		if (comm->ring[p] == leader[of[r]])
			start = p;
	for (int i = 0; i < n; i++) {
		int x = comm->ring[(start + i) % n];
		if (x == r)
			return prev;
		if (of[x] == of[r])
			prev = x;
	}
	return -2;
}

static void check_walk_host(struct job *j, int trial)
{
	struct weft_comm *c = &j->comm;
	struct edges e;
	int leaders = walk(c, false, &e);
	ck_assert_int_eq(leaders, c->graph.nhosts);
	ck_assert_int_eq(e.nchain, c->nranks - c->graph.nhosts);
	ck_assert_int_eq(e.nring, leaders > 1 ? leaders : 0);
	for (int r = 0; r < c->nranks; r++) {
		struct weft_hier_layout lay;
		c->rank = r;
		weft_hier_layout(c, &lay);
		ck_assert_msg(e.chain_from[r] == lay.chain_prev,
			      "trial %d: rank %d after %d, not %d", trial, r, e.chain_from[r],
			      lay.chain_prev);
		if (lay.chain_pos == 0 && lay.nleaders > 1)
			ck_assert_int_eq(e.ring_to[r], lay.leader_next);
	}
}

static void check_walk_leaf(struct job *j, int trial)
{
	struct weft_comm *c = &j->comm;
	const struct weft_topo_graph *g = &c->graph;
	struct edges e;
	int leaders = walk(c, true, &e);
	ck_assert_msg(leaders == g->nleaves, "trial %d: %d leaf leaders, %d leaves", trial, leaders,
		      g->nleaves);
	ck_assert_int_eq(e.nchain, c->nranks - g->nleaves);
	ck_assert_int_eq(e.nring, leaders > 1 ? leaders : 0);
	for (int r = 0; r < c->nranks; r++) {
		int want = chain_prev(c, g->leaf_of, g->leaf_leader, r);
		ck_assert_msg(e.chain_from[r] == want,
			      "trial %d: rank %d after %d in its leaf, not %d", trial, r,
			      e.chain_from[r], want);
		if (e.chain_from[r] >= 0)
			ck_assert_int_eq(g->leaf_of[e.chain_from[r]], g->leaf_of[r]);
		bool leader = is_leaf_leader(g, r);
		ck_assert_int_eq(e.ring_seen[r], leader && leaders > 1 ? 1 : 0);
		if (leader && leaders > 1)
			ck_assert_int_ne(g->leaf_of[e.ring_to[r]], g->leaf_of[r]);
	}
}

START_TEST(hier_walk_random)
{
	unsigned seed = 13;
	for (int trial = 0; trial < 300; trial++) {
		struct job j;
		int n = 1 + (int)(next(&seed) % MAX_RANKS);
		job_make(&j, n, 1 + (int)(next(&seed) % 12), 1 + (int)(next(&seed) % 5), &seed);
		if (trial % 3 == 0) /* plain rank order: groups not contiguous on the ring */
			weft_topo_ring_order(&j.comm.graph, true, j.ring);
		check_walk_host(&j, trial);
		check_walk_leaf(&j, trial);
		job_free(&j);
	}
}
END_TEST

/* ---- the flow estimate's loads ---- */

static void check_loads(const struct weft_topo_flow *got, const struct weft_topo_flow *want,
			const char *what, int trial)
{
	for (int k = 0; k < WEFT_FLOW_LINK_COUNT; k++)
		for (int i = 0; i < weft_topo_flow_links(got, (enum weft_flow_link)k); i++)
			ck_assert_msg(got->bytes[k][i] == want->bytes[k][i],
				      "trial %d: %s: %s %d carries %g, want %g", trial, what,
				      weft_topo_flow_link_name((enum weft_flow_link)k), i,
				      got->bytes[k][i], want->bytes[k][i]);
}

/* Up equals down, over all hosts and over all leaves. */
static void check_balance(const struct weft_topo_flow *f, const char *what, int trial)
{
	for (int k = 0; k < WEFT_FLOW_LINK_COUNT; k += 2) {
		double up = 0, down = 0;
		for (int i = 0; i < weft_topo_flow_links(f, (enum weft_flow_link)k); i++) {
			up += f->bytes[k][i];
			down += f->bytes[k + 1][i];
		}
		ck_assert_msg(fabs(up - down) <= 1e-9 * fmax(up, 1), "trial %d: %s: %s %g, down %g",
			      trial, what, weft_topo_flow_link_name((enum weft_flow_link)k), up,
			      down);
	}
}

/* The tree AllReduce's loads, each rank placing its trees itself. */
static void tree_by_rank(struct job *j, size_t count, struct weft_topo_flow *want)
{
	struct weft_comm *c = &j->comm;
	double half[2] = {(double)((count + 1) / 2) * 4, (double)(count / 2) * 4};
	for (int p = 0; p < c->nranks; p++) {
		struct weft_tree_node t[2];
		int r = c->ring[p];
		c->rank = r;
		c->ring_pos = p;
		weft_shape_place(&t[0], c, weft_shape_dbtree0, c->ring[0]);
		weft_shape_place(&t[1], c, weft_shape_dbtree1, c->ring[0]);
		for (int k = 0; k < 2 && c->nranks > 1; k++) {
			if (t[k].parent < 0)
				continue;
			weft_topo_flow_add(want, r, t[k].parent, half[k]);
			weft_topo_flow_add(want, t[k].parent, r, half[k]);
		}
	}
}

START_TEST(flow_loads_random)
{
	unsigned seed = 17;
	unsetenv("WEFT_ALGO");
	unsetenv("WEFT_TUNE");
	unsetenv("WEFT_TUNE_CALIBRATE");
	for (int trial = 0; trial < 200; trial++) {
		struct job j;
		struct weft_topo_flow got, want;
		int n = 1 + (int)(next(&seed) % MAX_RANKS);
		size_t count = 1 + next(&seed) % 5000;
		job_make(&j, n, 1 + (int)(next(&seed) % 12), 1 + (int)(next(&seed) % 5), &seed);
		struct weft_coll_args a = {.coll = WEFT_COLL_ALLREDUCE, .count = count, .esize = 4};
		ck_assert_int_eq(weft_topo_flow_init(&got, &j.comm.graph), WEFT_SUCCESS);
		ck_assert_int_eq(weft_topo_flow_init(&want, &j.comm.graph), WEFT_SUCCESS);
		weft_allreduce_tree.flow(&j.comm, &a, &got);
		tree_by_rank(&j, count, &want);
		check_loads(&got, &want, "tree", trial);
		const struct weft_algo *const all[] = {&weft_allreduce_ring, &weft_allreduce_tree,
						       &weft_allreduce_rhd, &weft_allreduce_hier,
						       &weft_allreduce_hier_leaf};
		for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
			weft_topo_flow_clear(&got);
			all[i]->flow(&j.comm, &a, &got);
			check_balance(&got, all[i]->name, trial);
		}
		weft_topo_flow_free(&got);
		weft_topo_flow_free(&want);
		job_free(&j);
	}
}
END_TEST

static Suite *scale_suite(void)
{
	Suite *s = suite_create("topo_scale");
	TCase *tc = tcase_create("against every pair");
	tcase_add_test(tc, class_pairs_random);
	tcase_add_test(tc, class_pairs_corners);
	tcase_add_test(tc, tuner_links_random);
	tcase_add_test(tc, hier_walk_random);
	tcase_add_test(tc, flow_loads_random);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(scale_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
