/*
 * transport.h — the contract between the point-to-point layer and the
 * transports (shm, socket; later ofi, verbs).
 *
 * One ops table per transport, filled with designated initialisers, its
 * size first so it can grow. One weft_tp_comm per (transport, communicator),
 * one weft_conn per peer that the transport serves. Transports embed these
 * base structs first and get back to themselves with container_of.
 *
 * Contract:
 *  - comm_init is collective: every rank calls it for every enabled
 *    transport, in the same order, even if the transport will serve no peer
 *    of this rank; it may use weft_bootstrap_allgather() to exchange
 *    addresses. Nothing else in a transport may block.
 *  - connect returns WEFT_INPROGRESS until the connection to the peer is up,
 *    and is called again; it must not block.
 *  - isend/irecv queue a message and return at once. Per connection and
 *    direction, messages are matched in the order they were posted: the
 *    n-th send to a peer meets the peer's n-th receive from us. A tag and
 *    length travel with every message; the receiver checks both and fails
 *    with WEFT_ERR_REMOTE on a mismatch (it names both values, and what
 *    weft_p2p_explain() makes of the tags: tags carry the signature of the
 *    call, core/tag.h).
 *  - progress moves bytes for every connection of the transport and marks
 *    finished messages done. It never blocks.
 *  - A peer that dies or closes is detected by progress in bounded time and
 *    fails the pending messages with WEFT_ERR_REMOTE.
 *  - Errors from errno are turned into a status at this boundary and
 *    recorded once with weft_comm_fail() (strerror text included).
 */
#ifndef WEFT_TRANSPORT_H
#define WEFT_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "reduce/reduce.h"
#include "weft.h"

struct weft_comm;
struct weft_tp_comm;
struct weft_conn;

/*
 * One message, owned by the poster; the transport links it in its queues
 * until it is done. For a receive, the bytes go to buf (copied), or, when
 * reduce is set, are combined: buf[i] = reduce(local[i], incoming[i]).
 */
struct weft_msg {
	/* Set by the poster. */
	void *buf;
	size_t len;
	uint64_t tag;
	weft_reduce_fn reduce; /* receive only; NULL: plain copy */
	const void *local;     /* receive with reduce: the local operand, len bytes */
	size_t unit;	       /* element size: pieces handed to weft_msg_deliver are multiples */

	/* Set by the transport. */
	bool done;
	weft_status_t status;
	size_t xferred; /* bytes moved so far */
	struct weft_msg *next;
	uint64_t tp_priv[4]; /* transport's per-message scratch */
};

/* Hand received bytes [off, off + len) of msg to their destination. len must
 * be a multiple of msg->unit. */
static inline void weft_msg_deliver(struct weft_msg *msg, size_t off, const void *data, size_t len)
{
	char *dst = (char *)msg->buf + off;
	if (msg->reduce)
		msg->reduce(dst, (const char *)msg->local + off, data, len / msg->unit);
	else if (dst != data)
		memcpy(dst, data, len);
}

struct weft_tp_ops {
	size_t size; /* sizeof(struct weft_tp_ops) */
	const char *name;

	/* 0: cannot reach the peer; otherwise higher is preferred. Called after
	 * comm_init, with the peer's card in comm->cards. */
	int (*score)(struct weft_tp_comm *tc, int peer);

	weft_status_t (*comm_init)(struct weft_comm *comm, struct weft_tp_comm **out);
	void (*comm_fini)(struct weft_tp_comm *tc);

	weft_status_t (*connect)(struct weft_tp_comm *tc, int peer, struct weft_conn **out);
	weft_status_t (*isend)(struct weft_conn *conn, struct weft_msg *msg);
	weft_status_t (*irecv)(struct weft_conn *conn, struct weft_msg *msg);
	weft_status_t (*progress)(struct weft_tp_comm *tc);

	/* Close everything so that peers notice at once; messages still queued
	 * are failed with WEFT_ERR_ABORTED. The objects stay valid for comm_fini. */
	void (*abort)(struct weft_tp_comm *tc);
};

struct weft_tp_comm {
	const struct weft_tp_ops *ops;
	struct weft_comm *comm;
	size_t chunk_bytes; /* pipelining chunk this transport moves best */
};

struct weft_conn {
	const struct weft_tp_ops *ops;
	struct weft_tp_comm *tc;
	int peer;
};

#define weft_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

extern const struct weft_tp_ops weft_tp_shm_ops;
extern const struct weft_tp_ops weft_tp_socket_ops;

#endif
