/* topo_local.c — gather this rank's topology card at init: its NIC, hwloc
 * facts, the leaf from LLDP, else from WEFT_TOPO_FILE. */
#include <stdio.h>
#include <string.h>

#include "topo/topo.h"
#include "topo/topo_local.h"
#include "util/log.h"
#include "util/settings.h"

static void leaf_from_file(struct weft_topo_card *card, const char *hostname,
			   const struct weft_topo_file *file)
{
	char leaf[WEFT_TOPO_NAME_BYTES], spine[WEFT_TOPO_NAME_BYTES];
	if (!weft_topo_file_lookup(file, hostname, leaf, sizeof(leaf), spine, sizeof(spine))) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO, "%s does not name host %s",
			 weft_setting_str("WEFT_TOPO_FILE"), hostname);
		return;
	}
	snprintf(card->leaf_id, sizeof(card->leaf_id), "%s", leaf);
	snprintf(card->leaf_name, sizeof(card->leaf_name), "%s", leaf);
	snprintf(card->spine, sizeof(card->spine), "%s", spine);
	card->leaf_source = WEFT_LEAF_FILE;
}

weft_status_t weft_topo_local_card(struct weft_topo_card *card, const char *hostname,
				   struct weft_err *err)
{
	memset(card, 0, sizeof(*card));
	card->numa = card->nic_numa = -1;
	const char *ifname = weft_setting_str("WEFT_SOCKET_IFNAME");
	weft_status_t st;
	if (ifname)
		snprintf(card->nic, sizeof(card->nic), "%s", ifname);
	else if ((st = weft_topo_pick_nic(card->nic, sizeof(card->nic), NULL, err)) != WEFT_SUCCESS)
		return st;
	st = weft_topo_hwloc_fill(card, card->nic, NULL, err);
	if (st != WEFT_SUCCESS)
		return st;
	if (card->nic[0]) {
		st =
		    weft_topo_lldp_fill(card, card->nic, weft_setting_str("WEFT_LLDP_SOCKET"), err);
		if (st != WEFT_SUCCESS)
			return st;
	}
	const char *path = weft_setting_str("WEFT_TOPO_FILE");
	if (card->leaf_source == WEFT_LEAF_NONE && path) {
		struct weft_topo_file *file;
		st = weft_topo_file_load(path, &file, err);
		if (st != WEFT_SUCCESS)
			return st;
		/* WEFT_HOSTID names the host when set (namespaces as hosts). */
		const char *key = weft_setting_str("WEFT_HOSTID");
		leaf_from_file(card, key ? key : hostname, file);
		weft_topo_file_free(file);
	}
	weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO, "nic '%s' (numa %d), rank numa %d, leaf '%s' (%s)",
		 card->nic, card->nic_numa, card->numa, card->leaf_name,
		 weft_topo_leaf_source_name(card->leaf_source));
	return WEFT_SUCCESS;
}

const char *weft_topo_leaf_source_name(int source)
{
	switch (source) {
	case WEFT_LEAF_LLDP: return "lldp";
	case WEFT_LEAF_FILE: return "file";
	default: return "none";
	}
}

void weft_topo_card_terminate(struct weft_topo_card *card)
{
	card->nic[sizeof(card->nic) - 1] = '\0';
	card->leaf_id[sizeof(card->leaf_id) - 1] = '\0';
	card->leaf_name[sizeof(card->leaf_name) - 1] = '\0';
	card->leaf_port[sizeof(card->leaf_port) - 1] = '\0';
	card->spine[sizeof(card->spine) - 1] = '\0';
}
