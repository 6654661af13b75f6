/*
 * test_passes_fold.c - constant folding on graphs built by hand: folded
 * values (hand-computed, and bit-equal to what the interpreter computes
 * when the graph runs unfolded), what must not fold, and the constant
 * table kept compact.
 */
#include "interp.h"
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static ir_id op1(tu_graph *x, ir_op op, ir_id a, const ir_attr *attr)
{
	return tu_build(x, op, &a, 1, attr, NULL);
}

static ir_id op2(tu_graph *x, ir_op op, ir_id a, ir_id b, const ir_attr *attr)
{
	ir_id args[2] = {a, b};
	return tu_build(x, op, args, 2, attr, NULL);
}

static ir_id to_type(tu_graph *x, ir_op op, ir_id a, ir_type t)
{
	return tu_build(x, op, &a, 1, NULL, &t);
}

static void ret(tu_graph *x, ir_id id)
{
	x->f->output_names[x->f->n_outputs] = "out";
	x->f->outputs[x->f->n_outputs++] = id;
}

static const ir_node *out_node(tu_graph *x, uint32_t o)
{
	return &x->f->g.nodes[x->f->outputs[o]];
}

/* The data of the constant output o stands for. */
static const void *out_const(tu_graph *x, uint32_t o)
{
	const ir_node *n = out_node(x, o);
	ck_assert_int_eq(n->op, IR_OP_CONST);
	ck_assert_uint_lt(n->attr.const_index, x->m->n_consts);
	return x->m->consts[n->attr.const_index].data;
}

static bool fold(tu_graph *x)
{
	bool ok = pass_fold(x->m) && ir_module_verify(x->m);
	ck_assert_msg(ok, "%s", tu_graph_diag(x));
	return ok;
}

/* (a + b) * 2 with a = [1, 2, 3], b = [10, 20, 30]: [22, 44, 66]. */
START_TEST(test_fold_evaluates_arithmetic_on_constants)
{
	static const float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, two = 2;
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 1, 3));
	ir_id ca = tu_const(&x, tu_type(IR_F32, 1, 3), a);
	ir_id cb = tu_const(&x, tu_type(IR_F32, 1, 3), b);
	ir_id c2 = tu_const(&x, tu_type(IR_F32, 0), &two);
	ir_id sum = op2(&x, IR_OP_ADD, ca, cb, NULL);
	ir_id prod = op2(&x, IR_OP_MUL, sum, c2, NULL);
	ret(&x, prod);
	ret(&x, op2(&x, IR_OP_SUB, in, prod, NULL));
	fold(&x);
	const float *v = out_const(&x, 0);
	ck_assert_float_eq(v[0], 22);
	ck_assert_float_eq(v[1], 44);
	ck_assert_float_eq(v[2], 66);
	ck_assert_uint_eq(x.m->n_consts, 1);
	ck_assert_uint_eq(x.f->g.n_nodes, 3); /* input, const, sub */
	ck_assert_int_eq(out_node(&x, 1)->op, IR_OP_SUB);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_fold_evaluates_integer_arithmetic_as_i32)
{
	static const int32_t a[2] = {7, -3}, b[2] = {5, 4};
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id ca = tu_const(&x, tu_type(IR_I32, 1, 2), a);
	ir_id cb = tu_const(&x, tu_type(IR_I32, 1, 2), b);
	ret(&x, op2(&x, IR_OP_MUL, ca, cb, NULL));
	fold(&x);
	const int32_t *v = out_const(&x, 0);
	ck_assert_int_eq(out_node(&x, 0)->type.dtype, IR_I32);
	ck_assert_int_eq(v[0], 35);
	ck_assert_int_eq(v[1], -12);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_fold_folds_layout_ops_on_constants)
{
	static const float a[6] = {1, 2, 3, 4, 5, 6};
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id ca = tu_const(&x, tu_type(IR_F32, 2, 2, 3), a);
	ir_attr perm = {.permute = {{1, 0}}};
	ret(&x, op1(&x, IR_OP_PERMUTE, ca, &perm)); /* [[1,4],[2,5],[3,6]] */
	ret(&x, to_type(&x, IR_OP_RESHAPE, ca, tu_type(IR_F32, 1, 6)));
	fold(&x);
	const float *t = out_const(&x, 0);
	static const float want[6] = {1, 4, 2, 5, 3, 6};
	for (int i = 0; i < 6; i++)
		ck_assert_float_eq(t[i], want[i]);
	ck_assert_int_eq(out_node(&x, 1)->type.rank, 1);
	ck_assert_float_eq(((const float *)out_const(&x, 1))[5], 6);
	tu_graph_fini(&x);
}
END_TEST

/* The folded constant holds exactly the bits an unfolded run computes. */
START_TEST(test_fold_matches_the_interpreter_bit_for_bit)
{
	static const float a[4] = {0.1f, 0.7f, -1.3f, 2.9f};
	static const float b[4] = {3.0f, 0.3f, 1.7f, -0.2f};
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id ca = tu_const(&x, tu_type(IR_F32, 1, 4), a);
	ir_id cb = tu_const(&x, tu_type(IR_F32, 1, 4), b);
	ir_id e = op1(&x, IR_OP_EXP, op2(&x, IR_OP_DIV, ca, cb, NULL), NULL);
	ir_id s = op1(&x, IR_OP_SIN, op2(&x, IR_OP_MUL, e, cb, NULL), NULL);
	ret(&x, op1(&x, IR_OP_SOFTMAX, op1(&x, IR_OP_TANH, s, NULL), NULL));
	interp_opts opts = {0};
	interp_tensor want;
	ck_assert_msg(interp_run(&x.ctx, x.m, x.f, &opts, NULL, NULL, &want),
		      "%s", tu_graph_diag(&x));
	fold(&x);
	ck_assert_uint_eq(x.f->g.n_nodes, 1);
	ck_assert_int_eq(memcmp(out_const(&x, 0), want.data, 4 * sizeof(float)),
			 0);
	interp_tensor_fini(&x.ctx, &want);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_fold_leaves_dropout_to_run_time)
{
	static const float a[4] = {1, 2, 3, 4};
	tu_graph x;
	tu_graph_init(&x, 8);
	x.m->n_dropout_streams = 1;
	ir_id ca = tu_const(&x, tu_type(IR_F32, 1, 4), a);
	ir_attr d = {.dropout = {.p = 0.5, .stream = 0}};
	ret(&x, op1(&x, IR_OP_DROPOUT, ca, &d));
	fold(&x);
	ck_assert_int_eq(out_node(&x, 0)->op, IR_OP_DROPOUT);
	ck_assert_uint_eq(x.f->g.n_nodes, 2);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_fold_leaves_symbolic_shapes_to_run_time)
{
	static const float one = 1;
	tu_graph x;
	tu_graph_init(&x, 8);
	int32_t b = ir_module_add_sym(x.m, "B", (ir_loc){0});
	ir_id c = tu_const(&x, tu_type(IR_F32, 0), &one);
	ir_type t = tu_type(IR_F32, 2, 0, 3);
	t.dims[0] = (ir_dim){1, b};
	ret(&x, to_type(&x, IR_OP_BROADCAST, c, t));
	fold(&x);
	ck_assert_int_eq(out_node(&x, 0)->op, IR_OP_BROADCAST);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_fold_does_not_make_huge_constants)
{
	static const float one = 1;
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id c = tu_const(&x, tu_type(IR_F32, 0), &one);
	ret(&x, to_type(&x, IR_OP_BROADCAST, c, tu_type(IR_F32, 2, 1025, 1024)));
	ret(&x, to_type(&x, IR_OP_BROADCAST, c, tu_type(IR_F32, 2, 2, 3)));
	fold(&x);
	ck_assert_int_eq(out_node(&x, 0)->op, IR_OP_BROADCAST);
	ck_assert_float_eq(((const float *)out_const(&x, 1))[5], 1);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_fold_keeps_example_constants_and_drops_the_rest)
{
	static const float a[2] = {1, 2}, b[2] = {3, 4}, ex[2] = {9, 9};
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_type t = tu_type(IR_F32, 1, 2);
	int32_t e = ir_module_add_const(x.m, &t, ex); /* @c0, the example */
	ir_id in = tu_input(&x, t);
	x.f->example = ir_arena_alloc(&x.m->arena, sizeof(uint32_t));
	x.f->example[0] = (uint32_t)e;
	ir_id ca = tu_const(&x, t, a);
	ir_id cb = tu_const(&x, t, b);
	ret(&x, op2(&x, IR_OP_ADD, in, op2(&x, IR_OP_ADD, ca, cb, NULL), NULL));
	fold(&x);
	ck_assert_uint_eq(x.m->n_consts, 2);
	ck_assert_uint_eq(x.f->example[0], 0);
	ck_assert_float_eq(((const float *)x.m->consts[0].data)[0], 9);
	const ir_node *k = &x.f->g.nodes[ir_arg(&x.f->g, x.f->outputs[0], 1)];
	ck_assert_int_eq(k->op, IR_OP_CONST);
	ck_assert_uint_eq(k->attr.const_index, 1);
	ck_assert_float_eq(((const float *)x.m->consts[1].data)[1], 6);
	tu_graph_fini(&x);
}
END_TEST

/* An embedding of a constant id outside the table is an error the run
 * would hit; folding reports it and fails. */
START_TEST(test_fold_reports_an_error_the_run_would_hit)
{
	static const int32_t ids[2] = {0, 5};
	static const float table[6] = {1, 2, 3, 4, 5, 6};
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id ci = tu_const(&x, tu_type(IR_I32, 1, 2), ids);
	ir_id ct = tu_const(&x, tu_type(IR_F32, 2, 3, 2), table);
	ret(&x, op2(&x, IR_OP_EMBEDDING, ci, ct, NULL));
	ck_assert(!pass_fold(x.m));
	ck_assert_int_ge(x.ctx.n_errors, 1);
	ck_assert_ptr_nonnull(strstr(tu_graph_diag(&x), "error"));
	tu_graph_fini(&x);
}
END_TEST

typedef struct failing_alloc {
	int left;
} failing_alloc;

/* Fails every allocation once `left` have been made. */
static void *fail_after(void *ud, void *ptr, size_t size)
{
	failing_alloc *fa = ud;
	if (size == 0) {
		free(ptr);
		return NULL;
	}
	if (fa->left-- <= 0)
		return NULL;
	return realloc(ptr, size);
}

/* Folding fails cleanly, with a message, exactly when an allocation
 * fails, wherever that happens (the sanitizers watch for leaks). */
START_TEST(test_fold_reports_allocation_failures)
{
	static const float a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
	static const int32_t ia[2] = {1, 2};
	for (int k = 0;; k++) {
		tu_graph x;
		tu_graph_init(&x, 8);
		ir_id in = tu_input(&x, tu_type(IR_F32, 1, 3));
		ir_id s = op2(&x, IR_OP_ADD,
			      tu_const(&x, tu_type(IR_F32, 1, 3), a),
			      tu_const(&x, tu_type(IR_F32, 1, 3), b), NULL);
		ret(&x,
		    op2(&x, IR_OP_MUL, in, op1(&x, IR_OP_EXP, s, NULL), NULL));
		ret(&x, to_type(&x, IR_OP_CAST,
				tu_const(&x, tu_type(IR_I32, 1, 2), ia),
				tu_type(IR_F32, 1, 2)));
		failing_alloc fa = {k};
		x.ctx.alloc = fail_after;
		x.ctx.alloc_ud = &fa;
		bool ok = pass_fold(x.m);
		bool done = fa.left >= 0;
		ck_assert_msg(ok == done, "k = %d: %s", k, tu_graph_diag(&x));
		if (!ok)
			ck_assert_ptr_nonnull(
				strstr(tu_graph_diag(&x), "out of memory"));
		else
			ck_assert(ir_module_verify(x.m));
		tu_graph_fini(&x);
		if (done)
			break;
	}
}
END_TEST

static Suite *fold_suite(void)
{
	Suite *s = suite_create("passes_fold");
	TCase *tc = tcase_create("fold");
	tcase_add_test(tc, test_fold_evaluates_arithmetic_on_constants);
	tcase_add_test(tc, test_fold_evaluates_integer_arithmetic_as_i32);
	tcase_add_test(tc, test_fold_folds_layout_ops_on_constants);
	tcase_add_test(tc, test_fold_matches_the_interpreter_bit_for_bit);
	tcase_add_test(tc, test_fold_leaves_dropout_to_run_time);
	tcase_add_test(tc, test_fold_leaves_symbolic_shapes_to_run_time);
	tcase_add_test(tc, test_fold_does_not_make_huge_constants);
	tcase_add_test(tc, test_fold_keeps_example_constants_and_drops_the_rest);
	tcase_add_test(tc, test_fold_reports_an_error_the_run_would_hit);
	tcase_add_test(tc, test_fold_reports_allocation_failures);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(fold_suite());
}
