/*
 * harness.h — run a test body on N rank processes, each with its own
 * communicator, and report how every rank ended.
 *
 * The ranks are forked processes, not threads: shared memory and CMA need
 * separate address spaces. The shared local launcher (tools/launch/) forks
 * them, hands out the id and waits; the harness adds notes, hooks, absent
 * ranks and the summary. Rank 0 creates the unique id and hands it to the
 * others through a pipe that the parent created; every rank then calls
 * weft_comm_init_rank() and the body, and exits with the body's result. The
 * parent waits with a deadline; ranks still alive at the deadline are killed
 * (SIGKILL, only the PIDs the harness forked) and reported as hung, with the
 * last progress note each one left.
 *
 * Rules for bodies (they run in the rank processes):
 *  - never call ck_assert*(): report with harness_fail*() and return non-zero;
 *  - do not destroy the communicator: the harness does it after the body;
 *  - call harness_progress() before each step worth naming, so that a hang
 *    says where it happened.
 */
#ifndef WEFT_TEST_HARNESS_H
#define WEFT_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "weft.h"

#define HARNESS_MAX_RANKS  16
#define HARNESS_NOTE_BYTES 512

/* Exit codes of a rank process that the harness itself chose. Bodies return
 * 0 for success and a small positive number (< 100) for failure. */
enum harness_exit {
	HARNESS_EXIT_BODY_MAX = 99, /* larger body results are clamped to this */
	HARNESS_EXIT_INIT = 100,    /* weft_comm_init_* failed */
	HARNESS_EXIT_NO_ID = 101,   /* the unique id never arrived */
	HARNESS_EXIT_SETUP = 102,   /* environment or hook failed before init */
};

/* The rank's code, given the communicator it created. */
typedef int (*harness_body_fn)(weft_comm_t comm, int rank, int nranks, void *arg);

enum harness_init_mode {
	HARNESS_INIT_RANK = 0, /* weft_get_unique_id on rank 0, pipe, weft_comm_init_rank */
	HARNESS_INIT_ENV,      /* weft_comm_init_env with WEFT_RANK/NRANKS/ROOT/SECRET set */
};

/* Everything harness_run_job() can do. Zero-initialise, then fill in. */
struct harness_job {
	int nranks;
	const char *const *env; /* extra "KEY=VALUE" for every rank, NULL-terminated; may be NULL */
	harness_body_fn body;	/* may be NULL: init and destroy only */
	void *arg;
	double timeout_s; /* deadline for the whole job */
	enum harness_init_mode init;
	uint32_t absent_ranks; /* bit r set: rank r is never started (r > 0) */
	/* In each rank, after it has the id and before init; non-zero: exit with it. */
	int (*before_init)(int rank, int nranks, const weft_unique_id_t *id, void *arg);
	/* In each rank whose init failed, instead of the default report: returns
	 * the rank's exit code (0 when the failure was what the test wanted).
	 * @p seconds is how long the init call took. */
	int (*init_failed)(int rank, int nranks, weft_status_t status, const char *message,
			   double seconds, void *arg);
	/* In each rank after weft_comm_destroy() returned (whatever the body's
	 * result); non-zero: exit with it if the rank had not failed already. */
	int (*after_destroy)(int rank, int nranks, void *arg);
	/* Each rank's standard error into a file of its own, read back into
	 * harness_rank_result.log and then copied to this process's standard
	 * error: a test can ask which rank logged what (harness_log_line);
	 * harness_result_free() lets the logs go. */
	bool capture_stderr;
};

enum harness_end {
	HARNESS_NOT_STARTED = 0, /* in absent_ranks */
	HARNESS_EXITED,		 /* code is the exit status */
	HARNESS_SIGNALED,	 /* code is the signal that ended it */
	HARNESS_HUNG,		 /* still alive at the deadline; killed */
};

struct harness_rank_result {
	pid_t pid;
	enum harness_end end;
	int code;
	double seconds;			   /* from the start of the job until it ended */
	char failure[HARNESS_NOTE_BYTES];  /* first harness_fail*() message, or "" */
	char progress[HARNESS_NOTE_BYTES]; /* last harness_progress() note, or "" */
	char *log; /* the rank's standard error (capture_stderr), else NULL */
};

#define HARNESS_SHARED_BYTES 4096

struct harness_result {
	int nranks;
	bool ok;	    /* every started rank exited with 0 */
	double seconds;	    /* wall time of the whole job */
	char summary[2048]; /* one line per rank that did not exit 0, for ck_assert_msg */
	struct harness_rank_result rank[HARNESS_MAX_RANKS];
	unsigned char shared[HARNESS_SHARED_BYTES]; /* harness_shared() as the ranks left it */
};

/* Run @p body on @p nranks ranks with @p env; see struct harness_job. */
void harness_run(int nranks, const char *const env[], harness_body_fn body, void *arg,
		 double timeout_s, struct harness_result *res);

void harness_run_job(const struct harness_job *job, struct harness_result *res);

/* The captured logs of @p res (capture_stderr) go; a no-op without them. */
void harness_result_free(struct harness_result *res);

/* Whether a line of rank @p rank's captured standard error contains every
 * string after @p cap, up to a NULL; if so the line is copied into @p line
 * (NULL: not wanted). For asserting on what the library logged: "rank 2's
 * WARN names peer rank 1". */
bool harness_log_line(const struct harness_result *res, int rank, char *line, size_t cap, ...)
    __attribute__((sentinel));

/* --- For bodies and hooks, inside a rank process. --- */

/* This process's rank in the running job (-1 outside one). */
int harness_rank(void);

/* Report a failure: "rank R: <message>" on stderr; the first one is also
 * kept in the result. Returns 1, for `return harness_fail(...)`. */
int harness_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Same, with the status name and the communicator's last error appended. */
int harness_fail_status(weft_comm_t comm, weft_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Note what the rank is doing now (kept for the report if it hangs). */
void harness_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* HARNESS_SHARED_BYTES of memory shared by the ranks of the running job,
 * zeroed at its start and copied into the result at its end. */
void *harness_shared(void);

/* Seconds on CLOCK_MONOTONIC: comparable between the job's processes. */
double harness_now(void);

/* Is socket inode @p inode (as /proc/net/tcp names it) open in this
 * process (/proc/self/fd)? */
bool harness_own_socket(unsigned long inode);
/* The same for process @p pid. */
bool harness_pid_socket(pid_t pid, unsigned long inode);
/* The port of a TCP socket of process @p pid in LISTEN other than port
 * @p except (a forked child holds its parent's listeners too), 0 if none. */
unsigned harness_listen_port_of(pid_t pid, unsigned except);

/* Lines of the file at @p path that contain @p needle; -1 if it cannot be
 * opened. */
int harness_count_in_file(const char *path, const char *needle);

/* --- Test data: inputs whose results are exact in every datatype. ---
 *
 * AllReduce inputs are small integers (halves for floating point) chosen per
 * op so that every partial result over up to 16 ranks is exactly
 * representable even in int8, fp16 and bf16: sums stay within +-64, products
 * are powers of two within 2^-3..2^3 (at most 3 factors of two per element),
 * min/max keys span the whole range of the type (so a signed compare of an
 * unsigned type shows), and for floating-point avg the sum is a multiple of
 * nranks (integer avg truncates toward zero, which is checked). @p salt
 * shifts the pattern so concurrent operations carry different data. */

const char *harness_dtype_name(weft_datatype_t dtype);
const char *harness_op_name(weft_op_t op);
size_t harness_dtype_size(weft_datatype_t dtype); /* independent of the library's */

/* Element @p i of @p buf as a double (exact for the values used here). */
double harness_elem_load(const void *buf, size_t i, weft_datatype_t dtype);
void harness_elem_store(void *buf, size_t i, weft_datatype_t dtype, double v);

/* Rank @p rank's allreduce input, and the result every rank must get. */
void harness_ar_input(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op, int rank,
		      int nranks, unsigned salt);
void harness_ar_expected(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op, int nranks,
			 unsigned salt);

/* Rank @p rank's allgather block: bytes that differ per rank, element and salt. */
void harness_ag_input(void *buf, size_t count, weft_datatype_t dtype, int rank, unsigned salt);

/* Compare @p count elements; returns the first index that differs (floating
 * point compares by value, so +0 == -0) or SIZE_MAX if all match, and then
 * describes the mismatch (index, got, expected, how many differ) in @p why. */
size_t harness_compare(const void *got, const void *want, size_t count, weft_datatype_t dtype,
		       char *why, size_t why_bytes);

/* --- Test data whose results must be rounded: rounding is checked exactly. ---
 *
 * For the floating-point types (fp16, bf16, fp32, fp64) and the ops WEFT_SUM,
 * WEFT_PROD and WEFT_AVG. The library combines two values at a time (fp16 and
 * bf16 widened to fp32) and rounds to the storage type after every
 * combination, and different algorithms combine in different orders, so in
 * general the result of a reduction over several ranks depends on the order.
 * These inputs are built so that it does not: every partial result over a
 * proper subset of the ranks is exactly representable, so whatever tree of
 * combinations an algorithm uses, only the last combination rounds, once.
 * The expected value is the exact result (computed in integers) rounded once,
 * to nearest even, to the type's precision. harness.c explains each pattern.
 *
 *  - SUM: one rank per element (it moves with the element) holds an odd
 *    multiple o of a unit, the others all hold the same even multiple E; any
 *    proper subset sums below 2^p units (exact), the full sum lies between
 *    2^p and 2^p + E and is odd: it needs rounding, a tie every time, which
 *    nearest-even breaks up for about half of the elements and truncation
 *    never does.
 *  - PROD: two ranks per element hold p-bit odd significands, the others
 *    +-1 or +-2: only the product of the two significands rounds (any
 *    order meets it once; the powers of two are exact).
 *  - AVG: small integers whose sums over any subset are exact, divided by
 *    nranks: the sum is usually not a multiple of nranks, so the quotient is
 *    rounded once (only when nranks is not a power of two can it be inexact).
 *
 * Values stay in the normal range of each type. @p op must be one of the three
 * and @p dtype a floating-point type; nranks 1..HARNESS_MAX_RANKS. */
bool harness_round_supported(weft_datatype_t dtype, weft_op_t op);
void harness_round_input(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op, int rank,
			 int nranks, unsigned salt);
void harness_round_expected(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op,
			    int nranks, unsigned salt);
/* The expected result with truncation instead of rounding to nearest even:
 * how a rounding bug would show. Tests of the data compare it with the
 * above to prove that the checks can fail. */
void harness_round_truncated(void *buf, size_t count, weft_datatype_t dtype, weft_op_t op,
			     int nranks, unsigned salt);

/* Guard bytes around output buffers: fill with a pattern, and check it.
 * harness_guard_check returns the offset of the first changed byte or -1. */
#define HARNESS_GUARD_BYTES 64
void harness_guard_fill(void *guard, size_t bytes);
long harness_guard_check(const void *guard, size_t bytes);

/* A buffer with HARNESS_GUARD_BYTES of guard on each side, its bytes set
 * to HARNESS_UNWRITTEN so that a result must write every one of them.
 * Zero-initialised (data NULL) it is "no buffer": free and the checks
 * accept it. */
#define HARNESS_UNWRITTEN 0xcd
struct harness_buf {
	unsigned char *data;
	size_t bytes;
};
bool harness_buf_alloc(struct harness_buf *b, size_t bytes);
void harness_buf_free(struct harness_buf *b);
/* "" if both guards are intact, else "the guard before" or "the guard after". */
const char *harness_buf_guards(const struct harness_buf *b);
/* The first of @p bytes at @p p that is not HARNESS_UNWRITTEN, or SIZE_MAX. */
size_t harness_first_written(const unsigned char *p, size_t bytes);

/* --- Messages --- */

/* Whether @p msg contains @p word, ignoring case (NULL @p msg: no). */
bool harness_mentions(const char *msg, const char *word);

/* @p st must be WEFT_ERR_INVALID_ARG with a message (the communicator's
 * last error, or weft_init_last_error() without one) that mentions @p says
 * and, unless it is NULL, @p also. 0 if so, else harness_fail()'s 1 naming
 * @p call. */
int harness_expect_invalid(weft_comm_t comm, weft_status_t st, const char *call, const char *says,
			   const char *also);

/* --- Files of the source tree --- */

/* @p rel (a path from the top of the source tree) found from the working
 * directory, or from a directory above the running program (which sits
 * somewhere below build/tests/); into @p out. false if neither has it. */
bool harness_source_path(const char *rel, char *out, size_t cap);

#endif
