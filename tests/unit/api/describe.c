/*
 * describe.c — weft_comm_describe, weft_host_describe and
 * weft_settings_describe: the JSON is parsed with jansson and checked field
 * by field against what the communicator holds and what the test set up.
 *
 * The main job has 4 ranks on 3 "hosts" (WEFT_HOSTID per rank, as in
 * integration/allreduce.c's hosts): ranks 0 and 1 share host dh-a (shm between them),
 * rank 2 is on dh-b, rank 3 on a host whose id holds a quote, a backslash
 * and a byte that is not UTF-8, so the names must come out escaped (and the
 * stray byte replaced). A topology file puts dh-a under leafX and dh-b under
 * leafZ, both under spine S; rank 3's host is in no file, so it is a leaf of
 * its own with no spine. The round trip writes that job's description to a
 * file, reads it back as WEFT_TOPO_FILE (weft_topo_file_load and a second
 * job) and checks that the second job learns the same leaves and spines.
 * A growth test checks that the document grows linearly with the ranks.
 */
#include <check.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithms/algo.h"
#include "algorithms/patterns/tree.h"
#include "core/comm.h"
#include "harness.h"
#include "topo/topo.h"
#include "tune/tune.h"
#include "tune/tune_table.h"
#include "util/settings.h"

#define JOB_TIMEOUT_S 60.0
#define NRANKS	      4

static const char *const host_ids[NRANKS] = {"dh-a", "dh-a", "dh-b", "dh-\"q\\\xff"};
static const char *const host_ids_json[NRANKS] = {"dh-a", "dh-a", "dh-b", "dh-\"q\\?"};

/* What a job's ranks are told: where to write the description, if anywhere. */
struct job_arg {
	const char *out_path; /* rank 0 writes its JSON here; NULL: nowhere */
};

static int set_host(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	return setenv("WEFT_HOSTID", host_ids[rank], 1) != 0 ? HARNESS_EXIT_SETUP : 0;
}

/* ---- checks inside a rank ------------------------------------------------ */

static int want_int(const json_t *obj, const char *key, long long want, const char *where)
{
	const json_t *v = json_object_get(obj, key);
	if (!json_is_integer(v))
		return harness_fail("%s: \"%s\" is not an integer", where, key);
	if (json_integer_value(v) != want)
		return harness_fail("%s: \"%s\" is %lld, expected %lld", where, key,
				    (long long)json_integer_value(v), want);
	return 0;
}

static int want_str(const json_t *obj, const char *key, const char *want, const char *where)
{
	const char *got = json_string_value(json_object_get(obj, key));
	if (!got)
		return harness_fail("%s: \"%s\" is not a string", where, key);
	if (strcmp(got, want) != 0)
		return harness_fail("%s: \"%s\" is \"%s\", expected \"%s\"", where, key, got, want);
	return 0;
}

static int want_ints(const json_t *obj, const char *key, const int *want, int n, const char *where)
{
	const json_t *a = json_object_get(obj, key);
	if (!json_is_array(a) || json_array_size(a) != (size_t)n)
		return harness_fail("%s: \"%s\" is not an array of %d", where, key, n);
	for (int i = 0; i < n; i++)
		if (json_integer_value(json_array_get(a, (size_t)i)) != want[i])
			return harness_fail(
			    "%s: \"%s\"[%d] is %lld, expected %d", where, key, i,
			    (long long)json_integer_value(json_array_get(a, (size_t)i)), want[i]);
	return 0;
}

static int check_ranks(const struct weft_comm *c, const json_t *doc)
{
	static const int host_index[NRANKS] = {0, 0, 1, 2}, local[NRANKS] = {0, 1, 0, 0};
	static const char *const leaf[NRANKS] = {"leafX", "leafX", "leafZ", NULL};
	const json_t *ranks = json_object_get(doc, "ranks");
	char where[32], host_leaf[80];
	int bad = 0;

	if (json_array_size(ranks) != NRANKS)
		return harness_fail("ranks: %zu entries", json_array_size(ranks));
	snprintf(host_leaf, sizeof(host_leaf), "host:%s", c->cards[3].hostname);
	for (int r = 0; r < NRANKS && !bad; r++) {
		const json_t *e = json_array_get(ranks, (size_t)r);
		const struct weft_topo_card *t = &c->cards[r].topo;
		snprintf(where, sizeof(where), "ranks[%d]", r);
		bad |=
		    want_int(e, "rank", r, where) || want_str(e, "host", host_ids_json[r], where);
		bad |= want_int(e, "host_index", host_index[r], where) ||
		       want_str(e, "hostname", c->cards[r].hostname, where) ||
		       want_int(e, "local_rank", local[r], where);
		bad |= want_int(e, "numa", t->numa, where) || want_str(e, "nic", "lo", where) ||
		       want_int(e, "nic_numa", t->nic_numa, where);
		bad |= want_str(e, "leaf", leaf[r] ? leaf[r] : host_leaf, where) ||
		       want_int(e, "leaf_index", r < 2 ? 0 : r - 1, where) ||
		       want_str(e, "leaf_id", leaf[r] ? leaf[r] : "", where);
		bad |= want_str(e, "leaf_port", "", where) ||
		       want_str(e, "spine", leaf[r] ? "S" : "", where) ||
		       want_str(e, "leaf_source", leaf[r] ? "file" : "none", where);
	}
	return bad;
}

static int check_groups(const struct weft_comm *c, const json_t *doc)
{
	static const int leaders[] = {0, 2, 3}, leaf_of_host[] = {0, 1, 2};
	static const char *const leaf_name[] = {"leafX", "leafZ", NULL};
	const json_t *hosts = json_object_get(doc, "hosts"),
		     *leaves = json_object_get(doc, "leaves");
	int bad = want_int(doc, "nranks", NRANKS, "doc") || want_int(doc, "nhosts", 3, "doc") ||
		  want_int(doc, "nleaves", 3, "doc") || want_int(doc, "nspines", 1, "doc");
	char where[32];

	for (int h = 0; h < 3 && !bad; h++) {
		const json_t *e = json_array_get(hosts, (size_t)h);
		int chain[2] = {leaders[h], 1};
		snprintf(where, sizeof(where), "hosts[%d]", h);
		bad |= want_int(e, "index", h, where) ||
		       want_str(e, "host", host_ids_json[leaders[h]], where);
		bad |= want_int(e, "leader", leaders[h], where) ||
		       want_int(e, "leaf", leaf_of_host[h], where) ||
		       want_ints(e, "ranks", chain, h == 0 ? 2 : 1, where);
		/* leaves: one host each here */
		e = json_array_get(leaves, (size_t)h);
		snprintf(where, sizeof(where), "leaves[%d]", h);
		int ranks01[2] = {0, 1};
		bad |=
		    want_int(e, "index", h, where) ||
		    want_str(e, "name", leaf_name[h] ? leaf_name[h] : c->graph.leaf_name[2], where);
		bad |= want_str(e, "source", leaf_name[h] ? "file" : "none", where) ||
		       want_str(e, "spine", leaf_name[h] ? "S" : "", where) ||
		       want_int(e, "spine_index", leaf_name[h] ? 0 : -1, where);
		bad |= want_int(e, "leader", leaders[h], where) ||
		       want_ints(e, "hosts", &h, 1, where) ||
		       want_ints(e, "ranks", h == 0 ? ranks01 : &leaders[h], h == 0 ? 2 : 1, where);
	}
	const json_t *spines = json_object_get(doc, "spines");
	int two[2] = {0, 1};
	if (!bad && json_array_size(spines) != 1)
		bad = harness_fail("spines: %zu entries", json_array_size(spines));
	bad = bad || want_int(json_array_get(spines, 0), "index", 0, "spines[0]") ||
	      want_str(json_array_get(spines, 0), "name", "S", "spines[0]") ||
	      want_ints(json_array_get(spines, 0), "leaves", two, 2, "spines[0]");
	return bad;
}

/* The ring is the communicator's; leaves X, Z (spine S), then rank 3's own
 * (no spine): three leaf crossings, two spine crossings, in either order. */
static int check_ring_trees(const struct weft_comm *c, const json_t *doc)
{
	const json_t *ring = json_object_get(doc, "ring"), *trees = json_object_get(doc, "trees");
	const json_t *db = json_object_get(trees, "double_binary");
	int host_leaders[] = {0, 2, 3}, leaf_leaders[] = {0, 2, 3};
	int bad = want_str(ring, "placement", "topo", "ring") ||
		  want_ints(ring, "order", c->ring, NRANKS, "ring") ||
		  want_int(ring, "leaf_crossings", 3, "ring") ||
		  want_int(ring, "spine_crossings", 2, "ring");
	bad = bad ||
	      want_int(json_object_get(ring, "rank_order"), "leaf_crossings", 3, "rank_order") ||
	      want_int(json_object_get(ring, "rank_order"), "spine_crossings", 2, "rank_order");
	/* n = 4: NCCL's tree 0 is 0 -> 2 -> {1, 3}, depth 2; tree 1 its mirror,
	 * rooted at index 3; the binary tree is tree 0 rotated to rank 0. */
	bad = bad || want_int(json_array_get(db, 0), "root", c->ring[0], "tree 0") ||
	      want_int(json_array_get(db, 0), "depth", 2, "tree 0") ||
	      want_int(json_array_get(db, 1), "root", c->ring[weft_dbtree_root(1, NRANKS)],
		       "tree 1") ||
	      want_int(json_array_get(db, 1), "depth", 2, "tree 1");
	bad = bad || want_int(json_object_get(trees, "binary"), "root", 0, "binary") ||
	      want_int(json_object_get(trees, "binary"), "depth", 2, "binary") ||
	      want_ints(trees, "host_leaders", host_leaders, 3, "trees") ||
	      want_ints(trees, "leaf_leaders", leaf_leaders, 3, "trees");
	/* Every tree edge joins leaves here except 0-1: at most 3 of 3 edges. */
	for (int t = 0; t < 2 && !bad; t++) {
		long long x = json_integer_value(
		    json_object_get(json_array_get(db, (size_t)t), "leaf_crossings"));
		if (x < 2 || x > 3)
			bad = harness_fail("tree %d: %lld leaf crossings", t, x);
	}
	return bad ||
	       want_int(json_object_get(trees, "leader_ring"), "leaf_crossings", 3, "leader_ring");
}

static const char *transport_for(enum weft_link_class k)
{
	return k == WEFT_LINK_SELF			    ? "self"
	       : k == WEFT_LINK_NUMA || k == WEFT_LINK_HOST ? "shm"
							    : "socket";
}

/* Per link class present, pairs counted from the graph, all on the one
 * transport that serves the class. */
static int check_transports(const struct weft_comm *c, const json_t *doc)
{
	long long pairs[WEFT_LINK_CLASS_COUNT] = {0};
	const json_t *list = json_object_get(doc, "transports");
	size_t i = 0;
	char where[32];

	for (int a = 0; a < NRANKS; a++)
		for (int b = 0; b < NRANKS; b++)
			pairs[weft_topo_link(&c->graph, a, b)]++;
	for (int k = 0; k < WEFT_LINK_CLASS_COUNT; k++) {
		if (!pairs[k])
			continue;
		const json_t *e = json_array_get(list, i++),
			     *by = json_object_get(e, "by_transport");
		snprintf(where, sizeof(where), "transports[%zu]", i - 1);
		if (want_str(e, "link", weft_topo_link_name((enum weft_link_class)k), where) ||
		    want_int(e, "pairs", pairs[k], where) ||
		    want_int(by, transport_for((enum weft_link_class)k), pairs[k], where))
			return 1;
		if (json_object_size(by) != 1)
			return harness_fail("%s: %zu transports", where, json_object_size(by));
	}
	if (i != json_array_size(list))
		return harness_fail("transports: %zu classes, expected %zu", json_array_size(list),
				    i);
	return 0;
}

/* "connections": "paths" holds the job's path counters, all 0 in a
 * healthy job on one host (no connection here keeps sub-flows that
 * could fail over, and none went dark). */
static int check_paths(const json_t *doc)
{
	static const char *const keys[] = {"failovers", "repaths", "replaced",		"probes",
					   "resent",	"dups",	   "ranks_failed_over", "dark"};
	const json_t *p = json_object_get(json_object_get(doc, "connections"), "paths");
	if (!json_is_object(p))
		return harness_fail("connections: no \"paths\" object");
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (want_int(p, keys[k], 0, "connections.paths"))
			return 1;
	if (json_object_size(p) != sizeof(keys) / sizeof(keys[0]))
		return harness_fail("connections.paths: %zu members, expected %zu",
				    json_object_size(p), sizeof(keys) / sizeof(keys[0]));
	return 0;
}

/* One row of the tuner's table against the tuner itself. */
static int check_row(const struct weft_comm *c, enum weft_coll_kind coll, const json_t *row,
		     size_t bytes)
{
	struct weft_coll_args args;
	char where[64];
	weft_tune_table_args(c, coll, bytes, &args);
	snprintf(where, sizeof(where), "tuner %s %zu", weft_coll_name(coll), bytes);
	if (want_int(row, "bytes", (long long)bytes, where) ||
	    want_int(row, "count", (long long)args.count, where) ||
	    want_str(row, "choice", weft_tune_select(c, &args)->name, where))
		return 1;
	const json_t *est = json_object_get(row, "estimates_us");
	for (const struct weft_algo *const *a = weft_algos_for(coll); *a; a++) {
		const json_t *e = json_object_get(est, (*a)->name);
		bool never = !(*a)->estimate || ((*a)->supports && !(*a)->supports(c, &args));
		if (never != json_is_null(e) || (!never && !json_is_number(e)))
			return harness_fail("%s: estimate of %s wrong kind", where, (*a)->name);
		double want = never ? 0 : weft_tune_estimate(c, *a, &args) * 1e6;
		if (!never && fabs(json_number_value(e) - want) > 1e-6 * want)
			return harness_fail("%s: %s %g us, expected %g", where, (*a)->name,
					    json_number_value(e), want);
	}
	return 0;
}

static int check_tuner(const struct weft_comm *c, const json_t *doc)
{
	const json_t *colls = json_object_get(json_object_get(doc, "tuner"), "collectives");
	size_t i = 0;
	static const enum weft_coll_kind listed[] = {WEFT_COLL_ALLREDUCE,      WEFT_COLL_ALLGATHER,
						     WEFT_COLL_REDUCE_SCATTER, WEFT_COLL_BROADCAST,
						     WEFT_COLL_REDUCE,	       WEFT_COLL_ALLTOALL};
	if (json_array_size(colls) != sizeof(listed) / sizeof(listed[0]))
		return harness_fail("tuner: %zu collectives", json_array_size(colls));
	for (; i < sizeof(listed) / sizeof(listed[0]); i++) {
		const json_t *e = json_array_get(colls, i), *sizes = json_object_get(e, "sizes");
		if (want_str(e, "name", weft_coll_name(listed[i]), "tuner"))
			return 1;
		if (json_array_size(sizes) != WEFT_TUNE_TABLE_SIZES)
			return harness_fail("tuner %s: %zu sizes", weft_coll_name(listed[i]),
					    json_array_size(sizes));
		for (int s = 0; s < WEFT_TUNE_TABLE_SIZES; s++)
			if (check_row(c, listed[i], json_array_get(sizes, (size_t)s),
				      weft_tune_table_sizes[s]))
				return 1;
	}
	const json_t *pacer = json_object_get(doc, "pacer");
	if (want_str(pacer, "mode", "off", "pacer") ||
	    !json_is_null(json_object_get(pacer, "state")))
		return harness_fail("pacer: not {\"mode\": \"off\", \"state\": null}");
	return want_int(doc, "version", 1, "doc") ||
	       want_str(doc, "library", weft_version(), "doc");
}

/* FNV-1a: every rank must hold the very same document, but for "wait",
 * which is each rank's own (weft.h). */
static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static int same_everywhere(weft_comm_t comm, const json_t *doc, int nranks)
{
	uint64_t all[NRANKS] = {0};
	int rank;
	weft_comm_rank(comm, &rank);
	json_t *shared = json_deep_copy(doc);
	if (!shared || !json_is_object(json_object_get(shared, "wait")) ||
	    json_object_del(shared, "wait") != 0) {
		json_decref(shared);
		return harness_fail("no \"wait\" object in the description");
	}
	char *text = json_dumps(shared, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(shared);
	if (!text)
		return harness_fail("json_dumps failed");
	all[rank] = fnv(text);
	free(text);
	weft_status_t st = weft_allgather(WEFT_IN_PLACE, all, 1, WEFT_UINT64, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "allgather of the hashes");
	for (int r = 1; r < nranks; r++)
		if (all[r] != all[0])
			return harness_fail("rank %d's description differs from rank 0's", r);
	return 0;
}

static int write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");
	if (!fp || fputs(text, fp) < 0 || fclose(fp) != 0)
		return harness_fail("cannot write %s", path);
	return 0;
}

static int describe_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct job_arg *ja = arg;
	char *json;
	harness_progress("weft_comm_describe");
	weft_status_t st = weft_comm_describe(comm, &json);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "weft_comm_describe");
	json_error_t jerr;
	json_t *doc = json_loads(json, JSON_REJECT_DUPLICATES, &jerr);
	int rc = doc ? 0 : harness_fail("not JSON: %d:%d: %s", jerr.line, jerr.column, jerr.text);
	rc = rc || check_ranks(comm, doc) || check_groups(comm, doc) ||
	     check_ring_trees(comm, doc) || check_transports(comm, doc) || check_tuner(comm, doc) ||
	     check_paths(doc);
	rc = rc || same_everywhere(comm, doc, nranks);
	if (!rc && rank == 0 && ja->out_path)
		rc = write_file(ja->out_path, json);
	json_decref(doc);
	weft_describe_free(json);
	return rc;
}

/* ---- jobs ------------------------------------------------------------------- */

static void run_job(const char *topo_file, const char *out_path)
{
	char topo_env[PATH_MAX + 32];
	snprintf(topo_env, sizeof(topo_env), "WEFT_TOPO_FILE=%s", topo_file);
	const char *const env[] = {"WEFT_TIMEOUT=30", "WEFT_SOCKET_IFNAME=lo",
				   "WEFT_LLDP=0",     "WEFT_PLACEMENT=topo",
				   topo_env,	      NULL};
	struct job_arg ja = {out_path};
	struct harness_job job = {
	    .nranks = NRANKS,
	    .env = env,
	    .body = describe_body,
	    .arg = &ja,
	    .timeout_s = JOB_TIMEOUT_S,
	    .before_init = set_host,
	};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "describe job (WEFT_TOPO_FILE=%s):\n%s", topo_file, res.summary);
}

static void temp_path(char *path, const char *text)
{
	snprintf(path, PATH_MAX, "/tmp/weft-test-describe-XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	size_t len = strlen(text);
	ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
}

START_TEST(test_describe_job)
{
	char conf[PATH_MAX];
	temp_path(conf, "SwitchName=leafX Nodes=dh-a\nSwitchName=leafZ Nodes=dh-b\n"
			"SwitchName=S Switches=leafX,leafZ\n");
	run_job(conf, NULL);
	unlink(conf);
}
END_TEST

static void expect_host(const struct weft_topo_file *f, const char *name, const char *leaf,
			const char *spine)
{
	char l[WEFT_TOPO_NAME_BYTES], s[WEFT_TOPO_NAME_BYTES];
	bool found = weft_topo_file_lookup(f, name, l, sizeof(l), s, sizeof(s));
	if (!leaf) {
		ck_assert_msg(!found, "%s found under %s", name, l);
		return;
	}
	ck_assert_msg(found, "%s not in the dump", name);
	ck_assert_str_eq(l, leaf);
	ck_assert_str_eq(s, spine);
}

/* The description as WEFT_TOPO_FILE: the hosts it names, then a job that
 * learns its leaves from it and describes the same topology (the checks of
 * describe_body, which expect leaf_source "file", hold for it too). */
START_TEST(test_describe_round_trip)
{
	char conf[PATH_MAX], dump[PATH_MAX], dump2[PATH_MAX];
	struct weft_topo_file *f;
	struct weft_err err = {0};
	char hostname[WEFT_HOSTNAME_BYTES] = "";

	temp_path(conf, "SwitchName=leafX Nodes=dh-a\nSwitchName=leafZ Nodes=dh-b\n"
			"SwitchName=S Switches=leafX,leafZ\n");
	temp_path(dump, "");
	temp_path(dump2, "");
	run_job(conf, dump);
	ck_assert_msg(weft_topo_file_load(dump, &f, &err) == WEFT_SUCCESS, "%s", err.msg);
	expect_host(f, "dh-a", "leafX", "S");
	expect_host(f, "dh-b", "leafZ", "S");
	expect_host(f, host_ids_json[3], NULL, NULL); /* its leaf was never learned */
	gethostname(hostname, sizeof(hostname) - 1);
	expect_host(f, hostname, NULL, NULL); /* shared by dh-a and dh-b: names neither */
	weft_topo_file_free(f);

	run_job(dump, dump2);
	ck_assert_msg(weft_topo_file_load(dump2, &f, &err) == WEFT_SUCCESS, "%s", err.msg);
	expect_host(f, "dh-a", "leafX", "S");
	expect_host(f, "dh-b", "leafZ", "S");
	weft_topo_file_free(f);
	unlink(conf);
	unlink(dump);
	unlink(dump2);
}
END_TEST

/* Bad arguments, and the two calls that need no communicator. */
START_TEST(test_describe_api)
{
	char *json = (char *)1;
	json_t *doc;
	char hostname[WEFT_HOSTNAME_BYTES] = "";

	ck_assert_int_eq(weft_comm_describe(NULL, &json), WEFT_ERR_INVALID_ARG);
	ck_assert_ptr_null(json);
	ck_assert_int_eq(weft_host_describe(NULL), WEFT_ERR_INVALID_ARG);
	ck_assert_ptr_nonnull(strstr(weft_init_last_error(), "json is NULL"));
	ck_assert_int_eq(weft_settings_describe(NULL), WEFT_ERR_INVALID_ARG);
	weft_describe_free(NULL);

	setenv("WEFT_SOCKET_IFNAME", "lo", 1);
	ck_assert_int_eq(weft_host_describe(&json), WEFT_SUCCESS);
	unsetenv("WEFT_SOCKET_IFNAME");
	doc = json_loads(json, JSON_REJECT_DUPLICATES, NULL);
	ck_assert_ptr_nonnull(doc);
	gethostname(hostname, sizeof(hostname) - 1);
	ck_assert_str_eq(json_string_value(json_object_get(doc, "hostname")), hostname);
	ck_assert_str_eq(json_string_value(json_object_get(doc, "nic")), "lo");
	ck_assert_int_ge(json_integer_value(json_object_get(doc, "cores")), 1);
	bool lo = false;
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(doc, "interfaces"), i, e)
	{
		if (strcmp(json_string_value(json_object_get(e, "name")), "lo") == 0)
			lo = json_is_true(json_object_get(e, "loopback"));
	}
	ck_assert_msg(lo, "no loopback lo in %s", json);
	json_decref(doc);
	weft_describe_free(json);

	size_t n;
	const struct weft_setting *all = weft_settings_all(&n);
	ck_assert_int_eq(weft_settings_describe(&json), WEFT_SUCCESS);
	doc = json_loads(json, JSON_REJECT_DUPLICATES, NULL);
	json_t *list = json_object_get(doc, "settings");
	ck_assert_uint_eq(json_array_size(list), n);
	for (i = 0; i < n; i++) {
		e = json_array_get(list, i);
		ck_assert_str_eq(json_string_value(json_object_get(e, "name")), all[i].name);
		ck_assert_str_eq(json_string_value(json_object_get(e, "help")), all[i].help);
		if (all[i].default_value)
			ck_assert_str_eq(json_string_value(json_object_get(e, "default")),
					 all[i].default_value);
		else
			ck_assert(json_is_null(json_object_get(e, "default")));
	}
	json_decref(doc);
	weft_describe_free(json);
}
END_TEST

/* What rank 0 leaves for the parent: the document's size, and for one rank
 * the few facts checked outside. */
struct shared_size {
	size_t bytes;
	int bad_arg; /* weft_comm_describe(comm, NULL) did not fail as it should */
};

static int size_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	char *json;
	if (rank == 0 && (weft_comm_describe(comm, NULL) != WEFT_ERR_INVALID_ARG ||
			  !strstr(weft_comm_last_error(comm), "json is NULL")))
		((struct shared_size *)harness_shared())->bad_arg = 1;
	weft_status_t st = weft_comm_describe(comm, &json);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "weft_comm_describe");
	json_t *doc = json_loads(json, 0, NULL);
	int rc = doc ? 0 : harness_fail("not JSON");
	if (!rc && nranks == 1) {
		const json_t *db = json_object_get(json_object_get(doc, "trees"), "double_binary");
		rc = want_int(json_array_get(db, 0), "depth", 0, "tree 0") ||
		     want_int(json_array_get(json_object_get(doc, "transports"), 0), "pairs", 1,
			      "transports[0]") ||
		     want_int(json_object_get(doc, "ring"), "leaf_crossings", 0, "ring");
	}
	if (rank == 0)
		((struct shared_size *)harness_shared())->bytes = strlen(json);
	json_decref(doc);
	weft_describe_free(json);
	return rc;
}

static size_t described_bytes(int nranks)
{
	const char *const env[] = {"WEFT_TIMEOUT=30", "WEFT_LLDP=0", NULL};
	struct harness_result res;
	harness_run(nranks, env, size_body, NULL, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%d ranks:\n%s", nranks, res.summary);
	const struct shared_size *s = (const void *)res.shared;
	ck_assert_msg(!s->bad_arg, "weft_comm_describe(comm, NULL) not refused");
	return s->bytes;
}

/* Linear growth: the bytes each added rank costs stay the same from 2 to 4
 * to 8 ranks (a per-pair table would double them each time). */
START_TEST(test_describe_growth)
{
	size_t b1 = described_bytes(1), b2 = described_bytes(2), b4 = described_bytes(4);
	size_t b8 = described_bytes(8);
	double d24 = (double)(b4 - b2) / 2, d48 = (double)(b8 - b4) / 4;
	ck_assert_msg(b1 < b2 && b2 < b4 && b4 < b8, "sizes %zu %zu %zu %zu", b1, b2, b4, b8);
	ck_assert_msg(d48 < 1.25 * d24, "bytes per rank %.0f from 2 to 4, %.0f from 4 to 8", d24,
		      d48);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("describe");
	TCase *tc = tcase_create("describe");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_describe_job);
	tcase_add_test(tc, test_describe_round_trip);
	tcase_add_test(tc, test_describe_api);
	tcase_add_test(tc, test_describe_growth);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
