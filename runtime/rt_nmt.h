/*
 * rt_nmt.h - the English-French translation data of d2l's load_data_nmt
 * (d2l 0.17, PyTorch edition, section 10.5), the helpers that translate
 * one sentence, and d2l's BLEU.
 *
 * The pipeline, exactly as d2l's code does it (docs/data.md):
 *   read      a Tatoeba-format file: English<TAB>French[<TAB>...] a line,
 *             UTF-8; bad lines are skipped and counted (rt_nmt_stats);
 *   normalize U+202F and U+00A0 become spaces, lowercase, a space before
 *             , . ! ? when the previous character is not a space;
 *   tokenize  split on single spaces (Python's str.split(' '): a double
 *             space gives an empty token), the pairs of the first
 *             examples + 1 lines (d2l's `i > num_examples` loop);
 *   vocab     per side: <unk> <pad> <bos> <eos> (ids 0-3), then the tokens
 *             seen at least twice by decreasing count, ties in order of
 *             first appearance; an unknown token is <unk>;
 *   arrays    ids + <eos>, truncated or padded with <pad> to T steps; the
 *             valid length counts the ids that are not <pad>.
 * Then batches: a shuffled order per epoch from a seed, fixed-size batches
 * of B rows with the last one padded by rows of valid length 0.
 *
 * Part of libattnrt's sources but not of the generated code's ABI
 * (attnrt.h): the attnc driver feeds its training loop with it. Every
 * allocation goes through the caller's attnrt_allocator; errors are codes
 * with a message in the caller's buffer; nothing is printed.
 *
 * Shape letters: N rows (pairs used), T steps, B rows of a batch.
 */
#ifndef ATTNC_RT_NMT_H
#define ATTNC_RT_NMT_H

#include "attnrt.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The reserved tokens' ids, the same in both vocabularies. */
#define RT_NMT_UNK ATTNRT_VOCAB_UNK
#define RT_NMT_PAD ATTNRT_VOCAB_PAD
#define RT_NMT_BOS ATTNRT_VOCAB_BOS
#define RT_NMT_EOS ATTNRT_VOCAB_EOS
/* d2l's load_data_nmt settings. */
#define RT_NMT_MIN_FREQ 2
#define RT_NMT_DEFAULT_EXAMPLES 600
#define RT_NMT_DEFAULT_STEPS 10
#define RT_NMT_DEFAULT_BATCH 64

typedef enum rt_nmt_side {
	RT_NMT_SRC = 0, /* English */
	RT_NMT_TGT = 1, /* French */
} rt_nmt_side;

/* What reading the file found, for the driver to print. Skipped lines
 * give no pair; handled ones do. */
typedef struct rt_nmt_stats {
	size_t n_lines;        /* lines, a last one without newline included */
	size_t n_pairs;        /* usable pairs in the whole file */
	size_t n_blank;        /* skipped: empty lines */
	size_t n_no_tab;       /* skipped: no tab */
	size_t n_empty_side;   /* skipped: a side with nothing but spaces */
	size_t n_bad_utf8;     /* skipped: invalid UTF-8 or a NUL byte */
	size_t n_extra_fields; /* handled: fields after the second ignored */
	size_t n_crlf;         /* handled: lines ended by CR LF or a lone CR */
	bool is_unterminated;  /* handled: the last line has no newline */
	bool has_bom;          /* handled: a UTF-8 byte order mark, dropped */
} rt_nmt_stats;

/* The loaded data: pairs, vocabularies and arrays. Immutable after
 * loading, so it may be shared by threads. */
typedef struct rt_nmt_data rt_nmt_data;

/* The rows of one batch, in caller's buffers of B rows. A NULL array is
 * not filled. */
typedef struct rt_nmt_batch {
	int32_t *src;       /* (B, T) source ids */
	int32_t *src_valid; /* (B) */
	int32_t *tgt_in;    /* (B, T) decoder input: <bos>, then tgt[:, :-1] */
	int32_t *tgt;       /* (B, T) target ids (the labels) */
	int32_t *tgt_valid; /* (B) */
	size_t n_rows;      /* out: the real rows; the others are padding */
	int64_t n_tokens;   /* out: the sum of tgt_valid (d2l's denominator) */
} rt_nmt_batch;

/* ---- loading ------------------------------------------------------------------- */

/* The built-in default corpus (data/fra-eng-default.txt, compiled into
 * the library): a few hundred short pairs in the Tatoeba format. Returns
 * the text (static, NUL-terminated) and its length in *len (may be
 * NULL). */
const char *rt_nmt_default_corpus(size_t *len);

/* The largest corpus file rt_nmt_load reads (it stops there, so a
 * device that never ends is refused too); the full Tatoeba fra-eng
 * file is about 30 MB. */
#define RT_NMT_MAX_FILE (256u << 20)

/* Reads the Tatoeba-format file at path (NULL: the default corpus) and
 * builds the data for T = steps (>= 1) steps from the pairs of its first
 * examples + 1 lines, as d2l's tokenize_nmt does with num_examples =
 * examples (0: every line). All memory comes from al (NULL: the C
 * library), which must outlive the data. Returns ATTNRT_OK and *out, or
 * with *out NULL: ATTNRT_ERR_IO (the file cannot be read, named with the
 * system's reason), ATTNRT_ERR_FORMAT (an empty file, or no usable pair
 * among the lines used: the message gives the counts of skipped lines),
 * ATTNRT_ERR_ARG (steps < 1) or ATTNRT_ERR_NOMEM; err holds the message
 * (err_size bytes, may be NULL). */
int rt_nmt_load(const attnrt_allocator *al, const char *path, size_t examples,
		int steps, rt_nmt_data **out, char *err, size_t err_size);

/* As rt_nmt_load, from len bytes of text (borrowed for the call only);
 * name (may be NULL) stands for the file in messages. */
int rt_nmt_load_text(const attnrt_allocator *al, const char *text, size_t len,
		     const char *name, size_t examples, int steps,
		     rt_nmt_data **out, char *err, size_t err_size);

/* Frees the data and everything it owns; NULL is a no-op. Invalidates
 * every pointer the accessors below returned. */
void rt_nmt_free(rt_nmt_data *data);

/* ---- what was loaded ------------------------------------------------------------ */

/* The counts of reading the file. */
const rt_nmt_stats *rt_nmt_data_stats(const rt_nmt_data *d);
/* N: the rows of the arrays (the pairs used). */
size_t rt_nmt_rows(const rt_nmt_data *d);
/* T: the steps each row is truncated or padded to. */
int rt_nmt_steps(const rt_nmt_data *d);

/* A side's vocabulary (owned by the data): what attnc --save writes to
 * a checkpoint's metadata (attnrt_vocab_string) and what a program that
 * translates uses (attnrt.h). The three functions below are its
 * attnrt_vocab_size, attnrt_vocab_token and attnrt_vocab_lookup. */
const attnrt_vocab *rt_nmt_vocab(const rt_nmt_data *d, rt_nmt_side side);

/* The vocabulary's size (len(vocab) in d2l). */
int32_t rt_nmt_vocab_size(const rt_nmt_data *d, rt_nmt_side side);
/* The token of id (NUL-terminated, owned by the data; "" is a token when
 * the text has double spaces), or NULL when id is out of range. */
const char *rt_nmt_vocab_token(const rt_nmt_data *d, rt_nmt_side side,
			       int32_t id);
/* The id of the len bytes at token, or RT_NMT_UNK if it is not in the
 * vocabulary. */
int32_t rt_nmt_vocab_lookup(const rt_nmt_data *d, rt_nmt_side side,
			    const char *token, size_t len);

/* The (N, T) ids of a side, row i for pair i; *valid (may be NULL) gets
 * its (N) valid lengths. Owned by the data. */
const int32_t *rt_nmt_array(const rt_nmt_data *d, rt_nmt_side side,
			    const int32_t **valid);

/* ---- batches -------------------------------------------------------------------- */

/* The batches of an epoch with B rows each: ceil(N / B), the last one
 * partial as d2l's DataLoader (drop_last False). 0 when B is 0. */
size_t rt_nmt_batch_count(const rt_nmt_data *d, size_t B);

/* Writes the N row indices of an epoch's order into order: a
 * permutation drawn by Fisher-Yates from the counter-based generator
 * (rt_rng.h), a pure function of (seed, epoch), the same on every
 * machine and thread count. (PyTorch's own shuffle cannot be matched bit
 * for bit; only its distribution is.) */
void rt_nmt_shuffle(const rt_nmt_data *d, uint64_t seed, uint64_t epoch,
		    size_t *order);

/* Copies the rows of batch batch_index (0 .. rt_nmt_batch_count - 1) of
 * the epoch order (N indices from rt_nmt_shuffle; NULL: rows in file
 * order) into b's buffers of B rows, and sets b->n_rows and b->n_tokens.
 * Rows past the data's end are padding: every id <pad> (tgt_in starts
 * with <bos>, as for any row), valid lengths 0, so the masked loss gives
 * them exactly zero loss and zero gradient. Returns ATTNRT_OK, or
 * ATTNRT_ERR_ARG (nothing written) when B is 0 or batch_index is out of
 * range. */
int rt_nmt_fill_batch(const rt_nmt_data *d, const size_t *order,
		      size_t batch_index, size_t B, rt_nmt_batch *b);

/* ---- translating one sentence --------------------------------------------------- */

/* d2l's preprocess_nmt on the len bytes at text (on their own: the first
 * character never gets a space before it): writes the result to out (at
 * most cap bytes, NUL-terminated when cap > 0, as snprintf) and returns
 * its length, at most 2 * len; SIZE_MAX when text is not valid UTF-8 or
 * holds a NUL byte. Lowercasing is Python's str.lower() for ASCII, the
 * Latin-1 Supplement and Latin Extended-A (U+0130 becomes "i" U+0307, as
 * in Python); other characters are kept as they are. */
size_t rt_nmt_preprocess(const char *text, size_t len, char *out, size_t cap);

/* attnrt_vocab_encode with the source vocabulary and T: the encoder's
 * input for a raw sentence: preprocessed, split on spaces,
 * each token looked up in the source vocabulary (<unk> if unknown),
 * <eos> appended, truncated or padded to T: writes T ids to ids and the
 * count of non-<pad> ids to *valid (d2l's predict_seq2seq uses the
 * length before truncation, which masks the same steps). Returns
 * ATTNRT_OK, ATTNRT_ERR_ARG (not UTF-8, or a NUL) or ATTNRT_ERR_NOMEM
 * with a message in err; *n_unknown (may be NULL) gets the number of
 * tokens that became <unk>. */
int rt_nmt_encode_sentence(const rt_nmt_data *d, const char *sentence,
			   int32_t *ids, int32_t *valid, size_t *n_unknown,
			   char *err, size_t err_size);

/* attnrt_vocab_decode with side's vocabulary: a sentence of side's
 * vocabulary from ids: the tokens of the n ids up to
 * the first <eos> (excluded) joined by single spaces, as d2l's
 * ' '.join(tgt_vocab.to_tokens(output_seq)); an id out of range reads as
 * <unk>. Writes at most cap bytes to out (NUL-terminated when cap > 0)
 * and returns the full length, as snprintf. */
size_t rt_nmt_decode_ids(const rt_nmt_data *d, rt_nmt_side side,
			 const int32_t *ids, size_t n, char *out, size_t cap);

/* The reference translation of a raw sentence: the French side
 * (preprocessed) of the first pair of the whole file whose English side,
 * preprocessed, equals the sentence preprocessed. Sets *ref to it (owned
 * by the data) or to NULL when none matches. Returns ATTNRT_OK,
 * ATTNRT_ERR_ARG (not UTF-8, or a NUL) or ATTNRT_ERR_NOMEM, with a
 * message in err. */
int rt_nmt_reference(const rt_nmt_data *d, const char *sentence,
		     const char **ref, char *err, size_t err_size);

/* ---- BLEU (rt_bleu.c) ----------------------------------------------------------- */

/* d2l's bleu(pred_seq, label_seq, k): both split on single spaces (as
 * str.split(' '), so "" is one empty token), the brevity penalty
 * exp(min(0, 1 - len_label / len_pred)) times, for n = 1 .. k, the
 * clipped n-gram precision raised to 0.5^n. Where Python would divide
 * by zero or return 0 (a prediction of fewer than n tokens) the score
 * is 0; k < 1 gives the brevity penalty alone. Allocates nothing. */
double rt_bleu(const char *pred, const char *label, int k);

#endif
