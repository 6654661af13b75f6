/*
 * ir_scalar.h - the scalar arithmetic of the elementwise ops, written once
 * for every layer that computes on numbers: the interpreter's kernels,
 * the frontend's folding of calls on numbers and its evaluation of
 * `example` inputs. The JIT's vector forms (codegen/cg_lower_ew.c) are
 * checked against these through the interpreter.
 *
 * Floats are computed in double (callers round to float32 when the value
 * is one). Integers are int64 in and out with two's-complement wrapping
 * and no undefined behaviour for any input; callers that hold int32
 * values wrap the result to 32 bits on store, as PyTorch's int32 tensors
 * do.
 */
#ifndef IR_SCALAR_H
#define IR_SCALAR_H

#include "ir.h"

typedef double (*ir_scalar_f1)(double x);
typedef double (*ir_scalar_f2)(double a, double b);

/* Why an integer operation has no result. */
typedef enum ir_scalar_status {
	IR_SCALAR_OK,
	IR_SCALAR_DIV_BY_ZERO, /* integer division by 0 (PyTorch raises) */
	IR_SCALAR_NEG_POWER, /* integer to a negative power (PyTorch raises) */
} ir_scalar_status;

/* Float to int32 as PyTorch's .int() on x86 and the JIT: truncation
 * toward zero; NaN and values outside the int32 range give INT32_MIN. */
static inline int32_t ir_scalar_f2i(double x)
{
	if (!(x > -2147483649.0 && x < 2147483648.0))
		return INT32_MIN;
	return (int32_t)x;
}

/* The float function of a unary-family op (ir_op_table[op].family ==
 * IR_FAM_UNARY); asserts on any other op. */
ir_scalar_f1 ir_scalar_unary_fn(ir_op op);
double ir_scalar_unary(ir_op op, double x);

/* A unary-family op on an integer: exact for ops with IR_OPF_INT (neg and
 * abs wrap, so abs(INT64_MIN) is INT64_MIN), otherwise the float function
 * converted as a cast (ir_scalar_f2i) converts. */
int64_t ir_scalar_unary_int(ir_op op, int64_t x);

/* Whether op has an exact integer form (the IR_OPF_INT unary ops). */
bool ir_scalar_has_int(ir_op op);

/* The float function of a binary-family op; asserts on any other op. */
ir_scalar_f2 ir_scalar_binary_fn(ir_op op);
double ir_scalar_binary(ir_op op, double a, double b);

/* A binary-family op on integers into *r (wrapping); division truncates
 * toward zero and by zero fails, a negative power fails. */
ir_scalar_status ir_scalar_binary_int(ir_op op, int64_t a, int64_t b,
				      int64_t *r);

/* A compare-family op (lt, le, gt, ge, eq, ne) on two numbers; NaN
 * compares unequal to everything. Exact for int32 and float operands. */
bool ir_scalar_compare(ir_op op, double a, double b);

#endif
