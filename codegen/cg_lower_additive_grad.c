/*
 * cg_lower_additive_grad.c - the fused_additive_attention_grad kernel:
 * the gradients dqp, dkp, dwv and dv of fused additive attention without
 * the N x Q x K x H features or the N x Q x K weights, written into one
 * packed result [dqp | dkp | dwv per batch (N x H) | dv].
 *
 * The outer loop runs over n, split over threads, so each thread owns
 * dkp, dv and the dwv part of its n and adds into them without races
 * (the gradient rule sums dwv's N parts). For each query row (n, q):
 *
 *   pass 1, over the key blocks (stopping at the valid length as the
 *     forward kernel does): the scores and dP = g v^T (dropped and
 *     scaled as the forward dropout does), and the online maximum m, sum
 *     l of exp(s - m) and sum of exp(s - m) dP, giving
 *     D = sum_k P dP = x / l;
 *   pass 2, over the same keys: the score again, keeping the features t
 *     of the key (H floats), P = exp(s - m) / l, dS = scale P (dP - D)
 *     (0 past the valid length), dv[k] += dropout(P) g, and with
 *     u = dS wv (1 - t t): dqp row += u, dkp[k] += u, dwv[n] += dS t.
 *
 * When all K keys fit one block (K <= CG_ADDATTN_BLOCK: Bahdanau's 10),
 * pass 1 keeps the row's features (K x H floats) and scores on the stack
 * and pass 2 reads them back, so each tanh is computed once, as in the
 * unfused graph, which stores all N x Q x K x H of them; that took the
 * kernel from 41.8 to 28.6 kcycles a call in Bahdanau's training (median
 * of 200, docs/codegen.md). With more keys, pass 2 computes them again.
 *
 * A row whose g is all zero, with finite qp, kp and v and scores that
 * cannot overflow (a bound on wv), adds +-0 to every sum and is left out
 * (row_adds_nothing): the steps of a seq2seq decoder past its
 * sentences' ends, over half of the rows of Bahdanau's training step.
 *
 * Scores that are not finite give what the interpreter gives
 * (cg_addattn_exp): a NaN or +inf score makes l NaN, so 1 / l makes
 * every P of the row, then D and every dS, NaN.
 */
#include "cg_lower_additive.h"

#include <math.h>

/* The row being differentiated. */
typedef struct bwd_row {
	LLVMValueRef n, row;
	LLVMValueRef grow; /* its row of g */
	bool is_masked; /* the keys of this range are past the valid length */
} bwd_row;

/* The output's parts: dqp, dkp, dwv (N x H), dv. */
typedef struct bwd_parts {
	int64_t dk, dw, dv;
} bwd_parts;

static bwd_parts parts(const cg_addattn *a)
{
	bwd_parts p;
	p.dk = a->N * a->Q * a->H;
	p.dw = p.dk + a->N * a->K * a->H;
	p.dv = p.dw + a->N * a->H;
	return p;
}

static LLVMValueRef value_row(cg_addattn *a, const bwd_row *r, LLVMValueRef j)
{
	cg_fn *f = a->f;
	return cg_at(f, a->v,
		     cg_muli(f, cg_add(f, cg_muli(f, r->n, a->K), j), a->dv));
}

/* dP of key j after dropout: g v_j, dropped 0 and kept scaled. */
static LLVMValueRef dropped_dp(cg_addattn *a, const bwd_row *r, LLVMValueRef j)
{
	cg_fn *f = a->f;
	LLVMValueRef dp = cg_addattn_dot(a, r->grow, value_row(a, r, j), a->dv);
	if (!a->has_dropout)
		return dp;
	LLVMValueRef ks = LLVMBuildSelect(f->b, a->drop_on,
					  cg_f32(f, a->keep_scale),
					  cg_f32(f, 1), "");
	dp = LLVMBuildFMul(f->b, dp, ks, "");
	return LLVMBuildSelect(f->b, cg_addattn_keep(a, r->row, j), dp,
			       cg_f32(f, 0), "");
}

/* Where the features of key j are kept between the passes. */
static LLVMValueRef cached_features(cg_addattn *a, LLVMValueRef j)
{
	return cg_at(a->f, a->fcache, cg_muli(a->f, j, a->hpad));
}

/* Pass 1's score of valid key j; with the cache, its features and score
 * are also kept there for pass 2. */
static LLVMValueRef first_score(cg_addattn *a, const bwd_row *r, LLVMValueRef j)
{
	if (!a->fcache)
		return cg_addattn_score(a, r->n, r->row, j, false);
	LLVMValueRef tb = a->tb;
	a->tb = cached_features(a, j);
	LLVMValueRef s = cg_addattn_score(a, r->n, r->row, j, true);
	a->tb = tb;
	cg_store(a->f, s, cg_at(a->f, a->scache, j));
	return s;
}

/* Pass 2's score of valid key j, its features left at a->tb: read from
 * the cache (a->tb pointed there; the caller restores it) or computed
 * again. */
static LLVMValueRef second_score(cg_addattn *a, const bwd_row *r, LLVMValueRef j)
{
	if (!a->fcache)
		return cg_addattn_score(a, r->n, r->row, j, true);
	a->tb = cached_features(a, j);
	return cg_load(a->f, cg_at(a->f, a->scache, j));
}

/* Pass 1, a block of keys: the online max m, sum l and sum x of
 * exp(s - m) dP. */
static void stats_block(cg_addattn *a, LLVMValueRef j0, LLVMValueRef jn,
			void *ud)
{
	const bwd_row *r = ud;
	cg_fn *f = a->f;
	cg_attn *b = &a->base;
	LLVMTypeRef ft = cg_t_f32(f);
	LLVMValueRef bm = cg_attn_var(b, ft, cg_f32(f, -INFINITY));
	cg_loop l;
	LLVMValueRef t = cg_loop_begin(f, &l, cg_i64(f, 0), jn, 1);
	LLVMValueRef j = cg_add(f, j0, t);
	LLVMValueRef s = r->is_masked ? cg_f32(f, a->fill)
				      : first_score(a, r, j);
	cg_store(f, s, cg_at(f, a->sb, t));
	cg_store(f, dropped_dp(a, r, j), cg_at(f, a->db, t));
	cg_attn_set(b, bm,
		    cg_lower_fcall(f, "llvm.maxnum", cg_attn_get(b, ft, bm), s));
	cg_loop_end(f, &l);
	LLVMValueRef m_old = cg_attn_get(b, ft, a->m);
	LLVMValueRef m_new = cg_lower_fcall(f, "llvm.maxnum", m_old,
					    cg_attn_get(b, ft, bm));
	LLVMValueRef shift = cg_addattn_shift(a, m_new);
	LLVMValueRef alpha = cg_addattn_exp(a, m_old, shift);
	cg_attn_set(b, a->l,
		    LLVMBuildFMul(f->b, cg_attn_get(b, ft, a->l), alpha, ""));
	cg_attn_set(b, a->x,
		    LLVMBuildFMul(f->b, cg_attn_get(b, ft, a->x), alpha, ""));
	cg_attn_set(b, a->m, m_new);
	/* e into sb and e dP into db, zero past the block's keys, summed a
	 * vector at a time. */
	t = cg_loop_begin(f, &l, jn, cg_i64(f, CG_ADDATTN_BLOCK), 1);
	cg_store(f, cg_f32(f, 0), cg_at(f, a->sb, t));
	cg_store(f, cg_f32(f, 0), cg_at(f, a->db, t));
	cg_loop_end(f, &l);
	t = cg_loop_begin(f, &l, cg_i64(f, 0), jn, 1);
	LLVMValueRef e = cg_addattn_exp(a, cg_load(f, cg_at(f, a->sb, t)),
					shift);
	LLVMValueRef ex = LLVMBuildFMul(f->b, e, cg_load(f, cg_at(f, a->db, t)),
					"");
	cg_store(f, e, cg_at(f, a->sb, t));
	cg_store(f, ex, cg_at(f, a->db, t));
	cg_loop_end(f, &l);
	cg_attn_set(b, a->l,
		    LLVMBuildFAdd(f->b, cg_attn_get(b, ft, a->l),
				  cg_addattn_block_sum(a, a->sb), ""));
	cg_attn_set(b, a->x,
		    LLVMBuildFAdd(f->b, cg_attn_get(b, ft, a->x),
				  cg_addattn_block_sum(a, a->db), ""));
}

/* u = dS wv (1 - t t) into the dqp row, dkp[k]; dS t into dwv[n]. */
typedef struct feat_cx {
	LLVMValueRef ds;  /* a splat of dS */
	LLVMValueRef dkp; /* dkp row of the key */
	LLVMValueRef dwv; /* dwv part of the batch */
} feat_cx;

static void feature_vec(cg_addattn *a, LLVMValueRef h, unsigned lanes, void *ud)
{
	const feat_cx *c = ud;
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef t = cg_vload(f, a->vw, cg_at(f, a->tb, h), 4);
	LLVMValueRef one = cg_const_real(vt, 1);
	LLVMValueRef dt = LLVMBuildFMul(f->b, c->ds,
					cg_addattn_vload(a, cg_at(f, a->wv, h),
							 lanes),
					"");
	LLVMValueRef u = LLVMBuildFMul(f->b, dt,
				       LLVMBuildFSub(f->b, one,
						     LLVMBuildFMul(f->b, t, t,
								   ""),
						     ""),
				       "");
	LLVMValueRef dq = cg_at(f, a->dq, h);
	cg_vstore(f, LLVMBuildFAdd(f->b, cg_vload(f, a->vw, dq, 4), u, ""), dq,
		  4);
	LLVMValueRef dk = cg_at(f, c->dkp, h);
	cg_addattn_vstore(a,
			  LLVMBuildFAdd(f->b, cg_addattn_vload(a, dk, lanes), u,
					""),
			  dk, lanes);
	LLVMValueRef dw = cg_at(f, c->dwv, h);
	LLVMValueRef args[3] = {c->ds, t, cg_addattn_vload(a, dw, lanes)};
	cg_addattn_vstore(a, cg_intrinsic(f, "llvm.fma", &vt, 1, args, 3), dw,
			  lanes);
}

/* Pass 2, key j: dS, dv[j] and, for a valid key, the features' part. */
static void grads_key(cg_addattn *a, const bwd_row *r, LLVMValueRef j)
{
	cg_fn *f = a->f;
	cg_attn *b = &a->base;
	LLVMTypeRef ft = cg_t_f32(f);
	bwd_parts pt = parts(a);
	LLVMValueRef tb = a->tb;
	LLVMValueRef s = r->is_masked ? cg_f32(f, a->fill)
				      : second_score(a, r, j);
	LLVMValueRef p = cg_addattn_exp(a, s,
					cg_addattn_shift(a, cg_attn_get(b, ft,
									a->m)));
	/* l holds 1 / l: NaN or inf for a row of NaN weights, which
	 * makes every p NaN */
	p = LLVMBuildFMul(f->b, p, cg_attn_get(b, ft, a->l), "");
	LLVMValueRef pd = p;
	if (a->has_dropout) {
		LLVMValueRef ks = LLVMBuildSelect(f->b, a->drop_on,
						  cg_f32(f, a->keep_scale),
						  cg_f32(f, 1), "");
		pd = LLVMBuildSelect(f->b, cg_addattn_keep(a, r->row, j),
				     LLVMBuildFMul(f->b, p, ks, ""),
				     cg_f32(f, 0), "");
	}
	LLVMValueRef key = cg_add(f, cg_muli(f, r->n, a->K), j);
	cg_addattn_axpy(a,
			cg_at(f, a->k->out,
			      cg_addi(f, cg_muli(f, key, a->dv), pt.dv)),
			r->grow, a->dv, pd, true);
	if (r->is_masked)
		return; /* dS is 0 where the forward wrote the fill */
	LLVMValueRef D = cg_attn_get(b, ft, a->x);
	LLVMValueRef ds = LLVMBuildFMul(f->b, p,
					LLVMBuildFSub(f->b, dropped_dp(a, r, j),
						      D, ""),
					"");
	ds = LLVMBuildFMul(f->b, ds, cg_f32(f, a->scale), "");
	feat_cx c = {cg_splat(f, a->vw, ds),
		     cg_at(f, a->k->out,
			   cg_addi(f, cg_muli(f, key, a->H), pt.dk)),
		     cg_at(f, a->k->out,
			   cg_addi(f, cg_muli(f, r->n, a->H), pt.dw))};
	cg_addattn_vec_loop(a, a->H, feature_vec, &c);
	a->tb = tb;
}

static void grads_block(cg_addattn *a, LLVMValueRef j0, LLVMValueRef jn,
			void *ud)
{
	cg_fn *f = a->f;
	cg_loop l;
	LLVMValueRef t = cg_loop_begin(f, &l, cg_i64(f, 0), jn, 1);
	grads_key(a, ud, cg_add(f, j0, t));
	cg_loop_end(f, &l);
}

/* The sum of |x[0 .. width)| (is_abs) or of x * 0 (0 when all are
 * finite: inf * 0 and NaN * 0 are NaN). */
static LLVMValueRef scan_sum(cg_addattn *a, LLVMValueRef x, int64_t width,
			     bool is_abs)
{
	LLVMTypeRef vt = cg_t_vec(a->f, a->vw);
	LLVMValueRef acc = cg_attn_var(&a->base, vt, LLVMConstNull(vt));
	cg_addattn_scan_into(a, acc, x, width, is_abs);
	return cg_attn_hsum(&a->base, cg_attn_get(&a->base, vt, acc));
}

/* Whether scan_sum is 0 (is_abs: all of x are +-0; else all finite), an
 * i1. */
static LLVMValueRef scan_is_zero(cg_addattn *a, LLVMValueRef x, int64_t width,
				 bool is_abs)
{
	return LLVMBuildFCmp(a->f->b, LLVMRealOEQ,
			     scan_sum(a, x, width, is_abs), cg_f32(a->f, 0), "");
}

/* The keys [kv, K) of a row that skips them, whose weights are 0: 0 dP
 * added to x (the interpreter's D sums P dP over all K keys) and 0 g to
 * their dv rows, +-0 that leaves the sums' bits, or NaN where v or g is
 * not finite, as in the interpreter. */
static void grads_skipped(cg_addattn *a, const bwd_row *r, LLVMValueRef kv)
{
	cg_fn *f = a->f;
	cg_attn *b = &a->base;
	LLVMTypeRef ft = cg_t_f32(f);
	LLVMValueRef zero = cg_f32(f, 0);
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, kv, cg_i64(f, a->K), 1);
	LLVMValueRef zdp = LLVMBuildFMul(f->b, dropped_dp(a, r, j), zero, "");
	cg_attn_set(b, a->x,
		    LLVMBuildFAdd(f->b, cg_attn_get(b, ft, a->x), zdp, ""));
	LLVMValueRef key = cg_add(f, cg_muli(f, r->n, a->K), j);
	cg_addattn_axpy(a,
			cg_at(f, a->k->out,
			      cg_addi(f, cg_muli(f, key, a->dv), parts(a).dv)),
			r->grow, a->dv, zero, true);
	cg_loop_end(f, &l);
}

/* Both passes over the keys [0, kv) and, when the fill still counts
 * (decided in pass 1), [kv, K). */
static void grad_row(cg_addattn *a, bwd_row *r, LLVMValueRef kv)
{
	cg_fn *f = a->f;
	cg_attn *b = &a->base;
	LLVMTypeRef ft = cg_t_f32(f), bt = LLVMInt1TypeInContext(f->ctx);
	cg_attn_set(b, a->m, cg_f32(f, -INFINITY));
	cg_attn_set(b, a->l, cg_f32(f, 0));
	cg_attn_set(b, a->x, cg_f32(f, 0));
	r->is_masked = false;
	cg_addattn_blocks(a, cg_i64(f, 0), kv, stats_block, r);
	LLVMValueRef more = cg_attn_var(b, bt, LLVMConstInt(bt, 0, 0));
	if (a->has_valid) {
		cg_attn_set(b, more, cg_addattn_needs_masked(a));
		LLVMBasicBlockRef join = cg_if_begin(f,
						     cg_attn_get(b, bt, more));
		r->is_masked = true;
		cg_addattn_blocks(a, kv, cg_i64(f, a->K), stats_block, r);
		cg_if_end(f, join);
		/* only where a dP g v or g is not finite: sum |g| times
		 * the skipped values' sum |v| bounds every |dP| */
		join = cg_if_begin(f,
				   LLVMBuildNot(f->b, cg_attn_get(b, bt, more),
						""));
		LLVMValueRef bound = LLVMBuildFMul(f->b,
						   cg_addattn_tail_sum(a, r->n,
								       kv, true),
						   scan_sum(a, r->grow, a->dv,
							    true),
						   "");
		LLVMBasicBlockRef join2 =
			cg_if_begin(f, LLVMBuildFCmp(f->b, LLVMRealUGE, bound,
						     cg_f32(f, 0x1p126f), ""));
		grads_skipped(a, r, kv);
		cg_if_end(f, join2);
		cg_if_end(f, join);
	}
	LLVMValueRef inv = LLVMBuildFDiv(f->b, cg_f32(f, 1),
					 cg_attn_get(b, ft, a->l), "");
	cg_attn_set(b, a->l, inv);
	cg_attn_set(b, a->x,
		    LLVMBuildFMul(f->b, cg_attn_get(b, ft, a->x), inv, ""));
	cg_attn_fill(b, a->dq, cg_i64(f, a->hpad), 0);
	r->is_masked = false;
	cg_addattn_blocks(a, cg_i64(f, 0), kv, grads_block, r);
	if (a->has_valid) {
		LLVMBasicBlockRef join = cg_if_begin(f,
						     cg_attn_get(b, bt, more));
		r->is_masked = true;
		cg_addattn_blocks(a, kv, cg_i64(f, a->K), grads_block, r);
		cg_if_end(f, join);
	}
	cg_addattn_axpy(a, cg_at(f, a->k->out, cg_muli(f, r->row, a->H)), a->dq,
			a->H, cg_f32(f, 1), false);
}

/* dkp, dwv and dv of batch n start at 0: the rows add into them. */
static void zero_batch(cg_addattn *a, LLVMValueRef n)
{
	cg_fn *f = a->f;
	bwd_parts pt = parts(a);
	LLVMValueRef zero = LLVMConstInt(LLVMInt8TypeInContext(f->ctx), 0, 0);
	const int64_t base[3] = {pt.dk, pt.dw, pt.dv};
	const int64_t len[3] = {a->K * a->H, a->H, a->K * a->dv};
	for (int i = 0; i < 3; i++) {
		LLVMValueRef p = cg_at(f, a->k->out,
				       cg_addi(f, cg_muli(f, n, len[i]),
					       base[i]));
		LLVMBuildMemSet(f->b, p, zero, cg_i64(f, len[i] * 4), 4);
	}
}

/* ---- rows whose gradient is zero ---------------------------------------------- */

/* Whether row r adds nothing: its g row is all +-0, the row's qp and its
 * batch's kp and v are finite, and so are its scores, which
 * sum_h |wv[h]| |scale| below 2^126 ensures (|tanh| <= 1; the margin
 * covers the rounding of both sums), where a NaN or an overflow of a
 * score to +-inf would make the row's weights and then its dS NaN, as
 * the interpreter does. Then every dP, D, dS and u of the
 * row is +-0 and every P finite, so each of its additions into dkp, dv
 * and dwv adds +-0 to a sum that started at +0 (which round to nearest
 * never turns into -0) and leaves it as it was, and its dqp row is +0:
 * leaving the row out gives the same bits. In a seq2seq decoder's
 * backward these are the steps past a sentence's end (over half of
 * Bahdanau's). The finiteness scan runs only for a zero g row. */
static LLVMValueRef row_adds_nothing(cg_addattn *a, const bwd_row *r)
{
	cg_fn *f = a->f;
	LLVMTypeRef bt = LLVMInt1TypeInContext(f->ctx);
	LLVMValueRef ok = cg_attn_var(&a->base, bt, LLVMConstInt(bt, 0, 0));
	LLVMValueRef gz = scan_is_zero(a, r->grow, a->dv, true);
	LLVMBasicBlockRef join = cg_if_begin(f, gz);
	LLVMValueRef q = cg_at(f, a->qp, cg_muli(f, r->row, a->H));
	LLVMValueRef kb = cg_at(f, a->kp, cg_muli(f, r->n, a->K * a->H));
	LLVMValueRef vb = cg_at(f, a->v, cg_muli(f, r->n, a->K * a->dv));
	LLVMValueRef fin = scan_is_zero(a, q, a->H, false);
	fin = LLVMBuildAnd(f->b, fin, scan_is_zero(a, kb, a->K * a->H, false),
			   "");
	fin = LLVMBuildAnd(f->b, fin, scan_is_zero(a, vb, a->K * a->dv, false),
			   "");
	float bound = 0x1p126f / fmaxf(fabsf(a->scale), 1.0f);
	LLVMValueRef wsum = scan_sum(a, a->wv, a->H, true);
	fin = LLVMBuildAnd(f->b, fin,
			   LLVMBuildFCmp(f->b, LLVMRealOLT, wsum,
					 cg_f32(f, bound), ""),
			   "");
	cg_attn_set(&a->base, ok, fin);
	cg_if_end(f, join);
	return cg_attn_get(&a->base, bt, ok);
}

/* Row r's gradients, or for a row that adds nothing (only when scale
 * and fill are finite, which the argument above needs) its dqp row of
 * +0. */
static void row_grads(cg_addattn *a, bwd_row *r, LLVMValueRef kv)
{
	cg_fn *f = a->f;
	if (!isfinite(a->scale) || !isfinite(a->fill)) {
		grad_row(a, r, kv);
		return;
	}
	LLVMValueRef skip = row_adds_nothing(a, r);
	LLVMBasicBlockRef join = cg_if_begin(f, skip);
	cg_addattn_zero(a, cg_at(f, a->k->out, cg_muli(f, r->row, a->H)), a->H);
	cg_if_end(f, join);
	join = cg_if_begin(f, LLVMBuildNot(f->b, skip, ""));
	grad_row(a, r, kv);
	cg_if_end(f, join);
}

/* The loop over n in [lo, hi), each n's query rows in turn: its live
 * ones (cg_addattn_live) their gradients; the dead ones, whose output
 * gradient row is 0 (nz_of_node) and whose every value is finite (the
 * switch's condition), add +-0 to every sum, as row_adds_nothing
 * argues, and get a dqp row of +0 without its scans. */
static void bwd_body(cg_addattn *a)
{
	cg_fn *f = a->f;
	cg_loop ln, lq;
	LLVMValueRef n = cg_loop_begin(f, &ln, a->k->lo, a->k->hi, 1);
	zero_batch(a, n);
	LLVMValueRef live = cg_addattn_live(a, n);
	LLVMValueRef q = cg_loop_begin(f, &lq, cg_i64(f, 0), live, 1);
	LLVMValueRef row = cg_add(f, cg_muli(f, n, a->Q), q);
	bwd_row r = {n, row, cg_at(f, a->g, cg_muli(f, row, a->dv)), false};
	row_grads(a, &r, cg_addattn_row_valid(a, n, row));
	cg_loop_end(f, &lq);
	if (a->base.n_live) {
		q = cg_loop_begin(f, &lq, live, cg_i64(f, a->Q), 1);
		row = cg_add(f, cg_muli(f, n, a->Q), q);
		cg_addattn_zero(a, cg_at(f, a->k->out, cg_muli(f, row, a->H)),
				a->H);
		cg_loop_end(f, &lq);
	}
	cg_loop_end(f, &ln);
}

bool cg_lower_fused_additive_attention_grad(cg_kernel *k)
{
	cg_addattn a;
	cg_addattn_shape(&a, k, true);
	k->extent = a.N;
	k->work = a.N * a.Q * a.K * (8 * a.H + 3 * a.dv);
	cg_addattn_call_body(k, &a, "bwd", bwd_body);
	return true;
}
