/* tree_pipeline.c — see tree_pipeline.h. */
#include "algorithms/engine/tree_pipeline.h"

#include "core/comm.h"
#include "core/p2p.h"
#include "algorithms/patterns/tree.h"

_Static_assert(WEFT_TP_MAX_CHILDREN == WEFT_TREE_MAX_CHILDREN, "tree shapes");

enum tp_kind {
	TP_UP_RECV = 0, /* from a child, reduced into the accumulator */
	TP_UP_SEND,	/* the accumulator (or own data at a leaf) to the parent */
	TP_DOWN_RECV,	/* the result from the parent */
	TP_DOWN_SEND,	/* the result to a child */
};

/* --- Shapes ------------------------------------------------------------- */

/* The arithmetic is in patterns/tree.h; these adapt it to one signature. */
void weft_tp_btree(int n, int v, int *parent, int child[WEFT_TP_MAX_CHILDREN])
{
	*parent = -1;
	child[0] = child[1] = -1;
	if (n > 1)
		weft_btree(v, n, parent, child);
}

void weft_tp_dbtree0(int n, int v, int *parent, int child[WEFT_TP_MAX_CHILDREN])
{
	weft_dbtree(v, 0, n, parent, child);
}

void weft_tp_dbtree1(int n, int v, int *parent, int child[WEFT_TP_MAX_CHILDREN])
{
	weft_dbtree(v, 1, n, parent, child);
}

void weft_tp_chain(int n, int v, int *parent, int child[WEFT_TP_MAX_CHILDREN])
{
	*parent = v > 0 ? v - 1 : -1;
	child[0] = v + 1 < n ? v + 1 : -1;
	child[1] = -1;
}

int weft_tp_btree_depth(int n)
{
	int d = 0;
	while ((1 << d) < n)
		d++;
	return d;
}

void weft_tp_tree_place(struct weft_tp_tree *t, const struct weft_comm *comm,
			weft_tp_shape_fn shape, int root_rank)
{
	int n = comm->nranks, rootpos = 0;
	for (int p = 0; p < n; p++)
		if (comm->ring[p] == root_rank)
			rootpos = p;
	int v = (comm->ring_pos - rootpos + n) % n, parent, child[WEFT_TP_MAX_CHILDREN];
	shape(n, v, &parent, child);
	t->parent = parent < 0 ? -1 : comm->ring[(parent + rootpos) % n];
	t->nchildren = 0;
	for (int c = 0; c < WEFT_TP_MAX_CHILDREN; c++)
		if (child[c] >= 0)
			t->child[t->nchildren++] = comm->ring[(child[c] + rootpos) % n];
}

/* --- Setup ---------------------------------------------------------------- */

static void add_stream(struct weft_tree_pipeline *tp, int peer, bool send, enum tp_kind kind,
		       int tree, int child)
{
	struct weft_tp_link *l = NULL;
	for (int i = 0; i < tp->nlinks; i++)
		if (tp->link[i].peer == peer && tp->link[i].send == send)
			l = &tp->link[i];
	if (!l) {
		l = &tp->link[tp->nlinks++];
		*l = (struct weft_tp_link){.peer = peer, .send = send};
	}
	l->s[l->nstreams++] = (struct weft_tp_stream){
	    .kind = (uint8_t)kind, .tree = (uint8_t)tree, .child = (uint8_t)child};
}

void weft_tree_pipeline_init(struct weft_tree_pipeline *tp, const struct weft_task *task,
			     const struct weft_tp_config *cfg)
{
	*tp = (struct weft_tree_pipeline){.cfg = *cfg};
	int n = task->comm->nranks;
	tp->reduce = weft_reduce_kernel(task->args.dtype, task->args.op);
	tp->lag = cfg->up && cfg->down ? 2u * (uint32_t)weft_tp_btree_depth(n) + 2 : 0;
	if (tp->cfg.chunk_elems == 0)
		tp->cfg.chunk_elems = 1;
	/* Keys (4 (j + lag) + 3) must fit the 32-bit step of the tag. */
	for (;;) {
		size_t most = 0;
		for (int t = 0; t < cfg->ntrees; t++) {
			size_t ce = tp->cfg.chunk_elems;
			size_t nc = (cfg->tree[t].elems + ce - 1) / ce;
			tp->nchunks[t] = (uint32_t)nc;
			if (nc > most)
				most = nc;
		}
		if (most + tp->lag < (UINT32_MAX >> 3))
			break;
		tp->cfg.chunk_elems *= 2;
	}
	for (int t = 0; t < cfg->ntrees; t++) {
		const struct weft_tp_tree *tr = &cfg->tree[t];
		if (tp->nchunks[t] == 0)
			continue;
		if (cfg->up) {
			for (int c = 0; c < tr->nchildren; c++)
				add_stream(tp, tr->child[c], false, TP_UP_RECV, t, c);
			if (tr->parent >= 0)
				add_stream(tp, tr->parent, true, TP_UP_SEND, t, 0);
		}
		if (cfg->down) {
			if (tr->parent >= 0)
				add_stream(tp, tr->parent, false, TP_DOWN_RECV, t, 0);
			for (int c = 0; c < tr->nchildren; c++)
				add_stream(tp, tr->child[c], true, TP_DOWN_SEND, t, c);
		}
	}
	uint32_t w = tp->nlinks ? cfg->pool_cap / (uint32_t)tp->nlinks : 0;
	if (w > WEFT_TP_MAX_WINDOW)
		w = WEFT_TP_MAX_WINDOW;
	for (int i = 0; i < tp->nlinks; i++) {
		tp->link[i].first = (uint16_t)(i * (int)w);
		tp->link[i].window = (uint16_t)w;
	}
}

/* --- Progress ------------------------------------------------------------- */

static uint32_t key(const struct weft_tree_pipeline *tp, const struct weft_tp_stream *s, uint32_t j)
{
	if (s->kind == TP_UP_RECV || s->kind == TP_UP_SEND)
		return 4 * j + 2 * s->tree;
	return 4 * (j + tp->lag) + 2 * s->tree + 1;
}

/* The link's stream whose next message has the smallest key; -1 if none left. */
static int next_stream(const struct weft_tree_pipeline *tp, const struct weft_tp_link *l)
{
	int best = -1;
	for (int i = 0; i < l->nstreams; i++) {
		const struct weft_tp_stream *s = &l->s[i];
		if (s->posted >= tp->nchunks[s->tree])
			continue;
		if (best < 0 || key(tp, s, s->posted) < key(tp, &l->s[best], l->s[best].posted))
			best = i;
	}
	return best;
}

struct span {
	size_t off, len; /* bytes in the vector */
	char *acc;	 /* where this chunk's partial sum lives */
};

static struct span chunk_span(const struct weft_tree_pipeline *tp, const struct weft_task *task,
			      int t, uint32_t j)
{
	const struct weft_tp_tree *tr = &tp->cfg.tree[t];
	size_t ce = tp->cfg.chunk_elems, esize = task->args.esize;
	size_t first = (size_t)j * ce;
	size_t elems = tr->elems - first < ce ? tr->elems - first : ce;
	struct span sp = {.off = (tr->elem_off + first) * esize, .len = elems * esize};
	if (tp->cfg.staging && tr->parent >= 0)
		sp.acc = tp->cfg.staging + (size_t)(j % tp->cfg.nslots) * ce * esize;
	else
		sp.acc = (char *)task->args.recvbuf + sp.off;
	return sp;
}

/* Fill @p m for chunk @p j of stream @p s if its data (or its destination)
 * is ready; false if it must wait. */
static bool prepare(const struct weft_tree_pipeline *tp, const struct weft_task *task,
		    const struct weft_tp_stream *s, uint32_t j, struct weft_msg *m)
{
	int t = s->tree;
	const struct weft_tp_tree *tr = &tp->cfg.tree[t];
	const struct weft_coll_args *a = &task->args;
	struct span sp = chunk_span(tp, task, t, j);
	bool root = tr->parent < 0;
	int last = tr->nchildren - 1;
	m->len = sp.len;
	m->reduce = NULL;
	m->local = NULL;
	switch ((enum tp_kind)s->kind) {
	case TP_UP_RECV:
		if (s->child == 0) {
			/* A staging slot is free once its previous chunk went up. */
			if (tp->cfg.staging && !root && j >= tp->up_send_done[t] + tp->cfg.nslots)
				return false;
			m->local = (const char *)a->sendbuf + sp.off;
		} else {
			/* Fixed reduction order: child c after child c-1. */
			if (tp->up_recv_done[t][s->child - 1] <= j)
				return false;
			m->local = sp.acc;
		}
		m->buf = sp.acc;
		m->reduce = tp->reduce;
		return true;
	case TP_UP_SEND:
		if (last >= 0 && tp->up_recv_done[t][last] <= j)
			return false;
		m->buf = last >= 0 ? sp.acc : (char *)a->sendbuf + sp.off;
		return true;
	case TP_DOWN_RECV:
		/* Safe to post at once: the parent sends chunk j only after our
		 * own up send of it has arrived there. */
		m->buf = (char *)a->recvbuf + sp.off;
		return true;
	case TP_DOWN_SEND:
		if (!root) {
			if (tp->down_recv_done[t] <= j)
				return false;
			m->buf = (char *)a->recvbuf + sp.off;
		} else if (tp->cfg.up) {
			if (tp->up_recv_done[t][last] <= j)
				return false;
			m->buf = (char *)a->recvbuf + sp.off;
		} else {
			m->buf = (char *)a->sendbuf + sp.off;
		}
		return true;
	}
	return false;
}

static void on_done(struct weft_tree_pipeline *tp, const struct weft_task *task,
		    struct weft_tp_stream *s)
{
	int t = s->tree;
	const struct weft_tp_tree *tr = &tp->cfg.tree[t];
	uint32_t j = s->done++;
	switch ((enum tp_kind)s->kind) {
	case TP_UP_RECV:
		tp->up_recv_done[t][s->child] = s->done;
		/* WEFT_AVG: the root divides each finished chunk once. */
		if (tr->parent < 0 && s->child == tr->nchildren - 1 && task->args.op == WEFT_AVG) {
			struct span sp = chunk_span(tp, task, t, j);
			weft_reduce_scale(sp.acc, sp.len / task->args.esize, task->args.dtype,
					  task->comm->nranks);
		}
		break;
	case TP_UP_SEND: tp->up_send_done[t] = s->done; break;
	case TP_DOWN_RECV: tp->down_recv_done[t] = s->done; break;
	case TP_DOWN_SEND: break;
	}
}

static weft_status_t link_progress(struct weft_tree_pipeline *tp, struct weft_task *task,
				   struct weft_tp_link *l, bool *moved)
{
	struct weft_msg *pool = tp->cfg.pool + l->first;
	while (l->reaped < l->posted) {
		uint32_t slot = l->reaped % l->window;
		if (!pool[slot].done)
			break;
		if (pool[slot].status != WEFT_SUCCESS)
			return pool[slot].status;
		on_done(tp, task, &l->s[l->slot_stream[slot]]);
		l->reaped++;
		*moved = true;
	}
	while (l->posted - l->reaped < l->window) {
		int si = next_stream(tp, l);
		if (si < 0)
			break;
		struct weft_tp_stream *s = &l->s[si];
		uint32_t slot = l->posted % l->window;
		struct weft_msg *m = &pool[slot];
		if (!prepare(tp, task, s, s->posted, m))
			break;
		m->tag = weft_p2p_tag(task->seq, key(tp, s, s->posted));
		m->unit = task->args.esize;
		l->slot_stream[slot] = (uint8_t)si;
		weft_status_t st = l->send ? weft_p2p_isend(task->comm, l->peer, m)
					   : weft_p2p_irecv(task->comm, l->peer, m);
		if (st != WEFT_SUCCESS)
			return st;
		s->posted++;
		l->posted++;
		*moved = true;
	}
	return WEFT_SUCCESS;
}

static bool link_finished(const struct weft_tree_pipeline *tp, const struct weft_tp_link *l)
{
	for (int i = 0; i < l->nstreams; i++)
		if (l->s[i].done < tp->nchunks[l->s[i].tree])
			return false;
	return true;
}

weft_status_t weft_tree_pipeline_progress(struct weft_tree_pipeline *tp, struct weft_task *task)
{
	bool moved;
	do {
		moved = false;
		for (int i = 0; i < tp->nlinks; i++) {
			weft_status_t st = link_progress(tp, task, &tp->link[i], &moved);
			if (st != WEFT_SUCCESS)
				return st;
		}
		if (moved)
			weft_task_touch(task);
	} while (moved);
	int waiting = -1;
	for (int i = 0; i < tp->nlinks; i++) {
		const struct weft_tp_link *l = &tp->link[i];
		if (!link_finished(tp, l) && (waiting < 0 || !l->send))
			waiting = i;
	}
	if (waiting < 0)
		return WEFT_SUCCESS;
	task->waiting_for = tp->link[waiting].peer;
	return WEFT_INPROGRESS;
}
