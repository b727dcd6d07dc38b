/*
 * topo_slurm.c — the leaf and spine that Slurm's topology/tree plugin hands
 * every task of a step:
 *
 *     SLURM_TOPOLOGY_ADDR=spine.leaf1.h1
 *     SLURM_TOPOLOGY_ADDR_PATTERN=switch.switch.node
 *
 * The address lists the switches from the top of the tree down to the node,
 * named as topology.conf names them (SwitchName=), one "switch" in the
 * pattern for each. The leaf is the switch just above the node and the
 * spine the one above that; on deeper trees the levels further up are not
 * used (the graph knows leaves and spines). Under topology/none the address
 * is the node's name and the pattern "node": nothing is learned.
 *
 * The pattern says how many switches there are, so a node name with dots in
 * it (an FQDN) still parses: the switches are the first fields of the
 * address and the node is the rest. A switch name with a dot in it cannot
 * be told apart from two switches; such an address is refused (INFO line).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"
#include "util/log.h"
#include "util/settings.h"

#define SLURM_MAX_LEVELS 16

/* Count the leading "switch" fields of @p pattern, which must end with one
 * "node" field; -1 if it does not look like that. */
static int switch_levels(const char *pattern)
{
	int n = 0;
	const char *p = pattern;
	for (;;) {
		if (strncmp(p, "switch.", 7) == 0) {
			p += 7;
			n++;
		} else if (strcmp(p, "node") == 0) {
			return n;
		} else {
			return -1;
		}
	}
}

/* The @p i-th '.'-separated field of @p addr (0-based) into @p out; false
 * if there is none, it is empty or it does not fit. */
static bool field(const char *addr, int i, char *out, size_t len)
{
	const char *start = addr;
	for (int k = 0; k < i; k++) {
		start = strchr(start, '.');
		if (!start)
			return false;
		start++;
	}
	size_t n = strcspn(start, ".");
	if (n == 0 || n >= len)
		return false;
	memcpy(out, start, n);
	out[n] = '\0';
	return true;
}

static int count_dots(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '.';
	return n;
}

bool weft_topo_slurm_lookup(char *leaf, size_t leaf_len, char *spine, size_t spine_len)
{
	const char *addr = getenv("SLURM_TOPOLOGY_ADDR");
	const char *pattern = getenv("SLURM_TOPOLOGY_ADDR_PATTERN");
	const char *enabled = weft_setting_str("WEFT_TOPO_SLURM");
	leaf[0] = spine[0] = '\0';
	if (!addr || !pattern)
		return false;
	if (enabled && strcmp(enabled, "0") == 0) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO, "Slurm topology: off (WEFT_TOPO_SLURM=0)");
		return false;
	}
	int levels = switch_levels(pattern);
	if (levels < 0 || levels > SLURM_MAX_LEVELS || count_dots(addr) < levels) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "Slurm topology: SLURM_TOPOLOGY_ADDR=%s with pattern %s is not "
			 "switch...node: leaf unknown",
			 addr, pattern);
		return false;
	}
	if (levels == 0) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "Slurm topology: node %s is under no switch (topology/none, or not in "
			 "topology.conf): leaf unknown",
			 addr);
		return false;
	}
	if (!field(addr, levels - 1, leaf, leaf_len) ||
	    (levels >= 2 && !field(addr, levels - 2, spine, spine_len))) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "Slurm topology: SLURM_TOPOLOGY_ADDR=%s has an empty or over-long switch "
			 "name: leaf unknown",
			 addr);
		leaf[0] = spine[0] = '\0';
		return false;
	}
	weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
		 "Slurm topology: SLURM_TOPOLOGY_ADDR=%s: leaf '%s', spine '%s'", addr, leaf,
		 spine[0] ? spine : "(none)");
	return true;
}
