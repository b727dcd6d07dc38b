/* mr_key.h — a registered memory region as a peer names it: what a
 * transport's reg op fills (transports/transport.h) and what an algorithm
 * hands a peer to map (core/p2p.h). */
#ifndef WEFT_MR_KEY_H
#define WEFT_MR_KEY_H

#include <stdint.h>

struct weft_mr_key {
	uint64_t addr; /* in the owner's address space */
	uint64_t len;
	uint64_t key; /* the transport's handle (segment id, rkey, ...) */
	uint64_t gen; /* generation: a freed and reused region has a new one */
};

#endif
