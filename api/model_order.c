/*
 * model_order.c — which host each rank of a modelled job is on (model.h
 * lists the orders). A rankfile is read line by line; its hosts are found
 * by binary search over the topology file's sorted names, so the whole is
 * O(n log n).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/model.h"

static weft_status_t too_many(int nhosts, int per_host, struct weft_err *err)
{
	return weft_err_set(err, WEFT_ERR_INVALID_ARG,
			    "model: %d hosts x %d ranks per host is more than %d ranks", nhosts,
			    per_host, WEFT_MODEL_MAX_RANKS);
}

/* splitmix64: a small, well-mixed generator, so SEED gives the same order
 * on every machine (rand() does not). */
static uint64_t next_random(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static weft_status_t parse_seed(const char *order, uint64_t *seed, struct weft_err *err)
{
	const char *s = order + strlen("random");
	*seed = 1;
	if (*s == '\0')
		return WEFT_SUCCESS;
	char *end;
	errno = 0;
	unsigned long long v = *s == ':' && s[1] ? strtoull(s + 1, &end, 10) : 0;
	if (*s != ':' || !s[1] || *end || errno || s[1] == '-')
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "model: --order %s: expected random or random:SEED (a whole "
				    "number)",
				    order);
	*seed = v;
	return WEFT_SUCCESS;
}

/* block, round-robin, random[:SEED] (the caller checked it is one). */
static weft_status_t builtin(const char *order, int nhosts, int per_host, int *host_of, int n,
			     struct weft_err *err)
{
	if (strcmp(order, "block") == 0) {
		for (int r = 0; r < n; r++)
			host_of[r] = r / per_host;
	} else if (strcmp(order, "round-robin") == 0) {
		for (int r = 0; r < n; r++)
			host_of[r] = r % nhosts;
	} else {
		uint64_t seed;
		weft_status_t st = parse_seed(order, &seed, err);
		if (st != WEFT_SUCCESS)
			return st;
		for (int r = 0; r < n; r++)
			host_of[r] = r / per_host;
		for (int i = n - 1; i > 0; i--) { /* Fisher-Yates */
			int j = (int)(next_random(&seed) % (uint64_t)(i + 1)), t = host_of[i];
			host_of[i] = host_of[j];
			host_of[j] = t;
		}
	}
	return WEFT_SUCCESS;
}

static int find_host(const char *const *names, int nhosts, const char *name)
{
	int lo = 0, hi = nhosts;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2, c = strcmp(names[mid], name);
		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

struct rankfile {
	const char *path;
	const char *const *names;
	int nhosts;
	int *host_of; /* grown as lines come; -1: not yet named */
	int cap, n;   /* n: one past the highest rank named */
	struct weft_err *err;
};

static weft_status_t rankfile_bad(struct rankfile *rf, int line, const char *what, const char *arg)
{
	return weft_err_set(rf->err, WEFT_ERR_INVALID_ARG, "model: %s:%d: %s%s", rf->path, line,
			    what, arg);
}

static weft_status_t rankfile_grow(struct rankfile *rf, int rank)
{
	if (rank < rf->cap)
		return WEFT_SUCCESS;
	int cap = rf->cap ? rf->cap : 1024;
	while (cap <= rank)
		cap *= 2;
	int *h = realloc(rf->host_of, (size_t)cap * sizeof(int));
	if (!h)
		return weft_err_set(rf->err, WEFT_ERR_NO_MEMORY, "model: reading %s", rf->path);
	for (int i = rf->cap; i < cap; i++)
		h[i] = -1;
	rf->host_of = h;
	rf->cap = cap;
	return WEFT_SUCCESS;
}

/* One line: "rank N=HOST[ anything]". */
static weft_status_t rankfile_line(struct rankfile *rf, char *text, int line)
{
	char *p = text + strspn(text, " \t");
	if (*p == '#' || *p == '\n' || *p == '\0')
		return WEFT_SUCCESS;
	int rank, used = 0;
	if (sscanf(p, "rank %d=%n", &rank, &used) != 1 || used == 0)
		return rankfile_bad(rf, line, "expected 'rank N=HOST', not: ", p);
	if (rank < 0 || rank >= WEFT_MODEL_MAX_RANKS)
		return rankfile_bad(rf, line, "rank out of range: ", p);
	char *host = p + used;
	host[strcspn(host, " \t\n\r")] = '\0';
	int h = find_host(rf->names, rf->nhosts, host);
	if (h < 0)
		return rankfile_bad(rf, line, "a host the topology file does not name: ", host);
	weft_status_t st = rankfile_grow(rf, rank);
	if (st != WEFT_SUCCESS)
		return st;
	if (rf->host_of[rank] >= 0)
		return rankfile_bad(rf, line, "rank given twice: ", p);
	rf->host_of[rank] = h;
	if (rank >= rf->n)
		rf->n = rank + 1;
	return WEFT_SUCCESS;
}

static weft_status_t read_rankfile(struct rankfile *rf)
{
	FILE *fp = fopen(rf->path, "r");
	if (!fp)
		return weft_err_set(
		    rf->err, WEFT_ERR_INVALID_ARG,
		    "model: --order %s: not block, round-robin, random[:SEED] nor a "
		    "readable rankfile (%s)",
		    rf->path, strerror(errno));
	char buf[512];
	weft_status_t st = WEFT_SUCCESS;
	for (int line = 1; st == WEFT_SUCCESS && fgets(buf, sizeof(buf), fp); line++)
		st = rankfile_line(rf, buf, line);
	fclose(fp);
	for (int r = 0; st == WEFT_SUCCESS && r < rf->n; r++)
		if (rf->host_of[r] < 0)
			st = weft_err_set(rf->err, WEFT_ERR_INVALID_ARG,
					  "model: %s: rank %d is missing (ranks must be 0..%d)",
					  rf->path, r, rf->n - 1);
	if (st == WEFT_SUCCESS && rf->n == 0)
		st = weft_err_set(rf->err, WEFT_ERR_INVALID_ARG,
				  "model: %s: no 'rank N=HOST' lines", rf->path);
	return st;
}

weft_status_t weft_model_order(const char *order, int nhosts, const char *const *names,
			       int per_host, int **host_of, int *nranks, struct weft_err *err)
{
	*host_of = NULL;
	*nranks = 0;
	bool named = strcmp(order, "block") == 0 || strcmp(order, "round-robin") == 0 ||
		     strncmp(order, "random", strlen("random")) == 0;
	if (!named) {
		struct rankfile rf = {.path = order, .names = names, .nhosts = nhosts, .err = err};
		weft_status_t st = read_rankfile(&rf);
		if (st != WEFT_SUCCESS) {
			free(rf.host_of);
			return st;
		}
		*host_of = rf.host_of;
		*nranks = rf.n;
		return WEFT_SUCCESS;
	}
	if (per_host < 1)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "model: %d ranks per host (need at least 1)", per_host);
	if ((long long)nhosts * per_host > WEFT_MODEL_MAX_RANKS)
		return too_many(nhosts, per_host, err);
	int n = nhosts * per_host;
	int *h = malloc((size_t)n * sizeof(int));
	if (!h)
		return weft_err_set(err, WEFT_ERR_NO_MEMORY, "model: %d ranks", n);
	weft_status_t st = builtin(order, nhosts, per_host, h, n, err);
	if (st != WEFT_SUCCESS) {
		free(h);
		return st;
	}
	*host_of = h;
	*nranks = n;
	return WEFT_SUCCESS;
}
