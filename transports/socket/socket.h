/*
 * socket.h — the TCP transport's objects, shared by socket_conn.c (listener,
 * handshake, connect, abort) and socket_data.c (framing, striping, progress).
 *
 * Wire format. Each peer pair is joined by nsocks TCP connections; the lower
 * rank connects, the higher accepts. Every connection starts with the
 * handshake of util/handshake.h (role WEFT_HS_SOCKET, the communicator's
 * id, both ranks, payload {socket index, nsocks}), in which each side
 * proves it holds the communicator's key without sending it; nothing else
 * is read before it succeeds. The listener holds at most WEFT_MAX_PENDING
 * handshakes (the oldest dropped for a new one; a connector dropped so
 * tries again) and drops one after WEFT_HANDSHAKE_TIMEOUT.
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
 * After that each direction of each socket carries frames: a 32-byte header
 * (magic, message tag, message length, offset in the message, fragment
 * length) and the fragment's bytes. A message of len bytes is cut into
 * nchunks = max(1, ceil(len / chunk)) fragments; fragment i goes on socket
 * (s0 + i) % nsocks, where s0 is where the previous message in the same
 * direction ended. Both ends compute the same placement from the posted
 * lengths, so no socket ever waits for another and a receiver reads straight
 * into the posted buffer. If the two ends disagree (a tag or length
 * mismatch), the first header of the message on socket s0 shows it: that is
 * where the receiver reports it.
 *
 * Spraying (WEFT_SPRAY=adaptive, the same on every rank): fragments are not
 * placed in advance. Each socket takes the next unsent fragment of the
 * direction's queue when the kernel has taken its previous one; with
 * TCP_NOTSENT_LOWAT bounding what the kernel holds unsent, a socket whose
 * path drains slower (another spine, a congested link) takes fewer, so each
 * sub-flow carries in proportion to the rate its path gives. The header's
 * seq (the message's index in its direction) and off tell the receiver
 * where a fragment belongs; on each socket fragments still go in queue
 * order, so a socket whose next fragment belongs to a receive not yet
 * posted waits with its header read, and no fragment is ever buffered.
 */
#ifndef WEFT_TP_SOCKET_H
#define WEFT_TP_SOCKET_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transports/common/tp_bounce.h"
#include "transports/common/tp_queue.h"
#include "transports/transport.h"
#include "util/handshake.h"

#define WEFT_SOCK_MAX_NSOCKS  16
#define WEFT_SOCK_FRAME_MAGIC 0x57465446u /* "WFTF" */
#define WEFT_SOCK_RETRIES     64	  /* handshakes a connector tries if dropped */

/* The public half of a socket's handshake (its payload). */
struct weft_sock_hello {
	uint32_t index; /* the socket's, 0..nsocks-1 (a call: 0) */
	uint32_t nsocks;
};

struct weft_sock_frame {
	uint32_t magic;
	uint32_t frag_len;
	uint64_t tag;
	uint64_t len; /* whole message */
	uint64_t off; /* of this fragment in the message */
	uint64_t seq; /* the message's index among this direction's messages */
};

enum weft_sock_phase {
	WEFT_SOCK_IDLE = 0,   /* connector: not created yet; acceptor: not arrived */
	WEFT_SOCK_CONNECTING, /* connector: non-blocking connect() in flight */
	WEFT_SOCK_HANDSHAKE,  /* connector: the handshake (util/handshake.h) */
	WEFT_SOCK_UP,
	WEFT_SOCK_CLOSED,
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

/* A message in flight on a connection: where its fragments start and how
 * many are not finished yet (socket_data.c). */
struct weft_sock_req {
	struct weft_tp_req base;
	unsigned s0;	  /* the socket of fragment 0 (rr) */
	uint64_t seq;	  /* index in its direction (frame header) */
	uint64_t nchunks; /* fragments */
	uint64_t left;	  /* fragments not yet finished */
	uint64_t dealt;	  /* adaptive send: fragments handed to a socket */
};

/* Where one socket's sender stands: the message whose fragment it is
 * sending and how much of header + fragment is out. */
struct weft_sock_tx {
	struct weft_sock_req *req; /* NULL: nothing queued for this socket */
	uint64_t chunk;		   /* fragment index in msg */
	size_t done;		   /* bytes of hdr + fragment written */
	struct weft_sock_frame hdr;
	struct weft_sock_frame ahead[WEFT_SOCK_TX_BATCH]; /* headers of a batch being sent */
};

struct weft_sock_rx {
	struct weft_sock_req *req; /* NULL: no posted receive has a fragment here */
	uint64_t chunk;
	size_t hdr_got;
	size_t frag_got; /* fragment bytes read (for reduce: delivered + in bounce) */
	struct weft_sock_frame hdr;
};

struct weft_sock {
	int fd;
	enum weft_sock_phase phase;
	unsigned retries;   /* handshakes the listener dropped */
	struct weft_hs *hs; /* the connector's handshake, while it runs */
	struct weft_sock_tx tx;
	struct weft_sock_rx rx;
	uint64_t tx_bytes;	   /* payload bytes sent on this socket (sub-flow weights) */
	bool eof;		   /* sprayed: the peer closed it between two frames */
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
};

struct weft_sock_queue {
	struct weft_tp_reqq q;
	unsigned s0;		    /* rr: socket where the next posted message starts */
	uint64_t seq;		    /* the next posted message's index */
	struct weft_sock_req *deal; /* adaptive send: first message with undealt fragments */
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
	struct weft_sock sock[WEFT_SOCK_MAX_NSOCKS];
};

/* An accepted socket whose handshake has not finished. */
struct weft_sock_pending {
	struct weft_hs hs;
	double since;
};

/* What each rank publishes at comm_init (allgathered). */
struct weft_sock_card {
	uint64_t magic;
	int32_t status; /* weft_status_t of this rank's listener setup */
	uint32_t nsocks;
	uint64_t chunk;
	uint32_t addr_len;
	uint32_t spray;		      /* enum weft_spray */
	struct sockaddr_storage addr; /* IPv4, or IPv6 if the interface has only that */
};

struct weft_sock_comm {
	struct weft_tp base;
	struct weft_tp_pool reqs;
	int listen_fd;
	unsigned nsocks;
	enum weft_spray spray;
	int notsent_lowat; /* 0: the kernel's */
	int tos;	   /* < 0: the kernel's */
	bool paced;	   /* WEFT_PACER is on: say if ECN is not negotiated */
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

/* socket_data.c */
weft_status_t weft_tp_socket_isend(struct weft_conn *conn, struct weft_msg *msg);
weft_status_t weft_tp_socket_irecv(struct weft_conn *conn, struct weft_msg *msg);
weft_status_t weft_tp_socket_progress(struct weft_tp *tp);
/* Fail every queued message of @p c with @p status and close its sockets. */
void weft_tp_socket_conn_fail(struct weft_sock_conn *c, weft_status_t status);

/* socket_conn.c: the connection to @p peer (created on first use; NULL:
 * no memory); start the handshake of a connected socket @p fd to @p peer
 * (a call when @p call); accept what waits on the listener and move the
 * handshakes under way (@p all: every one, else only those the poll says
 * are ready); move a connection's sockets along once (WEFT_SUCCESS when
 * up, WEFT_INPROGRESS, or the recorded error with the connection failed). */
struct weft_sock_conn *weft_tp_socket_conn_get(struct weft_sock_comm *sc, int peer);
struct weft_hs *weft_tp_socket_hs_start(struct weft_sock_comm *sc, int fd, int peer, bool call,
					unsigned index);
void weft_tp_socket_accept(struct weft_sock_comm *sc);
/* socket_door.c: drop every handshake under way (with a warning naming
 * @p why, or quietly when NULL). */
void weft_tp_socket_door_close(struct weft_sock_comm *sc, const char *why);
/* TCP_NODELAY, best effort. */
void weft_tp_socket_nodelay(int fd);
weft_status_t weft_tp_socket_conn_step(struct weft_sock_conn *c);

/* socket_lazy.c: lazily, from progress: take new sockets from the listener,
 * read their hellos and move the connections under way (ours, and those
 * peers asked for). A no-op once the listener is closed (eager, after
 * init). */
weft_status_t weft_tp_socket_setup_progress(struct weft_sock_comm *sc);
/* Free the handshakes of @p c still under way (the connection fails). */
void weft_tp_socket_forget_handshakes(struct weft_sock_conn *c);
/* Put @p c on the list progress moves (once). */
void weft_tp_socket_list_connecting(struct weft_sock_comm *sc, struct weft_sock_conn *c);
/* The higher rank's call while its peer's sockets have not arrived. */
weft_status_t weft_tp_socket_call_step(struct weft_sock_conn *c);
/* An authenticated call from rank @p rank arrived on @p fd. */
bool weft_tp_socket_route_call(struct weft_sock_comm *sc, int fd, int rank, const char **why);

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
