/*
 * verbs.h — internals of the RDMA verbs transport (rdma-core RC queue
 * pairs). Not included outside transports/verbs/.
 *
 *   verbs_lib.c     libibverbs through dlopen (verbs_lib.h)
 *   verbs_select.c  WEFT_IB_HCA, port and GID choice (verbs_select.h)
 *   verbs_dev.c     opening the chosen device and port, its GID
 *   verbs_qp.c      registered regions, queue pairs INIT -> RTR -> RTS, and
 *                   the primitives: post an RDMA write (with immediate),
 *                   post receives for immediates, read completions
 *   verbs_slots.c   the message path over the primitives (below)
 *   verbs.c         init, the card exchange, score, props, abort, fini
 *
 * One device port per rank, one protection domain, one CQ for sends and
 * receives, and one RC queue pair per peer served. The peers served are
 * every other rank, except, when shm is enabled, the ranks of this host
 * (shm outranks verbs there: no QP or pinned memory is spent on them).
 *
 * Memory, registered once at init, page-aligned, one region each:
 *   land   per peer, nslots landing slots the peer writes into: a slot
 *          header (struct weft_slot_hdr, 64 B) then slot_bytes of data
 *   stage  per peer, the same layout: the sources of our writes
 *   ctl    per peer, struct verbs_ctl: one line the peer writes (its
 *          consumed count: our credits; its state), one line of sources
 *          for the writes we make to it
 *
 * Message path (interim: the shared RMA protocol of transports/common
 * replaces it when it lands). The landing-slot credit ring of
 * transports/common/slot_ring.h over RDMA: a sender copies a message into
 * its staging slots, one slot per slot_bytes (up to WEFT_SLOT_INLINE bytes
 * ride in the header), and writes each slot, header and data in one RDMA
 * write with immediate (the immediate: the slot's sequence number) into
 * the peer's landing slot; the send is done once its last byte is staged.
 * The receiver learns of each slot from its receive completion, checks the
 * header, delivers (or reduces) straight from the landing slot, and
 * returns credits by an RDMA write of its consumed count into the
 * sender's ctl line every credit_batch slots. Messages match in post order
 * per direction, as on shm.
 *
 * Send queue accounting: a request is signaled every VERBS_SIGNAL_EVERY
 * (and probes and state writes always); its completion retires it and all
 * before it. Staging slots need no completion: the receiver frees a slot
 * only after the data arrived, which is after the NIC read the source.
 *
 * Liveness. RC reports a dead peer only to a sender, after the retries
 * (WEFT_IB_TIMEOUT, WEFT_IB_RETRY_CNT) run out; a rank that only waits to
 * receive would never hear. So a busy connection that has not moved for
 * VERBS_STALL_S reads the peer's state word (abort and destroy write it)
 * and posts a probe, a small signaled write; a dead peer fails the probe
 * with IBV_WC_RETRY_EXC_ERR and the connection with WEFT_ERR_REMOTE.
 */
#ifndef WEFT_VERBS_H
#define WEFT_VERBS_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transports/common/slot_ring.h"
#include "transports/common/tp_queue.h"
#include "transports/transport.h"
#include "transports/verbs/verbs_lib.h"
#include "transports/verbs/verbs_ops.h"
#include "transports/verbs/verbs_select.h"

#define VERBS_SCORE	   50 /* above socket (10), below shm (100) */
#define VERBS_LINE	   64
#define VERBS_HDR	   sizeof(struct weft_slot_hdr)
#define VERBS_STALL_S	   0.1
#define VERBS_STALL_POLLS  256
#define VERBS_SIGNAL_EVERY 8
#define VERBS_POLL_BATCH   32
#define VERBS_WHY_BYTES	   256
/* Pinned memory one rank may register for its rings (landing + staging). */
#define VERBS_BUDGET (256ul << 20)
/* At fini and abort, how long to wait for the state writes to peers. */
#define VERBS_DRAIN_S 0.05

enum verbs_state {
	VERBS_STATE_NONE = 0, /* not written yet */
	VERBS_STATE_ALIVE,
	VERBS_STATE_ABORTED,
	VERBS_STATE_CLOSED, /* communicator destroyed */
};

/* A peer's control lines in our ctl region. */
struct verbs_ctl {
	alignas(VERBS_LINE) _Atomic uint64_t tail; /* written by the peer: our slots it freed */
	_Atomic uint64_t state;			   /* written by the peer: enum verbs_state */
	alignas(VERBS_LINE) uint64_t tail_src;	   /* sources of our writes to the peer */
	uint64_t state_src;
};

enum verbs_wr_kind {
	VERBS_WR_DATA = 1,
	VERBS_WR_CREDIT,
	VERBS_WR_PROBE,
	VERBS_WR_STATE,
	VERBS_WR_RECV,
};

/* Why a peer is not served (describe). */
enum verbs_peer_why {
	VERBS_PEER_UP = 0,
	VERBS_PEER_SELF,
	VERBS_PEER_LOCAL,    /* same host, and shm is enabled */
	VERBS_PEER_NO_VERBS, /* this rank has no usable device (tp->why) */
	VERBS_PEER_REMOTE,   /* the peer has none */
	VERBS_PEER_LINK,     /* link layers differ */
	VERBS_PEER_CONNECT,  /* a QP transition failed on one side */
};

struct verbs_tp;

/* A message in flight on a connection. */
struct verbs_req {
	struct weft_tp_req base;
	uint32_t phase; /* receive: enum verbs_rx_phase (verbs_slots.c) */
};

struct verbs_conn {
	struct weft_conn base;
	struct verbs_tp *tp;
	int idx; /* in tp->conns */
	struct ibv_qp *qp;
	bool up;     /* connected at init, both ends */
	bool broken; /* failed or aborted: every message fails */
	weft_status_t fail_status;
	enum verbs_peer_why why;

	/* The peer's regions, for our writes. */
	uint64_t ring_addr, ctl_addr; /* our ring and our ctl lines there */
	uint32_t ring_rkey, ctl_rkey;
	struct verbs_ctl *ctl; /* its lines here */

	/* Sending. */
	unsigned char *stage;
	struct weft_ring_tx txr;
	struct weft_tp_reqq sendq;
	/* Receiving. */
	unsigned char *land;
	struct weft_ring_rx rxr;
	uint64_t rx_arrived; /* slots whose receive completion came */
	struct weft_tp_reqq recvq;

	/* Send queue. */
	uint64_t sq_posted, sq_done;
	bool credit_owed;   /* a credit write waits for room */
	bool probing;	    /* a probe is in flight */
	bool state_pending; /* a state write (abort, fini) is in flight */

	/* Liveness. */
	unsigned stall_polls;
	double stall_since;
};

struct verbs_tp {
	struct weft_tp base;
	const struct weft_ibv *ibv;
	char why[VERBS_WHY_BYTES]; /* why this rank serves no peer; "" if it can */
	bool usable;
	bool closing; /* abort or fini began: failures are expected, not recorded */
	struct weft_tp_pool reqs;

	/* Settings. */
	const char *sysfs;
	uint32_t nslots;
	size_t slot_bytes, stride; /* stride: VERBS_HDR + slot_bytes */
	uint8_t tc, sl, timeout, retry_cnt;

	/* The device. */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct weft_verbs_port port;
	struct ibv_port_attr pattr;
	struct weft_verbs_gid gid;
	uint32_t psn;
	uint32_t sq_depth, max_wr;
	double port_Bps; /* from the port's width and speed */

	/* Registered regions. */
	unsigned char *land, *stage, *ctlr;
	size_t land_len, stage_len, ctl_len;
	struct ibv_mr *land_mr, *stage_mr, *ctl_mr;

	/* Peers. */
	int nconns;
	struct verbs_conn *conns; /* nconns */
	int *conn_of;		  /* rank -> index in conns, or -1 */
	uint8_t *peer_why;	  /* rank -> enum verbs_peer_why */
};

/* What each rank publishes at init (allgathered), followed by one struct
 * verbs_card_peer per rank. */
struct verbs_card {
	uint64_t magic;
	int32_t status; /* of this rank's init so far */
	int32_t usable;
	uint32_t link; /* enum weft_verbs_link */
	uint16_t lid;
	uint8_t mtu; /* enum ibv_mtu, active on the port */
	uint8_t port;
	uint32_t psn;
	uint32_t nslots;
	uint64_t slot_bytes;
	uint8_t gid[16];
	uint64_t land_addr, ctl_addr;
	uint32_t land_rkey, ctl_rkey;
};

struct verbs_card_peer {
	uint32_t qpn; /* of the QP toward that rank; 0 none */
	uint32_t idx; /* its index in our conns (rings, ctl lines) */
};

static inline struct verbs_tp *verbs_tp_of(struct weft_tp *tp)
{
	return weft_container_of(tp, struct verbs_tp, base);
}

/* verbs_dev.c: the port, its GID, the PD; false with tp->why set when
 * there is none to use. Errors in settings are WEFT_ERR_INVALID_ARG. */
weft_status_t weft_verbs_dev_open(struct verbs_tp *tp, bool *found);
void weft_verbs_dev_close(struct verbs_tp *tp);

/* verbs_qp.c */
weft_status_t weft_verbs_qp_setup(struct verbs_tp *tp);
void weft_verbs_qp_teardown(struct verbs_tp *tp);
/* INIT -> RTR -> RTS toward the peer described by @p card and @p qpn. */
int weft_verbs_qp_connect(struct verbs_tp *tp, struct verbs_conn *c, const struct verbs_card *card,
			  uint32_t qpn);
/* Post one RDMA write of [local, local + len) (in the region of @p lkey)
 * to (@p raddr, @p rkey); with @p imm, as a write with immediate carrying
 * @p imm. 0, EAGAIN if the send queue is full, else the errno of the post. */
int weft_verbs_post_write(struct verbs_conn *c, enum verbs_wr_kind kind, const void *local,
			  uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey, bool imm,
			  uint32_t imm_value);
/* Free send queue entries on @p c. */
static inline uint32_t weft_verbs_sq_room(const struct verbs_conn *c)
{
	return c->tp->sq_depth - (uint32_t)(c->sq_posted - c->sq_done);
}
int weft_verbs_post_recvs(struct verbs_conn *c, uint32_t n);
/* Read up to VERBS_POLL_BATCH completions and hand each to verbs_slots.c;
 * the number read, or -1 when the CQ failed (recorded). */
int weft_verbs_poll(struct verbs_tp *tp);
/* Wait up to @p seconds for the state writes in flight. */
void weft_verbs_qp_drain(struct verbs_tp *tp, double seconds);

/* verbs_slots.c */
weft_status_t weft_tp_verbs_isend(struct weft_conn *conn, struct weft_msg *msg);
weft_status_t weft_tp_verbs_irecv(struct weft_conn *conn, struct weft_msg *msg);
weft_status_t weft_tp_verbs_progress(struct weft_tp *tp);
void weft_verbs_fail_all(struct verbs_conn *c, weft_status_t status);
/* Completions (from weft_verbs_poll). */
void weft_verbs_on_recv(struct verbs_conn *c, uint32_t imm, uint32_t len);
void weft_verbs_on_error(struct verbs_conn *c, enum verbs_wr_kind kind, int status,
			 uint32_t vendor_err);
void weft_verbs_on_probe(struct verbs_conn *c);

#endif
