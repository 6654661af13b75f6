/*
 * test_models_dims.c - run-time dimensions that compose, from .g source
 * to the interpreter: a product dim B*T (reshape there and back, a -1
 * that stands for it, T * B the same symbol), arange of a run-time length
 * (arange(T), arange(1, T + 1), arange(size(x, 1))), a slice of a static
 * axis to a run-time length (wpe[0:T], its limit), the prelude's
 * sequence_mask, masked_ce and positional with a run-time T against
 * values computed here or at a static T, the IR text of derived symbols and limits read back, and the
 * binding errors (a product dim its factors contradict).
 */
#include "frontend.h"
#include "interp.h"
#include "ir.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IO 8

/* A compile of one source, its diagnostics captured, and a run's inputs
 * and outputs. */
typedef struct dx {
	ir_ctx ctx;
	char *diag;
	size_t diag_len;
	ir_module *m;
	const ir_func *f;
	interp_tensor in[MAX_IO], out[MAX_IO];
	uint32_t n_in;
	int64_t syms[16];
} dx;

static void dx_init(dx *x)
{
	memset(x, 0, sizeof *x);
	ir_ctx_init(&x->ctx);
	x->ctx.diag_out = open_memstream(&x->diag, &x->diag_len);
}

/* Compiles src (which must succeed and verify); f is its export "f". */
static void dx_compile(dx *x, const char *src)
{
	uint32_t file = ir_ctx_add_source(&x->ctx, "t.g", src, strlen(src));
	x->m = fe_compile(&x->ctx, file);
	fflush(x->ctx.diag_out);
	ck_assert_msg(x->m != NULL, "compile failed:\n%s", x->diag);
	ck_assert(ir_module_verify(x->m));
	x->f = ir_module_find_func(x->m, "f");
	ck_assert_ptr_nonnull(x->f);
}

static void dx_fini(dx *x)
{
	for (uint32_t i = 0; i < MAX_IO; i++) {
		interp_tensor_fini(&x->ctx, &x->in[i]);
		interp_tensor_fini(&x->ctx, &x->out[i]);
	}
	ir_module_destroy(x->m);
	fclose(x->ctx.diag_out);
	free(x->diag);
	ir_ctx_fini(&x->ctx);
}

/* Appends an input of dims[0 .. rank) with element i = f(i). */
static void dx_input(dx *x, ir_dtype dt, int rank, const int64_t *dims,
		     double (*fill)(int64_t))
{
	interp_tensor *t = &x->in[x->n_in++];
	ck_assert(interp_tensor_alloc(&x->ctx, t, dt, rank, dims));
	for (int64_t i = 0; i < interp_tensor_numel(t); i++) {
		if (dt == IR_I32)
			((int32_t *)t->data)[i] = (int32_t)fill(i);
		else
			((float *)t->data)[i] = (float)fill(i);
	}
}

/* Binds the symbols from the inputs and runs f (no parameters). */
static void dx_run(dx *x)
{
	ck_assert_msg(interp_bind_syms(&x->ctx, x->m, x->f, x->in, x->syms),
		      "binding failed");
	interp_tensor params[4] = {0};
	ck_assert_uint_le(x->m->n_params, 4);
	ck_assert(interp_params_init(&x->ctx, x->m, x->syms, 3, false, params));
	interp_opts o = {0};
	ck_assert(interp_run(&x->ctx, x->m, x->f, &o, params, x->in, x->out));
	for (uint32_t p = 0; p < x->m->n_params; p++)
		interp_tensor_fini(&x->ctx, &params[p]);
}

static double sym_value(const dx *x, const char *name)
{
	int32_t s = ir_module_find_sym(x->m, name);
	ck_assert_msg(s >= 0, "no symbol %s", name);
	return (double)x->syms[s];
}

static ir_op output_op(const ir_func *f, uint32_t i)
{
	return f->g.nodes[f->outputs[i]].op;
}

static double idx(int64_t i)
{
	return (double)i;
}
static double tenth(int64_t i)
{
	return (double)i / 10 - 1;
}

/* ---- a product dim --------------------------------------------------------------- */

START_TEST(test_reshape_to_b_times_t_and_back_keeps_every_element)
{
	dx x;
	dx_init(&x);
	dx_compile(&x, "model m\ndim B, T\n"
		       "export def f(x: f32[B, T, 3])\n"
		       "  rows = reshape(x, [B * T, 3])\n"
		       "  same = reshape(x, [T * B, 3])\n"
		       "  flat = reshape(x, [-1, 3])\n"
		       "  back = reshape(rows + same - flat, [B, T, 3])\n"
		       "  return rows, back\n");
	int32_t bt = ir_module_find_sym(x.m, "B*T");
	ck_assert_int_ge(bt, 0);
	ck_assert_uint_eq(x.m->n_syms, 3); /* B, T and B*T, once */
	ck_assert_uint_eq(x.m->syms[bt].n_factors, 2);
	ck_assert_int_eq(x.m->syms[bt].factors[0], ir_module_find_sym(x.m, "B"));
	ck_assert_int_eq(x.m->syms[bt].factors[1], ir_module_find_sym(x.m, "T"));
	const ir_type *rt = &x.f->g.nodes[x.f->outputs[0]].type;
	ck_assert_int_eq(rt->dims[0].sym, bt);
	const int64_t d[3] = {2, 5, 3};
	dx_input(&x, IR_F32, 3, d, tenth);
	dx_run(&x);
	ck_assert_double_eq(sym_value(&x, "B*T"), 10);
	ck_assert_int_eq(x.out[0].rank, 2);
	ck_assert_int_eq(x.out[0].dims[0], 10);
	ck_assert_int_eq(x.out[1].dims[1], 5);
	for (int64_t i = 0; i < 30; i++) {
		ck_assert_double_eq_tol(interp_tensor_get(&x.out[0], i),
					tenth(i), 1e-6);
		ck_assert_double_eq_tol(interp_tensor_get(&x.out[1], i),
					tenth(i), 1e-6);
	}
	dx_fini(&x);
}
END_TEST

START_TEST(test_binding_checks_a_product_dim_against_its_factors)
{
	dx x;
	dx_init(&x);
	dx_compile(&x, "model m\ndim B, T\n"
		       "export def f(ids: i32[B, T], rows: f32[B * T, 2])\n"
		       "  return reshape(rows, [B, T, 2])\n");
	const int64_t d0[2] = {2, 3}, d1[2] = {5, 2};
	dx_input(&x, IR_I32, 2, d0, idx);
	dx_input(&x, IR_F32, 2, d1, idx);
	ck_assert(!interp_bind_syms(&x.ctx, x.m, x.f, x.in, x.syms));
	fflush(x.ctx.diag_out);
	ck_assert_msg(strstr(x.diag, "t.g:3:30: error: input 'rows' has shape "
				     "[5, 2], which makes B*T = 5; its factors "
				     "make it 6"),
		      "%s", x.diag);
	dx_fini(&x);
}
END_TEST

/* ---- arange and slices ---------------------------------------------------------- */

START_TEST(test_arange_takes_a_run_time_length)
{
	dx x;
	dx_init(&x);
	dx_compile(&x, "model m\ndim T\n"
		       "export def f(x: f32[2, T])\n"
		       "  a = arange(T)\n"
		       "  return a, arange(1, T + 1), arange(size(x, 1)), "
		       "arange(0.0, T), arange(2, T + 2)\n");
	ck_assert_int_eq(output_op(x.f, 0), IR_OP_ARANGE);
	const int64_t d[2] = {2, 4};
	dx_input(&x, IR_F32, 2, d, idx);
	dx_run(&x);
	const double start[5] = {0, 1, 0, 0, 2};
	const ir_dtype dt[5] = {IR_I32, IR_I32, IR_I32, IR_F32, IR_I32};
	for (int k = 0; k < 5; k++) {
		ck_assert_int_eq(x.out[k].dtype, dt[k]);
		ck_assert_int_eq(x.out[k].dims[0], 4);
		for (int i = 0; i < 4; i++)
			ck_assert_double_eq(interp_tensor_get(&x.out[k], i),
					    start[k] + i);
	}
	dx_fini(&x);
}
END_TEST

START_TEST(test_a_static_axis_slices_to_a_run_time_length_under_a_limit)
{
	dx x;
	dx_init(&x);
	dx_compile(&x, "model m\ndim T\n"
		       "export def f(x: f32[T, 2], table: f32[6, 2])\n"
		       "  return x + table[0:T], table[1:T + 1], "
		       "slice(table, 0, 2, T + 2), x[0:T]\n");
	ck_assert_uint_eq(x.m->n_limits, 3);
	ck_assert_int_eq(x.m->limits[0].max, 6);
	ck_assert_int_eq(x.m->limits[1].max, 5);
	ck_assert_int_eq(x.m->limits[2].max, 4);
	ck_assert_uint_eq(x.m->limits[0].loc.line, 4);
	ck_assert_uint_eq(x.m->limits[0].loc.col, 20);
	/* x[0:T] of an axis of size T is x itself. */
	ck_assert_uint_eq(x.f->outputs[3], x.f->inputs[0]);
	const int64_t dx0[2] = {3, 2}, dt[2] = {6, 2};
	dx_input(&x, IR_F32, 2, dx0, idx);
	dx_input(&x, IR_F32, 2, dt, tenth);
	dx_run(&x);
	for (int64_t i = 0; i < 6; i++) {
		ck_assert_double_eq_tol(interp_tensor_get(&x.out[0], i),
					idx(i) + tenth(i), 1e-6);
		ck_assert_double_eq_tol(interp_tensor_get(&x.out[1], i),
					tenth(i + 2), 1e-6);
		ck_assert_double_eq_tol(interp_tensor_get(&x.out[2], i),
					tenth(i + 4), 1e-6);
	}
	dx_fini(&x);
}
END_TEST

START_TEST(test_binding_t_past_a_slice_limit_is_reported_at_the_slice)
{
	dx x;
	dx_init(&x);
	dx_compile(&x, "model m\ndim T\n"
		       "export def f(x: f32[T, 2], table: f32[6, 2])\n"
		       "  return table[1:T + 1]\n");
	const int64_t dx0[2] = {6, 2}, dt[2] = {6, 2};
	dx_input(&x, IR_F32, 2, dx0, idx);
	dx_input(&x, IR_F32, 2, dt, idx);
	ck_assert(!interp_bind_syms(&x.ctx, x.m, x.f, x.in, x.syms));
	fflush(x.ctx.diag_out);
	ck_assert_msg(strstr(x.diag, "t.g:4:16: error: T = 6 is more than 5, "
				     "the most this slice allows"),
		      "%s", x.diag);
	dx_fini(&x);
}
END_TEST

/* ---- the prelude with a run-time T ------------------------------------------------- */

static double logit(int64_t i)
{
	return sin((double)i * 0.7) * 2;
}
static double label(int64_t i)
{
	return (double)((i * 3) % 4);
}

START_TEST(test_sequence_mask_and_masked_ce_take_a_run_time_t)
{
	dx x;
	dx_init(&x);
	dx_compile(&x,
		   "model m\ndim B, T\n"
		   "export def f(logits: f32[B, T, 4], labels: i32[B, T],\n"
		   "             valid: i32[B])\n"
		   "  return sequence_mask(valid, T), masked_ce(logits, labels, valid)\n");
	enum { B = 2, T = 5, V = 4 };
	const int64_t dl[3] = {B, T, V}, dy[2] = {B, T}, dv[1] = {B};
	dx_input(&x, IR_F32, 3, dl, logit);
	dx_input(&x, IR_I32, 2, dy, label);
	dx_input(&x, IR_I32, 1, dv, idx); /* valid = [0, 1] */
	((int32_t *)x.in[2].data)[0] = 3;
	dx_run(&x);
	const int valid[B] = {3, 1};
	for (int b = 0; b < B; b++) {
		double sum = 0;
		for (int t = 0; t < T; t++) {
			ck_assert_double_eq(interp_tensor_get(&x.out[0],
							      b * T + t),
					    t < valid[b]);
			double mx = -INFINITY, z = 0;
			const float *row = (const float *)x.in[0].data +
					   (b * T + t) * V;
			for (int v = 0; v < V; v++)
				mx = fmax(mx, row[v]);
			for (int v = 0; v < V; v++)
				z += exp(row[v] - mx);
			double ce = log(z) + mx - row[(int)label(b * T + t)];
			sum += t < valid[b] ? ce : 0;
		}
		ck_assert_double_eq_tol(interp_tensor_get(&x.out[1], b),
					sum / T, 1e-5);
	}
	dx_fini(&x);
}
END_TEST

START_TEST(test_positional_encoding_takes_a_run_time_t)
{
	dx x;
	dx_init(&x);
	dx_compile(&x, "model m\ndim T\n"
		       "export def f(x: f32[T, 8])\n"
		       "  return positional(size(x, 0), 8), positional(3, 8)\n");
	const int64_t d[2] = {3, 8};
	dx_input(&x, IR_F32, 2, d, idx);
	dx_run(&x);
	ck_assert_int_eq(x.out[0].dims[0], 3);
	for (int64_t i = 0; i < 24; i++)
		ck_assert_double_eq_tol(interp_tensor_get(&x.out[0], i),
					interp_tensor_get(&x.out[1], i), 1e-6);
	dx_fini(&x);
}
END_TEST

START_TEST(test_a_run_time_size_is_a_number_in_tensor_arithmetic)
{
	dx x;
	dx_init(&x);
	dx_compile(&x,
		   "model m\ndim B, T\n"
		   "export def f(x: f32[B, T])\n"
		   "  return sum(x, axis = 1) / size(x, 1), broadcast(T - 1, [B]), "
		   "x * (2 * T + 1)\n");
	const int64_t d[2] = {2, 5};
	dx_input(&x, IR_F32, 2, d, idx);
	dx_run(&x);
	ck_assert_int_eq(x.out[1].dtype, IR_I32);
	for (int b = 0; b < 2; b++) {
		ck_assert_double_eq_tol(interp_tensor_get(&x.out[0], b),
					5 * b + 2, 1e-6);
		ck_assert_double_eq(interp_tensor_get(&x.out[1], b), 4);
	}
	for (int64_t i = 0; i < 10; i++)
		ck_assert_double_eq(interp_tensor_get(&x.out[2], i), 11.0 * i);
	dx_fini(&x);
}
END_TEST

/* ---- the IR text ----------------------------------------------------------------------- */

static char *print_module(const ir_module *m)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);
	ir_module_print(m, f);
	fclose(f);
	return s;
}

START_TEST(test_derived_symbols_and_limits_round_trip_through_the_ir_text)
{
	dx x;
	dx_init(&x);
	dx_compile(&x,
		   "model m\ndim B, T\n"
		   "export def f(x: f32[B, T, 2], table: f32[8, 2])\n"
		   "  return reshape(x + table[0:T], [2 * T * B]), arange(1, T + 1)\n");
	char *s1 = print_module(x.m);
	ck_assert_msg(strstr(s1, "\nsym B*T loc(4:41)\n"), "%s", s1);
	ck_assert_msg(strstr(s1, "\nlimit T max 8 loc(4:28)\n"), "%s", s1);
	ck_assert_msg(strstr(s1, ": f32[2*B*T]"), "%s", s1);
	ck_assert_msg(strstr(s1, "arange {start=1, step=1} : i32[T]"), "%s", s1);
	uint32_t file = ir_ctx_add_source(&x.ctx, "t.ir", s1, strlen(s1));
	ir_module *m2 = ir_module_read(&x.ctx, file);
	fflush(x.ctx.diag_out);
	ck_assert_msg(m2 != NULL, "%s", x.diag);
	ck_assert(ir_module_verify(m2));
	char *s2 = print_module(m2);
	ck_assert_str_eq(s1, s2);
	int32_t bt = ir_module_find_sym(m2, "B*T");
	ck_assert_int_ge(bt, 0);
	ck_assert_uint_eq(m2->syms[bt].n_factors, 2);
	free(s1);
	free(s2);
	ir_module_destroy(m2);
	dx_fini(&x);
}
END_TEST

START_TEST(test_reading_a_product_no_sym_line_declares_is_an_error)
{
	dx x;
	dx_init(&x);
	const char *text = "module m\n\nsym B\nsym T\n\n"
			   "export func @f(x: f32[B*T]) {\n"
			   "  %0 = input {index=0} : f32[B*T]\n"
			   "  return %0 as y\n}\n";
	uint32_t file = ir_ctx_add_source(&x.ctx, "t.ir", text, strlen(text));
	ck_assert_ptr_null(ir_module_read(&x.ctx, file));
	fflush(x.ctx.diag_out);
	ck_assert_msg(strstr(x.diag, "no 'sym' line declares this product"),
		      "%s", x.diag);
	dx_fini(&x);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("models_dims");
	TCase *t = tcase_create("dims");
	tcase_add_test(t,
		       test_reshape_to_b_times_t_and_back_keeps_every_element);
	tcase_add_test(t, test_binding_checks_a_product_dim_against_its_factors);
	tcase_add_test(t, test_arange_takes_a_run_time_length);
	tcase_add_test(
		t, test_a_static_axis_slices_to_a_run_time_length_under_a_limit);
	tcase_add_test(t,
		       test_binding_t_past_a_slice_limit_is_reported_at_the_slice);
	tcase_add_test(t, test_sequence_mask_and_masked_ce_take_a_run_time_t);
	tcase_add_test(t, test_positional_encoding_takes_a_run_time_t);
	tcase_add_test(t, test_a_run_time_size_is_a_number_in_tensor_arithmetic);
	tcase_add_test(
		t,
		test_derived_symbols_and_limits_round_trip_through_the_ir_text);
	tcase_add_test(t,
		       test_reading_a_product_no_sym_line_declares_is_an_error);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
