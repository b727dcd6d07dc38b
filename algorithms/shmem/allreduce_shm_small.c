/*
 * allreduce_shm_small.c — the latency path: AllReduce of at most
 * SHMEM_SMALL_MAX bytes among the ranks of one host, with no message: the
 * two steps of the shm AllReduce's PH_SMALL phase (allreduce_shm.c). A
 * blocking call on an idle communicator polls them alone, with no
 * transport between its polls (struct weft_task_ops.alone, core/progress.c).
 *
 * Steps (module call number m):
 *  1. Each rank writes its input to its latency slot of parity m & 1 —
 *     up to 48 bytes in the slot's header line itself, next to the
 *     sequence word and the call's operation word (core/tag.h) — then
 *     stores seq = m (release).
 *  2. Each rank polls every peer's slot until its seq reaches m (acquire),
 *     then reduces all n slots in rank order (the same bits on every rank)
 *     into its recvbuf; its own input is read from its slot too, so in
 *     place needs no care. A peer whose word differs called something
 *     else: the call fails as a mismatched message would.
 * No closing barrier: a rank can reuse a slot only two calls later, by
 * which time every peer has finished reading it (to finish call m + 1 a
 * rank needs every peer's input of m + 1, which a peer writes only after
 * it finished call m; calls of the large path end with a barrier).
 *
 * Cost: one cache line written and n - 1 read per rank for 8 bytes
 * (alpha: one line handed between cores), S / 64 lines each otherwise.
 */
#include <stdio.h>
#include <string.h>

#include "algorithms/shmem/shmem.h"
#include "core/comm.h"
#include "reduce/reduce.h"

static unsigned char *slot_data(struct shmem_small_hdr *h, size_t bytes)
{
	return bytes <= SHMEM_INLINE ? h->inl : (unsigned char *)(h + 1);
}

void weft_shmem_small_publish(struct weft_shmem *sh, const struct weft_coll_args *a, uint64_t call,
			      uint32_t word)
{
	struct shmem_small_hdr *h = shmem_small_of(sh, sh->rank, call);
	h->word = word;
	size_t bytes = a->count * a->esize;
	if (bytes)
		memcpy(slot_data(h, bytes), a->sendbuf, bytes);
	atomic_store_explicit(&h->seq, call, memory_order_release);
}

weft_status_t weft_shmem_small_collect(struct weft_comm *comm, const struct weft_coll_args *a,
				       uint64_t call, int *waiting_for)
{
	struct weft_shmem *sh = comm->shmem;
	weft_status_t st = WEFT_INPROGRESS;
	for (int p = 0; p < sh->n; p++) {
		if (p == sh->rank)
			continue;
		if (!weft_shmem_reached(comm, p, &shmem_small_of(sh, p, call)->seq, call, &st)) {
			*waiting_for = p;
			return st;
		}
	}
	uint32_t mine = (uint32_t)shmem_small_of(sh, sh->rank, call)->word;
	for (int p = 0; p < sh->n; p++)
		if (weft_shmem_mismatch(comm, p, (uint32_t)shmem_small_of(sh, p, call)->word, mine,
					&st))
			return st;
	*waiting_for = -1;
	size_t bytes = a->count * a->esize;
	if (bytes == 0)
		return WEFT_SUCCESS;
	weft_reduce_fn reduce = weft_reduce_kernel(a->dtype, a->op);
	const unsigned char *in0 = slot_data(shmem_small_of(sh, 0, call), bytes);
	reduce(a->recvbuf, in0, slot_data(shmem_small_of(sh, 1, call), bytes), a->count);
	for (int p = 2; p < sh->n; p++)
		reduce(a->recvbuf, a->recvbuf, slot_data(shmem_small_of(sh, p, call), bytes),
		       a->count);
	if (a->op == WEFT_AVG)
		weft_reduce_scale(a->recvbuf, a->count, a->dtype, sh->n);
	return WEFT_SUCCESS;
}
