/*
 * local_wait.c — the launcher waits for its ranks (see local_launch.h).
 *
 * Each pass reaps, by PID and without blocking, every rank still running
 * (never waitpid(-1): the caller may have children of its own), then
 * sleeps in sigtimedwait() until a SIGCHLD arrives or the next thing is due
 * (the end of the grace period, the SIGKILL after SIGTERM, the deadline).
 * SIGCHLD is blocked since weft_local_start(), so none is lost; the sleep
 * is also capped, in case another thread of the caller takes the signal.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "tools/launch/local_int.h"
#include "tools/launch/local_launch.h"

#define KILL_AFTER_TERM_S 2.0
#define MAX_NAP_S	  0.25

struct waiter {
	int live;
	int first_failed; /* rank, or -1 */
	double next;	  /* when to escalate after a failure */
	int stage;	  /* 0: grace, 1: SIGTERM sent, 2: SIGKILL sent */
};

static void say(const struct weft_local_job *job, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void say(const struct weft_local_job *job, const char *fmt, ...)
{
	if (!job->name)
		return;
	va_list ap;
	fprintf(stderr, "%s: ", job->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void tell_end(const struct weft_local_job *job, int r)
{
	const struct weft_local_rank *k = &job->ranks[r];
	if (k->end == WEFT_LOCAL_EXITED && k->code != 0)
		say(job, "rank %d (pid %d) exited with status %d", r, (int)k->pid, k->code);
	else if (k->end == WEFT_LOCAL_SIGNALED)
		say(job, "rank %d (pid %d) %s by signal %d (%s)", r, (int)k->pid,
		    k->stopped ? "was stopped by the launcher" : "was killed", k->code,
		    strsignal(k->code));
	else if (k->end == WEFT_LOCAL_HUNG)
		say(job, "rank %d (pid %d) still running at the %.0f s deadline: killed", r,
		    (int)k->pid, job->timeout_s);
}

static void record(struct weft_local_job *job, struct waiter *w, int r, int status)
{
	struct weft_local_rank *k = &job->ranks[r];
	k->seconds = weft_local_now() - job->t0;
	k->end = WIFSIGNALED(status) ? WEFT_LOCAL_SIGNALED : WEFT_LOCAL_EXITED;
	k->code = WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status);
	w->live--;
	tell_end(job, r);
	bool ok = k->end == WEFT_LOCAL_EXITED && k->code == 0;
	if (!ok && w->first_failed < 0) {
		w->first_failed = r;
		w->next = weft_local_now() + job->grace_s;
	}
}

static void reap(struct weft_local_job *job, struct waiter *w)
{
	for (int r = 0; r < job->nranks; r++) {
		struct weft_local_rank *k = &job->ranks[r];
		int status;
		if (k->end != WEFT_LOCAL_RUNNING)
			continue;
		pid_t p = waitpid(k->pid, &status, WNOHANG);
		if (p == k->pid)
			record(job, w, r, status);
		else if (p < 0 && errno == ECHILD) /* reaped behind our back: unknown */
			record(job, w, r, 255 << 8);
	}
}

/* After a failure and the grace period: SIGTERM the survivors, then SIGKILL. */
static void escalate(struct weft_local_job *job, struct waiter *w)
{
	int sig = w->stage == 0 ? SIGTERM : SIGKILL;
	for (int r = 0; r < job->nranks; r++) {
		struct weft_local_rank *k = &job->ranks[r];
		if (k->end != WEFT_LOCAL_RUNNING)
			continue;
		if (w->stage == 0)
			say(job,
			    "rank %d (pid %d) still running %.1f s after rank %d failed: "
			    "stopping it",
			    r, (int)k->pid, job->grace_s, w->first_failed);
		k->stopped = true;
		kill(k->pid, sig);
	}
	w->stage++;
	w->next = weft_local_now() + KILL_AFTER_TERM_S;
}

/* At the deadline: whatever still runs is hung. */
static void kill_hung(struct weft_local_job *job, struct waiter *w)
{
	for (int r = 0; r < job->nranks; r++) {
		struct weft_local_rank *k = &job->ranks[r];
		if (k->end != WEFT_LOCAL_RUNNING)
			continue;
		kill(k->pid, SIGKILL);
		while (waitpid(k->pid, NULL, 0) < 0 && errno == EINTR)
			;
		k->end = WEFT_LOCAL_HUNG;
		k->code = SIGKILL;
		k->seconds = weft_local_now() - job->t0;
		w->live--;
		tell_end(job, r);
	}
}

static void nap(double seconds)
{
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (seconds > MAX_NAP_S)
		seconds = MAX_NAP_S;
	if (seconds < 0.001)
		seconds = 0.001;
	struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	sigtimedwait(&chld, NULL, &ts);
}

static bool keep_going(const struct weft_local_job *job)
{
	const char *v = getenv("WEFT_KEEP_GOING");
	return job->keep_going || (v && strcmp(v, "1") == 0);
}

/* Ranks that did not exit 0; with keep_going, those lost to a signal
 * count only when no rank finished. */
static int count_failed(const struct weft_local_job *job, bool keep)
{
	int failed = 0, lost = 0, finished = 0;
	for (int r = 0; r < job->nranks; r++) {
		const struct weft_local_rank *k = &job->ranks[r];
		if (k->end == WEFT_LOCAL_NOT_STARTED)
			continue;
		if (k->end == WEFT_LOCAL_EXITED && k->code == 0)
			finished++;
		else if (keep && k->end == WEFT_LOCAL_SIGNALED && !k->stopped)
			lost++;
		else
			failed++;
	}
	if (keep && lost)
		say(job, "%d rank(s) lost; --keep-going: %d finished without them", lost, finished);
	return failed + (finished ? 0 : lost);
}

int weft_local_wait(struct weft_local_job *job)
{
	struct waiter w = {.first_failed = -1};
	bool keep = keep_going(job);
	double deadline = job->timeout_s > 0 ? job->t0 + job->timeout_s : 0;
	for (int r = 0; r < job->nranks; r++)
		w.live += job->ranks[r].end == WEFT_LOCAL_RUNNING;
	while (w.live > 0) {
		reap(job, &w);
		if (w.live == 0)
			break;
		double now = weft_local_now(), due = deadline ? deadline - now : MAX_NAP_S;
		if (deadline && now >= deadline) {
			kill_hung(job, &w);
			break;
		}
		bool stopping = w.first_failed >= 0 && job->grace_s >= 0 && !keep && w.stage < 2;
		if (stopping && now >= w.next) {
			escalate(job, &w);
			continue;
		}
		if (stopping && w.next - now < due)
			due = w.next - now;
		nap(due);
	}
	pthread_sigmask(SIG_SETMASK, &job->saved_mask, NULL);
	return count_failed(job, keep);
}
