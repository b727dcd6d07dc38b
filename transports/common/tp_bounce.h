/*
 * tp_bounce.h — bounce-and-reduce delivery, for transports that cannot
 * reduce straight out of their own buffers (a socket's kernel buffer, a
 * peer's memory read with process_vm_readv, an RDMA landing region).
 *
 * Received bytes of a reducing receive land in a small bounce buffer (sized
 * to stay in cache between the copy and the reduction that reads it); every
 * whole element is handed to the message with weft_msg_deliver, and the
 * bytes of an element split across two reads wait at the buffer's start.
 */
#ifndef WEFT_TP_BOUNCE_H
#define WEFT_TP_BOUNCE_H

#include <stddef.h>

#include "transports/transport.h"

struct weft_bounce {
	char *buf;
	size_t cap;
	size_t have; /* undelivered bytes at the start of buf */
};

/* Where the next bytes go, and how many fit. */
static inline char *weft_bounce_tail(const struct weft_bounce *b)
{
	return b->buf + b->have;
}

static inline size_t weft_bounce_room(const struct weft_bounce *b)
{
	return b->cap - b->have;
}

/* @p got more bytes were written at the tail. Deliver every whole element
 * to @p msg — the first undelivered byte being byte @p off of the message
 * — and keep the split tail. Returns the bytes delivered. */
size_t weft_bounce_deliver(struct weft_bounce *b, size_t got, struct weft_msg *msg, size_t off);

#endif
