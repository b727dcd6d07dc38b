/* counter.h — counters with one writer and readers in other threads
 * (the metrics exporter, the watch): the writer adds with a relaxed load
 * and store, which costs what a plain add does (no locked instruction),
 * and a reader never sees a torn value. Two writers would lose counts:
 * each counter says whose it is. */
#ifndef WEFT_COUNTER_H
#define WEFT_COUNTER_H

#include <stdatomic.h>
#include <stdint.h>

typedef _Atomic uint64_t weft_counter_t;

static inline void weft_counter_add(weft_counter_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static inline void weft_counter_set(weft_counter_t *c, uint64_t v)
{
	atomic_store_explicit(c, v, memory_order_relaxed);
}

static inline uint64_t weft_counter_get(const weft_counter_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

#endif
