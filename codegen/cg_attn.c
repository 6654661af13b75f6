/*
 * cg_attn.c - the pieces the fused attention kernels are built from
 * (cg_attn.h): block sizes and stack buffers, valid lengths, packing a
 * block of keys or values transposed, the register-tiled product, the
 * masked scores and dropout masks of a block row, and the loop over key
 * blocks that stops at the valid lengths.
 *
 * Everything is sized at compile time from the node's concrete shape, so
 * the buffers are fixed arrays on the kernel's stack (each thread runs
 * its own call) and the product's column groups and masked last vectors
 * are unrolled by the generator.
 */
#include "cg_attn.h"

#include "cg_gemm.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define TILE_ROWS 12     /* most rows of C per register tile */
#define BUF_FLOATS 16384 /* most floats of one block buffer (64 KiB) */
#define CAUSAL_BLOCK 32  /* rows and keys of a block under a causal mask */
#define CAUSAL_WIDEST 32 /* the widest heads that take it */

/* ---- locals and buffers ----------------------------------------------------- */

LLVMValueRef cg_attn_var(cg_attn *a, LLVMTypeRef t, LLVMValueRef init)
{
	return cg_var(a->f, t, init);
}

LLVMValueRef cg_attn_get(cg_attn *a, LLVMTypeRef t, LLVMValueRef var)
{
	return LLVMBuildLoad2(a->f->b, t, var, "");
}

void cg_attn_set(cg_attn *a, LLVMValueRef var, LLVMValueRef v)
{
	LLVMBuildStore(a->f->b, v, var);
}

LLVMValueRef cg_attn_buffer(cg_attn *a, LLVMTypeRef t, int64_t n)
{
	return cg_entry_alloca(a->f,
			       LLVMArrayType2(t, (uint64_t)(n > 0 ? n : 1)), 64);
}

static int64_t round_up(int64_t x, int64_t m)
{
	return (x + m - 1) / m * m;
}

static int64_t max64(int64_t x, int64_t y)
{
	return x > y ? x : y;
}

static int64_t min64(int64_t x, int64_t y)
{
	return x < y ? x : y;
}

/* Keys per block: four vectors, fewer for a short K, and few enough that
 * a block of K^T fits BUF_FLOATS. Query rows per block: up to 64, as
 * many as the accumulator rows allow. With valid lengths per query (a
 * causal mask), heads at most CAUSAL_WIDEST wide take blocks of
 * CAUSAL_BLOCK rows and keys: a block of query rows stops at the keys
 * its last row needs, so at 128 steps 64 x 64 blocks computed 3 of
 * the 4 blocks of scores, half of the diagonal ones masked (75% of
 * the square), 32 x 32 blocks 10 of 16 (62.5%); at heads of 32 that
 * saving outweighs the smaller blocks' overhead (the width-256 GPT's
 * attention kernels took 13% less time, docs/benchmarks.md). */
static void choose_blocks(cg_attn *a)
{
	int64_t vw = a->vw, widest = max64(max64(a->d, a->dv), 1);
	a->bc = min64(4 * vw, round_up(max64(a->K, 1), vw));
	a->bc = max64(vw, min64(a->bc, BUF_FLOATS / widest / vw * vw));
	a->nj = a->bc / vw;
	a->wpad = round_up(widest, vw);
	a->br = max64(1, min64(min64(64, a->Q), BUF_FLOATS / a->wpad));
	a->brp = round_up(a->br, vw);
	a->srs = a->bc;
	if (a->has_valid && a->valid_sq != 0 && widest <= CAUSAL_WIDEST) {
		a->bc = max64(vw, min64(a->bc, CAUSAL_BLOCK / vw * vw));
		a->nj = a->bc / vw;
		a->br = min64(a->br, CAUSAL_BLOCK);
		a->brp = round_up(a->br, vw);
		a->srs = a->bc;
	}
	a->nkb = (max64(a->K, 1) + a->bc - 1) / a->bc;
	a->kc = a->nkb * a->bc;
}

void cg_attn_set_rows(cg_attn *a, int64_t br)
{
	a->br = max64(1, min64(br, a->Q));
	a->brp = round_up(a->br, a->vw);
}

void cg_attn_valid_strides(const cg_kernel *k, const ir_type *vt, int64_t *sn,
			   int64_t *sq)
{
	int64_t vd[IR_MAX_RANK];
	int r = cg_lower_dims(k->L, vt, vd);
	*sn = vd[0] == 1 ? 0 : (r == 2 ? vd[1] : 1);
	*sq = r == 2 && vd[1] != 1 ? 1 : 0;
}

void cg_attn_shape(cg_attn *a, const cg_kernel *k, bool is_grad)
{
	const ir_node *n = k->node;
	int64_t qd[IR_MAX_RANK], kd[IR_MAX_RANK], vd[IR_MAX_RANK];
	memset(a, 0, sizeof *a);
	cg_lower_dims(k->L, cg_kernel_arg_type(k, 0), qd);
	cg_lower_dims(k->L, cg_kernel_arg_type(k, 1), kd);
	cg_lower_dims(k->L, cg_kernel_arg_type(k, 2), vd);
	a->H = n->attr.attention.heads;
	a->N = qd[0] * a->H;
	a->Q = qd[1];
	a->d = qd[2] / a->H;
	a->K = kd[1];
	a->dv = vd[2] / a->H;
	a->vw = k->L->vw;
	a->scale = (float)n->attr.attention.scale;
	a->fill = (float)n->attr.attention.fill;
	a->has_valid = n->n_args == (is_grad ? 5u : 4u);
	if (a->has_valid)
		cg_attn_valid_strides(k, cg_kernel_arg_type(k, 3), &a->valid_sn,
				      &a->valid_sq);
	choose_blocks(a);
	ir_id valid[2];
	a->n_live = cg_attn_row_skip_valid(k->L, k->g, k->id, valid);
	if (a->n_live < 0)
		a->n_live = 0;
	double p = n->attr.attention.p;
	a->has_dropout = p > 0;
	/* As cg_lower_dropout: the DROPOUT op's draw and scale. */
	a->threshold = (int64_t)ceil(p * 16777216.0);
	a->keep_scale = (float)(1.0 / (double)(float)(1.0 - p));
}

/* bytes (a multiple of 64) from aligned_alloc, 64-byte aligned; traps
 * when there are none (generated code has no error channel). */
static LLVMValueRef heap_alloc(cg_attn *a, int64_t bytes)
{
	cg_fn *f = a->f;
	LLVMTypeRef i64 = cg_t_i64(f), params[2] = {i64, i64};
	LLVMValueRef args[2] = {cg_i64(f, 64), cg_i64(f, bytes)};
	LLVMValueRef p = cg_call_extern(f, "aligned_alloc",
					LLVMFunctionType(cg_t_ptr(f), params, 2,
							 0),
					args, 2);
	LLVMBasicBlockRef join = cg_if_begin(f, LLVMBuildIsNull(f->b, p, ""));
	cg_intrinsic(f, "llvm.trap", NULL, 0, NULL, 0);
	cg_if_end(f, join);
	return p;
}

static void heap_free(cg_attn *a, LLVMValueRef p)
{
	if (!p)
		return;
	cg_fn *f = a->f;
	LLVMTypeRef fp = cg_t_ptr(f);
	cg_call_extern(f, "free",
		       LLVMFunctionType(LLVMVoidTypeInContext(f->ctx), &fp, 1, 0),
		       &p, 1);
}

/* The cache of a query block's rows (is_cached): ec, and dc in the
 * backward; on the stack when they take at most CG_ATTN_STACK_CACHE,
 * else one heap block (ec, then dc, each 64-byte aligned) that body_end
 * frees. */
static void cache_begin(cg_attn *a, bool is_grad)
{
	cg_fn *f = a->f;
	LLVMTypeRef ft = cg_t_f32(f);
	int64_t n = a->br * a->srs, parts = is_grad ? 2 : 1;
	if (parts * n * 4 <= CG_ATTN_STACK_CACHE) {
		a->ec = cg_attn_buffer(a, ft, n);
		a->dc = is_grad ? cg_attn_buffer(a, ft, n) : NULL;
		return;
	}
	a->heap = heap_alloc(a, parts * n * 4);
	a->ec = a->heap;
	a->dc = is_grad ? cg_ati(f, a->heap, n) : NULL;
}

/* kt_all and vt_all (cg_attn_keys): on the stack when they take at most
 * CG_ATTN_STACK_KEYS, else one heap block that body_end frees. */
static void keys_begin(cg_attn *a, bool is_grad)
{
	cg_fn *f = a->f;
	LLVMTypeRef ft = cg_t_f32(f), it = cg_t_i64(f);
	int64_t nk = a->kc * a->d, nv = is_grad ? a->kc * a->dv : 0;
	int64_t nk_pad = round_up(nk, 16);
	a->packed_n = cg_attn_var(a, it, cg_i64(f, -1));
	a->packed_end = cg_attn_var(a, it, cg_i64(f, 0));
	if ((nk_pad + nv) * 4 <= CG_ATTN_STACK_KEYS) {
		a->kt_all = cg_attn_buffer(a, ft, nk);
		a->vt_all = is_grad ? cg_attn_buffer(a, ft, nv) : NULL;
		return;
	}
	a->keys_heap = heap_alloc(a, (nk_pad + round_up(nv, 16)) * 4);
	a->kt_all = a->keys_heap;
	a->vt_all = is_grad ? cg_ati(f, a->keys_heap, nk_pad) : NULL;
}

static void body_end(cg_attn *a)
{
	heap_free(a, a->heap);
	heap_free(a, a->keys_heap);
}

/* The body's buffers and operands; key is the dropout key argument. */
static void body_begin(cg_attn *a, cg_kernel *kb, bool is_grad, LLVMValueRef key)
{
	cg_fn *f = &kb->f;
	LLVMTypeRef ft = cg_t_f32(f);
	a->k = kb;
	a->f = f;
	a->q = kb->in[0];
	a->kk = kb->in[1];
	a->v = kb->in[2];
	a->valid = a->has_valid ? kb->in[3] : NULL;
	/* the last operand of the node: the weights' cache may follow */
	a->g = is_grad ? kb->in[a->has_valid ? 4 : 3] : NULL;
	if (a->has_dropout) {
		a->drop_on = cg_kernel_is_training(kb);
		a->drop_key = key;
	}
	keys_begin(a, is_grad);
	a->sb = cg_attn_buffer(a, ft, a->br * a->bc);
	a->db = is_grad ? cg_attn_buffer(a, ft, a->br * a->bc) : NULL;
	a->acc = cg_attn_buffer(a, ft, a->br * a->wpad);
	a->m = cg_attn_buffer(a, ft, a->brp);
	a->l = cg_attn_buffer(a, ft, a->brp);
	a->x = cg_attn_buffer(a, ft, a->brp);
	a->rv = cg_attn_buffer(a, cg_t_i64(f), a->br);
	if (a->has_valid) {
		a->nd = cg_attn_buffer(a, cg_t_i64(f), a->brp);
		a->fr = cg_attn_buffer(a, cg_t_i32(f), a->bc);
	}
	if (a->is_cached)
		cache_begin(a, is_grad);
	if (a->n_live > 0) {
		/* the kernel's last operands (cg_attn_row_skip_valid) */
		a->live_v = kb->in[kb->n_in - (uint32_t)a->n_live];
		a->live_w = a->n_live > 1 ? kb->in[kb->n_in - 1] : NULL;
		a->rs_on = LLVMBuildICmp(f->b, LLVMIntNE,
					 LLVMBuildLoad2(f->b, cg_t_i32(f),
							kb->L->row_skip, ""),
					 cg_i32(f, 0), "");
	}
	if (a->has_wc) {
		/* after the forward's output (N x Q x dv floats) */
		int64_t at = (int64_t)cg_attn_cache_offset(
				     (uint64_t)(a->N * a->Q * a->dv) * 4) /
			     4;
		a->wc = cg_ati(f,
			       is_grad ? kb->in[a->has_valid ? 5 : 4] : kb->out,
			       at);
	}
}

/* The shared function (cg_kernel_outline_begin's signature). */
static LLVMValueRef make_body(const cg_kernel *k, const cg_attn *shape,
			      const char *name, cg_attn_gen gen)
{
	cg_kernel kb;
	LLVMValueRef key = cg_kernel_outline_begin(k, name, &kb);
	cg_attn a = *shape;
	body_begin(&a, &kb, k->node->op == IR_OP_FUSED_ATTENTION_GRAD, key);
	gen(&a);
	body_end(&a);
	return cg_kernel_outline_end(&kb);
}

void cg_attn_call_body(cg_kernel *k, const cg_attn *shape, const char *kind,
		       cg_attn_gen gen)
{
	const cg_attn *a = shape;
	char name[320];
	snprintf(name, sizeof name,
		 "attn.%s.%u.%lld.%lld.%lld.%lld.%lld.%lld.%lld.%d.%lld.%lld.%a.%a.%a%s%s",
		 kind, a->vw, (long long)a->br, (long long)a->N,
		 (long long)a->H, (long long)a->Q, (long long)a->K,
		 (long long)a->d, (long long)a->dv, a->has_valid,
		 (long long)a->valid_sn, (long long)a->valid_sq,
		 (double)a->scale, (double)a->fill, k->node->attr.attention.p,
		 a->is_cached ? ".cached"
		 : a->has_wc  ? ".wc"
			      : "",
		 a->n_live == 1   ? ".live"
		 : a->n_live == 2 ? ".livekeys"
				  : "");
	LLVMValueRef body = LLVMGetNamedFunction(k->L->mod, name);
	if (!body)
		body = make_body(k, shape, name, gen);
	cg_kernel_outline_call(
		k, body,
		a->has_dropout
			? cg_lower_dropout_key(k, k->node->attr.attention.stream)
			: cg_i64(&k->f, 0));
}

/* ---- dead query rows ---------------------------------------------------------- */

/* Whether node v of g is i32 lengths of n batch elements: (n). */
static bool is_lengths(const cg_lower *L, const ir_graph *g, ir_id v, int64_t n)
{
	int64_t d[IR_MAX_RANK];
	const ir_type *t = &g->nodes[v].type;
	return t->dtype == IR_I32 && cg_lower_dims(L, t, d) == 1 && d[0] == n;
}

/* The expression of the rows of node id's queries: the forward's
 * result's liveness, the gradient's output gradient's nonzero rows;
 * PASS_ROWLIVE_IS_ALL where they are not the queries' (B, Q) rows. */
static uint32_t query_rows_expr(const cg_lower *L, const ir_graph *g, ir_id id)
{
	const ir_node *n = &g->nodes[id];
	bool is_grad = ir_op_is_gradient(n->op);
	ir_id r = is_grad ? ir_arg(g, id, n->n_args - 1) : id;
	int64_t qd[IR_MAX_RANK], rd[IR_MAX_RANK];
	int rq = cg_lower_dims(L, &g->nodes[ir_arg(g, id, 0)].type, qd);
	int rr = cg_lower_dims(L, &g->nodes[r].type, rd);
	if (L->rl->row_node[r] != r || rq != 3 || rr != 3 || rd[0] != qd[0] ||
	    rd[1] != qd[1])
		return PASS_ROWLIVE_IS_ALL;
	return is_grad ? L->rl->nz_of_node[r] : L->rl->of_node[r];
}

bool cg_attn_is_additive(ir_op op)
{
	return op == IR_OP_FUSED_ADDITIVE_ATTENTION ||
	       op == IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD;
}

bool cg_attn_is_fused(ir_op op)
{
	return op == IR_OP_FUSED_ATTENTION ||
	       op == IR_OP_FUSED_ATTENTION_GRAD || cg_attn_is_additive(op);
}

int cg_attn_row_skip_valid(const cg_lower *L, const ir_graph *g, ir_id id,
			   ir_id *valid)
{
	const ir_node *n = &g->nodes[id];
	bool is_add = cg_attn_is_additive(n->op);
	if (!L->rl || !L->row_skip ||
	    (n->op != IR_OP_FUSED_ATTENTION && !is_add &&
	     (n->op != IR_OP_FUSED_ATTENTION_GRAD ||
	      !cg_attn_node_is_small(L, g, id))))
		return -1;
	uint32_t e = query_rows_expr(L, g, id);
	ir_id pair = is_add ? IR_NONE : cg_attn_cache_pair(L, g, id);
	if (pair != IR_NONE && query_rows_expr(L, g, pair) != e)
		return -1;
	int64_t qd[IR_MAX_RANK];
	cg_lower_dims(L, &g->nodes[ir_arg(g, id, 0)].type, qd);
	const pass_rowlive_expr *x = &L->rl->exprs[e];
	if (is_add && x->op == PASS_ROWLIVE_STEP)
		x = &L->rl->exprs[x->a]; /* the lengths of its steps */
	if (x->op == PASS_ROWLIVE_PREFIX && is_lengths(L, g, x->valid, qd[0])) {
		valid[0] = x->valid;
		return 1;
	}
	const pass_rowlive_expr *w = &L->rl->exprs[x->a];
	if (x->op == PASS_ROWLIVE_KEYS && !x->is_per_query &&
	    w->op == PASS_ROWLIVE_PREFIX && is_lengths(L, g, x->valid, qd[0]) &&
	    is_lengths(L, g, w->valid, qd[0])) {
		valid[0] = x->valid;
		valid[1] = w->valid;
		return 2;
	}
	return -1;
}

const pass_rowlive_expr *cg_attn_row_step(const cg_lower *L, const ir_graph *g,
					  ir_id id)
{
	if (!L->rl || !cg_attn_is_additive(g->nodes[id].op))
		return NULL;
	const pass_rowlive_expr *x = &L->rl->exprs[query_rows_expr(L, g, id)];
	return x->op == PASS_ROWLIVE_STEP ? x : NULL;
}

double cg_attn_macs(const cg_lower *L, const ir_graph *g, ir_id id)
{
	const ir_node *n = &g->nodes[id];
	int64_t qd[IR_MAX_RANK], kd[IR_MAX_RANK], vd[IR_MAX_RANK];
	if (n->n_args < 3)
		return 0;
	cg_lower_dims(L, &g->nodes[ir_arg(g, id, 0)].type, qd);
	cg_lower_dims(L, &g->nodes[ir_arg(g, id, 1)].type, kd);
	/* the values: additive attention's fourth operand (after w_v) */
	cg_lower_dims(L,
		      &g->nodes[ir_arg(g, id, cg_attn_is_additive(n->op) ? 3 : 2)]
			       .type,
		      vd);
	double x = (double)qd[0] * (double)qd[1] * (double)kd[1] *
		   (double)(qd[2] + vd[2]);
	return ir_op_is_gradient(n->op) ? 2 * x : x;
}

LLVMValueRef cg_attn_live(cg_attn *a, LLVMValueRef n)
{
	cg_fn *f = a->f;
	if (a->n_live <= 0)
		return cg_i64(f, a->Q);
	/* as pass_rowlive_eval: t < v[b], or keys(v over t < w) */
	LLVMValueRef b = LLVMBuildUDiv(f->b, n, cg_i64(f, a->H), "");
	LLVMValueRef len = cg_lower_row_len(f, a->live_v,
					    a->n_live > 1 ? a->live_w : NULL, b,
					    a->Q);
	return LLVMBuildSelect(f->b, a->rs_on, len, cg_i64(f, a->Q), "");
}

LLVMValueRef cg_attn_live_rows(cg_attn *a, LLVMValueRef live, LLVMValueRef q0,
			       LLVMValueRef full)
{
	cg_fn *f = a->f;
	LLVMValueRef x = LLVMBuildSub(f->b, live, q0, "");
	x = LLVMBuildSelect(f->b,
			    LLVMBuildICmp(f->b, LLVMIntSLT, x, cg_i64(f, 0), ""),
			    cg_i64(f, 0), x, "");
	return cg_min(f, x, full);
}

void cg_attn_count_row_skip(cg_kernel *k, const cg_attn *a)
{
	if (!a->n_live)
		return;
	k->L->n_row_skip++;
	k->L->row_skip_macs += cg_attn_macs(k->L, k->g, k->id);
}

/* ---- small helpers ------------------------------------------------------------ */

LLVMValueRef cg_attn_min(cg_attn *a, LLVMValueRef x, int64_t y)
{
	return cg_min(a->f, x, cg_i64(a->f, y));
}

LLVMValueRef cg_attn_block_len(cg_attn *a, int64_t n, LLVMValueRef start,
			       int64_t width)
{
	cg_fn *f = a->f;
	return cg_attn_min(a, LLVMBuildSub(f->b, cg_i64(f, n), start, ""),
			   width);
}

static LLVMValueRef at_i64(cg_attn *a, LLVMValueRef p, LLVMValueRef i)
{
	return LLVMBuildInBoundsGEP2(a->f->b, cg_t_i64(a->f), p, &i, 1, "");
}

/* <0, 1, ..., vw-1> as lanes of integer type t (i64 or i32). */
static LLVMValueRef iota(cg_attn *a, LLVMTypeRef t)
{
	LLVMValueRef lanes[64];
	for (unsigned i = 0; i < a->vw; i++)
		lanes[i] = LLVMConstInt(t, i, 0);
	return LLVMConstVector(lanes, a->vw);
}

LLVMValueRef cg_attn_splat(cg_attn *a, LLVMValueRef x)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), a->vw);
	LLVMValueRef v = LLVMBuildInsertElement(f->b, LLVMGetPoison(vt), x,
						cg_i32(f, 0), "");
	LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(cg_t_i32(f), a->vw));
	return LLVMBuildShuffleVector(f->b, v, LLVMGetPoison(vt), zeros, "");
}

LLVMValueRef cg_attn_load_part(cg_attn *a, LLVMValueRef p, int64_t width,
			       int64_t c)
{
	int64_t left = width - c;
	return cg_vload_part(a->f, a->vw, p,
			     left >= a->vw ? a->vw : (unsigned)left);
}

void cg_attn_store_part(cg_attn *a, LLVMValueRef v, LLVMValueRef p,
			int64_t width, int64_t c)
{
	int64_t left = width - c;
	cg_vstore_part(a->f, v, p, left >= a->vw ? a->vw : (unsigned)left);
}

/* The vector at p of which the first `lanes` are in bounds: all of it
 * when padded or whole. */
static LLVMValueRef load_part(cg_attn *a, LLVMValueRef p, unsigned lanes,
			      bool is_padded)
{
	return cg_vload_part(a->f, a->vw, p, is_padded ? a->vw : lanes);
}

static void store_part(cg_attn *a, LLVMValueRef v, LLVMValueRef p,
		       unsigned lanes, bool is_padded)
{
	cg_vstore_part(a->f, v, p, is_padded ? a->vw : lanes);
}

LLVMValueRef cg_attn_vmax(cg_attn *a, LLVMValueRef x, LLVMValueRef y)
{
	LLVMBuilderRef b = a->f->b;
	return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, y, ""), x, y,
			       "");
}

/* Lanes w .. 2w of v moved to 0 .. w (the rest undefined). */
static LLVMValueRef upper_half(cg_attn *a, LLVMValueRef v, unsigned w)
{
	LLVMValueRef m[64];
	for (unsigned i = 0; i < a->vw; i++)
		m[i] = i < w ? cg_i32(a->f, (int32_t)(i + w))
			     : LLVMGetUndef(cg_t_i32(a->f));
	return LLVMBuildShuffleVector(a->f->b, v, LLVMGetPoison(LLVMTypeOf(v)),
				      LLVMConstVector(m, a->vw), "");
}

/* Reductions as log2(vw) halvings: LLVM's reduce intrinsics become a
 * serial chain of scalar steps (maxnum's NaN rules, fadd's order). */
LLVMValueRef cg_attn_hmax(cg_attn *a, LLVMValueRef v)
{
	for (unsigned w = a->vw / 2; w >= 1; w /= 2)
		v = cg_attn_vmax(a, v, upper_half(a, v, w));
	return LLVMBuildExtractElement(a->f->b, v, cg_i32(a->f, 0), "");
}

LLVMValueRef cg_attn_hsum(cg_attn *a, LLVMValueRef v)
{
	for (unsigned w = a->vw / 2; w >= 1; w /= 2)
		v = LLVMBuildFAdd(a->f->b, v, upper_half(a, v, w), "");
	return LLVMBuildExtractElement(a->f->b, v, cg_i32(a->f, 0), "");
}

LLVMValueRef cg_attn_exp_gap(cg_attn *a, LLVMValueRef gap)
{
	cg_fn *f = a->f;
	LLVMValueRef one = cg_f32(f, 1);
	/* not where gap is NaN (+inf - +inf, a row already NaN) */
	LLVMValueRef moved = LLVMBuildFCmp(f->b, LLVMRealOLT, gap, cg_f32(f, 0),
					   "");
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(f->b);
	LLVMBasicBlockRef join = cg_if_begin(f, moved);
	LLVMValueRef e = cg_lower_exp_nonpos(f, gap);
	LLVMBasicBlockRef then = LLVMGetInsertBlock(f->b);
	cg_if_end(f, join);
	LLVMValueRef phi = LLVMBuildPhi(f->b, cg_t_f32(f), "");
	LLVMValueRef vals[2] = {one, e};
	LLVMBasicBlockRef from[2] = {pre, then};
	LLVMAddIncoming(phi, vals, from, 2);
	return phi;
}

/* The batch element of attention n. */
static LLVMValueRef batch_of(cg_attn *a, LLVMValueRef n)
{
	if (a->H == 1)
		return n;
	return LLVMBuildUDiv(a->f->b, n, cg_i64(a->f, a->H), "");
}

/* ---- values that are not finite ------------------------------------------------- */

LLVMValueRef cg_attn_shift(cg_attn *a, LLVMValueRef m)
{
	LLVMBuilderRef b = a->f->b;
	LLVMTypeRef t = LLVMTypeOf(m);
	LLVMValueRef none = LLVMBuildFCmp(b, LLVMRealOEQ, m,
					  cg_const_real(t, -INFINITY), "");
	return LLVMBuildSelect(b, none, cg_const_real(t, 0), m, "");
}

LLVMValueRef cg_attn_exp(cg_attn *a, LLVMValueRef s, LLVMValueRef shift)
{
	return cg_lower_exp_shifted(a->f, LLVMBuildFSub(a->f->b, s, shift, ""));
}

/* acc (a vector variable) += |x| over len floats at p: whole vectors in
 * a loop, the last partial one masked. */
static void abs_span(cg_attn *a, LLVMValueRef acc, LLVMValueRef p, int64_t len)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	int64_t whole = len / a->vw * a->vw;
	if (whole > 0) {
		cg_loop l;
		LLVMValueRef c = cg_loop_begin(f, &l, cg_i64(f, 0),
					       cg_i64(f, whole), a->vw);
		LLVMValueRef x = cg_vload(f, a->vw, cg_at(f, p, c), 4);
		x = cg_intrinsic(f, "llvm.fabs", &vt, 1, &x, 1);
		cg_attn_set(a, acc,
			    LLVMBuildFAdd(f->b, cg_attn_get(a, vt, acc), x, ""));
		cg_loop_end(f, &l);
	}
	if (whole == len)
		return;
	LLVMValueRef x = cg_attn_load_part(a, cg_ati(f, p, whole), len, whole);
	x = cg_intrinsic(f, "llvm.fabs", &vt, 1, &x, 1);
	cg_attn_set(a, acc, LLVMBuildFAdd(f->b, cg_attn_get(a, vt, acc), x, ""));
}

LLVMValueRef cg_attn_abs_sum(cg_attn *a, LLVMValueRef p, LLVMValueRef n,
			     int64_t rows, int64_t w)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef acc = cg_attn_var(a, vt, LLVMConstNull(vt));
	int64_t len = rows * a->H * w;
	abs_span(a, acc, cg_at(f, p, cg_muli(f, batch_of(a, n), len)), len);
	return cg_attn_hsum(a, cg_attn_get(a, vt, acc));
}

/* cg_attn_finite's test, computed. */
static LLVMValueRef finite_now(cg_attn *a, LLVMValueRef n, bool is_grad)
{
	cg_fn *f = a->f;
	LLVMBuilderRef b = f->b;
	LLVMValueRef sv = cg_attn_abs_sum(a, a->v, n, a->K, a->dv);
	if (!is_grad)
		return LLVMBuildFCmp(b, LLVMRealOLT, sv, cg_f32(f, INFINITY),
				     "");
	/* |s| <= |scale| sum |q| sum |k| and |dP| <= sum |g| sum |v|; the
	 * margin below FLT_MAX covers the rounding of the sums */
	LLVMValueRef sq = cg_attn_abs_sum(a, a->q, n, a->Q, a->d);
	LLVMValueRef sk = cg_attn_abs_sum(a, a->kk, n, a->K, a->d);
	LLVMValueRef sg = cg_attn_abs_sum(a, a->g, n, a->Q, a->dv);
	LLVMValueRef bound = cg_f32(f, 0x1p126f);
	LLVMValueRef s = LLVMBuildFMul(b, LLVMBuildFMul(b, sq, sk, ""),
				       cg_f32(f, fabsf(a->scale)), "");
	LLVMValueRef dp = LLVMBuildFMul(b, sg, sv, "");
	return LLVMBuildAnd(b, LLVMBuildFCmp(b, LLVMRealOLT, s, bound, ""),
			    LLVMBuildFCmp(b, LLVMRealOLT, dp, bound, ""), "");
}

void cg_attn_finite_begin(cg_attn *a)
{
	cg_fn *f = a->f;
	LLVMTypeRef bt = LLVMInt1TypeInContext(f->ctx);
	a->fin_b = cg_attn_var(a, cg_t_i64(f), cg_i64(f, -1));
	a->fin_ok = cg_attn_var(a, bt, LLVMConstInt(bt, 0, 0));
}

LLVMValueRef cg_attn_finite(cg_attn *a, LLVMValueRef n, bool is_grad)
{
	cg_fn *f = a->f;
	LLVMValueRef bn = batch_of(a, n);
	LLVMValueRef now = LLVMBuildICmp(f->b, LLVMIntNE, bn,
					 cg_attn_get(a, cg_t_i64(f), a->fin_b),
					 "");
	LLVMBasicBlockRef join = cg_if_begin(f, now);
	cg_attn_set(a, a->fin_ok, finite_now(a, n, is_grad));
	cg_attn_set(a, a->fin_b, bn);
	cg_if_end(f, join);
	return cg_attn_get(a, LLVMInt1TypeInContext(f->ctx), a->fin_ok);
}

void cg_attn_scale_row(cg_attn *a, LLVMValueRef dst, LLVMValueRef src,
		       int64_t width, LLVMValueRef s)
{
	cg_fn *f = a->f;
	LLVMValueRef sv = cg_splat(f, a->vw, s);
	for (int64_t c = 0; c < width; c += a->vw) {
		LLVMValueRef x = cg_vload(f, a->vw, cg_ati(f, src, c), 4);
		int64_t left = width - c;
		store_part(a, LLVMBuildFMul(f->b, x, sv, ""), cg_ati(f, dst, c),
			   left >= a->vw ? a->vw : (unsigned)left, false);
	}
}

void cg_attn_fill(cg_attn *a, LLVMValueRef p, LLVMValueRef len, float v)
{
	cg_fn *f = a->f;
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), len, a->vw);
	cg_vstore(f, cg_const_real(cg_t_vec(f, a->vw), v), cg_at(f, p, i), 4);
	cg_loop_end(f, &l);
}

/* ---- rows, valid lengths and packing -------------------------------------------- */

LLVMValueRef cg_attn_row(cg_attn *a, LLVMValueRef n, int64_t rows,
			 LLVMValueRef i, int64_t w)
{
	cg_fn *f = a->f;
	LLVMValueRef r = cg_add(f, cg_muli(f, batch_of(a, n), rows), i);
	if (a->H > 1) {
		LLVMValueRef head = LLVMBuildURem(f->b, n, cg_i64(f, a->H), "");
		r = cg_add(f, cg_muli(f, r, a->H), head);
	}
	return cg_muli(f, r, w);
}

LLVMValueRef cg_attn_block_valid(cg_attn *a, LLVMValueRef n, LLVMValueRef q0,
				 LLVMValueRef rows)
{
	cg_fn *f = a->f;
	LLVMTypeRef it = cg_t_i64(f);
	LLVMValueRef b = batch_of(a, n);
	LLVMValueRef kmax = cg_attn_var(a, it, cg_i64(f, 0));
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), rows, 1);
	LLVMValueRef vl = cg_i64(f, a->K);
	if (a->has_valid) {
		LLVMValueRef at = cg_add(f, cg_muli(f, b, a->valid_sn),
					 cg_muli(f, cg_add(f, q0, i),
						 a->valid_sq));
		vl = LLVMBuildSExt(f->b, cg_lower_load(f, IR_I32, a->valid, at),
				   it, "");
	}
	LLVMBuildStore(f->b, vl, at_i64(a, a->rv, i));
	LLVMValueRef eff = cg_attn_min(a, vl, a->K);
	LLVMValueRef cur = cg_attn_get(a, it, kmax);
	LLVMValueRef gt = LLVMBuildICmp(f->b, LLVMIntSGT, eff, cur, "");
	cg_attn_set(a, kmax, LLVMBuildSelect(f->b, gt, eff, cur, ""));
	cg_loop_end(f, &l);
	return cg_attn_get(a, it, kmax);
}

/* The lanes of columns c0 .. c0 + vw (fewer at the end of width) of
 * row t, when t < rows; none otherwise. */
static LLVMValueRef tile_mask(cg_attn *a, int64_t width, int64_t c0,
			      LLVMValueRef t, LLVMValueRef rows)
{
	cg_fn *f = a->f;
	unsigned lanes = width - c0 >= a->vw ? a->vw : (unsigned)(width - c0);
	LLVMValueRef in = LLVMBuildICmp(f->b, LLVMIntSLT, t, rows, "");
	return LLVMBuildSelect(f->b, in, cg_mask(f, a->vw, lanes),
			       cg_mask(f, a->vw, 0), "");
}

/* r[c] for c < vw: column c0 + c of rows t0 .. t0 + vw of src (rows
 * past jn and columns past width read as 0), a vector over the rows. */
static void load_tile(cg_attn *a, LLVMValueRef *r, LLVMValueRef src,
		      int64_t width, int64_t stride, LLVMValueRef jn,
		      LLVMValueRef t0, int64_t c0)
{
	cg_fn *f = a->f;
	LLVMTypeRef tys[2] = {cg_t_vec(f, a->vw), cg_t_ptr(f)};
	for (unsigned i = 0; i < a->vw; i++) {
		LLVMValueRef t = cg_addi(f, t0, i);
		LLVMValueRef args[4] =
			{cg_at(f, src, cg_addi(f, cg_muli(f, t, stride), c0)),
			 cg_i32(f, 4), tile_mask(a, width, c0, t, jn),
			 LLVMConstNull(tys[0])};
		r[i] = cg_intrinsic(f, "llvm.masked.load", tys, 2, args, 4);
	}
	cg_transpose(a->f, r, a->vw);
}

/* Columns c0 .. c0 + vw of rows t0 .. t0 + vw of src (rows past jn read
 * as 0) stored transposed at dst. */
static void pack_tile(cg_attn *a, LLVMValueRef dst, LLVMValueRef src,
		      int64_t width, int64_t stride, LLVMValueRef jn,
		      LLVMValueRef t0, int64_t c0)
{
	cg_fn *f = a->f;
	LLVMValueRef r[64];
	load_tile(a, r, src, width, stride, jn, t0, c0);
	for (int64_t c = 0; c < a->vw && c0 + c < width; c++)
		cg_vstore(f, r[c],
			  cg_at(f, dst, cg_addi(f, t0, (c0 + c) * a->bc)), 4);
}

void cg_attn_pack(cg_attn *a, LLVMValueRef dst, LLVMValueRef src, int64_t width,
		  int64_t stride, LLVMValueRef jn)
{
	cg_fn *f = a->f;
	cg_loop lt;
	LLVMValueRef t0 = cg_loop_begin(f, &lt, cg_i64(f, 0), cg_i64(f, a->bc),
					a->vw);
	for (int64_t c0 = 0; c0 < width; c0 += a->vw)
		pack_tile(a, dst, src, width, stride, jn, t0, c0);
	cg_loop_end(f, &lt);
}

void cg_attn_keys(cg_attn *a, LLVMValueRef n, LLVMValueRef j0)
{
	cg_fn *f = a->f;
	LLVMTypeRef it = cg_t_i64(f);
	LLVMValueRef is_new = LLVMBuildICmp(f->b, LLVMIntNE, n,
					    cg_attn_get(a, it, a->packed_n), "");
	LLVMBasicBlockRef join = cg_if_begin(f, is_new);
	cg_attn_set(a, a->packed_n, n);
	cg_attn_set(a, a->packed_end, cg_i64(f, 0));
	cg_if_end(f, join);
	a->kt = cg_at(f, a->kt_all, cg_muli(f, j0, a->d));
	a->vt = a->vt_all ? cg_at(f, a->vt_all, cg_muli(f, j0, a->dv)) : NULL;
	LLVMValueRef is_unpacked = LLVMBuildICmp(f->b, LLVMIntSGE, j0,
						 cg_attn_get(a, it,
							     a->packed_end),
						 "");
	join = cg_if_begin(f, is_unpacked);
	LLVMValueRef jn = cg_attn_block_len(a, a->K, j0, a->bc);
	cg_attn_pack(a, a->kt,
		     cg_at(f, a->kk, cg_attn_row(a, n, a->K, j0, a->d)), a->d,
		     a->H * a->d, jn);
	if (a->vt)
		cg_attn_pack(a, a->vt,
			     cg_at(f, a->v, cg_attn_row(a, n, a->K, j0, a->dv)),
			     a->dv, a->H * a->dv, jn);
	cg_attn_set(a, a->packed_end, cg_addi(f, j0, a->bc));
	cg_if_end(f, join);
}

/* ---- the product ----------------------------------------------------------------- */

/* One register tile: rows r0 .. r0 + nr of C, vectors v0 .. v0 + nv of
 * its columns, accumulated over t in SSA values (phis), so they stay in
 * registers through the loop. */
typedef struct tile {
	LLVMValueRef r0;
	int nr, v0, nv;
} tile;

static unsigned lanes_of(const cg_attn *a, const cg_attn_prod *p, int v)
{
	int64_t left = p->width - (int64_t)v * a->vw;
	return left >= a->vw ? a->vw : (unsigned)left;
}

static void tile_init(cg_attn *a, const cg_attn_prod *p, const tile *t,
		      LLVMValueRef *acc)
{
	cg_fn *f = a->f;
	for (int r = 0; r < t->nr; r++) {
		LLVMValueRef row = cg_muli(f, cg_addi(f, t->r0, r), p->c_rs);
		for (int v = 0; v < t->nv; v++) {
			int vv = t->v0 + v;
			LLVMValueRef at = cg_at(f, p->c,
						cg_addi(f, row,
							(int64_t)vv * a->vw));
			acc[r * t->nv + v] =
				p->is_acc ? load_part(a, at, lanes_of(a, p, vv),
						      p->is_c_padded)
					  : LLVMConstNull(cg_t_vec(f, a->vw));
		}
	}
}

static void tile_step(cg_attn *a, const cg_attn_prod *p, const tile *t,
		      LLVMValueRef ti, LLVMValueRef *acc)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef bv[16];
	LLVMValueRef brow = cg_muli(f, ti, p->b_ts);
	for (int v = 0; v < t->nv; v++) {
		int vv = t->v0 + v;
		LLVMValueRef at = cg_at(f, p->b,
					cg_addi(f, brow, (int64_t)vv * a->vw));
		bv[v] = load_part(a, at, lanes_of(a, p, vv), p->is_b_padded);
	}
	LLVMValueRef acol = cg_muli(f, ti, p->a_ts);
	for (int r = 0; r < t->nr; r++) {
		LLVMValueRef ai = cg_add(f,
					 cg_muli(f, cg_addi(f, t->r0, r),
						 p->a_rs),
					 acol);
		LLVMValueRef s = cg_splat(f, a->vw,
					  cg_load(f, cg_at(f, p->a, ai)));
		for (int v = 0; v < t->nv; v++) {
			LLVMValueRef args[3] = {s, bv[v], acc[r * t->nv + v]};
			acc[r * t->nv + v] = cg_intrinsic(f, "llvm.fma", &vt, 1,
							  args, 3);
		}
	}
}

static void tile_store(cg_attn *a, const cg_attn_prod *p, const tile *t,
		       LLVMValueRef *acc)
{
	cg_fn *f = a->f;
	for (int r = 0; r < t->nr; r++) {
		LLVMValueRef row = cg_muli(f, cg_addi(f, t->r0, r), p->c_rs);
		for (int v = 0; v < t->nv; v++) {
			int vv = t->v0 + v;
			LLVMValueRef at = cg_at(f, p->c,
						cg_addi(f, row,
							(int64_t)vv * a->vw));
			store_part(a, acc[r * t->nv + v], at,
				   lanes_of(a, p, vv), p->is_c_padded);
		}
	}
}

/* max(x[r]) - off over tile t's rows (x: i64 per row of C), clamped to
 * [0, len]. */
static LLVMValueRef rows_end(cg_attn *a, const tile *t, LLVMValueRef x,
			     LLVMValueRef off, LLVMValueRef len)
{
	cg_fn *f = a->f;
	LLVMValueRef mx = NULL;
	for (int r = 0; r < t->nr; r++) {
		LLVMValueRef v = LLVMBuildLoad2(f->b, cg_t_i64(f),
						at_i64(a, x,
						       cg_addi(f, t->r0, r)),
						"");
		mx = r ? LLVMBuildSelect(f->b,
					 LLVMBuildICmp(f->b, LLVMIntSGT, v, mx,
						       ""),
					 v, mx, "")
		       : v;
	}
	LLVMValueRef e = cg_min(f, LLVMBuildSub(f->b, mx, off, ""), len);
	return LLVMBuildSelect(f->b,
			       LLVMBuildICmp(f->b, LLVMIntSLT, e, cg_i64(f, 0),
					     ""),
			       cg_i64(f, 0), e, "");
}

/* The end of tile t's sum: len, or max(lim[r]) - lim_off over its rows
 * clamped to [0, len]. */
static LLVMValueRef tile_end(cg_attn *a, const cg_attn_prod *p, const tile *t)
{
	if (!p->lim)
		return p->len;
	return rows_end(a, t, p->lim, p->lim_off, p->len);
}

/* The start of tile t's sum: 0, or from[r0]. */
static LLVMValueRef tile_from(cg_attn *a, const cg_attn_prod *p, const tile *t)
{
	cg_fn *f = a->f;
	if (!p->from)
		return cg_i64(f, 0);
	LLVMTypeRef it = cg_t_i32(f);
	LLVMValueRef r0 = t->r0;
	LLVMValueRef at = LLVMBuildInBoundsGEP2(f->b, it, p->from, &r0, 1, "");
	return LLVMBuildSExt(f->b, LLVMBuildLoad2(f->b, it, at, ""),
			     cg_t_i64(f), "");
}

/* A C that adds into the kernel's result (dK, dV: not padded) is read
 * and written a tile at a time from the caches beyond L1: at 4096 keys
 * the first loads of every tile waited for them, about a seventh of the
 * backward's time. So each such tile first asks for the lines of the
 * tile of the next rows (the last row's again past the end), which its
 * own sum over t gives the time to arrive. */
static void tile_prefetch(cg_attn *a, const cg_attn_prod *p, const tile *t)
{
	cg_fn *f = a->f;
	if (!p->is_acc || p->is_c_padded)
		return;
	LLVMValueRef last = LLVMBuildSub(f->b, p->rows, cg_i64(f, 1), "");
	for (int r = 0; r < t->nr; r++) {
		LLVMValueRef row = cg_min(f, cg_addi(f, t->r0, t->nr + r), last);
		row = cg_muli(f, row, p->c_rs);
		for (int v = 0; v < t->nv; v++) {
			LLVMValueRef at = cg_addi(f, row,
						  (int64_t)(t->v0 + v) * a->vw);
			cg_prefetch(f, cg_at(f, p->c, at), true);
		}
	}
}

/* for (t = from; t < end; t++) acc += A(:, t) B(t, :), acc in phis. */
static void tile_emit(cg_attn *a, const cg_attn_prod *p, const tile *t)
{
	cg_fn *f = a->f;
	LLVMValueRef init[TILE_ROWS * 16], acc[TILE_ROWS * 16],
		phi[TILE_ROWS * 16];
	int n = t->nr * t->nv;
	tile_prefetch(a, p, t);
	tile_init(a, p, t, init);
	LLVMValueRef from = tile_from(a, p, t), end = tile_end(a, p, t);
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(f->b);
	LLVMBasicBlockRef head = cg_block(f, "tk"), body = cg_block(f, "tkb"),
			  done = cg_block(f, "tke");
	LLVMBuildBr(f->b, head);
	LLVMPositionBuilderAtEnd(f->b, head);
	LLVMValueRef ti = LLVMBuildPhi(f->b, cg_t_i64(f), "t");
	LLVMAddIncoming(ti, &from, &pre, 1);
	for (int i = 0; i < n; i++) {
		phi[i] = LLVMBuildPhi(f->b, cg_t_vec(f, a->vw), "");
		LLVMAddIncoming(phi[i], &init[i], &pre, 1);
		acc[i] = phi[i];
	}
	LLVMBuildCondBr(f->b, LLVMBuildICmp(f->b, LLVMIntSLT, ti, end, ""),
			body, done);
	LLVMPositionBuilderAtEnd(f->b, body);
	tile_step(a, p, t, ti, acc);
	LLVMValueRef next = LLVMBuildNSWAdd(f->b, ti, cg_i64(f, 1), "");
	LLVMBasicBlockRef latch = LLVMGetInsertBlock(f->b);
	LLVMBuildBr(f->b, head);
	LLVMAddIncoming(ti, &next, &latch, 1);
	for (int i = 0; i < n; i++)
		LLVMAddIncoming(phi[i], &acc[i], &latch, 1);
	LLVMPositionBuilderAtEnd(f->b, done);
	tile_store(a, p, t, phi);
}

/* Vectors of C per register tile: four with 32 vector registers, two
 * with 16. */
static int tile_group(const cg_attn *a)
{
	return a->vw >= 16 ? 4 : 2;
}

/* Rows of C per register tile for a product of nvec vectors: enough
 * accumulators to hide the FMA latency behind the loads of A and B (16
 * with 32 vector registers, 8 with 16), at least 4 and at most
 * TILE_ROWS rows. (24 accumulators, 6 x 4 vectors, ran slower.) */
static int tile_rows(const cg_attn *a, int nvec)
{
	int nv = nvec < tile_group(a) ? nvec : tile_group(a);
	int nr = (a->vw >= 16 ? 16 : 8) / nv;
	return nr < 4 ? 4 : (nr > TILE_ROWS ? TILE_ROWS : nr);
}

/* Tile t with only its vectors of columns that start below its rows'
 * end (p->cols): one variant of the tile for each count of them, 1 to
 * t->nv, and none for 0. A causal mask's diagonal block of scores is
 * then computed a triangle of vectors, not the square: a tile of 4 rows
 * of 64 keys at the block's start needs one vector of four. */
static void cols_tile(cg_attn *a, const cg_attn_prod *p, const tile *t)
{
	cg_fn *f = a->f;
	LLVMValueRef end = rows_end(a, t, p->cols, p->cols_off,
				    cg_i64(f, p->width));
	LLVMValueRef nv = LLVMBuildUDiv(f->b, cg_addi(f, end, a->vw - 1),
					cg_i64(f, a->vw), "");
	nv = cg_attn_min(a, LLVMBuildSub(f->b, nv, cg_i64(f, t->v0), ""), t->nv);
	LLVMBasicBlockRef done = cg_block(f, "tcd");
	LLVMValueRef sw = LLVMBuildSwitch(f->b, nv, done, (unsigned)t->nv);
	for (int k = 1; k <= t->nv; k++) {
		LLVMBasicBlockRef bb = cg_block(f, "tc");
		LLVMAddCase(sw, cg_i64(f, k), bb);
		LLVMPositionBuilderAtEnd(f->b, bb);
		tile u = *t;
		u.nv = k;
		tile_emit(a, p, &u);
		LLVMBuildBr(f->b, done);
	}
	LLVMPositionBuilderAtEnd(f->b, done);
}

/* Every column group of nr rows at r0. */
static void row_tiles(cg_attn *a, const cg_attn_prod *p, LLVMValueRef r0, int nr)
{
	int nvec = (int)((p->width + a->vw - 1) / a->vw);
	int group = tile_group(a);
	for (int v0 = 0; v0 < nvec; v0 += group) {
		tile t = {r0, nr, v0, nvec - v0 < group ? nvec - v0 : group};
		if (p->cols)
			cols_tile(a, p, &t);
		else
			tile_emit(a, p, &t);
	}
}

/* Tiles of nr rows from row r0 while they fit; returns the row after
 * them. */
static LLVMValueRef tiles_of(cg_attn *a, const cg_attn_prod *p, LLVMValueRef r0,
			     int nr)
{
	cg_fn *f = a->f;
	LLVMValueRef left = LLVMBuildSub(f->b, p->rows, r0, "");
	LLVMValueRef n = LLVMBuildSDiv(f->b, left, cg_i64(f, nr), "");
	cg_loop l;
	LLVMValueRef r = cg_loop_begin(f, &l, cg_i64(f, 0), n, 1);
	row_tiles(a, p, cg_add(f, r0, cg_muli(f, r, nr)), nr);
	cg_loop_end(f, &l);
	return cg_add(f, r0, cg_muli(f, n, nr));
}

/* Tiles of tile_rows rows, then of 4, then single rows: every row of C
 * is computed alike (each element sums over t in order), whatever tile
 * holds it. */
void cg_attn_qk(cg_attn *a, LLVMValueRef q, LLVMValueRef rows, LLVMValueRef j0,
		LLVMValueRef c, int64_t c_rs)
{
	cg_attn_prod s = {.a = q,
			  .a_rs = a->H * a->d,
			  .a_ts = 1,
			  .b = a->kt,
			  .b_ts = a->bc,
			  .c = c,
			  .c_rs = c_rs,
			  .width = a->bc,
			  .is_b_padded = true,
			  .is_c_padded = true,
			  .rows = rows,
			  .len = cg_i64(a->f, a->d),
			  .cols = a->has_valid ? a->rv : NULL,
			  .cols_off = j0};
	cg_attn_prod_emit(a, &s);
}

void cg_attn_prod_emit(cg_attn *a, const cg_attn_prod *p)
{
	int nr = tile_rows(a, (int)((p->width + a->vw - 1) / a->vw));
	LLVMValueRef r = tiles_of(a, p, cg_i64(a->f, 0), nr);
	if (nr > 4)
		r = tiles_of(a, p, r, 4);
	tiles_of(a, p, r, 1);
}

/* ---- scores and dropout ------------------------------------------------------------ */

/* The keys of vector j of the block at j0, as i32 lanes (K and the
 * valid lengths fit i32). */
static LLVMValueRef keys(cg_attn *a, LLVMValueRef j0, int64_t j)
{
	cg_fn *f = a->f;
	LLVMValueRef k = LLVMBuildTrunc(f->b, cg_addi(f, j0, j * a->vw),
					cg_t_i32(f), "");
	return LLVMBuildAdd(f->b, cg_attn_splat(a, k), iota(a, cg_t_i32(f)), "");
}

/* Lanes of vector j of the block at j0 whose key is below row i's
 * bound in per-row array bound (valid lengths or needed keys). */
static LLVMValueRef keys_below(cg_attn *a, LLVMValueRef bound, LLVMValueRef i,
			       LLVMValueRef j0, int64_t j)
{
	cg_fn *f = a->f;
	LLVMValueRef n = LLVMBuildLoad2(f->b, cg_t_i64(f), at_i64(a, bound, i),
					"");
	n = LLVMBuildTrunc(f->b, n, cg_t_i32(f), "");
	return LLVMBuildICmp(f->b, LLVMIntSLT, keys(a, j0, j),
			     cg_attn_splat(a, n), "");
}

LLVMValueRef cg_attn_in_valid(cg_attn *a, LLVMValueRef i, LLVMValueRef j0,
			      int64_t j)
{
	return keys_below(a, a->rv, i, j0, j);
}

LLVMValueRef cg_attn_in_need(cg_attn *a, LLVMValueRef i, LLVMValueRef j0,
			     int64_t j)
{
	return keys_below(a, a->nd, i, j0, j);
}

LLVMValueRef cg_attn_scores(cg_attn *a, LLVMValueRef i, LLVMValueRef j0,
			    int64_t j)
{
	cg_fn *f = a->f;
	LLVMTypeRef vt = cg_t_vec(f, a->vw);
	LLVMValueRef at = cg_addi(f, cg_muli(f, i, a->srs), j * a->vw);
	LLVMValueRef s = cg_vload(f, a->vw, cg_at(f, a->sb, at), 4);
	s = LLVMBuildFMul(f->b, s, cg_const_real(vt, a->scale), "");
	if (a->has_valid)
		s = LLVMBuildSelect(f->b, cg_attn_in_valid(a, i, j0, j), s,
				    cg_const_real(vt, a->fill), "");
	LLVMValueRef real = cg_attn_real_keys(a, j0, j);
	if (!real)
		return s;
	return LLVMBuildSelect(f->b, real, s, cg_const_real(vt, -INFINITY), "");
}

LLVMValueRef cg_attn_real_keys(cg_attn *a, LLVMValueRef j0, int64_t j)
{
	/* Blocks start at multiples of bc below K: with K a multiple of bc
	 * every key of a block is real. */
	if (a->K % a->bc == 0)
		return NULL;
	LLVMValueRef key = keys(a, j0, j);
	return LLVMBuildICmp(a->f->b, LLVMIntSLT, key,
			     cg_const_int(LLVMTypeOf(key), (uint64_t)a->K), "");
}

/* Dropout's keep decision for the counters ctr (a <vw x i64>): the top
 * 24 bits of mix(ctr) against the threshold; every lane kept when
 * dropout is off for this run. */
static LLVMValueRef keep_bits(cg_attn *a, LLVMValueRef ctr)
{
	cg_fn *f = a->f;
	LLVMValueRef bits = cg_lower_mix64(f, ctr);
	LLVMTypeRef it = LLVMTypeOf(bits);
	LLVMValueRef top = LLVMBuildLShr(f->b, bits, cg_const_int(it, 40), "");
	LLVMValueRef keep = LLVMBuildICmp(f->b, LLVMIntUGE, top,
					  cg_const_int(it,
						       (uint64_t)a->threshold),
					  "");
	LLVMTypeRef bt = LLVMVectorType(LLVMInt1TypeInContext(f->ctx), a->vw);
	LLVMValueRef off = LLVMBuildNot(f->b, a->drop_on, "");
	LLVMValueRef offv = LLVMBuildSelect(f->b, off, cg_const_int(bt, 1),
					    cg_const_int(bt, 0), "");
	return LLVMBuildOr(f->b, keep, offv, "");
}

LLVMValueRef cg_attn_keep(cg_attn *a, LLVMValueRef n, LLVMValueRef q0,
			  LLVMValueRef i, LLVMValueRef j0, int64_t j)
{
	cg_fn *f = a->f;
	LLVMValueRef row = cg_add(f, cg_muli(f, n, a->Q), cg_add(f, q0, i));
	LLVMValueRef at = cg_add(f, cg_muli(f, row, a->K),
				 cg_addi(f, j0, j * a->vw));
	LLVMValueRef ctr = LLVMBuildAdd(
		f->b, cg_attn_splat(a, LLVMBuildAdd(f->b, a->drop_key, at, "")),
		iota(a, cg_t_i64(f)), "");
	return keep_bits(a, ctr);
}

/* ---- rows in lanes (the small kernels) ------------------------------------------- */

void cg_attn_load_t(cg_attn *a, LLVMValueRef *cols, LLVMValueRef src,
		    int64_t width, int64_t stride, LLVMValueRef rows)
{
	LLVMValueRef r[64];
	for (int64_t c0 = 0; c0 < width; c0 += a->vw) {
		load_tile(a, r, src, width, stride, rows, cg_i64(a->f, 0), c0);
		for (int64_t c = 0; c < a->vw && c0 + c < width; c++)
			cols[c0 + c] = r[c];
	}
}

void cg_attn_store_t(cg_attn *a, LLVMValueRef dst, const LLVMValueRef *cols,
		     int64_t width, int64_t stride, LLVMValueRef rows)
{
	cg_fn *f = a->f;
	LLVMTypeRef tys[2] = {cg_t_vec(f, a->vw), cg_t_ptr(f)};
	LLVMValueRef r[64];
	for (int64_t c0 = 0; c0 < width; c0 += a->vw) {
		for (int64_t c = 0; c < a->vw; c++)
			r[c] = c0 + c < width ? cols[c0 + c]
					      : LLVMConstNull(tys[0]);
		cg_transpose(a->f, r, a->vw);
		for (unsigned t = 0; t < a->vw; t++) {
			LLVMValueRef ti = cg_i64(f, t);
			LLVMValueRef at = cg_at(f, dst,
						cg_i64(f, t * stride + c0));
			LLVMValueRef args[4] = {r[t], at, cg_i32(f, 4),
						tile_mask(a, width, c0, ti,
							  rows)};
			cg_intrinsic(f, "llvm.masked.store", tys, 2, args, 4);
		}
	}
}

LLVMValueRef cg_attn_lanes(cg_attn *a, LLVMValueRef rows)
{
	cg_fn *f = a->f;
	LLVMTypeRef it = cg_t_i32(f);
	LLVMValueRef n = LLVMBuildTrunc(f->b, rows, it, "");
	return LLVMBuildICmp(f->b, LLVMIntSLT, iota(a, it), cg_attn_splat(a, n),
			     "");
}

LLVMValueRef cg_attn_valid_t(cg_attn *a, LLVMValueRef n, LLVMValueRef q0,
			     LLVMValueRef rows)
{
	cg_fn *f = a->f;
	LLVMTypeRef it = cg_t_i32(f), vt = LLVMVectorType(it, a->vw);
	LLVMValueRef at = cg_muli(f, batch_of(a, n), a->valid_sn);
	if (a->valid_sq == 0)
		return cg_attn_splat(a, cg_lower_load(f, IR_I32, a->valid, at));
	LLVMValueRef in = cg_attn_lanes(a, rows);
	LLVMTypeRef tys[2] = {vt, cg_t_ptr(f)};
	LLVMValueRef p = LLVMBuildInBoundsGEP2(f->b, it, a->valid, &at, 1, "");
	p = LLVMBuildInBoundsGEP2(f->b, it, p, &q0, 1, "");
	LLVMValueRef args[4] = {p, cg_i32(f, 4), in, LLVMConstNull(vt)};
	return cg_intrinsic(f, "llvm.masked.load", tys, 2, args, 4);
}

LLVMValueRef cg_attn_keep_t(cg_attn *a, LLVMValueRef n, LLVMValueRef q0,
			    int64_t k)
{
	cg_fn *f = a->f;
	LLVMValueRef row = cg_add(f, cg_muli(f, n, a->Q), q0);
	LLVMValueRef at = cg_addi(f, cg_muli(f, row, a->K), k);
	LLVMTypeRef vt = LLVMVectorType(cg_t_i64(f), a->vw);
	LLVMValueRef step = LLVMBuildMul(f->b, iota(a, cg_t_i64(f)),
					 cg_const_int(vt, (uint64_t)a->K), "");
	LLVMValueRef ctr = LLVMBuildAdd(
		f->b, cg_attn_splat(a, LLVMBuildAdd(f->b, a->drop_key, at, "")),
		step, "");
	return keep_bits(a, ctr);
}

/* ---- where the products stop --------------------------------------------------------- */

void cg_attn_set_need(cg_attn *a, LLVMValueRef i, LLVMValueRef m)
{
	cg_fn *f = a->f;
	LLVMValueRef vl = LLVMBuildLoad2(f->b, cg_t_i64(f), at_i64(a, a->rv, i),
					 "");
	LLVMValueRef gap = LLVMBuildFSub(f->b, m, cg_f32(f, a->fill), "");
	LLVMValueRef far = LLVMBuildFCmp(f->b, LLVMRealOGT, gap,
					 cg_f32(f, CG_ATTN_EXP_ZERO), "");
	if (a->fin)
		far = LLVMBuildAnd(f->b, far, a->fin, "");
	LLVMValueRef nd = LLVMBuildSelect(f->b, far, cg_attn_min(a, vl, a->K),
					  cg_i64(f, a->K), "");
	LLVMBuildStore(f->b, nd, at_i64(a, a->nd, i));
}

void cg_attn_key_starts(cg_attn *a, LLVMValueRef j0, LLVMValueRef rows)
{
	cg_fn *f = a->f;
	LLVMTypeRef it = cg_t_i64(f), vt = LLVMVectorType(cg_t_i32(f), a->vw);
	LLVMValueRef cnt[64], run = cg_attn_var(a, it, cg_i64(f, 0));
	for (int64_t j = 0; j < a->nj; j++)
		cnt[j] = cg_attn_var(a, vt, LLVMConstNull(vt));
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), rows, 1);
	/* run: the most keys any row up to i needs */
	LLVMValueRef x = LLVMBuildLoad2(f->b, it, at_i64(a, a->nd, i), "");
	LLVMValueRef r = cg_attn_get(a, it, run);
	r = LLVMBuildSelect(f->b, LLVMBuildICmp(f->b, LLVMIntSGT, x, r, ""), x,
			    r, "");
	cg_attn_set(a, run, r);
	LLVMValueRef rs = cg_attn_splat(a, LLVMBuildTrunc(f->b, r, cg_t_i32(f),
							  ""));
	for (int64_t j = 0; j < a->nj; j++) {
		LLVMValueRef le = LLVMBuildICmp(f->b, LLVMIntSLE, rs,
						keys(a, j0, j), "");
		LLVMValueRef c = cg_attn_get(a, vt, cnt[j]);
		cg_attn_set(a, cnt[j],
			    LLVMBuildAdd(f->b, c,
					 LLVMBuildZExt(f->b, le, vt, ""), ""));
	}
	cg_loop_end(f, &l);
	for (int64_t j = 0; j < a->nj; j++) {
		LLVMValueRef at = cg_i64(f, j * a->vw);
		LLVMValueRef p = LLVMBuildInBoundsGEP2(f->b, cg_t_i32(f), a->fr,
						       &at, 1, "");
		LLVMSetAlignment(LLVMBuildStore(f->b,
						cg_attn_get(a, vt, cnt[j]), p),
				 4);
	}
}

/* ---- the loop over key blocks -------------------------------------------------------- */

/* The smallest running maximum of the block's rows. */
static LLVMValueRef min_row_max(cg_attn *a, LLVMValueRef rows)
{
	cg_fn *f = a->f;
	LLVMValueRef mn = cg_attn_var(a, cg_t_f32(f), cg_f32(f, INFINITY));
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), rows, 1);
	LLVMValueRef m = cg_load(f, cg_at(f, a->m, i));
	cg_attn_set(a, mn,
		    cg_lower_fcall(f, "llvm.minnum",
				   cg_attn_get(a, cg_t_f32(f), mn), m));
	cg_loop_end(f, &l);
	return cg_attn_get(a, cg_t_f32(f), mn);
}

LLVMValueRef cg_attn_key_loop(cg_attn *a, LLVMValueRef kmax, LLVMValueRef rows,
			      cg_attn_block_fn body, void *ud)
{
	cg_fn *f = a->f;
	LLVMTypeRef it = cg_t_i64(f), bt = LLVMInt1TypeInContext(f->ctx);
	LLVMValueRef jend = cg_attn_var(a, it, kmax);
	LLVMValueRef is_done = cg_attn_var(a, bt,
					   LLVMConstInt(bt, !a->has_valid, 0));
	LLVMValueRef j0 = cg_attn_var(a, it, cg_i64(f, 0));
	LLVMBasicBlockRef head = cg_block(f, "kb"), blk = cg_block(f, "kbb"),
			  check = cg_block(f, "kbx"), more = cg_block(f, "kbm"),
			  done = cg_block(f, "kbe");
	LLVMBuildBr(f->b, head);
	LLVMPositionBuilderAtEnd(f->b, head);
	LLVMValueRef j = cg_attn_get(a, it, j0);
	LLVMBuildCondBr(f->b,
			LLVMBuildICmp(f->b, LLVMIntSLT, j,
				      cg_attn_get(a, it, jend), ""),
			blk, check);
	LLVMPositionBuilderAtEnd(f->b, blk);
	body(a, j, ud);
	cg_attn_set(a, j0, cg_addi(f, j, a->bc));
	LLVMBuildBr(f->b, head);
	/* Past the valid keys: go on to K once, if some row needs it. */
	LLVMPositionBuilderAtEnd(f->b, check);
	LLVMBuildCondBr(f->b, cg_attn_get(a, bt, is_done), done, more);
	LLVMPositionBuilderAtEnd(f->b, more);
	LLVMValueRef gap = LLVMBuildFSub(f->b, min_row_max(a, rows),
					 cg_f32(f, a->fill), "");
	LLVMValueRef near = LLVMBuildFCmp(f->b, LLVMRealULT, gap,
					  cg_f32(f, CG_ATTN_FILL_MARGIN), "");
	cg_attn_set(a, is_done, LLVMConstInt(bt, 1, 0));
	cg_attn_set(a, jend,
		    LLVMBuildSelect(f->b, near, cg_i64(f, a->K),
				    cg_attn_get(a, it, jend), ""));
	LLVMBuildBr(f->b, head);
	LLVMPositionBuilderAtEnd(f->b, done);
	return cg_attn_get(a, it, jend);
}

/* ---- a row of scores kept whole -------------------------------------------------------- */

LLVMValueRef cg_attn_blocks_end(cg_attn *a, LLVMValueRef jend)
{
	cg_fn *f = a->f;
	LLVMValueRef nb = LLVMBuildUDiv(f->b, cg_addi(f, jend, a->bc - 1),
					cg_i64(f, a->bc), "");
	return cg_muli(f, nb, a->bc);
}

void cg_attn_max_row(cg_attn *a, LLVMValueRef i, LLVMValueRef j0)
{
	cg_fn *f = a->f;
	LLVMValueRef s, mx = NULL;
	for (int64_t j = 0; j < a->nj; j++) {
		s = cg_attn_scores(a, i, j0, j);
		cg_vstore(f, s,
			  cg_at(f, a->sb,
				cg_addi(f, cg_muli(f, i, a->srs), j * a->vw)),
			  4);
		mx = j ? cg_attn_vmax(a, mx, s) : s;
	}
	LLVMValueRef m_at = cg_at(f, a->m, i);
	cg_store(f,
		 cg_lower_fcall(f, "llvm.maxnum", cg_load(f, m_at),
				cg_attn_hmax(a, mx)),
		 m_at);
}
