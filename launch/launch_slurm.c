/*
 * launch_slurm.c — what Slurm says beyond rank and size: the node count
 * (one host or not), this node's task count from the compressed
 * tasks-per-node list ("2(x3),1": two tasks on each of three nodes, then
 * one), and the first node of the step, where rank 0 runs under the
 * default block distribution, as the root.
 *
 * Rank 0 is on the step's first node under the block, cyclic and plane
 * distributions, not under -m arbitrary (`srun -m arbitrary -w h3,h1` puts
 * it on h3 while SLURM_STEP_NODELIST still reads h[1,3]): there the
 * environment names no root, and the error says to use --mpi=pmix (which
 * carries rank 0's id) or WEFT_ROOT. Rank 0 also checks its SLURM_NODEID.
 *
 * A step's own variables (SLURM_STEP_*) win over the allocation's: an
 * `srun -N 1` inside a four-node allocation sees SLURM_NNODES=4 but
 * SLURM_STEP_NUM_NODES=1. `srun -n 2` on one node sets SLURM_TASKS_PER_NODE=2
 * and SLURM_NNODES=1, not SLURM_NTASKS_PER_NODE (which only echoes the
 * --ntasks-per-node option).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch/launch.h"
#include "topo/hostlist.h"
#include "util/parse.h"

#define SLURM_HINT                                                                                 \
	"launch with srun --mpi=pmix (rank 0's id then travels through PMIx), or set "             \
	"WEFT_ROOT=host:port (an address of rank 0's node, the same on every rank)"

static const char *step_or_job(const char *step_var, const char *job_var)
{
	return getenv(step_var) ? step_var : job_var;
}

/* One "N" or "N(xM)" item: N tasks on each of M nodes. */
static weft_status_t tasks_item(struct weft_list *l, uint64_t *tasks, uint64_t *nodes)
{
	char *item = l->item, *paren = strchr(item, '(');
	*nodes = 1;
	if (paren) {
		size_t len = strlen(paren);
		if (len < 4 || paren[1] != 'x' || paren[len - 1] != ')')
			return weft_list_fail(l, "'%s' is not N or N(xM)", item);
		paren[len - 1] = '\0';
		*paren = '\0';
		if (weft_parse_size(paren + 2, INT_MAX, WEFT_PARSE_NO_SUFFIX, nodes, NULL) ||
		    *nodes < 1)
			return weft_list_fail(l, "bad repeat count '%s'", paren + 2);
	}
	if (weft_parse_size(item, INT_MAX, WEFT_PARSE_NO_SUFFIX, tasks, NULL) || *tasks < 1)
		return weft_list_fail(l, "bad task count '%s'", item);
	return WEFT_SUCCESS;
}

/* The task count of node @p node (0-based) in @p var's list. */
static weft_status_t tasks_on_node(const char *var, int node, int *out, struct weft_err *err)
{
	struct weft_list l;
	uint64_t first = 0, tasks = 0, nodes = 0;
	bool found = false;
	weft_list_init(&l, var, getenv(var), ',');
	while (!found && weft_list_next(&l)) {
		if (tasks_item(&l, &tasks, &nodes) != WEFT_SUCCESS)
			break;
		found = (uint64_t)node < first + nodes;
		first += nodes;
	}
	if (l.status != WEFT_SUCCESS)
		return weft_err_set(err, l.status, "%s", l.msg);
	if (!found)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s=%s names %llu node(s), but SLURM_NODEID is %d", var,
				    getenv(var), (unsigned long long)first, node);
	*out = (int)tasks;
	return WEFT_SUCCESS;
}

static weft_status_t local_size(struct weft_launch *l, int nnodes, bool have_nnodes,
				struct weft_err *err)
{
	const char *var = step_or_job("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE");
	bool have_node;
	int node = 0;
	if (!getenv(var))
		return WEFT_SUCCESS;
	weft_status_t st = weft_launch_env_int("SLURM_NODEID", have_nnodes ? nnodes - 1 : INT_MAX,
					       &node, &have_node, err);
	if (st != WEFT_SUCCESS || (!have_node && !l->one_host))
		return st; /* which node we are is unknown: so is the local size */
	st = tasks_on_node(var, node, &l->local_size, err);
	if (st != WEFT_SUCCESS)
		return st;
	if (l->local_size > l->nranks)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s=%s gives node %d %d task(s), more than SLURM_NTASKS=%d",
				    var, getenv(var), node, l->local_size, l->nranks);
	if (l->local_rank >= l->local_size)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "%s=%s gives node %d %d task(s): SLURM_LOCALID=%d is not below "
				    "that",
				    var, getenv(var), node, l->local_size, l->local_rank);
	return WEFT_SUCCESS;
}

static weft_status_t keep_first(void *ctx, const char *name)
{
	snprintf(ctx, WEFT_LAUNCH_HOST_BYTES, "%s", name);
	return WEFT_INPROGRESS; /* enough: stop the expansion */
}

/* Whether rank 0 is known to run on the step's first node; if not, the
 * hint says why. */
static bool root_on_first_node(struct weft_launch *l)
{
	const char *dist = getenv("SLURM_DISTRIBUTION");
	const char *node = getenv("SLURM_NODEID");
	if (dist && strncmp(dist, "arbitrary", 9) == 0) {
		l->root_hint = "SLURM_DISTRIBUTION=arbitrary puts rank 0 on any node of the step, "
			       "not necessarily the first of SLURM_STEP_NODELIST: " SLURM_HINT;
		return false;
	}
	if (l->rank == 0 && node && strcmp(node, "0") != 0) {
		l->root_hint = "rank 0 is not on the first node of SLURM_STEP_NODELIST "
			       "(SLURM_NODEID is not 0): " SLURM_HINT;
		return false;
	}
	return true;
}

static weft_status_t first_node(struct weft_launch *l, struct weft_err *err)
{
	const char *list = getenv("SLURM_STEP_NODELIST");
	char why[160];
	if (!list) {
		l->root_hint =
		    "SLURM_STEP_NODELIST is not set, so rank 0's node is unknown: " SLURM_HINT;
		return WEFT_SUCCESS;
	}
	if (!root_on_first_node(l))
		return WEFT_SUCCESS;
	weft_status_t st = weft_hostlist_expand(list, WEFT_HOSTLIST_MAX_HOSTS, keep_first,
						l->root_host, why, sizeof(why));
	if (st != WEFT_SUCCESS && st != WEFT_INPROGRESS) {
		l->root_host[0] = '\0';
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "SLURM_STEP_NODELIST=%s: %s", list,
				    why);
	}
	l->root_from = "the first node of SLURM_STEP_NODELIST";
	l->root_is_node = true;
	return WEFT_SUCCESS;
}

weft_status_t weft_launch_slurm(struct weft_launch *l, struct weft_err *err)
{
	const char *nodes_var = step_or_job("SLURM_STEP_NUM_NODES", "SLURM_NNODES");
	bool have_nnodes;
	int nnodes = 0;
	l->root_hint = SLURM_HINT;
	/* sbatch gives its script SLURM_PROCID=0 and the allocation's
	 * SLURM_NTASKS: waiting there for the other ranks would hang. */
	if (!getenv("SLURM_STEP_ID") && l->nranks > 1)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "SLURM_PROCID is set but SLURM_STEP_ID is not: this process is "
				    "a batch script, not one of the %d tasks of a step; start the "
				    "ranks with srun",
				    l->nranks);
	weft_status_t st = weft_launch_env_int(nodes_var, INT_MAX, &nnodes, &have_nnodes, err);
	if (st != WEFT_SUCCESS)
		return st;
	if (have_nnodes && nnodes < 1)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s=0: a step has at least one node",
				    nodes_var);
	l->one_host = (have_nnodes && nnodes == 1) || l->nranks == 1;
	st = local_size(l, nnodes, have_nnodes, err);
	if (l->one_host && l->local_size < 0)
		l->local_size = l->nranks;
	if (st == WEFT_SUCCESS && !l->one_host)
		st = first_node(l, err);
	return st;
}
