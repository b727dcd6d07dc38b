/*
 * tp_liveness.h — is a peer's process still there, for transports whose
 * provider stays silent when a peer dies (libfabric's rxm retries the
 * connection to a dead peer for ever; udp's rxd retransmits; an RC queue
 * pair takes its retry count times its timeout).
 *
 * Every rank keeps a TCP listener per communicator that nothing is ever
 * sent through after its handshake, bound to the interface the job uses,
 * and publishes its address with the transport's card. A rank that
 * suspects a peer (its watchdog says a busy connection has stalled,
 * tp_watchdog.h) connects to the peer's listener and keeps the
 * connection: the peer's kernel answers for a live process even if that
 * process is busy elsewhere and never accepts, refuses when the process is
 * gone, and resets every connection the listener held when the process
 * dies or closes its communicator. So a check costs a poll() of one
 * socket, and the answer is the kernel's, not a timeout. A host that does
 * not answer at all is given up after a bound.
 *
 * Like every listener it is open to strangers, so it keeps only what it
 * can bound: each probe proves the communicator's key with the handshake
 * (util/handshake.h, role WEFT_HS_LIVE), and the listener holds at most
 * WEFT_MAX_PENDING handshakes under way (for WEFT_HANDSHAKE_TIMEOUT each)
 * and one admitted probe per peer. A probe's TCP connection answers for
 * the peer's kernel from the start (a busy peer that has not yet served
 * the handshake is alive); one its listener dropped before the welcome (a
 * crowded door) is made again, never taken for a death.
 */
#ifndef WEFT_TP_LIVENESS_H
#define WEFT_TP_LIVENESS_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transports/transport.h"
#include "util/handshake.h"

struct weft_live_card {
	struct sockaddr_storage addr;
	uint32_t len; /* 0: the rank has no listener (not checkable) */
	uint32_t reserved;
};

/* A stranger or a peer's probe in its handshake at our listener. */
struct weft_live_door {
	struct weft_hs hs;
	double since;
};

struct weft_live {
	const struct weft_tp_env *env;
	int nranks;
	int listen_fd;
	int *fds;		/* nranks: our probe to each peer, -1 none */
	struct weft_hs **probe; /* nranks: its handshake until welcomed, then NULL */
	double *since;		/* nranks: when its connect started */
	int *held;		/* nranks: the probe each peer opened to us, admitted */
	struct weft_live_door *door;
	struct pollfd *pfds; /* max_door: one poll for the door */
	int ndoor, max_door;
	double hs_s;	  /* WEFT_HANDSHAKE_TIMEOUT */
	double served;	  /* when weft_live_serve last ran */
	uint64_t dropped; /* strangers (and crowded-out probes) closed */
};

enum weft_live_state {
	WEFT_LIVE_UNKNOWN = 0, /* no answer yet */
	WEFT_LIVE_ALIVE,
	WEFT_LIVE_GONE,
};

/* Listen on env->ifname's address (loopback when NULL) and fill @p card.
 * Failing to listen is not an error: the card says so (len 0) and peers
 * do without the check. */
void weft_live_open(struct weft_live *l, const struct weft_tp_env *env,
		    struct weft_live_card *card);

/* What the kernels say of @p peer now; never blocks. A connection still
 * unanswered after @p give_up_s is GONE ("its host does not answer"). On
 * GONE, @p why says what was seen. */
enum weft_live_state weft_live_check(struct weft_live *l, int peer,
				     const struct weft_live_card *card, double give_up_s, char *why,
				     size_t len);

/* The listener's side: take new connections and move their handshakes
 * along (at most every 10 ms; never blocks). The transport's progress
 * calls it, and every check. */
void weft_live_serve(struct weft_live *l);

/* Close the listener and every connection: peers that check see us gone. */
void weft_live_close(struct weft_live *l);

/* Close (if not yet) and free. */
void weft_live_fini(struct weft_live *l);

#endif
