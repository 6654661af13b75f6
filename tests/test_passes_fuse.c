/*
 * test_passes_fuse.c - attention fusion: the fused ops' shape rules and
 * text, the interpreter's fused kernels against the unfused graphs they
 * replace (forward and gradients, float32 judged against float64 by the
 * error-ratio rule), the pass on the book's models (how many attentions
 * fuse, which stay and why), switching it off, and pass_explain_fusion.
 */
#include "attn_cases.h"
#include "testutil.h"

#include <check.h>

/* ---- the ops -------------------------------------------------------------- */

typedef struct gb {
	tu_graph x;
	ir_module *m;
	ir_func *f;
} gb;

static void gb_init(gb *g)
{
	tu_graph_init_ctx(&g->x);
	g->m = ir_module_create(&g->x.ctx, "t");
	g->f = ir_module_add_func(g->m, "f", (ir_loc){0});
	g->f->inputs = ir_arena_alloc(&g->m->arena, 8 * sizeof(ir_id));
}

static void gb_fini(gb *g)
{
	ir_module_destroy(g->m);
	tu_graph_fini(&g->x);
}

static ir_id gb_input(gb *g, ir_dtype dt, int rank, const int64_t *dims)
{
	ir_type t = {.dtype = dt, .rank = (uint8_t)rank};
	for (int i = 0; i < rank; i++)
		t.dims[i] = ir_dim_static(dims[i]);
	ir_attr a = {.input_index = g->f->n_inputs};
	ir_id id = ir_build(g->m, g->f, IR_OP_INPUT, NULL, 0, &a, &t,
			    (ir_loc){0});
	g->f->inputs[g->f->n_inputs++] = id;
	return id;
}

static ir_attr attention(double scale, double p)
{
	ir_attr a;
	memset(&a, 0, sizeof a);
	a.attention.scale = scale;
	a.attention.fill = -1e6;
	a.attention.p = p;
	a.attention.heads = 1;
	return a;
}

START_TEST(test_fused_attention_has_the_queries_rows_and_the_values_width)
{
	gb g;
	gb_init(&g);
	ir_id q = gb_input(&g, IR_F32, 3, (int64_t[]){2, 3, 4});
	ir_id k = gb_input(&g, IR_F32, 3, (int64_t[]){2, 5, 4});
	ir_id v = gb_input(&g, IR_F32, 3, (int64_t[]){2, 5, 6});
	ir_id vl = gb_input(&g, IR_I32, 2, (int64_t[]){2, 3});
	ir_attr a = attention(0.5, 0);
	ir_id o = ir_build(g.m, g.f, IR_OP_FUSED_ATTENTION,
			   (ir_id[]){q, k, v, vl}, 4, &a, NULL, (ir_loc){0});
	ck_assert_msg(o != IR_NONE, "%s", tu_graph_diag(&g.x));
	const ir_type *t = &g.f->g.nodes[o].type;
	ck_assert_int_eq(t->rank, 3);
	ck_assert_int_eq(t->dims[0].coef, 2);
	ck_assert_int_eq(t->dims[1].coef, 3);
	ck_assert_int_eq(t->dims[2].coef, 6);
	ir_id gr = ir_build(g.m, g.f, IR_OP_FUSED_ATTENTION_GRAD,
			    (ir_id[]){q, k, v, o}, 4, &a, NULL, (ir_loc){0});
	ck_assert_msg(gr != IR_NONE, "%s", tu_graph_diag(&g.x));
	/* 2*3*4 + 2*5*4 + 2*5*6 */
	ck_assert_int_eq(g.f->g.nodes[gr].type.rank, 1);
	ck_assert_int_eq(g.f->g.nodes[gr].type.dims[0].coef, 124);
	gb_fini(&g);
}
END_TEST

/* Builds fused_attention (or the gradient) and expects the error text. */
static void expect_shape_error(ir_op op, const int64_t (*dims)[3],
			       const int *ranks, const ir_dtype *dts, int n,
			       double p, const char *want)
{
	gb g;
	gb_init(&g);
	ir_id args[5];
	for (int i = 0; i < n; i++)
		args[i] = gb_input(&g, dts[i], ranks[i], dims[i]);
	ir_attr a = attention(1, p);
	ir_id o = ir_build(g.m, g.f, op, args, (uint32_t)n, &a, NULL,
			   (ir_loc){0});
	ck_assert_uint_eq(o, IR_NONE);
	ck_assert_msg(strstr(tu_graph_diag(&g.x), want), "want '%s' in: %s",
		      want, tu_graph_diag(&g.x));
	gb_fini(&g);
}

START_TEST(test_fused_attention_rejects_operands_that_do_not_fit)
{
	const int64_t bad_d[4][3] = {{2, 3, 4}, {2, 5, 3}, {2, 5, 6}, {2}};
	const int r4[4] = {3, 3, 3, 1};
	const ir_dtype f3i[4] = {IR_F32, IR_F32, IR_F32, IR_I32};
	expect_shape_error(IR_OP_FUSED_ATTENTION, bad_d, r4, f3i, 4, 0,
			   "do not fit (N, Q, d)");
	const int64_t bad_valid[4][3] = {{2, 3, 4}, {2, 5, 4}, {2, 5, 6}, {2, 4}};
	const int r42[4] = {3, 3, 3, 2};
	expect_shape_error(IR_OP_FUSED_ATTENTION, bad_valid, r42, f3i, 4, 0,
			   "must be (N) or (N, Q)");
	const int64_t ok[3][3] = {{2, 3, 4}, {2, 5, 4}, {2, 5, 6}};
	const int r3[3] = {3, 3, 3};
	expect_shape_error(IR_OP_FUSED_ATTENTION, ok, r3, f3i, 3, 1.0,
			   "probability must be in [0, 1)");
	expect_shape_error(IR_OP_FUSED_ATTENTION, ok, r3, f3i, 2, 0,
			   "expects 3 or 4 operands");
	const int64_t bad_g[4][3] = {{2, 3, 4}, {2, 5, 4}, {2, 5, 6}, {2, 3, 5}};
	const int r33[4] = {3, 3, 3, 3};
	const ir_dtype f4[4] = {IR_F32, IR_F32, IR_F32, IR_F32};
	expect_shape_error(IR_OP_FUSED_ATTENTION_GRAD, bad_g, r33, f4, 4, 0,
			   "must have the result's shape [2, 3, 6]");
}
END_TEST

/* With h heads side by side the operands are (B, Q, h*d), (B, K, h*d),
 * (B, K, h*dv) and the lengths (B) or (B, Q); the last dims must hold
 * whole heads, and there is at least one. */
START_TEST(test_fused_attention_with_heads_takes_them_side_by_side)
{
	gb g;
	gb_init(&g);
	ir_id q = gb_input(&g, IR_F32, 3, (int64_t[]){2, 3, 4});
	ir_id k = gb_input(&g, IR_F32, 3, (int64_t[]){2, 5, 4});
	ir_id v = gb_input(&g, IR_F32, 3, (int64_t[]){2, 5, 6});
	ir_id vl = gb_input(&g, IR_I32, 2, (int64_t[]){2, 3});
	ir_id v5 = gb_input(&g, IR_F32, 3, (int64_t[]){2, 5, 5});
	ir_attr a = attention(0.5, 0);
	a.attention.heads = 2;
	ir_id o = ir_build(g.m, g.f, IR_OP_FUSED_ATTENTION,
			   (ir_id[]){q, k, v, vl}, 4, &a, NULL, (ir_loc){0});
	ck_assert_msg(o != IR_NONE, "%s", tu_graph_diag(&g.x));
	const ir_type *t = &g.f->g.nodes[o].type;
	ck_assert_int_eq(t->dims[0].coef, 2);
	ck_assert_int_eq(t->dims[1].coef, 3);
	ck_assert_int_eq(t->dims[2].coef, 6);
	ir_id gr = ir_build(g.m, g.f, IR_OP_FUSED_ATTENTION_GRAD,
			    (ir_id[]){q, k, v, vl, o}, 5, &a, NULL, (ir_loc){0});
	ck_assert_msg(gr != IR_NONE, "%s", tu_graph_diag(&g.x));
	ck_assert_int_eq(g.f->g.nodes[gr].type.dims[0].coef, 124);
	ck_assert_uint_eq(ir_build(g.m, g.f, IR_OP_FUSED_ATTENTION,
				   (ir_id[]){q, k, v5}, 3, &a, NULL, (ir_loc){0}),
			  IR_NONE);
	ck_assert_ptr_nonnull(
		strstr(tu_graph_diag(&g.x), "multiple of the 2 heads"));
	a.attention.heads = 3;
	ck_assert_uint_eq(ir_build(g.m, g.f, IR_OP_FUSED_ATTENTION,
				   (ir_id[]){q, k, v}, 3, &a, NULL, (ir_loc){0}),
			  IR_NONE);
	a.attention.heads = 0;
	ck_assert_uint_eq(ir_build(g.m, g.f, IR_OP_FUSED_ATTENTION,
				   (ir_id[]){q, k, v}, 3, &a, NULL, (ir_loc){0}),
			  IR_NONE);
	ck_assert_ptr_nonnull(
		strstr(tu_graph_diag(&g.x), "heads must be at least 1, not 0"));
	gb_fini(&g);
}
END_TEST

/* Queries (B, Q, 2) and keys (B, K, 2): dq has B*Q*2 elements, dk B*K*2,
 * and no dim holds their sum. */
START_TEST(test_fused_attention_grad_needs_sizes_that_add_up_to_one_dim)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_load_text(
		&x,
		"model t\ndim B, Q, K\n"
		"export def f(q: f32[B, Q, 2], k: f32[B, K, 2], v: f32[B, K, 3], "
		"g: f32[B, Q, 3])\n  return q\n");
	ir_func *f = m->funcs[0];
	ir_attr a = attention(1, 0);
	ir_id o = ir_build(m, f, IR_OP_FUSED_ATTENTION_GRAD, f->inputs, 4, &a,
			   NULL, (ir_loc){0});
	ck_assert_uint_eq(o, IR_NONE);
	ck_assert_ptr_nonnull(
		strstr(tu_graph_diag(&x), "do not add up to one dimension"));
	ir_dim sz;
	ir_type qt = f->g.nodes[f->inputs[0]].type;
	ck_assert(!ir_attention_grad_size(m, &qt, &qt, &qt, &sz));
	/* ... unless the module has the product symbol B*Q. */
	int32_t bq[2] = {qt.dims[0].sym, qt.dims[1].sym};
	int32_t BQ = ir_module_product_sym(m, bq, 2, (ir_loc){0});
	ck_assert(ir_attention_grad_size(m, &qt, &qt, &qt, &sz));
	ck_assert_int_eq(sz.coef, 6);
	ck_assert_int_eq(sz.sym, BQ);
	qt.dims[1] = ir_dim_static(10);
	ck_assert(ir_attention_grad_size(m, &qt, &qt, &qt, &sz));
	ck_assert_int_eq(sz.coef, 60);
	ck_assert_int_eq(sz.sym, qt.dims[0].sym);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

static char *print_module(const ir_module *m)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ir_module_print(m, f);
	fclose(f);
	return buf;
}

START_TEST(test_fused_ops_print_their_attributes_and_read_back)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ac_case c = {2, 3, 5, 4, 6, AC_QUERY, 0.25, false, 1, 0};
	ir_module *m = ac_compile(&x.ctx, &c, AC_FUSED);
	char *text = print_module(m);
	ck_assert_ptr_nonnull(strstr(text, "fused_attention_grad %"));
	ck_assert_ptr_nonnull(
		strstr(text, "{scale=0.5, fill=-1e+06, p=0.25, stream=0}"));
	uint32_t file = ir_ctx_add_source(&x.ctx, "m.ir", text, strlen(text));
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

/* heads is printed when it is not 1 and read back; text without it
 * reads as one head. */
START_TEST(test_fused_ops_print_their_heads_and_read_them_back)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ac_case c = {2, 3, 5, 4, 6, AC_BATCH, 0.25, false, 1, 3};
	ir_module *m = ac_compile(&x.ctx, &c, AC_FUSED);
	char *text = print_module(m);
	ck_assert_ptr_nonnull(
		strstr(text, "p=0.25, stream=0, heads=3} : f32[2, 3, 18]"));
	uint32_t file = ir_ctx_add_source(&x.ctx, "m.ir", text, strlen(text));
	ir_module *back = ir_module_read(&x.ctx, file);
	ck_assert_msg(back != NULL, "%s", tu_graph_diag(&x));
	ck_assert(ir_module_verify(back));
	ac_expect_heads(back, "loss_grad", 3);
	char *again = print_module(back);
	ck_assert_str_eq(again, text);
	free(text);
	free(again);
	ir_module_destroy(back);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_verifier_rejects_a_fused_dropout_stream_out_of_range)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ac_case c = {1, 2, 2, 2, 2, AC_NONE, 0.5, false, 1, 0};
	ir_module *m = ac_compile(&x.ctx, &c, AC_FUSED);
	ir_func *f = ir_module_find_func(m, "loss");
	for (uint32_t i = 0; i < f->g.n_nodes; i++)
		if (f->g.nodes[i].op == IR_OP_FUSED_ATTENTION)
			f->g.nodes[i].attr.attention.stream = 5;
	ck_assert(!ir_module_verify(m));
	ck_assert_ptr_nonnull(
		strstr(tu_graph_diag(&x), "dropout stream 5 out of range"));
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

/* ---- the interpreter: fused against unfused ---------------------------------- */

typedef struct runs {
	interp_tensor in[4], params[4];
	uint32_t n_in;
	interp_tensor *out[4]; /* per run: loss_grad's outputs */
} runs;

static interp_tensor *run_grad(ir_ctx *ctx, const ir_module *m,
			       const ac_case *c, const runs *r, bool is_f64)
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

/* Multi-head cases: the fused nodes with their heads read in place give
 * bit for bit what the same nodes give on split copies (heads = 1). */
static void check_same_as_split(ir_ctx *ctx, const ac_case *c, const runs *r,
				const interp_tensor *f32)
{
	ir_module *ms = ac_compile(ctx, c, AC_FUSED_SPLIT);
	interp_tensor *s32 = run_grad(ctx, ms, c, r, false);
	const ir_func *f = ir_module_find_func(ms, "loss_grad");
	for (uint32_t o = 0; o < f->n_outputs; o++) {
		int64_t n = interp_tensor_numel(&s32[o]);
		ck_assert_int_eq(interp_tensor_numel(&f32[o]), n);
		ck_assert_msg(memcmp(s32[o].data, f32[o].data, (size_t)n * 4) ==
				      0,
			      "%s: heads in place differ from split heads",
			      f->output_names[o]);
	}
	free_out(ctx, s32, f->n_outputs);
	ir_module_destroy(ms);
}

/* Runs loss_grad unfused (float32 and float64), fused after autodiff and
 * fused before it (float32), and judges the fused results. */
static void check_case(const ac_case *c)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *mu = ac_compile(&x.ctx, c, AC_UNFUSED);
	ir_module *mf = ac_compile(&x.ctx, c, AC_FUSED);
	ir_module *mg = ac_compile(&x.ctx, c, AC_FUSED_FIRST);
	runs r = {0};
	int64_t syms[1] = {0};
	r.n_in = ac_inputs(&x.ctx, c, r.in);
	ck_assert(interp_params_init(&x.ctx, mu, syms, c->seed, false, r.params));
	interp_tensor *ref = run_grad(&x.ctx, mu, c, &r, true);
	interp_tensor *u32 = run_grad(&x.ctx, mu, c, &r, false);
	interp_tensor *f32 = run_grad(&x.ctx, mf, c, &r, false);
	interp_tensor *g32 = run_grad(&x.ctx, mg, c, &r, false);
	interp_tensor *f64 = run_grad(&x.ctx, mf, c, &r, true);
	const ir_func *f = ir_module_find_func(mu, "loss_grad");
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
	if (c->H > 0)
		check_same_as_split(&x.ctx, c, &r, f32);
	free_out(&x.ctx, ref, f->n_outputs);
	free_out(&x.ctx, u32, f->n_outputs);
	free_out(&x.ctx, f32, f->n_outputs);
	free_out(&x.ctx, g32, f->n_outputs);
	free_out(&x.ctx, f64, f->n_outputs);
	for (uint32_t i = 0; i < r.n_in; i++)
		interp_tensor_fini(&x.ctx, &r.in[i]);
	for (uint32_t i = 0; i < 3; i++)
		interp_tensor_fini(&x.ctx, &r.params[i]);
	ir_module_destroy(mu);
	ir_module_destroy(mf);
	ir_module_destroy(mg);
	tu_graph_fini(&x);
}

static const ac_case interp_cases[] = {
	{2, 3, 5, 2, 3, AC_BATCH, 0, false, 11, 0},
	{3, 7, 4, 5, 7, AC_QUERY, 0, false, 12, 0},
	{2, 1, 9, 16, 1, AC_NONE, 0, false, 13, 0},
	{1, 4, 4, 128, 64, AC_BATCH, 0, false, 14, 0},
	{2, 5, 3, 33, 17, AC_QUERY, 0.5, true, 15, 0},
	{2, 6, 11, 8, 8, AC_BATCH, 0.1, true, 16, 0},
	{1, 9, 2, 3, 2, AC_QUERY, 0.3, false, 17, 0},
	{4, 2, 13, 7, 9, AC_NONE, 0.2, true, 18, 0},
};

START_TEST(test_fused_interpreter_matches_the_unfused_graph_and_its_gradients)
{
	check_case(&interp_cases[_i]);
}
END_TEST

/* Multi-head attention: B, Q, K, d, dv (per head), valid, p, training,
 * seed, H. */
static const ac_case heads_cases[] = {
	{2, 3, 5, 2, 3, AC_BATCH, 0, false, 51, 2},
	{3, 7, 4, 5, 7, AC_QUERY, 0, false, 52, 3},
	{2, 1, 9, 16, 1, AC_NONE, 0, false, 53, 4},
	{1, 4, 4, 64, 32, AC_BATCH, 0, false, 54, 2},
	{2, 5, 3, 33, 17, AC_QUERY, 0.5, true, 55, 2},
	{2, 6, 11, 8, 8, AC_BATCH, 0.1, true, 56, 4},
	{1, 9, 2, 3, 2, AC_QUERY, 0.3, false, 57, 5},
	{3, 10, 10, 8, 8, AC_QUERY, 0.1, true, 58, 4},
	{4, 2, 13, 7, 9, AC_NONE, 0.2, true, 59, 1},
};

START_TEST(test_fused_heads_read_in_place_match_the_unfused_graph_and_the_split_form)
{
	check_case(&heads_cases[_i]);
}
END_TEST

/* Rows of valid length 0 average every value, as the -1e6 fill makes
 * the unfused softmax uniform. */
START_TEST(test_fused_rows_of_valid_length_zero_average_all_values)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_load_text(
		&x,
		"model t\n"
		"export def f(q: f32[1, 2, 2], k: f32[1, 3, 2], v: f32[1, 3, 1], "
		"valid: i32[1, 2])\n"
		"  return masked_softmax(q @ k.T, valid) @ v\n");
	ac_run_pipeline(m, NULL);
	ck_assert_uint_eq(ac_count(m, "f", IR_OP_FUSED_ATTENTION), 1);
	interp_tensor in[4];
	const int64_t qd[3] = {1, 2, 2}, kd[3] = {1, 3, 2}, vd[3] = {1, 3, 1},
		      ld[2] = {1, 2};
	const float qv[4] = {1, 0, 0, 1}, kv[6] = {0, 0, 1, 0, 0, 1},
		    vv[3] = {3, 6, 12};
	const int32_t lv[2] = {0, 2};
	ck_assert(interp_tensor_alloc(&x.ctx, &in[0], IR_F32, 3, qd));
	ck_assert(interp_tensor_alloc(&x.ctx, &in[1], IR_F32, 3, kd));
	ck_assert(interp_tensor_alloc(&x.ctx, &in[2], IR_F32, 3, vd));
	ck_assert(interp_tensor_alloc(&x.ctx, &in[3], IR_I32, 2, ld));
	memcpy(in[0].data, qv, sizeof qv);
	memcpy(in[1].data, kv, sizeof kv);
	memcpy(in[2].data, vv, sizeof vv);
	memcpy(in[3].data, lv, sizeof lv);
	interp_tensor out = {0};
	interp_opts o = {0};
	ck_assert(interp_run(&x.ctx, m, m->funcs[0], &o, NULL, in, &out));
	const float *y = out.data;
	/* row 0: (3 + 6 + 12) / 3; row 1: keys 0, 1 with scores 0, 0 */
	ck_assert_float_eq_tol(y[0], 7.0f, 1e-6f);
	ck_assert_float_eq_tol(y[1], 4.5f, 1e-6f);
	interp_tensor_fini(&x.ctx, &out);
	for (int i = 0; i < 4; i++)
		interp_tensor_fini(&x.ctx, &in[i]);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

/* ---- the pass on the models ------------------------------------------------------ */

static uint32_t count_all(const ir_module *m, ir_op op)
{
	uint32_t n = 0;
	for (uint32_t f = 0; f < m->n_funcs; f++)
		n += ac_count(m, m->funcs[f]->name, op);
	return n;
}

/* The Transformer's loss and forward have six attentions each: two
 * encoder self-attentions, two causal decoder self-attentions and two
 * encoder-decoder attentions; encode and decode_step return their
 * weights, which keeps theirs unfused. */
START_TEST(test_every_attention_of_the_transformer_loss_and_forward_fuses)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_load_model(&x, "models/transformer.g");
	ac_run_pipeline(m, NULL);
	ck_assert_uint_eq(ac_count(m, "loss", IR_OP_FUSED_ATTENTION), 6);
	ck_assert_uint_eq(ac_count(m, "forward", IR_OP_FUSED_ATTENTION), 6);
	ck_assert_uint_eq(ac_count(m, "loss", IR_OP_MASKED_SOFTMAX), 0);
	ck_assert_uint_eq(ac_count(m, "loss", IR_OP_DROPOUT), 12);
	ck_assert_uint_eq(ac_count(m, "encode", IR_OP_FUSED_ATTENTION), 0);
	ck_assert_uint_eq(ac_count(m, "decode_step", IR_OP_FUSED_ATTENTION), 0);
	/* The decoder's causal self-attention keeps its (B*H, T) lengths. */
	const ir_func *f = ir_module_find_func(m, "loss");
	uint32_t per_query = 0;
	for (uint32_t i = 0; i < f->g.n_nodes; i++)
		if (f->g.nodes[i].op == IR_OP_FUSED_ATTENTION)
			per_query += f->g.nodes[ir_arg(&f->g, i, 3)].type.rank ==
				     2;
	ck_assert_uint_eq(per_query, 2);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_the_transformer_training_graph_fuses_forward_and_backward)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_load_model(&x, "models/transformer.g");
	ac_differentiate(m, NULL);
	ac_run_pipeline(m, NULL);
	ck_assert_uint_eq(ac_count(m, "loss_grad", IR_OP_FUSED_ATTENTION), 6);
	ck_assert_uint_eq(ac_count(m, "loss_grad", IR_OP_FUSED_ATTENTION_GRAD),
			  6);
	uint32_t left = ac_count(m, "loss_grad", IR_OP_MASKED_SOFTMAX);
	ir_module_destroy(m);
	/* The masked softmaxes left draw the loss's masks over the symbolic
	 * vocabulary (grad_build.c); the six of the attentions are gone. */
	m = ac_load_model(&x, "models/transformer.g");
	pass_options off = {.no_fuse = true};
	ac_differentiate(m, &off);
	ac_run_pipeline(m, &off);
	ck_assert_uint_eq(ac_count(m, "loss_grad", IR_OP_MASKED_SOFTMAX),
			  left + 6);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_no_fuse_and_disabling_the_pass_leave_the_graph_unfused)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	const char *off[] = {"fuse_attention"};
	pass_options opts[2] = {{.no_fuse = true},
				{.disabled = off, .n_disabled = 1}};
	for (int i = 0; i < 2; i++) {
		ir_module *m = ac_load_model(&x, "models/transformer.g");
		ac_differentiate(m, &opts[i]);
		ac_run_pipeline(m, &opts[i]);
		ck_assert_uint_eq(count_all(m, IR_OP_FUSED_ATTENTION), 0);
		ck_assert_uint_eq(count_all(m, IR_OP_FUSED_ATTENTION_GRAD), 0);
		ck_assert_uint_eq(ac_count(m, "loss", IR_OP_MASKED_SOFTMAX), 6);
		ir_module_destroy(m);
	}
	tu_graph_fini(&x);
}
END_TEST

/* Drops the function's outputs after the first (the weights). */
static void keep_first_output(ir_module *m, const char *fn)
{
	ir_func *f = ir_module_find_func(m, fn);
	f->n_outputs = 1;
}

/* The book's attention models return their weights (for the heatmaps),
 * which must stay; without them every attention fuses, head split and
 * merge included. */
START_TEST(test_model_attentions_fuse_unless_their_weights_are_returned)
{
	static const char *const files[] = {"models/dot_product_attention.g",
					    "models/multihead_attention.g",
					    "models/self_attention.g"};
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_load_model(&x, files[_i]);
	ac_run_pipeline(m, NULL);
	ck_assert_uint_eq(ac_count(m, "forward", IR_OP_FUSED_ATTENTION), 0);
	ck_assert_uint_eq(ac_count(m, "forward", IR_OP_MASKED_SOFTMAX), 1);
	ir_module_destroy(m);
	m = ac_load_model(&x, files[_i]);
	keep_first_output(m, "forward");
	ac_run_pipeline(m, NULL);
	ck_assert_uint_eq(ac_count(m, "forward", IR_OP_FUSED_ATTENTION), 1);
	ck_assert_uint_eq(ac_count(m, "forward", IR_OP_MASKED_SOFTMAX), 0);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

/* The fused op carries the scale, the fill and the dropout, and the loc
 * of its softmax. */
START_TEST(test_fused_attention_takes_scale_dropout_and_the_softmax_location)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_load_model(&x, "models/multihead_attention.g");
	keep_first_output(m, "forward");
	ac_run_pipeline(m, NULL);
	const ir_func *f = ir_module_find_func(m, "forward");
	for (uint32_t i = 0; i < f->g.n_nodes; i++) {
		const ir_node *n = &f->g.nodes[i];
		if (n->op != IR_OP_FUSED_ATTENTION)
			continue;
		ck_assert_double_eq_tol(n->attr.attention.scale, 1 / sqrt(20.0),
					1e-7);
		ck_assert_double_eq(n->attr.attention.fill, -1e6);
		ck_assert_double_eq(n->attr.attention.p, 0.5);
		ck_assert_uint_eq(n->loc.line,
				  20); /* weights = masked_softmax(...) */
		ck_assert_int_eq(f->g.nodes[ir_arg(&f->g, i, 3)].type.rank, 1);
	}
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

/* ---- heads ------------------------------------------------------------------------- */

/* fuse_heads takes every head split and merge around the Transformer's
 * twelve fused nodes of loss_grad (and six of loss): no permute is left
 * in either; without it each attention keeps four (three splits and a
 * merge) and each gradient four more. */
START_TEST(test_the_transformer_reads_every_attentions_heads_in_place)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	static const char *off[] = {"fuse_heads"};
	pass_options opts[2] = {{0}, {.disabled = off, .n_disabled = 1}};
	for (int i = 0; i < 2; i++) {
		ir_module *m = ac_load_model(&x, "models/transformer.g");
		ac_differentiate(m, &opts[i]);
		ac_run_pipeline(m, &opts[i]);
		ck_assert_uint_eq(ac_count(m, "loss_grad", IR_OP_FUSED_ATTENTION),
				  6);
		ck_assert_uint_eq(ac_count(m, "loss_grad",
					   IR_OP_FUSED_ATTENTION_GRAD),
				  6);
		ac_expect_heads(m, "loss", i == 0 ? 4 : 1);
		ac_expect_heads(m, "loss_grad", i == 0 ? 4 : 1);
		ck_assert_uint_eq(ac_count(m, "loss", IR_OP_PERMUTE),
				  i == 0 ? 0 : 24);
		ck_assert_uint_eq(ac_count(m, "loss_grad", IR_OP_PERMUTE),
				  i == 0 ? 0 : 48);
		ck_assert_uint_eq(ac_count(m, "loss", IR_OP_REPEAT_INTERLEAVE),
				  i == 0 ? 0 : 2);
		/* encode and decode_step return their weights: unfused, split */
		ck_assert_uint_eq(ac_count(m, "encode", IR_OP_PERMUTE), 8);
		ir_module_destroy(m);
	}
	tu_graph_fini(&x);
}
END_TEST

static const char *const heads_head =
	"model t\n"
	"export def f(x: f32[2, 3, 8], y: f32[2, 5, 8], kk: f32[4, 5, 4], "
	"valid: i32[2], vh: i32[4])\n"
	"  q = split_heads(x, 2)\n"
	"  k = split_heads(y, 2)\n"
	"  vl = repeat_interleave(valid, 2, 0)\n";

/* Compiles heads_head + body, runs the pipeline; the heads of its one
 * fused node (0: none), the explanation in *explain. */
static uint32_t heads_in(tu_graph *x, const char *body, char **explain)
{
	char src[1024];
	snprintf(src, sizeof src, "%s%s", heads_head, body);
	ir_module *m = ac_load_text(x, src);
	size_t len = 0;
	FILE *out = open_memstream(explain, &len);
	pass_options pre = {.no_fuse = true};
	ac_run_pipeline(m, &pre);
	pass_explain_fusion(m, out);
	fclose(out);
	ir_module_destroy(m);
	m = ac_load_text(x, src);
	ac_run_pipeline(m, NULL);
	const ir_func *f = m->funcs[0];
	uint32_t h = 0;
	for (uint32_t i = 0; i < f->g.n_nodes; i++)
		if (f->g.nodes[i].op == IR_OP_FUSED_ATTENTION)
			h = f->g.nodes[i].attr.attention.heads;
	if (h > 1)
		ck_assert_uint_eq(ac_count(m, "f", IR_OP_PERMUTE), 0);
	ir_module_destroy(m);
	return h;
}

/* count(body) is want, and the fusion explanation says why. */
static void expect_count(uint32_t (*count)(tu_graph *, const char *, char **),
			 const char *body, uint32_t want, const char *why)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	char *text = NULL;
	ck_assert_uint_eq(count(&x, body, &text), want);
	ck_assert_msg(strstr(text, why), "want '%s' in:\n%s", why, text);
	free(text);
	tu_graph_fini(&x);
}

static void expect_heads(const char *body, uint32_t want, const char *why)
{
	expect_count(heads_in, body, want, why);
}

/* The heads are read in place only when the queries, keys and values are
 * splits of one h, the lengths are per batch element, and the result is
 * only merged; otherwise the fused node keeps its split copies. */
START_TEST(test_heads_stay_split_unless_every_part_matches)
{
	expect_heads("  return merge_heads(masked_softmax(q @ k.T, vl) @ k, 2)\n",
		     2, "; its 2 heads are read in place\n");
	expect_heads("  return merge_heads(softmax(q @ k.T) @ k, 2)\n", 2,
		     "; its 2 heads are read in place\n");
	expect_heads(
		"  return merge_heads(masked_softmax(q @ k.T, vh) @ k, 2)\n", 1,
		"; its 2 heads stay split: its valid lengths %4 (input) are "
		"not one per batch element repeated for each of the 2 heads");
	expect_heads("  o = masked_softmax(q @ k.T, vl) @ k\n"
		     "  return merge_heads(o, 2) + sum(o)\n",
		     1, "its 2 heads stay split: its result %");
	expect_heads("  o = masked_softmax(q @ k.T, vl) @ k\n"
		     "  return merge_heads(o, 2), o\n",
		     1, "(matmul) is output 1 of @f");
	expect_heads("  return merge_heads(masked_softmax(q @ kk.T, vl) @ kk, 2)\n",
		     1, "stay split: its keys %2 (input) are not a head split");
	expect_heads("  return masked_softmax(kk @ kk.T, vh) @ kk\n", 1,
		     "into fused_attention\n");
}
END_TEST

/* The queries' split is used elsewhere too, so their gradient is a sum
 * of the fused gradient's part and the other use's. The forward reads
 * its heads in place, and since the gradient is derived from that fused
 * node (not matched from the unfused chain, where the part read outside
 * a merge kept the gradient split), the gradient reads them in place
 * too. */
START_TEST(test_a_query_used_elsewhere_keeps_its_gradient_heads_in_place)
{
	static const char src[] =
		"model t\n"
		"export def loss(x: f32[2, 3, 8], y: f32[2, 5, 8], valid: i32[2])\n"
		"  param W : [8, 8] = normal(0, 1)\n"
		"  q = split_heads(x @ W, 2)\n"
		"  k = split_heads(y @ W, 2)\n"
		"  o = masked_softmax(q @ k.T / 2, repeat_interleave(valid, 2, 0)) @ k\n"
		"  return sum(merge_heads(o, 2) * x) + sum(q * q)\n";
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_load_text(&x, src);
	pass_options pre = {.no_fuse = true};
	ac_run_pipeline(m, &pre);
	char *text = ac_explain(m);
	ck_assert_msg(strstr(text, "@loss %") &&
			      strstr(text, "; its 2 heads are read in place\n"),
		      "%s", text);
	free(text);
	ir_module_destroy(m);
	m = ac_load_text(&x, src);
	ac_differentiate(m, NULL);
	ac_run_pipeline(m, NULL);
	ac_expect_heads(m, "loss_grad", 2);
	ck_assert_uint_eq(ac_count(m, "loss_grad", IR_OP_FUSED_ATTENTION_GRAD),
			  1);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

/* Runs the module's loss_grad in float64 on x (2, Q, 8), y (2, K, 8) and
 * valid (2) of fixed values; the outputs. */
static interp_tensor *heads_grad_run(tu_graph *x, const ir_module *m, int Q,
				     int K)
{
	interp_tensor in[3], params[1];
	const int64_t xd[3] = {2, Q, 8}, yd[3] = {2, K, 8}, vd[1] = {2};
	ck_assert(interp_tensor_alloc(&x->ctx, &in[0], IR_F32, 3, xd));
	ck_assert(interp_tensor_alloc(&x->ctx, &in[1], IR_F32, 3, yd));
	ck_assert(interp_tensor_alloc(&x->ctx, &in[2], IR_I32, 1, vd));
	for (int i = 0; i < 2 * Q * 8; i++)
		((float *)in[0].data)[i] = (float)((i * 7) % 11) / 4 - 1;
	for (int i = 0; i < 2 * K * 8; i++)
		((float *)in[1].data)[i] = (float)((i * 5) % 13) / 6 - 1;
	((int32_t *)in[2].data)[0] = 0;
	((int32_t *)in[2].data)[1] = K - 1;
	const ir_func *f = ir_module_find_func(m, "loss_grad");
	int64_t syms[3] = {2, Q, K};
	ck_assert(interp_params_init(&x->ctx, m, syms, 5, true, params));
	interp_tensor *out = calloc(f->n_outputs, sizeof *out);
	interp_opts o = {.is_f64 = true};
	ck_assert_msg(interp_run(&x->ctx, m, f, &o, params, in, out), "%s",
		      tu_graph_diag(x));
	for (int i = 0; i < 3; i++)
		interp_tensor_fini(&x->ctx, &in[i]);
	interp_tensor_fini(&x->ctx, &params[0]);
	return out;
}

/* With run-time Q and K the packed gradient has no type: the gradient
 * rule of a fused node with heads then splits them off, differentiates
 * the unfused chain and merges the gradients, equal to the unfused
 * graph's. */
START_TEST(test_the_unfused_gradient_of_a_node_with_heads_splits_and_merges_them)
{
	static const char src[] =
		"model t\ndim B, Q, K\n"
		"export def loss(x: f32[B, Q, 8], y: f32[B, K, 8], valid: i32[B])\n"
		"  param W : [8] = normal(0, 1)\n"
		"  q = split_heads(x * W, 2)\n"
		"  k = split_heads(y * W, 2)\n"
		"  v = split_heads(y * W * W, 2)\n"
		"  o = masked_softmax(q @ k.T / 2, repeat_interleave(valid, 2, 0)) @ v\n"
		"  return sum(merge_heads(o, 2) * x)\n";
	tu_graph x;
	tu_graph_init_ctx(&x);
	interp_tensor *out[2];
	for (int fused = 0; fused < 2; fused++) {
		ir_module *m = ac_load_text(&x, src);
		pass_options po = {.no_fuse = !fused};
		ac_run_pipeline(m, &po);
		ac_expect_heads(m, "loss", 2);
		ck_assert_uint_eq(ac_count(m, "loss", IR_OP_FUSED_ATTENTION),
				  (uint32_t)fused);
		ck_assert_msg(pass_autodiff(m, "loss"), "%s", tu_graph_diag(&x));
		ac_run_pipeline(m, &po);
		ck_assert_uint_eq(ac_count(m, "loss_grad",
					   IR_OP_FUSED_ATTENTION_GRAD),
				  0);
		out[fused] = heads_grad_run(&x, m, 3, 4);
		ir_module_destroy(m);
	}
	for (int o = 0; o < 2; o++) {
		double e, mag;
		ac_errors(&out[1][o], &out[0][o], &e, &mag);
		ck_assert_msg(mag > 0 && e <= 1e-12 * (mag + 1),
			      "output %d differs by %g", o, e);
		interp_tensor_fini(&x.ctx, &out[0][o]);
		interp_tensor_fini(&x.ctx, &out[1][o]);
	}
	free(out[0]);
	free(out[1]);
	tu_graph_fini(&x);
}
END_TEST

/* ---- what blocks it --------------------------------------------------------------- */

static const char *const attn_head =
	"model t\n"
	"export def f(q: f32[2, 3, 4], k: f32[2, 5, 4], v: f32[2, 5, 6], "
	"kt: f32[2, 4, 5], valid: i32[2])\n";

/* Compiles attn_head + body, runs the pipeline; the fused count. */
static uint32_t fused_in(tu_graph *x, const char *body, char **explain)
{
	char src[1024];
	snprintf(src, sizeof src, "%s%s", attn_head, body);
	ir_module *m = ac_load_text(x, src);
	size_t len = 0;
	FILE *out = open_memstream(explain, &len);
	pass_explain_fusion(m, out);
	fclose(out);
	ac_run_pipeline(m, NULL);
	uint32_t n = count_all(m, IR_OP_FUSED_ATTENTION);
	ir_module_destroy(m);
	return n;
}

static void expect_fused(const char *body, uint32_t want, const char *why)
{
	expect_count(fused_in, body, want, why);
}

START_TEST(test_other_uses_of_the_weights_or_scores_block_fusion)
{
	expect_fused("  w = masked_softmax(q @ k.T, valid)\n"
		     "  return w @ v + sum(w)\n",
		     0, "not fused: the weights %");
	expect_fused("  s = q @ k.T\n"
		     "  return masked_softmax(s, valid) @ v + sum(s)\n",
		     0, "not fused: the scores %");
	expect_fused("  w = masked_softmax(q @ k.T, valid)\n"
		     "  return w @ v, w\n",
		     0,
		     "not fused: the weights are output 1 (w) of @f: fusing "
		     "would lose them");
	expect_fused("  return masked_softmax(tanh(q @ k.T), valid) @ v\n", 0,
		     "not fused: its scores come from %");
	expect_fused("  return masked_softmax(q @ k.T, valid) @ v\n", 1,
		     "fuses: matmul %");
}
END_TEST

/* Keys stored as (N, d, K) multiply without a transpose: the fused op
 * gets a permute of them. A scale by an all-equal constant fuses too. */
START_TEST(test_transposed_keys_and_constant_scales_fuse)
{
	expect_fused("  return softmax(q @ kt * 0.5) @ v\n", 1, "mul by 0.5");
	tu_graph x;
	tu_graph_init_ctx(&x);
	char src[512];
	snprintf(src, sizeof src, "%s  return softmax(q @ kt / 2) @ v\n",
		 attn_head);
	ir_module *m = ac_load_text(&x, src);
	ac_run_pipeline(m, NULL);
	const ir_func *f = m->funcs[0];
	bool found = false;
	for (uint32_t i = 0; i < f->g.n_nodes; i++)
		if (f->g.nodes[i].op == IR_OP_FUSED_ATTENTION) {
			ir_id kk = ir_arg(&f->g, i, 1);
			ck_assert_int_eq(f->g.nodes[kk].op, IR_OP_PERMUTE);
			ck_assert_double_eq(f->g.nodes[i].attr.attention.scale,
					    0.5);
			found = true;
		}
	ck_assert(found);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

/* Inputs q (2, 3, 4) and k (2, 5, 4) of fixed values, then `third`. */
static void qk_inputs(tu_graph *x, interp_tensor *in, const interp_tensor *third)
{
	const int64_t qd[3] = {2, 3, 4}, kd[3] = {2, 5, 4};
	ck_assert(interp_tensor_alloc(&x->ctx, &in[0], IR_F32, 3, qd));
	ck_assert(interp_tensor_alloc(&x->ctx, &in[1], IR_F32, 3, kd));
	for (int i = 0; i < 24; i++)
		((float *)in[0].data)[i] = (float)((i * 7) % 5) - 2;
	for (int i = 0; i < 40; i++)
		((float *)in[1].data)[i] = (float)((i * 3) % 7) - 3;
	ck_assert(interp_tensor_copy(&x->ctx, &in[2], third));
}

/* src's loss(q, k, third) with one parameter: loss_grad has one fused
 * attention gradient when fused and none when not, and both give the
 * same loss and gradient. */
static void expect_grad_fuses_and_agrees(const char *src,
					 const interp_tensor *third)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	interp_tensor *out[2];
	for (int fused = 0; fused < 2; fused++) {
		ir_module *m = ac_load_text(&x, src);
		pass_options po = {.no_fuse = !fused};
		ac_differentiate(m, &po);
		ac_run_pipeline(m, &po);
		ck_assert_uint_eq(ac_count(m, "loss_grad",
					   IR_OP_FUSED_ATTENTION_GRAD),
				  (uint32_t)fused);
		interp_tensor in[3], params[1];
		qk_inputs(&x, in, third);
		int64_t syms[1] = {0};
		ck_assert(interp_params_init(&x.ctx, m, syms, 5, false, params));
		out[fused] = calloc(2, sizeof *out[fused]);
		interp_opts o = {0};
		ck_assert(interp_run(&x.ctx, m,
				     ir_module_find_func(m, "loss_grad"), &o,
				     params, in, out[fused]));
		for (int i = 0; i < 3; i++)
			interp_tensor_fini(&x.ctx, &in[i]);
		interp_tensor_fini(&x.ctx, &params[0]);
		ir_module_destroy(m);
	}
	for (int o = 0; o < 2; o++) {
		double e, mag;
		ac_errors(&out[1][o], &out[0][o], &e, &mag);
		ck_assert_msg(e <= 1e-6 * (mag + 1), "output %d differs by %g",
			      o, e);
		interp_tensor_fini(&x.ctx, &out[0][o]);
		interp_tensor_fini(&x.ctx, &out[1][o]);
	}
	free(out[0]);
	free(out[1]);
	tu_graph_fini(&x);
}

/* Valid lengths that are constants: fold makes the softmax gradient's
 * mask a constant, which still fuses, and to the unfused values. */
START_TEST(test_constant_valid_lengths_fuse_the_backward_too)
{
	static const char src[] =
		"model t\n"
		"export def loss(q: f32[2, 3, 4], k: f32[2, 5, 4], v: f32[2, 5, 3])\n"
		"  param W : [4, 4] = normal(0, 1)\n"
		"  return sum(masked_softmax((q @ W) @ k.T / 2, [0, 4]) @ v)\n";
	float data[30];
	for (int i = 0; i < 30; i++)
		data[i] = (float)((i * 5) % 3) - 1;
	interp_tensor v = {.dtype = IR_F32,
			   .rank = 3,
			   .dims = {2, 5, 3},
			   .data = data};
	expect_grad_fuses_and_agrees(src, &v);
}
END_TEST

/* Queries and keys given, values learned: the fused gradient gives dV
 * alone, and equals the unfused one. */
START_TEST(test_a_gradient_for_the_values_alone_fuses)
{
	static const char src[] =
		"model t\n"
		"export def loss(q: f32[2, 3, 4], k: f32[2, 5, 4], valid: i32[2])\n"
		"  param v : [2, 5, 3] = normal(0, 1)\n"
		"  return sum(masked_softmax(q @ k.T / 2, valid) @ v)\n";
	int32_t lengths[2] = {0, 4};
	interp_tensor valid = {.dtype = IR_I32,
			       .rank = 1,
			       .dims = {2},
			       .data = lengths};
	expect_grad_fuses_and_agrees(src, &valid);
}
END_TEST

/* ---- explaining ---------------------------------------------------------------------- */

START_TEST(test_explain_fusion_says_which_softmax_fuses_and_why_not)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_load_model(&x, "models/dot_product_attention.g");
	char *text = ac_explain(m);
	ck_assert_msg(strstr(text, "@forward %"), "%s", text);
	ck_assert_ptr_nonnull(strstr(text, "masked_softmax at "));
	ck_assert_ptr_nonnull(strstr(text, "dot_product_attention.g:11:13: not "
					   "fused: the weights are output 1"));
	ck_assert_ptr_nonnull(strstr(text, "@masked_softmax_demo %"));
	ck_assert_ptr_nonnull(strstr(text, "0 of 3 softmaxes fuse\n"));
	free(text);
	ir_module_destroy(m);

	m = ac_load_model(&x, "models/transformer.g");
	pass_options pre = {.no_fuse = true};
	ac_run_pipeline(m, &pre);
	text = ac_explain(m);
	ck_assert_msg(strstr(text, "@loss %"), "%s", text);
	ck_assert_ptr_nonnull(strstr(text, "div by 2.82843, masked_softmax, "
					   "dropout %33, matmul %34 into "
					   "fused_attention; its 4 heads are read "
					   "in place\n"));
	ck_assert_ptr_nonnull(strstr(text, "@encode %"));
	ck_assert_ptr_nonnull(strstr(text,
				     "(reshape), which becomes output 1 "
				     "(weights) of @encode: fusing would lose "
				     "them"));
	/* the rest: 6 weights that are outputs; loss_grad is derived from
	 * the fused loss, so fusion never sees it */
	ck_assert_ptr_nonnull(strstr(text, "12 of 18 softmaxes fuse\n"));
	free(text);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

static Suite *fuse_suite(void)
{
	Suite *s = suite_create("fuse");
	TCase *tc = tcase_create("ops");
	tcase_add_test(
		tc,
		test_fused_attention_has_the_queries_rows_and_the_values_width);
	tcase_add_test(tc,
		       test_fused_attention_rejects_operands_that_do_not_fit);
	tcase_add_test(tc,
		       test_fused_attention_grad_needs_sizes_that_add_up_to_one_dim);
	tcase_add_test(tc,
		       test_fused_attention_with_heads_takes_them_side_by_side);
	tcase_add_test(tc, test_fused_ops_print_their_attributes_and_read_back);
	tcase_add_test(tc, test_fused_ops_print_their_heads_and_read_them_back);
	tcase_add_test(tc,
		       test_verifier_rejects_a_fused_dropout_stream_out_of_range);
	suite_add_tcase(s, tc);
	tc = tcase_create("interp");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(
		tc,
		test_fused_interpreter_matches_the_unfused_graph_and_its_gradients,
		0, (int)(sizeof interp_cases / sizeof interp_cases[0]));
	tcase_add_loop_test(
		tc,
		test_fused_heads_read_in_place_match_the_unfused_graph_and_the_split_form,
		0, (int)(sizeof heads_cases / sizeof heads_cases[0]));
	tcase_add_test(tc,
		       test_fused_rows_of_valid_length_zero_average_all_values);
	suite_add_tcase(s, tc);
	tc = tcase_create("pass");
	tcase_set_timeout(tc, 120);
	tcase_add_test(
		tc,
		test_every_attention_of_the_transformer_loss_and_forward_fuses);
	tcase_add_test(
		tc,
		test_the_transformer_training_graph_fuses_forward_and_backward);
	tcase_add_test(tc,
		       test_no_fuse_and_disabling_the_pass_leave_the_graph_unfused);
	tcase_add_loop_test(
		tc, test_model_attentions_fuse_unless_their_weights_are_returned,
		0, 3);
	tcase_add_test(
		tc,
		test_fused_attention_takes_scale_dropout_and_the_softmax_location);
	tcase_add_test(tc,
		       test_other_uses_of_the_weights_or_scores_block_fusion);
	tcase_add_test(tc, test_transposed_keys_and_constant_scales_fuse);
	tcase_add_test(tc, test_a_gradient_for_the_values_alone_fuses);
	tcase_add_test(tc, test_constant_valid_lengths_fuse_the_backward_too);
	tcase_add_test(tc,
		       test_explain_fusion_says_which_softmax_fuses_and_why_not);
	tcase_add_test(tc,
		       test_the_transformer_reads_every_attentions_heads_in_place);
	tcase_add_test(tc, test_heads_stay_split_unless_every_part_matches);
	tcase_add_test(
		tc,
		test_a_query_used_elsewhere_keeps_its_gradient_heads_in_place);
	tcase_add_test(
		tc,
		test_the_unfused_gradient_of_a_node_with_heads_splits_and_merges_them);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(fuse_suite());
}
