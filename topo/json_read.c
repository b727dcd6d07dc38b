/*
 * json_read.c — a strict, bounded JSON reader: recursive descent into one
 * array of values plus one pool of string bytes.
 *
 * Values link to their first child and next sibling by offsets within the
 * array (not pointers), so the array may grow while parsing; once parsing is
 * done, string offsets are turned into pointers into the pool. Recursion
 * depth is bounded by WEFT_JSON_MAX_DEPTH, and input size by
 * WEFT_JSON_MAX_BYTES, so no input can exhaust the stack or ask for
 * unbounded memory.
 *
 * Why not json-c: the reader needs a few dozen lines of grammar, the line of
 * every error, and a strictness (duplicate keys, depth) json-c does not
 * offer; one less dependency for a library that must link everywhere.
 */
#define _GNU_SOURCE /* strtod_l, qsort_r */
#include "topo/json_read.h"

#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct weft_json_value {
	enum weft_json_type type;
	int line;
	int32_t first; /* offset from this value to its first child, 0: none */
	int32_t next;  /* offset from this value to its next sibling, 0: none */
	size_t count;
	double num;
	union {
		size_t off;
		const char *ptr;
	} str, key; /* key: set on object members */
	bool has_key;
};

struct weft_json {
	struct weft_json_value *vals;
	size_t nvals;
	char *pool;
};

struct parser {
	const char *p, *end;
	int line;
	const char *name;
	struct weft_err *err;
	struct weft_json_value *vals;
	size_t nvals, cap;
	char *pool;
	size_t pool_len, pool_cap;
	locale_t c_locale;
};

static weft_status_t syntax(struct parser *ps, const char *what)
{
	return weft_err_set(ps->err, WEFT_ERR_INVALID_ARG, "%s:%d: %s", ps->name, ps->line, what);
}

static weft_status_t no_memory(struct parser *ps)
{
	return weft_err_set(ps->err, WEFT_ERR_NO_MEMORY, "%s: reading JSON", ps->name);
}

static void skip_space(struct parser *ps)
{
	while (ps->p < ps->end) {
		char c = *ps->p;
		if (c == '\n')
			ps->line++;
		else if (c != ' ' && c != '\t' && c != '\r')
			return;
		ps->p++;
	}
}

/* ---- storage -------------------------------------------------------------- */

static weft_status_t new_value(struct parser *ps, enum weft_json_type type, size_t *idx)
{
	if (ps->nvals == ps->cap) {
		size_t cap = ps->cap ? ps->cap * 2 : 64;
		struct weft_json_value *v = realloc(ps->vals, cap * sizeof(*v));
		if (!v)
			return no_memory(ps);
		ps->vals = v;
		ps->cap = cap;
	}
	*idx = ps->nvals++;
	memset(&ps->vals[*idx], 0, sizeof(ps->vals[*idx]));
	ps->vals[*idx].type = type;
	ps->vals[*idx].line = ps->line;
	return WEFT_SUCCESS;
}

static weft_status_t pool_put(struct parser *ps, const char *bytes, size_t n)
{
	if (ps->pool_cap - ps->pool_len < n) {
		size_t cap = ps->pool_cap ? ps->pool_cap : 256;
		while (cap - ps->pool_len < n)
			cap *= 2;
		char *pool = realloc(ps->pool, cap);
		if (!pool)
			return no_memory(ps);
		ps->pool = pool;
		ps->pool_cap = cap;
	}
	memcpy(ps->pool + ps->pool_len, bytes, n);
	ps->pool_len += n;
	return WEFT_SUCCESS;
}

/* ---- strings -------------------------------------------------------------- */

static int hex4(const char *s)
{
	int v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

static size_t utf8_encode(uint32_t cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Length of the valid UTF-8 sequence at @p s (at most @p n bytes), 0 if
 * invalid: no overlong forms, no surrogates, nothing above U+10FFFF. */
static size_t utf8_valid(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* \uXXXX at ps->p (just past the 'u'), with a following low surrogate if
 * this is a high one. */
static weft_status_t parse_unicode(struct parser *ps, uint32_t *cp)
{
	int hi, lo;

	if (ps->end - ps->p < 4 || (hi = hex4(ps->p)) < 0)
		return syntax(ps, "bad \\u escape: need four hex digits");
	ps->p += 4;
	if (hi >= 0xdc00 && hi <= 0xdfff)
		return syntax(ps, "bad \\u escape: low surrogate without a high one");
	if (hi < 0xd800 || hi > 0xdbff) {
		*cp = (uint32_t)hi;
		return WEFT_SUCCESS;
	}
	if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' ||
	    (lo = hex4(ps->p + 2)) < 0xdc00 || lo > 0xdfff)
		return syntax(ps, "bad \\u escape: high surrogate without a low one");
	ps->p += 6;
	*cp = 0x10000 + (((uint32_t)hi - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
	return WEFT_SUCCESS;
}

static weft_status_t parse_escape(struct parser *ps)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	char buf[4];
	uint32_t cp = 0;
	weft_status_t st;

	if (ps->p >= ps->end)
		return syntax(ps, "unterminated string");
	char c = *ps->p++;
	const char *hit = c ? strchr(from, c) : NULL;
	if (hit)
		return pool_put(ps, &to[hit - from], 1);
	if (c != 'u')
		return syntax(ps, "bad escape in string");
	st = parse_unicode(ps, &cp);
	if (st != WEFT_SUCCESS)
		return st;
	if (cp == 0)
		return syntax(ps, "\\u0000 is not allowed in strings");
	return pool_put(ps, buf, utf8_encode(cp, buf));
}

/* A string at ps->p (on the opening quote) into the pool; *off its start. */
static weft_status_t parse_string(struct parser *ps, size_t *off)
{
	weft_status_t st;

	ps->p++; /* opening quote */
	*off = ps->pool_len;
	for (;;) {
		if (ps->p >= ps->end)
			return syntax(ps, "unterminated string");
		unsigned char c = (unsigned char)*ps->p;
		if (c == '"') {
			ps->p++;
			return pool_put(ps, "", 1);
		}
		if (c < 0x20)
			return syntax(ps, c == '\n' ? "unterminated string (newline inside it)"
						    : "control character in string");
		if (c == '\\') {
			ps->p++;
			st = parse_escape(ps);
		} else {
			size_t n =
			    utf8_valid((const unsigned char *)ps->p, (size_t)(ps->end - ps->p));
			if (n == 0)
				return syntax(ps, "invalid UTF-8 in string");
			st = pool_put(ps, ps->p, n);
			ps->p += n;
		}
		if (st != WEFT_SUCCESS)
			return st;
	}
}

/* ---- numbers and literals ------------------------------------------------- */

static const char *skip_digits(const char *p, const char *end)
{
	while (p < end && *p >= '0' && *p <= '9')
		p++;
	return p;
}

static weft_status_t parse_number(struct parser *ps, double *out)
{
	const char *s = ps->p, *p = s, *end = ps->end, *q;
	char buf[64];

	if (p < end && *p == '-')
		p++;
	if (p < end && *p == '0')
		p++;
	else if ((q = skip_digits(p, end)) > p)
		p = q;
	else
		return syntax(ps, "bad number");
	if (p < end && *p == '.') {
		if ((q = skip_digits(p + 1, end)) == p + 1)
			return syntax(ps, "bad number: no digits after '.'");
		p = q;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if ((q = skip_digits(p, end)) == p)
			return syntax(ps, "bad number: no digits in exponent");
		p = q;
	}
	if ((size_t)(p - s) >= sizeof(buf))
		return syntax(ps, "number too long");
	memcpy(buf, s, (size_t)(p - s));
	buf[p - s] = '\0';
	/* The grammar is checked; strtod_l only converts, in the C locale
	 * whatever LC_NUMERIC the application chose. */
	if (!ps->c_locale && !(ps->c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0)))
		return no_memory(ps);
	*out = strtod_l(buf, NULL, ps->c_locale);
	ps->p = p;
	return WEFT_SUCCESS;
}

static bool take_word(struct parser *ps, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return false;
	ps->p += n;
	return true;
}

/* ---- containers ----------------------------------------------------------- */

static weft_status_t parse_value(struct parser *ps, int depth, size_t *idx);

static void link_child(struct parser *ps, size_t parent, size_t *prev, size_t child)
{
	struct weft_json_value *v = ps->vals;
	if (v[parent].count == 0)
		v[parent].first = (int32_t)(child - parent);
	else
		v[*prev].next = (int32_t)(child - *prev);
	v[parent].count++;
	*prev = child;
}

static int key_cmp(const void *a, const void *b, void *pool)
{
	const struct weft_json_value *x = *(const struct weft_json_value *const *)a;
	const struct weft_json_value *y = *(const struct weft_json_value *const *)b;
	return strcmp((const char *)pool + x->key.off, (const char *)pool + y->key.off);
}

/* Duplicate keys: sort the members by key, compare neighbours. */
static weft_status_t check_duplicates(struct parser *ps, size_t obj)
{
	size_t n = ps->vals[obj].count;
	const struct weft_json_value **m;
	const struct weft_json_value *v;
	weft_status_t st = WEFT_SUCCESS;
	size_t i = 0;

	if (n < 2)
		return WEFT_SUCCESS;
	if (!(m = malloc(n * sizeof(*m))))
		return no_memory(ps);
	for (v = &ps->vals[obj] + ps->vals[obj].first; i < n; v += v->next)
		m[i++] = v;
	qsort_r(m, n, sizeof(*m), key_cmp, ps->pool);
	for (i = 1; i < n; i++) {
		if (key_cmp(&m[i - 1], &m[i], ps->pool) == 0) {
			const char *k = ps->pool + m[i]->key.off;
			int line = m[i - 1]->line > m[i]->line ? m[i - 1]->line : m[i]->line;
			st = weft_err_set(ps->err, WEFT_ERR_INVALID_ARG,
					  "%s:%d: duplicate key \"%.64s\"", ps->name, line, k);
			break;
		}
	}
	free(m);
	return st;
}

static weft_status_t parse_array(struct parser *ps, int depth, size_t self)
{
	size_t prev = 0, child;
	weft_status_t st;

	ps->p++; /* '[' */
	skip_space(ps);
	if (ps->p < ps->end && *ps->p == ']') {
		ps->p++;
		return WEFT_SUCCESS;
	}
	for (;;) {
		st = parse_value(ps, depth + 1, &child);
		if (st != WEFT_SUCCESS)
			return st;
		link_child(ps, self, &prev, child);
		skip_space(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			skip_space(ps);
			if (ps->p < ps->end && *ps->p == ']')
				return syntax(ps, "trailing comma in array");
			continue;
		}
		if (ps->p < ps->end && *ps->p == ']') {
			ps->p++;
			return WEFT_SUCCESS;
		}
		return syntax(ps, ps->p < ps->end ? "expected ',' or ']' in array"
						  : "unterminated array");
	}
}

static weft_status_t parse_member(struct parser *ps, int depth, size_t *child)
{
	size_t key;
	weft_status_t st;
	int line = ps->line;

	if (ps->p >= ps->end || *ps->p != '"')
		return syntax(ps, ps->p < ps->end ? "expected a string key in object"
						  : "unterminated object");
	st = parse_string(ps, &key);
	if (st != WEFT_SUCCESS)
		return st;
	skip_space(ps);
	if (ps->p >= ps->end || *ps->p != ':')
		return syntax(ps, "expected ':' after key");
	ps->p++;
	st = parse_value(ps, depth + 1, child);
	if (st != WEFT_SUCCESS)
		return st;
	ps->vals[*child].key.off = key;
	ps->vals[*child].has_key = true;
	ps->vals[*child].line = line; /* a member is where its key is */
	return WEFT_SUCCESS;
}

static weft_status_t parse_object(struct parser *ps, int depth, size_t self)
{
	size_t prev = 0, child;
	weft_status_t st;

	ps->p++; /* '{' */
	skip_space(ps);
	if (ps->p < ps->end && *ps->p == '}') {
		ps->p++;
		return WEFT_SUCCESS;
	}
	for (;;) {
		st = parse_member(ps, depth, &child);
		if (st != WEFT_SUCCESS)
			return st;
		link_child(ps, self, &prev, child);
		skip_space(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			skip_space(ps);
			if (ps->p < ps->end && *ps->p == '}')
				return syntax(ps, "trailing comma in object");
			continue;
		}
		if (ps->p < ps->end && *ps->p == '}') {
			ps->p++;
			return check_duplicates(ps, self);
		}
		return syntax(ps, ps->p < ps->end ? "expected ',' or '}' in object"
						  : "unterminated object");
	}
}

static weft_status_t parse_value(struct parser *ps, int depth, size_t *idx)
{
	weft_status_t st;
	double num = 0;
	size_t off = 0;

	if (depth > WEFT_JSON_MAX_DEPTH)
		return syntax(ps, "nested too deeply");
	skip_space(ps);
	if (ps->p >= ps->end)
		return syntax(ps, "unexpected end of input, expected a value");
	switch (*ps->p) {
	case '{':
	case '[':
		st = new_value(ps, *ps->p == '{' ? WEFT_JSON_OBJECT : WEFT_JSON_ARRAY, idx);
		if (st != WEFT_SUCCESS)
			return st;
		return *ps->p == '{' ? parse_object(ps, depth, *idx) : parse_array(ps, depth, *idx);
	case '"':
		st = new_value(ps, WEFT_JSON_STRING, idx);
		if (st == WEFT_SUCCESS)
			st = parse_string(ps, &off);
		if (st == WEFT_SUCCESS)
			ps->vals[*idx].str.off = off;
		return st;
	case 't':
	case 'f':
	case 'n':
		if (take_word(ps, "true"))
			return new_value(ps, WEFT_JSON_TRUE, idx);
		if (take_word(ps, "false"))
			return new_value(ps, WEFT_JSON_FALSE, idx);
		if (take_word(ps, "null"))
			return new_value(ps, WEFT_JSON_NULL, idx);
		return syntax(ps, "unexpected word, expected a value");
	default:
		if (*ps->p != '-' && (*ps->p < '0' || *ps->p > '9'))
			return syntax(ps, "unexpected character, expected a value");
		st = parse_number(ps, &num);
		if (st == WEFT_SUCCESS)
			st = new_value(ps, WEFT_JSON_NUMBER, idx);
		if (st == WEFT_SUCCESS)
			ps->vals[*idx].num = num;
		return st;
	}
}

/* ---- document ------------------------------------------------------------- */

static void resolve_strings(struct weft_json *doc)
{
	for (size_t i = 0; i < doc->nvals; i++) {
		struct weft_json_value *v = &doc->vals[i];
		if (v->type == WEFT_JSON_STRING)
			v->str.ptr = doc->pool + v->str.off;
		if (v->has_key)
			v->key.ptr = doc->pool + v->key.off;
	}
}

weft_status_t weft_json_parse(const char *text, size_t len, const char *name,
			      struct weft_json **out, struct weft_err *err)
{
	struct parser ps = {.p = text, .end = text + len, .line = 1, .name = name, .err = err};
	struct weft_json *doc = NULL;
	weft_status_t st;
	size_t root;

	*out = NULL;
	if (len > WEFT_JSON_MAX_BYTES)
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "%s: JSON larger than %u bytes",
				    name, WEFT_JSON_MAX_BYTES);
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		ps.p += 3; /* a UTF-8 byte order mark is harmless */
	st = parse_value(&ps, 1, &root);
	if (st == WEFT_SUCCESS) {
		skip_space(&ps);
		if (ps.p < ps.end)
			st = syntax(&ps, "trailing characters after the JSON value");
	}
	if (st == WEFT_SUCCESS && !(doc = calloc(1, sizeof(*doc))))
		st = no_memory(&ps);
	if (ps.c_locale)
		freelocale(ps.c_locale);
	if (st != WEFT_SUCCESS) {
		free(ps.vals);
		free(ps.pool);
		return st;
	}
	doc->vals = ps.vals;
	doc->nvals = ps.nvals;
	doc->pool = ps.pool;
	resolve_strings(doc);
	*out = doc;
	return WEFT_SUCCESS;
}

void weft_json_free(struct weft_json *doc)
{
	if (!doc)
		return;
	free(doc->vals);
	free(doc->pool);
	free(doc);
}

const struct weft_json_value *weft_json_root(const struct weft_json *doc)
{
	return doc && doc->nvals ? &doc->vals[0] : NULL;
}

enum weft_json_type weft_json_type(const struct weft_json_value *v)
{
	return v->type;
}

const char *weft_json_type_name(enum weft_json_type t)
{
	switch (t) {
	case WEFT_JSON_NULL: return "null";
	case WEFT_JSON_FALSE:
	case WEFT_JSON_TRUE: return "boolean";
	case WEFT_JSON_NUMBER: return "number";
	case WEFT_JSON_STRING: return "string";
	case WEFT_JSON_ARRAY: return "array";
	case WEFT_JSON_OBJECT: return "object";
	}
	return "unknown";
}

int weft_json_line(const struct weft_json_value *v)
{
	return v->line;
}

const char *weft_json_string(const struct weft_json_value *v)
{
	return v && v->type == WEFT_JSON_STRING ? v->str.ptr : NULL;
}

double weft_json_number(const struct weft_json_value *v)
{
	return v && v->type == WEFT_JSON_NUMBER ? v->num : 0;
}

static bool is_container(const struct weft_json_value *v)
{
	return v && (v->type == WEFT_JSON_ARRAY || v->type == WEFT_JSON_OBJECT);
}

size_t weft_json_count(const struct weft_json_value *v)
{
	return is_container(v) ? v->count : 0;
}

const struct weft_json_value *weft_json_first(const struct weft_json_value *v)
{
	return is_container(v) && v->count ? v + v->first : NULL;
}

const struct weft_json_value *weft_json_next(const struct weft_json_value *v)
{
	return v && v->next ? v + v->next : NULL;
}

const char *weft_json_key(const struct weft_json_value *member)
{
	return member && member->has_key ? member->key.ptr : NULL;
}

const struct weft_json_value *weft_json_get(const struct weft_json_value *obj, const char *key)
{
	if (!obj || obj->type != WEFT_JSON_OBJECT)
		return NULL;
	for (const struct weft_json_value *m = weft_json_first(obj); m; m = weft_json_next(m)) {
		if (strcmp(m->key.ptr, key) == 0)
			return m;
	}
	return NULL;
}
