/*
 * mr_cache.h — memory registrations of the transports that need them (ofi,
 * verbs), shared by the messages that use them, keyed by page range.
 *
 * Stale entries are impossible by construction: an entry lives only while
 * a message that uses it is in flight (a reference per message, dropped
 * when the message completes), and a poster keeps its buffer alive until
 * its message is done (transport.h), so no entry can outlive the memory it
 * names — a buffer freed and reallocated at the same address is registered
 * afresh. Weft cannot see free(); a cache that kept entries past their
 * messages would need a memory monitor to stay correct. Reuse across
 * operations is left to the layer that has one: libfabric's own
 * registration cache (FI_MR_CACHE_MONITOR: memhooks, userfaultfd, kdreg2)
 * in the providers that pin memory (verbs, efa, cxi); the software
 * providers (tcp, sockets, udp) pin nothing and a registration costs them
 * a table insert. Memory a transport owns (landing slots, bounce regions)
 * is registered once at init, outside this cache.
 */
#ifndef WEFT_MR_CACHE_H
#define WEFT_MR_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "transports/transport.h"

#define WEFT_MR_PAGE 4096u

/* One registration as the transport made it. */
struct weft_mr_reg {
	void *handle; /* the transport's (struct fid_mr *, struct ibv_mr *) */
	void *desc;   /* the local descriptor posts take (fi_mr_desc, lkey); may be NULL */
	struct weft_mr_key key; /* how a peer names it: key.addr is what a write to the
				   region's first byte targets (its virtual address, or 0
				   where the provider takes offsets) */
};

struct weft_mr_cache_ops {
	/* Register [buf, buf + len) for local use and remote writes and reads. */
	weft_status_t (*reg)(void *ctx, void *buf, size_t len, struct weft_mr_reg *out);
	void (*dereg)(void *ctx, struct weft_mr_reg *reg);
};

struct weft_mr_entry {
	uintptr_t lo, hi; /* the pages registered, [lo, hi) */
	unsigned refs;
	struct weft_mr_reg reg;
	struct weft_mr_entry *next;
};

struct weft_mr_cache {
	const struct weft_mr_cache_ops *ops;
	void *ctx;
	struct weft_mr_entry *live; /* entries with references */
	size_t nlive;
	uint64_t hits, regs; /* lookups served by a live entry, registrations made */
};

void weft_mr_cache_init(struct weft_mr_cache *c, const struct weft_mr_cache_ops *ops, void *ctx);

/* A reference to an entry covering [buf, buf + len) (len 0 counts as one
 * byte): a live one that covers it, else a new registration of its pages.
 * The registration's error otherwise (*out NULL). */
weft_status_t weft_mr_cache_get(struct weft_mr_cache *c, const void *buf, size_t len,
				struct weft_mr_entry **out);

/* Drop a reference; the last one deregisters the pages. */
void weft_mr_cache_put(struct weft_mr_cache *c, struct weft_mr_entry *e);

/* A region the user registered (weft_mem_register, weft_mem_alloc): a
 * reference held until it is unpinned, so that the messages inside it find
 * a live entry and register nothing. The user keeps the memory alive
 * until then (weft.h), so the rule above still holds. As a transport's
 * mem reg/dereg ops: *mr is the entry, *key how a peer names it. */
weft_status_t weft_mr_cache_pin(struct weft_mr_cache *c, void *buf, size_t len, struct weft_mr **mr,
				struct weft_mr_key *key);
void weft_mr_cache_unpin(struct weft_mr_cache *c, struct weft_mr *mr);

/* Deregister everything, referenced or not (the transport is closing). */
void weft_mr_cache_fini(struct weft_mr_cache *c);

/* What a peer writes to reach @p p inside entry @p e. */
static inline uint64_t weft_mr_remote_addr(const struct weft_mr_entry *e, const void *p)
{
	return e->reg.key.addr + ((uintptr_t)p - e->lo);
}

#endif
