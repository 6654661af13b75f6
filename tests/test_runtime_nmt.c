/*
 * test_runtime_nmt.c - d2l's translation data pipeline (rt_nmt.h):
 * preprocess_nmt, the vocabularies and arrays of a tiny corpus computed
 * by hand, shuffled and padded batches, the one-sentence helpers, messy
 * and missing files, failing allocations, the built-in corpus, and the
 * real corpus (../shared/data/fra-eng/fra.txt) against numbers that
 * d2l 0.17's own code gives on it (computed offline with its functions).
 */
#include "rt_nmt.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every uppercase-capable character of U+00C0..U+017F and what Python's
 * str.lower() makes of them (computed offline with Python 3.11). */
static const char latin_upper[] =
	"\xc3\x80\xc3\x81\xc3\x82\xc3\x83\xc3\x84\xc3\x85\xc3\x86\xc3\x87\xc3\x88\xc3\x89\xc3\x8a\xc3\x8b"
	"\xc3\x8c\xc3\x8d\xc3\x8e\xc3\x8f\xc3\x90\xc3\x91\xc3\x92\xc3\x93\xc3\x94\xc3\x95\xc3\x96\xc3\x97"
	"\xc3\x98\xc3\x99\xc3\x9a\xc3\x9b\xc3\x9c\xc3\x9d\xc3\x9e\xc3\x9f\xc3\xa0\xc3\xa1\xc3\xa2\xc3\xa3"
	"\xc3\xa4\xc3\xa5\xc3\xa6\xc3\xa7\xc3\xa8\xc3\xa9\xc3\xaa\xc3\xab\xc3\xac\xc3\xad\xc3\xae\xc3\xaf"
	"\xc3\xb0\xc3\xb1\xc3\xb2\xc3\xb3\xc3\xb4\xc3\xb5\xc3\xb6\xc3\xb7\xc3\xb8\xc3\xb9\xc3\xba\xc3\xbb"
	"\xc3\xbc\xc3\xbd\xc3\xbe\xc3\xbf\xc4\x80\xc4\x81\xc4\x82\xc4\x83\xc4\x84\xc4\x85\xc4\x86\xc4\x87"
	"\xc4\x88\xc4\x89\xc4\x8a\xc4\x8b\xc4\x8c\xc4\x8d\xc4\x8e\xc4\x8f\xc4\x90\xc4\x91\xc4\x92\xc4\x93"
	"\xc4\x94\xc4\x95\xc4\x96\xc4\x97\xc4\x98\xc4\x99\xc4\x9a\xc4\x9b\xc4\x9c\xc4\x9d\xc4\x9e\xc4\x9f"
	"\xc4\xa0\xc4\xa1\xc4\xa2\xc4\xa3\xc4\xa4\xc4\xa5\xc4\xa6\xc4\xa7\xc4\xa8\xc4\xa9\xc4\xaa\xc4\xab"
	"\xc4\xac\xc4\xad\xc4\xae\xc4\xaf\xc4\xb0\xc4\xb1\xc4\xb2\xc4\xb3\xc4\xb4\xc4\xb5\xc4\xb6\xc4\xb7"
	"\xc4\xb8\xc4\xb9\xc4\xba\xc4\xbb\xc4\xbc\xc4\xbd\xc4\xbe\xc4\xbf\xc5\x80\xc5\x81\xc5\x82\xc5\x83"
	"\xc5\x84\xc5\x85\xc5\x86\xc5\x87\xc5\x88\xc5\x89\xc5\x8a\xc5\x8b\xc5\x8c\xc5\x8d\xc5\x8e\xc5\x8f"
	"\xc5\x90\xc5\x91\xc5\x92\xc5\x93\xc5\x94\xc5\x95\xc5\x96\xc5\x97\xc5\x98\xc5\x99\xc5\x9a\xc5\x9b"
	"\xc5\x9c\xc5\x9d\xc5\x9e\xc5\x9f\xc5\xa0\xc5\xa1\xc5\xa2\xc5\xa3\xc5\xa4\xc5\xa5\xc5\xa6\xc5\xa7"
	"\xc5\xa8\xc5\xa9\xc5\xaa\xc5\xab\xc5\xac\xc5\xad\xc5\xae\xc5\xaf\xc5\xb0\xc5\xb1\xc5\xb2\xc5\xb3"
	"\xc5\xb4\xc5\xb5\xc5\xb6\xc5\xb7\xc5\xb8\xc5\xb9\xc5\xba\xc5\xbb\xc5\xbc\xc5\xbd\xc5\xbe\xc5\xbf";
static const char latin_lower[] =
	"\xc3\xa0\xc3\xa1\xc3\xa2\xc3\xa3\xc3\xa4\xc3\xa5\xc3\xa6\xc3\xa7\xc3\xa8\xc3\xa9\xc3\xaa\xc3\xab"
	"\xc3\xac\xc3\xad\xc3\xae\xc3\xaf\xc3\xb0\xc3\xb1\xc3\xb2\xc3\xb3\xc3\xb4\xc3\xb5\xc3\xb6\xc3\x97"
	"\xc3\xb8\xc3\xb9\xc3\xba\xc3\xbb\xc3\xbc\xc3\xbd\xc3\xbe\xc3\x9f\xc3\xa0\xc3\xa1\xc3\xa2\xc3\xa3"
	"\xc3\xa4\xc3\xa5\xc3\xa6\xc3\xa7\xc3\xa8\xc3\xa9\xc3\xaa\xc3\xab\xc3\xac\xc3\xad\xc3\xae\xc3\xaf"
	"\xc3\xb0\xc3\xb1\xc3\xb2\xc3\xb3\xc3\xb4\xc3\xb5\xc3\xb6\xc3\xb7\xc3\xb8\xc3\xb9\xc3\xba\xc3\xbb"
	"\xc3\xbc\xc3\xbd\xc3\xbe\xc3\xbf\xc4\x81\xc4\x81\xc4\x83\xc4\x83\xc4\x85\xc4\x85\xc4\x87\xc4\x87"
	"\xc4\x89\xc4\x89\xc4\x8b\xc4\x8b\xc4\x8d\xc4\x8d\xc4\x8f\xc4\x8f\xc4\x91\xc4\x91\xc4\x93\xc4\x93"
	"\xc4\x95\xc4\x95\xc4\x97\xc4\x97\xc4\x99\xc4\x99\xc4\x9b\xc4\x9b\xc4\x9d\xc4\x9d\xc4\x9f\xc4\x9f"
	"\xc4\xa1\xc4\xa1\xc4\xa3\xc4\xa3\xc4\xa5\xc4\xa5\xc4\xa7\xc4\xa7\xc4\xa9\xc4\xa9\xc4\xab\xc4\xab"
	"\xc4\xad\xc4\xad\xc4\xaf\xc4\xaf\x69\xcc\x87\xc4\xb1\xc4\xb3\xc4\xb3\xc4\xb5\xc4\xb5\xc4\xb7"
	"\xc4\xb7\xc4\xb8\xc4\xba\xc4\xba\xc4\xbc\xc4\xbc\xc4\xbe\xc4\xbe\xc5\x80\xc5\x80\xc5\x82\xc5\x82"
	"\xc5\x84\xc5\x84\xc5\x86\xc5\x86\xc5\x88\xc5\x88\xc5\x89\xc5\x8b\xc5\x8b\xc5\x8d\xc5\x8d\xc5\x8f"
	"\xc5\x8f\xc5\x91\xc5\x91\xc5\x93\xc5\x93\xc5\x95\xc5\x95\xc5\x97\xc5\x97\xc5\x99\xc5\x99\xc5\x9b"
	"\xc5\x9b\xc5\x9d\xc5\x9d\xc5\x9f\xc5\x9f\xc5\xa1\xc5\xa1\xc5\xa3\xc5\xa3\xc5\xa5\xc5\xa5\xc5\xa7"
	"\xc5\xa7\xc5\xa9\xc5\xa9\xc5\xab\xc5\xab\xc5\xad\xc5\xad\xc5\xaf\xc5\xaf\xc5\xb1\xc5\xb1\xc5\xb3"
	"\xc5\xb3\xc5\xb5\xc5\xb5\xc5\xb7\xc5\xb7\xc3\xbf\xc5\xba\xc5\xba\xc5\xbc\xc5\xbc\xc5\xbe\xc5\xbe"
	"\xc5\xbf";

/* Five pairs; the vocabularies and arrays below are computed by hand:
 *   source tokens  go . | i lost . | i'm home . | i lost . | go home .
 *     counts . 5, go 2, i 2, lost 2, home 2, i'm 1 (first seen: go . i
 *     lost i'm home) -> <unk> <pad> <bos> <eos> . go i lost home
 *   target tokens  va ! | j'ai perdu . | je suis chez moi . |
 *                  j'ai perdu ! | va chez moi .
 *     counts . 3, va ! j'ai perdu chez moi 2, je suis 1
 *     -> <unk> <pad> <bos> <eos> . va ! j'ai perdu chez moi */
static const char tiny[] = "Go.\tVa !\n"
			   "I lost.\tJ'ai perdu.\n"
			   "I'm home.\tJe suis chez moi.\n"
			   "I lost.\tJ'ai perdu !\n"
			   "Go home.\tVa chez moi.\n";

static rt_nmt_data *load_text(const char *text, size_t examples, int steps)
{
	rt_nmt_data *d;
	char err[256] = "";
	int rc = rt_nmt_load_text(NULL, text, strlen(text), "test", examples,
				  steps, &d, err, sizeof err);
	ck_assert_msg(rc == ATTNRT_OK, "%s", err);
	return d;
}

static void assert_row(const int32_t *row, const int32_t *want, int T)
{
	for (int t = 0; t < T; t++)
		ck_assert_int_eq(row[t], want[t]);
}

/* Writes len bytes to a new temporary file; returns its path (static). */
static const char *temp_file(const char *bytes, size_t len)
{
	static char path[64];
	snprintf(path, sizeof path, "/tmp/test_nmt_XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, bytes, len), (ssize_t)len);
	close(fd);
	return path;
}

static const char *preprocessed(const char *s)
{
	static char out[512];
	size_t n = rt_nmt_preprocess(s, strlen(s), out, sizeof out);
	ck_assert_uint_lt(n, sizeof out);
	return out;
}

/* ---- preprocess_nmt ------------------------------------------------------------- */

START_TEST(test_preprocess_matches_d2l_examples)
{
	ck_assert_str_eq(preprocessed("Go.\tVa !"), "go .\tva !");
	ck_assert_str_eq(preprocessed("I'm home."), "i'm home .");
	ck_assert_str_eq(preprocessed("Hello,world!Why?"),
			 "hello ,world !why ?");
	/* Only the very first character never gets a space. */
	ck_assert_str_eq(preprocessed("..."), ". . .");
	ck_assert_str_eq(preprocessed("go ."), "go .");
	ck_assert_str_eq(preprocessed(""), "");
}
END_TEST

START_TEST(test_preprocess_turns_both_no_break_spaces_into_spaces)
{
	/* U+202F before "!", U+00A0 before "?": no second space. */
	ck_assert_str_eq(preprocessed("Cours\xe2\x80\xaf!"), "cours !");
	ck_assert_str_eq(preprocessed("Qui\xc2\xa0?"), "qui ?");
	ck_assert_str_eq(preprocessed("\xc3\x87"
				      "a\xc2\xa0"
				      "alors\xe2\x80\xaf!"),
			 "\xc3\xa7"
			 "a alors !");
}
END_TEST

START_TEST(test_preprocess_lowercases_accented_capitals_as_python)
{
	/* "À L'ÉCOLE, ÇA ŒUVRE." */
	ck_assert_str_eq(preprocessed("\xc3\x80 L'\xc3\x89"
				      "COLE, \xc3\x87"
				      "A "
				      "\xc5\x92UVRE."),
			 "\xc3\xa0 l'\xc3\xa9"
			 "cole , \xc3\xa7"
			 "a \xc5\x93uvre .");
	char out[512];
	size_t n = rt_nmt_preprocess(latin_upper, strlen(latin_upper), out,
				     sizeof out);
	ck_assert_uint_eq(n, strlen(latin_lower));
	ck_assert_str_eq(out, latin_lower);
	/* Outside those blocks characters are kept: Greek Sigma, CJK. */
	ck_assert_str_eq(preprocessed("\xce\xa3\xe4\xb8\xad"),
			 "\xce\xa3\xe4\xb8\xad");
}
END_TEST

START_TEST(test_preprocess_reports_length_like_snprintf_and_rejects_bad_utf8)
{
	char out[4];
	ck_assert_uint_eq(rt_nmt_preprocess("Go.", 3, out, sizeof out), 4);
	ck_assert_str_eq(out, "go "); /* cut, still terminated */
	ck_assert_uint_eq(rt_nmt_preprocess("Go.", 3, NULL, 0), 4);
	ck_assert_uint_eq(rt_nmt_preprocess("a\xff", 2, out, sizeof out),
			  SIZE_MAX);
	ck_assert_uint_eq(rt_nmt_preprocess("\xc3", 1, out, sizeof out),
			  SIZE_MAX);
	ck_assert_uint_eq(rt_nmt_preprocess("a\0b", 3, out, sizeof out),
			  SIZE_MAX);
}
END_TEST

/* ---- vocabularies and arrays ---------------------------------------------------- */

START_TEST(test_vocab_orders_tokens_by_count_then_first_appearance)
{
	rt_nmt_data *d = load_text(tiny, 0, 4);
	static const char *const src[] = {"<unk>", "<pad>", "<bos>",
					  "<eos>", ".",     "go",
					  "i",     "lost",  "home"};
	static const char *const tgt[] = {"<unk>", "<pad>", "<bos>", "<eos>",
					  ".",     "va",    "!",     "j'ai",
					  "perdu", "chez",  "moi"};
	ck_assert_int_eq(rt_nmt_vocab_size(d, RT_NMT_SRC), 9);
	ck_assert_int_eq(rt_nmt_vocab_size(d, RT_NMT_TGT), 11);
	for (int32_t i = 0; i < 9; i++) {
		ck_assert_str_eq(rt_nmt_vocab_token(d, RT_NMT_SRC, i), src[i]);
		ck_assert_int_eq(rt_nmt_vocab_lookup(d, RT_NMT_SRC, src[i],
						     strlen(src[i])),
				 i);
	}
	for (int32_t i = 0; i < 11; i++)
		ck_assert_str_eq(rt_nmt_vocab_token(d, RT_NMT_TGT, i), tgt[i]);
	ck_assert_ptr_null(rt_nmt_vocab_token(d, RT_NMT_SRC, 9));
	ck_assert_ptr_null(rt_nmt_vocab_token(d, RT_NMT_SRC, -1));
	/* Seen once, or never: <unk>. */
	ck_assert_int_eq(rt_nmt_vocab_lookup(d, RT_NMT_SRC, "i'm", 3),
			 RT_NMT_UNK);
	ck_assert_int_eq(rt_nmt_vocab_lookup(d, RT_NMT_TGT, "je", 2),
			 RT_NMT_UNK);
	ck_assert_int_eq(rt_nmt_vocab_lookup(d, RT_NMT_SRC, "va", 2),
			 RT_NMT_UNK);
	ck_assert_int_eq(rt_nmt_vocab_lookup(d, RT_NMT_SRC, "", 0), RT_NMT_UNK);
	rt_nmt_free(d);
}
END_TEST

START_TEST(test_arrays_append_eos_then_pad_or_truncate_to_steps)
{
	rt_nmt_data *d = load_text(tiny, 0, 4);
	const int32_t *valid;
	const int32_t *src = rt_nmt_array(d, RT_NMT_SRC, &valid);
	ck_assert_uint_eq(rt_nmt_rows(d), 5);
	ck_assert_int_eq(rt_nmt_steps(d), 4);
	static const int32_t want_src[5][4] = {{5, 4, 3, 1},
					       {6, 7, 4, 3},
					       {0, 8, 4, 3},
					       {6, 7, 4, 3},
					       {5, 8, 4, 3}};
	static const int32_t want_src_valid[5] = {3, 4, 4, 4, 4};
	for (int r = 0; r < 5; r++) {
		assert_row(src + 4 * r, want_src[r], 4);
		ck_assert_int_eq(valid[r], want_src_valid[r]);
	}
	const int32_t *tgt = rt_nmt_array(d, RT_NMT_TGT, &valid);
	/* "je suis chez moi ." is cut to its first four tokens: no <eos>. */
	static const int32_t want_tgt[5][4] = {{5, 6, 3, 1},
					       {7, 8, 4, 3},
					       {0, 0, 9, 10},
					       {7, 8, 6, 3},
					       {5, 9, 10, 4}};
	for (int r = 0; r < 5; r++) {
		assert_row(tgt + 4 * r, want_tgt[r], 4);
		ck_assert_int_eq(valid[r], r == 0 ? 3 : 4);
	}
	rt_nmt_free(d);
}
END_TEST

START_TEST(test_arrays_truncation_drops_eos_and_counts_what_is_left)
{
	rt_nmt_data *d = load_text(tiny, 0, 3);
	const int32_t *valid;
	const int32_t *src = rt_nmt_array(d, RT_NMT_SRC, &valid);
	static const int32_t want[3][3] = {{5, 4, 3}, {6, 7, 4}, {0, 8, 4}};
	for (int r = 0; r < 3; r++) {
		assert_row(src + 3 * r, want[r], 3);
		ck_assert_int_eq(valid[r], 3);
	}
	rt_nmt_free(d);
}
END_TEST

START_TEST(test_examples_keeps_the_pairs_of_the_first_examples_plus_one_lines)
{
	/* d2l's `if num_examples and i > num_examples: break` keeps lines
	 * 0..2 for num_examples = 2: counts . 3 (source), . 2 (target). */
	rt_nmt_data *d = load_text(tiny, 2, 4);
	ck_assert_uint_eq(rt_nmt_rows(d), 3);
	ck_assert_int_eq(rt_nmt_vocab_size(d, RT_NMT_SRC), 5);
	ck_assert_int_eq(rt_nmt_vocab_size(d, RT_NMT_TGT), 5);
	const int32_t *valid;
	const int32_t *tgt = rt_nmt_array(d, RT_NMT_TGT, &valid);
	static const int32_t want_last[4] = {0, 0, 0, 0};
	assert_row(tgt + 8, want_last, 4);
	ck_assert_int_eq(valid[2], 4);
	/* Every pair of the file still counts in the statistics. */
	ck_assert_uint_eq(rt_nmt_data_stats(d)->n_pairs, 5);
	rt_nmt_free(d);
}
END_TEST

START_TEST(test_double_spaces_give_empty_tokens_as_str_split)
{
	/* "a  b" splits into a, "", b; "" is counted like any token. */
	rt_nmt_data *d = load_text("A  b.\tX  y.\nA  c.\tX  z.\n", 0, 6);
	ck_assert_int_eq(rt_nmt_vocab_size(d, RT_NMT_SRC), 7); /* a "" . */
	ck_assert_str_eq(rt_nmt_vocab_token(d, RT_NMT_SRC, 4), "a");
	ck_assert_str_eq(rt_nmt_vocab_token(d, RT_NMT_SRC, 5), "");
	ck_assert_str_eq(rt_nmt_vocab_token(d, RT_NMT_SRC, 6), ".");
	const int32_t *valid;
	const int32_t *src = rt_nmt_array(d, RT_NMT_SRC, &valid);
	static const int32_t want[6] = {4, 5, 0, 6, 3, 1};
	assert_row(src, want, 6);
	ck_assert_int_eq(valid[0], 5);
	rt_nmt_free(d);
}
END_TEST

START_TEST(test_leading_punctuation_gets_the_empty_token_d2l_gives_it)
{
	/* d2l preprocesses the whole file: the "." opening line 1 follows a
	 * newline and the "!" a tab, so each gets a space before it and
	 * splits as "", "."; the first line's first character does not. */
	rt_nmt_data *d = load_text("Hi.\tSalut!\n.\t!\n.\t!\n", 0, 4);
	ck_assert_int_eq(rt_nmt_vocab_size(d, RT_NMT_SRC), 6);
	ck_assert_str_eq(rt_nmt_vocab_token(d, RT_NMT_SRC, 4), ".");
	ck_assert_str_eq(rt_nmt_vocab_token(d, RT_NMT_SRC, 5), "");
	ck_assert_str_eq(rt_nmt_vocab_token(d, RT_NMT_TGT, 4), "!");
	ck_assert_str_eq(rt_nmt_vocab_token(d, RT_NMT_TGT, 5), "");
	const int32_t *src = rt_nmt_array(d, RT_NMT_SRC, NULL);
	static const int32_t want[2][4] = {{0, 4, 3, 1}, {5, 4, 3, 1}};
	assert_row(src, want[0], 4);
	assert_row(src + 4, want[1], 4);
	rt_nmt_free(d);
	d = load_text(".\tPoint.\n", 0, 4); /* the first line: no space */
	ck_assert_int_eq(rt_nmt_array(d, RT_NMT_SRC, NULL)[0], 0);
	ck_assert_int_eq(rt_nmt_array(d, RT_NMT_SRC, NULL)[1], RT_NMT_EOS);
	rt_nmt_free(d);
}
END_TEST

START_TEST(test_reserved_tokens_in_the_text_keep_their_ids)
{
	/* d2l skips a counted token already in token_to_idx. */
	rt_nmt_data *d = load_text("<pad> a\tb\n<pad> a\tb\n", 0, 4);
	ck_assert_int_eq(rt_nmt_vocab_size(d, RT_NMT_SRC), 5);
	ck_assert_str_eq(rt_nmt_vocab_token(d, RT_NMT_SRC, 4), "a");
	const int32_t *valid;
	const int32_t *src = rt_nmt_array(d, RT_NMT_SRC, &valid);
	static const int32_t want[4] = {1, 4, 3, 1};
	assert_row(src, want, 4);
	ck_assert_int_eq(valid[0], 2); /* the <pad> id is not counted */
	rt_nmt_free(d);
}
END_TEST

/* ---- batches -------------------------------------------------------------------- */

START_TEST(test_shuffle_is_a_permutation_fixed_by_seed_and_epoch)
{
	rt_nmt_data *d = load_text(rt_nmt_default_corpus(NULL), 0, 10);
	size_t n = rt_nmt_rows(d);
	size_t *a = calloc(n, sizeof *a), *b = calloc(n, sizeof *b);
	char *seen = calloc(n, 1);
	rt_nmt_shuffle(d, 7, 0, a);
	for (size_t i = 0; i < n; i++) {
		ck_assert_uint_lt(a[i], n);
		ck_assert(!seen[a[i]]);
		seen[a[i]] = 1;
	}
	rt_nmt_shuffle(d, 7, 0, b);
	ck_assert(!memcmp(a, b, n * sizeof *a));
	rt_nmt_shuffle(d, 7, 1, b);
	ck_assert(memcmp(a, b, n * sizeof *a) != 0);
	rt_nmt_shuffle(d, 8, 0, b);
	ck_assert(memcmp(a, b, n * sizeof *a) != 0);
	size_t fixed = 0;
	for (size_t i = 0; i < n; i++)
		fixed += a[i] == i;
	ck_assert_uint_lt(fixed, 10); /* about 1 expected */
	free(a);
	free(b);
	free(seen);
	rt_nmt_free(d);
}
END_TEST

/* One batch's buffers of B rows of T steps. */
typedef struct batch_bufs {
	int32_t src[64 * 10], src_valid[64], tgt_in[64 * 10], tgt[64 * 10],
		tgt_valid[64];
} batch_bufs;

static rt_nmt_batch batch_of(batch_bufs *bb)
{
	return (rt_nmt_batch){bb->src, bb->src_valid, bb->tgt_in,
			      bb->tgt, bb->tgt_valid, 0,
			      0};
}

START_TEST(test_batches_cover_every_row_once_and_pad_the_last)
{
	rt_nmt_data *d = load_text(rt_nmt_default_corpus(NULL), 0, 10);
	size_t n = rt_nmt_rows(d), B = 64, T = 10;
	ck_assert_uint_eq(n, 492);
	ck_assert_uint_eq(rt_nmt_batch_count(d, B), 8);
	size_t *order = calloc(n, sizeof *order);
	rt_nmt_shuffle(d, 1, 3, order);
	const int32_t *src_valid, *tgt_valid;
	const int32_t *src = rt_nmt_array(d, RT_NMT_SRC, &src_valid);
	const int32_t *tgt = rt_nmt_array(d, RT_NMT_TGT, &tgt_valid);
	int64_t want_tokens = 0, tokens = 0;
	for (size_t i = 0; i < n; i++)
		want_tokens += tgt_valid[i];
	batch_bufs *bb = malloc(sizeof *bb);
	size_t rows = 0;
	for (size_t k = 0; k < 8; k++) {
		rt_nmt_batch b = batch_of(bb);
		ck_assert_int_eq(rt_nmt_fill_batch(d, order, k, B, &b),
				 ATTNRT_OK);
		ck_assert_uint_eq(b.n_rows, k < 7 ? 64 : 492 - 7 * 64);
		int64_t batch_tokens = 0;
		for (size_t r = 0; r < B; r++) {
			bool is_real = r < b.n_rows;
			size_t row = is_real ? order[k * B + r] : 0;
			for (size_t t = 0; t < T; t++) {
				int32_t s = is_real ? src[row * T + t]
						    : RT_NMT_PAD;
				int32_t y = is_real ? tgt[row * T + t]
						    : RT_NMT_PAD;
				int32_t y_in = t == 0    ? RT_NMT_BOS
					       : is_real ? tgt[row * T + t - 1]
							 : RT_NMT_PAD;
				ck_assert_int_eq(bb->src[r * T + t], s);
				ck_assert_int_eq(bb->tgt[r * T + t], y);
				ck_assert_int_eq(bb->tgt_in[r * T + t], y_in);
			}
			ck_assert_int_eq(bb->src_valid[r],
					 is_real ? src_valid[row] : 0);
			ck_assert_int_eq(bb->tgt_valid[r],
					 is_real ? tgt_valid[row] : 0);
			batch_tokens += bb->tgt_valid[r];
		}
		ck_assert_int_eq(b.n_tokens, batch_tokens);
		tokens += b.n_tokens;
		rows += b.n_rows;
	}
	ck_assert_uint_eq(rows, n);
	ck_assert_int_eq(tokens, want_tokens);
	free(bb);
	free(order);
	rt_nmt_free(d);
}
END_TEST

START_TEST(test_fill_batch_without_order_takes_rows_in_file_order)
{
	rt_nmt_data *d = load_text(tiny, 0, 4);
	int32_t src[3 * 4], tgt_valid[3];
	rt_nmt_batch b = {.src = src, .tgt_valid = tgt_valid};
	ck_assert_int_eq(rt_nmt_batch_count(d, 3), 2);
	ck_assert_int_eq(rt_nmt_fill_batch(d, NULL, 1, 3, &b), ATTNRT_OK);
	ck_assert_uint_eq(b.n_rows, 2);
	ck_assert_int_eq(b.n_tokens, 8);
	static const int32_t want[3][4] = {{6, 7, 4, 3},
					   {5, 8, 4, 3},
					   {1, 1, 1, 1}};
	for (int r = 0; r < 3; r++)
		assert_row(src + 4 * r, want[r], 4);
	ck_assert_int_eq(tgt_valid[2], 0);
	rt_nmt_free(d);
}
END_TEST

START_TEST(test_fill_batch_rejects_bad_indices_without_writing)
{
	rt_nmt_data *d = load_text(tiny, 0, 4);
	int32_t src[2 * 4] = {42};
	rt_nmt_batch b = {.src = src};
	ck_assert_int_eq(rt_nmt_fill_batch(d, NULL, 3, 2, &b), ATTNRT_ERR_ARG);
	ck_assert_int_eq(rt_nmt_fill_batch(d, NULL, 0, 0, &b), ATTNRT_ERR_ARG);
	ck_assert_uint_eq(rt_nmt_batch_count(d, 0), 0);
	size_t order[5] = {0, 9, 1, 2, 3};
	ck_assert_int_eq(rt_nmt_fill_batch(d, order, 0, 2, &b), ATTNRT_ERR_ARG);
	ck_assert_int_eq(src[0], 42);
	rt_nmt_free(d);
}
END_TEST

/* ---- one sentence --------------------------------------------------------------- */

START_TEST(test_encode_sentence_preprocesses_and_marks_unknown_words)
{
	rt_nmt_data *d = load_text(tiny, 0, 4);
	int32_t ids[4], valid;
	size_t n_unknown;
	char err[128];
	ck_assert_int_eq(rt_nmt_encode_sentence(d, "I lost.", ids, &valid,
						&n_unknown, err, sizeof err),
			 ATTNRT_OK);
	static const int32_t lost[4] = {6, 7, 4, 3};
	assert_row(ids, lost, 4);
	ck_assert_int_eq(valid, 4);
	ck_assert_uint_eq(n_unknown, 0);
	ck_assert_int_eq(rt_nmt_encode_sentence(d, "I'm lost!", ids, &valid,
						&n_unknown, err, sizeof err),
			 ATTNRT_OK);
	static const int32_t unk[4] = {0, 7, 0, 3};
	assert_row(ids, unk, 4);
	ck_assert_uint_eq(n_unknown, 2);
	ck_assert_int_eq(rt_nmt_encode_sentence(d, "Go.", ids, &valid, NULL,
						err, sizeof err),
			 ATTNRT_OK);
	static const int32_t go[4] = {5, 4, 3, 1};
	assert_row(ids, go, 4);
	ck_assert_int_eq(valid, 3);
	ck_assert_int_eq(rt_nmt_encode_sentence(d, "Go\xff", ids, &valid, NULL,
						err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "the sentence is not valid UTF-8");
	rt_nmt_free(d);
}
END_TEST

START_TEST(test_decode_stops_at_eos_and_joins_with_spaces)
{
	rt_nmt_data *d = load_text(tiny, 0, 4);
	char out[64];
	const int32_t va[] = {5, 6, 3, 8, 8};
	ck_assert_uint_eq(rt_nmt_decode_ids(d, RT_NMT_TGT, va, 5, out,
					    sizeof out),
			  4);
	ck_assert_str_eq(out, "va !");
	const int32_t perdu[] = {7, 8, 4};
	rt_nmt_decode_ids(d, RT_NMT_TGT, perdu, 3, out, sizeof out);
	ck_assert_str_eq(out, "j'ai perdu .");
	const int32_t odd[] = {99, 1, 2, -1};
	rt_nmt_decode_ids(d, RT_NMT_TGT, odd, 4, out, sizeof out);
	ck_assert_str_eq(out, "<unk> <pad> <bos> <unk>");
	const int32_t eos[] = {3, 5};
	ck_assert_uint_eq(rt_nmt_decode_ids(d, RT_NMT_TGT, eos, 2, out,
					    sizeof out),
			  0);
	ck_assert_str_eq(out, "");
	char small[4];
	ck_assert_uint_eq(rt_nmt_decode_ids(d, RT_NMT_TGT, perdu, 3, small,
					    sizeof small),
			  12);
	ck_assert_str_eq(small, "j'a");
	rt_nmt_free(d);
}
END_TEST

START_TEST(test_reference_is_the_first_pair_with_the_same_source)
{
	rt_nmt_data *d = load_text(tiny, 1, 4); /* beyond the rows too */
	const char *ref;
	char err[128];
	ck_assert_int_eq(rt_nmt_reference(d, "I lost.", &ref, err, sizeof err),
			 ATTNRT_OK);
	ck_assert_str_eq(ref, "j'ai perdu .");
	ck_assert_int_eq(rt_nmt_reference(d, "go home .", &ref, err, sizeof err),
			 ATTNRT_OK);
	ck_assert_str_eq(ref, "va chez moi .");
	ck_assert_int_eq(rt_nmt_reference(d, "I won.", &ref, err, sizeof err),
			 ATTNRT_OK);
	ck_assert_ptr_null(ref);
	ck_assert_int_eq(rt_nmt_reference(d, "\xc3", &ref, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_ptr_null(ref);
	rt_nmt_free(d);
}
END_TEST

/* ---- files ---------------------------------------------------------------------- */

/* Every kind of bad line, with the pairs that survive. */
static const char messy[] =
	"Go.\tVa !\r\n"                     /* CR LF: kept */
	"no tab here\n"                     /* skipped: no tab */
	"\n"                                /* skipped: blank */
	"Hi.\t\n"                           /* skipped: empty side */
	"\tSalut.\n"                        /* skipped: empty side */
	"Hi.\t\xc2\xa0 \n"                  /* skipped: only spaces */
	"I lost.\tJ'ai perdu.\tCC-BY 2.0\n" /* kept, attribution dropped */
	"Bad \xff.\tMauvais.\n"             /* skipped: not UTF-8 */
	"Run!\tCours\xe2\x80\xaf!\r"        /* lone CR: kept */
	"I'm home.\tJe suis chez moi.";     /* no newline: kept */

START_TEST(test_messy_file_skips_bad_lines_and_counts_each_kind)
{
	const char *path = temp_file(messy, sizeof messy - 1);
	rt_nmt_data *d;
	char err[256] = "";
	int rc = rt_nmt_load(NULL, path, 0, 10, &d, err, sizeof err);
	unlink(path);
	ck_assert_msg(rc == ATTNRT_OK, "%s", err);
	const rt_nmt_stats *st = rt_nmt_data_stats(d);
	ck_assert_uint_eq(st->n_lines, 10);
	ck_assert_uint_eq(st->n_pairs, 4);
	ck_assert_uint_eq(st->n_blank, 1);
	ck_assert_uint_eq(st->n_no_tab, 1);
	ck_assert_uint_eq(st->n_empty_side, 3);
	ck_assert_uint_eq(st->n_bad_utf8, 1);
	ck_assert_uint_eq(st->n_extra_fields, 1);
	ck_assert_uint_eq(st->n_crlf, 2);
	ck_assert(st->is_unterminated);
	ck_assert(!st->has_bom);
	ck_assert_uint_eq(rt_nmt_rows(d), 4);
	static const char *const refs[4][2] = {{"Go.", "va !"},
					       {"I lost.", "j'ai perdu ."},
					       {"Run!", "cours !"},
					       {"I'm home.",
						"je suis chez moi ."}};
	for (int i = 0; i < 4; i++) {
		const char *ref;
		ck_assert_int_eq(rt_nmt_reference(d, refs[i][0], &ref, err,
						  sizeof err),
				 ATTNRT_OK);
		ck_assert_str_eq(ref, refs[i][1]);
	}
	rt_nmt_free(d);
}
END_TEST

START_TEST(test_examples_counts_bad_lines_as_d2l_counts_lines)
{
	/* Lines 0..3 hold one pair: "Go." (the rest is skipped). */
	rt_nmt_data *d = load_text(messy, 3, 10);
	ck_assert_uint_eq(rt_nmt_rows(d), 1);
	ck_assert_uint_eq(rt_nmt_data_stats(d)->n_pairs, 4);
	rt_nmt_free(d);
}
END_TEST

START_TEST(test_byte_order_mark_is_dropped)
{
	rt_nmt_data *d = load_text("\xef\xbb\xbfGo.\tVa !\nGo.\tVa !\n", 0, 4);
	ck_assert(rt_nmt_data_stats(d)->has_bom);
	ck_assert(!rt_nmt_data_stats(d)->is_unterminated);
	ck_assert_str_eq(rt_nmt_vocab_token(d, RT_NMT_SRC, 4), "go");
	rt_nmt_free(d);
}
END_TEST

START_TEST(test_missing_empty_and_useless_files_are_clear_errors)
{
	rt_nmt_data *d = (rt_nmt_data *)&d; /* must be reset to NULL */
	char err[256];
	ck_assert_int_eq(rt_nmt_load(NULL, "/nonexistent/fra.txt", 600, 10, &d,
				     err, sizeof err),
			 ATTNRT_ERR_IO);
	ck_assert_ptr_null(d);
	ck_assert_str_eq(err, "/nonexistent/fra.txt: No such file or directory");
	ck_assert_int_eq(rt_nmt_load(NULL, "/tmp", 600, 10, &d, err, sizeof err),
			 ATTNRT_ERR_IO);
	ck_assert_str_eq(err, "/tmp: Is a directory");
	const char *path = temp_file("", 0);
	ck_assert_int_eq(rt_nmt_load(NULL, path, 600, 10, &d, err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	unlink(path);
	ck_assert_ptr_nonnull(strstr(err, ": the file is empty"));
	static const char useless[] = "no tab\n\nHi.\t\n\xff\tx\n";
	ck_assert_int_eq(rt_nmt_load_text(NULL, useless, sizeof useless - 1,
					  "u.txt", 600, 10, &d, err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_str_eq(err, "u.txt: no English<TAB>French pair (4 lines: 1 "
			      "blank, 1 without a tab, 1 with an empty side, 1 "
			      "not UTF-8)");
	/* Pairs exist, but not in the lines asked for. */
	ck_assert_int_eq(rt_nmt_load_text(NULL, "x\nx\ny\ta\n", 8, "w.txt", 2,
					  10, &d, err, sizeof err),
			 ATTNRT_OK);
	ck_assert_uint_eq(rt_nmt_rows(d), 1);
	rt_nmt_free(d);
	ck_assert_int_eq(rt_nmt_load_text(NULL, "x\nx\ny\ta\n", 8, "w.txt", 1,
					  10, &d, err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_str_eq(err,
			 "w.txt: no English<TAB>French pair among its first "
			 "2 lines (3 lines: 0 blank, 2 without a tab, 0 with "
			 "an empty side, 0 not UTF-8)");
	ck_assert_int_eq(rt_nmt_load_text(NULL, tiny, strlen(tiny), NULL, 0, 0,
					  &d, err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "text: steps must be at least 1, not 0");
}
END_TEST

START_TEST(test_a_corpus_over_the_cap_is_refused_before_it_is_read)
{
	/* A regular file one byte over the cap (sparse: no disk is used),
	 * loaded with an allocator whose first allocation fails: refused
	 * for its size, not for memory, so nothing was read into memory. */
	const char *path = temp_file("Hi.\tSalut.\n", 11);
	ck_assert_int_eq(truncate(path, (off_t)RT_NMT_MAX_FILE + 1), 0);
	tu_alloc_hook h = {0, 0, 0};
	attnrt_allocator al = {tu_failing_alloc, &h};
	rt_nmt_data *d;
	char err[256];
	ck_assert_int_eq(rt_nmt_load(&al, path, 600, 10, &d, err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_ptr_null(d);
	ck_assert_msg(strstr(err, ": 268435457 bytes, more than the 256 MiB a "
				  "corpus may have"),
		      "%s", err);
	ck_assert_int_eq(h.live, 0);
	unlink(path);
}
END_TEST

/* ---- allocation failures -------------------------------------------------------- */

START_TEST(test_every_failing_allocation_is_reported_and_frees_all)
{
	int n_failures = 0;
	for (int fail_at = 0;; fail_at++) {
		tu_alloc_hook h = {0, fail_at, 0};
		attnrt_allocator al = {tu_failing_alloc, &h};
		rt_nmt_data *d;
		char err[128] = "";
		int rc = rt_nmt_load(&al, NULL, 600, 10, &d, err, sizeof err);
		if (rc == ATTNRT_OK) {
			ck_assert_int_eq(rt_nmt_rows(d), 492);
			rt_nmt_free(d);
			ck_assert_int_eq(h.live, 0);
			break;
		}
		ck_assert_int_eq(rc, ATTNRT_ERR_NOMEM);
		ck_assert_str_eq(err, "built-in corpus: out of memory");
		ck_assert_ptr_null(d);
		ck_assert_int_eq(h.live, 0);
		n_failures++;
	}
	ck_assert_int_gt(n_failures, 10);
}
END_TEST

/* ---- the built-in corpus and the real one ------------------------------------------ */

START_TEST(test_default_corpus_holds_the_books_sentences)
{
	size_t len;
	const char *text = rt_nmt_default_corpus(&len);
	ck_assert_uint_eq(strlen(text), len);
	ck_assert_ptr_nonnull(strstr(text, "Go.\tVa !\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nI lost.\tJ'ai perdu.\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nI'm home.\tJe suis chez moi.\n"));
	rt_nmt_data *d;
	char err[128];
	ck_assert_int_eq(rt_nmt_load(NULL, NULL, 600, 10, &d, err, sizeof err),
			 ATTNRT_OK);
	const rt_nmt_stats *st = rt_nmt_data_stats(d);
	ck_assert_uint_eq(st->n_pairs, 492);
	ck_assert_uint_eq(st->n_lines, 492);
	ck_assert_uint_eq(st->n_blank + st->n_no_tab + st->n_empty_side +
				  st->n_bad_utf8 + st->n_extra_fields +
				  st->n_crlf,
			  0);
	/* d2l's own code gives these on the file (checked offline). */
	ck_assert_int_eq(rt_nmt_vocab_size(d, RT_NMT_SRC), 160);
	ck_assert_int_eq(rt_nmt_vocab_size(d, RT_NMT_TGT), 170);
	/* Every word of the three test sentences is in the vocabularies. */
	static const char *const words[] = {"go",   ".",   "i",
					    "lost", "i'm", "home"};
	for (int i = 0; i < 6; i++)
		ck_assert_int_gt(rt_nmt_vocab_lookup(d, RT_NMT_SRC, words[i],
						     strlen(words[i])),
				 RT_NMT_EOS);
	static const char *const mots[] = {"va", "!",    "j'ai", "perdu", ".",
					   "je", "suis", "chez", "moi"};
	for (int i = 0; i < 9; i++)
		ck_assert_int_gt(rt_nmt_vocab_lookup(d, RT_NMT_TGT, mots[i],
						     strlen(mots[i])),
				 RT_NMT_EOS);
	rt_nmt_free(d);
}
END_TEST

/* sum over (i, t) of (31 i + t + 1) * ids[i][t]: one number that d2l's
 * arrays give too. */
static long long checksum(const int32_t *ids, size_t n, size_t T)
{
	long long sum = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t t = 0; t < T; t++)
			sum += (long long)(31 * i + t + 1) * ids[i * T + t];
	return sum;
}

static long long valid_sum(const int32_t *valid, size_t n)
{
	long long sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += valid[i];
	return sum;
}

START_TEST(test_real_corpus_matches_d2l_arrays)
{
	const char *path = tu_path("../shared/data/fra-eng/fra.txt");
	if (access(path, R_OK) != 0) {
		printf("SKIP test_real_corpus_matches_d2l_arrays: %s is missing\n",
		       path);
		return;
	}
	rt_nmt_data *d;
	char err[256];
	ck_assert_int_eq(rt_nmt_load(NULL, path, 600, 10, &d, err, sizeof err),
			 ATTNRT_OK);
	printf("fra.txt, examples 600: %zu rows, len(src_vocab) %d, "
	       "len(tgt_vocab) %d\n",
	       rt_nmt_rows(d), (int)rt_nmt_vocab_size(d, RT_NMT_SRC),
	       (int)rt_nmt_vocab_size(d, RT_NMT_TGT));
	/* d2l 0.17's load_data_nmt on this file (601 lines read). */
	ck_assert_uint_eq(rt_nmt_rows(d), 601);
	ck_assert_int_eq(rt_nmt_vocab_size(d, RT_NMT_SRC), 188);
	ck_assert_int_eq(rt_nmt_vocab_size(d, RT_NMT_TGT), 202);
	const int32_t *valid;
	const int32_t *src = rt_nmt_array(d, RT_NMT_SRC, &valid);
	ck_assert_int_eq(checksum(src, 601, 10), 661455113LL);
	ck_assert_int_eq(valid_sum(valid, 601), 2486);
	const int32_t *tgt = rt_nmt_array(d, RT_NMT_TGT, &valid);
	ck_assert_int_eq(checksum(tgt, 601, 10), 629925300LL);
	ck_assert_int_eq(valid_sum(valid, 601), 2607);
	static const int32_t go[10] = {9, 4, 3, 1, 1, 1, 1, 1, 1, 1};
	static const int32_t va[10] = {22, 5, 3, 1, 1, 1, 1, 1, 1, 1};
	assert_row(src, go, 10);
	assert_row(tgt, va, 10);
	const rt_nmt_stats *st = rt_nmt_data_stats(d);
	ck_assert_uint_eq(st->n_lines, 18066);
	ck_assert_uint_eq(st->n_pairs, 18066);
	rt_nmt_free(d);
	/* All of it. */
	ck_assert_int_eq(rt_nmt_load(NULL, path, 0, 10, &d, err, sizeof err),
			 ATTNRT_OK);
	ck_assert_uint_eq(rt_nmt_rows(d), 18066);
	ck_assert_int_eq(rt_nmt_vocab_size(d, RT_NMT_SRC), 2307);
	ck_assert_int_eq(rt_nmt_vocab_size(d, RT_NMT_TGT), 3568);
	src = rt_nmt_array(d, RT_NMT_SRC, &valid);
	ck_assert_int_eq(checksum(src, 18066, 10), 4141102971909LL);
	ck_assert_int_eq(valid_sum(valid, 18066), 94301);
	tgt = rt_nmt_array(d, RT_NMT_TGT, &valid);
	ck_assert_int_eq(checksum(tgt, 18066, 10), 7146171696369LL);
	ck_assert_int_eq(valid_sum(valid, 18066), 101372);
	rt_nmt_free(d);
}
END_TEST

static Suite *nmt_suite(void)
{
	Suite *s = suite_create("runtime_nmt");
	TCase *tc = tcase_create("nmt");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_preprocess_matches_d2l_examples);
	tcase_add_test(tc,
		       test_preprocess_turns_both_no_break_spaces_into_spaces);
	tcase_add_test(tc,
		       test_preprocess_lowercases_accented_capitals_as_python);
	tcase_add_test(
		tc,
		test_preprocess_reports_length_like_snprintf_and_rejects_bad_utf8);
	tcase_add_test(tc,
		       test_vocab_orders_tokens_by_count_then_first_appearance);
	tcase_add_test(tc, test_arrays_append_eos_then_pad_or_truncate_to_steps);
	tcase_add_test(tc,
		       test_arrays_truncation_drops_eos_and_counts_what_is_left);
	tcase_add_test(
		tc,
		test_examples_keeps_the_pairs_of_the_first_examples_plus_one_lines);
	tcase_add_test(tc, test_double_spaces_give_empty_tokens_as_str_split);
	tcase_add_test(tc,
		       test_leading_punctuation_gets_the_empty_token_d2l_gives_it);
	tcase_add_test(tc, test_reserved_tokens_in_the_text_keep_their_ids);
	tcase_add_test(tc,
		       test_shuffle_is_a_permutation_fixed_by_seed_and_epoch);
	tcase_add_test(tc, test_batches_cover_every_row_once_and_pad_the_last);
	tcase_add_test(tc,
		       test_fill_batch_without_order_takes_rows_in_file_order);
	tcase_add_test(tc, test_fill_batch_rejects_bad_indices_without_writing);
	tcase_add_test(tc,
		       test_encode_sentence_preprocesses_and_marks_unknown_words);
	tcase_add_test(tc, test_decode_stops_at_eos_and_joins_with_spaces);
	tcase_add_test(tc,
		       test_reference_is_the_first_pair_with_the_same_source);
	tcase_add_test(tc, test_messy_file_skips_bad_lines_and_counts_each_kind);
	tcase_add_test(tc, test_examples_counts_bad_lines_as_d2l_counts_lines);
	tcase_add_test(tc, test_byte_order_mark_is_dropped);
	tcase_add_test(tc,
		       test_missing_empty_and_useless_files_are_clear_errors);
	tcase_add_test(tc,
		       test_a_corpus_over_the_cap_is_refused_before_it_is_read);
	tcase_add_test(tc,
		       test_every_failing_allocation_is_reported_and_frees_all);
	tcase_add_test(tc, test_default_corpus_holds_the_books_sentences);
	suite_add_tcase(s, tc);
	TCase *real = tcase_create("real");
	tcase_add_test(real, test_real_corpus_matches_d2l_arrays);
	suite_add_tcase(s, real);
	return s;
}

int main(void)
{
	return tu_run_suite(nmt_suite());
}
