/* agree_run.c — the caller's side of the shrink's agreement (agree.h):
 * propose when every lower rank is gone, otherwise wait for the decision
 * and ask the proposer (and now and then another rank) for it; fail with
 * a sentence when there is no quorum, a rank left, or the time is up. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/fail.h"
#include "core/watch_int.h"
#include "health/agree.h"
#include "health/agree_int.h"
#include "health/detect.h"
#include "util/log.h"

#define GONE_CACHE_S 0.002 /* a rank's checks are made at most this often */
#define LIST_SHOWN   12	   /* ranks a message names before "and N more" */

struct run {
	struct weft_comm *comm;
	struct weft_watch *w;
	const struct weft_agree_req *req;
	uint64_t instance;
	double silence, now;
	unsigned char *tx;
	struct agree_proposer prop;
	bool has_prop;
	int rival;
	double rival_until;
	double learn_sent;
	unsigned learns;
	unsigned char *how; /* [n] the last checks' answer */
	double *checked;    /* [n] when */
};

static weft_rank_failure_t run_gone(void *ctx, int r)
{
	struct run *run = ctx;
	if (run->now - run->checked[r] >= GONE_CACHE_S || run->checked[r] == 0) {
		run->how[r] =
		    (unsigned char)weft_detect_locked(run->comm, r, run->now, run->silence);
		run->checked[r] = run->now;
	}
	return (weft_rank_failure_t)run->how[r];
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

static bool run_listed(void *ctx, int r)
{
	struct run *run = ctx;
	return run->req->nexclude > 0 && bsearch(&r, run->req->exclude, (size_t)run->req->nexclude,
						 sizeof(int), cmp_int) != NULL;
}

static void run_send(void *ctx, int to, const struct agree_msg *m)
{
	struct run *run = ctx;
	weft_agree_send(run->w, to, m, run->tx);
}

static bool run_root(void *ctx, unsigned char addr[AGREE_ROOT_BYTES], uint32_t *len)
{
	struct run *run = ctx;
	return run->req->root(run->req->root_ctx, addr, len);
}

/* The rank expected to propose: the lowest that is not gone and not on the
 * exclude list (or a lower one whose ballot made this rank stand back). */
static int candidate(struct run *run)
{
	if (run->rival >= 0 && run->now < run->rival_until &&
	    run_gone(run, run->rival) == WEFT_RANK_ALIVE)
		return run->rival;
	run->rival = -1;
	int fallback = -1;
	for (int r = 0; r < run->comm->nranks; r++) {
		if (run_gone(run, r) != WEFT_RANK_ALIVE)
			continue;
		if (!run_listed(run, r))
			return r;
		if (fallback < 0)
			fallback = r; /* every live rank is listed: the agreement aborts */
	}
	return fallback;
}

/* "0, 2, 5 (killed)" for the ranks @p pick selects, at most LIST_SHOWN. */
static void list_ranks(struct run *run, bool (*pick)(struct run *, int), bool with_how, char *buf,
		       size_t size)
{
	size_t used = 0;
	int shown = 0, more = 0;
	buf[0] = '\0';
	for (int r = 0; r < run->comm->nranks && used < size; r++) {
		if (!pick(run, r))
			continue;
		if (shown == LIST_SHOWN) {
			more++;
			continue;
		}
		weft_rank_failure_t how = run_gone(run, r);
		int n = snprintf(buf + used, size - used, "%s%d%s%s%s", shown ? ", " : "", r,
				 with_how ? " (" : "", with_how ? weft_dead_name(how) : "",
				 with_how ? ")" : "");
		used += n > 0 ? (size_t)n : 0;
		shown++;
	}
	if (more && used < size)
		snprintf(buf + used, size - used, " and %d more", more);
	if (!shown)
		snprintf(buf, size, "none");
}

static bool promised(struct run *run, int r)
{
	return r == run->comm->rank || run->prop.reply[r] == AGREE_R_PROMISED ||
	       run->prop.reply[r] == AGREE_R_ACCEPTED;
}

static bool not_reached(struct run *run, int r)
{
	return !promised(run, r);
}

static bool waited_for(struct run *run, int r)
{
	return r != run->comm->rank && !promised(run, r) && run_gone(run, r) == WEFT_RANK_ALIVE;
}

static weft_status_t no_quorum(struct run *run)
{
	struct agree_msg m = {.type = AGREE_NO_QUORUM,
			      .instance = run->instance,
			      .ballot = (uint64_t)run->prop.reached};
	for (int r = 0; r < run->comm->nranks; r++)
		if (r != run->comm->rank && promised(run, r))
			run_send(run, r, &m);
	char yes[256], no[384];
	list_ranks(run, promised, false, yes, sizeof(yes));
	list_ranks(run, not_reached, true, no, sizeof(no));
	return weft_comm_report(run->comm, WEFT_ERR_REMOTE,
				"weft_comm_shrink: no quorum: %d of %d ranks take part (%s), and "
				"across hosts more than half must; not reached: %s",
				run->prop.reached, run->comm->nranks, yes, no);
}

static void decided(struct run *run)
{
	struct weft_agree *ag = agree_of(run->w);
	struct agree_msg m = {.type = AGREE_DECIDE,
			      .from = run->comm->rank,
			      .instance = run->instance,
			      .value = run->prop.value},
			 out;
	agree_acceptor_take(&ag->acc, &m, &out); /* learn it */
	for (int r = 0; r < run->comm->nranks; r++)
		if (r != run->comm->rank && run_gone(run, r) == WEFT_RANK_ALIVE)
			run_send(run, r, &m);
}

static weft_status_t propose(struct run *run)
{
	struct weft_agree *ag = agree_of(run->w);
	if (!run->has_prop) {
		if (!agree_proposer_init(&run->prop, run->comm->rank, run->comm->nranks,
					 run->instance))
			return weft_comm_report(run->comm, WEFT_ERR_NO_MEMORY,
						"weft_comm_shrink: no memory for the agreement");
		run->has_prop = true;
	}
	run->prop.flags = ag->acc.retry ? AGREE_F_RETRY : 0;
	ag->prop = &run->prop;
	struct agree_env env = {.ctx = run,
				.nranks = run->comm->nranks,
				.one_host = run->comm->graph.nhosts <= 1,
				.gone = run_gone,
				.listed = run_listed,
				.send = run_send,
				.root = run_root};
	switch (agree_proposer_step(&run->prop, &ag->acc, &env, run->now)) {
	case AGREE_WAIT: return WEFT_INPROGRESS;
	case AGREE_DECIDED: decided(run); return WEFT_INPROGRESS;
	case AGREE_NOQUORUM: return no_quorum(run);
	case AGREE_STAND_BACK:
		run->rival = run->prop.rival;
		run->rival_until = run->now + run->silence;
		ag->prop = NULL;
		return WEFT_INPROGRESS;
	case AGREE_NO_ROOT:
		return weft_comm_report(run->comm, WEFT_ERR_SYSTEM,
					"weft_comm_shrink: cannot open the new communicator's "
					"bootstrap root here");
	case AGREE_OUT_OF_ROOM: break;
	}
	return weft_comm_report(run->comm, WEFT_ERR_NO_MEMORY,
				"weft_comm_shrink: no memory for the agreement");
}

/* A waiter asks the candidate for the decision, and every fourth time
 * another rank too (the candidate may be cut off from this rank alone). */
static void ask(struct run *run, int c)
{
	agree_of(run->w)->prop = NULL;
	if (run->now - run->learn_sent < AGREE_RESEND_S)
		return;
	run->learn_sent = run->now;
	struct agree_msg m = {.type = AGREE_LEARN,
			      .flags = agree_of(run->w)->acc.retry ? AGREE_F_RETRY : 0,
			      .instance = run->instance};
	run_send(run, c, &m);
	if (++run->learns % 4)
		return;
	int n = run->comm->nranks;
	for (int k = 1; k < n; k++) {
		int r = (int)((run->learns / 4 + (unsigned)k) % (unsigned)n);
		if (r != c && r != run->comm->rank && run_gone(run, r) == WEFT_RANK_ALIVE) {
			run_send(run, r, &m);
			return;
		}
	}
}

static weft_status_t timed_out(struct run *run, int c)
{
	char who[384];
	if (c != run->comm->rank)
		return weft_comm_report(run->comm, WEFT_ERR_TIMEOUT,
					"weft_comm_shrink: no decision within %.1f s: rank %d, "
					"which should propose, is alive but did not decide",
					run->comm->timeout_s, c);
	list_ranks(run, waited_for, false, who, sizeof(who));
	return weft_comm_report(run->comm, WEFT_ERR_TIMEOUT,
				"weft_comm_shrink: no decision within %.1f s: ranks %s are alive "
				"but did not call weft_comm_shrink",
				run->comm->timeout_s, who);
}

/* Has the instance ended for this rank: decided, or failed? */
static weft_status_t ended(struct run *run, struct weft_agree_result *res)
{
	struct agree_acceptor *acc = &agree_of(run->w)->acc;
	const struct agree_blob *v = agree_acceptor_decided(acc, run->instance);
	if (v) {
		res->instance = run->instance;
		res->value = agree_blob_copy(v);
		res->composed_here = run->has_prop && agree_blob_equal(run->prop.composed, v);
		return res->value ? WEFT_SUCCESS
				  : weft_comm_report(run->comm, WEFT_ERR_NO_MEMORY,
						     "weft_comm_shrink: no memory");
	}
	if (acc->no_quorum_from >= 0)
		return weft_comm_report(run->comm, WEFT_ERR_REMOTE,
					"weft_comm_shrink: no quorum: rank %d reached only %llu of "
					"%d ranks, and across hosts more than half must take part",
					acc->no_quorum_from,
					(unsigned long long)acc->no_quorum_reached,
					run->comm->nranks);
	if (acc->built_by >= 0)
		return weft_comm_report(run->comm, WEFT_ERR_REMOTE,
					"weft_comm_shrink: rank %d built the communicator agreed "
					"at attempt %llu, which this rank failed to join: the job "
					"went on without it",
					acc->built_by, (unsigned long long)acc->built_by_instance);
	for (int r = 0; r < run->comm->nranks; r++)
		if (weft_detect_left_locked(run->comm, r))
			return weft_comm_report(
			    run->comm, WEFT_ERR_REMOTE,
			    "weft_comm_shrink: rank %d (pid %d, this host) is alive but has left "
			    "the communicator (destroyed it): it cannot take part",
			    r, (int)run->comm->cards[r].pid);
	return WEFT_INPROGRESS;
}

static weft_status_t loop(struct run *run, struct weft_agree_result *res)
{
	for (;;) {
		run->now = weft_now();
		weft_status_t st = ended(run, res);
		if (st != WEFT_INPROGRESS)
			return st;
		int c = candidate(run);
		if (run->now > run->req->deadline)
			return timed_out(run, c);
		st = c == run->comm->rank ? propose(run) : (ask(run, c), WEFT_INPROGRESS);
		if (st != WEFT_INPROGRESS)
			return st;
		watch_wait_changed(run->w, 0.005);
	}
}

weft_status_t weft_agree_run(struct weft_comm *comm, const struct weft_agree_req *req,
			     struct weft_agree_result *res)
{
	struct weft_watch *w = comm->watch;
	int n = comm->nranks;
	struct run run = {.comm = comm, .w = w, .req = req, .rival = -1};
	memset(res, 0, sizeof(*res));
	run.silence = weft_detect_silence(comm);
	run.tx = malloc(AGREE_DATAGRAM_MAX);
	run.how = calloc((size_t)n, 1);
	run.checked = calloc((size_t)n, sizeof(double));
	weft_status_t st = WEFT_ERR_NO_MEMORY;
	if (!w || !run.tx || !run.how || !run.checked) {
		st = weft_comm_report(comm, w ? WEFT_ERR_NO_MEMORY : WEFT_ERR_INTERNAL,
				      "weft_comm_shrink: %s",
				      w ? "no memory for the agreement" : "no watch");
		goto out_free;
	}
	pthread_mutex_lock(&w->lock);
	run.instance = agree_of(w)->acc.instance;
	agree_acceptor_join(&agree_of(w)->acc, run.instance,
			    agree_list_hash(req->exclude, req->nexclude));
	weft_log(WEFT_LOG_INFO, WEFT_SUB_COLL, "rank %d: shrink: agreement %llu starts", comm->rank,
		 (unsigned long long)run.instance);
	st = loop(&run, res);
	agree_of(w)->prop = NULL;
	if (st != WEFT_SUCCESS)
		agree_acceptor_leave(&agree_of(w)->acc, false, false, false);
	pthread_mutex_unlock(&w->lock);
out_free:
	if (run.has_prop)
		agree_proposer_free(&run.prop);
	free(run.tx);
	free(run.how);
	free(run.checked);
	return st;
}

void weft_agree_done(struct weft_comm *comm, bool built, bool failed)
{
	struct weft_watch *w = comm->watch;
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	agree_acceptor_leave(&agree_of(w)->acc, true, built, failed);
	pthread_mutex_unlock(&w->lock);
}

weft_status_t weft_agree_attach(struct weft_comm *comm)
{
	struct weft_watch *w = comm->watch;
	if (!w)
		return WEFT_SUCCESS; /* one rank: nothing to agree with */
	struct weft_agree *ag = weft_agree_new(w);
	if (!ag)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "init: no memory for the watch");
	weft_status_t st = weft_watch_serve(w, &weft_agree_watch, ag);
	if (st != WEFT_SUCCESS)
		weft_agree_free(ag);
	return st;
}
