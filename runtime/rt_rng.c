/*
 * rt_rng.c - counter-based random numbers (see rt_rng.h).
 */
#include "rt_rng.h"

#include <math.h>

static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t rt_rng_bits(uint64_t seed, uint64_t stream, uint64_t counter)
{
	return mix(mix(seed ^ mix(stream)) + counter);
}

double rt_rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
	return (double)(rt_rng_bits(seed, stream, counter) >> 40) *
	       (1.0 / 16777216.0);
}

void rt_rng_permutation(uint64_t seed, uint64_t stream, size_t n, size_t *order)
{
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	for (size_t i = n; i > 1; i--) { /* Fisher-Yates, from the end */
		/* The modulo's bias is below n / 2^64: none to see. */
		size_t j = (size_t)(rt_rng_bits(seed, stream, i) % i),
		       t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
}

double rt_rng_normal(uint64_t seed, uint64_t stream, uint64_t counter)
{
	double u1 = rt_rng_uniform(seed, stream, 2 * counter);
	double u2 = rt_rng_uniform(seed, stream, 2 * counter + 1);
	/* 1 - u1 is in (0, 1], so the log is finite. */
	return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);
}
