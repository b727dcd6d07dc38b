/* clock.c — see clock.h. */
#include "util/clock.h"

#include <time.h>

double weft_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double weft_now_coarse(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
