/*
 * rma_proto_impl.h — internals of the RMA protocol shared by rma_proto.c
 * (setup, completions, liveness), rma_proto_tx.c (sending) and
 * rma_proto_rx.c (receiving). Not included outside them and their tests.
 */
#ifndef WEFT_RMA_PROTO_IMPL_H
#define WEFT_RMA_PROTO_IMPL_H

#include "transports/common/rma_proto.h"

/* A rendezvous descriptor, as the receiver writes it into the sender's ring. */
struct weft_rma_desc {
	uint64_t seq; /* descriptor number + 1 */
	uint64_t msg; /* the receive's index in its stream */
	uint64_t tag;
	uint64_t msg_len;     /* the receive's length */
	uint64_t off, len;    /* the piece */
	uint64_t raddr, rkey; /* where it goes */
};
_Static_assert(sizeof(struct weft_rma_desc) == 64, "a descriptor is one cache line");

#define WEFT_RMA_LINE 64u

/* Offsets inside one peer's block of the region. */
static inline size_t weft_rma_off_descs(const struct weft_rma_geom *g)
{
	return (size_t)g->nslots * g->slot_bytes;
}

static inline size_t weft_rma_off_bounce(const struct weft_rma_geom *g)
{
	return weft_rma_off_descs(g) + (size_t)g->ndesc * WEFT_RMA_LINE;
}

static inline size_t weft_rma_off_ctrl(const struct weft_rma_geom *g)
{
	return weft_rma_off_bounce(g) + (size_t)g->nbounce * g->bounce_bytes;
}

static inline size_t weft_rma_off_st_slots(const struct weft_rma_geom *g)
{
	return weft_rma_off_ctrl(g) + WEFT_RMA_LINE;
}

static inline size_t weft_rma_off_st_descs(const struct weft_rma_geom *g)
{
	return weft_rma_off_st_slots(g) + (size_t)g->nslots * g->slot_bytes;
}

static inline size_t weft_rma_off_st_ctrl(const struct weft_rma_geom *g)
{
	return weft_rma_off_st_descs(g) + (size_t)g->ndesc * WEFT_RMA_LINE;
}

/* Bytes of one eager message's payload. */
static inline size_t weft_rma_eager_max(const struct weft_rma_geom *g)
{
	return g->slot_bytes - sizeof(struct weft_slot_hdr);
}

/* The 64-bit number a 28-bit immediate value names, counting from @p base. */
static inline uint64_t weft_rma_widen(uint64_t base, uint32_t value)
{
	return base + ((value - (uint32_t)base) & WEFT_RMA_IMM_MASK);
}

/* Descriptor credits go back every this many taken. */
static inline uint64_t weft_rma_desc_batch(const struct weft_rma_geom *g)
{
	return g->ndesc >= 8 ? g->ndesc / 4 : 1;
}

static inline struct weft_rma_req *weft_rma_req_of(struct weft_tp_req *r)
{
	return r ? weft_container_of(r, struct weft_rma_req, base) : NULL;
}

static inline struct weft_rma_req *weft_rma_next(const struct weft_rma_req *r)
{
	return weft_rma_req_of(r->base.next);
}

/* The next rendezvous request after @p r (inclusive when @p self). */
static inline struct weft_rma_req *weft_rma_next_rndv(struct weft_rma_req *r, bool self)
{
	for (r = self ? r : weft_rma_next(r); r && !r->rndv; r = weft_rma_next(r))
		;
	return r;
}

/* rma_proto.c */
/* @p c has something to do: progress visits it until it has not. */
static inline void weft_rma_mark(struct weft_rma_conn *c)
{
	if (!c->on_work) {
		c->on_work = true;
		c->rp->work[c->rp->nwork++] = c;
	}
}

weft_status_t weft_rma_fail(struct weft_rma_conn *c, weft_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Post a write with immediate: WEFT_SUCCESS, WEFT_INPROGRESS (queue full:
 * nothing was posted) or the connection's failure. */
weft_status_t weft_rma_post(struct weft_rma_conn *c, uint32_t imm, const void *src, size_t len,
			    void *src_desc, uint64_t raddr, uint64_t rkey, struct weft_rma_req *req,
			    uint64_t desc);
/* @p r leaves @p q, drops its registration and its message is done. */
void weft_rma_finish(struct weft_rma_conn *c, struct weft_tp_reqq *q, struct weft_rma_req *r,
		     weft_status_t status);
/* A request for @p m, or NULL with @p m completed with the reason. */
struct weft_rma_req *weft_rma_new_req(struct weft_rma_conn *c, struct weft_msg *m,
				      weft_status_t *st);

/* rma_proto_tx.c */
bool weft_rma_tx_progress(struct weft_rma_conn *c);
void weft_rma_tx_on_desc(struct weft_rma_conn *c, uint32_t value);
void weft_rma_tx_on_credit(struct weft_rma_conn *c, uint32_t value);
void weft_rma_tx_on_written(struct weft_rma_conn *c, struct weft_rma_op *op);

/* rma_proto_rx.c */
bool weft_rma_rx_progress(struct weft_rma_conn *c);
void weft_rma_rx_on_slot(struct weft_rma_conn *c, uint32_t value);
void weft_rma_rx_on_data(struct weft_rma_conn *c, uint32_t value);
void weft_rma_rx_on_credit(struct weft_rma_conn *c, uint32_t value);

#endif
