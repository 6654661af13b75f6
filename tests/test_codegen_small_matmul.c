/*
 * test_codegen_small_matmul.c - products too small for the sgemm (M x N
 * x K under 4096: cg_lower_nn.c's matmul_row), as B and as a transposed
 * operand, forward and in a loss's gradient (tests/models/small_matmul.g,
 * 9 to 37 rows, N of 1 to 3): the compiled fwd_I and loss_I_grad give
 * the same bits at 1 and 2 threads (rows split one by one) and fused as
 * unfused, the float32 interpreter's values within float rounding and
 * the float64 interpreter's within 1e-4. A (15, 17) x (17, 1) product
 * differed in a row at 2 threads while its multiply-adds were left to
 * LLVM's contraction and the transposed form's sum to its reassociation.
 */
#include "test_model_check.h"

static const int cases[] = {0, 1, 2, 3, 4};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

START_TEST(test_small_products_match_at_any_thread_count)
{
	tm_model md;
	tm_model_init(&md, "tests/models/small_matmul.g", cases, N_CASES);
	char name[32];
	snprintf(name, sizeof name, "fwd_%d", cases[_i]);
	tm_check_entry(&md, name);
	tm_model_fini(&md);
}
END_TEST

START_TEST(test_small_product_gradients_match_at_any_thread_count)
{
	tm_model md;
	tm_model_init(&md, "tests/models/small_matmul.g", cases, N_CASES);
	char name[32];
	snprintf(name, sizeof name, "loss_%d_grad", cases[_i]);
	tm_check_entry(&md, name);
	tm_model_fini(&md);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("codegen_small_matmul");
	TCase *tc = tcase_create("small_matmul");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_small_products_match_at_any_thread_count,
			    0, N_CASES);
	tcase_add_loop_test(tc,
			    test_small_product_gradients_match_at_any_thread_count,
			    0, N_CASES);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
