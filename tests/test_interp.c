/*
 * test_interp.c - the reference interpreter's elementwise, matmul,
 * reduction and layout ops against hand-computed values, broadcasting
 * corners included.
 */
#include "test_interp.h"
#include "testutil.h"

/* ---- elementwise ---------------------------------------------------------- */

START_TEST(test_add_broadcasts_size_one_dims)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2, 1), F32S(10, 20));
	ir_id b = ti_cf(&x, SHAPE(1, 3), F32S(1, 2, 3));
	ti_expect(&x, ti_op2(&x, IR_OP_ADD, a, b, NULL), SHAPE(2, 3),
		  DBL(11, 12, 13, 21, 22, 23), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_add_broadcasts_rank_zero_and_lower_rank)
{
	ti_fx x;
	ti_init(&x);
	ir_id s = ti_cf(&x, SCALAR, F32S(100));
	ir_id v = ti_cf(&x, SHAPE(3), F32S(1, 2, 3));
	ir_id m = ti_cf(&x, SHAPE(2, 3), F32S(0, 0, 0, 10, 10, 10));
	ir_id sum = ti_op2(&x, IR_OP_ADD, ti_op2(&x, IR_OP_ADD, m, v, NULL), s,
			   NULL);
	ti_expect(&x, sum, SHAPE(2, 3), DBL(101, 102, 103, 111, 112, 113), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_rank_zero_operands_give_rank_zero_result)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SCALAR, F32S(3));
	ir_id b = ti_cf(&x, SCALAR, F32S(4));
	ti_expect(&x, ti_op2(&x, IR_OP_MUL, a, b, NULL), SCALAR, DBL(12), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_binary_ops_compute_hand_values)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(3), F32S(6, -2, 0.5f));
	ir_id b = ti_cf(&x, SHAPE(3), F32S(3, 4, 2));
	ti_expect(&x, ti_op2(&x, IR_OP_SUB, a, b, NULL), SHAPE(3),
		  DBL(3, -6, -1.5), 0);
	ti_expect(&x, ti_op2(&x, IR_OP_DIV, a, b, NULL), SHAPE(3),
		  DBL(2, -0.5, 0.25), 0);
	ti_expect(&x, ti_op2(&x, IR_OP_POW, a, b, NULL), SHAPE(3),
		  DBL(216, 16, 0.25), 0);
	ti_expect(&x, ti_op2(&x, IR_OP_MAXIMUM, a, b, NULL), SHAPE(3),
		  DBL(6, 4, 2), 0);
	ti_expect(&x, ti_op2(&x, IR_OP_MINIMUM, a, b, NULL), SHAPE(3),
		  DBL(3, -2, 0.5), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_maximum_propagates_nan)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2), F32S(NAN, 1));
	ir_id b = ti_cf(&x, SHAPE(2), F32S(5, NAN));
	interp_tensor r;
	ck_assert(ti_run(&x, ti_op2(&x, IR_OP_MAXIMUM, a, b, NULL), &r));
	ck_assert(isnan(interp_tensor_get(&r, 0)));
	ck_assert(isnan(interp_tensor_get(&r, 1)));
	interp_tensor_fini(&x.ctx, &r);
	ti_fini(&x);
}
END_TEST

START_TEST(test_float_division_by_zero_gives_infinity)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2), F32S(1, -1));
	ir_id b = ti_cf(&x, SHAPE(2), F32S(0, 0));
	ti_expect(&x, ti_op2(&x, IR_OP_DIV, a, b, NULL), SHAPE(2),
		  DBL(INFINITY, -INFINITY), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_integer_arithmetic_stays_integer_and_wraps)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_ci(&x, SHAPE(3), I32S(7, -7, 2147483647));
	ir_id b = ti_ci(&x, SHAPE(3), I32S(2, 2, 1));
	interp_tensor r;
	ck_assert(ti_run(&x, ti_op2(&x, IR_OP_ADD, a, b, NULL), &r));
	ck_assert_int_eq(r.dtype, IR_I32);
	ck_assert_int_eq(((int32_t *)r.data)[0], 9);
	ck_assert_int_eq(((int32_t *)r.data)[1], -5);
	ck_assert_int_eq(((int32_t *)r.data)[2], INT32_MIN);
	interp_tensor_fini(&x.ctx, &r);
	ti_expect(&x, ti_op2(&x, IR_OP_MUL, a, b, NULL), SHAPE(3),
		  DBL(14, -14, 2147483647), 0);
	ti_expect(&x, ti_op1(&x, IR_OP_NEG, a, NULL), SHAPE(3),
		  DBL(-7, 7, -2147483647), 0);
	ti_expect(&x, ti_op1(&x, IR_OP_ABS, a, NULL), SHAPE(3),
		  DBL(7, 7, 2147483647), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_comparisons_give_i32_zero_or_one)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(3), F32S(1, 2, 3));
	ir_id b = ti_cf(&x, SCALAR, F32S(2));
	ir_id lt = ti_op2(&x, IR_OP_LT, a, b, NULL);
	ck_assert_int_eq(x.f->g.nodes[lt].type.dtype, IR_I32);
	ti_expect(&x, lt, SHAPE(3), DBL(1, 0, 0), 0);
	ti_expect(&x, ti_op2(&x, IR_OP_LE, a, b, NULL), SHAPE(3), DBL(1, 1, 0),
		  0);
	ti_expect(&x, ti_op2(&x, IR_OP_GT, a, b, NULL), SHAPE(3), DBL(0, 0, 1),
		  0);
	ti_expect(&x, ti_op2(&x, IR_OP_GE, a, b, NULL), SHAPE(3), DBL(0, 1, 1),
		  0);
	ti_expect(&x, ti_op2(&x, IR_OP_EQ, a, b, NULL), SHAPE(3), DBL(0, 1, 0),
		  0);
	ti_expect(&x, ti_op2(&x, IR_OP_NE, a, b, NULL), SHAPE(3), DBL(1, 0, 1),
		  0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_select_picks_by_condition_with_broadcast)
{
	ti_fx x;
	ti_init(&x);
	ir_id c = ti_ci(&x, SHAPE(2, 1), I32S(1, 0));
	ir_id a = ti_cf(&x, SHAPE(3), F32S(1, 2, 3));
	ir_id b = ti_cf(&x, SCALAR, F32S(-1));
	ti_expect(&x, ti_op3(&x, IR_OP_SELECT, c, a, b, NULL), SHAPE(2, 3),
		  DBL(1, 2, 3, -1, -1, -1), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_cast_truncates_toward_zero)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(5), F32S(-1.7f, 1.7f, 2.5f, -0.2f, NAN));
	ir_type ti = {.dtype = IR_I32};
	ir_id c = ti_node(&x, IR_OP_CAST, &a, 1, NULL, &ti);
	ti_expect(&x, c, SHAPE(5), DBL(-1, 1, 2, 0, INT32_MIN), 0);
	ir_id n = ti_ci(&x, SHAPE(2), I32S(-3, 16777217));
	ir_type tf = {.dtype = IR_F32};
	ir_id f = ti_node(&x, IR_OP_CAST, &n, 1, NULL, &tf);
	/* 16777217 is not a float: it rounds to 16777216 as in PyTorch. */
	ti_expect(&x, f, SHAPE(2), DBL(-3, 16777216), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_unary_ops_compute_hand_values)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(3), F32S(-1, 0, 4));
	ir_id p = ti_cf(&x, SHAPE(2), F32S(1, 4));
	double tol = 1e-6;
	ti_expect(&x, ti_op1(&x, IR_OP_NEG, a, NULL), SHAPE(3), DBL(1, 0, -4),
		  0);
	ti_expect(&x, ti_op1(&x, IR_OP_EXP, a, NULL), SHAPE(3),
		  DBL(0.36787944, 1, 54.59815), 1e-5);
	ti_expect(&x, ti_op1(&x, IR_OP_LOG, p, NULL), SHAPE(2),
		  DBL(0, 1.3862944), tol);
	ti_expect(&x, ti_op1(&x, IR_OP_TANH, a, NULL), SHAPE(3),
		  DBL(-0.76159416, 0, 0.99932930), tol);
	ti_expect(&x, ti_op1(&x, IR_OP_SIGMOID, a, NULL), SHAPE(3),
		  DBL(0.26894142, 0.5, 0.98201379), tol);
	ti_expect(&x, ti_op1(&x, IR_OP_RELU, a, NULL), SHAPE(3), DBL(0, 0, 4),
		  0);
	ti_expect(&x, ti_op1(&x, IR_OP_SIN, a, NULL), SHAPE(3),
		  DBL(-0.84147098, 0, -0.75680250), tol);
	ti_expect(&x, ti_op1(&x, IR_OP_COS, a, NULL), SHAPE(3),
		  DBL(0.54030231, 1, -0.65364362), tol);
	ti_expect(&x, ti_op1(&x, IR_OP_SQRT, p, NULL), SHAPE(2), DBL(1, 2), 0);
	ti_expect(&x, ti_op1(&x, IR_OP_ABS, a, NULL), SHAPE(3), DBL(1, 0, 4), 0);
	ti_fini(&x);
}
END_TEST

/* ---- matmul ------------------------------------------------------------------ */

START_TEST(test_matmul_multiplies_2x3_by_3x2)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2, 3), F32S(1, 2, 3, 4, 5, 6));
	ir_id b = ti_cf(&x, SHAPE(3, 2), F32S(7, 8, 9, 10, 11, 12));
	ir_attr mm = {.matmul = {false, false}};
	ti_expect(&x, ti_op2(&x, IR_OP_MATMUL, a, b, &mm), SHAPE(2, 2),
		  DBL(58, 64, 139, 154), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_matmul_transposes_either_operand)
{
	ti_fx x;
	ti_init(&x);
	/* a^T with a = [[1, 4], [2, 5], [3, 6]] is [[1, 2, 3], [4, 5, 6]]. */
	ir_id at = ti_cf(&x, SHAPE(3, 2), F32S(1, 4, 2, 5, 3, 6));
	ir_id bt = ti_cf(&x, SHAPE(2, 3), F32S(7, 9, 11, 8, 10, 12));
	ir_id b = ti_cf(&x, SHAPE(3, 2), F32S(7, 8, 9, 10, 11, 12));
	ir_attr ta = {.matmul = {true, false}}, tb = {.matmul = {false, true}},
		tt = {.matmul = {true, true}};
	ti_expect(&x, ti_op2(&x, IR_OP_MATMUL, at, b, &ta), SHAPE(2, 2),
		  DBL(58, 64, 139, 154), 0);
	ir_id a = ti_cf(&x, SHAPE(2, 3), F32S(1, 2, 3, 4, 5, 6));
	ti_expect(&x, ti_op2(&x, IR_OP_MATMUL, a, bt, &tb), SHAPE(2, 2),
		  DBL(58, 64, 139, 154), 0);
	ti_expect(&x, ti_op2(&x, IR_OP_MATMUL, at, bt, &tt), SHAPE(2, 2),
		  DBL(58, 64, 139, 154), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_matmul_broadcasts_batch_dims)
{
	ti_fx x;
	ti_init(&x);
	/* [2, 1, 2] @ [2, 1] : the rank-2 right operand serves both batches. */
	ir_id a = ti_cf(&x, SHAPE(2, 1, 2), F32S(1, 2, 3, 4));
	ir_id b = ti_cf(&x, SHAPE(2, 1), F32S(10, 100));
	ir_attr mm = {0};
	ti_expect(&x, ti_op2(&x, IR_OP_MATMUL, a, b, &mm), SHAPE(2, 1, 1),
		  DBL(210, 430), 0);
	/* [2, 1, 1, 2] @ [3, 2, 1]: batch dims [2, 1] and [3] give [2, 3]. */
	ir_id c = ti_cf(&x, SHAPE(2, 1, 1, 2), F32S(1, 0, 0, 1));
	ir_id d = ti_cf(&x, SHAPE(3, 2, 1), F32S(1, 2, 3, 4, 5, 6));
	ti_expect(&x, ti_op2(&x, IR_OP_MATMUL, c, d, &mm), SHAPE(2, 3, 1, 1),
		  DBL(1, 3, 5, 2, 4, 6), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_bmm_of_ones_gives_fours)
{
	ti_fx x;
	ti_init(&x);
	float ones[48];
	for (int i = 0; i < 48; i++)
		ones[i] = 1;
	ir_id a = ti_cf(&x, SHAPE(2, 1, 4), ones);
	ir_id b = ti_cf(&x, SHAPE(2, 4, 6), ones);
	ir_attr mm = {0};
	double fours[12];
	for (int i = 0; i < 12; i++)
		fours[i] = 4;
	ti_expect(&x, ti_op2(&x, IR_OP_MATMUL, a, b, &mm), SHAPE(2, 1, 6),
		  fours, 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_matmul_with_mismatched_operands_is_an_error)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2, 3), F32S(1, 2, 3, 4, 5, 6));
	ir_id b = ti_cf(&x, SHAPE(3, 1), F32S(1, 1, 1));
	ir_attr mm = {0};
	ir_id p = ti_op2(&x, IR_OP_MATMUL, a, b, &mm);
	/* Values that do not fit the node's operand types. */
	int64_t d[] = {2, 2};
	interp_tensor args[2], r;
	args[0] = ti_tensor(&x, IR_F32, 2, d, F32S(1, 2, 3, 4));
	args[1] = ti_tensor(&x, IR_F32, 2, (int64_t[]){3, 1}, F32S(1, 1, 1));
	interp_opts o = {0};
	ck_assert(!interp_eval_node(&x.ctx, x.m, &x.f->g, p, &o, NULL, args, &r));
	ck_assert_ptr_nonnull(
		strstr(ti_diag(&x),
		       "matmul: inner dimensions differ: [2, 2] @ [3, 1]"));
	interp_tensor_fini(&x.ctx, &args[0]);
	interp_tensor_fini(&x.ctx, &args[1]);
	ti_fini(&x);
}
END_TEST

/* ---- reductions ---------------------------------------------------------------- */

static ir_attr axes(uint32_t mask, bool keepdim)
{
	return (ir_attr){.reduce = {mask, keepdim}};
}

START_TEST(test_sum_mean_max_reduce_the_axes_of_the_mask)
{
	ti_fx x;
	ti_init(&x);
	/* [[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]] */
	ir_id a = ti_cf(&x, SHAPE(2, 2, 3),
			F32S(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12));
	ir_attr r0 = axes(1, false), r2k = axes(4, true), r02 = axes(5, false),
		all = axes(7, false);
	ti_expect(&x, ti_op1(&x, IR_OP_SUM, a, &r0), SHAPE(2, 3),
		  DBL(8, 10, 12, 14, 16, 18), 0);
	ti_expect(&x, ti_op1(&x, IR_OP_SUM, a, &r2k), SHAPE(2, 2, 1),
		  DBL(6, 15, 24, 33), 0);
	ti_expect(&x, ti_op1(&x, IR_OP_SUM, a, &r02), SHAPE(2), DBL(30, 48), 0);
	ti_expect(&x, ti_op1(&x, IR_OP_MEAN, a, &all), SCALAR, DBL(6.5), 0);
	ti_expect(&x, ti_op1(&x, IR_OP_MEAN, a, &r2k), SHAPE(2, 2, 1),
		  DBL(2, 5, 8, 11), 0);
	ti_expect(&x, ti_op1(&x, IR_OP_MAX, a, &r0), SHAPE(2, 3),
		  DBL(7, 8, 9, 10, 11, 12), 0);
	ti_expect(&x, ti_op1(&x, IR_OP_MAX, a, &r02), SHAPE(2), DBL(9, 12), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_integer_sum_and_max_stay_integer)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_ci(&x, SHAPE(2, 2), I32S(-5, 3, 8, -9));
	ir_attr r1 = axes(2, false);
	interp_tensor r;
	ck_assert(ti_run(&x, ti_op1(&x, IR_OP_SUM, a, &r1), &r));
	ck_assert_int_eq(r.dtype, IR_I32);
	ck_assert_int_eq(((int32_t *)r.data)[0], -2);
	ck_assert_int_eq(((int32_t *)r.data)[1], -1);
	interp_tensor_fini(&x.ctx, &r);
	ti_expect(&x, ti_op1(&x, IR_OP_MAX, a, &r1), SHAPE(2), DBL(3, 8), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_argmax_takes_the_first_maximum_on_ties)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2, 4), F32S(1, 5, 5, 2, 7, 0, 7, 7));
	ir_attr last = axes(2, false), first = axes(1, true);
	ir_id am = ti_op1(&x, IR_OP_ARGMAX, a, &last);
	ck_assert_int_eq(x.f->g.nodes[am].type.dtype, IR_I32);
	ti_expect(&x, am, SHAPE(2), DBL(1, 0), 0);
	ti_expect(&x, ti_op1(&x, IR_OP_ARGMAX, a, &first), SHAPE(1, 4),
		  DBL(1, 0, 1, 1), 0);
	ti_fini(&x);
}
END_TEST

/* torch.argmin: the first minimum; a NaN counts as the minimum. */
START_TEST(test_argmin_takes_the_first_minimum_and_a_nan_wins)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(3, 4),
			F32S(3, 0, 0, 2, 7, NAN, -1, NAN, -0.0f, 0, 5, 9));
	ir_attr last = axes(2, false), first = axes(1, true);
	ir_id am = ti_op1(&x, IR_OP_ARGMIN, a, &last);
	ck_assert_int_eq(x.f->g.nodes[am].type.dtype, IR_I32);
	ti_expect(&x, am, SHAPE(3), DBL(1, 1, 0), 0);
	ti_expect(&x, ti_op1(&x, IR_OP_ARGMIN, a, &first), SHAPE(1, 4),
		  DBL(2, 1, 1, 1), 0);
	ti_fini(&x);
}
END_TEST

/* ---- layout -------------------------------------------------------------------- */

START_TEST(test_reshape_keeps_row_major_order)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2, 3), F32S(1, 2, 3, 4, 5, 6));
	ir_type t = ti_type(IR_F32, SHAPE(3, 1, 2));
	ti_expect(&x, ti_node(&x, IR_OP_RESHAPE, &a, 1, NULL, &t),
		  SHAPE(3, 1, 2), DBL(1, 2, 3, 4, 5, 6), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_broadcast_expands_size_one_and_new_leading_dims)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2, 1), F32S(1, 2));
	ir_type t = ti_type(IR_F32, SHAPE(2, 2, 3));
	ti_expect(&x, ti_node(&x, IR_OP_BROADCAST, &a, 1, NULL, &t),
		  SHAPE(2, 2, 3), DBL(1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_permute_reads_input_axis_perm_i)
{
	ti_fx x;
	ti_init(&x);
	/* a[i][j][k] = 100 i + 10 j + k over [2, 3, 2] */
	float v[12];
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++)
			for (int k = 0; k < 2; k++)
				v[i * 6 + j * 2 + k] = (float)(100 * i +
							       10 * j + k);
	ir_id a = ti_cf(&x, SHAPE(2, 3, 2), v);
	ir_attr p = {.permute = {{2, 0, 1}}};
	/* out[k][i][j] = a[i][j][k], shape [2, 2, 3] */
	ti_expect(&x, ti_op1(&x, IR_OP_PERMUTE, a, &p), SHAPE(2, 2, 3),
		  DBL(0, 10, 20, 100, 110, 120, 1, 11, 21, 101, 111, 121), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_slice_takes_start_end_step_along_an_axis)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2, 5),
			F32S(0, 1, 2, 3, 4, 10, 11, 12, 13, 14));
	ir_attr s = {.slice = {1, 1, 5, 2}};
	ti_expect(&x, ti_op1(&x, IR_OP_SLICE, a, &s), SHAPE(2, 2),
		  DBL(1, 3, 11, 13), 0);
	ir_attr e = {.slice = {1, 2, 2, 1}};
	ti_expect(&x, ti_op1(&x, IR_OP_SLICE, a, &e), SHAPE(2, 0), NULL, 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_concat_joins_operands_along_an_axis)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2, 1), F32S(1, 2));
	ir_id b = ti_cf(&x, SHAPE(2, 2), F32S(3, 4, 5, 6));
	ir_id c = ti_cf(&x, SHAPE(2, 1), F32S(7, 8));
	ir_attr ax1 = {.axis = 1}, ax0 = {.axis = 0};
	ir_id args[] = {a, b, c};
	ti_expect(&x, ti_node(&x, IR_OP_CONCAT, args, 3, &ax1, NULL),
		  SHAPE(2, 4), DBL(1, 3, 4, 7, 2, 5, 6, 8), 0);
	ir_id rows[] = {b, b};
	ti_expect(&x, ti_node(&x, IR_OP_CONCAT, rows, 2, &ax0, NULL),
		  SHAPE(4, 2), DBL(3, 4, 5, 6, 3, 4, 5, 6), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_repeat_tiles_the_whole_tensor)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(1, 2), F32S(1, 2));
	ir_attr r = {.repeat = {{2, 3}}};
	ti_expect(&x, ti_op1(&x, IR_OP_REPEAT, a, &r), SHAPE(2, 6),
		  DBL(1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_repeat_interleave_repeats_each_element_in_place)
{
	ti_fx x;
	ti_init(&x);
	ir_id v = ti_ci(&x, SHAPE(2), I32S(2, 3));
	ir_attr r = {.interleave = {0, 3}};
	ti_expect(&x, ti_op1(&x, IR_OP_REPEAT_INTERLEAVE, v, &r), SHAPE(6),
		  DBL(2, 2, 2, 3, 3, 3), 0);
	ir_id m = ti_cf(&x, SHAPE(2, 2), F32S(1, 2, 3, 4));
	ir_attr r1 = {.interleave = {1, 2}};
	ti_expect(&x, ti_op1(&x, IR_OP_REPEAT_INTERLEAVE, m, &r1), SHAPE(2, 4),
		  DBL(1, 1, 2, 2, 3, 3, 4, 4), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_sort_orders_each_line_ascending_with_nan_last)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2, 3), F32S(3, NAN, -1, 2, 0, 1));
	ir_attr last = {.axis = 1}, first = {.axis = 0};
	interp_tensor r;
	ck_assert(ti_run(&x, ti_op1(&x, IR_OP_SORT, a, &last), &r));
	ck_assert(interp_tensor_get(&r, 0) == -1 &&
		  interp_tensor_get(&r, 1) == 3);
	ck_assert(isnan(interp_tensor_get(&r, 2)));
	ck_assert(interp_tensor_get(&r, 3) == 0 && interp_tensor_get(&r, 5) == 2);
	interp_tensor_fini(&x.ctx, &r);
	ir_id b = ti_ci(&x, SHAPE(2, 2), I32S(5, 1, 2, 7));
	ti_expect(&x, ti_op1(&x, IR_OP_SORT, b, &first), SHAPE(2, 2),
		  DBL(2, 1, 5, 7), 0);
	ti_fini(&x);
}
END_TEST

/* Ties go in index order (a stable sort), -0 before +0, NaN last: row 0
 * sorts to 0 (at 1), 0 (at 3), 1 (at 0), 1 (at 2); row 1 to -0 (at 2),
 * +0 (at 1), 5 (at 3), NaN (at 0). Along axis 0, each column's two. */
START_TEST(test_sort_grad_sends_each_gradient_where_its_element_came_from)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2, 4), F32S(1, 0, 1, 0, NAN, 0.0f, -0.0f, 5));
	ir_id g = ti_cf(&x, SHAPE(2, 4), F32S(1, 2, 3, 4, 10, 20, 30, 40));
	ir_attr last = {.axis = 1}, first = {.axis = 0};
	ti_expect(&x, ti_op2(&x, IR_OP_SORT_GRAD, a, g, &last), SHAPE(2, 4),
		  DBL(3, 1, 4, 2, 40, 20, 10, 30), 0);
	/* columns: (1, NaN) keeps, (0, 0) keeps, (1, -0) swaps, (0, 5) keeps */
	ti_expect(&x, ti_op2(&x, IR_OP_SORT_GRAD, a, g, &first), SHAPE(2, 4),
		  DBL(1, 2, 30, 4, 10, 20, 3, 40), 0);
	ti_fini(&x);
}
END_TEST

static Suite *interp_suite(void)
{
	Suite *s = suite_create("interp");
	TCase *ew = tcase_create("elementwise");
	tcase_add_test(ew, test_add_broadcasts_size_one_dims);
	tcase_add_test(ew, test_add_broadcasts_rank_zero_and_lower_rank);
	tcase_add_test(ew, test_rank_zero_operands_give_rank_zero_result);
	tcase_add_test(ew, test_binary_ops_compute_hand_values);
	tcase_add_test(ew, test_maximum_propagates_nan);
	tcase_add_test(ew, test_float_division_by_zero_gives_infinity);
	tcase_add_test(ew, test_integer_arithmetic_stays_integer_and_wraps);
	tcase_add_test(ew, test_comparisons_give_i32_zero_or_one);
	tcase_add_test(ew, test_select_picks_by_condition_with_broadcast);
	tcase_add_test(ew, test_cast_truncates_toward_zero);
	tcase_add_test(ew, test_unary_ops_compute_hand_values);
	suite_add_tcase(s, ew);
	TCase *mm = tcase_create("matmul");
	tcase_add_test(mm, test_matmul_multiplies_2x3_by_3x2);
	tcase_add_test(mm, test_matmul_transposes_either_operand);
	tcase_add_test(mm, test_matmul_broadcasts_batch_dims);
	tcase_add_test(mm, test_bmm_of_ones_gives_fours);
	tcase_add_test(mm, test_matmul_with_mismatched_operands_is_an_error);
	suite_add_tcase(s, mm);
	TCase *rd = tcase_create("reduce");
	tcase_add_test(rd, test_sum_mean_max_reduce_the_axes_of_the_mask);
	tcase_add_test(rd, test_integer_sum_and_max_stay_integer);
	tcase_add_test(rd, test_argmax_takes_the_first_maximum_on_ties);
	tcase_add_test(rd, test_argmin_takes_the_first_minimum_and_a_nan_wins);
	suite_add_tcase(s, rd);
	TCase *ly = tcase_create("layout");
	tcase_add_test(ly, test_reshape_keeps_row_major_order);
	tcase_add_test(ly, test_broadcast_expands_size_one_and_new_leading_dims);
	tcase_add_test(ly, test_permute_reads_input_axis_perm_i);
	tcase_add_test(ly, test_slice_takes_start_end_step_along_an_axis);
	tcase_add_test(ly, test_concat_joins_operands_along_an_axis);
	tcase_add_test(ly, test_repeat_tiles_the_whole_tensor);
	tcase_add_test(ly, test_repeat_interleave_repeats_each_element_in_place);
	tcase_add_test(ly, test_sort_orders_each_line_ascending_with_nan_last);
	tcase_add_test(
		ly,
		test_sort_grad_sends_each_gradient_where_its_element_came_from);
	suite_add_tcase(s, ly);
	return s;
}

int main(void)
{
	return tu_run_suite(interp_suite());
}
