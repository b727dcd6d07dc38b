/* verbs_ops.h — the verbs transport's ops table, for the registry (the
 * transport's internals are in verbs.h). */
#ifndef WEFT_VERBS_OPS_H
#define WEFT_VERBS_OPS_H

#include "transports/transport.h"

extern const struct weft_tp_ops weft_tp_verbs_ops;

#endif
