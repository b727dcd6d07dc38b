/*
 * allreduce_shm.c — AllReduce of ranks that all share this host, through
 * the shared-memory module (shmem.h): every rank reduces its share of the
 * vector straight from every rank's input and writes the result straight
 * into every rank's output. Flags in shared memory, no messages.
 *
 * Steps (call number m, the module's own count, the same on every rank):
 *  0. Up to SHMEM_SMALL_MAX bytes: the latency path (allreduce_shm_small.c),
 *     which a blocking call polls alone (shm_alone).
 *  1. Describe: each rank looks its sendbuf and recvbuf up with the
 *     transport's reg op (a weft_mem_alloc buffer gives a key; any other
 *     is "not mappable"), writes both descriptors to its control lines and
 *     publishes desc_seq = m. Waiting for every peer's desc_seq is the
 *     entry barrier: from then on every peer's buffers hold its inputs.
 *  2. Decide, alike on every rank (every rank sees the same descriptors):
 *     if every buffer is mappable, every rank maps every peer buffer
 *     (cached by the transport, by generation) and the vector is one
 *     round. Otherwise, by default (WEFT_SHMEM_STAGED=0), the call is handed
 *     to the tuner's next choice (task->fallback_ops: ring or tree), which
 *     moves plain buffers as well as anything here does (docs/benchmarks.md, "What was measured");
 *     with WEFT_SHMEM_STAGED=1 it goes in rounds of the staging slot's size.
 *  3. Per round k (a slice of the vector, slot half k % 2):
 *     a. a rank whose input is not mappable copies its slice into its
 *        staging input slot (after every rank reduced round k - 2 from it)
 *        and publishes in_ready;
 *     b. every rank reduces its share of the slice (n shares as even as
 *        elements allow) chunk by chunk through a 16 KiB buffer that stays
 *        in L1, reading each rank's input (mapped buffer or staging slot,
 *        after its in_ready) in rank order, so every rank's result has the
 *        same bits; it writes the chunk to every rank's output (mapped
 *        buffer, or staging output slot once its owner copied round k - 2
 *        out) and publishes reduced;
 *     c. a rank whose output is not mappable waits for every rank's
 *        reduced and copies the slice out of its staging output slot.
 *  4. Done: publish done = m and wait for every peer's (nobody may leave,
 *     and reuse its buffers, while a peer still reads or writes them).
 * In place is the same: a share is read and written by its reducer only.
 * WEFT_AVG divides each chunk before it is written out.
 *
 * Cost (S bytes, n ranks, all mapped): each rank reads S (n inputs of S/n)
 * and writes S (n outputs of S/n) once: one copy's worth of memory traffic,
 * plus 3 flag exchanges (alpha each). Staged ranks add a copy in and a copy
 * out of S, through slots that stay in the cache, and a flag per round.
 */
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "algorithms/patterns/ring.h"
#include "algorithms/shmem/shmem.h"
#include "core/comm.h"
#include "core/fail.h"
#include "core/p2p.h"
#include "reduce/reduce.h"
#include "reduce/stream.h"

#define SHMEM_MAX_RANKS 64
/* The tuner chooses this algorithm from here up. np=2, medians of 4
 * interleaved pairs against the tuner's choice without it (the ring):
 * weft_mem_alloc buffers 18.0 against 5.2 GB/s at 64 KiB, 22.9 against
 * 6.8 at 128 KiB; plain buffers, which pay the descriptor round and go on
 * to the ring, 4.9 against 5.0 at 64 KiB (at 16 KiB, 3.6 against 4.0:
 * too dear there). */
#define SHMEM_DIRECT_MIN (64u << 10)
/* Bytes a progress call reduces before it returns (keeps a progress
 * thread's lock hold short and lets timeouts be checked). */
#define SHMEM_BUDGET (2u << 20)

enum ar_phase {
	PH_SMALL = 0,
	PH_DESC,
	PH_COPYIN,
	PH_REDUCE_WAIT,
	PH_REDUCE,
	PH_COPYOUT,
	PH_DONE,
	PH_FINISHED
};

struct ar_view {
	unsigned char *in, *out; /* mapped buffer bases, offset applied; NULL: staged */
	void *in_map, *out_map;	 /* what weft_p2p_map returned (to unmap) */
	size_t in_len, out_len;
};

struct allreduce_shm {
	enum ar_phase phase;
	uint64_t call;
	weft_reduce_fn reduce;
	size_t bytes;	    /* S */
	size_t round_bytes; /* slice of one round */
	uint64_t round, nrounds;
	size_t done_bytes; /* of this rank's share of the round */
	int wait_at;	   /* next peer a wait loop looks at */
	bool in_waited;	   /* step 3b: the staged inputs are there */
	bool stream;	   /* outputs by streaming stores (nobody reads them in this call) */
	struct ar_view v[SHMEM_MAX_RANKS];
};

_Static_assert(sizeof(struct allreduce_shm) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct allreduce_shm *state(const struct weft_task *task)
{
	return (struct allreduce_shm *)(void *)task->priv;
}

static bool shm_supports(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	return comm->shmem && comm->nranks <= SHMEM_MAX_RANKS;
}

/* Step 1: our buffers' descriptors. */
static void describe(struct weft_task *task, struct shmem_desc *d)
{
	struct weft_comm *comm = task->comm;
	const struct weft_coll_args *a = &task->args;
	size_t bytes = a->count * a->esize;
	int peer = (comm->rank + 1) % comm->nranks;
	const void *bufs[2] = {a->sendbuf, a->recvbuf};
	struct shmem_buf_desc *out[2] = {&d->send, &d->recv};
	for (int i = 0; i < 2; i++) {
		struct weft_mr *mr;
		memset(out[i], 0, sizeof(*out[i]));
		if (weft_p2p_reg(comm, peer, (void *)bufs[i], bytes, &mr, &out[i]->key) !=
		    WEFT_SUCCESS) {
			out[i]->key.len = 0;
			continue;
		}
		weft_p2p_dereg(comm, peer, mr);
		out[i]->off = (uint64_t)((uintptr_t)bufs[i] - (uintptr_t)out[i]->key.addr);
	}
}

static weft_status_t shm_post(struct weft_task *task)
{
	struct allreduce_shm *ar = state(task);
	struct weft_shmem *sh = task->comm->shmem;
	const struct weft_coll_args *a = &task->args;
	if (!shm_supports(task->comm, a)) {
		/* Forced (WEFT_ALGO) where it cannot run, which every rank sees
		 * alike: the ring runs instead. */
		task->ops = &weft_allreduce_ring.task;
		task->algo_name = weft_allreduce_ring.name;
		return task->ops->post(task);
	}
	task->waiting_for = -1;
	ar->call = ++sh->calls;
	ar->bytes = a->count * a->esize;
	if (ar->bytes <= SHMEM_SMALL_MAX) { /* the latency path needs nothing more */
		ar->phase = PH_SMALL;
		weft_shmem_small_publish(sh, a, ar->call, (uint32_t)task->seq);
		weft_shmem_ring(task->comm);
		return WEFT_SUCCESS;
	}
	memset(ar, 0, offsetof(struct allreduce_shm, v));
	ar->call = sh->calls;
	ar->bytes = a->count * a->esize;
	ar->reduce = weft_reduce_kernel(a->dtype, a->op);
	/* In place each output line is one this rank has just read (its own
	 * input, or a peer's it reduced): a plain store finds it in the cache.
	 * np=2, 64 MiB in place: 9.5-12 GB/s plain, 7.0-7.6 streamed. */
	ar->stream = !a->in_place && weft_engine_stream(task, ar->bytes);
	memset(ar->v, 0, sizeof(ar->v));
	struct shmem_ctl *me = shmem_ctl_of(sh, sh->rank);
	describe(task, &me->desc);
	me->desc.word = (uint32_t)task->seq;
	atomic_store_explicit(&me->desc_seq, ar->call, memory_order_release);
	weft_shmem_ring(task->comm);
	ar->phase = PH_DESC;
	return WEFT_SUCCESS;
}

/* Map one peer buffer (or take ours); NULL view entry: staged. */
static weft_status_t view_side(struct weft_task *task, int p, const struct shmem_buf_desc *d,
			       const void *mine, unsigned char **base, void **map, size_t *len)
{
	*base = NULL;
	*map = NULL;
	if (d->key.len == 0)
		return WEFT_SUCCESS;
	if (p == task->comm->rank) {
		*base = (unsigned char *)mine;
		return WEFT_SUCCESS;
	}
	weft_status_t st = weft_p2p_map(task->comm, p, &d->key, map);
	if (st != WEFT_SUCCESS)
		return st == WEFT_ERR_NOT_SUPPORTED
			   ? weft_comm_fail(task->comm, WEFT_ERR_REMOTE,
					    "allreduce shm: rank %d's buffer cannot be mapped here",
					    p)
			   : st;
	*len = d->key.len;
	*base = (unsigned char *)*map + d->off;
	return WEFT_SUCCESS;
}

/* Did every peer call what this rank called? (Flags carry no tags.) */
static bool same_call(struct weft_task *task, weft_status_t *st)
{
	struct weft_shmem *sh = task->comm->shmem;
	for (int p = 0; p < sh->n; p++)
		if (weft_shmem_mismatch(task->comm, p, (uint32_t)shmem_ctl_of(sh, p)->desc.word,
					(uint32_t)task->seq, st))
			return false;
	return true;
}

/* Can every rank's buffers be mapped (by their descriptors)? */
static bool all_mappable(const struct weft_shmem *sh)
{
	for (int p = 0; p < sh->n; p++) {
		const struct shmem_desc *d = &shmem_ctl_of(sh, p)->desc;
		if (!d->send.key.len || !d->recv.key.len)
			return false;
	}
	return true;
}

/* Step 2, when not every buffer can be mapped and staging is off
 * (WEFT_SHMEM_STAGED=0): hand the call to the tuner's next choice, which
 * every rank makes alike. Nothing is mapped yet, so nothing is left to
 * undo; no rank can reuse its descriptor before every rank has read it,
 * since no rank finishes the handed-off AllReduce without every other
 * rank's contribution. */
static weft_status_t hand_off(struct weft_task *task)
{
	const struct weft_task_ops *ops =
	    task->fallback_ops ? task->fallback_ops : &weft_allreduce_ring.task;
	task->ops = ops;
	task->algo_name = task->fallback_ops ? task->fallback_name : weft_allreduce_ring.name;
	weft_status_t st = ops->post(task);
	return st == WEFT_SUCCESS ? ops->progress(task) : st;
}

/* Step 2: every peer's descriptors are there: map, and decide the rounds. */
static weft_status_t build_views(struct weft_task *task)
{
	struct allreduce_shm *ar = state(task);
	struct weft_shmem *sh = task->comm->shmem;
	bool all = true;
	for (int p = 0; p < sh->n; p++) {
		const struct shmem_desc *d = &shmem_ctl_of(sh, p)->desc;
		struct ar_view *v = &ar->v[p];
		weft_status_t st = view_side(task, p, &d->send, task->args.sendbuf, &v->in,
					     &v->in_map, &v->in_len);
		if (st == WEFT_SUCCESS)
			st = view_side(task, p, &d->recv, task->args.recvbuf, &v->out, &v->out_map,
				       &v->out_len);
		if (st != WEFT_SUCCESS)
			return st;
		all = all && v->in && v->out;
	}
	size_t esize = task->args.esize;
	ar->round_bytes = all ? ar->bytes : sh->stage_bytes / esize * esize;
	ar->nrounds = (ar->bytes + ar->round_bytes - 1) / ar->round_bytes;
	return WEFT_SUCCESS;
}

/* Wait until every rank's @p which counter is at least @p want (ranks
 * whose flag matters only: @p filter NULL for all). */
static bool wait_all(struct weft_task *task, size_t which, uint64_t want,
		     bool (*filter)(const struct allreduce_shm *ar, int p), weft_status_t *st)
{
	struct allreduce_shm *ar = state(task);
	struct weft_shmem *sh = task->comm->shmem;
	for (; ar->wait_at < sh->n; ar->wait_at++) {
		int p = ar->wait_at;
		if (p == sh->rank || (filter && !filter(ar, p)))
			continue;
		_Atomic uint64_t *flag =
		    (_Atomic uint64_t *)(void *)((char *)shmem_ctl_of(sh, p) + which);
		if (!weft_shmem_reached(task->comm, p, flag, want, st)) {
			task->waiting_for = p;
			return false;
		}
		weft_task_touch(task);
	}
	ar->wait_at = 0;
	task->waiting_for = -1;
	return true;
}

static bool in_staged(const struct allreduce_shm *ar, int p)
{
	return !ar->v[p].in;
}

static bool out_staged(const struct allreduce_shm *ar, int p)
{
	return !ar->v[p].out;
}

static size_t round_lo(const struct allreduce_shm *ar)
{
	return (size_t)ar->round * ar->round_bytes;
}

static size_t round_len(const struct allreduce_shm *ar)
{
	size_t lo = round_lo(ar);
	return ar->bytes - lo < ar->round_bytes ? ar->bytes - lo : ar->round_bytes;
}

static const unsigned char *input_of(const struct weft_task *task, int p)
{
	const struct allreduce_shm *ar = state(task);
	if (ar->v[p].in)
		return ar->v[p].in + round_lo(ar);
	return shmem_stage_of(task->comm->shmem, p, false, (unsigned)(ar->round & 1));
}

static unsigned char *output_of(const struct weft_task *task, int p)
{
	const struct allreduce_shm *ar = state(task);
	if (ar->v[p].out)
		return ar->v[p].out + round_lo(ar);
	return shmem_stage_of(task->comm->shmem, p, true, (unsigned)(ar->round & 1));
}

/* Step 3b: reduce [from, from + len) of the round slice into every output. */
static void reduce_chunk(struct weft_task *task, size_t from, size_t len)
{
	struct allreduce_shm *ar = state(task);
	struct weft_shmem *sh = task->comm->shmem;
	const struct weft_coll_args *a = &task->args;
	size_t count = len / a->esize;
	unsigned char *tmp = sh->tmp;
	ar->reduce(tmp, input_of(task, 0) + from, input_of(task, 1) + from, count);
	for (int p = 2; p < sh->n; p++)
		ar->reduce(tmp, tmp, input_of(task, p) + from, count);
	if (a->op == WEFT_AVG)
		weft_reduce_scale(tmp, count, a->dtype, sh->n);
	/* A mapped output is read only after the call; a staging slot is read
	 * at once by its owner, so it stays in the cache. */
	for (int p = 0; p < sh->n; p++)
		if (ar->stream && ar->v[p].out)
			weft_copy_stream(output_of(task, p) + from, tmp, len);
		else
			memcpy(output_of(task, p) + from, tmp, len);
}

/* This rank's share of the round slice, in bytes. */
static void my_share(const struct weft_task *task, size_t *off, size_t *len)
{
	const struct allreduce_shm *ar = state(task);
	const struct weft_shmem *sh = task->comm->shmem;
	size_t esize = task->args.esize, count = round_len(ar) / esize;
	*off = weft_seg_offset(count, sh->n, sh->rank) * esize;
	*len = weft_seg_count(count, sh->n, sh->rank) * esize;
}

/* Step 3b, within the budget; true when the share is done. */
static bool reduce_share(struct weft_task *task)
{
	struct allreduce_shm *ar = state(task);
	struct weft_shmem *sh = task->comm->shmem;
	size_t off, len, budget = SHMEM_BUDGET;
	my_share(task, &off, &len);
	size_t step = sh->tmp_bytes / task->args.esize * task->args.esize;
	while (ar->done_bytes < len && budget > 0) {
		size_t n = len - ar->done_bytes < step ? len - ar->done_bytes : step;
		reduce_chunk(task, off + ar->done_bytes, n);
		ar->done_bytes += n;
		budget = budget > n ? budget - n : 0;
	}
	weft_task_touch(task);
	return ar->done_bytes == len;
}

static void publish(struct weft_comm *comm, size_t which, uint64_t value)
{
	struct weft_shmem *sh = comm->shmem;
	_Atomic uint64_t *flag =
	    (_Atomic uint64_t *)(void *)((char *)shmem_ctl_of(sh, sh->rank) + which);
	atomic_store_explicit(flag, value, memory_order_release);
	weft_shmem_ring(comm);
}

#define CTL(field) offsetof(struct shmem_ctl, field)

/* Step 3a; true when this rank's input of the round is in place. */
static bool copy_in(struct weft_task *task, weft_status_t *st)
{
	struct allreduce_shm *ar = state(task);
	struct weft_shmem *sh = task->comm->shmem;
	if (!in_staged(ar, sh->rank))
		return true;
	if (ar->round >= 2 &&
	    !wait_all(task, CTL(reduced), shmem_tag(ar->call, ar->round - 2), NULL, st))
		return false;
	memcpy(shmem_stage_of(sh, sh->rank, false, (unsigned)(ar->round & 1)),
	       (const char *)task->args.sendbuf + round_lo(ar), round_len(ar));
	publish(task->comm, CTL(in_ready), shmem_tag(ar->call, ar->round));
	return true;
}

/* Step 3c; true when this rank's output of the round is in place. */
static bool copy_out(struct weft_task *task, weft_status_t *st)
{
	struct allreduce_shm *ar = state(task);
	struct weft_shmem *sh = task->comm->shmem;
	if (!out_staged(ar, sh->rank))
		return true;
	if (!wait_all(task, CTL(reduced), shmem_tag(ar->call, ar->round), NULL, st))
		return false;
	unsigned char *dst = (unsigned char *)task->args.recvbuf + round_lo(ar);
	const unsigned char *src = shmem_stage_of(sh, sh->rank, true, (unsigned)(ar->round & 1));
	if (ar->stream)
		weft_copy_stream(dst, src, round_len(ar));
	else
		memcpy(dst, src, round_len(ar));
	publish(task->comm, CTL(out_done), shmem_tag(ar->call, ar->round));
	return true;
}

/* Step 3b's waits: staged inputs copied in, staged outputs of round k - 2
 * copied out (own included: a rank's own staged slots follow the same
 * rules, and it did both itself already). */
static bool reduce_ready(struct weft_task *task, weft_status_t *st)
{
	struct allreduce_shm *ar = state(task);
	if (!ar->in_waited) {
		if (!wait_all(task, CTL(in_ready), shmem_tag(ar->call, ar->round), in_staged, st))
			return false;
		ar->in_waited = true;
	}
	if (ar->round >= 2 &&
	    !wait_all(task, CTL(out_done), shmem_tag(ar->call, ar->round - 2), out_staged, st))
		return false;
	ar->in_waited = false;
	return true;
}

static weft_status_t run_round_phase(struct weft_task *task, weft_status_t *st);

static weft_status_t shm_progress_large(struct weft_task *task);

static weft_status_t shm_progress(struct weft_task *task)
{
	struct allreduce_shm *ar = state(task);
	if (ar->phase == PH_SMALL) /* polled alone, once per poll: kept short */
		return weft_shmem_small_collect(task->comm, &task->args, ar->call,
						&task->waiting_for);
	return shm_progress_large(task);
}

__attribute__((noinline)) static weft_status_t shm_progress_large(struct weft_task *task)
{
	struct allreduce_shm *ar = state(task);
	struct weft_shmem *sh = task->comm->shmem;
	weft_status_t st = WEFT_INPROGRESS;
	for (;;) {
		switch (ar->phase) {
		case PH_DESC:
			if (!wait_all(task, CTL(desc_seq), ar->call, NULL, &st) ||
			    !same_call(task, &st))
				return st;
			if (!sh->staged && !all_mappable(sh))
				return hand_off(task);
			st = build_views(task);
			if (st != WEFT_SUCCESS)
				return st;
			ar->phase = PH_COPYIN;
			break;
		case PH_DONE:
			if (!wait_all(task, CTL(done), ar->call, NULL, &st))
				return st;
			ar->phase = PH_FINISHED;
			break;
		case PH_FINISHED: return WEFT_SUCCESS;
		default:
			if (run_round_phase(task, &st) != WEFT_SUCCESS)
				return st;
			if (ar->phase == PH_DONE)
				publish(task->comm, CTL(done), ar->call);
			break;
		}
	}
}

/* One phase of a round: WEFT_SUCCESS when it moved on (ar->phase is the
 * next one), else *st says why not (in progress or an error). */
static weft_status_t run_round_phase(struct weft_task *task, weft_status_t *st)
{
	struct allreduce_shm *ar = state(task);
	switch (ar->phase) {
	case PH_COPYIN:
		if (!copy_in(task, st))
			return *st;
		ar->phase = PH_REDUCE_WAIT;
		return WEFT_SUCCESS;
	case PH_REDUCE_WAIT:
		if (!reduce_ready(task, st))
			return *st;
		ar->phase = PH_REDUCE;
		ar->done_bytes = 0;
		return WEFT_SUCCESS;
	case PH_REDUCE:
		if (!reduce_share(task)) {
			*st = WEFT_INPROGRESS;
			return *st;
		}
		publish(task->comm, CTL(reduced), shmem_tag(ar->call, ar->round));
		ar->phase = PH_COPYOUT;
		return WEFT_SUCCESS;
	default: /* PH_COPYOUT */
		if (!copy_out(task, st))
			return *st;
		ar->phase = ++ar->round < ar->nrounds ? PH_COPYIN : PH_DONE;
		return WEFT_SUCCESS;
	}
}

/* The latency path moves nothing but flags and slots in shared memory. */
static bool shm_alone(const struct weft_task *task)
{
	return state(task)->phase == PH_SMALL;
}

static void shm_finalize(struct weft_task *task)
{
	struct allreduce_shm *ar = state(task);
	struct weft_shmem *sh = task->comm->shmem;
	if (ar->phase == PH_SMALL)
		return;
	for (int p = 0; p < sh->n; p++) {
		if (p == sh->rank)
			continue;
		weft_p2p_unmap(task->comm, p, ar->v[p].in_map, ar->v[p].in_len);
		weft_p2p_unmap(task->comm, p, ar->v[p].out_map, ar->v[p].out_len);
	}
}

/* Small (the latency path): one handoff of cache lines, and each rank
 * reads the n - 1 peers' inputs. The handoff is a message's alpha without
 * the message: no task, header or matching, 20-25 % below a FIFO message
 * at 8 bytes here (0.48-0.53 us against rhd's 0.60-0.64 at np=2), so 0.75
 * alpha. Large: each rank reads every input of its share and writes every
 * output of it, S read and S written: one copy of S, which is what beta
 * prices (the transports' bandwidth is a copy's, bytes moved once; the
 * ring's estimate charges its 2 (n-1)/n S the same way), the reductions of
 * (n-1)/n S, and three flag exchanges; buffers not from weft_mem_alloc add
 * staged copies that the slots keep in the cache (the choice cannot depend
 * on them: registration is local). */
static double shm_estimate(const struct weft_comm *comm, const struct weft_links *links,
			   const struct weft_coll_args *args)
{
	struct weft_cost c = links->intra_host;
	int n = comm->nranks;
	double s = (double)args->count * (double)args->esize;
	if (s <= SHMEM_SMALL_MAX)
		return 0.75 * c.alpha + s * (n - 1) * c.beta + s * (n - 1) * c.gamma;
	return 3 * c.alpha + s * c.beta + s * (n - 1) / n * c.gamma;
}

const struct weft_algo weft_allreduce_shm = {
    .id = WEFT_ALGO_SHM,
    .coll = WEFT_COLL_ALLREDUCE,
    .name = "shm",
    .description = "every rank reduces its share straight from the others' buffers in shared "
		   "memory (weft_mem_alloc buffers; others go to the next choice, or staged with "
		   "WEFT_SHMEM_STAGED=1); flags, no messages",
    .estimate = shm_estimate,
    .supports = shm_supports,
    .task = {.post = shm_post,
	     .progress = shm_progress,
	     .finalize = shm_finalize,
	     .alone = shm_alone},
    /* From here up its first step (one flag round, under 1 us) costs
     * plain buffers about 2 % of the call and gives weft_mem_alloc
     * buffers the direct path, 3x faster. */
    .adapts_from = SHMEM_DIRECT_MIN,
};
