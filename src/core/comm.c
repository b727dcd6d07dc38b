/* comm.c — communicator creation, destruction, errors and progress. */
#include "core/comm.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "algorithms/algo.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/hostid.h"
#include "bootstrap/netaddr.h"
#include "core/tag.h"
#include "reduce/reduce.h"
#include "topo/topo_local.h"
#include "util/log.h"
#include "util/settings.h"

static const struct weft_tp_ops *const transports[WEFT_TP_COUNT] = {
    [WEFT_TP_SHM] = &weft_tp_shm_ops,
    [WEFT_TP_SOCKET] = &weft_tp_socket_ops,
};

double weft_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool status_is_fatal(weft_status_t st)
{
	return st == WEFT_ERR_REMOTE || st == WEFT_ERR_TIMEOUT || st == WEFT_ERR_ABORTED ||
	       st == WEFT_ERR_SYSTEM || st == WEFT_ERR_INTERNAL;
}

static weft_status_t vfail(struct weft_comm *comm, weft_status_t status, int errnum,
			   const char *fmt, va_list ap)
{
	char msg[WEFT_ERR_MSG_BYTES];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* The last error is what weft_comm_last_error reports, except that the
	 * first fatal one stays: it is the cause of all that follow. */
	if (!status_is_fatal(comm->err.status))
		weft_err_clear(&comm->err);
	if (errnum)
		weft_err_errno(&comm->err, errnum, "rank %d: %s", comm->rank, msg);
	else
		weft_err_set(&comm->err, status, "rank %d: %s", comm->rank, msg);
	int none = WEFT_SUCCESS;
	if (status_is_fatal(status))
		atomic_compare_exchange_strong(&comm->async_error, &none, (int)status);
	return status;
}

weft_status_t weft_comm_fail(struct weft_comm *comm, weft_status_t status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(comm, status, 0, fmt, ap);
	va_end(ap);
	return status;
}

weft_status_t weft_comm_fail_errno(struct weft_comm *comm, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(comm, WEFT_ERR_SYSTEM, errnum, fmt, ap);
	va_end(ap);
	return WEFT_ERR_SYSTEM;
}

const char *weft_comm_peer_transport(const struct weft_comm *comm, int peer)
{
	if (peer == comm->rank)
		return "self";
	const struct weft_tp_comm *tc = comm->peers[peer].tc;
	return tc ? tc->ops->name : "none";
}

bool weft_comm_same_host(const struct weft_comm *comm, int peer)
{
	return strcmp(comm->cards[peer].host_id, comm->cards[comm->rank].host_id) == 0;
}

/* WEFT_TRANSPORTS: "socket,shm" enables those; "^shm" all but those. */
static weft_status_t parse_transports(const char *spec, bool enabled[WEFT_TP_COUNT],
				      struct weft_err *err)
{
	bool negate = spec && spec[0] == '^';
	for (int i = 0; i < WEFT_TP_COUNT; i++)
		enabled[i] = !spec || negate;
	if (!spec)
		return WEFT_SUCCESS;
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", spec + (negate ? 1 : 0));
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int found = -1;
		for (int i = 0; i < WEFT_TP_COUNT; i++)
			if (strcmp(tok, transports[i]->name) == 0)
				found = i;
		if (found < 0)
			return weft_err_set(
			    err, WEFT_ERR_INVALID_ARG,
			    "WEFT_TRANSPORTS=%s: unknown transport '%s' (known: shm, socket)", spec,
			    tok);
		enabled[found] = !negate;
	}
	return WEFT_SUCCESS;
}

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
	if (!in)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "init: no memory for the topology");
	for (int r = 0; r < n; r++) {
		in[r].host_id = comm->cards[r].host_id;
		in[r].hostname = comm->cards[r].hostname;
		in[r].card = &comm->cards[r].topo;
	}
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

weft_status_t weft_comm_local_address(struct weft_comm *comm, struct sockaddr_storage *addr,
				      socklen_t *len)
{
	const char *ifname = weft_setting_str("WEFT_SOCKET_IFNAME");
	if (!ifname && comm->graph.nhosts > 1) {
		ifname = comm->cards[comm->rank].topo.nic;
		if (!ifname[0])
			return weft_comm_fail(
			    comm, WEFT_ERR_INVALID_ARG,
			    "init: the job spans %d hosts and this host has no "
			    "network interface to reach them: set WEFT_SOCKET_IFNAME",
			    comm->graph.nhosts);
	}
	return weft_addr_of_interface(ifname, addr, len, &comm->err);
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
	for (int r = 0; r < comm->nranks; r++) {
		uint32_t idx = 0, cnt = 0;
		for (int q = 0; q < comm->nranks; q++) {
			if (strcmp(comm->cards[q].host_id, comm->cards[r].host_id) == 0) {
				if (q < r)
					idx++;
				cnt++;
			}
		}
		comm->cards[r].local_rank = idx;
		comm->cards[r].local_count = cnt;
	}
	return WEFT_SUCCESS;
}

static weft_status_t init_transports(struct weft_comm *comm)
{
	bool enabled[WEFT_TP_COUNT];
	weft_status_t st =
	    parse_transports(weft_setting_str("WEFT_TRANSPORTS"), enabled, &comm->err);
	if (st != WEFT_SUCCESS)
		return st;
	for (int i = 0; i < WEFT_TP_COUNT; i++) {
		if (!enabled[i])
			continue;
		st = transports[i]->comm_init(comm, &comm->tps[i]);
		if (st != WEFT_SUCCESS)
			return st;
	}
	for (int p = 0; p < comm->nranks; p++) {
		if (p == comm->rank)
			continue;
		int best = 0;
		for (int i = 0; i < WEFT_TP_COUNT; i++) {
			struct weft_tp_comm *tc = comm->tps[i];
			int score = tc ? tc->ops->score(tc, p) : 0;
			if (score > best) {
				best = score;
				comm->peers[p].tc = tc;
			}
		}
		if (!comm->peers[p].tc)
			return weft_comm_fail(
			    comm, WEFT_ERR_INVALID_ARG,
			    "init: no enabled transport reaches rank %d on host %s "
			    "(WEFT_TRANSPORTS=%s)",
			    p, comm->cards[p].hostname,
			    weft_setting_str("WEFT_TRANSPORTS") ?: "all");
		weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT, "rank %d -> rank %d over %s", comm->rank, p,
			 comm->peers[p].tc->ops->name);
	}
	return WEFT_SUCCESS;
}

static weft_status_t connect_peers(struct weft_comm *comm)
{
	double deadline = weft_now() + comm->timeout_s;
	for (;;) {
		int pending = 0, first_pending = -1;
		for (int p = 0; p < comm->nranks; p++) {
			struct weft_peer *peer = &comm->peers[p];
			if (p == comm->rank || peer->conn)
				continue;
			weft_status_t st = peer->tc->ops->connect(peer->tc, p, &peer->conn);
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
			    comm->peers[first_pending].tc->ops->name);
		usleep(50);
	}
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
		if (comm->peers[p].tc && comm->peers[p].tc->chunk_bytes < mine)
			mine = comm->peers[p].tc->chunk_bytes;
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
	comm->scratch_bytes = WEFT_SCRATCH_CHUNKS * comm->chunk_bytes;
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

static void comm_free(struct weft_comm *comm)
{
	if (!comm)
		return;
	if (comm->bs)
		weft_bootstrap_close(comm->bs);
	for (int p = 0; comm->peers && p < comm->nranks; p++)
		comm->peers[p].conn = NULL; /* owned by their transport */
	for (int i = 0; i < WEFT_TP_COUNT; i++)
		if (comm->tps[i])
			comm->tps[i]->ops->comm_fini(comm->tps[i]);
	while (comm->active) { /* requests still open become invalid (weft.h) */
		struct weft_task *t = comm->active;
		comm->active = t->next;
		free(t);
	}
	while (comm->free_tasks) {
		struct weft_task *t = comm->free_tasks;
		comm->free_tasks = t->next;
		free(t);
	}
	weft_topo_graph_free(&comm->graph);
	free(comm->scratch);
	free(comm->ring);
	free(comm->p2p_sent);
	free(comm->p2p_received);
	free(comm->peers);
	free(comm->cards);
	free(comm);
}

weft_status_t weft_comm_create(struct weft_comm **out, int nranks, const struct weft_uid *uid,
			       int rank, const weft_config_t *config,
			       const struct weft_topo_card *known)
{
	struct weft_err *ierr = weft_err_init_record();
	struct weft_comm *comm = calloc(1, sizeof(*comm));
	if (!comm)
		return weft_err_set(ierr, WEFT_ERR_NO_MEMORY,
				    "init: no memory for the communicator");
	comm->rank = rank;
	comm->nranks = nranks;
	comm->secret = uid->secret;
	comm->timeout_s = default_timeout(config);
	double boot_timeout = comm->timeout_s;
	weft_setting_double("WEFT_BOOTSTRAP_TIMEOUT", &boot_timeout);
	comm->cards = calloc((size_t)nranks, sizeof(*comm->cards));
	comm->peers = calloc((size_t)nranks, sizeof(*comm->peers));
	comm->ring = calloc((size_t)nranks, sizeof(int));
	comm->p2p_sent = calloc((size_t)nranks, sizeof(uint32_t));
	comm->p2p_received = calloc((size_t)nranks, sizeof(uint32_t));
	weft_status_t st;
	if (!comm->cards || !comm->peers || !comm->ring || !comm->p2p_sent || !comm->p2p_received) {
		st = weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "init: no memory for %d ranks",
				    nranks);
		goto out_free;
	}
	weft_log_set_rank(rank);

	st = weft_bootstrap_join(uid, rank, nranks, boot_timeout, &comm->bs, &comm->err);
	if (st != WEFT_SUCCESS)
		goto out_free;
	st = exchange_cards(comm, known);
	if (st != WEFT_SUCCESS)
		goto out_free;
	st = place(comm);
	if (st != WEFT_SUCCESS)
		goto out_free;
	comm->oversubscribed = oversubscribed(comm);
	st = weft_topo_bind(weft_setting_str("WEFT_BIND"), me_nic(comm),
			    (int)comm->cards[rank].local_rank, &comm->err);
	if (st != WEFT_SUCCESS)
		goto out_free;
	st = init_transports(comm);
	if (st != WEFT_SUCCESS)
		goto out_free;
	st = connect_peers(comm);
	if (st != WEFT_SUCCESS)
		goto out_free;
	st = agree_chunk(comm);
	if (st != WEFT_SUCCESS)
		goto out_free;
	st = check_isa(comm);
	if (st != WEFT_SUCCESS)
		goto out_free;
	st = weft_tune_init(comm);
	if (st != WEFT_SUCCESS)
		goto out_free;
	st = weft_bootstrap_barrier(comm->bs, &comm->err);
	if (st != WEFT_SUCCESS)
		goto out_free;
	weft_bootstrap_close(comm->bs);
	comm->bs = NULL;
	weft_bootstrap_roots_drain(boot_timeout);
	weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT, "rank %d of %d ready on %s (chunk %zu bytes)", rank,
		 nranks, comm->cards[rank].hostname, comm->chunk_bytes);
	weft_err_clear(ierr);
	*out = comm;
	return WEFT_SUCCESS;

out_free:
	weft_err_clear(ierr);
	weft_err_set(ierr, st, "%s", comm->err.msg[0] ? comm->err.msg : "init failed");
	comm_free(comm);
	weft_bootstrap_roots_drain(boot_timeout); /* let a root here tell the others */
	return st;
}

weft_status_t weft_comm_init_rank(weft_comm_t *comm, int nranks, weft_unique_id_t id, int rank,
				  const weft_config_t *config)
{
	struct weft_err *ierr = weft_err_init_record();
	weft_err_clear(ierr);
	if (!comm)
		return weft_err_set(ierr, WEFT_ERR_INVALID_ARG,
				    "weft_comm_init_rank: comm is NULL");
	*comm = NULL;
	if (nranks < 1 || nranks > WEFT_MAX_RANKS)
		return weft_err_set(ierr, WEFT_ERR_INVALID_ARG,
				    "weft_comm_init_rank: nranks %d is out of range 1..%d", nranks,
				    WEFT_MAX_RANKS);
	if (rank < 0 || rank >= nranks)
		return weft_err_set(ierr, WEFT_ERR_INVALID_ARG,
				    "weft_comm_init_rank: rank %d is out of range 0..%d", rank,
				    nranks - 1);
	if (config && config->size != sizeof(weft_config_t))
		return weft_err_set(ierr, WEFT_ERR_INVALID_ARG,
				    "weft_comm_init_rank: config->size is %zu, expected %zu "
				    "(initialise with WEFT_CONFIG_INIT)",
				    config->size, sizeof(weft_config_t));
	if (config && config->timeout_seconds < 0)
		return weft_err_set(ierr, WEFT_ERR_INVALID_ARG,
				    "weft_comm_init_rank: config->timeout_seconds is negative");
	struct weft_uid uid;
	memcpy(&uid, id.internal, sizeof(uid));
	weft_status_t st = weft_bootstrap_uid_check(&uid, ierr);
	if (st != WEFT_SUCCESS)
		return st;
	return weft_comm_create(comm, nranks, &uid, rank, config, NULL);
}

weft_status_t weft_comm_destroy(weft_comm_t comm)
{
	if (!comm)
		return WEFT_ERR_INVALID_ARG;
	weft_thread_comm_forget(comm);
	comm_free(comm);
	return WEFT_SUCCESS;
}

/* Fail every active task and close the transports so peers notice. */
static void comm_kill(struct weft_comm *comm, weft_status_t status)
{
	if (comm->aborted)
		return;
	comm->aborted = true;
	for (int i = 0; i < WEFT_TP_COUNT; i++)
		if (comm->tps[i])
			comm->tps[i]->ops->abort(comm->tps[i]);
	while (comm->active) {
		struct weft_task *t = comm->active;
		comm->active = t->next;
		t->next = NULL;
		if (t->status == WEFT_INPROGRESS)
			t->status = status;
	}
}

weft_status_t weft_comm_abort(weft_comm_t comm)
{
	if (!comm)
		return WEFT_ERR_INVALID_ARG;
	/* Another thread may be inside a call: only raise the flag here; the
	 * owner's next progress closes the transports. With no call in flight,
	 * do it now. */
	atomic_store(&comm->abort_requested, true);
	int none = WEFT_SUCCESS;
	atomic_compare_exchange_strong(&comm->async_error, &none, (int)WEFT_ERR_ABORTED);
	if (!comm->active)
		comm_kill(comm, WEFT_ERR_ABORTED);
	return WEFT_SUCCESS;
}

weft_status_t weft_comm_get_async_error(weft_comm_t comm, weft_status_t *async_error)
{
	if (!comm || !async_error)
		return WEFT_ERR_INVALID_ARG;
	*async_error = (weft_status_t)atomic_load(&comm->async_error);
	return WEFT_SUCCESS;
}

const char *weft_comm_last_error(weft_comm_t comm)
{
	return comm ? comm->err.msg : "comm is NULL";
}

weft_status_t weft_comm_rank(weft_comm_t comm, int *rank)
{
	if (!comm || !rank)
		return WEFT_ERR_INVALID_ARG;
	*rank = comm->rank;
	return WEFT_SUCCESS;
}

weft_status_t weft_comm_size(weft_comm_t comm, int *nranks)
{
	if (!comm || !nranks)
		return WEFT_ERR_INVALID_ARG;
	*nranks = comm->nranks;
	return WEFT_SUCCESS;
}

/* May @p t run now? The oldest task always may; the ones after it only if
 * all of them, up to @p t, are sends/receives of one group. */
static bool may_run(const struct weft_comm *comm, const struct weft_task *t)
{
	const struct weft_task *head = comm->active;
	if (t == head)
		return true;
	if (!t->group || !weft_task_is_p2p(t))
		return false;
	for (const struct weft_task *q = head; q != t; q = q->next)
		if (q->group != t->group || !weft_task_is_p2p(q))
			return false;
	return true;
}

static weft_status_t step_task(struct weft_comm *comm, struct weft_task *t, double *now)
{
	if (!t->posted) {
		t->posted = true;
		t->last_event = weft_now();
		weft_status_t st = t->algo->post(t);
		if (st != WEFT_SUCCESS && st != WEFT_INPROGRESS)
			return st;
	}
	weft_status_t st = t->algo->progress(t);
	if (st != WEFT_INPROGRESS)
		return st;
	if (*now == 0)
		*now = weft_now();
	if (*now - t->last_event <= comm->timeout_s)
		return st;
	char who[48] = "";
	if (t->waiting_for >= 0)
		snprintf(who, sizeof(who), " waiting for rank %d", t->waiting_for);
	return weft_comm_fail(comm, WEFT_ERR_TIMEOUT, "%s seq %llu: no progress for %.1f s%s",
			      weft_coll_name(t->args.coll),
			      (unsigned long long)weft_tag_number((uint32_t)t->seq),
			      comm->timeout_s, who);
}

static weft_status_t progress_tasks(struct weft_comm *comm)
{
	double now = 0;
	struct weft_task **link = &comm->active;
	while (*link) {
		struct weft_task *t = *link;
		if (!may_run(comm, t))
			break;
		weft_status_t st = step_task(comm, t, &now);
		t->status = st;
		if (st == WEFT_INPROGRESS) {
			link = &t->next;
			continue;
		}
		*link = t->next; /* finished: the request still owns it */
		t->next = NULL;
		if (st != WEFT_SUCCESS) {
			comm_kill(comm, st);
			return st;
		}
	}
	return WEFT_SUCCESS;
}

weft_status_t weft_comm_progress(struct weft_comm *comm)
{
	if (atomic_load(&comm->abort_requested) && !comm->aborted) {
		weft_comm_fail(comm, WEFT_ERR_ABORTED, "communicator aborted by weft_comm_abort");
		comm_kill(comm, WEFT_ERR_ABORTED);
	}
	if (comm->aborted)
		return (weft_status_t)atomic_load(&comm->async_error);
	for (int i = 0; i < WEFT_TP_COUNT; i++) {
		struct weft_tp_comm *tc = comm->tps[i];
		if (!tc)
			continue;
		weft_status_t st = tc->ops->progress(tc);
		if (st != WEFT_SUCCESS && st != WEFT_INPROGRESS) {
			comm_kill(comm, st);
			return st;
		}
	}
	return progress_tasks(comm);
}
