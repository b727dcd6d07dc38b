/*
 * caps.c — the conformance cases about the op groups a transport may have
 * or not (transports/transport.h): what it says of itself (props,
 * describe), congestion signals and pacing, registration and mapping, RMA.
 * Where a transport has a group, it must work; where it points at the "not
 * supported" stubs (transports/common/tp_stubs.h), the stubs must answer as
 * the contract says, so that a missing group is checked, never skipped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "transports/common/tp_stubs.h"
#include "transports/transport.h"

/* Both ways at once: @p n messages of @p len bytes. */
static int exchange(weft_comm_t comm, int n, size_t len, unsigned salt)
{
	int peer = 1 - comm->rank;
	struct weft_msg s[8], r[8];
	struct weft_msg *ptrs[16];
	for (int i = 0; i < n && i < 8; i++) {
		uint64_t tag = weft_p2p_tag(20 + salt, (uint32_t)i);
		s[i] = (struct weft_msg){.buf = malloc(len), .len = len, .tag = tag};
		r[i] = (struct weft_msg){.buf = malloc(len), .len = len, .tag = tag};
		if (!s[i].buf || !r[i].buf)
			return harness_fail("out of memory");
		p2p_fill(s[i].buf, len, comm->rank, peer, salt + (unsigned)i);
		weft_status_t st = weft_p2p_isend_msg(comm, peer, &s[i]);
		if (st == WEFT_SUCCESS)
			st = weft_p2p_irecv_msg(comm, peer, &r[i]);
		if (st != WEFT_SUCCESS)
			return harness_fail_status(comm, st, "post %d", i);
		ptrs[2 * i] = &s[i];
		ptrs[2 * i + 1] = &r[i];
	}
	weft_status_t st = p2p_wait(comm, ptrs, 2 * n, CONF_WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "exchange %u", salt);
	int ret = 0;
	for (int i = 0; i < n; i++) {
		ret = ret ? ret : p2p_verify(r[i].buf, len, peer, comm->rank, salt + (unsigned)i);
		free(s[i].buf);
		free(r[i].buf);
	}
	return ret;
}

/* ---- what it says of itself, signals, pacing ---- */

static int check_props(struct weft_tp *tp, int peer)
{
	struct weft_tp_props p;
	memset(&p, 0, sizeof(p));
	tp->ops->prop.props(tp, peer, &p);
	if (!(p.latency_s > 0) || !(p.bandwidth_Bps > 0) || !p.source || !p.source[0])
		return harness_fail("props: latency %g s, bandwidth %g B/s, source \"%s\"",
				    p.latency_s, p.bandwidth_Bps, p.source ? p.source : "(null)");
	char line[256], small[8 + CONF_GUARD];
	line[0] = '\0';
	tp->ops->prop.describe(tp, peer, line, sizeof(line));
	if (!line[0] || !memchr(line, '\0', sizeof(line)))
		return harness_fail("describe: nothing, or no end");
	conf_guard_fill(small + 8);
	tp->ops->prop.describe(tp, peer, small, 8);
	if (!memchr(small, '\0', 8) || !conf_guard_ok(small + 8))
		return harness_fail("describe into 8 bytes wrote past them");
	return 0;
}

/* A transport with signals reports at least one sub-flow for a connection
 * that carried data, no more than asked for, no more marks than
 * deliveries, and deltas: what the first query took is not reported
 * again. The stub reports none. */
static int check_signals(struct weft_conn *conn, const char *name)
{
	struct weft_tp_signal sig[8], again[1];
	memset(sig, 0, sizeof(sig));
	int n = conn->ops->signal.signals(conn, sig, 8);
	if (conn->ops->signal.signals == weft_tp_no_signals)
		return n == 0 ? 0 : harness_fail("the signals stub reported %d sub-flows", n);
	if (n < 1 || n > 8)
		return harness_fail("%s: signals of %d sub-flows (asked for up to 8)", name, n);
	uint64_t moved = 0;
	for (int i = 0; i < n; i++) {
		moved += sig[i].bytes_acked + sig[i].delivered;
		if (sig[i].delivered_ce > sig[i].delivered)
			return harness_fail("sub-flow %d: %u marks of %u deliveries", i,
					    sig[i].delivered_ce, sig[i].delivered);
	}
	if (moved == 0)
		return harness_fail("%s: %d sub-flows, none carried anything", name, n);
	memset(again, 0, sizeof(again));
	if (conn->ops->signal.signals(conn, again, 1) != 1)
		return harness_fail("%s: signals ignored max = 1", name);
	uint64_t first = sig[0].bytes_acked + sig[0].delivered;
	uint64_t second = again[0].bytes_acked + again[0].delivered;
	if (first && second >= first)
		return harness_fail("%s: the second query reported %llu again (not a delta)", name,
				    (unsigned long long)second);
	return 0;
}

static int body_signals(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int peer = 1 - rank;
	struct weft_tp *tp = conf_tp(comm, peer);
	if (check_props(tp, peer) || exchange(comm, 4, 256 << 10, 0))
		return 1;
	struct weft_conn *conn = comm->peers[peer].conn;
	if (!conn || conn->ops != tp->ops)
		return harness_fail("the connection to %d is not %s's", peer, tp->ops->name);
	if (check_signals(conn, tp->ops->name))
		return 1;
	/* Paced (where the transport enforces a rate below Weft; the stub
	 * ignores it), then unlimited again: the bytes arrive the same. */
	conn->ops->signal.pace(conn, 50e6);
	if (exchange(comm, 2, 1 << 20, 1))
		return harness_fail("paced at 50 MB/s");
	conn->ops->signal.pace(conn, 0);
	return exchange(comm, 2, 1 << 20, 2);
}

START_TEST(signals)
{
	conf_run(2, body_signals, NULL, true);
}
END_TEST

/* ---- registration, mapping, RMA ---- */

/* The mem group: where it is a transport's own, a weft_mem_alloc buffer
 * registered here is read in place by the peer through map (or, where map
 * is the stub, the key is only offered); a reg that says "not supported"
 * must come from a transport whose properties say it needs no
 * registration; where reg is the stub, it answers WEFT_ERR_NOT_SUPPORTED
 * with no region. */
#define MEM_BYTES (64u << 10)

struct mem_offer {
	struct weft_mr_key key;
	uint64_t off; /* of the buffer inside the region the key names */
	uint64_t have;
};

static int offer_and_map(weft_comm_t comm, struct weft_tp *tp, struct weft_conn *conn)
{
	int rank = comm->rank, peer = 1 - rank;
	void *buf = NULL;
	struct weft_mr *mr = NULL;
	struct mem_offer mine = {0}, theirs = {0};
	weft_status_t st = weft_mem_alloc(comm, MEM_BYTES, &buf);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "weft_mem_alloc");
	p2p_fill(buf, MEM_BYTES, rank, peer, 30);
	st = tp->ops->mem.reg(tp, buf, MEM_BYTES, &mr, &mine.key);
	struct weft_tp_props props;
	tp->ops->prop.props(tp, peer, &props);
	if (st == WEFT_ERR_NOT_SUPPORTED && !mr && !props.needs_registration) {
		/* a transport that registers only where its provider needs it */
		weft_mem_free(comm, buf);
		return conf_sync(comm, 32);
	}
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "reg of a weft_mem_alloc buffer");
	mine.off = (uint64_t)((uintptr_t)buf - (uintptr_t)mine.key.addr);
	mine.have = 1;
	struct weft_msg s = {.buf = &mine, .len = sizeof(mine), .tag = 31};
	struct weft_msg r = {.buf = &theirs, .len = sizeof(theirs), .tag = 31};
	struct weft_msg *both[] = {&s, &r};
	st = weft_p2p_isend_msg(comm, peer, &s);
	if (st == WEFT_SUCCESS)
		st = weft_p2p_irecv_msg(comm, peer, &r);
	if (st == WEFT_SUCCESS)
		st = p2p_wait(comm, both, 2, CONF_WAIT_S);
	if (st != WEFT_SUCCESS || !theirs.have)
		return harness_fail_status(comm, st, "exchanging keys");
	void *addr = NULL;
	st = conn->ops->mem.map(conn, &theirs.key, &addr);
	if (conn->ops->mem.map == weft_tp_no_map) {
		if (st != WEFT_ERR_NOT_SUPPORTED || addr)
			return harness_fail("the map stub answered %d", st);
	} else if (st != WEFT_SUCCESS) {
		return harness_fail_status(comm, st, "map of the peer's region");
	} else {
		int bad = p2p_verify((char *)addr + theirs.off, MEM_BYTES, peer, rank, 30);
		conn->ops->mem.unmap(conn, addr, (size_t)theirs.key.len);
		if (bad)
			return harness_fail("the peer's region, mapped, holds other bytes");
	}
	if (conf_sync(comm, 32)) /* the peer is done with our region */
		return 1;
	tp->ops->mem.dereg(tp, mr);
	weft_mem_free(comm, buf);
	return 0;
}

static int check_mem(weft_comm_t comm, struct weft_tp *tp, struct weft_conn *conn)
{
	if (tp->ops->mem.reg != weft_tp_no_reg)
		return offer_and_map(comm, tp, conn);
	char buf[64];
	struct weft_mr *mr = (struct weft_mr *)buf;
	struct weft_mr_key key = {.addr = (uint64_t)(uintptr_t)buf, .len = sizeof(buf)};
	void *addr = buf;
	weft_status_t st = tp->ops->mem.reg(tp, buf, sizeof(buf), &mr, &key);
	if (st != WEFT_ERR_NOT_SUPPORTED || mr)
		return harness_fail("the reg stub answered %d", st);
	if (conn->ops->mem.map != weft_tp_no_map)
		return harness_fail("%s maps peers' regions but registers none", tp->ops->name);
	st = conn->ops->mem.map(conn, &key, &addr);
	if (st != WEFT_ERR_NOT_SUPPORTED || addr)
		return harness_fail("the map stub answered %d", st);
	return 0;
}

/* The rma group: the stubs complete the message with WEFT_ERR_NOT_SUPPORTED
 * and return it. No transport here has its own RMA ops yet (ofi's and
 * verbs' RMA run inside their message ops, transports/common/rma_proto.h):
 * the first that does must bring its round trip to this case. */
static int check_rma(struct weft_conn *conn)
{
	const struct weft_tp_rma_ops *rma = &conn->ops->rma;
	if (rma->write != weft_tp_no_write || rma->get != weft_tp_no_get)
		return harness_fail("%s has RMA ops: add their round trip to the conformance "
				    "rma case (tests/conformance/caps.c)",
				    conn->ops->name);
	char buf[8];
	struct weft_mr_key key = {0};
	struct weft_msg w = {.buf = buf, .len = sizeof(buf)}, g = w;
	weft_status_t st = rma->write(conn, &w, NULL, &key, 0, 0);
	if (st != WEFT_ERR_NOT_SUPPORTED || !w.done || w.status != WEFT_ERR_NOT_SUPPORTED)
		return harness_fail("the write stub answered %d (message %s, %d)", st,
				    w.done ? "done" : "pending", w.status);
	st = rma->get(conn, &g, NULL, &key, 0);
	if (st != WEFT_ERR_NOT_SUPPORTED || !g.done || g.status != WEFT_ERR_NOT_SUPPORTED)
		return harness_fail("the get stub answered %d (message %s, %d)", st,
				    g.done ? "done" : "pending", g.status);
	return 0;
}

static int body_rma(weft_comm_t comm, int rank, int nranks, void *arg)
{
	int peer = 1 - rank;
	if (conf_sync(comm, 1))
		return 1;
	struct weft_tp *tp = conf_tp(comm, peer);
	struct weft_conn *conn = comm->peers[peer].conn;
	if (!conn)
		return harness_fail("no connection to %d after a message", peer);
	return check_mem(comm, tp, conn) || check_rma(conn);
}

START_TEST(rma)
{
	conf_run(2, body_rma, NULL, true);
}
END_TEST

void conf_caps_cases(Suite *s)
{
	conf_add_case(s, "signals", signals, 1);
	conf_add_case(s, "rma", rma, 1);
}
