/* algo.h — the algorithm table: every (collective, algorithm) with its
 * name, a one-line description and its task functions. */
#ifndef WEFT_ALGO_H
#define WEFT_ALGO_H

#include <stdbool.h>

#include "core/task.h"
#include "topo/topo.h"
#include "util/error.h"

struct weft_comm;
struct weft_topo_flow;

enum weft_algo_id {
	WEFT_ALGO_RING = 0, /* ring, chunked and pipelined */
	WEFT_ALGO_TREE,	    /* (double) binary tree, pipelined */
	WEFT_ALGO_RHD,	    /* recursive halving-doubling / recursive doubling */
	WEFT_ALGO_BRUCK,    /* Bruck (allgather, any rank count) */
	WEFT_ALGO_HIER,	    /* intra-host stage, then among host leaders */
	WEFT_ALGO_PAIRWISE, /* alltoall: n-1 pairwise exchanges */
	WEFT_ALGO_DISSEM,   /* barrier: dissemination */
	WEFT_ALGO_DIRECT,   /* send/recv */
	WEFT_ALGO_LINEAR,   /* gather, scatter: the root and each rank directly */
	WEFT_ALGO_SHM,	    /* intra-host, through shared memory (algorithms/shmem/) */
	WEFT_ALGO_RAIL,	    /* every local rank on its slice among the hosts, pipelined */
	WEFT_ALGO_COUNT
};

struct weft_comm;

/* alpha-beta-gamma cost of moving and reducing bytes over one link. */
struct weft_cost {
	double alpha; /* seconds per message */
	double beta;  /* seconds per byte moved */
	double gamma; /* seconds per byte reduced */
};

/* What the tuner knows of the job's links, for the estimates (tune/ fills
 * it at init): each link class, and the slowest links the algorithms'
 * formulas use. */
struct weft_links {
	struct weft_cost cls[WEFT_LINK_CLASS_COUNT];
	struct weft_cost worst;	     /* any pair */
	struct weft_cost ring;	     /* the ring's slowest edge, flows sharing an uplink counted */
	struct weft_cost intra_host; /* among the ranks of one host */
	struct weft_cost inter_host; /* among host leaders */
	struct weft_cost intra_leaf; /* among the ranks under one leaf */
	struct weft_cost inter_leaf; /* among leaf leaders */
};

struct weft_algo {
	enum weft_algo_id id;
	enum weft_coll_kind coll;
	const char *name;
	const char *description;
	/* Estimated seconds for this call (the tuner picks the lowest); NULL:
	 * never chosen automatically, only when forced. */
	double (*estimate)(const struct weft_comm *comm, const struct weft_links *links,
			   const struct weft_coll_args *args);
	/* False if the algorithm cannot run this call (e.g. no root support);
	 * NULL: it always can. */
	bool (*supports)(const struct weft_comm *comm, const struct weft_coll_args *args);
	/* The bytes this call moves between ranks, added pair by pair to
	 * @p flow (topo/topo_flow.h), in O(n log n) for n ranks: what the
	 * tuner's flow estimate loads the fabric's links with. NULL: no flow
	 * estimate. */
	void (*flow)(const struct weft_comm *comm, const struct weft_coll_args *args,
		     struct weft_topo_flow *flow);
	/* How a task of this algorithm runs (post, progress, finalize). */
	struct weft_task_ops task;
	/* Non-zero: an algorithm that adapts after its first step. From calls
	 * of this many bytes up the tuner chooses it (where it supports the
	 * call) over the cheapest estimate, which it hands the call to when it
	 * cannot do better (task->fallback_ops): the shm AllReduce, which only
	 * learns in its first step whether every buffer can be mapped. */
	size_t adapts_from;
};

extern const struct weft_algo weft_allreduce_ring;
extern const struct weft_algo weft_allreduce_tree;
extern const struct weft_algo weft_allreduce_rhd;
extern const struct weft_algo weft_allreduce_hier;
extern const struct weft_algo weft_allreduce_rail;
extern const struct weft_algo weft_allreduce_shm;
/* Estimate only: hier grouped by leaf, which the runtime hier cannot run
 * (it groups by host). No task; never in the table, so never chosen,
 * forced or run (weft_algo_variants_for). */
extern const struct weft_algo weft_allreduce_hier_leaf;
extern const struct weft_algo weft_allgather_ring;
extern const struct weft_algo weft_allgather_bruck;
extern const struct weft_algo weft_allgather_hier;
extern const struct weft_algo weft_reduce_scatter_ring;
extern const struct weft_algo weft_broadcast_ring;
extern const struct weft_algo weft_broadcast_tree;
extern const struct weft_algo weft_reduce_tree;
extern const struct weft_algo weft_alltoall_pairwise;
extern const struct weft_algo weft_alltoallv_pairwise;
extern const struct weft_algo weft_gather_linear;
extern const struct weft_algo weft_scatter_linear;
extern const struct weft_algo weft_barrier_dissem;
extern const struct weft_algo weft_send_direct;
extern const struct weft_algo weft_recv_direct;

/* Every algorithm of @p coll, NULL-terminated. */
const struct weft_algo *const *weft_algos_for(enum weft_coll_kind coll);

/* What the tuner's flow table shows beside @p coll's algorithms: variants
 * with an estimate and a flow but no task, NULL-terminated (for AllReduce,
 * hier-leaf). Never chosen. */
const struct weft_algo *const *weft_algo_variants_for(enum weft_coll_kind coll);

/* Look up by collective and name; NULL if there is none. */
const struct weft_algo *weft_algo_find(enum weft_coll_kind coll, const char *name);

/* Parse WEFT_ALGO ("allreduce:ring;allgather:ring") into forced[coll]
 * (NULL where not forced). A bad entry gives WEFT_ERR_INVALID_ARG and names it. */
weft_status_t weft_algo_parse_forced(const char *spec,
				     const struct weft_algo *forced[WEFT_COLL_COUNT],
				     struct weft_err *err);

#endif
