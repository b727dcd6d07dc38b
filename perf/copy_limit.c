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
 * Two variants give the limits that match an AllReduce's work better
 * (docs/benchmarks.md, "Limits that match the work"):
 *
 *	--cross  each process reads the buffer the next process (r + 1) writes
 *	         and writes its own: every line crosses between the cores, as in
 *	         a single-pass AllReduce, where a rank reads what its peers
 *	         wrote. Without it each process copies inside its own caches at
 *	         in-cache sizes, which no AllReduce can do.
 *	--sum    each process sums two float arrays of S bytes into a third (out
 *	         of place; --in-place: into the first): the third stream an
 *	         out-of-place AllReduce writes. With --cross the second operand
 *	         is the next process's first array.
 *
 * Columns: size, time per copy (us, the slowest process's mean), GB/s of
 * the slowest process, GB/s of the fastest (S / time, whatever the mode).
 * libc and Weft's size parser only: no Weft transport in it.
 */
#define _GNU_SOURCE
#include "limit_args.h"
#include "util/parse.h"

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
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

struct opts {
	int np, factor, iters, warmup;
	size_t lo, hi;
};

/* What each process does per iteration. */
struct mode {
	bool cross;    /* read the next process's buffer (shared), write our own */
	bool sum;      /* dst = a + b over floats instead of a copy */
	bool in_place; /* --sum: a += b */
	char **bufs;   /* --cross: each process's first buffer, shared, [np] */
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

/* dst = a + b, float by float: the plain loop a compiler vectorises, with
 * clones for the vector units the machine may have (never -march=native,
 * which would not run elsewhere). */
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3"))) static void
sum_floats(float *dst, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = a[i] + b[i];
}

/* One iteration of the mode on @p s bytes: from @p src (and @p other) to
 * @p dst. */
static void once(const struct mode *m, char *dst, const char *src, const char *other, size_t s)
{
	if (!m->sum)
		memcpy(dst, src, s);
	else if (m->in_place)
		sum_floats((float *)(void *)dst, (const float *)(const void *)dst,
			   (const float *)(const void *)other, s / sizeof(float));
	else
		sum_floats((float *)(void *)dst, (const float *)(const void *)src,
			   (const float *)(const void *)other, s / sizeof(float));
}

/* A buffer of @p bytes, pre-faulted: first touches cost ~12 us a page here. */
static char *buffer(size_t bytes, int fill)
{
	char *b = malloc(bytes);
	if (!b)
		_exit(3);
	memset(b, fill, bytes);
	return b;
}

/* The buffers one process works on: it writes @p out, reads @p in and
 * (sum) @p other. Plain: all its own. Cross: its first buffer is shared
 * and read by the previous process; it reads the next one's. Only what
 * the mode uses is allocated (256 MiB each by default). */
struct bufs {
	char *out;
	const char *in, *other;
};

static void setup(const struct mode *m, int rank, int np, size_t hi, struct bufs *b)
{
	char *mine = m->cross ? m->bufs[rank] : buffer(hi, 1);
	if (m->cross)
		memset(mine, 1, hi); /* faulted in by its owner */
	const char *next = m->cross ? m->bufs[(rank + 1) % np] : NULL;
	if (!m->sum) { /* copy: plain mine -> dst; cross next -> mine */
		b->out = m->cross ? mine : buffer(hi, 2);
		b->in = m->cross ? next : mine;
		b->other = NULL;
		return;
	}
	b->in = mine; /* sum: out = mine + (next, or a second array of our own) */
	b->other = m->cross ? next : buffer(hi, 3);
	b->out = m->in_place ? mine : buffer(hi, 2);
}

static void child(struct shared *sh, const struct mode *m, int rank, int np, const struct opts *o)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus >= np) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(rank, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	struct bufs b;
	setup(m, rank, np, o->hi, &b);
	int gen = 0, k = 0;
	barrier(sh, np, &gen); /* every shared buffer is faulted in */
	for (size_t s = o->lo; s <= o->hi && k < MAX_SIZES; s = s * (size_t)o->factor, k++) {
		int n = iters_for(s, o->iters);
		for (int i = 0; i < o->warmup; i++)
			once(m, b.out, b.in, b.other, s);
		barrier(sh, np, &gen);
		double t0 = now();
		for (int i = 0; i < n; i++) {
			once(m, b.out, b.in, b.other, s);
			__asm__ volatile("" : : "r"(b.out) : "memory"); /* keep every copy */
		}
		sh->seconds[k][rank] = (now() - t0) / n;
		barrier(sh, np, &gen);
		if (o->factor <= 1)
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

static const char usage[] = "usage: copy_limit [-np N] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] "
			    "[-w WARMUP] [--cross] [--sum [--in-place]]\n";

/* The options, checked (usage errors exit 2; --help: the usage, status 0). */
static void parse(int argc, char **argv, struct opts *o, struct mode *m)
{
	enum { OPT_NP = 256, OPT_CROSS, OPT_SUM, OPT_IN_PLACE };
	static const struct option longs[] = {
	    {"np", required_argument, NULL, OPT_NP}, {"cross", no_argument, NULL, OPT_CROSS},
	    {"sum", no_argument, NULL, OPT_SUM},     {"in-place", no_argument, NULL, OPT_IN_PLACE},
	    {"help", no_argument, NULL, 'h'},	     {0}};
	int c;
	while ((c = getopt_long_only(argc, argv, "b:e:f:n:w:", longs, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(usage, stdout); exit(0);
		case OPT_NP: o->np = count_arg(optarg, "-np", 1, MAX_NP); break;
		case OPT_CROSS: m->cross = true; break;
		case OPT_SUM: m->sum = true; break;
		case OPT_IN_PLACE: m->in_place = true; break;
		case 'b': o->lo = parse_size(optarg); break;
		case 'e': o->hi = parse_size(optarg); break;
		case 'f': o->factor = count_arg(optarg, "-f", 1, 1024); break;
		case 'n': o->iters = count_arg(optarg, "-n", 1, 100000000); break;
		case 'w': o->warmup = count_arg(optarg, "-w", 0, 100000000); break;
		default: fputs(usage, stderr); exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "copy_limit: unexpected argument '%s'\n", argv[optind]);
		exit(2);
	}
	if (m->in_place && !m->sum) {
		fprintf(stderr, "copy_limit: --in-place goes with --sum\n");
		exit(2);
	}
	if (o->lo == 0 || o->hi < o->lo) {
		fprintf(stderr, "copy_limit: need 0 < min <= max\n");
		exit(2);
	}
}

/* What the header says each process does. */
static const char *describe(const struct mode *m)
{
	if (!m->sum)
		return m->cross ? "copying the next process's buffer into its own (--cross)"
				: "copying its own pre-faulted buffer";
	if (m->cross)
		return m->in_place ? "adding the next process's floats into its own (--sum --cross "
				     "--in-place)"
				   : "summing its floats and the next process's into a third array "
				     "(--sum --cross)";
	return m->in_place ? "adding two of its own float arrays in place (--sum --in-place)"
			   : "summing two of its own float arrays into a third (--sum)";
}

int main(int argc, char **argv)
{
	struct opts o = {.np = 2, .factor = 2, .iters = 0, .warmup = 3, .lo = 8, .hi = 256u << 20};
	struct mode m = {0};
	parse(argc, argv, &o, &m);
	struct shared *sh =
	    mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 3;
	memset(sh, 0, sizeof(*sh));
	char *shared_bufs[MAX_NP];
	if (m.cross) { /* each process's first buffer, mapped by all before the fork */
		for (int r = 0; r < o.np; r++) {
			shared_bufs[r] = mmap(NULL, o.hi, PROT_READ | PROT_WRITE,
					      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
			if (shared_bufs[r] == MAP_FAILED)
				return 3;
		}
		m.bufs = shared_bufs;
	}
	printf("# copy_limit: %d processes at once, each %s\n", o.np, describe(&m));
	printf("# %10s %12s %10s %10s\n", "size", "time(us)", "GB/s", "fastest");
	fflush(stdout); /* the children must not print it again */
	pid_t pids[MAX_NP];
	for (int r = 0; r < o.np; r++) {
		pids[r] = fork();
		if (pids[r] == 0)
			child(sh, &m, r, o.np, &o);
	}
	int rc = 0;
	for (int r = 0; r < o.np; r++) {
		int st;
		waitpid(pids[r], &st, 0);
		rc |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	if (rc)
		return 1;
	int k = 0;
	for (size_t s = o.lo; s <= o.hi && k < MAX_SIZES; s = s * (size_t)o.factor, k++) {
		report(sh, o.np, k, s);
		if (o.factor <= 1)
			break;
	}
	return 0;
}
