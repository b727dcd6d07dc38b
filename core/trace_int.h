/* trace_int.h — what the recorder's files share: the registry of
 * communicators that the signal handlers dump (trace_signal.c). */
#ifndef WEFT_TRACE_INT_H
#define WEFT_TRACE_INT_H

#include "core/trace.h"

/* Communicators a signal dumps: at most WEFT_TRACE_REGISTRY at once (a
 * later one is recorded and dumps on its own reasons, not on a signal). */
#define WEFT_TRACE_REGISTRY 64

/* Add @p t (and, the first time, install the handlers WEFT_TRACE_DIR and
 * WEFT_TRACE_SIGNAL ask for); remove it, waiting while a handler dumps it. */
void weft_trace_register(struct weft_trace *t);
void weft_trace_unregister(struct weft_trace *t);

#endif
