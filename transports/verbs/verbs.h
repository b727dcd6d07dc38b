/*
 * verbs.h — internals of the RDMA verbs transport (rdma-core RC queue
 * pairs). Not included outside transports/verbs/.
 *
 *   verbs_lib.c     libibverbs through dlopen (verbs_lib.h)
 *   verbs_select.c  WEFT_IB_HCA, port and GID choice (verbs_select.h)
 *   verbs_dev.c     opening the chosen device and port, its GID
 *   verbs_qp.c      queue pairs INIT -> RTR -> RTS, the state lines, and
 *                   the primitives: post an RDMA write with immediate, post
 *                   receives for immediates, read completions
 *   verbs_rma.c     the message path: transports/common/rma_proto.h (the
 *                   protocol ofi's rma path runs too) over those primitives,
 *                   with registration and the peer's state as liveness
 *   verbs_counters.c  congestion signals from the port's hw_counters
 *   verbs.c         init, the card exchange, score, props, abort, fini
 *
 * One device port per rank, one protection domain, one CQ for sends and
 * receives, and one RC queue pair per peer served. The peers served are
 * every other rank, except, when shm is enabled, the ranks of this host
 * (shm outranks verbs there: no QP or pinned memory is spent on them).
 *
 * Messages: rma_proto.h says how (eager landing slots with credits,
 * receiver-driven rendezvous through a descriptor ring, bounce pieces for
 * reducing receives). This transport gives it the RDMA write with
 * immediate (IBV_WR_RDMA_WRITE_WITH_IMM, every one signaled: the protocol
 * takes each write's completion), one zero-SGE receive per immediate, the
 * CQ, and ibv_reg_mr for its region and the rendezvous buffers.
 *
 * wr_id: a write's is its struct weft_rma_op (16-byte aligned); a
 * receive's and a state write's carry the connection's index, tagged in
 * the low bits (VERBS_WR_*), since an error completion has no opcode.
 *
 * State lines. Besides the protocol's region, a small registered region
 * holds one line per peer that the peer writes its state into (abort and
 * destroy write ABORTED or CLOSED before the QPs go). A stalled connection
 * reads it (rma_proto's peer_gone), so a rank that only receives hears of
 * a peer that aborted; and a write that fails says so when the peer's line
 * says it left.
 *
 * Liveness. RC reports a dead peer only to a sender, after the retries
 * (WEFT_IB_TIMEOUT, WEFT_IB_RETRY_CNT) run out; rma_proto's watchdog makes
 * every stalled connection a sender: after stall_s it checks the pid (a
 * peer of this host), the state line, then posts a probe write, which a
 * dead peer fails with IBV_WC_RETRY_EXC_ERR.
 */
#ifndef WEFT_VERBS_H
#define WEFT_VERBS_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transports/common/rma_proto.h"
#include "transports/transport.h"
#include "transports/verbs/verbs_counters.h"
#include "transports/verbs/verbs_lib.h"
#include "transports/verbs/verbs_ops.h"
#include "transports/verbs/verbs_select.h"

#define VERBS_SCORE	 50 /* above socket (10), below shm (100) */
#define VERBS_LINE	 64
#define VERBS_POLL_BATCH 16
#define VERBS_WHY_BYTES	 256
/* Pinned memory one rank's protocol region may take (landing, staging,
 * descriptors and bounce pieces for every peer). */
#define VERBS_BUDGET (256ul << 20)
/* The pipelining chunk (rendezvous moves it in one write). */
#define VERBS_CHUNK (512u << 10)
/* At fini and abort, how long to wait for the state writes to peers. */
#define VERBS_DRAIN_S 0.05

enum verbs_state {
	VERBS_STATE_NONE = 0, /* not written yet */
	VERBS_STATE_ALIVE,
	VERBS_STATE_ABORTED,
	VERBS_STATE_CLOSED, /* communicator destroyed */
};

/* A peer's line in our state region: what it wrote, and the source of
 * what we write to it. */
struct verbs_ctl {
	alignas(VERBS_LINE) _Atomic uint64_t state; /* written by the peer: enum verbs_state */
	uint64_t state_src;
};

/* The low bits of a wr_id that is not an op (ops are 16-byte aligned). */
enum verbs_wr_tag {
	VERBS_WR_OP = 0,
	VERBS_WR_RECV = 1,
	VERBS_WR_STATE = 2,
	VERBS_WR_TAG_MASK = 15,
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

static inline uint64_t weft_verbs_wr_tagged(int idx, enum verbs_wr_tag tag)
{
	return (uint64_t)idx << 4 | tag;
}

struct verbs_tp;

struct verbs_conn {
	struct weft_conn base;
	struct verbs_tp *tp;
	int idx; /* in tp->conns */
	struct ibv_qp *qp;
	bool up; /* connected at init, both ends */
	enum verbs_peer_why why;
	struct weft_rma_conn rc; /* the protocol's side of it */

	uint64_t ctl_addr; /* our state line in the peer's state region */
	uint32_t ctl_rkey;
	struct verbs_ctl *ctl; /* its line here */

	uint32_t sq_out;	   /* send queue entries not completed */
	bool state_pending;	   /* a state write (abort, fini) is in flight */
	uint64_t seen_tx, seen_ce; /* hw counters at this connection's last signals query */
};

struct verbs_tp {
	struct weft_tp base;
	const struct weft_ibv *ibv;
	char why[VERBS_WHY_BYTES]; /* why this rank serves no peer; "" if it can */
	bool usable;
	bool closing; /* abort or fini began: failures are expected, not recorded */

	/* Settings. */
	const char *sysfs;
	struct weft_rma_geom geom;
	uint8_t tc, sl, timeout, retry_cnt;

	/* The device. */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct weft_verbs_port port;
	struct ibv_port_attr pattr;
	struct weft_verbs_gid gid;
	uint32_t psn;
	uint32_t sq_depth, rq_depth, max_wr;
	double port_Bps; /* from the port's width and speed */
	struct weft_verbs_counters counters;

	/* The protocol, and the state lines. */
	struct weft_rma rma;
	bool rma_ready;
	unsigned char *ctlr;
	size_t ctl_len;
	struct ibv_mr *ctl_mr;

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
	uint8_t gid[16];
	uint64_t ctl_addr;
	uint32_t ctl_rkey;
	struct weft_rma_card rma;
};

struct verbs_card_peer {
	uint32_t qpn; /* of the QP toward that rank; 0 none */
	uint32_t idx; /* its index in our conns (state lines) */
};

static inline struct verbs_tp *verbs_tp_of(struct weft_tp *tp)
{
	return weft_container_of(tp, struct verbs_tp, base);
}

static inline struct verbs_conn *verbs_conn_of(struct weft_rma_conn *rc)
{
	return weft_container_of(rc, struct verbs_conn, rc);
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
/* Post one signaled RDMA write of [local, local + len) (under @p lkey) to
 * (@p raddr, @p rkey), with immediate @p imm, as @p wr_id. 0, EAGAIN if
 * the send queue is full (one entry stays free for a state write unless
 * @p last), else the errno of the post. */
int weft_verbs_post_write(struct verbs_conn *c, uint64_t wr_id, const void *local, uint32_t lkey,
			  uint32_t len, uint64_t raddr, uint32_t rkey, bool imm, uint32_t imm_value,
			  bool last);
int weft_verbs_post_recvs(struct verbs_conn *c, uint32_t n);
/* Read up to @p max completions into the protocol's form (state writes
 * are taken here); the number, or WEFT_ERR_SYSTEM when the CQ failed. */
int weft_verbs_poll(struct verbs_tp *tp, struct weft_rma_cqe *out, int max);
/* Wait up to @p seconds for the state writes in flight. */
void weft_verbs_qp_drain(struct verbs_tp *tp, double seconds);
/* What the peer of @p c last wrote into its state line. */
static inline enum verbs_state weft_verbs_peer_state(const struct verbs_conn *c)
{
	return (enum verbs_state)atomic_load_explicit(&c->ctl->state, memory_order_acquire);
}

/* verbs_rma.c */
/* The geometry from WEFT_IB_SLOTS and WEFT_IB_SLOT_BYTES (and the port's
 * largest message, once known). */
weft_status_t weft_verbs_read_geom(struct verbs_tp *tp);
/* The protocol's region, registered: WEFT_ERR_NOT_SUPPORTED with tp->why
 * when the device will not register it (the job goes on without verbs). */
weft_status_t weft_verbs_rma_init(struct verbs_tp *tp);
weft_status_t weft_verbs_rma_connect(struct verbs_tp *tp, struct verbs_conn *c,
				     const struct verbs_card *card);
/* Let the writes in flight leave (fini in order), bounded. */
void weft_verbs_rma_flush(struct verbs_tp *tp);
weft_status_t weft_tp_verbs_isend(struct weft_conn *conn, struct weft_msg *msg);
weft_status_t weft_tp_verbs_irecv(struct weft_conn *conn, struct weft_msg *msg);
weft_status_t weft_tp_verbs_progress(struct weft_tp *tp);
int weft_tp_verbs_signals(struct weft_conn *conn, struct weft_tp_signal *out, int max);
/* A failed completion's words: the status, and what the peer's state line
 * says of it. */
void weft_verbs_wc_why(struct verbs_conn *c, const struct ibv_wc *wc, char *buf, size_t len);

#endif
