/*
 * gemm.c - benchmark of the generated sgemm against OpenBLAS's
 * cblas_sgemm, side by side in one run: square sizes 256..2048 and the
 * book's small shapes (64×10 rows by 32 wide, FFN 64, vocabulary 200),
 * on 1 and 2 threads. Each cell is the median of several samples, with
 * their range; a sample repeats the call until it lasts about 50 ms.
 *
 *     bench_gemm [-r REPS] [-w 8|16] [-s SIZE]... [-g WIDTH] [-c 1]
 *
 * -c 1 makes each sample one call with the operands out of cache: 16 MB
 * are written before it (untimed), as a training step's other kernels
 * leave the caches; without it, calls repeat on operands in cache.
 * -r sets the samples per cell (default 7); -w forces the micro-kernel's
 * vector width (default: the host's widest); -s restricts the square
 * sizes (repeatable). -g runs instead the matmuls of one GPT training
 * step at that width (bench/gpt_step.sh's model: 1,024 tokens, MLP 4x
 * the width, vocabulary 512), forward and backward in the layouts the
 * gradient uses (dX = dY W^T: B transposed; dW = X^T dY: A transposed),
 * and next to qkvo's the three products of q, k and v as one (qkv3:
 * X @ [W_q | W_k | W_v], N three widths; its dX with K three widths, its
 * dW with N three widths), on 1 thread, each with its share of the FMA
 * peak measured in the same run; these are timed in the process's CPU time, which on a shared
 * machine leaves out the time other processes hold the core. The machine is shared, so the run ends with how busy the
 * CPUs were in total and how much of that was this process: a busy
 * machine makes 2-thread numbers swing (a thread waits at a barrier for a
 * descheduled partner). Implementations run in separate blocks with a
 * pause between them, so that neither's spinning idle threads (libgomp's,
 * OpenBLAS's) steal the other's cores.
 */
#include <cblas.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "cg.h"
#include "cg_gemm.h"

#define MAX_REPS 64
#define SAMPLE_S 0.05

typedef void (*gemm_fn)(const float *A, const float *B, float *C);

typedef struct shape {
	int m, n, k;
	const char *what;
	bool ta, tb; /* A stored k×m, B stored n×k */
} shape;

typedef struct stat3 {
	double med, lo, hi; /* GFLOP/s */
} stat3;

/* The operands of one shape and the compiled kernel. */
typedef struct bench_case {
	shape s;
	float *a, *b, *c, *c_ref;
	cg_module *mod;
	gemm_fn fn;
	double compile_ms;
} bench_case;

static void pause_s(double s)
{
	struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	nanosleep(&t, NULL);
}

/* Total and idle jiffies of all CPUs, from /proc/stat. */
static void cpu_jiffies(double *total, double *idle)
{
	unsigned long long v[8] = {0};
	FILE *fp = fopen("/proc/stat", "r");
	*total = *idle = 0;
	if (!fp)
		return;
	if (fscanf(fp, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
		   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8) {
		for (int i = 0; i < 8; i++)
			*total += (double)v[i];
		*idle = (double)(v[3] + v[4]);
	}
	fclose(fp);
}

static void load_avg(char *out, size_t len)
{
	FILE *fp = fopen("/proc/loadavg", "r");
	out[0] = '\0';
	if (fp) {
		if (!fgets(out, (int)len, fp))
			out[0] = '\0';
		fclose(fp);
	}
	out[strcspn(out, "\n")] = '\0';
}

static float *matrix(size_t n, uint64_t *state)
{
	float *x = aligned_alloc(64, (n * sizeof *x + 63) / 64 * 64);
	if (!x) {
		fprintf(stderr, "bench_gemm: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n; i++) {
		*state = *state * 6364136223846793005ull +
			 1442695040888963407ull;
		x[i] = (float)((*state >> 40) / (double)(1ull << 24)) - 0.5f;
	}
	return x;
}

static bool case_init(bench_case *bc, shape s, int width)
{
	uint64_t seed = 42;
	cg_gemm_spec spec = {.m = s.m,
			     .n = s.n,
			     .k = s.k,
			     .ta = s.ta,
			     .tb = s.tb,
			     .vector_width = width};
	memset(bc, 0, sizeof *bc);
	bc->s = s;
	bc->a = matrix((size_t)s.m * (size_t)s.k, &seed);
	bc->b = matrix((size_t)s.k * (size_t)s.n, &seed);
	bc->c = matrix((size_t)s.m * (size_t)s.n, &seed);
	bc->c_ref = matrix((size_t)s.m * (size_t)s.n, &seed);
	double t0 = bench_now_s(CLOCK_MONOTONIC);
	bc->mod = cg_module_create("bench");
	if (!bc->mod || !cg_gemm_add(bc->mod, "sgemm", &spec) ||
	    !cg_module_jit(bc->mod)) {
		fprintf(stderr, "bench_gemm: %s\n",
			bc->mod ? cg_module_error(bc->mod) : "out of memory");
		return false;
	}
	void *addr = cg_module_lookup(bc->mod, "sgemm");
	memcpy(&bc->fn, &addr, sizeof bc->fn);
	bc->compile_ms = (bench_now_s(CLOCK_MONOTONIC) - t0) * 1e3;
	return bc->fn != NULL;
}

static void case_fini(bench_case *bc)
{
	free(bc->a);
	free(bc->b);
	free(bc->c);
	free(bc->c_ref);
	cg_module_destroy(bc->mod);
}

static void run_ours(bench_case *bc, float *c)
{
	bc->fn(bc->a, bc->b, c);
}

static void run_blas(bench_case *bc, float *c)
{
	shape s = bc->s;
	cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans,
		    s.tb ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, 1.0f, bc->a,
		    s.ta ? s.m : s.k, bc->b, s.tb ? s.k : s.n, 0.0f, c, s.n);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* -c: the floats written between samples, to push the operands out of
 * L2 (and most of L3) as a training step's other kernels do. */
#define COLD_FLOATS (4u << 20)
static float *cold_sweep;

/* Writes a line of every 64 bytes of the sweep buffer. */
static void sweep_caches(void)
{
	for (size_t i = 0; i < COLD_FLOATS; i += 16)
		cold_sweep[i] += 1.0f;
}

/* Median and range of `reps` samples of run(), in GFLOP/s, timed by
 * `clock` (CLOCK_MONOTONIC, or on one thread of a busy machine
 * CLOCK_PROCESS_CPUTIME_ID, which leaves out the time others run). With
 * -c (cold_sweep set) a sample is one call after a sweep, the sweep not
 * timed. */
static stat3 measure(bench_case *bc, void (*run)(bench_case *, float *),
		     float *c, int reps, clockid_t clock)
{
	double flops = 2.0 * bc->s.m * bc->s.n * bc->s.k, gf[MAX_REPS];
	double t0 = bench_now_s(clock);
	run(bc, c); /* warm up: caches, page faults, thread team */
	run(bc, c);
	double once = (bench_now_s(clock) - t0) / 2;
	int iters = once >= SAMPLE_S || cold_sweep
			    ? 1
			    : (int)(SAMPLE_S / (once + 1e-9)) + 1;
	for (int r = 0; r < reps; r++) {
		if (cold_sweep)
			sweep_caches();
		t0 = bench_now_s(clock);
		for (int i = 0; i < iters; i++)
			run(bc, c);
		gf[r] = flops * iters / (bench_now_s(clock) - t0) * 1e-9;
	}
	qsort(gf, (size_t)reps, sizeof gf[0], cmp_double);
	return (stat3){gf[reps / 2], gf[0], gf[reps - 1]};
}

/* Largest |ours - OpenBLAS| relative to the largest |OpenBLAS|. */
static double rel_diff(const bench_case *bc)
{
	size_t n = (size_t)bc->s.m * (size_t)bc->s.n;
	double worst = 0, scale = 1e-30;
	for (size_t i = 0; i < n; i++) {
		worst = fmax(worst, fabs((double)bc->c[i] - bc->c_ref[i]));
		scale = fmax(scale, fabs((double)bc->c_ref[i]));
	}
	return worst / scale;
}

/* One row: attnc and OpenBLAS on shape s; with peak > 0 (GFLOP/s of
 * `threads` cores), also attnc's share of it. */
static void bench_shape(shape s, int threads, int reps, int width, double peak,
			clockid_t clock)
{
	bench_case bc;
	if (!case_init(&bc, s, width)) {
		case_fini(&bc);
		exit(1);
	}
	cg_threads_set(threads);
	openblas_set_num_threads(threads);
	stat3 ours = measure(&bc, run_ours, bc.c, reps, clock);
	pause_s(0.3);
	stat3 blas = measure(&bc, run_blas, bc.c_ref, reps, clock);
	pause_s(0.3);
	char label[64], share[16] = "";
	snprintf(label, sizeof label, "%dx%dx%d%s%s", s.m, s.n, s.k,
		 s.ta ? " ta" : "", s.tb ? " tb" : "");
	if (peak > 0)
		snprintf(share, sizeof share, "%5.1f%%", 100 * ours.med / peak);
	printf("%-18s %-8s %3d  %7.1f (%6.1f-%6.1f) %s  %7.1f (%6.1f-%6.1f)  "
	       "%5.2f  %6.1f  %.1e\n",
	       label, s.what, threads, ours.med, ours.lo, ours.hi, share,
	       blas.med, blas.lo, blas.hi, ours.med / blas.med, bc.compile_ms,
	       rel_diff(&bc));
	fflush(stdout);
	case_fini(&bc);
}

static void header(bool is_peak)
{
	printf("%-18s %-8s %3s  %-23s%s  %-23s  %5s  %6s  %s\n", "MxNxK",
	       "shape", "thr", "attnc GFLOP/s (range)", is_peak ? " (peak)" : "",
	       "OpenBLAS GFLOP/s", "ratio", "jit ms", "rel diff");
}

/* One core's FMA peak in GFLOP/s: the best of 5 runs of independent FMA
 * chains (bench_util.h) of about 0.1 s each, at the micro-kernel's
 * width, in the process's CPU time as the GPT rows are. */
static double fma_peak(int vw)
{
	long iters = 300000;
	double best = 0;
	float sink = 0;
	for (int r = 0; r < 5; r++) {
		double t0 = bench_now_s(CLOCK_PROCESS_CPUTIME_ID);
		sink += vw == 16 ? bench_fma_chains_zmm((float)r, iters)
				 : bench_fma_chains_ymm((float)r, iters);
		double sec = bench_now_s(CLOCK_PROCESS_CPUTIME_ID) - t0;
		double gf = 2.0 * vw * BENCH_FMA_CHAINS * (double)iters / sec;
		best = gf > best ? gf : best;
	}
	return sink == 12345.0f ? 0 : best * 1e-9; /* keeps the sums alive */
}

/* The matmuls of a GPT training step at width d (1,024 tokens, MLP 4d,
 * vocabulary 512): the forward's, then the backward's input gradients
 * (B transposed) and weight gradients (A transposed), on 1 thread; the
 * qkv3 rows are q, k and v's three products merged into one, to weigh
 * against three qkvo rows. */
static void bench_gpt(int d, int reps, int width, int vw)
{
	const int t = 1024, f = 4 * d, v = 512;
	const shape shapes[] = {
		{t, d, d, "qkvo", false, false},
		{t, 3 * d, d, "qkv3", false, false},
		{t, f, d, "fc1", false, false},
		{t, d, f, "fc2", false, false},
		{t, v, d, "head", false, false},
		{t, d, d, "dX qkvo", false, true},
		{t, d, 3 * d, "dX qkv3", false, true},
		{t, d, f, "dX fc1", false, true},
		{t, f, d, "dX fc2", false, true},
		{t, d, v, "dX head", false, true},
		{d, d, t, "dW qkvo", true, false},
		{d, 3 * d, t, "dW qkv3", true, false},
		{d, f, t, "dW fc1", true, false},
		{f, d, t, "dW fc2", true, false},
		{d, v, t, "dW head", true, false},
	};
	double peak = fma_peak(vw);
	printf("FMA peak, 1 thread, measured now: %.1f GFLOP/s\n\n", peak);
	header(true);
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
		bench_shape(shapes[i], 1, reps, width, peak,
			    CLOCK_PROCESS_CPUTIME_ID);
	printf("\nFMA peak, 1 thread, at the end: %.1f GFLOP/s\n", fma_peak(vw));
}

static const shape small_shapes[] = {
	{640, 32, 32, "qkv", false, false}, /* 64 batch x 10 steps, hidden 32 */
	{640, 64, 32, "ffn1", false, false},   /* hidden 32 -> FFN 64 */
	{640, 32, 64, "ffn2", false, false},   /* FFN 64 -> hidden 32 */
	{640, 200, 32, "vocab", false, false}, /* hidden 32 -> ~200 words */
};

/* The square sizes and the book's shapes, on 1 and 2 threads. */
static void bench_default(const int *sizes, int n_sizes, int reps, int width)
{
	header(false);
	for (int threads = 1; threads <= 2; threads++)
		for (int i = 0; i < n_sizes; i++)
			bench_shape((shape){sizes[i], sizes[i], sizes[i],
					    "square", false, false},
				    threads, reps, width, 0, CLOCK_MONOTONIC);
	for (int threads = 1; threads <= 2; threads++)
		for (size_t i = 0;
		     i < sizeof small_shapes / sizeof small_shapes[0]; i++)
			bench_shape(small_shapes[i], threads, reps, width, 0,
				    CLOCK_MONOTONIC);
}

int main(int argc, char **argv)
{
	int reps = 7, sizes[8] = {256, 512, 1024, 2048}, n_sizes = 4, n_user = 0;
	int width = 0, gpt_width = 0;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "-r") == 0)
			reps = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "-w") == 0)
			width = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "-s") == 0 && n_user < 8)
			sizes[n_user++] = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "-g") == 0)
			gpt_width = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "-c") == 0 && atoi(argv[i + 1])) {
			cold_sweep = calloc(COLD_FLOATS, sizeof *cold_sweep);
			if (!cold_sweep) {
				fprintf(stderr, "bench_gemm: out of memory\n");
				return 1;
			}
		}
	}
	if (n_user)
		n_sizes = n_user;
	if (reps < 1 || reps > MAX_REPS)
		reps = 7;

	char load[128];
	double tot0, idle0, tot1, idle1,
		cpu0 = bench_now_s(CLOCK_PROCESS_CPUTIME_ID),
		t0 = bench_now_s(CLOCK_MONOTONIC);
	load_avg(load, sizeof load);
	cpu_jiffies(&tot0, &idle0);
	cg_gemm_plan plan;
	char err[256];
	if (!cg_gemm_plan_make(&(cg_gemm_spec){.m = 1,
					       .n = 1,
					       .k = 1,
					       .vector_width = width},
			       &plan, err, sizeof err)) {
		fprintf(stderr, "bench_gemm: %s\n", err);
		return 1;
	}
	printf("bench_gemm: generated sgemm (%dx%d micro-kernel on <%d x float>) "
	       "vs OpenBLAS (core %s); median of %d samples\n"
	       "load average at start: %s\n\n",
	       CG_GEMM_MR, plan.nr, plan.vw, openblas_get_corename(), reps,
	       load);
	if (gpt_width > 0)
		bench_gpt(gpt_width, reps, width, plan.vw);
	else
		bench_default(sizes, n_sizes, reps, width);

	cpu_jiffies(&tot1, &idle1);
	load_avg(load, sizeof load);
	long n_cpus = sysconf(_SC_NPROCESSORS_ONLN);
	double wall = bench_now_s(CLOCK_MONOTONIC) - t0, busy = tot1 - tot0;
	busy = busy > 0 ? 1.0 - (idle1 - idle0) / busy : 0;
	double ours = (bench_now_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0) / wall;
	printf("\nload average at end: %s\n"
	       "during the %.0f s run the %ld CPUs were %.0f%% busy: this process "
	       "%.2f CPUs, others %.2f CPUs\n(spinning idle threads of libgomp "
	       "and OpenBLAS count as busy)\n",
	       load, wall, n_cpus, busy * 100, ours,
	       fmax(0.0, busy * (double)n_cpus - ours));
	return 0;
}
