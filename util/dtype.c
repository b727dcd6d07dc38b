/* dtype.c — element sizes and names of the public datatypes and ops. */
#include "util/dtype.h"

/* The names nccl-tests prints, so results can be compared side by side. */
static const char *const dtype_names[WEFT_DATATYPE_COUNT] = {
    [WEFT_INT8] = "int8",      [WEFT_UINT8] = "uint8",	     [WEFT_INT32] = "int32",
    [WEFT_UINT32] = "uint32",  [WEFT_INT64] = "int64",	     [WEFT_UINT64] = "uint64",
    [WEFT_FLOAT16] = "half",   [WEFT_BFLOAT16] = "bfloat16", [WEFT_FLOAT32] = "float",
    [WEFT_FLOAT64] = "double",
};

static const size_t dtype_sizes[WEFT_DATATYPE_COUNT] = {
    [WEFT_INT8] = 1,	[WEFT_UINT8] = 1,   [WEFT_INT32] = 4,	[WEFT_UINT32] = 4,
    [WEFT_INT64] = 8,	[WEFT_UINT64] = 8,  [WEFT_FLOAT16] = 2, [WEFT_BFLOAT16] = 2,
    [WEFT_FLOAT32] = 4, [WEFT_FLOAT64] = 8,
};

static const char *const op_names[WEFT_OP_COUNT] = {
    [WEFT_SUM] = "sum", [WEFT_PROD] = "prod", [WEFT_MIN] = "min",
    [WEFT_MAX] = "max", [WEFT_AVG] = "avg",
};

const char *weft_dtype_name(weft_datatype_t d)
{
	return weft_dtype_valid(d) ? dtype_names[d] : "invalid";
}

const char *weft_op_name(weft_op_t op)
{
	return weft_op_valid(op) ? op_names[op] : "invalid";
}

WEFT_API size_t weft_datatype_size(weft_datatype_t dtype)
{
	return weft_dtype_valid(dtype) ? dtype_sizes[dtype] : 0;
}
