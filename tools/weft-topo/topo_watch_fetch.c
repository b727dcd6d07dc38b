/*
 * topo_watch_fetch.c — one frame of weft-topo --watch: every URL fetched
 * at once (libcurl's multi interface, 2 s at most, 64 MiB at most each),
 * every file read, all parsed (topo_watch.c), then the rates since the
 * previous frame: throughput (bytes sent), path rate (bytes acknowledged
 * over the time with data out, less the receiver's), marks, waits.
 */
#include "tools/weft-topo/topo_watch.h"

#ifdef WEFT_HAVE_WATCH

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BODY_MAX       (64u << 20) /* a target that sends more is not Weft */
#define PATH_MIN_BYTES (64u << 10) /* acknowledged in a frame, for a path rate */

struct body {
	char *p;
	size_t n, cap;
	bool too_big;
};

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct body *b = arg;
	size_t len = size * nmemb;
	if (b->n + len > BODY_MAX) {
		b->too_big = true;
		return 0;
	}
	if (b->n + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		while (cap < b->n + len + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, len);
	b->n += len;
	return len;
}

static void fail(struct frame *f, const char *target, const char *why)
{
	if (!f->failed++)
		snprintf(f->error, sizeof(f->error), "%s: %s", target, why);
}

static bool is_url(const char *t)
{
	return strncmp(t, "http://", 7) == 0 || strncmp(t, "https://", 8) == 0;
}

static void read_file(const char *path, struct frame *f)
{
	FILE *in = fopen(path, "r");
	struct body b = {0};
	char buf[65536];
	size_t k;
	if (!in) {
		fail(f, path, strerror(errno));
		return;
	}
	while ((k = fread(buf, 1, sizeof(buf), in)) > 0 && on_data(buf, 1, k, &b) == k)
		;
	fclose(in);
	weft_watch_parse(b.p ? b.p : "", b.n, f);
	free(b.p);
}

/* "http://h:p" without a path gets "/metrics". */
static void url_of(const char *t, char *out, size_t len)
{
	const char *host = strstr(t, "://") + 3;
	snprintf(out, len, "%s%s", t, strchr(host, '/') ? "" : "/metrics");
}

static void fetch_urls(char *const *targets, int n, struct frame *f)
{
	CURLM *multi = curl_multi_init();
	CURL **easy = calloc((size_t)n, sizeof(*easy));
	struct body *bodies = calloc((size_t)n, sizeof(*bodies));
	struct curl_slist *hdr = curl_slist_append(NULL, "Accept: text/plain; version=0.0.4");
	for (int i = 0; multi && easy && bodies && i < n; i++) {
		char url[1024];
		if (!is_url(targets[i]))
			continue;
		url_of(targets[i], url, sizeof(url));
		easy[i] = curl_easy_init();
		curl_easy_setopt(easy[i], CURLOPT_URL, url);
		curl_easy_setopt(easy[i], CURLOPT_WRITEFUNCTION, on_data);
		curl_easy_setopt(easy[i], CURLOPT_WRITEDATA, &bodies[i]);
		curl_easy_setopt(easy[i], CURLOPT_TIMEOUT_MS, 2000L);
		curl_easy_setopt(easy[i], CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(easy[i], CURLOPT_NOSIGNAL, 1L);
		curl_multi_add_handle(multi, easy[i]);
	}
	int running = 1;
	while (multi && running > 0 && curl_multi_perform(multi, &running) == CURLM_OK)
		if (running > 0)
			curl_multi_poll(multi, NULL, 0, 100, NULL);
	for (int i = 0; easy && bodies && i < n; i++) {
		if (!easy[i])
			continue;
		long code = 0;
		curl_easy_getinfo(easy[i], CURLINFO_RESPONSE_CODE, &code);
		if (code == 200 && !bodies[i].too_big)
			weft_watch_parse(bodies[i].p ? bodies[i].p : "", bodies[i].n, f);
		else
			fail(f, targets[i],
			     bodies[i].too_big ? "more than 64 MiB"
			     : code	       ? "HTTP error"
					       : "no answer");
		curl_multi_remove_handle(multi, easy[i]);
		curl_easy_cleanup(easy[i]);
		free(bodies[i].p);
	}
	curl_slist_free_all(hdr);
	free(easy);
	free(bodies);
	if (multi)
		curl_multi_cleanup(multi);
}

static const struct wlink *prev_link(const struct frame *prev, const struct wlink *l)
{
	for (int i = 0; prev && i < prev->nlinks; i++)
		if (prev->links[i].src == l->src && prev->links[i].dst == l->dst &&
		    strcmp(prev->links[i].comm, l->comm) == 0)
			return &prev->links[i];
	return NULL;
}

static const struct wrank *prev_rank(const struct frame *prev, const struct wrank *r)
{
	for (int i = 0; prev && i < prev->nranks; i++)
		if (prev->ranks[i].rank == r->rank && strcmp(prev->ranks[i].comm, r->comm) == 0)
			return &prev->ranks[i];
	return NULL;
}

static void rates(struct frame *f, const struct frame *prev)
{
	double dt = prev ? f->t - prev->t : 0;
	for (int i = 0; dt > 0 && i < f->nlinks; i++) {
		struct wlink *l = &f->links[i];
		const struct wlink *p = prev_link(prev, l);
		if (!p)
			continue;
		double busy = (l->busy - p->busy) - (l->rwnd - p->rwnd),
		       acked = l->acked - p->acked;
		l->has_rate = true;
		l->tput = (l->sent - p->sent) / dt;
		/* a few small messages' rate is their size over an RTT, not the path's */
		l->path = busy > 1e-3 && acked >= PATH_MIN_BYTES ? acked / busy : 0;
		double dd = l->delivered - p->delivered;
		l->ce_frac = dd > 0 ? (l->ce - p->ce) / dd : 0;
		l->retrans_d = l->retrans - p->retrans;
	}
	for (int i = 0; dt > 0 && i < f->nranks; i++) {
		struct wrank *r = &f->ranks[i];
		const struct wrank *p = prev_rank(prev, r);
		if (p && r->has_wait && p->has_wait) {
			r->has_wait_rate = true;
			r->wait_rate = (r->wait - p->wait) / dt;
		}
	}
}

void weft_watch_fetch(char *const *targets, int n, struct frame *f, const struct frame *prev)
{
	struct timespec ts;
	memset(f, 0, sizeof(*f));
	f->targets = n;
	fetch_urls(targets, n, f);
	for (int i = 0; i < n; i++)
		if (!is_url(targets[i]))
			read_file(targets[i], f);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	f->t = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
	rates(f, prev);
}

#endif
