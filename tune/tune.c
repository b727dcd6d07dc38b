/*
 * tune.c — the cost model and per-call algorithm choice.
 *
 * Every link between two ranks has a class from the topology graph (same
 * NUMA node, same host, same leaf, across the spine). Each class has an
 * alpha (seconds per message), beta (seconds per byte moved) and gamma
 * (seconds per byte reduced), by default from the transport that serves the
 * class (shared memory inside a host, TCP between hosts), or measured at init
 * with WEFT_TUNE_CALIBRATE=1. Each algorithm turns these into an estimate for a
 * call (time = latency * steps + bytes / bandwidth, plus reduction time);
 * the lowest estimate wins, unless WEFT_ALGO or WEFT_TUNE says otherwise.
 */
#include "tune/tune.h"
#include "core/fail.h"
#include "tune/tune_table.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "util/log.h"
#include "util/parse.h"
#include "util/settings.h"

static weft_status_t parse_size(const char *s, size_t *out)
{
	uint64_t v;
	weft_status_t st = weft_parse_size(s, SIZE_MAX, WEFT_PARSE_INF, &v, NULL);
	if (st == WEFT_SUCCESS)
		*out = (size_t)v;
	return st;
}

static int coll_by_name(const char *name)
{
	for (int c = 0; c < WEFT_COLL_COUNT; c++)
		if (strcmp(weft_coll_name((enum weft_coll_kind)c), name) == 0)
			return c;
	return -1;
}

/* One "lo-hi:algo" range of collective @p c. */
static weft_status_t parse_range(struct weft_list *l, int c, struct weft_tuner *t)
{
	char *r = l->item, *dash = strchr(r, '-'), *col = strchr(r, ':');
	const char *coll = weft_coll_name((enum weft_coll_kind)c);
	if (!dash || !col || dash > col)
		return weft_list_fail(l, "range '%s' is not lo-hi:algo", r);
	*dash = *col = '\0';
	struct weft_tune_range range;
	if (parse_size(r, &range.lo) || parse_size(dash + 1, &range.hi) || range.lo >= range.hi)
		return weft_list_fail(l, "bad byte range '%s-%s'", r, dash + 1);
	range.algo = weft_algo_find((enum weft_coll_kind)c, col + 1);
	if (!range.algo)
		return weft_list_fail(l, "%s has no algorithm '%s'", coll, col + 1);
	if (t->nranges[c] == WEFT_TUNE_MAX_RANGES)
		return weft_list_fail(l, "more than %d ranges for %s", WEFT_TUNE_MAX_RANGES, coll);
	t->ranges[c][t->nranges[c]++] = range;
	return WEFT_SUCCESS;
}

/* One "coll:lo-hi:algo,lo-hi:algo" item. */
static weft_status_t parse_item(struct weft_list *l, struct weft_tuner *t)
{
	char *colon = strchr(l->item, ':');
	if (!colon)
		return weft_list_fail(l, "'%s' is not collective:lo-hi:algo,...", l->item);
	*colon = '\0';
	int c = coll_by_name(l->item);
	if (c < 0)
		return weft_list_fail(l, "unknown collective '%s'", l->item);
	struct weft_list ranges;
	weft_list_init_inner(&ranges, l, colon + 1, ',');
	while (weft_list_next(&ranges))
		if (parse_range(&ranges, c, t) != WEFT_SUCCESS)
			break;
	return l->status;
}

weft_status_t weft_tune_parse_ranges(const char *spec, struct weft_tuner *t, struct weft_err *err)
{
	memset(t->nranges, 0, sizeof(t->nranges));
	struct weft_list l;
	weft_list_init(&l, "WEFT_TUNE", spec, ';');
	while (weft_list_next(&l))
		if (parse_item(&l, t) != WEFT_SUCCESS)
			break;
	if (l.status != WEFT_SUCCESS)
		return weft_err_set(err, l.status, "%s", l.msg);
	return WEFT_SUCCESS;
}

static weft_status_t derive_costs(struct weft_comm *comm);

static void tuner_free(struct weft_tuner *t)
{
	free(t);
}

weft_status_t weft_tune_init(struct weft_comm *comm)
{
	struct weft_tuner *t = calloc(1, sizeof(*t));
	if (!t)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "tune: no memory");
	comm->tuner = t;
	comm->tuner_free = tuner_free;
	weft_status_t st =
	    weft_algo_parse_forced(weft_setting_str("WEFT_ALGO"), t->forced, &comm->err);
	if (st == WEFT_SUCCESS)
		st = weft_tune_parse_ranges(weft_setting_str("WEFT_TUNE"), t, &comm->err);
	if (st == WEFT_SUCCESS)
		st = weft_tune_costs(comm);
	if (st == WEFT_SUCCESS)
		st = weft_tune_calibrate(comm);
	if (st == WEFT_SUCCESS)
		st = derive_costs(comm);
	if (st != WEFT_SUCCESS)
		return st;
	if (comm->rank == 0 && weft_log_enabled(WEFT_LOG_INFO, WEFT_SUB_TUNE)) {
		char *text = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&text, &len);
		if (mem) {
			weft_tune_print(comm, mem);
			fclose(mem);
			weft_log(WEFT_LOG_INFO, WEFT_SUB_TUNE, "algorithm table:\n%s", text);
			free(text);
		}
	}
	return WEFT_SUCCESS;
}

static struct weft_cost link_cost(const struct weft_comm *comm, int a, int b)
{
	return comm->tuner->links.cls[weft_topo_link(&comm->graph, a, b)];
}

static struct weft_cost worse(struct weft_cost x, struct weft_cost y)
{
	struct weft_cost w = {
	    .alpha = fmax(x.alpha, y.alpha),
	    .beta = fmax(x.beta, y.beta),
	    .gamma = fmax(x.gamma, y.gamma),
	};
	return w;
}

/* The slowest of the classes marked in @p present. */
static struct weft_cost worst_of(const struct weft_comm *comm, const bool *present)
{
	struct weft_cost w = {0, 0, comm->tuner->links.cls[WEFT_LINK_NUMA].gamma};
	for (int c = 0; c < WEFT_LINK_CLASS_COUNT; c++)
		if (present[c])
			w = worse(w, comm->tuner->links.cls[c]);
	return w;
}

/* The ring's slowest edge. Edges that leave a leaf share its uplink: a
 * ring in rank order over interleaved leaves sends several flows up one
 * uplink, and each gets its share of it. */
static struct weft_cost ring_worst(const struct weft_comm *comm)
{
	const struct weft_topo_graph *g = &comm->graph;
	int n = comm->nranks;
	struct weft_cost w = {0, 0, comm->tuner->links.cls[WEFT_LINK_NUMA].gamma};
	int *leaving = calloc((size_t)g->nleaves > 0 ? (size_t)g->nleaves : 1, sizeof(int));
	int share = 1;
	for (int p = 0; p < n && n > 1; p++) {
		int a = comm->ring[p], b = comm->ring[(p + 1) % n];
		w = worse(w, link_cost(comm, a, b));
		if (leaving && g->leaf_of[a] != g->leaf_of[b] && ++leaving[g->leaf_of[a]] > share)
			share = leaving[g->leaf_of[a]];
	}
	free(leaving);
	if (w.beta == comm->tuner->links.cls[WEFT_LINK_SPINE].beta)
		w.beta *= share;
	return w;
}

/*
 * The slowest links do not change after init: compute them once, not on
 * every call's selection (which is on the latency path). Which classes
 * occur among all pairs and among the pairs of one host comes from the
 * graph's groups (weft_topo_class_pairs), not from every pair: at 100,000
 * ranks that is 10^5 steps instead of 5 x 10^9. Host leaders sit on
 * different hosts, so they are joined through a leaf when some leaf has
 * two hosts (every leaf has at least one), and across the spine when there
 * are two leaves. The ranks under one leaf are joined by the classes of
 * one host and, where some leaf has two hosts, the leaf's; leaf leaders
 * across the spine.
 */
static weft_status_t derive_costs(struct weft_comm *comm)
{
	struct weft_tuner *t = comm->tuner;
	const struct weft_topo_graph *g = &comm->graph;
	uint64_t pairs[WEFT_LINK_CLASS_COUNT];
	bool any[WEFT_LINK_CLASS_COUNT] = {false}, intra[WEFT_LINK_CLASS_COUNT] = {false};
	bool leaders[WEFT_LINK_CLASS_COUNT] = {false}, leaf[WEFT_LINK_CLASS_COUNT] = {false};
	bool leaf_leaders[WEFT_LINK_CLASS_COUNT] = {false};

	if (weft_topo_class_pairs(g, pairs) != WEFT_SUCCESS)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "tune: no memory");
	for (int c = WEFT_LINK_SELF + 1; c < WEFT_LINK_CLASS_COUNT; c++)
		any[c] = pairs[c] > 0;
	intra[WEFT_LINK_NUMA] = any[WEFT_LINK_NUMA];
	intra[WEFT_LINK_HOST] = any[WEFT_LINK_HOST];
	leaders[WEFT_LINK_LEAF] = g->nhosts > g->nleaves;
	leaders[WEFT_LINK_SPINE] = g->nleaves > 1;
	memcpy(leaf, intra, sizeof(leaf));
	leaf[WEFT_LINK_LEAF] = any[WEFT_LINK_LEAF];
	leaf_leaders[WEFT_LINK_SPINE] = g->nleaves > 1;
	t->links.worst = worst_of(comm, any);
	t->links.intra_host = worst_of(comm, intra);
	t->links.inter_host = worst_of(comm, leaders);
	t->links.intra_leaf = worst_of(comm, leaf);
	t->links.inter_leaf = worst_of(comm, leaf_leaders);
	t->links.ring = ring_worst(comm);
	return WEFT_SUCCESS;
}

static size_t call_bytes(const struct weft_coll_args *args, int nranks)
{
	size_t bytes = args->count * args->esize;
	switch (args->coll) {
	case WEFT_COLL_ALLGATHER:
	case WEFT_COLL_REDUCE_SCATTER:
	case WEFT_COLL_ALLTOALL:
	case WEFT_COLL_GATHER:
	case WEFT_COLL_SCATTER: return bytes * (size_t)nranks;
	default: return bytes;
	}
}

/*
 * How far an implementation is from its alpha-beta formula: the latency
 * part (the estimate for one element) and the bandwidth part (the rest)
 * scaled separately, as NCCL's tuner keeps per-algorithm latencies and
 * bandwidth efficiencies. Measured with perf/sweep_algos at np=2 over
 * shared memory on the 2-core VMs this project runs on (docs/benchmarks.md, "What was measured"),
 * so applied to jobs on one host only:
 * the tree pipelines deeper than its formula says; recursive
 * halving-doubling moves whole halves per step (no pipelining, and the
 * shm transport's single-copy path for large halves), so its bytes cost
 * more than the ring's. Algorithms not listed: 1, 1.
 */
static const struct {
	enum weft_coll_kind coll;
	enum weft_algo_id id;
	double lat, bw;
} efficiency[] = {
    {WEFT_COLL_ALLREDUCE, WEFT_ALGO_TREE, 1.0, 0.42},
    {WEFT_COLL_ALLREDUCE, WEFT_ALGO_RHD, 1.0, 1.6},
};

double weft_tune_estimate(const struct weft_comm *comm, const struct weft_algo *algo,
			  const struct weft_coll_args *args)
{
	double est = algo->estimate(comm, &comm->tuner->links, args);
	if (comm->graph.nhosts > 1) /* measured inside one host only */
		return est;
	for (size_t i = 0; i < sizeof(efficiency) / sizeof(efficiency[0]); i++) {
		if (efficiency[i].coll != args->coll || efficiency[i].id != algo->id)
			continue;
		struct weft_coll_args one = *args;
		one.count = 1;
		double lat = fmin(algo->estimate(comm, &comm->tuner->links, &one), est);
		return efficiency[i].lat * lat + efficiency[i].bw * (est - lat);
	}
	return est;
}

/* The lowest estimate among the algorithms that can run the call, @p not
 * left out; NULL if there is none. */
static const struct weft_algo *cheapest(const struct weft_comm *comm,
					const struct weft_coll_args *args,
					const struct weft_algo * not )
{
	const struct weft_algo *best = NULL;
	double best_t = INFINITY;
	for (const struct weft_algo *const *a = weft_algos_for(args->coll); *a; a++) {
		if (*a == not || !(*a)->estimate || ((*a)->supports && !(*a)->supports(comm, args)))
			continue;
		double est = weft_tune_estimate(comm, *a, args);
		if (est < best_t) {
			best_t = est;
			best = *a;
		}
	}
	return best;
}

const struct weft_algo *weft_tune_select(const struct weft_comm *comm,
					 const struct weft_coll_args *args)
{
	const struct weft_tuner *t = comm->tuner;
	if (t->forced[args->coll])
		return t->forced[args->coll];
	size_t bytes = call_bytes(args, comm->nranks);
	for (int i = 0; i < t->nranges[args->coll]; i++) {
		const struct weft_tune_range *r = &t->ranges[args->coll][i];
		if (bytes >= r->lo && bytes < r->hi)
			return r->algo;
	}
	for (const struct weft_algo *const *a = weft_algos_for(args->coll); *a; a++)
		if ((*a)->adapts_from && bytes >= (*a)->adapts_from &&
		    (!(*a)->supports || (*a)->supports(comm, args)))
			return *a;
	const struct weft_algo *best = cheapest(comm, args, NULL);
	return best ? best : weft_algos_for(args->coll)[0];
}

const struct weft_algo *weft_tune_select_other(const struct weft_comm *comm,
					       const struct weft_coll_args *args,
					       const struct weft_algo * not )
{
	return cheapest(comm, args, not );
}

const struct weft_algo *weft_tune_choose(struct weft_comm *comm, const struct weft_coll_args *args)
{
	struct weft_tune_memo *m = &comm->tuner->memo[args->coll];
	if (m->algo && m->count == args->count && m->esize == args->esize && m->op == args->op &&
	    m->root == args->root)
		return m->algo;
	m->algo = weft_tune_select(comm, args);
	m->count = args->count;
	m->esize = args->esize;
	m->op = args->op;
	m->root = args->root;
	return m->algo;
}

void weft_tune_print(const struct weft_comm *comm, FILE *out)
{
	const size_t *sizes = weft_tune_table_sizes;
	for (int c = 0; c < WEFT_COLL_COUNT; c++) {
		if (!weft_tune_table_has((enum weft_coll_kind)c))
			continue;
		const struct weft_algo *const *algos = weft_algos_for((enum weft_coll_kind)c);
		fprintf(out, "  %-15s %10s  %-10s", weft_coll_name((enum weft_coll_kind)c), "bytes",
			"choice");
		for (const struct weft_algo *const *a = algos; *a; a++)
			fprintf(out, " %12s", (*a)->name);
		fprintf(out, "   (estimates, us)\n");
		for (size_t i = 0; i < WEFT_TUNE_TABLE_SIZES; i++) {
			struct weft_coll_args args = {
			    .coll = (enum weft_coll_kind)c,
			    .dtype = WEFT_FLOAT32,
			    .op = WEFT_SUM,
			    .esize = 4,
			    .root = 0,
			};
			size_t per = (c == WEFT_COLL_ALLGATHER || c == WEFT_COLL_REDUCE_SCATTER ||
				      c == WEFT_COLL_ALLTOALL)
					 ? (size_t)comm->nranks
					 : 1;
			args.count = sizes[i] / 4 / per ? sizes[i] / 4 / per : 1;
			fprintf(out, "  %-15s %10zu  %-10s", "", sizes[i],
				weft_tune_select(comm, &args)->name);
			for (const struct weft_algo *const *a = algos; *a; a++) {
				if (!(*a)->estimate ||
				    ((*a)->supports && !(*a)->supports(comm, &args)))
					fprintf(out, " %12s", "-");
				else
					fprintf(out, " %12.1f",
						weft_tune_estimate(comm, *a, &args) * 1e6);
			}
			fputc('\n', out);
		}
	}
}
