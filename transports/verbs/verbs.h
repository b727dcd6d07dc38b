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
 *   verbs_lanes.c   the sub-flows of a connection: WEFT_IB_QPS_PER_CONN
 *                   and WEFT_SPRAY, which lane a write takes, what each
 *                   lane carried (the signals op)
 *   verbs_counters.c  congestion signals from the port's hw_counters
 *   verbs.c         init, the card exchange, score, props, abort, fini
 *
 * One device port per rank, one protection domain, one CQ for sends and
 * receives, and per peer served WEFT_IB_QPS_PER_CONN RC queue pairs
 * (lanes; 1 by default). The peers served are every other rank, except,
 * when shm is enabled, the ranks of this host (shm outranks verbs there:
 * no QP or pinned memory is spent on them).
 *
 * Lanes. Each QP of a connection has its own QPN, and on RoCE v2 the NIC
 * derives the UDP source port from it, so a fat tree's ECMP hashes the
 * lanes onto different spines. Lane 0 carries everything but rendezvous
 * data: slots, descriptors, credits, probes and state writes, so what
 * liveness and ordering rest on is what it was with one QP. Rendezvous
 * data writes (the large pieces) go to any lane: the protocol assumes no
 * order between writes (a piece is visible when its immediate is taken),
 * so which QP delivers it does not matter to the receiver, and only the
 * sender chooses (WEFT_SPRAY, which the ranks need not agree on):
 *   rr        lane after lane, so each carries 1/K of the pieces
 *   adaptive  pieces in proportion to each lane's drain rate (bytes
 *             completed per second of the lane having data in flight,
 *             over its last few completions; bounded by what its oldest
 *             write has managed while it waits), by smooth weighted round
 *             robin, so a lane whose path is congested or slower carries
 *             less, and still a trickle that keeps its rate measured
 *             (verbs_lanes.c says why this and not "the lane that would
 *             finish soonest").
 * With more than one lane, rendezvous pieces are at most VERBS_LANE_PIECE
 * bytes (the receiver cuts them), so that one chunk spreads over lanes.
 * Every lane has its receives posted (zero-SGE); a receive's wr_id names
 * its connection and lane, so the lane that consumed one gets it back. A
 * lane whose path dies fails its own data writes (IBV_WC_RETRY_EXC_ERR),
 * which fails the connection's messages as a failed write on lane 0 would.
 *
 * Pacing. On verbs Weft's pacer stays off (the transport's properties say
 * rate_controlled, and core/gate.c then gives its connections no pacer,
 * whatever WEFT_PACER says): a RoCE NIC runs DCQCN on every QP in
 * hardware, and a second controller stacked on it would fight it. What
 * Weft keeps is the spraying weights, from completion delay.
 *
 * Messages: rma_proto.h says how (eager landing slots with credits,
 * receiver-driven rendezvous through a descriptor ring, bounce pieces for
 * reducing receives). This transport gives it the RDMA write with
 * immediate (IBV_WR_RDMA_WRITE_WITH_IMM, every one signaled: the protocol
 * takes each write's completion), one zero-SGE receive per immediate, the
 * CQ, and ibv_reg_mr for its region and the rendezvous buffers.
 *
 * wr_id: a write's is its struct weft_rma_op (16-byte aligned; its lane
 * is kept in the op's transport context); a state write's carries the
 * connection's index and a receive's the connection's index and lane,
 * tagged in the low bits (VERBS_WR_*), since an error completion has no
 * opcode.
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
/* Lanes (QPs) per connection: WEFT_IB_QPS_PER_CONN, at most this many. */
#define VERBS_MAX_LANES 8
/* With lanes, the largest rendezvous piece (the receiver cuts them). */
#define VERBS_LANE_PIECE (128u << 10)
/* Adaptive spraying (verbs_lanes.c): the gain of the EWMAs of a lane's
 * bytes and busy time per completion, and the most credit (in pieces) a
 * lane may bank or owe. */
#define VERBS_LANE_GAIN	      0.125
#define VERBS_LANE_CREDIT_MAX 2.0

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

/* A receive's wr_id: its connection and lane. */
static inline uint64_t weft_verbs_wr_recv(int idx, unsigned lane)
{
	return weft_verbs_wr_tagged(idx * VERBS_MAX_LANES + (int)lane, VERBS_WR_RECV);
}

struct verbs_tp;

/* One QP of a connection. */
struct verbs_lane {
	struct ibv_qp *qp;
	uint32_t sq_out;  /* send queue entries not completed */
	uint32_t rq_owed; /* receives consumed here that the protocol has not reposted */
	/* Sending: what the lane has in flight and has carried. */
	uint64_t out_bytes;  /* rendezvous data posted, not completed */
	uint32_t out_writes; /* the same, in writes */
	uint64_t bytes;	     /* every completed write's bytes, since init */
	uint64_t seen_bytes; /* bytes at the last signals query */
	/* Adaptive: the data drain rate (acc_bytes / acc_busy, EWMAs per
	 * completion); when the oldest data write in flight began to drain
	 * (its post, or the completion before it); busy seconds since the
	 * last completion, and the last event. */
	double rate_Bps; /* 0: not measured yet */
	double acc_bytes, acc_busy;
	double head_since;
	double busy, busy_mark;
	double credit; /* smooth weighted round robin, in pieces */
};

struct verbs_conn {
	struct weft_conn base;
	struct verbs_tp *tp;
	int idx;				 /* in tp->conns */
	struct verbs_lane lane[VERBS_MAX_LANES]; /* tp->nlanes; lane 0 takes the control traffic */
	unsigned rr_next;			 /* the lane after the last data write's */
	bool recvs_posted;			 /* every lane's receives were posted */
	bool up;				 /* connected at init, both ends */
	enum verbs_peer_why why;
	struct weft_rma_conn rc; /* the protocol's side of it */

	uint64_t ctl_addr; /* our state line in the peer's state region */
	uint32_t ctl_rkey;
	struct verbs_ctl *ctl; /* its line here */

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
	unsigned nlanes; /* WEFT_IB_QPS_PER_CONN */
	enum weft_spray spray;

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

/* What each rank publishes at init (allgathered), followed by one peer
 * entry per rank: its index in our conns (state lines; UINT32_MAX none)
 * and the QP number of each lane toward it (0 none), nlanes + 1 words. */
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
/* INIT -> RTR -> RTS of every lane toward the peer described by @p card,
 * whose lanes toward us are @p qpn[0 .. nlanes). */
int weft_verbs_qp_connect(struct verbs_tp *tp, struct verbs_conn *c, const struct verbs_card *card,
			  const uint32_t *qpn);
/* Move every lane of @p c to ERR (abort). */
void weft_verbs_qp_error(struct verbs_conn *c);
/* A signaled RDMA write of [local, local + len) (under lkey) to (raddr,
 * rkey), with an immediate when imm. */
struct verbs_write {
	uint64_t wr_id;
	const void *local;
	uint32_t lkey, len;
	uint64_t raddr;
	uint32_t rkey;
	bool imm;
	uint32_t imm_value;
};
/* Post @p w on @p lane of @p c. 0, EAGAIN if the lane's send queue is full
 * (one entry stays free for a state write unless @p last), else the errno
 * of the post. */
int weft_verbs_post_write(struct verbs_conn *c, unsigned lane, const struct verbs_write *w,
			  bool last);
/* @p n receives on @p lane. */
int weft_verbs_post_recvs(struct verbs_conn *c, unsigned lane, uint32_t n);
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

/* verbs_lanes.c */
/* WEFT_IB_QPS_PER_CONN and WEFT_SPRAY. */
weft_status_t weft_verbs_read_lanes(struct verbs_tp *tp);
/* The lane the next rendezvous data write takes. */
unsigned weft_verbs_lane_pick(struct verbs_conn *c);
/* @p op (of op->len bytes) was posted on @p lane. */
void weft_verbs_lane_posted(struct verbs_conn *c, unsigned lane, struct weft_rma_op *op);
/* @p op completed (@p ok: successfully); its lane. */
unsigned weft_verbs_lane_done(struct verbs_conn *c, struct weft_rma_op *op, bool ok);
/* ", 4 QPs, spray adaptive" where there is more than one lane, else "". */
void weft_verbs_lanes_describe(const struct verbs_tp *tp, char *buf, size_t len);
int weft_tp_verbs_signals(struct weft_conn *conn, struct weft_tp_signal *out, int max);

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
/* A failed completion's words: the status, and what the peer's state line
 * says of it. */
void weft_verbs_wc_why(struct verbs_conn *c, const struct ibv_wc *wc, char *buf, size_t len);

#endif
