/*
 * perf_common.h — the shared driver of the *_perf benchmark programs.
 *
 * Each program (allreduce_perf.c, mpi_allgather_perf.c, ...) describes the
 * one collective it measures in a struct perf_test and hands it to
 * perf_main(). Everything else is common: option parsing (nccl-tests
 * flags), buffer allocation and pre-faulting, the warm-up and timing loops,
 * the data check with guard regions, and the nccl-tests-style report.
 *
 * Sizes, counts and bandwidths follow nccl-tests (docs/benchmarks.md):
 * a row's size S is the larger of the send and the receive buffer
 * (AllGather, ReduceScatter and AlltoAll: count per rank x nranks x type
 * size), its count column is S / type size, algbw = S / time and busbw =
 * algbw x the collective's factor.
 *
 * The driver is split by concern: perf_common.c (the sweep and the report),
 * perf_args.c (options, through getopt_long_only), perf_check.c (datatypes,
 * patterns, guards), perf_rt_weft.c (Weft runtime: the launcher comes from
 * weft_launch_query(), -np from the shared local launcher in tools/launch/)
 * and perf_rt_mpi.c (MPI runtime). perf_int.h is what they share.
 *
 * The same files build two ways. Without PERF_MPI the runtime underneath
 * (start-up, barrier, reductions of timings and error counts) is Weft, with
 * a local launcher (-np N), a launcher environment (mpirun, srun, torchrun,
 * WEFT_RANK), or a single rank; a launcher's variables that cannot be used
 * are an error, never a single rank. With -DPERF_MPI it is MPI and nothing here refers to Weft,
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
	PERF_COLL_REDUCE_SCATTER,
	PERF_COLL_BROADCAST,
	PERF_COLL_REDUCE,
	PERF_COLL_ALLTOALL,
	PERF_COLL_SENDRECV,
	PERF_COLL_COUNT
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

/* One call of the collective under test. Buffers are laid out as the
 * collective's NCCL form wants them; in place they alias as follows:
 *   allreduce       sendbuf == recvbuf
 *   allgather       sendbuf == recvbuf + rank * count elements
 *   reduce_scatter  recvbuf == sendbuf + rank * count elements
 *   broadcast       sendbuf == recvbuf (every rank; only the root's is read)
 *   reduce          sendbuf == recvbuf (every rank; only the root's is written)
 *   alltoall, sendrecv: never in place (the in-place columns print N/A).
 * in_place says so for backends that need a marker such as MPI_IN_PLACE. */
struct perf_call {
	const void *sendbuf;
	void *recvbuf;
	size_t count; /* elements per rank: per block for allgather,
			 reduce_scatter and alltoall */
	enum perf_dtype dtype;
	enum perf_op op; /* used by allreduce, reduce_scatter and reduce only */
	bool in_place;
	int rank;
	int nranks;
	int root; /* broadcast and reduce; -1 otherwise */
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
	/* -b and -e when not given; 0: 32M (nccl-tests' habit). */
	size_t default_bytes;
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
/* Dies unless count fits MPI's int counts (MPI-4 large counts are not used). */
int perf_mpi_count(size_t count, const char *what);
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
