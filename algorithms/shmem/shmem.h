/*
 * shmem.h — the intra-host shared-memory module: AllReduce that reads and
 * writes the ranks' buffers in place when they come from weft_mem_alloc,
 * stages them through pre-mapped cache-sized slots when they do not, and
 * a latency path for small AllReduce.
 *
 * Why beside the engine (the one documented exception to "every algorithm
 * is a schedule of transfers on algorithms/engine/"). The engine moves
 * messages; here nothing is a message. Every rank maps every local peer's
 * region (and, per call, its buffers) and the ranks coordinate through
 * counters in those regions: a rank publishes "my inputs of round k are
 * ready", "I reduced my share of round k", "I am done with call m", and
 * its peers poll them. A message through a FIFO would cost a header, a
 * slot copy and a matching step for what is one store here; for 8 bytes
 * the whole call is one cache line written per rank and n - 1 read. The
 * engine's windows, queues and pacing do not apply (nothing crosses a
 * network), so the module keeps the engine's contract only at its edge: it
 * runs as a task (post, progress that never blocks, finalize), with the
 * same timeouts and failure reporting, and the tuner chooses it by the
 * call's shape like any other algorithm (algorithms/shmem/allreduce_shm.c).
 *
 * Regions. At communicator creation (weft_shmem_init, collective), when
 * every rank is on this host and served by the shm transport, each rank
 * allocates one region with weft_mem_alloc's allocator and every rank maps
 * every peer's (the transport's map op, through weft_p2p_map). If any rank
 * cannot, every rank learns it in the same allgather and the module stays
 * off for the communicator: the choice is the same on every rank.
 *
 *   offset 0       struct shmem_ctl: state, and one counter per cache line
 *   SHMEM_SMALL    two latency slots (call parity), each a header line
 *                  {seq, operation word, 48 inline bytes} and SHMEM_SMALL_MAX data bytes
 *   SHMEM_STAGE    staging (WEFT_SHMEM_STAGED=1 only): in[2] and out[2],
 *                  stage bytes each (rounds alternate between the halves)
 *
 * Counters are monotonic over the communicator's life: a call's values
 * are (call number << 24) | (round + 1), so nothing is ever reset and a
 * value from an earlier call never satisfies a wait of a later one. Every
 * rank numbers the module's calls alike (the tuner's choice is the same
 * on every rank and calls run in order).
 */
#ifndef WEFT_SHMEM_H
#define WEFT_SHMEM_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/task.h"
#include "util/mr_key.h"

#define SHMEM_LINE	    64
#define SHMEM_SMALL_MAX	    4096 /* largest AllReduce on the latency path */
#define SHMEM_INLINE	    48	 /* bytes that ride in a latency slot's header line */
#define SHMEM_SMALL	    4096 /* offset of the latency slots */
#define SHMEM_SMALL_SLOT    (SHMEM_LINE + SHMEM_SMALL_MAX)
#define SHMEM_STAGE	    16384	 /* offset of the staging slots */
#define SHMEM_STAGE_DEFAULT (256u << 10) /* bytes per staging slot (WEFT_SHMEM_STAGE) */
#define SHMEM_ROUND_BITS    24

enum shmem_state {
	SHMEM_ALIVE = 0,
	SHMEM_ABORTED, /* its communicator was aborted or failed */
};

/* What a rank tells its peers about one call's buffers. */
struct shmem_buf_desc {
	struct weft_mr_key key; /* key.len 0: not mappable, staged */
	uint64_t off;		/* the buffer's offset in the allocation */
};

struct shmem_desc {
	struct shmem_buf_desc send, recv;
	uint64_t word; /* the call's operation word (core/tag.h): peers check it */
};

struct shmem_ctl {
	alignas(SHMEM_LINE) _Atomic uint64_t desc_seq; /* call number whose desc is set */
	_Atomic int state;			       /* enum shmem_state */
	alignas(SHMEM_LINE) struct shmem_desc desc;
	alignas(SHMEM_LINE) _Atomic uint64_t in_ready; /* staged inputs of a round copied in */
	alignas(SHMEM_LINE) _Atomic uint64_t reduced;  /* share of a round reduced and written */
	alignas(SHMEM_LINE) _Atomic uint64_t out_done; /* staged outputs of a round copied out */
	alignas(SHMEM_LINE) _Atomic uint64_t done;     /* call number finished */
	/* The collective this rank started last, whatever its algorithm:
	 * (communicator call number + 1) << 32 | operation word (core/tag.h);
	 * 0 before the first.
	 * Flags carry no tags, so a rank stalled on a peer compares this with
	 * its own to tell a mismatched call from a slow peer. */
	alignas(SHMEM_LINE) _Atomic uint64_t op;
};

struct shmem_small_hdr {
	_Atomic uint64_t seq;
	uint64_t word; /* the call's operation word (core/tag.h): peers check it */
	unsigned char inl[SHMEM_INLINE];
};

/* The module's state in a communicator. */
struct weft_shmem {
	int n; /* ranks (all local) */
	int rank;
	size_t stage_bytes;
	bool staged; /* WEFT_SHMEM_STAGED: plain buffers through the staging slots */
	size_t region_len;
	void *mine;		/* this rank's region (weft_mem allocation) */
	unsigned char **region; /* [rank]: each rank's region as mapped here (mine for self) */
	int *pid;		/* [rank] */
	uint64_t calls;		/* module calls so far (the next one's number is calls + 1) */
	uint64_t op;		/* what this rank last announced (struct shmem_ctl, op) */
	void *tmp;		/* a reduce chunk, pre-faulted */
	size_t tmp_bytes;
	unsigned polls;			    /* waits since the clock was last read */
	const _Atomic uint64_t *stall_flag; /* the flag a wait is stalled on */
	double stall_since;		    /* when that wait began (0: not timed yet) */
};

static inline struct shmem_ctl *shmem_ctl_of(const struct weft_shmem *sh, int r)
{
	return (struct shmem_ctl *)(void *)sh->region[r];
}

static inline struct shmem_small_hdr *shmem_small_of(const struct weft_shmem *sh, int r,
						     uint64_t call)
{
	return (struct shmem_small_hdr *)(void *)(sh->region[r] + SHMEM_SMALL +
						  (call & 1) * SHMEM_SMALL_SLOT);
}

/* Staging slot @p half (0, 1) of rank @p r: inputs (out = false) or outputs. */
static inline unsigned char *shmem_stage_of(const struct weft_shmem *sh, int r, bool out,
					    unsigned half)
{
	return sh->region[r] + SHMEM_STAGE + ((out ? 2 : 0) + half) * sh->stage_bytes;
}

static inline uint64_t shmem_tag(uint64_t call, uint64_t round)
{
	return (call << SHMEM_ROUND_BITS) | (round + 1);
}

struct weft_comm;

/* Collective, at communicator creation, with the bootstrap open: set up
 * comm->shmem when every rank is local and every rank can map every
 * peer's region; otherwise leave it NULL on every rank. Only a local
 * failure to allocate is an error. */
weft_status_t weft_shmem_init(struct weft_comm *comm);

/* Tell the peers which collective this rank starts: call number @p number
 * of the communicator, operation word @p word (core/tag.h). Every
 * collective is announced (comm->shmem_announce, at weft_task_start, and
 * the latency path), so that a peer waiting in this module's flags sees a
 * call that differs from its own. */
void weft_shmem_announce(struct weft_shmem *sh, uint64_t number, uint32_t word);

/* This rank stored a counter or slot its peers may wait for: wake those
 * that sleep (WEFT_WAIT). Nothing where no local peer ever sleeps. */
void weft_shmem_ring(struct weft_comm *comm);

/* Peer @p r published operation word @p theirs with its part of the call in
 * which this rank passed @p mine: if they differ, fail the communicator as
 * a mismatched message would and return true. */
bool weft_shmem_mismatch(struct weft_comm *comm, int r, uint32_t theirs, uint32_t mine,
			 weft_status_t *st);

/* Poll helper: wait until @p flag >= @p want, without blocking: true when
 * it is; false when not yet (*st WEFT_INPROGRESS) or when peer @p r has
 * died, aborted or started a different call of the same number (*st set,
 * error recorded). */
bool weft_shmem_reached(struct weft_comm *comm, int r, _Atomic uint64_t *flag, uint64_t want,
			weft_status_t *st);

/* The latency path (allreduce_shm_small.c): publish this rank's input to
 * call @p call; then collect, WEFT_INPROGRESS until every peer's
 * contribution is there, then the result. */
void weft_shmem_small_publish(struct weft_shmem *sh, const struct weft_coll_args *a, uint64_t call,
			      uint32_t word);
weft_status_t weft_shmem_small_collect(struct weft_comm *comm, const struct weft_coll_args *a,
				       uint64_t call, int *waiting_for);

#endif
