/*
 * metrics_peers.c — the connections' series: per peer while a
 * communicator has traffic to at most WEFT_METRICS_PEERS peers, else
 * summed per peer leaf (at most WEFT_METRICS_PEERS leaves, the rest
 * "other"), so that a 10,000-rank job does not hand Prometheus 10,000
 * series per rank per family. What is read is the gate's counters
 * (core/gate.h): bytes and messages it admitted, and the transport's
 * signals (TCP_INFO on sockets) as the gate last read them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "health/metrics_int.h"

#define PEER_LABELS 400

/* One row: a peer, or a leaf's peers summed. */
struct row {
	char extra[PEER_LABELS];
	uint64_t sent, msgs, acked, path_us, rwnd_us, delivered, ce, retrans;
	uint32_t rtt_us;
	uint64_t rate;
	int peer; /* the peer (per-peer rows); -1 for a leaf */
	int peers;
};

struct rows {
	struct row *r;
	int n;
	int aggregated; /* peers summed into leaf rows (0: per peer) */
};

static void take(struct row *r, const struct weft_p2p_link *l)
{
	r->sent += weft_counter_get(&l->sent_bytes);
	r->msgs += weft_counter_get(&l->sent_msgs);
	r->acked += weft_counter_get(&l->sig.acked);
	r->path_us += weft_counter_get(&l->sig.path_us);
	r->rwnd_us += weft_counter_get(&l->sig.rwnd_us);
	r->delivered += weft_counter_get(&l->sig.delivered);
	r->ce += weft_counter_get(&l->sig.delivered_ce);
	r->retrans += weft_counter_get(&l->sig.retrans);
	r->rtt_us = atomic_load_explicit(&l->sig.rtt_us, memory_order_relaxed);
	r->rate = weft_counter_get(&l->rate_Bps);
	r->peers++;
}

static void escaped(char *out, size_t len, const char *fmt_before, const char *value)
{
	struct weft_mbuf b = {0};
	weft_mbuf_printf(&b, "%s", fmt_before);
	weft_mbuf_label(&b, value);
	snprintf(out, len, "%s", b.p ? b.p : "");
	weft_mbuf_free(&b);
}

static void peer_row(const struct weft_comm *comm, int p, struct row *r)
{
	char host[132], leaf[132];
	const char *ln = weft_comm_leaf_name(comm, p);
	escaped(host, sizeof(host), "", comm->cards[p].hostname);
	escaped(leaf, sizeof(leaf), "", ln ? ln : "");
	snprintf(r->extra, sizeof(r->extra),
		 ",peer=\"%d\",peer_host=\"%s\",peer_leaf=\"%s\",transport=\"%s\"", p, host, leaf,
		 weft_comm_peer_transport(comm, p));
	r->peer = p;
	take(r, &comm->peers[p].link);
}

/* Per leaf: the graph's leaf index of every peer with traffic; the first
 * @p max leaves get a row each, the rest one row "other". */
static int leaf_rows(const struct weft_comm *comm, int max, struct rows *out)
{
	const struct weft_topo_graph *g = &comm->graph;
	int *slot = malloc((size_t)g->nleaves * sizeof(int));
	out->r = calloc((size_t)max + 1, sizeof(*out->r));
	if (!slot || !out->r) {
		free(slot);
		return -1;
	}
	for (int l = 0; l < g->nleaves; l++)
		slot[l] = -1;
	for (int p = 0; p < comm->nranks; p++) {
		const struct weft_p2p_link *link = &comm->peers[p].link;
		if (p == comm->rank || weft_counter_get(&link->sent_msgs) == 0)
			continue;
		int l = g->leaf_of[p];
		if (slot[l] < 0) {
			slot[l] = out->n < max ? out->n++ : max;
			struct row *r = &out->r[slot[l]];
			if (slot[l] < max)
				escaped(r->extra, sizeof(r->extra), ",peer_leaf=\"",
					g->leaf_name[l]);
			else
				snprintf(r->extra, sizeof(r->extra), ",peer_leaf=\"other");
			strncat(r->extra, "\"", sizeof(r->extra) - strlen(r->extra) - 1);
			r->peer = -1;
		}
		take(&out->r[slot[l]], link);
		out->aggregated++;
	}
	if (out->r[max].peers > 0)
		out->n = max + 1;
	free(slot);
	return 0;
}

/* This communicator's rows: per peer, or per leaf beyond @p max peers. */
static int rows_of(const struct weft_metrics *m, struct rows *out)
{
	const struct weft_comm *comm = m->comm;
	int max = m->peers_max, with = 0;
	*out = (struct rows){0};
	for (int p = 0; p < comm->nranks; p++)
		with += p != comm->rank && weft_counter_get(&comm->peers[p].link.sent_msgs) > 0;
	if (with > max)
		return leaf_rows(comm, max, out);
	out->r = calloc((size_t)with + 1, sizeof(*out->r));
	if (!out->r)
		return -1;
	for (int p = 0; p < comm->nranks && out->n < with; p++)
		if (p != comm->rank && weft_counter_get(&comm->peers[p].link.sent_msgs) > 0)
			peer_row(comm, p, &out->r[out->n++]);
	return 0;
}

enum field { SENT, MSGS, ACKED, BUSY, RWND, DELIVERED, CE, RETRANS, RTT, RATE };

static const struct {
	const char *base; /* per peer; "weft_leaf" + base + 9 per leaf */
	enum weft_mkind kind;
	bool seconds; /* microseconds shown as seconds */
	const char *help;
} fields[] = {
    [SENT] = {"weft_peer_sent_bytes", WEFT_MK_COUNTER, false,
	      "bytes this rank sent to the peer (what the pacing gate admitted)"},
    [MSGS] = {"weft_peer_sent_messages", WEFT_MK_COUNTER, false, "messages sent to the peer"},
    [ACKED] = {"weft_peer_acked_bytes", WEFT_MK_COUNTER, false,
	       "bytes the peer acknowledged (TCP_INFO; 0 where the transport reports none)"},
    [BUSY] = {"weft_peer_path_seconds", WEFT_MK_COUNTER, true,
	      "time the connection had data out and the receiver's window open (TCP_INFO; the "
	      "busiest sub-flow's): acked bytes over this is the path's rate"},
    [RWND] = {"weft_peer_receiver_limited_seconds", WEFT_MK_COUNTER, true,
	      "time the receiver's window held the sub-flows back, summed over them (TCP_INFO)"},
    [DELIVERED] = {"weft_peer_delivered_segments", WEFT_MK_COUNTER, false,
		   "segments delivered (TCP_INFO)"},
    [CE] = {"weft_peer_ce_marked_segments", WEFT_MK_COUNTER, false,
	    "delivered segments that carried an ECN CE mark (TCP_INFO)"},
    [RETRANS] = {"weft_peer_retransmitted_segments", WEFT_MK_COUNTER, false,
		 "segments retransmitted (TCP_INFO)"},
    [RTT] = {"weft_peer_rtt_seconds", WEFT_MK_GAUGE, true,
	     "smoothed round-trip time at the last read (largest sub-flow's)"},
    [RATE] = {"weft_peer_pacer_rate_bytes_per_second", WEFT_MK_GAUGE, false,
	      "the pacer's rate while it limits the connection (0: not limiting)"},
};

static uint64_t value(const struct row *r, enum field f)
{
	switch (f) {
	case SENT: return r->sent;
	case MSGS: return r->msgs;
	case ACKED: return r->acked;
	case BUSY: return r->path_us;
	case RWND: return r->rwnd_us;
	case DELIVERED: return r->delivered;
	case CE: return r->ce;
	case RETRANS: return r->retrans;
	case RTT: return r->rtt_us;
	default: return r->rate;
	}
}

static void family(struct weft_mout *o, const struct weft_metrics *list, struct rows *all,
		   enum field f, bool leaves)
{
	char base[96], name[104];
	snprintf(base, sizeof(base), "%s%s", leaves ? "weft_leaf_" : "",
		 leaves ? fields[f].base + 10 : fields[f].base);
	snprintf(name, sizeof(name), "%s%s", base,
		 fields[f].kind == WEFT_MK_COUNTER ? "_total" : "");
	bool any = false;
	int i = 0;
	for (const struct weft_metrics *m = list; m; m = m->next, i++)
		for (int k = 0; k < all[i].n; k++) {
			if ((all[i].aggregated > 0) != leaves)
				continue;
			if (!any)
				weft_mout_header(o, base, fields[f].kind, fields[f].help);
			any = true;
			const struct row *r = &all[i].r[k];
			if (fields[f].seconds)
				weft_mout_d(o, name, m->labels, r->extra, value(r, f) * 1e-6);
			else
				weft_mout_u(o, name, m->labels, r->extra, value(r, f));
		}
}

static void subflows(struct weft_mout *o, const struct weft_metrics *list, struct rows *all)
{
	weft_mout_header(o, "weft_subflow_acked_bytes", WEFT_MK_COUNTER,
			 "bytes acknowledged per sub-flow of a connection (per-peer rows only)");
	int i = 0;
	for (const struct weft_metrics *m = list; m; m = m->next, i++)
		for (int k = 0; k < all[i].n && !all[i].aggregated; k++) {
			const struct row *r = &all[i].r[k];
			const struct weft_p2p_link *l = &m->comm->peers[r->peer].link;
			unsigned nsub = atomic_load_explicit(&l->sig.nsub, memory_order_relaxed);
			for (unsigned s = 0; s < nsub && s < WEFT_GATE_MAX_SUBFLOWS; s++) {
				char extra[PEER_LABELS + 24];
				snprintf(extra, sizeof(extra), ",peer=\"%d\",subflow=\"%u\"",
					 r->peer, s);
				weft_mout_u(o, "weft_subflow_acked_bytes_total", m->labels, extra,
					    weft_counter_get(&l->sig.sub_bytes[s]));
			}
		}
}

void weft_metrics_render_peers(const struct weft_metrics *list, struct weft_mout *o)
{
	int n = 0;
	for (const struct weft_metrics *m = list; m; m = m->next)
		n++;
	struct rows *all = calloc((size_t)n + 1, sizeof(*all));
	int i = 0;
	for (const struct weft_metrics *m = list; all && m; m = m->next, i++)
		if (rows_of(m, &all[i]) != 0)
			o->b->oom = true;
	if (!all || o->b->oom) {
		o->b->oom = true;
	} else {
		for (int f = SENT; f <= RATE; f++)
			family(o, list, all, (enum field)f, false);
		for (int f = SENT; f <= RETRANS; f++)
			if (f != BUSY && f != RWND)
				family(o, list, all, (enum field)f, true);
		subflows(o, list, all);
		weft_mout_header(o, "weft_metrics_peers_aggregated", WEFT_MK_GAUGE,
				 "peers whose series are summed per leaf (more than "
				 "WEFT_METRICS_PEERS had traffic); 0: per peer");
		i = 0;
		for (const struct weft_metrics *m = list; m; m = m->next, i++)
			weft_mout_u(o, "weft_metrics_peers_aggregated", m->labels, "",
				    (unsigned long long)all[i].aggregated);
	}
	for (i = 0; all && i < n; i++)
		free(all[i].r);
	free(all);
}
