/*
 * resume.c - a training run's state in its checkpoint: --save (at the
 * end, and every N epochs with --save-every N) and --resume FILE.
 *
 * What a run's next steps depend on is small, because every random
 * number is a function of the seed and a counter: the parameters, the
 * optimizer's state (Adam's moments, named "optim:m:NAME" and
 * "optim:v:NAME" beside the parameters, and its step count), the epochs
 * and steps done (the data's order is drawn from (seed, epoch), dropout
 * from (seed, step)) and the seed. They are all in the checkpoint, with
 * the losses so far for the pictures and the summary, so a resumed run
 * continues with the very bits the uninterrupted one would have had.
 * The metadata also records an epoch's batches, which the resumed run's
 * data must give again.
 */
#include "driver.h"

#include "rt_file.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_KEY "train_state"
#define LOSSES_KEY "losses"
#define VALID_KEY "valid_losses"

static int64_t param_numel(const attnrt_param_info *p)
{
	int64_t n = 1;
	for (int d = 0; d < p->rank; d++)
		n *= p->dims[d];
	return n;
}

/* "a,b,c" of n doubles (%.17g: read back to the same bits), malloc'd. */
static char *format_list(const double *v, uint64_t n)
{
	char *s = malloc(n * 26 + 1);
	size_t at = 0;
	for (uint64_t i = 0; s && i < n; i++)
		at += (size_t)snprintf(s + at, 26, "%s%.17g", i ? "," : "",
				       v[i]);
	if (s)
		s[at] = 0;
	return s;
}

/* The tensors of a checkpoint of state: the parameters, then Adam's
 * moments, each under its name. */
static attnrt_st_tensor *state_tensors(const drv_train_state *st, size_t *n,
				       char ***names)
{
	size_t np = st->n_params, per = st->m ? 3 : 1;
	attnrt_st_tensor *ts = calloc(np * per + 1, sizeof *ts);
	*names = calloc(np * 2 + 1, sizeof **names);
	*n = 0;
	for (size_t k = 0; ts && *names && k < per; k++)
		for (size_t p = 0; p < np; p++) {
			const attnrt_param_info *pi = &st->table[p];
			attnrt_st_tensor *t = &ts[(*n)++];
			const char *block = k == 0   ? st->params
					    : k == 1 ? st->m
						     : st->v;
			t->name = pi->name;
			if (k) {
				size_t len = strlen(pi->name) + 16;
				char *name = (*names)[(k - 1) * np + p] = malloc(
					len);
				if (!name)
					return ts;
				snprintf(name, len, "%s%c:%s",
					 ATTNRT_STATE_PREFIX,
					 k == 1 ? 'm' : 'v', pi->name);
				t->name = name;
			}
			t->dtype = "F32";
			t->rank = pi->rank;
			memcpy(t->dims, pi->dims, sizeof pi->dims);
			t->data = block + pi->offset;
			t->bytes = (size_t)param_numel(pi) * 4;
		}
	return ts;
}

bool drv_state_save(ir_ctx *ctx, const ir_module *m, const char *path,
		    const drv_train_state *st)
{
	char state[512], err[512], **names = NULL;
	snprintf(state, sizeof state,
		 "epoch=%" PRIu64 " step=%" PRIu64 " optim_steps=%" PRIu64
		 " seed=%" PRIu64 " batches=%" PRIu64 " optimizer=%s"
		 " batch=%" PRId64 " shards=%" PRId64 " data=%016" PRIx64
		 " lr=%.17g beta1=%.17g beta2=%.17g eps=%.17g clip=%.17g",
		 st->epoch, st->step, st->optim_steps, st->seed, st->n_batches,
		 st->m ? "adam" : "sgd", st->batch, st->shards, st->data_hash,
		 st->optim.lr, st->optim.beta1, st->optim.beta2, st->optim.eps,
		 st->clip);
	char *losses = format_list(st->losses, st->epoch);
	char *valid = st->valid ? format_list(st->valid, st->epoch) : NULL;
	size_t n = 0;
	attnrt_st_tensor *ts = state_tensors(st, &n, &names);
	attnrt_meta meta[8] = {{"model", m->name},
			       {"format", "attnc"},
			       {STATE_KEY, state},
			       {LOSSES_KEY, losses}};
	size_t n_meta = 4;
	if (valid)
		meta[n_meta++] = (attnrt_meta){VALID_KEY, valid};
	if (st->vocab)
		meta[n_meta++] = (attnrt_meta){"vocab", st->vocab};
	if (st->src_vocab && st->tgt_vocab) {
		meta[n_meta++] = (attnrt_meta){ATTNRT_META_SRC_VOCAB,
					       st->src_vocab};
		meta[n_meta++] = (attnrt_meta){ATTNRT_META_TGT_VOCAB,
					       st->tgt_vocab};
	}
	bool ok = ts && losses && (!st->valid || valid) &&
		  n == st->n_params * (st->m ? 3 : 1);
	if (!ok)
		ir_error(ctx, (ir_loc){0}, "--save: out of memory");
	else if (attnrt_st_write(NULL, path, ts, n, meta, n_meta, err,
				 sizeof err) != ATTNRT_OK) {
		ir_error(ctx, (ir_loc){0}, "--save: %s", err);
		ok = false;
	}
	for (size_t i = 0; names && i < st->n_params * 2; i++)
		free(names[i]);
	free(names);
	free(ts);
	free(losses);
	free(valid);
	return ok;
}

/* ---- reading it back ----------------------------------------------------------- */

bool drv_state_read(ir_ctx *ctx, const char *path, drv_resume *r)
{
	char err[512], kind[16] = "";
	memset(r, 0, sizeof *r);
	if (attnrt_st_read(NULL, path, UINT64_MAX, &r->file, err, sizeof err) !=
	    ATTNRT_OK) {
		ir_error(ctx, (ir_loc){0}, "--resume: %s", err);
		return false;
	}
	const char *s = attnrt_st_meta(r->file, STATE_KEY);
	drv_train_state *st = &r->state;
	if (!s ||
	    sscanf(s,
		   "epoch=%" SCNu64 " step=%" SCNu64 " optim_steps=%" SCNu64
		   " seed=%" SCNu64 " batches=%" SCNu64 " optimizer=%15s",
		   &st->epoch, &st->step, &st->optim_steps, &st->seed,
		   &st->n_batches, kind) != 6 ||
	    (strcmp(kind, "adam") && strcmp(kind, "sgd"))) {
		ir_error(ctx, (ir_loc){0},
			 "--resume: %s holds no training run's "
			 "state (a checkpoint that --train --save wrote)",
			 path);
		return false;
	}
	r->is_adam = strcmp(kind, "adam") == 0;
	/* Absent from the checkpoints of older runs: then not checked. */
	const char *b = strstr(s, " batch=");
	if (!b || sscanf(b, " batch=%" SCNd64 " shards=%" SCNd64, &st->batch,
			 &st->shards) != 2)
		st->batch = st->shards = 0;
	const char *d = strstr(s, " data=");
	if (!d || sscanf(d, " data=%" SCNx64, &st->data_hash) != 1)
		st->data_hash = 0;
	const char *o = strstr(s, " lr=");
	st->has_settings = o &&
			   sscanf(o,
				  " lr=%lg beta1=%lg beta2=%lg eps=%lg clip=%lg",
				  &st->optim.lr, &st->optim.beta1,
				  &st->optim.beta2, &st->optim.eps,
				  &st->clip) == 5;
	return true;
}

/* The n doubles of a metadata list into v (st->epoch of them). */
static bool read_list(const char *s, double *v, uint64_t n)
{
	char *end;
	for (uint64_t i = 0; s && i < n; i++) {
		v[i] = strtod(s, &end);
		if (end == s || (*end != ',' && i + 1 < n))
			return false;
		s = *end ? end + 1 : end;
	}
	return s && (n == 0 || *s == 0);
}

/* Adam's moment `which` ('m' or 'v') of every parameter into block. */
static bool read_moments(ir_ctx *ctx, const drv_resume *r,
			 const attnrt_param_info *table, size_t n_params,
			 char which, char *block)
{
	for (size_t p = 0; p < n_params; p++) {
		char name[512];
		snprintf(name, sizeof name, "%s%c:%s", ATTNRT_STATE_PREFIX,
			 which, table[p].name);
		const attnrt_st_tensor *t = attnrt_st_find(r->file, name);
		size_t bytes = (size_t)param_numel(&table[p]) * 4;
		if (!t || strcmp(t->dtype, "F32") || t->bytes != bytes) {
			ir_error(ctx, (ir_loc){0},
				 "--resume: the optimizer's state "
				 "'%s' is %s",
				 name,
				 t ? "not the parameter's shape" : "missing");
			return false;
		}
		for (size_t i = 0; i < bytes / 4; i++) {
			float x;
			memcpy(&x, (const char *)t->data + 4 * i, 4);
			if (!isfinite(x) || (which == 'v' && x < 0)) {
				ir_error(ctx, (ir_loc){0},
					 "--resume: the optimizer's state "
					 "'%s' holds %g at element %zu: the "
					 "checkpoint is corrupt",
					 name, (double)x, i);
				return false;
			}
		}
		memcpy(block + table[p].offset, t->data, bytes);
	}
	return true;
}

/* The vocabulary under key in the checkpoint against this run's (either
 * NULL where there is none): the ids the parameters were trained on
 * must name the same characters or tokens. */
static bool same_vocab(ir_ctx *ctx, const drv_resume *r, const char *path,
		       const char *key, const char *what, const char *now)
{
	const char *saved = attnrt_st_meta(r->file, key);
	if ((!saved && !now) || (saved && now && strcmp(saved, now) == 0))
		return true;
	if (saved && now)
		ir_error(ctx, (ir_loc){0},
			 "--resume: the %s of this run's data are not those "
			 "%s was trained on: not the same data",
			 what, path);
	else
		ir_error(ctx, (ir_loc){0},
			 "--resume: %s %s %s, this run's data %s: not the same "
			 "data",
			 path, saved ? "records" : "records no", what,
			 now ? "has them" : "has none");
	return false;
}

bool drv_state_same_data(ir_ctx *ctx, const drv_resume *r, const char *path,
			 const drv_train_state *now)
{
	const drv_train_state *st = &r->state;
	if (st->n_batches != now->n_batches) {
		ir_error(ctx, (ir_loc){0},
			 "--resume: the run of %s took %" PRIu64
			 " batches an epoch, this one %" PRIu64 ": not the same "
			 "data or batch",
			 path, st->n_batches, now->n_batches);
		return false;
	}
	if (st->batch && (st->batch != now->batch || st->shards != now->shards)) {
		ir_error(ctx, (ir_loc){0},
			 "--resume: the run of %s took batches of %" PRId64
			 " rows in %" PRId64 " shard%s, this one %" PRId64
			 " in %" PRId64 ": its batches would not be those of "
			 "the run it continues",
			 path, st->batch, st->shards,
			 st->shards == 1 ? "" : "s", now->batch, now->shards);
		return false;
	}
	if (!same_vocab(ctx, r, path, "vocab", "characters", now->vocab) ||
	    !same_vocab(ctx, r, path, ATTNRT_META_SRC_VOCAB, "source tokens",
			now->src_vocab) ||
	    !same_vocab(ctx, r, path, ATTNRT_META_TGT_VOCAB, "target tokens",
			now->tgt_vocab))
		return false;
	if (st->data_hash && now->data_hash && st->data_hash != now->data_hash) {
		ir_error(ctx, (ir_loc){0},
			 "--resume: this run's data are not those of the run "
			 "of %s (as many batches, other samples): it would "
			 "not continue that run",
			 path);
		return false;
	}
	return true;
}

void drv_state_warn_settings(ir_ctx *ctx, const drv_resume *r, const char *path,
			     const drv_train_state *now)
{
	const drv_train_state *st = &r->state;
	if (!st->has_settings)
		return;
	struct {
		const char *name;
		double was, is;
		bool is_adam_only;
	} s[] = {{"lr", st->optim.lr, now->optim.lr, false},
		 {"beta1", st->optim.beta1, now->optim.beta1, true},
		 {"beta2", st->optim.beta2, now->optim.beta2, true},
		 {"eps", st->optim.eps, now->optim.eps, true},
		 {"clip", st->clip, now->clip, false}};
	for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
		if ((!s[i].is_adam_only || r->is_adam) && s[i].was != s[i].is)
			ir_warning(ctx, (ir_loc){0},
				   "--resume: %s was trained with %s %g, this "
				   "run has %g: its epochs from here on are "
				   "not those of the run it continues",
				   path, s[i].name, s[i].was, s[i].is);
}

bool drv_state_restore(ir_ctx *ctx, const drv_resume *r, const char *path,
		       const drv_jit *j, attnrt_optim *opt, double *losses,
		       double *valid)
{
	uint32_t n;
	char err[512];
	const attnrt_param_info *table = cg_program_params(j->p, &n);
	const drv_train_state *st = &r->state;
	char *m = attnrt_optim_moments(opt, 0),
	     *v = attnrt_optim_moments(opt, 1);
	if ((m != NULL) != r->is_adam) {
		ir_error(ctx, (ir_loc){0},
			 "--resume: %s was trained with %s, this "
			 "run uses %s",
			 path, r->is_adam ? "adam" : "sgd", m ? "adam" : "sgd");
		return false;
	}
	if (attnrt_checkpoint_take(NULL, r->file, ATTNRT_STATE_PREFIX, table, n,
				   j->params, err, sizeof err) != ATTNRT_OK) {
		ir_error(ctx, (ir_loc){0}, "--resume: %s: %s", path, err);
		return false;
	}
	if (m && (!read_moments(ctx, r, table, n, 'm', m) ||
		  !read_moments(ctx, r, table, n, 'v', v)))
		return false;
	attnrt_optim_set_steps(opt, st->optim_steps);
	const char *vl = attnrt_st_meta(r->file, VALID_KEY);
	if (!read_list(attnrt_st_meta(r->file, LOSSES_KEY), losses, st->epoch) ||
	    (valid && vl && !read_list(vl, valid, st->epoch))) {
		ir_error(ctx, (ir_loc){0},
			 "--resume: %s: the losses so far are "
			 "not a list of %" PRIu64 " numbers",
			 path, st->epoch);
		return false;
	}
	return true;
}

bool drv_state_losses(ir_ctx *ctx, const char *path, double **losses,
		      uint32_t *n_epochs)
{
	attnrt_st_file *file = NULL;
	char err[512];
	uint64_t epoch = 0;
	*losses = NULL;
	*n_epochs = 0;
	if (attnrt_st_read(NULL, path, UINT64_MAX, &file, err, sizeof err) !=
	    ATTNRT_OK) {
		ir_error(ctx, (ir_loc){0}, "--plot: %s", err);
		return false;
	}
	const char *s = attnrt_st_meta(file, STATE_KEY);
	bool ok = s && sscanf(s, "epoch=%" SCNu64, &epoch) == 1 && epoch > 0 &&
		  epoch <= DRV_MAX_EPOCHS;
	if (ok && !(*losses = malloc(epoch * sizeof **losses)))
		ok = false;
	if (ok && !read_list(attnrt_st_meta(file, LOSSES_KEY), *losses, epoch))
		ok = false;
	if (!ok) {
		ir_error(ctx, (ir_loc){0},
			 "--plot: %s records no training run's "
			 "losses (a checkpoint that --train --save wrote)",
			 path);
		free(*losses);
		*losses = NULL;
	}
	*n_epochs = ok ? (uint32_t)epoch : 0;
	attnrt_st_free(file);
	return ok;
}

void drv_resume_close(drv_resume *r)
{
	attnrt_st_free(r->file);
	memset(r, 0, sizeof *r);
}

/* ---- --metrics after a resume --------------------------------------------------- */

/* The epoch of a metrics line, or 0 for a line of another kind. */
static uint64_t line_epoch(const char *line)
{
	uint64_t e = 0;
	return sscanf(line, "{\"epoch\": %" SCNu64, &e) == 1 ? e : 0;
}

FILE *drv_metrics_resume(ir_ctx *ctx, const char *path, uint64_t epochs_done)
{
	char line[4096], err[512] = "";
	FILE *in = fopen(path, "r");
	rt_out out;
	bool ok = rt_out_open(&out, path, err, sizeof err) == ATTNRT_OK;
	FILE *kept = ok ? rt_out_stream(&out) : NULL;
	while (kept && in && fgets(line, sizeof line, in)) {
		uint64_t e = line_epoch(line);
		if (e >= 1 && e <= epochs_done)
			fputs(line, kept);
	}
	if (in)
		fclose(in);
	ok = ok && rt_out_commit(&out, path, err, sizeof err) == ATTNRT_OK;
	FILE *f = ok ? fopen(path, "a") : NULL;
	if (ok && !f)
		snprintf(err, sizeof err, "%s: cannot write: %s", path,
			 strerror(errno));
	if (!f)
		ir_error(ctx, (ir_loc){0}, "--metrics: %s", err);
	return f;
}
