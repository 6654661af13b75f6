/*
 * fuse_attention.h - what the attention fusion pass (fuse_attention.c)
 * shares with its matcher (fuse_match.c), private to passes/.
 *
 * The matcher looks at one softmax or masked softmax and decides whether
 * it is the middle of an attention
 *
 *   S = matmul(Q, K^T) [* c or / c] ; P = [masked_]softmax(S[, valid]) ;
 *   [P' = dropout(P)] ; O = matmul(P or P', V)
 *
 * whose intermediate results nothing else needs. In a gradient function
 * (pass_autodiff) the weights also feed the backward nodes the gradient
 * rules made for the chain; the matcher then recognizes those too: the
 * contributions dQ, dK, dV the chain makes to the gradients of Q, K, V,
 * all computed from the output's gradient G. When it does not match, it
 * says why, naming the op or use that blocks it: the same words the pass
 * leaves behind and pass_explain_fusion prints.
 */
#ifndef ATTNC_PASSES_FUSE_ATTENTION_H
#define ATTNC_PASSES_FUSE_ATTENTION_H

#include "ir.h"

/* The users of every node of a function, and which nodes are outputs. */
typedef struct fz_uses {
	uint32_t *start; /* n_nodes + 1: users of i at list[start[i] ..
			  * start[i + 1]), one entry per operand slot */
	ir_id *list;
	int32_t *output; /* per node: the first output it is, or -1 */
} fz_uses;

bool fz_uses_build(ir_ctx *ctx, const ir_func *f, fz_uses *u);
void fz_uses_fini(ir_ctx *ctx, fz_uses *u);

/* One attention found around a softmax. */
typedef struct fz_match {
	ir_id sm;      /* the softmax */
	ir_id valid;   /* its valid lengths, or IR_NONE */
	ir_id scaled;  /* the MUL or DIV by the constant, or IR_NONE */
	ir_id scores;  /* the matmul of queries and keys */
	ir_id drop;    /* the dropout of the weights, or IR_NONE */
	ir_id out;     /* the matmul of the weights and the values */
	ir_id q, k, v; /* operands as stored */
	bool q_t, k_t, v_t; /* stored transposed: q^T (N, d, Q) and so on */
	double scale;   /* the factor: c, or 1 / c for a division */
	double scale_c; /* the constant c as the graph holds it */
	/* The backward part, in a gradient function. */
	bool has_grad;
	ir_id g;          /* the gradient of out */
	ir_id dq, dk, dv; /* the contributions to replace, or IR_NONE */
	char why[240];    /* why not, when it does not match */
} fz_match;

/* Matches the attention around softmax node sm of f. Returns false, with
 * the reason in mt->why, if there is none to fuse. */
bool fz_match_at(const ir_module *m, const ir_func *f, const fz_uses *u,
		 ir_id sm, fz_match *mt);

#endif
