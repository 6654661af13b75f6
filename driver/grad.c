/*
 * grad.c - what training and --gradcheck share: the data a run reads
 * before it compiles, the compiled gradient function (<entry>_grad, added
 * by autodiff) with its outputs written straight into a gradient block
 * laid out like the params block, the sources of batches that feed it,
 * and copies of its parameters and inputs for the reference interpreter.
 *
 * A batch source is the one interface a data pipeline implements (fill
 * the inputs of batch i of an epoch). There are two: the translation
 * pairs of `data = nmt(...)` (nmt.c), and a loss that takes no inputs,
 * its data constants in the graph (models/nw_param.g), where an epoch is
 * one full-batch step. Any other `data` setting is an error at its line.
 */
#include "driver.h"

#include <stdlib.h>
#include <string.h>

/* ---- data and batch sources ----------------------------------------------------------- */

bool drv_batch_source_check(ir_ctx *ctx, const ir_module *m,
			    const drv_train_config *tc)
{
	const ir_func *f = ir_module_find_func(m, tc->entry);
	if (drv_nmt_is_source(tc->data))
		return drv_nmt_check(ctx, tc->data);
	if (tc->data) {
		const ir_value *v = &tc->data->value;
		ir_error(ctx, tc->data->loc, "data = %s%s: this attnc has no such "
			 "data source; it trains on translation pairs (data = "
			 "nmt(examples = N, steps = T)) or a loss that takes no "
			 "inputs, its data constants in the graph",
			 v->kind == IR_VAL_NUM ? "a number" : v->str,
			 v->kind == IR_VAL_CALL ? "(...)" : "");
		return false;
	}
	if (f && f->n_inputs) {
		ir_error(ctx, f->loc, "'%s' takes %u input%s, but the train block "
			 "names no data to feed %s (data = ...)", f->name,
			 f->n_inputs, f->n_inputs == 1 ? "" : "s",
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
	if (!drv_nmt_is_source(tc->data))
		return true;
	return drv_nmt_load(ctx, tc->data, o, &data->nmt) &&
	       drv_nmt_bind(ctx, m, o, data->nmt, 0, &data->o);
}

void drv_data_close(drv_data *data)
{
	rt_nmt_free(data->nmt);
	data->nmt = NULL;
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

bool drv_batch_source_open(ir_ctx *ctx, const ir_module *m,
			   const drv_train_config *tc, const drv_data *data,
			   const drv_jit *j, const drv_grad *g,
			   drv_batch_source *src)
{
	memset(src, 0, sizeof *src);
	if (!drv_batch_source_check(ctx, m, tc))
		return false;
	if (data->nmt)
		return drv_nmt_source_open(ctx, tc->data, data->nmt, data->o.seed,
					   g, src);
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

/* Points output k ("grad.<param>") at its parameter's place in the
 * gradient block. */
static bool map_grad_output(ir_ctx *ctx, const ir_module *m, const drv_jit *j,
			    drv_grad *g, const attnrt_tensor_info *outs,
			    uint32_t k)
{
	const attnrt_tensor_info *out = &outs[k];
	uint32_t n;
	const attnrt_param_info *table = cg_program_params(j->p, &n);
	int32_t p = strncmp(out->name, "grad.", 5) == 0
			    ? ir_module_find_param(m, out->name + 5)
			    : -1;
	if (p < 0 || (uint32_t)p >= n || !same_dims(out, &table[p])) {
		ir_error(ctx, g->f->loc, "'%s': output '%s' is not the gradient of "
			 "a parameter", g->f->name, out->name);
		return false;
	}
	g->outputs[k] = (char *)g->grads + table[p].offset;
	return true;
}

static bool alloc_loss(ir_ctx *ctx, drv_grad *g, const attnrt_tensor_info *t)
{
	if (t->dtype != ATTNRT_F32) {
		ir_error(ctx, g->f->loc, "'%s': the loss is not f32", g->f->name);
		return false;
	}
	g->n_loss = 1;
	for (int d = 0; d < t->rank; d++)
		g->n_loss *= (size_t)t->dims[d];
	g->loss = attnrt_alloc(NULL, g->n_loss * sizeof *g->loss);
	g->outputs[0] = g->loss;
	return g->loss != NULL;
}

bool drv_grad_open(ir_ctx *ctx, const ir_module *m,
		   const drv_train_config *tc, const drv_jit *j, drv_grad *g)
{
	char name[256];
	uint32_t n_out;
	memset(g, 0, sizeof *g);
	g->f = ir_module_find_func(m, drv_grad_name(tc, name, sizeof name));
	g->fn = cg_program_entry(j->p, name);
	const attnrt_tensor_info *outs = cg_program_outputs(j->p, name, &n_out);
	g->inputs = cg_program_inputs(j->p, name, &g->n_inputs);
	if (n_out > DRV_MAX_GRAD_OUTPUTS || g->n_inputs > 64) {
		ir_error(ctx, (ir_loc){0}, "'%s' has %u inputs and %u outputs; "
			 "training takes at most 64 and %d", name, g->n_inputs,
			 n_out, DRV_MAX_GRAD_OUTPUTS);
		return false;
	}
	if (!g->f || !g->fn || n_out < 1) {
		ir_error(ctx, (ir_loc){0}, "model %s has no compiled gradient "
			 "function '%s'", m->name, name);
		return false;
	}
	g->grads = attnrt_alloc(NULL, cg_program_params_bytes(j->p));
	g->scratch = attnrt_alloc(NULL, cg_program_scratch_bytes(j->p, name));
	if (!g->grads || !g->scratch || !alloc_loss(ctx, g, &outs[0])) {
		if (!ctx->n_errors)
			ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	for (uint32_t k = 1; k < n_out; k++)
		if (!map_grad_output(ctx, m, j, g, outs, k))
			return false;
	return true;
}

void drv_grad_close(drv_grad *g)
{
	attnrt_free(NULL, g->grads);
	attnrt_free(NULL, g->scratch);
	attnrt_free(NULL, g->loss);
	memset(g, 0, sizeof *g);
}

bool drv_grad_run(ir_ctx *ctx, const drv_jit *j, drv_grad *g,
		  const drv_batch *b, const attnrt_run *run, double *loss)
{
	int rc = g->fn(run, j->params, g->scratch, b->inputs, g->outputs);
	if (rc != ATTNRT_OK) {
		drv_report_run_error(ctx, g->f, rc);
		return false;
	}
	*loss = 0;
	for (size_t i = 0; i < g->n_loss; i++)
		*loss += g->loss[i];
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
		if (!interp_tensor_alloc(ctx, &params[i], is_f64 ? IR_F64 : IR_F32,
					 p->rank, p->dims)) {
			for (uint32_t k = 0; k <= i; k++)
				interp_tensor_fini(ctx, &params[k]);
			ir_error(ctx, (ir_loc){0}, "out of memory");
			return false;
		}
		const float *v = (const float *)((const char *)j->params + p->offset);
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

void drv_batch_tensors(const drv_grad *g, const drv_batch *b,
		       interp_tensor *in)
{
	for (uint32_t i = 0; i < g->n_inputs; i++) {
		memset(&in[i], 0, sizeof in[i]);
		in[i].dtype = g->inputs[i].dtype == ATTNRT_I32 ? IR_I32 : IR_F32;
		in[i].rank = g->inputs[i].rank;
		memcpy(in[i].dims, g->inputs[i].dims, sizeof g->inputs[i].dims);
		in[i].data = (void *)(uintptr_t)b->inputs[i];
	}
}
