/*
 * topo_source.c — which source a rank's leaf comes from when several know
 * it (the order and its reasons are in topo.h, enum weft_leaf_source), and
 * the job-wide agreement on one source once every card is known.
 *
 * A rank first picks the best source it knows (weft_topo_card_choose), so a
 * card is useful on its own (weft-topo on one host, a job of one rank). The
 * job then looks at all cards: if they chose differently, every rank
 * switches to the best source that every card knows, because leaves named
 * by different sources never match — lldpd on some hosts only would
 * otherwise split each switch into an LLDP leaf and a Slurm leaf. Every rank
 * holds the same cards and runs the same rule, so they all agree without
 * another message.
 */
#include <stdio.h>
#include <string.h>

#include "topo/topo.h"
#include "topo/topo_local.h"
#include "util/log.h"

#define SOURCES (WEFT_LEAF_SLURM + 1)

/* The leaf and spine a configured source put on the card, or NULL. */
static const char *alt_leaf(const struct weft_topo_card *c, int source, const char **spine)
{
	switch (source) {
	case WEFT_LEAF_FILE: *spine = c->file_spine; return c->file_leaf;
	case WEFT_LEAF_SLURM: *spine = c->slurm_spine; return c->slurm_leaf;
	default: *spine = NULL; return NULL;
	}
}

static bool knows(const struct weft_topo_card *c, int source)
{
	const char *spine;
	const char *leaf = alt_leaf(c, source, &spine);
	if (source == WEFT_LEAF_LLDP)
		return c->leaf_source == WEFT_LEAF_LLDP;
	return leaf && leaf[0];
}

/* Make @p source the card's leaf. LLDP's own fields are not kept beside
 * the winner's, so a card can only move from LLDP to a configured source,
 * never back; the order makes that the only move ever needed. */
static void use_source(struct weft_topo_card *c, int source)
{
	const char *spine;
	const char *leaf = alt_leaf(c, source, &spine);
	if (!leaf || c->leaf_source == source)
		return;
	/* Field by field: the sources are members of the same card. */
	snprintf(c->leaf_id, sizeof(c->leaf_id), "%.*s", WEFT_TOPO_NAME_BYTES - 1, leaf);
	snprintf(c->leaf_name, sizeof(c->leaf_name), "%.*s", WEFT_TOPO_NAME_BYTES - 1, leaf);
	snprintf(c->spine, sizeof(c->spine), "%.*s", WEFT_TOPO_NAME_BYTES - 1, spine);
	c->leaf_port[0] = '\0';
	c->leaf_source = source;
}

/* LLDP names the leaf but knows nothing above it: take the spine from a
 * configured source that names the same switch (by name, so only where the
 * cluster's names are the switches' own). */
static void spine_for_lldp(struct weft_topo_card *c)
{
	for (int s = WEFT_LEAF_FILE; s < SOURCES && !c->spine[0]; s++) {
		const char *spine;
		const char *leaf = alt_leaf(c, s, &spine);
		if (!spine[0] || strncmp(leaf, c->leaf_name, WEFT_TOPO_NAME_BYTES) != 0)
			continue;
		snprintf(c->spine, sizeof(c->spine), "%.*s", WEFT_TOPO_NAME_BYTES - 1, spine);
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "spine '%s' from %s, which names LLDP's leaf '%s' too", c->spine,
			 weft_topo_leaf_source_name(s), c->leaf_name);
	}
}

void weft_topo_card_choose(struct weft_topo_card *c)
{
	int best = c->leaf_source == WEFT_LEAF_LLDP ? WEFT_LEAF_LLDP : WEFT_LEAF_NONE;
	char also[3 * (WEFT_TOPO_NAME_BYTES + 16)] = "";
	for (int s = WEFT_LEAF_FILE; s < SOURCES; s++) {
		const char *spine;
		const char *leaf = alt_leaf(c, s, &spine);
		if (!leaf[0])
			continue;
		if (best == WEFT_LEAF_NONE) {
			best = s;
			use_source(c, s);
			continue;
		}
		size_t n = strlen(also);
		snprintf(also + n, sizeof(also) - n, ", %s '%s'", weft_topo_leaf_source_name(s),
			 leaf);
	}
	if (best == WEFT_LEAF_LLDP)
		spine_for_lldp(c);
	if (also[0])
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "leaf sources: %s '%s'%s: %s wins (order: lldp, file, slurm: what is "
			 "on the wire beats what is written down, and the user's WEFT_TOPO_FILE "
			 "beats the cluster's topology)",
			 weft_topo_leaf_source_name(c->leaf_source), c->leaf_name, also,
			 weft_topo_leaf_source_name(c->leaf_source));
}

int weft_topo_cards_agree(struct weft_topo_card *const *cards, int n)
{
	int chose[SOURCES] = {0}, known[SOURCES] = {0};
	for (int r = 0; r < n; r++) {
		chose[cards[r]->leaf_source]++;
		for (int s = WEFT_LEAF_LLDP; s < SOURCES; s++)
			known[s] += knows(cards[r], s);
	}
	for (int s = 0; s < SOURCES; s++)
		if (chose[s] == n)
			return s; /* one choice already */
	int common = -1;
	for (int s = WEFT_LEAF_LLDP; s < SOURCES && common < 0; s++)
		if (known[s] == n)
			common = s;
	char tally[128] = "";
	for (int s = 0; s < SOURCES; s++) {
		size_t len = strlen(tally);
		if (chose[s])
			snprintf(tally + len, sizeof(tally) - len, "%s%s on %d", len ? ", " : "",
				 weft_topo_leaf_source_name(s), chose[s]);
	}
	if (common < 0) {
		weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
			 "leaf sources differ across the %d ranks (%s) and none is known on "
			 "every rank: each keeps its own, and leaves named by different sources "
			 "count as different leaves",
			 n, tally);
		return -1;
	}
	for (int r = 0; r < n; r++)
		use_source(cards[r], common);
	weft_log(WEFT_LOG_INFO, WEFT_SUB_TOPO,
		 "leaf sources differ across the %d ranks (%s): every rank uses %s, the best "
		 "source known on every rank, since leaves named by different sources never "
		 "match",
		 n, tally, weft_topo_leaf_source_name(common));
	return common;
}
