/* reduce_isa.h — test hook for the reduction kernels' CPU dispatch.
 * Internal: only tests include this. */
#ifndef WEFT_REDUCE_ISA_H
#define WEFT_REDUCE_ISA_H

#include <stdbool.h>

/* Make weft_reduce_kernel() hand out the generic (SSE2 baseline) kernels
 * even on a CPU with AVX2, or go back with false to what the CPU and
 * WEFT_ISA choose (WEFT_ISA=generic keeps the generic kernels). Not
 * thread-safe: call it only while no other thread looks up kernels.
 * Kernels already handed out keep working; they are just not swapped. */
void weft_reduce_force_generic(bool on);

#endif
