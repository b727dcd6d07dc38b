/* p2p.c — route a message to the transport that serves its peer. */
#include "core/p2p.h"

#include <stdio.h>

#include "core/tag.h"

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

void weft_p2p_explain(const struct weft_comm *comm, uint64_t sent, uint64_t want, int peer,
		      char *buf, size_t len)
{
	uint32_t s = (uint32_t)(sent >> 32), w = (uint32_t)(want >> 32);
	uint32_t n = weft_tag_number(s);
	uint64_t mine = comm->recent_calls[n % WEFT_RECENT_CALLS];
	bool earlier = !((s | w) & WEFT_TAG_P2P) && n != weft_tag_number(w) && (mine >> 32) &&
		       weft_tag_number((uint32_t)mine) == n;
	if (!earlier) {
		weft_tag_explain(s, w, peer, buf, len);
		return;
	}
	/* E.g. a broadcast whose ranks disagree on the root: nobody may have
	 * received anything in it, and its messages meet the next call. */
	char why[256];
	weft_tag_explain(s, (uint32_t)mine, peer, why, sizeof(why));
	if (why[0])
		snprintf(buf, len, "rank %d's call %u arrived during call %u here; in call %u, %s",
			 peer, n, weft_tag_number(w), n, why);
	else
		snprintf(buf, len,
			 "rank %d sent more in call %u (%s) than this rank received (it is at call "
			 "%u now)",
			 peer, n, weft_tag_call(s), weft_tag_number(w));
}
