/*
 * attn_row.h - what the reference kernels of the fused attention ops
 * (fused_attention.c, fused_additive.c) share, private to interp/: one
 * query row of K weights at a time, the masked softmax of its scores,
 * the dropout of the weights (the DROPOUT op's draws) and the softmax
 * gradient rule of docs/autodiff.md, each rounded as the unfused graph
 * rounds it. The kernels differ only in how a row's scores are made and
 * where its gradients go.
 */
#ifndef ATTNC_INTERP_ATTN_ROW_H
#define ATTNC_INTERP_ATTN_ROW_H

#include "interp_impl.h"

/* One row's state and the attributes of a fused attention node. */
typedef struct interp_attn_row {
	const interp_kernel *k;
	const interp_tensor *valid; /* (B) or (B, Q) lengths, or NULL */
	int64_t B, Q, K;            /* the lengths' batch, queries, keys */
	double scale, fill, p, keep_scale;
	bool is_dropout;
	uint64_t stream;
	double *prob; /* K: the row's softmax weights */
	double *dp;   /* K: the row's dP, then dS (gradient only) */
} interp_attn_row;

/* Whether valid (or NULL) fits (B) or (B, Q), size-1 axes broadcast. */
bool interp_attn_valid_fits(const interp_tensor *valid, int64_t B, int64_t Q);

/* Reads the node's attention attributes into r (whose k, valid, B, Q, K
 * the caller set) and allocates the row scratch, dp too if has_grad.
 * Returns false after interp_fail or on no memory. */
bool interp_attn_row_init(interp_attn_row *r, bool has_grad);

/* Frees the row scratch. */
void interp_attn_row_fini(const interp_attn_row *r);

/* The valid length of query row i of batch element b (K without a
 * mask). */
int64_t interp_attn_row_valid(const interp_attn_row *r, int64_t b, int64_t i);

/* r->prob = softmax of the row's scores r->prob[0..K) (those >= valid
 * already the fill), as the interpreter's masked softmax computes it. */
void interp_attn_row_softmax(const interp_attn_row *r);

/* Whether dropout keeps weight (n, i, j): the DROPOUT op's draw for the
 * element n*Q*K + i*K + j of the (N, Q, K) weights. */
bool interp_attn_keeps(const interp_attn_row *r, int64_t n, int64_t i,
		       int64_t j);

/* Weight j of row (n, i) after dropout, as the DROPOUT op scales it. */
double interp_attn_dropped(const interp_attn_row *r, int64_t n, int64_t i,
			   int64_t j);

/* From r->dp[j] = dPd (the gradient of the dropped weights) of row
 * (n, i) to r->dp[j] = scale dS: dP = dropout(dPd), D = sum_k P dP,
 * dS = P (dP - D) where k < valid (else 0). */
void interp_attn_row_ds(const interp_attn_row *r, int64_t n, int64_t i,
			int64_t valid);

#endif
