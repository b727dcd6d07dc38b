/* dtype.h — element sizes and names of the public datatypes and ops. */
#ifndef WEFT_DTYPE_H
#define WEFT_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

#include "weft.h"

static inline bool weft_dtype_valid(weft_datatype_t d)
{
	return (unsigned)d < WEFT_DATATYPE_COUNT;
}

static inline bool weft_op_valid(weft_op_t op)
{
	return (unsigned)op < WEFT_OP_COUNT;
}

const char *weft_dtype_name(weft_datatype_t d);
const char *weft_op_name(weft_op_t op);

#endif
