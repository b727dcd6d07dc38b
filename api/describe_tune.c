/*
 * describe_tune.c — the self-description's "tuner": for each collective
 * with a choice, the tuner's pick at 8 B .. 256 MiB and every algorithm's
 * estimate (microseconds; null where the tuner would never pick it), the
 * table weft_tune_print() writes to the TUNE log; then "flow", AllReduce's
 * alpha-beta and flow estimates side by side (describe_flow.c).
 */
#include "algorithms/algo.h"
#include "api/describe.h"
#include "core/comm.h"
#include "tune/tune.h"
#include "tune/tune_table.h"

static json_t *size_row(const struct weft_comm *comm, enum weft_coll_kind coll, size_t bytes)
{
	struct weft_coll_args args;
	weft_tune_table_args(comm, coll, bytes, &args);
	json_t *est = json_object();
	int bad = 0;
	for (const struct weft_algo *const *a = weft_algos_for(coll); *a; a++) {
		double s = weft_tune_table_estimate(comm, *a, &args);
		bad |=
		    json_object_set_new(est, (*a)->name, s < 0 ? json_null() : json_real(s * 1e6));
	}
	if (bad) {
		json_decref(est);
		return NULL;
	}
	return json_pack("{s:I, s:I, s:s, s:o}", "bytes", (json_int_t)bytes, "count",
			 (json_int_t)args.count, "choice", weft_tune_select(comm, &args)->name,
			 "estimates_us", est);
}

static json_t *coll_entry(const struct weft_comm *comm, enum weft_coll_kind coll)
{
	json_t *names = json_array(), *rows = json_array();
	int bad = 0;
	for (const struct weft_algo *const *a = weft_algos_for(coll); *a; a++)
		bad |= json_array_append_new(names, json_string((*a)->name));
	for (int i = 0; i < WEFT_TUNE_TABLE_SIZES && !bad; i++)
		bad |= json_array_append_new(rows, size_row(comm, coll, weft_tune_table_sizes[i]));
	if (bad) {
		json_decref(names);
		json_decref(rows);
		return NULL;
	}
	return json_pack("{s:s, s:o, s:o}", "name", weft_coll_name(coll), "algorithms", names,
			 "sizes", rows);
}

weft_status_t weft_describe_tuner(const struct weft_comm *comm, json_t *root)
{
	json_t *colls = json_array();
	int bad = 0;
	for (int c = 0; c < WEFT_COLL_COUNT && !bad; c++)
		if (weft_tune_table_has((enum weft_coll_kind)c))
			bad |=
			    json_array_append_new(colls, coll_entry(comm, (enum weft_coll_kind)c));
	json_t *tuner = json_pack("{s:o}", "collectives", colls);
	bad |= !tuner || weft_describe_flow(comm, tuner) != WEFT_SUCCESS;
	bad |= json_object_set_new(root, "tuner", tuner);
	return bad ? WEFT_ERR_NO_MEMORY : WEFT_SUCCESS;
}
