/*
 * train.c - --train: the training loop. The module, with the gradient
 * function autodiff added, is compiled once; then for each epoch and
 * each batch the gradient function runs (training mode, the global step
 * numbering the dropout masks), the gradients are clipped if the train
 * block asks, and the optimizer of libattnrt steps the params block.
 *
 * With --save the checkpoint holds the run's state (resume.c), written
 * at the end and every --save-every N epochs; --resume FILE continues
 * such a run where it stopped, to the same bits.
 *
 * Output, on stderr so that stdout keeps only what --stats and
 * --dump-ir print: a line per epoch, with throughput and time left when
 * stderr is a terminal and without them otherwise (so runs diff);
 * --metrics FILE gets one JSON line per epoch with the timings. A NaN or an infinity in
 * the loss or the gradients stops training: the same step is re-run under
 * the reference interpreter, which names the op and the .g line where the
 * first non-finite value appeared. After training, a seq2seq model
 * translates (--translate, or the book's sentences; translate.c).
 */
#include "driver.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct trainer {
	ir_ctx *ctx;
	const ir_module *m;
	const drv_options *o;
	const drv_train_config *tc;
	drv_data data;
	drv_jit jit;
	drv_grad grad;
	drv_batch_source src;
	attnrt_optim *optim;
	const attnrt_param_info *table;
	uint32_t n_params;
	FILE *metrics;
	double *losses;       /* per epoch */
	double *valid_losses; /* per epoch, with a validation set */
	drv_resume resume;    /* --resume's checkpoint, or none */
	uint64_t first_epoch; /* the epochs a resumed run had done */
	uint64_t data_hash;   /* of the training data (data_hash) */
	uint64_t step;        /* steps taken over all epochs */
	bool is_tty;
	double start;          /* when the first epoch began (seconds) */
	attnrt_tuner tuner;    /* the threads of each step */
	int32_t fixed_threads; /* ATTNC_NO_TUNER: every step's; 0: the tuner's */
	int32_t step_threads;  /* the last step's, for the validation loss */
	/* --profile: the batches' filling, the update (the gradients
	 * added, the optimizer's step, the norms) around the entry points,
	 * and the team's idle time in the shards (drv_grad) */
	drv_profile_host host[3];
} trainer;

/* What the steps of one epoch add up. */
typedef struct epoch_sums {
	double loss, divisor, items;
} epoch_sums;

static const char *nonfinite_name(double v)
{
	return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

/* ---- threads ------------------------------------------------------------------------ */

/* An empty parallel region slower than this means a core is busy. */
#define BUSY_REGION_SECONDS 100e-6

/* The threads of the next step, as the tuner says; before trying a team
 * in a probe, an empty region of that team is timed first, and a team
 * that waits milliseconds for a descheduled thread is not tried (a real
 * step would wait so at each of its hundreds of regions). */
static int32_t step_threads(trainer *t)
{
	if (t->fixed_threads)
		return t->fixed_threads;
	int32_t n = attnrt_tuner_next(&t->tuner);
	if (n > 1 && attnrt_tuner_is_probing(&t->tuner) &&
	    cg_threads_region_seconds(n) > BUSY_REGION_SECONDS) {
		attnrt_tuner_record(&t->tuner, INFINITY);
		n = attnrt_tuner_next(&t->tuner);
	}
	return n;
}

/* The thread count the steps run with now (the metrics' "threads"). */
static int32_t threads_now(const trainer *t)
{
	return t->fixed_threads ? t->fixed_threads
				: attnrt_tuner_next(&t->tuner);
}

/* ATTNC_NO_TUNER set to anything but "" or "0": every step runs on the
 * --threads count (or OpenMP's default), as a benchmark comparing thread
 * counts needs; else 0, the tuner choosing. */
static int32_t fixed_threads(const drv_options *o)
{
	if (!drv_env_is_on("ATTNC_NO_TUNER"))
		return 0;
	return o->threads ? o->threads : cg_threads_get();
}

/* ---- when a value is not finite ------------------------------------------------------ */

/* Re-runs the gradient function on the same step under the interpreter,
 * which reports the first op whose result is not finite at its line. */
static void find_nonfinite_op(trainer *t, const drv_batch *b,
			      const attnrt_run *run, bool is_loss)
{
	ir_ctx *ctx = t->ctx;
	const ir_func *f = t->grad.f;
	interp_tensor in[DRV_MAX_INPUTS], *outs = NULL;
	interp_tensor *params = ir_alloc(ctx,
					 (t->m->n_params + 1) * sizeof *params);
	if (!params || !drv_params_tensors(ctx, t->m, &t->jit, false, params))
		goto out;
	outs = ir_alloc(ctx, (f->n_outputs + 1) * sizeof *outs);
	if (!outs)
		goto out;
	drv_batch_tensors(&t->grad, b, in);
	interp_opts opts = {.is_training = true,
			    .seed = run->seed,
			    .step = run->step,
			    .stop_at_nonfinite = true};
	if (!interp_run(ctx, t->m, f, &opts, params, in, outs)) {
		if (!is_loss)
			ir_note(ctx, (ir_loc){0},
				"the loss is finite, so that op is "
				"most likely in the backward pass: part of the "
				"gradient of the op shown");
	} else {
		ir_note(ctx, (ir_loc){0},
			"the reference interpreter finds every "
			"value of this step finite: the native code disagrees "
			"with it");
		for (uint32_t i = 0; i < f->n_outputs; i++)
			interp_tensor_fini(ctx, &outs[i]);
	}
out:
	for (uint32_t i = 0; params && i < t->m->n_params; i++)
		interp_tensor_fini(ctx, &params[i]);
	ir_free(ctx, params);
	ir_free(ctx, outs);
}

/* The shard the re-run should look at: the first whose loss, else the
 * first past 0 whose gradients (shard 0's hold the sum) are not finite. */
static uint32_t nonfinite_shard(const trainer *t, const drv_batch *b)
{
	const drv_grad *g = &t->grad;
	uint32_t n = drv_grad_live(g, b);
	for (uint32_t s = 0; s < n; s++)
		for (size_t i = 0; i < g->n_loss; i++)
			if (!isfinite(drv_grad_loss(g, s)[i]))
				return s;
	for (uint32_t s = 1; s < n; s++)
		if (!isfinite(attnrt_grad_norm(t->table, t->n_params,
					       drv_grad_block(g, s))))
			return s;
	return 0;
}

static void report_nonfinite(trainer *t, uint64_t epoch, const drv_batch *b,
			     const attnrt_run *run, double loss, double norm)
{
	fflush(stdout);
	bool is_loss = !isfinite(loss);
	ir_error(t->ctx, (ir_loc){0},
		 "training stopped at epoch %llu, step "
		 "%llu: %s is %s",
		 (unsigned long long)epoch + 1, (unsigned long long)t->step + 1,
		 is_loss ? "the loss" : "the gradients' norm",
		 nonfinite_name(is_loss ? loss : norm));
	drv_batch shard;
	attnrt_run shard_run;
	uint32_t s = nonfinite_shard(t, b);
	drv_grad_shard(&t->grad, b, run, s, &shard, &shard_run);
	if (t->grad.n_shards > 1)
		ir_note(t->ctx, (ir_loc){0}, "in shard %u of the batch's %u",
			s + 1, t->grad.n_shards);
	find_nonfinite_op(t, &shard, &shard_run, is_loss);
}

/* The elements of parameter p. */
static int64_t numel(const attnrt_param_info *p)
{
	int64_t n = 1;
	for (int d = 0; d < p->rank; d++)
		n *= p->dims[d];
	return n;
}

/* The first value of parameter p in the params block that is not finite. */
static double first_nonfinite(const attnrt_param_info *p, const void *params)
{
	const float *v = (const float *)((const char *)params + p->offset);
	int64_t n = numel(p);
	for (int64_t k = 0; k < n; k++)
		if (!isfinite(v[k]))
			return v[k];
	return 0;
}

/* After a step: a parameter the update made infinite or NaN. */
static bool check_params(trainer *t, uint64_t epoch)
{
	for (uint32_t i = 0; i < t->n_params; i++) {
		double norm = attnrt_grad_norm(&t->table[i], 1, t->jit.params);
		if (isfinite(norm))
			continue;
		norm = first_nonfinite(&t->table[i], t->jit.params);
		fflush(stdout);
		ir_error(t->ctx, (ir_loc){0},
			 "training stopped at epoch %llu, step "
			 "%llu: the %s step made parameter '%s' %s (is the "
			 "learning rate %g too large?)",
			 (unsigned long long)epoch + 1,
			 (unsigned long long)t->step,
			 t->tc->optim.kind == ATTNRT_OPTIM_ADAM ? "adam" : "sgd",
			 t->table[i].name, nonfinite_name(norm),
			 t->tc->optim.lr);
		return false;
	}
	return true;
}

/* ---- the update, on the step's threads --------------------------------------------------- */

/* The parameters' elements (table order) cut into this many parts; the
 * norms add the parts' sums in order, so they do not depend on which
 * thread summed which part. */
#define UPDATE_PARTS 16

typedef struct update_run {
	trainer *t;
	const void *more[DRV_MAX_SHARDS]; /* the live shards' gradients past 0 */
	size_t n_more;
	double scale; /* of the gradients in the optimizer step */
	double grad_sq[UPDATE_PARTS], param_sq[UPDATE_PARTS];
} update_run;

/* The live shards' gradients added into shard 0's, part by part, with
 * the sums of their squares. */
static void add_parts(void *data, int tid, int n)
{
	update_run *u = data;
	trainer *t = u->t;
	for (int p = tid; p < UPDATE_PARTS; p += n)
		u->grad_sq[p] = attnrt_grad_sum_part(t->table, t->n_params,
						     t->grad.grads, u->more,
						     u->n_more, (size_t)p,
						     UPDATE_PARTS);
}

/* The optimizer's step in parts (any split gives its bits), with the
 * squares of the parameters those same parts wrote, in the same pass: a
 * step that made one infinite or NaN makes its part's sum so. */
static void step_parts(void *data, int tid, int n)
{
	update_run *u = data;
	trainer *t = u->t;
	for (int p = tid; p < UPDATE_PARTS; p += n)
		u->param_sq[p] = attnrt_optim_update_part_sq(t->optim,
							     t->jit.params,
							     t->grad.grads,
							     u->scale, (size_t)p,
							     UPDATE_PARTS);
}

static double sum_parts(const double *v)
{
	double sum = 0;
	for (int p = 0; p < UPDATE_PARTS; p++)
		sum += v[p];
	return sum;
}

/* ---- steps and epochs --------------------------------------------------------------------- */

static bool train_step(trainer *t, uint64_t epoch, uint64_t i, epoch_sums *sums)
{
	drv_batch b;
	memset(&b, 0, sizeof b);
	double fill0 = drv_now_seconds();
	if (!t->src.fill(t->src.state, epoch, i, &b))
		return false;
	t->host[0].calls++;
	t->host[0].seconds += drv_now_seconds() - fill0;
	attnrt_run run = {.seed = t->o->seed,
			  .step = t->step,
			  .is_training = 1,
			  .n_threads = step_threads(t)};
	t->step_threads = run.n_threads;
	double loss, t0 = drv_now_seconds();
	if (!drv_grad_run(t->ctx, &t->jit, &t->grad, &b, &run, &loss)) {
		ir_note(t->ctx, (ir_loc){0},
			"in training step %llu: epoch %llu, batch %llu of %llu",
			(unsigned long long)t->step + 1,
			(unsigned long long)epoch + 1, (unsigned long long)i + 1,
			(unsigned long long)t->src.n_batches);
		return false;
	}
	/* The shards' gradients added, their norm, the optimizer's step and
	 * the parameters' norm (to catch a step that overflows), each on
	 * the step's threads, in parts. */
	double update0 = drv_now_seconds();
	int team = run.n_threads > 0 ? run.n_threads : cg_threads_get();
	update_run u = {.t = t};
	for (uint32_t sh = 1; sh < drv_grad_live(&t->grad, &b); sh++)
		u.more[u.n_more++] = drv_grad_block(&t->grad, sh);
	cg_threads_each(team, add_parts, &u);
	double shard_scale = t->tc->shard_scale; /* 1 / shards for a mean */
	double norm = sqrt(sum_parts(u.grad_sq)) * shard_scale;
	loss *= shard_scale;
	if (!isfinite(loss) || !isfinite(norm)) {
		report_nonfinite(t, epoch, &b, &run, loss, norm);
		return false;
	}
	/* d2l's grad_clipping, folded into the update's pass */
	double clip = t->tc->clip;
	u.scale = (clip > 0 && norm > clip ? clip / norm : 1.0) * shard_scale;
	attnrt_optim_begin_step(t->optim);
	cg_threads_each(team, step_parts, &u);
	double t1 = drv_now_seconds();
	t->host[1].calls++;
	t->host[1].seconds += t1 - update0;
	attnrt_tuner_record(&t->tuner, t1 - t0);
	t->step++;
	sums->loss += loss;
	sums->divisor += b.loss_divisor;
	sums->items += b.n_items;
	return isfinite(sum_parts(u.param_sq)) || check_params(t, epoch);
}

/* "1h02m", "3m05s", "12s", "0.4s". */
static void format_duration(double s, char *buf, size_t size)
{
	long long whole = (long long)s;
	if (s < 10)
		snprintf(buf, size, "%.1fs", s);
	else if (whole < 3600)
		snprintf(buf, size, "%lldm%02llds", whole / 60, whole % 60);
	else
		snprintf(buf, size, "%lldh%02lldm", whole / 3600,
			 whole / 60 % 60);
}

/* "812", "12.3k", "3.42M" items per second. */
static void format_rate(double r, char *buf, size_t size)
{
	if (r >= 1e6)
		snprintf(buf, size, "%.3gM", r / 1e6);
	else if (r >= 1e3)
		snprintf(buf, size, "%.3gk", r / 1e3);
	else
		snprintf(buf, size, "%.3g", r);
}

/* On a terminal, the batch within the epoch, overwritten in place. */
static void show_progress(const trainer *t, uint64_t epoch, uint64_t i,
			  const epoch_sums *sums)
{
	fprintf(stderr, "\r\033[Kepoch %llu/%lld  batch %llu/%llu  loss %.4f",
		(unsigned long long)epoch + 1, (long long)t->tc->epochs,
		(unsigned long long)i + 1, (unsigned long long)t->src.n_batches,
		sums->divisor > 0 ? sums->loss / sums->divisor : sums->loss);
	fflush(stdout);
}

static void print_epoch(const trainer *t, uint64_t epoch, double loss,
			double valid, double secs, double rate)
{
	unsigned long long e = epoch + 1, n = (unsigned long long)t->tc->epochs;
	char vl[32] = "";
	if (t->data.valid)
		snprintf(vl, sizeof vl,
			 t->is_tty ? "  valid %.4f" : " valid %.4f", valid);
	if (!t->is_tty) {
		fprintf(stderr, "epoch %llu/%llu loss %.4f%s\n", e, n, loss, vl);
		fflush(stdout);
		return;
	}
	char left[32], per_sec[32];
	double elapsed = drv_now_seconds() - t->start;
	format_duration(elapsed / (double)e * (double)(n - e), left,
			sizeof left);
	format_rate(rate, per_sec, sizeof per_sec);
	fprintf(stderr,
		"\r\033[Kepoch %llu/%llu  loss %.4f%s  %s %s/s  %.3f s  "
		"%s left\n",
		e, n, loss, vl, per_sec, t->src.unit, secs, left);
	fflush(stdout);
}

static bool write_metrics(const trainer *t, uint64_t epoch, double loss,
			  double valid, double rate, double secs)
{
	if (!t->metrics)
		return true;
	char vl[48] = "";
	if (t->data.valid)
		snprintf(vl, sizeof vl, "\"valid_loss\": %.9g, ", valid);
	fprintf(t->metrics,
		"{\"epoch\": %llu, \"loss\": %.9g, %s"
		"\"tokens_per_sec\": %.6g, \"seconds\": %.6g, "
		"\"peak_rss_mib\": %.1f, \"threads\": %d}\n",
		(unsigned long long)epoch + 1, loss, vl, rate, secs,
		drv_peak_rss_mib(), (int)threads_now(t));
	if (fflush(t->metrics) == 0 && !ferror(t->metrics))
		return true;
	ir_error(t->ctx, (ir_loc){0}, "--metrics: cannot write '%s': %s",
		 t->o->metrics, strerror(errno));
	return false;
}

static bool train_epoch(trainer *t, uint64_t epoch)
{
	epoch_sums sums = {0, 0, 0};
	double t0 = drv_now_seconds(), shown = t0;
	for (uint64_t i = 0; i < t->src.n_batches; i++) {
		if (!train_step(t, epoch, i, &sums))
			return false;
		if (t->is_tty && drv_now_seconds() - shown > 0.2) {
			show_progress(t, epoch, i, &sums);
			shown = drv_now_seconds();
		}
	}
	double secs = drv_now_seconds() - t0;
	double loss = sums.divisor > 0 ? sums.loss / sums.divisor : sums.loss;
	double rate = secs > 0 ? sums.items / secs : 0, valid = 0;
	t->losses[epoch] = loss;
	if (t->data.valid &&
	    !drv_samples_eval(t->ctx, t->m, &t->jit, t->tc->entry,
			      t->tc->loss_kind, t->data.valid, t->step_threads,
			      &valid))
		return false;
	t->valid_losses[epoch] = valid;
	print_epoch(t, epoch, loss, valid, secs, rate);
	return write_metrics(t, epoch, loss, valid, rate, secs);
}

/* ---- the run ------------------------------------------------------------------------------ */

static bool open_metrics(trainer *t)
{
	if (!t->o->metrics)
		return true;
	if (t->resume.file) {
		t->metrics = drv_metrics_resume(t->ctx, t->o->metrics,
						t->resume.state.epoch);
		return t->metrics != NULL;
	}
	t->metrics = fopen(t->o->metrics, "w");
	if (t->metrics)
		return true;
	ir_error(t->ctx, (ir_loc){0}, "--metrics: cannot write '%s': %s",
		 t->o->metrics, strerror(errno));
	return false;
}

/* Compiles the module for training: the functions the run calls. A
 * seq2seq model on its data needs only the gradient function
 * (translate.c compiles its own decoder); a regression model, or a run
 * that draws pictures, every function (they call the model's functions
 * and truth/data); any other model the gradient function and the loss
 * that the held-out samples are measured with (--generate compiles its
 * own decode_step; a language model's decode_step was a third of the
 * 12-layer GPT's compile kernels). */
static bool open_jit(trainer *t, const ir_func *f)
{
	char name[256];
	const char *only[2] = {drv_grad_name(t->tc, name, sizeof name),
			       t->tc->entry};
	uint32_t n_only = 2;
	if (t->data.nmt && drv_is_seq2seq(t->m))
		n_only = 1;
	else if (t->o->plot || t->o->heatmap || drv_is_regression(t->m))
		n_only = 0;
	/* the gradient, and Adam's two moments */
	t->data.o.param_copies = 1 + (t->tc->optim.kind == ATTNRT_OPTIM_ADAM
					      ? 2
					      : 0);
	return drv_jit_open_only(t->ctx, t->m, &t->data.o, f, true,
				 n_only ? only : NULL, n_only, &t->jit);
}

/* With shards, the compiled B is a shard's rows: the batch's, divided
 * (rounded up; the rows past the batch are padding). */
static bool shard_batch(trainer *t)
{
	int64_t n = t->tc->shards;
	if (n <= 1 || t->data.train) /* samples bind a shard's rows */
		return true;
	return drv_options_bind(t->ctx, &t->data.o, "--shards", "B",
				(t->tc->batch + n - 1) / n);
}

/* What a checkpoint of the run after epochs_done holds. */
static uint64_t data_hash(const drv_data *d);

static drv_train_state run_state(const trainer *t, uint64_t epochs_done)
{
	drv_train_state st = {.epoch = epochs_done,
			      .step = t->step,
			      .optim_steps = attnrt_optim_steps(t->optim),
			      .seed = t->o->seed,
			      .n_batches = t->src.n_batches,
			      .batch = t->tc->batch,
			      .shards = t->tc->shards > 1 ? t->tc->shards : 1,
			      .optim = t->tc->optim,
			      .clip = t->tc->clip,
			      .has_settings = true,
			      .data_hash = t->data_hash,
			      .losses = t->losses,
			      .valid = t->data.valid ? t->valid_losses : NULL,
			      .table = t->table,
			      .n_params = t->n_params,
			      .params = t->jit.params,
			      .m = attnrt_optim_moments(t->optim, 0),
			      .v = attnrt_optim_moments(t->optim, 1),
			      .vocab = t->jit.vocab};
	if (t->data.nmt) {
		st.src_vocab = attnrt_vocab_string(
			rt_nmt_vocab(t->data.nmt, RT_NMT_SRC));
		st.tgt_vocab = attnrt_vocab_string(
			rt_nmt_vocab(t->data.nmt, RT_NMT_TGT));
	}
	return st;
}

/* --save: the parameters and what resuming needs, after epochs_done. */
static bool save_state(const trainer *t, uint64_t epochs_done)
{
	drv_train_state st = run_state(t, epochs_done);
	return drv_state_save(t->ctx, t->m, t->o->save, &st);
}

/* --resume: the saved run's parameters, optimizer state, steps and
 * losses, after the epochs it had done. */
static bool resume_state(trainer *t)
{
	const drv_train_state *st = &t->resume.state;
	if (st->epoch >= (uint64_t)t->tc->epochs) {
		ir_error(t->ctx, (ir_loc){0},
			 "--resume: %s has done %llu epoch%s "
			 "of the %lld asked (--epochs N to train more)",
			 t->o->resume, (unsigned long long)st->epoch,
			 st->epoch == 1 ? "" : "s", (long long)t->tc->epochs);
		return false;
	}
	/* A checkpoint of another model is that, before its run's batches
	 * or data differ from this one's. */
	for (uint32_t i = 0; i < t->n_params; i++)
		if (!attnrt_st_find(t->resume.file, t->table[i].name)) {
			ir_error(t->ctx, (ir_loc){0},
				 "--resume: %s is not a checkpoint of this "
				 "model: it holds no parameter '%s'",
				 t->o->resume, t->table[i].name);
			return false;
		}
	size_t prefix = strlen(ATTNRT_STATE_PREFIX);
	for (size_t i = 0; i < attnrt_st_count(t->resume.file); i++) {
		const char *name = attnrt_st_at(t->resume.file, i)->name;
		uint32_t k = 0;
		while (k < t->n_params && strcmp(t->table[k].name, name) != 0)
			k++;
		if (k == t->n_params &&
		    strncmp(name, ATTNRT_STATE_PREFIX, prefix) != 0) {
			ir_error(t->ctx, (ir_loc){0},
				 "--resume: %s is not a checkpoint of this "
				 "model: the model has no parameter '%s'",
				 t->o->resume, name);
			return false;
		}
	}
	drv_train_state now = run_state(t, 0);
	if (!drv_state_same_data(t->ctx, &t->resume, t->o->resume, &now) ||
	    !drv_state_restore(t->ctx, &t->resume, t->o->resume, &t->jit,
			       t->optim, t->losses,
			       t->data.valid ? t->valid_losses : NULL))
		return false;
	drv_state_warn_settings(t->ctx, &t->resume, t->o->resume, &now);
	t->step = st->step;
	t->first_epoch = st->epoch;
	fprintf(stderr, "resuming %s: %llu of %lld epochs done, %llu steps\n",
		t->o->resume, (unsigned long long)st->epoch,
		(long long)t->tc->epochs, (unsigned long long)st->step);
	return true;
}

/* ---- ranks that agree (MPI) ------------------------------------------------------- */

/* FNV-1a over n bytes, from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

#define FNV_START 0xcbf29ce484222325ULL

static uint64_t fnv_str(uint64_t h, const char *s)
{
	return s ? fnv(h, s, strlen(s) + 1) : fnv(h, "", 1);
}

static uint64_t samples_hash(uint64_t h, const drv_samples *s)
{
	if (!s)
		return fnv(h, "-", 1);
	h = fnv(h, &s->n, sizeof s->n);
	for (uint32_t i = 0; i < s->n_fields; i++)
		h = fnv(fnv_str(h, s->fields[i].name), s->fields[i].data,
			s->fields[i].row_bytes * s->n);
	return h;
}

static uint64_t data_hash(const drv_data *d)
{
	uint64_t h = samples_hash(samples_hash(FNV_START, d->train), d->valid);
	if (d->vocab)
		h = fnv_str(h, rt_text_vocab_string(d->vocab));
	if (d->nmt) {
		size_t n = rt_nmt_rows(d->nmt) * (size_t)rt_nmt_steps(d->nmt);
		for (int side = RT_NMT_SRC; side <= RT_NMT_TGT; side++) {
			const int32_t *valid = NULL;
			const int32_t *ids = rt_nmt_array(d->nmt,
							  (rt_nmt_side)side,
							  &valid);
			h = fnv(h, ids, n * sizeof *ids);
			h = fnv(h, valid, rt_nmt_rows(d->nmt) * sizeof *valid);
			h = fnv_str(h, attnrt_vocab_string(
					       rt_nmt_vocab(d->nmt,
							    (rt_nmt_side)side)));
		}
	}
	return h;
}

/* What every rank must have alike: its name, and the value's. */
#define N_AGREE 8
static const char *const agree_names[N_AGREE] = {
	"model (its parameters and loss)",
	"seed (--seed)",
	"epochs (--epochs)",
	"epochs done (--resume)",
	"batch (--batch)",
	"shards (--shards)",
	"optimizer (--lr, clip)",
	"data (--data, --examples, the file's contents)",
};

static void agree_values(const trainer *t, uint64_t *v)
{
	uint64_t h = fnv_str(FNV_START, t->tc->entry);
	h = fnv(h, &t->n_params, sizeof t->n_params);
	for (uint32_t i = 0; i < t->n_params; i++) {
		const attnrt_param_info *p = &t->table[i];
		h = fnv_str(h, p->name);
		h = fnv(h, &p->offset, sizeof p->offset);
		h = fnv(h, &p->rank, sizeof p->rank);
		h = fnv(h, p->dims, sizeof p->dims);
		h = fnv(h, &p->init, sizeof p->init);
		h = fnv(fnv(h, &p->a, sizeof p->a), &p->b, sizeof p->b);
	}
	v[0] = h;
	v[1] = t->o->seed;
	v[2] = (uint64_t)t->tc->epochs;
	v[3] = t->first_epoch;
	v[4] = (uint64_t)t->tc->batch;
	v[5] = (uint64_t)t->tc->shards;
	const attnrt_optim_config *c = &t->tc->optim;
	h = fnv(FNV_START, &c->kind, sizeof c->kind);
	h = fnv(fnv(h, &c->lr, sizeof c->lr), &c->beta1, sizeof c->beta1);
	h = fnv(fnv(h, &c->beta2, sizeof c->beta2), &c->eps, sizeof c->eps);
	v[6] = fnv(h, &t->tc->clip, sizeof t->tc->clip);
	v[7] = fnv(t->data_hash, &t->src.n_batches, sizeof t->src.n_batches);
}

/* Under MPI every rank must train alike: its steps are one run's
 * shards, so a rank given another --lr, --seed, --epochs, data, ...
 * would make the run wrong without a word, or wait forever in a
 * gather, or fail inside MPI. Every rank comes here once its training
 * is open, or once it failed to open it (is_ready false, its error
 * said): each rank's readiness and values are gathered to every rank
 * and compared with rank 0's. A rank that could not start is named by
 * rank 0 (when rank 0 could); a rank whose values differ says which, and rank 0 too. Every
 * rank learns the same here, so on failure they all stop together
 * (drv_dist_fail_together) and none is killed before it has said its
 * error. False after reporting, or if is_ready is false. */
static bool ranks_agree(trainer *t, bool is_ready)
{
	int n = t->tc->n_ranks, me = t->tc->rank;
	if (n <= 1)
		return is_ready;
	enum { READY = N_AGREE, STRIDE = N_AGREE + 1 };
	uint64_t *all = ir_alloc(t->ctx, (size_t)n * STRIDE * sizeof *all);
	if (!all) {
		ir_error(t->ctx, (ir_loc){0}, "out of memory");
		return false; /* the others wait in the gather: MPI_Abort */
	}
	uint64_t *mine = all + (size_t)me * STRIDE;
	memset(mine, 0, STRIDE * sizeof *mine);
	if (is_ready)
		agree_values(t, mine);
	mine[READY] = is_ready;
	if (!drv_dist_allgather(n, all, STRIDE * sizeof *all)) {
		ir_error(t->ctx, (ir_loc){0}, "MPI: the ranks' gather failed");
		ir_free(t->ctx, all);
		return false;
	}
	bool ok = true;
	for (int r = 0; r < n; r++)
		if (!all[(size_t)r * STRIDE + READY]) {
			if (me == 0 && is_ready)
				ir_error(t->ctx, (ir_loc){0},
					 "MPI: rank %d could not start "
					 "training (its error is above)",
					 r);
			ok = false;
		}
	for (int r = 1; ok && r < n; r++)
		for (int k = 0; k < N_AGREE; k++) {
			if (all[(size_t)r * STRIDE + k] == all[k])
				continue;
			if (me == 0 || me == r)
				ir_error(t->ctx, (ir_loc){0},
					 "MPI: rank %d's %s differs from rank "
					 "0's; every rank must be given the "
					 "same training (docs/cluster.md)",
					 r, agree_names[k]);
			ok = false;
			break;
		}
	ir_free(t->ctx, all);
	if (!ok)
		drv_dist_fail_together();
	return ok;
}

static bool trainer_open(trainer *t)
{
	char err[256];
	const ir_func *f = ir_module_default_func(t->m);
	if (!open_metrics(t) ||
	    !drv_data_open(t->ctx, t->m, t->o, t->tc, &t->data) ||
	    !shard_batch(t) || !open_jit(t, f) ||
	    !drv_grad_open(t->ctx, t->m, t->tc, &t->jit,
			   (uint32_t)t->tc->shards, &t->grad) ||
	    !drv_batch_source_open(t->ctx, t->m, t->tc, &t->data, &t->jit,
				   &t->grad, &t->src))
		return false;
	if (t->data.vocab)
		t->jit.vocab = rt_text_vocab_string(t->data.vocab);
	t->data_hash = data_hash(&t->data);
	if (t->o->stats)
		drv_print_jit_stats(t->m, t->jit.p);
	t->table = cg_program_params(t->jit.p, &t->n_params);
	if (attnrt_optim_create(NULL, &t->tc->optim, t->table, t->n_params,
				&t->optim, err, sizeof err) != ATTNRT_OK) {
		ir_error(t->ctx, (ir_loc){0}, "optimizer: %s", err);
		return false;
	}
	t->losses = ir_alloc(t->ctx,
			     ((size_t)t->tc->epochs + 1) * sizeof *t->losses);
	t->valid_losses = ir_alloc(t->ctx, ((size_t)t->tc->epochs + 1) *
						   sizeof *t->valid_losses);
	if (!t->losses || !t->valid_losses) {
		ir_error(t->ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	if (t->resume.file && !resume_state(t))
		return false;
	t->is_tty = isatty(STDERR_FILENO);
	attnrt_tuner_init(&t->tuner,
			  t->o->threads ? t->o->threads : cg_threads_get(), 0);
	t->fixed_threads = fixed_threads(t->o);
	return true;
}

static bool trainer_close(trainer *t)
{
	bool ok = true;
	if (t->metrics && fclose(t->metrics) != 0) {
		ir_error(t->ctx, (ir_loc){0}, "--metrics: cannot write '%s': %s",
			 t->o->metrics, strerror(errno));
		ok = false;
	}
	if (t->src.fini)
		t->src.fini(t->src.state);
	attnrt_optim_destroy(t->optim);
	drv_grad_close(&t->grad);
	drv_jit_close(t->ctx, &t->jit);
	drv_data_close(&t->data);
	ir_free(t->ctx, t->losses);
	ir_free(t->ctx, t->valid_losses);
	drv_resume_close(&t->resume);
	return ok;
}

static void print_header(const trainer *t)
{
	const attnrt_optim_config *c = &t->tc->optim;
	fprintf(stderr, "training %s: minimizing %s by %s(lr = %g)", t->m->name,
		t->tc->entry, c->kind == ATTNRT_OPTIM_ADAM ? "adam" : "sgd",
		c->lr);
	if (t->tc->clip > 0)
		fprintf(stderr, ", clip %g", t->tc->clip);
	fprintf(stderr, ", %lld epoch%s of %llu batch%s",
		(long long)t->tc->epochs, t->tc->epochs == 1 ? "" : "s",
		(unsigned long long)t->src.n_batches,
		t->src.n_batches == 1 ? "" : "es");
	if (t->grad.n_shards > 1)
		fprintf(stderr, " in %u shards of %lld rows", t->grad.n_shards,
			(long long)t->grad.inputs[0].dims[0]);
	fprintf(stderr, "\n");
}

static void print_summary(const trainer *t)
{
	double first = t->losses[0], last = t->losses[t->tc->epochs - 1];
	fprintf(stderr, "trained %s: loss %.4f -> %.4f in %llu steps",
		t->m->name, first, last, (unsigned long long)t->step);
	if (t->is_tty)
		fprintf(stderr, " (%.2f s)", drv_now_seconds() - t->start);
	fputc('\n', stderr);
}

/* The test MSE against the noise-free curve of regression models. */
static bool regression_mse(const trainer *t, double *mse)
{
	drv_exec e = {t->ctx, t->m, t->o, NULL, &t->jit};
	return !drv_is_regression(t->m) || drv_regression_mse(&e, mse);
}

static bool train_all(trainer *t)
{
	double mse_before = 0, mse_after = 0;
	if (!regression_mse(t, &mse_before))
		return false;
	print_header(t);
	t->start = drv_now_seconds();
	uint64_t n = (uint64_t)t->tc->epochs, every = (uint64_t)t->o->save_every;
	for (uint64_t e = t->first_epoch; e < n; e++) {
		if (!train_epoch(t, e))
			return false;
		if (every && (e + 1) % every == 0 && e + 1 < n &&
		    !save_state(t, e + 1))
			return false;
	}
	print_summary(t);
	t->host[0].name = "batches";
	t->host[1].name = "update";
	/* with shards on a team: how long its threads idled in them */
	t->host[2] = (drv_profile_host){"shards' wait", t->grad.team_calls,
					t->grad.team_wait_seconds};
	uint32_t n_host = t->host[2].calls ? 3 : 2;
	if (t->o->profile && !drv_profile_report(t->ctx, &t->jit, "training",
						 t->host, n_host, t->metrics))
		return false;
	if (!regression_mse(t, &mse_after))
		return false;
	if (drv_is_regression(t->m))
		fprintf(stderr,
			"test MSE vs truth: %.4f (before training "
			"%.4f)\n",
			mse_after, mse_before);
	drv_exec e = {t->ctx, t->m, t->o, NULL, &t->jit};
	return (!t->o->save || save_state(t, n)) &&
	       (!(t->o->plot || t->o->heatmap) ||
		drv_pictures(&e, t->losses, (uint32_t)t->tc->epochs)) &&
	       (!t->data.nmt || !drv_is_seq2seq(t->m) ||
		drv_translate(t->ctx, t->m, t->o, t->data.nmt, &t->jit,
			      t->metrics)) &&
	       (!t->o->generate ||
		drv_generate(t->ctx, t->m, t->o, t->data.vocab, &t->jit,
			     t->metrics));
}

/* --resume: reads the checkpoint's state, and its seed into *run_o. */
static bool read_resume(trainer *t, const drv_options *o, drv_options *run_o)
{
	*run_o = *o;
	if (!o->resume)
		return true;
	if (!drv_state_read(t->ctx, o->resume, &t->resume))
		return false;
	if (o->is_seed_set && o->seed != t->resume.state.seed) {
		ir_error(t->ctx, (ir_loc){0},
			 "--resume: %s was trained with --seed "
			 "%llu, not %llu",
			 o->resume, (unsigned long long)t->resume.state.seed,
			 (unsigned long long)o->seed);
		return false;
	}
	run_o->seed = t->resume.state.seed;
	return true;
}

bool drv_train(ir_ctx *ctx, ir_module *m, const drv_options *o,
	       const drv_train_config *tc)
{
	trainer t;
	drv_options run_o;
	memset(&t, 0, sizeof t);
	t.ctx = ctx;
	t.m = m;
	t.o = &run_o;
	t.tc = tc;
	bool ok = read_resume(&t, o, &run_o) && trainer_open(&t);
	ok = ranks_agree(&t, ok);
	if (ok) /* for the interpreter's re-run of a non-finite step */
		drv_data_bind_fallbacks(m, &t.data);
	ok = ok && train_all(&t);
	return trainer_close(&t) && ok;
}
