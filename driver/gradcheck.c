/*
 * gradcheck.c - --gradcheck: is the compiled training program's gradient
 * right? The gradient function runs once as native code (float32, the
 * training mode and step 0 of a training run, on the first batch); the
 * loss entry then runs under the reference interpreter in float64 at
 * p + h v and p - h v, and the central difference (L+ - L-) / 2h is
 * compared with the compiled g . v: along one random unit direction v
 * over every parameter (which tests all of them at once), and at a few
 * random coordinates of each parameter (which says which one is wrong).
 *
 * A relative error is |a - b| / max(|a|, |b|, floor), the floor being
 * 1e-3 of the gradient's size (its largest element for a coordinate, its
 * norm for the direction), so that float32 rounding on a component that
 * is nearly zero does not count as an error. The check passes below 1e-2.
 */
#include "driver.h"

#include "rt_rng.h"

#include <math.h>
#include <string.h>

#define GC_THRESHOLD 1e-2
#define GC_COORDS 3                /* coordinates checked per parameter */
#define GC_STREAM_DIR 0x67636431u  /* random streams of the direction */
#define GC_STREAM_COORD 0x67636332u /* and of the coordinates */

typedef struct checker {
	ir_ctx *ctx;
	const ir_module *m;
	const drv_options *o;
	const ir_func *loss_f; /* the loss entry, after the passes */
	drv_data data;
	drv_jit jit;
	drv_grad grad;
	drv_batch_source src;
	drv_batch batch;
	interp_tensor in[64];
	interp_tensor *params; /* float64 copies, perturbed in place */
	const attnrt_param_info *table;
	uint32_t n_params;
	double g_max, g_norm; /* of the compiled gradient */
} checker;

static double rel_err(double a, double b, double floor)
{
	double d = fmax(fmax(fabs(a), fabs(b)), floor);
	return d > 0 ? fabs(a - b) / d : 0;
}

/* "3.1e-05", or "< 1e-09" at the noise floor of float64. */
static const char *format_err(double e, char *buf, size_t size)
{
	if (e < 1e-9)
		snprintf(buf, size, "< 1e-09");
	else
		snprintf(buf, size, "%.1e", e);
	return buf;
}

static const float *grad_of(const checker *c, uint32_t i)
{
	return (const float *)((const char *)c->grad.grads + c->table[i].offset);
}

static double *param64(const checker *c, uint32_t i)
{
	return c->params[i].data;
}

/* The loss, sum of the entry's first output, in float64 at the current
 * (perturbed) parameters. */
static bool loss_at(checker *c, double *loss)
{
	interp_tensor outs[64];
	interp_opts opts = {.is_f64 = true, .is_training = true,
			    .seed = c->o->seed, .step = 0};
	if (!interp_run(c->ctx, c->m, c->loss_f, &opts, c->params, c->in, outs))
		return false;
	*loss = 0;
	for (int64_t k = 0; k < interp_tensor_numel(&outs[0]); k++)
		*loss += interp_tensor_get(&outs[0], k);
	for (uint32_t i = 0; i < c->loss_f->n_outputs; i++)
		interp_tensor_fini(c->ctx, &outs[i]);
	return true;
}

/* (L(x + h) - L(x - h)) / 2h for one coordinate, put back afterwards. */
static bool coord_difference(checker *c, double *x, double h, double *fd)
{
	double x0 = *x, lp, lm;
	*x = x0 + h;
	bool ok = loss_at(c, &lp);
	*x = x0 - h;
	ok = ok && loss_at(c, &lm);
	*x = x0;
	*fd = (lp - lm) / (2 * h);
	return ok;
}

/* Adds s * v to every parameter, v the direction (drawn again each time
 * from the same counters: it is never stored). */
static void move_along(checker *c, double s, double v_norm)
{
	for (uint32_t i = 0; i < c->n_params; i++) {
		double *p = param64(c, i);
		for (int64_t k = 0; k < interp_tensor_numel(&c->params[i]); k++)
			p[k] += s * rt_rng_normal(c->o->seed, GC_STREAM_DIR + i,
						  (uint64_t)k) / v_norm;
	}
}

static bool check_direction(checker *c, double *err)
{
	double v_norm = 0, gv = 0, h = 1e-4, lp, lm;
	for (uint32_t i = 0; i < c->n_params; i++)
		for (int64_t k = 0; k < interp_tensor_numel(&c->params[i]); k++) {
			double v = rt_rng_normal(c->o->seed, GC_STREAM_DIR + i, (uint64_t)k);
			v_norm += v * v;
			gv += v * grad_of(c, i)[k];
		}
	v_norm = sqrt(v_norm);
	gv /= v_norm;
	move_along(c, h, v_norm);
	bool ok = loss_at(c, &lp);
	move_along(c, -2 * h, v_norm);
	ok = ok && loss_at(c, &lm);
	if (!ok)
		return false;
	double fd = (lp - lm) / (2 * h);
	char e[32];
	*err = rel_err(gv, fd, 1e-3 * c->g_norm);
	printf("direction: g.v %.6e, central difference %.6e, relative error %s\n",
	       gv, fd, format_err(*err, e, sizeof e));
	return true;
}

static bool check_param(checker *c, uint32_t i, int name_width, double *worst)
{
	int64_t n = interp_tensor_numel(&c->params[i]);
	int n_coords = n < GC_COORDS ? (int)n : GC_COORDS;
	double err = 0;
	for (int j = 0; j < n_coords; j++) {
		int64_t k = (int64_t)(rt_rng_bits(c->o->seed, GC_STREAM_COORD + i,
						  (uint64_t)j) % (uint64_t)n);
		double *x = &param64(c, i)[k], fd;
		if (!coord_difference(c, x, 1e-4 * fmax(1, fabs(*x)), &fd))
			return false;
		err = fmax(err, rel_err(grad_of(c, i)[k], fd, 1e-3 * c->g_max));
	}
	char dims[160], e[32];
	drv_dims_format(c->params[i].dims, c->params[i].rank, dims, sizeof dims);
	printf("  %-*s %-14s %d point%s, worst relative error %s\n", name_width,
	       c->table[i].name, dims, n_coords, n_coords == 1 ? "" : "s",
	       format_err(err, e, sizeof e));
	*worst = fmax(*worst, err);
	return true;
}

static void gradient_size(checker *c)
{
	for (uint32_t i = 0; i < c->n_params; i++) {
		int64_t n = interp_tensor_numel(&c->params[i]);
		for (int64_t k = 0; k < n; k++)
			c->g_max = fmax(c->g_max, fabs(grad_of(c, i)[k]));
	}
	c->g_norm = attnrt_grad_norm(c->table, c->n_params, c->grad.grads);
}

/* Runs the compiled gradient on the first batch; makes the float64
 * copies of the parameters. */
static bool checker_open(checker *c, const drv_train_config *tc)
{
	double loss;
	attnrt_run run = {.seed = c->o->seed, .is_training = 1,
			  .n_threads = c->o->threads};
	c->loss_f = ir_module_find_func(c->m, tc->entry);
	if (c->loss_f->n_outputs > 64) {
		ir_error(c->ctx, c->loss_f->loc, "too many outputs");
		return false;
	}
	if (!drv_data_open(c->ctx, c->m, c->o, tc, &c->data) ||
	    !drv_jit_open(c->ctx, c->m, &c->data.o, ir_module_default_func(c->m),
			  true, &c->jit) ||
	    !drv_grad_open(c->ctx, c->m, tc, &c->jit, 1, &c->grad) ||
	    !drv_batch_source_open(c->ctx, c->m, tc, &c->data, &c->jit, &c->grad,
				   &c->src) ||
	    !c->src.fill(c->src.state, 0, 0, &c->batch) ||
	    !drv_grad_run(c->ctx, &c->jit, &c->grad, &c->batch, &run, &loss))
		return false;
	c->table = cg_program_params(c->jit.p, &c->n_params);
	c->params = ir_alloc(c->ctx, (c->m->n_params + 1) * sizeof *c->params);
	if (!c->params ||
	    !drv_params_tensors(c->ctx, c->m, &c->jit, true, c->params))
		return false;
	drv_batch_tensors(&c->grad, &c->batch, c->in);
	gradient_size(c);
	return true;
}

static void checker_close(checker *c)
{
	for (uint32_t i = 0; c->params && i < c->m->n_params; i++)
		interp_tensor_fini(c->ctx, &c->params[i]);
	ir_free(c->ctx, c->params);
	if (c->src.fini)
		c->src.fini(c->src.state);
	drv_grad_close(&c->grad);
	drv_jit_close(c->ctx, &c->jit);
	drv_data_close(&c->data);
}

static bool run_checks(checker *c, double *worst)
{
	size_t width = 0;
	for (uint32_t i = 0; i < c->n_params; i++)
		if (strlen(c->table[i].name) > width)
			width = strlen(c->table[i].name);
	if (!check_direction(c, worst))
		return false;
	/* the direction moved the parameters: start again from the block */
	for (uint32_t i = 0; i < c->m->n_params; i++)
		interp_tensor_fini(c->ctx, &c->params[i]);
	if (!drv_params_tensors(c->ctx, c->m, &c->jit, true, c->params))
		return false;
	for (uint32_t i = 0; i < c->n_params; i++)
		if (!check_param(c, i, (int)width, worst))
			return false;
	return true;
}

/* The dims the data binds (V_src, V_tgt) become their fallbacks, which
 * is where the interpreter, which binds from inputs, takes them from. */
bool drv_gradcheck(ir_ctx *ctx, ir_module *m, const drv_options *o,
		   const drv_train_config *tc)
{
	checker c;
	memset(&c, 0, sizeof c);
	c.ctx = ctx;
	c.m = m;
	c.o = o;
	double worst = 0;
	char name[256], e[32];
	bool ok = checker_open(&c, tc);
	if (ok)
		drv_data_bind_fallbacks(m, &c.data);
	if (ok && !c.n_params) {
		printf("gradcheck %s: the model has no parameters\n", m->name);
	} else if (ok) {
		printf("gradcheck %s: %s (float32, native) against central "
		       "differences of %s (float64, interpreted)\n", m->name,
		       drv_grad_name(tc, name, sizeof name), tc->entry);
		ok = run_checks(&c, &worst);
	}
	if (ok && c.n_params && worst < GC_THRESHOLD) {
		printf("worst relative error %s: ok (below %g)\n",
		       format_err(worst, e, sizeof e), GC_THRESHOLD);
	} else if (ok && c.n_params) {
		fflush(stdout);
		ir_error(ctx, (ir_loc){0}, "gradcheck: the worst relative error, "
			 "%.1e, is not below %g", worst, GC_THRESHOLD);
		ok = false;
	}
	checker_close(&c);
	return ok;
}
