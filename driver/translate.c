/*
 * translate.c - translation with a trained seq2seq model by greedy
 * decoding, as d2l's predict_seq2seq: every sentence is encoded once,
 * then decoded one token at a time from <bos>, each step feeding the
 * argmax of the last logits back in, until <eos> or T steps. The decoder
 * is never re-run over the prefix: the model's decode_step carries what
 * it needs (the Transformer's per-layer cache, Bahdanau's GRU states).
 *
 * `encode` and `decode_step` are compiled a second time, with B the
 * number of sentences, which are decoded side by side (rows do not
 * interact; a row that reached <eos> is carried along and ignored).
 * Their interface is read from their names and shapes:
 *
 *   encode       inputs src (B, T) and src_valid (B) if it takes it;
 *                output 0 the encoding, fed to decode_step's `enc`;
 *   decode_step  inputs tok (B, 1), and if it takes them pos (1), enc,
 *                src_valid (B); every other input is state carried from
 *                step to step: at first encode's output of the same
 *                shape, if there is one, else zeros; then decode_step's
 *                first output of that shape after the logits;
 *                output 0 the logits (B, 1, V_tgt).
 * The other outputs are attention weights for the heatmaps: encode's
 * (L, B*H, T, T), decode_step's (L, B*H, 1, K) or (B*H, 1, K).
 *
 * A line per sentence on stdout, "go . => va !, bleu 1.000" (BLEU with
 * k = 2 against the reference the data has for it), and a JSON line per
 * sentence in --metrics.
 *
 * The vocabularies are the data's after training; after --load they are
 * the checkpoint's metadata's (src_vocab, tgt_vocab, which --save of a
 * training run writes), so a --data or --examples other than the
 * training's cannot change the ids, or, for a checkpoint saved without
 * them, the data's as before. The data still gives T and the references.
 */
#include "driver.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TR_MAX_IO 16

/* The book's test sentences (d2l 10.4 and 10.7). */
static const char *const book_sentences[] = {"go .", "i lost .", "he's calm .",
					     "i'm home ."};

/* What feeds an input of decode_step. */
typedef enum step_input {
	IN_TOK,
	IN_POS,
	IN_ENC,
	IN_SRC_VALID,
	IN_STATE,
} step_input;

typedef struct translator {
	ir_ctx *ctx;
	const ir_module *m;
	const drv_options *o;
	drv_options run_o; /* o with the vocabularies' dims, B and the threads */
	const rt_nmt_data *d;         /* T and the references */
	const attnrt_vocab *vocab[2]; /* source, target: d's or --load's */
	bool is_vocab_loaded;         /* from the checkpoint's metadata */
	const ir_func *enc_f, *step_f;
	drv_jit jit;
	const char *const *texts; /* the n sentences */
	size_t n;
	int T;
	int32_t *src, *src_valid; /* (n, T), (n) */
	int32_t *tok, pos;        /* (n, 1), (1) */
	int32_t *out;             /* (n, T) the decoded ids */
	int *n_out, *n_steps;     /* (n) ids kept, steps run */
	size_t *n_unknown;        /* (n) words that became <unk> */
	size_t *n_words; /* (n) words of the sentence, all read or not */
	interp_tensor enc_outs[TR_MAX_IO];
	interp_tensor in[TR_MAX_IO]; /* decode_step's inputs */
	step_input kind[TR_MAX_IO];
	int32_t state_out[TR_MAX_IO];   /* output giving state input i */
	bool is_enc_used[TR_MAX_IO];    /* encode output 0 or a state's start */
	uint32_t weights[DRV_MAX_FIGS]; /* decode_step's weights outputs */
	uint32_t n_weights;
	drv_attention att;
} translator;

bool drv_is_seq2seq(const ir_module *m)
{
	const ir_func *e = ir_module_find_func(m, "encode");
	const ir_func *s = ir_module_find_func(m, "decode_step");
	return e && s && e->is_export && s->is_export;
}

/* What makes a sentence untranslatable, or NULL: not UTF-8, or no word
 * once preprocessed and split. */
static const char *sentence_problem(const char *text)
{
	size_t len = strlen(text);
	char *buf = malloc(2 * len + 1);
	if (!buf)
		return NULL; /* encoding it will report the lack of memory */
	const char *why = NULL;
	if (rt_nmt_preprocess(text, len, buf, 2 * len + 1) == SIZE_MAX)
		why = "not valid UTF-8";
	else if (buf[strspn(buf, " ")] == '\0')
		why = "no word to translate";
	free(buf);
	return why;
}

bool drv_translate_check(ir_ctx *ctx, const ir_module *m, const drv_options *o)
{
	if (!o->n_translate)
		return true;
	if (!drv_is_seq2seq(m)) {
		ir_error(ctx, (ir_loc){0},
			 "--translate: model %s is not a "
			 "seq2seq model: it exports no `encode` and `decode_step` "
			 "to translate with",
			 m->name);
		return false;
	}
	if (!drv_nmt_is_source(ir_module_find_setting(m, "data"))) {
		ir_error(ctx, (ir_loc){0},
			 "--translate: the train block of %s "
			 "names no translation data (data = nmt(...)) to take the "
			 "vocabularies from",
			 m->name);
		return false;
	}
	for (uint32_t i = 0; i < o->n_translate; i++) {
		const char *why = sentence_problem(o->translate[i]);
		if (!why)
			continue;
		ir_error(ctx, (ir_loc){0}, "--translate '%s': %s",
			 o->translate[i], why);
		return false;
	}
	return true;
}

/* ---- the sentences ---------------------------------------------------------------- */

/* The words of sentence i, however many the model's T steps take: the
 * encoding keeps the first T ids, and a longer sentence is translated
 * from its first T words only, which the user is told. A sentence of L
 * bytes has fewer than L + 1 words, so steps of L + 2 hold them all and
 * <eos>. */
static bool count_words(translator *t, size_t i)
{
	char err[512];
	size_t len = strlen(t->texts[i]);
	int32_t valid, *ids = len < INT32_MAX - 2
				      ? malloc((len + 2) * sizeof *ids)
				      : NULL;
	if (!ids) {
		ir_error(t->ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	int rc = attnrt_vocab_encode(t->vocab[RT_NMT_SRC], t->texts[i],
				     (int32_t)len + 2, ids, &valid, NULL, err,
				     sizeof err);
	free(ids);
	if (rc != ATTNRT_OK) {
		ir_error(t->ctx, (ir_loc){0}, "--translate '%s': %s",
			 t->texts[i], err);
		return false;
	}
	t->n_words[i] = (size_t)valid - 1; /* less <eos> */
	return true;
}

static bool encode_sentences(translator *t)
{
	char err[512];
	for (size_t i = 0; i < t->n; i++) {
		const char *text = t->texts[i];
		int rc = attnrt_vocab_encode(t->vocab[RT_NMT_SRC], text, t->T,
					     t->src + i * (size_t)t->T,
					     &t->src_valid[i], &t->n_unknown[i],
					     err, sizeof err);
		if (rc != ATTNRT_OK) {
			ir_error(t->ctx, (ir_loc){0}, "--translate '%s': %s",
				 text, err);
			return false;
		}
		if (!count_words(t, i))
			return false;
	}
	return true;
}

static bool alloc_rows(translator *t)
{
	size_t n = t->n, T = (size_t)t->T;
	t->src = ir_alloc(t->ctx, n * T * sizeof *t->src);
	t->src_valid = ir_alloc(t->ctx, n * sizeof *t->src_valid);
	t->tok = ir_alloc(t->ctx, n * sizeof *t->tok);
	t->out = ir_alloc(t->ctx, n * T * sizeof *t->out);
	t->n_out = ir_alloc(t->ctx, n * sizeof *t->n_out);
	t->n_steps = ir_alloc(t->ctx, n * sizeof *t->n_steps);
	t->n_unknown = ir_alloc(t->ctx, n * sizeof *t->n_unknown);
	t->n_words = ir_alloc(t->ctx, n * sizeof *t->n_words);
	if (t->src && t->src_valid && t->tok && t->out && t->n_out &&
	    t->n_steps && t->n_unknown && t->n_words)
		return true;
	ir_error(t->ctx, (ir_loc){0}, "out of memory");
	return false;
}

/* ---- compiling and running -------------------------------------------------------- */

/* Compiles the module with B = n; the weights are trained's or --load's.
 * Only encode and decode_step are compiled. Decoding runs on one thread unless --threads says otherwise: its
 * tensors are a few rows, too small to share, and a second thread that
 * the system deschedules makes every step wait for it. */
static bool compile(translator *t, const drv_jit *trained)
{
	drv_options *o = &t->run_o;
	if (!drv_nmt_bind_vocabs(t->ctx, t->m, t->o, t->vocab, (int64_t)t->n, o))
		return false;
	o->threads = o->threads ? o->threads : 1;
	static const char *const only[] = {"encode", "decode_step"};
	if (drv_jit_open_trained(t->ctx, t->m, o, only, 2, trained, &t->jit))
		return true;
	if (!trained && t->jit.params && !t->is_vocab_loaded) /* did not fit */
		ir_note(t->ctx, (ir_loc){0},
			"the vocabularies come from the data: "
			"give the --data and --examples the weights were trained "
			"with");
	return false;
}

static void tensor_i32(interp_tensor *x, int32_t *data, int rank, int64_t d0,
		       int64_t d1)
{
	memset(x, 0, sizeof *x);
	x->dtype = IR_I32;
	x->rank = rank;
	x->dims[0] = d0;
	x->dims[1] = d1;
	x->data = data;
}

static bool run_encode(translator *t)
{
	interp_tensor in[2];
	const ir_func *f = t->enc_f;
	if (f->n_inputs > 2 || f->n_outputs > TR_MAX_IO || f->n_outputs < 1) {
		ir_error(t->ctx, f->loc,
			 "'encode' must take src (and src_valid) "
			 "and return the encoding first");
		return false;
	}
	for (uint32_t i = 0; i < f->n_inputs; i++) {
		char buf[32];
		const char *name = drv_io_name(f->input_names, i, "in", buf,
					       sizeof buf);
		if (strcmp(name, "src") == 0)
			tensor_i32(&in[i], t->src, 2, (int64_t)t->n, t->T);
		else if (strcmp(name, "src_valid") == 0)
			tensor_i32(&in[i], t->src_valid, 1, (int64_t)t->n, 0);
		else {
			ir_error(t->ctx, f->loc,
				 "'encode' takes '%s'; the translator "
				 "gives src and src_valid",
				 name);
			return false;
		}
	}
	drv_exec e = {t->ctx, t->m, &t->run_o, NULL, &t->jit};
	if (!drv_exec_call(&e, f, in, t->enc_outs))
		return false;
	t->is_enc_used[0] = true;
	return true;
}

static bool same_shape(const attnrt_tensor_info *a, const interp_tensor *b)
{
	if (a->rank != b->rank ||
	    (a->dtype == ATTNRT_I32) != (b->dtype == IR_I32))
		return false;
	for (int d = 0; d < a->rank; d++)
		if (a->dims[d] != b->dims[d])
			return false;
	return true;
}

/* A state input's start: encode's output of its shape, else zeros. */
static bool state_start(translator *t, uint32_t i,
			const attnrt_tensor_info *info)
{
	ir_dtype dt = info->dtype == ATTNRT_I32 ? IR_I32 : IR_F32;
	if (!interp_tensor_alloc(t->ctx, &t->in[i], dt, info->rank, info->dims)) {
		ir_error(t->ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	for (uint32_t k = 1; k < t->enc_f->n_outputs; k++) {
		if (t->is_enc_used[k] || !same_shape(info, &t->enc_outs[k]))
			continue;
		t->is_enc_used[k] = true;
		memcpy(t->in[i].data, t->enc_outs[k].data,
		       (size_t)interp_tensor_numel(&t->in[i]) * 4);
		break;
	}
	return true;
}

/* What feeds each input of decode_step, and the tensors of the state. */
static bool map_step_inputs(translator *t)
{
	uint32_t n;
	const attnrt_tensor_info *info = cg_program_inputs(t->jit.p,
							   "decode_step", &n);
	if (n > TR_MAX_IO || n != t->step_f->n_inputs) {
		ir_error(t->ctx, t->step_f->loc,
			 "'decode_step' takes too many inputs");
		return false;
	}
	static const char *const names[] = {"tok", "pos", "enc", "src_valid"};
	for (uint32_t i = 0; i < n; i++) {
		int k = 0;
		while (k < 4 && strcmp(info[i].name, names[k]) != 0)
			k++;
		t->kind[i] = (step_input)k;
		if (k == IN_TOK)
			tensor_i32(&t->in[i], t->tok, 2, (int64_t)t->n, 1);
		else if (k == IN_POS)
			tensor_i32(&t->in[i], &t->pos, 1, 1, 0);
		else if (k == IN_ENC)
			t->in[i] = t->enc_outs[0];
		else if (k == IN_SRC_VALID)
			tensor_i32(&t->in[i], t->src_valid, 1, (int64_t)t->n, 0);
		else if (!state_start(t, i, &info[i]))
			return false;
	}
	return true;
}

/* Which output of decode_step gives each state input, and which are
 * attention weights; reports a state no output gives back. */
static bool map_step_outputs(translator *t, const interp_tensor *outs)
{
	bool is_state[TR_MAX_IO] = {false};
	uint32_t n = t->step_f->n_outputs;
	for (uint32_t i = 0; i < t->step_f->n_inputs; i++) {
		if (t->kind[i] != IN_STATE)
			continue;
		uint32_t k = 1;
		while (k < n && (is_state[k] || outs[k].dtype != t->in[i].dtype ||
				 outs[k].rank != t->in[i].rank ||
				 memcmp(outs[k].dims, t->in[i].dims,
					sizeof(int64_t) * (size_t)outs[k].rank)))
			k++;
		if (k == n) {
			char buf[32];
			ir_error(t->ctx, t->step_f->loc,
				 "'decode_step' returns no "
				 "new value of its input '%s'",
				 drv_io_name(t->step_f->input_names, i, "in",
					     buf, sizeof buf));
			return false;
		}
		is_state[k] = true;
		t->state_out[i] = (int32_t)k;
	}
	for (uint32_t k = 1; k < n && t->n_weights < DRV_MAX_FIGS - 1; k++)
		if (!is_state[k] && outs[k].dtype == IR_F32 &&
		    (outs[k].rank == 3 || outs[k].rank == 4))
			t->weights[t->n_weights++] = k;
	return true;
}

/* ---- the attention of the last sentence --------------------------------------------- */

/* Starts figure name from weights w of rank 3 (B*H, Q, K) or 4 (L, B*H,
 * Q, K), with room for q_cap queries. */
static bool fig_start(translator *t, const char *name, const interp_tensor *w,
		      int q_cap)
{
	struct drv_attention_fig *f = &t->att.figs[t->att.n_figs];
	int r = w->rank;
	f->name = name;
	f->layers = r == 4 ? (int)w->dims[0] : 1;
	f->heads = (int)(w->dims[r - 3] / (int64_t)t->n);
	f->queries = q_cap;
	f->keys = (int)w->dims[r - 1];
	f->w = ir_alloc(t->ctx, ((size_t)f->layers * (size_t)f->heads *
					 (size_t)q_cap * (size_t)f->keys +
				 1) * sizeof *f->w);
	if (!f->w) {
		ir_error(t->ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	t->att.n_figs++;
	return true;
}

/* Copies rows q0 .. q0 + w's queries of the last sentence's weights
 * into figure f. */
static void fig_take(const translator *t, struct drv_attention_fig *f,
		     const interp_tensor *w, int q0)
{
	int r = w->rank;
	size_t Q = (size_t)w->dims[r - 2], K = (size_t)f->keys;
	size_t BH = (size_t)w->dims[r - 3], H = (size_t)f->heads;
	const float *v = w->data;
	for (size_t l = 0; l < (size_t)f->layers; l++)
		for (size_t h = 0; h < H; h++)
			memcpy(f->w + ((l * H + h) * (size_t)f->queries +
				       (size_t)q0) *
					       K,
			       v + ((l * BH) + (t->n - 1) * H + h) * Q * K,
			       Q * K * sizeof *v);
}

/* Keeps the first queries and keys of every matrix of f. */
static void fig_crop(struct drv_attention_fig *f, int queries, int keys)
{
	size_t n = 0;
	for (int m = 0; m < f->layers * f->heads; m++)
		for (int q = 0; q < queries; q++)
			for (int k = 0; k < keys; k++)
				f->w[n++] = f->w[((size_t)m * (size_t)f->queries +
						  (size_t)q) *
							 (size_t)f->keys +
						 (size_t)k];
	f->queries = queries;
	f->keys = keys;
}

/* The encoder's self-attention: encode's outputs that are neither the
 * encoding nor a state's start. */
static bool take_encoder_weights(translator *t)
{
	for (uint32_t k = 1; k < t->enc_f->n_outputs; k++) {
		const interp_tensor *w = &t->enc_outs[k];
		if (t->is_enc_used[k] || w->dtype != IR_F32 || w->rank != 4 ||
		    t->att.n_figs == DRV_MAX_FIGS - 2)
			continue;
		if (!fig_start(t, "Encoder self-attention", w, (int)w->dims[2]))
			return false;
		fig_take(t, &t->att.figs[t->att.n_figs - 1], w, 0);
	}
	return true;
}

static const char *step_fig_name(const translator *t, uint32_t i)
{
	if (i + 1 == t->n_weights)
		return "Encoder-decoder attention";
	return t->n_weights == 2 ? "Decoder self-attention"
				 : "Decoder attention";
}

/* The figures of decode_step's weights, from the first step's outputs. */
static bool start_step_figs(translator *t, const interp_tensor *outs)
{
	for (uint32_t i = 0; i < t->n_weights; i++)
		if (!fig_start(t, step_fig_name(t, i), &outs[t->weights[i]],
			       t->T))
			return false;
	return true;
}

/* After decoding: the steps of the last sentence are the queries; the
 * decoder's self-attention keys are those steps, the encoder-decoder
 * attention's the source's valid positions (as the book draws them). */
static void crop_step_figs(translator *t)
{
	uint32_t first = t->att.n_figs - t->n_weights;
	int steps = t->n_steps[t->n - 1];
	int valid = t->src_valid[t->n - 1];
	for (uint32_t i = 0; i < t->n_weights; i++) {
		struct drv_attention_fig *f = &t->att.figs[first + i];
		bool is_cross = i + 1 == t->n_weights;
		int keys = is_cross            ? valid
			   : t->n_weights == 2 ? steps
					       : f->keys;
		fig_crop(f, steps, keys < f->keys ? keys : f->keys);
	}
}

/* ---- greedy decoding ------------------------------------------------------------------ */

static int32_t argmax(const float *v, int64_t n)
{
	int64_t best = 0;
	for (int64_t i = 1; i < n; i++)
		if (v[i] > v[best])
			best = i;
	return (int32_t)best;
}

/* Takes step s's tokens; returns how many sentences ended with it. */
static size_t take_tokens(translator *t, const interp_tensor *outs, int s,
			  bool *done)
{
	const interp_tensor *logits = &outs[0];
	int64_t V = logits->dims[2];
	size_t ended = 0;
	for (size_t i = 0; i < t->n; i++) {
		int32_t id = argmax((const float *)logits->data + (int64_t)i * V,
				    V);
		t->tok[i] = id;
		if (done[i])
			continue;
		t->n_steps[i] = s + 1;
		if (i + 1 == t->n)
			for (uint32_t k = 0; k < t->n_weights; k++)
				fig_take(t,
					 &t->att.figs[t->att.n_figs -
						      t->n_weights + k],
					 &outs[t->weights[k]], s);
		if (id == RT_NMT_EOS) {
			done[i] = true;
			ended++;
		} else {
			t->out[i * (size_t)t->T + (size_t)t->n_out[i]++] = id;
		}
	}
	return ended;
}

/* The state inputs of the next step. */
static void carry_state(translator *t, const interp_tensor *outs)
{
	for (uint32_t i = 0; i < t->step_f->n_inputs; i++)
		if (t->kind[i] == IN_STATE)
			memcpy(t->in[i].data, outs[t->state_out[i]].data,
			       (size_t)interp_tensor_numel(&t->in[i]) * 4);
}

static bool check_logits(translator *t, const interp_tensor *l)
{
	if (l->dtype == IR_F32 && l->rank == 3 && l->dims[0] == (int64_t)t->n &&
	    l->dims[1] == 1 && l->dims[2] >= 1)
		return true;
	ir_error(t->ctx, t->step_f->loc,
		 "'decode_step' must return the logits "
		 "(B, 1, V_tgt) first");
	return false;
}

static bool first_step(translator *t, const interp_tensor *outs)
{
	return check_logits(t, &outs[0]) && map_step_outputs(t, outs) &&
	       start_step_figs(t, outs);
}

static bool decode(translator *t, bool *done)
{
	drv_exec e = {t->ctx, t->m, &t->run_o, NULL, &t->jit};
	interp_tensor outs[TR_MAX_IO];
	size_t left = t->n;
	if (t->step_f->n_outputs > TR_MAX_IO || t->step_f->n_outputs < 1) {
		ir_error(t->ctx, t->step_f->loc,
			 "'decode_step' returns too many "
			 "outputs");
		return false;
	}
	for (size_t i = 0; i < t->n; i++)
		t->tok[i] = RT_NMT_BOS;
	for (int s = 0; s < t->T && left; s++) {
		t->pos = s;
		if (!drv_exec_call(&e, t->step_f, t->in, outs))
			return false;
		bool ok = s > 0 || first_step(t, outs);
		if (ok) {
			left -= take_tokens(t, outs, s, done);
			carry_state(t, outs);
		}
		for (uint32_t k = 0; k < t->step_f->n_outputs; k++)
			interp_tensor_fini(t->ctx, &outs[k]);
		if (!ok)
			return false;
	}
	crop_step_figs(t);
	return true;
}

/* ---- what is printed -------------------------------------------------------------------- */

/* s as a JSON string. */
static void put_json(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static void write_metrics(FILE *metrics, const char *src, const char *pred,
			  const char *ref, double bleu)
{
	fputs("{\"src\": ", metrics);
	put_json(metrics, src);
	fputs(", \"pred\": ", metrics);
	put_json(metrics, pred);
	fputs(", \"ref\": ", metrics);
	if (ref) {
		put_json(metrics, ref);
		fprintf(metrics, ", \"bleu\": %.6g}\n", bleu);
	} else {
		fputs("null, \"bleu\": null}\n", metrics);
	}
}

/* Prints sentence i and writes it to metrics. */
static bool report_one(translator *t, size_t i, char *pred, size_t cap,
		       FILE *metrics)
{
	char err[512];
	const char *ref = NULL;
	attnrt_vocab_decode(t->vocab[RT_NMT_TGT], t->out + i * (size_t)t->T,
			    (size_t)t->n_out[i], pred, cap);
	if (rt_nmt_reference(t->d, t->texts[i], &ref, err, sizeof err) !=
	    ATTNRT_OK) {
		ir_error(t->ctx, (ir_loc){0}, "--translate '%s': %s",
			 t->texts[i], err);
		return false;
	}
	double bleu = ref ? rt_bleu(pred, ref, 2) : 0;
	printf("%s => %s", t->texts[i], pred);
	if (ref)
		printf(", bleu %.3f", bleu);
	else
		printf(" (no reference in the data)");
	if (t->n_unknown[i])
		printf(" [%zu word%s not in the vocabulary]", t->n_unknown[i],
		       t->n_unknown[i] == 1 ? "" : "s");
	if (t->n_words[i] > (size_t)t->T)
		printf(" [the model reads %d steps: the first %d of %zu words "
		       "translated]",
		       t->T, t->T, t->n_words[i]);
	putchar('\n');
	if (metrics)
		write_metrics(metrics, t->texts[i], pred, ref, bleu);
	return true;
}

static bool report(translator *t, FILE *metrics)
{
	/* T tokens of the vocabulary, each at most its longest */
	const attnrt_vocab *v = t->vocab[RT_NMT_TGT];
	size_t longest = 0;
	for (int32_t id = 0; id < attnrt_vocab_size(v); id++) {
		size_t len = strlen(attnrt_vocab_token(v, id));
		longest = len > longest ? len : longest;
	}
	size_t cap = (size_t)t->T * (longest + 1) + 1;
	char *pred = ir_alloc(t->ctx, cap);
	bool ok = pred != NULL;
	for (size_t i = 0; ok && i < t->n; i++)
		ok = report_one(t, i, pred, cap, metrics);
	ir_free(t->ctx, pred);
	if (!pred)
		ir_error(t->ctx, (ir_loc){0}, "out of memory");
	if (ok && metrics && (fflush(metrics) != 0 || ferror(metrics))) {
		ir_error(t->ctx, (ir_loc){0}, "--metrics: cannot write '%s': %s",
			 t->o->metrics, strerror(errno));
		ok = false;
	}
	return ok;
}

/* ---- the whole translation ------------------------------------------------------------- */

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool translate_all(translator *t, const drv_jit *trained, FILE *metrics)
{
	double t0 = now_seconds(), t1;
	bool *done = NULL;
	bool ok = alloc_rows(t) && encode_sentences(t) && compile(t, trained);
	t1 = now_seconds();
	if (ok && !(done = ir_alloc(t->ctx, t->n * sizeof *done))) {
		ir_error(t->ctx, (ir_loc){0}, "out of memory");
		ok = false;
	}
	ok = ok && run_encode(t) && take_encoder_weights(t) &&
	     map_step_inputs(t) && decode(t, done);
	double t2 = now_seconds();
	ir_free(t->ctx, done);
	if (ok && metrics)
		fprintf(metrics,
			"{\"translated\": %zu, \"compile_seconds\": "
			"%.6g, \"decode_ms\": %.6g, \"ms_per_sentence\": %.6g, "
			"\"peak_rss_mib\": %.1f}\n",
			t->n, t1 - t0, (t2 - t1) * 1e3,
			(t2 - t1) * 1e3 / (double)t->n, drv_peak_rss_mib());
	if (!ok || !report(t, metrics))
		return false;
	if (isatty(STDOUT_FILENO))
		printf("translated %zu sentence%s: compiled in %.2f s, decoded in "
		       "%.2f ms\n",
		       t->n, t->n == 1 ? "" : "s", t1 - t0, (t2 - t1) * 1e3);
	t->att.src = t->texts[t->n - 1];
	return true;
}

static void translator_fini(translator *t)
{
	for (uint32_t i = 0; t->step_f && i < t->step_f->n_inputs; i++)
		if (t->kind[i] == IN_STATE)
			interp_tensor_fini(t->ctx, &t->in[i]);
	for (uint32_t k = 0; t->enc_f && k < TR_MAX_IO; k++)
		interp_tensor_fini(t->ctx, &t->enc_outs[k]);
	drv_attention_fini(t->ctx, &t->att);
	drv_jit_close(t->ctx, &t->jit);
	ir_free(t->ctx, t->src);
	ir_free(t->ctx, t->src_valid);
	ir_free(t->ctx, t->tok);
	ir_free(t->ctx, t->out);
	ir_free(t->ctx, t->n_out);
	ir_free(t->ctx, t->n_steps);
	ir_free(t->ctx, t->n_unknown);
	ir_free(t->ctx, t->n_words);
}

/* The last sentence's translation, for the heatmap's title. */
static bool draw(translator *t)
{
	size_t cap = (size_t)t->T * 64 + 1;
	char *pred = ir_alloc(t->ctx, cap);
	if (!pred) {
		ir_error(t->ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	attnrt_vocab_decode(t->vocab[RT_NMT_TGT],
			    t->out + (t->n - 1) * (size_t)t->T,
			    (size_t)t->n_out[t->n - 1], pred, cap);
	t->att.pred = pred;
	bool ok = drv_attention_draw(t->ctx, t->m, &t->att, t->o->heatmap);
	t->att.pred = NULL;
	ir_free(t->ctx, pred);
	return ok;
}

/* drv_translate with the vocabularies vocab (d's, or with is_loaded the
 * checkpoint's). */
static bool translate_with(ir_ctx *ctx, const ir_module *m,
			   const drv_options *o, const rt_nmt_data *d,
			   const attnrt_vocab *const vocab[2], bool is_loaded,
			   const drv_jit *trained, FILE *metrics)
{
	translator t;
	memset(&t, 0, sizeof t);
	t.ctx = ctx;
	t.m = m;
	t.o = o;
	t.d = d;
	t.vocab[0] = vocab[0];
	t.vocab[1] = vocab[1];
	t.is_vocab_loaded = is_loaded;
	t.T = rt_nmt_steps(d);
	t.enc_f = ir_module_find_func(m, "encode");
	t.step_f = ir_module_find_func(m, "decode_step");
	t.texts = o->n_translate ? o->translate : book_sentences;
	t.n = o->n_translate ? o->n_translate
			     : sizeof book_sentences / sizeof *book_sentences;
	bool ok = translate_all(&t, trained, metrics) &&
		  (!o->heatmap || draw(&t));
	translator_fini(&t);
	return ok;
}

bool drv_translate(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		   const rt_nmt_data *d, const drv_jit *trained, FILE *metrics)
{
	const attnrt_vocab *vocab[2] = {rt_nmt_vocab(d, RT_NMT_SRC),
					rt_nmt_vocab(d, RT_NMT_TGT)};
	return translate_with(ctx, m, o, d, vocab, false, trained, metrics);
}

/* The vocabularies of the --load checkpoint's metadata into vocab, or
 * NULLs for a checkpoint saved before attnc kept them (neither key
 * there). False after reporting one missing or corrupt. */
static bool checkpoint_vocabs(ir_ctx *ctx, const char *path,
			      attnrt_vocab *vocab[2])
{
	static const char *const keys[2] = {ATTNRT_META_SRC_VOCAB,
					    ATTNRT_META_TGT_VOCAB};
	char err[512];
	attnrt_st_file *f;
	vocab[0] = vocab[1] = NULL;
	if (attnrt_st_read(NULL, path, UINT64_MAX, &f, err, sizeof err) !=
	    ATTNRT_OK) {
		ir_error(ctx, (ir_loc){0}, "--load: %s", err);
		return false;
	}
	bool has_any = attnrt_st_meta(f, keys[0]) || attnrt_st_meta(f, keys[1]);
	bool ok = true;
	for (int k = 0; has_any && ok && k < 2; k++) {
		ok = attnrt_vocab_take(NULL, f, keys[k], &vocab[k], err,
				       sizeof err) == ATTNRT_OK;
		if (!ok)
			ir_error(ctx, (ir_loc){0}, "--load: %s: %s", path, err);
	}
	attnrt_st_free(f);
	if (!ok) {
		attnrt_vocab_free(vocab[0]);
		vocab[0] = NULL;
	}
	return ok;
}

/* Says where the vocabularies come from. */
static void print_vocabs(const char *path, attnrt_vocab *const vocab[2])
{
	if (vocab[0])
		fprintf(stderr,
			"data: vocabularies of %s: %d source, %d target "
			"tokens\n",
			path, (int)attnrt_vocab_size(vocab[0]),
			(int)attnrt_vocab_size(vocab[1]));
	else
		fprintf(stderr,
			"data: %s keeps no vocabularies (saved before "
			"attnc put them in its metadata): they come from the "
			"data\n",
			path);
}

bool drv_translate_loaded(ir_ctx *ctx, const ir_module *m, const drv_options *o)
{
	rt_nmt_data *d = NULL;
	attnrt_vocab *vocab[2];
	FILE *metrics = NULL;
	bool ok = checkpoint_vocabs(ctx, o->load, vocab) &&
		  drv_nmt_load(ctx, ir_module_find_setting(m, "data"), o, &d);
	if (ok)
		print_vocabs(o->load, vocab);
	if (ok && o->metrics && !(metrics = fopen(o->metrics, "w"))) {
		ir_error(ctx, (ir_loc){0}, "--metrics: cannot write '%s': %s",
			 o->metrics, strerror(errno));
		ok = false;
	}
	const attnrt_vocab *use[2] = {vocab[0], vocab[1]};
	if (ok && !vocab[0]) {
		use[0] = rt_nmt_vocab(d, RT_NMT_SRC);
		use[1] = rt_nmt_vocab(d, RT_NMT_TGT);
	}
	ok = ok &&
	     translate_with(ctx, m, o, d, use, vocab[0] != NULL, NULL, metrics);
	if (metrics && fclose(metrics) != 0 && ok) {
		ir_error(ctx, (ir_loc){0}, "--metrics: cannot write '%s': %s",
			 o->metrics, strerror(errno));
		ok = false;
	}
	attnrt_vocab_free(vocab[0]);
	attnrt_vocab_free(vocab[1]);
	rt_nmt_free(d);
	return ok;
}
