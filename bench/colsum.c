/*
 * colsum.c - benchmark of sums over the leading axis (a bias's gradient:
 * sum(dy, 0) of (640, 32)), codegen/cg_lower_nn.c's reduction kernel
 * (docs/codegen.md, "Speed of the column sums"). For each column count C
 * one .g text gives
 *
 *   plain(x)    = sum(x, 0)        x: (R, C)
 *   fused(x, y) = sum(x * y, 0)    the product fused into the sum
 *
 * each timed in nanoseconds per call (the median and the fastest of
 * several rounds of many calls) and per input element.
 *
 *     bench_colsum [-R ROWS] [-t THREADS] [-r ROUNDS] [-n CALLS] [C ...]
 *
 * Defaults: 640 rows (the Transformer's B x T), 1 thread, 15 rounds of
 * 2000 calls, C = 7 16 32 33 48 64 65 100 202 1024.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_program.h"

typedef struct opts {
	int R, threads, rounds, calls;
} opts;

static cg_program *compile(ir_ctx *ctx, int R, int C, ir_module **m)
{
	char src[512];
	snprintf(src, sizeof src,
		 "model colsum\n\n"
		 "export def plain(x: f32[%d, %d])\n"
		 "  return sum(x, 0)\n\n"
		 "export def fused(x: f32[%d, %d], y: f32[%d, %d])\n"
		 "  return sum(x * y, 0)\n",
		 R, C, R, C, R, C);
	return bench_program_of(ctx, "colsum.g", src, m);
}

/* Times entry point fn on ins and outs as o says. */
static bench_timing time_fn(const cg_program *p, const char *fn, const opts *o,
			    const void *const *ins, void *const *outs)
{
	bench_calls c = {.rounds = o->rounds,
			 .calls = o->calls,
			 .threads = o->threads,
			 .clock = CLOCK_MONOTONIC,
			 .who = "bench_colsum"};
	return bench_time_entry(p, fn, &c, ins, outs);
}

static float *floats(size_t n, uint32_t seed)
{
	float *v = malloc(n * sizeof *v);
	for (size_t i = 0; v && i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		v[i] = (float)(seed >> 8) / (float)(1 << 24) - 0.5f;
	}
	return v;
}

static int run(ir_ctx *ctx, const opts *o, int C)
{
	ir_module *m = NULL;
	cg_program *p = compile(ctx, o->R, C, &m);
	if (!p || !cg_program_jit(p)) {
		fprintf(stderr, "bench_colsum: the program does not compile\n");
		cg_program_destroy(p);
		ir_module_destroy(m);
		return 1;
	}
	size_t n = (size_t)o->R * (size_t)C;
	float *x = floats(n, 1), *y = floats(n, 2), *out = floats((size_t)C, 3);
	const void *ins[2] = {x, y};
	void *outs[1] = {out};
	bench_timing tp = time_fn(p, "plain", o, ins, outs);
	bench_timing tf = time_fn(p, "fused", o, ins, outs);
	printf("(%d, %4d): sum(x, 0) %8.0f (%8.0f) ns, %.3f ns/element; "
	       "sum(x * y, 0) %8.0f (%8.0f) ns, %.3f ns/element\n",
	       o->R, C, tp.median, tp.best, tp.median / (double)n, tf.median,
	       tf.best, tf.median / (double)n);
	free(x);
	free(y);
	free(out);
	cg_program_destroy(p);
	ir_module_destroy(m);
	return 0;
}

static bool parse(int argc, char **argv, opts *o, int *cols, int *n_cols)
{
	*o = (opts){.R = 640, .threads = 1, .rounds = 15, .calls = 2000};
	*n_cols = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int *ints[] = {&o->R, &o->threads, &o->rounds, &o->calls};
		const char *flags = "Rtrn";
		const char *at = a[0] == '-' && a[1] && !a[2]
					 ? strchr(flags, a[1])
					 : NULL;
		if (a[0] != '-' && *n_cols < 32) {
			cols[(*n_cols)++] = atoi(a);
			continue;
		}
		if (!at || !v)
			return false;
		*ints[at - flags] = atoi(v);
		i++;
	}
	static const int dflt[] = {7, 16, 32, 33, 48, 64, 65, 100, 202, 1024};
	if (*n_cols == 0)
		for (int i = 0; i < 10; i++)
			cols[(*n_cols)++] = dflt[i];
	for (int i = 0; i < *n_cols; i++)
		if (cols[i] <= 0)
			return false;
	return o->R > 0 && o->threads > 0 && o->rounds >= 1 &&
	       o->rounds <= 64 && o->calls > 0;
}

int main(int argc, char **argv)
{
	opts o;
	int cols[32], n_cols;
	if (!parse(argc, argv, &o, cols, &n_cols)) {
		fprintf(stderr,
			"usage: bench_colsum [-R ROWS] [-t THREADS] [-r ROUNDS] "
			"[-n CALLS] [C ...]\n");
		return 2;
	}
	printf("%d thread%s; ns per call, median (fastest) of %d rounds of %d calls\n",
	       o.threads, o.threads == 1 ? "" : "s", o.rounds, o.calls);
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	int rc = 0;
	for (int i = 0; i < n_cols && rc == 0; i++)
		rc = run(&ctx, &o, cols[i]);
	ir_ctx_fini(&ctx);
	return rc;
}
