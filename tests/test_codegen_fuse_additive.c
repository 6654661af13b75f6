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
	interp_tensor in[4], params[5];
	int64_t syms[1] = {0};
	ac_case ac = add_as_ac(c);
	uint32_t n_in = ac_inputs(&x.ctx, &ac, in);
	ck_assert(interp_params_init(&x.ctx, mu, syms, c->seed, false, params));
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
	for (uint32_t i = 0; i < n_in; i++)
		interp_tensor_fini(&x.ctx, &in[i]);
	for (uint32_t i = 0; i < 4; i++)
		interp_tensor_fini(&x.ctx, &params[i]);
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
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(fuse_additive_suite());
}
