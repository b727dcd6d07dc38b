/*
 * hostlist.c — expanding Slurm hostlist expressions.
 *
 * An expression is names separated by commas outside brackets; a name is
 * literal text with up to HOSTLIST_MAX_GROUPS bracket groups; a group is
 * comma-separated numbers or ranges "lo-hi" (lo <= hi, at most 9 digits).
 * Parsing walks the text twice: once to check it and count what it expands
 * to (nothing is emitted from a bad or huge expression), once to emit.
 */
#include "topo/hostlist.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define HOSTLIST_MAX_GROUPS 8
#define HOSTLIST_MAX_DIGITS 9

struct group {
	const char *s; /* between the brackets */
	size_t len;
	uint64_t count;
	int width; /* widest number it prints */
};

struct pattern {
	int ngroups;
	struct group g[HOSTLIST_MAX_GROUPS];
	const char *lit[HOSTLIST_MAX_GROUPS + 1]; /* text before each group, and after the last */
	size_t lit_len[HOSTLIST_MAX_GROUPS + 1];
	uint64_t count;
};

struct emitter {
	weft_hostlist_fn fn;
	void *ctx;
	char name[WEFT_HOSTLIST_NAME_MAX + 1];
};

static weft_status_t bad(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static weft_status_t bad(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, why_len, fmt, ap);
	va_end(ap);
	return WEFT_ERR_INVALID_ARG;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* A number of 1..HOSTLIST_MAX_DIGITS digits at *p; its digit count in *ndig. */
static bool take_number(const char **p, const char *end, uint64_t *v, int *ndig)
{
	const char *s = *p;
	*v = 0;
	while (*p < end && is_digit(**p) && *p - s < HOSTLIST_MAX_DIGITS + 1) {
		*v = *v * 10 + (uint64_t)(**p - '0');
		(*p)++;
	}
	*ndig = (int)(*p - s);
	return *ndig > 0 && *ndig <= HOSTLIST_MAX_DIGITS && !(*p < end && is_digit(**p));
}

struct range {
	uint64_t lo, hi;
	int width; /* the lower bound's digits: Slurm's zero padding */
};

/* The range at *p inside a group ending at @p end; *p moves past it and a
 * following comma. */
static weft_status_t take_range(const char **p, const char *end, struct range *r, char *why,
				size_t why_len)
{
	int ndig;
	const char *start = *p;

	if (!take_number(p, end, &r->lo, &r->width))
		return bad(why, why_len, "expected a number (at most %d digits) in brackets",
			   HOSTLIST_MAX_DIGITS);
	r->hi = r->lo;
	if (*p < end && **p == '-') {
		(*p)++;
		if (!take_number(p, end, &r->hi, &ndig))
			return bad(why, why_len, "range \"%.*s\" has no upper bound",
				   (int)(*p - start), start);
		if (r->hi < r->lo)
			return bad(why, why_len, "range \"%.*s\" runs backwards", (int)(*p - start),
				   start);
	}
	if (*p < end) {
		if (**p != ',')
			return bad(why, why_len, "unexpected '%c' in brackets", **p);
		(*p)++;
		if (*p == end)
			return bad(why, why_len, "trailing ',' in brackets");
	}
	return WEFT_SUCCESS;
}

static int digits_of(uint64_t v)
{
	int n = 1;
	while (v >= 10)
		v /= 10, n++;
	return n;
}

static weft_status_t check_group(struct group *g, size_t max_hosts, char *why, size_t why_len)
{
	const char *p = g->s, *end = g->s + g->len;
	struct range r;
	weft_status_t st;

	if (g->len == 0)
		return bad(why, why_len, "empty brackets");
	g->count = 0;
	g->width = 0;
	while (p < end) {
		st = take_range(&p, end, &r, why, why_len);
		if (st != WEFT_SUCCESS)
			return st;
		g->count += r.hi - r.lo + 1; /* < 1e9 per range: no overflow */
		if (g->count > max_hosts)
			return bad(why, why_len, "expands to more than %zu hosts", max_hosts);
		int w = digits_of(r.hi) > r.width ? digits_of(r.hi) : r.width;
		if (w > g->width)
			g->width = w;
	}
	return WEFT_SUCCESS;
}

/* One name pattern [s, s+len): find its groups, count its names. */
static weft_status_t check_pattern(const char *s, size_t len, size_t max_hosts, struct pattern *pat,
				   char *why, size_t why_len)
{
	const char *p = s, *end = s + len, *lit = s;
	size_t name_len = 0;
	weft_status_t st;

	if (len == 0)
		return bad(why, why_len, "empty name in the list");
	pat->ngroups = 0;
	pat->count = 1;
	for (; p < end; p++) {
		if (*p == ']')
			return bad(why, why_len, "']' without '['");
		if (*p != '[')
			continue;
		if (pat->ngroups == HOSTLIST_MAX_GROUPS)
			return bad(why, why_len, "more than %d bracket groups in one name",
				   HOSTLIST_MAX_GROUPS);
		const char *close = memchr(p, ']', (size_t)(end - p));
		const char *open = memchr(p + 1, '[', (size_t)(end - p - 1));
		if (!close)
			return bad(why, why_len, "'[' without ']'");
		if (open && open < close)
			return bad(why, why_len, "nested '['");
		struct group *g = &pat->g[pat->ngroups];
		pat->lit[pat->ngroups] = lit;
		pat->lit_len[pat->ngroups] = (size_t)(p - lit);
		g->s = p + 1;
		g->len = (size_t)(close - p - 1);
		st = check_group(g, max_hosts, why, why_len);
		if (st != WEFT_SUCCESS)
			return st;
		pat->count *= g->count; /* both <= max_hosts: fits in 64 bits */
		if (pat->count > max_hosts)
			return bad(why, why_len, "expands to more than %zu hosts", max_hosts);
		name_len += (size_t)(p - lit) + (size_t)g->width;
		pat->ngroups++;
		p = close;
		lit = close + 1;
	}
	pat->lit[pat->ngroups] = lit;
	pat->lit_len[pat->ngroups] = (size_t)(end - lit);
	name_len += (size_t)(end - lit);
	if (name_len > WEFT_HOSTLIST_NAME_MAX)
		return bad(why, why_len, "a name longer than %d bytes", WEFT_HOSTLIST_NAME_MAX);
	return WEFT_SUCCESS;
}

/* The next name pattern of the list: up to a comma outside brackets. */
static size_t pattern_len(const char *s)
{
	size_t i = 0;
	bool inside = false;
	for (; s[i] && (inside || s[i] != ','); i++) {
		if (s[i] == '[')
			inside = true;
		else if (s[i] == ']')
			inside = false;
	}
	return i;
}

static weft_status_t emit_from(struct emitter *em, const struct pattern *pat, int gi, size_t at)
{
	char why[8];
	weft_status_t st;

	memcpy(em->name + at, pat->lit[gi], pat->lit_len[gi]);
	at += pat->lit_len[gi];
	if (gi == pat->ngroups) {
		em->name[at] = '\0';
		return em->fn(em->ctx, em->name);
	}
	const struct group *g = &pat->g[gi];
	const char *p = g->s, *end = g->s + g->len;
	while (p < end) {
		struct range r;
		take_range(&p, end, &r, why, sizeof(why)); /* checked already */
		for (uint64_t n = r.lo; n <= r.hi; n++) {
			int w = snprintf(em->name + at, sizeof(em->name) - at, "%0*llu", r.width,
					 (unsigned long long)n);
			st = emit_from(em, pat, gi + 1, at + (size_t)w);
			if (st != WEFT_SUCCESS)
				return st;
		}
	}
	return WEFT_SUCCESS;
}

weft_status_t weft_hostlist_expand(const char *expr, size_t max_hosts, weft_hostlist_fn fn,
				   void *ctx, char *why, size_t why_len)
{
	struct pattern pat;
	struct emitter em = {.fn = fn, .ctx = ctx};
	uint64_t total = 0;
	const char *p;
	size_t n;
	weft_status_t st;

	/* Pass 1: check everything and count. */
	for (p = expr;; p += n + 1) {
		n = pattern_len(p);
		st = check_pattern(p, n, max_hosts, &pat, why, why_len);
		if (st != WEFT_SUCCESS)
			return st;
		total += pat.count;
		if (total > max_hosts)
			return bad(why, why_len, "expands to more than %zu hosts", max_hosts);
		if (!p[n])
			break;
	}
	/* Pass 2: emit. */
	for (p = expr;; p += n + 1) {
		n = pattern_len(p);
		check_pattern(p, n, max_hosts, &pat, why, why_len);
		st = emit_from(&em, &pat, 0, 0);
		if (st != WEFT_SUCCESS)
			return st;
		if (!p[n])
			break;
	}
	return WEFT_SUCCESS;
}
