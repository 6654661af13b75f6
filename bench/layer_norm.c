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
 * and a .g text, differentiated as a training step's loss is, gives
 *
 *   grad(d)             = loss_grad of sum(norm(x) * d), x a parameter:
 *                         the whole backward of a layer norm (x's
 *                         layer_norm_grad, gamma's and beta's column sums
 *                         and what gamma's needs of x), as a model's
 *                         step runs it, and the forward before it
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

/* The .g program of grad: a layer norm's loss, differentiated; NULL
 * when it does not compile. */
static cg_program *compile_grad(ir_ctx *ctx, int R, int C, ir_module **m)
{
	char src[1024];
	snprintf(src, sizeof src,
		 "model ln_grad_bench\n"
		 "export def loss(d: f32[%d, %d])\n"
		 "  param x : [%d, %d] = normal(0, 1)\n"
		 "  return sum(norm(x) * d)\n",
		 R, C, R, C);
	uint32_t file = ir_ctx_add_source(ctx, "ln_grad.g", src, strlen(src));
	*m = fe_compile(ctx, file);
	pass_options po = {0};
	if (!*m || !pass_pipeline_forward(*m, &po) ||
	    !pass_autodiff(*m, "loss") || !pass_pipeline_run(*m, &po))
		return NULL;
	return cg_program_create(ctx, *m, NULL, NULL);
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

/* Times loss_grad of compile_grad's program on d, its parameters x
 * (about N(0.5, 1)), gamma (about 1) and beta; false when it does not
 * compile. */
static bool time_grad(const bench_rows_opts *o, const float *d)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	ir_module *m = NULL;
	cg_program *p = compile_grad(&ctx, o->R, o->C, &m);
	bool ok = p && cg_program_jit(p);
	char *pb = NULL;
	void *outs[8] = {0};
	uint32_t n_out = 0;
	if (ok) {
		pb = aligned_alloc(64, (cg_program_params_bytes(p) + 127) / 64 *
					       64);
		uint32_t n;
		const attnrt_param_info *pi = cg_program_params(p, &n);
		for (uint32_t i = 0; pb && i < n; i++) {
			size_t e = 1;
			for (int k = 0; k < pi[i].rank; k++)
				e *= (size_t)pi[i].dims[k];
			bool is_x = strcmp(pi[i].name, "x") == 0,
			     is_gamma = strstr(pi[i].name, "gamma") != NULL;
			float *v = floats(e, 10 + i, is_x ? 0.5f : 0);
			for (size_t k = 0; v && is_gamma && k < e; k++)
				v[k] = 1 + v[k] / 8;
			if (v)
				memcpy(pb + pi[i].offset, v, e * 4);
			ok = ok && v;
			free(v);
		}
		const attnrt_tensor_info *oi = cg_program_outputs(p, "loss_grad",
								  &n_out);
		ok = ok && pb && n_out <= 8;
		for (uint32_t k = 0; ok && k < n_out; k++) {
			size_t e = 1;
			for (int r = 0; r < oi[k].rank; r++)
				e *= (size_t)oi[k].dims[r];
			outs[k] = calloc(e + 16, 4);
			ok = outs[k] != NULL;
		}
	}
	if (ok) {
		bench_calls c = {.rounds = o->rounds,
				 .calls = o->calls,
				 .threads = o->threads,
				 .params = pb,
				 .clock = CLOCK_PROCESS_CPUTIME_ID,
				 .who = "bench_layer_norm"};
		const void *ins[1] = {d};
		bench_timing t = bench_time_entry(p, "loss_grad", &c, ins, outs);
		printf("%-4s %10.0f (%10.0f) ns, %.2f ns/row\n", "grad",
		       t.median, t.best, t.median / (double)o->R);
	}
	for (uint32_t k = 0; k < 8; k++)
		free(outs[k]);
	free(pb);
	cg_program_destroy(p);
	ir_module_destroy(m);
	ir_ctx_fini(&ctx);
	return ok;
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
	if (!bench_program_jit(&ctx, p, m, "bench_layer_norm"))
		return 1;
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
	if (!time_grad(&o, g)) {
		fprintf(stderr, "bench_layer_norm: the gradient's program does "
				"not compile\n");
		return 1;
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
