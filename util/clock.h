/* clock.h — the one clock: seconds on CLOCK_MONOTONIC. */
#ifndef WEFT_CLOCK_H
#define WEFT_CLOCK_H

double weft_now(void);

#endif
