/* watch_int.h — what watch.c (socket, thread, heartbeats, replies) and
 * watch_verdict.c (the query at a timeout, the verdict) share. */
#ifndef WEFT_WATCH_INT_H
#define WEFT_WATCH_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/watch.h"
#include "util/auth.h"

#define WATCH_MAGIC 0x5745465457415431ull /* "WEFTWAT1" */

enum watch_type {
	WATCH_HEARTBEAT = 1,
	WATCH_QUERY = 2,
	WATCH_REPLY = 3,
	WATCH_REVOKE = 4,     /* the sender revoked the communicator (core/revoke.c) */
	WATCH_REVOKE_ACK = 5, /* the receiver knows: the revoker may close its connections */
};

enum watch_flags {
	WATCH_TIMED_OUT = 1u << 0, /* this rank's wait timed out */
	WATCH_REVOKED = 1u << 1,   /* this rank's communicator is revoked */
};

/* A rank's state as it crosses the wire. Calls are numbered from 1 here
 * (call number + 1), so that 0 means none. */
struct watch_state {
	uint64_t started;  /* last collective started */
	uint64_t finished; /* last collective finished (successfully or not) */
	int32_t coll;	   /* enum weft_coll_kind of the last started */
	int32_t waiting_for;
	uint32_t age_ms; /* since it last started or finished one */
	uint32_t flags;
};

/* One datagram. It carries no key: the MAC (HMAC-SHA256 with the watch's
 * key, derived from the communicator's) covers everything before it, and
 * seq, which a sender raises with every datagram, lets a receiver refuse
 * one it has seen (or an older one) replayed. */
struct watch_msg {
	uint64_t magic;
	uint64_t comm_id; /* env's: which communicator it belongs to */
	uint64_t seq;
	uint32_t type;
	int32_t rank;
	uint64_t timed_out_call; /* in a query: the call it timed out in, or 0 */
	struct watch_state me;
	/* what this rank knows of its neighbours rank-1 and rank+1 */
	uint32_t nb_heard_ms[2]; /* since last heard; UINT32_MAX: never */
	struct watch_state nb[2];
	unsigned char mac[32];
};

_Static_assert(sizeof(struct watch_msg) == 176, "watch datagram is 176 bytes");

struct watch_view {
	double heard; /* when a datagram of it last arrived; 0 never */
	/* Since when this rank has asked it something (a query, the shrink's
	 * agreement, a revoke) and heard nothing from it; 0: it answered. */
	double asked;
	double refused;	      /* when its host refused a datagram (the port closed); 0 never */
	double silence_asked; /* when watch_silence last queried it; 0 never */
	bool revoke_acked;    /* it acknowledged this rank's revoke */
	struct watch_state st;
	bool replied;	   /* to the current query */
	uint64_t last_seq; /* the newest datagram taken from it */
	uint32_t nb_heard_ms[2];
	struct watch_state nb[2];
};

struct weft_comm;
struct weft_watch_service;

struct weft_watch {
	struct weft_comm *comm; /* NULL in tests/fuzz/ */
	/* what rides on the watch (core/watch.h), fixed once the thread runs */
	struct {
		const struct weft_watch_service *svc;
		void *ctx;
	} services[WEFT_WATCH_SERVICES];
	int nservices;
	int fd;
	int stop_pipe[2];
	pthread_t thread;
	bool running;
	int rank, nranks;
	struct weft_key key; /* derived from the communicator's, for datagrams only */
	uint64_t comm_id;
	_Atomic uint64_t seq; /* of this rank's last datagram */
	uint64_t dropped;     /* datagrams refused (bad MAC, replay, garbage) */
	double period_s;
	struct sockaddr_storage *addrs; /* [rank] */
	socklen_t *lens;

	/* this rank, written by the calling thread */
	_Atomic uint64_t started, finished, timed_out_call;
	_Atomic int coll, waiting_for;
	_Atomic int64_t changed_ms;
	/* set by the thread: a peer timed out in call (number + 1) */
	_Atomic uint64_t peer_timed_out;
	int wake_fd; /* the communicator's wait eventfd (core/wait.h), -1: none */

	pthread_mutex_t lock; /* guards view, the verdict's stragglers and the agreement's state */
	struct watch_view *view;
	/* Signalled (with lock) when the view or the agreement changes in a
	 * way a caller may wait for: an acknowledgement, a promise, a decision. */
	pthread_cond_t changed;
	/* Reading the socket: the thread, or a caller that drains it at once
	 * (weft_watch_drain); taken before lock. */
	pthread_mutex_t rx_lock;
	unsigned char *rx; /* WATCH_RX_BYTES */
	/* [rank]: the last verdict found it had not reached the operation
	 * (or had stopped inside it); verdicts: how many were taken */
	bool *straggler;
	unsigned verdicts;
};

#define WATCH_RX_BYTES 65536

/* watch.c */
void watch_state_mine(struct weft_watch *w, struct watch_state *st);
void watch_send(struct weft_watch *w, int peer, uint32_t type);
/* Send @p len bytes to @p peer, best effort (once more if a refusal
 * queued by an earlier datagram made the first try fail). */
void watch_sendto(struct weft_watch *w, int peer, const void *buf, size_t len);
/* With lock held: wait up to @p seconds for changed (a revoke's
 * acknowledgement, the agreement's next step). */
void watch_wait_changed(struct weft_watch *w, double seconds);
/* With lock held: this rank now waits for an answer from @p peer. */
void watch_asked(struct weft_watch *w, int peer, double now);
/* Is a datagram from @p from, claiming @p rank, from that rank's address? */
bool watch_from_rank(const struct weft_watch *w, int rank, const struct sockaddr_storage *from);
int64_t watch_now_ms(void);
/* One datagram of @p len bytes from @p from, as the thread received it:
 * checked (datagram_ok, the sequence), then taken into the view, a query
 * answered (tests/fuzz/fuzz_watch.c calls it too). */
void watch_take(struct weft_watch *w, const struct watch_msg *m, ssize_t len,
		const struct sockaddr_storage *from);
/* weft_watch_silence's rule on @p w at @p now (tests call it on a watch
 * double): takes the lock. */
double watch_silence(struct weft_watch *w, int peer, double now);

#endif
