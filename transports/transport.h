/*
 * transport.h — the contract between the point-to-point layer (core/p2p.h)
 * and the transports (shm, socket, ofi, verbs).
 *
 * Objects. One struct weft_tp per (transport, communicator) and one struct
 * weft_conn per peer it serves; a transport embeds them first in its own
 * structs and gets back to itself with weft_container_of. A transport sees
 * its communicator only through a narrow environment (struct weft_tp_env):
 * ranks, peers' host ids and addresses, the communicator's key and id,
 * an allgather that works during init, settings and logging (util/), and a
 * fail callback that records an error on the communicator. It never sees
 * struct weft_comm.
 *
 * Ops in named groups, filled with designated initialisers, the table's
 * size first so it can grow. Every entry is set: a transport without a
 * capability points the entry at the "not supported" stub of
 * transports/common/tp_stubs.h (as libfabric's fi_no_*), so the hot path
 * never tests for NULL; communicator init checks every table of the
 * registry for this and for its size (weft_registry_check, registry.c).
 *
 * Messages. The poster owns a struct weft_msg and keeps it alive until it
 * is done; the transport keeps whatever per-message state it needs in its
 * own request objects (transports/common/tp_queue.h has a pool) and
 * finishes a message with weft_msg_complete(). Per connection and
 * direction, a transport whose ordered property is true matches messages
 * in the order they were posted: the n-th send to a peer meets the peer's
 * n-th receive from us. A transport may instead match by tag (the tags
 * are unique within an operation) and complete out of order; it then says
 * so in its properties. Either way a tag and length travel with every
 * message and the receiver fails with WEFT_ERR_REMOTE on a mismatch,
 * naming both values and what env->explain makes of the tags (tags carry
 * the signature of the call: core/tag.h).
 */
#ifndef WEFT_TRANSPORT_H
#define WEFT_TRANSPORT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/stream.h"
#include "util/auth.h"
#include "util/handshake.h"
#include "util/mr_key.h"
#include "util/wire_tag.h"
#include "weft.h"

struct weft_tp;
struct weft_conn;
struct weft_mr;

/* ---- Messages ---- */

/* Tags: util/wire_tag.h. */

/*
 * One message. For a receive, the bytes go to buf (copied), or, when
 * reduce is set, are combined: buf[i] = reduce(local[i], incoming[i]).
 */
struct weft_msg {
	/* Set by the poster. */
	void *buf;
	size_t len;
	uint64_t tag;
	weft_reduce_fn reduce; /* receive only; NULL: plain copy */
	const void *local;     /* receive with reduce: the local operand, len bytes */
	size_t unit;	       /* element size: pieces handed to weft_msg_deliver are multiples */
	bool stream; /* receive: buf will not be read soon: streaming stores (reduce/stream.h) */

	/* Set by the transport, through weft_msg_complete. */
	bool done;
	weft_status_t status;

	/* The point-to-point layer's: called once when the message is done
	 * (its pacing gate counts bytes in flight), and its own queue link. */
	void (*on_done)(struct weft_msg *msg);
	void *p2p_link;
	struct weft_msg *p2p_next;
};

/* A message is taken (by the point-to-point layer, then the transport):
 * not done, in progress, and a zero unit means bytes. */
static inline void weft_msg_start(struct weft_msg *msg)
{
	msg->done = false;
	msg->status = WEFT_INPROGRESS;
	if (msg->unit == 0)
		msg->unit = 1;
}

/* The transport finishes a message (success or failure). */
static inline void weft_msg_complete(struct weft_msg *msg, weft_status_t status)
{
	msg->status = status;
	msg->done = true;
	if (msg->on_done)
		msg->on_done(msg);
}

/* Hand received bytes [off, off + len) of msg to their destination. len must
 * be a multiple of msg->unit. */
static inline void weft_msg_deliver(struct weft_msg *msg, size_t off, const void *data, size_t len)
{
	char *dst = (char *)msg->buf + off;
	/* local is NULL without reduce: no offset from it then (UB). */
	const char *local = msg->reduce ? (const char *)msg->local + off : NULL;
	if (msg->reduce && msg->stream && dst != local)
		weft_reduce_stream(msg->reduce, dst, local, data, len / msg->unit, msg->unit);
	else if (msg->reduce)
		msg->reduce(dst, local, data, len / msg->unit);
	else if (msg->stream)
		weft_copy_stream(dst, data, len);
	else if (dst != data)
		memcpy(dst, data, len);
}

/* ---- The environment a transport is given ---- */

/* What a transport may know of a peer. */
struct weft_tp_peer {
	const char *host_id;  /* ranks with equal host ids share memory */
	const char *hostname; /* for messages */
	int pid;
	int local_rank;	 /* index among the ranks of its host */
	const char *nic; /* the interface nearest its cores ("" unknown) */
	/* It may sleep while it waits (WEFT_WAIT, core/wait.c): after a store
	 * it may be waiting for, wake it (the wait ops' wake). Only ever true
	 * for a peer on this host. */
	bool sleeps;
};

struct weft_tp_env {
	int rank, nranks;
	int local_rank, local_size; /* among the ranks of this host */
	/* Proves membership on every connection (util/handshake.h): never
	 * sent, never in a name. */
	const struct weft_key *key;
	/* The communicator's random id (not derived from the key): segment
	 * names, the handshakes; comm_id is its first 8 bytes, for tags. */
	const unsigned char *id;
	uint64_t comm_id;
	double timeout_s; /* bound on any wait */
	/* Connections are made on demand during the job (WEFT_CONNECT=lazy):
	 * connect is first called for a peer when a message needs it, possibly
	 * on one side only for a while, and connected is never called. A
	 * transport whose side of a pair waits for the other must get the other
	 * to start (the socket transport's acceptor asks its connector). */
	bool connect_lazy;
	/* Interface whose address this rank offers peers: NULL for loopback
	 * (a job on one host), else WEFT_SOCKET_IFNAME's or the NIC's. */
	const char *ifname;
	const struct weft_tp_peer *peers; /* nranks */
	/* The communicator's wait set (an epoll instance) when this rank may
	 * sleep in a wait (WEFT_WAIT), else -1: a transport adds the
	 * descriptors whose readiness means it has work, level-triggered
	 * (data is unused), and keeps their interest current in its settle op. */
	int wait_fd;

	/* Services of the communicator. */
	void *ctx;
	/* Collective, during init only: every rank contributes @p bytes at
	 * buf + rank * bytes and gets everyone's. */
	weft_status_t (*allgather)(void *ctx, void *buf, size_t bytes);
	/* Record an error on the communicator (the first fatal one stays);
	 * returns @p status. Remote failures, timeouts and aborts make the
	 * communicator unusable. */
	weft_status_t (*fail)(void *ctx, weft_status_t status, const char *msg);
	/* For a tag mismatch: what differs between the tag @p sent by @p peer
	 * and the tag @p want posted here, as the calls' signatures tell, into
	 * @p buf ("" if only the steps differ). */
	void (*explain)(void *ctx, uint64_t sent, uint64_t want, int peer, char *buf, size_t len);
	/* For a transport deciding whether a peer it cannot reach on any path
	 * is gone: for how many seconds the communicator's watch (core/watch.h,
	 * a UDP channel apart from the transports) has asked @p peer and heard
	 * nothing; 0 while it answers. It asks as it is called (at most every
	 * 100 ms), so call it from the moment the paths go dark: silence
	 * counts from the first unanswered question. < 0: no watch to ask (a
	 * one-rank job, before the watch runs or after it stopped). Any
	 * thread. May be NULL (environments built by tests). */
	double (*peer_silence)(void *ctx, int peer);
	/* Record that @p peer is gone, found so by the transport's own rule:
	 * the path failover's, dark on every path and silent on the watch for
	 * WEFT_PEER_DEAD, records WEFT_RANK_UNREACHABLE. weft_comm_failed_ranks
	 * then names it with @p how, and a shrink leaves it out (on another
	 * host; on this one the pid check decides: health/detect.h). Records
	 * only: failing the connection and its operations stays env->fail's.
	 * Any thread. May be NULL (environments built by tests). */
	void (*peer_gone)(void *ctx, int peer, weft_rank_failure_t how);
};

/* How a connection's data spreads over its sub-flows (WEFT_SPRAY): the
 * socket transport's sockets, verbs' QPs. */
enum weft_spray {
	WEFT_SPRAY_RR = 0,   /* in turn */
	WEFT_SPRAY_ADAPTIVE, /* by each sub-flow's drain rate: a slower path carries less */
};

/* WEFT_SPRAY into @p out; a bad value fails through env->fail, naming
 * @p who (the transport) and the value (tp_util.c). */
weft_status_t weft_tp_read_spray(const struct weft_tp_env *env, const char *who,
				 enum weft_spray *out);

/* WEFT_PATH_STALL, or else the transport's older name for it (@p alias,
 * NULL: none), into *out in seconds (unchanged when neither is set); a
 * value outside [@p lo, @p hi] fails through env->fail naming the
 * variable and @p who (tp_util.c). */
weft_status_t weft_tp_read_stall(const struct weft_tp_env *env, const char *who, const char *alias,
				 double lo, double hi, double *out);

/* printf-style wrappers around env->fail; the errno variant appends
 * ": strerror(errnum)" and returns WEFT_ERR_SYSTEM (tp_util.c). */
weft_status_t weft_tp_fail(const struct weft_tp_env *env, weft_status_t status, const char *fmt,
			   ...) __attribute__((format(printf, 3, 4)));
weft_status_t weft_tp_fail_errno(const struct weft_tp_env *env, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The message of a connection's break, recorded once however many paths
 * find it: unless the connection is @p broken already, @p status goes to
 * env->fail with the message from @p fmt and @p ap, and into *@p first
 * (the transport's first error; NULL: none kept) if that is still
 * WEFT_SUCCESS. Marking the connection broken and failing its queue stay
 * the caller's (tp_util.c). */
void weft_tp_vfail_once(const struct weft_tp_env *env, bool broken, weft_status_t *first,
			weft_status_t status, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));

/* True if @p peer shares this rank's host. */
static inline bool weft_tp_same_host(const struct weft_tp_env *env, int peer)
{
	return strcmp(env->peers[peer].host_id, env->peers[env->rank].host_id) == 0;
}

/* ---- What a transport says of itself ---- */

struct weft_tp_props {
	double latency_s;	 /* one small message, one way */
	double bandwidth_Bps;	 /* bytes per second of one connection */
	size_t max_msg;		 /* largest message (0: unbounded) */
	bool ordered;		 /* matches in post order per direction */
	bool needs_registration; /* buffers must be registered (weft_tp_mem_ops) */
	/* The device paces itself on congestion (a RoCE NIC runs DCQCN in
	 * hardware): Weft's pacer must not stack a second controller on it. */
	bool rate_controlled;
	const char *source; /* where the figures come from: "measured", "provider", "default" */
};

/* Congestion feedback of one sub-flow since the previous query. */
struct weft_tp_signal {
	uint32_t delivered;    /* segments (or messages) delivered */
	uint32_t delivered_ce; /* of which ECN CE-marked */
	uint32_t rtt_us;       /* smoothed round-trip time, 0 unknown */
	uint64_t bytes_acked;
	/* The rate data was last delivered at (TCP's tcpi_delivery_rate),
	 * bytes/s, 0 unknown; app_limited: the sender had nothing more to
	 * send then, so the network could have taken more. */
	uint64_t delivery_Bps;
	bool app_limited;
	/* Microseconds the sub-flow had data out, of which the receiver's
	 * window held it back (TCP's busy and rwnd-limited times), and
	 * segments retransmitted; 0 where unknown. The slow-link detector
	 * (health/slowdet.h) takes bytes_acked over busy - rwnd as the path's
	 * rate: the one thing a slow path and a slow receiver do not share. */
	uint32_t busy_us, rwnd_limited_us, retrans;
};

/* What a transport did to keep one connection's paths (failover to a
 * sibling sub-flow, re-pathing), since the connection came up; zero where
 * it does none. */
struct weft_tp_paths {
	uint64_t failovers; /* sub-flows failed over (stalled, or closed under it) */
	uint64_t repaths;   /* sub-flows moved off a congested or slow path */
	uint64_t replaced;  /* new sockets (new source ports) that took a dark one's place */
	uint64_t probes;    /* second sub-flows tried beside a single one */
	uint64_t resent;    /* frames sent again */
	uint64_t dups;	    /* fragments that arrived twice, dropped */
	unsigned dark;	    /* sub-flows dark now */
	char note[256];	    /* the dark ones, for an error or a table ("" if none) */
};

/* The counters of struct weft_tp_paths, in its order, for the code that
 * lists them all (the stats file, their sum, the communicator's JSON):
 * X(name) for each; a new counter is added here and in the struct. */
#define WEFT_TP_PATH_COUNTERS(X) X(failovers) X(repaths) X(replaced) X(probes) X(resent) X(dups)
#define WEFT_TP_PATH_NCOUNTERS	 6

/* A registered region as a peer can name it: struct weft_mr_key (util/mr_key.h). */

/* ---- Ops, in groups ---- */

/* Life. init is collective: every rank calls it for every enabled
 * transport, in the registry's order, even if the transport will serve no
 * peer of this rank, and it may use env->allgather. fini frees everything
 * (after abort or not); abort closes everything so that peers notice at
 * once and fails queued messages with WEFT_ERR_ABORTED, leaving the
 * objects valid for fini. Only init may block. */
struct weft_tp_life_ops {
	weft_status_t (*init)(const struct weft_tp_env *env, struct weft_tp **out);
	void (*fini)(struct weft_tp *tp);
	void (*abort)(struct weft_tp *tp);
};

/* Connections. score: 0 cannot reach @p peer, otherwise higher is
 * preferred (called after init). connect returns WEFT_INPROGRESS until the
 * connection is up and is called again; it never blocks. At init
 * (eager) every rank connects to every peer; lazily (env->connect_lazy)
 * connect is called during the job, from the point-to-point layer, when a
 * message first needs the peer, and progress must keep whatever the peer
 * starts moving too. connected: every peer of the communicator is
 * connected (on every transport), so whatever only connecting needed
 * closes now, e.g. a listening socket; no connect follows
 * (weft_tp_no_connected where there is nothing to close). Never called
 * when connecting lazily. */
struct weft_tp_conn_ops {
	int (*score)(struct weft_tp *tp, int peer);
	weft_status_t (*connect)(struct weft_tp *tp, int peer, struct weft_conn **out);
	void (*connected)(struct weft_tp *tp);
};

/* Messages. isend/irecv queue and return at once (WEFT_SUCCESS, or an
 * error with the message completed with it); progress moves bytes for every
 * connection and completes messages; it never blocks. A peer that dies or
 * closes is detected by progress in bounded time and fails the pending
 * messages with WEFT_ERR_REMOTE. Errors from errno are turned into a
 * status here and recorded once with weft_tp_fail. */
struct weft_tp_msg_ops {
	weft_status_t (*isend)(struct weft_conn *conn, struct weft_msg *msg);
	weft_status_t (*irecv)(struct weft_conn *conn, struct weft_msg *msg);
	weft_status_t (*progress)(struct weft_tp *tp);
};

/* Memory. reg makes [buf, buf + len) usable by the transport (a network
 * registration, a shared segment) and fills a key a peer can use; dereg
 * undoes it. map makes a peer's region (by its key) readable here where
 * the transport can (shared memory can: a reduce stage then reads peers'
 * data in place); unmap undoes it. Absent: WEFT_ERR_NOT_SUPPORTED. */
struct weft_tp_mem_ops {
	weft_status_t (*reg)(struct weft_tp *tp, void *buf, size_t len, struct weft_mr **mr,
			     struct weft_mr_key *key);
	void (*dereg)(struct weft_tp *tp, struct weft_mr *mr);
	weft_status_t (*map)(struct weft_conn *conn, const struct weft_mr_key *key, void **addr);
	void (*unmap)(struct weft_conn *conn, void *addr, size_t len);
};

/* RMA. write puts msg->buf/len (registered as @p local) at @p remote_off
 * of the peer's region @p remote, with @p imm delivered to the peer with
 * the data (a remote completion); get reads the other way. Both complete
 * msg through weft_msg_complete. Absent: WEFT_ERR_NOT_SUPPORTED. */
struct weft_tp_rma_ops {
	weft_status_t (*write)(struct weft_conn *conn, struct weft_msg *msg, struct weft_mr *local,
			       const struct weft_mr_key *remote, uint64_t remote_off, uint64_t imm);
	weft_status_t (*get)(struct weft_conn *conn, struct weft_msg *msg, struct weft_mr *local,
			     const struct weft_mr_key *remote, uint64_t remote_off);
};

/* Properties: measured at init or given by the provider (after init). */
struct weft_tp_prop_ops {
	void (*props)(struct weft_tp *tp, int peer, struct weft_tp_props *out);
	/* One line on how @p peer is reached ("socket(10.0.0.2, 2 streams)"). */
	void (*describe)(struct weft_tp *tp, int peer, char *buf, size_t len);
	/* What keeping @p conn's paths has done, and which are dark now
	 * (weft_tp_no_paths: all zero). */
	void (*paths)(struct weft_conn *conn, struct weft_tp_paths *out);
};

/* Signals: congestion feedback per sub-flow of @p conn since the previous
 * call, into out[0 .. max); returns how many sub-flows it filled (0: the
 * transport sees none). Never blocks; a failure to read is "none". pace
 * hands the transport the rate the pacer (core/pace/) chose for
 * @p conn, in bytes per second (0: unlimited), for a transport that can
 * enforce it below Weft (TCP's SO_MAX_PACING_RATE); absent: a no-op. */
struct weft_tp_signal_ops {
	int (*signals)(struct weft_conn *conn, struct weft_tp_signal *out, int max);
	void (*pace)(struct weft_conn *conn, double rate_Bps);
};

/* Waiting (WEFT_WAIT=block, core/wait.c): a rank sleeps after a progress
 * pass that moved nothing, until what it waits for can move. arm: make
 * sure what could move next will be announced on env->wait_fd (shared
 * memory raises its "asleep" flag, which peers read after their stores);
 * false if the transport cannot be waited on (no wait object: the rank
 * then polls). One more progress pass follows. settle: false if there is
 * work this transport could do at once (data arrived, room for a queued
 * send); else set the interest of its descriptors to what is queued now
 * and return true: the rank sleeps. disarm: awake (flags down, bells
 * drained). wake: this rank stored what @p conn's peer may wait for
 * (a counter of the shm AllReduce): wake it if it sleeps; a no-op where
 * the data itself wakes the peer (a socket). */
struct weft_tp_wait_ops {
	bool (*arm)(struct weft_tp *tp);
	bool (*settle)(struct weft_tp *tp);
	void (*disarm)(struct weft_tp *tp);
	void (*wake)(struct weft_conn *conn);
};

struct weft_setting;

struct weft_tp_ops {
	size_t size; /* sizeof(struct weft_tp_ops) */
	const char *name;
	/* The transport's WEFT_* settings, declared beside it (registry.c
	 * adds them to weft-topo --settings and to the lookup). */
	const struct weft_setting *settings;
	size_t nsettings;

	struct weft_tp_life_ops life;
	struct weft_tp_conn_ops conn;
	struct weft_tp_msg_ops msg;
	struct weft_tp_mem_ops mem;
	struct weft_tp_rma_ops rma;
	struct weft_tp_prop_ops prop;
	struct weft_tp_signal_ops signal;
	struct weft_tp_wait_ops wait;
};

struct weft_tp {
	const struct weft_tp_ops *ops;
	const struct weft_tp_env *env;
	size_t chunk_bytes; /* pipelining chunk this transport moves best */
	/* Its connections must exist before a peer's first message arrives
	 * (ofi's RMA protocol posts the receives for a peer's writes when it
	 * connects), so the communicator connects its peers at init even when
	 * connecting lazily. Set by init. */
	bool connect_at_init;
};

struct weft_conn {
	const struct weft_tp_ops *ops;
	struct weft_tp *tp;
	int peer;
};

#define weft_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#endif
