/*
 * test_passes.c - the graph-rewriting passes on graphs built by hand:
 * simplify (each rule fires, and does not where it must not), CSE, DCE,
 * the infer check, the rewrite helper, the memory planner and --stats.
 * Folding, the pipeline and the golden files are in test_passes_fold.c
 * and test_passes_golden.c.
 */
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- a module with one function, built node by node ---------------------- */

static ir_id param(tu_graph *x, const char *name, ir_type t)
{
	int32_t p = ir_module_add_param(x->m, name, &t, IR_INIT_ZEROS, 0, 0,
					(ir_loc){0});
	ir_attr a = {.param_index = (uint32_t)p};
	return tu_build(x, IR_OP_PARAM, NULL, 0, &a, &t);
}

static ir_id op1(tu_graph *x, ir_op op, ir_id a, const ir_attr *attr)
{
	return tu_build(x, op, &a, 1, attr, NULL);
}

static ir_id op2(tu_graph *x, ir_op op, ir_id a, ir_id b, const ir_attr *attr)
{
	ir_id args[2] = {a, b};
	return tu_build(x, op, args, 2, attr, NULL);
}

/* reshape, broadcast and cast take their target as the node's type. */
static ir_id to_type(tu_graph *x, ir_op op, ir_id a, ir_type t)
{
	return tu_build(x, op, &a, 1, NULL, &t);
}

static ir_id permute(tu_graph *x, ir_id a, int rank, ...)
{
	ir_attr attr = {0};
	va_list ap;
	va_start(ap, rank);
	for (int i = 0; i < rank; i++)
		attr.permute.perm[i] = (uint8_t)va_arg(ap, int);
	va_end(ap);
	return op1(x, IR_OP_PERMUTE, a, &attr);
}

static void ret(tu_graph *x, ir_id id)
{
	x->f->output_names[x->f->n_outputs] = "out";
	x->f->outputs[x->f->n_outputs++] = id;
}

/* Runs a pass that must succeed, then the verifier on its result. */
static bool run(tu_graph *x, pass_fn pass)
{
	bool ok = pass(x->m) && ir_module_verify(x->m);
	ck_assert_msg(ok, "%s", tu_graph_diag(x));
	return ok;
}

static const ir_node *nd(tu_graph *x, ir_id id)
{
	return &x->f->g.nodes[id];
}
static ir_id arg(tu_graph *x, ir_id id, uint32_t i)
{
	return ir_arg(&x->f->g, id, i);
}
static const ir_node *out_node(tu_graph *x, uint32_t o)
{
	return nd(x, x->f->outputs[o]);
}

static const float ones4[4] = {1, 1, 1, 1};
static const float zeros4[4] = {0, 0, 0, 0};

/* ---- simplify ---------------------------------------------------------------- */

START_TEST(test_simplify_composes_nested_permutes)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 3, 2, 3, 4));
	ir_id p1 = permute(&x, in, 3, 1, 2, 0); /* [3, 4, 2] */
	ret(&x, permute(&x, p1, 3, 1, 0, 2));   /* [4, 3, 2] */
	ck_assert(run(&x, pass_simplify));
	ck_assert_uint_eq(x.f->g.n_nodes, 2);
	const ir_node *p = out_node(&x, 0);
	ck_assert_int_eq(p->op, IR_OP_PERMUTE);
	ck_assert_uint_eq(arg(&x, x.f->outputs[0], 0), 0);
	ck_assert_int_eq(p->attr.permute.perm[0], 2);
	ck_assert_int_eq(p->attr.permute.perm[1], 1);
	ck_assert_int_eq(p->attr.permute.perm[2], 0);
	ck_assert_int_eq(p->type.dims[0].coef, 4);
	ck_assert_int_eq(p->type.dims[2].coef, 2);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_simplify_removes_permutes_that_compose_to_identity)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 3, 2, 3, 4));
	ir_id p1 = permute(&x, in, 3, 1, 2, 0);
	ret(&x, permute(&x, p1, 3, 2, 0, 1));
	ret(&x, permute(&x, in, 3, 0, 1, 2));
	ck_assert(run(&x, pass_simplify));
	ck_assert_uint_eq(x.f->g.n_nodes, 1);
	ck_assert_uint_eq(x.f->outputs[0], 0);
	ck_assert_uint_eq(x.f->outputs[1], 0);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_simplify_merges_nested_reshapes)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 3, 2, 3, 4));
	ir_id r1 = to_type(&x, IR_OP_RESHAPE, in, tu_type(IR_F32, 2, 6, 4));
	ret(&x, to_type(&x, IR_OP_RESHAPE, r1, tu_type(IR_F32, 1, 24)));
	ck_assert(run(&x, pass_simplify));
	ck_assert_uint_eq(x.f->g.n_nodes, 2);
	ck_assert_int_eq(out_node(&x, 0)->op, IR_OP_RESHAPE);
	ck_assert_uint_eq(arg(&x, x.f->outputs[0], 0), 0);
	ck_assert_int_eq(out_node(&x, 0)->type.rank, 1);
	ck_assert_int_eq(out_node(&x, 0)->type.dims[0].coef, 24);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_simplify_removes_reshape_back_to_the_same_type)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 3, 2, 3, 4));
	ir_id r1 = to_type(&x, IR_OP_RESHAPE, in, tu_type(IR_F32, 2, 6, 4));
	ret(&x, to_type(&x, IR_OP_RESHAPE, r1, tu_type(IR_F32, 3, 2, 3, 4)));
	ck_assert(run(&x, pass_simplify));
	ck_assert_uint_eq(x.f->g.n_nodes, 1);
	ck_assert_uint_eq(x.f->outputs[0], 0);
	tu_graph_fini(&x);
}
END_TEST

/* Each of x*1, 1*x, x/1, x+0, 0+x, x-0 with a constant that broadcasts
 * along x without enlarging it becomes x. */
START_TEST(test_simplify_drops_unit_arithmetic)
{
	static const struct {
		ir_op op;
		bool is_const_left;
		const float *c;
	} cases[] = {
		{IR_OP_MUL, false, ones4}, {IR_OP_MUL, true, ones4},
		{IR_OP_DIV, false, ones4}, {IR_OP_ADD, false, zeros4},
		{IR_OP_ADD, true, zeros4}, {IR_OP_SUB, false, zeros4},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		tu_graph x;
		tu_graph_init(&x, 8);
		ir_id in = tu_input(&x, tu_type(IR_F32, 2, 3, 4));
		ir_id c = tu_const(&x, tu_type(IR_F32, 1, 4), cases[i].c);
		ret(&x, cases[i].is_const_left
				? op2(&x, cases[i].op, c, in, NULL)
				: op2(&x, cases[i].op, in, c, NULL));
		ck_assert(run(&x, pass_simplify));
		ck_assert_msg(x.f->outputs[0] == in, "case %zu", i);
		ck_assert_uint_eq(x.f->g.n_nodes, 1);
		tu_graph_fini(&x);
	}
}
END_TEST

START_TEST(test_simplify_drops_multiply_by_scalar_one)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 2, 3, 4));
	ir_id c = tu_const(&x, tu_type(IR_F32, 0), ones4);
	ret(&x, op2(&x, IR_OP_MUL, in, c, NULL));
	ck_assert(run(&x, pass_simplify));
	ck_assert_uint_eq(x.f->outputs[0], in);
	tu_graph_fini(&x);
}
END_TEST

/* x[4] * ones[3, 4] is a [3, 4] broadcast of x, not x. */
START_TEST(test_simplify_keeps_unit_arithmetic_that_broadcasts_x)
{
	static const float ones12[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 1, 4));
	ir_id c = tu_const(&x, tu_type(IR_F32, 2, 3, 4), ones12);
	ir_id c2 = tu_const(&x, tu_type(IR_F32, 2, 3, 4), ones12);
	ret(&x, op2(&x, IR_OP_MUL, in, c, NULL));
	ret(&x, op2(&x, IR_OP_MUL, c2, in, NULL));
	ck_assert(run(&x, pass_simplify));
	ck_assert_int_eq(out_node(&x, 0)->op, IR_OP_MUL);
	ck_assert_int_eq(out_node(&x, 1)->op, IR_OP_MUL);
	ck_assert_uint_eq(x.f->g.n_nodes, 5);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_simplify_keeps_non_unit_and_non_commuted_arithmetic)
{
	static const float almost[4] = {1, 1, 1, 0.5f};
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 2, 3, 4));
	ir_id one = tu_const(&x, tu_type(IR_F32, 1, 4), ones4);
	ir_id zero = tu_const(&x, tu_type(IR_F32, 1, 4), zeros4);
	ir_id half = tu_const(&x, tu_type(IR_F32, 1, 4), almost);
	ret(&x, op2(&x, IR_OP_DIV, one, in, NULL));  /* 1/x */
	ret(&x, op2(&x, IR_OP_SUB, zero, in, NULL)); /* 0-x */
	ret(&x, op2(&x, IR_OP_MUL, in, half, NULL));
	ret(&x, op2(&x, IR_OP_ADD, in, one, NULL));
	ret(&x, op2(&x, IR_OP_MUL, in, zero, NULL));
	ck_assert(run(&x, pass_simplify));
	ck_assert_int_eq(out_node(&x, 0)->op, IR_OP_DIV);
	ck_assert_int_eq(out_node(&x, 1)->op, IR_OP_SUB);
	ck_assert_int_eq(out_node(&x, 2)->op, IR_OP_MUL);
	ck_assert_int_eq(out_node(&x, 3)->op, IR_OP_ADD);
	ck_assert_int_eq(out_node(&x, 4)->op, IR_OP_MUL);
	ck_assert_uint_eq(x.f->g.n_nodes, 9);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_simplify_cancels_double_negation_only)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 1, 4));
	ir_id n1 = op1(&x, IR_OP_NEG, in, NULL);
	ret(&x, op1(&x, IR_OP_NEG, n1, NULL));
	ret(&x, n1);
	ck_assert(run(&x, pass_simplify));
	ck_assert_uint_eq(x.f->outputs[0], in);
	ck_assert_int_eq(out_node(&x, 1)->op, IR_OP_NEG);
	ck_assert_uint_eq(x.f->g.n_nodes, 2);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_simplify_turns_transposes_into_matmul_flags)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id a = tu_input(&x, tu_type(IR_F32, 3, 5, 3, 2)); /* a.T: [5, 2, 3] */
	ir_id b = tu_input(&x, tu_type(IR_F32, 3, 5, 4, 3)); /* b.T: [5, 3, 4] */
	ir_id at = permute(&x, a, 3, 0, 2, 1);
	ir_id bt = permute(&x, b, 3, 0, 2, 1);
	ret(&x, op2(&x, IR_OP_MATMUL, at, bt, &(ir_attr){.matmul = {0}}));
	ck_assert(run(&x, pass_simplify));
	ck_assert_uint_eq(x.f->g.n_nodes, 3);
	const ir_node *mm = out_node(&x, 0);
	ck_assert_int_eq(mm->op, IR_OP_MATMUL);
	ck_assert(mm->attr.matmul.ta && mm->attr.matmul.tb);
	ck_assert_uint_eq(arg(&x, x.f->outputs[0], 0), a);
	ck_assert_uint_eq(arg(&x, x.f->outputs[0], 1), b);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_simplify_toggles_a_set_matmul_flag)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id a = tu_input(&x, tu_type(IR_F32, 2, 2, 3));
	ir_id b = tu_input(&x, tu_type(IR_F32, 2, 2, 4));
	ir_id bt = permute(&x, b, 2, 1, 0); /* [4, 2] */
	/* matmul(a, bt, tb): a [2, 3] @ bt.T [2, 4]... with ta: a.T [3, 2] */
	ir_attr attr = {.matmul = {.ta = true, .tb = true}};
	ret(&x, op2(&x, IR_OP_MATMUL, a, bt, &attr));
	ck_assert(run(&x, pass_simplify));
	const ir_node *mm = out_node(&x, 0);
	ck_assert(mm->attr.matmul.ta);
	ck_assert(!mm->attr.matmul.tb);
	ck_assert_uint_eq(arg(&x, x.f->outputs[0], 1), b);
	ck_assert_int_eq(mm->type.dims[0].coef, 3);
	ck_assert_int_eq(mm->type.dims[1].coef, 4);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_simplify_keeps_permutes_that_do_not_transpose_for_matmul)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id a = tu_input(&x, tu_type(IR_F32, 3, 2, 5, 3)); /* -> [5, 2, 3] */
	ir_id b = tu_input(&x, tu_type(IR_F32, 3, 5, 3, 4));
	ir_id ap = permute(&x, a, 3, 1, 0, 2);
	ret(&x, op2(&x, IR_OP_MATMUL, ap, b, &(ir_attr){.matmul = {0}}));
	ck_assert(run(&x, pass_simplify));
	ck_assert_uint_eq(x.f->g.n_nodes, 4);
	ck_assert(!out_node(&x, 0)->attr.matmul.ta);
	ck_assert_uint_eq(arg(&x, x.f->outputs[0], 0), ap);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_simplify_drops_cast_and_broadcast_to_the_same_type)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 2, 3, 4));
	ret(&x, to_type(&x, IR_OP_CAST, in, tu_type(IR_F32, 2, 3, 4)));
	ret(&x, to_type(&x, IR_OP_BROADCAST, in, tu_type(IR_F32, 2, 3, 4)));
	ret(&x, to_type(&x, IR_OP_CAST, in, tu_type(IR_I32, 2, 3, 4)));
	ret(&x, to_type(&x, IR_OP_BROADCAST, in, tu_type(IR_F32, 3, 2, 3, 4)));
	ck_assert(run(&x, pass_simplify));
	ck_assert_uint_eq(x.f->outputs[0], in);
	ck_assert_uint_eq(x.f->outputs[1], in);
	ck_assert_int_eq(out_node(&x, 2)->op, IR_OP_CAST);
	ck_assert_int_eq(out_node(&x, 3)->op, IR_OP_BROADCAST);
	ck_assert_uint_eq(x.f->g.n_nodes, 3);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_simplify_drops_dropout_with_p_0_and_keeps_the_others)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	x.m->n_dropout_streams = 2;
	ir_id in = tu_input(&x, tu_type(IR_F32, 2, 3, 4));
	ir_id none = op1(&x, IR_OP_DROPOUT, in,
			 &(ir_attr){.dropout = {.p = 0, .stream = 0}});
	ret(&x, op1(&x, IR_OP_EXP, none, NULL));
	ret(&x, op1(&x, IR_OP_DROPOUT, in,
		    &(ir_attr){.dropout = {.p = 0.1, .stream = 1}}));
	ck_assert(run(&x, pass_simplify));
	ck_assert_int_eq(out_node(&x, 0)->op, IR_OP_EXP);
	ck_assert_uint_eq(arg(&x, x.f->outputs[0], 0), in);
	ck_assert_int_eq(out_node(&x, 1)->op, IR_OP_DROPOUT);
	ck_assert_uint_eq(x.f->g.n_nodes, 3);
	tu_graph_fini(&x);
}
END_TEST

/* ---- cse ----------------------------------------------------------------------- */

START_TEST(test_cse_merges_duplicate_chains)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 1, 4));
	ir_id e1 = op1(&x, IR_OP_EXP, in, NULL);
	ir_id e2 = op1(&x, IR_OP_EXP, in, NULL);
	ir_id t1 = op1(&x, IR_OP_TANH, e1, NULL);
	ir_id t2 = op1(&x, IR_OP_TANH, e2, NULL);
	ret(&x, op2(&x, IR_OP_ADD, t1, t2, NULL));
	ck_assert(run(&x, pass_cse));
	ck_assert_uint_eq(x.f->g.n_nodes, 4);
	ck_assert_int_eq(nd(&x, 1)->op, IR_OP_EXP);
	ck_assert_int_eq(nd(&x, 2)->op, IR_OP_TANH);
	ck_assert_uint_eq(x.f->outputs[0], 3);
	ck_assert_uint_eq(arg(&x, 3, 0), 2);
	ck_assert_uint_eq(arg(&x, 3, 1), 2);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_cse_keeps_nodes_whose_attributes_differ)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 2, 3, 3));
	x.m->n_dropout_streams = 2;
	ret(&x, permute(&x, in, 2, 1, 0));
	ret(&x, permute(&x, in, 2, 0, 1));
	ret(&x,
	    op2(&x, IR_OP_MATMUL, in, in, &(ir_attr){.matmul = {.ta = true}}));
	ret(&x,
	    op2(&x, IR_OP_MATMUL, in, in, &(ir_attr){.matmul = {.tb = true}}));
	ret(&x, op1(&x, IR_OP_DROPOUT, in,
		    &(ir_attr){.dropout = {.p = 0.1, .stream = 0}}));
	ret(&x, op1(&x, IR_OP_DROPOUT, in,
		    &(ir_attr){.dropout = {.p = 0.1, .stream = 1}}));
	ret(&x,
	    op1(&x, IR_OP_SLICE, in,
		&(ir_attr){
			.slice = {.axis = 0, .start = 0, .end = 2, .step = 1}}));
	ret(&x,
	    op1(&x, IR_OP_SLICE, in,
		&(ir_attr){
			.slice = {.axis = 0, .start = 1, .end = 3, .step = 1}}));
	ck_assert(run(&x, pass_cse));
	ck_assert_uint_eq(x.f->g.n_nodes, 9);
	for (uint32_t o = 0; o < 8; o++)
		ck_assert_uint_eq(x.f->outputs[o], o + 1);
	tu_graph_fini(&x);
}
END_TEST

/* The unused bytes of the attribute union must not keep equal nodes
 * apart. */
START_TEST(test_cse_ignores_bytes_outside_the_live_attribute)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 2, 3, 4));
	ir_attr a, b;
	memset(&a, 0x00, sizeof a);
	memset(&b, 0xab, sizeof b);
	a.reduce.axes = b.reduce.axes = 2;
	a.reduce.keepdim = b.reduce.keepdim = false;
	ir_id s1 = op1(&x, IR_OP_SUM, in, &a);
	ir_id s2 = op1(&x, IR_OP_SUM, in, &b);
	ret(&x, op2(&x, IR_OP_ADD, s1, s2, NULL));
	ck_assert(run(&x, pass_cse));
	ck_assert_uint_eq(x.f->g.n_nodes, 3);
	ck_assert_uint_eq(arg(&x, 2, 0), 1);
	ck_assert_uint_eq(arg(&x, 2, 1), 1);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_cse_merges_identical_constants_and_params)
{
	static const float a[2] = {1, 2}, b[2] = {1, 3};
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id c1 = tu_const(&x, tu_type(IR_F32, 1, 2), a);
	ir_id c2 = tu_const(&x, tu_type(IR_F32, 1, 2), b);
	ir_id c3 = tu_const(&x, tu_type(IR_F32, 1, 2), a);
	ir_id w1 = param(&x, "w", tu_type(IR_F32, 1, 2));
	ir_attr pw = {.param_index = 0};
	ir_type t2 = tu_type(IR_F32, 1, 2);
	ir_id w2 = tu_build(&x, IR_OP_PARAM, NULL, 0, &pw, &t2);
	ret(&x, op2(&x, IR_OP_ADD, c1, c3, NULL));
	ret(&x, op2(&x, IR_OP_ADD, c2, c2, NULL));
	ret(&x, op2(&x, IR_OP_MUL, w1, w2, NULL));
	ck_assert(run(&x, pass_cse));
	ck_assert_uint_eq(x.m->n_consts, 2);
	ck_assert_uint_eq(x.m->n_params, 1);
	/* const [1, 2], const [1, 3], param, add, add, mul */
	ck_assert_uint_eq(x.f->g.n_nodes, 6);
	const ir_node *add = out_node(&x, 0);
	ck_assert_uint_eq(arg(&x, x.f->outputs[0], 0),
			  arg(&x, x.f->outputs[0], 1));
	const ir_node *c = nd(&x, arg(&x, x.f->outputs[0], 0));
	ck_assert_int_eq(add->op, IR_OP_ADD);
	ck_assert_float_eq(((float *)x.m->consts[c->attr.const_index].data)[1],
			   2);
	ck_assert_uint_eq(arg(&x, x.f->outputs[2], 0),
			  arg(&x, x.f->outputs[2], 1));
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_cse_never_merges_arguments)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id a = tu_input(&x, tu_type(IR_F32, 1, 4));
	ir_id b = tu_input(&x, tu_type(IR_F32, 1, 4));
	ret(&x, op2(&x, IR_OP_SUB, a, b, NULL));
	ck_assert(run(&x, pass_cse));
	ck_assert_uint_eq(x.f->g.n_nodes, 3);
	ck_assert_uint_eq(x.f->inputs[0], 0);
	ck_assert_uint_eq(x.f->inputs[1], 1);
	tu_graph_fini(&x);
}
END_TEST

/* ---- dce ----------------------------------------------------------------------- */

START_TEST(test_dce_removes_dead_nodes_and_keeps_unused_inputs)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id a = tu_input(&x, tu_type(IR_F32, 1, 4));
	op1(&x, IR_OP_EXP, a, NULL); /* dead */
	ir_id b = tu_input(&x, tu_type(IR_F32, 1, 4));
	param(&x, "unused", tu_type(IR_F32, 1, 4)); /* dead node, kept param */
	ret(&x, op1(&x, IR_OP_TANH, a, NULL));
	ck_assert(run(&x, pass_dce));
	ck_assert_uint_eq(x.f->g.n_nodes, 3);
	ck_assert_int_eq(nd(&x, 0)->op, IR_OP_INPUT);
	ck_assert_int_eq(nd(&x, 1)->op, IR_OP_INPUT);
	ck_assert_int_eq(nd(&x, 2)->op, IR_OP_TANH);
	ck_assert_uint_eq(x.f->inputs[0], 0);
	ck_assert_uint_eq(x.f->inputs[1], 1);
	ck_assert_uint_eq(nd(&x, x.f->inputs[1])->attr.input_index, 1);
	ck_assert_uint_eq(x.f->outputs[0], 2);
	ck_assert_uint_eq(arg(&x, 2, 0), 0);
	ck_assert_uint_eq(x.m->n_params, 1);
	(void)b;
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_dce_drops_unused_constants_and_renumbers_examples)
{
	static const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 1, 4));
	tu_const(&x, tu_type(IR_F32, 1, 4), a); /* dead: const 0 goes */
	ir_id c = tu_const(&x, tu_type(IR_F32, 1, 4), b);
	ir_type t = tu_type(IR_F32, 1, 4);
	int32_t ex = ir_module_add_const(x.m, &t, a); /* the example: 2 */
	x.f->example = ir_arena_alloc(&x.m->arena, sizeof(uint32_t));
	x.f->example[0] = (uint32_t)ex;
	ret(&x, op2(&x, IR_OP_ADD, in, c, NULL));
	ck_assert(run(&x, pass_dce));
	ck_assert_uint_eq(x.m->n_consts, 2);
	ck_assert_uint_eq(nd(&x, 1)->attr.const_index, 0);
	ck_assert_float_eq(((float *)x.m->consts[0].data)[0], 5);
	ck_assert_uint_eq(x.f->example[0], 1);
	ck_assert_float_eq(((float *)x.m->consts[1].data)[3], 4);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_compact_replaces_uses_through_chains)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 1, 4));
	ir_id e = op1(&x, IR_OP_EXP, in, NULL);
	ir_id t = op1(&x, IR_OP_TANH, e, NULL);
	ir_id s = op1(&x, IR_OP_SIGMOID, t, NULL);
	ret(&x, op1(&x, IR_OP_RELU, s, NULL));
	/* sigmoid -> tanh -> exp: relu reads exp. */
	ir_id repl[5] = {0, 1, e, t, 4};
	ck_assert(pass_graph_compact(x.m, x.f, repl));
	ck_assert_uint_eq(x.f->g.n_nodes, 3);
	ck_assert_int_eq(nd(&x, 2)->op, IR_OP_RELU);
	ck_assert_uint_eq(arg(&x, 2, 0), 1);
	ck_assert_uint_eq(x.f->g.n_args, 2);
	tu_graph_fini(&x);
}
END_TEST

/* ---- infer --------------------------------------------------------------------- */

START_TEST(test_infer_accepts_a_well_typed_graph)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 2, 3, 4));
	ret(&x, op1(&x, IR_OP_EXP, in, NULL));
	ck_assert(pass_infer(x.m));
	ck_assert_int_eq(x.ctx.n_errors, 0);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_infer_reports_a_stored_type_that_differs)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 2, 3, 4));
	ir_id e = op1(&x, IR_OP_EXP, in, NULL);
	ret(&x, e);
	x.f->g.nodes[e].type.dims[1].coef = 5;
	ck_assert(!pass_infer(x.m));
	ck_assert_int_eq(x.ctx.n_errors, 1);
	ck_assert_str_eq(tu_graph_diag(&x),
			 "attnc: error: @f %1 (exp): stored type f32[3, 5], "
			 "but its operands give f32[3, 4]\n");
	tu_graph_fini(&x);
}
END_TEST

/* ---- memory planning ----------------------------------------------------------- */

START_TEST(test_memplan_reuses_bytes_of_dead_blocks)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	pass_mem_block b[3] = {{100, 0, 1, 0}, {200, 1, 2, 0}, {100, 2, 3, 0}};
	bool ok;
	uint64_t total = pass_memplan_blocks(&x.ctx, b, 3, 64, &ok);
	ck_assert(ok);
	/* The largest first at 0; the first overlaps it, the last reuses
	 * the first's bytes once it is dead. */
	ck_assert_uint_eq(b[1].offset, 0);
	ck_assert_uint_eq(b[0].offset, 256);
	ck_assert_uint_eq(b[2].offset, 256);
	ck_assert_uint_eq(total, 384);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_memplan_fits_a_block_into_a_gap)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	/* A [0,4] 64 B, B [0,1] 64 B, C [0,4] 64 B, D [2,3] 64 B: D fits
	 * where B was, between two blocks alive with it. */
	pass_mem_block b[4] = {{64, 0, 4, 0},
			       {64, 0, 1, 0},
			       {64, 0, 4, 0},
			       {64, 2, 3, 0}};
	bool ok;
	uint64_t total = pass_memplan_blocks(&x.ctx, b, 4, 64, &ok);
	ck_assert(ok);
	ck_assert_uint_eq(b[0].offset, 0);
	ck_assert_uint_eq(b[1].offset, 64);
	ck_assert_uint_eq(b[2].offset, 128);
	ck_assert_uint_eq(b[3].offset, 64);
	ck_assert_uint_eq(total, 192);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_memplan_never_overlaps_live_buffers)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	enum { N = 40 };
	pass_mem_block b[N];
	for (uint32_t i = 0; i < N; i++)
		b[i] = (pass_mem_block){(i * 37) % 300 + 1, i % 7,
					i % 7 + i % 5, 0};
	bool ok;
	uint64_t total = pass_memplan_blocks(&x.ctx, b, N, 16, &ok);
	ck_assert(ok);
	for (uint32_t i = 0; i < N; i++) {
		ck_assert_uint_eq(b[i].offset % 16, 0);
		ck_assert(b[i].offset + b[i].size <= total);
		for (uint32_t j = 0; j < i; j++) {
			bool in_time = b[i].start <= b[j].end &&
				       b[j].start <= b[i].end;
			bool in_space = b[i].offset < b[j].offset + b[j].size &&
					b[j].offset < b[i].offset + b[i].size;
			ck_assert_msg(!(in_time && in_space), "%u and %u", i, j);
		}
	}
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_memplan_peak_is_the_most_bytes_alive_at_one_step)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	/* Alive at step 0: 100; 1: 100 + 200; 2: 200 + 50 + 0; 3: 50 +
	 * 120; 4: 120 + 300. Ends are included. */
	pass_mem_block b[5] = {{100, 0, 1, 0},
			       {200, 1, 2, 0},
			       {50, 2, 3, 0},
			       {0, 2, 9, 0},
			       {120, 3, 4, 0}};
	uint64_t peak = 0;
	uint32_t at = 9;
	ck_assert(pass_memplan_peak(&x.ctx, b, 4, &peak, &at));
	ck_assert_uint_eq(peak, 300);
	ck_assert_uint_eq(at, 1);
	b[3] = (pass_mem_block){300, 4, 4, 0};
	ck_assert(pass_memplan_peak(&x.ctx, b, 5, &peak, &at));
	ck_assert_uint_eq(peak, 420);
	ck_assert_uint_eq(at, 4);
	ck_assert(pass_memplan_peak(&x.ctx, b, 0, &peak, &at));
	ck_assert_uint_eq(peak, 0);
	ck_assert_uint_eq(at, 0);
	/* The first fit reaches it on these blocks. */
	bool ok;
	ck_assert_uint_eq(pass_memplan_blocks(&x.ctx, b, 5, 4, &ok), 420);
	ck_assert(ok);
	tu_graph_fini(&x);
}
END_TEST

/* The first fit as it was written first, for reference: per block,
 * largest first, the placed blocks alive with it sorted by offset and
 * walked from the lowest up. */
typedef struct ref_item {
	uint64_t key;
	uint32_t start, index;
} ref_item;

static int ref_by_size(const void *pa, const void *pb)
{
	const ref_item *x = pa, *y = pb;
	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

static int ref_by_offset(const void *pa, const void *pb)
{
	const ref_item *x = pa, *y = pb;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

static uint64_t ref_round_up(uint64_t x, uint64_t align)
{
	return (x + align - 1) & ~(align - 1);
}

static uint64_t ref_first_fit(pass_mem_block *b, uint32_t n, uint64_t align)
{
	ref_item *order = malloc((n + 1) * sizeof *order);
	ref_item *live = malloc((n + 1) * sizeof *live);
	ck_assert(order && live);
	for (uint32_t i = 0; i < n; i++)
		order[i] = (ref_item){b[i].size, b[i].start, i};
	qsort(order, n, sizeof *order, ref_by_size);
	uint64_t total = 0;
	for (uint32_t k = 0; k < n; k++) {
		pass_mem_block *x = &b[order[k].index];
		uint32_t n_live = 0;
		for (uint32_t j = 0; j < k; j++) {
			const pass_mem_block *o = &b[order[j].index];
			if (o->start <= x->end && x->start <= o->end)
				live[n_live++] = (ref_item){o->offset, 0,
							    order[j].index};
		}
		qsort(live, n_live, sizeof *live, ref_by_offset);
		uint64_t at = 0;
		for (uint32_t i = 0; i < n_live; i++) {
			const pass_mem_block *o = &b[live[i].index];
			if (o->offset >= at + x->size)
				break;
			uint64_t end = ref_round_up(o->offset + o->size, align);
			if (end > at)
				at = end;
		}
		x->offset = at;
		uint64_t end = ref_round_up(at + x->size, align);
		if (end > total)
			total = end;
	}
	free(order);
	free(live);
	return total;
}

/* Plans b[0..n) both ways and asserts the same offsets and slab. */
static void assert_same_as_reference(tu_graph *x, pass_mem_block *b, uint32_t n,
				     uint64_t align)
{
	pass_mem_block *r = malloc((n + 1) * sizeof *r);
	ck_assert(r);
	memcpy(r, b, n * sizeof *b);
	bool ok;
	uint64_t total = pass_memplan_blocks(&x->ctx, b, n, align, &ok);
	ck_assert(ok);
	ck_assert_uint_eq(total, ref_first_fit(r, n, align));
	for (uint32_t i = 0; i < n; i++)
		ck_assert_msg(b[i].offset == r[i].offset,
			      "block %u of %u: %llu, reference %llu", i, n,
			      (unsigned long long)b[i].offset,
			      (unsigned long long)r[i].offset);
	free(r);
}

static uint32_t lcg_next(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

START_TEST(test_memplan_places_random_blocks_as_the_reference_does)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	uint32_t seed = 12345;
	pass_mem_block *b = malloc(600 * sizeof *b);
	ck_assert(b);
	for (uint32_t round = 0; round < 300; round++) {
		uint32_t n = 1 + lcg_next(&seed) % 600;
		uint32_t steps = 1 + lcg_next(&seed) % 400;
		uint32_t n_sizes = 1 + lcg_next(&seed) % 12;
		/* Few distinct sizes make ties; zero sizes and lifetimes of
		 * one step included. */
		for (uint32_t i = 0; i < n; i++) {
			uint32_t s = lcg_next(&seed) % steps;
			uint32_t len = lcg_next(&seed) % 4 == 0
					       ? lcg_next(&seed) % steps
					       : lcg_next(&seed) % 8;
			uint64_t size = (lcg_next(&seed) % n_sizes) * 48 +
					lcg_next(&seed) % 3 * 7;
			b[i] = (pass_mem_block){size, s, s + len, 0};
		}
		assert_same_as_reference(&x, b, n, round % 2 ? 64 : 4);
	}
	free(b);
	tu_graph_fini(&x);
}
END_TEST

/* A deep network's training step: each layer's forward activations live
 * until its backward step (nested lifetimes, stacked in the slab), with
 * short temporaries in both passes. */
START_TEST(test_memplan_places_deep_nested_blocks_as_the_reference_does)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	enum { LAYERS = 300, PER = 6 };
	uint32_t n = 0, steps = 2 * LAYERS * PER, seed = 7;
	pass_mem_block *b = malloc(3 * LAYERS * PER * sizeof *b);
	ck_assert(b);
	for (uint32_t l = 0; l < LAYERS; l++)
		for (uint32_t j = 0; j < PER; j++) {
			uint32_t t = l * PER + j;
			uint64_t size = (j % 3 + 1) * 4096;
			b[n++] = (pass_mem_block){size, t, steps - 1 - t, 0};
			b[n++] = (pass_mem_block){size / 2 + j * 64, t,
						  t + 1 + j % 2, 0};
			uint32_t u = steps - 1 - t;
			b[n++] = (pass_mem_block){lcg_next(&seed) % 9000, u,
						  u + lcg_next(&seed) % 3, 0};
		}
	assert_same_as_reference(&x, b, n, 64);
	free(b);
	tu_graph_fini(&x);
}
END_TEST

/* in -> exp -> tanh -> sigmoid: the sigmoid reuses the exp's bytes. */
START_TEST(test_memplan_func_plans_a_chain_in_two_buffers)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 1, 256));
	ir_id e = op1(&x, IR_OP_EXP, in, NULL);
	ir_id t = op1(&x, IR_OP_TANH, e, NULL);
	ret(&x, op1(&x, IR_OP_SIGMOID, t, NULL));
	pass_memplan plan;
	ck_assert(pass_memplan_func(x.m, x.f, NULL, &plan));
	ck_assert_uint_eq(plan.total_bytes, 2048);
	ck_assert_uint_eq(plan.offset[0], PASS_MEMPLAN_NONE);
	ck_assert_uint_eq(plan.offset[1], 0);
	ck_assert_uint_eq(plan.offset[2], 1024);
	ck_assert_uint_eq(plan.offset[3], 0);
	pass_memplan_fini(&x.ctx, &plan);
	tu_graph_fini(&x);
}
END_TEST

/* A reshape of exp's result keeps exp's buffer alive for its reader. */
START_TEST(test_memplan_func_keeps_a_viewed_buffer_alive)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	ir_id in = tu_input(&x, tu_type(IR_F32, 1, 256));
	ir_id e = op1(&x, IR_OP_EXP, in, NULL); /* 1 */
	ir_id r = to_type(&x, IR_OP_RESHAPE, e,
			  tu_type(IR_F32, 2, 16, 16)); /* 2 */
	ir_id t = op1(&x, IR_OP_TANH, in, NULL);       /* 3 */
	ir_id s = op1(&x, IR_OP_SIGMOID, r, NULL);     /* 4 */
	ret(&x, op2(&x, IR_OP_ADD, s,
		    to_type(&x, IR_OP_RESHAPE, t, tu_type(IR_F32, 2, 16, 16)),
		    NULL));
	pass_memplan plan;
	ck_assert(pass_memplan_func(x.m, x.f, NULL, &plan));
	ck_assert_uint_eq(plan.storage[2], 1);
	ck_assert_uint_eq(plan.offset[2], plan.offset[1]);
	ck_assert_uint_eq(plan.storage[5], 3);
	/* exp [1,4] and tanh [3,6] overlap, so do sigmoid [4,6] and both;
	 * the add [6,7] may take exp's bytes. */
	ck_assert_uint_ne(plan.offset[1], plan.offset[3]);
	ck_assert_uint_ne(plan.offset[4], plan.offset[1]);
	ck_assert_uint_ne(plan.offset[4], plan.offset[3]);
	ck_assert_uint_eq(plan.offset[6], plan.offset[1]);
	ck_assert_uint_eq(plan.total_bytes, 3 * 1024);
	pass_memplan_fini(&x.ctx, &plan);
	tu_graph_fini(&x);
}
END_TEST

/* ---- stats ---------------------------------------------------------------------- */

START_TEST(test_stats_prints_sorted_ops_kernels_and_planned_bytes)
{
	tu_graph x;
	tu_graph_init(&x, 8);
	int32_t sym = ir_module_add_sym(x.m, "B", (ir_loc){0});
	x.m->syms[sym].fallback = 8;
	ir_type tx = tu_type(IR_F32, 2, 0, 4);
	tx.dims[0] = (ir_dim){1, sym};
	ir_id in = tu_input(&x, tx);
	ir_id w = param(&x, "W", tu_type(IR_F32, 2, 4, 4));
	ir_id mm = op2(&x, IR_OP_MATMUL, in, w, &(ir_attr){.matmul = {0}});
	ir_type flat = {.dtype = IR_F32, .rank = 1, .dims = {{4, sym}}};
	ir_id r = to_type(&x, IR_OP_RESHAPE, mm, flat);
	ret(&x, op1(&x, IR_OP_TANH, r, NULL));
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	pass_stats_print(x.m, NULL, out);
	fclose(out);
	/* B = 8: matmul's 128 bytes live until tanh reads the reshape, so
	 * tanh's 128 go above them. */
	ck_assert_str_eq(buf, "{\"ops\": {\"input\": 1, \"matmul\": 1, "
			      "\"param\": 1, \"reshape\": 1, \"tanh\": 1}, "
			      "\"kernels\": 2, \"planned_bytes\": 256, "
			      "\"nodes\": 5, \"params\": 1, "
			      "\"param_elements\": 16, \"functions\": 1}\n");
	free(buf);
	tu_graph_fini(&x);
}
END_TEST

/* ---- allocation failures ------------------------------------------------------ */

/* An allocation hook that fails once `left` allocations have been made. */
typedef struct failing_alloc {
	int left;
} failing_alloc;

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

/* A graph that gives every pass work: a permute pair, x*1, duplicates, a
 * dead node, two equal constants. */
static void build_busy_graph(tu_graph *x)
{
	ir_id in = tu_input(x, tu_type(IR_F32, 2, 2, 4));
	ir_id p = permute(x, permute(x, in, 2, 1, 0), 2, 1, 0);
	ir_id one = tu_const(x, tu_type(IR_F32, 1, 4), ones4);
	ir_id one2 = tu_const(x, tu_type(IR_F32, 1, 4), ones4);
	ir_id m = op2(x, IR_OP_MUL, p, one, NULL);
	ir_id e1 = op1(x, IR_OP_EXP, m, NULL);
	ir_id e2 = op1(x, IR_OP_EXP, m, NULL);
	op1(x, IR_OP_TANH, e1, NULL);
	ret(x, op2(x, IR_OP_ADD, op2(x, IR_OP_MUL, e1, one2, NULL), e2, NULL));
}

/* Every pass, failing at each allocation in turn, reports "out of
 * memory" and returns false exactly when an allocation failed; it never
 * crashes or leaks (the sanitizers watch). */
START_TEST(test_passes_report_allocation_failures)
{
	static const pass_fn passes[] = {pass_simplify, pass_cse, pass_dce};
	for (size_t p = 0; p < sizeof passes / sizeof passes[0]; p++) {
		for (int k = 0;; k++) {
			tu_graph x;
			tu_graph_init(&x, 8);
			build_busy_graph(&x);
			failing_alloc fa = {k};
			x.ctx.alloc = fail_after;
			x.ctx.alloc_ud = &fa;
			bool ok = passes[p](x.m);
			bool done = fa.left >= 0;
			if (!ok)
				ck_assert_ptr_nonnull(strstr(tu_graph_diag(&x),
							     "out of memory"));
			ck_assert(ok == done);
			if (ok)
				ck_assert(ir_module_verify(x.m));
			tu_graph_fini(&x);
			if (done)
				break;
		}
	}
}
END_TEST

START_TEST(test_memplan_reports_allocation_failures)
{
	for (int k = 0;; k++) {
		tu_graph x;
		tu_graph_init(&x, 8);
		build_busy_graph(&x);
		failing_alloc fa = {k};
		x.ctx.alloc = fail_after;
		x.ctx.alloc_ud = &fa;
		pass_memplan plan;
		bool ok = pass_memplan_func(x.m, x.f, NULL, &plan);
		bool done = fa.left >= 0;
		if (ok)
			pass_memplan_fini(&x.ctx, &plan);
		else
			ck_assert_ptr_nonnull(
				strstr(tu_graph_diag(&x), "out of memory"));
		ck_assert(ok == done);
		tu_graph_fini(&x);
		if (done)
			break;
	}
}
END_TEST

static Suite *passes_suite(void)
{
	Suite *s = suite_create("passes");
	TCase *simp = tcase_create("simplify");
	tcase_add_test(simp, test_simplify_composes_nested_permutes);
	tcase_add_test(simp,
		       test_simplify_removes_permutes_that_compose_to_identity);
	tcase_add_test(simp, test_simplify_merges_nested_reshapes);
	tcase_add_test(simp,
		       test_simplify_removes_reshape_back_to_the_same_type);
	tcase_add_test(simp, test_simplify_drops_unit_arithmetic);
	tcase_add_test(simp, test_simplify_drops_multiply_by_scalar_one);
	tcase_add_test(simp,
		       test_simplify_keeps_unit_arithmetic_that_broadcasts_x);
	tcase_add_test(simp,
		       test_simplify_keeps_non_unit_and_non_commuted_arithmetic);
	tcase_add_test(simp, test_simplify_cancels_double_negation_only);
	tcase_add_test(simp, test_simplify_turns_transposes_into_matmul_flags);
	tcase_add_test(simp, test_simplify_toggles_a_set_matmul_flag);
	tcase_add_test(
		simp,
		test_simplify_keeps_permutes_that_do_not_transpose_for_matmul);
	tcase_add_test(simp,
		       test_simplify_drops_cast_and_broadcast_to_the_same_type);
	tcase_add_test(simp,
		       test_simplify_drops_dropout_with_p_0_and_keeps_the_others);
	suite_add_tcase(s, simp);

	TCase *cse = tcase_create("cse");
	tcase_add_test(cse, test_cse_merges_duplicate_chains);
	tcase_add_test(cse, test_cse_keeps_nodes_whose_attributes_differ);
	tcase_add_test(cse, test_cse_ignores_bytes_outside_the_live_attribute);
	tcase_add_test(cse, test_cse_merges_identical_constants_and_params);
	tcase_add_test(cse, test_cse_never_merges_arguments);
	suite_add_tcase(s, cse);

	TCase *dce = tcase_create("dce");
	tcase_add_test(dce, test_dce_removes_dead_nodes_and_keeps_unused_inputs);
	tcase_add_test(dce,
		       test_dce_drops_unused_constants_and_renumbers_examples);
	tcase_add_test(dce, test_compact_replaces_uses_through_chains);
	suite_add_tcase(s, dce);

	TCase *inf = tcase_create("infer");
	tcase_add_test(inf, test_infer_accepts_a_well_typed_graph);
	tcase_add_test(inf, test_infer_reports_a_stored_type_that_differs);
	suite_add_tcase(s, inf);

	TCase *mem = tcase_create("memplan");
	tcase_add_test(mem, test_memplan_reuses_bytes_of_dead_blocks);
	tcase_add_test(mem, test_memplan_fits_a_block_into_a_gap);
	tcase_add_test(mem, test_memplan_never_overlaps_live_buffers);
	tcase_add_test(mem,
		       test_memplan_peak_is_the_most_bytes_alive_at_one_step);
	tcase_add_test(mem,
		       test_memplan_places_random_blocks_as_the_reference_does);
	tcase_add_test(mem,
		       test_memplan_places_deep_nested_blocks_as_the_reference_does);
	tcase_add_test(mem, test_memplan_func_plans_a_chain_in_two_buffers);
	tcase_add_test(mem, test_memplan_func_keeps_a_viewed_buffer_alive);
	tcase_add_test(mem,
		       test_stats_prints_sorted_ops_kernels_and_planned_bytes);
	suite_add_tcase(s, mem);

	TCase *oom = tcase_create("oom");
	tcase_add_test(oom, test_passes_report_allocation_failures);
	tcase_add_test(oom, test_memplan_reports_allocation_failures);
	suite_add_tcase(s, oom);
	return s;
}

int main(void)
{
	return tu_run_suite(passes_suite());
}
