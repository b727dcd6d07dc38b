/*
 * bootstrap_wire.h — what the root listener (bootstrap_root.c) and the rank
 * side (bootstrap_rank.c) of the bootstrap share: the frame format, message
 * types and size limits, and small time and address helpers. Internal to
 * the bootstrap files; the rest of the library uses bootstrap.h.
 *
 *
 * Wire protocol (host byte order: every rank runs the same build). Every
 * message is a frame: struct frame_hdr {u32 type, u32 seq, u64 len} and then
 * len payload bytes; len is checked against a maximum for the type first.
 *   rank -> root  HELLO {magic, secret, version, rank, nranks}, within 2 s of
 *                 connecting; then GATHER (seq n, one block) per collective,
 *                 and BYE (empty) when it closes.
 *   root -> rank  READY (empty) once all nranks ranks joined; GATHER (seq n,
 *                 the nranks blocks) once every block of op n is in; ERROR
 *                 {i32 status, text} when the job fails or the hello is
 *                 refused; after an ERROR the root reads nothing more from it.
 *
 * The root is one thread with one poll() over the listener and every
 * connection, all non-blocking, so a slow or silent peer only ever costs its
 * own connection. Replies are queued per connection and share one
 * reference-counted buffer. Deadlines: a join phase lasts timeout_s from the
 * first valid hello; an allgather lasts timeout_s from the first block that
 * arrives. When one passes, the root tells every waiting rank which ranks are
 * missing. Ranks wait timeout_s plus a short grace, so that the root's
 * verdict (which names the missing ranks) normally reaches them before their
 * own deadline does.
 */
#ifndef WEFT_BOOTSTRAP_WIRE_H
#define WEFT_BOOTSTRAP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define MAX_TOTAL_BYTES ((uint64_t)64 << 20) /* nranks * block bytes */
#define MAX_ERROR_BYTES 1024u
#define ADDR_STR_BYTES	64

enum frame_type {
	FRAME_HELLO = 1,
	FRAME_READY = 2,
	FRAME_GATHER = 3,
	FRAME_ERROR = 4,
	FRAME_BYE = 5,
};

struct frame_hdr {
	uint32_t type;
	uint32_t seq;
	uint64_t len;
};

struct hello {
	uint64_t magic;
	uint64_t secret;
	uint32_t version;
	int32_t rank;
	int32_t nranks;
	uint32_t reserved;
};

_Static_assert(sizeof(struct frame_hdr) == 16, "frame header is 16 bytes on the wire");
_Static_assert(sizeof(struct hello) == 32, "hello is 32 bytes on the wire");

/* CLOCK_MONOTONIC in seconds. */
double weft_bootstrap_wire_now_s(void);

/* Milliseconds until @p deadline, rounded up, never negative. */
int weft_bootstrap_wire_ms_until(double deadline, double now);

/* "1.2.3.4:5" or "[::1]:5" into @p buf; other families by number only. */
void weft_bootstrap_wire_addr_format(const struct sockaddr *sa, char *buf, size_t size);

/* True when @p len is the address length of @p family (IPv4 or IPv6 only). */
bool weft_bootstrap_wire_addr_len_ok(int family, socklen_t len);

#endif
