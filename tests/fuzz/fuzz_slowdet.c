/*
 * fuzz_slowdet.c — libFuzzer target: the detector's datagram intake
 * (health/slowdet_watch.c, weft_slowdet_take), which shares the watch's
 * socket (health/slowdet.h). A watch of rank 0 of 4 (the rank that takes
 * samples and decides) is made by hand; each input is a run of
 * datagrams, each two length bytes (little-endian, its size modulo
 * sizeof(struct slowdet_msg) + 17: every size up to a message and a bit
 * more), a flags byte and the datagram:
 *   flags bit 0  sign it with the watch's key, so that it gets past the MAC;
 *   flags bit 1  send it from the address its rank registered;
 *   flags bit 2  send it again right after (a replay).
 * Beyond crashes and sanitizer reports, the target checks the promises: a
 * datagram of another size or magic is left to the watch; one unsigned,
 * from another address or communicator, replayed, or with links naming
 * no rank (or lateness naming none) is dropped and changes nothing but the count; a good sample
 * lands in rank 0's view of its sender.
 */
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/watch_int.h"
#include "health/slowdet_int.h"
#include "tests/lib/watch_double.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NRANKS WATCH_DOUBLE_RANKS

static bool links_ok(const struct slowdet_sample *s)
{
	if (s->nlinks > DETECT_LINKS || s->nlate > DETECT_LATE || s->top_peer < -1 ||
	    s->top_peer >= NRANKS)
		return false;
	for (unsigned i = 0; i < s->nlinks; i++)
		if (s->links[i].peer < 0 || s->links[i].peer >= NRANKS)
			return false;
	for (unsigned i = 0; i < s->nlate; i++)
		if (s->late[i].peer < 0 || s->late[i].peer >= NRANKS)
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t last_seq[NRANKS] = {0};
	struct weft_slowdet d = {.last_seq = last_seq, .period_ns = 200000000};
	pthread_mutex_init(&d.lock, NULL);
	struct weft_watch w;
	watch_double_init(&w, 0);
	if (weft_watch_serve(&w, &weft_slowdet_watch, &d) != WEFT_SUCCESS)
		abort();
	d.root = weft_slowdet_root_new(NRANKS, NRANKS);
	while (d.root && size >= 3) {
		size_t len =
		    ((size_t)data[0] | (size_t)data[1] << 8) % (sizeof(struct slowdet_msg) + 17);
		int flags = data[2];
		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		/* room for a whole message and more, aligned as one */
		union {
			struct slowdet_msg msg;
			unsigned char bytes[sizeof(struct slowdet_msg) + 16];
		} buf;
		memset(&buf, 0, sizeof(buf));
		memcpy(buf.bytes, data, len);
		data += len;
		size -= len;
		struct slowdet_msg *m = &buf.msg;
		if ((flags & 1) && len >= offsetof(struct slowdet_msg, mac))
			weft_mac(&w.key, m, offsetof(struct slowdet_msg, mac), m->mac);
		struct sockaddr_storage from;
		bool home = (flags & 2) && m->rank >= 0 && m->rank < NRANKS;
		watch_double_address(&from, home ? m->rank : NRANKS + 7);
		bool ours = len == sizeof(*m) && m->magic == DETECT_MAGIC;
		bool good = ours && (flags & 1) && home && m->comm_id == w.comm_id &&
			    m->rank != 0 && m->type == DETECT_SAMPLE && links_ok(&m->u.sample);
		for (int again = 0; again < ((flags & 4) ? 2 : 1); again++) {
			uint64_t dropped = d.dropped;
			bool fresh = good && m->seq > last_seq[m->rank];
			if (weft_slowdet_take(&w, m, (ssize_t)len, &from) != ours)
				abort(); /* the detector took the watch's, or left its own */
			if (fresh &&
			    (last_seq[m->rank] != m->seq || d.dropped != dropped ||
			     memcmp(&d.root->ranks[m->rank]
					 .s[(d.root->ranks[m->rank].n - 1) % DETECT_HISTORY],
				    &m->u.sample, sizeof(m->u.sample)) != 0))
				abort(); /* a good sample was not taken as it came */
			if (ours && !fresh && m->type == DETECT_SAMPLE && d.dropped != dropped + 1)
				abort(); /* a bad one was not counted as dropped */
		}
	}
	weft_slowdet_root_free(d.root);
	pthread_mutex_destroy(&d.lock);
	return 0;
}
