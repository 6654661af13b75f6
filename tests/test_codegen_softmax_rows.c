/*
 * test_codegen_softmax_rows.c - softmax, log_softmax, masked_softmax and
 * cross entropy (forward, and backward in a loss's gradient) over rows
 * of widths 1 to 257, 19 or 21 rows (tests/models/softmax_rows.g): the
 * compiled fwd_W and loss_W_grad give the same bits at 1 and 2 threads
 * (rows split one by one) and fused as unfused, the float32
 * interpreter's values within float rounding and the float64
 * interpreter's within 1e-4. The rows' sums of exps had `reassoc`, and
 * LLVM vectorized rows of 4 to 8 columns across rows in the row loop but
 * not in its remainder: masked_softmax of a row differed at 2 threads
 * (cg_lower_nn.c, exp_sum).
 */
#include "test_model_check.h"

static const int widths[] = {1, 4, 6, 7, 8, 16, 33, 70, 257};
#define N_WIDTHS (int)(sizeof widths / sizeof widths[0])

START_TEST(test_softmax_rows_match_at_any_thread_count)
{
	tm_model md;
	tm_model_init(&md, "tests/models/softmax_rows.g", widths, N_WIDTHS);
	char name[32];
	snprintf(name, sizeof name, "fwd_%d", widths[_i]);
	tm_check_entry(&md, name);
	tm_model_fini(&md);
}
END_TEST

START_TEST(test_softmax_row_gradients_match_at_any_thread_count)
{
	tm_model md;
	tm_model_init(&md, "tests/models/softmax_rows.g", widths, N_WIDTHS);
	char name[32];
	snprintf(name, sizeof name, "loss_%d_grad", widths[_i]);
	tm_check_entry(&md, name);
	tm_model_fini(&md);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("codegen_softmax_rows");
	TCase *tc = tcase_create("softmax_rows");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_softmax_rows_match_at_any_thread_count, 0,
			    N_WIDTHS);
	tcase_add_loop_test(tc,
			    test_softmax_row_gradients_match_at_any_thread_count,
			    0, N_WIDTHS);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
