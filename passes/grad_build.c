/*
 * grad_build.c - the node builders the gradient rules are written with.
 *
 * Each builder appends nodes to the gradient function through ir_build,
 * so every node it makes is type-checked by the op's shape rule, and
 * carries the location of the forward node being differentiated. A
 * builder given IR_NONE, or called after a failure, returns IR_NONE: a
 * rule is a plain expression of builders and the pass checks once.
 *
 * Besides the one-op builders, this file holds the shape helpers that
 * several rules share: reducing a gradient over broadcast axes, counting
 * reduced elements, and the position masks (k < length, one-hot) that the
 * masked softmax, cross-entropy and embedding rules need. A mask over a
 * static axis compares against a constant 0, 1, ..., K-1; over a
 * symbolic axis (a vocabulary bound at run time) no such constant can
 * exist, and the mask is read off a masked softmax of zeros instead: it
 * is 1/len at the positions k < len and exactly 0 past them (the fill
 * -1e6 underflows exp), so "> 0" is the mask wherever len > 0.
 */
#include "autodiff.h"

#include <string.h>

/* The fill of the masked softmax that draws a symbolic mask: far enough
 * below 0 that exp() of it is exactly 0 in float32 and float64. */
#define AD_MASK_FILL -1e6

/* Records that a builder got nothing to build on. */
static ir_id none(pass_ad *ad)
{
	ad->is_failed = true;
	return IR_NONE;
}

static ir_id build(pass_ad *ad, ir_op op, const ir_id *args, uint32_t n,
		   const ir_attr *attr, const ir_type *t)
{
	if (ad->is_failed)
		return IR_NONE;
	for (uint32_t i = 0; i < n; i++) {
		if (args[i] == IR_NONE)
			return none(ad);
	}
	ir_id id = ir_build(ad->m, ad->f, op, args, n, attr, t, ad->loc);
	if (id == IR_NONE)
		ad->is_failed = true;
	return id;
}

ir_type pass_ad_type(const pass_ad *ad, ir_id x)
{
	return ad->f->g.nodes[x].type;
}

ir_id pass_ad_op1(pass_ad *ad, ir_op op, ir_id x, const ir_attr *attr)
{
	return build(ad, op, &x, 1, attr, NULL);
}

ir_id pass_ad_op2(pass_ad *ad, ir_op op, ir_id a, ir_id b, const ir_attr *attr)
{
	ir_id args[2] = {a, b};
	return build(ad, op, args, 2, attr, NULL);
}

ir_id pass_ad_select(pass_ad *ad, ir_id c, ir_id a, ir_id b)
{
	ir_id args[3] = {c, a, b};
	return build(ad, IR_OP_SELECT, args, 3, NULL, NULL);
}

ir_id pass_ad_opn(pass_ad *ad, ir_op op, const ir_id *args, uint32_t n,
		  const ir_attr *attr)
{
	return build(ad, op, args, n, attr, NULL);
}

ir_id pass_ad_to(pass_ad *ad, ir_op op, ir_id x, const ir_type *t)
{
	if (x == IR_NONE)
		return none(ad);
	ir_type have = pass_ad_type(ad, x), want = *t;
	if (op == IR_OP_CAST) {
		if (have.dtype == t->dtype)
			return x;
		want = have;
		want.dtype = t->dtype;
	} else {
		want.dtype = have.dtype;
		if (ir_type_eq(&want, &have))
			return x;
	}
	return build(ad, op, &x, 1, NULL, &want);
}

ir_id pass_ad_matmul(pass_ad *ad, ir_id a, ir_id b, bool ta, bool tb)
{
	ir_attr attr = {.matmul = {ta, tb}};
	return pass_ad_op2(ad, IR_OP_MATMUL, a, b, &attr);
}

ir_id pass_ad_sum(pass_ad *ad, ir_id x, uint32_t axes, bool keepdim)
{
	if (axes == 0)
		return x;
	ir_attr attr = {.reduce = {axes, keepdim}};
	return pass_ad_op1(ad, IR_OP_SUM, x, &attr);
}

ir_id pass_ad_slice(pass_ad *ad, ir_id x, int axis, int64_t start, int64_t end)
{
	if (x == IR_NONE)
		return none(ad);
	ir_dim d = pass_ad_type(ad, x).dims[axis];
	if (start == 0 && ir_dim_is_static(d) && end == d.coef)
		return x;
	ir_attr attr = {.slice = {axis, start, end, 1}};
	return pass_ad_op1(ad, IR_OP_SLICE, x, &attr);
}

ir_id pass_ad_concat(pass_ad *ad, const ir_id *xs, uint32_t n, int axis)
{
	if (n == 1)
		return xs[0] == IR_NONE ? none(ad) : xs[0];
	ir_attr attr = {.axis = axis};
	return build(ad, IR_OP_CONCAT, xs, n, &attr, NULL);
}

ir_id pass_ad_const(pass_ad *ad, const ir_type *t, const void *data)
{
	if (ad->is_failed)
		return IR_NONE;
	int32_t c = ir_module_add_const(ad->m, t, data);
	if (c < 0) {
		ir_error(ad->m->ctx, ad->loc, "out of memory");
		ad->is_failed = true;
		return IR_NONE;
	}
	ir_attr attr = {.const_index = (uint32_t)c};
	return build(ad, IR_OP_CONST, NULL, 0, &attr, t);
}

ir_id pass_ad_scalar(pass_ad *ad, double v)
{
	static const double cached[] = {0, 1, -1, 0.5};
	int slot = -1;
	for (int i = 0; i < 4; i++)
		if (v == cached[i])
			slot = i;
	if (slot >= 0 && ad->scalars[slot] != IR_NONE)
		return ad->scalars[slot];
	float f = (float)v;
	ir_type t = {.dtype = IR_F32};
	ir_id id = pass_ad_const(ad, &t, &f);
	if (slot >= 0)
		ad->scalars[slot] = id;
	return id;
}

ir_id pass_ad_zeros(pass_ad *ad, const ir_type *t)
{
	ir_type f = *t;
	f.dtype = IR_F32;
	return pass_ad_to(ad, IR_OP_BROADCAST, pass_ad_scalar(ad, 0), &f);
}

ir_id pass_ad_unbroadcast(pass_ad *ad, ir_id g, const ir_type *t)
{
	if (g == IR_NONE)
		return none(ad);
	ir_type gt = pass_ad_type(ad, g);
	int off = gt.rank - t->rank;
	uint32_t axes = 0;
	for (int i = 0; i < gt.rank; i++) {
		int j = i - off;
		bool is_one = j >= 0 && ir_dim_is_static(t->dims[j]) &&
			      t->dims[j].coef == 1;
		bool g_one = ir_dim_is_static(gt.dims[i]) &&
			     gt.dims[i].coef == 1;
		if (j < 0 || (is_one && !g_one))
			axes |= 1u << i;
	}
	return pass_ad_to(ad, IR_OP_RESHAPE, pass_ad_sum(ad, g, axes, true), t);
}

ir_id pass_ad_count(pass_ad *ad, const ir_type *t, uint32_t axes)
{
	int64_t n = 1;
	bool is_static = true;
	ir_type sub = {.dtype = IR_F32, .rank = t->rank};
	for (int i = 0; i < t->rank; i++) {
		bool is_reduced = axes & (1u << i);
		sub.dims[i] = is_reduced ? t->dims[i] : ir_dim_static(1);
		if (!is_reduced)
			continue;
		if (ir_dim_is_static(t->dims[i]))
			n *= t->dims[i].coef;
		else
			is_static = false;
	}
	if (is_static)
		return pass_ad_scalar(ad, (double)n);
	/* A run-time count: the sum of ones over the reduced dims alone. */
	ir_id ones = pass_ad_to(ad, IR_OP_BROADCAST, pass_ad_scalar(ad, 1),
				&sub);
	return pass_ad_sum(ad, ones, (1u << t->rank) - 1, false);
}

/* x reshaped to rank r by appending size-1 axes. */
static ir_id pad_rank(pass_ad *ad, ir_id x, int r)
{
	if (x == IR_NONE)
		return none(ad);
	ir_type t = pass_ad_type(ad, x);
	while (t.rank < r)
		t.dims[t.rank++] = ir_dim_static(1);
	return pass_ad_to(ad, IR_OP_RESHAPE, x, &t);
}

static ir_id const_i32(pass_ad *ad, int32_t v)
{
	ir_type t = {.dtype = IR_I32};
	return pass_ad_const(ad, &t, &v);
}

/* The i32 constant [0, 1, ..., n-1]. */
static ir_id positions(pass_ad *ad, int64_t n)
{
	ir_type t = {.dtype = IR_I32, .rank = 1, .dims = {ir_dim_static(n)}};
	int32_t *v = ir_alloc(ad->m->ctx, (size_t)(n ? n : 1) * sizeof *v);
	if (!v) {
		ir_error(ad->m->ctx, ad->loc, "out of memory");
		ad->is_failed = true;
		return IR_NONE;
	}
	for (int64_t i = 0; i < n; i++)
		v[i] = (int32_t)i;
	ir_id id = pass_ad_const(ad, &t, v);
	ir_free(ad->m->ctx, v);
	return id;
}

/* The k < len mask over a symbolic last axis, from a masked softmax of
 * zeros of type t (rank >= 2); rows of len <= 0 give all zeros. */
static ir_id below_symbolic(pass_ad *ad, const ir_type *t, ir_id len)
{
	ir_attr fill = {.fill = AD_MASK_FILL};
	ir_id s = pass_ad_op2(ad, IR_OP_MASKED_SOFTMAX, pass_ad_zeros(ad, t),
			      len, &fill);
	ir_id in_row = pass_ad_op2(ad, IR_OP_GT, s, pass_ad_scalar(ad, 0), NULL);
	ir_id row_ok = pass_ad_op2(ad, IR_OP_GT, pad_rank(ad, len, t->rank),
				   const_i32(ad, 0), NULL);
	ir_id m = pass_ad_op2(ad, IR_OP_MUL, in_row, row_ok, NULL);
	ir_type f = {.dtype = IR_F32};
	return pass_ad_to(ad, IR_OP_CAST, m, &f);
}

ir_id pass_ad_below(pass_ad *ad, const ir_type *t, ir_id len)
{
	ir_dim k = t->dims[t->rank - 1];
	ir_type f = {.dtype = IR_F32};
	if (ir_dim_is_static(k)) {
		ir_id lt = pass_ad_op2(ad, IR_OP_LT, positions(ad, k.coef),
				       pad_rank(ad, len, t->rank), NULL);
		return pass_ad_to(ad, IR_OP_CAST, lt, &f);
	}
	if (t->rank >= 2)
		return below_symbolic(ad, t, len);
	/* A single row: masked_softmax wants rank 2. */
	ir_type t2 = {.dtype = t->dtype,
		      .rank = 2,
		      .dims = {ir_dim_static(1), k}};
	ir_type l1 = {.dtype = IR_I32, .rank = 1, .dims = {ir_dim_static(1)}};
	ir_id m = below_symbolic(ad, &t2,
				 pass_ad_to(ad, IR_OP_RESHAPE, len, &l1));
	return pass_ad_to(ad, IR_OP_RESHAPE, m, t);
}

ir_id pass_ad_typed(pass_ad *ad, ir_op op, const ir_id *args, uint32_t n,
		    const ir_type *t)
{
	return build(ad, op, args, n, NULL, t);
}
