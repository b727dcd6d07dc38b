/* slowdet_int.h — what the detector's files share: its state, and the
 * datagrams it sends over the watch's socket (slowdet.h says why). */
#ifndef WEFT_SLOWDET_INT_H
#define WEFT_SLOWDET_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/watch.h"
#include "health/slowdet.h"
#include "health/slowdet_stats.h"

struct weft_watch;

#define DETECT_MAGIC 0x5745465444455431ull /* "WEFTDET1" */
#define DETECT_LINKS 8			   /* connections per sample */
#define DETECT_KEPT  8			   /* verdicts a rank keeps for the metrics */
#define DETECT_LATE  4			   /* peers' lateness per sample */

enum slowdet_type {
	DETECT_SAMPLE = 1,  /* a rank's period, to rank 0 */
	DETECT_VERDICT = 2, /* rank 0's decision, to every rank */
};

enum slowdet_kind { DETECT_LINK = 1, DETECT_RANK = 2 };
/* Why a rank is named: its first messages came late to the ranks it feeds
 * (value and median in us), or it did not run (permille of the time). */
enum slowdet_cause { DETECT_LATE_FIRST = 0, DETECT_NOT_RUNNING = 1 };

struct slowdet_link_wire {
	int32_t peer;
	uint32_t kbytes;  /* acknowledged in the period, KiB */
	uint32_t busy_us; /* the path's time: with data out, less receiver-limited */
	uint32_t rate_kBps;
};

struct slowdet_sample {
	uint32_t period_us;
	uint32_t ops;		/* operations finished */
	uint32_t wait_permille; /* of the period, blocked in a wait and running */
	uint32_t stall_permille;
	uint32_t off_permille; /* the watch's thread woke late: the process did not run */
	int32_t top_peer;      /* the peer waited on most, -1 none */
	uint32_t top_permille;
	uint32_t nlinks;
	uint32_t nlate;
	uint32_t pad;
	struct slowdet_link_wire links[DETECT_LINKS];
	/* peers whose first message of an operation came in this period: how
	 * late after this rank posted the operation, on average */
	struct slowdet_late_wire {
		int32_t peer;
		uint32_t count;
		uint32_t delay_us;
	} late[DETECT_LATE];
};

struct slowdet_verdict {
	uint64_t id;	/* rank 0 numbers its verdicts: a repeat is ignored */
	uint32_t kind;	/* enum slowdet_kind */
	uint32_t named; /* 1 named, 0 cleared */
	int32_t rank;	/* the rank (a link: the first rank of the slow host) */
	uint32_t ops;	/* operations while it was flagged */
	/* a link: the host's best rate, B/s; a rank: its lateness, us, or
	 * its time not running, permille (cause); and the job's median of
	 * the same */
	uint64_t value, median;
	uint32_t periods; /* in a row */
	uint32_t cause;	  /* a rank: enum slowdet_cause */
};

/* One datagram: authenticated like the watch's (a MAC over all before it,
 * made with the watch's key; the sender's sequence number). */
struct slowdet_msg {
	uint64_t magic;
	uint64_t comm_id;
	uint64_t seq;
	uint32_t type;
	int32_t rank;
	union {
		struct slowdet_sample sample;
		struct slowdet_verdict verdict;
	} u;
	unsigned char mac[32];
};

_Static_assert(sizeof(struct slowdet_msg) == 280, "detector datagram is 280 bytes");

/* Samples of a rank rank 0 keeps: a connection's rate is taken over them
 * (bytes over path time, summed), so that TCP's busy time, counted in
 * jiffies, is long enough to be believed. */
#define DETECT_HISTORY 3

/* Rank 0's view. */
struct slowdet_root {
	struct slowdet_root_rank {
		uint64_t at_ns[DETECT_HISTORY]; /* when each came; 0 never */
		struct slowdet_sample s[DETECT_HISTORY];
		unsigned n; /* samples taken; the latest is s[(n - 1) % DETECT_HISTORY] */
	} * ranks;
	struct weft_slowdet_run *host_run, *rank_run;
	double *host_best, host_median;
	double *rank_late, rank_median; /* seconds */
	double *rank_off, off_median;	/* shares of the time not running */
	uint32_t *rank_cause;		/* enum slowdet_cause, of the last naming */
	uint64_t next_id;
	/* scratch for one evaluation */
	struct weft_slowdet_link_obs *links;
	double *best, *tmp, *late, *off;
	bool *slow_h, *slow_r, *slow_off, *have, *have_off;
	bool *on_slow_host; /* per rank, this period: its host is named or flagged */
	bool *not_running;  /* per rank: named for not running, not cleared */
	int *itmp;
	/* verdicts sent this period, sent again next period (a lost one) */
	struct slowdet_verdict resend[DETECT_KEPT];
	int nresend;
};

struct weft_slowdet {
	struct weft_comm *comm;
	struct weft_slowdet_pub pub;
	uint64_t period_ns;
	int confirm;
	/* the driving thread's (the communicator's lock held) */
	uint64_t next_read_ns;
	uint64_t *read_at; /* [peer] bytes sent at its last signals read */
	/* The wait loop's last look (weft_slowdet_waited): when, and the
	 * rank's voluntary sleep (core/wait.h slept_ns) then; and the stall
	 * of the task it waited in (which, by its posting time), so that a
	 * first message seen late because this rank itself did not run is
	 * not held against its sender (weft_slowdet_first). */
	uint64_t look_ns, look_slept;
	const struct weft_task *stall_task;
	uint64_t stall_task_started, stall_task_ns;
	/* the watch thread's */
	uint64_t next_ns;
	uint64_t tick_due, off_ns; /* the thread's next tick, and its lateness summed */
	uint64_t prev_t, prev_wait, prev_stall, prev_ops, prev_off;
	uint64_t *prev_wait_on;
	uint64_t *prev_late; /* [2 peer] late_ns, [2 peer + 1] late_n at the last sample */
	struct slowdet_prev_link {
		uint64_t acked, path_us;
	} * prev_link;
	uint64_t *last_seq; /* [rank] the newest detector datagram taken */
	uint64_t dropped;
	struct slowdet_root *root; /* rank 0 only */
	/* the verdicts as this rank knows them (the WARN lines, the metrics) */
	pthread_mutex_t lock;
	struct slowdet_verdict kept[DETECT_KEPT];
	int nkept;
	uint64_t last_id;
};

/* A detector datagram to @p peer (sequence number and MAC made here). */
void weft_slowdet_send(struct weft_watch *w, int peer, uint32_t type, const void *body, size_t len);

/* slowdet_watch.c, from the watch's thread: the period's work (a sample to
 * rank 0; on rank 0 the evaluation), and when it is next due. */
void weft_slowdet_watch_tick(struct weft_watch *w, uint64_t now_ns);
uint64_t weft_slowdet_next_ns(const struct weft_watch *w);

/* A datagram of @p len bytes that may be the detector's (its magic and
 * size): true if it was (taken or dropped), false for the watch's own. */
bool weft_slowdet_take(struct weft_watch *w, const void *buf, ssize_t len,
		       const struct sockaddr_storage *from);

/* The two above as a service of the watch (core/watch.h), registered by
 * health/health.c with the detector's state as its context. */
extern const struct weft_watch_service weft_slowdet_watch;

/* The detector's state that rides on @p w, or NULL (off). */
static inline struct weft_slowdet *slowdet_of(const struct weft_watch *w)
{
	return weft_watch_service_ctx(w, &weft_slowdet_watch);
}

/* slowdet_root.c: rank 0 takes a sample (its own too) and decides. */
void weft_slowdet_root_sample(struct weft_watch *w, int rank, const struct slowdet_sample *s,
			      uint64_t now_ns);
void weft_slowdet_root_eval(struct weft_watch *w, uint64_t now_ns);
struct slowdet_root *weft_slowdet_root_new(int nranks, int nhosts);
void weft_slowdet_root_free(struct slowdet_root *root);

/* A verdict reached this rank (from rank 0, or rank 0's own): kept, and
 * logged and recorded once. */
void weft_slowdet_apply(struct weft_watch *w, const struct slowdet_verdict *v);

#endif
