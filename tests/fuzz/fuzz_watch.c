/*
 * fuzz_watch.c — libFuzzer target: the watch's datagram intake
 * (core/watch.c, watch_take), the one frame Weft takes from the network
 * without a connection. A watch of rank 1 of 4 is made by hand; each
 * input is a run of datagrams, each a length byte (its size, up to 200),
 * a flags byte and the datagram:
 *   flags bit 0  sign it: the MAC is made with the watch's key over what
 *                the fuzzer wrote, so that it reaches the view;
 *   flags bit 1  send it from the address its rank registered;
 *   flags bit 2  send it again right after (a replay).
 * Beyond crashes and sanitizer reports, the target checks what the watch
 * promises: a datagram that is unsigned, from another address, of
 * another size or communicator, or replayed changes nothing but the count
 * of those dropped; one that is taken raises its rank's sequence number.
 */
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/watch_int.h"
#include "tests/lib/watch_double.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NRANKS WATCH_DOUBLE_RANKS
#define ME     1

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct weft_watch w;
	watch_double_init(&w, ME);
	while (size >= 2) {
		size_t len = data[0] % 201;
		int flags = data[1];
		data += 2;
		size -= 2;
		if (len > size)
			len = size;
		unsigned char buf[256] = {0};
		memcpy(buf, data, len);
		data += len;
		size -= len;
		struct watch_msg *m = (struct watch_msg *)buf;
		if ((flags & 1) && len >= offsetof(struct watch_msg, mac))
			weft_mac(&w.key, m, offsetof(struct watch_msg, mac), m->mac);
		struct sockaddr_storage from;
		bool from_home = (flags & 2) && m->rank >= 0 && m->rank < NRANKS;
		watch_double_address(&from, from_home ? m->rank : NRANKS + 7);
		bool should = (flags & 1) && from_home && len == sizeof(*m) &&
			      m->magic == WATCH_MAGIC && m->comm_id == w.comm_id && m->rank != ME;
		for (int again = 0; again < ((flags & 4) ? 2 : 1); again++) {
			struct watch_view before[NRANKS];
			uint64_t dropped = w.dropped;
			memcpy(before, watch_double_view, sizeof(watch_double_view));
			bool fresh = should && m->seq > watch_double_view[m->rank].last_seq;
			watch_take(&w, m, (ssize_t)len, &from);
			if (!fresh) {
				if (memcmp(before, watch_double_view, sizeof(watch_double_view)) !=
					0 ||
				    w.dropped != dropped + 1)
					abort(); /* a datagram that should not count changed the
						    view */
			} else if (watch_double_view[m->rank].last_seq != m->seq ||
				   w.dropped != dropped) {
				abort(); /* a good one was not taken */
			}
		}
	}
	pthread_mutex_destroy(&w.lock);
	return 0;
}
