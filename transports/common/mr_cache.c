/* mr_cache.c — see mr_cache.h. The live list is searched linearly: it holds
 * one entry per message in flight at most, a few dozen. */
#include "transports/common/mr_cache.h"

#include <stdlib.h>

void weft_mr_cache_init(struct weft_mr_cache *c, const struct weft_mr_cache_ops *ops, void *ctx)
{
	*c = (struct weft_mr_cache){.ops = ops, .ctx = ctx};
}

weft_status_t weft_mr_cache_get(struct weft_mr_cache *c, const void *buf, size_t len,
				struct weft_mr_entry **out)
{
	uintptr_t a = (uintptr_t)buf, b = a + (len ? len : 1);
	*out = NULL;
	for (struct weft_mr_entry *e = c->live; e; e = e->next) {
		if (e->lo <= a && b <= e->hi) {
			e->refs++;
			c->hits++;
			*out = e;
			return WEFT_SUCCESS;
		}
	}
	struct weft_mr_entry *e = calloc(1, sizeof(*e));
	if (!e)
		return WEFT_ERR_NO_MEMORY;
	e->lo = a & ~(uintptr_t)(WEFT_MR_PAGE - 1);
	e->hi = (b + WEFT_MR_PAGE - 1) & ~(uintptr_t)(WEFT_MR_PAGE - 1);
	weft_status_t st = c->ops->reg(c->ctx, (void *)e->lo, e->hi - e->lo, &e->reg);
	if (st != WEFT_SUCCESS) {
		free(e);
		return st;
	}
	e->refs = 1;
	e->next = c->live;
	c->live = e;
	c->nlive++;
	c->regs++;
	*out = e;
	return WEFT_SUCCESS;
}

static void unlink_entry(struct weft_mr_cache *c, struct weft_mr_entry *e)
{
	for (struct weft_mr_entry **p = &c->live; *p; p = &(*p)->next) {
		if (*p == e) {
			*p = e->next;
			c->nlive--;
			return;
		}
	}
}

void weft_mr_cache_put(struct weft_mr_cache *c, struct weft_mr_entry *e)
{
	if (!e || --e->refs > 0)
		return;
	unlink_entry(c, e);
	c->ops->dereg(c->ctx, &e->reg);
	free(e);
}

void weft_mr_cache_fini(struct weft_mr_cache *c)
{
	while (c->live) {
		struct weft_mr_entry *e = c->live;
		c->live = e->next;
		c->ops->dereg(c->ctx, &e->reg);
		free(e);
	}
	c->nlive = 0;
}

weft_status_t weft_mr_cache_pin(struct weft_mr_cache *c, void *buf, size_t len, struct weft_mr **mr,
				struct weft_mr_key *key)
{
	struct weft_mr_entry *e = NULL;
	weft_status_t st = weft_mr_cache_get(c, buf, len, &e);
	*mr = (struct weft_mr *)(void *)e;
	if (st == WEFT_SUCCESS)
		*key = e->reg.key;
	return st;
}

void weft_mr_cache_unpin(struct weft_mr_cache *c, struct weft_mr *mr)
{
	if (mr)
		weft_mr_cache_put(c, (struct weft_mr_entry *)(void *)mr);
}
