/*
 * overlap_perf.c — does a non-blocking AllReduce move while the caller
 * computes? (WEFT_PROGRESS_THREAD, issue 10 item 6)
 *
 * "Compute" is a sleep that holds no core, standing in for work on an
 * accelerator: with two cores, two ranks and two progress threads there
 * is no core left for real compute. Per size S (float sum, in place, -R
 * for weft_mem_alloc buffers):
 *   t_ar     blocking weft_allreduce of S (median of -n calls)
 *   T        the sleep, set to t_ar: compute that takes as long as the
 *            collective, where overlap matters most
 *   t_sleep  nanosleep(T) alone (median; it overshoots T a little)
 *   t_both   weft_iallreduce, nanosleep(T), weft_wait (median)
 * and prints t_both / max(t_ar, t_sleep): 1.0 is perfect overlap (the
 * total is T), 2.0 none (T + t_ar). Each timed call is entered together
 * (a barrier first); times are rank 0's, the slowest rank's wait
 * included through the collective itself.
 *
 *   WEFT_PROGRESS_THREAD=1 build/overlap_perf -np 2 -b 64K -e 64M -f 4
 *   WEFT_PROGRESS_THREAD=0 build/overlap_perf -np 2 -b 64K -e 64M -f 4   (no thread: ~2.0)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "perf_common.h"
#include "perf_int.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void nap(double seconds)
{
	struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
	nanosleep(&ts, NULL);
}

enum mode { M_ALLREDUCE, M_SLEEP, M_BOTH };

/* One timed call of @p mode; the barrier makes every rank start together. */
static double one(enum mode mode, float *buf, size_t count, double t_sleep)
{
	weft_comm_t comm = perf_weft_comm();
	perf_rt_barrier();
	double t0 = perf_rt_wtime();
	if (mode == M_ALLREDUCE) {
		perf_weft_check(
		    weft_allreduce(WEFT_IN_PLACE, buf, count, WEFT_FLOAT32, WEFT_SUM, comm),
		    "weft_allreduce");
	} else if (mode == M_SLEEP) {
		nap(t_sleep);
	} else {
		weft_request_t req;
		perf_weft_check(
		    weft_iallreduce(WEFT_IN_PLACE, buf, count, WEFT_FLOAT32, WEFT_SUM, comm, &req),
		    "weft_iallreduce");
		nap(t_sleep);
		perf_weft_check(weft_wait(&req), "weft_wait");
	}
	return perf_rt_wtime() - t0;
}

static double timed(enum mode mode, float *buf, size_t count, double t_sleep, int iters, double *v)
{
	for (int i = 0; i < iters; i++)
		v[i] = one(mode, buf, count, t_sleep);
	return median(v, iters);
}

int main(int argc, char **argv)
{
	static const struct perf_test test = {
	    .prog = "overlap_perf",
	    .backend = "Weft",
	    .coll = PERF_COLL_ALLREDUCE,
	};
	struct perf_opts o;
	perf_g_test = &test;
	perf_g_prog = test.prog;
	perf_parse_args(argc, argv, &o);
	perf_rt_init(&o);
	const char *thread = getenv("WEFT_PROGRESS_THREAD");
	size_t maxcount = o.maxbytes / 4 ? o.maxbytes / 4 : 1;
	float *buf = perf_rt_buf_alloc(maxcount * 4);
	memset(buf, 0, maxcount * 4);
	int iters = o.iters > 0 ? o.iters : 20;
	double *v = malloc((size_t)iters * sizeof(*v));
	if (!v)
		perf_die("out of memory");
	if (perf_g_rank == 0)
		printf(
		    "# overlap_perf: %d ranks, WEFT_PROGRESS_THREAD=%s, %s buffers, median of %d\n"
		    "#  %10s %10s %10s %10s %8s\n",
		    perf_g_nranks, thread ? thread : "0", o.mem_alloc ? "weft_mem_alloc" : "malloc",
		    iters, "bytes", "t_ar(us)", "t_sleep", "t_both", "ratio");
	for (size_t s = o.minbytes; s <= o.maxbytes && s > 0; s = perf_next_size(&o, s)) {
		size_t count = s / 4 ? s / 4 : 1;
		for (int w = 0; w < (o.warmup > 0 ? o.warmup : 3); w++)
			one(M_ALLREDUCE, buf, count, 0);
		double t_ar = timed(M_ALLREDUCE, buf, count, 0, iters, v);
		double t_sleep = timed(M_SLEEP, buf, count, t_ar, iters, v);
		double t_both = timed(M_BOTH, buf, count, t_ar, iters, v);
		double base = t_ar > t_sleep ? t_ar : t_sleep;
		if (perf_g_rank == 0)
			printf("   %10zu %10.1f %10.1f %10.1f %8.2f\n", count * 4, t_ar * 1e6,
			       t_sleep * 1e6, t_both * 1e6, t_both / base);
	}
	free(v);
	perf_rt_buf_free(buf);
	perf_rt_finalize();
	return 0;
}
