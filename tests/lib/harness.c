/*
 * harness.c — fork N rank processes, give them a communicator, run the
 * test body, and collect how each ended (see harness.h).
 *
 * Forking, the unique id, dying with the parent, the deadline and reaping
 * only the forked PIDs are the shared local launcher's (tools/launch/),
 * with no grace period. On top of it the harness keeps what tests need: the
 * parent and the ranks share one anonymous MAP_SHARED page set per job, a
 * note slot per rank (first failure, last progress) and a small area the
 * test may use (a victim writes the time it died, for instance); hooks
 * before and after init; absent ranks; a summary for ck_assert_msg.
 */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tools/launch/local_launch.h"

struct note_slot {
	char failure[HARNESS_NOTE_BYTES];
	char progress[HARNESS_NOTE_BYTES];
};

struct shared_page {
	struct note_slot slot[HARNESS_MAX_RANKS];
	_Alignas(64) unsigned char user[HARNESS_SHARED_BYTES];
};

/* Set in each rank process after fork; the parent keeps rank -1. */
static struct shared_page *g_shared;
static int g_rank = -1;

double harness_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int harness_rank(void)
{
	return g_rank;
}

void *harness_shared(void)
{
	return g_shared ? g_shared->user : NULL;
}

static void note_failure(const char *text)
{
	fprintf(stderr, "rank %d: %s\n", g_rank, text);
	if (g_shared && g_rank >= 0 && g_shared->slot[g_rank].failure[0] == '\0')
		snprintf(g_shared->slot[g_rank].failure, HARNESS_NOTE_BYTES, "%s", text);
}

int harness_fail(const char *fmt, ...)
{
	char text[HARNESS_NOTE_BYTES];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	note_failure(text);
	return 1;
}

int harness_fail_status(weft_comm_t comm, weft_status_t status, const char *fmt, ...)
{
	char what[HARNESS_NOTE_BYTES / 2];
	char text[HARNESS_NOTE_BYTES];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	const char *last = comm ? weft_comm_last_error(comm) : "";
	snprintf(text, sizeof(text), "%s: %s (%d): \"%s\"", what, weft_status_string(status),
		 (int)status, last ? last : "(null)");
	note_failure(text);
	return 1;
}

void harness_progress(const char *fmt, ...)
{
	if (!g_shared || g_rank < 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g_shared->slot[g_rank].progress, HARNESS_NOTE_BYTES, fmt, ap);
	va_end(ap);
}

/* --- rank process --- */

static int apply_env(const char *const *env)
{
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		if (!eq || eq == env[i])
			return harness_fail("harness: bad env entry \"%s\"", env[i]);
		char key[256];
		size_t len = (size_t)(eq - env[i]);
		if (len >= sizeof(key))
			return harness_fail("harness: env key too long in \"%s\"", env[i]);
		memcpy(key, env[i], len);
		key[len] = '\0';
		if (setenv(key, eq + 1, 1) != 0)
			return harness_fail("harness: setenv %s: %s", key, strerror(errno));
	}
	return 0;
}

/* The unique id from the shared launcher's pipe (rank 0 makes it). */
static int get_id(struct weft_local_job *lj, int rank, weft_unique_id_t *id)
{
	char why[HARNESS_NOTE_BYTES / 2];
	if (weft_local_get_id(lj, rank, id, why, sizeof(why)) == WEFT_SUCCESS)
		return 0;
	harness_fail("harness: %s", why);
	return HARNESS_EXIT_NO_ID;
}

static int init_comm(const struct harness_job *job, int rank, const weft_unique_id_t *id,
		     weft_comm_t *comm)
{
	double t0 = harness_now();
	weft_status_t st;
	harness_progress("init");
	if (job->init == HARNESS_INIT_ENV)
		st = weft_comm_init_env(comm, NULL);
	else
		st = weft_comm_init_rank(comm, job->nranks, *id, rank, NULL);
	if (st == WEFT_SUCCESS) {
		if (*comm != NULL)
			return 0;
		harness_fail("init returned success and a NULL communicator");
		return HARNESS_EXIT_INIT;
	}
	const char *msg = weft_init_last_error();
	if (*comm != NULL)
		harness_fail("init failed but left a non-NULL communicator");
	if (job->init_failed)
		return job->init_failed(rank, job->nranks, st, msg ? msg : "(null)",
					harness_now() - t0, job->arg);
	harness_fail("%s: %s (%d): \"%s\"",
		     job->init == HARNESS_INIT_ENV ? "weft_comm_init_env" : "weft_comm_init_rank",
		     weft_status_string(st), (int)st, msg ? msg : "(null)");
	return HARNESS_EXIT_INIT;
}

static int clamp_code(int code)
{
	if (code < 0 || code > HARNESS_EXIT_BODY_MAX)
		return HARNESS_EXIT_BODY_MAX;
	return code;
}

/* A rank process, as the shared launcher started it (it dies with the
 * parent; its environment has WEFT_RANK, ..., WEFT_ROOT in HARNESS_INIT_ENV). */
static void rank_main(const struct harness_job *job, struct weft_local_job *lj, int rank)
{
	/* A rank killed by SIGPIPE is a library bug; keep the default so it shows. */
	signal(SIGPIPE, SIG_DFL);
	g_rank = rank;

	int code = apply_env(job->env) ? HARNESS_EXIT_SETUP : 0;
	weft_unique_id_t id;
	memset(&id, 0, sizeof(id));
	if (code == 0)
		code = get_id(lj, rank, &id);
	weft_local_free(lj); /* rank 0 failed early: the others see EOF */
	if (code == 0 && job->before_init)
		code = job->before_init(rank, job->nranks, &id, job->arg);

	weft_comm_t comm = NULL;
	if (code == 0)
		code = init_comm(job, rank, &id, &comm);
	if (code == 0 && comm) {
		if (job->body) {
			harness_progress("body");
			code = clamp_code(job->body(comm, rank, job->nranks, job->arg));
		}
		harness_progress("weft_comm_destroy");
		weft_status_t st = weft_comm_destroy(comm);
		if (st != WEFT_SUCCESS && code == 0)
			code = harness_fail("weft_comm_destroy: %s", weft_status_string(st));
		if (job->after_destroy) {
			int after = clamp_code(job->after_destroy(rank, job->nranks, job->arg));
			code = code ? code : after;
		}
	}
	harness_progress("exited with %d", code);
	fflush(NULL);
	_exit(code);
}

/* --- parent --- */

static void append(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void append(char *buf, size_t cap, const char *fmt, ...)
{
	size_t used = strlen(buf);
	if (used + 1 >= cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + used, cap - used, fmt, ap);
	va_end(ap);
}

static void summarise(struct harness_result *res, double timeout_s)
{
	res->ok = true;
	res->summary[0] = '\0';
	for (int r = 0; r < res->nranks; r++) {
		const struct harness_rank_result *rr = &res->rank[r];
		switch (rr->end) {
		case HARNESS_NOT_STARTED: continue;
		case HARNESS_EXITED:
			if (rr->code == 0)
				continue;
			append(res->summary, sizeof(res->summary), "rank %d exited %d after %.1f s",
			       r, rr->code, rr->seconds);
			break;
		case HARNESS_SIGNALED:
			append(res->summary, sizeof(res->summary),
			       "rank %d killed by signal %d (%s) after %.1f s", r, rr->code,
			       strsignal(rr->code), rr->seconds);
			break;
		case HARNESS_HUNG:
			append(res->summary, sizeof(res->summary),
			       "rank %d HUNG (killed at the %.0f s deadline)", r, timeout_s);
			break;
		}
		res->ok = false;
		if (rr->failure[0])
			append(res->summary, sizeof(res->summary), ": %s", rr->failure);
		if (rr->progress[0] && rr->end != HARNESS_EXITED)
			append(res->summary, sizeof(res->summary), " [last step: %s]",
			       rr->progress);
		append(res->summary, sizeof(res->summary), "\n");
	}
	if (res->ok)
		snprintf(res->summary, sizeof(res->summary), "all %d ranks succeeded in %.1f s",
			 res->nranks, res->seconds);
}

/* How each rank ended, as the shared launcher saw it. */
static void copy_ends(struct harness_result *res, const struct weft_local_job *lj)
{
	static const enum harness_end ends[] = {
	    [WEFT_LOCAL_NOT_STARTED] = HARNESS_NOT_STARTED,
	    [WEFT_LOCAL_RUNNING] = HARNESS_HUNG,
	    [WEFT_LOCAL_EXITED] = HARNESS_EXITED,
	    [WEFT_LOCAL_SIGNALED] = HARNESS_SIGNALED,
	    [WEFT_LOCAL_HUNG] = HARNESS_HUNG,
	};
	for (int r = 0; r < lj->nranks && lj->ranks; r++) {
		const struct weft_local_rank *k = &lj->ranks[r];
		res->rank[r].pid = k->pid;
		res->rank[r].end = ends[k->end];
		res->rank[r].code = k->code;
		res->rank[r].seconds = k->seconds;
	}
}

static void copy_notes(struct harness_result *res, const struct shared_page *shared)
{
	memcpy(res->shared, shared->user, HARNESS_SHARED_BYTES);
	for (int r = 0; r < res->nranks; r++) {
		memcpy(res->rank[r].failure, shared->slot[r].failure, HARNESS_NOTE_BYTES);
		memcpy(res->rank[r].progress, shared->slot[r].progress, HARNESS_NOTE_BYTES);
		res->rank[r].failure[HARNESS_NOTE_BYTES - 1] = '\0';
		res->rank[r].progress[HARNESS_NOTE_BYTES - 1] = '\0';
	}
}

void harness_run_job(const struct harness_job *job, struct harness_result *res)
{
	memset(res, 0, sizeof(*res));
	res->nranks = job->nranks;
	if (job->nranks < 1 || job->nranks > HARNESS_MAX_RANKS || (job->absent_ranks & 1u)) {
		snprintf(res->summary, sizeof(res->summary),
			 "harness: bad job (nranks %d, absent mask 0x%x)", job->nranks,
			 job->absent_ranks);
		return;
	}
	struct shared_page *shared =
	    mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED) {
		snprintf(res->summary, sizeof(res->summary), "harness: mmap: %s", strerror(errno));
		return;
	}
	/* No grace period: a test decides how long survivors of a failure
	 * may take (its own timeouts); only the deadline ends them. */
	struct weft_local_job lj = {
	    .nranks = job->nranks,
	    .id = job->init == HARNESS_INIT_ENV ? WEFT_LOCAL_ID_ENV : WEFT_LOCAL_ID_PIPE,
	    .grace_s = -1,
	    .timeout_s = job->timeout_s,
	    .skip = job->absent_ranks,
	};
	struct shared_page *saved = g_shared;
	char why[256];
	int rank;
	g_shared = shared;
	if (weft_local_start(&lj, &rank, why, sizeof(why)) != WEFT_SUCCESS) {
		snprintf(res->summary, sizeof(res->summary), "harness: %s", why);
	} else {
		if (rank >= 0)
			rank_main(job, &lj, rank);
		weft_local_wait(&lj);
		res->seconds = harness_now() - lj.t0;
		copy_ends(res, &lj);
		copy_notes(res, shared);
		summarise(res, job->timeout_s);
	}
	weft_local_free(&lj);
	g_shared = saved;
	munmap(shared, sizeof(*shared));
}

void harness_run(int nranks, const char *const env[], harness_body_fn body, void *arg,
		 double timeout_s, struct harness_result *res)
{
	struct harness_job job = {
	    .nranks = nranks,
	    .env = env,
	    .body = body,
	    .arg = arg,
	    .timeout_s = timeout_s,
	};
	harness_run_job(&job, res);
}

/* --- test data --- */

static const struct {
	const char *name;
	size_t size;
} dtypes[WEFT_DATATYPE_COUNT] = {
    [WEFT_INT8] = {"int8", 1},	   [WEFT_UINT8] = {"uint8", 1},	  [WEFT_INT32] = {"int32", 4},
    [WEFT_UINT32] = {"uint32", 4}, [WEFT_INT64] = {"int64", 8},	  [WEFT_UINT64] = {"uint64", 8},
    [WEFT_FLOAT16] = {"fp16", 2},  [WEFT_BFLOAT16] = {"bf16", 2}, [WEFT_FLOAT32] = {"fp32", 4},
    [WEFT_FLOAT64] = {"fp64", 8},
};

static const char *const op_names[WEFT_OP_COUNT] = {
    [WEFT_SUM] = "sum", [WEFT_PROD] = "prod", [WEFT_MIN] = "min",
    [WEFT_MAX] = "max", [WEFT_AVG] = "avg",
};

const char *harness_dtype_name(weft_datatype_t dtype)
{
	return (unsigned)dtype < WEFT_DATATYPE_COUNT ? dtypes[dtype].name : "bad-dtype";
}

const char *harness_op_name(weft_op_t op)
{
	return (unsigned)op < WEFT_OP_COUNT ? op_names[op] : "bad-op";
}

size_t harness_dtype_size(weft_datatype_t dtype)
{
	return (unsigned)dtype < WEFT_DATATYPE_COUNT ? dtypes[dtype].size : 0;
}

enum kind { KIND_SIGNED, KIND_UNSIGNED, KIND_FLOAT };

static enum kind kind_of(weft_datatype_t dtype)
{
	switch (dtype) {
	case WEFT_UINT8:
	case WEFT_UINT32:
	case WEFT_UINT64: return KIND_UNSIGNED;
	case WEFT_FLOAT16:
	case WEFT_BFLOAT16:
	case WEFT_FLOAT32:
	case WEFT_FLOAT64: return KIND_FLOAT;
	default: return KIND_SIGNED;
	}
}

/* IEEE binary16 <-> binary32, round to nearest even (enough for test data). */
static uint16_t f32_to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof(x));
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
	int fexp = (int)((x >> 23) & 0xffu);
	uint32_t mant = x & 0x7fffffu;
	if (fexp == 0xff)
		return sign | 0x7c00u | (mant ? 0x200u : 0);
	int exp = fexp - 127 + 15;
	if (exp >= 31)
		return sign | 0x7c00u;
	if (exp <= 0) {
		if (exp < -10)
			return sign;
		mant |= 0x800000u;
		int shift = 14 - exp;
		uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1),
			 halfway = 1u << (shift - 1);
		if (rem > halfway || (rem == halfway && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
		h++; /* may carry into the exponent, which is right */
	return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
	float f;
	if (exp == 0) {
		f = (float)mant * (1.0f / 16777216.0f);
		return sign ? -f : f;
	}
	uint32_t x = exp == 31 ? (sign | 0x7f800000u | (mant << 13))
			       : (sign | ((exp - 15 + 127) << 23) | (mant << 13));
	memcpy(&f, &x, sizeof(f));
	return f;
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof(x));
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u);
	x += 0x7fffu + ((x >> 16) & 1u);
	return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t b)
{
	uint32_t x = (uint32_t)b << 16;
	float f;
	memcpy(&f, &x, sizeof(f));
	return f;
}

double harness_elem_load(const void *buf, size_t i, weft_datatype_t dtype)
{
	const unsigned char *p = (const unsigned char *)buf + i * harness_dtype_size(dtype);
	switch (dtype) {
	case WEFT_INT8: {
		int8_t v;
		memcpy(&v, p, 1);
		return v;
	}
	case WEFT_UINT8: {
		uint8_t v;
		memcpy(&v, p, 1);
		return v;
	}
	case WEFT_INT32: {
		int32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	case WEFT_UINT32: {
		uint32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	case WEFT_INT64: {
		int64_t v;
		memcpy(&v, p, 8);
		return (double)v;
	}
	case WEFT_UINT64: {
		uint64_t v;
		memcpy(&v, p, 8);
		return (double)v;
	}
	case WEFT_FLOAT16: {
		uint16_t v;
		memcpy(&v, p, 2);
		return f16_to_f32(v);
	}
	case WEFT_BFLOAT16: {
		uint16_t v;
		memcpy(&v, p, 2);
		return bf16_to_f32(v);
	}
	case WEFT_FLOAT32: {
		float v;
		memcpy(&v, p, 4);
		return v;
	}
	case WEFT_FLOAT64: {
		double v;
		memcpy(&v, p, 8);
		return v;
	}
	default: return 0;
	}
}

void harness_elem_store(void *buf, size_t i, weft_datatype_t dtype, double v)
{
	unsigned char *p = (unsigned char *)buf + i * harness_dtype_size(dtype);
	switch (dtype) {
	case WEFT_INT8: {
		int8_t x = (int8_t)v;
		memcpy(p, &x, 1);
		break;
	}
	case WEFT_UINT8: {
		uint8_t x = (uint8_t)v;
		memcpy(p, &x, 1);
		break;
	}
	case WEFT_INT32: {
		int32_t x = (int32_t)v;
		memcpy(p, &x, 4);
		break;
	}
	case WEFT_UINT32: {
		uint32_t x = (uint32_t)v;
		memcpy(p, &x, 4);
		break;
	}
	case WEFT_INT64: {
		int64_t x = (int64_t)v;
		memcpy(p, &x, 8);
		break;
	}
	case WEFT_UINT64: {
		uint64_t x = (uint64_t)v;
		memcpy(p, &x, 8);
		break;
	}
	case WEFT_FLOAT16: {
		uint16_t x = f32_to_f16((float)v);
		memcpy(p, &x, 2);
		break;
	}
	case WEFT_BFLOAT16: {
		uint16_t x = f32_to_bf16((float)v);
		memcpy(p, &x, 2);
		break;
	}
	case WEFT_FLOAT32: {
		float x = (float)v;
		memcpy(p, &x, 4);
		break;
	}
	case WEFT_FLOAT64: memcpy(p, &v, 8); break;
	default: break;
	}
}

/* min/max keys run from -11 to 11; scaled so that they cover the type's range. */
static double minmax_scale(weft_datatype_t dtype)
{
	switch (dtype) {
	case WEFT_INT8:
	case WEFT_UINT8: return 11.0;
	case WEFT_INT32: return 67108864.0;	       /* 2^26 */
	case WEFT_UINT32: return 134217728.0;	       /* 2^27: crosses 2^31 */
	case WEFT_INT64: return 288230376151711744.0;  /* 2^58 */
	case WEFT_UINT64: return 576460752303423488.0; /* 2^59: crosses 2^63 */
	default: return 0.5;
	}
}

/* The unscaled integer of the avg pattern for ranks below nranks - 1. */
static long avg_key(int rank, size_t i)
{
	return (long)((rank * 5 + i) % 9) - 4;
}

static double ar_value(weft_datatype_t dtype, weft_op_t op, int rank, int nranks, size_t i)
{
	enum kind kind = kind_of(dtype);
	double unit = kind == KIND_FLOAT ? 0.5 : 1.0;
	switch (op) {
	case WEFT_SUM: {
		long v = (long)((rank * 3 + i) % 7);
		return kind == KIND_UNSIGNED ? (double)v : (double)(v - 3) * unit;
	}
	case WEFT_PROD: {
		double v = (rank + i) % 3 == 0				 ? 2.0
			   : ((rank + i) % 3 == 1 && kind == KIND_FLOAT) ? 0.5
									 : 1.0;
		return (kind != KIND_UNSIGNED && (rank + 2 * i) % 5 == 1) ? -v : v;
	}
	case WEFT_MIN:
	case WEFT_MAX: {
		long key = (long)((rank * 7 + i * 3) % 23) - 11;
		return (double)(kind == KIND_UNSIGNED ? key + 11 : key) * minmax_scale(dtype);
	}
	case WEFT_AVG: {
		if (kind == KIND_UNSIGNED)
			return (double)(avg_key(rank, i) + 4);
		if (kind == KIND_SIGNED || rank < nranks - 1)
			return (double)avg_key(rank, i) * unit;
		/* Floating point: the last rank makes the sum a multiple of nranks. */
		long sum = 0;
		for (int r = 0; r < nranks - 1; r++)
			sum += avg_key(r, i);
		long last = ((-sum) % nranks + nranks) % nranks + nranks * (long)(i % 3 - 1);
		return (double)last * unit;
	}
	default: return 0;
	}
}

/* Every pattern above repeats with a period dividing 7245 = 9 * 5 * 7 * 23
 * elements; long buffers are filled by copying the first period, which keeps
 * the 1M-element cases cheap for 8 ranks on 2 cores. */
#define AR_PERIOD 7245u

static void repeat_period(void *buf, size_t count, weft_datatype_t dtype)
{
	size_t size = harness_dtype_size(dtype);
	for (size_t done = AR_PERIOD; done < count;) {
		size_t n = count - done < done ? count - done : done;
		memcpy((char *)buf + done * size, buf, n * size);
		done += n;
	}
}

void harness_ar_input(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op, int rank,
		      int nranks, unsigned salt)
{
	size_t direct = count < AR_PERIOD ? count : AR_PERIOD;
	for (size_t i = 0; i < direct; i++)
		harness_elem_store(buf, i, dtype,
				   ar_value(dtype, op, rank, nranks, i + salt * 13u));
	repeat_period(buf, count, dtype);
}

void harness_ar_expected(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op, int nranks,
			 unsigned salt)
{
	size_t direct = count < AR_PERIOD ? count : AR_PERIOD;
	for (size_t i = 0; i < direct; i++) {
		size_t k = i + salt * 13u;
		double acc = ar_value(dtype, op, 0, nranks, k);
		for (int r = 1; r < nranks; r++) {
			double v = ar_value(dtype, op, r, nranks, k);
			switch (op) {
			case WEFT_SUM:
			case WEFT_AVG: acc += v; break;
			case WEFT_PROD: acc *= v; break;
			case WEFT_MIN: acc = v < acc ? v : acc; break;
			case WEFT_MAX: acc = v > acc ? v : acc; break;
			default: break;
			}
		}
		if (op == WEFT_AVG)
			acc = kind_of(dtype) == KIND_FLOAT ? acc / nranks
							   : (double)((long long)acc / nranks);
		harness_elem_store(buf, i, dtype, acc);
	}
	repeat_period(buf, count, dtype);
}

/* --- test data that must be rounded (see harness.h) ---
 *
 * p is the precision of the type in bits (11 fp16, 8 bf16, 24 fp32, 53 fp64)
 * and L = 2^p. Values are integers times a unit 2^s, and stay in the normal
 * range of the type, where an integer number of units is exactly
 * representable if its odd part is below L: every integer of magnitude at
 * most L is, and between L and 2L only the even ones are.
 *
 * SUM (n >= 2 ranks). E = 2 floor(L / (2 (n-1))), so (n-1) E <= L, and
 * D = L - (n-1) E >= 0; the holder's o is odd in (D, D + E). A proper subset
 * of the ranks either lacks the holder and sums to k E, k <= n-1, at most L
 * units (exact); or it holds it and lacks another rank and sums to o + k E,
 * k <= n-2, positive and below D + E + (n-2) E = L (exact). The full sum
 * T = o + (n-1) E is odd and in (L, L + E), within (L, 2L]: a tie between two
 * even neighbours. The kernels add two exact partial sums: fp16/bf16 in fp32,
 * exactly (T < 2^(p+1) <= 2^24), then round to the storage type once;
 * fp32/fp64 round in the addition itself, once.
 *
 * PROD. Holders a != b have m 2^(s-p) with m odd in (L/2, L); the others
 * +-1 or +-2. A subset without both holders multiplies to a holder's value
 * times a power of two, or to a power of two: exact. With both, to
 * m_a m_b 2^(...) times a power of two: m_a m_b is odd with 2p-1 or 2p bits,
 * so it rounds once (fp16/bf16: the fp32 product of the two significands is
 * exact, the conversion back rounds), and multiplying a rounded value by a
 * power of two is exact, so every order gives RN(m_a m_b) 2^(...).
 *
 * AVG. Rank r holds k_r 2^s, k_r in [-15, 15]: any subset sums to at most
 * 15 * 16 = 240 < 2^8 units, exact in every type. The library divides the
 * exact sum T by n once: fp32/fp64 in their own precision, fp16/bf16 in fp32
 * and then to the storage type, which is still the correctly rounded T / n,
 * since fp32 has 24 >= 2p + 2 bits (a double rounding of a quotient is
 * harmless then, Figueroa 1995). Only when n is not a power of two can T / n
 * be inexact.
 *
 * The expected values are computed in integers and rounded once by
 * round_ratio(), so the test itself does no double rounding. */

static int round_bits(weft_datatype_t dtype)
{
	switch (dtype) {
	case WEFT_FLOAT16: return 11;
	case WEFT_BFLOAT16: return 8;
	case WEFT_FLOAT32: return 24;
	case WEFT_FLOAT64: return 53;
	default: return 0;
	}
}

bool harness_round_supported(weft_datatype_t dtype, weft_op_t op)
{
	return round_bits(dtype) > 0 && (op == WEFT_SUM || op == WEFT_PROD || op == WEFT_AVG);
}

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t round_hash(uint64_t k, weft_datatype_t dtype, weft_op_t op, int who)
{
	return mix64(mix64(k) ^ ((uint64_t)dtype << 40) ^ ((uint64_t)op << 48) ^
		     ((uint64_t)(who + 1) << 56));
}

/* num / den (den > 0) rounded to @p p significant bits: to nearest even,
 * or toward zero. Exact integer arithmetic; the result fits a double. */
static double round_ratio(__int128 num, int64_t den, int p, bool nearest)
{
	if (num == 0)
		return 0;
	bool neg = num < 0;
	unsigned __int128 a = neg ? (unsigned __int128)-num : (unsigned __int128)num;
	unsigned __int128 d = (unsigned __int128)den;
	int shift = 0; /* the result is q 2^-shift */
	while (a < (d << (p - 1))) {
		a <<= 1;
		shift++;
	}
	while (a >= (d << p)) {
		d <<= 1;
		shift--;
	}
	unsigned __int128 q = a / d, r = a % d;
	if (nearest && (2 * r > d || (2 * r == d && (q & 1))))
		q++; /* may reach 2^p: still exact */
	double v = ldexp((double)q, -shift);
	return neg ? -v : v;
}

/* Unit exponents that keep every value and result normal (fp16 is tight). */
static int round_scale(weft_datatype_t dtype, weft_op_t op, uint64_t h)
{
	int lo = -30, hi = 30;
	if (dtype == WEFT_FLOAT16) {
		lo = op == WEFT_SUM ? -12 : op == WEFT_PROD ? -6 : -10;
		hi = op == WEFT_SUM ? 2 : op == WEFT_PROD ? 0 : 6;
	}
	return lo + (int)(h % (uint64_t)(hi - lo + 1));
}

static double round_sum(weft_datatype_t dtype, int rank, int n, uint64_t k, bool result,
			bool nearest)
{
	int p = round_bits(dtype);
	int64_t L = (int64_t)1 << p;
	uint64_t h = round_hash(k, dtype, WEFT_SUM, -1);
	int s = round_scale(dtype, WEFT_SUM, h);
	double sign = (h >> 20) & 1 ? -1.0 : 1.0;
	uint64_t pick = h >> 21;
	if (n == 1) /* nothing to combine: any p-bit odd value */
		return sign * ldexp((double)(2 * (int64_t)(pick % (uint64_t)(L / 2)) + 1), s);
	int64_t E = 2 * (L / (2 * (int64_t)(n - 1))), D = L - (int64_t)(n - 1) * E;
	int64_t o = D + 1 + 2 * (int64_t)(pick % (uint64_t)(E / 2));
	if (result)
		return sign * ldexp(round_ratio(o + (int64_t)(n - 1) * E, 1, p, nearest), s);
	return sign * ldexp((double)(rank == (int)(k % (uint64_t)n) ? o : E), s);
}

static double round_prod(weft_datatype_t dtype, int rank, int n, uint64_t k, bool result,
			 bool nearest)
{
	int p = round_bits(dtype);
	int64_t L = (int64_t)1 << p;
	int a = (int)(k % (uint64_t)n);
	int b = n > 1 ? (int)((a + 1 + (k / (uint64_t)n) % (uint64_t)(n - 1)) % (uint64_t)n) : -1;
	uint64_t ha = round_hash(k, dtype, WEFT_PROD, a), hb = round_hash(k, dtype, WEFT_PROD, b);
	int64_t ma = L / 2 + 1 + 2 * (int64_t)((ha >> 16) % (uint64_t)(L / 4));
	int64_t mb = L / 2 + 1 + 2 * (int64_t)((hb >> 16) % (uint64_t)(L / 4));
	int sa = round_scale(dtype, WEFT_PROD, ha);
	int sb = dtype == WEFT_FLOAT16 ? 0 : round_scale(dtype, WEFT_PROD, hb);
	if (!result) {
		uint64_t h = round_hash(k, dtype, WEFT_PROD, rank);
		double sign = (h >> 8) & 1 ? -1.0 : 1.0;
		if (rank == a)
			return sign * ldexp((double)ma, sa - p);
		if (rank == b)
			return sign * ldexp((double)mb, sb - p);
		return sign * ldexp(1.0, (int)(h & 1));
	}
	double sign = 1.0;
	int twos = 0;
	for (int r = 0; r < n; r++) {
		uint64_t h = round_hash(k, dtype, WEFT_PROD, r);
		if ((h >> 8) & 1)
			sign = -sign;
		if (r != a && r != b)
			twos += (int)(h & 1);
	}
	if (n == 1)
		return sign * ldexp((double)ma, sa - p);
	return sign * ldexp(round_ratio((__int128)ma * mb, 1, p, nearest), sa + sb - 2 * p + twos);
}

static double round_avg(weft_datatype_t dtype, int rank, int n, uint64_t k, bool result,
			bool nearest)
{
	int s = round_scale(dtype, WEFT_AVG, round_hash(k, dtype, WEFT_AVG, -1));
	if (!result)
		return ldexp((double)((int)(round_hash(k, dtype, WEFT_AVG, rank) % 31) - 15), s);
	int64_t sum = 0;
	for (int r = 0; r < n; r++)
		sum += (int)(round_hash(k, dtype, WEFT_AVG, r) % 31) - 15;
	return ldexp(round_ratio(sum, n, round_bits(dtype), nearest), s);
}

static double round_elem(weft_datatype_t dtype, weft_op_t op, int rank, int n, uint64_t k,
			 bool result, bool nearest)
{
	switch (op) {
	case WEFT_SUM: return round_sum(dtype, rank, n, k, result, nearest);
	case WEFT_PROD: return round_prod(dtype, rank, n, k, result, nearest);
	default: return round_avg(dtype, rank, n, k, result, nearest);
	}
}

static void round_fill(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op, int rank,
		       int nranks, unsigned salt, bool result, bool nearest)
{
	if (!harness_round_supported(dtype, op) || nranks < 1)
		return;
	size_t direct = count < AR_PERIOD ? count : AR_PERIOD;
	for (size_t i = 0; i < direct; i++)
		harness_elem_store(
		    buf, i, dtype,
		    round_elem(dtype, op, rank, nranks, i + salt * 13u, result, nearest));
	repeat_period(buf, count, dtype);
}

void harness_round_input(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op, int rank,
			 int nranks, unsigned salt)
{
	round_fill(buf, count, dtype, op, rank, nranks, salt, false, true);
}

void harness_round_expected(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op,
			    int nranks, unsigned salt)
{
	round_fill(buf, count, dtype, op, 0, nranks, salt, true, true);
}

void harness_round_truncated(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op,
			     int nranks, unsigned salt)
{
	round_fill(buf, count, dtype, op, 0, nranks, salt, true, false);
}

void harness_ag_input(void *buf, size_t count, weft_datatype_t dtype, int rank, unsigned salt)
{
	size_t size = harness_dtype_size(dtype);
	unsigned char *p = buf;
	for (size_t i = 0; i < count; i++)
		for (size_t j = 0; j < size; j++)
			p[i * size + j] =
			    (unsigned char)(rank * 37 + (i + salt * 7u) * 11u + j * 101u + 1u);
}

static bool elem_equal(const void *a, const void *b, size_t i, weft_datatype_t dtype)
{
	size_t size = harness_dtype_size(dtype);
	if (memcmp((const char *)a + i * size, (const char *)b + i * size, size) == 0)
		return true;
	return kind_of(dtype) == KIND_FLOAT &&
	       harness_elem_load(a, i, dtype) == harness_elem_load(b, i, dtype);
}

size_t harness_compare(const void *got, const void *want, size_t count, weft_datatype_t dtype,
		       char *why, size_t why_bytes)
{
	size_t first = SIZE_MAX, bad = 0;
	for (size_t i = 0; i < count; i++) {
		if (elem_equal(got, want, i, dtype))
			continue;
		if (first == SIZE_MAX)
			first = i;
		bad++;
	}
	if (first != SIZE_MAX && why)
		snprintf(why, why_bytes,
			 "element %zu of %zu: got %.17g, expected %.17g (%zu elements differ)",
			 first, count, harness_elem_load(got, first, dtype),
			 harness_elem_load(want, first, dtype), bad);
	return first;
}

void harness_guard_fill(void *guard, size_t bytes)
{
	unsigned char *p = guard;
	for (size_t k = 0; k < bytes; k++)
		p[k] = (unsigned char)(0xa5u ^ (k * 7u));
}

long harness_guard_check(const void *guard, size_t bytes)
{
	const unsigned char *p = guard;
	for (size_t k = 0; k < bytes; k++)
		if (p[k] != (unsigned char)(0xa5u ^ (k * 7u)))
			return (long)k;
	return -1;
}

bool harness_pid_socket(pid_t pid, unsigned long inode)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%ld/fd", (long)pid);
	DIR *d = opendir(dir);
	bool found = false;
	struct dirent *e;
	while (d && !found && (e = readdir(d))) {
		char path[64 + sizeof(e->d_name)], link[64];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		unsigned long ino;
		found = sscanf(link, "socket:[%lu]", &ino) == 1 && ino == inode;
	}
	if (d)
		closedir(d);
	return found;
}

bool harness_own_socket(unsigned long inode)
{
	return harness_pid_socket(getpid(), inode);
}

unsigned harness_listen_port_of(pid_t pid, unsigned except)
{
	const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	unsigned port = 0;
	for (int f = 0; f < 2 && !port; f++) {
		FILE *fp = fopen(files[f], "r");
		char line[512];
		while (fp && !port && fgets(line, sizeof(line), fp)) {
			char state[8];
			unsigned long inode;
			unsigned p;
			if (sscanf(line, "%*s %*[0-9A-Fa-f]:%x %*s %7s %*s %*s %*s %*s %*s %lu", &p,
				   state, &inode) == 3 &&
			    strcmp(state, "0A") == 0 && p != except &&
			    harness_pid_socket(pid, inode))
				port = p;
		}
		if (fp)
			fclose(fp);
	}
	return port;
}

int harness_count_in_file(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char line[1024];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}
