/*
 * builtins.c - the built-in functions of the language: one row per name
 * in a table (parameter names for keyword arguments, the op it builds),
 * and a short handler per kind of call.
 *
 * Elementwise functions of numbers are computed at compile time; on
 * tensors they build their op. Layout sugar (unsqueeze, squeeze, stack,
 * transpose, repeat with more repetitions than axes) is lowered here to
 * the IR's primitives: reshape, permute, concat, repeat.
 */
#include "elab.h"
#include "ir_scalar.h"

#include <math.h>
#include <string.h>

static ir_id arg_tensor(fe_elab *e, const fe_args *a, uint32_t i)
{
	return fe_to_tensor(e, a->v[i], a->locs[i]);
}

static bool is_given(const fe_args *a, uint32_t i)
{
	return a->v[i].kind != FE_V_NONE;
}

/* Whether argument i was written in the call, `None` included:
 * fe_bind_args gives an absent one the call's own location. */
static bool is_written(const fe_args *a, uint32_t i)
{
	ir_loc l = a->locs[i], c = a->loc;
	return l.file != c.file || l.line != c.line || l.col != c.col;
}

/* A bool attribute: true or false, not a number (PyTorch refuses
 * `keepdim = 2`, where an `if` takes a number's truth). */
static bool attr_bool(fe_elab *e, const fe_builtin *b, const fe_args *a,
		      uint32_t i, bool *out)
{
	if (a->v[i].kind == FE_V_BOOL) {
		*out = a->v[i].b;
		return true;
	}
	if (a->v[i].kind == FE_V_NUM)
		ir_error(e->ctx, a->locs[i], "%s: %s is true or false, not %g",
			 b->name, b->params[i], a->v[i].num.r);
	else
		fe_expected(e, a->locs[i], "true or false", a->v[i]);
	return false;
}

static fe_value build1(fe_elab *e, ir_op op, ir_id x, const ir_attr *attr,
		       ir_loc loc)
{
	return fe_build(e, op, &x, 1, attr, NULL, loc);
}

static int rank_of(const fe_elab *e, ir_id x)
{
	return fe_type_of(e, x)->rank;
}

/* ---- elementwise ---------------------------------------------------------------- */

/* On a number the op's scalar function (ir/ir_scalar.h), as the
 * interpreter computes it: integers stay integers, exactly, where the op
 * has an integer form. An i32 tensor is promoted to f32 where the op has
 * none (exp, sqrt, ...), as PyTorch promotes integer tensors. */
static fe_value bi_unary(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	fe_value v = a->v[0];
	if (v.kind == FE_V_NUM) {
		if (v.num.is_int && ir_scalar_has_int(b->op))
			return fe_int(ir_scalar_unary_int(b->op, v.num.i));
		double r = ir_scalar_unary(b->op, v.num.r);
		if (!isfinite(r)) {
			ir_error(e->ctx, a->loc, "%s(%g) is not a finite number",
				 b->name, v.num.r);
			return fe_err();
		}
		return fe_real(r);
	}
	ir_id x = arg_tensor(e, a, 0);
	if (x != IR_NONE && fe_type_of(e, x)->dtype == IR_I32 &&
	    !(ir_op_table[b->op].flags & IR_OPF_INT))
		x = fe_cast(e, x, IR_F32, a->loc);
	return build1(e, b->op, x, NULL, a->loc);
}

/* ---- gelu ---------------------------------------------------------------------- */

/* sqrt(1/2), sqrt(2/pi) and the cubic's weight of PyTorch's GELU. */
#define GELU_SQRT1_2 0.70710678118654752440
#define GELU_BETA 0.79788456080286535588
#define GELU_KAPPA 0.044715

static double gelu_number(double x, bool is_tanh)
{
	if (is_tanh)
		return 0.5 * x *
		       (1 + ir_scalar_unary(IR_OP_TANH,
					    GELU_BETA * (x + GELU_KAPPA * x *
								     x * x)));
	return 0.5 * x * (1 + ir_scalar_unary(IR_OP_ERF, x * GELU_SQRT1_2));
}

static fe_value ew1(fe_elab *e, ir_op op, fe_value x, ir_loc loc)
{
	return x.kind == FE_V_TENSOR ? build1(e, op, x.tensor, NULL, loc)
				     : fe_err();
}

static fe_value ew2(fe_elab *e, ir_op op, fe_value l, fe_value r, ir_loc loc)
{
	return fe_tensor_binop(e, op, l, r, loc);
}

/* Whether `approximate` asks for the tanh form; false after reporting a
 * value that is neither "none" nor "tanh". */
static bool gelu_mode(fe_elab *e, const fe_args *a, bool *is_tanh)
{
	fe_value m = a->v[1];
	*is_tanh = false;
	if (!is_given(a, 1))
		return true;
	if (m.kind != FE_V_STR) {
		fe_expected(e, a->locs[1], "\"none\" or \"tanh\"", m);
		return false;
	}
	*is_tanh = strcmp(m.str, "tanh") == 0;
	if (*is_tanh || strcmp(m.str, "none") == 0)
		return true;
	ir_error(e->ctx, a->locs[1],
		 "gelu: approximate is \"%s\"; expected "
		 "\"none\" or \"tanh\"",
		 m.str);
	return false;
}

/* gelu(x, approximate = "none" | "tanh"), nn.GELU, built from primitives
 * that elementwise fusion makes one kernel and autodiff differentiates
 * exactly:
 *   "none": 0.5 x (1 + erf(x sqrt(1/2)))
 *   "tanh": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static fe_value bi_gelu(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	bool is_tanh;
	ir_loc loc = a->loc;
	(void)b;
	if (!gelu_mode(e, a, &is_tanh))
		return fe_err();
	if (a->v[0].kind == FE_V_NUM)
		return fe_real(gelu_number(a->v[0].num.r, is_tanh));
	ir_id id = arg_tensor(e, a, 0);
	if (id == IR_NONE)
		return fe_err();
	if (fe_type_of(e, id)->dtype == IR_I32) { /* torch's is float only */
		ir_error(e->ctx, a->loc,
			 "gelu: the operand is i32; PyTorch's gelu takes "
			 "floating point only: write gelu(cast(x, f32))");
		return fe_err();
	}
	fe_value x = fe_tensor(id), inner;
	if (is_tanh) {
		fe_value x3 = ew2(e, IR_OP_MUL, ew2(e, IR_OP_MUL, x, x, loc), x,
				  loc);
		fe_value cubic = ew2(e, IR_OP_ADD, x,
				     ew2(e, IR_OP_MUL, fe_real(GELU_KAPPA), x3,
					 loc),
				     loc);
		inner = ew1(e, IR_OP_TANH,
			    ew2(e, IR_OP_MUL, fe_real(GELU_BETA), cubic, loc),
			    loc);
	} else {
		inner = ew1(e, IR_OP_ERF,
			    ew2(e, IR_OP_MUL, x, fe_real(GELU_SQRT1_2), loc),
			    loc);
	}
	fe_value half_x = ew2(e, IR_OP_MUL, x, fe_real(0.5), loc);
	return ew2(e, IR_OP_MUL, half_x,
		   ew2(e, IR_OP_ADD, fe_real(1), inner, loc), loc);
}

/* pow, maximum, minimum */
static fe_value bi_binary(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	fe_value l = a->v[0], r = a->v[1];
	if (l.kind != FE_V_NUM || r.kind != FE_V_NUM)
		return fe_tensor_binop(e, b->op, l, r, a->loc);
	if (b->op == IR_OP_POW)
		return fe_binop(e, FE_T_POW, l, r, false, false, a->loc);
	if (l.num.is_int && r.num.is_int) {
		int64_t v;
		ir_scalar_binary_int(b->op, l.num.i, r.num.i, &v);
		return fe_int(v);
	}
	/* The operand that is the result keeps its kind (int or real). */
	return ir_scalar_binary(b->op, l.num.r, r.num.r) == l.num.r ? l : r;
}

static bool is_tensorish(fe_value v)
{
	return v.kind == FE_V_TENSOR || v.kind == FE_V_LIST;
}

/* where(c, a, b): numbers take the dtype of the other value. */
static fe_value bi_where(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id args[3] = {arg_tensor(e, a, 0), IR_NONE, IR_NONE};
	fe_value x = a->v[1], y = a->v[2];
	if (args[0] == IR_NONE)
		return fe_err();
	if (is_tensorish(x))
		args[1] = fe_to_tensor(e, x, a->locs[1]);
	if (is_tensorish(y))
		args[2] = fe_to_tensor(e, y, a->locs[2]);
	if (fe_is_f32_operand(e, args[1], x) || fe_is_f32_operand(e, args[2], y))
		for (int i = 1; i < 3; i++) /* PyTorch's type promotion */
			if (args[i] != IR_NONE)
				args[i] = fe_cast(e, args[i], IR_F32,
						  a->locs[i]);
	ir_dtype dt = args[1] != IR_NONE   ? fe_type_of(e, args[1])->dtype
		      : args[2] != IR_NONE ? fe_type_of(e, args[2])->dtype
		      : (x.kind == FE_V_NUM && x.num.is_int &&
			 y.kind == FE_V_NUM && y.num.is_int)
			      ? IR_I32
			      : IR_F32;
	for (int i = 1; i < 3; i++) {
		if (is_tensorish(a->v[i]))
			continue;
		fe_value s = fe_scalar(e, dt, a->v[i], a->locs[i]);
		args[i] = s.kind == FE_V_TENSOR ? s.tensor : IR_NONE;
	}
	return fe_build(e, b->op, args, 3, NULL, NULL, a->loc);
}

static fe_value bi_cast(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	fe_value v = a->v[0], d = a->v[1];
	if (d.kind != FE_V_DTYPE) {
		fe_expected(e, a->locs[1], "a dtype (f32 or i32)", d);
		return fe_err();
	}
	if (v.kind == FE_V_NUM && v.num.is_int)
		return d.dtype == IR_I32 ? v : fe_real(v.num.r);
	if (v.kind == FE_V_NUM) /* as the interpreter: INT32_MIN out of range */
		return d.dtype == IR_I32 ? fe_int(ir_scalar_f2i(v.num.r))
					 : fe_real(v.num.r);
	ir_id x = arg_tensor(e, a, 0);
	if (x == IR_NONE || fe_type_of(e, x)->dtype == d.dtype)
		return x == IR_NONE ? fe_err() : fe_tensor(x);
	ir_type t = {.dtype = d.dtype};
	return fe_build(e, b->op, &x, 1, NULL, &t, a->loc);
}

/* ---- reductions and normalizations ----------------------------------------------------- */

/* The axes bitmask of `axis` (None: every axis; a number; a list). */
static bool axes_mask(fe_elab *e, fe_value v, ir_loc loc, int rank,
		      uint32_t *mask)
{
	int ax;
	*mask = 0;
	if (v.kind == FE_V_NONE) {
		*mask = rank ? (1u << rank) - 1 : 0;
		return true;
	}
	if (v.kind != FE_V_LIST) {
		if (!fe_to_axis_or_none(e, v, loc, rank, &ax))
			return false;
		*mask = ax < 0 ? 0 : 1u << ax;
		return true;
	}
	if (v.list.n == 0) { /* PyTorch 1.13's dim=[]: every axis */
		*mask = rank ? (1u << rank) - 1 : 0;
		return true;
	}
	for (uint32_t i = 0; i < v.list.n; i++) {
		if (!fe_to_axis_or_none(e, v.list.items[i], loc, rank, &ax))
			return false;
		if (ax < 0 && rank == 0 && v.list.n > 1) { /* as PyTorch */
			ir_error(e->ctx, loc,
				 "axis 0 appears twice in the list");
			return false;
		}
		if (ax < 0)
			continue;
		if (*mask & (1u << ax)) { /* as PyTorch, and permute here */
			ir_error(e->ctx, loc,
				 "axis %d appears twice in the list", ax);
			return false;
		}
		*mask |= 1u << ax;
	}
	return true;
}

static fe_value bi_reduce(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id x = arg_tensor(e, a, 0);
	ir_attr at = {0};
	bool keep = false;
	if (x != IR_NONE && b->op == IR_OP_MEAN &&
	    fe_type_of(e, x)->dtype == IR_I32) {
		ir_error(e->ctx, a->loc,
			 "mean: the operand is i32; PyTorch's mean takes "
			 "floating point only (it cannot infer the result's "
			 "dtype): write mean(cast(x, f32))");
		return fe_err();
	}
	if (x == IR_NONE ||
	    !axes_mask(e, a->v[1], a->locs[1], rank_of(e, x), &at.reduce.axes) ||
	    (is_given(a, 2) && !attr_bool(e, b, a, 2, &keep)))
		return fe_err();
	at.reduce.keepdim = keep;
	return build1(e, b->op, x, &at, a->loc);
}

static fe_value flatten(fe_elab *e, ir_id x, ir_loc loc);

/* The index into flattened x (rank 0; all ones with keep). */
static fe_value argmax_flat(fe_elab *e, const fe_builtin *b, ir_id x, bool keep,
			    ir_loc loc)
{
	ir_attr at = {.reduce = {.axes = 1}};
	ir_type ones = {.dtype = IR_I32, .rank = rank_of(e, x)};
	for (int i = 0; i < ones.rank; i++)
		ones.dims[i] = ir_dim_static(1);
	fe_value f = flatten(e, x, loc);
	if (f.kind != FE_V_TENSOR)
		return f;
	f = build1(e, b->op, f.tensor, &at, loc);
	if (!keep || f.kind != FE_V_TENSOR)
		return f;
	return fe_reshape(e, f.tensor, &ones, loc);
}

/* argmax(x, axis = None, keepdim = false) and argmin, as PyTorch's: with
 * no axis (or None) the index into the flattened tensor, rank 0 (all
 * ones with keepdim); with one, the index along it. */
static fe_value bi_argmax(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id x = arg_tensor(e, a, 0);
	ir_attr at = {0};
	bool keep = false;
	int ax;
	if (x == IR_NONE || (is_given(a, 2) && !attr_bool(e, b, a, 2, &keep)))
		return fe_err();
	if (is_given(a, 1)) {
		if (!fe_to_axis_or_none(e, a->v[1], a->locs[1], rank_of(e, x),
					&ax))
			return fe_err();
		if (ax < 0) /* rank 0: the index into its one element */
			return argmax_flat(e, b, x, keep, a->loc);
		at.reduce.axes = 1u << ax;
		at.reduce.keepdim = keep;
		return build1(e, b->op, x, &at, a->loc);
	}
	return argmax_flat(e, b, x, keep, a->loc);
}

/* Ops of n tensor operands and no attributes. */
static fe_value bi_tensors(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id args[FE_MAX_BUILTIN_ARGS];
	for (uint32_t i = 0; i < b->n_params; i++)
		if ((args[i] = arg_tensor(e, a, i)) == IR_NONE)
			return fe_err();
	return fe_build(e, b->op, args, b->n_params, NULL, NULL, a->loc);
}

static fe_value bi_masked_softmax(fe_elab *e, const fe_builtin *b,
				  const fe_args *a)
{
	ir_id args[2] = {arg_tensor(e, a, 0), arg_tensor(e, a, 1)};
	ir_attr at = {.fill = -1e6};
	return fe_build(e, b->op, args, 2, &at, NULL, a->loc);
}

static fe_value bi_layer_norm(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id args[3] = {arg_tensor(e, a, 0), arg_tensor(e, a, 1),
			 arg_tensor(e, a, 2)};
	ir_attr at = {.eps = 1e-5};
	if (is_given(a, 3) && !fe_to_number(e, a->v[3], a->locs[3], &at.eps))
		return fe_err();
	if (!(at.eps >= 0)) { /* the shape rule's check, at the argument */
		ir_error(e->ctx, a->locs[3],
			 "layer_norm: eps must be >= 0, not %g", at.eps);
		return fe_err();
	}
	return fe_build(e, b->op, args, 3, &at, NULL, a->loc);
}

static fe_value bi_dropout(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id x = arg_tensor(e, a, 0);
	ir_attr at = {0};
	if (x == IR_NONE || !fe_to_number(e, a->v[1], a->locs[1], &at.dropout.p))
		return fe_err();
	if (!(at.dropout.p >= 0 && at.dropout.p < 1)) { /* as the shape rule */
		ir_error(e->ctx, a->locs[1],
			 "dropout: probability must be in [0, 1), not %g",
			 at.dropout.p);
		return fe_err();
	}
	at.dropout.stream = e->m->n_dropout_streams++;
	return build1(e, b->op, x, &at, a->loc);
}

static fe_value bi_matmul(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id args[2] = {arg_tensor(e, a, 0), arg_tensor(e, a, 1)};
	ir_attr at = {.matmul = {a->is_t[0], a->is_t[1]}};
	return fe_build(e, b->op, args, 2, &at, NULL, a->loc);
}

/* ---- layout ------------------------------------------------------------------------------ */

static fe_value bi_reshape(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_type t = {0};
	ir_id x = arg_tensor(e, a, 0);
	(void)b;
	if (x == IR_NONE || !fe_to_shape(e, a->v[1], a->locs[1], true, &t))
		return fe_err();
	return fe_reshape(e, x, &t, a->loc);
}

static fe_value permute(fe_elab *e, ir_id x, const int *perm, ir_loc loc)
{
	ir_attr at = {0};
	for (int i = 0; i < rank_of(e, x) && i < IR_MAX_RANK; i++)
		at.permute.perm[i] = (uint8_t)perm[i];
	return build1(e, IR_OP_PERMUTE, x, &at, loc);
}

static fe_value bi_permute(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id x = arg_tensor(e, a, 0);
	fe_value p = a->v[1];
	int perm[IR_MAX_RANK];
	unsigned seen = 0;
	(void)b;
	if (x == IR_NONE)
		return fe_err();
	int r = rank_of(e, x);
	if (p.kind != FE_V_LIST || p.list.n != (uint32_t)r) {
		if (p.kind == FE_V_LIST)
			ir_error(e->ctx, a->locs[1],
				 "permute: a tensor of rank %d "
				 "needs %d axes, got %u",
				 r, r, p.list.n);
		else
			fe_expected(e, a->locs[1], "a list of axes", p);
		return fe_err();
	}
	for (int i = 0; i < r; i++) {
		if (!fe_to_axis(e, p.list.items[i], a->locs[1], r, &perm[i]))
			return fe_err();
		if (seen & (1u << perm[i])) {
			ir_error(e->ctx, a->locs[1],
				 "permute: axis %d appears twice", perm[i]);
			return fe_err();
		}
		seen |= 1u << perm[i];
	}
	return permute(e, x, perm, a->loc);
}

static fe_value bi_transpose(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id x = arg_tensor(e, a, 0);
	int perm[IR_MAX_RANK], i, j;
	(void)b;
	if (x == IR_NONE)
		return fe_err();
	int r = rank_of(e, x);
	if (!fe_to_axis_or_none(e, a->v[1], a->locs[1], r, &i) ||
	    !fe_to_axis_or_none(e, a->v[2], a->locs[2], r, &j))
		return fe_err();
	if (r == 0) /* PyTorch's transpose(x, 0, -1) of a rank-0 x */
		return fe_tensor(x);
	for (int k = 0; k < r; k++)
		perm[k] = k;
	perm[i] = j;
	perm[j] = i;
	return permute(e, x, perm, a->loc);
}

/* x with a size-1 axis inserted at `axis` (0..rank). */
static fe_value unsqueeze(fe_elab *e, ir_id x, int axis, ir_loc loc)
{
	ir_type t = *fe_type_of(e, x);
	if (t.rank == IR_MAX_RANK) {
		ir_error(e->ctx, loc, "a tensor has at most %d dims",
			 IR_MAX_RANK);
		return fe_err();
	}
	memmove(&t.dims[axis + 1], &t.dims[axis],
		(size_t)(t.rank - axis) * sizeof t.dims[0]);
	t.dims[axis] = ir_dim_static(1);
	t.rank++;
	return fe_reshape(e, x, &t, loc);
}

static fe_value bi_unsqueeze(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id x = arg_tensor(e, a, 0);
	int ax;
	(void)b;
	if (x == IR_NONE ||
	    !fe_to_axis(e, a->v[1], a->locs[1], rank_of(e, x) + 1, &ax))
		return fe_err();
	return unsqueeze(e, x, ax, a->loc);
}

static fe_value bi_squeeze(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id x = arg_tensor(e, a, 0);
	int ax;
	char buf[128];
	(void)b;
	if (x == IR_NONE ||
	    !fe_to_axis_or_none(e, a->v[1], a->locs[1], rank_of(e, x), &ax))
		return fe_err();
	if (ax < 0) /* rank 0: PyTorch's squeeze(x, 0) is x */
		return fe_tensor(x);
	ir_type t = *fe_type_of(e, x);
	if (!ir_dim_is_static(t.dims[ax]) || t.dims[ax].coef != 1) {
		ir_type_format(e->m, &t, buf, sizeof buf);
		ir_error(e->ctx, a->locs[1],
			 "squeeze: axis %d of [%s] does not "
			 "have size 1",
			 ax, buf);
		return fe_err();
	}
	memmove(&t.dims[ax], &t.dims[ax + 1],
		(size_t)(t.rank - ax - 1) * sizeof t.dims[0]);
	t.rank--;
	return fe_reshape(e, x, &t, a->loc);
}

/* The tensors of a non-empty list argument, in ctx memory (free it). */
static ir_id *list_tensors(fe_elab *e, fe_value v, ir_loc loc, uint32_t *n)
{
	if (v.kind != FE_V_LIST || v.list.n == 0) {
		if (v.kind == FE_V_LIST)
			ir_error(e->ctx, loc,
				 "expected a non-empty list of tensors");
		else
			fe_expected(e, loc, "a list of tensors", v);
		return NULL;
	}
	ir_id *ids = ir_alloc(e->ctx, v.list.n * sizeof *ids);
	for (uint32_t i = 0; ids && i < v.list.n; i++)
		if ((ids[i] = fe_to_tensor(e, v.list.items[i], loc)) == IR_NONE) {
			ir_free(e->ctx, ids);
			return NULL;
		}
	*n = v.list.n;
	return ids;
}

/* concat(xs, axis = 0), and stack, which first gives each a new axis. */
static fe_value concat_or_stack(fe_elab *e, const fe_builtin *b,
				const fe_args *a, bool is_stack)
{
	uint32_t n = 0;
	int ax;
	fe_value out = fe_err();
	ir_id *ids = list_tensors(e, a->v[0], a->locs[0], &n);
	if (!ids)
		return out;
	int r = rank_of(e, ids[0]) + is_stack;
	/* `axis = None` written out is an error, as in PyTorch */
	if (!fe_to_axis(e, is_written(a, 1) ? a->v[1] : fe_int(0), a->locs[1],
			r, &ax))
		goto done;
	for (uint32_t i = 0; is_stack && i < n; i++) {
		fe_value u = unsqueeze(e, ids[i], ax, a->loc);
		if (u.kind != FE_V_TENSOR)
			goto done;
		ids[i] = u.tensor;
	}
	ir_attr at = {.axis = ax};
	/* in groups of at most IR_CONCAT_MAX_ARGS, each group's concat
	 * taking the place of its first operand, until one group is left */
	while (n > IR_CONCAT_MAX_ARGS) {
		uint32_t k = 0;
		for (uint32_t i = 0; i < n; i += IR_CONCAT_MAX_ARGS, k++) {
			uint32_t m = n - i < IR_CONCAT_MAX_ARGS
					     ? n - i
					     : IR_CONCAT_MAX_ARGS;
			fe_value g = m == 1 ? fe_tensor(ids[i])
					    : fe_build(e, b->op, ids + i, m,
						       &at, NULL, a->loc);
			if (g.kind != FE_V_TENSOR)
				goto done;
			ids[k] = g.tensor;
		}
		n = k;
	}
	out = n == 1 ? fe_tensor(ids[0])
		     : fe_build(e, b->op, ids, n, &at, NULL, a->loc);
done:
	ir_free(e->ctx, ids);
	return out;
}

static fe_value bi_concat(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	return concat_or_stack(e, b, a, false);
}

static fe_value bi_stack(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	return concat_or_stack(e, b, a, true);
}

static fe_value bi_slice(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id x = arg_tensor(e, a, 0);
	int ax;
	int64_t lo, hi;
	char buf[128];
	if (x != IR_NONE &&
	    (a->v[2].kind == FE_V_DIM || a->v[3].kind == FE_V_DIM)) {
		if (!fe_to_axis(e, a->v[1], a->locs[1], rank_of(e, x), &ax))
			return fe_err();
		x = fe_slice_run_time(e, x, ax, a->v[2], a->v[3], a->loc);
		return x == IR_NONE ? fe_err() : fe_tensor(x);
	}
	if (x == IR_NONE ||
	    !fe_to_axis(e, a->v[1], a->locs[1], rank_of(e, x), &ax) ||
	    !fe_to_int(e, a->v[2], a->locs[2], &lo) ||
	    !fe_to_int(e, a->v[3], a->locs[3], &hi))
		return fe_err();
	ir_type t = *fe_type_of(e, x);
	if (!ir_dim_is_static(t.dims[ax])) {
		ir_type_format(e->m, &t, buf, sizeof buf);
		ir_error(e->ctx, a->locs[1],
			 "slice: axis %d of [%s] is only known "
			 "at run time",
			 ax, buf);
		return fe_err();
	}
	int64_t n = t.dims[ax].coef;
	lo = lo < 0 ? lo + n : lo;
	hi = hi < 0 ? hi + n : hi;
	lo = lo < 0 ? 0 : lo > n ? n : lo;
	hi = hi < lo ? lo : hi > n ? n : hi;
	ir_attr at = {.slice = {ax, lo, hi, 1}};
	return build1(e, b->op, x, &at, a->loc);
}

/* A list of integers (or one integer) into out; returns the count or -1. */
static int int_list(fe_elab *e, fe_value v, ir_loc loc, int64_t *out, int max)
{
	if (v.kind != FE_V_LIST)
		return fe_to_int(e, v, loc, &out[0]) ? 1 : -1;
	if (v.list.n > (uint32_t)max) {
		ir_error(e->ctx, loc, "expected at most %d numbers, got %u",
			 max, v.list.n);
		return -1;
	}
	for (uint32_t i = 0; i < v.list.n; i++)
		if (!fe_to_int(e, v.list.items[i], loc, &out[i]))
			return -1;
	return (int)v.list.n;
}

static fe_value bi_repeat(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	int64_t reps[IR_MAX_RANK];
	ir_id x = arg_tensor(e, a, 0);
	int n;
	if (x == IR_NONE ||
	    (n = int_list(e, a->v[1], a->locs[1], reps, IR_MAX_RANK)) < 0)
		return fe_err();
	ir_type t = *fe_type_of(e, x);
	if (n < t.rank) {
		ir_error(e->ctx, a->locs[1],
			 "repeat: %d repetition counts for a "
			 "tensor of rank %d",
			 n, t.rank);
		return fe_err();
	}
	if (n > t.rank) {
		int k = n - t.rank;
		memmove(&t.dims[k], &t.dims[0], t.rank * sizeof t.dims[0]);
		for (int i = 0; i < k; i++)
			t.dims[i] = ir_dim_static(1);
		t.rank = (uint8_t)n;
		fe_value r = fe_reshape(e, x, &t, a->loc);
		if (r.kind != FE_V_TENSOR)
			return r;
		x = r.tensor;
	}
	for (int i = 0; i < n; i++)
		if (reps[i] < 0) { /* the shape rule's check, at the argument */
			ir_error(e->ctx, a->locs[1],
				 "repeat: a repetition count is >= 0, not %lld",
				 (long long)reps[i]);
			return fe_err();
		}
	ir_attr at = {0};
	memcpy(at.repeat.reps, reps, (size_t)n * sizeof reps[0]);
	return build1(e, b->op, x, &at, a->loc);
}

/* x reshaped to one axis; the product of its dims must be one multiple of
 * at most one symbol. */
static fe_value flatten(fe_elab *e, ir_id x, ir_loc loc)
{
	ir_type t = *fe_type_of(e, x), out = {.rank = 1, .dims = {{1, -1}}};
	char buf[128];
	for (int i = 0; i < t.rank; i++) {
		ir_dim d = t.dims[i];
		if (d.sym >= 0 && out.dims[0].sym >= 0 && d.coef != 0) {
			ir_type_format(e->m, &t, buf, sizeof buf);
			ir_error(e->ctx, loc,
				 "cannot flatten [%s] (two run-time "
				 "sizes); give an axis",
				 buf);
			return fe_err();
		}
		if (__builtin_mul_overflow(out.dims[0].coef, d.coef,
					   &out.dims[0].coef))
			return fe_err();
		if (d.sym >= 0)
			out.dims[0].sym = d.sym;
	}
	if (out.dims[0].coef == 0)
		out.dims[0].sym = -1;
	return t.rank == 1 ? fe_tensor(x) : fe_reshape(e, x, &out, loc);
}

static fe_value bi_repeat_interleave(fe_elab *e, const fe_builtin *b,
				     const fe_args *a)
{
	ir_id x = arg_tensor(e, a, 0);
	ir_attr at = {0};
	int ax = 0;
	if (x == IR_NONE || !fe_to_int(e, a->v[1], a->locs[1], &at.interleave.n))
		return fe_err();
	if (at.interleave.n < 0) { /* as the shape rule, at the argument */
		ir_error(e->ctx, a->locs[1],
			 "repeat_interleave: the repetition count is >= 0, "
			 "not %lld",
			 (long long)at.interleave.n);
		return fe_err();
	}
	if (is_given(a, 2)) {
		if (!fe_to_axis(e, a->v[2], a->locs[2], rank_of(e, x), &ax))
			return fe_err();
	} else {
		fe_value f = flatten(e, x, a->loc);
		if (f.kind != FE_V_TENSOR)
			return f;
		x = f.tensor;
	}
	at.interleave.axis = ax;
	return build1(e, b->op, x, &at, a->loc);
}

static fe_value bi_broadcast(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id x = arg_tensor(e, a, 0);
	ir_type t = {0};
	if (x == IR_NONE || !fe_to_shape(e, a->v[1], a->locs[1], true, &t))
		return fe_err();
	const ir_type *xt = fe_type_of(e, x);
	t.dtype = xt->dtype;
	for (int i = 0; i < t.rank; i++) {
		int j = i - (t.rank - xt->rank);
		if (t.dims[i].coef != -1 || t.dims[i].sym != -1)
			continue;
		if (j < 0) {
			ir_error(e->ctx, a->locs[1],
				 "broadcast: -1 at a new axis");
			return fe_err();
		}
		t.dims[i] = xt->dims[j];
	}
	return fe_build(e, b->op, &x, 1, NULL, &t, a->loc);
}

static fe_value bi_sort(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id x = arg_tensor(e, a, 0);
	if (x == IR_NONE)
		return fe_err();
	ir_attr at = {.axis = rank_of(e, x) - 1};
	return build1(e, b->op, x, &at, a->loc);
}

/* ---- compile-time questions ------------------------------------------------------------------ */

static fe_value bi_size(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id x = arg_tensor(e, a, 0);
	int ax;
	(void)b;
	if (x == IR_NONE)
		return fe_err();
	ir_type t = *fe_type_of(e, x);
	if (is_given(a, 1)) {
		if (!fe_to_axis(e, a->v[1], a->locs[1], t.rank, &ax))
			return fe_err();
		return fe_dim(t.dims[ax]);
	}
	fe_value v = {.kind = FE_V_LIST};
	v.list.n = t.rank;
	v.list.items = fe_scratch_alloc(e, t.rank * sizeof(fe_value), a->loc);
	if (!v.list.items)
		return fe_err();
	for (int i = 0; i < t.rank; i++)
		v.list.items[i] = fe_dim(t.dims[i]);
	return v;
}

static fe_value bi_rank(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	ir_id x = arg_tensor(e, a, 0);
	(void)b;
	return x == IR_NONE ? fe_err() : fe_int(rank_of(e, x));
}

static fe_value bi_len(fe_elab *e, const fe_builtin *b, const fe_args *a)
{
	fe_value v = a->v[0];
	(void)b;
	if (v.kind == FE_V_LIST)
		return fe_int(v.list.n);
	if (v.kind == FE_V_STR)
		return fe_int((int64_t)strlen(v.str));
	fe_expected(e, a->locs[0], "a list", v);
	return fe_err();
}

/* ---- the table ---------------------------------------------------------------------------------- */

#define NONE IR_OP_COUNT
#define UNARY(n, op)                           \
	{                                      \
		n, bi_unary, IR_OP_##op, 1, 1, \
		{                              \
			"x"                    \
		}                              \
	}

static const fe_builtin builtins[] = {
	UNARY("neg", NEG),
	UNARY("exp", EXP),
	UNARY("log", LOG),
	UNARY("tanh", TANH),
	UNARY("sigmoid", SIGMOID),
	UNARY("relu", RELU),
	UNARY("sin", SIN),
	UNARY("cos", COS),
	UNARY("sqrt", SQRT),
	UNARY("abs", ABS),
	UNARY("erf", ERF),
	{"gelu", bi_gelu, NONE, 1, 2, {"x", "approximate"}},
	{"pow", bi_binary, IR_OP_POW, 2, 2, {"x", "y"}},
	{"maximum", bi_binary, IR_OP_MAXIMUM, 2, 2, {"a", "b"}},
	{"minimum", bi_binary, IR_OP_MINIMUM, 2, 2, {"a", "b"}},
	{"where", bi_where, IR_OP_SELECT, 3, 3, {"cond", "a", "b"}},
	{"cast", bi_cast, IR_OP_CAST, 2, 2, {"x", "dtype"}},
	{"sum", bi_reduce, IR_OP_SUM, 1, 3, {"x", "axis", "keepdim"}},
	{"mean", bi_reduce, IR_OP_MEAN, 1, 3, {"x", "axis", "keepdim"}},
	{"max", bi_reduce, IR_OP_MAX, 1, 3, {"x", "axis", "keepdim"}},
	{"argmax", bi_argmax, IR_OP_ARGMAX, 1, 3, {"x", "axis", "keepdim"}},
	{"argmin", bi_argmax, IR_OP_ARGMIN, 1, 3, {"x", "axis", "keepdim"}},
	{"softmax", bi_tensors, IR_OP_SOFTMAX, 1, 1, {"x"}},
	{"log_softmax", bi_tensors, IR_OP_LOG_SOFTMAX, 1, 1, {"x"}},
	{"masked_softmax",
	 bi_masked_softmax,
	 IR_OP_MASKED_SOFTMAX,
	 2,
	 2,
	 {"x", "valid"}},
	{"layer_norm",
	 bi_layer_norm,
	 IR_OP_LAYER_NORM,
	 3,
	 4,
	 {"x", "gamma", "beta", "eps"}},
	{"dropout", bi_dropout, IR_OP_DROPOUT, 2, 2, {"x", "p"}},
	{"embedding", bi_tensors, IR_OP_EMBEDDING, 2, 2, {"ids", "table"}},
	{"matmul", bi_matmul, IR_OP_MATMUL, 2, 2, {"a", "b"}},
	{"reshape", bi_reshape, IR_OP_RESHAPE, 2, 2, {"x", "shape"}},
	{"permute", bi_permute, IR_OP_PERMUTE, 2, 2, {"x", "perm"}},
	{"transpose", bi_transpose, IR_OP_PERMUTE, 3, 3, {"x", "a", "b"}},
	{"unsqueeze", bi_unsqueeze, IR_OP_RESHAPE, 2, 2, {"x", "axis"}},
	{"squeeze", bi_squeeze, IR_OP_RESHAPE, 2, 2, {"x", "axis"}},
	{"concat", bi_concat, IR_OP_CONCAT, 1, 2, {"xs", "axis"}},
	{"stack", bi_stack, IR_OP_CONCAT, 1, 2, {"xs", "axis"}},
	{"slice", bi_slice, IR_OP_SLICE, 4, 4, {"x", "axis", "start", "end"}},
	{"repeat", bi_repeat, IR_OP_REPEAT, 2, 2, {"x", "reps"}},
	{"repeat_interleave",
	 bi_repeat_interleave,
	 IR_OP_REPEAT_INTERLEAVE,
	 2,
	 3,
	 {"x", "n", "axis"}},
	{"broadcast", bi_broadcast, IR_OP_BROADCAST, 2, 2, {"x", "shape"}},
	{"sort", bi_sort, IR_OP_SORT, 1, 1, {"x"}},
	{"mse_loss", bi_tensors, IR_OP_MSE_LOSS, 2, 2, {"pred", "target"}},
	{"cross_entropy",
	 bi_tensors,
	 IR_OP_CROSS_ENTROPY,
	 2,
	 2,
	 {"logits", "labels"}},
	{"size", bi_size, NONE, 1, 2, {"x", "axis"}},
	{"rank", bi_rank, NONE, 1, 1, {"x"}},
	{"len", bi_len, NONE, 1, 1, {"xs"}},
	{"zeros", fe_bi_zeros, NONE, 1, 2, {"shape", "dtype"}},
	{"ones", fe_bi_zeros, NONE, 1, 2, {"shape", "dtype"}},
	{"full", fe_bi_full, NONE, 2, 3, {"shape", "value", "dtype"}},
	{"arange", fe_bi_arange, NONE, 1, 3, {"start", "end", "step"}},
	{"normal", fe_bi_random, NONE, 1, 4, {"shape", "mean", "std", "seed"}},
	{"uniform", fe_bi_random, NONE, 1, 4, {"shape", "low", "high", "seed"}},
};

const fe_builtin *fe_builtin_find(const char *name)
{
	for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
		if (strcmp(builtins[i].name, name) == 0)
			return &builtins[i];
	return NULL;
}

const char *fe_builtin_name(size_t i)
{
	return i < sizeof builtins / sizeof *builtins ? builtins[i].name : NULL;
}
