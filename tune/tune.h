/* tune.h — pick an algorithm per call from an alpha-beta cost model whose
 * parameters come from the topology graph's link classes and the
 * transports; overrides WEFT_ALGO and WEFT_TUNE. */
#ifndef WEFT_TUNE_H
#define WEFT_TUNE_H

#include <stdio.h>

#include "algorithms/algo.h"
#include "core/task.h"
#include "topo/topo.h"
#include "util/error.h"

#define WEFT_TUNE_MAX_RANGES 8

struct weft_tune_range {
	size_t lo, hi; /* bytes, [lo, hi) */
	const struct weft_algo *algo;
};

/* The last choice per collective: training loops repeat their sizes. */
struct weft_tune_memo {
	const struct weft_algo *algo; /* NULL: empty */
	size_t count, esize;
	weft_op_t op;
	int root;
};

struct weft_tuner {
	struct weft_links links; /* per link class, and the derived slowest links */
	struct weft_cost from_transports[WEFT_LINK_CLASS_COUNT]; /* before calibration */
	struct weft_tune_memo memo[WEFT_COLL_COUNT];
	const struct weft_algo *forced[WEFT_COLL_COUNT];		      /* WEFT_ALGO */
	struct weft_tune_range ranges[WEFT_COLL_COUNT][WEFT_TUNE_MAX_RANGES]; /* WEFT_TUNE */
	int nranges[WEFT_COLL_COUNT];
};

/* Create the communicator's tuner: parse WEFT_ALGO and WEFT_TUNE and set
 * the costs per link class (the communicator's graph and transports must
 * be set up, the bootstrap open). A bad override is WEFT_ERR_INVALID_ARG
 * naming it. */
weft_status_t weft_tune_init(struct weft_comm *comm);

/* alpha and beta per link class from the transports' properties, the
 * slowest any rank sees (tune_costs.c). Collective, over the bootstrap. */
weft_status_t weft_tune_costs(struct weft_comm *comm);

/* WEFT_TUNE_CALIBRATE=1: measure alpha, beta and gamma for every link class
 * that occurs among the ranks and replace the defaults in comm->tuner.cost
 * with them (tune_calibrate.c); every rank ends with the same table. Collective:
 * it uses the bootstrap, which must still be open, and the connected
 * transports, so weft_tune_init calls it after setting the defaults. Every
 * rank must have the same setting. WEFT_TUNE_CALIBRATE=0 (the default): does
 * nothing; any other value is WEFT_ERR_INVALID_ARG naming it. */
weft_status_t weft_tune_calibrate(struct weft_comm *comm);

/* Parse "allreduce:0-64K:rhd,64K-inf:ring;allgather:..." (exported for tests). */
weft_status_t weft_tune_parse_ranges(const char *spec, struct weft_tuner *t, struct weft_err *err);

/* An algorithm's estimate for a call, in seconds, corrected by what was
 * measured of its implementation. */
double weft_tune_estimate(const struct weft_comm *comm, const struct weft_algo *algo,
			  const struct weft_coll_args *args);

/* The algorithm for a call: forced, else the WEFT_TUNE range, else the
 * lowest estimate among those that support the call. */
const struct weft_algo *weft_tune_select(const struct weft_comm *comm,
					 const struct weft_coll_args *args);

/* The lowest estimate among the algorithms that support the call, @p not
 * excluded (NULL if none is left): what an algorithm that adapts after
 * its first step hands the call to (the shm AllReduce, when not every
 * buffer can be mapped). Ignores WEFT_ALGO and WEFT_TUNE. */
const struct weft_algo *weft_tune_select_other(const struct weft_comm *comm,
					       const struct weft_coll_args *args,
					       const struct weft_algo * not );

/* weft_tune_select() through a one-entry memo per collective: what the
 * call path uses, so a repeated size costs no estimates. */
const struct weft_algo *weft_tune_choose(struct weft_comm *comm, const struct weft_coll_args *args);

/* Sizes x algorithms, the estimates and the choice (weft-topo, TUNE log). */
void weft_tune_print(const struct weft_comm *comm, FILE *out);

#endif
