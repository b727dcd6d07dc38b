/* topo_trace.h — what weft-topo --trace's two files share: the dumps as
 * read (topo_trace.c) and the verdict drawn from them (topo_trace_verdict.c). */
#ifndef WEFT_TOPO_TRACE_H
#define WEFT_TOPO_TRACE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

/* What one rank's dump says. */
struct dump {
	const char *path;
	json_t *doc;
	const char *comm;
	long long rank, nranks, calls, dumped_us;
	const json_t *ops;
	const json_t *inflight; /* its oldest operation not done; NULL: none */
	long long waits_on;	/* that operation's peer, -1 none */
};

/* One communicator's dumps, by rank (NULL: none from that rank). */
struct job {
	const char *comm;
	long long nranks;
	struct dump **by_rank;
	int ndumps;
};

/* "allreduce seq 57 (float32 sum, 1048576 elements)" */
void weft_trace_op_text(const json_t *op, char *buf, size_t len);

/* "rank 1 (h3, 10.77.5.13)", or "rank 1 (no dump)". */
void weft_trace_who(const struct job *j, long long r, char *buf, size_t len);

/* The collective number @p call in @p d's ring, NULL if not recorded. */
const json_t *weft_trace_coll_op(const struct dump *d, long long call);

bool weft_trace_is_p2p(const json_t *op);

/* The verdict of one communicator, as text for people or as a JSON object
 * (topo_trace_verdict.c). */
void weft_trace_verdict_text(const struct job *j, FILE *out);
json_t *weft_trace_verdict_json(const struct job *j);

#endif
