/*
 * topo.c — the topology graph, placement, hostlists, topology files and
 * Weft's JSON topology files (more of those in json.c), on synthetic inputs and the
 * fixtures under tests/fixtures/topo/, never on the machine the test runs on.
 *
 * Placement sweeps every shape of 1-8 leaves x 1-8 hosts per leaf x 1-8
 * ranks per host, each with a few fixed-seed shuffles of the rank numbers,
 * and checks the ring against its definition: a permutation, every host and
 * every leaf one contiguous block, leaf crossings equal to the number of
 * leaves (0 for one leaf), NUMA order inside a host. A second sweep puts
 * 1-4 leaves under each of 1-4 spines (1-3 hosts x 1-3 ranks) and checks
 * that every spine is one contiguous block and the ring crosses between
 * spines once per spine; with spines unknown the ring is what it was before
 * spines.
 */
#include <check.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "topo/hostlist.h"
#include "topo/topo.h"

/* ---- helpers ------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	/* xorshift64*: deterministic, so a failure reproduces */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void shuffle(int *a, int n)
{
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(rng_next() % (uint64_t)(i + 1));
		int t = a[i];
		a[i] = a[j];
		a[j] = t;
	}
}

static char fixture_dir[PATH_MAX];

/* tests/fixtures/topo from the source tree (harness_source_path: from the
 * working directory, make test's, or above the program). */
static const char *fixture(const char *name)
{
	static char path[PATH_MAX + 64];

	if (!fixture_dir[0] &&
	    !harness_source_path("tests/fixtures/topo", fixture_dir, sizeof(fixture_dir)))
		snprintf(fixture_dir, sizeof(fixture_dir), "tests/fixtures/topo");
	snprintf(path, sizeof(path), "%s/%s", fixture_dir, name);
	return path;
}

/* Checks for the hot loops: Check's ck_assert writes a record per call, and
 * the placement sweep makes millions of them. */
static void require(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void require(bool ok, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (ok)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ck_abort_msg("%s", msg);
}

static void require_eq(long got, long want, const char *what)
{
	require(got == want, "%s: %ld, expected %ld", what, got, want);
}

/* A synthetic job: cards and host ids for up to 512 ranks. */
#define MAX_RANKS 512

struct job {
	int n;
	struct weft_topo_card cards[MAX_RANKS];
	char host_id[MAX_RANKS][32];
	char hostname[MAX_RANKS][32];
	struct weft_topo_rank ranks[MAX_RANKS];
	int exp_host[MAX_RANKS]; /* the host, leaf and spine the test put each rank on */
	int exp_leaf[MAX_RANKS];
	int exp_spine[MAX_RANKS]; /* -1: no spine named */
};

static void job_rank(struct job *j, int r, int leaf, int host, bool leaf_known, int numa)
{
	struct weft_topo_card *c = &j->cards[r];
	memset(c, 0, sizeof(*c));
	c->numa = numa;
	c->nic_numa = -1;
	if (leaf_known) {
		snprintf(c->leaf_name, sizeof(c->leaf_name), "leaf%d", leaf);
		c->leaf_source = WEFT_LEAF_LLDP;
	}
	snprintf(j->host_id[r], sizeof(j->host_id[r]), "h%d.%d#boot", leaf, host);
	snprintf(j->hostname[r], sizeof(j->hostname[r]), "h%d-%d", leaf, host);
	j->ranks[r] = (struct weft_topo_rank){j->host_id[r], j->hostname[r], c};
}

static void job_spine(struct job *j, int r, int spine)
{
	snprintf(j->cards[r].spine, sizeof(j->cards[r].spine), "spine%d", spine);
}

/* S spines x L leaves x H hosts x R ranks, rank numbers shuffled; NUMA
 * nodes random in {-1, 0, 1}. Without @p spine_known no card names a
 * spine. */
static void make_spine_job(struct job *j, int S, int L, int H, int R, bool leaf_known,
			   bool spine_known)
{
	int perm[MAX_RANKS];
	j->n = S * L * H * R;
	for (int s = 0; s < j->n; s++)
		perm[s] = s;
	shuffle(perm, j->n);
	for (int s = 0; s < j->n; s++) {
		int leaf = s / (H * R), host = s / R;
		int r = perm[s];
		job_rank(j, r, leaf, host % H, leaf_known, (int)(rng_next() % 3) - 1);
		j->exp_host[r] = host;
		j->exp_leaf[r] = leaf_known ? leaf : host;
		j->exp_spine[r] = spine_known ? leaf / L : -1;
		if (spine_known)
			job_spine(j, r, leaf / L);
	}
}

/* L leaves x H hosts x R ranks, no spine known. */
static void make_job(struct job *j, int L, int H, int R, bool leaf_known)
{
	make_spine_job(j, 1, L, H, R, leaf_known, false);
}

/* The graph's numbering agrees with the test's (a bijection), is by first
 * rank, and its leaders are the lowest ranks. */
static void check_numbering(int n, const int *got, const int *want, int ngot, int nwant,
			    const int *leader, const char *what)
{
	int g2w[MAX_RANKS], w2g[MAX_RANKS], next = 0;

	require(ngot == nwant, "%s: %d, expected %d", what, ngot, nwant);
	for (int i = 0; i < n; i++)
		g2w[i] = w2g[i] = -1;
	for (int r = 0; r < n; r++) {
		int g = got[r], w = want[r];
		require(g >= 0 && g < ngot, "%s %d of rank %d out of range", what, g, r);
		if (g2w[g] < 0) {
			require(g == next, "%s %d first seen at rank %d, expected %d", what, g, r,
				next);
			require(leader[g] == r, "%s %d: leader %d, expected %d", what, g, leader[g],
				r);
			next++;
			require(w2g[w] < 0, "%s: two graph indices for one", what);
			g2w[g] = w;
			w2g[w] = g;
		}
		require(g2w[g] == w && w2g[w] == g, "%s of rank %d mismatched", what, r);
	}
}

/* Blocks: how many times the cyclic sequence changes value. */
static int cyclic_changes(const int *order, int n, const int *of)
{
	int changes = 0;
	for (int i = 0; i < n; i++)
		changes += of[order[i]] != of[order[(i + 1) % n]];
	return changes;
}

static int numa_key(int numa)
{
	return numa >= 0 ? numa : INT_MAX;
}

static int spine_of(const struct weft_topo_graph *g, int r)
{
	return g->leaf_spine[g->leaf_of[r]];
}

/* The ring's sort key, compared: (spine, unknown last; leaf; host; NUMA
 * node, unknown last; rank). With no spine known, the key before spines. */
static int ring_key_cmp(const struct weft_topo_graph *g, int a, int b)
{
	int ka[5] = {numa_key(spine_of(g, a)), g->leaf_of[a], g->host_of[a],
		     numa_key(g->numa_of[a]), a};
	int kb[5] = {numa_key(spine_of(g, b)), g->leaf_of[b], g->host_of[b],
		     numa_key(g->numa_of[b]), b};
	for (int i = 0; i < 5; i++)
		if (ka[i] != kb[i])
			return ka[i] < kb[i] ? -1 : 1;
	return 0;
}

/* Spine crossings along a ring, counted from their definition. */
static int spine_changes(const struct weft_topo_graph *g, const int *order)
{
	int n = g->nranks, changes = 0;
	for (int i = 0; i < n; i++) {
		int a = spine_of(g, order[i]), b = spine_of(g, order[(i + 1) % n]);
		changes += a != b; /* known vs unknown counts; unknown vs unknown is -1 == -1 */
	}
	return changes;
}

/* Every spine one contiguous block, after them the leaves of unknown spine,
 * so the ring crosses between spines once per spine when every leaf knows
 * its spine. */
static void check_ring_spines(const struct weft_topo_graph *g, const int *order)
{
	int blocks = g->nspines;
	bool unknown = false;

	for (int l = 0; l < g->nleaves; l++)
		unknown = unknown || g->leaf_spine[l] < 0;
	if (unknown && g->nspines > 0)
		blocks++;
	require_eq(spine_changes(g, order), blocks >= 2 ? blocks : 0,
		   "spine changes along the ring");
	require_eq(weft_topo_ring_spine_crossings(g, order), spine_changes(g, order),
		   "spine crossings");
	if (!unknown)
		require_eq(weft_topo_ring_spine_crossings(g, order),
			   g->nspines >= 2 ? g->nspines : 0, "spine crossings, all known");
	if (g->nspines == 0)
		require_eq(weft_topo_ring_spine_crossings(g, order), 0,
			   "spine crossings, none known");
}

static void check_ring(const struct weft_topo_graph *g)
{
	int order[MAX_RANKS], seen[MAX_RANKS] = {0};
	int n = g->nranks;

	weft_topo_ring_order(g, false, order);
	for (int i = 0; i < n; i++) {
		require(order[i] >= 0 && order[i] < n, "ring[%d] = %d", i, order[i]);
		require(!seen[order[i]]++, "rank %d twice in the ring", order[i]);
	}
	/* Each host (leaf) one contiguous block: as many changes as blocks. */
	require_eq(cyclic_changes(order, n, g->host_of), g->nhosts >= 2 ? g->nhosts : 0,
		   "host changes along the ring");
	require_eq(cyclic_changes(order, n, g->leaf_of), g->nleaves >= 2 ? g->nleaves : 0,
		   "leaf changes along the ring");
	require_eq(weft_topo_ring_crossings(g, order), g->nleaves >= 2 ? g->nleaves : 0,
		   "crossings");
	for (int i = 0; i + 1 < n; i++) {
		int a = order[i], b = order[i + 1];
		require(ring_key_cmp(g, a, b) < 0, "ranks %d, %d out of ring order", a, b);
		if (g->host_of[a] != g->host_of[b])
			continue;
		int ka = numa_key(g->numa_of[a]), kb = numa_key(g->numa_of[b]);
		require(ka < kb || (ka == kb && a < b), "ranks %d, %d out of NUMA order", a, b);
	}
	check_ring_spines(g, order);

	weft_topo_ring_order(g, true, order);
	for (int i = 0; i < n; i++)
		require_eq(order[i], i, "by-rank ring position");
	require_eq(weft_topo_ring_crossings(g, order), cyclic_changes(order, n, g->leaf_of),
		   "by-rank crossings");
}

/* Spines: -1 exactly where the test named none; otherwise numbered by
 * first rank, one graph spine per test spine, named as the cards name it. */
static void check_spine_numbering(const struct job *j, const struct weft_topo_graph *g)
{
	int g2w[MAX_RANKS], next = 0;
	char want[WEFT_TOPO_NAME_BYTES];

	for (int s = 0; s < j->n; s++)
		g2w[s] = -1;
	for (int r = 0; r < j->n; r++) {
		int got = spine_of(g, r), w = j->exp_spine[r];
		if (w < 0) {
			require_eq(got, -1, "spine of a rank that names none");
			continue;
		}
		require(got >= 0 && got < g->nspines, "spine %d of rank %d out of range", got, r);
		if (g2w[got] < 0) {
			require(got == next, "spine %d first seen at rank %d, expected %d", got, r,
				next);
			for (int s = 0; s < next; s++)
				require(g2w[s] != w, "spine%d under two graph indices", w);
			g2w[got] = w;
			next++;
			snprintf(want, sizeof(want), "spine%d", w);
			require(strcmp(g->spine_name[got], want) == 0,
				"spine %d named %s, expected %s", got, g->spine_name[got], want);
		}
		require(g2w[got] == w, "spine of rank %d mismatched", r);
	}
	require_eq(g->nspines, next, "nspines");
}

static void check_job(struct job *j)
{
	struct weft_topo_graph g;
	struct weft_err err = {0};

	require_eq(weft_topo_graph_build(&g, j->n, j->ranks, &err), WEFT_SUCCESS, err.msg);
	require_eq(g.nranks, j->n, "nranks");
	int nhosts = 0, nleaves = 0;
	for (int r = 0; r < j->n; r++) {
		nhosts = j->exp_host[r] + 1 > nhosts ? j->exp_host[r] + 1 : nhosts;
		nleaves = j->exp_leaf[r] + 1 > nleaves ? j->exp_leaf[r] + 1 : nleaves;
	}
	check_numbering(j->n, g.host_of, j->exp_host, g.nhosts, nhosts, g.host_leader, "host");
	check_numbering(j->n, g.leaf_of, j->exp_leaf, g.nleaves, nleaves, g.leaf_leader, "leaf");
	check_spine_numbering(j, &g);
	for (int r = 0; r < j->n; r++)
		require_eq(g.numa_of[r], j->cards[r].numa, "numa_of");
	check_ring(&g);
	weft_topo_graph_free(&g);
}

/* ---- placement ----------------------------------------------------------- */

START_TEST(test_placement_sweep)
{
	static struct job j;
	int L = _i + 1;

	rng_state = 0x9e3779b97f4a7c15ull + (uint64_t)L;
	for (int H = 1; H <= 8; H++) {
		for (int R = 1; R <= 8; R++) {
			for (int shuffles = 0; shuffles < 3; shuffles++) {
				make_job(&j, L, H, R, true);
				check_job(&j);
			}
			make_job(&j, L, H, R, false); /* unknown leaves: one per host */
			check_job(&j);
		}
	}
}
END_TEST

START_TEST(test_placement_spine_sweep)
{
	static struct job j;
	int S = _i + 1;

	rng_state = 0x5bd1e9955bd1e995ull + (uint64_t)S;
	for (int L = 1; L <= 4; L++) {
		for (int H = 1; H <= 3; H++) {
			for (int R = 1; R <= 3; R++) {
				for (int shuffles = 0; shuffles < 3; shuffles++) {
					make_spine_job(&j, S, L, H, R, true, true);
					check_job(&j);
				}
				make_spine_job(&j, S, L, H, R, true, false); /* as before spines */
				check_job(&j);
				make_spine_job(&j, S, L, H, R, false, true); /* host leaves */
				check_job(&j);
			}
		}
	}
}
END_TEST

START_TEST(test_placement_spine_mixed)
{
	/*
	 * Leaf 0 (host 0: ranks 0, 4): rank 0 names no spine, rank 4 names
	 * spine2, so leaf 0 is under spine2, and spine2 is spine 0 (it holds
	 * rank 0). Leaf 1 (host 1: ranks 1, 5): spine1. Leaf 2 (host 2: rank
	 * 2): no spine. Leaf 3 (host 3: rank 3): spine2. Host 1's rank 5 names
	 * leaf 9 under spine 7: its host is under leaf 1, so it says nothing of
	 * leaf 1's spine, and spine7 never appears.
	 */
	static struct job j;
	struct weft_topo_graph g;
	struct weft_err err = {0};
	int order[6];
	static const int want_order[6] = {0, 4, 3, 1, 5, 2};

	job_rank(&j, 0, 0, 0, true, 0);
	job_rank(&j, 1, 1, 1, true, 0);
	job_rank(&j, 2, 2, 2, true, 0);
	job_rank(&j, 3, 3, 3, true, 0);
	job_rank(&j, 4, 0, 0, true, 0);
	job_rank(&j, 5, 9, 1, true, 0);
	snprintf(j.host_id[5], sizeof(j.host_id[5]), "%s", j.host_id[1]);
	job_spine(&j, 4, 2);
	job_spine(&j, 5, 7);
	job_spine(&j, 1, 1);
	job_spine(&j, 3, 2);
	ck_assert_int_eq(weft_topo_graph_build(&g, 6, j.ranks, &err), WEFT_SUCCESS);
	ck_assert_int_eq(g.nleaves, 4);
	ck_assert_int_eq(g.nspines, 2);
	ck_assert_str_eq(g.spine_name[0], "spine2");
	ck_assert_str_eq(g.spine_name[1], "spine1");
	ck_assert_int_eq(g.leaf_spine[0], 0);
	ck_assert_int_eq(g.leaf_spine[1], 1);
	ck_assert_int_eq(g.leaf_spine[2], -1);
	ck_assert_int_eq(g.leaf_spine[3], 0);
	weft_topo_ring_order(&g, false, order);
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(order[i], want_order[i]);
	/* spine2 -> spine1 -> unknown -> spine2 */
	ck_assert_int_eq(weft_topo_ring_spine_crossings(&g, order), 3);
	ck_assert_int_eq(weft_topo_ring_crossings(&g, order), 4);
	check_ring(&g);
	weft_topo_graph_free(&g);

	/* One spine and one unknown: in and out of the unknown block. */
	job_rank(&j, 0, 0, 0, true, 0);
	job_rank(&j, 1, 1, 1, true, 0);
	job_spine(&j, 1, 1);
	ck_assert_int_eq(weft_topo_graph_build(&g, 2, j.ranks, &err), WEFT_SUCCESS);
	ck_assert_int_eq(g.nspines, 1);
	weft_topo_ring_order(&g, false, order);
	ck_assert_int_eq(order[0], 1);
	ck_assert_int_eq(order[1], 0);
	ck_assert_int_eq(weft_topo_ring_spine_crossings(&g, order), 2);
	weft_topo_graph_free(&g);

	/* A spine name filling the card field without a NUL is read to its size. */
	job_rank(&j, 0, 0, 0, true, 0);
	memset(j.cards[0].spine, 's', WEFT_TOPO_NAME_BYTES);
	ck_assert_int_eq(weft_topo_graph_build(&g, 1, j.ranks, &err), WEFT_SUCCESS);
	ck_assert_int_eq(g.nspines, 1);
	ck_assert_int_eq((int)strlen(g.spine_name[0]), WEFT_TOPO_NAME_BYTES - 1);
	weft_topo_ring_order(&g, false, order);
	ck_assert_int_eq(weft_topo_ring_spine_crossings(&g, order), 0);
	weft_topo_graph_free(&g);
}
END_TEST

START_TEST(test_placement_interleaved)
{
	/* The fabric test's shape: rank r on leaf r % 2. */
	static struct job j;
	struct weft_topo_graph g;
	struct weft_err err = {0};
	int order[4];

	for (int r = 0; r < 4; r++)
		job_rank(&j, r, r % 2, r, true, 0);
	ck_assert_int_eq(weft_topo_graph_build(&g, 4, j.ranks, &err), WEFT_SUCCESS);
	ck_assert_int_eq(g.nleaves, 2);
	weft_topo_ring_order(&g, true, order);
	ck_assert_int_eq(weft_topo_ring_crossings(&g, order), 4);
	weft_topo_ring_order(&g, false, order);
	ck_assert_int_eq(weft_topo_ring_crossings(&g, order), 2);
	ck_assert_int_eq(order[0], 0);
	ck_assert_int_eq(order[1], 2);
	ck_assert_int_eq(order[2], 1);
	ck_assert_int_eq(order[3], 3);
	weft_topo_graph_free(&g);
}
END_TEST

START_TEST(test_placement_mixed_knowledge)
{
	/* Hosts 0 and 2 know leaf0; host 1 knows nothing: it is its own leaf,
	 * and a host takes its leaf from its lowest rank that knows one. */
	static struct job j;
	struct weft_topo_graph g;
	struct weft_err err = {0};

	job_rank(&j, 0, 0, 0, true, 0);
	job_rank(&j, 1, 0, 1, false, 0);
	job_rank(&j, 2, 0, 2, false, 0); /* host 2's first rank knows nothing ... */
	job_rank(&j, 3, 0, 2, true, 0);	 /* ... its second does */
	job_rank(&j, 4, 7, 0, true, 0);	 /* host 0 again, naming another leaf: ignored */
	snprintf(j.host_id[4], sizeof(j.host_id[4]), "%s", j.host_id[0]);
	ck_assert_int_eq(weft_topo_graph_build(&g, 5, j.ranks, &err), WEFT_SUCCESS);
	ck_assert_int_eq(g.nhosts, 3);
	ck_assert_int_eq(g.nleaves, 2);
	ck_assert_int_eq(g.leaf_of[0], 0);
	ck_assert_int_eq(g.leaf_of[1], 1);
	ck_assert_int_eq(g.leaf_of[2], 0);
	ck_assert_int_eq(g.leaf_of[3], 0);
	ck_assert_int_eq(g.leaf_of[4], 0);
	ck_assert_str_eq(g.leaf_name[0], "leaf0");
	ck_assert_int_eq(g.leaf_source[0], WEFT_LEAF_LLDP);
	ck_assert_str_eq(g.leaf_name[1], "host:h0-1");
	ck_assert_int_eq(g.leaf_source[1], WEFT_LEAF_NONE);
	ck_assert_int_eq(g.leaf_leader[1], 1);
	check_ring(&g);
	weft_topo_graph_free(&g);
}
END_TEST

START_TEST(test_graph_leaf_identity)
{
	/* leaf_id wins over leaf_name as the key; leaf_name wins for display;
	 * card fields without a NUL are read to their size. */
	static struct job j;
	struct weft_topo_graph g;
	struct weft_err err = {0};

	job_rank(&j, 0, 0, 0, true, 0);
	job_rank(&j, 1, 1, 1, true, 0);
	job_rank(&j, 2, 2, 2, false, 0);
	job_rank(&j, 3, 3, 3, false, 0);
	snprintf(j.cards[0].leaf_id, WEFT_TOPO_NAME_BYTES, "00:11:22:33:44:55");
	snprintf(j.cards[1].leaf_id, WEFT_TOPO_NAME_BYTES, "00:11:22:33:44:55");
	memset(j.cards[2].leaf_id, 'x', WEFT_TOPO_NAME_BYTES);
	memset(j.cards[3].leaf_id, 'x', WEFT_TOPO_NAME_BYTES);
	j.ranks[3].hostname = NULL;
	ck_assert_int_eq(weft_topo_graph_build(&g, 4, j.ranks, &err), WEFT_SUCCESS);
	ck_assert_int_eq(g.nleaves, 2);
	ck_assert_int_eq(g.leaf_of[1], 0);
	ck_assert_int_eq(g.leaf_of[3], 1);
	ck_assert_str_eq(g.leaf_name[0], "leaf0");
	ck_assert_int_eq((int)strlen(g.leaf_name[1]), WEFT_TOPO_NAME_BYTES - 1);
	weft_topo_graph_free(&g);

	/* Unknown everywhere, no hostname: the display falls back to host id. */
	job_rank(&j, 0, 0, 0, false, 0);
	j.ranks[0].hostname = NULL;
	ck_assert_int_eq(weft_topo_graph_build(&g, 1, j.ranks, &err), WEFT_SUCCESS);
	ck_assert_str_eq(g.leaf_name[0], "host:h0.0#boot");
	int order[1];
	weft_topo_ring_order(&g, false, order);
	ck_assert_int_eq(order[0], 0);
	ck_assert_int_eq(weft_topo_ring_crossings(&g, order), 0);
	weft_topo_graph_free(&g);
	weft_topo_graph_free(&g); /* freeing twice is harmless */
}
END_TEST

START_TEST(test_graph_bad_input)
{
	static struct job j;
	struct weft_topo_graph g;
	struct weft_err err = {0};

	ck_assert_int_eq(weft_topo_graph_build(&g, 0, j.ranks, &err), WEFT_ERR_INVALID_ARG);
	weft_topo_graph_free(&g);
	weft_err_clear(&err);
	job_rank(&j, 0, 0, 0, true, 0);
	job_rank(&j, 1, 0, 0, true, 0);
	j.ranks[1].card = NULL;
	ck_assert_int_eq(weft_topo_graph_build(&g, 2, j.ranks, &err), WEFT_ERR_INVALID_ARG);
	ck_assert_ptr_nonnull(strstr(err.msg, "rank 1"));
	weft_topo_graph_free(&g);
}
END_TEST

/* ---- link classes -------------------------------------------------------- */

START_TEST(test_link_classes)
{
	static struct job j;
	struct weft_topo_graph g;
	struct weft_err err = {0};

	/* host A (leaf 0): ranks 0, 1 on NUMA 0, 2 on NUMA 1, 3 unknown;
	 * host B (leaf 0): rank 4; host C (leaf 1): rank 5, 6 both unknown. */
	job_rank(&j, 0, 0, 0, true, 0);
	job_rank(&j, 1, 0, 0, true, 0);
	job_rank(&j, 2, 0, 0, true, 1);
	job_rank(&j, 3, 0, 0, true, -1);
	job_rank(&j, 4, 0, 1, true, 0);
	job_rank(&j, 5, 1, 0, true, -1);
	job_rank(&j, 6, 1, 0, true, -1);
	ck_assert_int_eq(weft_topo_graph_build(&g, 7, j.ranks, &err), WEFT_SUCCESS);

	static const struct {
		int a, b;
		enum weft_link_class c;
	} cases[] = {
	    {0, 0, WEFT_LINK_SELF},  {0, 1, WEFT_LINK_NUMA},  {0, 2, WEFT_LINK_HOST},
	    {0, 3, WEFT_LINK_HOST},  {3, 3, WEFT_LINK_SELF},  {5, 6, WEFT_LINK_HOST},
	    {0, 4, WEFT_LINK_LEAF},  {2, 4, WEFT_LINK_LEAF},  {0, 5, WEFT_LINK_SPINE},
	    {4, 6, WEFT_LINK_SPINE}, {0, 7, WEFT_LINK_SPINE}, {-1, 0, WEFT_LINK_SPINE},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(weft_topo_link(&g, cases[i].a, cases[i].b), cases[i].c);
		ck_assert_int_eq(weft_topo_link(&g, cases[i].b, cases[i].a), cases[i].c);
	}
	ck_assert_str_eq(weft_topo_link_name(WEFT_LINK_SELF), "self");
	ck_assert_str_eq(weft_topo_link_name(WEFT_LINK_NUMA), "numa");
	ck_assert_str_eq(weft_topo_link_name(WEFT_LINK_HOST), "host");
	ck_assert_str_eq(weft_topo_link_name(WEFT_LINK_LEAF), "leaf");
	ck_assert_str_eq(weft_topo_link_name(WEFT_LINK_SPINE), "spine");
	ck_assert_str_eq(weft_topo_link_name(WEFT_LINK_CLASS_COUNT), "unknown");
	weft_topo_graph_free(&g);
}
END_TEST

/* ---- hostlists ----------------------------------------------------------- */

struct names {
	char buf[4096];
	size_t len;
	int count;
};

static weft_status_t collect(void *ctx, const char *name)
{
	struct names *n = ctx;
	n->len += (size_t)snprintf(n->buf + n->len, sizeof(n->buf) - n->len, "%s%s",
				   n->count++ ? " " : "", name);
	return WEFT_SUCCESS;
}

static const char *expand(const char *expr, struct names *n, char *why, size_t why_len)
{
	memset(n, 0, sizeof(*n));
	why[0] = '\0';
	if (weft_hostlist_expand(expr, WEFT_HOSTLIST_MAX_HOSTS, collect, n, why, why_len) !=
	    WEFT_SUCCESS)
		return NULL;
	return n->buf;
}

START_TEST(test_hostlist_good)
{
	static const char *const cases[][2] = {
	    {"a", "a"},
	    {"a,b", "a b"},
	    {"node[01-03,20]", "node01 node02 node03 node20"},
	    {"node[8-10]", "node8 node9 node10"},
	    {"node[08-10]", "node08 node09 node10"},
	    {"tux[1-3]x", "tux1x tux2x tux3x"},
	    {"rack[1-2]-n[1-2]", "rack1-n1 rack1-n2 rack2-n1 rack2-n2"},
	    {"a[1],b[2-3],c", "a1 b2 b3 c"},
	    {"[1-2]", "1 2"},
	    {"n[007]", "n007"},
	    {"host.example.com", "host.example.com"},
	};
	struct names n;
	char why[128];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = expand(cases[i][0], &n, why, sizeof(why));
		ck_assert_msg(got, "%s: %s", cases[i][0], why);
		ck_assert_str_eq(got, cases[i][1]);
	}
}
END_TEST

START_TEST(test_hostlist_bad)
{
	static const char *const cases[][2] = {
	    {"node[5-3]", "backwards"},
	    {"node[1-", "without ']'"},
	    {"node[1-]", "no upper bound"},
	    {"node[]", "empty brackets"},
	    {"node[a-b]", "expected a number"},
	    {"node[1--3]", "no upper bound"},
	    {"node[1,]", "trailing ','"},
	    {"node[[1]]", "nested"},
	    {"node]1[", "']' without '['"},
	    {"a,,b", "empty name"},
	    {"a,", "empty name"},
	    {"", "empty name"},
	    {"n[0-1000000]", "more than 1000000"},
	    {"n[1-1000]x[1-1001]", "more than 1000000"},
	    {"n[0-999999],m[0-1]", "more than 1000000"},
	    {"n[1234567890]", "at most 9 digits"},
	    {"n[1-2]3[4]5[6]7[8]9[0]a[1]b[2]c[3]d[4]", "bracket groups"},
	};
	struct names n;
	char why[128];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_msg(!expand(cases[i][0], &n, why, sizeof(why)), "%s expanded",
			      cases[i][0]);
		ck_assert_msg(strstr(why, cases[i][1]), "%s: \"%s\" lacks \"%s\"", cases[i][0], why,
			      cases[i][1]);
		ck_assert_int_eq(n.count, 0); /* nothing emitted from a bad list */
	}
}
END_TEST

/* ---- topology files ------------------------------------------------------ */

static struct weft_topo_file *load_ok(const char *name)
{
	struct weft_topo_file *f = NULL;
	struct weft_err err = {0};
	weft_status_t st = weft_topo_file_load(fixture(name), &f, &err);
	ck_assert_msg(st == WEFT_SUCCESS, "%s: %s", name, err.msg);
	ck_assert_ptr_nonnull(f);
	return f;
}

static void expect_host(const struct weft_topo_file *f, const char *host, const char *leaf,
			const char *spine)
{
	char l[WEFT_TOPO_NAME_BYTES], s[WEFT_TOPO_NAME_BYTES];
	bool found = weft_topo_file_lookup(f, host, l, sizeof(l), s, sizeof(s));
	if (!leaf) {
		ck_assert_msg(!found, "%s found under %s", host, l);
		return;
	}
	ck_assert_msg(found, "%s not found", host);
	ck_assert_str_eq(l, leaf);
	ck_assert_str_eq(s, spine);
}

START_TEST(test_conf_tree)
{
	struct weft_topo_file *f = load_ok("good_tree.conf");
	char name[32];

	for (int i = 1; i <= 16; i++) {
		snprintf(name, sizeof(name), "node%02d", i);
		expect_host(f, name, "leaf1", "spine1");
	}
	expect_host(f, "node20", "leaf1", "spine1");
	expect_host(f, "node17", NULL, NULL);
	expect_host(f, "node1", NULL, NULL); /* padding is part of the name */
	expect_host(f, "tux1x", "leaf2", "spine1");
	expect_host(f, "tux3x", "leaf2", "spine1");
	expect_host(f, "alpha", "leaf2", "spine1");
	expect_host(f, "beta.example.com", "leaf2", "spine1");
	expect_host(f, "rack1-n1", "leaf3", "spine2");
	expect_host(f, "rack2-n2", "leaf3", "spine2");
	/* short names, both ways */
	expect_host(f, "node05.cluster.example", "leaf1", "spine1");
	expect_host(f, "beta", "leaf2", "spine1");
	expect_host(f, "alpha.x", "leaf2", "spine1");
	expect_host(f, "bet", NULL, NULL);
	expect_host(f, "beta.other", NULL, NULL);
	/* switches are not hosts */
	expect_host(f, "leaf1", NULL, NULL);
	expect_host(f, "core", NULL, NULL);
	expect_host(f, "", NULL, NULL);
	/* small output buffers truncate, never overflow */
	char tiny[3];
	ck_assert(weft_topo_file_lookup(f, "node01", tiny, sizeof(tiny), NULL, 0));
	ck_assert_str_eq(tiny, "le");
	weft_topo_file_free(f);
	weft_topo_file_free(NULL);
}
END_TEST

START_TEST(test_conf_block)
{
	struct weft_topo_file *f = load_ok("good_block.conf");
	expect_host(f, "gpu000", "b1", "");
	expect_host(f, "gpu003", "b1", "");
	expect_host(f, "gpu004", "b2", "");
	expect_host(f, "gpu011", "b2", "");
	expect_host(f, "gpu008", NULL, NULL);
	weft_topo_file_free(f);
}
END_TEST

START_TEST(test_conf_large)
{
	struct weft_topo_file *f = load_ok("good_large.conf");
	expect_host(f, "n0000", "big1", "top");
	expect_host(f, "n9999", "big1", "top");
	expect_host(f, "m1", "big2", "top");
	expect_host(f, "m5000", "big2", "top");
	expect_host(f, "rack20-gpu50", "big2", "top");
	expect_host(f, "rack21-gpu01", NULL, NULL);
	weft_topo_file_free(f);
}
END_TEST

static const struct {
	const char *file;
	/* Where the message says the fault is, after the path: ":LINE: " (conf),
	 * ":LINE:COLUMN: " (JSON syntax, from jansson), ": ranks[I]" (JSON
	 * content); NULL: the message names the file only. */
	const char *at;
	const char *says;
} bad_files[] = {
    {"bad_backwards.conf", ":2: ", "backwards"},
    {"bad_unterminated.conf", ":3: ", "without ']'"},
    {"bad_huge.conf", ":2: ", "more than 1000000"},
    {"bad_unknown_key.conf", ":4: ", "Nodez"},
    {"bad_two_leaves.conf", ":3: ", "node4"},
    {"bad_empty.conf", NULL, "empty"},
    {"bad_comments_only.conf", NULL, "no SwitchName"},
    {"bad_no_value.conf", ":1: ", "no value"},
    {"bad_unknown_child.conf", ":3: ", "leaf3"},
    {"bad_dup_switch.conf", ":3: ", "defined again"},
    {"bad_no_equals.conf", ":1: ", "KEY=VALUE"},
    {"bad_bracket.conf", ":2: ", "']' without '['"},
    {"bad_no_name.conf", ":1: ", "no SwitchName"},
    {"bad_empty_name.conf", ":1: ", "empty name"},
    {"bad_syntax.json", ":4:5: ", "']' expected near '{'"},
    {"bad_trailing_comma.json", ":5:3: ", "unexpected token near ']'"},
    {"bad_schema.json", ": ", "\"ranks\" must be an array, not object"},
    {"bad_two_leaves.json", ": ranks[2]: ",
     "host h1 is under leaf leaf2 here but under leaf "
     "leaf1 at ranks[0]"},
    {"bad_string.json", ":3:36: ", "'}' expected near 'leaf'"},
    {"bad_dup_key.json", ":4:13: ", "duplicate object key near '\"hostname\"'"},
    {"bad_leaf_type.json", ": ranks[1]: ", "\"leaf\" must be a string, not number"},
    {"no_such_file.conf", NULL, "No such file"},
};

START_TEST(test_bad_files)
{
	struct weft_topo_file *f = (void *)1;
	struct weft_err err = {0};
	const char *path = fixture(bad_files[_i].file);
	char where[PATH_MAX + 80];

	weft_status_t st = weft_topo_file_load(path, &f, &err);
	ck_assert_msg(st != WEFT_SUCCESS, "%s loaded", path);
	ck_assert_int_eq(st, strstr(path, "no_such") ? WEFT_ERR_SYSTEM : WEFT_ERR_INVALID_ARG);
	ck_assert_ptr_null(f);
	snprintf(where, sizeof(where), "%s%s", path, bad_files[_i].at ? bad_files[_i].at : "");
	ck_assert_msg(strstr(err.msg, where), "\"%s\" does not name \"%s\"", err.msg, where);
	ck_assert_msg(strstr(err.msg, bad_files[_i].says), "\"%s\" does not say \"%s\"", err.msg,
		      bad_files[_i].says);
}
END_TEST

START_TEST(test_json_dump)
{
	struct weft_topo_file *f = load_ok("good_dump.json");
	expect_host(f, "h1", "leaf1", "");
	expect_host(f, "h1.example.com", "leaf1", "");
	expect_host(f, "h3.example.com", "leaf2", "spine1");
	expect_host(f, "h3", "leaf2", "spine1");
	expect_host(f, "h4", "leaf\"2\\", ""); /* no hostname: "host"; escapes */
	expect_host(f, "h5", NULL, NULL);      /* leaf_source "none" */
	expect_host(f, "h6", NULL, NULL);      /* leaf null */
	weft_topo_file_free(f);
}
END_TEST

/* Write what weft-topo writes, for a graph, and read it back. */
START_TEST(test_json_round_trip)
{
	static struct job j;
	struct weft_topo_graph g;
	struct weft_topo_file *f;
	struct weft_err err = {0};
	char path[] = "/tmp/weft_topo_XXXXXX";
	int order[MAX_RANKS], fd;
	FILE *fp;

	rng_state = 42;
	make_job(&j, 3, 4, 2, true);
	ck_assert_int_eq(weft_topo_graph_build(&g, j.n, j.ranks, &err), WEFT_SUCCESS);
	weft_topo_ring_order(&g, false, order);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	fp = fdopen(fd, "w");
	fprintf(fp, "{\n  \"ranks\": [\n");
	for (int r = 0; r < g.nranks; r++)
		fprintf(fp,
			"    {\"rank\": %d, \"host\": \"%s\", \"hostname\": \"%s\", \"leaf\": "
			"\"%s\", \"leaf_source\": \"lldp\", \"numa\": %d}%s\n",
			r, j.host_id[r], j.hostname[r], g.leaf_name[g.leaf_of[r]], g.numa_of[r],
			r + 1 < g.nranks ? "," : "");
	fprintf(fp, "  ],\n  \"ring\": {\"order\": [");
	for (int i = 0; i < g.nranks; i++)
		fprintf(fp, "%s%d", i ? ", " : "", order[i]);
	fprintf(fp, "], \"leaf_crossings\": %d}\n}\n", weft_topo_ring_crossings(&g, order));
	fclose(fp);

	ck_assert_int_eq(weft_topo_file_load(path, &f, &err), WEFT_SUCCESS);
	for (int r = 0; r < g.nranks; r++)
		expect_host(f, j.hostname[r], g.leaf_name[g.leaf_of[r]], "");
	weft_topo_file_free(f);
	unlink(path);
	weft_topo_graph_free(&g);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *topo_suite(void)
{
	Suite *s = suite_create("topo");
	TCase *tc = tcase_create("placement");

	tcase_add_loop_test(tc, test_placement_sweep, 0, 8);
	tcase_add_loop_test(tc, test_placement_spine_sweep, 0, 4);
	tcase_add_test(tc, test_placement_spine_mixed);
	tcase_add_test(tc, test_placement_interleaved);
	tcase_add_test(tc, test_placement_mixed_knowledge);
	tcase_add_test(tc, test_graph_leaf_identity);
	tcase_add_test(tc, test_graph_bad_input);
	tcase_add_test(tc, test_link_classes);
	suite_add_tcase(s, tc);

	tc = tcase_create("hostlist");
	tcase_add_test(tc, test_hostlist_good);
	tcase_add_test(tc, test_hostlist_bad);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_add_test(tc, test_conf_tree);
	tcase_add_test(tc, test_conf_block);
	tcase_add_test(tc, test_conf_large);
	tcase_add_loop_test(tc, test_bad_files, 0, (int)(sizeof(bad_files) / sizeof(bad_files[0])));
	tcase_add_test(tc, test_json_dump);
	tcase_add_test(tc, test_json_round_trip);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(topo_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
