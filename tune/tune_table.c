/* tune_table.c — see tune_table.h. The rules are weft_tune_print()'s, so the
 * self-description and the TUNE log show the same table. */
#include "tune/tune_table.h"

#include "core/comm.h"
#include "tune/tune.h"

const size_t weft_tune_table_sizes[WEFT_TUNE_TABLE_SIZES] = {
    8, 256, 4096, 65536, 1 << 20, 4 << 20, 16 << 20, 256 << 20,
};

bool weft_tune_table_has(enum weft_coll_kind coll)
{
	if (coll == WEFT_COLL_SEND || coll == WEFT_COLL_RECV || coll == WEFT_COLL_BARRIER)
		return false;
	/* alltoallv has no one size (its blocks differ per peer); gather and
	 * scatter have one algorithm each and stay out of the table until a
	 * second gives a choice to show. */
	if (coll == WEFT_COLL_ALLTOALLV || coll == WEFT_COLL_GATHER || coll == WEFT_COLL_SCATTER)
		return false;
	return weft_algos_for(coll)[0] != NULL;
}

void weft_tune_table_args(const struct weft_comm *comm, enum weft_coll_kind coll, size_t bytes,
			  struct weft_coll_args *args)
{
	/* These collectives count elements per block, one block per rank. */
	bool per_rank = coll == WEFT_COLL_ALLGATHER || coll == WEFT_COLL_REDUCE_SCATTER ||
			coll == WEFT_COLL_ALLTOALL;
	size_t count = bytes / 4 / (per_rank ? (size_t)comm->nranks : 1);
	*args = (struct weft_coll_args){
	    .coll = coll,
	    .count = count ? count : 1,
	    .dtype = WEFT_FLOAT32,
	    .op = WEFT_SUM,
	    .esize = 4,
	    .root = 0,
	};
}

double weft_tune_table_estimate(const struct weft_comm *comm, const struct weft_algo *algo,
				const struct weft_coll_args *args)
{
	if (!algo->estimate || (algo->supports && !algo->supports(comm, args)))
		return -1;
	return weft_tune_estimate(comm, algo, args);
}
