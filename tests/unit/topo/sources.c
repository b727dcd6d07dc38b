/*
 * sources.c — the leaf from Slurm (SLURM_TOPOLOGY_ADDR and its
 * pattern) and the order of the leaf sources (LLDP, WEFT_TOPO_FILE, Slurm):
 *   - the parser on the addresses Slurm writes (two and three switch levels,
 *     one level, a node with dots in its name, topology/none) and on ones it
 *     must refuse, and WEFT_TOPO_SLURM=0;
 *   - a card's own choice when several sources know its leaf, and the spine
 *     an LLDP leaf takes from a source that names the same switch;
 *   - the job's agreement on one source (weft_topo_cards_agree): lldpd on
 *     some hosts only, Slurm everywhere, must give one leaf per switch;
 *   - end to end, a 4-rank job of 4 "hosts" (WEFT_HOSTID, TCP over lo) whose
 *     ranks get the SLURM_TOPOLOGY_ADDR that srun -m arbitrary -w h1,h3,h2,h4
 *     gives them: two leaves learned from Slurm under one spine, "slurm" in
 *     the description, and a ring that crosses the spine once per leaf.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "topo/topo.h"
#include "topo/topo_local.h"

struct addr_case {
	const char *addr, *pattern;
	bool found;
	const char *leaf, *spine;
};

static const struct addr_case addr_cases[] = {
    {"spine.leaf1.h1", "switch.switch.node", true, "leaf1", "spine"},
    {"leaf7.n01", "switch.node", true, "leaf7", ""},
    {"core.s2.l3.n1", "switch.switch.switch.node", true, "l3", "s2"},
    /* A node with dots in its name: the pattern says where the switches end. */
    {"sp.lf.node1.cluster.example", "switch.switch.node", true, "lf", "sp"},
    /* topology/none, or a node in no switch of topology.conf */
    {"h1", "node", false, "", ""},
    {"spine.leaf1.h1", "switch.thing.node", false, "", ""},
    {"spine.leaf1.h1", "switch.switch", false, "", ""},
    {"leaf1", "switch.switch.node", false, "", ""},
    {"spine..h1", "switch.switch.node", false, "", ""},
    {".leaf.h1", "switch.switch.node", false, "", ""},
    {"s.l0123456789012345678901234567890123456789012345678901234567890123456789.h",
     "switch.switch.node", false, "", ""},
};

START_TEST(slurm_addr)
{
	const struct addr_case *c = &addr_cases[_i];
	char leaf[WEFT_TOPO_NAME_BYTES] = "x", spine[WEFT_TOPO_NAME_BYTES] = "x";
	unsetenv("WEFT_TOPO_SLURM");
	setenv("SLURM_TOPOLOGY_ADDR", c->addr, 1);
	setenv("SLURM_TOPOLOGY_ADDR_PATTERN", c->pattern, 1);
	bool found = weft_topo_slurm_lookup(leaf, sizeof(leaf), spine, sizeof(spine));
	ck_assert_msg(found == c->found, "%s / %s: found %d", c->addr, c->pattern, found);
	ck_assert_msg(strcmp(leaf, c->leaf) == 0 && strcmp(spine, c->spine) == 0,
		      "%s / %s: leaf '%s' spine '%s', want '%s' '%s'", c->addr, c->pattern, leaf,
		      spine, c->leaf, c->spine);
}
END_TEST

START_TEST(slurm_unset_or_off)
{
	char leaf[WEFT_TOPO_NAME_BYTES], spine[WEFT_TOPO_NAME_BYTES];
	unsetenv("SLURM_TOPOLOGY_ADDR");
	setenv("SLURM_TOPOLOGY_ADDR_PATTERN", "switch.node", 1);
	ck_assert(!weft_topo_slurm_lookup(leaf, sizeof(leaf), spine, sizeof(spine)));
	setenv("SLURM_TOPOLOGY_ADDR", "leaf1.h1", 1);
	ck_assert(weft_topo_slurm_lookup(leaf, sizeof(leaf), spine, sizeof(spine)));
	setenv("WEFT_TOPO_SLURM", "0", 1);
	ck_assert(!weft_topo_slurm_lookup(leaf, sizeof(leaf), spine, sizeof(spine)));
	ck_assert_str_eq(leaf, "");
	unsetenv("WEFT_TOPO_SLURM");
}
END_TEST

/* ---- a card's own choice and the job's agreement ---- */

static void card(struct weft_topo_card *c, const char *lldp, const char *file, const char *slurm)
{
	memset(c, 0, sizeof(*c));
	if (lldp) {
		snprintf(c->leaf_id, sizeof(c->leaf_id), "mac-%s", lldp);
		snprintf(c->leaf_name, sizeof(c->leaf_name), "%s", lldp);
		snprintf(c->leaf_port, sizeof(c->leaf_port), "swp1");
		c->leaf_source = WEFT_LEAF_LLDP;
	}
	if (file) {
		snprintf(c->file_leaf, sizeof(c->file_leaf), "%s", file);
		snprintf(c->file_spine, sizeof(c->file_spine), "fs");
	}
	if (slurm) {
		snprintf(c->slurm_leaf, sizeof(c->slurm_leaf), "%s", slurm);
		snprintf(c->slurm_spine, sizeof(c->slurm_spine), "spine");
	}
	weft_topo_card_choose(c);
}

START_TEST(card_choice)
{
	struct weft_topo_card c;
	card(&c, "leaf1", "f1", "s1");
	ck_assert_int_eq(c.leaf_source, WEFT_LEAF_LLDP);
	ck_assert_str_eq(c.leaf_name, "leaf1");
	ck_assert_str_eq(c.leaf_port, "swp1");
	ck_assert_str_eq(c.spine, ""); /* no other source names leaf1 */
	/* Slurm names LLDP's leaf: its spine goes with it; the file's first. */
	card(&c, "leaf1", NULL, "leaf1");
	ck_assert_int_eq(c.leaf_source, WEFT_LEAF_LLDP);
	ck_assert_str_eq(c.leaf_id, "mac-leaf1");
	ck_assert_str_eq(c.spine, "spine");
	card(&c, "leaf1", "leaf1", "leaf1");
	ck_assert_str_eq(c.spine, "fs");
	card(&c, NULL, "f1", "s1");
	ck_assert_int_eq(c.leaf_source, WEFT_LEAF_FILE);
	ck_assert_str_eq(c.leaf_id, "f1");
	ck_assert_str_eq(c.spine, "fs");
	card(&c, NULL, NULL, "s1");
	ck_assert_int_eq(c.leaf_source, WEFT_LEAF_SLURM);
	ck_assert_str_eq(c.leaf_id, "s1");
	ck_assert_str_eq(c.leaf_name, "s1");
	ck_assert_str_eq(c.spine, "spine");
	card(&c, NULL, NULL, NULL);
	ck_assert_int_eq(c.leaf_source, WEFT_LEAF_NONE);
	ck_assert_str_eq(c.leaf_id, "");
	ck_assert_str_eq(weft_topo_leaf_source_name(WEFT_LEAF_SLURM), "slurm");
}
END_TEST

#define AGREE_RANKS 4

/* Rank r on host r; hosts 0,1 under one switch, 2,3 under another. */
static int leaves_of(struct weft_topo_card *cards, int *source)
{
	struct weft_topo_card *p[AGREE_RANKS];
	struct weft_topo_rank in[AGREE_RANKS];
	static const char *const hosts[AGREE_RANKS] = {"h1", "h2", "h3", "h4"};
	for (int r = 0; r < AGREE_RANKS; r++) {
		p[r] = &cards[r];
		in[r] = (struct weft_topo_rank){hosts[r], hosts[r], &cards[r]};
	}
	*source = weft_topo_cards_agree(p, AGREE_RANKS);
	struct weft_topo_graph g = {0};
	struct weft_err err = {0};
	ck_assert_int_eq(weft_topo_graph_build(&g, AGREE_RANKS, in, &err), WEFT_SUCCESS);
	int n = g.nleaves;
	weft_topo_graph_free(&g);
	return n;
}

START_TEST(job_agrees)
{
	struct weft_topo_card c[AGREE_RANKS];
	int source;
	/* lldpd on three hosts, Slurm everywhere: Slurm for all, two leaves
	 * (each rank on its own choice would make three). */
	card(&c[0], "leaf1", NULL, "sa");
	card(&c[1], NULL, NULL, "sa");
	card(&c[2], "leaf2", NULL, "sb");
	card(&c[3], "leaf2", NULL, "sb");
	ck_assert_int_eq(leaves_of(c, &source), 2);
	ck_assert_int_eq(source, WEFT_LEAF_SLURM);
	for (int r = 0; r < AGREE_RANKS; r++) {
		ck_assert_int_eq(c[r].leaf_source, WEFT_LEAF_SLURM);
		ck_assert_str_eq(c[r].leaf_port, "");
		ck_assert_str_eq(c[r].spine, "spine");
	}
	/* The file on every rank and Slurm on some: the file, the better one. */
	card(&c[0], "leaf1", "fa", NULL);
	card(&c[1], NULL, "fa", "sa");
	card(&c[2], NULL, "fb", "sb");
	card(&c[3], "leaf2", "fb", "sb");
	ck_assert_int_eq(leaves_of(c, &source), 2);
	ck_assert_int_eq(source, WEFT_LEAF_FILE);
	ck_assert_str_eq(c[3].leaf_name, "fb");
	/* All on LLDP: nothing changes. */
	for (int r = 0; r < AGREE_RANKS; r++)
		card(&c[r], r < 2 ? "leaf1" : "leaf2", NULL, r < 2 ? "sa" : "sb");
	ck_assert_int_eq(leaves_of(c, &source), 2);
	ck_assert_int_eq(source, WEFT_LEAF_LLDP);
	ck_assert_str_eq(c[0].leaf_id, "mac-leaf1");
	/* One host knows nothing: no common source, each keeps its own. */
	card(&c[0], "leaf1", NULL, "sa");
	card(&c[1], NULL, NULL, NULL);
	card(&c[2], NULL, NULL, "sb");
	card(&c[3], NULL, NULL, "sb");
	ck_assert_int_eq(leaves_of(c, &source), 3);
	ck_assert_int_eq(source, -1);
	ck_assert_int_eq(c[0].leaf_source, WEFT_LEAF_LLDP);
	ck_assert_int_eq(c[1].leaf_source, WEFT_LEAF_NONE);
}
END_TEST

/* ---- end to end: what srun -m arbitrary -w h1,h3,h2,h4 hands the ranks ---- */

static const char *const e2e_host[AGREE_RANKS] = {"h1", "h3", "h2", "h4"};
static const char *const e2e_addr[AGREE_RANKS] = {"spine.leaf1.h1", "spine.leaf2.h3",
						  "spine.leaf1.h2", "spine.leaf2.h4"};

static int slurm_env(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	if (setenv("WEFT_HOSTID", e2e_host[rank], 1) ||
	    setenv("SLURM_TOPOLOGY_ADDR", e2e_addr[rank], 1) ||
	    setenv("SLURM_TOPOLOGY_ADDR_PATTERN", "switch.switch.node", 1))
		return HARNESS_EXIT_SETUP;
	return 0;
}

static int check_slurm_job(weft_comm_t comm, int rank, int nranks, void *arg)
{
	char *text = NULL;
	weft_status_t st = weft_comm_describe(comm, &text);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "weft_comm_describe");
	if (rank != 0) {
		weft_describe_free(text);
		return 0;
	}
	json_error_t jerr;
	json_t *doc = json_loads(text, 0, &jerr);
	weft_describe_free(text);
	if (!doc)
		return harness_fail("description is not JSON: %s", jerr.text);
	int bad = 0;
	const json_t *ranks = json_object_get(doc, "ranks");
	for (int r = 0; r < nranks && !bad; r++) {
		const json_t *e = json_array_get(ranks, (size_t)r);
		const char *leaf = json_string_value(json_object_get(e, "leaf"));
		const char *via = json_string_value(json_object_get(e, "leaf_source"));
		const char *spine = json_string_value(json_object_get(e, "spine"));
		const char *want = r % 2 ? "leaf2" : "leaf1";
		if (!leaf || !via || !spine || strcmp(leaf, want) || strcmp(via, "slurm") ||
		    strcmp(spine, "spine"))
			bad = harness_fail("rank %d: leaf %s via %s spine %s; want %s via slurm "
					   "under spine",
					   r, leaf, via, spine, want);
	}
	const json_t *ring = json_object_get(doc, "ring");
	json_int_t crossings = json_integer_value(json_object_get(ring, "leaf_crossings"));
	if (!bad && crossings != 2)
		bad = harness_fail("ring crosses leaves %lld times, want 2 (one per leaf)",
				   (long long)crossings);
	if (!bad && json_integer_value(json_object_get(doc, "nspines")) != 1)
		bad = harness_fail("%lld spines, want 1",
				   (long long)json_integer_value(json_object_get(doc, "nspines")));
	json_decref(doc);
	return bad;
}

START_TEST(slurm_job)
{
	static const char *const env[] = {"WEFT_LLDP=0", "WEFT_SOCKET_IFNAME=lo", NULL};
	unsetenv("WEFT_TOPO_FILE");
	struct harness_job job = {.nranks = AGREE_RANKS,
				  .env = env,
				  .body = check_slurm_job,
				  .timeout_s = 60,
				  .before_init = slurm_env};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

static Suite *sources_suite(void)
{
	Suite *s = suite_create("topo_sources");
	TCase *tc = tcase_create("slurm");
	tcase_add_loop_test(tc, slurm_addr, 0, (int)(sizeof(addr_cases) / sizeof(addr_cases[0])));
	tcase_add_test(tc, slurm_unset_or_off);
	suite_add_tcase(s, tc);
	tc = tcase_create("order");
	tcase_add_test(tc, card_choice);
	tcase_add_test(tc, job_agrees);
	suite_add_tcase(s, tc);
	tc = tcase_create("job");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, slurm_job);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sources_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
