/*
 * integ_matrix.c — what the collective suites run the same way
 * (integ_matrix.h): over the verbs double, on fake hosts, and the plans of
 * ReduceScatter, Broadcast, Reduce and AlltoAll over shm and socket.
 *
 * verbs: 2, 3 and 4 ranks, counts 0, 1, 7, nranks - 1, 4099 and 70001
 * (several of the double's 32 KiB slots), then at 3 ranks each algorithm
 * forced with WEFT_ALGO in turn.
 *
 * The cases rotate (datatype, op) samples, in place and out of place, and
 * roots first, last and middle (colls.h checks each).
 *
 * hosts: several "hosts" on one machine, each rank setting its own
 * WEFT_HOSTID before init, so that ranks with different ids talk over
 * socket on lo and ranks with equal ids over shm. The layouts cover 1
 * host, 2 and 3 hosts, one rank per host, unequal hosts and hosts whose
 * ranks are interleaved in rank order, placement by topology and by rank
 * number, and a topology file that puts the hosts under two leaves; each
 * forces the collective's hier algorithm and first checks the layout as
 * the library sees it and what the tuner may make of it (nothing to gain
 * with one host or one rank per host).
 */
#include "integ_matrix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithms/algo.h"
#include "core/comm.h"
#include "tune/tune.h"

struct sample {
	weft_datatype_t dt;
	weft_op_t op;
};

static const struct sample samples[] = {
    {WEFT_FLOAT32, WEFT_SUM},  {WEFT_FLOAT16, WEFT_AVG}, {WEFT_INT32, WEFT_MAX},
    {WEFT_BFLOAT16, WEFT_SUM}, {WEFT_UINT8, WEFT_MIN},	 {WEFT_FLOAT64, WEFT_PROD},
    {WEFT_INT64, WEFT_AVG},    {WEFT_UINT64, WEFT_SUM},	 {WEFT_INT8, WEFT_PROD},
};
#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))

enum coll_result coll_rotated(struct coll_ctx *c, enum weft_coll_kind coll, size_t count,
			      unsigned rot)
{
	const int roots[3] = {0, c->nranks - 1, c->nranks / 2};
	struct coll_case k = {
	    .count = count,
	    .dt = samples[rot % NSAMPLES].dt,
	    .op = samples[rot % NSAMPLES].op,
	    .form = rot % 2 ? COLL_IN_PLACE : COLL_OUT,
	    .root = roots[rot % 3],
	};
	switch (coll) {
	case WEFT_COLL_ALLREDUCE: return coll_allreduce(c, &k);
	case WEFT_COLL_ALLGATHER: return coll_allgather(c, &k);
	case WEFT_COLL_REDUCE_SCATTER: return coll_reduce_scatter(c, &k);
	case WEFT_COLL_BROADCAST: return coll_broadcast(c, &k);
	case WEFT_COLL_REDUCE: return coll_reduce(c, &k);
	case WEFT_COLL_ALLTOALL: return coll_alltoall(c, &k);
	default: c->cases++; return coll_status(c, "barrier", weft_barrier(c->comm));
	}
}

static enum weft_coll_kind g_coll; /* of the suite that added the cases */

static int verbs_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const size_t counts[] = {0, 1, 7, (size_t)nranks - 1, 4099, 70001};
	struct coll_ctx c;
	coll_init(&c, comm, rank, nranks);
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]) && !c.error; k++)
		coll_rotated(&c, g_coll, counts[k], c.rot++);
	return coll_end(&c);
}

START_TEST(verbs_matrix)
{
	struct integ_env e;
	integ_env_init(&e, 20);
	char label[96];
	snprintf(label, sizeof(label), "%s over verbs, nranks %d", weft_coll_name(g_coll), 2 + _i);
	struct harness_job job = {.nranks = 2 + _i, .body = verbs_body, .timeout_s = 120};
	integ_run(&job, &e, label);
}
END_TEST

START_TEST(verbs_forced)
{
	const struct weft_algo *algo = weft_algos_for(g_coll)[_i];
	struct integ_env e;
	integ_env_init(&e, 20);
	integ_env_addf(&e, "WEFT_ALGO=%s:%s", weft_coll_name(g_coll), algo->name);
	char label[96];
	snprintf(label, sizeof(label), "%s:%s over verbs, nranks 3", weft_coll_name(g_coll),
		 algo->name);
	struct harness_job job = {.nranks = 3, .body = verbs_body, .timeout_s = 120};
	integ_run(&job, &e, label);
}
END_TEST

void integ_add_verbs(Suite *s, enum weft_coll_kind coll, bool forced)
{
	g_coll = coll;
	TCase *tc = integ_tcase(s, "auto", 150);
	if (tc)
		tcase_add_loop_test(tc, verbs_matrix, 0, 3); /* 2, 3, 4 ranks */
	const struct weft_algo *const *algos = weft_algos_for(coll);
	for (int a = 0; forced && algos[a]; a++)
		if ((tc = integ_tcase(s, algos[a]->name, 150)))
			tcase_add_loop_test(tc, verbs_forced, a, a + 1);
}

#define HOSTS_MAX_RANKS 8

struct layout {
	const char *name;
	int nranks;
	int host[HOSTS_MAX_RANKS]; /* host label of each rank */
	bool by_rank;		   /* WEFT_PLACEMENT=rank */
	bool topo_file;		   /* two leaves from a topology file */
	int nhosts;
};

static const struct layout layouts[] = {
    {"2 hosts x 2", 4, {0, 0, 1, 1}, false, false, 2},
    {"2 hosts 1+2 interleaved", 3, {1, 0, 1}, false, false, 2},
    {"3 hosts 3+2+1 interleaved", 6, {0, 1, 2, 0, 1, 0}, false, false, 3},
    {"3 hosts 2+2+1 by rank", 5, {0, 1, 0, 2, 1}, true, false, 3},
    {"3 hosts x 1", 3, {0, 1, 2}, false, false, 3},
    {"1 host x 3", 3, {0, 0, 0}, false, false, 1},
    {"4 hosts on 2 leaves", 6, {0, 1, 2, 3, 0, 2}, false, true, 4},
};
#define NLAYOUTS ((int)(sizeof(layouts) / sizeof(layouts[0])))

static harness_body_fn g_hosts_cases;

/* The layout as the library sees it, and what the tuner may make of it. */
static int check_model(weft_comm_t comm, const struct layout *l)
{
	if (comm->graph.nhosts != l->nhosts)
		return harness_fail("%d hosts, expected %d", comm->graph.nhosts, l->nhosts);
	bool gain = l->nhosts > 1 && l->nhosts < l->nranks;
	const struct weft_algo *a = weft_algo_find(g_coll, "hier");
	if (!a)
		return harness_fail("%s:hier is not in the table", weft_coll_name(g_coll));
	struct weft_coll_args args = {
	    .coll = g_coll, .count = 4096, .dtype = WEFT_FLOAT32, .esize = 4};
	if (a->supports(comm, &args) != gain)
		return harness_fail("%s:hier supports() is %d, expected %d", weft_coll_name(g_coll),
				    !gain, gain);
	double t = a->estimate(comm, &comm->tuner->links, &args);
	if (!(t >= 0 && t < 1e3))
		return harness_fail("%s:hier estimate %g", weft_coll_name(g_coll), t);
	return 0;
}

static int hosts_body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	return check_model(comm, arg) ? 1 : g_hosts_cases(comm, rank, nranks, NULL);
}

START_TEST(hosts_layout)
{
	const struct layout *l = &layouts[_i];
	char path[] = "/tmp/weft_hier_topoXXXXXX";
	int fd = -1;
	struct integ_env e;
	integ_env_init(&e, 60);
	integ_env_addf(&e, "WEFT_ALGO=%s:hier", weft_coll_name(g_coll));
	integ_env_add(&e, l->by_rank ? "WEFT_PLACEMENT=rank" : "WEFT_PLACEMENT=topo");
	if (l->topo_file) {
		/* h0, h2 under leaf1; h1, h3 under leaf2 */
		fd = mkstemp(path);
		ck_assert_int_ge(fd, 0);
		const char text[] = "SwitchName=leaf1 Nodes=h0,h2\nSwitchName=leaf2 Nodes=h1,h3\n"
				    "SwitchName=spine Switches=leaf[1-2]\n";
		ck_assert_int_eq(write(fd, text, sizeof(text) - 1), (int)sizeof(text) - 1);
		close(fd);
		integ_env_addf(&e, "WEFT_TOPO_FILE=%s", path);
	}
	integ_hosts(&(struct integ_hosts){.nhosts = l->nhosts, .of = l->host});
	char label[128];
	snprintf(label, sizeof(label), "%s:hier, %s (%d ranks)", weft_coll_name(g_coll), l->name,
		 l->nranks);
	struct harness_job job = {
	    .nranks = l->nranks,
	    .body = hosts_body,
	    .arg = (void *)l,
	    .timeout_s = 120,
	    .before_init = integ_set_host,
	};
	integ_run(&job, &e, label);
	if (fd >= 0)
		unlink(path);
}
END_TEST

void integ_add_hosts(Suite *s, enum weft_coll_kind coll, harness_body_fn cases)
{
	g_coll = coll;
	g_hosts_cases = cases;
	TCase *tc = integ_tcase(s, "hier", 150);
	if (tc)
		tcase_add_loop_test(tc, hosts_layout, 0, NLAYOUTS);
}

size_t integ_plan_counts(const struct integ_plan *p, int nranks, size_t counts[6])
{
	size_t k = 0;
	counts[k++] = 0;
	counts[k++] = 1;
	counts[k++] = 7;
	if (nranks - 1 > 1 && nranks - 1 != 7)
		counts[k++] = (size_t)nranks - 1;
	counts[k++] = 4099;
	if (p->big && nranks <= 3)
		counts[k++] = INTEG_PLAN_BIG;
	return k;
}

size_t integ_roots(int nranks, int roots[3])
{
	size_t k = 0;
	roots[k++] = 0;
	if (nranks > 1)
		roots[k++] = nranks - 1;
	if (nranks > 2)
		roots[k++] = nranks / 2;
	return k;
}

static harness_body_fn g_plan_body;

START_TEST(plan_auto)
{
	bool socket = integ_over("socket");
	struct integ_plan plan = {.cheap = socket ? _i >= 6 : _i == 8,
				  .big = socket ? _i == 2 : true};
	integ_run_algo(weft_coll_name(g_coll), NULL, NULL, _i, g_plan_body, &plan);
}
END_TEST

/* _i / 16: the algorithm's index in the table; _i % 16: the rank count's. */
static const int plan_forced_shm[] = {2, 3, 5, 8}, plan_forced_socket[] = {3, 5};

START_TEST(plan_forced)
{
	const struct weft_algo *a = weft_algos_for(g_coll)[_i / 16];
	int n = integ_over("socket") ? plan_forced_socket[_i % 16] : plan_forced_shm[_i % 16];
	struct integ_plan plan = {.cheap = n == 8, .big = n <= 3};
	integ_run_algo(weft_coll_name(g_coll), a->name, NULL, n, g_plan_body, &plan);
}
END_TEST

void integ_add_plans(Suite *s, enum weft_coll_kind coll, harness_body_fn body)
{
	g_coll = coll;
	g_plan_body = body;
	bool socket = integ_over("socket");
	TCase *tc = integ_tcase(s, "auto", 150);
	if (tc)
		tcase_add_loop_test(tc, plan_auto, socket ? 2 : 1, 9);
	const struct weft_algo *const *algos = weft_algos_for(coll);
	int n = socket ? 2 : 4;
	for (int a = 0; algos[a]; a++)
		if ((tc = integ_tcase(s, algos[a]->name, 4 * 150)))
			tcase_add_loop_test(tc, plan_forced, a * 16, a * 16 + n);
}
