/*
 * test_interp_nn.c - the reference interpreter's softmax family, layer
 * norm, dropout, embedding and losses against hand computations and the
 * d2l book's examples; float64 mode against float32 mode.
 */
#include "test_interp.h"
#include "testutil.h"

/* ---- softmax ----------------------------------------------------------------- */

START_TEST(test_softmax_matches_hand_values_and_rows_sum_to_one)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2, 3), F32S(1, 2, 3, 1000, 1000, 1000));
	/* e^k / (e + e^2 + e^3); the large row must not overflow. */
	ti_expect(&x, ti_op1(&x, IR_OP_SOFTMAX, a, NULL), SHAPE(2, 3),
		  DBL(0.09003057, 0.24472847, 0.66524096, 1 / 3.0, 1 / 3.0,
		      1 / 3.0),
		  1e-6);
	ti_expect(&x, ti_op1(&x, IR_OP_LOG_SOFTMAX, a, NULL), SHAPE(2, 3),
		  DBL(-2.40760596, -1.40760596, -0.40760596, -1.09861229,
		      -1.09861229, -1.09861229),
		  1e-6);
	ti_fini(&x);
}
END_TEST

/* d2l's rand(2, 2, 4), fixed. */
static const float scores[16] = {0.5f, 0.1f, 0.9f, 0.3f, 0.2f, 0.8f,
				 0.4f, 0.6f, 0.7f, 0.3f, 0.1f, 0.5f,
				 0.9f, 0.2f, 0.6f, 0.4f};

static double row_sum(const interp_tensor *r, int row, int K)
{
	double s = 0;
	for (int j = 0; j < K; j++)
		s += interp_tensor_get(r, row * K + j);
	return s;
}

START_TEST(test_masked_softmax_zeroes_positions_past_the_valid_length)
{
	ti_fx x;
	ti_init(&x);
	ir_id s = ti_cf(&x, SHAPE(2, 2, 4), scores);
	ir_id v = ti_ci(&x, SHAPE(2), I32S(2, 3));
	ir_attr fill = {.fill = -1e6};
	interp_tensor r;
	ck_assert(ti_run(&x, ti_op2(&x, IR_OP_MASKED_SOFTMAX, s, v, &fill), &r));
	for (int row = 0; row < 4; row++) {
		int valid = row < 2 ? 2 : 3;
		for (int j = 0; j < 4; j++)
			ck_assert_msg((interp_tensor_get(&r, row * 4 + j) > 0) ==
					      (j < valid),
				      "row %d col %d", row, j);
		ck_assert_double_eq_tol(row_sum(&r, row, 4), 1, 1e-6);
	}
	/* Row 0: softmax([0.5, 0.1]) = [1, e^-0.4] / (1 + e^-0.4). */
	ck_assert_double_eq_tol(interp_tensor_get(&r, 0), 0.59868766, 1e-6);
	ck_assert_double_eq_tol(interp_tensor_get(&r, 1), 0.40131234, 1e-6);
	interp_tensor_fini(&x.ctx, &r);
	ti_fini(&x);
}
END_TEST

START_TEST(test_masked_softmax_takes_per_query_valid_lengths)
{
	ti_fx x;
	ti_init(&x);
	ir_id s = ti_cf(&x, SHAPE(2, 2, 4), scores);
	ir_id v = ti_ci(&x, SHAPE(2, 2), I32S(1, 3, 2, 4));
	ir_attr fill = {.fill = -1e6};
	interp_tensor r;
	ck_assert(ti_run(&x, ti_op2(&x, IR_OP_MASKED_SOFTMAX, s, v, &fill), &r));
	int valid[] = {1, 3, 2, 4};
	for (int row = 0; row < 4; row++) {
		for (int j = 0; j < 4; j++)
			ck_assert((interp_tensor_get(&r, row * 4 + j) > 0) ==
				  (j < valid[row]));
		ck_assert_double_eq_tol(row_sum(&r, row, 4), 1, 1e-6);
	}
	ck_assert_double_eq(interp_tensor_get(&r, 0), 1);
	interp_tensor_fini(&x.ctx, &r);
	ti_fini(&x);
}
END_TEST

START_TEST(test_masked_softmax_row_of_length_zero_is_uniform)
{
	ti_fx x;
	ti_init(&x);
	ir_id s = ti_cf(&x, SHAPE(2, 1, 4), scores);
	ir_id v = ti_ci(&x, SHAPE(2), I32S(0, 4));
	ir_attr fill = {.fill = -1e6};
	interp_tensor r;
	ck_assert(ti_run(&x, ti_op2(&x, IR_OP_MASKED_SOFTMAX, s, v, &fill), &r));
	for (int j = 0; j < 4; j++)
		ck_assert_double_eq(interp_tensor_get(&r, j), 0.25);
	ck_assert_double_eq_tol(row_sum(&r, 1, 4), 1, 1e-6);
	interp_tensor_fini(&x.ctx, &r);
	ti_fini(&x);
}
END_TEST

START_TEST(test_masked_softmax_stretches_size_one_valid_dims)
{
	ti_fx x;
	ti_init(&x);
	/* scores [2, 2, 2, 4] (B, H, Q, K), valid [2, 1]: per batch, all heads. */
	float s16[32];
	for (int i = 0; i < 32; i++)
		s16[i] = scores[i % 16];
	ir_id s = ti_cf(&x, SHAPE(2, 2, 2, 4), s16);
	ir_id v = ti_ci(&x, SHAPE(2, 1), I32S(1, 2));
	ir_attr fill = {.fill = -1e6};
	interp_tensor r;
	ck_assert(ti_run(&x, ti_op2(&x, IR_OP_MASKED_SOFTMAX, s, v, &fill), &r));
	for (int row = 0; row < 8; row++)
		for (int j = 0; j < 4; j++)
			ck_assert((interp_tensor_get(&r, row * 4 + j) > 0) ==
				  (j < (row < 4 ? 1 : 2)));
	interp_tensor_fini(&x.ctx, &r);
	ti_fini(&x);
}
END_TEST

/* d2l 10.3.3: keys all ones make every score of a query equal, so the
 * output is the mean of the first valid rows of the values. */
START_TEST(test_dot_product_attention_gives_the_books_example)
{
	ti_fx x;
	ti_init(&x);
	float ones[40], vals[80];
	for (int i = 0; i < 40; i++)
		ones[i] = 1;
	for (int i = 0; i < 80; i++)
		vals[i] = (float)(i % 40);
	ir_id q = ti_cf(&x, SHAPE(2, 1, 2), F32S(0.3f, -1.2f, 0.8f, 0.5f));
	ir_id k = ti_cf(&x, SHAPE(2, 10, 2), ones);
	ir_id v = ti_cf(&x, SHAPE(2, 10, 4), vals);
	ir_id valid = ti_ci(&x, SHAPE(2), I32S(2, 6));
	ir_attr tb = {.matmul = {false, true}}, mm = {0}, fill = {.fill = -1e6};
	ir_id sc = ti_op2(&x, IR_OP_DIV, ti_op2(&x, IR_OP_MATMUL, q, k, &tb),
			  ti_cf(&x, SCALAR, F32S((float)sqrt(2.0))), NULL);
	ir_id w = ti_op2(&x, IR_OP_MASKED_SOFTMAX, sc, valid, &fill);
	ir_id out = ti_op2(&x, IR_OP_MATMUL, w, v, &mm);
	interp_tensor r;
	ck_assert(ti_run(&x, out, &r));
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	interp_tensor_print(&r, f);
	fclose(f);
	ck_assert_str_eq(buf, "f32[2, 1, 4]\n"
			      "[[[ 2.0000,  3.0000,  4.0000,  5.0000]],\n\n"
			      " [[10.0000, 11.0000, 12.0000, 13.0000]]]");
	free(buf);
	interp_tensor_fini(&x.ctx, &r);
	ti_fini(&x);
}
END_TEST

/* ---- layer norm ------------------------------------------------------------------ */

START_TEST(test_layer_norm_normalizes_the_last_axis)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(2, 2), F32S(1, 2, 2, 3));
	ir_id g = ti_cf(&x, SHAPE(2), F32S(1, 1));
	ir_id b = ti_cf(&x, SHAPE(2), F32S(0, 0));
	ir_attr eps = {.eps = 1e-5};
	/* mean 1.5, var 0.25: +-0.5 / sqrt(0.25 + 1e-5) = +-0.99998 */
	double y = 0.5 / sqrt(0.25 + 1e-5);
	ti_expect(&x, ti_op3(&x, IR_OP_LAYER_NORM, a, g, b, &eps), SHAPE(2, 2),
		  DBL(-y, y, -y, y), 1e-6);
	ti_fini(&x);
}
END_TEST

START_TEST(test_layer_norm_scales_by_gamma_and_shifts_by_beta)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_cf(&x, SHAPE(1, 4), F32S(2, 4, 4, 6));
	ir_id g = ti_cf(&x, SHAPE(4), F32S(1, 2, 3, 4));
	ir_id b = ti_cf(&x, SHAPE(4), F32S(10, 20, 30, 40));
	ir_attr eps = {.eps = 0};
	/* mean 4, var (4 + 0 + 0 + 4) / 4 = 2: (x - 4) / sqrt 2 */
	double r2 = sqrt(2.0);
	ti_expect(&x, ti_op3(&x, IR_OP_LAYER_NORM, a, g, b, &eps), SHAPE(1, 4),
		  DBL(10 - r2, 20, 30, 40 + 4 * r2), 1e-5);
	ti_fini(&x);
}
END_TEST

/* ---- dropout ------------------------------------------------------------------- */

enum { DROP_N = 10000 };

/* Runs dropout(ones[DROP_N], p) under opts. */
static void run_dropout(ti_fx *x, double p, const interp_opts *o,
			interp_tensor *r)
{
	static const float one = 1;
	float *v = malloc(DROP_N * sizeof *v);
	ck_assert_ptr_nonnull(v);
	for (int i = 0; i < DROP_N; i++)
		v[i] = one;
	ir_id a = ti_cf(x, SHAPE(DROP_N), v);
	free(v);
	ir_attr d = {.dropout = {p, 3}};
	ck_assert(ti_run_opts(x, ti_op1(x, IR_OP_DROPOUT, a, &d), o, NULL, r));
}

START_TEST(test_dropout_is_the_identity_in_evaluation)
{
	ti_fx x;
	ti_init(&x);
	interp_opts o = {.seed = 7, .step = 1};
	interp_tensor r;
	run_dropout(&x, 0.5, &o, &r);
	for (int i = 0; i < DROP_N; i++)
		ck_assert_double_eq(interp_tensor_get(&r, i), 1);
	interp_tensor_fini(&x.ctx, &r);
	ti_fini(&x);
}
END_TEST

START_TEST(test_dropout_in_training_keeps_about_1_minus_p_scaled_up)
{
	ti_fx x;
	ti_init(&x);
	interp_opts o = {.is_training = true, .seed = 7, .step = 1};
	interp_tensor r;
	run_dropout(&x, 0.3, &o, &r);
	int kept = 0;
	for (int i = 0; i < DROP_N; i++) {
		double v = interp_tensor_get(&r, i);
		if (v == 0)
			continue;
		kept++;
		ck_assert_double_eq(v, (float)(1 / (float)(1 - 0.3)));
	}
	/* 7000 expected; the binomial's sd is ~46. */
	ck_assert_int_gt(kept, 6800);
	ck_assert_int_lt(kept, 7200);
	interp_tensor_fini(&x.ctx, &r);
	ti_fini(&x);
}
END_TEST

START_TEST(test_dropout_repeats_for_one_seed_and_step_and_changes_with_step)
{
	ti_fx x;
	ti_init(&x);
	interp_opts o = {.is_training = true, .seed = 7, .step = 1};
	interp_tensor r1, r2, r3;
	run_dropout(&x, 0.5, &o, &r1);
	run_dropout(&x, 0.5, &o, &r2);
	o.step = 2;
	run_dropout(&x, 0.5, &o, &r3);
	int same = 0, differ = 0;
	for (int i = 0; i < DROP_N; i++) {
		same += interp_tensor_get(&r1, i) == interp_tensor_get(&r2, i);
		differ += interp_tensor_get(&r1, i) != interp_tensor_get(&r3, i);
	}
	ck_assert_int_eq(same, DROP_N);
	ck_assert_int_gt(differ, DROP_N / 3);
	interp_tensor_fini(&x.ctx, &r1);
	interp_tensor_fini(&x.ctx, &r2);
	interp_tensor_fini(&x.ctx, &r3);
	ti_fini(&x);
}
END_TEST

/* ---- embedding ------------------------------------------------------------------- */

START_TEST(test_embedding_gathers_rows_of_the_table)
{
	ti_fx x;
	ti_init(&x);
	ir_id ids = ti_ci(&x, SHAPE(2, 2), I32S(2, 0, 1, 2));
	ir_id tab = ti_cf(&x, SHAPE(3, 2), F32S(0, 1, 10, 11, 20, 21));
	ti_expect(&x, ti_op2(&x, IR_OP_EMBEDDING, ids, tab, NULL),
		  SHAPE(2, 2, 2), DBL(20, 21, 0, 1, 10, 11, 20, 21), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_embedding_index_out_of_range_is_an_error_not_a_crash)
{
	static const int32_t bad[][3] = {{1, 205, 0}, {-1, 0, 0}};
	static const char *msg[] =
		{"error: embedding: index 205 out of range [0, 184)",
		 "error: embedding: index -1 out of range [0, 184)"};
	static const float tab[184 * 2];
	for (int i = 0; i < 2; i++) {
		ti_fx x;
		ti_init(&x);
		ir_id ids = ti_ci(&x, SHAPE(3), bad[i]);
		ir_id t = ti_cf(&x, SHAPE(184, 2), tab);
		ti_expect_error(&x, ti_op2(&x, IR_OP_EMBEDDING, ids, t, NULL),
				msg[i]);
		ti_fini(&x);
	}
}
END_TEST

START_TEST(test_one_hot_marks_each_id_and_zeroes_ids_out_of_range)
{
	ti_fx x;
	ti_init(&x);
	ir_id ids = ti_ci(&x, SHAPE(2, 2), I32S(2, 0, -1, 3));
	ir_type t = ti_type(IR_F32, 3, (const int64_t[]){2, 2, 3});
	ti_expect(&x, ti_node(&x, IR_OP_ONE_HOT, &ids, 1, NULL, &t),
		  SHAPE(2, 2, 3), DBL(0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_embedding_grad_sums_the_rows_of_each_id)
{
	ti_fx x;
	ti_init(&x);
	ir_id ids = ti_ci(&x, SHAPE(2, 2), I32S(2, 0, 2, 2));
	ir_id g = ti_cf(&x, SHAPE(2, 2, 2),
			F32S(1, 2, 10, 20, 100, 200, 0.5f, 0.25f));
	ir_type t = ti_type(IR_F32, 2, (const int64_t[]){4, 2});
	ir_id args[] = {ids, g};
	/* row 2: 1 + 100 + 0.5, 2 + 200 + 0.25; row 0: 10, 20; 1 and 3 none */
	ti_expect(&x, ti_node(&x, IR_OP_EMBEDDING_GRAD, args, 2, NULL, &t),
		  SHAPE(4, 2), DBL(10, 20, 0, 0, 101.5, 202.25, 0, 0), 0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_embedding_grad_index_out_of_range_is_an_error)
{
	ti_fx x;
	ti_init(&x);
	ir_id ids = ti_ci(&x, SHAPE(2), I32S(1, 4));
	ir_id g = ti_cf(&x, SHAPE(2, 1), F32S(1, 2));
	ir_type t = ti_type(IR_F32, 2, (const int64_t[]){4, 1});
	ir_id args[] = {ids, g};
	ti_expect_error(&x, ti_node(&x, IR_OP_EMBEDDING_GRAD, args, 2, NULL, &t),
			"error: embedding_grad: index 4 out of range [0, 4)");
	ti_fini(&x);
}
END_TEST

/* ---- losses ---------------------------------------------------------------------- */

START_TEST(test_mse_loss_is_the_mean_squared_error)
{
	ti_fx x;
	ti_init(&x);
	ir_id p = ti_cf(&x, SHAPE(2, 2), F32S(1, 2, 3, 4));
	ir_id t = ti_cf(&x, SHAPE(2, 2), F32S(0, 2, 5, 3));
	/* (1 + 0 + 4 + 1) / 4 */
	ti_expect(&x, ti_op2(&x, IR_OP_MSE_LOSS, p, t, NULL), SCALAR, DBL(1.5),
		  0);
	ti_fini(&x);
}
END_TEST

START_TEST(test_cross_entropy_matches_a_hand_computation)
{
	ti_fx x;
	ti_init(&x);
	ir_id lg = ti_cf(&x, SHAPE(2, 3), F32S(1, 2, 3, 1, 1, 1));
	ir_id lb = ti_ci(&x, SHAPE(2), I32S(2, 0));
	/* log(1 + e^-1 + e^-2) and log 3 */
	ti_expect(&x, ti_op2(&x, IR_OP_CROSS_ENTROPY, lg, lb, NULL), SHAPE(2),
		  DBL(0.40760596, 1.09861229), 1e-6);
	ti_fini(&x);
}
END_TEST

START_TEST(test_cross_entropy_label_out_of_range_is_an_error)
{
	ti_fx x;
	ti_init(&x);
	ir_id lg = ti_cf(&x, SHAPE(2, 3), F32S(1, 2, 3, 1, 1, 1));
	ir_id lb = ti_ci(&x, SHAPE(2), I32S(2, 3));
	ti_expect_error(&x, ti_op2(&x, IR_OP_CROSS_ENTROPY, lg, lb, NULL),
			"cross_entropy: label 3 out of range [0, 3)");
	ti_fini(&x);
}
END_TEST

static ir_id ce_grad(ti_fx *x, ir_id lg, ir_id lb, ir_id g)
{
	ir_id args[3] = {lg, lb, g};
	return ti_node(x, IR_OP_CROSS_ENTROPY_GRAD, args, 3, NULL, NULL);
}

/* The hand-computed case of both tests below: logits (2, 3), labels
 * and the upstream gradient, into args. */
static void ce_case(ti_fx *x, ir_id args[3])
{
	args[0] = ti_cf(x, SHAPE(2, 3), F32S(1, 2, 3, 1, 1, 1));
	args[1] = ti_ci(x, SHAPE(2), I32S(2, 0));
	args[2] = ti_cf(x, SHAPE(2), F32S(2, -1));
}

START_TEST(test_cross_entropy_grad_matches_a_hand_computation)
{
	ti_fx x;
	ti_init(&x);
	ir_id args[3];
	ce_case(&x, args);
	/* 2 (softmax(1, 2, 3) - (0, 0, 1)); -(1/3 - (1, 0, 0)) */
	ti_expect(&x, ce_grad(&x, args[0], args[1], args[2]), SHAPE(2, 3),
		  DBL(0.18006114, 0.48945694, -0.66951808, 2.0 / 3, -1.0 / 3,
		      -1.0 / 3),
		  1e-6);
	ti_fini(&x);
}
END_TEST

/* [0] the gradient above; [1] per row the loss at column 0, then
 * exp(x - max) at the other columns. */
START_TEST(test_cross_entropy_with_grad_matches_a_hand_computation)
{
	ti_fx x;
	ti_init(&x);
	ir_id args[3];
	ce_case(&x, args);
	ti_expect(&x,
		  ti_node(&x, IR_OP_CROSS_ENTROPY_WITH_GRAD, args, 3, NULL, NULL),
		  SHAPE(2, 2, 3),
		  DBL(0.18006114, 0.48945694, -0.66951808, 2.0 / 3, -1.0 / 3,
		      -1.0 / 3, 0.40760596, 0.36787944, 1, 1.09861229, 1, 1),
		  1e-6);
	ir_id bad = ti_ci(&x, SHAPE(2), I32S(0, -1));
	ir_id bad_args[3] = {args[0], bad, args[2]};
	ti_expect_error(&x,
			ti_node(&x, IR_OP_CROSS_ENTROPY_WITH_GRAD, bad_args, 3,
				NULL, NULL),
			"cross_entropy_with_grad: label -1 out of range [0, 3)");
	ti_fini(&x);
}
END_TEST

/* The fused op and softmax - one_hot, times g, do the same arithmetic
 * in the same order: equal to the bit in f32 and in f64, non-finite
 * rows (a NaN, an infinity, all -inf) included. */
START_TEST(test_cross_entropy_grad_equals_the_unfused_graph_exactly)
{
	static const float v[] = {0.5f,      -1,        2,         0.25f,
				  NAN,       1,         3,         INFINITY,
				  -INFINITY, -INFINITY, -INFINITY, -INFINITY,
				  7,         INFINITY,  7,         -3};
	for (int f64 = 0; f64 < 2; f64++) {
		ti_fx x;
		ti_init(&x);
		ir_id lg = ti_cf(&x, SHAPE(4, 4), v);
		ir_id lb = ti_ci(&x, SHAPE(4), I32S(1, 0, 3, 3));
		ir_id g = ti_cf(&x, SHAPE(4), F32S(0.3f, -2, 1, 1.5f));
		ir_type gt = {.dtype = IR_F32,
			      .rank = 2,
			      .dims = {ir_dim_static(4), ir_dim_static(1)}};
		ir_type ot = {.dtype = IR_F32,
			      .rank = 2,
			      .dims = {ir_dim_static(4), ir_dim_static(4)}};
		ir_id oh = ti_node(&x, IR_OP_ONE_HOT, &lb, 1, NULL, &ot);
		ir_id gk = ti_node(&x, IR_OP_RESHAPE, &g, 1, NULL, &gt);
		ir_id ref = ti_op2(&x, IR_OP_MUL,
				   ti_op2(&x, IR_OP_SUB,
					  ti_op1(&x, IR_OP_SOFTMAX, lg, NULL),
					  oh, NULL),
				   gk, NULL);
		ir_id got = ce_grad(&x, lg, lb, g);
		interp_opts o = {.is_f64 = f64};
		interp_tensor a, b;
		ck_assert(ti_run_opts(&x, ref, &o, NULL, &a));
		ck_assert(ti_run_opts(&x, got, &o, NULL, &b));
		int nan = 0;
		for (int64_t i = 0; i < 16; i++) {
			double p = interp_tensor_get(&a, i),
			       q = interp_tensor_get(&b, i);
			nan += isnan(q);
			ck_assert_msg(isnan(p) ? isnan(q) : p == q,
				      "f64 %d [%lld]: %g vs %g", f64,
				      (long long)i, q, p);
		}
		ck_assert_int_eq(nan,
				 12); /* rows 1-3: NaN, -inf - -inf, inf - inf */
		interp_tensor_fini(&x.ctx, &a);
		interp_tensor_fini(&x.ctx, &b);
		ti_fini(&x);
	}
}
END_TEST

START_TEST(test_cross_entropy_grad_label_out_of_range_is_an_error)
{
	ti_fx x;
	ti_init(&x);
	ir_id lg = ti_cf(&x, SHAPE(2, 3), F32S(1, 2, 3, 1, 1, 1));
	ir_id lb = ti_ci(&x, SHAPE(2), I32S(0, -1));
	ir_id g = ti_cf(&x, SHAPE(2), F32S(1, 1));
	ti_expect_error(&x, ce_grad(&x, lg, lb, g),
			"cross_entropy_grad: label -1 out of range [0, 3)");
	ti_fini(&x);
}
END_TEST

START_TEST(test_integer_division_by_zero_is_an_error)
{
	ti_fx x;
	ti_init(&x);
	ir_id a = ti_ci(&x, SHAPE(2), I32S(7, -7));
	ir_id b = ti_ci(&x, SHAPE(2), I32S(2, 0));
	/* The shape rule takes f32 only; build as the reader would. */
	ir_type t = ti_type(IR_I32, SHAPE(2));
	ir_id args[] = {a, b};
	ir_id d = ir_graph_append(&x.ctx, &x.f->g, IR_OP_DIV, args, 2, NULL, &t,
				  (ir_loc){0});
	ti_expect_error(&x, d, "div: integer division by 0");
	ti_fini(&x);
}
END_TEST

/* ---- float64 mode ------------------------------------------------------------------ */

/* layer_norm(softmax(a @ w) * 3, gamma, beta) on fixed pseudo-random data. */
static ir_id build_mixed_graph(ti_fx *x)
{
	float a[2 * 3 * 4], w[4 * 5], g[5], b[5];
	for (int i = 0; i < 24; i++)
		a[i] = (float)sin(i * 1.3);
	for (int i = 0; i < 20; i++)
		w[i] = (float)cos(i * 0.7);
	for (int i = 0; i < 5; i++) {
		g[i] = 1 + 0.1f * (float)i;
		b[i] = 0.05f * (float)i;
	}
	ir_attr mm = {0}, eps = {.eps = 1e-5};
	ir_id p = ti_op2(x, IR_OP_MATMUL, ti_cf(x, SHAPE(2, 3, 4), a),
			 ti_cf(x, SHAPE(4, 5), w), &mm);
	ir_id s = ti_op2(x, IR_OP_MUL, ti_op1(x, IR_OP_SOFTMAX, p, NULL),
			 ti_cf(x, SCALAR, F32S(3)), NULL);
	return ti_op3(x, IR_OP_LAYER_NORM, s, ti_cf(x, SHAPE(5), g),
		      ti_cf(x, SHAPE(5), b), &eps);
}

START_TEST(test_f64_mode_agrees_with_f32_mode)
{
	ti_fx x;
	ti_init(&x);
	ir_id out = build_mixed_graph(&x);
	interp_opts o32 = {0}, o64 = {.is_f64 = true};
	interp_tensor r32, r64;
	ck_assert(ti_run_opts(&x, out, &o32, NULL, &r32));
	ck_assert(ti_run_opts(&x, out, &o64, NULL, &r64));
	ck_assert_int_eq(r32.dtype, IR_F32);
	ck_assert_int_eq(r64.dtype, IR_F64);
	ck_assert_int_eq(interp_tensor_numel(&r64), 30);
	double worst = 0;
	for (int i = 0; i < 30; i++) {
		double e = fabs(interp_tensor_get(&r32, i) -
				interp_tensor_get(&r64, i));
		worst = e > worst ? e : worst;
	}
	ck_assert_double_lt(worst, 1e-5);
	ck_assert_double_gt(worst, 0); /* f64 really computed in double */
	interp_tensor_fini(&x.ctx, &r32);
	interp_tensor_fini(&x.ctx, &r64);
	ti_fini(&x);
}
END_TEST

static Suite *interp_nn_suite(void)
{
	Suite *s = suite_create("interp_nn");
	TCase *sm = tcase_create("softmax");
	tcase_add_test(sm, test_softmax_matches_hand_values_and_rows_sum_to_one);
	tcase_add_test(sm,
		       test_masked_softmax_zeroes_positions_past_the_valid_length);
	tcase_add_test(sm, test_masked_softmax_takes_per_query_valid_lengths);
	tcase_add_test(sm, test_masked_softmax_row_of_length_zero_is_uniform);
	tcase_add_test(sm, test_masked_softmax_stretches_size_one_valid_dims);
	tcase_add_test(sm, test_dot_product_attention_gives_the_books_example);
	suite_add_tcase(s, sm);
	TCase *nn = tcase_create("layers");
	tcase_add_test(nn, test_layer_norm_normalizes_the_last_axis);
	tcase_add_test(nn, test_layer_norm_scales_by_gamma_and_shifts_by_beta);
	tcase_add_test(nn, test_dropout_is_the_identity_in_evaluation);
	tcase_add_test(nn,
		       test_dropout_in_training_keeps_about_1_minus_p_scaled_up);
	tcase_add_test(
		nn,
		test_dropout_repeats_for_one_seed_and_step_and_changes_with_step);
	tcase_add_test(nn, test_embedding_gathers_rows_of_the_table);
	tcase_add_test(nn,
		       test_embedding_index_out_of_range_is_an_error_not_a_crash);
	tcase_add_test(nn,
		       test_one_hot_marks_each_id_and_zeroes_ids_out_of_range);
	tcase_add_test(nn, test_embedding_grad_sums_the_rows_of_each_id);
	tcase_add_test(nn, test_embedding_grad_index_out_of_range_is_an_error);
	suite_add_tcase(s, nn);
	TCase *ls = tcase_create("losses");
	tcase_add_test(ls, test_mse_loss_is_the_mean_squared_error);
	tcase_add_test(ls, test_cross_entropy_matches_a_hand_computation);
	tcase_add_test(ls, test_cross_entropy_label_out_of_range_is_an_error);
	tcase_add_test(ls, test_cross_entropy_grad_matches_a_hand_computation);
	tcase_add_test(ls,
		       test_cross_entropy_with_grad_matches_a_hand_computation);
	tcase_add_test(ls,
		       test_cross_entropy_grad_equals_the_unfused_graph_exactly);
	tcase_add_test(ls,
		       test_cross_entropy_grad_label_out_of_range_is_an_error);
	tcase_add_test(ls, test_integer_division_by_zero_is_an_error);
	suite_add_tcase(s, ls);
	TCase *f64 = tcase_create("f64");
	tcase_add_test(f64, test_f64_mode_agrees_with_f32_mode);
	suite_add_tcase(s, f64);
	return s;
}

int main(void)
{
	return tu_run_suite(interp_nn_suite());
}
