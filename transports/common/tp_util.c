/* tp_util.c — the transports' error reporting (transport.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "transports/transport.h"
#include "util/error.h"

static weft_status_t vfail(const struct weft_tp_env *env, weft_status_t status, int errnum,
			   const char *fmt, va_list ap)
{
	char msg[WEFT_ERR_MSG_BYTES];
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (errnum && n >= 0 && (size_t)n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - (size_t)n, ": %s", strerror(errnum));
	return env->fail(env->ctx, status, msg);
}

weft_status_t weft_tp_fail(const struct weft_tp_env *env, weft_status_t status, const char *fmt,
			   ...)
{
	va_list ap;
	va_start(ap, fmt);
	weft_status_t st = vfail(env, status, 0, fmt, ap);
	va_end(ap);
	return st;
}

weft_status_t weft_tp_fail_errno(const struct weft_tp_env *env, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	weft_status_t st = vfail(env, WEFT_ERR_SYSTEM, errnum, fmt, ap);
	va_end(ap);
	return st;
}
