/*
 * rt_rng.h - a counter-based random number generator.
 *
 * Every random number is a pure function of (seed, stream, counter), so
 * dropout masks and initial weights do not depend on the thread count or
 * on the order in which elements are visited (the idea of Philox in
 * Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"; the mixing
 * function here is SplitMix64's finalizer applied twice).
 */
#ifndef ATTNC_RT_RNG_H
#define ATTNC_RT_RNG_H

#include <stddef.h>
#include <stdint.h>

/* 64 random bits for (seed, stream, counter). */
uint64_t rt_rng_bits(uint64_t seed, uint64_t stream, uint64_t counter);
/* Uniform in [0, 1) with 24 random bits (exact in float32). */
double rt_rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter);
/* order[0..n) becomes a permutation of 0..n drawn from (seed, stream):
 * Fisher-Yates with draw i of the stream at step i. */
void rt_rng_permutation(uint64_t seed, uint64_t stream, size_t n, size_t *order);
/* Standard normal (Box-Muller on two uniforms drawn at 2*counter, 2*counter+1). */
double rt_rng_normal(uint64_t seed, uint64_t stream, uint64_t counter);

#endif
