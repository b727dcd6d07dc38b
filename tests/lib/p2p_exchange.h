/*
 * p2p_exchange.h — for the suites that drive the point-to-point layer at
 * the level of the transports' messages (core/p2p_msg.h): wait for a set
 * of messages, patterned bytes, and an exchange of messages of given sizes
 * with every peer. The transport contract itself is tested once, over
 * every transport, by tests/conformance/; these serve the suites of one
 * transport's own pieces (segments, handshakes, QPs, providers).
 */
#ifndef WEFT_TEST_P2P_EXCHANGE_H
#define WEFT_TEST_P2P_EXCHANGE_H

#include <stdbool.h>
#include <stdlib.h>

#include "core/comm.h"
#include "core/p2p_msg.h"
#include "core/progress.h"
#include "harness.h"

/* Progress the communicator until every message is done (WEFT_SUCCESS),
 * one has failed (its status), the communicator fails, or @p limit_s
 * passes (WEFT_ERR_TIMEOUT). */
static inline weft_status_t p2p_wait(weft_comm_t comm, struct weft_msg *const *msgs, int n,
				     double limit_s)
{
	double end = harness_now() + limit_s;
	for (;;) {
		bool all = true;
		for (int i = 0; i < n; i++) {
			if (msgs[i]->done && msgs[i]->status != WEFT_SUCCESS)
				return msgs[i]->status;
			all &= msgs[i]->done;
		}
		if (all)
			return WEFT_SUCCESS;
		weft_status_t st = weft_comm_progress(comm);
		if (st != WEFT_SUCCESS && st != WEFT_INPROGRESS)
			return st;
		if (harness_now() > end)
			return WEFT_ERR_TIMEOUT;
	}
}

/* Byte @p i of message @p salt from rank @p from to rank @p to. */
static inline unsigned char p2p_byte(int from, int to, size_t i, unsigned salt)
{
	return (unsigned char)(from * 37 + to * 11 + salt * 101 + i * 7 + (i >> 9));
}

static inline void p2p_fill(void *buf, size_t len, int from, int to, unsigned salt)
{
	for (size_t i = 0; i < len; i++)
		((unsigned char *)buf)[i] = p2p_byte(from, to, i, salt);
}

/* 0 if @p buf holds message @p salt, else 1 with the first wrong byte named. */
static inline int p2p_verify(const void *buf, size_t len, int from, int to, unsigned salt)
{
	const unsigned char *b = buf;
	for (size_t i = 0; i < len; i++)
		if (b[i] != p2p_byte(from, to, i, salt))
			return harness_fail(
			    "message %u from rank %d: byte %zu of %zu is %u, expected %u", salt,
			    from, i, len, b[i], p2p_byte(from, to, i, salt));
	return 0;
}

/* Message k of sizes[k] bytes to and from every peer (tags
 * weft_p2p_tag(@p seq, k)), all in flight at once, each received one
 * checked byte by byte and for a byte past its end. 0, or 1 (reported). */
static inline int p2p_exchange(weft_comm_t comm, const size_t *sizes, size_t n, uint32_t seq,
			       double limit_s)
{
	int rank = comm->rank, nranks = comm->nranks;
	if (nranks < 2 || n == 0)
		return 0;
	size_t nmsg = 2 * n * (size_t)(nranks - 1);
	struct weft_msg *m = calloc(nmsg, sizeof(*m));
	struct weft_msg **p = calloc(nmsg, sizeof(*p));
	if (!m || !p)
		return harness_fail("out of memory");
	size_t k = 0;
	for (int peer = 0; peer < nranks; peer++)
		for (size_t i = 0; peer != rank && i < n; i++, k += 2) {
			uint64_t tag = weft_p2p_tag(seq, (uint32_t)i);
			m[k] = (struct weft_msg){
			    .buf = malloc(sizes[i] + 1), .len = sizes[i], .tag = tag};
			m[k + 1] = (struct weft_msg){
			    .buf = malloc(sizes[i] + 1), .len = sizes[i], .tag = tag};
			if (!m[k].buf || !m[k + 1].buf)
				return harness_fail("out of memory");
			p2p_fill(m[k].buf, sizes[i], rank, peer, (unsigned)i);
			((unsigned char *)m[k + 1].buf)[sizes[i]] = 0xee;
			p[k] = &m[k];
			p[k + 1] = &m[k + 1];
			weft_status_t st = weft_p2p_isend_msg(comm, peer, &m[k]);
			if (st == WEFT_SUCCESS)
				st = weft_p2p_irecv_msg(comm, peer, &m[k + 1]);
			if (st != WEFT_SUCCESS)
				return harness_fail_status(comm, st, "posting to rank %d", peer);
		}
	harness_progress("exchanging %zu messages", nmsg);
	weft_status_t st = p2p_wait(comm, p, (int)nmsg, limit_s);
	if (st != WEFT_SUCCESS)
		return harness_fail_status(comm, st, "exchange of %zu messages", nmsg);
	int ret = 0;
	k = 0;
	for (int peer = 0; peer < nranks; peer++)
		for (size_t i = 0; peer != rank && i < n; i++, k += 2) {
			const unsigned char *b = m[k + 1].buf;
			if (!ret && p2p_verify(b, sizes[i], peer, rank, (unsigned)i))
				ret = 1;
			if (!ret && b[sizes[i]] != 0xee)
				ret = harness_fail("%zu bytes from rank %d: wrote past the end",
						   sizes[i], peer);
			free(m[k].buf);
			free(m[k + 1].buf);
		}
	free(m);
	free(p);
	return ret;
}

#endif
