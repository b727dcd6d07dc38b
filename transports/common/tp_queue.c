/* tp_queue.c — see tp_queue.h. */
#include "transports/common/tp_queue.h"

#include <stdlib.h>
#include <string.h>

#define POOL_SLAB 64 /* objects per slab: more than the engine keeps in flight */

static weft_status_t grow(struct weft_tp_pool *pool)
{
	void **slabs = realloc(pool->slabs, (pool->nslabs + 1) * sizeof(*slabs));
	if (!slabs)
		return WEFT_ERR_NO_MEMORY;
	pool->slabs = slabs;
	char *slab = calloc(POOL_SLAB, pool->obj_size);
	if (!slab)
		return WEFT_ERR_NO_MEMORY;
	slabs[pool->nslabs++] = slab;
	for (size_t i = 0; i < POOL_SLAB; i++)
		weft_tp_pool_put(pool, slab + i * pool->obj_size);
	return WEFT_SUCCESS;
}

weft_status_t weft_tp_pool_init(struct weft_tp_pool *pool, size_t obj_size)
{
	*pool = (struct weft_tp_pool){.obj_size = (obj_size + 15) & ~(size_t)15};
	return grow(pool);
}

void weft_tp_pool_fini(struct weft_tp_pool *pool)
{
	for (size_t i = 0; i < pool->nslabs; i++)
		free(pool->slabs[i]);
	free(pool->slabs);
	*pool = (struct weft_tp_pool){0};
}

void *weft_tp_pool_get(struct weft_tp_pool *pool)
{
	if (!pool->free && grow(pool) != WEFT_SUCCESS)
		return NULL;
	void *obj = pool->free;
	pool->free = *(void **)obj;
	memset(obj, 0, pool->obj_size);
	return obj;
}

void weft_tp_pool_put(struct weft_tp_pool *pool, void *obj)
{
	*(void **)obj = pool->free;
	pool->free = obj;
}

void *weft_tp_req_start(struct weft_tp_pool *pool, const struct weft_tp_env *env, const char *who,
			struct weft_msg *m, weft_status_t refused, weft_status_t *st)
{
	weft_msg_start(m);
	*st = refused;
	struct weft_tp_req *r = *st ? NULL : weft_tp_pool_get(pool);
	if (!r && !*st)
		*st = weft_tp_fail(env, WEFT_ERR_NO_MEMORY, "%s: no memory for a request", who);
	if (!r) {
		weft_msg_complete(m, *st);
		return NULL;
	}
	r->msg = m;
	return r;
}
