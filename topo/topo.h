/*
 * topo.h — what Weft knows of where ranks sit: NUMA node and NIC inside a
 * host (hwloc), the leaf switch above each host (LLDP, or a topology file),
 * and the graph built from every rank's card at communicator init.
 */
#ifndef WEFT_TOPO_H
#define WEFT_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define WEFT_TOPO_NAME_BYTES 64

/*
 * Where a rank's leaf (and spine) comes from, best first; the value is the
 * rank in that order. When several sources know the leaf, the first wins:
 *   1. LLDP: what the NIC's cable is plugged into, seen on the wire now.
 *      Files and Slurm's topology.conf are written by people and go stale
 *      when a node is recabled.
 *   2. WEFT_TOPO_FILE: the user named it for this job, so it overrides the
 *      cluster's own configuration (under Slurm the usual reason to set it
 *      is that Slurm's tree is coarser than the fabric, or wrong).
 *   3. Slurm: SLURM_TOPOLOGY_ADDR, the cluster's topology.conf as the
 *      scheduler sees it, handed to every task of a step unasked.
 * A job then agrees on one source (weft_topo_cards_agree): names from
 * different sources never compare equal (LLDP keys on the chassis id), so a
 * job whose hosts used different sources would count one switch as two
 * leaves.
 */
enum weft_leaf_source {
	WEFT_LEAF_NONE = 0, /* unknown: every host counts as its own leaf */
	WEFT_LEAF_LLDP,	    /* learned from the local lldpd */
	WEFT_LEAF_FILE,	    /* from WEFT_TOPO_FILE */
	WEFT_LEAF_SLURM,    /* from SLURM_TOPOLOGY_ADDR (topology/tree) */
};

/* One rank's topology facts; part of its card, so plain fixed-size bytes. */
struct weft_topo_card {
	char nic[WEFT_TOPO_NAME_BYTES];	      /* interface this rank uses, "" unknown */
	char leaf_id[WEFT_TOPO_NAME_BYTES];   /* leaf chassis id (e.g. its MAC), "" unknown */
	char leaf_name[WEFT_TOPO_NAME_BYTES]; /* leaf system name, e.g. "leaf1" */
	char leaf_port[WEFT_TOPO_NAME_BYTES]; /* the leaf's port facing this NIC */
	char spine[WEFT_TOPO_NAME_BYTES];     /* parent switch from a file or Slurm, "" unknown */
	/* What the configured sources say, whichever won above, so that the
	 * ranks of a job can agree on one source. "" where it says nothing. */
	char file_leaf[WEFT_TOPO_NAME_BYTES];
	char file_spine[WEFT_TOPO_NAME_BYTES];
	char slurm_leaf[WEFT_TOPO_NAME_BYTES];
	char slurm_spine[WEFT_TOPO_NAME_BYTES];
	int32_t numa;	     /* NUMA node of this rank's cores, -1 unknown */
	int32_t nic_numa;    /* NUMA node of the NIC, -1 unknown */
	int32_t leaf_source; /* enum weft_leaf_source */
	int32_t cores;	     /* cores on the host */
	int32_t numa_nodes;  /* NUMA nodes on the host */
	int32_t packages;    /* sockets on the host */
	int64_t llc_bytes;   /* the host's last-level caches, every instance summed; 0 unknown */
};

enum weft_link_class {
	WEFT_LINK_SELF = 0,
	WEFT_LINK_NUMA,	 /* same NUMA node */
	WEFT_LINK_HOST,	 /* same host, different NUMA nodes */
	WEFT_LINK_LEAF,	 /* different hosts under one leaf */
	WEFT_LINK_SPINE, /* different leaves: crosses the spine */
	WEFT_LINK_CLASS_COUNT
};

/* Input to the graph: per rank, its host identity and its topology card. */
struct weft_topo_rank {
	const char *host_id;  /* ranks with equal host ids share a host */
	const char *hostname; /* for files and display */
	const struct weft_topo_card *card;
};

/*
 * Ranks -> NUMA -> hosts -> leaves -> spines. Indices, not pointers: cheap
 * to copy. A leaf's spine is the one named by its lowest rank that names
 * one (from a topology file's Switches= parent); spines are numbered by the
 * first rank under them. With no spine known, nspines is 0 and every
 * leaf_spine[] is -1.
 */
struct weft_topo_graph {
	int nranks;
	int nhosts;
	int nleaves;
	int nspines;
	int *host_of;	  /* [rank] host index, hosts numbered by first rank */
	int *leaf_of;	  /* [rank] leaf index, leaves numbered by first rank */
	int *numa_of;	  /* [rank] NUMA node, -1 unknown */
	int *host_leader; /* [host] lowest rank on the host */
	int *leaf_leader; /* [leaf] lowest rank under the leaf */
	char (*leaf_name)[WEFT_TOPO_NAME_BYTES];  /* [leaf] display name */
	int *leaf_source;			  /* [leaf] enum weft_leaf_source */
	int *leaf_spine;			  /* [leaf] spine index, -1 unknown */
	char (*spine_name)[WEFT_TOPO_NAME_BYTES]; /* [spine] */
};

/* Build @p g from @p nranks rank entries. Fails with WEFT_ERR_INVALID_ARG
 * (no ranks, a rank without host id or card) or WEFT_ERR_NO_MEMORY; after a
 * failure @p g holds nothing and may be passed to weft_topo_graph_free(). */
weft_status_t weft_topo_graph_build(struct weft_topo_graph *g, int nranks,
				    const struct weft_topo_rank *ranks, struct weft_err *err);
/* Release what the build allocated and zero @p g; harmless twice. */
void weft_topo_graph_free(struct weft_topo_graph *g);

enum weft_link_class weft_topo_link(const struct weft_topo_graph *g, int a, int b);
const char *weft_topo_link_name(enum weft_link_class c);

/*
 * Placement: a ring order (order[pos] = rank) that visits every rank of a
 * host, then every host of a leaf, then every leaf of a spine, before it
 * moves on, so the ring leaves a leaf once per leaf and crosses the top
 * layer once per spine whatever the rank numbers. Spines go in the order of
 * their first rank; leaves of unknown spine come after them, in leaf order.
 * Inside a host, ranks go by NUMA node, then rank. With @p by_rank
 * (WEFT_PLACEMENT=rank) the order is plain rank order.
 */
void weft_topo_ring_order(const struct weft_topo_graph *g, bool by_rank, int *order);

/* How many ring edges (including the closing one) join different leaves. */
int weft_topo_ring_crossings(const struct weft_topo_graph *g, const int *order);

/* How many ring edges (including the closing one) join leaves of different
 * spines: two known, different spines, or a known spine and an unknown one.
 * Edges between two leaves of unknown spine are not counted. */
int weft_topo_ring_spine_crossings(const struct weft_topo_graph *g, const int *order);

/*
 * Ordered pairs (a, b) of ranks per link class, self pairs included (n of
 * them), as weft_topo_link() classes them: the counts sum to n^2. From the
 * graph's groups in O(n log n), never pair by pair (topo_classes.c).
 * WEFT_ERR_NO_MEMORY leaves every count 0.
 */
weft_status_t weft_topo_class_pairs(const struct weft_topo_graph *g,
				    uint64_t pairs[WEFT_LINK_CLASS_COUNT]);

/* ---- Local facts, gathered once per rank at init (each never fails the
 * job for lack of information: unknown stays unknown, with an INFO line). */

/* hwloc: fill numa, nic_numa, cores, numa_nodes, packages, llc_bytes for this process
 * (its current CPU binding) and NIC @p nic. @p xml_path: load that hwloc XML
 * instead of this machine (tests). */
weft_status_t weft_topo_hwloc_fill(struct weft_topo_card *card, const char *nic,
				   const char *xml_path, struct weft_err *err);

/* The NIC a rank should use when WEFT_SOCKET_IFNAME is unset: the up,
 * non-loopback network interface nearest (by NUMA) to this process's cores;
 * "" if none. */
weft_status_t weft_topo_pick_nic(char *nic, size_t len, const char *xml_path, struct weft_err *err);

/* WEFT_BIND=none|numa|core: bind this process near its NIC (numa: the NIC's
 * NUMA node; core: one core of it, by local rank). */
weft_status_t weft_topo_bind(const char *mode, const char *nic, int local_rank,
			     struct weft_err *err);

/* LLDP: ask the local lldpd (socket @p socket_path, NULL: lldpd's default)
 * for the neighbour on @p nic; fill leaf_id, leaf_name, leaf_port and set
 * leaf_source to WEFT_LEAF_LLDP. No lldpd or no neighbour: WEFT_SUCCESS,
 * card unchanged, one INFO line. */
weft_status_t weft_topo_lldp_fill(struct weft_topo_card *card, const char *nic,
				  const char *socket_path, struct weft_err *err);

/* Slurm: the leaf and spine from SLURM_TOPOLOGY_ADDR and its pattern (see
 * topo_slurm.c); false (both "") when they are unset, say no switch, or
 * WEFT_TOPO_SLURM=0. */
bool weft_topo_slurm_lookup(char *leaf, size_t leaf_len, char *spine, size_t spine_len);

/*
 * Once every rank's card is known: make the job use one leaf source, the
 * best that every card knows, where the cards' own choices differ (rewriting
 * the leaf fields of the cards that chose another). Where no source is known
 * on every card, each keeps its own. Returns the source every card now
 * uses, or -1 when they still differ; one INFO line says what was decided.
 */
int weft_topo_cards_agree(struct weft_topo_card *const *cards, int n);

/* ---- Topology files (WEFT_TOPO_FILE): Slurm topology.conf or Weft's JSON. */
struct weft_topo_file;

/* Load either format (JSON if the first non-blank character is '{'). A bad
 * line gives WEFT_ERR_INVALID_ARG naming the file and line. */
weft_status_t weft_topo_file_load(const char *path, struct weft_topo_file **out,
				  struct weft_err *err);

/* The same from @p len bytes of @p text already read, with a NUL after
 * them (@p path names it in messages): what tests/fuzz/ drives. */
weft_status_t weft_topo_file_parse(const char *path, const char *text, size_t len,
				   struct weft_topo_file **out, struct weft_err *err);

/* Leaf switch of @p hostname, and the switch above that leaf ("" if none).
 * False if the file does not name the host. */
bool weft_topo_file_lookup(const struct weft_topo_file *f, const char *hostname, char *leaf,
			   size_t leaf_len, char *spine, size_t spine_len);

/* How many hosts the file names, and host @p i of them (0 <= i < count, in
 * strcmp order of their names): its name, leaf and spine ("" if none), as
 * pointers into @p f, valid until weft_topo_file_free(). For weft-topo
 * --model, which places a job on every host of a file. */
size_t weft_topo_file_count(const struct weft_topo_file *f);
void weft_topo_file_host(const struct weft_topo_file *f, size_t i, const char **name,
			 const char **leaf, const char **spine);

void weft_topo_file_free(struct weft_topo_file *f);

#endif
