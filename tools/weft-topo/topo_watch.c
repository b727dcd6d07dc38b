/*
 * topo_watch.c — weft-topo --watch's parser: a target's text (Prometheus
 * 0.0.4, which every Weft endpoint serves when OpenMetrics is not asked
 * for, and the format of WEFT_METRICS_FILE) into a frame's ranks, links
 * and verdicts. Lines that are not Weft's series are skipped: a target's
 * text is a stranger's as far as this program knows, so nothing in it is
 * trusted beyond what the parser checks (names and labels are cut to
 * their buffers, a malformed line is dropped).
 */
#include "tools/weft-topo/topo_watch.h"

#include <stdlib.h>
#include <string.h>

#define MAX_LABELS 16

struct label {
	char key[32];
	char value[WATCH_NAME];
};

struct line {
	char name[96];
	struct label l[MAX_LABELS];
	int n;
	double value;
};

static const char *label(const struct line *ln, const char *key)
{
	for (int i = 0; i < ln->n; i++)
		if (strcmp(ln->l[i].key, key) == 0)
			return ln->l[i].value;
	return "";
}

/* key="value" pairs up to '}', escapes \\ \" \n; false on anything else. */
static bool parse_labels(const char **pp, const char *end, struct line *ln)
{
	const char *p = *pp;
	while (p < end && *p != '}') {
		struct label *l = ln->n < MAX_LABELS ? &ln->l[ln->n++] : NULL;
		size_t k = 0, v = 0;
		while (p < end && *p != '=' && *p != '}')
			if (l && k + 1 < sizeof(l->key))
				l->key[k++] = *p++;
			else
				p++;
		if (p + 1 >= end || p[0] != '=' || p[1] != '"')
			return false;
		for (p += 2; p < end && *p != '"'; p++) {
			char c = *p;
			if (c == '\\' && p + 1 < end)
				c = *++p == 'n' ? '\n' : *p;
			if (l && v + 1 < sizeof(l->value))
				l->value[v++] = c;
		}
		if (p >= end)
			return false;
		if (l) {
			l->key[k] = '\0';
			l->value[v] = '\0';
		}
		p++;
		if (p < end && *p == ',')
			p++;
	}
	if (p >= end)
		return false;
	*pp = p + 1;
	return true;
}

static bool parse_line(const char *p, const char *end, struct line *ln)
{
	size_t n = 0;
	memset(ln, 0, sizeof(*ln));
	while (p < end && *p != '{' && *p != ' ' && n + 1 < sizeof(ln->name))
		ln->name[n++] = *p++;
	if (strncmp(ln->name, "weft_", 5) != 0)
		return false;
	if (p < end && *p == '{') {
		p++;
		if (!parse_labels(&p, end, ln))
			return false;
	}
	char num[64];
	size_t k = 0;
	while (p < end && *p == ' ')
		p++;
	while (p < end && *p != ' ' && *p != '\n' && k + 1 < sizeof(num))
		num[k++] = *p++;
	num[k] = '\0';
	char *e;
	ln->value = strtod(num, &e);
	return k > 0 && *e == '\0';
}

static struct wrank *rank_of(struct frame *f, const struct line *ln)
{
	const char *comm = label(ln, "comm");
	int r = atoi(label(ln, "rank"));
	for (int i = 0; i < f->nranks; i++)
		if (f->ranks[i].rank == r && strcmp(f->ranks[i].comm, comm) == 0)
			return &f->ranks[i];
	if (f->nranks == f->cap_r) {
		int cap = f->cap_r ? 2 * f->cap_r : 16;
		struct wrank *p = realloc(f->ranks, (size_t)cap * sizeof(*p));
		if (!p)
			return NULL;
		f->ranks = p;
		f->cap_r = cap;
	}
	struct wrank *w = &f->ranks[f->nranks++];
	memset(w, 0, sizeof(*w));
	snprintf(w->comm, sizeof(w->comm), "%s", comm);
	w->rank = r;
	snprintf(w->host, sizeof(w->host), "%s", label(ln, "host"));
	snprintf(w->leaf, sizeof(w->leaf), "%s", label(ln, "leaf"));
	w->busbw_class = -1;
	return w;
}

static struct wlink *link_of(struct frame *f, const struct line *ln)
{
	const char *comm = label(ln, "comm");
	int src = atoi(label(ln, "rank")), dst = atoi(label(ln, "peer"));
	for (int i = 0; i < f->nlinks; i++)
		if (f->links[i].src == src && f->links[i].dst == dst &&
		    strcmp(f->links[i].comm, comm) == 0)
			return &f->links[i];
	if (f->nlinks == f->cap_l) {
		int cap = f->cap_l ? 2 * f->cap_l : 16;
		struct wlink *p = realloc(f->links, (size_t)cap * sizeof(*p));
		if (!p)
			return NULL;
		f->links = p;
		f->cap_l = cap;
	}
	struct wlink *l = &f->links[f->nlinks++];
	memset(l, 0, sizeof(*l));
	snprintf(l->comm, sizeof(l->comm), "%s", comm);
	l->src = src;
	l->dst = dst;
	return l;
}

static void take_slow(struct frame *f, const struct line *ln)
{
	if (f->nslow == (int)(sizeof(f->slow) / sizeof(f->slow[0])))
		return;
	struct wslow *s = &f->slow[f->nslow++];
	snprintf(s->comm, sizeof(s->comm), "%s", label(ln, "comm"));
	snprintf(s->kind, sizeof(s->kind), "%s", label(ln, "kind"));
	s->rank = atoi(label(ln, "suspect_rank"));
	snprintf(s->host, sizeof(s->host), "%s", label(ln, "suspect_host"));
	snprintf(s->addr, sizeof(s->addr), "%s", label(ln, "suspect_addr"));
	s->named = ln->value > 0;
}

/* The size classes of the metrics (health/metrics.h), smallest first. */
static int size_class(const struct line *ln)
{
	static const char *const names[] = {"0-64K", "64K-1M", "1M-16M", "16M-inf"};
	for (int i = 0; i < 4; i++)
		if (strcmp(label(ln, "size"), names[i]) == 0)
			return i;
	return -1;
}

static void take_rank(struct frame *f, const struct line *ln)
{
	struct wrank *w = rank_of(f, ln);
	if (!w)
		return;
	const char *n = ln->name;
	if (strcmp(n, "weft_info") == 0)
		w->nranks = atoi(label(ln, "nranks"));
	else if (strcmp(n, "weft_operation_in_flight") == 0)
		snprintf(w->cur, sizeof(w->cur), "%s", label(ln, "collective"));
	else if (strcmp(n, "weft_operation_age_seconds") == 0)
		w->age = ln->value;
	else if (strcmp(n, "weft_operations_finished_total") == 0)
		w->ops = ln->value;
	else if (strcmp(n, "weft_wait_seconds_total") == 0) {
		w->wait = ln->value;
		w->has_wait = true;
	} else if (strcmp(n, "weft_stall_seconds_total") == 0)
		w->stall = ln->value;
	else if (strcmp(n, "weft_busbw_bytes_per_second") == 0 && size_class(ln) > w->busbw_class) {
		w->busbw = ln->value;
		w->busbw_class = size_class(ln);
		snprintf(w->busbw_coll, sizeof(w->busbw_coll), "%s", label(ln, "collective"));
	}
}

static void take_link(struct frame *f, const struct line *ln)
{
	struct wlink *l = link_of(f, ln);
	if (!l)
		return;
	const char *n = ln->name + strlen("weft_peer_");
	if (strncmp(ln->name, "weft_subflow_", 13) == 0) {
		int s = atoi(label(ln, "subflow")) + 1;
		l->nsub = s > l->nsub ? s : l->nsub;
		return;
	}
	if (!l->dst_host[0])
		snprintf(l->dst_host, sizeof(l->dst_host), "%s", label(ln, "peer_host"));
	if (strcmp(n, "sent_bytes_total") == 0)
		l->sent = ln->value;
	else if (strcmp(n, "acked_bytes_total") == 0)
		l->acked = ln->value;
	else if (strcmp(n, "path_seconds_total") == 0)
		l->busy = ln->value;
	else if (strcmp(n, "receiver_limited_seconds_total") == 0)
		l->rwnd = ln->value;
	else if (strcmp(n, "ce_marked_segments_total") == 0)
		l->ce = ln->value;
	else if (strcmp(n, "delivered_segments_total") == 0)
		l->delivered = ln->value;
	else if (strcmp(n, "retransmitted_segments_total") == 0)
		l->retrans = ln->value;
}

void weft_watch_parse(const char *text, size_t len, struct frame *f)
{
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		struct line ln;
		if (*p != '#' && parse_line(p, eol, &ln)) {
			if (strcmp(ln.name, "weft_slow") == 0)
				take_slow(f, &ln);
			else if (strncmp(ln.name, "weft_peer_", 10) == 0 ||
				 strncmp(ln.name, "weft_subflow_", 13) == 0)
				take_link(f, &ln);
			else if (label(&ln, "rank")[0])
				take_rank(f, &ln);
		}
		p = eol + 1;
	}
}

void weft_watch_frame_free(struct frame *f)
{
	free(f->ranks);
	free(f->links);
	memset(f, 0, sizeof(*f));
}
