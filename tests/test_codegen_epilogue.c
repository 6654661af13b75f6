/*
 * test_codegen_epilogue.c - matmuls computed with their adds in the
 * sgemm's epilogue (cg_lower_epilogue_plan): on tests/models/epilogue.g,
 * a bias add and a residual add each run inside their matmul's kernel,
 * and the forward pass and the training gradient give the bits of the
 * unfused program (no_fuse), at 1 and 2 threads, and the interpreter's
 * values within float rounding; a matmul that leaves out a masked loss
 * gradient's zero rows is not given to its add, and the matmuls that
 * leave out the zero rows that gradient's backward pass carries give
 * the interpreter's values. Two adds in a row after a product (a bias
 * then a residual; a sum of three products) both go to its epilogue,
 * with the same checks.
 */
#include "cg_program.h"
#include "frontend.h"
#include "interp.h"
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 24

typedef struct model {
	ir_ctx ctx;
	ir_module *m;
	int64_t syms[16];
	interp_tensor in[MAXT], params[64];
} model;

static size_t round64(size_t n)
{
	return (n + 63) / 64 * 64 + 64;
}

/* Random inputs of f: floats in [-1, 1), ids in [0, 10). */
static void inputs_init(model *md, const ir_func *f)
{
	uint64_t rng = 7;
	ck_assert_uint_le(f->n_inputs, MAXT);
	for (uint32_t i = 0; i < f->n_inputs; i++) {
		const ir_type *t = &f->g.nodes[f->inputs[i]].type;
		int64_t dims[IR_MAX_RANK];
		for (int d = 0; d < t->rank; d++)
			dims[d] = t->dims[d].coef *
				  (t->dims[d].sym < 0
					   ? 1
					   : md->syms[t->dims[d].sym]);
		ck_assert(interp_tensor_alloc(&md->ctx, &md->in[i], t->dtype,
					      t->rank, dims));
		for (int64_t e = 0; e < interp_tensor_numel(&md->in[i]); e++) {
			rng = rng * 6364136223846793005ull +
			      1442695040888963407ull;
			uint32_t r = (uint32_t)(rng >> 33);
			if (t->dtype == IR_I32)
				((int32_t *)md->in[i].data)[e] = (int32_t)(r %
									   10);
			else
				((float *)md->in[i].data)[e] = (float)(r % 2000) /
								       1000.0f -
							       1.0f;
		}
	}
}

static void inputs_fini(model *md, const ir_func *f)
{
	for (uint32_t i = 0; i < f->n_inputs; i++)
		interp_tensor_fini(&md->ctx, &md->in[i]);
}

/* epilogue.g with the gradients of its three losses and its
 * parameters (seed 5). */
static void model_init(model *md)
{
	memset(md, 0, sizeof *md);
	ir_ctx_init(&md->ctx);
	uint32_t file = ir_ctx_load_source(&md->ctx,
					   tu_path("tests/models/epilogue.g"));
	ck_assert_uint_ne(file, 0);
	md->m = fe_compile(&md->ctx, file);
	ck_assert(md->m != NULL);
	pass_options po = {0};
	ck_assert(pass_pipeline_forward(md->m, &po));
	ck_assert(pass_autodiff(md->m, "loss"));
	ck_assert(pass_autodiff(md->m, "loss_masked"));
	ck_assert(pass_autodiff(md->m, "loss_padded"));
	ck_assert(pass_autodiff(md->m, "loss_normed"));
	ck_assert(pass_autodiff(md->m, "loss_chain"));
	ck_assert(pass_pipeline_run(md->m, &po));
	for (uint32_t i = 0; i < md->m->n_syms; i++)
		md->syms[i] = md->m->syms[i].fallback;
	ck_assert(md->m->n_params <= 64);
	ck_assert(interp_params_init(&md->ctx, md->m, md->syms, 5, false,
				     md->params));
}

static void model_fini(model *md)
{
	for (uint32_t i = 0; i < md->m->n_params; i++)
		interp_tensor_fini(&md->ctx, &md->params[i]);
	ir_module_destroy(md->m);
	ir_ctx_fini(&md->ctx);
}

static cg_program *compile_with(model *md, const char *fname, bool no_fuse,
				bool keep_zero_rows)
{
	const char *only[1] = {fname};
	cg_program_options o = {.only = only,
				.n_only = 1,
				.no_fuse = no_fuse,
				.keep_zero_rows = keep_zero_rows};
	cg_program *p = cg_program_create(&md->ctx, md->m, md->syms, &o);
	ck_assert(p != NULL);
	ck_assert(cg_program_jit(p));
	return p;
}

static cg_program *compile(model *md, const char *fname, bool no_fuse)
{
	return compile_with(md, fname, no_fuse, false);
}

/* Entry fname of p on n_threads; outs[k] receives output k (malloc'd). */
static void jit_run(model *md, cg_program *p, const char *fname, int n_threads,
		    float **outs)
{
	char *pb = aligned_alloc(64, round64(cg_program_params_bytes(p)));
	char *sb = aligned_alloc(64,
				 round64(cg_program_scratch_bytes(p, fname)));
	ck_assert(pb && sb);
	uint32_t n;
	const attnrt_param_info *pi = cg_program_params(p, &n);
	for (uint32_t i = 0; i < n; i++)
		memcpy(pb + pi[i].offset, md->params[i].data,
		       (size_t)interp_tensor_numel(&md->params[i]) * 4);
	const attnrt_tensor_info *oi = cg_program_outputs(p, fname, &n);
	void *o[MAXT];
	for (uint32_t k = 0; k < n; k++) {
		size_t e = 1;
		for (int d = 0; d < oi[k].rank; d++)
			e *= (size_t)oi[k].dims[d];
		o[k] = outs[k] = calloc(e + 1, 4);
	}
	const ir_func *f = ir_module_find_func(md->m, fname);
	const void *ins[MAXT];
	for (uint32_t i = 0; i < f->n_inputs; i++)
		ins[i] = md->in[i].data;
	attnrt_run run = {.seed = 3, .n_threads = n_threads};
	ck_assert_int_eq(cg_program_entry(p, fname)(&run, pb, sb, ins, o), 0);
	free(pb);
	free(sb);
}

/* fname fused and unfused, at 1 and 2 threads: the same bits, and the
 * interpreter's values within 1e-5 (relative, or absolute near zero). */
static void check_entry(model *md, const char *fname)
{
	const ir_func *f = ir_module_find_func(md->m, fname);
	ck_assert_uint_le(f->n_outputs, MAXT);
	inputs_init(md, f);
	cg_program *fused = compile(md, fname, false);
	cg_program *plain = compile(md, fname, true);
	interp_tensor want[MAXT] = {0};
	interp_opts io = {.seed = 3};
	ck_assert(interp_run(&md->ctx, md->m, f, &io, md->params, md->in, want));
	float *got[MAXT], *got2[MAXT], *ref[MAXT];
	jit_run(md, fused, fname, 1, got);
	jit_run(md, fused, fname, 2, got2);
	jit_run(md, plain, fname, 1, ref);
	for (uint32_t k = 0; k < f->n_outputs; k++) {
		size_t n = (size_t)interp_tensor_numel(&want[k]);
		ck_assert_msg(memcmp(got[k], ref[k], n * 4) == 0,
			      "%s output %s: fused differs from unfused", fname,
			      f->output_names[k]);
		ck_assert(memcmp(got[k], got2[k], n * 4) == 0);
		double e = tu_max_rel_err(got[k], want[k].data, n, 1e-5, 1e-5);
		ck_assert_msg(e <= 1, "%s output %s: JIT vs interpreter %g",
			      fname, f->output_names[k], e);
		free(got[k]);
		free(got2[k]);
		free(ref[k]);
		interp_tensor_fini(&md->ctx, &want[k]);
	}
	cg_program_destroy(fused);
	cg_program_destroy(plain);
	inputs_fini(md, f);
}

START_TEST(test_bias_and_residual_adds_run_in_their_matmuls_kernels)
{
	model md;
	model_init(&md);
	cg_program *fused = compile(&md, "forward", false);
	cg_program *plain = compile(&md, "forward", true);
	/* x @ W1 + b1 and h @ W2 + x: two kernels, not four */
	ck_assert_uint_eq(cg_program_n_kernels(fused), 2);
	ck_assert_uint_eq(cg_program_n_kernels(plain), 4);
	cg_program_destroy(fused);
	cg_program_destroy(plain);
	model_fini(&md);
}
END_TEST

START_TEST(test_forward_with_epilogues_is_the_unfused_forward)
{
	model md;
	model_init(&md);
	check_entry(&md, "forward");
	model_fini(&md);
}
END_TEST

START_TEST(test_gradient_with_epilogues_is_the_unfused_gradient)
{
	model md;
	model_init(&md);
	check_entry(&md, "loss_grad");
	model_fini(&md);
}
END_TEST

START_TEST(test_a_matmul_leaving_out_zero_rows_is_no_epilogue)
{
	model md;
	model_init(&md);
	check_entry(&md, "loss_masked_grad");
	model_fini(&md);
}
END_TEST

START_TEST(test_matmuls_leaving_out_a_backward_pass_zero_rows)
{
	model md;
	model_init(&md);
	check_entry(&md, "loss_padded_grad");
	model_fini(&md);
}
END_TEST

/* Layer norm's gradient carries the padding's zero rows to the matmuls
 * before it, which leave them out, the weights' gradients X^T dY over
 * two k-blocks: every output has the bits of the program whose sgemms
 * keep every row (keep_zero_rows), on 1 thread and 2, and the checks of
 * check_entry. Valid lengths 1..16 cycling leave out about half the
 * rows. */
START_TEST(test_matmuls_leaving_out_zero_rows_through_layer_norm)
{
	model md;
	model_init(&md);
	const char *fname = "loss_normed_grad";
	check_entry(&md, fname);
	const ir_func *f = ir_module_find_func(md.m, fname);
	inputs_init(&md, f);
	int32_t *valid = md.in[2].data;
	for (int b = 0; b < 24; b++)
		valid[b] = 1 + (b * 7) % 16;
	cg_program *skip = compile(&md, fname, false);
	cg_program *keep = compile_with(&md, fname, false, true);
	float *got[MAXT], *got2[MAXT], *ref[MAXT];
	jit_run(&md, skip, fname, 1, got);
	jit_run(&md, skip, fname, 2, got2);
	jit_run(&md, keep, fname, 1, ref);
	uint32_t n_out;
	const attnrt_tensor_info *oi = cg_program_outputs(skip, fname, &n_out);
	for (uint32_t k = 0; k < n_out; k++) {
		size_t n = 1;
		for (int d = 0; d < oi[k].rank; d++)
			n *= (size_t)oi[k].dims[d];
		ck_assert_msg(memcmp(got[k], ref[k], n * 4) == 0,
			      "output %s: leaving out zero rows changed it",
			      f->output_names[k]);
		ck_assert(memcmp(got[k], got2[k], n * 4) == 0);
		free(got[k]);
		free(got2[k]);
		free(ref[k]);
	}
	cg_program_destroy(skip);
	cg_program_destroy(keep);
	inputs_fini(&md, f);
	model_fini(&md);
}
END_TEST

START_TEST(test_two_adds_in_a_row_run_in_their_matmuls_kernel)
{
	model md;
	model_init(&md);
	cg_program *fused = compile(&md, "forward_chain", false);
	cg_program *plain = compile(&md, "forward_chain", true);
	/* y = x + (x @ W3 + b3): one kernel, not three; (x @ Wd + y @ We)
	 * + relu(y) @ Wf: y @ We, relu(y) @ Wf, and x @ Wd with both adds:
	 * three kernels, not five; relu's (calls: the two products of
	 * one shape share a kernel) */
	ck_assert_uint_eq(cg_program_n_calls(fused, "forward_chain"), 5);
	ck_assert_uint_eq(cg_program_n_calls(plain, "forward_chain"), 9);
	cg_program_destroy(fused);
	cg_program_destroy(plain);
	model_fini(&md);
}
END_TEST

START_TEST(test_two_adds_in_a_row_give_the_unfused_forward)
{
	model md;
	model_init(&md);
	check_entry(&md, "forward_chain");
	model_fini(&md);
}
END_TEST

START_TEST(test_two_adds_in_a_row_give_the_unfused_gradient)
{
	model md;
	model_init(&md);
	check_entry(&md, "loss_chain_grad");
	model_fini(&md);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("codegen_epilogue");
	TCase *tc = tcase_create("epilogue");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc,
		       test_bias_and_residual_adds_run_in_their_matmuls_kernels);
	tcase_add_test(tc, test_forward_with_epilogues_is_the_unfused_forward);
	tcase_add_test(tc, test_gradient_with_epilogues_is_the_unfused_gradient);
	tcase_add_test(tc, test_a_matmul_leaving_out_zero_rows_is_no_epilogue);
	tcase_add_test(tc, test_matmuls_leaving_out_a_backward_pass_zero_rows);
	tcase_add_test(tc,
		       test_matmuls_leaving_out_zero_rows_through_layer_norm);
	tcase_add_test(tc, test_two_adds_in_a_row_run_in_their_matmuls_kernel);
	tcase_add_test(tc, test_two_adds_in_a_row_give_the_unfused_forward);
	tcase_add_test(tc, test_two_adds_in_a_row_give_the_unfused_gradient);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
