/*
 * samples.c - training data as a table of samples: named fields (one per
 * input of the loss entry), each an array whose axis 0 is the sample
 * axis. `data = tensors(...)` (data_tensors.c) fills one from a
 * safetensors file, `data = text(...)` (data_text.c) from the windows of
 * a text. This file binds a table to the loss entry (names, dtypes, the
 * shape of a sample, the dims it fixes), splits off a validation set,
 * and is the batch source that feeds training and the validation loss.
 *
 * Batches: every epoch the samples in an order drawn from (seed, epoch),
 * cut into batches of the train block's batch size (the compiled B, or
 * with shards that many shards of B rows each). The last batch of an
 * epoch, when the samples do not divide into batches, is filled up with
 * the first samples of the same epoch's order, which so are seen twice
 * in that epoch; the program says how many when it starts. A batch's
 * loss is the loss entry's value: the epoch's loss is the mean of its
 * batches' losses.
 */
#include "driver.h"

#include "rt_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SHUFFLE_STREAM 0x5a4d504cULL /* "SMPL": the order of each epoch */

const char *drv_model_path(const char *model, const char *path, char *buf,
			   size_t size)
{
	const char *slash = model ? strrchr(model, '/') : NULL;
	if (path[0] == '/' || !slash)
		return path;
	snprintf(buf, size, "%.*s/%s", (int)(slash - model), model, path);
	return buf;
}

const char *drv_dtype_name(ir_dtype t)
{
	return t == IR_I32 ? "i32" : t == IR_F64 ? "f64" : "f32";
}

drv_samples *drv_samples_create(uint32_t n_fields, size_t n)
{
	drv_samples *s = calloc(1, sizeof *s);
	if (!s || n_fields > DRV_MAX_FIELDS) {
		free(s);
		return NULL;
	}
	s->n_fields = n_fields;
	s->n = n;
	s->items_per_sample = 1;
	return s;
}

bool drv_samples_alloc_field(drv_samples *s, uint32_t i, const char *name,
			     ir_dtype dtype, int rank, const int64_t *dims)
{
	drv_field *f = &s->fields[i];
	f->name = strdup(name);
	f->dtype = dtype;
	f->rank = rank;
	size_t elems = 1;
	for (int d = 0; d < rank; d++) {
		f->dims[d] = dims[d];
		if (__builtin_mul_overflow(elems, (size_t)dims[d], &elems))
			return false;
	}
	f->row_bytes = elems * 4;
	size_t bytes;
	if (!f->name || __builtin_mul_overflow(f->row_bytes, s->n, &bytes))
		return false;
	f->data = malloc(bytes ? bytes : 1);
	return f->data != NULL;
}

void drv_samples_destroy(drv_samples *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->n_fields; i++) {
		free(s->fields[i].name);
		free(s->fields[i].data);
	}
	free(s);
}

drv_samples *drv_samples_split(drv_samples *s, size_t n_tail)
{
	drv_samples *t = drv_samples_create(s->n_fields, n_tail);
	if (!t || n_tail > s->n) {
		drv_samples_destroy(t);
		return NULL;
	}
	t->items_per_sample = s->items_per_sample;
	size_t keep = s->n - n_tail;
	for (uint32_t i = 0; i < s->n_fields; i++) {
		drv_field *f = &s->fields[i];
		if (!drv_samples_alloc_field(t, i, f->name, f->dtype, f->rank,
					     f->dims)) {
			drv_samples_destroy(t);
			return NULL;
		}
		memcpy(t->fields[i].data, f->data + keep * f->row_bytes,
		       n_tail * f->row_bytes);
	}
	s->n = keep;
	return t;
}

/* ---- against the loss entry ------------------------------------------------------ */

static const drv_field *find_field(const drv_samples *s, const char *name)
{
	for (uint32_t i = 0; i < s->n_fields; i++)
		if (strcmp(s->fields[i].name, name) == 0)
			return &s->fields[i];
	return NULL;
}

/* An input of the loss as a tensor of dims only: the batch, then the
 * shape of one sample of its field. */
static bool input_tensor(ir_ctx *ctx, const ir_setting *at, const ir_func *f,
			 uint32_t i, const drv_field *fd, int64_t rows,
			 interp_tensor *t)
{
	const ir_type *ty = &f->g.nodes[f->inputs[i]].type;
	char nb[32];
	const char *name = drv_io_name(f->input_names, i, "in", nb, sizeof nb);
	if (ty->dtype != fd->dtype || ty->rank != fd->rank + 1) {
		char dims[160];
		drv_dims_format(fd->dims, fd->rank, dims, sizeof dims);
		ir_error(ctx, at->loc,
			 "data: the samples of '%s' are %s%s, but "
			 "'%s' takes %s of rank %d (the batch axis, then a "
			 "sample's)",
			 name, drv_dtype_name(fd->dtype), dims, f->name,
			 drv_dtype_name(ty->dtype), ty->rank);
		return false;
	}
	memset(t, 0, sizeof *t);
	t->dtype = fd->dtype;
	t->rank = ty->rank;
	t->dims[0] = rows;
	memcpy(t->dims + 1, fd->dims, (size_t)fd->rank * sizeof *fd->dims);
	return true;
}

/* The loss's batch axis: its first input's axis 0, one symbol (B) or a
 * number; *sym is the symbol, or -1. */
static bool batch_axis(ir_ctx *ctx, const ir_setting *at, const ir_func *f,
		       int32_t *sym, int64_t *rows)
{
	const ir_type *ty = &f->g.nodes[f->inputs[0]].type;
	ir_dim d = ty->rank ? ty->dims[0] : ir_dim_static(0);
	*sym = ir_dim_is_static(d) ? -1 : d.sym;
	if (ty->rank && (ir_dim_is_static(d) || d.coef == 1)) {
		if (ir_dim_is_static(d))
			*rows = d.coef;
		return true;
	}
	char nb[32];
	ir_error(ctx, at->loc,
		 "data: the first input of '%s', '%s', has no "
		 "batch axis (its axis 0 should be a dim such as B)",
		 f->name, drv_io_name(f->input_names, 0, "in", nb, sizeof nb));
	return false;
}

/* The rows of the compiled batch: the batch, or a shard's rows of it. */
static bool batch_rows(ir_ctx *ctx, const ir_setting *at,
		       const drv_train_config *tc, const drv_samples *s,
		       bool is_valid, int64_t fixed, int64_t *rows)
{
	int64_t batch = tc->batch ? tc->batch : fixed;
	if (batch <= 0) {
		ir_error(ctx, at->loc,
			 "data: the batch has no size (batch = N "
			 "in the train block, or --batch N)");
		return false;
	}
	if (!is_valid && (size_t)batch > s->n) {
		ir_error(ctx, at->loc,
			 "data: a batch of %lld samples is more "
			 "than the %zu of the training set",
			 (long long)batch, s->n);
		return false;
	}
	if (batch % tc->shards) {
		ir_error(ctx, at->loc,
			 "data: a batch of %lld samples does not "
			 "split into %lld shards of equal rows",
			 (long long)batch, (long long)tc->shards);
		return false;
	}
	*rows = batch / tc->shards;
	if (fixed && *rows != fixed) {
		ir_error(ctx, at->loc,
			 "data: '%s' takes batches of %lld rows, "
			 "but the batch is %lld in %lld shard(s)",
			 tc->entry, (long long)fixed, (long long)batch,
			 (long long)tc->shards);
		return false;
	}
	return true;
}

bool drv_samples_bind(ir_ctx *ctx, const ir_module *m,
		      const drv_train_config *tc, const drv_samples *s,
		      bool is_valid, drv_options *o)
{
	const ir_setting *at = tc->data;
	const ir_func *f = ir_module_find_func(m, tc->entry);
	interp_tensor in[DRV_MAX_FIELDS];
	int64_t rows = 0;
	int32_t sym;
	if (!drv_check_inputs(ctx, f, "--train", false))
		return false;
	if (!f->n_inputs || !batch_axis(ctx, at, f, &sym, &rows) ||
	    !batch_rows(ctx, at, tc, s, is_valid, rows, &rows))
		return false;
	for (uint32_t i = 0; i < f->n_inputs; i++) {
		char nb[32];
		const char *name = drv_io_name(f->input_names, i, "in", nb,
					       sizeof nb);
		const drv_field *fd = find_field(s, name);
		if (!fd) {
			ir_error(ctx, at->loc,
				 "data: no samples for '%s', an "
				 "input of '%s'",
				 name, f->name);
			return false;
		}
		if (!input_tensor(ctx, at, f, i, fd, rows, &in[i]))
			return false;
	}
	int64_t *values = ir_alloc(ctx, (m->n_syms + 1) * sizeof *values);
	if (!values)
		return false;
	bool ok = interp_bind_syms(ctx, m, f, in, values);
	if (!ok) {
		/* The shapes said are a batch's: say what a sample is. */
		char sample[512] = "";
		size_t used = 0;
		for (uint32_t i = 0; i < s->n_fields && used < sizeof sample;
		     i++) {
			char dims[160];
			const drv_field *fd = &s->fields[i];
			drv_dims_format(fd->dims, fd->rank, dims, sizeof dims);
			int k = snprintf(sample + used, sizeof sample - used,
					 "%s%s %s%s", i ? ", " : "", fd->name,
					 drv_dtype_name(fd->dtype), dims);
			used += k > 0 ? (size_t)k : 0;
		}
		ir_note(ctx, at->loc,
			"the shapes are those of a batch of %lld samples of "
			"the data read above, a sample %s",
			(long long)rows, sample);
	}
	for (uint32_t i = 0; ok && i < f->n_inputs; i++) {
		const ir_type *ty = &f->g.nodes[f->inputs[i]].type;
		for (int d = 0; ok && d < ty->rank; d++)
			if (!ir_dim_is_static(ty->dims[d]) &&
			    !m->syms[ty->dims[d].sym].n_factors)
				ok = drv_options_bind(ctx, o, "data",
						      m->syms[ty->dims[d].sym].name,
						      values[ty->dims[d].sym]);
	}
	ir_free(ctx, values);
	return ok && (sym < 0 || drv_options_bind(ctx, o, "data",
						  m->syms[sym].name, rows));
}

/* ---- the batch source ------------------------------------------------------------- */

typedef struct samples_source {
	const drv_samples *s;
	uint64_t seed;
	size_t rows;    /* of a batch: shards * shard_rows */
	size_t *order;  /* (n) the samples of the epoch in order */
	uint64_t epoch; /* whose order it is; UINT64_MAX: none yet */
	char *block;    /* the batch's arrays, one after another */
	const drv_field *fields[DRV_MAX_FIELDS]; /* the entry's inputs' */
	char *inputs[DRV_MAX_FIELDS];
	size_t shard_bytes[DRV_MAX_FIELDS];
	uint32_t n_inputs;
} samples_source;

void drv_samples_shuffle(size_t n, uint64_t seed, uint64_t epoch, size_t *order)
{
	rt_rng_permutation(seed, SHUFFLE_STREAM + epoch, n, order);
}

/* Rows [0, rows) of the batch from samples order[first + r], wrapping
 * around to the order's start. */
static void gather(samples_source *ss, const size_t *order, size_t n,
		   size_t first)
{
	for (uint32_t k = 0; k < ss->n_inputs; k++) {
		const drv_field *f = ss->fields[k];
		for (size_t r = 0; r < ss->rows; r++)
			memcpy(ss->inputs[k] + r * f->row_bytes,
			       f->data + order[(first + r) % n] * f->row_bytes,
			       f->row_bytes);
	}
}

static bool samples_fill(void *state, uint64_t epoch, uint64_t i, drv_batch *b)
{
	samples_source *ss = state;
	if (ss->epoch != epoch) {
		drv_samples_shuffle(ss->s->n, ss->seed, epoch, ss->order);
		ss->epoch = epoch;
	}
	gather(ss, ss->order, ss->s->n, (size_t)i * ss->rows);
	for (uint32_t k = 0; k < ss->n_inputs; k++) {
		b->inputs[k] = ss->inputs[k];
		b->shard_bytes[k] = ss->shard_bytes[k];
	}
	size_t left = ss->s->n - (size_t)i * ss->rows;
	size_t real = left < ss->rows ? left : ss->rows;
	b->n_items = (double)real * ss->s->items_per_sample;
	b->loss_divisor = 1;
	return true;
}

static void samples_fini(void *state)
{
	samples_source *ss = state;
	if (!ss)
		return;
	free(ss->order);
	free(ss->block);
	free(ss);
}

/* Points the source's arrays at the fields of the inputs of f (an entry
 * compiled for batches of shard_rows rows: g's, or the loss entry's). */
static bool map_inputs(samples_source *ss, const attnrt_tensor_info *inputs,
		       uint32_t n_inputs, size_t shard_rows)
{
	size_t at = 0;
	ss->n_inputs = n_inputs;
	for (uint32_t k = 0; k < n_inputs; k++) {
		ss->fields[k] = find_field(ss->s, inputs[k].name);
		if (!ss->fields[k])
			return false;
		ss->shard_bytes[k] = ss->fields[k]->row_bytes * shard_rows;
		at += ss->fields[k]->row_bytes * ss->rows;
	}
	ss->block = malloc(at ? at : 1);
	ss->order = malloc((ss->s->n + 1) * sizeof *ss->order);
	if (!ss->block || !ss->order)
		return false;
	at = 0;
	for (uint32_t k = 0; k < n_inputs; k++) {
		ss->inputs[k] = ss->block + at;
		at += ss->fields[k]->row_bytes * ss->rows;
	}
	return true;
}

bool drv_samples_source_open(ir_ctx *ctx, const drv_samples *s, uint64_t seed,
			     const drv_grad *g, drv_batch_source *src)
{
	memset(src, 0, sizeof *src);
	samples_source *ss = calloc(1, sizeof *ss);
	size_t shard_rows = g->n_inputs ? (size_t)g->inputs[0].dims[0] : 0;
	if (ss)
		*ss = (samples_source){.s = s,
				       .seed = seed,
				       .epoch = UINT64_MAX,
				       .rows = shard_rows * g->n_shards};
	*src = (drv_batch_source){s->items_per_sample == 1 ? "samples"
							   : "tokens",
				  0, ss, samples_fill, samples_fini};
	if (!ss || !map_inputs(ss, g->inputs, g->n_inputs, shard_rows)) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	src->n_batches = (s->n + ss->rows - 1) / ss->rows;
	size_t extra = src->n_batches * ss->rows - s->n;
	if (extra)
		fprintf(stderr,
			"batches: %llu of %zu samples an epoch; the last is filled "
			"up with %zu samples seen earlier in the epoch\n",
			(unsigned long long)src->n_batches, ss->rows, extra);
	return true;
}

/* ---- the validation loss ---------------------------------------------------------- */

/* A compiled entry run on batches of samples, for the validation loss. */
typedef struct evaluator {
	ir_ctx *ctx;
	const ir_module *m;
	const drv_jit *j;
	const char *entry;
	attnrt_entry_fn fn;
	samples_source ss;
	void *scratch;
	float *out;
	size_t n_loss, rows;
	int32_t n_threads;
} evaluator;

/* "sample 3" or "samples 16 to 31": the validation samples of the batch
 * order[first ..] (wrapping), into buf. */
static void batch_samples(const evaluator *e, const size_t *order, size_t n,
			  size_t first, char *buf, size_t size)
{
	size_t a = order[first % n],
	       b = order[(first + (e->rows < n ? e->rows : n) - 1) % n];
	snprintf(buf, size, a == b ? "sample %zu" : "samples %zu to %zu", a, b);
}

/* The sum of the loss output over the batch of samples order[first ..]
 * (wrapping), or NAN after reporting: a run's error, or a loss that is
 * NaN (a value of the data that is not finite, most likely), with the
 * samples that give it. */
static double eval_batch(evaluator *e, const size_t *order, size_t n,
			 size_t first)
{
	gather(&e->ss, order, n, first);
	void *outputs[1] = {e->out};
	attnrt_run run = {.seed = 0,
			  .step = 0,
			  .is_training = 0,
			  .n_threads = e->n_threads};
	int rc = e->fn(&run, e->j->params, e->scratch,
		       (const void *const *)e->ss.inputs, outputs);
	const ir_func *f = ir_module_find_func(e->m, e->entry);
	char which[64];
	if (rc != ATTNRT_OK) {
		drv_report_run_error(e->ctx, e->j->p, f, rc);
		batch_samples(e, order, n, first, which, sizeof which);
		ir_note(e->ctx, (ir_loc){0},
			"in the validation loss, on validation %s (of %zu)",
			which, e->ss.s->n);
		return NAN;
	}
	double l = 0;
	for (size_t k = 0; k < e->n_loss; k++)
		l += e->out[k];
	if (isnan(l)) {
		batch_samples(e, order, n, first, which, sizeof which);
		ir_error(e->ctx, f ? f->loc : (ir_loc){0},
			 "'%s' gives a validation loss of nan on validation "
			 "%s (of %zu): is a value of the data not finite?",
			 e->entry, which, e->ss.s->n);
	}
	return l;
}

static bool eval_open(evaluator *e, const drv_samples *s)
{
	uint32_t n_in, n_out;
	const attnrt_tensor_info *in = cg_program_inputs(e->j->p, e->entry,
							 &n_in);
	const attnrt_tensor_info *outs = cg_program_outputs(e->j->p, e->entry,
							    &n_out);
	e->fn = cg_program_entry(e->j->p, e->entry);
	e->rows = n_in && in[0].rank ? (size_t)in[0].dims[0] : 0;
	e->ss = (samples_source){.s = s, .rows = e->rows};
	e->scratch = attnrt_alloc(NULL,
				  cg_program_scratch_bytes(e->j->p, e->entry));
	e->n_loss = 1;
	for (int d = 0; n_out && d < outs[0].rank; d++)
		e->n_loss *= (size_t)outs[0].dims[d];
	bool ok = e->fn && n_out && e->rows && outs[0].dtype == ATTNRT_F32 &&
		  e->scratch && (e->out = calloc(e->n_loss, sizeof *e->out)) &&
		  map_inputs(&e->ss, in, n_in, e->rows);
	if (!ok)
		ir_error(e->ctx, (ir_loc){0}, "validation: cannot run '%s'",
			 e->entry);
	for (size_t i = 0; ok && i < s->n; i++)
		e->ss.order[i] = i;
	return ok;
}

static void eval_close(evaluator *e)
{
	free(e->out);
	free(e->ss.order);
	free(e->ss.block);
	attnrt_free(NULL, e->scratch);
}

bool drv_samples_eval(ir_ctx *ctx, const ir_module *m, const drv_jit *j,
		      const char *entry, drv_loss_kind kind,
		      const drv_samples *s, int32_t n_threads, double *loss)
{
	evaluator e = {.ctx = ctx,
		       .m = m,
		       .j = j,
		       .entry = entry,
		       .n_threads = n_threads};
	bool ok = eval_open(&e, s);
	size_t B = e.rows, full = ok ? s->n / B * B : 0;
	double sum = 0, batches = 0; /* in units of a batch's loss */
	for (size_t first = 0; ok && first < full; first += B, batches += 1)
		ok = !isnan(sum += eval_batch(&e, e.ss.order, s->n, first));
	if (ok && kind == DRV_LOSS_OTHER && full < s->n) {
		/* the rest, filled up with the first samples, weighted */
		double w = (double)(s->n - full) / (double)B;
		double l = eval_batch(&e, e.ss.order, s->n, full);
		ok = !isnan(l);
		sum += w * l;
		batches += w;
	}
	for (size_t i = full; ok && kind != DRV_LOSS_OTHER && i < s->n; i++) {
		/* A batch of B copies of sample i: a mean's copies give its
		 * value v, a sum's B v; it is a 1/B share of a batch whose
		 * loss is then v / B (mean) or v (sum). */
		double l = eval_batch(&e, &i, 1, 0);
		ok = !isnan(l);
		sum += l / (double)B;
		batches += 1.0 / (double)B;
	}
	*loss = batches > 0 ? sum / batches : 0;
	eval_close(&e);
	return ok;
}
