/*
 * parse.h — the one size parser and the one list splitter behind every
 * setting, launcher variable and command-line value that needs them.
 *
 * Both depend on nothing but libc (no log, no error record), so the perf
 * programs, which link libweft only through its public API, and the MPI
 * baselines, which do not link it at all, compile parse.c themselves.
 */
#ifndef WEFT_PARSE_H
#define WEFT_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft.h"

/* Flags of weft_parse_size(). */
enum weft_parse_flags {
	WEFT_PARSE_INF = 1u << 0,	/* "inf" (any case) means @p max */
	WEFT_PARSE_NO_SUFFIX = 1u << 1, /* digits only: a rank, a count, a port */
	WEFT_PARSE_B_SUFFIX = 1u << 2,	/* an optional trailing B or b: "64KB", "8B" */
};

/* Why weft_parse_size() refused a value, for the caller's own message. */
enum weft_parse_fault {
	WEFT_PARSE_MALFORMED = 1, /* not digits with an optional suffix */
	WEFT_PARSE_TOO_LARGE,	  /* well formed, but above @p max */
};

/*
 * Parse a size: a decimal integer with an optional K, M or G suffix (any
 * case) meaning 2^10, 2^20, 2^30. Strict: no spaces, no sign, no trailing
 * text, no hex or octal; the empty string is malformed. A value above @p max
 * (after the suffix) is refused, and so is one that does not fit 64 bits.
 *
 * @return WEFT_SUCCESS with *out set, or WEFT_ERR_INVALID_ARG with *out
 *         unchanged and *fault (if @p fault is not NULL) saying why.
 */
weft_status_t weft_parse_size(const char *text, uint64_t max, unsigned flags, uint64_t *out,
			      enum weft_parse_fault *fault);

/* "a number with an optional K, M or G suffix" or "too large": the reason
 * for messages that do not need their own words. */
const char *weft_parse_fault_text(enum weft_parse_fault fault);

#define WEFT_LIST_ITEM_BYTES 256 /* longest item + 1 */
#define WEFT_LIST_MSG_BYTES  512

/*
 * Iterate over the items of @p text separated by @p sep:
 *
 *	struct weft_list l;
 *	weft_list_init(&l, "WEFT_ALGO", spec, ';');
 *	while (weft_list_next(&l)) {
 *		... l.item, editable ...
 *		if (bad)
 *			return weft_list_fail(&l, "unknown collective '%s'", l.item);
 *	}
 *	if (l.status != WEFT_SUCCESS) ... l.msg ...
 *
 * Empty items (";;", a leading or trailing separator) are skipped, so a
 * list built by a script with a separator after every item still works.
 * An item longer than WEFT_LIST_ITEM_BYTES - 1 ends the iteration with an
 * error. Every message starts "VAR=TEXT: " so it names the variable and the
 * value it came from; the item it blames is quoted after that.
 */
struct weft_list {
	const char *var;  /* named in messages */
	const char *text; /* the whole value, quoted in messages */
	const char *at;	  /* what is left to split */
	char sep;
	int index; /* of the current item among the non-empty ones, from 0 */
	char item[WEFT_LIST_ITEM_BYTES];
	struct weft_list *report; /* where errors go: this list, or the outer one */
	weft_status_t status;	  /* the first error, or WEFT_SUCCESS */
	char msg[WEFT_LIST_MSG_BYTES];
};

/* Start iterating over @p text (NULL is the empty list). */
void weft_list_init(struct weft_list *l, const char *var, const char *text, char sep);

/* Iterate over part of an outer list's item (WEFT_TUNE's ',' ranges inside
 * a ';' item): messages quote the outer value and errors land in @p outer. */
void weft_list_init_inner(struct weft_list *l, struct weft_list *outer, const char *text, char sep);

/* Move to the next item: true with l->item set, false at the end or on an
 * error (then the reporting list's status and msg say what). */
bool weft_list_next(struct weft_list *l);

/* Record an error about the current item, "VAR=TEXT: " + the formatted
 * reason, unless one is recorded already. Returns WEFT_ERR_INVALID_ARG. */
weft_status_t weft_list_fail(struct weft_list *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
