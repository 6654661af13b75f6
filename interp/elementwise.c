/*
 * elementwise.c - the elementwise kernels: unary math, binary arithmetic
 * and comparisons with NumPy broadcasting, select and cast, and the scalar
 * function of each op.
 *
 * The result's dtype picks the arithmetic: float results are computed in
 * double and rounded to the working precision (interp_round), integer
 * results in int64 and wrapped to int32 on store, as PyTorch's int32
 * tensors wrap. Comparisons read both operands as double, which is exact
 * for int32 and float.
 */
#include "interp_impl.h"

/* ---- scalar functions -------------------------------------------------- */

double interp_f_neg(double x)
{
	return -x;
}

double interp_f_sigmoid(double x)
{
	return 1.0 / (1.0 + exp(-x));
}

/* max(x, 0) that keeps NaN and turns -0 into 0, as torch.relu. */
double interp_f_relu(double x)
{
	return x > 0 || isnan(x) ? x : 0.0;
}

int64_t interp_i_neg(int64_t x)
{
	return -x;
}

int64_t interp_i_abs(int64_t x)
{
	return x < 0 ? -x : x;
}

int64_t interp_i_relu(int64_t x)
{
	return x > 0 ? x : 0;
}

double interp_f_add(double a, double b)
{
	return a + b;
}

double interp_f_sub(double a, double b)
{
	return a - b;
}

double interp_f_mul(double a, double b)
{
	return a * b;
}

double interp_f_div(double a, double b)
{
	return a / b;
}

/* torch.maximum/minimum propagate NaN from either side. */
double interp_f_max(double a, double b)
{
	if (isnan(a) || isnan(b))
		return NAN;
	return a > b ? a : b;
}

double interp_f_min(double a, double b)
{
	if (isnan(a) || isnan(b))
		return NAN;
	return a < b ? a : b;
}

/* Operands are int32 values, so sums, differences and products fit in
 * int64 (products after the unsigned multiply, which wraps modulo 2^64
 * and so keeps the low 32 bits right). */
bool interp_i_add(int64_t a, int64_t b, int64_t *r)
{
	*r = a + b;
	return true;
}

bool interp_i_sub(int64_t a, int64_t b, int64_t *r)
{
	*r = a - b;
	return true;
}

bool interp_i_mul(int64_t a, int64_t b, int64_t *r)
{
	*r = (int64_t)((uint64_t)a * (uint64_t)b);
	return true;
}

/* Truncating division, as torch.div(rounding_mode="trunc"); by zero it is
 * an error (PyTorch raises ZeroDivisionError). */
bool interp_i_div(int64_t a, int64_t b, int64_t *r)
{
	if (b == 0)
		return false;
	*r = a / b;
	return true;
}

/* Integer power by squaring, wrapping; a negative exponent is an error as
 * in PyTorch ("Integers to negative integer powers are not allowed"). */
bool interp_i_pow(int64_t a, int64_t b, int64_t *r)
{
	if (b < 0)
		return false;
	uint64_t base = (uint64_t)a, acc = 1;
	for (; b; b >>= 1) {
		if (b & 1)
			acc *= base;
		base *= base;
	}
	*r = (int64_t)acc;
	return true;
}

bool interp_i_max(int64_t a, int64_t b, int64_t *r)
{
	*r = a > b ? a : b;
	return true;
}

bool interp_i_min(int64_t a, int64_t b, int64_t *r)
{
	*r = a < b ? a : b;
	return true;
}

bool interp_c_lt(double a, double b)
{
	return a < b;
}

bool interp_c_le(double a, double b)
{
	return a <= b;
}

bool interp_c_gt(double a, double b)
{
	return a > b;
}

bool interp_c_ge(double a, double b)
{
	return a >= b;
}

bool interp_c_eq(double a, double b)
{
	return a == b;
}

bool interp_c_ne(double a, double b)
{
	return a != b;
}

/* ---- kernels ------------------------------------------------------------ */

/* Broadcast strides of operand i against the output, or an error naming
 * both shapes. */
static bool operand_strides(const interp_kernel *k, uint32_t i,
			    int64_t *strides)
{
	const interp_tensor *a = &k->args[i];
	if (interp_bcast_strides(a->dims, a->rank, k->out->dims, k->out->rank, 1,
				 strides))
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

/* Integer results use fi where the op has one (exact), else f converted
 * as a cast would. */
bool interp_k_unary(const interp_kernel *k, interp_f1 f, interp_i1 fi)
{
	const interp_tensor *x = &k->args[0];
	interp_tensor *out = k->out;
	if (!same_numel(k, x))
		return false;
	int64_t n = interp_tensor_numel(out);
	for (int64_t i = 0; i < n; i++) {
		if (out->dtype == IR_I32 && fi)
			interp_sti(out, i, fi(interp_ldi(x, i)));
		else
			interp_st(out, i, f(interp_round(out->dtype,
							 interp_ld(x, i))));
	}
	return true;
}

bool interp_k_binary(const interp_kernel *k, interp_f2 f, interp_i2 fi)
{
	interp_tensor *out = k->out;
	int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
	if (!operand_strides(k, 0, sa) || !operand_strides(k, 1, sb))
		return false;
	const interp_tensor *a = &k->args[0], *b = &k->args[1];
	int64_t n = interp_tensor_numel(out);
	for (int64_t i = 0; i < n; i++) {
		int64_t ia = interp_index_dot(idx, sa, out->rank);
		int64_t ib = interp_index_dot(idx, sb, out->rank);
		if (out->dtype == IR_I32) {
			int64_t r;
			if (!fi(interp_ldi(a, ia), interp_ldi(b, ib), &r))
				return interp_fail(k, "integer %s %lld",
						   fi == interp_i_pow
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

bool interp_k_compare(const interp_kernel *k, interp_cmp cmp)
{
	interp_tensor *out = k->out;
	int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
	if (!operand_strides(k, 0, sa) || !operand_strides(k, 1, sb))
		return false;
	int64_t n = interp_tensor_numel(out);
	for (int64_t i = 0; i < n; i++) {
		double x = interp_ld(&k->args[0], interp_index_dot(idx, sa, out->rank));
		double y = interp_ld(&k->args[1], interp_index_dot(idx, sb, out->rank));
		interp_sti(out, i, cmp(x, y));
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
