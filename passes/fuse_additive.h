/*
 * fuse_additive.h - what the additive attention fusion (fuse_additive.c)
 * shares with its matcher (fuse_additive_match.c) and with the
 * fuse_attention pass that runs it (fuse_attention.c), private to
 * passes/.
 *
 * The matcher looks at one softmax or masked softmax and decides whether
 * it is the middle of an additive (Bahdanau) attention as the pipeline
 * leaves it:
 *
 *   A = add(reshape(QP) (N, Q, 1, H), reshape(KP) (N, 1, K, H)) ;
 *   T = tanh(A) ; S = reshape(matmul(T, wv (H, 1)) (N, Q, K, 1)) (N, Q, K) ;
 *   P = [masked_]softmax(S[, valid]) ; [P' = dropout(P)] ;
 *   O = matmul(P or P', V)
 *
 * whose intermediates nothing else needs. In a gradient function
 * (pass_autodiff) it also recognizes the backward nodes the gradient
 * rules made for the chain, after simplify and cse: the contributions to
 * the gradients of QP and KP (the sums, or reshapes, of dA), of wv (the
 * matmul of T and dS) and of V, all computed from the output's gradient
 * G. When it does not match, it says why, in the words the pass leaves
 * behind and pass_explain_fusion prints.
 */
#ifndef ATTNC_PASSES_FUSE_ADDITIVE_H
#define ATTNC_PASSES_FUSE_ADDITIVE_H

#include "fuse_attention.h"

#define FA_MAX_PARTS 8 /* nodes of one role (dqp, dkp) to replace */

/* What a replaced node of the gradient becomes: a part of the packed
 * fused_additive_attention_grad. */
typedef enum fa_part { FA_DQ, FA_DK, FA_DW, FA_DV } fa_part;

/* One additive attention found around a softmax. */
typedef struct fa_match {
	ir_id sm;        /* the softmax */
	ir_id valid;     /* its valid lengths, or IR_NONE */
	ir_id scores;    /* the reshape of the projection to (N, Q, K) */
	ir_id proj;      /* matmul(T, wv) (N, Q, K, 1) */
	ir_id t, a;      /* the tanh and the add */
	ir_id qs, ks;    /* the add's operands (N, Q, 1, H), (N, 1, K, H) */
	ir_id wv;        /* the scoring vector as stored (H, 1) */
	ir_id drop;      /* the dropout of the weights, or IR_NONE */
	ir_id out;       /* the matmul of the weights and the values */
	ir_id v;         /* the values (N, K, dv) */
	bool is_additive; /* the scores come from a tanh and a projection:
			   * `why` then speaks of this matcher's chain */
	/* The backward part, in a gradient function. */
	bool has_grad;
	ir_id g;         /* the gradient of out */
	ir_id tt;        /* the tanh rule's T T, or IR_NONE */
	ir_id parts[FA_MAX_PARTS * 2 + 2]; /* nodes to replace ... */
	fa_part roles[FA_MAX_PARTS * 2 + 2]; /* ... and what each becomes */
	uint32_t n_parts;
	char why[FZ_WHY_CAP]; /* why not, when it does not match */
} fa_match;

/* Matches the additive attention around softmax node sm of f. Returns
 * false, with the reason in mt->why, if there is none to fuse. */
bool fa_match_at(const ir_module *m, const ir_func *f, const fz_uses *u,
		 ir_id sm, fa_match *mt);

/* Replaces every additive attention of f by one fused_additive_attention
 * node (and its backward nodes by parts of one
 * fused_additive_attention_grad), as pass_fuse_attention does for
 * dot-product attention. Returns false after reporting an error. */
bool pass_fuse_additive_func(ir_module *m, ir_func *f);

/* Writes what fuses for a matched mt: "fuses: ... into
 * fused_additive_attention[, and its gradient ...]". */
void pass_fuse_additive_print(const ir_func *f, const fa_match *mt,
			      FILE *out);

#endif
