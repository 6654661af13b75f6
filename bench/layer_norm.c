/*
 * layer_norm.c - benchmark of the layer norm row kernels at the sizes of
 * the book's Transformer (640 rows of 32) and of the width-256 GPT
 * (1,024 rows of 256): one IR text (layer_norm_grad is made by autodiff,
 * so the text is IR, not .g) gives
 *
 *   fwd(x, gamma, beta) = layer_norm(x, gamma, beta)
 *   bwd(x, gamma, g)    = layer_norm_grad(x, gamma, g)
 *   add(x, g)           = x + g, the same rows read, a floor
 *   mean(x)             = mean(x, -1), the rows' means (the sum kernel
 *                         of cg_lower_rowred.c, in the interpreter's order)
 *
 * each timed in CPU time of this process per call (the median and the
 * fastest of several rounds of calls) and per row.
 *
 *     bench_layer_norm [-R ROWS] [-C COLS] [-t THREADS] [-r ROUNDS]
 *                      [-n CALLS]
 *
 * Defaults: 640 x 32, 1 thread, 15 rounds of 200 calls.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_program.h"

static cg_program *compile(ir_ctx *ctx, int R, int C, ir_module **m)
{
	char src[4096];
	snprintf(src, sizeof src,
		 "module ln_bench\n"
		 "export func @fwd(x: f32[%d, %d], g: f32[%d], b: f32[%d]) {\n"
		 "  %%0 = input {index=0} : f32[%d, %d]\n"
		 "  %%1 = input {index=1} : f32[%d]\n"
		 "  %%2 = input {index=2} : f32[%d]\n"
		 "  %%3 = layer_norm %%0, %%1, %%2 {eps=1e-05} : f32[%d, %d]\n"
		 "  return %%3 as out0\n"
		 "}\n"
		 "export func @bwd(x: f32[%d, %d], g: f32[%d], d: f32[%d, %d]) "
		 "{\n"
		 "  %%0 = input {index=0} : f32[%d, %d]\n"
		 "  %%1 = input {index=1} : f32[%d]\n"
		 "  %%2 = input {index=2} : f32[%d, %d]\n"
		 "  %%3 = layer_norm_grad %%0, %%1, %%2 {eps=1e-05} : "
		 "f32[%d, %d]\n"
		 "  return %%3 as out0\n"
		 "}\n"
		 "export func @add(x: f32[%d, %d], d: f32[%d, %d]) {\n"
		 "  %%0 = input {index=0} : f32[%d, %d]\n"
		 "  %%1 = input {index=1} : f32[%d, %d]\n"
		 "  %%2 = add %%0, %%1 : f32[%d, %d]\n"
		 "  return %%2 as out0\n"
		 "}\n"
		 "export func @mean(x: f32[%d, %d]) {\n"
		 "  %%0 = input {index=0} : f32[%d, %d]\n"
		 "  %%1 = mean %%0 {axes=[1], keepdim=0} : f32[%d]\n"
		 "  return %%1 as out0\n"
		 "}\n",
		 R, C, C, C, R, C, C, C, R, C, R, C, C, R, C, R, C, C, R, C, R,
		 C, R, C, R, C, R, C, R, C, R, C, R, C, R, C, R);
	return bench_program_of(ctx, "layer_norm.ir", src, m);
}

/* n floats of about N(0, 1) (a sum of uniforms), shifted by shift. */
static float *floats(size_t n, uint64_t seed, float shift)
{
	float *v = malloc(n * sizeof *v);
	for (size_t i = 0; v && i < n; i++)
		v[i] = bench_rng_float(&seed) + bench_rng_float(&seed) +
		       bench_rng_float(&seed) + shift;
	return v;
}

int main(int argc, char **argv)
{
	bench_rows_opts o = {640, 32, 1, 15, 200};
	if (!bench_rows_parse(argc, argv, "bench_layer_norm", &o))
		return 2;
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	ir_module *m = NULL;
	cg_program *p = compile(&ctx, o.R, o.C, &m);
	if (!p || !cg_program_jit(p)) {
		fprintf(stderr, "bench_layer_norm: the program does not "
				"compile\n");
		cg_program_destroy(p);
		ir_module_destroy(m);
		ir_ctx_fini(&ctx);
		return 1;
	}
	size_t n = (size_t)o.R * (size_t)o.C;
	float *x = floats(n, 1, 0.5f), *ga = floats((size_t)o.C, 2, 1),
	      *be = floats((size_t)o.C, 3, 0), *g = floats(n, 4, 0),
	      *out = floats(n, 5, 0);
	if (!x || !ga || !be || !g || !out) {
		fprintf(stderr, "bench_layer_norm: out of memory\n");
		return 1;
	}
	const void *in_fwd[3] = {x, ga, be}, *in_bwd[3] = {x, ga, g},
		   *in_add[2] = {x, g};
	const void *const *ins[4] = {in_fwd, in_bwd, in_add, in_add};
	void *outs[1] = {out};
	printf("%d x %d, %d thread%s; CPU ns per call, median (fastest) of "
	       "%d rounds of %d calls\n",
	       o.R, o.C, o.threads, o.threads == 1 ? "" : "s", o.rounds,
	       o.calls);
	static const char *const fns[] = {"fwd", "bwd", "add", "mean"};
	for (int i = 0; i < 4; i++) {
		bench_calls c = {.rounds = o.rounds,
				 .calls = o.calls,
				 .threads = o.threads,
				 .clock = CLOCK_PROCESS_CPUTIME_ID,
				 .who = "bench_layer_norm"};
		bench_timing t = bench_time_entry(p, fns[i], &c, ins[i], outs);
		printf("%-4s %10.0f (%10.0f) ns, %.2f ns/row\n", fns[i],
		       t.median, t.best, t.median / (double)o.R);
	}
	free(x);
	free(ga);
	free(be);
	free(g);
	free(out);
	cg_program_destroy(p);
	ir_module_destroy(m);
	ir_ctx_fini(&ctx);
	return 0;
}
