/*
 * perf_launch.c — the local launcher of the Weft perf programs: -np N forks
 * N ranks, rank 0 creates the unique id and passes it to the others over a
 * pipe, and the parent waits for them. Empty in the MPI build.
 */
#define _GNU_SOURCE
#include "perf_int.h"

#ifndef PERF_MPI
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHILD_GRACE_SECONDS 5.0 /* how long survivors get after a rank fails */

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void report_child(int rank, pid_t pid, int status, bool killed_by_us)
{
	if (WIFEXITED(status))
		fprintf(stderr, "%s: rank %d (pid %d) exited with status %d\n", perf_g_prog, rank,
			(int)pid, WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		fprintf(stderr, "%s: rank %d (pid %d) %s by signal %d (%s)\n", perf_g_prog, rank,
			(int)pid, killed_by_us ? "was ended (by us)" : "was killed",
			WTERMSIG(status), strsignal(WTERMSIG(status)));
}

/* After a failure: SIGTERM the ranks still running, then SIGKILL. */
static void stop_survivors(const pid_t *pids, const bool *done, int np, int signalled)
{
	for (int r = 0; r < np; r++) {
		if (done[r])
			continue;
		if (!signalled)
			fprintf(stderr,
				"%s: rank %d (pid %d) still running %.0f s after the failure: "
				"stopping it\n",
				perf_g_prog, r, (int)pids[r], CHILD_GRACE_SECONDS);
		kill(pids[r], signalled ? SIGKILL : SIGTERM);
	}
}

/* Parent of -np: wait for every rank; once one fails, give the others
 * CHILD_GRACE_SECONDS to notice, then end them (SIGTERM, then SIGKILL). */
static int wait_children(const pid_t *pids, int np)
{
	bool *done = calloc((size_t)np, sizeof(bool));
	int live = np, failed = 0, signalled = 0;
	double deadline = 0;

	if (!done)
		abort();
	while (live > 0) {
		int status, r;
		pid_t pid = waitpid(-1, &status, failed ? WNOHANG : 0);

		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0)
			break;
		if (pid == 0) {
			double t = now_seconds();
			if (t >= deadline && signalled < 2) {
				stop_survivors(pids, done, np, signalled);
				signalled++;
				deadline = t + 2.0;
			}
			usleep(20000);
			continue;
		}
		for (r = 0; r < np && pids[r] != pid; r++)
			;
		if (r == np)
			continue;
		done[r] = true;
		live--;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			continue;
		report_child(r, pid, status, signalled > 0);
		if (!failed) {
			failed = 1;
			deadline = now_seconds() + CHILD_GRACE_SECONDS;
		}
	}
	free(done);
	return failed;
}

static void read_id(int fd, weft_unique_id_t *id)
{
	size_t got = 0;

	while (got < sizeof(*id)) {
		ssize_t n = read(fd, (char *)id + got, sizeof(*id) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr,
				"%s: rank %d: no unique id from rank 0 (it exited before sending "
				"it)\n",
				perf_g_prog, perf_g_rank);
			exit(1);
		}
		got += (size_t)n;
	}
}

static void send_id(int fd, const weft_unique_id_t *id, int copies)
{
	for (int i = 0; i < copies; i++) {
		/* 128 bytes <= PIPE_BUF: each copy arrives whole */
		if (write(fd, id, sizeof(*id)) != (ssize_t)sizeof(*id)) {
			fprintf(stderr, "%s: rank 0: writing the unique id to the pipe: %s\n",
				perf_g_prog, strerror(errno));
			exit(1);
		}
	}
}

/* Pin this rank to the (rank mod n)-th CPU it is allowed on. Open MPI's
 * default for np <= 2 is the same, so perf/compare compares like with like. */
static void bind_rank(int rank)
{
	cpu_set_t allowed, mine;
	int k, want;

	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		return;
	want = rank % CPU_COUNT(&allowed);
	for (k = 0; k < CPU_SETSIZE; k++)
		if (CPU_ISSET(k, &allowed) && want-- == 0)
			break;
	CPU_ZERO(&mine);
	CPU_SET(k, &mine);
	if (sched_setaffinity(0, sizeof(mine), &mine))
		fprintf(stderr, "%s: rank %d: cannot bind to cpu %d: %s\n", perf_g_prog, rank, k,
			strerror(errno));
}

/* In the child of rank r: get the unique id (rank 0 makes it and hands it
 * on). */
static void child_setup(int r, int np, bool bind, const int fds[2], weft_unique_id_t *id)
{
	perf_g_rank = r;
	if (bind)
		bind_rank(r);
	if (r == 0) {
		weft_status_t st;
		close(fds[0]);
		st = weft_get_unique_id(id);
		if (st != WEFT_SUCCESS) {
			fprintf(stderr, "%s: rank 0: weft_get_unique_id failed: %s: %s\n",
				perf_g_prog, weft_status_string(st), weft_init_last_error());
			exit(1);
		}
		send_id(fds[1], id, np - 1);
		close(fds[1]);
	} else {
		close(fds[1]);
		read_id(fds[0], id);
		close(fds[0]);
	}
}

int perf_launch_local(int np, bool bind, weft_unique_id_t *id)
{
	int fds[2];
	pid_t parent = getpid(), *pids = calloc((size_t)np, sizeof(pid_t));

	if (!pids || pipe(fds)) {
		fprintf(stderr, "%s: cannot set up the local launcher: %s\n", perf_g_prog,
			strerror(errno));
		exit(1);
	}
	fflush(stdout);
	fflush(stderr);
	for (int r = 0; r < np; r++) {
		pid_t pid = fork();

		if (pid < 0) {
			fprintf(stderr, "%s: fork of rank %d: %s\n", perf_g_prog, r,
				strerror(errno));
			for (int k = 0; k < r; k++)
				kill(pids[k], SIGTERM);
			wait_children(pids, r);
			exit(1);
		}
		if (pid == 0) {
			/* never outlive the launcher, whatever ends it */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(1);
			free(pids);
			child_setup(r, np, bind, fds, id);
			return r;
		}
		pids[r] = pid;
	}
	close(fds[0]);
	close(fds[1]);
	exit(wait_children(pids, np));
}
#endif /* !PERF_MPI */
