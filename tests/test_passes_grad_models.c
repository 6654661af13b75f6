/*
 * test_passes_grad_models.c - autodiff on the book's models: the gradient
 * function pass_autodiff derives for nw_param's, the Transformer's and
 * Bahdanau's `loss`, run by the interpreter in float64, against
 * directional finite differences over all parameters at once, with
 * dropout off and on (a fixed seed and step make a training run
 * deterministic), and the optimized gradient graph against the raw one;
 * the Transformer's also once attention fusion has made its training
 * graph fused_attention and fused_attention_grad.
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

#define MAX_IN 8

typedef struct gm {
	ir_ctx ctx;
	ir_module *m;
	interp_tensor in[MAX_IN];
	uint32_t n_in;
	int64_t syms[16];
	interp_tensor *params; /* float64 */
} gm;

/* SplitMix64 in [-1, 1). */
static double rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) / 9007199254740992.0 * 2 - 1;
}

static void add_i32(gm *x, int rank, const int64_t *dims, const int32_t *v)
{
	interp_tensor *t = &x->in[x->n_in++];
	ck_assert(interp_tensor_alloc(&x->ctx, t, IR_I32, rank, dims));
	memcpy(t->data, v, (size_t)interp_tensor_numel(t) * sizeof *v);
}

/* Compiles the model, derives loss_grad (after the forward passes, as
 * the driver does, when is_fused), binds symbols from the inputs
 * already added and initializes the parameters in float64. */
static void gm_load_as(gm *x, const char *rel, bool is_fused)
{
	uint32_t file = ir_ctx_load_source(&x->ctx, tu_path(rel));
	ck_assert_uint_ne(file, 0);
	x->m = fe_compile(&x->ctx, file);
	ck_assert_msg(x->m != NULL, "%s does not compile", rel);
	pass_options po = {.verify_each = true};
	ck_assert(!is_fused || pass_pipeline_forward(x->m, &po));
	ck_assert_msg(pass_autodiff(x->m, "loss"), "autodiff failed on %s", rel);
	ck_assert(ir_module_verify(x->m));
	const ir_func *f = ir_module_find_func(x->m, "loss_grad");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(f->n_inputs, x->n_in);
	ck_assert_uint_eq(f->n_outputs, 1 + x->m->n_params);
	ck_assert_str_eq(f->output_names[0], "loss");
	ck_assert_uint_le(x->m->n_syms, 16);
	ck_assert(interp_bind_syms(&x->ctx, x->m, f, x->in, x->syms));
	x->params = calloc(x->m->n_params + 1, sizeof *x->params);
	ck_assert(interp_params_init(&x->ctx, x->m, x->syms, 7, true, x->params));
}

static void gm_init(gm *x)
{
	memset(x, 0, sizeof *x);
	ir_ctx_init(&x->ctx);
}

static void gm_fini(gm *x)
{
	for (uint32_t p = 0; x->m && p < x->m->n_params; p++)
		interp_tensor_fini(&x->ctx, &x->params[p]);
	free(x->params);
	for (uint32_t i = 0; i < x->n_in; i++)
		interp_tensor_fini(&x->ctx, &x->in[i]);
	ir_module_destroy(x->m);
	ir_ctx_fini(&x->ctx);
}

/* Runs fname; outputs gets f->n_outputs tensors (caller frees). */
static interp_tensor *gm_run(gm *x, const char *fname, const interp_opts *o,
			     const interp_tensor *params)
{
	const ir_func *f = ir_module_find_func(x->m, fname);
	ck_assert_ptr_nonnull(f);
	interp_tensor *out = calloc(f->n_outputs, sizeof *out);
	ck_assert_msg(interp_run(&x->ctx, x->m, f, o, params, x->in, out),
		      "running %s failed", fname);
	return out;
}

static void free_outs(gm *x, const char *fname, interp_tensor *out)
{
	const ir_func *f = ir_module_find_func(x->m, fname);
	for (uint32_t o = 0; o < f->n_outputs; o++)
		interp_tensor_fini(&x->ctx, &out[o]);
	free(out);
}

static double loss_at(gm *x, const interp_opts *o, const interp_tensor *params)
{
	interp_tensor *out = gm_run(x, "loss", o, params);
	double l = interp_tensor_get(&out[0], 0);
	free_outs(x, "loss", out);
	return l;
}

/* params + s * dir, elementwise, into tmp (already allocated alike). */
static void shifted(gm *x, interp_tensor *const *dir, double s,
		    interp_tensor *tmp)
{
	for (uint32_t p = 0; p < x->m->n_params; p++) {
		int64_t n = interp_tensor_numel(&x->params[p]);
		double *d = tmp[p].data;
		const double *a = x->params[p].data, *v = dir[p]->data;
		for (int64_t i = 0; i < n; i++)
			d[i] = a[i] + s * v[i];
	}
}

/* Compares g.v from loss_grad with (L(p + eps v) - L(p - eps v)) / 2eps
 * for a random direction v; returns the relative error. */
static double directional_error(gm *x, const interp_opts *o, uint64_t seed)
{
	uint32_t np = x->m->n_params;
	interp_tensor *dir = calloc(np + 1, sizeof *dir);
	interp_tensor *tmp = calloc(np + 1, sizeof *tmp);
	interp_tensor **dirp = calloc(np + 1, sizeof *dirp);
	interp_tensor *out = gm_run(x, "loss_grad", o, x->params);
	double gv = 0;
	for (uint32_t p = 0; p < np; p++) {
		ck_assert(interp_tensor_copy(&x->ctx, &dir[p], &x->params[p]));
		ck_assert(interp_tensor_copy(&x->ctx, &tmp[p], &x->params[p]));
		dirp[p] = &dir[p];
		ck_assert_int_eq(out[1 + p].dtype, IR_F64);
		int64_t n = interp_tensor_numel(&dir[p]);
		ck_assert_int_eq(n, interp_tensor_numel(&out[1 + p]));
		double *v = dir[p].data;
		for (int64_t i = 0; i < n; i++) {
			v[i] = rnd(&seed);
			gv += v[i] * interp_tensor_get(&out[1 + p], i);
		}
	}
	double l0 = interp_tensor_get(&out[0], 0);
	ck_assert_double_eq_tol(l0, loss_at(x, o, x->params), 1e-12 * fabs(l0));
	const double eps = 1e-6;
	shifted(x, dirp, eps, tmp);
	double lp = loss_at(x, o, tmp);
	shifted(x, dirp, -eps, tmp);
	double lm = loss_at(x, o, tmp);
	double fd = (lp - lm) / (2 * eps);
	for (uint32_t p = 0; p < np; p++) {
		interp_tensor_fini(&x->ctx, &dir[p]);
		interp_tensor_fini(&x->ctx, &tmp[p]);
	}
	free(dir);
	free(tmp);
	free(dirp);
	free_outs(x, "loss_grad", out);
	double err = fabs(gv - fd) / fmax(fmax(fabs(gv), fabs(fd)), 1e-3);
	ck_assert_msg(err < 1e-6, "g.v %.12g, finite differences %.12g (rel %g)",
		      gv, fd, err);
	return err;
}

/* The d2l-style batch of two: src, src_valid, tgt_in (<bos> + tgt
 * shifted), tgt, tgt_valid; <pad> = 1, <bos> = 2, <eos> = 3. */
static void add_nmt_batch(gm *x)
{
	static const int32_t src[20] = {9,  4,  3, 1, 1, 1, 1, 1, 1, 1,
					12, 20, 4, 3, 1, 1, 1, 1, 1, 1};
	static const int32_t tgt[20] = {15, 5,  3, 1, 1, 1, 1, 1, 1, 1,
					30, 41, 7, 5, 3, 1, 1, 1, 1, 1};
	int32_t tgt_in[20];
	for (int b = 0; b < 2; b++) {
		tgt_in[b * 10] = 2;
		for (int t = 1; t < 10; t++)
			tgt_in[b * 10 + t] = tgt[b * 10 + t - 1];
	}
	const int64_t d2[2] = {2, 10}, d1[1] = {2};
	const int32_t src_valid[2] = {3, 4}, tgt_valid[2] = {3, 5};
	add_i32(x, 2, d2, src);
	add_i32(x, 1, d1, src_valid);
	add_i32(x, 2, d2, tgt_in);
	add_i32(x, 2, d2, tgt);
	add_i32(x, 1, d1, tgt_valid);
}

/* Runs loss_grad in float32 before and after the pass pipeline and
 * compares every output. */
static void check_optimized_matches_raw(gm *x, const interp_opts *o)
{
	interp_tensor *p32 = calloc(x->m->n_params + 1, sizeof *p32);
	ck_assert(interp_params_init(&x->ctx, x->m, x->syms, 7, false, p32));
	interp_tensor *raw = gm_run(x, "loss_grad", o, p32);
	uint32_t n_raw = ir_module_find_func(x->m, "loss_grad")->g.n_nodes;
	pass_options po = {.verify_each = true};
	ck_assert_msg(pass_pipeline_run(x->m, &po), "the pipeline failed");
	const ir_func *f = ir_module_find_func(x->m, "loss_grad");
	ck_assert_uint_lt(f->g.n_nodes, n_raw);
	interp_tensor *opt = gm_run(x, "loss_grad", o, p32);
	for (uint32_t k = 0; k < f->n_outputs; k++) {
		int64_t n = interp_tensor_numel(&raw[k]);
		ck_assert_int_eq(n, interp_tensor_numel(&opt[k]));
		ck_assert_int_eq(opt[k].dtype, IR_F32);
		double e = tu_max_rel_err(opt[k].data, raw[k].data, (size_t)n,
					  1e-6, 1e-5);
		ck_assert_msg(e <= 1, "output %s differs after optimizing (%g)",
			      f->output_names[k], e);
	}
	free_outs(x, "loss_grad", raw);
	free_outs(x, "loss_grad", opt);
	for (uint32_t p = 0; p < x->m->n_params; p++)
		interp_tensor_fini(&x->ctx, &p32[p]);
	free(p32);
}

static void check_model(const char *rel, bool has_nmt_inputs)
{
	gm x;
	gm_init(&x);
	if (has_nmt_inputs)
		add_nmt_batch(&x);
	gm_load_as(&x, rel, false);
	interp_opts eval = {.is_f64 = true};
	directional_error(&x, &eval, 1);
	directional_error(&x, &eval, 2);
	interp_opts train = {.is_f64 = true,
			     .is_training = true,
			     .seed = 11,
			     .step = 3};
	directional_error(&x, &train, 3);
	interp_opts train32 = {.is_training = true, .seed = 11, .step = 3};
	check_optimized_matches_raw(&x, &train32);
	gm_fini(&x);
}

START_TEST(test_nw_param_loss_gradient_matches_finite_differences)
{
	check_model("models/nw_param.g", false);
}
END_TEST

START_TEST(test_transformer_loss_gradient_matches_finite_differences)
{
	check_model("models/transformer.g", true);
}
END_TEST

/* GELU, both forms, is built from primitives: autodiff's gradient of it
 * is exact. */
START_TEST(test_gelu_mlp_loss_gradient_matches_finite_differences)
{
	check_model("tests/models/gelu_mlp.g", false);
}
END_TEST

START_TEST(test_bahdanau_loss_gradient_matches_finite_differences)
{
	check_model("models/bahdanau.g", true);
}
END_TEST

static uint32_t count_op(const ir_module *m, const char *fn, ir_op op)
{
	const ir_func *f = ir_module_find_func(m, fn);
	uint32_t n = 0;
	for (uint32_t i = 0; i < f->g.n_nodes; i++)
		n += f->g.nodes[i].op == op;
	return n;
}

/* The fused nodes of function fn that read their 4 heads in place. */
static uint32_t count_heads_4(const ir_module *m, const char *fn)
{
	const ir_func *f = ir_module_find_func(m, fn);
	uint32_t n = 0;
	for (uint32_t i = 0; i < f->g.n_nodes; i++) {
		const ir_node *nd = &f->g.nodes[i];
		n += (nd->op == IR_OP_FUSED_ATTENTION ||
		      nd->op == IR_OP_FUSED_ATTENTION_GRAD) &&
		     nd->attr.attention.heads == 4;
	}
	return n;
}

/* The training graph after the pipeline, where fuse_attention replaced
 * the six attentions of loss and loss_grad (forward and backward) by
 * fused_attention and fused_attention_grad, and fuse_heads made them
 * read their four heads in place (no permute left). */
START_TEST(test_fused_transformer_loss_gradient_matches_finite_differences)
{
	gm x;
	gm_init(&x);
	add_nmt_batch(&x);
	gm_load_as(&x, "models/transformer.g", true);
	pass_options po = {.verify_each = true};
	ck_assert(pass_pipeline_run(x.m, &po));
	ck_assert_uint_eq(count_op(x.m, "loss", IR_OP_FUSED_ATTENTION), 6);
	ck_assert_uint_eq(count_op(x.m, "loss_grad", IR_OP_FUSED_ATTENTION), 6);
	ck_assert_uint_eq(count_op(x.m, "loss_grad", IR_OP_FUSED_ATTENTION_GRAD),
			  6);
	ck_assert_uint_eq(count_heads_4(x.m, "loss_grad"), 12);
	ck_assert_uint_eq(count_op(x.m, "loss_grad", IR_OP_PERMUTE), 0);
	interp_opts eval = {.is_f64 = true};
	directional_error(&x, &eval, 1);
	directional_error(&x, &eval, 2);
	interp_opts train = {.is_f64 = true,
			     .is_training = true,
			     .seed = 11,
			     .step = 3};
	directional_error(&x, &train, 3);
	gm_fini(&x);
}
END_TEST

/* Bahdanau's training graph after the pipeline, where fuse_attention
 * replaced the ten decoder-step attentions of loss and loss_grad
 * (forward and backward) by fused_additive_attention and
 * fused_additive_attention_grad. */
START_TEST(test_fused_bahdanau_loss_gradient_matches_finite_differences)
{
	gm x;
	gm_init(&x);
	add_nmt_batch(&x);
	gm_load_as(&x, "models/bahdanau.g", true);
	pass_options po = {.verify_each = true};
	ck_assert(pass_pipeline_run(x.m, &po));
	ck_assert_uint_eq(count_op(x.m, "loss", IR_OP_FUSED_ADDITIVE_ATTENTION),
			  10);
	ck_assert_uint_eq(count_op(x.m, "loss_grad",
				   IR_OP_FUSED_ADDITIVE_ATTENTION),
			  10);
	ck_assert_uint_eq(count_op(x.m, "loss_grad",
				   IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD),
			  10);
	interp_opts eval = {.is_f64 = true};
	directional_error(&x, &eval, 1);
	directional_error(&x, &eval, 2);
	interp_opts train = {.is_f64 = true,
			     .is_training = true,
			     .seed = 11,
			     .step = 3};
	directional_error(&x, &train, 3);
	gm_fini(&x);
}
END_TEST

static Suite *grad_models_suite(void)
{
	Suite *s = suite_create("passes_grad_models");
	TCase *tc = tcase_create("models");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc,
		       test_nw_param_loss_gradient_matches_finite_differences);
	tcase_add_test(tc,
		       test_gelu_mlp_loss_gradient_matches_finite_differences);
	tcase_add_test(tc,
		       test_transformer_loss_gradient_matches_finite_differences);
	tcase_add_test(tc,
		       test_bahdanau_loss_gradient_matches_finite_differences);
	tcase_add_test(tc,
		       test_fused_bahdanau_loss_gradient_matches_finite_differences);
	tcase_add_test(
		tc,
		test_fused_transformer_loss_gradient_matches_finite_differences);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(grad_models_suite());
}
