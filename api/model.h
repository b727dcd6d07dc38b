/*
 * model.h — what the files of weft_model_describe() share (model.c builds
 * the job, model_order.c says which host each rank is on, model_json.c
 * adds what a model adds to the self-description).
 */
#ifndef WEFT_MODEL_H
#define WEFT_MODEL_H

#include <jansson.h>
#include <stdint.h>

#include "topo/topo.h"
#include "util/error.h"

/* The most ranks a model places: what one topology file may name as hosts
 * (topo/hostlist.h), and some 900 MB of cards. */
#define WEFT_MODEL_MAX_RANKS 1000000

#define WEFT_MODEL_MAX_STEPS 16

struct weft_model_step {
	const char *name;
	double seconds;
	long peak_rss_kib; /* the process's peak resident set after the step */
};

struct weft_model_steps {
	struct weft_model_step step[WEFT_MODEL_MAX_STEPS];
	int n;
	double start; /* of the step being timed */
};

/* Close the step being timed as @p name and start the next. */
void weft_model_step_end(struct weft_model_steps *s, const char *name);

/*
 * Which host each rank is on: *host_of (malloc'd, *nranks entries) from
 * @p order, for @p nhosts hosts (named @p names, in strcmp order) with
 * @p per_host ranks each:
 *   block          ranks 0..per_host-1 on host 0, the next on host 1, ...
 *   round-robin    rank r on host r % nhosts
 *   random[:SEED]  block's slots dealt to ranks in a random order (SEED, a
 *                  whole number, default 1: the same order every run)
 *   anything else  an Open MPI rankfile ("rank N=HOST ..." lines, '#'
 *                  comments) as weft-topo --rankfile writes: its ranks must
 *                  be 0..n-1, each once, on hosts the file names; per_host
 *                  is then ignored.
 * Errors (WEFT_ERR_INVALID_ARG) name the order, the file and line.
 */
weft_status_t weft_model_order(const char *order, int nhosts, const char *const *names,
			       int per_host, int **host_of, int *nranks, struct weft_err *err);

/* A real job's "transports", for the model: per link class, its pairs of
 * ranks, served by "self", "shm" (one host) or "net" (between hosts: which
 * network transport a host would have is not in a topology file). */
weft_status_t weft_model_transports(const struct weft_topo_graph *g, json_t **out);

/* "model": the inputs and the steps' times and peak memory. */
json_t *weft_model_section(const char *path, int per_host, const char *order,
			   const struct weft_model_steps *s);

#endif
