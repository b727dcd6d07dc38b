/*
 * topo_hwloc.h — the hwloc half of topo/ with its inputs made explicit.
 *
 * The public calls in topo.h look at this machine, this process's CPU binding
 * and this host's interfaces. The variants here take those three as
 * parameters, so tests can evaluate them against an hwloc XML file, a CPU set
 * they choose and an interface list they invent, whatever machine they run on.
 */
#ifndef WEFT_TOPO_HWLOC_H
#define WEFT_TOPO_HWLOC_H

#include <stdbool.h>
#include <stddef.h>

#include "topo/topo.h"

/* One network interface, as getifaddrs() describes it. */
struct weft_topo_iface {
	char name[WEFT_TOPO_NAME_BYTES];
	bool up;       /* IFF_UP */
	bool loopback; /* IFF_LOOPBACK */
	bool has_ipv4; /* at least one AF_INET address */
	bool has_addr; /* at least one AF_INET or AF_INET6 address */
};

/*
 * The up-or-down interfaces of this host, in getifaddrs() order (one entry
 * per name). *ifaces is malloc'd (NULL when *count is 0); free() it.
 * @return WEFT_SUCCESS, WEFT_ERR_SYSTEM (getifaddrs), WEFT_ERR_NO_MEMORY.
 */
weft_status_t weft_topo_list_ifaces(struct weft_topo_iface **ifaces, int *count,
				    struct weft_err *err);

/*
 * weft_topo_hwloc_fill() where the process runs on @p cpus, an hwloc list
 * string such as "0-3,8" (PU os indices). @p cpus NULL: the process's
 * current binding on this machine, or the whole machine for an XML topology.
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG (unreadable XML, bad @p cpus).
 */
weft_status_t weft_topo_hwloc_fill_at(struct weft_topo_card *card, const char *nic,
				      const char *xml_path, const char *cpus, struct weft_err *err);

/*
 * weft_topo_pick_nic() for a process on @p cpus (as above) choosing among
 * @p ifaces (NULL: this host's interfaces). Candidates are up, not loopback
 * and have an address; among those with a PCI device the one whose locality
 * shares the deepest hwloc object with @p cpus wins (ties: list order).
 * Without such a NIC, the first candidate with an IPv4 address; else "".
 */
weft_status_t weft_topo_pick_nic_from(char *nic, size_t len, const char *xml_path, const char *cpus,
				      const struct weft_topo_iface *ifaces, int nifaces,
				      struct weft_err *err);

/*
 * What weft_topo_bind() would do, without doing it: the CPUs it would bind
 * to as an hwloc list string in @p cpus ("" = leave the binding alone).
 * @return WEFT_SUCCESS; WEFT_ERR_INVALID_ARG (bad mode, unreadable XML).
 */
weft_status_t weft_topo_bind_target(const char *mode, const char *nic, int local_rank,
				    const char *xml_path, char *cpus, size_t len,
				    struct weft_err *err);

#endif
