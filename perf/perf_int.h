/*
 * perf_int.h — what the files of the perf driver share with each other
 * (not with the *_perf programs, which see perf_common.h only).
 */
#ifndef PERF_INT_H
#define PERF_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "perf_common.h"

#define PERF_HOST_CHARS 60
#define PERF_CPUS_CHARS 32

enum perf_bind { PERF_BIND_AUTO, PERF_BIND_CORE, PERF_BIND_NONE };

struct perf_opts {
	size_t minbytes, maxbytes, stepbytes;
	size_t stepfactor; /* > 1: multiply; 1: add stepbytes */
	int iters, warmup;
	bool check;
	int dtype; /* an enum perf_dtype, or -1 for all */
	int op;	   /* an enum perf_op, or -1 for all */
	int root;  /* -r; broadcast and reduce */
	const char *algo;
	bool mem_alloc;	     /* -R: buffers from weft_mem_alloc */
	int np;		     /* local launcher: ranks to fork; 0 when not used */
	enum perf_bind bind; /* -np ranks' CPU binding */
};

/* What each collective is, for sizes, the report and the check. */
struct perf_coll_info {
	const char *name; /* as in nccl-tests' program names */
	bool has_op;	  /* reduces: the redop column and -o mean something */
	bool has_root;	  /* -r ROOT; the root column */
	bool in_place;	  /* has an in-place form */
	int send_blocks;  /* send buffer: count x this (0: nranks) */
	int recv_blocks;  /* receive buffer: count x this (0: nranks) */
	double (*busbw_factor)(int nranks);
};

/* What rank 0 learns about every rank, for the "# Rank" lines. */
struct perf_rank_info {
	int32_t pid;
	char host[PERF_HOST_CHARS];
	char cpus[PERF_CPUS_CHARS]; /* CPUs this rank may run on */
};

/* Shared state of the run. */
extern const struct perf_test *perf_g_test;
extern const char *perf_g_prog;
extern int perf_g_rank;
extern int perf_g_nranks;

const struct perf_coll_info *perf_coll_info(enum perf_coll coll);
/* The WEFT_ALGO value that -a ALGO sets ("allreduce:ring"; sendrecv forces
 * both send and recv). */
void perf_algo_setting(char *buf, size_t len, const char *algo);
/* Buffer blocks of the current collective at perf_g_nranks ranks. */
size_t perf_send_blocks(void);
size_t perf_recv_blocks(void);

/* perf_args.c */
void perf_parse_args(int argc, char **argv, struct perf_opts *o);
size_t perf_next_size(const struct perf_opts *o, size_t size);
void perf_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* perf_check.c: datatypes */
bool perf_dtype_is_float(enum perf_dtype dtype);
/* -d NAME and its aliases; -1 for "all", -2 if unknown. */
int perf_dtype_lookup(const char *name);
/* -o NAME; -1 for "all", -2 if unknown. */
int perf_op_lookup(const char *name);

/* perf_check.c: the check of one call (see there) */
struct perf_pattern;
struct perf_pattern *perf_pattern_new(enum perf_dtype dt, enum perf_op op, int root);
void perf_pattern_free(struct perf_pattern *p);
/* Realistic input for timed calls: the check pattern over bytes. */
void perf_pattern_fill_input(const struct perf_pattern *p, unsigned char *buf, size_t bytes);
/* Load the inputs of c, poison what it should overwrite, arm the guards. */
void perf_check_prepare(const struct perf_pattern *p, const struct perf_call *c);
/* After the call: wrong elements and out-of-bounds bytes on this rank. */
void perf_check_result(const struct perf_pattern *p, const struct perf_call *c, int64_t *wrong,
		       int64_t *oob);

/* perf_check.c: buffers with guard regions */
struct perf_buf {
	unsigned char *base; /* allocation */
	unsigned char *p;    /* usable bytes, page aligned */
	size_t bytes;
};
void perf_buf_alloc(struct perf_buf *b, size_t bytes);
void perf_buf_free(struct perf_buf *b);

/* The runtime: perf_rt_weft.c or perf_rt_mpi.c. */
/* The rank the launcher gave this process, before perf_rt_init (-1 if that
 * cannot be told): so that option errors are said once. */
int perf_rt_launcher_rank(void);
/* Leave with @p code (the MPI build finalizes MPI if it started it). */
void perf_rt_exit(int code) __attribute__((noreturn));
void perf_rt_init(const struct perf_opts *o);
void perf_rt_barrier(void);
double perf_rt_max_double(double v);
void perf_rt_sum_i64(int64_t *v, int n);
void perf_rt_gather_info(const struct perf_rank_info *mine, struct perf_rank_info *all);
double perf_rt_wtime(void);
void perf_rt_describe(char *buf, size_t len);
void perf_rt_finalize(void);
/* Memory for a perf buffer (after perf_rt_init): weft_mem_alloc with -R,
 * else page-aligned heap; dies on failure. */
void *perf_rt_buf_alloc(size_t bytes);
void perf_rt_buf_free(void *p);
void perf_rt_abort(void) __attribute__((noreturn));

#endif /* PERF_INT_H */
