/*
 * allreduce_rhd.c — AllReduce by recursive doubling (small messages) or
 * recursive halving then doubling (Rabenseifner, larger messages), for any
 * rank count.
 *
 * Ranks are indexed by their position in the placement ring, so the first
 * steps (distance 1, 2, ...) stay between neighbours, usually on one host.
 * With p = 2^k the largest power of two <= n, the extra positions p..n-1
 * first send their whole input to positions 0..n-p-1, which reduce it into
 * their own (pre step), and get the whole result back at the end (post
 * step); see patterns/rd.h.
 *
 * Recursive doubling (S <= RHD_DOUBLING_MAX): at step s every position
 * v < p exchanges its whole partial result with v ^ 2^s and reduces what
 * arrives. A buffer cannot be sent and received into at once, so partial
 * results alternate between recvbuf and the communicator's scratch buffer
 * (which also bounds this path).
 * Cost: k (alpha + S beta + S gamma), plus 2 alpha + 2 S beta + S gamma
 * when n is not a power of two.
 *
 * Rabenseifner: the vector is cut into p segments. Reduce-scatter by
 * recursive halving: at step s, v sends to v ^ 2^s the half of its current
 * segment range that the partner keeps and reduces the other half from the
 * partner into recvbuf; after k steps v holds one fully reduced segment.
 * Allgather by recursive doubling: the same steps in reverse, exchanging
 * the finished ranges. Sent and received halves never overlap, so in place
 * and out of place need no scratch. WEFT_AVG divides each finished segment
 * once, before the allgather.
 * Cost: 2 k alpha + 2 (p-1)/p S beta + (p-1)/p S gamma, plus the fold.
 */
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "algorithms/patterns/rd.h"
#include "algorithms/patterns/ring.h"
#include "core/comm.h"
#include "reduce/reduce.h"
#include "topo/topo_flow.h"

/* Doubling moves the whole vector k times, halving-doubling 2 (p-1)/p of
 * it in 2k messages: with alpha/beta around 10-40 KB on our links, doubling
 * wins below a few tens of KB. */
#define RHD_DOUBLING_MAX ((size_t)32 << 10)

struct allreduce_rhd {
	struct weft_engine eng;
	weft_reduce_fn reduce;
	int p, k; /* largest power of two <= n, and its log2 */
	int v;	  /* this rank's index (ring position) */
	int fold; /* fold partner's index, -1 if none */
	bool small;
	uint32_t nsteps;
};

WEFT_ENGINE_FIRST(struct allreduce_rhd);
_Static_assert(sizeof(struct allreduce_rhd) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct allreduce_rhd *state(struct weft_task *task)
{
	return (struct allreduce_rhd *)(void *)task->priv;
}

static int rank_of(const struct weft_task *task, int index)
{
	return task->comm->ring[index];
}

static size_t total_bytes(const struct weft_task *task)
{
	return task->args.count * task->args.esize;
}

/* Byte offset of segment @p seg of p. */
static size_t seg_off(const struct weft_task *task, int p, int seg)
{
	return weft_seg_offset(task->args.count, p, seg) * task->args.esize;
}

static void whole(struct weft_xfer *x, int peer, const void *buf, size_t len)
{
	x->peer = peer;
	x->buf = (void *)buf;
	x->bytes = len;
}

/* Doubling: partial result j lives in the communicator's scratch (j even;
 * one collective runs at a time, so it is ours) or in recvbuf (j odd). */
static char *partial(struct weft_task *task, int j)
{
	return j % 2 == 0 ? (char *)task->comm->scratch : (char *)task->args.recvbuf;
}

static void plan_small(struct weft_task *task, int s, struct weft_step *out)
{
	struct allreduce_rhd *r = state(task);
	int j = (r->fold >= 0 ? 1 : 0) + s; /* index of the partial this step makes */
	const char *from = j == 0 ? (const char *)task->args.sendbuf : partial(task, j - 1);
	int peer = rank_of(task, weft_rd_partner(r->v, s));
	whole(&out->send[0], peer, from, total_bytes(task));
	whole(&out->recv[0], peer, partial(task, j), total_bytes(task));
	out->recv[0].reduce = r->reduce;
	out->recv[0].local = from;
}

/* Halving step s (reduce) or, with @p gather, the allgather step for s. */
static void plan_large(struct weft_task *task, int s, bool gather, struct weft_step *out)
{
	struct allreduce_rhd *r = state(task);
	int partner = weft_rd_partner(r->v, s);
	int mlo, mhi, plo, phi;
	weft_rd_halving_range(r->v, r->p, s + 1, &mlo, &mhi);
	weft_rd_halving_range(partner, r->p, s + 1, &plo, &phi);
	size_t mine = seg_off(task, r->p, mlo), mine_len = seg_off(task, r->p, mhi) - mine;
	size_t theirs = seg_off(task, r->p, plo), theirs_len = seg_off(task, r->p, phi) - theirs;
	int peer = rank_of(task, partner);
	char *acc = task->args.recvbuf;
	if (gather) {
		if (mine_len)
			whole(&out->send[0], peer, acc + mine, mine_len);
		if (theirs_len)
			whole(&out->recv[0], peer, acc + theirs, theirs_len);
		return;
	}
	/* The first halving step reads the input; later ones the partials. */
	const char *src = s == 0 && r->fold < 0 ? (const char *)task->args.sendbuf : acc;
	if (theirs_len)
		whole(&out->send[0], peer, src + theirs, theirs_len);
	if (mine_len) {
		whole(&out->recv[0], peer, acc + mine, mine_len);
		out->recv[0].reduce = r->reduce;
		out->recv[0].local = src + mine;
	}
}

/* Steps: 0 the fold-in, then k doubling steps (small) or k halving and k
 * gathering steps (large), then the fold-out; the same numbers on every
 * rank, empty where a rank has nothing to do. */
static uint32_t count_steps(const struct allreduce_rhd *r)
{
	return (uint32_t)(r->small ? r->k : 2 * r->k) + 2;
}

static void plan(struct weft_task *task, uint32_t step, struct weft_step *out)
{
	struct allreduce_rhd *r = state(task);
	uint32_t last = r->nsteps - 1;
	const struct weft_coll_args *a = &task->args;
	if (r->v >= r->p) { /* extra: hand the input over, get the result back */
		if (step == 0)
			whole(&out->send[0], rank_of(task, r->fold), a->sendbuf, total_bytes(task));
		else if (step == last)
			whole(&out->recv[0], rank_of(task, r->fold), a->recvbuf, total_bytes(task));
		return;
	}
	if (step == 0 || step == last) {
		if (r->fold < 0)
			return;
		if (step == 0) {
			char *dst = r->small ? partial(task, 0) : (char *)a->recvbuf;
			whole(&out->recv[0], rank_of(task, r->fold), dst, total_bytes(task));
			out->recv[0].reduce = r->reduce;
			out->recv[0].local = a->sendbuf;
		} else {
			whole(&out->send[0], rank_of(task, r->fold), a->recvbuf, total_bytes(task));
		}
		return;
	}
	int s = (int)step - 1;
	if (r->small)
		plan_small(task, s, out);
	else if (s < r->k)
		plan_large(task, s, false, out);
	else
		plan_large(task, 2 * r->k - 1 - s, true, out);
}

static void step_done(struct weft_task *task, uint32_t step)
{
	struct allreduce_rhd *r = state(task);
	const struct weft_coll_args *a = &task->args;
	if (r->v >= r->p || step != (uint32_t)r->k)
		return;
	if (r->small) { /* the last doubling step: result to recvbuf, averaged */
		int last_j = (r->fold >= 0 ? 1 : 0) + r->k - 1;
		if (last_j % 2 == 0)
			memcpy(a->recvbuf, task->comm->scratch, total_bytes(task));
		if (a->op == WEFT_AVG)
			weft_reduce_scale(a->recvbuf, a->count, a->dtype, task->comm->nranks);
		return;
	}
	if (a->op == WEFT_AVG) { /* the last halving step: average our segment */
		int lo, hi;
		weft_rd_halving_range(r->v, r->p, r->k, &lo, &hi);
		size_t off = weft_seg_offset(a->count, r->p, lo);
		size_t cnt = weft_seg_offset(a->count, r->p, hi) - off;
		weft_reduce_scale((char *)a->recvbuf + off * a->esize, cnt, a->dtype,
				  task->comm->nranks);
	}
}

static bool step_begin(struct weft_task *task, uint32_t step)
{
	struct allreduce_rhd *r = state(task);
	if (step >= r->nsteps)
		return false;
	struct weft_step st;
	weft_step_clear(&st);
	plan(task, step, &st);
	weft_engine_add_step(&r->eng, step, &st);
	return true;
}

static const struct weft_engine_ops schedule = {
    .phase_begin = step_begin,
    .phase_done = step_done,
};

/* The same answer on every rank: scratch_bytes follows the chunk size,
 * which the ranks agree on at init. */
static bool use_doubling(const struct weft_comm *comm, size_t bytes)
{
	return bytes <= RHD_DOUBLING_MAX && bytes <= comm->scratch_bytes;
}

static weft_status_t rhd_post(struct weft_task *task)
{
	struct allreduce_rhd *r = state(task);
	const struct weft_coll_args *a = &task->args;
	int n = task->comm->nranks;
	weft_engine_init(&r->eng, &schedule);
	r->nsteps = 0;
	if (n == 1) {
		if (!a->in_place)
			memcpy(a->recvbuf, a->sendbuf, total_bytes(task));
		weft_engine_start(&r->eng, task);
		return WEFT_SUCCESS;
	}
	r->reduce = weft_reduce_kernel(a->dtype, a->op);
	r->p = weft_rd_pow2(n);
	r->k = weft_rd_nsteps(n);
	r->v = task->comm->ring_pos;
	r->fold = weft_rd_fold_peer(r->v, n);
	r->small = use_doubling(task->comm, total_bytes(task));
	r->nsteps = count_steps(r);
	weft_engine_start(&r->eng, task);
	return WEFT_SUCCESS;
}

static double rhd_estimate(const struct weft_comm *comm, const struct weft_links *links,
			   const struct weft_coll_args *args)
{
	int n = comm->nranks;
	if (n == 1)
		return 0;
	struct weft_cost c = links->worst;
	double S = (double)args->count * (double)args->esize;
	double k = weft_rd_nsteps(n), p = weft_rd_pow2(n);
	double t;
	if (use_doubling(comm, args->count * args->esize))
		t = k * (c.alpha + S * c.beta + S * c.gamma);
	else
		t = 2 * k * c.alpha + 2 * (p - 1) / p * S * c.beta + (p - 1) / p * S * c.gamma;
	if (p != n)
		t += 2 * (c.alpha + S * c.beta) + S * c.gamma;
	return t;
}

/* Positions p..n-1 hand their whole vector to v - p and get the result
 * back. Doubling: every step each position sends the whole vector to its
 * partner. Halving then doubling: at step s each position sends its
 * partner S / 2^(s+1) (segments are equal to within an element) on the
 * way down and as much on the way back. */
static void rhd_flow(const struct weft_comm *comm, const struct weft_coll_args *args,
		     struct weft_topo_flow *flow)
{
	int n = comm->nranks, p = weft_rd_pow2(n), k = weft_rd_nsteps(n);
	const int *at = comm->ring;
	double S = (double)args->count * (double)args->esize;
	bool small = use_doubling(comm, args->count * args->esize);
	for (int v = p; v < n; v++) {
		weft_topo_flow_add(flow, at[v], at[v - p], S);
		weft_topo_flow_add(flow, at[v - p], at[v], S);
	}
	for (int s = 0; s < k; s++) {
		double bytes = small ? S : 2 * S / (double)(2 << s);
		for (int v = 0; v < p; v++)
			weft_topo_flow_add(flow, at[v], at[weft_rd_partner(v, s)], bytes);
	}
}

const struct weft_algo weft_allreduce_rhd = {
    .id = WEFT_ALGO_RHD,
    .coll = WEFT_COLL_ALLREDUCE,
    .name = "rhd",
    .description = "recursive doubling for small messages, recursive halving then doubling "
		   "(Rabenseifner) for large; any rank count by folding the extra ranks",
    .estimate = rhd_estimate,
    .flow = rhd_flow,
    .task = {.post = rhd_post, .progress = weft_engine_task_progress},
};
