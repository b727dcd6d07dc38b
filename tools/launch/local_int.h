/* local_int.h — what local_launch.c and local_wait.c share. */
#ifndef WEFT_LOCAL_INT_H
#define WEFT_LOCAL_INT_H

/* Seconds on CLOCK_MONOTONIC. */
double weft_local_now(void);

#endif
