/*
 * shm.h — internals of the shared-memory transport (shm.c: setup,
 * shm_fifo.c: data path). Not included outside transports/shm*.c.
 *
 * Segment layout. Each rank that has local peers owns one POSIX shared
 * segment holding its INBOUND FIFOs:
 *
 *   page 0            struct shm_ctl: magic, pid, geometry, state
 *   fifo[s], s = the sender's local rank (the owner's own entry is unused
 *   and never touched, so it costs no memory):
 *     struct shm_fifo  tail | cma_done | cma_ok, each on its own cache line,
 *                      then nslots slot headers of one cache line each
 *     data             nslots * slot_bytes, page aligned
 *
 * The sender maps its FIFO in the receiver's segment (pre-populated) and
 * the receiver's control page; nothing else of a peer is mapped.
 *
 * Protocol (single producer, single consumer, no locks): the landing-slot
 * credit ring of transports/common/slot_ring.h over shared memory. The
 * sender fills slot (n % nslots) and then stores seq = n + 1 with release;
 * the receiver polls that one header line for seq == n + 1 (acquire), so a
 * small message costs one cache line in each direction. The receiver frees
 * slots by storing tail = slots consumed (release) after each one; the
 * sender reads tail (acquire) only when its cached copy says the ring is
 * full.
 *
 *   eager: the first slot's header carries tag, total length and kind;
 *          messages up to SHM_INLINE bytes ride in the header line itself,
 *          longer ones in the slot data areas, one slot per slot_bytes.
 *          A send is done once its last byte is in a slot.
 *   cma:   one header: tag, length, and the sender's buffer address. The
 *          receiver copies with process_vm_readv, straight into msg->buf,
 *          or, for a reducing receive, through a small bounce buffer it
 *          reduces from; then stores cma_done += 1 (release) and the sender
 *          completes its oldest outstanding CMA send.
 */
#ifndef WEFT_SHM_H
#define WEFT_SHM_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "transports/common/slot_ring.h"
#include "transports/common/tp_bounce.h"
#include "transports/common/tp_queue.h"
#include "transports/common/tp_watchdog.h"
#include "transports/transport.h"

#define SHM_MAGIC  0x5745465453484d31ull /* "WEFTSHM1" */
#define SHM_LINE   64
#define SHM_PAGE   4096
#define SHM_INLINE WEFT_SLOT_INLINE
/* No progress on a connection for this long: look at the peer's pid and state. */
#define SHM_STALL_S 0.1
/* Bytes a single-copy receive moves per progress call. */
#define SHM_CMA_STEP (1u << 20)
/* Bounce buffer for reducing single-copy receives: stays in L2. */
#define SHM_BOUNCE_BYTES (128u << 10)
/* FIFO memory one rank may touch (its inbound plus its outbound FIFOs). */
#define SHM_FIFO_BUDGET (48ul << 20)

enum shm_state {
	SHM_STATE_ALIVE = 0,
	SHM_STATE_ABORTED,
	SHM_STATE_FAILED,
	SHM_STATE_CLOSED, /* communicator destroyed */
};

struct shm_ctl {
	uint64_t magic;
	uint64_t self_addr; /* where the owner mapped this segment (CMA probe) */
	int32_t pid;
	uint32_t nslots;
	uint64_t slot_bytes;
	uint32_t nfifo;
	_Atomic int state; /* enum shm_state */
	/* The owner sleeps in its wait set (WEFT_WAIT): a peer that stores what
	 * it may wait for rings its bell (shm_bell.c). */
	alignas(SHM_LINE) _Atomic uint32_t asleep;
};

/* A single-copy message's slot is a rendezvous descriptor (WEFT_SLOT_RNDV)
 * whose inline bytes hold the sender's buffer address. */
struct shm_fifo {
	alignas(SHM_LINE) _Atomic uint64_t tail;     /* written by the receiver */
	alignas(SHM_LINE) _Atomic uint64_t cma_done; /* written by the receiver */
	alignas(SHM_LINE) uint32_t cma_ok;	     /* receiver can read this sender */
	alignas(SHM_LINE) struct weft_slot_hdr slots[];
};

/* Mappings of a peer's weft_mem allocations (shm_mem.c), cached: a
 * collective on the same buffers maps nothing the next time. Keyed by
 * (fd, generation, length): a freed and reallocated buffer has a new
 * generation, so a stale entry is never matched; unreferenced entries are
 * evicted, oldest use first, when the cache is full. */
#define SHM_MAP_CACHE 8

struct shm_map {
	void *addr; /* NULL: free entry */
	size_t len;
	uint64_t fd, gen;
	uint32_t refs;
	uint64_t last_use;
};

/* A message in flight on a connection. */
struct shm_req {
	struct weft_tp_req base;
	uint32_t phase; /* receive: enum shm_rx_phase (shm_fifo.c) */
	uint64_t cma;	/* receive: the sender's address; send: its single-copy number */
};

struct shm_tp;

struct shm_conn {
	struct weft_conn base;
	struct shm_tp *tp;
	int lpeer; /* the peer's local rank */
	pid_t pid;
	struct shm_ctl *peer_ctl; /* the peer's control page */
	void *peer_fifo_map;	  /* our FIFO in the peer's segment */
	size_t peer_fifo_len;
	bool connected;
	bool broken;
	weft_status_t fail_status; /* why it broke */

	/* Sending: our FIFO in the peer's segment. */
	struct shm_fifo *tx;
	unsigned char *tx_data;
	struct weft_ring_tx txr;
	bool tx_cma; /* the peer can read our memory */
	uint64_t cma_posted;
	struct weft_tp_reqq sendq; /* not yet fully in slots */
	struct weft_tp_reqq cmaq;  /* descriptors published, waiting for cma_done */

	/* Receiving: the peer's FIFO in our segment. */
	struct shm_fifo *rx;
	unsigned char *rx_data;
	struct weft_ring_rx rxr;
	uint64_t rx_cma_done;
	struct weft_tp_reqq recvq;

	/* The peer's weft_mem allocations mapped here (shm_mem.c). */
	struct shm_map maps[SHM_MAP_CACHE];
	uint64_t map_uses;
	bool map_refused; /* opening the peer's memory files was refused: never again */

	struct weft_watchdog wd; /* liveness */

	int bell_wr; /* the peer's bell (it may sleep), else -1 */
};

struct shm_tp {
	struct weft_tp base;
	struct weft_tp_pool reqs;
	int nlocal;
	int my_local;
	int *rank_of; /* local rank -> rank */
	struct shm_ctl *ctl;
	void *seg;
	size_t seg_len;
	uint32_t nslots;
	size_t slot_bytes;
	size_t fifo_hdr;    /* bytes of a FIFO before its data, page aligned */
	size_t fifo_stride; /* bytes of a FIFO */
	bool cma;	    /* single-copy path enabled */
	size_t cma_min;
	struct weft_bounce bounce; /* reducing single-copy receives */
	double copy_Bps;	   /* measured at init: the properties' bandwidth */
	struct shm_conn *conns;	   /* nlocal, indexed by local rank */
	int bell_rd;		   /* our bell (we may sleep), in the wait set; else -1 */
	bool bell_made;		   /* its name exists until init unlinks it */
};

/* Offset of @p sender's FIFO in a receiver's segment. */
static inline size_t shm_fifo_off(const struct shm_tp *tp, int sender)
{
	return SHM_PAGE + (size_t)sender * tp->fifo_stride;
}

static inline struct shm_fifo *shm_fifo_at(const struct shm_tp *tp, void *seg, int sender)
{
	return (struct shm_fifo *)((char *)seg + shm_fifo_off(tp, sender));
}

extern const struct weft_tp_ops weft_tp_shm_ops;

/* shm_fifo.c */
weft_status_t weft_tp_shm_isend(struct weft_conn *conn, struct weft_msg *msg);
weft_status_t weft_tp_shm_irecv(struct weft_conn *conn, struct weft_msg *msg);
weft_status_t weft_tp_shm_progress(struct weft_tp *tp);
/* Fail every message queued on @p c with @p status. */
void weft_tp_shm_fail_all(struct shm_conn *c, weft_status_t status);

/* shm_fifo.c: nothing this transport could do at once (WEFT_WAIT's settle). */
bool weft_tp_shm_settle(struct weft_tp *tp);

/* shm_bell.c: the bell of a rank that may sleep, beside its segment
 * (@p seg_name: its shm_open name): made and added to the wait set
 * (create), a peer's opened for writing (open), rung after a store the
 * peer may wait for (ring: only where it sleeps); and the wait ops. */
void weft_tp_shm_bell_path(char *buf, size_t len, const char *seg_name);
weft_status_t weft_tp_shm_bell_create(struct shm_tp *tp, const char *seg_name);
weft_status_t weft_tp_shm_bell_open(struct shm_conn *c, const char *peer_seg_name);
void weft_tp_shm_bell_ring(struct shm_conn *c);
bool weft_tp_shm_arm(struct weft_tp *tp);
void weft_tp_shm_disarm(struct weft_tp *tp);
void weft_tp_shm_wake(struct weft_conn *conn);

/* After a store @p c's peer may wait for: wake it if it sleeps. Nothing
 * (a test of one flag) for a peer that never sleeps. */
static inline void weft_tp_shm_ring(struct shm_conn *c)
{
	if (c->bell_wr >= 0)
		weft_tp_shm_bell_ring(c);
}

/* shm_mem.c: the mem ops (weft_mem_alloc buffers mapped by local peers) */
weft_status_t weft_tp_shm_reg(struct weft_tp *tp, void *buf, size_t len, struct weft_mr **mr,
			      struct weft_mr_key *key);
void weft_tp_shm_dereg(struct weft_tp *tp, struct weft_mr *mr);
weft_status_t weft_tp_shm_map(struct weft_conn *conn, const struct weft_mr_key *key, void **addr);
void weft_tp_shm_unmap(struct weft_conn *conn, void *addr, size_t len);
/* Unmap every cached mapping of @p c (fini). */
void weft_tp_shm_unmap_all(struct shm_conn *c);

#endif
