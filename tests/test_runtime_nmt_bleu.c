/*
 * test_runtime_nmt_bleu.c - rt_bleu against d2l's bleu(pred_seq,
 * label_seq, k): identical sentences, the brevity penalty, clipped
 * counts, empty tokens, and the cases where Python divides by zero.
 * Each expected value is worked out in its comment (and agrees with
 * d2l's function run in Python).
 */
#include "rt_nmt.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>

#define EPS 1e-12

START_TEST(test_bleu_of_identical_sentences_is_one)
{
	ck_assert_double_eq(rt_bleu("va !", "va !", 2), 1.0);
	ck_assert_double_eq(rt_bleu("j'ai perdu .", "j'ai perdu .", 2), 1.0);
	ck_assert_double_eq(rt_bleu("je suis chez moi .", "je suis chez moi .",
				    4),
			    1.0);
}
END_TEST

START_TEST(test_bleu_applies_the_brevity_penalty_to_short_predictions)
{
	/* 4 tokens against 5, every n-gram matching: exp(1 - 5/4). */
	ck_assert_double_eq_tol(rt_bleu("je suis chez moi",
					"je suis chez moi .", 2),
				exp(-0.25), EPS);
	/* A longer prediction has no penalty: 3 tokens against 2,
	 * p1 = 2/3, p2 = 1/2: (2/3)^0.5 (1/2)^0.25. */
	ck_assert_double_eq_tol(rt_bleu("x a b", "a b", 2),
				sqrt(2.0 / 3) * pow(0.5, 0.25), EPS);
	/* k = 0: the penalty alone, exp(1 - 2/1). */
	ck_assert_double_eq_tol(rt_bleu("a", "a b", 0), exp(-1.0), EPS);
}
END_TEST

START_TEST(test_bleu_weights_each_precision_by_a_power_of_one_half)
{
	/* p1 = 3/4 (c misses), p2 = 1/3 (only "a b"): 0.75^0.5 (1/3)^0.25. */
	ck_assert_double_eq_tol(rt_bleu("a b c d", "a b x d", 2),
				sqrt(0.75) * pow(1.0 / 3, 0.25), EPS);
	ck_assert_double_eq_tol(rt_bleu("a b c d", "a b x d", 2),
				0.6580370064762462, EPS);
	/* 5 against 7 tokens, all 1-, 2-, 3-grams match: exp(1 - 7/5). */
	ck_assert_double_eq_tol(rt_bleu("a b c d e", "a b c d e f g", 3),
				exp(-0.4), EPS);
	/* "il est parti ." vs "... !": p1 = 3/4, p2 = 2/3. */
	ck_assert_double_eq_tol(rt_bleu("il est parti .", "il est parti !", 2),
				sqrt(0.75) * pow(2.0 / 3, 0.25), EPS);
}
END_TEST

START_TEST(test_bleu_clips_counts_by_the_label)
{
	/* "va" is in the label once: p1 = 1/3; no bigram matches: 0. */
	ck_assert_double_eq(rt_bleu("va va va", "va !", 2), 0.0);
	ck_assert_double_eq_tol(rt_bleu("va va va", "va !", 1), sqrt(1.0 / 3),
				EPS);
	/* "a a b" vs "a b a": p1 = 3/3, p2 = 1/2 ("a a" is not there). */
	ck_assert_double_eq_tol(rt_bleu("a a b", "a b a", 2), pow(0.5, 0.25),
				EPS);
	/* Matching stops once the label's copies are used up: "b a b"
	 * against "a b c": p1 = 2/3 (one b), p2 = 1/2 ("a b"). */
	ck_assert_double_eq_tol(rt_bleu("b a b", "a b c", 2),
				sqrt(2.0 / 3) * pow(0.5, 0.25), EPS);
}
END_TEST

START_TEST(test_bleu_splits_on_single_spaces_like_python)
{
	/* "a  b" is a, "", b: three tokens, all matching. */
	ck_assert_double_eq(rt_bleu("a  b", "a  b", 2), 1.0);
	/* Against "a b" (2 tokens): p1 = 2/3, p2 = 0 ("a " and " b"). */
	ck_assert_double_eq(rt_bleu("a  b", "a b", 2), 0.0);
	ck_assert_double_eq_tol(rt_bleu("a  b", "a b", 1), sqrt(2.0 / 3), EPS);
}
END_TEST

START_TEST(test_bleu_is_zero_where_python_divides_by_zero)
{
	/* One token and k = 2: len_pred - 2 + 1 = 0 in d2l's division. */
	ck_assert_double_eq(rt_bleu("va", "va !", 2), 0.0);
	ck_assert_double_eq(rt_bleu("va", "va", 2), 0.0);
	/* An empty prediction is one empty token. */
	ck_assert_double_eq(rt_bleu("", "va !", 2), 0.0);
	ck_assert_double_eq(rt_bleu("", "", 1), 1.0);
	ck_assert_double_eq(rt_bleu("a b", "a b", 3), 0.0);
	/* With k = 1 one token is enough. */
	ck_assert_double_eq(rt_bleu("va", "va", 1), 1.0);
	ck_assert(!isnan(rt_bleu("", "", 4)));
}
END_TEST

static Suite *bleu_suite(void)
{
	Suite *s = suite_create("runtime_nmt_bleu");
	TCase *tc = tcase_create("bleu");
	tcase_add_test(tc, test_bleu_of_identical_sentences_is_one);
	tcase_add_test(tc,
		       test_bleu_applies_the_brevity_penalty_to_short_predictions);
	tcase_add_test(tc,
		       test_bleu_weights_each_precision_by_a_power_of_one_half);
	tcase_add_test(tc, test_bleu_clips_counts_by_the_label);
	tcase_add_test(tc, test_bleu_splits_on_single_spaces_like_python);
	tcase_add_test(tc, test_bleu_is_zero_where_python_divides_by_zero);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(bleu_suite());
}
