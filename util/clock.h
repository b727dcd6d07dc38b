/* clock.h — the one clock: CLOCK_MONOTONIC, as seconds (weft_now) or as
 * integer nanoseconds (weft_now_ns: what the flight recorder and the
 * metrics keep, so that adding and subtracting them never rounds). */
#ifndef WEFT_CLOCK_H
#define WEFT_CLOCK_H

#include <stdint.h>
#include <time.h>

double weft_now(void);
uint64_t weft_now_ns(void);

/* CLOCK_MONOTONIC_COARSE in nanoseconds: the last tick (1-4 ms old), at a
 * quarter of the precise clock's cost. Same origin as weft_now_ns. */
uint64_t weft_now_coarse_ns(void);

/* CLOCK_REALTIME in nanoseconds since the epoch, for what is read across
 * hosts (a dump's times); async-signal-safe, as weft_now_ns is. */
uint64_t weft_wall_ns(void);

/* CLOCK_MONOTONIC_COARSE: a few nanoseconds, no system call, a few
 * milliseconds' resolution (a watchdog's idle polls). */
double weft_now_coarse(void);

/* The CLOCK_REALTIME time @p seconds from now, as pthread_cond_timedwait
 * takes its deadline (a condition's default clock). */
struct timespec weft_wall_after(double seconds);

#endif
