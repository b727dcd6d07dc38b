/* topo_local.h — this rank's own topology card. */
#ifndef WEFT_TOPO_LOCAL_H
#define WEFT_TOPO_LOCAL_H

#include "topo/topo.h"
#include "util/error.h"

/* NIC (WEFT_SOCKET_IFNAME or the nearest), hwloc facts, and the leaf from
 * LLDP, else WEFT_TOPO_FILE (looked up by WEFT_HOSTID if set, else
 * @p hostname), else Slurm's SLURM_TOPOLOGY_ADDR; what the file and Slurm
 * say is kept on the card either way. Missing information is not an error;
 * a bad topology file is. */
weft_status_t weft_topo_local_card(struct weft_topo_card *card, const char *hostname,
				   struct weft_err *err);

/* Make every string of a card received from a peer NUL-terminated. */
void weft_topo_card_terminate(struct weft_topo_card *card);

/* Make the best source the card knows its leaf (order: topo.h), with an
 * INFO line naming the others when more than one knows a leaf. An LLDP leaf
 * takes its spine from a file or Slurm that names the same leaf. */
void weft_topo_card_choose(struct weft_topo_card *card);

/* "lldp", "file", "slurm" or "none". */
const char *weft_topo_leaf_source_name(int source);

#endif
