/*
 * tp_queue.h — the transports' per-message requests: a pool they come from
 * and a queue (in post order, unlinkable from the middle) they wait in.
 *
 * A transport's request type embeds struct weft_tp_req first. Requests are
 * allocated in slabs, the first at init, and recycled: no allocation on the
 * hot path once the pool has grown to the window the algorithms keep.
 */
#ifndef WEFT_TP_QUEUE_H
#define WEFT_TP_QUEUE_H

#include <stddef.h>

#include "transports/transport.h"

struct weft_tp_req {
	struct weft_msg *msg;
	struct weft_tp_req *next, *prev;
	size_t xferred; /* bytes moved so far */
};

struct weft_tp_reqq {
	struct weft_tp_req *head, *tail;
};

static inline void weft_reqq_push(struct weft_tp_reqq *q, struct weft_tp_req *r)
{
	r->next = NULL;
	r->prev = q->tail;
	if (q->tail)
		q->tail->next = r;
	else
		q->head = r;
	q->tail = r;
}

static inline void weft_reqq_unlink(struct weft_tp_reqq *q, struct weft_tp_req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		q->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		q->tail = r->prev;
	r->next = r->prev = NULL;
}

static inline struct weft_tp_req *weft_reqq_pop(struct weft_tp_reqq *q)
{
	struct weft_tp_req *r = q->head;
	if (r)
		weft_reqq_unlink(q, r);
	return r;
}

struct weft_tp_pool {
	size_t obj_size;
	void *free;   /* free objects, linked through their first word */
	void **slabs; /* every slab, for fini */
	size_t nslabs;
};

/* Objects of @p obj_size bytes (at least a struct weft_tp_req); one slab
 * allocated and touched now. WEFT_ERR_NO_MEMORY if that fails. */
weft_status_t weft_tp_pool_init(struct weft_tp_pool *pool, size_t obj_size);
void weft_tp_pool_fini(struct weft_tp_pool *pool);

/* A zeroed object (NULL without memory), and back to the pool. */
void *weft_tp_pool_get(struct weft_tp_pool *pool);
void weft_tp_pool_put(struct weft_tp_pool *pool, void *obj);

/*
 * The start of every post, the same in each transport: @p m is marked in
 * progress (a zero unit becomes 1) and, unless @p refused is the
 * connection's reason to turn it away, gets a request from @p pool, its
 * base.msg set. Otherwise, or without memory (recorded through @p env as
 * "@p who: no memory for a request"), NULL, with @p m completed and *st the
 * reason; *st is WEFT_SUCCESS with a request.
 */
void *weft_tp_req_start(struct weft_tp_pool *pool, const struct weft_tp_env *env, const char *who,
			struct weft_msg *m, weft_status_t refused, weft_status_t *st);

#endif
