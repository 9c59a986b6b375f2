/*
 * cli_common.h
 *		Small helpers shared by the command-line tools: strict number
 *		parsing and a monotonic clock.
 */
#ifndef LLM_CLI_COMMON_H
#define LLM_CLI_COMMON_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Parse s as an integer in [lo, hi]; false (with a message) otherwise. */
static inline bool
cli_parse_int(const char *opt, const char *s, long lo, long hi, long *out)
{
	char	   *end;
	long		v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
	{
		fprintf(stderr, "invalid value for %s: \"%s\" (expected an integer from %ld to %ld)\n", opt, s, lo, hi);
		return false;
	}
	*out = v;
	return true;
}

/* Parse s as a finite number; false (with a message) otherwise. */
static inline bool
cli_parse_float(const char *opt, const char *s, double *out)
{
	char	   *end;
	double		v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || v != v)
	{
		fprintf(stderr, "invalid value for %s: \"%s\" (expected a number)\n", opt, s);
		return false;
	}
	*out = v;
	return true;
}

/* Seconds on a monotonic clock. */
static inline double
cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

#endif							/* LLM_CLI_COMMON_H */
