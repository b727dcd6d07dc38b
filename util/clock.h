/* clock.h — the one clock: seconds on CLOCK_MONOTONIC. */
#ifndef WEFT_CLOCK_H
#define WEFT_CLOCK_H

double weft_now(void);
/* CLOCK_MONOTONIC_COARSE: a few nanoseconds, no system call, a few
 * milliseconds' resolution (a watchdog's idle polls). */
double weft_now_coarse(void);

#endif
