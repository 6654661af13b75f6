/*
 * test_interp_nonfinite.c - the interpreter's stop_at_nonfinite option,
 * which the training driver uses to find the op where a NaN or an
 * infinity first appeared: the first such node is reported at its
 * location and the run fails; without the option the same run succeeds.
 */
#include "test_interp.h"
#include "testutil.h"

/* f(x) = exp(-log(x) * 1000): log(0) is -inf first, then everything after
 * it is inf or nan. */
static ir_id build_log_chain(ti_fx *x)
{
	ir_type t = ti_type(IR_F32, SHAPE(3));
	ir_id in = ti_input(x, "x", &t);
	ir_id lg = ti_op1(x, IR_OP_LOG, in, NULL);
	ir_id k = ti_cf(x, SCALAR, F32S(-1000));
	return ti_op1(x, IR_OP_EXP, ti_op2(x, IR_OP_MUL, lg, k, NULL), NULL);
}

START_TEST(test_stop_at_nonfinite_reports_the_first_op_that_gives_one)
{
	ti_fx x;
	ti_init(&x);
	ir_id out = build_log_chain(&x);
	interp_tensor in = ti_tensor(&x, IR_F32, SHAPE(3), F32S(1, 0, 2)), r;
	interp_opts o = {.stop_at_nonfinite = true};
	ck_assert(!ti_run_opts(&x, out, &o, &in, &r));
	ck_assert_ptr_null(r.data);
	ck_assert_str_eq(ti_diag(&x),
			 "attnc: error: log gives -inf (element 1), "
			 "the run's first value that is not finite\n");
	ck_assert_int_eq(x.ctx.n_errors, 1);
	interp_tensor_fini(&x.ctx, &in);
	ti_fini(&x);
}
END_TEST

START_TEST(test_without_the_option_nonfinite_values_flow_through)
{
	ti_fx x;
	ti_init(&x);
	ir_id out = build_log_chain(&x);
	interp_tensor in = ti_tensor(&x, IR_F32, SHAPE(3), F32S(1, 0, 2)), r;
	interp_opts o = {0};
	ck_assert(ti_run_opts(&x, out, &o, &in, &r));
	ck_assert_double_eq(interp_tensor_get(&r, 0), 1);
	ck_assert(isinf(interp_tensor_get(&r, 1)));
	interp_tensor_fini(&x.ctx, &r);
	interp_tensor_fini(&x.ctx, &in);
	ti_fini(&x);
}
END_TEST

/* In float32 exp(100) overflows; in float64 it does not. */
START_TEST(test_an_overflow_is_found_in_float32_and_not_in_float64)
{
	ti_fx x;
	ti_init(&x);
	ir_type t = ti_type(IR_F32, SHAPE(2));
	ir_id in = ti_input(&x, "x", &t);
	ir_id out = ti_op1(&x, IR_OP_EXP, in, NULL);
	interp_tensor v = ti_tensor(&x, IR_F32, SHAPE(2), F32S(1, 100)), r;
	interp_opts o = {.stop_at_nonfinite = true};
	ck_assert(!ti_run_opts(&x, out, &o, &v, &r));
	ck_assert_ptr_nonnull(strstr(ti_diag(&x), "exp gives inf (element 1)"));
	o.is_f64 = true;
	ck_assert_msg(ti_run_opts(&x, out, &o, &v, &r), "%s", ti_diag(&x));
	ck_assert_double_eq_tol(interp_tensor_get(&r, 1), exp(100.0), 1e30);
	interp_tensor_fini(&x.ctx, &r);
	interp_tensor_fini(&x.ctx, &v);
	ti_fini(&x);
}
END_TEST

START_TEST(test_integer_results_and_finite_runs_pass_the_check)
{
	ti_fx x;
	ti_init(&x);
	ir_type t = ti_type(IR_F32, SHAPE(2));
	ir_id in = ti_input(&x, "x", &t);
	ir_id lt = ti_op2(&x, IR_OP_LT, in, ti_cf(&x, SCALAR, F32S(1.5f)), NULL);
	interp_tensor v = ti_tensor(&x, IR_F32, SHAPE(2), F32S(1, 2)), r;
	interp_opts o = {.stop_at_nonfinite = true};
	ck_assert_msg(ti_run_opts(&x, lt, &o, &v, &r), "%s", ti_diag(&x));
	ck_assert_double_eq(interp_tensor_get(&r, 0), 1);
	ck_assert_double_eq(interp_tensor_get(&r, 1), 0);
	ck_assert_int_eq(x.ctx.n_errors, 0);
	interp_tensor_fini(&x.ctx, &r);
	interp_tensor_fini(&x.ctx, &v);
	ti_fini(&x);
}
END_TEST

static Suite *nonfinite_suite(void)
{
	Suite *s = suite_create("interp_nonfinite");
	TCase *tc = tcase_create("nonfinite");
	tcase_add_test(tc,
		       test_stop_at_nonfinite_reports_the_first_op_that_gives_one);
	tcase_add_test(tc,
		       test_without_the_option_nonfinite_values_flow_through);
	tcase_add_test(tc,
		       test_an_overflow_is_found_in_float32_and_not_in_float64);
	tcase_add_test(tc, test_integer_results_and_finite_runs_pass_the_check);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(nonfinite_suite());
}
