/*
 * autodiff.h - what the autodiff pass (autodiff.c) shares with its gradient
 * rules (grad_rules.c) and their node builders (grad_build.c).
 *
 * The pass copies the forward graph of the loss function into a new
 * function, then walks the copied nodes backwards from the loss. Each
 * node's gradient (its adjoint: d loss / d node, same type as the node) is
 * kept in adj[]; the rule of the node's op turns it into contributions to
 * the node's operands, which pass_ad_accum sums. Every builder returns
 * IR_NONE once anything failed (an operand IR_NONE, a shape error, out of
 * memory) and records the failure in ad->is_failed, so rules chain
 * builders without checking each step.
 */
#ifndef ATTNC_PASSES_AUTODIFF_H
#define ATTNC_PASSES_AUTODIFF_H

#include "ir.h"

/* A gradient that covers part of a node along one axis: g fills
 * [start, start + g's size) of the axis, zeros the rest. The slice rule
 * leaves these, so that the slices of one tensor (a GRU's gates, the time
 * steps of a sequence) come back as one concatenation rather than one
 * zero-padded copy each and their sum. */
typedef struct pass_ad_piece {
	ir_id g;
	int32_t axis;
	int64_t start;
	uint32_t next; /* the node's next piece, or UINT32_MAX */
} pass_ad_piece;

typedef struct pass_ad {
	ir_module *m;
	ir_func *f;     /* the gradient function being built */
	uint32_t n_fwd; /* nodes below this are the copied forward graph */
	bool *needs;    /* per forward node: depends on a parameter, so it
			   * gets a gradient */
	ir_id *adj;     /* per forward node: gradient summed so far, or
			   * IR_NONE */
	uint32_t *first_piece; /* per forward node: its first piece, or
				* UINT32_MAX */
	pass_ad_piece *pieces;
	uint32_t n_pieces, pieces_cap;
	ir_loc loc; /* location of the forward node being differentiated */
	ir_id scalars[4]; /* cached rank-0 f32 constants 0, 1, -1, 0.5 */
	bool is_failed;
} pass_ad;

/* The rule of one op: adds to the operands of forward node y the
 * contributions of y's gradient g (pass_ad_accum). */
typedef void (*pass_ad_rule)(pass_ad *ad, ir_id y, ir_id g);

/* The rules, indexed by op (grad_rules.c). */
extern const pass_ad_rule pass_ad_rules[IR_OP_COUNT];

/* Adds contribution g (of the operand's exact type) to the gradient of
 * forward node x; does nothing when x needs no gradient. */
void pass_ad_accum(pass_ad *ad, ir_id x, ir_id g);
/* Adds g as the part [start, start + size) along axis of the gradient of
 * forward node x (which has a static size on that axis); the pass sums
 * the pieces when it reaches x. */
void pass_ad_accum_piece(pass_ad *ad, ir_id x, ir_id g, int axis, int64_t start);
/* True if forward node x gets a gradient. */
bool pass_ad_wants(const pass_ad *ad, ir_id x);

/* ---- builders (grad_build.c): each appends one node or more at ad->loc -- */

ir_type pass_ad_type(const pass_ad *ad, ir_id x);
ir_id pass_ad_op1(pass_ad *ad, ir_op op, ir_id x, const ir_attr *attr);
ir_id pass_ad_op2(pass_ad *ad, ir_op op, ir_id a, ir_id b, const ir_attr *attr);
ir_id pass_ad_select(pass_ad *ad, ir_id c, ir_id a, ir_id b);
/* An op of n operands (fused attention's). */
ir_id pass_ad_opn(pass_ad *ad, ir_op op, const ir_id *args, uint32_t n,
		  const ir_attr *attr);
/* Reshape, broadcast or cast of x to type t (cast: t's dtype). */
ir_id pass_ad_to(pass_ad *ad, ir_op op, ir_id x, const ir_type *t);
ir_id pass_ad_matmul(pass_ad *ad, ir_id a, ir_id b, bool ta, bool tb);
/* sum over the axes of a bitmask; x itself when the mask is empty. */
ir_id pass_ad_sum(pass_ad *ad, ir_id x, uint32_t axes, bool keepdim);
ir_id pass_ad_slice(pass_ad *ad, ir_id x, int axis, int64_t start, int64_t end);
/* The concatenation of n along axis; the one operand itself if n is 1. */
ir_id pass_ad_concat(pass_ad *ad, const ir_id *xs, uint32_t n, int axis);
/* A constant of type t (static dims) from data of t's dtype. */
ir_id pass_ad_const(pass_ad *ad, const ir_type *t, const void *data);
/* A rank-0 f32 constant. */
ir_id pass_ad_scalar(pass_ad *ad, double v);
/* Zeros of type t (a rank-0 zero broadcast to t). */
ir_id pass_ad_zeros(pass_ad *ad, const ir_type *t);

/* g, the gradient of a result of shape g's type, reduced to type t that
 * broadcast to it: summed over the leading axes t lacks and the axes where
 * t has a static 1, then reshaped to t. */
ir_id pass_ad_unbroadcast(pass_ad *ad, ir_id g, const ir_type *t);
/* The number of elements of t over the axes of a bitmask, as an f32
 * scalar (a constant if those dims are static, else computed at run time
 * with keepdim shape). */
ir_id pass_ad_count(pass_ad *ad, const ir_type *t, uint32_t axes);
/* f32 of shape t ([..., K]): 1 where k < len, else 0, with len (i32)
 * giving one length per row and of rank(t) - 1 or rank(t) - 2, aligned
 * with t's leading dims as masked_softmax's valid lengths are. */
ir_id pass_ad_below(pass_ad *ad, const ir_type *t, ir_id len);
/* An attribute-free op of args whose result type is t (embedding_grad,
 * whose type gives V; cross_entropy_grad, of the logits' type). */
ir_id pass_ad_typed(pass_ad *ad, ir_op op, const ir_id *args, uint32_t n,
		    const ir_type *t);

#endif
