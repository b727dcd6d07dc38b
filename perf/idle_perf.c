/*
 * idle_perf.c — what a rank that waits in a collective costs the cores
 * (WEFT_WAIT, issue 26: a rank blocked in a collective should use at most
 * 2 % of a core).
 *
 * Per trial (-n, default 10): every rank enters a barrier; the last rank
 * then sleeps IDLE_PERF_DELAY_S (0.25 s) before it calls weft_allreduce of
 * -b bytes (default 8), while the others are already in theirs. Each
 * waiting rank measures the CPU time its process used (user + system,
 * every thread: a progress thread too) over the wall time of its call.
 * Printed: per trial the busiest waiting rank's CPU share of one core,
 * and the median over the trials; the wall time shows the wake-up (the
 * call returns a little after the late rank arrives).
 *
 *   WEFT_WAIT=block build/idle_perf -np 2
 *   WEFT_WAIT=spin  build/idle_perf -np 2               (about 100 %)
 *   WEFT_WAIT=block WEFT_PROGRESS_THREAD=1 build/idle_perf -np 2
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "perf_common.h"
#include "perf_int.h"

#define IDLE_PERF_DELAY_S 0.25
#define IDLE_PERF_TRIALS  64

static double cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* One trial: the busiest waiting rank's CPU share, and the wall time of
 * the waiting ranks' calls (the longest). */
static void trial(float *buf, size_t count, double *share, double *wall)
{
	weft_comm_t comm = perf_weft_comm();
	bool late = perf_g_rank == perf_g_nranks - 1;
	perf_rt_barrier();
	if (late) {
		struct timespec ts = {0, (long)(IDLE_PERF_DELAY_S * 1e9)};
		nanosleep(&ts, NULL);
	}
	double c0 = cpu_seconds(), t0 = perf_rt_wtime();
	perf_weft_check(weft_allreduce(WEFT_IN_PLACE, buf, count, WEFT_FLOAT32, WEFT_SUM, comm),
			"weft_allreduce");
	double t = perf_rt_wtime() - t0, c = cpu_seconds() - c0;
	*share = perf_rt_max_double(late ? 0 : c / t);
	*wall = perf_rt_max_double(late ? 0 : t);
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "idle_perf",
	    .backend = "Weft",
	    .coll = PERF_COLL_ALLREDUCE,
	    .default_bytes = 8, /* the wait is the figure: the call's own work counts in it */
	};
	struct perf_opts o;
	perf_g_test = &test;
	perf_g_prog = test.prog;
	perf_parse_args(argc, argv, &o);
	perf_rt_init(&o);
	if (perf_g_nranks < 2)
		perf_die("idle_perf needs at least 2 ranks (one waits for the other)");
	size_t count = o.minbytes / 4 ? o.minbytes / 4 : 1;
	float *buf = perf_rt_buf_alloc(count * 4);
	memset(buf, 0, count * 4);
	int n = o.iters > 0 && o.iters <= IDLE_PERF_TRIALS ? o.iters : 10;
	double shares[IDLE_PERF_TRIALS], walls[IDLE_PERF_TRIALS];
	const char *wait = getenv("WEFT_WAIT"), *pt = getenv("WEFT_PROGRESS_THREAD");
	for (int w = 0; w < 3; w++) /* connections up, buffers touched */
		perf_weft_check(weft_allreduce(WEFT_IN_PLACE, buf, count, WEFT_FLOAT32, WEFT_SUM,
					       perf_weft_comm()),
				"weft_allreduce");
	for (int i = 0; i < n; i++)
		trial(buf, count, &shares[i], &walls[i]);
	if (perf_g_rank == 0) {
		printf(
		    "# idle_perf: %d ranks, %zu bytes, WEFT_WAIT=%s, WEFT_PROGRESS_THREAD=%s; the "
		    "last rank arrives %.0f ms late\n# CPU of a core used by the busiest waiting "
		    "rank, per trial:",
		    perf_g_nranks, count * 4, wait ? wait : "auto", pt ? pt : "0",
		    IDLE_PERF_DELAY_S * 1e3);
		for (int i = 0; i < n; i++)
			printf(" %.1f%%", shares[i] * 100);
		qsort(shares, (size_t)n, sizeof(double), cmp_double);
		qsort(walls, (size_t)n, sizeof(double), cmp_double);
		printf("\nidle cpu median %.2f %% of a core, wait median %.2f ms (%d trials)\n",
		       shares[n / 2] * 100, walls[n / 2] * 1e3, n);
	}
	perf_rt_buf_free(buf);
	perf_rt_finalize();
	return 0;
}
