/* mem.c — weft_mem_alloc/free (util/memfd.h: memory files local peers can
 * map) and weft_mem_register/deregister (network registration with the
 * transports that need it: core/mem_reg.h). */
#include <stdlib.h>

#include "api/api.h"
#include "core/fail.h"
#include "core/mem_reg.h"
#include "util/memfd.h"

weft_status_t weft_mem_alloc(weft_comm_t comm, size_t size, void **ptr)
{
	if (ptr)
		*ptr = NULL;
	if (!comm)
		return weft_err_set(weft_err_init_record(), WEFT_ERR_INVALID_ARG,
				    "weft_mem_alloc: comm is NULL");
	if (!ptr)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "weft_mem_alloc: ptr is NULL");
	if (size == 0)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "weft_mem_alloc: size is 0");
	struct weft_err err;
	weft_err_clear(&err);
	weft_status_t st = weft_memfd_alloc(size, ptr, &err);
	if (st != WEFT_SUCCESS)
		return weft_comm_fail(comm, st, "%s", err.msg);
	/* Registered with the transports that need it, until weft_mem_free
	 * (or the communicator's end), like weft_mem_register's regions. */
	struct weft_mem_reg *reg;
	st = weft_comm_mem_register(comm, *ptr, size, true, &reg);
	if (st != WEFT_SUCCESS) {
		weft_memfd_free(*ptr, &err);
		*ptr = NULL;
	}
	return st;
}

weft_status_t weft_mem_free(weft_comm_t comm, void *ptr)
{
	if (!comm)
		return weft_err_set(weft_err_init_record(), WEFT_ERR_INVALID_ARG,
				    "weft_mem_free: comm is NULL");
	if (!ptr)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "weft_mem_free: ptr is NULL");
	struct weft_mem_reg *reg = weft_comm_mem_owned(comm, ptr);
	if (reg)
		weft_comm_mem_deregister(comm, reg);
	struct weft_err err;
	weft_err_clear(&err);
	weft_status_t st = weft_memfd_free(ptr, &err);
	if (st != WEFT_SUCCESS)
		return weft_comm_fail(comm, st, "%s", err.msg);
	return WEFT_SUCCESS;
}

weft_status_t weft_mem_register(weft_comm_t comm, void *buf, size_t size, weft_mem_handle_t *handle)
{
	if (handle)
		*handle = NULL;
	if (!comm)
		return weft_err_set(weft_err_init_record(), WEFT_ERR_INVALID_ARG,
				    "weft_mem_register: comm is NULL");
	if (!buf || !handle || size == 0)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "weft_mem_register: %s",
				      !buf	? "buf is NULL"
				      : !handle ? "handle is NULL"
						: "size is 0");
	return weft_comm_mem_register(comm, buf, size, false, handle);
}

weft_status_t weft_mem_deregister(weft_comm_t comm, weft_mem_handle_t handle)
{
	if (!comm)
		return weft_err_set(weft_err_init_record(), WEFT_ERR_INVALID_ARG,
				    "weft_mem_deregister: comm is NULL");
	if (handle && weft_comm_mem_deregister(comm, handle))
		return WEFT_SUCCESS;
	return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
			      "weft_mem_deregister: %p is not a registration of this communicator",
			      (void *)handle);
}
