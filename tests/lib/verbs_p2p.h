/*
 * verbs_p2p.h — for the verbs suites that drive the transport directly
 * (unit/transports/verbs.c, verbs_setup.c, ...): the job environment over
 * the test double with small slots, the connections, a progress loop of
 * the verbs transport alone, and the exchange of every size between every
 * pair (p2p_exchange.h).
 */
#ifndef WEFT_TEST_VERBS_P2P_H
#define WEFT_TEST_VERBS_P2P_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/p2p_msg.h"
#include "harness.h"
#include "p2p_exchange.h"
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
	return check_verbs_conns(comm) || p2p_exchange(comm, sizes, NSIZES, 1, WAIT_S);
}

#endif
