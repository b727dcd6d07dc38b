/*
 * weft.h — the public interface of Weft, a topology-aware collective
 * communication library for tensors in host memory.
 *
 * Conventions that hold for every call unless its comment says otherwise:
 *
 *  - Calls that can fail return a weft_status_t: WEFT_SUCCESS (0) on success,
 *    WEFT_INPROGRESS (1) from weft_test() when an operation is not finished,
 *    a negative code on failure. weft_status_string() names a code;
 *    weft_comm_last_error() gives a sentence that says what failed, on which
 *    rank, and which peer was involved.
 *  - Thread safety: different communicators may be used from different
 *    threads at once; one communicator by one thread at a time (like an
 *    NCCL communicator): calls on it are not serialised. With
 *    WEFT_PROGRESS_THREAD=1 each communicator also has a progress thread
 *    that advances non-blocking operations while the caller computes; Weft
 *    serialises it against the caller's calls. weft_comm_get_async_error()
 *    and weft_comm_abort() may be called from any thread.
 *  - Collectives must be called on every rank of a communicator in the same
 *    order with matching counts, datatypes, ops and roots (as in MPI and
 *    NCCL). Weft checks it: every message carries its call's signature
 *    (number on the communicator mod 4096, collective, datatype, op, an
 *    8-bit hash of count and root); the rank that receives the first
 *    mismatched message fails with WEFT_ERR_REMOTE naming what differs
 *    ("mismatched weft_allreduce: datatype: rank 1 passed float, this rank
 *    int32") and closes its connections, so the others fail with
 *    WEFT_ERR_REMOTE too, in bounded time; a rank that received nothing in
 *    the mismatched call (a broadcast root) may return success and fail at
 *    its next call. A count or root mismatch escapes the hash with
 *    probability 1/512, and is then still caught where message lengths
 *    differ. Sends and receives match by length only (see weft_send).
 *  - Buffers are host memory. A buffer passed to a non-blocking call must not
 *    be touched until weft_test() or weft_wait() reports its completion.
 */
#ifndef WEFT_H
#define WEFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define WEFT_API __attribute__((visibility("default")))
#else
#define WEFT_API
#endif

/* The release (VERSION): util/error.c and scripts/check-packaging hold these to it. */
#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0
/** WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH, for #if. */
#define WEFT_VERSION_CODE                                                                          \
	(WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH)

/** Status codes. Zero is success, one is "not finished yet", negative is failure. */
typedef enum weft_status {
	WEFT_SUCCESS = 0,
	WEFT_INPROGRESS = 1,
	WEFT_ERR_INVALID_ARG = -1, /**< a parameter is wrong; the message names it */
	WEFT_ERR_NO_MEMORY = -2,   /**< an allocation or a shared segment failed */
	WEFT_ERR_SYSTEM = -3,	   /**< a system call failed; errno text is in the message */
	WEFT_ERR_REMOTE = -4,	   /**< a peer failed, closed its connection or sent bad data */
	WEFT_ERR_TIMEOUT = -5, /**< a bounded wait ran out; the message names whom it waited for */
	WEFT_ERR_NOT_SUPPORTED = -6,
	WEFT_ERR_INTERNAL = -7, /**< a bug in Weft; please report the message */
	WEFT_ERR_ABORTED = -8,	/**< the communicator was aborted */
	WEFT_ERR_REVOKED = -9,	/**< the communicator was revoked (weft_comm_revoke): shrink it */
} weft_status_t;

/** Element types. fp16 and bf16 are combined in fp32, two values at a time,
 * and rounded back to the type (to nearest even) after each combination:
 * an algorithm that combines in steps rounds once per step, so the result of
 * a reduction over many ranks can depend on the algorithm and the ring
 * order by those roundings (fp32 and fp64 likewise round every addition). */
typedef enum weft_datatype {
	WEFT_INT8 = 0,
	WEFT_UINT8,
	WEFT_INT32,
	WEFT_UINT32,
	WEFT_INT64,
	WEFT_UINT64,
	WEFT_FLOAT16,
	WEFT_BFLOAT16,
	WEFT_FLOAT32,
	WEFT_FLOAT64,
	WEFT_DATATYPE_COUNT
} weft_datatype_t;

/** Reduction operations. WEFT_AVG is the sum divided by the rank count
 * (integer division, truncating toward zero, for integer types). */
typedef enum weft_op {
	WEFT_SUM = 0,
	WEFT_PROD,
	WEFT_MIN,
	WEFT_MAX,
	WEFT_AVG,
	WEFT_OP_COUNT
} weft_op_t;

/** Pass as sendbuf of weft_allreduce/weft_allgather for MPI-style in place:
 * allreduce then reads its input from recvbuf; allgather takes this rank's
 * contribution from its own position in recvbuf (offset rank*count). Passing
 * sendbuf == recvbuf also means in place for allreduce, and for allgather when
 * sendbuf is recvbuf + rank*count*size. */
#define WEFT_IN_PLACE ((const void *)1)

#define WEFT_UNIQUE_ID_BYTES 128

/** Opaque bytes that tell every rank how to reach the bootstrap root and
 * the job's 256-bit key, with which every connection proves membership
 * (the key itself is never sent). Created by weft_get_unique_id() on one
 * rank and sent to the others by any out-of-band means (MPI_Bcast, a file
 * only the user can read, a pipe). Treat it as a password: whoever holds
 * it can join the job (docs/reliability.md, the threat model). */
typedef struct weft_unique_id {
	char internal[WEFT_UNIQUE_ID_BYTES];
} weft_unique_id_t;

typedef struct weft_comm *weft_comm_t;
typedef struct weft_task *weft_request_t;

/** Optional settings for communicator creation. Zero-initialise, then set
 * what you need; zero fields take the environment's or built-in defaults. */
typedef struct weft_config {
	size_t size; /**< sizeof(weft_config_t); set by WEFT_CONFIG_INIT */
	double
	    timeout_seconds; /**< bound on every wait (bootstrap and operations); 0: WEFT_TIMEOUT */
	/** 1: this communicator gets a progress thread (as WEFT_PROGRESS_THREAD=1
	 * does for all); -1: it gets none; 0: WEFT_PROGRESS_THREAD decides.
	 * A config whose size ends before this field (a caller built against
	 * an older weft.h) reads as 0. */
	int progress_thread;
	/** Threads computing beside this rank (OpenMP, torch's pool); 0: OMP_NUM_THREADS,
	 * else 1. WEFT_WAIT=auto sleeps in waits when a host's compute threads outnumber
	 * its CPUs. 0 in an older, shorter config (a long: it ends past the padding). */
	long compute_threads;
} weft_config_t;

#define WEFT_CONFIG_INIT                                                                           \
	{                                                                                          \
		sizeof(weft_config_t), 0.0, 0, 0                                                   \
	}

/** Name of a status code ("success", "invalid argument", ...). Never NULL. */
WEFT_API const char *weft_status_string(weft_status_t status);

/** Size in bytes of one element of @p dtype, or 0 if @p dtype is invalid. */
WEFT_API size_t weft_datatype_size(weft_datatype_t dtype);

/** The library's version as "major.minor.patch": the WEFT_VERSION_* it was
 * built with, which a program compares with its own to see what it runs on. */
WEFT_API const char *weft_version(void);

/**
 * Create a unique id and start the bootstrap root listener in this process.
 *
 * Call on exactly one process (usually the one that will be rank 0), before
 * any rank calls weft_comm_init_rank() with the id. The listener binds to
 * WEFT_ROOT=host:port if that is set; else, on a port chosen by the kernel,
 * to the address of the interface named by WEFT_SOCKET_IFNAME, or without
 * it to that of the NIC nearest this process's cores (the one a rank here
 * would offer its peers in a job across hosts), so that ranks on other
 * hosts can reach it; to loopback (127.0.0.1) only when this host has no
 * up interface with an address. It runs in a background thread until
 * every rank has joined, the bootstrap timeout expires, or the process
 * exits.
 *
 * @param[out] id  filled with the root address, a random 256-bit key and a magic.
 * @return WEFT_SUCCESS, WEFT_ERR_INVALID_ARG (id NULL or bad WEFT_ROOT),
 *         WEFT_ERR_SYSTEM (cannot bind or start the thread).
 * Blocking: no. Thread safety: safe.
 */
WEFT_API weft_status_t weft_get_unique_id(weft_unique_id_t *id);

/**
 * Create a communicator of @p nranks ranks, this process being @p rank.
 *
 * Every rank calls this with the same id and nranks. Each rank connects to
 * the root, proves that it holds the key (and the root that it does: a
 * listener that cannot is refused, "failed authentication"), and exchanges
 * its card (host identity,
 * addresses); then it connects to its peers over the transport chosen for
 * each pair (shared memory on the same host, TCP otherwise; see
 * WEFT_TRANSPORTS).
 *
 * @param[out] comm    the new communicator; NULL on failure.
 * @param nranks       number of ranks, >= 1.
 * @param id           from weft_get_unique_id().
 * @param rank         this rank, 0 <= rank < nranks.
 * @param config       NULL or settings (see weft_config_t).
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG (bad rank, size, id or config);
 *         WEFT_ERR_TIMEOUT (a rank did not arrive within the timeout: the
 *         message, from weft_init_last_error(), names the missing ranks);
 *         WEFT_ERR_SYSTEM, WEFT_ERR_REMOTE, WEFT_ERR_NO_MEMORY.
 * Blocking: yes, until all ranks have joined or the timeout expires.
 */
WEFT_API weft_status_t weft_comm_init_rank(weft_comm_t *comm, int nranks, weft_unique_id_t id,
					   int rank, const weft_config_t *config);

/**
 * Create a communicator from the launcher's environment, so that training
 * code needs no MPI. Rank and size come from the launcher that
 * weft_launch_query() finds (WEFT_RANK/WEFT_NRANKS, torchrun, PMIx, Open
 * MPI, MPICH/Hydra or Slurm, in that order).
 *
 * Under PMIx (srun --mpi=pmix, Open MPI's mpirun) rank 0 starts the
 * bootstrap root with a fresh random key and hands its id to the other
 * ranks through PMIx (PMIx_Put, PMIx_Commit, PMIx_Fence, PMIx_Get): nothing
 * to set. Rank 0 listens on WEFT_ROOT if set; else on loopback when every
 * rank is on its host; else on WEFT_SOCKET_IFNAME or the NIC nearest its
 * cores, on a free port.
 *
 * Otherwise the root address, where rank 0 listens, is WEFT_ROOT=host:port
 * if set; else torchrun's MASTER_ADDR with port MASTER_PORT + 1 (torchrun's
 * own store has MASTER_PORT); else, for a Slurm step across nodes, the first
 * node of SLURM_STEP_NODELIST (rank 0's node, except under -m arbitrary,
 * which is then an error) with a port derived from the job and step ids;
 * else, when the launcher says every rank is on this host, 127.0.0.1 with a
 * port derived from the launcher's job id. The key is WEFT_SECRET (64 hex
 * digits, or 16) if set, else the contents of WEFT_SECRET_FILE (a file only
 * its owner can read); else, for a job on one host, this user's host key
 * (a random key in a private file under $XDG_RUNTIME_DIR/weft or
 * /tmp/weft-UID) combined with the launcher's job id. A job across hosts
 * with none of these fails at init saying how to give one, unless
 * WEFT_ALLOW_DERIVED_SECRET=1 accepts a key derived from the job id, which
 * other users can guess.
 *
 * @return as weft_comm_init_rank(), plus WEFT_ERR_INVALID_ARG naming the
 *         variable that is missing or malformed (for a Slurm step whose root
 *         is unknown: saying to use srun --mpi=pmix or WEFT_ROOT), the
 *         errors of weft_launch_query(), and under PMIx WEFT_ERR_SYSTEM or
 *         WEFT_ERR_TIMEOUT from the exchange with the PMIx server; with no
 *         launcher at all, WEFT_ERR_INVALID_ARG.
 * Blocking: yes. Collective over the launcher's ranks.
 */
WEFT_API weft_status_t weft_comm_init_env(weft_comm_t *comm, const weft_config_t *config);

#define WEFT_LAUNCHER_NAME_BYTES 32

/** What the launcher's environment says about this process. */
typedef struct weft_launch_info {
	size_t size;	/**< sizeof(weft_launch_info_t); set by WEFT_LAUNCH_INFO_INIT */
	int rank;	/**< this process's rank, 0 <= rank < nranks */
	int nranks;	/**< number of ranks the launcher started */
	int local_rank; /**< rank among the ranks on this host; -1 if the launcher does not say */
	int local_size; /**< ranks on this host; -1 if the launcher does not say */
	/** "weft", "torchrun", "PMIx", "Open MPI", "MPICH/Hydra", "Slurm", or "none" */
	char launcher[WEFT_LAUNCHER_NAME_BYTES];
} weft_launch_info_t;

#define WEFT_LAUNCH_INFO_INIT                                                                      \
	{                                                                                          \
		sizeof(weft_launch_info_t), 0, 0, 0, 0, ""                                         \
	}

/**
 * Find the launcher that started this process and what it says: the one
 * table of launcher variables that weft_comm_init_env() reads, for
 * programs that need rank and size before (or without) a communicator.
 * First match wins:
 *  - "weft": WEFT_RANK, WEFT_NRANKS (optional WEFT_LOCAL_RANK, WEFT_LOCAL_SIZE);
 *  - "torchrun": RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, when
 *    TORCHELASTIC_RUN_ID (or GROUP_RANK with LOCAL_WORLD_SIZE) is set;
 *  - "PMIx", when PMIX_RANK or PMIX_NAMESPACE is set: rank, job size, local
 *    rank and size from the PMIx server (libpmix is loaded at run time;
 *    WEFT_PMIX=0 skips it). Where libpmix is missing or no server answers,
 *    the Open MPI, Hydra or Slurm variables set beside them are read;
 *  - "Open MPI": OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE;
 *  - "MPICH/Hydra": PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS;
 *  - "Slurm": SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and this node's
 *    entry of SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE).
 *
 * @param[in,out] info  info->size must be set (WEFT_LAUNCH_INFO_INIT); on
 *                      success the other fields are filled. Unchanged on failure.
 * @return WEFT_SUCCESS, also when no launcher's variables are set: then
 *         launcher is "none", rank 0, nranks 1, local_rank 0, local_size 1.
 *         WEFT_ERR_INVALID_ARG when info is NULL or too small, or when a
 *         launcher's variables are there but unusable (one of rank and
 *         size missing, not an integer, rank >= size, a Slurm batch script
 *         rather than a task): weft_init_last_error() names the variable.
 *         WEFT_ERR_NOT_SUPPORTED when only PMIx variables are set and PMIx
 *         cannot be used: the message says why and what to set instead.
 * Blocking: no network or name lookup; under PMIx the first call starts
 * the PMIx client (finalised at exit) and asks the local server.
 * Thread safety: safe, unless another thread changes the environment.
 */
WEFT_API weft_status_t weft_launch_query(weft_launch_info_t *info);

/** Message of the last failed weft_comm_init_* or weft_launch_query call on
 * this thread (a communicator does not exist yet to hold it), or of
 * weft_host_describe() and the other calls that name it. Empty string if
 * none. */
WEFT_API const char *weft_init_last_error(void);

/**
 * Destroy a communicator: waits for nothing, frees every resource, closes
 * connections and unmaps shared memory. Outstanding requests become invalid.
 * @return WEFT_SUCCESS, or WEFT_ERR_INVALID_ARG if comm is NULL.
 * Blocking: no (it does not synchronise with peers).
 */
WEFT_API weft_status_t weft_comm_destroy(weft_comm_t comm);

/**
 * Abort a communicator: outstanding and future operations on it fail with
 * WEFT_ERR_ABORTED, and its connections are closed so that peers fail too,
 * in bounded time. The communicator must still be destroyed.
 * Thread safety: may be called from any thread.
 */
WEFT_API weft_status_t weft_comm_abort(weft_comm_t comm);

/**
 * The error that ended the communicator's usefulness, if any: a peer
 * failure, a timeout, an abort. @p async_error is set to WEFT_SUCCESS if the
 * communicator is healthy. Thread safety: may be called from any thread.
 */
WEFT_API weft_status_t weft_comm_get_async_error(weft_comm_t comm, weft_status_t *async_error);

/** A sentence describing the last error on @p comm ("rank 2: allreduce seq 7:
 * peer 3 closed its connection (socket)"); empty if none. The string is
 * this thread's copy: it stays valid until this thread's next call of
 * weft_comm_last_error. Thread safety: may be called from any thread. */
WEFT_API const char *weft_comm_last_error(weft_comm_t comm);

/** Write the flight recorder (JSON; docs/observability.md): the last WEFT_TRACE_BUFFER
 * operations (what, when called, started, finished; what an unfinished one waits for) and
 * events, to @p path, or with NULL to WEFT_TRACE_DIR's file. WEFT_ERR_INVALID_ARG: comm NULL,
 * or NULL without WEFT_TRACE_DIR; WEFT_ERR_SYSTEM: not written (weft_comm_last_error says
 * why; the communicator lives on). Not collective; any thread, even during a call on @p comm. */
WEFT_API weft_status_t weft_comm_dump(weft_comm_t comm, const char *path);

/** This rank's number and the communicator's size. */
WEFT_API weft_status_t weft_comm_rank(weft_comm_t comm, int *rank);
WEFT_API weft_status_t weft_comm_size(weft_comm_t comm, int *nranks);

/**
 * AllReduce: recvbuf[i] = op over all ranks of sendbuf[i], for i < count.
 *
 * @param sendbuf  input, count elements; WEFT_IN_PLACE or recvbuf for in place.
 * @param recvbuf  output, count elements. May not partially overlap sendbuf.
 * @param count    elements per rank; 0 is a valid no-op.
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG (NULL buffer with count > 0,
 *         bad dtype or op, count * element size overflows); WEFT_ERR_REMOTE,
 *         WEFT_ERR_TIMEOUT, WEFT_ERR_ABORTED on failure of the job.
 * Blocking: until this rank's result is in recvbuf.
 */
WEFT_API weft_status_t weft_allreduce(const void *sendbuf, void *recvbuf, size_t count,
				      weft_datatype_t dtype, weft_op_t op, weft_comm_t comm);

/** Non-blocking AllReduce: as weft_allreduce(), returning at once with a request to complete
 * with weft_test() or weft_wait(). Every non-blocking call moves in the communicator's progress
 * thread (WEFT_PROGRESS_THREAD=1) or, without one, inside the caller's later Weft calls
 * (weft_test, weft_wait, or any call on the communicator); the call itself only queues it. */
WEFT_API weft_status_t weft_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
				       weft_datatype_t dtype, weft_op_t op, weft_comm_t comm,
				       weft_request_t *request);

/**
 * AllGather: recvbuf holds nranks blocks of @p count elements; block r is
 * rank r's sendbuf.
 *
 * @param sendbuf  count elements; WEFT_IN_PLACE, or recvbuf + rank*count
 *                 elements, for in place.
 * @param recvbuf  nranks * count elements.
 * @param count    elements contributed by each rank; 0 is a valid no-op.
 * @return as weft_allreduce(); WEFT_ERR_INVALID_ARG also when count * nranks
 *         * element size overflows.
 * Blocking: until recvbuf is complete on this rank.
 */
WEFT_API weft_status_t weft_allgather(const void *sendbuf, void *recvbuf, size_t count,
				      weft_datatype_t dtype, weft_comm_t comm);
WEFT_API weft_status_t weft_iallgather(const void *sendbuf, void *recvbuf, size_t count,
				       weft_datatype_t dtype, weft_comm_t comm,
				       weft_request_t *request);

/**
 * ReduceScatter: the element-wise reduction over all ranks of sendbuf
 * (nranks * recvcount elements) is split in nranks blocks; rank r receives
 * block r in recvbuf (recvcount elements).
 * In place: sendbuf == WEFT_IN_PLACE takes the input from recvbuf, which
 * must then hold nranks * recvcount elements, and leaves block r at its
 * start (MPI_Reduce_scatter_block; the rest of recvbuf is left holding
 * partial sums); recvbuf == sendbuf + rank * recvcount elements also works
 * (NCCL).
 * @return as weft_allreduce(). Blocking: until recvbuf holds the result.
 */
WEFT_API weft_status_t weft_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
					   weft_datatype_t dtype, weft_op_t op, weft_comm_t comm);
WEFT_API weft_status_t weft_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
					    weft_datatype_t dtype, weft_op_t op, weft_comm_t comm,
					    weft_request_t *request);

/**
 * Broadcast: count elements of root's sendbuf land in every rank's recvbuf.
 * sendbuf is read on the root only (WEFT_IN_PLACE or recvbuf there: in
 * place); other ranks may pass NULL. Invalid root: WEFT_ERR_INVALID_ARG.
 * Blocking: until this rank's recvbuf is filled (root: until sent).
 */
WEFT_API weft_status_t weft_broadcast(const void *sendbuf, void *recvbuf, size_t count,
				      weft_datatype_t dtype, int root, weft_comm_t comm);
WEFT_API weft_status_t weft_ibroadcast(const void *sendbuf, void *recvbuf, size_t count,
				       weft_datatype_t dtype, int root, weft_comm_t comm,
				       weft_request_t *request);

/**
 * Reduce: the element-wise reduction of every rank's sendbuf lands in the
 * root's recvbuf (other ranks' recvbuf is not used and may be NULL).
 * In place on the root: sendbuf WEFT_IN_PLACE or == recvbuf.
 */
WEFT_API weft_status_t weft_reduce(const void *sendbuf, void *recvbuf, size_t count,
				   weft_datatype_t dtype, weft_op_t op, int root, weft_comm_t comm);
WEFT_API weft_status_t weft_ireduce(const void *sendbuf, void *recvbuf, size_t count,
				    weft_datatype_t dtype, weft_op_t op, int root, weft_comm_t comm,
				    weft_request_t *request);

/**
 * AlltoAll: block j (count elements) of rank i's sendbuf lands as block i
 * of rank j's recvbuf. Both buffers hold nranks * count elements and must
 * not overlap (in place is not supported: WEFT_ERR_INVALID_ARG).
 */
WEFT_API weft_status_t weft_alltoall(const void *sendbuf, void *recvbuf, size_t count,
				     weft_datatype_t dtype, weft_comm_t comm);
WEFT_API weft_status_t weft_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
				      weft_datatype_t dtype, weft_comm_t comm,
				      weft_request_t *request);

/**
 * AlltoAllv: AlltoAll with a count and a displacement per peer (as
 * MPI_Alltoallv). Rank i's block for rank j is sendcounts[j] elements at
 * element offset sdispls[j] of its sendbuf; it lands on rank j as
 * recvcounts[i] elements at element offset rdispls[i] of rank j's recvbuf.
 * Every array has nranks entries; a rank's block to itself is copied
 * locally, so sendcounts[rank] must equal recvcounts[rank].
 *
 * @param sendbuf     the blocks to send; may be NULL if every sendcount is 0.
 * @param sendcounts  elements to each rank.
 * @param sdispls     element offset in sendbuf of each rank's block.
 * @param recvbuf     where the blocks land; may be NULL if every recvcount
 *                    is 0. Must not overlap sendbuf (no in place), and
 *                    its blocks must not overlap each other.
 * @param recvcounts  elements from each rank: recvcounts[i] on rank j must
 *                    equal sendcounts[j] on rank i; a mismatch fails the
 *                    receive with both sizes named.
 * @param rdispls     element offset in recvbuf of each rank's block.
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG naming the parameter (a NULL
 *         array, a NULL buffer with a block that is not empty, a block
 *         beyond the address space, sendcounts[rank] != recvcounts[rank],
 *         overlapping buffers); the job's errors as weft_allreduce().
 * Every rank calls it, also a rank whose blocks are all empty.
 * Blocking: until this rank's recvbuf is complete and sendbuf may be reused.
 */
WEFT_API weft_status_t weft_alltoallv(const void *sendbuf, const size_t sendcounts[],
				      const size_t sdispls[], void *recvbuf,
				      const size_t recvcounts[], const size_t rdispls[],
				      weft_datatype_t dtype, weft_comm_t comm);

/** Non-blocking AlltoAllv; see weft_iallreduce(). The four arrays are read while the
 * operation runs: keep them, like the buffers, until it completes. */
WEFT_API weft_status_t weft_ialltoallv(const void *sendbuf, const size_t sendcounts[],
				       const size_t sdispls[], void *recvbuf,
				       const size_t recvcounts[], const size_t rdispls[],
				       weft_datatype_t dtype, weft_comm_t comm,
				       weft_request_t *request);

/**
 * Gather: each rank's sendbuf (count elements) lands in the root's recvbuf
 * (nranks * count elements) as block r for rank r. recvbuf is read on the
 * root only (other ranks may pass NULL). In place on the root: sendbuf
 * WEFT_IN_PLACE, or recvbuf + root * count elements.
 * @return as weft_broadcast(); WEFT_ERR_INVALID_ARG also when count *
 *         nranks * element size overflows, or when the root's sendbuf
 *         overlaps its recvbuf other than in place.
 * Blocking: until sendbuf may be reused (root: until recvbuf is complete).
 */
WEFT_API weft_status_t weft_gather(const void *sendbuf, void *recvbuf, size_t count,
				   weft_datatype_t dtype, int root, weft_comm_t comm);
WEFT_API weft_status_t weft_igather(const void *sendbuf, void *recvbuf, size_t count,
				    weft_datatype_t dtype, int root, weft_comm_t comm,
				    weft_request_t *request);

/**
 * Scatter: block r (count elements) of the root's sendbuf (nranks * count
 * elements) lands in rank r's recvbuf. sendbuf is read on the root only
 * (other ranks may pass NULL). In place on the root: recvbuf
 * (void *)WEFT_IN_PLACE, or sendbuf + root * count elements (the root's
 * block stays where it is).
 * @return as weft_gather().
 * Blocking: until recvbuf holds the block (root: until sendbuf may be reused).
 */
WEFT_API weft_status_t weft_scatter(const void *sendbuf, void *recvbuf, size_t count,
				    weft_datatype_t dtype, int root, weft_comm_t comm);
WEFT_API weft_status_t weft_iscatter(const void *sendbuf, void *recvbuf, size_t count,
				     weft_datatype_t dtype, int root, weft_comm_t comm,
				     weft_request_t *request);

/** Barrier: returns once every rank has entered it. */
WEFT_API weft_status_t weft_barrier(weft_comm_t comm);
WEFT_API weft_status_t weft_ibarrier(weft_comm_t comm, weft_request_t *request);

/**
 * Point to point. Sends to a peer are matched with that peer's receives from this rank in the
 * order both were called (as in NCCL; there are no tags). Non-blocking sends and receives run side
 * by side with the ones started before them (in a group or not, as MPI's), while a collective
 * waits for those started before it and they for it. A send or receive of zero elements is a
 * message like any other (it matches the peer's next call, as in MPI). On a length mismatch the
 * receive fails with a message naming both sizes and the receiver's communicator closes its
 * connections, so the sender's communicator fails too, at the latest at its next call (a small
 * send may already have returned WEFT_SUCCESS). weft_send returns once buf may be reused; to
 * exchange with a peer in both directions at once, use the non-blocking forms or a group.
 */
WEFT_API weft_status_t weft_send(const void *buf, size_t count, weft_datatype_t dtype, int peer,
				 weft_comm_t comm);
WEFT_API weft_status_t weft_recv(void *buf, size_t count, weft_datatype_t dtype, int peer,
				 weft_comm_t comm);
WEFT_API weft_status_t weft_isend(const void *buf, size_t count, weft_datatype_t dtype, int peer,
				  weft_comm_t comm, weft_request_t *request);
WEFT_API weft_status_t weft_irecv(void *buf, size_t count, weft_datatype_t dtype, int peer,
				  weft_comm_t comm, weft_request_t *request);

/**
 * Groups: between weft_group_start() and weft_group_end(), blocking calls
 * are only recorded; weft_group_end() starts them all at once and returns
 * when all are complete (non-blocking calls in a group return their request
 * at once and start at weft_group_end()). Groups nest; only the outermost
 * end starts the operations. Per thread.
 * @return weft_group_end(): the first error of the group's operations.
 */
WEFT_API weft_status_t weft_group_start(void);
WEFT_API weft_status_t weft_group_end(void);

#define WEFT_SPLIT_NOCOLOR (-1)

/**
 * Split: ranks that pass the same @p color form a new communicator, ordered
 * by @p key then by their rank in @p comm (like MPI_Comm_split). Ranks that
 * pass WEFT_SPLIT_NOCOLOR get *newcomm = NULL. Collective over @p comm. The
 * new communicator keeps the topology that @p comm learned.
 */
WEFT_API weft_status_t weft_comm_split(weft_comm_t comm, int color, int key, weft_comm_t *newcomm);

/**
 * Describe the communicator: what it learned of the job's topology and what
 * it decided, as one JSON object (UTF-8; every name is a JSON string, so
 * host, NIC and switch names are escaped). This is what `weft-topo` prints
 * and formats. Members (layout version 1: "version" changes only when a
 * member changes meaning or goes away; new members may appear):
 *
 *  - "version", "library" (weft_version()), "nranks", "nhosts", "nleaves",
 *    "nspines";
 *  - "ranks": per rank: "rank", "host" (host id), "host_index", "hostname",
 *    "local_rank", "numa", "nic", "nic_numa", "leaf" (display name),
 *    "leaf_index", "leaf_id", "leaf_port", "spine", "leaf_source" (how the
 *    leaf was learned: "lldp", "file", "slurm" or "none"; one source for
 *    the whole job where every rank knows it, see docs/topology.md);
 *  - "hosts": "index", "hostname", "host", "leader", "leaf", "ranks" (in the
 *    order the hierarchical algorithms chain them, from the leader);
 *  - "leaves": "index", "name", "source", "spine", "spine_index" (-1:
 *    unknown), "leader", "hosts", "ranks"; "spines": "index", "name", "leaves";
 *  - "ring": "placement" ("topo" or "rank"), "order" (ring position to
 *    rank), "leaf_crossings", "spine_crossings", and "rank_order" with the
 *    same crossings for plain rank order;
 *  - "trees": "double_binary" (the tree AllReduce's two trees) and "binary"
 *    (tree Broadcast and Reduce, shown for root 0), each with "root",
 *    "depth", "leaf_crossings", "spine_crossings"; "host_leaders",
 *    "leaf_leaders", and "leader_ring" ("order", "leaf_crossings");
 *  - "transports": per link class present ("self", "numa", "host", "leaf",
 *    "spine"): "link", "pairs" (ordered pairs of ranks) and "by_transport"
 *    (transport name to pairs), from each rank's own choice;
 *  - "tuner": "collectives", each with "name", "algorithms" and "sizes":
 *    per message size (8 B to 256 MiB) "bytes", "count", "choice" and
 *    "estimates_us" (algorithm name to microseconds, null where the tuner
 *    would never choose it); and "flow": AllReduce at 8 B, 64 KiB, 4 MiB
 *    and 256 MiB by the alpha-beta model and by a flow estimate (the
 *    busiest fabric link's bytes over its bandwidth, plus the alpha-beta
 *    latency terms): "collective", "algorithms" (those with a flow
 *    estimate), "estimate_only" ("name", "description": variants the
 *    library does not run, such as "hier-leaf"), "bandwidth_Bps"
 *    ("host_uplink", "leaf_uplinks", "leaf_uplink_per_host") and "sizes":
 *    "bytes", "count", "ab_choice", "flow_choice", "agree", and per algorithm "ab_us", "flow_us",
 *    "latency_us" and "busiest" ("link": "host-up", "host-down",
 *    "leaf-up" or "leaf-down", "index" of the host or leaf, "bytes"; null
 *    where no fabric link is used), null where it does not apply;
 *  - "connections": "mode", "connected_peers", "paths"; "pacer": "mode", "state";
 *  - "wait": this rank's own WEFT_WAIT: "asked", "waits", "compute_threads",
 *    "oversubscribed", "spin_us", "sleeps", "timeouts", "woken".
 *
 * Nothing in it grows faster than the number of ranks: per-pair facts are
 * summarised per link class. The document can be read back as
 * WEFT_TOPO_FILE (the leaves learned by LLDP, a topology file or Slurm).
 *
 * @param comm       the communicator.
 * @param[out] json  a NUL-terminated string, owned by the caller, to be
 *                   released with weft_describe_free(); NULL on failure.
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG (comm or json NULL);
 *         WEFT_ERR_NO_MEMORY; the errors of weft_allgather().
 * Blocking: collective. Every rank of @p comm must call it, in the same
 * order as its other collectives: it gathers each rank's transport choices
 * (a few hundred bytes per rank). Every rank gets the same document, "wait" aside.
 * Thread safety: as any call on @p comm.
 */
WEFT_API weft_status_t weft_comm_describe(weft_comm_t comm, char **json);

/**
 * Describe this host as Weft sees it, without a communicator: "hostname",
 * "host" (host id), "packages", "numa_nodes", "cores", "llc_bytes" (its
 * last-level caches summed, 0 unknown), "numa" (of this process), "nic"
 * (the one a rank here would use) and "nic_numa", "leaf", "leaf_id",
 * "leaf_port", "spine", "leaf_source" (as in weft_comm_describe()), and
 * "interfaces" ("name", "up", "loopback"). It reads the environment as a
 * communicator would (WEFT_SOCKET_IFNAME, WEFT_TOPO_FILE, WEFT_LLDP, ...).
 *
 * @param[out] json  as for weft_comm_describe().
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG (json NULL, a bad topology
 *         file); WEFT_ERR_SYSTEM; WEFT_ERR_NO_MEMORY. The message is in
 *         weft_init_last_error().
 * Blocking: not collective; it may wait briefly for the local lldpd.
 * Thread safety: safe.
 */
WEFT_API weft_status_t weft_host_describe(char **json);

/**
 * Every WEFT_* environment variable Weft reads, as {"settings": [{"name",
 * "default" (null: unset by default), "help"}, ...]}.
 *
 * @param[out] json  as for weft_comm_describe().
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG (json NULL); WEFT_ERR_NO_MEMORY.
 * Blocking: no. Thread safety: safe.
 */
WEFT_API weft_status_t weft_settings_describe(char **json);

/**
 * Model a job without running it: place ranks on every host of a topology
 * file and describe the job as weft_comm_describe() would, through the same
 * graph, placement, trees and tuner (the tuner with its default costs per
 * link class; nothing is measured). "transports" counts pairs per link
 * class ("self", "shm" inside a host, "net" between hosts), and "model"
 * holds the inputs and, per step ("load", "ranks", "graph", "placement",
 * "tuner", "transports", "topo", "ring", "trees", ...), "seconds" and
 * "peak_rss_kib", the process's peak resident memory after it. This is
 * what weft-topo --model prints.
 *
 * @param topology_file   Slurm topology.conf or Weft's JSON, as for
 *                        WEFT_TOPO_FILE; its hosts in name order.
 * @param ranks_per_host  ranks on each host (block, round-robin, random).
 * @param order           how rank numbers fall on hosts: "block" (NULL),
 *                        "round-robin", "random" or "random:SEED", or the
 *                        path of an Open MPI rankfile ("rank N=HOST" lines,
 *                        as weft-topo --rankfile writes), which gives the
 *                        ranks and their hosts itself.
 * @param flags          0, or WEFT_MODEL_BRIEF: lists with an entry per
 *                        rank, host or leaf ("ranks", "hosts", "leaves",
 *                        "spines", ring "order", the trees' leaders and
 *                        the leaders' ring "order") keep their first 8
 *                        entries and the document says "brief": true; the
 *                        counts ("nranks", "nhosts", ...) are whole. The
 *                        steps are timed before the cut, so they are the
 *                        same either way. For printing a summary of a large
 *                        job without writing and reading it whole.
 * @param[out] json       as for weft_comm_describe().
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG (a NULL argument, a bad file,
 *         order or count, more than 1,000,000 ranks); WEFT_ERR_NO_MEMORY.
 *         The message is in weft_init_last_error().
 * Blocking: no (not collective). Thread safety: safe. Settings are read
 * as a job reads them (WEFT_PLACEMENT, WEFT_ALGO, WEFT_TUNE, ...).
 */
#define WEFT_MODEL_BRIEF 1u
WEFT_API weft_status_t weft_model_describe(const char *topology_file, int ranks_per_host,
					   const char *order, unsigned flags, char **json);

/** Release a string from weft_comm_describe(), weft_host_describe(),
 * weft_settings_describe() or weft_model_describe(); NULL is harmless. Thread safety: safe. */
WEFT_API void weft_describe_free(char *json);

/**
 * Drive a request forward without blocking.
 * @param[in,out] request  set to NULL when the operation has finished (the
 *                         request is then freed), successfully or not.
 * @return WEFT_INPROGRESS if not finished; WEFT_SUCCESS when finished; the
 *         operation's error when it failed.
 * Blocking: no.
 */
WEFT_API weft_status_t weft_test(weft_request_t *request);

/**
 * Call @p fn(@p arg, status) once, when the operation of @p request
 * finishes, successfully or not. It runs in whichever thread finishes the
 * operation — with WEFT_PROGRESS_THREAD=1 usually the communicator's
 * progress thread, else the thread that calls weft_test/weft_wait or
 * another Weft call on the communicator — while Weft holds the
 * communicator's internal lock: @p fn must be short and must not call Weft
 * (no operation, test, wait or group on any communicator, nor destroy): a
 * callback that waited on another communicator could deadlock with a
 * thread that waits on both, so every such call made from a callback
 * fails with WEFT_ERR_INVALID_ARG saying so. If the operation has already
 * finished, @p fn runs
 * now, in the calling thread. The request stays valid, and must still be
 * completed with weft_test() or weft_wait(), which free it. At most one
 * callback per request (a second call replaces the first).
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG if request or fn is NULL.
 * Blocking: no. Thread safety: as the communicator's other calls.
 */
WEFT_API weft_status_t weft_request_on_complete(weft_request_t request,
						void (*fn)(void *arg, weft_status_t status),
						void *arg);

/**
 * Bound @p request's operation by @p seconds from now, running or queued:
 * past it, it fails with WEFT_ERR_TIMEOUT and the job-wide verdict as any
 * timeout does (the communicator is then dead); weft_comm_stragglers()
 * names who never reached it (a monitored barrier). NULL: nothing to bound.
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG unless 0 < seconds < 1e9.
 */
WEFT_API weft_status_t weft_request_set_timeout(weft_request_t request, double seconds);

/** Block until the request finishes; frees it and sets *request to NULL.
 * While waiting it also drives the other communicators on which this thread
 * started non-blocking operations, so ranks may wait for them in different
 * orders. @return the operation's status. Bounded by the communicator's
 * timeout. */
WEFT_API weft_status_t weft_wait(weft_request_t *request);

/* ---- Memory ---- */

/**
 * Allocate @p size bytes that the ranks of @p comm on this host can map, so
 * that an intra-host collective whose buffers all come from here reads and
 * writes them in place, with no staging copy (as NCCL's user buffer
 * registration). The pages are touched here (huge pages where the kernel
 * gives them for shared memory), never on a collective's hot path.
 *
 * Semantics. Local, not collective: no peer is involved and ranks may
 * allocate different sizes or none. The memory is an anonymous memory file
 * (nothing in /dev/shm, nothing left behind if the process dies); each
 * allocation has a generation this process never reuses. Any part of it
 * may be passed to any collective of any communicator, as sendbuf or
 * recvbuf. A collective that finds its buffers inside such memory tells
 * its local peers (allocation, offset, generation) in its first step; they
 * map it lazily and cache the mapping, so a buffer used again costs nothing
 * more. A freed allocation's generation is never matched again: a peer's
 * cached mapping of it is never used for a later allocation, even at the
 * same address. Where a peer may not map it (a different user, ptrace
 * restrictions) or a rank's buffer is not from here, the collective takes
 * the ordinary path; results are the same either way.
 * @param comm   a communicator (for the error message; the memory is not
 *               tied to it and outlives it).
 * @param size   bytes, > 0.
 * @param ptr    receives the address (page aligned).
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG (comm or ptr NULL, size 0),
 *         WEFT_ERR_NO_MEMORY, WEFT_ERR_SYSTEM (the message names the call).
 *         *ptr is NULL after a failure.
 * Blocking: no (no peer). Thread safety: safe.
 */
WEFT_API weft_status_t weft_mem_alloc(weft_comm_t comm, size_t size, void **ptr);

/**
 * Free memory from weft_mem_alloc. It must not be in use by an operation
 * still in flight on any communicator.
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG if @p ptr is NULL or not the
 *         start of a live allocation.
 * Blocking: no. Thread safety: safe.
 */
WEFT_API weft_status_t weft_mem_free(weft_comm_t comm, void *ptr);

/** A buffer registered with weft_mem_register. */
typedef struct weft_mem_reg *weft_mem_handle_t;

/**
 * Register memory the caller already has ([buf, buf + size), from malloc or
 * anywhere) with the transports of @p comm that need registration to move
 * it (RDMA: ofi, verbs), so that their collectives skip registering it on
 * each call. It never makes the memory mappable by peers (only
 * weft_mem_alloc memory is): on shared memory and TCP, which need no
 * registration, it records the region and nothing else. Local, not
 * collective. The buffer must stay allocated until weft_mem_deregister.
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG (comm, buf or handle NULL,
 *         size 0); WEFT_ERR_NO_MEMORY; a transport's error.
 * Blocking: no. Thread safety: as the communicator's other calls.
 */
WEFT_API weft_status_t weft_mem_register(weft_comm_t comm, void *buf, size_t size,
					 weft_mem_handle_t *handle);

/**
 * Undo weft_mem_register; @p handle is invalid afterwards.
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG if comm is NULL or @p handle is
 *         not a live registration of @p comm.
 */
WEFT_API weft_status_t weft_mem_deregister(weft_comm_t comm, weft_mem_handle_t handle);

#ifdef __cplusplus
}
#endif

/* Failures: revoke, shrink, the ranks known dead, the stragglers. */
#include "weft_fault.h"

#endif /* WEFT_H */
