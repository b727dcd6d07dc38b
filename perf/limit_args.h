/*
 * limit_args.h — option parsing the limit programs share (copy_limit,
 * tcp_limit, c2c_latency): counts through Weft's strict parser, digits
 * only, so that "-n x" is an error and not a zero. Header-only: those
 * programs link nothing of Weft but util/parse.o.
 */
#ifndef WEFT_PERF_LIMIT_ARGS_H
#define WEFT_PERF_LIMIT_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/parse.h"

/* A decimal count in [lo, hi] into *out; false if @p s is anything else. */
static inline bool limit_count(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t v;
	if (weft_parse_size(s, hi, WEFT_PARSE_NO_SUFFIX, &v, NULL) != WEFT_SUCCESS || v < lo)
		return false;
	*out = v;
	return true;
}

/* The same, or exit 2 with "PROG: WHAT 'S': expected an integer from LO
 * to HI". */
static inline int limit_count_or_exit(const char *prog, const char *what, const char *s,
				      uint64_t lo, uint64_t hi)
{
	uint64_t v;
	if (!limit_count(s, lo, hi, &v)) {
		fprintf(stderr, "%s: %s '%s': expected an integer from %llu to %llu\n", prog, what,
			s, (unsigned long long)lo, (unsigned long long)hi);
		exit(2);
	}
	return (int)v;
}

#endif
