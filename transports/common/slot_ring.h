/*
 * slot_ring.h — landing slots with credits: the flow control that shm runs
 * over shared memory, and that the RDMA transports (ofi's rma protocol,
 * verbs) run over RDMA writes.
 *
 * A sender owns nslots landing slots in its receiver's memory, each a
 * header (struct weft_slot_hdr, one cache line) and slot_bytes of data.
 * The sender fills slot head % nslots and publishes it last by storing
 * seq = head + 1 in the slot's header with release ordering (shared memory:
 * an atomic store; RDMA: the header written after the data on an ordered
 * queue pair, or the write's immediate data). The receiver polls the one
 * header line of slot consumed % nslots for seq == consumed + 1 (acquire),
 * consumes it, and returns credits by publishing its consumed count, the
 * tail, where the sender can read it (shared memory: a word in the FIFO;
 * RDMA: written back into the sender's memory, every credit_batch slots so
 * that small messages do not each cost a write). The sender re-reads the
 * tail only when its cached copy says the ring is full.
 *
 * Only the arithmetic and the header layout live here; where the bytes go
 * is the transport's. The counters are 64-bit and never wrap in practice.
 */
#ifndef WEFT_SLOT_RING_H
#define WEFT_SLOT_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define WEFT_SLOT_INLINE 32 /* payload bytes that ride in the header line */

enum weft_slot_kind {
	WEFT_SLOT_EAGER = 1, /* the message's bytes are in this slot and the next ones */
	WEFT_SLOT_RNDV = 2,  /* a descriptor: the bytes are read (or written) elsewhere */
};

struct weft_slot_hdr {
	_Atomic uint64_t seq; /* slot number + 1 once the slot is full */
	uint64_t tag;
	uint64_t len;  /* length of the whole message */
	uint32_t kind; /* enum weft_slot_kind */
	uint32_t flags;
	unsigned char inl[WEFT_SLOT_INLINE]; /* inline payload, or a descriptor */
};
_Static_assert(sizeof(struct weft_slot_hdr) == 64, "a slot header is one cache line");

struct weft_ring_tx {
	uint32_t nslots;
	uint64_t head; /* slots published */
	uint64_t tail; /* cached: slots the receiver has freed */
};

/* Is a slot free? Re-reads the receiver's tail from @p tail_word only when
 * the cached copy says the ring is full. */
static inline bool weft_ring_tx_has_slot(struct weft_ring_tx *t, const _Atomic uint64_t *tail_word)
{
	if (t->head - t->tail < t->nslots)
		return true;
	t->tail = atomic_load_explicit(tail_word, memory_order_acquire);
	return t->head - t->tail < t->nslots;
}

static inline uint32_t weft_ring_tx_index(const struct weft_ring_tx *t)
{
	return (uint32_t)(t->head % t->nslots);
}

/* The slot at weft_ring_tx_index is filled: publish it (seq = head + 1). */
static inline void weft_ring_tx_publish(struct weft_ring_tx *t, struct weft_slot_hdr *h)
{
	t->head++;
	atomic_store_explicit(&h->seq, t->head, memory_order_release);
}

struct weft_ring_rx {
	uint32_t nslots;
	uint32_t credit_batch; /* publish the tail every this many slots (>= 1) */
	uint64_t head;	       /* slots consumed */
	uint64_t returned;     /* tail value last published */
};

static inline uint32_t weft_ring_rx_index(const struct weft_ring_rx *r)
{
	return (uint32_t)(r->head % r->nslots);
}

/* Has the next slot (header @p h) arrived? */
static inline bool weft_ring_rx_arrived(const struct weft_ring_rx *r, const struct weft_slot_hdr *h)
{
	return atomic_load_explicit(&h->seq, memory_order_acquire) == r->head + 1;
}

/* The next slot is consumed; true when the tail should be published now
 * (the caller stores r->head where the sender reads it). */
static inline bool weft_ring_rx_release(struct weft_ring_rx *r)
{
	r->head++;
	if (r->head - r->returned < r->credit_batch)
		return false;
	r->returned = r->head;
	return true;
}

#endif
