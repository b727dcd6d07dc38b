/*
 * verbs_setup.c — how the verbs transport sets itself up, over the
 * test double (tests/fake_ibverbs) and the fake sysfs tree:
 *
 *  - what the queue pairs were told, as the double recorded it: the
 *    peer's QPN both ways, PSNs, the GID index chosen (or
 *    WEFT_IB_GID_INDEX), the path MTU, WEFT_IB_TC, WEFT_IB_SL,
 *    WEFT_IB_TIMEOUT, WEFT_IB_RETRY_CNT; InfiniBand by LID without a GRH
 *    (WEFT_IB_HCA=mlx5_2); properties and describe;
 *  - when verbs must not serve, and says why in describe: the double
 *    loaded but WEFT_TRANSPORTS not naming verbs, libibverbs absent
 *    (WEFT_IBVERBS_LIB=/nonexistent/...), the real library with no device
 *    (this machine), a same-host peer while shm is enabled; the job runs
 *    on the other transports; WEFT_TRANSPORTS=verbs with nothing behind it
 *    fails init and the log says why;
 *  - a job with shm between the ranks of a "host" (WEFT_HOSTID) and verbs
 *    between hosts, running collectives.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_ibverbs/fake_ibverbs_api.h"
#include "verbs_p2p.h"

/* ---- what the queue pairs were told ---- */

struct qp_expect {
	int tc, sl, timeout, retry, gid_index; /* -1: the default choice */
	bool ib;
};

static weft_fake_qp_attr_fn fake_attr_fn(void)
{
	void *h = dlopen(verbs_fake_path, RTLD_NOW | RTLD_NOLOAD);
	return h ? (weft_fake_qp_attr_fn)dlsym(h, WEFT_FAKE_QP_ATTR) : NULL;
}

static int check_qp(weft_comm_t comm, int peer, const struct qp_expect *e)
{
	struct verbs_conn *c = conn_to(comm, peer);
	struct verbs_tp *tp = c->tp;
	weft_fake_qp_attr_fn attr = fake_attr_fn();
	struct weft_fake_qp_attr mine, theirs;
	if (!attr || attr(c->lane[0].qp->qp_num, &mine) || attr(mine.dest_qpn, &theirs))
		return harness_fail("cannot read the double's record of the QP to %d", peer);
	if (mine.state != IBV_QPS_RTS || theirs.dest_qpn != c->lane[0].qp->qp_num ||
	    theirs.pid != comm->cards[peer].pid)
		return harness_fail("QP %u to rank %d: state %u, peer QP %u points at %u",
				    c->lane[0].qp->qp_num, peer, mine.state, mine.dest_qpn,
				    theirs.dest_qpn);
	if (mine.sq_psn != theirs.rq_psn || mine.rq_psn != theirs.sq_psn)
		return harness_fail("PSNs disagree with rank %d", peer);
	int want_gid = e->gid_index >= 0	? e->gid_index
		       : e->ib			? 0
		       : tp->port.dev[5] == '0' ? 3
						: 4;
	if (mine.traffic_class != (e->ib ? 0 : e->tc) || mine.sl != e->sl ||
	    mine.timeout != e->timeout || mine.retry_cnt != e->retry || mine.rnr_retry != 7 ||
	    (!e->ib && (int)mine.sgid_index != want_gid) || mine.is_global != !e->ib)
		return harness_fail("QP to %d: tc %u sl %u timeout %u retry %u gid %u global %u",
				    peer, mine.traffic_class, mine.sl, mine.timeout, mine.retry_cnt,
				    mine.sgid_index, mine.is_global);
	if (e->ib ? (mine.dlid != 0x12 || mine.mtu != IBV_MTU_4096)
		  : (mine.mtu != IBV_MTU_1024 || memcmp(mine.dgid, theirs.sgid, 16) != 0))
		return harness_fail("QP to %d: dlid %#x mtu %u, or the GIDs disagree", peer,
				    mine.dlid, mine.mtu);
	return 0;
}

static int body_attrs(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct qp_expect *e = arg;
	/* Before any exchange: a peer destroys its QPs once it is done. */
	for (int p = 0; p < nranks; p++)
		if (p != rank && check_qp(comm, p, e))
			return 1;
	if (body_sizes(comm, rank, nranks, NULL))
		return 1;
	struct weft_tp *tp = verbs_of(comm);
	char d[256];
	tp->ops->prop.describe(tp, 1 - rank % 2, d, sizeof(d));
	struct verbs_tp *vt = verbs_tp_of(tp);
	char want[128];
	if (e->ib)
		snprintf(want, sizeof(want), "verbs(mlx5_2:1 lid 0x12, %d x %u B slots)", NSLOTS,
			 SLOT);
	else
		snprintf(want, sizeof(want), "verbs(%s:1 gid %d RoCE v2", vt->port.dev,
			 vt->gid.index);
	if (!strstr(d, want))
		return harness_fail("describe: \"%s\", expected \"%s\"", d, want);
	struct weft_tp_props props;
	tp->ops->prop.props(tp, 1 - rank % 2, &props);
	/* registration: weft_mem_register's regions stay registered with it */
	if (!props.ordered || props.bandwidth_Bps != 100e9 / 8 || !props.needs_registration)
		return harness_fail("props: ordered %d, %.3g B/s, registration %d", props.ordered,
				    props.bandwidth_Bps, props.needs_registration);
	return 0;
}

START_TEST(test_qp_defaults)
{
	struct qp_expect e = {.tc = 0, .sl = 0, .timeout = 14, .retry = 7, .gid_index = -1};
	run_ok(3, env_with(NULL), body_attrs, &e);
}
END_TEST

START_TEST(test_qp_settings)
{
	static const char *const more[] = {"WEFT_IB_TC=106",	  "WEFT_IB_SL=3",
					   "WEFT_IB_GID_INDEX=1", "WEFT_IB_TIMEOUT=12",
					   "WEFT_IB_RETRY_CNT=5", NULL};
	struct qp_expect e = {.tc = 106, .sl = 3, .timeout = 12, .retry = 5, .gid_index = 1};
	run_ok(2, env_with(more), body_attrs, &e);
}
END_TEST

START_TEST(test_infiniband_lid)
{
	static const char *const more[] = {"WEFT_IB_HCA=mlx5_2", "WEFT_IB_SL=2", NULL};
	struct qp_expect e = {.sl = 2, .timeout = 14, .retry = 7, .gid_index = -1, .ib = true};
	run_ok(2, env_with(more), body_attrs, &e);
}
END_TEST

/* ---- when verbs must not serve ---- */

struct not_used {
	const char *transport; /* that serves the peers instead */
	const char *why;       /* in verbs' describe */
};

static int body_not_used(weft_comm_t comm, int rank, int nranks, void *arg)
{
	const struct not_used *n = arg;
	struct weft_tp *tp = verbs_of(comm);
	if (!tp)
		return harness_fail("the verbs transport did not initialise");
	for (int p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		char d[512];
		tp->ops->prop.describe(tp, p, d, sizeof(d));
		if (tp->ops->conn.score(tp, p) != 0 || !strstr(d, n->why))
			return harness_fail("verbs scores %d for rank %d: \"%s\", expected \"%s\"",
					    tp->ops->conn.score(tp, p), p, d, n->why);
		if (strcmp(weft_comm_peer_transport(comm, p), n->transport) != 0)
			return harness_fail("rank %d is served by %s", p,
					    weft_comm_peer_transport(comm, p));
	}
	float x[3] = {1, 2, 3};
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, x, 3, WEFT_FLOAT32, WEFT_SUM, comm);
	if (st != WEFT_SUCCESS || x[2] != 3.0f * (float)nranks)
		return harness_fail_status(comm, st, "allreduce without verbs");
	return 0;
}

START_TEST(test_double_not_asked)
{
	/* All but shm, so socket and verbs: verbs is enabled, not named. */
	static const char *const more[] = {"WEFT_TRANSPORTS=^shm", "WEFT_SOCKET_IFNAME=lo", NULL};
	struct not_used n = {"socket", "the test double, used only when WEFT_TRANSPORTS names"};
	run_ok(2, env_with(more), body_not_used, &n);
}
END_TEST

START_TEST(test_library_absent)
{
	static const char *const more[] = {"WEFT_IBVERBS_LIB=/nonexistent/libibverbs.so.1",
					   "WEFT_TRANSPORTS=^shm", "WEFT_SOCKET_IFNAME=lo", NULL};
	struct not_used n = {"socket", "unavailable: dlopen(/nonexistent/libibverbs.so.1)"};
	run_ok(3, env_with(more), body_not_used, &n);
	/* The default set: shm serves this host, verbs says why not. */
	static const char *const dflt[] = {"WEFT_IBVERBS_LIB=/nonexistent/libibverbs.so.1",
					   "WEFT_TRANSPORTS=shm,socket,verbs", NULL};
	struct not_used s = {"shm", "this host: shm serves it"};
	run_ok(2, env_with(dflt), body_not_used, &s);
}
END_TEST

/* rdma-core is installed here, with no device behind it. */
START_TEST(test_real_library_no_device)
{
	static const char *const more[] = {"WEFT_IBVERBS_LIB=libibverbs.so.1",
					   "WEFT_TRANSPORTS=^shm", "WEFT_SOCKET_IFNAME=lo", NULL};
	struct not_used n = {"socket", "unavailable: no RDMA device"};
	char why[256];
	if (!weft_verbs_lib_load(NULL, why, sizeof(why)))
		n.why = "unavailable: dlopen(libibverbs.so.1)";
	run_ok(2, env_with(more), body_not_used, &n);
}
END_TEST

static int expect_no_transport(int rank, int nranks, weft_status_t st, const char *msg,
			       double seconds, void *arg)
{
	if (st == WEFT_SUCCESS || !strstr(msg, "no enabled transport reaches"))
		return harness_fail("init: %s: %s", weft_status_string(st), msg);
	return 0;
}

/* WEFT_TRANSPORTS=verbs with nothing behind it: init fails, and the log
 * says why verbs could not serve. */
START_TEST(test_only_verbs_absent)
{
	char dir[] = "/tmp/weft_verbs_XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char logenv[300];
	snprintf(logenv, sizeof(logenv), "WEFT_DEBUG_FILE=%s/v_%%p.log", dir);
	const char *const more[] = {"WEFT_IBVERBS_LIB=/nonexistent/libibverbs.so.1",
				    "WEFT_DEBUG=WARN", "WEFT_DEBUG_SUBSYS=NET", logenv, NULL};
	struct harness_job job = {.nranks = 2,
				  .env = env_with(more),
				  .timeout_s = JOB_TIMEOUT_S,
				  .init_failed = expect_no_transport};
	struct harness_result res;
	harness_run_job(&job, &res);
	char cmd[400];
	snprintf(cmd, sizeof(cmd),
		 "grep -l 'verbs: not used: dlopen(/nonexistent' %s/*.log | wc -l", dir);
	FILE *p = popen(cmd, "r");
	int logs = 0;
	ck_assert_int_eq(fscanf(p, "%d", &logs), 1);
	pclose(p);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_msg(res.ok, "%s", res.summary);
	ck_assert_int_eq(logs, 2);
}
END_TEST

/* ---- shm between some pairs, verbs between the others ---- */

static int two_hosts(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	return setenv("WEFT_HOSTID", rank < nranks / 2 ? "host-a" : "host-b", 1) ? 1 : 0;
}

static int body_mixed(weft_comm_t comm, int rank, int nranks, void *arg)
{
	for (int p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		const char *want = (p < nranks / 2) == (rank < nranks / 2) ? "shm" : "verbs";
		if (strcmp(weft_comm_peer_transport(comm, p), want) != 0)
			return harness_fail("rank %d over %s, expected %s", p,
					    weft_comm_peer_transport(comm, p), want);
	}
	struct verbs_tp *vt = verbs_tp_of(verbs_of(comm));
	if (vt->nconns != nranks / 2)
		return harness_fail("verbs made %d QPs for %d peers on the other host", vt->nconns,
				    nranks / 2);
	enum { N = 70001 };
	float *x = malloc(N * sizeof(float)), *all = malloc((size_t)nranks * 7 * sizeof(float));
	if (!x || !all)
		return harness_fail("out of memory");
	for (int i = 0; i < N; i++)
		x[i] = (float)(i % 7 + rank);
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, x, N, WEFT_FLOAT32, WEFT_SUM, comm);
	for (int i = 0; st == WEFT_SUCCESS && i < N; i++)
		if (x[i] != (float)(nranks * (i % 7) + nranks * (nranks - 1) / 2))
			return harness_fail("allreduce: element %d is %g", i, x[i]);
	float mine[7];
	for (int i = 0; i < 7; i++)
		mine[i] = (float)(rank * 10 + i);
	if (st == WEFT_SUCCESS)
		st = weft_allgather(mine, all, 7, WEFT_FLOAT32, comm);
	for (int i = 0; st == WEFT_SUCCESS && i < 7 * nranks; i++)
		if (all[i] != (float)(i / 7 * 10 + i % 7))
			return harness_fail("allgather: element %d is %g", i, all[i]);
	free(x);
	free(all);
	return st == WEFT_SUCCESS ? 0 : harness_fail_status(comm, st, "collectives");
}

START_TEST(test_mixed)
{
	static const char *const more[] = {"WEFT_TRANSPORTS=shm,verbs", "WEFT_SOCKET_IFNAME=lo",
					   NULL};
	struct harness_job job = {.nranks = 4,
				  .env = env_with(more),
				  .body = body_mixed,
				  .timeout_s = JOB_TIMEOUT_S,
				  .before_init = two_hosts};
	struct harness_result res;
	harness_run_job(&job, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}
END_TEST

static Suite *setup_suite(void)
{
	Suite *s = suite_create("verbs_setup");
	TCase *tq = tcase_create("qp");
	tcase_set_timeout(tq, 90);
	tcase_add_test(tq, test_qp_defaults);
	tcase_add_test(tq, test_qp_settings);
	tcase_add_test(tq, test_infiniband_lid);
	suite_add_tcase(s, tq);
	TCase *tn = tcase_create("choice");
	tcase_set_timeout(tn, 90);
	tcase_add_test(tn, test_double_not_asked);
	tcase_add_test(tn, test_library_absent);
	tcase_add_test(tn, test_real_library_no_device);
	tcase_add_test(tn, test_only_verbs_absent);
	tcase_add_test(tn, test_mixed);
	suite_add_tcase(s, tn);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(setup_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
