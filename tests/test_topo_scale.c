/*
 * test_topo_scale.c — what replaced pair-by-pair loops, against the
 * pair-by-pair answer on small jobs:
 *   - weft_topo_class_pairs (pairs per link class from the graph's groups)
 *     against weft_topo_link over every pair, on random jobs: 1..40 ranks on
 *     random hosts, leaves and NUMA nodes (some unknown, some far apart),
 *     plus the corners (one rank, one host, every rank its own leaf);
 *   - the tuner's slowest links (worst, intra_host, inter_host), computed
 *     from those counts, against the slowest class over every pair, every
 *     pair on one host and every pair of host leaders.
 * Random jobs use a fixed seed, so a failure names a job that fails again.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
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

/* The slowest cost over pairs (a < b) that @p which admits: 0 any, 1 one
 * host, 2 host leaders; as the tuner computed it before. */
static struct weft_cost brute_worst(const struct weft_comm *comm, int which)
{
	const struct weft_topo_graph *g = &comm->graph;
	const struct weft_cost *cls = comm->tuner->links.cls;
	struct weft_cost w = {0, 0, cls[WEFT_LINK_NUMA].gamma};
	for (int a = 0; a < comm->nranks; a++) {
		for (int b = a + 1; b < comm->nranks; b++) {
			if ((which == 1 && g->host_of[a] != g->host_of[b]) ||
			    (which == 2 && !(is_leader(g, a) && is_leader(g, b))))
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
