/* registry.c — see registry.h. */
#include "transports/registry.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "transports/ofi/ofi_ops.h"
#include "transports/shm/shm.h"
#include "transports/socket/socket.h"
#include "transports/verbs/verbs_ops.h"
#include "util/parse.h"
#include "util/settings.h"

/* The order is the order of init, and of preference among equal scores. */
static const struct weft_tp_ops *const transports[] = {
    &weft_tp_shm_ops,
    &weft_tp_socket_ops,
    &weft_tp_verbs_ops,
    &weft_tp_ofi_ops,
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
	struct weft_list l;
	weft_list_init(&l, "WEFT_TRANSPORTS", spec ? spec + negate : NULL, ',');
	while (weft_list_next(&l)) {
		size_t found = NTRANSPORTS;
		for (size_t i = 0; i < NTRANSPORTS; i++)
			if (strcmp(l.item, transports[i]->name) == 0)
				found = i;
		if (found == NTRANSPORTS) {
			char known[128];
			known_names(known, sizeof(known));
			weft_list_fail(&l, "unknown transport '%s' (known: %s)", l.item, known);
			break;
		}
		enabled[found] = !negate;
	}
	if (l.status != WEFT_SUCCESS)
		return weft_err_set(err, l.status, "%s", l.msg);
	return WEFT_SUCCESS;
}

typedef void (*any_fn)(void);

struct entry {
	const char *name;
	bool set;
};

weft_status_t weft_registry_check_ops(const struct weft_tp_ops *ops, struct weft_err *err)
{
	const char *name = ops->name ? ops->name : "(unnamed)";
	if (ops->size != sizeof(struct weft_tp_ops) || !ops->name)
		return weft_err_set(err, WEFT_ERR_INTERNAL,
				    "transport %s: ops table of %zu bytes, name %s (expected %zu "
				    "bytes and a name)",
				    name, ops->size, ops->name ? "set" : "unset",
				    sizeof(struct weft_tp_ops));
	const struct entry entries[] = {
	    {"life.init", ops->life.init},
	    {"life.fini", ops->life.fini},
	    {"life.abort", ops->life.abort},
	    {"conn.score", ops->conn.score},
	    {"conn.connect", ops->conn.connect},
	    {"conn.connected", ops->conn.connected},
	    {"msg.isend", ops->msg.isend},
	    {"msg.irecv", ops->msg.irecv},
	    {"msg.progress", ops->msg.progress},
	    {"mem.reg", ops->mem.reg},
	    {"mem.dereg", ops->mem.dereg},
	    {"mem.map", ops->mem.map},
	    {"mem.unmap", ops->mem.unmap},
	    {"rma.write", ops->rma.write},
	    {"rma.get", ops->rma.get},
	    {"prop.props", ops->prop.props},
	    {"prop.describe", ops->prop.describe},
	    {"prop.paths", ops->prop.paths},
	    {"signal.signals", ops->signal.signals},
	    {"signal.pace", ops->signal.pace},
	    {"wait.arm", ops->wait.arm},
	    {"wait.settle", ops->wait.settle},
	    {"wait.disarm", ops->wait.disarm},
	    {"wait.wake", ops->wait.wake},
	};
	/* An op added to the table and not to the list fails the build. */
	_Static_assert(sizeof(entries) / sizeof(entries[0]) * sizeof(any_fn) ==
			   sizeof(struct weft_tp_ops) - offsetof(struct weft_tp_ops, life),
		       "an entry for every op of struct weft_tp_ops");
	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
		if (!entries[i].set)
			return weft_err_set(err, WEFT_ERR_INTERNAL,
					    "transport %s: ops.%s is not set (a missing "
					    "capability points at its stub, "
					    "transports/common/tp_stubs.h)",
					    name, entries[i].name);
	return WEFT_SUCCESS;
}

weft_status_t weft_registry_check(struct weft_err *err)
{
	for (size_t i = 0; i < NTRANSPORTS; i++) {
		weft_status_t st = weft_registry_check_ops(transports[i], err);
		if (st != WEFT_SUCCESS)
			return st;
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
