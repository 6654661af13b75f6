/*
 * test_model_check.h - the harness of the tests that compile a model of
 * tests/models/ and check its entries against themselves and the
 * interpreter (test_codegen_layer_norm.c, _softmax_rows.c,
 * _small_matmul.c, _epilogue.c): the model with its losses' gradients,
 * one entry run fused and unfused, at 1 and 2 threads with rows split
 * one by one, its outputs compared bit for bit and with the float32 and
 * float64 interpreters.
 */
#ifndef ATTNC_TEST_MODEL_CHECK_H
#define ATTNC_TEST_MODEL_CHECK_H

#include "cg_program.h"
#include "frontend.h"
#include "interp.h"
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 32 /* loss_I_grad: the loss and every parameter's gradient */
#define TM_MAX_PARAMS 32
#define TM_MAX_INPUTS 8
#define TM_MAX_SYMS 16

typedef struct tm_model {
	ir_ctx ctx;
	ir_module *m;
	int64_t syms[TM_MAX_SYMS]; /* each dim's fallback */
	uint32_t n_in;
	interp_tensor in[TM_MAX_INPUTS], params[TM_MAX_PARAMS];
} tm_model;

static inline size_t tm_round64(size_t n)
{
	return (n + 63) / 64 * 64 + 64;
}

/* The model at path (from the source tree) with the gradient of each of
 * the n losses named; its dims at their fallbacks, its parameters of
 * seed 5. */
static inline void tm_model_init_named(tm_model *md, const char *path,
				       const char *const *losses, int n)
{
	memset(md, 0, sizeof *md);
	ir_ctx_init(&md->ctx);
	uint32_t file = ir_ctx_load_source(&md->ctx, tu_path(path));
	ck_assert_uint_ne(file, 0);
	md->m = fe_compile(&md->ctx, file);
	ck_assert(md->m != NULL);
	pass_options po = {0};
	ck_assert(pass_pipeline_forward(md->m, &po));
	for (int w = 0; w < n; w++)
		ck_assert(pass_autodiff(md->m, losses[w]));
	ck_assert(pass_pipeline_run(md->m, &po));
	ck_assert_uint_le(md->m->n_syms, TM_MAX_SYMS);
	for (uint32_t i = 0; i < md->m->n_syms; i++)
		md->syms[i] = md->m->syms[i].fallback;
	ck_assert_uint_le(md->m->n_params, TM_MAX_PARAMS);
	ck_assert(interp_params_init(&md->ctx, md->m, md->syms, 5, false,
				     md->params));
}

/* The same with the gradient of loss_ID for each of the n ids. */
static inline void tm_model_init(tm_model *md, const char *path, const int *ids,
				 int n)
{
	char names[MAXT][32];
	const char *losses[MAXT];
	ck_assert_int_le(n, MAXT);
	for (int w = 0; w < n; w++) {
		snprintf(names[w], sizeof names[w], "loss_%d", ids[w]);
		losses[w] = names[w];
	}
	tm_model_init_named(md, path, losses, n);
}

static inline void tm_model_fini(tm_model *md)
{
	for (uint32_t i = 0; i < md->m->n_params; i++)
		interp_tensor_fini(&md->ctx, &md->params[i]);
	ir_module_destroy(md->m);
	ir_ctx_fini(&md->ctx);
}

/* f's inputs, from one stream: floats in [-1, 1), ids in [0, 10). */
static inline void tm_inputs_init(tm_model *md, const ir_func *f)
{
	uint64_t rng = 7;
	ck_assert_uint_le(f->n_inputs, TM_MAX_INPUTS);
	md->n_in = f->n_inputs;
	for (uint32_t i = 0; i < f->n_inputs; i++) {
		const ir_type *t = &f->g.nodes[f->inputs[i]].type;
		int64_t dims[IR_MAX_RANK];
		for (int d = 0; d < t->rank; d++)
			dims[d] = t->dims[d].coef *
				  (t->dims[d].sym < 0
					   ? 1
					   : md->syms[t->dims[d].sym]);
		ck_assert(interp_tensor_alloc(&md->ctx, &md->in[i], t->dtype,
					      t->rank, dims));
		for (int64_t e = 0; e < interp_tensor_numel(&md->in[i]); e++) {
			rng = rng * 6364136223846793005ull +
			      1442695040888963407ull;
			uint32_t r = (uint32_t)(rng >> 33);
			if (t->dtype == IR_I32)
				((int32_t *)md->in[i].data)[e] = (int32_t)(r %
									   10);
			else
				((float *)md->in[i].data)[e] = (float)(r % 2000) /
								       1000.0f -
							       1.0f;
		}
	}
}

static inline void tm_inputs_fini(tm_model *md)
{
	for (uint32_t i = 0; i < md->n_in; i++)
		interp_tensor_fini(&md->ctx, &md->in[i]);
	md->n_in = 0;
}

/* Entry fname alone, rows split one by one; keep_zero_rows: its sgemms
 * compute the zero rows they would leave out. */
static inline cg_program *tm_compile_with(tm_model *md, const char *fname,
					  bool no_fuse, bool keep_zero_rows)
{
	const char *only[1] = {fname};
	cg_program_options o = {.only = only,
				.n_only = 1,
				.no_fuse = no_fuse,
				.keep_zero_rows = keep_zero_rows,
				.grain = 1};
	cg_program *p = cg_program_create(&md->ctx, md->m, md->syms, &o);
	ck_assert(p != NULL);
	ck_assert(cg_program_jit(p));
	return p;
}

static inline cg_program *tm_compile(tm_model *md, const char *fname,
				     bool no_fuse)
{
	return tm_compile_with(md, fname, no_fuse, false);
}

/* Entry fname of p on n_threads; outs[k] receives output k (malloc'd). */
static inline void tm_jit_run(tm_model *md, cg_program *p, const char *fname,
			      int n_threads, float **outs)
{
	char *pb = aligned_alloc(64, tm_round64(cg_program_params_bytes(p)));
	char *sb = aligned_alloc(64,
				 tm_round64(cg_program_scratch_bytes(p, fname)));
	ck_assert(pb && sb);
	uint32_t n;
	const attnrt_param_info *pi = cg_program_params(p, &n);
	for (uint32_t i = 0; i < n; i++)
		memcpy(pb + pi[i].offset, md->params[i].data,
		       (size_t)interp_tensor_numel(&md->params[i]) * 4);
	const attnrt_tensor_info *oi = cg_program_outputs(p, fname, &n);
	ck_assert_uint_le(n, MAXT);
	void *o[MAXT];
	for (uint32_t k = 0; k < n; k++) {
		size_t e = 1;
		for (int d = 0; d < oi[k].rank; d++)
			e *= (size_t)oi[k].dims[d];
		o[k] = outs[k] = calloc(e + 1, 4);
	}
	const void *ins[TM_MAX_INPUTS];
	for (uint32_t i = 0; i < md->n_in; i++)
		ins[i] = md->in[i].data;
	attnrt_run run = {.seed = 3, .n_threads = n_threads};
	ck_assert_int_eq(cg_program_entry(p, fname)(&run, pb, sb, ins, o), 0);
	free(pb);
	free(sb);
}

/* Entry name of md's module, fused and unfused, at 1 and 2 threads: the
 * same bits; the float32 interpreter's values within 1e-5 (relative, or
 * absolute near zero), the float64 interpreter's within 1e-4. */
static inline void tm_check_entry(tm_model *md, const char *name)
{
	const ir_func *f = ir_module_find_func(md->m, name);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_le(f->n_outputs, MAXT);
	tm_inputs_init(md, f);
	cg_program *fused = tm_compile(md, name, false);
	cg_program *plain = tm_compile(md, name, true);
	interp_tensor want[MAXT] = {0}, want64[MAXT] = {0},
		      p64[TM_MAX_PARAMS] = {0};
	interp_opts io = {.seed = 3}, io64 = {.seed = 3, .is_f64 = true};
	ck_assert(interp_run(&md->ctx, md->m, f, &io, md->params, md->in, want));
	ck_assert(interp_params_init(&md->ctx, md->m, md->syms, 5, true, p64));
	ck_assert(interp_run(&md->ctx, md->m, f, &io64, p64, md->in, want64));
	float *got[MAXT], *got2[MAXT], *ref[MAXT];
	tm_jit_run(md, fused, name, 1, got);
	tm_jit_run(md, fused, name, 2, got2);
	tm_jit_run(md, plain, name, 1, ref);
	for (uint32_t k = 0; k < f->n_outputs; k++) {
		size_t n = (size_t)interp_tensor_numel(&want[k]);
		ck_assert_msg(memcmp(got[k], got2[k], n * 4) == 0,
			      "%s output %s: 2 threads differ from 1", name,
			      f->output_names[k]);
		ck_assert_msg(memcmp(got[k], ref[k], n * 4) == 0,
			      "%s output %s: fused differs from unfused", name,
			      f->output_names[k]);
		double e = tu_max_rel_err(got[k], want[k].data, n, 1e-5, 1e-5);
		ck_assert_msg(e <= 1, "%s output %s: JIT vs interpreter %g",
			      name, f->output_names[k], e);
		float *w64 = malloc(n * 4);
		for (size_t i = 0; i < n; i++)
			w64[i] = (float)interp_tensor_get(&want64[k],
							  (int64_t)i);
		e = tu_max_rel_err(got[k], w64, n, 1e-4, 1e-4);
		ck_assert_msg(e <= 1, "%s output %s: JIT vs float64 %g", name,
			      f->output_names[k], e);
		free(w64);
		free(got[k]);
		free(got2[k]);
		free(ref[k]);
		interp_tensor_fini(&md->ctx, &want[k]);
		interp_tensor_fini(&md->ctx, &want64[k]);
	}
	for (uint32_t i = 0; i < md->m->n_params; i++)
		interp_tensor_fini(&md->ctx, &p64[i]);
	cg_program_destroy(fused);
	cg_program_destroy(plain);
	tm_inputs_fini(md);
}

#endif
