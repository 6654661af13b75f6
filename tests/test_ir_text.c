/*
 * test_ir_text.c - the IR's textual form: the printer's output for a small
 * module (a golden text that documents the format), print -> read -> print
 * giving the same bytes for a module that uses every op and attribute
 * kind, the reader's errors on malformed text (file:line:col), and a quick
 * fuzz of random bytes and truncated dumps that must never crash it.
 */
#include "ir.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static ir_ctx ctx;
static char *diag;
static size_t diag_len;

static void setup(void)
{
	ir_ctx_init(&ctx);
	ctx.diag_out = open_memstream(&diag, &diag_len);
}

static void teardown(void)
{
	fclose(ctx.diag_out);
	free(diag);
	ir_ctx_fini(&ctx);
}

static const char *diags(void)
{
	fflush(ctx.diag_out);
	return diag ? diag : "";
}

/* The printed module, malloc'ed. */
static char *print_to_string(const ir_module *m)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);
	ir_module_print(m, f);
	fclose(f);
	return s;
}

/* Registers text as source `name` and reads it. */
static ir_module *read_text(const char *name, const char *text)
{
	uint32_t id = ir_ctx_add_source(&ctx, name, text, strlen(text));
	return ir_module_read(&ctx, id);
}

/* ---- building modules ----------------------------------------------------- */

typedef struct builder {
	ir_module *m;
	ir_func *f;
	uint32_t src, other;
	uint32_t line;
} builder;

static ir_dim D(int64_t n)
{
	return ir_dim_static(n);
}

static ir_type T(ir_dtype dt, int rank, const ir_dim *dims)
{
	ir_type t = {.dtype = dt, .rank = (uint8_t)rank};
	for (int i = 0; i < rank; i++)
		t.dims[i] = dims[i];
	return t;
}

/* The next location in the main file (one line per node). */
static ir_loc L(builder *b)
{
	return (ir_loc){.file = b->src, .line = ++b->line, .col = 3};
}

static ir_id node(builder *b, ir_op op, const ir_id *args, uint32_t n,
		  const ir_attr *a, const ir_type *t)
{
	ir_id id = ir_build(b->m, b->f, op, args, n, a, t, L(b));
	ck_assert_msg(id != IR_NONE, "building %s: %s", ir_op_table[op].name,
		      diags());
	return id;
}

static ir_id n1(builder *b, ir_op op, ir_id x, const ir_attr *a)
{
	return node(b, op, &x, 1, a, NULL);
}

static ir_id n2(builder *b, ir_op op, ir_id x, ir_id y, const ir_attr *a)
{
	ir_id args[] = {x, y};
	return node(b, op, args, 2, a, NULL);
}

static ir_id add_input(builder *b, const char *name, ir_type t)
{
	ir_func *f = b->f;
	ir_attr a = {.input_index = f->n_inputs};
	ir_id id = node(b, IR_OP_INPUT, NULL, 0, &a, &t);
	ir_id *in = ir_arena_alloc(&b->m->arena, (f->n_inputs + 1) * sizeof *in);
	const char **nm = ir_arena_alloc(&b->m->arena,
					 (f->n_inputs + 1) * sizeof *nm);
	if (f->n_inputs) {
		memcpy(in, f->inputs, f->n_inputs * sizeof *in);
		memcpy(nm, f->input_names, f->n_inputs * sizeof *nm);
	}
	in[f->n_inputs] = id;
	nm[f->n_inputs] = name ? ir_arena_strdup(&b->m->arena, name) : NULL;
	f->inputs = in;
	f->input_names = nm;
	f->n_inputs++;
	return id;
}

static void set_outputs(builder *b, uint32_t n, const ir_id *ids,
			const char **names)
{
	b->f->outputs = ir_arena_alloc(&b->m->arena, n * sizeof(ir_id));
	b->f->output_names = ir_arena_alloc(&b->m->arena, n * sizeof(char *));
	memcpy(b->f->outputs, ids, n * sizeof(ir_id));
	for (uint32_t i = 0; i < n; i++)
		b->f->output_names[i] = names[i] ? ir_arena_strdup(&b->m->arena,
								   names[i])
						 : NULL;
	b->f->n_outputs = n;
}

/* additive attention's scoring, small: the golden-text module. */
static ir_module *small_module(builder *b)
{
	b->src = ir_ctx_add_source(&ctx, "models/small.g", "", 0);
	b->m = ir_module_create(&ctx, "small");
	int32_t B = ir_module_add_sym(b->m, "B",
				      (ir_loc){.file = b->src,
					       .line = 2,
					       .col = 5});
	ir_dim qd[] = {{1, B}, D(1), D(4)}, wd[] = {D(4), D(2)};
	ir_type q = T(IR_F32, 3, qd), w = T(IR_F32, 2, wd);
	ir_module_add_param(b->m, "enc.W_q", &w, IR_INIT_XAVIER_UNIFORM, 1, 0,
			    (ir_loc){.file = b->src, .line = 4, .col = 3});
	b->f = ir_module_add_func(b->m, "forward",
				  (ir_loc){.file = b->src, .line = 6, .col = 1});
	b->f->is_export = true;
	b->line = 6;
	ir_id x = add_input(b, "queries", q);
	ir_attr p0 = {.param_index = 0};
	ir_id pw = node(b, IR_OP_PARAM, NULL, 0, &p0, &w);
	ir_attr mm = {.matmul = {false, false}};
	ir_id y = n1(b, IR_OP_TANH, n2(b, IR_OP_MATMUL, x, pw, &mm), NULL);
	const char *names[] = {"out"};
	set_outputs(b, 1, &y, names);
	float ex[4] = {1.5f, -2, 0.1f, 3};
	ir_dim cd[] = {D(1), D(1), D(4)};
	ir_type ct = T(IR_F32, 3, cd);
	uint32_t c = (uint32_t)ir_module_add_const(b->m, &ct, ex);
	b->f->example = ir_arena_alloc(&b->m->arena, sizeof(uint32_t));
	b->f->example[0] = c;
	return b->m;
}

START_TEST(test_printer_writes_the_documented_format)
{
	builder b = {0};
	ir_module *m = small_module(&b);
	ck_assert(ir_module_verify(m));
	char *s = print_to_string(m);
	ck_assert_str_eq(
		s,
		"module small\n"
		"source \"models/small.g\"\n"
		"\n"
		"sym B loc(2:5)\n"
		"\n"
		"param @enc.W_q : f32[4, 2] = xavier_uniform(1) loc(4:3)\n"
		"\n"
		"export func @forward(queries: f32[B, 1, 4]) example(@c0) loc(6:1) {\n"
		"  %0 = input {index=0} : f32[B, 1, 4]                       loc(7:3)\n"
		"  %1 = param @enc.W_q : f32[4, 2]                           loc(8:3)\n"
		"  %2 = matmul %0, %1 {ta=0, tb=0} : f32[B, 1, 2]            loc(9:3)\n"
		"  %3 = tanh %2 : f32[B, 1, 2]                               loc(10:3)\n"
		"  return %3 as out\n"
		"}\n"
		"\n"
		"const @c0 : f32[1, 1, 4] = [1.5, -2, 0.1, 3]\n");
	free(s);
	ir_module_destroy(m);
}
END_TEST

/* ---- a module with every op and attribute kind ------------------------------- */

/* f32[3, 4] with the values that printing could lose (-0, inf, the
 * smallest and largest floats, NaN with a payload), i32[3, 3], i32[3] and
 * f64[2]. */
static void add_consts(builder *b, uint32_t *c)
{
	float fv[12];
	for (int i = 0; i < 12; i++)
		fv[i] = (float)(i * 0.1 - 0.35);
	fv[1] = -0.0f;
	fv[2] = -INFINITY;
	fv[3] = 1e-45f;
	fv[4] = 3.4028235e38f;
	uint32_t payload = 0xffc00123u;
	memcpy(&fv[5], &payload, 4);
	fv[6] = NAN;
	ir_dim fd[] = {D(3), D(4)}, id[] = {D(3), D(3)}, vd[] = {D(3)},
	       dd[] = {D(2)};
	ir_type ft = T(IR_F32, 2, fd), it = T(IR_I32, 2, id),
		vt = T(IR_I32, 1, vd), dt = T(IR_F64, 1, dd);
	int32_t iv[9] = {2, -6, 2147483647, (int32_t)-2147483648, 0, 1,
			 2, 3,  4};
	int32_t vv[3] = {1, 2, 3};
	double dv[2] = {0.1, -1e300};
	c[0] = (uint32_t)ir_module_add_const(b->m, &ft, fv);
	c[1] = (uint32_t)ir_module_add_const(b->m, &it, iv);
	c[2] = (uint32_t)ir_module_add_const(b->m, &vt, vv);
	c[3] = (uint32_t)ir_module_add_const(b->m, &dt, dv);
}

static void add_train(builder *b)
{
	ir_module *m = b->m;
	m->train = calloc(4, sizeof *m->train);
	m->train_cap = 4;
	m->train[0] = (ir_setting){"epochs",
				   {IR_VAL_NUM, 5, NULL, NULL, 0},
				   {b->src, 30, 3, 0}};
	ir_setting *args = ir_arena_alloc(&m->arena, 2 * sizeof *args);
	args[0] = (ir_setting){"lr",
			       {IR_VAL_NUM, 0.005, NULL, NULL, 0},
			       {b->src, 31, 20, 0}};
	args[1] = (ir_setting){"betas",
			       {IR_VAL_STR, 0, "a \"q\"\n\\", NULL, 0},
			       {0, 0, 0, 0}};
	m->train[1] = (ir_setting){"optimizer",
				   {IR_VAL_CALL, 0, "adam", args, 2},
				   {b->src, 31, 3, 0}};
	m->train[2] = (ir_setting){"data",
				   {IR_VAL_STR, 0, "fra.txt", NULL, 0},
				   {0, 0, 0, 0}};
	m->train[3] = (ir_setting){"entry",
				   {IR_VAL_CALL, 0, "loss", NULL, 0},
				   {b->other, 1, 1, 0}};
	m->n_train = 4;
}

/* Unary, binary, comparison, select, cast nodes on x: f32[B, 4]; every
 * op of those families in ops.def, in its order. */
static ir_id add_elementwise(builder *b, ir_id x, ir_id xi)
{
	ir_id y = x, k = IR_NONE;
	for (ir_op op = 0; op < IR_OP_COUNT; op++)
		if (ir_op_table[op].family == IR_FAM_UNARY)
			y = n1(b, op, y, NULL);
	for (ir_op op = 0; op < IR_OP_COUNT; op++)
		if (ir_op_table[op].family == IR_FAM_BINARY)
			y = n2(b, op, y, x, NULL);
	for (ir_op op = 0; op < IR_OP_COUNT; op++)
		if (ir_op_table[op].family == IR_FAM_COMPARE)
			k = n2(b, op, y, x, NULL);
	ir_type to = {.dtype = IR_F32};
	ir_id kf = node(b, IR_OP_CAST, &k, 1, NULL, &to);
	ir_id sel[] = {xi, y, kf};
	return node(b, IR_OP_SELECT, sel, 3, NULL, NULL);
}

/* matmul, reductions, normalizations, losses. */
static void add_nn(builder *b, ir_id x, ir_id ids, ir_id valid, ir_id *out)
{
	ir_dim tabd[] = {D(7), D(4)}, gd[] = {D(4)};
	ir_type tab = T(IR_F32, 2, tabd), g = T(IR_F32, 1, gd);
	ir_module_add_param(b->m, "emb", &tab, IR_INIT_NORMAL, 0, 0.01,
			    (ir_loc){.file = b->other, .line = 7, .col = 2});
	ir_module_add_param(b->m, "\"odd\" name", &g, IR_INIT_ONES, 0, 0,
			    (ir_loc){0});
	ir_attr p1 = {.param_index = 1}, p2 = {.param_index = 2};
	ir_id e = n2(b, IR_OP_EMBEDDING, ids,
		     node(b, IR_OP_PARAM, NULL, 0, &p1, &tab), NULL);
	ir_id gm = node(b, IR_OP_PARAM, NULL, 0, &p2, &g);
	ir_attr mm = {.matmul = {false, true}};
	ir_id s = n2(b, IR_OP_MATMUL, e, e, &mm); /* [B, 3, 3] */
	ir_attr fill = {.fill = -1e6};
	ir_id w = n2(b, IR_OP_MASKED_SOFTMAX, s, valid, &fill);
	ir_type oh = b->f->g.nodes[ids].type; /* [B, 3] -> [B, 3, 7] */
	oh.dtype = IR_F32;
	oh.dims[oh.rank++] = D(7);
	node(b, IR_OP_ONE_HOT, &ids, 1, NULL, &oh);
	ir_id eg[] = {ids, e};
	node(b, IR_OP_EMBEDDING_GRAD, eg, 2, NULL, &tab);
	ir_attr eps = {.eps = 1e-5};
	ir_id ln_args[] = {e, gm, gm};
	ir_id ln = node(b, IR_OP_LAYER_NORM, ln_args, 3, &eps, NULL);
	ir_id lng_args[] = {e, gm, ln};
	node(b, IR_OP_LAYER_NORM_GRAD, lng_args, 3, &eps, NULL);
	ir_attr dr = {.dropout = {0.1, 1}};
	n1(b, IR_OP_DROPOUT, ln, &dr);
	ir_attr at = {.attention = {0.5, -1e6, 0.1, 1, 1}};
	ir_id fa_args[] = {e, e, e, valid};
	ir_id fa = node(b, IR_OP_FUSED_ATTENTION, fa_args, 4, &at, NULL);
	ir_id fg_args[] = {e, e, e, valid, fa};
	node(b, IR_OP_FUSED_ATTENTION_GRAD, fg_args, 5, &at, NULL);
	ir_id aa_args[] = {e, e, gm, e, valid};
	ir_id aa = node(b, IR_OP_FUSED_ADDITIVE_ATTENTION, aa_args, 5, &at,
			NULL);
	ir_id ag_args[] = {e, e, gm, e, valid, aa};
	node(b, IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD, ag_args, 6, &at, NULL);
	n1(b, IR_OP_SOFTMAX, w, NULL);
	n1(b, IR_OP_LOG_SOFTMAX, w, NULL);
	ir_attr r = {.reduce = {0x5, true}}, am = {.reduce = {0x2, false}};
	n1(b, IR_OP_SUM, w, &r);
	n1(b, IR_OP_MEAN, w, &r);
	n1(b, IR_OP_MAX, w, &r);
	n1(b, IR_OP_ARGMAX, w, &am);
	n1(b, IR_OP_ARGMIN, w, &am);
	out[0] = n2(b, IR_OP_MSE_LOSS, x, x, NULL);
	out[1] = n2(b, IR_OP_CROSS_ENTROPY, e, ids, NULL);
	ir_id cg_args[] = {e, ids, out[1]};
	node(b, IR_OP_CROSS_ENTROPY_GRAD, cg_args, 3, NULL, NULL);
	node(b, IR_OP_CROSS_ENTROPY_WITH_GRAD, cg_args, 3, NULL, NULL);
}

/* reshape, broadcast, permute, slice, concat, repeat(+interleave), sort
 * and its gradient. */
static ir_id add_layout(builder *b, ir_id x)
{
	ir_dim rd[] = {D(-1), D(2)}, bd[] = {D(3), {1, 0}, D(4)};
	ir_type rt = T(IR_F32, 2, rd), bt = T(IR_F32, 3, bd);
	ir_id r = node(b, IR_OP_RESHAPE, &x, 1, NULL, &rt); /* [2*B, 2] */
	ir_id one = n1(b, IR_OP_SUM, x, &(ir_attr){.reduce = {0x1, true}});
	node(b, IR_OP_BROADCAST, &one, 1, NULL, &bt);
	ir_attr pm = {.permute = {{1, 0}}};
	ir_id p = n1(b, IR_OP_PERMUTE, r, &pm);
	ir_attr sl = {.slice = {0, 0, 2, 2}};
	n1(b, IR_OP_SLICE, p, &sl);
	ir_attr ax = {.axis = 0};
	ir_id cat[] = {r, r, r};
	ir_id c = node(b, IR_OP_CONCAT, cat, 3, &ax, NULL); /* [6*B, 2] */
	ir_attr rp = {.repeat = {{1, 3}}};
	n1(b, IR_OP_REPEAT, c, &rp);
	ir_attr ri = {.interleave = {0, 4}};
	n1(b, IR_OP_REPEAT_INTERLEAVE, c, &ri);
	ir_attr so = {.axis = 1};
	ir_id sorted = n1(b, IR_OP_SORT, c, &so);
	ir_id sg[] = {c, sorted};
	node(b, IR_OP_SORT_GRAD, sg, 2, &so, NULL);
	return sorted;
}

/* A second, empty function: no inputs, no nodes, no outputs. */
static void add_empty_func(builder *b)
{
	ir_func *f = ir_module_add_func(b->m, "empty", (ir_loc){0});
	(void)f;
}

static ir_module *full_module(builder *b)
{
	b->src = ir_ctx_add_source(&ctx, "models/full.g", "", 0);
	b->other = ir_ctx_add_source(&ctx, "frontend/prelude.g", "", 0);
	b->m = ir_module_create(&ctx, "full");
	b->m->n_dropout_streams = 2;
	int32_t B = ir_module_add_sym(b->m, "B",
				      (ir_loc){.file = b->src,
					       .line = 1,
					       .col = 5});
	int32_t V = ir_module_add_sym(b->m, "V", (ir_loc){0});
	b->m->syms[V].fallback = 184;
	ir_dim wd[] = {D(4), {2, V}};
	ir_type w = T(IR_F32, 2, wd);
	ir_module_add_param(b->m, "enc.0.W", &w, IR_INIT_UNIFORM, -0.5, 0.5,
			    (ir_loc){.file = b->src, .line = 2, .col = 1});
	add_train(b);
	uint32_t c[4];
	add_consts(b, c);
	b->f = ir_module_add_func(b->m, "loss",
				  (ir_loc){.file = b->src, .line = 5, .col = 1});
	b->f->is_export = true;
	ir_dim xd[] = {{1, B}, D(4)}, idd[] = {{1, B}, D(3)}, vd[] = {{1, B}};
	ir_id x = add_input(b, "x", T(IR_F32, 2, xd));
	ir_id ids = add_input(b, NULL, T(IR_I32, 2, idd));
	ir_id valid = add_input(b, "valid", T(IR_I32, 1, vd));
	b->f->example = ir_arena_alloc(&b->m->arena, 3 * sizeof(uint32_t));
	memcpy(b->f->example, c, 3 * sizeof(uint32_t));
	ir_type toi = {.dtype = IR_I32};
	ir_id xi = node(b, IR_OP_CAST, &x, 1, NULL, &toi);
	ir_id sel = add_elementwise(b, x, xi);
	ir_id losses[2];
	add_nn(b, x, ids, valid, losses);
	ir_id so = add_layout(b, sel);
	ir_attr c1 = {.const_index = c[1]};
	node(b, IR_OP_CONST, NULL, 0, &c1, &b->m->consts[c[1]].type);
	/* A derived symbol B*V (T*B order on purpose), a limit on it and an
	 * arange of its length. */
	int32_t bv[] = {V, B};
	int32_t BV = ir_module_product_sym(b->m, bv, 2,
					   (ir_loc){.file = b->src,
						    .line = 3,
						    .col = 2});
	ck_assert_int_ge(BV, 0);
	ck_assert(ir_module_add_limit(b->m, (ir_dim){2, BV}, 64,
				      (ir_loc){.file = b->src,
					       .line = 3,
					       .col = 7}));
	ir_dim ad[] = {{2, BV}};
	ir_attr ar = {.arange = {1, 0.5}};
	ir_type art = T(IR_F32, 1, ad);
	node(b, IR_OP_ARANGE, NULL, 0, &ar, &art);
	ir_id nolo = ir_build(b->m, b->f, IR_OP_EXP, &sel, 1, NULL, NULL,
			      (ir_loc){0});
	ir_build(b->m, b->f, IR_OP_NEG, &nolo, 1, NULL, NULL,
		 (ir_loc){.file = b->other, .line = 12, .col = 4});
	ir_id outs[] = {losses[0], losses[1], so, nolo};
	const char *names[] = {"mse", NULL, "sorted", "e"};
	set_outputs(b, 4, outs, names);
	add_empty_func(b);
	return b->m;
}

START_TEST(test_print_read_print_is_byte_identical_for_every_op)
{
	builder b = {0};
	ir_module *m = full_module(&b);
	ck_assert_msg(ir_module_verify(m), "%s", diags());
	char *s1 = print_to_string(m);
	for (int op = 0; op < IR_OP_COUNT; op++) {
		char pat[64];
		snprintf(pat, sizeof pat, " = %s ", ir_op_table[op].name);
		ck_assert_msg(strstr(s1, pat), "no %s in the module", pat);
	}
	ir_module *m2 = read_text("full.ir", s1);
	ck_assert_msg(m2 != NULL, "%s\n%s", diags(), s1);
	char *s2 = print_to_string(m2);
	ck_assert_str_eq(s1, s2);
	free(s1);
	free(s2);
	ir_module_destroy(m);
	ir_module_destroy(m2);
}
END_TEST

START_TEST(test_round_trip_keeps_constant_bits_locations_and_settings)
{
	builder b = {0};
	ir_module *m = full_module(&b);
	char *s1 = print_to_string(m);
	ir_module *m2 = read_text("full.ir", s1);
	ck_assert_msg(m2 != NULL, "%s", diags());
	ck_assert_uint_eq(m2->n_consts, 4);
	for (uint32_t i = 0; i < 4; i++) {
		const ir_const *a = &m->consts[i], *c = &m2->consts[i];
		ck_assert(ir_type_eq(&a->type, &c->type));
		size_t bytes = (size_t)ir_type_numel_static(&a->type) *
			       ir_dtype_size(a->type.dtype);
		ck_assert_int_eq(memcmp(a->data, c->data, bytes), 0);
	}
	const ir_func *f = m->funcs[0], *g = m2->funcs[0];
	ck_assert_uint_eq(f->g.n_nodes, g->g.n_nodes);
	for (ir_id i = 0; i < f->g.n_nodes; i++) {
		const ir_node *p = &f->g.nodes[i], *q = &g->g.nodes[i];
		ck_assert_int_eq(p->op, q->op);
		ck_assert(ir_type_eq(&p->type, &q->type));
		ck_assert_uint_eq(p->loc.file, q->loc.file);
		ck_assert_uint_eq(p->loc.line, q->loc.line);
		ck_assert_uint_eq(p->loc.col, q->loc.col);
	}
	ck_assert_str_eq(m2->params[2].name, "\"odd\" name");
	ck_assert_uint_eq(m2->params[1].loc.file, b.other);
	ck_assert_int_eq(m2->syms[1].fallback, 184);
	ck_assert_uint_eq(m2->n_dropout_streams, 2);
	ck_assert_ptr_null(g->input_names[1]);
	ck_assert_str_eq(g->output_names[3], "e");
	ck_assert_uint_eq(g->example[2], 2);
	const ir_setting *opt = ir_module_find_setting(m2, "optimizer");
	ck_assert_ptr_nonnull(opt);
	ck_assert_int_eq(opt->value.kind, IR_VAL_CALL);
	ck_assert_uint_eq(opt->value.n_args, 2);
	ck_assert(opt->value.args[0].value.num == 0.005);
	ck_assert_str_eq(opt->value.args[1].value.str, "a \"q\"\n\\");
	ck_assert_int_eq(ir_module_find_setting(m2, "entry")->value.kind,
			 IR_VAL_CALL);
	ck_assert_ptr_eq(m2->funcs[1]->example, NULL);
	free(s1);
	ir_module_destroy(m);
	ir_module_destroy(m2);
}
END_TEST

/* ---- reader errors ------------------------------------------------------------- */

START_TEST(test_reader_reports_unknown_ops_with_line_and_column)
{
	ck_assert_ptr_null(read_text("x.ir", "module x\n"
					     "func @f() {\n"
					     "  %0 = frob : f32[]\n"
					     "  return\n"
					     "}\n"));
	ck_assert_str_eq(diags(), "x.ir:3:8: error: unknown op 'frob'\n"
				  "    3 |   %0 = frob : f32[]\n"
				  "      |        ^\n");
}
END_TEST

START_TEST(test_reader_rejects_values_that_are_not_defined)
{
	ck_assert_ptr_null(read_text("x.ir", "module x\n"
					     "func @f(f32[3]) {\n"
					     "  %0 = input {index=0} : f32[3]\n"
					     "  %1 = exp %5 : f32[3]\n"
					     "  return %1\n"
					     "}\n"));
	ck_assert_ptr_nonnull(strstr(diags(), "x.ir:4:12: error: '%5' is not "
					      "defined before this point\n"));
	ck_assert_int_eq(ctx.n_errors, 1);
}
END_TEST

START_TEST(test_reader_runs_shape_rules_at_the_node_text)
{
	ck_assert_ptr_null(read_text("x.ir", "module x\n"
					     "func @f(a: f32[3], b: f32[4]) {\n"
					     "  %0 = input {index=0} : f32[3]\n"
					     "  %1 = input {index=1} : f32[4]\n"
					     "  %2 = add %0, %1 : f32[4]\n"
					     "  %3 = exp %0 : f32[4]\n"
					     "  return %2, %3\n"
					     "}\n"));
	const char *d = diags();
	ck_assert_ptr_nonnull(strstr(d, "x.ir:5:3: error: add: cannot broadcast "
					"[3] with [4]\n"));
	ck_assert_ptr_nonnull(strstr(d, "x.ir:6:3: error: %3: the printed type "
					"differs from the one its shape rule "
					"gives\n"));
	ck_assert_int_eq(ctx.n_errors, 2);
}
END_TEST

START_TEST(test_reader_recovers_and_reports_several_errors)
{
	ck_assert_ptr_null(read_text("x.ir", "module x\n"
					     "sym B = -3\n"
					     "param @w : f32[Q] = zeros\n"
					     "bogus line\n"
					     "func @f() {\n"
					     "  %0 = exp : f32[3]\n"
					     "  %1 = sum %0 {axes=[0]} : f32[]\n"
					     "  return\n"
					     "}\n"));
	const char *d = diags();
	ck_assert_ptr_nonnull(strstr(d, "x.ir:2:9: error: -3 out of range"));
	ck_assert_ptr_nonnull(strstr(d, "x.ir:3:16: error: unknown symbol 'Q'"));
	ck_assert_ptr_nonnull(
		strstr(d, "x.ir:4:1: error: expected 'sym', 'param', "
			  "'train', 'func' or 'const', found 'bogus'"));
	ck_assert_ptr_nonnull(strstr(d, "x.ir:7:24: error: expected ','"));
	ck_assert_ptr_nonnull(strstr(d, "x.ir:6:3: error: exp: expects 1 "
					"operand, got 0"));
	ck_assert_int_eq(ctx.n_errors, 5);
}
END_TEST

START_TEST(test_reader_needs_a_module_line_and_closing_braces)
{
	ck_assert_ptr_null(read_text("a.ir", "func @f() {\n"));
	ck_assert_ptr_nonnull(strstr(diags(), "a.ir:1:1: error: expected "
					      "'module', found 'func'"));
	ck_assert_ptr_null(
		read_text("b.ir", "module m\nfunc @f() {\n  return\n"));
	ck_assert_ptr_nonnull(strstr(diags(), "b.ir:4:1: error: expected '}' "
					      "closing the function, found end "
					      "of file"));
}
END_TEST

START_TEST(test_reader_checks_constant_counts_and_order)
{
	ck_assert_ptr_null(read_text("x.ir",
				     "module x\n"
				     "const @c0 : i32[3] = [1, 2]\n"
				     "const @c2 : f32[] = [1]\n"
				     "const @c1 : f32[2] = [1, 2, 3]\n"
				     "const @c2 : i32[1] = [4294967296]\n"));
	const char *d = diags();
	ck_assert_ptr_nonnull(
		strstr(d, "x.ir:2:27: error: 2 values for 3 elements"));
	ck_assert_ptr_nonnull(strstr(d, "x.ir:3:7: error: expected @c1 here"));
	ck_assert_ptr_nonnull(strstr(d, "x.ir:4:29: error: more than 2 values"));
	ck_assert_ptr_nonnull(
		strstr(d, "x.ir:5:23: error: 4294967296 out of range"));
}
END_TEST

START_TEST(test_reader_accepts_a_hand_written_module)
{
	ir_module *m = read_text("x.ir",
				 "# a comment\n"
				 "module x\n"
				 "sym B\n"
				 "func @f(x: f32[B, 4]) {\n"
				 "  %0 = input {index=0} : f32[B, 4]   # trailing comment\n"
				 "  %1 = reshape %0 : f32[2*B, 2]\n"
				 "  return %1 as y\n"
				 "}\n");
	ck_assert_msg(m != NULL, "%s", diags());
	ck_assert_uint_eq(m->funcs[0]->g.n_nodes, 2);
	ck_assert_int_eq(m->funcs[0]->g.nodes[1].type.dims[0].coef, 2);
	ck_assert_uint_eq(m->funcs[0]->g.nodes[1].loc.file, 0);
	ir_module_destroy(m);
}
END_TEST

/* A line in a prelude function and the calls that lead to it: the
 * innermost first, each a registered call (ir_ctx.calls). */
static const char chain_text[] =
	"module x\n"
	"source \"m.g\"\n"
	"func @f(x: f32[4]) loc(2:1) {\n"
	"  %0 = input {index=0} : f32[4] loc(2:9)\n"
	"  %1 = tanh %0 : f32[4] loc(\"prelude.g\":50:3 in \"inner\" at "
	"\"prelude.g\":60:5 in \"outer\" at 7:12)\n"
	"  return %1 as y\n"
	"}\n";

START_TEST(test_a_prelude_line_keeps_its_calls_through_text)
{
	ir_module *m = read_text("chain.ir", chain_text);
	ck_assert_msg(m != NULL, "%s", diags());
	ir_loc loc = m->funcs[0]->g.nodes[1].loc;
	const ir_call *c = ir_loc_prelude_call(&ctx, loc);
	ck_assert_ptr_nonnull(c);
	ck_assert_str_eq(ctx.callees[c->callee], "inner");
	ck_assert_uint_eq(c->loc.line, 60);
	const ir_call *d = ir_loc_prelude_call(&ctx, c->loc);
	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(ctx.callees[d->callee], "outer");
	ck_assert_ptr_null(ir_loc_prelude_call(&ctx, d->loc));
	ir_loc user = ir_loc_user(&ctx, loc);
	ck_assert_str_eq(ctx.files[user.file].name, "m.g");
	ck_assert_uint_eq(user.line, 7);
	ck_assert_uint_eq(user.col, 12);
	/* printed again, the same text; an error there is the user's */
	char *s = print_to_string(m);
	ck_assert_ptr_nonnull(strstr(s, "loc(\"prelude.g\":50:3 in \"inner\" at "
					"\"prelude.g\":60:5 in \"outer\" at "
					"7:12)\n"));
	ir_error(&ctx, loc, "boom");
	ck_assert_str_eq(diags(),
			 "m.g:7:12: error: boom\n"
			 "prelude.g:50:3: note: here, in 'inner' (defined in "
			 "the prelude)\n"
			 "prelude.g:60:5: note: here, in 'outer' (defined in "
			 "the prelude)\n");
	free(s);
	ir_module_destroy(m);
}
END_TEST

START_TEST(test_reader_reports_a_malformed_call_chain)
{
	ck_assert_ptr_null(
		read_text("x.ir", "module x\n"
				  "func @f(x: f32[4]) {\n"
				  "  %0 = input {index=0} : f32[4]\n"
				  "  %1 = tanh %0 : f32[4] loc(\"p.g\":1:2 in "
				  "inner at \"m.g\":3:4)\n"
				  "  return %1\n"
				  "}\n"));
	ck_assert_msg(strstr(diags(), "x.ir:4:42: error: expected "
				      "the called function's name"),
		      "%s", diags());
	ck_assert_ptr_null(
		read_text("y.ir", "module x\n"
				  "func @f(x: f32[4]) {\n"
				  "  %0 = input {index=0} : f32[4]\n"
				  "  %1 = tanh %0 : f32[4] loc(\"p.g\":1:2 in "
				  "\"inner\" \"m.g\":3:4)\n"
				  "  return %1\n"
				  "}\n"));
	ck_assert_ptr_nonnull(strstr(diags(), "expected 'at'"));
}
END_TEST

/* ---- fuzz ------------------------------------------------------------------------- */

static uint32_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*s >> 33);
}

/* Reads text; a module that comes back must verify and print. */
static void read_any(const char *text, size_t len)
{
	uint32_t id = ir_ctx_add_source(&ctx, "fuzz.ir", text, len);
	ir_module *m = ir_module_read(&ctx, id);
	if (m) {
		ck_assert(ir_module_verify(m));
		char *s = print_to_string(m);
		free(s);
		ir_module_destroy(m);
	}
}

START_TEST(test_reader_survives_random_bytes)
{
	uint64_t seed = 12345;
	char buf[400];
	static const char alphabet[] = "module func sym %0 = : , ( ) [ ] { } @c "
				       "f32 i32 -1 2.5 loc \" \\ \n \n# x";
	for (int it = 0; it < 300; it++) {
		size_t n = rnd(&seed) % sizeof buf;
		for (size_t i = 0; i < n; i++)
			buf[i] = it % 2 ? (char)rnd(&seed)
					: alphabet[rnd(&seed) %
						   (sizeof alphabet - 1)];
		read_any(buf, n);
	}
}
END_TEST

START_TEST(test_reader_survives_truncated_and_mutated_dumps)
{
	builder b = {0};
	ir_module *m = full_module(&b);
	char *s = print_to_string(m);
	size_t len = strlen(s);
	uint64_t seed = 99;
	for (size_t cut = 0; cut < len; cut += 1 + len / 250)
		read_any(s, cut);
	char *mut = malloc(len + 1);
	for (int it = 0; it < 200; it++) {
		memcpy(mut, s, len + 1);
		for (int k = 0; k < 3; k++)
			mut[rnd(&seed) % len] = (char)(rnd(&seed) % 128);
		read_any(mut, len);
	}
	free(mut);
	free(s);
	ir_module_destroy(m);
}
END_TEST

static Suite *ir_text_suite(void)
{
	Suite *s = suite_create("ir_text");
	TCase *tc = tcase_create("text");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_printer_writes_the_documented_format);
	tcase_add_test(tc, test_print_read_print_is_byte_identical_for_every_op);
	tcase_add_test(tc,
		       test_round_trip_keeps_constant_bits_locations_and_settings);
	tcase_add_test(tc, test_reader_reports_unknown_ops_with_line_and_column);
	tcase_add_test(tc, test_reader_rejects_values_that_are_not_defined);
	tcase_add_test(tc, test_reader_runs_shape_rules_at_the_node_text);
	tcase_add_test(tc, test_reader_recovers_and_reports_several_errors);
	tcase_add_test(tc, test_reader_needs_a_module_line_and_closing_braces);
	tcase_add_test(tc, test_reader_checks_constant_counts_and_order);
	tcase_add_test(tc, test_reader_accepts_a_hand_written_module);
	tcase_add_test(tc, test_a_prelude_line_keeps_its_calls_through_text);
	tcase_add_test(tc, test_reader_reports_a_malformed_call_chain);
	tcase_add_test(tc, test_reader_survives_random_bytes);
	tcase_add_test(tc, test_reader_survives_truncated_and_mutated_dumps);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(ir_text_suite());
}
