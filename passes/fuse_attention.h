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
 * whose intermediate results nothing else needs. It runs before autodiff
 * (pass_pipeline_forward), whose rule for fused_attention makes the
 * fused_attention_grad of a gradient function. When it does not match, it
 * says why, naming the op or use that blocks it: the same words the pass
 * leaves behind and pass_explain_fusion prints.
 */
#ifndef ATTNC_PASSES_FUSE_ATTENTION_H
#define ATTNC_PASSES_FUSE_ATTENTION_H

#include "graph.h"
#include "ir.h"

#define PASS_MATCH_WHY_CAP 240 /* bytes of a match's why[] */

/* The widest head (d of the queries and keys, dv of the values) fused:
 * the fused kernels' code unrolls every column group of a head, so it
 * grows with the width (about 14 lines of LLVM IR a column at 1024);
 * a wider head, where the products dominate anyway, stays unfused.
 * FlashAttention stops at the same 256. */
#define PASS_ATTN_MAX_WIDTH 256

/* One attention found around a softmax. */
typedef struct pass_attn_match {
	ir_id sm;           /* the softmax */
	ir_id valid;        /* its valid lengths, or IR_NONE */
	ir_id scaled;       /* the MUL or DIV by the constant, or IR_NONE */
	ir_id scores;       /* the matmul of queries and keys */
	ir_id drop;         /* the dropout of the weights, or IR_NONE */
	ir_id out;          /* the matmul of the weights and the values */
	ir_id q, k, v;      /* operands as stored */
	bool q_t, k_t, v_t; /* stored transposed: q^T (N, d, Q) and so on */
	double scale;       /* the factor: c, or 1 / c for a division */
	double scale_c;     /* the constant c as the graph holds it */
	char why[PASS_MATCH_WHY_CAP]; /* why not, when it does not match */
} pass_attn_match;

/* Matches the attention around softmax node sm of f. Returns false, with
 * the reason in mt->why, if there is none to fuse. */
bool pass_attn_match_at(const ir_module *m, const ir_func *f,
			const pass_graph_uses *u, ir_id sm, pass_attn_match *mt);

/* ---- heads (fuse_heads.c) -------------------------------------------------- */

/* Multi-head attention splits its heads off (B, T, h*w) tensors,
 *   split = reshape(permute(reshape(X, [B, T, h, w]), [0, 2, 1, 3]),
 *                   [B*h, T, w])
 * (the prelude's split_heads), runs one attention per head, and merges
 * the (B*h, Q, dv) result back,
 *   merge = reshape(permute(reshape(O, [B, h, Q, dv]), [0, 2, 1, 3]), ...)
 * fuse_heads lets a fused node read X and write the merged layout
 * itself (attr heads = h) when these checks pass; pass_explain_fusion
 * makes the same checks on the unfused chain. */
typedef struct pass_heads_match {
	uint32_t h;    /* heads */
	ir_dim b;      /* the batch B of the unsplit tensors (N = B*h) */
	ir_id q, k, v; /* unsplit: (B, Q, h*d), (B, K, h*d), (B, K, h*dv) */
	ir_id valid;   /* one length per batch element (B) or (B, Q), or
			* IR_NONE */
	ir_id g;       /* the unsplit gradient (B, Q, h*dv), or IR_NONE */
	char why[240]; /* why not, when a check fails */
} pass_heads_match;

/* The number of heads if x is a head split (above), with X in *src;
 * else 0. */
uint32_t pass_heads_split(const ir_func *f, ir_id x, ir_id *src);

/* Whether an attention of operands q, k, v, valid (or IR_NONE) and, for
 * its gradient, g (or IR_NONE) reads head splits of one h and batch, and
 * its lengths repeated for each head (or none): fills hd, or says why
 * not in hd->why. */
bool pass_heads_operands(const ir_func *f, ir_id q, ir_id k, ir_id v,
			 ir_id valid, ir_id g, pass_heads_match *hd);

/* Whether x (N, T, w), an attention's result or one part of its
 * gradient (`what`, for the message), is read only through merges of
 * hd's heads, none of whose nodes but the last reshapes is an output. */
bool pass_heads_merged_only(const ir_func *f, const pass_graph_uses *u, ir_id x,
			    pass_heads_match *hd, const char *what);

#endif
