/*
 * json_read.h — a small, strict, bounded JSON reader (RFC 8259) for the
 * files Weft reads back: its own topology dump.
 *
 * Strict: one value per document, no comments, no trailing commas, no
 * duplicate keys, no control characters in strings, no "\u0000" (strings are
 * C strings). Bounded: nesting at most WEFT_JSON_MAX_DEPTH, documents at most
 * WEFT_JSON_MAX_BYTES. Every value remembers its line, so a caller can name
 * the line of a value it does not like. The document owns every value; a
 * value lives until weft_json_free().
 */
#ifndef WEFT_JSON_READ_H
#define WEFT_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

#define WEFT_JSON_MAX_DEPTH 64
#define WEFT_JSON_MAX_BYTES (64u << 20)

enum weft_json_type {
	WEFT_JSON_NULL = 0,
	WEFT_JSON_FALSE,
	WEFT_JSON_TRUE,
	WEFT_JSON_NUMBER,
	WEFT_JSON_STRING,
	WEFT_JSON_ARRAY,
	WEFT_JSON_OBJECT,
};

struct weft_json;	/* a parsed document */
struct weft_json_value; /* one value inside it */

/*
 * Parse @p len bytes of @p text. @p name (a file name) starts every error
 * message: WEFT_ERR_INVALID_ARG "NAME:LINE: what is wrong". On success *out
 * is the document; on failure *out is NULL.
 */
weft_status_t weft_json_parse(const char *text, size_t len, const char *name,
			      struct weft_json **out, struct weft_err *err);
void weft_json_free(struct weft_json *doc);

const struct weft_json_value *weft_json_root(const struct weft_json *doc);

enum weft_json_type weft_json_type(const struct weft_json_value *v);
const char *weft_json_type_name(enum weft_json_type t);
int weft_json_line(const struct weft_json_value *v); /* 1-based line it starts on */

/* A string's bytes (NUL-terminated, UTF-8), or NULL if @p v is not a string. */
const char *weft_json_string(const struct weft_json_value *v);
/* A number's value, or 0 if @p v is not a number. */
double weft_json_number(const struct weft_json_value *v);

/* Arrays and objects: element count, and iteration in document order
 * (first, then next until NULL). 0 / NULL for any other type. */
size_t weft_json_count(const struct weft_json_value *v);
const struct weft_json_value *weft_json_first(const struct weft_json_value *v);
const struct weft_json_value *weft_json_next(const struct weft_json_value *v);
/* An object member's key (the value returned by first/next), or NULL. */
const char *weft_json_key(const struct weft_json_value *member);

/* The member of object @p obj named @p key, or NULL (also if @p obj is not an
 * object). Linear in the object's size. */
const struct weft_json_value *weft_json_get(const struct weft_json_value *obj, const char *key);

#endif
