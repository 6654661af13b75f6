/*
 * test_codegen_lower_models.c - every exported function of the book's
 * models (each models/NAME.g through the front end and the pass pipeline)
 * and of tests/models/gelu_mlp.g, run
 * by the JIT and by the reference interpreter on the same inputs (the
 * function's example, else random ones) and parameters, in evaluation
 * and in training mode (dropout masks included), with 1 and 2 threads.
 */
#include "cg_program.h"
#include "frontend.h"
#include "interp.h"
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const model_files[] = {
	"models/nadaraya_watson.g",    "models/nw_param.g",
	"models/additive_attention.g", "models/dot_product_attention.g",
	"models/bahdanau.g",           "models/multihead_attention.g",
	"models/self_attention.g",     "models/transformer.g",
	"tests/models/gelu_mlp.g",
};
#define N_MODELS (sizeof model_files / sizeof *model_files)
#define MAXT 32

typedef struct model {
	ir_ctx ctx;
	ir_module *m;
	uint64_t rng;
} model;

static void model_load(model *md, const char *rel)
{
	memset(md, 0, sizeof *md);
	ir_ctx_init(&md->ctx);
	uint32_t file = ir_ctx_load_source(&md->ctx, tu_path(rel));
	ck_assert_uint_ne(file, 0);
	md->m = fe_compile(&md->ctx, file);
	ck_assert_msg(md->m != NULL, "%s does not compile", rel);
	pass_options po = {0};
	ck_assert(pass_pipeline_run(md->m, &po));
	md->rng = 99;
}

static void model_free(model *md)
{
	ir_module_destroy(md->m);
	ir_ctx_fini(&md->ctx);
}

static uint64_t next(model *md)
{
	md->rng = md->rng * 6364136223846793005ull + 1442695040888963407ull;
	return md->rng >> 33;
}

/* The function's inputs: its example, or random values (ids and lengths
 * in [0, 4], floats in [-1, 1), symbols without a value at 3). */
static void make_inputs(model *md, const ir_func *f, interp_tensor *in)
{
	for (uint32_t i = 0; i < f->n_inputs; i++) {
		if (f->example) {
			const ir_const *c = &md->m->consts[f->example[i]];
			int64_t dims[IR_MAX_RANK];
			for (int d = 0; d < c->type.rank; d++)
				dims[d] = c->type.dims[d].coef;
			ck_assert(interp_tensor_alloc(&md->ctx, &in[i],
						      c->type.dtype,
						      c->type.rank, dims));
			memcpy(in[i].data, c->data,
			       (size_t)interp_tensor_numel(&in[i]) * 4);
			continue;
		}
		const ir_type *t = &f->g.nodes[f->inputs[i]].type;
		int64_t dims[IR_MAX_RANK];
		for (int d = 0; d < t->rank; d++) {
			ir_dim dm = t->dims[d];
			int64_t v = dm.sym < 0 ? 1
				    : md->m->syms[dm.sym].fallback
					    ? md->m->syms[dm.sym].fallback
					    : 3;
			dims[d] = dm.coef * v;
		}
		ck_assert(interp_tensor_alloc(&md->ctx, &in[i], t->dtype,
					      t->rank, dims));
		for (int64_t e = 0; e < interp_tensor_numel(&in[i]); e++) {
			if (t->dtype == IR_I32)
				((int32_t *)in[i].data)[e] = (int32_t)(next(md) %
								       5);
			else
				((float *)in[i].data)[e] = (float)(next(md) %
								   2000000) /
								   1e6f -
							   1;
		}
	}
}

static size_t round64(size_t n)
{
	return (n + 63) / 64 * 64 + 64;
}

/* Runs the entry point of f; returns its status; outs get malloc'd
 * buffers. */
static int jit_run(cg_program *p, const ir_func *f, const interp_tensor *in,
		   const interp_tensor *params, const interp_opts *o,
		   int n_threads, void **outs)
{
	char *pb = aligned_alloc(64, round64(cg_program_params_bytes(p)));
	char *sb = aligned_alloc(64,
				 round64(cg_program_scratch_bytes(p, f->name)));
	uint32_t n;
	const attnrt_param_info *pi = cg_program_params(p, &n);
	for (uint32_t i = 0; i < n; i++)
		memcpy(pb + pi[i].offset, params[i].data,
		       (size_t)interp_tensor_numel(&params[i]) * 4);
	const void *ins[MAXT];
	for (uint32_t i = 0; i < f->n_inputs; i++)
		ins[i] = in[i].data;
	const attnrt_tensor_info *oi = cg_program_outputs(p, f->name, &n);
	for (uint32_t k = 0; k < n; k++) {
		size_t e = 1;
		for (int d = 0; d < oi[k].rank; d++)
			e *= (size_t)oi[k].dims[d];
		outs[k] = calloc(e + 1, 4);
	}
	attnrt_run run = {o->seed, o->step, o->is_training, n_threads};
	int st = cg_program_entry(p, f->name)(&run, pb, sb, ins, outs);
	free(pb);
	free(sb);
	return st;
}

static void compare(const char *what, const interp_tensor *want,
		    const void *got, double tol)
{
	int64_t n = interp_tensor_numel(want);
	if (want->dtype == IR_I32) {
		ck_assert_msg(memcmp(want->data, got, (size_t)n * 4) == 0,
			      "%s: integers differ", what);
		return;
	}
	for (int64_t i = 0; i < n; i++) {
		float a = ((const float *)got)[i],
		      b = ((const float *)want->data)[i];
		if (isnan(a) && isnan(b))
			continue;
		ck_assert_msg(tu_max_rel_err(&a, &b, 1, tol, tol) <= 1,
			      "%s element %lld: interp %.9g, jit %.9g", what,
			      (long long)i, b, a);
	}
}

/* f through the interpreter in mode o, then the JIT with 1 and 2
 * threads, on the same inputs and parameters. */
static void check_mode(model *md, cg_program *p, const ir_func *f,
		       const interp_tensor *in, const interp_tensor *params,
		       const interp_opts *o)
{
	interp_tensor want[MAXT] = {0};
	ck_assert_msg(interp_run(&md->ctx, md->m, f, o, params, in, want),
		      "interp %s.%s", md->m->name, f->name);
	for (int threads = 1; threads <= 2; threads++) {
		void *got[MAXT] = {0};
		int st = jit_run(p, f, in, params, o, threads, got);
		ck_assert_msg(st == 0, "%s.%s returned %d", md->m->name,
			      f->name, st);
		for (uint32_t k = 0; k < f->n_outputs; k++) {
			char what[128];
			snprintf(what, sizeof what,
				 "%s.%s output %u (%s, %d threads)",
				 md->m->name, f->name, k,
				 o->is_training ? "training" : "eval", threads);
			compare(what, &want[k], got[k], 2e-4);
			free(got[k]);
		}
	}
	for (uint32_t k = 0; k < f->n_outputs; k++)
		interp_tensor_fini(&md->ctx, &want[k]);
}

/* One function, compiled once (with the symbols its inputs bind), in
 * evaluation and in training mode. */
static void check_func(model *md, const ir_func *f)
{
	interp_tensor in[MAXT] = {0}, params[256] = {0};
	int64_t syms[16] = {0};
	ck_assert_uint_le(md->m->n_params, 256);
	make_inputs(md, f, in);
	ck_assert(interp_bind_syms(&md->ctx, md->m, f, in, syms));
	for (uint32_t s = 0; s < md->m->n_syms; s++)
		if (!syms[s])
			syms[s] = 3;
	ck_assert(interp_params_init(&md->ctx, md->m, syms, 5, false, params));
	cg_program *p = cg_program_create(&md->ctx, md->m, syms, NULL);
	ck_assert_msg(p != NULL, "lowering %s failed", md->m->name);
	ck_assert(cg_program_jit(p));
	interp_opts eval = {.seed = 11},
		    train = {.is_training = true, .seed = 11, .step = 4};
	check_mode(md, p, f, in, params, &eval);
	check_mode(md, p, f, in, params, &train);
	cg_program_destroy(p);
	for (uint32_t i = 0; i < f->n_inputs; i++)
		interp_tensor_fini(&md->ctx, &in[i]);
	for (uint32_t i = 0; i < md->m->n_params; i++)
		interp_tensor_fini(&md->ctx, &params[i]);
}

START_TEST(test_every_model_entry_point_matches_the_interpreter)
{
	model md;
	model_load(&md, model_files[_i]);
	for (uint32_t i = 0; i < md.m->n_funcs; i++) {
		const ir_func *f = md.m->funcs[i];
		if (!f->is_export)
			continue;
		check_func(&md, f);
	}
	model_free(&md);
}
END_TEST

START_TEST(test_transformer_module_compiles_at_the_training_batch_with_every_entry)
{
	model md;
	model_load(&md, "models/transformer.g");
	int64_t syms[16] = {0};
	for (uint32_t s = 0; s < md.m->n_syms; s++)
		syms[s] = md.m->syms[s].fallback ? md.m->syms[s].fallback : 64;
	cg_program *p = cg_program_create(&md.ctx, md.m, syms, NULL);
	ck_assert(p != NULL);
	ck_assert(cg_program_jit(p));
	cg_module_stats st = cg_program_stats(p);
	double total = cg_program_build_ms(p) + st.opt_ms + st.jit_ms;
	fprintf(stderr,
		"transformer: %u kernels (%u parallel), build %.0f ms, "
		"optimize %.0f ms, jit %.0f ms, total %.0f ms\n",
		cg_program_n_kernels(p), cg_program_n_parallel(p),
		cg_program_build_ms(p), st.opt_ms, st.jit_ms, total);
	/* Compile time is a benchmark (bench/compile_time.sh), not a test;
	 * that its work is counted is. */
	ck_assert_double_gt(cg_program_cpu_ms(p), 0);
	ck_assert_uint_eq(cg_program_n_entries(p), 4);
	for (uint32_t i = 0; i < cg_program_n_entries(p); i++)
		ck_assert(cg_program_entry(p, cg_program_entry_name(p, i)) !=
			  NULL);
	cg_program_destroy(p);
	model_free(&md);
}
END_TEST

/* The loss of the book's seq2seq models (loss: src, src_valid, tgt_in,
 * tgt, tgt_valid) on sequences of tokens 0 and 1 padded with token 2,
 * whose decoder embedding row is NaN when has_nan: the padding rows'
 * loss NaN (or not) in the interpreter and in the JIT at 1 and 2
 * threads. */
static void check_padding_nan(const char *file, const char *table, bool has_nan)
{
	model md;
	model_load(&md, file);
	const ir_func *f = NULL;
	for (uint32_t i = 0; i < md.m->n_funcs; i++)
		if (strcmp(md.m->funcs[i]->name, "loss") == 0)
			f = md.m->funcs[i];
	ck_assert(f != NULL && f->n_inputs == 5);
	interp_tensor in[MAXT] = {0}, params[256] = {0};
	int64_t syms[16] = {0};
	make_inputs(&md, f, in);
	int64_t B = in[1].dims[0], T = in[0].dims[1];
	int32_t *src = in[0].data, *sv = in[1].data, *ti = in[2].data,
		*tg = in[3].data, *tv = in[4].data;
	for (int64_t b = 0; b < B; b++) {
		sv[b] = (int32_t)(2 + b % 3);
		tv[b] = (int32_t)(3 + b % 4);
		for (int64_t t = 0; t < T; t++) {
			int64_t e = b * T + t;
			src[e] = t < sv[b] ? (int32_t)(t % 2) : 2;
			ti[e] = t < tv[b] ? (int32_t)((t + b) % 2) : 2;
			tg[e] = t < tv[b] ? (int32_t)((t + b + 1) % 2) : 2;
		}
	}
	ck_assert(interp_bind_syms(&md.ctx, md.m, f, in, syms));
	for (uint32_t s = 0; s < md.m->n_syms; s++)
		if (!syms[s])
			syms[s] = 3;
	ck_assert(interp_params_init(&md.ctx, md.m, syms, 5, false, params));
	int32_t ti_p = -1;
	for (uint32_t i = 0; i < md.m->n_params; i++)
		if (strcmp(md.m->params[i].name, table) == 0)
			ti_p = (int32_t)i;
	ck_assert_int_ge(ti_p, 0);
	float *row = (float *)params[ti_p].data +
		     2 * params[ti_p].dims[params[ti_p].rank - 1];
	for (int64_t j = 0; has_nan && j < params[ti_p].dims[1]; j++)
		row[j] = NAN;
	cg_program *p = cg_program_create(&md.ctx, md.m, syms, NULL);
	ck_assert(p != NULL && cg_program_jit(p));
	interp_opts o = {.seed = 11};
	interp_tensor want[MAXT] = {0};
	ck_assert(interp_run(&md.ctx, md.m, f, &o, params, in, want));
	ck_assert(isnan(*(float *)want[0].data) == has_nan);
	for (int threads = 1; threads <= 2; threads++) {
		void *got[MAXT] = {0};
		ck_assert_int_eq(jit_run(p, f, in, params, &o, threads, got), 0);
		ck_assert_msg(isnan(*(float *)got[0]) == has_nan,
			      "%s: loss %g at %d threads", file,
			      *(float *)got[0], threads);
		for (uint32_t k = 0; k < f->n_outputs; k++)
			free(got[k]);
	}
	interp_tensor_fini(&md.ctx, &want[0]);
	cg_program_destroy(p);
	for (uint32_t i = 0; i < f->n_inputs; i++)
		interp_tensor_fini(&md.ctx, &in[i]);
	for (uint32_t i = 0; i < md.m->n_params; i++)
		interp_tensor_fini(&md.ctx, &params[i]);
	model_free(&md);
}

/* masked_ce multiplies a padding token's cross-entropy by a weight of 0
 * (and the backward pass multiplies its rows by zero gradients), so its
 * rows reach the results through whether they are finite: a NaN in a
 * padding token's decoder embedding makes the loss NaN, in the JIT as in
 * the interpreter. So the forward may not leave padding rows out unless
 * it knows they are finite. */
START_TEST(test_a_nan_in_the_padding_rows_of_a_seq2seq_model_reaches_its_loss)
{
	static const char *const cases[2][2] = {
		{"models/transformer.g", "decoder.embed_positions.embed.table"},
		{"models/bahdanau.g", "decoder.embed.table"},
	};
	for (int has_nan = 0; has_nan <= 1; has_nan++)
		check_padding_nan(cases[_i][0], cases[_i][1], has_nan);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("codegen_lower_models");
	TCase *t = tcase_create("models");
	tcase_set_timeout(t, 300);
	tcase_add_loop_test(t,
			    test_every_model_entry_point_matches_the_interpreter,
			    0, N_MODELS);
	tcase_add_test(
		t,
		test_transformer_module_compiles_at_the_training_batch_with_every_entry);
	tcase_add_loop_test(
		t,
		test_a_nan_in_the_padding_rows_of_a_seq2seq_model_reaches_its_loss,
		0, 2);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
