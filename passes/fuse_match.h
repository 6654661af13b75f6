/*
 * fuse_match.h - the chain matching that the dot-product (fuse_match.c)
 * and additive (fuse_additive_match.c) attention matchers share, private
 * to passes/.
 *
 * Both read a function's graph from a softmax outwards and meet the same
 * pieces on the way: the weights' users (a dropout, the matmul with the
 * values, the backward nodes of a gradient function), the softmax rule
 * y (g - sum(g y)) of grad.c, the valid-length mask grad_build.c makes
 * and the matmul rule's G V^T. What differs, the scores and the parts of
 * the gradient to replace, each matcher keeps. The helpers here are
 * defined in fuse_match.c.
 */
#ifndef ATTNC_PASSES_FUSE_MATCH_H
#define ATTNC_PASSES_FUSE_MATCH_H

#include "fuse_attention.h"

/* What a matcher reads (one function and its uses) and where it says why
 * a chain does not match. */
typedef struct fz_view {
	const ir_module *m;
	const ir_func *f;
	const fz_uses *u;
	char *why; /* FZ_WHY_CAP bytes: the match's why[] */
} fz_view;

static inline const ir_node *fz_node(const fz_view *v, ir_id id)
{
	return &v->f->g.nodes[id];
}

static inline ir_op fz_op(const fz_view *v, ir_id id)
{
	return v->f->g.nodes[id].op;
}

static inline ir_id fz_arg(const fz_view *v, ir_id id, uint32_t i)
{
	return ir_arg(&v->f->g, id, i);
}

static inline uint32_t fz_n_uses(const fz_view *v, ir_id id)
{
	return v->u->start[id + 1] - v->u->start[id];
}

static inline ir_id fz_use_at(const fz_view *v, ir_id id, uint32_t k)
{
	return v->u->list[v->u->start[id] + k];
}

static inline bool fz_is_output(const fz_view *v, ir_id id)
{
	return v->u->output[id] >= 0;
}

/* The one user of id, or IR_NONE if it has another number of uses or is
 * an output. */
ir_id fz_only_user(const fz_view *v, ir_id id);

/* "%12 (add)", for messages. */
typedef struct fz_name {
	char s[48];
} fz_name;

fz_name fz_name_of(const fz_view *v, ir_id id);

/* Writes the reason into v->why; returns false, for `return fz_nope(..)`. */
bool fz_nope(const fz_view *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

bool fz_same_type(const fz_view *v, ir_id a, ir_id b);

/* True if id is a CONST whose elements (at least one) all equal; *x gets
 * the value. */
bool fz_const_value(const fz_view *v, ir_id id, double *x);

/* True if id is a CONST whose elements (at least one) all equal x. */
bool fz_is_const_of(const fz_view *v, ir_id id, double x);

/* The other operand of binary node x when one is `one`; IR_NONE if
 * neither is. */
ir_id fz_other_operand(const fz_view *v, ir_id x, ir_id one);

/* The name of output o of the function, or "unnamed". */
const char *fz_output_name(const fz_view *v, int32_t o);

/* Sorts the users of the softmax sm (and of its dropout): *drop gets the
 * dropout, *out the matmul with the values (weights on the left,
 * untransposed), bwd[] (8 at most) the backward nodes of a gradient
 * function; *drop and *out come in as IR_NONE. Any other use, or weights
 * that are an output, blocks the chain: false, and v->why says so. */
bool fz_match_weights(const fz_view *v, ir_id sm, ir_id *drop, ir_id *out,
		      ir_id *bwd, uint32_t *n_bwd);

/* The mask (k < valid) the masked softmax rule multiplies by, for the
 * masked softmax sm of lengths valid. */
bool fz_is_valid_mask(const fz_view *v, ir_id sm, ir_id valid, ir_id mask);

/* The softmax rule y (g - sum(g y)): t = g*y, s = sum(t), u = g - s,
 * w = y*u, given the two muls that use y = the weights. Returns g (the
 * weights' gradient) and the rule's result in *w_out, or IR_NONE. */
ir_id fz_match_softmax_grad(const fz_view *v, ir_id y, const ir_id *muls,
			    ir_id *w_out);

/* g_w (the weights' gradient) back to the output's gradient G: through
 * the dropout rule (the same dropout as the forward's drop, or none for
 * IR_NONE) and the matmul rule's G V^T for out = matmul(P', V). Returns
 * G or IR_NONE. */
ir_id fz_match_g(const fz_view *v, ir_id drop, ir_id out, ir_id gw);

/* The weights' backward nodes bwd[] (fz_match_weights) as grad.c makes
 * them: the matmul dV = P'^T G alone (*w gets IR_NONE), or with the
 * softmax rule's two muls (*w gets the rule's result, which the caller
 * follows on to the scores). Returns G, the gradient of the matmul out
 * with the values, or IR_NONE. Checks neither dV nor what follows *w. */
ir_id fz_match_grad_g(const fz_view *v, ir_id sm, ir_id drop, ir_id out,
		      const ir_id *bwd, uint32_t n_bwd, ir_id *w);

/* Says that backward node x is not the chain's gradient; returns false. */
bool fz_not_grad(const fz_view *v, ir_id x);

#endif
