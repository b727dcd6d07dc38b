/* hostid.h — which ranks share a host (and so can share memory). */
#ifndef WEFT_HOSTID_H
#define WEFT_HOSTID_H

#include <stddef.h>

#include "util/error.h"

/* WEFT_HOSTID if set; otherwise hostname, boot id and network namespace, so
 * that namespaces can stand for separate hosts in tests. */
weft_status_t weft_host_id(char *buf, size_t len, struct weft_err *err);

#endif
