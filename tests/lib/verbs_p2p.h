/*
 * verbs_p2p.h — for the verbs suites that drive the transport directly
 * (unit/transports/verbs.c, verbs_setup.c): the job environment over the test
 * double with small slots, the connections, a progress loop, patterned
 * data, and the exchange of every size between every pair.
 */
#ifndef WEFT_TEST_VERBS_P2P_H
#define WEFT_TEST_VERBS_P2P_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/p2p_msg.h"
#include "harness.h"
#include "transports/verbs/verbs.h"
#include "verbs_env.h"

#define SLOT	      (16u << 10)
#define NSLOTS	      4
#define JOB_TIMEOUT_S 30.0
#define WAIT_S	      10.0

static const char *const small_slots[] = {"WEFT_IB_SLOTS=4", "WEFT_IB_SLOT_BYTES=16K", NULL};

static const char *const *env_with(const char *const *more)
{
	static const char *list[VERBS_ENV_MAX];
	size_t k = 0;
	for (size_t i = 0; small_slots[i]; i++)
		list[k++] = small_slots[i];
	for (size_t i = 0; more && more[i] && k < VERBS_ENV_MAX - 1; i++)
		list[k++] = more[i];
	list[k] = NULL;
	return verbs_env(list);
}

static inline struct weft_tp *verbs_of(weft_comm_t comm)
{
	for (size_t i = 0; i < comm->ntps; i++)
		if (comm->tps[i] && comm->tps[i]->ops == &weft_tp_verbs_ops)
			return comm->tps[i];
	return NULL;
}

static inline struct verbs_conn *conn_to(weft_comm_t comm, int peer)
{
	return weft_container_of(comm->peers[peer].conn, struct verbs_conn, base);
}

static inline int check_verbs_conns(weft_comm_t comm)
{
	for (int p = 0; p < comm->nranks; p++) {
		if (p == comm->rank)
			continue;
		struct weft_conn *c = comm->peers[p].conn;
		if (!c || c->ops != &weft_tp_verbs_ops)
			return harness_fail("peer %d is not on the verbs transport", p);
	}
	return 0;
}

/* Drive the verbs transport until every message is done or the time runs
 * out. Returns the first failed message's status, WEFT_ERR_TIMEOUT, or 0. */
static inline weft_status_t drive(weft_comm_t comm, struct weft_msg *const *msgs, int n,
				  double limit_s)
{
	struct weft_tp *tp = verbs_of(comm);
	double end = harness_now() + limit_s;
	for (;;) {
		tp->ops->msg.progress(tp);
		weft_p2p_progress(comm);
		int open = 0;
		for (int i = 0; i < n; i++) {
			if (!msgs[i]->done)
				open++;
			else if (msgs[i]->status != WEFT_SUCCESS)
				return msgs[i]->status;
		}
		if (!open)
			return WEFT_SUCCESS;
		if (harness_now() > end)
			return WEFT_ERR_TIMEOUT;
	}
}

/* A few bytes with every peer: a body that ends early on rank 0 calls
 * this first (the bootstrap root lives in rank 0's process). */
static inline int sync_peers(weft_comm_t comm)
{
	uint64_t out = 1, in[HARNESS_MAX_RANKS];
	struct weft_msg msgs[2 * HARNESS_MAX_RANKS];
	struct weft_msg *ptrs[2 * HARNESS_MAX_RANKS];
	int n = 0;
	for (int p = 0; p < comm->nranks; p++) {
		if (p == comm->rank)
			continue;
		msgs[n] = (struct weft_msg){.buf = &out, .len = sizeof(out), .tag = UINT32_MAX};
		msgs[n + 1] =
		    (struct weft_msg){.buf = &in[p], .len = sizeof(out), .tag = UINT32_MAX};
		if (weft_p2p_isend_msg(comm, p, &msgs[n]) != WEFT_SUCCESS ||
		    weft_p2p_irecv_msg(comm, p, &msgs[n + 1]) != WEFT_SUCCESS)
			return harness_fail("sync: post to %d failed", p);
		ptrs[n] = &msgs[n];
		ptrs[n + 1] = &msgs[n + 1];
		n += 2;
	}
	weft_status_t st = drive(comm, ptrs, n, WAIT_S);
	return st == WEFT_SUCCESS ? 0 : harness_fail_status(comm, st, "sync");
}

static inline unsigned char pattern(int from, int to, size_t i, unsigned salt)
{
	return (unsigned char)(from * 37 + to * 11 + salt * 101 + i * 7 + (i >> 9));
}

static inline void fill(unsigned char *buf, size_t len, int from, int to, unsigned salt)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(from, to, i, salt);
}

static inline int verify(const unsigned char *buf, size_t len, int from, int to, unsigned salt)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern(from, to, i, salt))
			return harness_fail(
			    "message %u from rank %d: byte %zu of %zu is %u, expected %u", salt,
			    from, i, len, buf[i], pattern(from, to, i, salt));
	return 0;
}

static inline void run_ok(int nranks, const char *const *env, harness_body_fn body, void *arg)
{
	struct harness_result res;
	harness_run(nranks, env, body, arg, JOB_TIMEOUT_S, &res);
	ck_assert_msg(res.ok, "%s", res.summary);
}

/* ---- every size between every pair ---- */

/* Around the protocol's boundaries: a slot's header takes 64 bytes, so
 * SLOT - 64 is the largest eager message and SLOT - 63 the smallest that
 * goes by rendezvous. */
static const size_t sizes[] = {0,	 1,    8,	 WEFT_SLOT_INLINE, SLOT - 64, SLOT - 63,
			       SLOT - 1, SLOT, SLOT + 1, 5 * SLOT + 7,	   2 * SLOT};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static inline int body_sizes(weft_comm_t comm, int rank, int nranks, void *arg)
{
	if (check_verbs_conns(comm))
		return 1;
	size_t total = 0;
	for (size_t k = 0; k < NSIZES; k++)
		total += sizes[k];
	int npeers = nranks - 1;
	unsigned char *sbuf = malloc(total * (size_t)npeers + 1);
	unsigned char *rbuf = malloc(total * (size_t)npeers + 1);
	struct weft_msg *msgs = calloc(2 * NSIZES * (size_t)npeers, sizeof(*msgs));
	struct weft_msg **ptrs = calloc(2 * NSIZES * (size_t)npeers, sizeof(*ptrs));
	if (!sbuf || !rbuf || !msgs || !ptrs)
		return harness_fail("out of memory");
	memset(rbuf, 0xee, total * (size_t)npeers);
	int n = 0;
	size_t off = 0;
	for (int p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		for (size_t k = 0; k < NSIZES; k++) {
			struct weft_msg *s = &msgs[n], *r = &msgs[n + 1];
			fill(sbuf + off, sizes[k], rank, p, (unsigned)k);
			uint64_t tag = weft_p2p_tag(1, (uint32_t)k);
			*s = (struct weft_msg){.buf = sbuf + off, .len = sizes[k], .tag = tag};
			*r = (struct weft_msg){.buf = rbuf + off, .len = sizes[k], .tag = tag};
			weft_status_t st = weft_p2p_isend_msg(comm, p, s);
			if (st == WEFT_SUCCESS)
				st = weft_p2p_irecv_msg(comm, p, r);
			if (st != WEFT_SUCCESS)
				return harness_fail_status(comm, st, "posting to %d", p);
			ptrs[n] = s;
			ptrs[n + 1] = r;
			n += 2;
			off += sizes[k];
		}
	}
	harness_progress("exchanging");
	weft_status_t st = drive(comm, ptrs, n, WAIT_S);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "exchange");
	off = 0;
	for (int p = 0; p < nranks; p++) {
		if (p == rank)
			continue;
		for (size_t k = 0; k < NSIZES; k++) {
			if (verify(rbuf + off, sizes[k], p, rank, (unsigned)k))
				return 1;
			off += sizes[k];
		}
	}
	free(sbuf);
	free(rbuf);
	free(msgs);
	free(ptrs);
	return 0;
}

#endif
