/* table.c — the algorithm table, WEFT_ALGO, and per-call selection. */
#include <stdio.h>
#include <string.h>

#include "algorithms/algo.h"
#include "core/comm.h"
#include "util/parse.h"

/* The first entry of each list is the fallback when no estimate applies. */
static const struct weft_algo *const allreduce_algos[] = {&weft_allreduce_ring,
							  &weft_allreduce_tree,
							  &weft_allreduce_rhd,
							  &weft_allreduce_hier,
							  &weft_allreduce_rail,
							  &weft_allreduce_shm,
							  NULL};
static const struct weft_algo *const allgather_algos[] = {
    &weft_allgather_ring, &weft_allgather_bruck, &weft_allgather_hier, NULL};
static const struct weft_algo *const reduce_scatter_algos[] = {&weft_reduce_scatter_ring, NULL};
static const struct weft_algo *const broadcast_algos[] = {&weft_broadcast_ring,
							  &weft_broadcast_tree, NULL};
static const struct weft_algo *const reduce_algos[] = {&weft_reduce_tree, NULL};
static const struct weft_algo *const alltoall_algos[] = {&weft_alltoall_pairwise, NULL};
static const struct weft_algo *const alltoallv_algos[] = {&weft_alltoallv_pairwise, NULL};
static const struct weft_algo *const gather_algos[] = {&weft_gather_linear, NULL};
static const struct weft_algo *const scatter_algos[] = {&weft_scatter_linear, NULL};
static const struct weft_algo *const barrier_algos[] = {&weft_barrier_dissem, NULL};
static const struct weft_algo *const send_algos[] = {&weft_send_direct, NULL};
static const struct weft_algo *const recv_algos[] = {&weft_recv_direct, NULL};

static const struct {
	const char *name;
	const struct weft_algo *const *algos;
} colls[WEFT_COLL_COUNT] = {
    [WEFT_COLL_ALLREDUCE] = {"allreduce", allreduce_algos},
    [WEFT_COLL_ALLGATHER] = {"allgather", allgather_algos},
    [WEFT_COLL_REDUCE_SCATTER] = {"reduce_scatter", reduce_scatter_algos},
    [WEFT_COLL_BROADCAST] = {"broadcast", broadcast_algos},
    [WEFT_COLL_REDUCE] = {"reduce", reduce_algos},
    [WEFT_COLL_ALLTOALL] = {"alltoall", alltoall_algos},
    [WEFT_COLL_BARRIER] = {"barrier", barrier_algos},
    [WEFT_COLL_SEND] = {"send", send_algos},
    [WEFT_COLL_RECV] = {"recv", recv_algos},
    [WEFT_COLL_ALLTOALLV] = {"alltoallv", alltoallv_algos},
    [WEFT_COLL_GATHER] = {"gather", gather_algos},
    [WEFT_COLL_SCATTER] = {"scatter", scatter_algos},
};

const struct weft_algo *const *weft_algos_for(enum weft_coll_kind coll)
{
	return colls[coll].algos;
}

const struct weft_algo *const *weft_algo_variants_for(enum weft_coll_kind coll)
{
	static const struct weft_algo *const allreduce[] = {&weft_allreduce_hier_leaf, NULL};
	static const struct weft_algo *const none[] = {NULL};
	return coll == WEFT_COLL_ALLREDUCE ? allreduce : none;
}

const struct weft_algo *weft_algo_find(enum weft_coll_kind coll, const char *name)
{
	for (const struct weft_algo *const *a = colls[coll].algos; *a; a++)
		if (strcmp((*a)->name, name) == 0)
			return *a;
	return NULL;
}

weft_status_t weft_algo_parse_forced(const char *spec,
				     const struct weft_algo *forced[WEFT_COLL_COUNT],
				     struct weft_err *err)
{
	for (int c = 0; c < WEFT_COLL_COUNT; c++)
		forced[c] = NULL;
	struct weft_list l;
	weft_list_init(&l, "WEFT_ALGO", spec, ';');
	while (weft_list_next(&l)) {
		char *item = l.item, *colon = strchr(item, ':');
		if (!colon) {
			weft_list_fail(&l, "'%s' is not collective:algorithm", item);
			break;
		}
		*colon = '\0';
		int coll = -1;
		for (int c = 0; c < WEFT_COLL_COUNT; c++)
			if (strcmp(colls[c].name, item) == 0)
				coll = c;
		if (coll < 0) {
			weft_list_fail(&l, "unknown collective '%s'", item);
			break;
		}
		forced[coll] = weft_algo_find((enum weft_coll_kind)coll, colon + 1);
		if (!forced[coll]) {
			weft_list_fail(&l, "%s has no algorithm '%s'", item, colon + 1);
			break;
		}
	}
	if (l.status != WEFT_SUCCESS)
		return weft_err_set(err, l.status, "%s", l.msg);
	return WEFT_SUCCESS;
}
