/* registry.c — see registry.h. */
#include "transports/registry.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "transports/shm/shm.h"
#include "transports/socket/socket.h"
#include "transports/verbs/verbs_ops.h"
#include "util/settings.h"

/* The order is the order of init, and of preference among equal scores. */
static const struct weft_tp_ops *const transports[] = {
    &weft_tp_shm_ops,
    &weft_tp_socket_ops,
    &weft_tp_verbs_ops,
};

#define NTRANSPORTS (sizeof(transports) / sizeof(transports[0]))

const struct weft_tp_ops *const *weft_registry_all(size_t *count)
{
	*count = NTRANSPORTS;
	return transports;
}

const struct weft_tp_ops *weft_registry_find(const char *name)
{
	for (size_t i = 0; i < NTRANSPORTS; i++)
		if (strcmp(transports[i]->name, name) == 0)
			return transports[i];
	return NULL;
}

static void known_names(char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < NTRANSPORTS && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
					 transports[i]->name);
}

weft_status_t weft_registry_enabled(const char *spec, bool *enabled, struct weft_err *err)
{
	bool negate = spec && spec[0] == '^';
	for (size_t i = 0; i < NTRANSPORTS; i++)
		enabled[i] = !spec || negate;
	if (!spec)
		return WEFT_SUCCESS;
	char buf[256];
	if (strlen(spec) >= sizeof(buf))
		return weft_err_set(err, WEFT_ERR_INVALID_ARG, "WEFT_TRANSPORTS is too long");
	snprintf(buf, sizeof(buf), "%s", spec + (negate ? 1 : 0));
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t found = NTRANSPORTS;
		for (size_t i = 0; i < NTRANSPORTS; i++)
			if (strcmp(tok, transports[i]->name) == 0)
				found = i;
		if (found == NTRANSPORTS) {
			char known[128];
			known_names(known, sizeof(known));
			return weft_err_set(
			    err, WEFT_ERR_INVALID_ARG,
			    "WEFT_TRANSPORTS=%s: unknown transport '%s' (known: %s)", spec, tok,
			    known);
		}
		enabled[found] = !negate;
	}
	return WEFT_SUCCESS;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void declare_settings(void)
{
	for (size_t i = 0; i < NTRANSPORTS; i++)
		weft_settings_add(transports[i]->settings, transports[i]->nsettings);
}

void weft_registry_init(void)
{
	pthread_once(&once, declare_settings);
}

__attribute__((constructor)) static void registry_load(void)
{
	weft_registry_init();
}
