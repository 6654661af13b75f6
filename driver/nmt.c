/*
 * nmt.c - the translation data of the seq2seq models in the driver: the
 * train block's `data = nmt(examples = N, steps = T)` read by rt_nmt
 * (the built-in corpus, or --data FILE; --examples N over the block's
 * N), what was read printed in a few lines, the vocabulary sizes bound
 * to the model's dimensions V_src and V_tgt, and the batch source that
 * feeds the loss entry while training.
 *
 * A batch has the train block's batch size (the compiled B, or with
 * shards that many shards of B rows): the last batch of an epoch is
 * filled up with rows of valid length 0, which add nothing to the masked
 * loss or to its gradient, and so are the rows past the batch that make
 * the shards whole. Each batch counts its valid target tokens, which
 * d2l's reported loss is divided by and its tokens per second count, and
 * the shards that hold a real row.
 */
#include "driver.h"

#include <stdlib.h>
#include <string.h>

bool drv_nmt_is_source(const ir_setting *data)
{
	return data && data->value.kind == IR_VAL_CALL &&
	       strcmp(data->value.str, "nmt") == 0;
}

/* examples = N (an integer >= 0) or steps = T (a positive integer). */
static bool read_arg(ir_ctx *ctx, const ir_setting *a, double *examples,
		     double *steps)
{
	bool is_examples = strcmp(a->key, "examples") == 0;
	if (!is_examples && strcmp(a->key, "steps") != 0) {
		ir_error(ctx, a->loc,
			 "nmt has no setting '%s' (examples, steps)", a->key);
		return false;
	}
	double v = a->value.num, lo = is_examples ? 0 : 1;
	if (a->value.kind == IR_VAL_NUM && v >= lo && v < 2147483648.0 &&
	    v == (double)(int64_t)v) {
		*(is_examples ? examples : steps) = v;
		return true;
	}
	ir_error(ctx, a->loc, "nmt: %s must be %s", a->key,
		 is_examples ? "an integer >= 0 (0: every line)"
			     : "a positive integer");
	return false;
}

/* The setting's examples and steps (d2l's 600 and 10 by default). */
static bool read_args(ir_ctx *ctx, const ir_setting *data, double *examples,
		      double *steps)
{
	*examples = RT_NMT_DEFAULT_EXAMPLES;
	*steps = RT_NMT_DEFAULT_STEPS;
	for (uint32_t i = 0; i < data->value.n_args; i++)
		if (!read_arg(ctx, &data->value.args[i], examples, steps))
			return false;
	return true;
}

bool drv_nmt_check(ir_ctx *ctx, const ir_setting *data)
{
	double examples, steps;
	return read_args(ctx, data, &examples, &steps);
}

/* ", 3 blank" for a count that is not 0. */
static size_t put_count(char *buf, size_t at, size_t size, size_t n,
			const char *what)
{
	if (!n || at >= size)
		return at;
	return at + (size_t)snprintf(buf + at, size - at, "%s%zu %s",
				     at ? ", " : "", n, what);
}

/* The lines that were skipped or handled, if any. */
static void print_line_kinds(const rt_nmt_stats *st)
{
	char buf[512];
	size_t n = 0, size = sizeof buf;
	buf[0] = '\0';
	n = put_count(buf, n, size, st->n_blank, "blank");
	n = put_count(buf, n, size, st->n_no_tab, "without a tab");
	n = put_count(buf, n, size, st->n_empty_side, "with an empty side");
	n = put_count(buf, n, size, st->n_bad_utf8, "not UTF-8");
	size_t skipped = st->n_blank + st->n_no_tab + st->n_empty_side +
			 st->n_bad_utf8;
	if (skipped)
		fprintf(stderr, "data: skipped %zu line%s: %s\n", skipped,
			skipped == 1 ? "" : "s", buf);
	n = 0;
	buf[0] = '\0';
	n = put_count(buf, n, size, st->n_extra_fields, "with extra fields");
	n = put_count(buf, n, size, st->n_crlf, "ended by CR");
	n = put_count(buf, n, size, st->is_unterminated,
		      "unterminated last line");
	n = put_count(buf, n, size, st->has_bom, "byte order mark dropped");
	if (n)
		fprintf(stderr, "data: handled: %s\n", buf);
}

static void print_data(const char *name, const rt_nmt_data *d, size_t examples)
{
	const rt_nmt_stats *st = rt_nmt_data_stats(d);
	fprintf(stderr,
		"data: %s: %zu pair%s in %zu line%s; %zu used "
		"(examples = %zu%s), %d steps\n",
		name, st->n_pairs, st->n_pairs == 1 ? "" : "s", st->n_lines,
		st->n_lines == 1 ? "" : "s", rt_nmt_rows(d), examples,
		examples ? "" : ": every line", rt_nmt_steps(d));
	print_line_kinds(st);
	fprintf(stderr, "data: vocabulary: %d source, %d target tokens\n",
		(int)rt_nmt_vocab_size(d, RT_NMT_SRC),
		(int)rt_nmt_vocab_size(d, RT_NMT_TGT));
	fflush(stdout);
}

bool drv_nmt_load(ir_ctx *ctx, const ir_setting *data, const drv_options *o,
		  rt_nmt_data **out)
{
	double examples, steps;
	char err[512];
	*out = NULL;
	if (!read_args(ctx, data, &examples, &steps))
		return false;
	if (o->examples)
		examples = o->examples < 0 ? 0 : (double)o->examples;
	int rc = rt_nmt_load(NULL, o->data, (size_t)examples, (int)steps, out,
			     err, sizeof err);
	if (rc != ATTNRT_OK) {
		ir_error(ctx, (ir_loc){0}, "%s%s", o->data ? "--data: " : "",
			 err);
		return false;
	}
	print_data(o->data ? o->data : "built-in corpus", *out,
		   (size_t)examples);
	return true;
}

/* Appends NAME = value to the bound symbols of o. */
static bool bind(ir_ctx *ctx, const ir_module *m, drv_options *o,
		 const char *name, int64_t value)
{
	if (ir_module_find_sym(m, name) < 0) {
		ir_error(ctx, (ir_loc){0},
			 "model %s has no dimension '%s' for "
			 "the translation data to bind (dim %s)",
			 m->name, name, name);
		return false;
	}
	return drv_options_bind(ctx, o, "data", name, value);
}

bool drv_nmt_bind_vocabs(ir_ctx *ctx, const ir_module *m, const drv_options *o,
			 const attnrt_vocab *const vocab[2], int64_t batch,
			 drv_options *out)
{
	*out = *o;
	return bind(ctx, m, out, "V_src", attnrt_vocab_size(vocab[RT_NMT_SRC])) &&
	       bind(ctx, m, out, "V_tgt", attnrt_vocab_size(vocab[RT_NMT_TGT])) &&
	       (batch <= 0 || bind(ctx, m, out, "B", batch));
}

bool drv_nmt_bind(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		  const rt_nmt_data *d, int64_t batch, drv_options *out)
{
	const attnrt_vocab *vocab[2] = {rt_nmt_vocab(d, RT_NMT_SRC),
					rt_nmt_vocab(d, RT_NMT_TGT)};
	return drv_nmt_bind_vocabs(ctx, m, o, vocab, batch, out);
}

/* ---- the batch source -------------------------------------------------------------- */

typedef struct nmt_source {
	const rt_nmt_data *data;
	uint64_t seed;
	size_t B;          /* rows of a batch */
	size_t shard_rows; /* rows of a shard (the entry's B) */
	size_t rows;       /* of the arrays: shards * shard_rows >= B */
	uint32_t n_shards;
	size_t *order;  /* (N) the rows of the epoch in order */
	uint64_t epoch; /* whose order it is; UINT64_MAX: none yet */
	int32_t *ids;   /* the batch's five arrays, one block */
	rt_nmt_batch batch;
	int32_t *inputs[5];    /* the loss entry's inputs, in its order */
	size_t shard_bytes[5]; /* from one shard of an input to the next */
	uint32_t n_inputs;
} nmt_source;

/* The rows past the batch, up to the shards' end: padding, written once
 * (a batch's fill writes its B rows only). */
static void pad_rows(nmt_source *s)
{
	size_t T = (size_t)rt_nmt_steps(s->data);
	rt_nmt_batch *b = &s->batch;
	for (size_t r = s->B; r < s->rows; r++) {
		for (size_t t = 0; t < T; t++)
			b->src[r * T + t] = b->tgt_in[r * T + t] =
				b->tgt[r * T + t] = RT_NMT_PAD;
		b->src_valid[r] = b->tgt_valid[r] = 0;
	}
}

static bool nmt_fill(void *state, uint64_t epoch, uint64_t i, drv_batch *b)
{
	nmt_source *s = state;
	if (s->epoch != epoch) {
		rt_nmt_shuffle(s->data, s->seed, epoch, s->order);
		s->epoch = epoch;
	}
	int rc = rt_nmt_fill_batch(s->data, s->order, (size_t)i, s->B,
				   &s->batch);
	if (rc != ATTNRT_OK)
		return false;
	for (uint32_t k = 0; k < s->n_inputs; k++) {
		b->inputs[k] = s->inputs[k];
		b->shard_bytes[k] = s->shard_bytes[k];
	}
	b->n_live = (uint32_t)((s->batch.n_rows + s->shard_rows - 1) /
			       s->shard_rows);
	b->n_items = (double)s->batch.n_tokens;
	b->loss_divisor = (double)s->batch.n_tokens;
	return true;
}

static void nmt_fini(void *state)
{
	nmt_source *s = state;
	if (!s)
		return;
	free(s->order);
	free(s->ids);
	free(s);
}

/* The names the loss entry's inputs may have, and whether each is a
 * (B, T) array or (B) valid lengths. */
static const char *const input_names[] = {"src", "src_valid", "tgt_in", "tgt",
					  "tgt_valid"};

static int32_t *input_array(nmt_source *s, int k)
{
	rt_nmt_batch *b = &s->batch;
	int32_t *arrays[] = {b->src, b->src_valid, b->tgt_in, b->tgt,
			     b->tgt_valid};
	return arrays[k];
}

/* Maps input t of the loss entry to its array; reports one the data does
 * not give or whose shape is not the data's. */
static bool map_input(ir_ctx *ctx, const ir_setting *data, nmt_source *s,
		      const attnrt_tensor_info *t, int steps)
{
	int k = 0;
	while (k < 5 && strcmp(t->name, input_names[k]) != 0)
		k++;
	if (k == 5) {
		ir_error(ctx, data->loc,
			 "data = nmt(...) gives src, src_valid, "
			 "tgt_in, tgt and tgt_valid, but the loss takes '%s'",
			 t->name);
		return false;
	}
	bool is_valid = k == 1 || k == 4;
	bool ok = t->dtype == ATTNRT_I32 && t->rank == (is_valid ? 1 : 2) &&
		  (size_t)t->dims[0] == s->shard_rows &&
		  (is_valid || t->dims[1] == steps);
	if (!ok) {
		char dims[160];
		drv_dims_format(t->dims, t->rank, dims, sizeof dims);
		ir_error(ctx, data->loc,
			 "data = nmt(...): the loss's input '%s' "
			 "is %s%s, but the data gives i32[%zu%s] (steps = %d)",
			 t->name, t->dtype == ATTNRT_I32 ? "i32" : "f32", dims,
			 s->shard_rows, is_valid ? "" : ", T", steps);
		return false;
	}
	s->shard_bytes[s->n_inputs] = s->shard_rows * sizeof(int32_t) *
				      (is_valid ? 1 : (size_t)steps);
	s->inputs[s->n_inputs++] = input_array(s, k);
	return true;
}

static bool source_alloc(nmt_source *s, size_t T)
{
	size_t N = rt_nmt_rows(s->data), B = s->rows;
	s->order = malloc((N + 1) * sizeof *s->order);
	s->ids = malloc((3 * B * T + 2 * B) * sizeof *s->ids);
	if (!s->order || !s->ids)
		return false;
	s->batch = (rt_nmt_batch){.src = s->ids,
				  .tgt_in = s->ids + B * T,
				  .tgt = s->ids + 2 * B * T,
				  .src_valid = s->ids + 3 * B * T,
				  .tgt_valid = s->ids + 3 * B * T + B};
	pad_rows(s);
	return true;
}

bool drv_nmt_source_open(ir_ctx *ctx, const ir_setting *data,
			 const rt_nmt_data *d, uint64_t seed, size_t batch,
			 const drv_grad *g, drv_batch_source *src)
{
	memset(src, 0, sizeof *src);
	nmt_source *s = calloc(1, sizeof *s);
	if (!s) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	size_t shard_rows = g->n_inputs ? (size_t)g->inputs[0].dims[0] : 0;
	*s = (nmt_source){.data = d,
			  .seed = seed,
			  .epoch = UINT64_MAX,
			  .shard_rows = shard_rows,
			  .n_shards = g->n_shards,
			  .rows = shard_rows * g->n_shards,
			  .B = batch ? batch : shard_rows};
	*src = (drv_batch_source){"tokens", 0, s, nmt_fill, nmt_fini};
	int steps = rt_nmt_steps(d);
	if (g->n_inputs == 0 || g->n_inputs > 5 || g->inputs[0].rank < 1 ||
	    s->B == 0) {
		ir_error(ctx, data->loc,
			 "data = nmt(...) feeds a loss that takes "
			 "src, src_valid, tgt_in, tgt and tgt_valid; '%s' takes %u "
			 "inputs",
			 g->f->name, g->n_inputs);
		return false;
	}
	if (s->B > s->rows) {
		ir_error(ctx, data->loc,
			 "a batch of %zu rows does not fit %u "
			 "shards of %zu",
			 s->B, s->n_shards, s->shard_rows);
		return false;
	}
	if (!source_alloc(s, (size_t)steps)) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	for (uint32_t i = 0; i < g->n_inputs; i++)
		if (!map_input(ctx, data, s, &g->inputs[i], steps))
			return false;
	src->n_batches = rt_nmt_batch_count(d, s->B);
	return true;
}
