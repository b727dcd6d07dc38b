/*
 * integ_matrix.h — what the collective suites run the same way: over the
 * verbs double, on fake hosts, and the plans of ReduceScatter, Broadcast,
 * Reduce and AlltoAll (integ_matrix.c says which jobs).
 */
#ifndef WEFT_TEST_INTEG_MATRIX_H
#define WEFT_TEST_INTEG_MATRIX_H

#include "colls.h"
#include "core/task.h"
#include "integ.h"

/* One checked call of @p coll (allreduce, allgather, reduce_scatter,
 * broadcast, reduce, alltoall or barrier): @p rot picks the (datatype, op)
 * sample, in place or out of place, and the root (first, last, middle). */
enum coll_result coll_rotated(struct coll_ctx *c, enum weft_coll_kind coll, size_t count,
			      unsigned rot);

/* The verbs jobs of @p coll: the tuner's choice at 2, 3 and 4 ranks, and
 * with @p forced each algorithm at 3. */
void integ_add_verbs(Suite *s, enum weft_coll_kind coll, bool forced);

/* shm and socket, the matrix that ReduceScatter, Broadcast, Reduce and
 * AlltoAll share: one job per rank count, shm 1..8 and socket 2..8 (one
 * rank has no peer to reach), by the tuner's choice; then each algorithm
 * of @p coll forced (WEFT_ALGO), shm at 2, 3, 5, 8 ranks and socket at 3,
 * 5. Eight ranks on 2 cores are slow: their jobs (and socket's from 6) are
 * "cheap", with few cases; the large count runs up to 3 ranks (socket's
 * auto jobs: at 2). @p body gets the struct integ_plan. */
struct integ_plan {
	bool cheap; /* few cases */
	bool big;   /* the large count */
};
#define INTEG_PLAN_BIG ((size_t)300001)
void integ_add_plans(Suite *s, enum weft_coll_kind coll, harness_body_fn body);
/* The counts of a plan: 0, 1, 7, nranks-1 (if new), 4099 and INTEG_PLAN_BIG
 * for big plans up to 3 ranks. Returns how many (at most 6). */
size_t integ_plan_counts(const struct integ_plan *p, int nranks, size_t counts[6]);
/* The roots first, last and middle (as many as differ). */
size_t integ_roots(int nranks, int roots[3]);

/* hosts: @p coll's hier algorithm on every layout of fake hosts, the
 * layout and the tuner's view of it checked first, then @p cases. */
void integ_add_hosts(Suite *s, enum weft_coll_kind coll, harness_body_fn cases);

#endif
