/* agree_int.h — what the watch (core/watch.c) and the shrink's agreement
 * (health/agree.c, health/agree_run.c) share: the agreement's state, kept
 * with the watch and guarded by its lock, and its datagrams. */
#ifndef WEFT_AGREE_INT_H
#define WEFT_AGREE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "health/agree_proto.h"

struct weft_watch;

#define AGREE_MAGIC 0x3152474154464557ull /* "WEFTAGR1" */

/* An agreement datagram: this header, value_len bytes of value, and a MAC
 * (HMAC-SHA256 with the watch's key, which is derived from the
 * communicator's) over everything before it. seq is the sender's watch
 * sequence, shared with its watch datagrams: a rank takes nothing older
 * than what it took last from that rank. */
struct agree_wire {
	uint64_t magic;
	uint64_t comm_id;
	uint64_t seq;
	uint32_t type;
	int32_t rank;
	uint64_t instance;
	uint64_t ballot;
	uint64_t acc_ballot;
	uint64_t excl_hash;
	uint32_t value_len;
	uint32_t pad; /* the message's flags (AGREE_F_RETRY) */
};

_Static_assert(sizeof(struct agree_wire) == 72, "the agreement's header is 72 bytes");

#define AGREE_VALUE_MAX	   (sizeof(struct agree_value_hdr) + AGREE_MAX_EXCL * sizeof(uint32_t))
#define AGREE_DATAGRAM_MAX (sizeof(struct agree_wire) + AGREE_VALUE_MAX + 32)

struct weft_agree {
	struct agree_acceptor acc;
	/* The caller's proposer while it proposes: the watch thread hands it
	 * the replies addressed to it. */
	struct agree_proposer *prop;
	unsigned char *tx;	  /* the watch thread's replies, AGREE_DATAGRAM_MAX */
	struct agree_blob *rxval; /* a value as it arrived, AGREE_VALUE_MAX */
};

struct weft_agree *weft_agree_new(struct weft_watch *w);
void weft_agree_free(struct weft_agree *ag);

/* One datagram that is not the watch's own, as the watch's thread (or a
 * drain) read it: checked (size, magic, communicator, sender's address,
 * MAC, sequence, the value's form), then given to the acceptor or the
 * proposer, and answered. Anything that fails a check is counted in the
 * watch's dropped and changes nothing. With rx_lock held, not lock. */
void weft_agree_take(struct weft_watch *w, const unsigned char *buf, ssize_t len,
		     const struct sockaddr_storage *from);

/* weft_agree_take and weft_agree_free as a service of the watch
 * (core/watch.h), registered by weft_agree_attach (agree.h). */
extern const struct weft_watch_service weft_agree_watch;

/* The agreement's state that rides on @p w (NULL in none). */
static inline struct weft_agree *agree_of(const struct weft_watch *w)
{
	return weft_watch_service_ctx(w, &weft_agree_watch);
}

/* Send @p m to @p to with @p buf (AGREE_DATAGRAM_MAX) to build it in,
 * with the watch's lock held (the rank is noted as asked when an answer
 * is due). */
void weft_agree_send(struct weft_watch *w, int to, const struct agree_msg *m, unsigned char *buf);

#endif
