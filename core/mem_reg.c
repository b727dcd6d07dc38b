/* mem_reg.c — see mem_reg.h. */
#include "core/mem_reg.h"

#include <stdlib.h>

#include "core/comm.h"
#include "core/fail.h"
#include "transports/transport.h"

struct weft_mem_reg {
	struct weft_mem_reg *next;
	void *buf;
	size_t len;
	bool owned;	      /* weft_mem_alloc's */
	struct weft_mr **mrs; /* [transport]: NULL where it needs none */
};

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

static void release(struct weft_comm *comm, struct weft_mem_reg *r)
{
	for (size_t i = 0; r->mrs && i < comm->ntps; i++)
		if (r->mrs[i])
			comm->tps[i]->ops->mem.dereg(comm->tps[i], r->mrs[i]);
	free(r->mrs);
	free(r);
}

weft_status_t weft_comm_mem_register(struct weft_comm *comm, void *buf, size_t len, bool owned,
				     struct weft_mem_reg **out)
{
	*out = NULL;
	struct weft_mem_reg *r = calloc(1, sizeof(*r));
	if (r)
		r->mrs = calloc(comm->ntps ? comm->ntps : 1, sizeof(*r->mrs));
	if (!r || !r->mrs) {
		free(r);
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "weft_mem_register: no memory");
	}
	r->buf = buf;
	r->len = len;
	r->owned = owned;
	weft_comm_lock(comm);
	for (size_t i = 0; i < comm->ntps; i++) {
		if (!needs_registration(comm, i))
			continue;
		struct weft_mr_key key;
		weft_status_t st =
		    comm->tps[i]->ops->mem.reg(comm->tps[i], buf, len, &r->mrs[i], &key);
		if (st != WEFT_SUCCESS) {
			r->mrs[i] = NULL;
			release(comm, r);
			weft_comm_unlock(comm);
			return weft_comm_fail(comm, st,
					      "weft_mem_register: %s could not register "
					      "%zu bytes",
					      comm->tps[i]->ops->name, len);
		}
	}
	r->next = comm->mem_regs;
	comm->mem_regs = r;
	weft_comm_unlock(comm);
	*out = r;
	return WEFT_SUCCESS;
}

bool weft_comm_mem_deregister(struct weft_comm *comm, struct weft_mem_reg *reg)
{
	weft_comm_lock(comm);
	for (struct weft_mem_reg **pp = &comm->mem_regs; *pp; pp = &(*pp)->next) {
		if (*pp != reg)
			continue;
		*pp = reg->next;
		release(comm, reg);
		weft_comm_unlock(comm);
		return true;
	}
	weft_comm_unlock(comm);
	return false;
}

struct weft_mem_reg *weft_comm_mem_owned(struct weft_comm *comm, const void *buf)
{
	struct weft_mem_reg *found = NULL;
	weft_comm_lock(comm);
	for (struct weft_mem_reg *r = comm->mem_regs; r && !found; r = r->next)
		if (r->owned && r->buf == buf)
			found = r;
	weft_comm_unlock(comm);
	return found;
}

void weft_comm_mem_free_all(struct weft_comm *comm)
{
	while (comm->mem_regs) {
		struct weft_mem_reg *r = comm->mem_regs;
		comm->mem_regs = r->next;
		release(comm, r);
	}
}
