/* parse.c — sizes ("64K") and separated lists ("a;b;c"); see parse.h. */
#include "util/parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define WEFT_LIST_QUOTE_MAX 200 /* characters of the value quoted in a message */

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static unsigned suffix_shift(char c)
{
	switch (c) {
	case 'k':
	case 'K': return 10;
	case 'm':
	case 'M': return 20;
	case 'g':
	case 'G': return 30;
	default: return 0;
	}
}

static weft_status_t refuse(enum weft_parse_fault why, enum weft_parse_fault *fault)
{
	if (fault)
		*fault = why;
	return WEFT_ERR_INVALID_ARG;
}

/* Digits by hand rather than strtoull, which takes spaces, signs and
 * "0x", and wraps "-1" to the largest value. */
weft_status_t weft_parse_size(const char *text, uint64_t max, unsigned flags, uint64_t *out,
			      enum weft_parse_fault *fault)
{
	if (!text)
		return refuse(WEFT_PARSE_MALFORMED, fault);
	if ((flags & WEFT_PARSE_INF) && strcasecmp(text, "inf") == 0) {
		*out = max;
		return WEFT_SUCCESS;
	}
	const char *p = text;
	uint64_t v = 0;
	bool overflow = false;
	for (; is_digit(*p); p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			overflow = true;
		else
			v = v * 10 + d;
	}
	if (p == text)
		return refuse(WEFT_PARSE_MALFORMED, fault);
	unsigned shift = (flags & WEFT_PARSE_NO_SUFFIX) ? 0 : suffix_shift(*p);
	if (shift)
		p++;
	if ((flags & WEFT_PARSE_B_SUFFIX) && (*p == 'B' || *p == 'b'))
		p++;
	if (*p)
		return refuse(WEFT_PARSE_MALFORMED, fault);
	if (overflow || v > (UINT64_MAX >> shift) || (v << shift) > max)
		return refuse(WEFT_PARSE_TOO_LARGE, fault);
	*out = v << shift;
	return WEFT_SUCCESS;
}

const char *weft_parse_fault_text(enum weft_parse_fault fault)
{
	return fault == WEFT_PARSE_TOO_LARGE ? "too large"
					     : "a number with an optional K, M or G suffix";
}

void weft_list_init(struct weft_list *l, const char *var, const char *text, char sep)
{
	memset(l, 0, sizeof(*l));
	l->var = var;
	l->text = text ? text : "";
	l->at = l->text;
	l->sep = sep;
	l->index = -1;
	l->report = l;
}

void weft_list_init_inner(struct weft_list *l, struct weft_list *outer, const char *text, char sep)
{
	weft_list_init(l, outer->var, text, sep);
	l->text = outer->text;
	l->report = outer->report;
}

bool weft_list_next(struct weft_list *l)
{
	if (l->report->status != WEFT_SUCCESS)
		return false;
	while (*l->at == l->sep && l->sep)
		l->at++;
	if (!*l->at)
		return false;
	const char *end = strchr(l->at, l->sep);
	size_t len = end ? (size_t)(end - l->at) : strlen(l->at);
	l->index++;
	if (len >= sizeof(l->item)) {
		snprintf(l->item, sizeof(l->item), "%.20s...", l->at);
		weft_list_fail(l, "item %d '%s' is longer than %zu characters", l->index + 1,
			       l->item, sizeof(l->item) - 1);
		return false;
	}
	memcpy(l->item, l->at, len);
	l->item[len] = '\0';
	l->at += len;
	return true;
}

weft_status_t weft_list_fail(struct weft_list *l, const char *fmt, ...)
{
	struct weft_list *r = l->report;
	if (r->status != WEFT_SUCCESS)
		return r->status;
	r->status = WEFT_ERR_INVALID_ARG;
	/* A long value is cut short, so the reason always fits. */
	bool cut = strlen(l->text) > WEFT_LIST_QUOTE_MAX;
	int n = snprintf(r->msg, sizeof(r->msg), "%s=%.*s%s: ", l->var, WEFT_LIST_QUOTE_MAX,
			 l->text, cut ? "..." : "");
	if (n < 0 || (size_t)n >= sizeof(r->msg))
		return r->status;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->msg + n, sizeof(r->msg) - (size_t)n, fmt, ap);
	va_end(ap);
	return r->status;
}
