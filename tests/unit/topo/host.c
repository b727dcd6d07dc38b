/*
 * host.c — what a rank learns about its own host: hwloc facts
 * (counts, NUMA node of the process and of each NIC), the NIC it picks, the
 * CPUs WEFT_BIND would bind it to, and the leaf switch lldpd reports.
 *
 * hwloc cases run against tests/fixtures/hwloc/two-numa-two-nics.xml, not
 * this machine: 2 packages with one NUMA node each (P#0: PUs 0-7, P#1: PUs
 * 8-15; 4 cores x 2 PUs per package), NIC eth0 below package 0's PCI bridge,
 * eth1 below package 1's, and eth2 on a host bridge attached to the whole
 * machine (locality unknown). Synthetic topologies, exported to XML, cover
 * the one-NUMA-node case. A few smoke tests touch this machine with checks
 * that hold anywhere.
 *
 * LLDP: a missing socket, a socket nobody listens on and a daemon that
 * accepts but never answers all return at once (or within the query's
 * 2-second bound) with the card unchanged. The real check builds two network
 * namespaces joined by a veth pair (10.231.0.1/30 and .2, inside the
 * namespaces only), runs a throwaway lldpd in each with its own control
 * socket, and asks, from inside namespace A, for the leaf above A's veth:
 * the system name B's lldpd announces. It is skipped (with a message) unless
 * running as root with ip, lldpd and lldpcli; it tears down everything it made
 * (lldpd by the PIDs it started, then the namespaces) and bounds every wait.
 *
 * Run from the repository root (make test does).
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "topo/topo.h"
#include "topo/topo_hwloc.h"

extern char **environ;

#define FIXTURE "tests/fixtures/hwloc/two-numa-two-nics.xml"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *fixture(void)
{
	ck_assert_msg(access(FIXTURE, R_OK) == 0, "%s not found: run from the repository root",
		      FIXTURE);
	return FIXTURE;
}

static struct weft_topo_card fill(const char *nic, const char *xml, const char *cpus)
{
	struct weft_topo_card card;
	struct weft_err err = {0};
	memset(&card, 0x5a, sizeof(card));
	weft_status_t st = weft_topo_hwloc_fill_at(&card, nic, xml, cpus, &err);
	ck_assert_msg(st == WEFT_SUCCESS, "fill(%s, %s): %s", nic, cpus ? cpus : "-", err.msg);
	return card;
}

/* Export a synthetic topology (hwloc's description syntax) to an XML file. */
static void synthetic_xml(const char *desc, char *path, size_t len)
{
	hwloc_topology_t t;
	ck_assert_int_eq(hwloc_topology_init(&t), 0);
	ck_assert_int_eq(hwloc_topology_set_synthetic(t, desc), 0);
	ck_assert_int_eq(hwloc_topology_load(t), 0);
	snprintf(path, len, "/tmp/weft-test-topo-%d.xml", (int)getpid());
	ck_assert_int_eq(hwloc_topology_export_xml(t, path, 0), 0);
	hwloc_topology_destroy(t);
}

/* ---- hwloc facts from the fixture */

START_TEST(test_fixture_counts)
{
	struct weft_topo_card c = fill("eth0", fixture(), NULL);
	ck_assert_int_eq(c.packages, 2);
	ck_assert_int_eq(c.numa_nodes, 2);
	ck_assert_int_eq(c.cores, 8);
	ck_assert_str_eq(c.nic, "eth0");
	/* An XML topology without a CPU list: the process spans both nodes. */
	ck_assert_int_eq(c.numa, -1);
	ck_assert_int_eq(c.nic_numa, 0);
}
END_TEST

START_TEST(test_fixture_numa_of_cpus)
{
	static const struct {
		const char *cpus;
		int numa;
	} cases[] = {
	    {"0-7", 0},	 {"0", 0},     {"2-3", 0},   {"8-15", 1},   {"15", 1},
	    {"7-8", -1}, {"0-15", -1}, {"3,12", -1}, {"8-1000", 1},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct weft_topo_card c = fill("eth1", fixture(), cases[i].cpus);
		ck_assert_msg(c.numa == cases[i].numa, "cpus %s: numa %d, expected %d",
			      cases[i].cpus, c.numa, cases[i].numa);
		ck_assert_int_eq(c.nic_numa, 1);
	}
}
END_TEST

START_TEST(test_fixture_nic_numa)
{
	ck_assert_int_eq(fill("eth0", fixture(), "0").nic_numa, 0);
	ck_assert_int_eq(fill("eth1", fixture(), "0").nic_numa, 1);
	/* Attached to the whole machine: hwloc does not know its node. */
	ck_assert_int_eq(fill("eth2", fixture(), "0").nic_numa, -1);
	/* Virtual or absent interfaces have no PCI device: unknown, no error. */
	ck_assert_int_eq(fill("veth0", fixture(), "0").nic_numa, -1);
	ck_assert_int_eq(fill("lo", fixture(), "0").nic_numa, -1);
	struct weft_topo_card c = fill(NULL, fixture(), "0");
	ck_assert_str_eq(c.nic, "");
	ck_assert_int_eq(c.nic_numa, -1);
	ck_assert_int_eq(c.numa, 0);
}
END_TEST

START_TEST(test_fixture_bad_input)
{
	struct weft_topo_card card;
	struct weft_err err = {0};
	weft_status_t st = weft_topo_hwloc_fill_at(&card, "eth0", fixture(), "zero-three", &err);
	ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "zero-three"), "message: %s", err.msg);

	weft_err_clear(&err);
	st = weft_topo_hwloc_fill(&card, "eth0", "/nonexistent/topo.xml", &err);
	ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
	ck_assert_msg(strstr(err.msg, "/nonexistent/topo.xml"), "message: %s", err.msg);
}
END_TEST

START_TEST(test_synthetic_one_numa)
{
	char path[128];
	synthetic_xml("core:4 pu:2", path, sizeof(path));
	/* One NUMA node: every process is on it, bound or not. */
	struct weft_topo_card c = fill("eth0", path, NULL);
	ck_assert_int_eq(c.numa_nodes, 1);
	ck_assert_int_eq(c.cores, 4);
	ck_assert_int_eq(c.numa, 0);
	ck_assert_int_eq(c.nic_numa, -1); /* no such NIC in a synthetic topology */

	synthetic_xml("package:4 numa:1 core:2 pu:1", path, sizeof(path));
	c = fill(NULL, path, "2-3");
	ck_assert_int_eq(c.packages, 4);
	ck_assert_int_eq(c.numa_nodes, 4);
	ck_assert_int_eq(c.cores, 8);
	ck_assert_int_eq(c.numa, 1);
	c = fill(NULL, path, "1-2");
	ck_assert_int_eq(c.numa, -1);
	unlink(path);
}
END_TEST

/* ---- Choosing the NIC */

static const char *pick_in(const char *cpus, const struct weft_topo_iface *ifs, int n)
{
	static char nic[WEFT_TOPO_NAME_BYTES];
	struct weft_err err = {0};
	memset(nic, 'x', sizeof(nic));
	weft_status_t st = weft_topo_pick_nic_from(nic, sizeof(nic), fixture(), cpus, ifs, n, &err);
	ck_assert_msg(st == WEFT_SUCCESS, "pick: %s", err.msg);
	return nic;
}

/* The last-level cache is the deepest cache level, every instance summed;
 * a topology without caches says 0 (unknown), never a guess. */
START_TEST(test_synthetic_llc)
{
	char path[128];
	synthetic_xml("package:2 l3:2(size=8388608) l2:2(size=1048576) core:1 pu:1", path,
		      sizeof(path));
	struct weft_topo_card c = fill(NULL, path, NULL);
	ck_assert_int_eq(c.llc_bytes, 4 * 8388608LL);
	synthetic_xml("package:1 l2:4(size=2097152) core:1 pu:1", path, sizeof(path));
	c = fill(NULL, path, NULL);
	ck_assert_int_eq(c.llc_bytes, 4 * 2097152LL);
	synthetic_xml("core:4 pu:2", path, sizeof(path));
	c = fill(NULL, path, NULL);
	ck_assert_int_eq(c.llc_bytes, 0);
	unlink(path);
}
END_TEST

START_TEST(test_pick_nearest)
{
	struct weft_topo_iface ifs[] = {
	    {.name = "lo", .up = true, .loopback = true, .has_ipv4 = true, .has_addr = true},
	    {.name = "veth7", .up = true, .has_ipv4 = true, .has_addr = true},
	    {.name = "eth2", .up = true, .has_ipv4 = true, .has_addr = true},
	    {.name = "eth0", .up = true, .has_ipv4 = true, .has_addr = true},
	    {.name = "eth1", .up = true, .has_addr = true}, /* IPv6 only */
	};
	int n = (int)(sizeof(ifs) / sizeof(ifs[0]));
	ck_assert_str_eq(pick_in("0-7", ifs, n), "eth0");
	ck_assert_str_eq(pick_in("2", ifs, n), "eth0");
	ck_assert_str_eq(pick_in("8-15", ifs, n), "eth1");
	ck_assert_str_eq(pick_in("13", ifs, n), "eth1");
	/* Spanning both packages, no NIC is nearer: the first PCI one listed. */
	ck_assert_str_eq(pick_in("0-15", ifs, n), "eth2");
	ck_assert_str_eq(pick_in(NULL, ifs, n), "eth2");

	ifs[4].up = false; /* eth1 down: package 1 falls back to a machine-level NIC */
	ck_assert_str_eq(pick_in("8-15", ifs, n), "eth2");
	ifs[2].has_addr = ifs[2].has_ipv4 = false; /* eth2 has no address */
	ck_assert_str_eq(pick_in("8-15", ifs, n), "eth0");
}
END_TEST

START_TEST(test_pick_fallbacks)
{
	struct weft_topo_iface virt[] = {
	    {.name = "lo", .up = true, .loopback = true, .has_ipv4 = true, .has_addr = true},
	    {.name = "dummy0", .up = true, .has_addr = true}, /* IPv6 only */
	    {.name = "veth3", .up = false, .has_ipv4 = true, .has_addr = true},
	    {.name = "veth4", .up = true, .has_ipv4 = true, .has_addr = true},
	};
	/* No PCI NIC: the first up non-loopback interface with IPv4. */
	ck_assert_str_eq(pick_in("0", virt, 4), "veth4");
	/* Only loopback, down or address-less interfaces: nothing. */
	ck_assert_str_eq(pick_in("0", virt, 3), "");
	ck_assert_str_eq(pick_in("0", virt, 0), "");
	struct weft_topo_iface bare[] = {{.name = "eth0", .up = true}};
	ck_assert_str_eq(pick_in("0", bare, 1), "");
}
END_TEST

/* ---- WEFT_BIND */

static const char *target(const char *mode, const char *nic, int local_rank)
{
	static char cpus[256];
	struct weft_err err = {0};
	weft_status_t st =
	    weft_topo_bind_target(mode, nic, local_rank, fixture(), cpus, sizeof(cpus), &err);
	ck_assert_msg(st == WEFT_SUCCESS, "bind %s %s: %s", mode, nic, err.msg);
	return cpus;
}

START_TEST(test_bind_targets)
{
	ck_assert_str_eq(target("none", "eth1", 0), "");
	ck_assert_str_eq(target(NULL, "eth1", 0), "");
	ck_assert_str_eq(target("numa", "eth0", 3), "0-7");
	ck_assert_str_eq(target("numa", "eth1", 0), "8-15");
	ck_assert_str_eq(target("core", "eth1", 0), "8-9");
	ck_assert_str_eq(target("core", "eth1", 3), "14-15");
	ck_assert_str_eq(target("core", "eth1", 5), "10-11"); /* 5 mod 4 cores */
	ck_assert_str_eq(target("core", "eth0", 1), "2-3");
	/* Unknown NUMA node: no binding, not an error. */
	ck_assert_str_eq(target("numa", "eth2", 0), "");
	ck_assert_str_eq(target("core", "veth0", 0), "");
	ck_assert_str_eq(target("core", "", 0), "");

	char cpus[64];
	struct weft_err err = {0};
	weft_status_t st =
	    weft_topo_bind_target("socket", "eth0", 0, fixture(), cpus, sizeof(cpus), &err);
	ck_assert_int_eq(st, WEFT_ERR_INVALID_ARG);
	ck_assert_str_eq(err.msg, "WEFT_BIND=socket: expected none, numa or core");
}
END_TEST

/* ---- This machine: checks that hold on any host */

START_TEST(test_this_machine)
{
	struct weft_topo_card c = fill("lo", NULL, NULL);
	ck_assert_int_ge(c.cores, 1);
	ck_assert_int_ge(c.numa_nodes, 1);
	ck_assert_int_ge(c.numa, -1);
	ck_assert_int_lt(c.numa, 1 << 16);
	ck_assert_int_eq(c.nic_numa, -1); /* loopback has no PCI device */
	if (c.numa_nodes == 1)
		ck_assert_int_ge(c.numa, 0);

	struct weft_topo_iface *ifs;
	int n;
	struct weft_err err = {0};
	ck_assert_int_eq(weft_topo_list_ifaces(&ifs, &n, &err), WEFT_SUCCESS);
	bool lo = false;
	for (int i = 0; i < n; i++)
		lo |= strcmp(ifs[i].name, "lo") == 0 && ifs[i].loopback;
	ck_assert_msg(lo, "lo not listed as a loopback interface");

	char nic[WEFT_TOPO_NAME_BYTES];
	ck_assert_int_eq(weft_topo_pick_nic(nic, sizeof(nic), NULL, &err), WEFT_SUCCESS);
	bool listed = nic[0] == '\0';
	for (int i = 0; i < n; i++)
		listed |= strcmp(ifs[i].name, nic) == 0 && ifs[i].up && !ifs[i].loopback;
	ck_assert_msg(listed, "picked '%s', not an up non-loopback interface", nic);
	free(ifs);
}
END_TEST

START_TEST(test_bind_this_machine)
{
	cpu_set_t before, after;
	ck_assert_int_eq(sched_getaffinity(0, sizeof(before), &before), 0);
	struct weft_err err = {0};
	ck_assert_int_eq(weft_topo_bind("none", "lo", 0, &err), WEFT_SUCCESS);
	ck_assert_int_eq(weft_topo_bind("numa", "lo", 0, &err), WEFT_SUCCESS);
	ck_assert_int_eq(weft_topo_bind("bogus", "lo", 0, &err), WEFT_ERR_INVALID_ARG);
	ck_assert_int_eq(sched_getaffinity(0, sizeof(after), &after), 0);
	ck_assert_msg(CPU_EQUAL(&before, &after), "binding changed without a known NIC");

	/* A NIC hwloc places on a NUMA node, if this machine has one. */
	struct weft_topo_iface *ifs;
	int n;
	ck_assert_int_eq(weft_topo_list_ifaces(&ifs, &n, &err), WEFT_SUCCESS);
	for (int i = 0; i < n; i++) {
		if (fill(ifs[i].name, NULL, NULL).nic_numa < 0)
			continue;
		weft_err_clear(&err);
		weft_status_t st = weft_topo_bind("core", ifs[i].name, 1, &err);
		ck_assert_msg(st == WEFT_SUCCESS, "bind core near %s: %s", ifs[i].name, err.msg);
		ck_assert_int_eq(sched_getaffinity(0, sizeof(after), &after), 0);
		ck_assert_int_ge(CPU_COUNT(&after), 1);
		ck_assert_int_le(CPU_COUNT(&after), CPU_COUNT(&before));
		sched_setaffinity(0, sizeof(before), &before);
		break;
	}
	free(ifs);
}
END_TEST

/* ---- LLDP without a usable lldpd */

static struct weft_topo_card lldp_card(void)
{
	struct weft_topo_card c;
	memset(&c, 0, sizeof(c));
	snprintf(c.nic, sizeof(c.nic), "eth0");
	snprintf(c.leaf_name, sizeof(c.leaf_name), "from-file");
	c.leaf_source = WEFT_LEAF_FILE;
	c.numa = c.nic_numa = -1;
	return c;
}

/* lldp_fill must succeed, leave the card as it was and return within
 * @p max_s seconds. */
static void lldp_unchanged(const char *nic, const char *sock, double max_s)
{
	struct weft_topo_card c = lldp_card(), before = c;
	struct weft_err err = {0};
	double t0 = now_s();
	weft_status_t st = weft_topo_lldp_fill(&c, nic, sock, &err);
	double took = now_s() - t0;
	ck_assert_msg(st == WEFT_SUCCESS, "lldp_fill(%s): %s", sock, err.msg);
	ck_assert_msg(memcmp(&c, &before, sizeof(c)) == 0, "lldp_fill(%s) changed the card", sock);
	ck_assert_msg(took < max_s, "lldp_fill(%s) took %.2f s", sock, took);
}

START_TEST(test_lldp_no_daemon)
{
	lldp_unchanged("eth0", "/nonexistent/weft-test/lldpd.socket", 0.5);

	/* A path that is not a socket, and a socket file nobody listens on. */
	char path[108];
	snprintf(path, sizeof(path), "/tmp/weft-test-lldp-%d.sock", (int)getpid());
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	lldp_unchanged("eth0", path, 0.5);
	unlink(path);

	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd); /* bound, never listening: connection refused */
	lldp_unchanged("eth0", path, 0.5);
	unlink(path);

	lldp_unchanged("", path, 0.5);
	lldp_unchanged(NULL, path, 0.5);
}
END_TEST

START_TEST(test_lldp_mute_daemon)
{
	/* Accepts connections (the backlog does) but never answers: the
	 * query gives up at its deadline instead of blocking in read(). */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/weft-test-mute-%d.sock", (int)getpid());
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	lldp_unchanged("eth0", sa.sun_path, 4.0);
	close(fd);
	unlink(sa.sun_path);
}
END_TEST

START_TEST(test_lldp_disabled)
{
	setenv("WEFT_LLDP", "0", 1);
	lldp_unchanged("eth0", "/nonexistent/weft-test/lldpd.socket", 0.1);
	unsetenv("WEFT_LLDP");
}
END_TEST

/* liblldpctl is opened with dlopen: a library that is not there, or one
 * without its functions (libm), leaves the leaf unknown, in no time. */
START_TEST(test_lldp_no_library)
{
	setenv("WEFT_LLDP_LIB", "libweft-test-no-such-lldpctl.so.4", 1);
	lldp_unchanged("eth0", "/nonexistent/weft-test/lldpd.socket", 0.5);
	setenv("WEFT_LLDP_LIB", "libm.so.6", 1);
	lldp_unchanged("eth0", "/nonexistent/weft-test/lldpd.socket", 0.5);
	unsetenv("WEFT_LLDP_LIB");
}
END_TEST

/* ---- LLDP for real: two namespaces, two lldpd */

#define FABRIC_DEADLINE_S 10.0 /* setup + neighbour discovery + query */

static bool find_tool(const char *name, char *path, size_t len)
{
	static const char *const dirs[] = {"/usr/sbin", "/sbin",	   "/usr/bin",
					   "/bin",	"/usr/local/sbin", "/usr/local/bin"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, len, "%s/%s", dirs[i], name);
		if (access(path, X_OK) == 0)
			return true;
	}
	return false;
}

/* Start argv with stdout and stderr to @p log (NULL: /dev/null). */
static pid_t spawn(char *const argv[], const char *log)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log ? log : "/dev/null",
					 O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	pid_t pid;
	int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	return rc == 0 ? pid : -1;
}

/* Wait for @p pid up to @p timeout_s; then SIGKILL it (our own child). */
static int reap(pid_t pid, double timeout_s)
{
	double end = now_s() + timeout_s;
	int status;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		if (r < 0)
			return -1;
		if (now_s() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
	}
}

/* Run a command (NULL-terminated words) to completion within 5 s. */
static bool run(const char *tool, ...)
{
	char *argv[24];
	int n = 0;
	va_list ap;
	va_start(ap, tool);
	for (const char *w = tool; w && n < 23; w = va_arg(ap, const char *))
		argv[n++] = (char *)w;
	va_end(ap);
	argv[n] = NULL;
	pid_t pid = spawn(argv, NULL);
	return pid > 0 && reap(pid, 5.0) == 0;
}

struct lldp_side {
	char ns[32];
	char veth[16];
	char sock[64];
	char conf[64];
	char log[64];
	const char *sysname;
	bool ns_made;
	pid_t lldpd;
};

struct lldp_pair {
	struct lldp_side side[2];
};

static bool write_conf(const struct lldp_side *s)
{
	FILE *f = fopen(s->conf, "w");
	if (!f)
		return false;
	fprintf(f, "configure lldp tx-interval 1\nconfigure system hostname %s\n", s->sysname);
	return fclose(f) == 0;
}

/* Namespaces A and B, a veth pair between them (addresses inside the
 * namespaces only), an lldpd on each end with its own control socket.
 * *skip: the host cannot make namespaces at all (not a test failure). */
static bool pair_up(struct lldp_pair *p, const char *ip, const char *lldpd, bool *skip, char *why,
		    size_t len)
{
	static const char *const addr[2] = {"10.231.0.1/30", "10.231.0.2/30"};
	static const char *const sysname[2] = {"wtopo-host-a", "wtopo-leaf-b"};
	int pid = (int)getpid();
	*skip = false;
	for (int i = 0; i < 2; i++) {
		struct lldp_side *s = &p->side[i];
		char c = (char)('a' + i);
		snprintf(s->ns, sizeof(s->ns), "wtopo-%c-%d", c, pid);
		snprintf(s->veth, sizeof(s->veth), "wt%c%d", c, pid % 10000000);
		snprintf(s->sock, sizeof(s->sock), "/tmp/wtopo-%c-%d.sock", c, pid);
		snprintf(s->conf, sizeof(s->conf), "/tmp/wtopo-%c-%d.conf", c, pid);
		snprintf(s->log, sizeof(s->log), "/tmp/wtopo-%c-%d.log", c, pid);
		s->sysname = sysname[i];
		if (!run(ip, "netns", "add", s->ns, NULL)) {
			*skip = i == 0;
			snprintf(why, len, "ip netns add %s failed", s->ns);
			return false;
		}
		s->ns_made = true;
	}
	struct lldp_side *a = &p->side[0], *b = &p->side[1];
	if (!run(ip, "link", "add", a->veth, "netns", a->ns, "type", "veth", "peer", "name",
		 b->veth, "netns", b->ns, NULL)) {
		snprintf(why, len, "cannot create veth pair %s/%s", a->veth, b->veth);
		return false;
	}
	for (int i = 0; i < 2; i++) {
		struct lldp_side *s = &p->side[i];
		if (!run(ip, "-n", s->ns, "addr", "add", addr[i], "dev", s->veth, NULL) ||
		    !run(ip, "-n", s->ns, "link", "set", s->veth, "up", NULL)) {
			snprintf(why, len, "cannot configure %s in %s", s->veth, s->ns);
			return false;
		}
		if (!write_conf(s)) {
			snprintf(why, len, "cannot write %s", s->conf);
			return false;
		}
		char *argv[] = {(char *)ip, "netns", "exec",  s->ns, (char *)lldpd, "-d", "-u",
				s->sock,    "-I",    s->veth, "-O",  s->conf,	    NULL};
		s->lldpd = spawn(argv, s->log);
		if (s->lldpd <= 0) {
			s->lldpd = 0;
			snprintf(why, len, "cannot start lldpd in %s", s->ns);
			return false;
		}
	}
	return true;
}

/* Stop what pair_up() started, in reverse: the lldpd it spawned (by PID),
 * then the namespaces (which takes the veth pair with them), then files. */
static void pair_down(struct lldp_pair *p, const char *ip)
{
	for (int i = 0; i < 2; i++) {
		struct lldp_side *s = &p->side[i];
		if (s->lldpd > 0) {
			kill(s->lldpd, SIGTERM);
			if (reap(s->lldpd, 3.0) < 0)
				fprintf(stderr, "topo/host: lldpd %d needed SIGKILL\n",
					(int)s->lldpd);
			s->lldpd = 0;
		}
	}
	for (int i = 0; i < 2; i++) {
		struct lldp_side *s = &p->side[i];
		if (s->ns_made && !run(ip, "netns", "del", s->ns, NULL))
			fprintf(stderr, "topo/host: could not delete netns %s\n", s->ns);
		s->ns_made = false;
		if (s->sock[0]) {
			unlink(s->sock);
			unlink(s->conf);
			unlink(s->log);
		}
	}
}

static void dump_logs(const struct lldp_pair *p)
{
	for (int i = 0; i < 2; i++) {
		FILE *f = fopen(p->side[i].log, "r");
		char line[512];
		fprintf(stderr, "---- lldpd in %s:\n", p->side[i].ns);
		while (f && fgets(line, sizeof(line), f))
			fputs(line, stderr);
		if (f)
			fclose(f);
	}
}

/*
 * From inside network namespace @p s, ask lldpd at @p sock about @p nic
 * until the leaf is named @p want (NULL: ask once) or @p deadline passes.
 * The answer lands in *out. A child process does it: setns() would
 * otherwise move this test process into the namespace.
 */
static bool query_in_ns(const struct lldp_side *s, const char *nic, const char *sock,
			const char *want, struct weft_topo_card *out, double deadline)
{
	int fds[2];
	if (pipe(fds) != 0)
		return false;
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return false;
	}
	if (pid == 0) {
		char path[96];
		snprintf(path, sizeof(path), "/run/netns/%s", s->ns);
		int ns = open(path, O_RDONLY | O_CLOEXEC);
		if (ns < 0 || setns(ns, CLONE_NEWNET) != 0)
			_exit(2);
		struct weft_topo_card c;
		for (;;) {
			struct weft_err err = {0};
			c = lldp_card();
			if (weft_topo_lldp_fill(&c, nic, sock, &err) != WEFT_SUCCESS)
				_exit(3);
			if (!want || strcmp(c.leaf_name, want) == 0 || now_s() > deadline)
				break;
			nanosleep(&(struct timespec){.tv_nsec = 200 * 1000 * 1000}, NULL);
		}
		_exit(write(fds[1], &c, sizeof(c)) == (ssize_t)sizeof(c) ? 0 : 4);
	}
	close(fds[1]);
	struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
	double left = deadline - now_s() + 3.0;
	bool got = poll(&pfd, 1, left > 0 ? (int)(left * 1000) : 0) == 1 &&
		   read(fds[0], out, sizeof(*out)) == (ssize_t)sizeof(*out);
	close(fds[0]);
	int rc = reap(pid, 1.0);
	return got && rc == 0;
}

static bool looks_like_mac(const char *s)
{
	if (strlen(s) != 17)
		return false;
	for (int i = 0; i < 17; i++)
		if (i % 3 == 2 ? s[i] != ':' : !strchr("0123456789abcdefABCDEF", s[i]))
			return false;
	return true;
}

START_TEST(test_lldp_two_namespaces)
{
	char ip[64], lldpd[64], lldpcli[64];
#ifndef WEFT_HAVE_LLDPCTL
	printf("SKIP test_lldp_two_namespaces: Weft was built without liblldpctl\n");
	return;
#endif
	if (geteuid() != 0) {
		printf("SKIP test_lldp_two_namespaces: needs root for network namespaces\n");
		return;
	}
	if (!find_tool("ip", ip, sizeof(ip)) || !find_tool("lldpd", lldpd, sizeof(lldpd)) ||
	    !find_tool("lldpcli", lldpcli, sizeof(lldpcli))) {
		printf("SKIP test_lldp_two_namespaces: needs ip, lldpd and lldpcli\n");
		return;
	}

	/* No ck_assert until pair_down(): a failed assertion ends the test
	 * process and would leave the namespaces and daemons behind. */
	double t0 = now_s();
	struct lldp_pair p;
	memset(&p, 0, sizeof(p));
	char why[256] = "";
	bool skip = false;
	bool up = pair_up(&p, ip, lldpd, &skip, why, sizeof(why));
	struct weft_topo_card leaf = lldp_card(), missing = lldp_card();
	bool found = false, asked = false;
	if (up) {
		const struct lldp_side *a = &p.side[0];
		found =
		    query_in_ns(a, a->veth, a->sock, "wtopo-leaf-b", &leaf, t0 + FABRIC_DEADLINE_S);
		asked = query_in_ns(a, "wtnosuch0", a->sock, NULL, &missing, now_s() + 3.0);
		if (!found || strcmp(leaf.leaf_name, "wtopo-leaf-b") != 0)
			dump_logs(&p);
	}
	char peer_port[16];
	memcpy(peer_port, p.side[1].veth, sizeof(peer_port));
	pair_down(&p, ip);
	double took = now_s() - t0;

	if (skip) {
		printf("SKIP test_lldp_two_namespaces: %s\n", why);
		return;
	}
	ck_assert_msg(up, "LLDP fabric: %s", why);
	ck_assert_msg(found, "no answer from the query process in namespace A");
	ck_assert_msg(strcmp(leaf.leaf_name, "wtopo-leaf-b") == 0,
		      "leaf_name '%s' (source %d), expected wtopo-leaf-b within %.0f s",
		      leaf.leaf_name, leaf.leaf_source, FABRIC_DEADLINE_S);
	ck_assert_int_eq(leaf.leaf_source, WEFT_LEAF_LLDP);
	ck_assert_msg(looks_like_mac(leaf.leaf_id), "leaf_id '%s'", leaf.leaf_id);
	/* lldpd sends its MAC as port id and the interface name as description. */
	ck_assert_str_eq(leaf.leaf_port, peer_port);
	ck_assert_str_eq(leaf.nic, "eth0"); /* the rest of the card is untouched */

	struct weft_topo_card expect = lldp_card();
	ck_assert_msg(asked, "no answer for an interface lldpd does not handle");
	ck_assert_msg(memcmp(&missing, &expect, sizeof(expect)) == 0,
		      "unknown interface changed the card");
	ck_assert_msg(took < 20.0, "LLDP namespace test took %.1f s", took);
	printf("test_lldp_two_namespaces: leaf %s (%s) port %s in %.1f s\n", leaf.leaf_name,
	       leaf.leaf_id, leaf.leaf_port, took);
}
END_TEST

static Suite *topo_host_suite(void)
{
	Suite *s = suite_create("topo_host");
	TCase *hw = tcase_create("hwloc");
	tcase_add_test(hw, test_fixture_counts);
	tcase_add_test(hw, test_fixture_numa_of_cpus);
	tcase_add_test(hw, test_fixture_nic_numa);
	tcase_add_test(hw, test_fixture_bad_input);
	tcase_add_test(hw, test_synthetic_one_numa);
	tcase_add_test(hw, test_synthetic_llc);
	tcase_add_test(hw, test_pick_nearest);
	tcase_add_test(hw, test_pick_fallbacks);
	tcase_add_test(hw, test_bind_targets);
	tcase_add_test(hw, test_this_machine);
	tcase_add_test(hw, test_bind_this_machine);
	tcase_set_timeout(hw, 20);
	suite_add_tcase(s, hw);

	TCase *lldp = tcase_create("lldp");
	tcase_add_test(lldp, test_lldp_no_daemon);
	tcase_add_test(lldp, test_lldp_mute_daemon);
	tcase_add_test(lldp, test_lldp_disabled);
	tcase_add_test(lldp, test_lldp_no_library);
	tcase_add_test(lldp, test_lldp_two_namespaces);
	/* The namespace test bounds its own waits (about 20 s at worst) and
	 * must finish to tear down: never let Check kill it first. */
	tcase_set_timeout(lldp, 40);
	suite_add_tcase(s, lldp);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(topo_host_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
