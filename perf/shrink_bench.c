/*
 * shrink_bench.c — a job that loses ranks and goes on, for
 * perf/bench_shrink.sh and the tests that cut links under it
 * (tests/fabric/test_shrink_fabric.sh, tests/fabric/test_slurm.sh).
 *
 *	shrink_bench [-np N] [--count C] [--seconds S] [--after K] [--dir D]
 *
 * Every rank (forked here with -np, or started by any launcher:
 * weft_comm_init_env) loops AllReduces of C floats (default 1024) and
 * checks each result. Once warm it writes its pid to D/pid.RANK (default:
 * none), so that a driver knows whom to kill. When a call fails, it
 * shrinks the communicator (weft_comm_shrink; the failed one is revoked
 * first), runs K more AllReduces on the new one (default 20), checks them
 * and shrinks again if one fails. Without a failure it stops after S
 * seconds (default 60). Times are CLOCK_MONOTONIC seconds, which every
 * process of the machine shares (network namespaces included), so a
 * driver can subtract the time it sent SIGKILL. Each rank prints
 *
 *	RESULT rank=R size=N new_rank=r new_size=n t_fail=T t_shrunk=T t_ok=T shrinks=K
 *	RESULT rank=R shrink=failed status=NAME t_fail=T msg=...      (exit 3)
 *	RESULT rank=R failure=none                                     (exit 0)
 *	DONE rank=R          (the K AllReduces after the shrink are done: it went on)
 *
 * t_fail: the failed call returned; t_shrunk: weft_comm_shrink returned;
 * t_ok: the first AllReduce on the new communicator returned, correct.
 * With WEFT_KEEP_GOING=1 (or -np, which sets it) a rank lost to a signal
 * does not fail the job.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/launch/local_launch.h"
#include "weft.h"

struct opts {
	int np;
	size_t count;
	double seconds;
	int after;
	const char *dir;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Every element must be the communicator's size (a sum of ones). */
static weft_status_t allreduce(weft_comm_t comm, float *buf, size_t count)
{
	int n = 0;
	for (size_t i = 0; i < count; i++)
		buf[i] = 1.0f;
	weft_status_t st = weft_allreduce(WEFT_IN_PLACE, buf, count, WEFT_FLOAT32, WEFT_SUM, comm);
	weft_comm_size(comm, &n);
	for (size_t i = 0; st == WEFT_SUCCESS && i < count; i++)
		if (buf[i] != (float)n) {
			fprintf(stderr, "shrink_bench: element %zu is %g, expected %d\n", i, buf[i],
				n);
			exit(2);
		}
	return st;
}

static void write_pid(const struct opts *o, int rank)
{
	if (!o->dir)
		return;
	char path[512], tmp[520];
	snprintf(path, sizeof(path), "%s/pid.%d", o->dir, rank);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 || rename(tmp, path)) {
		fprintf(stderr, "shrink_bench: cannot write %s: %s\n", path, strerror(errno));
		exit(2);
	}
}

/* A call failed: shrink until an AllReduce works on what is left. */
static int recover(weft_comm_t *comm, int rank, int size, float *buf, const struct opts *o,
		   double t_fail)
{
	for (int shrinks = 1;; shrinks++) {
		weft_comm_t nc = NULL;
		weft_status_t st = weft_comm_shrink(*comm, NULL, 0, WEFT_SHRINK_DEFAULT, &nc);
		double t_shrunk = now();
		if (st != WEFT_SUCCESS || !nc) {
			printf("RESULT rank=%d shrink=failed status=%s t_fail=%.6f msg=%s\n", rank,
			       weft_status_string(st), t_fail, weft_comm_last_error(*comm));
			return 3;
		}
		*comm = nc; /* the old one stays until exit: its peers may still ask it */
		st = allreduce(nc, buf, o->count);
		if (st != WEFT_SUCCESS)
			continue;
		double t_ok = now();
		int r = 0, n = 0;
		weft_comm_rank(nc, &r);
		weft_comm_size(nc, &n);
		printf("RESULT rank=%d size=%d new_rank=%d new_size=%d t_fail=%.6f t_shrunk=%.6f "
		       "t_ok=%.6f shrinks=%d\n",
		       rank, size, r, n, t_fail, t_shrunk, t_ok, shrinks);
		fflush(stdout);
		for (int i = 0; i < o->after; i++)
			if (allreduce(nc, buf, o->count) != WEFT_SUCCESS)
				return recover(comm, rank, size, buf, o, now());
		printf("DONE rank=%d\n", rank);
		return 0;
	}
}

static int run(int rank, const struct opts *o, weft_comm_t comm)
{
	int size = 0;
	weft_comm_size(comm, &size);
	float *buf = malloc(o->count * sizeof(float));
	if (!buf)
		return 2;
	double end = now() + o->seconds;
	int rc = 0;
	for (long i = 0;; i++) {
		if (i == 20)
			write_pid(o, rank);
		weft_status_t st = allreduce(comm, buf, o->count);
		/* Stop together: a rank that left on its own clock would look
		 * lost to the others. Every 64 calls the ranks agree on it. */
		float up = now() > end ? 1.0f : 0.0f;
		if (st == WEFT_SUCCESS && i % 64 == 63)
			st = weft_allreduce(WEFT_IN_PLACE, &up, 1, WEFT_FLOAT32, WEFT_MAX, comm);
		if (st != WEFT_SUCCESS) {
			rc = recover(&comm, rank, size, buf, o, now());
			break;
		}
		if (i % 64 == 63 && up > 0) {
			printf("RESULT rank=%d failure=none\n", rank);
			break;
		}
	}
	fflush(stdout);
	free(buf);
	return rc;
}

static int rank_main(int rank, int nranks, const weft_unique_id_t *id, void *arg)
{
	const struct opts *o = arg;
	weft_comm_t comm;
	weft_status_t st = o->np ? weft_comm_init_rank(&comm, nranks, *id, rank, NULL)
				 : weft_comm_init_env(&comm, NULL);
	if (st != WEFT_SUCCESS) {
		fprintf(stderr, "shrink_bench: init: %s\n", weft_init_last_error());
		return 1;
	}
	if (!o->np)
		weft_comm_rank(comm, &rank);
	return run(rank, o, comm); /* exit ends every communicator */
}

static int usage(void)
{
	fprintf(stderr, "usage: shrink_bench [-np N] [--count C] [--seconds S] [--after K] "
			"[--dir D]\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct opts o = {.count = 1024, .seconds = 60, .after = 20};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			printf("usage: shrink_bench [-np N] [--count C] [--seconds S] [--after K] "
			       "[--dir D]\n(perf/shrink_bench.c says what it does)\n");
			return 0;
		}
		if (!v)
			return usage();
		if (strcmp(a, "-np") == 0)
			o.np = atoi(v);
		else if (strcmp(a, "--count") == 0)
			o.count = (size_t)strtoul(v, NULL, 10);
		else if (strcmp(a, "--seconds") == 0)
			o.seconds = atof(v);
		else if (strcmp(a, "--after") == 0)
			o.after = atoi(v);
		else if (strcmp(a, "--dir") == 0)
			o.dir = v;
		else
			return usage();
		i++;
	}
	if (o.count == 0 || o.seconds <= 0 || o.after < 0 || o.np < 0)
		return usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!o.np)
		return rank_main(0, 0, NULL, &o);
	struct weft_local_job job = {
	    .nranks = o.np, .name = "shrink_bench", .grace_s = -1, .keep_going = true};
	return weft_local_run(&job, rank_main, &o);
}
