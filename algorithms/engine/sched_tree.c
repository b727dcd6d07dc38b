/* sched_tree.c — see sched_tree.h. */
#include "algorithms/engine/sched_tree.h"

#include "core/comm.h"

_Static_assert(offsetof(struct weft_tree_task, eng) == 0, "the engine must be the first member");

enum tree_kind {
	TREE_UP_RECV = 0, /* from a child, reduced into the accumulator */
	TREE_UP_SEND,	  /* the accumulator (or own data at a leaf) to the parent */
	TREE_DOWN_RECV,	  /* the result from the parent */
	TREE_DOWN_SEND,	  /* the result to a child */
};

static struct weft_tree_sched *sched_of(const struct weft_task *task)
{
	return &((struct weft_tree_task *)(void *)task->priv)->sched;
}

static uint32_t key(const struct weft_tree_sched *ts, const struct weft_tree_stream *s, uint32_t j)
{
	if (s->kind == TREE_UP_RECV || s->kind == TREE_UP_SEND)
		return 4 * j + 2 * s->tree;
	return 4 * (j + ts->lag) + 2 * s->tree + 1;
}

/* The link's stream whose next message has the smallest key; -1 if none left. */
static int next_stream(const struct weft_tree_sched *ts, const struct weft_tree_link *l)
{
	int best = -1;
	for (int i = 0; i < l->nstreams; i++) {
		const struct weft_tree_stream *s = &l->s[i];
		if (s->posted >= ts->nchunks[s->tree])
			continue;
		if (best < 0 || key(ts, s, s->posted) < key(ts, &l->s[best], l->s[best].posted))
			best = i;
	}
	return best;
}

struct span {
	size_t off, len; /* bytes in the vector */
	char *acc;	 /* where this chunk's partial sum lives */
};

static struct span chunk_span(const struct weft_tree_sched *ts, const struct weft_task *task, int t,
			      uint32_t j)
{
	const struct weft_tree_part *tr = &ts->cfg.tree[t];
	size_t ce = ts->chunk_elems, esize = task->args.esize;
	size_t first = (size_t)j * ce;
	size_t elems = tr->elems - first < ce ? tr->elems - first : ce;
	struct span sp = {.off = (tr->elem_off + first) * esize, .len = elems * esize};
	if (ts->cfg.staging && tr->node.parent >= 0)
		sp.acc = ts->cfg.staging + (size_t)(j % ts->cfg.nslots) * ce * esize;
	else
		sp.acc = (char *)task->args.recvbuf + sp.off;
	return sp;
}

/* Describe chunk @p j of stream @p s in @p x if its data (or its
 * destination) is ready; false if it must wait. Changes nothing else, so
 * readiness checks may call it as often as they like. */
static bool prepare(const struct weft_tree_sched *ts, const struct weft_task *task,
		    const struct weft_tree_stream *s, uint32_t j, struct weft_xfer *x)
{
	int t = s->tree;
	const struct weft_tree_node *nd = &ts->cfg.tree[t].node;
	const struct weft_coll_args *a = &task->args;
	struct span sp = chunk_span(ts, task, t, j);
	bool root = nd->parent < 0;
	int last = nd->nchildren - 1;
	x->bytes = sp.len;
	x->reduce = NULL;
	x->local = NULL;
	x->stream = false;
	switch ((enum tree_kind)s->kind) {
	case TREE_UP_RECV:
		if (s->child == 0) {
			/* A staging slot is free once its previous chunk went up. */
			if (ts->cfg.staging && !root && j >= ts->up_send_done[t] + ts->cfg.nslots)
				return false;
			x->local = (const char *)a->sendbuf + sp.off;
		} else {
			/* Fixed reduction order: child c after child c-1. */
			if (ts->up_recv_done[t][s->child - 1] <= j)
				return false;
			x->local = sp.acc;
		}
		x->buf = sp.acc;
		x->reduce = ts->reduce;
		return true;
	case TREE_UP_SEND:
		if (last >= 0 && ts->up_recv_done[t][last] <= j)
			return false;
		x->buf = last >= 0 ? sp.acc : (char *)a->sendbuf + sp.off;
		return true;
	case TREE_DOWN_RECV:
		/* Safe to post at once: the parent sends chunk j only after our
		 * own up send of it has arrived there. A leaf sends nothing on:
		 * a large output skips the write-allocate read. */
		x->buf = (char *)a->recvbuf + sp.off;
		x->stream = last < 0 && weft_engine_stream(task, a->count * a->esize);
		return true;
	case TREE_DOWN_SEND:
		if (!root) {
			if (ts->down_recv_done[t] <= j)
				return false;
			x->buf = (char *)a->recvbuf + sp.off;
		} else if (ts->cfg.up) {
			if (ts->up_recv_done[t][last] <= j)
				return false;
			x->buf = (char *)a->recvbuf + sp.off;
		} else {
			x->buf = (char *)a->sendbuf + sp.off;
		}
		return true;
	}
	return false;
}

static bool link_ready(const struct weft_task *task, int q, uint32_t k)
{
	const struct weft_tree_sched *ts = sched_of(task);
	const struct weft_tree_link *l = &ts->link[q];
	int si = next_stream(ts, l);
	struct weft_xfer scratch;
	return si >= 0 && prepare(ts, task, &l->s[si], l->s[si].posted, &scratch);
}

static void link_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *x)
{
	struct weft_tree_sched *ts = sched_of(task);
	struct weft_tree_link *l = &ts->link[q];
	int si = next_stream(ts, l);
	struct weft_tree_stream *s = &l->s[si];
	prepare(ts, task, s, s->posted, x);
	x->step = key(ts, s, s->posted);
	l->slot_stream[k % WEFT_ENGINE_WINDOW] = (uint8_t)si;
	s->posted++;
}

static void link_done(struct weft_task *task, int q, uint32_t k)
{
	struct weft_tree_sched *ts = sched_of(task);
	struct weft_tree_stream *s =
	    &ts->link[q].s[ts->link[q].slot_stream[k % WEFT_ENGINE_WINDOW]];
	int t = s->tree;
	const struct weft_tree_node *nd = &ts->cfg.tree[t].node;
	uint32_t j = s->done++;
	switch ((enum tree_kind)s->kind) {
	case TREE_UP_RECV:
		ts->up_recv_done[t][s->child] = s->done;
		/* WEFT_AVG: the root divides each finished chunk once. */
		if (nd->parent < 0 && s->child == nd->nchildren - 1 && task->args.op == WEFT_AVG) {
			struct span sp = chunk_span(ts, task, t, j);
			weft_reduce_scale(sp.acc, sp.len / task->args.esize, task->args.dtype,
					  task->comm->nranks);
		}
		break;
	case TREE_UP_SEND: ts->up_send_done[t] = s->done; break;
	case TREE_DOWN_RECV: ts->down_recv_done[t] = s->done; break;
	case TREE_DOWN_SEND: break;
	}
}

static const struct weft_queue_ops link_ops = {
    .item = link_item,
    .ready = link_ready,
    .done = link_done,
};

/* --- Setup --- */

struct link_key {
	int peer;
	bool send;
};

static void add_stream(struct weft_tree_sched *ts, struct link_key *keys, int *nlinks, int peer,
		       bool send, enum tree_kind kind, int tree, int child)
{
	int i = 0;
	while (i < *nlinks && !(keys[i].peer == peer && keys[i].send == send))
		i++;
	if (i == *nlinks) {
		keys[(*nlinks)++] = (struct link_key){peer, send};
		ts->link[i] = (struct weft_tree_link){0};
	}
	struct weft_tree_link *l = &ts->link[i];
	l->s[l->nstreams++] = (struct weft_tree_stream){
	    .kind = (uint8_t)kind, .tree = (uint8_t)tree, .child = (uint8_t)child};
}

static int add_streams(struct weft_tree_sched *ts, struct link_key *keys)
{
	const struct weft_tree_config *cfg = &ts->cfg;
	int nlinks = 0;
	for (int t = 0; t < cfg->ntrees; t++) {
		const struct weft_tree_node *nd = &cfg->tree[t].node;
		if (ts->nchunks[t] == 0)
			continue;
		if (cfg->up) {
			for (int c = 0; c < nd->nchildren; c++)
				add_stream(ts, keys, &nlinks, nd->child[c], false, TREE_UP_RECV, t,
					   c);
			if (nd->parent >= 0)
				add_stream(ts, keys, &nlinks, nd->parent, true, TREE_UP_SEND, t, 0);
		}
		if (cfg->down) {
			if (nd->parent >= 0)
				add_stream(ts, keys, &nlinks, nd->parent, false, TREE_DOWN_RECV, t,
					   0);
			for (int c = 0; c < nd->nchildren; c++)
				add_stream(ts, keys, &nlinks, nd->child[c], true, TREE_DOWN_SEND, t,
					   c);
		}
	}
	return nlinks;
}

void weft_tree_sched_start(struct weft_task *task, const struct weft_tree_config *cfg)
{
	struct weft_tree_task *tt = (struct weft_tree_task *)(void *)task->priv;
	struct weft_tree_sched *ts = &tt->sched;
	*ts = (struct weft_tree_sched){.cfg = *cfg};
	int n = task->comm->nranks;
	ts->reduce = weft_reduce_kernel(task->args.dtype, task->args.op);
	ts->lag = cfg->up && cfg->down ? 2u * (uint32_t)weft_shape_depth(n) + 2 : 0;
	size_t most = 0;
	for (int t = 0; t < cfg->ntrees; t++)
		most = cfg->tree[t].elems > most ? cfg->tree[t].elems : most;
	/* Keys (4 (j + lag) + 3) must fit the 32-bit step of the tag. */
	weft_engine_chunks(task, most, (UINT32_MAX >> 3) - ts->lag - 1, &ts->chunk_elems);
	for (int t = 0; t < cfg->ntrees; t++)
		ts->nchunks[t] =
		    (uint32_t)((cfg->tree[t].elems + ts->chunk_elems - 1) / ts->chunk_elems);

	struct link_key keys[WEFT_ENGINE_MAX_QUEUES];
	int nlinks = add_streams(ts, keys);
	weft_engine_init(&tt->eng, NULL);
	for (int i = 0; i < nlinks; i++) {
		uint32_t total = 0;
		for (int s = 0; s < ts->link[i].nstreams; s++)
			total += ts->nchunks[ts->link[i].s[s].tree];
		weft_engine_add_queue(&tt->eng, &link_ops, keys[i].peer, keys[i].send, total, 0);
	}
	weft_engine_start(&tt->eng, task);
}
