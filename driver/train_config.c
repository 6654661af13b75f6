/*
 * train_config.c - the train block of a model, read and checked before
 * anything is compiled: which exported function is the loss, the
 * optimizer, the epochs, clipping and the data, with the command line's
 * overrides (--epochs, --lr). Every mistake is reported at its setting's
 * line. Then the gradient function is added by autodiff, before the pass
 * pipeline, so the passes optimize it like any other function.
 */
#include "driver.h"

#include "passes.h"

#include <math.h>
#include <string.h>

/* Sources whose data are samples (samples.c). */
static bool is_samples(const ir_setting *data)
{
	return drv_tensors_is_source(data) || drv_text_is_source(data);
}

static const char *const train_keys[] = {"entry",     "data", "batch",
					 "optimizer", "clip", "epochs",
					 "shards"};
#define N_TRAIN_KEYS (sizeof train_keys / sizeof *train_keys)

/* Every setting must be one the driver reads: a typo is an error. */
static void unknown_key(ir_ctx *ctx, const ir_setting *s)
{
	ir_suggest sg;
	ir_suggest_init(&sg, s->key);
	for (size_t k = 0; k < N_TRAIN_KEYS; k++)
		ir_suggest_offer(&sg, train_keys[k]);
	if (sg.best)
		ir_error(ctx, s->loc,
			 "unknown train setting '%s'; did you mean "
			 "'%s'?",
			 s->key, sg.best);
	else
		ir_error(ctx, s->loc,
			 "unknown train setting '%s' (entry, data, "
			 "batch, optimizer, clip, epochs, shards)",
			 s->key);
}

static bool check_keys(ir_ctx *ctx, const ir_module *m)
{
	bool ok = true;
	for (uint32_t i = 0; i < m->n_train; i++) {
		bool is_known = false;
		for (size_t k = 0; k < N_TRAIN_KEYS; k++)
			is_known |= strcmp(m->train[i].key, train_keys[k]) == 0;
		if (!is_known) {
			unknown_key(ctx, &m->train[i]);
			ok = false;
		}
	}
	return ok;
}

/* A number setting with lo <= value (lo < value if is_open) and, if
 * is_int, an integer below 2^31. */
static bool read_number(ir_ctx *ctx, const ir_setting *s, double lo,
			bool is_open, bool is_int, double hi, double *out)
{
	const ir_value *v = &s->value;
	bool ok = v->kind == IR_VAL_NUM && isfinite(v->num) &&
		  (is_open ? v->num > lo : v->num >= lo) && v->num < hi &&
		  (!is_int || v->num == floor(v->num));
	if (ok) {
		*out = v->num;
		return true;
	}
	if (is_int && v->kind == IR_VAL_NUM && v->num >= hi &&
	    v->num == floor(v->num)) {
		ir_error(ctx, s->loc, "%s = %g: at most %g", s->key, v->num,
			 hi - 1);
		return false;
	}
	const char *what = is_int    ? "a positive integer"
			   : hi <= 1 ? "a number in [0, 1)"
			   : is_open ? "a positive number"
				     : "a number >= 0";
	if (v->kind == IR_VAL_NUM)
		ir_error(ctx, s->loc, "%s = %g: expected %s", s->key, v->num,
			 what);
	else
		ir_error(ctx, s->loc, "%s = %s: expected %s", s->key, v->str,
			 what);
	return false;
}

/* One keyword argument of sgd(...) or adam(...). */
static bool read_optim_arg(ir_ctx *ctx, const char *name, const ir_setting *a,
			   attnrt_optim_config *c)
{
	bool is_adam = c->kind == ATTNRT_OPTIM_ADAM;
	if (strcmp(a->key, "lr") == 0)
		return read_number(ctx, a, 0, true, false, INFINITY, &c->lr);
	if (is_adam && strcmp(a->key, "beta1") == 0)
		return read_number(ctx, a, 0, false, false, 1, &c->beta1);
	if (is_adam && strcmp(a->key, "beta2") == 0)
		return read_number(ctx, a, 0, false, false, 1, &c->beta2);
	if (is_adam && strcmp(a->key, "eps") == 0)
		return read_number(ctx, a, 0, false, false, INFINITY, &c->eps);
	ir_error(ctx, a->loc, "%s has no setting '%s' (%s)", name, a->key,
		 is_adam ? "lr, beta1, beta2, eps" : "lr");
	return false;
}

/* optimizer = sgd(lr = X) | adam(lr = X, beta1, beta2, eps), or a bare
 * name. Adam's defaults are PyTorch's (lr 0.001); SGD needs lr. */
static bool read_optimizer(ir_ctx *ctx, const ir_setting *s,
			   const drv_options *o, attnrt_optim_config *c)
{
	const ir_value *v = &s->value;
	const char *name = v->kind == IR_VAL_NUM ? "a number" : v->str;
	if (v->kind != IR_VAL_NUM && strcmp(name, "sgd") == 0) {
		*c = attnrt_optim_defaults(ATTNRT_OPTIM_SGD, 0);
	} else if (v->kind != IR_VAL_NUM && strcmp(name, "adam") == 0) {
		*c = attnrt_optim_defaults(ATTNRT_OPTIM_ADAM, 0.001);
	} else {
		ir_error(ctx, s->loc,
			 "optimizer = %s: unknown optimizer (sgd or "
			 "adam)",
			 name);
		return false;
	}
	for (uint32_t i = 0; v->kind == IR_VAL_CALL && i < v->n_args; i++)
		if (!read_optim_arg(ctx, name, &v->args[i], c))
			return false;
	if (o->lr > 0)
		c->lr = o->lr;
	if (c->lr > 0)
		return true;
	ir_error(ctx, s->loc,
		 "optimizer = sgd needs a learning rate: "
		 "sgd(lr = 0.1), or --lr");
	return false;
}

/* entry = NAME: an exported function of the module ("loss" by default). */
static bool read_entry(ir_ctx *ctx, const ir_module *m, drv_train_config *tc)
{
	const ir_setting *s = ir_module_find_setting(m, "entry");
	tc->entry = s && s->value.kind != IR_VAL_NUM ? s->value.str : "loss";
	const ir_func *f = ir_module_find_func(m, tc->entry);
	if (f && f->is_export)
		return true;
	if (s && s->value.kind == IR_VAL_NUM)
		ir_error(ctx, s->loc,
			 "entry = %g: expected the name of an exported "
			 "function",
			 s->value.num);
	else if (s)
		ir_error(ctx, s->loc,
			 "entry = %s: model %s exports no function "
			 "'%s'",
			 tc->entry, m->name, tc->entry);
	else
		ir_error(ctx, (ir_loc){0},
			 "model %s exports no function 'loss' "
			 "and its train block names no entry",
			 m->name);
	return false;
}

/* Whether node id of f is a mean over every axis of its operand, or a
 * sum: how the losses of a batch's shards make the batch's. */
static bool is_reduce_all(const ir_func *f, ir_id id, ir_op op)
{
	const ir_node *n = &f->g.nodes[id];
	if (n->op != op || n->n_args != 1)
		return false;
	const ir_node *x = &f->g.nodes[ir_arg(&f->g, id, 0)];
	uint32_t all = x->type.rank ? (1u << x->type.rank) - 1 : 0;
	return (n->attr.reduce.axes & all) == all;
}

/* How the loss entry's value adds over its rows: a mean over every axis
 * (or mse_loss), a sum over every axis, or neither. */
static drv_loss_kind loss_kind(const ir_module *m, const char *entry)
{
	const ir_func *f = ir_module_find_func(m, entry);
	ir_id out = f && f->n_outputs ? f->outputs[0] : IR_NONE;
	if (out == IR_NONE)
		return DRV_LOSS_OTHER;
	if (is_reduce_all(f, out, IR_OP_MEAN) ||
	    f->g.nodes[out].op == IR_OP_MSE_LOSS)
		return DRV_LOSS_MEAN;
	return is_reduce_all(f, out, IR_OP_SUM) ? DRV_LOSS_SUM : DRV_LOSS_OTHER;
}

/* The shards of samples each compute their rows' loss: a mean over
 * every axis averages, a sum adds; another loss cannot be split. */
static bool read_shard_scale(ir_ctx *ctx, ir_loc at, const char *what,
			     drv_train_config *tc)
{
	if (tc->loss_kind != DRV_LOSS_OTHER) {
		tc->shard_scale = tc->loss_kind == DRV_LOSS_MEAN
					  ? 1.0 / (double)tc->shards
					  : 1;
		return true;
	}
	ir_error(ctx, at,
		 "%s: the loss of '%s' is neither a mean nor a sum "
		 "over every axis, so the shards' losses do not make the "
		 "batch's",
		 what, tc->entry);
	return false;
}

/* The batch (--batch or --sym B=N, else the block's) and its shards
 * (--shards, else the block's `shards`, else 1): more than one needs a
 * batch of translation pairs, at least a row a shard. */
static bool read_shards(ir_ctx *ctx, const ir_module *m, const drv_options *o,
			double block_batch, drv_train_config *tc)
{
	const ir_setting *sh = ir_module_find_setting(m, "shards");
	double n = 1;
	tc->batch = (int64_t)block_batch;
	for (uint32_t i = 0; i < o->n_syms; i++)
		if (strcmp(o->syms[i].name, "B") == 0)
			tc->batch = o->syms[i].value;
	if (sh && !read_number(ctx, sh, 0, true, true, DRV_MAX_SHARDS + 1.0, &n))
		return false;
	/* under MPI each rank takes its shards of the global batch */
	tc->n_ranks = o->n_ranks > 1 ? o->n_ranks : 1;
	tc->rank = o->rank;
	tc->shards = (o->shards ? o->shards : (int64_t)n) * tc->n_ranks;
	if (tc->shards == 1)
		return true;
	const ir_setting *from = o->shards ? NULL : sh; /* else the flag */
	ir_loc at = from ? from->loc : (ir_loc){0};
	char what[64];
	if (o->n_ranks > 1)
		snprintf(what, sizeof what, "%d ranks of %lld shards",
			 o->n_ranks, (long long)(tc->shards / o->n_ranks));
	else
		snprintf(what, sizeof what,
			 from ? "shards = %lld" : "--shards %lld",
			 (long long)tc->shards);
	if (tc->shards > DRV_MAX_SHARDS) {
		ir_error(ctx, at, "%s: at most %d shards", what, DRV_MAX_SHARDS);
		return false;
	}
	if (!drv_nmt_is_source(tc->data) && !is_samples(tc->data)) {
		ir_error(ctx, at,
			 "%s: model %s trains on no batch of rows to "
			 "split (shards need data = tensors(...), text(...) or "
			 "nmt(...))",
			 what, m->name);
		return false;
	}
	if (!drv_nmt_is_source(tc->data) && !read_shard_scale(ctx, at, what, tc))
		return false;
	if (tc->batch == 0) {
		ir_error(ctx, at,
			 "%s: the batch has no size to split (batch = "
			 "N in the train block, or --batch N)",
			 what);
		return false;
	}
	if (tc->batch < tc->shards) {
		ir_error(ctx, at,
			 "%s: more shards than the %lld rows of a batch", what,
			 (long long)tc->batch);
		return false;
	}
	return true;
}

/* Without training (--gradcheck, -c): the batch, one shard, for a data
 * source whose batches it sizes. */
static bool read_batch_only(ir_ctx *ctx, const ir_module *m,
			    const drv_options *o, drv_train_config *tc)
{
	const ir_setting *batch = ir_module_find_setting(m, "batch");
	double b = 0;
	if (batch && !read_number(ctx, batch, 0, true, true, 2147483648.0, &b))
		return false;
	tc->batch = (int64_t)b;
	for (uint32_t i = 0; i < o->n_syms; i++)
		if (strcmp(o->syms[i].name, "B") == 0)
			tc->batch = o->syms[i].value;
	tc->shards = 1;
	return true;
}

/* The settings training needs beyond the entry and the data. */
static bool read_schedule(ir_ctx *ctx, const ir_module *m, const drv_options *o,
			  drv_train_config *tc)
{
	const ir_setting *opt = ir_module_find_setting(m, "optimizer");
	const ir_setting *ep = ir_module_find_setting(m, "epochs");
	const ir_setting *clip = ir_module_find_setting(m, "clip");
	const ir_setting *batch = ir_module_find_setting(m, "batch");
	double epochs = 0, b = 0;
	bool ok = true;
	if (!opt)
		ir_error(ctx, (ir_loc){0},
			 "the train block of %s names no optimizer "
			 "(optimizer = sgd(lr = 0.1) or adam(lr = 0.001))",
			 m->name);
	ok &= opt && read_optimizer(ctx, opt, o, &tc->optim);
	if (ep)
		ok &= read_number(ctx, ep, 0, true, true, DRV_MAX_EPOCHS + 1.0,
				  &epochs);
	if (clip)
		ok &= read_number(ctx, clip, 0, true, false, INFINITY,
				  &tc->clip);
	if (batch)
		ok &= read_number(ctx, batch, 0, true, true, 2147483648.0, &b);
	ok = ok && read_shards(ctx, m, o, b, tc);
	tc->epochs = o->epochs ? o->epochs : (int64_t)epochs;
	if (ok && !tc->epochs) {
		ir_error(ctx, (ir_loc){0},
			 "the train block of %s gives no epochs "
			 "(epochs = N), and no --epochs was given",
			 m->name);
		ok = false;
	}
	return ok;
}

/* What feeds the loss entry: --train needs a data source for an entry
 * that takes inputs; --gradcheck takes the entry's example when the block
 * names no data; -c feeds nothing (it writes the gradient function). */
static bool check_feed(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		       const drv_train_config *tc)
{
	const ir_func *f = ir_module_find_func(m, tc->entry);
	if (o->compile_only)
		return true;
	if (!o->gradcheck || tc->data || !f->n_inputs)
		return drv_batch_source_check(ctx, m, tc);
	if (f->example)
		return true;
	ir_error(ctx, f->loc,
		 "--gradcheck: '%s' takes %u input%s, but the "
		 "train block names no data (data = ...) and '%s' has no "
		 "example to check it on (an `example %s(...)` line)",
		 f->name, f->n_inputs, f->n_inputs == 1 ? "" : "s", f->name,
		 f->name);
	return false;
}

const char *drv_grad_name(const drv_train_config *tc, char *buf, size_t size)
{
	snprintf(buf, size, "%s_grad", tc->entry);
	return buf;
}

bool drv_train_prepare(ir_ctx *ctx, ir_module *m, const drv_options *o,
		       const pass_options *po, drv_train_config *tc)
{
	memset(tc, 0, sizeof *tc);
	tc->shard_scale = 1;
	if (o->train && !m->n_train) {
		ir_error(ctx, (ir_loc){0},
			 "--train: model %s has no train block "
			 "(docs/training.md tells what to put in one)",
			 m->name);
		return false;
	}
	tc->data = ir_module_find_setting(m, "data");
	bool ok = check_keys(ctx, m) && read_entry(ctx, m, tc);
	if (ok)
		tc->loss_kind = loss_kind(m, tc->entry);
	if (ok && o->train)
		ok = read_schedule(ctx, m, o, tc);
	else if (ok)
		ok = read_batch_only(ctx, m, o, tc);
	tc->is_full = ok && o->train;
	if (ok && (o->data || o->examples) && !drv_nmt_is_source(tc->data) &&
	    (o->examples || !is_samples(tc->data))) {
		ir_error(ctx, tc->data ? tc->data->loc : (ir_loc){0},
			 "%s: model "
			 "%s does not train on %s",
			 o->examples ? "--examples" : "--data", m->name,
			 o->examples ? "translation pairs "
				       "(data = nmt(...))"
				     : "a file (data = tensors(...), "
				       "text(...) or nmt(...))");
		ok = false;
	}
	if (ok && o->valid_data &&
	    !drv_tensors_is_source(tc->data)) { /* text: valid = F */
		ir_error(ctx, tc->data ? tc->data->loc : (ir_loc){0},
			 "--valid-data:"
			 " model %s does not train on samples (data = "
			 "tensors(...))",
			 m->name);
		ok = false;
	}
	if (!ok || !check_feed(ctx, m, o, tc))
		return false;
	char grad[256];
	drv_grad_name(tc, grad, sizeof grad);
	if (ir_module_find_func(m, grad))
		return true; /* printed IR of a training run: already there */
	if (o->explain_fusion)
		return true; /* fusion runs on the forward functions alone */
	return pass_pipeline_forward(m, po) && !ctx->n_errors &&
	       pass_autodiff(m, tc->entry) && !ctx->n_errors;
}
