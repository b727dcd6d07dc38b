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
#include "core/service.h"
#include "core/task.h"
#include "core/wait.h"
#include "topo/topo.h"
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
	struct weft_wait_card wait; /* WEFT_WAIT, compute threads, affinity (core/wait.h) */
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

struct weft_tp;
struct weft_tp_env;
struct weft_tp_peer;
struct weft_conn;
struct weft_msg;
struct weft_tuner;
struct weft_bootstrap;
struct weft_progress_thread;
struct weft_stats;
struct weft_shmem;
struct weft_mem_reg;
struct weft_watch;
struct weft_p2p_req;
struct weft_trace;
struct weft_metrics;
struct weft_slowdet;

struct weft_comm {
	int rank;
	int nranks;
	/* The communicator's key (from the unique id, or derived from the
	 * parent's for a split) and its random id (the root's answer at join). */
	struct weft_key key;
	unsigned char id[WEFT_JOB_ID_BYTES];
	double timeout_s;
	double boot_timeout_s; /* > 0: the bootstrap's, not WEFT_BOOTSTRAP_TIMEOUT's */

	struct weft_card *cards; /* nranks */
	struct weft_peer *peers; /* nranks */
	struct weft_tp **tps;	 /* per registry entry; NULL if disabled */
	size_t ntps;
	struct weft_tp_env *env; /* what the transports see */
	struct weft_tp_peer *tp_peers;
	struct weft_bootstrap *bs; /* open only during init */
	struct weft_gate gate;
	struct weft_p2p_link *held_links; /* links whose gate holds sends */
	enum weft_connect_mode connect_mode;
	struct weft_peer *connecting; /* lazy: peers whose connection is under way */
	int nconnected;		      /* peers whose connection is up */
	struct weft_stats *stats;     /* WEFT_STATS_FILE (core/stats.h), else NULL */
	struct weft_trace *trace;     /* the flight recorder (core/trace.h) */
	/* The services above the core (core/service.h): their lifecycle, what
	 * they observe, and their state, which they alone read. */
	const struct weft_comm_service *service; /* NULL: none */
	struct weft_observers observe;
	struct weft_metrics *metrics; /* WEFT_METRICS_* (health/metrics.h), else NULL */
	struct weft_slowdet *slowdet; /* the slow-link detector (health/slowdet.h), else NULL */

	struct weft_topo_graph graph;
	bool placement_by_rank; /* WEFT_PLACEMENT=rank */
	bool oversubscribed;	/* more ranks on this host than cores */
	struct weft_wait wait;	/* WEFT_WAIT: spin or sleep (core/wait.h) */
	int compute_threads;	/* weft_config_t.compute_threads (0: OMP_NUM_THREADS, else 1) */
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
	/* weft_mem_register's regions (api/mem.c), deregistered before
	 * the transports close. */
	struct weft_mem_reg *mem_regs; /* core/mem_reg.h */

	uint64_t seq;	  /* next collective's sequence number */
	uint64_t shrinks; /* a communicator of one rank: shrinks made of it (the epoch) */
	/* Operation words (core/tag.h) of the last WEFT_RECENT_CALLS collectives
	 * started, at their call number modulo that, bit 32 set once filled:
	 * a late message of an earlier call is compared with what this rank
	 * passed to that call (weft_p2p_explain). */
	uint64_t recent_calls[WEFT_RECENT_CALLS];
	uint32_t *p2p_sent;	  /* [peer] sends started to it */
	uint32_t *p2p_received;	  /* [peer] receives started from it */
	struct weft_task *active; /* posted, not yet finished, in post order */
	bool deadlines;		  /* a task was given one (weft_request_set_timeout) */
	/* Point-to-point requests (core/p2p.c): the free ones, and all, to free. */
	struct weft_p2p_req *free_reqs, *all_reqs;
	struct weft_task *free_tasks;

	struct weft_progress_thread *pt; /* WEFT_PROGRESS_THREAD=1, else NULL */
	/* weft_comm_lock: the progress thread's, and what weft_comm_abort from
	 * another thread holds while it looks at active and closes the transports. */
	pthread_mutex_t lock;
	_Atomic int waiters;	  /* callers driving progress themselves (progress.c) */
	struct weft_watch *watch; /* the out-of-band watch (core/watch.h) */
	int progress_thread_mode; /* weft_config_t.progress_thread: 1, -1, 0 (setting) */

	/* Last error, for weft_comm_last_error: written by weft_comm_fail from
	 * any thread (the caller's argument checks, the progress thread),
	 * under err_lock, a leaf lock nothing else is taken under. */
	struct weft_err err;
	bool err_kept; /* the communicator died: err is its cause and stays */
	pthread_mutex_t err_lock;
	_Atomic int async_error; /* weft_status_t; fatal for the comm */
	_Atomic bool abort_requested;
	bool aborted;
	/* 0, or the rank that revoked it (core/revoke.h) + 1. */
	_Atomic int revoked;

	/* The ranks known dead (core/fail.h): how each was found, a byte per
	 * rank set once; when (weft_now), and the order they were found in
	 * (ndead of them), under dead_lock, a leaf lock like err_lock. */
	_Atomic unsigned char *dead_how;
	double *dead_when;
	int *dead_order;
	int ndead;
	pthread_mutex_t dead_lock;
};

/* The address this rank offers peers: WEFT_SOCKET_IFNAME's if set; else
 * loopback when the job is on one host; else its NIC's (the nearest to its
 * cores, from the topology card). */
weft_status_t weft_comm_local_address(struct weft_comm *comm, struct sockaddr_storage *addr,
				      socklen_t *len);

/* Name of the transport that serves @p peer ("self" for this rank, "none"
 * if no transport reaches it): what weft-topo and the self-description show. */
const char *weft_comm_peer_transport(const struct weft_comm *comm, int peer);

/* The name of @p rank's leaf switch, or NULL where no topology source
 * named one (the graph then counts each host as a leaf of its own). */
const char *weft_comm_leaf_name(const struct weft_comm *comm, int rank);

/* "eager" or "lazy": how this communicator connects (WEFT_CONNECT). */
const char *weft_comm_connect_mode_name(const struct weft_comm *comm);

/* The staging every communicator holds (struct weft_comm.scratch):
 * WEFT_SCRATCH_CHUNKS chunks, and at least one element of the widest type
 * (8 bytes) for each of n - 2 ranks, which ReduceScatter's ring keeps a
 * slot each for (algorithms/reduce_scatter/reduce_scatter_ring.c). */
size_t weft_comm_scratch_bytes(int nranks, size_t chunk_bytes);

/* During init only (the bootstrap is open): every rank contributes
 * @p bytes at buf + rank * bytes and gets everyone's. */
weft_status_t weft_comm_allgather(struct weft_comm *comm, void *buf, size_t bytes);

/* Something moved that a rank about to sleep must see (core/wait.c):
 * a post, a completion, a task started or finished. Lock held. */
static inline void weft_wait_moved(struct weft_comm *comm)
{
	comm->wait.activity++;
}

/* True if the peer is on this rank's host. */
bool weft_comm_same_host(const struct weft_comm *comm, int peer);

/* The communicator's lock: every call that touches its operations holds
 * it (the progress thread's progress, the caller's posts, tests and waits,
 * and weft_comm_abort from another thread); the progress thread's
 * (core/progress_thread.c) when there is one, else contended only by
 * weft_comm_abort from another thread. Inline: a blocking 8-byte AllReduce takes it once and costs
 * ~0.25 us. */
static inline void weft_comm_lock(struct weft_comm *comm)
{
	pthread_mutex_lock(&comm->lock);
}

static inline void weft_comm_unlock(struct weft_comm *comm)
{
	pthread_mutex_unlock(&comm->lock);
}

/* Is the communicator revoked (core/revoke.h), by this rank or a peer? */
static inline bool weft_comm_revoked(const struct weft_comm *comm)
{
	return atomic_load_explicit(&comm->revoked, memory_order_relaxed) != 0;
}

#endif
