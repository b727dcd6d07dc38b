/*
 * hier_seq.h — the engine and the layout under the hierarchical algorithms.
 *
 * A stage of a hierarchical collective is, on each rank, an ordered list of
 * receives and an ordered list of sends; send k may depend on some receive
 * having arrived (a chain forwards chunk c once it has it; a ring forwards
 * the block it received one step earlier). The algorithm describes item k of
 * each list (peer, bytes, reduce or not) and when send k is ready; the
 * engine keeps up to WEFT_HIER_WINDOW messages in flight each way, posts in
 * list order (which is the order the peer posts the matching items), reaps
 * in order, and tags item k with weft_p2p_tag(seq, tag_base + k) unless the
 * item says otherwise. This is the
 * ring pipeline generalised to a peer per item and a readiness rule, which a
 * chain inside a host, a star into the host leader and a ring among leaders
 * all need. Zero-byte items are skipped by both sides.
 *
 * The layout: every rank's host, its place in the host's chain (the host's
 * ranks in placement-ring order, starting at the host leader, which heads
 * it), and the host leaders' ring (leaders in placement-ring order, which
 * visits the hosts of a leaf together, so the ring crosses the spine once
 * per leaf).
 */
#ifndef WEFT_HIER_SEQ_H
#define WEFT_HIER_SEQ_H

#include <stdbool.h>
#include <stdint.h>

#include "core/task.h"
#include "transports/transport.h"

#define WEFT_HIER_WINDOW 8

struct weft_hier_item {
	int peer;
	char *buf;	       /* send: source; receive: destination */
	size_t bytes;	       /* 0: nothing to move (both sides agree) */
	weft_reduce_fn reduce; /* receive only */
	const char *local;     /* receive with reduce: local operand */
	uint32_t tag_step;     /* preset to tag_base + k; a star, whose items come
				* from several peers, sets its own */
};

struct weft_hier_seq_ops {
	/* Item k of each list; called once per k, in increasing k. */
	void (*recv_item)(struct weft_task *task, uint32_t k, struct weft_hier_item *out);
	void (*send_item)(struct weft_task *task, uint32_t k, struct weft_hier_item *out);
	/* May send k be posted, @p recv_done receives having arrived? NULL: always. */
	bool (*send_ready)(const struct weft_task *task, uint32_t k, uint32_t recv_done);
	/* Receive k has arrived; may be NULL. */
	void (*recv_done)(struct weft_task *task, uint32_t k);
};

struct weft_hier_seq {
	const struct weft_hier_seq_ops *ops;
	uint32_t nrecv, nsend, tag_base;
	uint32_t recv_posted, recv_done, send_posted, send_done;
	int recv_peer[WEFT_HIER_WINDOW], send_peer[WEFT_HIER_WINDOW];
	struct weft_msg recvs[WEFT_HIER_WINDOW];
	struct weft_msg sends[WEFT_HIER_WINDOW];
};

void weft_hier_seq_init(struct weft_hier_seq *hs, const struct weft_hier_seq_ops *ops,
			uint32_t nrecv, uint32_t nsend, uint32_t tag_base);

/* Post what can be posted, reap what finished. WEFT_SUCCESS when both lists
 * are done; WEFT_INPROGRESS (task->waiting_for set); or a message's error. */
weft_status_t weft_hier_seq_progress(struct weft_hier_seq *hs, struct weft_task *task);

struct weft_hier_layout {
	int host;		      /* this rank's host index */
	int local_n;		      /* ranks on this host */
	int chain_pos;		      /* 0 for the host leader */
	int chain_prev;		      /* rank at chain_pos - 1, -1 for the leader */
	int chain_next;		      /* rank at chain_pos + 1, -1 for the last */
	int nleaders;		      /* hosts */
	int leader_pos;		      /* this host's place in the leaders' ring */
	int leader_prev, leader_next; /* neighbouring leaders' ranks (self if one host) */
};

/* This rank's layout, from comm->graph and comm->ring (O(nranks)). */
void weft_hier_layout(const struct weft_comm *comm, struct weft_hier_layout *out);

/* Host of the leader at @p pos of the leaders' ring (O(nranks)). */
int weft_hier_host_at(const struct weft_comm *comm, int pos);

/* Ranks on the most populated host. */
int weft_hier_max_local(const struct weft_comm *comm);

/* A hierarchy has something to gain: several hosts, one of them with
 * several ranks. (It runs correctly either way when forced.) */
bool weft_hier_pays(const struct weft_comm *comm);

#endif
