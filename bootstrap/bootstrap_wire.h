/*
 * bootstrap_wire.h — what the root listener (bootstrap_root.c) and the rank
 * side (bootstrap_rank.c) of the bootstrap share: the frame format, message
 * types and size limits, and small time and address helpers. Internal to
 * the bootstrap files; the rest of the library uses bootstrap.h.
 *
 *
 * Wire protocol (host byte order: every rank runs the same build). Every
 * connection opens with the handshake of util/handshake.h, which proves
 * both ends hold the job's key without sending it; nothing else is read
 * before it succeeds. After it, every message is a frame: struct
 * frame_hdr {u32 type, u32 seq, u64 len} and then len payload bytes; len
 * is checked against a maximum for the type first.
 *   rank -> root  handshake, role WEFT_HS_ROOT, peer -1, payload struct
 *                 join {nranks, relay port}; the root answers with the
 *                 job's random id (struct root_answer), which names the
 *                 communicator from then on (shared-memory segments,
 *                 the transports' handshakes). Then GATHER (seq n, one
 *                 block) per collective, and BYE (empty) when it closes.
 *   root -> rank  READY {fan-out, the rank's relay parent's address} once all
 *                 nranks ranks joined; GATHER (seq n, the nranks blocks as
 *                 one zlib stream; empty when they are) to the ranks whose
 *                 parent is the root, once every block of op n is in;
 *                 ERROR {i32 status, text} to every rank when the job
 *                 fails or an authenticated join is refused; after an
 *                 ERROR the root reads nothing more from it. A connection
 *                 that fails the handshake is closed unanswered.
 *   rank -> rank  The relay tree (fan-out F, WEFT_BOOTSTRAP_FANOUT at the
 *                 root): the root's children are ranks 0..F-1, rank p's
 *                 are F(p+1)..F(p+1)+F-1. Each rank listens on the address
 *                 its root connection leaves from; after READY it connects
 *                 to its parent (handshake, role WEFT_HS_RELAY, the job's
 *                 id, payload struct join), and accepts its children's,
 *                 any number of them and of strangers at once. A rank
 *                 forwards every GATHER result it receives from its parent
 *                 to its children while it reads it, piece by piece, still
 *                 compressed, and inflates it for itself. So the root sends
 *                 each result F times, not nranks times, and cards (mostly
 *                 zero padding and names shared by a host's ranks) shrink
 *                 some 35-fold; blocks still go straight to the root, and
 *                 so do its verdicts.
 *
 * Strangers. Each listener holds at most WEFT_MAX_PENDING connections that
 * have not finished the handshake (the oldest is dropped for a new one)
 * and drops any after WEFT_HANDSHAKE_TIMEOUT seconds, so idle or garbage
 * connections cost a bounded number of descriptors and never delay a
 * rank's own handshake, which a rank retries (a new connection) if its
 * connection is dropped before the challenge.
 *
 * The root is one thread with one poll() over the listener and every
 * connection, all non-blocking, so a slow or silent peer only ever costs its
 * own connection. Replies are queued per connection and share one
 * reference-counted buffer. Deadlines: a join phase lasts timeout_s from the
 * first valid hello; an allgather lasts timeout_s from the first block that
 * arrives. When one passes, the root tells every waiting rank which ranks are
 * missing. Ranks wait timeout_s plus a short grace, so that the root's
 * verdict (which names the missing ranks) normally reaches them before their
 * own deadline does. A rank whose relay link breaks waits that grace for the
 * root's verdict too before it names the link.
 */
#ifndef WEFT_BOOTSTRAP_WIRE_H
#define WEFT_BOOTSTRAP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bootstrap/bootstrap.h"
#include "util/handshake.h"

/* nranks * block bytes: 1,000,000 ranks of today's 872-byte cards fit. */
#define MAX_TOTAL_BYTES ((uint64_t)1 << 30)
#define MAX_ERROR_BYTES 1024u
#define ADDR_STR_BYTES	64

enum frame_type {
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

/* The public half of a join (the handshake's payload): what the root and a
 * relay parent check once the handshake has proven the key. */
struct join {
	int32_t nranks;
	uint32_t relay_port; /* to the root: the rank's relay listener, host order; 0 is refused */
};

/* The root's answer (the challenge's payload): the job's id. */
struct root_answer {
	unsigned char job_id[WEFT_JOB_ID_BYTES];
};

/* READY's payload: the tree's fan-out and where this rank's parent listens
 * (parent_len 0: the root is its parent, over the root connection). */
struct ready {
	uint32_t fanout;
	uint32_t parent_len;
	union weft_uid_addr parent;
};

/* The parent of @p rank in a tree of fan-out @p fanout: -1 for the root. */
static inline int relay_parent(int rank, int fanout)
{
	return rank < fanout ? -1 : rank / fanout - 1;
}

/* The first of @p rank's children (the root's: -1) and how many there are. */
static inline int relay_children(int rank, int fanout, int nranks, int *first)
{
	long lo = ((long)rank + 1) * fanout;
	long count = nranks - lo;

	*first = (int)(lo < nranks ? lo : nranks);
	return count <= 0 ? 0 : (int)(count < fanout ? count : fanout);
}

_Static_assert(sizeof(struct frame_hdr) == 16, "frame header is 16 bytes on the wire");
_Static_assert(sizeof(struct join) == 8, "join is 8 bytes on the wire");
_Static_assert(sizeof(struct ready) == 36, "ready is 36 bytes on the wire");

/* CLOCK_MONOTONIC in seconds. */
double weft_bootstrap_wire_now_s(void);

/* Milliseconds until @p deadline, rounded up, never negative. */
int weft_bootstrap_wire_ms_until(double deadline, double now);

/* "1.2.3.4:5" or "[::1]:5" into @p buf; other families by number only. */
void weft_bootstrap_wire_addr_format(const struct sockaddr *sa, char *buf, size_t size);

/* "rank 3" or "ranks 3,5,7-9": the ranks first + i where @p missing[i]. */
void weft_bootstrap_wire_ranks_format(const bool *missing, int nranks, int first, char *buf,
				      size_t size);

/* True when @p len is the address length of @p family (IPv4 or IPv6 only). */
bool weft_bootstrap_wire_addr_len_ok(int family, socklen_t len);

#endif
