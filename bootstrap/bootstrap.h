/*
 * bootstrap.h — how ranks find each other before any transport exists.
 *
 * The unique id carries a magic, a version, the root's address and the
 * job's random 256-bit key. The root listener (a thread in the process that
 * created the id) accepts one TCP connection per rank. Each connection
 * first proves it holds the key, and the root proves it too, without either
 * sending it (util/handshake.h); anything else — a wrong key, garbage,
 * silence — is dropped, and so are, after that, a duplicate rank or a
 * different size, with the reason sent back; the job still initialises.
 * Every message is length-prefixed and checked.
 * Allgathers send blocks to the root and bring results down a relay tree of
 * ranks, packed (bootstrap_wire.h): they run a handful of times during
 * communicator creation, never on the data path.
 */
#ifndef WEFT_BOOTSTRAP_H
#define WEFT_BOOTSTRAP_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "util/auth.h"
#include "util/error.h"
#include "util/handshake.h"
#include "weft.h"

/*
 * The most ranks a job may have. Nothing in the bootstrap's own state is
 * sized by it (the root grows its tables as ranks join), so it is only a
 * sanity bound on a size that came from a user or the wire. What grows
 * with the job is the design, not this number: every rank receives every
 * card (an allgather may carry MAX_TOTAL_BYTES, 1 GiB, a million cards;
 * init fails past it with a message naming the limit), and the root holds
 * a socket per rank through init. docs/design.md, "The bootstrap at scale", says what is left.
 */
#define WEFT_MAX_RANKS 1000000

#define WEFT_UID_MAGIC	  0x5745465455494431ull /* "WEFTUID1" */
#define WEFT_UID_VERSION  2u			/* 2: a 256-bit key and the handshake */
#define WEFT_JOB_ID_BYTES WEFT_HS_ID_BYTES

/* The root's address: IPv4 or IPv6 only. Not sockaddr_storage, which alone
 * is 128 bytes and would not leave room in weft_unique_id_t. */
union weft_uid_addr {
	struct sockaddr sa;
	struct sockaddr_in in4;
	struct sockaddr_in6 in6;
};

/* The layout behind weft_unique_id_t (80 bytes of its 128; the rest zero).
 * weft_unique_id_t is only byte-aligned: memcpy it into a struct weft_uid
 * rather than casting the pointer. The key makes the id a secret: hand it
 * to the other ranks over a channel only they can read. */
struct weft_uid {
	uint64_t magic;
	uint32_t version;
	uint32_t addr_len;
	union weft_uid_addr addr;
	uint32_t reserved;
	struct weft_key key;
};

_Static_assert(sizeof(struct weft_uid) == 80, "the unique id's layout is 80 bytes");

struct weft_bootstrap;

/*
 * Start a root listener on @p addr (port 0: the kernel picks) in a detached
 * thread that serves one job of up to WEFT_MAX_RANKS ranks, then exits and
 * closes the listener: once every rank has closed, or @p timeout_s after a
 * failure, or if no rank joined within @p timeout_s. The join phase may last
 * @p timeout_s from the first valid hello, each allgather @p timeout_s from
 * its first block; when one runs out the root tells the waiting ranks which
 * ranks are missing. Fills @p uid.
 */
weft_status_t weft_bootstrap_root_start(const struct sockaddr *addr, socklen_t addr_len,
					const struct weft_key *key, double timeout_s,
					struct weft_uid *uid, struct weft_err *err);

/*
 * The same in two steps. Listen: bind and listen on @p addr (port 0: the
 * kernel picks), and fill @p uid with the address (no key); the socket is
 * *fd (the caller closes it if it never serves). Serve: start the thread
 * on that listener (it owns @p fd from then on, even when this fails),
 * handing every rank @p job_id (NULL: a random one). @p pids: NULL, or
 * for each of the job's @p npids ranks its pid when it runs on this host
 * (0 when it does not or is not known): while ranks are missing the root
 * checks those every 50 ms and fails the job at once, naming the rank,
 * when one has died (a member lost between a shrink's decision and its
 * join costs no timeout). Copied.
 */
weft_status_t weft_bootstrap_root_listen(const struct sockaddr *addr, socklen_t addr_len, int *fd,
					 struct weft_uid *uid, struct weft_err *err);
weft_status_t weft_bootstrap_root_serve(int fd, const struct weft_key *key,
					const unsigned char *job_id, double timeout_s,
					const int64_t *pids, int npids, struct weft_err *err);

/* In weft_uid.reserved: the root was listening before its id was handed
 * out, so a refused connection means it is gone (not "not up yet": a rank
 * does not knock again). */
#define WEFT_UID_LISTENING 1u

/* Check an id received from the user: magic, version, address family. */
weft_status_t weft_bootstrap_uid_check(const struct weft_uid *uid, struct weft_err *err);

/*
 * Connect to the root and join as @p rank of @p nranks. Blocks until every
 * rank has joined or @p timeout_s passes; the timeout error names the ranks
 * that did not arrive (the root tells the waiting ranks which ones).
 */
weft_status_t weft_bootstrap_join(const struct weft_uid *uid, int rank, int nranks,
				  double timeout_s, struct weft_bootstrap **out,
				  struct weft_err *err);

/*
 * AllGather @p bytes from every rank: buf holds nranks * bytes, this rank's
 * block at rank * bytes on entry; every block is filled on return. Every rank
 * must pass the same @p bytes (checked by the root).
 */
weft_status_t weft_bootstrap_allgather(struct weft_bootstrap *bs, void *buf, size_t bytes,
				       struct weft_err *err);

weft_status_t weft_bootstrap_barrier(struct weft_bootstrap *bs, struct weft_err *err);

/* The job's random id, which the root handed this rank at join: it names
 * the communicator (segments, the transports' handshakes). */
void weft_bootstrap_job_id(const struct weft_bootstrap *bs, unsigned char id[WEFT_JOB_ID_BYTES]);

/* Wait (at most @p timeout_s) until the root thread that serves the unique
 * id of @p key, if it runs in this process, has served its job and exited;
 * returns at once otherwise. Roots of other ids made in this process are
 * not waited for. */
void weft_bootstrap_root_drain(const struct weft_key *key, double timeout_s);

/* Leave: closes the connection. The root thread exits when all have left. */
void weft_bootstrap_close(struct weft_bootstrap *bs);

#endif
