/*
 * fuse_additive_match.c - finding the additive attentions to fuse
 * (fuse_additive.h).
 *
 * The forward chain is read from the softmax outwards: its input back
 * through the reshape that squeezes the projection, the matmul with the
 * scoring vector wv, the tanh and the broadcasting add of the two
 * unsqueezed projections; its users forward through an optional dropout
 * to the matmul with the values. Every intermediate must be used by the
 * chain alone and be no output. It runs on forward functions (before
 * autodiff): in a gradient function the chain's backward nodes are more
 * users, which block it, and the gradient of a fused node is its rule's
 * fused_additive_attention_grad. The weights' users are sorted as for
 * dot-product attention, by fuse_match.h's helper.
 */
#include "fuse_additive.h"
#include "fuse_match.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct cx {
	pass_match_view v;
	pass_additive_match *mt;
} cx;

static const ir_type *type_of(const cx *c, ir_id id)
{
	return &pass_match_node(&c->v, id)->type;
}

/* Every use of id is by node user (or users of `also`, up to n_also),
 * and id is no output. */
static bool used_only_by(const cx *c, ir_id id, const ir_id *users,
			 uint32_t n_users, const char *what)
{
	if (pass_match_is_output(&c->v, id))
		return pass_match_reject(&c->v, "the %s %s are output %d of @%s",
					 what, pass_match_name_of(&c->v, id).s,
					 c->v.u->output[id], c->v.f->name);
	for (uint32_t k = 0; k < pass_match_n_uses(&c->v, id); k++) {
		bool is_known = false;
		for (uint32_t i = 0; i < n_users && !is_known; i++)
			is_known = pass_match_use_at(&c->v, id, k) == users[i];
		if (!is_known)
			return pass_match_reject(
				&c->v, "the %s %s are also used by %s", what,
				pass_match_name_of(&c->v, id).s,
				pass_match_name_of(&c->v,
						   pass_match_use_at(&c->v, id,
								     k))
					.s);
	}
	return true;
}

/* ---- the forward chain ------------------------------------------------------ */

/* The add's operands: (N, Q, 1, H) and (N, 1, K, H) for the scores'
 * (N, Q, K), in either order. */
static bool match_add(const cx *c)
{
	pass_additive_match *mt = c->mt;
	const ir_type *st = type_of(c, mt->scores), *at = type_of(c, mt->a);
	ir_dim one = ir_dim_static(1), H = at->dims[3];
	ir_dim wq[4] = {st->dims[0], st->dims[1], one, H};
	ir_dim wk[4] = {st->dims[0], one, st->dims[2], H};
	for (uint32_t side = 0; side < 2; side++) {
		ir_id q = pass_match_arg(&c->v, mt->a, side),
		      k = pass_match_arg(&c->v, mt->a, 1 - side);
		if (ir_shape_is(type_of(c, q), 4, wq) &&
		    ir_shape_is(type_of(c, k), 4, wk)) {
			mt->qs = q;
			mt->ks = k;
			return true;
		}
	}
	return pass_match_reject(&c->v,
				 "the add %s does not add (N, Q, 1, H) query and "
				 "(N, 1, K, H) key projections",
				 pass_match_name_of(&c->v, mt->a).s);
}

/* S = reshape(matmul(tanh(add(..)), wv (H, 1))) to (N, Q, K). */
static bool match_scores(const cx *c, ir_id s)
{
	pass_additive_match *mt = c->mt;
	mt->scores = s;
	if (pass_match_op(&c->v, s) != IR_OP_RESHAPE ||
	    pass_match_op(&c->v, pass_match_arg(&c->v, s, 0)) != IR_OP_MATMUL)
		return pass_match_reject(
			&c->v,
			"its scores come from %s, not from a projection of "
			"tanh features",
			pass_match_name_of(&c->v, s).s);
	mt->proj = pass_match_arg(&c->v, s, 0);
	mt->t = pass_match_arg(&c->v, mt->proj, 0);
	mt->wv = pass_match_arg(&c->v, mt->proj, 1);
	if (pass_match_op(&c->v, mt->t) != IR_OP_TANH)
		return pass_match_reject(
			&c->v,
			"its scores come from %s, not from a projection of "
			"tanh features",
			pass_match_name_of(&c->v, mt->proj).s);
	mt->is_additive = true;
	const ir_node *p = pass_match_node(&c->v, mt->proj);
	const ir_type *tt = type_of(c, mt->t), *wt = type_of(c, mt->wv),
		      *st = type_of(c, s);
	ir_dim want[4] = {st->dims[0], st->dims[1], st->dims[2],
			  tt->rank == 4 ? tt->dims[3] : ir_dim_static(0)};
	ir_dim wcol[2] = {want[3], ir_dim_static(1)};
	if (p->attr.matmul.ta || p->attr.matmul.tb ||
	    !ir_shape_is(tt, 4, want) || !ir_shape_is(wt, 2, wcol))
		return pass_match_reject(
			&c->v,
			"the projection %s is not of (N, Q, K, H) features "
			"by an (H, 1) vector",
			pass_match_name_of(&c->v, mt->proj).s);
	mt->a = pass_match_arg(&c->v, mt->t, 0);
	if (pass_match_op(&c->v, mt->a) != IR_OP_ADD)
		return pass_match_reject(&c->v,
					 "its features are the tanh of %s, not of a sum of "
					 "projections",
					 pass_match_name_of(&c->v, mt->a).s);
	return match_add(c) && used_only_by(c, s, &mt->sm, 1, "scores") &&
	       used_only_by(c, mt->proj, &s, 1, "projected scores") &&
	       used_only_by(c, mt->a, &mt->t, 1, "summed projections");
}

static bool match_weights(const cx *c)
{
	pass_additive_match *mt = c->mt;
	return pass_match_weights(&c->v, mt->sm, &mt->drop, &mt->out);
}

/* The product with the values: V (N, K, dv), untransposed. */
static bool match_values(const cx *c)
{
	pass_additive_match *mt = c->mt;
	mt->v = pass_match_arg(&c->v, mt->out, 1);
	const ir_type *vt = type_of(c, mt->v), *st = type_of(c, mt->scores);
	if (pass_match_node(&c->v, mt->out)->attr.matmul.tb || vt->rank != 3 ||
	    !ir_dim_eq(vt->dims[0], st->dims[0]) ||
	    !ir_dim_eq(vt->dims[1], st->dims[2]))
		return pass_match_reject(&c->v,
					 "the values of %s are not (N, K, dv) for the "
					 "scores' N and K",
					 pass_match_name_of(&c->v, mt->out).s);
	return true;
}

/* The features and projections are the chain's alone. */
static bool match_features(const cx *c)
{
	pass_additive_match *mt = c->mt;
	return used_only_by(c, mt->t, &mt->proj, 1, "features");
}

/* ---- the match ----------------------------------------------------------------------------- */

bool pass_additive_match_at(const ir_module *m, const ir_func *f,
			    const pass_graph_uses *u, ir_id sm,
			    pass_additive_match *mt)
{
	cx c = {{m, f, u, mt->why}, mt};
	memset(mt, 0, sizeof *mt);
	mt->sm = sm;
	mt->valid = mt->scores = mt->proj = mt->t = mt->a = IR_NONE;
	mt->qs = mt->ks = mt->wv = mt->drop = mt->out = mt->v = IR_NONE;
	const ir_node *s = pass_match_node(&c.v, sm);
	if (s->type.rank != 3 || s->type.dtype != IR_F32)
		return pass_match_reject(&c.v,
					 "the weights have rank %d; the fused kernel "
					 "takes (N, Q, K)",
					 s->type.rank);
	if (s->op == IR_OP_MASKED_SOFTMAX)
		mt->valid = pass_match_arg(&c.v, sm, 1);
	return match_scores(&c, pass_match_arg(&c.v, sm, 0)) &&
	       match_weights(&c) && match_values(&c) && match_features(&c);
}
