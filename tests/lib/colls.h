/*
 * colls.h — one checked call of a collective, for the integration suites
 * (tests/integration/), which choose the cases: counts, datatypes, ops,
 * forms, roots and algorithms.
 *
 * Every case, inside a rank process: the inputs of harness.h (exact in
 * every datatype, or with .round the rounding data, whose results must be
 * rounded once to nearest even), a fresh salt so that a stale result never
 * passes, the call (blocking, or with .nb the non-blocking one and
 * weft_wait), then the result compared element by element (byte by byte
 * for the collectives that only move data), the guard bytes around every
 * buffer, the inputs that must not change and the buffers a rank does not
 * use, which must stay untouched. A wrong result is counted and the first
 * COLL_SHOWN are reported (harness_fail); a failed call stops the job:
 * the communicator may be dead.
 */
#ifndef WEFT_TEST_COLLS_H
#define WEFT_TEST_COLLS_H

#include <stdbool.h>
#include <stddef.h>

#include "harness.h"

#define COLL_SHOWN 8

struct coll_ctx {
	weft_comm_t comm;
	int rank, nranks;
	unsigned salt; /* moves every case */
	unsigned rot;  /* free for a matrix's rotation of samples, forms, roots */
	int cases;     /* cases run */
	int failures;  /* cases with a wrong result */
	bool error;    /* a call failed: stop */
};

enum coll_form {
	COLL_OUT,      /* separate send and receive buffers */
	COLL_SAME,     /* sendbuf == recvbuf */
	COLL_IN_PLACE, /* WEFT_IN_PLACE */
	/* allgather: sendbuf = recvbuf + rank * count; reduce_scatter:
	 * recvbuf = sendbuf + rank * count (NCCL's in place) */
	COLL_OFFSET,
	COLL_FORMS
};

struct coll_case {
	size_t count;
	weft_datatype_t dt;
	weft_op_t op;
	enum coll_form form; /* broadcast and reduce: the root's */
	int root;
	bool round; /* the rounding data: floating types, sum, prod or avg */
	bool nb;    /* weft_i<coll>, then weft_wait */
	/* broadcast and reduce: ranks other than the root pass NULL for the
	 * buffer they do not use (and reduce's pass their input out of place),
	 * whatever the root's form; otherwise broadcast's pass the root's form
	 * (out of place: NULL, or with .nonroot_buffer a sendbuf that must stay
	 * as it was) and reduce's a NULL recvbuf every other case, else one
	 * that must stay untouched */
	bool nonroot_null;
	bool nonroot_buffer;
};

enum coll_result { COLL_OK, COLL_WRONG, COLL_ERROR };

void coll_init(struct coll_ctx *c, weft_comm_t comm, int rank, int nranks);
/* The rank's exit code: 2 if a call failed, 1 if a result was wrong. */
int coll_end(struct coll_ctx *c);

enum coll_result coll_allreduce(struct coll_ctx *c, const struct coll_case *k);
enum coll_result coll_allgather(struct coll_ctx *c, const struct coll_case *k);
enum coll_result coll_reduce_scatter(struct coll_ctx *c, const struct coll_case *k);
enum coll_result coll_broadcast(struct coll_ctx *c, const struct coll_case *k);
enum coll_result coll_reduce(struct coll_ctx *c, const struct coll_case *k);
enum coll_result coll_alltoall(struct coll_ctx *c, const struct coll_case *k);

/* For the suites' own cases: a wrong result (@p why, "" if none) of the
 * case @p name, counted and shown as above; and a call's status. */
enum coll_result coll_verdict(struct coll_ctx *c, const char *name, const char *why);
enum coll_result coll_status(struct coll_ctx *c, const char *name, weft_status_t st);
/* weft_wait(@p req) after a successful post @p st (a NULL request is done). */
weft_status_t coll_complete(weft_status_t st, weft_request_t *req);

/* The @p rot-th of 15 (datatype, op) pairs taken in rotation: every type
 * and op, avg with integers and the half types. */
void coll_rotation(unsigned rot, weft_datatype_t *dt, weft_op_t *op);

/* (datatype, op) pairs that meet every datatype once (the op in
 * rotation) and every op once (the datatype in rotation), shifted by
 * @p shift; with @p half only every other datatype. Returns how many. */
#define COLL_SAMPLES_MAX (WEFT_DATATYPE_COUNT + WEFT_OP_COUNT)
int coll_samples(size_t shift, bool half, weft_datatype_t dt[COLL_SAMPLES_MAX],
		 weft_op_t op[COLL_SAMPLES_MAX]);

/* The walk of the tree, ring, pairwise and direct jobs: counts 0, 1, 7,
 * nranks-1, 4099 and COLL_WALK_BIG; at each the coll_samples() of the
 * count (every other datatype above 4 ranks; three at the largest count),
 * the forms out of place, sendbuf == recvbuf and WEFT_IN_PLACE and the
 * roots first, last and middle in rotation, ranks other than the root
 * passing NULL (.nonroot_null). @p one runs what it wants of each; @p k is
 * the count's index, @p s the sample's. */
#define COLL_WALK_BIG ((size_t)300001)
typedef void (*coll_walk_fn)(struct coll_ctx *c, size_t k, int s, const struct coll_case *cs);
void coll_walk(struct coll_ctx *c, coll_walk_fn one);

/* --- AlltoAllv, Gather and Scatter (colls_v.c) --- */

/* How the blocks of an alltoallv lie: per-pair counts that differ, some
 * zero ("uneven"); a rank that neither sends nor receives ("one idle"); or
 * all empty. Send blocks in reverse rank order with @p gap elements
 * between them, receive blocks in rank order with one element between. */
enum coll_v_pattern { COLL_V_UNEVEN, COLL_V_ONE_IDLE, COLL_V_EMPTY, COLL_V_PATTERNS };
struct coll_v_layout {
	size_t *scount, *sdispl, *rcount, *rdispl;
	size_t send_elems, recv_elems; /* buffer sizes, gaps included */
};
bool coll_v_layout(struct coll_v_layout *l, enum coll_v_pattern p, size_t base, int rank, int n,
		   size_t gap);
void coll_v_layout_free(struct coll_v_layout *l);
/* Every block from rank i carries harness_ag_input(seed i * n + rank,
 * @p salt); every gap still HARNESS_UNWRITTEN. */
bool coll_v_check(const struct coll_ctx *c, const struct coll_v_layout *l,
		  const unsigned char *recv, weft_datatype_t dt, unsigned salt, char *why,
		  size_t cap);
enum coll_result coll_alltoallv(struct coll_ctx *c, enum coll_v_pattern p, size_t base,
				weft_datatype_t dt, bool nb);

/* Gather and scatter: the root's form COLL_OUT, COLL_IN_PLACE, or
 * COLL_OFFSET (in place by pointer: the root's block already where it
 * goes); a non-root passes NULL for its unused buffer every other case,
 * else one that must stay untouched. */
enum coll_result coll_gather(struct coll_ctx *c, const struct coll_case *k);
enum coll_result coll_scatter(struct coll_ctx *c, const struct coll_case *k);

#endif
