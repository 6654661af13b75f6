/*
 * cross_entropy.c - benchmark of the fused cross-entropy row kernel at
 * the size of the book's Transformer's loss (320 rows of 202 logits,
 * half of them padding): one IR text gives
 *
 *   ce(x, b, y, g) = cross_entropy_with_grad(x + b, y, g)
 *
 * the logits' bias add computed in the kernel, as the models' linear
 * layer feeds it; rows t >= 5 of each 10 have g = 0 (a padding token's
 * row of a masked loss), so that their gradient's row is written
 * without the division, as a dead row's is. Timed in CPU time of this
 * process per call (the median and the fastest of several rounds of
 * calls) and per row.
 *
 *     bench_cross_entropy [-R ROWS] [-C COLS] [-t THREADS] [-r ROUNDS]
 *                         [-n CALLS]
 *
 * Defaults: 320 x 202, 1 thread, 15 rounds of 200 calls.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_program.h"

static cg_program *compile(ir_ctx *ctx, int R, int C, ir_module **m)
{
	char src[2048];
	snprintf(src, sizeof src,
		 "module ce_bench\n"
		 "export func @ce(x: f32[%d, %d], b: f32[%d], y: i32[%d], "
		 "g: f32[%d]) {\n"
		 "  %%0 = input {index=0} : f32[%d, %d]\n"
		 "  %%1 = input {index=1} : f32[%d]\n"
		 "  %%2 = input {index=2} : i32[%d]\n"
		 "  %%3 = input {index=3} : f32[%d]\n"
		 "  %%4 = add %%0, %%1 : f32[%d, %d]\n"
		 "  %%5 = cross_entropy_with_grad %%4, %%2, %%3 : "
		 "f32[2, %d, %d]\n"
		 "  return %%5 as out0\n"
		 "}\n",
		 R, C, C, R, R, R, C, C, R, R, R, C, R, C);
	return bench_program_of(ctx, "cross_entropy.ir", src, m);
}

int main(int argc, char **argv)
{
	bench_rows_opts o = {320, 202, 1, 15, 200};
	if (!bench_rows_parse(argc, argv, "bench_cross_entropy", &o))
		return 2;
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	ir_module *m = NULL;
	cg_program *p = compile(&ctx, o.R, o.C, &m);
	if (!bench_program_jit(&ctx, p, m, "bench_cross_entropy"))
		return 1;
	size_t n = (size_t)o.R * (size_t)o.C;
	float *x = malloc(n * 4), *b = malloc((size_t)o.C * 4),
	      *g = malloc((size_t)o.R * 4), *out = malloc(2 * n * 4);
	int32_t *y = malloc((size_t)o.R * 4);
	if (!x || !b || !g || !out || !y) {
		fprintf(stderr, "bench_cross_entropy: out of memory\n");
		return 1;
	}
	uint64_t seed = 1;
	for (size_t i = 0; i < n; i++)
		x[i] = 4 * (bench_rng_float(&seed) - 0.5f);
	for (int j = 0; j < o.C; j++)
		b[j] = bench_rng_float(&seed) - 0.5f;
	for (int r = 0; r < o.R; r++) {
		y[r] = (int32_t)((uint32_t)(r * 7919) % (uint32_t)o.C);
		g[r] = r % 10 < 5 ? 1.0f / (float)o.R : 0.0f;
	}
	const void *ins[4] = {x, b, y, g};
	void *outs[1] = {out};
	printf("%d x %d, %d thread%s; CPU ns per call, median (fastest) of "
	       "%d rounds of %d calls\n",
	       o.R, o.C, o.threads, o.threads == 1 ? "" : "s", o.rounds,
	       o.calls);
	bench_calls c = {.rounds = o.rounds,
			 .calls = o.calls,
			 .threads = o.threads,
			 .clock = CLOCK_PROCESS_CPUTIME_ID,
			 .who = "bench_cross_entropy"};
	bench_timing t = bench_time_entry(p, "ce", &c, ins, outs);
	printf("%-4s %10.0f (%10.0f) ns, %.2f ns/row\n", "ce", t.median, t.best,
	       t.median / (double)o.R);
	free(x);
	free(b);
	free(g);
	free(y);
	free(out);
	cg_program_destroy(p);
	ir_module_destroy(m);
	ir_ctx_fini(&ctx);
	return 0;
}
