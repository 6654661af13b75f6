/*
 * cg_lower_attn.c - the fused_attention kernel: FlashAttention-2's
 * forward pass with an online softmax, so the N x Q x K weights never
 * exist.
 *
 * The kernel's outer loop runs over (n, block of BR query rows), split
 * over threads like any kernel. For a block it keeps, per row, the
 * running maximum m and sum l of the exponentials and an accumulator of
 * dv floats; for each block of BC keys it packs K^T (once per attention
 * n in a call, cg_attn_keys), computes the scores
 * S = Q K^T with the register-tiled product, and per row: scales and
 * masks them (keys past the valid length get the fill), takes the new
 * maximum, rescales l and the accumulator by exp(m_old - m_new) where
 * the maximum moved (the factor is exactly 1 elsewhere), turns the
 * scores into exp(s - m_new) (zeroed where dropout drops them) and
 * adds P V into the accumulator (each tile of rows stopping at the keys
 * its rows need, cg_attn_set_need: a causal mask's diagonal blocks are
 * half done). At the end each row is divided by l (and scaled by
 * 1 / (1 - p) under dropout). Keys at or past every row's valid length
 * are never visited unless a row still needs them (cg_attn.h):
 * rows of valid length 0 then average all the values, as the -1e6 fill
 * makes the unfused graph do.
 *
 * Where a block's rows of scores over all keys fit CG_ATTN_STACK_CACHE
 * (is_cached), the block runs no online softmax: each key block's
 * scores go, scaled and masked, into the cache (ec) with only each row's
 * maximum kept; then per row the weights exp(s - m) over the whole row,
 * l summed in vector lanes and reduced once, dropout in place; then
 * P V block by block (cached_keys, cached_weights, cached_pv). That
 * leaves out the rescaling, its scalar exponential and a horizontal sum
 * per row and key block: with heads of 32 and blocks of 32 keys they
 * cost as much as the exponentials.
 *
 * With H heads, n runs over batch elements times heads and every row is
 * read and written in place, H*d (H*dv) floats after the one before
 * (cg_attn_row): the heads are never split or merged by a copy.
 */
#include "cg_attn.h"

#include <math.h>

/* The block being computed. */
typedef struct fwd_block {
	LLVMValueRef n, q0, rows;
} fwd_block;

/* Row i's l and accumulator times alpha = exp(gap), gap = m_old -
 * shift(m_new): skipped where the maximum did not move (gap 0, alpha
 * exactly 1), which past the first key blocks of a long row is nearly
 * always, and where gap is NaN (+inf - +inf: l is NaN already). */
static void fwd_rescale(cg_attn *a, LLVMValueRef i, LLVMValueRef gap)
{
	cg_fn *f = a->f;
	LLVMValueRef moved = LLVMBuildFCmp(f->b, LLVMRealOLT, gap, cg_f32(f, 0),
					   "");
	LLVMBasicBlockRef join = cg_if_begin(f, moved);
	LLVMValueRef alpha = cg_lower_exp_nonpos(f, gap);
	LLVMValueRef l_at = cg_at(f, a->l, i);
	cg_store(f, LLVMBuildFMul(f->b, cg_load(f, l_at), alpha, ""), l_at);
	LLVMValueRef as = cg_splat(f, a->vw, alpha);
	LLVMValueRef row = cg_muli(f, i, a->wpad);
	for (int64_t c = 0; c < a->dv; c += a->vw) {
		LLVMValueRef at = cg_at(f, a->acc, cg_addi(f, row, c));
		cg_vstore(f,
			  LLVMBuildFMul(f->b, cg_vload(f, a->vw, at, 4), as, ""),
			  at, 4);
	}
	cg_if_end(f, join);
}

/* Row i of the block: new maximum, rescaling, weights into sb. */
static void fwd_row(cg_attn *a, const fwd_block *b, LLVMValueRef i,
		    LLVMValueRef j0)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef s[64], mx = NULL, sum = NULL;
	for (int64_t j = 0; j < a->nj; j++) {
		s[j] = cg_attn_scores(a, i, j0, j);
		mx = j ? cg_attn_vmax(a, mx, s[j]) : s[j];
	}
	LLVMValueRef m_at = cg_at(f, a->m, i), l_at = cg_at(f, a->l, i);
	LLVMValueRef m_old = cg_load(f, m_at);
	LLVMValueRef m_new = cg_lower_fcall(f, "llvm.maxnum", m_old,
					    cg_attn_hmax(a, mx));
	LLVMValueRef shift = cg_attn_shift(a, m_new);
	LLVMValueRef ms = cg_splat(f, a->vw, shift);
	for (int64_t j = 0; j < a->nj; j++) {
		LLVMValueRef p = cg_attn_exp(a, s[j], ms);
		sum = j ? cg_fast(LLVMBuildFAdd(f->b, sum, p, ""), true) : p;
		if (a->has_dropout)
			p = LLVMBuildSelect(f->b,
					    cg_attn_keep(a, b->n, b->q0, i, j0,
							 j),
					    p, LLVMConstNull(vt), "");
		LLVMValueRef at = cg_addi(f, cg_muli(f, i, a->srs), j * a->vw);
		cg_vstore(f, p, cg_at(f, a->sb, at), 4);
	}
	cg_store(f, m_new, m_at);
	if (a->has_valid)
		cg_attn_set_need(a, i, m_new);
	fwd_rescale(a, i, LLVMBuildFSub(f->b, m_old, shift, ""));
	cg_store(f,
		 LLVMBuildFAdd(f->b, cg_load(f, l_at), cg_attn_hsum(a, sum), ""),
		 l_at);
}

/* One block of keys at j0: scores, the online softmax, P V. */
static void fwd_keys(cg_attn *a, LLVMValueRef j0, void *ud)
{
	const fwd_block *b = ud;
	cg_fn *f = a->f;
	LLVMValueRef jn = cg_attn_block_len(a, a->K, j0, a->bc);
	cg_attn_keys(a, b->n, j0);
	cg_attn_qk(a, cg_at(f, a->q, cg_attn_row(a, b->n, a->Q, b->q0, a->d)),
		   b->rows, j0, a->sb, a->bc);
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), b->rows, 1);
	fwd_row(a, b, i, j0);
	cg_loop_end(f, &l);
	cg_attn_prod pv = {.a = a->sb,
			   .a_rs = a->bc,
			   .a_ts = 1,
			   .b = cg_at(f, a->v,
				      cg_attn_row(a, b->n, a->K, j0, a->dv)),
			   .b_ts = a->H * a->dv,
			   .c = a->acc,
			   .c_rs = a->wpad,
			   .width = a->dv,
			   .is_c_padded = true,
			   .is_acc = true,
			   .rows = b->rows,
			   .len = jn,
			   .lim = a->nd,
			   .lim_off = j0};
	cg_attn_prod_emit(a, &pv);
}

/* The factor of row i's accumulator under dropout: inv, or 0 when the
 * row's weights are all NaN (l NaN, or 0 when no score rose above -inf)
 * and dropout drops every one of its K keys: the interpreter's output
 * row is then sum_k 0 v_k, which the accumulator holds (the dropped
 * weights are 0, and no key is left out: cg_attn_finite), not NaN. */
/* kept (an i1 variable) |= any of the first `lanes` lanes of keep. */
static void kept_add(cg_attn *a, LLVMValueRef kept, LLVMValueRef keep,
		     unsigned lanes)
{
	cg_fn *f = a->f;
	LLVMTypeRef bt = LLVMInt1TypeInContext(f->ctx), kt = LLVMTypeOf(keep);
	if (lanes < a->vw) {
		LLVMValueRef lane[64];
		for (unsigned t = 0; t < a->vw; t++)
			lane[t] = LLVMConstInt(bt, t < lanes, 0);
		keep = LLVMBuildAnd(f->b, keep, LLVMConstVector(lane, a->vw),
				    "");
	}
	LLVMValueRef any = cg_intrinsic(f, "llvm.vector.reduce.or", &kt, 1,
					&keep, 1);
	cg_attn_set(a, kept,
		    LLVMBuildOr(f->b, cg_attn_get(a, bt, kept), any, ""));
}

static LLVMValueRef dropped_row_factor(cg_attn *a, const fwd_block *b,
				       LLVMValueRef i, LLVMValueRef inv,
				       LLVMValueRef sum)
{
	cg_fn *f = a->f;
	LLVMTypeRef ft = cg_t_f32(f), bt = LLVMInt1TypeInContext(f->ctx);
	LLVMValueRef x = cg_attn_var(a, ft, inv);
	LLVMBasicBlockRef join = cg_if_begin(f, LLVMBuildFCmp(f->b, LLVMRealULE,
							      sum, cg_f32(f, 0),
							      ""));
	LLVMValueRef kept = cg_attn_var(a, bt, LLVMConstInt(bt, 0, 0));
	int64_t whole = a->K / a->vw * a->vw;
	if (whole > 0) {
		cg_loop l;
		LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0),
					       cg_i64(f, whole), a->vw);
		kept_add(a, kept, cg_attn_keep(a, b->n, b->q0, i, j, 0), a->vw);
		cg_loop_end(f, &l);
	}
	if (whole < a->K)
		kept_add(a, kept,
			 cg_attn_keep(a, b->n, b->q0, i, cg_i64(f, whole), 0),
			 (unsigned)(a->K - whole));
	cg_attn_set(a, x,
		    LLVMBuildSelect(f->b, cg_attn_get(a, bt, kept), inv,
				    cg_f32(f, 0), ""));
	cg_if_end(f, join);
	return cg_attn_get(a, ft, x);
}

/* out row = accumulator / l, times 1 / (1 - p) when dropout is on: NaN
 * where l is NaN, or 0 (0 / 0, no score above -inf), as in the
 * interpreter, but for rows that dropout empties (dropped_row_factor). */
static void fwd_store(cg_attn *a, const fwd_block *b)
{
	cg_fn *f = a->f;
	LLVMValueRef one = cg_f32(f, 1);
	if (a->has_dropout)
		one = LLVMBuildSelect(f->b, a->drop_on,
				      cg_f32(f, a->keep_scale), one, "");
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), b->rows, 1);
	/* With no keys at all (K = 0) the unfused product is 0. */
	LLVMValueRef sum = cg_load(f, cg_at(f, a->l, i));
	LLVMValueRef inv = a->K > 0 ? LLVMBuildFDiv(f->b, one, sum, "")
				    : cg_f32(f, 0);
	if (a->K > 0 && a->has_dropout)
		inv = dropped_row_factor(a, b, i, inv, sum);
	LLVMValueRef row = cg_attn_row(a, b->n, a->Q, cg_add(f, b->q0, i),
				       a->dv);
	cg_attn_scale_row(a, cg_at(f, a->k->out, row),
			  cg_at(f, a->acc, cg_muli(f, i, a->wpad)), a->dv, inv);
	cg_loop_end(f, &l);
}

/* +0 into the output rows b->rows .. full of the block (dead queries). */
static void zero_rows(cg_attn *a, const fwd_block *b, LLVMValueRef full)
{
	cg_fn *f = a->f;
	LLVMValueRef z = LLVMConstNull(cg_t_vec(f, a->vw));
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, b->rows, full, 1);
	LLVMValueRef row = cg_at(f, a->k->out,
				 cg_attn_row(a, b->n, a->Q, cg_add(f, b->q0, i),
					     a->dv));
	for (int64_t c = 0; c < a->dv; c += a->vw)
		cg_attn_store_part(a, z, cg_ati(f, row, c), a->dv, c);
	cg_loop_end(f, &l);
}

/* With the cache, the key block at j0: its scores into the block's
 * columns of ec, and each row's maximum so far (cg_attn_max_row). */
static void cached_keys(cg_attn *a, LLVMValueRef j0, void *ud)
{
	const fwd_block *b = ud;
	cg_fn *f = a->f;
	LLVMValueRef sb = a->sb;
	cg_attn_keys(a, b->n, j0);
	a->sb = cg_at(f, a->ec, j0);
	cg_attn_qk(a, cg_at(f, a->q, cg_attn_row(a, b->n, a->Q, b->q0, a->d)),
		   b->rows, j0, a->sb, a->srs);
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), b->rows, 1);
	cg_attn_max_row(a, i, j0);
	cg_loop_end(f, &l);
	a->sb = sb;
}

/* With the cache, after the key blocks (keys 0 .. jend): per row, the
 * weights exp(s - m) (m its maximum, shifted) over the whole row, their
 * sum l (summed in vector lanes, reduced once), dropped in place, and
 * the keys the row needs (cg_attn_set_need). */
static void cached_weights(cg_attn *a, const fwd_block *b, LLVMValueRef jend)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef sum = cg_attn_var(a, vt, LLVMConstNull(vt));
	cg_loop li, lk;
	LLVMValueRef i = cg_loop_begin(f, &li, cg_i64(f, 0), b->rows, 1);
	LLVMValueRef m = cg_load(f, cg_at(f, a->m, i));
	LLVMValueRef ms = cg_splat(f, a->vw, cg_attn_shift(a, m));
	LLVMValueRef row = cg_muli(f, i, a->srs);
	cg_attn_set(a, sum, LLVMConstNull(vt));
	LLVMValueRef k0 = cg_loop_begin(f, &lk, cg_i64(f, 0),
					cg_attn_blocks_end(a, jend), a->vw);
	LLVMValueRef at = cg_at(f, a->ec, cg_add(f, row, k0));
	LLVMValueRef p = cg_attn_exp(a, cg_vload(f, a->vw, at, 4), ms);
	cg_attn_set(a, sum,
		    cg_fast(LLVMBuildFAdd(f->b, cg_attn_get(a, vt, sum), p, ""),
			    true));
	if (a->has_dropout)
		p = LLVMBuildSelect(f->b, cg_attn_keep(a, b->n, b->q0, i, k0, 0),
				    p, LLVMConstNull(vt), "");
	cg_vstore(f, p, at, 4);
	cg_loop_end(f, &lk);
	cg_store(f, cg_attn_hsum(a, cg_attn_get(a, vt, sum)), cg_at(f, a->l, i));
	if (a->has_valid)
		cg_attn_set_need(a, i, m);
	cg_loop_end(f, &li);
}

/* With the cache: acc = P V over the key blocks 0 .. jend, each tile of
 * rows stopping at the keys its rows need. */
static void cached_pv(cg_attn *a, const fwd_block *b, LLVMValueRef jend)
{
	cg_fn *f = a->f;
	cg_loop l;
	LLVMValueRef j0 = cg_loop_begin(f, &l, cg_i64(f, 0), jend, a->bc);
	cg_attn_prod pv = {.a = cg_at(f, a->ec, j0),
			   .a_rs = a->srs,
			   .a_ts = 1,
			   .b = cg_at(f, a->v,
				      cg_attn_row(a, b->n, a->K, j0, a->dv)),
			   .b_ts = a->H * a->dv,
			   .c = a->acc,
			   .c_rs = a->wpad,
			   .width = a->dv,
			   .is_c_padded = true,
			   .is_acc = true,
			   .rows = b->rows,
			   .len = cg_attn_block_len(a, a->K, j0, a->bc),
			   .lim = a->nd,
			   .lim_off = j0};
	cg_attn_prod_emit(a, &pv);
	cg_loop_end(f, &l);
}

/* The loop over (n, query block) in [lo, hi). */
static void fwd_body(cg_attn *a)
{
	cg_fn *f = a->f;
	int64_t nqb = (a->Q + a->br - 1) / a->br;
	cg_attn_finite_begin(a);
	cg_loop l;
	LLVMValueRef it = cg_loop_begin(f, &l, a->k->lo, a->k->hi, 1);
	fwd_block b;
	b.n = LLVMBuildUDiv(f->b, it, cg_i64(f, nqb), "");
	b.q0 = cg_muli(f, LLVMBuildURem(f->b, it, cg_i64(f, nqb), ""), a->br);
	b.rows = cg_attn_block_len(a, a->Q, b.q0, a->br);
	/* dead query rows (a->n_live): the block is its live rows only, and
	 * one with none is skipped; +0 into the others' output rows */
	LLVMValueRef full = b.rows;
	LLVMBasicBlockRef some = NULL;
	if (a->n_live) {
		b.rows = cg_attn_live_rows(a, cg_attn_live(a, b.n), b.q0, full);
		some = cg_if_begin(f, LLVMBuildICmp(f->b, LLVMIntSGT, b.rows,
						    cg_i64(f, 0), ""));
	}
	LLVMValueRef kmax = cg_attn_block_valid(a, b.n, b.q0, b.rows);
	if (a->has_valid) {
		a->fin = cg_attn_finite(a, b.n, false);
		kmax = LLVMBuildSelect(f->b, a->fin, kmax, cg_i64(f, a->K), "");
	}
	cg_attn_fill(a, a->m, cg_i64(f, a->brp), -INFINITY);
	cg_attn_fill(a, a->l, cg_i64(f, a->brp), 0);
	cg_attn_fill(a, a->acc, cg_i64(f, a->br * a->wpad), 0);
	if (a->is_cached) {
		LLVMValueRef jend = cg_attn_key_loop(a, kmax, b.rows,
						     cached_keys, &b);
		cached_weights(a, &b, jend);
		cached_pv(a, &b, jend);
	} else {
		cg_attn_key_loop(a, kmax, b.rows, fwd_keys, &b);
	}
	fwd_store(a, &b);
	if (some) {
		cg_if_end(f, some);
		zero_rows(a, &b, full);
	}
	cg_loop_end(f, &l);
}

bool cg_lower_fused_attention(cg_kernel *k)
{
	cg_attn a;
	cg_attn_shape(&a, k, false);
	if (cg_attn_is_small(&a)) {
		cg_attn_small_fwd(k, &a);
		return true;
	}
	/* The cache when a block's rows of scores over all keys fit the
	 * stack: a row a cache line longer than its keys, as the
	 * backward's (cg_lower_attn_grad.c). */
	if (a.br * (a.kc + 16) * 4 <= CG_ATTN_STACK_CACHE) {
		a.is_cached = true;
		a.srs = a.kc + 16;
	}
	k->extent = a.N * ((a.Q + a.br - 1) / a.br);
	k->work = a.N * a.Q * a.K * (a.d + a.dv) / 8;
	cg_attn_count_row_skip(k, &a);
	cg_attn_call_body(k, &a, "fwd", fwd_body);
	return true;
}
