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
 * with the same checks (tests/test_model_check.h's tm_check_entry, which
 * also compares with the float64 interpreter).
 */
#include "test_model_check.h"

/* epilogue.g with the gradients of its losses (the harness: its dims at
 * their fallbacks, parameters of seed 5). */
static void model_init(tm_model *md)
{
	static const char *const losses[] = {"loss", "loss_masked",
					     "loss_padded", "loss_normed",
					     "loss_chain"};
	tm_model_init_named(md, "tests/models/epilogue.g", losses,
			    (int)(sizeof losses / sizeof *losses));
}

START_TEST(test_bias_and_residual_adds_run_in_their_matmuls_kernels)
{
	tm_model md;
	model_init(&md);
	cg_program *fused = tm_compile(&md, "forward", false);
	cg_program *plain = tm_compile(&md, "forward", true);
	/* x @ W1 + b1 and h @ W2 + x: two kernels, not four */
	ck_assert_uint_eq(cg_program_n_kernels(fused), 2);
	ck_assert_uint_eq(cg_program_n_kernels(plain), 4);
	cg_program_destroy(fused);
	cg_program_destroy(plain);
	tm_model_fini(&md);
}
END_TEST

START_TEST(test_forward_with_epilogues_is_the_unfused_forward)
{
	tm_model md;
	model_init(&md);
	tm_check_entry(&md, "forward");
	tm_model_fini(&md);
}
END_TEST

START_TEST(test_gradient_with_epilogues_is_the_unfused_gradient)
{
	tm_model md;
	model_init(&md);
	tm_check_entry(&md, "loss_grad");
	tm_model_fini(&md);
}
END_TEST

START_TEST(test_a_matmul_leaving_out_zero_rows_is_no_epilogue)
{
	tm_model md;
	model_init(&md);
	tm_check_entry(&md, "loss_masked_grad");
	tm_model_fini(&md);
}
END_TEST

START_TEST(test_matmuls_leaving_out_a_backward_pass_zero_rows)
{
	tm_model md;
	model_init(&md);
	tm_check_entry(&md, "loss_padded_grad");
	tm_model_fini(&md);
}
END_TEST

/* Layer norm's gradient carries the padding's zero rows to the matmuls
 * before it, which leave them out, the weights' gradients X^T dY over
 * two k-blocks: every output has the bits of the program whose sgemms
 * keep every row (keep_zero_rows), on 1 thread and 2, and the checks of
 * tm_check_entry. Valid lengths 1..16 cycling leave out about half the
 * rows. */
START_TEST(test_matmuls_leaving_out_zero_rows_through_layer_norm)
{
	tm_model md;
	model_init(&md);
	const char *fname = "loss_normed_grad";
	tm_check_entry(&md, fname);
	const ir_func *f = ir_module_find_func(md.m, fname);
	tm_inputs_init(&md, f);
	int32_t *valid = md.in[2].data;
	for (int b = 0; b < 24; b++)
		valid[b] = 1 + (b * 7) % 16;
	cg_program *skip = tm_compile(&md, fname, false);
	cg_program *keep = tm_compile_with(&md, fname, false, true);
	float *got[MAXT], *got2[MAXT], *ref[MAXT];
	tm_jit_run(&md, skip, fname, 1, got);
	tm_jit_run(&md, skip, fname, 2, got2);
	tm_jit_run(&md, keep, fname, 1, ref);
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
	tm_inputs_fini(&md);
	tm_model_fini(&md);
}
END_TEST

START_TEST(test_two_adds_in_a_row_run_in_their_matmuls_kernel)
{
	tm_model md;
	model_init(&md);
	cg_program *fused = tm_compile(&md, "forward_chain", false);
	cg_program *plain = tm_compile(&md, "forward_chain", true);
	/* y = x + (x @ W3 + b3): one kernel, not three; (x @ Wd + y @ We)
	 * + relu(y) @ Wf: y @ We, relu(y) @ Wf, and x @ Wd with both adds:
	 * three kernels, not five; relu's (calls: the two products of
	 * one shape share a kernel) */
	ck_assert_uint_eq(cg_program_n_calls(fused, "forward_chain"), 5);
	ck_assert_uint_eq(cg_program_n_calls(plain, "forward_chain"), 9);
	cg_program_destroy(fused);
	cg_program_destroy(plain);
	tm_model_fini(&md);
}
END_TEST

START_TEST(test_two_adds_in_a_row_give_the_unfused_forward)
{
	tm_model md;
	model_init(&md);
	tm_check_entry(&md, "forward_chain");
	tm_model_fini(&md);
}
END_TEST

START_TEST(test_two_adds_in_a_row_give_the_unfused_gradient)
{
	tm_model md;
	model_init(&md);
	tm_check_entry(&md, "loss_chain_grad");
	tm_model_fini(&md);
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
