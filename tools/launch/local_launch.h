/*
 * local_launch.h — the one local launcher of the perf programs, weft-topo
 * and the test harness (build/libweft_launch.a, on top of the public API).
 *
 * It forks N rank processes on this host and hands them a way to join one
 * communicator: either rank 0 creates the unique id (weft_get_unique_id)
 * and writes one copy per rank to a pipe the launcher made, or each rank's
 * environment gets WEFT_RANK, WEFT_NRANKS, WEFT_LOCAL_RANK, WEFT_LOCAL_SIZE,
 * WEFT_ROOT (a loopback port that was free) and a random WEFT_SECRET, for
 * weft_comm_init_env() or a program run with weft_local_exec().
 *
 * Every rank dies with the launcher (PR_SET_PDEATHSIG), so a killed
 * launcher leaves no orphans, and starts with the default action for the
 * signals the caller handles (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGALRM,
 * SIGCHLD), as after exec. The launcher then waits for all of them:
 * once one fails, the others get grace_s seconds to notice and fail on
 * their own, then SIGTERM, then (2 s later) SIGKILL — unless keep_going
 * (or WEFT_KEEP_GOING=1): then a rank that dies of a signal is lost and
 * the others run on, as a job that shrinks its communicators wants. It
 * signals and reaps only the PIDs it forked, and says how each rank that
 * did not exit 0 ended.
 *
 *	struct weft_local_job job = {.nranks = 4, .name = "allreduce_perf", .grace_s = 5};
 *	int rank;
 *	if (weft_local_start(&job, &rank, why, sizeof(why)) != WEFT_SUCCESS) ...
 *	if (rank < 0)
 *		exit(weft_local_wait(&job) ? 1 : 0);   // the launcher
 *	weft_local_get_id(&job, rank, &id, why, sizeof(why)); // a rank
 *
 * weft_local_run() does all of that for a function, weft_local_exec() for
 * a program.
 */
#ifndef WEFT_LOCAL_LAUNCH_H
#define WEFT_LOCAL_LAUNCH_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "weft.h"

enum weft_local_id {
	WEFT_LOCAL_ID_PIPE = 0, /* rank 0 makes the id, the others read it from a pipe */
	WEFT_LOCAL_ID_ENV,	/* WEFT_RANK, ..., WEFT_ROOT, WEFT_SECRET in each environment */
	WEFT_LOCAL_ID_NONE,	/* nothing: the ranks find each other on their own */
};

enum weft_local_end {
	WEFT_LOCAL_NOT_STARTED = 0, /* skipped (or the fork failed) */
	WEFT_LOCAL_RUNNING,
	WEFT_LOCAL_EXITED,   /* code is the exit status */
	WEFT_LOCAL_SIGNALED, /* code is the signal that ended it */
	WEFT_LOCAL_HUNG,     /* alive at the deadline; killed with SIGKILL */
};

struct weft_local_rank {
	pid_t pid;
	enum weft_local_end end;
	int code;
	bool stopped;	/* ended by the launcher's SIGTERM/SIGKILL after another rank failed */
	double seconds; /* from the start of the job until it ended */
};

struct weft_local_job {
	/* Set by the caller (zero-initialise the rest). */
	int nranks;
	enum weft_local_id id;
	const char *name; /* prefix of the launcher's messages on stderr; NULL: quiet */
	double grace_s;	  /* after a failure, before SIGTERM; < 0: never stop the others */
	/* A rank killed by a signal is lost, not a failure: the others keep
	 * running (to shrink their communicators and go on), and the job ends
	 * well if every rank that ended on its own exited 0. Also set by
	 * WEFT_KEEP_GOING=1 in the launcher's environment. */
	bool keep_going;
	double timeout_s; /* > 0: ranks alive this long after the start are HUNG and killed */
	uint64_t skip;	  /* bit r: rank r (< 64, not 0) is not started */

	/* The launcher's; ranks[] holds the results after weft_local_wait(). */
	struct weft_local_rank *ranks;
	int fds[2];
	pid_t parent;
	double t0;
	sigset_t saved_mask;
	char root[64];
	char secret[68]; /* 64 hex digits */
};

/*
 * Fork the ranks. Returns in the launcher with *rank = -1 once all are
 * forked, and in each rank process with *rank set; those share nothing with
 * the launcher but the pipe. On failure (no pipe, a fork failed: the ranks
 * already forked are killed and reaped) returns WEFT_ERR_SYSTEM in the
 * launcher with the reason in @p why.
 */
weft_status_t weft_local_start(struct weft_local_job *job, int *rank, char *why, size_t why_len);

/*
 * In rank @p rank: the unique id. WEFT_LOCAL_ID_PIPE: rank 0 creates it
 * (and starts the root listener in its process) and writes a copy for each
 * started rank; the others block until theirs arrives, or fail when rank 0
 * exited before sending it. WEFT_LOCAL_ID_ENV and _NONE: nothing to share;
 * *id is zeroed. Call once, before weft_comm_init_rank().
 */
weft_status_t weft_local_get_id(struct weft_local_job *job, int rank, weft_unique_id_t *id,
				char *why, size_t why_len);

/*
 * In the launcher: wait until every started rank has ended (see grace_s,
 * keep_going and timeout_s), saying on stderr how each that did not exit
 * 0 ended (unless name is NULL), and fill job->ranks. Returns how many
 * started ranks did not exit 0 (with keep_going, the ranks lost to a
 * signal do not count while another rank finished). Frees nothing:
 * weft_local_free() does.
 */
int weft_local_wait(struct weft_local_job *job);

void weft_local_free(struct weft_local_job *job);

/* A rank's work: returns its exit status. */
typedef int (*weft_local_fn)(int rank, int nranks, const weft_unique_id_t *id, void *arg);

/* Run @p fn on every rank (start, get the id, exit with fn's result; wait).
 * Returns 0 when every rank exited 0, else 1. */
int weft_local_run(struct weft_local_job *job, weft_local_fn fn, void *arg);

/* Run the program @p argv (searched in PATH) as every rank, with the
 * WEFT_LOCAL_ID_ENV variables set. Returns as weft_local_run(). */
int weft_local_exec(struct weft_local_job *job, char *const argv[]);

#endif
