/*
 * step_time.c — a training loop's communication, timed call by call, for
 * perf/bench_congestion.sh --mode pacing (which builds it against build/libweft.so).
 *
 *   step_time [-c allreduce|alltoall] [-s BYTES] [-n CALLS] [-t SECONDS]
 *             [-o FILE] [-w FILE] [-x FILE] [-p PERIOD] [-k] [-d FILE]
 *
 * Every rank runs the collective on BYTES (per rank) until CALLS calls or
 * SECONDS have passed, or (-x) FILE exists (rank 0 decides; every 16
 * calls, or with -x after every call, the ranks agree on it with an
 * 8-byte broadcast that is not timed). With -p, call k starts PERIOD
 * seconds after call k-1 started, or at once when that one took longer (a
 * training step's compute between calls): the job then offers the same
 * load whatever its latency, where a closed loop would send more the
 * faster its calls return. Each call is polled with
 * weft_test and a 20 us nap (run() says why). With -k (allreduce only)
 * every call's input is a pattern of the rank, the call's number and the
 * element's index, and its result is checked element by element before
 * the next (not timed): a fragment placed at the wrong offset, left from
 * an earlier call, or reduced twice shows; the first wrong call ends the
 * run with "step_time: rank R: call K: N wrong values ..." and exit 1
 * (tests/fabric/test_failover.sh). Rank 0 prints one line:
 *   calls N bytes B seconds S busbw GBPS p50_us X p99_us Y max_us Z
 * (busbw as nccl-tests: 2(n-1)/n for allreduce; for alltoall, BYTES is
 * each block and S the whole array of n blocks, times (n-1)/n),
 * with -o writes every call's time in microseconds, one a line, and with
 * -w every call's start and end (CLOCK_MONOTONIC seconds, which processes
 * of all the fabric's namespaces share), so that another job's throughput
 * can be taken over exactly this job's run. With -d, after the last call
 * every rank describes the communicator (weft_comm_describe) and rank 0
 * writes the JSON to FILE (its "connections" member sums the job's
 * failovers: tests/fabric/test_failover.sh).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <weft.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct opts {
	int alltoall, check;
	size_t bytes;
	long calls;
	double seconds, period;
	const char *out, *when, *stop, *describe;
};

static int parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){0, 0, 64 << 10, 1000, 60, 0, NULL, NULL, NULL, NULL};
	int c;
	while ((c = getopt(argc, argv, "c:s:n:t:o:w:x:p:kd:")) != -1) {
		switch (c) {
		case 'c': o->alltoall = strcmp(optarg, "alltoall") == 0; break;
		case 's': o->bytes = strtoull(optarg, NULL, 0); break;
		case 'n': o->calls = strtol(optarg, NULL, 0); break;
		case 't': o->seconds = strtod(optarg, NULL); break;
		case 'o': o->out = optarg; break;
		case 'w': o->when = optarg; break;
		case 'x': o->stop = optarg; break;
		case 'p': o->period = strtod(optarg, NULL); break;
		case 'k': o->check = 1; break;
		case 'd': o->describe = optarg; break;
		default: return -1;
		}
	}
	bool ok = o->bytes >= 8 && o->calls > 0 && o->period >= 0;
	return ok && !(o->check && o->alltoall) ? 0 : -1;
}

/* The -k pattern: small integers, so that every sum is exact in float,
 * with a prime period (65521 elements) that no fragment size divides and
 * a shift per call. Rank r's element i of call k is (r + 1) * v(i, k); the
 * sum over n ranks is n (n + 1) / 2 * v(i, k), below 2^24 up to 64 ranks. */
#define CHECK_PERIOD 65521u
static float check_value(size_t i, long call)
{
	return (float)((i * 7u + (size_t)call * 13u) % CHECK_PERIOD);
}

static void check_fill(float *src, size_t count, long call, int rank)
{
	for (size_t i = 0; i < count; i++)
		src[i] = (float)(rank + 1) * check_value(i, call);
}

/* 0, or 1 after saying what call @p call got wrong. */
static int check_result(const float *dst, size_t count, long call, int rank, int nranks)
{
	const float scale = (float)(nranks * (nranks + 1) / 2);
	size_t wrong = 0, first = 0;
	for (size_t i = 0; i < count; i++)
		if (dst[i] != scale * check_value(i, call) && wrong++ == 0)
			first = i;
	if (!wrong)
		return 0;
	fprintf(stderr,
		"step_time: rank %d: call %ld: %zu wrong values of %zu (first at element %zu: %g, "
		"expected %g)\n",
		rank, call, wrong, count, first, (double)dst[first],
		(double)(scale * check_value(first, call)));
	return 1;
}

static void write_when(const char *path, const double *start, const double *lat, long n)
{
	FILE *f = fopen(path, "w");
	for (long i = 0; f && i < n; i++)
		fprintf(f, "%.6f %.6f\n", start[i], start[i] + lat[i]);
	if (f)
		fclose(f);
}

static void report(const struct opts *o, double *lat, long n, double secs, int nranks)
{
	double factor = o->alltoall ? (nranks - 1.0) / nranks : 2.0 * (nranks - 1) / nranks;
	double s = o->alltoall ? (double)o->bytes * nranks : (double)o->bytes;
	double bus = n ? s * n / secs * factor / 1e9 : 0;
	if (o->out) {
		FILE *f = fopen(o->out, "w");
		for (long i = 0; f && i < n; i++)
			fprintf(f, "%.1f\n", lat[i] * 1e6);
		if (f)
			fclose(f);
	}
	qsort(lat, (size_t)n, sizeof(*lat), cmp);
	printf("calls %ld bytes %zu seconds %.3f busbw %.4f p50_us %.0f p99_us %.0f max_us %.0f\n",
	       n, o->bytes, secs, bus, n ? lat[n / 2] * 1e6 : 0,
	       n ? lat[(long)(0.99 * (n - 1))] * 1e6 : 0, n ? lat[n - 1] * 1e6 : 0);
}

/* One call, polled with a 20 us nap between tests: many ranks share two
 * cores here, and a rank that spins in weft_wait takes the core from the
 * one it waits for (a training step would compute meanwhile). */
static weft_status_t run(const struct opts *o, char *src, char *dst, weft_comm_t comm)
{
	weft_request_t req;
	weft_status_t st = o->alltoall ? weft_ialltoall(src, dst, o->bytes, WEFT_UINT8, comm, &req)
				       : weft_iallreduce(src, dst, o->bytes / 4, WEFT_FLOAT32,
							 WEFT_SUM, comm, &req);
	if (st != WEFT_SUCCESS)
		return st;
	const struct timespec nap = {0, 20000};
	while ((st = weft_test(&req)) == WEFT_INPROGRESS)
		nanosleep(&nap, NULL);
	return st;
}

/* -d: every rank describes (a collective), rank 0 writes the JSON. */
static weft_status_t describe_to(weft_comm_t comm, int rank, const char *path)
{
	char *json = NULL;
	weft_status_t st = weft_comm_describe(comm, &json);
	if (st == WEFT_SUCCESS && rank == 0) {
		FILE *f = fopen(path, "w");
		if (!f || fputs(json, f) < 0 || fclose(f) != 0) {
			fprintf(stderr, "step_time: cannot write %s\n", path);
			st = WEFT_ERR_SYSTEM;
		}
	}
	weft_describe_free(json);
	return st;
}

int main(int argc, char **argv)
{
	struct opts o;
	if (parse(argc, argv, &o) != 0) {
		fprintf(stderr,
			"usage: step_time [-c allreduce|alltoall] [-s BYTES] [-n CALLS] "
			"[-t SECONDS] [-o FILE] [-w FILE] [-x FILE] [-p PERIOD] [-k] [-d FILE]\n"
			"  (-k checks every call: allreduce only)\n");
		return 2;
	}
	weft_comm_t comm;
	if (weft_comm_init_env(&comm, NULL) != WEFT_SUCCESS) {
		fprintf(stderr, "step_time: %s\n", weft_init_last_error());
		return 1;
	}
	int rank, nranks;
	weft_comm_rank(comm, &rank);
	weft_comm_size(comm, &nranks);
	size_t total = o.alltoall ? o.bytes * (size_t)nranks : o.bytes;
	char *src = malloc(total), *dst = malloc(total);
	double *lat = malloc(sizeof(double) * (size_t)o.calls);
	double *start = malloc(sizeof(double) * (size_t)o.calls);
	if (!src || !dst || !lat || !start)
		return 1;
	memset(src, 1, total);
	memset(dst, 0, total);
	weft_status_t st = WEFT_SUCCESS;
	long n = 0;
	double t0 = now_s();
	int64_t stop = 0;
	long every = o.stop ? 1 : 16;
	int wrong = 0;
	while (st == WEFT_SUCCESS && !wrong && n < o.calls && !stop) {
		double due = n ? start[n - 1] + o.period : 0, t;
		while ((t = now_s()) < due) {
			double left = due - t;
			struct timespec ts = {(time_t)left,
					      (long)((left - (double)(time_t)left) * 1e9)};
			nanosleep(&ts, NULL);
		}
		if (o.check)
			check_fill((float *)src, o.bytes / 4, n, rank);
		st = run(&o, src, dst, comm);
		start[n] = t;
		lat[n++] = now_s() - t;
		if (st == WEFT_SUCCESS && o.check)
			wrong = check_result((const float *)dst, o.bytes / 4, n - 1, rank, nranks);
		if (st == WEFT_SUCCESS && !wrong && n % every == 0) {
			stop = rank == 0 &&
			       (now_s() - t0 >= o.seconds || (o.stop && access(o.stop, F_OK) == 0));
			st = weft_broadcast(&stop, &stop, 1, WEFT_INT64, 0, comm);
		}
	}
	double secs = now_s() - t0;
	if (st == WEFT_SUCCESS && !wrong && o.describe)
		st = describe_to(comm, rank, o.describe);
	if (st != WEFT_SUCCESS)
		fprintf(stderr, "step_time: rank %d: %s\n", rank, weft_comm_last_error(comm));
	else if (rank == 0 && o.when)
		write_when(o.when, start, lat, n);
	if (st == WEFT_SUCCESS && !wrong && rank == 0)
		report(&o, lat, n, secs, nranks);
	weft_comm_destroy(comm);
	free(start);
	free(lat);
	free(src);
	free(dst);
	return st == WEFT_SUCCESS && !wrong ? 0 : 1;
}
