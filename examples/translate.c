/*
 * translate.c - a C program that translates English into French with the
 * Transformer of d2l 10.7 (models/transformer.g) trained by attnc, with
 * nothing of attnc's but the compiled object, its header and libattnrt:
 *
 *   attnc models/transformer.g --train --save tf.safetensors
 *   attnc models/transformer.g -c --load tf.safetensors --sym B=4 \
 *         --threads 1 -o transformer.o
 *   cc examples/translate.c transformer.o -I. \
 *      $(pkg-config --cflags --libs attnrt) -o translate
 *   ./translate tf.safetensors "go ." "i lost ." "i'm home ."
 *
 * `-c --load` compiles for the vocabulary sizes the weights have. The
 * checkpoint is read once: the weights into the params block
 * (attnrt_checkpoint_take, which skips the training run's optimizer
 * state), the vocabularies from its metadata (attnrt_vocab_take). Then
 * d2l's predict_seq2seq, B sentences at a time (the last rows of a
 * batch padding, of valid length 0): each sentence becomes T ids and a
 * valid length (attnrt_vocab_encode), `encode` runs once, and
 * `decode_step` once a token from <bos>, feeding the argmax of its
 * logits back in with the layers' cache it returns, until every
 * sentence has said <eos> or T tokens. A line per sentence,
 * "go . => va !", the same text as `attnc ... --load tf.safetensors
 * --translate "go ."` prints before its BLEU.
 */
#include "transformer.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENC_IN TRANSFORMER_ENCODE_N_INPUTS
#define ENC_OUT TRANSFORMER_ENCODE_N_OUTPUTS
#define STEP_IN TRANSFORMER_DECODE_STEP_N_INPUTS
#define STEP_OUT TRANSFORMER_DECODE_STEP_N_OUTPUTS

static const attnrt_tensor_info *const enc_in = transformer_encode_inputs;
static const attnrt_tensor_info *const enc_out = transformer_encode_outputs;
static const attnrt_tensor_info *const step_in = transformer_decode_step_inputs;
static const attnrt_tensor_info *const step_out = transformer_decode_step_outputs;

/* Everything a batch of B sentences needs, each tensor its own block. */
typedef struct translator {
	void *params, *enc_scratch, *step_scratch;
	const attnrt_vocab *src, *tgt;
	int32_t B, T, V; /* batch, steps, target vocabulary */
	void *enc_outs[ENC_OUT];
	void *step_outs[STEP_OUT];
	void *kv; /* decode_step's cache input; its output is outs[1] */
	int32_t *src_ids, *src_valid, *tok, pos;
	int32_t *out;   /* (B, T) the decoded ids */
	int32_t *n_out; /* (B) ids kept */
	bool *is_done;  /* (B) */
} translator;

static size_t bytes_of(const attnrt_tensor_info *t)
{
	size_t n = 4;
	for (int i = 0; i < t->rank; i++)
		n *= (size_t)t->dims[i];
	return n;
}

/* Whether the object is the Transformer's: encode(src, src_valid) ->
 * (enc, ...), decode_step(tok, pos, enc, src_valid, kv) -> (logits, kv,
 * ...). */
static bool interface_ok(void)
{
	static const char *const names[] = {"tok", "pos", "enc", "src_valid",
					    "kv"};
	if (ENC_IN != 2 || STEP_IN != 5 || STEP_OUT < 2 ||
	    strcmp(enc_in[0].name, "src") || strcmp(enc_in[1].name, "src_valid"))
		return false;
	for (int i = 0; i < 5; i++)
		if (strcmp(step_in[i].name, names[i]) != 0)
			return false;
	return bytes_of(&step_out[1]) == bytes_of(&step_in[4]) &&
	       step_out[0].rank == 3;
}

static bool alloc_all(translator *t)
{
	bool ok = (t->params = attnrt_alloc(NULL, TRANSFORMER_PARAMS_SIZE)) &&
		  (t->enc_scratch = attnrt_alloc(NULL,
						 TRANSFORMER_ENCODE_SCRATCH_SIZE)) &&
		  (t->step_scratch = attnrt_alloc(
			   NULL, TRANSFORMER_DECODE_STEP_SCRATCH_SIZE)) &&
		  (t->kv = attnrt_alloc(NULL, bytes_of(&step_in[4])));
	for (int i = 0; ok && i < ENC_OUT; i++)
		ok = (t->enc_outs[i] = attnrt_alloc(NULL, bytes_of(&enc_out[i])));
	for (int i = 0; ok && i < STEP_OUT; i++)
		ok = (t->step_outs[i] = attnrt_alloc(NULL,
						     bytes_of(&step_out[i])));
	size_t B = (size_t)t->B, T = (size_t)t->T;
	return ok && (t->src_ids = attnrt_alloc(NULL, B * T * 4)) &&
	       (t->src_valid = attnrt_alloc(NULL, B * 4)) &&
	       (t->tok = attnrt_alloc(NULL, B * 4)) &&
	       (t->out = attnrt_alloc(NULL, B * T * 4)) &&
	       (t->n_out = attnrt_alloc(NULL, B * 4)) &&
	       (t->is_done = attnrt_alloc(NULL, B));
}

static void free_all(translator *t)
{
	void *blocks[] = {t->params,  t->enc_scratch, t->step_scratch, t->kv,
			  t->src_ids, t->src_valid,   t->tok,          t->out,
			  t->n_out,   t->is_done};
	for (size_t i = 0; i < sizeof blocks / sizeof *blocks; i++)
		attnrt_free(NULL, blocks[i]);
	for (int i = 0; i < ENC_OUT; i++)
		attnrt_free(NULL, t->enc_outs[i]);
	for (int i = 0; i < STEP_OUT; i++)
		attnrt_free(NULL, t->step_outs[i]);
}

/* The weights and both vocabularies from the checkpoint at path. */
static bool load(const char *path, translator *t, attnrt_vocab **src,
		 attnrt_vocab **tgt)
{
	char err[512];
	attnrt_st_file *f;
	int rc = attnrt_st_read(NULL, path, UINT64_MAX, &f, err, sizeof err);
	if (rc == ATTNRT_OK) {
		rc = attnrt_checkpoint_take(NULL, f, ATTNRT_STATE_PREFIX,
					    transformer_params,
					    TRANSFORMER_N_PARAMS, t->params,
					    err, sizeof err);
		if (rc == ATTNRT_OK)
			rc = attnrt_vocab_take(NULL, f, ATTNRT_META_SRC_VOCAB,
					       src, err, sizeof err);
		if (rc == ATTNRT_OK)
			rc = attnrt_vocab_take(NULL, f, ATTNRT_META_TGT_VOCAB,
					       tgt, err, sizeof err);
		attnrt_st_free(f);
	}
	if (rc != ATTNRT_OK)
		fprintf(stderr, "translate: %s: %s\n", path, err);
	else if (attnrt_vocab_size(*tgt) != t->V)
		fprintf(stderr,
			"translate: %s: %d target tokens, but the object "
			"was compiled for V_tgt = %d\n",
			path, (int)attnrt_vocab_size(*tgt), (int)t->V);
	return rc == ATTNRT_OK && attnrt_vocab_size(*tgt) == t->V;
}

/* Rows 0..n of the batch from the sentences, the rest padding. */
static bool encode_sentences(translator *t, char **sentences, int32_t n)
{
	char err[256];
	for (int32_t i = 0; i < t->B; i++) {
		int32_t *ids = t->src_ids + (size_t)i * (size_t)t->T;
		if (i >= n) {
			for (int32_t s = 0; s < t->T; s++)
				ids[s] = ATTNRT_VOCAB_PAD;
			t->src_valid[i] = 0;
		} else if (attnrt_vocab_encode(t->src, sentences[i], t->T, ids,
					       &t->src_valid[i], NULL, err,
					       sizeof err) != ATTNRT_OK) {
			fprintf(stderr, "translate: '%s': %s\n", sentences[i],
				err);
			return false;
		}
		t->tok[i] = ATTNRT_VOCAB_BOS;
		t->n_out[i] = 0;
		t->is_done[i] = i >= n;
	}
	memset(t->kv, 0, bytes_of(&step_in[4])); /* the cache starts empty */
	return true;
}

static int32_t argmax(const float *v, int32_t n)
{
	int32_t best = 0;
	for (int32_t i = 1; i < n; i++)
		if (v[i] > v[best])
			best = i;
	return best;
}

/* Takes the step's tokens; returns whether a sentence is still going. */
static bool take_tokens(translator *t)
{
	const float *logits = t->step_outs[0]; /* (B, 1, V) */
	bool is_going = false;
	for (int32_t i = 0; i < t->B; i++) {
		int32_t id = argmax(logits + (size_t)i * (size_t)t->V, t->V);
		t->tok[i] = id;
		if (t->is_done[i])
			continue;
		if (id == ATTNRT_VOCAB_EOS)
			t->is_done[i] = true;
		else
			t->out[(size_t)i * (size_t)t->T +
			       (size_t)t->n_out[i]++] = id;
		is_going |= !t->is_done[i];
	}
	return is_going;
}

/* encode, then decode_step until every row is done or T steps. */
static bool run_batch(translator *t)
{
	attnrt_run run = {.n_threads = 1}; /* a few rows: one thread is best */
	const void *in[ENC_IN] = {t->src_ids, t->src_valid};
	int rc = transformer_encode(&run, t->params, t->enc_scratch, in,
				    t->enc_outs);
	bool is_going = true;
	for (t->pos = 0; rc == ATTNRT_OK && is_going && t->pos < t->T; t->pos++) {
		const void *step[STEP_IN] = {t->tok, &t->pos, t->enc_outs[0],
					     t->src_valid, t->kv};
		rc = transformer_decode_step(&run, t->params, t->step_scratch,
					     step, t->step_outs);
		if (rc != ATTNRT_OK)
			break;
		is_going = take_tokens(t);
		void *kv = t->kv; /* the new cache is the next step's input */
		t->kv = t->step_outs[1];
		t->step_outs[1] = kv;
	}
	if (rc != ATTNRT_OK)
		fprintf(stderr, "translate: the model failed: %s (node %d)\n",
			attnrt_strerror(rc & 0xff), rc >> 8);
	return rc == ATTNRT_OK;
}

static bool print_batch(const translator *t, char **sentences, int32_t n)
{
	char pred[4096];
	for (int32_t i = 0; i < n; i++) {
		size_t len = attnrt_vocab_decode(t->tgt,
						 t->out + (size_t)i *
								  (size_t)t->T,
						 (size_t)t->n_out[i], pred,
						 sizeof pred);
		if (len >= sizeof pred) {
			fprintf(stderr, "translate: a translation too long\n");
			return false;
		}
		printf("%s => %s\n", sentences[i], pred);
	}
	return true;
}

static bool translate_all(translator *t, char **sentences, int n)
{
	bool ok = true;
	for (int first = 0; ok && first < n; first += t->B) {
		int32_t count = n - first < t->B ? n - first : t->B;
		ok = encode_sentences(t, sentences + first, count) &&
		     run_batch(t) && print_batch(t, sentences + first, count);
	}
	return ok;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s CHECKPOINT SENTENCE...\n", argv[0]);
		return 2;
	}
	if (!interface_ok()) {
		fprintf(stderr,
			"translate: the object is not models/transformer.g's\n");
		return 1;
	}
	translator t = {.B = (int32_t)enc_in[0].dims[0],
			.T = (int32_t)enc_in[0].dims[1],
			.V = (int32_t)step_out[0].dims[2]};
	attnrt_vocab *src = NULL, *tgt = NULL;
	bool ok = alloc_all(&t);
	if (!ok)
		fprintf(stderr, "translate: out of memory\n");
	ok = ok && load(argv[1], &t, &src, &tgt);
	t.src = src;
	t.tgt = tgt;
	ok = ok && translate_all(&t, argv + 2, argc - 2);
	attnrt_vocab_free(src);
	attnrt_vocab_free(tgt);
	free_all(&t);
	return ok ? 0 : 1;
}
