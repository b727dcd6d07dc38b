/* gate.c — see gate.h. */
#include "core/gate.h"

#include <string.h>

#include "util/settings.h"

static bool open_admit(struct weft_gate *gate, const struct weft_p2p_link *link, size_t bytes)
{
	return true;
}

static bool one_admit(struct weft_gate *gate, const struct weft_p2p_link *link, size_t bytes)
{
	return link->inflight_msgs == 0;
}

static const struct weft_gate_ops gates[] = {
    {.name = "open", .admit = open_admit},
    {.name = "one", .admit = one_admit},
};

weft_status_t weft_gate_init(struct weft_gate *gate, struct weft_err *err)
{
	const char *name = weft_setting_str("WEFT_GATE");
	for (size_t i = 0; i < sizeof(gates) / sizeof(gates[0]); i++) {
		if (strcmp(gates[i].name, name) == 0) {
			gate->ops = &gates[i];
			return WEFT_SUCCESS;
		}
	}
	return weft_err_set(err, WEFT_ERR_INVALID_ARG, "WEFT_GATE=%s: expected open or one", name);
}
