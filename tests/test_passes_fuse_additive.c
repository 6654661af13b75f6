/*
 * test_passes_fuse_additive.c - additive (Bahdanau) attention fusion:
 * the fused ops' shape rules and text, the interpreter's fused kernels
 * against the unfused graphs they replace (forward and gradients,
 * float32 judged against float64 by the error-ratio rule, fused after
 * autodiff and before it), the pass on models/bahdanau.g and
 * models/additive_attention.g (how many attentions fuse, which stay and
 * why), switching it off, and pass_explain_fusion.
 */
#include "additive_cases.h"
#include "testutil.h"

#include <check.h>

/* ---- the ops ----------------------------------------------------------------- */

static ir_attr attention(double p)
{
	ir_attr a;
	memset(&a, 0, sizeof a);
	a.attention.scale = 1;
	a.attention.fill = -1e6;
	a.attention.p = p;
	a.attention.heads = 1;
	return a;
}

START_TEST(test_fused_additive_attention_rejects_heads_other_than_one)
{
	tu_graph g;
	tu_graph_init(&g, 8);
	ir_id qp = tu_input(&g, tu_type(IR_F32, 3, 2, 3, 4));
	ir_id kp = tu_input(&g, tu_type(IR_F32, 3, 2, 5, 4));
	ir_id wv = tu_input(&g, tu_type(IR_F32, 1, 4));
	ir_id v = tu_input(&g, tu_type(IR_F32, 3, 2, 5, 6));
	ir_attr a = attention(0);
	a.attention.heads = 2;
	ir_id args[4] = {qp, kp, wv, v};
	ck_assert_uint_eq(ir_build(g.m, g.f, IR_OP_FUSED_ADDITIVE_ATTENTION,
				   args, 4, &a, NULL, (ir_loc){0}),
			  IR_NONE);
	ck_assert_ptr_nonnull(strstr(tu_graph_diag(&g), "additive attention has "
							"one head, not 2"));
	tu_graph_fini(&g);
}
END_TEST

START_TEST(test_fused_additive_attention_has_the_queries_rows_and_the_values_width)
{
	tu_graph g;
	tu_graph_init(&g, 8);
	ir_id qp = tu_input(&g, tu_type(IR_F32, 3, 2, 3, 4));
	ir_id kp = tu_input(&g, tu_type(IR_F32, 3, 2, 5, 4));
	ir_id wv = tu_input(&g, tu_type(IR_F32, 1, 4));
	ir_id v = tu_input(&g, tu_type(IR_F32, 3, 2, 5, 6));
	ir_id vl = tu_input(&g, tu_type(IR_I32, 2, 2, 3));
	ir_attr a = attention(0.1);
	ir_id o = tu_build(&g, IR_OP_FUSED_ADDITIVE_ATTENTION,
			   (ir_id[]){qp, kp, wv, v, vl}, 5, &a, NULL);
	ir_type want = tu_type(IR_F32, 3, 2, 3, 6);
	ck_assert(ir_type_eq(&g.f->g.nodes[o].type, &want));
	ir_id gr = tu_build(&g, IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD,
			    (ir_id[]){qp, kp, wv, v, vl, o}, 6, &a, NULL);
	/* dqp 24, dkp 40, dwv per batch 8, dv 60 */
	want = tu_type(IR_F32, 1, 24 + 40 + 8 + 60);
	ck_assert(ir_type_eq(&g.f->g.nodes[gr].type, &want));
	tu_graph_fini(&g);
}
END_TEST

/* Operands that do not fit are errors that name the op. */
START_TEST(test_fused_additive_attention_rejects_operands_that_do_not_fit)
{
	static const int64_t wv_len[3] = {5, 4, 4}, valid_rows[3] = {3, 4, 3},
			     g_width[3] = {6, 6, 7};
	tu_graph g;
	tu_graph_init(&g, 8);
	ir_id qp = tu_input(&g, tu_type(IR_F32, 3, 2, 3, 4));
	ir_id kp = tu_input(&g, tu_type(IR_F32, 3, 2, 5, 4));
	ir_id v = tu_input(&g, tu_type(IR_F32, 3, 2, 5, 6));
	ir_id vb = tu_input(&g, tu_type(IR_I32, 1, 2));
	ir_attr a = attention(0);
	for (int i = 0; i < 3; i++) {
		ir_id wv = tu_input(&g, tu_type(IR_F32, 1, wv_len[i]));
		ir_id vl = tu_input(&g, tu_type(IR_I32, 2, 2, valid_rows[i]));
		ir_id gg = tu_input(&g, tu_type(IR_F32, 3, 2, 3, g_width[i]));
		ir_id args[6] = {qp, kp, wv, v, i == 1 ? vl : vb, gg};
		ir_op op = i == 2 ? IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD
				  : IR_OP_FUSED_ADDITIVE_ATTENTION;
		ir_id id = ir_build(g.m, g.f, op, args, i == 2 ? 6 : 5, &a,
				    NULL, (ir_loc){0});
		ck_assert_uint_eq(id, IR_NONE);
	}
	const char *d = tu_graph_diag(&g);
	ck_assert_ptr_nonnull(
		strstr(d, "do not fit (N, Q, H), (N, K, H), (H), (N, K, dv)"));
	ck_assert_ptr_nonnull(
		strstr(d, "valid lengths [2, 4] must be (N) or (N, Q)"));
	ck_assert_ptr_nonnull(
		strstr(d, "gradient [2, 3, 7] must have the result's shape"));
	tu_graph_fini(&g);
}
END_TEST

static char *print_module(const ir_module *m)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	ir_module_print(m, out);
	fclose(out);
	return text;
}

/* The fused training graph prints, reads back and verifies, and prints
 * the same again. */
START_TEST(test_the_fused_additive_ops_print_and_read_back)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	add_case c = {2, 3, 4, 5, 6, AC_QUERY, 0.25, false, 1};
	ir_module *m = add_compile(&x.ctx, &c, AC_FUSED);
	char *text = print_module(m);
	ck_assert_ptr_nonnull(strstr(text, "fused_additive_attention_grad %"));
	uint32_t file = ir_ctx_add_source(&x.ctx, "t.ir", text, strlen(text));
	ir_module *back = ir_module_read(&x.ctx, file);
	ck_assert_msg(back != NULL, "%s", tu_graph_diag(&x));
	ck_assert(ir_module_verify(back));
	char *again = print_module(back);
	ck_assert_str_eq(again, text);
	free(text);
	free(again);
	ir_module_destroy(back);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

/* ---- the interpreter: fused against unfused ---------------------------------- */

typedef struct runs {
	interp_tensor in[4], params[4];
	uint32_t n_in;
} runs;

static interp_tensor *run_grad(ir_ctx *ctx, const ir_module *m,
			       const add_case *c, const runs *r, bool is_f64)
{
	const ir_func *f = ir_module_find_func(m, "loss_grad");
	interp_tensor *out = calloc(f->n_outputs, sizeof *out);
	interp_opts o = {.is_f64 = is_f64,
			 .is_training = c->is_training,
			 .seed = c->seed,
			 .step = 2};
	ck_assert_msg(interp_run(ctx, m, f, &o, r->params, r->in, out),
		      "loss_grad does not run");
	return out;
}

static void free_out(ir_ctx *ctx, interp_tensor *out, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		interp_tensor_fini(ctx, &out[i]);
	free(out);
}

/* Runs loss_grad unfused (float32 and float64), fused after autodiff and
 * fused before it (float32, and float64), and judges the fused results. */
static void check_case(const add_case *c)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *mu = add_compile(&x.ctx, c, AC_UNFUSED);
	ir_module *mf = add_compile(&x.ctx, c, AC_FUSED);
	ir_module *mg = add_compile(&x.ctx, c, AC_FUSED_FIRST);
	runs r = {0};
	int64_t syms[1] = {0};
	ac_case ac = add_as_ac(c);
	r.n_in = ac_inputs(&x.ctx, &ac, r.in);
	ck_assert(interp_params_init(&x.ctx, mu, syms, c->seed, false, r.params));
	interp_tensor *ref = run_grad(&x.ctx, mu, c, &r, true);
	interp_tensor *u32 = run_grad(&x.ctx, mu, c, &r, false);
	interp_tensor *f32 = run_grad(&x.ctx, mf, c, &r, false);
	interp_tensor *g32 = run_grad(&x.ctx, mg, c, &r, false);
	interp_tensor *f64 = run_grad(&x.ctx, mf, c, &r, true);
	const ir_func *f = ir_module_find_func(mu, "loss_grad");
	ck_assert_uint_eq(f->n_outputs, 5);
	for (uint32_t o = 0; o < f->n_outputs; o++) {
		double e, mag;
		ac_check_ratio(&f32[o], &u32[o], &ref[o], f->output_names[o]);
		ac_check_ratio(&g32[o], &u32[o], &ref[o], f->output_names[o]);
		ac_errors(&f64[o], &ref[o], &e, &mag);
		ck_assert_msg(e <= 1e-12 * (mag + 1),
			      "%s: fused float64 differs "
			      "by %g",
			      f->output_names[o], e);
	}
	free_out(&x.ctx, ref, f->n_outputs);
	free_out(&x.ctx, u32, f->n_outputs);
	free_out(&x.ctx, f32, f->n_outputs);
	free_out(&x.ctx, g32, f->n_outputs);
	free_out(&x.ctx, f64, f->n_outputs);
	for (uint32_t i = 0; i < r.n_in; i++)
		interp_tensor_fini(&x.ctx, &r.in[i]);
	for (uint32_t i = 0; i < 4; i++)
		interp_tensor_fini(&x.ctx, &r.params[i]);
	ir_module_destroy(mu);
	ir_module_destroy(mf);
	ir_module_destroy(mg);
	tu_graph_fini(&x);
}

static const add_case interp_cases[] = {
	/* N, Q, K, H, dv, valid, p, training, seed */
	{2, 3, 5, 4, 3, AC_BATCH, 0, false, 11},
	{3, 7, 4, 5, 7, AC_QUERY, 0, false, 12},
	{2, 1, 9, 7, 1, AC_NONE, 0, false, 13},
	{4, 1, 10, 32, 32, AC_BATCH, 0.1, true, 14},
	{2, 5, 3, 33, 17, AC_QUERY, 0.5, true, 15},
	{1, 6, 1, 3, 2, AC_BATCH, 0, false, 16},
	{2, 1, 1, 9, 4, AC_QUERY, 0.3, false, 17},
	{3, 4, 6, 1, 5, AC_NONE, 0.2, true, 18},
};

START_TEST(test_fused_additive_interpreter_matches_the_unfused_graph_and_its_gradients)
{
	check_case(&interp_cases[_i]);
}
END_TEST

/* The book's example (d2l 10.3.2): every key the same, so the weights
 * are uniform over the valid keys; a row of valid length 0 averages all
 * the values, as the -1e6 fill makes the unfused softmax uniform. */
START_TEST(test_fused_additive_rows_average_their_valid_values_and_length_zero_all)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_load_model(&x, "models/additive_attention.g");
	ir_module_find_func(m, "forward")->n_outputs = 1; /* not the weights */
	ac_run_pipeline(m, NULL);
	ck_assert_uint_eq(ac_count(m, "forward", IR_OP_FUSED_ADDITIVE_ATTENTION),
			  1);
	const ir_func *f = ir_module_find_func(m, "forward");
	interp_tensor in[4], params[4], out[1];
	int64_t syms[3] = {2, 1, 10};
	const int64_t qd[3] = {2, 1, 20}, kd[3] = {2, 10, 2},
		      vd[3] = {2, 10, 4}, ld[1] = {2};
	ck_assert(interp_tensor_alloc(&x.ctx, &in[0], IR_F32, 3, qd));
	ck_assert(interp_tensor_alloc(&x.ctx, &in[1], IR_F32, 3, kd));
	ck_assert(interp_tensor_alloc(&x.ctx, &in[2], IR_F32, 3, vd));
	ck_assert(interp_tensor_alloc(&x.ctx, &in[3], IR_I32, 1, ld));
	for (int i = 0; i < 40; i++) {
		((float *)in[0].data)[i] = (float)(i % 7) * 0.1f;
		((float *)in[1].data)[i] = 1;
	}
	for (int i = 0; i < 80; i++)
		((float *)in[2].data)[i] = (float)(i % 40);
	((int32_t *)in[3].data)[0] = 2;
	((int32_t *)in[3].data)[1] = 0;
	ck_assert(interp_params_init(&x.ctx, m, syms, 3, false, params));
	interp_opts o = {0};
	ck_assert_msg(interp_run(&x.ctx, m, f, &o, params, in, out), "%s",
		      tu_graph_diag(&x));
	const float want[8] = {2, 3, 4, 5, 18, 19, 20, 21};
	for (int i = 0; i < 8; i++)
		ck_assert_float_eq_tol(((float *)out[0].data)[i], want[i], 1e-5);
	interp_tensor_fini(&x.ctx, &out[0]);
	for (int i = 0; i < 4; i++)
		interp_tensor_fini(&x.ctx, &in[i]);
	for (int i = 0; i < 3; i++)
		interp_tensor_fini(&x.ctx, &params[i]);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

/* ---- the pass on models -------------------------------------------------------- */

/* Bahdanau's decoder attends once per step, 10 steps: 10 attentions in
 * loss and forward, and in loss_grad 10 forward and 10 backward; the
 * decode_step returns its weights for the heatmap, and stays unfused. */
START_TEST(test_every_decoder_step_of_bahdanau_fuses_forward_and_backward)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_load_model(&x, "models/bahdanau.g");
	ac_differentiate(m, NULL);
	ac_run_pipeline(m, NULL);
	ck_assert_uint_eq(ac_count(m, "loss", IR_OP_FUSED_ADDITIVE_ATTENTION),
			  10);
	ck_assert_uint_eq(ac_count(m, "forward", IR_OP_FUSED_ADDITIVE_ATTENTION),
			  10);
	ck_assert_uint_eq(ac_count(m, "loss_grad",
				   IR_OP_FUSED_ADDITIVE_ATTENTION),
			  10);
	ck_assert_uint_eq(ac_count(m, "loss_grad",
				   IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD),
			  10);
	ck_assert_uint_eq(ac_count(m, "decode_step",
				   IR_OP_FUSED_ADDITIVE_ATTENTION),
			  0);
	ck_assert_uint_eq(ac_count(m, "decode_step", IR_OP_MASKED_SOFTMAX), 1);
	/* No (B, 1, T, H) features are left in the training graph: its only
	 * rank-4 nodes are views of dqp, (B, 1, 1, H), and the loss's
	 * cross_entropy_with_grad (2, B, T, V) with its slices. */
	const ir_func *f = ir_module_find_func(m, "loss_grad");
	for (uint32_t i = 0; i < f->g.n_nodes; i++) {
		const ir_type *t = &f->g.nodes[i].type;
		ir_op op = f->g.nodes[i].op;
		bool is_loss = op == IR_OP_CROSS_ENTROPY_WITH_GRAD ||
			       (op == IR_OP_SLICE &&
				f->g.nodes[ir_arg(&f->g, i, 0)].type.dims[0].coef ==
					2);
		ck_assert(t->rank < 4 || is_loss ||
			  (op == IR_OP_RESHAPE && t->dims[2].coef == 1));
	}
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_no_fuse_and_disabling_the_pass_leave_bahdanau_unfused)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	const char *off[] = {"fuse_attention"};
	pass_options opts[2] = {{.no_fuse = true},
				{.disabled = off, .n_disabled = 1}};
	for (int i = 0; i < 2; i++) {
		ir_module *m = ac_load_model(&x, "models/bahdanau.g");
		ac_differentiate(m, &opts[i]);
		ac_run_pipeline(m, &opts[i]);
		for (uint32_t fi = 0; fi < m->n_funcs; fi++) {
			const char *fn = m->funcs[fi]->name;
			ck_assert_uint_eq(ac_count(m, fn,
						   IR_OP_FUSED_ADDITIVE_ATTENTION),
					  0);
			ck_assert_uint_eq(
				ac_count(m, fn,
					 IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD),
				0);
		}
		ck_assert_uint_eq(ac_count(m, "loss", IR_OP_MASKED_SOFTMAX), 10);
		ir_module_destroy(m);
	}
	tu_graph_fini(&x);
}
END_TEST

/* Valid lengths that are constants: fold would make the unfused
 * gradient's mask a constant, but the gradient is derived from the fused
 * node, so it is one fused_additive_attention_grad whatever the lengths
 * are, and equal to the unfused gradient. */
START_TEST(test_constant_valid_lengths_fuse_the_additive_backward)
{
	static const char src[] =
		"model t\n"
		"export def loss(w: f32[2, 3, 6])\n"
		"  param qp : [2, 3, 4] = normal(0, 1)\n"
		"  param kp : [2, 5, 4] = normal(0, 1)\n"
		"  param wv : [4, 1] = normal(0, 1)\n"
		"  param v : [2, 5, 6] = normal(0, 1)\n"
		"  f = tanh(unsqueeze(qp, 2) + unsqueeze(kp, 1))\n"
		"  s = squeeze(f @ wv, -1)\n"
		"  return sum(masked_softmax(s, [0, 4]) @ v * w)\n";
	float data[36];
	for (int i = 0; i < 36; i++)
		data[i] = (float)((i * 5) % 7) - 3;
	interp_tensor w = {.dtype = IR_F32,
			   .rank = 3,
			   .dims = {2, 3, 6},
			   .data = data};
	tu_graph x;
	tu_graph_init_ctx(&x);
	interp_tensor *out[2];
	for (int fused = 0; fused < 2; fused++) {
		ir_module *m = ac_load_text(&x, src);
		pass_options po = {.no_fuse = !fused};
		ac_differentiate(m, &po);
		ac_run_pipeline(m, &po);
		ck_assert_uint_eq(ac_count(m, "loss_grad",
					   IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD),
				  (uint32_t)fused);
		interp_tensor params[4];
		int64_t syms[1] = {0};
		ck_assert(interp_params_init(&x.ctx, m, syms, 5, false, params));
		out[fused] = calloc(5, sizeof *out[fused]);
		interp_opts o = {0};
		ck_assert(interp_run(&x.ctx, m,
				     ir_module_find_func(m, "loss_grad"), &o,
				     params, &w, out[fused]));
		for (int i = 0; i < 4; i++)
			interp_tensor_fini(&x.ctx, &params[i]);
		ir_module_destroy(m);
	}
	for (int o = 0; o < 5; o++) {
		double e, mag;
		ac_errors(&out[1][o], &out[0][o], &e, &mag);
		ck_assert_msg(e <= 1e-5 * (mag + 1), "output %d differs by %g",
			      o, e);
		interp_tensor_fini(&x.ctx, &out[0][o]);
		interp_tensor_fini(&x.ctx, &out[1][o]);
	}
	free(out[0]);
	free(out[1]);
	tu_graph_fini(&x);
}
END_TEST

/* --explain-fusion names the additive chains that fuse and says why the
 * weights of decode_step and of additive_attention.g's forward stay. */
START_TEST(test_explain_fusion_reports_the_additive_attentions)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_load_model(&x, "models/bahdanau.g");
	ac_run_pipeline(m, &(pass_options){.no_fuse = true});
	char *text = ac_explain(m);
	ck_assert_ptr_nonnull(strstr(text, "@loss %"));
	ck_assert_ptr_nonnull(strstr(text, ", masked_softmax, dropout %"));
	ck_assert_ptr_nonnull(strstr(text, "into fused_additive_attention\n"));
	ck_assert_ptr_nonnull(
		strstr(text, "@decode_step %22 masked_softmax at "));
	ck_assert_ptr_nonnull(strstr(text,
				     "not fused: the weights are output 2 "
				     "(weights) of @decode_step: fusing would "
				     "lose them"));
	ck_assert_ptr_nonnull(strstr(text, "20 of 21 softmaxes fuse\n"));
	free(text);
	ir_module_destroy(m);
	m = ac_load_model(&x, "models/additive_attention.g");
	ac_run_pipeline(m, &(pass_options){.no_fuse = true});
	text = ac_explain(m);
	ck_assert_ptr_nonnull(strstr(text, "not fused: the weights are output 1 "
					   "(weights) of @forward"));
	ck_assert_ptr_nonnull(strstr(text, "0 of 1 softmax fuse\n"));
	free(text);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

/* Features that something else also uses must stay: the chain does not
 * fuse, and the explanation names the other user. */
START_TEST(test_features_used_elsewhere_block_the_fusion)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_load_text(
		&x,
		"model t\n"
		"export def f(qp: f32[2, 3, 4], kp: f32[2, 5, 4], v: f32[2, 5, 6])\n"
		"  param wv : [4, 1] = normal(0, 1)\n"
		"  t = tanh(unsqueeze(qp, 2) + unsqueeze(kp, 1))\n"
		"  s = squeeze(t @ wv, -1)\n"
		"  return softmax(s) @ v, sum(t)\n");
	ac_run_pipeline(m, &(pass_options){.no_fuse = true});
	char *text = ac_explain(m);
	ck_assert_msg(strstr(text, "not fused: the features %") &&
			      strstr(text, "are also used by %"),
		      "%s", text);
	free(text);
	ac_run_pipeline(m, NULL);
	ck_assert_uint_eq(ac_count(m, "f", IR_OP_FUSED_ADDITIVE_ATTENTION), 0);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

static Suite *fuse_additive_suite(void)
{
	Suite *s = suite_create("passes_fuse_additive");
	TCase *ops = tcase_create("ops");
	tcase_add_test(
		ops,
		test_fused_additive_attention_has_the_queries_rows_and_the_values_width);
	tcase_add_test(ops,
		       test_fused_additive_attention_rejects_heads_other_than_one);
	tcase_add_test(
		ops,
		test_fused_additive_attention_rejects_operands_that_do_not_fit);
	tcase_add_test(ops, test_the_fused_additive_ops_print_and_read_back);
	suite_add_tcase(s, ops);
	TCase *interp = tcase_create("interpreter");
	tcase_set_timeout(interp, 120);
	tcase_add_loop_test(
		interp,
		test_fused_additive_interpreter_matches_the_unfused_graph_and_its_gradients,
		0, (int)(sizeof interp_cases / sizeof interp_cases[0]));
	tcase_add_test(
		interp,
		test_fused_additive_rows_average_their_valid_values_and_length_zero_all);
	suite_add_tcase(s, interp);
	TCase *models = tcase_create("models");
	tcase_set_timeout(models, 120);
	tcase_add_test(
		models,
		test_every_decoder_step_of_bahdanau_fuses_forward_and_backward);
	tcase_add_test(models,
		       test_no_fuse_and_disabling_the_pass_leave_bahdanau_unfused);
	tcase_add_test(models,
		       test_constant_valid_lengths_fuse_the_additive_backward);
	tcase_add_test(models,
		       test_explain_fusion_reports_the_additive_attentions);
	tcase_add_test(models, test_features_used_elsewhere_block_the_fusion);
	suite_add_tcase(s, models);
	return s;
}

int main(void)
{
	return tu_run_suite(fuse_additive_suite());
}
