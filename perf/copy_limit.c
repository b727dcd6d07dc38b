/*
 * copy_limit.c — what the memory system lets np processes move at once: the
 * limit an intra-host AllReduce is measured against (docs/benchmarks.md).
 *
 * np processes (default 2), each on its own core when there are enough,
 * each copy a pre-faulted buffer of S bytes to another pre-faulted buffer of
 * S bytes, all at the same time, for every size from -b to -e. An np-rank
 * AllReduce reads and writes every byte at least once per rank, so its algbw
 * (= busbw at np=2) cannot beat the slowest process's copy rate printed here.
 * Single-core memcpy overstates it for large buffers: the cores share the
 * memory system.
 *
 *	build/copy_limit [-np N] [-b 8] [-e 256M] [-f 2] [-n ITERS] [-w WARMUP]
 *
 * Columns: size, time per copy (us, the slowest process's mean), GB/s of
 * the slowest process, GB/s of the fastest. libc and Weft's size parser only:
 * no Weft transport in it.
 */
#define _GNU_SOURCE
#include "limit_args.h"
#include "util/parse.h"

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_NP	  64
#define MAX_SIZES 64

struct shared {
	_Atomic int arrived[2]; /* a two-phase barrier, by generation parity */
	_Atomic int gen;
	double seconds[MAX_SIZES][MAX_NP]; /* mean time per copy, per size and process */
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void barrier(struct shared *sh, int np, int *gen)
{
	int g = *gen;
	if (atomic_fetch_add(&sh->arrived[g & 1], 1) + 1 == np) {
		atomic_store(&sh->arrived[g & 1], 0);
		atomic_store(&sh->gen, g + 1);
	} else {
		while (atomic_load(&sh->gen) == g)
			sched_yield();
	}
	*gen = g + 1;
}

/* A size with an optional K, M or G suffix and B ("64K", "2MB"). */
static size_t parse_size(const char *s)
{
	uint64_t v;
	if (weft_parse_size(s, SIZE_MAX, WEFT_PARSE_B_SUFFIX, &v, NULL) != WEFT_SUCCESS) {
		fprintf(stderr, "copy_limit: bad size '%s'\n", s);
		exit(3);
	}
	return (size_t)v;
}

/* Copies enough times that a size is timed over a few milliseconds. */
static int iters_for(size_t bytes, int iters)
{
	if (iters > 0)
		return iters;
	size_t n = (64u << 20) / (bytes ? bytes : 1);
	return n < 5 ? 5 : n > 100000 ? 100000 : (int)n;
}

static void child(struct shared *sh, int rank, int np, size_t lo, size_t hi, int factor, int iters,
		  int warmup)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus >= np) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(rank, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	char *src = malloc(hi), *dst = malloc(hi);
	if (!src || !dst)
		_exit(3);
	memset(src, 1, hi); /* pre-fault both: first touches cost ~12 us a page here */
	memset(dst, 2, hi);
	int gen = 0, k = 0;
	for (size_t s = lo; s <= hi && k < MAX_SIZES; s = s * (size_t)factor, k++) {
		int n = iters_for(s, iters);
		for (int i = 0; i < warmup; i++)
			memcpy(dst, src, s);
		barrier(sh, np, &gen);
		double t0 = now();
		for (int i = 0; i < n; i++) {
			memcpy(dst, src, s);
			__asm__ volatile("" : : "r"(dst) : "memory"); /* keep every copy */
		}
		sh->seconds[k][rank] = (now() - t0) / n;
		barrier(sh, np, &gen);
		if (factor <= 1)
			break;
	}
	_exit(0);
}

static void report(const struct shared *sh, int np, int k, size_t s)
{
	double slow = 0, fast = 1e30;
	for (int r = 0; r < np; r++) {
		slow = sh->seconds[k][r] > slow ? sh->seconds[k][r] : slow;
		fast = sh->seconds[k][r] < fast ? sh->seconds[k][r] : fast;
	}
	printf("%12zu %12.2f %10.2f %10.2f\n", s, slow * 1e6, (double)s / slow / 1e9,
	       (double)s / fast / 1e9);
	fflush(stdout);
}

static int count_arg(const char *s, const char *what, uint64_t lo, uint64_t hi)
{
	return limit_count_or_exit("copy_limit", what, s, lo, hi);
}

int main(int argc, char **argv)
{
	int np = 2, factor = 2, iters = 0, warmup = 3;
	size_t lo = 8, hi = 256u << 20;
	static const struct option opts[] = {
	    {"np", required_argument, NULL, 'p'}, {"help", no_argument, NULL, 'h'}, {0}};
	static const char usage[] =
	    "usage: copy_limit [-np N] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]\n";
	int c;
	while ((c = getopt_long_only(argc, argv, "b:e:f:n:w:", opts, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(usage, stdout); return 0;
		case 'p': np = count_arg(optarg, "-np", 1, MAX_NP); break;
		case 'b': lo = parse_size(optarg); break;
		case 'e': hi = parse_size(optarg); break;
		case 'f': factor = count_arg(optarg, "-f", 1, 1024); break;
		case 'n': iters = count_arg(optarg, "-n", 1, 100000000); break;
		case 'w': warmup = count_arg(optarg, "-w", 0, 100000000); break;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "copy_limit: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (np < 1 || np > MAX_NP || lo == 0 || hi < lo || factor < 1) {
		fprintf(stderr, "copy_limit: need 1 <= np <= %d, 0 < min <= max, factor >= 1\n",
			MAX_NP);
		return 2;
	}
	struct shared *sh =
	    mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 3;
	memset(sh, 0, sizeof(*sh));
	printf("# copy_limit: %d processes, each copying its own pre-faulted buffer at once\n", np);
	printf("# %10s %12s %10s %10s\n", "size", "time(us)", "GB/s", "fastest");
	fflush(stdout); /* the children must not print it again */
	pid_t pids[MAX_NP];
	for (int r = 0; r < np; r++) {
		pids[r] = fork();
		if (pids[r] == 0)
			child(sh, r, np, lo, hi, factor, iters, warmup);
	}
	int rc = 0;
	for (int r = 0; r < np; r++) {
		int st;
		waitpid(pids[r], &st, 0);
		rc |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	if (rc)
		return 1;
	int k = 0;
	for (size_t s = lo; s <= hi && k < MAX_SIZES; s = s * (size_t)factor, k++) {
		report(sh, np, k, s);
		if (factor <= 1)
			break;
	}
	return 0;
}
