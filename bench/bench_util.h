/*
 * bench_util.h - what every benchmark under bench/ needs: a clock, a
 * seeded random stream and sorting of timings (for medians and bests).
 */
#ifndef ATTNC_BENCH_UTIL_H
#define ATTNC_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

/* Seconds of the given clock: CLOCK_MONOTONIC (wall), or
 * CLOCK_PROCESS_CPUTIME_ID, which on a shared machine leaves out the
 * time the process waits while others run. */
static inline double bench_now_s(clockid_t clock)
{
	struct timespec t;
	clock_gettime(clock, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* splitmix64: the next of a stream seeded by *s. */
static inline uint64_t bench_rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A uniform float in [-1, 1) from the stream. */
static inline float bench_rng_float(uint64_t *s)
{
	return (float)((double)(bench_rng_next(s) >> 11) / 9007199254740992.0 *
			       2 -
		       1);
}

/* Sorts n timings ascending (insertion sort: n is a handful of rounds). */
static inline void bench_sort(double *t, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
			double x = t[j];
			t[j] = t[j - 1];
			t[j - 1] = x;
		}
}

#endif
