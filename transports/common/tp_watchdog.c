/* tp_watchdog.c — see tp_watchdog.h. */
#include "transports/common/tp_watchdog.h"

#include "util/clock.h"

bool weft_watchdog_due(struct weft_watchdog *w, double stall_s)
{
	if (++w->polls < WEFT_WATCHDOG_POLLS)
		return false;
	w->polls = 0;
	double now = weft_now_coarse();
	if (w->since == 0) {
		w->since = now;
		return false;
	}
	if (now - w->since < stall_s)
		return false;
	w->since = now;
	return true;
}
