/*
 * test_codegen_profile.c - programs compiled with is_profiled (--profile):
 * the counters count each kernel call exactly (a model counted by hand,
 * tests/models/profile_mlp.g, and every site of a training-mode entry
 * point in order and under the static schedule), the sites' work comes
 * from the shapes, and profiled code gives the same bits as plain code at
 * 1 and 2 threads; a gradient function's kernels the loss does not read
 * are its backward.
 */
#include "cg_program.h"
#include "frontend.h"
#include "interp.h"
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 16

typedef struct model {
	ir_ctx ctx;
	ir_module *m;
	int64_t syms[16];
} model;

/* Loads rel through the pass pipeline (with loss_grad from autodiff
 * when grad names the loss). */
static void model_load_grad(model *md, const char *rel, int64_t sym_value,
			    const char *grad)
{
	memset(md, 0, sizeof *md);
	ir_ctx_init(&md->ctx);
	uint32_t file = ir_ctx_load_source(&md->ctx, tu_path(rel));
	ck_assert_uint_ne(file, 0);
	md->m = fe_compile(&md->ctx, file);
	ck_assert_msg(md->m != NULL, "%s does not compile", rel);
	pass_options po = {0};
	ck_assert(!grad || pass_pipeline_forward(md->m, &po));
	ck_assert(!grad || pass_autodiff(md->m, grad));
	ck_assert(pass_pipeline_run(md->m, &po));
	ck_assert_uint_le(md->m->n_syms, 16);
	for (uint32_t s = 0; s < md->m->n_syms; s++)
		md->syms[s] = md->m->syms[s].fallback ? md->m->syms[s].fallback
						      : sym_value;
}

static void model_load(model *md, const char *rel, int64_t sym_value)
{
	model_load_grad(md, rel, sym_value, NULL);
}

static void model_free(model *md)
{
	ir_module_destroy(md->m);
	ir_ctx_fini(&md->ctx);
}

static cg_program *compile(model *md, bool is_profiled, int sched_threads)
{
	cg_program_options o = {.is_profiled = is_profiled,
				.sched_threads = sched_threads};
	cg_program *p = cg_program_create(&md->ctx, md->m, md->syms, &o);
	ck_assert_msg(p != NULL, "lowering %s failed", md->m->name);
	ck_assert(cg_program_jit(p));
	return p;
}

static size_t numel(const attnrt_tensor_info *t)
{
	size_t n = 1;
	for (int d = 0; d < t->rank; d++)
		n *= (size_t)t->dims[d];
	return n;
}

/* The buffers of one call of func: inputs filled from a fixed sequence
 * (ids and lengths in [0, 4], floats in [-1, 1)), zeroed outputs, the
 * params block initialized from seed 5 and the scratch slab. */
typedef struct call {
	void *in[MAXT], *out[MAXT], *params, *scratch;
	uint32_t n_in, n_out;
	const attnrt_tensor_info *outs;
} call;

static void call_init(call *c, const cg_program *p, const char *func)
{
	memset(c, 0, sizeof *c);
	const attnrt_tensor_info *ins = cg_program_inputs(p, func, &c->n_in);
	c->outs = cg_program_outputs(p, func, &c->n_out);
	ck_assert(c->n_in <= MAXT && c->n_out <= MAXT);
	uint64_t rng = 7;
	for (uint32_t i = 0; i < c->n_in; i++) {
		size_t n = numel(&ins[i]);
		c->in[i] = calloc(n + 1, 4);
		for (size_t e = 0; e < n; e++) {
			rng = rng * 6364136223846793005ull +
			      1442695040888963407ull;
			uint64_t r = rng >> 33;
			if (ins[i].dtype == ATTNRT_I32)
				((int32_t *)c->in[i])[e] = (int32_t)(r % 5);
			else
				((float *)c->in[i])[e] = (float)(r % 2000000) /
								 1e6f -
							 1;
		}
	}
	for (uint32_t k = 0; k < c->n_out; k++)
		c->out[k] = calloc(numel(&c->outs[k]) + 1, 4);
	uint32_t n_params;
	const attnrt_param_info *pi = cg_program_params(p, &n_params);
	c->params = attnrt_alloc(NULL, cg_program_params_bytes(p));
	c->scratch = attnrt_alloc(NULL, cg_program_scratch_bytes(p, func) + 64);
	ck_assert(c->params && c->scratch);
	ck_assert_int_eq(attnrt_params_init(pi, n_params, c->params, 5),
			 ATTNRT_OK);
}

static void call_fini(call *c)
{
	for (uint32_t i = 0; i < c->n_in; i++)
		free(c->in[i]);
	for (uint32_t k = 0; k < c->n_out; k++)
		free(c->out[k]);
	attnrt_free(NULL, c->params);
	attnrt_free(NULL, c->scratch);
}

static void call_run(call *c, const cg_program *p, const char *func,
		     bool is_training, int n_threads)
{
	attnrt_run run = {.seed = 11,
			  .step = 3,
			  .is_training = is_training,
			  .n_threads = n_threads};
	int st = cg_program_entry(p, func)(&run, c->params, c->scratch,
					   (const void *const *)c->in, c->out);
	ck_assert_int_eq(st, 0);
}

START_TEST(test_profile_counts_each_kernel_call_of_a_model_counted_by_hand)
{
	model md;
	model_load(&md, "tests/models/profile_mlp.g", 4);
	cg_program *p = compile(&md, true, 1);
	uint32_t n;
	const cg_profile_site *s = cg_program_profile_sites(p, "forward", &n);
	/* the entry point, x @ W (B 4, 8 -> 16), sum(relu(.) * relu(.)) */
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(s[0].node, IR_NONE);
	ck_assert_str_eq(s[1].kind, "matmul");
	ck_assert_uint_eq(s[1].loc.line, 11);
	ck_assert_double_eq(s[1].flops, 2.0 * 4 * 8 * 16);
	ck_assert_double_eq(s[1].bytes, 4.0 * (4 * 16 + 4 * 8 + 8 * 16));
	ck_assert_uint_eq(s[1].n_fused, 0);
	ck_assert_str_eq(s[2].kind, "sum");
	ck_assert_uint_eq(s[2].loc.line, 12);
	ck_assert_double_eq(s[2].flops, 0);
	ck_assert_double_eq(s[2].bytes, 4.0 * (1 + 4 * 16));
	ck_assert_uint_eq(s[2].n_fused, 2); /* the mul and the relu */
	const uint64_t *c = cg_program_profile_counters(p, "forward");
	ck_assert_ptr_nonnull(c);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_uint_eq(c[2 * i], 0);
	call k;
	call_init(&k, p, "forward");
	for (int r = 0; r < 3; r++)
		call_run(&k, p, "forward", false, 1);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_uint_eq(c[2 * i], 3);
	ck_assert(cg_program_profile_clock(p) != 0);
	call_fini(&k);
	cg_program_destroy(p);
	model_free(&md);
}
END_TEST

START_TEST(test_a_program_not_profiled_has_no_sites_and_no_counters)
{
	model md;
	model_load(&md, "tests/models/profile_mlp.g", 4);
	cg_program *p = compile(&md, false, 1);
	uint32_t n = 99;
	ck_assert_ptr_null(cg_program_profile_sites(p, "forward", &n));
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(cg_program_profile_counters(p, "forward"));
	ck_assert_uint_eq(cg_program_profile_clock(p), 0);
	cg_program_destroy(p);
	model_free(&md);
}
END_TEST

/* In forward_grad of profile_mlp.g (autodiff's loss and grad.W) the
 * kernels the loss reads are the forward: x @ W (8 -> 16 for 4 rows)
 * and the sum; the rest, the weight's gradient x^T dh among them, are
 * the backward. forward itself, no gradient function, has no backward. */
START_TEST(test_profile_marks_the_kernels_only_the_gradients_read_as_backward)
{
	model md;
	model_load_grad(&md, "tests/models/profile_mlp.g", 4, "forward");
	cg_program *p = compile(&md, true, 1);
	uint32_t n;
	const cg_profile_site *s = cg_program_profile_sites(p, "forward", &n);
	for (uint32_t i = 0; i < n; i++)
		ck_assert(!s[i].is_backward);
	s = cg_program_profile_sites(p, "forward_grad", &n);
	double flops[2] = {0, 0};
	uint32_t sums[2] = {0, 0}, backward = 0;
	for (uint32_t i = 1; i < n; i++) {
		bool b = s[i].is_backward;
		backward += b;
		flops[b] += strcmp(s[i].kind, "matmul") == 0 ? s[i].flops : 0;
		sums[b] += strcmp(s[i].kind, "sum") == 0;
	}
	ck_assert(!s[0].is_backward);
	ck_assert_double_eq(flops[0], 2.0 * 4 * 8 * 16);
	ck_assert_double_eq(flops[1], 2.0 * 4 * 8 * 16);
	ck_assert_uint_eq(sums[0], 1);
	ck_assert_uint_ge(backward, 1);
	ck_assert_uint_lt(backward, n - 1);
	cg_program_destroy(p);
	model_free(&md);
}
END_TEST

/* The outputs of one training-mode call of loss at n_threads. */
static void run_loss(const cg_program *p, int n_threads, void **outs,
		     uint32_t *n_out)
{
	call c;
	call_init(&c, p, "loss");
	call_run(&c, p, "loss", true, n_threads);
	for (uint32_t k = 0; k < c.n_out; k++) {
		size_t bytes = numel(&c.outs[k]) * 4;
		outs[k] = malloc(bytes);
		memcpy(outs[k], c.out[k], bytes);
	}
	*n_out = c.n_out;
	call_fini(&c);
}

START_TEST(test_profiled_code_gives_the_same_bits_and_counts_every_call_at_1_and_2_threads)
{
	model md;
	model_load(&md, "models/transformer.g", 64);
	cg_program *plain = compile(&md, false, 2);
	cg_program *prof = compile(&md, true, 2);
	/* The 2-thread calls run the static schedule's tasks. */
	ck_assert_uint_eq(cg_program_sched_of(prof, "loss").threads, 2);
	for (int threads = 1; threads <= 2; threads++) {
		void *want[MAXT], *got[MAXT];
		uint32_t n_want, n_got;
		run_loss(plain, threads, want, &n_want);
		run_loss(prof, threads, got, &n_got);
		ck_assert_uint_eq(n_want, n_got);
		const attnrt_tensor_info *o = cg_program_outputs(prof, "loss",
								 &n_got);
		for (uint32_t k = 0; k < n_want; k++) {
			ck_assert_msg(memcmp(want[k], got[k],
					     numel(&o[k]) * 4) == 0,
				      "output %u differs at %d threads", k,
				      threads);
			free(want[k]);
			free(got[k]);
		}
		uint32_t n;
		cg_program_profile_sites(prof, "loss", &n);
		const uint64_t *c = cg_program_profile_counters(prof, "loss");
		ck_assert_uint_eq(n, 1 + cg_program_n_calls(prof, "loss"));
		for (uint32_t i = 0; i < n; i++)
			ck_assert_msg(c[2 * i] == (uint64_t)threads,
				      "site %u: %llu calls after %d", i,
				      (unsigned long long)c[2 * i], threads);
	}
	cg_program_destroy(plain);
	cg_program_destroy(prof);
	model_free(&md);
}
END_TEST

/* The FLOPs of the site of kind (one of func's) in
 * tests/models/profile_causal.g (B 2, T 24, d 16, dv 8). */
static double site_flops(const cg_program *p, const char *func, const char *kind)
{
	uint32_t n;
	const cg_profile_site *s = cg_program_profile_sites(p, func, &n);
	double flops = -1;
	for (uint32_t i = 0; i < n; i++)
		if (s[i].kind && strcmp(s[i].kind, kind) == 0) {
			ck_assert_msg(flops < 0, "two %s sites", kind);
			flops = s[i].flops;
		}
	ck_assert_msg(flops >= 0, "no %s site in %s", kind, func);
	return flops;
}

START_TEST(test_profile_counts_the_pairs_a_causal_mask_leaves_visible)
{
	model md;
	model_load_grad(&md, "tests/models/profile_causal.g", 2, "loss");
	cg_program *p = compile(&md, true, 1);
	const double per_pair = 2.0 * 2 * (16 + 8); /* 2 N (d + dv) */
	const char *fa = "fused_attention";
	/* valid length t + 1: 1 + 2 + ... + 24 pairs of 24 x 24 */
	ck_assert_double_eq(site_flops(p, "causal", fa),
			    per_pair * (24 * 25 / 2));
	/* valid length t - 2: rows 0, 1, 2 count all 24 keys, then 1 ..
	 * 21 */
	ck_assert_double_eq(site_flops(p, "offset", fa),
			    per_pair * (3 * 24 + 21 * 22 / 2));
	/* one length a batch element, at run time: the square */
	ck_assert_double_eq(site_flops(p, "padded", fa), per_pair * 24 * 24);
	/* the gradient: twice the forward's, over the triangle */
	ck_assert_double_eq(site_flops(p, "loss_grad", "fused_attention_grad"),
			    2 * per_pair * (24 * 25 / 2));
	cg_program_destroy(p);
	model_free(&md);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("codegen_profile");
	TCase *t = tcase_create("profile");
	tcase_add_test(
		t,
		test_profile_counts_each_kernel_call_of_a_model_counted_by_hand);
	tcase_add_test(t,
		       test_a_program_not_profiled_has_no_sites_and_no_counters);
	tcase_add_test(
		t,
		test_profile_marks_the_kernels_only_the_gradients_read_as_backward);
	tcase_add_test(t,
		       test_profile_counts_the_pairs_a_causal_mask_leaves_visible);
	tcase_add_test(
		t,
		test_profiled_code_gives_the_same_bits_and_counts_every_call_at_1_and_2_threads);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
