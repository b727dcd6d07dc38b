/* p2p.h — tagged point-to-point messages between ranks of a communicator,
 * on whichever transport serves the peer. What algorithms build on. */
#ifndef WEFT_P2P_H
#define WEFT_P2P_H

#include "core/comm.h"
#include "transports/transport.h"

/* Tags: the operation's sequence number above, the step inside it below. */
static inline uint64_t weft_p2p_tag(uint64_t seq, uint32_t step)
{
	return (seq << 32) | step;
}

/* Post a send of msg->buf/len to @p peer. The message must stay alive until done. */
weft_status_t weft_p2p_isend(struct weft_comm *comm, int peer, struct weft_msg *msg);

/* Post a receive from @p peer into msg->buf (or reduced into it, see weft_msg). */
weft_status_t weft_p2p_irecv(struct weft_comm *comm, int peer, struct weft_msg *msg);

/* Chunk size that the transport to @p peer pipelines best. */
size_t weft_p2p_chunk_bytes(const struct weft_comm *comm, int peer);

#endif
