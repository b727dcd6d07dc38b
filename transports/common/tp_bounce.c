/* tp_bounce.c — see tp_bounce.h. */
#include "transports/common/tp_bounce.h"

#include <string.h>

size_t weft_bounce_deliver(struct weft_bounce *b, size_t got, struct weft_msg *msg, size_t off)
{
	b->have += got;
	size_t whole = b->have - b->have % msg->unit;
	if (!whole)
		return 0;
	weft_msg_deliver(msg, off, b->buf, whole);
	b->have -= whole;
	if (b->have)
		memmove(b->buf, b->buf + whole, b->have);
	return whole;
}
