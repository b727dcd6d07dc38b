/* tp_util.c — the transports' error reporting, and the WEFT_SPRAY setting
 * they share (transport.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "transports/transport.h"
#include "util/error.h"
#include "util/settings.h"

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

void weft_tp_vfail_once(const struct weft_tp_env *env, bool broken, weft_status_t *first,
			weft_status_t status, const char *fmt, va_list ap)
{
	if (broken)
		return;
	vfail(env, status, 0, fmt, ap);
	if (first && *first == WEFT_SUCCESS)
		*first = status;
}

weft_status_t weft_tp_read_spray(const struct weft_tp_env *env, const char *who,
				 enum weft_spray *out)
{
	const char *spray = weft_setting_str("WEFT_SPRAY");
	if (strcmp(spray, "rr") == 0)
		*out = WEFT_SPRAY_RR;
	else if (strcmp(spray, "adaptive") == 0)
		*out = WEFT_SPRAY_ADAPTIVE;
	else
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "%s: WEFT_SPRAY=%s: expected rr or adaptive", who, spray);
	return WEFT_SUCCESS;
}

weft_status_t weft_tp_read_stall(const struct weft_tp_env *env, const char *who, const char *alias,
				 double lo, double hi, double *out)
{
	const char *name = weft_setting_str("WEFT_PATH_STALL") ? "WEFT_PATH_STALL" : alias;
	if (!name || !weft_setting_str(name))
		return WEFT_SUCCESS;
	double v = 0;
	if (!weft_setting_double(name, &v) || !(v >= lo && v <= hi))
		return weft_tp_fail(env, WEFT_ERR_INVALID_ARG,
				    "%s: %s=%s: expected seconds from %g to %g", who, name,
				    weft_setting_str(name), lo, hi);
	*out = v;
	return WEFT_SUCCESS;
}
