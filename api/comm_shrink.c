/*
 * comm_shrink.c — weft_comm_revoke and weft_comm_shrink: the survivors of a
 * communicator agree on who is gone (health/agree.h) and build a new
 * communicator of the others, ranks renumbered in order, without the
 * launcher and without a fresh unique id: the rank that proposed the
 * agreed value hosts the new bootstrap root (its address is part of the
 * value), and the new key and id are derived from the parent's key, the
 * agreed value and the attempt's number, so that no wire carries them and
 * every connection of the new communicator passes the handshake with the
 * new key. A build that fails (a member, or the root, lost in between) is
 * followed by another agreement, which finds the lost ones gone.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "bootstrap/bootstrap.h"
#include "core/comm_init.h"
#include "core/fail.h"
#include "core/revoke.h"
#include "core/task.h"
#include "health/agree.h"
#include "health/detect.h"
#include "health/health.h"
#include "health/revoke_peers.h"
#include "util/log.h"

struct shrink {
	struct weft_comm *comm;
	int *exclude; /* sorted, without repeats */
	int nexclude;
	int root_fd; /* the root listener this rank bound to propose, or -1 */
	struct weft_uid root_uid;
};

static bool bind_root(void *ctx, unsigned char addr[AGREE_ROOT_BYTES], uint32_t *len)
{
	struct shrink *s = ctx;
	if (s->root_fd < 0) {
		struct sockaddr_storage a;
		socklen_t alen = sizeof(a);
		struct weft_err err = {0};
		if (weft_comm_local_address(s->comm, &a, &alen) != WEFT_SUCCESS ||
		    weft_bootstrap_root_listen((struct sockaddr *)&a, alen, &s->root_fd,
					       &s->root_uid, &err) != WEFT_SUCCESS) {
			weft_log(WEFT_LOG_WARN, WEFT_SUB_COLL,
				 "rank %d: shrink: no root listener: %s", s->comm->rank, err.msg);
			return false;
		}
	}
	if (s->root_uid.addr_len > AGREE_ROOT_BYTES)
		return false;
	memset(addr, 0, AGREE_ROOT_BYTES);
	memcpy(addr, &s->root_uid.addr, s->root_uid.addr_len);
	*len = s->root_uid.addr_len;
	return true;
}

static void close_root(struct shrink *s)
{
	if (s->root_fd >= 0)
		close(s->root_fd);
	s->root_fd = -1;
}

/* The new communicator's key and id: from the parent's key, over the
 * parent's id, the attempt's number and the agreed value (which holds who
 * is left out, who proposed and where the root listens). */
static void derive(const struct weft_comm *comm, uint64_t instance, const struct agree_blob *v,
		   struct weft_key *key, unsigned char id[WEFT_JOB_ID_BYTES])
{
	struct {
		unsigned char parent[WEFT_JOB_ID_BYTES];
		uint64_t instance;
		unsigned char value[WEFT_MAC_BYTES];
	} ctx;
	struct weft_key idkey;
	memset(&ctx, 0, sizeof(ctx));
	memcpy(ctx.parent, comm->id, sizeof(ctx.parent));
	ctx.instance = instance;
	weft_mac(&comm->key, v->bytes, v->len, ctx.value);
	weft_key_derive(key, &comm->key, "weft shrink key", &ctx, sizeof(ctx));
	weft_key_derive(&idkey, &comm->key, "weft shrink id", &ctx, sizeof(ctx));
	memcpy(id, idkey.b, WEFT_JOB_ID_BYTES);
	weft_wipe(&idkey, sizeof(idkey));
}

/* Seconds the new communicator's bootstrap may wait for a member: every
 * member is in weft_comm_shrink already, so one that does not come soon
 * is gone, and the next agreement finds it so. */
static double boot_timeout(const struct weft_comm *comm)
{
	double t = 2 * weft_detect_silence(comm);
	if (t < 10)
		t = 10;
	return t < comm->timeout_s ? t : comm->timeout_s;
}

static bool listed(const struct shrink *s, int r)
{
	for (int i = 0; i < s->nexclude; i++)
		if (s->exclude[i] == r)
			return true;
	return false;
}

static weft_status_t aborted(struct weft_comm *comm, const struct agree_value_hdr *h)
{
	switch (h->why) {
	case AGREE_ABORT_LISTS:
		return weft_comm_report(comm, WEFT_ERR_INVALID_ARG,
					"weft_comm_shrink: ranks %d and %d passed different "
					"exclude lists (every rank must pass the same)",
					h->a, h->b);
	case AGREE_ABORT_TOO_MANY:
		return weft_comm_report(comm, WEFT_ERR_NOT_SUPPORTED,
					"weft_comm_shrink: more than %d ranks would be left out "
					"at once",
					AGREE_MAX_EXCL);
	default:
		return weft_comm_report(comm, WEFT_ERR_INVALID_ARG,
					"weft_comm_shrink: every rank would be left out");
	}
}

/* For each rank of the new communicator (the members of @p value, in
 * order), its pid when it runs on this host, else 0: the root checks them
 * while it waits for joins. NULL without memory (the root then waits). */
static int64_t *member_pids(const struct weft_comm *comm, const void *value, int size)
{
	const struct agree_value_hdr *h = agree_blob_hdr(value);
	const uint32_t *excl = agree_blob_excl(value);
	int64_t *pids = calloc((size_t)size, sizeof(*pids));
	if (!pids)
		return NULL;
	for (int r = 0, k = 0; r < comm->nranks && k < size; r++) {
		bool out = false;
		for (uint32_t i = 0; i < h->nexcl && !out; i++)
			out = (int)(excl[i] & ((1u << AGREE_RANK_BITS) - 1)) == r;
		if (!out)
			pids[k++] = weft_comm_same_host(comm, r) ? (int64_t)comm->cards[r].pid : 0;
	}
	return pids;
}

/* This rank joins the new communicator as @p newrank of @p size. */
static weft_status_t join(struct shrink *s, const struct weft_agree_result *res, int size,
			  int newrank, weft_comm_t *newcomm)
{
	struct weft_comm *comm = s->comm;
	const struct agree_value_hdr *h = agree_blob_hdr(res->value);
	struct weft_uid uid;
	unsigned char id[WEFT_JOB_ID_BYTES];
	double boot = boot_timeout(comm);
	memset(&uid, 0, sizeof(uid));
	derive(comm, res->instance, res->value, &uid.key, id);
	weft_status_t st = WEFT_SUCCESS;
	struct weft_err err = {0};
	if (res->composed_here) { /* this rank's listener is the root: serve it */
		int64_t *pids = member_pids(comm, res->value, size);
		st = weft_bootstrap_root_serve(s->root_fd, &uid.key, id, boot, pids,
					       pids ? size : 0, &err);
		free(pids);
		s->root_fd = -1;
	}
	close_root(s);
	uid.magic = WEFT_UID_MAGIC;
	uid.version = WEFT_UID_VERSION;
	uid.reserved = WEFT_UID_LISTENING;
	uid.addr_len = h->root_len;
	memcpy(&uid.addr, h->root, h->root_len);
	weft_config_t config = WEFT_CONFIG_INIT;
	config.timeout_seconds = comm->timeout_s;
	config.progress_thread = comm->pt ? 1 : -1;
	struct weft_comm *child = NULL;
	if (st == WEFT_SUCCESS)
		st = weft_comm_create_within(&child, size, &uid, newrank, &config,
					     &comm->cards[comm->rank].topo, boot,
					     &weft_health_service);
	if (st == WEFT_SUCCESS && memcmp(child->id, id, sizeof(id)) != 0)
		st = weft_comm_abandon(child, WEFT_ERR_REMOTE); /* not the root agreed on */
	if (st == WEFT_SUCCESS)
		st = weft_api_comm_finish(child, newcomm);
	weft_wipe(&uid, sizeof(uid));
	if (st != WEFT_SUCCESS)
		return weft_comm_report(comm, st,
					"weft_comm_shrink: building the communicator of "
					"attempt %llu failed: %s",
					(unsigned long long)res->instance,
					err.msg[0] ? err.msg : weft_init_last_error());
	return WEFT_SUCCESS;
}

/* The agreed value: a new communicator without the ranks it leaves out,
 * or the reason every rank fails. @p built: this rank built it. */
static weft_status_t build(struct shrink *s, const struct weft_agree_result *res,
			   weft_comm_t *newcomm, bool *built)
{
	struct weft_comm *comm = s->comm;
	const struct agree_value_hdr *h = agree_blob_hdr(res->value);
	*built = false;
	if (h->kind == AGREE_ABORT) {
		close_root(s);
		return aborted(comm, h);
	}
	const uint32_t *excl = agree_blob_excl(res->value);
	int below = 0;
	for (uint32_t i = 0; i < h->nexcl; i++) {
		int r = (int)(excl[i] & ((1u << AGREE_RANK_BITS) - 1));
		weft_comm_mark_dead(comm, r, (weft_rank_failure_t)(excl[i] >> AGREE_RANK_BITS));
		below += r < comm->rank;
	}
	weft_rank_failure_t how = agree_blob_left_out(res->value, comm->rank);
	if (how != WEFT_RANK_ALIVE) {
		close_root(s);
		if (how == WEFT_RANK_EXCLUDED && listed(s, comm->rank))
			return WEFT_SUCCESS; /* as asked: no new communicator here */
		return weft_comm_report(
		    comm, WEFT_ERR_REVOKED,
		    "weft_comm_shrink: this rank was left out (rank %d found it "
		    "%s): the job goes on without it",
		    h->proposer, weft_dead_name(how));
	}
	weft_status_t st = join(s, res, comm->nranks - (int)h->nexcl, comm->rank - below, newcomm);
	*built = st == WEFT_SUCCESS;
	if (*built)
		weft_log(WEFT_LOG_INFO, WEFT_SUB_INIT,
			 "rank %d: shrink: rank %d of the new communicator of %d (attempt %llu)",
			 comm->rank, comm->rank - below, comm->nranks - (int)h->nexcl,
			 (unsigned long long)res->instance);
	return st;
}

/* A communicator of one rank has no one to agree with: its value is its
 * own, the attempts counted on the communicator. */
static weft_status_t shrink_alone(struct shrink *s, weft_comm_t *newcomm)
{
	struct weft_comm *comm = s->comm;
	if (s->nexclude == 1)
		return weft_comm_report(comm, WEFT_ERR_INVALID_ARG,
					"weft_comm_shrink: the exclude list leaves no rank");
	struct agree_value_hdr h = {.kind = AGREE_MEMBERS, .a = -1, .b = -1};
	if (!bind_root(s, h.root, &h.root_len))
		return weft_comm_report(comm, WEFT_ERR_SYSTEM,
					"weft_comm_shrink: cannot open the new communicator's "
					"bootstrap root here");
	struct weft_agree_result res = {.instance = comm->shrinks++, .composed_here = true};
	res.value = agree_blob_new(&h, NULL);
	bool built;
	weft_status_t st =
	    res.value ? build(s, &res, newcomm, &built)
		      : weft_comm_report(comm, WEFT_ERR_NO_MEMORY, "weft_comm_shrink: no memory");
	free(res.value);
	return st;
}

/* Agree, build; agree again while builds fail and time is left. */
static weft_status_t shrink_run(struct shrink *s, weft_comm_t *newcomm)
{
	struct weft_comm *comm = s->comm;
	struct weft_agree_req req = {.exclude = s->exclude,
				     .nexclude = s->nexclude,
				     .deadline = weft_now() + comm->timeout_s,
				     .root = bind_root,
				     .root_ctx = s};
	for (int attempt = 0;; attempt++) {
		struct weft_agree_result res;
		weft_status_t st = weft_agree_run(comm, &req, &res);
		if (st != WEFT_SUCCESS)
			return st;
		bool built;
		st = build(s, &res, newcomm, &built);
		const struct agree_value_hdr *h = agree_blob_hdr(res.value);
		bool final = built || h->kind == AGREE_ABORT ||
			     agree_blob_left_out(res.value, comm->rank) != WEFT_RANK_ALIVE;
		free(res.value);
		weft_agree_done(comm, built, !final);
		if (final || attempt >= comm->nranks || weft_now() > req.deadline)
			return st;
		weft_log(WEFT_LOG_WARN, WEFT_SUB_COLL,
			 "rank %d: shrink: attempt %d could not build the new communicator; "
			 "agreeing again without the ranks lost meanwhile",
			 comm->rank, attempt);
	}
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* The caller's exclude list, checked, sorted, into s. */
static weft_status_t take_list(struct shrink *s, const int *exclude, int nexclude)
{
	struct weft_comm *comm = s->comm;
	if (nexclude < 0 || (nexclude > 0 && !exclude))
		return weft_comm_report(comm, WEFT_ERR_INVALID_ARG, "weft_comm_shrink: %s",
					nexclude < 0 ? "nexclude is negative"
						     : "exclude is NULL with nexclude above 0");
	if (nexclude > comm->nranks)
		return weft_comm_report(comm, WEFT_ERR_INVALID_ARG,
					"weft_comm_shrink: nexclude %d is more than the %d ranks",
					nexclude, comm->nranks);
	s->exclude = malloc(((size_t)nexclude + 1) * sizeof(int));
	if (!s->exclude)
		return weft_comm_report(comm, WEFT_ERR_NO_MEMORY, "weft_comm_shrink: no memory");
	if (nexclude)
		memcpy(s->exclude, exclude, (size_t)nexclude * sizeof(int));
	s->nexclude = nexclude;
	qsort(s->exclude, (size_t)nexclude, sizeof(int), cmp_int);
	for (int i = 0; i < nexclude; i++) {
		int r = s->exclude[i];
		if (r < 0 || r >= comm->nranks)
			return weft_comm_report(
			    comm, WEFT_ERR_INVALID_ARG,
			    "weft_comm_shrink: exclude lists rank %d, not a rank "
			    "(0..%d)",
			    r, comm->nranks - 1);
		if (i > 0 && s->exclude[i - 1] == r)
			return weft_comm_report(comm, WEFT_ERR_INVALID_ARG,
						"weft_comm_shrink: exclude lists rank %d twice", r);
	}
	return WEFT_SUCCESS;
}

/* Operations in flight on a healthy communicator: shrinking would race
 * them, unless they are revoked first (WEFT_SHRINK_ABORT). */
static bool busy(struct weft_comm *comm)
{
	weft_comm_lock(comm);
	bool b = comm->active && !comm->aborted && !weft_comm_revoked(comm);
	weft_comm_unlock(comm);
	return b;
}

static weft_status_t check_call(struct weft_comm *comm, int flags, weft_comm_t *newcomm)
{
	if (!comm)
		return weft_err_set(weft_err_init_fresh(), WEFT_ERR_INVALID_ARG,
				    "weft_comm_shrink: comm is NULL");
	if (weft_task_in_callback() || weft_api_group_open())
		return weft_comm_report(comm, WEFT_ERR_INVALID_ARG, "weft_comm_shrink: %s",
					weft_task_in_callback()
					    ? WEFT_API_IN_CALLBACK
					    : "called between weft_group_start and weft_group_end");
	if (!newcomm)
		return weft_comm_report(comm, WEFT_ERR_INVALID_ARG,
					"weft_comm_shrink: newcomm is NULL");
	*newcomm = NULL;
	if (flags & ~WEFT_SHRINK_ABORT)
		return weft_comm_report(
		    comm, WEFT_ERR_INVALID_ARG,
		    "weft_comm_shrink: flags 0x%x: expected WEFT_SHRINK_DEFAULT "
		    "or WEFT_SHRINK_ABORT",
		    (unsigned)flags);
	bool failed = atomic_load(&comm->async_error) != WEFT_SUCCESS;
	if (!failed && !(flags & WEFT_SHRINK_ABORT) && busy(comm))
		return weft_comm_report(comm, WEFT_ERR_INVALID_ARG,
					"weft_comm_shrink: operations are still in flight on this "
					"communicator (in another thread, or requests not yet "
					"complete): wait for them, or pass WEFT_SHRINK_ABORT to "
					"revoke them");
	return WEFT_SUCCESS;
}

weft_status_t weft_comm_shrink(weft_comm_t comm, const int *exclude, int nexclude, int flags,
			       weft_comm_t *newcomm)
{
	weft_status_t st = check_call(comm, flags, newcomm);
	if (st != WEFT_SUCCESS)
		return st;
	struct shrink s = {.comm = comm, .root_fd = -1};
	st = take_list(&s, exclude, nexclude);
	if (st == WEFT_SUCCESS) {
		/* A failed communicator is revoked first, so that every rank
		 * stops what it waits for and comes to the agreement. */
		if (atomic_load(&comm->async_error) != WEFT_SUCCESS || (flags & WEFT_SHRINK_ABORT))
			weft_revoke(comm);
		st = comm->nranks == 1 ? shrink_alone(&s, newcomm) : shrink_run(&s, newcomm);
	}
	close_root(&s);
	free(s.exclude);
	return st;
}

weft_status_t weft_comm_revoke(weft_comm_t comm)
{
	if (!comm)
		return weft_err_set(weft_err_init_fresh(), WEFT_ERR_INVALID_ARG,
				    "weft_comm_revoke: comm is NULL");
	if (weft_task_in_callback())
		return weft_comm_report(comm, WEFT_ERR_INVALID_ARG, "weft_comm_revoke: %s",
					WEFT_API_IN_CALLBACK);
	weft_revoke(comm);
	return WEFT_SUCCESS;
}
