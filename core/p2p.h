/* p2p.h — tagged point-to-point messages between ranks of a communicator,
 * through the pacing gate of the connection (core/gate.h) to whichever
 * transport serves the peer. What algorithms and the tuner build on: they
 * post a message as a struct weft_p2p_post and hold the request handed
 * back; the transport's own message (struct weft_msg) stays the core's
 * business (core/p2p_msg.h). */
#ifndef WEFT_P2P_H
#define WEFT_P2P_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reduce/reduce.h"
#include "util/mr_key.h"
#include "weft.h"

struct weft_comm;
struct weft_mr;
struct weft_tp_props;

/* Tags: the operation word (task->seq, see core/tag.h) above, the step
 * inside the operation below. */
static inline uint64_t weft_p2p_tag(uint64_t seq, uint32_t step)
{
	return (seq << 32) | step;
}

/* One message as its poster describes it. For a receive, the bytes go to
 * buf (copied), or, when reduce is set, are combined: buf[i] =
 * reduce(local[i], incoming[i]). */
struct weft_p2p_post {
	void *buf;
	size_t len;
	uint64_t tag;
	weft_reduce_fn reduce; /* receive only; NULL: plain copy */
	const void *local;     /* receive with reduce: the local operand, len bytes */
	size_t unit;	       /* element size (0: bytes) */
	bool stream; /* receive: buf will not be read soon: streaming stores (reduce/stream.h) */
};

/* A posted message, from the communicator's pool: test it with
 * weft_p2p_done, give it back with weft_p2p_release once done. The buffer
 * stays the poster's until then. A message that failed need not be given
 * back: a failure kills the communicator, which frees its pool. */
struct weft_p2p_req;

/* Post a send of post->buf/len to @p peer (the gate may hold it back before
 * it reaches the transport), or a receive from it. WEFT_SUCCESS with *req
 * set, or the error (recorded on the communicator) with *req NULL. */
weft_status_t weft_p2p_isend(struct weft_comm *comm, int peer, const struct weft_p2p_post *post,
			     struct weft_p2p_req **req);
weft_status_t weft_p2p_irecv(struct weft_comm *comm, int peer, const struct weft_p2p_post *post,
			     struct weft_p2p_req **req);

/* True once @p req is done, with *status how it ended. */
bool weft_p2p_done(const struct weft_p2p_req *req, weft_status_t *status);

/* Give a done request back to the pool. */
void weft_p2p_release(struct weft_comm *comm, struct weft_p2p_req *req);

/* Free the pool (the communicator's end). */
void weft_p2p_free_pool(struct weft_comm *comm);

/*
 * Connections. With WEFT_CONNECT=eager the communicator connects every
 * peer at init. Lazily, the first message posted to or from a peer (send
 * or receive) starts its connection here: the message and those after it
 * wait (sends on the link's held queue, receives on the peer's) while
 * progress drives the transport's non-blocking connect, and go to the
 * transport in post order once it is up, when the gate, its pacer and the
 * statistics take the connection on. A connection not up within
 * WEFT_TIMEOUT fails the communicator naming the peer; a transport that
 * sees the peer gone fails it sooner.
 */

/* Post the sends the gate held back and now admits. Never blocks. */
weft_status_t weft_p2p_progress(struct weft_comm *comm);

/* Complete every held send (and, lazily, every receive waiting for its
 * connection) with @p status (the communicator is dying). */
void weft_p2p_abort(struct weft_comm *comm, weft_status_t status);

/* Move the connection to @p peer (not this rank) along once; never
 * blocks. WEFT_SUCCESS once it is up (the gate has it), WEFT_INPROGRESS,
 * or the transport's error. What init calls for every peer when eager. */
weft_status_t weft_p2p_connect(struct weft_comm *comm, int peer);

/* Peers whose connection is up. */
int weft_p2p_connected_peers(const struct weft_comm *comm);

/* For a timeout message: "; connecting to N peer(s), rank R (over T) for
 * S s" naming the longest under way, or "" if none is. */
void weft_p2p_connecting_note(const struct weft_comm *comm, char *buf, size_t len);

/* For a timeout message: "; the paths to rank R: N dark (FIRST, and N-1
 * more)", the transport's note of the dark paths (struct weft_tp_paths)
 * to @p peer, else to the first peer with a dark path, or "" if no path
 * is dark. */
void weft_p2p_dark_note(const struct weft_comm *comm, int peer, char *buf, size_t len);

/* The mem ops of the transport that serves @p peer (transports/transport.h,
 * struct weft_tp_mem_ops), so that algorithms reach them through the peer:
 * reg describes [buf, buf + len) of this rank in a key @p peer can use
 * (shm: the weft_mem allocation holding it; WEFT_ERR_NOT_SUPPORTED: the
 * transport cannot offer it to that peer, the ordinary path), dereg
 * undoes it; map makes @p peer's region named by @p key readable and
 * writable here (WEFT_ERR_NOT_SUPPORTED: it cannot), unmap releases it.
 * Never block; a failure other than "not supported" is recorded on the
 * communicator. */
weft_status_t weft_p2p_reg(struct weft_comm *comm, int peer, void *buf, size_t len,
			   struct weft_mr **mr, struct weft_mr_key *key);
void weft_p2p_dereg(struct weft_comm *comm, int peer, struct weft_mr *mr);
weft_status_t weft_p2p_map(struct weft_comm *comm, int peer, const struct weft_mr_key *key,
			   void **addr);
void weft_p2p_unmap(struct weft_comm *comm, int peer, void *addr, size_t len);
/* This rank stored something @p peer may wait for in a region it mapped
 * (the shm AllReduce's counters): wake it if it sleeps (WEFT_WAIT). A
 * no-op for a peer that never sleeps. Call after the store; it fences. */
void weft_p2p_wake(struct weft_comm *comm, int peer);
/* The clause for a transport's tag-mismatch message: what differs between
 * the tag @p sent by rank @p peer and the tag @p want of the receive posted
 * here, as far as their operation words tell (core/tag.h); "" if only the
 * steps differ. A message of an earlier call is compared with this rank's
 * own call of that number, if it is among the last WEFT_RECENT_CALLS.
 * (Transports reach it through env->explain.) */
void weft_p2p_explain(const struct weft_comm *comm, uint64_t sent, uint64_t want, int peer,
		      char *buf, size_t len);

/* Chunk size that the transport to @p peer pipelines best. */
size_t weft_p2p_chunk_bytes(const struct weft_comm *comm, int peer);

/* What the transport to @p peer says of itself (transports/transport.h's
 * struct weft_tp_props); false for this rank and a peer no transport
 * serves. */
bool weft_p2p_props(const struct weft_comm *comm, int peer, struct weft_tp_props *out);

#endif
