/* p2p.c — route a message through its connection's gate to the transport
 * that serves its peer. */
#include "core/p2p.h"

#include <stdio.h>

#include "core/tag.h"

static void reset(struct weft_msg *msg)
{
	msg->done = false;
	msg->status = WEFT_INPROGRESS;
	msg->p2p_next = NULL;
	if (msg->unit == 0)
		msg->unit = 1;
}

static struct weft_peer *peer_of(struct weft_comm *comm, int peer, struct weft_msg *msg)
{
	if (peer < 0 || peer >= comm->nranks || peer == comm->rank) {
		weft_comm_fail(comm, WEFT_ERR_INTERNAL, "p2p: bad peer %d", peer);
		return NULL;
	}
	struct weft_peer *p = &comm->peers[peer];
	if (!p->conn) {
		weft_comm_fail(comm, WEFT_ERR_INTERNAL, "p2p: no connection to rank %d", peer);
		return NULL;
	}
	return p;
}

/* The transport finished a send: it is no longer in flight. */
static void send_done(struct weft_msg *msg)
{
	struct weft_p2p_link *link = msg->p2p_link;
	link->inflight_bytes -= msg->len;
	link->inflight_msgs--;
}

static weft_status_t post_send(struct weft_comm *comm, struct weft_peer *p, struct weft_msg *msg)
{
	struct weft_p2p_link *link = &p->link;
	weft_gate_sent(&comm->gate, link, msg->len);
	link->inflight_bytes += msg->len;
	link->inflight_msgs++;
	link->sent_bytes += msg->len;
	link->sent_msgs++;
	return p->conn->ops->msg.isend(p->conn, msg);
}

static void hold(struct weft_comm *comm, struct weft_p2p_link *link, struct weft_msg *msg)
{
	if (link->held_tail)
		link->held_tail->p2p_next = msg;
	else
		link->held_head = msg;
	link->held_tail = msg;
	if (!link->listed) {
		link->listed = true;
		link->next_held = comm->held_links;
		comm->held_links = link;
	}
}

weft_status_t weft_p2p_isend(struct weft_comm *comm, int peer, struct weft_msg *msg)
{
	reset(msg);
	msg->reduce = NULL;
	msg->local = NULL;
	struct weft_peer *p = peer_of(comm, peer, msg);
	if (!p) {
		msg->on_done = NULL;
		weft_msg_complete(msg, WEFT_ERR_INTERNAL);
		return WEFT_ERR_INTERNAL;
	}
	msg->on_done = send_done;
	msg->p2p_link = &p->link;
	/* Behind held sends, or held: either way in post order. */
	if (p->link.held_head || !weft_gate_admit(&comm->gate, &p->link, msg->len)) {
		hold(comm, &p->link, msg);
		return WEFT_SUCCESS;
	}
	return post_send(comm, p, msg);
}

weft_status_t weft_p2p_irecv(struct weft_comm *comm, int peer, struct weft_msg *msg)
{
	reset(msg);
	msg->on_done = NULL;
	msg->p2p_link = NULL;
	struct weft_peer *p = peer_of(comm, peer, msg);
	if (!p) {
		weft_msg_complete(msg, WEFT_ERR_INTERNAL);
		return WEFT_ERR_INTERNAL;
	}
	return p->conn->ops->msg.irecv(p->conn, msg);
}

/* Post what the link's gate admits now; true if it still holds some. */
static bool drain(struct weft_comm *comm, struct weft_p2p_link *link, weft_status_t *st)
{
	struct weft_peer *p = &comm->peers[link->peer];
	while (link->held_head && *st == WEFT_SUCCESS &&
	       weft_gate_admit(&comm->gate, link, link->held_head->len)) {
		struct weft_msg *msg = link->held_head;
		link->held_head = msg->p2p_next;
		if (!link->held_head)
			link->held_tail = NULL;
		msg->p2p_next = NULL;
		*st = post_send(comm, p, msg);
	}
	return link->held_head != NULL;
}

weft_status_t weft_p2p_progress(struct weft_comm *comm)
{
	weft_status_t st = WEFT_SUCCESS;
	weft_gate_tick(&comm->gate);
	struct weft_p2p_link **prev = &comm->held_links;
	while (*prev) {
		struct weft_p2p_link *link = *prev;
		if (drain(comm, link, &st)) {
			prev = &link->next_held;
			continue;
		}
		*prev = link->next_held;
		link->listed = false;
		link->next_held = NULL;
	}
	return st;
}

void weft_p2p_abort(struct weft_comm *comm, weft_status_t status)
{
	while (comm->held_links) {
		struct weft_p2p_link *link = comm->held_links;
		comm->held_links = link->next_held;
		link->listed = false;
		while (link->held_head) {
			struct weft_msg *msg = link->held_head;
			link->held_head = msg->p2p_next;
			msg->on_done = NULL; /* never in flight */
			weft_msg_complete(msg, status);
		}
		link->held_tail = NULL;
	}
}

size_t weft_p2p_chunk_bytes(const struct weft_comm *comm, int peer)
{
	return comm->chunk_bytes;
}

/* ---- the transport's mem ops, through the peer ---- */

static struct weft_peer *mem_peer(struct weft_comm *comm, int peer)
{
	if (peer < 0 || peer >= comm->nranks || peer == comm->rank || !comm->peers[peer].conn)
		return NULL;
	return &comm->peers[peer];
}

weft_status_t weft_p2p_reg(struct weft_comm *comm, int peer, void *buf, size_t len,
			   struct weft_mr **mr, struct weft_mr_key *key)
{
	struct weft_peer *p = mem_peer(comm, peer);
	*mr = NULL;
	if (!p)
		return WEFT_ERR_NOT_SUPPORTED;
	return p->tp->ops->mem.reg(p->tp, buf, len, mr, key);
}

void weft_p2p_dereg(struct weft_comm *comm, int peer, struct weft_mr *mr)
{
	struct weft_peer *p = mem_peer(comm, peer);
	if (p)
		p->tp->ops->mem.dereg(p->tp, mr);
}

weft_status_t weft_p2p_map(struct weft_comm *comm, int peer, const struct weft_mr_key *key,
			   void **addr)
{
	struct weft_peer *p = mem_peer(comm, peer);
	*addr = NULL;
	if (!p)
		return WEFT_ERR_NOT_SUPPORTED;
	return p->conn->ops->mem.map(p->conn, key, addr);
}

void weft_p2p_unmap(struct weft_comm *comm, int peer, void *addr, size_t len)
{
	struct weft_peer *p = mem_peer(comm, peer);
	if (p && addr)
		p->conn->ops->mem.unmap(p->conn, addr, len);
}

void weft_p2p_explain(const struct weft_comm *comm, uint64_t sent, uint64_t want, int peer,
		      char *buf, size_t len)
{
	uint32_t s = (uint32_t)(sent >> 32), w = (uint32_t)(want >> 32);
	uint32_t n = weft_tag_number(s);
	uint64_t mine = comm->recent_calls[n % WEFT_RECENT_CALLS];
	bool earlier = !((s | w) & WEFT_TAG_P2P) && n != weft_tag_number(w) && (mine >> 32) &&
		       weft_tag_number((uint32_t)mine) == n;
	if (!earlier) {
		weft_tag_explain(s, w, peer, buf, len);
		return;
	}
	/* E.g. a broadcast whose ranks disagree on the root: nobody may have
	 * received anything in it, and its messages meet the next call. */
	char why[256];
	weft_tag_explain(s, (uint32_t)mine, peer, why, sizeof(why));
	if (why[0])
		snprintf(buf, len, "rank %d's call %u arrived during call %u here; in call %u, %s",
			 peer, n, weft_tag_number(w), n, why);
	else
		snprintf(buf, len,
			 "rank %d sent more in call %u (%s) than this rank received (it is at call "
			 "%u now)",
			 peer, n, weft_tag_call(s), weft_tag_number(w));
}
