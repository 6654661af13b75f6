/*
 * ir_scalar.c - one scalar function per elementwise op (ir_scalar.h).
 *
 * The tables are built from ops.def's X_UNARY, X_BINARY and X_COMPARE
 * rows, each naming a function after its op (scalar_NEG, int_ADD,
 * cmp_LT), so an elementwise op added to ops.def does not build until its
 * arithmetic is written here. The integer forms of unary ops exist only
 * for those flagged IR_OPF_INT.
 */
#include "ir_scalar.h"

#include <assert.h>
#include <math.h>

/* ---- unary -------------------------------------------------------------------- */

static double scalar_NEG(double x)
{
	return -x;
}

static double scalar_EXP(double x)
{
	return exp(x);
}

static double scalar_LOG(double x)
{
	return log(x);
}

static double scalar_TANH(double x)
{
	return tanh(x);
}

static double scalar_SIGMOID(double x)
{
	return 1.0 / (1.0 + exp(-x));
}

/* max(x, 0) that keeps NaN and turns -0 into 0, as torch.relu. */
static double scalar_RELU(double x)
{
	return x > 0 || isnan(x) ? x : 0.0;
}

static double scalar_SIN(double x)
{
	return sin(x);
}

static double scalar_COS(double x)
{
	return cos(x);
}

static double scalar_SQRT(double x)
{
	return sqrt(x);
}

static double scalar_ABS(double x)
{
	return fabs(x);
}

static double scalar_ERF(double x)
{
	return erf(x);
}

static const ir_scalar_f1 unary_fns[IR_OP_COUNT] = {
#define X(e, name, n_in, attr, fam, flags)
#define X_UNARY(e, name, flags) [IR_OP_##e] = scalar_##e,
#include "ops.def"
#undef X
};

/* Negation modulo 2^64: no overflow at INT64_MIN. */
static int64_t int_neg(int64_t x)
{
	return (int64_t)(0 - (uint64_t)x);
}

static int64_t int_abs(int64_t x)
{
	return x < 0 ? int_neg(x) : x;
}

static int64_t int_relu(int64_t x)
{
	return x > 0 ? x : 0;
}

/* The ops flagged IR_OPF_INT (tests/test_ir.c checks the two agree). */
static int64_t (*const unary_int_fns[IR_OP_COUNT])(int64_t) = {
	[IR_OP_NEG] = int_neg,
	[IR_OP_ABS] = int_abs,
	[IR_OP_RELU] = int_relu,
};

ir_scalar_f1 ir_scalar_unary_fn(ir_op op)
{
	assert((unsigned)op < IR_OP_COUNT && unary_fns[op]);
	return unary_fns[op];
}

double ir_scalar_unary(ir_op op, double x)
{
	return ir_scalar_unary_fn(op)(x);
}

int64_t ir_scalar_unary_int(ir_op op, int64_t x)
{
	assert((unsigned)op < IR_OP_COUNT);
	if (unary_int_fns[op])
		return unary_int_fns[op](x);
	return ir_scalar_f2i(ir_scalar_unary(op, (double)x));
}

bool ir_scalar_has_int(ir_op op)
{
	return (unsigned)op < IR_OP_COUNT && unary_int_fns[op];
}

/* ---- binary ------------------------------------------------------------------- */

static double scalar_ADD(double a, double b)
{
	return a + b;
}

static double scalar_SUB(double a, double b)
{
	return a - b;
}

static double scalar_MUL(double a, double b)
{
	return a * b;
}

static double scalar_DIV(double a, double b)
{
	return a / b;
}

static double scalar_POW(double a, double b)
{
	return pow(a, b);
}

/* torch.maximum/minimum propagate NaN from either side. */
static double scalar_MAXIMUM(double a, double b)
{
	if (isnan(a) || isnan(b))
		return NAN;
	return a > b ? a : b;
}

static double scalar_MINIMUM(double a, double b)
{
	if (isnan(a) || isnan(b))
		return NAN;
	return a < b ? a : b;
}

static const ir_scalar_f2 binary_fns[IR_OP_COUNT] = {
#define X(e, name, n_in, attr, fam, flags)
#define X_BINARY(e, name, flags) [IR_OP_##e] = scalar_##e,
#include "ops.def"
#undef X
};

/* Sums, differences and products modulo 2^64 (for int32 operands, which
 * the interpreter has, the low 32 bits are PyTorch's wrapped result). */
static ir_scalar_status int_ADD(int64_t a, int64_t b, int64_t *r)
{
	*r = (int64_t)((uint64_t)a + (uint64_t)b);
	return IR_SCALAR_OK;
}

static ir_scalar_status int_SUB(int64_t a, int64_t b, int64_t *r)
{
	*r = (int64_t)((uint64_t)a - (uint64_t)b);
	return IR_SCALAR_OK;
}

static ir_scalar_status int_MUL(int64_t a, int64_t b, int64_t *r)
{
	*r = (int64_t)((uint64_t)a * (uint64_t)b);
	return IR_SCALAR_OK;
}

/* Truncating division, as torch.div(rounding_mode="trunc"); INT64_MIN /
 * -1 wraps to INT64_MIN. */
static ir_scalar_status int_DIV(int64_t a, int64_t b, int64_t *r)
{
	if (b == 0)
		return IR_SCALAR_DIV_BY_ZERO;
	*r = b == -1 ? int_neg(a) : a / b;
	return IR_SCALAR_OK;
}

/* Power by squaring, wrapping; PyTorch refuses negative exponents
 * ("Integers to negative integer powers are not allowed"). */
static ir_scalar_status int_POW(int64_t a, int64_t b, int64_t *r)
{
	if (b < 0)
		return IR_SCALAR_NEG_POWER;
	uint64_t base = (uint64_t)a, acc = 1;
	for (; b; b >>= 1) {
		if (b & 1)
			acc *= base;
		base *= base;
	}
	*r = (int64_t)acc;
	return IR_SCALAR_OK;
}

static ir_scalar_status int_MAXIMUM(int64_t a, int64_t b, int64_t *r)
{
	*r = a > b ? a : b;
	return IR_SCALAR_OK;
}

static ir_scalar_status int_MINIMUM(int64_t a, int64_t b, int64_t *r)
{
	*r = a < b ? a : b;
	return IR_SCALAR_OK;
}

typedef ir_scalar_status (*int_fn2)(int64_t a, int64_t b, int64_t *r);

static const int_fn2 binary_int_fns[IR_OP_COUNT] = {
#define X(e, name, n_in, attr, fam, flags)
#define X_BINARY(e, name, flags) [IR_OP_##e] = int_##e,
#include "ops.def"
#undef X
};

ir_scalar_f2 ir_scalar_binary_fn(ir_op op)
{
	assert((unsigned)op < IR_OP_COUNT && binary_fns[op]);
	return binary_fns[op];
}

double ir_scalar_binary(ir_op op, double a, double b)
{
	return ir_scalar_binary_fn(op)(a, b);
}

ir_scalar_status ir_scalar_binary_int(ir_op op, int64_t a, int64_t b, int64_t *r)
{
	assert((unsigned)op < IR_OP_COUNT && binary_int_fns[op]);
	return binary_int_fns[op](a, b, r);
}

/* ---- comparisons ------------------------------------------------------------- */

static bool cmp_LT(double a, double b)
{
	return a < b;
}

static bool cmp_LE(double a, double b)
{
	return a <= b;
}

static bool cmp_GT(double a, double b)
{
	return a > b;
}

static bool cmp_GE(double a, double b)
{
	return a >= b;
}

static bool cmp_EQ(double a, double b)
{
	return a == b;
}

static bool cmp_NE(double a, double b)
{
	return a != b;
}

static bool (*const compare_fns[IR_OP_COUNT])(double, double) = {
#define X(e, name, n_in, attr, fam, flags)
#define X_COMPARE(e, name, flags) [IR_OP_##e] = cmp_##e,
#include "ops.def"
#undef X
};

bool ir_scalar_compare(ir_op op, double a, double b)
{
	assert((unsigned)op < IR_OP_COUNT && compare_fns[op]);
	return compare_fns[op](a, b);
}
