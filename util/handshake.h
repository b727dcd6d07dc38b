/*
 * handshake.h — the mutual challenge-response that opens every TCP
 * connection Weft makes (bootstrap root and relay, the socket transport's
 * sockets and lazy calls, liveness probes), before anything else is read
 * from it.
 *
 *   connector -> listener  HELLO     {magic, version, role, id, rank, peer,
 *                                     nonce_c, payload}
 *   listener -> connector  CHALLENGE {magic, version, rank, nonce_l,
 *                                     payload, mac_l}
 *   connector -> listener  PROOF     {magic, mac_c}
 *   listener -> connector  WELCOME   {magic}
 *
 * mac_l = HMAC(K, "listener" || HELLO || CHALLENGE without its MAC) and
 * mac_c = HMAC(K, "connector" || HELLO || CHALLENGE without its MAC): each side proves it
 * holds the key K over a nonce the other just chose, so a recorded
 * exchange proves nothing in another (a replayed HELLO meets a new nonce
 * and cannot answer it), the connector knows the listener is no impostor
 * (a process that bound the port first cannot make mac_l) before it sends
 * its proof, and the two labels keep either MAC from being reflected as
 * the other. The role, the communicator or job id, both ranks and the
 * payloads (nranks, a relay port, a socket index, the root's job id) are
 * all under both MACs, so nothing can be changed in flight. Neither side
 * ever sends K, nor anything from which it could be computed but by
 * brute force on a 256-bit key. The data that follows is not protected:
 * the handshake authenticates connections, it does not encrypt them
 * (docs/reliability.md, threat model).
 *
 * The WELCOME says only that the listener read and accepted the proof: a
 * listener under a flood drops its oldest handshakes (WEFT_MAX_PENDING),
 * and a connector whose connection closes before the welcome knows it was
 * not admitted and may knock again, where without it a connection dropped
 * just after the proof went out would look admitted. It carries no MAC:
 * whoever could forge it could as well reset the connection.
 *
 * Both ends drive it without blocking: weft_hs_step moves it as far as the
 * socket allows and says what happened. The listener learns who the
 * connector claims to be (role, id, rank, payload) before it answers, so
 * that it can choose the key and refuse quickly.
 */
#ifndef WEFT_HANDSHAKE_H
#define WEFT_HANDSHAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/auth.h"

#define WEFT_HS_MAGIC	      0x3130534854464557ull /* "WEFTHS01" */
#define WEFT_HS_WELCOME_MAGIC 0x31304b4f54464557ull /* "WEFTOK01" */
#define WEFT_HS_VERSION	      1u
#define WEFT_HS_ID_BYTES      16
#define WEFT_HS_PAYLOAD_BYTES 32

/* What the connector asks for: a role per listener kind, so that a hello
 * meant for one kind of listener proves nothing to another. */
enum weft_hs_role {
	WEFT_HS_ROOT = 1,   /* a rank joining the bootstrap root */
	WEFT_HS_RELAY = 2,  /* a rank joining its relay parent */
	WEFT_HS_SOCKET = 3, /* a socket transport data connection */
	WEFT_HS_CALL = 4,   /* a socket transport lazy call */
	WEFT_HS_LIVE = 5,   /* a liveness probe (transports/common/tp_liveness.h) */
};

struct weft_hs_hello {
	uint64_t magic;
	uint32_t version;
	uint32_t role;
	unsigned char id[WEFT_HS_ID_BYTES]; /* the communicator's (zero: the root tells) */
	int32_t rank;			    /* the connector's */
	int32_t peer;			    /* the listener it wants (-1: the root) */
	unsigned char nonce[WEFT_NONCE_BYTES];
	unsigned char payload[WEFT_HS_PAYLOAD_BYTES];
};

struct weft_hs_challenge {
	uint64_t magic;
	uint32_t version;
	int32_t rank; /* the listener's (-1: the root) */
	unsigned char nonce[WEFT_NONCE_BYTES];
	unsigned char payload[WEFT_HS_PAYLOAD_BYTES];
	unsigned char mac[WEFT_MAC_BYTES];
};

struct weft_hs_proof {
	uint64_t magic;
	unsigned char mac[WEFT_MAC_BYTES];
};

struct weft_hs_welcome {
	uint64_t magic;
};

_Static_assert(sizeof(struct weft_hs_hello) == 104, "hello is 104 bytes on the wire");
_Static_assert(sizeof(struct weft_hs_challenge) == 112, "challenge is 112 bytes on the wire");
_Static_assert(sizeof(struct weft_hs_proof) == 40, "proof is 40 bytes on the wire");
_Static_assert(sizeof(struct weft_hs_welcome) == 8, "welcome is 8 bytes on the wire");

enum weft_hs_phase {
	WEFT_HS_SEND_HELLO,	/* connector */
	WEFT_HS_RECV_CHALLENGE, /* connector */
	WEFT_HS_SEND_PROOF,	/* connector */
	WEFT_HS_RECV_WELCOME,	/* connector */
	WEFT_HS_RECV_HELLO,	/* listener */
	WEFT_HS_HELLO_IN,	/* listener: the caller looks at the hello and answers */
	WEFT_HS_SEND_CHALLENGE, /* listener */
	WEFT_HS_RECV_PROOF,	/* listener */
	WEFT_HS_SEND_WELCOME,	/* listener: admitted, telling the connector */
	WEFT_HS_DONE,
	WEFT_HS_FAILED,
};

/* What weft_hs_step says. */
enum weft_hs_result {
	WEFT_HS_AGAIN,	  /* wait until the socket is readable or writable */
	WEFT_HS_HELLO,	  /* listener: the hello is in (weft_hs_answer next) */
	WEFT_HS_OK,	  /* authenticated: the connection is the protocol's now */
	WEFT_HS_REFUSED,  /* the other side failed authentication or sent garbage (why) */
	WEFT_HS_IO_ERROR, /* the socket failed or closed (why, and errnum: 0 for EOF) */
};

struct weft_hs {
	int fd;
	enum weft_hs_phase phase;
	size_t done; /* bytes of the current message moved */
	struct weft_key key;
	struct weft_hs_hello hello;
	struct weft_hs_challenge challenge;
	struct weft_hs_proof proof;
	struct weft_hs_welcome welcome;
	const char *why; /* set with REFUSED and IO_ERROR */
	int errnum;
};

/* Start the connector's side on connected socket @p fd: what it asks for
 * (@p role, @p id, its @p rank, the @p peer it wants) and @p payload
 * (@p len bytes, at most WEFT_HS_PAYLOAD_BYTES). */
weft_status_t weft_hs_connect(struct weft_hs *hs, int fd, const struct weft_key *key,
			      enum weft_hs_role role, const unsigned char id[WEFT_HS_ID_BYTES],
			      int rank, int peer, const void *payload, size_t len,
			      struct weft_err *err);

/* Start the listener's side on accepted socket @p fd. */
void weft_hs_accept(struct weft_hs *hs, int fd);

/* Listener, after WEFT_HS_HELLO: answer with @p key, this side's @p rank
 * and @p payload (@p len bytes). */
weft_status_t weft_hs_answer(struct weft_hs *hs, const struct weft_key *key, int rank,
			     const void *payload, size_t len, struct weft_err *err);

/* Move the handshake as far as the socket allows (never blocks). */
enum weft_hs_result weft_hs_step(struct weft_hs *hs);

/* Events to wait for in the current phase (POLLIN or POLLOUT). */
short weft_hs_events(const struct weft_hs *hs);

/* WEFT_MAX_PENDING: handshakes a listener holds at once (at least 1);
 * WEFT_HANDSHAKE_TIMEOUT: seconds one may take. Bad values fall back to
 * the defaults with a warning (a listener must not fail on a setting). */
int weft_hs_max_pending(void);
double weft_hs_timeout_s(void);

/* A crowded listener (WEFT_MAX_PENDING handshakes under way) drops one
 * for each new connection: never one whose proof is in (it is being
 * welcomed), one still silent before one that said hello, the older of
 * two alike. weft_hs_droppable says whether @p hs may go at all,
 * weft_hs_drop_first whether @p a (pending since @p a_since) goes before
 * @p b. */
bool weft_hs_droppable(const struct weft_hs *hs);
bool weft_hs_drop_first(const struct weft_hs *a, double a_since, const struct weft_hs *b,
			double b_since);

/* Forget the key (after OK or failure). */
void weft_hs_clear(struct weft_hs *hs);

#endif
