/* error.h — an error record: a status and the sentence that explains it. */
#ifndef WEFT_ERROR_H
#define WEFT_ERROR_H

#include "weft.h"

#define WEFT_ERR_MSG_BYTES 512

struct weft_err {
	weft_status_t status;
	char msg[WEFT_ERR_MSG_BYTES];
};

/* Record the first error (later ones are logged, not kept, so the root cause
 * survives the cascade it starts) and return @p status. */
weft_status_t weft_err_set(struct weft_err *err, weft_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Like weft_err_set() with WEFT_ERR_SYSTEM and ": strerror(errnum)" appended. */
weft_status_t weft_err_errno(struct weft_err *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void weft_err_clear(struct weft_err *err);

/* The per-thread record behind weft_init_last_error(). */
struct weft_err *weft_err_init_record(void);

/* The same, emptied: for a call that fails without a communicator to hold
 * its message, so that the message replaces an earlier one (a record keeps
 * its first error until cleared). */
struct weft_err *weft_err_init_fresh(void);

#endif
