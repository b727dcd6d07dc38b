/* error.c — error records, and the per-thread one behind weft_init_last_error. */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/log.h"

static weft_status_t vset(struct weft_err *err, weft_status_t status, int errnum, const char *fmt,
			  va_list ap)
{
	char msg[WEFT_ERR_MSG_BYTES];
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (errnum && n >= 0 && (size_t)n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - (size_t)n, ": %s", strerror(errnum));
	if (err->status == WEFT_SUCCESS) {
		err->status = status;
		memcpy(err->msg, msg, sizeof(msg));
		weft_log(WEFT_LOG_WARN, WEFT_SUB_ALL, "%s (%s)", msg, weft_status_string(status));
	} else {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_ALL, "after an earlier error: %s", msg);
	}
	return status;
}

weft_status_t weft_err_set(struct weft_err *err, weft_status_t status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vset(err, status, 0, fmt, ap);
	va_end(ap);
	return status;
}

weft_status_t weft_err_errno(struct weft_err *err, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vset(err, WEFT_ERR_SYSTEM, errnum, fmt, ap);
	va_end(ap);
	return WEFT_ERR_SYSTEM;
}

void weft_err_clear(struct weft_err *err)
{
	err->status = WEFT_SUCCESS;
	err->msg[0] = '\0';
}

static __thread struct weft_err init_record;

struct weft_err *weft_err_init_record(void)
{
	return &init_record;
}

struct weft_err *weft_err_init_fresh(void)
{
	weft_err_clear(&init_record);
	return &init_record;
}

const char *weft_init_last_error(void)
{
	return init_record.msg;
}

const char *weft_status_string(weft_status_t status)
{
	switch (status) {
	case WEFT_SUCCESS: return "success";
	case WEFT_INPROGRESS: return "in progress";
	case WEFT_ERR_INVALID_ARG: return "invalid argument";
	case WEFT_ERR_NO_MEMORY: return "out of memory";
	case WEFT_ERR_SYSTEM: return "system error";
	case WEFT_ERR_REMOTE: return "remote peer failure";
	case WEFT_ERR_TIMEOUT: return "timeout";
	case WEFT_ERR_NOT_SUPPORTED: return "not supported";
	case WEFT_ERR_INTERNAL: return "internal error";
	case WEFT_ERR_ABORTED: return "aborted";
	case WEFT_ERR_REVOKED: return "revoked";
	}
	return "unknown status";
}

/* The Makefile passes the VERSION file's numbers (WEFT_BUILD_*): the
 * public header's must be the same, or the build stops here. */
#if !defined(WEFT_BUILD_MAJOR) || !defined(WEFT_BUILD_MINOR) || !defined(WEFT_BUILD_PATCH)
#error "util/error.c needs -DWEFT_BUILD_MAJOR/MINOR/PATCH from the VERSION file (the Makefile)"
#endif
_Static_assert(
    WEFT_VERSION_MAJOR == WEFT_BUILD_MAJOR && WEFT_VERSION_MINOR == WEFT_BUILD_MINOR &&
	WEFT_VERSION_PATCH == WEFT_BUILD_PATCH,
    "include/weft.h's WEFT_VERSION_* differ from the VERSION file: run scripts/set-version");
#define VERSION_STR(x)	#x
#define VERSION_XSTR(x) VERSION_STR(x)

const char *weft_version(void)
{
	return VERSION_XSTR(WEFT_VERSION_MAJOR) "." VERSION_XSTR(
	    WEFT_VERSION_MINOR) "." VERSION_XSTR(WEFT_VERSION_PATCH);
}
