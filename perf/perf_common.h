/*
 * perf_common.h — the shared driver of the *_perf benchmark programs.
 *
 * Each program (allreduce_perf.c, mpi_allgather_perf.c, ...) describes the
 * one collective it measures in a struct perf_test and hands it to
 * perf_main(). Everything else is common: option parsing (nccl-tests
 * flags), buffer allocation and pre-faulting, the warm-up and timing loops,
 * the data check with guard regions, and the nccl-tests-style report.
 *
 * The same file builds two ways. Without PERF_MPI the runtime underneath
 * (start-up, barrier, reductions of timings and error counts) is Weft, with
 * a local launcher (-np N), a launcher environment (mpirun, WEFT_RANK), or a
 * single rank. With -DPERF_MPI it is MPI and nothing here refers to Weft,
 * so the MPI baselines link without libweft.
 */
#ifndef PERF_COMMON_H
#define PERF_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#ifdef PERF_MPI
#include <mpi.h>
#else
#include <weft.h>
#endif

enum perf_coll {
	PERF_COLL_ALLREDUCE,
	PERF_COLL_ALLGATHER,
};

/* Same order as weft_datatype_t, but independent of it for the MPI build. */
enum perf_dtype {
	PERF_INT8,
	PERF_UINT8,
	PERF_INT32,
	PERF_UINT32,
	PERF_INT64,
	PERF_UINT64,
	PERF_HALF,
	PERF_BFLOAT16,
	PERF_FLOAT,
	PERF_DOUBLE,
	PERF_DTYPE_COUNT
};

enum perf_op { PERF_SUM, PERF_PROD, PERF_MIN, PERF_MAX, PERF_AVG, PERF_OP_COUNT };

/* One call of the collective under test. */
struct perf_call {
	/* For in place, sendbuf is recvbuf (allreduce) or recvbuf + rank *
	 * count elements (allgather); in_place says so for backends that need
	 * a marker such as MPI_IN_PLACE instead. */
	const void *sendbuf;
	void *recvbuf;
	size_t count; /* elements per rank */
	enum perf_dtype dtype;
	enum perf_op op; /* unused by allgather */
	bool in_place;
	int rank;
};

/* The collective a program measures. */
struct perf_test {
	const char *prog;    /* program name, for messages */
	const char *backend; /* "Weft", "MPI": printed in the header */
	enum perf_coll coll;
	/* NULL if the backend can run dtype with op, else why not. */
	const char *(*unsupported)(enum perf_dtype dtype, enum perf_op op);
	/* Run one operation; on failure report it with perf_die() (or the
	 * backend's check helper below), which does not return. */
	void (*run)(const struct perf_call *call);
};

/* Parse options, start the runtime, run the sweep, print the report.
 * Returns the process exit status (0, or 1 if any check failed). */
int perf_main(int argc, char **argv, const struct perf_test *test);

/* Print "prog: rank R: <message>" on stderr and end the job with status 1. */
void perf_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Size in bytes and nccl-tests name of a datatype / op. */
size_t perf_dtype_size(enum perf_dtype dtype);
const char *perf_dtype_name(enum perf_dtype dtype);
const char *perf_op_name(enum perf_op op);

#ifdef PERF_MPI
/* MPI datatype and op for ours; MPI_DATATYPE_NULL / MPI_OP_NULL if MPI
 * has none (half, bfloat16, avg). */
MPI_Datatype perf_mpi_datatype(enum perf_dtype dtype);
MPI_Op perf_mpi_op(enum perf_op op);
/* The reason MPI cannot run dtype with op, or NULL; fits perf_test.unsupported. */
const char *perf_mpi_unsupported(enum perf_dtype dtype, enum perf_op op);
/* Dies with MPI's error string unless err is MPI_SUCCESS. */
void perf_mpi_check(int err, const char *what);
#else
/* The communicator the run created. */
weft_comm_t perf_weft_comm(void);
weft_datatype_t perf_weft_datatype(enum perf_dtype dtype);
weft_op_t perf_weft_op(enum perf_op op);
/* Dies with weft_status_string() and weft_comm_last_error() unless st is
 * WEFT_SUCCESS. */
void perf_weft_check(weft_status_t st, const char *what);
#endif

#endif /* PERF_COMMON_H */
