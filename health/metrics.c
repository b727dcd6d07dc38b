/* metrics.c — the counters' settings and hooks (metrics.h says why). */
#include "health/metrics.h"

#include <arpa/inet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "health/metrics_int.h"
#include "util/settings.h"

const uint64_t weft_metrics_bucket_ns[WEFT_METRICS_BUCKETS] = {
    5000,     25000,	 100000,     500000,	 2500000,     10000000,
    50000000, 250000000, 1000000000, 5000000000, 30000000000, 120000000000,
};

const char *const weft_metrics_class_name[WEFT_METRICS_CLASSES] = {"0-64K", "64K-1M", "1M-16M",
								   "16M-inf"};

static weft_status_t bad(struct weft_comm *comm, const char *name, const char *expected)
{
	return weft_err_set(&comm->err, WEFT_ERR_INVALID_ARG, "%s=%s: expected %s", name,
			    weft_setting_str(name), expected);
}

/* Every rank checks every setting, set or not, so a typo fails init on
 * all of them alike rather than on the one that would have used it. */
static weft_status_t check_settings(struct weft_comm *comm, struct weft_metrics_conf *c)
{
	double interval = 0;
	long port = 0, peers = 0, conns = 0;
	if (!weft_setting_double("WEFT_METRICS_INTERVAL", &interval) || !(interval >= 0.05) ||
	    !isfinite(interval))
		return bad(comm, "WEFT_METRICS_INTERVAL", "seconds, 0.05 or more");
	if (weft_setting_str("WEFT_METRICS_PORT") &&
	    (!weft_setting_long("WEFT_METRICS_PORT", &port) || port < 1 || port > 65535))
		return bad(comm, "WEFT_METRICS_PORT", "a TCP port, 1 to 65535");
	if (!weft_setting_long("WEFT_METRICS_PEERS", &peers) || peers > 4096)
		return bad(comm, "WEFT_METRICS_PEERS", "a count of peers, 0 to 4096");
	if (!weft_setting_long("WEFT_METRICS_CONNECTIONS", &conns) || conns < 1 || conns > 1024)
		return bad(comm, "WEFT_METRICS_CONNECTIONS", "a count of connections, 1 to 1024");
	const char *addr = weft_setting_str("WEFT_METRICS_ADDR");
	unsigned char a[16];
	if (inet_pton(AF_INET, addr, a) != 1 && inet_pton(AF_INET6, addr, a) != 1)
		return bad(comm, "WEFT_METRICS_ADDR", "a numeric IPv4 or IPv6 address");
	c->interval_s = interval;
	c->port = (int)port;
	c->peers = (int)peers;
	c->connections = (int)conns;
	return WEFT_SUCCESS;
}

weft_status_t weft_metrics_init(struct weft_comm *comm)
{
	struct weft_metrics_conf conf = {0};
	weft_status_t st = check_settings(comm, &conf);
	if (st != WEFT_SUCCESS)
		return st;
	if (!weft_setting_str("WEFT_METRICS_FILE") && !conf.port)
		return WEFT_SUCCESS;
	comm->metrics = calloc(1, sizeof(*comm->metrics));
	if (!comm->metrics)
		return weft_err_set(&comm->err, WEFT_ERR_NO_MEMORY, "init: no memory for metrics");
	comm->metrics->comm = comm;
	comm->metrics->peers_max = conf.peers;
	return WEFT_SUCCESS;
}

static int class_of(uint64_t bytes)
{
	return bytes < (64u << 10) ? 0 : bytes < (1u << 20) ? 1 : bytes < (16u << 20) ? 2 : 3;
}

static int bucket_of(uint64_t ns)
{
	int b = 0;
	while (b < WEFT_METRICS_BUCKETS && ns > weft_metrics_bucket_ns[b])
		b++;
	return b;
}

/* The algorithm's slot (the first free one takes a new name; the last
 * slot takes whatever does not fit). */
static struct weft_metrics_algo *algo_slot(struct weft_metrics_coll *c, const char *name)
{
	for (int i = 0; i < WEFT_METRICS_ALGOS; i++) {
		struct weft_metrics_algo *a = &c->algo[i];
		const char *have = atomic_load_explicit(&a->name, memory_order_acquire);
		if (have == name)
			return a;
		if (!have) {
			atomic_store_explicit(&a->name, name, memory_order_release);
			return a;
		}
	}
	return &c->algo[WEFT_METRICS_ALGOS - 1];
}

/* The bytes nccl-tests would call the size of this call (the busbw's S). */
static uint64_t bus_bytes(const struct weft_task *task, int nranks)
{
	const struct weft_coll_args *a = &task->args;
	uint64_t b = (uint64_t)a->count * a->esize;
	switch (a->coll) {
	case WEFT_COLL_ALLGATHER:
	case WEFT_COLL_REDUCE_SCATTER:
	case WEFT_COLL_ALLTOALL:
	case WEFT_COLL_GATHER:
	case WEFT_COLL_SCATTER: return b * (uint64_t)nranks;
	default: return b;
	}
}

void weft_metrics_started(struct weft_task *task, uint64_t call)
{
	struct weft_metrics *m = task->comm->metrics;
	if (!m)
		return;
	weft_counter_set(&m->cur_coll, (uint64_t)task->args.coll);
	if (!weft_task_is_p2p(task))
		weft_counter_set(&m->cur_call, call + 1);
	weft_counter_set(&m->cur_since_ns, task->posted_ns);
	weft_counter_add(&m->started, 1);
}

void weft_metrics_op(struct weft_task *task, weft_status_t status, uint64_t now_ns)
{
	struct weft_metrics *m = task->comm->metrics;
	if (!m || (unsigned)task->args.coll >= WEFT_COLL_COUNT)
		return;
	struct weft_metrics_coll *c = &m->coll[task->args.coll];
	struct weft_metrics_algo *a = algo_slot(c, task->algo_name ? task->algo_name : "none");
	uint64_t bytes = (uint64_t)task->args.count * task->args.esize;
	uint64_t ns = now_ns > task->posted_ns ? now_ns - task->posted_ns : 0;
	int k = class_of(bytes);
	weft_counter_add(&a->ops, 1);
	weft_counter_add(&a->bytes, bytes);
	weft_counter_add(&c->hist[k][bucket_of(ns)], 1);
	weft_counter_add(&c->sum_ns[k], ns);
	weft_counter_add(&c->count[k], 1);
	if (status == WEFT_SUCCESS) {
		weft_counter_set(&c->last_bytes[k], bus_bytes(task, task->comm->nranks));
		weft_counter_set(&c->last_ns[k], ns);
	} else {
		weft_counter_add(&a->failed, 1);
		if (status == WEFT_ERR_TIMEOUT)
			weft_counter_add(&m->timeouts, 1);
	}
	weft_counter_add(&m->finished, 1);
}

void weft_metrics_event(struct weft_comm *comm, enum weft_trace_event_kind kind)
{
	struct weft_metrics *m = comm->metrics;
	if (m && (unsigned)kind < WEFT_EV_COUNT)
		atomic_fetch_add_explicit(&m->events[kind], 1, memory_order_relaxed);
}

const struct weft_comm_observer weft_metrics_observer = {
    .size = sizeof(struct weft_comm_observer),
    .name = "metrics",
    .precise_clock = true, /* the histograms' times */
    .started = weft_metrics_started,
    .done = weft_metrics_op,
    .event = weft_metrics_event,
};

void weft_metrics_register(struct weft_comm *comm)
{
	if (comm->metrics)
		weft_metrics_export_add(comm->metrics, (int)comm->cards[comm->rank].local_rank);
}

void weft_metrics_leave(struct weft_comm *comm)
{
	if (comm->metrics)
		weft_metrics_export_remove(comm->metrics);
}

void weft_metrics_free(struct weft_comm *comm)
{
	free(comm->metrics);
	comm->metrics = NULL;
}
