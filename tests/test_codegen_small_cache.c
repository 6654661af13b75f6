/*
 * test_codegen_small_cache.c - the small attention kernels' cache of the
 * weights (codegen/cg_lower_attn_small.c, docs/fusion.md "The weights'
 * cache"): in loss_grad the small forward leaves each block's
 * exponentials, 1 / l, dropout's keep masks and the keys it visited
 * after its output, and the small backward reads them instead of
 * computing them again. The gradients are the bits of the backward that
 * recomputes them (cg_program_options.no_attn_cache) at both vector
 * widths, at 1 and 2 threads; on a batch element with a value that is not
 * finite the backward recomputes where the forward skipped keys it
 * would visit; the cache costs bounded scratch, and only where a
 * gradient reads it.
 */
#include "attn_cases.h"
#include "attn_jit.h"
#include "cg_gemm.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <string.h>

/* loss_grad's outputs of m's program with options po, at n_threads. */
static void run_grad(tu_graph *x, const ir_module *m, const ac_case *c,
		     const cg_program_options *po, int n_threads,
		     const interp_tensor *in, const interp_tensor *params,
		     jit_out *r)
{
	jit_run_po(x, m, "loss_grad", c->seed, c->is_training, n_threads, po,
		   in, params, r);
}

static void expect_same(const jit_out *a, const jit_out *b, const char *what)
{
	ck_assert_uint_eq(a->n, b->n);
	for (uint32_t o = 0; o < a->n; o++) {
		int64_t n = interp_tensor_numel(&a->t[o]);
		ck_assert_msg(memcmp(a->t[o].data, b->t[o].data,
				     (size_t)n * 4) == 0,
			      "output %u: %s", o, what);
	}
}

/* Whether the LLVM IR of m's program (options po) defines the small
 * body of kind ("sfwd", "sbwd") that writes or reads the cache. */
static bool has_cache_body(tu_graph *x, const ir_module *m,
			   const cg_program_options *po, const char *kind)
{
	cg_program *p = cg_program_create(&x->ctx, m, NULL, po);
	ck_assert(p != NULL);
	char *ir = NULL;
	size_t len = 0;
	ck_assert(cg_program_emit_buffer(p, CG_EMIT_LLVM, &ir, &len));
	cg_program_destroy(p);
	char name[32];
	snprintf(name, sizeof name, "@\"attn.%s.", kind);
	bool found = false;
	for (const char *at = strstr(ir, name); at && !found;
	     at = strstr(at + 1, name)) {
		const char *end = strchr(at + 2, '"');
		found = end && end - at > 4 && strncmp(end - 3, ".wc", 3) == 0;
	}
	free(ir);
	return found;
}

/* A case's fused module with its inputs and parameters (seed c->seed). */
typedef struct fixture {
	tu_graph x;
	ir_module *m;
	interp_tensor in[AJ_MAX_TENSORS], params[AJ_MAX_TENSORS];
	uint32_t n_in;
} fixture;

static void fixture_init(fixture *fx, const ac_case *c)
{
	tu_graph_init_ctx(&fx->x);
	fx->m = ac_compile(&fx->x.ctx, c, AC_FUSED);
	fx->n_in = ac_inputs(&fx->x.ctx, c, fx->in);
	aj_params_init(&fx->x, fx->m, c->seed, fx->params);
}

static void fixture_fini(fixture *fx)
{
	aj_tensors_fini(&fx->x, fx->in, fx->n_in);
	aj_tensors_fini(&fx->x, fx->params, fx->m->n_params);
	ir_module_destroy(fx->m);
	tu_graph_fini(&fx->x);
}

/* The case's gradients with the cache, at 1 and 2 threads and at the
 * other vector width, are those of the backward that recomputes. */
static void check_case(const ac_case *c)
{
	fixture fx;
	fixture_init(&fx, c);
	tu_graph *x = &fx.x;
	const ir_module *m = fx.m;
	const interp_tensor *in = fx.in, *params = fx.params;
	cg_program_options with = {0}, without = {.no_attn_cache = true};
	ck_assert(has_cache_body(x, m, &with, "sfwd"));
	ck_assert(has_cache_body(x, m, &with, "sbwd"));
	ck_assert(!has_cache_body(x, m, &without, "sbwd"));
	jit_out a1 = {0}, a2 = {0}, b1 = {0}, aw = {0}, bw = {0};
	run_grad(x, m, c, &with, 1, in, params, &a1);
	run_grad(x, m, c, &with, 2, in, params, &a2);
	run_grad(x, m, c, &without, 1, in, params, &b1);
	expect_same(&a1, &b1, "the cached backward differs from recomputing");
	expect_same(&a1, &a2, "1 and 2 threads differ");
	int other = cg_gemm_host_vector_width() == 16 ? 8 : 16;
	cg_program_options with_w = {.vector_width = other};
	cg_program_options without_w = {.vector_width = other,
					.no_attn_cache = true};
	run_grad(x, m, c, &with_w, 1, in, params, &aw);
	run_grad(x, m, c, &without_w, 1, in, params, &bw);
	expect_same(&aw, &bw, "the other width's cached backward differs");
	jit_out_fini(x, &a1);
	jit_out_fini(x, &a2);
	jit_out_fini(x, &b1);
	jit_out_fini(x, &aw);
	jit_out_fini(x, &bw);
	fixture_fini(&fx);
}

/* Valid lengths per batch element (blocks skip keys) with dropout in
 * training; the book's causal self-attention with 4 heads in place;
 * lengths per query over 20 query rows (two blocks of an attention,
 * two slots); no mask; dropout outside training; 16 keys of 64 wide. */
static const ac_case cache_cases[] = {
	/* N, Q, K, d, dv, valid, p, training, seed, heads */
	{3, 5, 6, 8, 5, AC_BATCH, 0.3, true, 51, 0},
	{2, 10, 10, 8, 8, AC_CAUSAL, 0.1, true, 52, 4},
	{2, 20, 7, 4, 6, AC_QUERY, 0.2, true, 53, 2},
	{3, 9, 12, 16, 16, AC_NONE, 0.5, true, 54, 0},
	{2, 10, 10, 8, 8, AC_BATCH, 0.1, false, 55, 4},
	{2, 17, 16, 64, 64, AC_BATCH, 0, false, 56, 0},
};

START_TEST(test_the_cached_backward_gives_the_bits_of_the_recomputing_one)
{
	check_case(&cache_cases[_i]);
}
END_TEST

/* Batch element 0 of two heads, its valid length 2 of 6 keys: head 0's
 * query row 0 scores both its keys 50 above the fill (the forward skips
 * the masked keys: exp(fill - m) = exp(-50) is not 0, but too small to
 * weigh), head 1's query row 1 holds +inf, so the backward's test of
 * finite operands fails for the whole batch element and it visits
 * every key, where its weights are not the forward's. It must recompute
 * them: the masked keys' dv then hold their e^-50 shares, as without
 * the cache. */
START_TEST(test_the_backward_recomputes_where_the_forward_skipped_keys_it_visits)
{
	const ac_case c = {2, 3, 6, 8, 8, AC_BATCH, 0, false, 57, 2};
	fixture fx;
	fixture_init(&fx, &c);
	((int32_t *)fx.in[0].data)[0] = 2;
	float *q = fx.params[0].data, *k = fx.params[1].data;
	int64_t w = 2 * c.d; /* two heads side by side */
	float near = (-1e6f + 50.0f) / sqrtf((float)c.d);
	for (int64_t j = 0; j < c.d; j++) {
		q[0 * w + j] = near; /* batch 0, row 0, head 0 */
		k[0 * w + j] = 1.0f; /* batch 0, keys 0 and 1, head 0 */
		k[1 * w + j] = 1.0f;
	}
	q[1 * w + c.d] = INFINITY; /* batch 0, row 1, head 1 */
	jit_out a = {0}, b = {0};
	cg_program_options with = {0}, without = {.no_attn_cache = true};
	run_grad(&fx.x, fx.m, &c, &with, 1, fx.in, fx.params, &a);
	run_grad(&fx.x, fx.m, &c, &without, 1, fx.in, fx.params, &b);
	expect_same(&a, &b, "the cached backward differs from recomputing");
	/* dv of batch 0's masked keys 2 .. 5 in head 0: the e^-50 shares */
	const ir_func *f = ir_module_find_func(fx.m, "loss_grad");
	bool found = false;
	for (uint32_t o = 0; o < f->n_outputs; o++) {
		if (strcmp(f->output_names[o], "grad.v") != 0)
			continue;
		found = true;
		const float *dv = a.t[o].data;
		bool is_nonzero = false;
		for (int64_t key = 2; key < c.K; key++)
			for (int64_t j = 0; j < c.dv; j++)
				is_nonzero |= dv[key * 2 * c.dv + j] != 0;
		ck_assert_msg(is_nonzero, "no share of the masked keys in dv");
	}
	ck_assert(found);
	jit_out_fini(&fx.x, &a);
	jit_out_fini(&fx.x, &b);
	fixture_fini(&fx);
}
END_TEST

/* The cache takes loss_grad's scratch: at most a vector of floats per
 * key and two more per block of query rows, and the forward's output,
 * which the cache follows, living until the gradient; none in loss,
 * which has no gradient to read it. */
START_TEST(test_the_cache_costs_bounded_scratch_and_only_with_a_gradient)
{
	const ac_case c = {64, 10, 10, 8, 8, AC_BATCH, 0.1, true, 58, 4};
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_compile(&x.ctx, &c, AC_FUSED);
	cg_program_options with = {.sched_threads = 1},
			   without = {.sched_threads = 1, .no_attn_cache = true};
	cg_program *pw = cg_program_create(&x.ctx, m, NULL, &with);
	cg_program *po = cg_program_create(&x.ctx, m, NULL, &without);
	ck_assert(pw && po);
	size_t gw = cg_program_scratch_bytes(pw, "loss_grad"),
	       go = cg_program_scratch_bytes(po, "loss_grad");
	int64_t vw = cg_gemm_host_vector_width();
	int64_t blocks = (int64_t)c.N * c.H * ((c.Q + vw - 1) / vw);
	ck_assert_uint_gt(gw, go);
	size_t out = (size_t)c.N * c.Q * c.H * c.dv * 4;
	ck_assert_uint_le(gw - go,
			  (size_t)(blocks * ((c.K + 2) * vw + 16) * 4 + 64) +
				  out);
	ck_assert_uint_eq(cg_program_scratch_bytes(pw, "loss"),
			  cg_program_scratch_bytes(po, "loss"));
	cg_program_destroy(pw);
	cg_program_destroy(po);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

static Suite *cache_suite(void)
{
	Suite *s = suite_create("codegen_small_cache");
	TCase *tc = tcase_create("cache");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(
		tc,
		test_the_cached_backward_gives_the_bits_of_the_recomputing_one,
		0, (int)(sizeof cache_cases / sizeof cache_cases[0]));
	tcase_add_test(
		tc,
		test_the_backward_recomputes_where_the_forward_skipped_keys_it_visits);
	tcase_add_test(
		tc,
		test_the_cache_costs_bounded_scratch_and_only_with_a_gradient);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(cache_suite());
}
