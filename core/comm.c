/* comm.c — what every layer may ask of a communicator: how a peer is
 * reached, whether it shares this host, the address offered to peers, and
 * the communicator's lock. Creation and destruction are in
 * core/comm_init.c, errors in core/fail.c, progress in core/progress.c. */
#include "core/comm.h"

#include <string.h>

#include "bootstrap/bootstrap.h"
#include "core/fail.h"
#include "transports/transport.h"
#include "util/netaddr.h"

const char *weft_comm_peer_transport(const struct weft_comm *comm, int peer)
{
	if (peer == comm->rank)
		return "self";
	const struct weft_tp *tp = comm->peers[peer].tp;
	return tp ? tp->ops->name : "none";
}

const char *weft_comm_leaf_name(const struct weft_comm *comm, int rank)
{
	const struct weft_topo_graph *g = &comm->graph;
	if (!g->leaf_of || rank < 0 || rank >= g->nranks)
		return NULL;
	int l = g->leaf_of[rank];
	return g->leaf_source[l] == WEFT_LEAF_NONE ? NULL : g->leaf_name[l];
}

bool weft_comm_same_host(const struct weft_comm *comm, int peer)
{
	return strcmp(comm->cards[peer].host_id, comm->cards[comm->rank].host_id) == 0;
}

weft_status_t weft_comm_local_address(struct weft_comm *comm, struct sockaddr_storage *addr,
				      socklen_t *len)
{
	return weft_addr_of_interface(comm->env->ifname, addr, len, &comm->err);
}

const char *weft_comm_connect_mode_name(const struct weft_comm *comm)
{
	return comm->connect_mode == WEFT_CONNECT_LAZY ? "lazy" : "eager";
}

size_t weft_comm_scratch_bytes(int nranks, size_t chunk_bytes)
{
	size_t bytes = WEFT_SCRATCH_CHUNKS * chunk_bytes;
	size_t slots = nranks > 2 ? (size_t)(nranks - 2) * 8 : 0;
	return bytes > slots ? bytes : slots;
}

weft_status_t weft_comm_allgather(struct weft_comm *comm, void *buf, size_t bytes)
{
	if (!comm->bs)
		return weft_comm_fail(comm, WEFT_ERR_INTERNAL,
				      "allgather after init (the bootstrap is closed)");
	return weft_bootstrap_allgather(comm->bs, buf, bytes, &comm->err);
}
