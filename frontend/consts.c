/*
 * consts.c - the tensor constructors zeros, ones, full, arange, normal and
 * uniform, which make constants at compile time.
 *
 * normal and uniform draw from a small counter-based generator
 * (SplitMix64): each call without an explicit seed takes the next value
 * of a counter kept per compile, so two calls differ but every compile of
 * a file gives the same numbers. The frontend keeps its own generator so
 * that it does not link the runtime.
 */
#include "elab.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define FE_PI 3.14159265358979323846

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t *state)
{
	return (double)(splitmix64(state) >> 11) * 0x1.0p-53;
}

/* Standard normal by Box-Muller. */
static double rng_normal(uint64_t *state)
{
	double u1 = 1.0 - rng_uniform(state), u2 = rng_uniform(state);
	return sqrt(-2.0 * log(u1)) * cos(2.0 * FE_PI * u2);
}

/* A static shape argument; reports symbolic or too large shapes. */
static bool static_shape(fe_elab *e, const fe_args *a, uint32_t i, ir_type *t)
{
	char buf[128];
	if (!fe_to_shape(e, a->v[i], a->locs[i], false, t))
		return false;
	int64_t n = 1;
	for (int k = 0; k < t->rank; k++) {
		if (!ir_dim_is_static(t->dims[k]))
			n = -1;
		else if (n >= 0 && __builtin_mul_overflow(n, t->dims[k].coef, &n))
			n = INT64_MAX;
	}
	if (n < 0) {
		ir_type_format(e->m, t, buf, sizeof buf);
		ir_error(e->ctx, a->locs[i],
			 "%s: the shape must be known at "
			 "compile time, got [%s]",
			 a->name, buf);
		return false;
	}
	if (n > FE_MAX_CONST_NUMEL) {
		ir_error(e->ctx, a->locs[i],
			 "%s: a constant of %lld elements is "
			 "too large",
			 a->name, (long long)n);
		return false;
	}
	return true;
}

static bool dtype_arg(fe_elab *e, const fe_args *a, uint32_t i, ir_dtype *out)
{
	if (a->v[i].kind == FE_V_NONE)
		return true;
	if (a->v[i].kind != FE_V_DTYPE) {
		fe_expected(e, a->locs[i], "a dtype (f32 or i32)", a->v[i]);
		return false;
	}
	*out = a->v[i].dtype;
	return true;
}

/* A number argument an f32 constant is made of: beyond f32's range it
 * would become an infinity (PyTorch's full refuses it). */
static bool f32_arg(fe_elab *e, const fe_args *a, uint32_t i, double v)
{
	if (fabs(v) <= FLT_MAX)
		return true;
	ir_error(e->ctx, a->locs[i], "%s: %g is beyond the range of f32",
		 a->name, v);
	return false;
}

fe_value fe_const_of_doubles(fe_elab *e, const ir_type *t, const double *vals,
			     ir_loc loc)
{
	int64_t n = ir_type_numel_static(t);
	void *data = ir_alloc(e->ctx, (size_t)(n ? n : 1) * 4);
	if (!data)
		return fe_err();
	for (int64_t i = 0; i < n; i++) {
		if (t->dtype != IR_I32) {
			((float *)data)[i] = (float)vals[i];
			continue;
		}
		/* Converting a double outside int32 is undefined behaviour
		 * (on x86 it gave INT32_MIN): an error instead. */
		if (!(vals[i] >= INT32_MIN && vals[i] <= INT32_MAX)) {
			ir_error(e->ctx, loc, "%.0f does not fit in i32",
				 vals[i]);
			ir_free(e->ctx, data);
			return fe_err();
		}
		((int32_t *)data)[i] = (int32_t)vals[i];
	}
	fe_value v = fe_const_tensor(e, t, data, loc);
	ir_free(e->ctx, data);
	return v;
}

/* A constant of type t with every element v. */
static fe_value filled(fe_elab *e, const ir_type *t, double v, ir_loc loc)
{
	int64_t n = ir_type_numel_static(t);
	double *vals = ir_alloc(e->ctx, (size_t)(n ? n : 1) * sizeof *vals);
	if (!vals)
		return fe_err();
	for (int64_t i = 0; i < n; i++)
		vals[i] = v;
	fe_value c = fe_const_of_doubles(e, t, vals, loc);
	ir_free(e->ctx, vals);
	return c;
}

/* zeros(shape, dtype = f32), ones(shape, dtype = f32) */
fe_value fe_bi_zeros(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_type t = {.dtype = IR_F32};
	if (!static_shape(e, a, 0, &t) || !dtype_arg(e, a, 1, &t.dtype))
		return fe_err();
	return filled(e, &t, b->name[0] == 'o' ? 1 : 0, a->loc);
}

/* full(shape, value, dtype): i32 for an integer value unless told. */
fe_value fe_bi_full(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_type t = {0};
	double v;
	(void)b;
	if (!static_shape(e, a, 0, &t) ||
	    !fe_to_number(e, a->v[1], a->locs[1], &v))
		return fe_err();
	t.dtype = a->v[1].num.is_int ? IR_I32 : IR_F32;
	if (!dtype_arg(e, a, 2, &t.dtype) ||
	    (t.dtype == IR_F32 && !f32_arg(e, a, 1, v)))
		return fe_err();
	return filled(e, &t, v, a->loc);
}

/* arange with a run-time length, end - start a dim (T, or T + 1 - 1): an
 * arange node, computed when the function runs. start is a number, the
 * step 1. */
static fe_value run_time_arange(fe_elab *e, const fe_args *a, fe_value start,
				fe_value end)
{
	double s;
	if (a->v[2].kind != FE_V_NONE) {
		double st;
		if (!fe_to_number(e, a->v[2], a->locs[2], &st))
			return fe_err();
		if (st != 1) {
			ir_error(e->ctx, a->locs[2],
				 "an arange of run-time length "
				 "takes step 1, got %g",
				 st);
			return fe_err();
		}
	}
	if (start.kind == FE_V_DIM) {
		ir_error(e->ctx, a->locs[0],
			 "an arange's start is a number, not "
			 "a run-time size");
		return fe_err();
	}
	if (!fe_to_number(e, start, a->locs[0], &s))
		return fe_err();
	fe_value n = fe_binop(e, FE_T_MINUS, end, start, false, false, a->loc);
	ir_type t = {.dtype = start.num.is_int ? IR_I32 : IR_F32, .rank = 1};
	if (n.kind == FE_V_ERR || !fe_to_dim(e, n, a->loc, false, &t.dims[0]))
		return fe_err();
	ir_attr at = {.arange = {s, 1}};
	return fe_build(e, IR_OP_ARANGE, NULL, 0, &at, &t, a->loc);
}

/* arange(end), arange(start, end, step = 1): i32 if all are integers. */
fe_value fe_bi_arange(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	fe_value start = a->v[0], end = a->v[1], step = a->v[2];
	double s, en, st = 1;
	(void)b;
	if (end.kind == FE_V_NONE) {
		end = start;
		start = fe_int(0);
	}
	if (start.kind == FE_V_DIM || end.kind == FE_V_DIM)
		return run_time_arange(e, a, start, end);
	if (!fe_to_number(e, start, a->locs[0], &s) ||
	    !fe_to_number(e, end, a->locs[1], &en) ||
	    (step.kind != FE_V_NONE && !fe_to_number(e, step, a->locs[2], &st)))
		return fe_err();
	if (st == 0) { /* as PyTorch, rather than "is empty" */
		ir_error(e->ctx, a->locs[2], "arange: step must be nonzero");
		return fe_err();
	}
	bool all_int = start.num.is_int && end.num.is_int &&
		       (step.kind == FE_V_NONE || step.num.is_int);
	double count = st != 0 ? ceil((en - s) / st) : 0;
	if (!(count >= 1) || count > FE_MAX_CONST_NUMEL) {
		ir_error(e->ctx, a->loc, "arange(%g, %g, %g) %s", s, en, st,
			 count >= 1 ? "is too large" : "is empty");
		return fe_err();
	}
	ir_type t = {.dtype = all_int ? IR_I32 : IR_F32,
		     .rank = 1,
		     .dims = {ir_dim_static((int64_t)count)}};
	double *vals = ir_alloc(e->ctx, (size_t)count * sizeof *vals);
	if (!vals)
		return fe_err();
	for (int64_t i = 0; i < (int64_t)count; i++)
		vals[i] = s + (double)i * st;
	fe_value c = fe_const_of_doubles(e, &t, vals, a->loc);
	ir_free(e->ctx, vals);
	return c;
}

/* normal(shape, mean = 0, std = 1, seed), uniform(shape, low = 0,
 * high = 1, seed): f32 constants. */
fe_value fe_bi_random(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_type t = {.dtype = IR_F32};
	double p[2] = {0, 1};
	int64_t seed = 0;
	bool is_normal = b->name[0] == 'n';
	if (!static_shape(e, a, 0, &t))
		return fe_err();
	for (uint32_t i = 0; i < 2; i++)
		if (a->v[i + 1].kind != FE_V_NONE &&
		    (!fe_to_number(e, a->v[i + 1], a->locs[i + 1], &p[i]) ||
		     !f32_arg(e, a, i + 1, p[i])))
			return fe_err();
	if (a->v[3].kind != FE_V_NONE
		    ? !fe_to_int(e, a->v[3], a->locs[3], &seed)
		    : ((seed = (int64_t)e->rng_counter++), false))
		return fe_err();
	/* As the initializers normal(...) and uniform(...) of a param (and
	 * PyTorch's normal_ and uniform_); NaN fails too. */
	if (is_normal && !(p[1] >= 0)) {
		ir_error(e->ctx, a->loc, "normal: std must be >= 0, got %g",
			 p[1]);
		return fe_err();
	}
	if (!is_normal && !(p[0] <= p[1])) {
		ir_error(e->ctx, a->loc, "uniform: low %g is above high %g",
			 p[0], p[1]);
		return fe_err();
	}
	if (!is_normal && !(p[1] - p[0] <= FLT_MAX)) {
		ir_error(e->ctx, a->loc,
			 "uniform: high - low = %g is beyond the range of f32",
			 p[1] - p[0]);
		return fe_err();
	}
	int64_t n = ir_type_numel_static(&t);
	double *vals = ir_alloc(e->ctx, (size_t)(n ? n : 1) * sizeof *vals);
	if (!vals)
		return fe_err();
	uint64_t state = (uint64_t)seed * 0xd1342543de82ef95ull + 0x5eed;
	for (int64_t i = 0; i < n; i++)
		vals[i] = is_normal ? p[0] + p[1] * rng_normal(&state)
				    : p[0] + (p[1] - p[0]) * rng_uniform(&state);
	fe_value c = fe_const_of_doubles(e, &t, vals, a->loc);
	ir_free(e->ctx, vals);
	return c;
}
