/*
 * rowbound.c - value bounds over a function's forward (rowbound.h): one
 * rule per op, in node order, from the leaves' maxima at run time.
 */
#include "rowbound.h"

#include "ir_scalar.h"

#include <math.h>
#include <string.h>

void pass_rowbound_forward(const ir_graph *g, bool *is_forward)
{
	for (ir_id i = 0; i < g->n_nodes; i++) {
		const ir_node *nd = &g->nodes[i];
		bool fwd = !ir_op_is_gradient(nd->op);
		for (uint32_t a = 0; a < nd->n_args && fwd; a++)
			fwd = is_forward[ir_arg(g, i, a)];
		is_forward[i] = fwd;
	}
}

/* Bounds are >= 0, +inf or NaN: the larger (the smaller), NaN winning,
 * as the ops maximum and minimum compute. */
static double bmax(double a, double b)
{
	return ir_scalar_binary(IR_OP_MAXIMUM, a, b);
}

static double bmin(double a, double b)
{
	return ir_scalar_binary(IR_OP_MINIMUM, a, b);
}

static double badd(double a, double b)
{
	if (isnan(a) || isnan(b))
		return NAN;
	return a + b; /* inf stays inf: both are >= 0 */
}

/* a·b where an infinite operand makes it infinite even times 0 (in
 * float32, inf · 0 is NaN: not finite either way). */
static double bmul(double a, double b)
{
	if (isnan(a) || isnan(b))
		return NAN;
	if (isinf(a) || isinf(b))
		return INFINITY;
	return a * b;
}

static double dim_value(ir_dim d, const int64_t *sym_values)
{
	if (ir_dim_is_static(d))
		return (double)d.coef;
	return sym_values ? (double)d.coef * (double)sym_values[d.sym]
			  : INFINITY;
}

static double numel(const ir_type *t, const int64_t *sym_values)
{
	double n = 1;
	for (int d = 0; d < t->rank; d++)
		n = bmul(n, dim_value(t->dims[d], sym_values));
	return n;
}

static const ir_type *type_of(const ir_func *f, ir_id n)
{
	return &f->g.nodes[n].type;
}

bool pass_rowbound_init(ir_ctx *ctx, const ir_module *m, const ir_func *f,
			pass_rowbound *rb)
{
	memset(rb, 0, sizeof *rb);
	uint32_t n = f->g.n_nodes;
	rb->n_nodes = n;
	rb->of_node = ir_alloc(ctx, (n + 1) * sizeof *rb->of_node);
	rb->is_forward = ir_alloc(ctx, (n + 1) * sizeof *rb->is_forward);
	rb->const_max = ir_alloc(ctx, (n + 1) * sizeof *rb->const_max);
	rb->const_min = ir_alloc(ctx, (n + 1) * sizeof *rb->const_min);
	rb->leaf_stat = ir_alloc(ctx,
				 (3 * (size_t)n + 1) * sizeof *rb->leaf_stat);
	if (!rb->of_node || !rb->is_forward || !rb->const_max ||
	    !rb->const_min || !rb->leaf_stat)
		return false;
	pass_rowbound_forward(&f->g, rb->is_forward);
	for (ir_id i = 0; i < n; i++) {
		const ir_node *nd = &f->g.nodes[i];
		if (nd->op != IR_OP_CONST)
			continue;
		const ir_const *k = &m->consts[nd->attr.const_index];
		int64_t cnt = ir_type_numel_static(&k->type);
		double hi = 0, lo = INFINITY;
		for (int64_t e = 0; e < cnt; e++) {
			double v = k->type.dtype == IR_F32
					   ? (double)((const float *)k->data)[e]
				   : k->type.dtype == IR_I32
					   ? (double)((const int32_t *)k->data)[e]
					   : ((const double *)k->data)[e];
			v = fabs(v);
			hi = bmax(hi, v);
			lo = isnan(v) ? 0 : (v < lo ? v : lo);
		}
		rb->const_max[i] = hi;
		rb->const_min[i] = cnt > 0 ? lo : 0;
	}
	return true;
}

void pass_rowbound_fini(ir_ctx *ctx, pass_rowbound *rb)
{
	ir_free(ctx, rb->of_node);
	ir_free(ctx, rb->is_forward);
	ir_free(ctx, rb->const_max);
	ir_free(ctx, rb->const_min);
	ir_free(ctx, rb->leaf_stat);
	memset(rb, 0, sizeof *rb);
}

/* The least |x| of node n where it is a constant seen through views,
 * broadcasts and slices (each of whose elements is one of the
 * constant's); else 0 (unknown). */
static double min_abs(const pass_rowbound *rb, const ir_func *f, ir_id n)
{
	for (;;) {
		ir_op op = f->g.nodes[n].op;
		if (op == IR_OP_CONST)
			return rb->const_min[n];
		if (op != IR_OP_RESHAPE && op != IR_OP_BROADCAST &&
		    op != IR_OP_PERMUTE && op != IR_OP_SLICE &&
		    op != IR_OP_REPEAT)
			return 0; /* not known to stay away from 0 */
		n = ir_arg(&f->g, n, 0);
	}
}

/* leaf's stat of node, asked once a call (rb->leaf_stat). */
static double leaf_of(pass_rowbound *rb, pass_rowbound_leaf leaf, void *ud,
		      ir_id node, pass_rowbound_stat stat)
{
	double *x = &rb->leaf_stat[3 * (size_t)node + stat];
	if (!(*x >= 0)) /* not asked yet (a NaN answer is asked again) */
		*x = leaf(ud, node, stat);
	return *x;
}

/* The bound of a masked softmax or an attention whose scores are
 * bounded by s: every masked weight exp(fill - max) must be exactly 0,
 * so the live scores must lie far above the fill. has_mask: it has
 * valid lengths (else only s must be finite). */
static bool scores_ok(double s, double fill, bool has_mask)
{
	if (!(s < PASS_ROWBOUND_LIMIT))
		return false;
	if (!has_mask)
		return true;
	return fill < 0 && s + PASS_ROWBOUND_FILL_MARGIN < -fill;
}

static double bound_of(pass_rowbound *rb, const ir_func *f, ir_id i,
		       const int64_t *sym_values, pass_rowbound_leaf leaf,
		       void *ud)
{
	const ir_graph *g = &f->g;
	const ir_node *nd = &g->nodes[i];
	const double *B = rb->of_node;
	double a = nd->n_args > 0 ? B[ir_arg(g, i, 0)] : 0;
	double b = nd->n_args > 1 ? B[ir_arg(g, i, 1)] : 0;
	const ir_type *t = &nd->type;
	double last = t->rank > 0 ? dim_value(t->dims[t->rank - 1], sym_values)
				  : 1;
	switch (nd->op) {
	case IR_OP_INPUT:
	case IR_OP_PARAM: {
		double x = leaf ? leaf_of(rb, leaf, ud, i, PASS_ROWBOUND_MAX)
				: INFINITY;
		return isnan(x) || x < 0 ? NAN : x;
	}
	case IR_OP_CONST:
		return rb->const_max[i];
	case IR_OP_ARANGE: {
		double n = t->rank > 0 ? dim_value(t->dims[0], sym_values) : 1;
		double s = nd->attr.arange.start, st = nd->attr.arange.step;
		return bmax(fabs(s), fabs(s + (n - 1) * st));
	}
	case IR_OP_NEG:
	case IR_OP_ABS:
	case IR_OP_RELU:
	case IR_OP_CAST:
	case IR_OP_MAX:
	case IR_OP_MEAN:
	case IR_OP_SORT:
	case IR_OP_RESHAPE:
	case IR_OP_BROADCAST:
	case IR_OP_PERMUTE:
	case IR_OP_SLICE:
	case IR_OP_REPEAT:
	case IR_OP_REPEAT_INTERLEAVE:
		return a;
	case IR_OP_EXP:
		return isnan(a) ? NAN : exp(a);
	case IR_OP_SQRT:
		return isnan(a) ? NAN : sqrt(a);
	case IR_OP_LOG:
	case IR_OP_POW:
		return INFINITY; /* not bounded by the operands' maxima */
	case IR_OP_TANH:
	case IR_OP_SIGMOID:
	case IR_OP_SIN:
	case IR_OP_COS:
	case IR_OP_ERF:
	case IR_OP_LT:
	case IR_OP_LE:
	case IR_OP_GT:
	case IR_OP_GE:
	case IR_OP_EQ:
	case IR_OP_NE:
	case IR_OP_SOFTMAX:
	case IR_OP_ONE_HOT:
		return isnan(a) ? NAN : 1;
	case IR_OP_ADD:
	case IR_OP_SUB:
		return badd(a, b);
	case IR_OP_MUL:
		return bmul(a, b);
	case IR_OP_DIV: {
		double lo = min_abs(rb, f, ir_arg(g, i, 1));
		return lo > 0 ? bmul(a, 1 / lo) : INFINITY;
	}
	case IR_OP_MAXIMUM:
	case IR_OP_MINIMUM:
		return bmax(a, b);
	case IR_OP_SELECT:
		return bmax(b, B[ir_arg(g, i, 2)]);
	case IR_OP_MATMUL: {
		const ir_type *ta = type_of(f, ir_arg(g, i, 0));
		int ax = nd->attr.matmul.ta ? ta->rank - 2 : ta->rank - 1;
		double k = ta->rank >= 1 && ax >= 0
				   ? dim_value(ta->dims[ax], sym_values)
				   : 1;
		double r = bmul(k, bmul(a, b));
		/* x·W by a leaf W (i, j): |sum_i x_i W[i][j]| <= max|x|
		 * times W's column sum (row sum read transposed). */
		ir_id w = ir_arg(g, i, 1);
		const ir_node *wn = &g->nodes[w];
		if (leaf && (wn->op == IR_OP_PARAM || wn->op == IR_OP_INPUT) &&
		    wn->type.rank == 2 && wn->type.dtype == IR_F32)
			r = bmin(r,
				 bmul(a,
				      leaf_of(rb, leaf, ud, w,
					      nd->attr.matmul.tb
						      ? PASS_ROWBOUND_ROW_SUM
						      : PASS_ROWBOUND_COL_SUM)));
		return r;
	}
	case IR_OP_SUM: {
		double n = numel(type_of(f, ir_arg(g, i, 0)), sym_values);
		double m = numel(t, sym_values);
		return bmul(m > 0 ? n / m : 0, a);
	}
	case IR_OP_ARGMAX:
	case IR_OP_ARGMIN: {
		const ir_type *ta = type_of(f, ir_arg(g, i, 0));
		double n = 1;
		for (int d = 0; d < ta->rank; d++)
			if (nd->attr.reduce.axes & (1u << d))
				n = bmul(n, dim_value(ta->dims[d], sym_values));
		return n;
	}
	case IR_OP_LOG_SOFTMAX:
	case IR_OP_CROSS_ENTROPY: {
		const ir_type *ta = type_of(f, ir_arg(g, i, 0));
		double n = dim_value(ta->dims[ta->rank - 1], sym_values);
		return badd(2 * a, log(n));
	}
	case IR_OP_MASKED_SOFTMAX:
		return scores_ok(a, nd->attr.fill, true) ? 1 : INFINITY;
	case IR_OP_LAYER_NORM: {
		double c = B[ir_arg(g, i, 2)];
		double var = bmul(4 * last, bmul(a, a));
		if (!(var < PASS_ROWBOUND_LIMIT))
			return isnan(var) ? NAN : INFINITY;
		double r = bmul(b, sqrt(last));
		return badd(r, c);
	}
	case IR_OP_DROPOUT:
		return nd->attr.dropout.p < 1
			       ? bmul(a, 1 / (1 - nd->attr.dropout.p))
			       : INFINITY;
	case IR_OP_EMBEDDING:
		return b;
	case IR_OP_CONCAT: {
		double r = 0;
		for (uint32_t k = 0; k < nd->n_args; k++)
			r = bmax(r, B[ir_arg(g, i, k)]);
		return r;
	}
	case IR_OP_MSE_LOSS: {
		double s = badd(a, b);
		return bmul(s, s);
	}
	case IR_OP_FUSED_ATTENTION: {
		/* (q, k, v[, valid]); heads side by side in the last axis. */
		const ir_type *tq = type_of(f, ir_arg(g, i, 0));
		double d = dim_value(tq->dims[tq->rank - 1], sym_values) /
			   (nd->attr.attention.heads ? nd->attr.attention.heads
						     : 1);
		double s = bmul(bmul(d, fabs(nd->attr.attention.scale)),
				bmul(a, b));
		if (!scores_ok(s, nd->attr.attention.fill, nd->n_args > 3))
			return isnan(s) ? NAN : INFINITY;
		return bmul(B[ir_arg(g, i, 2)], 1 / (1 - nd->attr.attention.p));
	}
	case IR_OP_FUSED_ADDITIVE_ATTENTION: {
		/* (qp, kp, wv, v[, valid]): scores sum_h wv[h] tanh(..). */
		const ir_type *tw = type_of(f, ir_arg(g, i, 2));
		double h = numel(tw, sym_values);
		double s = bmul(bmul(h, fabs(nd->attr.attention.scale)),
				B[ir_arg(g, i, 2)]);
		if (isnan(a) || isnan(b) ||
		    !scores_ok(s, nd->attr.attention.fill, nd->n_args > 4))
			return isnan(s) || isnan(a) || isnan(b) ? NAN : INFINITY;
		return bmul(B[ir_arg(g, i, 3)], 1 / (1 - nd->attr.attention.p));
	}
	case IR_OP_LAYER_NORM_GRAD:
	case IR_OP_EMBEDDING_GRAD:
	case IR_OP_SORT_GRAD:
	case IR_OP_CROSS_ENTROPY_GRAD:
	case IR_OP_CROSS_ENTROPY_WITH_GRAD:
	case IR_OP_FUSED_ATTENTION_GRAD:
	case IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD:
	case IR_OP_COUNT:
		return INFINITY; /* the backward: not bounded here */
	}
	return INFINITY;
}

double pass_rowbound_eval(pass_rowbound *rb, const ir_func *f,
			  const int64_t *sym_values, pass_rowbound_leaf leaf,
			  void *ud)
{
	double worst = 0;
	for (size_t i = 0; i < 3 * (size_t)rb->n_nodes; i++)
		rb->leaf_stat[i] = -1;
	for (ir_id i = 0; i < rb->n_nodes; i++) {
		if (!rb->is_forward[i]) {
			rb->of_node[i] = INFINITY;
			continue;
		}
		double x = bound_of(rb, f, i, sym_values, leaf, ud);
		rb->of_node[i] = x;
		if (f->g.nodes[i].type.dtype == IR_F32)
			worst = bmax(worst, x);
	}
	return worst;
}
