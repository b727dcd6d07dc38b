/*
 * perf_args.c — the options of the *_perf programs (nccl-tests flags plus
 * Weft's -a, -np and --bind) and the size sweep they describe.
 */
#include "perf_int.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/parse.h"

/* This process's rank: from the communicator once there is one, before
 * that from the launcher (-1: unknown). */
static int my_rank(void)
{
	return perf_g_rank >= 0 ? perf_g_rank : perf_rt_launcher_rank();
}

/* Option errors: said once (by the launcher's rank 0), exit status 2. */
void perf_usage_error(const char *fmt, ...)
{
	va_list ap;

	if (my_rank() <= 0) {
		fprintf(stderr, "%s: ", perf_g_prog);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fprintf(stderr, " (see -h)\n");
	}
	perf_rt_exit(2);
}

static size_t default_bytes(void)
{
	return perf_g_test->default_bytes ? perf_g_test->default_bytes : 32 << 20;
}

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
	const struct perf_coll_info *ci = perf_coll_info(perf_g_test->coll);

	if (my_rank() > 0)
		perf_rt_exit(0);
	char dflt[32];
	size_t d = default_bytes();
	if (d % (1 << 20) == 0)
		snprintf(dflt, sizeof(dflt), "%zuM", d >> 20);
	else
		snprintf(dflt, sizeof(dflt), "%zu", d);
	printf("Usage: %s [options]   (%s %s; flags as in nccl-tests)\n"
	       "  -b, --minbytes SIZE     smallest size, K/M/G suffixes (default %s)\n"
	       "  -e, --maxbytes SIZE     largest size (default %s)\n"
	       "  -f, --stepfactor N      multiply the size by N each step (default 2)\n"
	       "  -i, --stepbytes SIZE    add SIZE each step instead (sets -f 1)\n"
	       "  -n, --iters N           timed iterations per size (default 20)\n"
	       "  -w, --warmup_iters N    warm-up iterations per size (default 5)\n"
	       "  -c, --check 0|1         check results and guard bytes (default 1)\n"
	       "  -d, --datatype TYPE     int8 uint8 int32 uint32 int64 uint64 half bfloat16\n"
	       "                          float double, or all (default float)\n",
	       perf_g_prog, perf_g_test->backend, ci->name, dflt, dflt);
	if (ci->has_op)
		printf("  -o, --op OP             sum prod min max avg, or all (default sum)\n");
	if (ci->has_root)
		printf("  -r, --root ROOT         the root rank (default 0)\n");
#ifndef PERF_MPI
	char algo[128];

	perf_algo_setting(algo, sizeof(algo), "ALGO");
	printf("  -a, --algo ALGO         force an algorithm: sets WEFT_ALGO=%s\n"
	       "                          (names: the algorithms table of weft-topo)\n"
	       "  -R, --mem_alloc         buffers from weft_mem_alloc (local peers map them)\n"
	       "  -np N                   fork N local ranks (ids passed over a pipe)\n"
	       "  --bind core|none|auto   -np ranks' CPU binding; auto (default) binds each rank\n"
	       "                          to one CPU when np <= 2, like Open MPI's default\n"
	       "Without -np, ranks come from the launcher: mpirun, mpirun.mpich, srun, torchrun\n"
	       "or WEFT_RANK/WEFT_NRANKS/WEFT_ROOT (weft_comm_init_env); with none of these, a\n"
	       "single rank runs. A launcher's variables that cannot be used are an error.\n",
	       algo);
#else
	printf("Run under mpirun.\n");
#endif
	printf("  -h, --help              this text\n");
	printf("Options also take one dash (-minbytes 8) and unique prefixes (--min 8).\n");
	printf("Sizes are bytes of the larger buffer (for allgather, reduce_scatter and\n"
	       "alltoall: count per rank x nranks x type size), rounded down to whole elements\n"
	       "per rank; the count column is size / type size. Times are the mean per call\n"
	       "over -n calls, the maximum over ranks.%s\n",
	       ci->in_place ? "" : " This collective has no in-place form: those columns are N/A.");
	perf_rt_exit(0);
}

static size_t parse_size(const char *flag, const char *s)
{
	enum weft_parse_fault fault;
	uint64_t v;

	if (weft_parse_size(s, SIZE_MAX, WEFT_PARSE_B_SUFFIX, &v, &fault) == WEFT_SUCCESS)
		return (size_t)v;
	if (fault == WEFT_PARSE_TOO_LARGE)
		perf_usage_error("%s: size '%s' is too large", flag, s);
	perf_usage_error("%s: bad size '%s' (want a number with an optional K, M or G suffix)",
			 flag, s);
}

static long parse_int(const char *flag, const char *s, long lo, long hi)
{
	uint64_t v;

	if (weft_parse_size(s, (uint64_t)hi, WEFT_PARSE_NO_SUFFIX, &v, NULL) != WEFT_SUCCESS ||
	    (long)v < lo)
		perf_usage_error("%s: bad value '%s' (want an integer from %ld to %ld)", flag, s,
				 lo, hi);
	return (long)v;
}

static int parse_dtype(const char *flag, const char *s)
{
	int d = perf_dtype_lookup(s);

	if (d == -2)
		perf_usage_error("%s: unknown datatype '%s' (int8 uint8 int32 uint32 int64 uint64 "
				 "half bfloat16 float double all)",
				 flag, s);
	return d;
}

static int parse_op(const char *flag, const char *s)
{
	int o = perf_op_lookup(s);

	if (o == -2)
		perf_usage_error("%s: unknown op '%s' (sum prod min max avg all)", flag, s);
	return o;
}

#ifndef PERF_MPI
static void check_algo(const char *flag, const char *s)
{
	if (!*s)
		perf_usage_error("%s: empty algorithm name", flag);
	for (const char *c = s; *c; c++)
		if (!(*c == '_' || *c == '-' || (*c >= '0' && *c <= '9') ||
		      (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
			perf_usage_error("%s: bad algorithm name '%s'", flag, s);
}
#endif

/* Long names; the short ones are in optstring below. getopt_long_only
 * takes "-np 4" and "-minbytes 8" as well as "--np 4": a single-letter
 * option such as "-n 5" stays the short one. */
enum { OPT_NP = 256, OPT_BIND };

static const struct option long_opts[] = {
    {"np", required_argument, NULL, OPT_NP},
    {"bind", required_argument, NULL, OPT_BIND},
    {"minbytes", required_argument, NULL, 'b'},
    {"maxbytes", required_argument, NULL, 'e'},
    {"stepfactor", required_argument, NULL, 'f'},
    {"stepbytes", required_argument, NULL, 'i'},
    {"iters", required_argument, NULL, 'n'},
    {"warmup_iters", required_argument, NULL, 'w'},
    {"check", required_argument, NULL, 'c'},
    {"datatype", required_argument, NULL, 'd'},
    {"op", required_argument, NULL, 'o'},
    {"root", required_argument, NULL, 'r'},
    {"algo", required_argument, NULL, 'a'},
    {"mem_alloc", no_argument, NULL, 'R'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* ':' first: a missing value comes back as ':', not as '?'. */
static const char short_opts[] = ":b:e:f:i:n:w:c:d:o:r:a:Rh";

/* The option as the user typed it, without an attached value: "-b",
 * "--minbytes", "-np". */
static const char *flag_text(char *buf, size_t len, const char *arg, int c, int longindex)
{
	if (longindex < 0 && c > 0 && c < 256) {
		snprintf(buf, len, "-%c", c);
		return buf;
	}
	snprintf(buf, len, "%.*s", (int)strcspn(arg, "="), arg);
	return buf;
}

/* Options that only the Weft programs have. */
static void weft_only(struct perf_opts *o, int key, const char *flag, const char *v)
{
#ifdef PERF_MPI
	perf_usage_error("%s: only for the Weft programs (MPI: use mpirun's own options)", flag);
#else
	switch (key) {
	case 'a':
		check_algo(flag, v);
		o->algo = v;
		break;
	case 'R': o->mem_alloc = true; break;
	case OPT_BIND:
		if (strcmp(v, "core") == 0)
			o->bind = PERF_BIND_CORE;
		else if (strcmp(v, "none") == 0)
			o->bind = PERF_BIND_NONE;
		else if (strcmp(v, "auto") == 0)
			o->bind = PERF_BIND_AUTO;
		else
			perf_usage_error("%s: bad value '%s' (core, none or auto)", flag, v);
		break;
	case OPT_NP: o->np = (int)parse_int(flag, v, 1, 4096); break;
	default: break;
	}
#endif
}

/* One option and its value. */
static void take_opt(struct perf_opts *o, int c, const char *flag, const char *v)
{
	const struct perf_coll_info *ci = perf_coll_info(perf_g_test->coll);

	switch (c) {
	case 'b': o->minbytes = parse_size(flag, v); break;
	case 'e': o->maxbytes = parse_size(flag, v); break;
	case 'f': o->stepfactor = (size_t)parse_int(flag, v, 1, 1 << 20); break;
	case 'i':
		o->stepbytes = parse_size(flag, v);
		if (!o->stepbytes)
			perf_usage_error("%s: must be at least 1", flag);
		o->stepfactor = 1;
		break;
	case 'n': o->iters = (int)parse_int(flag, v, 1, 1 << 30); break;
	case 'w': o->warmup = (int)parse_int(flag, v, 0, 1 << 30); break;
	case 'c': o->check = parse_int(flag, v, 0, 1) != 0; break;
	case 'd': o->dtype = parse_dtype(flag, v); break;
	case 'o': o->op = parse_op(flag, v); break;
	case 'r':
		if (!ci->has_root)
			perf_usage_error("%s: %s has no root", flag, ci->name);
		o->root = (int)parse_int(flag, v, 0, 1 << 30);
		break;
	case 'h': usage();
	default: weft_only(o, c, flag, v); break;
	}
}

void perf_parse_args(int argc, char **argv, struct perf_opts *o)
{
	*o = (struct perf_opts){
	    .minbytes = default_bytes(),
	    .maxbytes = default_bytes(),
	    .stepbytes = 1 << 20,
	    .stepfactor = 2,
	    .iters = 20,
	    .warmup = 5,
	    .check = true,
	    .dtype = PERF_FLOAT,
	    .op = PERF_SUM,
	    .root = 0,
	};
	opterr = 0; /* the messages below say it once, on rank 0 */
	optind = 1;
	for (;;) {
		int at = optind, longindex = -1;
		int c = getopt_long_only(argc, argv, short_opts, long_opts, &longindex);
		const char *arg = at < argc ? argv[at] : "";
		char flag[64];

		if (c == -1)
			break;
		if (c == '?')
			perf_usage_error("unknown option '%s'", arg);
		if (c == ':')
			perf_usage_error("%s: needs a value", arg);
		take_opt(o, c, flag_text(flag, sizeof(flag), arg, c, longindex), optarg);
	}
	if (optind < argc)
		perf_usage_error("unexpected argument '%s'", argv[optind]);
	if (o->maxbytes < o->minbytes)
		perf_usage_error("-e: maxbytes (%zu) is smaller than minbytes (%zu)", o->maxbytes,
				 o->minbytes);
}

/* The next size of the sweep; 0 when done. */
size_t perf_next_size(const struct perf_opts *o, size_t size)
{
	size_t next;

	if (o->stepfactor > 1) {
		if (size == 0)
			return o->maxbytes >= 1 ? 1 : 0;
		if (size > o->maxbytes / o->stepfactor)
			return 0;
		next = size * o->stepfactor;
	} else {
		if (size > o->maxbytes - o->stepbytes)
			return 0;
		next = size + o->stepbytes;
	}
	return next <= o->maxbytes ? next : 0;
}
