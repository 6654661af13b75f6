/*
 * test_runtime_text.c - character vocabularies (rt_text.h): built from a
 * text, sorted by code point, each character once; encoding and decoding
 * through them, multi-byte characters included; the vocabulary's string
 * read back; and the errors for invalid UTF-8 and unknown characters,
 * with the place they are at.
 */
#include "rt_text.h"
#include "testutil.h"

#include <check.h>
#include <string.h>

START_TEST(test_vocab_is_the_sorted_distinct_characters)
{
	char err[128];
	rt_text_vocab *v;
	ck_assert_int_eq(rt_text_vocab_build(NULL, "baab\nb", 6, &v, err,
					     sizeof err),
			 ATTNRT_OK);
	ck_assert_int_eq(rt_text_vocab_size(v), 3);
	ck_assert_str_eq(rt_text_vocab_string(v), "\nab");
	int32_t ids[8];
	size_t n;
	ck_assert_int_eq(rt_text_encode(v, "ab\nba", 5, ids, &n, err, sizeof err),
			 ATTNRT_OK);
	ck_assert_uint_eq(n, 5);
	int32_t want[5] = {1, 2, 0, 2, 1};
	ck_assert_int_eq(memcmp(ids, want, sizeof want), 0);
	char out[8] = {0};
	ck_assert_uint_eq(rt_text_decode(v, 2, out), 1);
	ck_assert_str_eq(out, "b");
	ck_assert_uint_eq(rt_text_decode(v, 3, out), 0);
	ck_assert_uint_eq(rt_text_decode(v, -1, out), 0);
	rt_text_vocab_free(v);
}
END_TEST

START_TEST(test_multibyte_characters_are_one_token_each)
{
	const char *text = "caf\xc3\xa9 \xe2\x82\xac\xf0\x9f\x99\x82";
	char err[128];
	rt_text_vocab *v, *w;
	ck_assert_int_eq(rt_text_vocab_build(NULL, text, strlen(text), &v, err,
					     sizeof err),
			 ATTNRT_OK);
	ck_assert_int_eq(rt_text_vocab_size(v), 7); /* c a f é ' ' € 🙂 */
	int32_t ids[16];
	size_t n;
	ck_assert_int_eq(rt_text_encode(v, text, strlen(text), ids, &n, err,
					sizeof err),
			 ATTNRT_OK);
	ck_assert_uint_eq(n, 7);
	char back[32];
	size_t at = 0;
	for (size_t i = 0; i < n; i++)
		at += rt_text_decode(v, ids[i], back + at);
	back[at] = 0;
	ck_assert_str_eq(back, text);
	ck_assert_int_eq(rt_text_vocab_parse(NULL, rt_text_vocab_string(v), &w,
					     err, sizeof err),
			 ATTNRT_OK);
	ck_assert_str_eq(rt_text_vocab_string(w), rt_text_vocab_string(v));
	rt_text_vocab_free(v);
	rt_text_vocab_free(w);
}
END_TEST

START_TEST(test_errors_say_what_and_where)
{
	char err[128];
	rt_text_vocab *v;
	ck_assert_int_eq(rt_text_vocab_build(NULL, "ab\ncd\xff", 6, &v, err,
					     sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_ptr_null(v);
	ck_assert_str_eq(err, "not UTF-8 text at line 2, column 3");
	ck_assert_int_eq(rt_text_vocab_build(NULL, "", 0, &v, err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_str_eq(err, "no characters");
	ck_assert_int_eq(rt_text_vocab_parse(NULL, "ba", &v, err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_int_eq(rt_text_vocab_build(NULL, "ab", 2, &v, err, sizeof err),
			 ATTNRT_OK);
	int32_t ids[4];
	size_t n;
	ck_assert_int_eq(rt_text_encode(v, "a\nz", 3, ids, &n, err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_str_eq(err, "'?' (U+000A) is not in the vocabulary at line 1, "
			      "column 2");
	rt_text_vocab_free(v);
}
END_TEST

START_TEST(test_the_builtin_text_is_ascii_stories)
{
	size_t len;
	const char *t = rt_text_default(&len);
	ck_assert_uint_gt(len, 40000);
	ck_assert_uint_eq(strlen(t), len);
	for (size_t i = 0; i < len; i++)
		ck_assert(t[i] == '\n' || (t[i] >= ' ' && t[i] <= '~'));
}
END_TEST

static Suite *text_suite(void)
{
	Suite *s = suite_create("runtime_text");
	TCase *tc = tcase_create("vocab");
	tcase_add_test(tc, test_vocab_is_the_sorted_distinct_characters);
	tcase_add_test(tc, test_multibyte_characters_are_one_token_each);
	tcase_add_test(tc, test_errors_say_what_and_where);
	tcase_add_test(tc, test_the_builtin_text_is_ascii_stories);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(text_suite());
}
