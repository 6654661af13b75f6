/*
 * fma_peak.c - the machine's float32 FMA peak, measured: each thread
 * runs 12 independent chains of 512-bit fused multiply-adds (AVX-512F;
 * 256-bit AVX2 chains where the CPU has no AVX-512), enough chains to
 * hide the FMA latency on every core since Skylake and Zen 4. Prints
 * GFLOP/s (2 per lane per FMA) on 1 thread and on 2, the best of 7
 * samples of about 0.2 s each, as "fma_peak_gflops threads=N value".
 *
 *     bench_fma_peak [MAX_THREADS]     (default 2)
 *
 * The yardstick of bench/gpt_step.sh: a training step's matmul FLOPs
 * per second as a share of this peak, measured in the same run.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"

#define ITERS 2000000L

/* GFLOP/s of n threads running the chains side by side, best of 7. */
static double peak(int n, int is_zmm, float *sink)
{
	double best = 0;
	for (int r = 0; r < 7; r++) {
		double t0 = bench_now_s(CLOCK_MONOTONIC);
		float s = 0;
#pragma omp parallel num_threads(n) reduction(+ : s)
		s += is_zmm ? bench_fma_chains_zmm((float)omp_get_thread_num(),
						   ITERS)
			    : bench_fma_chains_ymm((float)omp_get_thread_num(),
						   ITERS);
		double sec = bench_now_s(CLOCK_MONOTONIC) - t0;
		*sink += s;
		double flops = 2.0 * (is_zmm ? 16 : 8) * BENCH_FMA_CHAINS *
			       (double)ITERS * n;
		if (flops / sec > best)
			best = flops / sec;
	}
	return best / 1e9;
}

int main(int argc, char **argv)
{
	int max = argc > 1 ? atoi(argv[1]) : 2;
	__builtin_cpu_init();
	int is_zmm = __builtin_cpu_supports("avx512f");
	float sink = 0;
	for (int n = 1; n <= max; n++)
		printf("fma_peak_gflops threads=%d %s %.1f\n", n,
		       is_zmm ? "zmm" : "ymm", peak(n, is_zmm, &sink));
	return sink == 12345.0f; /* never: keeps the sums alive */
}
