/*
 * grad_fn.c - what training and --gradcheck share: the data a run reads
 * before it compiles, the compiled gradient function (<entry>_grad, added
 * by autodiff) with its outputs written straight into a gradient block
 * laid out like the params block, the sources of batches that feed it,
 * and copies of its parameters and inputs for the reference interpreter.
 *
 * A batch source is the one interface a data pipeline implements (fill
 * the inputs of batch i of an epoch). There are four: samples of the
 * loss entry's inputs (`data = tensors(...)` and `text(...)`,
 * samples.c); the translation pairs of `data = nmt(...)` (nmt.c); a loss
 * that takes no inputs, its data constants in the graph
 * (models/nw_param.g), where an epoch is one full-batch step; and a loss
 * with inputs and an `example` but no `data`, which trains on (and
 * --gradcheck checks at) its example, one batch an epoch. Any other
 * `data` setting is an error at its line.
 */
#include "driver.h"
#include "rowbound.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool drv_check_inputs(ir_ctx *ctx, const ir_func *f, const char *what,
		      bool count_outputs)
{
	if (f->n_inputs > DRV_MAX_INPUTS) {
		ir_error(ctx, f->loc,
			 "%s: '%s' takes %u inputs; %s feeds at most %d", what,
			 f->name, f->n_inputs, what, DRV_MAX_INPUTS);
		return false;
	}
	if (count_outputs && f->n_outputs > DRV_MAX_INPUTS) {
		ir_error(ctx, f->loc,
			 "%s: '%s' returns %u values; %s reads at most %d",
			 what, f->name, f->n_outputs, what, DRV_MAX_INPUTS);
		return false;
	}
	return true;
}

/* ---- data and batch sources ----------------------------------------------------------- */

bool drv_batch_source_check(ir_ctx *ctx, const ir_module *m,
			    const drv_train_config *tc)
{
	const ir_func *f = ir_module_find_func(m, tc->entry);
	if (f && !drv_check_inputs(ctx, f, "--train", false))
		return false;
	if (drv_nmt_is_source(tc->data))
		return drv_nmt_check(ctx, tc->data);
	if (drv_tensors_is_source(tc->data))
		return drv_tensors_check(ctx, tc->data);
	if (drv_text_is_source(tc->data))
		return drv_text_check(ctx, tc->data);
	if (tc->data) {
		const ir_value *v = &tc->data->value;
		ir_error(ctx, tc->data->loc,
			 "data = %s%s: this attnc has no such "
			 "data source; it trains on a safetensors file of "
			 "samples (data = tensors(file = \"PATH\")), a text "
			 "(data = text(steps = T)), "
			 "translation pairs (data = nmt(examples = N, steps = "
			 "T)) or a loss that takes no inputs, its data "
			 "constants in the graph",
			 v->kind == IR_VAL_NUM ? "a number" : v->str,
			 v->kind == IR_VAL_CALL ? "(...)" : "");
		return false;
	}
	if (f && f->n_inputs && !f->example) {
		ir_error(ctx, f->loc,
			 "'%s' takes %u input%s, but the train block "
			 "names no data to feed %s (data = ...)",
			 f->name, f->n_inputs, f->n_inputs == 1 ? "" : "s",
			 f->n_inputs == 1 ? "it" : "them");
		return false;
	}
	return true;
}

bool drv_data_open(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		   const drv_train_config *tc, drv_data *data)
{
	memset(data, 0, sizeof *data);
	data->o = *o;
	if (drv_tensors_is_source(tc->data))
		return drv_tensors_load(ctx, m, tc, o, &data->train,
					&data->valid) &&
		       drv_samples_bind(ctx, m, tc, data->train, false,
					&data->o) &&
		       (!data->valid || drv_samples_bind(ctx, m, tc, data->valid,
							 true, &data->o));
	if (drv_text_is_source(tc->data))
		return drv_text_load(ctx, m, o, tc->data, data) &&
		       drv_samples_bind(ctx, m, tc, data->train, false,
					&data->o) &&
		       (!data->valid || drv_samples_bind(ctx, m, tc, data->valid,
							 true, &data->o));
	if (!drv_nmt_is_source(tc->data))
		return true;
	return drv_nmt_load(ctx, tc->data, o, &data->nmt) &&
	       drv_nmt_bind(ctx, m, o, data->nmt, 0, &data->o);
}

void drv_data_bind_fallbacks(ir_module *m, const drv_data *data)
{
	for (uint32_t i = 0; i < data->o.n_syms; i++) {
		const drv_sym_value *v = &data->o.syms[i];
		int32_t s = ir_module_find_sym(m, v->name);
		if (strcmp(v->opt, "data") == 0 && s >= 0)
			m->syms[s].fallback = v->value;
	}
}

void drv_data_close(drv_data *data)
{
	rt_nmt_free(data->nmt);
	drv_samples_destroy(data->train);
	drv_samples_destroy(data->valid);
	rt_text_vocab_free(data->vocab);
	data->vocab = NULL;
	data->nmt = NULL;
	data->train = data->valid = NULL;
}

/* The graph source: no inputs; each batch counts the samples of the
 * model's training set (the length of `data`'s first output, else 1). */
static bool graph_fill(void *state, uint64_t epoch, uint64_t i, drv_batch *b)
{
	(void)epoch;
	(void)i;
	b->n_items = *(const double *)state;
	b->loss_divisor = 1;
	return true;
}

static double graph_samples(const drv_jit *j)
{
	uint32_t n;
	const attnrt_tensor_info *d = cg_program_outputs(j->p, "data", &n);
	return d && n && d[0].rank >= 1 ? (double)d[0].dims[0] : 1;
}

/* The example source: every batch is the loss entry's example. */
typedef struct example_source {
	const void *inputs[DRV_MAX_INPUTS];
	double n_items; /* the first input's rows */
} example_source;

static bool example_fill(void *state, uint64_t epoch, uint64_t i, drv_batch *b)
{
	const example_source *es = state;
	(void)epoch;
	(void)i;
	memcpy(b->inputs, es->inputs, sizeof b->inputs);
	b->n_items = es->n_items;
	b->loss_divisor = 1;
	return true;
}

/* Whether example input k has the shape the compiled gradient function
 * takes (a train block's batch may have bound B to another size). */
static bool example_fits(ir_ctx *ctx, const ir_func *f, const ir_const *c,
			 const attnrt_tensor_info *t, uint32_t k)
{
	bool ok = c->type.rank == t->rank;
	for (int d = 0; ok && d < t->rank; d++)
		ok = c->type.dims[d].coef == t->dims[d];
	if (!ok)
		ir_error(ctx, f->loc,
			 "'%s' trains on its example, but input '%s' "
			 "of the example has another shape than the compiled "
			 "function takes (does the train block's batch differ "
			 "from the example's?)",
			 f->name, f->input_names[k]);
	return ok;
}

static bool example_source_open(ir_ctx *ctx, const ir_module *m,
				const ir_func *f, const drv_grad *g,
				drv_batch_source *src)
{
	if (!drv_check_inputs(ctx, f, "--train", false))
		return false;
	if (f->n_inputs != g->n_inputs) {
		ir_error(ctx, f->loc,
			 "'%s': the gradient function takes %u "
			 "inputs, the example gives %u",
			 f->name, g->n_inputs, f->n_inputs);
		return false;
	}
	example_source *es = calloc(1, sizeof *es);
	if (!es) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	for (uint32_t k = 0; k < f->n_inputs; k++) {
		const ir_const *c = &m->consts[f->example[k]];
		if (!example_fits(ctx, f, c, &g->inputs[k], k)) {
			free(es);
			return false;
		}
		es->inputs[k] = c->data;
	}
	const ir_type *t0 = &m->consts[f->example[0]].type;
	es->n_items = t0->rank ? (double)t0->dims[0].coef : 1;
	*src = (drv_batch_source){"samples", 1, es, example_fill, free};
	return true;
}

bool drv_batch_source_open(ir_ctx *ctx, const ir_module *m,
			   const drv_train_config *tc, const drv_data *data,
			   const drv_jit *j, const drv_grad *g,
			   drv_batch_source *src)
{
	memset(src, 0, sizeof *src);
	if (!drv_batch_source_check(ctx, m, tc))
		return false;
	if (data->nmt)
		return drv_nmt_source_open(ctx, tc->data, data->nmt,
					   data->o.seed,
					   g->n_shards > 1 ? (size_t)tc->batch
							   : 0,
					   g, src);
	if (data->train)
		return drv_samples_source_open(ctx, data->train, data->o.seed,
					       g, src);
	const ir_func *f = ir_module_find_func(m, tc->entry);
	if (f && f->n_inputs && f->example)
		return example_source_open(ctx, m, f, g, src);
	double *samples = malloc(sizeof *samples);
	if (!samples) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	*samples = graph_samples(j);
	*src = (drv_batch_source){"samples", 1, samples, graph_fill, free};
	return true;
}

/* ---- the gradient function -------------------------------------------------------------- */

static bool same_dims(const attnrt_tensor_info *t, const attnrt_param_info *p)
{
	if (t->rank != p->rank || t->dtype != ATTNRT_F32)
		return false;
	for (int d = 0; d < t->rank; d++)
		if (t->dims[d] != p->dims[d])
			return false;
	return true;
}

/* Points output k ("grad.<param>") of every shard at its parameter's
 * place in the shard's gradient block. */
static bool map_grad_output(ir_ctx *ctx, const ir_module *m, drv_grad *g,
			    const attnrt_tensor_info *outs, uint32_t k)
{
	const attnrt_tensor_info *out = &outs[k];
	int32_t p = strncmp(out->name, "grad.", 5) == 0
			    ? ir_module_find_param(m, out->name + 5)
			    : -1;
	if (p < 0 || (uint32_t)p >= g->n_params ||
	    !same_dims(out, &g->table[p])) {
		ir_error(ctx, g->f->loc,
			 "'%s': output '%s' is not the gradient of "
			 "a parameter",
			 g->f->name, out->name);
		return false;
	}
	for (uint32_t s = 0; s < g->n_local; s++)
		g->shards[s].outputs[k] = (char *)g->shards[s].grads +
					  g->table[p].offset;
	return true;
}

void *drv_grad_block(const drv_grad *g, uint32_t s)
{
	if (g->all_grads)
		return g->all_grads + (size_t)s * g->grad_bytes;
	return g->shards[s].grads;
}

float *drv_grad_loss(const drv_grad *g, uint32_t s)
{
	if (g->all_losses)
		return g->all_losses + (size_t)s * g->n_loss;
	return g->shards[s].loss;
}

/* Under MPI, the blocks of every shard's gradients and losses, in shard
 * order; this rank's shards write their slices. */
static bool all_alloc(drv_grad *g, size_t grad_bytes)
{
	g->grad_bytes = grad_bytes;
	if (g->n_ranks <= 1)
		return true;
	g->all_grads = attnrt_alloc(NULL, grad_bytes * g->n_shards);
	g->all_losses = attnrt_alloc(NULL,
				     g->n_loss * g->n_shards * sizeof(float));
	if (!g->all_grads || !g->all_losses)
		return false;
	memset(g->all_grads, 0, grad_bytes * g->n_shards);
	return true;
}

/* A shard's memory; its gradient block zeroed, so that adding blocks
 * adds zeros where no output writes. */
static bool shard_alloc(drv_grad *g, drv_shard *sh, size_t grad_bytes,
			size_t scratch_bytes)
{
	sh->grads = g->all_grads ? NULL : attnrt_alloc(NULL, grad_bytes);
	sh->scratch = attnrt_alloc(NULL, scratch_bytes);
	sh->loss = g->all_grads
			   ? NULL
			   : attnrt_alloc(NULL, g->n_loss * sizeof *sh->loss);
	sh->outputs = calloc(g->n_outputs, sizeof *sh->outputs);
	if ((!g->all_grads && (!sh->grads || !sh->loss)) || !sh->scratch ||
	    !sh->outputs)
		return false;
	if (sh->grads)
		memset(sh->grads, 0, grad_bytes);
	return true;
}

/* Shard k of this rank: shard first_shard + k of the batch. */
static void shard_place(drv_grad *g, uint32_t k)
{
	drv_shard *sh = &g->shards[k];
	if (g->all_grads) {
		sh->grads = drv_grad_block(g, g->first_shard + k);
		sh->loss = drv_grad_loss(g, g->first_shard + k);
	}
	sh->outputs[0] = sh->loss;
}

static bool loss_is_f32(ir_ctx *ctx, drv_grad *g, const attnrt_tensor_info *t)
{
	if (t->dtype != ATTNRT_F32) {
		ir_error(ctx, g->f->loc, "'%s': the loss is not f32",
			 g->f->name);
		return false;
	}
	g->n_loss = 1;
	for (int d = 0; d < t->rank; d++)
		g->n_loss *= (size_t)t->dims[d];
	return true;
}

/* What a step's bound check reads (pass_rowbound_leaf). */
typedef struct row_leaf_cx {
	const drv_grad *g;
	const drv_jit *j;
	const drv_batch *b;
} row_leaf_cx;

/* Lanes of the scans below: independent maxima and sums that the
 * compiler keeps in vector registers. */
#define SCAN_LANES 16

/* The largest |x| of n floats at x: +inf or NaN if one is not finite.
 * On the bits with the sign cleared, whose order as integers is that of
 * |x|, an infinity's above every finite value and a NaN's above it
 * (integer maxima vectorize where float ones, NaN-aware, do not). */
static double scan_max(const float *x, int64_t n)
{
	int32_t top[SCAN_LANES] = {0};
	int64_t i = 0;
	for (; i + SCAN_LANES <= n; i += SCAN_LANES)
		for (int l = 0; l < SCAN_LANES; l++) {
			int32_t v;
			memcpy(&v, &x[i + l], sizeof v);
			v &= 0x7fffffff;
			top[l] = v > top[l] ? v : top[l];
		}
	for (; i < n; i++) {
		int32_t v;
		memcpy(&v, &x[i], sizeof v);
		v &= 0x7fffffff;
		top[0] = v > top[0] ? v : top[0];
	}
	int32_t m = 0;
	for (int l = 0; l < SCAN_LANES; l++)
		m = top[l] > m ? top[l] : m;
	float f;
	memcpy(&f, &m, sizeof f);
	return (double)f; /* the NaN or inf itself when there is one */
}

/* The sum of |x| of n floats at x (rounded up for float's rounding:
 * the caller's bounds have room for far more); NaN or inf if one is not
 * finite. */
static double scan_sum(const float *x, int64_t n)
{
	float sum[SCAN_LANES] = {0};
	int64_t i = 0;
	for (; i + SCAN_LANES <= n; i += SCAN_LANES)
		for (int l = 0; l < SCAN_LANES; l++)
			sum[l] += fabsf(x[i + l]);
	for (; i < n; i++)
		sum[0] += fabsf(x[i]);
	double s = 0;
	for (int l = 0; l < SCAN_LANES; l++)
		s += sum[l];
	return s * (1 + 1e-6);
}

/* The largest sum of |x| down a column of the r×k matrix at x (by_row:
 * along a row); NaN or inf if one is not finite. */
static double scan_sums(const float *x, int64_t r, int64_t k, bool by_row)
{
	double best = 0;
	if (by_row) {
		for (int64_t i = 0; i < r; i++) {
			double s = scan_sum(x + i * k, k);
			if (!isfinite(s))
				return s;
			best = s > best ? s : best;
		}
		return best;
	}
	float *cs = calloc((size_t)k, sizeof *cs);
	if (!cs)
		return INFINITY; /* unknown: no skip */
	for (int64_t i = 0; i < r; i++)
		for (int64_t j = 0; j < k; j++)
			cs[j] += fabsf(x[i * k + j]);
	double all = 0;
	for (int64_t j = 0; j < k; j++) {
		all += cs[j];
		best = cs[j] > best ? cs[j] : best;
	}
	free(cs);
	return !isfinite(all) ? all : best * (1 + 1e-6);
}

static double row_leaf(void *ud, ir_id node, pass_rowbound_stat stat)
{
	const row_leaf_cx *c = ud;
	const ir_node *nd = &c->g->f->g.nodes[node];
	if (nd->op == IR_OP_PARAM) {
		const attnrt_param_info *pi = &c->g->table[nd->attr.param_index];
		const float *x = (const float *)((const char *)c->j->params +
						 pi->offset);
		int64_t n = 1;
		for (int d = 0; d < pi->rank; d++)
			n *= pi->dims[d];
		if (stat == PASS_ROWBOUND_MAX || pi->rank != 2)
			return stat == PASS_ROWBOUND_MAX ? scan_max(x, n)
							 : INFINITY;
		return scan_sums(x, pi->dims[0], pi->dims[1],
				 stat == PASS_ROWBOUND_ROW_SUM);
	}
	/* An input: every shard of the batch. */
	uint32_t i = nd->attr.input_index;
	const attnrt_tensor_info *t = &c->g->inputs[i];
	int64_t n = 1;
	for (int d = 0; d < t->rank; d++)
		n *= t->dims[d];
	if (c->b->shard_bytes[i])
		n = (int64_t)(c->b->shard_bytes[i] / 4) * c->g->n_shards;
	if (t->dtype == ATTNRT_F32)
		return stat == PASS_ROWBOUND_MAX ? scan_max(c->b->inputs[i], n)
						 : INFINITY;
	const int32_t *v = c->b->inputs[i];
	double m = 0;
	for (int64_t e = 0; e < n; e++) {
		double a = fabs((double)v[e]);
		m = a > m ? a : m;
	}
	return stat == PASS_ROWBOUND_MAX ? m : INFINITY;
}

/* Before a step: whether its forward may leave out the rows no output
 * reads (cg_program_set_row_skip), by the bounds of its values from the
 * parameters and the whole batch's inputs; the step turns it off again
 * when its shards are done. */
static void row_skip_decide(drv_grad *g, const drv_jit *j, const drv_batch *b)
{
	if (!g->rb)
		return;
	row_leaf_cx c = {g, j, b};
	bool on = pass_rowbound_is_safe(
		pass_rowbound_eval(g->rb, g->f, j->syms, row_leaf, &c));
	cg_program_set_row_skip(j->p, on);
}

bool drv_grad_open(ir_ctx *ctx, const ir_module *m, const drv_train_config *tc,
		   const drv_jit *j, uint32_t n_shards, drv_grad *g)
{
	char name[256];
	memset(g, 0, sizeof *g);
	g->f = ir_module_find_func(m, drv_grad_name(tc, name, sizeof name));
	g->fn = cg_program_entry(j->p, name);
	const attnrt_tensor_info *outs = cg_program_outputs(j->p, name,
							    &g->n_outputs);
	g->inputs = cg_program_inputs(j->p, name, &g->n_inputs);
	g->table = cg_program_params(j->p, &g->n_params);
	if (g->n_outputs > DRV_MAX_GRAD_OUTPUTS ||
	    g->n_inputs > DRV_MAX_INPUTS || n_shards > DRV_MAX_SHARDS) {
		ir_error(ctx, (ir_loc){0},
			 "'%s' has %u inputs and %u outputs "
			 "(%u shards); training takes at most %d, %d (and %d)",
			 name, g->n_inputs, g->n_outputs, n_shards,
			 DRV_MAX_INPUTS, DRV_MAX_GRAD_OUTPUTS, DRV_MAX_SHARDS);
		return false;
	}
	g->n_shards = n_shards < 1 ? 1 : n_shards;
	g->n_ranks = tc->n_ranks > 1 ? tc->n_ranks : 1;
	g->n_local = g->n_shards / (uint32_t)g->n_ranks; /* what close frees */
	g->first_shard = (uint32_t)tc->rank * g->n_local;
	if (!g->f || !g->fn || g->n_outputs < 1) {
		ir_error(ctx, (ir_loc){0},
			 "model %s has no compiled gradient "
			 "function '%s'",
			 m->name, name);
		return false;
	}
	if (!loss_is_f32(ctx, g, &outs[0]))
		return false;
	size_t grad_bytes = cg_program_params_bytes(j->p);
	size_t scratch_bytes = cg_program_scratch_bytes(j->p, name);
	bool ok = all_alloc(g, grad_bytes);
	for (uint32_t s = 0; ok && s < g->n_local; s++) {
		ok = shard_alloc(g, &g->shards[s], grad_bytes, scratch_bytes);
		if (ok)
			shard_place(g, s);
	}
	if (!ok) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	g->grads = drv_grad_block(g, 0);
	g->loss = drv_grad_loss(g, 0);
	if (cg_program_set_row_skip(j->p, false)) {
		g->rb = ir_alloc(ctx, sizeof *g->rb);
		g->rb_ctx = ctx;
		if (!g->rb || !pass_rowbound_init(ctx, m, g->f, g->rb)) {
			ir_error(ctx, (ir_loc){0}, "out of memory");
			return false;
		}
	}
	for (uint32_t k = 1; k < g->n_outputs; k++)
		if (!map_grad_output(ctx, m, g, outs, k))
			return false;
	return true;
}

void drv_grad_close(drv_grad *g)
{
	if (g->rb) {
		pass_rowbound_fini(g->rb_ctx, g->rb);
		ir_free(g->rb_ctx, g->rb);
	}
	for (uint32_t s = 0; s < g->n_local; s++) {
		drv_shard *sh = &g->shards[s];
		if (!g->all_grads) {
			attnrt_free(NULL, sh->grads);
			attnrt_free(NULL, sh->loss);
		}
		attnrt_free(NULL, sh->scratch);
		free(sh->outputs);
	}
	attnrt_free(NULL, g->all_grads);
	attnrt_free(NULL, g->all_losses);
	memset(g, 0, sizeof *g);
}

void drv_grad_shard(const drv_grad *g, const drv_batch *b, const attnrt_run *run,
		    uint32_t s, drv_batch *out, attnrt_run *run_out)
{
	*out = *b;
	for (uint32_t i = 0; i < g->n_inputs; i++)
		out->inputs[i] = (const char *)b->inputs[i] +
				 s * b->shard_bytes[i];
	out->n_live = 1;
	*run_out = *run;
	run_out->step = run->step * g->n_shards + s;
}

/* The shards of one run, dealt round-robin to a team. */
typedef struct shard_run {
	const drv_jit *j;
	drv_grad *g;
	const drv_batch *b;
	const attnrt_run *run;
	uint32_t n_run;    /* this rank's live shards */
	int32_t n_threads; /* of each shard's call */
	int rc[DRV_MAX_SHARDS];
	double busy[DRV_MAX_SHARDS]; /* by thread: seconds in its shards */
} shard_run;

/* This rank's live shards, dealt round-robin to the team. */
static void run_shards(void *data, int tid, int n)
{
	shard_run *r = data;
	const drv_grad *g = r->g;
	double t0 = drv_now_seconds();
	for (uint32_t k = (uint32_t)tid; k < r->n_run; k += (uint32_t)n) {
		uint32_t s = g->first_shard + k;
		drv_batch sb;
		attnrt_run run;
		drv_grad_shard(g, r->b, r->run, s, &sb, &run);
		run.n_threads = r->n_threads;
		const drv_shard *sh = &g->shards[k];
		r->rc[k] = g->fn(&run, r->j->params, sh->scratch, sb.inputs,
				 sh->outputs);
	}
	r->busy[tid] = drv_now_seconds() - t0;
}

uint32_t drv_grad_live(const drv_grad *g, const drv_batch *b)
{
	return b->n_live && b->n_live < g->n_shards ? b->n_live : g->n_shards;
}

/* Under MPI: every rank's shards' gradients and losses to every rank. */
static bool gather(ir_ctx *ctx, const drv_grad *g)
{
	if (g->n_ranks <= 1)
		return true;
	if (drv_dist_allgather(g->n_ranks, g->all_grads,
			       g->grad_bytes * g->n_local) &&
	    drv_dist_allgather(g->n_ranks, g->all_losses,
			       g->n_loss * g->n_local * sizeof(float)))
		return true;
	ir_error(ctx, (ir_loc){0},
		 "MPI: gathering the shards' gradients failed");
	return false;
}

bool drv_grad_run(ir_ctx *ctx, const drv_jit *j, drv_grad *g,
		  const drv_batch *b, const attnrt_run *run, double *loss)
{
	uint32_t n_live = drv_grad_live(g, b);
	uint32_t n_run = n_live > g->first_shard ? n_live - g->first_shard : 0;
	if (n_run > g->n_local)
		n_run = g->n_local;
	int32_t threads = run->n_threads > 0 ? run->n_threads : cg_threads_get();
	int team = n_run > 1 && threads > 1
			   ? (int)(threads < (int32_t)n_run ? threads
							    : (int32_t)n_run)
			   : 1;
	shard_run r = {.j = j,
		       .g = g,
		       .b = b,
		       .run = run,
		       .n_run = n_run,
		       .n_threads = team > 1 ? 1 : run->n_threads};
	row_skip_decide(g, j, b);
	double t0 = drv_now_seconds();
	cg_threads_each(team, run_shards, &r);
	if (g->rb) /* the other entry points compute every row */
		cg_program_set_row_skip(j->p, false);
	if (team > 1) { /* what the team's threads did not spend in shards */
		double wall = drv_now_seconds() - t0;
		g->team_calls++;
		for (int t = 0; t < team; t++)
			g->team_wait_seconds += wall - r.busy[t];
	}
	bool ok = true;
	for (uint32_t k = 0; k < n_run && ok; k++)
		if (r.rc[k] != ATTNRT_OK) {
			drv_report_run_error(ctx, j->p, g->f, r.rc[k]);
			ok = false;
		}
	if (!ok || !gather(ctx, g))
		return false;
	*loss = 0;
	for (uint32_t s = 0; s < n_live; s++)
		for (size_t i = 0; i < g->n_loss; i++)
			*loss += drv_grad_loss(g, s)[i];
	return true;
}

/* ---- for the interpreter ------------------------------------------------------------------ */

bool drv_params_tensors(ir_ctx *ctx, const ir_module *m, const drv_jit *j,
			bool is_f64, interp_tensor *params)
{
	uint32_t n;
	const attnrt_param_info *table = cg_program_params(j->p, &n);
	memset(params, 0, m->n_params * sizeof *params);
	for (uint32_t i = 0; i < n && i < m->n_params; i++) {
		const attnrt_param_info *p = &table[i];
		if (!interp_tensor_alloc(ctx, &params[i],
					 is_f64 ? IR_F64 : IR_F32, p->rank,
					 p->dims)) {
			for (uint32_t k = 0; k <= i; k++)
				interp_tensor_fini(ctx, &params[k]);
			ir_error(ctx, (ir_loc){0}, "out of memory");
			return false;
		}
		const float *v = (const float *)((const char *)j->params +
						 p->offset);
		int64_t count = interp_tensor_numel(&params[i]);
		for (int64_t k = 0; k < count; k++) {
			if (is_f64)
				((double *)params[i].data)[k] = v[k];
			else
				((float *)params[i].data)[k] = v[k];
		}
	}
	return true;
}

void drv_batch_tensors(const drv_grad *g, const drv_batch *b, interp_tensor *in)
{
	for (uint32_t i = 0; i < g->n_inputs; i++) {
		memset(&in[i], 0, sizeof in[i]);
		in[i].dtype = g->inputs[i].dtype == ATTNRT_I32 ? IR_I32 : IR_F32;
		in[i].rank = g->inputs[i].rank;
		memcpy(in[i].dims, g->inputs[i].dims, sizeof g->inputs[i].dims);
		in[i].data = (void *)(uintptr_t)b->inputs[i];
	}
}
