/*
 * test_ofi.c — what is the libfabric transport's own, on forked ranks over
 * tcp;ofi_rxm and sockets (pinned to lo: FI_TCP_IFACE, FI_SOCKETS_IFACE):
 * the provider it chooses and what it says of it (descriptions, scores and
 * properties per path, WEFT_OFI_PROTO=tagged and rma); a job with shm
 * between some pairs and ofi between others; sub-flows (WEFT_OFI_EPS)
 * carrying their shares; a provider that does not exist, one that lacks
 * what Weft needs (mrail), a missing library (an error when ofi was asked
 * for, idle when it was not); and every setting's parsing. The
 * point-to-point contract over ofi, on both providers and both paths
 * (sizes around inject, the rxm eager limit and the rma landing slot,
 * reduction, order, mismatches, kill -9 on one host and several, abort),
 * is the conformance suite's (tests/conformance/: the ofi-* configurations).
 *
 * The test process loads libfabric and asks it for providers once before
 * forking, so that the ranks inherit what costs ~0.2 s per process.
 */
#define _GNU_SOURCE
#include <check.h>
#include <linux/tcp.h> /* tcpi_bytes_acked: glibc's <netinet/tcp.h> lacks it */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/comm.h"
#include "harness.h"
#include "ofi_warm_up.h"
#include "p2p_exchange.h"
#include "transports/ofi/ofi.h"
#include "transports/shm/shm.h"
#include "util/settings.h"

#define JOB_TIMEOUT_S 40.0
#define WAIT_S	      10.0

struct variant {
	const char *prov, *proto;
};

static const struct variant variants[] = {
    {"tcp;ofi_rxm", "tagged"},
    {"tcp;ofi_rxm", "rma"},
    {"sockets", "tagged"},
    {"sockets", "rma"},
};

/* "KEY=VALUE" strings of one job: the variant and any extras. */
struct env_set {
	char prov[64], proto[64];
	const char *v[16];
};

static const char *const *make_env(struct env_set *e, const struct variant *v,
				   const char *const *extra)
{
	snprintf(e->prov, sizeof(e->prov), "WEFT_OFI_PROVIDER=%s", v->prov ? v->prov : "");
	snprintf(e->proto, sizeof(e->proto), "WEFT_OFI_PROTO=%s", v->proto);
	size_t k = 0;
	e->v[k++] = "WEFT_TRANSPORTS=ofi";
	e->v[k++] = "FI_TCP_IFACE=lo";
	e->v[k++] = "FI_SOCKETS_IFACE=lo";
	e->v[k++] = "WEFT_TIMEOUT=20";
	if (v->prov)
		e->v[k++] = e->prov;
	e->v[k++] = e->proto;
	for (size_t i = 0; extra && extra[i] && k + 1 < sizeof(e->v) / sizeof(e->v[0]); i++)
		e->v[k++] = extra[i];
	e->v[k] = NULL;
	return e->v;
}

static void run_ok(const struct harness_job *job)
{
	struct harness_result res;
	harness_run_job(job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}

/* ---- shm between some pairs, ofi between others ---- */

static int two_hosts(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	return setenv("WEFT_HOSTID", rank < 2 ? "test-ofi-a" : "test-ofi-b", 1) != 0;
}

static int body_mixed(weft_comm_t comm, int rank, int nranks, void *arg)
{
	for (int p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		bool local = (p < 2) == (rank < 2);
		const struct weft_tp_ops *want = local ? &weft_tp_shm_ops : &weft_tp_ofi_ops;
		if (comm->peers[p].tp->ops != want)
			return harness_fail("peer %d: over %s", p, comm->peers[p].tp->ops->name);
	}
	int bufs[4][2] = {{0}};
	struct weft_msg m[8];
	struct weft_msg *ptr[8];
	int n = 0;
	for (int p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		bufs[p][0] = rank * 10 + p;
		m[n] = (struct weft_msg){.buf = &bufs[p][0], .len = 4, .tag = 1};
		m[n + 1] = (struct weft_msg){.buf = &bufs[p][1], .len = 4, .tag = 1};
		weft_p2p_isend_msg(comm, p, &m[n]);
		weft_p2p_irecv_msg(comm, p, &m[n + 1]);
		ptr[n] = &m[n];
		ptr[n + 1] = &m[n + 1];
		n += 2;
	}
	weft_status_t st = p2p_wait(comm, ptr, n, WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "exchange");
	for (int p = 0; p < nranks; p++)
		if (p != rank && bufs[p][1] != p * 10 + rank)
			return harness_fail("from %d: %d", p, bufs[p][1]);
	/* And a collective across both. */
	float x[1000], want = 0;
	for (int i = 0; i < 1000; i++)
		x[i] = (float)(rank + 1);
	for (int r = 0; r < nranks; r++)
		want += (float)(r + 1);
	st = weft_allreduce(WEFT_IN_PLACE, x, 1000, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "allreduce");
	for (int i = 0; i < 1000; i++)
		if (x[i] != want)
			return harness_fail("allreduce: [%d] = %f", i, (double)x[i]);
	return 0;
}

START_TEST(shm_and_ofi)
{
	static const char *const extra[] = {"WEFT_TRANSPORTS=shm,ofi", NULL};
	struct env_set e;
	struct harness_job job = {.nranks = 4,
				  .env = make_env(&e, &variants[_i], extra),
				  .body = body_mixed,
				  .timeout_s = JOB_TIMEOUT_S,
				  .before_init = two_hosts};
	run_ok(&job);
}
END_TEST

/* ---- scores, descriptions, properties ---- */

static int body_describe(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const char *proto = arg;
	struct weft_tp *tp = NULL, *sock = NULL;
	for (size_t i = 0; i < comm->ntps; i++) {
		if (comm->tps[i] && comm->tps[i]->ops == &weft_tp_ofi_ops)
			tp = comm->tps[i];
		else if (comm->tps[i] && strcmp(comm->tps[i]->ops->name, "socket") == 0)
			sock = comm->tps[i];
	}
	if (!tp || !sock)
		return harness_fail("ofi or socket missing");
	int peer = 1 - rank;
	char d[128];
	tp->ops->prop.describe(tp, peer, d, sizeof(d));
	if (strcmp(d, "ofi(tcp;ofi_rxm)") != 0)
		return harness_fail("describe: \"%s\"", d);
	/* tcp;ofi_rxm never outranks the socket transport. */
	int s_ofi = tp->ops->conn.score(tp, peer), s_sock = sock->ops->conn.score(sock, peer);
	if (s_ofi <= 0 || s_ofi >= s_sock)
		return harness_fail("scores: ofi %d, socket %d", s_ofi, s_sock);
	if (comm->peers[peer].tp != sock)
		return harness_fail("peer served by %s", comm->peers[peer].tp->ops->name);
	struct weft_tp_props props;
	tp->ops->prop.props(tp, peer, &props);
	if (props.ordered != (strcmp(proto, "rma") == 0) || props.bandwidth_Bps <= 0 ||
	    props.latency_s <= 0)
		return harness_fail("props: ordered %d bw %g lat %g", props.ordered,
				    props.bandwidth_Bps, props.latency_s);
	return 0;
}

START_TEST(describe_and_score)
{
	static const char *const extra[] = {"WEFT_TRANSPORTS=socket,ofi", "WEFT_SOCKET_IFNAME=lo",
					    NULL};
	struct env_set e;
	struct harness_job job = {.nranks = 2,
				  .env = make_env(&e, &variants[_i], extra),
				  .body = body_describe,
				  .arg = (void *)variants[_i].proto,
				  .timeout_s = JOB_TIMEOUT_S};
	run_ok(&job);
}
END_TEST

/* Not asked for and no RDMA device: idle, the job runs without it. */
static int body_idle(weft_comm_t comm, int rank, int nranks, void *arg)
{
	for (size_t i = 0; i < comm->ntps; i++) {
		struct weft_tp *tp = comm->tps[i];
		if (!tp || tp->ops != &weft_tp_ofi_ops)
			continue;
		char d[256];
		tp->ops->prop.describe(tp, 1 - rank, d, sizeof(d));
		if (!strstr(d, "idle") || tp->ops->conn.score(tp, 1 - rank) != 0)
			return harness_fail("ofi not idle: \"%s\"", d);
		return weft_barrier(comm) == WEFT_SUCCESS ? 0 : harness_fail("barrier");
	}
	return harness_fail("no ofi transport");
}

START_TEST(idle_unless_asked)
{
	/* 0: nothing set; 1: a library that does not exist, not asked for. */
	static const char *const env1[] = {"WEFT_OFI_LIB=libweft-no-such-fabric.so.1", NULL};
	struct harness_job job = {
	    .nranks = 2, .env = _i ? env1 : NULL, .body = body_idle, .timeout_s = JOB_TIMEOUT_S};
	if (weft_ofi_hardware_visible() || getenv("FI_PROVIDER") || getenv("WEFT_OFI_PROVIDER") ||
	    getenv("WEFT_TRANSPORTS"))
		return; /* ofi would wake up here */
	run_ok(&job);
}
END_TEST

/* ---- init errors: providers, the library, settings ---- */

struct init_error {
	const char *prov; /* WEFT_OFI_PROVIDER, or NULL */
	const char *env[3];
	const char *want[3]; /* substrings of the message */
	weft_status_t status;
};

static const struct init_error init_errors[] = {
    {"bogus",
     {NULL},
     {"WEFT_OFI_PROVIDER=bogus", "no such provider", "tcp;ofi_rxm"},
     WEFT_ERR_INVALID_ARG},
    {NULL,
     {"FI_PROVIDER=bogus"},
     {"FI_PROVIDER=bogus", "no such provider", "sockets"},
     WEFT_ERR_INVALID_ARG},
    /* built into libfabric, but there is no Omni-Path device here */
    {"psm2", {NULL}, {"psm2", "no such provider", "tcp;ofi_rxm"}, WEFT_ERR_INVALID_ARG},
    /* exists (multi-rail over rxm, given rails), but has no RMA with
     * remote CQ data: lacks what Weft needs */
    {"tcp;ofi_rxm;ofi_mrail",
     {"FI_OFI_MRAIL_ADDR=127.0.0.1"},
     {"WEFT_OFI_PROVIDER=tcp;ofi_rxm;ofi_mrail", "lacks what Weft needs",
      "would work: tcp;ofi_rxm"},
     WEFT_ERR_NOT_SUPPORTED},
    {"tcp;ofi_rxm",
     {"WEFT_OFI_LIB=libweft-no-such-fabric.so.1"},
     {"libweft-no-such-fabric", "WEFT_OFI_LIB"},
     WEFT_ERR_NOT_SUPPORTED},
    {"tcp;ofi_rxm",
     {"WEFT_OFI_PROTO=fast"},
     {"WEFT_OFI_PROTO=fast", "tagged or rma"},
     WEFT_ERR_INVALID_ARG},
    {"tcp;ofi_rxm", {"WEFT_OFI_CHUNK=1"}, {"WEFT_OFI_CHUNK=1", "4K"}, WEFT_ERR_INVALID_ARG},
    {"tcp;ofi_rxm", {"WEFT_OFI_CHUNK=big"}, {"WEFT_OFI_CHUNK=big"}, WEFT_ERR_INVALID_ARG},
    {"tcp;ofi_rxm",
     {"WEFT_OFI_SLOTS=3", "WEFT_OFI_PROTO=rma"},
     {"WEFT_OFI_SLOTS=3", "power of two"},
     WEFT_ERR_INVALID_ARG},
    {"tcp;ofi_rxm",
     {"WEFT_OFI_SLOT_BYTES=100", "WEFT_OFI_PROTO=rma"},
     {"WEFT_OFI_SLOT_BYTES=100", "multiple of 64"},
     WEFT_ERR_INVALID_ARG},
    {"tcp;ofi_rxm", {"WEFT_OFI_STALL=0"}, {"WEFT_OFI_STALL=0"}, WEFT_ERR_INVALID_ARG},
    {"tcp;ofi_rxm", {"WEFT_OFI_EPS=9"}, {"WEFT_OFI_EPS=9", "1 to 8"}, WEFT_ERR_INVALID_ARG},
    {"tcp;ofi_rxm",
     {"WEFT_OFI_EPS=2", "WEFT_OFI_PROTO=rma"},
     {"WEFT_OFI_EPS=2", "tagged path"},
     WEFT_ERR_INVALID_ARG},
};
#define NINIT_ERRORS ((int)(sizeof(init_errors) / sizeof(init_errors[0])))

static int expect_init_error(int rank, int nranks, weft_status_t status, const char *message,
			     double seconds, void *arg)
{
	const struct init_error *ie = arg;
	if (status != ie->status)
		return harness_fail("init: %s, expected %s: %s", weft_status_string(status),
				    weft_status_string(ie->status), message);
	for (int k = 0; k < 3 && ie->want[k]; k++)
		if (!strstr(message, ie->want[k]))
			return harness_fail("init error \"%s\" does not say \"%s\"", message,
					    ie->want[k]);
	return 0;
}

static int body_unreached(weft_comm_t comm, int rank, int nranks, void *arg)
{
	return harness_fail("init succeeded");
}

START_TEST(init_error)
{
	const struct init_error *ie = &init_errors[_i];
	struct variant v = {ie->prov, "tagged"};
	struct env_set e;
	struct harness_job job = {.nranks = 2,
				  .env = make_env(&e, &v, ie->env),
				  .body = body_unreached,
				  .arg = (void *)ie,
				  .timeout_s = JOB_TIMEOUT_S,
				  .init_failed = expect_init_error};
	run_ok(&job);
}
END_TEST

START_TEST(settings_listed)
{
	static const char *const names[] = {
	    "WEFT_OFI_PROVIDER",   "WEFT_OFI_PROTO", "WEFT_OFI_CHUNK", "WEFT_OFI_SLOTS",
	    "WEFT_OFI_SLOT_BYTES", "WEFT_OFI_STALL", "WEFT_OFI_LIB",   "WEFT_OFI_EPS"};
	size_t n;
	const struct weft_setting *all = weft_settings_all(&n);
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		bool found = false;
		for (size_t i = 0; i < n; i++)
			found |= strcmp(all[i].name, names[k]) == 0 && all[i].help[0];
		ck_assert_msg(found, "%s is not declared", names[k]);
	}
}
END_TEST

/* ---- sub-flows (WEFT_OFI_EPS) ---- */

/* This process's TCP sockets that sent at least @p least bytes (acked:
 * TCP_INFO's tcpi_bytes_acked), libfabric's among them. */
static int busy_sockets(uint64_t least)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++) {
		struct tcp_info ti;
		socklen_t len = sizeof(ti);
		memset(&ti, 0, sizeof(ti));
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
		    ti.tcpi_bytes_acked >= least)
			n++;
	}
	return n;
}

/* An 8 MiB AllReduce on 2 ranks over WEFT_OFI_EPS=@p arg endpoints: right,
 * described with its endpoints, and every endpoint's connection carried a
 * share (each rank sends 8 MiB: with k endpoints, k sockets of at least
 * 8 MiB / (4 k)), against one busy socket with 1 endpoint. */
static int body_subflows(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int eps = *(const int *)arg;
	size_t count = 2u << 20, bytes = count * sizeof(float);
	float *buf = malloc(bytes);
	if (!buf)
		return harness_fail("out of memory");
	for (size_t i = 0; i < count; i++)
		buf[i] = (float)((rank + 1) * (i % 1000));
	weft_status_t st = weft_allreduce(buf, buf, count, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "allreduce");
	for (size_t i = 0; i < count; i++)
		if (buf[i] != (float)(3 * (i % 1000)))
			return harness_fail("element %zu is %g", i, buf[i]);
	free(buf);
	char d[256] = "";
	struct weft_tp *tp = comm->peers[1 - rank].tp;
	tp->ops->prop.describe(tp, 1 - rank, d, sizeof(d));
	char want[32];
	snprintf(want, sizeof(want), "%d endpoints", eps);
	if (tp->ops != &weft_tp_ofi_ops || (eps > 1) != (strstr(d, want) != NULL))
		return harness_fail("described as \"%s\"", d);
	int busy = busy_sockets(bytes / (4 * (size_t)eps));
	if (eps > 1 ? busy < eps : busy != 1)
		return harness_fail("%d endpoints: %d sockets carried a share", eps, busy);
	return weft_barrier(comm) == WEFT_SUCCESS ? 0 : harness_fail("barrier");
}

START_TEST(subflows)
{
	static const int eps[] = {1, 4};
	char set[32];
	snprintf(set, sizeof(set), "WEFT_OFI_EPS=%d", eps[_i]);
	/* 64 KiB chunks: 128 per rank, so that the hash leaves no endpoint
	 * below a quarter of its share (about 1e-7; 512 KiB chunks, 16 per
	 * rank, would leave one empty in some 4 % of jobs). */
	const char *const extra[] = {set, "WEFT_ALGO=allreduce:ring", "WEFT_OFI_CHUNK=64K", NULL};
	struct env_set e;
	struct harness_job job = {.nranks = 2,
				  .env = make_env(&e, &variants[0], extra),
				  .body = body_subflows,
				  .arg = (void *)&eps[_i],
				  .timeout_s = JOB_TIMEOUT_S};
	run_ok(&job);
}
END_TEST

/* Ranks that disagree on WEFT_OFI_EPS fail init, naming it. */
static int eps_differ(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	return setenv("WEFT_OFI_EPS", rank ? "2" : "3", 1) != 0;
}

START_TEST(subflows_differ)
{
	static const struct init_error ie = {"tcp;ofi_rxm",
					     {NULL},
					     {"WEFT_OFI_EPS differs", "has 2", "has 3"},
					     WEFT_ERR_INVALID_ARG};
	struct env_set e;
	struct harness_job job = {.nranks = 2,
				  .env = make_env(&e, &variants[0], NULL),
				  .body = body_unreached,
				  .arg = (void *)&ie,
				  .before_init = eps_differ,
				  .timeout_s = JOB_TIMEOUT_S,
				  .init_failed = expect_init_error};
	run_ok(&job);
}
END_TEST

static Suite *ofi_suite(void)
{
	Suite *s = suite_create("ofi");
	TCase *tc = tcase_create("data");
	tcase_set_timeout(tc, 4 * JOB_TIMEOUT_S);
	tcase_add_loop_test(tc, shm_and_ofi, 0, 2);
	tcase_add_loop_test(tc, describe_and_score, 0, 2);
	tcase_add_loop_test(tc, subflows, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("failures");
	tcase_set_timeout(tc, 2 * JOB_TIMEOUT_S);
	tcase_add_loop_test(tc, idle_unless_asked, 0, 2);
	tcase_add_loop_test(tc, init_error, 0, NINIT_ERRORS);
	tcase_add_test(tc, subflows_differ);
	tcase_add_test(tc, settings_listed);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	setenv("FI_TCP_IFACE", "lo", 1);
	setenv("FI_SOCKETS_IFACE", "lo", 1);
	setenv("FI_UDP_IFACE", "lo", 1);
	/* Rails for mrail (the provider that lacks RMA), read when libfabric
	 * initialises its providers. */
	setenv("FI_OFI_MRAIL_ADDR", "127.0.0.1", 1);
	ofi_warm_up();
	SRunner *sr = srunner_create(ofi_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
