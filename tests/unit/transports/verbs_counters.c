/*
 * verbs_counters.c — the congestion signals of an RDMA port from its
 * sysfs counters (transports/verbs/verbs_counters.h), against sysfs trees
 * made here: the fixture tree with counters added to mlx5_0 port 1.
 *
 *  - the module: absent counters (the fixture as it is, a port with only
 *    the packet counter), values read, the optional ECN counter;
 *  - the transport's signal op over the test double: a rank on mlx5_0
 *    gets the port's deltas since its last query (packets sent, CNPs
 *    taken, never more CNPs than packets, nothing after a counter reset),
 *    a rank on mlx5_1 (no counters) gets none, only its lane's bytes.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "verbs_p2p.h"

static char tree[PATH_MAX];

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX + 200];
	snprintf(path, sizeof(path), "%s/%s", tree, rel);
	FILE *f = fopen(path, "w");
	ck_assert_msg(f, "%s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

static void sub(const char *rel)
{
	char path[PATH_MAX + 200];
	snprintf(path, sizeof(path), "%s/%s", tree, rel);
	ck_assert_msg(mkdir(path, 0755) == 0, "%s: %s", path, strerror(errno));
}

/* Link every entry of the fixture's directory @p rel into ours, except
 * @p but. */
static void link_all(const char *rel, const char *but)
{
	char from[PATH_MAX + 200], to[PATH_MAX * 2 + 300];
	snprintf(from, sizeof(from), "%s/%s", verbs_sysfs_path, rel);
	DIR *d = opendir(from);
	ck_assert_msg(d, "%s: %s", from, strerror(errno));
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.' || (but && strcmp(e->d_name, but) == 0))
			continue;
		char src[PATH_MAX * 2 + 300];
		snprintf(src, sizeof(src), "%s/%s", from, e->d_name);
		snprintf(to, sizeof(to), "%s/%s/%s", tree, rel, e->d_name);
		ck_assert_msg(symlink(src, to) == 0, "%s: %s", to, strerror(errno));
	}
	closedir(d);
}

/* The fixture, with mlx5_0 port 1 given counters/ and (when @p hw)
 * hw_counters/. */
static void make_tree(bool hw)
{
	verbs_find_paths();
	snprintf(tree, sizeof(tree), "/tmp/weft_ibctr_XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tree));
	sub("class");
	sub("class/infiniband");
	link_all("class/infiniband", "mlx5_0");
	sub("class/infiniband/mlx5_0");
	link_all("class/infiniband/mlx5_0", "ports");
	sub("class/infiniband/mlx5_0/ports");
	link_all("class/infiniband/mlx5_0/ports", "1");
	sub("class/infiniband/mlx5_0/ports/1");
	link_all("class/infiniband/mlx5_0/ports/1", NULL);
	sub("class/infiniband/mlx5_0/ports/1/counters");
	put("class/infiniband/mlx5_0/ports/1/counters/port_xmit_packets", "1000\n");
	if (!hw)
		return;
	sub("class/infiniband/mlx5_0/ports/1/hw_counters");
	put("class/infiniband/mlx5_0/ports/1/hw_counters/rp_cnp_handled", "7\n");
}

static void remove_tree(void)
{
	char cmd[PATH_MAX + 20];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tree);
	ck_assert_int_eq(system(cmd), 0);
}

#define CTR "class/infiniband/mlx5_0/ports/1/"

START_TEST(absent)
{
	verbs_find_paths();
	struct weft_verbs_counters c;
	struct weft_verbs_sample s;
	weft_verbs_counters_open(&c, verbs_sysfs_path, "mlx5_0", 1);
	ck_assert(!c.present);
	ck_assert(!weft_verbs_counters_read(&c, &s));
	weft_verbs_counters_open(&c, "/nonexistent", "mlx5_0", 1);
	ck_assert(!c.present);
	make_tree(false); /* packets, but no CNP counter: no signal */
	weft_verbs_counters_open(&c, tree, "mlx5_0", 1);
	ck_assert(!c.present);
	remove_tree();
}
END_TEST

START_TEST(values)
{
	make_tree(true);
	struct weft_verbs_counters c;
	struct weft_verbs_sample s;
	weft_verbs_counters_open(&c, tree, "mlx5_0", 1);
	ck_assert(c.present);
	ck_assert_str_eq(c.ecn, "");
	ck_assert(weft_verbs_counters_read(&c, &s));
	ck_assert_uint_eq(s.tx_packets, 1000);
	ck_assert_uint_eq(s.cnp_handled, 7);
	ck_assert_uint_eq(s.ecn_marked, 0);
	put(CTR "hw_counters/np_ecn_marked_roce_packets", "5\n");
	put(CTR "counters/port_xmit_packets", "18446744073709551000\n");
	weft_verbs_counters_open(&c, tree, "mlx5_0", 1);
	ck_assert_str_ne(c.ecn, "");
	ck_assert(weft_verbs_counters_read(&c, &s));
	ck_assert_uint_eq(s.tx_packets, 18446744073709551000ull);
	ck_assert_uint_eq(s.ecn_marked, 5);
	put(CTR "hw_counters/rp_cnp_handled", "garbage\n");
	ck_assert(!weft_verbs_counters_read(&c, &s));
	remove_tree();
}
END_TEST

static int want_signal(struct weft_conn *conn, uint32_t delivered, uint32_t ce, const char *when)
{
	struct weft_tp_signal sig[4];
	int n = conn->ops->signal.signals(conn, sig, 4);
	if (n != 1)
		return harness_fail("%s: %d signals, expected 1", when, n);
	if (sig[0].delivered != delivered || sig[0].delivered_ce != ce)
		return harness_fail("%s: delivered %u, CE %u; expected %u, %u", when,
				    sig[0].delivered, sig[0].delivered_ce, delivered, ce);
	return 0;
}

static int body_signals(weft_comm_t comm, int rank, int nranks, void *arg)
{
	if (sync_peers(comm))
		return 1;
	struct verbs_conn *c = conn_to(comm, 1 - rank);
	struct weft_conn *conn = &c->base;
	struct weft_tp_signal sig[1] = {0};
	if (strcmp(c->tp->port.dev, "mlx5_0") != 0) {
		/* No congestion signal; the lane's bytes (the sync's slot) all the same. */
		int n = conn->ops->signal.signals(conn, sig, 1);
		if (n != 1 || sig[0].delivered || sig[0].delivered_ce || !sig[0].bytes_acked)
			return harness_fail("%d signals from a port without counters: delivered "
					    "%u, CE %u, %llu bytes",
					    n, sig[0].delivered, sig[0].delivered_ce,
					    (unsigned long long)sig[0].bytes_acked);
		return 0;
	}
	if (conn->ops->signal.signals(conn, sig, 0) != 0)
		return harness_fail("signals ignored max 0");
	if (want_signal(conn, 0, 0, "unchanged"))
		return 1;
	put(CTR "counters/port_xmit_packets", "3000\n");
	put(CTR "hw_counters/rp_cnp_handled", "37\n");
	if (want_signal(conn, 2000, 30, "after 2000 packets and 30 CNPs") ||
	    want_signal(conn, 0, 0, "again"))
		return 1;
	put(CTR "counters/port_xmit_packets", "3010\n");
	put(CTR "hw_counters/rp_cnp_handled", "100\n");
	if (want_signal(conn, 10, 10, "more CNPs than packets"))
		return 1;
	put(CTR "counters/port_xmit_packets", "5\n");
	return want_signal(conn, 0, 0, "after a reset");
}

START_TEST(transport_signals)
{
	make_tree(true);
	char sysfs[PATH_MAX + 20];
	snprintf(sysfs, sizeof(sysfs), "WEFT_IB_SYSFS=%s", tree);
	const char *const more[] = {sysfs, NULL};
	struct harness_result res;
	harness_run(2, env_with(more), body_signals, NULL, JOB_TIMEOUT_S, &res);
	/* The rank on mlx5_0 moved the counters: it did run its checks. */
	char path[PATH_MAX + 100];
	snprintf(path, sizeof(path), "%s/" CTR "counters/port_xmit_packets", tree);
	FILE *f = fopen(path, "r");
	unsigned long v = 0;
	ck_assert(f && fscanf(f, "%lu", &v) == 1);
	fclose(f);
	remove_tree();
	ck_assert_msg(res.ok, "%s", res.summary);
	ck_assert_uint_eq(v, 5);
}
END_TEST

static Suite *counters_suite(void)
{
	Suite *s = suite_create("verbs_counters");
	TCase *tc = tcase_create("counters");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, absent);
	tcase_add_test(tc, values);
	tcase_add_test(tc, transport_signals);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(counters_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
