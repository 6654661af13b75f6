/*
 * test_codegen_rowred.c - sum, mean and max over the last axis in the
 * generated code (codegen/cg_lower_rowred.c: rows in vector lanes),
 * against a C loop that reduces each row left to right in float32, a sum
 * of more than 256 in blocks of 32 combined pairwise (the interpreter's
 * order): bit for bit, for f32 and i32, row lengths from 1 to past one
 * tile, row counts that are no multiple of the lanes,
 * fused operands, and ranges split over 1, 2 and 3 threads at odd rows.
 */
#include "red_fixture.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* An input of dims (d0[, d1[, d2]]) as red_fixture.h's input(). */
static ir_id input3(fx *x, ir_dtype t, int rank, int64_t d0, int64_t d1,
		    int64_t d2)
{
	int64_t d[3] = {d0, d1, d2};
	return input(x, t, rank, d);
}

/* Each row of k values in float32 as the interpreter: from -inf left to
 * right (max, NaN winning), or from 0 in blocks (red_block), each
 * summed left to right from 0, then combined pairwise (red_tree; sum,
 * mean, then divided by k). */
static float ref_row(ir_op op, const float *v, int64_t k)
{
	float acc = -INFINITY;
	for (int64_t j = 0; op == IR_OP_MAX && j < k; j++)
		if (v[j] > acc || isnan(v[j]))
			acc = v[j];
	if (op == IR_OP_MAX)
		return acc;
	int64_t bs = red_block(k), nb = (k + bs - 1) / bs;
	float *bl = calloc((size_t)(nb ? nb : 1), sizeof *bl);
	ck_assert(bl);
	for (int64_t j = 0; j < k; j++)
		bl[j / bs] = bl[j / bs] + v[j];
	acc = red_tree(bl, nb);
	free(bl);
	return op == IR_OP_MEAN ? acc / (float)k : acc;
}

static int32_t ref_row_i(ir_op op, const int32_t *v, int64_t k)
{
	int32_t acc = op == IR_OP_MAX ? INT32_MIN : 0;
	for (int64_t j = 0; j < k; j++)
		acc = op == IR_OP_MAX
			      ? (v[j] > acc ? v[j] : acc)
			      : (int32_t)((uint32_t)acc + (uint32_t)v[j]);
	return acc;
}

/* op over the last axis of an (R, K) input of dtype t, on 1, 2 and 3
 * threads, against ref_row. */
static void check_rows(ir_op op, ir_dtype t, int64_t R, int64_t K)
{
	fx x;
	fx_init(&x, 0x2545f4914f6cdd1dull);
	ir_id a = input3(&x, t, 2, R, K, 0);
	ret(&x, reduce(&x, op, a, 2, false));
	void *want = malloc((size_t)R * 4);
	for (int64_t r = 0; r < R; r++) {
		if (t == IR_I32)
			((int32_t *)want)[r] = ref_row_i(op,
							 (const int32_t *)x.in[0] +
								 r * K,
							 K);
		else
			((float *)want)[r] = ref_row(op,
						     (const float *)x.in[0] +
							     r * K,
						     K);
	}
	char what[96];
	snprintf(what, sizeof what, "%s %s (%lld, %lld)", ir_op_table[op].name,
		 t == IR_I32 ? "i32" : "f32", (long long)R, (long long)K);
	check_bits_at_threads(&x, R, want, what);
	free(want);
	fx_fini(&x);
}

static const int64_t rows[] = {2, 5, 17, 100};
static const int64_t lens[] = {1, 7, 32, 33, 100, 300, 1300};

START_TEST(test_sum_mean_and_max_of_f32_rows_are_the_left_to_right_loops_bits)
{
	ir_op ops[3] = {IR_OP_SUM, IR_OP_MEAN, IR_OP_MAX};
	for (int o = 0; o < 3; o++)
		for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
			check_rows(ops[o], IR_F32, rows[r], lens[_i]);
}
END_TEST

START_TEST(test_sum_and_max_of_i32_rows_are_the_left_to_right_loops_values)
{
	for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
		check_rows(IR_OP_SUM, IR_I32, rows[r], lens[_i]);
		check_rows(IR_OP_MAX, IR_I32, rows[r], lens[_i]);
	}
}
END_TEST

/* mean(a * s - b) over the last axis of (B, T, K) with keepdim, s a
 * per-row (B, T, 1) scalar and b a (K) bias, all three fused into the
 * mean's kernel: each element computed as the unfused graph would, then
 * the row left to right. */
START_TEST(test_a_fused_operand_is_reduced_in_row_order_on_any_split)
{
	const int64_t B = 7, T = 3, K = lens[_i];
	fx x;
	fx_init(&x, 0x2545f4914f6cdd1dull);
	ir_id a = input3(&x, IR_F32, 3, B, T, K);
	ir_id s = input3(&x, IR_F32, 3, B, T, 1);
	ir_id b = input3(&x, IR_F32, 1, K, 0, 0);
	ir_id e = op2(&x, IR_OP_SUB, op2(&x, IR_OP_MUL, a, s), b);
	ret(&x, reduce(&x, IR_OP_MEAN, e, 4, true));
	const float *pa = x.in[0], *ps = x.in[1], *pb = x.in[2];
	float *want = malloc((size_t)(B * T) * 4), *row = malloc((size_t)K * 4);
	for (int64_t r = 0; r < B * T; r++) {
		for (int64_t j = 0; j < K; j++)
			row[j] = pa[r * K + j] * ps[r] - pb[j];
		want[r] = ref_row(IR_OP_MEAN, row, K);
	}
	check_fused_at_threads(&x, B * T, want, 2, "fused mean");
	free(want);
	free(row);
	fx_fini(&x);
}
END_TEST

/* Rows of -0.0 sum to +0.0 (the sum starts from +0, as the
 * interpreter's); a NaN anywhere in a row wins its max and makes its sum
 * NaN; infinities of both signs sum to NaN. */
START_TEST(test_signed_zeros_nan_and_infinities_reduce_as_the_interpreter)
{
	const int64_t R = 19, K = 21;
	ir_op ops[3] = {IR_OP_SUM, IR_OP_MEAN, IR_OP_MAX};
	for (int o = 0; o < 3; o++) {
		fx x;
		fx_init(&x, 0x2545f4914f6cdd1dull);
		ir_id a = input3(&x, IR_F32, 2, R, K, 0);
		ret(&x, reduce(&x, ops[o], a, 2, false));
		float *v = x.in[0];
		for (int64_t j = 0; j < K; j++)
			v[0 * K + j] = -0.0f;
		v[3 * K + 20] = NAN;
		v[5 * K + 0] = NAN;
		v[8 * K + 4] = INFINITY;
		v[8 * K + 9] = -INFINITY;
		v[16 * K + 2] = INFINITY;
		float want[19];
		for (int64_t r = 0; r < R; r++)
			want[r] = ref_row(ops[o], v + r * K, K);
		ck_assert(ops[o] == IR_OP_MAX ? signbit(want[0])
					      : !signbit(want[0]));
		ck_assert(isnan(want[3]) && isnan(want[5]));
		float *got = jit(&x, 2, R, NULL);
		check_bits(got, want, R, ir_op_table[ops[o]].name);
		ck_assert(ops[o] == IR_OP_MAX || isnan(got[8]));
		free(got);
		fx_fini(&x);
	}
}
END_TEST

/* Not a row reduction: a sum over the leading axis keeps its kernel
 * (tests/test_codegen_colred.c checks its bits), and its results still
 * match a sum in double within rounding. */
START_TEST(test_a_sum_over_the_leading_axis_still_matches_within_rounding)
{
	const int64_t R = 37, K = 29;
	fx x;
	fx_init(&x, 0x2545f4914f6cdd1dull);
	ir_id a = input3(&x, IR_F32, 2, R, K, 0);
	ret(&x, reduce(&x, IR_OP_SUM, a, 1, false));
	const float *v = x.in[0];
	float want[29];
	for (int64_t j = 0; j < K; j++) {
		double s = 0;
		for (int64_t r = 0; r < R; r++)
			s += v[r * K + j];
		want[j] = (float)s;
	}
	float *got = jit(&x, 2, K, NULL);
	ck_assert_double_le(tu_max_rel_err(got, want, (size_t)K, 1e-5, 1e-5), 1);
	free(got);
	fx_fini(&x);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("codegen_rowred");
	TCase *t = tcase_create("rows");
	tcase_set_timeout(t, 120);
	int n_lens = (int)(sizeof lens / sizeof *lens);
	tcase_add_loop_test(
		t,
		test_sum_mean_and_max_of_f32_rows_are_the_left_to_right_loops_bits,
		0, n_lens);
	tcase_add_loop_test(
		t,
		test_sum_and_max_of_i32_rows_are_the_left_to_right_loops_values,
		0, n_lens);
	tcase_add_loop_test(
		t, test_a_fused_operand_is_reduced_in_row_order_on_any_split, 0,
		n_lens);
	tcase_add_test(
		t,
		test_signed_zeros_nan_and_infinities_reduce_as_the_interpreter);
	tcase_add_test(
		t,
		test_a_sum_over_the_leading_axis_still_matches_within_rounding);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
