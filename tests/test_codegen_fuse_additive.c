/*
 * test_codegen_fuse_additive.c - the generated fused additive attention
 * kernels (forward and gradient) on random shapes: Q != K, Q = 1 as in
 * Bahdanau's decoder, odd H and dv, H wider than a few vectors, more keys
 * than one block of scores holds, valid lengths 0, partial, full and
 * past K, per batch and per query, dropout off and on in training. Each
 * case runs loss_grad through the JIT fused and unfused; the fused
 * results must be as close to the float64 interpreter as the error-ratio
 * rule asks, and agree with the interpreter's fused kernels (the same
 * dropout masks). Also: one thread or two give the same results, the
 * fused program needs no N x Q x K x H buffer, and Bahdanau's training
 * graph compiles and matches its unfused gradient.
 */
#include "additive_cases.h"
#include "attn_jit.h"
#include "testutil.h"

#include <check.h>

static void jit_run(tu_graph *x, const ir_module *m, const char *fn,
		    const add_case *c, int n_threads, const interp_tensor *in,
		    const interp_tensor *params, jit_out *r)
{
	jit_run_vw(x, m, fn, c->seed, c->is_training, n_threads, 0, in, params,
		   r);
}

static interp_tensor *interp_grad(tu_graph *x, const ir_module *m,
				  const add_case *c, const interp_tensor *in,
				  const interp_tensor *params, bool is_f64)
{
	return interp_grad_at(x, m, c->seed, c->is_training, in, params, is_f64);
}

static void check_case(const add_case *c)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *mu = add_compile(&x.ctx, c, AC_UNFUSED);
	ir_module *mf = add_compile(&x.ctx, c, AC_FUSED);
	interp_tensor in[AJ_MAX_TENSORS], params[AJ_MAX_TENSORS];
	ac_case ac = add_as_ac(c);
	uint32_t n_in = ac_inputs(&x.ctx, &ac, in);
	aj_params_init(&x, mu, c->seed, params);
	interp_tensor *ref = interp_grad(&x, mu, c, in, params, true);
	interp_tensor *fi = interp_grad(&x, mf, c, in, params, false);
	jit_out u = {0}, f1 = {0}, f2 = {0};
	jit_run(&x, mu, "loss_grad", c, 1, in, params, &u);
	aj_run_1_and_2(&x, mf, c->seed, c->is_training, in, params, &f1, &f2);
	const ir_func *f = ir_module_find_func(mu, "loss_grad");
	for (uint32_t o = 0; o < f->n_outputs; o++) {
		const char *name = f->output_names[o];
		ac_check_ratio(&f1.t[o], &u.t[o], &ref[o], name);
		check_close(&f1.t[o], &fi[o], name);
		int64_t n = interp_tensor_numel(&f1.t[o]);
		ck_assert_msg(memcmp(f1.t[o].data, f2.t[o].data,
				     (size_t)n * 4) == 0,
			      "%s: 1 and 2 threads differ", name);
		interp_tensor_fini(&x.ctx, &ref[o]);
		interp_tensor_fini(&x.ctx, &fi[o]);
	}
	free(ref);
	free(fi);
	jit_out_fini(&x, &u);
	jit_out_fini(&x, &f1);
	jit_out_fini(&x, &f2);
	aj_tensors_fini(&x, in, n_in);
	aj_tensors_fini(&x, params, mu->n_params);
	ir_module_destroy(mu);
	ir_module_destroy(mf);
	tu_graph_fini(&x);
}

static const add_case jit_cases[] = {
	/* N, Q, K, H, dv, valid, p, training, seed */
	{2, 3, 5, 4, 3, AC_BATCH, 0, false, 21},
	{3, 7, 4, 5, 7, AC_QUERY, 0, false, 22},
	{2, 1, 9, 16, 1, AC_NONE, 0, false, 23},
	{4, 1, 10, 32, 32, AC_BATCH, 0.1, true, 24},
	{2, 5, 3, 33, 17, AC_QUERY, 0.5, true, 25},
	{2, 9, 150, 64, 64, AC_QUERY, 0, false, 26},
	{3, 17, 67, 7, 8, AC_BATCH, 0.1, true, 27},
	{1, 13, 9, 130, 47, AC_QUERY, 0.2, true, 28},
	{2, 1, 200, 3, 3, AC_BATCH, 0, false, 29},
	{5, 10, 10, 8, 8, AC_QUERY, 0.1, false, 30},
	{2, 4, 1, 12, 5, AC_QUERY, 0, false, 31},
	{3, 6, 70, 1, 2, AC_NONE, 0.3, true, 32},
	/* K at the edge of the gradient's feature cache (CG_ADDATTN_BLOCK
	 * = 64 keys): kept between the passes at 64, computed again at 65 */
	{2, 3, 64, 20, 8, AC_QUERY, 0.1, true, 33},
	{2, 3, 65, 20, 8, AC_QUERY, 0.1, true, 34},
	{64, 1, 10, 32, 32, AC_BATCH, 0.1, true, 35},
};

START_TEST(test_fused_additive_kernels_match_the_unfused_graph_by_the_error_ratio)
{
	check_case(&jit_cases[_i]);
}
END_TEST

/* The fused forward and backward of a long sequence need no
 * N x Q x K x H features: far less scratch than the unfused graph. */
START_TEST(test_fused_additive_attention_needs_no_features_buffer)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	add_case c = {2, 64, 256, 32, 16, AC_BATCH, 0, false, 40};
	ir_module *mu = add_compile(&x.ctx, &c, AC_UNFUSED);
	ir_module *mf = add_compile(&x.ctx, &c, AC_FUSED);
	cg_program *pu = cg_program_create(&x.ctx, mu, NULL, NULL);
	cg_program *pf = cg_program_create(&x.ctx, mf, NULL, NULL);
	ck_assert(pu && pf);
	size_t features = (size_t)c.N * c.Q * c.K * c.H * 4;
	ck_assert_uint_ge(cg_program_scratch_bytes(pu, "loss"), features);
	ck_assert_uint_lt(cg_program_scratch_bytes(pf, "loss"), features / 64);
	ck_assert_uint_ge(cg_program_scratch_bytes(pu, "loss_grad"), features);
	/* the packed gradient and its slices, linear in K */
	ck_assert_uint_lt(cg_program_scratch_bytes(pf, "loss_grad"),
			  features / 16);
	cg_program_destroy(pu);
	cg_program_destroy(pf);
	ir_module_destroy(mu);
	ir_module_destroy(mf);
	tu_graph_fini(&x);
}
END_TEST

/* ---- rows whose gradient is zero ------------------------------------------ */

/* fused_additive_attention_grad alone, its operands inputs: qp (N, Q, H),
 * kp (N, K, H), wv (H), v (N, K, dv), valid (N), g (N, Q, dv); or with
 * is_fwd fused_additive_attention, the same operands but g. */
typedef struct zg_graph {
	tu_graph x;
	interp_tensor in[6];
	int n_in;
	int64_t N, Q, K, H, dv;
} zg_graph;

static void zg_init_op(zg_graph *z, int64_t N, int64_t Q, int64_t K, int64_t H,
		       int64_t dv, double p, bool is_fwd)
{
	z->N = N, z->Q = Q, z->K = K, z->H = H, z->dv = dv;
	z->n_in = is_fwd ? 5 : 6;
	tu_graph_init(&z->x, 8);
	ir_id a[6] = {tu_input(&z->x, tu_type(IR_F32, 3, N, Q, H)),
		      tu_input(&z->x, tu_type(IR_F32, 3, N, K, H)),
		      tu_input(&z->x, tu_type(IR_F32, 1, H)),
		      tu_input(&z->x, tu_type(IR_F32, 3, N, K, dv)),
		      tu_input(&z->x, tu_type(IR_I32, 1, N)),
		      0};
	if (!is_fwd)
		a[5] = tu_input(&z->x, tu_type(IR_F32, 3, N, Q, dv));
	ir_attr at = {.attention = {1.0, -1e6, p, 5, 1}};
	z->x.f->output_names[0] = is_fwd ? "out" : "grads";
	z->x.f->outputs[z->x.f->n_outputs++] =
		tu_build(&z->x,
			 is_fwd ? IR_OP_FUSED_ADDITIVE_ATTENTION
				: IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD,
			 a, (uint32_t)z->n_in, &at, NULL);
	uint64_t r = 77;
	for (int i = 0; i < z->n_in; i++) {
		const ir_type *t = &z->x.f->g.nodes[a[i]].type;
		int64_t d[IR_MAX_RANK];
		for (int j = 0; j < t->rank; j++)
			d[j] = t->dims[j].coef;
		ck_assert(interp_tensor_alloc(&z->x.ctx, &z->in[i], t->dtype,
					      t->rank, d));
		for (int64_t e = 0; e < interp_tensor_numel(&z->in[i]); e++) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			uint32_t u = (uint32_t)(r >> 40);
			if (t->dtype == IR_I32)
				((int32_t *)z->in[i].data)[e] =
					(int32_t)(u % (uint32_t)(K + 2)) - 1;
			else
				((float *)z->in[i].data)[e] = (float)u /
								      8388608.0f -
							      1.0f;
		}
	}
}

static void zg_init(zg_graph *z, int64_t N, int64_t Q, int64_t K, int64_t H,
		    int64_t dv, double p)
{
	zg_init_op(z, N, Q, K, H, dv, p, false);
}

/* Zeroes (as -0 when is_neg) row `row` (n * Q + q) of g. */
static void zg_zero_row(zg_graph *z, int64_t row, bool is_neg)
{
	float *g = z->in[5].data;
	for (int64_t j = 0; j < z->dv; j++)
		g[row * z->dv + j] = is_neg ? -0.0f : 0.0f;
}

/* Runs the node, compiled into p, through the JIT at 1 and 2 threads
 * (the same bits) into out, and through the float32 interpreter into
 * ref (attn_jit.h), at seed 11. */
static void zg_run_p(zg_graph *z, cg_program *p, bool is_training,
		     interp_tensor *out, interp_tensor *ref)
{
	aj_run_f_against_interp(&z->x, p, z->in, z->n_in, 11, is_training, out,
				ref);
}

static cg_program *zg_compile(zg_graph *z)
{
	cg_program *p = cg_program_create(&z->x.ctx, z->x.m, NULL, NULL);
	ck_assert_msg(p && cg_program_jit(p), "%s", tu_graph_diag(&z->x));
	return p;
}

static void zg_run(zg_graph *z, bool is_training, interp_tensor *out,
		   interp_tensor *ref)
{
	cg_program *p = zg_compile(z);
	zg_run_p(z, p, is_training, out, ref);
	cg_program_destroy(p);
}

static void zg_fini(zg_graph *z)
{
	for (int i = 0; i < z->n_in; i++)
		interp_tensor_fini(&z->x.ctx, &z->in[i]);
	tu_graph_fini(&z->x);
}

/* The packed result's dqp row `row`, batch n's dkp, dwv part and dv. */
static bool zg_part_is_pos_zero(const zg_graph *z, const interp_tensor *t,
				int part, int64_t i)
{
	int64_t dk = z->N * z->Q * z->H, dw = dk + z->N * z->K * z->H;
	int64_t dv = dw + z->N * z->H;
	const int64_t at[4] = {i * z->H, dk + i * z->K * z->H, dw + i * z->H,
			       dv + i * z->K * z->dv};
	const int64_t len[4] = {z->H, z->K * z->H, z->H, z->K * z->dv};
	const uint32_t *b = t->data;
	for (int64_t e = 0; e < len[part]; e++)
		if (b[at[part] + e] != 0)
			return false;
	return true;
}

/* Rows whose g is all zero (+0 or -0) add nothing: the kernel leaves
 * them out. Their dqp rows are +0 to the bit, so are the dkp, dwv and dv
 * of a batch whose rows all are; the rest is the interpreter's within
 * float32 summation differences (dropout on and off, Q = 1 as in Bahdanau's decoder and Q > 1
 * with some of a batch's rows zero, valid lengths 0 and past K). */
START_TEST(test_additive_grad_rows_of_zero_g_add_nothing)
{
	static const int64_t shapes[][5] = {{6, 1, 10, 32, 32},
					    {4, 3, 7, 20, 9}};
	for (int c = 0; c < 4; c++) {
		const int64_t *d = shapes[c / 2];
		bool is_training = c % 2;
		zg_graph z;
		zg_init(&z, d[0], d[1], d[2], d[3], d[4], is_training ? 0.1 : 0);
		for (int64_t row = 0; row < z.N * z.Q; row++)
			if (row % 3 != 1 || row / z.Q == 0)
				zg_zero_row(&z, row, row % 2);
		interp_tensor out, ref;
		zg_run(&z, is_training, &out, &ref);
		check_close(&out, &ref, "grads");
		for (int64_t row = 0; row < z.N * z.Q; row++)
			if (row % 3 != 1 || row / z.Q == 0)
				ck_assert_msg(zg_part_is_pos_zero(&z, &out, 0,
								  row),
					      "case %d: dqp row %lld is not +0",
					      c, (long long)row);
		for (int part = 1; part < 4; part++)
			ck_assert_msg(zg_part_is_pos_zero(&z, &out, part, 0),
				      "case %d: part %d of batch 0 is not +0",
				      c, part);
		interp_tensor_fini(&z.x.ctx, &out);
		interp_tensor_fini(&z.x.ctx, &ref);
		zg_fini(&z);
	}
}
END_TEST

/* A row of zero g still adds NaN where an inf or NaN in its batch's v
 * makes one (0 * inf): the kernel keeps a row that meets any inf or NaN
 * in qp, kp, v or wv, and its NaNs are where the interpreter has them.
 * (An inf alone in kp saturates tanh: no NaN. NaN scores:
 * test_fused_additive_kernels_propagate_nonfinite_values.) */
START_TEST(test_additive_grad_keeps_zero_g_rows_that_meet_inf_or_nan)
{
	for (int c = 0; c < 2; c++) {
		zg_graph z;
		zg_init(&z, 5, 1, 6, 17, 5, 0);
		for (int64_t row = 0; row < 5; row++)
			zg_zero_row(&z, row, false);
		float *kp = z.in[1].data;
		float *v = z.in[3].data;
		int32_t *valid = z.in[4].data;
		for (int64_t n = 0; n < 5; n++)
			valid[n] = 6;
		switch (c) {
		case 0: /* an inf in batch 1's kp, a NaN in batch 3's v */
			kp[1 * 6 * 17 + 2 * 17 + 16] = INFINITY;
			v[3 * 6 * 5 + 4 * 5 + 1] = NAN;
			break;
		default: /* inf in batch 2's v */
			v[2 * 6 * 5 + 0 * 5 + 3] = INFINITY;
			break;
		}
		interp_tensor out, ref;
		zg_run(&z, false, &out, &ref);
		const float *o = out.data, *r = ref.data;
		int64_t n_nan = 0;
		for (int64_t e = 0; e < interp_tensor_numel(&ref); e++) {
			ck_assert_msg(isnan(o[e]) == isnan(r[e]),
				      "case %d: element %lld: %g, interpreter "
				      "%g",
				      c, (long long)e, o[e], r[e]);
			n_nan += isnan(r[e]) != 0;
		}
		ck_assert_msg(n_nan > 0, "case %d: no NaN", c);
		interp_tensor_fini(&z.x.ctx, &out);
		interp_tensor_fini(&z.x.ctx, &ref);
		zg_fini(&z);
	}
}
END_TEST

/* ---- values that are not finite ------------------------------------------ */

/* Where a case puts its values: an operand (0 qp, 1 kp, 2 wv, 3 v, 4 g:
 * the gradient's only) and an element, a second one for the case that
 * needs two. */
typedef struct nf_case {
	const char *name;
	int op[2];
	int64_t at[2];
	float x[2];
} nf_case;

/* N = 4, Q = 2, K = 6, H = 17, dv = 5: element h = 3 of row (1, 0) of
 * qp, of key (1, 2) of kp, of wv; element 1 of value (1, 2), and of
 * value (1, 5) and (3, 5), keys past the valid length of batch 1 (3)
 * and 3 (1) when masked; element 2 of g's row (1, 0). */
#define NF_QP ((1 * 2 + 0) * 17 + 3)
#define NF_KP ((1 * 6 + 2) * 17 + 3)
#define NF_V ((1 * 6 + 2) * 5 + 1)
#define NF_V5 ((1 * 6 + 5) * 5 + 1)
#define NF_V35 ((3 * 6 + 5) * 5 + 1)
#define NF_G ((1 * 2 + 0) * 5 + 2)
static const nf_case nf_cases[] = {
	{"finite", {-1, -1}, {0, 0}, {0, 0}},
	{"qp nan", {0, -1}, {NF_QP, 0}, {NAN, 0}},
	{"qp inf", {0, -1}, {NF_QP, 0}, {INFINITY, 0}},
	{"qp -inf", {0, -1}, {NF_QP, 0}, {-INFINITY, 0}},
	{"kp nan", {1, -1}, {NF_KP, 0}, {NAN, 0}},
	{"kp inf", {1, -1}, {NF_KP, 0}, {INFINITY, 0}},
	{"kp -inf", {1, -1}, {NF_KP, 0}, {-INFINITY, 0}},
	{"wv nan", {2, -1}, {3, 0}, {NAN, 0}},
	{"wv inf", {2, -1}, {3, 0}, {INFINITY, 0}},
	{"wv -inf", {2, -1}, {3, 0}, {-INFINITY, 0}},
	{"v nan", {3, -1}, {NF_V, 0}, {NAN, 0}},
	{"v inf", {3, -1}, {NF_V, 0}, {INFINITY, 0}},
	{"v -inf", {3, -1}, {NF_V, 0}, {-INFINITY, 0}},
	/* in keys that are masked: 0 v, and in the gradient 0 dP, is NaN */
	{"v nan, last key", {3, -1}, {NF_V5, 0}, {NAN, 0}},
	{"v inf, last key", {3, 3}, {NF_V5, NF_V35}, {INFINITY, -INFINITY}},
	{"g nan", {4, -1}, {NF_G, 0}, {NAN, 0}},
	{"g inf", {4, -1}, {NF_G, 0}, {INFINITY, 0}},
	/* inf - inf inside the feature of row (1, 0) and key (1, 2) */
	{"qp inf + kp -inf", {0, 1}, {NF_QP, NF_KP}, {INFINITY, -INFINITY}},
	/* finite operands whose scores overflow to +-inf */
	{"wv 3e38", {2, 2}, {3, 4}, {3e38f, 3e38f}},
};

/* The fused kernels, forward and gradient, with dropout off and on, on
 * operands (qp, kp, wv, v, g) holding a NaN, an inf or a -inf (one case
 * at a time), with every key valid and with the valid lengths -1, 3,
 * K + 1 and 1 (the values of some cases sit in masked keys), some rows
 * of g zero (among them the rows where the values sit): every NaN and
 * infinity of the interpreter's results, which follow PyTorch's (a NaN
 * or +inf score makes the row's weights NaN), is in the JIT's, at 1 and
 * 2 threads, and no other. */
START_TEST(test_fused_additive_kernels_propagate_nonfinite_values)
{
	const int n_cases = (int)(sizeof nf_cases / sizeof nf_cases[0]);
	for (int c = 0; c < 4; c++) {
		bool is_fwd = c < 2, is_training = c % 2;
		zg_graph z;
		zg_init_op(&z, 4, 2, 6, 17, 5, is_training ? 0.5 : 0, is_fwd);
		cg_program *p = zg_compile(&z);
		float *ops[5] = {z.in[0].data, z.in[1].data, z.in[2].data,
				 z.in[3].data, is_fwd ? NULL : z.in[5].data};
		int32_t *valid = z.in[4].data;
		const int32_t masked[4] = {-1, 3, 7, 1};
		if (!is_fwd) {
			zg_zero_row(&z, 2, false);
			zg_zero_row(&z, 3, true);
			zg_zero_row(&z, 5, false);
		}
		for (int k = 0; k < 2 * n_cases; k++) {
			const nf_case *nc = &nf_cases[k / 2];
			if (nc->op[0] == 4 && is_fwd)
				continue;
			for (int n = 0; n < 4; n++)
				valid[n] = k % 2 ? masked[n] : 6;
			float keep[2] = {0, 0};
			for (int i = 0; i < 2; i++)
				if (nc->op[i] >= 0) {
					keep[i] = ops[nc->op[i]][nc->at[i]];
					ops[nc->op[i]][nc->at[i]] = nc->x[i];
				}
			interp_tensor out, ref;
			zg_run_p(&z, p, is_training, &out, &ref);
			char what[96];
			snprintf(what, sizeof what, "%s%s, %s, %s",
				 is_fwd ? "forward" : "gradient",
				 is_training ? " with dropout" : "", nc->name,
				 k % 2 ? "masked" : "all valid");
			aj_compare_nonfinite(&out, &ref, what);
			interp_tensor_fini(&z.x.ctx, &out);
			interp_tensor_fini(&z.x.ctx, &ref);
			for (int i = 1; i >= 0; i--)
				if (nc->op[i] >= 0)
					ops[nc->op[i]][nc->at[i]] = keep[i];
		}
		cg_program_destroy(p);
		zg_fini(&z);
	}
}
END_TEST

static Suite *fuse_additive_suite(void)
{
	Suite *s = suite_create("codegen_fuse_additive");
	TCase *tc = tcase_create("kernels");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(
		tc,
		test_fused_additive_kernels_match_the_unfused_graph_by_the_error_ratio,
		0, (int)(sizeof jit_cases / sizeof jit_cases[0]));
	tcase_add_test(tc,
		       test_fused_additive_attention_needs_no_features_buffer);
	tcase_add_test(tc, test_additive_grad_rows_of_zero_g_add_nothing);
	tcase_add_test(tc,
		       test_additive_grad_keeps_zero_g_rows_that_meet_inf_or_nan);
	tcase_add_test(tc,
		       test_fused_additive_kernels_propagate_nonfinite_values);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(fuse_additive_suite());
}
