/*
 * trace.h — the flight recorder: every communicator keeps a ring of its
 * last WEFT_TRACE_BUFFER operations and of its last events (timeouts,
 * aborts, failures, failover, re-path, revoke, shrink, slow links and
 * ranks named by the detector), and writes them as one JSON file when
 * something goes wrong, so that an operator can tell afterwards which
 * operation the job was in, who never posted it and whom every rank
 * waited on (weft-topo --trace merges the files of a job).
 *
 * An operation is recorded when it is called (posted), when its turn comes
 * (started), while it waits (the peer and the message it waits for, as the
 * engine notes them for the timeout message anyway) and when it finishes:
 * a few stores into a record of the ring and a read of the clock at the
 * call and, unless it ended within its first polls, at the end (an
 * operation run alone is recorded just after its post, while it waits
 * for its peers). Nothing is allocated or formatted on the way.
 *
 * Dumps go to WEFT_TRACE_DIR (one file per rank and communicator, named
 * by host, rank, pid and communicator id, replaced by a later dump) on a
 * timeout, when the communicator dies (an abort, a peer lost), on a fatal
 * signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) and on SIGTERM, the
 * launcher's kill, where the process had left those at their default, on
 * SIGUSR2 with WEFT_TRACE_SIGNAL=1 (and the job goes on), and on
 * weft_comm_dump(). The writer uses only async-signal-safe calls (open,
 * write, rename, clock_gettime) and no allocation, so the same code serves
 * a signal handler and a timeout.
 */
#ifndef WEFT_TRACE_H
#define WEFT_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "weft.h"

struct weft_comm;
struct weft_task;

/* What an event beside the operations is. */
enum weft_trace_event_kind {
	WEFT_EV_TIMEOUT = 0, /* an operation timed out (the text is the verdict) */
	WEFT_EV_ABORT,	     /* weft_comm_abort */
	WEFT_EV_FAILURE,     /* the communicator died of another error */
	WEFT_EV_FAILOVER,    /* a sub-flow's data handed to its siblings */
	WEFT_EV_REPATH,	     /* a sub-flow moved to another path */
	WEFT_EV_REVOKE,	     /* the communicator was revoked */
	WEFT_EV_SHRINK,	     /* a communicator shrunk from this one */
	WEFT_EV_SLOW,	     /* the detector named a slow link or rank */
	WEFT_EV_CLEARED,     /* ... and it recovered */
	WEFT_EV_NOTE,	     /* anything else worth keeping */
	WEFT_EV_COUNT
};

/* "timeout", "abort", ... */
const char *weft_trace_event_name(enum weft_trace_event_kind kind);

/* The state of a recorded operation. */
enum weft_trace_state {
	WEFT_TRACE_POSTED = 1, /* called, waiting for its turn */
	WEFT_TRACE_STARTED,    /* its algorithm is running */
	WEFT_TRACE_DONE,       /* finished successfully */
	WEFT_TRACE_FAILED,     /* finished with an error (status) */
};

/* One operation (128 bytes). Written by the thread that drives the
 * communicator; read by a dump, which may be a signal handler. */
struct weft_trace_op {
	_Atomic uint64_t id; /* 1 + its number in the ring's life; 0: empty */
	uint64_t call;	     /* a collective's number; send/recv: its number with the peer */
	uint64_t count;
	uint64_t bytes;				     /* count x the datatype's size */
	uint64_t posted_ns, started_ns, finished_ns; /* weft_now_ns(); 0: not yet */
	const char *algo;			     /* static; NULL: not chosen */
	uint32_t word;		 /* the operation word (core/tag.h): the call's signature */
	int32_t root;		 /* root; send/recv: the peer; -1 none */
	int32_t waiting_for;	 /* while unfinished: the peer it waits on, -1 none */
	uint32_t wait_step;	 /* the tag step of that message; UINT32_MAX unknown */
	int16_t status;		 /* once finished */
	uint8_t coll, dtype, op; /* enum weft_coll_kind, weft_datatype_t, weft_op_t */
	_Atomic uint8_t state;	 /* enum weft_trace_state */
	uint8_t wait_send;	 /* the message waited for is a send (else a receive) */
	uint8_t group;		 /* started inside a group */
	unsigned char pad[40];
};

_Static_assert(sizeof(struct weft_trace_op) == 128, "a trace record is 128 bytes");

#define WEFT_TRACE_TEXT_BYTES 104

struct weft_trace_ev {
	_Atomic uint64_t id; /* 1 + its number; 0: empty or being written */
	uint64_t wall_ns;    /* when (CLOCK_REALTIME) */
	int32_t kind;	     /* enum weft_trace_event_kind */
	int32_t peer;	     /* -1 none */
	char text[WEFT_TRACE_TEXT_BYTES];
};

_Static_assert(sizeof(struct weft_trace_ev) == 128, "a trace event is 128 bytes");

#define WEFT_TRACE_NAME_BYTES 64

struct weft_trace {
	struct weft_comm *comm;
	uint32_t cap;		  /* ops in the ring (a power of two; 0: recorder off) */
	uint32_t ev_cap;	  /* events in theirs (a power of two) */
	uint64_t next;		  /* operations recorded so far */
	_Atomic uint64_t ev_next; /* events recorded so far */
	struct weft_trace_op *ops;
	struct weft_trace_ev *evs;
	/* Who this is, copied once the communicator knows (the dump reads
	 * nothing else of it, and nothing that moves). */
	int rank, nranks;
	pid_t pid;
	char host[WEFT_TRACE_NAME_BYTES];
	char addr[WEFT_TRACE_NAME_BYTES];
	char leaf[WEFT_TRACE_NAME_BYTES];
	char comm_hex[17];
	char path[4096]; /* WEFT_TRACE_DIR's file; "" without WEFT_TRACE_DIR */
	_Atomic int dumping;
};

/* WEFT_TRACE_BUFFER and WEFT_TRACE_DIR (a bad value fails init, naming
 * it) and the rings, pre-faulted. The identity follows with
 * weft_trace_identify. */
weft_status_t weft_trace_init(struct weft_comm *comm);

/* Once the communicator knows its rank's host, leaf, address and id:
 * the dump's identity and file name; registers the communicator for the
 * signal handlers (installed with the first). */
void weft_trace_identify(struct weft_comm *comm);

/* Unregister (waiting for a dump in progress) and free. */
void weft_trace_fini(struct weft_comm *comm);

/* The recorder's hooks (core/task.c, core/progress.c): a task was called
 * (at task->posted_ns; with @p started_ns, not 0, its turn had come too),
 * its turn came, it waits (the engine's note, copied), it finished; the
 * times are those weft_task_clock() or weft_now_ns() read. */
void weft_trace_posted(struct weft_task *task, uint64_t call, uint64_t started_ns);
void weft_trace_started(struct weft_task *task, uint64_t now_ns);
void weft_trace_waiting(struct weft_task *task);
void weft_trace_finished(struct weft_task *task, weft_status_t status, uint64_t now_ns);

/* Record an event beside the operations, from any thread: @p peer the rank
 * it concerns (-1 none), the text at most WEFT_TRACE_TEXT_BYTES - 1 bytes
 * (cut beyond). Also counted in the metrics (weft_events_total). */
void weft_trace_event(struct weft_comm *comm, enum weft_trace_event_kind kind, int peer,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Write the recorder to @p path (NULL: WEFT_TRACE_DIR's file, if any),
 * saying @p reason. 0, or an errno (ENOENT: no path and no
 * WEFT_TRACE_DIR). Async-signal-safe. */
int weft_trace_dump(struct weft_trace *trace, const char *path, const char *reason);

/* A dump for the communicator's own reasons (a timeout, its death): to
 * WEFT_TRACE_DIR when set, logged. */
void weft_trace_dump_auto(struct weft_comm *comm, const char *reason);

#endif
