/*
 * bench_util.h - what every benchmark under bench/ needs: a clock, a
 * seeded random stream, sorting of timings (for medians and bests) and
 * the FMA chains that measure the CPU's peak (bench_fma_peak, and
 * bench_gemm's share of it).
 */
#ifndef ATTNC_BENCH_UTIL_H
#define ATTNC_BENCH_UTIL_H

#include <immintrin.h>
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

#define BENCH_FMA_CHAINS 12

/* `iters` rounds of BENCH_FMA_CHAINS independent 512-bit FMAs (enough
 * chains to hide the FMA latency on every core since Skylake and Zen 4);
 * returns the lanes' sum so that nothing is optimized away. Flops:
 * 2 * 16 * BENCH_FMA_CHAINS * iters. */
__attribute__((target("avx512f"))) static inline float bench_fma_chains_zmm(
	float seed, long iters)
{
	__m512 acc[BENCH_FMA_CHAINS];
	__m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
	for (int c = 0; c < BENCH_FMA_CHAINS; c++)
		acc[c] = _mm512_set1_ps(seed + (float)c);
	for (long i = 0; i < iters; i++)
		for (int c = 0; c < BENCH_FMA_CHAINS; c++)
			acc[c] = _mm512_fmadd_ps(acc[c], a, b);
	float s = 0;
	for (int c = 0; c < BENCH_FMA_CHAINS; c++)
		s += _mm512_reduce_add_ps(acc[c]);
	return s;
}

/* The same with 8-lane AVX2 vectors: 2 * 8 * BENCH_FMA_CHAINS * iters
 * flops. */
__attribute__((target("avx2,fma"))) static inline float bench_fma_chains_ymm(
	float seed, long iters)
{
	__m256 acc[BENCH_FMA_CHAINS];
	__m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
	for (int c = 0; c < BENCH_FMA_CHAINS; c++)
		acc[c] = _mm256_set1_ps(seed + (float)c);
	for (long i = 0; i < iters; i++)
		for (int c = 0; c < BENCH_FMA_CHAINS; c++)
			acc[c] = _mm256_fmadd_ps(acc[c], a, b);
	float s[8], t = 0;
	for (int c = 0; c < BENCH_FMA_CHAINS; c++) {
		_mm256_storeu_ps(s, acc[c]);
		for (int l = 0; l < 8; l++)
			t += s[l];
	}
	return t;
}

#endif
