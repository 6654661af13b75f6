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
 *
 * The pieces the additive matcher (fuse_additive_match.c) meets as well,
 * the weights' users, the softmax rule, the valid-length mask and G V^T,
 * are shared with it through fuse_match.h.
 */
#include "fuse_match.h"

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

/* ---- shared with fuse_additive_match.c (fuse_match.h) -------------------- */

ir_id fz_only_user(const fz_view *v, ir_id id)
{
	return fz_n_uses(v, id) == 1 && !fz_is_output(v, id)
		   ? fz_use_at(v, id, 0)
		   : IR_NONE;
}

fz_name fz_name_of(const fz_view *v, ir_id id)
{
	fz_name r;
	snprintf(r.s, sizeof r.s, "%%%u (%s)", id,
		 ir_op_table[fz_op(v, id)].name);
	return r;
}

bool fz_nope(const fz_view *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->why, FZ_WHY_CAP, fmt, ap);
	va_end(ap);
	return false;
}

bool fz_same_type(const fz_view *v, ir_id a, ir_id b)
{
	return ir_type_eq(&fz_node(v, a)->type, &fz_node(v, b)->type);
}

bool fz_const_value(const fz_view *v, ir_id id, double *x)
{
	const ir_node *n = fz_node(v, id);
	if (n->op != IR_OP_CONST || n->attr.const_index >= v->m->n_consts)
		return false;
	const ir_const *k = &v->m->consts[n->attr.const_index];
	int64_t count = ir_type_numel_static(&k->type);
	for (int64_t i = 0; i < count; i++) {
		double e = k->type.dtype == IR_F32 ? ((const float *)k->data)[i]
			   : k->type.dtype == IR_I32
			       ? ((const int32_t *)k->data)[i]
			       : ((const double *)k->data)[i];
		if (i == 0)
			*x = e;
		else if (e != *x)
			return false;
	}
	return count > 0;
}

bool fz_is_const_of(const fz_view *v, ir_id id, double x)
{
	double e;
	return fz_const_value(v, id, &e) && e == x;
}

ir_id fz_other_operand(const fz_view *v, ir_id x, ir_id one)
{
	if (fz_arg(v, x, 0) == one)
		return fz_arg(v, x, 1);
	if (fz_arg(v, x, 1) == one)
		return fz_arg(v, x, 0);
	return IR_NONE;
}

const char *fz_output_name(const fz_view *v, int32_t o)
{
	return v->f->output_names && v->f->output_names[o]
		       ? v->f->output_names[o] : "unnamed";
}

/* The output x becomes through layout ops alone (a reshape, a stack of
 * heatmaps), or -1. */
static int32_t output_through_layout(const fz_view *v, ir_id x, int depth)
{
	if (fz_is_output(v, x))
		return v->u->output[x];
	for (uint32_t k = 0; depth > 0 && k < fz_n_uses(v, x); k++) {
		ir_id y = fz_use_at(v, x, k);
		ir_op o = fz_op(v, y);
		bool is_layout = o == IR_OP_RESHAPE || o == IR_OP_PERMUTE ||
				 o == IR_OP_CONCAT || o == IR_OP_SLICE ||
				 o == IR_OP_BROADCAST;
		int32_t out = is_layout ? output_through_layout(v, y, depth - 1)
					: -1;
		if (out >= 0)
			return out;
	}
	return -1;
}

/* Weights w are also used by x, which blocks the fusion. */
static bool other_use(const fz_view *v, ir_id w, ir_id x)
{
	int32_t o = output_through_layout(v, x, 8);
	if (o < 0)
		return fz_nope(v, "the weights %s are also used by %s",
			       fz_name_of(v, w).s, fz_name_of(v, x).s);
	return fz_nope(v, "the weights %s are also used by %s, which becomes "
			  "output %d (%s) of @%s: fusing would lose them",
		       fz_name_of(v, w).s, fz_name_of(v, x).s, o,
		       fz_output_name(v, o), v->f->name);
}

/* The weights' users being sorted (fz_match_weights). */
typedef struct users {
	ir_id sm;
	ir_id *drop, *out;
	ir_id *bwd;
	uint32_t *n_bwd;
} users;

/* The users of w (the softmax or its dropout): a dropout, the matmul
 * with the values (weights on the left, untransposed), and in a gradient
 * function the backward nodes. */
static bool sort_users(const fz_view *v, const users *us, ir_id w)
{
	for (uint32_t k = 0; k < fz_n_uses(v, w); k++) {
		ir_id x = fz_use_at(v, w, k);
		const ir_node *n = fz_node(v, x);
		bool is_left = n->op == IR_OP_MATMUL && fz_arg(v, x, 0) == w &&
			       fz_arg(v, x, 1) != w;
		if (n->op == IR_OP_DROPOUT && w == us->sm &&
		    *us->drop == IR_NONE) {
			*us->drop = x;
		} else if (is_left && !n->attr.matmul.ta &&
			   *us->out == IR_NONE &&
			   (w != us->sm || *us->drop == IR_NONE)) {
			*us->out = x;
		} else if ((is_left && n->attr.matmul.ta) ||
			   (n->op == IR_OP_MUL && w == us->sm)) {
			if (*us->n_bwd == 8)
				return other_use(v, w, x);
			us->bwd[(*us->n_bwd)++] = x;
		} else {
			return other_use(v, w, x);
		}
	}
	return true;
}

bool fz_match_weights(const fz_view *v, ir_id sm, ir_id *drop, ir_id *out,
		      ir_id *bwd, uint32_t *n_bwd)
{
	users us = {sm, drop, out, bwd, n_bwd};
	int32_t o = v->u->output[sm];
	if (o >= 0)
		return fz_nope(v,
			       "the weights are output %d (%s) of @%s: fusing "
			       "would lose them",
			       o, fz_output_name(v, o), v->f->name);
	if (!sort_users(v, &us, sm))
		return false;
	if (*drop != IR_NONE) {
		if (*out != IR_NONE)
			return fz_nope(v, "the weights are also used by %s "
					  "besides their dropout",
				       fz_name_of(v, *out).s);
		if (fz_is_output(v, *drop))
			return fz_nope(v,
				       "the dropped weights %s are output %d "
				       "of @%s",
				       fz_name_of(v, *drop).s,
				       v->u->output[*drop], v->f->name);
		if (!sort_users(v, &us, *drop))
			return false;
	}
	if (*out == IR_NONE)
		return fz_nope(v, "the weights are not multiplied with values "
				  "(no matmul takes them as its left operand)");
	return true;
}

/* id is a RESHAPE of valid to rank 3 with size-1 dims appended. */
static bool is_valid_reshape(const fz_view *v, ir_id valid, ir_id id)
{
	const ir_node *n = fz_node(v, id);
	if (n->op != IR_OP_RESHAPE || fz_arg(v, id, 0) != valid ||
	    n->type.rank != 3)
		return false;
	const ir_type *vt = &fz_node(v, valid)->type;
	for (int i = 0; i < 3; i++) {
		ir_dim want = i < vt->rank ? vt->dims[i] : ir_dim_static(1);
		if (!ir_dim_eq(n->type.dims[i], want))
			return false;
	}
	return true;
}

/* cast(lt([0, 1, .., K-1], reshape(valid))): grad_build.c's mask over a
 * static K. */
static bool is_static_mask(const fz_view *v, ir_id valid, ir_id lt, int64_t K)
{
	if (fz_op(v, lt) != IR_OP_LT ||
	    !is_valid_reshape(v, valid, fz_arg(v, lt, 1)))
		return false;
	const ir_node *pos = fz_node(v, fz_arg(v, lt, 0));
	if (pos->op != IR_OP_CONST || pos->type.rank != 1 ||
	    pos->type.dtype != IR_I32 || pos->type.dims[0].coef != K)
		return false;
	const int32_t *e = v->m->consts[pos->attr.const_index].data;
	for (int64_t i = 0; i < K; i++)
		if (e[i] != i)
			return false;
	return true;
}

/* cast(gt(masked_softmax(zeros, valid), 0) * gt(reshape(valid), 0)): the
 * mask over a symbolic K. */
static bool is_symbolic_mask(const fz_view *v, ir_id valid, ir_id mul)
{
	if (fz_op(v, mul) != IR_OP_MUL)
		return false;
	for (uint32_t side = 0; side < 2; side++) {
		ir_id a = fz_arg(v, mul, side), b = fz_arg(v, mul, 1 - side);
		if (fz_op(v, a) != IR_OP_GT || fz_op(v, b) != IR_OP_GT ||
		    !fz_is_const_of(v, fz_arg(v, a, 1), 0) ||
		    !fz_is_const_of(v, fz_arg(v, b, 1), 0) ||
		    !is_valid_reshape(v, valid, fz_arg(v, b, 0)))
			continue;
		ir_id ms = fz_arg(v, a, 0);
		if (fz_op(v, ms) != IR_OP_MASKED_SOFTMAX ||
		    fz_arg(v, ms, 1) != valid)
			continue;
		ir_id z = fz_arg(v, ms, 0);
		if (fz_op(v, z) == IR_OP_BROADCAST)
			z = fz_arg(v, z, 0);
		if (fz_is_const_of(v, z, 0))
			return true;
	}
	return false;
}

/* The mask of constant valid lengths as fold leaves it: an f32 constant
 * (N, 1 or Q, K) of [k < valid[n]] (or valid[n, q]), so that a loss
 * whose valid lengths are constants still fuses its backward. */
static bool is_folded_mask(const fz_view *v, ir_id valid, ir_id mask,
			   int64_t K)
{
	const ir_node *mn = fz_node(v, mask), *vn = fz_node(v, valid);
	if (mn->op != IR_OP_CONST || mn->type.dtype != IR_F32 ||
	    mn->type.rank != 3 || vn->op != IR_OP_CONST ||
	    vn->type.dtype != IR_I32 || vn->type.rank < 1 || vn->type.rank > 2)
		return false;
	int64_t d[3], vd[2] = {1, 1};
	for (int i = 0; i < 3; i++)
		d[i] = mn->type.dims[i].coef;
	for (int i = 0; i < vn->type.rank; i++)
		vd[i] = vn->type.dims[i].coef;
	if (d[0] != vd[0] || d[1] != vd[1] || d[2] != K)
		return false;
	const float *e = v->m->consts[mn->attr.const_index].data;
	const int32_t *len = v->m->consts[vn->attr.const_index].data;
	for (int64_t r = 0; r < d[0] * d[1]; r++)
		for (int64_t k = 0; k < K; k++)
			if (e[r * K + k] != (k < len[r] ? 1.0f : 0.0f))
				return false;
	return true;
}

bool fz_is_valid_mask(const fz_view *v, ir_id sm, ir_id valid, ir_id mask)
{
	ir_dim K0 = fz_node(v, sm)->type.dims[2];
	if (ir_dim_is_static(K0) && is_folded_mask(v, valid, mask, K0.coef))
		return true;
	if (fz_op(v, mask) != IR_OP_CAST ||
	    fz_node(v, mask)->type.dtype != IR_F32)
		return false;
	ir_id x = fz_arg(v, mask, 0);
	ir_dim K = fz_node(v, sm)->type.dims[2];
	if (ir_dim_is_static(K))
		return is_static_mask(v, valid, x, K.coef);
	return is_symbolic_mask(v, valid, x);
}

/* g is used by t and u alone and is no output. */
static bool g_used_by_rule(const fz_view *v, ir_id g, ir_id t, ir_id u)
{
	bool uses_ok = fz_n_uses(v, g) == 2 && !fz_is_output(v, g);
	for (uint32_t i = 0; uses_ok && i < 2; i++) {
		ir_id x = fz_use_at(v, g, i);
		uses_ok = x == t || x == u;
	}
	return uses_ok;
}

ir_id fz_match_softmax_grad(const fz_view *v, ir_id y, const ir_id *muls,
			    ir_id *w_out)
{
	for (int k = 0; k < 2; k++) {
		ir_id t = muls[k], w = muls[1 - k];
		ir_id g = fz_other_operand(v, t, y), s = fz_only_user(v, t);
		if (g == IR_NONE || s == IR_NONE || fz_op(v, s) != IR_OP_SUM ||
		    fz_node(v, s)->attr.reduce.axes != 4u ||
		    !fz_node(v, s)->attr.reduce.keepdim)
			continue;
		ir_id u = fz_only_user(v, s);
		if (u == IR_NONE || fz_op(v, u) != IR_OP_SUB ||
		    fz_arg(v, u, 0) != g || fz_arg(v, u, 1) != s ||
		    fz_only_user(v, u) != w || fz_other_operand(v, w, y) != u ||
		    fz_is_output(v, w) || !g_used_by_rule(v, g, t, u))
			continue;
		*w_out = w;
		return g;
	}
	return IR_NONE;
}

ir_id fz_match_g(const fz_view *v, ir_id drop, ir_id out, ir_id gw)
{
	ir_id gpd = gw;
	if (drop != IR_NONE) {
		const ir_node *d = fz_node(v, gw), *fd = fz_node(v, drop);
		if (d->op != IR_OP_DROPOUT ||
		    d->attr.dropout.p != fd->attr.dropout.p ||
		    d->attr.dropout.stream != fd->attr.dropout.stream)
			return IR_NONE;
		gpd = fz_arg(v, gw, 0);
		if (fz_only_user(v, gpd) != gw)
			return IR_NONE;
	}
	const ir_node *n = fz_node(v, gpd);
	if (n->op != IR_OP_MATMUL || n->attr.matmul.ta || !n->attr.matmul.tb ||
	    fz_arg(v, gpd, 1) != fz_arg(v, out, 1) ||
	    !fz_same_type(v, fz_arg(v, gpd, 0), out))
		return IR_NONE;
	return fz_arg(v, gpd, 0);
}

ir_id fz_match_grad_g(const fz_view *v, ir_id sm, ir_id drop, ir_id out,
		      const ir_id *bwd, uint32_t n_bwd, ir_id *w)
{
	ir_id muls[2];
	uint32_t n_muls = 0;
	for (uint32_t k = 0; k < n_bwd; k++)
		if (fz_op(v, bwd[k]) == IR_OP_MUL && n_muls++ < 2)
			muls[n_muls - 1] = bwd[k];
	*w = IR_NONE;
	if (n_muls == 0 && n_bwd == 1) {
		/* Only the values need a gradient: dV = P'^T G alone. */
		ir_id g = fz_arg(v, bwd[0], 1);
		return fz_same_type(v, g, out) ? g : IR_NONE;
	}
	if (n_muls != 2)
		return IR_NONE;
	ir_id gw = fz_match_softmax_grad(v, sm, muls, w);
	return gw == IR_NONE ? IR_NONE : fz_match_g(v, drop, out, gw);
}

bool fz_not_grad(const fz_view *v, ir_id x)
{
	return fz_nope(v, "the weights are also used by backward nodes that "
			  "are not the chain's gradient (%s)",
		       fz_name_of(v, x).s);
}

/* ---- the dot-product chain ------------------------------------------- */

typedef struct cx {
	fz_view v;
	fz_match *mt;
} cx;

static bool is_last_two_swap(const cx *c, ir_id id)
{
	const ir_node *n = fz_node(&c->v, id);
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
	return fz_arg(&c->v, x, 0);
}

/* A node's one user, looking past reshapes and broadcasts that change
 * nothing (what simplify removes); IR_NONE unless exactly one. *from
 * gets the operand the user reads (id or the last of those). */
static ir_id next_user(const cx *c, ir_id id, ir_id *from)
{
	ir_id n = fz_only_user(&c->v, id);
	*from = id;
	while (n != IR_NONE &&
	       (fz_op(&c->v, n) == IR_OP_BROADCAST ||
		fz_op(&c->v, n) == IR_OP_RESHAPE) &&
	       fz_same_type(&c->v, n, id)) {
		*from = n;
		n = fz_only_user(&c->v, n);
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
	ir_op o = fz_op(&c->v, x);
	if (o != IR_OP_MUL && o != IR_OP_DIV)
		return x;
	for (uint32_t side = 0; side < (o == IR_OP_MUL ? 2u : 1u); side++) {
		ir_id k = fz_arg(&c->v, x, 1 - side),
		      s = fz_arg(&c->v, x, side);
		if (!fz_const_value(&c->v, k, &v) || !fz_same_type(&c->v, x, s))
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
	if (c->v.u->output[id] >= 0)
		return fz_nope(&c->v, "the %s %s are output %d of @%s", what,
			       fz_name_of(&c->v, id).s, c->v.u->output[id],
			       c->v.f->name);
	for (uint32_t k = 0; k < fz_n_uses(&c->v, id); k++)
		if (fz_use_at(&c->v, id, k) != user)
			return fz_nope(
			    &c->v, "the %s %s are also used by %s", what,
			    fz_name_of(&c->v, id).s,
			    fz_name_of(&c->v, fz_use_at(&c->v, id, k)).s);
	return true;
}

/* The scores: matmul(Q, K^T) of rank-3 operands of one batch size. */
static bool match_scores(const cx *c, ir_id x)
{
	fz_match *mt = c->mt;
	x = match_scale(c, x);
	mt->scores = x;
	if (fz_op(&c->v, x) != IR_OP_MATMUL)
		return fz_nope(&c->v,
			       "its scores come from %s, not from a matmul of "
			       "queries and keys",
			       fz_name_of(&c->v, x).s);
	if (mt->scaled != IR_NONE &&
	    (!used_only_by(c, mt->scaled, mt->sm, "scaled scores") ||
	     !used_only_by(c, x, mt->scaled, "scores")))
		return false;
	if (mt->scaled == IR_NONE && !used_only_by(c, x, mt->sm, "scores"))
		return false;
	const ir_node *s = fz_node(&c->v, x);
	mt->q_t = s->attr.matmul.ta;
	mt->k_t = !s->attr.matmul.tb;
	mt->q = through_transpose(c, fz_arg(&c->v, x, 0), &mt->q_t);
	mt->k = through_transpose(c, fz_arg(&c->v, x, 1), &mt->k_t);
	const ir_type *qt = &fz_node(&c->v, mt->q)->type,
		      *kt = &fz_node(&c->v, mt->k)->type;
	if (qt->rank != 3 || kt->rank != 3 ||
	    !ir_dim_eq(qt->dims[0], kt->dims[0]))
		return fz_nope(&c->v,
			       "the scores %s multiply operands that are not "
			       "(N, Q, d) and (N, K, d) of one N",
			       fz_name_of(&c->v, x).s);
	return true;
}

static bool match_weights(const cx *c, ir_id *bwd, uint32_t *n_bwd)
{
	fz_match *mt = c->mt;
	return fz_match_weights(&c->v, mt->sm, &mt->drop, &mt->out, bwd, n_bwd);
}

/* The product with the values: V (N, K, dv) of the scores' N and K. */
static bool match_values(const cx *c)
{
	fz_match *mt = c->mt;
	const ir_node *o = fz_node(&c->v, mt->out);
	mt->v_t = o->attr.matmul.tb;
	mt->v = through_transpose(c, fz_arg(&c->v, mt->out, 1), &mt->v_t);
	const ir_type *vt = &fz_node(&c->v, mt->v)->type,
		      *kt = &fz_node(&c->v, mt->k)->type;
	ir_dim vk = vt->dims[mt->v_t ? 2 : 1], kk = kt->dims[mt->k_t ? 2 : 1];
	if (vt->rank != 3 || !ir_dim_eq(vt->dims[0], kt->dims[0]) ||
	    !ir_dim_eq(vk, kk))
		return fz_nope(&c->v,
			       "the values of %s are not (N, K, dv) for the "
			       "keys' N and K",
			       fz_name_of(&c->v, mt->out).s);
	return true;
}

/* ---- the backward chain --------------------------------------------------------- */

/* x is op(from, c) (or, for MUL, op(c, from)) with c a constant of the
 * forward scale's value. */
static bool is_scale_rule(const cx *c, ir_id x, ir_id from)
{
	const ir_node *sc = fz_node(&c->v, c->mt->scaled),
		      *n = fz_node(&c->v, x);
	double v;
	if (n->op != sc->op)
		return false;
	for (uint32_t side = 0; side < (n->op == IR_OP_MUL ? 2u : 1u); side++)
		if (fz_arg(&c->v, x, side) == from &&
		    fz_const_value(&c->v, fz_arg(&c->v, x, 1 - side), &v) &&
		    v == c->mt->scale_c)
			return fz_same_type(&c->v, x, c->mt->scores);
	return false;
}

/* From the rule's result w on to the scores' gradient: the mask, the
 * scale's rule; returns that gradient or IR_NONE. */
static ir_id match_to_scores(const cx *c, ir_id w)
{
	fz_match *mt = c->mt;
	ir_id from, x = next_user(c, w, &from);
	if (x != IR_NONE && mt->valid != IR_NONE) {
		ir_id mask = fz_other_operand(&c->v, x, from);
		if (mask == IR_NONE || fz_op(&c->v, x) != IR_OP_MUL ||
		    !fz_is_valid_mask(&c->v, c->mt->sm, c->mt->valid, mask))
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
	if (c->v.u->output[gs] >= 0 || fz_n_uses(&c->v, gs) == 0)
		return false;
	for (uint32_t k = 0; k < fz_n_uses(&c->v, gs); k++) {
		ir_id x = fz_use_at(&c->v, gs, k);
		const ir_node *n = fz_node(&c->v, x);
		if (n->op != IR_OP_MATMUL || fz_arg(&c->v, x, 0) != gs ||
		    n->attr.matmul.tb)
			return false;
		bool is_dk = n->attr.matmul.ta;
		ir_id want = is_dk ? mt->q : mt->k,
		      *slot = is_dk ? &mt->dk : &mt->dq;
		if (fz_arg(&c->v, x, 1) != want || *slot != IR_NONE)
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
		const ir_node *n = fz_node(&c->v, bwd[k]);
		if (n->op != IR_OP_MATMUL)
			continue;
		ir_id pd = mt->drop != IR_NONE ? mt->drop : mt->sm;
		if (mt->dv != IR_NONE || n->attr.matmul.tb ||
		    fz_arg(&c->v, bwd[k], 0) != pd ||
		    fz_arg(&c->v, bwd[k], 1) != mt->g)
			return false;
		mt->dv = bwd[k];
	}
	return true;
}

static bool match_grad(const cx *c, const ir_id *bwd, uint32_t n_bwd)
{
	fz_match *mt = c->mt;
	ir_id w;
	if (mt->q_t || mt->k_t || mt->v_t)
		return fz_nope(&c->v,
			       "its gradient is for transposed operands, which "
			       "the fused gradient does not take");
	mt->g = fz_match_grad_g(&c->v, mt->sm, mt->drop, mt->out, bwd, n_bwd,
				&w);
	if (mt->g == IR_NONE || !match_dv(c, bwd, n_bwd))
		return fz_not_grad(&c->v, bwd[0]);
	if (w != IR_NONE) {
		ir_id gs = match_to_scores(c, w);
		if (gs == IR_NONE || !match_contribs(c, gs))
			return fz_not_grad(&c->v, w);
	}
	ir_dim size;
	if (!ir_attention_grad_size(c->v.m, &fz_node(&c->v, mt->q)->type,
				    &fz_node(&c->v, mt->k)->type,
				    &fz_node(&c->v, mt->v)->type, &size))
		return fz_nope(&c->v,
			       "its gradient would not fit one packed tensor: "
			       "queries, keys and values have more than one "
			       "run-time size");
	mt->has_grad = true;
	return true;
}

/* ---- the match --------------------------------------------------------------------- */

bool fz_match_at(const ir_module *m, const ir_func *f, const fz_uses *u,
		 ir_id sm, fz_match *mt)
{
	cx c = {{m, f, u, mt->why}, mt};
	memset(mt, 0, sizeof *mt);
	mt->sm = sm;
	mt->valid = mt->scaled = mt->scores = mt->drop = mt->out = IR_NONE;
	mt->g = mt->dq = mt->dk = mt->dv = IR_NONE;
	mt->scale = 1;
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
	return n_bwd == 0 || match_grad(&c, bwd, n_bwd);
}
