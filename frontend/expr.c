/*
 * expr.c - evaluating expressions: values, names, operators, indexing,
 * and the conversions every built-in shares (to a tensor, an integer, a
 * shape, an axis).
 *
 * Numbers are computed here at compile time; an operator with a tensor
 * operand appends a node to the function being built, a number on the
 * other side becoming a rank-0 constant of the tensor's dtype. `a @ b.T`
 * sets the matmul's transpose flag instead of building a permute.
 */
#include "elab.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- values ------------------------------------------------------------------ */

fe_value fe_err(void)
{
	return (fe_value){.kind = FE_V_ERR};
}

fe_value fe_none(void)
{
	return (fe_value){.kind = FE_V_NONE};
}

fe_value fe_int(int64_t i)
{
	fe_value v = {.kind = FE_V_NUM};
	v.num.is_int = true;
	v.num.i = i;
	v.num.r = (double)i;
	return v;
}

fe_value fe_real(double r)
{
	fe_value v = {.kind = FE_V_NUM};
	v.num.r = r;
	return v;
}

fe_value fe_bool(bool b)
{
	fe_value v = {.kind = FE_V_BOOL};
	v.b = b;
	return v;
}

fe_value fe_tensor(ir_id id)
{
	fe_value v = {.kind = FE_V_TENSOR};
	v.tensor = id;
	return v;
}

fe_value fe_dim(ir_dim d)
{
	return fe_dim_plus(d, 0);
}

fe_value fe_dim_plus(ir_dim d, int64_t off)
{
	if (ir_dim_is_static(d) || d.coef == 0)
		return fe_int((ir_dim_is_static(d) ? d.coef : 0) + off);
	fe_value v = {.kind = FE_V_DIM, .dim_off = off};
	v.dim = d;
	return v;
}

const char *fe_kind_name(fe_value v)
{
	switch (v.kind) {
	case FE_V_ERR:
		return "an error";
	case FE_V_NONE:
		return "None";
	case FE_V_VOID:
		return "nothing";
	case FE_V_NUM:
		return "a number";
	case FE_V_DIM:
		return "a dim";
	case FE_V_TENSOR:
		return "a tensor";
	case FE_V_LIST:
		return "a list";
	case FE_V_STR:
		return "a string";
	case FE_V_DTYPE:
		return "a dtype";
	case FE_V_BOOL:
		return "a bool";
	case FE_V_DEF:
	case FE_V_BUILTIN:
		return "a function";
	}
	return "?";
}

void fe_expected(fe_elab *e, ir_loc loc, const char *what, fe_value v)
{
	switch (v.kind) {
	case FE_V_ERR:
		return;
	case FE_V_DEF:
		ir_error(e->ctx, loc,
			 "expected %s, got the function '%s' (call "
			 "it with arguments)",
			 what, v.def->id.name);
		return;
	case FE_V_BUILTIN:
		ir_error(e->ctx, loc,
			 "expected %s, got the function '%s' (call "
			 "it with arguments)",
			 what, v.builtin->name);
		return;
	default:
		ir_error(e->ctx, loc, "expected %s, got %s", what,
			 fe_kind_name(v));
	}
}

bool fe_stopped(fe_elab *e)
{
	ir_ctx *ctx = e->ctx;
	if (ctx->is_oom || (ctx->max_errors && ctx->n_errors >= ctx->max_errors))
		e->is_stopped = true;
	return e->is_stopped;
}

void *fe_scratch_alloc(fe_elab *e, size_t size, ir_loc loc)
{
	e->scratch_bytes += size;
	if (e->scratch_bytes > FE_MAX_SCRATCH) {
		if (!e->is_stopped)
			ir_error(e->ctx, loc,
				 "elaboration uses more than %u MiB of "
				 "lists (is a loop too long?)",
				 FE_MAX_SCRATCH >> 20);
		e->is_stopped = true;
		return NULL;
	}
	return ir_arena_alloc(e->scratch, size ? size : 1);
}

/* "4*B" */
static const char *dim_str(const fe_elab *e, ir_dim d, char *buf, size_t n)
{
	ir_type t = {.rank = 1, .dims = {d}};
	ir_type_format(e->m, &t, buf, n);
	return buf;
}

/* "4*B", "T + 1", "T - 1" */
static const char *dimv_str(const fe_elab *e, fe_value v, char *buf, size_t n)
{
	dim_str(e, v.dim, buf, n);
	size_t used = strlen(buf);
	if (v.dim_off && used < n)
		snprintf(buf + used, n - used, " %c %lld",
			 v.dim_off < 0 ? '-' : '+',
			 (long long)(v.dim_off < 0 ? -v.dim_off : v.dim_off));
	return buf;
}

/* ---- conversions ---------------------------------------------------------------- */

const ir_type *fe_type_of(const fe_elab *e, ir_id id)
{
	return &e->f->g.nodes[id].type;
}

bool fe_to_int(fe_elab *e, fe_value v, ir_loc loc, int64_t *out)
{
	char buf[64];
	if (v.kind == FE_V_NUM && v.num.is_int) {
		*out = v.num.i;
		return true;
	}
	if (v.kind == FE_V_NUM && v.num.r == floor(v.num.r) &&
	    fabs(v.num.r) < 9e15) {
		*out = (int64_t)v.num.r;
		return true;
	}
	if (v.kind == FE_V_NUM)
		ir_error(e->ctx, loc, "expected an integer, got %g", v.num.r);
	else if (v.kind == FE_V_DIM)
		ir_error(e->ctx, loc,
			 "expected an integer, got the dim %s (its "
			 "size is only known at run time)",
			 dimv_str(e, v, buf, sizeof buf));
	else
		fe_expected(e, loc, "an integer", v);
	return false;
}

bool fe_to_number(fe_elab *e, fe_value v, ir_loc loc, double *out)
{
	if (v.kind == FE_V_NUM) {
		*out = v.num.r;
		return true;
	}
	fe_expected(e, loc, "a number", v);
	return false;
}

bool fe_to_bool(fe_elab *e, fe_value v, ir_loc loc, bool *out)
{
	if (v.kind == FE_V_BOOL) {
		*out = v.b;
		return true;
	}
	if (v.kind == FE_V_NUM) {
		*out = v.num.r != 0;
		return true;
	}
	fe_expected(e, loc, "a bool", v);
	return false;
}

bool fe_to_dim(fe_elab *e, fe_value v, ir_loc loc, bool allow_infer, ir_dim *out)
{
	if (v.kind == FE_V_DIM && !v.dim_off) {
		*out = v.dim;
		return true;
	}
	if (v.kind == FE_V_DIM) {
		char buf[64];
		ir_error(e->ctx, loc,
			 "%s is not a dimension of a shape (a shape "
			 "holds a multiple of one symbol, no offset)",
			 dimv_str(e, v, buf, sizeof buf));
		return false;
	}
	if (v.kind == FE_V_NUM && !v.num.is_int && v.num.r != floor(v.num.r)) {
		ir_error(e->ctx, loc, "expected an integer dimension, got %g",
			 v.num.r);
		return false;
	}
	int64_t n;
	if (v.kind != FE_V_NUM) {
		fe_expected(e, loc, "a dimension (an integer or a dim)", v);
		return false;
	}
	if (!fe_to_int(e, v, loc, &n))
		return false;
	if (n == -1 && allow_infer) {
		*out = (ir_dim){-1, -1};
		return true;
	}
	if (n < 0) {
		ir_error(e->ctx, loc, "a dimension must be >= 0, got %lld",
			 (long long)n);
		return false;
	}
	*out = ir_dim_static(n);
	return true;
}

bool fe_to_shape(fe_elab *e, fe_value v, ir_loc loc, bool allow_infer,
		 ir_type *t)
{
	if (v.kind == FE_V_NUM || v.kind == FE_V_DIM) {
		t->rank = 1;
		return fe_to_dim(e, v, loc, allow_infer, &t->dims[0]);
	}
	if (v.kind != FE_V_LIST) {
		fe_expected(e, loc, "a shape (a list of dims)", v);
		return false;
	}
	if (v.list.n > IR_MAX_RANK) {
		ir_error(e->ctx, loc, "a shape has at most %d dims, got %u",
			 IR_MAX_RANK, v.list.n);
		return false;
	}
	int n_infer = 0;
	t->rank = (uint8_t)v.list.n;
	for (uint32_t i = 0; i < v.list.n; i++) {
		if (!fe_to_dim(e, v.list.items[i], loc, allow_infer, &t->dims[i]))
			return false;
		n_infer += t->dims[i].coef == -1;
	}
	if (n_infer > 1) {
		ir_error(e->ctx, loc, "only one dimension may be -1");
		return false;
	}
	return true;
}

bool fe_to_axis(fe_elab *e, fe_value v, ir_loc loc, int rank, int *out)
{
	int64_t a;
	if (!fe_to_int(e, v, loc, &a))
		return false;
	if (a < -rank || a >= rank) {
		ir_error(e->ctx, loc,
			 "axis %lld out of range for a tensor of "
			 "rank %d",
			 (long long)a, rank);
		return false;
	}
	*out = (int)(a < 0 ? a + rank : a);
	return true;
}

bool fe_to_axis_or_none(fe_elab *e, fe_value v, ir_loc loc, int rank, int *out)
{
	int64_t a;
	if (rank > 0)
		return fe_to_axis(e, v, loc, rank, out);
	if (!fe_to_int(e, v, loc, &a))
		return false;
	if (a < -1 || a > 0) {
		ir_error(e->ctx, loc,
			 "axis %lld out of range for a tensor of rank 0 "
			 "(it takes 0 or -1)",
			 (long long)a);
		return false;
	}
	*out = -1;
	return true;
}

bool fe_check_size(fe_elab *e, const ir_type *t, ir_loc loc)
{
	char buf[128];
	int64_t n = 1;
	for (int i = 0; i < t->rank && i < IR_MAX_RANK; i++) {
		int64_t c = t->dims[i].coef < 0 ? 1 : t->dims[i].coef;
		if (__builtin_mul_overflow(n, c, &n) || n > FE_MAX_NUMEL) {
			ir_type_format(e->m, t, buf, sizeof buf);
			ir_error(e->ctx, loc,
				 "a tensor of shape [%s] is too large", buf);
			return false;
		}
	}
	return true;
}

/* ---- building nodes ---------------------------------------------------------------- */

static bool need_function(fe_elab *e, ir_loc loc)
{
	if (e->f)
		return true;
	ir_error(e->ctx, loc, "tensors can only be computed inside a def");
	return false;
}

fe_value fe_build(fe_elab *e, ir_op op, const ir_id *args, uint32_t n,
		  const ir_attr *attr, const ir_type *type, ir_loc loc)
{
	for (uint32_t i = 0; i < n; i++)
		if (args[i] == IR_NONE)
			return fe_err();
	if (!need_function(e, loc))
		return fe_err();
	if (e->f->g.n_nodes >= FE_MAX_NODES) {
		if (!e->is_stopped)
			ir_error(e->ctx, loc,
				 "function '%s' is too large: more "
				 "than %u nodes (is a loop too long?)",
				 e->f->name, FE_MAX_NODES);
		e->is_stopped = true;
		return fe_err();
	}
	if (type && !fe_check_size(e, type, loc))
		return fe_err();
	ir_id id = ir_build(e->m, e->f, op, args, n, attr, type, loc);
	if (id == IR_NONE || !fe_check_size(e, fe_type_of(e, id), loc))
		return fe_err();
	/* After ir_build's checks: their errors are moved to the user's
	 * call by ir_verror through ctx->user_call, later ones through this
	 * call of the node's loc. */
	e->f->g.nodes[id].loc.at = fe_call_at(e);
	return fe_tensor(id);
}

/* The base symbols of t's dims (-1 dims skipped) into out; false past
 * cap. */
static bool shape_factors(const fe_elab *e, const ir_type *t, int32_t *out,
			  uint32_t *n, uint32_t cap)
{
	*n = 0;
	for (int i = 0; i < t->rank; i++)
		if (t->dims[i].sym >= 0 && t->dims[i].coef > 0 &&
		    !ir_sym_factors(e->m, t->dims[i].sym, out, n, cap))
			return false;
	return true;
}

/* For a target with a -1 dim: adds the product symbol the -1 stands for
 * when it is two or more symbols (reshape [B, T, D] to [-1, D]: B*T),
 * which the shape rule then finds. */
static void add_infer_sym(fe_elab *e, const ir_type *in, const ir_type *t,
			  ir_loc loc)
{
	int32_t fi[IR_MAX_RANK * IR_SYM_MAX_FACTORS];
	int32_t ft[IR_MAX_RANK * IR_SYM_MAX_FACTORS];
	uint32_t ni, nt, cap = IR_MAX_RANK * IR_SYM_MAX_FACTORS;
	if (!shape_factors(e, in, fi, &ni, cap) ||
	    !shape_factors(e, t, ft, &nt, cap))
		return;
	for (uint32_t k = 0; k < nt; k++)
		for (uint32_t j = 0; j < ni; j++)
			if (fi[j] == ft[k]) {
				fi[j] = fi[--ni];
				break;
			}
	if (ni >= 2)
		ir_module_product_sym(e->m, fi, ni, loc);
}

fe_value fe_reshape(fe_elab *e, ir_id x, const ir_type *dims, ir_loc loc)
{
	ir_type t = *dims;
	t.dtype = fe_type_of(e, x)->dtype;
	for (int i = 0; i < t.rank; i++)
		if (t.dims[i].coef == -1 && t.dims[i].sym == -1)
			add_infer_sym(e, fe_type_of(e, x), &t, loc);
	return fe_build(e, IR_OP_RESHAPE, &x, 1, NULL, &t, loc);
}

fe_value fe_const_node(fe_elab *e, uint32_t index, ir_loc loc)
{
	if (!need_function(e, loc))
		return fe_err();
	if (!ir_grow(e->ctx, (void **)&e->const_nodes, &e->const_nodes_cap,
		     index + 1, sizeof *e->const_nodes))
		return fe_err();
	if (e->const_nodes[index])
		return fe_tensor(e->const_nodes[index] - 1);
	ir_attr a = {.const_index = index};
	ir_type t = e->m->consts[index].type;
	fe_value v = fe_build(e, IR_OP_CONST, NULL, 0, &a, &t, loc);
	if (v.kind == FE_V_TENSOR)
		e->const_nodes[index] = v.tensor + 1;
	return v;
}

/* An existing small constant equal to (t, data), or -1. */
static int32_t find_const(const ir_module *m, const ir_type *t,
			  const void *data, size_t bytes)
{
	if (bytes > 256)
		return -1;
	for (uint32_t i = 0; i < m->n_consts; i++)
		if (ir_type_eq(&m->consts[i].type, t) &&
		    memcmp(m->consts[i].data, data, bytes) == 0)
			return (int32_t)i;
	return -1;
}

fe_value fe_const_tensor(fe_elab *e, const ir_type *t, const void *data,
			 ir_loc loc)
{
	if (!need_function(e, loc))
		return fe_err();
	int64_t n = ir_type_numel_static(t);
	size_t bytes = (size_t)n * ir_dtype_size(t->dtype);
	int32_t idx = find_const(e->m, t, data, bytes);
	if (idx < 0)
		idx = ir_module_add_const(e->m, t, data);
	if (idx < 0) {
		ir_error(e->ctx, loc, "out of memory");
		return fe_err();
	}
	return fe_const_node(e, (uint32_t)idx, loc);
}

/* A run-time size as a rank-0 tensor of dtype: the sum of coef*sym ones,
 * plus the offset; what `x / size(x, 1)` or `broadcast(T, [B])` use. */
static fe_value dim_tensor(fe_elab *e, ir_dtype dtype, fe_value v, ir_loc loc)
{
	fe_value one = fe_scalar(e, dtype, fe_int(1), loc);
	ir_type t = {.dtype = dtype, .rank = 1, .dims = {v.dim}};
	if (one.kind != FE_V_TENSOR)
		return one;
	fe_value ones = fe_build(e, IR_OP_BROADCAST, &one.tensor, 1, NULL, &t,
				 loc);
	if (ones.kind != FE_V_TENSOR)
		return ones;
	ir_attr all = {.reduce = {1, false}};
	fe_value n = fe_build(e, IR_OP_SUM, &ones.tensor, 1, &all, NULL, loc);
	if (n.kind != FE_V_TENSOR || !v.dim_off)
		return n;
	return fe_tensor_binop(e, IR_OP_ADD, n, fe_int(v.dim_off), loc);
}

fe_value fe_scalar(fe_elab *e, ir_dtype dtype, fe_value v, ir_loc loc)
{
	ir_type t = {.dtype = dtype};
	if (v.kind == FE_V_DIM)
		return dim_tensor(e, dtype, v, loc);
	if (v.kind == FE_V_BOOL)
		v = fe_int(v.b);
	if (v.kind != FE_V_NUM) {
		fe_expected(e, loc, "a number or a tensor", v);
		return fe_err();
	}
	if (dtype == IR_I32) {
		if (v.num.r != floor(v.num.r)) {
			ir_error(e->ctx, loc,
				 "cannot combine an i32 tensor with "
				 "the real number %g (cast it first)",
				 v.num.r);
			return fe_err();
		}
		if (v.num.r < INT32_MIN || v.num.r > INT32_MAX) {
			ir_error(e->ctx, loc, "%g does not fit in i32", v.num.r);
			return fe_err();
		}
		int32_t x = (int32_t)v.num.r;
		return fe_const_tensor(e, &t, &x, loc);
	}
	float x = (float)v.num.r;
	return fe_const_tensor(e, &t, &x, loc);
}

/* Finds the shape of a nested list of numbers; false if it is ragged or
 * holds anything but numbers. */
static bool list_shape(const fe_value *v, ir_type *t, bool *all_int)
{
	t->rank = 0;
	const fe_value *x = v;
	while (x->kind == FE_V_LIST) {
		if (t->rank == IR_MAX_RANK)
			return false;
		t->dims[t->rank++] = ir_dim_static(x->list.n);
		if (x->list.n == 0)
			break;
		x = &x->list.items[0];
	}
	*all_int = true;
	return true;
}

/* Flattens v (expected shape t from axis `axis`) into out[*n...]. */
static bool list_flatten(const fe_value *v, const ir_type *t, int axis,
			 double *out, int64_t *n, bool *all_int)
{
	if (axis == t->rank) {
		if (v->kind != FE_V_NUM)
			return false;
		*all_int &= v->num.is_int;
		out[(*n)++] = v->num.r;
		return true;
	}
	if (v->kind != FE_V_LIST || v->list.n != t->dims[axis].coef)
		return false;
	for (uint32_t i = 0; i < v->list.n; i++)
		if (!list_flatten(&v->list.items[i], t, axis + 1, out, n,
				  all_int))
			return false;
	return true;
}

static ir_id list_to_const(fe_elab *e, fe_value v, ir_loc loc)
{
	ir_type t = {0};
	bool all_int = true;
	if (!list_shape(&v, &t, &all_int)) {
		ir_error(e->ctx, loc,
			 "a list used as a tensor has too many "
			 "nesting levels");
		return IR_NONE;
	}
	int64_t numel = ir_type_numel_static(&t), n = 0;
	double *vals = ir_alloc(e->ctx,
				(size_t)(numel ? numel : 1) * sizeof *vals);
	ir_id id = IR_NONE;
	if (!vals)
		return IR_NONE;
	if (!list_flatten(&v, &t, 0, vals, &n, &all_int)) {
		ir_error(e->ctx, loc,
			 "a list used as a tensor must hold numbers "
			 "in a regular shape");
	} else {
		t.dtype = all_int ? IR_I32 : IR_F32;
		fe_value c = fe_const_of_doubles(e, &t, vals, loc);
		id = c.kind == FE_V_TENSOR ? c.tensor : IR_NONE;
	}
	ir_free(e->ctx, vals);
	return id;
}

ir_id fe_to_tensor(fe_elab *e, fe_value v, ir_loc loc)
{
	if (v.kind == FE_V_TENSOR)
		return v.tensor;
	if (v.kind == FE_V_LIST)
		return list_to_const(e, v, loc);
	if (v.kind == FE_V_DIM) {
		fe_value t = dim_tensor(e, IR_I32, v, loc);
		return t.kind == FE_V_TENSOR ? t.tensor : IR_NONE;
	}
	fe_expected(e, loc, "a tensor", v);
	return IR_NONE;
}

/* ---- names --------------------------------------------------------------------------- */

static bool scope_find(const fe_scope *s, const char *name, fe_value *out)
{
	int32_t i = ir_names_get(&s->index, name);
	if (i >= 0)
		*out = s->b[i].v;
	return i >= 0;
}

/* Reports name as unknown, with the closest known name if one is near. */
static void unknown_name(fe_elab *e, const char *name, ir_loc loc)
{
	ir_suggest sg;
	ir_suggest_init(&sg, name);
	for (uint32_t i = 0; e->frame && i < e->frame->scope.n; i++)
		ir_suggest_offer(&sg, e->frame->scope.b[i].name);
	for (uint32_t i = 0; i < e->globals.n; i++)
		ir_suggest_offer(&sg, e->globals.b[i].name);
	for (size_t i = 0; fe_builtin_name(i); i++)
		ir_suggest_offer(&sg, fe_builtin_name(i));
	if (sg.best)
		ir_error(e->ctx, loc, "unknown name '%s'; did you mean '%s'?",
			 name, sg.best);
	else
		ir_error(e->ctx, loc, "unknown name '%s'", name);
}

fe_value fe_lookup(fe_elab *e, const char *name, ir_loc loc)
{
	fe_value v;
	if (e->frame && scope_find(&e->frame->scope, name, &v))
		return v;
	if (scope_find(&e->globals, name, &v))
		return v;
	if (strcmp(name, "f32") == 0 || strcmp(name, "i32") == 0) {
		v = (fe_value){.kind = FE_V_DTYPE};
		v.dtype = name[0] == 'f' ? IR_F32 : IR_I32;
		return v;
	}
	if (strcmp(name, "None") == 0)
		return fe_none();
	const fe_builtin *b = fe_builtin_find(name);
	if (b) {
		v = (fe_value){.kind = FE_V_BUILTIN};
		v.builtin = b;
		return v;
	}
	unknown_name(e, name, loc);
	return fe_err();
}

/* ---- number arithmetic ---------------------------------------------------------------- */

static const char *op_spelling(fe_tok_kind op)
{
	switch (op) {
	case FE_T_PLUS:
		return "+";
	case FE_T_MINUS:
		return "-";
	case FE_T_STAR:
		return "*";
	case FE_T_SLASH:
		return "/";
	case FE_T_AT:
		return "@";
	case FE_T_PERCENT:
		return "%";
	case FE_T_POW:
		return "**";
	case FE_T_LT:
		return "<";
	case FE_T_LE:
		return "<=";
	case FE_T_GT:
		return ">";
	case FE_T_GE:
		return ">=";
	case FE_T_EQ:
		return "==";
	case FE_T_NE:
		return "!=";
	case FE_T_AND:
		return "and";
	case FE_T_OR:
		return "or";
	default:
		return "?";
	}
}

static fe_value compare(fe_tok_kind op, double a, double b)
{
	switch (op) {
	case FE_T_LT:
		return fe_bool(a < b);
	case FE_T_LE:
		return fe_bool(a <= b);
	case FE_T_GT:
		return fe_bool(a > b);
	case FE_T_GE:
		return fe_bool(a >= b);
	case FE_T_EQ:
		return fe_bool(a == b);
	default:
		return fe_bool(a != b);
	}
}

/* Integer +, -, *, /, %, ** with overflow checks; false if the result is
 * not an integer (the caller computes it in reals). */
static bool int_arith(fe_tok_kind op, int64_t a, int64_t b, int64_t *r)
{
	switch (op) {
	case FE_T_PLUS:
		return !__builtin_add_overflow(a, b, r);
	case FE_T_MINUS:
		return !__builtin_sub_overflow(a, b, r);
	case FE_T_STAR:
		return !__builtin_mul_overflow(a, b, r);
	case FE_T_SLASH:
		if (b == 0 || (a == INT64_MIN && b == -1) || a % b != 0)
			return false;
		*r = a / b;
		return true;
	case FE_T_PERCENT:
		if (b == 0 || (a == INT64_MIN && b == -1))
			return false;
		*r = a % b;
		if (*r != 0 && ((*r < 0) != (b < 0)))
			*r += b;
		return true;
	case FE_T_POW:
		if (b < 0)
			return false;
		*r = 1;
		for (int64_t i = 0; i < b; i++)
			if (__builtin_mul_overflow(*r, a, r))
				return false;
		return true;
	default:
		return false;
	}
}

static fe_value num_binop(fe_elab *e, fe_tok_kind op, fe_value l, fe_value r,
			  ir_loc loc)
{
	double a = l.num.r, b = r.num.r;
	int64_t ri;
	if (op >= FE_T_LT && op <= FE_T_NE)
		return compare(op, a, b);
	if (op == FE_T_AT) {
		ir_error(e->ctx, loc, "expected a tensor, got a number");
		return fe_err();
	}
	if ((op == FE_T_SLASH || op == FE_T_PERCENT) && b == 0) {
		ir_error(e->ctx, loc, "division by zero");
		return fe_err();
	}
	if (l.num.is_int && r.num.is_int && (op != FE_T_POW || b < 64) &&
	    int_arith(op, l.num.i, r.num.i, &ri))
		return fe_int(ri);
	switch (op) {
	case FE_T_PLUS:
		return fe_real(a + b);
	case FE_T_MINUS:
		return fe_real(a - b);
	case FE_T_STAR:
		return fe_real(a * b);
	case FE_T_SLASH:
		return fe_real(a / b);
	case FE_T_PERCENT:
		return fe_real(a - b * floor(a / b));
	default:
		break;
	}
	/* As Python's float ** and the unary functions on numbers: a power
	 * of finite numbers that is not one ((-8) ** 0.5, 2.0 ** 2000,
	 * 0.0 ** -1) is an error, not a NaN or infinity in every output. */
	double p = pow(a, b);
	if (!isfinite(p) && isfinite(a) && isfinite(b)) {
		ir_error(e->ctx, loc, "pow(%g, %g) is not a finite number", a,
			 b);
		return fe_err();
	}
	return fe_real(p);
}

/* A dim times a dim: the product symbol (B*T), coefficients multiplied;
 * neither may have an offset. */
static fe_value dim_product(fe_elab *e, fe_value l, fe_value r, ir_loc loc)
{
	char a[64], b[64];
	int64_t c;
	int32_t syms[2] = {l.dim.sym, r.dim.sym};
	if (l.dim_off || r.dim_off) {
		ir_error(e->ctx, loc,
			 "cannot multiply %s by %s (a product of "
			 "dims has no offset)",
			 dimv_str(e, l, a, sizeof a),
			 dimv_str(e, r, b, sizeof b));
		return fe_err();
	}
	int32_t s = ir_module_product_sym(e->m, syms, 2, loc);
	if (s < 0 || __builtin_mul_overflow(l.dim.coef, r.dim.coef, &c)) {
		ir_error(e->ctx, loc,
			 "%s * %s is a product of more than %d "
			 "symbols",
			 dim_str(e, l.dim, a, sizeof a),
			 dim_str(e, r.dim, b, sizeof b), IR_SYM_MAX_FACTORS);
		return fe_err();
	}
	return fe_dim((ir_dim){c, s});
}

/* l + sign * r for dims and integers: offsets add, and dims of one symbol
 * add their coefficients (T + T = 2*T, (T + 1) - T = 1). */
static fe_value dim_sum(fe_elab *e, fe_value l, fe_value r, int sign, ir_loc loc)
{
	char a[64], b[64];
	int64_t n;
	if (l.kind != FE_V_DIM) {
		if (!fe_to_int(e, l, loc, &n))
			return fe_err();
		l = (fe_value){.kind = FE_V_DIM, .dim_off = n};
		l.dim = (ir_dim){0, r.dim.sym};
	}
	if (r.kind != FE_V_DIM) {
		if (!fe_to_int(e, r, loc, &n))
			return fe_err();
		return fe_dim_plus(l.dim, l.dim_off + sign * n);
	}
	int64_t coef = l.dim.coef + sign * r.dim.coef;
	if ((l.dim.coef && l.dim.sym != r.dim.sym) || coef < 0) {
		ir_error(e->ctx, loc,
			 "%s %c %s is not a size (a dim holds a "
			 "multiple of one symbol)",
			 dimv_str(e, l, a, sizeof a), sign > 0 ? '+' : '-',
			 dimv_str(e, r, b, sizeof b));
		return fe_err();
	}
	return fe_dim_plus((ir_dim){coef, r.dim.sym},
			   l.dim_off + sign * r.dim_off);
}

/* A dim times or divided by an integer: coefficient and offset scale. */
static fe_value dim_scale(fe_elab *e, fe_tok_kind op, fe_value d, int64_t n,
			  ir_loc loc)
{
	char buf[64];
	int64_t c, o;
	if (op == FE_T_STAR) {
		if (n < 0 || __builtin_mul_overflow(d.dim.coef, n, &c) ||
		    __builtin_mul_overflow(d.dim_off, n, &o)) {
			ir_error(e->ctx, loc, "a dim times %lld is not a size",
				 (long long)n);
			return fe_err();
		}
		return fe_dim_plus((ir_dim){c, d.dim.sym}, o);
	}
	if (n <= 0 || d.dim.coef % n != 0 || d.dim_off % n != 0) {
		ir_error(e->ctx, loc, "%s is not divisible by %lld",
			 dimv_str(e, d, buf, sizeof buf), (long long)n);
		return fe_err();
	}
	return fe_dim_plus((ir_dim){d.dim.coef / n, d.dim.sym}, d.dim_off / n);
}

static fe_value dim_binop(fe_elab *e, fe_tok_kind op, fe_value l, fe_value r,
			  ir_loc loc)
{
	if (op == FE_T_EQ || op == FE_T_NE) {
		bool eq = l.kind == FE_V_DIM && r.kind == FE_V_DIM &&
			  ir_dim_eq(l.dim, r.dim) && l.dim_off == r.dim_off;
		return fe_bool(op == FE_T_EQ ? eq : !eq);
	}
	if (op == FE_T_PLUS || op == FE_T_MINUS)
		return dim_sum(e, l, r, op == FE_T_PLUS ? 1 : -1, loc);
	if (op == FE_T_STAR && l.kind == FE_V_DIM && r.kind == FE_V_DIM)
		return dim_product(e, l, r, loc);
	bool dim_left = l.kind == FE_V_DIM;
	fe_value d = dim_left ? l : r, k = dim_left ? r : l;
	int64_t n;
	if (k.kind == FE_V_DIM ||
	    (op != FE_T_STAR && !(op == FE_T_SLASH && dim_left))) {
		ir_error(e->ctx, loc,
			 "a dim can only be added to, multiplied or "
			 "divided by an integer, or multiplied by "
			 "a dim, not combined with '%s'",
			 op_spelling(op));
		return fe_err();
	}
	if (!fe_to_int(e, k, loc, &n))
		return fe_err();
	return dim_scale(e, op, d, n, loc);
}

/* ---- tensor operators ------------------------------------------------------------------ */

static ir_op tensor_op(fe_tok_kind op)
{
	switch (op) {
	case FE_T_PLUS:
		return IR_OP_ADD;
	case FE_T_MINUS:
		return IR_OP_SUB;
	case FE_T_STAR:
		return IR_OP_MUL;
	case FE_T_SLASH:
		return IR_OP_DIV;
	case FE_T_POW:
		return IR_OP_POW;
	case FE_T_LT:
		return IR_OP_LT;
	case FE_T_LE:
		return IR_OP_LE;
	case FE_T_GT:
		return IR_OP_GT;
	case FE_T_GE:
		return IR_OP_GE;
	case FE_T_EQ:
		return IR_OP_EQ;
	case FE_T_NE:
		return IR_OP_NE;
	default:
		return IR_OP_COUNT;
	}
}

static bool is_tensorish(fe_value v)
{
	return v.kind == FE_V_TENSOR || v.kind == FE_V_LIST;
}

ir_id fe_cast(fe_elab *e, ir_id x, ir_dtype dtype, ir_loc loc)
{
	if (fe_type_of(e, x)->dtype == dtype)
		return x;
	ir_type t = {.dtype = dtype};
	fe_value v = fe_build(e, IR_OP_CAST, &x, 1, NULL, &t, loc);
	return v.kind == FE_V_TENSOR ? v.tensor : IR_NONE;
}

bool fe_is_f32_operand(fe_elab *e, ir_id t, fe_value v)
{
	if (t != IR_NONE)
		return fe_type_of(e, t)->dtype != IR_I32;
	return v.kind == FE_V_NUM && !v.num.is_int;
}

/* An i32 tensor operand converted to f32 (a, b: the operands' tensors or
 * IR_NONE for a number), as PyTorch's type promotion: where the other
 * operand is an f32 tensor or a real number (v + x, v * 0.5, v > 0.5),
 * and for true division (v / 2). pow of i32 by an integer stays i32 in
 * torch: it is left to the shape rule, which refuses it. */
static void promote_i32(fe_elab *e, ir_op op, ir_id *a, ir_id *b, fe_value l,
			fe_value r, ir_loc loc)
{
	if (op != IR_OP_DIV && !fe_is_f32_operand(e, *a, l) &&
	    !fe_is_f32_operand(e, *b, r))
		return;
	if (*a != IR_NONE)
		*a = fe_cast(e, *a, IR_F32, loc);
	if (*b != IR_NONE)
		*b = fe_cast(e, *b, IR_F32, loc);
}

fe_value fe_tensor_binop(fe_elab *e, ir_op op, fe_value l, fe_value r,
			 ir_loc loc)
{
	if (l.kind == FE_V_ERR || r.kind == FE_V_ERR)
		return fe_err();
	ir_id a = is_tensorish(l) ? fe_to_tensor(e, l, loc) : IR_NONE;
	ir_id b = is_tensorish(r) ? fe_to_tensor(e, r, loc) : IR_NONE;
	if ((is_tensorish(l) && a == IR_NONE) ||
	    (is_tensorish(r) && b == IR_NONE))
		return fe_err();
	if (a == IR_NONE && b == IR_NONE) {
		fe_expected(e, loc, "a tensor", l);
		return fe_err();
	}
	promote_i32(e, op, &a, &b, l, r, loc);
	if ((is_tensorish(l) && a == IR_NONE) ||
	    (is_tensorish(r) && b == IR_NONE))
		return fe_err();
	if (a == IR_NONE) {
		fe_value s = fe_scalar(e, fe_type_of(e, b)->dtype, l, loc);
		a = s.kind == FE_V_TENSOR ? s.tensor : IR_NONE;
	} else if (b == IR_NONE) {
		fe_value s = fe_scalar(e, fe_type_of(e, a)->dtype, r, loc);
		b = s.kind == FE_V_TENSOR ? s.tensor : IR_NONE;
	}
	ir_id args[2] = {a, b};
	return fe_build(e, op, args, 2, NULL, NULL, loc);
}

static fe_value matmul(fe_elab *e, fe_value l, fe_value r, bool ta, bool tb,
		       ir_loc loc)
{
	ir_id args[2] = {fe_to_tensor(e, l, loc), IR_NONE};
	if (args[0] == IR_NONE)
		return fe_err();
	args[1] = fe_to_tensor(e, r, loc);
	ir_attr a = {.matmul = {ta, tb}};
	return fe_build(e, IR_OP_MATMUL, args, 2, &a, NULL, loc);
}

static fe_value list_concat(fe_elab *e, fe_value l, fe_value r, ir_loc loc)
{
	fe_value v = {.kind = FE_V_LIST};
	uint32_t n = l.list.n + r.list.n;
	v.list.items = fe_scratch_alloc(e, n * sizeof(fe_value), loc);
	if (!v.list.items)
		return fe_err();
	if (l.list.n)
		memcpy(v.list.items, l.list.items, l.list.n * sizeof(fe_value));
	if (r.list.n)
		memcpy(v.list.items + l.list.n, r.list.items,
		       r.list.n * sizeof(fe_value));
	v.list.n = n;
	return v;
}

static fe_value str_concat(fe_elab *e, fe_value l, fe_value r, ir_loc loc)
{
	size_t a = strlen(l.str), b = strlen(r.str);
	char *s = fe_scratch_alloc(e, a + b + 1, loc);
	if (!s)
		return fe_err();
	memcpy(s, l.str, a);
	memcpy(s + a, r.str, b + 1);
	l.str = s;
	return l;
}

/* True if l and r are equal values of one plain kind (strings, bools,
 * dtypes, None); *known says whether the kinds can be compared. */
static bool plain_equal(fe_value l, fe_value r, bool *known)
{
	*known = true;
	if (l.kind == FE_V_NONE || r.kind == FE_V_NONE)
		return l.kind == r.kind;
	if (l.kind != r.kind) {
		*known = false;
		return false;
	}
	switch (l.kind) {
	case FE_V_STR:
		return strcmp(l.str, r.str) == 0;
	case FE_V_BOOL:
		return l.b == r.b;
	case FE_V_DTYPE:
		return l.dtype == r.dtype;
	default:
		*known = false;
		return false;
	}
}

/* Operators on lists, strings, bools, dtypes and None. */
static fe_value plain_binop(fe_elab *e, fe_tok_kind op, fe_value l, fe_value r,
			    ir_loc loc)
{
	bool known;
	if (l.kind == FE_V_LIST && r.kind == FE_V_LIST && op == FE_T_PLUS)
		return list_concat(e, l, r, loc);
	if (l.kind == FE_V_STR && r.kind == FE_V_STR && op == FE_T_PLUS)
		return str_concat(e, l, r, loc);
	if (op == FE_T_EQ || op == FE_T_NE) {
		bool eq = plain_equal(l, r, &known);
		if (known)
			return fe_bool(op == FE_T_EQ ? eq : !eq);
	}
	if (l.kind == FE_V_DEF || l.kind == FE_V_BUILTIN)
		fe_expected(e, loc, "a value", l);
	else if (r.kind == FE_V_DEF || r.kind == FE_V_BUILTIN)
		fe_expected(e, loc, "a value", r);
	else
		ir_error(e->ctx, loc, "operator '%s' cannot combine %s and %s",
			 op_spelling(op), fe_kind_name(l), fe_kind_name(r));
	return fe_err();
}

fe_value fe_binop(fe_elab *e, fe_tok_kind op, fe_value l, fe_value r, bool ta,
		  bool tb, ir_loc loc)
{
	if (l.kind == FE_V_ERR || r.kind == FE_V_ERR)
		return fe_err();
	bool has_tensor = l.kind == FE_V_TENSOR || r.kind == FE_V_TENSOR;
	if (op == FE_T_AT)
		return matmul(e, l, r, ta, tb, loc);
	if (has_tensor && op == FE_T_PERCENT) {
		ir_error(e->ctx, loc, "'%%' is not defined on tensors");
		return fe_err();
	}
	if (has_tensor && tensor_op(op) != IR_OP_COUNT)
		return fe_tensor_binop(e, tensor_op(op), l, r, loc);
	if (l.kind == FE_V_NUM && r.kind == FE_V_NUM)
		return num_binop(e, op, l, r, loc);
	if ((l.kind == FE_V_DIM && (r.kind == FE_V_NUM || r.kind == FE_V_DIM)) ||
	    (r.kind == FE_V_DIM && l.kind == FE_V_NUM))
		return dim_binop(e, op, l, r, loc);
	return plain_binop(e, op, l, r, loc);
}

/* ---- unary operators --------------------------------------------------------------------- */

static fe_value transpose_last(fe_elab *e, fe_value v, ir_loc loc)
{
	char buf[128];
	ir_id x = fe_to_tensor(e, v, loc);
	if (x == IR_NONE)
		return fe_err();
	const ir_type *t = fe_type_of(e, x);
	if (t->rank < 2) {
		ir_type_format(e->m, t, buf, sizeof buf);
		ir_error(e->ctx, loc,
			 "'.T' needs a tensor of rank >= 2, got [%s]", buf);
		return fe_err();
	}
	ir_attr a = {0};
	for (int i = 0; i < t->rank && i < IR_MAX_RANK; i++)
		a.permute.perm[i] = (uint8_t)i;
	a.permute.perm[t->rank - 1] = (uint8_t)(t->rank - 2);
	a.permute.perm[t->rank - 2] = (uint8_t)(t->rank - 1);
	return fe_build(e, IR_OP_PERMUTE, &x, 1, &a, NULL, loc);
}

static fe_value negate(fe_elab *e, fe_value v, ir_loc loc)
{
	if (v.kind == FE_V_NUM)
		return v.num.is_int && v.num.i != INT64_MIN ? fe_int(-v.num.i)
							    : fe_real(-v.num.r);
	if (v.kind == FE_V_ERR)
		return v;
	if (!is_tensorish(v)) {
		fe_expected(e, loc, "a number or a tensor", v);
		return fe_err();
	}
	ir_id x = fe_to_tensor(e, v, loc);
	return fe_build(e, IR_OP_NEG, &x, 1, NULL, NULL, loc);
}

/* ---- indexing ------------------------------------------------------------------------------ */

/* Python's clamped slice bounds for a sequence of length n. */
static void slice_bounds(int64_t n, bool has_lo, int64_t lo, bool has_hi,
			 int64_t hi, int64_t *out_lo, int64_t *out_hi)
{
	lo = has_lo ? (lo < 0 ? lo + n : lo) : 0;
	hi = has_hi ? (hi < 0 ? hi + n : hi) : n;
	lo = lo < 0 ? 0 : lo > n ? n : lo;
	hi = hi < lo ? lo : hi > n ? n : hi;
	*out_lo = lo;
	*out_hi = hi;
}

/* ---- slices with a run-time bound ------------------------------------------- */

/* x with axis ax moved first (inverse: back from first to ax). */
static ir_id move_axis(fe_elab *e, ir_id x, int ax, bool is_back, ir_loc loc)
{
	int rank = fe_type_of(e, x)->rank;
	if (ax == 0 || x == IR_NONE)
		return x;
	ir_attr a = {0};
	for (int i = 0; i < rank && i < IR_MAX_RANK; i++)
		if (is_back)
			a.permute.perm[i] = (uint8_t)(i == ax  ? 0
						      : i < ax ? i + 1
							       : i);
		else
			a.permute.perm[i] = (uint8_t)(i == 0       ? ax
						      : i - 1 < ax ? i - 1
								   : i);
	fe_value v = fe_build(e, IR_OP_PERMUTE, &x, 1, &a, NULL, loc);
	return v.kind == FE_V_TENSOR ? v.tensor : IR_NONE;
}

/* Rows lo .. lo + len of x's first axis, static size n, as a gather
 * (embedding) of arange(lo, lo + len) from x seen as [n, rest]: its
 * gradient is embedding_grad's scatter, which a slice of a run-time
 * length into a static axis could not pad. */
static ir_id gather_rows(fe_elab *e, ir_id x, int64_t lo, ir_dim len, ir_loc loc)
{
	ir_type t = *fe_type_of(e, x), flat = {.rank = 2};
	flat.dims[0] = t.dims[0];
	flat.dims[1] = (ir_dim){-1, -1};
	ir_type it = {.dtype = IR_I32, .rank = 1, .dims = {len}};
	ir_attr ar = {.arange = {(double)lo, 1}};
	fe_value idx = fe_build(e, IR_OP_ARANGE, NULL, 0, &ar, &it, loc);
	fe_value tab = fe_reshape(e, x, &flat, loc);
	if (idx.kind != FE_V_TENSOR || tab.kind != FE_V_TENSOR)
		return IR_NONE;
	ir_id args[2] = {idx.tensor, tab.tensor};
	fe_value g = fe_build(e, IR_OP_EMBEDDING, args, 2, NULL, NULL, loc);
	t.dims[0] = len;
	fe_value r = g.kind == FE_V_TENSOR ? fe_reshape(e, g.tensor, &t, loc)
					   : g;
	return r.kind == FE_V_TENSOR ? r.tensor : IR_NONE;
}

ir_id fe_slice_run_time(fe_elab *e, ir_id x, int ax, fe_value lo, fe_value hi,
			ir_loc loc)
{
	char buf[128], dbuf[64];
	ir_type t = *fe_type_of(e, x);
	int64_t start;
	ir_dim len;
	ir_type_format(e->m, &t, buf, sizeof buf);
	if (lo.kind == FE_V_DIM) {
		ir_error(e->ctx, loc,
			 "a slice's start is a number, not a "
			 "run-time size");
		return IR_NONE;
	}
	fe_value n = fe_binop(e, FE_T_MINUS, hi, lo, false, false, loc);
	if (!fe_to_int(e, lo, loc, &start) || n.kind == FE_V_ERR ||
	    !fe_to_dim(e, n, loc, false, &len))
		return IR_NONE;
	ir_dim a = t.dims[ax];
	if (start == 0 && ir_dim_eq(a, len))
		return x; /* x[0:T] of an axis of size T */
	if (!ir_dim_is_static(a) || start < 0 || start > a.coef ||
	    len.coef > a.coef - start) {
		ir_error(e->ctx, loc,
			 "cannot slice %s rows from %lld of axis %d "
			 "of [%s]",
			 dim_str(e, len, dbuf, sizeof dbuf), (long long)start,
			 ax, buf);
		return IR_NONE;
	}
	if (t.dtype != IR_F32) {
		ir_error(e->ctx, loc,
			 "a slice of run-time length takes an f32 "
			 "tensor, got [%s] of %s",
			 buf, ir_dtype_name(t.dtype));
		return IR_NONE;
	}
	if (!ir_module_add_limit(e->m, len, a.coef - start, loc))
		return IR_NONE;
	ir_id y = gather_rows(e, move_axis(e, x, ax, false, loc), start, len,
			      loc);
	return move_axis(e, y, ax, true, loc);
}

/* Evaluates an optional slice bound x into *v (None if absent); false
 * if it failed. */
static bool eval_bound_value(fe_elab *e, const fe_expr *x, fe_value *v)
{
	*v = x ? fe_eval(e, x) : fe_none();
	return v->kind != FE_V_ERR;
}

/* An optional slice bound x, already evaluated to v, as an integer. */
static bool bound_int(fe_elab *e, fe_value v, const fe_expr *x, bool *has,
		      int64_t *out)
{
	*has = x != NULL;
	return !x || fe_to_int(e, v, x->loc, out);
}

/* Evaluates an optional slice bound. */
static bool eval_bound(fe_elab *e, const fe_expr *x, bool *has, int64_t *out)
{
	*has = x != NULL;
	return !x || fe_to_int(e, fe_eval(e, x), x->loc, out);
}

static fe_value index_list(fe_elab *e, fe_value base, const fe_expr *x)
{
	const fe_expr *it = x->index.items[0];
	int64_t i, lo = 0, hi = 0;
	bool has_lo, has_hi;
	if (x->index.n != 1) {
		ir_error(e->ctx, x->loc, "a list takes one index, got %u",
			 x->index.n);
		return fe_err();
	}
	if (it->kind == FE_E_SLICE) {
		if (!eval_bound(e, it->slice.lo, &has_lo, &lo) ||
		    !eval_bound(e, it->slice.hi, &has_hi, &hi))
			return fe_err();
		slice_bounds(base.list.n, has_lo, lo, has_hi, hi, &lo, &hi);
		base.list.items += lo;
		base.list.n = (uint32_t)(hi - lo);
		return base;
	}
	if (!fe_to_int(e, fe_eval(e, it), it->loc, &i))
		return fe_err();
	if (i < -(int64_t)base.list.n || i >= (int64_t)base.list.n) {
		ir_error(e->ctx, it->loc,
			 "index %lld out of range for a list "
			 "of length %u",
			 (long long)i, base.list.n);
		return fe_err();
	}
	return base.list.items[i < 0 ? i + base.list.n : i];
}

/* One index item on axis `axis` of *cur: a slice node, or nothing for a
 * full slice. *drop is set for an integer index. */
static bool index_axis(fe_elab *e, ir_id *cur, int axis, const fe_expr *it,
		       bool *drop)
{
	char buf[128];
	ir_type t = *fe_type_of(e, *cur);
	int64_t lo = 0, hi = 0, n = t.dims[axis].coef;
	bool has_lo = true, has_hi = true, is_slice = it->kind == FE_E_SLICE;
	fe_value lv = fe_none(), hv = fe_none();
	if (is_slice && !(eval_bound_value(e, it->slice.lo, &lv) &&
			  eval_bound_value(e, it->slice.hi, &hv)))
		return false;
	if (is_slice && (lv.kind == FE_V_DIM || hv.kind == FE_V_DIM)) {
		*drop = false; /* a run-time bound: x[0:T], x[1:T + 1] */
		*cur = fe_slice_run_time(e, *cur, axis,
					 lv.kind == FE_V_NONE ? fe_int(0) : lv,
					 hv, it->loc);
		return *cur != IR_NONE;
	}
	if (is_slice ? !bound_int(e, lv, it->slice.lo, &has_lo, &lo) ||
			       !bound_int(e, hv, it->slice.hi, &has_hi, &hi)
		     : !fe_to_int(e, fe_eval(e, it), it->loc, &lo))
		return false;
	*drop = !is_slice;
	if (is_slice && !has_lo && !has_hi)
		return true;
	ir_type_format(e->m, &t, buf, sizeof buf);
	if (!ir_dim_is_static(t.dims[axis])) {
		ir_error(e->ctx, it->loc,
			 "cannot index axis %d of [%s]: its size "
			 "is only known at run time",
			 axis, buf);
		return false;
	}
	if (!is_slice && (lo < -n || lo >= n)) {
		ir_error(e->ctx, it->loc,
			 "index %lld out of range for axis %d "
			 "of [%s]",
			 (long long)lo, axis, buf);
		return false;
	}
	if (is_slice)
		slice_bounds(n, has_lo, lo, has_hi, hi, &lo, &hi);
	else
		hi = (lo = lo < 0 ? lo + n : lo) + 1;
	if (lo == 0 && hi == n)
		return true;
	ir_attr a = {.slice = {axis, lo, hi, 1}};
	fe_value v = fe_build(e, IR_OP_SLICE, cur, 1, &a, NULL, it->loc);
	*cur = v.kind == FE_V_TENSOR ? v.tensor : IR_NONE;
	return *cur != IR_NONE;
}

static fe_value index_tensor(fe_elab *e, fe_value base, const fe_expr *x)
{
	ir_id cur = fe_to_tensor(e, base, x->loc);
	if (cur == IR_NONE)
		return fe_err();
	int rank = fe_type_of(e, cur)->rank;
	bool dropped[IR_MAX_RANK] = {0}, any = false;
	if (x->index.n > (uint32_t)rank) {
		ir_error(e->ctx, x->loc,
			 "too many indices (%u) for a tensor of "
			 "rank %d",
			 x->index.n, rank);
		return fe_err();
	}
	for (uint32_t i = 0; i < x->index.n; i++) {
		if (!index_axis(e, &cur, (int)i, x->index.items[i], &dropped[i]))
			return fe_err();
		any |= dropped[i];
	}
	if (!any)
		return fe_tensor(cur);
	ir_type t = *fe_type_of(e, cur), out = {.dtype = t.dtype};
	for (int i = 0; i < t.rank; i++)
		if (!dropped[i])
			out.dims[out.rank++] = t.dims[i];
	return fe_reshape(e, cur, &out, x->loc);
}

static fe_value eval_index(fe_elab *e, const fe_expr *x)
{
	fe_value base = fe_eval(e, x->index.base);
	if (base.kind == FE_V_ERR)
		return base;
	if (base.kind == FE_V_LIST)
		return index_list(e, base, x);
	if (base.kind == FE_V_TENSOR)
		return index_tensor(e, base, x);
	fe_expected(e, x->loc, "a list or a tensor to index", base);
	return fe_err();
}

/* ---- expressions ------------------------------------------------------------------------------ */

static fe_value eval_list(fe_elab *e, const fe_expr *x)
{
	fe_value v = {.kind = FE_V_LIST};
	v.list.n = x->list.n;
	v.list.items = fe_scratch_alloc(e, x->list.n * sizeof(fe_value), x->loc);
	if (!v.list.items)
		return fe_err();
	for (uint32_t i = 0; i < x->list.n; i++) {
		v.list.items[i] = fe_eval(e, x->list.items[i]);
		if (v.list.items[i].kind == FE_V_ERR)
			return fe_err();
	}
	return v;
}

static fe_value eval_logic(fe_elab *e, const fe_expr *x)
{
	bool a, b;
	bool is_and = x->bin.op == FE_T_AND;
	if (!fe_to_bool(e, fe_eval(e, x->bin.lhs), x->bin.lhs->loc, &a))
		return fe_err();
	if (is_and ? !a : a)
		return fe_bool(a);
	if (!fe_to_bool(e, fe_eval(e, x->bin.rhs), x->bin.rhs->loc, &b))
		return fe_err();
	return fe_bool(b);
}

static bool is_chain_op(const fe_expr *x)
{
	return x->kind == FE_E_BINARY && x->bin.op != FE_T_AND &&
	       x->bin.op != FE_T_OR;
}

/* One link of a chain: l (the value of x's left operand) OP x's right. */
static fe_value eval_link(fe_elab *e, const fe_expr *x, fe_value l, bool ta)
{
	bool tb = x->bin.op == FE_T_AT && x->bin.rhs->kind == FE_E_TRANSPOSE;
	if (l.kind == FE_V_ERR)
		return l;
	fe_value r = fe_eval(e, tb ? x->bin.rhs->operand : x->bin.rhs);
	return fe_binop(e, x->bin.op, l, r, ta, tb, x->loc);
}

/* A left-leaning chain (a + b - c ...) is walked in a loop, so that a
 * long one does not nest the recursion (the parser counts it as one
 * level, see fe_expr.depth). */
static fe_value eval_binary(fe_elab *e, const fe_expr *x)
{
	if (!is_chain_op(x))
		return eval_logic(e, x);
	uint32_t n = 1;
	const fe_expr *b = x;
	for (; is_chain_op(b->bin.lhs); b = b->bin.lhs)
		n++;
	const fe_expr **spine = ir_alloc(e->ctx, n * sizeof *spine);
	if (!spine)
		return fe_err();
	b = x;
	for (uint32_t i = n; i-- > 0; b = b->bin.lhs)
		spine[i] = b;
	const fe_expr *lx = spine[0]->bin.lhs;
	bool ta = spine[0]->bin.op == FE_T_AT && lx->kind == FE_E_TRANSPOSE;
	fe_value v = eval_link(e, spine[0], fe_eval(e, ta ? lx->operand : lx),
			       ta);
	for (uint32_t i = 1; i < n; i++)
		v = eval_link(e, spine[i], v, false);
	ir_free(e->ctx, spine);
	return v;
}

static fe_value eval(fe_elab *e, const fe_expr *x)
{
	fe_value v;
	bool b;
	switch (x->kind) {
	case FE_E_NUM:
		return x->num.is_int ? fe_int(x->num.i) : fe_real(x->num.r);
	case FE_E_STR:
		v = (fe_value){.kind = FE_V_STR};
		v.str = x->str;
		return v;
	case FE_E_NAME:
		return fe_lookup(e, x->str, x->loc);
	case FE_E_BOOL:
		return fe_bool(x->boolean);
	case FE_E_LIST:
		return eval_list(e, x);
	case FE_E_CALL:
		return fe_eval_call(e, x, true);
	case FE_E_INDEX:
		return eval_index(e, x);
	case FE_E_SLICE:
		ir_error(e->ctx, x->loc, "a slice is only allowed inside [ ]");
		return fe_err();
	case FE_E_TRANSPOSE:
		v = fe_eval(e, x->operand);
		return v.kind == FE_V_ERR ? v : transpose_last(e, v, x->loc);
	case FE_E_BINARY:
		return eval_binary(e, x);
	case FE_E_NEG:
		return negate(e, fe_eval(e, x->operand), x->loc);
	case FE_E_NOT:
		if (!fe_to_bool(e, fe_eval(e, x->operand), x->operand->loc, &b))
			return fe_err();
		return fe_bool(!b);
	}
	return fe_err();
}

fe_value fe_eval(fe_elab *e, const fe_expr *x)
{
	if (fe_stopped(e))
		return fe_err();
	if (e->eval_depth == FE_MAX_EVAL_DEPTH) {
		ir_error(e->ctx, x->loc,
			 "expressions and calls nested too deeply "
			 "(more than %d)",
			 FE_MAX_EVAL_DEPTH);
		e->is_stopped = true;
		return fe_err();
	}
	e->eval_depth++;
	fe_value v = eval(e, x);
	e->eval_depth--;
	return v;
}

/* ---- calls --------------------------------------------------------------------------------------- */

static fe_value call_builtin(fe_elab *e, const fe_builtin *b, const fe_expr *x,
			     const fe_raw_arg *raw, uint32_t n_raw)
{
	fe_value v[FE_MAX_BUILTIN_ARGS];
	ir_loc locs[FE_MAX_BUILTIN_ARGS];
	bool is_t[FE_MAX_BUILTIN_ARGS];
	fe_args a = {b->name, x->loc, v, locs, is_t, b->n_params};
	if (!fe_bind_args(e, b->name, x->loc, b->params, b->n_params,
			  b->n_required, raw, n_raw, &a))
		return fe_err();
	for (uint32_t i = 0; i < a.n; i++)
		if (v[i].kind == FE_V_ERR)
			return fe_err();
	return b->fn(e, b, &a);
}

fe_value fe_eval_call(fe_elab *e, const fe_expr *x, bool want_value)
{
	const fe_expr *cx = x->call.callee;
	fe_value callee = cx->kind == FE_E_NAME ? fe_lookup(e, cx->str, cx->loc)
						: fe_eval(e, cx);
	if (callee.kind == FE_V_ERR)
		return callee;
	if (callee.kind != FE_V_DEF && callee.kind != FE_V_BUILTIN) {
		if (cx->kind == FE_E_NAME)
			ir_error(e->ctx, x->loc,
				 "'%s' is not a function (it is %s)", cx->str,
				 fe_kind_name(callee));
		else
			ir_error(e->ctx, x->loc,
				 "this is not a function (it is %s)",
				 fe_kind_name(callee));
		return fe_err();
	}
	bool is_matmul = callee.kind == FE_V_BUILTIN &&
			 callee.builtin->op == IR_OP_MATMUL;
	uint32_t n = x->call.n_args;
	fe_raw_arg *raw = ir_alloc(e->ctx, (n ? n : 1) * sizeof *raw);
	if (!raw)
		return fe_err();
	for (uint32_t i = 0; i < n; i++) {
		const fe_arg *arg = &x->call.args[i];
		raw[i].name = arg->name;
		raw[i].name_loc = arg->name_loc;
		raw[i].loc = arg->value->loc;
		raw[i].is_t = is_matmul && arg->value->kind == FE_E_TRANSPOSE;
		raw[i].v = fe_eval(e, raw[i].is_t ? arg->value->operand
						  : arg->value);
	}
	fe_value v = callee.kind == FE_V_DEF
			     ? fe_call_def(e, callee.def, x, raw, n, want_value)
			     : call_builtin(e, callee.builtin, x, raw, n);
	ir_free(e->ctx, raw);
	return v;
}
