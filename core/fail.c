/* fail.c — see fail.h. */
#include "core/fail.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/comm.h"
#include "util/error.h"

static bool status_is_fatal(weft_status_t st)
{
	return st == WEFT_ERR_REMOTE || st == WEFT_ERR_TIMEOUT || st == WEFT_ERR_ABORTED ||
	       st == WEFT_ERR_SYSTEM || st == WEFT_ERR_INTERNAL;
}

weft_status_t weft_comm_fail(struct weft_comm *comm, weft_status_t status, const char *fmt, ...)
{
	char msg[WEFT_ERR_MSG_BYTES];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&comm->err_lock);
	if (!comm->err_kept && !status_is_fatal(comm->err.status))
		weft_err_clear(&comm->err);
	weft_err_set(&comm->err, status, "rank %d: %s", comm->rank, msg);
	pthread_mutex_unlock(&comm->err_lock);
	int none = WEFT_SUCCESS;
	if (status_is_fatal(status))
		atomic_compare_exchange_strong(&comm->async_error, &none, (int)status);
	return status;
}

void weft_comm_error_keep(struct weft_comm *comm, weft_status_t status)
{
	pthread_mutex_lock(&comm->err_lock);
	if (!comm->err_kept && comm->err.status == WEFT_SUCCESS)
		weft_err_set(&comm->err, status, "rank %d: the communicator was killed (%s)",
			     comm->rank, weft_status_string(status));
	comm->err_kept = true;
	pthread_mutex_unlock(&comm->err_lock);
}

void weft_comm_error_copy(struct weft_comm *comm, char *buf, size_t len)
{
	pthread_mutex_lock(&comm->err_lock);
	snprintf(buf, len, "%s", comm->err.msg);
	pthread_mutex_unlock(&comm->err_lock);
}

/* As weft_comm_fail, with strerror(errnum) after the message (as
 * weft_err_errno words it). */
weft_status_t weft_comm_fail_errno(struct weft_comm *comm, int errnum, const char *fmt, ...)
{
	char msg[WEFT_ERR_MSG_BYTES];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return weft_comm_fail(comm, WEFT_ERR_SYSTEM, "%s: %s", msg, strerror(errnum));
}
