/*
 * verbs_select.c — the verbs transport's pure parts, without RDMA
 * hardware: WEFT_IB_HCA parsing and matching, the port a rank picks (NIC
 * locality, spreading, filters, DOWN ports, InfiniBand without a LID), and
 * the RoCE GID index chosen from the fake sysfs tree under
 * tests/fixtures/sysfs (RoCE v2 over v1, the IPv4-mapped address of the
 * interface in use, VLAN interfaces, empty entries, WEFT_IB_GID_INDEX);
 * then the dlopen table: a library that is absent, one that lacks the
 * entry points, the real libibverbs (present here, with no device), and
 * the test double; and that libweft.so neither needs nor references
 * libibverbs.
 *
 * The fixture has mlx5_0 (RoCE, fakeeth0 and its VLAN fakeeth0.100),
 * mlx5_1 (RoCE, fakeeth1, an IPv6 global GID before the IPv4 one), mlx5_2
 * (InfiniBand, LID 0x12, ib0), mlx5_3 (port DOWN) and mlx4_0 (port 1 DOWN,
 * port 2 ACTIVE on fakeeth5).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transports/verbs/verbs_lib.h"
#include "transports/verbs/verbs_select.h"
#include "verbs_env.h"

static char why[512];

/* ---- WEFT_IB_HCA ---- */

START_TEST(hca_parse_lists)
{
	struct weft_verbs_hca_filter f;
	ck_assert_int_eq(weft_verbs_hca_parse(NULL, &f, why, sizeof(why)), WEFT_SUCCESS);
	ck_assert_int_eq(f.n, 0);
	ck_assert(weft_verbs_hca_match(&f, "anything", 3));

	ck_assert_int_eq(weft_verbs_hca_parse("mlx5_0:1,mlx5_1", &f, why, sizeof(why)),
			 WEFT_SUCCESS);
	ck_assert_int_eq(f.n, 2);
	ck_assert(!f.exclude && !f.exact);
	ck_assert_str_eq(f.e[0].name, "mlx5_0");
	ck_assert_int_eq(f.e[0].port, 1);
	ck_assert_int_eq(f.e[1].port, 0);
	ck_assert(weft_verbs_hca_match(&f, "mlx5_0", 1));
	ck_assert(!weft_verbs_hca_match(&f, "mlx5_0", 2));
	ck_assert(weft_verbs_hca_match(&f, "mlx5_1", 2));
	ck_assert(!weft_verbs_hca_match(&f, "mlx5_2", 1));
	/* Prefixes: "mlx5_1" also names mlx5_10. */
	ck_assert(weft_verbs_hca_match(&f, "mlx5_10", 1));

	ck_assert_int_eq(weft_verbs_hca_parse("^mlx5_2", &f, why, sizeof(why)), WEFT_SUCCESS);
	ck_assert(f.exclude);
	ck_assert(!weft_verbs_hca_match(&f, "mlx5_2", 1));
	ck_assert(weft_verbs_hca_match(&f, "mlx5_0", 1));

	ck_assert_int_eq(weft_verbs_hca_parse("=mlx5_1", &f, why, sizeof(why)), WEFT_SUCCESS);
	ck_assert(f.exact && !f.exclude);
	ck_assert(weft_verbs_hca_match(&f, "mlx5_1", 1));
	ck_assert(!weft_verbs_hca_match(&f, "mlx5_10", 1));

	ck_assert_int_eq(weft_verbs_hca_parse("^=mlx5_1:2", &f, why, sizeof(why)), WEFT_SUCCESS);
	ck_assert(f.exact && f.exclude);
	ck_assert(weft_verbs_hca_match(&f, "mlx5_1", 1));
	ck_assert(!weft_verbs_hca_match(&f, "mlx5_1", 2));
	ck_assert(weft_verbs_hca_match(&f, "mlx5_10", 2));

	/* Empty items are skipped, as in every Weft list. */
	ck_assert_int_eq(weft_verbs_hca_parse(",mlx5_0,,mlx5_1:2,", &f, why, sizeof(why)),
			 WEFT_SUCCESS);
	ck_assert_int_eq(f.n, 2);
	ck_assert_int_eq(f.e[1].port, 2);

	ck_assert_int_eq(weft_verbs_hca_parse("mlx5", &f, why, sizeof(why)), WEFT_SUCCESS);
	ck_assert(weft_verbs_hca_match(&f, "mlx5_3", 1));
	ck_assert(!weft_verbs_hca_match(&f, "mlx4_0", 1));
}
END_TEST

START_TEST(hca_parse_errors)
{
	static const char *const bad[] = {
	    ",",	"^",	     "^=",	   "mlx5_0:",	     "mlx5_0:x", ":1",
	    "mlx5_0:0", "mlx5_0:1x", "mlx5_0:256", "mlx5_0,^mlx5_1", "a,=b"};
	struct weft_verbs_hca_filter f;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		ck_assert_msg(weft_verbs_hca_parse(bad[i], &f, why, sizeof(why)) ==
				  WEFT_ERR_INVALID_ARG,
			      "'%s' was accepted", bad[i]);
		ck_assert_msg(strstr(why, "WEFT_IB_HCA="), "'%s': %s", bad[i], why);
	}
	char many[1024] = "";
	for (int i = 0; i <= WEFT_VERBS_HCA_MAX; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%sd%d", i ? "," : "",
			 i);
	ck_assert_int_eq(weft_verbs_hca_parse(many, &f, why, sizeof(why)), WEFT_ERR_INVALID_ARG);
	char longname[200];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ck_assert_int_eq(weft_verbs_hca_parse(longname, &f, why, sizeof(why)),
			 WEFT_ERR_INVALID_ARG);
}
END_TEST

/* ---- ports from the fixture ---- */

static int cmp_port(const void *a, const void *b)
{
	const struct weft_verbs_port *x = a, *y = b;
	int c = strcmp(x->dev, y->dev);
	return c ? c : x->port - y->port;
}

/* Every port of the fixture, sorted by device and port. */
static int fixture_ports(struct weft_verbs_port *ports, int max)
{
	verbs_find_paths();
	char dir[PATH_MAX + 32];
	snprintf(dir, sizeof(dir), "%s/class/infiniband", verbs_sysfs_path);
	DIR *d = opendir(dir);
	ck_assert_msg(d, "no fixture at %s", dir);
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)))
		for (int p = 1; e->d_name[0] != '.' && p <= 4 && n < max; p++)
			if (weft_verbs_sysfs_port(verbs_sysfs_path, e->d_name, p, true, &ports[n]))
				n++;
	closedir(d);
	qsort(ports, (size_t)n, sizeof(ports[0]), cmp_port);
	return n;
}

START_TEST(sysfs_ports)
{
	struct weft_verbs_port ports[16];
	int n = fixture_ports(ports, 16);
	ck_assert_int_eq(n, 6);
	/* mlx4_0:1 mlx4_0:2 mlx5_0:1 mlx5_1:1 mlx5_2:1 mlx5_3:1 */
	ck_assert_str_eq(ports[0].dev, "mlx4_0");
	ck_assert(!ports[0].active);
	ck_assert(ports[1].active && ports[1].port == 2);
	ck_assert_str_eq(ports[1].netdevs[0], "fakeeth5");
	const struct weft_verbs_port *m0 = &ports[2], *ib = &ports[4];
	ck_assert_str_eq(m0->dev, "mlx5_0");
	ck_assert(m0->active && m0->link == WEFT_VERBS_LINK_ETH);
	ck_assert_int_eq(m0->nnetdevs, 2);
	ck_assert_str_eq(m0->netdevs[0], "fakeeth0");
	ck_assert_str_eq(m0->netdevs[1], "fakeeth0.100");
	ck_assert_int_eq(m0->numa, 0);
	ck_assert_int_eq(ports[3].numa, 1);
	ck_assert(ib->link == WEFT_VERBS_LINK_IB);
	ck_assert_int_eq(ib->lid, 0x12);
	ck_assert_int_eq(ib->nnetdevs, 1);
	ck_assert_str_eq(ib->netdevs[0], "ib0"); /* no GID ndevs: the device's net/ */
	ck_assert(!ports[5].active);
	struct weft_verbs_port none;
	ck_assert(!weft_verbs_sysfs_port(verbs_sysfs_path, "mlx5_0", 2, true, &none));
	ck_assert(!weft_verbs_sysfs_port(verbs_sysfs_path, "nosuch", 1, true, &none));
}
END_TEST

static int pick(const char *spec, const char *nic, int local_rank)
{
	struct weft_verbs_port ports[16];
	int n = fixture_ports(ports, 16);
	struct weft_verbs_hca_filter f;
	ck_assert_int_eq(weft_verbs_hca_parse(spec, &f, why, sizeof(why)), WEFT_SUCCESS);
	why[0] = '\0';
	int i = weft_verbs_pick_port(ports, n, &f, nic, local_rank, why, sizeof(why));
	if (i < 0)
		return -1;
	/* An index into the sorted list is hard to read in a failure: encode
	 * the choice as device number * 10 + port, mlx4_0 as 40 + port. */
	int dev = strncmp(ports[i].dev, "mlx4", 4) == 0 ? 4 : atoi(ports[i].dev + 5);
	return (strncmp(ports[i].dev, "mlx4", 4) == 0 ? 40 : dev * 10) + ports[i].port;
}

START_TEST(port_choice)
{
	/* The NIC nearest the rank decides, whatever the local rank. */
	ck_assert_int_eq(pick(NULL, "fakeeth1", 0), 11);
	ck_assert_int_eq(pick(NULL, "fakeeth1", 3), 11);
	ck_assert_int_eq(pick(NULL, "fakeeth0.100", 1), 1);
	ck_assert_int_eq(pick(NULL, "ib0", 2), 21);
	/* No NIC known: local ranks spread over the active ports in order
	 * (mlx4_0:2, mlx5_0:1, mlx5_1:1, mlx5_2:1). */
	ck_assert_int_eq(pick(NULL, "", 0), 42);
	ck_assert_int_eq(pick(NULL, NULL, 1), 1);
	ck_assert_int_eq(pick(NULL, "eth9", 2), 11);
	ck_assert_int_eq(pick(NULL, "", 3), 21);
	ck_assert_int_eq(pick(NULL, "", 4), 42);
	/* WEFT_IB_HCA first: the NIC counts only among the ports it admits. */
	ck_assert_int_eq(pick("mlx5_0:1,mlx5_1", "", 1), 11);
	ck_assert_int_eq(pick("mlx5_0:1,mlx5_1", "fakeeth5", 0), 1);
	ck_assert_int_eq(pick("^mlx5_2", "ib0", 3), 42);
	ck_assert_int_eq(pick("mlx4_0:2", "", 0), 42);
	ck_assert_int_eq(pick("=mlx5_1", "", 5), 11);
}
END_TEST

START_TEST(port_none)
{
	ck_assert_int_eq(pick("mlx4_0:1", "", 0), -1);
	ck_assert_msg(strstr(why, "mlx4_0:1 not ACTIVE"), "%s", why);
	ck_assert_msg(strstr(why, "mlx5_0:1 not in WEFT_IB_HCA"), "%s", why);
	ck_assert_int_eq(pick("mlx5_3", "fakeeth3", 0), -1);
	ck_assert_msg(strstr(why, "mlx5_3:1 not ACTIVE"), "%s", why);
	ck_assert_int_eq(pick("=mlx5", "", 0), -1);

	/* An InfiniBand port without a LID has no subnet manager behind it. */
	struct weft_verbs_port p = {
	    .dev = "mlx5_9", .port = 1, .active = true, .link = WEFT_VERBS_LINK_IB};
	struct weft_verbs_hca_filter all = {0};
	ck_assert_int_eq(weft_verbs_pick_port(&p, 1, &all, "", 0, why, sizeof(why)), -1);
	ck_assert_msg(strstr(why, "no LID"), "%s", why);
	p.lid = 7;
	ck_assert_int_eq(weft_verbs_pick_port(&p, 1, &all, "", 0, why, sizeof(why)), 0);
	ck_assert_int_eq(weft_verbs_pick_port(&p, 0, &all, "", 0, why, sizeof(why)), -1);
}
END_TEST

/* ---- GIDs ---- */

static int gid(const char *dev, int port, const char *netdev, const char *ip, long forced,
	       weft_status_t want_st)
{
	struct in_addr a;
	if (ip)
		ck_assert_int_eq(inet_pton(AF_INET, ip, &a), 1);
	struct weft_verbs_gid g;
	why[0] = '\0';
	weft_status_t st =
	    weft_verbs_pick_gid(verbs_sysfs_path, dev, port, strcmp(dev, "mlx5_2") == 0, netdev,
				ip ? &a : NULL, forced, &g, why, sizeof(why));
	ck_assert_msg(st == want_st, "%s:%d: status %d: %s", dev, port, st, why);
	return st == WEFT_SUCCESS ? g.index : -1;
}

START_TEST(gid_choice)
{
	verbs_find_paths();
	/* RoCE v2 with the interface's IPv4-mapped address. */
	ck_assert_int_eq(gid("mlx5_0", 1, "fakeeth0", "192.168.10.1", -1, WEFT_SUCCESS), 3);
	/* The interface in use is the VLAN: its own GIDs. */
	ck_assert_int_eq(gid("mlx5_0", 1, "fakeeth0.100", "10.20.0.1", -1, WEFT_SUCCESS), 5);
	ck_assert_int_eq(gid("mlx5_0", 1, "fakeeth0.100", NULL, -1, WEFT_SUCCESS), 5);
	/* Nothing known of the interface: v2, IPv4-mapped, lowest index. */
	ck_assert_int_eq(gid("mlx5_0", 1, NULL, NULL, -1, WEFT_SUCCESS), 3);
	ck_assert_int_eq(gid("mlx5_0", 1, "eth0", "10.0.0.5", -1, WEFT_SUCCESS), 3);
	/* The address alone finds the VLAN's entry. */
	ck_assert_int_eq(gid("mlx5_0", 1, NULL, "10.20.0.1", -1, WEFT_SUCCESS), 5);
	/* IPv4-mapped v2 over an earlier IPv6 global v2. */
	ck_assert_int_eq(gid("mlx5_1", 1, "fakeeth1", NULL, -1, WEFT_SUCCESS), 4);
	/* Only link-local GIDs: the v2 one. */
	ck_assert_int_eq(gid("mlx5_3", 1, "fakeeth3", NULL, -1, WEFT_SUCCESS), 1);
	/* InfiniBand: index 0. */
	ck_assert_int_eq(gid("mlx5_2", 1, "ib0", NULL, -1, WEFT_SUCCESS), 0);
	/* WEFT_IB_GID_INDEX. */
	ck_assert_int_eq(gid("mlx5_0", 1, "fakeeth0", NULL, 2, WEFT_SUCCESS), 2);
	ck_assert_int_eq(gid("mlx5_0", 1, "fakeeth0", NULL, 6, WEFT_ERR_INVALID_ARG), -1);
	ck_assert_msg(strstr(why, "WEFT_IB_GID_INDEX=6") && strstr(why, "mlx5_0:1"), "%s", why);
	ck_assert_int_eq(gid("mlx5_0", 1, "fakeeth0", NULL, 40, WEFT_ERR_INVALID_ARG), -1);
	/* A port with no table at all. */
	ck_assert_int_eq(gid("mlx5_0", 2, NULL, NULL, -1, WEFT_ERR_NOT_SUPPORTED), -1);
	ck_assert_msg(strstr(why, "no usable GID"), "%s", why);
}
END_TEST

START_TEST(gid_text)
{
	uint8_t g[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 10, 1};
	char buf[48];
	ck_assert_str_eq(weft_verbs_gid_str(g, buf, sizeof(buf)), "::ffff:192.168.10.1");
	uint8_t ll[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 2, 0xc9, 0xff, 0xfe, 0, 0x0a, 1};
	ck_assert_str_eq(weft_verbs_gid_str(ll, buf, sizeof(buf)),
			 "fe80:0000:0000:0000:0202:c9ff:fe00:0a01");
	ck_assert_str_eq(weft_verbs_gid_type_name(WEFT_VERBS_GID_V2, false), "RoCE v2");
	ck_assert_str_eq(weft_verbs_gid_type_name(WEFT_VERBS_GID_V1, false), "RoCE v1");
	ck_assert_str_eq(weft_verbs_gid_type_name(WEFT_VERBS_GID_V1, true), "IB");
}
END_TEST

/* ---- the dlopen table ---- */

START_TEST(lib_absent)
{
	const struct weft_ibv *t =
	    weft_verbs_lib_load("/nonexistent/libibverbs.so.1", why, sizeof(why));
	ck_assert_ptr_null(t);
	ck_assert_msg(strstr(why, "dlopen(/nonexistent/libibverbs.so.1)"), "%s", why);
	/* A library that loads but is not libibverbs. */
	t = weft_verbs_lib_load("libm.so.6", why, sizeof(why));
	ck_assert_ptr_null(t);
	ck_assert_msg(strstr(why, "libm.so.6 has no ibv_get_device_list"), "%s", why);
}
END_TEST

/* rdma-core is installed here (libfabric1 pulls it in) but there is no
 * RDMA device: the real library loads, fills the table, and lists none. */
START_TEST(lib_real)
{
	const struct weft_ibv *t = weft_verbs_lib_load(NULL, why, sizeof(why));
	if (!t) {
		fprintf(stderr, "libibverbs.so.1 not installed here (%s): skipped\n", why);
		return;
	}
	ck_assert_str_eq(t->name, WEFT_IBVERBS_DEFAULT);
	ck_assert(!t->fake);
	ck_assert_ptr_eq(weft_verbs_lib_load(WEFT_IBVERBS_DEFAULT, why, sizeof(why)), t);
	int n = -1;
	struct ibv_device **list = t->get_device_list(&n);
	if (list) {
		fprintf(stderr, "the real libibverbs lists %d device(s) here\n", n);
		t->free_device_list(list);
	}
}
END_TEST

START_TEST(lib_fake)
{
	verbs_find_paths();
	const struct weft_ibv *t = weft_verbs_lib_load(verbs_fake_path, why, sizeof(why));
	ck_assert_msg(t, "%s", why);
	ck_assert(t->fake);
	setenv("FAKE_IBVERBS_SYSFS", verbs_sysfs_path, 1);
	int n = 0;
	struct ibv_device **list = t->get_device_list(&n);
	ck_assert_ptr_nonnull(list);
	ck_assert_int_eq(n, 5);
	t->free_device_list(list);
}
END_TEST

/* libweft.so must not need libibverbs, nor reference any ibv_ symbol
 * (the fast path goes through verbs.h's inline wrappers; the rest
 * through the table). */
START_TEST(lib_not_linked)
{
	verbs_find_paths();
	char so[PATH_MAX + 64], cmd[2 * PATH_MAX];
	ck_assert_msg(verbs_find_up(verbs_exe_dir, "libweft.so", so, sizeof(so)),
		      "no libweft.so in %s or above", verbs_exe_dir);
	snprintf(cmd, sizeof(cmd), "nm -D --undefined-only %s 2>&1 | grep -c ' ibv_'", so);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	int count = -1;
	ck_assert_int_eq(fscanf(p, "%d", &count), 1);
	pclose(p);
	ck_assert_msg(count == 0, "%s references %d ibv_ symbols", so, count);
	snprintf(cmd, sizeof(cmd), "readelf -d %s 2>&1 | grep -c 'NEEDED.*ibverbs'", so);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(fscanf(p, "%d", &count), 1);
	pclose(p);
	ck_assert_msg(count == 0, "%s needs libibverbs", so);
}
END_TEST

static Suite *verbs_select_suite(void)
{
	Suite *s = suite_create("verbs_select");
	TCase *tc = tcase_create("select");
	tcase_add_test(tc, hca_parse_lists);
	tcase_add_test(tc, hca_parse_errors);
	tcase_add_test(tc, sysfs_ports);
	tcase_add_test(tc, port_choice);
	tcase_add_test(tc, port_none);
	tcase_add_test(tc, gid_choice);
	tcase_add_test(tc, gid_text);
	suite_add_tcase(s, tc);
	TCase *tl = tcase_create("lib");
	tcase_add_test(tl, lib_absent);
	tcase_add_test(tl, lib_real);
	tcase_add_test(tl, lib_fake);
	tcase_add_test(tl, lib_not_linked);
	suite_add_tcase(s, tl);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(verbs_select_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
