/*
 * perf_common.c — the driver shared by the *_perf programs; see perf_common.h.
 *
 * The sweep, for every size from -b to -e:
 *   1. -w warm-up calls, a barrier, then -n timed calls; the mean time per
 *      call on each rank, reduced with MAX over ranks, is the row's time;
 *   2. with -c 1, one more call on a known pattern: every element of the
 *      result is compared with the value computed locally (#wrong, summed
 *      over ranks), and guard bytes around the buffers must be untouched
 *      ("Out of bounds values");
 *   3. the same again in place.
 * The input pattern is small integers, so sums, products, minima and maxima
 * are exact in every datatype including half and bfloat16 (up to about 40
 * ranks for int8 sums); avg of a floating type is compared with a
 * tolerance because an implementation may scale before or after summing.
 * Patterns are periodic in the element index, so filling and checking run
 * at memcpy/memcmp speed even for buffers of hundreds of MiB.
 *
 * The runtime under the sweep (start-up, barrier, reductions of timings and
 * counts, shut-down) is MPI under PERF_MPI and Weft otherwise: the rt_*
 * functions, near the end of the file, are the only part that differs.
 */
#define _GNU_SOURCE
#include "perf_common.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GUARD_BYTES	    4096  /* checked on each side of every buffer */
#define GUARD_FILL	    0x5a  /* what the guards hold */
#define POISON_FILL	    0x7f  /* what a result buffer holds before the check */
#define CHECK_CHUNK	    65536 /* bytes compared at once before looking closer */
#define HOST_CHARS	    60
#define CPUS_CHARS	    32
#define CHILD_GRACE_SECONDS 5.0 /* -np: how long survivors get after a rank fails */

struct perf_opts {
	size_t minbytes, maxbytes, stepbytes;
	size_t stepfactor; /* > 1: multiply; 1: add stepbytes */
	int iters, warmup;
	bool check;
	int dtype; /* an enum perf_dtype, or -1 for all */
	int op;	   /* an enum perf_op, or -1 for all */
	const char *algo;
	int np; /* local launcher: ranks to fork; 0 when not used */
	enum { BIND_AUTO, BIND_CORE, BIND_NONE } bind; /* -np ranks' CPU binding */
};

/* What rank 0 learns about every rank, for the "# Rank" lines. */
struct rank_info {
	int32_t pid;
	char host[HOST_CHARS];
	char cpus[CPUS_CHARS]; /* CPUs this rank may run on */
};

/* A buffer with guard regions before and after. */
struct guarded_buf {
	unsigned char *base; /* allocation */
	unsigned char *p;    /* usable bytes, page aligned */
	size_t bytes;
};

/* This rank's input and the expected result, one period of each. */
struct pattern {
	size_t period; /* elements */
	size_t tsize;
	unsigned char *in;  /* period elements: this rank's input */
	unsigned char *out; /* period elements per block; allgather has nranks blocks */
	bool tolerant;	    /* floating avg: compare with a tolerance */
};

static const struct perf_test *g_test;
static const char *g_prog = "perf";
static int g_rank = -1;
static int g_nranks;

static void rt_init(const struct perf_opts *o);
static void rt_barrier(void);
static double rt_max_double(double v);
static void rt_sum_i64(int64_t *v, int n);
static void rt_gather_info(const struct rank_info *mine, struct rank_info *all);
static double rt_wtime(void);
static void rt_describe(char *buf, size_t len);
static void rt_finalize(void);
static void rt_abort(void) __attribute__((noreturn));

/* ---- datatypes ------------------------------------------------------- */

static const struct {
	const char *name;
	size_t size;
	bool is_signed;
	bool is_float;
	double eps; /* unit roundoff, floating types */
} dtypes[PERF_DTYPE_COUNT] = {
    [PERF_INT8] = {"int8", 1, true, false, 0},
    [PERF_UINT8] = {"uint8", 1, false, false, 0},
    [PERF_INT32] = {"int32", 4, true, false, 0},
    [PERF_UINT32] = {"uint32", 4, false, false, 0},
    [PERF_INT64] = {"int64", 8, true, false, 0},
    [PERF_UINT64] = {"uint64", 8, false, false, 0},
    [PERF_HALF] = {"half", 2, true, true, 0x1p-11},
    [PERF_BFLOAT16] = {"bfloat16", 2, true, true, 0x1p-8},
    [PERF_FLOAT] = {"float", 4, true, true, 0x1p-24},
    [PERF_DOUBLE] = {"double", 8, true, true, 0x1p-53},
};

static const char *const op_names[PERF_OP_COUNT] = {
    [PERF_SUM] = "sum", [PERF_PROD] = "prod", [PERF_MIN] = "min",
    [PERF_MAX] = "max", [PERF_AVG] = "avg",
};

size_t perf_dtype_size(enum perf_dtype dtype)
{
	return (unsigned)dtype < PERF_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

const char *perf_dtype_name(enum perf_dtype dtype)
{
	return (unsigned)dtype < PERF_DTYPE_COUNT ? dtypes[dtype].name : "?";
}

const char *perf_op_name(enum perf_op op)
{
	return (unsigned)op < PERF_OP_COUNT ? op_names[op] : "?";
}

static uint16_t float_to_half(float f)
{
	uint32_t x, sign, absx, h, rem;

	memcpy(&x, &f, sizeof(x));
	sign = (x >> 16) & 0x8000;
	absx = x & 0x7fffffff;
	if (absx > 0x7f800000)
		return (uint16_t)(sign | 0x7e00); /* NaN */
	if (absx >= 0x477ff000)
		return (uint16_t)(sign | 0x7c00); /* rounds to infinity */
	if (absx < 0x38800000) {		  /* below 2^-14: subnormal half */
		float a;
		memcpy(&a, &absx, sizeof(a));
		return (uint16_t)(sign | (uint32_t)lrintf(a * 0x1p24f));
	}
	h = (absx >> 13) - ((127 - 15) << 10);
	rem = absx & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++;
	return (uint16_t)(sign | h);
}

static float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
	float f;

	if (e == 0) {
		f = ldexpf((float)m, -24);
		return sign ? -f : f;
	}
	x = sign | (e == 31 ? 0x7f800000 | (m << 13) : ((e + 112) << 23) | (m << 13));
	memcpy(&f, &x, sizeof(f));
	return f;
}

static uint16_t float_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

static float bf16_to_float(uint16_t h)
{
	uint32_t x = (uint32_t)h << 16;
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

/* Store v (a small integer, or an average for floating types) as dtype.
 * Integers go through int64 so that out-of-range values wrap as the
 * library's integer arithmetic does. */
static void encode(enum perf_dtype dt, double v, void *out)
{
	int64_t i = (int64_t)v;

	switch (dt) {
	case PERF_INT8: {
		int8_t x = (int8_t)i;
		memcpy(out, &x, 1);
		break;
	}
	case PERF_UINT8: {
		uint8_t x = (uint8_t)i;
		memcpy(out, &x, 1);
		break;
	}
	case PERF_INT32: {
		int32_t x = (int32_t)i;
		memcpy(out, &x, 4);
		break;
	}
	case PERF_UINT32: {
		uint32_t x = (uint32_t)i;
		memcpy(out, &x, 4);
		break;
	}
	case PERF_INT64: memcpy(out, &i, 8); break;
	case PERF_UINT64: {
		uint64_t x = (uint64_t)i;
		memcpy(out, &x, 8);
		break;
	}
	case PERF_HALF: {
		uint16_t x = float_to_half((float)v);
		memcpy(out, &x, 2);
		break;
	}
	case PERF_BFLOAT16: {
		uint16_t x = float_to_bf16((float)v);
		memcpy(out, &x, 2);
		break;
	}
	case PERF_FLOAT: {
		float x = (float)v;
		memcpy(out, &x, 4);
		break;
	}
	case PERF_DOUBLE: memcpy(out, &v, 8); break;
	default: break;
	}
}

/* Floating types only: the element's value. */
static double decode_float(enum perf_dtype dt, const void *in)
{
	uint16_t h;
	float f;
	double d;

	switch (dt) {
	case PERF_HALF: memcpy(&h, in, 2); return half_to_float(h);
	case PERF_BFLOAT16: memcpy(&h, in, 2); return bf16_to_float(h);
	case PERF_FLOAT: memcpy(&f, in, 4); return f;
	case PERF_DOUBLE: memcpy(&d, in, 8); return d;
	default: return NAN;
	}
}

/* ---- patterns ---------------------------------------------------------- */

/* Rank r's input at element i. Signed types include negative values. */
static double input_value(enum perf_op op, enum perf_dtype dt, int r, int n, size_t i)
{
	size_t ur = (size_t)r;
	bool neg = dtypes[dt].is_signed;
	double v;

	if (g_test->coll == PERF_COLL_ALLGATHER)
		return (double)((i * 13 + ur * 29 + 5) % 101) - (neg ? 50 : 0);
	switch (op) {
	case PERF_SUM:
	case PERF_AVG: return (double)((i * 7 + ur * 3 + 1) % 4) - (neg ? 1 : 0);
	case PERF_PROD:
		/* one rank contributes 2, the others 1 (or -1): the product stays tiny */
		v = (i + ur) % (size_t)n == 0 ? 2 : 1;
		if (neg && (i * 3 + ur) % 7 == 0)
			v = -v;
		return v;
	default: return (double)((i * 13 + ur * 29 + 5) % 17) - (neg ? 8 : 0);
	}
}

/* A period, in elements, of every rank's input_value(). */
static size_t pattern_period(enum perf_op op, enum perf_dtype dt, int n)
{
	if (g_test->coll == PERF_COLL_ALLGATHER)
		return 101;
	switch (op) {
	case PERF_SUM:
	case PERF_AVG: return 4;
	case PERF_PROD: return dtypes[dt].is_signed && n % 7 ? 7 * (size_t)n : (size_t)n;
	default: return 17;
	}
}

static double reduced_value(enum perf_op op, enum perf_dtype dt, int n, size_t i)
{
	double acc = input_value(op, dt, 0, n, i);

	for (int r = 1; r < n; r++) {
		double v = input_value(op, dt, r, n, i);
		switch (op) {
		case PERF_PROD: acc *= v; break;
		case PERF_MIN: acc = v < acc ? v : acc; break;
		case PERF_MAX: acc = v > acc ? v : acc; break;
		default: acc += v; break;
		}
	}
	if (op == PERF_AVG)
		acc = dtypes[dt].is_float ? acc / n : (double)((int64_t)acc / n);
	return acc;
}

static void pattern_build(struct pattern *p, enum perf_dtype dt, enum perf_op op)
{
	int blocks = g_test->coll == PERF_COLL_ALLGATHER ? g_nranks : 1;

	p->period = pattern_period(op, dt, g_nranks);
	p->tsize = dtypes[dt].size;
	p->tolerant = g_test->coll == PERF_COLL_ALLREDUCE && op == PERF_AVG && dtypes[dt].is_float;
	p->in = malloc(p->period * p->tsize);
	p->out = malloc(p->period * p->tsize * (size_t)blocks);
	if (!p->in || !p->out)
		perf_die("out of memory for the check pattern");
	for (size_t i = 0; i < p->period; i++) {
		encode(dt, input_value(op, dt, g_rank, g_nranks, i), p->in + i * p->tsize);
		if (blocks == 1) {
			encode(dt, reduced_value(op, dt, g_nranks, i), p->out + i * p->tsize);
			continue;
		}
		for (int r = 0; r < blocks; r++)
			encode(dt, input_value(op, dt, r, g_nranks, i),
			       p->out + ((size_t)r * p->period + i) * p->tsize);
	}
}

static void pattern_free(struct pattern *p)
{
	free(p->in);
	free(p->out);
}

/* Fill count elements with a periodic table, doubling the copied span. */
static void fill_periodic(unsigned char *buf, size_t count, const unsigned char *tab, size_t period,
			  size_t tsize)
{
	size_t total = count * tsize, block = period * tsize, filled;

	if (total <= block) {
		memcpy(buf, tab, total);
		return;
	}
	memcpy(buf, tab, block);
	for (filled = block; filled < total;) {
		size_t n = filled < total - filled ? filled : total - filled;
		memcpy(buf + filled, buf, n);
		filled += n;
	}
}

static bool element_ok(const struct pattern *p, enum perf_dtype dt, const unsigned char *got,
		       const unsigned char *want)
{
	double g, w;

	if (memcmp(got, want, p->tsize) == 0)
		return true;
	if (!p->tolerant)
		return false;
	g = decode_float(dt, got);
	w = decode_float(dt, want);
	return fabs(g - w) <= dtypes[dt].eps * 2 * (g_nranks + 1) * (fabs(w) > 1 ? fabs(w) : 1);
}

/* Wrong elements among count, against the periodic table tab. */
static int64_t check_periodic(const unsigned char *buf, size_t count, const unsigned char *tab,
			      const struct pattern *p, enum perf_dtype dt)
{
	size_t block = p->period * p->tsize;
	size_t reps = CHECK_CHUNK / block ? CHECK_CHUNK / block : 1;
	size_t chunk = reps * block, total = count * p->tsize;
	static unsigned char *cmp;
	static size_t cmp_bytes;
	int64_t wrong = 0;

	if (cmp_bytes < chunk) {
		free(cmp);
		cmp = malloc(chunk);
		if (!cmp)
			perf_die("out of memory for the check");
		cmp_bytes = chunk;
	}
	fill_periodic(cmp, chunk / p->tsize, tab, p->period, p->tsize);
	for (size_t off = 0; off < total; off += chunk) {
		size_t n = total - off < chunk ? total - off : chunk;
		if (memcmp(buf + off, cmp, n) == 0)
			continue;
		for (size_t e = 0; e < n; e += p->tsize)
			wrong += !element_ok(p, dt, buf + off + e, cmp + e);
	}
	return wrong;
}

/* ---- buffers ----------------------------------------------------------- */

static void buf_alloc(struct guarded_buf *b, size_t bytes)
{
	size_t total = GUARD_BYTES + bytes + GUARD_BYTES;
	void *p;

	if (posix_memalign(&p, 4096, total))
		perf_die("cannot allocate %zu bytes", total);
	memset(p, 0, total); /* fault every page in before timing */
	b->base = p;
	b->p = b->base + GUARD_BYTES;
	b->bytes = bytes;
}

/* Arm the guards around [p, p + used). */
static void guard_set(unsigned char *p, size_t used)
{
	memset(p - GUARD_BYTES, GUARD_FILL, GUARD_BYTES);
	memset(p + used, GUARD_FILL, GUARD_BYTES);
}

static int64_t guard_count(const unsigned char *p, size_t used)
{
	int64_t bad = 0;

	for (size_t i = 0; i < GUARD_BYTES; i++)
		bad += (p[(ptrdiff_t)i - GUARD_BYTES] != GUARD_FILL) + (p[used + i] != GUARD_FILL);
	return bad;
}

/* ---- errors ------------------------------------------------------------ */

void perf_die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	if (g_rank >= 0)
		fprintf(stderr, "%s: rank %d: ", g_prog, g_rank);
	else
		fprintf(stderr, "%s: ", g_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	rt_abort();
}

/* The rank the launcher gave this process, or -1 (before any init). */
static int launcher_rank(void)
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
static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *fmt, ...)
{
	va_list ap;

	if (launcher_rank() <= 0) {
		fprintf(stderr, "%s: ", g_prog);
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fprintf(stderr, " (see -h)\n");
	}
	exit(2);
}

/* ---- options ----------------------------------------------------------- */

static void usage(void)
{
	if (launcher_rank() > 0)
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
	       "                          float double, or all (default float)\n"
	       "  -o, --op OP             sum prod min max avg, or all (default sum)\n"
#ifndef PERF_MPI
	       "  -a, --algo ALGO         force an algorithm: sets WEFT_ALGO=%s:ALGO (e.g. ring)\n"
	       "  -R                      buffers from weft_mem_alloc (not in this build)\n"
	       "  -np N                   fork N local ranks (ids passed over a pipe)\n"
	       "  --bind core|none|auto   -np ranks' CPU binding; auto (default) binds each rank\n"
	       "                          to one CPU when np <= 2, like Open MPI's default\n"
	       "Without -np, ranks come from mpirun, mpirun.mpich or WEFT_RANK/WEFT_NRANKS/\n"
	       "WEFT_ROOT (weft_comm_init_env); with none of these, a single rank runs.\n"
#else
	       "Run under mpirun.\n"
#endif
	       "Sizes are total bytes of the result buffer, rounded down to whole elements\n"
	       "(and for allgather to a multiple of nranks elements). Times are the mean per\n"
	       "call over -n calls, the maximum over ranks.\n",
	       g_prog, g_test->backend,
	       g_test->coll == PERF_COLL_ALLGATHER ? "allgather" : "allreduce"
#ifndef PERF_MPI
	       ,
	       g_test->coll == PERF_COLL_ALLGATHER ? "allgather" : "allreduce"
#endif
	);
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
		usage_error("%s: bad size '%s' (want a number with an optional K, M or G suffix)",
			    flag, s);
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
		usage_error("%s: bad size '%s' (want a number with an optional K, M or G suffix)",
			    flag, s);
	if (v > SIZE_MAX / mult)
		usage_error("%s: size '%s' is too large", flag, s);
	return (size_t)(v * mult);
}

static long parse_int(const char *flag, const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < lo || v > hi)
		usage_error("%s: bad value '%s' (want an integer from %ld to %ld)", flag, s, lo,
			    hi);
	return v;
}

static int parse_dtype(const char *flag, const char *s)
{
	static const struct {
		const char *alias;
		enum perf_dtype dt;
	} aliases[] = {
	    {"char", PERF_INT8},  {"int", PERF_INT32},	    {"float16", PERF_HALF},
	    {"fp16", PERF_HALF},  {"bf16", PERF_BFLOAT16},  {"float32", PERF_FLOAT},
	    {"fp32", PERF_FLOAT}, {"float64", PERF_DOUBLE}, {"fp64", PERF_DOUBLE},
	};

	if (strcmp(s, "all") == 0)
		return -1;
	for (int d = 0; d < PERF_DTYPE_COUNT; d++)
		if (strcmp(s, dtypes[d].name) == 0)
			return d;
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcmp(s, aliases[i].alias) == 0)
			return (int)aliases[i].dt;
	usage_error("%s: unknown datatype '%s' (int8 uint8 int32 uint32 int64 uint64 half bfloat16 "
		    "float double all)",
		    flag, s);
}

static int parse_op(const char *flag, const char *s)
{
	if (strcmp(s, "all") == 0)
		return -1;
	for (int o = 0; o < PERF_OP_COUNT; o++)
		if (strcmp(s, op_names[o]) == 0)
			return o;
	usage_error("%s: unknown op '%s' (sum prod min max avg all)", flag, s);
}

#ifndef PERF_MPI
static void check_algo(const char *flag, const char *s)
{
	if (!*s)
		usage_error("%s: empty algorithm name", flag);
	for (const char *c = s; *c; c++)
		if (!(*c == '_' || *c == '-' || (*c >= '0' && *c <= '9') ||
		      (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
			usage_error("%s: bad algorithm name '%s'", flag, s);
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
    {"-a", "--algo", 'a', true},	 {"-R", "--mem_alloc", 'R', false},
    {"-h", "--help", 'h', false},
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
				usage_error("%s: needs a value", arg);
			*value = argv[++*k];
		}
		return s;
	}
	usage_error("unknown option '%s'", arg);
}

static void parse_args(int argc, char **argv, struct perf_opts *o)
{
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
				usage_error("%s: must be at least 1", flag);
			o->stepfactor = 1;
			break;
		case 'n': o->iters = (int)parse_int(flag, v, 1, 1 << 30); break;
		case 'w': o->warmup = (int)parse_int(flag, v, 0, 1 << 30); break;
		case 'c': o->check = parse_int(flag, v, 0, 1) != 0; break;
		case 'd': o->dtype = parse_dtype(flag, v); break;
		case 'o': o->op = parse_op(flag, v); break;
		case 'a':
#ifdef PERF_MPI
			usage_error("%s: forcing an algorithm is only for the Weft programs", flag);
#else
			check_algo(flag, v);
			o->algo = v;
#endif
			break;
		case 'R':
#ifdef PERF_MPI
			usage_error("-R: weft_mem_alloc buffers are only for the Weft programs");
#else
			fprintf(stderr, "%s: -R: weft_mem_alloc is not available in this build\n",
				g_prog);
			exit(2);
#endif
		case 'B':
#ifdef PERF_MPI
			usage_error("%s: binding is the launcher's business; use mpirun --bind-to",
				    flag);
#else
			if (strcmp(v, "core") == 0)
				o->bind = BIND_CORE;
			else if (strcmp(v, "none") == 0)
				o->bind = BIND_NONE;
			else if (strcmp(v, "auto") == 0)
				o->bind = BIND_AUTO;
			else
				usage_error("%s: bad value '%s' (core, none or auto)", flag, v);
#endif
			break;
		case 'N':
#ifdef PERF_MPI
			usage_error(
			    "%s: the local launcher is only in the Weft programs; use mpirun -np N",
			    flag);
#else
			o->np = (int)parse_int(flag, v, 1, 4096);
#endif
			break;
		case 'h': usage();
		default: break;
		}
	}
	if (o->maxbytes < o->minbytes)
		usage_error("-e: maxbytes (%zu) is smaller than minbytes (%zu)", o->maxbytes,
			    o->minbytes);
}

/* The next size of the sweep; 0 when done. */
static size_t next_size(const struct perf_opts *o, size_t size)
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

/* ---- the sweep --------------------------------------------------------- */

struct sweep {
	const struct perf_opts *o;
	struct guarded_buf send, recv;
	double bw_sum;
	int bw_count;
	int64_t wrong, oob;
};

static double busbw_factor(void)
{
	double n = g_nranks;

	if (g_test->coll == PERF_COLL_ALLGATHER)
		return (n - 1) / n;
	return 2 * (n - 1) / n;
}

static void format_time(char *buf, size_t len, double us)
{
	if (us >= 10000.0)
		snprintf(buf, len, "%7.0f", us);
	else if (us >= 100.0)
		snprintf(buf, len, "%7.1f", us);
	else
		snprintf(buf, len, "%7.2f", us);
}

/* Load the inputs for the check call and poison what it should overwrite. */
static void check_prepare(const struct perf_call *c, const struct pattern *p, size_t recv_used)
{
	size_t ts = p->tsize;

	if (g_test->coll == PERF_COLL_ALLREDUCE && c->in_place) {
		fill_periodic(c->recvbuf, c->count, p->in, p->period, ts);
	} else {
		memset(c->recvbuf, POISON_FILL, recv_used);
		fill_periodic((unsigned char *)c->sendbuf, c->count, p->in, p->period, ts);
	}
	guard_set(c->recvbuf, recv_used);
	if (!c->in_place)
		guard_set((unsigned char *)c->sendbuf, c->count * ts);
}

static int64_t check_result(const struct perf_call *c, const struct pattern *p)
{
	size_t block = p->period * p->tsize;
	int64_t wrong = 0;

	if (g_test->coll == PERF_COLL_ALLREDUCE)
		return check_periodic(c->recvbuf, c->count, p->out, p, c->dtype);
	for (int r = 0; r < g_nranks; r++)
		wrong +=
		    check_periodic((unsigned char *)c->recvbuf + (size_t)r * c->count * p->tsize,
				   c->count, p->out + (size_t)r * block, p, c->dtype);
	return wrong;
}

/* Time one placement of one size and print its four columns. */
static void bench(struct sweep *s, struct perf_call *c, const struct pattern *p)
{
	const struct perf_opts *o = s->o;
	size_t ts = p->tsize, blocks = g_test->coll == PERF_COLL_ALLGATHER ? (size_t)g_nranks : 1;
	size_t recv_used = c->count * ts * blocks;
	double t0, sec, algbw, busbw;
	int64_t counts[2] = {0, 0};
	char tbuf[32];

	c->recvbuf = s->recv.p;
	c->sendbuf = s->send.p;
	if (c->in_place)
		c->sendbuf = s->recv.p + (blocks > 1 ? (size_t)g_rank * c->count * ts : 0);
	for (int i = 0; i < o->warmup; i++)
		g_test->run(c);
	rt_barrier();
	t0 = rt_wtime();
	for (int i = 0; i < o->iters; i++)
		g_test->run(c);
	sec = rt_max_double((rt_wtime() - t0) / o->iters);

	if (o->check) {
		check_prepare(c, p, recv_used);
		g_test->run(c);
		counts[0] = check_result(c, p);
		counts[1] = guard_count(c->recvbuf, recv_used);
		if (!c->in_place)
			counts[1] += guard_count(c->sendbuf, c->count * ts);
		rt_sum_i64(counts, 2);
		s->wrong += counts[0];
		s->oob += counts[1];
	}
	algbw = sec > 0 ? (double)recv_used / 1e9 / sec : 0;
	busbw = algbw * busbw_factor();
	s->bw_sum += busbw;
	s->bw_count++;
	if (g_rank != 0)
		return;
	format_time(tbuf, sizeof(tbuf), sec * 1e6);
	if (o->check)
		printf("  %7s  %6.2f  %6.2f  %5g", tbuf, algbw, busbw, (double)counts[0]);
	else
		printf("  %7s  %6.2f  %6.2f  %5s", tbuf, algbw, busbw, "N/A");
}

static void sweep_one(struct sweep *s, enum perf_dtype dt, enum perf_op op)
{
	const struct perf_opts *o = s->o;
	size_t ts = dtypes[dt].size;
	size_t blocks = g_test->coll == PERF_COLL_ALLGATHER ? (size_t)g_nranks : 1;
	struct pattern p;

	pattern_build(&p, dt, op);
	/* realistic data for the timed calls; the check reloads what it needs */
	fill_periodic(s->send.p, s->send.bytes / ts, p.in, p.period, ts);
	for (size_t size = o->minbytes;; size = next_size(o, size)) {
		struct perf_call c = {.dtype = dt, .op = op, .rank = g_rank};

		c.count = size / ts / blocks;
		if (g_rank == 0) {
			printf("%12zu  %12zu  %8s  %6s  %6s", c.count * ts * blocks, c.count,
			       dtypes[dt].name,
			       g_test->coll == PERF_COLL_ALLGATHER ? "none" : op_names[op], "-1");
			fflush(stdout);
		}
		c.in_place = false;
		bench(s, &c, &p);
		c.in_place = true;
		bench(s, &c, &p);
		if (g_rank == 0)
			printf("\n");
		if (next_size(o, size) == 0)
			break;
	}
	pattern_free(&p);
}

/* "all", or the CPUs this process may run on ("0", "0,2-3"). */
static void describe_cpus(char *buf, size_t len)
{
	cpu_set_t set;
	size_t used = 0;
	int n = 0;

	snprintf(buf, len, "?");
	if (sched_getaffinity(0, sizeof(set), &set))
		return;
	if (CPU_COUNT(&set) >= sysconf(_SC_NPROCESSORS_ONLN)) {
		snprintf(buf, len, "all");
		return;
	}
	for (int c = 0; c < CPU_SETSIZE && used + 1 < len; c++) {
		int end = c;
		if (!CPU_ISSET(c, &set))
			continue;
		while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &set))
			end++;
		used += (size_t)snprintf(buf + used, len - used, end > c ? "%s%d-%d" : "%s%d",
					 n++ ? "," : "", c, end);
		c = end;
	}
}

static void print_header(const struct perf_opts *o)
{
	struct rank_info mine = {.pid = (int32_t)getpid()}, *all;
	bool one_host = true;
	char desc[512];
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	gethostname(mine.host, sizeof(mine.host) - 1);
	describe_cpus(mine.cpus, sizeof(mine.cpus));
	all = calloc((size_t)g_nranks, sizeof(*all));
	if (!all)
		perf_die("out of memory");
	rt_gather_info(&mine, all);
	rt_describe(desc, sizeof(desc));
	if (g_rank != 0) {
		free(all);
		return;
	}
	printf("# nRanks %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
	       "validation: %d\n",
	       g_nranks, o->minbytes, o->maxbytes, o->stepfactor > 1 ? o->stepfactor : o->stepbytes,
	       o->stepfactor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->check);
	printf("# %s\n", desc);
	if (o->algo)
		printf("# Algorithm forced: WEFT_ALGO=%s\n", getenv("WEFT_ALGO"));
	printf("#\n# Using ranks\n");
	for (int r = 0; r < g_nranks; r++) {
		all[r].host[HOST_CHARS - 1] = 0;
		all[r].cpus[CPUS_CHARS - 1] = 0;
		printf("#  Rank %2d Group %2d Pid %6d on %10s cpus %s\n", r, 0, (int)all[r].pid,
		       all[r].host, all[r].cpus);
		one_host = one_host && strcmp(all[r].host, all[0].host) == 0;
	}
	if (one_host && cores > 0 && g_nranks > cores)
		printf("# Note: %d ranks on %ld online cores: oversubscribed, not a performance "
		       "figure\n",
		       g_nranks, cores);
	printf("#\n");
	printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place"
	       "          \n",
	       "", "", "", "", "");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
	       "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
	       "algbw", "busbw", "#wrong");
	printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
	       "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
	       "");
	fflush(stdout);
	free(all);
}

/* The single dtype/op asked for must be supported; "all" skips the rest. */
static bool combo_runs(const struct perf_opts *o, enum perf_dtype dt, enum perf_op op)
{
	const char *why = g_test->unsupported ? g_test->unsupported(dt, op) : NULL;

	if (!why)
		return true;
	if (o->dtype >= 0 && (o->op >= 0 || g_test->coll == PERF_COLL_ALLGATHER))
		usage_error("-d %s -o %s: %s", dtypes[dt].name, op_names[op], why);
	if (g_rank == 0)
		printf("# skipping %s %s: %s\n", dtypes[dt].name, op_names[op], why);
	return false;
}

int perf_main(int argc, char **argv, const struct perf_test *test)
{
	struct perf_opts o;
	struct sweep s = {.o = &o};
	int d0, d1, op0, op1;
	size_t send_bytes;

	g_test = test;
	g_prog = test->prog;
	parse_args(argc, argv, &o);
	d0 = o.dtype < 0 ? 0 : o.dtype;
	d1 = o.dtype < 0 ? PERF_DTYPE_COUNT - 1 : o.dtype;
	op0 = o.op < 0 ? 0 : o.op;
	op1 = o.op < 0 ? PERF_OP_COUNT - 1 : o.op;
	if (test->coll == PERF_COLL_ALLGATHER)
		op0 = op1 = PERF_SUM; /* no op; one pass per datatype */
	/* refuse an unsupported single choice before starting any ranks */
	if (o.dtype >= 0 && (o.op >= 0 || test->coll == PERF_COLL_ALLGATHER) && test->unsupported &&
	    test->unsupported(o.dtype, op0))
		usage_error("-d %s -o %s: %s", dtypes[o.dtype].name, op_names[op0],
			    test->unsupported(o.dtype, op0));

	rt_init(&o);
	if (g_rank == 0)
		setvbuf(stdout, NULL, _IOLBF, 0);
	send_bytes = test->coll == PERF_COLL_ALLGATHER ? o.maxbytes / (size_t)g_nranks : o.maxbytes;
	buf_alloc(&s.send, send_bytes);
	buf_alloc(&s.recv, o.maxbytes);
	print_header(&o);
	for (int d = d0; d <= d1; d++)
		for (int op = op0; op <= op1; op++)
			if (combo_runs(&o, d, op))
				sweep_one(&s, d, op);
	if (g_rank == 0) {
		printf("# Out of bounds values : %lld %s\n", (long long)s.oob,
		       s.oob ? "FAILED" : "OK");
		printf("# Avg bus bandwidth    : %g \n", s.bw_count ? s.bw_sum / s.bw_count : 0.0);
		printf("#\n");
		if (s.wrong)
			printf("# %lld wrong elements: FAILED\n", (long long)s.wrong);
		fflush(stdout);
	}
	free(s.send.base);
	free(s.recv.base);
	rt_finalize();
	return s.wrong || s.oob ? 1 : 0;
}

/* ======================================================================== */
#ifdef PERF_MPI
/* ---- runtime: MPI ------------------------------------------------------ */

MPI_Datatype perf_mpi_datatype(enum perf_dtype dtype)
{
	switch (dtype) {
	case PERF_INT8: return MPI_INT8_T;
	case PERF_UINT8: return MPI_UINT8_T;
	case PERF_INT32: return MPI_INT32_T;
	case PERF_UINT32: return MPI_UINT32_T;
	case PERF_INT64: return MPI_INT64_T;
	case PERF_UINT64: return MPI_UINT64_T;
	case PERF_FLOAT: return MPI_FLOAT;
	case PERF_DOUBLE: return MPI_DOUBLE;
	default: return MPI_DATATYPE_NULL;
	}
}

MPI_Op perf_mpi_op(enum perf_op op)
{
	switch (op) {
	case PERF_SUM: return MPI_SUM;
	case PERF_PROD: return MPI_PROD;
	case PERF_MIN: return MPI_MIN;
	case PERF_MAX: return MPI_MAX;
	default: return MPI_OP_NULL;
	}
}

const char *perf_mpi_unsupported(enum perf_dtype dtype, enum perf_op op)
{
	if (perf_mpi_datatype(dtype) == MPI_DATATYPE_NULL)
		return "MPI has no half or bfloat16 datatype";
	if (g_test->coll == PERF_COLL_ALLREDUCE && perf_mpi_op(op) == MPI_OP_NULL)
		return "MPI has no avg reduction";
	return NULL;
}

void perf_mpi_check(int err, const char *what)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (err == MPI_SUCCESS)
		return;
	MPI_Error_string(err, msg, &len);
	perf_die("%s failed: %s", what, msg);
}

static void rt_init(const struct perf_opts *o)
{
	perf_mpi_check(MPI_Init(NULL, NULL), "MPI_Init");
	/* errors come back to us, so they are reported with the call's name */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &g_nranks);
}

static void rt_barrier(void)
{
	perf_mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

static double rt_max_double(double v)
{
	double out;

	perf_mpi_check(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
		       "MPI_Allreduce");
	return out;
}

static void rt_sum_i64(int64_t *v, int n)
{
	perf_mpi_check(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD),
		       "MPI_Allreduce");
}

static void rt_gather_info(const struct rank_info *mine, struct rank_info *all)
{
	perf_mpi_check(MPI_Gather(mine, (int)sizeof(*mine), MPI_BYTE, all, (int)sizeof(*mine),
				  MPI_BYTE, 0, MPI_COMM_WORLD),
		       "MPI_Gather");
}

static double rt_wtime(void)
{
	return MPI_Wtime();
}

static void rt_describe(char *buf, size_t len)
{
	char v[MPI_MAX_LIBRARY_VERSION_STRING];
	int n = 0;

	MPI_Get_library_version(v, &n);
	v[strcspn(v, "\n,")] = 0;
	snprintf(buf, len, "Backend: %s (%.200s)", g_test->backend, v);
}

static void rt_finalize(void)
{
	MPI_Finalize();
}

static void rt_abort(void)
{
	int up = 0;

	MPI_Initialized(&up);
	if (up)
		MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

#else
/* ---- runtime: Weft ----------------------------------------------------- */

static weft_comm_t g_comm;
static const char *g_launch = "single rank";

weft_comm_t perf_weft_comm(void)
{
	return g_comm;
}

weft_datatype_t perf_weft_datatype(enum perf_dtype dtype)
{
	static const weft_datatype_t map[PERF_DTYPE_COUNT] = {
	    [PERF_INT8] = WEFT_INT8,	 [PERF_UINT8] = WEFT_UINT8,
	    [PERF_INT32] = WEFT_INT32,	 [PERF_UINT32] = WEFT_UINT32,
	    [PERF_INT64] = WEFT_INT64,	 [PERF_UINT64] = WEFT_UINT64,
	    [PERF_HALF] = WEFT_FLOAT16,	 [PERF_BFLOAT16] = WEFT_BFLOAT16,
	    [PERF_FLOAT] = WEFT_FLOAT32, [PERF_DOUBLE] = WEFT_FLOAT64,
	};
	return map[dtype];
}

weft_op_t perf_weft_op(enum perf_op op)
{
	static const weft_op_t map[PERF_OP_COUNT] = {
	    [PERF_SUM] = WEFT_SUM, [PERF_PROD] = WEFT_PROD, [PERF_MIN] = WEFT_MIN,
	    [PERF_MAX] = WEFT_MAX, [PERF_AVG] = WEFT_AVG,
	};
	return map[op];
}

void perf_weft_check(weft_status_t st, const char *what)
{
	if (st != WEFT_SUCCESS)
		perf_die("%s failed: %s: %s", what, weft_status_string(st),
			 weft_comm_last_error(g_comm));
}

static void init_failed(weft_status_t st, const char *what)
{
	fflush(stdout);
	fprintf(stderr, "%s: rank %d: %s failed: %s: %s\n", g_prog, g_rank, what,
		weft_status_string(st), weft_init_last_error());
	exit(1);
}

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The variable that says a launcher started us, or NULL. */
static const char *launcher_var(void)
{
	static const char *const vars[] = {"WEFT_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (getenv(vars[i]))
			return vars[i];
	return NULL;
}

static void report_child(int rank, pid_t pid, int status, bool killed_by_us)
{
	if (WIFEXITED(status))
		fprintf(stderr, "%s: rank %d (pid %d) exited with status %d\n", g_prog, rank,
			(int)pid, WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		fprintf(stderr, "%s: rank %d (pid %d) %s by signal %d (%s)\n", g_prog, rank,
			(int)pid, killed_by_us ? "was ended (by us)" : "was killed",
			WTERMSIG(status), strsignal(WTERMSIG(status)));
}

/* Parent of -np: wait for every rank; once one fails, give the others
 * CHILD_GRACE_SECONDS to notice, then end them (SIGTERM, then SIGKILL). */
static int wait_children(const pid_t *pids, int np)
{
	bool *done = calloc((size_t)np, sizeof(bool));
	int live = np, failed = 0, signalled = 0;
	double deadline = 0;

	if (!done)
		abort();
	while (live > 0) {
		int status, r;
		pid_t pid = waitpid(-1, &status, failed ? WNOHANG : 0);

		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0)
			break;
		if (pid == 0) {
			double t = now_seconds();
			if (t >= deadline && signalled < 2) {
				for (r = 0; r < np; r++) {
					if (done[r])
						continue;
					if (!signalled)
						fprintf(stderr,
							"%s: rank %d (pid %d) still running %.0f s "
							"after the "
							"failure: stopping it\n",
							g_prog, r, (int)pids[r],
							CHILD_GRACE_SECONDS);
					kill(pids[r], signalled ? SIGKILL : SIGTERM);
				}
				signalled++;
				deadline = t + 2.0;
			}
			usleep(20000);
			continue;
		}
		for (r = 0; r < np && pids[r] != pid; r++)
			;
		if (r == np)
			continue;
		done[r] = true;
		live--;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			continue;
		report_child(r, pid, status, signalled > 0);
		if (!failed) {
			failed = 1;
			deadline = now_seconds() + CHILD_GRACE_SECONDS;
		}
	}
	free(done);
	return failed;
}

static void read_id(int fd, weft_unique_id_t *id)
{
	size_t got = 0;

	while (got < sizeof(*id)) {
		ssize_t n = read(fd, (char *)id + got, sizeof(*id) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr,
				"%s: rank %d: no unique id from rank 0 (it exited before sending "
				"it)\n",
				g_prog, g_rank);
			exit(1);
		}
		got += (size_t)n;
	}
}

static void send_id(int fd, const weft_unique_id_t *id, int copies)
{
	for (int i = 0; i < copies; i++) {
		/* 128 bytes <= PIPE_BUF: each copy arrives whole */
		if (write(fd, id, sizeof(*id)) != (ssize_t)sizeof(*id)) {
			fprintf(stderr, "%s: rank 0: writing the unique id to the pipe: %s\n",
				g_prog, strerror(errno));
			exit(1);
		}
	}
}

/* -np N: fork N ranks. Returns in each child with its rank and the id;
 * the parent waits for them and exits. */
/* Pin this rank to the (rank mod n)-th CPU it is allowed on. Open MPI's
 * default for np <= 2 is the same, so perf/compare compares like with like. */
static void bind_rank(int rank)
{
	cpu_set_t allowed, mine;
	int k, want;

	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		return;
	want = rank % CPU_COUNT(&allowed);
	for (k = 0; k < CPU_SETSIZE; k++)
		if (CPU_ISSET(k, &allowed) && want-- == 0)
			break;
	CPU_ZERO(&mine);
	CPU_SET(k, &mine);
	if (sched_setaffinity(0, sizeof(mine), &mine))
		fprintf(stderr, "%s: rank %d: cannot bind to cpu %d: %s\n", g_prog, rank, k,
			strerror(errno));
}

static int launch_local(int np, bool bind, weft_unique_id_t *id)
{
	int fds[2];
	pid_t parent = getpid(), *pids = calloc((size_t)np, sizeof(pid_t));

	if (!pids || pipe(fds)) {
		fprintf(stderr, "%s: cannot set up the local launcher: %s\n", g_prog,
			strerror(errno));
		exit(1);
	}
	fflush(stdout);
	fflush(stderr);
	for (int r = 0; r < np; r++) {
		pid_t pid = fork();

		if (pid < 0) {
			fprintf(stderr, "%s: fork of rank %d: %s\n", g_prog, r, strerror(errno));
			for (int k = 0; k < r; k++)
				kill(pids[k], SIGTERM);
			wait_children(pids, r);
			exit(1);
		}
		if (pid == 0) {
			/* never outlive the launcher, whatever ends it */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(1);
			free(pids);
			g_rank = r;
			if (bind)
				bind_rank(r);
			if (r == 0) {
				weft_status_t st;
				close(fds[0]);
				st = weft_get_unique_id(id);
				if (st != WEFT_SUCCESS)
					init_failed(st, "weft_get_unique_id");
				send_id(fds[1], id, np - 1);
				close(fds[1]);
			} else {
				close(fds[1]);
				read_id(fds[0], id);
				close(fds[0]);
			}
			return r;
		}
		pids[r] = pid;
	}
	close(fds[0]);
	close(fds[1]);
	exit(wait_children(pids, np));
}

static void rt_init(const struct perf_opts *o)
{
	const char *var = launcher_var();
	weft_unique_id_t id;
	weft_status_t st;
	char algo[256];

	if (o->algo) {
		snprintf(algo, sizeof(algo), "%s:%s",
			 g_test->coll == PERF_COLL_ALLGATHER ? "allgather" : "allreduce", o->algo);
		setenv("WEFT_ALGO", algo, 1);
	}
	if (o->np > 0) {
		if (var)
			usage_error("-np: a launcher already started this process (%s is set)",
				    var);
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		bool bind =
		    o->bind == BIND_CORE || (o->bind == BIND_AUTO && o->np <= 2 && o->np <= cpus);

		g_rank = launch_local(o->np, bind, &id);
		g_nranks = o->np;
		g_launch = "local launcher -np";
		st = weft_comm_init_rank(&g_comm, g_nranks, id, g_rank, NULL);
		if (st != WEFT_SUCCESS)
			init_failed(st, "weft_comm_init_rank");
	} else if (var) {
		g_rank = launcher_rank();
		g_launch = "launcher environment";
		st = weft_comm_init_env(&g_comm, NULL);
		if (st != WEFT_SUCCESS)
			init_failed(st, "weft_comm_init_env");
		perf_weft_check(weft_comm_size(g_comm, &g_nranks), "weft_comm_size");
		perf_weft_check(weft_comm_rank(g_comm, &g_rank), "weft_comm_rank");
	} else {
		g_rank = 0;
		g_nranks = 1;
		st = weft_get_unique_id(&id);
		if (st != WEFT_SUCCESS)
			init_failed(st, "weft_get_unique_id");
		st = weft_comm_init_rank(&g_comm, 1, id, 0, NULL);
		if (st != WEFT_SUCCESS)
			init_failed(st, "weft_comm_init_rank");
	}
}

static void rt_barrier(void)
{
	int32_t in = 1, out = 0;

	perf_weft_check(weft_allreduce(&in, &out, 1, WEFT_INT32, WEFT_SUM, g_comm),
			"weft_allreduce (barrier)");
}

static double rt_max_double(double v)
{
	double out = 0;

	perf_weft_check(weft_allreduce(&v, &out, 1, WEFT_FLOAT64, WEFT_MAX, g_comm),
			"weft_allreduce (max time)");
	return out;
}

static void rt_sum_i64(int64_t *v, int n)
{
	perf_weft_check(weft_allreduce(v, v, (size_t)n, WEFT_INT64, WEFT_SUM, g_comm),
			"weft_allreduce (error counts)");
}

/* Every rank's record lands in its own slot; the others are zero, so a sum
 * is a gather that needs nothing but allreduce. */
static void rt_gather_info(const struct rank_info *mine, struct rank_info *all)
{
	memset(all, 0, (size_t)g_nranks * sizeof(*all));
	all[g_rank] = *mine;
	perf_weft_check(
	    weft_allreduce(all, all, (size_t)g_nranks * sizeof(*all), WEFT_UINT8, WEFT_SUM, g_comm),
	    "weft_allreduce (rank table)");
}

static double rt_wtime(void)
{
	return now_seconds();
}

static void rt_describe(char *buf, size_t len)
{
	const char *tp = getenv("WEFT_TRANSPORTS");

	snprintf(buf, len, "Backend: %s %s (%s%s%s)", g_test->backend, weft_version(), g_launch,
		 tp ? ", WEFT_TRANSPORTS=" : "", tp ? tp : "");
}

static void rt_finalize(void)
{
	weft_comm_destroy(g_comm);
	g_comm = NULL;
}

static void rt_abort(void)
{
	if (g_comm)
		weft_comm_abort(g_comm);
	exit(1);
}
#endif
