/*
 * test_codegen_layer_norm.c - a layer norm's training gradient as a
 * model's step computes it, on tests/models/layer_norm.g (widths 1, 7,
 * 16, 32, 33, 64, 100, 129, 256 and 1000, over 19 to 37 rows: no
 * multiple of 16; at 100 and 129 x a fused tree):
 * gamma's gradient reads one layer_norm of x (ones and zeros for its
 * scale and shift), no row means or sqrt; the compiled loss_grad gives
 * the same bits fused and unfused, at 1 and 2 threads (rows split one by
 * one), the float32 interpreter's values within float rounding, and the
 * float64 interpreter's within 1e-4. At 16 columns the loss differed at
 * 2 threads while layer_norm's row sums were left to LLVM's
 * reassociation (cg_lower_nn.c, row_sums). And layer_norm and
 * layer_norm_grad alone, at widths 1 to 1100: each row's bits are those
 * of row_sums' order computed here in C, at 1 and 2 threads, whether the
 * kernel adds each row's lanes alone or 16 rows' at once (row_group).
 */
#include "test_model_check.h"

#include <math.h>

static const int widths[] = {1, 7, 16, 32, 33, 64, 100, 129, 256, 1000};
#define N_WIDTHS (int)(sizeof widths / sizeof widths[0])

/* How many nodes of op f's graph holds. */
static int count_op(const ir_func *f, ir_op op)
{
	int n = 0;
	for (uint32_t i = 0; i < f->g.n_nodes; i++)
		n += f->g.nodes[i].op == op;
	return n;
}

/* x, gamma and beta's gradients: one layer_norm_grad, and gamma's
 * column sum reads a second layer_norm of x (the forward's is the
 * first), not x's row means and a sqrt. */
START_TEST(test_gamma_gradient_reads_one_layer_norm_of_x)
{
	tm_model md;
	tm_model_init(&md, "tests/models/layer_norm.g", widths, N_WIDTHS);
	for (int w = 0; w < N_WIDTHS; w++) {
		char name[32];
		snprintf(name, sizeof name, "loss_%d_grad", widths[w]);
		const ir_func *f = ir_module_find_func(md.m, name);
		ck_assert_ptr_nonnull(f);
		ck_assert_int_eq(count_op(f, IR_OP_LAYER_NORM_GRAD), 1);
		ck_assert_int_eq(count_op(f, IR_OP_LAYER_NORM), 2);
		ck_assert_int_eq(count_op(f, IR_OP_MEAN), 0);
		ck_assert_int_eq(count_op(f, IR_OP_SQRT), 0);
	}
	tm_model_fini(&md);
}
END_TEST

/* loss_W_grad, fused and unfused, at 1 and 2 threads: the same bits;
 * the float32 interpreter's values within 1e-5 (relative, or absolute
 * near zero), the float64 interpreter's within 1e-4. */
START_TEST(test_layer_norm_gradients_match_the_interpreter_at_any_width)
{
	tm_model md;
	tm_model_init(&md, "tests/models/layer_norm.g", widths, N_WIDTHS);
	char name[32];
	snprintf(name, sizeof name, "loss_%d_grad", widths[_i]);
	tm_check_entry(&md, name);
	tm_model_fini(&md);
}
END_TEST

/* ---- the rows' fixed order, bit for bit ---------------------------------- */

/* Widths around the kernels' limits: a vector (16), the four
 * accumulators (256), a group of rows (128 columns at most), a tile
 * (1024). */
static const int order_widths[] = {1,   7,   15,  16,  17,  32,   33,
				   100, 127, 128, 129, 256, 1000, 1100};
#define N_ORDER_WIDTHS (int)(sizeof order_widths / sizeof order_widths[0])
#define ORDER_ROWS 37 /* two groups of 16 rows and a short one */

/* The sum of v[0 .. K) in cg_lower_nn.c's row_sums order: vector q
 * (columns 16 q .. 16 q + 15, +0 past K) into accumulator q % accs (4
 * from 256 columns, else 1; each starts as its first vector), the
 * accumulators added 0 + 2, 1 + 3, then 0 + 1, the lanes by halves;
 * plus +0 when asked. */
static float fixed_sum(const float *v, int K, bool plus_zero)
{
	int accs = K >= 256 ? 4 : 1, nq = (K + 15) / 16;
	float acc[4][16];
	for (int q = 0; q < nq; q++)
		for (int l = 0; l < 16; l++) {
			float x = 16 * q + l < K ? v[16 * q + l] : 0.0f;
			float *a = &acc[q % accs][l];
			*a = q < accs ? x : *a + x;
		}
	if (accs == 4)
		for (int l = 0; l < 16; l++) {
			acc[0][l] = acc[0][l] + acc[2][l];
			acc[1][l] = acc[1][l] + acc[3][l];
			acc[0][l] = acc[0][l] + acc[1][l];
		}
	for (int n = 8; n >= 1; n /= 2)
		for (int l = 0; l < n; l++)
			acc[0][l] = acc[0][l] + acc[0][l + n];
	return plus_zero ? acc[0][0] + 0.0f : acc[0][0];
}

/* layer_norm of a row as the kernel computes it, but for y's last
 * multiply-add, which LLVM may contract: both roundings into y0, y1. */
static void ref_layer_norm(const float *x, const float *gamma,
			   const float *beta, int K, float *y0, float *y1)
{
	float d[1100] = {0};
	float mean = fixed_sum(x, K, true) / (float)K;
	for (int j = 0; j < K; j++) {
		float e = x[j] - mean;
		d[j] = e * e;
	}
	float r = 1.0f / sqrtf(fixed_sum(d, K, false) / (float)K + 1e-5f);
	for (int j = 0; j < K; j++) {
		float dr = (x[j] - mean) * r;
		y0[j] = dr * gamma[j] + beta[j];
		y1[j] = fmaf(dr, gamma[j], beta[j]);
	}
}

/* layer_norm_grad of a row as the kernel computes it (no contraction). */
static void ref_layer_norm_grad(const float *x, const float *gamma,
				const float *g, int K, float *out)
{
	float sq[1100] = {0}, h[1100] = {0}, hd[1100] = {0};
	float mean = fixed_sum(x, K, true) / (float)K;
	bool nz = false;
	for (int j = 0; j < K; j++) {
		float d = x[j] - mean;
		h[j] = g[j] * gamma[j];
		sq[j] = d * d;
		hd[j] = h[j] * d;
		nz |= h[j] != 0;
	}
	float v = fixed_sum(sq, K, false) / (float)K + 1e-5f;
	float s1 = fixed_sum(h, K, true), s3 = fixed_sum(hd, K, true);
	if (!nz && v > 0 && v < INFINITY) {
		for (int j = 0; j < K; j++)
			out[j] = (h[j] - s1) - (x[j] - mean) * s3;
		return;
	}
	float r = 1.0f / sqrtf(v), m1 = s1 / (float)K;
	float m2 = s3 * r / (float)K;
	for (int j = 0; j < K; j++) {
		float t = (h[j] - m1) - (x[j] - mean) * r * m2;
		out[j] = t * r;
	}
}

/* fwd(x, gamma, beta) and bwd(x, gamma, g) over R rows of K, as IR
 * (layer_norm_grad has no .g spelling), compiled with rows split one by
 * one. */
static cg_program *order_program(ir_ctx *ctx, int R, int K, ir_module **m)
{
	char src[2048];
	snprintf(src, sizeof src,
		 "module ln_order\n"
		 "export func @fwd(x: f32[%d, %d], a: f32[%d], b: f32[%d]) {\n"
		 "  %%0 = input {index=0} : f32[%d, %d]\n"
		 "  %%1 = input {index=1} : f32[%d]\n"
		 "  %%2 = input {index=2} : f32[%d]\n"
		 "  %%3 = layer_norm %%0, %%1, %%2 {eps=1e-05} : f32[%d, %d]\n"
		 "  return %%3 as out0\n"
		 "}\n"
		 "export func @bwd(x: f32[%d, %d], a: f32[%d], "
		 "g: f32[%d, %d]) {\n"
		 "  %%0 = input {index=0} : f32[%d, %d]\n"
		 "  %%1 = input {index=1} : f32[%d]\n"
		 "  %%2 = input {index=2} : f32[%d, %d]\n"
		 "  %%3 = layer_norm_grad %%0, %%1, %%2 {eps=1e-05} : "
		 "f32[%d, %d]\n"
		 "  return %%3 as out0\n"
		 "}\n",
		 R, K, K, K, R, K, K, K, R, K, R, K, K, R, K, R, K, K, R, K, R,
		 K);
	uint32_t file = ir_ctx_add_source(ctx, "ln_order.ir", src, strlen(src));
	*m = ir_module_read(ctx, file);
	ck_assert_ptr_nonnull(*m);
	pass_options po = {0};
	ck_assert(pass_pipeline_run(*m, &po));
	cg_program_options o = {.grain = 1};
	cg_program *p = cg_program_create(ctx, *m, NULL, &o);
	ck_assert_ptr_nonnull(p);
	ck_assert(cg_program_jit(p));
	return p;
}

/* Entry fn of p on the three inputs, at n_threads: its output. */
static float *order_run(cg_program *p, const char *fn, const float *const *in,
			size_t n, int n_threads)
{
	float *out = calloc(n + 1, 4);
	char *sb = aligned_alloc(64,
				 tm_round64(cg_program_scratch_bytes(p, fn)));
	ck_assert(out && sb);
	const void *ins[3] = {in[0], in[1], in[2]};
	void *outs[1] = {out};
	attnrt_run run = {.seed = 3, .n_threads = n_threads};
	ck_assert_int_eq(cg_program_entry(p, fn)(&run, NULL, sb, ins, outs), 0);
	free(sb);
	return out;
}

/* layer_norm and layer_norm_grad over 37 rows (every fifth a row of zero
 * gradient, the kernel's shortcut) at widths of 1 to 1100: at 1 and 2
 * threads, each row's bits are those of row_sums' order computed in C,
 * whether the kernel takes rows one by one or in groups of 16. */
START_TEST(test_layer_norm_rows_keep_the_fixed_order)
{
	int K = order_widths[_i], R = ORDER_ROWS;
	size_t n = (size_t)R * (size_t)K;
	float *x = malloc(n * 4), *g = malloc(n * 4), *gamma = malloc(K * 4),
	      *beta = malloc(K * 4), *y0 = malloc(K * 4), *y1 = malloc(K * 4);
	ck_assert(x && g && gamma && beta && y0 && y1);
	uint64_t rng = 11;
	for (size_t e = 0; e < n; e++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		x[e] = (float)((rng >> 33) % 2000) / 500.0f - 1.5f;
		g[e] = (e / (size_t)K) % 5 == 2
			       ? 0.0f
			       : (float)((rng >> 40) % 2000) / 1000.0f - 1.0f;
	}
	for (int j = 0; j < K; j++) {
		gamma[j] = 0.5f + (float)(j % 7) / 8.0f;
		beta[j] = (float)(j % 5) / 4.0f - 0.5f;
	}
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	ir_module *m;
	cg_program *p = order_program(&ctx, R, K, &m);
	const float *fin[3] = {x, gamma, beta}, *bin[3] = {x, gamma, g};
	for (int t = 1; t <= 2; t++) {
		float *y = order_run(p, "fwd", fin, n, t);
		float *dx = order_run(p, "bwd", bin, n, t);
		for (int r = 0; r < R; r++) {
			const float *xr = x + (size_t)r * K;
			ref_layer_norm(xr, gamma, beta, K, y0, y1);
			for (int j = 0; j < K; j++) {
				float v = y[(size_t)r * K + j];
				ck_assert_msg(memcmp(&v, &y0[j], 4) == 0 ||
						      memcmp(&v, &y1[j], 4) == 0,
					      "width %d, %d threads: y[%d][%d] "
					      "%a, not %a or %a",
					      K, t, r, j, v, y0[j], y1[j]);
			}
			ref_layer_norm_grad(xr, gamma, g + (size_t)r * K, K, y0);
			ck_assert_msg(memcmp(dx + (size_t)r * K, y0,
					     (size_t)K * 4) == 0,
				      "width %d, %d threads: row %d of dx", K,
				      t, r);
		}
		free(y);
		free(dx);
	}
	cg_program_destroy(p);
	ir_module_destroy(m);
	ir_ctx_fini(&ctx);
	free(x);
	free(g);
	free(gamma);
	free(beta);
	free(y0);
	free(y1);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("codegen_layer_norm");
	TCase *tc = tcase_create("layer_norm");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_gamma_gradient_reads_one_layer_norm_of_x);
	tcase_add_loop_test(
		tc, test_layer_norm_gradients_match_the_interpreter_at_any_width,
		0, N_WIDTHS);
	tcase_add_loop_test(tc, test_layer_norm_rows_keep_the_fixed_order, 0,
			    N_ORDER_WIDTHS);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
