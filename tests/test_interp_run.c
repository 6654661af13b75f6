/*
 * test_interp_run.c - the reference interpreter around the kernels:
 * binding symbols from inputs, parameter initialization, leaves and their
 * checks, single-node evaluation for folding, tensor printing, and
 * behaviour when allocations fail.
 */
#include "test_interp.h"
#include "testutil.h"

/* ---- symbols and inputs ---------------------------------------------------- */

/* f(x: f32[B, 3]) = sum(x, axis 1) */
static ir_id build_row_sums(ti_fx *x)
{
	int32_t B = ir_module_add_sym(x->m, "B", (ir_loc){0});
	ir_type t = {.dtype = IR_F32,
		     .rank = 2,
		     .dims = {{1, B}, ir_dim_static(3)}};
	ir_id in = ti_input(x, "x", &t);
	ir_attr r = {.reduce = {2, false}};
	return ti_op1(x, IR_OP_SUM, in, &r);
}

START_TEST(test_run_binds_symbols_from_the_inputs_shapes)
{
	ti_fx x;
	ti_init(&x);
	ir_id out = build_row_sums(&x);
	interp_tensor in = ti_tensor(&x, IR_F32, SHAPE(2, 3),
				     F32S(1, 2, 3, 4, 5, 6)),
		      r;
	interp_opts o = {0};
	ck_assert_msg(ti_run_opts(&x, out, &o, &in, &r), "%s", ti_diag(&x));
	ck_assert_int_eq(r.rank, 1);
	ck_assert_int_eq(r.dims[0], 2);
	ck_assert_double_eq(interp_tensor_get(&r, 0), 6);
	ck_assert_double_eq(interp_tensor_get(&r, 1), 15);
	interp_tensor_fini(&x.ctx, &r);
	interp_tensor_fini(&x.ctx, &in);
	ti_fini(&x);
}
END_TEST

START_TEST(test_inputs_that_disagree_on_a_symbol_are_an_error)
{
	ti_fx x;
	ti_init(&x);
	ir_id out = build_row_sums(&x);
	ir_type ty = {.dtype = IR_F32, .rank = 1, .dims = {{2, 0}}}; /* 2*B */
	ti_input(&x, "y", &ty);
	interp_tensor in[2], r;
	in[0] = ti_tensor(&x, IR_F32, SHAPE(2, 3), F32S(1, 2, 3, 4, 5, 6));
	in[1] = ti_tensor(&x, IR_F32, SHAPE(6), F32S(0, 0, 0, 0, 0, 0));
	interp_opts o = {0};
	ck_assert(!ti_run_opts(&x, out, &o, in, &r));
	ck_assert_ptr_nonnull(
		strstr(ti_diag(&x), "input 'y' has shape [6], which makes B = 3; "
				    "an earlier input made it 2"));
	interp_tensor_fini(&x.ctx, &in[0]);
	interp_tensor_fini(&x.ctx, &in[1]);
	ti_fini(&x);
}
END_TEST

START_TEST(test_input_of_wrong_static_dim_or_dtype_is_an_error)
{
	ti_fx x;
	ti_init(&x);
	ir_id out = build_row_sums(&x);
	interp_tensor in = ti_tensor(&x, IR_F32, SHAPE(2, 4),
				     F32S(1, 2, 3, 4, 5, 6, 7, 8)),
		      r;
	interp_opts o = {0};
	ck_assert(!ti_run_opts(&x, out, &o, &in, &r));
	ck_assert_ptr_nonnull(strstr(ti_diag(&x),
				     "input 'x' has shape [2, 4]; "
				     "expected [B, 3] (dimension 1)"));
	interp_tensor_fini(&x.ctx, &in);
	in = ti_tensor(&x, IR_I32, SHAPE(1, 3), I32S(1, 2, 3));
	ck_assert(!ti_run_opts(&x, out, &o, &in, &r));
	ck_assert_ptr_nonnull(strstr(ti_diag(&x),
				     "input: argument 'x' is "
				     "i32[1, 3], expected f32[1, 3]"));
	interp_tensor_fini(&x.ctx, &in);
	ti_fini(&x);
}
END_TEST

START_TEST(test_f64_mode_takes_f32_inputs_and_gives_f64)
{
	ti_fx x;
	ti_init(&x);
	ir_id out = build_row_sums(&x);
	interp_tensor in = ti_tensor(&x, IR_F32, SHAPE(1, 3),
				     F32S(0.1f, 0.2f, 0.3f)),
		      r;
	interp_opts o = {.is_f64 = true};
	ck_assert(ti_run_opts(&x, out, &o, &in, &r));
	ck_assert_int_eq(r.dtype, IR_F64);
	ck_assert_double_eq(interp_tensor_get(&r, 0),
			    (double)0.1f + (double)0.2f + (double)0.3f);
	interp_tensor_fini(&x.ctx, &r);
	interp_tensor_fini(&x.ctx, &in);
	ti_fini(&x);
}
END_TEST

START_TEST(test_a_symbol_nothing_binds_is_an_error)
{
	ti_fx x;
	ti_init(&x);
	int32_t T = ir_module_add_sym(x.m, "T", (ir_loc){0});
	ir_id a = ti_cf(&x, SHAPE(1), F32S(5));
	ir_type t = {.dtype = IR_F32, .rank = 1, .dims = {{1, T}}};
	ir_id b = ti_node(&x, IR_OP_BROADCAST, &a, 1, NULL, &t);
	ti_expect_error(&x, b, "broadcast: the size T is unknown");
	ti_fini(&x);
}
END_TEST

/* ---- parameters ---------------------------------------------------------------- */

static int32_t add_param(ti_fx *x, const char *name, const ir_type *t,
			 ir_init_kind init, double a, double b)
{
	int32_t p = ir_module_add_param(x->m, name, t, init, a, b, (ir_loc){0});
	ck_assert_int_ge(p, 0);
	return p;
}

START_TEST(test_xavier_init_respects_the_bound_and_centers_on_zero)
{
	ti_fx x;
	ti_init(&x);
	ir_type t = ti_type(IR_F32, SHAPE(64, 32));
	add_param(&x, "W", &t, IR_INIT_XAVIER_UNIFORM, 1, 0);
	interp_tensor p;
	ck_assert(interp_params_init(&x.ctx, x.m, NULL, 42, false, &p));
	double bound = sqrt(6.0 / (64 + 32)), sum = 0, hi = 0;
	for (int i = 0; i < 64 * 32; i++) {
		double v = interp_tensor_get(&p, i);
		ck_assert_double_le(fabs(v), bound);
		sum += v;
		hi = fabs(v) > hi ? fabs(v) : hi;
	}
	/* The mean of 2048 uniforms on [-0.25, 0.25] has sd 0.0032. */
	ck_assert_double_lt(fabs(sum / 2048), 0.015);
	ck_assert_double_gt(hi, 0.9 * bound);
	interp_tensor_fini(&x.ctx, &p);
	ti_fini(&x);
}
END_TEST

START_TEST(test_params_init_fills_each_kind_and_is_reproducible)
{
	ti_fx x;
	ti_init(&x);
	int32_t V = ir_module_add_sym(x.m, "V", (ir_loc){0});
	x.m->syms[V].fallback = 3;
	ir_type t = {.dtype = IR_F32,
		     .rank = 2,
		     .dims = {{1, V}, ir_dim_static(500)}};
	add_param(&x, "z", &t, IR_INIT_ZEROS, 0, 0);
	add_param(&x, "o", &t, IR_INIT_ONES, 0, 0);
	add_param(&x, "n", &t, IR_INIT_NORMAL, 2, 0.5);
	add_param(&x, "u", &t, IR_INIT_UNIFORM, -3, -1);
	int64_t syms[1];
	ck_assert(interp_bind_syms(&x.ctx, x.m, x.f, NULL, syms));
	ck_assert_int_eq(syms[0], 3);
	interp_tensor p[4], q[4];
	ck_assert(interp_params_init(&x.ctx, x.m, syms, 9, false, p));
	ck_assert(interp_params_init(&x.ctx, x.m, syms, 9, true, q));
	ck_assert_int_eq(p[0].dims[0], 3);
	ck_assert_int_eq(q[0].dtype, IR_F64);
	double nsum = 0, nsq = 0;
	for (int i = 0; i < 1500; i++) {
		ck_assert_double_eq(interp_tensor_get(&p[0], i), 0);
		ck_assert_double_eq(interp_tensor_get(&p[1], i), 1);
		double n = interp_tensor_get(&p[2], i),
		       u = interp_tensor_get(&p[3], i);
		nsum += n;
		nsq += (n - 2) * (n - 2);
		ck_assert(u >= -3 && u <= -1);
		/* f64 draws the same numbers, only not rounded to float. */
		ck_assert_double_eq(n, (float)interp_tensor_get(&q[2], i));
	}
	ck_assert_double_eq_tol(nsum / 1500, 2, 0.05);
	ck_assert_double_eq_tol(sqrt(nsq / 1500), 0.5, 0.05);
	for (int i = 0; i < 4; i++) {
		interp_tensor_fini(&x.ctx, &p[i]);
		interp_tensor_fini(&x.ctx, &q[i]);
	}
	ti_fini(&x);
}
END_TEST

START_TEST(test_param_leaf_reads_the_given_value)
{
	ti_fx x;
	ti_init(&x);
	ir_type t = ti_type(IR_F32, SHAPE(2));
	int32_t pi = add_param(&x, "w", &t, IR_INIT_ONES, 0, 0);
	ir_attr a = {.param_index = (uint32_t)pi};
	ir_id w = ti_node(&x, IR_OP_PARAM, NULL, 0, &a, &t);
	ir_id y = ti_op2(&x, IR_OP_MUL, w, ti_cf(&x, SHAPE(2), F32S(3, 4)),
			 NULL);
	interp_tensor p = ti_tensor(&x, IR_F32, SHAPE(2), F32S(0.5f, -1)), r;
	interp_opts o = {0};
	x.output = y;
	ck_assert(interp_run(&x.ctx, x.m, x.f, &o, &p, NULL, &r));
	ck_assert_double_eq(interp_tensor_get(&r, 0), 1.5);
	ck_assert_double_eq(interp_tensor_get(&r, 1), -4);
	interp_tensor_fini(&x.ctx, &r);
	interp_tensor_fini(&x.ctx, &p);
	ti_fini(&x);
}
END_TEST

START_TEST(test_param_with_an_unbound_symbol_is_an_error)
{
	ti_fx x;
	ti_init(&x);
	int32_t V = ir_module_add_sym(x.m, "V", (ir_loc){0});
	ir_type t1 = ti_type(IR_F32, SHAPE(4));
	ir_type t2 = {.dtype = IR_F32, .rank = 1, .dims = {{1, V}}};
	add_param(&x, "ok", &t1, IR_INIT_ONES, 0, 0);
	add_param(&x, "emb", &t2, IR_INIT_ONES, 0, 0);
	int64_t syms[1] = {0};
	interp_tensor p[2];
	ck_assert(!interp_params_init(&x.ctx, x.m, syms, 1, false, p));
	ck_assert_ptr_nonnull(strstr(ti_diag(&x), "parameter 'emb': the size V "
						  "is unknown"));
	ck_assert_ptr_null(p[0].data); /* nothing left to free */
	ti_fini(&x);
}
END_TEST

/* ---- single nodes for folding ------------------------------------------------------ */

START_TEST(test_eval_node_gives_float32_for_float32_operands)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2), F32S(1, 2));
	ir_id e = ti_op1(&x, IR_OP_EXP, a, NULL);
	interp_tensor arg = ti_tensor(&x, IR_F32, SHAPE(2), F32S(1, 2)), r;
	interp_opts o = {0};
	ck_assert(interp_eval_node(&x.ctx, x.m, &x.f->g, e, &o, NULL, &arg, &r));
	ck_assert_int_eq(r.dtype, IR_F32);
	ck_assert_double_eq(interp_tensor_get(&r, 1), (double)(float)exp(2.0));
	interp_tensor_fini(&x.ctx, &r);
	/* An input has no value outside a run. */
	ir_type t = ti_type(IR_F32, SHAPE(2));
	ir_id in = ti_input(&x, "x", &t);
	ck_assert(!interp_eval_node(&x.ctx, x.m, &x.f->g, in, &o, NULL, NULL,
				    &r));
	ck_assert_ptr_nonnull(
		strstr(ti_diag(&x), "input: no inputs outside a run"));
	interp_tensor_fini(&x.ctx, &arg);
	ti_fini(&x);
}
END_TEST

/* ---- printing ------------------------------------------------------------------------- */

static char *print_to_string(const interp_tensor *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(f);
	interp_tensor_print(t, f);
	fclose(f);
	return buf;
}

static void expect_print(ti_fx *x, ir_dtype dt, int rank, const int64_t *dims,
			 const void *data, const char *want)
{
	interp_tensor t = ti_tensor(x, dt, rank, dims, data);
	char *got = print_to_string(&t);
	ck_assert_str_eq(got, want);
	free(got);
	interp_tensor_fini(&x->ctx, &t);
}

START_TEST(test_print_lays_out_a_tensor_as_pytorch_does)
{
	ti_fx x;
	ti_init(&x);
	expect_print(&x, IR_F32, SHAPE(2, 1, 4),
		     F32S(2, 3, 4, 5, 10, 11, 12, 13),
		     "f32[2, 1, 4]\n"
		     "[[[ 2.0000,  3.0000,  4.0000,  5.0000]],\n"
		     "\n"
		     " [[10.0000, 11.0000, 12.0000, 13.0000]]]");
	expect_print(&x, IR_I32, SHAPE(2, 2), I32S(1, -20, 300, 4),
		     "i32[2, 2]\n[[  1, -20],\n [300,   4]]");
	expect_print(&x, IR_F32, SCALAR, F32S(3.5f), "f32[]\n3.5000");
	expect_print(&x, IR_F32, SHAPE(2, 0), NULL, "f32[2, 0]\n[]");
	ti_fini(&x);
}
END_TEST

START_TEST(test_print_switches_to_scientific_for_wide_magnitudes)
{
	ti_fx x;
	ti_init(&x);
	expect_print(&x, IR_F32, SHAPE(3), F32S(1e-5f, 1, -0.0f),
		     "f32[3]\n[ 1.0000e-05,  1.0000e+00, -0.0000e+00]");
	double d[] = {NAN, -INFINITY, 0.25};
	expect_print(&x, IR_F64, SHAPE(3), d,
		     "f64[3]\n[   nan,   -inf, 0.2500]");
	ti_fini(&x);
}
END_TEST

START_TEST(test_print_wraps_long_rows_at_80_columns)
{
	ti_fx x;
	ti_init(&x);
	float v[12];
	for (int i = 0; i < 12; i++)
		v[i] = (float)i + 0.5f;
	expect_print(&x, IR_F32, SHAPE(12), v,
		     "f32[12]\n"
		     "[ 0.5000,  1.5000,  2.5000,  3.5000,  4.5000,  5.5000,  "
		     "6.5000,  7.5000,\n"
		     "  8.5000,  9.5000, 10.5000, 11.5000]");
	ti_fini(&x);
}
END_TEST

START_TEST(test_print_elides_the_middle_of_large_tensors)
{
	ti_fx x;
	ti_init(&x);
	float *v = calloc(2000, sizeof *v);
	ck_assert_ptr_nonnull(v);
	for (int i = 0; i < 2000; i++)
		v[i] = 100 + 0.5f * (float)i;
	expect_print(&x, IR_F32, SHAPE(2000), v,
		     "f32[2000]\n"
		     "[ 100.0000,  100.5000,  101.0000,  ..., 1098.5000, "
		     "1099.0000, 1099.5000]");
	for (int i = 0; i < 2000; i++)
		v[i] = 0;
	const char *row = "[0.0000, 0.0000, 0.0000,  ..., 0.0000, 0.0000, 0.0000]";
	char want[1024];
	snprintf(want, sizeof want,
		 "f32[40, 50]\n[%s,\n %s,\n %s,\n ...,\n %s,\n %s,\n %s]", row,
		 row, row, row, row, row);
	expect_print(&x, IR_F32, SHAPE(40, 50), v, want);
	free(v);
	ti_fini(&x);
}
END_TEST

/* ---- allocation failures --------------------------------------------------------------- */

typedef struct fail_alloc {
	int left; /* allocations that still succeed */
} fail_alloc;

static void *failing_alloc(void *ud, void *ptr, size_t size)
{
	fail_alloc *fa = ud;
	if (size == 0) {
		free(ptr);
		return NULL;
	}
	if (fa->left-- <= 0)
		return NULL;
	return realloc(ptr, size);
}

START_TEST(test_run_reports_out_of_memory_at_every_allocation)
{
	ti_fx x;
	ti_init(&x);
	ir_id out = build_row_sums(&x);
	out = ti_op1(&x, IR_OP_SOFTMAX, out, NULL);
	interp_tensor in = ti_tensor(&x, IR_F32, SHAPE(2, 3),
				     F32S(1, 2, 3, 4, 5, 6)),
		      r;
	interp_opts o = {0};
	ir_alloc_fn saved = x.ctx.alloc;
	bool ok = false;
	for (int n = 0; !ok && n < 100; n++) {
		fail_alloc fa = {n};
		x.ctx.alloc = failing_alloc;
		x.ctx.alloc_ud = &fa;
		ok = ti_run_opts(&x, out, &o, &in, &r);
		x.ctx.alloc = saved;
		x.ctx.alloc_ud = NULL;
		if (!ok) {
			ck_assert_ptr_null(r.data);
			ck_assert_ptr_nonnull(
				strstr(ti_diag(&x), "out of memory"));
		}
	}
	ck_assert(ok);
	ck_assert_double_eq_tol(interp_tensor_get(&r, 0) +
					interp_tensor_get(&r, 1),
				1, 1e-6);
	interp_tensor_fini(&x.ctx, &r);
	interp_tensor_fini(&x.ctx, &in);
	ti_fini(&x);
}
END_TEST

static Suite *interp_run_suite(void)
{
	Suite *s = suite_create("interp_run");
	TCase *in = tcase_create("inputs");
	tcase_add_test(in, test_run_binds_symbols_from_the_inputs_shapes);
	tcase_add_test(in, test_inputs_that_disagree_on_a_symbol_are_an_error);
	tcase_add_test(in, test_input_of_wrong_static_dim_or_dtype_is_an_error);
	tcase_add_test(in, test_f64_mode_takes_f32_inputs_and_gives_f64);
	tcase_add_test(in, test_a_symbol_nothing_binds_is_an_error);
	suite_add_tcase(s, in);
	TCase *pa = tcase_create("params");
	tcase_add_test(pa,
		       test_xavier_init_respects_the_bound_and_centers_on_zero);
	tcase_add_test(pa, test_params_init_fills_each_kind_and_is_reproducible);
	tcase_add_test(pa, test_param_leaf_reads_the_given_value);
	tcase_add_test(pa, test_param_with_an_unbound_symbol_is_an_error);
	tcase_add_test(pa, test_eval_node_gives_float32_for_float32_operands);
	suite_add_tcase(s, pa);
	TCase *pr = tcase_create("print");
	tcase_add_test(pr, test_print_lays_out_a_tensor_as_pytorch_does);
	tcase_add_test(pr,
		       test_print_switches_to_scientific_for_wide_magnitudes);
	tcase_add_test(pr, test_print_wraps_long_rows_at_80_columns);
	tcase_add_test(pr, test_print_elides_the_middle_of_large_tensors);
	suite_add_tcase(s, pr);
	TCase *mem = tcase_create("memory");
	tcase_add_test(mem, test_run_reports_out_of_memory_at_every_allocation);
	suite_add_tcase(s, mem);
	return s;
}

int main(void)
{
	return tu_run_suite(interp_run_suite());
}
