/*
 * verbs_counters.h — congestion signals of an RDMA port, from sysfs:
 *   <root>/class/infiniband/<dev>/ports/<port>/counters/port_xmit_packets
 *       packets the port sent (the IB PMA counter, every QP together)
 *   <root>/class/infiniband/<dev>/ports/<port>/hw_counters/rp_cnp_handled
 *       congestion notification packets (CNPs) the port took as a sender
 *       (RoCE's "reaction point"): the receiver's NIC sends one when
 *       packets of ours arrived ECN-marked (at most one per flow per
 *       interval, so it counts marked intervals rather than packets)
 *   .../hw_counters/np_ecn_marked_roce_packets
 *       marked packets that arrived here (the "notification point"): other
 *       senders' congestion; logged, not a signal of our own sending
 * Drivers differ: mlx5 has them all, others some or none. A port without
 * port_xmit_packets or rp_cnp_handled gives no signal (the pacer then
 * sees none, as on shm).
 */
#ifndef WEFT_VERBS_COUNTERS_H
#define WEFT_VERBS_COUNTERS_H

#include <stdbool.h>
#include <stdint.h>

#define WEFT_VERBS_COUNTER_PATH 512

struct weft_verbs_counters {
	bool present; /* both the sent packets and the CNPs can be read */
	char tx[WEFT_VERBS_COUNTER_PATH];
	char cnp[WEFT_VERBS_COUNTER_PATH];
	char ecn[WEFT_VERBS_COUNTER_PATH]; /* "" when absent */
};

struct weft_verbs_sample {
	uint64_t tx_packets;
	uint64_t cnp_handled;
	uint64_t ecn_marked; /* 0 when absent */
};

/* Find the counters of (@p dev, @p port) under the sysfs tree @p root. */
void weft_verbs_counters_open(struct weft_verbs_counters *c, const char *root, const char *dev,
			      int port);

/* Read them now; false when they are absent or unreadable. */
bool weft_verbs_counters_read(const struct weft_verbs_counters *c, struct weft_verbs_sample *out);

#endif
