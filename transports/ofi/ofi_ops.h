/* ofi_ops.h — the libfabric transport's ops table, for the registry (its
 * internals are in ofi.h, which needs libfabric's headers). */
#ifndef WEFT_TP_OFI_OPS_H
#define WEFT_TP_OFI_OPS_H

#include "transports/transport.h"

extern const struct weft_tp_ops weft_tp_ofi_ops;

#endif
