/*
 * allgather_hier.c — hierarchical AllGather: gather inside each host, ring
 * among host leaders, broadcast inside each host.
 *
 * Every block is staged directly at its place in recvbuf (rank r's block at
 * r * count), so no scratch memory is needed. Hosts, their leaders
 * (graph.host_leader), each host's chain and the leaders' ring come from
 * patterns/hier.h (the ring visits the hosts of a leaf together). Each
 * stage is a phase of the engine's schedule with a queue of receives and
 * one of sends.
 *
 *  1. Gather: every non-leader sends its block to its host leader, which
 *     receives them straight into place.
 *  2. Ring among the leaders: at step s (0..H-2) the leader at ring position
 *     p forwards to the next leader the blocks of the host at position
 *     p - s and receives those of the host at p - s - 1. A host's ranks need
 *     not be contiguous in rank order (interleaved placements), so a host's
 *     part travels as one message per rank block, in rank order; block j of
 *     step s is forwarded as soon as block j of step s-1 has arrived.
 *  3. Broadcast down each host's chain (leader first): the link into the
 *     rank at chain position i carries every block except that rank's own,
 *     in rank order; a rank forwards a block as soon as it has it (its own
 *     at once), so the blocks stream down the chain.
 *
 * Cost (block B bytes, n ranks, m on the largest host, H hosts):
 *   (m - 1)(alpha_host + B beta_host)              gather, into the leader
 * + (H - 1)(alpha_net + m B beta_net)              leaders' ring
 * + (n + m - 3)(alpha_host + B beta_host)          chain broadcast, pipelined
 * The network carries (H-1) m B per leader link instead of (n-1) B per rank
 * over a ring that crosses hosts once per host anyway; the gain is the
 * latency term: H - 1 network steps instead of n - 1.
 */
#include <string.h>

#include "algorithms/algo.h"
#include "algorithms/engine/engine.h"
#include "algorithms/patterns/hier.h"
#include "algorithms/patterns/ring.h"
#include "core/comm.h"

enum hier_phase {
	PHASE_GATHER = 0, /* into the host leader */
	PHASE_RING,	  /* among host leaders */
	PHASE_DOWN,	  /* down each host's chain */
	PHASE_DONE
};

enum { Q_RECV = 0, Q_SEND };

#define TAG_GATHER 0x80000000u
#define TAG_DOWN   0xc0000000u

/* Walks the blocks of a sequence of hosts, one rank at a time. */
struct block_cursor {
	int step; /* ring step of the current host */
	int host;
	int rank; /* last block handed out, -1 before the host's first */
};

struct allgather_hier {
	struct weft_engine eng;
	struct weft_hier_layout lay;
	enum hier_phase phase;
	int own_count;				/* ranks on this host */
	int gather_rank;			/* leader, gather: last block received */
	struct block_cursor send_cur, recv_cur; /* leaders' ring */
};

WEFT_ENGINE_FIRST(struct allgather_hier);
_Static_assert(sizeof(struct allgather_hier) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static struct allgather_hier *state(const struct weft_task *task)
{
	return (struct allgather_hier *)(void *)task->priv;
}

static size_t block_bytes(const struct weft_task *task)
{
	return task->args.count * task->args.esize;
}

static char *block(const struct weft_task *task, int rank)
{
	return (char *)task->args.recvbuf + (size_t)rank * block_bytes(task);
}

/* Next rank after @p r on @p host (skipping @p skip), or -1. */
static int next_on_host(const struct weft_comm *comm, int host, int r, int skip)
{
	for (r++; r < comm->nranks; r++)
		if (comm->graph.host_of[r] == host && r != skip)
			return r;
	return -1;
}

static int host_size(const struct weft_comm *comm, int host)
{
	int m = 0;
	for (int r = 0; r < comm->nranks; r++)
		m += comm->graph.host_of[r] == host;
	return m;
}

/* ---- 1. gather into the leader ---- */

static void gather_recv(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	struct allgather_hier *h = state(task);
	h->gather_rank = next_on_host(task->comm, h->lay.host, h->gather_rank, task->comm->rank);
	out->peer = h->gather_rank;
	out->buf = block(task, h->gather_rank);
	out->bytes = block_bytes(task);
	out->step = TAG_GATHER + (uint32_t)h->gather_rank;
}

static void gather_send(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	out->buf = block(task, task->comm->rank);
	out->bytes = block_bytes(task);
	out->step = TAG_GATHER + (uint32_t)task->comm->rank;
}

static const struct weft_queue_ops gather_recv_ops = {.item = gather_recv};
static const struct weft_queue_ops gather_send_ops = {.item = gather_send};

/* ---- 2. ring among the leaders ---- */

/* Advance @p c to its next block; host of step s is at ring position
 * leader_pos - s - @p lag. */
static int cursor_next(const struct weft_task *task, struct block_cursor *c, int lag)
{
	const struct weft_hier_layout *l = &state(task)->lay;
	int r = c->host >= 0 ? next_on_host(task->comm, c->host, c->rank, -1) : -1;
	while (r < 0) {
		if (c->host >= 0)
			c->step++;
		c->host = weft_hier_host_at(
		    task->comm, weft_ring_back(l->leader_pos, (long)c->step + lag, l->nleaders));
		r = next_on_host(task->comm, c->host, -1, -1);
	}
	c->rank = r;
	return r;
}

static void ring_recv(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	struct allgather_hier *h = state(task);
	int r = cursor_next(task, &h->recv_cur, 1);
	out->buf = block(task, r);
	out->bytes = block_bytes(task);
}

static void ring_send(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	struct allgather_hier *h = state(task);
	int r = cursor_next(task, &h->send_cur, 0);
	out->buf = block(task, r);
	out->bytes = block_bytes(task);
}

/* The blocks sent at step s are those received at step s-1, in the same
 * order, after this host's own: send k is receive k - own_count. */
static bool ring_ready(const struct weft_task *task, int q, uint32_t k)
{
	return weft_engine_follows(&state(task)->eng, Q_RECV, k, (uint32_t)state(task)->own_count);
}

static const struct weft_queue_ops ring_recv_ops = {.item = ring_recv};
static const struct weft_queue_ops ring_send_ops = {.item = ring_send, .ready = ring_ready};

/* ---- 3. down the chain: the link into rank x carries every block but x's ---- */

static int skip_rank(uint32_t k, int skip)
{
	return (int)k < skip ? (int)k : (int)k + 1;
}

static void down_recv(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	out->buf = block(task, skip_rank(k, task->comm->rank));
	out->bytes = block_bytes(task);
}

static void down_send(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	int next = state(task)->lay.chain_next;
	out->buf = block(task, skip_rank(k, next));
	out->bytes = block_bytes(task);
}

static bool down_ready(const struct weft_task *task, int q, uint32_t k)
{
	const struct allgather_hier *h = state(task);
	uint32_t recv_done = weft_engine_done(&h->eng, Q_RECV);
	int me = task->comm->rank, r = skip_rank(k, h->lay.chain_next);
	if (h->lay.chain_prev < 0 || r == me)
		return true;
	return recv_done > (uint32_t)(r < me ? r : r - 1);
}

static const struct weft_queue_ops down_recv_ops = {.item = down_recv};
static const struct weft_queue_ops down_send_ops = {.item = down_send, .ready = down_ready};

/* ---- phases ---- */

static bool phase_begin(struct weft_task *task, uint32_t phase)
{
	struct allgather_hier *h = state(task);
	const struct weft_hier_layout *l = &h->lay;
	const struct weft_comm *comm = task->comm;
	uint32_t n = (uint32_t)comm->nranks;
	bool leader = l->chain_pos == 0;
	struct weft_engine *eng = &h->eng;
	h->phase = (enum hier_phase)phase;
	switch (h->phase) {
	case PHASE_GATHER: {
		int to = comm->graph.host_leader[l->host];
		h->gather_rank = -1;
		weft_engine_add_queue(eng, &gather_recv_ops, -1, false,
				      leader ? (uint32_t)l->local_n - 1 : 0, TAG_GATHER);
		weft_engine_add_queue(eng, &gather_send_ops, to, true, leader ? 0 : 1, TAG_GATHER);
		return true;
	}
	case PHASE_RING: {
		bool runs = leader && l->nleaders > 1;
		h->recv_cur = h->send_cur =
		    (struct block_cursor){.step = 0, .host = -1, .rank = -1};
		uint32_t nrecv = 0, nsend = 0;
		if (runs) {
			int next_host = comm->graph.host_of[l->leader_next];
			nrecv = n - (uint32_t)h->own_count;
			nsend = n - (uint32_t)host_size(comm, next_host);
		}
		weft_engine_add_queue(eng, &ring_recv_ops, l->leader_prev, false, nrecv, 0);
		weft_engine_add_queue(eng, &ring_send_ops, l->leader_next, true, nsend, 0);
		return true;
	}
	case PHASE_DOWN:
		weft_engine_add_queue(eng, &down_recv_ops, l->chain_prev, false,
				      l->chain_prev >= 0 ? n - 1 : 0, TAG_DOWN);
		weft_engine_add_queue(eng, &down_send_ops, l->chain_next, true,
				      l->chain_next >= 0 ? n - 1 : 0, TAG_DOWN);
		return true;
	case PHASE_DONE: break;
	}
	return false;
}

static const struct weft_engine_ops schedule = {.phase_begin = phase_begin};

static weft_status_t hier_post(struct weft_task *task)
{
	struct allgather_hier *h = state(task);
	const struct weft_coll_args *a = &task->args;
	if (!a->in_place)
		memcpy(block(task, task->comm->rank), a->sendbuf, block_bytes(task));
	weft_hier_layout(task->comm, &h->lay);
	h->own_count = h->lay.local_n;
	weft_engine_init(&h->eng, &schedule);
	weft_engine_start(&h->eng, task);
	return WEFT_SUCCESS;
}

static double hier_estimate(const struct weft_comm *comm, const struct weft_links *links,
			    const struct weft_coll_args *args)
{
	double b = (double)args->count * (double)args->esize;
	int n = comm->nranks, m = weft_hier_max_local(comm), nh = comm->graph.nhosts;
	double t = 0;
	if (m > 1) {
		struct weft_cost c = links->intra_host;
		t += (double)(m - 1 + n + m - 3) * (c.alpha + b * c.beta);
	}
	if (nh > 1) {
		struct weft_cost c = links->inter_host;
		t += (nh - 1) * (c.alpha + m * b * c.beta);
	}
	return t;
}

const struct weft_algo weft_allgather_hier = {
    .id = WEFT_ALGO_HIER,
    .coll = WEFT_COLL_ALLGATHER,
    .name = "hier",
    .description = "gather into each host leader, ring of host blocks among leaders, "
		   "broadcast down each host's chain",
    .estimate = hier_estimate,
    .supports = weft_hier_supports,
    .task = {.post = hier_post, .progress = weft_engine_task_progress},
};
