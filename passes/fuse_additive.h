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
 * whose intermediates nothing else needs. When it does not match, it
 * says why, in the words the pass leaves behind and pass_explain_fusion
 * prints.
 */
#ifndef ATTNC_PASSES_FUSE_ADDITIVE_H
#define ATTNC_PASSES_FUSE_ADDITIVE_H

#include "fuse_attention.h"

/* One additive attention found around a softmax. */
typedef struct pass_additive_match {
	ir_id sm;         /* the softmax */
	ir_id valid;      /* its valid lengths, or IR_NONE */
	ir_id scores;     /* the reshape of the projection to (N, Q, K) */
	ir_id proj;       /* matmul(T, wv) (N, Q, K, 1) */
	ir_id t, a;       /* the tanh and the add */
	ir_id qs, ks;     /* the add's operands (N, Q, 1, H), (N, 1, K, H) */
	ir_id wv;         /* the scoring vector as stored (H, 1) */
	ir_id drop;       /* the dropout of the weights, or IR_NONE */
	ir_id out;        /* the matmul of the weights and the values */
	ir_id v;          /* the values (N, K, dv) */
	bool is_additive; /* the scores come from a tanh and a projection:
			   * `why` then speaks of this matcher's chain */
	char why[PASS_MATCH_WHY_CAP]; /* why not, when it does not match */
} pass_additive_match;

/* Matches the additive attention around softmax node sm of f. Returns
 * false, with the reason in mt->why, if there is none to fuse. */
bool pass_additive_match_at(const ir_module *m, const ir_func *f,
			    const pass_graph_uses *u, ir_id sm,
			    pass_additive_match *mt);

/* Replaces every additive attention of f by one fused_additive_attention
 * node, as pass_fuse_attention does for dot-product attention. Returns
 * false after reporting an error. */
bool pass_fuse_additive_func(ir_module *m, ir_func *f);

/* Writes what fuses for a matched mt: "fuses: ... into
 * fused_additive_attention". */
void pass_fuse_additive_print(const ir_func *f, const pass_additive_match *mt,
			      FILE *out);

#endif
