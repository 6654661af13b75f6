/*
 * test_codegen_colred.c - sum, mean and max over leading axes into a
 * kept last axis in the generated code (codegen/cg_lower_nn.c's
 * reduction kernel without `reassoc`), against a C loop that walks the
 * input in row-major order and adds each element into its output
 * element in float32 (the interpreter's order): bit for bit, for f32 and
 * i32, column counts that are no multiple of the vector width, row
 * counts from 1 to 1300, 3-D inputs reducing axes {0}, {0, 1} and {1}
 * (a kept outer axis, split over threads), fused operands, NaN,
 * infinities and -0.0, on 1, 2 and 3 threads; a float sum of more than
 * 256 rows in blocks of 32 (RED_SUM_BLOCK, cg_lower_colred.c), their
 * sums combined pairwise. On main
 * deb3dd2, which summed columns with `reassoc`, 13 of these 34 checks
 * fail (rows of 7 to 33 columns).
 */
#include "red_fixture.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The interpreter's reduction of v (dims d, rank r) over `axes`: every
 * element, in row-major order, stepped into its output element (from 0,
 * or -inf with NaN winning for max; means then divided by the count), in
 * float32 or wrapping int32; a float sum in blocks (red_block) of
 * elements per output element, each block summed from 0, the blocks
 * then combined pairwise (red_tree). Returns the output's element
 * count. */
static int64_t ref_reduce(ir_op op, ir_dtype t, const void *v, const int64_t *d,
			  int r, uint32_t axes, void *out)
{
	int64_t n_out = 1, count = 1, n = 1;
	for (int a = 0; a < r; a++) {
		n *= d[a];
		if (axes & (1u << a))
			count *= d[a];
		else
			n_out *= d[a];
	}
	int64_t bs = red_block(count), nb = (count + bs - 1) / bs;
	size_t n_bl = (size_t)(n_out * nb);
	float *bl = calloc(n_bl ? n_bl : 1, sizeof *bl);
	int64_t *cnt = calloc((size_t)(n_out ? n_out : 1), sizeof *cnt);
	ck_assert(bl && cnt);
	for (int64_t o = 0; o < n_out; o++) {
		if (t == IR_I32)
			((int32_t *)out)[o] = op == IR_OP_MAX ? INT32_MIN : 0;
		else
			((float *)out)[o] = op == IR_OP_MAX ? -INFINITY : 0.0f;
	}
	for (int64_t e = 0; e < n; e++) {
		int64_t rest = e, o = 0, scale = 1;
		for (int a = r - 1; a >= 0; a--) {
			int64_t i = rest % d[a];
			rest /= d[a];
			if (!(axes & (1u << a))) {
				o += i * scale;
				scale *= d[a];
			}
		}
		if (t == IR_I32) {
			int32_t *acc = (int32_t *)out + o,
				x = ((const int32_t *)v)[e];
			*acc = op == IR_OP_MAX
				       ? (x > *acc ? x : *acc)
				       : (int32_t)((uint32_t)*acc + (uint32_t)x);
		} else {
			float *acc = (float *)out + o, x = ((const float *)v)[e];
			if (op != IR_OP_MAX) {
				float *b = bl + o * nb + cnt[o]++ / bs;
				*b = *b + x;
			} else if (x > *acc || isnan(x)) {
				*acc = x;
			}
		}
	}
	for (int64_t o = 0; t == IR_F32 && op != IR_OP_MAX && o < n_out; o++)
		((float *)out)[o] = red_tree(bl + o * nb, nb);
	free(bl);
	free(cnt);
	for (int64_t o = 0; op == IR_OP_MEAN && o < n_out; o++)
		((float *)out)[o] /= (float)count;
	return n_out;
}

/* op over `axes` of an input of dims d (rank r) and dtype t, on 1, 2 and
 * 3 threads, against ref_reduce bit for bit. */
static void check_reduce(ir_op op, ir_dtype t, const int64_t *d, int r,
			 uint32_t axes, bool keepdim)
{
	fx x;
	fx_init(&x, 0x9e3779b97f4a7c15ull);
	ir_id a = input(&x, t, r, d);
	ret(&x, reduce(&x, op, a, axes, keepdim));
	int64_t n = 1;
	for (int i = 0; i < r; i++)
		n *= d[i];
	void *want = malloc((size_t)n * 4);
	int64_t n_out = ref_reduce(op, t, x.in[0], d, r, axes, want);
	char what[128];
	snprintf(what, sizeof what, "%s %s (%lld, %lld, %lld) axes %u",
		 ir_op_table[op].name, t == IR_I32 ? "i32" : "f32",
		 (long long)d[0], (long long)d[1],
		 (long long)(r > 2 ? d[2] : 0), axes);
	check_bits_at_threads(&x, n_out, want, what);
	free(want);
	fx_fini(&x);
}

static const int64_t rows[] = {1, 2, 17, 640, 1300};
/* Columns: 1 is a whole-tensor sum (not a column reduction: below). */
static const int64_t cols[] = {7, 16, 32, 33, 64, 65, 100, 201};

START_TEST(test_sum_mean_and_max_of_f32_columns_are_the_row_order_loops_bits)
{
	ir_op ops[3] = {IR_OP_SUM, IR_OP_MEAN, IR_OP_MAX};
	for (int o = 0; o < 3; o++)
		for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
			int64_t d[2] = {rows[r], cols[_i]};
			check_reduce(ops[o], IR_F32, d, 2, 1, false);
		}
}
END_TEST

START_TEST(test_sum_and_max_of_i32_columns_are_the_row_order_loops_values)
{
	for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
		int64_t d[2] = {rows[r], cols[_i]};
		check_reduce(IR_OP_SUM, IR_I32, d, 2, 1, true);
		check_reduce(IR_OP_MAX, IR_I32, d, 2, 1, false);
	}
}
END_TEST

/* (B, T, D) reduced over {0}, {0, 1} and {1}: the last leaves a kept
 * outer axis (B) before the columns, split over the threads. */
START_TEST(test_leading_axes_of_3d_inputs_reduce_in_row_order)
{
	const int64_t D = cols[_i];
	const int64_t shapes[3][3] = {{5, 7, D}, {3, 64, D}, {1, 9, D}};
	const uint32_t axes[3] = {1, 3, 2};
	for (int s = 0; s < 3; s++)
		for (int a = 0; a < 3; a++) {
			check_reduce(IR_OP_SUM, IR_F32, shapes[s], 3, axes[a],
				     false);
			check_reduce(IR_OP_MEAN, IR_F32, shapes[s], 3, axes[a],
				     true);
			check_reduce(IR_OP_MAX, IR_F32, shapes[s], 3, axes[a],
				     false);
		}
}
END_TEST

/* sum(a * s - b, 0) of (R, C) with s a per-row (R, 1) scale and b a (C)
 * bias, both fused into the sum's kernel: each element computed as the
 * unfused graph would, then every column in row order. */
START_TEST(test_a_fused_operand_is_reduced_in_row_order_on_any_split)
{
	const int64_t R = 37, C = cols[_i];
	fx x;
	fx_init(&x, 0x9e3779b97f4a7c15ull);
	ir_id a = input(&x, IR_F32, 2, (int64_t[]){R, C});
	ir_id s = input(&x, IR_F32, 2, (int64_t[]){R, 1});
	ir_id b = input(&x, IR_F32, 1, (int64_t[]){C});
	ir_id e = op2(&x, IR_OP_SUB, op2(&x, IR_OP_MUL, a, s), b);
	ret(&x, reduce(&x, IR_OP_SUM, e, 1, false));
	const float *pa = x.in[0], *ps = x.in[1], *pb = x.in[2];
	float *v = malloc((size_t)(R * C) * 4), *want = malloc((size_t)C * 4);
	for (int64_t r = 0; r < R; r++)
		for (int64_t j = 0; j < C; j++)
			v[r * C + j] = pa[r * C + j] * ps[r] - pb[j];
	ref_reduce(IR_OP_SUM, IR_F32, v, (int64_t[]){R, C}, 2, 1, want);
	check_fused_at_threads(&x, C, want, 2, "fused sum");
	free(v);
	free(want);
	fx_fini(&x);
}
END_TEST

/* A column of -0.0 sums to +0.0 (the sum starts from +0, as the
 * interpreter's) and its max stays -0.0; a NaN anywhere in a column wins
 * its max and makes its sum NaN; infinities of both signs sum to NaN, of
 * one sign to that infinity. */
START_TEST(test_signed_zeros_nan_and_infinities_reduce_as_the_interpreter)
{
	const int64_t R = 19, C = 21;
	ir_op ops[3] = {IR_OP_SUM, IR_OP_MEAN, IR_OP_MAX};
	for (int o = 0; o < 3; o++) {
		fx x;
		fx_init(&x, 0x9e3779b97f4a7c15ull);
		ir_id a = input(&x, IR_F32, 2, (int64_t[]){R, C});
		ret(&x, reduce(&x, ops[o], a, 1, false));
		float *v = x.in[0];
		for (int64_t r = 0; r < R; r++)
			v[r * C + 0] = -0.0f;
		v[3 * C + 20] = NAN;
		v[18 * C + 5] = NAN;
		v[4 * C + 8] = INFINITY;
		v[9 * C + 8] = -INFINITY;
		v[16 * C + 2] = INFINITY;
		float want[21];
		ref_reduce(ops[o], IR_F32, v, (int64_t[]){R, C}, 2, 1, want);
		ck_assert(ops[o] == IR_OP_MAX ? signbit(want[0])
					      : !signbit(want[0]));
		ck_assert(isnan(want[20]) && isnan(want[5]));
		ck_assert(isinf(want[2]) && want[2] > 0);
		cg_program *p = compile(&x);
		for (int th = 1; th <= 3; th++) {
			float *got = run(&x, p, th, C);
			check_bits(got, want, C, ir_op_table[ops[o]].name);
			ck_assert(ops[o] == IR_OP_MAX || isnan(got[8]));
			free(got);
		}
		cg_program_destroy(p);
		fx_fini(&x);
	}
}
END_TEST

/* Not a column reduction: a single column, (R, 1) summed over axis 0,
 * is a whole-tensor sum, which keeps `reassoc` (one chain in order would
 * take 4 cycles an element), so it matches the row-order sum within
 * rounding only. */
START_TEST(test_a_single_column_still_matches_within_rounding)
{
	const int64_t R = 640;
	fx x;
	fx_init(&x, 0x9e3779b97f4a7c15ull);
	ir_id a = input(&x, IR_F32, 2, (int64_t[]){R, 1});
	ret(&x, reduce(&x, IR_OP_SUM, a, 1, false));
	const float *v = x.in[0];
	double s = 0;
	for (int64_t r = 0; r < R; r++)
		s += v[r];
	float want = (float)s;
	float *got = jit(&x, 2, 1, NULL);
	ck_assert_double_le(tu_max_rel_err(got, &want, 1, 1e-4, 1e-5), 1);
	free(got);
	fx_fini(&x);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("codegen_colred");
	TCase *t = tcase_create("columns");
	tcase_set_timeout(t, 300);
	int n_cols = (int)(sizeof cols / sizeof *cols);
	tcase_add_loop_test(
		t,
		test_sum_mean_and_max_of_f32_columns_are_the_row_order_loops_bits,
		0, n_cols);
	tcase_add_loop_test(
		t,
		test_sum_and_max_of_i32_columns_are_the_row_order_loops_values,
		0, n_cols);
	tcase_add_loop_test(t,
			    test_leading_axes_of_3d_inputs_reduce_in_row_order,
			    0, n_cols);
	tcase_add_loop_test(
		t, test_a_fused_operand_is_reduced_in_row_order_on_any_split, 0,
		n_cols);
	tcase_add_test(
		t,
		test_signed_zeros_nan_and_infinities_reduce_as_the_interpreter);
	tcase_add_test(t, test_a_single_column_still_matches_within_rounding);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
