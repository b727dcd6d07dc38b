/* reduce_kernels.h — the two kernel tables (kernels.c) as dispatch.c reads
 * them. Internal to reduce/. */
#ifndef WEFT_REDUCE_KERNELS_H
#define WEFT_REDUCE_KERNELS_H

#include <stdbool.h>

#include "reduce/reduce.h"

/* The AVX2 (or the generic) kernel of a valid (dtype, op). */
weft_reduce_fn weft_reduce_table(bool avx2, weft_datatype_t dtype, weft_op_t op);

/* Does the dispatch hand out the AVX2 kernels (dispatch.c)? */
bool weft_reduce_use_avx2(void);

#endif
