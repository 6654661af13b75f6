/*
 * plot.c - the pictures a run draws (--plot, --heatmap) and the report of
 * the regression models: the book's figure of kernel regression (truth,
 * prediction and training points), the loss per epoch like d2l's
 * Animator, and a heatmap of the attention weights like its
 * show_heatmaps. The model's functions run through drv_exec, so every
 * picture works under --interp, --jit and after --train alike. (The
 * seq2seq models' heatmaps, of a translation, are drawn by attention.c.)
 */
#include "driver.h"

#include "rt_plot.h"

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
	interp_tensor x;            /* borrowed from the example */
	interp_tensor pred[64], truth[64], data[64];
	const ir_func *f, *t, *d;
} regression;

static bool regression_run(const drv_exec *e, regression *r)
{
	memset(r, 0, sizeof *r);
	r->f = ir_module_default_func(e->m);
	r->t = ir_module_find_func(e->m, "truth");
	r->d = ir_module_find_func(e->m, "data");
	if (r->f->n_outputs > 64 || r->t->n_outputs > 64 || r->d->n_outputs > 64) {
		ir_error(e->ctx, r->f->loc, "too many outputs");
		return false;
	}
	drv_example_inputs(e->m, r->f, &r->x);
	return drv_exec_call(e, r->f, &r->x, r->pred) &&
	       drv_exec_call(e, r->t, &r->x, r->truth) &&
	       drv_exec_call(e, r->d, NULL, r->data);
}

static void regression_fini(ir_ctx *ctx, regression *r)
{
	for (uint32_t i = 0; i < 64; i++) {
		interp_tensor_fini(ctx, &r->pred[i]);
		interp_tensor_fini(ctx, &r->truth[i]);
		interp_tensor_fini(ctx, &r->data[i]);
	}
}

static bool regression_mse(ir_ctx *ctx, const regression *r, double *mse)
{
	int64_t n = interp_tensor_numel(&r->pred[0]);
	if (n == 0 || n != interp_tensor_numel(&r->truth[0])) {
		ir_error(ctx, r->t->loc, "'%s' and 'truth' give %lld and %lld "
			 "values: no test MSE", r->f->name, (long long)n,
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
static int draw_regression(ir_ctx *ctx, const regression *r, const char *path,
			   const char *model, double mse, char *err, size_t n)
{
	size_t nx, np, nt, ndx, ndy;
	double *x = to_doubles(ctx, &r->x, &nx);
	double *pred = to_doubles(ctx, &r->pred[0], &np);
	double *truth = to_doubles(ctx, &r->truth[0], &nt);
	double *dx = to_doubles(ctx, &r->data[0], &ndx);
	double *dy = to_doubles(ctx, &r->data[1], &ndy);
	int rc = ATTNRT_ERR_NOMEM;
	if (x && pred && truth && dx && dy) {
		rt_plot_series s[3] = {
			{"Truth", x, truth, nx < nt ? nx : nt, RT_PLOT_LINE},
			{"Pred", x, pred, nx < np ? nx : np, RT_PLOT_LINE},
			{"Training data", dx, dy, ndx < ndy ? ndx : ndy, RT_PLOT_POINTS},
		};
		char title[256];
		snprintf(title, sizeof title, "%s: prediction and truth (test MSE %.4f)",
			 model, mse);
		rt_plot_lines p = {title, "x", "y", s, 3, {0, 0}, {0, 0}};
		rc = rt_plot_lines_save(path, &p, err, n);
	}
	ir_free(ctx, x);
	ir_free(ctx, pred);
	ir_free(ctx, truth);
	ir_free(ctx, dx);
	ir_free(ctx, dy);
	return rc;
}

static bool plot_regression(const drv_exec *e, const char *path)
{
	regression r;
	double mse = 0;
	char err[512] = "out of memory";
	bool ok = regression_run(e, &r) && regression_mse(e->ctx, &r, &mse);
	if (ok && draw_regression(e->ctx, &r, path, e->m->name, mse, err,
				  sizeof err) != ATTNRT_OK) {
		ir_error(e->ctx, (ir_loc){0}, "--plot: %s", err);
		ok = false;
	}
	if (ok)
		printf("wrote %s: truth, prediction and %lld training points "
		       "(test MSE vs truth %.4f)\n", path,
		       (long long)interp_tensor_numel(&r.data[0]), mse);
	regression_fini(e->ctx, &r);
	return ok;
}

/* ---- the loss curve ---------------------------------------------------------------------- */

static bool plot_losses(const drv_exec *e, const char *path,
			const double *losses, uint32_t n_epochs)
{
	double *epochs = ir_alloc(e->ctx, (n_epochs + 1) * sizeof *epochs);
	if (!epochs)
		return false;
	for (uint32_t i = 0; i < n_epochs; i++)
		epochs[i] = i + 1;
	/* one epoch is a point, not a line */
	rt_plot_series s = {"train loss", epochs, losses, n_epochs,
			    n_epochs > 1 ? RT_PLOT_LINE : RT_PLOT_POINTS};
	char title[256], err[512];
	snprintf(title, sizeof title, "%s: training loss", e->m->name);
	rt_plot_lines p = {title, "epoch", "loss", &s, 1, {0, 0}, {0, 0}};
	int rc = rt_plot_lines_save(path, &p, err, sizeof err);
	ir_free(e->ctx, epochs);
	if (rc != ATTNRT_OK) {
		ir_error(e->ctx, (ir_loc){0}, "--plot: %s", err);
		return false;
	}
	printf("wrote %s: the loss of %u epochs\n", path, n_epochs);
	return true;
}

/* ---- the heatmap --------------------------------------------------------------------------- */

static int32_t find_output(const ir_func *f, const char *name)
{
	for (uint32_t i = 0; i < f->n_outputs; i++)
		if (f->output_names && f->output_names[i] &&
		    strcmp(f->output_names[i], name) == 0)
			return (int32_t)i;
	return -1;
}

/* The first matrix of t: its last two dims (a vector is one row), with
 * "[0, 0]" in index for the leading dims it drops. */
static float *first_matrix(ir_ctx *ctx, const interp_tensor *t, size_t *rows,
			   size_t *cols, char *index, size_t size)
{
	*cols = t->rank >= 1 ? (size_t)t->dims[t->rank - 1] : 1;
	*rows = t->rank >= 2 ? (size_t)t->dims[t->rank - 2] : 1;
	size_t n = (size_t)snprintf(index, size, "%s", t->rank > 2 ? "[" : "");
	for (int d = 0; d + 2 < t->rank && n < size; d++)
		n += (size_t)snprintf(index + n, size - n, "%s0", d ? ", " : "");
	if (t->rank > 2 && n < size)
		snprintf(index + n, size - n, "]");
	float *v = ir_alloc(ctx, (*rows * *cols + 1) * sizeof *v);
	for (size_t i = 0; v && i < *rows * *cols; i++)
		v[i] = (float)interp_tensor_get(t, (int64_t)i);
	return v;
}

static bool draw_heatmap(const drv_exec *e, const ir_func *f,
			 const interp_tensor *w, const char *path)
{
	size_t rows, cols;
	char index[64], dims[160], title[512], err[512] = "out of memory";
	float *v = first_matrix(e->ctx, w, &rows, &cols, index, sizeof index);
	drv_dims_format(w->dims, w->rank, dims, sizeof dims);
	snprintf(title, sizeof title, "%s: attention weights%s of %s", f->name,
		 index, dims);
	rt_plot_heatmap h = {title, "Keys", "Queries", v, rows, cols};
	int rc = v ? rt_plot_heatmap_save(path, &h, err, sizeof err)
		   : ATTNRT_ERR_NOMEM;
	ir_free(e->ctx, v);
	if (rc != ATTNRT_OK) {
		ir_error(e->ctx, (ir_loc){0}, "--heatmap: %s", err);
		return false;
	}
	printf("wrote %s: %s's weights%s (%zu x %zu)\n", path, f->name, index,
	       rows, cols);
	return true;
}

static bool plot_heatmap(const drv_exec *e, const char *path)
{
	const ir_func *f = drv_entry(e->ctx, e->m, e->o, true);
	if (!f)
		return false;
	int32_t w = find_output(f, "weights");
	interp_tensor in[64], outs[64];
	if (f->n_inputs > 64 || f->n_outputs > 64) {
		ir_error(e->ctx, f->loc, "too many inputs or outputs");
		return false;
	}
	drv_example_inputs(e->m, f, in);
	if (!drv_exec_call(e, f, in, outs))
		return false;
	bool ok = draw_heatmap(e, f, &outs[w], path);
	for (uint32_t i = 0; i < f->n_outputs; i++)
		interp_tensor_fini(e->ctx, &outs[i]);
	return ok;
}

/* The pictures are SVG documents or PNG images, as the name says: any
 * other name (a.jpg) would get one of them under a wrong name, so it is
 * refused before anything runs. */
static bool check_picture_name(ir_ctx *ctx, const char *opt, const char *path)
{
	if (!path || rt_plot_format_of(path) != RT_PLOT_OTHER)
		return true;
	ir_error(ctx, (ir_loc){0}, "%s: '%s': attnc draws SVG or PNG, into a "
		 "file named *.svg or *.png", opt, path);
	return false;
}

bool drv_pictures_check(ir_ctx *ctx, const ir_module *m, const drv_options *o,
			bool is_training)
{
	if (!check_picture_name(ctx, "--plot", o->plot) ||
	    !check_picture_name(ctx, "--heatmap", o->heatmap))
		return false;
	if (o->plot && !is_training && !drv_is_regression(m)) {
		ir_error(ctx, (ir_loc){0}, "--plot: model %s is not a regression "
			 "model (it exports no `truth` and `data`), and the loss "
			 "curve needs --train", m->name);
		return false;
	}
	if (!o->heatmap)
		return true;
	if (drv_is_seq2seq(m) && (is_training || o->n_translate))
		return true; /* the attention of the last translation */
	if (drv_is_seq2seq(m)) {
		ir_error(ctx, (ir_loc){0}, "--heatmap: model %s draws the "
			 "attention of a translation: give --train, or --load "
			 "and --translate", m->name);
		return false;
	}
	const ir_func *f = drv_entry(ctx, m, o, true);
	if (f && find_output(f, "weights") < 0)
		ir_error(ctx, f->loc, "--heatmap: '%s' has no output named "
			 "'weights' to draw", f->name);
	return f && find_output(f, "weights") >= 0;
}

bool drv_pictures(const drv_exec *e, const double *losses, uint32_t n_epochs)
{
	const char *plot = e->o->plot;
	if (!drv_pictures_check(e->ctx, e->m, e->o, losses != NULL))
		return false;
	if (plot && drv_is_regression(e->m) && !plot_regression(e, plot))
		return false;
	if (plot && !drv_is_regression(e->m) &&
	    !plot_losses(e, plot, losses, n_epochs))
		return false;
	/* a seq2seq model's heatmap comes with its translations */
	return !e->o->heatmap || drv_is_seq2seq(e->m) ||
	       plot_heatmap(e, e->o->heatmap);
}
