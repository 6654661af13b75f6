/*
 * gelu.c - benchmark of GELU's fused elementwise kernels at the sizes of
 * the width-256 GPT's MLP (1,024 tokens by 1,024 features): one .g text
 * gives
 *
 *   fwd(x, b)     = gelu(x + b)                 GELU's forward kernel
 *   bwd(x, b, g)  = the gradient of gelu(x + b) times g, written as
 *                   autodiff writes it (one kernel, 14 fused nodes)
 *   both(x, b, g) = fwd and bwd in one function: the fuse_gelu pass
 *                   has bwd's kernel take 1 + erf from fwd's result
 *                   (y / (x 0.5)) instead of computing erf again
 *   relu_fwd(x, b) = relu(x + b)                the same bytes, no erf
 *
 * each timed in CPU time of this process per call (the median and the
 * fastest of several rounds of calls; CPU time leaves out the time
 * other processes take on a shared machine) and per element, so that
 * fwd's and bwd's time over relu's says how much of them is arithmetic
 * rather than memory traffic; both's over fwd's, what the backward
 * costs once it reads y.
 *
 *     bench_gelu [-R ROWS] [-C COLS] [-t THREADS] [-r ROUNDS] [-n CALLS]
 *
 * Defaults: 1024 x 1024, 1 thread, 15 rounds of 20 calls.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_program.h"

static cg_program *compile(ir_ctx *ctx, int R, int C, ir_module **m)
{
	char src[1024];
	snprintf(src, sizeof src,
		 "model gelu_bench\n\n"
		 "export def fwd(x: f32[%d, %d], b: f32[%d])\n"
		 "  return gelu(x + b)\n\n"
		 "export def bwd(x: f32[%d, %d], b: f32[%d], g: f32[%d, %d])\n"
		 "  h = x + b\n"
		 "  u = h * 0.7071067811865476\n"
		 "  d = exp(-(u * u)) * 1.1283791670955126\n"
		 "  return (g * (1 + erf(u))) * 0.5 + "
		 "((g * (h * 0.5)) * d) * 0.7071067811865476\n\n"
		 "export def both(x: f32[%d, %d], b: f32[%d], g: f32[%d, %d])\n"
		 "  h = x + b\n"
		 "  u = h * 0.7071067811865476\n"
		 "  d = exp(-(u * u)) * 1.1283791670955126\n"
		 "  return gelu(h), (g * (1 + erf(u))) * 0.5 + "
		 "((g * (h * 0.5)) * d) * 0.7071067811865476\n\n"
		 "export def relu_fwd(x: f32[%d, %d], b: f32[%d])\n"
		 "  return relu(x + b)\n",
		 R, C, C, R, C, C, R, C, R, C, C, R, C, R, C, C);
	return bench_program_of(ctx, "gelu.g", src, m);
}

/* Times entry point fn on ins and outs as o says. */
static bench_timing time_fn(const cg_program *p, const char *fn,
			    const bench_rows_opts *o, const void *const *ins,
			    void *const *outs)
{
	bench_calls c = {.rounds = o->rounds,
			 .calls = o->calls,
			 .threads = o->threads,
			 .clock = CLOCK_PROCESS_CPUTIME_ID,
			 .who = "bench_gelu"};
	return bench_time_entry(p, fn, &c, ins, outs);
}

/* n floats of about N(0, 1) (a sum of uniforms), as pre-activations. */
static float *floats(size_t n, uint64_t seed)
{
	float *v = malloc(n * sizeof *v);
	for (size_t i = 0; v && i < n; i++)
		v[i] = bench_rng_float(&seed) + bench_rng_float(&seed) +
		       bench_rng_float(&seed);
	return v;
}

int main(int argc, char **argv)
{
	bench_rows_opts o = {1024, 1024, 1, 15, 20};
	if (!bench_rows_parse(argc, argv, "bench_gelu", &o))
		return 2;
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	ir_module *m = NULL;
	cg_program *p = compile(&ctx, o.R, o.C, &m);
	if (!bench_program_jit(&ctx, p, m, "bench_gelu"))
		return 1;
	size_t n = (size_t)o.R * (size_t)o.C;
	float *x = floats(n, 1), *b = floats((size_t)o.C, 2), *g = floats(n, 3),
	      *out = floats(n, 4), *out2 = floats(n, 5);
	if (!x || !b || !g || !out || !out2) {
		fprintf(stderr, "bench_gelu: out of memory\n");
		return 1;
	}
	const void *ins[3] = {x, b, g};
	void *outs[2] = {out, out2};
	printf("%d x %d, %d thread%s; CPU ns per call, median (fastest) of "
	       "%d rounds of %d calls\n",
	       o.R, o.C, o.threads, o.threads == 1 ? "" : "s", o.rounds,
	       o.calls);
	static const char *const fns[] = {"fwd", "bwd", "both", "relu_fwd"};
	for (int i = 0; i < 4; i++) {
		bench_timing t = time_fn(p, fns[i], &o, ins, outs);
		printf("%-8s %10.0f (%10.0f) ns, %.3f ns/element\n", fns[i],
		       t.median, t.best, t.median / (double)n);
	}
	free(x);
	free(b);
	free(g);
	free(out);
	free(out2);
	cg_program_destroy(p);
	ir_module_destroy(m);
	ir_ctx_fini(&ctx);
	return 0;
}
