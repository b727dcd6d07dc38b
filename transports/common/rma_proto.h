/*
 * rma_proto.h — Weft's messages over RDMA writes with immediate data: the
 * protocol the ofi transport's rma path and the verbs transport both run.
 * It knows nothing of libfabric or verbs: a transport hands it a few
 * primitives (struct weft_rma_prims: post a write with immediate, post
 * receives for immediates, read completions, register memory) and gets
 * isend / irecv / progress in return.
 *
 * Memory. Every rank registers one region at init and publishes one card
 * (struct weft_rma_card: its key and the geometry). For each peer p the
 * region holds, at p's block:
 *   inbound, written by p:   nslots landing slots (a slot_ring.h header and
 *                            slot_bytes - 64 of data each); ndesc descriptor
 *                            entries; nbounce bounce pieces; a control line
 *   outbound, ours to p:     staging copies of what we write into p's
 *                            slots, descriptors and control line
 * so a peer finds its slots in our region at a fixed offset and nothing is
 * exchanged per pair.
 *
 * Messages, one direction (sender S, receiver R), matched in post order:
 * the k-th send meets the k-th receive, and every message takes exactly
 * one landing slot, the k-th, in order.
 *  - eager (len <= slot_bytes - 64): S copies header and bytes into its
 *    staging slot and writes both into R's slot k with immediate SLOT|k.
 *    The send is done once the bytes are copied. R, on the immediate,
 *    checks the header (sequence, tag, length) against receive k, copies
 *    (or reduces) the bytes out, and frees the slot.
 *  - rendezvous (larger), receiver-driven: when receive k is posted, R
 *    registers its destination (or, for a reducing receive, takes a free
 *    bounce piece) and writes a descriptor (message k, tag, length, the
 *    piece's offset and length, address and key) into S's descriptor ring
 *    with immediate DESC|d. S, when send k is posted and descriptor d has
 *    arrived, checks tag and length and writes the piece straight from its
 *    buffer with immediate DATA|d; the send is done when its writes have
 *    completed. S also puts a header-only slot (kind RNDV) in slot k at
 *    once, so that R checks tag and length of every message in order,
 *    whichever side thinks it is large. The receive is done when its slot
 *    was checked and every piece landed (a bounce piece is reduced into
 *    the destination and handed out again for the next piece).
 *  - credits: R returns consumed slots (SLOT_CREDIT|count) every
 *    credit_batch slots, S returns descriptor entries (DESC_CREDIT|count)
 *    as it takes them, each a small write with immediate into the other's
 *    control line. Counts travel in the immediate, modulo 2^28, and are
 *    taken as the larger of old and new, so credit writes that overtake
 *    each other do no harm.
 *  - liveness: a connection with messages queued that moves nothing for
 *    stall_s is checked (tp_watchdog.h): the peer's pid when it shares
 *    this host, the transport's own check (tp_liveness.h: the kernel's
 *    word on the peer's liveness port), and a probe write (PROBE) to its
 *    control line, which a provider that notices fails.
 *
 * Immediates are 32 bits (what verbs carries): 4 bits of kind, 28 of value.
 * Completions of remote writes are what make data visible; no memory is
 * polled, so no ordering between writes is assumed.
 */
#ifndef WEFT_RMA_PROTO_H
#define WEFT_RMA_PROTO_H

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transports/common/mr_cache.h"
#include "transports/common/slot_ring.h"
#include "transports/common/tp_queue.h"
#include "transports/common/tp_watchdog.h"
#include "transports/transport.h"

struct weft_rma;
struct weft_rma_conn;

/* ---- Immediates ---- */

enum weft_rma_imm_kind {
	WEFT_RMA_IMM_SLOT = 1,	      /* a slot landed; value: slot number */
	WEFT_RMA_IMM_DESC = 2,	      /* a descriptor landed; value: descriptor number */
	WEFT_RMA_IMM_DATA = 3,	      /* a piece landed; value: its descriptor's number */
	WEFT_RMA_IMM_SLOT_CREDIT = 4, /* value: slots the receiver consumed */
	WEFT_RMA_IMM_DESC_CREDIT = 5, /* value: descriptors the sender took */
	WEFT_RMA_IMM_PROBE = 6,	      /* liveness probe; nothing to do */
};

#define WEFT_RMA_IMM_BITS 28
#define WEFT_RMA_IMM_MASK ((1u << WEFT_RMA_IMM_BITS) - 1)

static inline uint32_t weft_rma_imm(enum weft_rma_imm_kind kind, uint64_t value)
{
	return (uint32_t)kind << WEFT_RMA_IMM_BITS | ((uint32_t)value & WEFT_RMA_IMM_MASK);
}

/* ---- What the transport supplies ---- */

/* One posted write. The transport's per-operation context comes first
 * (libfabric's struct fi_context2 for FI_CONTEXT/FI_CONTEXT2 providers;
 * verbs uses the op's address as wr_id); the rest is the protocol's. */
struct weft_rma_op {
	alignas(16) unsigned char prov[64];
	uint32_t kind; /* enum weft_rma_imm_kind of the write */
	uint64_t desc; /* DATA: the descriptor served */
	struct weft_rma_conn *conn;
	struct weft_rma_req *req; /* DATA: the send */
	size_t len;
};

enum weft_rma_cqe_kind {
	WEFT_RMA_CQE_LOCAL = 1, /* a write posted here completed (op, status) */
	WEFT_RMA_CQE_REMOTE,	/* a peer's write with immediate landed here (conn, imm) */
};

/* A completion as the transport read it from its queue. */
struct weft_rma_cqe {
	enum weft_rma_cqe_kind kind;
	weft_status_t status; /* LOCAL: WEFT_SUCCESS, or the failure (why says what) */
	struct weft_rma_op *op;
	struct weft_rma_conn *conn; /* REMOTE: who wrote; NULL if unknown (ignored) */
	uint32_t imm;
	char why[160]; /* a failure's text: the provider's (fi_strerror, ibv_wc_status_str) */
};

struct weft_rma_prims {
	size_t size; /* sizeof(struct weft_rma_prims) */
	/* Post a write of [src, src + len) (in a region registered as @p
	 * src_desc) to the peer's @p raddr under @p rkey, with @p imm
	 * delivered to the peer. WEFT_SUCCESS; WEFT_INPROGRESS when the
	 * transport's queue is full (the protocol tries again from progress);
	 * an error otherwise, described in c->rp->why (the protocol decides
	 * whether it is one: see weft_rma_conn). Never blocks. */
	weft_status_t (*write_imm)(struct weft_rma_conn *c, struct weft_rma_op *op, const void *src,
				   size_t len, void *src_desc, uint64_t raddr, uint64_t rkey,
				   uint32_t imm);
	/* Make room for @p n more immediates from @p c's peer (verbs: receive
	 * work requests; libfabric: receives only in FI_RX_CQ_DATA mode).
	 * The protocol posts weft_rma_imm_depth() per connection at connect
	 * and one more for each remote completion it takes. */
	weft_status_t (*post_imm_recvs)(struct weft_rma_conn *c, unsigned n);
	/* Read up to @p max completions; returns how many, or a negative
	 * status when the queue itself failed. Never blocks. */
	int (*poll)(struct weft_rma *rp, struct weft_rma_cqe *out, int max);
	/* Is the peer of a stalled @p c known to be gone (tp_liveness.h)?
	 * true with @p why set; NULL: the transport has no such check. */
	bool (*peer_gone)(struct weft_rma_conn *c, char *why, size_t len);
	/* Registrations (mr_cache.h). The region and the cache use them. */
	struct weft_mr_cache_ops mr;
	/* Local writes need their source registered (libfabric FI_MR_LOCAL,
	 * verbs always); false: src_desc may be NULL for user buffers. */
	bool src_needs_reg;
};

/* ---- Geometry and cards ---- */

struct weft_rma_geom {
	uint32_t nslots;       /* landing slots per sender */
	uint32_t ndesc;	       /* descriptor entries per peer */
	uint32_t nbounce;      /* bounce pieces per connection (<= 64) */
	uint32_t credit_batch; /* return slot credits every this many (1 .. nslots) */
	size_t slot_bytes;     /* header + data of one slot; multiple of 64 */
	size_t bounce_bytes;   /* bytes of one bounce piece; multiple of 64 */
	size_t max_write;      /* largest single write (0: unbounded) */
	double stall_s;	       /* liveness check after this long without progress */
};

/* Defaults for @p nranks ranks, shrunk (slots first, then bounce pieces)
 * so that one rank's region stays within @p budget bytes. */
void weft_rma_geom_default(struct weft_rma_geom *g, int nranks, size_t budget);

/* How a transport names the slot settings and reports a bad one. */
struct weft_rma_geom_settings {
	const char *slots;	/* landing slots per sender (WEFT_OFI_SLOTS) */
	const char *slot_bytes; /* bytes of one slot (WEFT_OFI_SLOT_BYTES) */
	size_t budget;		/* one rank's region, for the defaults */
	/* Fails through @p env naming @p name, its value and what was
	 * @p expected, in the transport's words. */
	weft_status_t (*bad)(const struct weft_tp_env *env, const char *name, const char *expected);
};

/* The defaults for env->nranks within @p s->budget, then the slot count (a
 * power of two from 2 to 1024; the credit batch at most half of it) and the
 * slot size (a multiple of 64 from 256 to 1M) where they are set. Every
 * rank computes the same from the same settings and rank count, as the two
 * ends of a connection must (the cards check it). */
weft_status_t weft_rma_geom_read(struct weft_rma_geom *g, const struct weft_tp_env *env,
				 const struct weft_rma_geom_settings *s);

/* What every rank publishes (the transport allgathers it). */
struct weft_rma_card {
	uint64_t base; /* the region's first byte as peers name it (key.addr) */
	uint64_t key;
	uint64_t slot_bytes, bounce_bytes;
	uint32_t nslots, ndesc, nbounce, credit_batch;
};

/* Immediates one peer can have in flight towards us: what a transport
 * that needs posted receives for them posts per connection. */
unsigned weft_rma_imm_depth(const struct weft_rma_geom *g);

/* ---- The protocol's objects (embedded in the transport's) ---- */

/* One message in flight. */
struct weft_rma_req {
	struct weft_tp_req base; /* base.xferred: bytes copied, written or landed */
	uint64_t index;		 /* its number in its direction's stream */
	size_t issued;		 /* rendezvous: bytes covered by descriptors so far */
	uint32_t pending;	 /* rendezvous send: writes posted, not completed */
	bool slotted;		 /* its slot was published (send) or checked (receive) */
	bool rndv;
	struct weft_mr_entry *mr; /* rendezvous: its buffer's registration */
};

/* Per descriptor a receiver has outstanding. */
struct weft_rma_dtab {
	struct weft_rma_req *req; /* NULL: free */
	size_t off, len;
	int piece; /* bounce piece, -1: straight into the destination */
};

/*
 * A write that fails on a connection with no message queued (a credit
 * returned to a peer that has finished and gone) is no error of any
 * operation: the connection breaks quietly (gone), and only a message
 * posted to it later fails, with the reason kept here.
 */
struct weft_rma_conn {
	struct weft_rma *rp;
	int peer;
	bool connected, broken;
	bool gone; /* broken quietly; gone_why not reported yet */
	weft_status_t fail_status;
	char gone_why[160];
	struct weft_rma_card card; /* the peer's */

	/* Our block in the peer's region (remote addresses) and the peer's
	 * block in ours. */
	uint64_t r_slots, r_descs, r_ctrl;	      /* peer-side addresses */
	unsigned char *slots, *descs, *bounce;	      /* inbound, written by the peer */
	unsigned char *st_slots, *st_descs, *st_ctrl; /* outbound staging */

	/* Sending: slots and their credits, descriptors from the receiver. */
	struct weft_tp_reqq sendq;
	struct weft_rma_req *tx_slot; /* first send without a slot */
	struct weft_rma_req *tx_desc; /* first rendezvous send not yet fully described */
	uint64_t tx_posted;	      /* sends posted */
	struct weft_ring_tx txr;
	_Atomic uint64_t tx_credit; /* slots the receiver consumed (from SLOT_CREDIT) */
	uint64_t d_head;	    /* descriptors taken */
	uint64_t *d_arrived;	    /* ndesc: descriptor number + 1 once landed */
	uint64_t d_returned;	    /* descriptor credits sent */

	/* Receiving. */
	struct weft_tp_reqq recvq;
	struct weft_rma_req *rx_slot; /* first receive whose slot is not checked */
	struct weft_rma_req *rx_desc; /* first rendezvous receive not fully described */
	uint64_t rx_posted;
	struct weft_ring_rx rxr;
	uint64_t *s_arrived;	    /* nslots: slot number + 1 once landed */
	uint64_t d_next;	    /* descriptors written */
	uint64_t d_credit;	    /* descriptor entries the sender freed */
	struct weft_rma_dtab *dtab; /* ndesc */
	uint64_t bounce_free;	    /* bit i: piece i is free */

	/* Control writes that found the queue full, owed from progress. */
	bool owe_slot_credit, owe_desc_credit;
	bool probing;
	bool moved;
	bool on_work; /* in rp->work */
	struct weft_watchdog wd;
};

struct weft_rma {
	const struct weft_rma_prims *prims;
	const struct weft_tp_env *env;
	struct weft_rma_geom geom;
	const char *name; /* for messages: "ofi", "verbs" */
	unsigned char *region;
	size_t region_bytes, block_bytes;
	struct weft_mr_reg region_reg;
	struct weft_mr_cache cache;
	struct weft_tp_pool reqs, ops;
	struct weft_rma_conn **conns;  /* nranks; NULL until connected */
	struct weft_rma_conn **active; /* every connection */
	int nactive;
	/* Connections with something to do (messages queued, credits owed,
	 * completions just taken): what progress visits, so that its cost
	 * follows the work, not the number of peers. */
	struct weft_rma_conn **work;
	int nwork;
	unsigned inflight;   /* writes posted, not completed */
	weft_status_t error; /* a failure since the last progress returned */
	char why[160];	     /* the transport's words for a failed post */
};

/* ---- Calls ---- */

/* Allocate, pre-fault and register this rank's region (through
 * prims->mr), the pools; @p name prefixes messages. Errors are recorded
 * with env->fail. */
weft_status_t weft_rma_init(struct weft_rma *rp, const struct weft_rma_prims *prims,
			    const struct weft_tp_env *env, const struct weft_rma_geom *geom,
			    const char *name);

/* This rank's card. */
void weft_rma_card(const struct weft_rma *rp, struct weft_rma_card *out);

/* Join @p c to @p peer, whose card is @p card: checks the geometry,
 * points the rings into both regions and posts receives for immediates.
 * WEFT_ERR_INVALID_ARG naming both geometries if they differ. */
weft_status_t weft_rma_conn_init(struct weft_rma *rp, struct weft_rma_conn *c, int peer,
				 const struct weft_rma_card *card);

/* The message ops: see transport.h. */
weft_status_t weft_rma_isend(struct weft_rma_conn *c, struct weft_msg *m);
weft_status_t weft_rma_irecv(struct weft_rma_conn *c, struct weft_msg *m);
weft_status_t weft_rma_progress(struct weft_rma *rp);

/* Fail everything queued on @p c with @p status; the connection is
 * unusable from here on. */
void weft_rma_conn_fail(struct weft_rma_conn *c, weft_status_t status);

/* Fail every connection's messages with WEFT_ERR_ABORTED. */
void weft_rma_abort(struct weft_rma *rp);

/* Free everything, messages still queued untouched (their posters may be
 * gone); the transport has already closed the queue that carried the ops
 * (no completion may arrive after this). */
void weft_rma_fini(struct weft_rma *rp);

/* Writes posted and not completed: a transport closing in order drives
 * progress until there are none (an eager send is done before its write
 * has left, and a process that exits at once would lose it). */
static inline bool weft_rma_writes_pending(const struct weft_rma *rp)
{
	return rp->inflight > 0;
}

/* Is @p c busy (messages queued)? */
static inline bool weft_rma_conn_busy(const struct weft_rma_conn *c)
{
	return c->sendq.head || c->recvq.head;
}

#endif
