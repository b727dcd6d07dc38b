/* lockstep.c — see lockstep.h. */
#include "algorithms/engine/lockstep.h"

#include "core/comm.h"
#include "core/p2p.h"

void weft_lockstep_init(struct weft_lockstep *ls, const struct weft_lockstep_ops *ops,
			uint32_t nsteps)
{
	ls->ops = ops;
	ls->nsteps = nsteps;
	ls->step = 0;
	ls->posted = false;
	ls->active = 0;
}

static weft_status_t post_step(struct weft_lockstep *ls, struct weft_task *task)
{
	struct weft_lockstep_step plan;
	for (int i = 0; i < WEFT_LOCKSTEP_MAX; i++) {
		plan.send[i] = (struct weft_xfer){.peer = -1};
		plan.recv[i] = (struct weft_xfer){.peer = -1};
	}
	ls->ops->plan(task, ls->step, &plan);
	ls->posted = true;
	/* Receives first: a rendezvous sender finds them waiting. */
	for (int dir = 0; dir < 2; dir++) {
		for (int i = 0; i < WEFT_LOCKSTEP_MAX; i++) {
			const struct weft_xfer *x = dir == 0 ? &plan.recv[i] : &plan.send[i];
			if (x->peer < 0)
				continue;
			int slot = dir * WEFT_LOCKSTEP_MAX + i;
			struct weft_msg *m = &ls->msgs[slot];
			m->buf = x->buf;
			m->len = x->len;
			uint32_t piece = ls->step * WEFT_LOCKSTEP_MAX + (uint32_t)i;
			m->tag = weft_p2p_tag(task->seq, piece);
			m->reduce = x->reduce;
			m->local = x->local;
			m->unit = task->args.esize ? task->args.esize : 1;
			ls->peers[slot] = x->peer;
			weft_status_t st = dir == 0 ? weft_p2p_irecv(task->comm, x->peer, m)
						    : weft_p2p_isend(task->comm, x->peer, m);
			if (st != WEFT_SUCCESS)
				return st;
			ls->active |= 1u << slot;
		}
	}
	return WEFT_SUCCESS;
}

weft_status_t weft_lockstep_progress(struct weft_lockstep *ls, struct weft_task *task)
{
	while (ls->step < ls->nsteps) {
		if (!ls->posted) {
			weft_status_t st = post_step(ls, task);
			if (st != WEFT_SUCCESS)
				return st;
		}
		for (int slot = 0; slot < 2 * WEFT_LOCKSTEP_MAX; slot++) {
			if (!(ls->active & (1u << slot)) || !ls->msgs[slot].done)
				continue;
			if (ls->msgs[slot].status != WEFT_SUCCESS)
				return ls->msgs[slot].status;
			ls->active &= ~(1u << slot);
			weft_task_touch(task);
		}
		if (ls->active) {
			for (int slot = 0; slot < 2 * WEFT_LOCKSTEP_MAX; slot++)
				if (ls->active & (1u << slot)) {
					task->waiting_for = ls->peers[slot];
					break;
				}
			return WEFT_INPROGRESS;
		}
		if (ls->ops->step_done)
			ls->ops->step_done(task, ls->step);
		ls->step++;
		ls->posted = false;
	}
	return WEFT_SUCCESS;
}
