/*
 * fuse_additive_match.c - finding the additive attentions to fuse
 * (fuse_additive.h).
 *
 * The forward chain is read from the softmax outwards: its input back
 * through the reshape that squeezes the projection, the matmul with the
 * scoring vector wv, the tanh and the broadcasting add of the two
 * unsqueezed projections; its users forward through an optional dropout
 * to the matmul with the values. Every intermediate must be used by the
 * chain alone (and, in a gradient function, by the chain's backward
 * nodes) and be no output.
 *
 * In a gradient function the backward nodes are recognized as grad.c's
 * rules build them after simplify and cse: dV = P'^T G; the softmax rule
 * y (g - sum(g y)) of g = dropout(G V^T); the mask k < valid, giving dS;
 * dT = reshape(dS) wv^T and dwv = reshape(T)^T reshape(dS); the tanh rule
 * dA = dT (1 - T T); and the add's unbroadcast, a sum of dA over the
 * keys for QP and over the queries for KP, or dA itself (reshaped) along
 * a size-1 axis. Those last nodes and dwv, dV are the parts the fusion
 * replaces. The small matching helpers repeat fuse_match.c's, which are
 * private to it.
 */
#include "fuse_additive.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct cx {
	const ir_module *m;
	const ir_func *f;
	const fz_uses *u;
	fa_match *mt;
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

static uint32_t n_uses(const cx *c, ir_id id)
{
	return c->u->start[id + 1] - c->u->start[id];
}

static ir_id use_at(const cx *c, ir_id id, uint32_t k)
{
	return c->u->list[c->u->start[id] + k];
}

static bool is_output(const cx *c, ir_id id)
{
	return c->u->output[id] >= 0;
}

/* The one user of id, or IR_NONE if it has another number or is an
 * output. */
static ir_id only_user(const cx *c, ir_id id)
{
	return n_uses(c, id) == 1 && !is_output(c, id) ? use_at(c, id, 0) : IR_NONE;
}

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

static bool same_type(const cx *c, ir_id a, ir_id b)
{
	return ir_type_eq(&node(c, a)->type, &node(c, b)->type);
}

static const ir_type *type_of(const cx *c, ir_id id)
{
	return &node(c, id)->type;
}

static bool dims_are(const ir_type *t, int rank, const ir_dim *want)
{
	if (t->rank != rank)
		return false;
	for (int i = 0; i < rank; i++)
		if (!ir_dim_eq(t->dims[i], want[i]))
			return false;
	return true;
}

/* True if id is a CONST whose elements (at least one) all equal v. */
static bool is_const_of(const cx *c, ir_id id, double v)
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
		if (x != v)
			return false;
	}
	return count > 0;
}

/* The other operand of binary node x when one is `one`, else IR_NONE. */
static ir_id other_operand(const cx *c, ir_id x, ir_id one)
{
	if (arg(c, x, 0) == one)
		return arg(c, x, 1);
	if (arg(c, x, 1) == one)
		return arg(c, x, 0);
	return IR_NONE;
}

/* Every use of id is by node user (or users of `also`, up to n_also),
 * and id is no output. */
static bool used_only_by(const cx *c, ir_id id, const ir_id *users,
			 uint32_t n_users, const char *what)
{
	if (is_output(c, id))
		return nope(c, "the %s %s are output %d of @%s", what,
			    name_of(c, id).s, c->u->output[id], c->f->name);
	for (uint32_t k = 0; k < n_uses(c, id); k++) {
		bool is_known = false;
		for (uint32_t i = 0; i < n_users && !is_known; i++)
			is_known = use_at(c, id, k) == users[i];
		if (!is_known)
			return nope(c, "the %s %s are also used by %s", what,
				    name_of(c, id).s, name_of(c, use_at(c, id, k)).s);
	}
	return true;
}

/* ---- the forward chain ------------------------------------------------------ */

/* The add's operands: (N, Q, 1, H) and (N, 1, K, H) for the scores'
 * (N, Q, K), in either order. */
static bool match_add(const cx *c)
{
	fa_match *mt = c->mt;
	const ir_type *st = type_of(c, mt->scores), *at = type_of(c, mt->a);
	ir_dim one = ir_dim_static(1), H = at->dims[3];
	ir_dim wq[4] = {st->dims[0], st->dims[1], one, H};
	ir_dim wk[4] = {st->dims[0], one, st->dims[2], H};
	for (uint32_t side = 0; side < 2; side++) {
		ir_id q = arg(c, mt->a, side), k = arg(c, mt->a, 1 - side);
		if (dims_are(type_of(c, q), 4, wq) && dims_are(type_of(c, k), 4, wk)) {
			mt->qs = q;
			mt->ks = k;
			return true;
		}
	}
	return nope(c, "the add %s does not add (N, Q, 1, H) query and "
		       "(N, 1, K, H) key projections", name_of(c, mt->a).s);
}

/* S = reshape(matmul(tanh(add(..)), wv (H, 1))) to (N, Q, K). */
static bool match_scores(const cx *c, ir_id s)
{
	fa_match *mt = c->mt;
	mt->scores = s;
	if (op(c, s) != IR_OP_RESHAPE || op(c, arg(c, s, 0)) != IR_OP_MATMUL)
		return nope(c, "its scores come from %s, not from a projection of "
			       "tanh features", name_of(c, s).s);
	mt->proj = arg(c, s, 0);
	mt->t = arg(c, mt->proj, 0);
	mt->wv = arg(c, mt->proj, 1);
	if (op(c, mt->t) != IR_OP_TANH)
		return nope(c, "its scores come from %s, not from a projection of "
			       "tanh features", name_of(c, mt->proj).s);
	mt->is_additive = true;
	const ir_node *p = node(c, mt->proj);
	const ir_type *tt = type_of(c, mt->t), *wt = type_of(c, mt->wv),
		      *st = type_of(c, s);
	ir_dim want[4] = {st->dims[0], st->dims[1], st->dims[2],
			  tt->rank == 4 ? tt->dims[3] : ir_dim_static(0)};
	ir_dim wcol[2] = {want[3], ir_dim_static(1)};
	if (p->attr.matmul.ta || p->attr.matmul.tb || !dims_are(tt, 4, want) ||
	    !dims_are(wt, 2, wcol))
		return nope(c, "the projection %s is not of (N, Q, K, H) features "
			       "by an (H, 1) vector", name_of(c, mt->proj).s);
	mt->a = arg(c, mt->t, 0);
	if (op(c, mt->a) != IR_OP_ADD)
		return nope(c, "its features are the tanh of %s, not of a sum of "
			       "projections", name_of(c, mt->a).s);
	return match_add(c) && used_only_by(c, s, &mt->sm, 1, "scores") &&
	       used_only_by(c, mt->proj, &s, 1, "projected scores") &&
	       used_only_by(c, mt->a, &mt->t, 1, "summed projections");
}

/* The output x becomes through layout ops alone, or -1. */
static int32_t output_through_layout(const cx *c, ir_id x, int depth)
{
	if (is_output(c, x))
		return c->u->output[x];
	for (uint32_t k = 0; depth > 0 && k < n_uses(c, x); k++) {
		ir_id y = use_at(c, x, k);
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

static const char *output_name(const cx *c, int32_t o)
{
	return c->f->output_names && c->f->output_names[o] ? c->f->output_names[o]
							   : "unnamed";
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
		    name_of(c, w).s, name_of(c, x).s, o, output_name(c, o),
		    c->f->name);
}

/* The users of the weights w: a dropout, the matmul with the values, and
 * in a gradient function the backward nodes, collected in bwd[]. */
static bool sort_users(const cx *c, ir_id w, ir_id *bwd, uint32_t *n_bwd)
{
	fa_match *mt = c->mt;
	for (uint32_t k = 0; k < n_uses(c, w); k++) {
		ir_id x = use_at(c, w, k);
		const ir_node *n = node(c, x);
		bool is_left = n->op == IR_OP_MATMUL && arg(c, x, 0) == w &&
			       arg(c, x, 1) != w;
		if (n->op == IR_OP_DROPOUT && w == mt->sm && mt->drop == IR_NONE)
			mt->drop = x;
		else if (is_left && !n->attr.matmul.ta && mt->out == IR_NONE &&
			 (w != mt->sm || mt->drop == IR_NONE))
			mt->out = x;
		else if (((is_left && n->attr.matmul.ta) ||
			  (n->op == IR_OP_MUL && w == mt->sm)) && *n_bwd < 8)
			bwd[(*n_bwd)++] = x;
		else
			return other_use(c, w, x);
	}
	return true;
}

static bool match_weights(const cx *c, ir_id *bwd, uint32_t *n_bwd)
{
	fa_match *mt = c->mt;
	int32_t o = c->u->output[mt->sm];
	if (o >= 0)
		return nope(c, "the weights are output %d (%s) of @%s: fusing "
			       "would lose them", o, output_name(c, o), c->f->name);
	if (!sort_users(c, mt->sm, bwd, n_bwd))
		return false;
	if (mt->drop != IR_NONE) {
		if (mt->out != IR_NONE)
			return nope(c, "the weights are also used by %s besides "
				       "their dropout", name_of(c, mt->out).s);
		if (is_output(c, mt->drop))
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

/* The product with the values: V (N, K, dv), untransposed. */
static bool match_values(const cx *c)
{
	fa_match *mt = c->mt;
	mt->v = arg(c, mt->out, 1);
	const ir_type *vt = type_of(c, mt->v), *st = type_of(c, mt->scores);
	if (node(c, mt->out)->attr.matmul.tb || vt->rank != 3 ||
	    !ir_dim_eq(vt->dims[0], st->dims[0]) || !ir_dim_eq(vt->dims[1], st->dims[2]))
		return nope(c, "the values of %s are not (N, K, dv) for the "
			       "scores' N and K", name_of(c, mt->out).s);
	return true;
}

/* ---- the backward chain: weights to dS ------------------------------------------------ */

/* id is a RESHAPE of valid to rank 3 with size-1 dims appended. */
static bool is_valid_reshape(const cx *c, ir_id id)
{
	const ir_node *n = node(c, id);
	if (n->op != IR_OP_RESHAPE || arg(c, id, 0) != c->mt->valid ||
	    n->type.rank != 3)
		return false;
	const ir_type *vt = type_of(c, c->mt->valid);
	for (int i = 0; i < 3; i++) {
		ir_dim want = i < vt->rank ? vt->dims[i] : ir_dim_static(1);
		if (!ir_dim_eq(n->type.dims[i], want))
			return false;
	}
	return true;
}

/* cast(lt([0, 1, .., K-1], reshape(valid))): the mask over a static K. */
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
		ir_id ms = arg(c, a, 0);
		if (op(c, ms) != IR_OP_MASKED_SOFTMAX || arg(c, ms, 1) != c->mt->valid)
			continue;
		ir_id z = arg(c, ms, 0);
		if (op(c, z) == IR_OP_BROADCAST)
			z = arg(c, z, 0);
		if (is_const_of(c, z, 0))
			return true;
	}
	return false;
}

static bool is_valid_mask(const cx *c, ir_id mask)
{
	if (op(c, mask) != IR_OP_CAST || type_of(c, mask)->dtype != IR_F32)
		return false;
	ir_dim K = type_of(c, c->mt->sm)->dims[2];
	if (ir_dim_is_static(K))
		return is_static_mask(c, arg(c, mask, 0), K.coef);
	return is_symbolic_mask(c, arg(c, mask, 0));
}

/* The softmax rule y (g - sum(g y)) from the two muls that use y: returns
 * g and the rule's result in *w_out, or IR_NONE. */
static ir_id match_softmax_grad(const cx *c, const ir_id *muls, ir_id *w_out)
{
	ir_id y = c->mt->sm;
	for (int k = 0; k < 2; k++) {
		ir_id t = muls[k], w = muls[1 - k];
		ir_id g = other_operand(c, t, y), s = only_user(c, t);
		if (g == IR_NONE || s == IR_NONE || op(c, s) != IR_OP_SUM ||
		    node(c, s)->attr.reduce.axes != 4u ||
		    !node(c, s)->attr.reduce.keepdim)
			continue;
		ir_id u = only_user(c, s);
		if (u == IR_NONE || op(c, u) != IR_OP_SUB || arg(c, u, 0) != g ||
		    arg(c, u, 1) != s || only_user(c, u) != w ||
		    other_operand(c, w, y) != u || is_output(c, w))
			continue;
		ir_id both[2] = {t, u};
		if (n_uses(c, g) != 2 || !used_only_by(c, g, both, 2, "gradient"))
			continue;
		*w_out = w;
		return g;
	}
	return IR_NONE;
}

/* The weights' gradient back to the output's gradient G: through the
 * dropout rule and the matmul rule's G V^T. */
static ir_id match_g(const cx *c, ir_id gw)
{
	fa_match *mt = c->mt;
	ir_id gpd = gw;
	if (mt->drop != IR_NONE) {
		const ir_node *d = node(c, gw), *fd = node(c, mt->drop);
		if (d->op != IR_OP_DROPOUT || d->attr.dropout.p != fd->attr.dropout.p ||
		    d->attr.dropout.stream != fd->attr.dropout.stream)
			return IR_NONE;
		gpd = arg(c, gw, 0);
		if (only_user(c, gpd) != gw)
			return IR_NONE;
	}
	const ir_node *n = node(c, gpd);
	if (n->op != IR_OP_MATMUL || n->attr.matmul.ta || !n->attr.matmul.tb ||
	    arg(c, gpd, 1) != mt->v || !same_type(c, arg(c, gpd, 0), mt->out))
		return IR_NONE;
	return arg(c, gpd, 0);
}

/* The rule's result w on through the mask to dS, or IR_NONE. */
static ir_id match_ds(const cx *c, ir_id w)
{
	if (c->mt->valid == IR_NONE)
		return w;
	ir_id x = only_user(c, w);
	if (x == IR_NONE || op(c, x) != IR_OP_MUL)
		return IR_NONE;
	ir_id mask = other_operand(c, x, w);
	return mask != IR_NONE && is_valid_mask(c, mask) ? x : IR_NONE;
}

static bool add_part(const cx *c, ir_id x, fa_part role)
{
	fa_match *mt = c->mt;
	if (mt->n_parts == sizeof mt->parts / sizeof mt->parts[0])
		return false;
	mt->parts[mt->n_parts] = x;
	mt->roles[mt->n_parts++] = role;
	return true;
}

/* The contribution dV = P'^T G among the weights' backward users. */
static bool match_dv(const cx *c, const ir_id *bwd, uint32_t n_bwd)
{
	fa_match *mt = c->mt;
	bool seen = false;
	for (uint32_t k = 0; k < n_bwd; k++) {
		const ir_node *n = node(c, bwd[k]);
		if (n->op != IR_OP_MATMUL)
			continue;
		ir_id pd = mt->drop != IR_NONE ? mt->drop : mt->sm;
		if (seen || n->attr.matmul.tb || arg(c, bwd[k], 0) != pd ||
		    arg(c, bwd[k], 1) != mt->g || !add_part(c, bwd[k], FA_DV))
			return false;
		seen = true;
	}
	return true;
}

/* ---- the backward chain: dS to the features' gradients --------------------------------- */

/* y = reshape(t) (M, H) ^T times x: the rank-2 rule's dwv (H, 1). */
static bool is_dwv(const cx *c, ir_id y, ir_id x)
{
	const ir_node *n = node(c, y);
	if (n->op != IR_OP_MATMUL || !n->attr.matmul.ta || n->attr.matmul.tb ||
	    arg(c, y, 1) != x || !same_type(c, y, c->mt->wv))
		return false;
	ir_id r = arg(c, y, 0);
	return op(c, r) == IR_OP_RESHAPE && arg(c, r, 0) == c->mt->t &&
	       only_user(c, r) == y;
}

/* dA = dT (1 - T T) from dT = matmul(x, wv^T); IR_NONE if not so. */
static ir_id match_da(const cx *c, ir_id dt)
{
	fa_match *mt = c->mt;
	ir_id da = only_user(c, dt);
	if (da == IR_NONE || op(c, da) != IR_OP_MUL)
		return IR_NONE;
	ir_id d = other_operand(c, da, dt);
	if (d == IR_NONE || op(c, d) != IR_OP_SUB || only_user(c, d) != da ||
	    !is_const_of(c, arg(c, d, 0), 1))
		return IR_NONE;
	mt->tt = arg(c, d, 1);
	if (op(c, mt->tt) != IR_OP_MUL || arg(c, mt->tt, 0) != mt->t ||
	    arg(c, mt->tt, 1) != mt->t || only_user(c, mt->tt) != d)
		return IR_NONE;
	return same_type(c, da, mt->t) && !is_output(c, da) ? da : IR_NONE;
}

/* A user x of dA: a sum over the keys (dqp), over the queries (dkp), or
 * along a size-1 axis a reshape of dA itself. */
static bool match_da_user(const cx *c, ir_id x)
{
	const ir_type *at = type_of(c, c->mt->a);
	bool q1 = ir_dim_eq(at->dims[1], ir_dim_static(1));
	bool k1 = ir_dim_eq(at->dims[2], ir_dim_static(1));
	const ir_node *n = node(c, x);
	if (n->op == IR_OP_SUM && n->attr.reduce.axes == 1u << 2)
		return add_part(c, x, FA_DQ);
	if (n->op == IR_OP_SUM && n->attr.reduce.axes == 1u << 1)
		return add_part(c, x, FA_DK);
	if (n->op == IR_OP_RESHAPE && (q1 || k1))
		return add_part(c, x, q1 ? FA_DK : FA_DQ);
	return false;
}

/* From dS: its reshapes, to dT and dwv; then dA and its users. */
static bool match_features(const cx *c, ir_id ds)
{
	fa_match *mt = c->mt;
	ir_id dt = IR_NONE;
	if (is_output(c, ds) || n_uses(c, ds) == 0)
		return false;
	for (uint32_t k = 0; k < n_uses(c, ds); k++) {
		ir_id x = use_at(c, ds, k), y = only_user(c, x);
		if (op(c, x) != IR_OP_RESHAPE || y == IR_NONE)
			return false;
		const ir_node *n = node(c, y);
		bool is_dt = n->op == IR_OP_MATMUL && !n->attr.matmul.ta &&
			     n->attr.matmul.tb && arg(c, y, 0) == x &&
			     arg(c, y, 1) == mt->wv && dt == IR_NONE;
		if (is_dt)
			dt = y;
		else if (!is_dwv(c, y, x) || !add_part(c, y, FA_DW))
			return false;
	}
	ir_id da = dt == IR_NONE ? IR_NONE : match_da(c, dt);
	if (da == IR_NONE || n_uses(c, da) == 0)
		return false;
	for (uint32_t k = 0; k < n_uses(c, da); k++)
		if (!match_da_user(c, use_at(c, da, k)))
			return false;
	return true;
}

/* x, a user of the features T, is the backward's reshape of T for dwv. */
static bool is_dwv_reshape(const cx *c, ir_id x)
{
	const fa_match *mt = c->mt;
	ir_id y = only_user(c, x);
	for (uint32_t i = 0; y != IR_NONE && i < mt->n_parts; i++)
		if (mt->parts[i] == y && mt->roles[i] == FA_DW)
			return op(c, x) == IR_OP_RESHAPE;
	return false;
}

/* The features T feed the forward projection and the rules matched. */
static bool features_used_by_chain(const cx *c)
{
	const fa_match *mt = c->mt;
	if (is_output(c, mt->t))
		return nope(c, "the features %s are output %d of @%s",
			    name_of(c, mt->t).s, c->u->output[mt->t], c->f->name);
	for (uint32_t k = 0; k < n_uses(c, mt->t); k++) {
		ir_id x = use_at(c, mt->t, k);
		if (x != mt->proj && x != mt->tt && !is_dwv_reshape(c, x))
			return nope(c, "the features %s are also used by %s",
				    name_of(c, mt->t).s, name_of(c, x).s);
	}
	return true;
}

/* The types (N, Q, H) and (N, K, H) of the projections. */
static void projection_types(const cx *c, ir_type *qt, ir_type *kt)
{
	const ir_type *at = type_of(c, c->mt->a);
	*qt = *at;
	qt->rank = 3;
	qt->dims[2] = at->dims[3];
	*kt = *qt;
	kt->dims[1] = at->dims[2];
}

static bool match_grad(const cx *c, const ir_id *bwd, uint32_t n_bwd)
{
	fa_match *mt = c->mt;
	ir_id muls[2], w = IR_NONE;
	uint32_t n_muls = 0;
	for (uint32_t k = 0; k < n_bwd; k++)
		if (op(c, bwd[k]) == IR_OP_MUL && n_muls++ < 2)
			muls[n_muls - 1] = bwd[k];
	const char *why = "the weights are also used by backward nodes that "
			  "are not the chain's gradient";
	if (n_muls == 0 && n_bwd == 1) {
		/* Only the values need a gradient. */
		mt->g = arg(c, bwd[0], 1);
		if (!same_type(c, mt->g, mt->out) || !match_dv(c, bwd, n_bwd))
			return nope(c, "%s (%s)", why, name_of(c, bwd[0]).s);
	} else if (n_muls == 2) {
		ir_id gw = match_softmax_grad(c, muls, &w);
		mt->g = gw == IR_NONE ? IR_NONE : match_g(c, gw);
		if (mt->g == IR_NONE || !match_dv(c, bwd, n_bwd))
			return nope(c, "%s (%s)", why, name_of(c, bwd[0]).s);
		ir_id ds = match_ds(c, w);
		if (ds == IR_NONE || !match_features(c, ds))
			return nope(c, "%s (%s)", why, name_of(c, w).s);
	} else {
		return nope(c, "%s (%s)", why, name_of(c, bwd[0]).s);
	}
	ir_dim size;
	ir_type qt, kt;
	projection_types(c, &qt, &kt);
	if (!features_used_by_chain(c))
		return false;
	if (!ir_additive_grad_size(&qt, &kt, type_of(c, mt->v), &size))
		return nope(c, "its gradient would not fit one packed tensor: "
			       "the operands have more than one run-time size");
	mt->has_grad = true;
	return true;
}

/* In a function without backward nodes the features and projections are
 * the chain's alone. */
static bool match_forward_only(const cx *c)
{
	fa_match *mt = c->mt;
	return used_only_by(c, mt->t, &mt->proj, 1, "features");
}

/* ---- the match ----------------------------------------------------------------------------- */

bool fa_match_at(const ir_module *m, const ir_func *f, const fz_uses *u,
		 ir_id sm, fa_match *mt)
{
	cx c = {m, f, u, mt};
	memset(mt, 0, sizeof *mt);
	mt->sm = sm;
	mt->valid = mt->scores = mt->proj = mt->t = mt->a = IR_NONE;
	mt->qs = mt->ks = mt->wv = mt->drop = mt->out = mt->v = IR_NONE;
	mt->g = mt->tt = IR_NONE;
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
	return n_bwd == 0 ? match_forward_only(&c) : match_grad(&c, bwd, n_bwd);
}
