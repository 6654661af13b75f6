/*
 * test_passes_factor.c - the factor pass: sums of matmuls sharing an
 * operand become one matmul of a sum. The rule on small graphs (it fires
 * on chains, trees and right operands, and not where a product has
 * another use, the flags differ or the other operands' shapes differ),
 * the same values before and after in the float64 interpreter on random
 * inputs, and Bahdanau's gradient function, whose ten keys-projection
 * products per sum it folds into one while attention fusion still finds
 * all its attentions. tests/golden/factor.ir shows a rewritten graph.
 */
#include "frontend.h"
#include "interp.h"
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static ir_id matmul(tu_graph *x, ir_id a, ir_id b, bool ta, bool tb)
{
	ir_attr attr = {.matmul = {ta, tb}};
	ir_id args[2] = {a, b};
	return tu_build(x, IR_OP_MATMUL, args, 2, &attr, NULL);
}

static ir_id add(tu_graph *x, ir_id a, ir_id b)
{
	ir_id args[2] = {a, b};
	return tu_build(x, IR_OP_ADD, args, 2, NULL, NULL);
}

static void ret(tu_graph *x, ir_id id)
{
	x->f->output_names[x->f->n_outputs] = "out";
	x->f->outputs[x->f->n_outputs++] = id;
}

static void run_factor(tu_graph *x)
{
	ck_assert_msg(pass_factor(x->m) && ir_module_verify(x->m), "%s",
		      tu_graph_diag(x));
}

static uint32_t count_op(const ir_func *f, ir_op op)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < f->g.n_nodes; i++)
		n += f->g.nodes[i].op == op;
	return n;
}

static const ir_node *nd(tu_graph *x, ir_id id)
{
	return &x->f->g.nodes[id];
}
static ir_id arg(tu_graph *x, ir_id id, uint32_t i)
{
	return ir_arg(&x->f->g, id, i);
}

/* ---- the rule ------------------------------------------------------------------ */

START_TEST(test_factor_turns_a_chain_of_products_of_one_left_operand_into_one)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id a = tu_input(&x, tu_type(IR_F32, 2, 4, 3));
	ir_id xs[4];
	ir_id sum = IR_NONE;
	for (int i = 0; i < 4; i++) {
		xs[i] = tu_input(&x, tu_type(IR_F32, 2, 3, 5));
		ir_id p = matmul(&x, a, xs[i], false, false);
		sum = i == 0 ? p : add(&x, sum, p);
	}
	ret(&x, sum);
	run_factor(&x);
	ck_assert_uint_eq(count_op(x.f, IR_OP_MATMUL), 1);
	ck_assert_uint_eq(count_op(x.f, IR_OP_ADD), 3);
	const ir_node *out = nd(&x, x.f->outputs[0]);
	ck_assert_int_eq(out->op, IR_OP_MATMUL);
	ck_assert_uint_eq(arg(&x, x.f->outputs[0], 0), x.f->inputs[0]);
	/* a (((x0 + x1) + x2) + x3), in the products' order */
	ir_id s = arg(&x, x.f->outputs[0], 1);
	for (int i = 3; i >= 1; i--) {
		ck_assert_int_eq(nd(&x, s)->op, IR_OP_ADD);
		ck_assert_uint_eq(arg(&x, s, 1), x.f->inputs[1 + i]);
		s = arg(&x, s, 0);
	}
	ck_assert_uint_eq(s, x.f->inputs[1]);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_factor_shares_a_right_operand_with_both_flags_kept)
{
	tu_graph x;
	tu_graph_init(&x, 4);
	ir_id b = tu_input(&x, tu_type(IR_F32, 2, 5, 3));
	ir_id p = tu_input(&x, tu_type(IR_F32, 3, 2, 3, 4));
	ir_id q = tu_input(&x, tu_type(IR_F32, 3, 2, 3, 4));
	/* q^T b^T + p^T b^T: (2, 4, 5) each, the first product made last */
	ir_id pb = matmul(&x, p, b, true, true);
	ir_id qb = matmul(&x, q, b, true, true);
	ret(&x, add(&x, qb, pb));
	run_factor(&x);
	ck_assert_uint_eq(count_op(x.f, IR_OP_MATMUL), 1);
	ir_id out = x.f->outputs[0];
	ck_assert_int_eq(nd(&x, out)->op, IR_OP_MATMUL);
	ck_assert(nd(&x, out)->attr.matmul.ta && nd(&x, out)->attr.matmul.tb);
	ck_assert_uint_eq(arg(&x, out, 1), b);
	ir_id s = arg(&x, out, 0);
	ck_assert_int_eq(nd(&x, s)->op, IR_OP_ADD);
	ck_assert_uint_eq(arg(&x, s, 0), p);
	ck_assert_uint_eq(arg(&x, s, 1), q);
	tu_graph_fini(&x);
}
END_TEST

/* Products spread over a tree of adds, between other terms: a x + (c +
 * a y) + (q b + a z) keeps c and q b and sums one product. */
START_TEST(test_factor_gathers_products_from_a_tree_with_other_terms)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id a = tu_input(&x, tu_type(IR_F32, 2, 4, 3));
	ir_id y[3];
	for (int i = 0; i < 3; i++)
		y[i] = tu_input(&x, tu_type(IR_F32, 2, 3, 5));
	ir_id c = tu_input(&x, tu_type(IR_F32, 2, 4, 5));
	ir_id q = tu_input(&x, tu_type(IR_F32, 2, 4, 2));
	ir_id b = tu_input(&x, tu_type(IR_F32, 2, 2, 5));
	ir_id t1 = add(&x, c, matmul(&x, a, y[1], false, false));
	ir_id t2 = add(&x, matmul(&x, q, b, false, false),
		       matmul(&x, a, y[2], false, false));
	ret(&x, add(&x, add(&x, matmul(&x, a, y[0], false, false), t1), t2));
	run_factor(&x);
	ck_assert_uint_eq(count_op(x.f, IR_OP_MATMUL), 2);
	/* 2 adds for y0 + y1 + y2, 2 for the three terms */
	ck_assert_uint_eq(count_op(x.f, IR_OP_ADD), 4);
	tu_graph_fini(&x);
}
END_TEST

/* The negative cases: each sum must come out as it went in. */
static void check_unchanged(tu_graph *x)
{
	uint32_t n = x->f->g.n_nodes, n_mm = count_op(x->f, IR_OP_MATMUL);
	run_factor(x);
	ck_assert_uint_eq(x->f->g.n_nodes, n);
	ck_assert_uint_eq(count_op(x->f, IR_OP_MATMUL), n_mm);
}

START_TEST(test_factor_keeps_products_whose_flags_differ)
{
	tu_graph x;
	tu_graph_init(&x, 4);
	ir_id a = tu_input(&x, tu_type(IR_F32, 2, 3, 3));
	ir_id p = tu_input(&x, tu_type(IR_F32, 2, 3, 3));
	ir_id q = tu_input(&x, tu_type(IR_F32, 2, 3, 3));
	ret(&x, add(&x, matmul(&x, a, p, false, false),
		    matmul(&x, a, q, false, true)));
	ret(&x, add(&x, matmul(&x, a, p, false, false),
		    matmul(&x, a, q, true, false)));
	check_unchanged(&x);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_factor_keeps_a_product_with_another_use)
{
	tu_graph x;
	tu_graph_init(&x, 4);
	ir_id a = tu_input(&x, tu_type(IR_F32, 2, 4, 3));
	ir_id p = tu_input(&x, tu_type(IR_F32, 2, 3, 5));
	ir_id q = tu_input(&x, tu_type(IR_F32, 2, 3, 5));
	ir_id ap = matmul(&x, a, p, false, false);
	ir_id args[1] = {ap};
	ret(&x, add(&x, ap, matmul(&x, a, q, false, false)));
	ret(&x, tu_build(&x, IR_OP_TANH, args, 1, NULL, NULL));
	check_unchanged(&x);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_factor_keeps_a_product_that_is_an_output)
{
	tu_graph x;
	tu_graph_init(&x, 4);
	ir_id a = tu_input(&x, tu_type(IR_F32, 2, 4, 3));
	ir_id p = tu_input(&x, tu_type(IR_F32, 2, 3, 5));
	ir_id q = tu_input(&x, tu_type(IR_F32, 2, 3, 5));
	ir_id aq = matmul(&x, a, q, false, false);
	ret(&x, add(&x, matmul(&x, a, p, false, false), aq));
	ret(&x, aq);
	check_unchanged(&x);
	tu_graph_fini(&x);
}
END_TEST

/* a p + a q with p (3, 5) and q (2, 3, 5): p + q would broadcast, and
 * the add broadcasts the first product; a sum whose add broadcasts one
 * product's result stays too. */
START_TEST(test_factor_keeps_products_whose_shapes_broadcast)
{
	tu_graph x;
	tu_graph_init(&x, 6);
	ir_id a = tu_input(&x, tu_type(IR_F32, 2, 4, 3));
	ir_id p = tu_input(&x, tu_type(IR_F32, 2, 3, 5));
	ir_id q = tu_input(&x, tu_type(IR_F32, 3, 2, 3, 5));
	ir_id r = tu_input(&x, tu_type(IR_F32, 2, 3, 1));
	ret(&x, add(&x, matmul(&x, a, p, false, false),
		    matmul(&x, a, q, false, false)));
	/* a p (4, 5) + a r (4, 1): the add broadcasts a r */
	ret(&x, add(&x, matmul(&x, a, p, false, false),
		    matmul(&x, a, r, false, false)));
	check_unchanged(&x);
	tu_graph_fini(&x);
}
END_TEST

/* ---- values ------------------------------------------------------------------------ */

/* SplitMix64 in [-1, 1). */
static double rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) / 9007199254740992.0 * 2 - 1;
}

/* Both sides and a tree: c + sum_i a x_i, the products added on
 * alternating sides, and sum_i y_i^T b^T, n products each. */
static void build_sums(tu_graph *x, int n)
{
	ir_id a = tu_input(x, tu_type(IR_F32, 3, 2, 4, 3));
	ir_id b = tu_input(x, tu_type(IR_F32, 2, 6, 7));
	ir_id c = tu_input(x, tu_type(IR_F32, 3, 2, 4, 6));
	ir_id s = c, t = IR_NONE;
	for (int i = 0; i < n; i++) {
		ir_id xi = tu_input(x, tu_type(IR_F32, 2, 3, 6));
		ir_id yi = tu_input(x, tu_type(IR_F32, 3, 2, 7, 5));
		ir_id p = matmul(x, a, xi, false, false);
		s = i % 2 ? add(x, s, p) : add(x, p, s);
		ir_id r = matmul(x, yi, b, true, true);
		t = t == IR_NONE ? r : add(x, t, r);
	}
	ret(x, s);
	ret(x, t);
}

static interp_tensor *run_f64(tu_graph *x, const interp_tensor *in)
{
	interp_tensor *out = calloc(x->f->n_outputs, sizeof *out);
	interp_opts o = {.is_f64 = true};
	ck_assert_msg(interp_run(&x->ctx, x->m, x->f, &o, NULL, in, out), "%s",
		      tu_graph_diag(x));
	return out;
}

START_TEST(test_factored_sums_equal_the_original_in_float64)
{
	enum { N = 5, N_IN = 3 + 2 * N };
	tu_graph x;
	tu_graph_init(&x, N_IN);
	build_sums(&x, N);
	interp_tensor in[N_IN];
	uint64_t seed = 42;
	for (uint32_t i = 0; i < N_IN; i++) {
		const ir_type *t = &nd(&x, x.f->inputs[i])->type;
		int64_t dims[IR_MAX_RANK];
		for (int d = 0; d < t->rank; d++)
			dims[d] = t->dims[d].coef;
		ck_assert(interp_tensor_alloc(&x.ctx, &in[i], IR_F32, t->rank,
					      dims));
		float *v = in[i].data;
		for (int64_t k = 0; k < interp_tensor_numel(&in[i]); k++)
			v[k] = (float)rnd(&seed);
	}
	interp_tensor *before = run_f64(&x, in);
	run_factor(&x);
	ck_assert_uint_eq(count_op(x.f, IR_OP_MATMUL), 2);
	interp_tensor *after = run_f64(&x, in);
	for (uint32_t o = 0; o < 2; o++) {
		int64_t n = interp_tensor_numel(&before[o]);
		ck_assert_int_eq(n, interp_tensor_numel(&after[o]));
		ck_assert_int_eq(after[o].dtype, IR_F64);
		double worst = 0, mag = 0;
		for (int64_t k = 0; k < n; k++) {
			double u = interp_tensor_get(&before[o], k);
			worst = fmax(worst,
				     fabs(u - interp_tensor_get(&after[o], k)));
			mag = fmax(mag, fabs(u));
		}
		ck_assert_double_gt(mag, 0.5);
		ck_assert_msg(worst <= 1e-13 * mag, "output %u off by %g", o,
			      worst);
		interp_tensor_fini(&x.ctx, &before[o]);
		interp_tensor_fini(&x.ctx, &after[o]);
	}
	for (uint32_t i = 0; i < N_IN; i++)
		interp_tensor_fini(&x.ctx, &in[i]);
	free(before);
	free(after);
	tu_graph_fini(&x);
}
END_TEST

/* ---- Bahdanau ---------------------------------------------------------------------- */

/* Bahdanau's training program through the pipeline, with or without
 * the factor pass. Its attentions are fused before autodiff, as the
 * driver does, but without CSE, which would merge the ten copies of the
 * keys projection first: their gradients are then the sums of products
 * with a shared operand that the pass factors. */
static ir_module *bahdanau_trained(tu_graph *x, bool is_factored)
{
	uint32_t file = ir_ctx_load_source(&x->ctx,
					   tu_path("models/bahdanau.g"));
	ck_assert_uint_ne(file, 0);
	ir_module *m = fe_compile(&x->ctx, file);
	ck_assert_msg(m != NULL, "%s", tu_graph_diag(x));
	const char *no_cse[] = {"cse"};
	pass_options fwd = {.verify_each = true,
			    .disabled = no_cse,
			    .n_disabled = 1};
	ck_assert_msg(pass_pipeline_forward(m, &fwd), "%s", tu_graph_diag(x));
	ck_assert(pass_autodiff(m, "loss"));
	const char *off[] = {"factor"};
	pass_options po = {.verify_each = true,
			   .disabled = off,
			   .n_disabled = is_factored ? 0 : 1};
	ck_assert_msg(pass_pipeline_run(m, &po), "%s", tu_graph_diag(x));
	return m;
}

/* Matmuls of f that read node w as their operand `side` (0 left). */
static uint32_t count_reading(const ir_func *f, ir_id w, uint32_t side)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < f->g.n_nodes; i++)
		n += f->g.nodes[i].op == IR_OP_MATMUL &&
		     ir_arg(&f->g, i, side) == w;
	return n;
}

static ir_id find_param(const ir_func *f, int32_t p)
{
	for (ir_id i = 0; i < f->g.n_nodes; i++)
		if (f->g.nodes[i].op == IR_OP_PARAM &&
		    f->g.nodes[i].attr.param_index == (uint32_t)p)
			return i;
	return IR_NONE;
}

/* dW_k = sum over 10 steps of enc^T dKP_t and the encoder output's
 * gradient's sum of dKP_t W_k^T become one product each: 18 matmuls
 * fewer, and every attention still fused forward and backward. */
START_TEST(test_bahdanau_keys_projection_gradients_are_one_product_each)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *plain = bahdanau_trained(&x, false);
	ir_module *fact = bahdanau_trained(&x, true);
	const ir_func *fp = ir_module_find_func(plain, "loss_grad");
	const ir_func *ff = ir_module_find_func(fact, "loss_grad");
	ck_assert_uint_eq(count_op(fp, IR_OP_MATMUL),
			  count_op(ff, IR_OP_MATMUL) + 18);
	ck_assert_uint_eq(count_op(ff, IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD), 10);
	ck_assert_uint_eq(count_op(ff, IR_OP_FUSED_ADDITIVE_ATTENTION), 10);
	int32_t wk = ir_module_find_param(fact,
					  "decoder.additive_attention.W_k");
	ck_assert_int_ge(wk, 0);
	/* enc W_k (forward) and one dKP W_k^T, against 1 + 10 before */
	ck_assert_uint_eq(count_reading(ff, find_param(ff, wk), 1), 2);
	ck_assert_uint_eq(count_reading(fp, find_param(fp, wk), 1), 11);
	/* The functions without sums of shared products do not change. */
	for (uint32_t i = 0; i < fact->n_funcs; i++)
		if (strcmp(fact->funcs[i]->name, "loss_grad") != 0)
			ck_assert_uint_eq(fact->funcs[i]->g.n_nodes,
					  plain->funcs[i]->g.n_nodes);
	ir_module_destroy(plain);
	ir_module_destroy(fact);
	tu_graph_fini(&x);
}
END_TEST

static Suite *factor_suite(void)
{
	Suite *s = suite_create("passes_factor");
	TCase *rule = tcase_create("rule");
	tcase_add_test(
		rule,
		test_factor_turns_a_chain_of_products_of_one_left_operand_into_one);
	tcase_add_test(rule,
		       test_factor_shares_a_right_operand_with_both_flags_kept);
	tcase_add_test(rule,
		       test_factor_gathers_products_from_a_tree_with_other_terms);
	tcase_add_test(rule, test_factor_keeps_products_whose_flags_differ);
	tcase_add_test(rule, test_factor_keeps_a_product_with_another_use);
	tcase_add_test(rule, test_factor_keeps_a_product_that_is_an_output);
	tcase_add_test(rule, test_factor_keeps_products_whose_shapes_broadcast);
	suite_add_tcase(s, rule);
	TCase *values = tcase_create("values");
	tcase_add_test(values, test_factored_sums_equal_the_original_in_float64);
	suite_add_tcase(s, values);
	TCase *models = tcase_create("models");
	tcase_set_timeout(models, 120);
	tcase_add_test(models,
		       test_bahdanau_keys_projection_gradients_are_one_product_each);
	suite_add_tcase(s, models);
	return s;
}

int main(void)
{
	return tu_run_suite(factor_suite());
}
