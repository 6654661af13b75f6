/*
 * test_codegen_longsum.c - float sums and means over long axes: more
 * than RED_SUM_PLAIN elements are summed in blocks of RED_SUM_BLOCK left
 * to right, the block sums then combined pairwise (docs/ops.md,
 * "Summation order"), in the interpreter and the generated code alike.
 *
 * Accuracy: sums and means of nonnegative float32 values (a bias
 * gradient of one sign, a mean of activations) over 4096 and 65536
 * rows and along rows of that length: the worst error over 16 or 64
 * outputs is within 1.5 eps sum|x| of the float64 sum, a bound that both
 * the plain left-to-right float sum and blocks of 256 added left to
 * right (the two orders before) fail on the same data, as asserted here
 * too; and so are whole-tensor sums and means to a scalar and those
 * over axes that do not merge.
 * Agreement: the JIT's results are the interpreter's bit for bit on long
 * and short axes, columns (kept outer axis or none), rows, whole tensors
 * and axes that do not merge (0 and 2 of a rank-3 tensor), at 1, 2 and
 * 3 threads, and for fused operands.
 */
#include "interp.h"
#include "red_fixture.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The interpreter's float32 result of f on x's one input (dims d, rank
 * r); n_out elements, malloc'd. */
static float *interp_f32(fx *x, const int64_t *d, int r, int64_t n_out)
{
	interp_tensor in, out;
	memset(&out, 0, sizeof out);
	ck_assert(interp_tensor_alloc(&x->g.ctx, &in, IR_F32, r, d));
	memcpy(in.data, x->in[0], (size_t)interp_tensor_numel(&in) * 4);
	interp_opts o = {.seed = 1};
	ck_assert_msg(interp_run(&x->g.ctx, x->g.m, x->g.f, &o, NULL, &in, &out),
		      "%s", tu_graph_diag(&x->g));
	ck_assert_int_eq(interp_tensor_numel(&out), n_out);
	float *res = malloc((size_t)n_out * 4);
	memcpy(res, out.data, (size_t)n_out * 4);
	interp_tensor_fini(&x->g.ctx, &in);
	interp_tensor_fini(&x->g.ctx, &out);
	return res;
}

/* Input 0 redrawn uniform in [0, 1): n values. */
static void nonnegative(fx *x, int64_t n)
{
	float *v = x->in[0];
	for (int64_t i = 0; i < n; i++)
		v[i] = (float)rnd(x, 1 << 24) / (float)(1 << 24);
}

/* The errors against float64 of sums of the n values v[0], v[s], v[2 s],
 * ..., in units of eps sum|x|: got (a float32 sum or mean, is_mean: its
 * error scaled by n, less the rounding of its division, half an ulp), and of two
 * other float32 orders of the same values: the left-to-right sum and the
 * blocks of 256 added left to right (the order before the blocks of 32
 * combined pairwise). */
typedef struct errs {
	double got, ltr, b256;
} errs;

static errs sum_errors(float got, const float *v, int64_t n, int64_t s,
		       bool is_mean)
{
	double ref = 0, a = 0;
	float l = 0.0f, b = 0.0f, part = 0.0f;
	for (int64_t i = 0; i < n; i++) {
		ref += v[i * s];
		a += fabs(v[i * s]);
		l = l + v[i * s];
		part = part + v[i * s];
		if ((i + 1) % 256 == 0 || i + 1 == n) {
			b = b + part;
			part = 0.0f;
		}
	}
	double unit = FLT_EPSILON * a;
	errs e = {fabs((double)got - ref) / unit, fabs((double)l - ref) / unit,
		  fabs((double)b - ref) / unit};
	if (is_mean) {
		double m = ref / (double)n, d = fabs((double)got - m);
		double half_ulp = 0.5 * FLT_EPSILON * fabs(m);
		d = d > half_ulp ? d - half_ulp : 0;
		e.got = d * (double)n / unit;
	}
	return e;
}

/* op (sum or mean) over axis `axis` of an (R, C) input of values in
 * [0, 1), in the interpreter and the JIT (1, 2 and 3 threads): the JIT's
 * bits are the interpreter's; the worst error over the outputs is at
 * most bound eps sum|x|, and that of the two orders before is over it. */
static void check_long(ir_op op, int64_t R, int64_t C, int axis, double bound)
{
	fx x;
	fx_init(&x, 0x853c49e6748fea9bull);
	int64_t d[2] = {R, C}, n_out = axis ? R : C, n = axis ? C : R;
	ir_id a = input(&x, IR_F32, 2, d);
	nonnegative(&x, R * C);
	ret(&x, reduce(&x, op, a, 1u << axis, false));
	float *want = interp_f32(&x, d, 2, n_out);
	char what[96];
	snprintf(what, sizeof what, "%s of (%lld, %lld) over axis %d",
		 ir_op_table[op].name, (long long)R, (long long)C, axis);
	errs w = {0, 0, 0};
	for (int64_t o = 0; o < n_out; o++) {
		errs e = sum_errors(want[o],
				    (const float *)x.in[0] + (axis ? o * C : o),
				    n, axis ? 1 : C, op == IR_OP_MEAN);
		w.got = e.got > w.got ? e.got : w.got;
		w.ltr = e.ltr > w.ltr ? e.ltr : w.ltr;
		w.b256 = e.b256 > w.b256 ? e.b256 : w.b256;
	}
	ck_assert_msg(w.got <= bound, "%s: error %g eps sum|x|", what, w.got);
	ck_assert_msg(w.ltr > bound && w.b256 > bound,
		      "%s: the left-to-right "
		      "sum's error, %g eps sum|x|, or that of blocks of 256 "
		      "added left to right, %g, is within the bound",
		      what, w.ltr, w.b256);
	check_bits_at_threads(&x, n_out, want, what);
	free(want);
	fx_fini(&x);
}

START_TEST(test_long_sums_and_means_are_within_1_5_eps_of_float64)
{
	check_long(IR_OP_SUM, 4096, 64, 0, 1.5);
	check_long(IR_OP_MEAN, 4096, 64, 0, 1.5);
	check_long(IR_OP_SUM, 65536, 16, 0, 1.5);
	check_long(IR_OP_MEAN, 65536, 16, 0, 1.5);
	check_long(IR_OP_SUM, 64, 4096, 1, 1.5);
	check_long(IR_OP_MEAN, 64, 4096, 1, 1.5);
	check_long(IR_OP_SUM, 16, 65536, 1, 1.5);
}
END_TEST

/* op (sum or mean) of a whole (R, C) tensor of values in [0, 1), to a
 * scalar (a loss's mean over B*T): within bound eps sum|x| of float64,
 * the two orders before over it, the JIT's bits the interpreter's. */
static void check_whole(ir_op op, int64_t R, int64_t C, double bound)
{
	fx x;
	fx_init(&x, 0xda942042e4dd58b5ull);
	int64_t d[2] = {R, C};
	ir_id a = input(&x, IR_F32, 2, d);
	nonnegative(&x, R * C);
	ret(&x, reduce(&x, op, a, 3, false));
	float *want = interp_f32(&x, d, 2, 1);
	char what[96];
	snprintf(what, sizeof what, "whole %s of (%lld, %lld)",
		 ir_op_table[op].name, (long long)R, (long long)C);
	errs e = sum_errors(want[0], x.in[0], R * C, 1, op == IR_OP_MEAN);
	ck_assert_msg(e.got <= bound, "%s: error %g eps sum|x|", what, e.got);
	ck_assert_msg(e.ltr > bound && e.b256 > bound,
		      "%s: the left-to-right "
		      "sum's error, %g eps sum|x|, or that of blocks of 256 "
		      "added left to right, %g, is within the bound",
		      what, e.ltr, e.b256);
	check_bits_at_threads(&x, 1, want, what);
	free(want);
	fx_fini(&x);
}

/* op over axes 0 and 2 of an (A, B, C) tensor of values in [0, 1),
 * axes that do not merge: as check_whole, for each of the B outputs. */
static void check_apart(ir_op op, int64_t A, int64_t B, int64_t C, double bound)
{
	fx x;
	fx_init(&x, 0x94d049bb133111ebull);
	int64_t d[3] = {A, B, C};
	ir_id a = input(&x, IR_F32, 3, d);
	nonnegative(&x, A * B * C);
	ret(&x, reduce(&x, op, a, 5, false));
	float *want = interp_f32(&x, d, 3, B);
	char what[96];
	snprintf(what, sizeof what, "%s over axes 0 and 2 of (%lld, %lld, %lld)",
		 ir_op_table[op].name, (long long)A, (long long)B, (long long)C);
	float *v = malloc((size_t)(A * C) * 4);
	const float *in = x.in[0];
	errs w = {0, 0, 0};
	for (int64_t b = 0; b < B; b++) {
		for (int64_t i = 0; i < A; i++)
			memcpy(v + i * C, in + (i * B + b) * C, (size_t)C * 4);
		errs e = sum_errors(want[b], v, A * C, 1, op == IR_OP_MEAN);
		w.got = e.got > w.got ? e.got : w.got;
		w.ltr = e.ltr > w.ltr ? e.ltr : w.ltr;
		w.b256 = e.b256 > w.b256 ? e.b256 : w.b256;
	}
	ck_assert_msg(w.got <= bound, "%s: error %g eps sum|x|", what, w.got);
	ck_assert_msg(w.ltr > bound && w.b256 > bound,
		      "%s: the left-to-right "
		      "sum's error, %g eps sum|x|, or that of blocks of 256 "
		      "added left to right, %g, is within the bound",
		      what, w.ltr, w.b256);
	check_bits_at_threads(&x, B, want, what);
	free(v);
	free(want);
	fx_fini(&x);
}

START_TEST(test_whole_and_apart_sums_are_within_1_5_eps_of_float64)
{
	check_whole(IR_OP_SUM, 256, 256, 1.5);
	check_whole(IR_OP_MEAN, 256, 256, 1.5);
	check_whole(IR_OP_MEAN, 1000, 333, 1.5);
	check_apart(IR_OP_SUM, 256, 16, 256, 1.5);
	check_apart(IR_OP_MEAN, 256, 16, 256, 1.5);
}
END_TEST

/* Reduction shapes: dims (rank 1 to 3) and the reduced axes. */
typedef struct shape {
	int rank;
	int64_t d[3];
	uint32_t axes;
} shape;

static const shape shapes[] = {
	{2, {4096, 33, 0}, 1},  /* columns, several blocks and a rest */
	{2, {300, 4100, 0}, 1}, /* a second tile of columns */
	{3, {3, 700, 17}, 2},   /* a kept outer axis, split over threads */
	{3, {2, 600, 5}, 3},    /* (B, T) of (B, T, D) */
	{2, {7, 1000, 0}, 2},   /* rows: tiles of 256 columns and a rest */
	{2, {5, 257, 0}, 2},    /* rows just past a plain sum */
	{2, {300, 9, 0}, 1},    /* short columns: 9 blocks and a rest */
	{2, {256, 9, 0}, 1},    /* the longest plain sum */
	{2, {9, 256, 0}, 2},    /* rows of the longest plain sum */
	{2, {100, 7, 0}, 1},    /* short axes: left to right */
	{2, {7, 100, 0}, 2},
	{2, {300, 9, 0}, 3},  /* a whole tensor to a scalar, long */
	{1, {5000, 0, 0}, 1}, /* a whole rank-1 tensor, a short last group */
	{1, {200, 0, 0}, 1},  /* a short whole tensor: left to right */
	{3, {40, 5, 30}, 5},  /* axes 0 and 2: they do not merge */
	{3, {3, 7, 100}, 5},  /* the same, 300 inputs per output */
	{3, {3, 70, 17}, 5},  /* the same, short */
	{3, {9, 40, 40}, 7},  /* a whole rank-3 tensor */
};

/* Sum and mean of shapes[_i] (values in [-2, 2)): the JIT's bits are the
 * interpreter's at 1, 2 and 3 threads. */
START_TEST(test_the_jit_sums_in_the_interpreters_order)
{
	const shape *s = &shapes[_i];
	ir_op ops[2] = {IR_OP_SUM, IR_OP_MEAN};
	for (int o = 0; o < 2; o++) {
		fx x;
		fx_init(&x, 0x2545f4914f6cdd1dull + (uint64_t)_i);
		ir_id a = input(&x, IR_F32, s->rank, s->d);
		ret(&x, reduce(&x, ops[o], a, s->axes, false));
		int64_t n_out = 1;
		for (int i = 0; i < s->rank; i++)
			n_out *= s->axes & (1u << i) ? 1 : s->d[i];
		float *want = interp_f32(&x, s->d, s->rank, n_out);
		char what[96];
		snprintf(what, sizeof what, "%s of shape %d (%lld, %lld, %lld)",
			 ir_op_table[ops[o]].name, _i, (long long)s->d[0],
			 (long long)s->d[1], (long long)s->d[2]);
		check_bits_at_threads(&x, n_out, want, what);
		free(want);
		fx_fini(&x);
	}
}
END_TEST

/* reduce(x * x) with the product fused, x of (rows, cols): the
 * interpreter's bits at 1, 2 and 3 threads. */
static void check_fused_square(uint64_t seed, int64_t rows, int64_t cols,
			       ir_op op, uint32_t axes, int64_t n_out,
			       const char *what)
{
	fx x;
	fx_init(&x, seed);
	int64_t d[2] = {rows, cols};
	ir_id a = input(&x, IR_F32, 2, d);
	ret(&x, reduce(&x, op, op2(&x, IR_OP_MUL, a, a), axes, false));
	float *want = interp_f32(&x, d, 2, n_out);
	check_fused_at_threads(&x, n_out, want, 1, what);
	free(want);
	fx_fini(&x);
}

/* A fused operand, x * x summed over 1000 rows of 19 columns. */
START_TEST(test_a_fused_operand_sums_in_blocks)
{
	check_fused_square(0x9e3779b97f4a7c15ull, 1000, 19, IR_OP_SUM, 1, 19,
			   "fused sum");
}
END_TEST

/* A loss's mean over B*T, mean(x * x) over all of (64, 64). */
START_TEST(test_a_fused_whole_mean_sums_in_blocks)
{
	check_fused_square(0x5851f42d4c957f2dull, 64, 64, IR_OP_MEAN, 3, 1,
			   "fused whole mean");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("codegen_longsum");
	TCase *tc = tcase_create("longsum");
	tcase_add_test(tc,
		       test_long_sums_and_means_are_within_1_5_eps_of_float64);
	tcase_add_loop_test(tc, test_the_jit_sums_in_the_interpreters_order, 0,
			    (int)(sizeof shapes / sizeof shapes[0]));
	tcase_add_test(tc, test_a_fused_operand_sums_in_blocks);
	tcase_add_test(tc,
		       test_whole_and_apart_sums_are_within_1_5_eps_of_float64);
	tcase_add_test(tc, test_a_fused_whole_mean_sums_in_blocks);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
