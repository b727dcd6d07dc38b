/* p2p.c — route a message to the transport that serves its peer. */
#include "core/p2p.h"

static weft_status_t post(struct weft_comm *comm, int peer, struct weft_msg *msg, bool send)
{
	msg->done = false;
	msg->status = WEFT_INPROGRESS;
	msg->xferred = 0;
	msg->next = NULL;
	if (msg->unit == 0)
		msg->unit = 1;
	if (peer < 0 || peer >= comm->nranks || peer == comm->rank)
		return weft_comm_fail(comm, WEFT_ERR_INTERNAL, "p2p: bad peer %d", peer);
	struct weft_conn *conn = comm->peers[peer].conn;
	if (!conn)
		return weft_comm_fail(comm, WEFT_ERR_INTERNAL, "p2p: no connection to rank %d",
				      peer);
	return send ? conn->ops->isend(conn, msg) : conn->ops->irecv(conn, msg);
}

weft_status_t weft_p2p_isend(struct weft_comm *comm, int peer, struct weft_msg *msg)
{
	msg->reduce = NULL;
	msg->local = NULL;
	return post(comm, peer, msg, true);
}

weft_status_t weft_p2p_irecv(struct weft_comm *comm, int peer, struct weft_msg *msg)
{
	return post(comm, peer, msg, false);
}

size_t weft_p2p_chunk_bytes(const struct weft_comm *comm, int peer)
{
	return comm->chunk_bytes;
}
