/*
 * grad_rules.c - the gradient rule of every op, in one table built from
 * ir/ops.def, so that an op added there without a rule here is a build
 * error.
 *
 * A rule receives a forward node y and its gradient g (y's type) and adds
 * the gradient of each operand that needs one, written with the existing
 * primitive ops, so the result is ordinary IR that every pass, the
 * interpreter and the LLVM backend handle. Gradients of broadcast
 * operands are summed back to the operand's shape. Ops with no gradient
 * (comparisons, argmax, sort, leaves) have rules that add nothing: a
 * parameter's gradient is read off its PARAM nodes by the pass itself.
 * docs/autodiff.md lists the formulas.
 */
#include "autodiff.h"

#include <string.h>

/* ---- shorthands ------------------------------------------------------ */

static ir_id arg(const pass_ad *ad, ir_id y, uint32_t i)
{
	return ir_arg(&ad->f->g, y, i);
}

static ir_node fwd(const pass_ad *ad, ir_id y)
{
	return ad->f->g.nodes[y];
}

static ir_id add(pass_ad *ad, ir_id a, ir_id b)
{
	return pass_ad_op2(ad, IR_OP_ADD, a, b, NULL);
}

static ir_id sub(pass_ad *ad, ir_id a, ir_id b)
{
	return pass_ad_op2(ad, IR_OP_SUB, a, b, NULL);
}

static ir_id mul(pass_ad *ad, ir_id a, ir_id b)
{
	return pass_ad_op2(ad, IR_OP_MUL, a, b, NULL);
}

static ir_id div_(pass_ad *ad, ir_id a, ir_id b)
{
	return pass_ad_op2(ad, IR_OP_DIV, a, b, NULL);
}

static ir_id neg(pass_ad *ad, ir_id a)
{
	return pass_ad_op1(ad, IR_OP_NEG, a, NULL);
}

static ir_id f32_of(pass_ad *ad, ir_id i32)
{
	ir_type f = {.dtype = IR_F32};
	return pass_ad_to(ad, IR_OP_CAST, i32, &f);
}

/* Adds contribution g, computed at the result's shape, to operand k of y
 * after summing it over the axes the operand was broadcast along. */
static void accum_bcast(pass_ad *ad, ir_id y, uint32_t k, ir_id g)
{
	ir_id x = arg(ad, y, k);
	ir_type t = pass_ad_type(ad, x);
	pass_ad_accum(ad, x, pass_ad_unbroadcast(ad, g, &t));
}

static bool wants(const pass_ad *ad, ir_id y, uint32_t k)
{
	return pass_ad_wants(ad, arg(ad, y, k));
}

static uint32_t last_axis(const pass_ad *ad, ir_id y)
{
	return 1u << (pass_ad_type(ad, y).rank - 1);
}

/* x's type with the axes of a bitmask set to 1 (a keepdim result). */
static ir_type keep_type(const ir_type *x, uint32_t axes)
{
	ir_type t = *x;
	for (int i = 0; i < t.rank; i++)
		if (axes & (1u << i))
			t.dims[i] = ir_dim_static(1);
	return t;
}

/* x reshaped to [-1, last dim of x]. When the leading dims hold two or
 * more symbols ([B, T, D]), the -1 stands for their product, which the
 * shape rule finds only if the module has it: the frontend adds it for
 * a reshape of the model's own, so here it is added too (a model that
 * never writes B * T still trains). */
static ir_id flatten2(pass_ad *ad, ir_id x)
{
	if (x == IR_NONE)
		return x;
	ir_type t = pass_ad_type(ad, x);
	int32_t syms[IR_MAX_RANK];
	uint32_t n_syms = 0;
	for (int i = 0; i + 1 < t.rank; i++)
		if (t.dims[i].sym >= 0 && t.dims[i].coef != 0)
			syms[n_syms++] = t.dims[i].sym;
	if (n_syms >= 2)
		(void)ir_module_product_sym(ad->m, syms, n_syms, ad->loc);
	ir_type r = {.dtype = t.dtype,
		     .rank = 2,
		     .dims = {{-1, -1},
			      t.rank ? t.dims[t.rank - 1] : ir_dim_static(1)}};
	return pass_ad_to(ad, IR_OP_RESHAPE, x, &r);
}

/* x's type with axis ax split into [outer, inner]; false if the rank
 * would exceed IR_MAX_RANK (after reporting it). */
static bool split_axis(pass_ad *ad, const ir_type *x, int ax, ir_dim outer,
		       ir_dim inner, ir_type *out)
{
	if (x->rank >= IR_MAX_RANK) {
		ir_error(ad->m->ctx, ad->loc,
			 "autodiff: the gradient of this "
			 "rank-%d op needs a rank-%d intermediate (more than "
			 "%d)",
			 x->rank, x->rank + 1, IR_MAX_RANK);
		ad->is_failed = true;
		return false;
	}
	*out = *x;
	memmove(&out->dims[ax + 1], &out->dims[ax],
		(size_t)(x->rank - ax) * sizeof out->dims[0]);
	out->dims[ax] = outer;
	out->dims[ax + 1] = inner;
	out->rank++;
	return true;
}

/* ---- leaves and ops without a gradient --------------------------------- */

static void grad_nothing(pass_ad *ad, ir_id y, ir_id g)
{
	(void)ad;
	(void)y;
	(void)g;
}

#define grad_INPUT grad_nothing
#define grad_PARAM grad_nothing /* collected by the pass */
#define grad_CONST grad_nothing
#define grad_ARANGE grad_nothing
#define grad_LT grad_nothing
#define grad_LE grad_nothing
#define grad_GT grad_nothing
#define grad_GE grad_nothing
#define grad_EQ grad_nothing
#define grad_NE grad_nothing
#define grad_ARGMAX grad_nothing
#define grad_ARGMIN grad_nothing

/* ---- elementwise unary ---------------------------------------------------- */

static void grad_NEG(pass_ad *ad, ir_id y, ir_id g)
{
	pass_ad_accum(ad, arg(ad, y, 0), neg(ad, g));
}

static void grad_EXP(pass_ad *ad, ir_id y, ir_id g)
{
	pass_ad_accum(ad, arg(ad, y, 0), mul(ad, g, y));
}

static void grad_LOG(pass_ad *ad, ir_id y, ir_id g)
{
	pass_ad_accum(ad, arg(ad, y, 0), div_(ad, g, arg(ad, y, 0)));
}

/* 1 - y^2 */
static void grad_TANH(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id d = sub(ad, pass_ad_scalar(ad, 1), mul(ad, y, y));
	pass_ad_accum(ad, arg(ad, y, 0), mul(ad, g, d));
}

/* y (1 - y) */
static void grad_SIGMOID(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id d = mul(ad, y, sub(ad, pass_ad_scalar(ad, 1), y));
	pass_ad_accum(ad, arg(ad, y, 0), mul(ad, g, d));
}

/* g where x > 0, else 0. */
static void grad_RELU(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id x = arg(ad, y, 0), zero = pass_ad_scalar(ad, 0);
	ir_id pos = pass_ad_op2(ad, IR_OP_GT, x, zero, NULL);
	pass_ad_accum(ad, x, pass_ad_select(ad, pos, g, zero));
}

static void grad_SIN(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id x = arg(ad, y, 0);
	pass_ad_accum(ad, x, mul(ad, g, pass_ad_op1(ad, IR_OP_COS, x, NULL)));
}

static void grad_COS(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id x = arg(ad, y, 0);
	ir_id s = pass_ad_op1(ad, IR_OP_SIN, x, NULL);
	pass_ad_accum(ad, x, neg(ad, mul(ad, g, s)));
}

/* 1 / (2 sqrt x) */
static void grad_SQRT(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id half = mul(ad, g, pass_ad_scalar(ad, 0.5));
	pass_ad_accum(ad, arg(ad, y, 0), div_(ad, half, y));
}

/* sign(x), 0 at 0 as PyTorch's. */
static void grad_ABS(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id x = arg(ad, y, 0), zero = pass_ad_scalar(ad, 0);
	ir_id pos = f32_of(ad, pass_ad_op2(ad, IR_OP_GT, x, zero, NULL));
	ir_id negv = f32_of(ad, pass_ad_op2(ad, IR_OP_LT, x, zero, NULL));
	pass_ad_accum(ad, x, mul(ad, g, sub(ad, pos, negv)));
}

/* 2/sqrt(pi) e^(-x^2) */
static void grad_ERF(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id x = arg(ad, y, 0);
	ir_id e = pass_ad_op1(ad, IR_OP_EXP, neg(ad, mul(ad, x, x)), NULL);
	ir_id d = mul(ad, e, pass_ad_scalar(ad, 1.1283791670955126));
	pass_ad_accum(ad, x, mul(ad, g, d));
}

/* f32 to f32 only: a gradient never flows into or out of integers. */
static void grad_CAST(pass_ad *ad, ir_id y, ir_id g)
{
	pass_ad_accum(ad, arg(ad, y, 0), g);
}

/* ---- elementwise binary ------------------------------------------------------ */

static void grad_ADD(pass_ad *ad, ir_id y, ir_id g)
{
	if (wants(ad, y, 0))
		accum_bcast(ad, y, 0, g);
	if (wants(ad, y, 1))
		accum_bcast(ad, y, 1, g);
}

static void grad_SUB(pass_ad *ad, ir_id y, ir_id g)
{
	if (wants(ad, y, 0))
		accum_bcast(ad, y, 0, g);
	if (wants(ad, y, 1))
		accum_bcast(ad, y, 1, neg(ad, g));
}

static void grad_MUL(pass_ad *ad, ir_id y, ir_id g)
{
	if (wants(ad, y, 0))
		accum_bcast(ad, y, 0, mul(ad, g, arg(ad, y, 1)));
	if (wants(ad, y, 1))
		accum_bcast(ad, y, 1, mul(ad, g, arg(ad, y, 0)));
}

/* y = a / b: da = g / b, db = -g y / b. */
static void grad_DIV(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id b = arg(ad, y, 1);
	if (wants(ad, y, 0))
		accum_bcast(ad, y, 0, div_(ad, g, b));
	if (wants(ad, y, 1))
		accum_bcast(ad, y, 1, neg(ad, mul(ad, g, div_(ad, y, b))));
}

/* y = a^b: da = g b a^(b-1), 0 where b = 0 (a^0 is 1 everywhere, and
 * 0 * 0^-1 would be NaN at a = 0); db = g y log a, 0 where a = 0 and
 * b >= 0 (y is 0 or 1 there; for b < 0 it stays inf * log 0 = -inf).
 * Both as PyTorch's pow_backward_self and pow_backward_exponent. */
static void grad_POW(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id a = arg(ad, y, 0), b = arg(ad, y, 1);
	ir_id zero = pass_ad_scalar(ad, 0);
	if (wants(ad, y, 0)) {
		ir_id bm1 = sub(ad, b, pass_ad_scalar(ad, 1));
		ir_id d = mul(ad, b, pass_ad_op2(ad, IR_OP_POW, a, bm1, NULL));
		ir_id b0 = pass_ad_op2(ad, IR_OP_EQ, b, zero, NULL);
		accum_bcast(ad, y, 0,
			    mul(ad, g, pass_ad_select(ad, b0, zero, d)));
	}
	if (wants(ad, y, 1)) {
		ir_id at0 = pass_ad_op2(ad, IR_OP_EQ, a, zero, NULL);
		ir_id bge0 = pass_ad_op2(ad, IR_OP_GE, b, zero, NULL);
		ir_id ylog = mul(ad, y, pass_ad_op1(ad, IR_OP_LOG, a, NULL));
		ir_id d = pass_ad_select(ad, at0,
					 pass_ad_select(ad, bge0, zero, ylog),
					 ylog);
		accum_bcast(ad, y, 1, mul(ad, g, d));
	}
}

/* maximum (cmp GT) and minimum (cmp LT): the winner takes g, a tie
 * splits it in halves as PyTorch does. */
static void grad_extremum(pass_ad *ad, ir_id y, ir_id g, ir_op cmp)
{
	ir_id a = arg(ad, y, 0), b = arg(ad, y, 1);
	ir_id wins = f32_of(ad, pass_ad_op2(ad, cmp, a, b, NULL));
	ir_id ties = f32_of(ad, pass_ad_op2(ad, IR_OP_EQ, a, b, NULL));
	ir_id w = add(ad, wins, mul(ad, ties, pass_ad_scalar(ad, 0.5)));
	if (wants(ad, y, 0))
		accum_bcast(ad, y, 0, mul(ad, g, w));
	if (wants(ad, y, 1))
		accum_bcast(ad, y, 1,
			    mul(ad, g, sub(ad, pass_ad_scalar(ad, 1), w)));
}

static void grad_MAXIMUM(pass_ad *ad, ir_id y, ir_id g)
{
	grad_extremum(ad, y, g, IR_OP_GT);
}

static void grad_MINIMUM(pass_ad *ad, ir_id y, ir_id g)
{
	grad_extremum(ad, y, g, IR_OP_LT);
}

static void grad_SELECT(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id c = arg(ad, y, 0), zero = pass_ad_scalar(ad, 0);
	if (wants(ad, y, 1))
		accum_bcast(ad, y, 1, pass_ad_select(ad, c, g, zero));
	if (wants(ad, y, 2))
		accum_bcast(ad, y, 2, pass_ad_select(ad, c, zero, g));
}

/* ---- matmul --------------------------------------------------------------------- */

/* With A = op(a), B = op(b) (op transposes when the flag is set) and
 * Y = A B: dA = G B^T and dB = A^T G, transposed back when a flag says
 * the operand is stored transposed. Batch dims that broadcast are summed.
 * A shared right operand (rank 2, as a linear layer's weight) gets its
 * gradient from one matmul over all rows instead of a sum over batches. */
static void grad_MATMUL(pass_ad *ad, ir_id y, ir_id g)
{
	ir_node n = fwd(ad, y);
	bool ta = n.attr.matmul.ta, tb = n.attr.matmul.tb;
	ir_id a = arg(ad, y, 0), b = arg(ad, y, 1);
	if (wants(ad, y, 0)) {
		ir_id da = ta ? pass_ad_matmul(ad, b, g, tb, true)
			      : pass_ad_matmul(ad, g, b, false, !tb);
		accum_bcast(ad, y, 0, da);
	}
	if (!wants(ad, y, 1))
		return;
	ir_id db;
	if (pass_ad_type(ad, b).rank == 2 && pass_ad_type(ad, a).rank > 2 &&
	    !ta) {
		ir_id a2 = flatten2(ad, a), g2 = flatten2(ad, g);
		db = tb ? pass_ad_matmul(ad, g2, a2, true, false)
			: pass_ad_matmul(ad, a2, g2, true, false);
	} else {
		db = tb ? pass_ad_matmul(ad, g, a, true, ta)
			: pass_ad_matmul(ad, a, g, !ta, false);
	}
	accum_bcast(ad, y, 1, db);
}

/* ---- reductions ----------------------------------------------------------------------- */

/* g reshaped to the keepdim form of reduction y over x. */
static ir_id keep_grad(pass_ad *ad, ir_id y, ir_id g)
{
	ir_node n = fwd(ad, y);
	ir_type xt = pass_ad_type(ad, arg(ad, y, 0));
	ir_type kt = keep_type(&xt, n.attr.reduce.axes);
	return pass_ad_to(ad, IR_OP_RESHAPE, g, &kt);
}

static void grad_SUM(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id x = arg(ad, y, 0);
	ir_type xt = pass_ad_type(ad, x);
	pass_ad_accum(ad, x,
		      pass_ad_to(ad, IR_OP_BROADCAST, keep_grad(ad, y, g), &xt));
}

static void grad_MEAN(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id x = arg(ad, y, 0);
	ir_type xt = pass_ad_type(ad, x);
	ir_id n = pass_ad_count(ad, &xt, fwd(ad, y).attr.reduce.axes);
	ir_id each = div_(ad, keep_grad(ad, y, g), n);
	pass_ad_accum(ad, x, pass_ad_to(ad, IR_OP_BROADCAST, each, &xt));
}

/* To the positions holding the maximum, shared evenly among ties. */
static void grad_MAX(pass_ad *ad, ir_id y, ir_id g)
{
	ir_node n = fwd(ad, y);
	ir_id x = arg(ad, y, 0);
	ir_type xt = pass_ad_type(ad, x);
	ir_type kt = keep_type(&xt, n.attr.reduce.axes);
	ir_id yk = pass_ad_to(ad, IR_OP_RESHAPE, y, &kt);
	ir_id at = f32_of(ad, pass_ad_op2(ad, IR_OP_EQ, x, yk, NULL));
	ir_id cnt = pass_ad_sum(ad, at, n.attr.reduce.axes, true);
	ir_id each = div_(ad, keep_grad(ad, y, g), cnt);
	pass_ad_accum(ad, x,
		      pass_ad_to(ad, IR_OP_BROADCAST, mul(ad, at, each), &xt));
}

/* ---- normalizations -------------------------------------------------------------------- */

/* y (g - sum(g y)) over the last axis. */
static ir_id softmax_grad(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id s = pass_ad_sum(ad, mul(ad, g, y), last_axis(ad, y), true);
	return mul(ad, y, sub(ad, g, s));
}

static void grad_SOFTMAX(pass_ad *ad, ir_id y, ir_id g)
{
	pass_ad_accum(ad, arg(ad, y, 0), softmax_grad(ad, y, g));
}

/* g - exp(y) sum(g) over the last axis. */
static void grad_LOG_SOFTMAX(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id s = pass_ad_sum(ad, g, last_axis(ad, y), true);
	ir_id p = pass_ad_op1(ad, IR_OP_EXP, y, NULL);
	pass_ad_accum(ad, arg(ad, y, 0), sub(ad, g, mul(ad, p, s)));
}

/* The softmax rule where k < valid; masked places were replaced by a
 * constant, so their gradient is 0 (all of a row of length 0). */
static void grad_MASKED_SOFTMAX(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id x = arg(ad, y, 0);
	ir_type xt = pass_ad_type(ad, x);
	ir_id mask = pass_ad_below(ad, &xt, arg(ad, y, 1));
	ir_id d = mul(ad, softmax_grad(ad, y, g), mask);
	pass_ad_accum(ad, x, pass_ad_to(ad, IR_OP_BROADCAST, d, &xt));
}

/* xhat = (x - mean) rstd, y = xhat gamma + beta. The gradients of gamma
 * and beta are column sums of g xhat and g; xhat is recomputed by one
 * layer_norm of x with a scale of ones and a shift of zeros (one row
 * kernel reading x, where the rule once built it from two row means, a
 * sqrt and the elementwise kernels between them: the forward's own
 * rounding, (x - mean) rstd 1 + 0). x's, rstd (dxh - mean(dxh) - xhat
 * mean(dxh xhat)) with dxh = g gamma, is one layer_norm_grad node: a row
 * kernel that recomputes the row's mean and rstd itself. */
static void grad_LAYER_NORM(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id x = arg(ad, y, 0), gamma = arg(ad, y, 1);
	ir_type pt = pass_ad_type(ad, gamma);
	ir_attr eps = {.eps = fwd(ad, y).attr.eps};
	if (wants(ad, y, 2))
		pass_ad_accum(ad, arg(ad, y, 2),
			      pass_ad_unbroadcast(ad, g, &pt));
	if (wants(ad, y, 1)) {
		ir_id ln[3] = {x,
			       pass_ad_to(ad, IR_OP_BROADCAST,
					  pass_ad_scalar(ad, 1), &pt),
			       pass_ad_zeros(ad, &pt)};
		ir_id xhat = pass_ad_opn(ad, IR_OP_LAYER_NORM, ln, 3, &eps);
		pass_ad_accum(ad, gamma,
			      pass_ad_unbroadcast(ad, mul(ad, g, xhat), &pt));
	}
	if (!wants(ad, y, 0))
		return;
	ir_id args[3] = {x, gamma, g};
	pass_ad_accum(ad, x,
		      pass_ad_opn(ad, IR_OP_LAYER_NORM_GRAD, args, 3, &eps));
}

#define grad_LAYER_NORM_GRAD grad_nothing /* no second derivatives */

/* sort: the gradient of each sorted element goes back to the element it
 * came from (sort_grad recomputes the permutation from x). */
static void grad_SORT(pass_ad *ad, ir_id y, ir_id g)
{
	if (!wants(ad, y, 0))
		return;
	ir_attr axis = {.axis = fwd(ad, y).attr.axis};
	pass_ad_accum(ad, arg(ad, y, 0),
		      pass_ad_op2(ad, IR_OP_SORT_GRAD, arg(ad, y, 0), g, &axis));
}

#define grad_SORT_GRAD grad_nothing /* no second derivatives */

/* The same mask: a dropout of g with the forward node's p and stream. */
static void grad_DROPOUT(pass_ad *ad, ir_id y, ir_id g)
{
	ir_node n = fwd(ad, y);
	pass_ad_accum(ad, arg(ad, y, 0),
		      pass_ad_op1(ad, IR_OP_DROPOUT, g, &n.attr));
}

/* ---- indexing ------------------------------------------------------------------------------- */

/* The table's gradient: the rows of g summed into the rows their ids
 * name (embedding_grad, a scatter-add), so a row used twice sums both
 * gradients. */
static void grad_EMBEDDING(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id ids = arg(ad, y, 0), table = arg(ad, y, 1);
	ir_type tt = pass_ad_type(ad, table);
	ir_id args[2] = {ids, g};
	pass_ad_accum(ad, table,
		      pass_ad_typed(ad, IR_OP_EMBEDDING_GRAD, args, 2, &tt));
}

#define grad_ONE_HOT grad_nothing
#define grad_EMBEDDING_GRAD grad_nothing /* no second derivatives */

/* ---- layout ------------------------------------------------------------------------------------ */

static void grad_RESHAPE(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id x = arg(ad, y, 0);
	ir_type xt = pass_ad_type(ad, x);
	pass_ad_accum(ad, x, pass_ad_to(ad, IR_OP_RESHAPE, g, &xt));
}

static void grad_BROADCAST(pass_ad *ad, ir_id y, ir_id g)
{
	accum_bcast(ad, y, 0, g);
}

static void grad_PERMUTE(pass_ad *ad, ir_id y, ir_id g)
{
	ir_node n = fwd(ad, y);
	ir_attr inv = {0};
	for (int i = 0; i < n.type.rank; i++)
		inv.permute.perm[n.attr.permute.perm[i]] = (uint8_t)i;
	pass_ad_accum(ad, arg(ad, y, 0),
		      pass_ad_op1(ad, IR_OP_PERMUTE, g, &inv));
}

/* g spread to every step-th place: each element repeated step times,
 * then all but the first of each run zeroed by a constant mask. */
static ir_id spread(pass_ad *ad, ir_id g, int ax, int64_t step)
{
	ir_type gt = pass_ad_type(ad, g);
	int64_t n = gt.dims[ax].coef * step;
	ir_attr rep = {.interleave = {ax, step}};
	ir_id r = pass_ad_op1(ad, IR_OP_REPEAT_INTERLEAVE, g, &rep);
	ir_type mt = {.dtype = IR_F32, .rank = (uint8_t)(gt.rank - ax)};
	mt.dims[0] = ir_dim_static(n);
	for (int i = 1; i < mt.rank; i++)
		mt.dims[i] = ir_dim_static(1);
	float *keep = ir_alloc(ad->m->ctx, (size_t)(n ? n : 1) * sizeof *keep);
	if (!keep) {
		ir_error(ad->m->ctx, ad->loc, "out of memory");
		ad->is_failed = true;
		return IR_NONE;
	}
	for (int64_t i = 0; i < n; i++)
		keep[i] = i % step == 0;
	ir_id mask = pass_ad_const(ad, &mt, keep);
	ir_free(ad->m->ctx, keep);
	return mul(ad, r, mask);
}

/* g placed back at [start, end) (every step-th place) among zeros: a
 * piece of x's gradient, which the pass pads once it has them all. */
static void grad_SLICE(pass_ad *ad, ir_id y, ir_id g)
{
	ir_node n = fwd(ad, y);
	ir_id x = arg(ad, y, 0);
	int ax = n.attr.slice.axis;
	int64_t start = n.attr.slice.start, step = n.attr.slice.step;
	int64_t size = pass_ad_type(ad, x).dims[ax].coef;
	int64_t len = n.type.dims[ax].coef;
	if (len == 0)
		return;
	if (step > 1) {
		g = spread(ad, g, ax, step);
		len *= step;
	}
	if (len > size - start)
		g = pass_ad_slice(ad, g, ax, 0, size - start);
	pass_ad_accum_piece(ad, x, g, ax, start);
}

/* Operand k's part of g: a slice along the axis, or, on a symbolic axis
 * (sizes c_k S that sum to C S), a slice of g seen as [..., C, S, ...]. */
static ir_id concat_part(pass_ad *ad, ir_id g, int ax, ir_dim off, ir_dim len,
			 ir_dim total)
{
	if (ir_dim_is_static(total))
		return pass_ad_slice(ad, g, ax, off.coef, off.coef + len.coef);
	ir_type gt = pass_ad_type(ad, g), st, pt;
	ir_dim s = {1, total.sym};
	if (!split_axis(ad, &gt, ax, ir_dim_static(total.coef), s, &st))
		return IR_NONE;
	ir_id part = pass_ad_slice(ad, pass_ad_to(ad, IR_OP_RESHAPE, g, &st),
				   ax, off.coef, off.coef + len.coef);
	pt = gt;
	pt.dims[ax] = len;
	return pass_ad_to(ad, IR_OP_RESHAPE, part, &pt);
}

static void grad_CONCAT(pass_ad *ad, ir_id y, ir_id g)
{
	ir_node n = fwd(ad, y);
	int ax = n.attr.axis;
	ir_dim off = ir_dim_static(0), total = n.type.dims[ax];
	for (uint32_t k = 0; k < n.n_args; k++) {
		ir_id x = arg(ad, y, k);
		ir_dim len = pass_ad_type(ad, x).dims[ax];
		if (len.coef > 0 && pass_ad_wants(ad, x))
			pass_ad_accum(ad, x,
				      concat_part(ad, g, ax, off, len, total));
		off.coef += len.coef;
	}
}

/* Sums g, whose axis ax is n times x's, over the n copies of each
 * element: split into [n, x's axis] and summed over the first when the
 * copies are tiles (repeat), into [x's axis, n] and summed over the
 * second when they are runs (repeat_interleave). */
static ir_id fold_axis(pass_ad *ad, ir_id g, int ax, int64_t n, bool is_tiled)
{
	if (g == IR_NONE || n == 1)
		return g;
	ir_type gt = pass_ad_type(ad, g), st;
	ir_dim d = gt.dims[ax];
	ir_dim each = d.coef / n ? (ir_dim){d.coef / n, d.sym}
				 : ir_dim_static(0);
	ir_dim outer = is_tiled ? ir_dim_static(n) : each;
	ir_dim inner = is_tiled ? each : ir_dim_static(n);
	if (!split_axis(ad, &gt, ax, outer, inner, &st))
		return IR_NONE;
	ir_id r = pass_ad_to(ad, IR_OP_RESHAPE, g, &st);
	return pass_ad_sum(ad, r, 1u << (is_tiled ? ax : ax + 1), false);
}

/* Tiles: axis i of g is [reps_i copies of x's axis], summed over copies. */
static void grad_REPEAT(pass_ad *ad, ir_id y, ir_id g)
{
	ir_node n = fwd(ad, y);
	for (int i = 0; i < n.type.rank; i++)
		if (n.attr.repeat.reps[i] == 0)
			return;
	for (int i = 0; i < n.type.rank; i++)
		g = fold_axis(ad, g, i, n.attr.repeat.reps[i], true);
	pass_ad_accum(ad, arg(ad, y, 0), g);
}

/* Each element n times in a row: [x's axis, n], summed over the n. */
static void grad_REPEAT_INTERLEAVE(pass_ad *ad, ir_id y, ir_id g)
{
	ir_node n = fwd(ad, y);
	if (n.attr.interleave.n == 0)
		return;
	pass_ad_accum(ad, arg(ad, y, 0),
		      fold_axis(ad, g, n.attr.interleave.axis,
				n.attr.interleave.n, false));
}

/* ---- losses ------------------------------------------------------------------------------------- */

/* y = mean((p - t)^2): dp = 2 g (p - t) / N, dt = -dp. */
static void grad_MSE_LOSS(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id p = arg(ad, y, 0), t = arg(ad, y, 1);
	ir_type pt = pass_ad_type(ad, p);
	ir_id n = pass_ad_count(ad, &pt, (1u << pt.rank) - 1);
	ir_id scale = div_(ad, add(ad, g, g), n);
	ir_id dp = mul(ad, sub(ad, p, t), scale);
	if (wants(ad, y, 0))
		pass_ad_accum(ad, p, dp);
	if (wants(ad, y, 1))
		pass_ad_accum(ad, t, neg(ad, dp));
}

/* (softmax(logits) - onehot(labels)) g, per position: one
 * cross_entropy_grad node, a single kernel instead of a softmax, a
 * one_hot and their elementwise difference and product. */
static void grad_CROSS_ENTROPY(pass_ad *ad, ir_id y, ir_id g)
{
	ir_id logits = arg(ad, y, 0), labels = arg(ad, y, 1);
	ir_type lt = pass_ad_type(ad, logits);
	ir_id args[3] = {logits, labels, g};
	pass_ad_accum(ad, logits,
		      pass_ad_typed(ad, IR_OP_CROSS_ENTROPY_GRAD, args, 3, &lt));
}

#define grad_CROSS_ENTROPY_GRAD grad_nothing      /* no second derivatives */
#define grad_CROSS_ENTROPY_WITH_GRAD grad_nothing /* made after autodiff */

/* ---- fused additive attention ----------------------------------------------------------------- */

#define grad_FUSED_ADDITIVE_ATTENTION_GRAD \
	grad_nothing /* no second derivatives */

static ir_type type4(const ir_type *t3, int at)
{
	ir_type r = *t3;
	r.rank = 4;
	for (int i = 3; i > at; i--)
		r.dims[i] = r.dims[i - 1];
	r.dims[at] = ir_dim_static(1);
	return r;
}

/* The weights' gradient dS (N, Q, K) of an additive attention y into
 * qp, kp and wv through t = tanh(qp[:, :, None] + kp[:, None]) (N, Q, K,
 * H): u = dS wv (1 - t t), dqp = sum_k u, dkp = sum_q u, dwv = sum dS t. */
static void additive_features_grad(pass_ad *ad, ir_id y, ir_id t, ir_id ds)
{
	ir_id qp = arg(ad, y, 0), kp = arg(ad, y, 1), wv = arg(ad, y, 2);
	ir_type qt = pass_ad_type(ad, qp), kt = pass_ad_type(ad, kp),
		wt = pass_ad_type(ad, wv), st = pass_ad_type(ad, ds);
	ir_type ds4 = type4(&st, 3),
		w4 = {.dtype = IR_F32,
		      .rank = 4,
		      .dims = {ir_dim_static(1), ir_dim_static(1),
			       ir_dim_static(1), wt.dims[0]}};
	ir_id d4 = pass_ad_to(ad, IR_OP_RESHAPE, ds, &ds4);
	ir_id w = pass_ad_to(ad, IR_OP_RESHAPE, wv, &w4);
	ir_id one = pass_ad_scalar(ad, 1);
	ir_id u = mul(ad, mul(ad, d4, w), sub(ad, one, mul(ad, t, t)));
	if (wants(ad, y, 0))
		pass_ad_accum(ad, qp,
			      pass_ad_to(ad, IR_OP_RESHAPE,
					 pass_ad_sum(ad, u, 1u << 2, false),
					 &qt));
	if (wants(ad, y, 1))
		pass_ad_accum(ad, kp,
			      pass_ad_to(ad, IR_OP_RESHAPE,
					 pass_ad_sum(ad, u, 1u << 1, false),
					 &kt));
	if (wants(ad, y, 2))
		pass_ad_accum(ad, wv,
			      pass_ad_sum(ad, mul(ad, t, d4), 7u, false));
}

/* The gradient when the packed result has no type (sizes that do not add
 * up to one dim): the features and weights rebuilt from primitives and
 * differentiated by the rules above, as if never fused. */
static void grad_additive_unfused(pass_ad *ad, ir_id y, ir_id g)
{
	ir_node n = fwd(ad, y);
	ir_id qp = arg(ad, y, 0), kp = arg(ad, y, 1), wv = arg(ad, y, 2),
	      v = arg(ad, y, 3);
	bool is_masked = n.n_args == 5;
	ir_type qt = pass_ad_type(ad, qp), kt = pass_ad_type(ad, kp),
		wt = pass_ad_type(ad, wv);
	ir_type q4 = type4(&qt, 2), k4 = type4(&kt, 1);
	ir_type wcol = {.dtype = IR_F32,
			.rank = 2,
			.dims = {wt.dims[0], ir_dim_static(1)}};
	ir_id t = pass_ad_op1(ad, IR_OP_TANH,
			      add(ad, pass_ad_to(ad, IR_OP_RESHAPE, qp, &q4),
				  pass_ad_to(ad, IR_OP_RESHAPE, kp, &k4)),
			      NULL);
	ir_id s4 = pass_ad_matmul(ad, t,
				  pass_ad_to(ad, IR_OP_RESHAPE, wv, &wcol),
				  false, false);
	ir_type st = pass_ad_type(ad, s4);
	st.rank = 3;
	ir_id s = mul(ad, pass_ad_to(ad, IR_OP_RESHAPE, s4, &st),
		      pass_ad_scalar(ad, n.attr.attention.scale));
	ir_attr drop = {.dropout = {n.attr.attention.p, n.attr.attention.stream}};
	ir_attr fill = {.fill = n.attr.attention.fill};
	ir_id p = is_masked ? pass_ad_op2(ad, IR_OP_MASKED_SOFTMAX, s,
					  arg(ad, y, 4), &fill)
			    : pass_ad_op1(ad, IR_OP_SOFTMAX, s, NULL);
	bool is_dropout = n.attr.attention.p > 0;
	ir_id pd = is_dropout ? pass_ad_op1(ad, IR_OP_DROPOUT, p, &drop) : p;
	if (wants(ad, y, 3))
		pass_ad_accum(ad, v, pass_ad_matmul(ad, pd, g, true, false));
	if (!wants(ad, y, 0) && !wants(ad, y, 1) && !wants(ad, y, 2))
		return;
	ir_id gp = pass_ad_matmul(ad, g, v, false, true);
	if (is_dropout)
		gp = pass_ad_op1(ad, IR_OP_DROPOUT, gp, &drop);
	ir_id ds = softmax_grad(ad, p, gp);
	if (is_masked)
		ds = mul(ad, ds, pass_ad_below(ad, &st, arg(ad, y, 4)));
	ds = mul(ad, ds, pass_ad_scalar(ad, n.attr.attention.scale));
	additive_features_grad(ad, y, t, ds);
}

/* fused attention's unpacking of a packed gradient (below). */
static ir_id unpack(pass_ad *ad, ir_id pk, int64_t off, int64_t len,
		    const ir_type *t);

/* One fused_additive_attention_grad node computes dqp, dkp, the per-batch
 * parts of dwv and dv together; each is read back from its packed result
 * by a slice and a reshape, dwv's parts then summed over the batch. */
static void grad_FUSED_ADDITIVE_ATTENTION(pass_ad *ad, ir_id y, ir_id g)
{
	ir_node n = fwd(ad, y);
	ir_type t[4];
	ir_dim size, part;
	for (uint32_t i = 0; i < 4; i++)
		t[i] = pass_ad_type(ad, arg(ad, y, i));
	if (!wants(ad, y, 0) && !wants(ad, y, 1) && !wants(ad, y, 2) &&
	    !wants(ad, y, 3))
		return;
	if (!ir_additive_grad_size(ad->m, &t[0], &t[1], &t[3], &size)) {
		grad_additive_unfused(ad, y, g);
		return;
	}
	ir_id args[6];
	for (uint32_t i = 0; i < n.n_args; i++)
		args[i] = arg(ad, y, i);
	args[n.n_args] = g;
	ir_id pk = pass_ad_opn(ad, IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD, args,
			       n.n_args + 1, &n.attr);
	/* dwv's parts as (N, H), summed over N. */
	ir_type wn = {.dtype = IR_F32,
		      .rank = 2,
		      .dims = {t[0].dims[0], t[2].dims[0]}};
	int64_t off = 0;
	for (uint32_t i = 0; i < 4; i++) {
		const ir_type *pt = i == 2 ? &wn : &t[i];
		ir_type_numel_dim(ad->m, pt, &part); /* in the sum's units */
		ir_id x = wants(ad, y, i) ? unpack(ad, pk, off, part.coef, pt)
					  : IR_NONE;
		if (x != IR_NONE && i == 2)
			x = pass_ad_sum(ad, x, 1u, false);
		if (x != IR_NONE)
			pass_ad_accum(ad, arg(ad, y, i), x);
		off += part.coef;
	}
}

/* ---- fused attention ---------------------------------------------------------------------------- */

#define grad_FUSED_ATTENTION_GRAD grad_nothing /* no second derivatives */

/* Part [off, off + len) of the packed gradient pk (of length C, or C
 * times a symbol S, as off and len are then counted in), as type t. */
static ir_id unpack(pass_ad *ad, ir_id pk, int64_t off, int64_t len,
		    const ir_type *t)
{
	ir_type pt = pass_ad_type(ad, pk);
	ir_dim total = pt.dims[0];
	if (!ir_dim_is_static(total)) {
		ir_type rows = {.dtype = IR_F32,
				.rank = 2,
				.dims = {ir_dim_static(total.coef),
					 {1, total.sym}}};
		pk = pass_ad_to(ad, IR_OP_RESHAPE, pk, &rows);
	}
	return pass_ad_to(ad, IR_OP_RESHAPE,
			  pass_ad_slice(ad, pk, 0, off, off + len), t);
}

/* x (B, T, h*w) as (B*h, T, w), heads moved next to the batch
 * (split_heads of the prelude); when is_merge, the inverse: (B*h, T, w)
 * as (B, T, h*w). x itself for one head. */
static ir_id heads_move(pass_ad *ad, ir_id x, uint32_t h, bool is_merge)
{
	if (h == 1)
		return x;
	ir_type t = pass_ad_type(ad, x), four = t, out = t;
	ir_dim T = t.dims[1];
	four.rank = 4;
	if (is_merge) {
		ir_dim b = {t.dims[0].coef / h, t.dims[0].sym};
		int64_t w = t.dims[2].coef;
		ir_dim fd[4] = {b, ir_dim_static(h), T, ir_dim_static(w)};
		memcpy(four.dims, fd, sizeof fd);
		out.dims[0] = b;
		out.dims[2] = ir_dim_static(h * w);
	} else {
		ir_dim b = t.dims[0];
		int64_t w = t.dims[2].coef / h;
		ir_dim fd[4] = {b, T, ir_dim_static(h), ir_dim_static(w)};
		memcpy(four.dims, fd, sizeof fd);
		out.dims[0] = (ir_dim){b.coef * h, b.sym};
		out.dims[2] = ir_dim_static(w);
	}
	ir_attr p = {.permute = {.perm = {0, 2, 1, 3}}};
	ir_id r = pass_ad_to(ad, IR_OP_RESHAPE, x, &four);
	return pass_ad_to(ad, IR_OP_RESHAPE,
			  pass_ad_op1(ad, IR_OP_PERMUTE, r, &p), &out);
}

/* The same gradient when the packed result has no type (q, k and v sizes
 * that do not add up to one dim): the weights rebuilt from primitives and
 * differentiated by the rules above, as if never fused; h heads are split
 * off first, and the gradients merged back. */
static void grad_attention_unfused(pass_ad *ad, ir_id y, ir_id g)
{
	ir_node n = fwd(ad, y);
	uint32_t h = n.attr.attention.heads;
	ir_id q = heads_move(ad, arg(ad, y, 0), h, false),
	      k = heads_move(ad, arg(ad, y, 1), h, false),
	      v = heads_move(ad, arg(ad, y, 2), h, false);
	ir_id valid = n.n_args == 4 ? arg(ad, y, 3) : IR_NONE;
	if (valid != IR_NONE && h > 1) {
		ir_attr ri = {.interleave = {0, h}};
		valid = pass_ad_op1(ad, IR_OP_REPEAT_INTERLEAVE, valid, &ri);
	}
	g = heads_move(ad, g, h, false);
	bool is_masked = n.n_args == 4;
	double scale = n.attr.attention.scale;
	ir_attr drop = {.dropout = {n.attr.attention.p, n.attr.attention.stream}};
	ir_attr fill = {.fill = n.attr.attention.fill};
	ir_id s = mul(ad, pass_ad_matmul(ad, q, k, false, true),
		      pass_ad_scalar(ad, scale));
	ir_id p = is_masked ? pass_ad_op2(ad, IR_OP_MASKED_SOFTMAX, s, valid,
					  &fill)
			    : pass_ad_op1(ad, IR_OP_SOFTMAX, s, NULL);
	bool is_dropout = n.attr.attention.p > 0;
	ir_id pd = is_dropout ? pass_ad_op1(ad, IR_OP_DROPOUT, p, &drop) : p;
	if (wants(ad, y, 2))
		pass_ad_accum(ad, arg(ad, y, 2),
			      heads_move(ad,
					 pass_ad_matmul(ad, pd, g, true, false),
					 h, true));
	if (!wants(ad, y, 0) && !wants(ad, y, 1))
		return;
	ir_id gp = pass_ad_matmul(ad, g, v, false, true);
	if (is_dropout)
		gp = pass_ad_op1(ad, IR_OP_DROPOUT, gp, &drop);
	ir_id ds = softmax_grad(ad, p, gp);
	if (is_masked) {
		ir_type st = pass_ad_type(ad, s);
		ds = mul(ad, ds, pass_ad_below(ad, &st, valid));
	}
	ds = mul(ad, ds, pass_ad_scalar(ad, scale));
	if (wants(ad, y, 0))
		pass_ad_accum(ad, arg(ad, y, 0),
			      heads_move(ad,
					 pass_ad_matmul(ad, ds, k, false, false),
					 h, true));
	if (wants(ad, y, 1))
		pass_ad_accum(ad, arg(ad, y, 1),
			      heads_move(ad,
					 pass_ad_matmul(ad, ds, q, true, false),
					 h, true));
}

/* One fused_attention_grad node computes dq, dk and dv together; each is
 * read back from its packed result by a slice and a reshape. */
static void grad_FUSED_ATTENTION(pass_ad *ad, ir_id y, ir_id g)
{
	ir_node n = fwd(ad, y);
	ir_type t[3];
	ir_dim size, part;
	for (uint32_t i = 0; i < 3; i++)
		t[i] = pass_ad_type(ad, arg(ad, y, i));
	if (!wants(ad, y, 0) && !wants(ad, y, 1) && !wants(ad, y, 2))
		return;
	if (!ir_attention_grad_size(ad->m, &t[0], &t[1], &t[2], &size)) {
		grad_attention_unfused(ad, y, g);
		return;
	}
	ir_id args[5];
	for (uint32_t i = 0; i < n.n_args; i++)
		args[i] = arg(ad, y, i);
	args[n.n_args] = g;
	ir_id pk = pass_ad_opn(ad, IR_OP_FUSED_ATTENTION_GRAD, args,
			       n.n_args + 1, &n.attr);
	int64_t off = 0;
	for (uint32_t i = 0; i < 3; i++) {
		ir_type_numel_dim(ad->m, &t[i], &part); /* in the sum's units */
		if (wants(ad, y, i))
			pass_ad_accum(ad, arg(ad, y, i),
				      unpack(ad, pk, off, part.coef, &t[i]));
		off += part.coef;
	}
}

/* ---- the table ------------------------------------------------------------------------------------ */

const pass_ad_rule pass_ad_rules[IR_OP_COUNT] = {
#define X(e, name, n_in, attr, fam, flags) [IR_OP_##e] = grad_##e,
#include "ops.def"
#undef X
};
