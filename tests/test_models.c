/*
 * test_models.c - the book's models, end to end through the front end, the
 * pass pipeline and the reference interpreter: the numbers the book prints
 * come out, every model's IR prints and re-parses to the same text, and
 * float32 agrees with float64.
 */
#include "frontend.h"
#include "interp.h"
#include "ir.h"
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const model_files[] = {
	"models/nadaraya_watson.g",    "models/nw_param.g",
	"models/additive_attention.g", "models/dot_product_attention.g",
	"models/bahdanau.g",           "models/multihead_attention.g",
	"models/self_attention.g",     "models/transformer.g",
};
#define N_MODELS (sizeof model_files / sizeof *model_files)

/* A compiled model with its context; optimized unless is_raw. */
typedef struct model {
	ir_ctx ctx;
	ir_module *m;
} model;

static void model_load(model *md, const char *rel, bool is_raw)
{
	ir_ctx_init(&md->ctx);
	uint32_t file = ir_ctx_load_source(&md->ctx, tu_path(rel));
	ck_assert_uint_ne(file, 0);
	md->m = fe_compile(&md->ctx, file);
	ck_assert_msg(md->m != NULL, "%s does not compile", rel);
	ck_assert_int_eq(md->ctx.n_errors, 0);
	if (!is_raw) {
		pass_options po = {.verify_each = true};
		ck_assert(pass_pipeline_run(md->m, &po));
	}
	ck_assert(ir_module_verify(md->m));
}

static void model_free(model *md)
{
	ir_module_destroy(md->m);
	ir_ctx_fini(&md->ctx);
}

/* Runs function fname on its example (or on inputs if given); outputs
 * must hold f->n_outputs tensors. */
static void model_run(model *md, const char *fname, const interp_tensor *inputs,
		      bool is_f64, interp_tensor *outputs)
{
	const ir_module *m = md->m;
	const ir_func *f = ir_module_find_func(m, fname);
	ck_assert_msg(f != NULL, "no function %s", fname);
	interp_tensor in[16] = {0};
	ck_assert_uint_le(f->n_inputs, 16);
	for (uint32_t i = 0; i < f->n_inputs; i++) {
		if (inputs) {
			in[i] = inputs[i];
			continue;
		}
		ck_assert_msg(f->example != NULL, "%s has no example", fname);
		const ir_const *c = &m->consts[f->example[i]];
		in[i].dtype = c->type.dtype;
		in[i].rank = c->type.rank;
		for (int d = 0; d < c->type.rank; d++)
			in[i].dims[d] = c->type.dims[d].coef;
		in[i].data = c->data;
	}
	int64_t syms[16] = {0};
	ck_assert_uint_le(m->n_syms, 16);
	interp_tensor *params = calloc(m->n_params + 1, sizeof *params);
	interp_opts opts = {.is_f64 = is_f64};
	ck_assert(interp_bind_syms(&md->ctx, m, f, in, syms));
	ck_assert(interp_params_init(&md->ctx, m, syms, 0, is_f64, params));
	ck_assert(interp_run(&md->ctx, m, f, &opts, params, in, outputs));
	for (uint32_t i = 0; i < m->n_params; i++)
		interp_tensor_fini(&md->ctx, &params[i]);
	free(params);
}

static float at(const interp_tensor *t, int64_t i)
{
	return (float)interp_tensor_get(t, i);
}

static void fini_all(model *md, interp_tensor *t, int n)
{
	for (int i = 0; i < n; i++)
		interp_tensor_fini(&md->ctx, &t[i]);
}

START_TEST(test_every_model_compiles_optimizes_and_verifies)
{
	for (size_t i = 0; i < N_MODELS; i++) {
		model md;
		model_load(&md, model_files[i], false);
		ck_assert_uint_gt(md.m->n_funcs, 0);
		model_free(&md);
	}
}
END_TEST

/* Prints m, reads the text back, prints again: both texts must match. */
static void check_round_trip(model *md, const char *what)
{
	char *a = NULL, *b = NULL;
	size_t na = 0, nb = 0;
	FILE *f = open_memstream(&a, &na);
	ir_module_print(md->m, f);
	fclose(f);
	uint32_t src = ir_ctx_add_source(&md->ctx, "roundtrip.ir", a, na);
	ir_module *back = ir_module_read(&md->ctx, src);
	ck_assert_msg(back != NULL, "%s: printed IR does not re-parse", what);
	ck_assert(ir_module_verify(back));
	f = open_memstream(&b, &nb);
	ir_module_print(back, f);
	fclose(f);
	ck_assert_msg(na == nb && memcmp(a, b, na) == 0,
		      "%s: print -> read -> print differs", what);
	ir_module_destroy(back);
	free(a);
	free(b);
}

START_TEST(test_every_model_prints_and_reparses_to_the_same_text)
{
	for (size_t i = 0; i < N_MODELS; i++) {
		model raw, opt;
		model_load(&raw, model_files[i], true);
		check_round_trip(&raw, model_files[i]);
		model_free(&raw);
		model_load(&opt, model_files[i], false);
		check_round_trip(&opt, model_files[i]);
		model_free(&opt);
	}
}
END_TEST

/* Both attention examples of d2l 10.3: all keys equal, so the result is
 * the mean of the first 2 (and 6) value rows. */
static void check_attention_example(const char *file)
{
	model md;
	model_load(&md, file, false);
	interp_tensor out[2] = {0};
	model_run(&md, "forward", NULL, false, out);
	ck_assert_int_eq(out[0].rank, 3);
	ck_assert_int_eq(out[0].dims[0], 2);
	ck_assert_int_eq(out[0].dims[1], 1);
	ck_assert_int_eq(out[0].dims[2], 4);
	const float want[8] = {2, 3, 4, 5, 10, 11, 12, 13};
	for (int i = 0; i < 8; i++)
		ck_assert_float_eq_tol(at(&out[0], i), want[i], 1e-4);
	/* weights: 1/2 on 2 keys, 1/6 on 6 keys, zero elsewhere */
	for (int k = 0; k < 10; k++) {
		ck_assert_float_eq_tol(at(&out[1], k), k < 2 ? 0.5 : 0, 1e-6);
		ck_assert_float_eq_tol(at(&out[1], 10 + k), k < 6 ? 1.0 / 6 : 0,
				       1e-6);
	}
	fini_all(&md, out, 2);
	model_free(&md);
}

START_TEST(test_additive_attention_gives_the_books_example)
{
	check_attention_example("models/additive_attention.g");
}
END_TEST

START_TEST(test_dot_product_attention_gives_the_books_example)
{
	check_attention_example("models/dot_product_attention.g");
}
END_TEST

START_TEST(test_bmm_demo_gives_4_5_and_14_5)
{
	model md;
	model_load(&md, "models/dot_product_attention.g", false);
	interp_tensor out[1] = {0};
	model_run(&md, "bmm_demo", NULL, false, out);
	ck_assert_int_eq(interp_tensor_numel(&out[0]), 2);
	ck_assert_float_eq_tol(at(&out[0], 0), 4.5f, 1e-5);
	ck_assert_float_eq_tol(at(&out[0], 1), 14.5f, 1e-5);
	fini_all(&md, out, 1);
	model_free(&md);
}
END_TEST

START_TEST(test_masked_softmax_demo_zeroes_past_the_valid_lengths)
{
	model md;
	model_load(&md, "models/dot_product_attention.g", false);
	interp_tensor out[2] = {0};
	model_run(&md, "masked_softmax_demo", NULL, false, out);
	/* 1-D [2, 3]: batch 0 rows keep 2 entries, batch 1 rows keep 3.
	 * 2-D [[1, 3], [2, 4]]: per row. */
	const int keep1[4] = {2, 2, 3, 3}, keep2[4] = {1, 3, 2, 4};
	for (int which = 0; which < 2; which++) {
		const int *keep = which ? keep2 : keep1;
		for (int r = 0; r < 4; r++) {
			double s = 0;
			for (int k = 0; k < 4; k++) {
				float v = at(&out[which], r * 4 + k);
				if (k >= keep[r])
					ck_assert_float_eq(v, 0.0f);
				else
					ck_assert_float_gt(v, 0.0f);
				s += v;
			}
			ck_assert_double_eq_tol(s, 1.0, 1e-6);
		}
	}
	fini_all(&md, out, 2);
	model_free(&md);
}
END_TEST

START_TEST(test_multihead_attention_output_is_2_by_4_by_100)
{
	model md;
	model_load(&md, "models/multihead_attention.g", false);
	interp_tensor out[2] = {0};
	model_run(&md, "forward", NULL, false, out);
	ck_assert_int_eq(out[0].rank, 3);
	ck_assert_int_eq(out[0].dims[0], 2);
	ck_assert_int_eq(out[0].dims[1], 4);
	ck_assert_int_eq(out[0].dims[2], 100);
	/* weights (B*H, Q, K): batch 0 sees 3 keys, batch 1 sees 2 */
	ck_assert_int_eq(out[1].dims[0], 10);
	for (int bh = 0; bh < 10; bh++)
		for (int k = 0; k < 6; k++) {
			float w = at(&out[1], (int64_t)bh * 24 + k);
			int keep = bh < 5 ? 3 : 2;
			ck_assert_float_eq_tol(w, k < keep ? 1.0f / keep : 0,
					       1e-6);
		}
	fini_all(&md, out, 2);
	model_free(&md);
}
END_TEST

START_TEST(test_positional_encoding_follows_the_sine_cosine_formula)
{
	model md;
	model_load(&md, "models/self_attention.g", false);
	interp_tensor out[1] = {0};
	model_run(&md, "encoding", NULL, false, out);
	ck_assert_int_eq(out[0].dims[0], 60);
	ck_assert_int_eq(out[0].dims[1], 32);
	for (int i = 0; i < 60; i++)
		for (int j = 0; j < 16; j++) {
			double x = i / pow(10000.0, 2.0 * j / 32);
			ck_assert_double_eq_tol(at(&out[0], i * 32 + 2 * j),
						sin(x), 1e-5);
			ck_assert_double_eq_tol(at(&out[0], i * 32 + 2 * j + 1),
						cos(x), 1e-5);
		}
	fini_all(&md, out, 1);
	model_free(&md);
}
END_TEST

/* Predictions and weights against the book's formulas computed here in
 * double from the model's own training set. */
START_TEST(test_nadaraya_watson_matches_the_kernel_formula)
{
	model md;
	model_load(&md, "models/nadaraya_watson.g", false);
	interp_tensor data[2] = {0}, out[2] = {0};
	model_run(&md, "data", NULL, false, data);
	model_run(&md, "forward", NULL, false, out);
	ck_assert_int_eq(interp_tensor_numel(&data[0]), 50);
	double noise2 = 0;
	for (int j = 0; j < 50; j++) {
		double x = at(&data[0], j);
		ck_assert(x >= 0 && x < 5);
		if (j)
			ck_assert(at(&data[0], j - 1) <= x);
		double e = at(&data[1], j) - (2 * sin(x) + pow(x, 0.8));
		noise2 += e * e;
	}
	double sd = sqrt(noise2 / 50);
	ck_assert_msg(sd > 0.3 && sd < 0.75, "noise sd %g", sd);
	for (int i = 0; i < 50; i++) {
		double xq = 0.1 * i, z = 0, y = 0, w[50];
		for (int j = 0; j < 50; j++) {
			double d = xq - at(&data[0], j);
			w[j] = exp(-d * d / 2);
			z += w[j];
		}
		for (int j = 0; j < 50; j++) {
			ck_assert_double_eq_tol(at(&out[1], i * 50 + j),
						w[j] / z, 1e-5);
			y += w[j] / z * at(&data[1], j);
		}
		ck_assert_double_eq_tol(at(&out[0], i), y, 1e-4);
	}
	fini_all(&md, data, 2);
	fini_all(&md, out, 2);
	model_free(&md);
}
END_TEST

/* Loss of the leave-one-out objective at the initial width, recomputed. */
START_TEST(test_nw_param_loss_uses_leave_one_out_keys)
{
	model md;
	model_load(&md, "models/nw_param.g", false);
	interp_tensor loss[1] = {0}, data[2] = {0}, w = {0};
	model_run(&md, "loss", NULL, true, loss);
	model_run(&md, "data", NULL, true, data);
	/* the width w as model_run initialized it: seed 0 */
	int32_t iw = ir_module_find_param(md.m, "nw.w");
	ck_assert_int_ge(iw, 0);
	interp_tensor *params = calloc(md.m->n_params, sizeof *params);
	int64_t syms[4] = {0};
	ck_assert(interp_params_init(&md.ctx, md.m, syms, 0, true, params));
	w = params[iw];
	double wv = interp_tensor_get(&w, 0), want = 0;
	ck_assert(wv > 0 && wv < 1);
	for (int i = 0; i < 50; i++) {
		double xi = interp_tensor_get(&data[0], i), z = 0, y = 0;
		for (int j = 0; j < 50; j++) {
			if (j == i)
				continue;
			double d = (xi - interp_tensor_get(&data[0], j)) * wv;
			z += exp(-d * d / 2);
			y += exp(-d * d / 2) * interp_tensor_get(&data[1], j);
		}
		double e = y / z - interp_tensor_get(&data[1], i);
		want += e * e;
	}
	ck_assert_double_eq_tol(interp_tensor_get(&loss[0], 0), want,
				1e-9 * want);
	for (uint32_t i = 0; i < md.m->n_params; i++)
		interp_tensor_fini(&md.ctx, &params[i]);
	free(params);
	fini_all(&md, data, 2);
	fini_all(&md, loss, 1);
	model_free(&md);
}
END_TEST

/* The seq2seq models: logits of the right shape, finite, and float32
 * agreeing with float64. */
static void check_seq2seq_forward(const char *file)
{
	model md;
	model_load(&md, file, false);
	interp_tensor o32[1] = {0}, o64[1] = {0};
	model_run(&md, "forward", NULL, false, o32);
	model_run(&md, "forward", NULL, true, o64);
	ck_assert_int_eq(o32[0].rank, 3);
	ck_assert_int_eq(o32[0].dims[0], 2);
	ck_assert_int_eq(o32[0].dims[1], 10);
	ck_assert_int_eq(o32[0].dims[2], 201);
	int64_t n = interp_tensor_numel(&o32[0]);
	double worst = 0;
	for (int64_t i = 0; i < n; i++) {
		double a = at(&o32[0], i), b = interp_tensor_get(&o64[0], i);
		ck_assert(isfinite(a));
		worst = fmax(worst, fabs(a - b) / (1e-3 + fabs(b)));
	}
	ck_assert_msg(worst < 1e-3, "%s: f32 vs f64 relative error %g", file,
		      worst);
	fini_all(&md, o32, 1);
	fini_all(&md, o64, 1);
	model_free(&md);
}

START_TEST(test_transformer_forward_gives_finite_logits_f32_equal_f64)
{
	check_seq2seq_forward("models/transformer.g");
}
END_TEST

START_TEST(test_bahdanau_forward_gives_finite_logits_f32_equal_f64)
{
	check_seq2seq_forward("models/bahdanau.g");
}
END_TEST

/* The logits of one decoding step (2, 1, 201) equal step t of the
 * teacher-forced forward pass's logits (2, 10, 201). */
static void check_step_logits(const interp_tensor *step,
			      const interp_tensor *forward, int t)
{
	for (int b = 0; b < 2; b++)
		for (int v = 0; v < 201; v++)
			ck_assert_double_eq_tol(
				interp_tensor_get(step, b * 201 + v),
				interp_tensor_get(forward,
						  (b * 10 + t) * 201 + v),
				1e-9);
}

/* Greedy decoding one step at a time reproduces the teacher-forced
 * forward pass when fed the same tokens. */
START_TEST(test_bahdanau_decode_steps_reproduce_forward)
{
	model md;
	model_load(&md, "models/bahdanau.g", false);
	const ir_func *fwd = ir_module_find_func(md.m, "forward");
	const ir_const *src = &md.m->consts[fwd->example[0]];
	const ir_const *valid = &md.m->consts[fwd->example[1]];
	const ir_const *tgt = &md.m->consts[fwd->example[2]];
	interp_tensor logits[1] = {0}, enc[2] = {0};
	model_run(&md, "forward", NULL, true, logits);
	interp_tensor src_t = {IR_I32, 2, {2, 10}, src->data};
	model_run(&md, "encode", &src_t, true, enc);
	interp_tensor state = enc[1];
	for (int t = 0; t < 10; t++) {
		int32_t tok[2] = {((int32_t *)tgt->data)[t],
				  ((int32_t *)tgt->data)[10 + t]};
		interp_tensor in[4] = {{IR_I32, 2, {2, 1}, tok},
				       state,
				       enc[0],
				       {IR_I32, 1, {2}, valid->data}};
		interp_tensor out[3] = {0};
		model_run(&md, "decode_step", in, true, out);
		/* the attention over the source: a distribution over src_valid */
		for (int b = 0; b < 2; b++) {
			double s = 0;
			for (int k = 0; k < 10; k++)
				s += interp_tensor_get(&out[2], b * 10 + k);
			ck_assert_double_eq_tol(s, 1.0, 1e-9);
		}
		interp_tensor_fini(&md.ctx, &out[2]);
		check_step_logits(&out[0], &logits[0], t);
		interp_tensor_fini(&md.ctx, &out[0]);
		interp_tensor_fini(&md.ctx, &state);
		state = out[1];
	}
	interp_tensor_fini(&md.ctx, &state);
	interp_tensor_fini(&md.ctx, &enc[0]);
	fini_all(&md, logits, 1);
	model_free(&md);
}
END_TEST

/* The Transformer's cached decoding, one position at a time, reproduces
 * the teacher-forced forward pass (causal mask) on the same tokens. */
START_TEST(test_transformer_decode_steps_reproduce_forward)
{
	model md;
	model_load(&md, "models/transformer.g", false);
	const ir_func *fwd = ir_module_find_func(md.m, "forward");
	const ir_const *src = &md.m->consts[fwd->example[0]];
	const ir_const *valid = &md.m->consts[fwd->example[1]];
	const ir_const *tgt = &md.m->consts[fwd->example[2]];
	interp_tensor logits[1] = {0}, enc[2] = {0};
	model_run(&md, "forward", NULL, true, logits);
	interp_tensor src_in[2] = {{IR_I32, 2, {2, 10}, src->data},
				   {IR_I32, 1, {2}, valid->data}};
	model_run(&md, "encode", src_in, true, enc);
	interp_tensor kv = {0};
	int64_t kv_dims[4] = {2, 2, 10, 32};
	ck_assert(interp_tensor_alloc(&md.ctx, &kv, IR_F64, 4, kv_dims));
	for (int t = 0; t < 10; t++) {
		int32_t tok[2] = {((int32_t *)tgt->data)[t],
				  ((int32_t *)tgt->data)[10 + t]};
		int32_t pos[1] = {t};
		interp_tensor in[5] = {{IR_I32, 2, {2, 1}, tok},
				       {IR_I32, 1, {1}, pos},
				       enc[0],
				       {IR_I32, 1, {2}, valid->data},
				       kv};
		interp_tensor out[4] = {0};
		model_run(&md, "decode_step", in, true, out);
		check_step_logits(&out[0], &logits[0], t);
		interp_tensor_fini(&md.ctx, &kv);
		kv = out[1];
		fini_all(&md, &out[0], 1);
		fini_all(&md, &out[2], 2);
	}
	interp_tensor_fini(&md.ctx, &kv);
	fini_all(&md, enc, 2);
	fini_all(&md, logits, 1);
	model_free(&md);
}
END_TEST

START_TEST(test_models_share_parameters_between_entry_points)
{
	model md;
	model_load(&md, "models/transformer.g", true);
	ck_assert_int_ge(ir_module_find_param(md.m, "encoder.0.attention.W_q"),
			 0);
	ck_assert_int_ge(ir_module_find_param(md.m, "decoder.1.attention_1.W_o"),
			 0);
	/* 2 encoder blocks x (4 attention + 2x2 norm + 4 ffn) + embedding ... */
	for (uint32_t i = 0; i < md.m->n_params; i++)
		for (uint32_t j = i + 1; j < md.m->n_params; j++)
			ck_assert_str_ne(md.m->params[i].name,
					 md.m->params[j].name);
	model_free(&md);
}
END_TEST

static Suite *models_suite(void)
{
	Suite *s = suite_create("models");
	TCase *tc = tcase_create("book");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_every_model_compiles_optimizes_and_verifies);
	tcase_add_test(tc,
		       test_every_model_prints_and_reparses_to_the_same_text);
	tcase_add_test(tc, test_additive_attention_gives_the_books_example);
	tcase_add_test(tc, test_dot_product_attention_gives_the_books_example);
	tcase_add_test(tc, test_bmm_demo_gives_4_5_and_14_5);
	tcase_add_test(tc,
		       test_masked_softmax_demo_zeroes_past_the_valid_lengths);
	tcase_add_test(tc, test_multihead_attention_output_is_2_by_4_by_100);
	tcase_add_test(tc,
		       test_positional_encoding_follows_the_sine_cosine_formula);
	tcase_add_test(tc, test_nadaraya_watson_matches_the_kernel_formula);
	tcase_add_test(tc, test_nw_param_loss_uses_leave_one_out_keys);
	tcase_add_test(tc,
		       test_transformer_forward_gives_finite_logits_f32_equal_f64);
	tcase_add_test(tc,
		       test_bahdanau_forward_gives_finite_logits_f32_equal_f64);
	tcase_add_test(tc, test_bahdanau_decode_steps_reproduce_forward);
	tcase_add_test(tc, test_transformer_decode_steps_reproduce_forward);
	tcase_add_test(tc, test_models_share_parameters_between_entry_points);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(models_suite());
}
