/*
 * topo_watch_view.c — weft-topo --watch's frame, drawn with ncurses (a
 * full-screen view refreshed every --interval, q quits) or, with --once,
 * printed as text for scripts (two fetches an interval apart, so that
 * rates exist). The same lines either way; what the screen shows in
 * reverse video the text marks with "<<".
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/weft-topo/topo_print.h"
#include "tools/weft-topo/topo_watch.h"

#ifndef WEFT_HAVE_WATCH

int weft_tool_watch(char *const *targets, int n, bool once, double interval)
{
	fprintf(stderr, "weft-topo: --watch: this weft-topo was built without ncurses and libcurl "
			"(libncurses-dev, libcurl4-openssl-dev)\n");
	return 1;
}

#else

#include <curl/curl.h>
#include <curses.h>
#include <stdio.h>

enum style { PLAIN = 0, HEAD, HIGH };

struct canvas {
	bool curses;
	FILE *out;
	int row;
};

static void put(struct canvas *c, enum style st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void put(struct canvas *c, enum style st, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (!c->curses) {
		fprintf(c->out, "%s\n", line);
		return;
	}
	if (c->row >= LINES)
		return;
	int attr = st == HEAD ? A_BOLD : st == HIGH ? A_REVERSE | A_BOLD : A_NORMAL;
	attron(attr);
	mvaddnstr(c->row++, 0, line, COLS);
	attroff(attr);
}

static const char *rate_text(double bps, char *buf, size_t len)
{
	if (!(bps > 0))
		snprintf(buf, len, "-");
	else if (bps >= 1e9)
		snprintf(buf, len, "%.2f GB/s", bps / 1e9);
	else
		snprintf(buf, len, "%.1f MB/s", bps / 1e6);
	return buf;
}

/* The communicator shown: the one with the most ranks reporting. */
static const char *main_comm(const struct frame *f)
{
	const char *best = NULL;
	int most = 0;
	for (int i = 0; i < f->nranks; i++) {
		int n = 0;
		for (int k = 0; k < f->nranks; k++)
			n += strcmp(f->ranks[k].comm, f->ranks[i].comm) == 0;
		if (n > most) {
			most = n;
			best = f->ranks[i].comm;
		}
	}
	return best;
}

static const struct wslow *named(const struct frame *f, const char *comm, const char *kind,
				 int rank)
{
	for (int i = 0; i < f->nslow; i++)
		if (f->slow[i].named && f->slow[i].rank == rank &&
		    strcmp(f->slow[i].kind, kind) == 0 && strcmp(f->slow[i].comm, comm) == 0)
			return &f->slow[i];
	return NULL;
}

static const struct wrank *rank_in(const struct frame *f, const char *comm, int r)
{
	for (int i = 0; i < f->nranks; i++)
		if (f->ranks[i].rank == r && strcmp(f->ranks[i].comm, comm) == 0)
			return &f->ranks[i];
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The rank the others wait for: the lowest wait fraction, where the
 * median is a quarter or more and it is 0.2 below it; -1 none. */
static int slowest_rank(const struct frame *f, const char *comm)
{
	double w[1024];
	int n = 0, low = -1;
	for (int i = 0; i < f->nranks && n < 1024; i++) {
		const struct wrank *r = &f->ranks[i];
		if (strcmp(r->comm, comm) != 0 || !r->has_wait_rate)
			continue;
		w[n++] = r->wait_rate;
		if (low < 0 || r->wait_rate < f->ranks[low].wait_rate)
			low = i;
	}
	if (n < 3)
		return -1;
	qsort(w, (size_t)n, sizeof(*w), cmp_double);
	double med = n % 2 ? w[n / 2] : (w[n / 2 - 1] + w[n / 2]) / 2;
	return med >= 0.25 && f->ranks[low].wait_rate < med - 0.2 ? f->ranks[low].rank : -1;
}

static void rank_line(struct canvas *c, const struct frame *f, const struct wrank *r, int slowest)
{
	char bw[32], now[48] = "idle", wait[16] = "   -";
	bool slow = named(f, r->comm, "rank", r->rank) || r->rank == slowest;
	if (r->cur[0])
		snprintf(now, sizeof(now), "%s for %.2f s", r->cur, r->age);
	if (r->has_wait_rate)
		snprintf(wait, sizeof(wait), "%3.0f%%", 100 * r->wait_rate);
	put(c, slow ? HIGH : PLAIN, "  %-16.16s rank %-5d %-26s busbw %-10s ops %-9.0f wait %s%s",
	    r->host, r->rank, now, rate_text(r->busbw, bw, sizeof(bw)), r->ops, wait,
	    named(f, r->comm, "rank", r->rank) ? "   << SLOW RANK (detector)"
	    : slow			       ? "   << slowest rank"
					       : "");
}

static int by_leaf_host(const void *a, const void *b)
{
	const struct wrank *x = a, *y = b;
	int c = strcmp(x->leaf, y->leaf);
	if (!c)
		c = strcmp(x->host, y->host);
	return c ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

static void ranks(struct canvas *c, struct frame *f, const char *comm)
{
	qsort(f->ranks, (size_t)f->nranks, sizeof(*f->ranks), by_leaf_host);
	int slowest = slowest_rank(f, comm);
	const char *leaf = NULL;
	for (int i = 0; i < f->nranks; i++) {
		const struct wrank *r = &f->ranks[i];
		if (strcmp(r->comm, comm) != 0)
			continue;
		if (!leaf || strcmp(leaf, r->leaf) != 0) {
			leaf = r->leaf;
			put(c, HEAD, "leaf %s", leaf[0] ? leaf : "(none known)");
		}
		rank_line(c, f, r, slowest);
	}
}

static const char *host_of(const struct frame *f, const char *comm, int r)
{
	const struct wrank *w = rank_in(f, comm, r);
	return w ? w->host : "?";
}

/* A connection between two hosts the detector named one of. */
static bool touches_named(const struct frame *f, const char *comm, const struct wlink *l)
{
	for (int i = 0; i < f->nslow; i++) {
		const struct wslow *s = &f->slow[i];
		if (!s->named || strcmp(s->kind, "link") != 0 || strcmp(s->comm, comm) != 0)
			continue;
		if (strcmp(s->host, host_of(f, comm, l->src)) == 0 ||
		    strcmp(s->host, l->dst_host) == 0)
			return true;
	}
	return false;
}

static void links(struct canvas *c, const struct frame *f, const char *comm)
{
	int slowest = -1;
	for (int i = 0; i < f->nlinks; i++) {
		const struct wlink *l = &f->links[i];
		if (strcmp(l->comm, comm) == 0 && l->has_rate && l->path > 0 &&
		    (slowest < 0 || l->path < f->links[slowest].path))
			slowest = i;
	}
	put(c, HEAD, "links            %-28s %-12s %-12s %-8s %s", "hosts", "throughput",
	    "path rate", "CE", "retrans");
	for (int i = 0; i < f->nlinks; i++) {
		const struct wlink *l = &f->links[i];
		if (strcmp(l->comm, comm) != 0)
			continue;
		char hosts[160], tp[32], path[32], ce[16] = "-";
		snprintf(hosts, sizeof(hosts), "%s -> %s", host_of(f, comm, l->src), l->dst_host);
		if (l->has_rate && l->delivered > 0)
			snprintf(ce, sizeof(ce), "%.2f%%", 100 * l->ce_frac);
		bool det = touches_named(f, comm, l);
		put(c, det || i == slowest ? HIGH : PLAIN,
		    "  %4d -> %-6d %-28.28s %-12s %-12s %-8s %-7.0f%s", l->src, l->dst, hosts,
		    rate_text(l->has_rate ? l->tput : 0, tp, sizeof(tp)),
		    rate_text(l->has_rate ? l->path : 0, path, sizeof(path)), ce, l->retrans_d,
		    det		   ? "   << SLOW LINK (detector)"
		    : i == slowest ? "   << slowest link"
				   : "");
	}
}

static void verdicts(struct canvas *c, const struct frame *f, const char *comm)
{
	bool any = false;
	for (int i = 0; i < f->nslow; i++) {
		const struct wslow *s = &f->slow[i];
		if (!s->named || strcmp(s->comm, comm) != 0)
			continue;
		if (!any)
			put(c, HEAD, "named by the job's detector");
		any = true;
		put(c, HIGH, "  slow %s: rank %d (%s, %s)", s->kind, s->rank, s->host, s->addr);
	}
}

static void draw(struct canvas *c, struct frame *f, double interval)
{
	const char *comm = main_comm(f);
	time_t now = time(NULL);
	char clock[16];
	strftime(clock, sizeof(clock), "%H:%M:%S", localtime(&now));
	put(c, HEAD, "weft-topo --watch   %s   every %.1f s   %d of %d targets answered%s", clock,
	    interval, f->targets - f->failed, f->targets, c->curses ? "   q: quit" : "");
	if (f->failed)
		put(c, PLAIN, "  %s", f->error);
	if (!comm) {
		put(c, PLAIN, "  no Weft metrics yet");
		return;
	}
	const struct wrank *any = rank_in(f, comm, f->ranks[0].rank);
	put(c, PLAIN, "communicator %s, %d ranks", comm, any ? any->nranks : 0);
	ranks(c, f, comm);
	links(c, f, comm);
	verdicts(c, f, comm);
}

static void nap(double s)
{
	struct timespec t = {(time_t)s, (long)((s - floor(s)) * 1e9)};
	nanosleep(&t, NULL);
}

static int once_text(char *const *targets, int n, double interval)
{
	struct frame a, b;
	weft_watch_fetch(targets, n, &a, NULL);
	nap(interval);
	weft_watch_fetch(targets, n, &b, &a);
	struct canvas c = {.out = stdout};
	draw(&c, &b, interval);
	int rc = b.nranks > 0 ? 0 : 1;
	weft_watch_frame_free(&a);
	weft_watch_frame_free(&b);
	return rc;
}

static int live(char *const *targets, int n, double interval)
{
	struct frame prev = {0}, cur;
	initscr();
	cbreak();
	noecho();
	curs_set(0);
	keypad(stdscr, TRUE);
	for (;;) {
		weft_watch_fetch(targets, n, &cur, prev.t > 0 ? &prev : NULL);
		erase();
		struct canvas c = {.curses = true};
		draw(&c, &cur, interval);
		refresh();
		weft_watch_frame_free(&prev);
		prev = cur;
		timeout((int)(interval * 1000));
		int ch = getch();
		if (ch == 'q' || ch == 'Q')
			break;
	}
	weft_watch_frame_free(&prev);
	endwin();
	return 0;
}

int weft_tool_watch(char *const *targets, int n, bool once, double interval)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	int rc = once ? once_text(targets, n, interval) : live(targets, n, interval);
	curl_global_cleanup();
	return rc;
}

#endif
