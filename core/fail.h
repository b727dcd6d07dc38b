/* fail.h — recording an error on a communicator: the sentence that
 * weft_comm_last_error returns, and whether the communicator is dead after
 * it. Killing the communicator's operations is progress's business
 * (weft_comm_kill, core/progress.h). */
#ifndef WEFT_FAIL_H
#define WEFT_FAIL_H

#include <stddef.h>

#include "weft.h"

struct weft_comm;

/* Record an error on the communicator ("rank R: " is prefixed) and return
 * @p status. Remote failures, timeouts, aborts, system and internal errors
 * also become the communicator's async error: the communicator is dead
 * after them. The last error is what weft_comm_last_error reports, except
 * that the first fatal one stays: it is the cause of all that follow. */
weft_status_t weft_comm_fail(struct weft_comm *comm, weft_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The communicator died of @p status (weft_comm_kill): the error recorded
 * last is its cause, and stays (or, if none was, one naming the status). */
void weft_comm_error_keep(struct weft_comm *comm, weft_status_t status);

/* The last error's text, copied under the error lock into @p buf. */
void weft_comm_error_copy(struct weft_comm *comm, char *buf, size_t len);

/* Same, with ": strerror(errnum)" appended and WEFT_ERR_SYSTEM. */
weft_status_t weft_comm_fail_errno(struct weft_comm *comm, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
