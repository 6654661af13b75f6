/*
 * cg_lower_attn_small.c - the fused attention kernels for few keys (at
 * most CG_ATTN_SMALL_K, heads at most CG_ATTN_SMALL_W wide): the book's
 * Transformer, with 10 keys and heads of 8, where the blocked kernels'
 * vectors over keys and over d are mostly empty and their time goes to
 * horizontal reductions, key-block bookkeeping and stack round trips.
 *
 * Here a block is up to vw query rows of one attention n, a row per lane.
 * The block's rows of Q (and of dO) are transposed into one vector per
 * column; for each key k (unrolled: K is a constant) the scores of all
 * the rows are one vector s_k = sum_c Qt[c] K[k, c], K's element
 * broadcast. The softmax over keys is then vertical: m = max_k s_k,
 * e_k = exp(s_k - m), l = sum_k e_k, all keys at once and exact, no
 * running rescaling and no horizontal reduction. Keys at or past a row's
 * valid length read the fill, as the unfused graph's do, so a row of
 * valid length 0 averages all the values.
 *
 * Forward: O^T[c] = sum_k dropout(e_k) V[k, c] / l, transposed back into
 * the rows of the output. Backward, per attention n (its dk and dv are
 * the thread's own): per block, P_k = e_k / l, dP_k = dropout(dO V[k]^T),
 * D = sum_k P_k dP_k, dS_k = P_k (dP_k - D) (0 past the valid length)
 * times scale; dQ^T[c] = sum_k dS_k K[k, c] is transposed into dq's rows,
 * and dk[k] += sum_t dS_k[t] q_t, dv[k] += sum_t dropout(P_k)[t] dO_t
 * accumulate in registers over all the blocks of n, stored once at the
 * end. Dropout draws the weight (n, q, k) as every kernel does
 * (cg_attn_keep_t), so masks are bit-identical to the unfused graph's.
 */
#include "cg_attn.h"

/* A block: query rows q0 .. q0 + rows (rows <= vw) of attention n, one
 * per lane. */
typedef struct sblock {
	LLVMValueRef n, q0, rows;
	LLVMValueRef vl;                  /* <vw x i32> valid lengths; NULL: none */
	LLVMValueRef e[CG_ATTN_SMALL_K];  /* per key: scores, then weights */
	LLVMValueRef keep[CG_ATTN_SMALL_K]; /* per key: dropout's keep mask */
	LLVMValueRef l;                   /* sum over keys of the exponentials */
} sblock;

bool cg_attn_is_small(const cg_attn *a)
{
	return a->K >= 1 && a->K <= CG_ATTN_SMALL_K && a->d >= 1 &&
	       a->d <= CG_ATTN_SMALL_W && a->dv >= 1 && a->dv <= CG_ATTN_SMALL_W;
}

static LLVMValueRef fma_v(cg_attn *a, LLVMValueRef x, LLVMValueRef y,
			  LLVMValueRef z)
{
	LLVMTypeRef vt = cg_t_vec(a->f, a->vw);
	LLVMValueRef args[3] = {x, y, z};
	return cg_intrinsic(a->f, "llvm.fma", &vt, 1, args, 3);
}

static LLVMValueRef vconst(cg_attn *a, float x)
{
	return cg_const_real(cg_t_vec(a->f, a->vw), x);
}

/* Row k of operand p (rows of H heads of w floats) of attention n. */
static LLVMValueRef key_row(cg_attn *a, LLVMValueRef p, LLVMValueRef n,
			    int64_t k, int64_t w)
{
	return cg_at(a->f, p, cg_attn_row(a, n, a->K, cg_i64(a->f, k), w));
}

/* The block's first row of operand p (rows of H heads of w floats). */
static LLVMValueRef query_rows(cg_attn *a, LLVMValueRef p, const sblock *b,
			       int64_t w)
{
	return cg_at(a->f, p, cg_attn_row(a, b->n, a->Q, b->q0, w));
}

/* sum_c xt[c] row[c]: a vector over the block's rows. */
static LLVMValueRef dot_t(cg_attn *a, const LLVMValueRef *xt, LLVMValueRef row,
			  int64_t w)
{
	cg_fn *f = a->f;
	LLVMValueRef acc = vconst(a, 0);
	for (int64_t c = 0; c < w; c++)
		acc = fma_v(a, xt[c], cg_splat(f, a->vw, cg_load(f, cg_ati(f, row, c))),
			    acc);
	return acc;
}

/* The lanes whose row sees key k (k below its valid length). */
static LLVMValueRef in_valid_t(cg_attn *a, const sblock *b, int64_t k)
{
	LLVMTypeRef vt = LLVMVectorType(cg_t_i32(a->f), a->vw);
	return LLVMBuildICmp(a->f->b, LLVMIntSGT, b->vl,
			     cg_const_int(vt, (uint64_t)k), "");
}

/* The scores of key k, scaled, the fill past each row's valid length. */
static LLVMValueRef score_t(cg_attn *a, const sblock *b, const LLVMValueRef *qt,
			    int64_t k)
{
	cg_fn *f = a->f;
	LLVMValueRef s = dot_t(a, qt, key_row(a, a->kk, b->n, k, a->d), a->d);
	s = LLVMBuildFMul(f->b, s, vconst(a, a->scale), "");
	if (!b->vl)
		return s;
	return LLVMBuildSelect(f->b, in_valid_t(a, b, k), s, vconst(a, a->fill), "");
}

/* sum_k x[k] (k < K) added in the order in which the blocked kernels sum
 * a block's keys (their vectors, then cg_attn_hsum's halvings), so that
 * both kernels give the same sums, bit for bit. */
static LLVMValueRef key_sum(cg_attn *a, const LLVMValueRef *x)
{
	LLVMBuilderRef b = a->f->b;
	LLVMValueRef t[64] = {0};
	for (int64_t k = 0; k < a->K; k++) {
		int64_t i = k % a->vw;
		t[i] = t[i] ? cg_fast(LLVMBuildFAdd(b, t[i], x[k], ""), true) : x[k];
	}
	for (unsigned w = a->vw / 2; w >= 1; w /= 2)
		for (unsigned i = 0; i < w; i++) {
			if (t[i] && t[i + w])
				t[i] = LLVMBuildFAdd(b, t[i], t[i + w], "");
			else if (!t[i])
				t[i] = t[i + w];
		}
	return t[0];
}

/* The block's transposed queries, valid lengths, scores, and the softmax
 * over keys: b->e[k] = exp(s_k - max_k s_k), b->l their sum. */
static void softmax_t(cg_attn *a, sblock *b)
{
	cg_fn *f = a->f;
	LLVMValueRef qt[CG_ATTN_SMALL_W];
	cg_attn_load_t(a, qt, query_rows(a, a->q, b, a->d), a->d, a->H * a->d,
		       b->rows);
	b->vl = a->has_valid ? cg_attn_valid_t(a, b->n, b->q0, b->rows) : NULL;
	LLVMValueRef m = NULL;
	for (int64_t k = 0; k < a->K; k++) {
		b->e[k] = score_t(a, b, qt, k);
		m = k ? cg_attn_vmax(a, m, b->e[k]) : b->e[k];
	}
	for (int64_t k = 0; k < a->K; k++) {
		b->e[k] = cg_lower_exp_nonpos(f, LLVMBuildFSub(f->b, b->e[k], m, ""));
		b->keep[k] = a->has_dropout ? cg_attn_keep_t(a, b->n, b->q0, k) : NULL;
	}
	b->l = key_sum(a, b->e);
}

/* x where dropout keeps the weight of key k, times s (NULL: 1); 0 where
 * it drops it. */
static LLVMValueRef dropped(cg_attn *a, const sblock *b, int64_t k,
			    LLVMValueRef x, LLVMValueRef s)
{
	if (!b->keep[k])
		return x;
	if (s)
		x = LLVMBuildFMul(a->f->b, x, s, "");
	return LLVMBuildSelect(a->f->b, b->keep[k], x, vconst(a, 0), "");
}

/* 1 / (1 - p) in every lane in a training run with dropout, else 1. */
static LLVMValueRef keep_scale(cg_attn *a)
{
	cg_fn *f = a->f;
	LLVMValueRef one = cg_f32(f, 1);
	if (a->has_dropout)
		one = LLVMBuildSelect(f->b, a->drop_on, cg_f32(f, a->keep_scale), one, "");
	return cg_splat(f, a->vw, one);
}

/* ---- forward ---------------------------------------------------------------------- */

/* The block's output rows: sum_k dropout(e_k) V[k] / l. */
static void sfwd_block(cg_attn *a, sblock *b)
{
	cg_fn *f = a->f;
	LLVMValueRef ot[CG_ATTN_SMALL_W];
	softmax_t(a, b);
	for (int64_t c = 0; c < a->dv; c++)
		ot[c] = vconst(a, 0);
	for (int64_t k = 0; k < a->K; k++) {
		LLVMValueRef e = dropped(a, b, k, b->e[k], NULL);
		LLVMValueRef vrow = key_row(a, a->v, b->n, k, a->dv);
		for (int64_t c = 0; c < a->dv; c++)
			ot[c] = fma_v(a, e, cg_splat(f, a->vw, cg_load(f, cg_ati(f, vrow, c))),
				      ot[c]);
	}
	LLVMValueRef r = LLVMBuildFDiv(f->b, keep_scale(a), b->l, "");
	for (int64_t c = 0; c < a->dv; c++)
		ot[c] = LLVMBuildFMul(f->b, ot[c], r, "");
	cg_attn_store_t(a, query_rows(a, a->k->out, b, a->dv), ot, a->dv,
			a->H * a->dv, b->rows);
}

/* The loop over (n, block of vw query rows) in [lo, hi). */
static void sfwd_body(cg_attn *a)
{
	cg_fn *f = a->f;
	int64_t nqb = (a->Q + a->vw - 1) / a->vw;
	cg_loop l;
	LLVMValueRef it = cg_loop_begin(f, &l, a->k->lo, a->k->hi, 1);
	sblock b = {0};
	b.n = LLVMBuildUDiv(f->b, it, cg_i64(f, nqb), "");
	b.q0 = cg_muli(f, LLVMBuildURem(f->b, it, cg_i64(f, nqb), ""), a->vw);
	b.rows = cg_attn_min(a, LLVMBuildSub(f->b, cg_i64(f, a->Q), b.q0, ""), a->vw);
	sfwd_block(a, &b);
	cg_loop_end(f, &l);
}

void cg_attn_small_fwd(cg_kernel *k, const cg_attn *a)
{
	k->extent = a->N * ((a->Q + a->vw - 1) / a->vw);
	k->work = a->N * a->Q * a->K * (a->d + a->dv) / 8;
	cg_attn_call_body(k, a, "sfwd", sfwd_body);
}

/* ---- backward --------------------------------------------------------------------- */

/* dk and dv of one attention, one variable per key and vector of a row,
 * summed over its query blocks; dS and dropout(P) of the block in
 * between (K rows of vw floats on the stack). */
typedef struct sgrads {
	LLVMValueRef dk[CG_ATTN_SMALL_K][CG_ATTN_SMALL_W / 4];
	LLVMValueRef dv[CG_ATTN_SMALL_K][CG_ATTN_SMALL_W / 4];
	LLVMValueRef ds, pd;
	int64_t nd, ndv; /* vectors per row of dk, dv */
} sgrads;

/* dS_k and dropout(P_k) of every key into g->ds, g->pd; returns nothing
 * else: dq's rows are written here, dQ^T[c] = sum_k dS_k K[k, c]. */
static void sbwd_ds(cg_attn *a, sblock *b, sgrads *g)
{
	cg_fn *f = a->f;
	LLVMValueRef gt[CG_ATTN_SMALL_W], dp[CG_ATTN_SMALL_K], dqt[CG_ATTN_SMALL_W];
	cg_attn_load_t(a, gt, query_rows(a, a->g, b, a->dv), a->dv, a->H * a->dv,
		       b->rows);
	softmax_t(a, b);
	LLVMValueRef rl = LLVMBuildFDiv(f->b, vconst(a, 1), b->l, "");
	LLVMValueRef ks = a->has_dropout ? keep_scale(a) : NULL, ex[CG_ATTN_SMALL_K];
	for (int64_t k = 0; k < a->K; k++) {
		dp[k] = dot_t(a, gt, key_row(a, a->v, b->n, k, a->dv), a->dv);
		dp[k] = dropped(a, b, k, dp[k], ks);
		ex[k] = LLVMBuildFMul(f->b, b->e[k], dp[k], "");
		b->e[k] = LLVMBuildFMul(f->b, b->e[k], rl, "");
	}
	LLVMValueRef D = LLVMBuildFMul(f->b, key_sum(a, ex), rl, "");
	for (int64_t c = 0; c < a->d; c++)
		dqt[c] = vconst(a, 0);
	for (int64_t k = 0; k < a->K; k++) {
		LLVMValueRef ds = LLVMBuildFMul(f->b, b->e[k],
						LLVMBuildFSub(f->b, dp[k], D, ""), "");
		if (b->vl)
			ds = LLVMBuildSelect(f->b, in_valid_t(a, b, k), ds, vconst(a, 0), "");
		ds = LLVMBuildFMul(f->b, ds, vconst(a, a->scale), "");
		cg_vstore(f, ds, cg_ati(f, g->ds, k * a->vw), 4);
		cg_vstore(f, dropped(a, b, k, b->e[k], ks), cg_ati(f, g->pd, k * a->vw), 4);
		LLVMValueRef krow = key_row(a, a->kk, b->n, k, a->d);
		for (int64_t c = 0; c < a->d; c++)
			dqt[c] = fma_v(a, ds, cg_splat(f, a->vw, cg_load(f, cg_ati(f, krow, c))),
				       dqt[c]);
	}
	cg_attn_store_t(a, query_rows(a, a->k->out, b, a->d), dqt, a->d, a->H * a->d,
			b->rows);
}

/* acc[k][v] += x_k row[v] for every key, x_k = buf[k * vw + t]. */
static void add_rows(cg_attn *a, LLVMValueRef (*acc)[CG_ATTN_SMALL_W / 4],
		     LLVMValueRef buf, LLVMValueRef t, LLVMValueRef row,
		     int64_t w, int64_t nv)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef rv[CG_ATTN_SMALL_W / 4];
	for (int64_t v = 0; v < nv; v++)
		rv[v] = cg_attn_load_part(a, cg_ati(f, row, v * a->vw), w, v * a->vw);
	for (int64_t k = 0; k < a->K; k++) {
		LLVMValueRef x = cg_splat(f, a->vw,
					  cg_load(f, cg_at(f, buf, cg_addi(f, t, k * a->vw))));
		for (int64_t v = 0; v < nv; v++)
			cg_attn_set(a, acc[k][v],
				    fma_v(a, x, rv[v], cg_attn_get(a, vt, acc[k][v])));
	}
}

/* dk[k] += sum_t dS_k[t] q_t and dv[k] += sum_t dropout(P_k)[t] dO_t
 * over the block's rows t. */
static void sbwd_accumulate(cg_attn *a, const sblock *b, sgrads *g)
{
	cg_fn *f = a->f;
	cg_loop l;
	LLVMValueRef t = cg_loop_begin(f, &l, cg_i64(f, 0), b->rows, 1);
	LLVMValueRef q = cg_add(f, b->q0, t);
	add_rows(a, g->dk, g->ds, t,
		 cg_at(f, a->q, cg_attn_row(a, b->n, a->Q, q, a->d)), a->d, g->nd);
	add_rows(a, g->dv, g->pd, t,
		 cg_at(f, a->g, cg_attn_row(a, b->n, a->Q, q, a->dv)), a->dv, g->ndv);
	cg_loop_end(f, &l);
}

/* The accumulated rows of one part (dk at base with rows of w floats, or
 * dv) stored into attention n's rows of the result. */
static void store_rows(cg_attn *a, LLVMValueRef n,
		       LLVMValueRef (*acc)[CG_ATTN_SMALL_W / 4], int64_t base,
		       int64_t w, int64_t nv)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	for (int64_t k = 0; k < a->K; k++) {
		LLVMValueRef row = cg_at(f, a->k->out, cg_addi(f, cg_attn_row(a, n, a->K,
									   cg_i64(f, k), w),
							       base));
		for (int64_t v = 0; v < nv; v++)
			cg_attn_store_part(a, cg_attn_get(a, vt, acc[k][v]),
					   cg_ati(f, row, v * a->vw), w, v * a->vw);
	}
}

/* Every query block of attention n, then its dk and dv. */
static void sbwd_attention(cg_attn *a, LLVMValueRef n, sgrads *g)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	for (int64_t k = 0; k < a->K; k++) {
		for (int64_t v = 0; v < g->nd; v++)
			g->dk[k][v] = cg_attn_var(a, vt, vconst(a, 0));
		for (int64_t v = 0; v < g->ndv; v++)
			g->dv[k][v] = cg_attn_var(a, vt, vconst(a, 0));
	}
	cg_loop l;
	int64_t nqb = (a->Q + a->vw - 1) / a->vw;
	LLVMValueRef qb = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, nqb), 1);
	sblock b = {.n = n, .q0 = cg_muli(f, qb, a->vw)};
	b.rows = cg_attn_min(a, LLVMBuildSub(f->b, cg_i64(f, a->Q), b.q0, ""), a->vw);
	sbwd_ds(a, &b, g);
	sbwd_accumulate(a, &b, g);
	cg_loop_end(f, &l);
	int64_t dk0 = a->N * a->Q * a->d, dv0 = dk0 + a->N * a->K * a->d;
	store_rows(a, n, g->dk, dk0, a->d, g->nd);
	store_rows(a, n, g->dv, dv0, a->dv, g->ndv);
}

/* The loop over attentions n in [lo, hi). */
static void sbwd_body(cg_attn *a)
{
	cg_fn *f = a->f;
	sgrads g = {.nd = (a->d + a->vw - 1) / a->vw, .ndv = (a->dv + a->vw - 1) / a->vw};
	g.ds = cg_attn_buffer(a, cg_t_f32(f), a->K * a->vw);
	g.pd = cg_attn_buffer(a, cg_t_f32(f), a->K * a->vw);
	cg_loop l;
	LLVMValueRef n = cg_loop_begin(f, &l, a->k->lo, a->k->hi, 1);
	sbwd_attention(a, n, &g);
	cg_loop_end(f, &l);
}

void cg_attn_small_bwd(cg_kernel *k, const cg_attn *a)
{
	k->extent = a->N;
	k->work = a->N * a->Q * a->K * (a->d + a->dv) / 4;
	cg_attn_call_body(k, a, "sbwd", sbwd_body);
}
