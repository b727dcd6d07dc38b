/*
 * registry.h — the transports of this build: their order, names, settings,
 * and WEFT_TRANSPORTS. Adding a transport is one folder under transports/
 * and one line in registry.c.
 */
#ifndef WEFT_REGISTRY_H
#define WEFT_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "transports/transport.h"
#include "util/error.h"

/* Every transport, in the order their init runs (the same on every rank);
 * *count of them. */
const struct weft_tp_ops *const *weft_registry_all(size_t *count);

/* By name; NULL if there is none. */
const struct weft_tp_ops *weft_registry_find(const char *name);

/* WEFT_TRANSPORTS: "socket,shm" enables those, "^shm" all but those, NULL
 * all. enabled[i] is for weft_registry_all()[i] (room for *count). An
 * unknown name is WEFT_ERR_INVALID_ARG naming it and the known ones. */
weft_status_t weft_registry_enabled(const char *spec, bool *enabled, struct weft_err *err);

/* Every entry of @p ops set (a capability the transport lacks points at
 * its stub, transports/common/tp_stubs.h, so the hot path never tests for
 * NULL) and its size the size of struct weft_tp_ops this build has;
 * WEFT_ERR_INTERNAL naming the transport and the first entry amiss.
 * weft_registry_check: the same for every transport of the registry, which
 * communicator init runs before any transport's init. */
weft_status_t weft_registry_check_ops(const struct weft_tp_ops *ops, struct weft_err *err);
weft_status_t weft_registry_check(struct weft_err *err);

/* Declare every transport's settings (util/settings.h); idempotent and
 * thread-safe. Runs when the library loads; callers that need the
 * settings call it anyway. */
void weft_registry_init(void);

#endif
