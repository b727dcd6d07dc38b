/* comm_init.c — communicator creation and destruction, and what the
 * transports see of it (struct weft_tp_env). The public calls are in
 * api/comm.c, progress in core/progress.c. */
#define _GNU_SOURCE
#include "core/comm_init.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/hostid.h"
#include "core/comm.h"
#include "core/fail.h"
#include "core/mem_reg.h"
#include "core/p2p.h"
#include "core/progress_thread.h"
#include "core/stats.h"
#include "core/trace.h"
#include "core/watch.h"
#include "reduce/reduce.h"
#include "topo/topo_local.h"
#include "transports/registry.h"
#include "util/log.h"
#include "util/netaddr.h"
#include "util/settings.h"

/* The topology graph from every rank's card, and the ring order from it. */
static weft_status_t place(struct weft_comm *comm)
{
	int n = comm->nranks;
	const char *mode = weft_setting_str("WEFT_PLACEMENT");
	if (strcmp(mode, "rank") != 0 && strcmp(mode, "topo") != 0)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "WEFT_PLACEMENT=%s: expected topo or rank", mode);
	comm->placement_by_rank = strcmp(mode, "rank") == 0;
	struct weft_topo_rank *in = calloc((unsigned)n, sizeof(*in));
	struct weft_topo_card **cards = calloc((unsigned)n, sizeof(*cards));
	if (!in || !cards) {
		free(in);
		free(cards);
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "init: no memory for the topology");
	}
	for (int r = 0; r < n; r++) {
		in[r].host_id = comm->cards[r].host_id;
		in[r].hostname = comm->cards[r].hostname;
		in[r].card = cards[r] = &comm->cards[r].topo;
	}
	/* One leaf source for the whole job (topo.h says why and which). */
	weft_topo_cards_agree(cards, n);
	free(cards);
	weft_status_t st = weft_topo_graph_build(&comm->graph, n, in, &comm->err);
	free(in);
	if (st != WEFT_SUCCESS)
		return st;
	weft_topo_ring_order(&comm->graph, comm->placement_by_rank, comm->ring);
	for (int p = 0; p < n; p++)
		if (comm->ring[p] == comm->rank)
			comm->ring_pos = p;
	weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO, "%d hosts, %d leaves, ring crosses leaves %d times",
		 comm->graph.nhosts, comm->graph.nleaves,
		 weft_topo_ring_crossings(&comm->graph, comm->ring));
	return WEFT_SUCCESS;
}

/* The interface this rank offers its peers (NULL: loopback). */
static weft_status_t choose_ifname(struct weft_comm *comm, const char **ifname)
{
	*ifname = weft_setting_str("WEFT_SOCKET_IFNAME");
	if (*ifname || comm->graph.nhosts == 1)
		return WEFT_SUCCESS;
	*ifname = comm->cards[comm->rank].topo.nic;
	if (!(*ifname)[0])
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "init: the job spans %d hosts and this host has no "
				      "network interface to reach them: set WEFT_SOCKET_IFNAME",
				      comm->graph.nhosts);
	return WEFT_SUCCESS;
}

/* Streaming stores pay only where a call's buffers would not stay in the
 * last-level cache anyway: out of place every local rank holds an input
 * and an output, so 2 x local ranks x bytes, and streaming starts above
 * half the cache (others use it too; AMD's L3 only holds what the L2s
 * evict). np=2, 32 MiB L3: -R out of place at 4 MiB, 13.3 GB/s with plain
 * stores against 10.6 streamed (medians of 6 pairs); at 8 MiB 13.5
 * streamed against 7. */
static size_t stream_min_default(const struct weft_comm *comm)
{
	const struct weft_card *me = &comm->cards[comm->rank];
	int64_t llc = me->topo.llc_bytes;
	if (llc <= 0)
		return 4u << 20;
	return (size_t)llc / (4u * (me->local_count ? me->local_count : 1u));
}

/* More ranks on this host than online CPUs: waits must give the core away. */
static bool oversubscribed(const struct weft_comm *comm)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	return cpus > 0 && (long)comm->cards[comm->rank].local_count > cpus;
}

static const char *me_nic(const struct weft_comm *comm)
{
	return comm->cards[comm->rank].topo.nic;
}

static int by_host(const void *a, const void *b, void *cards_arg)
{
	const struct weft_card *cards = cards_arg;
	int ra = *(const int *)a, rb = *(const int *)b;
	int c = strcmp(cards[ra].host_id, cards[rb].host_id);

	return c ? c : (ra > rb) - (ra < rb);
}

/* Every card's index among the ranks of its host, and their count: ranks
 * sorted by host id, then rank (O(n log n): a job may have 100,000). */
static weft_status_t number_locals(struct weft_comm *comm)
{
	int n = comm->nranks;
	int *order = malloc((size_t)n * sizeof(*order));

	if (!order)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "init: %d ranks' host order", n);
	for (int r = 0; r < n; r++)
		order[r] = r;
	qsort_r(order, (size_t)n, sizeof(*order), by_host, comm->cards);
	for (int i = 0; i < n;) {
		int j = i;

		while (j < n &&
		       strcmp(comm->cards[order[j]].host_id, comm->cards[order[i]].host_id) == 0)
			j++;
		for (int k = i; k < j; k++) {
			comm->cards[order[k]].local_rank = (uint32_t)(k - i);
			comm->cards[order[k]].local_count = (uint32_t)(j - i);
		}
		i = j;
	}
	free(order);
	return WEFT_SUCCESS;
}

static weft_status_t exchange_cards(struct weft_comm *comm, const struct weft_topo_card *known)
{
	struct weft_card *me = &comm->cards[comm->rank];
	weft_status_t st = weft_host_id(me->host_id, sizeof(me->host_id), &comm->err);
	if (st != WEFT_SUCCESS)
		return st;
	gethostname(me->hostname, sizeof(me->hostname) - 1);
	if (known)
		me->topo = *known;
	else if ((st = weft_topo_local_card(&me->topo, me->hostname, &comm->err)) != WEFT_SUCCESS)
		return st;
	me->rank = comm->rank;
	me->pid = (int32_t)getpid();
	if ((st = weft_wait_card(&me->wait, comm->compute_threads, comm)) != WEFT_SUCCESS)
		return st;
	st = weft_bootstrap_allgather(comm->bs, comm->cards, sizeof(struct weft_card), &comm->err);
	if (st != WEFT_SUCCESS)
		return st;
	for (int r = 0; r < comm->nranks; r++) {
		if (comm->cards[r].rank != r)
			return weft_comm_fail(comm, WEFT_ERR_REMOTE,
					      "init: card of rank %d is garbled", r);
		comm->cards[r].host_id[WEFT_HOST_ID_BYTES - 1] = '\0';
		comm->cards[r].hostname[WEFT_HOSTNAME_BYTES - 1] = '\0';
		weft_topo_card_terminate(&comm->cards[r].topo);
	}
	return number_locals(comm);
}

/* ---- What the transports see ---- */

static weft_status_t env_allgather(void *ctx, void *buf, size_t bytes)
{
	return weft_comm_allgather(ctx, buf, bytes);
}

static weft_status_t env_fail(void *ctx, weft_status_t status, const char *msg)
{
	return weft_comm_fail(ctx, status, "%s", msg);
}

static void env_explain(void *ctx, uint64_t sent, uint64_t want, int peer, char *buf, size_t len)
{
	weft_p2p_explain(ctx, sent, want, peer, buf, len);
}

static double env_peer_silence(void *ctx, int peer)
{
	return weft_watch_silence(ctx, peer);
}

static void env_peer_gone(void *ctx, int peer, weft_rank_failure_t how)
{
	weft_comm_mark_dead(ctx, peer, how);
}

static weft_status_t build_env(struct weft_comm *comm)
{
	int n = comm->nranks;
	comm->tp_peers = calloc((size_t)n, sizeof(*comm->tp_peers));
	if (!comm->tp_peers)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "init: no memory for %d ranks", n);
	for (int r = 0; r < n; r++) {
		const struct weft_card *c = &comm->cards[r];
		comm->tp_peers[r] = (struct weft_tp_peer){
		    .host_id = c->host_id,
		    .hostname = c->hostname,
		    .pid = c->pid,
		    .local_rank = (int)c->local_rank,
		    .nic = c->topo.nic,
		    .sleeps = r != comm->rank && weft_comm_same_host(comm, r) &&
			      weft_wait_rank_blocks(comm, r),
		};
	}
	const struct weft_card *me = &comm->cards[comm->rank];
	comm->env = malloc(sizeof(*comm->env));
	if (!comm->env)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "init: no memory");
	*comm->env = (struct weft_tp_env){
	    .rank = comm->rank,
	    .nranks = n,
	    .local_rank = (int)me->local_rank,
	    .local_size = (int)me->local_count,
	    .key = &comm->key,
	    .id = comm->id,
	    .timeout_s = comm->timeout_s,
	    .peers = comm->tp_peers,
	    .wait_fd = comm->wait.epfd,
	    .ctx = comm,
	    .allgather = env_allgather,
	    .fail = env_fail,
	    .explain = env_explain,
	    .peer_silence = env_peer_silence,
	    .peer_gone = env_peer_gone,
	};
	memcpy(&comm->env->comm_id, comm->id, sizeof(comm->env->comm_id));
	return choose_ifname(comm, &comm->env->ifname);
}

/* The transport with the highest score for each peer. */
static weft_status_t choose_transports(struct weft_comm *comm)
{
	for (int p = 0; p < comm->nranks; p++) {
		if (p == comm->rank)
			continue;
		int best = 0;
		for (size_t i = 0; i < comm->ntps; i++) {
			struct weft_tp *tp = comm->tps[i];
			int score = tp ? tp->ops->conn.score(tp, p) : 0;
			if (score > best) {
				best = score;
				comm->peers[p].tp = tp;
			}
		}
		if (!comm->peers[p].tp)
			return weft_comm_fail(
			    comm, WEFT_ERR_INVALID_ARG,
			    "init: no enabled transport reaches rank %d on host %s "
			    "(WEFT_TRANSPORTS=%s)",
			    p, comm->cards[p].hostname,
			    weft_setting_str("WEFT_TRANSPORTS") ?: "all");
		weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT, "rank %d -> rank %d over %s", comm->rank, p,
			 comm->peers[p].tp->ops->name);
	}
	return WEFT_SUCCESS;
}

/* Every enabled transport's init, in the registry's order (the same on
 * every rank: init is collective). */
static weft_status_t init_transports(struct weft_comm *comm)
{
	const struct weft_tp_ops *const *all = weft_registry_all(&comm->ntps);
	bool enabled[16];
	if (comm->ntps > sizeof(enabled) / sizeof(enabled[0]))
		return weft_comm_fail(comm, WEFT_ERR_INTERNAL, "init: too many transports");
	comm->tps = calloc(comm->ntps, sizeof(*comm->tps));
	if (!comm->tps)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "init: no memory");
	weft_status_t st = weft_registry_check(&comm->err);
	if (st == WEFT_SUCCESS)
		st =
		    weft_registry_enabled(weft_setting_str("WEFT_TRANSPORTS"), enabled, &comm->err);
	for (size_t i = 0; st == WEFT_SUCCESS && i < comm->ntps; i++)
		if (enabled[i])
			st = all[i]->life.init(comm->env, &comm->tps[i]);
	return st == WEFT_SUCCESS ? choose_transports(comm) : st;
}

/* WEFT_CONNECT (see its help in util/settings.c). auto is lazy above
 * WEFT_CONNECT_AUTO_RANKS: eager connections cost (n - 1) x sockets per
 * peer descriptors on every rank (about 500 ranks over TCP exhaust a
 * default ulimit -n of 1,024), while a small job keeps what eager gives:
 * a peer that cannot be reached fails init rather than the first
 * collective, and the TCP listener closes after init (issue 12). Every
 * rank reads the same value (like WEFT_TRANSPORTS). */
#define WEFT_CONNECT_AUTO_RANKS 64

static weft_status_t read_connect_mode(struct weft_comm *comm)
{
	const char *mode = weft_setting_str("WEFT_CONNECT");
	if (strcmp(mode, "eager") == 0)
		comm->connect_mode = WEFT_CONNECT_EAGER;
	else if (strcmp(mode, "lazy") == 0)
		comm->connect_mode = WEFT_CONNECT_LAZY;
	else if (strcmp(mode, "auto") == 0)
		comm->connect_mode =
		    comm->nranks > WEFT_CONNECT_AUTO_RANKS ? WEFT_CONNECT_LAZY : WEFT_CONNECT_EAGER;
	else
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "WEFT_CONNECT=%s: expected eager, lazy or auto", mode);
	comm->env->connect_lazy = comm->connect_mode == WEFT_CONNECT_LAZY;
	return WEFT_SUCCESS;
}

/* Every peer (@p all) or those whose transport must connect at init,
 * within one timeout. */
static weft_status_t connect_all(struct weft_comm *comm, bool all)
{
	double deadline = weft_now() + comm->timeout_s;
	for (;;) {
		int pending = 0, first_pending = -1;
		for (int p = 0; p < comm->nranks; p++) {
			struct weft_peer *peer = &comm->peers[p];
			if (p == comm->rank || peer->conn || (!all && !peer->tp->connect_at_init))
				continue;
			weft_status_t st = weft_p2p_connect(comm, p);
			if (st == WEFT_INPROGRESS) {
				pending++;
				if (first_pending < 0)
					first_pending = p;
			} else if (st != WEFT_SUCCESS) {
				return st;
			}
		}
		if (!pending)
			return WEFT_SUCCESS;
		if (weft_now() > deadline)
			return weft_comm_fail(
			    comm, WEFT_ERR_TIMEOUT,
			    "init: could not connect to %d peer(s) within %.1f s, "
			    "first rank %d (%s, over %s)",
			    pending, comm->timeout_s, first_pending,
			    comm->cards[first_pending].hostname,
			    comm->peers[first_pending].tp->ops->name);
		usleep(50);
	}
}

/* Eager: every peer now; then the transports close what only connecting
 * needed (the socket listener). Lazy: only the peers of transports that
 * must connect at init (ofi's RMA protocol; none holds a descriptor per
 * peer), the rest on their first message (core/p2p.h), and the listeners
 * stay open for the peers still to come. */
static weft_status_t connect_peers(struct weft_comm *comm)
{
	bool lazy = comm->connect_mode == WEFT_CONNECT_LAZY;
	weft_status_t st = connect_all(comm, !lazy);
	if (st != WEFT_SUCCESS)
		return st;
	for (size_t i = 0; !lazy && i < comm->ntps; i++)
		if (comm->tps[i])
			comm->tps[i]->ops->conn.connected(comm->tps[i]);
	return weft_stats_open(comm);
}

/* Every rank must pipeline with the same chunk size: take the smallest that
 * any rank's transports want. */
static weft_status_t agree_chunk(struct weft_comm *comm)
{
	uint64_t *all = calloc((unsigned)comm->nranks, sizeof(uint64_t));
	if (!all)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "init: no memory");
	/* A rank without peers (a job of one) takes a chunk that keeps the
	 * scratch buffer small. */
	uint64_t mine = WEFT_CHUNK_MAX;
	for (int p = 0; p < comm->nranks; p++)
		if (comm->peers[p].tp && comm->peers[p].tp->chunk_bytes < mine)
			mine = comm->peers[p].tp->chunk_bytes;
	if (comm->nranks == 1)
		mine = WEFT_CHUNK_ALONE;
	all[comm->rank] = mine;
	weft_status_t st = weft_bootstrap_allgather(comm->bs, all, sizeof(uint64_t), &comm->err);
	if (st == WEFT_SUCCESS) {
		uint64_t chunk = WEFT_CHUNK_MAX;
		for (int r = 0; r < comm->nranks; r++)
			if (all[r] < chunk)
				chunk = all[r];
		comm->chunk_bytes = chunk < 64 ? 64 : (size_t)chunk;
	}
	free(all);
	if (st != WEFT_SUCCESS)
		return st;
	comm->scratch_bytes = weft_comm_scratch_bytes(comm->nranks, comm->chunk_bytes);
	comm->stream_min = stream_min_default(comm);
	long stream_min;
	if (weft_setting_long("WEFT_STREAM_MIN", &stream_min))
		comm->stream_min = (size_t)stream_min;
	if (posix_memalign(&comm->scratch, 4096, comm->scratch_bytes) != 0) {
		comm->scratch = NULL;
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY,
				      "init: no memory for %zu bytes of scratch",
				      comm->scratch_bytes);
	}
	memset(comm->scratch, 0, comm->scratch_bytes); /* fault it in now, not on the hot path */
	return WEFT_SUCCESS;
}

/* WEFT_ISA is read where kernels are chosen, which cannot fail; a bad value
 * is an error here, once every rank has joined (so the others hear of it). */
static weft_status_t check_isa(struct weft_comm *comm)
{
	char why[160];
	weft_status_t st = weft_reduce_isa_check(why, sizeof(why));
	return st == WEFT_SUCCESS ? st : weft_comm_fail(comm, st, "init: %s", why);
}

static double default_timeout(const weft_config_t *config)
{
	double t = 300;
	if (config && config->timeout_seconds > 0)
		return config->timeout_seconds;
	weft_setting_double("WEFT_TIMEOUT", &t);
	return t > 0 ? t : 300;
}

/* The services' steps (core/service.h), where each is due. */
static weft_status_t service_step(struct weft_comm *comm, bool start)
{
	const struct weft_comm_service *s = comm->service;
	weft_status_t (*step)(struct weft_comm *) = !s ? NULL : start ? s->start : s->init;
	return step ? step(comm) : WEFT_SUCCESS;
}

static void service_end(struct weft_comm *comm, bool fini)
{
	const struct weft_comm_service *s = comm->service;
	void (*step)(struct weft_comm *) = !s ? NULL : fini ? s->fini : s->stop;
	if (step)
		step(comm);
}

void weft_comm_free(struct weft_comm *comm)
{
	if (!comm)
		return;
	service_end(comm, false); /* first: an exporter reads the rest */
	weft_progress_thread_stop(comm);
	weft_watch_stop(comm);
	if (comm->bs)
		weft_bootstrap_close(comm->bs);
	weft_p2p_abort(comm, WEFT_ERR_ABORTED);
	weft_stats_close(comm); /* while the connections can still be read */
	weft_comm_mem_free_all(comm);
	for (int p = 0; comm->peers && p < comm->nranks; p++)
		comm->peers[p].conn = NULL; /* owned by their transport */
	for (size_t i = 0; comm->tps && i < comm->ntps; i++)
		if (comm->tps[i])
			comm->tps[i]->ops->life.fini(comm->tps[i]);
	service_end(comm, true); /* no thread left that could reach them */
	while (comm->active) {	 /* requests still open become invalid (weft.h) */
		struct weft_task *t = comm->active;
		comm->active = t->next;
		weft_task_retire(t);
		free(t);
	}
	weft_p2p_free_pool(comm); /* the transports, closed, hold none */
	while (comm->free_tasks) {
		struct weft_task *t = comm->free_tasks;
		comm->free_tasks = t->next;
		free(t);
	}
	if (comm->tuner && comm->tuner_free)
		comm->tuner_free(comm->tuner);
	if (comm->shmem && comm->shmem_free)
		comm->shmem_free(comm->shmem);
	weft_topo_graph_free(&comm->graph);
	weft_wait_fini(comm);
	free(comm->scratch);
	free(comm->ring);
	free(comm->p2p_sent);
	free(comm->p2p_received);
	free(comm->tps);
	free(comm->tp_peers);
	free(comm->env);
	weft_gate_fini(&comm->gate);
	weft_trace_fini(comm);
	free(comm->peers);
	free(comm->cards);
	free((void *)comm->dead_how);
	free(comm->dead_when);
	free(comm->dead_order);
	pthread_mutex_destroy(&comm->lock);
	pthread_mutex_destroy(&comm->err_lock);
	pthread_mutex_destroy(&comm->dead_lock);
	weft_wipe(&comm->key, sizeof(comm->key));
	free(comm);
}

static weft_status_t comm_alloc(struct weft_comm **out, int nranks, const struct weft_uid *uid,
				int rank, const weft_config_t *config,
				const struct weft_comm_service *service)
{
	struct weft_comm *comm = calloc(1, sizeof(*comm));
	*out = comm;
	if (!comm)
		return weft_err_set(weft_err_init_record(), WEFT_ERR_NO_MEMORY,
				    "init: no memory for the communicator");
	pthread_mutex_init(&comm->lock, NULL);
	pthread_mutex_init(&comm->err_lock, NULL);
	pthread_mutex_init(&comm->dead_lock, NULL);
	comm->rank = rank;
	comm->nranks = nranks;
	comm->service = service;
	comm->key = uid->key;
	comm->timeout_s = default_timeout(config);
	/* A config from a build before progress_thread existed ends before it. */
	if (config && config->size >= offsetof(weft_config_t, progress_thread) + sizeof(int))
		comm->progress_thread_mode = config->progress_thread;
	if (config && config->size >= offsetof(weft_config_t, compute_threads) + sizeof(long))
		comm->compute_threads =
		    config->compute_threads > 1 << 20 ? 1 << 20 : (int)config->compute_threads;
	comm->wait.epfd = comm->wait.evfd = -1; /* closed by free from the start */
	comm->cards = calloc((size_t)nranks, sizeof(*comm->cards));
	comm->peers = calloc((size_t)nranks, sizeof(*comm->peers));
	comm->ring = calloc((size_t)nranks, sizeof(int));
	comm->p2p_sent = calloc((size_t)nranks, sizeof(uint32_t));
	comm->p2p_received = calloc((size_t)nranks, sizeof(uint32_t));
	comm->dead_how = calloc((size_t)nranks, sizeof(*comm->dead_how));
	comm->dead_when = calloc((size_t)nranks, sizeof(*comm->dead_when));
	comm->dead_order = calloc((size_t)nranks, sizeof(*comm->dead_order));
	if (!comm->cards || !comm->peers || !comm->ring || !comm->p2p_sent || !comm->p2p_received ||
	    !comm->dead_how || !comm->dead_when || !comm->dead_order)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "init: no memory for %d ranks",
				      nranks);
	for (int p = 0; p < nranks; p++)
		comm->peers[p].link.peer = p;
	weft_status_t st = weft_gate_init(&comm->gate, &comm->err);
	if (st == WEFT_SUCCESS)
		st = weft_stats_init(comm);
	if (st == WEFT_SUCCESS)
		st = weft_trace_init(comm);
	if (st == WEFT_SUCCESS)
		st = service_step(comm, false);
	return st;
}

static double boot_timeout(const struct weft_comm *comm)
{
	double t = comm->timeout_s;
	if (comm->boot_timeout_s > 0)
		return comm->boot_timeout_s;
	weft_setting_double("WEFT_BOOTSTRAP_TIMEOUT", &t);
	return t;
}

weft_status_t weft_comm_create(struct weft_comm **out, int nranks, const struct weft_uid *uid,
			       int rank, const weft_config_t *config,
			       const struct weft_topo_card *known,
			       const struct weft_comm_service *service)
{
	return weft_comm_create_within(out, nranks, uid, rank, config, known, 0, service);
}

weft_status_t weft_comm_create_within(struct weft_comm **out, int nranks,
				      const struct weft_uid *uid, int rank,
				      const weft_config_t *config,
				      const struct weft_topo_card *known, double boot_timeout_s,
				      const struct weft_comm_service *service)
{
	weft_registry_init();
	struct weft_comm *comm;
	weft_status_t st = comm_alloc(&comm, nranks, uid, rank, config, service);
	if (!comm)
		return st;
	comm->boot_timeout_s = boot_timeout_s;
	if (!known) /* a split child's rank would overwrite the job's in log lines */
		weft_log_set_rank(rank);
	if (st == WEFT_SUCCESS)
		st = weft_bootstrap_join(uid, rank, nranks, boot_timeout(comm), &comm->bs,
					 &comm->err);
	if (st == WEFT_SUCCESS)
		weft_bootstrap_job_id(comm->bs, comm->id);
	if (st == WEFT_SUCCESS)
		st = exchange_cards(comm, known);
	if (st == WEFT_SUCCESS)
		st = place(comm);
	if (st == WEFT_SUCCESS) {
		comm->oversubscribed = oversubscribed(comm);
		st = weft_topo_bind(weft_setting_str("WEFT_BIND"), me_nic(comm),
				    (int)comm->cards[rank].local_rank, &comm->err);
	}
	if (st == WEFT_SUCCESS)
		st = weft_wait_init(comm);
	if (st == WEFT_SUCCESS)
		st = build_env(comm);
	if (st == WEFT_SUCCESS)
		st = read_connect_mode(comm);
	if (st == WEFT_SUCCESS)
		st = init_transports(comm);
	if (st == WEFT_SUCCESS)
		st = connect_peers(comm);
	if (st == WEFT_SUCCESS)
		st = agree_chunk(comm);
	if (st == WEFT_SUCCESS)
		st = check_isa(comm);
	if (st == WEFT_SUCCESS)
		st = weft_watch_start(comm);
	if (st == WEFT_SUCCESS)
		st = service_step(comm, true); /* the graph stands; the watch is open */
	if (st == WEFT_SUCCESS)
		st = weft_watch_run(comm);
	if (st != WEFT_SUCCESS)
		return weft_comm_abandon(comm, st);
	weft_trace_identify(comm);
	*out = comm;
	return WEFT_SUCCESS;
}

weft_status_t weft_comm_ready(struct weft_comm *comm)
{
	double timeout = boot_timeout(comm);
	weft_status_t st = weft_bootstrap_barrier(comm->bs, &comm->err);
	if (st != WEFT_SUCCESS)
		return weft_comm_abandon(comm, st);
	weft_bootstrap_close(comm->bs);
	comm->bs = NULL;
	weft_bootstrap_root_drain(&comm->key, timeout);
	st = weft_progress_thread_start(comm);
	if (st != WEFT_SUCCESS)
		return weft_comm_abandon(comm, st);
	if (comm->service && comm->service->ready)
		comm->service->ready(comm);
	weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT, "rank %d of %d ready on %s (chunk %zu bytes)",
		 comm->rank, comm->nranks, comm->cards[comm->rank].hostname, comm->chunk_bytes);
	weft_err_clear(weft_err_init_record());
	return WEFT_SUCCESS;
}

weft_status_t weft_comm_abandon(struct weft_comm *comm, weft_status_t status)
{
	struct weft_err *ierr = weft_err_init_record();
	double timeout = boot_timeout(comm);
	weft_err_clear(ierr);
	weft_err_set(ierr, status, "%s", comm->err.msg[0] ? comm->err.msg : "init failed");
	struct weft_key key = comm->key;
	weft_comm_free(comm);
	weft_bootstrap_root_drain(&key, timeout); /* let a root here tell the others */
	weft_wipe(&key, sizeof(key));
	return status;
}
