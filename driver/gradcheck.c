/*
 * gradcheck.c - --gradcheck: is the compiled training program's gradient
 * right? It is judged in two steps, each against a reference one step
 * more trustworthy:
 *
 *   1. the compiled gradient function <entry>_grad (native code, float32)
 *      against the same function under the reference interpreter in
 *      float64: every element of every parameter's gradient. This judges
 *      the code generator and float32's rounding.
 *   2. that float64 gradient against float64 central differences of the
 *      loss entry, (L(p + h u) - L(p - h u)) / 2h with Richardson's
 *      extrapolation: along a random unit direction u over every
 *      parameter at once, and at a few coordinates of each parameter.
 *      This judges autodiff and the passes.
 *
 * Both run in training mode at step 0 (the dropout masks of the first
 * step), on the first batch of epoch 0 of the train block's data source,
 * or on the loss entry's example when the block names no data, or with
 * no inputs at all when the data are constants of the graph.
 *
 * A central difference is only meaningful where the loss is smooth
 * between p - h u and p + h u. A point is "away from kinks" when every
 * argument that decides a piece of a piecewise function (relu, abs,
 * sqrt's, maximum's and minimum's difference, the comparisons', max's
 * gap to its maximum, a divisor) has the same sign at p and at each
 * point the difference uses (p +- h u, p +- h/2 u), and every sort puts
 * its line in the same order (each element's rank along the axis is the
 * same: a tie at p, or two elements that pass each other, is a kink);
 * the step shrinks (h, h/4, h/16) until that holds, and a point where it
 * never does is skipped and counted. docs/training.md gives the errors and the
 * thresholds.
 */
#include "driver.h"

#include "rt_rng.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define GC_F32_THRESHOLD 1e-3     /* step 1: float32 against float64 */
#define GC_F32_FLOOR 1e-3         /* of the largest gradient element */
#define GC_FD_THRESHOLD 1e-5      /* step 2: float64 against differences */
#define GC_FD_FLOOR 1e-4          /* of the gradient's size */
#define GC_FD_NOISE 1e6           /* eps |L| / h times this: also a floor */
#define GC_STEP 1e-4              /* h, times max(1, |p_i|) for a coordinate */
#define GC_COORDS 3               /* coordinates judged per parameter */
#define GC_TRIES 12               /* coordinates tried per parameter */
#define GC_DIRECTIONS 3           /* directions tried */
#define GC_STEPS 3                /* steps tried: h, h/4, h/16 */
#define GC_STREAM_DIR 0x67636431u /* random streams of the direction */
#define GC_STREAM_COORD 0x67636332u /* and of the coordinates */

typedef struct checker {
	ir_ctx *ctx;
	ir_module *m;
	const drv_options *o;
	const ir_func *loss_f, *grad_f; /* after the passes */
	ir_func probe; /* loss_f returning the loss and the kinks' arguments */
	bool *is_rank; /* per probe output: a sort's ranks (else a sign) */
	drv_data data;
	drv_jit jit;
	drv_grad grad;
	drv_batch_source src;
	drv_batch batch;
	const char *batch_what; /* where the batch came from, for the title */
	interp_tensor in[DRV_MAX_INPUTS];
	interp_tensor *params; /* float64 copies, perturbed in place */
	interp_tensor *base;   /* float64 copies, never moved */
	interp_tensor *autod;  /* <entry>_grad's outputs in float64 */
	int32_t *autod_of;     /* per parameter: its output in autod, or -1 */
	int32_t *sig0, *sig;   /* the kinks' pieces at p, and at a moved p */
	size_t n_sig;
	const attnrt_param_info *table;
	uint32_t n_params;
	double a_max, a_norm;       /* of the float64 gradient */
	uint32_t n_points, n_kinks; /* step 2's judged and skipped points */
} checker;

/* One point of step 2: a coordinate (x not NULL) or a direction. */
typedef struct probe_point {
	double *x, x0; /* the coordinate and its value at p */
	uint64_t dir;  /* else: which direction */
	double dir_norm;
} probe_point;

static double rel_err(double a, double b, double floor)
{
	double d = fmax(fmax(fabs(a), fabs(b)), floor);
	return d > 0 ? fabs(a - b) / d : 0;
}

/* "3.1e-05", or "< 1e-12" at the noise floor of float64. */
static const char *format_err(double e, char *buf, size_t size)
{
	if (e < 1e-12)
		snprintf(buf, size, "< 1e-12");
	else
		snprintf(buf, size, "%.1e", e);
	return buf;
}

static const float *grad_of(const checker *c, uint32_t i)
{
	return (const float *)((const char *)c->grad.grads + c->table[i].offset);
}

/* Element k of the float64 gradient of parameter i (0 where autodiff
 * gives it none: the loss does not depend on it). */
static double autod_at(const checker *c, uint32_t i, int64_t k)
{
	int32_t o = c->autod_of[i];
	return o < 0 ? 0 : ((const double *)c->autod[o].data)[k];
}

static int64_t numel(const checker *c, uint32_t i)
{
	return interp_tensor_numel(&c->params[i]);
}

/* ---- the kinks: where the loss is piecewise ---------------------------------------- */

/* The rank of each element of x along axis, as sort orders its line
 * (ties by index): sort_grad(x, i) with i the index along the axis. */
static ir_id sort_ranks(checker *c, ir_id x, int32_t axis, ir_loc loc)
{
	ir_func *p = &c->probe;
	const ir_type xt = p->g.nodes[x].type;
	ir_type line = {.dtype = IR_F32, .rank = 1, .dims = {xt.dims[axis]}};
	ir_type col = xt;
	for (int d = 0; d < xt.rank; d++)
		col.dims[d] = d == axis ? xt.dims[d] : ir_dim_static(1);
	col.dtype = IR_F32;
	ir_attr at = {.arange = {0, 1}}, ax = {.axis = axis};
	ir_id i = ir_build(c->m, p, IR_OP_ARANGE, NULL, 0, &at, &line, loc);
	if (i != IR_NONE)
		i = ir_build(c->m, p, IR_OP_RESHAPE, &i, 1, NULL, &col, loc);
	if (i != IR_NONE)
		i = ir_build(c->m, p, IR_OP_BROADCAST, &i, 1, NULL, &xt, loc);
	ir_id pair[2] = {x, i};
	return i == IR_NONE ? IR_NONE
			    : ir_build(c->m, p, IR_OP_SORT_GRAD, pair, 2, &ax,
				       NULL, loc);
}

/* The argument whose sign decides which piece node id of the loss is
 * on (appended to the probe where it is a difference), as the op
 * table's IR_OPF_KINK_* flags say, or for a sort its ranks (*is_rank:
 * the piece is the order); IR_NONE for a smooth op. Appending moves the
 * node array: only copies of the node's fields are used. */
static ir_id kink_arg(checker *c, ir_id id, bool *is_rank)
{
	ir_func *p = &c->probe;
	const ir_node n = p->g.nodes[id];
	unsigned flags = ir_op_table[n.op].flags;
	ir_id a = n.n_args ? ir_arg(&p->g, id, 0) : IR_NONE;
	ir_id b = n.n_args > 1 ? ir_arg(&p->g, id, 1) : IR_NONE;
	bool is_float = a != IR_NONE && p->g.nodes[a].type.dtype != IR_I32;
	ir_attr attr = n.attr;
	ir_id pair[2] = {a, b};
	*is_rank = n.op == IR_OP_SORT && is_float;
	if (*is_rank)
		return sort_ranks(c, a, attr.axis, n.loc);
	if (flags & IR_OPF_KINK_ARG0)
		return a;
	if (flags & IR_OPF_KINK_ARG1)
		return b;
	if (!(flags & IR_OPF_KINK_DIFF) || !is_float)
		return IR_NONE;
	if (ir_op_table[n.op].family == IR_FAM_REDUCE) { /* x - max(x) */
		attr.reduce.keepdim = true;
		pair[1] = ir_build(c->m, p, n.op, &a, 1, &attr, NULL, n.loc);
		if (pair[1] == IR_NONE)
			return IR_NONE;
	}
	return ir_build(c->m, p, IR_OP_SUB, pair, 2, NULL, NULL, n.loc);
}

static bool probe_add_output(checker *c, ir_id id, bool is_rank, uint32_t *cap)
{
	ir_func *p = &c->probe;
	uint32_t cap_rank = *cap;
	if (!ir_grow(c->ctx, (void **)&p->outputs, cap, p->n_outputs + 1,
		     sizeof *p->outputs) ||
	    !ir_grow(c->ctx, (void **)&c->is_rank, &cap_rank, p->n_outputs + 1,
		     sizeof *c->is_rank))
		return false;
	c->is_rank[p->n_outputs] = is_rank;
	p->outputs[p->n_outputs++] = id;
	return true;
}

/* The probe: a copy of the loss entry that also returns, after the
 * loss, the argument of every kink (kink_arg). */
static bool probe_create(checker *c)
{
	const ir_func *f = c->loss_f;
	ir_func *p = &c->probe;
	uint32_t cap = 0, n_nodes = f->g.n_nodes;
	p->name = f->name;
	p->loc = f->loc;
	p->inputs = f->inputs;
	p->input_names = f->input_names;
	p->n_inputs = f->n_inputs;
	for (ir_id i = 0; i < n_nodes; i++) {
		const ir_node *n = &f->g.nodes[i];
		if (ir_graph_append(c->ctx, &p->g, n->op,
				    ir_node_args(&f->g, n), n->n_args, &n->attr,
				    &n->type, n->loc) == IR_NONE)
			return false;
	}
	if (!probe_add_output(c, f->outputs[0], false, &cap))
		return false;
	for (ir_id i = 0; i < n_nodes; i++) {
		bool is_rank;
		ir_id a = kink_arg(c, i, &is_rank);
		if (c->ctx->n_errors)
			return false;
		if (a != IR_NONE && !probe_add_output(c, a, is_rank, &cap))
			return false;
	}
	return true;
}

static void probe_destroy(checker *c)
{
	ir_graph_fini(c->ctx, &c->probe.g);
	ir_free(c->ctx, c->probe.outputs);
	ir_free(c->ctx, c->is_rank);
}

/* The loss (the sum of the entry's first output) in float64 at the
 * current parameters, and the pieces of the kinks into sig (if not
 * NULL; c->n_sig of them): each argument's sign, or a sort's ranks. */
static bool loss_at(checker *c, int32_t *sig, double *loss)
{
	interp_tensor outs[64 + 1];
	const ir_func *p = &c->probe;
	interp_tensor *o = p->n_outputs <= 64
				   ? outs
				   : ir_alloc(c->ctx, p->n_outputs * sizeof *o);
	interp_opts opts = {.is_f64 = true,
			    .is_training = true,
			    .seed = c->o->seed,
			    .step = 0};
	if (!o || !interp_run(c->ctx, c->m, p, &opts, c->params, c->in, o)) {
		if (o != outs)
			ir_free(c->ctx, o);
		return false;
	}
	*loss = 0;
	for (int64_t k = 0; k < interp_tensor_numel(&o[0]); k++)
		*loss += interp_tensor_get(&o[0], k);
	size_t at = 0;
	for (uint32_t i = 1; i < p->n_outputs; i++)
		for (int64_t k = 0; k < interp_tensor_numel(&o[i]); k++) {
			double v = interp_tensor_get(&o[i], k);
			if (sig)
				sig[at] = c->is_rank[i] ? (int32_t)v
							: (v > 0) - (v < 0);
			at++;
		}
	c->n_sig = at;
	for (uint32_t i = 0; i < p->n_outputs; i++)
		interp_tensor_fini(c->ctx, &o[i]);
	if (o != outs)
		ir_free(c->ctx, o);
	return true;
}

/* ---- step 2: central differences ------------------------------------------------- */

/* Component k of parameter i of direction d (not of unit length). */
static double dir_at(const checker *c, uint64_t d, uint32_t i, int64_t k)
{
	return rt_rng_normal(c->o->seed, GC_STREAM_DIR + i,
			     (uint64_t)k + (d << 40));
}

/* Moves the parameters to p + s u for point pt. */
static void move_to(checker *c, const probe_point *pt, double s)
{
	if (pt->x) {
		*pt->x = pt->x0 + s;
		return;
	}
	for (uint32_t i = 0; i < c->n_params; i++) {
		double *p = c->params[i].data;
		const double *b = c->base[i].data;
		for (int64_t k = 0; k < numel(c, i); k++)
			p[k] = b[k] +
			       s * dir_at(c, pt->dir, i, k) / pt->dir_norm;
	}
}

/* The loss at p + s u; *is_same whether every kink's piece is as at p. */
static bool moved_loss(checker *c, const probe_point *pt, double s,
		       double *loss, bool *is_same)
{
	move_to(c, pt, s);
	if (!loss_at(c, c->sig, loss))
		return false;
	*is_same = memcmp(c->sig, c->sig0, c->n_sig * sizeof *c->sig) == 0;
	return true;
}

/* The losses at p + h u, p - h u, p + h/2 u and p - h/2 u into l;
 * *is_same whether each lies on p's piece of every kink (the first that
 * does not ends the run). */
static bool four_losses(checker *c, const probe_point *pt, double h, double *l,
			bool *is_same)
{
	static const double at[4] = {1, -1, 0.5, -0.5};
	*is_same = true;
	for (int i = 0; i < 4 && *is_same; i++)
		if (!moved_loss(c, pt, at[i] * h, &l[i], is_same))
			return false;
	return true;
}

/* The derivative at pt by central differences with Richardson's
 * extrapolation, (4 D(h/2) - D(h)) / 3 with D(h) = (L(p + h u) - L(p -
 * h u)) / 2h, whose error is O(h^4): h large enough that rounding
 * matters little, and still exact to far below the threshold. The step
 * is the largest of h0, h0/4, h0/16 (GC_STEPS) whose four points lie
 * on p's piece of every kink; *is_smooth false if none does. *noise is
 * the error floor rounding sets, GC_FD_NOISE eps |L| / h (the rounding
 * of the losses gives about 3 eps |L| / h, 3e-6 of it). The parameters
 * are back at p afterwards. */
static bool central_difference(checker *c, const probe_point *pt, double h0,
			       double *fd, double *noise, bool *is_smooth)
{
	double h = h0, l[4] = {0, 0, 0, 0};
	bool ok = true, is_same = false;
	for (int s = 0; ok && s < GC_STEPS && !is_same; s++) {
		if (s)
			h /= 4;
		ok = four_losses(c, pt, h, l, &is_same);
	}
	move_to(c, pt, 0);
	*is_smooth = is_same;
	double d1 = (l[0] - l[1]) / (2 * h), d2 = (l[2] - l[3]) / h;
	*fd = (4 * d2 - d1) / 3;
	double size = fmax(fmax(fabs(l[0]), fabs(l[1])),
			   fmax(fabs(l[2]), fabs(l[3])));
	*noise = GC_FD_NOISE * DBL_EPSILON * size / h;
	return ok;
}

/* Step 2 at up to GC_COORDS coordinates of parameter i away from kinks,
 * out of up to GC_TRIES (every element when it has that few); the worst
 * error into *err, and the points judged and skipped. */
static bool check_coords(checker *c, uint32_t i, double *err, int *n_judged,
			 int *n_kinks)
{
	int64_t n = numel(c, i);
	*err = 0;
	*n_judged = *n_kinks = 0;
	for (int64_t j = 0; j < GC_TRIES && j < n && *n_judged < GC_COORDS; j++) {
		int64_t k = n <= GC_TRIES
				    ? j
				    : (int64_t)(rt_rng_bits(c->o->seed,
							    GC_STREAM_COORD + i,
							    (uint64_t)j) %
						(uint64_t)n);
		double *x = &((double *)c->params[i].data)[k], fd, noise;
		probe_point pt = {.x = x, .x0 = *x};
		bool is_smooth;
		if (!central_difference(c, &pt, GC_STEP * fmax(1, fabs(*x)),
					&fd, &noise, &is_smooth))
			return false;
		if (!is_smooth) {
			++*n_kinks;
			continue;
		}
		++*n_judged;
		*err = fmax(*err, rel_err(autod_at(c, i, k), fd,
					  fmax(GC_FD_FLOOR * c->a_max, noise)));
	}
	return true;
}

/* Step 2 along the first of GC_DIRECTIONS random directions that is
 * away from kinks; *n_kinks counts those that were not. */
static bool check_direction(checker *c, double *err, bool *is_judged,
			    int *n_kinks)
{
	*is_judged = false;
	*n_kinks = 0;
	for (uint64_t d = 0; d < GC_DIRECTIONS && !*is_judged; d++) {
		probe_point pt = {.dir = d};
		double norm = 0, av = 0, fd, noise;
		for (uint32_t i = 0; i < c->n_params; i++)
			for (int64_t k = 0; k < numel(c, i); k++) {
				double v = dir_at(c, d, i, k);
				norm += v * v;
				av += v * autod_at(c, i, k);
			}
		pt.dir_norm = sqrt(norm);
		if (!central_difference(c, &pt, GC_STEP, &fd, &noise, is_judged))
			return false;
		if (*is_judged)
			*err = rel_err(av / pt.dir_norm, fd,
				       fmax(GC_FD_FLOOR * c->a_norm, noise));
		else
			++*n_kinks;
	}
	return true;
}

/* ---- step 1: float32 against float64 -------------------------------------------------- */

/* The largest difference between the compiled and the float64 gradient
 * of parameter i over the larger of its own largest element and
 * GC_F32_FLOOR of the whole gradient's. */
static double f32_error(const checker *c, uint32_t i)
{
	double diff = 0, size = 0;
	const float *g = grad_of(c, i);
	for (int64_t k = 0; k < numel(c, i); k++) {
		double a = autod_at(c, i, k);
		diff = fmax(diff, fabs(g[k] - a));
		size = fmax(size, fabs(a));
	}
	size = fmax(size, GC_F32_FLOOR * c->a_max);
	return size > 0 ? diff / size : diff > 0 ? INFINITY : 0;
}

/* Runs <entry>_grad under the interpreter in float64 and finds each
 * parameter's output ("grad.<param>"). */
static bool autod_run(checker *c)
{
	uint32_t n_out = c->grad_f->n_outputs;
	interp_opts opts = {.is_f64 = true,
			    .is_training = true,
			    .seed = c->o->seed,
			    .step = 0};
	c->autod = ir_alloc(c->ctx, (n_out + 1) * sizeof *c->autod);
	c->autod_of = ir_alloc(c->ctx, (c->n_params + 1) * sizeof *c->autod_of);
	if (!c->autod || !c->autod_of ||
	    !interp_run(c->ctx, c->m, c->grad_f, &opts, c->params, c->in,
			c->autod))
		return false;
	for (uint32_t i = 0; i < c->n_params; i++)
		c->autod_of[i] = -1;
	for (uint32_t k = 1; k < n_out; k++) {
		const char *name = c->grad_f->output_names[k];
		int32_t p = strncmp(name, "grad.", 5) == 0
				    ? ir_module_find_param(c->m, name + 5)
				    : -1;
		if (p >= 0 && (uint32_t)p < c->n_params)
			c->autod_of[p] = (int32_t)k;
	}
	for (uint32_t i = 0; i < c->n_params; i++)
		for (int64_t k = 0; k < numel(c, i); k++) {
			double a = autod_at(c, i, k);
			c->a_max = fmax(c->a_max, fabs(a));
			c->a_norm += a * a;
		}
	c->a_norm = sqrt(c->a_norm);
	return true;
}

/* ---- the batch and the set-up ------------------------------------------------------------ */

/* The loss entry's example as the batch; its dims must be those the
 * gradient function was compiled for. */
static bool example_batch(checker *c)
{
	for (uint32_t k = 0; k < c->grad.n_inputs; k++) {
		const ir_const *x = &c->m->consts[c->loss_f->example[k]];
		const attnrt_tensor_info *t = &c->grad.inputs[k];
		bool ok = x->type.rank == t->rank &&
			  x->type.dtype ==
				  (t->dtype == ATTNRT_I32 ? IR_I32 : IR_F32);
		for (int d = 0; ok && d < t->rank; d++)
			ok = x->type.dims[d].coef == t->dims[d];
		if (!ok) {
			char want[160];
			drv_dims_format(t->dims, t->rank, want, sizeof want);
			ir_error(c->ctx, c->loss_f->loc,
				 "--gradcheck: input '%s' of "
				 "the example of '%s' is not %s %s, the shape "
				 "'%s' was compiled for (--batch or --sym?)",
				 t->name, c->loss_f->name,
				 t->dtype == ATTNRT_I32 ? "i32" : "f32", want,
				 c->grad_f->name);
			return false;
		}
		c->batch.inputs[k] = x->data;
	}
	c->batch_what = "the example of";
	return true;
}

/* The first batch of epoch 0 of the data source, or the example. */
static bool first_batch(checker *c, const drv_train_config *tc)
{
	if (!tc->data && c->loss_f->n_inputs)
		return example_batch(c);
	c->batch_what = tc->data ? "the first batch of the data of"
				 : "the data in the graph of";
	return drv_batch_source_open(c->ctx, c->m, tc, &c->data, &c->jit,
				     &c->grad, &c->src) &&
	       c->src.fill(c->src.state, 0, 0, &c->batch);
}

static bool params_copy(checker *c, interp_tensor **out)
{
	*out = ir_alloc(c->ctx, (c->m->n_params + 1) * sizeof **out);
	return *out && drv_params_tensors(c->ctx, c->m, &c->jit, true, *out);
}

/* The symbols the JIT bound become their fallbacks, which is where the
 * interpreter, binding from inputs, takes the others (V_src, V_tgt of
 * the data, --sym) from. */
static void bind_fallbacks(checker *c)
{
	for (uint32_t s = 0; s < c->m->n_syms; s++)
		c->m->syms[s].fallback = c->jit.syms[s];
}

/* Runs the compiled gradient on the first batch, the float64 one under
 * the interpreter, and the probe at p. */
static bool checker_open(checker *c, const drv_train_config *tc)
{
	char name[256];
	double loss;
	attnrt_run run = {.seed = c->o->seed,
			  .is_training = 1,
			  .n_threads = c->o->threads};
	bool is_example = !tc->data && c->loss_f->n_inputs;
	c->grad_f = ir_module_find_func(c->m,
					drv_grad_name(tc, name, sizeof name));
	if (!drv_check_inputs(c->ctx, c->loss_f, "--gradcheck", false))
		return false;
	if (!drv_data_open(c->ctx, c->m, c->o, tc, &c->data) ||
	    !drv_jit_open(c->ctx, c->m, &c->data.o,
			  is_example ? c->loss_f : ir_module_default_func(c->m),
			  !is_example, &c->jit) ||
	    !drv_grad_open(c->ctx, c->m, tc, &c->jit, 1, &c->grad) ||
	    !first_batch(c, tc) ||
	    !drv_grad_run(c->ctx, &c->jit, &c->grad, &c->batch, &run, &loss))
		return false;
	bind_fallbacks(c);
	c->table = cg_program_params(c->jit.p, &c->n_params);
	drv_batch_tensors(&c->grad, &c->batch, c->in);
	if (!params_copy(c, &c->params) || !params_copy(c, &c->base) ||
	    !autod_run(c) || !probe_create(c))
		return false;
	if (!loss_at(c, NULL, &loss)) /* sizes the signs */
		return false;
	c->sig0 = ir_alloc(c->ctx, (c->n_sig + 1) * sizeof *c->sig0);
	c->sig = ir_alloc(c->ctx, (c->n_sig + 1) * sizeof *c->sig);
	return c->sig0 && c->sig && loss_at(c, c->sig0, &loss);
}

static void tensors_free(checker *c, interp_tensor *t, uint32_t n)
{
	for (uint32_t i = 0; t && i < n; i++)
		interp_tensor_fini(c->ctx, &t[i]);
	ir_free(c->ctx, t);
}

static void checker_close(checker *c)
{
	tensors_free(c, c->params, c->m->n_params);
	tensors_free(c, c->base, c->m->n_params);
	tensors_free(c, c->autod, c->grad_f ? c->grad_f->n_outputs : 0);
	ir_free(c->ctx, c->autod_of);
	ir_free(c->ctx, c->sig0);
	ir_free(c->ctx, c->sig);
	probe_destroy(c);
	if (c->src.fini)
		c->src.fini(c->src.state);
	drv_grad_close(&c->grad);
	drv_jit_close(c->ctx, &c->jit);
	drv_data_close(&c->data);
}

/* ---- the report ------------------------------------------------------------------------ */

/* The worst errors of both steps, and where they are. */
typedef struct verdict {
	double f32, fd;
	const char *f32_at, *fd_at;
} verdict;

static void print_title(const checker *c, int width)
{
	printf("gradcheck %s: %s on %s %s, training mode, step 0\n"
	       "  float32: the compiled %s against %s interpreted in float64\n"
	       "  differences: the float64 gradient against central "
	       "differences of %s in float64\n",
	       c->m->name, c->grad_f->name, c->batch_what, c->loss_f->name,
	       c->grad_f->name, c->grad_f->name, c->loss_f->name);
	printf("  %-*s %-14s %-9s %-6s %-5s %s\n", width, "parameter", "dims",
	       "float32", "points", "kinks", "differences");
}

/* One parameter's line: both steps' errors. */
static bool check_param(checker *c, uint32_t i, int width, verdict *v)
{
	double e32 = f32_error(c, i), efd;
	int n_judged, n_kinks;
	if (!check_coords(c, i, &efd, &n_judged, &n_kinks))
		return false;
	c->n_points += (uint32_t)n_judged;
	c->n_kinks += (uint32_t)n_kinks;
	char dims[160], a[32], b[32];
	drv_dims_format(c->params[i].dims, c->params[i].rank, dims, sizeof dims);
	printf("  %-*s %-14s %-9s %-6d %-5d %s\n", width, c->table[i].name,
	       dims, format_err(e32, a, sizeof a), n_judged, n_kinks,
	       n_judged ? format_err(efd, b, sizeof b) : "-");
	if (e32 >= v->f32) {
		v->f32 = e32;
		v->f32_at = c->table[i].name;
	}
	if (n_judged && efd >= v->fd) {
		v->fd = efd;
		v->fd_at = c->table[i].name;
	}
	return true;
}

static bool run_checks(checker *c, verdict *v)
{
	size_t width = strlen("(a random direction)");
	for (uint32_t i = 0; i < c->n_params; i++)
		if (strlen(c->table[i].name) > width)
			width = strlen(c->table[i].name);
	print_title(c, (int)width);
	for (uint32_t i = 0; i < c->n_params; i++)
		if (!check_param(c, i, (int)width, v))
			return false;
	double err = 0;
	bool is_judged;
	int n_kinks;
	char e[32];
	if (!check_direction(c, &err, &is_judged, &n_kinks))
		return false;
	c->n_points += is_judged;
	c->n_kinks += (uint32_t)n_kinks;
	printf("  %-*s %-14s %-9s %-6d %-5d %s\n", (int)width,
	       "(a random direction)", "", "", is_judged, n_kinks,
	       is_judged ? format_err(err, e, sizeof e) : "-");
	if (is_judged && err >= v->fd) {
		v->fd = err;
		v->fd_at = "the random direction";
	}
	return true;
}

/* Prints both steps' verdicts; false (after reporting) if one fails. */
static bool judge(const checker *c, const verdict *v)
{
	char a[32], b[32];
	bool ok32 = v->f32 < GC_F32_THRESHOLD, okfd = v->fd < GC_FD_THRESHOLD;
	printf("float32 against float64: worst %s (%s), %s (below %g)\n",
	       format_err(v->f32, a, sizeof a), v->f32_at,
	       ok32 ? "ok" : "FAILED", GC_F32_THRESHOLD);
	if (c->n_points)
		printf("float64 against differences: worst %s (%s) at %u points, "
		       "%u skipped at kinks, %s (below %g)\n",
		       format_err(v->fd, b, sizeof b), v->fd_at, c->n_points,
		       c->n_kinks, okfd ? "ok" : "FAILED", GC_FD_THRESHOLD);
	else
		printf("float64 against differences: every one of the %u points "
		       "tried is at a kink; only float32 against float64 is "
		       "judged\n",
		       c->n_kinks);
	fflush(stdout);
	if (!ok32)
		ir_error(c->ctx, (ir_loc){0},
			 "gradcheck: the compiled gradient of "
			 "'%s' is off from float64 autodiff by %.1e (not below %g)",
			 v->f32_at, v->f32, GC_F32_THRESHOLD);
	if (!okfd)
		ir_error(c->ctx, (ir_loc){0},
			 "gradcheck: the float64 gradient is "
			 "off from central differences by %.1e at %s (not below "
			 "%g)",
			 v->fd, v->fd_at, GC_FD_THRESHOLD);
	return ok32 && okfd;
}

bool drv_gradcheck(ir_ctx *ctx, ir_module *m, const drv_options *o,
		   const drv_train_config *tc)
{
	checker c;
	memset(&c, 0, sizeof c);
	c.ctx = ctx;
	c.m = m;
	c.o = o;
	c.loss_f = ir_module_find_func(m, tc->entry);
	verdict v = {0, 0, "-", "-"};
	bool ok = checker_open(&c, tc);
	if (ok && !c.n_params)
		printf("gradcheck %s: the model has no parameters\n", m->name);
	else if (ok)
		ok = run_checks(&c, &v) && judge(&c, &v);
	checker_close(&c);
	return ok;
}
