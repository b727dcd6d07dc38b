/*
 * fuzz_agree.c — libFuzzer target: the shrink's agreement datagrams at the
 * watch (health/agree.c, weft_agree_take), which carry promises, accepted
 * values and decisions that decide a communicator's membership. A watch
 * of rank 1 of 4 is made by hand, its acceptor in an agreement; each input
 * is a run of datagrams, each a 2-byte length (up to 1,200), a flags byte
 * and the datagram:
 *   flags bit 0  sign it: the MAC is made with the watch's key over what
 *                the fuzzer wrote (its last 32 bytes are the MAC's place);
 *   flags bit 1  send it from the address its rank registered;
 *   flags bit 2  send it again right after (a replay).
 * Beyond crashes and sanitizer reports, the target checks what the watch
 * promises: a datagram that is unsigned, from another address or
 * replayed changes nothing — not the view, not what the acceptor promised,
 * accepted or learned — but the count of those dropped; one that is taken
 * raises its rank's sequence number to the datagram's.
 */
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/watch_int.h"
#include "health/agree_int.h"
#include "tests/lib/watch_double.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NRANKS WATCH_DOUBLE_RANKS
#define ME     1
#define MAXLEN 1200

/* What the acceptor holds, to compare before and after a datagram. */
struct snapshot {
	uint64_t instance, promised, acc_ballot, built_by;
	int joined, no_quorum_from, has_acc, has_decided;
};

static void snap(const struct weft_agree *ag, struct snapshot *s)
{
	memset(s, 0, sizeof(*s));
	s->instance = ag->acc.instance;
	s->promised = ag->acc.promised;
	s->acc_ballot = ag->acc.acc_ballot;
	s->built_by = (uint64_t)(int64_t)ag->acc.built_by;
	s->joined = ag->acc.joined;
	s->no_quorum_from = ag->acc.no_quorum_from;
	s->has_acc = ag->acc.acc != NULL;
	s->has_decided = ag->acc.decided != NULL;
}

static void take_one(struct weft_watch *w, unsigned char *buf, size_t len, int flags)
{
	struct agree_wire h;
	memset(&h, 0, sizeof(h));
	memcpy(&h, buf, len < sizeof(h) ? len : sizeof(h));
	if ((flags & 1) && len >= WEFT_MAC_BYTES)
		weft_mac(&w->key, buf, len - WEFT_MAC_BYTES, buf + len - WEFT_MAC_BYTES);
	struct sockaddr_storage from;
	bool home = (flags & 2) && h.rank >= 0 && h.rank < NRANKS;
	watch_double_address(&from, home ? h.rank : NRANKS + 3);
	for (int again = 0; again < ((flags & 4) ? 2 : 1); again++) {
		struct watch_view before[NRANKS];
		struct snapshot s0, s1;
		uint64_t dropped = w->dropped;
		memcpy(before, watch_double_view, sizeof(watch_double_view));
		snap(agree_of(w), &s0);
		weft_agree_take(w, buf, (ssize_t)len, &from);
		snap(agree_of(w), &s1);
		bool taken = w->dropped == dropped;
		if (!taken && (memcmp(before, watch_double_view, sizeof(watch_double_view)) != 0 ||
			       w->dropped != dropped + 1 || memcmp(&s0, &s1, sizeof(s0)) != 0))
			abort(); /* a datagram that was dropped changed something */
		if (taken &&
		    (!(flags & 1) || !home || again || watch_double_view[h.rank].last_seq != h.seq))
			abort(); /* unsigned, from elsewhere or replayed, and taken */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct weft_watch w;
	watch_double_init(&w, ME);
	weft_key_from_u64(&w.key, 0x5a5a5a5a5a5a5a5aull);
	struct weft_agree *ag = weft_agree_new(&w);
	if (!ag || weft_watch_serve(&w, &weft_agree_watch, ag) != WEFT_SUCCESS)
		abort();
	agree_acceptor_join(&ag->acc, 0, 0); /* its rank is in a shrink */
	static unsigned char buf[MAXLEN];
	while (size >= 3) {
		size_t len = (size_t)(data[0] | data[1] << 8) % (MAXLEN + 1);
		int flags = data[2];
		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		memcpy(buf, data, len);
		data += len;
		size -= len;
		take_one(&w, buf, len, flags);
	}
	weft_agree_free(ag);
	pthread_cond_destroy(&w.changed);
	pthread_mutex_destroy(&w.lock);
	return 0;
}
