/*
 * verbs_lanes.c — sub-flows on the verbs transport
 * (WEFT_IB_QPS_PER_CONN, WEFT_SPRAY; transports/verbs/verbs.h, "Lanes"),
 * over the test double (tests/fake_ibverbs) with forked ranks:
 *
 *  - K = 4: every lane of every connection is a QP of its own, in RTS,
 *    paired with the peer's lane of the same number; each carries a share
 *    of an 8 MiB AllReduce (the bytes its writes completed), pieces are
 *    cut to VERBS_LANE_PIECE, describe names the lanes, and the
 *    statistics (WEFT_STATS_FILE) show one sub-flow per lane whose bytes
 *    and weights add up;
 *  - K = 1 (the default): one QP, everything on it, pieces not cut; the
 *    pacer stays off on verbs even with WEFT_PACER=dcqcn;
 *  - every path at 100 MB/s and one lane slowed (FAKE_IBVERBS_QP_RATE,
 *    FAKE_IBVERBS_SLOW_QP: lane 2 at 4 MB/s): adaptive gives it a small
 *    share and the others about a third each, round robin each its 1/K;
 *  - ranks that disagree on K fail init, each naming both values and
 *    ranks (bad values of K and WEFT_SPRAY: verbs_settings.c); K is
 *    declared with its default and help.
 * Results are checked element by element.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_ibverbs/fake_ibverbs_api.h"
#include "util/settings.h"
#include "verbs_p2p.h"

#define COUNT	  (2u << 20) /* floats: 8 MiB */
#define SLOW_LANE 2
#define SLOW_SPEC "FAKE_IBVERBS_SLOW_QP=2:4e6" /* lane SLOW_LANE at 4 MB/s */
#define PATH_SPEC "FAKE_IBVERBS_QP_RATE=100e6" /* the others at 100 MB/s */
/* A connection that carried at least this much is checked for shares. */
#define BUSY_BYTES (1u << 20)

struct lanes_case {
	unsigned k;
	int iters;
	bool stats; /* WEFT_STATS_FILE was set: check the lines after destroy */
};

/* AllReduce of 8 MiB, @p iters times, every element checked. */
static int allreduce_8m(weft_comm_t comm, int rank, int nranks, int iters)
{
	float *x = malloc(COUNT * sizeof(float));
	if (!x)
		return harness_fail("out of memory");
	for (int it = 0; it < iters; it++) {
		for (size_t i = 0; i < COUNT; i++)
			x[i] = (float)((i + (size_t)it) % 13 + (size_t)rank);
		harness_progress("allreduce %d", it);
		weft_status_t st =
		    weft_allreduce(WEFT_IN_PLACE, x, COUNT, WEFT_FLOAT32, WEFT_SUM, comm);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "allreduce %d", it);
		for (size_t i = 0; i < COUNT; i++) {
			float want = (float)(nranks * (int)((i + (size_t)it) % 13) +
					     nranks * (nranks - 1) / 2);
			if (x[i] != want)
				return harness_fail("allreduce %d: element %zu is %g, expected %g",
						    it, i, x[i], want);
		}
	}
	free(x);
	return 0;
}

static weft_fake_qp_attr_fn fake_attr_fn(void)
{
	void *h = dlopen(verbs_fake_path, RTLD_NOW | RTLD_NOLOAD);
	return h ? (weft_fake_qp_attr_fn)dlsym(h, WEFT_FAKE_QP_ATTR) : NULL;
}

/* Lane l of ours talks to lane l of the peer's: QPs of their own, RTS. */
static int check_pairing(weft_comm_t comm, int peer, unsigned k)
{
	struct verbs_conn *c = conn_to(comm, peer);
	weft_fake_qp_attr_fn attr = fake_attr_fn();
	uint32_t seen[VERBS_MAX_LANES];
	if (!attr)
		return harness_fail("the double's weft_fake_ibv_qp_attr is missing");
	for (unsigned l = 0; l < k; l++) {
		struct weft_fake_qp_attr mine, theirs;
		if (!c->lane[l].qp || attr(c->lane[l].qp->qp_num, &mine) ||
		    attr(mine.dest_qpn, &theirs))
			return harness_fail("lane %u to rank %d: no QP, or no record of it", l,
					    peer);
		if (mine.state != IBV_QPS_RTS || theirs.dest_qpn != c->lane[l].qp->qp_num ||
		    theirs.pid != comm->cards[peer].pid)
			return harness_fail(
			    "lane %u to rank %d: state %u, its peer QP %u points at "
			    "%u",
			    l, peer, mine.state, mine.dest_qpn, theirs.dest_qpn);
		seen[l] = c->lane[l].qp->qp_num;
		for (unsigned j = 0; j < l; j++)
			if (seen[j] == seen[l])
				return harness_fail("lanes %u and %u share QP %u", j, l, seen[l]);
	}
	if (k < VERBS_MAX_LANES && c->lane[k].qp)
		return harness_fail("lane %u exists with K = %u", k, k);
	return 0;
}

static uint64_t lane_total(const struct verbs_conn *c, unsigned k)
{
	uint64_t t = 0;
	for (unsigned l = 0; l < k; l++)
		t += c->lane[l].bytes;
	return t;
}

/* Every data write a lane took was accounted back: none in flight once
 * the collective is done (it waited for its sends' writes). */
static int drained(weft_comm_t comm, unsigned k)
{
	for (int p = 0; p < comm->nranks; p++)
		for (unsigned l = 0; p != comm->rank && l < k; l++) {
			const struct verbs_lane *lane = &conn_to(comm, p)->lane[l];
			if (lane->out_writes || lane->out_bytes)
				return harness_fail("lane %u to rank %d: %u data writes, %llu "
						    "bytes in flight after the collective",
						    l, p, lane->out_writes,
						    (unsigned long long)lane->out_bytes);
		}
	return 0;
}

static int body_lanes(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct lanes_case *lc = arg;
	struct verbs_tp *vt = verbs_tp_of(verbs_of(comm));
	if (check_verbs_conns(comm))
		return 1;
	if (vt->nlanes != lc->k)
		return harness_fail("%u lanes, expected %u", vt->nlanes, lc->k);
	size_t want_piece = lc->k > 1 ? VERBS_LANE_PIECE : 0;
	if ((want_piece && vt->geom.max_write != want_piece) ||
	    (!want_piece && vt->geom.max_write <= VERBS_LANE_PIECE))
		return harness_fail("pieces of at most %zu bytes with %u lanes", vt->geom.max_write,
				    lc->k);
	for (int p = 0; p < nranks; p++)
		if (p != rank && check_pairing(comm, p, lc->k))
			return 1;
	if (allreduce_8m(comm, rank, nranks, lc->iters) || drained(comm, lc->k))
		return 1;
	int busy = 0;
	for (int p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		const struct verbs_conn *c = conn_to(comm, p);
		uint64_t total = lane_total(c, lc->k);
		/* Whatever the algorithm, a rank sends most of the buffer to
		 * some peer; a ring sends nothing to its previous rank. */
		if (total < BUSY_BYTES)
			continue;
		busy++;
		for (unsigned l = 0; l < lc->k; l++) {
			double share = (double)c->lane[l].bytes / (double)total;
			fprintf(stderr, "rank %d -> %d lane %u: %llu bytes (%.3f)\n", rank, p, l,
				(unsigned long long)c->lane[l].bytes, share);
			if (lc->k > 1 && share < 0.5 / lc->k)
				return harness_fail("lane %u to rank %d carried %.3f of the bytes",
						    l, p, share);
		}
	}
	if (!busy)
		return harness_fail("no connection carried %u bytes", BUSY_BYTES);
	char d[256], want[64] = "";
	struct weft_tp *tp = verbs_of(comm);
	tp->ops->prop.describe(tp, (rank + 1) % nranks, d, sizeof(d));
	if (lc->k > 1)
		snprintf(want, sizeof(want), ", %u QPs, spray rr)", lc->k);
	if (lc->k > 1 ? !strstr(d, want) : strstr(d, "QPs") != NULL)
		return harness_fail("describe: \"%s\" (%u lanes)", d, lc->k);
	return 0;
}

/* ---- the statistics: one sub-flow per lane ---- */

#define STATS_TEMPLATE "/tmp/weft-lanes-XXXXXX"
static char stats_dir[sizeof(STATS_TEMPLATE)];

/* One sub-flow per lane in every connection's last line, with weights
 * that add up to 1; on some connection every lane carried bytes. */
static int check_line(json_t *o, unsigned k, int *all_lanes)
{
	const json_t *b = json_object_get(o, "subflow_bytes");
	const json_t *w = json_object_get(o, "weights");
	int bad = json_array_size(b) != k || json_array_size(w) != k, every = 1;
	double sum = 0;
	for (size_t i = 0; !bad && i < k; i++) {
		every &= json_integer_value(json_array_get(b, i)) > 0;
		sum += json_real_value(json_array_get(w, i));
	}
	*all_lanes |= !bad && every;
	if (!bad && sum > 0.999 && sum < 1.001)
		return 0;
	char *text = json_dumps(o, JSON_COMPACT);
	int rc = harness_fail("statistics: %s (expected %u sub-flows)", text, k);
	free(text);
	return rc;
}

static int check_stats(int rank, int nranks, void *arg)
{
	const struct lanes_case *lc = arg;
	char path[sizeof(stats_dir) + 32];
	snprintf(path, sizeof(path), "%s/stats.%d", stats_dir, rank);
	FILE *f = fopen(path, "r");
	if (!f)
		return harness_fail("no statistics file %s", path);
	char line[8192];
	json_t *last[HARNESS_MAX_RANKS] = {NULL};
	while (fgets(line, sizeof(line), f)) {
		json_t *o = json_loads(line, 0, NULL);
		json_int_t p = o ? json_integer_value(json_object_get(o, "peer")) : -1;
		if (p >= 0 && p < nranks && p != rank) {
			json_decref(last[p]);
			last[p] = o;
		} else {
			json_decref(o);
		}
	}
	fclose(f);
	int rc = 0, lines = 0, all_lanes = 0;
	for (int p = 0; p < nranks; p++) {
		if (last[p] && !rc)
			rc = check_line(last[p], lc->k, &all_lanes);
		lines += last[p] != NULL;
		json_decref(last[p]);
	}
	if (!rc && (!lines || !all_lanes))
		rc = harness_fail("%s: %d connections, none with bytes on all %u lanes", path,
				  lines, lc->k);
	return rc;
}

static void run_lanes(int nranks, const struct lanes_case *lc, const char *const *more)
{
	char kset[40], sset[sizeof(stats_dir) + 40];
	snprintf(kset, sizeof(kset), "WEFT_IB_QPS_PER_CONN=%u", lc->k);
	const char *list[8] = {kset};
	size_t n = 1;
	if (lc->stats) {
		memcpy(stats_dir, STATS_TEMPLATE, sizeof(STATS_TEMPLATE));
		ck_assert_ptr_nonnull(mkdtemp(stats_dir));
		snprintf(sset, sizeof(sset), "WEFT_STATS_FILE=%s/stats.%%r", stats_dir);
		list[n++] = sset;
	}
	for (size_t i = 0; more && more[i] && n < 7; i++)
		list[n++] = more[i];
	list[n] = NULL;
	struct harness_job job = {.nranks = nranks,
				  .env = env_with(list),
				  .body = body_lanes,
				  .arg = (void *)lc,
				  .timeout_s = JOB_TIMEOUT_S * 2,
				  .after_destroy = lc->stats ? check_stats : NULL};
	struct harness_result res;
	harness_run_job(&job, &res);
	if (lc->stats) {
		char cmd[sizeof(stats_dir) + 16];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", stats_dir);
		ck_assert_int_eq(system(cmd), 0);
	}
	ck_assert_msg(res.ok, "%s", res.summary);
}

START_TEST(four_lanes)
{
	static const struct lanes_case lc = {.k = 4, .iters = 1, .stats = true};
	run_lanes(2 + _i, &lc, NULL);
}
END_TEST

static int body_one_lane(weft_comm_t comm, int rank, int nranks, void *arg)
{
	if (body_lanes(comm, rank, nranks, arg))
		return 1;
	for (int p = 0; p < nranks; p++) {
		const struct weft_p2p_link *link = &comm->peers[p].link;
		if (p != rank && (link->paced || !link->has_signals))
			return harness_fail("link to rank %d: paced %d, signals %d (the NIC paces "
					    "verbs)",
					    p, link->paced, link->has_signals);
	}
	return 0;
}

/* The default, with the pacer asked for: verbs is rate-controlled by its NIC. */
START_TEST(one_lane)
{
	static const struct lanes_case lc = {.k = 1, .iters = 1};
	static const char *const more[] = {"WEFT_PACER=dcqcn", "WEFT_PACER_START_RATE=200e6", NULL};
	struct harness_result res;
	harness_run(3, env_with(more), body_one_lane, (void *)&lc, JOB_TIMEOUT_S * 2, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* ---- a slow lane ---- */

struct slow_case {
	const char *spray;
	double lo, hi; /* the slow lane's share must lie in [lo, hi] */
};

static const struct slow_case slow_cases[] = {
    /* Much less than 1/K, but some: the trickle that keeps its rate measured. */
    {"adaptive", 0.001, 0.5 / 4},
    {"rr", 0.20, 0.30}, /* 1/K by count, whatever the path */
};

static int body_slow(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct slow_case *sc = arg;
	double t0 = harness_now();
	if (allreduce_8m(comm, rank, nranks, 2))
		return 1;
	const struct verbs_conn *c = conn_to(comm, 1 - rank);
	uint64_t total = lane_total(c, 4);
	double share = (double)c->lane[SLOW_LANE].bytes / (double)total;
	fprintf(stderr, "rank %d spray %s: slow lane %.3f of %llu bytes, %.2f s; lanes", rank,
		sc->spray, share, (unsigned long long)total, harness_now() - t0);
	for (unsigned l = 0; l < 4; l++)
		fprintf(stderr, " %.3f (%.0f MB/s)", (double)c->lane[l].bytes / (double)total,
			c->lane[l].rate_Bps / 1e6);
	fprintf(stderr, "\n");
	if (share < sc->lo || share > sc->hi)
		return harness_fail("spray %s: the slow lane carried %.3f of the bytes, expected "
				    "%.3f to %.3f",
				    sc->spray, share, sc->lo, sc->hi);
	for (unsigned l = 0; l < 4; l++)
		if (l != SLOW_LANE && c->lane[l].bytes < total / 5)
			return harness_fail("spray %s: lane %u carried %llu of %llu bytes",
					    sc->spray, l, (unsigned long long)c->lane[l].bytes,
					    (unsigned long long)total);
	return 0;
}

START_TEST(slow_lane)
{
	const struct slow_case *sc = &slow_cases[_i];
	char spray[32];
	snprintf(spray, sizeof(spray), "WEFT_SPRAY=%s", sc->spray);
	/* Two ranks: each process's QPs are its connection's lanes, in order. */
	const char *const more[] = {"WEFT_IB_QPS_PER_CONN=4", spray, PATH_SPEC, SLOW_SPEC, NULL};
	struct harness_result res;
	harness_run(2, env_with(more), body_slow, (void *)sc, JOB_TIMEOUT_S * 2, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* ---- ranks that disagree ---- */

static int k_differs(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	return setenv("WEFT_IB_QPS_PER_CONN", rank == nranks - 1 ? "3" : "2", 1) ? 1 : 0;
}

static int expect_mismatch(int rank, int nranks, weft_status_t st, const char *msg, double seconds,
			   void *arg)
{
	bool last = rank == nranks - 1;
	char mine[48], other[48];
	snprintf(mine, sizeof(mine), "rank %d has %s QPs", rank, last ? "3" : "2");
	snprintf(other, sizeof(other), "rank %d has %s", last ? 0 : nranks - 1, last ? "2" : "3");
	if (st != WEFT_ERR_INVALID_ARG || !strstr(msg, "WEFT_IB_QPS_PER_CONN differs") ||
	    !strstr(msg, mine) || !strstr(msg, other))
		return harness_fail("init: %s: \"%s\", expected it to name \"%s\" and \"%s\"",
				    weft_status_string(st), msg, mine, other);
	return seconds > 5.0 ? harness_fail("init took %.1f s to fail", seconds) : 0;
}

static int body_unreached(weft_comm_t comm, int rank, int nranks, void *arg)
{
	return harness_fail("init succeeded with WEFT_IB_QPS_PER_CONN differing");
}

START_TEST(k_mismatch)
{
	struct harness_job job = {.nranks = 3,
				  .env = env_with(NULL),
				  .body = body_unreached,
				  .before_init = k_differs,
				  .timeout_s = JOB_TIMEOUT_S,
				  .init_failed = expect_mismatch};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

/* Declared with its default and a line of help (weft-topo --settings). */
START_TEST(setting_declared)
{
	size_t n;
	const struct weft_setting *all = weft_settings_all(&n);
	const struct weft_setting *k = NULL;
	for (size_t i = 0; i < n; i++)
		if (strcmp(all[i].name, "WEFT_IB_QPS_PER_CONN") == 0)
			k = &all[i];
	ck_assert_msg(k, "WEFT_IB_QPS_PER_CONN is not declared");
	ck_assert_str_eq(k->default_value, "1");
	ck_assert_msg(strstr(k->help, "QPs"), "help: %s", k->help);
}
END_TEST

static Suite *lanes_suite(void)
{
	Suite *s = suite_create("verbs_lanes");
	TCase *tc = tcase_create("lanes");
	tcase_set_timeout(tc, 4 * JOB_TIMEOUT_S);
	tcase_add_loop_test(tc, four_lanes, 0, 2); /* 2 and 3 ranks */
	tcase_add_test(tc, one_lane);
	tcase_add_loop_test(tc, slow_lane, 0, 2);
	tcase_add_test(tc, k_mismatch);
	tcase_add_test(tc, setting_declared);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(lanes_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
