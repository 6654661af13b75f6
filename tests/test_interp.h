/*
 * test_interp.h - the fixture the interpreter's test programs share: a
 * module with one function, builders for leaves and ops (types inferred by
 * ir_build, as the frontend builds them), a one-output run, and the
 * diagnostics captured in memory so that tests can read error messages.
 */
#ifndef ATTNC_TEST_INTERP_H
#define ATTNC_TEST_INTERP_H

#include "interp.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* SHAPE(2, 3) expands to "rank, dims". */
#define SHAPE(...)                                                             \
	(int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]) \
	{                                                                      \
		__VA_ARGS__                                                    \
	}
#define SCALAR 0, NULL
#define F32S(...) ((const float[]){__VA_ARGS__})
#define I32S(...) ((const int32_t[]){__VA_ARGS__})

enum { TI_MAX_INPUTS = 8 };

typedef struct ti_fx {
	ir_ctx ctx;
	ir_module *m;
	ir_func *f;
	char *diag;
	size_t diag_len;
	ir_id inputs[TI_MAX_INPUTS];
	const char *input_names[TI_MAX_INPUTS];
	ir_id output;
} ti_fx;

static inline void ti_init(ti_fx *x)
{
	memset(x, 0, sizeof *x);
	ir_ctx_init(&x->ctx);
	x->ctx.max_errors = 0;
	x->ctx.diag_out = open_memstream(&x->diag, &x->diag_len);
	ck_assert_ptr_nonnull(x->ctx.diag_out);
	x->m = ir_module_create(&x->ctx, "t");
	ck_assert_ptr_nonnull(x->m);
	x->f = ir_module_add_func(x->m, "f", (ir_loc){0});
	ck_assert_ptr_nonnull(x->f);
	x->f->inputs = x->inputs;
	x->f->input_names = x->input_names;
	x->f->outputs = &x->output;
	x->f->n_outputs = 1;
}

static inline void ti_fini(ti_fx *x)
{
	ir_module_destroy(x->m);
	fclose(x->ctx.diag_out);
	free(x->diag);
	ir_ctx_fini(&x->ctx);
}

/* What was reported so far. */
static inline const char *ti_diag(ti_fx *x)
{
	fflush(x->ctx.diag_out);
	return x->diag ? x->diag : "";
}

static inline ir_type ti_type(ir_dtype dt, int rank, const int64_t *dims)
{
	ir_type t = {.dtype = dt, .rank = (uint8_t)rank};
	for (int i = 0; i < rank; i++)
		t.dims[i] = ir_dim_static(dims[i]);
	return t;
}

/* Builds a node; fails the test if the shape rule rejects it. */
static inline ir_id ti_node(ti_fx *x, ir_op op, const ir_id *args,
			    uint32_t n_args, const ir_attr *attr,
			    const ir_type *type)
{
	ir_id id = ir_build(x->m, x->f, op, args, n_args, attr, type,
			    (ir_loc){0});
	ck_assert_msg(id != IR_NONE, "ir_build %s failed: %s",
		      ir_op_table[op].name, ti_diag(x));
	return id;
}

static inline ir_id ti_op1(ti_fx *x, ir_op op, ir_id a, const ir_attr *attr)
{
	return ti_node(x, op, &a, 1, attr, NULL);
}

static inline ir_id ti_op2(ti_fx *x, ir_op op, ir_id a, ir_id b,
			   const ir_attr *attr)
{
	ir_id args[] = {a, b};
	return ti_node(x, op, args, 2, attr, NULL);
}

static inline ir_id ti_op3(ti_fx *x, ir_op op, ir_id a, ir_id b, ir_id c,
			   const ir_attr *attr)
{
	ir_id args[] = {a, b, c};
	return ti_node(x, op, args, 3, attr, NULL);
}

/* A constant leaf of dtype dt holding data. */
static inline ir_id ti_const(ti_fx *x, ir_dtype dt, int rank,
			     const int64_t *dims, const void *data)
{
	ir_type t = ti_type(dt, rank, dims);
	int32_t c = ir_module_add_const(x->m, &t, data);
	ck_assert_int_ge(c, 0);
	ir_attr a = {.const_index = (uint32_t)c};
	return ti_node(x, IR_OP_CONST, NULL, 0, &a, &t);
}

static inline ir_id ti_cf(ti_fx *x, int rank, const int64_t *dims,
			  const float *v)
{
	return ti_const(x, IR_F32, rank, dims, v);
}

static inline ir_id ti_ci(ti_fx *x, int rank, const int64_t *dims,
			  const int32_t *v)
{
	return ti_const(x, IR_I32, rank, dims, v);
}

/* An input leaf of type t, appended to the function's arguments. */
static inline ir_id ti_input(ti_fx *x, const char *name, const ir_type *t)
{
	uint32_t i = x->f->n_inputs;
	ck_assert_uint_lt(i, TI_MAX_INPUTS);
	ir_attr a = {.input_index = i};
	ir_id id = ti_node(x, IR_OP_INPUT, NULL, 0, &a, t);
	x->inputs[i] = id;
	x->input_names[i] = name;
	x->f->n_inputs = i + 1;
	return id;
}

/* A tensor owning a copy of data. */
static inline interp_tensor ti_tensor(ti_fx *x, ir_dtype dt, int rank,
				      const int64_t *dims, const void *data)
{
	interp_tensor t;
	ck_assert(interp_tensor_alloc(&x->ctx, &t, dt, rank, dims));
	size_t bytes = (size_t)interp_tensor_numel(&t) * ir_dtype_size(dt);
	if (bytes)
		memcpy(t.data, data, bytes);
	return t;
}

/* Runs f with `out` as its one output; false (with diagnostics) on a
 * run-time error. */
static inline bool ti_run_opts(ti_fx *x, ir_id out, const interp_opts *opts,
			       const interp_tensor *inputs,
			       interp_tensor *result)
{
	x->output = out;
	return interp_run(&x->ctx, x->m, x->f, opts, NULL, inputs, result);
}

static inline bool ti_run(ti_fx *x, ir_id out, interp_tensor *result)
{
	interp_opts opts = {0};
	return ti_run_opts(x, out, &opts, NULL, result);
}

/* Runs and checks the result's dims and values within tol. */
static inline void ti_expect(ti_fx *x, ir_id out, int rank, const int64_t *dims,
			     const double *want, double tol)
{
	interp_tensor r;
	ck_assert_msg(ti_run(x, out, &r), "run failed: %s", ti_diag(x));
	ck_assert_int_eq(r.rank, rank);
	for (int i = 0; i < rank; i++)
		ck_assert_int_eq(r.dims[i], dims[i]);
	int64_t n = interp_tensor_numel(&r);
	for (int64_t i = 0; i < n; i++)
		ck_assert_msg(interp_tensor_get(&r, i) == want[i] ||
				      fabs(interp_tensor_get(&r, i) - want[i]) <=
					      tol,
			      "element %lld: got %.9g, want %.9g", (long long)i,
			      interp_tensor_get(&r, i), want[i]);
	interp_tensor_fini(&x->ctx, &r);
}

#define DBL(...) ((const double[]){__VA_ARGS__})

/* Runs the node and expects a run-time error whose text contains msg. */
static inline void ti_expect_error(ti_fx *x, ir_id out, const char *msg)
{
	interp_tensor r;
	ck_assert(!ti_run(x, out, &r));
	ck_assert_ptr_null(r.data);
	ck_assert_msg(strstr(ti_diag(x), msg), "diagnostic '%s' lacks '%s'",
		      ti_diag(x), msg);
}

#endif
