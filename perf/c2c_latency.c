/*
 * c2c_latency — how long a cache line takes to go from one core to another
 * and back, right now: two threads, pinned to two CPUs (default 0 and 1),
 * bounce a counter in one line each way N times; it prints the mean round
 * trip of each of B bursts and their median.
 *
 * Why: on a virtual machine the hypervisor places the two vCPUs as it likes,
 * and moves them. On the machines this project is measured on the round trip
 * is 50-150 ns in some seconds and 500-600 ns in others, and an intra-host
 * AllReduce that hands data over through shared lines (FIFOs, flags) moves
 * 3-10 times less in the slow seconds; Open MPI's does too. perf/compare runs
 * this before each of its shared-memory runs so that a reader can tell the
 * machine's state from the code's.
 *
 * usage: c2c_latency [-a CPU] [-b CPU] [-n ROUND_TRIPS] [-r BURSTS]
 * Output: "# c2c_latency: ..." then one line per burst "burst K NS" and
 * "median NS". Exit 2 for bad arguments, 1 if the threads cannot be pinned.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "limit_args.h"
#include "util/parse.h"

struct line {
	_Alignas(64) atomic_long v;
};

static struct line ping, pong;
static long trips = 100000;
static int bursts = 5;
static int cpu_b = 1;

static int pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *echo(void *arg)
{
	int *rc = arg;
	*rc = pin(cpu_b);
	long total = trips * bursts;
	for (long i = 1; i <= total; i++) {
		while (atomic_load_explicit(&ping.v, memory_order_acquire) != i)
			if (atomic_load_explicit(&ping.v, memory_order_relaxed) < 0)
				return NULL; /* the other side could not pin */
		atomic_store_explicit(&pong.v, i, memory_order_release);
	}
	return NULL;
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static bool count_arg(const char *s, uint64_t lo, uint64_t hi, long *out)
{
	uint64_t v;
	if (!limit_count(s, lo, hi, &v))
		return false;
	*out = (long)v;
	return true;
}

int main(int argc, char **argv)
{
	long cpu_a = 0, b = 1, n = trips, r = bursts;
	static const char usage[] =
	    "usage: c2c_latency [-a CPU] [-b CPU] [-n ROUND_TRIPS 1..1e8] [-r BURSTS 1..1000]\n";
	if (argc == 2 && strcmp(argv[1], "--help") == 0) {
		fputs(usage, stdout);
		return 0;
	}
	int c;
	while ((c = getopt(argc, argv, "a:b:n:r:")) != -1) {
		bool ok = false;
		switch (c) {
		case 'a': ok = count_arg(optarg, 0, CPU_SETSIZE - 1, &cpu_a); break;
		case 'b': ok = count_arg(optarg, 0, CPU_SETSIZE - 1, &b); break;
		case 'n': ok = count_arg(optarg, 1, 100000000, &n); break;
		case 'r': ok = count_arg(optarg, 1, 1000, &r); break;
		default: break;
		}
		if (!ok) {
			fputs(usage, stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "c2c_latency: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (cpu_a == b) {
		fprintf(stderr, "c2c_latency: -a and -b name the same CPU (%ld)\n", b);
		return 2;
	}
	trips = n;
	bursts = (int)r;
	cpu_b = (int)b;
	int rc_b = 0;
	pthread_t t;
	if (pthread_create(&t, NULL, echo, &rc_b) != 0) {
		fprintf(stderr, "c2c_latency: pthread_create failed\n");
		return 1;
	}
	int rc_a = pin((int)cpu_a);
	if (rc_a != 0) {
		atomic_store(&ping.v, -1);
		pthread_join(t, NULL);
		fprintf(stderr, "c2c_latency: cannot pin to CPU %ld: %s\n", cpu_a, strerror(rc_a));
		return 1;
	}
	double *ns = calloc((size_t)bursts, sizeof(*ns));
	if (!ns) {
		atomic_store(&ping.v, -1);
		pthread_join(t, NULL);
		fprintf(stderr, "c2c_latency: out of memory\n");
		return 1;
	}
	long i = 0;
	for (int k = 0; k < bursts; k++) {
		double t0 = now_ns();
		for (long j = 0; j < trips; j++) {
			i++;
			atomic_store_explicit(&ping.v, i, memory_order_release);
			while (atomic_load_explicit(&pong.v, memory_order_acquire) != i)
				;
		}
		ns[k] = (now_ns() - t0) / (double)trips;
	}
	pthread_join(t, NULL);
	if (rc_b != 0) { /* pinning failed after the bursts ran: they say nothing */
		fprintf(stderr, "c2c_latency: cannot pin to CPU %d: %s\n", cpu_b, strerror(rc_b));
		free(ns);
		return 1;
	}
	printf("# c2c_latency: CPUs %ld and %d, %d bursts of %ld round trips (ns each)\n", cpu_a,
	       cpu_b, bursts, trips);
	for (int k = 0; k < bursts; k++)
		printf("burst %d %.0f\n", k, ns[k]);
	qsort(ns, (size_t)bursts, sizeof(*ns), cmp_double);
	printf("median %.0f\n", ns[bursts / 2]);
	free(ns);
	return 0;
}
