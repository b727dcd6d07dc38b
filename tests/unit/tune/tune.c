/*
 * tune.c — the tuner: override parsing, per-call selection and
 * WEFT_TUNE_CALIBRATE.
 *
 * Unit cases call the library's internals directly (the test links
 * libweft.a): WEFT_TUNE range specs, good and bad (each bad one must be
 * WEFT_ERR_INVALID_ARG with a message naming the bad part), WEFT_ALGO specs,
 * and weft_tune_select on a synthetic communicator (8 ranks on 2 hosts, no
 * transports: the socket defaults) honouring forced > ranges > estimate.
 *
 * Jobs run WEFT_TUNE_CALIBRATE=1 on rank processes over shm and the socket
 * transport on lo (separate "hosts" by WEFT_HOSTID, two leaves from a
 * topology file): each must initialise, every rank must hold the same cost
 * table (an allgather of the table's bytes), the classes that occur must
 * have positive, finite values that replaced the defaults, and allreduces
 * across small and large counts (so several algorithms are chosen) must be
 * exact. A bad WEFT_TUNE_CALIBRATE value fails init naming it. Rank 0's
 * measured table is printed, one line per class.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithms/algo.h"
#include "core/comm.h"
#include "harness.h"
#include "tune/tune.h"

#define JOB_TIMEOUT_S 60.0

/* ---- WEFT_TUNE ranges ---- */

static weft_status_t parse(const char *spec, struct weft_tuner *t, struct weft_err *err)
{
	memset(t, 0, sizeof(*t));
	memset(err, 0, sizeof(*err));
	return weft_tune_parse_ranges(spec, t, err);
}

START_TEST(ranges_good)
{
	struct weft_tuner t;
	struct weft_err err;
	ck_assert_int_eq(
	    parse("allreduce:0-64K:rhd,64K-inf:ring;allgather:0-1m:bruck,1M-2G:ring", &t, &err),
	    WEFT_SUCCESS);
	ck_assert_int_eq(t.nranges[WEFT_COLL_ALLREDUCE], 2);
	ck_assert_int_eq(t.nranges[WEFT_COLL_ALLGATHER], 2);
	ck_assert_int_eq(t.nranges[WEFT_COLL_BROADCAST], 0);
	const struct weft_tune_range *r = t.ranges[WEFT_COLL_ALLREDUCE];
	ck_assert_uint_eq(r[0].lo, 0);
	ck_assert_uint_eq(r[0].hi, 64 << 10);
	ck_assert_ptr_eq(r[0].algo, &weft_allreduce_rhd);
	ck_assert_uint_eq(r[1].lo, 64 << 10);
	ck_assert_uint_eq(r[1].hi, SIZE_MAX);
	ck_assert_ptr_eq(r[1].algo, &weft_allreduce_ring);
	r = t.ranges[WEFT_COLL_ALLGATHER];
	ck_assert_uint_eq(r[0].hi, 1 << 20);
	ck_assert_ptr_eq(r[0].algo, &weft_allgather_bruck);
	ck_assert_uint_eq(r[1].lo, 1 << 20);
	ck_assert_uint_eq(r[1].hi, (size_t)2 << 30);
	ck_assert_ptr_eq(r[1].algo, &weft_allgather_ring);

	/* Plain byte counts, lower-case suffixes, a collective named twice. */
	ck_assert_int_eq(parse("broadcast:0-100:tree;broadcast:100-1k:ring;"
			       "reduce_scatter:1g-inf:ring",
			       &t, &err),
			 WEFT_SUCCESS);
	ck_assert_int_eq(t.nranges[WEFT_COLL_BROADCAST], 2);
	ck_assert_uint_eq(t.ranges[WEFT_COLL_BROADCAST][0].hi, 100);
	ck_assert_uint_eq(t.ranges[WEFT_COLL_BROADCAST][1].hi, 1024);
	ck_assert_ptr_eq(t.ranges[WEFT_COLL_BROADCAST][1].algo, &weft_broadcast_ring);
	ck_assert_uint_eq(t.ranges[WEFT_COLL_REDUCE_SCATTER][0].lo, (size_t)1 << 30);

	/* Unset or empty: no ranges; parsing again starts over. */
	ck_assert_int_eq(parse(NULL, &t, &err), WEFT_SUCCESS);
	ck_assert_int_eq(t.nranges[WEFT_COLL_ALLREDUCE], 0);
	t.nranges[WEFT_COLL_ALLREDUCE] = 3;
	ck_assert_int_eq(weft_tune_parse_ranges("", &t, &err), WEFT_SUCCESS);
	ck_assert_int_eq(t.nranges[WEFT_COLL_ALLREDUCE], 0);
	ck_assert_int_eq(parse("allreduce:0-8:tree,", &t, &err), WEFT_SUCCESS);
	ck_assert_int_eq(t.nranges[WEFT_COLL_ALLREDUCE], 1);
}
END_TEST

struct bad_spec {
	const char *spec;
	const char *names; /* the message must contain this */
};

static const struct bad_spec bad_ranges[] = {
    {"allreduc:0-64K:ring", "unknown collective 'allreduc'"},
    {"allreduce:0-64K:ring;allgatherr:0-1K:ring", "unknown collective 'allgatherr'"},
    {"allreduce:0-64K:fast", "allreduce has no algorithm 'fast'"},
    {"allgather:0-1K:rhd", "allgather has no algorithm 'rhd'"},
    {"allreduce:0-64K:", "allreduce has no algorithm ''"},
    {"allreduce:64K-1K:ring", "bad byte range '64K-1K'"},
    {"allreduce:1K-1K:ring", "bad byte range '1K-1K'"},
    {"allreduce:inf-1K:ring", "bad byte range 'inf-1K'"},
    {"allreduce:0-64X:ring", "bad byte range '0-64X'"},
    {"allreduce:0-64KB:ring", "bad byte range '0-64KB'"},
    {"allreduce:x-64K:ring", "bad byte range 'x-64K'"},
    {"allreduce:-64K:ring", "bad byte range '-64K'"},
    {"allreduce", "'allreduce' is not collective:lo-hi:algo"},
    {"allreduce:0-64K", "range '0-64K' is not lo-hi:algo"},
    {"allreduce:0:ring", "range '0:ring' is not lo-hi:algo"},
    {"allreduce:0-1:ring,1-2:ring,2-3:ring,3-4:ring,4-5:ring,5-6:ring,6-7:ring,7-8:ring,"
     "8-9:ring",
     "more than 8 ranges for allreduce"},
};

START_TEST(ranges_bad)
{
	const struct bad_spec *b = &bad_ranges[_i];
	struct weft_tuner t;
	struct weft_err err;
	ck_assert_int_eq(parse(b->spec, &t, &err), WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, b->names) != NULL, "WEFT_TUNE=%s: message '%s' lacks '%s'",
		      b->spec, err.msg, b->names);
	ck_assert_msg(strncmp(err.msg, "WEFT_TUNE=", 10) == 0,
		      "message '%s' does not name WEFT_TUNE", err.msg);
}
END_TEST

/* ---- WEFT_ALGO ---- */

START_TEST(algo_forced_good)
{
	const struct weft_algo *forced[WEFT_COLL_COUNT];
	struct weft_err err = {0};
	ck_assert_int_eq(
	    weft_algo_parse_forced("allreduce:tree;allgather:bruck;broadcast:ring", forced, &err),
	    WEFT_SUCCESS);
	ck_assert_ptr_eq(forced[WEFT_COLL_ALLREDUCE], &weft_allreduce_tree);
	ck_assert_ptr_eq(forced[WEFT_COLL_ALLGATHER], &weft_allgather_bruck);
	ck_assert_ptr_eq(forced[WEFT_COLL_BROADCAST], &weft_broadcast_ring);
	ck_assert_ptr_null(forced[WEFT_COLL_REDUCE]);
	ck_assert_ptr_null(forced[WEFT_COLL_ALLTOALL]);
	/* Every algorithm of the table can be forced by its name. */
	for (int c = 0; c < WEFT_COLL_COUNT; c++) {
		for (const struct weft_algo *const *a = weft_algos_for((enum weft_coll_kind)c); *a;
		     a++) {
			char spec[64];
			snprintf(spec, sizeof(spec), "%s:%s",
				 weft_coll_name((enum weft_coll_kind)c), (*a)->name);
			ck_assert_int_eq(weft_algo_parse_forced(spec, forced, &err), WEFT_SUCCESS);
			ck_assert_ptr_eq(forced[c], *a);
		}
	}
	ck_assert_int_eq(weft_algo_parse_forced(NULL, forced, &err), WEFT_SUCCESS);
	for (int c = 0; c < WEFT_COLL_COUNT; c++)
		ck_assert_ptr_null(forced[c]);
}
END_TEST

static const struct bad_spec bad_algos[] = {
    {"allreduce", "'allreduce' is not collective:algorithm"},
    {"allreduc:ring", "unknown collective 'allreduc'"},
    {"allreduce:bruck", "allreduce has no algorithm 'bruck'"},
    {"allreduce:ring;allgather:tree", "allgather has no algorithm 'tree'"},
    {"allreduce:", "allreduce has no algorithm ''"},
};

START_TEST(algo_forced_bad)
{
	const struct bad_spec *b = &bad_algos[_i];
	const struct weft_algo *forced[WEFT_COLL_COUNT];
	struct weft_err err = {0};
	ck_assert_int_eq(weft_algo_parse_forced(b->spec, forced, &err), WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, b->names) != NULL, "WEFT_ALGO=%s: message '%s' lacks '%s'",
		      b->spec, err.msg, b->names);
	ck_assert_msg(strncmp(err.msg, "WEFT_ALGO=", 10) == 0,
		      "message '%s' does not name WEFT_ALGO", err.msg);
}
END_TEST

/* ---- selection on a synthetic communicator ---- */

#define FAKE_RANKS 8

struct fake {
	struct weft_comm comm;
	struct weft_card cards[FAKE_RANKS];
	int ring[FAKE_RANKS];
};

/* 8 ranks, 4 per host, no transports (socket costs everywhere); the
 * overrides come from the environment, as at init. */
static weft_status_t fake_init(struct fake *f, const char *algo, const char *tune)
{
	memset(f, 0, sizeof(*f));
	struct weft_topo_rank in[FAKE_RANKS];
	for (int r = 0; r < FAKE_RANKS; r++) {
		struct weft_card *c = &f->cards[r];
		const char *host = r < FAKE_RANKS / 2 ? "host-a" : "host-b";
		snprintf(c->host_id, sizeof(c->host_id), "%s", host);
		snprintf(c->hostname, sizeof(c->hostname), "%s", host);
		c->rank = r;
		c->local_rank = (uint32_t)(r % (FAKE_RANKS / 2));
		c->local_count = FAKE_RANKS / 2;
		c->topo.numa = 0;
		c->topo.nic_numa = -1;
		in[r].host_id = c->host_id;
		in[r].hostname = c->hostname;
		in[r].card = &c->topo;
	}
	ck_assert_int_eq(weft_topo_graph_build(&f->comm.graph, FAKE_RANKS, in, &f->comm.err),
			 WEFT_SUCCESS);
	weft_topo_ring_order(&f->comm.graph, false, f->ring);
	f->comm.nranks = FAKE_RANKS;
	f->comm.rank = 1; /* not 0: no table in the log */
	f->comm.ring = f->ring;
	f->comm.cards = f->cards;
	f->comm.chunk_bytes = 512 << 10;
	unsetenv("WEFT_TUNE_CALIBRATE");
	if (algo)
		setenv("WEFT_ALGO", algo, 1);
	else
		unsetenv("WEFT_ALGO");
	if (tune)
		setenv("WEFT_TUNE", tune, 1);
	else
		unsetenv("WEFT_TUNE");
	return weft_tune_init(&f->comm);
}

static void fake_free(struct fake *f)
{
	/* weft_tune_init hands over its tuner even when it fails. */
	if (f->comm.tuner_free)
		f->comm.tuner_free(f->comm.tuner);
	f->comm.tuner = NULL;
	f->comm.tuner_free = NULL;
	weft_topo_graph_free(&f->comm.graph);
}

static struct weft_coll_args call(enum weft_coll_kind coll, size_t count)
{
	struct weft_coll_args a = {
	    .coll = coll,
	    .count = count,
	    .dtype = WEFT_FLOAT32,
	    .op = WEFT_SUM,
	    .esize = 4,
	};
	return a;
}

/* The lowest estimate among the algorithms that can run the call. */
static const struct weft_algo *cheapest(const struct weft_comm *comm,
					const struct weft_coll_args *args)
{
	const struct weft_algo *const *algos = weft_algos_for(args->coll);
	const struct weft_algo *best = algos[0];
	double best_t = INFINITY;
	for (const struct weft_algo *const *a = algos; *a; a++) {
		if (!(*a)->estimate || ((*a)->supports && !(*a)->supports(comm, args)))
			continue;
		double t = (*a)->estimate(comm, &comm->tuner->links, args);
		ck_assert_msg(isfinite(t) && t >= 0, "%s estimate %g", (*a)->name, t);
		if (t < best_t) {
			best_t = t;
			best = *a;
		}
	}
	return best;
}

static const size_t counts[] = {1, 2, 64, 1000, 16384, 16385, 1 << 18, 1 << 22};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

START_TEST(select_estimate)
{
	static struct fake f;
	ck_assert_int_eq(fake_init(&f, NULL, NULL), WEFT_SUCCESS);
	for (int c = 0; c < WEFT_COLL_COUNT; c++) {
		if (c == WEFT_COLL_SEND || c == WEFT_COLL_RECV || c == WEFT_COLL_BARRIER)
			continue;
		for (size_t i = 0; i < NCOUNTS; i++) {
			struct weft_coll_args a = call((enum weft_coll_kind)c, counts[i]);
			const struct weft_algo *got = weft_tune_select(&f.comm, &a);
			ck_assert_msg(got == cheapest(&f.comm, &a),
				      "%s count %zu: chose %s, cheapest %s", weft_coll_name(a.coll),
				      counts[i], got->name, cheapest(&f.comm, &a)->name);
		}
	}
	/* Ring pays 2(n-1) latencies: a tiny allreduce over 8 ranks should not take it. */
	struct weft_coll_args tiny = call(WEFT_COLL_ALLREDUCE, 1);
	ck_assert_ptr_ne(weft_tune_select(&f.comm, &tiny), &weft_allreduce_ring);
	/* The table lists every allreduce algorithm. */
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(mem);
	weft_tune_print(&f.comm, mem);
	fclose(mem);
	for (const struct weft_algo *const *a = weft_algos_for(WEFT_COLL_ALLREDUCE); *a; a++)
		ck_assert_msg(strstr(text, (*a)->name), "table lacks %s:\n%s", (*a)->name, text);
	free(text);
	fake_free(&f);
}
END_TEST

START_TEST(select_ranges)
{
	static struct fake f;
	ck_assert_int_eq(fake_init(&f, NULL,
				   "allreduce:0-64K:ring,64K-inf:tree;"
				   "allgather:0-4K:bruck,4K-inf:ring;broadcast:1K-2K:tree"),
			 WEFT_SUCCESS);
	struct weft_coll_args a = call(WEFT_COLL_ALLREDUCE, 1);
	ck_assert_ptr_eq(weft_tune_select(&f.comm, &a), &weft_allreduce_ring);
	a.count = 16383; /* 65532 bytes */
	ck_assert_ptr_eq(weft_tune_select(&f.comm, &a), &weft_allreduce_ring);
	a.count = 16384; /* 64K: the upper range, lo is inclusive */
	ck_assert_ptr_eq(weft_tune_select(&f.comm, &a), &weft_allreduce_tree);
	a.count = 1 << 26;
	ck_assert_ptr_eq(weft_tune_select(&f.comm, &a), &weft_allreduce_tree);
	/* Allgather ranges count the whole result: count * esize * nranks. */
	a = call(WEFT_COLL_ALLGATHER, 127); /* 4064 bytes */
	ck_assert_ptr_eq(weft_tune_select(&f.comm, &a), &weft_allgather_bruck);
	a.count = 128; /* 4096 */
	ck_assert_ptr_eq(weft_tune_select(&f.comm, &a), &weft_allgather_ring);
	/* Outside every range: the estimate decides. */
	for (size_t i = 0; i < NCOUNTS; i++) {
		a = call(WEFT_COLL_BROADCAST, counts[i]);
		size_t bytes = counts[i] * 4;
		const struct weft_algo *want =
		    bytes >= 1024 && bytes < 2048 ? &weft_broadcast_tree : cheapest(&f.comm, &a);
		ck_assert_ptr_eq(weft_tune_select(&f.comm, &a), want);
		a = call(WEFT_COLL_REDUCE_SCATTER, counts[i]);
		ck_assert_ptr_eq(weft_tune_select(&f.comm, &a), cheapest(&f.comm, &a));
	}
	a = call(WEFT_COLL_BROADCAST, 300); /* 1200 bytes */
	ck_assert_ptr_eq(weft_tune_select(&f.comm, &a), &weft_broadcast_tree);
	fake_free(&f);
}
END_TEST

/* An algorithm that adapts after its first step (the shm AllReduce, which
 * hands plain buffers on) is chosen from its adapts_from up wherever it
 * can run, unless forced otherwise; below that, and for what it hands the
 * call to, the estimates decide. The fake communicator gets a stand-in for
 * the shm module, which is all the shm AllReduce's supports() looks at. */
START_TEST(select_adapts)
{
	static struct fake f;
	static char module;
	const struct weft_algo *shm = &weft_allreduce_shm;
	ck_assert_uint_gt(shm->adapts_from, 0);
	ck_assert_int_eq(fake_init(&f, NULL, NULL), WEFT_SUCCESS);
	/* Make shm's estimate lose, so only adapts_from can choose it. */
	f.comm.tuner->links.intra_host.alpha *= 1e4;
	f.comm.tuner->links.intra_host.beta *= 1e2;
	size_t edge = shm->adapts_from / 4;
	const size_t sizes[] = {1, 1000, edge - 1, edge, edge + 1, 1 << 22};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct weft_coll_args a = call(WEFT_COLL_ALLREDUCE, sizes[i]);
		const struct weft_algo *plain = cheapest(&f.comm, &a); /* no module: no shm */
		f.comm.shmem = (struct weft_shmem *)&module;
		const struct weft_algo *got = weft_tune_select(&f.comm, &a);
		const struct weft_algo *other = weft_tune_select_other(&f.comm, &a, shm);
		const struct weft_algo *want = sizes[i] >= edge ? shm : cheapest(&f.comm, &a);
		ck_assert_ptr_ne(cheapest(&f.comm, &a), shm);
		f.comm.shmem = NULL;
		ck_assert_msg(got == want, "count %zu: chose %s, want %s", sizes[i], got->name,
			      want->name);
		ck_assert_msg(other == plain, "count %zu: next choice %s, cheapest without shm %s",
			      sizes[i], other ? other->name : "none", plain->name);
	}
	fake_free(&f);
	ck_assert_int_eq(fake_init(&f, "allreduce:ring", NULL), WEFT_SUCCESS);
	f.comm.shmem = (struct weft_shmem *)&module;
	struct weft_coll_args a = call(WEFT_COLL_ALLREDUCE, 1 << 22);
	ck_assert_ptr_eq(weft_tune_select(&f.comm, &a), &weft_allreduce_ring);
	f.comm.shmem = NULL;
	fake_free(&f);
}
END_TEST

START_TEST(select_forced_over_ranges)
{
	static struct fake f;
	ck_assert_int_eq(
	    fake_init(&f, "allreduce:rhd", "allreduce:0-inf:tree;allgather:0-inf:bruck"),
	    WEFT_SUCCESS);
	for (size_t i = 0; i < NCOUNTS; i++) {
		struct weft_coll_args a = call(WEFT_COLL_ALLREDUCE, counts[i]);
		ck_assert_ptr_eq(weft_tune_select(&f.comm, &a), &weft_allreduce_rhd);
		a = call(WEFT_COLL_ALLGATHER, counts[i]);
		ck_assert_ptr_eq(weft_tune_select(&f.comm, &a), &weft_allgather_bruck);
		a = call(WEFT_COLL_ALLTOALL, counts[i]);
		ck_assert_ptr_eq(weft_tune_select(&f.comm, &a), cheapest(&f.comm, &a));
	}
	fake_free(&f);
}
END_TEST

/* weft_tune_init rejects bad overrides with the message naming them. */
START_TEST(init_bad_overrides)
{
	static struct fake f;
	ck_assert_int_eq(fake_init(&f, "allreduce:nope", NULL), WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(f.comm.err.msg, "WEFT_ALGO=allreduce:nope"), "%s", f.comm.err.msg);
	fake_free(&f);
	ck_assert_int_eq(fake_init(&f, NULL, "allreduce:2M-1M:ring"), WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(f.comm.err.msg, "'2M-1M'"), "%s", f.comm.err.msg);
	fake_free(&f);
	ck_assert_int_eq(fake_init(&f, NULL, NULL), WEFT_SUCCESS);
	setenv("WEFT_TUNE_CALIBRATE", "yes", 1);
	ck_assert_int_eq(weft_tune_calibrate(&f.comm), WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(f.comm.err.msg, "WEFT_TUNE_CALIBRATE=yes"), "%s", f.comm.err.msg);
	setenv("WEFT_TUNE_CALIBRATE", "0", 1);
	ck_assert_int_eq(weft_tune_calibrate(&f.comm), WEFT_SUCCESS);
	fake_free(&f);
}
END_TEST

/* ---- WEFT_TUNE_CALIBRATE=1 jobs ---- */

#define MAX_JOB_RANKS 4

struct layout {
	const char *name;
	int nranks;
	int host[MAX_JOB_RANKS];
	bool two_leaves; /* h0, h1 under leaf1; h2 under leaf2 */
};

static const struct layout layouts[] = {
    {"2 ranks, one host", 2, {0, 0}, false},
    {"2 ranks, 2 hosts", 2, {0, 1}, false},
    {"3 ranks, 2 hosts", 3, {0, 0, 1}, false},
    {"3 ranks, 3 hosts on 2 leaves", 3, {0, 1, 2}, true},
};

#define NLAYOUTS ((int)(sizeof(layouts) / sizeof(layouts[0])))

/* What rank 0 leaves for the parent to print. */
struct shared_table {
	bool present[WEFT_LINK_CLASS_COUNT];
	struct weft_cost cost[WEFT_LINK_CLASS_COUNT];
};

static int set_host(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	const struct layout *l = arg;
	char host[32];
	snprintf(host, sizeof(host), "h%d", l->host[rank]);
	return setenv("WEFT_HOSTID", host, 1) != 0 ? harness_fail("setenv WEFT_HOSTID failed") : 0;
}

static void classes_present(const struct weft_comm *c, bool present[WEFT_LINK_CLASS_COUNT])
{
	memset(present, 0, WEFT_LINK_CLASS_COUNT * sizeof(bool));
	for (int a = 0; a < c->nranks; a++)
		for (int b = a + 1; b < c->nranks; b++)
			present[weft_topo_link(&c->graph, a, b)] = true;
}

/* The table weft_tune_init had from the transports, before calibration. */
static int default_table(struct weft_comm *comm, struct weft_cost out[WEFT_LINK_CLASS_COUNT])
{
	memcpy(out, comm->tuner->from_transports, sizeof(comm->tuner->from_transports));
	return 0;
}

static int check_table(weft_comm_t comm, int rank, int nranks)
{
	bool present[WEFT_LINK_CLASS_COUNT];
	classes_present(comm, present);
	struct weft_cost defaults[WEFT_LINK_CLASS_COUNT];
	if (default_table(comm, defaults))
		return 1;
	const struct weft_cost *cost = comm->tuner->links.cls;
	int measured = 0;
	for (int c = WEFT_LINK_NUMA; c < WEFT_LINK_CLASS_COUNT; c++) {
		const char *name = weft_topo_link_name((enum weft_link_class)c);
		double v[3] = {cost[c].alpha, cost[c].beta, cost[c].gamma};
		for (int k = 0; k < 3; k++)
			if (!isfinite(v[k]) || v[k] <= 0)
				return harness_fail("%s: cost %d is %g", name, k, v[k]);
		if (!present[c])
			continue;
		/* A measured value equal to the default to the last bit is no measurement. */
		measured += cost[c].alpha != defaults[c].alpha;
		measured += cost[c].beta != defaults[c].beta;
		if (cost[c].gamma == defaults[c].gamma)
			return harness_fail("%s: gamma kept its default", name);
	}
	if (measured == 0)
		return harness_fail("calibration changed no alpha or beta");
	if (rank == 0) {
		struct shared_table *s = harness_shared();
		memcpy(s->present, present, sizeof(present));
		memcpy(s->cost, cost, sizeof(s->cost));
	}
	/* Every rank holds the same table, to the bit. */
	size_t bytes = sizeof(comm->tuner->links.cls);
	unsigned char *all = malloc(bytes * (size_t)nranks);
	if (!all)
		return harness_fail("no memory");
	harness_progress("allgather of the cost table");
	weft_status_t st = weft_allgather(comm->tuner->links.cls, all, bytes, WEFT_UINT8, comm);
	int bad = -1;
	for (int r = 0; st == WEFT_SUCCESS && r < nranks && bad < 0; r++)
		if (memcmp(all + (size_t)r * bytes, comm->tuner->links.cls, bytes) != 0)
			bad = r;
	free(all);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "allgather of the cost table");
	if (bad >= 0)
		return harness_fail("rank %d's cost table differs from mine", bad);
	return 0;
}

static int check_allreduce(weft_comm_t comm, int rank, int nranks)
{
	static const size_t ar_counts[] = {1, 7, 1000, 65537, (1u << 18) + 3};
	size_t cap = ((1u << 18) + 3) * sizeof(float);
	float *buf = malloc(cap), *want = malloc(cap);
	int rc = 0;
	if (!buf || !want)
		rc = harness_fail("no memory");
	for (size_t i = 0; rc == 0 && i < sizeof(ar_counts) / sizeof(ar_counts[0]); i++) {
		size_t n = ar_counts[i];
		struct weft_coll_args a = call(WEFT_COLL_ALLREDUCE, n);
		harness_progress("allreduce count %zu (%s)", n, weft_tune_select(comm, &a)->name);
		harness_ar_input(buf, n, WEFT_FLOAT32, WEFT_SUM, rank, nranks, (unsigned)i);
		harness_ar_expected(want, n, WEFT_FLOAT32, WEFT_SUM, nranks, (unsigned)i);
		weft_status_t st =
		    weft_allreduce(WEFT_IN_PLACE, buf, n, WEFT_FLOAT32, WEFT_SUM, comm);
		char why[256];
		if (st != WEFT_SUCCESS)
			rc = harness_fail_status(comm, st, "allreduce count %zu", n);
		else if (harness_compare(buf, want, n, WEFT_FLOAT32, why, sizeof(why)) != SIZE_MAX)
			rc = harness_fail("allreduce count %zu (%s): %s", n,
					  weft_tune_select(comm, &a)->name, why);
	}
	free(buf);
	free(want);
	return rc;
}

static int calibrated_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int rc = check_table(comm, rank, nranks);
	return rc ? rc : check_allreduce(comm, rank, nranks);
}

static void print_table(const char *name, const struct shared_table *s, double seconds)
{
	fprintf(stderr, "calibrated, %s (job %.2f s):\n", name, seconds);
	for (int c = WEFT_LINK_NUMA; c < WEFT_LINK_CLASS_COUNT; c++)
		if (s->present[c])
			fprintf(
			    stderr,
			    "  %-5s alpha %7.2f us  beta %.4f ns/B (%6.2f GB/s)  gamma %.4f ns/B "
			    "(%6.2f GB/s)\n",
			    weft_topo_link_name((enum weft_link_class)c), s->cost[c].alpha * 1e6,
			    s->cost[c].beta * 1e9, 1e-9 / s->cost[c].beta, s->cost[c].gamma * 1e9,
			    1e-9 / s->cost[c].gamma);
}

START_TEST(calibrated_jobs)
{
	const struct layout *l = &layouts[_i];
	char path[] = "/tmp/weft-test-tune-XXXXXX";
	char topo_env[64] = "WEFT_PLACEMENT=topo";
	if (l->two_leaves) {
		int fd = mkstemp(path);
		ck_assert_int_ge(fd, 0);
		const char text[] = "SwitchName=leaf1 Nodes=h0,h1\nSwitchName=leaf2 Nodes=h2\n"
				    "SwitchName=spine Switches=leaf[1-2]\n";
		ck_assert_int_eq(write(fd, text, sizeof(text) - 1), (int)sizeof(text) - 1);
		close(fd);
		snprintf(topo_env, sizeof(topo_env), "WEFT_TOPO_FILE=%s", path);
	}
	const char *const env[] = {"WEFT_TUNE_CALIBRATE=1", "WEFT_TIMEOUT=30",
				   "WEFT_SOCKET_IFNAME=lo", topo_env, NULL};
	struct harness_job job = {
	    .nranks = l->nranks,
	    .env = env,
	    .body = calibrated_body,
	    .arg = (void *)l,
	    .timeout_s = JOB_TIMEOUT_S,
	    .before_init = set_host,
	};
	struct harness_result res;
	harness_run_job(&job, &res);
	if (l->two_leaves)
		unlink(path);
	ck_assert_msg(res.ok, "calibrated, %s:\n%s", l->name, res.summary);
	print_table(l->name, (const struct shared_table *)res.shared, res.seconds);
}
END_TEST

static int expect_bad_setting(int rank, int nranks, weft_status_t status, const char *message,
			      double seconds, void *arg)
{
	if (status != WEFT_ERR_INVALID_ARG)
		return harness_fail("init returned %d (%s), expected WEFT_ERR_INVALID_ARG", status,
				    message);
	if (!strstr(message, "WEFT_TUNE_CALIBRATE=2"))
		return harness_fail("init message '%s' does not name WEFT_TUNE_CALIBRATE=2",
				    message);
	return 0;
}

static int never_reached(weft_comm_t comm, int rank, int nranks, void *arg)
{
	return harness_fail("init succeeded with WEFT_TUNE_CALIBRATE=2");
}

START_TEST(calibrate_bad_value)
{
	const char *const env[] = {"WEFT_TUNE_CALIBRATE=2", "WEFT_TIMEOUT=20", NULL};
	struct harness_job job = {
	    .nranks = 2,
	    .env = env,
	    .body = never_reached,
	    .timeout_s = 30,
	    .init_failed = expect_bad_setting,
	};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "WEFT_TUNE_CALIBRATE=2:\n%s", res.summary);
}
END_TEST

static Suite *tune_suite(void)
{
	Suite *s = suite_create("tune");
	TCase *tc = tcase_create("parse");
	tcase_add_test(tc, ranges_good);
	tcase_add_loop_test(tc, ranges_bad, 0, (int)(sizeof(bad_ranges) / sizeof(bad_ranges[0])));
	tcase_add_test(tc, algo_forced_good);
	tcase_add_loop_test(tc, algo_forced_bad, 0,
			    (int)(sizeof(bad_algos) / sizeof(bad_algos[0])));
	suite_add_tcase(s, tc);
	tc = tcase_create("select");
	tcase_add_test(tc, select_estimate);
	tcase_add_test(tc, select_ranges);
	tcase_add_test(tc, select_adapts);
	tcase_add_test(tc, select_forced_over_ranges);
	tcase_add_test(tc, init_bad_overrides);
	suite_add_tcase(s, tc);
	tc = tcase_create("calibrate");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, calibrated_jobs, 0, NLAYOUTS);
	tcase_add_test(tc, calibrate_bad_value);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(tune_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
