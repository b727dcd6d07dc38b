/*
 * allreduce_rail.c — hierarchical AllReduce in which every local rank
 * carries its share of the inter-host traffic ("rails"), the stages
 * pipelined so that the hosts' shared-memory work overlaps the network.
 *
 * Every host has m ranks (the same m everywhere: that is what makes the
 * rails line up); a host's ranks are numbered j = 0..m-1 in placement
 * order from its leader, the hosts h = 0..H-1 in placement order (a leaf's
 * hosts together). The vector is cut into m slices, slice i into B blocks
 * of about the pipelining chunk. Rank j owns slice o = (j + 1) mod m.
 *
 *  A. Reduce-scatter inside the host, a ring over the m local ranks, block
 *     by block: after m - 1 steps rank j holds the host's sum of its
 *     slice's block b.
 *  B. AllReduce of that block among the H ranks with the same j (its rail):
 *     recursive halving then doubling where H is a power of two, the hosts
 *     paired in placement order, so the large first exchanges stay under a
 *     leaf and only S/(2m)... of a quarter cross the spine; else a ring.
 *  C. AllGather inside the host, a ring, block by block, as each block
 *     comes back from B.
 * One phase of four queues: A and C on the two local ones (A's items
 * first), B on the two network ones, each item ready as soon as the item
 * it depends on arrived, so block b's network exchange runs while block
 * b + 1 is still being reduced over shared memory, and C follows B. With
 * m = 1 it is pipelined recursive halving-doubling among the hosts.
 *
 * Against the leader scheme (allreduce_hier.c): the host's network bytes
 * are the same, 2 (H-1)/H x S, but they leave from m ranks and m
 * connection sets instead of one, each with 1/m of the reduction work, and
 * the shared-memory stages (2 (m-1)/m x S per rank instead of S up and S
 * down a chain) overlap the network instead of running before and after
 * it. Against recursive halving-doubling over all ranks (allreduce_rhd.c),
 * which moves the same bytes over the same links in placement order: the
 * steps are pipelined across blocks, so the spine is busy while the host
 * and the leaf work.
 *
 * Cost (S bytes, B blocks, k = log2 H): the network stage
 *   2 k B alpha_net + 2 (H-1)/H S beta_net          (m rails share a NIC)
 * plus the first block's stage A and the last block's stage C,
 *   2 (m-1) (alpha_host + S/(m B) beta_host),
 * plus the reductions, ((m-1)/m + (H-1)/(H m)) S gamma.
 */
#include <stdlib.h>
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "algorithms/patterns/rd.h"
#include "algorithms/patterns/ring.h"
#include "core/comm.h"
#include "core/fail.h"
#include "reduce/reduce.h"
#include "topo/topo_flow.h"

#define RAIL_MAX_STEPS 24 /* log2 of the largest host count with halving-doubling */
#define TAG_NET	       0x40000000u

enum { Q_IN_RECV = 0, Q_IN_SEND, Q_NET_RECV, Q_NET_SEND };

struct rail_layout {
	int m, nh;		     /* ranks per host, hosts */
	int j, hp;		     /* this rank's index on its host, its host's position */
	int prev, next;		     /* the local ring: ranks j - 1, j + 1 of this host */
	int k;			     /* log2 nh when a power of two (halving-doubling), else -1 */
	int net_prev, net_next;	     /* ring: the rail's neighbours */
	int partner[RAIL_MAX_STEPS]; /* halving-doubling: the rail's rank at hp ^ 2^s */
};

struct allreduce_rail {
	struct weft_engine eng;
	struct rail_layout lay;
	weft_reduce_fn reduce;
	size_t block_elems; /* a block of a slice */
	uint32_t nblocks;   /* B, the same for every slice */
	uint32_t steps;	    /* network items per block */
};

WEFT_ENGINE_FIRST(struct allreduce_rail);
_Static_assert(sizeof(struct allreduce_rail) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct allreduce_rail *state(const struct weft_task *task)
{
	return (struct allreduce_rail *)(void *)task->priv;
}

/* ---- the layout ---- */

/* Every host has as many ranks as this one: the rails line up. */
static bool equal_hosts(const struct weft_comm *comm)
{
	uint32_t m = comm->cards[0].local_count;
	for (int r = 1; r < comm->nranks; r++)
		if (comm->cards[r].local_count != m)
			return false;
	return true;
}

/* Chosen where there are hosts to join; forced, it also runs on one host
 * (the local stages alone: a ring). */
static bool rail_supports(const struct weft_comm *comm, const struct weft_coll_args *args)
{
	return comm->graph.nhosts > 1 && equal_hosts(comm);
}

/* Per host (graph numbering): its position in placement order, its ranks
 * seen so far, and the index of its leader among them. */
struct rail_scan {
	int *pos, *count, *lead, *want;
};

/* Pass 1 over the placement ring: host positions, ranks per host, leaders. */
static void scan_hosts(const struct weft_comm *comm, struct rail_scan *sc, int *my_idx)
{
	const struct weft_topo_graph *g = &comm->graph;
	int npos = 0;
	for (int h = 0; h < g->nhosts; h++)
		sc->pos[h] = sc->want[h] = -1;
	for (int p = 0; p < comm->nranks; p++) {
		int r = comm->ring[p], h = g->host_of[r];
		if (sc->pos[h] < 0)
			sc->pos[h] = npos++;
		if (r == g->host_leader[h])
			sc->lead[h] = sc->count[h];
		if (r == comm->rank)
			*my_idx = sc->count[h];
		sc->count[h]++;
	}
}

/* Pass 2: the rank with index @p j from its leader on every host marked in
 * want (set to the host's position), into rank_at[position]. */
static void find_rails(const struct weft_comm *comm, struct rail_scan *sc, int j, int *rank_at)
{
	const struct weft_topo_graph *g = &comm->graph;
	for (int h = 0; h < g->nhosts; h++)
		sc->count[h] = 0;
	for (int p = 0; p < comm->nranks; p++) {
		int r = comm->ring[p], h = g->host_of[r];
		int m = comm->cards[r].local_count ? (int)comm->cards[r].local_count : 1;
		if (sc->want[h] >= 0 && sc->count[h] == (sc->lead[h] + j) % m)
			rank_at[sc->want[h]] = r;
		sc->count[h]++;
	}
}

/* The host positions this rank's stages talk to: its own (local ring),
 * its rail neighbours or partners. */
static void mark_wanted(struct rail_layout *l, struct rail_scan *sc, const int *host_at)
{
	sc->want[host_at[l->hp]] = l->hp;
	if (l->k < 0) {
		int a = (l->hp + l->nh - 1) % l->nh, b = (l->hp + 1) % l->nh;
		sc->want[host_at[a]] = a;
		sc->want[host_at[b]] = b;
		return;
	}
	for (int s = 0; s < l->k; s++)
		sc->want[host_at[l->hp ^ (1 << s)]] = l->hp ^ (1 << s);
}

static weft_status_t rail_layout(const struct weft_comm *comm, struct rail_layout *l)
{
	const struct weft_topo_graph *g = &comm->graph;
	int nh = g->nhosts, me_host = g->host_of[comm->rank], my_idx = 0;
	int *mem = calloc(6 * (size_t)nh, sizeof(int));
	if (!mem)
		return WEFT_ERR_NO_MEMORY;
	struct rail_scan sc = {mem, mem + nh, mem + 2 * nh, mem + 3 * nh};
	int *host_at = mem + 4 * nh, *rank_at = mem + 5 * nh;
	scan_hosts(comm, &sc, &my_idx);
	for (int h = 0; h < nh; h++)
		host_at[sc.pos[h]] = h;
	*l = (struct rail_layout){.m = sc.count[me_host], .nh = nh, .hp = sc.pos[me_host]};
	l->j = (my_idx - sc.lead[me_host] + l->m) % l->m;
	int p2 = weft_rd_pow2(nh);
	l->k = p2 == nh && weft_rd_nsteps(nh) <= RAIL_MAX_STEPS ? weft_rd_nsteps(nh) : -1;
	mark_wanted(l, &sc, host_at);
	find_rails(comm, &sc, l->j, rank_at);
	if (l->k < 0) {
		l->net_prev = rank_at[(l->hp + nh - 1) % nh];
		l->net_next = rank_at[(l->hp + 1) % nh];
	}
	for (int s = 0; s < l->k; s++)
		l->partner[s] = rank_at[l->hp ^ (1 << s)];
	/* The local ring: ranks j - 1 and j + 1 of this host. */
	for (int h = 0; h < nh; h++)
		sc.want[h] = -1;
	int *local = rank_at; /* reused: positions 0, 1 */
	sc.want[me_host] = 0;
	find_rails(comm, &sc, (l->j + l->m - 1) % l->m, local);
	l->prev = local[0];
	find_rails(comm, &sc, (l->j + 1) % l->m, local);
	l->next = local[0];
	free(mem);
	return WEFT_SUCCESS;
}

/* ---- spans ---- */

/* Bytes [*off, *off + *len) of block @p b of slice @p slice. */
static void block_span(const struct weft_task *task, int slice, uint32_t b, size_t *off,
		       size_t *len)
{
	const struct allreduce_rail *a = state(task);
	size_t count = task->args.count;
	int m = a->lay.m;
	weft_engine_chunk_span(task, weft_seg_offset(count, m, slice),
			       weft_seg_count(count, m, slice), a->block_elems, b, off, len);
}

static int owned(const struct rail_layout *l)
{
	return (l->j + 1) % l->m;
}

/* Sub-segments [lo, hi) of H of a block of @p len bytes, in bytes. */
static void sub_span(const struct weft_task *task, size_t len, int nh, int lo, int hi, size_t *off,
		     size_t *bytes)
{
	size_t esize = task->args.esize, elems = len / esize;
	*off = weft_seg_offset(elems, nh, lo) * esize;
	*bytes = weft_seg_offset(elems, nh, hi) * esize - *off;
}

/* ---- A and C: the local ring ---- */

static void local_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	const struct allreduce_rail *a = state(task);
	const struct rail_layout *l = &a->lay;
	uint32_t per = (uint32_t)l->m - 1, stage_a = a->nblocks * per;
	bool gather = k >= stage_a, send = q == Q_IN_SEND;
	uint32_t kk = gather ? k - stage_a : k, b = kk / per, s = kk % per;
	int base = gather ? owned(l) : l->j;
	int slice =
	    (int)(((uint32_t)base + (uint32_t)l->m * 2 - s - (send ? 0 : 1)) % (uint32_t)l->m);
	size_t off, len;
	block_span(task, slice, b, &off, &len);
	const char *in = task->args.sendbuf;
	char *acc = task->args.recvbuf;
	out->buf = (!gather && send && s == 0 ? (char *)in : acc) + off;
	out->bytes = len;
	if (!gather && !send) {
		out->reduce = a->reduce;
		out->local = in + off;
	}
}

/* A send goes once the block it forwards has arrived; C's first step once
 * the block came back from the network. */
static bool local_ready(const struct weft_task *task, int q, uint32_t k)
{
	const struct allreduce_rail *a = state(task);
	uint32_t per = (uint32_t)a->lay.m - 1, stage_a = a->nblocks * per;
	uint32_t kk = k >= stage_a ? k - stage_a : k, s = kk % per, b = kk / per;
	if (s > 0)
		return weft_engine_done(&a->eng, Q_IN_RECV) >= k;
	if (k < stage_a)
		return true;
	if (a->steps == 0) /* one host: stage A's last step leaves the block whole */
		return weft_engine_done(&a->eng, Q_IN_RECV) >= (b + 1) * per;
	return weft_engine_done(&a->eng, Q_NET_RECV) >= (b + 1) * a->steps;
}

/* WEFT_AVG on one host (no network stage): stage A's last step leaves the
 * owned block with the full sum: divide it once. */
static void local_recv_done(struct weft_task *task, int q, uint32_t k)
{
	const struct allreduce_rail *a = state(task);
	uint32_t per = (uint32_t)a->lay.m - 1;
	if (task->args.op != WEFT_AVG || a->steps != 0 || k >= a->nblocks * per ||
	    k % per != per - 1)
		return;
	struct weft_xfer x = {0};
	local_item(task, Q_IN_RECV, k, &x);
	weft_reduce_scale(x.buf, x.bytes / task->args.esize, task->args.dtype, task->comm->nranks);
}

/* ---- B: the rail ---- */

/* Network item t of a block: what this rank sends or receives, which
 * sub-segments, to or from whom, and whether it reduces. */
static void net_plan(const struct rail_layout *l, uint32_t t, bool send, int *peer, int *lo,
		     int *hi, bool *reduce)
{
	int nh = l->nh;
	if (l->k >= 0) { /* halving steps 0..k-1, then doubling k-1..0 */
		bool halving = (int)t < l->k;
		int s = halving ? (int)t : 2 * l->k - 1 - (int)t;
		int partner = l->hp ^ (1 << s);
		*peer = l->partner[s];
		/* Halving: send the partner's half, keep ours; doubling: the reverse. */
		weft_rd_halving_range(send == halving ? partner : l->hp, nh, s + 1, lo, hi);
		*reduce = halving && !send;
		return;
	}
	bool rs = (int)t < nh - 1;
	int s = rs ? (int)t : (int)t - (nh - 1);
	int seg = rs ? l->hp - s - (send ? 0 : 1) : l->hp + 1 - s - (send ? 0 : 1);
	*lo = ((seg % nh) + nh) % nh;
	*hi = *lo + 1;
	*peer = send ? l->net_next : l->net_prev;
	*reduce = rs && !send;
}

static void net_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	const struct allreduce_rail *a = state(task);
	const struct rail_layout *l = &a->lay;
	uint32_t b = k / a->steps, t = k % a->steps;
	bool send = q == Q_NET_SEND, reduce;
	int lo, hi;
	net_plan(l, t, send, &out->peer, &lo, &hi, &reduce);
	size_t boff, blen, off, len;
	block_span(task, owned(l), b, &boff, &blen);
	sub_span(task, blen, l->nh, lo, hi, &off, &len);
	/* One rank a host: the input is read where it is (stage A left
	 * nothing in recvbuf): the first send, and every reduce that first
	 * touches its part (halving's first step; each of the ring's). */
	bool input = l->m == 1 && (t == 0 || (reduce && l->k < 0));
	const char *in = input ? task->args.sendbuf : task->args.recvbuf;
	out->buf = (send ? (char *)in : (char *)task->args.recvbuf) + boff + off;
	out->bytes = len;
	if (reduce) {
		out->reduce = a->reduce;
		out->local = in + boff + off;
	}
}

/* A block's first network step goes once stage A finished it, the
 * others once the step before arrived: a send forwards what arrived, and
 * a receive reduces into it (messages from different partners arrive in
 * any order, so a receive is not even posted before its turn). */
static bool net_ready(const struct weft_task *task, int q, uint32_t k)
{
	const struct allreduce_rail *a = state(task);
	uint32_t b = k / a->steps, t = k % a->steps, per = (uint32_t)a->lay.m - 1;
	if (t > 0)
		return weft_engine_done(&a->eng, Q_NET_RECV) >= k;
	return per == 0 || weft_engine_done(&a->eng, Q_IN_RECV) >= (b + 1) * per;
}

/* WEFT_AVG: the last reducing step leaves this rank's part of the block
 * with the full sum: divide it once. */
static void net_recv_done(struct weft_task *task, int q, uint32_t k)
{
	const struct allreduce_rail *a = state(task);
	const struct rail_layout *l = &a->lay;
	uint32_t t = k % a->steps;
	uint32_t last = l->k >= 0 ? (uint32_t)l->k - 1 : (uint32_t)l->nh - 2;
	if (task->args.op != WEFT_AVG || t != last)
		return;
	struct weft_xfer x = {0};
	net_item(task, Q_NET_RECV, k, &x);
	weft_reduce_scale(x.buf, x.bytes / task->args.esize, task->args.dtype, task->comm->nranks);
}

static const struct weft_queue_ops local_recv_ops = {.item = local_item, .done = local_recv_done};
static const struct weft_queue_ops local_send_ops = {.item = local_item, .ready = local_ready};
static const struct weft_queue_ops net_recv_ops = {
    .item = net_item, .ready = net_ready, .done = net_recv_done};
static const struct weft_queue_ops net_send_ops = {.item = net_item, .ready = net_ready};

static weft_status_t rail_post(struct weft_task *task)
{
	struct allreduce_rail *a = state(task);
	const struct weft_coll_args *args = &task->args;
	if (!equal_hosts(task->comm))
		return weft_comm_fail(
		    task->comm, WEFT_ERR_INVALID_ARG,
		    "allreduce rail: needs as many ranks on every host (WEFT_ALGO "
		    "forced it here)");
	if (rail_layout(task->comm, &a->lay) != WEFT_SUCCESS)
		return weft_comm_fail(task->comm, WEFT_ERR_NO_MEMORY, "allreduce rail: no memory");
	const struct rail_layout *l = &a->lay;
	if (l->m == 1 && l->nh == 1 && !args->in_place) /* one rank: nothing moves */
		memcpy(args->recvbuf, args->sendbuf, args->count * args->esize);
	a->reduce = weft_reduce_kernel(args->dtype, args->op);
	a->steps = l->k >= 0 ? 2 * (uint32_t)l->k : 2 * ((uint32_t)l->nh - 1);
	uint64_t most = (TAG_NET - 1) / (2 * ((uint64_t)l->m + a->steps));
	a->nblocks =
	    weft_engine_chunks(task, weft_seg_count(args->count, l->m, 0), most, &a->block_elems);
	uint32_t local = 2 * a->nblocks * ((uint32_t)l->m - 1), net = a->nblocks * a->steps;
	weft_engine_init(&a->eng, NULL);
	weft_engine_add_queue(&a->eng, &local_recv_ops, l->prev, false, local, 0);
	weft_engine_add_queue(&a->eng, &local_send_ops, l->next, true, local, 0);
	weft_engine_add_queue(&a->eng, &net_recv_ops, -1, false, net, TAG_NET);
	weft_engine_add_queue(&a->eng, &net_send_ops, -1, true, net, TAG_NET);
	weft_engine_start(&a->eng, task);
	return WEFT_SUCCESS;
}

static double rail_estimate(const struct weft_comm *comm, const struct weft_links *links,
			    const struct weft_coll_args *args)
{
	int nh = comm->graph.nhosts, m = (int)comm->cards[comm->rank].local_count;
	double bytes = (double)args->count * (double)args->esize;
	double chunk = (double)comm->chunk_bytes;
	double slice = m > 0 ? bytes / m : bytes;
	double blocks = chunk > 0 && slice > chunk ? slice / chunk : 1;
	double block = slice / blocks;
	int k = weft_rd_pow2(nh) == nh ? weft_rd_nsteps(nh) : nh - 1;
	struct weft_cost in = links->intra_host, net = links->inter_host;
	double t = 2.0 * k * blocks * net.alpha + 2.0 * (nh - 1) / nh * bytes * net.beta;
	if (m > 1)
		t += 2.0 * (m - 1) * (in.alpha + block * in.beta);
	return t + ((double)(m - 1) / m + (double)(nh - 1) / ((double)nh * m)) * bytes * in.gamma;
}

/* Every rank's bytes (the tuner's flow estimate, O(n log H)): each local
 * ring edge carries 2 (m-1) slices of S/m (stages A and C), and each rail
 * its slice's halving-doubling (step s: S/m / 2^s with the partner at
 * position hp ^ 2^s, both ways) or ring (2 (H-1)/H slices per edge). Every
 * host's ranks are numbered from its leader, in placement order, as the
 * task numbers them. */
static void rail_flow(const struct weft_comm *comm, const struct weft_coll_args *args,
		      struct weft_topo_flow *flow)
{
	int n = comm->nranks, nh = comm->graph.nhosts, dummy;
	int *mem = calloc(5 * (size_t)nh + (size_t)n, sizeof(int));
	if (!mem)
		return; /* no flow: the estimate is its latency part */
	struct rail_scan sc = {mem, mem + nh, mem + 2 * nh, mem + 3 * nh};
	int *seen = mem + 4 * nh, *at = mem + 5 * nh; /* at[hp * m + j] */
	scan_hosts(comm, &sc, &dummy);
	int m = sc.count[comm->graph.host_of[comm->ring[0]]];
	for (int p = 0; p < n; p++) {
		int r = comm->ring[p], h = comm->graph.host_of[r];
		at[sc.pos[h] * m + (seen[h]++ - sc.lead[h] + m) % m] = r;
	}
	double slice = (double)args->count * (double)args->esize / m;
	int k = weft_rd_pow2(nh) == nh ? weft_rd_nsteps(nh) : -1;
	for (int hp = 0; hp < nh; hp++)
		for (int j = 0; j < m; j++) {
			int r = at[hp * m + j];
			if (m > 1)
				weft_topo_flow_add(flow, r, at[hp * m + (j + 1) % m],
						   2.0 * (m - 1) * slice);
			for (int s = 0; s < k && k <= RAIL_MAX_STEPS; s++)
				weft_topo_flow_add(flow, r, at[(hp ^ (1 << s)) * m + j],
						   2 * slice / (double)(2 << s));
			if ((k < 0 || k > RAIL_MAX_STEPS) && nh > 1)
				weft_topo_flow_add(flow, r, at[(hp + 1) % nh * m + j],
						   2.0 * (nh - 1) / nh * slice);
		}
	free(mem);
}

const struct weft_algo weft_allreduce_rail = {
    .id = WEFT_ALGO_RAIL,
    .coll = WEFT_COLL_ALLREDUCE,
    .name = "rail",
    .description = "every local rank carries its slice among the hosts (halving-doubling "
		   "or ring per rail), pipelined with the hosts' reduce-scatter and "
		   "allgather",
    .estimate = rail_estimate,
    .supports = rail_supports,
    .flow = rail_flow,
    .task = {.post = rail_post, .progress = weft_engine_task_progress},
};
