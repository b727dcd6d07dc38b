/*
 * test_algos_hier.c — the hierarchical AllReduce and AllGather.
 *
 * Several "hosts" on one machine: each rank sets its own WEFT_HOSTID before
 * init (the harness's before_init hook), so ranks with different ids talk
 * over the socket transport on lo and ranks with equal ids over shm. The
 * layouts cover 1 host, 2 and 3 hosts, one rank per host, unequal hosts and
 * hosts whose ranks are interleaved in rank order, placement by topology and
 * by rank number, and a topology file that puts the hosts under two leaves.
 * Each forces allreduce:hier and allgather:hier (WEFT_ALGO) and runs counts
 * {1, 7, nranks-1, 4099, 65537} over samples of datatypes and ops (avg
 * included), out of place and in place, checking every element and the
 * guard bytes.
 *
 * A unit test checks the layout arithmetic (chains and the leaders' ring)
 * exhaustively on synthetic graphs of 1..64 ranks.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithms/algo.h"
#include "algorithms/patterns/hier.h"
#include "core/comm.h"
#include "harness.h"
#include "tune/tune.h"

#define MAX_RANKS     8
#define BIG_COUNT     65537u
#define HUGE_COUNT    ((1u << 20) + 3) /* allreduce only: several MiB through CMA and TCP */
#define JOB_TIMEOUT_S 120.0

struct layout {
	const char *name;
	int nranks;
	int host[MAX_RANKS]; /* host label of each rank */
	bool by_rank;	     /* WEFT_PLACEMENT=rank */
	bool topo_file;	     /* two leaves from a topology file */
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

static int set_host(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	const struct layout *l = arg;
	char host[32];
	snprintf(host, sizeof(host), "h%d", l->host[rank]);
	if (setenv("WEFT_HOSTID", host, 1) != 0)
		return harness_fail("setenv WEFT_HOSTID failed");
	return 0;
}

/* ---- buffers with guards ---- */

static unsigned char *guarded_alloc(size_t bytes)
{
	unsigned char *p = malloc(bytes + 2 * HARNESS_GUARD_BYTES);
	return p ? p + HARNESS_GUARD_BYTES : NULL;
}

static void guarded_free(unsigned char *p)
{
	if (p)
		free(p - HARNESS_GUARD_BYTES);
}

static void guards_fill(unsigned char *data, size_t bytes)
{
	harness_guard_fill(data - HARNESS_GUARD_BYTES, HARNESS_GUARD_BYTES);
	harness_guard_fill(data + bytes, HARNESS_GUARD_BYTES);
}

static bool guards_ok(const unsigned char *data, size_t bytes)
{
	return harness_guard_check(data - HARNESS_GUARD_BYTES, HARNESS_GUARD_BYTES) < 0 &&
	       harness_guard_check(data + bytes, HARNESS_GUARD_BYTES) < 0;
}

struct bufs {
	unsigned char *send, *recv, *want, *orig;
};

static bool bufs_alloc(struct bufs *b, size_t cap)
{
	b->send = guarded_alloc(cap);
	b->recv = guarded_alloc(cap);
	b->want = malloc(cap);
	b->orig = malloc(cap);
	return b->send && b->recv && b->want && b->orig;
}

static void bufs_free(struct bufs *b)
{
	guarded_free(b->send);
	guarded_free(b->recv);
	free(b->want);
	free(b->orig);
}

/* ---- cases ---- */

struct ar_sample {
	weft_datatype_t dtype;
	weft_op_t op;
};

static const struct ar_sample ar_samples[] = {
    {WEFT_FLOAT32, WEFT_SUM},  {WEFT_INT32, WEFT_MAX},	 {WEFT_FLOAT16, WEFT_SUM},
    {WEFT_BFLOAT16, WEFT_AVG}, {WEFT_FLOAT64, WEFT_AVG}, {WEFT_INT64, WEFT_AVG},
    {WEFT_INT8, WEFT_PROD},    {WEFT_UINT64, WEFT_MIN},	 {WEFT_UINT8, WEFT_SUM},
};

static const weft_datatype_t ag_samples[] = {WEFT_UINT8, WEFT_FLOAT16, WEFT_INT32, WEFT_FLOAT64};

static int ar_case(weft_comm_t comm, int rank, int nranks, struct bufs *b, size_t count,
		   const struct ar_sample *s, bool in_place, unsigned salt)
{
	char name[160];
	snprintf(name, sizeof(name), "allreduce %s %s count %zu %s", harness_dtype_name(s->dtype),
		 harness_op_name(s->op), count, in_place ? "in place" : "out of place");
	harness_progress("%s", name);
	size_t bytes = count * harness_dtype_size(s->dtype);
	unsigned char *input = in_place ? b->recv : b->send;
	guards_fill(b->send, bytes);
	guards_fill(b->recv, bytes);
	harness_ar_input(input, count, s->dtype, s->op, rank, nranks, salt);
	if (!in_place) {
		memset(b->recv, 0xcd, bytes);
		memcpy(b->orig, b->send, bytes);
	}
	weft_status_t st = weft_allreduce(in_place ? WEFT_IN_PLACE : b->send, b->recv, count,
					  s->dtype, s->op, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "%s", name) + 1;
	char why[256];
	harness_ar_expected(b->want, count, s->dtype, s->op, nranks, salt);
	if (harness_compare(b->recv, b->want, count, s->dtype, why, sizeof(why)) != SIZE_MAX)
		return harness_fail("%s: %s", name, why);
	if (!guards_ok(b->recv, bytes))
		return harness_fail("%s: recvbuf guard written", name);
	if (!in_place && (!guards_ok(b->send, bytes) || memcmp(b->send, b->orig, bytes) != 0))
		return harness_fail("%s: sendbuf modified", name);
	return 0;
}

enum ag_form { AG_OUT, AG_IN_PLACE, AG_SLICE, AG_FORMS };

static int ag_case(weft_comm_t comm, int rank, int nranks, struct bufs *b, size_t count,
		   weft_datatype_t dt, enum ag_form form, unsigned salt)
{
	static const char *const forms[AG_FORMS] = {"out of place", "WEFT_IN_PLACE",
						    "sendbuf in recvbuf"};
	char name[160];
	snprintf(name, sizeof(name), "allgather %s count %zu %s", harness_dtype_name(dt), count,
		 forms[form]);
	harness_progress("%s", name);
	size_t bytes = count * harness_dtype_size(dt), total = bytes * (size_t)nranks;
	unsigned char *mine = b->recv + (size_t)rank * bytes;
	guards_fill(b->send, bytes);
	guards_fill(b->recv, total);
	memset(b->recv, 0xcd, total);
	for (int r = 0; r < nranks; r++)
		harness_ag_input(b->want + (size_t)r * bytes, count, dt, r, salt);
	const void *sendarg;
	if (form == AG_OUT) {
		harness_ag_input(b->send, count, dt, rank, salt);
		memcpy(b->orig, b->send, bytes);
		sendarg = b->send;
	} else {
		harness_ag_input(mine, count, dt, rank, salt);
		sendarg = form == AG_IN_PLACE ? WEFT_IN_PLACE : mine;
	}
	weft_status_t st = weft_allgather(sendarg, b->recv, count, dt, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "%s", name) + 1;
	for (int r = 0; r < nranks; r++)
		if (memcmp(b->recv + (size_t)r * bytes, b->want + (size_t)r * bytes, bytes) != 0)
			return harness_fail("%s: block of rank %d is wrong", name, r);
	if (!guards_ok(b->recv, total))
		return harness_fail("%s: recvbuf guard written", name);
	if (form == AG_OUT && (!guards_ok(b->send, bytes) || memcmp(b->send, b->orig, bytes) != 0))
		return harness_fail("%s: sendbuf modified", name);
	return 0;
}

/* The layout as the library sees it, and what the tuner may make of it:
 * nothing to gain with one host or one rank per host. */
static int check_model(weft_comm_t comm, const struct layout *l)
{
	if (comm->graph.nhosts != l->nhosts)
		return harness_fail("%d hosts, expected %d", comm->graph.nhosts, l->nhosts);
	bool gain = l->nhosts > 1 && l->nhosts < l->nranks;
	const enum weft_coll_kind colls[] = {WEFT_COLL_ALLREDUCE, WEFT_COLL_ALLGATHER};
	for (int c = 0; c < 2; c++) {
		const struct weft_algo *a = weft_algo_find(colls[c], "hier");
		if (!a)
			return harness_fail("%s:hier is not in the table",
					    weft_coll_name(colls[c]));
		struct weft_coll_args args = {
		    .coll = colls[c], .count = 4096, .dtype = WEFT_FLOAT32, .esize = 4};
		if (a->supports(comm, &args) != gain)
			return harness_fail("%s:hier supports() is %d, expected %d",
					    weft_coll_name(colls[c]), !gain, gain);
		double t = a->estimate(comm, &comm->tuner->links, &args);
		if (!(t >= 0 && t < 1e3))
			return harness_fail("%s:hier estimate %g", weft_coll_name(colls[c]), t);
	}
	return 0;
}

static int body(weft_comm_t comm, int rank, int nranks, void *arg)
{
	if (check_model(comm, arg))
		return 1;
	struct bufs b;
	size_t cap = (size_t)BIG_COUNT * 8 * (size_t)nranks;
	if (cap < (size_t)HUGE_COUNT * 4)
		cap = (size_t)HUGE_COUNT * 4;
	if (!bufs_alloc(&b, cap)) {
		bufs_free(&b);
		return harness_fail("out of memory");
	}
	size_t counts[] = {1, 7, (size_t)nranks - 1, 4099, BIG_COUNT};
	unsigned salt = 0;
	int bad = 0;
	for (size_t c = 0; c < 5 && bad < 2; c++) {
		if (c == 2 && (counts[c] <= 1 || counts[c] == 7))
			continue;
		size_t ns = sizeof(ar_samples) / sizeof(ar_samples[0]);
		for (size_t s = 0; s < ns && bad < 2; s++) {
			if (counts[c] == BIG_COUNT && s % 3 != 0)
				continue; /* keep the large cases few */
			bad += ar_case(comm, rank, nranks, &b, counts[c], &ar_samples[s],
				       (c + s) % 2, ++salt) != 0;
		}
		for (size_t d = 0; d < sizeof(ag_samples) / sizeof(ag_samples[0]) && bad < 2; d++)
			bad += ag_case(comm, rank, nranks, &b, counts[c], ag_samples[d],
				       (enum ag_form)((c + d) % AG_FORMS), ++salt) != 0;
	}
	if (!bad)
		bad +=
		    ar_case(comm, rank, nranks, &b, HUGE_COUNT, &ar_samples[0], false, ++salt) != 0;
	if (!bad)
		bad +=
		    ar_case(comm, rank, nranks, &b, HUGE_COUNT, &ar_samples[3], true, ++salt) != 0;
	bufs_free(&b);
	return bad ? 1 : 0;
}

START_TEST(layouts_forced)
{
	const struct layout *l = &layouts[_i];
	char topo_env[128] = "WEFT_DEBUG=WARN";
	char path[] = "/tmp/weft_hier_topoXXXXXX";
	int fd = -1;
	if (l->topo_file) {
		/* h0, h2 under leaf1; h1, h3 under leaf2 */
		fd = mkstemp(path);
		ck_assert_int_ge(fd, 0);
		const char text[] = "SwitchName=leaf1 Nodes=h0,h2\nSwitchName=leaf2 Nodes=h1,h3\n"
				    "SwitchName=spine Switches=leaf[1-2]\n";
		ck_assert_int_eq(write(fd, text, sizeof(text) - 1), (int)sizeof(text) - 1);
		close(fd);
		snprintf(topo_env, sizeof(topo_env), "WEFT_TOPO_FILE=%s", path);
	}
	const char *const env[] = {"WEFT_TIMEOUT=60",
				   "WEFT_ALGO=allreduce:hier;allgather:hier",
				   "WEFT_SOCKET_IFNAME=lo",
				   l->by_rank ? "WEFT_PLACEMENT=rank" : "WEFT_PLACEMENT=topo",
				   topo_env,
				   NULL};
	struct harness_job job = {
	    .nranks = l->nranks,
	    .env = env,
	    .body = body,
	    .arg = (void *)l,
	    .timeout_s = JOB_TIMEOUT_S,
	    .before_init = set_host,
	};
	struct harness_result res;
	harness_run_job(&job, &res);
	if (fd >= 0)
		unlink(path);
	printf("hier %s (%d ranks): %.1f s\n", l->name, l->nranks, res.seconds);
	fflush(stdout);
	ck_assert_msg(res.ok, "hier, layout %s:\n%s", l->name, res.summary);
}
END_TEST

/* ---- layout arithmetic on synthetic graphs ---- */

static unsigned lcg(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return (*s >> 16) & 0x7fff;
}

struct fake {
	struct weft_comm comm;
	int host_of[64], host_leader[64], ring[64];
	struct weft_hier_layout lay[64];
};

/* Hosts by first rank, leader = lowest rank; ring: rank order or grouped by host. */
static void fake_build(struct fake *f, int n, int nlabels, bool grouped, unsigned *seed)
{
	memset(f, 0, sizeof(*f));
	int label_host[64], nh = 0;
	for (int i = 0; i < 64; i++)
		label_host[i] = -1;
	for (int r = 0; r < n; r++) {
		int label = (int)(lcg(seed) % (unsigned)nlabels);
		if (label_host[label] < 0) {
			label_host[label] = nh;
			f->host_leader[nh++] = r;
		}
		f->host_of[r] = label_host[label];
	}
	/* Grouped: hosts in reverse order, each host's ranks in reverse (so the
	 * leader is last in ring order); else rank order rotated by n / 2. */
	int p = 0;
	for (int h = nh - 1; grouped && h >= 0; h--)
		for (int r = n - 1; r >= 0; r--)
			if (f->host_of[r] == h)
				f->ring[p++] = r;
	for (int i = 0; !grouped && i < n; i++)
		f->ring[p++] = (i + n / 2) % n;
	f->comm.nranks = n;
	f->comm.ring = f->ring;
	f->comm.graph.nranks = n;
	f->comm.graph.nhosts = nh;
	f->comm.graph.host_of = f->host_of;
	f->comm.graph.host_leader = f->host_leader;
	for (int r = 0; r < n; r++) {
		f->comm.rank = r;
		weft_hier_layout(&f->comm, &f->lay[r]);
	}
}

static void fake_check(const struct fake *f)
{
	int n = f->comm.nranks, nh = f->comm.graph.nhosts;
	for (int r = 0; r < n; r++) {
		const struct weft_hier_layout *l = &f->lay[r];
		int m = 0;
		for (int x = 0; x < n; x++)
			m += f->host_of[x] == f->host_of[r];
		ck_assert_int_eq(l->host, f->host_of[r]);
		ck_assert_int_eq(l->local_n, m);
		ck_assert_int_eq(l->nleaders, nh);
		ck_assert_int_eq(l->chain_pos == 0, f->host_leader[l->host] == r);
		ck_assert_int_eq(l->chain_prev < 0, l->chain_pos == 0);
		ck_assert_int_eq(l->chain_next < 0, l->chain_pos == m - 1);
		if (l->chain_next >= 0) {
			ck_assert_int_eq(f->host_of[l->chain_next], l->host);
			ck_assert_int_eq(f->lay[l->chain_next].chain_prev, r);
			ck_assert_int_eq(f->lay[l->chain_next].chain_pos, l->chain_pos + 1);
		}
		/* Every rank of a host agrees on its host's ring position. */
		const struct weft_hier_layout *ll = &f->lay[f->host_leader[l->host]];
		ck_assert_int_eq(l->leader_pos, ll->leader_pos);
		ck_assert_int_eq(l->leader_next, ll->leader_next);
		ck_assert_int_eq(l->leader_prev, ll->leader_prev);
	}
	/* The leaders form one cycle through every host, positions in order. */
	int r = f->host_leader[0], seen = 0;
	do {
		const struct weft_hier_layout *l = &f->lay[r];
		ck_assert_int_eq(weft_hier_host_at(&f->comm, l->leader_pos), l->host);
		int next = l->leader_next;
		ck_assert_int_eq(f->host_leader[f->host_of[next]], next);
		ck_assert_int_eq(f->lay[next].leader_prev, r);
		ck_assert_int_eq(f->lay[next].leader_pos, (l->leader_pos + 1) % nh);
		r = next;
		seen++;
	} while (r != f->host_leader[0] && seen <= nh);
	ck_assert_int_eq(seen, nh);
}

START_TEST(layout_arithmetic)
{
	static struct fake f;
	unsigned seed = 7;
	for (int n = 1; n <= 64; n++)
		for (int labels = 1; labels <= n && labels <= 9; labels++)
			for (int grouped = 0; grouped < 2; grouped++) {
				fake_build(&f, n, labels, grouped, &seed);
				fake_check(&f);
			}
}
END_TEST

static Suite *hier_suite(void)
{
	Suite *s = suite_create("algos_hier");
	TCase *tc = tcase_create("layout");
	tcase_add_test(tc, layout_arithmetic);
	suite_add_tcase(s, tc);
	tc = tcase_create("forced");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, layouts_forced, 0, NLAYOUTS);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hier_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
