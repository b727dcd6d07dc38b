/* topo_dump.h — print what a communicator knows and decided (weft-topo). */
#ifndef WEFT_TOPO_DUMP_H
#define WEFT_TOPO_DUMP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/comm.h"
#include "topo/topo.h"

enum weft_topo_format {
	WEFT_TOPO_TEXT = 0,
	WEFT_TOPO_JSON,
	WEFT_TOPO_DOT,
	WEFT_TOPO_RANKFILE,
};

/* The whole job's view, assembled on every rank. */
struct weft_topo_job {
	const struct weft_comm *comm;
	const struct weft_topo_graph *graph;
	uint8_t *transport; /* [a * nranks + b]: enum weft_tp_index rank a uses to reach b */
	bool by_rank;
	int rank_order_crossings;
};

/* Collective over @p comm: every rank contributes the transport it chose
 * for each peer. Free with weft_topo_job_free(). */
weft_status_t weft_topo_job_gather(struct weft_comm *comm, struct weft_topo_job *job);
void weft_topo_job_free(struct weft_topo_job *job);

weft_status_t weft_topo_dump(const struct weft_topo_job *job, enum weft_topo_format format,
			     FILE *out);

#endif
