/*
 * fuse_match.c - finding the attentions to fuse (fuse_attention.h).
 *
 * The forward chain is read from the softmax outwards: its input back
 * through an optional scale by a constant to the matmul of queries and
 * keys, its users forward through an optional dropout to the matmul with
 * the values. A transposing permute on an operand counts as a transpose
 * flag. Every intermediate must be used by the chain alone and be no
 * output.
 *
 * In a gradient function the weights have more users: the nodes the
 * gradient rules of grad.c made for the chain (softmax, masked softmax,
 * dropout, mul or div, matmul). They are recognized as those rules build
 * them, after simplify and cse, and only then: each node is checked for
 * its op, operands and single use, so whatever else uses the weights
 * still blocks the fusion.
 */
#include "fuse_attention.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- uses --------------------------------------------------------------- */

bool fz_uses_build(ir_ctx *ctx, const ir_func *f, fz_uses *u)
{
	const ir_graph *g = &f->g;
	uint32_t n = g->n_nodes;
	u->start = ir_alloc(ctx, (n + 2) * sizeof *u->start);
	u->list = ir_alloc(ctx, (g->n_args + 1) * sizeof *u->list);
	u->output = ir_alloc(ctx, (n + 1) * sizeof *u->output);
	if (!u->start || !u->list || !u->output)
		return false;
	for (uint32_t i = 0; i < g->n_args; i++)
		u->start[g->args[i] + 2]++;
	for (uint32_t i = 0; i < n; i++)
		u->start[i + 2] += u->start[i + 1];
	for (ir_id i = 0; i < n; i++)
		for (uint32_t a = 0; a < g->nodes[i].n_args; a++)
			u->list[u->start[ir_arg(g, i, a) + 1]++] = i;
	for (uint32_t i = 0; i < n; i++)
		u->output[i] = -1;
	for (uint32_t o = f->n_outputs; o-- > 0;)
		u->output[f->outputs[o]] = (int32_t)o;
	return true;
}

void fz_uses_fini(ir_ctx *ctx, fz_uses *u)
{
	ir_free(ctx, u->start);
	ir_free(ctx, u->list);
	ir_free(ctx, u->output);
}

static uint32_t n_uses(const fz_uses *u, ir_id id)
{
	return u->start[id + 1] - u->start[id];
}

static ir_id use_at(const fz_uses *u, ir_id id, uint32_t k)
{
	return u->list[u->start[id] + k];
}

/* The one user of id, or IR_NONE if it has another number of uses or is
 * an output. */
static ir_id only_user(const fz_uses *u, ir_id id)
{
	return n_uses(u, id) == 1 && u->output[id] < 0 ? use_at(u, id, 0)
							: IR_NONE;
}

/* ---- nodes ----------------------------------------------------------------- */

typedef struct cx {
	const ir_module *m;
	const ir_func *f;
	const fz_uses *u;
	fz_match *mt;
} cx;

static const ir_node *node(const cx *c, ir_id id)
{
	return &c->f->g.nodes[id];
}

static ir_op op(const cx *c, ir_id id)
{
	return c->f->g.nodes[id].op;
}

static ir_id arg(const cx *c, ir_id id, uint32_t i)
{
	return ir_arg(&c->f->g, id, i);
}

/* "%12 (add)", for messages. */
typedef struct nm {
	char s[48];
} nm;

static nm name_of(const cx *c, ir_id id)
{
	nm r;
	snprintf(r.s, sizeof r.s, "%%%u (%s)", id, ir_op_table[op(c, id)].name);
	return r;
}

static bool nope(const cx *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static bool nope(const cx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->mt->why, sizeof c->mt->why, fmt, ap);
	va_end(ap);
	return false;
}

/* True if id is a CONST whose elements (at least one) all equal; *v gets
 * the value. */
static bool const_value(const cx *c, ir_id id, double *v)
{
	const ir_node *n = node(c, id);
	if (n->op != IR_OP_CONST || n->attr.const_index >= c->m->n_consts)
		return false;
	const ir_const *k = &c->m->consts[n->attr.const_index];
	int64_t count = ir_type_numel_static(&k->type);
	for (int64_t i = 0; i < count; i++) {
		double x = k->type.dtype == IR_F32 ? ((const float *)k->data)[i]
			   : k->type.dtype == IR_I32 ? ((const int32_t *)k->data)[i]
						     : ((const double *)k->data)[i];
		if (i == 0)
			*v = x;
		else if (x != *v)
			return false;
	}
	return count > 0;
}

static bool same_type(const cx *c, ir_id a, ir_id b)
{
	return ir_type_eq(&node(c, a)->type, &node(c, b)->type);
}

static bool is_last_two_swap(const cx *c, ir_id id)
{
	const ir_node *n = node(c, id);
	if (n->op != IR_OP_PERMUTE || n->type.rank != 3)
		return false;
	const uint8_t *p = n->attr.permute.perm;
	return p[0] == 0 && p[1] == 2 && p[2] == 1;
}

/* An operand read through a transposing permute: the permute's input,
 * with *is_t toggled. */
static ir_id through_transpose(const cx *c, ir_id x, bool *is_t)
{
	if (!is_last_two_swap(c, x))
		return x;
	*is_t = !*is_t;
	return arg(c, x, 0);
}

/* A node's one user, looking past reshapes and broadcasts that change
 * nothing (what simplify removes); IR_NONE unless exactly one. *from
 * gets the operand the user reads (id or the last of those). */
static ir_id next_user(const cx *c, ir_id id, ir_id *from)
{
	ir_id n = only_user(c->u, id);
	*from = id;
	while (n != IR_NONE &&
	       (op(c, n) == IR_OP_BROADCAST || op(c, n) == IR_OP_RESHAPE) &&
	       same_type(c, n, id)) {
		*from = n;
		n = only_user(c->u, n);
	}
	return n;
}

/* ---- the forward chain ------------------------------------------------------- */

/* x = S0 * c, c * S0 or S0 / c with c a constant of equal elements that
 * does not broadcast S0: records the scale and returns S0; else x. */
static ir_id match_scale(const cx *c, ir_id x)
{
	fz_match *mt = c->mt;
	double v;
	ir_op o = op(c, x);
	if (o != IR_OP_MUL && o != IR_OP_DIV)
		return x;
	for (uint32_t side = 0; side < (o == IR_OP_MUL ? 2u : 1u); side++) {
		ir_id k = arg(c, x, 1 - side), s = arg(c, x, side);
		if (!const_value(c, k, &v) || !same_type(c, x, s))
			continue;
		if (o == IR_OP_DIV && (v == 0 || !(v == v)))
			continue;
		mt->scaled = x;
		mt->scale_c = v;
		mt->scale = o == IR_OP_DIV ? 1.0 / v : v;
		return s;
	}
	return x;
}

/* Node id (of the chain) is used only by user and is no output. */
static bool used_only_by(const cx *c, ir_id id, ir_id user, const char *what)
{
	if (c->u->output[id] >= 0)
		return nope(c, "the %s %s are output %d of @%s", what,
			    name_of(c, id).s, c->u->output[id], c->f->name);
	for (uint32_t k = 0; k < n_uses(c->u, id); k++)
		if (use_at(c->u, id, k) != user)
			return nope(c, "the %s %s are also used by %s", what,
				    name_of(c, id).s,
				    name_of(c, use_at(c->u, id, k)).s);
	return true;
}

/* The scores: matmul(Q, K^T) of rank-3 operands of one batch size. */
static bool match_scores(const cx *c, ir_id x)
{
	fz_match *mt = c->mt;
	x = match_scale(c, x);
	mt->scores = x;
	if (op(c, x) != IR_OP_MATMUL)
		return nope(c, "its scores come from %s, not from a matmul of "
			       "queries and keys", name_of(c, x).s);
	if (mt->scaled != IR_NONE &&
	    (!used_only_by(c, mt->scaled, mt->sm, "scaled scores") ||
	     !used_only_by(c, x, mt->scaled, "scores")))
		return false;
	if (mt->scaled == IR_NONE && !used_only_by(c, x, mt->sm, "scores"))
		return false;
	const ir_node *s = node(c, x);
	mt->q_t = s->attr.matmul.ta;
	mt->k_t = !s->attr.matmul.tb;
	mt->q = through_transpose(c, arg(c, x, 0), &mt->q_t);
	mt->k = through_transpose(c, arg(c, x, 1), &mt->k_t);
	const ir_type *qt = &node(c, mt->q)->type, *kt = &node(c, mt->k)->type;
	if (qt->rank != 3 || kt->rank != 3 ||
	    !ir_dim_eq(qt->dims[0], kt->dims[0]))
		return nope(c, "the scores %s multiply operands that are not "
			       "(N, Q, d) and (N, K, d) of one N",
			    name_of(c, x).s);
	return true;
}

/* The output x becomes through layout ops alone (a reshape, a stack of
 * heatmaps), or -1. */
static int32_t output_through_layout(const cx *c, ir_id x, int depth)
{
	if (c->u->output[x] >= 0)
		return c->u->output[x];
	for (uint32_t k = 0; depth > 0 && k < n_uses(c->u, x); k++) {
		ir_id y = use_at(c->u, x, k);
		ir_op o = op(c, y);
		bool is_layout = o == IR_OP_RESHAPE || o == IR_OP_PERMUTE ||
				 o == IR_OP_CONCAT || o == IR_OP_SLICE ||
				 o == IR_OP_BROADCAST;
		int32_t out = is_layout ? output_through_layout(c, y, depth - 1) : -1;
		if (out >= 0)
			return out;
	}
	return -1;
}

/* Weights w are also used by x, which blocks the fusion. */
static bool other_use(const cx *c, ir_id w, ir_id x)
{
	int32_t o = output_through_layout(c, x, 8);
	if (o < 0)
		return nope(c, "the weights %s are also used by %s",
			    name_of(c, w).s, name_of(c, x).s);
	return nope(c, "the weights %s are also used by %s, which becomes output "
		       "%d (%s) of @%s: fusing would lose them",
		    name_of(c, w).s, name_of(c, x).s, o,
		    c->f->output_names && c->f->output_names[o]
			    ? c->f->output_names[o] : "unnamed",
		    c->f->name);
}

/* The users of the weights: a dropout, the matmul with the values
 * (weights on the left, untransposed), and in a gradient function the
 * backward nodes: those are collected in bwd[] for match_grad. */
static bool sort_users(const cx *c, ir_id w, ir_id *bwd, uint32_t *n_bwd)
{
	fz_match *mt = c->mt;
	for (uint32_t k = 0; k < n_uses(c->u, w); k++) {
		ir_id x = use_at(c->u, w, k);
		const ir_node *n = node(c, x);
		bool is_left = n->op == IR_OP_MATMUL && arg(c, x, 0) == w &&
			       arg(c, x, 1) != w;
		if (n->op == IR_OP_DROPOUT && w == mt->sm && mt->drop == IR_NONE) {
			mt->drop = x;
		} else if (is_left && !n->attr.matmul.ta && mt->out == IR_NONE &&
			   (w != mt->sm || mt->drop == IR_NONE)) {
			mt->out = x;
		} else if ((is_left && n->attr.matmul.ta) ||
			   (n->op == IR_OP_MUL && w == mt->sm)) {
			if (*n_bwd == 8)
				return other_use(c, w, x);
			bwd[(*n_bwd)++] = x;
		} else {
			return other_use(c, w, x);
		}
	}
	return true;
}

static bool match_weights(const cx *c, ir_id *bwd, uint32_t *n_bwd)
{
	fz_match *mt = c->mt;
	int32_t o = c->u->output[mt->sm];
	if (o >= 0)
		return nope(c, "the weights are output %d (%s) of @%s: fusing "
			       "would lose them", o,
			    c->f->output_names && c->f->output_names[o]
				    ? c->f->output_names[o] : "unnamed",
			    c->f->name);
	if (!sort_users(c, mt->sm, bwd, n_bwd))
		return false;
	if (mt->drop != IR_NONE) {
		if (mt->out != IR_NONE)
			return nope(c, "the weights are also used by %s besides "
				       "their dropout", name_of(c, mt->out).s);
		if (c->u->output[mt->drop] >= 0)
			return nope(c, "the dropped weights %s are output %d of "
				       "@%s", name_of(c, mt->drop).s,
				    c->u->output[mt->drop], c->f->name);
		if (!sort_users(c, mt->drop, bwd, n_bwd))
			return false;
	}
	if (mt->out == IR_NONE)
		return nope(c, "the weights are not multiplied with values (no "
			       "matmul takes them as its left operand)");
	return true;
}

/* The product with the values: V (N, K, dv) of the scores' N and K. */
static bool match_values(const cx *c)
{
	fz_match *mt = c->mt;
	const ir_node *o = node(c, mt->out);
	mt->v_t = o->attr.matmul.tb;
	mt->v = through_transpose(c, arg(c, mt->out, 1), &mt->v_t);
	const ir_type *vt = &node(c, mt->v)->type, *kt = &node(c, mt->k)->type;
	ir_dim vk = vt->dims[mt->v_t ? 2 : 1], kk = kt->dims[mt->k_t ? 2 : 1];
	if (vt->rank != 3 || !ir_dim_eq(vt->dims[0], kt->dims[0]) ||
	    !ir_dim_eq(vk, kk))
		return nope(c, "the values of %s are not (N, K, dv) for the "
			       "keys' N and K", name_of(c, mt->out).s);
	return true;
}

/* ---- the backward chain --------------------------------------------------------- */

/* id is a RESHAPE of valid to rank 3 with size-1 dims appended. */
static bool is_valid_reshape(const cx *c, ir_id id)
{
	const ir_node *n = node(c, id);
	if (n->op != IR_OP_RESHAPE || arg(c, id, 0) != c->mt->valid)
		return false;
	const ir_type *vt = &node(c, c->mt->valid)->type;
	if (n->type.rank != 3)
		return false;
	for (int i = 0; i < 3; i++) {
		ir_dim want = i < vt->rank ? vt->dims[i] : ir_dim_static(1);
		if (!ir_dim_eq(n->type.dims[i], want))
			return false;
	}
	return true;
}

static bool is_const_of(const cx *c, ir_id id, double v)
{
	double x;
	return const_value(c, id, &x) && x == v;
}

/* cast(lt([0, 1, .., K-1], reshape(valid))): grad_build.c's mask over a
 * static K. */
static bool is_static_mask(const cx *c, ir_id lt, int64_t K)
{
	if (op(c, lt) != IR_OP_LT || !is_valid_reshape(c, arg(c, lt, 1)))
		return false;
	const ir_node *pos = node(c, arg(c, lt, 0));
	if (pos->op != IR_OP_CONST || pos->type.rank != 1 ||
	    pos->type.dtype != IR_I32 || pos->type.dims[0].coef != K)
		return false;
	const int32_t *v = c->m->consts[pos->attr.const_index].data;
	for (int64_t i = 0; i < K; i++)
		if (v[i] != i)
			return false;
	return true;
}

/* cast(gt(masked_softmax(zeros, valid), 0) * gt(reshape(valid), 0)): the
 * mask over a symbolic K. */
static bool is_symbolic_mask(const cx *c, ir_id mul)
{
	if (op(c, mul) != IR_OP_MUL)
		return false;
	for (uint32_t side = 0; side < 2; side++) {
		ir_id a = arg(c, mul, side), b = arg(c, mul, 1 - side);
		if (op(c, a) != IR_OP_GT || op(c, b) != IR_OP_GT ||
		    !is_const_of(c, arg(c, a, 1), 0) ||
		    !is_const_of(c, arg(c, b, 1), 0) ||
		    !is_valid_reshape(c, arg(c, b, 0)))
			continue;
		ir_id ms = arg(c, a, 0), z = IR_NONE;
		if (op(c, ms) != IR_OP_MASKED_SOFTMAX || arg(c, ms, 1) != c->mt->valid)
			continue;
		z = arg(c, ms, 0);
		if (op(c, z) == IR_OP_BROADCAST)
			z = arg(c, z, 0);
		if (is_const_of(c, z, 0))
			return true;
	}
	return false;
}

/* The mask (k < valid) the masked softmax rule multiplies by. */
static bool is_valid_mask(const cx *c, ir_id mask)
{
	if (op(c, mask) != IR_OP_CAST || node(c, mask)->type.dtype != IR_F32)
		return false;
	ir_id x = arg(c, mask, 0);
	ir_dim K = node(c, c->mt->sm)->type.dims[2];
	if (ir_dim_is_static(K))
		return is_static_mask(c, x, K.coef);
	return is_symbolic_mask(c, x);
}

/* The other operand of binary node x when one is `one`; IR_NONE if
 * neither is. */
static ir_id other_operand(const cx *c, ir_id x, ir_id one)
{
	if (arg(c, x, 0) == one)
		return arg(c, x, 1);
	if (arg(c, x, 1) == one)
		return arg(c, x, 0);
	return IR_NONE;
}

/* The softmax rule y (g - sum(g y)): t = g*y, s = sum(t), u = g - s,
 * w = y*u, given the two muls that use y = the weights. Returns g (the
 * weights' gradient) and the rule's result in *w_out. */
static ir_id match_softmax_grad(const cx *c, const ir_id *muls, ir_id *w_out)
{
	ir_id y = c->mt->sm;
	for (int k = 0; k < 2; k++) {
		ir_id t = muls[k], w = muls[1 - k];
		ir_id g = other_operand(c, t, y), s = only_user(c->u, t);
		if (g == IR_NONE || s == IR_NONE || op(c, s) != IR_OP_SUM ||
		    node(c, s)->attr.reduce.axes != 4u ||
		    !node(c, s)->attr.reduce.keepdim)
			continue;
		ir_id u = only_user(c->u, s);
		if (u == IR_NONE || op(c, u) != IR_OP_SUB || arg(c, u, 0) != g ||
		    arg(c, u, 1) != s || only_user(c->u, u) != w ||
		    other_operand(c, w, y) != u || c->u->output[w] >= 0)
			continue;
		bool uses_ok = n_uses(c->u, g) == 2 && c->u->output[g] < 0;
		for (uint32_t i = 0; uses_ok && i < 2; i++) {
			ir_id x = use_at(c->u, g, i);
			uses_ok = x == t || x == u;
		}
		if (!uses_ok)
			continue;
		*w_out = w;
		return g;
	}
	return IR_NONE;
}

/* g_w (the weights' gradient) back to the output's gradient G: through
 * the dropout rule (the same dropout of dP) and the matmul rule's
 * G V^T. */
static ir_id match_g(const cx *c, ir_id gw)
{
	fz_match *mt = c->mt;
	ir_id gpd = gw;
	if (mt->drop != IR_NONE) {
		const ir_node *d = node(c, gw), *fd = node(c, mt->drop);
		if (d->op != IR_OP_DROPOUT || d->attr.dropout.p != fd->attr.dropout.p ||
		    d->attr.dropout.stream != fd->attr.dropout.stream)
			return IR_NONE;
		gpd = arg(c, gw, 0);
		if (only_user(c->u, gpd) != gw)
			return IR_NONE;
	}
	const ir_node *n = node(c, gpd);
	if (n->op != IR_OP_MATMUL || n->attr.matmul.ta || !n->attr.matmul.tb ||
	    arg(c, gpd, 1) != arg(c, mt->out, 1) ||
	    !same_type(c, arg(c, gpd, 0), mt->out))
		return IR_NONE;
	return arg(c, gpd, 0);
}

/* x is op(from, c) (or, for MUL, op(c, from)) with c a constant of the
 * forward scale's value. */
static bool is_scale_rule(const cx *c, ir_id x, ir_id from)
{
	const ir_node *sc = node(c, c->mt->scaled), *n = node(c, x);
	double v;
	if (n->op != sc->op)
		return false;
	for (uint32_t side = 0; side < (n->op == IR_OP_MUL ? 2u : 1u); side++)
		if (arg(c, x, side) == from &&
		    const_value(c, arg(c, x, 1 - side), &v) && v == c->mt->scale_c)
			return same_type(c, x, c->mt->scores);
	return false;
}

/* From the rule's result w on to the scores' gradient: the mask, the
 * scale's rule; returns that gradient or IR_NONE. */
static ir_id match_to_scores(const cx *c, ir_id w)
{
	fz_match *mt = c->mt;
	ir_id from, x = next_user(c, w, &from);
	if (x != IR_NONE && mt->valid != IR_NONE) {
		ir_id mask = other_operand(c, x, from);
		if (mask == IR_NONE || op(c, x) != IR_OP_MUL || !is_valid_mask(c, mask))
			return IR_NONE;
		x = next_user(c, x, &from);
	}
	if (x == IR_NONE || mt->scaled == IR_NONE)
		return x;
	return is_scale_rule(c, x, from) ? x : IR_NONE;
}

/* The users of the scores' gradient: dQ = gS K and dK = gS^T Q, for the
 * plain matmul(Q, K^T). */
static bool match_contribs(const cx *c, ir_id gs)
{
	fz_match *mt = c->mt;
	if (c->u->output[gs] >= 0 || n_uses(c->u, gs) == 0)
		return false;
	for (uint32_t k = 0; k < n_uses(c->u, gs); k++) {
		ir_id x = use_at(c->u, gs, k);
		const ir_node *n = node(c, x);
		if (n->op != IR_OP_MATMUL || arg(c, x, 0) != gs || n->attr.matmul.tb)
			return false;
		bool is_dk = n->attr.matmul.ta;
		ir_id want = is_dk ? mt->q : mt->k, *slot = is_dk ? &mt->dk : &mt->dq;
		if (arg(c, x, 1) != want || *slot != IR_NONE)
			return false;
		*slot = x;
	}
	return true;
}

/* The contribution dV = P^T G among the weights' backward users. */
static bool match_dv(const cx *c, const ir_id *bwd, uint32_t n_bwd)
{
	fz_match *mt = c->mt;
	for (uint32_t k = 0; k < n_bwd; k++) {
		const ir_node *n = node(c, bwd[k]);
		if (n->op != IR_OP_MATMUL)
			continue;
		ir_id pd = mt->drop != IR_NONE ? mt->drop : mt->sm;
		if (mt->dv != IR_NONE || n->attr.matmul.tb ||
		    arg(c, bwd[k], 0) != pd || arg(c, bwd[k], 1) != mt->g)
			return false;
		mt->dv = bwd[k];
	}
	return true;
}

static bool match_grad(const cx *c, const ir_id *bwd, uint32_t n_bwd)
{
	fz_match *mt = c->mt;
	ir_id muls[2], w = IR_NONE;
	uint32_t n_muls = 0;
	for (uint32_t k = 0; k < n_bwd; k++)
		if (op(c, bwd[k]) == IR_OP_MUL && n_muls++ < 2)
			muls[n_muls - 1] = bwd[k];
	const char *why = "the weights are also used by backward nodes that "
			  "are not the chain's gradient";
	if (mt->q_t || mt->k_t || mt->v_t)
		return nope(c, "its gradient is for transposed operands, which "
			       "the fused gradient does not take");
	if (n_muls == 0 && n_bwd == 1) {
		/* Only the values need a gradient: dV = P'^T G alone. */
		mt->g = arg(c, bwd[0], 1);
		if (!same_type(c, mt->g, mt->out) || !match_dv(c, bwd, n_bwd))
			return nope(c, "%s (%s)", why, name_of(c, bwd[0]).s);
	} else if (n_muls == 2) {
		ir_id gw = match_softmax_grad(c, muls, &w);
		mt->g = gw == IR_NONE ? IR_NONE : match_g(c, gw);
		if (mt->g == IR_NONE || !match_dv(c, bwd, n_bwd))
			return nope(c, "%s (%s)", why, name_of(c, bwd[0]).s);
		ir_id gs = match_to_scores(c, w);
		if (gs == IR_NONE || !match_contribs(c, gs))
			return nope(c, "%s (%s)", why, name_of(c, w).s);
	} else {
		return nope(c, "%s (%s)", why, name_of(c, bwd[0]).s);
	}
	ir_dim size;
	if (!ir_attention_grad_size(&node(c, mt->q)->type, &node(c, mt->k)->type,
				    &node(c, mt->v)->type, &size))
		return nope(c, "its gradient would not fit one packed tensor: "
			       "queries, keys and values have more than one "
			       "run-time size");
	mt->has_grad = true;
	return true;
}

/* ---- the match --------------------------------------------------------------------- */

bool fz_match_at(const ir_module *m, const ir_func *f, const fz_uses *u,
		 ir_id sm, fz_match *mt)
{
	cx c = {m, f, u, mt};
	memset(mt, 0, sizeof *mt);
	mt->sm = sm;
	mt->valid = mt->scaled = mt->scores = mt->drop = mt->out = IR_NONE;
	mt->g = mt->dq = mt->dk = mt->dv = IR_NONE;
	mt->scale = 1;
	const ir_node *s = node(&c, sm);
	if (s->type.rank != 3 || s->type.dtype != IR_F32)
		return nope(&c, "the weights have rank %d; the fused kernel "
				"takes (N, Q, K)", s->type.rank);
	if (s->op == IR_OP_MASKED_SOFTMAX)
		mt->valid = arg(&c, sm, 1);
	ir_id bwd[8];
	uint32_t n_bwd = 0;
	if (!match_scores(&c, arg(&c, sm, 0)) || !match_weights(&c, bwd, &n_bwd) ||
	    !match_values(&c))
		return false;
	return n_bwd == 0 || match_grad(&c, bwd, n_bwd);
}
