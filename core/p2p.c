/* p2p.c — route a message through its connection's gate to the transport
 * that serves its peer, connecting to the peer first when connections are
 * made on demand (WEFT_CONNECT=lazy, core/p2p.h). */
#include "core/p2p_msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"

#include "core/fail.h"
#include "core/tag.h"
#include "transports/common/tp_stubs.h"
#include "util/log.h"

static void reset(struct weft_msg *msg)
{
	weft_msg_start(msg);
	msg->p2p_next = NULL;
}

/* The connection to @p p came up: the gate (and its pacer) and the
 * statistics see it from now on, and the receives posted meanwhile go to
 * the transport in post order. */
static weft_status_t peer_up(struct weft_comm *comm, struct weft_peer *p, struct weft_conn *conn)
{
	struct weft_tp_props props;
	p->tp->ops->prop.props(p->tp, p->link.peer, &props);
	p->conn = conn;
	comm->nconnected++;
	struct weft_err err = {0};
	weft_status_t st = weft_gate_attach(&comm->gate, &p->link, conn, props.bandwidth_Bps, &err);
	if (st != WEFT_SUCCESS)
		weft_comm_fail(comm, st, "%s", err.msg);
	if (comm->connect_mode == WEFT_CONNECT_LAZY)
		weft_log(WEFT_LOG_INFO, WEFT_SUB_NET,
			 "connected to rank %d over %s in %.3f s (%d of %d peers)", p->link.peer,
			 p->tp->ops->name, weft_now() - p->connect_since, comm->nconnected,
			 comm->nranks - 1);
	while (p->held_recv_head) {
		struct weft_msg *msg = p->held_recv_head;
		p->held_recv_head = msg->p2p_next;
		msg->p2p_next = NULL;
		weft_status_t rst = st == WEFT_SUCCESS ? conn->ops->msg.irecv(conn, msg) : st;
		if (rst != WEFT_SUCCESS && !msg->done)
			weft_msg_complete(msg, rst);
		if (st == WEFT_SUCCESS)
			st = rst;
	}
	p->held_recv_tail = NULL;
	return st;
}

/* Move the connection to @p p along once (it never blocks): WEFT_SUCCESS
 * once it is up, WEFT_INPROGRESS, or the error that ends it (recorded on
 * the communicator, naming the peer). */
static weft_status_t connect_step(struct weft_comm *comm, struct weft_peer *p)
{
	if (p->conn)
		return WEFT_SUCCESS;
	double now = weft_now();
	if (p->connect_since == 0)
		p->connect_since = now;
	struct weft_conn *conn = NULL;
	weft_status_t st = p->tp->ops->conn.connect(p->tp, p->link.peer, &conn);
	if (st == WEFT_SUCCESS)
		return peer_up(comm, p, conn);
	if (st != WEFT_INPROGRESS)
		return st;
	/* At init (eager) the communicator bounds all connections at once. */
	if (comm->connect_mode != WEFT_CONNECT_LAZY || now - p->connect_since <= comm->timeout_s)
		return WEFT_INPROGRESS;
	int r = p->link.peer;
	return weft_comm_fail(comm, WEFT_ERR_TIMEOUT,
			      "connecting to rank %d (%s, over %s): not connected within %.1f s", r,
			      comm->cards[r].hostname, p->tp->ops->name, comm->timeout_s);
}

static void list_connecting(struct weft_comm *comm, struct weft_peer *p)
{
	if (p->connecting)
		return;
	p->connecting = true;
	p->next_connecting = comm->connecting;
	comm->connecting = p;
}

/* The peer a message goes to or comes from, its connection started if it
 * has none yet (lazily; in eager mode every peer is connected at init).
 * NULL with *st set on error; *st is WEFT_INPROGRESS while connecting. */
static struct weft_peer *peer_of(struct weft_comm *comm, int peer, weft_status_t *st)
{
	*st = WEFT_SUCCESS;
	if (peer < 0 || peer >= comm->nranks || peer == comm->rank) {
		*st = weft_comm_fail(comm, WEFT_ERR_INTERNAL, "p2p: bad peer %d", peer);
		return NULL;
	}
	struct weft_peer *p = &comm->peers[peer];
	if (p->conn)
		return p;
	if (comm->connect_mode != WEFT_CONNECT_LAZY || !p->tp) {
		*st =
		    weft_comm_fail(comm, WEFT_ERR_INTERNAL, "p2p: no connection to rank %d", peer);
		return NULL;
	}
	if (p->connecting) { /* progress drives it */
		*st = WEFT_INPROGRESS;
		return p;
	}
	*st = connect_step(comm, p);
	if (*st == WEFT_INPROGRESS)
		list_connecting(comm, p);
	return *st == WEFT_SUCCESS || *st == WEFT_INPROGRESS ? p : NULL;
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
	weft_counter_add(&link->sent_bytes, msg->len);
	weft_counter_add(&link->sent_msgs, 1);
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

weft_status_t weft_p2p_isend_msg(struct weft_comm *comm, int peer, struct weft_msg *msg)
{
	reset(msg);
	msg->reduce = NULL;
	msg->local = NULL;
	weft_status_t st;
	struct weft_peer *p = peer_of(comm, peer, &st);
	if (!p) {
		msg->on_done = NULL;
		weft_msg_complete(msg, st);
		return st;
	}
	msg->on_done = send_done;
	msg->p2p_link = &p->link;
	/* Behind held sends, or held (by the gate, or until the connection is
	 * up): either way in post order. */
	if (!p->conn || p->link.held_head || !weft_gate_admit(&comm->gate, &p->link, msg->len)) {
		hold(comm, &p->link, msg);
		return WEFT_SUCCESS;
	}
	return post_send(comm, p, msg);
}

weft_status_t weft_p2p_irecv_msg(struct weft_comm *comm, int peer, struct weft_msg *msg)
{
	reset(msg);
	msg->on_done = NULL;
	msg->p2p_link = NULL;
	weft_status_t st;
	struct weft_peer *p = peer_of(comm, peer, &st);
	if (!p) {
		weft_msg_complete(msg, st);
		return st;
	}
	if (!p->conn) {
		if (p->held_recv_tail)
			p->held_recv_tail->p2p_next = msg;
		else
			p->held_recv_head = msg;
		p->held_recv_tail = msg;
		return WEFT_SUCCESS;
	}
	return p->conn->ops->msg.irecv(p->conn, msg);
}

/* ---- requests: messages from the communicator's pool ---- */

struct weft_p2p_req {
	struct weft_msg msg;
	struct weft_p2p_req *next_free;
	struct weft_p2p_req *next_all; /* every request of the communicator, to free */
};

static struct weft_p2p_req *req_get(struct weft_comm *comm, const struct weft_p2p_post *post)
{
	struct weft_p2p_req *req = comm->free_reqs;
	if (req) {
		comm->free_reqs = req->next_free;
	} else {
		req = calloc(1, sizeof(*req));
		if (!req)
			return NULL;
		req->next_all = comm->all_reqs;
		comm->all_reqs = req;
	}
	req->msg = (struct weft_msg){
	    .buf = post->buf,
	    .len = post->len,
	    .tag = post->tag,
	    .reduce = post->reduce,
	    .local = post->local,
	    .unit = post->unit,
	    .stream = post->stream,
	};
	return req;
}

static weft_status_t post_req(struct weft_comm *comm, int peer, const struct weft_p2p_post *post,
			      bool send, struct weft_p2p_req **out)
{
	*out = NULL;
	struct weft_p2p_req *req = req_get(comm, post);
	if (!req)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY,
				      "p2p: no memory for a message to rank %d", peer);
	weft_wait_moved(comm); /* a rank about to sleep must look again */
	weft_status_t st = send ? weft_p2p_isend_msg(comm, peer, &req->msg)
				: weft_p2p_irecv_msg(comm, peer, &req->msg);
	if (st != WEFT_SUCCESS) /* completed with the error: nobody holds it */
		weft_p2p_release(comm, req);
	else
		*out = req;
	return st;
}

weft_status_t weft_p2p_isend(struct weft_comm *comm, int peer, const struct weft_p2p_post *post,
			     struct weft_p2p_req **req)
{
	return post_req(comm, peer, post, true, req);
}

weft_status_t weft_p2p_irecv(struct weft_comm *comm, int peer, const struct weft_p2p_post *post,
			     struct weft_p2p_req **req)
{
	return post_req(comm, peer, post, false, req);
}

bool weft_p2p_done(const struct weft_p2p_req *req, weft_status_t *status)
{
	*status = req->msg.status;
	return req->msg.done;
}

void weft_p2p_release(struct weft_comm *comm, struct weft_p2p_req *req)
{
	req->next_free = comm->free_reqs;
	comm->free_reqs = req;
}

void weft_p2p_free_pool(struct weft_comm *comm)
{
	while (comm->all_reqs) {
		struct weft_p2p_req *req = comm->all_reqs;
		comm->all_reqs = req->next_all;
		free(req);
	}
	comm->free_reqs = NULL;
}

/* Post what the link's gate admits now; true if it still holds some. */
static bool drain(struct weft_comm *comm, struct weft_p2p_link *link, weft_status_t *st)
{
	struct weft_peer *p = &comm->peers[link->peer];
	if (!p->conn) /* connecting: sent once it is up */
		return link->held_head != NULL;
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

static void fail_held_recvs(struct weft_peer *p, weft_status_t status)
{
	while (p->held_recv_head) {
		struct weft_msg *msg = p->held_recv_head;
		p->held_recv_head = msg->p2p_next;
		weft_msg_complete(msg, status);
	}
	p->held_recv_tail = NULL;
}

/* Drive the connections under way; a peer whose connection is up leaves
 * the list (its held sends then drain below). */
static weft_status_t progress_connecting(struct weft_comm *comm)
{
	weft_status_t ret = WEFT_SUCCESS;
	struct weft_peer **prev = &comm->connecting;
	while (*prev) {
		struct weft_peer *p = *prev;
		weft_status_t st = connect_step(comm, p);
		if (st == WEFT_INPROGRESS) {
			prev = &p->next_connecting;
			continue;
		}
		*prev = p->next_connecting;
		p->connecting = false;
		p->next_connecting = NULL;
		if (st != WEFT_SUCCESS)
			fail_held_recvs(p, st);
		if (st != WEFT_SUCCESS && ret == WEFT_SUCCESS)
			ret = st;
	}
	return ret;
}

weft_status_t weft_p2p_progress(struct weft_comm *comm)
{
	weft_status_t st = comm->connecting ? progress_connecting(comm) : WEFT_SUCCESS;
	if (st != WEFT_SUCCESS)
		return st;
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
	while (comm->connecting) {
		struct weft_peer *p = comm->connecting;
		comm->connecting = p->next_connecting;
		p->connecting = false;
		fail_held_recvs(p, status);
	}
}

weft_status_t weft_p2p_connect(struct weft_comm *comm, int peer)
{
	return connect_step(comm, &comm->peers[peer]);
}

int weft_p2p_connected_peers(const struct weft_comm *comm)
{
	return comm->nconnected;
}

void weft_p2p_connecting_note(const struct weft_comm *comm, char *buf, size_t len)
{
	buf[0] = '\0';
	int n = 0;
	const struct weft_peer *first = NULL;
	for (const struct weft_peer *p = comm->connecting; p; p = p->next_connecting) {
		n++;
		if (!first || p->connect_since < first->connect_since)
			first = p;
	}
	if (first)
		snprintf(buf, len, "; connecting to %d peer(s), rank %d (over %s) for %.1f s", n,
			 first->link.peer, first->tp->ops->name, weft_now() - first->connect_since);
}

/* Only at a timeout: a scan of every peer costs nothing then. */
static bool dark_paths(const struct weft_comm *comm, int peer, struct weft_tp_paths *out)
{
	struct weft_conn *conn = comm->peers[peer].conn;
	if (!conn || !conn->ops->prop.paths)
		return false;
	conn->ops->prop.paths(conn, out);
	return out->dark > 0;
}

void weft_p2p_dark_note(const struct weft_comm *comm, int peer, char *buf, size_t len)
{
	struct weft_tp_paths p;
	buf[0] = '\0';
	int who = peer >= 0 && peer < comm->nranks && dark_paths(comm, peer, &p) ? peer : -1;
	for (int r = 0; who < 0 && r < comm->nranks; r++)
		if (r != peer && dark_paths(comm, r, &p))
			who = r;
	if (who < 0)
		return;
	/* The first dark path as the transport words it ("A; B; ..."): the
	 * others only counted, so that the verdict after it fits. */
	int first = (int)strcspn(p.note, ";");
	if (p.dark > 1 && p.note[first])
		snprintf(buf, len, "; the paths to rank %d: %u dark (%.*s, and %u more)", who,
			 p.dark, first, p.note, p.dark - 1);
	else
		snprintf(buf, len, "; the paths to rank %d: %u dark (%s)", who, p.dark, p.note);
}

size_t weft_p2p_chunk_bytes(const struct weft_comm *comm, int peer)
{
	return comm->chunk_bytes;
}

bool weft_p2p_props(const struct weft_comm *comm, int peer, struct weft_tp_props *out)
{
	if (peer == comm->rank || !comm->peers[peer].tp)
		return false;
	struct weft_tp *tp = comm->peers[peer].tp;
	tp->ops->prop.props(tp, peer, out);
	return true;
}

/* ---- the transport's mem ops, through the peer ---- */

/* The peer whose transport's mem ops serve a call, connected if it can be
 * at once (shm's connections were all mapped at init: lazily, the first
 * reg or map connects). A transport without mem ops needs no connection
 * for them: the stubs answer "not supported". */
static struct weft_peer *mem_peer(struct weft_comm *comm, int peer)
{
	if (peer < 0 || peer >= comm->nranks || peer == comm->rank || !comm->peers[peer].tp)
		return NULL;
	struct weft_peer *p = &comm->peers[peer];
	if (p->conn || comm->connect_mode != WEFT_CONNECT_LAZY ||
	    p->tp->ops->mem.reg == weft_tp_no_reg)
		return p->conn ? p : NULL;
	weft_status_t st = connect_step(comm, p);
	if (st == WEFT_INPROGRESS)
		list_connecting(comm, p);
	return st == WEFT_SUCCESS ? p : NULL;
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

void weft_p2p_wake(struct weft_comm *comm, int peer)
{
	struct weft_peer *p = &comm->peers[peer];
	if (p->conn && comm->tp_peers[peer].sleeps)
		p->conn->ops->wait.wake(p->conn);
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
