/*
 * socket.h — the TCP transport's objects, shared by its files:
 * socket_conn.c (settings, listener, connecting, ops table), socket_door.c
 * (what the listener accepts), socket_lazy.c (connections made during the
 * job), socket_data.c (queues, progress), socket_tx.c and socket_rx.c (the
 * two directions of the data path), socket_ack.c (what was sent and not yet
 * acknowledged), socket_path.c (stalls, failover, a peer that is gone),
 * socket_repath.c (moving a sub-flow off a congested or slow path),
 * socket_pace.c (the pacer's signals) and socket_io.c (the system calls).
 *
 * Connections. Each peer pair is joined by nsocks TCP connections (data
 * sub-flows); the lower rank connects, the higher accepts. Every connection
 * starts with the handshake of util/handshake.h (role WEFT_HS_SOCKET, the
 * communicator's id, both ranks, payload {slot, nsocks, generation}), in
 * which each side proves it holds the communicator's key without sending
 * it; nothing else is read before it succeeds. The listener holds at most
 * WEFT_MAX_PENDING handshakes (the oldest dropped for a new one; a
 * connector dropped so tries again) and drops one after
 * WEFT_HANDSHAKE_TIMEOUT.
 *
 * Connecting lazily (env->connect_lazy), a pair connects when one of its
 * ranks first has a message for the other. If that is the higher rank, it
 * cannot connect itself (the lower always does, so that two ranks starting
 * at once still make one connection): it calls, a handshake with role
 * WEFT_HS_CALL, to the lower rank's listener, which the lower rank
 * answers by connecting as usual. Both keep the call's socket open until
 * the connection is up, so that the caller hears at once (refused, reset)
 * if the peer is gone.
 *
 * Frames. Each direction of each socket carries frames: a 48-byte header
 * (struct weft_sock_frame), the sender's acknowledgement vector (nacks
 * entries, one per slot: below), and frag_len bytes of payload. A message
 * of len bytes is cut into nchunks = max(1, ceil(len / chunk)) fragments;
 * the header names the message (seq, its index among this direction's
 * messages, with its tag and length) and the fragment (off), and the
 * receiver puts each fragment where it belongs, whichever socket it came
 * on. Which socket carries fragment i is the sender's choice (WEFT_SPRAY):
 * rr puts it on socket (s0 + i) % nsocks, s0 where the previous message in
 * the direction ended; adaptive gives it to the first socket whose kernel
 * has taken its previous one (TCP_NOTSENT_LOWAT bounds what the kernel
 * holds unsent, so a socket whose path drains slower takes fewer). On each
 * socket fragments go in queue order, so a socket whose next fragment
 * belongs to a receive not yet posted waits with its header read, and no
 * fragment is ever buffered. If the two ends disagree (a tag or length
 * mismatch), the first header read of the message shows it.
 *
 * Acknowledgements and failover (WEFT_REPATH stall or stall+congestion; docs/
 * reliability.md). Each data frame carries fseq, its number on its socket
 * (counted from 1 for each new socket in a slot: its generation), and
 * every header the sender's count of data frames read whole on each slot
 * of the connection, with the slot's generation: cumulative acks, piggy-
 * backed on whatever goes the other way. Where nothing does, a control
 * frame (F_CTL, kind CTL_ACK) carries them on the connection's control
 * socket (the slot after the data slots), which never carries data, so an
 * acknowledgement never waits behind data its receiver cannot place yet. A
 * send of more than WEFT_SOCK_COPY_MAX bytes per fragment completes when
 * every fragment is acknowledged; a smaller fragment is copied into the
 * connection's replay ring as it is written and its send completes then.
 * A sub-flow whose kernel stops hearing from the peer (socket_path.c) is
 * failed over: its unacknowledged frames are sent again on the others
 * (F_RESEND), and the connector replaces it with a new socket (a new source
 * port, so a new ECMP path) in the same slot, one generation up; the
 * receiver drops a fragment it has already (a bitmap per receive) and
 * delivers a fragment another socket had begun from where that one
 * stopped. One more slot, after the control socket, takes a probe
 * (socket_repath.c).
 */
#ifndef WEFT_TP_SOCKET_H
#define WEFT_TP_SOCKET_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "transports/common/tp_bounce.h"
#include "transports/common/tp_queue.h"
#include "transports/transport.h"
#include "util/handshake.h"
#include "util/settings.h"

struct tcp_info; /* <linux/tcp.h>, in the files that read it */

#define WEFT_SOCK_MAX_NSOCKS  16
#define WEFT_SOCK_MAX_SLOTS   (WEFT_SOCK_MAX_NSOCKS + 2) /* data, control, probe */
#define WEFT_SOCK_FRAME_MAGIC 0x57465447u		 /* "WFTG" */
#define WEFT_SOCK_RETRIES     64 /* handshakes a connector tries if dropped */

/* The public half of a socket's handshake (its payload). */
struct weft_sock_hello {
	uint32_t index;	 /* slot: 0..nsocks-1 data, nsocks control, nsocks+1 probe */
	uint32_t nsocks; /* a call: 0; a re-path call: WEFT_SOCK_CALL_REPATH */
	uint32_t gen;	 /* the socket's generation in its slot (from 1) */
	uint32_t mask;	 /* a re-path call: the slots to replace */
};

/* A call's nsocks field when the higher rank asks for new sockets. */
#define WEFT_SOCK_CALL_REPATH 0xfffffffeu

/* Frame header flags. */
enum {
	WEFT_SOCK_F_ACKREQ = 1u << 0, /* a send waits for this fragment's acknowledgement */
	WEFT_SOCK_F_RESEND = 1u << 1, /* sent again after its sub-flow failed */
	WEFT_SOCK_F_CTL = 1u << 2,    /* a control frame: seq is its kind, no payload */
};

/* Control frames (F_CTL): seq holds the kind, off and len its arguments. */
enum weft_sock_ctl_kind {
	WEFT_SOCK_CTL_ACK = 1,	   /* only the acknowledgements */
	WEFT_SOCK_CTL_BYE = 2,	   /* the sender is closing: EOF follows, no more frames */
	WEFT_SOCK_CTL_REPLACE = 3, /* to the connector: slot off, generation len, action tag */
	WEFT_SOCK_CTL_ACKNOW = 4,  /* acknowledge now (a sender flushing at its end) */
};

/* What a CTL_REPLACE asks of the connector (its tag). */
enum weft_sock_replace_action {
	WEFT_SOCK_REPLACE_NEW = 0, /* a new socket in the slot (its path is bad) */
	WEFT_SOCK_REPLACE_OPEN,	   /* open the parked slot (a probe) */
	WEFT_SOCK_REPLACE_PARK,	   /* from the connector: it closes slot off for good */
};

struct weft_sock_frame {
	uint32_t magic;
	uint32_t frag_len;
	uint64_t tag;
	uint64_t len;  /* whole message */
	uint64_t off;  /* of this fragment in the message */
	uint64_t seq;  /* the message's index among this direction's messages */
	uint32_t fseq; /* data frame number on its socket, from 1 (control: 0) */
	uint16_t flags;
	uint16_t nacks; /* acknowledgement entries after the header */
};

_Static_assert(sizeof(struct weft_sock_frame) == 48, "frame header is 48 bytes");

/* One slot's acknowledgement: data frames read whole on its socket of
 * generation gen. */
struct weft_sock_ack {
	uint32_t gen;
	uint32_t frames;
};

#define WEFT_SOCK_HDR_MAX                                                                          \
	(sizeof(struct weft_sock_frame) + WEFT_SOCK_MAX_SLOTS * sizeof(struct weft_sock_ack))

enum weft_sock_phase {
	WEFT_SOCK_IDLE = 0,   /* connector: not created yet; acceptor: not arrived */
	WEFT_SOCK_CONNECTING, /* connector: non-blocking connect() in flight */
	WEFT_SOCK_HANDSHAKE,  /* connector: the handshake (util/handshake.h) */
	WEFT_SOCK_UP,
	WEFT_SOCK_DOWN,	  /* failed over: waiting for its replacement */
	WEFT_SOCK_CLOSED, /* the connection failed */
};

/* The higher rank's call to the lower (lazy connections). */
enum weft_sock_call {
	WEFT_SOCK_CALL_NONE = 0,
	WEFT_SOCK_CALL_CONNECTING,
	WEFT_SOCK_CALL_HANDSHAKE,
	WEFT_SOCK_CALL_SENT,	 /* waiting for the connection; watching the call for EOF */
	WEFT_SOCK_CALL_ANSWERED, /* the lower rank says its sockets are on their way */
};

/* What the lower rank writes on a call before it closes it once its own
 * sockets to the caller are through their handshake: the caller then
 * waits for them instead of taking the close for the peer's death. */
#define WEFT_SOCK_CALL_ANSWER 'U'

/* Small frames queued on one socket leave in one sendmsg, up to this many
 * after the current one and while the batch is under this many bytes. */
#define WEFT_SOCK_TX_BATCH	 15
#define WEFT_SOCK_TX_BATCH_BYTES (64u << 10)

/* Fragments up to this size are copied into the replay ring as they are
 * written, so their send completes then rather than an acknowledgement
 * later (socket_ack.c says why this size). */
#define WEFT_SOCK_COPY_MAX (64u << 10)

/* Frames written on a socket and not yet acknowledged, at most. */
#define WEFT_SOCK_SENT_PER_SLOT 128

/* Fragments of a receive tracked in the request itself (a larger receive
 * allocates its bitmap). */
#define WEFT_SOCK_INLINE_FRAGS 256

/* A message in flight on a connection (socket_data.c). */
struct weft_sock_req {
	struct weft_tp_req base;
	unsigned s0;	  /* rr: the socket of fragment 0 */
	uint64_t seq;	  /* index in its direction (frame header) */
	uint64_t nchunks; /* fragments */
	uint64_t left;	  /* fragments not yet finished */
	uint64_t dealt;	  /* adaptive send: fragments handed to a socket */
	/* Receive: the fragments delivered (a resent one is dropped), inline
	 * up to WEFT_SOCK_INLINE_FRAGS; ackreq: a fragment asked for an
	 * acknowledgement, owed when the receive completes. */
	uint64_t *done;
	uint64_t done_inline[WEFT_SOCK_INLINE_FRAGS / 64];
	bool ackreq;
};

/* A data frame written (or being written) on a socket and not yet
 * acknowledged (socket_ack.c): enough to write it again elsewhere. */
struct weft_sock_sent {
	struct weft_sock_sent *next;
	struct weft_sock_req *req; /* counts toward req's completion at its ack; NULL: copied */
	const char *src;	   /* the payload: the poster's buffer, or the replay ring */
	char *copy;		   /* its room in the replay ring (NULL: none) */
	uint32_t copy_bytes;	   /* ring bytes it holds (0: none) */
	uint32_t fseq;		   /* on the socket it was last written to */
	struct weft_sock_frame hdr;
};

struct weft_sock_list {
	struct weft_sock_sent *head, *tail;
	unsigned n;
};

/* One socket's sending side. sent holds the frames written or being
 * written, in fseq order; wr is the first not wholly written (done bytes
 * of its header, acknowledgements and payload out). */
struct weft_sock_tx {
	struct weft_sock_list sent;
	struct weft_sock_sent *wr;
	size_t done;
	uint32_t next_fseq;
	/* rr: this socket's next own fragment */
	struct weft_sock_req *walk;
	uint64_t walk_chunk;
	/* Header bytes of wr (kept while partly written) and of the frames
	 * batched behind it (rebuilt at each write). */
	unsigned char hdr[WEFT_SOCK_TX_BATCH + 1][WEFT_SOCK_HDR_MAX];
	size_t hdr_len; /* of hdr[0] */
	/* Control frames waiting for a frame boundary (a bit per kind) and
	 * the bytes of the ones being written. */
	unsigned ctl_want;
	bool bye;	     /* BYE asked for on this socket: no data frame follows it */
	uint64_t ctl_arg[3]; /* CTL_REPLACE: slot, generation, action */
	unsigned char ctl[4 * WEFT_SOCK_HDR_MAX];
	size_t ctl_len, ctl_done;
};

/* One socket's receiving side: a staging buffer the kernel's bytes land in
 * (headers, small payloads), and the frame being read. */
#define WEFT_SOCK_STAGE (16u << 10)

struct weft_sock_rx {
	char *stage;
	size_t pos, len; /* unread bytes: stage[pos, len) */
	bool in_frame;	 /* hdr and its acknowledgements are read */
	bool discard;	 /* its payload is read and dropped */
	struct weft_sock_frame hdr;
	struct weft_sock_req *req; /* placed in this receive (NULL: not yet, or discard) */
	uint64_t chunk;
	size_t got;	 /* payload bytes consumed */
	size_t skip;	 /* payload bytes [0, skip) another socket delivered */
	uint32_t frames; /* data frames read whole on this socket */
};

/* What the failover logic knows of one socket (socket_path.c). */
/* Delivery-rate samples kept per socket in a probe's window (one a round). */
#define WEFT_SOCK_PROBE_SAMPLES 8

struct weft_sock_health {
	uint64_t acked;	    /* tcpi_bytes_acked at the last check */
	double progress_at; /* when acked last moved (or nothing was outstanding) */
	bool idle;	    /* nothing was in flight at the last check */
	uint32_t srtt_us;   /* the kernel's smoothed RTT while healthy */
	double dark_since;  /* failed over at (0: not dark) */
	double gone_at;	    /* when its path was first seen dark (for the logs) */
	uint16_t old_port;  /* the local port of the socket it replaces */
	unsigned tried;	    /* sockets tried in this slot since it went dark */
	unsigned failovers, repaths;
	/* Re-pathing (socket_repath.c): per round, the slot's share of CE
	 * marks and delivery rate against its siblings'. */
	uint32_t delivered, delivered_ce;
	uint64_t rate_bytes, rx_bytes; /* tcpi_bytes_acked, tcpi_bytes_received last round */
	double round_ce, round_Bps;    /* the last round's CE share and send rate */
	bool round_busy;	       /* it was limited by the network, not by Weft */
	uint64_t probe_bytes;	       /* bytes both ways when the probe came up */
	/* the network-limited tcpi_delivery_rate samples of the probe's window */
	double probe_rate[WEFT_SOCK_PROBE_SAMPLES];
	unsigned probe_nrate;
	unsigned hot_rounds, slow_rounds;
	double moved_at;
	double asked_at;     /* acceptor: when it last asked for a replacement */
	double probed_at;    /* when a quiet socket under a waiting receive was probed */
	bool draining;	     /* takes no new frames: being moved */
	bool parked;	     /* not in use, and not to be replaced (the spare probe slot) */
	bool parked_pending; /* to be parked once its peer closes it */
};

/* A fragment whose socket failed while it was being read: what was
 * delivered of it, so that its resent copy delivers only the rest. */
struct weft_sock_orphan {
	struct weft_sock_req *req; /* NULL: a free entry */
	uint64_t chunk;
	size_t delivered;
};

#define WEFT_SOCK_ORPHANS (2 * WEFT_SOCK_MAX_SLOTS)

struct weft_sock {
	int fd;
	enum weft_sock_phase phase;
	uint32_t gen;	    /* of the socket in this slot (0: none yet) */
	uint16_t port;	    /* the connector's port of it: the one ECMP hashes on */
	unsigned retries;   /* handshakes the listener dropped */
	double phase_since; /* connector: when this socket's connect started */
	struct weft_hs *hs; /* the connector's handshake, while it runs */
	struct weft_sock_tx tx;
	struct weft_sock_rx rx;
	uint64_t tx_bytes;	   /* payload bytes sent on this slot (sub-flow weights) */
	bool eof;		   /* the peer said BYE on it, or closed it */
	struct weft_bounce bounce; /* reduce receives land here */
	/* In the wait set (WEFT_WAIT, socket_wait.c): the descriptor and
	 * interest registered, and the SO_RCVLOWAT set on which descriptor. */
	int ep_fd, lowat_fd, lowat;
	uint32_t ep_events;
	struct tcp_counters { /* TCP_INFO at the previous signals query */
		uint32_t delivered, delivered_ce;
		uint64_t bytes_acked;
		uint64_t busy_us, rwnd_us; /* tcpi_busy_time, tcpi_rwnd_limited */
		uint32_t retrans;	   /* tcpi_total_retrans */
	} seen;
	struct weft_sock_health h;
};

struct weft_sock_queue {
	struct weft_tp_reqq q;
	unsigned s0;		    /* rr: socket where the next posted message starts */
	uint64_t seq;		    /* the next posted message's index */
	struct weft_sock_req *deal; /* adaptive send: first message with undealt fragments */
};

/* The replay ring (socket_ack.c): small fragments' copies, released as
 * they are acknowledged, in any order; the tail moves over released
 * blocks. */
struct weft_sock_ring {
	char *buf;
	size_t cap, head, tail; /* bytes: allocated [tail, head) modulo cap */
	size_t used;		/* bytes allocated (head == tail: 0 or cap) */
};

struct weft_sock_conn {
	struct weft_conn base;
	struct weft_sock_comm *sc;
	bool up;
	bool active;	      /* in sc->active */
	uint32_t rtt_us;      /* the kernel's RTT once connected (properties) */
	weft_status_t failed; /* != 0: every message fails with this */
	/* Lazily: in sc->connecting (progress moves it), since when; the call
	 * (ours to the lower rank, or the higher rank's to us), kept open until
	 * the connection is up. */
	bool listed;
	double since;
	int call_fd;
	enum weft_sock_call call;
	unsigned call_retries;
	struct weft_hs *call_hs; /* the call's handshake, while it runs */
	struct weft_sock_queue sendq, recvq;
	/* Acknowledgements and failover (WEFT_REPATH on). */
	struct weft_sock_sent *pool; /* records, WEFT_SOCK_SENT_PER_SLOT per slot */
	struct weft_sock_sent *free_sent;
	struct weft_sock_list resend;	   /* frames to write again, oldest first */
	struct weft_sock_ring ring;	   /* copies of small fragments */
	uint64_t unacked;		   /* records held (sent, not acknowledged) */
	uint64_t waiting;		   /* of which a send waits for (not copied) */
	uint64_t acks_seen, acks_at_check; /* records acknowledged: ever, at the last check */
	bool ack_owed, ack_urgent;	   /* frames read since the last acknowledgement sent */
	bool ack_stale;			   /* owed already at the last health check */
	bool ack_asked;	     /* ours may wait behind data: ask for them (CTL_ACKNOW) */
	bool seen_resend;    /* a resent frame came: a late original is dropped */
	unsigned ack_frames; /* data frames read since then */
	unsigned polls;	     /* progress calls that looked at the connection */
	bool peer_bye;	     /* the peer is closing (CTL_BYE) */
	bool bye_sent;	     /* this side is (the flush at fini) */
	double dark_since;   /* every sub-flow down or stalled since (0: not) */
	bool dark_heard;     /* ... and the watch hears the peer (said once) */
	unsigned checks;     /* progress calls since the health check */
	double next_check;
	int repath_fd; /* acceptor: a re-path call under way (-1 none) */
	struct weft_hs *repath_hs;
	double repath_since;
	uint32_t repath_mask;
	unsigned repath_calls;
	/* Re-pathing (socket_repath.c): the last round, and one probe (a
	 * second socket beside a single one) at a time. */
	double round_at, probe_at, probed_at;
	int probe; /* the slot probing (-1: none) */
	struct weft_sock_orphan orphans[WEFT_SOCK_ORPHANS];
	struct weft_sock_stats { /* for the statistics and the description */
		uint64_t failovers, repaths, probes, resent, dups, replaced;
	} st;
	struct weft_sock sock[WEFT_SOCK_MAX_SLOTS];
};

/* An accepted socket whose handshake has not finished. */
struct weft_sock_pending {
	struct weft_hs hs;
	double since;
};

/* WEFT_REPATH: what moves a sub-flow. */
enum weft_sock_repath {
	WEFT_SOCK_REPATH_OFF = 0,	  /* nothing (no acknowledgements, no failover) */
	WEFT_SOCK_REPATH_STALL,		  /* a stalled sub-flow fails over */
	WEFT_SOCK_REPATH_STALL_CONGESTION /* and a persistently marked or slow one moves */
};

/* What each rank publishes at comm_init (allgathered). */
struct weft_sock_card {
	uint64_t magic;
	int32_t status; /* weft_status_t of this rank's listener setup */
	uint32_t nsocks;
	uint64_t chunk;
	uint32_t addr_len;
	uint32_t spray;	 /* enum weft_spray */
	uint32_t repath; /* enum weft_sock_repath */
	uint32_t reserved;
	struct sockaddr_storage addr; /* IPv4, or IPv6 if the interface has only that */
};

/* The system calls the transport makes on its sockets, so that a unit test
 * can stand a fake network in for the kernel's (socket_io.c). */
struct weft_sock_io {
	int (*socket)(int domain, int type, int protocol);
	int (*connect)(int fd, const struct sockaddr *addr, socklen_t len);
	int (*accept4)(int fd, struct sockaddr *addr, socklen_t *len, int flags);
	ssize_t (*sendmsg)(int fd, const struct msghdr *mh, int flags);
	ssize_t (*recv)(int fd, void *buf, size_t len, int flags);
	int (*tcp_info)(int fd, struct tcp_info *ti);
	int (*shutdown)(int fd, int how);
	int (*close)(int fd);
};

/* The real calls, and the table a new transport instance takes (tests
 * point it elsewhere before init). */
extern const struct weft_sock_io weft_sock_io_kernel;
extern const struct weft_sock_io *weft_sock_io_default;

struct weft_sock_comm {
	struct weft_tp base;
	struct weft_tp_pool reqs;
	const struct weft_sock_io *io;
	int listen_fd;
	unsigned nsocks;
	unsigned nslots; /* nsocks, + control and probe slots with WEFT_REPATH on */
	enum weft_spray spray;
	enum weft_sock_repath repath;
	double stall_s;	    /* WEFT_PATH_STALL (0: from each socket's RTT) */
	double peer_dead_s; /* WEFT_PEER_DEAD */
	int notsent_lowat;  /* 0: the kernel's */
	int tos;	    /* < 0: the kernel's */
	bool paced;	    /* WEFT_PACER is on: say if ECN is not negotiated */
	bool ecn_noted;
	size_t chunk;
	size_t bounce_bytes;
	struct weft_sock_card *cards;	/* nranks */
	struct weft_sock_conn **conns;	/* nranks; created on first use */
	struct weft_sock_conn **active; /* connections that are up */
	int nactive;
	struct weft_sock_pending *pending; /* accepted, handshake under way */
	int npending, max_pending;	   /* max_pending: WEFT_MAX_PENDING */
	struct pollfd *pending_pfd;	   /* max_pending: one poll for them all */
	double hs_timeout_s;		   /* WEFT_HANDSHAKE_TIMEOUT */
	uint64_t refused;		   /* connections that failed the handshake */
	/* Lazily: connections under way, moved by progress (nranks room);
	 * progress calls since the listener was last looked at. */
	struct weft_sock_conn **connecting;
	int nconnecting;
	unsigned idle_polls;
	int ep_listen_fd; /* the listener in the wait set (lazily), socket_wait.c */
	uint32_t ep_listen_events;
};

extern const struct weft_tp_ops weft_tp_socket_ops;

/* socket_settings.c: the transport's settings (the ops table lists them),
 * reading them at init, and WEFT_REPATH's names. */
#define WEFT_TP_SOCKET_NSETTINGS 6
extern const struct weft_setting weft_tp_socket_settings[];
weft_status_t weft_tp_socket_read_settings(struct weft_sock_comm *sc);
const char *weft_tp_socket_repath_name(enum weft_sock_repath r);

/* Slots of a connection: data sockets, then (WEFT_REPATH on) control and probe. */
static inline unsigned weft_sock_ctl_slot(const struct weft_sock_comm *sc)
{
	return sc->nsocks;
}

static inline unsigned weft_sock_probe_slot(const struct weft_sock_comm *sc)
{
	return sc->nsocks + 1;
}

/* How a log line or an error names slot @p s, into @p buf: "sub-flow 2"
 * for a data socket, "the control socket", "the probe sub-flow" (the
 * second socket a single sub-flow opens to try another path). */
static inline const char *weft_sock_slot_name(const struct weft_sock_comm *sc, unsigned s,
					      char *buf, size_t len)
{
	if (s == weft_sock_ctl_slot(sc))
		snprintf(buf, len, "the control socket");
	else if (s == weft_sock_probe_slot(sc))
		snprintf(buf, len, "the probe sub-flow");
	else
		snprintf(buf, len, "sub-flow %u", s);
	return buf;
}

static inline bool weft_sock_acking(const struct weft_sock_comm *sc)
{
	return sc->repath != WEFT_SOCK_REPATH_OFF;
}

/* Bytes of a frame header with its acknowledgements on this connection. */
static inline size_t weft_sock_hdr_bytes(const struct weft_sock_comm *sc)
{
	return sizeof(struct weft_sock_frame) + sc->nslots * sizeof(struct weft_sock_ack);
}

/* socket_data.c */
weft_status_t weft_tp_socket_isend(struct weft_conn *conn, struct weft_msg *msg);
weft_status_t weft_tp_socket_irecv(struct weft_conn *conn, struct weft_msg *msg);
weft_status_t weft_tp_socket_progress(struct weft_tp *tp);
/* Fail every queued message of @p c with @p status and close its sockets. */
void weft_tp_socket_conn_fail(struct weft_sock_conn *c, weft_status_t status);
/* @p r leaves its queue and goes back to the pool; its message is done. */
void weft_tp_socket_req_finish(struct weft_sock_conn *c, struct weft_sock_queue *q,
			       struct weft_sock_req *r, weft_status_t status);
/* The peer is gone or broke the protocol on slot @p s (@p err: errno, 0
 * for EOF): record why once, fail everything. */
weft_status_t weft_tp_socket_peer_failed(struct weft_sock_conn *c, unsigned s, int err);
/* Shut and close slot @p s's socket (the slot keeps its state). */
void weft_tp_socket_close_fd(struct weft_sock_conn *c, unsigned s);

/* socket_tx.c: move slot @p s's sending side as far as the kernel takes;
 * point idle sending sides at a newly posted send. */
weft_status_t weft_tp_socket_tx(struct weft_sock_conn *c, unsigned s);
void weft_tp_socket_tx_posted(struct weft_sock_conn *c, struct weft_sock_req *r);
/* Ask for a control frame of @p kind on slot @p s at its next frame
 * boundary (CTL_REPLACE: the slot, its generation and the action). */
void weft_tp_socket_ctl(struct weft_sock_conn *c, unsigned s, enum weft_sock_ctl_kind kind,
			uint64_t a0, uint64_t a1, uint64_t a2);
/* Does slot @p s have frames or control frames to write? */
bool weft_tp_socket_tx_busy(const struct weft_sock_conn *c, unsigned s);

/* socket_rx.c: read slot @p s as far as the kernel has bytes and posted
 * receives take them. */
weft_status_t weft_tp_socket_rx(struct weft_sock_conn *c, unsigned s);
/* Should slot @p s be read now (a receive posted, acknowledgements
 * expected, a frame half read)? */
bool weft_tp_socket_rx_wanted(const struct weft_sock_conn *c, unsigned s);
/* A receive's fragment bitmap (inline or allocated); false without memory. */
bool weft_tp_socket_rx_bitmap(struct weft_sock_req *r);

/* socket_ack.c: records of sent frames, the replay ring, acknowledgements. */
weft_status_t weft_tp_socket_ack_init(struct weft_sock_conn *c);
void weft_tp_socket_ack_fini(struct weft_sock_conn *c);
/* The first frame to write again of message @p seq or a later one (NULL:
 * none); put @p rec, from that list, on slot @p s. */
struct weft_sock_sent *weft_tp_socket_resend_from(const struct weft_sock_conn *c, uint64_t seq);
void weft_tp_socket_resend_take(struct weft_sock_conn *c, unsigned s, struct weft_sock_sent *rec);
/* A record for a new frame of @p req's fragment @p chunk on slot @p s
 * (NULL: none free, the slot waits). */
struct weft_sock_sent *weft_tp_socket_sent_new(struct weft_sock_conn *c, unsigned s,
					       struct weft_sock_req *req, uint64_t chunk);
/* The frame of @p rec is wholly written on slot @p s: a copied one (or,
 * without acknowledgements, any) completes its send. */
void weft_tp_socket_sent_written(struct weft_sock_conn *c, unsigned s, struct weft_sock_sent *rec);
/* The peer acknowledges @p n of slot @p s's frames of generation @p gen. */
void weft_tp_socket_acked(struct weft_sock_conn *c, unsigned s, uint32_t gen, uint32_t n);
/* Slot @p s failed: its unacknowledged frames go to the resend list. */
void weft_tp_socket_sent_requeue(struct weft_sock_conn *c, unsigned s);
/* Drop every record (the connection failed). */
void weft_tp_socket_sent_drop(struct weft_sock_conn *c);
/* This rank's acknowledgement vector for the peer, into @p out (nslots). */
void weft_tp_socket_ack_vector(const struct weft_sock_conn *c, struct weft_sock_ack *out);

/* socket_path.c: the health checks (from progress), a failed sub-flow,
 * control frames, and the flush at the end. */
weft_status_t weft_tp_socket_health(struct weft_sock_conn *c);
/* Slot @p s failed (@p why for the log): fail it over, and have it
 * replaced. */
void weft_tp_socket_failover(struct weft_sock_conn *c, unsigned s, const char *why);
/* Slot @p s moves to a new path (re-pathing): as a failover, not counted as one. */
void weft_tp_socket_move(struct weft_sock_conn *c, unsigned s, const char *why);
/* Slot @p s's socket goes: its unacknowledged frames to the resend list,
 * the frame it was reading remembered, the socket closed; the slot's
 * phase is the caller's. Returns the frames moved. */
unsigned weft_tp_socket_retire(struct weft_sock_conn *c, unsigned s);
/* A control frame arrived on slot @p s. */
weft_status_t weft_tp_socket_on_ctl(struct weft_sock_conn *c, unsigned s,
				    const struct weft_sock_frame *h);
/* Slot @p s saw EOF or a reset (@p err, 0: EOF). */
weft_status_t weft_tp_socket_on_close(struct weft_sock_conn *c, unsigned s, int err);
/* Every socket the peer closed (after its BYE, or without acknowledgements)
 * and a message still waits: the connection fails (a receive posted after
 * the EOFs were read). */
weft_status_t weft_tp_socket_closed_check(struct weft_sock_conn *c);
/* Is slot @p s able to carry frames now? */
bool weft_tp_socket_usable(const struct weft_sock_conn *c, unsigned s);
/* Before the sockets close: say BYE, and wait (bounded) until what was
 * sent is acknowledged by the peer or its kernel. */
void weft_tp_socket_flush(struct weft_sock_comm *sc);
/* A sentence on @p c's sub-flows that are dark ("" if none). */
void weft_tp_socket_dark_note(const struct weft_sock_conn *c, char *buf, size_t len);

/* socket_repath.c: re-pathing on congestion or slowness, and probing with
 * one sub-flow (WEFT_REPATH=stall+congestion). */
void weft_tp_socket_repath_round(struct weft_sock_conn *c, double now);
/* A new socket came up in slot @p s. */
void weft_tp_socket_repath_up(struct weft_sock_conn *c, unsigned s);
/* The connector: open parked slot @p s (a probe the peer asked for). */
void weft_tp_socket_repath_open(struct weft_sock_conn *c, unsigned s);

/* socket_conn.c: the connection to @p peer (created on first use; NULL:
 * no memory); start the handshake of a connected socket @p fd to @p peer
 * (a call when @p call); accept what waits on the listener and move the
 * handshakes under way; move a connection's sockets along once
 * (WEFT_SUCCESS when up, WEFT_INPROGRESS, or the recorded error with the
 * connection failed). */
struct weft_sock_conn *weft_tp_socket_conn_get(struct weft_sock_comm *sc, int peer);
struct weft_hs *weft_tp_socket_hs_start(struct weft_sock_comm *sc, int fd, int peer, bool call,
					const struct weft_sock_hello *hello);
void weft_tp_socket_accept(struct weft_sock_comm *sc);
/* socket_door.c: drop every handshake under way (with a warning naming
 * @p why, or quietly when NULL). */
void weft_tp_socket_door_close(struct weft_sock_comm *sc, const char *why);
weft_status_t weft_tp_socket_conn_step(struct weft_sock_conn *c);
/* The connector, once up: move slot @p s (a replacement, a probe) along:
 * WEFT_SUCCESS when up, WEFT_INPROGRESS, or an error that fails the
 * connection (the peer refused: it is gone). */
weft_status_t weft_tp_socket_slot_step(struct weft_sock_conn *c, unsigned s);
/* socket_slot.c: the connector's slot @p s at init (a failure fails the
 * connection); a slot is up (counters afresh, a replacement logged). */
weft_status_t weft_tp_socket_connector_step(struct weft_sock_conn *c, unsigned s);
void weft_tp_socket_slot_up(struct weft_sock_conn *c, unsigned s);
/* socket_io.c: a connected socket's @p local port, or its peer's (0
 * unknown). */
uint16_t weft_tp_socket_port(int fd, bool local);

/* socket_lazy.c: lazily, from progress: take new sockets from the listener,
 * read their hellos and move the connections under way (ours, and those
 * peers asked for). */
weft_status_t weft_tp_socket_setup_progress(struct weft_sock_comm *sc);
/* Free the handshakes of @p c still under way (the connection fails). */
void weft_tp_socket_forget_handshakes(struct weft_sock_conn *c);
/* Put @p c on the list progress moves (once). */
void weft_tp_socket_list_connecting(struct weft_sock_comm *sc, struct weft_sock_conn *c);
/* The higher rank's call while its peer's sockets have not arrived. */
weft_status_t weft_tp_socket_call_step(struct weft_sock_conn *c);
/* An authenticated call from rank @p rank arrived on @p fd. */
bool weft_tp_socket_route_call(struct weft_sock_comm *sc, int fd, int rank,
			       const struct weft_sock_hello *hello, const char **why);
/* The acceptor: ask the connector, on a new connection, for new sockets in
 * the slots of @p mask (every data path is dark); moved by health. */
weft_status_t weft_tp_socket_repath_call(struct weft_sock_conn *c);

/* socket_wait.c: the wait ops (WEFT_WAIT=block). */
bool weft_tp_socket_arm(struct weft_tp *tp);
bool weft_tp_socket_settle(struct weft_tp *tp);
void weft_tp_socket_disarm(struct weft_tp *tp);

/* socket_pace.c: congestion signals from TCP_INFO and the pacer's rate
 * (the signal ops); the settings and socket options pacing needs. */
int weft_tp_socket_signals(struct weft_conn *conn, struct weft_tp_signal *out, int max);
void weft_tp_socket_pace(struct weft_conn *conn, double rate_Bps);
weft_status_t weft_tp_socket_read_pacing(struct weft_sock_comm *sc);
/* TCP_NOTSENT_LOWAT and IP_TOS on a new socket (best effort, logged). */
void weft_tp_socket_tune(struct weft_sock_comm *sc, int fd);
/* Once a connection is up: with the pacer on, warn once if ECN was not
 * negotiated (CE marks then never reach the pacer). */
void weft_tp_socket_check_ecn(struct weft_sock_conn *c);
#endif
