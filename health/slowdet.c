/* slowdet.c — the detector's settings and state, what the driving thread
 * measures, and its series in the metrics (slowdet.h says why;
 * slowdet_watch.c and slowdet_root.c run in the watch's thread). */
#include "health/slowdet.h"

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/gate.h"
#include "core/task.h"
#include "core/watch.h"
#include "health/metrics_int.h"
#include "health/slowdet_int.h"
#include "util/clock.h"
#include "util/settings.h"

/* A gap this long between two iterations of a wait: the process did not
 * run (descheduled, stopped), and the time is a stall, not a wait. */
#define STALL_NS 3000000ull
/* Connections whose signals one read may take (the rest the next time). */
#define READS_PER_TICK 64

static weft_status_t read_settings(struct weft_comm *comm, bool *on, double *period, long *confirm)
{
	const char *v = weft_setting_str("WEFT_DETECT");
	if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
		return weft_err_set(&comm->err, WEFT_ERR_INVALID_ARG,
				    "WEFT_DETECT=%s: expected 0 or 1", v);
	*on = strcmp(v, "1") == 0;
	if (!weft_setting_double("WEFT_DETECT_PERIOD", period) || !(*period >= 0.01) ||
	    !(*period <= 10))
		return weft_err_set(&comm->err, WEFT_ERR_INVALID_ARG,
				    "WEFT_DETECT_PERIOD=%s: expected seconds, 0.01 to 10",
				    weft_setting_str("WEFT_DETECT_PERIOD"));
	if (!weft_setting_long("WEFT_DETECT_CONFIRM", confirm) || *confirm < 1 || *confirm > 100)
		return weft_err_set(&comm->err, WEFT_ERR_INVALID_ARG,
				    "WEFT_DETECT_CONFIRM=%s: expected periods, 1 to 100",
				    weft_setting_str("WEFT_DETECT_CONFIRM"));
	return WEFT_SUCCESS;
}

weft_status_t weft_slowdet_init(struct weft_comm *comm)
{
	bool on = false;
	double period = 0;
	long confirm = 0;
	weft_status_t st = read_settings(comm, &on, &period, &confirm);
	if (st != WEFT_SUCCESS || !on || comm->nranks < 3)
		return st;
	struct weft_slowdet *d = calloc(1, sizeof(*d));
	if (!d)
		return weft_err_set(&comm->err, WEFT_ERR_NO_MEMORY,
				    "init: no memory for the detector");
	comm->slowdet = d;
	d->comm = comm;
	d->period_ns = (uint64_t)(period * 1e9);
	d->confirm = (int)confirm;
	pthread_mutex_init(&d->lock, NULL);
	size_t n = (size_t)comm->nranks;
	d->pub.wait_on = calloc(n, sizeof(*d->pub.wait_on));
	d->pub.late_ns = calloc(n, sizeof(*d->pub.late_ns));
	d->pub.late_n = calloc(n, sizeof(*d->pub.late_n));
	d->prev_late = calloc(2 * n, sizeof(*d->prev_late));
	d->read_at = calloc(n, sizeof(*d->read_at));
	d->prev_wait_on = calloc(n, sizeof(*d->prev_wait_on));
	d->prev_link = calloc(n, sizeof(*d->prev_link));
	d->last_seq = calloc(n, sizeof(*d->last_seq));
	if (!d->pub.wait_on || !d->pub.late_ns || !d->pub.late_n || !d->prev_late || !d->read_at ||
	    !d->prev_wait_on || !d->prev_link || !d->last_seq)
		return weft_err_set(&comm->err, WEFT_ERR_NO_MEMORY,
				    "init: no memory for the detector");
	return WEFT_SUCCESS;
}

void weft_slowdet_fini(struct weft_comm *comm)
{
	struct weft_slowdet *d = comm->slowdet;
	if (!d)
		return;
	comm->slowdet = NULL;
	weft_slowdet_root_free(d->root);
	pthread_mutex_destroy(&d->lock);
	free(d->pub.wait_on);
	free(d->pub.late_ns);
	free(d->pub.late_n);
	free(d->prev_late);
	free(d->read_at);
	free(d->prev_wait_on);
	free(d->prev_link);
	free(d->last_seq);
	free(d);
}

/* The part of @p dt, the time since the wait loop's last look, that this
 * rank did not run: what it slept on purpose since (epoll_wait, counted by
 * core/wait.c) is a wait, the rest of a gap longer than STALL_NS a stall. */
static uint64_t stalled_in(struct weft_slowdet *d, uint64_t dt, uint64_t slept)
{
	uint64_t vol = slept - d->look_slept;
	uint64_t away = dt > vol ? dt - vol : 0;
	return away > STALL_NS ? away : 0;
}

static uint64_t slept_now(const struct weft_comm *comm)
{
	return atomic_load_explicit(&comm->wait.slept_ns, memory_order_relaxed);
}

void weft_slowdet_waited(struct weft_comm *comm, const struct weft_task *task, uint64_t *last)
{
	struct weft_slowdet *d = comm->slowdet;
	uint64_t now = weft_now_ns();
	uint64_t dt = now - *last;
	*last = now;
	if (!d)
		return;
	uint64_t slept = slept_now(comm);
	uint64_t stall = stalled_in(d, dt, slept);
	d->look_ns = now;
	d->look_slept = slept;
	if (stall) {
		weft_counter_add(&d->pub.stall_ns, stall);
		if (d->stall_task != task || d->stall_task_started != task->started_ns) {
			d->stall_task = task;
			d->stall_task_started = task->started_ns;
			d->stall_task_ns = 0;
		}
		d->stall_task_ns += stall;
		dt -= stall;
	}
	weft_counter_add(&d->pub.wait_ns, dt);
	int p = task->waiting_for;
	if (p >= 0 && p < comm->nranks)
		weft_counter_add(&d->pub.wait_on[p], dt);
}

void weft_slowdet_first(const struct weft_task *task, int peer)
{
	struct weft_slowdet *d = task->comm->slowdet;
	if (!d || peer < 0 || peer >= task->comm->nranks || !task->started_ns)
		return;
	uint64_t now = weft_now_ns();
	uint64_t late = now > task->started_ns ? now - task->started_ns : 0;
	/* What this rank did not run of that time: the stalls its wait loop
	 * saw in this task, and the gap since the loop's last look (in the
	 * task), which the loop has not judged yet. */
	uint64_t away = 0;
	if (d->stall_task == task && d->stall_task_started == task->started_ns)
		away = d->stall_task_ns;
	if (d->look_ns) {
		uint64_t from = d->look_ns > task->started_ns ? d->look_ns : task->started_ns;
		away += stalled_in(d, now > from ? now - from : 0, slept_now(task->comm));
	}
	late = late > away ? late - away : 0;
	weft_counter_add(&d->pub.late_ns[peer], late);
	weft_counter_add(&d->pub.late_n[peer], 1);
}

static void op_done(struct weft_task *task, weft_status_t status, uint64_t now_ns)
{
	struct weft_slowdet *d = task->comm->slowdet;
	if (d)
		weft_counter_add(&d->pub.ops, 1);
}

/* Every WEFT_OBSERVE_TICK-th progress (the core counts) looks at the clock; every half period
 * the connections that sent since their last read are read (the paced
 * ones are read by their pacer's tick already). */
void weft_slowdet_tick(struct weft_comm *comm)
{
	struct weft_slowdet *d = comm->slowdet;
	if (!d)
		return;
	uint64_t now = weft_now_ns();
	if (now < d->next_read_ns)
		return;
	d->next_read_ns = now + d->period_ns / 2;
	int reads = 0;
	for (int p = 0; p < comm->nranks && reads < READS_PER_TICK; p++) {
		struct weft_p2p_link *link = &comm->peers[p].link;
		uint64_t sent = weft_counter_get(&link->sent_bytes);
		if (!link->has_signals || link->paced || sent == d->read_at[p])
			continue;
		d->read_at[p] = sent;
		weft_gate_sample(link);
		reads++;
	}
}

const struct weft_comm_observer weft_slowdet_observer = {
    .size = sizeof(struct weft_comm_observer),
    .name = "slowdet",
    .waits = true,
    .done = op_done,
    .waited = weft_slowdet_waited,
    .tick = weft_slowdet_tick,
};

/* ---- the metrics' series ---- */

static void render_named(const struct weft_metrics *m, struct weft_mout *o)
{
	struct weft_slowdet *d = m->comm->slowdet;
	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	for (int i = 0; i < d->nkept; i++) {
		const struct slowdet_verdict *v = &d->kept[i];
		const struct weft_comm *c = m->comm;
		char addr[64], extra[400];
		weft_watch_addr(c, v->rank, addr, sizeof(addr));
		struct weft_mbuf b = {0};
		weft_mbuf_printf(&b, ",kind=\"%s\",suspect_rank=\"%d\",suspect_host=\"",
				 v->kind == DETECT_LINK ? "link" : "rank", v->rank);
		weft_mbuf_label(&b, c->cards[v->rank].hostname);
		weft_mbuf_printf(&b, "\",suspect_addr=\"%s\"", addr);
		snprintf(extra, sizeof(extra), "%s", b.p ? b.p : "");
		weft_mbuf_free(&b);
		weft_mout_u(o, "weft_slow", m->labels, extra, v->named);
	}
	pthread_mutex_unlock(&d->lock);
}

void weft_slowdet_render(const struct weft_metrics *list, struct weft_mout *o)
{
	weft_mout_header(o, "weft_slow", WEFT_MK_GAUGE,
			 "1 while the detector names a slow link (a host's uplink) or a slow "
			 "rank, 0 once it recovered");
	for (const struct weft_metrics *m = list; m; m = m->next)
		render_named(m, o);
	static const struct {
		const char *base, *help;
		size_t off;
	} sums[] = {
	    {"weft_wait_seconds", "time blocked in a wait for peers, running",
	     offsetof(struct weft_slowdet_pub, wait_ns)},
	    {"weft_stall_seconds", "time blocked in a wait but not running (descheduled, stopped)",
	     offsetof(struct weft_slowdet_pub, stall_ns)},
	};
	for (size_t k = 0; k < sizeof(sums) / sizeof(sums[0]); k++) {
		char name[64];
		snprintf(name, sizeof(name), "%s_total", sums[k].base);
		weft_mout_header(o, sums[k].base, WEFT_MK_COUNTER, sums[k].help);
		for (const struct weft_metrics *m = list; m; m = m->next) {
			struct weft_slowdet *d = m->comm->slowdet;
			if (!d)
				continue;
			const weft_counter_t *c =
			    (const weft_counter_t *)((const char *)&d->pub + sums[k].off);
			weft_mout_d(o, name, m->labels, "", weft_counter_get(c) * 1e-9);
		}
	}
}
