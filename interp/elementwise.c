/*
 * elementwise.c - the elementwise kernels: unary math, binary arithmetic
 * and comparisons with NumPy broadcasting, select and cast. Each op's
 * arithmetic is its scalar function in ir/ir_scalar.c, which constant
 * folding and `example` inputs use too.
 *
 * The result's dtype picks the arithmetic: float results are computed in
 * double and rounded to the working precision (interp_round), integer
 * results in int64 and wrapped to int32 on store, as PyTorch's int32
 * tensors wrap. Comparisons read both operands as double, which is exact
 * for int32 and float.
 */
#include "interp_impl.h"

/* ---- kernels ------------------------------------------------------------ */

/* Broadcast strides of operand i against the output, or an error naming
 * both shapes. */
static bool operand_strides(const interp_kernel *k, uint32_t i, int64_t *strides)
{
	const interp_tensor *a = &k->args[i];
	if (interp_bcast_strides(a->dims, a->rank, k->out->dims, k->out->rank,
				 1, strides))
		return true;
	char sa[160], so[160];
	interp_dims_format(a->dims, a->rank, sa, sizeof sa);
	interp_dims_format(k->out->dims, k->out->rank, so, sizeof so);
	return interp_fail(k, "operand %u of shape %s does not broadcast to %s",
			   i, sa, so);
}

static bool same_numel(const interp_kernel *k, const interp_tensor *x)
{
	if (interp_tensor_numel(x) == interp_tensor_numel(k->out))
		return true;
	return interp_fail(k, "operand has %lld elements, result %lld",
			   (long long)interp_tensor_numel(x),
			   (long long)interp_tensor_numel(k->out));
}

/* Integer results use the op's integer form (exact where it has one,
 * else the float function converted as a cast would). */
bool interp_k_unary(const interp_kernel *k, ir_op op)
{
	const interp_tensor *x = &k->args[0];
	interp_tensor *out = k->out;
	if (!same_numel(k, x))
		return false;
	int64_t n = interp_tensor_numel(out);
	ir_scalar_f1 f = ir_scalar_unary_fn(op);
	for (int64_t i = 0; i < n; i++) {
		if (out->dtype == IR_I32)
			interp_sti(out, i,
				   ir_scalar_unary_int(op, interp_ldi(x, i)));
		else
			interp_st(out, i,
				  f(interp_round(out->dtype, interp_ld(x, i))));
	}
	return true;
}

bool interp_k_binary(const interp_kernel *k, ir_op op)
{
	interp_tensor *out = k->out;
	int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
	if (!operand_strides(k, 0, sa) || !operand_strides(k, 1, sb))
		return false;
	const interp_tensor *a = &k->args[0], *b = &k->args[1];
	int64_t n = interp_tensor_numel(out);
	ir_scalar_f2 f = ir_scalar_binary_fn(op);
	for (int64_t i = 0; i < n; i++) {
		int64_t ia = interp_index_dot(idx, sa, out->rank);
		int64_t ib = interp_index_dot(idx, sb, out->rank);
		if (out->dtype == IR_I32) {
			int64_t r;
			ir_scalar_status st = ir_scalar_binary_int(
				op, interp_ldi(a, ia), interp_ldi(b, ib), &r);
			if (st != IR_SCALAR_OK)
				return interp_fail(k, "integer %s %lld",
						   st == IR_SCALAR_NEG_POWER
							   ? "to the negative power"
							   : "division by",
						   (long long)interp_ldi(b, ib));
			interp_sti(out, i, r);
		} else {
			double x = interp_round(out->dtype, interp_ld(a, ia));
			double y = interp_round(out->dtype, interp_ld(b, ib));
			interp_st(out, i, f(x, y));
		}
		interp_index_next(idx, out->dims, out->rank);
	}
	return true;
}

bool interp_k_compare(const interp_kernel *k, ir_op op)
{
	interp_tensor *out = k->out;
	int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
	if (!operand_strides(k, 0, sa) || !operand_strides(k, 1, sb))
		return false;
	int64_t n = interp_tensor_numel(out);
	for (int64_t i = 0; i < n; i++) {
		double x = interp_ld(&k->args[0],
				     interp_index_dot(idx, sa, out->rank));
		double y = interp_ld(&k->args[1],
				     interp_index_dot(idx, sb, out->rank));
		interp_sti(out, i, ir_scalar_compare(op, x, y));
		interp_index_next(idx, out->dims, out->rank);
	}
	return true;
}

/* select(cond, a, b): cond != 0 ? a : b, all three broadcast. */
bool interp_k_select(const interp_kernel *k)
{
	interp_tensor *out = k->out;
	int64_t s[3][IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
	for (uint32_t j = 0; j < 3; j++)
		if (!operand_strides(k, j, s[j]))
			return false;
	int64_t n = interp_tensor_numel(out);
	for (int64_t i = 0; i < n; i++) {
		int64_t ic = interp_index_dot(idx, s[0], out->rank);
		bool is_a = interp_ld(&k->args[0], ic) != 0;
		uint32_t j = is_a ? 1 : 2;
		interp_copy_elem(out, i, &k->args[j],
				 interp_index_dot(idx, s[j], out->rank));
		interp_index_next(idx, out->dims, out->rank);
	}
	return true;
}

/* To the node's dtype: float to int truncates toward zero (interp_f2i). */
bool interp_k_cast(const interp_kernel *k)
{
	const interp_tensor *x = &k->args[0];
	if (!same_numel(k, x))
		return false;
	int64_t n = interp_tensor_numel(k->out);
	for (int64_t i = 0; i < n; i++)
		interp_copy_elem(k->out, i, x, i);
	return true;
}
