/*
 * test_ir.c - the IR's shape rules (ir_infer_type through ir_build) and
 * the verifier, on small graphs built by hand. Types are written as text
 * ("f32[B, 10, 4*B]") and diagnostics captured in memory so that each
 * test can check the exact message a user would read.
 */
#include "ir.h"
#include "ir_scalar.h"
#include "testutil.h"

#include <check.h>
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static ir_ctx ctx;
static ir_module *m;
static ir_func *f;
static char *diag;
static size_t diag_len;

static void setup(void)
{
	ir_ctx_init(&ctx);
	ctx.diag_out = open_memstream(&diag, &diag_len);
	m = ir_module_create(&ctx, "t");
	ir_module_add_sym(m, "B", (ir_loc){0});
	ir_module_add_sym(m, "T", (ir_loc){0});
	f = ir_module_add_func(m, "f", (ir_loc){0});
}

static void teardown(void)
{
	ir_module_destroy(m);
	fclose(ctx.diag_out);
	free(diag);
	ir_ctx_fini(&ctx);
}

/* The diagnostics so far, as one string. */
static const char *diags(void)
{
	fflush(ctx.diag_out);
	return diag ? diag : "";
}

/* Parses "f32[B, 10, 4*B]" (symbols of m; -1 allowed). */
static ir_type ty(const char *s)
{
	ir_type t = {0};
	t.dtype = s[0] == 'i' ? IR_I32 : s[1] == '6' ? IR_F64 : IR_F32;
	const char *p = strchr(s, '[') + 1;
	while (*p && *p != ']') {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == ']')
			break;
		ir_dim d = {1, -1};
		if (*p == '-' || isdigit((unsigned char)*p)) {
			char *e;
			d.coef = strtoll(p, &e, 10);
			p = e;
			if (*p == '*')
				p++;
		}
		if (isalpha((unsigned char)*p)) {
			const char *q = p;
			while (isalnum((unsigned char)*p))
				p++;
			char name[16] = {0};
			memcpy(name, q, (size_t)(p - q));
			d.sym = ir_module_find_sym(m, name);
			ck_assert_int_ge(d.sym, 0);
		}
		t.dims[t.rank++] = d;
	}
	return t;
}

static ir_id input(const char *type)
{
	ir_type t = ty(type);
	ir_attr a = {.input_index = f->n_inputs};
	ir_id id = ir_build(m, f, IR_OP_INPUT, NULL, 0, &a, &t, (ir_loc){0});
	ck_assert_uint_ne(id, IR_NONE);
	ir_id *in = ir_arena_alloc(&m->arena, (f->n_inputs + 1) * sizeof *in);
	if (f->n_inputs)
		memcpy(in, f->inputs, f->n_inputs * sizeof *in);
	in[f->n_inputs++] = id;
	f->inputs = in;
	return id;
}

static ir_id op1(ir_op op, ir_id a, const ir_attr *attr)
{
	return ir_build(m, f, op, &a, 1, attr, NULL, (ir_loc){0});
}

static ir_id op2(ir_op op, ir_id a, ir_id b, const ir_attr *attr)
{
	ir_id args[] = {a, b};
	return ir_build(m, f, op, args, 2, attr, NULL, (ir_loc){0});
}

/* The type of node id, formatted as the test strings are. */
static const char *tyname(ir_id id)
{
	static char buf[256];
	char dims[200];
	ck_assert_uint_ne(id, IR_NONE);
	const ir_type *t = &f->g.nodes[id].type;
	ir_type_format(m, t, dims, sizeof dims);
	snprintf(buf, sizeof buf, "%s[%s]", ir_dtype_name(t->dtype), dims);
	return buf;
}

/* ---- elementwise and broadcasting ----------------------------------------- */

START_TEST(test_add_broadcasts_right_aligned_with_size_one_dims)
{
	ir_id a = input("f32[B, 1, 4]"), b = input("f32[3, 1]");
	ck_assert_str_eq(tyname(op2(IR_OP_ADD, a, b, NULL)), "f32[B, 3, 4]");
}
END_TEST

START_TEST(test_add_of_rank_zero_and_matrix_gives_matrix)
{
	ir_id a = input("f32[]"), b = input("f32[2, T]");
	ck_assert_str_eq(tyname(op2(IR_OP_ADD, a, b, NULL)), "f32[2, T]");
}
END_TEST

START_TEST(test_add_rejects_unequal_dims_with_shapes_in_message)
{
	ir_id a = input("f32[3, 4]"), b = input("f32[5]");
	ck_assert_uint_eq(op2(IR_OP_ADD, a, b, NULL), IR_NONE);
	ck_assert_str_eq(diags(),
			 "attnc: error: add: cannot broadcast [3, 4] with [5]\n");
	ck_assert_int_eq(ctx.n_errors, 1);
}
END_TEST

START_TEST(test_symbolic_dims_broadcast_only_with_one_or_themselves)
{
	ir_id a = input("f32[B, 4]"), b = input("f32[1, 4]"),
	      c = input("f32[2*B, 4]"), d = input("f32[T, 4]");
	ck_assert_str_eq(tyname(op2(IR_OP_MUL, a, b, NULL)), "f32[B, 4]");
	ck_assert_str_eq(tyname(op2(IR_OP_MUL, a, a, NULL)), "f32[B, 4]");
	ck_assert_uint_eq(op2(IR_OP_MUL, a, c, NULL), IR_NONE);
	ck_assert_uint_eq(op2(IR_OP_MUL, a, d, NULL), IR_NONE);
	ck_assert_ptr_nonnull(
		strstr(diags(), "mul: cannot broadcast [B, 4] with [2*B, 4]"));
	ck_assert_ptr_nonnull(
		strstr(diags(), "mul: cannot broadcast [B, 4] with [T, 4]"));
}
END_TEST

START_TEST(test_binary_ops_need_equal_dtypes)
{
	ir_id a = input("f32[3]"), b = input("i32[3]");
	ck_assert_uint_eq(op2(IR_OP_SUB, a, b, NULL), IR_NONE);
	ck_assert_str_eq(diags(), "attnc: error: sub: operand dtypes differ: "
				  "f32[3] and i32[3]\n");
}
END_TEST

START_TEST(test_integer_add_is_allowed_but_integer_div_is_not)
{
	ir_id a = input("i32[3]"), b = input("i32[1]");
	ck_assert_str_eq(tyname(op2(IR_OP_ADD, a, b, NULL)), "i32[3]");
	ck_assert_uint_eq(op2(IR_OP_DIV, a, b, NULL), IR_NONE);
	ck_assert_uint_eq(op2(IR_OP_POW, a, b, NULL), IR_NONE);
	ck_assert_ptr_nonnull(
		strstr(diags(), "div: left operand must be f32: i32[3]"));
}
END_TEST

START_TEST(test_comparisons_give_i32)
{
	ir_id a = input("f32[B, 1]"), b = input("f32[5]");
	ck_assert_str_eq(tyname(op2(IR_OP_LT, a, b, NULL)), "i32[B, 5]");
	ck_assert_str_eq(tyname(op2(IR_OP_NE, a, a, NULL)), "i32[B, 1]");
}
END_TEST

START_TEST(test_unary_math_needs_f32_but_neg_and_abs_take_i32)
{
	ir_id i = input("i32[2, 3]"), x = input("f32[2, 3]");
	ck_assert_str_eq(tyname(op1(IR_OP_NEG, i, NULL)), "i32[2, 3]");
	ck_assert_str_eq(tyname(op1(IR_OP_ABS, i, NULL)), "i32[2, 3]");
	ck_assert_str_eq(tyname(op1(IR_OP_TANH, x, NULL)), "f32[2, 3]");
	ck_assert_uint_eq(op1(IR_OP_EXP, i, NULL), IR_NONE);
	ck_assert_str_eq(diags(),
			 "attnc: error: exp: operand must be f32: i32[2, 3]\n");
}
END_TEST

START_TEST(test_cast_keeps_shape_and_takes_the_builder_dtype)
{
	ir_id x = input("f32[B, 3]");
	ir_type to = {.dtype = IR_I32};
	ir_id c = ir_build(m, f, IR_OP_CAST, &x, 1, NULL, &to, (ir_loc){0});
	ck_assert_str_eq(tyname(c), "i32[B, 3]");
}
END_TEST

START_TEST(test_select_broadcasts_all_three_and_needs_i32_condition)
{
	ir_id k = input("i32[B, 1]"), a = input("f32[4]"), b = input("f32[]");
	ir_id x = input("f32[B, 1]");
	ir_id args[] = {k, a, b};
	ir_id s = ir_build(m, f, IR_OP_SELECT, args, 3, NULL, NULL, (ir_loc){0});
	ck_assert_str_eq(tyname(s), "f32[B, 4]");
	ir_id bad[] = {x, a, b};
	ck_assert_uint_eq(ir_build(m, f, IR_OP_SELECT, bad, 3, NULL, NULL,
				   (ir_loc){0}),
			  IR_NONE);
	ck_assert_ptr_nonnull(
		strstr(diags(), "select: condition must be i32: f32[B, 1]"));
}
END_TEST

/* ---- matmul ------------------------------------------------------------------- */

START_TEST(test_matmul_broadcasts_batch_dims)
{
	ir_id a = input("f32[B, 1, 2, 3]"), b = input("f32[5, 3, 4]");
	ir_attr at = {.matmul = {false, false}};
	ck_assert_str_eq(tyname(op2(IR_OP_MATMUL, a, b, &at)),
			 "f32[B, 5, 2, 4]");
}
END_TEST

START_TEST(test_matmul_transposes_last_two_dims_of_either_operand)
{
	ir_id q = input("f32[B, 1, 8]"), k = input("f32[B, 10, 8]");
	ir_id w = input("f32[10, 20]");
	ir_attr tb = {.matmul = {false, true}}, ta = {.matmul = {true, false}};
	ck_assert_str_eq(tyname(op2(IR_OP_MATMUL, q, k, &tb)), "f32[B, 1, 10]");
	ck_assert_str_eq(tyname(op2(IR_OP_MATMUL, k, w, &ta)), "f32[B, 8, 20]");
}
END_TEST

START_TEST(test_matmul_reports_inner_dimensions_that_differ)
{
	ir_id a = input("f32[2, 10, 2]"), b = input("f32[2, 4, 10]");
	ir_attr at = {0};
	ck_assert_uint_eq(op2(IR_OP_MATMUL, a, b, &at), IR_NONE);
	ck_assert_str_eq(diags(), "attnc: error: matmul: inner dimensions "
				  "differ: [2, 10, 2] @ [2, 4, 10]\n");
}
END_TEST

START_TEST(test_matmul_rejects_vectors)
{
	ir_id a = input("f32[3]"), b = input("f32[3, 4]");
	ir_attr at = {0};
	ck_assert_uint_eq(op2(IR_OP_MATMUL, a, b, &at), IR_NONE);
	ck_assert_ptr_nonnull(strstr(diags(), "unsqueeze"));
}
END_TEST

/* ---- reductions, normalizations ---------------------------------------------------- */

START_TEST(test_sum_removes_axes_of_the_mask_or_keeps_them_as_one)
{
	ir_id x = input("f32[B, 3, 4]");
	ir_attr r = {.reduce = {0x5, false}}, k = {.reduce = {0x6, true}};
	ck_assert_str_eq(tyname(op1(IR_OP_SUM, x, &r)), "f32[3]");
	ck_assert_str_eq(tyname(op1(IR_OP_MEAN, x, &k)), "f32[B, 1, 1]");
	ir_attr all = {.reduce = {0x7, false}};
	ck_assert_str_eq(tyname(op1(IR_OP_MAX, x, &all)), "f32[]");
	ir_attr bad = {.reduce = {0x8, false}};
	ck_assert_uint_eq(op1(IR_OP_SUM, x, &bad), IR_NONE);
	ck_assert_str_eq(diags(), "attnc: error: sum: axis 3 out of range "
				  "for [B, 3, 4]\n");
}
END_TEST

START_TEST(test_argmax_needs_one_axis_and_gives_i32)
{
	ir_id x = input("f32[B, 7]");
	ir_attr r = {.reduce = {0x2, false}}, two = {.reduce = {0x3, false}};
	ck_assert_str_eq(tyname(op1(IR_OP_ARGMAX, x, &r)), "i32[B]");
	ck_assert_uint_eq(op1(IR_OP_ARGMAX, x, &two), IR_NONE);
	ck_assert_str_eq(tyname(op1(IR_OP_ARGMIN, x, &r)), "i32[B]");
	ck_assert_uint_eq(op1(IR_OP_ARGMIN, x, &two), IR_NONE);
}
END_TEST

START_TEST(test_masked_softmax_takes_valid_lengths_per_batch_or_per_query)
{
	ir_id x = input("f32[B, 1, 10]");
	ir_id vb = input("i32[B]"), vq = input("i32[B, 1]"),
	      v1 = input("i32[1]");
	ir_attr a = {.fill = -1e6};
	ck_assert_str_eq(tyname(op2(IR_OP_MASKED_SOFTMAX, x, vb, &a)),
			 "f32[B, 1, 10]");
	ck_assert_str_eq(tyname(op2(IR_OP_MASKED_SOFTMAX, x, vq, &a)),
			 "f32[B, 1, 10]");
	ck_assert_str_eq(tyname(op2(IR_OP_MASKED_SOFTMAX, x, v1, &a)),
			 "f32[B, 1, 10]");
}
END_TEST

START_TEST(test_masked_softmax_rejects_bad_valid_lengths)
{
	ir_id x = input("f32[2, 1, 10]");
	ir_id vf = input("f32[2]"), v3 = input("i32[2, 1, 10]"),
	      v5 = input("i32[5]");
	ir_attr a = {.fill = -1e6};
	ck_assert_uint_eq(op2(IR_OP_MASKED_SOFTMAX, x, vf, &a), IR_NONE);
	ck_assert_uint_eq(op2(IR_OP_MASKED_SOFTMAX, x, v3, &a), IR_NONE);
	ck_assert_uint_eq(op2(IR_OP_MASKED_SOFTMAX, x, v5, &a), IR_NONE);
	ck_assert_str_eq(
		diags(),
		"attnc: error: masked_softmax: valid lengths must be i32: f32[2]\n"
		"attnc: error: masked_softmax: valid lengths must have rank 1 or 2 "
		"for scores [2, 1, 10]: [2, 1, 10]\n"
		"attnc: error: masked_softmax: valid lengths [5] do not broadcast "
		"against scores [2, 1, 10]\n");
}
END_TEST

START_TEST(test_layer_norm_needs_gamma_and_beta_of_the_last_dim)
{
	ir_id x = input("f32[B, T, 32]"), g = input("f32[32]"),
	      bad = input("f32[16]");
	ir_attr e = {.eps = 1e-5};
	ir_id args[] = {x, g, g}, bargs[] = {x, g, bad};
	ck_assert_str_eq(tyname(ir_build(m, f, IR_OP_LAYER_NORM, args, 3, &e,
					 NULL, (ir_loc){0})),
			 "f32[B, T, 32]");
	ck_assert_uint_eq(ir_build(m, f, IR_OP_LAYER_NORM, bargs, 3, &e, NULL,
				   (ir_loc){0}),
			  IR_NONE);
	ck_assert_ptr_nonnull(
		strstr(diags(), "layer_norm: shift must have rank 1"));
}
END_TEST

START_TEST(test_dropout_probability_must_be_below_one)
{
	ir_id x = input("f32[3]");
	ir_attr ok = {.dropout = {0.1, 0}}, bad = {.dropout = {1.0, 0}};
	ck_assert_str_eq(tyname(op1(IR_OP_DROPOUT, x, &ok)), "f32[3]");
	ck_assert_uint_eq(op1(IR_OP_DROPOUT, x, &bad), IR_NONE);
	ck_assert_str_eq(diags(), "attnc: error: dropout: probability must be in "
				  "[0, 1), not 1\n");
}
END_TEST

START_TEST(test_embedding_appends_the_table_width)
{
	ir_id ids = input("i32[B, T]"), tab = input("f32[184, 32]");
	ck_assert_str_eq(tyname(op2(IR_OP_EMBEDDING, ids, tab, NULL)),
			 "f32[B, T, 32]");
	ck_assert_uint_eq(op2(IR_OP_EMBEDDING, tab, tab, NULL), IR_NONE);
}
END_TEST

/* ---- layout ---------------------------------------------------------------------- */

static ir_id reshape(ir_id x, const char *target)
{
	ir_type t = ty(target);
	return ir_build(m, f, IR_OP_RESHAPE, &x, 1, NULL, &t, (ir_loc){0});
}

START_TEST(test_reshape_solves_the_minus_one_dim)
{
	ir_id x = input("f32[B, 10, 4, 8]"), s = input("i32[6, 4]");
	ck_assert_str_eq(tyname(reshape(x, "f32[-1, 10, 8]")),
			 "f32[4*B, 10, 8]");
	ck_assert_str_eq(tyname(reshape(x, "f32[4*B, 10, 8]")),
			 "f32[4*B, 10, 8]");
	ck_assert_str_eq(tyname(reshape(x, "f32[B, -1]")), "f32[B, 320]");
	ck_assert_str_eq(tyname(reshape(s, "f32[3, -1]")), "i32[3, 8]");
	ck_assert_str_eq(tyname(reshape(s, "f32[-1]")), "i32[24]");
}
END_TEST

START_TEST(test_reshape_rejects_counts_that_differ)
{
	ir_id x = input("f32[B, 10]"), s = input("f32[6, 4]");
	ck_assert_uint_eq(reshape(s, "f32[5, -1]"), IR_NONE);
	ck_assert_uint_eq(reshape(x, "f32[T, 10]"), IR_NONE);
	ck_assert_uint_eq(reshape(x, "f32[-1, -1]"), IR_NONE);
	ck_assert_uint_eq(reshape(s, "f32[25]"), IR_NONE);
	ck_assert_str_eq(
		diags(),
		"attnc: error: reshape: cannot reshape [6, 4] to [5, -1]\n"
		"attnc: error: reshape: cannot reshape [B, 10] to [T, 10]\n"
		"attnc: error: reshape: cannot reshape [B, 10] to [-1, -1]\n"
		"attnc: error: reshape: cannot reshape [6, 4] to [25]\n");
}
END_TEST

START_TEST(test_broadcast_expands_size_one_dims_and_adds_leading_ones)
{
	ir_id x = input("f32[1, 4]");
	ir_type t = ty("f32[B, 3, 4]"), bad = ty("f32[3, 5]");
	ck_assert_str_eq(tyname(ir_build(m, f, IR_OP_BROADCAST, &x, 1, NULL, &t,
					 (ir_loc){0})),
			 "f32[B, 3, 4]");
	ck_assert_uint_eq(ir_build(m, f, IR_OP_BROADCAST, &x, 1, NULL, &bad,
				   (ir_loc){0}),
			  IR_NONE);
	ck_assert_str_eq(diags(), "attnc: error: broadcast: cannot broadcast "
				  "[1, 4] to [3, 5]\n");
}
END_TEST

START_TEST(test_permute_reorders_axes_and_rejects_non_permutations)
{
	ir_id x = input("f32[B, 10, 4, 8]");
	ir_attr p = {.permute = {{0, 2, 1, 3}}},
		bad = {.permute = {{0, 1, 1, 3}}};
	ck_assert_str_eq(tyname(op1(IR_OP_PERMUTE, x, &p)), "f32[B, 4, 10, 8]");
	ck_assert_uint_eq(op1(IR_OP_PERMUTE, x, &bad), IR_NONE);
}
END_TEST

START_TEST(test_slice_rounds_up_with_a_step)
{
	ir_id x = input("f32[B, 10]");
	ir_attr s = {.slice = {1, 1, 8, 3}}, sym = {.slice = {0, 0, 1, 1}};
	ir_attr oob = {.slice = {1, 2, 11, 1}};
	ck_assert_str_eq(tyname(op1(IR_OP_SLICE, x, &s)), "f32[B, 3]");
	/* A symbolic axis takes static bounds (checked when it is known). */
	ck_assert_str_eq(tyname(op1(IR_OP_SLICE, x, &sym)), "f32[1, 10]");
	ck_assert_uint_eq(op1(IR_OP_SLICE, x, &oob), IR_NONE);
	ck_assert_int_eq(ctx.n_errors, 1);
}
END_TEST

START_TEST(test_concat_sums_the_axis_including_symbolic_coefficients)
{
	ir_id a = input("f32[B, 2]"), b = input("f32[2*B, 2]"),
	      c = input("f32[3, 2]");
	ir_attr ax0 = {.axis = 0}, ax1 = {.axis = 1};
	ir_id ab[] = {a, b, a}, ac[] = {a, c}, cc[] = {c, c, c};
	ck_assert_str_eq(tyname(ir_build(m, f, IR_OP_CONCAT, ab, 3, &ax0, NULL,
					 (ir_loc){0})),
			 "f32[4*B, 2]");
	ck_assert_str_eq(tyname(ir_build(m, f, IR_OP_CONCAT, cc, 3, &ax1, NULL,
					 (ir_loc){0})),
			 "f32[3, 6]");
	ck_assert_uint_eq(ir_build(m, f, IR_OP_CONCAT, ac, 2, &ax0, NULL,
				   (ir_loc){0}),
			  IR_NONE);
	ck_assert_uint_eq(ir_build(m, f, IR_OP_CONCAT, ac, 2, &ax1, NULL,
				   (ir_loc){0}),
			  IR_NONE);
	ck_assert_uint_eq(ir_build(m, f, IR_OP_CONCAT, NULL, 0, &ax1, NULL,
				   (ir_loc){0}),
			  IR_NONE);
}
END_TEST

START_TEST(test_repeat_and_repeat_interleave_multiply_dims)
{
	ir_id x = input("f32[B, 3]");
	ir_attr r = {.repeat = {{2, 4}}}, ri = {.interleave = {0, 5}};
	ck_assert_str_eq(tyname(op1(IR_OP_REPEAT, x, &r)), "f32[2*B, 12]");
	ck_assert_str_eq(tyname(op1(IR_OP_REPEAT_INTERLEAVE, x, &ri)),
			 "f32[5*B, 3]");
	ir_attr bad = {.interleave = {2, 5}};
	ck_assert_uint_eq(op1(IR_OP_REPEAT_INTERLEAVE, x, &bad), IR_NONE);
}
END_TEST

/* max and argmax have no identity: over an axis of 0 elements into a
 * result with elements is an error; into an empty result, or as a sum
 * or a mean, it is not. */
START_TEST(test_max_over_an_empty_axis_is_refused_unless_the_result_is_empty)
{
	ir_id x = input("f32[0, 3]"), e = input("f32[0, 0]");
	ir_attr r0 = {.reduce = {1, false}}, r1 = {.reduce = {2, false}};
	ck_assert_uint_eq(op1(IR_OP_MAX, x, &r0), IR_NONE);
	ck_assert_uint_eq(op1(IR_OP_ARGMAX, x, &r0), IR_NONE);
	ck_assert_str_eq(tyname(op1(IR_OP_SUM, x, &r0)), "f32[3]");
	ck_assert_str_eq(tyname(op1(IR_OP_MEAN, x, &r0)), "f32[3]");
	ck_assert_str_eq(tyname(op1(IR_OP_MAX, x, &r1)), "f32[0]");
	ck_assert_str_eq(tyname(op1(IR_OP_MAX, e, &r0)), "f32[0]");
	ck_assert_str_eq(tyname(op1(IR_OP_ARGMAX, e, &r1)), "i32[0]");
}
END_TEST

START_TEST(test_sort_keeps_shape)
{
	ir_id x = input("f32[4, 9]");
	ir_attr a = {.axis = 1}, bad = {.axis = 2};
	ck_assert_str_eq(tyname(op1(IR_OP_SORT, x, &a)), "f32[4, 9]");
	ck_assert_uint_eq(op1(IR_OP_SORT, x, &bad), IR_NONE);
}
END_TEST

START_TEST(test_sort_grad_takes_a_gradient_of_the_operands_shape)
{
	ir_id x = input("f32[4, 9]"), g = input("f32[4, 9]");
	ir_id g2 = input("f32[9, 4]"), gi = input("i32[4, 9]");
	ir_attr a = {.axis = 0}, bad = {.axis = 2};
	ck_assert_str_eq(tyname(op2(IR_OP_SORT_GRAD, x, g, &a)), "f32[4, 9]");
	ck_assert_uint_eq(op2(IR_OP_SORT_GRAD, x, g2, &a), IR_NONE);
	ck_assert_uint_eq(op2(IR_OP_SORT_GRAD, x, gi, &a), IR_NONE);
	ck_assert_uint_eq(op2(IR_OP_SORT_GRAD, gi, gi, &a), IR_NONE);
	ck_assert_uint_eq(op2(IR_OP_SORT_GRAD, x, g, &bad), IR_NONE);
}
END_TEST

/* ---- losses and leaves ---------------------------------------------------------------- */

START_TEST(test_losses_give_scalar_or_label_shape)
{
	ir_id p = input("f32[50]"), t = input("f32[50]"), t2 = input("f32[49]");
	ir_id lg = input("f32[B, T, 184]"), lb = input("i32[B, T]");
	ck_assert_str_eq(tyname(op2(IR_OP_MSE_LOSS, p, t, NULL)), "f32[]");
	ck_assert_str_eq(tyname(op2(IR_OP_CROSS_ENTROPY, lg, lb, NULL)),
			 "f32[B, T]");
	ck_assert_uint_eq(op2(IR_OP_MSE_LOSS, p, t2, NULL), IR_NONE);
	ck_assert_uint_eq(op2(IR_OP_CROSS_ENTROPY, lg, lg, NULL), IR_NONE);
	ck_assert_uint_eq(op2(IR_OP_CROSS_ENTROPY, lg, p, NULL), IR_NONE);
}
END_TEST

static ir_id op3(ir_op op, ir_id a, ir_id b, ir_id c)
{
	ir_id args[] = {a, b, c};
	return ir_build(m, f, op, args, 3, NULL, NULL, (ir_loc){0});
}

/* cross_entropy_with_grad stacks two of the logits' type, symbolic dims
 * kept; its operands must fit as cross_entropy_grad's. */
START_TEST(test_cross_entropy_with_grad_stacks_two_of_the_logits_type)
{
	ir_id lg = input("f32[B, T, 184]"), lb = input("i32[B, T]");
	ir_id g = input("f32[B, T]"), g2 = input("f32[B, 1]");
	ck_assert_str_eq(tyname(op3(IR_OP_CROSS_ENTROPY_WITH_GRAD, lg, lb, g)),
			 "f32[2, B, T, 184]");
	ck_assert_uint_eq(op3(IR_OP_CROSS_ENTROPY_WITH_GRAD, lg, lb, g2),
			  IR_NONE);
	ck_assert_uint_eq(op3(IR_OP_CROSS_ENTROPY_WITH_GRAD, lg, g, g), IR_NONE);
	ck_assert_uint_eq(op3(IR_OP_CROSS_ENTROPY_WITH_GRAD, lb, lb, g),
			  IR_NONE);
}
END_TEST

START_TEST(test_cross_entropy_grad_has_the_logits_type)
{
	ir_id lg = input("f32[B, T, 184]"), lb = input("i32[B, T]");
	ir_id g = input("f32[B, T]"), g2 = input("f32[B, 1]");
	ir_id gi = input("i32[B, T]");
	ck_assert_str_eq(tyname(op3(IR_OP_CROSS_ENTROPY_GRAD, lg, lb, g)),
			 "f32[B, T, 184]");
	ck_assert_uint_eq(op3(IR_OP_CROSS_ENTROPY_GRAD, lg, lb, g2), IR_NONE);
	ck_assert_uint_eq(op3(IR_OP_CROSS_ENTROPY_GRAD, lg, lb, gi), IR_NONE);
	ck_assert_uint_eq(op3(IR_OP_CROSS_ENTROPY_GRAD, lg, g, g), IR_NONE);
	ck_assert_uint_eq(op3(IR_OP_CROSS_ENTROPY_GRAD, lb, lb, g), IR_NONE);
}
END_TEST

START_TEST(test_param_and_const_nodes_must_match_the_module_tables)
{
	ir_type w = ty("f32[20, 8]"), other = ty("f32[8, 20]"), c = ty("i32[2]");
	int32_t data[2] = {2, 6};
	ir_module_add_param(m, "W_q", &w, IR_INIT_XAVIER_UNIFORM, 1, 0,
			    (ir_loc){0});
	ir_module_add_const(m, &c, data);
	ir_attr p0 = {.param_index = 0}, p1 = {.param_index = 1},
		c0 = {.const_index = 0};
	ck_assert_uint_ne(ir_build(m, f, IR_OP_PARAM, NULL, 0, &p0, &w,
				   (ir_loc){0}),
			  IR_NONE);
	ck_assert_uint_ne(ir_build(m, f, IR_OP_CONST, NULL, 0, &c0, &c,
				   (ir_loc){0}),
			  IR_NONE);
	ck_assert_uint_eq(ir_build(m, f, IR_OP_PARAM, NULL, 0, &p0, &other,
				   (ir_loc){0}),
			  IR_NONE);
	ck_assert_uint_eq(ir_build(m, f, IR_OP_PARAM, NULL, 0, &p1, &w,
				   (ir_loc){0}),
			  IR_NONE);
	ck_assert_str_eq(
		diags(),
		"attnc: error: param: type f32[8, 20] differs from parameter "
		"@W_q: f32[20, 8]\n"
		"attnc: error: param: parameter index 1 out of range (1 parameters)\n");
}
END_TEST

START_TEST(test_wrong_operand_count_is_reported)
{
	ir_id x = input("f32[3]");
	ir_id args[] = {x, x};
	ck_assert_uint_eq(ir_build(m, f, IR_OP_EXP, args, 2, NULL, NULL,
				   (ir_loc){0}),
			  IR_NONE);
	ck_assert_str_eq(diags(),
			 "attnc: error: exp: expects 1 operand, got 2\n");
	ck_assert_uint_eq(f->g.n_nodes, 1);
}
END_TEST

START_TEST(test_errors_point_at_the_node_location)
{
	uint32_t file = ir_ctx_add_source(&ctx, "x.g", "a\n  return s @ k\n",
					  17);
	ir_id a = input("f32[2, 10, 2]"), b = input("f32[2, 4, 10]");
	ir_attr at = {0};
	ir_id args[] = {a, b};
	ck_assert_uint_eq(ir_build(m, f, IR_OP_MATMUL, args, 2, &at, NULL,
				   (ir_loc){.file = file, .line = 2, .col = 12}),
			  IR_NONE);
	ck_assert_str_eq(diags(),
			 "x.g:2:12: error: matmul: inner dimensions differ: "
			 "[2, 10, 2] @ [2, 4, 10]\n"
			 "    2 |   return s @ k\n"
			 "      |            ^\n");
}
END_TEST

/* ---- verifier ---------------------------------------------------------------------- */

/* x: f32[B, 4] input; %1 = exp x; output %1; a param and a dropout. */
static void small_graph(void)
{
	ir_type w = ty("f32[4]");
	ir_module_add_param(m, "w", &w, IR_INIT_ZEROS, 0, 0, (ir_loc){0});
	ir_id x = input("f32[B, 4]");
	ir_id e = op1(IR_OP_EXP, x, NULL);
	ir_attr p = {.param_index = 0};
	ir_id pw = ir_build(m, f, IR_OP_PARAM, NULL, 0, &p, &w, (ir_loc){0});
	ir_id s = op2(IR_OP_ADD, e, pw, NULL);
	ir_attr d = {.dropout = {0.5, 0}};
	m->n_dropout_streams = 1;
	ir_id o = op1(IR_OP_DROPOUT, s, &d);
	ck_assert_uint_eq(o, 4);
	f->outputs = ir_arena_alloc(&m->arena, sizeof *f->outputs);
	f->outputs[0] = o;
	f->n_outputs = 1;
}

START_TEST(test_verifier_accepts_a_well_formed_graph)
{
	small_graph();
	ck_assert(ir_module_verify(m));
	ck_assert_str_eq(diags(), "");
}
END_TEST

START_TEST(test_verifier_catches_a_wrong_stored_type)
{
	small_graph();
	f->g.nodes[1].type = ty("f32[B, 5]");
	ck_assert(!ir_module_verify(m));
	ck_assert_str_eq(
		diags(),
		"attnc: error: verifier: @f %1 (exp): stored type f32[B, 5] but "
		"the shape rule gives f32[B, 4]\n"
		"attnc: error: verifier: @f %3: add: cannot broadcast [B, 5] "
		"with [4]\n");
}
END_TEST

START_TEST(test_verifier_catches_a_forward_reference)
{
	small_graph();
	f->g.args[f->g.nodes[1].first_arg] = 3;
	ck_assert(!ir_module_verify(m));
	ck_assert_str_eq(diags(), "attnc: error: verifier: @f %1 (exp): operand "
				  "0 is %3, not defined before it\n");
}
END_TEST

START_TEST(test_verifier_catches_bad_indices)
{
	small_graph();
	f->g.nodes[2].attr.param_index = 7;
	f->g.nodes[0].attr.input_index = 1;
	f->outputs[0] = 9;
	m->n_dropout_streams = 0;
	ck_assert(!ir_module_verify(m));
	const char *d = diags();
	ck_assert_ptr_nonnull(strstr(
		d,
		"verifier: @f: input 0 is %0, not an input node with index 0\n"));
	ck_assert_ptr_nonnull(
		strstr(d,
		       "verifier: @f: output 0 is %9, out of range (5 nodes)\n"));
	ck_assert_ptr_nonnull(
		strstr(d, "verifier: @f %0: input index 1 does not match"));
	ck_assert_ptr_nonnull(
		strstr(d,
		       "verifier: @f %2: param: parameter index 7 out of range"));
	ck_assert_ptr_nonnull(strstr(
		d,
		"verifier: @f %4: dropout stream 0 out of range (0 streams)\n"));
	ck_assert_int_eq(ctx.n_errors, 5);
}
END_TEST

START_TEST(test_verifier_catches_bad_symbols_counts_and_duplicate_params)
{
	small_graph();
	f->g.nodes[0].type.dims[0].sym = 5;
	f->g.nodes[1].n_args = 2;
	ir_type w = ty("f32[4]");
	ir_module_add_param(m, "w", &w, IR_INIT_ZEROS, 0, 0, (ir_loc){0});
	ck_assert(!ir_module_verify(m));
	const char *d = diags();
	ck_assert_ptr_nonnull(
		strstr(d, "verifier: parameter @w is declared twice\n"));
	ck_assert_ptr_nonnull(
		strstr(d, "verifier: @f %0 (input): malformed type"));
	ck_assert_ptr_nonnull(
		strstr(d, "verifier: @f %1 (exp): expects 1 operand, got 2\n"));
}
END_TEST

/* ---- scalar functions (ir_scalar.c) ------------------------------------------------ */

START_TEST(test_every_elementwise_op_has_its_scalar_function)
{
	for (ir_op op = 0; op < IR_OP_COUNT; op++) {
		const ir_op_info *info = &ir_op_table[op];
		if (info->family == IR_FAM_UNARY) {
			ck_assert(ir_scalar_unary_fn(op) != NULL);
			ck_assert_msg(info->n_in == 1 &&
					      (info->flags & IR_OPF_EW),
				      "%s", info->name);
			/* A unary op that takes integers computes them exactly. */
			if (info->flags & IR_OPF_INT)
				ck_assert_msg(ir_scalar_has_int(op), "%s",
					      info->name);
		}
		if (info->family == IR_FAM_BINARY)
			ck_assert(ir_scalar_binary_fn(op) != NULL);
		if (info->family == IR_FAM_COMPARE)
			ck_assert_msg(info->flags & IR_OPF_NODIFF, "%s",
				      info->name);
	}
}
END_TEST

START_TEST(test_float_to_int_out_of_range_is_int32_min_as_in_the_jit)
{
	ck_assert_int_eq(ir_scalar_f2i(1e300), INT32_MIN);
	ck_assert_int_eq(ir_scalar_f2i(-1e300), INT32_MIN);
	ck_assert_int_eq(ir_scalar_f2i(NAN), INT32_MIN);
	ck_assert_int_eq(ir_scalar_f2i(2147483648.0), INT32_MIN);
	ck_assert_int_eq(ir_scalar_f2i(2147483647.9), INT32_MAX);
	ck_assert_int_eq(ir_scalar_f2i(-2147483648.9), INT32_MIN);
	ck_assert_int_eq(ir_scalar_f2i(-3.7), -3);
	ck_assert_int_eq(ir_scalar_f2i(3.7), 3);
}
END_TEST

/* Defined for every int64 (the Debug build's UBSan would flag overflow). */
START_TEST(test_integer_ops_wrap_without_overflow)
{
	int64_t r;
	ck_assert(ir_scalar_unary_int(IR_OP_ABS, INT64_MIN) == INT64_MIN);
	ck_assert(ir_scalar_unary_int(IR_OP_NEG, INT64_MIN) == INT64_MIN);
	ck_assert(ir_scalar_unary_int(IR_OP_ABS, -7) == 7);
	ck_assert(ir_scalar_unary_int(IR_OP_RELU, -7) == 0);
	ck_assert_int_eq(ir_scalar_binary_int(IR_OP_ADD, INT64_MAX, 1, &r),
			 IR_SCALAR_OK);
	ck_assert(r == INT64_MIN);
	ck_assert_int_eq(ir_scalar_binary_int(IR_OP_MUL, INT64_MAX, 2, &r),
			 IR_SCALAR_OK);
	ck_assert(r == -2);
	ck_assert_int_eq(ir_scalar_binary_int(IR_OP_DIV, INT64_MIN, -1, &r),
			 IR_SCALAR_OK);
	ck_assert(r == INT64_MIN);
	ck_assert_int_eq(ir_scalar_binary_int(IR_OP_DIV, -7, 2, &r),
			 IR_SCALAR_OK);
	ck_assert(r == -3);
	ck_assert_int_eq(ir_scalar_binary_int(IR_OP_DIV, 1, 0, &r),
			 IR_SCALAR_DIV_BY_ZERO);
	ck_assert_int_eq(ir_scalar_binary_int(IR_OP_POW, 2, -1, &r),
			 IR_SCALAR_NEG_POWER);
	ck_assert_int_eq(ir_scalar_binary_int(IR_OP_POW, 3, 4, &r),
			 IR_SCALAR_OK);
	ck_assert(r == 81);
	/* A unary op without an integer form converts as a cast does. */
	ck_assert(ir_scalar_unary_int(IR_OP_SQRT, 10) == 3);
}
END_TEST

START_TEST(test_scalar_functions_follow_pytorch_at_nan_and_signed_zero)
{
	ck_assert(isnan(ir_scalar_unary(IR_OP_RELU, NAN)));
	ck_assert(!signbit(ir_scalar_unary(IR_OP_RELU, -0.0)));
	ck_assert(isnan(ir_scalar_binary(IR_OP_MAXIMUM, NAN, 1)));
	ck_assert(isnan(ir_scalar_binary(IR_OP_MINIMUM, 1, NAN)));
	ck_assert(!ir_scalar_compare(IR_OP_EQ, NAN, NAN));
	ck_assert(ir_scalar_compare(IR_OP_NE, NAN, NAN));
	ck_assert(!ir_scalar_compare(IR_OP_LT, NAN, 1));
	ck_assert_double_eq_tol(ir_scalar_unary(IR_OP_SIGMOID, 0), 0.5, 1e-15);
	/* erf: odd, erf(1) from Abramowitz and Stegun's table 7.1. */
	ck_assert_double_eq_tol(ir_scalar_unary(IR_OP_ERF, 1),
				0.8427007929497149, 1e-15);
	ck_assert(ir_scalar_unary(IR_OP_ERF, -2) ==
		  -ir_scalar_unary(IR_OP_ERF, 2));
	ck_assert(ir_scalar_unary(IR_OP_ERF, INFINITY) == 1);
}
END_TEST

START_TEST(test_a_long_source_line_is_clipped_around_the_caret)
{
	size_t len = 1u << 20;
	char *text = malloc(len);
	ck_assert_ptr_nonnull(text);
	memset(text, 'a', len);
	memcpy(text, "x\n", 2);
	text[500000] = 'Y';
	uint32_t file = ir_ctx_add_source(&ctx, "long.g", text, len);
	ir_error(&ctx, (ir_loc){.file = file, .line = 2, .col = 499999}, "here");
	const char *d = diags();
	char want[512];
	snprintf(want, sizeof want,
		 "long.g:2:499999: error: here\n"
		 "    2 | ...%.80sY%.79s...\n      |    %80s^\n",
		 text + 3, text + 3, "");
	ck_assert_str_eq(d, want);
	free(text);
}
END_TEST

START_TEST(test_a_short_source_line_is_shown_whole_with_tabs_kept)
{
	const char *text = "ab\n\tc\1d e\n";
	uint32_t file = ir_ctx_add_source(&ctx, "s.g", text, strlen(text));
	ir_error(&ctx, (ir_loc){.file = file, .line = 2, .col = 4}, "at %s",
		 "d");
	ck_assert_str_eq(diags(), "s.g:2:4: error: at d\n"
				  "    2 | \tc d e\n      | \t  ^\n");
}
END_TEST

START_TEST(test_params_are_found_by_name_among_a_hundred_thousand)
{
	enum { N = 100000 };
	ir_type w = ty("f32[4]");
	char name[32];
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "layer_%d.W", i);
		ck_assert_int_eq(ir_module_add_param(m, name, &w, IR_INIT_ZEROS,
						     0, 0, (ir_loc){0}),
				 i);
	}
	for (int i = 0; i < N; i += 997) {
		snprintf(name, sizeof name, "layer_%d.W", i);
		ck_assert_int_eq(ir_module_find_param(m, name), i);
	}
	ck_assert_int_eq(ir_module_find_param(m, "layer_100000.W"), -1);
	ck_assert_int_eq(ir_module_find_param(m, ""), -1);
	/* A duplicate is kept, and found as the first, for the verifier. */
	ck_assert_int_eq(ir_module_add_param(m, "layer_7.W", &w, IR_INIT_ZEROS,
					     0, 0, (ir_loc){0}),
			 N);
	ck_assert_int_eq(ir_module_find_param(m, "layer_7.W"), 7);
	ck_assert(!ir_module_verify(m));
	ck_assert_ptr_nonnull(
		strstr(diags(), "parameter @layer_7.W is declared twice"));
}
END_TEST

START_TEST(test_a_name_index_replaces_the_position_of_an_equal_name)
{
	ir_names ix = {0};
	ck_assert_int_eq(ir_names_get(&ix, "a"), -1);
	ck_assert(ir_names_put(&ctx, &ix, "a", 3));
	ck_assert(ir_names_put(&ctx, &ix, "b", 4));
	ck_assert(ir_names_put(&ctx, &ix, "a", 5));
	ck_assert_int_eq(ir_names_get(&ix, "a"), 5);
	ck_assert_int_eq(ir_names_get(&ix, "b"), 4);
	ck_assert_uint_eq(ix.n, 2);
	ir_names_fini(&ctx, &ix);
	ck_assert_int_eq(ir_names_get(&ix, "a"), -1);
}
END_TEST

static const char *suggest(const char *word, const char *const *names, size_t n)
{
	ir_suggest sg;
	ir_suggest_init(&sg, word);
	for (size_t i = 0; i < n; i++)
		ir_suggest_offer(&sg, names[i]);
	return sg.best;
}

START_TEST(test_suggestions_pick_the_nearest_name_within_a_typo)
{
	static const char *const names[] = {"masked_softmax",
					    "softmax",
					    "x",
					    "--threads",
					    "--train",
					    "epochs"};
	const size_t n = sizeof names / sizeof *names;
	ck_assert_str_eq(suggest("masked_sofmax", names, n), "masked_softmax");
	ck_assert_str_eq(suggest("--thread", names, n), "--threads");
	ck_assert_str_eq(suggest("--trian", names, n), "--train");
	ck_assert_str_eq(suggest("epoch", names, n), "epochs");
	ck_assert_ptr_null(suggest("y", names, n));       /* too short */
	ck_assert_ptr_null(suggest("weights", names, n)); /* too far */
	ck_assert_ptr_null(suggest("softmax", names, n)); /* itself */
}
END_TEST

Suite *ir_suite(void);
Suite *ir_suite(void)
{
	Suite *s = suite_create("ir");
	TCase *tc = tcase_create("infer");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_add_broadcasts_right_aligned_with_size_one_dims);
	tcase_add_test(tc, test_a_long_source_line_is_clipped_around_the_caret);
	tcase_add_test(tc, test_suggestions_pick_the_nearest_name_within_a_typo);
	tcase_add_test(tc,
		       test_params_are_found_by_name_among_a_hundred_thousand);
	tcase_add_test(tc,
		       test_a_name_index_replaces_the_position_of_an_equal_name);
	tcase_add_test(tc,
		       test_a_short_source_line_is_shown_whole_with_tabs_kept);
	tcase_add_test(tc, test_add_of_rank_zero_and_matrix_gives_matrix);
	tcase_add_test(tc, test_add_rejects_unequal_dims_with_shapes_in_message);
	tcase_add_test(tc,
		       test_symbolic_dims_broadcast_only_with_one_or_themselves);
	tcase_add_test(tc, test_binary_ops_need_equal_dtypes);
	tcase_add_test(tc, test_integer_add_is_allowed_but_integer_div_is_not);
	tcase_add_test(tc, test_comparisons_give_i32);
	tcase_add_test(tc, test_unary_math_needs_f32_but_neg_and_abs_take_i32);
	tcase_add_test(tc, test_cast_keeps_shape_and_takes_the_builder_dtype);
	tcase_add_test(tc,
		       test_select_broadcasts_all_three_and_needs_i32_condition);
	tcase_add_test(tc, test_matmul_broadcasts_batch_dims);
	tcase_add_test(tc,
		       test_matmul_transposes_last_two_dims_of_either_operand);
	tcase_add_test(tc, test_matmul_reports_inner_dimensions_that_differ);
	tcase_add_test(tc, test_matmul_rejects_vectors);
	tcase_add_test(tc,
		       test_sum_removes_axes_of_the_mask_or_keeps_them_as_one);
	tcase_add_test(tc, test_argmax_needs_one_axis_and_gives_i32);
	tcase_add_test(
		tc,
		test_masked_softmax_takes_valid_lengths_per_batch_or_per_query);
	tcase_add_test(tc, test_masked_softmax_rejects_bad_valid_lengths);
	tcase_add_test(tc, test_layer_norm_needs_gamma_and_beta_of_the_last_dim);
	tcase_add_test(tc, test_dropout_probability_must_be_below_one);
	tcase_add_test(tc, test_embedding_appends_the_table_width);
	tcase_add_test(tc, test_reshape_solves_the_minus_one_dim);
	tcase_add_test(tc, test_reshape_rejects_counts_that_differ);
	tcase_add_test(tc,
		       test_broadcast_expands_size_one_dims_and_adds_leading_ones);
	tcase_add_test(tc,
		       test_permute_reorders_axes_and_rejects_non_permutations);
	tcase_add_test(tc, test_slice_rounds_up_with_a_step);
	tcase_add_test(tc,
		       test_concat_sums_the_axis_including_symbolic_coefficients);
	tcase_add_test(tc, test_repeat_and_repeat_interleave_multiply_dims);
	tcase_add_test(
		tc,
		test_max_over_an_empty_axis_is_refused_unless_the_result_is_empty);
	tcase_add_test(tc, test_sort_keeps_shape);
	tcase_add_test(tc,
		       test_sort_grad_takes_a_gradient_of_the_operands_shape);
	tcase_add_test(tc, test_losses_give_scalar_or_label_shape);
	tcase_add_test(tc, test_cross_entropy_grad_has_the_logits_type);
	tcase_add_test(tc,
		       test_cross_entropy_with_grad_stacks_two_of_the_logits_type);
	tcase_add_test(tc,
		       test_param_and_const_nodes_must_match_the_module_tables);
	tcase_add_test(tc, test_wrong_operand_count_is_reported);
	tcase_add_test(tc, test_errors_point_at_the_node_location);
	suite_add_tcase(s, tc);
	TCase *tv = tcase_create("verify");
	tcase_add_checked_fixture(tv, setup, teardown);
	tcase_add_test(tv, test_verifier_accepts_a_well_formed_graph);
	tcase_add_test(tv, test_verifier_catches_a_wrong_stored_type);
	tcase_add_test(tv, test_verifier_catches_a_forward_reference);
	tcase_add_test(tv, test_verifier_catches_bad_indices);
	tcase_add_test(
		tv,
		test_verifier_catches_bad_symbols_counts_and_duplicate_params);
	suite_add_tcase(s, tv);
	TCase *ts = tcase_create("scalar");
	tcase_add_test(ts, test_every_elementwise_op_has_its_scalar_function);
	tcase_add_test(ts,
		       test_float_to_int_out_of_range_is_int32_min_as_in_the_jit);
	tcase_add_test(ts, test_integer_ops_wrap_without_overflow);
	tcase_add_test(ts,
		       test_scalar_functions_follow_pytorch_at_nan_and_signed_zero);
	suite_add_tcase(s, ts);
	return s;
}

int main(void)
{
	return tu_run_suite(ir_suite());
}
