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
typedef struct pass_match_view {
	const ir_module *m;
	const ir_func *f;
	const pass_graph_uses *u;
	char *why; /* PASS_MATCH_WHY_CAP bytes: the match's why[] */
} pass_match_view;

static inline const ir_node *pass_match_node(const pass_match_view *v, ir_id id)
{
	return &v->f->g.nodes[id];
}

static inline ir_op pass_match_op(const pass_match_view *v, ir_id id)
{
	return v->f->g.nodes[id].op;
}

static inline ir_id pass_match_arg(const pass_match_view *v, ir_id id,
				   uint32_t i)
{
	return ir_arg(&v->f->g, id, i);
}

static inline uint32_t pass_match_n_uses(const pass_match_view *v, ir_id id)
{
	return v->u->start[id + 1] - v->u->start[id];
}

static inline ir_id pass_match_use_at(const pass_match_view *v, ir_id id,
				      uint32_t k)
{
	return v->u->list[v->u->start[id] + k];
}

static inline bool pass_match_is_output(const pass_match_view *v, ir_id id)
{
	return v->u->output[id] >= 0;
}

/* "%12 (add)", for messages. */
typedef struct pass_match_name {
	char s[48];
} pass_match_name;

pass_match_name pass_match_name_of(const pass_match_view *v, ir_id id);

/* Writes the reason into v->why; returns false, for `return pass_match_reject(..)`. */
bool pass_match_reject(const pass_match_view *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

bool pass_match_same_type(const pass_match_view *v, ir_id a, ir_id b);

/* True if id is a CONST whose elements (at least one) all equal; *x gets
 * the value. */
bool pass_match_const_value(const pass_match_view *v, ir_id id, double *x);

/* The name of output o of the function, or "unnamed". */
const char *pass_match_output_name(const pass_match_view *v, int32_t o);

/* Sorts the users of the softmax sm (and of its dropout): *drop gets the
 * dropout, *out the matmul with the values (weights on the left,
 * untransposed); both come in as IR_NONE. Any other use (the backward
 * nodes of a gradient function among them), or weights that are an
 * output, blocks the chain: false, and v->why says so. */
bool pass_match_weights(const pass_match_view *v, ir_id sm, ir_id *drop,
			ir_id *out);

#endif
