/*
 * tune_calibrate.c — WEFT_TUNE_CALIBRATE=1: measure the cost model's alpha,
 * beta and gamma at init instead of taking the transport defaults.
 *
 * Each link class present among the ranks is measured by one pair: the
 * lowest (a, b), a < b, whose link has that class. Classes go one at a time
 * and the other ranks sit in the bootstrap allgather that closes the slot
 * (blocked in poll, not spinning), so the pair has the CPUs to itself.
 *
 * Rank a drives ping-pongs and b echoes every message back. The first byte
 * of each message tells b what comes next (a small message, a large one, or
 * the end), so a alone decides how many repetitions fit the time budget and
 * both ends stay in step. Each round trip is timed and the fastest kept:
 * it is the one least disturbed by whatever else the machine runs.
 *   alpha = half the fastest round trip of SMALL_BYTES
 *   beta  = (half the fastest round trip of LARGE_BYTES - alpha) / LARGE_BYTES
 *   gamma = the fastest FLOAT32 SUM over GAMMA_BYTES, per byte (a, after the
 *           ping-pongs; a CPU's property, not a link's: the largest measured
 *           applies to every class)
 * Per class: at most MAX_REPS repetitions of each kind, cut short after
 * about 20 ms of small and 40 ms of large round trips (a quiet machine
 * needs about 10 ms in all), a few ms of reduction, one bootstrap allgather.
 *
 * Agreement: the slot's allgather carries what each rank measured (zeros
 * outside the pair) and every rank reads the pair's block from the same
 * gathered bytes, so every rank ends with the same table. A value that is
 * not positive and finite (a noisy machine: a large message that seemed
 * faster than a small one) keeps its default, with a warning.
 *
 * Why the bootstrap and not weft_allreduce: the bootstrap is still open
 * during init, needs no tuner, and its traffic does not cross the links
 * being measured while they are measured.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "core/fail.h"
#include "core/p2p.h"
#include "core/progress.h"
#include "core/task.h"
#include "reduce/reduce.h"
#include "tune/tune.h"
#include "util/log.h"
#include "util/settings.h"

#define SMALL_BYTES    8
#define LARGE_BYTES    ((size_t)2 << 20)
#define GAMMA_BYTES    ((size_t)2 << 20)
#define SMALL_ITERS    16 /* round trips per timed repetition */
#define WARMUP_ITERS   4
#define MIN_REPS       3
#define MAX_REPS       10
#define SMALL_BUDGET_S 0.02
#define LARGE_BUDGET_S 0.04
#define GAMMA_REPS     5
/* Tags: a sequence number no operation reaches before init ends. */
#define CAL_SEQ 0xffffffffu

/* What the first byte of a ping announces. */
enum cal_next {
	CAL_STOP = 0,
	CAL_SMALL,
	CAL_LARGE,
};

struct cal_pair {
	int a, b; /* -1: the class does not occur */
};

/* What a rank measured in one slot; zeros if it was not the driver. */
struct cal_result {
	double alpha, beta, gamma;
};

struct pingpong {
	struct weft_comm *comm;
	int peer;
	unsigned char *out, *in; /* LARGE_BYTES each */
	uint32_t step;		 /* next tag step; both ends count alike */
};

static bool calibrate_enabled(struct weft_comm *comm, weft_status_t *st)
{
	const char *v = weft_setting_str("WEFT_TUNE_CALIBRATE");
	*st = WEFT_SUCCESS;
	if (!v || strcmp(v, "0") == 0)
		return false;
	if (strcmp(v, "1") == 0)
		return true;
	*st = weft_err_set(&comm->err, WEFT_ERR_INVALID_ARG,
			   "WEFT_TUNE_CALIBRATE=%s: expected 0 or 1", v);
	return false;
}

/* The lowest pair of each class; returns how many classes occur. */
static int find_pairs(const struct weft_comm *comm, struct cal_pair pair[WEFT_LINK_CLASS_COUNT])
{
	int found = 0;
	for (int c = 0; c < WEFT_LINK_CLASS_COUNT; c++)
		pair[c] = (struct cal_pair){-1, -1};
	for (int a = 0; a < comm->nranks; a++) {
		for (int b = a + 1; b < comm->nranks; b++) {
			enum weft_link_class c = weft_topo_link(&comm->graph, a, b);
			if (c == WEFT_LINK_SELF || pair[c].a >= 0)
				continue;
			pair[c] = (struct cal_pair){a, b};
			if (++found == WEFT_LINK_CLASS_COUNT - 1)
				return found;
		}
	}
	return found;
}

/* Wait until @p req (NULL: none) is done, and give it back. */
static weft_status_t wait_req(struct pingpong *pp, struct weft_p2p_req *req)
{
	struct weft_comm *comm = pp->comm;
	double start = weft_now();
	unsigned spins = 0;
	weft_status_t st;
	while (req && !weft_p2p_done(req, &st)) {
		st = weft_comm_progress(comm);
		if (st != WEFT_SUCCESS && st != WEFT_INPROGRESS)
			return st;
		if (weft_now() - start > comm->timeout_s)
			return weft_comm_fail(
			    comm, WEFT_ERR_TIMEOUT,
			    "tune calibrate: no answer from rank %d within %.0f s", pp->peer,
			    comm->timeout_s);
		weft_wait_backoff(comm, &spins, start);
	}
	if (!req)
		return WEFT_SUCCESS;
	weft_p2p_release(comm, req);
	return st;
}

static struct weft_p2p_post make_post(struct pingpong *pp, void *buf, size_t len)
{
	return (struct weft_p2p_post){
	    .buf = buf, .len = len, .tag = weft_p2p_tag(CAL_SEQ, pp->step++)};
}

/* Post a receive and a send (either may be NULL) and wait for both. */
static weft_status_t exchange(struct pingpong *pp, const struct weft_p2p_post *recv,
			      const struct weft_p2p_post *send)
{
	struct weft_p2p_req *rreq = NULL, *sreq = NULL;
	weft_status_t st = WEFT_SUCCESS;
	if (recv)
		st = weft_p2p_irecv(pp->comm, pp->peer, recv, &rreq);
	if (st == WEFT_SUCCESS && send)
		st = weft_p2p_isend(pp->comm, pp->peer, send, &sreq);
	if (st != WEFT_SUCCESS)
		return st;
	st = wait_req(pp, rreq);
	weft_status_t sst = wait_req(pp, sreq);
	return st != WEFT_SUCCESS ? st : sst;
}

/* Driver: one round trip of @p len bytes announcing @p next. */
static weft_status_t round_trip(struct pingpong *pp, size_t len, enum cal_next next)
{
	pp->out[0] = (unsigned char)next;
	struct weft_p2p_post ping = make_post(pp, pp->out, len);
	struct weft_p2p_post pong = make_post(pp, pp->in, len);
	return exchange(pp, &pong, &ping);
}

/*
 * Driver: repetitions of @p iters round trips of @p len bytes, at least
 * @p min_reps, then more while the phase is within @p budget_s (up to
 * MAX_REPS). The last message announces @p after. *best: half the fastest
 * round trip (on a busy machine most are stretched by other processes; the
 * fastest is the link's own cost).
 */
static weft_status_t timed_reps(struct pingpong *pp, size_t len, int iters, int min_reps,
				double budget_s, enum cal_next after, double *best)
{
	enum cal_next same = len == SMALL_BYTES ? CAL_SMALL : CAL_LARGE;
	double start = weft_now();
	*best = INFINITY;
	for (int rep = 0;; rep++) {
		bool last = false;
		for (int i = 0; i < iters; i++) {
			if (i == iters - 1)
				last = rep + 1 >= MAX_REPS ||
				       (rep + 1 >= min_reps && weft_now() - start >= budget_s);
			double t0 = weft_now();
			weft_status_t st = round_trip(pp, len, last ? after : same);
			if (st != WEFT_SUCCESS)
				return st;
			*best = fmin(*best, (weft_now() - t0) / 2);
		}
		if (last)
			return WEFT_SUCCESS;
	}
}

static weft_status_t drive(struct pingpong *pp, struct cal_result *res)
{
	double warm, small, large;
	weft_status_t st = timed_reps(pp, SMALL_BYTES, WARMUP_ITERS, 1, 0, CAL_SMALL, &warm);
	if (st == WEFT_SUCCESS)
		st = timed_reps(pp, SMALL_BYTES, SMALL_ITERS, MIN_REPS, SMALL_BUDGET_S, CAL_LARGE,
				&small);
	/* The first large message pays page faults and connection setup. */
	if (st == WEFT_SUCCESS)
		st = timed_reps(pp, LARGE_BYTES, 1, 1, 0, CAL_LARGE, &warm);
	if (st == WEFT_SUCCESS)
		st = timed_reps(pp, LARGE_BYTES, 1, MIN_REPS, LARGE_BUDGET_S, CAL_STOP, &large);
	if (st != WEFT_SUCCESS)
		return st;
	res->alpha = small;
	res->beta = (large - small) / (double)LARGE_BYTES;
	return WEFT_SUCCESS;
}

/* The other end: echo every message until the driver announces the end. */
static weft_status_t echo(struct pingpong *pp)
{
	size_t len = SMALL_BYTES;
	for (;;) {
		struct weft_p2p_post ping = make_post(pp, pp->in, len);
		weft_status_t st = exchange(pp, &ping, NULL);
		if (st != WEFT_SUCCESS)
			return st;
		unsigned char next = pp->in[0];
		struct weft_p2p_post pong = make_post(pp, pp->in, len);
		st = exchange(pp, NULL, &pong);
		if (st != WEFT_SUCCESS)
			return st;
		switch (next) {
		case CAL_STOP: return WEFT_SUCCESS;
		case CAL_SMALL: len = SMALL_BYTES; break;
		case CAL_LARGE: len = LARGE_BYTES; break;
		default:
			return weft_comm_fail(pp->comm, WEFT_ERR_REMOTE,
					      "tune calibrate: rank %d announced message kind %u",
					      pp->peer, next);
		}
	}
}

static weft_status_t measure_gamma(struct weft_comm *comm, double *gamma)
{
	size_t n = GAMMA_BYTES / sizeof(float);
	float *x = malloc(3 * GAMMA_BYTES);
	if (!x)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "tune calibrate: no memory");
	float *y = x + n, *dst = y + n;
	for (size_t i = 0; i < n; i++) {
		x[i] = (float)(i & 15);
		y[i] = 0.5f;
	}
	weft_reduce_fn sum = weft_reduce_kernel(WEFT_FLOAT32, WEFT_SUM);
	double best = INFINITY;
	for (int rep = 0; rep <= GAMMA_REPS; rep++) { /* rep 0 faults the pages in */
		double t0 = weft_now();
		sum(dst, x, y, n);
		if (rep > 0)
			best = fmin(best, weft_now() - t0);
	}
	free(x);
	*gamma = best / (double)GAMMA_BYTES;
	return WEFT_SUCCESS;
}

/* One class: the pair measures, then every rank learns the driver's result. */
static weft_status_t measure_class(struct pingpong *pp, struct cal_pair pair,
				   struct cal_result *all, struct cal_result *out)
{
	struct weft_comm *comm = pp->comm;
	struct cal_result mine = {0, 0, 0};
	weft_status_t st = WEFT_SUCCESS;
	pp->step = 0;
	if (comm->rank == pair.a) {
		pp->peer = pair.b;
		st = drive(pp, &mine);
		if (st == WEFT_SUCCESS)
			st = measure_gamma(comm, &mine.gamma);
	} else if (comm->rank == pair.b) {
		pp->peer = pair.a;
		st = echo(pp);
	}
	if (st != WEFT_SUCCESS)
		return st;
	memset(all, 0, (size_t)comm->nranks * sizeof(*all));
	all[comm->rank] = mine;
	st = weft_bootstrap_allgather(comm->bs, all, sizeof(*all), &comm->err);
	if (st == WEFT_SUCCESS)
		*out = all[pair.a];
	return st;
}

static bool usable(double v)
{
	return isfinite(v) && v > 0;
}

static void keep(double *dst, double v, const struct weft_comm *comm, const char *what,
		 enum weft_link_class c)
{
	if (usable(v))
		*dst = v;
	else if (comm->rank == 0)
		weft_log(WEFT_LOG_WARN, WEFT_SUB_TUNE,
			 "calibration: %s of the %s link measured %g; keeping the default %g", what,
			 weft_topo_link_name(c), v, *dst);
}

static void log_table(const struct weft_comm *comm, const struct cal_pair pair[], double seconds)
{
	if (comm->rank != 0 || !weft_log_enabled(WEFT_LOG_INFO, WEFT_SUB_TUNE))
		return;
	weft_log(WEFT_LOG_INFO, WEFT_SUB_TUNE,
		 "calibrated cost per link class in %.0f ms:", seconds * 1e3);
	for (int c = WEFT_LINK_NUMA; c < WEFT_LINK_CLASS_COUNT; c++) {
		const struct weft_cost *k = &comm->tuner->links.cls[c];
		char from[64];
		if (pair[c].a >= 0)
			snprintf(from, sizeof(from), "ranks %d-%d", pair[c].a, pair[c].b);
		else
			snprintf(from, sizeof(from), "alpha, beta: default, not in this job");
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TUNE,
			 "  %-5s alpha %8.2f us  beta %7.4f ns/B (%6.2f GB/s)  gamma %7.4f ns/B "
			 "(%6.2f GB/s)  [%s]",
			 weft_topo_link_name((enum weft_link_class)c), k->alpha * 1e6,
			 k->beta * 1e9, 1e-9 / k->beta, k->gamma * 1e9, 1e-9 / k->gamma, from);
	}
}

static bool in_a_pair(const struct weft_comm *comm, const struct cal_pair pair[])
{
	for (int c = 0; c < WEFT_LINK_CLASS_COUNT; c++)
		if (pair[c].a == comm->rank || pair[c].b == comm->rank)
			return true;
	return false;
}

weft_status_t weft_tune_calibrate(struct weft_comm *comm)
{
	weft_status_t st;
	if (!calibrate_enabled(comm, &st))
		return st;
	if (!comm->bs)
		return weft_comm_fail(comm, WEFT_ERR_INTERNAL,
				      "tune calibrate: called after the bootstrap closed");
	struct cal_pair pair[WEFT_LINK_CLASS_COUNT];
	if (find_pairs(comm, pair) == 0)
		return WEFT_SUCCESS; /* one rank: nothing to measure, nothing to choose */
	double start = weft_now();
	struct pingpong pp = {.comm = comm, .peer = -1};
	struct cal_result *all = calloc((size_t)comm->nranks, sizeof(*all));
	unsigned char *bufs = in_a_pair(comm, pair) ? malloc(2 * LARGE_BYTES) : NULL;
	if (!all || (in_a_pair(comm, pair) && !bufs)) {
		st = weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "tune calibrate: no memory");
		goto out_free;
	}
	if (bufs) {
		memset(bufs, 0, 2 * LARGE_BYTES);
		pp.out = bufs;
		pp.in = bufs + LARGE_BYTES;
	}
	struct weft_cost *cost = comm->tuner->links.cls;
	double gamma = 0;
	for (int c = WEFT_LINK_NUMA; c < WEFT_LINK_CLASS_COUNT; c++) {
		if (pair[c].a < 0)
			continue;
		struct cal_result r = {0};
		st = measure_class(&pp, pair[c], all, &r);
		if (st != WEFT_SUCCESS)
			goto out_free;
		keep(&cost[c].alpha, r.alpha, comm, "alpha", (enum weft_link_class)c);
		keep(&cost[c].beta, r.beta, comm, "beta", (enum weft_link_class)c);
		if (usable(r.gamma))
			gamma = fmax(gamma, r.gamma);
	}
	for (int c = WEFT_LINK_NUMA; c < WEFT_LINK_CLASS_COUNT && gamma > 0; c++)
		cost[c].gamma = gamma;
	log_table(comm, pair, weft_now() - start);
	st = WEFT_SUCCESS;
out_free:
	free(bufs);
	free(all);
	return st;
}
