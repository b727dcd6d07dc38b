/* topo_local.c — gather this rank's topology card at init: its NIC, hwloc
 * facts, and what each leaf source says (LLDP, WEFT_TOPO_FILE, Slurm's
 * SLURM_TOPOLOGY_ADDR); the best of them is the card's leaf (topo_source.c). */
#include <stdio.h>
#include <string.h>

#include "topo/topo.h"
#include "topo/topo_local.h"
#include "util/log.h"
#include "util/settings.h"

static void leaf_from_file(struct weft_topo_card *card, const char *hostname,
			   const struct weft_topo_file *file)
{
	if (!weft_topo_file_lookup(file, hostname, card->file_leaf, sizeof(card->file_leaf),
				   card->file_spine, sizeof(card->file_spine))) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO, "%s does not name host %s",
			 weft_setting_str("WEFT_TOPO_FILE"), hostname);
		card->file_leaf[0] = card->file_spine[0] = '\0';
	}
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
	if (path) {
		struct weft_topo_file *file;
		st = weft_topo_file_load(path, &file, err);
		if (st != WEFT_SUCCESS)
			return st;
		/* WEFT_HOSTID names the host when set (namespaces as hosts). */
		const char *key = weft_setting_str("WEFT_HOSTID");
		leaf_from_file(card, key ? key : hostname, file);
		weft_topo_file_free(file);
	}
	weft_topo_slurm_lookup(card->slurm_leaf, sizeof(card->slurm_leaf), card->slurm_spine,
			       sizeof(card->slurm_spine));
	weft_topo_card_choose(card);
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
	case WEFT_LEAF_SLURM: return "slurm";
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
	card->file_leaf[sizeof(card->file_leaf) - 1] = '\0';
	card->file_spine[sizeof(card->file_spine) - 1] = '\0';
	card->slurm_leaf[sizeof(card->slurm_leaf) - 1] = '\0';
	card->slurm_spine[sizeof(card->slurm_spine) - 1] = '\0';
}
