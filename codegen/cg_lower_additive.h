/*
 * cg_lower_additive.h - what the fused additive attention kernels
 * (cg_lower_additive.c forward, cg_lower_additive_grad.c backward) share,
 * private to codegen/: the sizes and constants of one fused node, the
 * loop over the H features of one (query, key) pair, vectorized, and the
 * pieces both kernels are made of.
 *
 * Shape letters: N batch, Q queries, K keys, H the width of the
 * projections (d2l's num_hiddens), dv the value width. A kernel works on
 * one query row (n, q) at a time and never holds more than a block of
 * CG_ADDATTN_BLOCK scores of it: the score of key k is
 * sum_h wv[h] tanh(qp[n, q, h] + kp[n, k, h]), computed a vector of h at
 * a time, so the N x Q x K x H features never exist.
 */
#ifndef ATTNC_CG_LOWER_ADDITIVE_H
#define ATTNC_CG_LOWER_ADDITIVE_H

#include "cg_attn.h"

#define CG_ADDATTN_BLOCK 64 /* keys whose scores one block keeps */

typedef struct cg_addattn {
	cg_attn base; /* f, vw, and the helpers of cg_attn.h */
	cg_kernel *k;
	cg_fn *f;
	int64_t N, Q, K, H, dv;
	int64_t hpad, dpad; /* H and dv rounded up to vectors */
	float scale, fill;
	bool has_valid;
	int64_t valid_sn, valid_sq; /* valid's strides along N and Q */
	bool has_dropout;
	int64_t threshold; /* keep iff the top 24 random bits are >= it */
	float keep_scale;  /* 1 / (1 - p) */
	unsigned vw;
	LLVMValueRef drop_on, drop_key;
	LLVMValueRef qp, kp, wv, v, valid, g; /* operands (valid, g: or NULL) */
	LLVMValueRef sb, db; /* CG_ADDATTN_BLOCK floats: scores, dP */
	LLVMValueRef acc;    /* dpad floats: the output row */
	LLVMValueRef tb, dq; /* hpad floats: features, dqp row (grad) */
	/* Grad with K <= CG_ADDATTN_BLOCK, else NULL: the features (K x hpad
	 * floats) and scores (K) of the row's valid keys, kept by pass 1 for
	 * pass 2, which then computes no tanh. */
	LLVMValueRef fcache, scache;
	LLVMValueRef m, l, x; /* f32 variables: max, sum, sum of P dP */
	/* The dead query rows (cg_attn_row_skip_valid): base.n_live valid
	 * lengths among the last operands (0: every row computed), and
	 * base.live_v, live_w, rs_on in the body. is_step: the rows are
	 * step k of a recurrence (cg_attn_row_step), batch n's all live
	 * where k < v[n] (cg_lower_step_live), and step is k (the body's
	 * parameter, cg_kernel_row_step); else rows q < len[n]. */
	bool is_step;
	LLVMValueRef step;
} cg_addattn;

/* Reads the node's sizes and attributes (emits nothing). */
void cg_addattn_shape(cg_addattn *a, const cg_kernel *k, bool is_grad);

/* Makes kernel k a call of the shared function gen emits for a's shape
 * (named kind plus the shape): nodes that differ only in their dropout
 * stream share one body, which takes the stream's key as an argument.
 * gen finds a's operands, buffers and dropout state set. */
typedef void (*cg_addattn_gen)(cg_addattn *a);
void cg_addattn_call_body(cg_kernel *k, const cg_addattn *shape,
			  const char *kind, cg_addattn_gen gen);

/* The live query rows of batch n (an i64 in [0, Q]): all Q unless the
 * kernel leaves dead rows out (a->base.n_live) in a call whose row_skip
 * is set; then rows q < len[n] (t < v[n], keys(v over t < w)), or of a
 * recurrence's step k all Q where k < v[n], else none. */
LLVMValueRef cg_addattn_live(cg_addattn *a, LLVMValueRef n);
/* The valid length of row `row` (n * Q + q) of batch n clamped to [0,
 * K]: the keys whose scores are real (K without a mask). */
LLVMValueRef cg_addattn_row_valid(cg_addattn *a, LLVMValueRef n,
				  LLVMValueRef row);

/* The score of key j for query row `row` of batch n: the features
 * t = tanh(qp + kp) a vector at a time, sum_h t wv, times scale; with
 * a->tb set, t is also stored there (hpad floats). */
LLVMValueRef cg_addattn_score(cg_addattn *a, LLVMValueRef n, LLVMValueRef row,
			      LLVMValueRef j, bool is_store_t);

/* The keep decision (an i1) of dropout for weight j of row `row`, the
 * DROPOUT op's draw for element row * K + j; true when dropout is off for
 * this run. Only for a node with p > 0. */
LLVMValueRef cg_addattn_keep(cg_addattn *a, LLVMValueRef row, LLVMValueRef j);

/* A vector of the first `lanes` floats at p (the rest 0): a masked load
 * unless lanes is the vector width. */
LLVMValueRef cg_addattn_vload(cg_addattn *a, LLVMValueRef p, unsigned lanes);
void cg_addattn_vstore(cg_addattn *a, LLVMValueRef v, LLVMValueRef p,
		       unsigned lanes);

/* Emits body(a, h, lanes, ud) for each vector of [0, width): a loop over
 * the whole vectors (h an i64 value), then the last partial one. */
typedef void (*cg_addattn_vec_fn)(cg_addattn *a, LLVMValueRef h, unsigned lanes,
				  void *ud);
void cg_addattn_vec_loop(cg_addattn *a, int64_t width, cg_addattn_vec_fn body,
			 void *ud);

/* dst[0 .. width) (+)= s * src[0 .. width), a vector at a time (s an f32
 * value); is_acc adds to dst, else overwrites it. */
void cg_addattn_axpy(cg_addattn *a, LLVMValueRef dst, LLVMValueRef src,
		     int64_t width, LLVMValueRef s, bool is_acc);

/* dst[0 .. width) = +0, a vector at a time. */
void cg_addattn_zero(cg_addattn *a, LLVMValueRef dst, int64_t width);
/* The dot product of x[0 .. width) and y[0 .. width). */
LLVMValueRef cg_addattn_dot(cg_addattn *a, LLVMValueRef x, LLVMValueRef y,
			    int64_t width);

/* The loop over keys [lo, hi) in blocks of at most CG_ADDATTN_BLOCK: body is
 * called with the block's first key j0 and count jn (i64 values). */
typedef void (*cg_addattn_block_fn)(cg_addattn *a, LLVMValueRef j0,
				    LLVMValueRef jn, void *ud);
void cg_addattn_blocks(cg_addattn *a, LLVMValueRef lo, LLVMValueRef hi,
		       cg_addattn_block_fn body, void *ud);

/* The sum of the CG_ADDATTN_BLOCK floats at buf (a block's buffer,
 * zero past its keys), a vector at a time: more accurate than a serial
 * sum over the keys, as the unfused softmax's vectorized sums are. */
LLVMValueRef cg_addattn_block_sum(cg_addattn *a, LLVMValueRef buf);

/* The condition (an i1) under which the keys past a row's valid length
 * still count: the running maximum m within CG_ATTN_FILL_MARGIN of the
 * fill (always true for a row of valid length 0, whose m is -inf), or
 * the sum l NaN (a NaN or +inf score: every weight of the row is NaN,
 * the masked keys' too). */
LLVMValueRef cg_addattn_needs_masked(cg_addattn *a);

/* Adds to the vector variable acc (cg_attn_var) |x| (is_abs) or x * 0
 * (+-0 where x is finite, NaN where not) over x[0 .. width), a vector at
 * a time: the scans that tell whether a shortcut keeps the
 * interpreter's non-finite values. */
void cg_addattn_scan_into(cg_addattn *a, LLVMValueRef acc, LLVMValueRef x,
			  int64_t width, bool is_abs);

/* The sum over batch n's value rows [kv, K) (the keys a row skips) of
 * |v| (is_abs: NaN or inf when one of them is not finite, and a bound
 * on every element's magnitude) or of v * 0 (0 when all are finite,
 * else NaN). */
LLVMValueRef cg_addattn_tail_sum(cg_addattn *a, LLVMValueRef n, LLVMValueRef kv,
				 bool is_abs);

/* The online softmax's exponentials exp(s - m) follow the interpreter's
 * softmax (and PyTorch's) on scores that are not finite: the maximum m
 * (llvm.maxnum) passes over NaN scores, and a NaN score or +inf - +inf
 * gives the weight NaN, which makes l and then the whole row NaN; -inf
 * scores weigh 0, unless the row has only those, whose weights are
 * 0 / 0. cg_addattn_shift(m) is what they subtract: m, or 0 while m is
 * -inf (no score above -inf yet), so that exp(-inf - m) is 0, not NaN. */
LLVMValueRef cg_addattn_shift(cg_addattn *a, LLVMValueRef m);
/* exp(s - shift): NaN for NaN, cg_lower_exp_nonpos's bits otherwise.
 * (Both are the dot-product kernels' cg_attn_shift and cg_attn_exp.) */
LLVMValueRef cg_addattn_exp(cg_addattn *a, LLVMValueRef s, LLVMValueRef shift);

#endif
