/*
 * test_runtime_optim.c - libattnrt's optimizers and gradient clipping:
 * SGD and Adam steps against values worked out by hand, Adam over many
 * steps against a small independent double-precision implementation,
 * the global norm and d2l's clipping, the padding between parameters
 * left alone, and invalid settings and failing allocations reported.
 */
#include "attnrt.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Two parameters: a: [2] at offset 0 and b: [] (a scalar) at offset 64,
 * so the block has padding between them (bytes 8..63). */
static const attnrt_param_info two_params[2] = {
	{"a", 0, 1, {2}, ATTNRT_INIT_ZEROS, 0, 0},
	{"b", 64, 0, {0}, ATTNRT_INIT_ZEROS, 0, 0},
};

#define PAD_SENTINEL 12345.0f

/* A params-shaped block holding a = {a0, a1}, b = b0, and the sentinel
 * in the padding right after a. */
static float *block3(float a0, float a1, float b0)
{
	float *p = attnrt_alloc(NULL, attnrt_params_size(two_params, 2));
	ck_assert_ptr_nonnull(p);
	p[0] = a0;
	p[1] = a1;
	p[2] = PAD_SENTINEL;
	p[16] = b0;
	return p;
}

static void set3(float *g, float a0, float a1, float b0)
{
	g[0] = a0;
	g[1] = a1;
	g[16] = b0;
}

/* An optimizer of kind with its defaults at learning rate lr over the
 * n parameters of table. */
static attnrt_optim *make_over(attnrt_optim_kind kind, double lr,
			       const attnrt_param_info *table, size_t n)
{
	attnrt_optim_config cfg = attnrt_optim_defaults(kind, lr);
	attnrt_optim *o = NULL;
	char err[128];
	ck_assert_int_eq(attnrt_optim_create(NULL, &cfg, table, n, &o, err,
					     sizeof err),
			 ATTNRT_OK);
	ck_assert_ptr_nonnull(o);
	return o;
}

static attnrt_optim *make(attnrt_optim_kind kind, double lr)
{
	return make_over(kind, lr, two_params, 2);
}

START_TEST(test_defaults_are_pytorchs)
{
	attnrt_optim_config c = attnrt_optim_defaults(ATTNRT_OPTIM_ADAM, 0.005);
	ck_assert_int_eq(c.kind, ATTNRT_OPTIM_ADAM);
	ck_assert_double_eq(c.lr, 0.005);
	ck_assert_double_eq(c.beta1, 0.9);
	ck_assert_double_eq(c.beta2, 0.999);
	ck_assert_double_eq(c.eps, 1e-8);
}
END_TEST

/* p -= lr g: a = {1 - 0.1*0.5, 2 - 0.1*(-1)} = {0.95, 2.1}, b = 3 - 0.1*10. */
START_TEST(test_sgd_step_subtracts_lr_times_the_gradient)
{
	float *p = block3(1, 2, 3), *g = block3(0.5f, -1, 10);
	attnrt_optim *o = make(ATTNRT_OPTIM_SGD, 0.1);
	attnrt_optim_step(o, p, g);
	ck_assert_float_eq_tol(p[0], 0.95f, 1e-7);
	ck_assert_float_eq_tol(p[1], 2.1f, 1e-7);
	ck_assert_float_eq_tol(p[16], 2.0f, 1e-7);
	ck_assert_float_eq(p[2], PAD_SENTINEL);
	ck_assert_float_eq(g[0], 0.5f); /* the gradient is only read */
	ck_assert_uint_eq(attnrt_optim_steps(o), 1);
	attnrt_optim_set_lr(o, 1);
	attnrt_optim_step(o, p, g);
	ck_assert_float_eq_tol(p[16], -8.0f, 1e-6);
	ck_assert_uint_eq(attnrt_optim_steps(o), 2);
	attnrt_optim_destroy(o);
	attnrt_free(NULL, p);
	attnrt_free(NULL, g);
}
END_TEST

/* Four parameters of 7, 1, 13 and 5 elements (26), 64 bytes apart. */
static const attnrt_param_info odd_params[4] = {
	{"w", 0, 1, {7}, ATTNRT_INIT_ZEROS, 0, 0},
	{"b", 64, 0, {0}, ATTNRT_INIT_ZEROS, 0, 0},
	{"m", 128, 2, {13, 1}, ATTNRT_INIT_ZEROS, 0, 0},
	{"v", 192, 1, {5}, ATTNRT_INIT_ZEROS, 0, 0},
};

/* A step in parts (run last to first, as threads may finish) gives the
 * bits of the whole step, for any number of parts: one, a few, one per
 * element, more parts than elements; the padding is left alone. */
START_TEST(test_a_step_in_parts_equals_the_whole_step)
{
	static const size_t counts[] = {1, 2, 3, 16, 26, 40};
	for (int kind = 0; kind < 2; kind++)
		for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
			attnrt_optim_kind k = kind ? ATTNRT_OPTIM_ADAM
						   : ATTNRT_OPTIM_SGD;
			attnrt_optim *whole = make_over(k, 0.05, odd_params, 4),
				     *parts = make_over(k, 0.05, odd_params, 4);
			float p[64], q[64], g[64];
			for (int i = 0; i < 64; i++)
				p[i] = q[i] = PAD_SENTINEL;
			for (int i = 0; i < 64; i++)
				if (i % 16 < (int[]){7, 1, 13, 5}[i / 16])
					p[i] = q[i] = 0.1f * (float)(i % 7) -
						      0.3f;
			for (int t = 1; t <= 3; t++) {
				for (int i = 0; i < 64; i++)
					g[i] = (float)((i * 37 + t * 11) % 17) /
						       8 -
					       1;
				attnrt_optim_step_scaled(whole, p, g, 0.5);
				attnrt_optim_begin_step(parts);
				for (size_t n = counts[c]; n-- > 0;)
					attnrt_optim_update_part(parts, q, g,
								 0.5, n,
								 counts[c]);
				ck_assert(memcmp(p, q, sizeof p) == 0);
			}
			ck_assert_uint_eq(attnrt_optim_steps(parts), 3);
			ck_assert_float_eq(q[7], PAD_SENTINEL);
			ck_assert_float_ne(q[0], -0.3f);
			attnrt_optim_destroy(whole);
			attnrt_optim_destroy(parts);
		}
}
END_TEST

START_TEST(test_a_scaled_step_equals_a_step_on_scaled_gradients)
{
	float *p = block3(1, -2, 0.5f), *q = block3(1, -2, 0.5f),
	      *g = block3(0, 0, 0), *h = block3(0, 0, 0);
	attnrt_optim *a = make(ATTNRT_OPTIM_ADAM, 0.1),
		     *b = make(ATTNRT_OPTIM_ADAM, 0.1);
	for (int t = 0; t < 3; t++) {
		set3(g, 3.0f * (float)t - 1, 0.75f, -2.5f);
		set3(h, (3.0f * (float)t - 1) * 0.25f, 0.75f * 0.25f,
		     -2.5f * 0.25f);
		attnrt_optim_step_scaled(a, p, g, 0.25);
		attnrt_optim_step(b, q, h);
		ck_assert_float_eq(p[0], q[0]);
		ck_assert_float_eq(p[1], q[1]);
		ck_assert_float_eq(p[16], q[16]);
		ck_assert_float_eq(g[0], 3.0f * (float)t - 1); /* not written */
	}
	ck_assert_float_ne(p[0], 1);
	attnrt_optim_destroy(a);
	attnrt_optim_destroy(b);
	attnrt_free(NULL, p);
	attnrt_free(NULL, q);
	attnrt_free(NULL, g);
	attnrt_free(NULL, h);
}
END_TEST

/*
 * Adam, lr 0.1, betas (0.9, 0.999), eps 1e-8, worked by hand. With
 * m_t = beta1 m + (1-beta1) g, v_t = beta2 v + (1-beta2) g^2 and the
 * update lr * (m_t / (1-beta1^t)) / (sqrt(v_t / (1-beta2^t)) + eps):
 *
 * a[0], gradients 1, -1, 2:
 *   t=1  m = 0.1, v = 0.001: corrected 1 and 1, step 0.1/(1+1e-8)
 *        -> 0.9000000010
 *   t=2  m = 0.09 - 0.1 = -0.01, v = 0.000999 + 0.001 = 0.001999;
 *        1-beta1^2 = 0.19, 1-beta2^2 = 0.001999: corrected -1/19 and 1,
 *        step -0.1/19 = -0.0052631579 -> 0.9052631588
 *   t=3  m = -0.009 + 0.2 = 0.191, v = 0.001997001 + 0.004 = 0.005997001;
 *        1-beta1^3 = 0.271, 1-beta2^3 = 0.002997001: corrected 0.7047970
 *        and 2.0010007 (sqrt 1.4145673), step 0.0498242 -> 0.8554389
 * a[1], a constant gradient -0.5: every corrected ratio is -1, each step
 *        adds 0.1 -> -1.9, -1.8, -1.7
 * b, gradients 2, 0.25, -4: t=1 -> 0.4 (0.1 as for a[0]);
 *   t=2  m = 0.18 + 0.025 = 0.205, v = 0.003996 + 0.0000625 = 0.0040585:
 *        corrected 1.0789474 and 2.0302651 (sqrt 1.4248737), step
 *        0.0757223 -> 0.3242777
 *   t=3  m = 0.1845 - 0.4 = -0.2155, v = 0.0040544415 + 0.016 =
 *        0.0200544415: corrected -0.7952030 and 6.6915031 (sqrt
 *        2.5867940), step -0.0307409 -> 0.3550186
 * The update runs in float32 (as PyTorch's does): each step may round a
 * few times, so the values hold to 8 float ulps.
 */
/* The spacing of floats around x. */
static double ulp(double x)
{
	float f = (float)fabs(x);
	return (double)nextafterf(f, INFINITY) - f;
}

START_TEST(test_adam_first_three_steps_match_the_hand_computed_values)
{
	static const float grads[3][3] = {{1, -0.5f, 2},
					  {-1, -0.5f, 0.25f},
					  {2, -0.5f, -4}};
	static const double want[3][3] =
		{{0.9000000010, -1.9000000020, 0.4000000005},
		 {0.9052631588, -1.8000000040, 0.3242776862},
		 {0.8554389448, -1.7000000060, 0.3550185552}};
	float *p = block3(1, -2, 0.5f), *g = block3(0, 0, 0);
	attnrt_optim *o = make(ATTNRT_OPTIM_ADAM, 0.1);
	for (int t = 0; t < 3; t++) {
		set3(g, grads[t][0], grads[t][1], grads[t][2]);
		attnrt_optim_step(o, p, g);
		ck_assert_double_eq_tol(p[0], want[t][0], 8 * ulp(want[t][0]));
		ck_assert_double_eq_tol(p[1], want[t][1], 8 * ulp(want[t][1]));
		ck_assert_double_eq_tol(p[16], want[t][2], 8 * ulp(want[t][2]));
		ck_assert_float_eq(p[2], PAD_SENTINEL);
	}
	ck_assert_uint_eq(attnrt_optim_steps(o), 3);
	attnrt_optim_destroy(o);
	attnrt_free(NULL, p);
	attnrt_free(NULL, g);
}
END_TEST

/* An independent Adam in double, written from PyTorch's documentation. */
typedef struct ref_adam {
	double p[3], m[3], v[3];
	int t;
} ref_adam;

static void ref_adam_step(ref_adam *r, const double *g, double lr, double b1,
			  double b2, double eps)
{
	r->t++;
	for (int k = 0; k < 3; k++) {
		r->m[k] = b1 * r->m[k] + (1 - b1) * g[k];
		r->v[k] = b2 * r->v[k] + (1 - b2) * g[k] * g[k];
		double mhat = r->m[k] / (1 - pow(b1, r->t));
		double vhat = r->v[k] / (1 - pow(b2, r->t));
		r->p[k] -= lr * mhat / (sqrt(vhat) + eps);
	}
}

START_TEST(test_adam_follows_an_independent_double_implementation)
{
	attnrt_optim_config cfg = {ATTNRT_OPTIM_ADAM, 0.01, 0.8, 0.99, 1e-3};
	attnrt_optim *o = NULL;
	ck_assert_int_eq(attnrt_optim_create(NULL, &cfg, two_params, 2, &o,
					     NULL, 0),
			 ATTNRT_OK);
	ref_adam r = {{0.3, -0.7, 1.5}, {0}, {0}, 0};
	float *p = block3(0.3f, -0.7f, 1.5f), *g = block3(0, 0, 0);
	for (int t = 0; t < 50; t++) {
		/* a smooth, sign-changing gradient, exact in float */
		double gd[3] = {(t % 7) - 3.0, 0.125 * ((t % 5) - 2),
				t % 2 ? 4.0 : -0.5};
		set3(g, (float)gd[0], (float)gd[1], (float)gd[2]);
		attnrt_optim_step(o, p, g);
		ref_adam_step(&r, gd, cfg.lr, cfg.beta1, cfg.beta2, cfg.eps);
		ck_assert_double_eq_tol(p[0], r.p[0], 2e-6);
		ck_assert_double_eq_tol(p[1], r.p[1], 2e-6);
		ck_assert_double_eq_tol(p[16], r.p[2], 2e-6);
	}
	attnrt_optim_destroy(o);
	attnrt_free(NULL, p);
	attnrt_free(NULL, g);
}
END_TEST

/* Adam element by element in scalar float, in the order of the
 * runtime's formula. */
static void ref_adam_float(float *p, float *m, float *v, const float *g, int n,
			   int t, const attnrt_optim_config *c)
{
	float step = (float)(c->lr / (1 - pow(c->beta1, t)));
	float bc2 = (float)sqrt(1 - pow(c->beta2, t));
	float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps;
	float one_b1 = (float)(1 - c->beta1), one_b2 = (float)(1 - c->beta2);
	for (int k = 0; k < n; k++) {
		volatile float gk = g[k]; /* no contraction across statements */
		volatile float mk = b1 * m[k] + one_b1 * gk;
		volatile float g2 = one_b2 * gk * gk;
		volatile float vk = b2 * v[k] + g2;
		volatile float den = sqrtf(vk) / bc2 + eps;
		m[k] = mk;
		v[k] = vk;
		p[k] -= step * mk / den;
	}
}

/* The update runs in vectors (an AVX2 clone where the CPU has it) with a
 * scalar tail: 1003 elements give both, and every element must get the
 * scalar formula's exact bits, over steps whose moments differ. */
START_TEST(test_adam_gives_every_element_the_scalar_formulas_bits)
{
	enum { N = 1003 };
	static const attnrt_param_info one = {"w", 0, 1, {N}, ATTNRT_INIT_ZEROS,
					      0,   0};
	attnrt_optim_config cfg = attnrt_optim_defaults(ATTNRT_OPTIM_ADAM,
							0.005);
	attnrt_optim *o = NULL;
	ck_assert_int_eq(attnrt_optim_create(NULL, &cfg, &one, 1, &o, NULL, 0),
			 ATTNRT_OK);
	float *p = attnrt_alloc(NULL, attnrt_params_size(&one, 1));
	float *g = attnrt_alloc(NULL, attnrt_params_size(&one, 1));
	ck_assert(p && g);
	static float rp[N], rm[N], rv[N];
	for (int k = 0; k < N; k++)
		rp[k] = p[k] = sinf((float)k);
	for (int t = 1; t <= 5; t++) {
		for (int k = 0; k < N; k++)
			g[k] = cosf((float)(k * t)) * (float)(k % 13) * 0.1f;
		attnrt_optim_step(o, p, g);
		ref_adam_float(rp, rm, rv, g, N, t, &cfg);
		for (int k = 0; k < N; k++)
			ck_assert_msg(memcmp(&p[k], &rp[k], 4) == 0,
				      "step %d, element %d: %.9g, not %.9g", t,
				      k, (double)p[k], (double)rp[k]);
	}
	attnrt_optim_destroy(o);
	attnrt_free(NULL, p);
	attnrt_free(NULL, g);
}
END_TEST

/* a = {3, 4}, b = 12: sqrt(9 + 16 + 144) = 13; the padding is not counted. */
START_TEST(test_grad_norm_is_the_root_of_all_squares)
{
	float *g = block3(3, 4, 12);
	ck_assert_double_eq(attnrt_grad_norm(two_params, 2, g), 13.0);
	ck_assert_double_eq(attnrt_grad_norm(two_params, 0, g), 0.0);
	attnrt_free(NULL, g);
}
END_TEST

/* 1 + 4 + ... + 121 = 506 over one parameter of 11 elements (a block of
 * 8 and a tail of 3); parts 0 and 1 of 2 (6 elements and 5) add up to it,
 * the tail alone as a parameter of its own gives 81 + 100 + 121; a block
 * added in first counts; a NaN or an infinity anywhere gives a
 * non-finite sum. */
START_TEST(test_sum_squares_adds_every_square)
{
	const attnrt_param_info all = {"v", 0, 1, {11}, ATTNRT_INIT_ZEROS,
				       0,   0};
	const attnrt_param_info tail = {"t", 32, 1, {3}, ATTNRT_INIT_ZEROS,
					0,   0};
	float v[11], w[11] = {0};
	for (int i = 0; i < 11; i++)
		v[i] = (float)(i + 1);
	ck_assert_double_eq(attnrt_grad_sum_part(&all, 1, v, NULL, 0, 0, 1),
			    506.0);
	ck_assert_double_eq(attnrt_grad_sum_part(&all, 0, v, NULL, 0, 0, 1),
			    0.0);
	ck_assert_double_eq(attnrt_grad_sum_part(&all, 1, v, NULL, 0, 0, 2),
			    91.0);
	ck_assert_double_eq(attnrt_grad_sum_part(&all, 1, v, NULL, 0, 1, 2),
			    415.0);
	ck_assert_double_eq(attnrt_grad_sum_part(&tail, 1, v, NULL, 0, 0, 1),
			    81.0 + 100 + 121);
	const void *more[1] = {v};
	ck_assert_double_eq(attnrt_grad_sum_part(&all, 1, w, more, 1, 0, 1),
			    506.0);
	ck_assert_float_eq(w[10], 11);
	v[9] = NAN;
	ck_assert(isnan(attnrt_grad_sum_part(&all, 1, v, NULL, 0, 0, 1)));
	v[9] = INFINITY;
	ck_assert(isinf(attnrt_grad_sum_part(&all, 1, v, NULL, 0, 0, 1)));
}
END_TEST

/* Two parameters of 37 and 21 elements (blocks of 8 and tails) at
 * offsets 0 and 160 floats (the block is 192 floats). */
static const attnrt_param_info long_params[2] = {
	{"a", 0, 2, {37, 1}, ATTNRT_INIT_ZEROS, 0, 0},
	{"c", 640, 1, {21}, ATTNRT_INIT_ZEROS, 0, 0},
};

/* Values of many magnitudes, so that a sum of squares in another order
 * would round otherwise. */
static float mixed(int i, int t)
{
	return (float)((i * 37 + t * 11) % 17 - 8) *
	       (float)pow(1.7, (double)((i * 5 + t) % 13 - 6));
}

/* A part's update with its squares (one pass) gives the bits of the
 * update followed by attnrt_grad_sum_part over the parameters it wrote,
 * for SGD and Adam, in one part or several. */
START_TEST(test_update_part_sq_is_the_update_then_its_squares)
{
	static const size_t counts[] = {1, 2, 3, 16};
	for (int kind = 0; kind < 2; kind++)
		for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
			attnrt_optim_kind k = kind ? ATTNRT_OPTIM_ADAM
						   : ATTNRT_OPTIM_SGD;
			attnrt_optim *a = make_over(k, 0.05, long_params, 2),
				     *b = make_over(k, 0.05, long_params, 2);
			float p[192], q[192], g[192];
			for (int i = 0; i < 192; i++)
				p[i] = q[i] = mixed(i, 0);
			for (int t = 1; t <= 3; t++) {
				for (int i = 0; i < 192; i++)
					g[i] = mixed(i, t);
				attnrt_optim_begin_step(a);
				attnrt_optim_begin_step(b);
				for (size_t n = 0; n < counts[c]; n++) {
					attnrt_optim_update_part(a, p, g, 0.5,
								 n, counts[c]);
					double want = attnrt_grad_sum_part(
						long_params, 2, p, NULL, 0, n,
						counts[c]);
					double got = attnrt_optim_update_part_sq(
						b, q, g, 0.5, n, counts[c]);
					ck_assert(memcmp(&want, &got,
							 sizeof want) == 0);
				}
				ck_assert(memcmp(p, q, sizeof p) == 0);
			}
			q[3] = INFINITY;
			attnrt_optim_begin_step(b);
			ck_assert(!isfinite(
				attnrt_optim_update_part_sq(b, q, g, 0.5, 0, 1)));
			attnrt_optim_destroy(a);
			attnrt_optim_destroy(b);
		}
}
END_TEST

/* Adding one other block (the fused pass) gives the bits of the adds
 * followed by the squares of the result, in one part or several. */
START_TEST(test_a_one_block_sum_is_the_adds_then_the_squares)
{
	static const size_t counts[] = {1, 2, 5};
	for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
		float w[192], x[192], v[192];
		for (int i = 0; i < 192; i++) {
			w[i] = x[i] = mixed(i, 1);
			v[i] = mixed(i, 2);
			if (i < 37 || (i >= 160 && i < 181))
				x[i] += v[i]; /* the padding is left alone */
		}
		const void *more[1] = {v};
		for (size_t n = 0; n < counts[c]; n++) {
			double got = attnrt_grad_sum_part(long_params, 2, w,
							  more, 1, n, counts[c]);
			double want = attnrt_grad_sum_part(long_params, 2, x,
							   NULL, 0, n,
							   counts[c]);
			ck_assert(memcmp(&want, &got, sizeof want) == 0);
		}
		ck_assert(memcmp(w, x, sizeof w) == 0);
	}
}
END_TEST

START_TEST(test_clip_scales_every_gradient_by_theta_over_the_norm)
{
	float *g = block3(3, 4, 12);
	ck_assert_double_eq(attnrt_grad_clip(two_params, 2, g, 1.0), 13.0);
	ck_assert_float_eq_tol(g[0], 3.0f / 13, 1e-7);
	ck_assert_float_eq_tol(g[1], 4.0f / 13, 1e-7);
	ck_assert_float_eq_tol(g[16], 12.0f / 13, 1e-7);
	ck_assert_float_eq(g[2], PAD_SENTINEL);
	ck_assert_double_eq_tol(attnrt_grad_norm(two_params, 2, g), 1.0, 1e-6);
	attnrt_free(NULL, g);
}
END_TEST

START_TEST(test_clip_leaves_a_gradient_within_theta_unchanged)
{
	float *g = block3(3, 4, 12);
	ck_assert_double_eq(attnrt_grad_clip(two_params, 2, g, 13.0), 13.0);
	ck_assert_float_eq(g[0], 3.0f);
	ck_assert_float_eq(g[16], 12.0f);
	ck_assert_double_eq(attnrt_grad_clip(two_params, 2, g, 100.0), 13.0);
	ck_assert_float_eq(g[1], 4.0f);
	attnrt_free(NULL, g);
}
END_TEST

START_TEST(test_norm_of_a_nan_or_infinite_gradient_is_not_finite)
{
	float *g = block3(3, NAN, 12);
	ck_assert(isnan(attnrt_grad_norm(two_params, 2, g)));
	ck_assert(isnan(attnrt_grad_clip(two_params, 2, g, 1.0)));
	ck_assert_float_eq(g[0], 3.0f); /* not scaled */
	g[1] = INFINITY;
	ck_assert(isinf(attnrt_grad_norm(two_params, 2, g)));
	attnrt_free(NULL, g);
}
END_TEST

static int create_with(attnrt_optim_config cfg, const attnrt_param_info *t,
		       size_t n, char *err, size_t err_size)
{
	attnrt_optim *o = (attnrt_optim *)1;
	int rc = attnrt_optim_create(NULL, &cfg, t, n, &o, err, err_size);
	if (rc != ATTNRT_OK)
		ck_assert_ptr_null(o);
	attnrt_optim_destroy(o);
	return rc;
}

START_TEST(test_create_rejects_invalid_settings_with_a_message)
{
	char err[128];
	attnrt_optim_config c = attnrt_optim_defaults(ATTNRT_OPTIM_ADAM, -1);
	ck_assert_int_eq(create_with(c, two_params, 2, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "learning rate -1 is not a finite number >= 0");
	c.lr = NAN;
	ck_assert_int_eq(create_with(c, two_params, 2, err, sizeof err),
			 ATTNRT_ERR_ARG);
	c.lr = 0.1;
	c.beta2 = 1.0;
	ck_assert_int_eq(create_with(c, two_params, 2, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "Adam's betas (0.9, 1) must lie in [0, 1)");
	c.beta2 = 0.999;
	c.eps = -1e-8;
	ck_assert_int_eq(create_with(c, two_params, 2, err, sizeof err),
			 ATTNRT_ERR_ARG);
	c.kind = (attnrt_optim_kind)7;
	ck_assert_int_eq(create_with(c, two_params, 2, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "unknown optimizer kind 7");
	/* SGD ignores Adam's settings */
	c = attnrt_optim_defaults(ATTNRT_OPTIM_SGD, 0.5);
	c.beta1 = 5;
	ck_assert_int_eq(create_with(c, two_params, 2, NULL, 0), ATTNRT_OK);
}
END_TEST

START_TEST(test_create_rejects_an_invalid_table)
{
	attnrt_param_info bad[1] = {{"w", 2, 1, {3}, ATTNRT_INIT_ZEROS, 0, 0}};
	char err[128];
	attnrt_optim_config c = attnrt_optim_defaults(ATTNRT_OPTIM_SGD, 0.1);
	ck_assert_int_eq(create_with(c, bad, 1, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "parameter 'w': invalid rank, dims or offset in "
			      "the table");
	ck_assert_int_eq(create_with(c, NULL, 1, err, sizeof err),
			 ATTNRT_ERR_ARG);
}
END_TEST

/* Fails allocation number fail_at (from 0) and every later one. */
typedef struct failing_hook {
	int n_live, n_calls, fail_at;
} failing_hook;

static void *failing_alloc(void *ud, void *ptr, size_t size)
{
	failing_hook *h = ud;
	if (size == 0) {
		if (ptr)
			h->n_live--;
		free(ptr);
		return NULL;
	}
	if (h->n_calls++ >= h->fail_at)
		return NULL;
	if (!ptr)
		h->n_live++;
	return realloc(ptr, size);
}

START_TEST(test_create_fails_cleanly_at_each_allocation)
{
	attnrt_optim_config c = attnrt_optim_defaults(ATTNRT_OPTIM_ADAM, 0.1);
	for (int fail_at = 0; fail_at < 3; fail_at++) {
		failing_hook h = {0, 0, fail_at};
		attnrt_allocator al = {failing_alloc, &h};
		attnrt_optim *o = NULL;
		char err[64];
		ck_assert_int_eq(attnrt_optim_create(&al, &c, two_params, 2, &o,
						     err, sizeof err),
				 ATTNRT_ERR_NOMEM);
		ck_assert_ptr_null(o);
		ck_assert_str_eq(err, "out of memory");
		ck_assert_int_eq(h.n_live, 0);
	}
	failing_hook h = {0, 0, 3};
	attnrt_allocator al = {failing_alloc, &h};
	attnrt_optim *o = NULL;
	ck_assert_int_eq(attnrt_optim_create(&al, &c, two_params, 2, &o, NULL, 0),
			 ATTNRT_OK);
	ck_assert_int_eq(h.n_live, 3);
	attnrt_optim_destroy(o);
	ck_assert_int_eq(h.n_live, 0);
}
END_TEST

static Suite *optim_suite(void)
{
	Suite *s = suite_create("runtime_optim");
	TCase *tc = tcase_create("optim");
	tcase_add_test(tc, test_defaults_are_pytorchs);
	tcase_add_test(tc, test_sgd_step_subtracts_lr_times_the_gradient);
	tcase_add_test(tc, test_a_step_in_parts_equals_the_whole_step);
	tcase_add_test(tc, test_sum_squares_adds_every_square);
	tcase_add_test(tc, test_update_part_sq_is_the_update_then_its_squares);
	tcase_add_test(tc, test_a_one_block_sum_is_the_adds_then_the_squares);
	tcase_add_test(tc,
		       test_adam_first_three_steps_match_the_hand_computed_values);
	tcase_add_test(tc, test_a_scaled_step_equals_a_step_on_scaled_gradients);
	tcase_add_test(tc,
		       test_adam_follows_an_independent_double_implementation);
	tcase_add_test(tc,
		       test_adam_gives_every_element_the_scalar_formulas_bits);
	tcase_add_test(tc, test_grad_norm_is_the_root_of_all_squares);
	tcase_add_test(tc,
		       test_clip_scales_every_gradient_by_theta_over_the_norm);
	tcase_add_test(tc, test_clip_leaves_a_gradient_within_theta_unchanged);
	tcase_add_test(tc,
		       test_norm_of_a_nan_or_infinite_gradient_is_not_finite);
	tcase_add_test(tc, test_create_rejects_invalid_settings_with_a_message);
	tcase_add_test(tc, test_create_rejects_an_invalid_table);
	tcase_add_test(tc, test_create_fails_cleanly_at_each_allocation);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(optim_suite());
}
