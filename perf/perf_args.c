/*
 * perf_args.c — the options of the *_perf programs (nccl-tests flags plus
 * Weft's -a, -np and --bind) and the size sweep they describe.
 */
#include "perf_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The rank the launcher gave this process, or -1 (before any init). */
int perf_launcher_rank(void)
{
	static const char *const vars[] = {"WEFT_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		if (v && *v)
			return atoi(v);
	}
	return -1;
}

/* Option errors: said once (by the launcher's rank 0), exit status 2. */
void perf_usage_error(const char *fmt, ...)
{
	va_list ap;

	if (perf_launcher_rank() <= 0) {
		fprintf(stderr, "%s: ", perf_g_prog);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fprintf(stderr, " (see -h)\n");
	}
	exit(2);
}

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
	const struct perf_coll_info *ci = perf_coll_info(perf_g_test->coll);

	if (perf_launcher_rank() > 0)
		exit(0);
	printf("Usage: %s [options]   (%s %s; flags as in nccl-tests)\n"
	       "  -b, --minbytes SIZE     smallest size, K/M/G suffixes (default 32M)\n"
	       "  -e, --maxbytes SIZE     largest size (default 32M)\n"
	       "  -f, --stepfactor N      multiply the size by N each step (default 2)\n"
	       "  -i, --stepbytes SIZE    add SIZE each step instead (sets -f 1)\n"
	       "  -n, --iters N           timed iterations per size (default 20)\n"
	       "  -w, --warmup_iters N    warm-up iterations per size (default 5)\n"
	       "  -c, --check 0|1         check results and guard bytes (default 1)\n"
	       "  -d, --datatype TYPE     int8 uint8 int32 uint32 int64 uint64 half bfloat16\n"
	       "                          float double, or all (default float)\n",
	       perf_g_prog, perf_g_test->backend, ci->name);
	if (ci->has_op)
		printf("  -o, --op OP             sum prod min max avg, or all (default sum)\n");
	if (ci->has_root)
		printf("  -r, --root ROOT         the root rank (default 0)\n");
#ifndef PERF_MPI
	char algo[128];

	perf_algo_setting(algo, sizeof(algo), "ALGO");
	printf("  -a, --algo ALGO         force an algorithm: sets WEFT_ALGO=%s\n"
	       "                          (names: the algorithms table of weft-topo)\n"
	       "  -R                      buffers from weft_mem_alloc (not in this build)\n"
	       "  -np N                   fork N local ranks (ids passed over a pipe)\n"
	       "  --bind core|none|auto   -np ranks' CPU binding; auto (default) binds each rank\n"
	       "                          to one CPU when np <= 2, like Open MPI's default\n"
	       "Without -np, ranks come from mpirun, mpirun.mpich or WEFT_RANK/WEFT_NRANKS/\n"
	       "WEFT_ROOT (weft_comm_init_env); with none of these, a single rank runs.\n",
	       algo);
#else
	printf("Run under mpirun.\n");
#endif
	printf("Sizes are bytes of the larger buffer (for allgather, reduce_scatter and\n"
	       "alltoall: count per rank x nranks x type size), rounded down to whole elements\n"
	       "per rank; the count column is size / type size. Times are the mean per call\n"
	       "over -n calls, the maximum over ranks.%s\n",
	       ci->in_place ? "" : " This collective has no in-place form: those columns are N/A.");
	exit(0);
}

static size_t parse_size(const char *flag, const char *s)
{
	char *end;
	unsigned long long v;
	unsigned long long mult = 1;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || errno || *s == '-')
		perf_usage_error(
		    "%s: bad size '%s' (want a number with an optional K, M or G suffix)", flag, s);
	switch (*end) {
	case 'k':
	case 'K':
		mult = 1ULL << 10;
		end++;
		break;
	case 'm':
	case 'M':
		mult = 1ULL << 20;
		end++;
		break;
	case 'g':
	case 'G':
		mult = 1ULL << 30;
		end++;
		break;
	default: break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		perf_usage_error(
		    "%s: bad size '%s' (want a number with an optional K, M or G suffix)", flag, s);
	if (v > SIZE_MAX / mult)
		perf_usage_error("%s: size '%s' is too large", flag, s);
	return (size_t)(v * mult);
}

static long parse_int(const char *flag, const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < lo || v > hi)
		perf_usage_error("%s: bad value '%s' (want an integer from %ld to %ld)", flag, s,
				 lo, hi);
	return v;
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

struct opt_spec {
	const char *shrt, *lng;
	int key;
	bool has_value;
};

static const struct opt_spec opt_specs[] = {
    {"-np", "--np", 'N', true}, /* before -n: "-np" is not "-n p" */
    {"--bind", "--bind", 'B', true},	 {"-b", "--minbytes", 'b', true},
    {"-e", "--maxbytes", 'e', true},	 {"-f", "--stepfactor", 'f', true},
    {"-i", "--stepbytes", 'i', true},	 {"-n", "--iters", 'n', true},
    {"-w", "--warmup_iters", 'w', true}, {"-c", "--check", 'c', true},
    {"-d", "--datatype", 'd', true},	 {"-o", "--op", 'o', true},
    {"-r", "--root", 'r', true},	 {"-a", "--algo", 'a', true},
    {"-R", "--mem_alloc", 'R', false},	 {"-h", "--help", 'h', false},
};

/* Match argv[*k] against the table; sets *value for options that take one
 * ("-b 8", "-b8", "--minbytes 8", "--minbytes=8"). */
static const struct opt_spec *match_opt(int argc, char **argv, int *k, const char **value)
{
	const char *arg = argv[*k];

	for (size_t i = 0; i < sizeof(opt_specs) / sizeof(opt_specs[0]); i++) {
		const struct opt_spec *s = &opt_specs[i];
		size_t sl = strlen(s->shrt), ll = strlen(s->lng);
		const char *attached = NULL;

		if (strcmp(arg, s->shrt) == 0 || strcmp(arg, s->lng) == 0)
			attached = "";
		else if (s->has_value && strncmp(arg, s->lng, ll) == 0 && arg[ll] == '=')
			attached = arg + ll + 1;
		else if (s->has_value && strncmp(arg, s->shrt, sl) == 0 && arg[sl] != '-')
			attached = arg + sl;
		if (!attached)
			continue;
		*value = NULL;
		if (!s->has_value)
			return s;
		if (*attached) {
			*value = attached;
		} else {
			if (*k + 1 >= argc)
				perf_usage_error("%s: needs a value", arg);
			*value = argv[++*k];
		}
		return s;
	}
	perf_usage_error("unknown option '%s'", arg);
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
	case 'R':
		fprintf(stderr, "%s: -R: weft_mem_alloc is not available in this build\n",
			perf_g_prog);
		exit(2);
	case 'B':
		if (strcmp(v, "core") == 0)
			o->bind = PERF_BIND_CORE;
		else if (strcmp(v, "none") == 0)
			o->bind = PERF_BIND_NONE;
		else if (strcmp(v, "auto") == 0)
			o->bind = PERF_BIND_AUTO;
		else
			perf_usage_error("%s: bad value '%s' (core, none or auto)", flag, v);
		break;
	case 'N': o->np = (int)parse_int(flag, v, 1, 4096); break;
	default: break;
	}
#endif
}

void perf_parse_args(int argc, char **argv, struct perf_opts *o)
{
	const struct perf_coll_info *ci = perf_coll_info(perf_g_test->coll);

	*o = (struct perf_opts){
	    .minbytes = 32 << 20,
	    .maxbytes = 32 << 20,
	    .stepbytes = 1 << 20,
	    .stepfactor = 2,
	    .iters = 20,
	    .warmup = 5,
	    .check = true,
	    .dtype = PERF_FLOAT,
	    .op = PERF_SUM,
	    .root = 0,
	};
	for (int k = 1; k < argc; k++) {
		const char *flag = argv[k], *v;
		const struct opt_spec *s = match_opt(argc, argv, &k, &v);

		switch (s->key) {
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
		default: weft_only(o, s->key, flag, v); break;
		}
	}
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
