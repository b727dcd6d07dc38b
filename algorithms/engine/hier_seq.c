/* hier_seq.c — see hier_seq.h. */
#include "algorithms/engine/hier_seq.h"

#include "core/comm.h"
#include "core/p2p.h"

void weft_hier_seq_init(struct weft_hier_seq *hs, const struct weft_hier_seq_ops *ops,
			uint32_t nrecv, uint32_t nsend, uint32_t tag_base)
{
	hs->ops = ops;
	hs->nrecv = nrecv;
	hs->nsend = nsend;
	hs->tag_base = tag_base;
	hs->recv_posted = hs->recv_done = hs->send_posted = hs->send_done = 0;
}

/* Fill and post message @p m for item @p k; a zero-byte item is done at once. */
static weft_status_t post_item(struct weft_task *task, struct weft_hier_seq *hs, uint32_t k,
			       struct weft_msg *m, int *peer, bool send)
{
	struct weft_hier_item it = {.peer = -1, .tag_step = hs->tag_base + k};
	if (send)
		hs->ops->send_item(task, k, &it);
	else
		hs->ops->recv_item(task, k, &it);
	m->buf = it.buf;
	m->len = it.bytes;
	m->tag = weft_p2p_tag(task->seq, it.tag_step);
	m->reduce = it.reduce;
	m->local = it.local;
	m->unit = task->args.esize;
	*peer = it.peer;
	if (it.bytes == 0) {
		m->done = true;
		m->status = WEFT_SUCCESS;
		return WEFT_SUCCESS;
	}
	return send ? weft_p2p_isend(task->comm, it.peer, m)
		    : weft_p2p_irecv(task->comm, it.peer, m);
}

static bool send_ready(const struct weft_hier_seq *hs, const struct weft_task *task)
{
	return !hs->ops->send_ready || hs->ops->send_ready(task, hs->send_posted, hs->recv_done);
}

/* Reap finished messages in order; *moved if any. */
static weft_status_t reap(struct weft_hier_seq *hs, struct weft_task *task, bool *moved)
{
	while (hs->recv_done < hs->recv_posted) {
		struct weft_msg *m = &hs->recvs[hs->recv_done % WEFT_HIER_WINDOW];
		if (!m->done)
			break;
		if (m->status != WEFT_SUCCESS)
			return m->status;
		if (hs->ops->recv_done)
			hs->ops->recv_done(task, hs->recv_done);
		hs->recv_done++;
		*moved = true;
	}
	while (hs->send_done < hs->send_posted) {
		struct weft_msg *m = &hs->sends[hs->send_done % WEFT_HIER_WINDOW];
		if (!m->done)
			break;
		if (m->status != WEFT_SUCCESS)
			return m->status;
		hs->send_done++;
		*moved = true;
	}
	return WEFT_SUCCESS;
}

weft_status_t weft_hier_seq_progress(struct weft_hier_seq *hs, struct weft_task *task)
{
	weft_status_t st;
	bool moved;
	do {
		moved = false;
		if ((st = reap(hs, task, &moved)) != WEFT_SUCCESS)
			return st;
		while (hs->recv_posted < hs->nrecv &&
		       hs->recv_posted - hs->recv_done < WEFT_HIER_WINDOW) {
			uint32_t slot = hs->recv_posted % WEFT_HIER_WINDOW;
			st = post_item(task, hs, hs->recv_posted, &hs->recvs[slot],
				       &hs->recv_peer[slot], false);
			if (st != WEFT_SUCCESS)
				return st;
			hs->recv_posted++;
			moved = true;
		}
		while (hs->send_posted < hs->nsend &&
		       hs->send_posted - hs->send_done < WEFT_HIER_WINDOW && send_ready(hs, task)) {
			uint32_t slot = hs->send_posted % WEFT_HIER_WINDOW;
			st = post_item(task, hs, hs->send_posted, &hs->sends[slot],
				       &hs->send_peer[slot], true);
			if (st != WEFT_SUCCESS)
				return st;
			hs->send_posted++;
			moved = true;
		}
		if (moved)
			weft_task_touch(task);
	} while (moved);
	if (hs->recv_done == hs->nrecv && hs->send_done == hs->nsend)
		return WEFT_SUCCESS;
	if (hs->recv_done < hs->nrecv && hs->recv_done < hs->recv_posted)
		task->waiting_for = hs->recv_peer[hs->recv_done % WEFT_HIER_WINDOW];
	else if (hs->send_done < hs->send_posted)
		task->waiting_for = hs->send_peer[hs->send_done % WEFT_HIER_WINDOW];
	return WEFT_INPROGRESS;
}

static bool is_leader(const struct weft_topo_graph *g, int r)
{
	return g->host_leader[g->host_of[r]] == r;
}

void weft_hier_layout(const struct weft_comm *comm, struct weft_hier_layout *out)
{
	const struct weft_topo_graph *g = &comm->graph;
	int n = comm->nranks, me = comm->rank;
	int host = g->host_of[me], leader = g->host_leader[host];
	int lead_pos = 0;
	for (int p = 0; p < n; p++)
		if (comm->ring[p] == leader)
			lead_pos = p;

	/* The chain: this host's ranks in ring order, starting at its leader. */
	*out = (struct weft_hier_layout){.host = host, .chain_prev = -1, .chain_next = -1};
	int prev = -1;
	bool seen_me = false;
	for (int i = 0; i < n; i++) {
		int r = comm->ring[(lead_pos + i) % n];
		if (g->host_of[r] != host)
			continue;
		if (r == me) {
			out->chain_pos = out->local_n;
			out->chain_prev = prev;
			seen_me = true;
		} else if (seen_me && out->chain_next < 0) {
			out->chain_next = r;
		}
		prev = r;
		out->local_n++;
	}

	/* The leaders' ring, in ring order. */
	int first = -1, last = -1, before = -1;
	out->leader_next = -1;
	for (int p = 0; p < n; p++) {
		int r = comm->ring[p];
		if (!is_leader(g, r))
			continue;
		if (first < 0)
			first = r;
		if (r == leader) {
			out->leader_pos = out->nleaders;
			out->leader_prev = last; /* -1 if first: fixed below */
		} else if (before == leader) {
			out->leader_next = r;
		}
		before = r;
		last = r;
		out->nleaders++;
	}
	if (out->leader_prev < 0)
		out->leader_prev = last;
	if (out->leader_next < 0)
		out->leader_next = first;
}

int weft_hier_host_at(const struct weft_comm *comm, int pos)
{
	const struct weft_topo_graph *g = &comm->graph;
	for (int p = 0, i = 0; p < comm->nranks; p++) {
		int r = comm->ring[p];
		if (is_leader(g, r) && i++ == pos)
			return g->host_of[r];
	}
	return -1;
}

int weft_hier_max_local(const struct weft_comm *comm)
{
	int m = 1;
	for (int r = 0; r < comm->nranks; r++)
		if ((int)comm->cards[r].local_count > m)
			m = (int)comm->cards[r].local_count;
	return m;
}

bool weft_hier_pays(const struct weft_comm *comm)
{
	return comm->graph.nhosts > 1 && weft_hier_max_local(comm) > 1;
}
