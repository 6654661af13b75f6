/*
 * test_runtime_vocab.c - the translation vocabularies of libattnrt's
 * public API (attnrt.h, rt_vocab.c): read from their metadata string,
 * tokens and ids both ways, the string read back; a sentence encoded as
 * the book's preprocessing does (checked by hand and against the arrays
 * the data pipeline trains on), ids decoded; a checkpoint's metadata
 * read, and every way it can be missing or corrupt refused with a
 * message; failing allocations.
 */
#include "attnrt.h"
#include "rt_nmt.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const small = "<unk> <pad> <bos> <eos> go . i  lost !";

static attnrt_vocab *parse_ok(const char *s)
{
	char err[256] = "";
	attnrt_vocab *v;
	int rc = attnrt_vocab_parse(NULL, s, &v, err, sizeof err);
	ck_assert_msg(rc == ATTNRT_OK, "%s", err);
	return v;
}

START_TEST(test_parse_gives_the_tokens_in_id_order)
{
	attnrt_vocab *v = parse_ok(small);
	static const char *const want[] = {"<unk>", "<pad>", "<bos>", "<eos>",
					   "go",    ".",     "i",     "",
					   "lost",  "!"};
	ck_assert_int_eq(attnrt_vocab_size(v), 10);
	for (int32_t i = 0; i < 10; i++) {
		ck_assert_str_eq(attnrt_vocab_token(v, i), want[i]);
		ck_assert_int_eq(attnrt_vocab_lookup(v, want[i], strlen(want[i])),
				 i);
	}
	ck_assert_ptr_null(attnrt_vocab_token(v, 10));
	ck_assert_ptr_null(attnrt_vocab_token(v, -1));
	ck_assert_int_eq(attnrt_vocab_lookup(v, "gone", 4), ATTNRT_VOCAB_UNK);
	ck_assert_int_eq(attnrt_vocab_lookup(v, "gone", 2), 4); /* "go" */
	ck_assert_str_eq(attnrt_vocab_string(v), small);
	attnrt_vocab_free(v);
	attnrt_vocab_free(NULL);
}
END_TEST

START_TEST(test_the_datas_vocabularies_read_back_from_their_strings)
{
	char err[256];
	rt_nmt_data *d;
	ck_assert_int_eq(rt_nmt_load(NULL, NULL, 600, 10, &d, err, sizeof err),
			 ATTNRT_OK);
	for (int k = 0; k < 2; k++) {
		const attnrt_vocab *a = rt_nmt_vocab(d, (rt_nmt_side)k);
		attnrt_vocab *b = parse_ok(attnrt_vocab_string(a));
		ck_assert_int_eq(attnrt_vocab_size(b), attnrt_vocab_size(a));
		ck_assert_int_gt(attnrt_vocab_size(b), 100);
		for (int32_t i = 0; i < attnrt_vocab_size(a); i++)
			ck_assert_str_eq(attnrt_vocab_token(b, i),
					 rt_nmt_vocab_token(d, (rt_nmt_side)k,
							    i));
		ck_assert_str_eq(attnrt_vocab_string(b), attnrt_vocab_string(a));
		attnrt_vocab_free(b);
	}
	rt_nmt_free(d);
}
END_TEST

/* Every English side of the built-in corpus, encoded from its raw text
 * by a vocabulary read from the metadata string, is the row the data
 * pipeline trains on. */
START_TEST(test_encode_gives_the_rows_the_model_trained_on)
{
	char err[256];
	rt_nmt_data *d;
	size_t len;
	const char *text = rt_nmt_default_corpus(&len);
	ck_assert_int_eq(rt_nmt_load(NULL, NULL, 600, 10, &d, err, sizeof err),
			 ATTNRT_OK);
	attnrt_vocab *v = parse_ok(
		attnrt_vocab_string(rt_nmt_vocab(d, RT_NMT_SRC)));
	const int32_t *valid, *rows = rt_nmt_array(d, RT_NMT_SRC, &valid);
	size_t r = 0;
	for (const char *line = text; *line && r < rt_nmt_rows(d); r++) {
		const char *tab = strchr(line, '\t');
		ck_assert_ptr_nonnull(tab);
		char sentence[512];
		snprintf(sentence, sizeof sentence, "%.*s", (int)(tab - line),
			 line);
		int32_t ids[10], n_valid = -1;
		ck_assert_int_eq(attnrt_vocab_encode(v, sentence, 10, ids,
						     &n_valid, NULL, err,
						     sizeof err),
				 ATTNRT_OK);
		ck_assert_int_eq(memcmp(ids, rows + r * 10, sizeof ids), 0);
		ck_assert_int_eq(n_valid, valid[r]);
		line = strchr(tab, '\n');
		line = line ? line + 1 : tab + strlen(tab);
	}
	ck_assert_uint_eq(r, rt_nmt_rows(d));
	attnrt_vocab_free(v);
	rt_nmt_free(d);
}
END_TEST

START_TEST(test_encode_preprocesses_pads_and_truncates)
{
	attnrt_vocab *v = parse_ok(small);
	char err[256];
	int32_t ids[6], valid;
	size_t unknown = 99;
	/* lowercase, a space before the '.' */
	ck_assert_int_eq(attnrt_vocab_encode(v, "Go.", 5, ids, &valid, &unknown,
					     err, sizeof err),
			 ATTNRT_OK);
	static const int32_t go[5] = {4, 5, 3, 1, 1};
	ck_assert_int_eq(memcmp(ids, go, sizeof go), 0);
	ck_assert_int_eq(valid, 3);
	ck_assert_uint_eq(unknown, 0);
	/* U+00A0 is a space; "!" gets none before it after a space */
	ck_assert_int_eq(attnrt_vocab_encode(v, "Go\xc2\xa0!", 5, ids, &valid,
					     NULL, err, sizeof err),
			 ATTNRT_OK);
	static const int32_t bang[5] = {4, 9, 3, 1, 1};
	ck_assert_int_eq(memcmp(ids, bang, sizeof bang), 0);
	/* a double space is the empty token; unknown words; truncated to 4
	 * steps, no <eos> */
	ck_assert_int_eq(attnrt_vocab_encode(v, "I  lost you, Tom", 4, ids,
					     &valid, &unknown, err, sizeof err),
			 ATTNRT_OK);
	static const int32_t trunc[4] = {6, 7, 8, 0};
	ck_assert_int_eq(memcmp(ids, trunc, sizeof trunc), 0);
	ck_assert_int_eq(valid, 4);
	ck_assert_uint_eq(unknown, 1);
	attnrt_vocab_free(v);
}
END_TEST

START_TEST(test_encode_refuses_bad_input_and_leaves_ids)
{
	attnrt_vocab *v = parse_ok(small);
	char err[256];
	int32_t ids[4] = {-7, -7, -7, -7}, valid = -7;
	ck_assert_int_eq(attnrt_vocab_encode(v, "go \xff", 4, ids, &valid, NULL,
					     err, sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "the sentence is not valid UTF-8");
	ck_assert_int_eq(attnrt_vocab_encode(v, "go", 0, ids, &valid, NULL, err,
					     sizeof err),
			 ATTNRT_ERR_ARG);
	ck_assert_str_eq(err, "steps must be at least 1, not 0");
	ck_assert_int_eq(ids[0], -7);
	ck_assert_int_eq(valid, -7);
	attnrt_vocab_free(v);
}
END_TEST

START_TEST(test_decode_stops_at_eos_and_reads_bad_ids_as_unk)
{
	attnrt_vocab *v = parse_ok(small);
	const int32_t ids[] = {6, 8, 10, -1, 5, 3, 4};
	char out[64];
	ck_assert_uint_eq(attnrt_vocab_decode(v, ids, 7, out, sizeof out), 20);
	ck_assert_str_eq(out, "i lost <unk> <unk> .");
	ck_assert_uint_eq(attnrt_vocab_decode(v, ids, 2, out, sizeof out), 6);
	ck_assert_str_eq(out, "i lost");
	ck_assert_uint_eq(attnrt_vocab_decode(v, ids, 7, out, 5), 20);
	ck_assert_str_eq(out, "i lo"); /* cut, as snprintf */
	ck_assert_uint_eq(attnrt_vocab_decode(v, ids, 7, NULL, 0), 20);
	ck_assert_uint_eq(attnrt_vocab_decode(v, ids + 5, 2, out, sizeof out),
			  0);
	ck_assert_str_eq(out, "");
	attnrt_vocab_free(v);
}
END_TEST

/* s must be refused with the message want. */
static void assert_refused(const char *s, const char *want)
{
	char err[256] = "";
	attnrt_vocab *v = (attnrt_vocab *)&err; /* must become NULL */
	ck_assert_int_eq(attnrt_vocab_parse(NULL, s, &v, err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_ptr_null(v);
	ck_assert_str_eq(err, want);
}

START_TEST(test_parse_refuses_corrupt_strings)
{
	assert_refused("", "vocabulary: token 0 is not <unk> (a vocabulary "
			   "starts with <unk> <pad> <bos> <eos>)");
	assert_refused("<unk> <pad> <bos>",
		       "vocabulary: token 3 is not <eos> (a "
		       "vocabulary starts with <unk> <pad> <bos> <eos>)");
	assert_refused("<unk> <bos> <pad> <eos>",
		       "vocabulary: token 1 is not "
		       "<pad> (a vocabulary starts with <unk> <pad> <bos> <eos>)");
	assert_refused("<unk> <pad> <bos> <eos> a b a",
		       "vocabulary: token 6 'a' is token 4 again");
	assert_refused("<unk> <pad> <bos> <eos>  ", /* "" twice */
		       "vocabulary: token 5 '' is token 4 again");
	assert_refused("<unk> <pad> <bos> <eos> <unk>",
		       "vocabulary: token 4 '<unk>' is token 0 again");
	assert_refused("<unk> <pad> <bos> <eos> a\tb",
		       "vocabulary: a tab or "
		       "line end, which no token holds");
	assert_refused("<unk> <pad> <bos> <eos> a\nb",
		       "vocabulary: a tab or "
		       "line end, which no token holds");
	assert_refused("<unk> <pad> <bos> <eos> caf\xc3", "vocabulary: bytes "
							  "that are not UTF-8");
	char err[64];
	attnrt_vocab *v;
	ck_assert_int_eq(attnrt_vocab_parse(NULL, NULL, &v, err, sizeof err),
			 ATTNRT_ERR_ARG);
}
END_TEST

/* ---- checkpoints ---------------------------------------------------------------- */

/* A checkpoint at path with one tensor and the metadata (n pairs). */
static void write_checkpoint(const char *path, const attnrt_meta *meta, size_t n)
{
	static const float w[2] = {1, 2};
	attnrt_st_tensor t = {"w", "F32", 1, {2}, w, sizeof w};
	char err[256];
	int rc = attnrt_st_write(NULL, path, &t, 1, meta, n, err, sizeof err);
	ck_assert_msg(rc == ATTNRT_OK, "%s", err);
}

static void temp_path(char *buf, size_t size)
{
	snprintf(buf, size, "/tmp/attnc-vocab-%ld.safetensors", (long)getpid());
}

START_TEST(test_load_and_take_read_the_checkpoints_metadata)
{
	char path[128], err[256];
	temp_path(path, sizeof path);
	attnrt_meta meta[] = {{ATTNRT_META_SRC_VOCAB, small},
			      {ATTNRT_META_TGT_VOCAB,
			       "<unk> <pad> <bos> <eos> va"},
			      {"format", "attnc"}};
	write_checkpoint(path, meta, 3);
	attnrt_vocab *src, *tgt;
	ck_assert_int_eq(attnrt_vocab_load(NULL, path, ATTNRT_META_SRC_VOCAB,
					   &src, err, sizeof err),
			 ATTNRT_OK);
	ck_assert_str_eq(attnrt_vocab_string(src), small);
	attnrt_st_file *f;
	ck_assert_int_eq(attnrt_st_read(NULL, path, UINT64_MAX, &f, err,
					sizeof err),
			 ATTNRT_OK);
	ck_assert_int_eq(attnrt_vocab_take(NULL, f, ATTNRT_META_TGT_VOCAB, &tgt,
					   err, sizeof err),
			 ATTNRT_OK);
	ck_assert_int_eq(attnrt_vocab_size(tgt), 5);
	ck_assert_str_eq(attnrt_vocab_token(tgt, 4), "va");
	attnrt_st_free(f);
	attnrt_vocab_free(src);
	attnrt_vocab_free(tgt);
	unlink(path);
}
END_TEST

START_TEST(test_missing_or_corrupt_metadata_is_a_clear_error)
{
	char path[128], err[512], want[512];
	temp_path(path, sizeof path);
	attnrt_vocab *v;
	attnrt_meta meta[] = {{"format", "attnc"},
			      {ATTNRT_META_TGT_VOCAB, "<unk> <pad> <eos> <bos>"}};
	write_checkpoint(path, meta, 2);
	ck_assert_int_eq(attnrt_vocab_load(NULL, path, ATTNRT_META_SRC_VOCAB,
					   &v, err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	ck_assert_ptr_null(v);
	snprintf(want, sizeof want,
		 "%s: src_vocab: not in the checkpoint's "
		 "metadata (attnc --save writes it for a model trained on data "
		 "= nmt(...))",
		 path);
	ck_assert_str_eq(err, want);
	ck_assert_int_eq(attnrt_vocab_load(NULL, path, ATTNRT_META_TGT_VOCAB,
					   &v, err, sizeof err),
			 ATTNRT_ERR_FORMAT);
	snprintf(want, sizeof want,
		 "%s: tgt_vocab: vocabulary: token 2 is not "
		 "<bos> (a vocabulary starts with <unk> <pad> <bos> <eos>)",
		 path);
	ck_assert_str_eq(err, want);
	unlink(path);
	ck_assert_int_eq(attnrt_vocab_load(NULL, path, ATTNRT_META_TGT_VOCAB,
					   &v, err, sizeof err),
			 ATTNRT_ERR_IO);
	ck_assert_ptr_null(v);
	ck_assert_ptr_nonnull(strstr(err, "No such file"));
}
END_TEST

/* ---- allocation failures -------------------------------------------------------- */

START_TEST(test_every_failing_allocation_is_reported_and_frees_all)
{
	int n_failures = 0;
	for (int fail_at = 0;; fail_at++) {
		tu_alloc_hook h = {0, fail_at, 0};
		attnrt_allocator al = {tu_failing_alloc, &h};
		attnrt_vocab *v;
		char err[128] = "";
		int rc = attnrt_vocab_parse(&al, small, &v, err, sizeof err);
		if (rc == ATTNRT_OK) {
			int32_t ids[4], valid;
			rc = attnrt_vocab_encode(v, "go .", 4, ids, &valid,
						 NULL, err, sizeof err);
			if (rc == ATTNRT_OK) {
				attnrt_vocab_free(v);
				ck_assert_int_eq(h.live, 0);
				break;
			}
			attnrt_vocab_free(v);
		}
		ck_assert_int_eq(rc, ATTNRT_ERR_NOMEM);
		ck_assert_str_eq(err, "out of memory");
		ck_assert_int_eq(h.live, 0);
		n_failures++;
	}
	ck_assert_int_ge(n_failures, 5);
}
END_TEST

static Suite *vocab_suite(void)
{
	Suite *s = suite_create("runtime_vocab");
	TCase *tc = tcase_create("vocab");
	tcase_add_test(tc, test_parse_gives_the_tokens_in_id_order);
	tcase_add_test(tc,
		       test_the_datas_vocabularies_read_back_from_their_strings);
	tcase_add_test(tc, test_encode_gives_the_rows_the_model_trained_on);
	tcase_add_test(tc, test_encode_preprocesses_pads_and_truncates);
	tcase_add_test(tc, test_encode_refuses_bad_input_and_leaves_ids);
	tcase_add_test(tc, test_decode_stops_at_eos_and_reads_bad_ids_as_unk);
	tcase_add_test(tc, test_parse_refuses_corrupt_strings);
	tcase_add_test(tc, test_load_and_take_read_the_checkpoints_metadata);
	tcase_add_test(tc, test_missing_or_corrupt_metadata_is_a_clear_error);
	tcase_add_test(tc,
		       test_every_failing_allocation_is_reported_and_frees_all);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(vocab_suite());
}
