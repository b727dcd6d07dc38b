/*
 * verbs_select.h — which device, port and GID a rank uses: WEFT_IB_HCA,
 * the NIC nearest the rank, and the RoCE GID table in sysfs. Pure
 * functions over a sysfs tree given by its root ("/sys", or a fixture in
 * tests), so every rule here is tested without RDMA hardware.
 *
 * WEFT_IB_HCA, as NCCL_IB_HCA reads: a comma-separated list of device
 * names, each with an optional ":port" ("mlx5_0:1,mlx5_1"); the ports
 * listed are the ones to use. A leading '^' turns the list into ports to
 * avoid ("^mlx5_2"). Names match as prefixes ("mlx5" is every mlx5_N)
 * unless '=' follows the optional '^' ("=mlx5_1", "^=mlx5_1"). Empty
 * items are skipped (util/parse.h), but a list must name a device.
 *
 * Port: among the ACTIVE ports WEFT_IB_HCA admits (an InfiniBand port also
 * needs a LID), the one whose network interface is the NIC nearest this
 * rank's cores (the topology's choice); if none is, the local ranks of a
 * host are spread over the candidates in order (local rank modulo count).
 *
 * GID (RoCE): from ports/<p>/gids/<i>, gid_attrs/types/<i> ("RoCE v2" or
 * "IB/RoCE v1") and gid_attrs/ndevs/<i>, the entry that ranks highest by,
 * in this order: it belongs to the interface Weft uses (a VLAN has its
 * own); RoCE v2 (routable: UDP/IP, ECN-marked by the fabric); it is the
 * IPv4-mapped form (::ffff:a.b.c.d) of that interface's address; it is
 * IPv4-mapped at all; it is not link-local; then the lowest index. Empty
 * entries (all zero) and entries whose type cannot be read are skipped.
 * WEFT_IB_GID_INDEX forces an index, which must hold a GID. InfiniBand
 * ports are addressed by LID and use index 0 unless forced.
 */
#ifndef WEFT_VERBS_SELECT_H
#define WEFT_VERBS_SELECT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weft.h"

#define WEFT_VERBS_NAME_BYTES 64
#define WEFT_VERBS_HCA_MAX    32
#define WEFT_VERBS_NETDEVS    4

struct weft_verbs_hca_entry {
	char name[WEFT_VERBS_NAME_BYTES];
	int port; /* 0: any */
};

struct weft_verbs_hca_filter {
	bool exclude; /* '^' */
	bool exact;   /* '=' */
	int n;	      /* 0: no filter, every port */
	struct weft_verbs_hca_entry e[WEFT_VERBS_HCA_MAX];
};

/* Parse @p spec (NULL or "": no filter). WEFT_ERR_INVALID_ARG with the
 * reason in @p why ("WEFT_IB_HCA=...: ...") for an entry without a name,
 * a bad port, a long name, too many entries, or no entry at all. */
weft_status_t weft_verbs_hca_parse(const char *spec, struct weft_verbs_hca_filter *f, char *why,
				   size_t len);

/* Does @p f admit port @p port of device @p dev? */
bool weft_verbs_hca_match(const struct weft_verbs_hca_filter *f, const char *dev, int port);

enum weft_verbs_link {
	WEFT_VERBS_LINK_UNKNOWN = 0,
	WEFT_VERBS_LINK_IB,
	WEFT_VERBS_LINK_ETH,
};

struct weft_verbs_port {
	char dev[WEFT_VERBS_NAME_BYTES];
	int port;
	bool active;
	enum weft_verbs_link link;
	uint16_t lid;
	int numa; /* -1 unknown */
	int nnetdevs;
	char netdevs[WEFT_VERBS_NETDEVS][WEFT_VERBS_NAME_BYTES];
};

/* Fill @p out for (dev, port) from the sysfs tree at @p root: the network
 * interfaces (the ports' GID ndevs, else the device's net/ entries) and
 * the NUMA node always; state, link layer and LID too when @p all (the
 * transport takes those from the verbs instead). False if the port does
 * not exist there. */
bool weft_verbs_sysfs_port(const char *root, const char *dev, int port, bool all,
			   struct weft_verbs_port *out);

/* The index in @p ports (n of them) this rank uses, or -1 with the reason
 * (every port seen and why it was passed over) in @p why. @p nic: the
 * interface nearest the rank ("" or NULL unknown). */
int weft_verbs_pick_port(const struct weft_verbs_port *ports, int n,
			 const struct weft_verbs_hca_filter *f, const char *nic, int local_rank,
			 char *why, size_t len);

enum weft_verbs_gid_type {
	WEFT_VERBS_GID_UNKNOWN = 0,
	WEFT_VERBS_GID_V1, /* InfiniBand, or RoCE v1 */
	WEFT_VERBS_GID_V2,
};

struct weft_verbs_gid {
	int index;
	enum weft_verbs_gid_type type;
	uint8_t raw[16];
	char netdev[WEFT_VERBS_NAME_BYTES]; /* "" unknown */
};

/* The GID of (dev, port) from the sysfs tree at @p root, by the rules
 * above. @p netdev: the interface Weft uses (NULL or "" unknown); @p addr:
 * its IPv4 address (NULL unknown); @p forced: WEFT_IB_GID_INDEX, or -1.
 * @p ib: the port is InfiniBand. WEFT_ERR_INVALID_ARG (a forced index with
 * no GID) or WEFT_ERR_NOT_SUPPORTED (no usable entry) with @p why. */
weft_status_t weft_verbs_pick_gid(const char *root, const char *dev, int port, bool ib,
				  const char *netdev, const struct in_addr *addr, long forced,
				  struct weft_verbs_gid *out, char *why, size_t len);

/* "RoCE v2", "RoCE v1" / "IB", "?" */
const char *weft_verbs_gid_type_name(enum weft_verbs_gid_type t, bool ib);

/* A GID as text: "::ffff:192.168.10.1" for the IPv4-mapped, else the
 * eight groups. @p buf needs 48 bytes. */
const char *weft_verbs_gid_str(const uint8_t raw[16], char *buf, size_t len);

#endif
