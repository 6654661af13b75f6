/*
 * cg_lower_attn_grad.c - the fused_attention_grad kernel: the gradients
 * dq, dk, dv of fused attention without the N x Q x K weights, written
 * into one packed result [dq | dk | dv].
 *
 * FlashAttention-2's backward pass reads each row's log-sum-exp saved by
 * the forward pass; attnc's IR has one result per node, so this kernel
 * recomputes it (as the row's max m and sum l). The outer loop runs over n, split over threads, so each
 * thread owns dk and dv of its n and adds into them without races. For
 * each block of BR query rows:
 *
 *   pass 1, over the key blocks (stopping at the valid lengths as the
 *     forward kernel does): the scores S and dP = dO V^T (dropped and
 *     scaled as the forward dropout does), and per row the online
 *     maximum m, sum l of exp(s - m) and sum of exp(s - m) dP, giving
 *     D = sum_k P dP (which is rowsum(dO o O));
 *   pass 2, over the same key blocks: S and dP again, P = exp(s - m) / l,
 *     dS = P (dP - D) where the key is valid (0 past the valid length,
 *     where the forward wrote the fill), times scale; then
 *     dQ += dS K (kept on the stack for the block), dK += dS^T Q and
 *     dV += dropout(P)^T dO (in the result), each tile of dQ stopping at
 *     the keys its rows need and each tile of dK and dV starting at the
 *     first row that needs its keys (cg_attn_set_need,
 *     cg_attn_key_starts: a causal mask's diagonal blocks are half done).
 *
 * That is seven products of the block's size instead of FlashAttention's
 * five: the price of not keeping the forward's log-sum-exp. Where a
 * query block's pass 1 fits CACHE_FLOATS (with fewer rows a block for
 * longer K, down to MIN_CACHED_ROWS, choose_cache), pass 2 recomputes
 * neither: pass 1 keeps every key's score (scaled and masked) and dP
 * and, over the key blocks, only each row's maximum m; after them, per
 * row over all its keys, exp(s - m) in place and the sums l and x in
 * vector lanes, reduced once (no online rescaling: cached_stats); pass
 * 2 turns them into P = exp(s - m) / l and dS in place, then runs the
 * three products from them: five products, as FlashAttention-2's
 * backward, and no exponential twice. The cache is 2 MiB at most a thread, 64
 * rows up to 4096 keys (on the heap beyond 512 KiB): a block of more
 * rows reads and writes the key blocks of dK and dV, which are too large
 * for the core's caches at such lengths, fewer times.
 *
 * With H heads, n runs over batch elements times heads, and q, k, v, g
 * and the three packed gradients are read and written in place, rows
 * H*d (H*dv) floats apart (cg_attn_row). Threads then own one head's
 * columns of dk and dv rather than whole rows: still no races.
 */
#include "cg_attn.h"

#include <math.h>

/* Most floats of the cache's ec and dc: 2 MiB, 64 rows of 4096 keys
 * (beyond CG_ATTN_STACK_CACHE on the heap, cg_attn.h). */
#define CACHE_FLOATS 524288
/* The fewest query rows of a cached block, per 128 floats of d + dv. */
#define MIN_CACHED_ROWS 16

/* The query block being differentiated. */
typedef struct bwd_block {
	LLVMValueRef n, q0, rows;
	LLVMValueRef qblk, gblk; /* its rows of q and of the gradient g */
} bwd_block;

/* dP = dO V^T of the key block at j0 into db, before dropout; with
 * cols, each tile of rows only up to the keys its rows need (cols: i64
 * per row, cg_attn_prod). */
static void dp_prod(cg_attn *a, const bwd_block *b, LLVMValueRef j0,
		    LLVMValueRef cols)
{
	cg_attn_prod dp = {.a = b->gblk,
			   .a_rs = a->H * a->dv,
			   .a_ts = 1,
			   .b = a->vt,
			   .b_ts = a->bc,
			   .c = a->db,
			   .c_rs = a->srs,
			   .width = a->bc,
			   .is_b_padded = true,
			   .is_c_padded = true,
			   .rows = b->rows,
			   .len = cg_i64(a->f, a->dv),
			   .cols = cols,
			   .cols_off = j0};
	cg_attn_prod_emit(a, &dp);
}

/* Packs keys and values of the block at j0 (unless packed for an
 * earlier query block of n, cg_attn_keys), computes S into sb and
 * dP (before dropout) into db; returns the number of keys jn. */
static LLVMValueRef scores_and_dp(cg_attn *a, const bwd_block *b,
				  LLVMValueRef j0)
{
	LLVMValueRef jn = cg_attn_block_len(a, a->K, j0, a->bc);
	cg_attn_keys(a, b->n, j0);
	cg_attn_qk(a, b->qblk, b->rows, j0, a->sb, a->srs);
	dp_prod(a, b, j0, NULL);
	return jn;
}

/* Vector j of row i of db: dP after dropout (dropped 0, kept scaled). */
static LLVMValueRef dropped_dp(cg_attn *a, const bwd_block *b, LLVMValueRef i,
			       LLVMValueRef j0, int64_t j, LLVMValueRef *keep)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef at = cg_addi(f, cg_muli(f, i, a->srs), j * a->vw);
	LLVMValueRef dp = cg_vload(f, a->vw, cg_at(f, a->db, at), 4);
	*keep = NULL;
	if (!a->has_dropout)
		return dp;
	*keep = cg_attn_keep(a, b->n, b->q0, i, j0, j);
	LLVMValueRef ks = LLVMBuildSelect(f->b, a->drop_on,
					  cg_f32(f, a->keep_scale),
					  cg_f32(f, 1), "");
	dp = LLVMBuildFMul(f->b, dp, cg_splat(f, a->vw, ks), "");
	return LLVMBuildSelect(f->b, *keep, dp, LLVMConstNull(vt), "");
}

/* Pass 1 without the cache, row i: the online max m, sum l of
 * exp(s - m) and sum x of exp(s - m) dP. */
static void stats_row(cg_attn *a, const bwd_block *b, LLVMValueRef i,
		      LLVMValueRef j0)
{
	cg_fn *f = a->f;
	LLVMValueRef s[64], keep, mx = NULL, se = NULL, sx = NULL;
	for (int64_t j = 0; j < a->nj; j++) {
		s[j] = cg_attn_scores(a, i, j0, j);
		mx = j ? cg_attn_vmax(a, mx, s[j]) : s[j];
	}
	LLVMValueRef m_at = cg_at(f, a->m, i), l_at = cg_at(f, a->l, i),
		     x_at = cg_at(f, a->x, i);
	LLVMValueRef m_old = cg_load(f, m_at);
	LLVMValueRef m_new = cg_lower_fcall(f, "llvm.maxnum", m_old,
					    cg_attn_hmax(a, mx));
	LLVMValueRef shift = cg_attn_shift(a, m_new);
	LLVMValueRef alpha = cg_attn_exp_gap(a, LLVMBuildFSub(f->b, m_old,
							      shift, ""));
	LLVMValueRef ms = cg_splat(f, a->vw, shift);
	for (int64_t j = 0; j < a->nj; j++) {
		LLVMValueRef e = cg_attn_exp(a, s[j], ms);
		LLVMValueRef ex = LLVMBuildFMul(f->b, e,
						dropped_dp(a, b, i, j0, j, &keep),
						"");
		/* keys past K: dP is g 0, NaN where g is not finite, and
		 * adds nothing to D (+0 where g is finite, as before) */
		LLVMValueRef real = cg_attn_real_keys(a, j0, j);
		if (real)
			ex = LLVMBuildSelect(f->b, real, ex,
					     LLVMConstNull(LLVMTypeOf(ex)), "");
		se = j ? cg_fast(LLVMBuildFAdd(f->b, se, e, ""), true) : e;
		sx = j ? cg_fast(LLVMBuildFAdd(f->b, sx, ex, ""), true) : ex;
	}
	LLVMValueRef l = LLVMBuildFMul(f->b, cg_load(f, l_at), alpha, "");
	cg_store(f, LLVMBuildFAdd(f->b, l, cg_attn_hsum(a, se), ""), l_at);
	LLVMValueRef x = LLVMBuildFMul(f->b, cg_load(f, x_at), alpha, "");
	cg_store(f, LLVMBuildFAdd(f->b, x, cg_attn_hsum(a, sx), ""), x_at);
	cg_store(f, m_new, m_at);
}

/* With the cache, sb and db point at the block's columns of ec and dc
 * while it is emitted; else they stay the block buffers. */
static void cache_columns(cg_attn *a, LLVMValueRef j0)
{
	if (!a->is_cached)
		return;
	a->sb = cg_at(a->f, a->ec, j0);
	a->db = cg_at(a->f, a->dc, j0);
}

/* Pass 1 with the cache and valid lengths, the key block at j0: the
 * scores (each tile of rows up to its valid lengths, cg_attn_qk), each
 * row's maximum so far and the keys it needs given it
 * (cg_attn_set_need), then dP up to those keys. The maximum only
 * grows, so a key past a row's need now is past its need at the end,
 * where the key's weight is exactly 0 and its dP is left out
 * (cached_stats, grads_row): a causal diagonal block's dP is computed
 * a triangle of vectors, as its scores. */
static void cached_keys(cg_attn *a, const bwd_block *b, LLVMValueRef j0)
{
	cg_fn *f = a->f;
	cg_attn_keys(a, b->n, j0);
	cg_attn_qk(a, b->qblk, b->rows, j0, a->sb, a->srs);
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), b->rows, 1);
	cg_attn_max_row(a, i, j0);
	cg_attn_set_need(a, i, cg_load(f, cg_at(f, a->m, i)));
	cg_loop_end(f, &l);
	dp_prod(a, b, j0, a->nd);
}

static void stats_keys(cg_attn *a, LLVMValueRef j0, void *ud)
{
	const bwd_block *b = ud;
	cg_fn *f = a->f;
	LLVMValueRef sb = a->sb, db = a->db;
	cache_columns(a, j0);
	if (a->is_cached && a->has_valid) {
		cached_keys(a, b, j0);
	} else {
		scores_and_dp(a, b, j0);
		cg_loop l;
		LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), b->rows, 1);
		if (a->is_cached)
			cg_attn_max_row(a, i, j0);
		else
			stats_row(a, b, i, j0);
		cg_loop_end(f, &l);
	}
	a->sb = sb;
	a->db = db;
}

/* Pass 1 with the cache, after the key blocks (keys 0 .. jend): per row,
 * the exponentials exp(s - m) of its scores over its whole row (m its
 * maximum, shifted) into the cache, their sum l and the sum x of
 * exp(s - m) dP, each summed in vector lanes over the row and reduced
 * once. */
static void cached_stats(cg_attn *a, const bwd_block *b, LLVMValueRef jend)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef sb = a->sb, db = a->db, keep;
	LLVMValueRef se = cg_attn_var(a, vt, LLVMConstNull(vt)),
		     sx = cg_attn_var(a, vt, LLVMConstNull(vt));
	cg_loop li, lk;
	LLVMValueRef i = cg_loop_begin(f, &li, cg_i64(f, 0), b->rows, 1);
	LLVMValueRef ms = cg_splat(f, a->vw,
				   cg_attn_shift(a,
						 cg_load(f, cg_at(f, a->m, i))));
	cg_attn_set(a, se, LLVMConstNull(vt));
	cg_attn_set(a, sx, LLVMConstNull(vt));
	if (a->has_valid)
		cg_attn_set_need(a, i, cg_load(f, cg_at(f, a->m, i)));
	LLVMValueRef k0 = cg_loop_begin(f, &lk, cg_i64(f, 0),
					cg_attn_blocks_end(a, jend), a->vw);
	cache_columns(a, k0);
	LLVMValueRef at = cg_at(f, a->sb, cg_muli(f, i, a->srs));
	LLVMValueRef e = cg_attn_exp(a, cg_vload(f, a->vw, at, 4), ms);
	cg_vstore(f, e, at, 4);
	LLVMValueRef ex = LLVMBuildFMul(f->b, e,
					dropped_dp(a, b, i, k0, 0, &keep), "");
	/* keys past K: dP is g 0, NaN where g is not finite, and adds
	 * nothing to D (+0 where g is finite) */
	LLVMValueRef real = cg_attn_real_keys(a, k0, 0);
	if (real)
		ex = LLVMBuildSelect(f->b, real, ex, LLVMConstNull(vt), "");
	/* keys past the row's need: weight exactly 0, dP maybe never
	 * computed (cached_keys) */
	if (a->has_valid)
		ex = LLVMBuildSelect(f->b, cg_attn_in_need(a, i, k0, 0), ex,
				     LLVMConstNull(vt), "");
	cg_attn_set(a, se,
		    cg_fast(LLVMBuildFAdd(f->b, cg_attn_get(a, vt, se), e, ""),
			    true));
	cg_attn_set(a, sx,
		    cg_fast(LLVMBuildFAdd(f->b, cg_attn_get(a, vt, sx), ex, ""),
			    true));
	a->sb = sb;
	a->db = db;
	cg_loop_end(f, &lk);
	cg_store(f, cg_attn_hsum(a, cg_attn_get(a, vt, se)), cg_at(f, a->l, i));
	cg_store(f, cg_attn_hsum(a, cg_attn_get(a, vt, sx)), cg_at(f, a->x, i));
	cg_loop_end(f, &li);
}

/* l becomes 1 / l, x becomes D = x / l, nd the keys each row needs.
 * (Not lse = m + log l as in FlashAttention: for a row of valid length
 * 0, m is the fill, -1e6, and float32 would round log l away next to
 * it.) */
static void finish_stats(cg_attn *a, const bwd_block *b)
{
	cg_fn *f = a->f;
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), b->rows, 1);
	LLVMValueRef l_at = cg_at(f, a->l, i), x_at = cg_at(f, a->x, i);
	LLVMValueRef inv = LLVMBuildFDiv(f->b, cg_f32(f, 1), cg_load(f, l_at),
					 "");
	cg_store(f, inv, l_at);
	cg_store(f, LLVMBuildFMul(f->b, cg_load(f, x_at), inv, ""), x_at);
	if (a->has_valid)
		cg_attn_set_need(a, i, cg_load(f, cg_at(f, a->m, i)));
	cg_loop_end(f, &l);
}

/* Pass 2, row i: dS (times scale) into db, the dropped weights into sb
 * (over the exponentials and dP with the cache). */
static void grads_row(cg_attn *a, const bwd_block *b, LLVMValueRef i,
		      LLVMValueRef j0)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef m = cg_splat(f, a->vw,
				  cg_attn_shift(a,
						cg_load(f, cg_at(f, a->m, i))));
	LLVMValueRef linv = cg_splat(f, a->vw, cg_load(f, cg_at(f, a->l, i)));
	LLVMValueRef D = cg_splat(f, a->vw, cg_load(f, cg_at(f, a->x, i)));
	LLVMValueRef zero = LLVMConstNull(vt), keep;
	for (int64_t j = 0; j < a->nj; j++) {
		LLVMValueRef at = cg_addi(f, cg_muli(f, i, a->srs), j * a->vw);
		LLVMValueRef p;
		if (a->is_cached)
			p = cg_vload(f, a->vw, cg_at(f, a->sb, at), 4);
		else
			p = cg_attn_exp(a, cg_attn_scores(a, i, j0, j), m);
		p = LLVMBuildFMul(f->b, p, linv, "");
		LLVMValueRef dp = dropped_dp(a, b, i, j0, j, &keep);
		LLVMValueRef ds = LLVMBuildFMul(f->b, p,
						LLVMBuildFSub(f->b, dp, D, ""),
						"");
		if (a->has_valid)
			ds = LLVMBuildSelect(f->b, cg_attn_in_valid(a, i, j0, j),
					     ds, zero, "");
		ds = LLVMBuildFMul(f->b, ds, cg_const_real(vt, a->scale), "");
		cg_vstore(f, ds, cg_at(f, a->db, at), 4);
		if (keep) {
			LLVMValueRef ks = LLVMBuildSelect(f->b, a->drop_on,
							  cg_f32(f,
								 a->keep_scale),
							  cg_f32(f, 1), "");
			p = LLVMBuildFMul(f->b, p, cg_splat(f, a->vw, ks), "");
			p = LLVMBuildSelect(f->b, keep, p, zero, "");
		}
		cg_vstore(f, p, cg_at(f, a->sb, at), 4);
	}
}

static void grads_keys(cg_attn *a, LLVMValueRef j0, const bwd_block *b)
{
	cg_fn *f = a->f;
	LLVMValueRef sb = a->sb, db = a->db;
	cache_columns(a, j0);
	LLVMValueRef jn = a->is_cached ? cg_attn_block_len(a, a->K, j0, a->bc)
				       : scores_and_dp(a, b, j0);
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), b->rows, 1);
	grads_row(a, b, i, j0);
	cg_loop_end(f, &l);
	if (a->has_valid)
		cg_attn_key_starts(a, j0, b->rows);
	LLVMValueRef krow = cg_attn_row(a, b->n, a->K, j0, a->d),
		     vrow = cg_attn_row(a, b->n, a->K, j0, a->dv);
	int64_t dk0 = a->N * a->Q * a->d, dv0 = dk0 + a->N * a->K * a->d;
	int64_t ks = a->H * a->d, vs = a->H * a->dv;
	cg_attn_prod dq = {.a = a->db,
			   .a_rs = a->srs,
			   .a_ts = 1,
			   .b = cg_at(f, a->kk, krow),
			   .b_ts = ks,
			   .c = a->acc,
			   .c_rs = a->wpad,
			   .width = a->d,
			   .is_c_padded = true,
			   .is_acc = true,
			   .rows = b->rows,
			   .len = jn,
			   .lim = a->nd,
			   .lim_off = j0};
	cg_attn_prod_emit(a, &dq);
	cg_attn_prod dk = {.a = a->db,
			   .a_rs = 1,
			   .a_ts = a->srs,
			   .b = b->qblk,
			   .b_ts = ks,
			   .c = cg_at(f, a->k->out, cg_addi(f, krow, dk0)),
			   .c_rs = ks,
			   .width = a->d,
			   .is_acc = true,
			   .rows = jn,
			   .len = b->rows,
			   .from = a->fr};
	cg_attn_prod_emit(a, &dk);
	cg_attn_prod dv = {.a = a->sb,
			   .a_rs = 1,
			   .a_ts = a->srs,
			   .b = b->gblk,
			   .b_ts = vs,
			   .c = cg_at(f, a->k->out, cg_addi(f, vrow, dv0)),
			   .c_rs = vs,
			   .width = a->dv,
			   .is_acc = true,
			   .rows = jn,
			   .len = b->rows,
			   .from = a->fr};
	cg_attn_prod_emit(a, &dv);
	a->sb = sb;
	a->db = db;
}

/* Both passes for the query block at q0 of batch n. */
static void grad_block(cg_attn *a, bwd_block *b)
{
	cg_fn *f = a->f;
	LLVMValueRef qrow = cg_attn_row(a, b->n, a->Q, b->q0, a->d);
	b->rows = cg_attn_block_len(a, a->Q, b->q0, a->br);
	b->qblk = cg_at(f, a->q, qrow);
	b->gblk = cg_at(f, a->g, cg_attn_row(a, b->n, a->Q, b->q0, a->dv));
	LLVMValueRef kmax = cg_attn_block_valid(a, b->n, b->q0, b->rows);
	if (a->fin)
		kmax = LLVMBuildSelect(f->b, a->fin, kmax, cg_i64(f, a->K), "");
	cg_attn_fill(a, a->m, cg_i64(f, a->brp), -INFINITY);
	cg_attn_fill(a, a->l, cg_i64(f, a->brp), 0);
	cg_attn_fill(a, a->x, cg_i64(f, a->brp), 0);
	LLVMValueRef jend = cg_attn_key_loop(a, kmax, b->rows, stats_keys, b);
	if (a->is_cached)
		cached_stats(a, b, jend);
	finish_stats(a, b);
	cg_attn_fill(a, a->acc, cg_i64(f, a->br * a->wpad), 0);
	cg_loop l;
	LLVMValueRef j0 = cg_loop_begin(f, &l, cg_i64(f, 0), jend, a->bc);
	grads_keys(a, j0, b);
	cg_loop_end(f, &l);
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), b->rows, 1);
	cg_attn_scale_row(a,
			  cg_at(f, a->k->out,
				cg_add(f, qrow, cg_muli(f, i, a->H * a->d))),
			  cg_at(f, a->acc, cg_muli(f, i, a->wpad)), a->d,
			  cg_f32(f, 1));
	cg_loop_end(f, &l);
}

/* The K rows of w floats of attention n's part at offset base of the
 * result set to 0: one run for one head, else a row at a time. */
static void zero_rows(cg_attn *a, LLVMValueRef n, int64_t base, int64_t w)
{
	cg_fn *f = a->f;
	LLVMValueRef zero = LLVMConstInt(LLVMInt8TypeInContext(f->ctx), 0, 0);
	int64_t rows = a->H == 1 ? 1 : a->K, len = a->H == 1 ? a->K * w : w;
	cg_loop l;
	LLVMValueRef t = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, rows), 1);
	LLVMValueRef at = cg_addi(f, cg_attn_row(a, n, a->K, t, w), base);
	LLVMBuildMemSet(f->b, cg_at(f, a->k->out, at), zero, cg_i64(f, len * 4),
			4);
	cg_loop_end(f, &l);
}

/* dk and dv of attention n start at 0: the blocks add into them. */
static void zero_dk_dv(cg_attn *a, LLVMValueRef n)
{
	int64_t dk0 = a->N * a->Q * a->d, dv0 = dk0 + a->N * a->K * a->d;
	zero_rows(a, n, dk0, a->d);
	zero_rows(a, n, dv0, a->dv);
}

/* The loop over n in [lo, hi), each n's query blocks in turn. */
static void bwd_body(cg_attn *a)
{
	cg_fn *f = a->f;
	int64_t nqb = (a->Q + a->br - 1) / a->br;
	cg_loop ln, lq;
	cg_attn_finite_begin(a);
	LLVMValueRef n = cg_loop_begin(f, &ln, a->k->lo, a->k->hi, 1);
	zero_dk_dv(a, n);
	a->fin = a->has_valid ? cg_attn_finite(a, n, true) : NULL;
	LLVMValueRef qb = cg_loop_begin(f, &lq, cg_i64(f, 0), cg_i64(f, nqb), 1);
	bwd_block b = {.n = n, .q0 = cg_muli(f, qb, a->br)};
	grad_block(a, &b);
	cg_loop_end(f, &lq);
	cg_loop_end(f, &ln);
}

/* The cache when a block of enough rows (or all Q) fits it: as many
 * rows as fit, up to the block's. Enough: MIN_CACHED_ROWS for heads up
 * to d + dv = 128, more for wider ones, whose packing of K and V and
 * stores of dK and dV a block of few rows repeats more often (at 4096
 * keys, 16 rows of heads of 128 ran slower than recomputing with 64;
 * 64 rows cached, faster than both). */
static void choose_cache(cg_attn *a)
{
	int64_t rows = CACHE_FLOATS / (2 * a->kc);
	int64_t wide = (a->d + a->dv) / 128;
	rows = rows < a->br ? rows : a->br;
	if (rows < MIN_CACHED_ROWS * (wide > 1 ? wide : 1) && rows < a->Q)
		return;
	a->is_cached = true;
	/* A cache line more a row: with rows a power of two of 4 KiB or
	 * more apart, a key block's rows all fell in the same few sets of
	 * the L1 cache. */
	a->srs = a->kc + 16;
	cg_attn_set_rows(a, rows);
}

bool cg_lower_fused_attention_grad(cg_kernel *k)
{
	cg_attn a;
	cg_attn_shape(&a, k, true);
	if (cg_attn_is_small(&a)) {
		cg_attn_small_bwd(k, &a);
		return true;
	}
	choose_cache(&a);
	k->extent = a.N;
	k->work = a.N * a.Q * a.K * (a.d + a.dv) / 4;
	cg_attn_call_body(k, &a, "bwd", bwd_body);
	return true;
}
