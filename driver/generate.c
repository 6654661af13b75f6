/*
 * generate.c - --generate "PROMPT": sampling text from a character-level
 * language model (models/gpt.g) after --train or with --load.
 *
 * The model exports decode_step(tok: i32[B, 1], pos: i32[1], STATE...)
 * returning (logits, STATE...): the logits (B, 1, V) or (B, V) of the
 * token after tok at position pos, and every other input carried from
 * the output of the same name (the cache of keys and values). It is
 * compiled again with B = 1 and run once a token: over the prompt's
 * characters (the logits of the last one are the first to sample from),
 * then over each sampled one, up to --max-tokens. The context is the
 * steps of the train block's text(...); when it is full, the cache
 * starts again from the last half of the text so far (fed again at
 * positions from 0), so the text can be longer than the context. Sampling is PyTorch's recipe:
 * logits / --temperature, only the --top-k largest kept, softmax, one
 * draw from (--seed, token): the same text for the same seed at any
 * thread count; --temperature 0 takes the most likely character.
 *
 * The vocabulary is the training text's, or the "vocab" metadata of the
 * --load checkpoint. The continuation is printed as it comes; on a
 * terminal the tokens per second follow it (not otherwise, so runs
 * diff), and --metrics gets them as a JSON line.
 */
#include "driver.h"

#include "rt_rng.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SAMPLE_STREAM 0x47454e31ULL /* "GEN1" */

typedef struct generator {
	ir_ctx *ctx;
	const ir_module *m;
	const drv_options *o;
	const rt_text_vocab *vocab;
	drv_jit jit;
	drv_options run_o;
	const ir_func *f; /* decode_step */
	attnrt_entry_fn fn;
	const attnrt_tensor_info *in, *out;
	uint32_t n_in, n_out;
	int32_t tok, pos;
	void *bufs[DRV_MAX_INPUTS]; /* the inputs' memory; states in place */
	void *outs[DRV_MAX_INPUTS]; /* outputs: logits, then states */
	int32_t state_out[DRV_MAX_INPUTS]; /* input i's from this output */
	void *scratch;
	size_t n_vocab;
	int64_t context;
	float *probs;
} generator;

/* The window's length of the train block's text(steps = T), or 0. */
static int64_t text_steps(const ir_module *m)
{
	const ir_setting *data = ir_module_find_setting(m, "data");
	const ir_value *steps = ir_setting_arg(data, "steps");
	return drv_text_is_source(data) && steps ? (int64_t)steps->num : 0;
}

bool drv_generate_check(ir_ctx *ctx, const ir_module *m, const drv_options *o)
{
	const ir_func *f = ir_module_find_func(m, "decode_step");
	if (!f || !f->is_export || f->n_inputs < 2 || f->n_outputs < 1) {
		ir_error(ctx, (ir_loc){0},
			 "--generate: model %s exports no "
			 "decode_step(tok, pos, ...) to generate with",
			 m->name);
		return false;
	}
	if (!drv_check_inputs(ctx, f, "--generate", true))
		return false;
	/* Each state is carried from the output of its name: a name that
	 * no output has is found here, before --train (its size, which
	 * needs B = 1 bound, when the step is compiled). */
	for (uint32_t i = 2; i < f->n_inputs; i++) {
		bool is_carried = false;
		for (uint32_t k = 1; k < f->n_outputs; k++)
			is_carried = is_carried ||
				     strcmp(f->output_names[k],
					    f->input_names[i]) == 0;
		if (!is_carried) {
			ir_error(ctx, f->loc,
				 "--generate: decode_step's input '%s' is not "
				 "carried: no output of its name",
				 f->input_names[i]);
			return false;
		}
	}
	if (!text_steps(m)) {
		ir_error(ctx, (ir_loc){0},
			 "--generate: model %s does not train on "
			 "a text (data = text(steps = T)), which gives its "
			 "characters and context",
			 m->name);
		return false;
	}
	if (!o->train && !o->load) {
		ir_error(ctx, (ir_loc){0},
			 "--generate needs weights: --train or "
			 "--load FILE");
		return false;
	}
	return true;
}

/* ---- set-up --------------------------------------------------------------------- */

/* The vocabulary of a checkpoint's "vocab" metadata. */
static rt_text_vocab *vocab_of_checkpoint(ir_ctx *ctx, const char *path)
{
	char err[512];
	attnrt_st_file *file;
	rt_text_vocab *v = NULL;
	if (attnrt_st_read(NULL, path, UINT64_MAX, &file, err, sizeof err) !=
	    ATTNRT_OK) {
		ir_error(ctx, (ir_loc){0}, "--load: %s", err);
		return NULL;
	}
	const char *s = attnrt_st_meta(file, "vocab");
	if (!s)
		ir_error(ctx, (ir_loc){0},
			 "--generate: %s has no vocabulary in "
			 "its metadata (\"vocab\"; --save of a text model writes "
			 "it)",
			 path);
	else if (rt_text_vocab_parse(NULL, s, &v, err, sizeof err) != ATTNRT_OK)
		ir_error(ctx, (ir_loc){0}, "--generate: %s: vocab: %s", path,
			 err);
	attnrt_st_free(file);
	return v;
}

static bool bind(generator *g)
{
	drv_options *o = &g->run_o;
	*o = *g->o;
	o->threads = o->threads ? o->threads
				: 1; /* one token: too small to share */
	return drv_options_bind(g->ctx, o, "--generate", "B", 1) &&
	       drv_options_bind(g->ctx, o, "--generate", "V",
				rt_text_vocab_size(g->vocab));
}

static bool compile(generator *g, const drv_jit *trained)
{
	static const char *const only[] = {"decode_step"};
	return bind(g) && drv_jit_open_trained(g->ctx, g->m, &g->run_o, only, 1,
					       trained, &g->jit);
}

static size_t tensor_bytes(const attnrt_tensor_info *t)
{
	size_t n = 4;
	for (int d = 0; d < t->rank; d++)
		n *= (size_t)t->dims[d];
	return n;
}

/* Input i: tok, pos, or a state carried from the output of its name. */
static bool map_input(generator *g, uint32_t i)
{
	const attnrt_tensor_info *t = &g->in[i];
	g->state_out[i] = -1;
	if (i < 2) {
		bool ok = t->dtype == ATTNRT_I32 && tensor_bytes(t) == 4;
		if (!ok)
			ir_error(g->ctx, g->f->loc,
				 "--generate: decode_step's input "
				 "'%s' should be i32[1, 1] (tok) or i32[1] (pos) at "
				 "B = 1",
				 t->name);
		g->bufs[i] = i ? (void *)&g->pos : (void *)&g->tok;
		return ok;
	}
	for (uint32_t k = 1; k < g->n_out; k++)
		if (strcmp(g->out[k].name, t->name) == 0 &&
		    tensor_bytes(&g->out[k]) == tensor_bytes(t))
			g->state_out[i] = (int32_t)k;
	if (g->state_out[i] < 0) {
		ir_error(g->ctx, g->f->loc,
			 "--generate: decode_step's input '%s' "
			 "is not carried: no output of its name and size",
			 t->name);
		return false;
	}
	g->bufs[i] = calloc(1, tensor_bytes(t));
	g->outs[g->state_out[i]] = calloc(1, tensor_bytes(t));
	return g->bufs[i] && g->outs[g->state_out[i]];
}

static bool open_buffers(generator *g)
{
	const char *name = "decode_step";
	g->f = ir_module_find_func(g->m, name);
	g->fn = cg_program_entry(g->jit.p, name);
	g->in = cg_program_inputs(g->jit.p, name, &g->n_in);
	g->out = cg_program_outputs(g->jit.p, name, &g->n_out);
	g->n_vocab = (size_t)rt_text_vocab_size(g->vocab);
	if (!g->fn || !drv_check_inputs(g->ctx, g->f, "--generate", true))
		return false;
	if (!g->n_out || g->out[0].dtype != ATTNRT_F32 ||
	    tensor_bytes(&g->out[0]) != 4 * g->n_vocab) {
		ir_error(g->ctx, g->f->loc,
			 "--generate: decode_step's first output "
			 "should be the logits of the %zu characters",
			 g->n_vocab);
		return false;
	}
	g->outs[0] = calloc(g->n_vocab, sizeof(float));
	g->probs = calloc(g->n_vocab, sizeof *g->probs);
	g->scratch = attnrt_alloc(NULL,
				  cg_program_scratch_bytes(g->jit.p, name));
	for (uint32_t i = 0; i < g->n_in; i++)
		if (!map_input(g, i))
			return false;
	if (g->outs[0] && g->probs && g->scratch)
		return true;
	ir_error(g->ctx, (ir_loc){0}, "out of memory");
	return false;
}

static void close_generator(generator *g)
{
	for (uint32_t i = 2; i < g->n_in && i < DRV_MAX_INPUTS; i++)
		free(g->bufs[i]);
	for (uint32_t k = 0; k < g->n_out && k < DRV_MAX_INPUTS; k++)
		free(g->outs[k]);
	free(g->probs);
	attnrt_free(NULL, g->scratch);
	drv_jit_close(g->ctx, &g->jit);
}

/* ---- decoding ---------------------------------------------------------------------- */

/* One decode_step of token tok at position pos: the logits in outs[0]
 * and the states carried into the inputs. */
static bool step(generator *g, int32_t tok, int32_t pos)
{
	g->tok = tok;
	g->pos = pos;
	attnrt_run run = {.seed = g->o->seed, .n_threads = g->run_o.threads};
	int rc = g->fn(&run, g->jit.params, g->scratch,
		       (const void *const *)g->bufs, g->outs);
	if (rc != ATTNRT_OK) {
		drv_report_run_error(g->ctx, g->jit.p, g->f, rc);
		return false;
	}
	for (uint32_t i = 2; i < g->n_in; i++) { /* swap: no copy */
		void *t = g->bufs[i];
		g->bufs[i] = g->outs[g->state_out[i]];
		g->outs[g->state_out[i]] = t;
	}
	return true;
}

static int by_value_desc(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* The next character from the logits in outs[0]: draw k of (seed, k). */
static int32_t sample(generator *g, uint64_t k)
{
	const float *logits = g->outs[0];
	size_t V = g->n_vocab;
	int32_t best = 0;
	for (size_t i = 1; i < V; i++)
		if (logits[i] > logits[best])
			best = (int32_t)i;
	double temp = g->o->temperature;
	if (temp <= 0)
		return best;
	float cut = -INFINITY; /* the k-th largest logit */
	if (g->o->top_k > 0 && (size_t)g->o->top_k < V) {
		memcpy(g->probs, logits, V * sizeof *logits);
		qsort(g->probs, V, sizeof *g->probs, by_value_desc);
		cut = g->probs[g->o->top_k - 1];
	}
	double sum = 0;
	for (size_t i = 0; i < V; i++) {
		double p = logits[i] >= cut
				   ? exp((logits[i] - logits[best]) / temp)
				   : 0;
		g->probs[i] = (float)p;
		sum += p;
	}
	double u = rt_rng_uniform(g->o->seed, SAMPLE_STREAM, k) * sum, acc = 0;
	for (size_t i = 0; i < V; i++) {
		acc += g->probs[i];
		if (u < acc && g->probs[i] > 0)
			return (int32_t)i;
	}
	return best;
}

static void put_char(const generator *g, int32_t id)
{
	char buf[8];
	size_t n = rt_text_decode(g->vocab, id, buf);
	fwrite(buf, 1, n, stdout);
}

/* Encodes the prompt; false after reporting. */
static bool encode_prompt(generator *g, int32_t **ids, size_t *n)
{
	const char *p = g->o->generate;
	char err[256];
	*ids = malloc((strlen(p) + 1) * sizeof **ids);
	if (!*ids) {
		ir_error(g->ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	if (rt_text_encode(g->vocab, p, strlen(p), *ids, n, err, sizeof err) !=
	    ATTNRT_OK) {
		ir_error(g->ctx, (ir_loc){0}, "--generate: the prompt: %s", err);
		return false;
	}
	if (*n == 0 || (int64_t)*n > g->context) {
		ir_error(g->ctx, (ir_loc){0},
			 "--generate: the prompt has %zu "
			 "characters; it needs 1 to %lld (the context)",
			 *n, (long long)g->context);
		return false;
	}
	return true;
}

/* Starts the cache again from the last `keep` tokens of hist[0..n), at
 * positions 0..keep-1: the context slides when full. */
static bool refeed(generator *g, const int32_t *hist, size_t n, size_t keep)
{
	for (uint32_t i = 2; i < g->n_in; i++)
		memset(g->bufs[i], 0, tensor_bytes(&g->in[i]));
	bool ok = true;
	for (size_t i = 0; ok && i < keep; i++)
		ok = step(g, hist[n - keep + i], (int32_t)i);
	return ok;
}

static bool run(generator *g, FILE *metrics)
{
	int32_t *ids;
	size_t n;
	if (!encode_prompt(g, &ids, &n)) {
		free(ids);
		return false;
	}
	int32_t *hist = realloc(ids,
				(n + (size_t)g->o->max_tokens) * sizeof *ids);
	if (!hist) {
		free(ids);
		ir_error(g->ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	bool ok = refeed(g, hist, n, n);
	fputs(g->o->generate, stdout);
	fflush(stdout);
	double t0 = drv_now_seconds();
	int64_t made = 0, pos = (int64_t)n, refeeds = 0;
	for (; ok && made < g->o->max_tokens; made++) {
		int32_t id = sample(g, (uint64_t)made);
		put_char(g, id);
		hist[n++] = id;
		if (made + 1 == g->o->max_tokens)
			break;
		if (pos == g->context) { /* full: keep the last half */
			pos = g->context / 2;
			ok = refeed(g, hist, n - 1, (size_t)pos);
			refeeds++;
		}
		ok = ok && step(g, id, (int32_t)pos++);
	}
	made += ok && made < g->o->max_tokens;
	double secs = drv_now_seconds() - t0,
	       rate = secs > 0 ? (double)made / secs : 0;
	free(hist);
	if (!ok)
		return false;
	printf("\n");
	if (isatty(STDERR_FILENO))
		fprintf(stderr, "%lld tokens in %.2f s, %.0f tokens/s\n",
			(long long)made, secs, rate);
	if (metrics)
		fprintf(metrics,
			"{\"generated_tokens\": %lld, \"seconds\": %.6g, "
			"\"tokens_per_sec\": %.6g, \"context_slides\": %lld}\n",
			(long long)made, secs, rate, (long long)refeeds);
	return true;
}

bool drv_generate(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		  const rt_text_vocab *vocab, const drv_jit *trained,
		  FILE *metrics)
{
	generator g;
	memset(&g, 0, sizeof g);
	g.ctx = ctx;
	g.m = m;
	g.o = o;
	g.context = text_steps(m);
	rt_text_vocab *loaded = NULL;
	if (!vocab)
		vocab = loaded = vocab_of_checkpoint(ctx, o->load);
	g.vocab = vocab;
	bool ok = vocab && compile(&g, trained) && open_buffers(&g) &&
		  run(&g, metrics) &&
		  (!o->profile || drv_profile_report(ctx, &g.jit, "generation",
						     NULL, 0, metrics));
	close_generator(&g);
	rt_text_vocab_free(loaded);
	return ok;
}

bool drv_generate_loaded(ir_ctx *ctx, const ir_module *m, const drv_options *o)
{
	FILE *metrics = o->metrics ? fopen(o->metrics, "w") : NULL;
	if (o->metrics && !metrics) {
		ir_error(ctx, (ir_loc){0}, "--metrics: cannot write '%s': %s",
			 o->metrics, strerror(errno));
		return false;
	}
	bool ok = drv_generate(ctx, m, o, NULL, NULL, metrics);
	if (metrics && fclose(metrics) != 0) {
		ir_error(ctx, (ir_loc){0}, "--metrics: cannot write '%s': %s",
			 o->metrics, strerror(errno));
		ok = false;
	}
	return ok;
}
