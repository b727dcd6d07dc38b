/* tune_table.h — the tuner's table as data: for each collective and a few
 * message sizes, the call it stands for, the choice and each algorithm's
 * estimate (what weft_tune_print() prints, for the self-description). */
#ifndef WEFT_TUNE_TABLE_H
#define WEFT_TUNE_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "algorithms/algo.h"
#include "core/task.h"

struct weft_comm;

#define WEFT_TUNE_TABLE_SIZES 8

/* 8 B .. 256 MiB: the bytes a call moves in total (allgather, reduce_scatter
 * and alltoall: across all ranks' blocks), as weft_tune_print() shows. */
extern const size_t weft_tune_table_sizes[WEFT_TUNE_TABLE_SIZES];

/* Whether the table has rows for @p coll: a collective with algorithms and a
 * size (send, recv and barrier have no choice worth a table, nor, for now,
 * alltoallv, gather and scatter). */
bool weft_tune_table_has(enum weft_coll_kind coll);

/* The call a row stands for: float32 sum, root 0, @p bytes in total (at
 * least one element). */
void weft_tune_table_args(const struct weft_comm *comm, enum weft_coll_kind coll, size_t bytes,
			  struct weft_coll_args *args);

/* @p algo's estimate for @p args in seconds, or a negative number when the
 * tuner would never choose it for this call (no estimate, or the call is not
 * supported); a forced algorithm may still run it. */
double weft_tune_table_estimate(const struct weft_comm *comm, const struct weft_algo *algo,
				const struct weft_coll_args *args);

#endif
