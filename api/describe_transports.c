/*
 * describe_transports.c — the self-description's "transports": for each
 * link class present in the job, how many (from, to) pairs each transport
 * serves, from every rank's own choice.
 *
 * A pair table would be n^2; each rank instead counts its peers per (link
 * class, transport name) into a small fixed record, the records are
 * allgathered, and every rank merges them. Names rather than indices cross
 * the wire: only weft_comm_peer_transport() is asked, so a new transport
 * shows up here with no line in this file. The same records carry how many
 * peers each rank is connected to (WEFT_CONNECT=lazy connects only those
 * its algorithms used), and what keeping their paths has done (the socket
 * transport's failover: core/stats.h weft_stats_paths_sum), summed over
 * the job, for "connections". The records cost sizeof(struct tp_record)
 * (344 bytes) per rank on every rank.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/describe.h"
#include "core/comm.h"
#include "core/fail.h"
#include "core/stats.h"
#include "topo/topo.h"
#include "transports/transport.h"

#define TP_SLOTS      8 /* distinct transport names one rank may report */
#define TP_NAME_BYTES 16

/* One rank's view: what crosses the wire. */
struct tp_record {
	char name[TP_SLOTS][TP_NAME_BYTES]; /* "" unused */
	uint32_t count[WEFT_LINK_CLASS_COUNT][TP_SLOTS];
	uint32_t connected;			/* peers whose connection is up */
	uint32_t dark;				/* sub-flows dark now */
	uint64_t paths[WEFT_TP_PATH_NCOUNTERS]; /* WEFT_TP_PATH_COUNTERS' order */
};

_Static_assert(sizeof(struct tp_record) == 344, "the comment above says 344 bytes");

/* The job's: pairs are up to n^2, beyond 32 bits from 65,536 ranks. */
struct tp_sum {
	char name[TP_SLOTS][TP_NAME_BYTES];
	uint64_t count[WEFT_LINK_CLASS_COUNT][TP_SLOTS];
};

/* The slot for @p name in @p names, taking a free one; the last slot takes
 * whatever does not fit (never seen: a build has a handful of transports). */
static int slot_of(char (*names)[TP_NAME_BYTES], const char *name)
{
	for (int i = 0; i < TP_SLOTS; i++) {
		if (!names[i][0])
			snprintf(names[i], TP_NAME_BYTES, "%s", i + 1 < TP_SLOTS ? name : "other");
		if (strncmp(names[i], name, TP_NAME_BYTES - 1) == 0 || i + 1 == TP_SLOTS)
			return i;
	}
	return TP_SLOTS - 1;
}

static void count_mine(struct weft_comm *comm, struct tp_record *rec)
{
	memset(rec, 0, sizeof(*rec));
	for (int peer = 0; peer < comm->nranks; peer++) {
		enum weft_link_class c = weft_topo_link(&comm->graph, comm->rank, peer);
		rec->count[c][slot_of(rec->name, weft_comm_peer_transport(comm, peer))]++;
	}
	rec->connected = (uint32_t)comm->nconnected;
	struct weft_tp_paths p;
	weft_stats_paths_sum(comm, &p);
#define VALUE(f) p.f,
	const uint64_t v[] = {WEFT_TP_PATH_COUNTERS(VALUE)};
#undef VALUE
	_Static_assert(sizeof(v) == sizeof(rec->paths), "one slot per counter");
	memcpy(rec->paths, v, sizeof(v));
	rec->dark = p.dark;
}

/* "paths": the job's failovers and the rest summed over every rank's
 * connections, sub-flows dark now, and how many ranks failed over. */
static json_t *paths(const struct weft_comm *comm, const struct tp_record *all)
{
#define NAME(f) #f,
	static const char *const names[] = {WEFT_TP_PATH_COUNTERS(NAME)};
#undef NAME
	enum { N = WEFT_TP_PATH_NCOUNTERS };
	_Static_assert(sizeof(names) / sizeof(names[0]) == N, "one name per counter");
	uint64_t sum[N] = {0}, dark = 0, ranks = 0;
	for (int r = 0; r < comm->nranks; r++) {
		for (int k = 0; k < N; k++)
			sum[k] += all[r].paths[k];
		dark += all[r].dark;
		ranks += all[r].paths[0] > 0;
	}
	json_t *o = json_pack("{s:I, s:I}", "dark", (json_int_t)dark, "ranks_failed_over",
			      (json_int_t)ranks);
	int bad = !o;
	for (int k = 0; k < N && !bad; k++)
		bad |= json_object_set_new(o, names[k], json_integer((json_int_t)sum[k]));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* "connections": the mode and the peers each rank was connected to when
 * the description started (before its own allgather connected more). */
static json_t *connections(const struct weft_comm *comm, const struct tp_record *all)
{
	uint32_t lo = UINT32_MAX, hi = 0;
	uint64_t total = 0;
	for (int r = 0; r < comm->nranks; r++) {
		lo = all[r].connected < lo ? all[r].connected : lo;
		hi = all[r].connected > hi ? all[r].connected : hi;
		total += all[r].connected;
	}
	return json_pack("{s:s, s:{s:I, s:I, s:I}, s:o}", "mode", weft_comm_connect_mode_name(comm),
			 "connected_peers", "min", (json_int_t)lo, "max", (json_int_t)hi, "total",
			 (json_int_t)total, "paths", paths(comm, all));
}

/* Every rank's records merged into @p sum (its own name table). */
static void merge(const struct tp_record *all, int n, struct tp_sum *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (int r = 0; r < n; r++) {
		for (int i = 0; i < TP_SLOTS && all[r].name[i][0]; i++) {
			char name[TP_NAME_BYTES];
			snprintf(name, sizeof(name), "%.*s", TP_NAME_BYTES - 1, all[r].name[i]);
			int s = slot_of(sum->name, name);
			for (int c = 0; c < WEFT_LINK_CLASS_COUNT; c++)
				sum->count[c][s] += all[r].count[c][i];
		}
	}
}

static json_t *class_entry(const struct tp_sum *sum, enum weft_link_class c)
{
	json_t *by = json_object();
	int bad = 0;
	uint64_t pairs = 0;

	for (int i = 0; i < TP_SLOTS && sum->name[i][0]; i++) {
		if (!sum->count[c][i])
			continue;
		pairs += sum->count[c][i];
		bad |= json_object_set_new(by, sum->name[i],
					   json_integer((json_int_t)sum->count[c][i]));
	}
	if (bad) {
		json_decref(by);
		return NULL;
	}
	return json_pack("{s:s, s:I, s:o}", "link", weft_topo_link_name(c), "pairs",
			 (json_int_t)pairs, "by_transport", by);
}

weft_status_t weft_describe_transports(struct weft_comm *comm, json_t **out, json_t **conns)
{
	int n = comm->nranks;
	struct tp_record *all = calloc((size_t)n, sizeof(*all));
	struct tp_sum sum;

	*out = NULL;
	*conns = NULL;
	if (!all)
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "weft_comm_describe: no memory");
	count_mine(comm, &all[comm->rank]);
	weft_status_t st = weft_allgather(WEFT_IN_PLACE, all, sizeof(*all), WEFT_UINT8, comm);
	if (st != WEFT_SUCCESS) {
		free(all);
		return st;
	}
	merge(all, n, &sum);
	*conns = connections(comm, all);
	free(all);

	json_t *list = json_array();
	int bad = 0;
	for (int c = 0; c < WEFT_LINK_CLASS_COUNT; c++) {
		bool present = false;
		for (int i = 0; i < TP_SLOTS; i++)
			present |= sum.count[c][i] != 0;
		if (present)
			bad |=
			    json_array_append_new(list, class_entry(&sum, (enum weft_link_class)c));
	}
	if (bad || !list || !*conns) {
		json_decref(list);
		json_decref(*conns);
		*conns = NULL;
		return weft_comm_fail(comm, WEFT_ERR_NO_MEMORY, "weft_comm_describe: no memory");
	}
	*out = list;
	return WEFT_SUCCESS;
}
