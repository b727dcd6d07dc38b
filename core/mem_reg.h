/* mem_reg.h — memory registered with the communicator's transports that
 * need registration to move it (verbs, ofi's RMA path and FI_MR_LOCAL
 * providers): what weft_mem_register and weft_mem_alloc hand in. Each
 * transport holds its registration (a reference in its cache,
 * transports/common/mr_cache.h) until deregistration, so that messages in
 * the region find it registered and register nothing themselves. */
#ifndef WEFT_MEM_REG_H
#define WEFT_MEM_REG_H

#include <stdbool.h>
#include <stddef.h>

#include "weft.h"

struct weft_comm;
struct weft_mem_reg;

/* Register [buf, buf + len) with every transport of @p comm that serves a
 * peer needing registration (@p owned: the communicator frees it with the
 * allocation, weft_mem_alloc). The error names the transport. */
weft_status_t weft_comm_mem_register(struct weft_comm *comm, void *buf, size_t len, bool owned,
				     struct weft_mem_reg **out);

/* Undo it; false if @p reg is not a live registration of @p comm. */
bool weft_comm_mem_deregister(struct weft_comm *comm, struct weft_mem_reg *reg);

/* The registration weft_mem_alloc made of the allocation at @p buf, if any. */
struct weft_mem_reg *weft_comm_mem_owned(struct weft_comm *comm, const void *buf);

/* Every registration goes (the communicator's end, before its transports close). */
void weft_comm_mem_free_all(struct weft_comm *comm);

#endif
