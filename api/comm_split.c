/* comm_split.c — weft_comm_split: ranks of one colour form a new
 * communicator, ordered by key then parent rank, with fresh connections (so
 * its messages never mix with the parent's) and the parent's topology. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "bootstrap/bootstrap.h"
#include "core/comm_init.h"
#include "core/fail.h"
#include "health/health.h"

struct split_entry {
	int32_t color, key;
};

/* The child's key, which every member derives from the parent's (no wire
 * carries it): the parent's id, the call number of the split, the leader
 * and the colour make it different for every group and every split. */
static void child_key(const struct weft_comm *comm, uint64_t call, int leader, int color,
		      struct weft_key *out)
{
	struct {
		unsigned char parent[WEFT_JOB_ID_BYTES];
		uint64_t call;
		int32_t leader, color;
	} ctx;
	memset(&ctx, 0, sizeof(ctx));
	memcpy(ctx.parent, comm->id, sizeof(ctx.parent));
	ctx.call = call;
	ctx.leader = leader;
	ctx.color = color;
	weft_key_derive(out, &comm->key, "weft split child", &ctx, sizeof(ctx));
}

/* The leader's root for the child; the id handed to the members carries
 * no key (they derive it). */
static weft_status_t make_child_id(struct weft_comm *comm, const struct weft_key *key,
				   struct weft_uid *uid)
{
	struct sockaddr_storage addr;
	socklen_t len;
	weft_status_t st = weft_comm_local_address(comm, &addr, &len); /* where peers reach us */
	if (st == WEFT_SUCCESS)
		st = weft_bootstrap_root_start((struct sockaddr *)&addr, len, key, comm->timeout_s,
					       uid, &comm->err);
	weft_wipe(&uid->key, sizeof(uid->key));
	return st;
}

/* Join the group's new communicator through the leader's @p id, with the
 * key every member derived. */
static weft_status_t join_child(struct weft_comm *comm, const weft_unique_id_t *id, int leader,
				const struct weft_key *ckey, int size, int newrank,
				weft_comm_t *newcomm)
{
	struct weft_uid uid;
	weft_status_t st;
	memcpy(&uid, id->internal, sizeof(uid));
	uid.key = *ckey;
	if (uid.magic != WEFT_UID_MAGIC) {
		st = weft_comm_fail(
		    comm, WEFT_ERR_REMOTE,
		    "weft_comm_split: rank %d could not start the new group's bootstrap", leader);
	} else {
		weft_config_t config = WEFT_CONFIG_INIT;
		config.timeout_seconds = comm->timeout_s;
		/* as the parent, whatever the setting says */
		config.progress_thread = comm->pt ? 1 : -1;
		struct weft_comm *child;
		st = weft_comm_create(&child, size, &uid, newrank, &config,
				      &comm->cards[comm->rank].topo, &weft_health_service);
		if (st == WEFT_SUCCESS)
			st = weft_api_comm_finish(child, newcomm);
		if (st != WEFT_SUCCESS)
			weft_comm_fail(comm, st, "weft_comm_split: %s", weft_init_last_error());
	}
	weft_wipe(&uid, sizeof(uid));
	return st;
}

weft_status_t weft_comm_split(weft_comm_t comm, int color, int key, weft_comm_t *newcomm)
{
	if (!comm)
		return weft_err_set(weft_err_init_fresh(), WEFT_ERR_INVALID_ARG,
				    "weft_comm_split: comm is NULL");
	if (!newcomm) /* the parent is there: its last error says so */
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
				      "weft_comm_split: newcomm is NULL");
	*newcomm = NULL;
	if (color < 0 && color != WEFT_SPLIT_NOCOLOR)
		return weft_comm_fail(
		    comm, WEFT_ERR_INVALID_ARG,
		    "weft_comm_split: color %d is negative (use WEFT_SPLIT_NOCOLOR)", color);
	int n = comm->nranks;
	struct weft_key ckey = {{0}}; /* the child's */
	struct split_entry *all = calloc((size_t)n, sizeof(*all));
	weft_unique_id_t *ids = calloc((size_t)n, sizeof(*ids));
	weft_status_t st = WEFT_SUCCESS;
	if (!all || !ids) {
		st = weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "weft_comm_split: no memory");
		goto out_free;
	}
	all[comm->rank].color = color;
	all[comm->rank].key = key;
	st = weft_allgather(WEFT_IN_PLACE, all, sizeof(*all), WEFT_UINT8, comm);
	if (st != WEFT_SUCCESS)
		goto out_free;
	uint64_t call = comm->seq; /* the same on every rank here */

	/* My new rank: how many members sort before me; the leader is the one
	 * that sorts first. */
	int size = 0, newrank = 0, leader = -1;
	for (int r = 0; r < n && color != WEFT_SPLIT_NOCOLOR; r++) {
		if (all[r].color != color)
			continue;
		size++;
		bool before = all[r].key < key || (all[r].key == key && r < comm->rank);
		if (before)
			newrank++;
		if (leader < 0 || all[r].key < all[leader].key)
			leader = r;
	}
	/* A leader that cannot start its root still takes part in the
	 * exchange (with an empty id), so that its group fails at once. */
	weft_status_t leader_st = WEFT_SUCCESS;
	if (leader >= 0)
		child_key(comm, call, leader, color, &ckey);
	if (leader == comm->rank) {
		struct weft_uid uid;
		memset(&uid, 0, sizeof(uid));
		leader_st = make_child_id(comm, &ckey, &uid);
		if (leader_st == WEFT_SUCCESS)
			memcpy(ids[comm->rank].internal, &uid, sizeof(uid));
	}
	st = weft_allgather(WEFT_IN_PLACE, ids, sizeof(*ids), WEFT_UINT8, comm);
	if (st == WEFT_SUCCESS)
		st = leader_st;
	if (st != WEFT_SUCCESS || color == WEFT_SPLIT_NOCOLOR)
		goto out_free;

	st = join_child(comm, &ids[leader], leader, &ckey, size, newrank, newcomm);
out_free:
	weft_wipe(&ckey, sizeof(ckey));
	free(ids);
	free(all);
	return st;
}
