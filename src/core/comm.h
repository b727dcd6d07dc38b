/* comm.h — the communicator: who the ranks are, how to reach each peer, and
 * the operations in flight. Private to the library; transports never see
 * it (they get a struct weft_tp_env), and it knows nothing of the tuner's
 * or the algorithms' insides. */
#ifndef WEFT_COMM_H
#define WEFT_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "bootstrap/bootstrap.h"
#include "core/gate.h"
#include "core/task.h"
#include "topo/topo.h"
#include "transports/transport.h"
#include "util/clock.h"
#include "util/error.h"
#include "weft.h"

#define WEFT_HOST_ID_BYTES  192
#define WEFT_HOSTNAME_BYTES 64
#define WEFT_SCRATCH_CHUNKS 4
#define WEFT_CHUNK_MAX	    (4u << 20)	 /* largest pipelining chunk a transport may ask for */
#define WEFT_CHUNK_ALONE    (128u << 10) /* chunk of a job of one rank */
#define WEFT_RECENT_CALLS   16

/* What each rank tells the others about itself at init. Fixed size, plain
 * bytes: it crosses the wire as is (all ranks run the same build). */
struct weft_card {
	char host_id[WEFT_HOST_ID_BYTES]; /* hostname + boot id + netns, or WEFT_HOSTID */
	char hostname[WEFT_HOSTNAME_BYTES];
	int32_t rank;
	int32_t pid;
	uint32_t local_rank; /* index among the ranks with the same host_id */
	uint32_t local_count;
	struct weft_topo_card topo; /* NIC, NUMA, leaf */
};

struct weft_peer {
	/* NULL for self, and, when connecting lazily, until the connection is
	 * up (core/p2p.h). */
	struct weft_conn *conn;
	struct weft_tp *tp; /* the transport that serves it */
	struct weft_p2p_link link;
	/* Lazily (WEFT_CONNECT=lazy): when connecting started (0: not
	 * started), the receives posted before the connection was up, in
	 * post order (the sends wait on link's held queue), and the
	 * communicator's list of peers being connected. */
	double connect_since;
	struct weft_msg *held_recv_head, *held_recv_tail;
	bool connecting;
	struct weft_peer *next_connecting;
};

/* WEFT_CONNECT: when peers are connected. */
enum weft_connect_mode {
	WEFT_CONNECT_EAGER = 0, /* every peer at init */
	WEFT_CONNECT_LAZY,	/* each peer on its first message (core/p2p.h) */
};

struct weft_tuner;
struct weft_bootstrap;
struct weft_progress_thread;
struct weft_stats;
struct weft_shmem;
struct weft_mem_reg;
struct weft_watch;

struct weft_comm {
	int rank;
	int nranks;
	uint64_t secret;
	double timeout_s;

	struct weft_card *cards; /* nranks */
	struct weft_peer *peers; /* nranks */
	struct weft_tp **tps;	 /* per registry entry; NULL if disabled */
	size_t ntps;
	struct weft_tp_env env; /* what the transports see */
	struct weft_tp_peer *tp_peers;
	struct weft_bootstrap *bs; /* open only during init */
	struct weft_gate gate;
	struct weft_p2p_link *held_links; /* links whose gate holds sends */
	enum weft_connect_mode connect_mode;
	struct weft_peer *connecting; /* lazy: peers whose connection is under way */
	int nconnected;		      /* peers whose connection is up */
	struct weft_stats *stats;     /* WEFT_STATS_FILE (core/stats.h), else NULL */

	struct weft_topo_graph graph;
	bool placement_by_rank; /* WEFT_PLACEMENT=rank */
	bool oversubscribed;	/* more ranks on this host than cores */
	int *ring;    /* ring order: ring[pos] is a rank; neighbours share a host, then a leaf */
	int ring_pos; /* this rank's position in it */
	size_t chunk_bytes; /* pipelining chunk, agreed by all ranks at init */
	/* Outputs larger than this (twice this in place) are written with
	 * streaming stores where the algorithm does not read them again
	 * (WEFT_STREAM_MIN; default from the last-level cache, comm.c). */
	size_t stream_min;
	/* WEFT_SCRATCH_CHUNKS chunks of staging, pre-faulted at init, for the
	 * one collective that runs at a time (e.g. partial sums of a reduce on
	 * ranks whose recvbuf may be NULL). */
	void *scratch;
	size_t scratch_bytes;
	/* The cost model and overrides (tune/), freed with the communicator. */
	struct weft_tuner *tuner;
	void (*tuner_free)(struct weft_tuner *tuner);

	/* The intra-host shared-memory module (algorithms/shmem/): its
	 * pre-mapped regions, set up with the tuner; freed with the
	 * communicator, after the tasks that may use it. */
	struct weft_shmem *shmem;
	void (*shmem_free)(struct weft_shmem *shmem);
	void (*shmem_abort)(struct weft_shmem *shmem); /* tell peers: this rank gave up */
	/* tell peers which collective this rank starts (number, operation word) */
	void (*shmem_announce)(struct weft_shmem *shmem, uint64_t number, uint32_t word);
	/* weft_mem_register's regions (src/api/mem.c), deregistered before
	 * the transports close. */
	struct weft_mem_reg *mem_regs;
	void (*mem_regs_free)(struct weft_comm *comm);

	uint64_t seq; /* next collective's sequence number */
	/* Operation words (core/tag.h) of the last WEFT_RECENT_CALLS collectives
	 * started, at their call number modulo that, bit 32 set once filled:
	 * a late message of an earlier call is compared with what this rank
	 * passed to that call (weft_p2p_explain). */
	uint64_t recent_calls[WEFT_RECENT_CALLS];
	uint32_t *p2p_sent;	  /* [peer] sends started to it */
	uint32_t *p2p_received;	  /* [peer] receives started from it */
	struct weft_task *active; /* posted, not yet finished, in post order */
	struct weft_task *free_tasks;

	struct weft_progress_thread *pt; /* WEFT_PROGRESS_THREAD=1, else NULL */
	/* weft_comm_lock without a progress thread: what weft_comm_abort from
	 * another thread holds while it looks at active and closes the transports. */
	pthread_mutex_t solo_lock;
	struct weft_watch *watch; /* the out-of-band watch (core/watch.h) */
	int progress_thread_mode; /* weft_config_t.progress_thread: 1, -1, 0 (setting) */

	struct weft_err err;	 /* last error, for weft_comm_last_error */
	_Atomic int async_error; /* weft_status_t; fatal for the comm */
	_Atomic bool abort_requested;
	bool aborted;
};

/* Record an error on the communicator ("rank R: " is prefixed) and return
 * @p status. Remote failures, timeouts and aborts also become the
 * communicator's async error: the communicator is dead after them. */
weft_status_t weft_comm_fail(struct weft_comm *comm, weft_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Same, with ": strerror(errnum)" appended and WEFT_ERR_SYSTEM. */
weft_status_t weft_comm_fail_errno(struct weft_comm *comm, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

struct weft_uid;

/* Create a communicator (after the public entry points checked their
 * arguments): bootstrap, cards, placement, transports, connections and
 * chunk size. The bootstrap stays open for what the layers above set up
 * (the tuner); weft_comm_ready closes it. @p known: this rank's topology
 * card if already learned (a split keeps its parent's), else NULL to learn
 * it. On failure the message is in weft_init_last_error(). */
weft_status_t weft_comm_create(struct weft_comm **out, int nranks, const struct weft_uid *uid,
			       int rank, const weft_config_t *config,
			       const struct weft_topo_card *known);

/* Every rank got this far: the closing barrier, and the bootstrap closes.
 * On failure the communicator is freed and the message is in
 * weft_init_last_error(). */
weft_status_t weft_comm_ready(struct weft_comm *comm);

/* A communicator whose init failed after weft_comm_create: move its
 * message to weft_init_last_error() and free it. Returns @p status. */
weft_status_t weft_comm_abandon(struct weft_comm *comm, weft_status_t status);

/* Free everything (weft_comm_destroy). */
void weft_comm_free(struct weft_comm *comm);

/* Fail every active task with @p status and close the transports so that
 * peers notice. */
void weft_comm_kill(struct weft_comm *comm, weft_status_t status);

/* The address this rank offers peers: WEFT_SOCKET_IFNAME's if set; else
 * loopback when the job is on one host; else its NIC's (the nearest to its
 * cores, from the topology card). */
weft_status_t weft_comm_local_address(struct weft_comm *comm, struct sockaddr_storage *addr,
				      socklen_t *len);

/* Name of the transport that serves @p peer ("self" for this rank, "none"
 * if no transport reaches it): what weft-topo and the self-description show. */
const char *weft_comm_peer_transport(const struct weft_comm *comm, int peer);

/* "eager" or "lazy": how this communicator connects (WEFT_CONNECT). */
const char *weft_comm_connect_mode_name(const struct weft_comm *comm);

/* True if the peer is on this rank's host. */
bool weft_comm_same_host(const struct weft_comm *comm, int peer);

/* Drive every transport, the gate and every active task once. Never blocks.
 * With a progress thread, the caller holds the communicator's lock. */
weft_status_t weft_comm_progress(struct weft_comm *comm);

/* progress_thread.c: WEFT_PROGRESS_THREAD. start follows the config's
 * progress_thread_mode, else reads the setting, and if the answer is 1
 * starts the thread (after init); stop joins it (before free).
 * lock/unlock guard the communicator's operations against the thread (and,
 * without one, against weft_comm_abort from another thread); kick, with the
 * lock held, wakes the thread for work just posted; waiter counts the
 * callers that drive progress themselves. */
weft_status_t weft_progress_thread_start(struct weft_comm *comm);
void weft_progress_thread_stop(struct weft_comm *comm);
void weft_comm_lock(struct weft_comm *comm);
void weft_comm_unlock(struct weft_comm *comm);
void weft_progress_thread_kick(struct weft_comm *comm);
void weft_progress_thread_waiter(struct weft_comm *comm, int delta);

#endif
