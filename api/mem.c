/* mem.c — weft_mem_alloc/free (util/memfd.h: memory files local peers can
 * map) and weft_mem_register/deregister (network registration with the
 * transports that need it). */
#include <stdlib.h>

#include "api/api.h"
#include "core/fail.h"
#include "transports/transport.h"
#include "util/memfd.h"

struct weft_mem_reg {
	struct weft_mem_reg *next;
	void *buf;
	size_t len;
	struct weft_mr **mrs; /* [transport]: NULL where it needs none */
};

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
	return WEFT_SUCCESS;
}

weft_status_t weft_mem_free(weft_comm_t comm, void *ptr)
{
	if (!comm)
		return weft_err_set(weft_err_init_record(), WEFT_ERR_INVALID_ARG,
				    "weft_mem_free: comm is NULL");
	if (!ptr)
		return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG, "weft_mem_free: ptr is NULL");
	struct weft_err err;
	weft_err_clear(&err);
	weft_status_t st = weft_memfd_free(ptr, &err);
	if (st != WEFT_SUCCESS)
		return weft_comm_fail(comm, st, "%s", err.msg);
	return WEFT_SUCCESS;
}

/* Does transport @p i serve a peer that needs its buffers registered? */
static bool needs_registration(struct weft_comm *comm, size_t i)
{
	struct weft_tp *tp = comm->tps[i];
	for (int p = 0; tp && p < comm->nranks; p++) {
		if (comm->peers[p].tp != tp)
			continue;
		struct weft_tp_props props;
		tp->ops->prop.props(tp, p, &props);
		if (props.needs_registration)
			return true;
	}
	return false;
}

static void reg_release(struct weft_comm *comm, struct weft_mem_reg *r)
{
	for (size_t i = 0; r->mrs && i < comm->ntps; i++)
		if (r->mrs[i])
			comm->tps[i]->ops->mem.dereg(comm->tps[i], r->mrs[i]);
	free(r->mrs);
	free(r);
}

static void regs_free(struct weft_comm *comm)
{
	while (comm->mem_regs) {
		struct weft_mem_reg *r = comm->mem_regs;
		comm->mem_regs = r->next;
		reg_release(comm, r);
	}
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
	struct weft_mem_reg *r = calloc(1, sizeof(*r));
	if (r)
		r->mrs = calloc(comm->ntps ? comm->ntps : 1, sizeof(*r->mrs));
	if (!r || !r->mrs) {
		free(r);
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "weft_mem_register: no memory");
	}
	r->buf = buf;
	r->len = size;
	weft_comm_lock(comm);
	for (size_t i = 0; i < comm->ntps; i++) {
		if (!needs_registration(comm, i))
			continue;
		struct weft_mr_key key;
		weft_status_t st =
		    comm->tps[i]->ops->mem.reg(comm->tps[i], buf, size, &r->mrs[i], &key);
		if (st != WEFT_SUCCESS) {
			reg_release(comm, r);
			weft_comm_unlock(comm);
			return weft_comm_fail(comm, st,
					      "weft_mem_register: %s could not register %zu bytes",
					      comm->tps[i]->ops->name, size);
		}
	}
	r->next = comm->mem_regs;
	comm->mem_regs = r;
	comm->mem_regs_free = regs_free;
	weft_comm_unlock(comm);
	*handle = r;
	return WEFT_SUCCESS;
}

weft_status_t weft_mem_deregister(weft_comm_t comm, weft_mem_handle_t handle)
{
	if (!comm)
		return weft_err_set(weft_err_init_record(), WEFT_ERR_INVALID_ARG,
				    "weft_mem_deregister: comm is NULL");
	weft_comm_lock(comm);
	for (struct weft_mem_reg **pp = &comm->mem_regs; *pp; pp = &(*pp)->next) {
		if (*pp != handle)
			continue;
		*pp = handle->next;
		reg_release(comm, handle);
		weft_comm_unlock(comm);
		return WEFT_SUCCESS;
	}
	weft_comm_unlock(comm);
	return weft_comm_fail(comm, WEFT_ERR_INVALID_ARG,
			      "weft_mem_deregister: %p is not a registration of this communicator",
			      (void *)handle);
}
