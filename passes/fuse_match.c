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
 * It runs on forward functions, before autodiff: in a gradient function
 * the backward nodes grad_rules.c made for a chain are more users of its
 * weights and block it, and the gradient of a fused node is made by its
 * own rule (fused_attention_grad).
 *
 * The pieces the additive matcher (fuse_additive_match.c) meets as well,
 * the weights' users among them, are shared with it through
 * fuse_match.h.
 */
#include "fuse_match.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- shared with fuse_additive_match.c (fuse_match.h) -------------------- */

pass_match_name pass_match_name_of(const pass_match_view *v, ir_id id)
{
	pass_match_name r;
	snprintf(r.s, sizeof r.s, "%%%u (%s)", id,
		 ir_op_table[pass_match_op(v, id)].name);
	return r;
}

bool pass_match_reject(const pass_match_view *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->why, PASS_MATCH_WHY_CAP, fmt, ap);
	va_end(ap);
	return false;
}

bool pass_match_same_type(const pass_match_view *v, ir_id a, ir_id b)
{
	return ir_type_eq(&pass_match_node(v, a)->type,
			  &pass_match_node(v, b)->type);
}

bool pass_match_const_value(const pass_match_view *v, ir_id id, double *x)
{
	const ir_node *n = pass_match_node(v, id);
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

const char *pass_match_output_name(const pass_match_view *v, int32_t o)
{
	return v->f->output_names && v->f->output_names[o]
		       ? v->f->output_names[o]
		       : "unnamed";
}

/* The output x becomes through layout ops alone (a reshape, a stack of
 * heatmaps), or -1. */
static int32_t output_through_layout(const pass_match_view *v, ir_id x,
				     int depth)
{
	if (pass_match_is_output(v, x))
		return v->u->output[x];
	for (uint32_t k = 0; depth > 0 && k < pass_match_n_uses(v, x); k++) {
		ir_id y = pass_match_use_at(v, x, k);
		ir_op o = pass_match_op(v, y);
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
static bool other_use(const pass_match_view *v, ir_id w, ir_id x)
{
	int32_t o = output_through_layout(v, x, 8);
	if (o < 0)
		return pass_match_reject(v, "the weights %s are also used by %s",
					 pass_match_name_of(v, w).s,
					 pass_match_name_of(v, x).s);
	return pass_match_reject(v,
				 "the weights %s are also used by %s, which becomes "
				 "output %d (%s) of @%s: fusing would lose them",
				 pass_match_name_of(v, w).s,
				 pass_match_name_of(v, x).s, o,
				 pass_match_output_name(v, o), v->f->name);
}

/* The weights' users being sorted (pass_match_weights). */
typedef struct users {
	ir_id sm;
	ir_id *drop, *out;
} users;

/* The users of w (the softmax or its dropout): a dropout and the matmul
 * with the values (weights on the left, untransposed). */
static bool sort_users(const pass_match_view *v, const users *us, ir_id w)
{
	for (uint32_t k = 0; k < pass_match_n_uses(v, w); k++) {
		ir_id x = pass_match_use_at(v, w, k);
		const ir_node *n = pass_match_node(v, x);
		bool is_left = n->op == IR_OP_MATMUL &&
			       pass_match_arg(v, x, 0) == w &&
			       pass_match_arg(v, x, 1) != w;
		if (n->op == IR_OP_DROPOUT && w == us->sm &&
		    *us->drop == IR_NONE) {
			*us->drop = x;
		} else if (is_left && !n->attr.matmul.ta && *us->out == IR_NONE &&
			   (w != us->sm || *us->drop == IR_NONE)) {
			*us->out = x;
		} else {
			return other_use(v, w, x);
		}
	}
	return true;
}

bool pass_match_weights(const pass_match_view *v, ir_id sm, ir_id *drop,
			ir_id *out)
{
	users us = {sm, drop, out};
	int32_t o = v->u->output[sm];
	if (o >= 0)
		return pass_match_reject(v,
					 "the weights are output %d (%s) of @%s: fusing "
					 "would lose them",
					 o, pass_match_output_name(v, o),
					 v->f->name);
	if (!sort_users(v, &us, sm))
		return false;
	if (*drop != IR_NONE) {
		if (*out != IR_NONE)
			return pass_match_reject(v,
						 "the weights are also used by %s "
						 "besides their dropout",
						 pass_match_name_of(v, *out).s);
		if (pass_match_is_output(v, *drop))
			return pass_match_reject(v,
						 "the dropped weights %s are output %d "
						 "of @%s",
						 pass_match_name_of(v, *drop).s,
						 v->u->output[*drop],
						 v->f->name);
		if (!sort_users(v, &us, *drop))
			return false;
	}
	if (*out == IR_NONE)
		return pass_match_reject(
			v, "the weights are not multiplied with values "
			   "(no matmul takes them as its left operand)");
	return true;
}

/* ---- the dot-product chain ------------------------------------------- */

typedef struct cx {
	pass_match_view v;
	pass_attn_match *mt;
} cx;

static bool is_last_two_swap(const cx *c, ir_id id)
{
	const ir_node *n = pass_match_node(&c->v, id);
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
	return pass_match_arg(&c->v, x, 0);
}

/* ---- the forward chain ------------------------------------------------------- */

/* x = S0 * c, c * S0 or S0 / c with c a constant of equal elements that
 * does not broadcast S0: records the scale and returns S0; else x. */
static ir_id match_scale(const cx *c, ir_id x)
{
	pass_attn_match *mt = c->mt;
	double v;
	ir_op o = pass_match_op(&c->v, x);
	if (o != IR_OP_MUL && o != IR_OP_DIV)
		return x;
	for (uint32_t side = 0; side < (o == IR_OP_MUL ? 2u : 1u); side++) {
		ir_id k = pass_match_arg(&c->v, x, 1 - side),
		      s = pass_match_arg(&c->v, x, side);
		if (!pass_match_const_value(&c->v, k, &v) ||
		    !pass_match_same_type(&c->v, x, s))
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
		return pass_match_reject(&c->v, "the %s %s are output %d of @%s",
					 what, pass_match_name_of(&c->v, id).s,
					 c->v.u->output[id], c->v.f->name);
	for (uint32_t k = 0; k < pass_match_n_uses(&c->v, id); k++)
		if (pass_match_use_at(&c->v, id, k) != user)
			return pass_match_reject(
				&c->v, "the %s %s are also used by %s", what,
				pass_match_name_of(&c->v, id).s,
				pass_match_name_of(&c->v,
						   pass_match_use_at(&c->v, id,
								     k))
					.s);
	return true;
}

/* The scores: matmul(Q, K^T) of rank-3 operands of one batch size. */
static bool match_scores(const cx *c, ir_id x)
{
	pass_attn_match *mt = c->mt;
	x = match_scale(c, x);
	mt->scores = x;
	if (pass_match_op(&c->v, x) != IR_OP_MATMUL)
		return pass_match_reject(&c->v,
					 "its scores come from %s, not from a matmul of "
					 "queries and keys",
					 pass_match_name_of(&c->v, x).s);
	if (mt->scaled != IR_NONE &&
	    (!used_only_by(c, mt->scaled, mt->sm, "scaled scores") ||
	     !used_only_by(c, x, mt->scaled, "scores")))
		return false;
	if (mt->scaled == IR_NONE && !used_only_by(c, x, mt->sm, "scores"))
		return false;
	const ir_node *s = pass_match_node(&c->v, x);
	mt->q_t = s->attr.matmul.ta;
	mt->k_t = !s->attr.matmul.tb;
	mt->q = through_transpose(c, pass_match_arg(&c->v, x, 0), &mt->q_t);
	mt->k = through_transpose(c, pass_match_arg(&c->v, x, 1), &mt->k_t);
	const ir_type *qt = &pass_match_node(&c->v, mt->q)->type,
		      *kt = &pass_match_node(&c->v, mt->k)->type;
	if (qt->rank != 3 || kt->rank != 3 ||
	    !ir_dim_eq(qt->dims[0], kt->dims[0]))
		return pass_match_reject(&c->v,
					 "the scores %s multiply operands that are not "
					 "(N, Q, d) and (N, K, d) of one N",
					 pass_match_name_of(&c->v, x).s);
	return true;
}

static bool match_weights(const cx *c)
{
	pass_attn_match *mt = c->mt;
	return pass_match_weights(&c->v, mt->sm, &mt->drop, &mt->out);
}

/* The product with the values: V (N, K, dv) of the scores' N and K. */
static bool match_values(const cx *c)
{
	pass_attn_match *mt = c->mt;
	const ir_node *o = pass_match_node(&c->v, mt->out);
	mt->v_t = o->attr.matmul.tb;
	mt->v = through_transpose(c, pass_match_arg(&c->v, mt->out, 1),
				  &mt->v_t);
	const ir_type *vt = &pass_match_node(&c->v, mt->v)->type,
		      *kt = &pass_match_node(&c->v, mt->k)->type;
	ir_dim vk = vt->dims[mt->v_t ? 2 : 1], kk = kt->dims[mt->k_t ? 2 : 1];
	if (vt->rank != 3 || !ir_dim_eq(vt->dims[0], kt->dims[0]) ||
	    !ir_dim_eq(vk, kk))
		return pass_match_reject(&c->v,
					 "the values of %s are not (N, K, dv) for the "
					 "keys' N and K",
					 pass_match_name_of(&c->v, mt->out).s);
	ir_dim d = kt->dims[mt->k_t ? 1 : 2], dv = vt->dims[mt->v_t ? 1 : 2];
	if ((ir_dim_is_static(d) && d.coef > PASS_ATTN_MAX_WIDTH) ||
	    (ir_dim_is_static(dv) && dv.coef > PASS_ATTN_MAX_WIDTH))
		return pass_match_reject(&c->v,
					 "its heads are %lld wide (values %lld): the "
					 "fused kernels take at most %d",
					 (long long)d.coef, (long long)dv.coef,
					 PASS_ATTN_MAX_WIDTH);
	return true;
}

/* ---- the match --------------------------------------------------------------------- */

bool pass_attn_match_at(const ir_module *m, const ir_func *f,
			const pass_graph_uses *u, ir_id sm, pass_attn_match *mt)
{
	cx c = {{m, f, u, mt->why}, mt};
	memset(mt, 0, sizeof *mt);
	mt->sm = sm;
	mt->valid = mt->scaled = mt->scores = mt->drop = mt->out = IR_NONE;
	mt->scale = 1;
	const ir_node *s = pass_match_node(&c.v, sm);
	if (s->type.rank != 3 || s->type.dtype != IR_F32)
		return pass_match_reject(&c.v,
					 "the weights have rank %d; the fused kernel "
					 "takes (N, Q, K)",
					 s->type.rank);
	if (s->op == IR_OP_MASKED_SOFTMAX)
		mt->valid = pass_match_arg(&c.v, sm, 1);
	return match_scores(&c, pass_match_arg(&c.v, sm, 0)) &&
	       match_weights(&c) && match_values(&c);
}
