/*
 * shape_rules.c - the shape and type rule of every op (ir_infer_type).
 *
 * Semantics are PyTorch's: elementwise ops broadcast as NumPy does (shapes
 * right-aligned; a static 1 stretches to anything; other dims must be
 * equal), matmul is batched with broadcast batch dims, reductions take a
 * bitmask of axes. A dim is static or coef * symbol; two symbolic dims are
 * equal only when coef and symbol are. Every error names the op and shows
 * the operand shapes, at the node's source location, because that is what
 * a user of the .g language sees when a model does not fit together.
 *
 * Arithmetic on dims is checked for overflow: the reader feeds this code
 * whatever text it was given.
 */
#include "ir.h"
#include "ir_internal.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

/* One rule's view of the node being inferred. */
typedef struct infer_cx {
	ir_ctx *ctx;
	const ir_module *m;
	const ir_graph *g;
	ir_node *n;
	char *msg; /* when set, errors go here (msg_size bytes), not to ctx */
	size_t msg_size;
} infer_cx;

/* A formatted type, returned by value so that it can appear inline in an
 * error call (its lifetime is the full expression). */
typedef struct tstr {
	char s[192];
} tstr;

/* ---- formatting and errors --------------------------------------------- */

static bool syms_in_range(const ir_module *m, const ir_type *t)
{
	for (int i = 0; i < t->rank && i < IR_MAX_RANK; i++)
		if (t->dims[i].sym >= 0 && (uint32_t)t->dims[i].sym >= m->n_syms)
			return false;
	return true;
}

/* "[B, 10, 32]"; a dim naming an unknown symbol prints as "$N". */
static tstr shape_str(const ir_module *m, const ir_type *t)
{
	tstr r;
	char dims[sizeof r.s - 2];
	ir_type tt = *t;
	if (tt.rank > IR_MAX_RANK)
		tt.rank = IR_MAX_RANK;
	if (syms_in_range(m, &tt)) {
		ir_type_format(m, &tt, dims, sizeof dims);
	} else {
		size_t used = 0;
		dims[0] = '\0';
		for (int i = 0; i < tt.rank && used < sizeof dims; i++) {
			int w = snprintf(dims + used, sizeof dims - used,
					 "%s%lld*$%d", i ? ", " : "",
					 (long long)tt.dims[i].coef,
					 tt.dims[i].sym);
			if (w < 0)
				break;
			used += (size_t)w;
		}
	}
	snprintf(r.s, sizeof r.s, "[%s]", dims);
	return r;
}

/* "f32[B, 10, 32]". */
static tstr type_str(const ir_module *m, const ir_type *t)
{
	tstr sh = shape_str(m, t), r;
	snprintf(r.s, sizeof r.s, "%s%s", ir_dtype_name(t->dtype), sh.s);
	return r;
}

/* Reports "<op>: <message>" at the node's location; returns false. */
static bool fail(const infer_cx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static bool fail(const infer_cx *c, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	const char *name = (unsigned)c->n->op < IR_OP_COUNT
				   ? ir_op_table[c->n->op].name
				   : "?";
	if (c->msg)
		snprintf(c->msg, c->msg_size, "%s: %s", name, msg);
	else
		ir_error(c->ctx, c->n->loc, "%s: %s", name, msg);
	return false;
}

/* ---- dims ------------------------------------------------------------------ */

static bool dim_is_one(ir_dim d)
{
	return ir_dim_is_static(d) && d.coef == 1;
}

/* A dim a tensor may have: static >= 0, or coef >= 1 of a known symbol. */
static bool dim_valid(const ir_module *m, ir_dim d)
{
	if (ir_dim_is_static(d))
		return d.coef >= 0 && d.sym == -1;
	return (uint32_t)d.sym < m->n_syms && d.coef >= 1;
}

bool ir_type_is_valid(const ir_module *m, const ir_type *t)
{
	if (t->rank > IR_MAX_RANK)
		return false;
	if (t->dtype != IR_F32 && t->dtype != IR_I32 && t->dtype != IR_F64)
		return false;
	for (int i = 0; i < t->rank; i++)
		if (!dim_valid(m, t->dims[i]))
			return false;
	return true;
}

/* The broadcast of two dims, or false if they do not broadcast. */
static bool dim_bcast(ir_dim a, ir_dim b, ir_dim *out)
{
	if (ir_dim_eq(a, b) || dim_is_one(b))
		*out = a;
	else if (dim_is_one(a))
		*out = b;
	else
		return false;
	return true;
}

/* d * r, r >= 0; false on overflow. */
static bool dim_mul(ir_dim d, int64_t r, ir_dim *out)
{
	int64_t c;
	if (__builtin_mul_overflow(d.coef, r, &c))
		return false;
	*out = c == 0 ? ir_dim_static(0) : (ir_dim){c, d.sym};
	return true;
}

/* Broadcasts the shapes of a and b (right-aligned) into out's rank and
 * dims; out's dtype is left alone. */
static bool shape_bcast(const ir_type *a, const ir_type *b, ir_type *out)
{
	int r = a->rank > b->rank ? a->rank : b->rank;
	ir_type t = *out;
	t.rank = (uint8_t)r;
	for (int i = 0; i < r; i++) {
		int ia = a->rank - r + i, ib = b->rank - r + i;
		ir_dim da = ia >= 0 ? a->dims[ia] : ir_dim_static(1);
		ir_dim db = ib >= 0 ? b->dims[ib] : ir_dim_static(1);
		if (!dim_bcast(da, db, &t.dims[i]))
			return false;
	}
	*out = t;
	return true;
}

/* True if `from` broadcasts to exactly `to` (one direction, as expand). */
static bool shape_bcasts_to(const ir_type *from, const ir_type *to)
{
	if (from->rank > to->rank)
		return false;
	int off = to->rank - from->rank;
	for (int i = 0; i < from->rank; i++)
		if (!ir_dim_eq(from->dims[i], to->dims[off + i]) &&
		    !dim_is_one(from->dims[i]))
			return false;
	return true;
}

/* Sets the node's type to dtype and the shape of t. */
static void set_type(infer_cx *c, ir_dtype dtype, const ir_type *t)
{
	ir_type r = *t;
	r.dtype = dtype;
	for (int i = r.rank; i < IR_MAX_RANK; i++)
		r.dims[i] = (ir_dim){0, 0};
	c->n->type = r;
}

/* ---- operands ----------------------------------------------------------------- */

static const ir_type *arg_type(const infer_cx *c, uint32_t i)
{
	return &c->g->nodes[c->g->args[c->n->first_arg + i]].type;
}

/* Nodes an operand may name: those before the node when it lies in the
 * graph (ir_build, the verifier's in-place checks), else every node. */
static uint32_t arg_limit(const infer_cx *c)
{
	uintptr_t p = (uintptr_t)c->n, lo = (uintptr_t)c->g->nodes;
	uintptr_t hi = (uintptr_t)(c->g->nodes + c->g->n_nodes);
	if (c->g->nodes && p >= lo && p < hi)
		return (uint32_t)((p - lo) / sizeof *c->n);
	return c->g->n_nodes;
}

/* Operand count per the op table, each operand defined earlier, each
 * operand type well formed (so that rules may index its dims). */
static bool check_operands(const infer_cx *c)
{
	const ir_op_info *info = &ir_op_table[c->n->op];
	if (info->n_in >= 0 && c->n->n_args != (uint32_t)info->n_in)
		return fail(c, "expects %d operand%s, got %u", info->n_in,
			    info->n_in == 1 ? "" : "s", c->n->n_args);
	if (info->n_in < 0 && c->n->n_args == 0)
		return fail(c, "expects at least one operand");
	if ((uint64_t)c->n->first_arg + c->n->n_args > c->g->n_args)
		return fail(c, "operand list out of range");
	uint32_t limit = arg_limit(c);
	for (uint32_t i = 0; i < c->n->n_args; i++) {
		ir_id a = c->g->args[c->n->first_arg + i];
		if (a >= limit)
			return fail(c,
				    "operand %u (%%%u) is not defined before "
				    "its use",
				    i, a);
		if (!ir_type_is_valid(c->m, &c->g->nodes[a].type))
			return fail(c, "operand %u (%%%u) has a malformed type",
				    i, a);
	}
	return true;
}

static bool need_dtype(const infer_cx *c, uint32_t i, ir_dtype want,
		       const char *what)
{
	const ir_type *t = arg_type(c, i);
	if (t->dtype == want)
		return true;
	return fail(c, "%s must be %s: %s", what, ir_dtype_name(want),
		    type_str(c->m, t).s);
}

/* f32 or i32, the dtypes arithmetic accepts. */
static bool need_numeric(const infer_cx *c, uint32_t i, const char *what)
{
	const ir_type *t = arg_type(c, i);
	if (t->dtype == IR_F32 || t->dtype == IR_I32)
		return true;
	return fail(c, "%s must be f32 or i32: %s", what, type_str(c->m, t).s);
}

/* ---- leaves --------------------------------------------------------------------- */

static bool infer_leaf_type(const infer_cx *c)
{
	const ir_type *t = &c->n->type;
	if (!ir_type_is_valid(c->m, t) || t->dtype == IR_F64)
		return fail(c, "malformed type %s", type_str(c->m, t).s);
	return true;
}

static bool infer_param(const infer_cx *c)
{
	uint32_t i = c->n->attr.param_index;
	if (i >= c->m->n_params)
		return fail(c, "parameter index %u out of range (%u parameters)",
			    i, c->m->n_params);
	if (!ir_type_eq(&c->n->type, &c->m->params[i].type))
		return fail(c, "type %s differs from parameter @%s: %s",
			    type_str(c->m, &c->n->type).s, c->m->params[i].name,
			    type_str(c->m, &c->m->params[i].type).s);
	return infer_leaf_type(c);
}

static bool infer_const(const infer_cx *c)
{
	uint32_t i = c->n->attr.const_index;
	if (i >= c->m->n_consts)
		return fail(c, "constant index %u out of range (%u constants)",
			    i, c->m->n_consts);
	if (!ir_type_eq(&c->n->type, &c->m->consts[i].type))
		return fail(c, "type %s differs from constant @c%u: %s",
			    type_str(c->m, &c->n->type).s, i,
			    type_str(c->m, &c->m->consts[i].type).s);
	if (!ir_type_is_valid(c->m, &c->n->type))
		return fail(c, "malformed type %s",
			    type_str(c->m, &c->n->type).s);
	for (int k = 0; k < c->n->type.rank; k++)
		if (!ir_dim_is_static(c->n->type.dims[k]))
			return fail(c, "constant type %s is not static",
				    type_str(c->m, &c->n->type).s);
	return true;
}

/* arange: its own type, i32 or f32 of rank 1, with a finite start and a
 * nonzero step. */
static bool infer_arange(const infer_cx *c)
{
	const ir_type *t = &c->n->type;
	double start = c->n->attr.arange.start, step = c->n->attr.arange.step;
	if (t->rank != 1 || t->dtype == IR_F64 || !ir_type_is_valid(c->m, t))
		return fail(c, "type %s is not i32 or f32 of rank 1",
			    type_str(c->m, t).s);
	if (!(start == start && step == step && start - start == 0 &&
	      step - step == 0 && step != 0))
		return fail(c, "start %g and step %g are not finite and nonzero",
			    start, step);
	return true;
}

/* ---- elementwise ------------------------------------------------------------------ */

/* f32 in and out; NEG and ABS also take i32. */
static bool infer_unary(infer_cx *c, bool allow_i32)
{
	if (allow_i32 ? !need_numeric(c, 0, "operand")
		      : !need_dtype(c, 0, IR_F32, "operand"))
		return false;
	set_type(c, arg_type(c, 0)->dtype, arg_type(c, 0));
	return true;
}

static bool infer_cast(infer_cx *c)
{
	ir_dtype to = c->n->type.dtype;
	if (to != IR_F32 && to != IR_I32)
		return fail(c, "target dtype must be f32 or i32, not %s",
			    ir_dtype_name(to));
	set_type(c, to, arg_type(c, 0));
	return true;
}

/* Binary ops: same dtype (f32 only when is_float), broadcast shapes;
 * the result has dtype out (or the operands' when out < 0). */
static bool infer_binary(infer_cx *c, bool is_float, int out)
{
	const ir_type *a = arg_type(c, 0), *b = arg_type(c, 1);
	if (is_float ? !need_dtype(c, 0, IR_F32, "left operand")
		     : !need_numeric(c, 0, "left operand"))
		return false;
	if (a->dtype != b->dtype)
		return fail(c, "operand dtypes differ: %s and %s",
			    type_str(c->m, a).s, type_str(c->m, b).s);
	ir_type r = {0};
	if (!shape_bcast(a, b, &r))
		return fail(c, "cannot broadcast %s with %s",
			    shape_str(c->m, a).s, shape_str(c->m, b).s);
	set_type(c, out < 0 ? a->dtype : (ir_dtype)out, &r);
	return true;
}

static bool infer_select(infer_cx *c)
{
	const ir_type *k = arg_type(c, 0), *a = arg_type(c, 1),
		      *b = arg_type(c, 2);
	if (!need_dtype(c, 0, IR_I32, "condition") ||
	    !need_numeric(c, 1, "first value"))
		return false;
	if (a->dtype != b->dtype)
		return fail(c, "value dtypes differ: %s and %s",
			    type_str(c->m, a).s, type_str(c->m, b).s);
	ir_type r = {0};
	if (!shape_bcast(k, a, &r) || !shape_bcast(&r, b, &r))
		return fail(c, "cannot broadcast %s, %s and %s",
			    shape_str(c->m, k).s, shape_str(c->m, a).s,
			    shape_str(c->m, b).s);
	set_type(c, a->dtype, &r);
	return true;
}

/* ---- matmul ---------------------------------------------------------------------- */

static bool infer_matmul(infer_cx *c)
{
	const ir_type *a = arg_type(c, 0), *b = arg_type(c, 1);
	bool ta = c->n->attr.matmul.ta, tb = c->n->attr.matmul.tb;
	if (!need_dtype(c, 0, IR_F32, "left operand") ||
	    !need_dtype(c, 1, IR_F32, "right operand"))
		return false;
	if (a->rank < 2 || b->rank < 2)
		return fail(c,
			    "operands must have rank >= 2 (unsqueeze a "
			    "vector first): %s @ %s",
			    shape_str(c->m, a).s, shape_str(c->m, b).s);
	ir_dim am = a->dims[a->rank - 2 + ta], ak = a->dims[a->rank - 1 - ta];
	ir_dim bk = b->dims[b->rank - 2 + tb], bn = b->dims[b->rank - 1 - tb];
	if (!ir_dim_eq(ak, bk))
		return fail(c, "inner dimensions differ: %s%s @ %s%s",
			    shape_str(c->m, a).s, ta ? "^T" : "",
			    shape_str(c->m, b).s, tb ? "^T" : "");
	ir_type ba = *a, bb = *b, r = {0};
	ba.rank -= 2;
	bb.rank -= 2;
	if (!shape_bcast(&ba, &bb, &r))
		return fail(c, "batch dimensions do not broadcast: %s @ %s",
			    shape_str(c->m, a).s, shape_str(c->m, b).s);
	r.dims[r.rank++] = am;
	r.dims[r.rank++] = bn;
	set_type(c, IR_F32, &r);
	return true;
}

/* ---- reductions and normalizations -------------------------------------------------- */

static int popcount32(uint32_t x)
{
	int n = 0;
	for (; x; x &= x - 1)
		n++;
	return n;
}

static bool infer_reduce(infer_cx *c, bool is_argmax)
{
	const ir_type *x = arg_type(c, 0);
	uint32_t axes = c->n->attr.reduce.axes;
	if (c->n->op == IR_OP_MEAN ? !need_dtype(c, 0, IR_F32, "operand")
				   : !need_numeric(c, 0, "operand"))
		return false;
	if (x->rank < 32 && (axes >> x->rank) != 0)
		return fail(c, "axis %d out of range for %s",
			    x->rank + __builtin_ctz(axes >> x->rank),
			    shape_str(c->m, x).s);
	if (is_argmax && popcount32(axes) != 1)
		return fail(c, "needs exactly one axis, got %d for %s",
			    popcount32(axes), shape_str(c->m, x).s);
	if (axes == 0 && x->rank > 0)
		return fail(c, "no axis to reduce over in %s",
			    shape_str(c->m, x).s);
	ir_type r = {0};
	bool is_empty = false, has_none = false; /* over, into, no elements */
	for (int i = 0; i < x->rank; i++) {
		if (!(axes & (1u << i)))
			r.dims[r.rank++] = x->dims[i];
		else if (c->n->attr.reduce.keepdim)
			r.dims[r.rank++] = ir_dim_static(1);
		if (x->dims[i].coef == 0)
			*((axes & (1u << i)) ? &is_empty : &has_none) = true;
	}
	/* max and argmax have no identity (as PyTorch's): a result with
	 * elements taken over no elements has no value. (A symbol's value is
	 * at least 1, so only a dim of 0 makes an axis empty.) */
	if ((c->n->op == IR_OP_MAX || is_argmax) && is_empty && !has_none)
		return fail(c, "reduction over an empty axis of %s",
			    shape_str(c->m, x).s);
	set_type(c, is_argmax ? IR_I32 : x->dtype, &r);
	return true;
}

static bool infer_softmax(infer_cx *c)
{
	const ir_type *x = arg_type(c, 0);
	if (!need_dtype(c, 0, IR_F32, "operand"))
		return false;
	if (x->rank < 1)
		return fail(c, "operand must have rank >= 1: %s",
			    shape_str(c->m, x).s);
	set_type(c, IR_F32, x);
	return true;
}

static bool infer_masked_softmax(infer_cx *c)
{
	const ir_type *x = arg_type(c, 0), *v = arg_type(c, 1);
	if (!need_dtype(c, 0, IR_F32, "scores") ||
	    !need_dtype(c, 1, IR_I32, "valid lengths"))
		return false;
	if (x->rank < 2)
		return fail(c, "scores must have rank >= 2: %s",
			    shape_str(c->m, x).s);
	if (v->rank + 2 != x->rank && v->rank + 1 != x->rank)
		return fail(c,
			    "valid lengths must have rank %d or %d for "
			    "scores %s: %s",
			    x->rank - 2, x->rank - 1, shape_str(c->m, x).s,
			    shape_str(c->m, v).s);
	for (int i = 0; i < v->rank; i++)
		if (!ir_dim_eq(v->dims[i], x->dims[i]) && !dim_is_one(v->dims[i]))
			return fail(c,
				    "valid lengths %s do not broadcast "
				    "against scores %s",
				    shape_str(c->m, v).s, shape_str(c->m, x).s);
	set_type(c, IR_F32, x);
	return true;
}

static bool infer_layer_norm(infer_cx *c)
{
	const ir_type *x = arg_type(c, 0);
	if (!need_dtype(c, 0, IR_F32, "operand") ||
	    !need_dtype(c, 1, IR_F32, "scale") ||
	    !need_dtype(c, 2, IR_F32, "shift"))
		return false;
	if (x->rank < 1)
		return fail(c, "operand must have rank >= 1: %s",
			    shape_str(c->m, x).s);
	for (uint32_t i = 1; i < 3; i++) {
		const ir_type *p = arg_type(c, i);
		if (p->rank != 1 || !ir_dim_eq(p->dims[0], x->dims[x->rank - 1]))
			return fail(c,
				    "%s must have rank 1 and the size of "
				    "the last axis of %s: %s",
				    i == 1 ? "scale" : "shift",
				    shape_str(c->m, x).s, shape_str(c->m, p).s);
	}
	if (!(c->n->attr.eps >= 0))
		return fail(c, "eps must be >= 0, not %g", c->n->attr.eps);
	set_type(c, IR_F32, x);
	return true;
}

static bool infer_dropout(infer_cx *c)
{
	double p = c->n->attr.dropout.p;
	if (!need_dtype(c, 0, IR_F32, "operand"))
		return false;
	if (!(p >= 0 && p < 1))
		return fail(c, "probability must be in [0, 1), not %g", p);
	set_type(c, IR_F32, arg_type(c, 0));
	return true;
}

static bool infer_embedding(infer_cx *c)
{
	const ir_type *ids = arg_type(c, 0), *tab = arg_type(c, 1);
	if (!need_dtype(c, 0, IR_I32, "indices") ||
	    !need_dtype(c, 1, IR_F32, "table"))
		return false;
	if (tab->rank != 2)
		return fail(c, "table must have rank 2: %s",
			    shape_str(c->m, tab).s);
	if (ids->rank >= IR_MAX_RANK)
		return fail(c, "indices %s leave no room for the embedding axis",
			    shape_str(c->m, ids).s);
	ir_type r = *ids;
	r.dims[r.rank++] = tab->dims[1];
	set_type(c, IR_F32, &r);
	return true;
}

/* one_hot(ids): the node's own type gives the classes, its last dim. */
static bool infer_one_hot(infer_cx *c)
{
	const ir_type *ids = arg_type(c, 0);
	ir_type t = c->n->type;
	if (!need_dtype(c, 0, IR_I32, "indices"))
		return false;
	t.dtype = IR_F32;
	if (!ir_type_is_valid(c->m, &t) || t.rank != ids->rank + 1)
		return fail(c, "target %s is not indices %s and one more axis",
			    shape_str(c->m, &t).s, shape_str(c->m, ids).s);
	for (int i = 0; i < ids->rank; i++)
		if (!ir_dim_eq(t.dims[i], ids->dims[i]))
			return fail(c,
				    "target %s does not start with indices %s",
				    shape_str(c->m, &t).s,
				    shape_str(c->m, ids).s);
	set_type(c, IR_F32, &t);
	return true;
}

/* embedding_grad(ids, g): g is ids with a last axis D; the node's own
 * type is the table's [V, D]. */
static bool infer_embedding_grad(infer_cx *c)
{
	const ir_type *ids = arg_type(c, 0), *g = arg_type(c, 1);
	ir_type t = c->n->type;
	if (!need_dtype(c, 0, IR_I32, "indices") ||
	    !need_dtype(c, 1, IR_F32, "gradient"))
		return false;
	bool ok = g->rank == ids->rank + 1;
	for (int i = 0; ok && i < ids->rank; i++)
		ok = ir_dim_eq(g->dims[i], ids->dims[i]);
	if (!ok)
		return fail(c, "gradient %s is not indices %s and one more axis",
			    shape_str(c->m, g).s, shape_str(c->m, ids).s);
	t.dtype = IR_F32;
	if (!ir_type_is_valid(c->m, &t) || t.rank != 2 ||
	    !ir_dim_eq(t.dims[1], g->dims[g->rank - 1]))
		return fail(c, "target %s is not a table [V, %s]",
			    shape_str(c->m, &t).s, shape_str(c->m, g).s);
	set_type(c, IR_F32, &t);
	return true;
}

/* ---- reshape ------------------------------------------------------------------------ */

#define DIM_PROD_MAX (IR_MAX_RANK * IR_SYM_MAX_FACTORS)

/* A product of dims: coef times the product of n base symbols (a derived
 * symbol counts as its factors, so [B*T, D] and [B, T, D] agree). */
typedef struct dim_prod {
	int64_t coef;
	int n;
	int32_t syms[DIM_PROD_MAX];
} dim_prod;

/* The product of t's dims, skipping "infer" dims ({-1, -1}). */
static bool prod_of(const ir_module *m, const ir_type *t, dim_prod *p)
{
	p->coef = 1;
	p->n = 0;
	for (int i = 0; i < t->rank; i++) {
		ir_dim d = t->dims[i];
		if (d.coef == -1 && d.sym == -1)
			continue;
		if (__builtin_mul_overflow(p->coef, d.coef, &p->coef))
			return false;
		uint32_t n = (uint32_t)p->n;
		if (d.sym >= 0 &&
		    !ir_sym_factors(m, d.sym, p->syms, &n, DIM_PROD_MAX))
			return false;
		p->n = (int)n;
	}
	return true;
}

/* Removes every symbol of sub from p; false if one is missing. */
static bool prod_remove(dim_prod *p, const dim_prod *sub)
{
	for (int i = 0; i < sub->n; i++) {
		int j = 0;
		while (j < p->n && p->syms[j] != sub->syms[i])
			j++;
		if (j == p->n)
			return false;
		p->syms[j] = p->syms[--p->n];
	}
	return true;
}

/* Solves the target's "infer" dim (if any) so that the element counts of
 * in and *t agree; false if they cannot. */
static bool reshape_solve(const ir_module *m, const ir_type *in, ir_type *t)
{
	int infer_at = -1;
	for (int i = 0; i < t->rank; i++) {
		ir_dim d = t->dims[i];
		if (d.coef == -1 && d.sym == -1 && infer_at < 0)
			infer_at = i;
		else if (d.coef < 0 || (d.sym >= 0 && d.coef == 0))
			return false;
	}
	dim_prod pi, pt;
	if (!prod_of(m, in, &pi) || !prod_of(m, t, &pt))
		return false;
	if (infer_at < 0) {
		if (pi.coef == 0 || pt.coef == 0)
			return pi.coef == pt.coef;
		return pi.coef == pt.coef && pi.n == pt.n &&
		       prod_remove(&pi, &pt);
	}
	if (pt.coef == 0 || pi.coef % pt.coef != 0 || !prod_remove(&pi, &pt))
		return false;
	int64_t q = pi.coef / pt.coef;
	/* Two or more symbols left over: their product symbol, which the
	 * frontend adds before it builds such a reshape. */
	int32_t sym = pi.n == 0 ? -1
				: ir_module_find_product_sym(m, pi.syms,
							     (uint32_t)pi.n);
	if (pi.n > 0 && sym < 0)
		return false;
	t->dims[infer_at] = sym < 0 || q == 0 ? ir_dim_static(q)
					      : (ir_dim){q, sym};
	return true;
}

static bool infer_reshape(infer_cx *c)
{
	const ir_type *in = arg_type(c, 0);
	ir_type t = c->n->type;
	t.dtype = in->dtype;
	if (t.rank > IR_MAX_RANK)
		return fail(c, "target rank %u exceeds %d", t.rank, IR_MAX_RANK);
	for (int i = 0; i < t.rank; i++)
		if (t.dims[i].sym >= 0 && (uint32_t)t.dims[i].sym >= c->m->n_syms)
			return fail(c, "target dim %d names unknown symbol %d",
				    i, t.dims[i].sym);
	if (!reshape_solve(c->m, in, &t) || !ir_type_is_valid(c->m, &t))
		return fail(c, "cannot reshape %s to %s", shape_str(c->m, in).s,
			    shape_str(c->m, &c->n->type).s);
	set_type(c, in->dtype, &t);
	return true;
}

static bool infer_broadcast(infer_cx *c)
{
	const ir_type *in = arg_type(c, 0);
	ir_type t = c->n->type;
	t.dtype = in->dtype;
	if (!ir_type_is_valid(c->m, &t))
		return fail(c, "malformed target %s", shape_str(c->m, &t).s);
	if (!shape_bcasts_to(in, &t))
		return fail(c, "cannot broadcast %s to %s",
			    shape_str(c->m, in).s, shape_str(c->m, &t).s);
	set_type(c, in->dtype, &t);
	return true;
}

/* ---- layout ------------------------------------------------------------------------- */

static bool infer_permute(infer_cx *c)
{
	const ir_type *x = arg_type(c, 0);
	const uint8_t *perm = c->n->attr.permute.perm;
	unsigned seen = 0;
	ir_type r = *x;
	for (int i = 0; i < x->rank; i++) {
		if (perm[i] >= x->rank || (seen & (1u << perm[i])))
			return fail(c, "not a permutation of the %d axes of %s",
				    x->rank, shape_str(c->m, x).s);
		seen |= 1u << perm[i];
		r.dims[i] = x->dims[perm[i]];
	}
	set_type(c, x->dtype, &r);
	return true;
}

static bool infer_slice(infer_cx *c)
{
	const ir_type *x = arg_type(c, 0);
	int32_t ax = c->n->attr.slice.axis;
	int64_t s = c->n->attr.slice.start, e = c->n->attr.slice.end,
		st = c->n->attr.slice.step;
	if (ax < 0 || ax >= x->rank)
		return fail(c, "axis %d out of range for %s", ax,
			    shape_str(c->m, x).s);
	/* A symbolic axis takes static bounds; that it is long enough is
	 * checked once its size is known (interpreter, lowering). */
	ir_dim d = x->dims[ax];
	int64_t len = ir_dim_is_static(d) ? d.coef : INT64_MAX;
	if (!(0 <= s && s <= e && e <= len) || st < 1)
		return fail(c,
			    "range %lld:%lld:%lld out of bounds for axis %d "
			    "of %s",
			    (long long)s, (long long)e, (long long)st, ax,
			    shape_str(c->m, x).s);
	ir_type r = *x;
	r.dims[ax] = ir_dim_static((e - s) / st + ((e - s) % st != 0));
	set_type(c, x->dtype, &r);
	return true;
}

/* Adds dim d of another operand into the concat axis' dim *acc. */
static bool concat_add(ir_dim *acc, ir_dim d)
{
	if (d.coef == 0)
		return true;
	if (acc->coef == 0) {
		*acc = d;
		return true;
	}
	if (acc->sym != d.sym)
		return false;
	return !__builtin_add_overflow(acc->coef, d.coef, &acc->coef);
}

static bool infer_concat(infer_cx *c)
{
	const ir_type *a = arg_type(c, 0);
	int32_t ax = c->n->attr.axis;
	if (ax < 0 || ax >= a->rank)
		return fail(c, "axis %d out of range for %s", ax,
			    shape_str(c->m, a).s);
	ir_type r = *a;
	r.dims[ax] = ir_dim_static(0);
	for (uint32_t i = 0; i < c->n->n_args; i++) {
		const ir_type *b = arg_type(c, i);
		if (b->dtype != a->dtype || b->rank != a->rank)
			return fail(c,
				    "operand %u %s does not match operand 0 %s",
				    i, type_str(c->m, b).s, type_str(c->m, a).s);
		for (int k = 0; k < a->rank; k++)
			if (k != ax && !ir_dim_eq(a->dims[k], b->dims[k]))
				return fail(c,
					    "operand %u %s differs from operand "
					    "0 %s outside axis %d",
					    i, shape_str(c->m, b).s,
					    shape_str(c->m, a).s, ax);
		if (!concat_add(&r.dims[ax], b->dims[ax]))
			return fail(c,
				    "cannot add sizes along axis %d: %s and %s",
				    ax, shape_str(c->m, &r).s,
				    shape_str(c->m, b).s);
	}
	set_type(c, a->dtype, &r);
	return true;
}

static bool infer_repeat(infer_cx *c)
{
	const ir_type *x = arg_type(c, 0);
	ir_type r = *x;
	for (int i = 0; i < x->rank; i++) {
		int64_t n = c->n->attr.repeat.reps[i];
		if (n < 0 || !dim_mul(x->dims[i], n, &r.dims[i]))
			return fail(c,
				    "bad repetition count %lld for axis %d of %s",
				    (long long)n, i, shape_str(c->m, x).s);
	}
	set_type(c, x->dtype, &r);
	return true;
}

static bool infer_repeat_interleave(infer_cx *c)
{
	const ir_type *x = arg_type(c, 0);
	int32_t ax = c->n->attr.interleave.axis;
	int64_t n = c->n->attr.interleave.n;
	if (ax < 0 || ax >= x->rank)
		return fail(c, "axis %d out of range for %s", ax,
			    shape_str(c->m, x).s);
	ir_type r = *x;
	if (n < 0 || !dim_mul(x->dims[ax], n, &r.dims[ax]))
		return fail(c, "bad repetition count %lld for %s", (long long)n,
			    shape_str(c->m, x).s);
	set_type(c, x->dtype, &r);
	return true;
}

static bool infer_sort(infer_cx *c)
{
	const ir_type *x = arg_type(c, 0);
	if (!need_numeric(c, 0, "operand"))
		return false;
	if (c->n->attr.axis < 0 || c->n->attr.axis >= x->rank)
		return fail(c, "axis %d out of range for %s", c->n->attr.axis,
			    shape_str(c->m, x).s);
	set_type(c, x->dtype, x);
	return true;
}

/* sort_grad(x, g): x f32, g of x's shape; the result has x's type. */
static bool infer_sort_grad(infer_cx *c)
{
	const ir_type *x = arg_type(c, 0), *g = arg_type(c, 1);
	if (!need_dtype(c, 0, IR_F32, "operand") ||
	    !need_dtype(c, 1, IR_F32, "gradient"))
		return false;
	if (c->n->attr.axis < 0 || c->n->attr.axis >= x->rank)
		return fail(c, "axis %d out of range for %s", c->n->attr.axis,
			    shape_str(c->m, x).s);
	if (!ir_shape_eq(x, g))
		return fail(c, "gradient %s must have the operand's shape %s",
			    shape_str(c->m, g).s, shape_str(c->m, x).s);
	set_type(c, IR_F32, x);
	return true;
}

/* ---- losses ---------------------------------------------------------------------------- */

static bool infer_mse_loss(infer_cx *c)
{
	const ir_type *p = arg_type(c, 0), *t = arg_type(c, 1);
	if (!need_dtype(c, 0, IR_F32, "prediction") ||
	    !need_dtype(c, 1, IR_F32, "target"))
		return false;
	if (!ir_shape_eq(p, t))
		return fail(c, "prediction %s and target %s differ in shape",
			    shape_str(c->m, p).s, shape_str(c->m, t).s);
	ir_type r = {0};
	set_type(c, IR_F32, &r);
	return true;
}

static bool infer_cross_entropy(infer_cx *c)
{
	const ir_type *lg = arg_type(c, 0), *lb = arg_type(c, 1);
	if (!need_dtype(c, 0, IR_F32, "logits") ||
	    !need_dtype(c, 1, IR_I32, "labels"))
		return false;
	bool ok = lg->rank >= 1 && lb->rank + 1 == lg->rank;
	for (int i = 0; ok && i < lb->rank; i++)
		ok = ir_dim_eq(lb->dims[i], lg->dims[i]);
	if (!ok)
		return fail(c,
			    "labels %s must match the leading dims of logits %s",
			    shape_str(c->m, lb).s, shape_str(c->m, lg).s);
	set_type(c, IR_F32, lb);
	return true;
}

/* layer_norm_grad(x, gamma, g): x and gamma as layer_norm's, g of x's
 * shape; the result has x's type. */
static bool infer_layer_norm_grad(infer_cx *c)
{
	const ir_type *x = arg_type(c, 0), *p = arg_type(c, 1),
		      *g = arg_type(c, 2);
	if (!need_dtype(c, 0, IR_F32, "operand") ||
	    !need_dtype(c, 1, IR_F32, "scale") ||
	    !need_dtype(c, 2, IR_F32, "gradient"))
		return false;
	if (x->rank < 1)
		return fail(c, "operand must have rank >= 1: %s",
			    shape_str(c->m, x).s);
	if (p->rank != 1 || !ir_dim_eq(p->dims[0], x->dims[x->rank - 1]))
		return fail(c,
			    "scale must have rank 1 and the size of the last "
			    "axis of %s: %s",
			    shape_str(c->m, x).s, shape_str(c->m, p).s);
	if (!ir_shape_eq(x, g))
		return fail(c, "gradient %s must have the operand's shape %s",
			    shape_str(c->m, g).s, shape_str(c->m, x).s);
	if (!(c->n->attr.eps >= 0))
		return fail(c, "eps must be >= 0, not %g", c->n->attr.eps);
	set_type(c, IR_F32, x);
	return true;
}

/* cross_entropy_grad(logits, labels, g): cross_entropy's operands, and g
 * of exactly the labels' shape; the result has the logits' type. */
static bool infer_cross_entropy_grad(infer_cx *c)
{
	if (!infer_cross_entropy(c) || !need_dtype(c, 2, IR_F32, "gradient"))
		return false;
	const ir_type *lg = arg_type(c, 0), *lb = arg_type(c, 1),
		      *g = arg_type(c, 2);
	if (!ir_shape_eq(lb, g))
		return fail(c, "gradient %s must have the labels' shape %s",
			    shape_str(c->m, g).s, shape_str(c->m, lb).s);
	set_type(c, IR_F32, lg);
	return true;
}

/* cross_entropy_with_grad(logits, labels, g): cross_entropy_grad's
 * operands; the result stacks two of the logits' shape: f32[2, ...]. */
static bool infer_cross_entropy_with_grad(infer_cx *c)
{
	if (!infer_cross_entropy_grad(c))
		return false;
	const ir_type *lg = arg_type(c, 0);
	if (lg->rank >= IR_MAX_RANK)
		return fail(c, "logits %s have too many dims to stack two",
			    shape_str(c->m, lg).s);
	ir_type r = {.dtype = IR_F32,
		     .rank = (uint8_t)(lg->rank + 1),
		     .dims = {ir_dim_static(2)}};
	for (int i = 0; i < lg->rank; i++)
		r.dims[i + 1] = lg->dims[i];
	set_type(c, IR_F32, &r);
	return true;
}

/* ---- fused attention ------------------------------------------------------------------- */

bool ir_type_numel_dim(const ir_module *m, const ir_type *t, ir_dim *out)
{
	int32_t syms[IR_MAX_RANK];
	uint32_t n = 0;
	ir_dim r = ir_dim_static(1);
	for (int i = 0; i < t->rank; i++) {
		ir_dim d = t->dims[i];
		if (!dim_mul(r, d.coef, &r))
			return false;
		if (!ir_dim_is_static(d) && d.coef != 0)
			syms[n++] = d.sym;
	}
	if (r.coef != 0 && n == 1)
		r.sym = syms[0];
	else if (r.coef != 0 && n > 1) /* [B, T, 4]: 4*B*T, if m has B*T */
		r.sym = m ? ir_module_find_product_sym(m, syms, n) : -1;
	if (r.coef != 0 && n > 0 && r.sym < 0)
		return false;
	*out = r;
	return true;
}

bool ir_attention_grad_size(const ir_module *m, const ir_type *q,
			    const ir_type *k, const ir_type *v, ir_dim *out)
{
	const ir_type *ts[3] = {q, k, v};
	ir_dim total = ir_dim_static(0), part;
	for (int i = 0; i < 3; i++)
		if (!ir_type_numel_dim(m, ts[i], &part) ||
		    !concat_add(&total, part))
			return false;
	*out = total;
	return true;
}

/* q (N, Q, d), k (N, K, d), v (N, K, dv), then valid (rank 1 or 2, size-1
 * dims stretching) when the node has n_fixed + 1 operands. With h heads
 * N is the batch B and d, dv are h times a head's width (docs/ops.md). */
static bool attention_operands(const infer_cx *c, uint32_t n_fixed,
			       bool *has_valid)
{
	static const char *const names[3] = {"queries", "keys", "values"};
	if (c->n->n_args != n_fixed && c->n->n_args != n_fixed + 1)
		return fail(c, "expects %u or %u operands, got %u", n_fixed,
			    n_fixed + 1, c->n->n_args);
	*has_valid = c->n->n_args == n_fixed + 1;
	for (uint32_t i = 0; i < 3; i++) {
		if (!need_dtype(c, i, IR_F32, names[i]))
			return false;
		if (arg_type(c, i)->rank != 3)
			return fail(c, "%s must have rank 3: %s", names[i],
				    shape_str(c->m, arg_type(c, i)).s);
	}
	const ir_type *q = arg_type(c, 0), *k = arg_type(c, 1),
		      *v = arg_type(c, 2);
	if (!ir_dim_eq(q->dims[0], k->dims[0]) ||
	    !ir_dim_eq(q->dims[0], v->dims[0]) ||
	    !ir_dim_eq(q->dims[2], k->dims[2]) ||
	    !ir_dim_eq(k->dims[1], v->dims[1]))
		return fail(c,
			    "queries %s, keys %s and values %s do not fit "
			    "(N, Q, d), (N, K, d), (N, K, dv)",
			    shape_str(c->m, q).s, shape_str(c->m, k).s,
			    shape_str(c->m, v).s);
	if (!*has_valid)
		return true;
	const ir_type *vl = arg_type(c, 3);
	if (!need_dtype(c, 3, IR_I32, "valid lengths"))
		return false;
	bool ok = vl->rank == 1 || vl->rank == 2;
	for (int i = 0; ok && i < vl->rank; i++)
		ok = ir_dim_eq(vl->dims[i], q->dims[i]) ||
		     dim_is_one(vl->dims[i]);
	if (!ok)
		return fail(c,
			    "valid lengths %s must be (N) or (N, Q) for "
			    "queries %s",
			    shape_str(c->m, vl).s, shape_str(c->m, q).s);
	return true;
}

/* With h heads side by side the last dims of q (and k) and v hold h
 * heads each: static multiples of h. */
static bool attention_heads(const infer_cx *c)
{
	uint32_t h = c->n->attr.attention.heads;
	if (h < 1)
		return fail(c, "heads must be at least 1, not %u", h);
	if (h == 1)
		return true;
	ir_dim qd = arg_type(c, 0)->dims[2], vd = arg_type(c, 2)->dims[2];
	if (!ir_dim_is_static(qd) || !ir_dim_is_static(vd) ||
	    qd.coef % h != 0 || vd.coef % h != 0)
		return fail(c,
			    "queries %s and values %s must have a last dim that "
			    "is a multiple of the %u heads",
			    shape_str(c->m, arg_type(c, 0)).s,
			    shape_str(c->m, arg_type(c, 2)).s, h);
	return true;
}

/* The attributes of an attention; additive attention has no heads
 * (its heads attribute must say 1). */
static bool attention_attrs(const infer_cx *c, bool is_additive)
{
	if (is_additive && c->n->attr.attention.heads != 1)
		return fail(c, "additive attention has one head, not %u",
			    c->n->attr.attention.heads);
	if (!is_additive && !attention_heads(c))
		return false;
	double p = c->n->attr.attention.p;
	if (!(p >= 0 && p < 1))
		return fail(c, "dropout probability must be in [0, 1), not %g",
			    p);
	if (!isfinite(c->n->attr.attention.scale))
		return fail(c, "scale must be finite, not %g",
			    c->n->attr.attention.scale);
	return true;
}

/* The result of a fused attention: the queries' (N, Q) by the values'
 * (operand vi) width. */
static ir_type attention_result(infer_cx *c, uint32_t vi)
{
	ir_type r = *arg_type(c, 0);
	r.dims[2] = arg_type(c, vi)->dims[2];
	return r;
}

/* The gradient (operand gi) of a fused attention whose values are
 * operand vi: f32 of the forward result's shape. */
static bool attention_grad_operand(infer_cx *c, uint32_t gi, uint32_t vi)
{
	const ir_type *g = arg_type(c, gi);
	ir_type want = attention_result(c, vi);
	if (!need_dtype(c, gi, IR_F32, "gradient"))
		return false;
	if (!ir_shape_eq(g, &want))
		return fail(c, "gradient %s must have the result's shape %s",
			    shape_str(c->m, g).s, shape_str(c->m, &want).s);
	return true;
}

static bool infer_fused_attention(infer_cx *c)
{
	bool has_valid;
	if (!attention_operands(c, 3, &has_valid) || !attention_attrs(c, false))
		return false;
	ir_type r = attention_result(c, 2);
	set_type(c, IR_F32, &r);
	return true;
}

/* The gradient g has the forward result's shape; the result packs dq, dk
 * and dv in one axis, so their sizes must add up to one dim. */
static bool infer_fused_attention_grad(infer_cx *c)
{
	bool has_valid;
	if (!attention_operands(c, 4, &has_valid) || !attention_attrs(c, false))
		return false;
	const ir_type *q = arg_type(c, 0), *v = arg_type(c, 2);
	if (!attention_grad_operand(c, has_valid ? 4 : 3, 2))
		return false;
	ir_dim total;
	if (!ir_attention_grad_size(c->m, q, arg_type(c, 1), v, &total))
		return fail(c,
			    "the sizes of queries %s, keys %s and values %s "
			    "do not add up to one dimension (at most one "
			    "run-time size, the same in all)",
			    shape_str(c->m, q).s,
			    shape_str(c->m, arg_type(c, 1)).s,
			    shape_str(c->m, v).s);
	ir_type r = {.dtype = IR_F32, .rank = 1, .dims = {total}};
	set_type(c, IR_F32, &r);
	return true;
}

/* ---- fused additive attention ------------------------------------------------------------ */

bool ir_additive_grad_size(const ir_module *m, const ir_type *qp,
			   const ir_type *kp, const ir_type *v, ir_dim *out)
{
	ir_type wv = {.dtype = IR_F32,
		      .rank = 2,
		      .dims = {qp->dims[0], qp->dims[2]}};
	const ir_type *ts[4] = {qp, kp, &wv, v};
	ir_dim total = ir_dim_static(0), part;
	for (int i = 0; i < 4; i++)
		if (!ir_type_numel_dim(m, ts[i], &part) ||
		    !concat_add(&total, part))
			return false;
	*out = total;
	return true;
}

/* valid lengths (operand i): rank 1 or 2, (N) or (N, Q) of the result's
 * leading dims, size-1 dims stretching. */
static bool valid_operand(const infer_cx *c, uint32_t i, const ir_type *q)
{
	const ir_type *vl = arg_type(c, i);
	if (!need_dtype(c, i, IR_I32, "valid lengths"))
		return false;
	bool ok = vl->rank == 1 || vl->rank == 2;
	for (int d = 0; ok && d < vl->rank; d++)
		ok = ir_dim_eq(vl->dims[d], q->dims[d]) ||
		     dim_is_one(vl->dims[d]);
	if (!ok)
		return fail(c,
			    "valid lengths %s must be (N) or (N, Q) for "
			    "queries %s",
			    shape_str(c->m, vl).s, shape_str(c->m, q).s);
	return true;
}

/* qp (N, Q, H), kp (N, K, H), wv (H), v (N, K, dv), then valid when the
 * node has n_fixed + 1 operands. */
static bool additive_operands(const infer_cx *c, uint32_t n_fixed,
			      bool *has_valid)
{
	static const char *const names[4] = {"query projections",
					     "key projections",
					     "scoring vector", "values"};
	static const int ranks[4] = {3, 3, 1, 3};
	if (c->n->n_args != n_fixed && c->n->n_args != n_fixed + 1)
		return fail(c, "expects %u or %u operands, got %u", n_fixed,
			    n_fixed + 1, c->n->n_args);
	*has_valid = c->n->n_args == n_fixed + 1;
	for (uint32_t i = 0; i < 4; i++) {
		if (!need_dtype(c, i, IR_F32, names[i]))
			return false;
		if (arg_type(c, i)->rank != ranks[i])
			return fail(c, "%s must have rank %d: %s", names[i],
				    ranks[i], shape_str(c->m, arg_type(c, i)).s);
	}
	const ir_type *q = arg_type(c, 0), *k = arg_type(c, 1),
		      *w = arg_type(c, 2), *v = arg_type(c, 3);
	if (!ir_dim_eq(q->dims[0], k->dims[0]) ||
	    !ir_dim_eq(q->dims[0], v->dims[0]) ||
	    !ir_dim_eq(q->dims[2], k->dims[2]) ||
	    !ir_dim_eq(q->dims[2], w->dims[0]) ||
	    !ir_dim_eq(k->dims[1], v->dims[1]))
		return fail(c,
			    "query projections %s, key projections %s, "
			    "scoring vector %s and values %s do not fit "
			    "(N, Q, H), (N, K, H), (H), (N, K, dv)",
			    shape_str(c->m, q).s, shape_str(c->m, k).s,
			    shape_str(c->m, w).s, shape_str(c->m, v).s);
	return !*has_valid || valid_operand(c, 4, q);
}

static bool infer_fused_additive_attention(infer_cx *c)
{
	bool has_valid;
	if (!additive_operands(c, 4, &has_valid) || !attention_attrs(c, true))
		return false;
	ir_type r = attention_result(c, 3);
	set_type(c, IR_F32, &r);
	return true;
}

/* The gradient g has the forward result's shape; the result packs dqp,
 * dkp, dwv per batch and dv in one axis. */
static bool infer_fused_additive_attention_grad(infer_cx *c)
{
	bool has_valid;
	if (!additive_operands(c, 5, &has_valid) || !attention_attrs(c, true))
		return false;
	const ir_type *q = arg_type(c, 0), *k = arg_type(c, 1),
		      *v = arg_type(c, 3);
	if (!attention_grad_operand(c, has_valid ? 5 : 4, 3))
		return false;
	ir_dim total;
	if (!ir_additive_grad_size(c->m, q, k, v, &total))
		return fail(c,
			    "the sizes of query projections %s, key "
			    "projections %s and values %s do not add up to "
			    "one dimension (at most one run-time size, the "
			    "same in all)",
			    shape_str(c->m, q).s, shape_str(c->m, k).s,
			    shape_str(c->m, v).s);
	ir_type r = {.dtype = IR_F32, .rank = 1, .dims = {total}};
	set_type(c, IR_F32, &r);
	return true;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

/* The ops of the elementwise families: one rule per family; IR_OPF_INT
 * says which admit i32 operands. */
static bool infer_elementwise(infer_cx *c)
{
	const ir_op_info *info = &ir_op_table[c->n->op];
	bool is_int_ok = info->flags & IR_OPF_INT;
	switch (info->family) {
	case IR_FAM_UNARY:
		return infer_unary(c, is_int_ok);
	case IR_FAM_BINARY:
		return infer_binary(c, !is_int_ok, -1);
	case IR_FAM_COMPARE:
		return infer_binary(c, false, IR_I32);
	case IR_FAM_LEAF:
	case IR_FAM_CAST:
	case IR_FAM_SELECT:
	case IR_FAM_MATMUL:
	case IR_FAM_REDUCE:
	case IR_FAM_NORM:
	case IR_FAM_INDEX:
	case IR_FAM_LAYOUT:
	case IR_FAM_LOSS:
	case IR_FAM_FUSED:
		break;
	}
	return fail(c, "op %s is not elementwise", info->name);
}

static bool infer_op(infer_cx *c)
{
	switch (c->n->op) {
	case IR_OP_INPUT:
		return infer_leaf_type(c);
	case IR_OP_PARAM:
		return infer_param(c);
	case IR_OP_CONST:
		return infer_const(c);
	case IR_OP_ARANGE:
		return infer_arange(c);
#include "ops_ew.def"
		return infer_elementwise(c);
	case IR_OP_CAST:
		return infer_cast(c);
	case IR_OP_SELECT:
		return infer_select(c);
	case IR_OP_MATMUL:
		return infer_matmul(c);
	case IR_OP_SUM:
	case IR_OP_MEAN:
	case IR_OP_MAX:
		return infer_reduce(c, false);
	case IR_OP_ARGMAX:
	case IR_OP_ARGMIN:
		return infer_reduce(c, true);
	case IR_OP_SOFTMAX:
	case IR_OP_LOG_SOFTMAX:
		return infer_softmax(c);
	case IR_OP_MASKED_SOFTMAX:
		return infer_masked_softmax(c);
	case IR_OP_LAYER_NORM:
		return infer_layer_norm(c);
	case IR_OP_LAYER_NORM_GRAD:
		return infer_layer_norm_grad(c);
	case IR_OP_DROPOUT:
		return infer_dropout(c);
	case IR_OP_EMBEDDING:
		return infer_embedding(c);
	case IR_OP_ONE_HOT:
		return infer_one_hot(c);
	case IR_OP_EMBEDDING_GRAD:
		return infer_embedding_grad(c);
	case IR_OP_RESHAPE:
		return infer_reshape(c);
	case IR_OP_BROADCAST:
		return infer_broadcast(c);
	case IR_OP_PERMUTE:
		return infer_permute(c);
	case IR_OP_SLICE:
		return infer_slice(c);
	case IR_OP_CONCAT:
		return infer_concat(c);
	case IR_OP_REPEAT:
		return infer_repeat(c);
	case IR_OP_REPEAT_INTERLEAVE:
		return infer_repeat_interleave(c);
	case IR_OP_SORT:
		return infer_sort(c);
	case IR_OP_SORT_GRAD:
		return infer_sort_grad(c);
	case IR_OP_MSE_LOSS:
		return infer_mse_loss(c);
	case IR_OP_CROSS_ENTROPY:
		return infer_cross_entropy(c);
	case IR_OP_CROSS_ENTROPY_GRAD:
		return infer_cross_entropy_grad(c);
	case IR_OP_CROSS_ENTROPY_WITH_GRAD:
		return infer_cross_entropy_with_grad(c);
	case IR_OP_FUSED_ATTENTION:
		return infer_fused_attention(c);
	case IR_OP_FUSED_ATTENTION_GRAD:
		return infer_fused_attention_grad(c);
	case IR_OP_FUSED_ADDITIVE_ATTENTION:
		return infer_fused_additive_attention(c);
	case IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD:
		return infer_fused_additive_attention_grad(c);
	case IR_OP_COUNT:
		break;
	}
	return fail(c, "unknown op %d", (int)c->n->op);
}

static bool infer_node(infer_cx *c)
{
	if ((unsigned)c->n->op >= IR_OP_COUNT) {
		if (c->msg)
			snprintf(c->msg, c->msg_size, "unknown op %d",
				 (int)c->n->op);
		else
			ir_error(c->ctx, c->n->loc, "unknown op %d",
				 (int)c->n->op);
		return false;
	}
	return check_operands(c) && infer_op(c);
}

bool ir_infer_type(ir_ctx *ctx, const ir_module *m, const ir_graph *g,
		   ir_node *node)
{
	infer_cx c = {ctx, m, g, node, NULL, 0};
	return infer_node(&c);
}

bool ir_infer_type_msg(const ir_module *m, const ir_graph *g, ir_node *node,
		       char *msg, size_t size)
{
	infer_cx c = {m->ctx, m, g, node, msg, size};
	msg[0] = '\0';
	return infer_node(&c);
}
