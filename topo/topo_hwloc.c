/*
 * topo_hwloc.c — what hwloc tells about this host: packages, NUMA nodes and
 * cores; on which NUMA node this process runs and each NIC hangs; which NIC
 * a rank should use; and binding a rank near its NIC (WEFT_BIND).
 *
 * Where a NIC sits: hwloc keeps network interfaces as OS devices below their
 * PCI device and bridges; the first ancestor that is not an I/O object (a
 * package, a NUMA node's parent, or the whole machine when the firmware does
 * not say) carries the CPUs and NUMA nodes the device is local to. Virtual
 * interfaces (lo, veth, bridges) have no OS device: their locality is unknown.
 *
 * Nothing here fails a job for lack of facts: an unknown NUMA node is -1 and
 * a topology that cannot be loaded from this machine leaves everything
 * unknown, with a log line. Only bad input (an XML path or CPU list given by
 * a caller, a bad WEFT_BIND) and a refused binding are errors.
 */
#define _GNU_SOURCE
#include "topo/topo_hwloc.h"

#include <errno.h>
#include <hwloc.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "util/log.h"

/* Load this machine (@p xml_path NULL) or an XML file, with the I/O devices
 * that matter (NICs). *topo is NULL when this
 * machine could not be loaded: callers carry on with unknowns. */
static weft_status_t topo_read(hwloc_topology_t *topo, const char *xml_path, struct weft_err *err)
{
	hwloc_topology_t t;
	*topo = NULL;
	if (hwloc_topology_init(&t) != 0)
		return weft_err_errno(err, errno, "hwloc_topology_init");
	hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	/* hwloc's Linux backend reads the PCI tree from sysfs by itself. The
	 * libpciaccess component only adds vendor and device names, and its
	 * pci.ids parsing costs ~4 s per load under ASan (and is never freed).
	 * Weft never looks at GPUs: the gl component tries ten X displays
	 * (three connects each, to 127.0.0.1:6000 and up) and opencl its
	 * runtime, on every rank's start. A component hwloc was built
	 * without is refused (-1), which is what we want anyway. */
	static const char *const unused[] = {"pci", "gl", "opencl", "cuda", "nvml", "rsmi"};
	for (size_t i = 0; i < sizeof(unused) / sizeof(unused[0]); i++)
		(void)hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
						    unused[i]);
	/* Nor at PCI objects: only at which NUMA node a NIC is near. Without
	 * them, hwloc attaches each OS device to the smallest object holding
	 * its bus's local CPUs (what it reads from sysfs anyway), and skips
	 * reading every device's config space, which was 80 % of a load's
	 * CPU in a VM (~10 of 12 ms per rank). An XML file keeps what it has. */
	if (!xml_path) {
		hwloc_topology_set_type_filter(t, HWLOC_OBJ_PCI_DEVICE,
					       HWLOC_TYPE_FILTER_KEEP_NONE);
		hwloc_topology_set_type_filter(t, HWLOC_OBJ_BRIDGE, HWLOC_TYPE_FILTER_KEEP_NONE);
	}
	if (xml_path && hwloc_topology_set_xml(t, xml_path) != 0) {
		int e = errno;
		hwloc_topology_destroy(t);
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "hwloc: cannot use XML topology %s: %s", xml_path, strerror(e));
	}
	if (hwloc_topology_load(t) != 0) {
		int e = errno;
		hwloc_topology_destroy(t);
		if (xml_path)
			return weft_err_set(err, WEFT_ERR_INVALID_ARG,
					    "hwloc: cannot load XML topology %s: %s", xml_path,
					    strerror(e));
		weft_log(WEFT_LOG_WARN, WEFT_SUB_TOPO,
			 "hwloc cannot load this machine's topology (%s): NUMA placement unknown",
			 strerror(e));
		return WEFT_SUCCESS;
	}
	*topo = t;
	return WEFT_SUCCESS;
}

/* This machine is read once per process and kept (read-only, which hwloc
 * lets threads share): a load reads a few hundred sysfs files, ~15 ms of
 * CPU, and a communicator's start asked for it two to four times (the NIC,
 * the card, the binding), in every rank at once on hosts where ranks
 * outnumber cores. A machine hwloc could not load stays unknown. */
static pthread_mutex_t machine_lock = PTHREAD_MUTEX_INITIALIZER;
static hwloc_topology_t machine;
static bool machine_read;

static weft_status_t topo_load(hwloc_topology_t *topo, const char *xml_path, struct weft_err *err)
{
	if (xml_path)
		return topo_read(topo, xml_path, err);
	weft_status_t st = WEFT_SUCCESS;
	pthread_mutex_lock(&machine_lock);
	if (!machine_read) {
		st = topo_read(&machine, NULL, err);
		machine_read = st == WEFT_SUCCESS;
	}
	*topo = machine;
	pthread_mutex_unlock(&machine_lock);
	return st;
}

/* Done with @p t from topo_load(..., @p xml_path, ...). */
static void topo_done(hwloc_topology_t t, const char *xml_path)
{
	if (t && xml_path)
		hwloc_topology_destroy(t);
}

/* Where this process runs, into @p set: the list @p cpus if given, else the
 * process's binding on this machine, else (XML, or no binding support) the
 * whole machine. */
static weft_status_t process_cpus(hwloc_topology_t t, const char *cpus, bool from_xml,
				  hwloc_bitmap_t set, struct weft_err *err)
{
	hwloc_const_cpuset_t all = hwloc_topology_get_topology_cpuset(t);
	if (cpus) {
		if (hwloc_bitmap_list_sscanf(set, cpus) != 0 || hwloc_bitmap_iszero(set))
			return weft_err_set(err, WEFT_ERR_INVALID_ARG,
					    "CPU list '%s': expected e.g. 0-3,8", cpus);
	} else if (from_xml || hwloc_get_cpubind(t, set, 0) != 0) {
		hwloc_bitmap_copy(set, all);
	}
	hwloc_bitmap_and(set, set, all);
	if (hwloc_bitmap_iszero(set))
		hwloc_bitmap_copy(set, all);
	return WEFT_SUCCESS;
}

static int single_numa_node(hwloc_topology_t t)
{
	if (hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE) != 1)
		return -1;
	return (int)hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, 0)->os_index;
}

/* The NUMA node (os index) that holds all of @p nodeset, -1 if several. */
static int numa_of_nodeset(hwloc_topology_t t, hwloc_const_nodeset_t nodeset)
{
	int only = single_numa_node(t);
	if (only >= 0)
		return only;
	if (hwloc_bitmap_weight(nodeset) != 1)
		return -1;
	return hwloc_bitmap_first(nodeset);
}

static int numa_of_cpus(hwloc_topology_t t, hwloc_const_cpuset_t cpus)
{
	hwloc_nodeset_t nodes = hwloc_bitmap_alloc();
	if (!nodes)
		return -1;
	hwloc_cpuset_to_nodeset(t, cpus, nodes);
	int numa = numa_of_nodeset(t, nodes);
	hwloc_bitmap_free(nodes);
	return numa;
}

/* The non-I/O object a NIC is local to; NULL if hwloc has no OS device of
 * that name (virtual interfaces, unknown names). */
static hwloc_obj_t nic_locality(hwloc_topology_t t, const char *nic)
{
	if (!nic || !*nic)
		return NULL;
	for (hwloc_obj_t o = hwloc_get_next_osdev(t, NULL); o; o = hwloc_get_next_osdev(t, o))
		if (o->name && strcmp(o->name, nic) == 0)
			return hwloc_get_non_io_ancestor_obj(t, o);
	return NULL;
}

static int nic_numa(hwloc_topology_t t, const char *nic)
{
	hwloc_obj_t loc = nic_locality(t, nic);
	return loc ? numa_of_nodeset(t, loc->nodeset) : -1;
}

/* The host's last-level cache: every object of the deepest cache level
 * with a size, summed (several L3s on a many-core package). */
static int64_t llc_total(hwloc_topology_t t)
{
	static const hwloc_obj_type_t levels[] = {HWLOC_OBJ_L5CACHE, HWLOC_OBJ_L4CACHE,
						  HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE,
						  HWLOC_OBJ_L1CACHE};
	for (size_t l = 0; l < sizeof(levels) / sizeof(levels[0]); l++) {
		int64_t sum = 0;
		int n = hwloc_get_nbobjs_by_type(t, levels[l]);
		for (int i = 0; i < n; i++) {
			hwloc_obj_t cache = hwloc_get_obj_by_type(t, levels[l], (unsigned)i);
			sum += (int64_t)cache->attr->cache.size;
		}
		if (sum > 0)
			return sum;
	}
	return 0;
}

static void fill_counts(hwloc_topology_t t, struct weft_topo_card *card)
{
	int cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
	if (cores <= 0)
		cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
	card->cores = cores;
	card->numa_nodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
	card->packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
	card->llc_bytes = llc_total(t);
}

weft_status_t weft_topo_hwloc_fill_at(struct weft_topo_card *card, const char *nic,
				      const char *xml_path, const char *cpus, struct weft_err *err)
{
	if (nic != card->nic) /* callers may pass the card's own field */
		snprintf(card->nic, sizeof(card->nic), "%s", nic ? nic : "");
	card->numa = -1;
	card->nic_numa = -1;
	card->cores = card->numa_nodes = card->packages = 0;
	card->llc_bytes = 0;

	hwloc_topology_t t;
	weft_status_t st = topo_load(&t, xml_path, err);
	if (st != WEFT_SUCCESS || !t)
		return st;
	hwloc_cpuset_t set = hwloc_bitmap_alloc();
	if (!set) {
		st = weft_err_set(err, WEFT_ERR_NO_MEMORY, "hwloc_bitmap_alloc");
		goto out_destroy;
	}
	st = process_cpus(t, cpus, xml_path != NULL, set, err);
	if (st != WEFT_SUCCESS)
		goto out_free_set;

	fill_counts(t, card);
	card->numa = numa_of_cpus(t, set);
	card->nic_numa = nic_numa(t, card->nic);
	weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
		 "hwloc: %d packages, %d NUMA nodes, %d cores, %lld KiB of last-level cache; this "
		 "process on NUMA node %d, NIC '%s' on NUMA node %d (-1: unknown)",
		 card->packages, card->numa_nodes, card->cores, (long long)(card->llc_bytes >> 10),
		 card->numa, card->nic, card->nic_numa);
out_free_set:
	hwloc_bitmap_free(set);
out_destroy:
	topo_done(t, xml_path);
	return st;
}

weft_status_t weft_topo_hwloc_fill(struct weft_topo_card *card, const char *nic,
				   const char *xml_path, struct weft_err *err)
{
	return weft_topo_hwloc_fill_at(card, nic, xml_path, NULL, err);
}

/* ---- Interfaces */

static struct weft_topo_iface *iface_slot(struct weft_topo_iface **list, int *count, int *cap,
					  const char *name)
{
	for (int i = 0; i < *count; i++)
		if (strcmp((*list)[i].name, name) == 0)
			return &(*list)[i];
	if (*count == *cap) {
		int ncap = *cap ? 2 * *cap : 8;
		struct weft_topo_iface *n = realloc(*list, (size_t)ncap * sizeof(*n));
		if (!n)
			return NULL;
		*list = n;
		*cap = ncap;
	}
	struct weft_topo_iface *s = &(*list)[(*count)++];
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	return s;
}

weft_status_t weft_topo_list_ifaces(struct weft_topo_iface **ifaces, int *count,
				    struct weft_err *err)
{
	struct ifaddrs *all;
	*ifaces = NULL;
	*count = 0;
	if (getifaddrs(&all) != 0)
		return weft_err_errno(err, errno, "getifaddrs");
	int cap = 0;
	weft_status_t st = WEFT_SUCCESS;
	for (struct ifaddrs *a = all; a; a = a->ifa_next) {
		if (!a->ifa_name)
			continue;
		struct weft_topo_iface *s = iface_slot(ifaces, count, &cap, a->ifa_name);
		if (!s) {
			st = weft_err_set(err, WEFT_ERR_NO_MEMORY, "interface list");
			free(*ifaces);
			*ifaces = NULL;
			*count = 0;
			break;
		}
		s->up |= (a->ifa_flags & IFF_UP) != 0;
		s->loopback |= (a->ifa_flags & IFF_LOOPBACK) != 0;
		int family = a->ifa_addr ? a->ifa_addr->sa_family : AF_UNSPEC;
		s->has_ipv4 |= family == AF_INET;
		s->has_addr |= family == AF_INET || family == AF_INET6;
	}
	freeifaddrs(all);
	return st;
}

/* How close a NIC is to the process: the depth of the deepest object that
 * holds both the process's CPUs and the NIC's locality (higher is closer);
 * -1 if hwloc does not know the NIC. */
static int nic_closeness(hwloc_topology_t t, hwloc_const_cpuset_t cpus, const char *nic)
{
	hwloc_obj_t loc = nic_locality(t, nic);
	if (!loc)
		return -1;
	hwloc_obj_t here = hwloc_get_obj_covering_cpuset(t, cpus);
	if (!here)
		here = hwloc_get_root_obj(t);
	hwloc_obj_t common = hwloc_get_common_ancestor_obj(t, here, loc);
	return common ? common->depth : 0;
}

static bool usable(const struct weft_topo_iface *i)
{
	return i->up && !i->loopback && i->has_addr;
}

static const char *pick(hwloc_topology_t t, hwloc_const_cpuset_t cpus,
			const struct weft_topo_iface *ifaces, int n)
{
	const char *best = NULL;
	int best_close = -1;
	for (int i = 0; t && i < n; i++) {
		if (!usable(&ifaces[i]))
			continue;
		int c = nic_closeness(t, cpus, ifaces[i].name);
		if (c > best_close) {
			best_close = c;
			best = ifaces[i].name;
		}
	}
	if (best)
		return best;
	for (int i = 0; i < n; i++)
		if (usable(&ifaces[i]) && ifaces[i].has_ipv4)
			return ifaces[i].name;
	return NULL;
}

weft_status_t weft_topo_pick_nic_from(char *nic, size_t len, const char *xml_path, const char *cpus,
				      const struct weft_topo_iface *ifaces, int nifaces,
				      struct weft_err *err)
{
	if (len)
		nic[0] = '\0';
	struct weft_topo_iface *own = NULL;
	weft_status_t st;
	if (!ifaces) {
		st = weft_topo_list_ifaces(&own, &nifaces, err);
		if (st != WEFT_SUCCESS)
			return st;
		ifaces = own;
	}
	hwloc_topology_t t;
	st = topo_load(&t, xml_path, err);
	if (st != WEFT_SUCCESS)
		goto out_free_ifaces;
	hwloc_cpuset_t set = hwloc_bitmap_alloc();
	if (!set) {
		st = weft_err_set(err, WEFT_ERR_NO_MEMORY, "hwloc_bitmap_alloc");
		goto out_destroy;
	}
	if (t) {
		st = process_cpus(t, cpus, xml_path != NULL, set, err);
		if (st != WEFT_SUCCESS)
			goto out_free_set;
	}
	const char *chosen = pick(t, set, ifaces, nifaces);
	if (chosen) {
		snprintf(nic, len, "%s", chosen);
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO, "NIC %s chosen (nearest to this process)",
			 chosen);
	} else {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "no up non-loopback interface with an address: no NIC chosen");
	}
out_free_set:
	hwloc_bitmap_free(set);
out_destroy:
	topo_done(t, xml_path);
out_free_ifaces:
	free(own);
	return st;
}

weft_status_t weft_topo_pick_nic(char *nic, size_t len, const char *xml_path, struct weft_err *err)
{
	return weft_topo_pick_nic_from(nic, len, xml_path, NULL, NULL, 0, err);
}

/* ---- Binding */

enum bind_mode {
	BIND_NONE,
	BIND_NUMA,
	BIND_CORE,
};

static weft_status_t parse_mode(const char *mode, enum bind_mode *out, struct weft_err *err)
{
	if (!mode || !*mode || strcmp(mode, "none") == 0)
		*out = BIND_NONE;
	else if (strcmp(mode, "numa") == 0)
		*out = BIND_NUMA;
	else if (strcmp(mode, "core") == 0)
		*out = BIND_CORE;
	else
		return weft_err_set(err, WEFT_ERR_INVALID_ARG,
				    "WEFT_BIND=%s: expected none, numa or core", mode);
	return WEFT_SUCCESS;
}

/* The CPUs to bind to, copied into @p set; false: leave the binding alone
 * (the NIC's NUMA node is unknown), with an INFO line saying so. */
static bool bind_set(hwloc_topology_t t, enum bind_mode mode, const char *nic, int local_rank,
		     hwloc_bitmap_t set)
{
	int numa = nic_numa(t, nic);
	hwloc_obj_t node = numa >= 0 ? hwloc_get_numanode_obj_by_os_index(t, (unsigned)numa) : NULL;
	if (!node || hwloc_bitmap_iszero(node->cpuset)) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "WEFT_BIND=%s: NUMA node of NIC '%s' unknown, not binding",
			 mode == BIND_CORE ? "core" : "numa", nic ? nic : "");
		return false;
	}
	hwloc_const_cpuset_t cpus = node->cpuset;
	if (mode == BIND_CORE) {
		hwloc_obj_type_t type = HWLOC_OBJ_CORE;
		int n = hwloc_get_nbobjs_inside_cpuset_by_type(t, cpus, type);
		if (n <= 0) {
			type = HWLOC_OBJ_PU;
			n = hwloc_get_nbobjs_inside_cpuset_by_type(t, cpus, type);
		}
		if (n > 0) {
			unsigned idx = (unsigned)(((local_rank % n) + n) % n);
			cpus = hwloc_get_obj_inside_cpuset_by_type(t, cpus, type, idx)->cpuset;
		}
	}
	hwloc_bitmap_copy(set, cpus);
	return true;
}

weft_status_t weft_topo_bind_target(const char *mode, const char *nic, int local_rank,
				    const char *xml_path, char *cpus, size_t len,
				    struct weft_err *err)
{
	enum bind_mode m = BIND_NONE;
	if (len)
		cpus[0] = '\0';
	weft_status_t st = parse_mode(mode, &m, err);
	if (st != WEFT_SUCCESS || m == BIND_NONE)
		return st;
	hwloc_topology_t t;
	st = topo_load(&t, xml_path, err);
	if (st != WEFT_SUCCESS || !t)
		return st;
	hwloc_bitmap_t set = hwloc_bitmap_alloc();
	if (!set)
		st = weft_err_set(err, WEFT_ERR_NO_MEMORY, "hwloc_bitmap_alloc");
	else if (bind_set(t, m, nic, local_rank, set))
		hwloc_bitmap_list_snprintf(cpus, len, set);
	hwloc_bitmap_free(set);
	topo_done(t, xml_path);
	return st;
}

weft_status_t weft_topo_bind(const char *mode, const char *nic, int local_rank,
			     struct weft_err *err)
{
	enum bind_mode m = BIND_NONE;
	weft_status_t st = parse_mode(mode, &m, err);
	if (st != WEFT_SUCCESS || m == BIND_NONE)
		return st;
	hwloc_topology_t t;
	st = topo_load(&t, NULL, err);
	if (st != WEFT_SUCCESS || !t)
		return st;
	hwloc_bitmap_t set = hwloc_bitmap_alloc();
	if (!set) {
		st = weft_err_set(err, WEFT_ERR_NO_MEMORY, "hwloc_bitmap_alloc");
	} else if (bind_set(t, m, nic, local_rank, set)) {
		char list[256];
		hwloc_bitmap_list_snprintf(list, sizeof(list), set);
		if (hwloc_set_cpubind(t, set, 0) != 0)
			st = weft_err_errno(err, errno, "WEFT_BIND=%s: cannot bind to CPUs %s",
					    mode, list);
		else
			weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
				 "WEFT_BIND=%s: bound to CPUs %s near NIC %s (local rank %d)", mode,
				 list, nic, local_rank);
	}
	hwloc_bitmap_free(set);
	topo_done(t, NULL);
	return st;
}
