/*
 * test_passes_grad.c - the gradient rule of every differentiable op,
 * checked against finite differences.
 *
 * Each test builds a small graph by hand (odd shapes, broadcasting,
 * size-1 dims, rank 0, symbolic dims), reduces its result to a scalar
 * loss with a fixed random weighting, sum(out * W), and runs
 * pass_autodiff. The derived f_grad then runs in the interpreter in
 * float64, and every element of every parameter's gradient is compared
 * with a central difference (L(p + eps) - L(p - eps)) / 2 eps of f, also
 * in float64. The same gradients must come out after the pass pipeline.
 * Then the structure (dropout masks, locations, fan-in, the printed IR)
 * and the errors.
 */
#include "interp.h"
#include "ir.h"
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARAMS 8
#define MAX_IN 4

/* ---- a loss function built node by node --------------------------------- */

typedef struct gx {
	ir_ctx ctx;
	ir_module *m;
	ir_func *f;
	uint64_t seed;
	double lo[MAX_PARAMS], hi[MAX_PARAMS]; /* each parameter's values */
	interp_tensor in[MAX_IN];
	interp_opts opts;
	char *diag;
	size_t diag_len;
} gx;

/* SplitMix64 in [0, 1). */
static double rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) / 9007199254740992.0;
}

static void gx_init(gx *x)
{
	memset(x, 0, sizeof *x);
	ir_ctx_init(&x->ctx);
	x->ctx.diag_out = open_memstream(&x->diag, &x->diag_len);
	x->m = ir_module_create(&x->ctx, "t");
	x->f = ir_module_add_func(x->m, "f", (ir_loc){0});
	x->f->is_export = true;
	x->f->inputs = ir_arena_alloc(&x->m->arena, MAX_IN * sizeof(ir_id));
	x->f->input_names = ir_arena_alloc(&x->m->arena,
					   MAX_IN * sizeof(char *));
	x->f->outputs = ir_arena_alloc(&x->m->arena, 2 * sizeof(ir_id));
	x->f->output_names = ir_arena_alloc(&x->m->arena, 2 * sizeof(char *));
	x->seed = 42;
	x->opts.is_f64 = true;
}

static const char *gx_diag(gx *x)
{
	fflush(x->ctx.diag_out);
	return x->diag ? x->diag : "";
}

static void gx_fini(gx *x)
{
	for (uint32_t i = 0; i < x->f->n_inputs; i++)
		interp_tensor_fini(&x->ctx, &x->in[i]);
	ir_module_destroy(x->m);
	fclose(x->ctx.diag_out);
	free(x->diag);
	ir_ctx_fini(&x->ctx);
}

/* A symbol with a fallback value, so that nothing needs to bind it. */
static ir_dim sym(gx *x, const char *name, int64_t value, int64_t coef)
{
	int32_t s = ir_module_add_sym(x->m, name, (ir_loc){0});
	x->m->syms[s].fallback = value;
	return (ir_dim){coef, s};
}

static ir_id build_at(gx *x, ir_op op, const ir_id *args, uint32_t n,
		      const ir_attr *attr, const ir_type *t, uint32_t line)
{
	ir_id id = ir_build(x->m, x->f, op, args, n, attr, t,
			    (ir_loc){.file = 0, .line = line, .col = 1});
	ck_assert_msg(id != IR_NONE, "building %s: %s", ir_op_table[op].name,
		      gx_diag(x));
	return id;
}

static ir_id build(gx *x, ir_op op, const ir_id *args, uint32_t n,
		   const ir_attr *attr, const ir_type *t)
{
	return build_at(x, op, args, n, attr, t, 100 + x->f->g.n_nodes);
}

/* A parameter whose values the checks draw uniformly from [lo, hi). */
static ir_id param_in(gx *x, ir_type t, double lo, double hi)
{
	char name[16];
	snprintf(name, sizeof name, "p%u", x->m->n_params);
	ck_assert_uint_lt(x->m->n_params, MAX_PARAMS);
	x->lo[x->m->n_params] = lo;
	x->hi[x->m->n_params] = hi;
	int32_t p = ir_module_add_param(x->m, name, &t, IR_INIT_ZEROS, 0, 0,
					(ir_loc){0});
	ir_attr a = {.param_index = (uint32_t)p};
	return build(x, IR_OP_PARAM, NULL, 0, &a, &t);
}

static ir_id param(gx *x, ir_type t)
{
	return param_in(x, t, -1, 1);
}

static ir_id cnst(gx *x, ir_type t, const void *data)
{
	int32_t c = ir_module_add_const(x->m, &t, data);
	ir_attr a = {.const_index = (uint32_t)c};
	return build(x, IR_OP_CONST, NULL, 0, &a, &t);
}

static ir_id i32s(gx *x, ir_type t, const int32_t *v)
{
	t.dtype = IR_I32;
	return cnst(x, t, v);
}

static ir_id scalar(gx *x, float v)
{
	return cnst(x, tu_type(IR_F32, 0), &v);
}

/* An argument of type t whose value (static dims, data of t's dtype) the
 * runs pass in. */
static ir_id input(gx *x, ir_type t, const void *data)
{
	uint32_t k = x->f->n_inputs;
	ck_assert_uint_lt(k, MAX_IN);
	ir_attr a = {.input_index = k};
	ir_id id = build(x, IR_OP_INPUT, NULL, 0, &a, &t);
	x->f->input_names[k] = "in";
	x->f->inputs[k] = id;
	x->f->n_inputs++;
	int64_t dims[IR_MAX_RANK];
	for (int i = 0; i < t.rank; i++)
		dims[i] = t.dims[i].coef;
	ck_assert(interp_tensor_alloc(&x->ctx, &x->in[k], t.dtype, t.rank, dims));
	memcpy(x->in[k].data, data,
	       (size_t)interp_tensor_numel(&x->in[k]) * ir_dtype_size(t.dtype));
	return id;
}

static ir_id op1(gx *x, ir_op op, ir_id a, const ir_attr *attr)
{
	return build(x, op, &a, 1, attr, NULL);
}

static ir_id op2(gx *x, ir_op op, ir_id a, ir_id b, const ir_attr *attr)
{
	ir_id args[2] = {a, b};
	return build(x, op, args, 2, attr, NULL);
}

static ir_id op3(gx *x, ir_op op, ir_id a, ir_id b, ir_id c, const ir_attr *attr)
{
	ir_id args[3] = {a, b, c};
	return build(x, op, args, 3, attr, NULL);
}

/* reshape, broadcast and cast take their target as the node's type. */
static ir_id to(gx *x, ir_op op, ir_id a, ir_type t)
{
	return build(x, op, &a, 1, NULL, &t);
}

static ir_attr reduce(uint32_t axes, bool keepdim)
{
	return (ir_attr){.reduce = {axes, keepdim}};
}

static ir_type type_of(gx *x, ir_id id)
{
	return x->f->g.nodes[id].type;
}

static bool is_static(const ir_type *t)
{
	return ir_type_numel_static(t) >= 0;
}

/* Makes out the loss: sum(out * W) for a random constant W, or, if out's
 * shape is symbolic, sum(sin(3 out + 1)); returns the loss node. */
static ir_id finish(gx *x, ir_id out)
{
	ir_type t = type_of(x, out);
	ir_id w;
	if (is_static(&t)) {
		int64_t n = ir_type_numel_static(&t);
		float *v = malloc((size_t)(n + 1) * sizeof *v);
		for (int64_t i = 0; i < n; i++)
			v[i] = (float)(rnd(&x->seed) * 2 - 1);
		w = op2(x, IR_OP_MUL, out, cnst(x, t, v), NULL);
		free(v);
	} else {
		ir_id s = op2(x, IR_OP_MUL, out, scalar(x, 3), NULL);
		w = op1(x, IR_OP_SIN, op2(x, IR_OP_ADD, s, scalar(x, 1), NULL),
			NULL);
	}
	ir_attr all = reduce((1u << t.rank) - 1, false);
	ir_id loss = t.rank ? op1(x, IR_OP_SUM, w, &all) : w;
	x->f->outputs[0] = loss;
	x->f->output_names[0] = "loss";
	x->f->n_outputs = 1;
	return loss;
}

/* ---- running and comparing ------------------------------------------------ */

/* Parameter values in float64, drawn from each parameter's range. */
static interp_tensor *make_params(gx *x)
{
	interp_tensor *p = calloc(x->m->n_params + 1, sizeof *p);
	for (uint32_t k = 0; k < x->m->n_params; k++) {
		const ir_type *t = &x->m->params[k].type;
		int64_t dims[IR_MAX_RANK];
		for (int i = 0; i < t->rank; i++)
			dims[i] = t->dims[i].coef *
				  (t->dims[i].sym < 0
					   ? 1
					   : x->m->syms[t->dims[i].sym].fallback);
		ck_assert(interp_tensor_alloc(&x->ctx, &p[k], IR_F64, t->rank,
					      dims));
		double *v = p[k].data;
		for (int64_t i = 0; i < interp_tensor_numel(&p[k]); i++)
			v[i] = x->lo[k] + (x->hi[k] - x->lo[k]) * rnd(&x->seed);
	}
	return p;
}

static void free_tensors(gx *x, interp_tensor *t, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		interp_tensor_fini(&x->ctx, &t[i]);
	free(t);
}

static interp_tensor *run(gx *x, const char *fname, const interp_tensor *p)
{
	const ir_func *f = ir_module_find_func(x->m, fname);
	ck_assert_ptr_nonnull(f);
	interp_tensor *out = calloc(f->n_outputs + 1, sizeof *out);
	ck_assert_msg(interp_run(&x->ctx, x->m, f, &x->opts, p, x->in, out),
		      "running %s: %s", fname, gx_diag(x));
	return out;
}

static double loss_at(gx *x, const interp_tensor *p)
{
	interp_tensor *out = run(x, "f", p);
	double l = interp_tensor_get(&out[0], 0);
	free_tensors(x, out, 1);
	return l;
}

static double rel_err(double a, double b)
{
	return fabs(a - b) / fmax(fmax(fabs(a), fabs(b)), 1e-2);
}

/* Every gradient element of f_grad against central differences. */
static void compare_with_finite_differences(gx *x, interp_tensor *p,
					    const interp_tensor *grads)
{
	const double eps = 1e-6;
	for (uint32_t k = 0; k < x->m->n_params; k++) {
		double *v = p[k].data;
		ck_assert_int_eq(interp_tensor_numel(&grads[1 + k]),
				 interp_tensor_numel(&p[k]));
		for (int64_t i = 0; i < interp_tensor_numel(&p[k]); i++) {
			double v0 = v[i];
			v[i] = v0 + eps;
			double lp = loss_at(x, p);
			v[i] = v0 - eps;
			double lm = loss_at(x, p);
			v[i] = v0;
			double fd = (lp - lm) / (2 * eps);
			double g = interp_tensor_get(&grads[1 + k], i);
			ck_assert_msg(rel_err(g, fd) < 1e-6,
				      "d loss / d %s[%lld]: derived %.10g, "
				      "finite differences %.10g",
				      x->m->params[k].name, (long long)i, g, fd);
		}
	}
}

/* Derives f_grad, checks it against finite differences, then checks that
 * the optimized module gives the same gradients. */
static void check_grads(gx *x, ir_id out)
{
	finish(x, out);
	ck_assert_msg(pass_autodiff(x->m, "f"), "autodiff: %s", gx_diag(x));
	ck_assert_msg(ir_module_verify(x->m), "verify: %s", gx_diag(x));
	const ir_func *fg = ir_module_find_func(x->m, "f_grad");
	ck_assert_ptr_nonnull(fg);
	uint32_t n_out = fg->n_outputs;
	ck_assert_uint_eq(n_out, 1 + x->m->n_params);
	interp_tensor *p = make_params(x);
	interp_tensor *grads = run(x, "f_grad", p);
	ck_assert_double_eq_tol(interp_tensor_get(&grads[0], 0), loss_at(x, p),
				1e-12);
	compare_with_finite_differences(x, p, grads);
	pass_options po = {.verify_each = true};
	ck_assert_msg(pass_pipeline_run(x->m, &po), "pipeline: %s", gx_diag(x));
	interp_tensor *opt = run(x, "f_grad", p);
	for (uint32_t k = 0; k < n_out; k++)
		for (int64_t i = 0; i < interp_tensor_numel(&grads[k]); i++)
			ck_assert_msg(rel_err(interp_tensor_get(&opt[k], i),
					      interp_tensor_get(&grads[k], i)) <
					      1e-5,
				      "output %u[%lld] changed by the pipeline",
				      k, (long long)i);
	free_tensors(x, opt, n_out);
	free_tensors(x, grads, n_out);
	free_tensors(x, p, x->m->n_params);
}

/* The gradient of parameter k at element i (one run of f_grad). */
static double grad_at(gx *x, uint32_t k, int64_t i)
{
	interp_tensor *p = make_params(x);
	interp_tensor *g = run(x, "f_grad", p);
	double v = interp_tensor_get(&g[1 + k], i);
	free_tensors(x, g, 1 + x->m->n_params);
	free_tensors(x, p, x->m->n_params);
	return v;
}

/* ---- elementwise ----------------------------------------------------------- */

static void check_unary(ir_op op, double lo, double hi, ir_type t)
{
	gx x;
	gx_init(&x);
	ir_id a = param_in(&x, t, lo, hi);
	check_grads(&x, op1(&x, op, a, NULL));
	gx_fini(&x);
}

/* Every op of the unary family in ops.def, on [-2, 2] unless its domain
 * or a kink at 0 asks for less, so that a new op cannot go unchecked. */
START_TEST(test_unary_op_gradients_match_finite_differences)
{
	static const struct {
		ir_op op;
		double lo, hi;
	} cases[] = {
		{IR_OP_LOG, 0.2, 3},    {IR_OP_SQRT, 0.1, 4},
		{IR_OP_RELU, 0.05, 1},  {IR_OP_RELU, -1, -0.05},
		{IR_OP_ABS, 0.05, 2},   {IR_OP_ABS, -2, -0.05},
		{IR_OP_SIGMOID, -3, 3}, {IR_OP_SIN, -3, 3},
		{IR_OP_COS, -3, 3},
	};
	for (ir_op op = 0; op < IR_OP_COUNT; op++) {
		if (ir_op_table[op].family != IR_FAM_UNARY)
			continue;
		bool is_listed = false;
		for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
			if (cases[i].op != op)
				continue;
			is_listed = true;
			check_unary(op, cases[i].lo, cases[i].hi,
				    tu_type(IR_F32, 2, 3, 5));
			check_unary(op, cases[i].lo, cases[i].hi,
				    tu_type(IR_F32, 0));
		}
		if (is_listed)
			continue;
		check_unary(op, -2, 2, tu_type(IR_F32, 2, 3, 5));
		check_unary(op, -2, 2, tu_type(IR_F32, 0));
	}
}
END_TEST

START_TEST(test_relu_passes_the_gradient_only_where_x_is_positive)
{
	gx x;
	gx_init(&x);
	ir_id a = param_in(&x, tu_type(IR_F32, 1, 4), -1, 1);
	finish(&x, op1(&x, IR_OP_RELU, a, NULL));
	ck_assert(pass_autodiff(x.m, "f"));
	interp_tensor *p = make_params(&x);
	double *v = p[0].data;
	v[0] = -0.5, v[1] = 0.25, v[2] = -2, v[3] = 3;
	interp_tensor *g = run(&x, "f_grad", p);
	ck_assert_double_eq(interp_tensor_get(&g[1], 0), 0);
	ck_assert_double_ne(interp_tensor_get(&g[1], 1), 0);
	ck_assert_double_eq(interp_tensor_get(&g[1], 2), 0);
	ck_assert_double_ne(interp_tensor_get(&g[1], 3), 0);
	free_tensors(&x, g, 2);
	free_tensors(&x, p, 1);
	gx_fini(&x);
}
END_TEST

START_TEST(test_cast_passes_f32_gradients_and_stops_at_integers)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 2, 2, 3));
	ir_id b = param_in(&x, tu_type(IR_F32, 1, 3), 1.2, 3.8);
	ir_id same = to(&x, IR_OP_CAST, a, tu_type(IR_F32, 2, 2, 3));
	ir_id trunc = to(&x, IR_OP_CAST,
			 to(&x, IR_OP_CAST, b, tu_type(IR_I32, 1, 3)),
			 tu_type(IR_F32, 1, 3));
	check_grads(&x, op2(&x, IR_OP_MUL, same, trunc, NULL));
	/* b only feeds a float-to-int cast: its gradient is exactly 0. */
	ck_assert_double_eq(grad_at(&x, 1, 0), 0);
	ck_assert_double_eq(grad_at(&x, 1, 2), 0);
	gx_fini(&x);
}
END_TEST

/* a [2, 1, 4] op b [3, 1] -> [2, 3, 4]; then a op rank-0 b. */
static void check_binary(ir_op op, double lo, double hi)
{
	gx x;
	gx_init(&x);
	ir_id a = param_in(&x, tu_type(IR_F32, 3, 2, 1, 4), lo, hi);
	ir_id b = param_in(&x, tu_type(IR_F32, 2, 3, 1), lo, hi);
	ir_id c = param_in(&x, tu_type(IR_F32, 0), lo, hi);
	ir_id ab = op2(&x, op, a, b, NULL);
	check_grads(&x, op2(&x, IR_OP_ADD, ab, op2(&x, op, c, a, NULL), NULL));
	gx_fini(&x);
}

/* Every op of the binary family in ops.def; div and pow on [0.5, 2]. */
START_TEST(test_binary_op_gradients_sum_over_broadcast_axes)
{
	for (ir_op op = 0; op < IR_OP_COUNT; op++) {
		if (ir_op_table[op].family != IR_FAM_BINARY)
			continue;
		bool is_pos = op == IR_OP_DIV || op == IR_OP_POW;
		check_binary(op, is_pos ? 0.5 : -1, is_pos ? 2 : 1);
	}
}
END_TEST

START_TEST(test_maximum_and_minimum_split_ties_in_halves)
{
	for (int k = 0; k < 2; k++) {
		gx x;
		gx_init(&x);
		ir_id a = param(&x, tu_type(IR_F32, 1, 2));
		ir_id b = param(&x, tu_type(IR_F32, 1, 2));
		ir_op op = k ? IR_OP_MINIMUM : IR_OP_MAXIMUM;
		ir_id y = op2(&x, op, a, b, NULL);
		x.f->outputs[0] = op1(&x, IR_OP_SUM, y,
				      &(ir_attr){.reduce = {1, false}});
		x.f->output_names[0] = "loss";
		x.f->n_outputs = 1;
		ck_assert(pass_autodiff(x.m, "f"));
		interp_tensor *p = make_params(&x);
		double *va = p[0].data, *vb = p[1].data;
		va[0] = vb[0] = 0.25;
		va[1] = 1, vb[1] = -1;
		interp_tensor *g = run(&x, "f_grad", p);
		ck_assert_double_eq(interp_tensor_get(&g[1], 0), 0.5);
		ck_assert_double_eq(interp_tensor_get(&g[2], 0), 0.5);
		ck_assert_double_eq(interp_tensor_get(&g[1], 1), k ? 0 : 1);
		ck_assert_double_eq(interp_tensor_get(&g[2], 1), k ? 1 : 0);
		free_tensors(&x, g, 3);
		free_tensors(&x, p, 2);
		gx_fini(&x);
	}
}
END_TEST

START_TEST(test_pow_gradient_of_the_exponent_is_zero_at_base_zero)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 1, 2));
	ir_id b = param_in(&x, tu_type(IR_F32, 1, 2), 1.5, 2.5);
	ir_id y = op2(&x, IR_OP_POW, a, b, NULL);
	x.f->outputs[0] = op1(&x, IR_OP_SUM, y,
			      &(ir_attr){.reduce = {1, false}});
	x.f->output_names[0] = "loss";
	x.f->n_outputs = 1;
	ck_assert(pass_autodiff(x.m, "f"));
	interp_tensor *p = make_params(&x);
	double *va = p[0].data, *vb = p[1].data;
	va[0] = 0, va[1] = 2, vb[0] = 2, vb[1] = 3;
	interp_tensor *g = run(&x, "f_grad", p);
	ck_assert_double_eq(interp_tensor_get(&g[1], 0), 0); /* 2 * 0^1 */
	ck_assert_double_eq_tol(interp_tensor_get(&g[1], 1), 12, 1e-12);
	ck_assert_double_eq(interp_tensor_get(&g[2], 0), 0);
	ck_assert_double_eq_tol(interp_tensor_get(&g[2], 1), 8 * log(2), 1e-12);
	free_tensors(&x, g, 3);
	free_tensors(&x, p, 2);
	gx_fini(&x);
}
END_TEST

/* PyTorch's pow_backward_self and pow_backward_exponent at a zero base
 * and a zero exponent: d/da a^0 is 0, not 0 * 0^-1 = NaN; d/db 0^b is
 * 0 for b >= 0 but -inf (inf * log 0) for b < 0. */
START_TEST(test_pow_gradients_at_a_zero_base_or_exponent_are_pytorchs)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 1, 4));
	ir_id b = param(&x, tu_type(IR_F32, 1, 4));
	ir_id y = op2(&x, IR_OP_POW, a, b, NULL);
	x.f->outputs[0] = op1(&x, IR_OP_SUM, y,
			      &(ir_attr){.reduce = {1, false}});
	x.f->output_names[0] = "loss";
	x.f->n_outputs = 1;
	ck_assert(pass_autodiff(x.m, "f"));
	interp_tensor *p = make_params(&x);
	double *va = p[0].data, *vb = p[1].data;
	va[0] = 0, va[1] = -2, va[2] = 0, va[3] = 0;
	vb[0] = 0, vb[1] = 0, vb[2] = -1, vb[3] = 2;
	interp_tensor *g = run(&x, "f_grad", p);
	ck_assert_double_eq(interp_tensor_get(&g[1], 0), 0);
	ck_assert_double_eq(interp_tensor_get(&g[1], 1), 0);
	ck_assert_double_eq(interp_tensor_get(&g[1], 2), -INFINITY);
	ck_assert_double_eq(interp_tensor_get(&g[1], 3), 0);
	ck_assert_double_eq(interp_tensor_get(&g[2], 0), 0);
	ck_assert(isnan(interp_tensor_get(&g[2], 1))); /* log -2 */
	ck_assert_double_eq(interp_tensor_get(&g[2], 2), -INFINITY);
	ck_assert_double_eq(interp_tensor_get(&g[2], 3), 0);
	free_tensors(&x, g, 3);
	free_tensors(&x, p, 2);
	gx_fini(&x);
}
END_TEST

START_TEST(test_select_sends_the_gradient_to_the_chosen_side)
{
	gx x;
	gx_init(&x);
	static const int32_t cond[3] = {1, 0, 1};
	ir_id c = i32s(&x, tu_type(IR_I32, 2, 3, 1), cond);
	ir_id a = param(&x, tu_type(IR_F32, 3, 2, 3, 4));
	ir_id b = param(&x, tu_type(IR_F32, 1, 4));
	check_grads(&x, op3(&x, IR_OP_SELECT, c, a, b, NULL));
	gx_fini(&x);
}
END_TEST

/* ---- matmul --------------------------------------------------------------------- */

/* a (B..., M, K) @ b (B..., K, N) with the operands stored transposed when
 * the flags say so; M = 3, K = 4, N = 5. */
static void check_matmul(int rank_a, int rank_b, bool ta, bool tb,
			 bool is_batch_one)
{
	gx x;
	gx_init(&x);
	ir_type at = tu_type(IR_F32, 2, ta ? 4 : 3, ta ? 3 : 4);
	ir_type bt = tu_type(IR_F32, 2, tb ? 5 : 4, tb ? 4 : 5);
	ir_type *ts[2] = {&at, &bt};
	int ranks[2] = {rank_a, rank_b};
	for (int k = 0; k < 2; k++) {
		ir_type *t = ts[k];
		int extra = ranks[k] - 2;
		memmove(&t->dims[extra], &t->dims[0], 2 * sizeof t->dims[0]);
		for (int i = 0; i < extra; i++)
			t->dims[i] = ir_dim_static(
				i == 0 && is_batch_one && k ? 1 : 2);
		t->rank = (uint8_t)ranks[k];
	}
	ir_id a = param(&x, at), b = param(&x, bt);
	ir_attr mm = {.matmul = {ta, tb}};
	check_grads(&x, op2(&x, IR_OP_MATMUL, a, b, &mm));
	gx_fini(&x);
}

START_TEST(test_matmul_gradients_match_for_every_transpose_and_batching)
{
	for (int t = 0; t < 4; t++) {
		bool ta = t & 1, tb = t & 2;
		check_matmul(2, 2, ta, tb, false);
		check_matmul(3, 2, ta, tb, false); /* a shared right operand */
		check_matmul(2, 3, ta, tb, false); /* a shared left operand */
		check_matmul(3, 3, ta, tb, false);
		check_matmul(3, 3, ta, tb, true);  /* b's batch dim is 1 */
		check_matmul(4, 3, ta, tb, false); /* b lacks a batch dim */
	}
}
END_TEST

/* ---- reductions -------------------------------------------------------------------- */

static void check_reduce(ir_op op, uint32_t axes, bool keepdim)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 3, 2, 3, 5));
	ir_attr r = reduce(axes, keepdim);
	check_grads(&x, op1(&x, op, a, &r));
	gx_fini(&x);
}

START_TEST(test_reduction_gradients_match_for_every_axis_set)
{
	static const ir_op ops[3] = {IR_OP_SUM, IR_OP_MEAN, IR_OP_MAX};
	static const uint32_t axes[5] = {1, 2, 4, 5, 7};
	for (int o = 0; o < 3; o++)
		for (int a = 0; a < 5; a++)
			for (int k = 0; k < 2; k++)
				check_reduce(ops[o], axes[a], k);
}
END_TEST

START_TEST(test_max_shares_the_gradient_among_tied_maxima)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 1, 4));
	ir_attr r = reduce(1, false);
	x.f->outputs[0] = op1(&x, IR_OP_MAX, a, &r);
	x.f->output_names[0] = "loss";
	x.f->n_outputs = 1;
	ck_assert(pass_autodiff(x.m, "f"));
	interp_tensor *p = make_params(&x);
	double *v = p[0].data;
	v[0] = 1, v[1] = 3, v[2] = 3, v[3] = 2;
	interp_tensor *g = run(&x, "f_grad", p);
	ck_assert_double_eq(interp_tensor_get(&g[1], 0), 0);
	ck_assert_double_eq(interp_tensor_get(&g[1], 1), 0.5);
	ck_assert_double_eq(interp_tensor_get(&g[1], 2), 0.5);
	ck_assert_double_eq(interp_tensor_get(&g[1], 3), 0);
	free_tensors(&x, g, 2);
	free_tensors(&x, p, 1);
	gx_fini(&x);
}
END_TEST

START_TEST(test_mean_over_a_symbolic_axis_divides_by_its_run_time_size)
{
	gx x;
	gx_init(&x);
	ir_type t = tu_type(IR_F32, 2, 3, 0);
	t.dims[1] = sym(&x, "S", 4, 1);
	ir_id a = param(&x, t);
	ir_attr r = reduce(2, false);
	check_grads(&x, op1(&x, IR_OP_MEAN, a, &r));
	gx_fini(&x);
}
END_TEST

/* ---- normalizations ----------------------------------------------------------------- */

START_TEST(test_softmax_and_log_softmax_gradients_match)
{
	static const ir_op ops[2] = {IR_OP_SOFTMAX, IR_OP_LOG_SOFTMAX};
	for (int o = 0; o < 2; o++) {
		check_unary(ops[o], -2, 2, tu_type(IR_F32, 3, 2, 3, 5));
		check_unary(ops[o], -2, 2, tu_type(IR_F32, 1, 7));
		check_unary(ops[o], -2, 2, tu_type(IR_F32, 2, 3, 1));
	}
}
END_TEST

/* x [2, 3, 5] masked by valid of type vt. */
static void check_masked_softmax(ir_type vt, const int32_t *valid, ir_dim k)
{
	gx x;
	gx_init(&x);
	ir_type xt = tu_type(IR_F32, 3, 2, 3, 5);
	xt.dims[2] = k;
	ir_id a = param_in(&x, xt, -2, 2);
	ir_attr fill = {.fill = -1e6};
	check_grads(&x, op2(&x, IR_OP_MASKED_SOFTMAX, a, i32s(&x, vt, valid),
			    &fill));
	gx_fini(&x);
}

START_TEST(test_masked_softmax_gradient_is_zero_past_valid_lengths)
{
	static const int32_t per_batch[2] = {0, 3};
	static const int32_t per_row[6] = {0, 2, 5, 1, 7, 0};
	static const int32_t shared[1] = {4};
	check_masked_softmax(tu_type(IR_I32, 1, 2), per_batch, ir_dim_static(5));
	check_masked_softmax(tu_type(IR_I32, 2, 2, 3), per_row,
			     ir_dim_static(5));
	check_masked_softmax(tu_type(IR_I32, 2, 1, 3), per_row,
			     ir_dim_static(5));
	check_masked_softmax(tu_type(IR_I32, 1, 1), shared, ir_dim_static(5));
}
END_TEST

START_TEST(test_masked_softmax_gradient_over_a_symbolic_axis)
{
	static const int32_t per_batch[2] = {0, 3};
	static const int32_t per_row[6] = {0, 2, 5, 1, 7, 0};
	for (int v = 0; v < 2; v++) {
		gx x;
		gx_init(&x);
		ir_dim k = sym(&x, "K", 5, 1);
		ir_type xt = tu_type(IR_F32, 3, 2, 3, 0);
		xt.dims[2] = k;
		ir_id a = param_in(&x, xt, -2, 2);
		ir_attr fill = {.fill = -1e6};
		ir_id len = v ? i32s(&x, tu_type(IR_I32, 2, 2, 3), per_row)
			      : i32s(&x, tu_type(IR_I32, 1, 2), per_batch);
		check_grads(&x, op2(&x, IR_OP_MASKED_SOFTMAX, a, len, &fill));
		gx_fini(&x);
	}
}
END_TEST

START_TEST(test_masked_softmax_rows_of_length_zero_get_no_gradient)
{
	gx x;
	gx_init(&x);
	static const int32_t valid[2] = {0, 2};
	ir_id a = param(&x, tu_type(IR_F32, 2, 2, 3));
	ir_attr fill = {.fill = -1e6};
	ir_id y = op2(&x, IR_OP_MASKED_SOFTMAX, a,
		      i32s(&x, tu_type(IR_I32, 1, 2), valid), &fill);
	finish(&x, y);
	ck_assert(pass_autodiff(x.m, "f"));
	for (int i = 0; i < 3; i++)
		ck_assert_double_eq(grad_at(&x, 0, i), 0); /* row 0: length 0 */
	ck_assert_double_ne(grad_at(&x, 0, 3), 0);
	ck_assert_double_eq(grad_at(&x, 0, 5), 0); /* row 1, k = 2 */
	gx_fini(&x);
}
END_TEST

START_TEST(test_layer_norm_gradients_for_x_gamma_and_beta)
{
	for (int r = 0; r < 2; r++) {
		gx x;
		gx_init(&x);
		ir_id a = param_in(&x,
				   r ? tu_type(IR_F32, 3, 2, 3, 4)
				     : tu_type(IR_F32, 1, 5),
				   -2, 2);
		ir_type pt = tu_type(IR_F32, 1, r ? 4 : 5);
		ir_id gamma = param_in(&x, pt, 0.5, 1.5), beta = param(&x, pt);
		ir_attr eps = {.eps = 1e-5};
		check_grads(&x, op3(&x, IR_OP_LAYER_NORM, a, gamma, beta, &eps));
		gx_fini(&x);
	}
}
END_TEST

START_TEST(test_dropout_gradient_uses_the_forward_mask_in_training)
{
	for (int train = 0; train < 2; train++) {
		gx x;
		gx_init(&x);
		x.opts.is_training = train;
		x.opts.seed = 5;
		x.opts.step = 2;
		x.m->n_dropout_streams = 2;
		ir_id a = param(&x, tu_type(IR_F32, 3, 2, 3, 7));
		ir_attr d = {.dropout = {0.4, 1}};
		check_grads(&x, op1(&x, IR_OP_DROPOUT, a, &d));
		gx_fini(&x);
	}
}
END_TEST

START_TEST(test_dropout_gradient_node_repeats_the_forward_stream_and_p)
{
	gx x;
	gx_init(&x);
	x.m->n_dropout_streams = 4;
	ir_id a = param(&x, tu_type(IR_F32, 1, 6));
	ir_attr d = {.dropout = {0.25, 3}};
	finish(&x, op1(&x, IR_OP_DROPOUT, a, &d));
	uint32_t n_fwd = x.f->g.n_nodes;
	ck_assert(pass_autodiff(x.m, "f"));
	const ir_func *fg = ir_module_find_func(x.m, "f_grad");
	int n_drop = 0;
	for (uint32_t i = n_fwd; i < fg->g.n_nodes; i++) {
		const ir_node *n = &fg->g.nodes[i];
		if (n->op != IR_OP_DROPOUT)
			continue;
		n_drop++;
		ck_assert_double_eq(n->attr.dropout.p, 0.25);
		ck_assert_uint_eq(n->attr.dropout.stream, 3);
	}
	ck_assert_int_eq(n_drop, 1);
	gx_fini(&x);
}
END_TEST

/* ---- indexing ------------------------------------------------------------------------ */

START_TEST(test_embedding_gradient_sums_rows_of_repeated_ids)
{
	gx x;
	gx_init(&x);
	static const int32_t ids[6] = {1, 0, 1, 3, 1, 0};
	ir_id id = input(&x, tu_type(IR_I32, 2, 2, 3), ids);
	ir_id tab = param(&x, tu_type(IR_F32, 2, 5, 2));
	check_grads(&x, op2(&x, IR_OP_EMBEDDING, id, tab, NULL));
	/* Rows 2 and 4 are never looked up. */
	for (int j = 0; j < 2; j++) {
		ck_assert_double_eq(grad_at(&x, 0, 2 * 2 + j), 0);
		ck_assert_double_eq(grad_at(&x, 0, 4 * 2 + j), 0);
	}
	gx_fini(&x);
}
END_TEST

START_TEST(test_embedding_gradient_over_a_symbolic_vocabulary)
{
	gx x;
	gx_init(&x);
	static const int32_t ids[4] = {2, 0, 2, 3};
	ir_type tt = tu_type(IR_F32, 2, 0, 3);
	tt.dims[0] = sym(&x, "V", 4, 1);
	ir_id tab = param(&x, tt);
	ir_id a = i32s(&x, tu_type(IR_I32, 1, 4), ids);
	check_grads(&x, op2(&x, IR_OP_EMBEDDING, a, tab, NULL));
	gx_fini(&x);
}
END_TEST

START_TEST(test_embedding_of_a_single_id_has_a_gradient)
{
	gx x;
	gx_init(&x);
	static const int32_t id[1] = {2};
	ir_id tab = param(&x, tu_type(IR_F32, 2, 3, 4));
	check_grads(&x, op2(&x, IR_OP_EMBEDDING,
			    i32s(&x, tu_type(IR_I32, 0), id), tab, NULL));
	gx_fini(&x);
}
END_TEST

/* ---- layout ---------------------------------------------------------------------------- */

START_TEST(test_reshape_broadcast_and_permute_gradients)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 2, 3, 4));
	ir_id b = param(&x, tu_type(IR_F32, 2, 3, 1));
	ir_attr perm = {.permute = {{2, 0, 1}}};
	ir_id r = to(&x, IR_OP_RESHAPE, a, tu_type(IR_F32, 3, 2, 3, 2));
	ir_id p = op1(&x, IR_OP_PERMUTE, r, &perm); /* [2, 2, 3] */
	ir_id bb = to(&x, IR_OP_BROADCAST, b, tu_type(IR_F32, 3, 2, 3, 5));
	ir_attr mm = {.matmul = {false, false}};
	check_grads(&x, op2(&x, IR_OP_MATMUL, p, bb, &mm));
	gx_fini(&x);
}
END_TEST

static void check_slice(int64_t start, int64_t end, int64_t step, int axis)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 3, 2, 7, 3));
	ir_attr s = {.slice = {axis, start, end, step}};
	check_grads(&x, op1(&x, IR_OP_SLICE, a, &s));
	gx_fini(&x);
}

START_TEST(test_slice_gradient_places_g_back_among_zeros)
{
	check_slice(1, 4, 1, 1);
	check_slice(0, 7, 1, 1);
	check_slice(0, 3, 1, 1);
	check_slice(4, 7, 1, 1);
	check_slice(1, 6, 2, 1);
	check_slice(0, 7, 3, 1);
	check_slice(2, 7, 3, 1);
	check_slice(1, 2, 1, 0);
	check_slice(0, 3, 2, 2);
}
END_TEST

/* x[rows, cols] of a [4, 6] x, flattened. */
static ir_id flat_slice(gx *x, ir_id a, int64_t r0, int64_t r1, int64_t c0,
			int64_t c1)
{
	ir_attr rs = {.slice = {0, r0, r1, 1}}, cs = {.slice = {1, c0, c1, 1}};
	ir_id s = op1(x, IR_OP_SLICE, op1(x, IR_OP_SLICE, a, &rs), &cs);
	return to(x, IR_OP_RESHAPE, s,
		  tu_type(IR_F32, 1, (int)((r1 - r0) * (c1 - c0))));
}

START_TEST(test_gradients_of_many_slices_of_one_tensor_add_up)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 2, 4, 6));
	ir_id parts[6] = {
		flat_slice(&x, a, 0, 4, 0, 2), flat_slice(&x, a, 0, 4, 2, 6),
		flat_slice(&x, a, 0, 4, 1, 3), flat_slice(&x, a, 1, 3, 0, 6),
		flat_slice(&x, a, 0, 4, 0, 2), flat_slice(&x, a, 0, 4, 4, 5),
	};
	ir_attr cat = {.axis = 0};
	ir_id all = build(&x, IR_OP_CONCAT, parts, 6, &cat, NULL);
	check_grads(&x, op2(&x, IR_OP_MUL, all, all, NULL));
	gx_fini(&x);
}
END_TEST

START_TEST(test_slices_that_tile_an_axis_come_back_as_one_concat)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 2, 2, 9));
	ir_id parts[3];
	for (int k = 0; k < 3; k++) {
		ir_attr s = {.slice = {1, 3 * k, 3 * k + 3, 1}};
		parts[k] = op1(&x, IR_OP_TANH, op1(&x, IR_OP_SLICE, a, &s),
			       NULL);
	}
	ir_id y = op2(&x, IR_OP_MUL,
		      op2(&x, IR_OP_ADD, parts[0], parts[1], NULL), parts[2],
		      NULL);
	check_grads(&x, y);
	const ir_func *fg = ir_module_find_func(x.m, "f_grad");
	int n_concat = 0, n_bcast = 0;
	for (uint32_t i = 0; i < fg->g.n_nodes; i++) {
		n_concat += fg->g.nodes[i].op == IR_OP_CONCAT;
		n_bcast += fg->g.nodes[i].op == IR_OP_BROADCAST;
	}
	ck_assert_int_eq(n_concat, 1);
	ck_assert_int_eq(n_bcast, 0); /* no zero padding */
	gx_fini(&x);
}
END_TEST

START_TEST(test_concat_gradient_slices_each_operand_back)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 2, 2, 1));
	ir_id b = param(&x, tu_type(IR_F32, 2, 2, 3));
	float cv[4] = {1, 2, 3, 4};
	ir_id c = cnst(&x, tu_type(IR_F32, 2, 2, 2), cv);
	ir_id args[4] = {a, c, b, a};
	ir_attr cat = {.axis = 1};
	check_grads(&x, build(&x, IR_OP_CONCAT, args, 4, &cat, NULL));
	gx_fini(&x);
}
END_TEST

START_TEST(test_concat_gradient_along_a_symbolic_axis)
{
	gx x;
	gx_init(&x);
	ir_dim s = sym(&x, "S", 2, 1), s2 = {2, s.sym};
	ir_type at = tu_type(IR_F32, 2, 0, 3), bt = at;
	at.dims[0] = s;
	bt.dims[0] = s2;
	ir_id a = param(&x, at), b = param(&x, bt);
	ir_id args[3] = {b, a, b};
	ir_attr cat = {.axis = 0};
	check_grads(&x, build(&x, IR_OP_CONCAT, args, 3, &cat, NULL));
	gx_fini(&x);
}
END_TEST

START_TEST(test_repeat_gradient_sums_the_tiles)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 3, 2, 1, 3));
	ir_attr rep = {.repeat = {{2, 4, 1}}};
	check_grads(&x, op1(&x, IR_OP_REPEAT, a, &rep));
	gx_fini(&x);
}
END_TEST

START_TEST(test_repeat_interleave_gradient_sums_each_run)
{
	for (int axis = 0; axis < 2; axis++) {
		gx x;
		gx_init(&x);
		ir_id a = param(&x, tu_type(IR_F32, 2, 2, 3));
		ir_attr ri = {.interleave = {axis, 3}};
		check_grads(&x, op1(&x, IR_OP_REPEAT_INTERLEAVE, a, &ri));
		gx_fini(&x);
	}
}
END_TEST

START_TEST(test_repeat_gradient_over_a_symbolic_axis)
{
	gx x;
	gx_init(&x);
	ir_type t = tu_type(IR_F32, 2, 0, 2);
	t.dims[0] = sym(&x, "B", 3, 1);
	ir_id a = param(&x, t);
	ir_attr rep = {.repeat = {{2, 2}}};
	ir_id r = op1(&x, IR_OP_REPEAT, a, &rep);
	ir_attr ri = {.interleave = {0, 2}};
	check_grads(&x, op1(&x, IR_OP_REPEAT_INTERLEAVE, r, &ri));
	gx_fini(&x);
}
END_TEST

/* ---- losses -------------------------------------------------------------------------------- */

START_TEST(test_mse_loss_gradients_for_prediction_and_target)
{
	gx x;
	gx_init(&x);
	ir_id p = param(&x, tu_type(IR_F32, 2, 2, 3));
	ir_id t = param(&x, tu_type(IR_F32, 2, 2, 3));
	check_grads(&x, op2(&x, IR_OP_MSE_LOSS, p, t, NULL));
	gx_fini(&x);
}
END_TEST

START_TEST(test_cross_entropy_gradient_is_softmax_minus_onehot)
{
	gx x;
	gx_init(&x);
	static const int32_t labels[6] = {0, 4, 2, 4, 1, 0};
	ir_id lg = param_in(&x, tu_type(IR_F32, 3, 2, 3, 5), -2, 2);
	ir_id lb = input(&x, tu_type(IR_I32, 2, 2, 3), labels);
	check_grads(&x, op2(&x, IR_OP_CROSS_ENTROPY, lg, lb, NULL));
	const ir_func *fg = ir_module_find_func(x.m, "f_grad");
	int n[IR_OP_COUNT] = {0};
	for (ir_id i = 0; i < fg->g.n_nodes; i++)
		n[fg->g.nodes[i].op]++;
	/* One fused node, none of the softmax - one_hot it replaces; the
	 * pipeline's fuse_loss joins it with the loss's cross_entropy. */
	ck_assert_int_eq(n[IR_OP_CROSS_ENTROPY_WITH_GRAD], 1);
	ck_assert_int_eq(n[IR_OP_CROSS_ENTROPY_GRAD] + n[IR_OP_CROSS_ENTROPY],
			 0);
	ck_assert_int_eq(n[IR_OP_SOFTMAX], 0);
	ck_assert_int_eq(n[IR_OP_ONE_HOT], 0);
	gx_fini(&x);
}
END_TEST

START_TEST(test_cross_entropy_gradient_over_a_symbolic_vocabulary)
{
	for (int r = 0; r < 2; r++) {
		gx x;
		gx_init(&x);
		static const int32_t labels[4] = {0, 4, 2, 1};
		ir_type t = r ? tu_type(IR_F32, 2, 4, 0) : tu_type(IR_F32, 1, 0);
		t.dims[t.rank - 1] = sym(&x, "V", 5, 1);
		ir_id lg = param_in(&x, t, -2, 2);
		ir_id lb = r ? i32s(&x, tu_type(IR_I32, 1, 4), labels)
			     : i32s(&x, tu_type(IR_I32, 0), labels + 1);
		check_grads(&x, op2(&x, IR_OP_CROSS_ENTROPY, lg, lb, NULL));
		gx_fini(&x);
	}
}
END_TEST

/* ---- the pass as a whole --------------------------------------------------------------------- */

START_TEST(test_fan_in_gradients_are_summed)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 1, 3));
	ir_id sq = op2(&x, IR_OP_MUL, a, a, NULL);
	ir_id y = op2(&x, IR_OP_ADD, sq, op1(&x, IR_OP_TANH, a, NULL), NULL);
	check_grads(&x,
		    op2(&x, IR_OP_SUB, y, op1(&x, IR_OP_EXP, sq, NULL), NULL));
	gx_fini(&x);
}
END_TEST

/* Parameters read by several PARAM nodes, interleaved with each other's
 * in the graph (as layers written once and used twice are): each one's
 * gradient sums its own nodes' gradients, in graph order. */
START_TEST(test_parameters_read_in_several_places_sum_their_nodes)
{
	gx x;
	gx_init(&x);
	ir_type t = tu_type(IR_F32, 1, 3);
	ir_id a0 = param(&x, t);
	ir_id b0 = param(&x, t);
	ir_attr ia = {.param_index = x.f->g.nodes[a0].attr.param_index};
	ir_attr ib = {.param_index = x.f->g.nodes[b0].attr.param_index};
	ir_id y = op2(&x, IR_OP_MUL, a0, op1(&x, IR_OP_TANH, b0, NULL), NULL);
	for (int k = 0; k < 3; k++) {
		ir_id a = build(&x, IR_OP_PARAM, NULL, 0, &ia, &t);
		ir_id b = build(&x, IR_OP_PARAM, NULL, 0, &ib, &t);
		y = op2(&x, IR_OP_ADD, op1(&x, IR_OP_SIN, y, NULL),
			op2(&x, IR_OP_MUL, a, b, NULL), NULL);
	}
	check_grads(&x, y);
	gx_fini(&x);
}
END_TEST

START_TEST(test_unused_parameters_get_zero_gradients_of_their_shape)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 1, 3));
	param(&x, tu_type(IR_F32, 2, 2, 2));
	ir_type vt = tu_type(IR_F32, 1, 0);
	vt.dims[0] = sym(&x, "V", 3, 2);
	param(&x, vt);
	check_grads(&x, op1(&x, IR_OP_EXP, a, NULL));
	const ir_func *fg = ir_module_find_func(x.m, "f_grad");
	ck_assert_str_eq(fg->output_names[2], "grad.p1");
	const ir_type *t = &fg->g.nodes[fg->outputs[3]].type;
	ck_assert(ir_type_eq(t, &vt));
	for (int i = 0; i < 6; i++)
		ck_assert_double_eq(grad_at(&x, 2, i), 0);
	gx_fini(&x);
}
END_TEST

START_TEST(test_gradient_function_keeps_the_inputs_and_names_its_outputs)
{
	gx x;
	gx_init(&x);
	static const float xs[3] = {1, 2, 3};
	ir_id in = input(&x, tu_type(IR_F32, 1, 3), xs);
	ir_id w = param(&x, tu_type(IR_F32, 1, 3));
	ir_id xw = op2(&x, IR_OP_MUL, in, w, NULL);
	finish(&x, xw);
	/* A second output rides along in f but not in f_grad. */
	x.f->outputs[1] = xw;
	x.f->output_names[1] = "xw";
	x.f->n_outputs = 2;
	ir_type it = tu_type(IR_F32, 1, 3);
	uint32_t example = (uint32_t)ir_module_add_const(x.m, &it, xs);
	x.f->example = &example;
	ck_assert(pass_autodiff(x.m, "f"));
	x.f->example = NULL;
	const ir_func *fg = ir_module_find_func(x.m, "f_grad");
	ck_assert(fg->is_export);
	ck_assert_uint_eq(fg->n_inputs, 1);
	ck_assert_str_eq(fg->input_names[0], "in");
	ck_assert_ptr_nonnull(fg->example);
	ck_assert_uint_eq(fg->example[0], example);
	ck_assert_uint_eq(fg->n_outputs, 2);
	ck_assert_str_eq(fg->output_names[0], "loss");
	ck_assert_str_eq(fg->output_names[1], "grad.p0");
	ck_assert_uint_eq(fg->outputs[0], x.f->outputs[0]);
	/* The forward function is unchanged. */
	ck_assert_uint_eq(x.f->n_outputs, 2);
	/* d sum(x * w * W) / dw = x * W. */
	interp_tensor *p = make_params(&x);
	interp_tensor *g = run(&x, "f_grad", p);
	const ir_const *wc =
		&x.m->consts[x.f->g.nodes[ir_arg(&x.f->g,
						 ir_arg(&x.f->g, x.f->outputs[0], 0),
						 1)]
				     .attr.const_index];
	for (int i = 0; i < 3; i++)
		ck_assert_double_eq_tol(interp_tensor_get(&g[1], i),
					(double)xs[i] *
						(double)((const float *)
								 wc->data)[i],
					1e-12);
	free_tensors(&x, g, 2);
	free_tensors(&x, p, 1);
	ck_assert_ptr_null(ir_module_find_func(x.m, "f_grad_grad"));
	gx_fini(&x);
}
END_TEST

START_TEST(test_backward_nodes_carry_the_location_of_their_forward_node)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 1, 3));
	ir_id t = build_at(&x, IR_OP_TANH, &a, 1, NULL, NULL, 7);
	ir_attr all = reduce(1, false);
	ir_id s = build_at(&x, IR_OP_SUM, &t, 1, &all, NULL, 9);
	x.f->outputs[0] = s;
	x.f->output_names[0] = "loss";
	x.f->n_outputs = 1;
	uint32_t n_fwd = x.f->g.n_nodes;
	ck_assert(pass_autodiff(x.m, "f"));
	const ir_func *fg = ir_module_find_func(x.m, "f_grad");
	bool seen_tanh_rule = false;
	for (uint32_t i = n_fwd; i < fg->g.n_nodes; i++) {
		const ir_node *n = &fg->g.nodes[i];
		ck_assert_msg(n->loc.line == 7 || n->loc.line == 9,
			      "node %u (%s) at line %u", i,
			      ir_op_table[n->op].name, n->loc.line);
		seen_tanh_rule |= n->op == IR_OP_MUL && n->loc.line == 7;
	}
	ck_assert(seen_tanh_rule);
	gx_fini(&x);
}
END_TEST

START_TEST(test_gradient_function_prints_and_reads_back)
{
	gx x;
	gx_init(&x);
	static const int32_t valid[2] = {1, 3};
	ir_id a = param(&x, tu_type(IR_F32, 3, 2, 2, 4));
	ir_attr fill = {.fill = -1e6};
	ir_id y = op2(&x, IR_OP_MASKED_SOFTMAX, a,
		      i32s(&x, tu_type(IR_I32, 1, 2), valid), &fill);
	finish(&x, y);
	ck_assert(pass_autodiff(x.m, "f"));
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	ir_module_print(x.m, out);
	fclose(out);
	ck_assert_ptr_nonnull(strstr(text, "func @f_grad("));
	ck_assert_ptr_nonnull(strstr(text, "as grad.p0"));
	uint32_t file = ir_ctx_add_source(&x.ctx, "grad.ir", text, len);
	ir_module *back = ir_module_read(&x.ctx, file);
	ck_assert_msg(back != NULL, "%s", gx_diag(&x));
	char *again = NULL;
	size_t len2 = 0;
	out = open_memstream(&again, &len2);
	ir_module_print(back, out);
	fclose(out);
	ck_assert_str_eq(again, text);
	ir_module_destroy(back);
	free(text);
	free(again);
	gx_fini(&x);
}
END_TEST

/* ---- errors -------------------------------------------------------------------------------------- */

START_TEST(test_autodiff_reports_a_missing_function)
{
	gx x;
	gx_init(&x);
	finish(&x, param(&x, tu_type(IR_F32, 1, 2)));
	ck_assert(!pass_autodiff(x.m, "nope"));
	ck_assert_str_eq(gx_diag(&x),
			 "attnc: error: autodiff: no function 'nope' to "
			 "differentiate\n");
	ck_assert_uint_eq(x.m->n_funcs, 1);
	gx_fini(&x);
}
END_TEST

START_TEST(test_autodiff_rejects_a_loss_that_is_not_a_scalar_f32)
{
	gx x;
	gx_init(&x);
	uint32_t file = ir_ctx_add_source(&x.ctx, "m.g", "export def f()\n", 15);
	x.f->loc = (ir_loc){.file = file, .line = 1, .col = 1};
	ir_id a = param(&x, tu_type(IR_F32, 2, 2, 3));
	x.f->outputs[0] = a;
	x.f->output_names[0] = "out";
	x.f->n_outputs = 1;
	ck_assert(!pass_autodiff(x.m, "f"));
	ck_assert_ptr_nonnull(
		strstr(gx_diag(&x), "m.g:1:1: error: autodiff: the loss 'f' "
				    "returns f32[2, 3]; a loss must be a scalar "
				    "f32"));
	ck_assert_ptr_null(ir_module_find_func(x.m, "f_grad"));
	/* An integer scalar is no loss either. */
	static const int32_t one[1] = {1};
	x.f->outputs[0] = i32s(&x, tu_type(IR_I32, 0), one);
	ck_assert(!pass_autodiff(x.m, "f"));
	ck_assert_ptr_nonnull(strstr(gx_diag(&x), "returns i32[]"));
	/* Nor is a function without outputs. */
	x.f->n_outputs = 0;
	ck_assert(!pass_autodiff(x.m, "f"));
	ck_assert_ptr_nonnull(strstr(gx_diag(&x), "'f' returns nothing"));
	ck_assert_uint_eq(x.m->n_funcs, 1);
	gx_fini(&x);
}
END_TEST

START_TEST(test_autodiff_refuses_to_replace_an_existing_gradient_function)
{
	gx x;
	gx_init(&x);
	finish(&x, param(&x, tu_type(IR_F32, 1, 2)));
	ck_assert(pass_autodiff(x.m, "f"));
	ck_assert(!pass_autodiff(x.m, "f"));
	ck_assert_ptr_nonnull(strstr(gx_diag(&x), "already has a function "
						  "'f_grad'"));
	ck_assert_uint_eq(x.m->n_funcs, 2);
	gx_fini(&x);
}
END_TEST

START_TEST(test_autodiff_reports_a_rank_six_repeat_it_cannot_derive)
{
	gx x;
	gx_init(&x);
	ir_id a = param(&x, tu_type(IR_F32, 6, 1, 1, 1, 1, 2, 3));
	ir_attr rep = {.repeat = {{1, 1, 1, 1, 2, 1}}};
	finish(&x, op1(&x, IR_OP_REPEAT, a, &rep));
	ck_assert(!pass_autodiff(x.m, "f"));
	ck_assert_ptr_nonnull(strstr(gx_diag(&x), "autodiff: the gradient of "
						  "this rank-6 op needs a rank-7 "
						  "intermediate"));
	ck_assert_uint_eq(x.m->n_funcs, 1);
	gx_fini(&x);
}
END_TEST

/* Fails the n-th allocation (counting from 1) after it is armed. */
typedef struct fail_at {
	long n;
} fail_at;

static void *failing_alloc(void *ud, void *ptr, size_t size)
{
	fail_at *f = ud;
	if (size == 0) {
		free(ptr);
		return NULL;
	}
	if (f->n > 0 && --f->n == 0)
		return NULL;
	return realloc(ptr, size);
}

START_TEST(test_autodiff_fails_cleanly_at_every_allocation)
{
	for (long k = 1;; k++) {
		gx x;
		gx_init(&x);
		fail_at fa = {0};
		x.ctx.alloc = failing_alloc;
		x.ctx.alloc_ud = &fa;
		static const int32_t ids[3] = {1, 0, 1};
		ir_id tab = param(&x, tu_type(IR_F32, 2, 3, 4));
		ir_id e = op2(&x, IR_OP_EMBEDDING,
			      i32s(&x, tu_type(IR_I32, 1, 3), ids), tab, NULL);
		ir_attr s = {.slice = {1, 1, 4, 2}};
		finish(&x, op1(&x, IR_OP_SLICE, e, &s));
		uint32_t n_funcs = x.m->n_funcs;
		fa.n = k;
		bool ok = pass_autodiff(x.m, "f");
		bool is_done = fa.n > 0;
		fa.n = 0;
		if (ok) {
			ck_assert(is_done);
			ck_assert(ir_module_verify(x.m));
		} else {
			ck_assert_ptr_nonnull(
				strstr(gx_diag(&x), "out of memory"));
			ck_assert_uint_eq(x.m->n_funcs, n_funcs);
		}
		gx_fini(&x);
		if (ok)
			break;
	}
}
END_TEST

static Suite *grad_suite(void)
{
	Suite *s = suite_create("passes_grad");
	TCase *ew = tcase_create("elementwise");
	tcase_set_timeout(ew, 120);
	tcase_add_test(ew, test_unary_op_gradients_match_finite_differences);
	tcase_add_test(ew,
		       test_relu_passes_the_gradient_only_where_x_is_positive);
	tcase_add_test(ew, test_cast_passes_f32_gradients_and_stops_at_integers);
	tcase_add_test(ew, test_binary_op_gradients_sum_over_broadcast_axes);
	tcase_add_test(ew, test_maximum_and_minimum_split_ties_in_halves);
	tcase_add_test(ew,
		       test_pow_gradient_of_the_exponent_is_zero_at_base_zero);
	tcase_add_test(ew,
		       test_pow_gradients_at_a_zero_base_or_exponent_are_pytorchs);
	tcase_add_test(ew, test_select_sends_the_gradient_to_the_chosen_side);
	suite_add_tcase(s, ew);

	TCase *nn = tcase_create("nn");
	tcase_set_timeout(nn, 120);
	tcase_add_test(nn,
		       test_matmul_gradients_match_for_every_transpose_and_batching);
	tcase_add_test(nn, test_reduction_gradients_match_for_every_axis_set);
	tcase_add_test(nn, test_max_shares_the_gradient_among_tied_maxima);
	tcase_add_test(nn,
		       test_mean_over_a_symbolic_axis_divides_by_its_run_time_size);
	tcase_add_test(nn, test_softmax_and_log_softmax_gradients_match);
	tcase_add_test(nn,
		       test_masked_softmax_gradient_is_zero_past_valid_lengths);
	tcase_add_test(nn, test_masked_softmax_gradient_over_a_symbolic_axis);
	tcase_add_test(nn,
		       test_masked_softmax_rows_of_length_zero_get_no_gradient);
	tcase_add_test(nn, test_layer_norm_gradients_for_x_gamma_and_beta);
	tcase_add_test(nn,
		       test_dropout_gradient_uses_the_forward_mask_in_training);
	tcase_add_test(nn,
		       test_dropout_gradient_node_repeats_the_forward_stream_and_p);
	tcase_add_test(nn, test_embedding_gradient_sums_rows_of_repeated_ids);
	tcase_add_test(nn, test_embedding_gradient_over_a_symbolic_vocabulary);
	tcase_add_test(nn, test_embedding_of_a_single_id_has_a_gradient);
	tcase_add_test(nn, test_mse_loss_gradients_for_prediction_and_target);
	tcase_add_test(nn, test_cross_entropy_gradient_is_softmax_minus_onehot);
	tcase_add_test(nn,
		       test_cross_entropy_gradient_over_a_symbolic_vocabulary);
	suite_add_tcase(s, nn);

	TCase *lay = tcase_create("layout");
	tcase_set_timeout(lay, 120);
	tcase_add_test(lay, test_reshape_broadcast_and_permute_gradients);
	tcase_add_test(lay, test_slice_gradient_places_g_back_among_zeros);
	tcase_add_test(lay, test_gradients_of_many_slices_of_one_tensor_add_up);
	tcase_add_test(lay,
		       test_slices_that_tile_an_axis_come_back_as_one_concat);
	tcase_add_test(lay, test_concat_gradient_slices_each_operand_back);
	tcase_add_test(lay, test_concat_gradient_along_a_symbolic_axis);
	tcase_add_test(lay, test_repeat_gradient_sums_the_tiles);
	tcase_add_test(lay, test_repeat_interleave_gradient_sums_each_run);
	tcase_add_test(lay, test_repeat_gradient_over_a_symbolic_axis);
	suite_add_tcase(s, lay);

	TCase *pass = tcase_create("pass");
	tcase_set_timeout(pass, 120);
	tcase_add_test(pass, test_fan_in_gradients_are_summed);
	tcase_add_test(pass,
		       test_parameters_read_in_several_places_sum_their_nodes);
	tcase_add_test(pass,
		       test_unused_parameters_get_zero_gradients_of_their_shape);
	tcase_add_test(
		pass,
		test_gradient_function_keeps_the_inputs_and_names_its_outputs);
	tcase_add_test(pass,
		       test_backward_nodes_carry_the_location_of_their_forward_node);
	tcase_add_test(pass, test_gradient_function_prints_and_reads_back);
	tcase_add_test(pass, test_autodiff_reports_a_missing_function);
	tcase_add_test(pass,
		       test_autodiff_rejects_a_loss_that_is_not_a_scalar_f32);
	tcase_add_test(
		pass,
		test_autodiff_refuses_to_replace_an_existing_gradient_function);
	tcase_add_test(pass,
		       test_autodiff_reports_a_rank_six_repeat_it_cannot_derive);
	tcase_add_test(pass, test_autodiff_fails_cleanly_at_every_allocation);
	suite_add_tcase(s, pass);
	return s;
}

int main(void)
{
	return tu_run_suite(grad_suite());
}
