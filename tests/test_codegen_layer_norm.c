/*
 * test_codegen_layer_norm.c - a layer norm's training gradient as a
 * model's step computes it, on tests/models/layer_norm.g (widths 1, 7,
 * 16, 32, 33, 64, 256 and 1000, over 19 to 37 rows: no multiple of 16):
 * gamma's gradient reads one layer_norm of x (ones and zeros for its
 * scale and shift), no row means or sqrt; the compiled loss_grad gives
 * the same bits fused and unfused, at 1 and 2 threads (rows split one by
 * one), the float32 interpreter's values within float rounding, and the
 * float64 interpreter's within 1e-4. At 16 columns the loss differed at
 * 2 threads while layer_norm's row sums were left to LLVM's
 * reassociation (cg_lower_nn.c, row_sums).
 */
#include "test_model_check.h"

static const int widths[] = {1, 7, 16, 32, 33, 64, 256, 1000};
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

static Suite *suite(void)
{
	Suite *s = suite_create("codegen_layer_norm");
	TCase *tc = tcase_create("layer_norm");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_gamma_gradient_reads_one_layer_norm_of_x);
	tcase_add_loop_test(
		tc, test_layer_norm_gradients_match_the_interpreter_at_any_width,
		0, N_WIDTHS);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
