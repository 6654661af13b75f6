/*
 * layout.c - the kernels that move elements without arithmetic: reshape,
 * broadcast (expand), permute, slice, concat, repeat, repeat_interleave,
 * and sort (which moves them into order).
 *
 * Each one writes the output in row-major order and computes, for every
 * output element, the input element it reads; the node's type gives the
 * output dims, and each kernel checks that the operands fit them.
 */
#include "interp_impl.h"

#include <stdlib.h>

static bool no_fit(const interp_kernel *k, const interp_tensor *x)
{
	char sx[160], so[160];
	interp_dims_format(x->dims, x->rank, sx, sizeof sx);
	interp_dims_format(k->out->dims, k->out->rank, so, sizeof so);
	return interp_fail(k, "operand of shape %s does not fit the result %s",
			   sx, so);
}

/* Splits dims at axis into outer x len x inner. */
static void split_at(const int64_t *dims, int rank, int axis, int64_t *outer,
		     int64_t *len, int64_t *inner)
{
	*outer = interp_dims_prod(dims, 0, axis);
	*len = dims[axis];
	*inner = interp_dims_prod(dims, axis + 1, rank);
}

/* True if a and b have the same rank and dims except along axis. */
static bool same_but_axis(const interp_tensor *a, const interp_tensor *b,
			  int axis)
{
	if (a->rank != b->rank)
		return false;
	for (int i = 0; i < a->rank; i++)
		if (i != axis && a->dims[i] != b->dims[i])
			return false;
	return true;
}

static bool axis_ok(const interp_kernel *k, int axis)
{
	if (axis >= 0 && axis < k->out->rank)
		return true;
	return interp_fail(k, "axis %d out of range for rank %d", axis,
			   k->out->rank);
}

/* Same elements in the same row-major order, new dims. */
bool interp_k_reshape(const interp_kernel *k)
{
	const interp_tensor *x = &k->args[0];
	int64_t n = interp_tensor_numel(x);
	if (n != interp_tensor_numel(k->out))
		return no_fit(k, x);
	for (int64_t i = 0; i < n; i++)
		interp_copy_elem(k->out, i, x, i);
	return true;
}

/* As torch.expand: shapes right-aligned, size-1 axes stretched. */
bool interp_k_broadcast(const interp_kernel *k)
{
	const interp_tensor *x = &k->args[0];
	interp_tensor *out = k->out;
	int64_t s[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
	if (!interp_bcast_strides(x->dims, x->rank, out->dims, out->rank, 1, s))
		return no_fit(k, x);
	int64_t n = interp_tensor_numel(out);
	for (int64_t i = 0; i < n; i++) {
		interp_copy_elem(out, i, x, interp_index_dot(idx, s, out->rank));
		interp_index_next(idx, out->dims, out->rank);
	}
	return true;
}

/* Output axis i reads input axis perm[i]. */
bool interp_k_permute(const interp_kernel *k)
{
	const interp_tensor *x = &k->args[0];
	interp_tensor *out = k->out;
	const uint8_t *perm = k->node->attr.permute.perm;
	int64_t xs[IR_MAX_RANK], s[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
	unsigned seen = 0;
	if (x->rank != out->rank)
		return no_fit(k, x);
	interp_strides(x->dims, x->rank, xs);
	for (int i = 0; i < out->rank; i++) {
		if (perm[i] >= x->rank || (seen & (1u << perm[i])))
			return interp_fail(k, "not a permutation of %d axes",
					   x->rank);
		seen |= 1u << perm[i];
		if (out->dims[i] != x->dims[perm[i]])
			return no_fit(k, x);
		s[i] = xs[perm[i]];
	}
	int64_t n = interp_tensor_numel(out);
	for (int64_t i = 0; i < n; i++) {
		interp_copy_elem(out, i, x, interp_index_dot(idx, s, out->rank));
		interp_index_next(idx, out->dims, out->rank);
	}
	return true;
}

/* Elements start, start + step, ... (< end) along axis; the attribute is
 * already normalized (0 <= start <= end <= size, step >= 1). */
bool interp_k_slice(const interp_kernel *k)
{
	const interp_tensor *x = &k->args[0];
	int axis = k->node->attr.slice.axis;
	int64_t st = k->node->attr.slice.start, en = k->node->attr.slice.end;
	int64_t step = k->node->attr.slice.step;
	if (!axis_ok(k, axis))
		return false;
	if (!same_but_axis(x, k->out, axis))
		return no_fit(k, x);
	int64_t outer, len, inner, olen = k->out->dims[axis];
	split_at(x->dims, x->rank, axis, &outer, &len, &inner);
	if (step < 1 || st < 0 || st > en || en > len ||
	    olen != (en - st + step - 1) / step)
		return interp_fail(k,
				   "range %lld:%lld:%lld does not fit axis %d "
				   "of size %lld",
				   (long long)st, (long long)en,
				   (long long)step, axis, (long long)len);
	for (int64_t o = 0; o < outer; o++)
		for (int64_t j = 0; j < olen; j++)
			for (int64_t i = 0; i < inner; i++)
				interp_copy_elem(k->out,
						 (o * olen + j) * inner + i, x,
						 (o * len + st + j * step) *
								 inner +
							 i);
	return true;
}

/* The operands one after another along axis. */
bool interp_k_concat(const interp_kernel *k)
{
	int axis = k->node->attr.axis;
	int64_t total = 0, outer, olen, inner;
	if (!axis_ok(k, axis))
		return false;
	for (uint32_t a = 0; a < k->n_args; a++) {
		if (!same_but_axis(&k->args[a], k->out, axis))
			return no_fit(k, &k->args[a]);
		total += k->args[a].dims[axis];
	}
	if (total != k->out->dims[axis])
		return interp_fail(k,
				   "operand sizes along axis %d add up to "
				   "%lld, not %lld",
				   axis, (long long)total,
				   (long long)k->out->dims[axis]);
	split_at(k->out->dims, k->out->rank, axis, &outer, &olen, &inner);
	int64_t at = 0; /* where operand a starts along the axis */
	for (uint32_t a = 0; a < k->n_args; a++) {
		const interp_tensor *x = &k->args[a];
		int64_t len = x->dims[axis];
		for (int64_t o = 0; o < outer; o++)
			for (int64_t j = 0; j < len * inner; j++)
				interp_copy_elem(k->out,
						 (o * olen + at) * inner + j, x,
						 o * len * inner + j);
		at += len;
	}
	return true;
}

/* torch.repeat: the whole tensor tiled reps[i] times along axis i. */
bool interp_k_repeat(const interp_kernel *k)
{
	const interp_tensor *x = &k->args[0];
	interp_tensor *out = k->out;
	int64_t xs[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
	if (x->rank != out->rank)
		return no_fit(k, x);
	for (int i = 0; i < x->rank; i++)
		if (x->dims[i] * k->node->attr.repeat.reps[i] != out->dims[i])
			return no_fit(k, x);
	interp_strides(x->dims, x->rank, xs);
	int64_t n = interp_tensor_numel(out);
	for (int64_t i = 0; i < n; i++) {
		int64_t off = 0;
		for (int d = 0; d < out->rank; d++)
			off += idx[d] % x->dims[d] * xs[d];
		interp_copy_elem(out, i, x, off);
		interp_index_next(idx, out->dims, out->rank);
	}
	return true;
}

/* torch.repeat_interleave(x, n, axis): each element n times in a row. */
bool interp_k_repeat_interleave(const interp_kernel *k)
{
	const interp_tensor *x = &k->args[0];
	int axis = k->node->attr.interleave.axis;
	int64_t reps = k->node->attr.interleave.n;
	if (!axis_ok(k, axis))
		return false;
	if (!same_but_axis(x, k->out, axis) ||
	    x->dims[axis] * reps != k->out->dims[axis])
		return no_fit(k, x);
	int64_t outer, olen, inner;
	split_at(k->out->dims, k->out->rank, axis, &outer, &olen, &inner);
	int64_t len = x->dims[axis];
	for (int64_t o = 0; o < outer; o++)
		for (int64_t j = 0; j < olen; j++)
			for (int64_t i = 0; i < inner; i++)
				interp_copy_elem(k->out,
						 (o * olen + j) * inner + i, x,
						 (o * len + j / reps) * inner +
							 i);
	return true;
}

/* Ascending, NaN last, as torch.sort; -0 before +0, so that the order is
 * total on numbers and every sort gives the same bits (as the JIT's). */
static int cmp_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;
	if (isnan(a) || isnan(b))
		return (isnan(a) != 0) - (isnan(b) != 0);
	if (a == b)
		return (signbit(b) != 0) - (signbit(a) != 0);
	return (a > b) - (a < b);
}

/* An element of a line and where it stood. */
typedef struct sort_item {
	double v;
	int64_t at;
} sort_item;

/* cmp_double, then the place in the line: a stable sort's permutation. */
static int cmp_item(const void *pa, const void *pb)
{
	const sort_item *a = pa, *b = pb;
	int c = cmp_double(&a->v, &b->v);
	return c ? c : (a->at > b->at) - (a->at < b->at);
}

/* sort_grad(x, g): along attr.axis, g's element j goes to the element of
 * x that a stable sort places at j. */
bool interp_k_sort_grad(const interp_kernel *k)
{
	const interp_tensor *x = &k->args[0], *g = &k->args[1];
	int axis = k->node->attr.axis;
	if (!axis_ok(k, axis))
		return false;
	if (!same_but_axis(x, k->out, axis) ||
	    x->dims[axis] != k->out->dims[axis])
		return no_fit(k, x);
	if (!same_but_axis(g, k->out, axis) ||
	    g->dims[axis] != k->out->dims[axis])
		return no_fit(k, g);
	int64_t outer, len, inner;
	split_at(x->dims, x->rank, axis, &outer, &len, &inner);
	sort_item *line = interp_scratch(k, (size_t)(len ? len : 1) *
						    sizeof *line);
	if (!line)
		return false;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t base = o * len * inner + i;
			for (int64_t j = 0; j < len; j++)
				line[j] = (sort_item){interp_ld(x,
								base + j * inner),
						      j};
			qsort(line, (size_t)len, sizeof *line, cmp_item);
			for (int64_t j = 0; j < len; j++)
				interp_st(k->out, base + line[j].at * inner,
					  interp_ld(g, base + j * inner));
		}
	ir_free(k->ctx, line);
	return true;
}

/* Sorts every line along attr.axis (values only). */
bool interp_k_sort(const interp_kernel *k)
{
	const interp_tensor *x = &k->args[0];
	int axis = k->node->attr.axis;
	if (!axis_ok(k, axis))
		return false;
	if (!same_but_axis(x, k->out, axis) ||
	    x->dims[axis] != k->out->dims[axis])
		return no_fit(k, x);
	int64_t outer, len, inner;
	split_at(x->dims, x->rank, axis, &outer, &len, &inner);
	double *line = interp_scratch(k, (size_t)(len ? len : 1) * sizeof *line);
	if (!line)
		return false;
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t base = o * len * inner + i;
			for (int64_t j = 0; j < len; j++)
				line[j] = interp_ld(x, base + j * inner);
			qsort(line, (size_t)len, sizeof *line, cmp_double);
			for (int64_t j = 0; j < len; j++)
				interp_st(k->out, base + j * inner, line[j]);
		}
	ir_free(k->ctx, line);
	return true;
}
