/*
 * tune_costs.c — the alpha and beta of each link class, from what the
 * transports say of themselves (struct weft_tp_props: measured at init or
 * given by the provider), agreed by every rank.
 *
 * For each link class this rank has a peer in, the transport that serves
 * that peer gives its latency (alpha) and bandwidth (1 / beta). The ranks
 * exchange what they saw (through the bootstrap, still open at init) and
 * take the slowest figure per class, so every rank computes the same
 * estimates and picks the same algorithm. Across the spine the transport's
 * figures are those of the NIC; the fabric's oversubscription is not
 * something a transport can see, so the spine class costs SPINE_BETA times
 * the leaf's per byte and SPINE_ALPHA times its latency (a 3:1 fat tree,
 * the usual build; WEFT_TUNE_CALIBRATE=1 measures the real links instead).
 * gamma, the reduction's time per byte, is the kernels' and the same for
 * every class.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/fail.h"
#include "core/p2p.h"
#include "transports/transport.h"
#include "tune/tune.h"

#define SPINE_BETA  3.0
#define SPINE_ALPHA 1.5
#define GAMMA	    (1.0 / 10e9) /* the AVX2 sum kernel streams ~10 GB/s here */

/* Where no rank has a peer of a class: never used for a choice, only
 * printed. */
static const struct weft_cost fallback[WEFT_LINK_CLASS_COUNT] = {
    [WEFT_LINK_SELF] = {0, 0, 0},
    [WEFT_LINK_NUMA] = {0.4e-6, 1.0 / 8e9, GAMMA},
    [WEFT_LINK_HOST] = {0.6e-6, 1.0 / 6e9, GAMMA},
    [WEFT_LINK_LEAF] = {10e-6, 1.0 / 3e9, GAMMA},
    [WEFT_LINK_SPINE] = {15e-6, 1.0 / 1e9, GAMMA},
};

struct seen {
	double alpha[WEFT_LINK_CLASS_COUNT], beta[WEFT_LINK_CLASS_COUNT]; /* < 0: none */
};

/* What this rank's transports say of one peer of each class. */
static void local_view(const struct weft_comm *comm, struct seen *mine)
{
	for (int c = 0; c < WEFT_LINK_CLASS_COUNT; c++)
		mine->alpha[c] = mine->beta[c] = -1;
	for (int p = 0; comm->peers && p < comm->nranks; p++) {
		struct weft_tp_props props;
		if (!weft_p2p_props(comm, p, &props) || props.bandwidth_Bps <= 0)
			continue;
		enum weft_link_class c = weft_topo_link(&comm->graph, comm->rank, p);
		mine->alpha[c] = fmax(mine->alpha[c], props.latency_s);
		mine->beta[c] = fmax(mine->beta[c], 1.0 / props.bandwidth_Bps);
	}
}

weft_status_t weft_tune_costs(struct weft_comm *comm)
{
	struct weft_tuner *t = comm->tuner;
	struct seen *all = calloc((size_t)comm->nranks, sizeof(*all));
	if (!all)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "tune: no memory");
	local_view(comm, &all[comm->rank]);
	/* Without a bootstrap (a synthetic communicator) only this rank's view. */
	int lo = comm->bs ? 0 : comm->rank, hi = comm->bs ? comm->nranks : comm->rank + 1;
	weft_status_t st =
	    comm->bs ? weft_bootstrap_allgather(comm->bs, all, sizeof(*all), &comm->err) : 0;
	for (int c = 0; st == WEFT_SUCCESS && c < WEFT_LINK_CLASS_COUNT; c++) {
		struct weft_cost k = {-1, -1, GAMMA};
		for (int r = lo; r < hi; r++) {
			k.alpha = fmax(k.alpha, all[r].alpha[c]);
			k.beta = fmax(k.beta, all[r].beta[c]);
		}
		if (k.beta >= 0 && c == WEFT_LINK_SPINE) {
			/* The NIC's figures, through an oversubscribed tier. */
			k.alpha *= SPINE_ALPHA;
			k.beta *= SPINE_BETA;
		}
		t->links.cls[c] = k.beta < 0 || c == WEFT_LINK_SELF ? fallback[c] : k;
	}
	free(all);
	memcpy(t->from_transports, t->links.cls, sizeof(t->links.cls));
	return st;
}
