/*
 * test_codegen_causal.c - a GPT-style language model whose sequence
 * length is a run-time dimension (tests/models/causal_lm.g: learned
 * positions sliced to T, a causal mask from arange(1, T + 1), multi-head
 * split and merge, logits reshaped to [B*T, V]), from one .g file at
 * T = 3 and T = 7: the JIT against the interpreter for the loss, the
 * masked loss and the gradient function autodiff derives (its attention
 * gradient fused, packed along a multiple of B*T); that gradient
 * against float64 directional finite differences; and a T past the
 * positions' table reported at the slice's .g line when T is bound.
 */
#include "cg_program.h"
#include "frontend.h"
#include "interp.h"
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "tests/models/causal_lm.g"
#define MAXT 64
#define VOCAB 11 /* the model's V */

typedef struct lm {
	ir_ctx ctx;
	char *diag;
	size_t diag_len;
	ir_module *m;
	interp_tensor in[3]; /* tokens, targets (B, T), valid (B) */
	int64_t syms[16];
	interp_tensor params[64];
} lm;

/* Compiles the model (with loss_grad when is_grad, through the pass
 * pipeline when is_opt) and makes a batch of 2 rows of T tokens. */
static void lm_init(lm *x, int64_t T, bool is_grad, bool is_opt)
{
	memset(x, 0, sizeof *x);
	ir_ctx_init(&x->ctx);
	x->ctx.diag_out = open_memstream(&x->diag, &x->diag_len);
	uint32_t file = ir_ctx_load_source(&x->ctx, tu_path(MODEL));
	ck_assert_uint_ne(file, 0);
	x->m = fe_compile(&x->ctx, file);
	ck_assert_msg(x->m != NULL, "%s does not compile", MODEL);
	pass_options po = {.verify_each = true};
	ck_assert(!is_grad || !is_opt || pass_pipeline_forward(x->m, &po));
	ck_assert(!is_grad || pass_autodiff(x->m, "loss"));
	ck_assert(!is_opt || pass_pipeline_run(x->m, &po));
	ck_assert(ir_module_verify(x->m));
	const int64_t d2[2] = {2, T}, d1[1] = {2};
	ck_assert(interp_tensor_alloc(&x->ctx, &x->in[0], IR_I32, 2, d2));
	ck_assert(interp_tensor_alloc(&x->ctx, &x->in[1], IR_I32, 2, d2));
	ck_assert(interp_tensor_alloc(&x->ctx, &x->in[2], IR_I32, 1, d1));
	for (int64_t i = 0; i < 2 * T; i++) {
		((int32_t *)x->in[0].data)[i] = (int32_t)((i * 7 + 3) % VOCAB);
		((int32_t *)x->in[1].data)[i] = (int32_t)((i * 5 + 1) % VOCAB);
	}
	((int32_t *)x->in[2].data)[0] = (int32_t)T;
	((int32_t *)x->in[2].data)[1] = (int32_t)(T - 2);
}

static void lm_fini(lm *x)
{
	for (uint32_t p = 0; x->m && p < x->m->n_params; p++)
		interp_tensor_fini(&x->ctx, &x->params[p]);
	for (int i = 0; i < 3; i++)
		interp_tensor_fini(&x->ctx, &x->in[i]);
	ir_module_destroy(x->m);
	fclose(x->ctx.diag_out);
	free(x->diag);
	ir_ctx_fini(&x->ctx);
}

/* Binds B and T from f's inputs and initializes the parameters. */
static void lm_bind(lm *x, const char *fname, bool is_f64)
{
	const ir_func *f = ir_module_find_func(x->m, fname);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_le(x->m->n_syms, 16);
	ck_assert_uint_le(x->m->n_params, 64);
	ck_assert(interp_bind_syms(&x->ctx, x->m, f, x->in, x->syms));
	ck_assert(interp_params_init(&x->ctx, x->m, x->syms, 5, is_f64,
				     x->params));
}

static size_t round64(size_t n)
{
	return (n + 63) / 64 * 64 + 64;
}

/* Runs entry fname of p on x's inputs and parameters; outs get malloc'd
 * buffers. */
static void jit_run(lm *x, cg_program *p, const char *fname, void **outs)
{
	const ir_func *f = ir_module_find_func(x->m, fname);
	char *pb = aligned_alloc(64, round64(cg_program_params_bytes(p)));
	char *sb = aligned_alloc(64,
				 round64(cg_program_scratch_bytes(p, fname)));
	uint32_t n;
	const attnrt_param_info *pi = cg_program_params(p, &n);
	for (uint32_t i = 0; i < n; i++)
		memcpy(pb + pi[i].offset, x->params[i].data,
		       (size_t)interp_tensor_numel(&x->params[i]) * 4);
	const void *ins[3];
	for (uint32_t i = 0; i < f->n_inputs; i++)
		ins[i] = x->in[i].data;
	const attnrt_tensor_info *oi = cg_program_outputs(p, fname, &n);
	for (uint32_t k = 0; k < n; k++) {
		size_t e = 1;
		for (int d = 0; d < oi[k].rank; d++)
			e *= (size_t)oi[k].dims[d];
		outs[k] = calloc(e + 1, 4);
	}
	attnrt_run run = {11, 0, false, 2};
	ck_assert_int_eq(cg_program_entry(p, fname)(&run, pb, sb, ins, outs), 0);
	free(pb);
	free(sb);
}

/* Entry fname under the interpreter and the JIT of p: every output
 * element within 2e-4 (relative, or absolute near zero). */
static void check_entry(lm *x, cg_program *p, const char *fname)
{
	const ir_func *f = ir_module_find_func(x->m, fname);
	interp_tensor want[MAXT] = {0};
	void *got[MAXT] = {0};
	ck_assert_uint_le(f->n_outputs, MAXT);
	interp_opts o = {.seed = 11};
	ck_assert(interp_run(&x->ctx, x->m, f, &o, x->params, x->in, want));
	jit_run(x, p, fname, got);
	for (uint32_t k = 0; k < f->n_outputs; k++) {
		int64_t n = interp_tensor_numel(&want[k]);
		double e = tu_max_rel_err(got[k], want[k].data, (size_t)n, 2e-4,
					  2e-4);
		ck_assert_msg(e <= 1,
			      "%s output %s: JIT differs from the "
			      "interpreter (%g)",
			      fname, f->output_names[k], e);
		free(got[k]);
		interp_tensor_fini(&x->ctx, &want[k]);
	}
}

static void check_jit_at(int64_t T)
{
	lm x;
	lm_init(&x, T, true, true);
	lm_bind(&x, "masked_loss", false);
	ck_assert_int_eq(x.syms[ir_module_find_sym(x.m, "T")], T);
	ck_assert_int_eq(x.syms[ir_module_find_sym(x.m, "B*T")], 2 * T);
	/* The attention's gradient is fused: its packed size is one dim,
	 * a multiple of B*T. */
	const ir_func *fg = ir_module_find_func(x.m, "loss_grad");
	int n_fused = 0;
	for (ir_id i = 0; i < fg->g.n_nodes; i++)
		n_fused += fg->g.nodes[i].op == IR_OP_FUSED_ATTENTION_GRAD;
	ck_assert_int_eq(n_fused, 2);
	cg_program *p = cg_program_create(&x.ctx, x.m, x.syms, NULL);
	ck_assert_msg(p != NULL, "lowering at T = %lld failed", (long long)T);
	ck_assert(cg_program_jit(p));
	check_entry(&x, p, "loss");
	check_entry(&x, p, "masked_loss");
	check_entry(&x, p, "loss_grad");
	cg_program_destroy(p);
	lm_fini(&x);
}

START_TEST(test_causal_lm_jit_matches_the_interpreter_at_t_3_and_7)
{
	check_jit_at(3);
	check_jit_at(7);
}
END_TEST

/* ---- the gradient against finite differences --------------------------------- */

static double loss_at(lm *x, const interp_tensor *params)
{
	const ir_func *f = ir_module_find_func(x->m, "loss");
	interp_tensor out = {0};
	interp_opts o = {.is_f64 = true};
	ck_assert(interp_run(&x->ctx, x->m, f, &o, params, x->in, &out));
	double l = interp_tensor_get(&out, 0);
	interp_tensor_fini(&x->ctx, &out);
	return l;
}

/* SplitMix64 in [-1, 1). */
static double rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) / 9007199254740992.0 * 2 - 1;
}

/* g . v from loss_grad (float64) against (L(p + h v) - L(p - h v)) / 2h
 * for a random direction v over every parameter. */
static void check_gradient_at(int64_t T, uint64_t seed)
{
	lm x;
	lm_init(&x, T, true, false);
	lm_bind(&x, "loss_grad", true);
	const ir_func *f = ir_module_find_func(x.m, "loss_grad");
	uint32_t np = x.m->n_params;
	interp_tensor out[MAXT] = {0}, plus[64] = {0}, minus[64] = {0};
	ck_assert_uint_le(f->n_outputs, MAXT);
	interp_opts o = {.is_f64 = true};
	ck_assert(interp_run(&x.ctx, x.m, f, &o, x.params, x.in, out));
	double gv = 0;
	const double h = 1e-6;
	for (uint32_t p = 0; p < np; p++) {
		ck_assert(interp_tensor_copy(&x.ctx, &plus[p], &x.params[p]));
		ck_assert(interp_tensor_copy(&x.ctx, &minus[p], &x.params[p]));
		int64_t n = interp_tensor_numel(&x.params[p]);
		ck_assert_int_eq(n, interp_tensor_numel(&out[1 + p]));
		double *a = plus[p].data, *b = minus[p].data;
		for (int64_t i = 0; i < n; i++) {
			double v = rnd(&seed);
			gv += v * interp_tensor_get(&out[1 + p], i);
			a[i] += h * v;
			b[i] -= h * v;
		}
	}
	double l0 = interp_tensor_get(&out[0], 0);
	ck_assert_double_eq_tol(l0, loss_at(&x, x.params), 1e-12 * fabs(l0));
	double fd = (loss_at(&x, plus) - loss_at(&x, minus)) / (2 * h);
	double err = fabs(gv - fd) / fmax(fmax(fabs(gv), fabs(fd)), 1e-3);
	ck_assert_msg(err < 1e-6,
		      "T = %lld: g.v %.12g, finite differences "
		      "%.12g (rel %g)",
		      (long long)T, gv, fd, err);
	for (uint32_t k = 0; k < f->n_outputs; k++)
		interp_tensor_fini(&x.ctx, &out[k]);
	for (uint32_t p = 0; p < np; p++) {
		interp_tensor_fini(&x.ctx, &plus[p]);
		interp_tensor_fini(&x.ctx, &minus[p]);
	}
	lm_fini(&x);
}

START_TEST(test_causal_lm_gradient_matches_finite_differences_at_t_3_and_7)
{
	check_gradient_at(3, 1);
	check_gradient_at(7, 2);
}
END_TEST

/* ---- causality and the positions' limit ---------------------------------------- */

/* Changing the last token changes no earlier step's loss: masked_loss
 * with valid T - 1 on both rows is the same before and after. */
START_TEST(test_causal_lm_earlier_steps_do_not_see_later_tokens)
{
	lm x;
	lm_init(&x, 5, false, false);
	lm_bind(&x, "masked_loss", true);
	const ir_func *f = ir_module_find_func(x.m, "masked_loss");
	interp_opts o = {.is_f64 = true};
	interp_tensor a = {0}, b = {0};
	int32_t *tok = x.in[0].data, *valid = x.in[2].data;
	valid[0] = valid[1] = 4;
	ck_assert(interp_run(&x.ctx, x.m, f, &o, x.params, x.in, &a));
	tok[4] = (tok[4] + 1) % VOCAB;
	tok[9] = (tok[9] + 3) % VOCAB;
	ck_assert(interp_run(&x.ctx, x.m, f, &o, x.params, x.in, &b));
	for (int i = 0; i < 2; i++)
		ck_assert_double_eq_tol(interp_tensor_get(&a, i),
					interp_tensor_get(&b, i), 1e-12);
	/* ... while the full length sees them. */
	valid[0] = 5;
	interp_tensor c = {0};
	ck_assert(interp_run(&x.ctx, x.m, f, &o, x.params, x.in, &c));
	ck_assert(fabs(interp_tensor_get(&c, 0) - interp_tensor_get(&a, 0)) >
		  1e-6);
	interp_tensor_fini(&x.ctx, &a);
	interp_tensor_fini(&x.ctx, &b);
	interp_tensor_fini(&x.ctx, &c);
	lm_fini(&x);
}
END_TEST

START_TEST(test_causal_lm_reports_t_past_the_positions_at_the_slice)
{
	lm x;
	lm_init(&x, 9, false, true);
	const ir_func *f = ir_module_find_func(x.m, "loss");
	ck_assert(!interp_bind_syms(&x.ctx, x.m, f, x.in, x.syms));
	int64_t syms[16] = {0};
	syms[ir_module_find_sym(x.m, "B")] = 2;
	syms[ir_module_find_sym(x.m, "T")] = 9;
	ck_assert_ptr_null(cg_program_create(&x.ctx, x.m, syms, NULL));
	fflush(x.ctx.diag_out);
	const char *want = "causal_lm.g:32:33: error: T = 9 is more than 8, the "
			   "most this slice allows";
	ck_assert_msg(strstr(x.diag, want) != NULL, "want \"%s\" in:\n%s", want,
		      x.diag);
	lm_fini(&x);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("codegen_causal");
	TCase *t = tcase_create("causal_lm");
	tcase_set_timeout(t, 300);
	tcase_add_test(t,
		       test_causal_lm_jit_matches_the_interpreter_at_t_3_and_7);
	tcase_add_test(
		t,
		test_causal_lm_gradient_matches_finite_differences_at_t_3_and_7);
	tcase_add_test(t, test_causal_lm_earlier_steps_do_not_see_later_tokens);
	tcase_add_test(t,
		       test_causal_lm_reports_t_past_the_positions_at_the_slice);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
