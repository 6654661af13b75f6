/*
 * fuse_match.h - the chain matching that the dot-product (fuse_match.c)
 * and additive (fuse_additive_match.c) attention matchers share, private
 * to passes/.
 *
 * Both read a function's graph from a softmax outwards and meet the same
 * piece on the way: the weights' users (a dropout, the matmul with the
 * values). What differs, the scores, each matcher keeps. The helpers
 * here are defined in fuse_match.c.
 */
#ifndef ATTNC_PASSES_FUSE_MATCH_H
#define ATTNC_PASSES_FUSE_MATCH_H

#include "fuse_attention.h"

/* What a matcher reads (one function and its uses) and where it says why
 * a chain does not match. */
typedef struct fz_view {
	const ir_module *m;
	const ir_func *f;
	const pass_graph_uses *u;
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

/* The name of output o of the function, or "unnamed". */
const char *fz_output_name(const fz_view *v, int32_t o);

/* Sorts the users of the softmax sm (and of its dropout): *drop gets the
 * dropout, *out the matmul with the values (weights on the left,
 * untransposed); both come in as IR_NONE. Any other use (the backward
 * nodes of a gradient function among them), or weights that are an
 * output, blocks the chain: false, and v->why says so. */
bool fz_match_weights(const fz_view *v, ir_id sm, ir_id *drop, ir_id *out);

#endif
