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
 * replaces. The weights' users, the softmax rule, the mask and G V^T are
 * matched as for dot-product attention, by fuse_match.h's helpers.
 */
#include "fuse_additive.h"
#include "fuse_match.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct cx {
	fz_view v;
	fa_match *mt;
} cx;

static const ir_type *type_of(const cx *c, ir_id id)
{
	return &fz_node(&c->v, id)->type;
}

/* Every use of id is by node user (or users of `also`, up to n_also),
 * and id is no output. */
static bool used_only_by(const cx *c, ir_id id, const ir_id *users,
			 uint32_t n_users, const char *what)
{
	if (fz_is_output(&c->v, id))
		return fz_nope(&c->v, "the %s %s are output %d of @%s", what,
			       fz_name_of(&c->v, id).s, c->v.u->output[id],
			       c->v.f->name);
	for (uint32_t k = 0; k < fz_n_uses(&c->v, id); k++) {
		bool is_known = false;
		for (uint32_t i = 0; i < n_users && !is_known; i++)
			is_known = fz_use_at(&c->v, id, k) == users[i];
		if (!is_known)
			return fz_nope(
			    &c->v, "the %s %s are also used by %s", what,
			    fz_name_of(&c->v, id).s,
			    fz_name_of(&c->v, fz_use_at(&c->v, id, k)).s);
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
		ir_id q = fz_arg(&c->v, mt->a, side),
		      k = fz_arg(&c->v, mt->a, 1 - side);
		if (ir_shape_is(type_of(c, q), 4, wq) &&
		    ir_shape_is(type_of(c, k), 4, wk)) {
			mt->qs = q;
			mt->ks = k;
			return true;
		}
	}
	return fz_nope(&c->v,
		       "the add %s does not add (N, Q, 1, H) query and "
		       "(N, 1, K, H) key projections",
		       fz_name_of(&c->v, mt->a).s);
}

/* S = reshape(matmul(tanh(add(..)), wv (H, 1))) to (N, Q, K). */
static bool match_scores(const cx *c, ir_id s)
{
	fa_match *mt = c->mt;
	mt->scores = s;
	if (fz_op(&c->v, s) != IR_OP_RESHAPE ||
	    fz_op(&c->v, fz_arg(&c->v, s, 0)) != IR_OP_MATMUL)
		return fz_nope(
		    &c->v,
		    "its scores come from %s, not from a projection of "
		    "tanh features",
		    fz_name_of(&c->v, s).s);
	mt->proj = fz_arg(&c->v, s, 0);
	mt->t = fz_arg(&c->v, mt->proj, 0);
	mt->wv = fz_arg(&c->v, mt->proj, 1);
	if (fz_op(&c->v, mt->t) != IR_OP_TANH)
		return fz_nope(
		    &c->v,
		    "its scores come from %s, not from a projection of "
		    "tanh features",
		    fz_name_of(&c->v, mt->proj).s);
	mt->is_additive = true;
	const ir_node *p = fz_node(&c->v, mt->proj);
	const ir_type *tt = type_of(c, mt->t), *wt = type_of(c, mt->wv),
		      *st = type_of(c, s);
	ir_dim want[4] = {st->dims[0], st->dims[1], st->dims[2],
			  tt->rank == 4 ? tt->dims[3] : ir_dim_static(0)};
	ir_dim wcol[2] = {want[3], ir_dim_static(1)};
	if (p->attr.matmul.ta || p->attr.matmul.tb || !ir_shape_is(tt, 4, want) ||
	    !ir_shape_is(wt, 2, wcol))
		return fz_nope(
		    &c->v,
		    "the projection %s is not of (N, Q, K, H) features "
		    "by an (H, 1) vector",
		    fz_name_of(&c->v, mt->proj).s);
	mt->a = fz_arg(&c->v, mt->t, 0);
	if (fz_op(&c->v, mt->a) != IR_OP_ADD)
		return fz_nope(
		    &c->v,
		    "its features are the tanh of %s, not of a sum of "
		    "projections",
		    fz_name_of(&c->v, mt->a).s);
	return match_add(c) && used_only_by(c, s, &mt->sm, 1, "scores") &&
	       used_only_by(c, mt->proj, &s, 1, "projected scores") &&
	       used_only_by(c, mt->a, &mt->t, 1, "summed projections");
}

static bool match_weights(const cx *c, ir_id *bwd, uint32_t *n_bwd)
{
	fa_match *mt = c->mt;
	return fz_match_weights(&c->v, mt->sm, &mt->drop, &mt->out, bwd, n_bwd);
}

/* The product with the values: V (N, K, dv), untransposed. */
static bool match_values(const cx *c)
{
	fa_match *mt = c->mt;
	mt->v = fz_arg(&c->v, mt->out, 1);
	const ir_type *vt = type_of(c, mt->v), *st = type_of(c, mt->scores);
	if (fz_node(&c->v, mt->out)->attr.matmul.tb || vt->rank != 3 ||
	    !ir_dim_eq(vt->dims[0], st->dims[0]) ||
	    !ir_dim_eq(vt->dims[1], st->dims[2]))
		return fz_nope(&c->v,
			       "the values of %s are not (N, K, dv) for the "
			       "scores' N and K",
			       fz_name_of(&c->v, mt->out).s);
	return true;
}

/* ---- the backward chain: weights to dS ------------------------------------------------ */

/* The rule's result w on through the mask to dS, or IR_NONE. */
static ir_id match_ds(const cx *c, ir_id w)
{
	if (c->mt->valid == IR_NONE)
		return w;
	ir_id x = fz_only_user(&c->v, w);
	if (x == IR_NONE || fz_op(&c->v, x) != IR_OP_MUL)
		return IR_NONE;
	ir_id mask = fz_other_operand(&c->v, x, w);
	return mask != IR_NONE &&
		       fz_is_valid_mask(&c->v, c->mt->sm, c->mt->valid, mask)
		   ? x
		   : IR_NONE;
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
		const ir_node *n = fz_node(&c->v, bwd[k]);
		if (n->op != IR_OP_MATMUL)
			continue;
		ir_id pd = mt->drop != IR_NONE ? mt->drop : mt->sm;
		if (seen || n->attr.matmul.tb ||
		    fz_arg(&c->v, bwd[k], 0) != pd ||
		    fz_arg(&c->v, bwd[k], 1) != mt->g ||
		    !add_part(c, bwd[k], FA_DV))
			return false;
		seen = true;
	}
	return true;
}

/* ---- the backward chain: dS to the features' gradients --------------------------------- */

/* y = reshape(t) (M, H) ^T times x: the rank-2 rule's dwv (H, 1). */
static bool is_dwv(const cx *c, ir_id y, ir_id x)
{
	const ir_node *n = fz_node(&c->v, y);
	if (n->op != IR_OP_MATMUL || !n->attr.matmul.ta || n->attr.matmul.tb ||
	    fz_arg(&c->v, y, 1) != x || !fz_same_type(&c->v, y, c->mt->wv))
		return false;
	ir_id r = fz_arg(&c->v, y, 0);
	return fz_op(&c->v, r) == IR_OP_RESHAPE &&
	       fz_arg(&c->v, r, 0) == c->mt->t && fz_only_user(&c->v, r) == y;
}

/* dA = dT (1 - T T) from dT = matmul(x, wv^T); IR_NONE if not so. */
static ir_id match_da(const cx *c, ir_id dt)
{
	fa_match *mt = c->mt;
	ir_id da = fz_only_user(&c->v, dt);
	if (da == IR_NONE || fz_op(&c->v, da) != IR_OP_MUL)
		return IR_NONE;
	ir_id d = fz_other_operand(&c->v, da, dt);
	if (d == IR_NONE || fz_op(&c->v, d) != IR_OP_SUB ||
	    fz_only_user(&c->v, d) != da ||
	    !fz_is_const_of(&c->v, fz_arg(&c->v, d, 0), 1))
		return IR_NONE;
	mt->tt = fz_arg(&c->v, d, 1);
	if (fz_op(&c->v, mt->tt) != IR_OP_MUL ||
	    fz_arg(&c->v, mt->tt, 0) != mt->t ||
	    fz_arg(&c->v, mt->tt, 1) != mt->t ||
	    fz_only_user(&c->v, mt->tt) != d)
		return IR_NONE;
	return fz_same_type(&c->v, da, mt->t) && !fz_is_output(&c->v, da)
		   ? da
		   : IR_NONE;
}

/* A user x of dA: a sum over the keys (dqp), over the queries (dkp), or
 * along a size-1 axis a reshape of dA itself. */
static bool match_da_user(const cx *c, ir_id x)
{
	const ir_type *at = type_of(c, c->mt->a);
	bool q1 = ir_dim_eq(at->dims[1], ir_dim_static(1));
	bool k1 = ir_dim_eq(at->dims[2], ir_dim_static(1));
	const ir_node *n = fz_node(&c->v, x);
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
	if (fz_is_output(&c->v, ds) || fz_n_uses(&c->v, ds) == 0)
		return false;
	for (uint32_t k = 0; k < fz_n_uses(&c->v, ds); k++) {
		ir_id x = fz_use_at(&c->v, ds, k), y = fz_only_user(&c->v, x);
		if (fz_op(&c->v, x) != IR_OP_RESHAPE || y == IR_NONE)
			return false;
		const ir_node *n = fz_node(&c->v, y);
		bool is_dt = n->op == IR_OP_MATMUL && !n->attr.matmul.ta &&
			     n->attr.matmul.tb && fz_arg(&c->v, y, 0) == x &&
			     fz_arg(&c->v, y, 1) == mt->wv && dt == IR_NONE;
		if (is_dt)
			dt = y;
		else if (!is_dwv(c, y, x) || !add_part(c, y, FA_DW))
			return false;
	}
	ir_id da = dt == IR_NONE ? IR_NONE : match_da(c, dt);
	if (da == IR_NONE || fz_n_uses(&c->v, da) == 0)
		return false;
	for (uint32_t k = 0; k < fz_n_uses(&c->v, da); k++)
		if (!match_da_user(c, fz_use_at(&c->v, da, k)))
			return false;
	return true;
}

/* x, a user of the features T, is the backward's reshape of T for dwv. */
static bool is_dwv_reshape(const cx *c, ir_id x)
{
	const fa_match *mt = c->mt;
	ir_id y = fz_only_user(&c->v, x);
	for (uint32_t i = 0; y != IR_NONE && i < mt->n_parts; i++)
		if (mt->parts[i] == y && mt->roles[i] == FA_DW)
			return fz_op(&c->v, x) == IR_OP_RESHAPE;
	return false;
}

/* The features T feed the forward projection and the rules matched. */
static bool features_used_by_chain(const cx *c)
{
	const fa_match *mt = c->mt;
	if (fz_is_output(&c->v, mt->t))
		return fz_nope(&c->v, "the features %s are output %d of @%s",
			       fz_name_of(&c->v, mt->t).s,
			       c->v.u->output[mt->t], c->v.f->name);
	for (uint32_t k = 0; k < fz_n_uses(&c->v, mt->t); k++) {
		ir_id x = fz_use_at(&c->v, mt->t, k);
		if (x != mt->proj && x != mt->tt && !is_dwv_reshape(c, x))
			return fz_nope(
			    &c->v, "the features %s are also used by %s",
			    fz_name_of(&c->v, mt->t).s, fz_name_of(&c->v, x).s);
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
	ir_id w;
	mt->g = fz_match_grad_g(&c->v, mt->sm, mt->drop, mt->out, bwd, n_bwd,
				&w);
	if (mt->g == IR_NONE || !match_dv(c, bwd, n_bwd))
		return fz_not_grad(&c->v, bwd[0]);
	if (w != IR_NONE) {
		ir_id ds = match_ds(c, w);
		if (ds == IR_NONE || !match_features(c, ds))
			return fz_not_grad(&c->v, w);
	}
	ir_dim size;
	ir_type qt, kt;
	projection_types(c, &qt, &kt);
	if (!features_used_by_chain(c))
		return false;
	if (!ir_additive_grad_size(c->v.m, &qt, &kt, type_of(c, mt->v), &size))
		return fz_nope(&c->v,
			       "its gradient would not fit one packed tensor: "
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
	cx c = {{m, f, u, mt->why}, mt};
	memset(mt, 0, sizeof *mt);
	mt->sm = sm;
	mt->valid = mt->scores = mt->proj = mt->t = mt->a = IR_NONE;
	mt->qs = mt->ks = mt->wv = mt->drop = mt->out = mt->v = IR_NONE;
	mt->g = mt->tt = IR_NONE;
	const ir_node *s = fz_node(&c.v, sm);
	if (s->type.rank != 3 || s->type.dtype != IR_F32)
		return fz_nope(&c.v,
			       "the weights have rank %d; the fused kernel "
			       "takes (N, Q, K)",
			       s->type.rank);
	if (s->op == IR_OP_MASKED_SOFTMAX)
		mt->valid = fz_arg(&c.v, sm, 1);
	ir_id bwd[8];
	uint32_t n_bwd = 0;
	if (!match_scores(&c, fz_arg(&c.v, sm, 0)) ||
	    !match_weights(&c, bwd, &n_bwd) || !match_values(&c))
		return false;
	return n_bwd == 0 ? match_forward_only(&c) : match_grad(&c, bwd, n_bwd);
}
