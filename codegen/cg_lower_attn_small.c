/*
 * cg_lower_attn_small.c - the fused attention kernels for few keys (at
 * most CG_ATTN_SMALL_K, heads at most CG_ATTN_SMALL_W wide): the book's
 * Transformer, with 10 keys and heads of 8, where the blocked kernels'
 * vectors over keys and over d are mostly empty and their time goes to
 * horizontal reductions, key-block bookkeeping and stack round trips.
 * cg_lower_attn.c and cg_lower_attn_grad.c choose them by the node's
 * (constant) sizes; docs/fusion.md measures both.
 *
 * Here a block is up to vw query rows of one attention n, a row per lane.
 * The block's rows of Q (and of dO) are transposed into one vector per
 * column; for each key k (unrolled: K is a constant) the scores of all
 * the rows are one vector s_k = sum_c Qt[c] K[k, c], K's element
 * broadcast. The softmax over keys is then vertical: m = max_k s_k,
 * e_k = exp(s_k - m), l = sum_k e_k, all keys at once and exact, no
 * running rescaling and no horizontal reduction. Keys at or past a row's
 * valid length read the fill, as the unfused graph's do, so a row of
 * valid length 0 averages all the values. Keys past every row's valid
 * length are skipped, as the blocked kernels skip them (CG_ATTN_FILL_
 * MARGIN): the block's code exists twice, straight for blocks that see
 * every key, with a test around each key's code for the others.
 *
 * Forward: the weights dropout(e_k) and 1/l of the block's rows to the
 * stack, then a row t at a time O_t = sum_k w_k[t] V[k] / l[t], V's
 * rows and O's as vectors of 8 (row_width), one block behind: the loop
 * computes block i's weights, then block i - 1's rows (sfwd_body).
 * Backward, per attention n (its dk and dv are the thread's own): per
 * block, P_k = e_k / l, dP_k = dropout(dO V[k]^T), D = sum_k P_k dP_k,
 * dS_k = P_k (dP_k - D) (0 past the valid length) times scale, stored;
 * then a row t at a time, dq_t = sum_k dS_k[t] K[k] and dk[k] += dS_k[t] q_t, dv[k] +=
 * dropout(P_k)[t] dO_t, dk and dv accumulating in registers over all
 * the blocks of n, stored once at the end. Dropout draws the weight
 * (n, q, k) as every kernel does (cg_attn_keep_t), so masks are
 * bit-identical to the unfused graph's.
 *
 * A block of at most 8 rows, where the kernel's vectors are 16 lanes,
 * is computed in vectors of 8 (by_width): half the vector work on Zen
 * 4, the same bits, the buffers' layout and the cache's slots the
 * kernel's (a->lw).
 *
 * Dead query rows (a->n_live, with the program's row_skip set): a
 * block's rows are only those below its attention's live queries
 * (cg_attn_live), as if the block were that short; the rows past them
 * (to b->full) get +0 in the forward's output and in dq, a block with
 * none is skipped whole (its cache slot too: the gradient skips it the
 * same way), and nothing of theirs goes into dk and dv.
 *
 * Sums over keys are added in the blocked kernels' order (key_sum), and
 * every product in theirs: for the same shape the two kernels give the
 * same results bit for bit (the Transformer trains to the same loss).
 */
#include "cg_attn.h"

#include <assert.h>

/* A block: query rows q0 .. q0 + rows (rows <= vw) of attention n, one
 * per lane. Per key k, variables (cg_attn_var) carry what key k's code
 * computes past the test that skips it (key_begin). */
typedef struct sblock {
	LLVMValueRef n, q0, rows;
	/* the block's rows, the dead ones included: rows is fewer where the
	 * kernel leaves dead query rows out (a->n_live) */
	LLVMValueRef full;
	LLVMValueRef vl; /* <vw x i32>: each row's valid length; NULL: none */
	LLVMValueRef kv; /* i64: the block visits keys 0 .. kv; NULL: all K */
	LLVMValueRef m;  /* every row's largest score */
	LLVMValueRef shift; /* what the exponentials subtract: cg_attn_shift */
	LLVMValueRef sv[CG_ATTN_SMALL_K]; /* its scores, then exp(s - m) */
	LLVMValueRef kp[CG_ATTN_SMALL_K]; /* dropout's keep mask (<vw x i1>) */
} sblock;

bool cg_attn_is_small(const cg_attn *a)
{
	return a->K >= 1 && a->K <= CG_ATTN_SMALL_K && a->d >= 1 &&
	       a->d <= CG_ATTN_SMALL_W && a->dv >= 1 && a->dv <= CG_ATTN_SMALL_W;
}

/* ---- the weights' cache ------------------------------------------------------------ */

/* A block's slot in the cache, in floats: exp(s_k - m) of every key (0
 * for a skipped one) as K vectors over the block's rows, 1 / l, then
 * (as i32) dropout's keep mask of each key (a bit per lane) and the keys
 * the block visited (kv, K for all); rounded up to 64 bytes. The slots
 * are the kernel's width apart; a block computed in vectors of 8
 * (by_width) packs its vectors of 8 at the start of its slot, which
 * only the backward's copy of that width reads (both choose it by the
 * block's rows): half the cache lines. */
static int64_t wc_slot_floats(int64_t K, unsigned vw)
{
	return (K * vw + vw + K + 1 + 15) / 16 * 16;
}

/* Whether node id of g (a fused attention or its gradient) takes the
 * small kernels: cg_attn_is_small from its operands' types. */
bool cg_attn_node_is_small(const cg_lower *L, const ir_graph *g, ir_id id)
{
	const ir_node *n = &g->nodes[id];
	int64_t qd[IR_MAX_RANK], kd[IR_MAX_RANK], vd[IR_MAX_RANK];
	if (n->n_args < 3 || n->attr.attention.heads < 1)
		return false;
	cg_lower_dims(L, &g->nodes[ir_arg(g, id, 0)].type, qd);
	cg_lower_dims(L, &g->nodes[ir_arg(g, id, 1)].type, kd);
	cg_lower_dims(L, &g->nodes[ir_arg(g, id, 2)].type, vd);
	int64_t h = n->attr.attention.heads, d = qd[2] / h, dv = vd[2] / h;
	return kd[1] >= 1 && kd[1] <= CG_ATTN_SMALL_K && d >= 1 &&
	       d <= CG_ATTN_SMALL_W && dv >= 1 && dv <= CG_ATTN_SMALL_W;
}

/* Whether grad is the gradient of fwd: the same operands (and g) and
 * attributes, the dropout stream included. */
static bool is_grad_of(const ir_graph *g, ir_id fwd, ir_id grad)
{
	const ir_node *f = &g->nodes[fwd], *b = &g->nodes[grad];
	if (f->op != IR_OP_FUSED_ATTENTION ||
	    b->op != IR_OP_FUSED_ATTENTION_GRAD || b->n_args != f->n_args + 1 ||
	    f->attr.attention.scale != b->attr.attention.scale ||
	    f->attr.attention.fill != b->attr.attention.fill ||
	    f->attr.attention.p != b->attr.attention.p ||
	    f->attr.attention.stream != b->attr.attention.stream ||
	    f->attr.attention.heads != b->attr.attention.heads)
		return false;
	for (uint32_t i = 0; i < f->n_args; i++)
		if (ir_arg(g, fwd, i) != ir_arg(g, grad, i))
			return false;
	return true;
}

/* The first gradient of forward fwd after it, IR_NONE for none. */
static ir_id first_grad(const ir_graph *g, ir_id fwd)
{
	for (ir_id c = fwd + 1; c < g->n_nodes; c++)
		if (is_grad_of(g, fwd, c))
			return c;
	return IR_NONE;
}

ir_id cg_attn_cache_pair(const cg_lower *L, const ir_graph *g, ir_id id)
{
	ir_op op = g->nodes[id].op;
	if (L->no_attn_cache)
		return IR_NONE;
	if (op == IR_OP_FUSED_ATTENTION)
		return cg_attn_node_is_small(L, g, id) ? first_grad(g, id)
						       : IR_NONE;
	if (op != IR_OP_FUSED_ATTENTION_GRAD || !cg_attn_node_is_small(L, g, id))
		return IR_NONE;
	for (ir_id p = 0; p < id; p++)
		if (is_grad_of(g, p, id))
			return first_grad(g, p) == id ? p : IR_NONE;
	return IR_NONE;
}

uint64_t cg_attn_node_bytes(const cg_lower *L, const ir_graph *g, ir_id id)
{
	const ir_node *n = &g->nodes[id];
	uint64_t out = cg_lower_bytes(L, &n->type);
	if (n->op != IR_OP_FUSED_ATTENTION ||
	    cg_attn_cache_pair(L, g, id) == IR_NONE)
		return out;
	int64_t qd[IR_MAX_RANK], kd[IR_MAX_RANK];
	cg_lower_dims(L, &g->nodes[ir_arg(g, id, 0)].type, qd);
	cg_lower_dims(L, &g->nodes[ir_arg(g, id, 1)].type, kd);
	int64_t blocks = qd[0] * n->attr.attention.heads *
			 ((qd[1] + L->vw - 1) / L->vw);
	return cg_attn_cache_offset(out) +
	       (uint64_t)(blocks * wc_slot_floats(kd[1], L->vw)) * 4;
}

/* The slot of the block at query row q0 of attention n. */
static LLVMValueRef wc_slot(cg_attn *a, LLVMValueRef n, LLVMValueRef q0)
{
	cg_fn *f = a->f;
	int64_t nqb = (a->Q + a->lw - 1) / a->lw;
	LLVMValueRef blk = cg_add(f, cg_muli(f, n, nqb),
				  LLVMBuildUDiv(f->b, q0, cg_i64(f, a->lw), ""));
	return cg_at(f, a->wc, cg_muli(f, blk, wc_slot_floats(a->K, a->lw)));
}

/* Element i of the slot's i32 part (the masks, then kv). */
static LLVMValueRef wc_int(cg_attn *a, LLVMValueRef slot, int64_t i)
{
	return cg_ati(a->f, slot, a->K * a->vw + a->vw + i);
}

/* x y + z, vectors of any width. */
static LLVMValueRef fma_v(cg_attn *a, LLVMValueRef x, LLVMValueRef y,
			  LLVMValueRef z)
{
	LLVMTypeRef vt = LLVMTypeOf(x);
	LLVMValueRef args[3] = {x, y, z};
	return cg_intrinsic(a->f, "llvm.fma", &vt, 1, args, 3);
}

static LLVMValueRef vconst(cg_attn *a, float x)
{
	return cg_const_real(cg_t_vec(a->f, a->vw), x);
}

static LLVMValueRef vget(cg_attn *a, LLVMValueRef var)
{
	return cg_attn_get(a, cg_t_vec(a->f, a->vw), var);
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
		acc = fma_v(a, xt[c],
			    cg_splat(f, a->vw, cg_load(f, cg_ati(f, row, c))),
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
	return LLVMBuildSelect(f->b, in_valid_t(a, b, k), s, vconst(a, a->fill),
			       "");
}

/* sum_k x[k] (k < K) added in the order in which the blocked kernels sum
 * a block's keys (their vectors, then cg_attn_hsum's halvings), so that
 * both kernels give the same sums, bit for bit. */
static LLVMValueRef key_sum(cg_attn *a, const LLVMValueRef *x)
{
	LLVMBuilderRef b = a->f->b;
	LLVMValueRef t[64] = {0};
	for (int64_t k = 0; k < a->K; k++) {
		int64_t i = k % a->lw;
		t[i] = t[i] ? cg_fast(LLVMBuildFAdd(b, t[i], x[k], ""), true)
			    : x[k];
	}
	for (unsigned w = a->lw / 2; w >= 1; w /= 2)
		for (unsigned i = 0; i < w; i++) {
			if (t[i] && t[i + w])
				t[i] = LLVMBuildFAdd(b, t[i], t[i + w], "");
			else if (!t[i])
				t[i] = t[i + w];
		}
	return t[0];
}

/* The sum over keys of the variables vars[k]. */
static LLVMValueRef key_sum_vars(cg_attn *a, const LLVMValueRef *vars)
{
	LLVMValueRef x[CG_ATTN_SMALL_K];
	for (int64_t k = 0; k < a->K; k++)
		x[k] = vget(a, vars[k]);
	return key_sum(a, x);
}

/* ---- keys the block skips --------------------------------------------------------- */

/* The keys a block must visit (i64): its rows' largest valid length, at
 * most K, or all K when some row's length is 0 or less (such a row
 * averages every value). NULL (all K) without valid lengths. Keys past
 * every row's length only add exp(fill - m) = 0. */
static LLVMValueRef block_keys(cg_attn *a, const sblock *b)
{
	cg_fn *f = a->f;
	if (!b->vl || a->K == 1)
		return NULL;
	LLVMTypeRef it = cg_t_i32(f), vt = LLVMVectorType(it, a->vw);
	LLVMValueRef in = cg_attn_lanes(a, b->rows);
	LLVMValueRef hi = LLVMBuildSelect(f->b, in, b->vl,
					  cg_const_int(vt, (uint64_t)INT32_MIN),
					  "");
	LLVMValueRef lo = LLVMBuildSelect(f->b, in, b->vl,
					  cg_const_int(vt, (uint64_t)INT32_MAX),
					  "");
	hi = cg_intrinsic(f, "llvm.vector.reduce.smax", &vt, 1, &hi, 1);
	lo = cg_intrinsic(f, "llvm.vector.reduce.smin", &vt, 1, &lo, 1);
	LLVMValueRef k = LLVMConstInt(it, (uint64_t)a->K, 0);
	hi = LLVMBuildSelect(f->b, LLVMBuildICmp(f->b, LLVMIntSLT, hi, k, ""),
			     hi, k, "");
	LLVMValueRef all = LLVMBuildICmp(f->b, LLVMIntSLE, lo,
					 LLVMConstInt(it, 0, 0), "");
	return LLVMBuildSExt(f->b, LLVMBuildSelect(f->b, all, k, hi, ""),
			     cg_t_i64(f), "");
}

/* Opens `if (k < kv)` around key k's code when the block may skip it;
 * returns the block to close it with (key_end), NULL when there is no
 * test. Key 0 is always visited. */
static LLVMBasicBlockRef key_begin(cg_attn *a, const sblock *b, int64_t k)
{
	if (!b->kv || k == 0)
		return NULL;
	return cg_if_begin(a->f, LLVMBuildICmp(a->f->b, LLVMIntSLT,
					       cg_i64(a->f, k), b->kv, ""));
}

static void key_end(cg_attn *a, LLVMBasicBlockRef join)
{
	if (join)
		cg_if_end(a->f, join);
}

/* Whether some row's largest score is within CG_ATTN_FILL_MARGIN of the
 * fill: then exp(fill - m) of the skipped keys could matter. */
static LLVMValueRef near_fill(cg_attn *a, const sblock *b)
{
	cg_fn *f = a->f;
	LLVMValueRef gap = LLVMBuildFSub(f->b, b->m, vconst(a, a->fill), "");
	LLVMValueRef near = LLVMBuildFCmp(f->b, LLVMRealULT, gap,
					  vconst(a, CG_ATTN_FILL_MARGIN), "");
	near = LLVMBuildAnd(f->b, near, cg_attn_lanes(a, b->rows), "");
	LLVMTypeRef bt = LLVMTypeOf(near);
	return cg_intrinsic(f, "llvm.vector.reduce.or", &bt, 1, &near, 1);
}

/* The scores of the visited keys into b->sv (the fill for the others)
 * and their maximum b->m. */
static void scores_visited(cg_attn *a, sblock *b, const LLVMValueRef *qt)
{
	for (int64_t k = 0; k < a->K; k++) {
		LLVMBasicBlockRef join = key_begin(a, b, k);
		cg_attn_set(a, b->sv[k], score_t(a, b, qt, k));
		key_end(a, join);
	}
	/* a tree, not a chain of K - 1 maxima: the maximum of the scores
	 * is exact in any order (a row with a NaN score is NaN whatever m
	 * is), and the chain's latency held up every row's exponentials */
	LLVMValueRef m[CG_ATTN_SMALL_K];
	for (int64_t k = 0; k < a->K; k++)
		m[k] = vget(a, b->sv[k]);
	for (int64_t n = a->K; n > 1; n = (n + 1) / 2) {
		for (int64_t i = 0; i < n / 2; i++)
			m[i] = cg_attn_vmax(a, m[2 * i], m[2 * i + 1]);
		if (n % 2)
			m[n / 2] = m[n - 1];
	}
	b->m = m[0];
}

/* The scores of the keys the block visits (every key when kv0 is NULL,
 * else 0 .. kv0, then every key if a row's maximum is still near the
 * fill) into b->sv, and b->m. */
static void scores_t(cg_attn *a, sblock *b, const LLVMValueRef *qt,
		     LLVMValueRef kv0)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw), it = cg_t_i64(f);
	for (int64_t k = 0; k < a->K; k++)
		b->sv[k] = cg_attn_var(a, vt, vconst(a, a->fill));
	b->kv = NULL;
	if (!kv0) {
		scores_visited(a, b, qt);
		b->shift = cg_attn_shift(a, b->m);
		return;
	}
	LLVMValueRef kvar = cg_attn_var(a, it, kv0);
	LLVMBasicBlockRef head = cg_block(f, "ks"), again = cg_block(f, "ksa"),
			  done = cg_block(f, "kse");
	LLVMBuildBr(f->b, head);
	LLVMPositionBuilderAtEnd(f->b, head);
	b->kv = cg_attn_get(a, it, kvar);
	scores_visited(a, b, qt);
	LLVMValueRef some = LLVMBuildICmp(f->b, LLVMIntSLT, b->kv,
					  cg_i64(f, a->K), "");
	LLVMBuildCondBr(f->b, LLVMBuildAnd(f->b, some, near_fill(a, b), ""),
			again, done);
	LLVMPositionBuilderAtEnd(f->b, again);
	cg_attn_set(a, kvar, cg_i64(f, a->K));
	LLVMBuildBr(f->b, head);
	LLVMPositionBuilderAtEnd(f->b, done);
	b->shift = cg_attn_shift(a, b->m);
}

/* A block's code for its keys, given its transposed operands (xt) and
 * the keys to visit (kv0; NULL: all). */
typedef void (*keys_fn)(cg_attn *a, sblock *b, const LLVMValueRef *const *xt,
			LLVMValueRef kv0, void *ud);

/* The block's valid lengths, then its keys' code: twice, one copy for
 * blocks that visit every key (no test around each key's code, one
 * stretch of straight code) and one that skips keys past every row's
 * valid length, chosen at run time: only where the terms it leaves out
 * are +-0 (a->fin, set by the backward for its attention; the forward
 * scans v here). */
static void block_keys_code(cg_attn *a, sblock *b,
			    const LLVMValueRef *const *xt, keys_fn fn, void *ud)
{
	cg_fn *f = a->f;
	b->vl = a->has_valid ? cg_attn_valid_t(a, b->n, b->q0, b->rows) : NULL;
	LLVMValueRef kv0 = block_keys(a, b);
	if (!kv0) {
		fn(a, b, xt, NULL, ud);
		return;
	}
	LLVMBasicBlockRef some = cg_block(f, "kvs"), all = cg_block(f, "kva"),
			  join = cg_block(f, "kvj"), check = cg_block(f, "kvc");
	LLVMBuildCondBr(f->b,
			LLVMBuildICmp(f->b, LLVMIntSLT, kv0, cg_i64(f, a->K), ""),
			check, all);
	LLVMPositionBuilderAtEnd(f->b, check);
	/* the kernel's own test: its sums over vectors of its width */
	LLVMBuildCondBr(f->b,
			a->fin    ? a->fin
			: a->wide ? cg_attn_finite(a->wide, b->n, false)
				  : cg_attn_finite(a, b->n, false),
			some, all);
	LLVMPositionBuilderAtEnd(f->b, some);
	fn(a, b, xt, kv0, ud);
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, all);
	fn(a, b, xt, NULL, ud);
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, join);
}

/* Inside key k's test: b->sv[k] becomes e = exp(s - m) (cg_attn_exp),
 * and b->kp[k] the keep mask; returns e and the mask (*keep, NULL
 * without dropout). */
static LLVMValueRef exp_key(cg_attn *a, const sblock *b, int64_t k,
			    LLVMValueRef *keep)
{
	LLVMValueRef e = cg_attn_exp(a, vget(a, b->sv[k]), b->shift);
	cg_attn_set(a, b->sv[k], e);
	*keep = NULL;
	if (a->has_dropout) {
		*keep = cg_attn_keep_t(a, b->n, b->q0, k);
		cg_attn_set(a, b->kp[k], *keep);
	}
	return e;
}

/* Before the keys' exponentials: b->sv[k] of a skipped key becomes 0,
 * its keep mask all clear. */
static void clear_skipped(cg_attn *a, sblock *b)
{
	cg_fn *f = a->f;
	LLVMTypeRef bt = LLVMVectorType(LLVMInt1TypeInContext(f->ctx), a->vw);
	for (int64_t k = 0; k < a->K; k++) {
		if (a->has_dropout)
			b->kp[k] = cg_attn_var(a, bt, LLVMConstNull(bt));
		if (b->kv && k > 0) {
			/* a vector of the test: a select on one i1 of
			 * vectors becomes a branch in x86's back end */
			LLVMValueRef skip = LLVMBuildICmp(f->b, LLVMIntSGE,
							  cg_i64(f, k), b->kv,
							  "");
			skip = cg_attn_splat(a, skip);
			cg_attn_set(a, b->sv[k],
				    LLVMBuildSelect(f->b, skip, vconst(a, 0),
						    vget(a, b->sv[k]), ""));
		}
	}
}

/* x where keep is set (times s; s NULL: 1), 0 elsewhere; x without
 * dropout (keep NULL). */
static LLVMValueRef dropped(cg_attn *a, LLVMValueRef keep, LLVMValueRef x,
			    LLVMValueRef s)
{
	if (!keep)
		return x;
	if (s)
		x = LLVMBuildFMul(a->f->b, x, s, "");
	return LLVMBuildSelect(a->f->b, keep, x, vconst(a, 0), "");
}

/* 1 / (1 - p) in every lane in a training run with dropout, else 1. */
static LLVMValueRef keep_scale(cg_attn *a)
{
	cg_fn *f = a->f;
	LLVMValueRef one = cg_f32(f, 1);
	if (a->has_dropout)
		one = LLVMBuildSelect(f->b, a->drop_on,
				      cg_f32(f, a->keep_scale), one, "");
	return cg_splat(f, a->vw, one);
}

/* ---- rows in vectors -------------------------------------------------------------- */

/* The width of the row vectors (the output's rows; dq, dk, dv, and the
 * rows of q, k and g they read): 8 where every row fits in 8 floats,
 * else vw. Heads of 8 (the Transformer's) in 16-wide vectors would
 * leave half of every FMA empty, and AVX-512 machines run 8-wide FMAs
 * at least as fast (Zen 4 splits a 16-wide one in two). Lanes are
 * independent: the width changes no result. */
static unsigned row_width(const cg_attn *a)
{
	return a->lw > 8 && a->d <= 8 && a->dv <= 8 ? 8 : a->lw;
}

/* Vectors of rw floats at p + c of a row of width w: the last one's
 * lanes past w read as 0 (load) or left alone (store). */
static LLVMValueRef row_load(cg_attn *a, unsigned rw, LLVMValueRef p, int64_t w,
			     int64_t c)
{
	int64_t left = w - c;
	return cg_vload_part(a->f, rw, cg_ati(a->f, p, c),
			     left >= rw ? rw : (unsigned)left);
}

static void row_store(cg_attn *a, unsigned rw, LLVMValueRef v, LLVMValueRef p,
		      int64_t w, int64_t c)
{
	int64_t left = w - c;
	cg_vstore_part(a->f, v, cg_ati(a->f, p, c),
		       left >= rw ? rw : (unsigned)left);
}

/* The vectors of rw floats of a row of width w at p. */
static void load_row(cg_attn *a, unsigned rw, LLVMValueRef *r, LLVMValueRef p,
		     int64_t w)
{
	for (int64_t v = 0; v * rw < w; v++)
		r[v] = row_load(a, rw, p, w, v * rw);
}

/* acc[v] += x row[v] for the vectors of rw floats of a row of width w,
 * with x = buf[k * vw + t]: row t's value of key k. */
static void add_key(cg_attn *a, unsigned rw, LLVMValueRef *acc,
		    LLVMValueRef buf, int64_t k, LLVMValueRef t,
		    const LLVMValueRef *row, int64_t w)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, rw);
	LLVMValueRef x = cg_splat(f, rw,
				  cg_load(f, cg_at(f, buf,
						   cg_addi(f, t, k * a->lw))));
	for (int64_t v = 0; v * rw < w; v++)
		cg_attn_set(a, acc[v],
			    fma_v(a, x, row[v], cg_attn_get(a, vt, acc[v])));
}

/* Variables for the vectors of rw floats of a row of width w, 0. */
static void zero_row(cg_attn *a, unsigned rw, LLVMValueRef *acc, int64_t w)
{
	LLVMTypeRef vt = cg_t_vec(a->f, rw);
	for (int64_t v = 0; v * rw < w; v++)
		acc[v] = cg_attn_var(a, vt, LLVMConstNull(vt));
}

/* ---- dead query rows -------------------------------------------------------------- */

/* +0 into rows t of the block, rows <= t < full, of a result (at p,
 * rows of H heads of w floats): the dead query rows left out. */
static void zero_dead_rows(cg_attn *a, const sblock *b, LLVMValueRef p,
			   int64_t w)
{
	cg_fn *f = a->f;
	unsigned rw = row_width(a);
	LLVMValueRef z = LLVMConstNull(cg_t_vec(f, rw));
	cg_loop l;
	LLVMValueRef t = cg_loop_begin(f, &l, b->rows, b->full, 1);
	LLVMValueRef dst = cg_at(f, p,
				 cg_attn_row(a, b->n, a->Q, cg_add(f, b->q0, t),
					     w));
	for (int64_t v = 0; v * rw < w; v++)
		row_store(a, rw, z, dst, w, v * rw);
	cg_loop_end(f, &l);
}

/* ---- blocks of few rows ---------------------------------------------------------- */

/* A block's code, given its rows (n, q0, rows, full). */
typedef void (*block_fn)(cg_attn *a, sblock *b, void *ud);

/* fn's code for block b: in vectors of 8 lanes where the block has at
 * most 8 rows and the kernel's vectors are wider (a->vw 16, AVX-512),
 * else in the kernel's. The Transformer's blocks, one of its 10 query
 * rows per lane, hold only their live rows in a training step (3 to 6):
 * in 16 lanes, more than half of every vector over the rows would be
 * empty, and Zen 4 runs two 8-wide operations in the time of one 16-wide
 * one (the scores' FMAs, the exponentials, dropout's 64-bit hashes, the
 * transposes of Q and dO). The lanes are independent: a row's values
 * are the same bits at either width (the sums over keys keep the
 * kernel's order, a->lw), and the stack buffers keep the kernel's
 * layout, so that either width reads what the other wrote (the weights'
 * cache: wc_slot_floats). */
static void by_width(cg_attn *a, sblock *b, block_fn fn, void *ud)
{
	cg_fn *f = a->f;
	bool some_few = a->n_live || (a->Q % a->vw != 0 && a->Q % a->vw <= 8);
	if (a->vw <= 8 || !some_few) {
		fn(a, b, ud);
		return;
	}
	cg_attn n = *a;
	n.vw = 8;
	n.wide = a;
	sblock bn = *b;
	if (a->Q <= 8) {
		fn(&n, &bn, ud);
		return;
	}
	LLVMBasicBlockRef few = cg_block(f, "bw8"), many = cg_block(f, "bw16"),
			  join = cg_block(f, "bwj");
	LLVMBuildCondBr(f->b,
			LLVMBuildICmp(f->b, LLVMIntSLE, b->rows, cg_i64(f, 8),
				      ""),
			few, many);
	LLVMPositionBuilderAtEnd(f->b, few);
	fn(&n, &bn, ud);
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, many);
	fn(a, b, ud);
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, join);
}

/* ---- forward ---------------------------------------------------------------------- */

/* The factor r = keep_scale / l of the block's rows, or 0 in the rows
 * whose weights are all NaN (l NaN, or 0 when no score rose above -inf)
 * and whose K keys dropout drops, every one: the interpreter's output
 * row is then sum_k 0 v_k, which the accumulators hold, not NaN. */
static LLVMValueRef dropped_rows_factor(cg_attn *a, const sblock *b,
					LLVMValueRef r, LLVMValueRef l)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMTypeRef bt = LLVMVectorType(LLVMInt1TypeInContext(f->ctx), a->vw);
	LLVMValueRef x = cg_attn_var(a, vt, r);
	LLVMValueRef bad = LLVMBuildFCmp(f->b, LLVMRealULE, l, vconst(a, 0), "");
	bad = LLVMBuildAnd(f->b, bad, cg_attn_lanes(a, b->rows), "");
	LLVMValueRef any = cg_intrinsic(f, "llvm.vector.reduce.or", &bt, 1,
					&bad, 1);
	LLVMBasicBlockRef join = cg_if_begin(f, any);
	LLVMValueRef kept = cg_attn_keep_t(a, b->n, b->q0, 0);
	for (int64_t k = 1; k < a->K; k++)
		kept = LLVMBuildOr(f->b, kept,
				   cg_attn_keep_t(a, b->n, b->q0, k), "");
	LLVMValueRef none = LLVMBuildAnd(f->b, bad,
					 LLVMBuildNot(f->b, kept, ""), "");
	cg_attn_set(a, x, LLVMBuildSelect(f->b, none, vconst(a, 0), r, ""));
	cg_if_end(f, join);
	return vget(a, x);
}

/* Row t of the block: O_t = (sum_k w_k[t] V[k]) r[t], w_k = dropout(e_k)
 * at pw + k * vw and r at pw + K * vw: V's rows read as vectors, nothing
 * transposed, and no lane empty as in vectors over the block's rows (10
 * rows in 16 lanes). Each sum is the same chain of FMAs, key by key from
 * +0, as over the rows. Every key, with no test: a skipped key's weight
 * is 0 and its values finite (the skip's condition), and 0 v added to a
 * sum that starts at +0 leaves it as it is. */
static void sfwd_rows(cg_attn *a, const sblock *b, LLVMValueRef pw)
{
	cg_fn *f = a->f;
	unsigned rw = row_width(a);
	LLVMTypeRef vt = cg_t_vec(f, rw);
	LLVMValueRef acc[CG_ATTN_SMALL_W], vr[CG_ATTN_SMALL_W];
	cg_loop l;
	LLVMValueRef t = cg_loop_begin(f, &l, cg_i64(f, 0), b->rows, 1);
	zero_row(a, rw, acc, a->dv);
	for (int64_t k = 0; k < a->K; k++) {
		load_row(a, rw, vr, key_row(a, a->v, b->n, k, a->dv), a->dv);
		add_key(a, rw, acc, pw, k, t, vr, a->dv);
	}
	LLVMValueRef r = cg_splat(f, rw,
				  cg_load(f, cg_at(f, pw,
						   cg_addi(f, t, a->K * a->lw))));
	LLVMValueRef dst = cg_at(f, a->k->out,
				 cg_attn_row(a, b->n, a->Q, cg_add(f, b->q0, t),
					     a->dv));
	for (int64_t v = 0; v * rw < a->dv; v++)
		row_store(a, rw,
			  LLVMBuildFMul(f->b, cg_attn_get(a, vt, acc[v]), r, ""),
			  dst, a->dv, v * rw);
	cg_loop_end(f, &l);
	/* unrolled, the weights' loads become extractions from the
	 * vectors just stored, a shuffle each */
	cg_loop_no_unroll(f, &l);
	if (a->n_live)
		zero_dead_rows(a, b, a->k->out, a->dv);
}

/* The block's slot of the weights' cache: its exponentials (0 for the
 * keys it skips), 1 / l as the backward computes it, the keep masks and
 * the keys it visited. */
static void wc_store(cg_attn *a, const sblock *b, LLVMValueRef l)
{
	cg_fn *f = a->f;
	LLVMTypeRef bt = LLVMVectorType(LLVMInt1TypeInContext(f->ctx), a->vw);
	LLVMTypeRef mt = LLVMIntTypeInContext(f->ctx, a->vw);
	LLVMValueRef slot = wc_slot(a, b->n, b->q0);
	for (int64_t k = 0; k < a->K; k++)
		cg_vstore(f, vget(a, b->sv[k]), cg_ati(f, slot, k * a->vw), 4);
	cg_vstore(f, LLVMBuildFDiv(f->b, vconst(a, 1), l, ""),
		  cg_ati(f, slot, a->K * a->vw), 4);
	for (int64_t k = 0; a->has_dropout && k < a->K; k++) {
		LLVMValueRef m = LLVMBuildBitCast(f->b,
						  cg_attn_get(a, bt, b->kp[k]),
						  mt, "");
		LLVMBuildStore(f->b, LLVMBuildZExt(f->b, m, cg_t_i32(f), ""),
			       wc_int(a, slot, k));
	}
	LLVMValueRef kv = b->kv ? LLVMBuildTrunc(f->b, b->kv, cg_t_i32(f), "")
				: cg_i32(f, (int32_t)a->K);
	LLVMBuildStore(f->b, kv, wc_int(a, slot, a->K));
}

/* The block's output rows: sum_k dropout(e_k) V[k] / l over the keys it
 * visits. The weights, a vector over the block's rows per key (0 for a
 * skipped key), go to the stack (pw) with r = keep_scale / l, and
 * sfwd_rows sums them a row at a time. */
static void sfwd_keys(cg_attn *a, sblock *b, const LLVMValueRef *const *xt,
		      LLVMValueRef kv0, void *ud)
{
	cg_fn *f = a->f;
	LLVMValueRef keep, pw = ud;
	LLVMTypeRef bt = LLVMVectorType(LLVMInt1TypeInContext(f->ctx), a->vw);
	scores_t(a, b, xt[0], kv0);
	clear_skipped(a, b);
	for (int64_t k = 0; k < a->K; k++) {
		LLVMBasicBlockRef join = key_begin(a, b, k);
		exp_key(a, b, k, &keep);
		key_end(a, join);
	}
	for (int64_t k = 0; k < a->K; k++) {
		keep = a->has_dropout ? cg_attn_get(a, bt, b->kp[k]) : NULL;
		cg_vstore(f, dropped(a, keep, vget(a, b->sv[k]), NULL),
			  cg_ati(f, pw, k * a->lw), 4);
	}
	LLVMValueRef l = key_sum_vars(a, b->sv);
	if (a->has_wc)
		wc_store(a, b, l);
	LLVMValueRef r = LLVMBuildFDiv(f->b, keep_scale(a), l, "");
	if (a->has_dropout)
		r = dropped_rows_factor(a, b, r, l);
	cg_vstore(f, r, cg_ati(f, pw, a->K * a->lw), 4);
}

static void sfwd_block(cg_attn *a, sblock *b, void *pw)
{
	LLVMValueRef qt[CG_ATTN_SMALL_W];
	const LLVMValueRef *xt[1] = {qt};
	cg_attn_load_t(a, qt, query_rows(a, a->q, b, a->d), a->d, a->H * a->d,
		       b->rows);
	block_keys_code(a, b, xt, sfwd_keys, pw);
}

/* Block it of the loop: (n, block of vw query rows), and its half of
 * the weights' buffer pw. */
static sblock sfwd_at(cg_attn *a, LLVMValueRef it, LLVMValueRef pw,
		      LLVMValueRef *half)
{
	cg_fn *f = a->f;
	int64_t nqb = (a->Q + a->vw - 1) / a->vw;
	sblock b = {0};
	b.n = LLVMBuildUDiv(f->b, it, cg_i64(f, nqb), "");
	b.q0 = cg_muli(f, LLVMBuildURem(f->b, it, cg_i64(f, nqb), ""), a->vw);
	b.rows = cg_attn_block_len(a, a->Q, b.q0, a->vw);
	b.full = b.rows;
	if (a->n_live)
		b.rows = cg_attn_live_rows(a, cg_attn_live(a, b.n), b.q0,
					   b.full);
	LLVMValueRef odd = LLVMBuildAnd(f->b, it, cg_i64(f, 1), "");
	*half = cg_at(f, pw, cg_muli(f, odd, (a->K + 1) * a->lw));
	return b;
}

/* The loop over (n, block of vw query rows) in [lo, hi), pipelined:
 * iteration it computes block it's weights into one half of the
 * buffer, then block it - 1's output rows from the other half, so that
 * the rows' products fill the time the weights' chain of dependent
 * steps (scores, maximum, exponentials, sum, division) leaves the FMA
 * units idle. The operations are those of one block after the other. */
static void sfwd_body(cg_attn *a)
{
	cg_fn *f = a->f;
	LLVMValueRef pw = cg_attn_buffer(a, cg_t_f32(f), 2 * (a->K + 1) * a->lw);
	LLVMValueRef half;
	cg_loop l;
	cg_attn_finite_begin(a);
	LLVMValueRef it = cg_loop_begin(f, &l, a->k->lo,
					cg_addi(f, a->k->hi, 1), 1);
	LLVMBasicBlockRef join = cg_if_begin(f, LLVMBuildICmp(f->b, LLVMIntSLT,
							      it, a->k->hi, ""));
	sblock b = sfwd_at(a, it, pw, &half);
	/* a block of dead rows only: nothing (its slot of the weights'
	 * cache too: the gradient leaves the same rows out) */
	LLVMBasicBlockRef some =
		a->n_live
			? cg_if_begin(f, LLVMBuildICmp(f->b, LLVMIntSGT, b.rows,
						       cg_i64(f, 0), ""))
			: NULL;
	by_width(a, &b, sfwd_block, half);
	if (some)
		cg_if_end(f, some);
	cg_if_end(f, join);
	join = cg_if_begin(f, LLVMBuildICmp(f->b, LLVMIntSGT, it, a->k->lo, ""));
	LLVMValueRef prev = LLVMBuildSub(f->b, it, cg_i64(f, 1), "");
	sblock p = sfwd_at(a, prev, pw, &half);
	sfwd_rows(a, &p, half);
	cg_if_end(f, join);
	cg_loop_end(f, &l);
}

void cg_attn_small_fwd(cg_kernel *k, const cg_attn *a)
{
	cg_attn s = *a;
	s.has_wc = cg_attn_cache_pair(k->L, k->g, k->id) != IR_NONE;
	s.lw = s.vw;
	assert(k->n_in == k->node->n_args + s.has_wc + (uint32_t)s.n_live);
	k->extent = a->N * ((a->Q + a->vw - 1) / a->vw);
	k->work = a->N * a->Q * a->K * (a->d + a->dv) / 8;
	cg_attn_count_row_skip(k, &s);
	cg_attn_call_body(k, &s, "sfwd", sfwd_body);
}

/* ---- backward --------------------------------------------------------------------- */

/* dk and dv of one attention, one variable per key and vector of a row,
 * summed over its query blocks; dS and dropout(P) of the block in
 * between (K rows of vw floats on the stack). */
typedef struct sgrads {
	LLVMValueRef dk[CG_ATTN_SMALL_K][CG_ATTN_SMALL_W / 8];
	LLVMValueRef dv[CG_ATTN_SMALL_K][CG_ATTN_SMALL_W / 8];
	LLVMValueRef ds, pd;
	/* the block's slot of the weights' cache and the keys the forward
	 * visited (i64); slot NULL: the weights recomputed */
	LLVMValueRef slot, ckv;
	unsigned rw;     /* floats in a vector of those rows: row_width */
	int64_t nd, ndv; /* vectors per row of dk, dv */
} sgrads;

/* The block's exponentials (b->sv) and keep masks (b->kp) from its slot
 * of the weights' cache, as scores_t and exp_key would compute them
 * again: the forward's, from the same scores; kv the keys it visited
 * (NULL: all). */
static void wc_load(cg_attn *a, sblock *b, LLVMValueRef slot, LLVMValueRef kv)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMTypeRef bt = LLVMVectorType(LLVMInt1TypeInContext(f->ctx), a->vw);
	LLVMTypeRef mt = LLVMIntTypeInContext(f->ctx, a->vw);
	b->kv = kv;
	for (int64_t k = 0; k < a->K; k++) {
		b->sv[k] = cg_attn_var(a, vt,
				       cg_vload(f, a->vw,
						cg_ati(f, slot, k * a->vw), 4));
		if (!a->has_dropout)
			continue;
		LLVMValueRef m = LLVMBuildLoad2(f->b, cg_t_i32(f),
						wc_int(a, slot, k), "");
		m = LLVMBuildBitCast(f->b, LLVMBuildTrunc(f->b, m, mt, ""), bt,
				     "");
		b->kp[k] = cg_attn_var(a, bt, m);
	}
}

/* The block's weights P_k (in b->sv), dP_k = dropout(dO V[k]^T) (in
 * dp[k]) and D = sum_k P_k dP_k: the row sums the softmax's gradient
 * needs. */
static LLVMValueRef sbwd_weights(cg_attn *a, sblock *b,
				 const LLVMValueRef *const *xt, LLVMValueRef kv0,
				 LLVMValueRef *dp, const sgrads *g)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMTypeRef bt = LLVMVectorType(LLVMInt1TypeInContext(f->ctx), a->vw);
	LLVMValueRef ex[CG_ATTN_SMALL_K], keep;
	const LLVMValueRef *gt = xt[1];
	if (g->slot) {
		wc_load(a, b, g->slot, kv0 ? g->ckv : NULL);
	} else {
		scores_t(a, b, xt[0], kv0);
		clear_skipped(a, b);
	}
	LLVMValueRef ks = a->has_dropout ? keep_scale(a) : NULL;
	for (int64_t k = 0; k < a->K; k++) {
		dp[k] = cg_attn_var(a, vt, vconst(a, 0));
		ex[k] = cg_attn_var(a, vt, vconst(a, 0));
	}
	for (int64_t k = 0; k < a->K; k++) {
		LLVMBasicBlockRef join = key_begin(a, b, k);
		LLVMValueRef e;
		if (g->slot) {
			e = vget(a, b->sv[k]);
			keep = a->has_dropout ? cg_attn_get(a, bt, b->kp[k])
					      : NULL;
		} else {
			e = exp_key(a, b, k, &keep);
		}
		LLVMValueRef x = dot_t(a, gt, key_row(a, a->v, b->n, k, a->dv),
				       a->dv);
		x = dropped(a, keep, x, ks);
		cg_attn_set(a, dp[k], x);
		cg_attn_set(a, ex[k], LLVMBuildFMul(f->b, e, x, ""));
		key_end(a, join);
	}
	LLVMValueRef rl = g->slot ? cg_vload(f, a->vw,
					     cg_ati(f, g->slot, a->K * a->vw), 4)
				  : LLVMBuildFDiv(f->b, vconst(a, 1),
						  key_sum_vars(a, b->sv), "");
	for (int64_t k = 0; k < a->K; k++)
		cg_attn_set(a, b->sv[k],
			    LLVMBuildFMul(f->b, vget(a, b->sv[k]), rl, ""));
	return LLVMBuildFMul(f->b, key_sum_vars(a, ex), rl, "");
}

/* dS_k = P_k (dP_k - D) (0 past the valid length) times scale, and
 * dropout(P_k), of every visited key into g->ds, g->pd. */
static void sbwd_ds(cg_attn *a, sblock *b, const LLVMValueRef *const *xt,
		    LLVMValueRef kv0, sgrads *g)
{
	cg_fn *f = a->f;
	LLVMTypeRef bt = LLVMVectorType(LLVMInt1TypeInContext(f->ctx), a->vw);
	LLVMValueRef dp[CG_ATTN_SMALL_K];
	LLVMValueRef D = sbwd_weights(a, b, xt, kv0, dp, g);
	LLVMValueRef ks = a->has_dropout ? keep_scale(a) : NULL;
	for (int64_t k = 0; k < a->K; k++) {
		LLVMBasicBlockRef join = key_begin(a, b, k);
		LLVMValueRef p = vget(a, b->sv[k]);
		LLVMValueRef ds = LLVMBuildFMul(f->b, p,
						LLVMBuildFSub(f->b,
							      vget(a, dp[k]), D,
							      ""),
						"");
		if (b->vl)
			ds = LLVMBuildSelect(f->b, in_valid_t(a, b, k), ds,
					     vconst(a, 0), "");
		ds = LLVMBuildFMul(f->b, ds, vconst(a, a->scale), "");
		LLVMValueRef keep = ks ? cg_attn_get(a, bt, b->kp[k]) : NULL;
		cg_vstore(f, ds, cg_ati(f, g->ds, k * a->lw), 4);
		cg_vstore(f, dropped(a, keep, p, ks),
			  cg_ati(f, g->pd, k * a->lw), 4);
		key_end(a, join);
	}
}

/* Row t of the block: dq_t = sum_k dS_k[t] K[k] (stored), and
 * dk[k] += dS_k[t] q_t, dv[k] += dropout(P_k)[t] dO_t for every visited
 * key k: rows read and written as vectors, nothing transposed. */
static void sbwd_accumulate(cg_attn *a, const sblock *b, sgrads *g)
{
	cg_fn *f = a->f;
	LLVMValueRef qv[CG_ATTN_SMALL_W / 8], gv[CG_ATTN_SMALL_W / 8];
	LLVMValueRef kr[CG_ATTN_SMALL_W / 8], dq[CG_ATTN_SMALL_W / 8];
	cg_loop l;
	LLVMValueRef t = cg_loop_begin(f, &l, cg_i64(f, 0), b->rows, 1);
	LLVMValueRef qrow = cg_attn_row(a, b->n, a->Q, cg_add(f, b->q0, t),
					a->d);
	unsigned rw = g->rw;
	load_row(a, rw, qv, cg_at(f, a->q, qrow), a->d);
	load_row(a, rw, gv,
		 cg_at(f, a->g,
		       cg_attn_row(a, b->n, a->Q, cg_add(f, b->q0, t), a->dv)),
		 a->dv);
	zero_row(a, rw, dq, a->d);
	for (int64_t k = 0; k < a->K; k++) {
		LLVMBasicBlockRef join = key_begin(a, b, k);
		load_row(a, rw, kr, key_row(a, a->kk, b->n, k, a->d), a->d);
		add_key(a, rw, dq, g->ds, k, t, kr, a->d);
		add_key(a, rw, g->dk[k], g->ds, k, t, qv, a->d);
		add_key(a, rw, g->dv[k], g->pd, k, t, gv, a->dv);
		key_end(a, join);
	}
	LLVMValueRef dst = cg_at(f, a->k->out, qrow);
	for (int64_t v = 0; v * rw < a->d; v++)
		row_store(a, rw, cg_attn_get(a, cg_t_vec(f, rw), dq[v]), dst,
			  a->d, v * rw);
	cg_loop_end(f, &l);
}

/* A block's gradients over the keys it visits: xt holds its transposed
 * queries and output gradients. */
static void sbwd_keys(cg_attn *a, sblock *b, const LLVMValueRef *const *xt,
		      LLVMValueRef kv0, void *ud)
{
	sgrads *g = ud;
	sbwd_ds(a, b, xt, kv0, g);
	sbwd_accumulate(a, b, g);
}

/* The block's rows of Q transposed into qt, a vector per column. */
static void load_qt(cg_attn *a, const sblock *b, LLVMValueRef *qt)
{
	cg_attn_load_t(a, qt, query_rows(a, a->q, b, a->d), a->d, a->H * a->d,
		       b->rows);
}

/* The block's code with the weights' cache: its valid lengths, then its
 * keys' code from its slot where the forward computed what the backward
 * would: on the path that skips keys (a->fin: the backward's test,
 * which holds only where the forward's does, so the forward skipped the
 * same keys), and on the one that visits all where the forward did too
 * (kv = K); recomputed otherwise (a non-finite q, k or dO and keys the
 * forward skipped). */
static void sbwd_block_wc(cg_attn *a, sblock *b, LLVMValueRef *qt,
			  const LLVMValueRef *gt, sgrads *g)
{
	cg_fn *f = a->f;
	/* the cached paths read no scores: Q transposed only to recompute */
	const LLVMValueRef *xt[2] = {qt, gt};
	b->vl = a->has_valid ? cg_attn_valid_t(a, b->n, b->q0, b->rows) : NULL;
	LLVMValueRef kv0 = block_keys(a, b);
	g->slot = wc_slot(a, b->n, b->q0);
	g->ckv = LLVMBuildSExt(f->b,
			       LLVMBuildLoad2(f->b, cg_t_i32(f),
					      wc_int(a, g->slot, a->K), ""),
			       cg_t_i64(f), "");
	if (!kv0) {
		sbwd_keys(a, b, xt, NULL, g);
		return;
	}
	LLVMBasicBlockRef some = cg_block(f, "wks"), all = cg_block(f, "wka"),
			  cached = cg_block(f, "wkc"),
			  again = cg_block(f, "wkr"), join = cg_block(f, "wkj");
	LLVMValueRef is_some = LLVMBuildAnd(f->b,
					    LLVMBuildICmp(f->b, LLVMIntSLT, kv0,
							  cg_i64(f, a->K), ""),
					    a->fin, "");
	LLVMBuildCondBr(f->b, is_some, some, all);
	LLVMPositionBuilderAtEnd(f->b, some);
	sbwd_keys(a, b, xt, kv0, g);
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, all);
	LLVMBuildCondBr(f->b,
			LLVMBuildICmp(f->b, LLVMIntEQ, g->ckv, cg_i64(f, a->K),
				      ""),
			cached, again);
	LLVMPositionBuilderAtEnd(f->b, cached);
	sbwd_keys(a, b, xt, NULL, g);
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, again);
	/* dropout's key read back from the stack with a volatile load:
	 * else LLVM moved this rare path's hashes up to where every block
	 * computed them */
	cg_attn r = *a;
	if (a->has_dropout) {
		LLVMValueRef key = cg_entry_alloca(f, cg_t_i64(f), 8);
		LLVMBuildStore(f->b, a->drop_key, key);
		r.drop_key = LLVMBuildLoad2(f->b, cg_t_i64(f), key, "");
		LLVMSetVolatile(r.drop_key, 1);
	}
	load_qt(&r, b, qt);
	LLVMValueRef slot = g->slot;
	g->slot = NULL;
	sbwd_keys(&r, b, xt, NULL, g);
	g->slot = slot;
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, join);
}

/* The block's gradients: its rows of dO (and Q) transposed, then its
 * keys' code, from the weights' cache where there is one. */
static void sbwd_block(cg_attn *a, sblock *b, void *ud)
{
	sgrads *g = ud;
	LLVMValueRef qt[CG_ATTN_SMALL_W], gt[CG_ATTN_SMALL_W];
	const LLVMValueRef *xt[2] = {qt, gt};
	cg_attn_load_t(a, gt, query_rows(a, a->g, b, a->dv), a->dv,
		       a->H * a->dv, b->rows);
	g->slot = NULL;
	if (a->has_wc) {
		sbwd_block_wc(a, b, qt, gt, g);
	} else {
		load_qt(a, b, qt);
		block_keys_code(a, b, xt, sbwd_keys, g);
	}
}

/* The accumulated rows of one part (dk at base with rows of w floats, or
 * dv) stored into attention n's rows of the result. */
static void store_rows(cg_attn *a, unsigned rw, LLVMValueRef n,
		       LLVMValueRef (*acc)[CG_ATTN_SMALL_W / 8], int64_t base,
		       int64_t w, int64_t nv)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, rw);
	for (int64_t k = 0; k < a->K; k++) {
		LLVMValueRef row = cg_at(f, a->k->out,
					 cg_addi(f,
						 cg_attn_row(a, n, a->K,
							     cg_i64(f, k), w),
						 base));
		for (int64_t v = 0; v < nv; v++)
			row_store(a, rw, cg_attn_get(a, vt, acc[k][v]), row, w,
				  v * rw);
	}
}

/* Every query block of attention n, then its dk and dv. */
static void sbwd_attention(cg_attn *a, LLVMValueRef n, sgrads *g)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, g->rw);
	a->fin = a->has_valid ? cg_attn_finite(a, n, true) : NULL;
	for (int64_t k = 0; k < a->K; k++) {
		for (int64_t v = 0; v < g->nd; v++)
			g->dk[k][v] = cg_attn_var(a, vt, LLVMConstNull(vt));
		for (int64_t v = 0; v < g->ndv; v++)
			g->dv[k][v] = cg_attn_var(a, vt, LLVMConstNull(vt));
	}
	LLVMValueRef live = a->n_live ? cg_attn_live(a, n) : NULL;
	cg_loop l;
	int64_t nqb = (a->Q + a->vw - 1) / a->vw;
	LLVMValueRef qb = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, nqb), 1);
	sblock b = {.n = n, .q0 = cg_muli(f, qb, a->vw)};
	b.rows = cg_attn_block_len(a, a->Q, b.q0, a->vw);
	b.full = b.rows;
	/* dead query rows: their output gradient is 0, and so their dq and
	 * what they add to dk and dv (+-0) */
	LLVMBasicBlockRef some = NULL;
	if (live) {
		b.rows = cg_attn_live_rows(a, live, b.q0, b.full);
		some = cg_if_begin(f, LLVMBuildICmp(f->b, LLVMIntSGT, b.rows,
						    cg_i64(f, 0), ""));
	}
	by_width(a, &b, sbwd_block, g);
	if (some) {
		cg_if_end(f, some);
		zero_dead_rows(a, &b, a->k->out, a->d);
	}
	cg_loop_end(f, &l);
	int64_t dk0 = a->N * a->Q * a->d, dv0 = dk0 + a->N * a->K * a->d;
	store_rows(a, g->rw, n, g->dk, dk0, a->d, g->nd);
	store_rows(a, g->rw, n, g->dv, dv0, a->dv, g->ndv);
}

/* The loop over attentions n in [lo, hi). */
static void sbwd_body(cg_attn *a)
{
	cg_fn *f = a->f;
	sgrads g = {.rw = row_width(a)};
	g.nd = (a->d + g.rw - 1) / g.rw;
	g.ndv = (a->dv + g.rw - 1) / g.rw;
	g.ds = cg_attn_buffer(a, cg_t_f32(f), a->K * a->lw);
	g.pd = cg_attn_buffer(a, cg_t_f32(f), a->K * a->lw);
	cg_loop l;
	cg_attn_finite_begin(a);
	LLVMValueRef n = cg_loop_begin(f, &l, a->k->lo, a->k->hi, 1);
	sbwd_attention(a, n, &g);
	cg_loop_end(f, &l);
}

void cg_attn_small_bwd(cg_kernel *k, const cg_attn *a)
{
	cg_attn s = *a;
	s.has_wc = cg_attn_cache_pair(k->L, k->g, k->id) != IR_NONE;
	s.lw = s.vw;
	assert(k->n_in == k->node->n_args + s.has_wc + (uint32_t)s.n_live);
	k->extent = a->N;
	k->work = a->N * a->Q * a->K * (a->d + a->dv) / 4;
	cg_attn_count_row_skip(k, &s);
	cg_attn_call_body(k, &s, "sbwd", sbwd_body);
}
