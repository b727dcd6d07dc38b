/* p2p_msg.h — the point-to-point layer at the level of the transports'
 * messages (struct weft_msg, transports/transport.h): what weft_p2p_isend
 * and weft_p2p_irecv (core/p2p.h) are built on, and what the transport
 * conformance tests drive. Core only. */
#ifndef WEFT_P2P_MSG_H
#define WEFT_P2P_MSG_H

#include "core/p2p.h"
#include "transports/transport.h"

/* Post a send of msg->buf/len to @p peer. The message must stay alive until
 * done; the gate may hold it back before it reaches the transport. */
weft_status_t weft_p2p_isend_msg(struct weft_comm *comm, int peer, struct weft_msg *msg);

/* Post a receive from @p peer into msg->buf (or reduced into it, see weft_msg). */
weft_status_t weft_p2p_irecv_msg(struct weft_comm *comm, int peer, struct weft_msg *msg);

#endif
