/*
 * plot.c - the pictures a run draws (--plot, --heatmap) and the report of
 * the regression models: the book's figure of kernel regression (truth,
 * prediction and training points), the loss per epoch like d2l's
 * Animator, and a heatmap of the attention weights like its
 * show_heatmaps. The model's functions run through drv_exec, so every
 * picture works under --interp, --jit and after --train alike. (The
 * seq2seq models' heatmaps, of a translation, are drawn by heatmap.c.)
 */
#include "driver.h"

#include "plot.h"

#include <stdlib.h>
#include <string.h>

bool drv_is_regression(const ir_module *m)
{
	const ir_func *f = ir_module_default_func(m);
	const ir_func *t = ir_module_find_func(m, "truth");
	const ir_func *d = ir_module_find_func(m, "data");
	return f && t && d && t->is_export && d->is_export && f->example &&
	       f->n_inputs == 1 && f->n_outputs >= 1 && t->n_inputs == 1 &&
	       t->n_outputs >= 1 && d->n_inputs == 0 && d->n_outputs >= 2;
}

/* Every value of a tensor as doubles (allocated through ctx). */
static double *to_doubles(ir_ctx *ctx, const interp_tensor *t, size_t *n)
{
	*n = (size_t)interp_tensor_numel(t);
	double *v = ir_alloc(ctx, (*n + 1) * sizeof *v);
	for (size_t i = 0; v && i < *n; i++)
		v[i] = interp_tensor_get(t, (int64_t)i);
	return v;
}

/* ---- regression ---------------------------------------------------------------------- */

/* The regression figure's data: the test points, the default entry's
 * prediction, the truth there, and the training set. */
typedef struct regression {
	interp_tensor x; /* borrowed from the example */
	interp_tensor pred[DRV_MAX_INPUTS], truth[DRV_MAX_INPUTS],
		data[DRV_MAX_INPUTS];
	const ir_func *f, *t, *d;
} regression;

static bool regression_run(const drv_exec *e, regression *r)
{
	memset(r, 0, sizeof *r);
	r->f = ir_module_default_func(e->m);
	r->t = ir_module_find_func(e->m, "truth");
	r->d = ir_module_find_func(e->m, "data");
	if (!drv_check_inputs(e->ctx, r->f, "--plot", true) ||
	    !drv_check_inputs(e->ctx, r->t, "--plot", true) ||
	    !drv_check_inputs(e->ctx, r->d, "--plot", true))
		return false;
	drv_example_inputs(e->m, r->f, &r->x);
	return drv_exec_call(e, r->f, &r->x, r->pred) &&
	       drv_exec_call(e, r->t, &r->x, r->truth) &&
	       drv_exec_call(e, r->d, NULL, r->data);
}

static void regression_fini(ir_ctx *ctx, regression *r)
{
	for (uint32_t i = 0; i < DRV_MAX_INPUTS; i++) {
		interp_tensor_fini(ctx, &r->pred[i]);
		interp_tensor_fini(ctx, &r->truth[i]);
		interp_tensor_fini(ctx, &r->data[i]);
	}
}

static bool regression_mse(ir_ctx *ctx, const regression *r, double *mse)
{
	int64_t n = interp_tensor_numel(&r->pred[0]);
	if (n == 0 || n != interp_tensor_numel(&r->truth[0])) {
		ir_error(ctx, r->t->loc,
			 "'%s' and 'truth' give %lld and %lld "
			 "values: no test MSE",
			 r->f->name, (long long)n,
			 (long long)interp_tensor_numel(&r->truth[0]));
		return false;
	}
	double sum = 0;
	for (int64_t i = 0; i < n; i++) {
		double d = interp_tensor_get(&r->pred[0], i) -
			   interp_tensor_get(&r->truth[0], i);
		sum += d * d;
	}
	*mse = sum / (double)n;
	return true;
}

bool drv_regression_mse(const drv_exec *e, double *mse)
{
	regression r;
	bool ok = regression_run(e, &r) && regression_mse(e->ctx, &r, mse);
	regression_fini(e->ctx, &r);
	return ok;
}

/* The three series of d2l's plot_kernel_reg. */
static bool draw_regression(ir_ctx *ctx, const regression *r, const char *path,
			    const char *model, double mse, char *err, size_t n)
{
	size_t nx, np, nt, ndx, ndy;
	double *x = to_doubles(ctx, &r->x, &nx);
	double *pred = to_doubles(ctx, &r->pred[0], &np);
	double *truth = to_doubles(ctx, &r->truth[0], &nt);
	double *dx = to_doubles(ctx, &r->data[0], &ndx);
	double *dy = to_doubles(ctx, &r->data[1], &ndy);
	bool ok = false;
	if (x && pred && truth && dx && dy) {
		plot_series s[3] = {
			{"Truth", x, truth, nx < nt ? nx : nt, PLOT_LINE},
			{"Pred", x, pred, nx < np ? nx : np, PLOT_LINE},
			{"Training data", dx, dy, ndx < ndy ? ndx : ndy,
			 PLOT_POINTS},
		};
		char title[256];
		snprintf(title, sizeof title,
			 "%s: prediction and truth (test MSE %.4f)", model, mse);
		plot_lines p = {title, "x", "y", s, 3, {0, 0}, {0, 0}};
		ok = plot_lines_save(path, &p, err, n);
	}
	ir_free(ctx, x);
	ir_free(ctx, pred);
	ir_free(ctx, truth);
	ir_free(ctx, dx);
	ir_free(ctx, dy);
	return ok;
}

static bool plot_regression(const drv_exec *e, const char *path)
{
	regression r;
	double mse = 0;
	char err[512] = "out of memory";
	bool ok = regression_run(e, &r) && regression_mse(e->ctx, &r, &mse);
	if (ok && !draw_regression(e->ctx, &r, path, e->m->name, mse, err,
				   sizeof err)) {
		ir_error(e->ctx, (ir_loc){0}, "--plot: %s", err);
		ok = false;
	}
	if (ok)
		printf("wrote %s: truth, prediction and %lld training points "
		       "(test MSE vs truth %.4f)\n",
		       path, (long long)interp_tensor_numel(&r.data[0]), mse);
	regression_fini(e->ctx, &r);
	return ok;
}

/* ---- the loss curve ---------------------------------------------------------------------- */

static bool plot_losses(ir_ctx *ctx, const char *model, const char *path,
			const double *losses, uint32_t n_epochs)
{
	double *epochs = ir_alloc(ctx, (n_epochs + 1) * sizeof *epochs);
	if (!epochs)
		return false;
	for (uint32_t i = 0; i < n_epochs; i++)
		epochs[i] = i + 1;
	/* one epoch is a point, not a line */
	plot_series s = {"train loss", epochs, losses, n_epochs,
			 n_epochs > 1 ? PLOT_LINE : PLOT_POINTS};
	char title[256], err[512];
	snprintf(title, sizeof title, "%s: training loss", model);
	plot_lines p = {title, "epoch", "loss", &s, 1, {0, 0}, {0, 0}};
	bool ok = plot_lines_save(path, &p, err, sizeof err);
	ir_free(ctx, epochs);
	if (!ok) {
		ir_error(ctx, (ir_loc){0}, "--plot: %s", err);
		return false;
	}
	printf("wrote %s: the loss of %u epoch%s\n", path, n_epochs,
	       n_epochs == 1 ? "" : "s");
	return true;
}

bool drv_plot_loaded(ir_ctx *ctx, const ir_module *m, const drv_options *o)
{
	double *losses = NULL;
	uint32_t n = 0;
	bool ok = drv_state_losses(ctx, o->load, &losses, &n) &&
		  plot_losses(ctx, m->name, o->plot, losses, n);
	free(losses);
	return ok;
}

/* ---- the heatmap --------------------------------------------------------------------------- */

/* The output --heatmap draws: --heatmap-output's, else `weights`. */
static const char *heatmap_name(const drv_options *o)
{
	return o->heatmap_output ? o->heatmap_output : "weights";
}

static int32_t find_output(const ir_func *f, const char *name)
{
	for (uint32_t i = 0; i < f->n_outputs; i++)
		if (f->output_names && f->output_names[i] &&
		    strcmp(f->output_names[i], name) == 0)
			return (int32_t)i;
	return -1;
}

/* The entry has no output `name`: says so, with the nearest name, or
 * else the names it has. */
static void no_such_output(ir_ctx *ctx, const ir_func *f, const char *opt,
			   const char *name)
{
	ir_suggest sg;
	char names[256] = "";
	size_t at = 0;
	ir_suggest_init(&sg, name);
	for (uint32_t i = 0; f->output_names && i < f->n_outputs; i++) {
		if (!f->output_names[i] || at >= sizeof names)
			continue;
		ir_suggest_offer(&sg, f->output_names[i]);
		at += (size_t)snprintf(names + at, sizeof names - at, "%s%s",
				       at ? ", " : "", f->output_names[i]);
	}
	if (sg.best)
		ir_error(ctx, f->loc,
			 "%s: '%s' has no output named '%s'; did you "
			 "mean '%s'?",
			 opt, f->name, name, sg.best);
	else if (*names)
		ir_error(ctx, f->loc,
			 "%s: '%s' has no output named '%s' to draw "
			 "(its outputs: %s)",
			 opt, f->name, name, names);
	else
		ir_error(ctx, f->loc,
			 "%s: '%s' has no output named '%s' to draw", opt,
			 f->name, name);
}

/* Output i is a matrix (2-D) or a stack of them (3-D); else an error. */
static bool check_heatmap_rank(ir_ctx *ctx, const ir_module *m,
			       const ir_func *f, int32_t i, const char *opt)
{
	const ir_type *t = &f->g.nodes[f->outputs[i]].type;
	if (t->rank == 2 || t->rank == 3)
		return true;
	char dims[160];
	ir_type_format(m, t, dims, sizeof dims);
	ir_error(ctx, f->loc,
		 "%s: output '%s' of '%s' is [%s], of rank %d: "
		 "a heatmap draws a 2-D matrix or a 3-D stack of them",
		 opt, f->output_names[i], f->name, dims, t->rank);
	return false;
}

/* The panels of a 2-D or 3-D tensor (N, Q, K): one Q x K matrix for
 * rank 2; for rank 3 one (N, K) matrix when Q is 1, the book's reshape
 * of the weights of every query of the batch into one picture (d2l
 * 11.3), else N panels of Q x K, 8 to a row. */
#define PANEL_TITLE 24 /* "[%zu]" of any size_t */

typedef struct heat_panels {
	float *v;
	plot_heatmap *panels;
	char *titles; /* n of PANEL_TITLE bytes */
	size_t n, rows, cols, q, k;
} heat_panels;

static bool panels_make(ir_ctx *ctx, const interp_tensor *t, heat_panels *hp)
{
	memset(hp, 0, sizeof *hp);
	size_t numel = (size_t)interp_tensor_numel(t);
	hp->k = (size_t)t->dims[t->rank - 1];
	hp->q = (size_t)t->dims[t->rank - 2];
	hp->n = t->rank == 3 ? (size_t)t->dims[0] : 1;
	if (hp->q == 1 && hp->n > 1) {
		hp->q = hp->n;
		hp->n = 1;
	}
	if (hp->n > 256 || numel > PLOT_MAX_CELLS) {
		ir_error(ctx, (ir_loc){0},
			 "--heatmap: %zu matrices of %zu x %zu "
			 "are too many to draw (at most 256 and %d cells)",
			 hp->n, hp->q, hp->k, PLOT_MAX_CELLS);
		return false;
	}
	hp->cols = hp->n < 8 ? hp->n : 8;
	hp->rows = (hp->n + hp->cols - 1) / hp->cols;
	hp->v = ir_alloc(ctx, (numel + 1) * sizeof *hp->v);
	hp->panels = ir_alloc(ctx,
			      (hp->rows * hp->cols + 1) * sizeof *hp->panels);
	hp->titles = ir_alloc(ctx, hp->n * PANEL_TITLE + 1);
	if (!hp->v || !hp->panels || !hp->titles) {
		ir_error(ctx, (ir_loc){0}, "--heatmap: out of memory");
		return false;
	}
	for (size_t i = 0; i < numel; i++)
		hp->v[i] = (float)interp_tensor_get(t, (int64_t)i);
	memset(hp->panels, 0, hp->rows * hp->cols * sizeof *hp->panels);
	for (size_t i = 0; i < hp->n; i++) {
		char *title = hp->titles + PANEL_TITLE * i;
		snprintf(title, PANEL_TITLE, "[%zu]", i);
		hp->panels[i] = (plot_heatmap){hp->n > 1 ? title : NULL,
					       NULL,
					       NULL,
					       hp->v + i * hp->q * hp->k,
					       hp->q,
					       hp->k};
	}
	return true;
}

static void panels_fini(ir_ctx *ctx, heat_panels *hp)
{
	ir_free(ctx, hp->v);
	ir_free(ctx, hp->panels);
	ir_free(ctx, hp->titles);
}

static bool draw_heatmap(const drv_exec *e, const ir_func *f, const char *name,
			 const interp_tensor *w, const char *path)
{
	heat_panels hp;
	char dims[160], title[512], err[512] = "out of memory";
	bool is_weights = strcmp(name, "weights") == 0, ok = false;
	drv_dims_format(w->dims, w->rank, dims, sizeof dims);
	snprintf(title, sizeof title, "%s: %s%s %s", f->name,
		 is_weights ? "attention " : "", name, dims);
	if (panels_make(e->ctx, w, &hp)) {
		plot_grid g = {title,
			       is_weights ? "Keys" : "Column",
			       is_weights ? "Queries" : "Row",
			       hp.panels,
			       NULL,
			       hp.rows,
			       hp.cols};
		ok = hp.n == 1
			     ? plot_heatmap_save(path,
						 &(plot_heatmap){title, g.xlabel,
								 g.ylabel, hp.v,
								 hp.q, hp.k},
						 err, sizeof err)
			     : plot_grid_save(path, &g, err, sizeof err);
		if (!ok)
			ir_error(e->ctx, (ir_loc){0}, "--heatmap: %s", err);
	}
	if (ok && hp.n == 1)
		printf("wrote %s: %s's %s %s as a %zu x %zu heatmap\n", path,
		       f->name, name, dims, hp.q, hp.k);
	else if (ok)
		printf("wrote %s: %s's %s %s as %zu heatmaps of %zu x %zu\n",
		       path, f->name, name, dims, hp.n, hp.q, hp.k);
	panels_fini(e->ctx, &hp);
	return ok;
}

static bool heatmap_of_entry(const drv_exec *e, const char *path)
{
	const ir_func *f = drv_entry(e->ctx, e->m, e->o, true);
	if (!f)
		return false;
	const char *name = heatmap_name(e->o);
	int32_t w = find_output(f, name);
	interp_tensor in[DRV_MAX_INPUTS], outs[DRV_MAX_INPUTS];
	if (!drv_check_inputs(e->ctx, f, "--heatmap", true))
		return false;
	drv_example_inputs(e->m, f, in);
	if (!drv_exec_call(e, f, in, outs))
		return false;
	bool ok = draw_heatmap(e, f, name, &outs[w], path);
	for (uint32_t i = 0; i < f->n_outputs; i++)
		interp_tensor_fini(e->ctx, &outs[i]);
	return ok;
}

/* The entry has the output --heatmap draws, of rank 2 or 3. */
static bool check_heatmap_output(ir_ctx *ctx, const ir_module *m,
				 const drv_options *o)
{
	const char *opt = o->heatmap_output ? "--heatmap-output" : "--heatmap";
	const ir_func *f = drv_entry(ctx, m, o, true);
	if (!f)
		return false;
	int32_t i = find_output(f, heatmap_name(o));
	if (i < 0) {
		no_such_output(ctx, f, opt, heatmap_name(o));
		return false;
	}
	return check_heatmap_rank(ctx, m, f, i, opt);
}

/* The pictures are SVG documents or PNG images, as the name says: any
 * other name (a.jpg) would get one of them under a wrong name, so it is
 * refused before anything runs. */
static bool check_picture_name(ir_ctx *ctx, const char *opt, const char *path)
{
	if (!path || plot_format_of(path) != PLOT_OTHER)
		return true;
	ir_error(ctx, (ir_loc){0},
		 "%s: '%s': attnc draws SVG or PNG, into a "
		 "file named *.svg or *.png",
		 opt, path);
	return false;
}

bool drv_pictures_check(ir_ctx *ctx, const ir_module *m, const drv_options *o,
			bool is_training)
{
	if (!check_picture_name(ctx, "--plot", o->plot) ||
	    !check_picture_name(ctx, "--heatmap", o->heatmap))
		return false;
	if (o->plot && !is_training && !o->load && !drv_is_regression(m)) {
		ir_error(ctx, (ir_loc){0},
			 "--plot: model %s is not a regression "
			 "model (it exports no `truth` and `data`), and the loss "
			 "curve needs --train, or --load of a checkpoint that "
			 "--train --save wrote",
			 m->name);
		return false;
	}
	if (o->plot && !is_training && o->load && !drv_is_regression(m)) {
		double *losses = NULL;
		uint32_t n = 0;
		bool has_losses = drv_state_losses(ctx, o->load, &losses, &n);
		free(losses);
		if (!has_losses)
			return false;
	}
	if (!o->heatmap)
		return true;
	if (drv_is_seq2seq(m) && o->heatmap_output) {
		ir_error(ctx, (ir_loc){0},
			 "--heatmap-output: model %s draws the "
			 "attention of a translation, not an output",
			 m->name);
		return false;
	}
	if (drv_is_seq2seq(m) && (is_training || o->n_translate))
		return true; /* the attention of the last translation */
	if (drv_is_seq2seq(m)) {
		ir_error(ctx, (ir_loc){0},
			 "--heatmap: model %s draws the "
			 "attention of a translation: give --train, or --load "
			 "and --translate",
			 m->name);
		return false;
	}
	return check_heatmap_output(ctx, m, o);
}

bool drv_pictures(const drv_exec *e, const double *losses, uint32_t n_epochs)
{
	const char *plot = e->o->plot;
	if (!drv_pictures_check(e->ctx, e->m, e->o, losses != NULL))
		return false;
	if (plot && drv_is_regression(e->m) && !plot_regression(e, plot))
		return false;
	if (plot && !drv_is_regression(e->m) && losses &&
	    !plot_losses(e->ctx, e->m->name, plot, losses, n_epochs))
		return false;
	if (plot && !drv_is_regression(e->m) && !losses &&
	    !drv_plot_loaded(e->ctx, e->m, e->o))
		return false;
	/* a seq2seq model's heatmap comes with its translations */
	return !e->o->heatmap || drv_is_seq2seq(e->m) ||
	       heatmap_of_entry(e, e->o->heatmap);
}
