/* sched_linear.c — see sched_linear.h. */
#include "algorithms/engine/sched_linear.h"

#include <string.h>

#include "core/comm.h"

WEFT_ENGINE_FIRST(struct weft_linear_task);
_Static_assert(sizeof(struct weft_linear_task) <= WEFT_TASK_PRIV_BYTES, "task state too big");

static const struct weft_linear_task *linear_of(const struct weft_task *task)
{
	return (const struct weft_linear_task *)(const void *)task->priv;
}

/* The root's blocks, one per rank: where they land or where they leave from. */
static char *root_blocks(const struct weft_task *task)
{
	const struct weft_coll_args *a = &task->args;
	return linear_of(task)->dir == WEFT_LINEAR_TO_ROOT ? a->recvbuf : (char *)a->sendbuf;
}

/* Root: item k is the block of rank root + 1 + k (mod n). */
static void root_item(struct weft_task *task, int q, uint32_t k, struct weft_xfer *out)
{
	const struct weft_coll_args *a = &task->args;
	int peer = (a->root + 1 + (int)k) % task->comm->nranks;
	out->peer = peer;
	out->buf = root_blocks(task) + (size_t)peer * a->count * a->esize;
	out->bytes = a->count * a->esize;
}

static const struct weft_queue_ops root_ops = {.item = root_item};

weft_status_t weft_linear_sched_post(struct weft_task *task, enum weft_linear_dir dir)
{
	struct weft_linear_task *t = (struct weft_linear_task *)(void *)task->priv;
	const struct weft_coll_args *a = &task->args;
	int n = task->comm->nranks, rank = task->comm->rank;
	size_t block = a->count * a->esize;
	bool to_root = dir == WEFT_LINEAR_TO_ROOT;
	weft_engine_init(&t->eng, NULL);
	t->dir = dir;
	if (rank == a->root) {
		char *own = root_blocks(task) + (size_t)rank * block;
		if (!a->in_place)
			memcpy(to_root ? own : a->recvbuf, to_root ? a->sendbuf : own, block);
		weft_engine_add_queue(&t->eng, &root_ops, -1, !to_root, (uint32_t)(n - 1), 0);
	} else {
		struct weft_xfer x = {
		    .peer = a->root,
		    .buf = to_root ? (char *)a->sendbuf : a->recvbuf,
		    .bytes = block,
		    .step = (uint32_t)((rank - a->root - 1 + n) % n),
		};
		weft_engine_add_list(&t->eng, to_root, &x, 1);
	}
	weft_engine_start(&t->eng, task);
	return WEFT_SUCCESS;
}

double weft_linear_sched_estimate(const struct weft_comm *comm, const struct weft_links *links,
				  const struct weft_coll_args *args)
{
	struct weft_cost c = links->worst;
	double block = (double)args->count * (double)args->esize;
	return c.alpha + (comm->nranks - 1) * block * c.beta;
}
