/*
 * test_codegen_fuse.c - the generated fused attention kernels (forward
 * and gradient) on random shapes: odd sizes, Q != K, head widths from 2
 * to 128, more query rows and keys than one block holds, valid lengths
 * 0, partial, full and past K, per batch and per query, dropout off and
 * on in training. Each case runs loss_grad through the JIT fused and
 * unfused; the fused results must be as close to the float64
 * interpreter as the error-ratio rule asks, and agree with the
 * interpreter's fused kernels (same dropout masks, bit for bit). Also:
 * one thread or two give the same results, and the fused program needs
 * less scratch than the unfused one. Multi-head cases also run with the
 * heads read in place and split by copies: the results are the same bit
 * for bit.
 */
#include "attn_cases.h"
#include "cg_program.h"
#include "testutil.h"

#include <check.h>

/* Outputs of one JIT run, as f32 tensors, and the scratch it needed. */
typedef struct jit_out {
	interp_tensor t[8];
	uint32_t n;
	size_t scratch;
} jit_out;

static size_t round64(size_t n)
{
	return (n + 63) / 64 * 64 + 64;
}

/* Runs function fn of m through the JIT on in and params (f32). */
static void jit_run(tu_graph *x, const ir_module *m, const char *fn,
		    const ac_case *c, int n_threads, const interp_tensor *in,
		    const interp_tensor *params, jit_out *r)
{
	const ir_func *f = ir_module_find_func(m, fn);
	cg_program *p = cg_program_create(&x->ctx, m, NULL, NULL);
	ck_assert_msg(p != NULL, "lowering failed: %s", tu_graph_diag(x));
	ck_assert_msg(cg_program_jit(p), "jit failed: %s", tu_graph_diag(x));
	attnrt_entry_fn entry = cg_program_entry(p, fn);
	ck_assert(entry != NULL);
	uint32_t np;
	const attnrt_param_info *pi = cg_program_params(p, &np);
	char *pb = aligned_alloc(64, round64(cg_program_params_bytes(p)));
	for (uint32_t i = 0; i < np; i++)
		memcpy(pb + pi[i].offset, params[i].data,
		       (size_t)interp_tensor_numel(&params[i]) * 4);
	r->scratch = cg_program_scratch_bytes(p, fn);
	char *sb = aligned_alloc(64, round64(r->scratch));
	memset(sb, 0xff, round64(r->scratch));
	const void *ins[8];
	void *outs[8];
	for (uint32_t i = 0; i < f->n_inputs; i++)
		ins[i] = in[i].data;
	uint32_t no;
	const attnrt_tensor_info *oi = cg_program_outputs(p, fn, &no);
	r->n = no;
	for (uint32_t o = 0; o < no; o++) {
		int64_t dims[IR_MAX_RANK];
		for (int d = 0; d < oi[o].rank; d++)
			dims[d] = oi[o].dims[d];
		ck_assert(interp_tensor_alloc(&x->ctx, &r->t[o], IR_F32, oi[o].rank,
					      dims));
		outs[o] = r->t[o].data;
	}
	attnrt_run run = {c->seed, 2, c->is_training, n_threads};
	ck_assert_int_eq(entry(&run, pb, sb, ins, outs), 0);
	free(pb);
	free(sb);
	cg_program_destroy(p);
}

static void jit_out_fini(tu_graph *x, jit_out *r)
{
	for (uint32_t o = 0; o < r->n; o++)
		interp_tensor_fini(&x->ctx, &r->t[o]);
}

static interp_tensor *interp_grad(tu_graph *x, const ir_module *m, const ac_case *c,
				  const interp_tensor *in,
				  const interp_tensor *params, bool is_f64)
{
	const ir_func *f = ir_module_find_func(m, "loss_grad");
	interp_tensor *out = calloc(f->n_outputs, sizeof *out);
	interp_opts o = {.is_f64 = is_f64, .is_training = c->is_training,
			 .seed = c->seed, .step = 2};
	ck_assert_msg(interp_run(&x->ctx, m, f, &o, params, in, out), "%s",
		      tu_graph_diag(x));
	return out;
}

/* The JIT's fused result agrees with the interpreter's fused kernels:
 * relative to the output's largest value, within float32 summation
 * order differences. */
static void check_close(const interp_tensor *got, const interp_tensor *want,
			const char *what)
{
	double e, mag;
	ac_errors(got, want, &e, &mag);
	ck_assert_msg(e <= 2e-5 * (mag + 1e-3), "%s: JIT and interpreter differ "
		      "by %g (largest %g)", what, e, mag);
}

/* The kernels reading heads in place give what they give on split
 * copies (fuse_heads off), bit for bit. */
static void check_same_as_split(tu_graph *x, const ac_case *c,
				const interp_tensor *in,
				const interp_tensor *params, const jit_out *f1)
{
	ir_module *ms = ac_compile(&x->ctx, c, AC_FUSED_SPLIT);
	jit_out s = {0};
	jit_run(x, ms, "loss_grad", c, 1, in, params, &s);
	ck_assert_uint_eq(s.n, f1->n);
	for (uint32_t o = 0; o < s.n; o++) {
		int64_t n = interp_tensor_numel(&s.t[o]);
		ck_assert_msg(memcmp(s.t[o].data, f1->t[o].data, (size_t)n * 4) == 0,
			      "output %u: heads in place differ from split heads", o);
	}
	jit_out_fini(x, &s);
	ir_module_destroy(ms);
}

static void check_case(const ac_case *c)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *mu = ac_compile(&x.ctx, c, AC_UNFUSED);
	ir_module *mf = ac_compile(&x.ctx, c, AC_FUSED);
	interp_tensor in[4], params[4];
	int64_t syms[1] = {0};
	uint32_t n_in = ac_inputs(&x.ctx, c, in);
	ck_assert(interp_params_init(&x.ctx, mu, syms, c->seed, false, params));
	interp_tensor *ref = interp_grad(&x, mu, c, in, params, true);
	interp_tensor *fi = interp_grad(&x, mf, c, in, params, false);
	jit_out u = {0}, f1 = {0}, f2 = {0};
	jit_run(&x, mu, "loss_grad", c, 1, in, params, &u);
	jit_run(&x, mf, "loss_grad", c, 1, in, params, &f1);
	jit_run(&x, mf, "loss_grad", c, 2, in, params, &f2);
	const ir_func *f = ir_module_find_func(mu, "loss_grad");
	for (uint32_t o = 0; o < f->n_outputs; o++) {
		const char *name = f->output_names[o];
		ac_check_ratio(&f1.t[o], &u.t[o], &ref[o], name);
		check_close(&f1.t[o], &fi[o], name);
		int64_t n = interp_tensor_numel(&f1.t[o]);
		ck_assert_msg(memcmp(f1.t[o].data, f2.t[o].data, (size_t)n * 4) == 0,
			      "%s: 1 and 2 threads differ", name);
		interp_tensor_fini(&x.ctx, &ref[o]);
		interp_tensor_fini(&x.ctx, &fi[o]);
	}
	if (c->H > 0)
		check_same_as_split(&x, c, in, params, &f1);
	free(ref);
	free(fi);
	jit_out_fini(&x, &u);
	jit_out_fini(&x, &f1);
	jit_out_fini(&x, &f2);
	for (uint32_t i = 0; i < n_in; i++)
		interp_tensor_fini(&x.ctx, &in[i]);
	for (uint32_t i = 0; i < 3; i++)
		interp_tensor_fini(&x.ctx, &params[i]);
	ir_module_destroy(mu);
	ir_module_destroy(mf);
	tu_graph_fini(&x);
}

static const ac_case jit_cases[] = {
	/* N, Q, K, d, dv, valid, p, training, seed */
	{2, 3, 5, 2, 3, AC_BATCH, 0, false, 21, 0},
	{3, 7, 4, 5, 7, AC_QUERY, 0, false, 22, 0},
	{2, 1, 9, 16, 1, AC_NONE, 0, false, 23, 0},
	{1, 4, 4, 128, 64, AC_BATCH, 0, false, 24, 0},
	{2, 5, 3, 33, 17, AC_QUERY, 0.5, true, 25, 0},
	{2, 70, 150, 64, 64, AC_QUERY, 0, false, 26, 0},
	{3, 65, 67, 8, 8, AC_BATCH, 0.1, true, 27, 0},
	{1, 130, 9, 31, 47, AC_QUERY, 0.2, true, 28, 0},
	{2, 9, 200, 128, 3, AC_BATCH, 0, false, 29, 0},
	{5, 10, 10, 8, 8, AC_QUERY, 0.1, false, 30, 0},
	{2, 33, 129, 2, 128, AC_NONE, 0.3, true, 31, 0},
	{4, 17, 1, 12, 5, AC_QUERY, 0, false, 32, 0},
};

START_TEST(test_fused_kernels_match_the_unfused_graph_by_the_error_ratio)
{
	check_case(&jit_cases[_i]);
}
END_TEST

/* Multi-head attention, heads read in place: B, Q, K, d, dv (per
 * head), valid, p, training, seed, H. More rows and keys than a block,
 * head widths 2 to 64, the Transformer's shape (10 steps, 4 heads of 8). */
static const ac_case heads_cases[] = {
	{2, 3, 5, 2, 3, AC_BATCH, 0, false, 61, 2},
	{3, 7, 4, 5, 7, AC_QUERY, 0.5, true, 62, 3},
	{2, 70, 150, 64, 64, AC_QUERY, 0, false, 63, 2},
	{3, 65, 67, 8, 8, AC_BATCH, 0.1, true, 64, 4},
	{1, 130, 9, 31, 47, AC_QUERY, 0.2, true, 65, 3},
	{2, 9, 200, 16, 3, AC_NONE, 0.3, true, 66, 5},
	{4, 17, 1, 12, 5, AC_QUERY, 0, false, 67, 2},
	{5, 10, 10, 8, 8, AC_QUERY, 0.1, true, 68, 4},
	{3, 10, 10, 8, 8, AC_BATCH, 0.1, false, 69, 4},
};

START_TEST(test_fused_kernels_reading_heads_in_place_match_the_unfused_graph_and_the_split_form)
{
	check_case(&heads_cases[_i]);
}
END_TEST

/* The fused forward and backward of a long sequence need no Q x K
 * buffer: far less scratch than the unfused graph. */
START_TEST(test_fused_forward_needs_no_weights_buffer)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ac_case c = {2, 256, 1024, 16, 16, AC_BATCH, 0, false, 40, 0};
	ir_module *mu = ac_compile(&x.ctx, &c, AC_UNFUSED);
	ir_module *mf = ac_compile(&x.ctx, &c, AC_FUSED);
	cg_program *pu = cg_program_create(&x.ctx, mu, NULL, NULL);
	cg_program *pf = cg_program_create(&x.ctx, mf, NULL, NULL);
	ck_assert(pu && pf);
	size_t weights = (size_t)c.N * c.Q * c.K * 4;
	ck_assert_uint_ge(cg_program_scratch_bytes(pu, "loss"), weights);
	ck_assert_uint_lt(cg_program_scratch_bytes(pf, "loss"), weights / 16);
	ck_assert_uint_ge(cg_program_scratch_bytes(pu, "loss_grad"), weights);
	/* the packed gradient and its three slices, linear in K */
	ck_assert_uint_lt(cg_program_scratch_bytes(pf, "loss_grad"), weights / 2);
	cg_program_destroy(pu);
	cg_program_destroy(pf);
	ir_module_destroy(mu);
	ir_module_destroy(mf);
	tu_graph_fini(&x);
}
END_TEST

/* Dropout in an evaluation run is the identity: the fused kernel then
 * gives the same as without dropout. */
START_TEST(test_fused_dropout_is_off_outside_training)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ac_case on = {2, 6, 7, 4, 4, AC_BATCH, 0.5, false, 41, 0};
	ac_case off = on;
	off.p = 0;
	ir_module *mon = ac_compile(&x.ctx, &on, AC_FUSED);
	ir_module *moff = ac_compile(&x.ctx, &off, AC_FUSED);
	interp_tensor in[4], params[4];
	int64_t syms[1] = {0};
	uint32_t n_in = ac_inputs(&x.ctx, &on, in);
	ck_assert(interp_params_init(&x.ctx, mon, syms, 1, false, params));
	jit_out a = {0}, b = {0};
	jit_run(&x, mon, "loss", &on, 1, in, params, &a);
	jit_run(&x, moff, "loss", &off, 1, in, params, &b);
	ck_assert_float_eq(((float *)a.t[0].data)[0], ((float *)b.t[0].data)[0]);
	jit_out_fini(&x, &a);
	jit_out_fini(&x, &b);
	for (uint32_t i = 0; i < n_in; i++)
		interp_tensor_fini(&x.ctx, &in[i]);
	for (uint32_t i = 0; i < 3; i++)
		interp_tensor_fini(&x.ctx, &params[i]);
	ir_module_destroy(mon);
	ir_module_destroy(moff);
	tu_graph_fini(&x);
}
END_TEST

static Suite *fuse_suite(void)
{
	Suite *s = suite_create("codegen_fuse");
	TCase *tc = tcase_create("kernels");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_fused_kernels_match_the_unfused_graph_by_the_error_ratio,
			    0, (int)(sizeof jit_cases / sizeof jit_cases[0]));
	tcase_add_loop_test(tc, test_fused_kernels_reading_heads_in_place_match_the_unfused_graph_and_the_split_form,
			    0, (int)(sizeof heads_cases / sizeof heads_cases[0]));
	tcase_add_test(tc, test_fused_forward_needs_no_weights_buffer);
	tcase_add_test(tc, test_fused_dropout_is_off_outside_training);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fuse_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
