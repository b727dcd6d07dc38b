/* revoke_peers.h — this rank revokes a communicator (weft_comm_revoke;
 * core/revoke.h describes the whole mechanism and what a peer does). */
#ifndef WEFT_REVOKE_PEERS_H
#define WEFT_REVOKE_PEERS_H

struct weft_comm;

/* Tell every peer (a REVOKE datagram each over the watch, sent again until
 * acknowledged, or the peer is found gone), then fail what is pending here
 * (or leave that to the call in flight in another thread, as
 * weft_comm_abort does). Blocks at most WEFT_REVOKE_WAIT_S for the peers'
 * acknowledgements. */
void weft_revoke(struct weft_comm *comm);

#define WEFT_REVOKE_WAIT_S 0.25

#endif
