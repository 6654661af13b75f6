/*
 * cg_lower_nn.c - kernels with arithmetic across elements: batched
 * matmul, sum/mean/max/argmax, softmax and its log and masked forms,
 * layer norm, embedding lookup, sort, the two losses, the gradient of
 * cross_entropy and both of these at once (cross_entropy_with_grad).
 *
 * Each kernel's outer loop runs over independent output rows, so a split
 * over threads never changes the order of a sum: results are the same
 * for any thread count. Sums inside kernels carry `reassoc` so LLVM may
 * vectorize them (layer norm's and the softmax family's have a fixed
 * order of their own, row_sums and exp_sum, narrow layer norm rows
 * taken 16 at a time, row_group); they then differ from the
 * interpreter's left-to-right float sums by rounding only. The sum and
 * mean ops are the exception: they keep the interpreter's order
 * (docs/ops.md, "Summation order"), over the last axis in
 * cg_lower_rowred.c, long columns in cg_lower_colred.c, other long sums
 * in cg_lower_sumlane.c, the rest here, without `reassoc`.
 */
#include "cg_attn.h"
#include "cg_gemm.h"
#include "cg_lower.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* ---- small helpers ---------------------------------------------------------- */

static LLVMValueRef var(cg_kernel *k, LLVMTypeRef t, LLVMValueRef init)
{
	return cg_var(&k->f, t, init);
}

static LLVMValueRef get(cg_kernel *k, LLVMTypeRef t, LLVMValueRef v)
{
	return LLVMBuildLoad2(k->f.b, t, v, "");
}

static void set(cg_kernel *k, LLVMValueRef v, LLVMValueRef x)
{
	LLVMBuildStore(k->f.b, x, v);
}

static LLVMValueRef ldf(cg_kernel *k, LLVMValueRef p, LLVMValueRef off)
{
	return cg_lower_load(&k->f, IR_F32, p, off);
}

static void stf(cg_kernel *k, LLVMValueRef v, LLVMValueRef p, LLVMValueRef off)
{
	cg_lower_store(&k->f, IR_F32, v, p, off);
}

static LLVMValueRef is_nan(cg_fn *f, LLVMValueRef x)
{
	return LLVMBuildFCmp(f->b, LLVMRealUNO, x, x, "");
}

static LLVMValueRef fadd_r(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return cg_fast(LLVMBuildFAdd(f->b, a, b, ""), true);
}

/* max(a, b) as a reduction step the vectorizer takes: maxnum with
 * `nnan nsz`. Without them LLVM keeps a row's max a scalar chain (4
 * cycles an element). A NaN in the row may then give any maximum, but
 * the row's result is NaN anyway: the next pass's x - max is NaN there. */
static LLVMValueRef fmax_r(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef m = cg_lower_fcall(f, "llvm.maxnum", a, b);
	LLVMSetFastMathFlags(m, LLVMFastMathNoNaNs | LLVMFastMathNoSignedZeros);
	return m;
}

typedef struct rows_part {
	const cg_nest *n;
	cg_nest_body body;
	void *ud;
} rows_part;

static void rows_part_emit(cg_kernel *k, LLVMValueRef lo, LLVMValueRef hi,
			   void *ud)
{
	const rows_part *p = ud;
	cg_nest_emit(k, p->n, lo, hi, p->body, p->ud);
}

void cg_lower_row_skip_nest(cg_kernel *k, const cg_nest *n, cg_nest_body body,
			    void *ud)
{
	rows_part p = {n, body, ud};
	cg_lower_row_skip_run(k, n, rows_part_emit, &p);
}

/* The nest's work and outer extent, then the nest over [lo, hi) (its
 * live rows only: cg_lower_row_skip_run). */
static void run_rows(cg_kernel *k, cg_nest *n, int64_t row_work,
		     cg_nest_body body, void *ud)
{
	int64_t rows = 1;
	cg_nest_simplify(n);
	for (int d = 0; d < n->rank; d++)
		rows *= n->dims[d];
	k->extent = n->dims[0];
	k->work = rows * row_work;
	cg_lower_row_skip_nest(k, n, body, ud);
}

/* ---- matmul --------------------------------------------------------------------- */

typedef struct mm_cx {
	int64_t M, N, K;
	int64_t a_k; /* distance between A(m, k) and A(m, k + 1) */
	bool tb;
	LLVMValueRef A, B; /* the operands' pointers */
} mm_cx;

/* a b + c, rounded once: an explicit fma, not a contractable mul and
 * add, which LLVM fused in some copies of a loop and not in others (a
 * small product's row then depended on the copy that computed it: the
 * serial kernel's or a thread's). */
static LLVMValueRef fma_f32(cg_fn *f, LLVMValueRef a, LLVMValueRef b,
			    LLVMValueRef c)
{
	LLVMTypeRef t = cg_t_f32(f);
	LLVMValueRef args[3] = {a, b, c};
	return cg_intrinsic(f, "llvm.fma", &t, 1, args, 3);
}

/* One row m of one batch: offs = C(m, 0), A(m, 0), B(0, 0), each sum
 * in the order of k, so that no copy of the loop sums differently. */
static void matmul_row(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	const mm_cx *c = ud;
	cg_fn *f = &k->f;
	LLVMValueRef A = c->A, B = c->B, C = k->out;
	cg_loop ln, lk;
	if (c->tb) {
		/* C(m, n) = dot(A(m, :), B(n, :)), B stored n x k. */
		LLVMValueRef n = cg_loop_begin(f, &ln, cg_i64(f, 0),
					       cg_i64(f, c->N), 1);
		LLVMValueRef acc = var(k, cg_t_f32(f), cg_f32(f, 0));
		LLVMValueRef brow = cg_add(f, offs[2], cg_muli(f, n, c->K));
		LLVMValueRef kk = cg_loop_begin(f, &lk, cg_i64(f, 0),
						cg_i64(f, c->K), 1);
		LLVMValueRef a = ldf(k, A,
				     cg_add(f, offs[1], cg_muli(f, kk, c->a_k)));
		LLVMValueRef b = ldf(k, B, cg_add(f, brow, kk));
		set(k, acc, fma_f32(f, a, b, get(k, cg_t_f32(f), acc)));
		cg_loop_end(f, &lk);
		stf(k, get(k, cg_t_f32(f), acc), C, cg_add(f, offs[0], n));
		cg_loop_end(f, &ln);
		return;
	}
	/* C(m, :) = sum_k A(m, k) * B(k, :), the row of B contiguous. */
	LLVMValueRef n = cg_loop_begin(f, &ln, cg_i64(f, 0), cg_i64(f, c->N), 1);
	stf(k, cg_f32(f, 0), C, cg_add(f, offs[0], n));
	cg_loop_end(f, &ln);
	LLVMValueRef kk = cg_loop_begin(f, &lk, cg_i64(f, 0), cg_i64(f, c->K),
					1);
	LLVMValueRef a = ldf(k, A, cg_add(f, offs[1], cg_muli(f, kk, c->a_k)));
	LLVMValueRef brow = cg_add(f, offs[2], cg_muli(f, kk, c->N));
	n = cg_loop_begin(f, &ln, cg_i64(f, 0), cg_i64(f, c->N), 1);
	LLVMValueRef at = cg_add(f, offs[0], n);
	stf(k, fma_f32(f, a, ldf(k, B, cg_add(f, brow, n)), ldf(k, C, at)), C,
	    at);
	cg_loop_end(f, &ln);
	cg_loop_end(f, &lk);
}

/* Strides of an operand's batch dims (its dims but the last two) read as
 * broadcast to the output's nb batch dims, in elements. */
static void batch_strides(const int64_t *dims, int rank, int nb, int64_t *s)
{
	int64_t st[IR_MAX_RANK];
	cg_lower_strides(dims, rank, st);
	for (int d = 0; d < nb; d++) {
		int i = rank - 2 - nb + d;
		s[d] = i < 0 || dims[i] == 1 ? 0 : st[i];
	}
}

/* A matmul through the generated sgemm: the batch dims as a nest whose
 * innermost axis is the sgemm's own batch (one stride per operand), the
 * outer ones looped here; a B shared by a dense batch of A folds into
 * the rows. */
/* What a matmul kernel multiplies: the matmul node, its operands'
 * pointers, and its epilogue's terms (an add's other operand) with their
 * row strides. */
typedef struct mm_src {
	ir_id mm;
	LLVMValueRef a, b;
	int n_epi;
	LLVMValueRef epi[CG_GEMM_MAX_EPILOGUE];
	int64_t epi_rs[CG_GEMM_MAX_EPILOGUE];
} mm_src;

/* Where add kernel k's trees hold a fused matmul: its tree node, and the
 * epilogue's terms in the order they are added (the tree nodes of their
 * leaves and their nodes). */
typedef struct epi_tree {
	uint32_t mm;
	int n_terms;
	uint32_t term[CG_GEMM_MAX_EPILOGUE];
	ir_id term_id[CG_GEMM_MAX_EPILOGUE];
} epi_tree;

typedef struct gemm_cx {
	LLVMValueRef fn;
	int64_t parts;
	const mm_src *src;
	LLVMValueRef live; /* is_rows_given: the rows' flags, or null */
} gemm_cx;

static void gemm_call(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	const gemm_cx *g = ud;
	cg_fn *f = &k->f;
	LLVMValueRef args[7 + CG_GEMM_MAX_EPILOGUE];
	uint32_t n = 0;
	args[n++] = cg_at(f, g->src->a, offs[1]);
	args[n++] = cg_at(f, g->src->b, offs[2]);
	args[n++] = cg_at(f, k->out, offs[0]);
	for (int t = 0; t < g->src->n_epi; t++)
		args[n++] = g->src->epi[t];
	args[n++] = k->lo;
	args[n++] = k->hi;
	args[n++] = cg_i64(f, g->parts);
	if (g->live)
		args[n++] = g->live;
	cg_call(f, g->fn, args, n);
}

/* Whether node i of g, whose operands' answers z holds, has rows (along
 * its last axis) that are often all zero: a masked loss's gradient
 * (IR_OPF_ZERO_ROWS, a padding token's row) and what the backward pass
 * makes of it row by row: views and dropouts of it, products with it,
 * sums and differences of such rows, its rows' means, a relu's select of
 * it, a matmul whose rows it is, the attention gradients of it, layer
 * norm's gradient of it (x's rows finite). A guess
 * for the sgemm, which checks the rows it leaves out: a wrong one costs
 * only the scan. */
static bool zero_rows_at(const ir_graph *g, ir_id i, const bool *z)
{
	const ir_node *n = &g->nodes[i];
	const ir_id *a = ir_node_args(g, n);
	if (ir_op_table[n->op].flags & IR_OPF_ZERO_ROWS)
		return true;
	if (n->type.dtype != IR_F32 || n->n_args == 0)
		return false;
	switch (n->op) {
	case IR_OP_RESHAPE:
	case IR_OP_SLICE:
	case IR_OP_DROPOUT:
	case IR_OP_NEG:
	case IR_OP_DIV:
		return z[a[0]];
	case IR_OP_MUL:
		return z[a[0]] || z[a[1]];
	case IR_OP_ADD:
	case IR_OP_SUB:
		return z[a[0]] && z[a[1]];
	case IR_OP_CONCAT:
		for (uint32_t j = 0; j < n->n_args; j++)
			if (!z[a[j]])
				return false;
		return true;
	case IR_OP_SELECT: /* a relu's gradient: select(x > 0, g, 0) */
		return z[a[1]] && (z[a[2]] || g->nodes[a[2]].type.rank == 0);
	case IR_OP_SUM:
	case IR_OP_MEAN:
		return n->attr.reduce.keepdim && n->type.rank > 0 &&
		       n->attr.reduce.axes == 1u << (n->type.rank - 1) &&
		       z[a[0]];
	case IR_OP_MATMUL:
		return !n->attr.matmul.ta && z[a[0]];
	case IR_OP_FUSED_ATTENTION_GRAD:
	case IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD:
		return z[a[n->n_args - 1]];
	case IR_OP_LAYER_NORM_GRAD: /* (x, gamma, dy): 0 where dy's row is */
		return z[a[2]];
	default:
		return false;
	}
}

/* Whether operand i of matmul mm has rows of zeros the sgemm can leave
 * out: it is, through reshapes and slices, a masked loss's gradient
 * itself, or the backward pass carries that gradient's zero rows to it
 * (zero_rows_at); false also when there is no memory to tell. */
static bool zero_rows_of(ir_ctx *ctx, const ir_graph *g, ir_id mm, uint32_t i)
{
	ir_id x = ir_arg(g, mm, i);
	while (g->nodes[x].op == IR_OP_RESHAPE || g->nodes[x].op == IR_OP_SLICE)
		x = ir_arg(g, x, 0);
	if (ir_op_table[g->nodes[x].op].flags & IR_OPF_ZERO_ROWS)
		return true;
	bool *z = ir_alloc(ctx, ((size_t)x + 1) * sizeof *z);
	if (!z)
		return false;
	for (ir_id j = 0; j <= x; j++)
		z[j] = zero_rows_at(g, j, z);
	bool is = z[x];
	ir_free(ctx, z);
	return is;
}

/* Which zero rows the sgemm of matmul mm leaves out (ta, tb: how its
 * operands are stored; is_batched: a batch of products, not one): B's
 * rows (skip_zero_k) or, failing that, A's (skip_zero_m). Either gives
 * the bits of the product that keeps them (skip_zero_k keeps the
 * k-blocks of all of K); none with L->keep_zero_rows. The one rule for
 * matmul_gemm and for the epilogue plan's promise. */
static void zero_skips(const cg_lower *L, const ir_graph *g, ir_id mm, bool ta,
		       bool tb, bool is_batched, bool *skip_k, bool *skip_m)
{
	bool is_one = !is_batched && !L->keep_zero_rows;
	*skip_k = is_one && !tb && zero_rows_of(L->ctx, g, mm, 1);
	*skip_m = is_one && !ta && !*skip_k && zero_rows_of(L->ctx, g, mm, 0);
}

/* The epilogue's terms into the spec; false if the nest did not fold
 * into one product (cg_lower_epilogue_plan promised it would). */
static bool gemm_epilogue(cg_kernel *k, const cg_nest *bn, const mm_src *src,
			  cg_gemm_spec *s)
{
	if (!src->n_epi)
		return true;
	for (int d = 0; d < bn->rank; d++)
		if (bn->dims[d] != 1 || s->batch || s->skip_zero_m) {
			ir_error(k->L->ctx, k->node->loc,
				 "codegen: matmul: internal error: an "
				 "epilogue on a batch of products");
			return false;
		}
	s->n_epilogue = src->n_epi;
	for (int t = 0; t < src->n_epi; t++)
		s->epilogue_rs[t] = src->epi_rs[t];
	return true;
}

static const ir_type *mm_arg_type(const ir_graph *g, ir_id mm, uint32_t i);

#define ROW_SKIP_MAX_ROWS 65536

/* Whether node v is i32 lengths of n batch elements: (n). */
static bool is_lengths(const cg_lower *L, const ir_graph *g, ir_id v, int64_t n)
{
	int64_t d[IR_MAX_RANK];
	const ir_type *t = &g->nodes[v].type;
	return t->dtype == IR_I32 && cg_lower_dims(L, t, d) == 1 && d[0] == n;
}

/* The rows a kernel of node id computes (an expression of L->rl): a
 * forward node's live rows; a gradient's rows that may be nonzero
 * (where every value is finite; the others are 0, and +0 is written);
 * for cross_entropy_with_grad its logits' live rows (the rows of both
 * parts are theirs, and every row a use of either part reads is one of
 * them). */
static uint32_t row_expr(const cg_lower *L, const ir_graph *g, ir_id id)
{
	if (g->nodes[id].op == IR_OP_CROSS_ENTROPY_WITH_GRAD)
		return L->rl->of_node[ir_arg(g, id, 0)];
	if (L->rl_fwd && !L->rl_fwd[id])
		return L->rl->nz_of_node[id];
	return L->rl->of_node[id];
}

/* The valid lengths of node id's live rows, B batch elements: t < v[b]
 * (valid = {v}, returns 1) or keys(v over t < w) ({v, w}, 2), at rank
 * >= 3; or, at any rank >= 2, step k of a recurrence over t < v (all of
 * b's rows where k < v[b], none elsewhere: {v}, 1; cg_lower_row_step);
 * else -1. */
static int rows_valid(const cg_lower *L, const ir_graph *g, ir_id id, int rank,
		      int64_t B, ir_id *valid)
{
	const pass_rowlive_expr *x = &L->rl->exprs[row_expr(L, g, id)];
	const pass_rowlive_expr *a = &L->rl->exprs[x->a];
	if (x->op == PASS_ROWLIVE_STEP && a->op == PASS_ROWLIVE_PREFIX &&
	    is_lengths(L, g, a->valid, B)) {
		valid[0] = a->valid;
		return 1;
	}
	if (rank < 3)
		return -1;
	if (x->op == PASS_ROWLIVE_PREFIX && is_lengths(L, g, x->valid, B)) {
		valid[0] = x->valid;
		return 1;
	}
	if (x->op == PASS_ROWLIVE_KEYS && !x->is_per_query &&
	    a->op == PASS_ROWLIVE_PREFIX && is_lengths(L, g, x->valid, B) &&
	    is_lengths(L, g, a->valid, B)) {
		valid[0] = x->valid;
		valid[1] = a->valid;
		return 2;
	}
	return -1;
}

static bool epilogue_trees(const ir_graph *g, ir_id id, const cg_trees *tr,
			   epi_tree *e);
static int64_t term_row_stride(const cg_lower *L, const ir_graph *g, ir_id x,
			       const ir_type *t);

/* cg_lower_row_skip_valid of matmul mm computed in the kernel of node id:
 * mm itself, or the add that computes it with the epilogue e (NULL:
 * none), whose rows (its output's, the one a use reads) are the ones
 * left out. */
static int product_rows_valid(const cg_lower *L, const ir_graph *g, ir_id mm,
			      ir_id id, const epi_tree *e, ir_id *valid)
{
	const ir_node *n = &g->nodes[mm];
	if (!L->rl || !L->row_skip || n->op != IR_OP_MATMUL ||
	    n->attr.matmul.ta || L->rl->row_node[id] != id)
		return -1;
	int64_t od[IR_MAX_RANK], ad[IR_MAX_RANK], bd[IR_MAX_RANK];
	int ro = cg_lower_dims(L, &n->type, od);
	int ra = cg_lower_dims(L, mm_arg_type(g, mm, 0), ad);
	int rb = cg_lower_dims(L, mm_arg_type(g, mm, 1), bd);
	if (ro != ra || ro < 2 || ro > 3 || rb != 2 || ad[0] != od[0] ||
	    ad[ra - 2] != od[ro - 2])
		return -1;
	int64_t B, T;
	cg_lower_row_shape(L, &n->type, &B, &T);
	/* The rows' flags live on the kernel's stack: at most 256 KB. */
	if (B < 1 || T < 1 || B * T > ROW_SKIP_MAX_ROWS ||
	    B * T * od[ro - 1] * ad[ra - 1] < L->gemm_min)
		return -1;
	bool skip_k, skip_m;
	zero_skips(L, g, mm, false, n->attr.matmul.tb, false, &skip_k, &skip_m);
	if (skip_k || skip_m)
		return -1;
	cg_gemm_spec s = {.m = B * T,
			  .n = od[ro - 1],
			  .k = ad[ra - 1],
			  .tb = n->attr.matmul.tb,
			  .is_range_only = true,
			  .vector_width = (int)L->vw,
			  .is_rows_given = true};
	for (int t = 0; e && t < e->n_terms; t++)
		s.epilogue_rs[s.n_epilogue++] =
			term_row_stride(L, g, e->term_id[t], &g->nodes[id].type);
	cg_gemm_plan plan;
	char err[256];
	if (!cg_gemm_plan_make(&s, &plan, err, sizeof err))
		return -1;
	return rows_valid(L, g, id, ro, B, valid);
}

int cg_lower_row_skip_valid(const cg_lower *L, const ir_graph *g, ir_id mm,
			    ir_id *valid)
{
	if (cg_attn_is_fused(g->nodes[mm].op))
		return cg_attn_row_skip_valid(L, g, mm, valid);
	return product_rows_valid(L, g, mm, mm, NULL, valid);
}

double cg_lower_matmul_macs(const cg_lower *L, const ir_graph *g, ir_id mm)
{
	const ir_node *n = &g->nodes[mm];
	int64_t ad[IR_MAX_RANK];
	int ra = cg_lower_dims(L, &g->nodes[ir_arg(g, mm, 0)].type, ad);
	int64_t k = ra < 1                         ? 1
		    : n->attr.matmul.ta && ra >= 2 ? ad[ra - 2]
						   : ad[ra - 1];
	return (double)cg_lower_numel(L, &n->type) * (double)k;
}

/* i32 x clamped to [0, n]. */
static LLVMValueRef clamp_len(cg_fn *f, LLVMValueRef x, int64_t n)
{
	LLVMValueRef zero = cg_i32(f, 0), top = cg_i32(f, (int32_t)n);
	x = LLVMBuildSelect(f->b, LLVMBuildICmp(f->b, LLVMIntSLT, x, zero, ""),
			    zero, x, "");
	return LLVMBuildSelect(f->b, LLVMBuildICmp(f->b, LLVMIntSGT, x, top, ""),
			       top, x, "");
}

/* Element b (an i64) of i32 lengths p. */
static LLVMValueRef length_of(cg_fn *f, LLVMValueRef p, LLVMValueRef b)
{
	return LLVMBuildLoad2(f->b, cg_t_i32(f),
			      LLVMBuildInBoundsGEP2(f->b, cg_t_i32(f), p, &b, 1,
						    ""),
			      "");
}

/* len[b] (an i64 in [0, T]) of the rows of node id, live where t <
 * len[b] as pass_rowlive_eval computes it, from k's last n_valid
 * pointers (its valid lengths, rows_valid); b an i64. */
static LLVMValueRef row_len(cg_kernel *k, ir_id id, int n_valid, LLVMValueRef b,
			    int64_t T)
{
	const pass_rowlive *rl = k->L->rl;
	const pass_rowlive_expr *x = &rl->exprs[row_expr(k->L, k->g, id)];
	LLVMValueRef v = k->in[k->n_in - (uint32_t)n_valid];
	if (x->op == PASS_ROWLIVE_STEP) /* all T of b's rows, or none */
		return LLVMBuildSelect(k->f.b,
				       cg_lower_step_live(&k->f, v, b,
							  cg_kernel_row_step(k)),
				       cg_i64(&k->f, T), cg_i64(&k->f, 0), "");
	LLVMValueRef w = x->op == PASS_ROWLIVE_PREFIX ? NULL
						      : k->in[k->n_in - 1];
	return cg_lower_row_len(&k->f, v, w, b, T);
}

LLVMValueRef cg_lower_step_live(cg_fn *f, LLVMValueRef v, LLVMValueRef b,
				LLVMValueRef step)
{
	LLVMValueRef vb = LLVMBuildSExt(f->b, length_of(f, v, b), cg_t_i64(f),
					"");
	return LLVMBuildICmp(f->b, LLVMIntSLT, step, vb, "");
}

LLVMValueRef cg_lower_row_len(cg_fn *f, LLVMValueRef v, LLVMValueRef w,
			      LLVMValueRef b, int64_t T)
{
	LLVMValueRef vb = length_of(f, v, b), len;
	if (!w) {
		len = clamp_len(f, vb, T);
	} else { /* keys(v over t < w): any live query, then v's keys */
		LLVMValueRef is_q = LLVMBuildICmp(f->b, LLVMIntSGT,
						  length_of(f, w, b),
						  cg_i32(f, 0), "");
		LLVMValueRef is_none = LLVMBuildICmp(f->b, LLVMIntSLE, vb,
						     cg_i32(f, 0), "");
		LLVMValueRef kk = clamp_len(f,
					    LLVMBuildSelect(f->b, is_none,
							    cg_i32(f, (int32_t)T),
							    vb, ""),
					    T);
		len = LLVMBuildSelect(f->b, is_q, kk, cg_i32(f, 0), "");
	}
	return LLVMBuildSExt(f->b, len, cg_t_i64(f), "");
}

/* Whether the program's row_skip is set (an i1). */
static LLVMValueRef row_skip_on(cg_kernel *k)
{
	cg_fn *f = &k->f;
	LLVMValueRef on = LLVMBuildLoad2(f->b, cg_t_i32(f), k->L->row_skip, "");
	return LLVMBuildICmp(f->b, LLVMIntNE, on, cg_i32(f, 0), "");
}

/* The rows' flags of matmul mm's product of B·T rows (k's last n_valid
 * pointers its valid lengths, cg_lower_row_skip_valid): an i32 array,
 * row b·T + t live where t < len[b] as pass_rowlive_eval computes it,
 * when the program's row_skip is set; else null (every row). */
static LLVMValueRef live_rows(cg_kernel *k, ir_id mm, int n_valid, int64_t B,
			      int64_t T)
{
	cg_fn *f = &k->f;
	LLVMTypeRef i32 = cg_t_i32(f);
	LLVMValueRef arr = cg_entry_alloca(f,
					   LLVMArrayType2(i32, (uint64_t)(B * T)),
					   64);
	LLVMValueRef out = cg_var(f, cg_t_ptr(f),
				  LLVMConstPointerNull(cg_t_ptr(f)));
	LLVMBasicBlockRef join = cg_if_begin(f, row_skip_on(k));
	cg_loop lb, lt;
	LLVMValueRef b = cg_loop_begin(f, &lb, cg_i64(f, 0), cg_i64(f, B), 1);
	LLVMValueRef len = row_len(k, mm, n_valid, b, T);
	LLVMValueRef t = cg_loop_begin(f, &lt, cg_i64(f, 0), cg_i64(f, T), 1);
	LLVMValueRef at = cg_add(f, cg_muli(f, b, T), t);
	LLVMBuildStore(f->b,
		       LLVMBuildZExt(f->b,
				     LLVMBuildICmp(f->b, LLVMIntSLT, t, len, ""),
				     i32, ""),
		       LLVMBuildInBoundsGEP2(f->b, i32, arr, &at, 1, ""));
	cg_loop_end(f, &lt);
	cg_loop_end(f, &lb);
	LLVMBuildStore(f->b, arr, out);
	cg_if_end(f, join);
	return LLVMBuildLoad2(f->b, cg_t_ptr(f), out, "");
}

/* The row-wise ops whose kernels may leave rows out (and, in the
 * backward, layer_norm_grad). */
static bool is_row_op(ir_op op)
{
	return (ir_op_table[op].flags & IR_OPF_EW) || op == IR_OP_DROPOUT ||
	       op == IR_OP_LAYER_NORM;
}

/* cross_entropy_with_grad's: the rows of its logits (B, T, K), a
 * node of rows of its own, that no use reads past t < v[b] or keys(v
 * over t < w): a dead row's loss is not read and its gradient's row is
 * zero (g is, where every value is finite). */
static int ce_rows_valid(const cg_lower *L, const ir_graph *g, ir_id id,
			 ir_id *valid)
{
	ir_id lg = ir_arg(g, id, 0);
	int64_t ld[IR_MAX_RANK];
	if (!L->rl || !L->row_skip || L->rl->row_node[lg] != lg ||
	    cg_lower_dims(L, &g->nodes[lg].type, ld) != 3 || ld[0] < 1 ||
	    ld[1] < 1)
		return -1;
	return rows_valid(L, g, id, 3, ld[0], valid);
}

int cg_lower_row_skip_rows(const cg_lower *L, const ir_graph *g, ir_id id,
			   const cg_trees *tr, ir_id *valid)
{
	const ir_node *n = &g->nodes[id];
	if (n->op == IR_OP_MATMUL || cg_attn_is_fused(n->op))
		return cg_lower_row_skip_valid(L, g, id, valid);
	if (n->op == IR_OP_CROSS_ENTROPY_WITH_GRAD)
		return ce_rows_valid(L, g, id, valid);
	epi_tree e;
	if (epilogue_trees(g, id, tr, &e)) /* a product with its epilogue */
		return product_rows_valid(L, g, tr->n[e.mm].id, id, &e, valid);
	if (!L->rl || !L->row_skip || !L->rl_fwd ||
	    !(is_row_op(n->op) || n->op == IR_OP_LAYER_NORM_GRAD) ||
	    n->type.dtype != IR_F32 || L->rl->row_node[id] != id)
		return -1;
	bool is_fwd = L->rl_fwd[id];
	if (is_fwd ? n->op == IR_OP_LAYER_NORM_GRAD : n->op == IR_OP_LAYER_NORM)
		return -1;
	/* an add computing a product (or, in the forward, a
	 * layer_norm_grad): not row-wise */
	for (uint32_t i = 0; i < tr->n_nodes; i++) {
		ir_op op = g->nodes[tr->n[i].id].op;
		if (!tr->n[i].is_leaf &&
		    (op == IR_OP_MATMUL ||
		     (is_fwd && op == IR_OP_LAYER_NORM_GRAD)))
			return -1;
	}
	int64_t od[IR_MAX_RANK];
	int rank = cg_lower_dims(L, &n->type, od);
	if (rank < 2 || od[0] < 1 || od[1] < 1)
		return -1;
	return rows_valid(L, g, id, rank, od[0], valid);
}

void cg_lower_row_shape(const cg_lower *L, const ir_type *t, int64_t *B,
			int64_t *T)
{
	int64_t d[IR_MAX_RANK];
	int rank = cg_lower_dims(L, t, d);
	*B = rank >= 1 ? d[0] : 1;
	*T = rank >= 3 ? d[1] : 1;
}

int64_t cg_lower_row_step(const cg_lower *L, const ir_graph *g, ir_id id)
{
	ir_op op = g->nodes[id].op;
	if (cg_attn_is_fused(op)) { /* its query rows' step, if additive */
		const pass_rowlive_expr *x = cg_attn_row_step(L, g, id);
		return x ? x->k : -1;
	}
	if (!L->rl)
		return -1;
	const pass_rowlive_expr *x = &L->rl->exprs[row_expr(L, g, id)];
	return x->op == PASS_ROWLIVE_STEP ? x->k : -1;
}

/* i64 max(a, b), signed. */
static LLVMValueRef max_i64(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSelect(f->b, LLVMBuildICmp(f->b, LLVMIntSGT, a, b, ""),
			       a, b, "");
}

/* How kernel k leaves its rows out over nest n (cg_lower_row_skip_run):
 * q outer indices a row (b, t) of its node, each `unit` floats of its
 * output; false when it computes every row. */
typedef struct row_skip {
	int n_valid;
	int64_t B, T, q, unit;
} row_skip;

static bool row_skip_of(cg_kernel *k, const cg_nest *n, row_skip *rs)
{
	ir_id valid[2];
	rs->n_valid = cg_lower_row_skip_rows(k->L, k->g, k->id, &k->tr, valid);
	if (rs->n_valid < 0 || k->node->op == IR_OP_CROSS_ENTROPY_WITH_GRAD)
		return false; /* its rows are its logits' (ce_dead_row) */
	cg_lower_row_shape(k->L, &k->node->type, &rs->B, &rs->T);
	int64_t numel = cg_lower_numel(k->L, &k->node->type);
	int64_t row = numel / (rs->B * rs->T);
	rs->unit = n->rank ? n->strides[0][0] : 0;
	rs->q = rs->unit > 0 && n->dims[0] * rs->unit == numel &&
				row % rs->unit == 0
			? row / rs->unit
			: 0;
	return rs->q > 0;
}

/* The <vw x i1> mask of the lanes below n (an i64 value, 0 .. vw). */
static LLVMValueRef lanes_below(cg_fn *f, unsigned vw, LLVMValueRef n)
{
	LLVMValueRef idx[64];
	LLVMTypeRef vt = LLVMVectorType(cg_t_i64(f), vw);
	for (unsigned i = 0; i < vw; i++)
		idx[i] = cg_i64(f, i);
	LLVMValueRef v = LLVMBuildInsertElement(f->b, LLVMGetPoison(vt), n,
						cg_i32(f, 0), "");
	v = LLVMBuildShuffleVector(f->b, v, LLVMGetPoison(vt),
				   LLVMConstNull(LLVMVectorType(cg_t_i32(f), vw)),
				   "");
	return LLVMBuildICmp(f->b, LLVMIntULT, LLVMConstVector(idx, vw), v, "");
}

/* The floats of outer indices [mid, hi) · unit: +0, in stores of whole
 * vectors and one masked store. A recurrence's step kernel (Bahdanau's
 * GRU gates and their gradients, rows of 32 floats) has a batch element
 * of its own in each part, live or dead: its call of memset, of 0 or
 * 128 bytes, was about 2,600 and 3,400 calls a loss_grad call. The
 * kernel says no-builtin-memset, or LLVM's loop idioms would make the
 * loop such a call again. */
static void zero_rows(cg_kernel *k, const row_skip *rs, LLVMValueRef mid,
		      LLVMValueRef hi)
{
	cg_fn *f = &k->f;
	unsigned vw = (unsigned)k->L->vw;
	LLVMValueRef p = cg_at(f, k->out, cg_muli(f, mid, rs->unit));
	LLVMValueRef n = cg_muli(f, LLVMBuildSub(f->b, hi, mid, ""), rs->unit);
	LLVMValueRef full = LLVMBuildUDiv(f->b, n, cg_i64(f, vw), "");
	LLVMValueRef z = LLVMConstNull(cg_t_vec(f, vw));
	cg_fn_attr_str(f, "no-builtin-memset", "");
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), full, 1);
	cg_vstore(f, z, cg_at(f, p, cg_muli(f, i, vw)), 4);
	cg_loop_end(f, &l);
	LLVMValueRef done = cg_muli(f, full, vw);
	LLVMValueRef rest = LLVMBuildSub(f->b, n, done, "");
	LLVMBasicBlockRef join = cg_if_begin(f,
					     LLVMBuildICmp(f->b, LLVMIntNE, rest,
							   cg_i64(f, 0), ""));
	LLVMTypeRef tys[2] = {cg_t_vec(f, vw), cg_t_ptr(f)};
	LLVMValueRef args[4] = {z, cg_at(f, p, done), cg_i32(f, 4),
				lanes_below(f, vw, rest)};
	cg_intrinsic(f, "llvm.masked.store", tys, 2, args, 4);
	cg_if_end(f, join);
}

/* live over the parts of [k->lo, k->hi): when `on` (an i1), each batch
 * element's live rows, the dead rows' floats set to +0; else the whole
 * range as one part. */
static void row_parts(cg_kernel *k, const row_skip *rs, LLVMValueRef on,
		      cg_row_part live, void *ud)
{
	cg_fn *f = &k->f;
	int64_t bq = rs->T * rs->q; /* outer indices a batch element */
	LLVMValueRef b0 = LLVMBuildSelect(f->b, on,
					  LLVMBuildSDiv(f->b, k->lo,
							cg_i64(f, bq), ""),
					  cg_i64(f, 0), "");
	LLVMValueRef b1 = LLVMBuildSelect(f->b, on,
					  LLVMBuildSDiv(f->b,
							cg_addi(f, k->hi, bq - 1),
							cg_i64(f, bq), ""),
					  cg_i64(f, 1), "");
	cg_loop l;
	LLVMValueRef b = cg_loop_begin(f, &l, b0, b1, 1);
	LLVMValueRef at = cg_muli(f, b, bq);
	LLVMValueRef lo = LLVMBuildSelect(f->b, on, max_i64(f, k->lo, at),
					  k->lo, "");
	LLVMValueRef hi = LLVMBuildSelect(f->b, on,
					  cg_min(f, k->hi, cg_addi(f, at, bq)),
					  k->hi, "");
	LLVMValueRef bl = cg_min(f, b, cg_i64(f, rs->B - 1)); /* off: b 0 */
	LLVMValueRef end = cg_add(f, at,
				  cg_muli(f,
					  row_len(k, k->id, rs->n_valid, bl,
						  rs->T),
					  rs->q));
	LLVMValueRef mid = LLVMBuildSelect(f->b, on,
					   cg_min(f, max_i64(f, end, lo), hi),
					   hi, "");
	live(k, lo, mid, ud);
	zero_rows(k, rs, mid, hi);
	cg_loop_end(f, &l);
}

void cg_lower_row_skip_run(cg_kernel *k, const cg_nest *n, cg_row_part live,
			   void *ud)
{
	row_skip rs;
	if (!row_skip_of(k, n, &rs)) {
		live(k, k->lo, k->hi, ud);
		return;
	}
	row_parts(k, &rs, row_skip_on(k), live, ud);
}

static bool matmul_gemm(cg_kernel *k, cg_nest *bn, const mm_cx *c, bool ta,
			const mm_src *src)
{
	cg_lower *L = k->L;
	cg_gemm_spec s = {0};
	s.m = c->M;
	s.n = c->N;
	s.k = c->K;
	s.ta = ta;
	s.tb = c->tb;
	s.is_range_only = true;
	s.vector_width = (int)L->vw;
	cg_nest_simplify(bn);
	int in = bn->rank - 1;
	if (bn->rank == 1 && bn->strides[2][0] == 0 && !ta &&
	    bn->strides[1][0] == c->M * c->K &&
	    bn->strides[0][0] == c->M * c->N) {
		s.m *= bn->dims[0]; /* B shared: one tall product */
		bn->dims[0] = 1;
	} else if (bn->dims[in] > 1) {
		s.batch = bn->dims[in];
		s.stride_c = bn->strides[0][in];
		s.stride_a = bn->strides[1][in];
		s.stride_b = bn->strides[2][in];
		bn->dims[in] = 1;
	}
	zero_skips(L, k->g, src->mm, ta, s.tb, s.batch != 0, &s.skip_zero_k,
		   &s.skip_zero_m);
	if (!gemm_epilogue(k, bn, src, &s))
		return false;
	ir_id valid[2];
	int n_valid = cg_lower_row_skip_rows(L, k->g, k->id, &k->tr, valid);
	int64_t B, T;
	cg_lower_row_shape(L, &k->g->nodes[k->id].type, &B, &T);
	if (n_valid >= 0 && s.batch == 0 && s.m == B * T)
		s.is_rows_given = true;
	char name[64], err[256];
	cg_gemm_plan plan;
	snprintf(name, sizeof name, "sgemm.%u", L->n_gemms++);
	if (!cg_gemm_plan_make(&s, &plan, err, sizeof err) ||
	    !cg_gemm_add(L->cm, name, &s)) {
		ir_error(L->ctx, k->node->loc, "codegen: matmul: %s",
			 cg_gemm_plan_make(&s, &plan, err, sizeof err)
				 ? cg_module_error(L->cm)
				 : err);
		return false;
	}
	strcat(name, ".range");
	/* The kernel's range is parts of every product of the nest: at most
	 * 64, as fine as the sgemm's panels allow. */
	gemm_cx g = {LLVMGetNamedFunction(L->mod, name),
		     plan.parts < 64 ? plan.parts : 64, src, NULL};
	if (s.is_rows_given)
		g.live = live_rows(k, k->id, n_valid, B, T);
	k->extent = g.parts;
	/* In multiply-adds over 16: a product starts a team from 2^19 of
	 * them (the sgemm's own grain) at the default grain. */
	k->work = (s.batch ? s.batch : 1) * s.m * s.n * s.k / 16;
	for (int d = 0; d < bn->rank; d++)
		k->work *= bn->dims[d];
	cg_nest_emit(k, bn, cg_i64(&k->f, 0), cg_i64(&k->f, bn->dims[0]),
		     gemm_call, &g);
	return true;
}

/* The type of operand i of matmul mm. */
static const ir_type *mm_arg_type(const ir_graph *g, ir_id mm, uint32_t i)
{
	return &g->nodes[ir_arg(g, mm, i)].type;
}

/* The row stride of term x added to a product of type t: 0 for a row
 * broadcast over the rows (a bias), t's row for a matrix of t's shape,
 * -1 for anything else. */
static int64_t term_row_stride(const cg_lower *L, const ir_graph *g, ir_id x,
			       const ir_type *t)
{
	const ir_type *xt = &g->nodes[x].type;
	int64_t d[IR_MAX_RANK], td[IR_MAX_RANK];
	int r = cg_lower_dims(L, xt, d), rt = cg_lower_dims(L, t, td);
	if (xt->dtype != IR_F32 || rt < 2)
		return -1;
	if (cg_lower_same_type(L, xt, t))
		return td[rt - 1];
	if (r < 1 || d[r - 1] != td[rt - 1])
		return -1;
	for (int i = 0; i < r - 1; i++)
		if (d[i] != 1)
			return -1;
	return 0;
}

/* Whether matmul mm runs as one sgemm of a batch of 1 without
 * skip_zero_m (matmul_gemm's choices): large enough, and either 2-d or a
 * B shared by a dense batch of A, which folds into the rows. */
static bool is_one_gemm(const cg_lower *L, const ir_graph *g, ir_id mm)
{
	const ir_node *n = &g->nodes[mm];
	int64_t ad[IR_MAX_RANK], bd[IR_MAX_RANK], od[IR_MAX_RANK];
	int ra = cg_lower_dims(L, mm_arg_type(g, mm, 0), ad);
	int rb = cg_lower_dims(L, mm_arg_type(g, mm, 1), bd);
	int ro = cg_lower_dims(L, &n->type, od);
	bool ta = n->attr.matmul.ta;
	int64_t batches = 1;
	for (int d = 0; d < ro - 2; d++)
		batches *= od[d];
	int64_t M = od[ro - 2], N = od[ro - 1], K = ta ? ad[ra - 2] : ad[ra - 1];
	if (M < 1 || N < 1 || K < 1 || batches * M * N * K < L->gemm_min)
		return false;
	for (int d = 0; d < rb - 2; d++)
		if (bd[d] != 1)
			return false;
	if (batches > 1 && (ta || ra != ro))
		return false;
	for (int d = 0; batches > 1 && d < ro - 2; d++)
		if (ad[d] != od[d])
			return false;
	bool skip_k, skip_m;
	zero_skips(L, g, mm, ta, n->attr.matmul.tb, false, &skip_k, &skip_m);
	return !skip_m;
}

/* Whether x, an operand of add node c, can be an epilogue's term: it
 * has a buffer of its own (c's kernel does not compute it) and is a bias
 * row or a matrix of c's type. */
static bool is_term(const cg_lower *L, const ir_graph *g, const ir_id *into,
		    ir_id x, ir_id c)
{
	return !pass_fuse_ew_is_in(into, x, c) &&
	       term_row_stride(L, g, x, &g->nodes[c].type) >= 0;
}

/* Whether node mm, an operand of add node c, can be the product of an
 * epilogue computed in c's place: a matmul read by nothing else, not
 * fused elsewhere, of c's type, run as one sgemm. */
static bool is_product(const cg_lower *L, const ir_graph *g, const ir_id *into,
		       const uint32_t *uses, ir_id mm, ir_id c)
{
	return g->nodes[mm].op == IR_OP_MATMUL && into[mm] == IR_NONE &&
	       uses[mm] == 1 &&
	       cg_lower_same_type(L, &g->nodes[mm].type, &g->nodes[c].type) &&
	       is_one_gemm(L, g, mm);
}

/* Whether node i is an f32 add with a kernel of its own: what both
 * epilogues (a matmul's, a layer_norm_grad's) are computed in. */
static bool is_own_f32_add(const ir_graph *g, const ir_id *into, ir_id i)
{
	const ir_node *ad = &g->nodes[i];
	return ad->op == IR_OP_ADD && into[i] == IR_NONE &&
	       ad->type.dtype == IR_F32;
}

/* The matmul add node i's kernel can compute as its epilogue's product,
 * and in *host the add that computes it: i itself, with one term (a
 * bias or a residual: i's other operand), or an add fused into i and
 * read by it alone, with two (that add's other operand, then i's: a
 * bias then a residual, or a sum of three products). i is an f32 add
 * with a kernel of its own; the terms have buffers of their own and
 * are bias rows or matrices of i's type. IR_NONE if none. */
static ir_id epilogue_of(const cg_lower *L, const ir_graph *g, const ir_id *into,
			 const uint32_t *uses, ir_id i, ir_id *host)
{
	const ir_node *ad = &g->nodes[i];
	if (!is_own_f32_add(g, into, i))
		return IR_NONE;
	for (uint32_t a = 0; a < 2; a++) {
		ir_id y = ir_arg(g, i, a), x = ir_arg(g, i, 1 - a);
		if (y == x || !is_term(L, g, into, x, i))
			continue;
		*host = i;
		if (is_product(L, g, into, uses, y, i))
			return y;
		if (g->nodes[y].op != IR_OP_ADD || into[y] != i || uses[y] != 1 ||
		    !cg_lower_same_type(L, &g->nodes[y].type, &ad->type))
			continue;
		*host = y;
		for (uint32_t b = 0; b < 2; b++) {
			ir_id mm = ir_arg(g, y, b), e = ir_arg(g, y, 1 - b);
			if (mm != e && is_term(L, g, into, e, y) &&
			    is_product(L, g, into, uses, mm, y))
				return mm;
		}
	}
	return IR_NONE;
}

/* The layer_norm_grad add node i's kernel can compute, adding i's other
 * operand to each element as it stores it: i an f32 add with a kernel of
 * its own; the layer_norm_grad read by i alone, not fused elsewhere, of
 * i's type, its gamma a buffer; the other operand a buffer of i's type
 * (the residual stream's gradient, to which autodiff adds each pre-LN
 * block's layer norm's). IR_NONE if none. */
static ir_id lng_of(const cg_lower *L, const ir_graph *g, const ir_id *into,
		    const uint32_t *uses, ir_id i)
{
	const ir_node *ad = &g->nodes[i];
	if (!is_own_f32_add(g, into, i))
		return IR_NONE;
	for (uint32_t a = 0; a < 2; a++) {
		ir_id y = ir_arg(g, i, a), x = ir_arg(g, i, 1 - a);
		if (y == x || g->nodes[y].op != IR_OP_LAYER_NORM_GRAD ||
		    into[y] != IR_NONE || uses[y] != 1)
			continue;
		if (cg_lower_same_type(L, &g->nodes[y].type, &ad->type) &&
		    cg_lower_same_type(L, &g->nodes[x].type, &ad->type) &&
		    !pass_fuse_ew_is_in(into, x, i) &&
		    !pass_fuse_ew_is_in(into, ir_arg(g, y, 1), y))
			return y;
	}
	return IR_NONE;
}

bool cg_lower_epilogue_plan(const cg_lower *L, const ir_func *f, ir_id *into)
{
	const ir_graph *g = &f->g;
	uint32_t *uses = ir_alloc(L->ctx, (g->n_nodes + 1) * sizeof *uses);
	if (!uses) {
		ir_error(L->ctx, f->loc, "out of memory");
		return false;
	}
	for (ir_id i = 0; i < g->n_nodes; i++)
		for (uint32_t a = 0; a < g->nodes[i].n_args; a++)
			uses[ir_arg(g, i, a)]++;
	for (uint32_t o = 0; o < f->n_outputs; o++)
		uses[f->outputs[o]] += 2; /* an output keeps its buffer */
	for (ir_id i = 0; i < g->n_nodes; i++) {
		ir_id host = IR_NONE;
		ir_id mm = epilogue_of(L, g, into, uses, i, &host);
		if (mm != IR_NONE) {
			into[mm] = host;
			continue;
		}
		ir_id lng = lng_of(L, g, into, uses, i);
		if (lng != IR_NONE)
			into[lng] = i;
	}
	ir_free(L->ctx, uses);
	return true;
}

/* The matmul that add node c computes as an epilogue's product (the
 * epilogue plan made into[mm] = c), or IR_NONE. */
static ir_id product_in(const ir_graph *g, const ir_id *into, ir_id c)
{
	for (uint32_t a = 0; a < 2; a++) {
		ir_id x = ir_arg(g, c, a);
		if (into[x] == c && g->nodes[x].op == IR_OP_MATMUL)
			return x;
	}
	return IR_NONE;
}

ir_id cg_lower_epilogue_lng(const ir_graph *g, const ir_id *into, ir_id id)
{
	if (g->nodes[id].op != IR_OP_ADD)
		return IR_NONE;
	for (uint32_t a = 0; a < 2; a++) {
		ir_id x = ir_arg(g, id, a);
		if (into[x] == id && g->nodes[x].op == IR_OP_LAYER_NORM_GRAD)
			return x;
	}
	return IR_NONE;
}

ir_id cg_lower_epilogue_matmul(const ir_graph *g, const ir_id *into, ir_id id)
{
	if (g->nodes[id].op != IR_OP_ADD)
		return IR_NONE;
	ir_id mm = product_in(g, into, id);
	for (uint32_t a = 0; a < 2 && mm == IR_NONE; a++) {
		ir_id y = ir_arg(g, id, a);
		if (into[y] == id && g->nodes[y].op == IR_OP_ADD)
			mm = product_in(g, into, y);
	}
	return mm;
}

/* The fused matmul under tree node t of trees tr, or none: t itself, or
 * an operand of t when t is an add (whose other operand is then the
 * first term). */
static bool epilogue_at(const ir_graph *g, const cg_trees *tr, uint32_t t,
			epi_tree *e)
{
	const cg_tree_node *tn = &tr->n[t];
	if (tn->is_leaf)
		return false;
	ir_op op = g->nodes[tn->id].op;
	if (op == IR_OP_MATMUL) {
		e->mm = t;
		return true;
	}
	if (op != IR_OP_ADD)
		return false;
	for (uint32_t b = 0; b < 2; b++) {
		const cg_tree_node *kid = &tr->n[tn->kid[b]];
		if (!kid->is_leaf && g->nodes[kid->id].op == IR_OP_MATMUL) {
			e->mm = tn->kid[b];
			e->term[e->n_terms] = tn->kid[1 - b];
			e->term_id[e->n_terms++] = ir_arg(g, tn->id, 1 - b);
			return true;
		}
	}
	return false;
}

/* Whether the kernel of node id with trees tr is an add computing a
 * fused matmul (the epilogue plan's), and where (e). */
static bool epilogue_trees(const ir_graph *g, ir_id id, const cg_trees *tr,
			   epi_tree *e)
{
	if (g->nodes[id].op != IR_OP_ADD)
		return false;
	for (uint32_t a = 0; a < 2; a++) {
		e->n_terms = 0;
		if (epilogue_at(g, tr, tr->opnd[a], e)) {
			e->term[e->n_terms] = tr->opnd[1 - a];
			e->term_id[e->n_terms++] = ir_arg(g, id, 1 - a);
			for (int t = 0; t < e->n_terms; t++)
				assert(tr->n[e->term[t]].is_leaf);
			return true;
		}
	}
	return false;
}

static bool epilogue_tree(const cg_kernel *k, epi_tree *e)
{
	return epilogue_trees(k->g, k->id, &k->tr, e);
}

bool cg_lower_is_epilogue_kernel(const cg_kernel *k)
{
	epi_tree e;
	return epilogue_tree(k, &e);
}

/* The operands of kernel k's matmul: its own, or for an add computing
 * a fused matmul, the matmul's operands (the leaves under it) and the
 * epilogue's terms (the other operands of the adds). */
static mm_src matmul_src(const cg_kernel *k)
{
	mm_src s = {.mm = k->id, .a = k->in[0], .b = k->in[1]};
	epi_tree e;
	if (epilogue_tree(k, &e)) {
		const cg_tree_node *tn = &k->tr.n[e.mm];
		s.mm = tn->id;
		s.a = k->in[k->tr.n[tn->kid[0]].param];
		s.b = k->in[k->tr.n[tn->kid[1]].param];
		s.n_epi = e.n_terms;
		for (int t = 0; t < e.n_terms; t++) {
			s.epi[t] = k->in[k->tr.n[e.term[t]].param];
			s.epi_rs[t] = term_row_stride(k->L, k->g, e.term_id[t],
						      &k->node->type);
		}
	}
	return s;
}

/* Batched C = op(A) op(B): a nest over the batch dims and the rows of C,
 * each row computed by loops LLVM vectorizes; large products go to the
 * generated sgemm instead. */
bool cg_lower_matmul(cg_kernel *k)
{
	int64_t ad[IR_MAX_RANK], bd[IR_MAX_RANK];
	mm_src src = matmul_src(k);
	const ir_node *mm = &k->g->nodes[src.mm];
	int ra = cg_lower_dims(k->L, mm_arg_type(k->g, src.mm, 0), ad);
	int rb = cg_lower_dims(k->L, mm_arg_type(k->g, src.mm, 1), bd);
	bool ta = mm->attr.matmul.ta;
	cg_nest n;
	memset(&n, 0, sizeof n);
	int ro = cg_lower_dims(k->L, &mm->type, n.dims), nb = ro - 2;
	mm_cx c = {n.dims[nb], n.dims[nb + 1],     ta ? ad[ra - 2] : ad[ra - 1],
		   0,          mm->attr.matmul.tb, src.a,
		   src.b};
	c.a_k = ta ? c.M : 1;
	n.rank = nb; /* batch dims, then (below) the rows of C */
	n.n_arr = 3;
	int64_t os[IR_MAX_RANK];
	cg_lower_strides(n.dims, ro, os);
	memcpy(n.strides[0], os, sizeof os);
	batch_strides(ad, ra, nb, n.strides[1]);
	batch_strides(bd, rb, nb, n.strides[2]);
	int64_t batches = 1;
	for (int d = 0; d < nb; d++)
		batches *= n.dims[d];
	if (c.M > 0 && c.N > 0 && c.K > 0 &&
	    batches * c.M * c.N * c.K >= k->L->gemm_min)
		return matmul_gemm(k, &n, &c, ta, &src);
	n.rank = nb + 1;
	n.dims[nb] = c.M;
	n.strides[1][nb] = ta ? 1 : c.K;
	n.strides[2][nb] = 0;
	run_rows(k, &n, c.N * c.K, matmul_row, &c);
	return true;
}

/* ---- reductions ------------------------------------------------------------------ */

typedef struct reduce_cx {
	ir_op op;
	ir_dtype t;
	LLVMValueRef value; /* init: the value to store; mean: the count */
	bool is_ordered;    /* sums without `reassoc`: in the written order */
} reduce_cx;

static void reduce_init(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	const reduce_cx *r = ud;
	cg_lower_store(&k->f, r->t, r->value, k->out, offs[0]);
}

static void reduce_mean(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	const reduce_cx *r = ud;
	LLVMValueRef v = ldf(k, k->out, offs[0]);
	stf(k, LLVMBuildFDiv(k->f.b, v, r->value, ""), k->out, offs[0]);
}

LLVMValueRef cg_lower_reduce_step(cg_fn *f, ir_op op, ir_dtype t,
				  bool is_ordered, LLVMValueRef o,
				  LLVMValueRef v)
{
	if (t == IR_I32) {
		if (op != IR_OP_MAX)
			return LLVMBuildAdd(f->b, o, v, "");
		LLVMValueRef gt = LLVMBuildICmp(f->b, LLVMIntSGT, v, o, "");
		return LLVMBuildSelect(f->b, gt, v, o, "");
	}
	if (op != IR_OP_MAX)
		return is_ordered ? LLVMBuildFAdd(f->b, o, v, "")
				  : fadd_r(f, o, v);
	/* NaN wins, as in PyTorch. */
	LLVMValueRef gt = LLVMBuildFCmp(f->b, LLVMRealOGT, v, o, "");
	LLVMValueRef take = LLVMBuildOr(f->b, gt, is_nan(f, v), "");
	return LLVMBuildSelect(f->b, take, v, o, "");
}

static void reduce_body(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	const reduce_cx *r = ud;
	LLVMValueRef o = cg_lower_load(&k->f, r->t, k->out, offs[0]);
	LLVMValueRef v = cg_kernel_operand(k, 0, offs, NULL);
	cg_lower_store(&k->f, r->t,
		       cg_lower_reduce_step(&k->f, r->op, r->t, r->is_ordered,
					    o, v),
		       k->out, offs[0]);
}

/* A nest over the node's output alone, dense. */
static void out_nest(const cg_kernel *k, cg_nest *n)
{
	memset(n, 0, sizeof *n);
	n->n_arr = 1;
	n->rank = cg_lower_dims(k->L, &k->node->type, n->dims);
	cg_lower_strides(n->dims, n->rank, n->strides[0]);
	cg_nest_simplify(n);
}

/* The reduced input walked in row-major order, each element added into
 * its output element (stride 0 along reduced axes), the interpreter's
 * order as written, without `reassoc` (with it, LLVM unrolled rows of up
 * to 48 columns of a column reduction and vectorized the loop over rows
 * instead, a column gathered into partial sums: not the interpreter's
 * sums, and 0.2 ns an element; without it, it vectorizes along the row
 * and keeps each column's sum in a register across the rows, 0.02 ns an
 * element: tests/test_codegen_colred.c, bench/colsum.c). The outer loop
 * is split over threads only when it is a kept axis, so threads write
 * disjoint outputs. Rows reduced over the last axis (more than one) take
 * the row kernel instead; float columns longer than CG_SUM_PLAIN take
 * the blocked column kernel (cg_lower_colred.c); other float sums and
 * means of more than CG_SUM_PLAIN inputs per output element (a whole
 * tensor, axes that do not merge) take the lane-blocked kernel
 * (cg_lower_sumlane.c): all in the interpreter's order. */
bool cg_lower_reduce(cg_kernel *k)
{
	cg_fn *f = &k->f;
	int64_t xd[IR_MAX_RANK], count = 1;
	int r = cg_lower_dims(k->L, cg_kernel_arg_type(k, 0), xd);
	uint32_t axes = k->node->attr.reduce.axes;
	cg_nest n;
	int ax[IR_MAX_RANK];
	memset(&n, 0, sizeof n);
	n.rank = r;
	n.n_arr = 1;
	memcpy(n.dims, xd, sizeof xd);
	int64_t s = 1;
	for (int i = r - 1; i >= 0; i--) {
		bool red = axes & (1u << i);
		n.strides[0][i] = red ? 0 : s;
		s *= red ? 1 : xd[i];
		count *= red ? xd[i] : 1;
		ax[i] = i;
	}
	cg_nest_add_operand(k, &n, 0, ax, -1);
	ir_op op = k->node->op;
	if (op == IR_OP_MAX && count == 0 &&
	    cg_lower_numel(k->L, &k->node->type)) {
		ir_error(k->L->ctx, k->node->loc,
			 "codegen: max: reduction over "
			 "an empty axis");
		return false;
	}
	cg_nest_simplify(&n);
	if (count != 0 && cg_lower_rowred_fits(k, &n)) {
		cg_lower_reduce_rows(k, &n);
		return true;
	}
	if (!cg_lower_colred_fits(k, &n) && cg_lower_sumlane_fits(k, &n, count)) {
		cg_lower_reduce_lanes(k, &n, count);
		return true;
	}
	cg_nest init = n;
	for (int d = 0; d < n.rank; d++)
		if (n.strides[0][d] == 0)
			init.dims[d] = 1;
	if (count == 0) /* an empty input: every output element only inits */
		out_nest(k, &init);
	bool is_split = count != 0 && n.strides[0][0] != 0;
	LLVMValueRef lo = is_split ? k->lo : cg_i64(f, 0);
	LLVMValueRef hi_init = is_split ? k->hi : cg_i64(f, init.dims[0]);
	LLVMValueRef hi = is_split ? k->hi : cg_i64(f, n.dims[0]);
	k->extent = is_split ? n.dims[0] : 1;
	k->work = 1;
	for (int d = 0; d < n.rank; d++)
		k->work *= n.dims[d];
	ir_dtype t = k->node->type.dtype;
	reduce_cx rc = {op, t, NULL, true};
	if (op == IR_OP_MAX)
		rc.value = t == IR_I32 ? cg_i32(f, INT32_MIN)
				       : cg_f32(f, -INFINITY);
	else
		rc.value = t == IR_I32 ? cg_i32(f, 0) : cg_f32(f, 0);
	cg_nest_emit(k, &init, lo, hi_init, reduce_init, &rc);
	if (count != 0 && cg_lower_colred_fits(k, &n))
		cg_lower_reduce_columns(k, &n);
	else
		cg_nest_emit(k, &n, lo, hi, reduce_body, &rc);
	if (op == IR_OP_MEAN) {
		rc.value = cg_f32(f, (float)count);
		cg_nest_emit(k, &init, lo, hi_init, reduce_mean, &rc);
	}
	return true;
}

typedef struct argmax_cx {
	int64_t len, stride;
	ir_dtype t;
	bool is_min; /* argmin */
} argmax_cx;

/* The first index of the maximum (argmin: minimum) along the axis; a NaN
 * counts as the maximum and the minimum (and so the first NaN wins). */
static void argmax_body(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	const argmax_cx *a = ud;
	cg_fn *f = &k->f;
	LLVMTypeRef et = cg_lower_elem_type(f, a->t);
	LLVMValueRef bv = var(k, et, cg_lower_load(f, a->t, k->in[0], offs[1]));
	LLVMValueRef best = var(k, cg_t_i64(f), cg_i64(f, 0));
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 1), cg_i64(f, a->len),
				       1);
	LLVMValueRef v = cg_lower_load(f, a->t, k->in[0],
				       cg_add(f, offs[1],
					      cg_muli(f, j, a->stride)));
	LLVMValueRef b = get(k, et, bv), take;
	if (a->t == IR_I32) {
		take = LLVMBuildICmp(f->b, a->is_min ? LLVMIntSLT : LLVMIntSGT,
				     v, b, "");
	} else {
		LLVMValueRef gt = LLVMBuildFCmp(f->b,
						a->is_min ? LLVMRealOLT
							  : LLVMRealOGT,
						v, b, "");
		take = LLVMBuildAnd(f->b, LLVMBuildNot(f->b, is_nan(f, b), ""),
				    LLVMBuildOr(f->b, gt, is_nan(f, v), ""), "");
	}
	set(k, bv, LLVMBuildSelect(f->b, take, v, b, ""));
	set(k, best,
	    LLVMBuildSelect(f->b, take, j, get(k, cg_t_i64(f), best), ""));
	cg_loop_end(f, &l);
	LLVMValueRef r = LLVMBuildTrunc(f->b, get(k, cg_t_i64(f), best),
					cg_t_i32(f), "");
	cg_lower_store(f, IR_I32, r, k->out, offs[0]);
}

/* Splits x's dims at axis into outer x len x inner. */
static void split_axis(const int64_t *dims, int rank, int ax, int64_t *outer,
		       int64_t *len, int64_t *inner)
{
	*outer = *inner = 1;
	for (int i = 0; i < ax; i++)
		*outer *= dims[i];
	for (int i = ax + 1; i < rank; i++)
		*inner *= dims[i];
	*len = dims[ax];
}

/* A nest over (outer, inner) with arrays 0 (out) and 1 (x) at the line
 * starts: out has out_len per line, x has x_len. */
static void line_nest(cg_nest *n, int64_t outer, int64_t inner, int64_t out_len,
		      int64_t x_len)
{
	memset(n, 0, sizeof *n);
	n->rank = 2;
	n->n_arr = 2;
	n->dims[0] = outer;
	n->dims[1] = inner;
	n->strides[0][0] = out_len * inner;
	n->strides[0][1] = 1;
	n->strides[1][0] = x_len * inner;
	n->strides[1][1] = 1;
}

bool cg_lower_argmax(cg_kernel *k)
{
	int64_t xd[IR_MAX_RANK], outer, len, inner;
	int r = cg_lower_dims(k->L, cg_kernel_arg_type(k, 0), xd);
	int ax = __builtin_ctz(k->node->attr.reduce.axes);
	split_axis(xd, r, ax, &outer, &len, &inner);
	if (len == 0 && outer * inner > 0) {
		ir_error(k->L->ctx, k->node->loc,
			 "codegen: %s: reduction over an empty axis",
			 ir_op_table[k->node->op].name);
		return false;
	}
	argmax_cx a = {len, inner, cg_kernel_arg_type(k, 0)->dtype,
		       k->node->op == IR_OP_ARGMIN};
	cg_nest n;
	line_nest(&n, outer, inner, 1, len);
	run_rows(k, &n, len, argmax_body, &a);
	return true;
}

/* ---- a row's sums in a fixed order ------------------------------------------------ */

/* The sums of layer_norm and layer_norm_grad rows, in an order that is
 * the same for every row. A sum that LLVM may reassociate takes
 * whatever order each copy of the row loop is given: a short row's loop
 * unrolled and then vectorized across rows (with gathers) rounded
 * differently from a row of the remainder left scalar, so a row's bits
 * depended on where a thread's range of rows began. Here the values are
 * computed in a loop with no sum (LLVM vectorizes it as it likes) into a
 * tile on the stack, a chunk of ROW_TILE columns at a time, the tile
 * padded with +0 to whole vectors of ROW_VW; then the tile's vectors are
 * added, without reassociation, into `accs` vector accumulators (vector
 * q of the row into accumulator q % accs: 4 for rows of at least
 * `four_from` columns (256 for layer norm's sums, 64 for the softmax
 * family's sums of exps, whose exps are cheap next to the chain of adds;
 * exp_sum adds them in this order without the tile),
 * so that a long row has four chains, else 1), the accumulators combined
 * by halves (0 + 2, 1 + 3, then 0 + 1) and the vector's lanes by halves
 * too (lanes l and l + 8, then + 4, + 2, + 1). Element j is so always in
 * lane j % (ROW_VW * accs), each lane summed left to right from its first
 * element (a pad's +0 added to a lane of the last vector), and the total
 * plus +0 (but a sum of squares), so that a sum of zeros is +0 as one
 * from +0 is. */
#define ROW_VW 16
#define ROW_TILE 1024
#define ROW_SUMS_MAX 3

typedef struct row_sums {
	int n;      /* sums */
	int accs;   /* vector accumulators a sum: 1 or 4 */
	int64_t K;  /* row length */
	int64_t tw; /* tile columns: K rounded up to ROW_VW, at most ROW_TILE */
	LLVMTypeRef vt;                    /* <ROW_VW x float> */
	LLVMValueRef tile[ROW_SUMS_MAX];   /* tw floats each */
	LLVMValueRef acc[ROW_SUMS_MAX][4]; /* variables of vt */
} row_sums;

/* The values to sum at column j of a row: v[0 .. n), and whatever
 * else the pass does at j (stores). */
typedef void (*row_sums_body)(cg_kernel *k, LLVMValueRef *offs, LLVMValueRef j,
			      LLVMValueRef *v, void *ud);

static void row_sums_init(cg_kernel *k, row_sums *s, int n, int64_t K,
			  int64_t four_from)
{
	cg_fn *f = &k->f;
	assert(n <= ROW_SUMS_MAX);
	s->n = n;
	s->K = K;
	assert(four_from >= 4 * ROW_VW); /* the first chunk starts all four */
	s->accs = K >= four_from ? 4 : 1;
	s->tw = (K + ROW_VW - 1) / ROW_VW * ROW_VW;
	if (s->tw > ROW_TILE)
		s->tw = ROW_TILE;
	s->vt = LLVMVectorType(cg_t_f32(f), ROW_VW);
	for (int a = 0; a < n; a++) {
		s->tile[a] = cg_entry_alloca(f,
					     LLVMArrayType(cg_t_f32(f),
							   (unsigned)s->tw),
					     64);
		for (int i = 0; i < s->accs; i++)
			s->acc[a][i] = cg_entry_alloca(f, s->vt, 64);
	}
}

/* Vector q of the tile (ROW_VW floats from column 16 q) of sum a. */
static LLVMValueRef tile_vec(cg_kernel *k, const row_sums *s, int a,
			     LLVMValueRef q)
{
	cg_fn *f = &k->f;
	LLVMValueRef at = cg_mul(f, q, cg_i64(f, ROW_VW));
	LLVMValueRef p = LLVMBuildGEP2(f->b, cg_t_f32(f), s->tile[a], &at, 1,
				       "");
	LLVMValueRef v = LLVMBuildLoad2(f->b, s->vt, p, "");
	LLVMSetAlignment(v, 4);
	return v;
}

/* acc[a][i] += vector q of tile a, for every sum a (acc[a][i] = that
 * vector when is_first: the row's first vector of the accumulator). */
static void add_vec(cg_kernel *k, const row_sums *s, int i, LLVMValueRef q,
		    bool is_first)
{
	for (int a = 0; a < s->n; a++) {
		LLVMValueRef v = tile_vec(k, s, a, q);
		if (!is_first)
			v = LLVMBuildFAdd(k->f.b, get(k, s->vt, s->acc[a][i]),
					  v, "");
		set(k, s->acc[a][i], v);
	}
}

/* Columns [c0, c0 + w) of the row, w <= tw: their values into the
 * tiles, padded, then added into the accumulators (vector q of the
 * chunk, at column c0 + 16 q, into accumulator q % accs: c0 is a
 * multiple of ROW_TILE, itself one of ROW_VW accs); the row's first
 * chunk (is_first) starts the accumulators with its first vectors. */
static void row_sums_chunk(cg_kernel *k, row_sums *s, LLVMValueRef *offs,
			   LLVMValueRef c0, int64_t w, bool is_first,
			   row_sums_body body, void *ud)
{
	cg_fn *f = &k->f;
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, w), 1);
	LLVMValueRef v[ROW_SUMS_MAX];
	body(k, offs, cg_add(f, c0, j), v, ud);
	for (int a = 0; a < s->n; a++)
		stf(k, v[a], s->tile[a], j);
	cg_loop_end(f, &l);
	int64_t nq = (w + ROW_VW - 1) / ROW_VW;
	for (int a = 0; a < s->n; a++)
		for (int64_t p = w; p < nq * ROW_VW; p++)
			stf(k, cg_f32(f, 0), s->tile[a], cg_i64(f, p));
	int64_t groups = nq / s->accs, g0 = is_first ? 1 : 0;
	assert(!is_first || groups >= 1);
	if (is_first)
		for (int i = 0; i < s->accs; i++)
			add_vec(k, s, i, cg_i64(f, i), true);
	if (groups > g0) {
		cg_loop lg;
		LLVMValueRef g = cg_loop_begin(f, &lg, cg_i64(f, g0),
					       cg_i64(f, groups), 1);
		for (int i = 0; i < s->accs; i++)
			add_vec(k, s, i,
				cg_add(f, cg_mul(f, g, cg_i64(f, s->accs)),
				       cg_i64(f, i)),
				false);
		cg_loop_end(f, &lg);
	}
	for (int64_t q = groups * s->accs; q < nq; q++)
		add_vec(k, s, (int)(q % s->accs), cg_i64(f, q), false);
}

/* One pass over the row: the n sums of body's values, left in the
 * accumulators (zeros for a row of no columns). */
static void row_sums_pass(cg_kernel *k, row_sums *s, LLVMValueRef *offs,
			  row_sums_body body, void *ud)
{
	cg_fn *f = &k->f;
	if (s->K == 0) {
		for (int a = 0; a < s->n; a++)
			for (int i = 0; i < s->accs; i++)
				set(k, s->acc[a][i], LLVMConstNull(s->vt));
		return;
	}
	int64_t full = s->K / s->tw, rem = s->K % s->tw;
	if (full > 0)
		row_sums_chunk(k, s, offs, cg_i64(f, 0), s->tw, true, body, ud);
	if (full > 1) {
		cg_loop lc;
		LLVMValueRef c = cg_loop_begin(f, &lc, cg_i64(f, 1),
					       cg_i64(f, full), 1);
		row_sums_chunk(k, s, offs, cg_mul(f, c, cg_i64(f, s->tw)),
			       s->tw, false, body, ud);
		cg_loop_end(f, &lc);
	}
	if (rem > 0)
		row_sums_chunk(k, s, offs, cg_i64(f, full * s->tw), rem,
			       full == 0, body, ud);
}

/* The lanes [0, n) of v plus the lanes [n, 2n), a vector of n. */
static LLVMValueRef add_halves(cg_fn *f, LLVMValueRef v, unsigned n)
{
	LLVMValueRef lo[ROW_VW], hi[ROW_VW];
	for (unsigned l = 0; l < n; l++) {
		lo[l] = LLVMConstInt(cg_t_i32(f), l, false);
		hi[l] = LLVMConstInt(cg_t_i32(f), l + n, false);
	}
	LLVMValueRef p = LLVMGetPoison(LLVMTypeOf(v));
	return LLVMBuildFAdd(f->b,
			     LLVMBuildShuffleVector(f->b, v, p,
						    LLVMConstVector(lo, n), ""),
			     LLVMBuildShuffleVector(f->b, v, p,
						    LLVMConstVector(hi, n), ""),
			     "");
}

/* Vector accumulators v[0 .. accs) (1 or 4) of a row's sum as one
 * vector, by halves: 0 + 2, 1 + 3, then 0 + 1. Every sum of the row
 * kernels (row_sums, exp_sum) combines its accumulators so. */
static LLVMValueRef accs_combined(cg_fn *f, LLVMValueRef *v, int accs)
{
	if (accs == 4) {
		v[0] = LLVMBuildFAdd(f->b, v[0], v[2], "");
		v[1] = LLVMBuildFAdd(f->b, v[1], v[3], "");
		v[0] = LLVMBuildFAdd(f->b, v[0], v[1], "");
	}
	return v[0];
}

/* The sum of a vector's lanes, by halves (add_halves). */
static LLVMValueRef lanes_total(cg_fn *f, LLVMValueRef t)
{
	for (unsigned n = ROW_VW / 2; n >= 1; n /= 2)
		t = add_halves(f, t, n);
	return LLVMBuildExtractElement(f->b, t, cg_i64(f, 0), "");
}

/* Sum a of the last pass as one vector: the accumulators combined by
 * halves (0 + 2, 1 + 3, then 0 + 1), its lanes still to add. */
static LLVMValueRef row_sums_lanes(cg_kernel *k, const row_sums *s, int a)
{
	LLVMValueRef v[4] = {NULL};
	for (int i = 0; i < s->accs; i++)
		v[i] = get(k, s->vt, s->acc[a][i]);
	return accs_combined(&k->f, v, s->accs);
}

/* Sum a of the last pass: the accumulators, then the lanes, by halves;
 * plus +0 when the values may hold -0 (not for squares, whose sum is
 * never -0). */
static LLVMValueRef row_sums_total(cg_kernel *k, const row_sums *s, int a,
				   bool has_neg_zero)
{
	cg_fn *f = &k->f;
	LLVMValueRef t = lanes_total(f, row_sums_lanes(k, s, a));
	/* + 0: a sum of zeros is +0, as a sum from +0 (the interpreter's)
	 * is; any other sum is unchanged */
	return has_neg_zero ? LLVMBuildFAdd(f->b, t, cg_f32(f, 0), "") : t;
}

/* ---- rows in groups of ROW_VW ----------------------------------------------------- */

/* A narrow row spends much of its time adding its vector's lanes (four
 * dependent shuffles and adds a sum) and in the scalar sqrt and
 * divisions between its passes. A group of ROW_VW rows instead leaves
 * each row's vector (row_sums_lanes) in a stack array and adds the
 * lanes of all of them at once: two vectors are shuffled into one of the
 * lower halves of both rows' lanes and one of the upper halves, and
 * these added, so that four rounds (16 + 8 + 4 + 2 shuffles, 8 + 4 + 2 +
 * 1 adds for ROW_VW rows) leave row i's total in lane i. Each addition
 * is one that row_sums_total makes, of the same operands in the same
 * order, so every row keeps its bits; what the totals give (a mean, a
 * sqrt, reciprocals) is computed on the vector, the same operations
 * lane by lane, and each row's next pass reads its lane back from a
 * stack array. Groups are taken from the kernel's range [lo, hi), the
 * last one short: its lanes past the rows hold stale values no row
 * reads. A row's result does not depend on its group, so any split over
 * threads gives the same bits. Only for rows of at most ROW_GROUP_MAX_K
 * columns (a group's rows stay in L1 between passes) over a nest of one
 * axis. */
#define ROW_GROUP_MAX_K 128

typedef struct row_group {
	cg_kernel *k;
	const cg_nest *n; /* rank 1: array a at base[a] + row strides[a][0] */
	LLVMValueRef g0, nr; /* the group's first row and its count of rows */
	LLVMValueRef parts[ROW_SUMS_MAX]; /* [ROW_VW x vt]: a row's vector */
	/* NULL, or where `on` (an i1) holds, an i64 array of the rows to
	 * compute: g0 and nr then count positions in it (live rows only,
	 * row_groups_run). */
	LLVMValueRef list, on;
} row_group;

/* One row of a group: offs its arrays' offsets, i its index in the
 * group (i64 values). */
typedef void (*row_group_body)(cg_kernel *k, LLVMValueRef *offs, LLVMValueRef i,
			       void *ud);

static bool is_grouped(const cg_nest *n, int64_t K)
{
	return n->rank == 1 && K >= 1 && K <= ROW_GROUP_MAX_K;
}

/* The group's stack arrays for n sums, zeroed once (stale lanes are
 * then never uninitialized). */
static void row_group_init(cg_kernel *k, row_group *g, const cg_nest *n,
			   int n_sums)
{
	cg_fn *f = &k->f;
	g->k = k;
	g->n = n;
	for (int a = 0; a < n_sums; a++) {
		LLVMTypeRef t = LLVMArrayType(cg_t_vec(f, ROW_VW), ROW_VW);
		g->parts[a] = cg_entry_alloca(f, t, 64);
		LLVMBuildMemSet(f->b, g->parts[a],
				LLVMConstInt(LLVMInt8TypeInContext(f->ctx), 0, 0),
				cg_i64(f, ROW_VW * ROW_VW * 4), 64);
	}
}

/* A stack array of ROW_VW floats. */
static LLVMValueRef lanes_var(cg_kernel *k)
{
	cg_fn *f = &k->f;
	return cg_entry_alloca(f, LLVMArrayType(cg_t_f32(f), ROW_VW), 64);
}

/* Element i (an i64 value) of a lanes_var. */
static LLVMValueRef lane_of(cg_kernel *k, LLVMValueRef arr, LLVMValueRef i)
{
	return cg_load(&k->f, cg_at(&k->f, arr, i));
}

/* body for each row of the group, in order. */
static void row_group_each(row_group *g, row_group_body body, void *ud)
{
	cg_kernel *k = g->k;
	cg_fn *f = &k->f;
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), g->nr, 1);
	LLVMValueRef row = cg_add(f, g->g0, i), offs[CG_NEST_ARRS];
	if (g->list)
		row = LLVMBuildSelect(f->b, g->on,
				      LLVMBuildLoad2(f->b, cg_t_i64(f),
						     LLVMBuildGEP2(f->b,
								   cg_t_i64(f),
								   g->list,
								   &row, 1, ""),
						     ""),
				      row, "");
	for (int a = 0; a < g->n->n_arr; a++)
		offs[a] = cg_add(f, cg_i64(f, g->n->base[a]),
				 cg_muli(f, row, g->n->strides[a][0]));
	body(k, offs, i, ud);
	cg_loop_end(f, &l);
}

/* Row i's vector of sum a of the last pass into the group's array. */
static void row_group_put(row_group *g, const row_sums *s, int a, LLVMValueRef i)
{
	cg_fn *f = &g->k->f;
	LLVMValueRef at = LLVMBuildGEP2(f->b, s->vt, g->parts[a], &i, 1, "");
	LLVMValueRef st = LLVMBuildStore(f->b, row_sums_lanes(g->k, s, a), at);
	LLVMSetAlignment(st, 64);
}

/* Lanes [0, h) of each row of v's and w's (each rows of 2 h lanes, w's
 * rows after v's) when !is_hi, else their lanes [h, 2 h): a vector of
 * the rows of both, h lanes each. */
static LLVMValueRef halves_of(cg_fn *f, LLVMValueRef v, LLVMValueRef w,
			      unsigned h, bool is_hi)
{
	LLVMValueRef idx[ROW_VW];
	unsigned m = ROW_VW / (2 * h); /* rows of each of v and w */
	for (unsigned r = 0; r < 2 * m; r++)
		for (unsigned l = 0; l < h; l++)
			idx[r * h + l] = LLVMConstInt(cg_t_i32(f),
						      (r < m ? 0 : ROW_VW) +
							      (r % m) * 2 * h +
							      l +
							      (is_hi ? h : 0),
						      false);
	return LLVMBuildShuffleVector(f->b, v, w, LLVMConstVector(idx, ROW_VW),
				      "");
}

/* Sum a's totals of the group's rows, row i's in lane i: the lanes of
 * each row's vector added by halves, as row_sums_total adds them, for
 * all rows at once; plus +0 when the values may hold -0. */
static LLVMValueRef row_group_totals(row_group *g, int a, bool has_neg_zero)
{
	cg_fn *f = &g->k->f;
	LLVMTypeRef vt = cg_t_vec(f, ROW_VW);
	LLVMValueRef v[ROW_VW];
	for (unsigned r = 0; r < ROW_VW; r++) {
		LLVMValueRef at = cg_i64(f, r);
		v[r] = LLVMBuildLoad2(f->b, vt,
				      LLVMBuildGEP2(f->b, vt, g->parts[a], &at,
						    1, ""),
				      "");
		LLVMSetAlignment(v[r], 64);
	}
	unsigned n = ROW_VW;
	for (unsigned h = ROW_VW / 2; h >= 1; h /= 2, n /= 2)
		for (unsigned p = 0; p < n / 2; p++)
			v[p] = LLVMBuildFAdd(f->b,
					     halves_of(f, v[2 * p],
						       v[2 * p + 1], h, false),
					     halves_of(f, v[2 * p],
						       v[2 * p + 1], h, true),
					     "");
	return has_neg_zero ? LLVMBuildFAdd(f->b, v[0], cg_const_real(vt, 0), "")
			    : v[0];
}

/* Appends rows [lo, hi) to a row group's list (its count at ud). */
typedef struct list_cx {
	LLVMValueRef list, count;
} list_cx;

static void list_append(cg_kernel *k, LLVMValueRef lo, LLVMValueRef hi, void *ud)
{
	const list_cx *c = ud;
	cg_fn *f = &k->f;
	LLVMTypeRef i64 = cg_t_i64(f);
	cg_loop l;
	LLVMValueRef r = cg_loop_begin(f, &l, lo, hi, 1);
	LLVMValueRef n = LLVMBuildLoad2(f->b, i64, c->count, "");
	LLVMBuildStore(f->b, r, LLVMBuildGEP2(f->b, i64, c->list, &n, 1, ""));
	LLVMBuildStore(f->b, cg_addi(f, n, 1), c->count);
	cg_loop_end(f, &l);
}

/* Rows in the list of a row group at most this many (its stack array). */
#define ROW_LIST_MAX 16384

/* The kernel's rows in groups: a nest of one axis over [lo, hi), each
 * group's count of rows at most ROW_VW; group(g) emits one. A row's
 * results do not depend on the group it is in, so a kernel leaving
 * rows out (cg_lower_row_skip_rows) lists its live rows of [lo, hi)
 * when row_skip is set (the dead ones' floats +0) and groups the list:
 * a batch element's few live rows would make groups of few rows. */
static void row_groups_run(cg_kernel *k, const cg_nest *n, int64_t row_work,
			   row_group *g, void (*group)(row_group *g, void *ud),
			   void *ud)
{
	cg_fn *f = &k->f;
	k->extent = n->dims[0];
	k->work = n->dims[0] * row_work;
	LLVMValueRef lo = k->lo, hi = k->hi;
	row_skip rs;
	g->list = NULL;
	if (row_skip_of(k, n, &rs) && rs.q == 1 && n->dims[0] <= ROW_LIST_MAX) {
		LLVMTypeRef i64 = cg_t_i64(f);
		list_cx c = {cg_entry_alloca(f,
					     LLVMArrayType2(i64,
							    (uint64_t)n->dims[0]),
					     64),
			     cg_var(f, i64, cg_i64(f, 0))};
		g->list = c.list;
		g->on = row_skip_on(k);
		LLVMBasicBlockRef join = cg_if_begin(f, g->on);
		row_parts(k, &rs,
			  LLVMConstInt(LLVMInt1TypeInContext(f->ctx), 1, 0),
			  list_append, &c);
		cg_if_end(f, join);
		lo = LLVMBuildSelect(f->b, g->on, cg_i64(f, 0), lo, "");
		hi = LLVMBuildSelect(f->b, g->on,
				     LLVMBuildLoad2(f->b, i64, c.count, ""), hi,
				     "");
	}
	cg_loop l;
	g->g0 = cg_loop_begin(f, &l, lo, hi, ROW_VW);
	g->nr = cg_min(f, cg_i64(f, ROW_VW), LLVMBuildSub(f->b, hi, g->g0, ""));
	group(g, ud);
	cg_loop_end(f, &l);
}

/* ---- softmax family and layer norm ------------------------------------------------ */

typedef struct row_cx {
	int64_t K;
	bool is_log, is_masked;
	float fill;
	float eps;
	bool is_x_leaf; /* layer_norm: x is a buffer, not a fused tree */
	/* layer_norm_grad: the tree nodes of x and g, gamma's pointer, and
	 * the term an add computing it adds (UINT32_MAX: none), its
	 * operand a (the layer_norm_grad's the other) */
	uint32_t x, g, term, term_a;
	LLVMValueRef gamma;
	LLVMValueRef mean, nz; /* the row's mean; layer_norm_grad's flag */
} row_cx;

/* exp(x - m) at the columns of a row, summed in row_sums' fixed order:
 * with `reassoc` LLVM took an order per copy of the row loop (short rows
 * unrolled and vectorized across rows in the loop, left scalar in the
 * remainder), so a row's softmax depended on where a thread's range of
 * rows began. x at column j is read from the output at src (the row as
 * softmax's first pass left it) or, when src is NULL, from operand 0;
 * each exp is stored at dst + j of the output unless dst is NULL. */
typedef struct exp_cx {
	LLVMValueRef m, src, dst;
} exp_cx;

static void exp_body(cg_kernel *k, LLVMValueRef *offs, LLVMValueRef j,
		     LLVMValueRef *v, void *ud)
{
	const exp_cx *e = ud;
	cg_fn *f = &k->f;
	LLVMValueRef x = e->src ? ldf(k, k->out, cg_add(f, e->src, j))
				: cg_kernel_operand(k, 0, offs, j);
	v[0] = cg_lower_exp_shifted(f, LLVMBuildFSub(f->b, x, e->m, ""));
	if (e->dst)
		stf(k, v[0], k->out, cg_add(f, e->dst, j));
}

/* Lanes [l0, l0 + n) of the row's accumulator lanes A: exp_body's
 * values at columns [c0, c0 + w) added lane by lane (set when
 * is_first), then +0 to the rest (w < n: the zeros padding the row's
 * last vector). The loop reads and writes lane l0 + i at its step i, so
 * that LLVM vectorizes it along the lanes, each lane added in the row's
 * order; a padded vector's columns past w are neither read nor written
 * (a conditional block LLVM makes masked loads and stores of), and the
 * whole vector of lanes is stored: a vector load of lanes that a masked
 * store had just written waited on that store. */
static void exp_lanes(cg_kernel *k, LLVMValueRef *offs, exp_cx *e,
		      LLVMValueRef A, LLVMValueRef c0, int64_t l0, int64_t n,
		      int64_t w, bool is_first)
{
	cg_fn *f = &k->f;
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, n), 1);
	LLVMValueRef v, at = cg_addi(f, i, l0);
	if (w < n) {
		LLVMValueRef x = var(k, cg_t_f32(f), cg_f32(f, 0));
		LLVMBasicBlockRef join = cg_if_begin(f,
						     LLVMBuildICmp(f->b,
								   LLVMIntSLT, i,
								   cg_i64(f, w),
								   ""));
		exp_body(k, offs, cg_add(f, c0, i), &v, e);
		set(k, x, v);
		cg_if_end(f, join);
		v = get(k, cg_t_f32(f), x);
	} else {
		exp_body(k, offs, cg_add(f, c0, i), &v, e);
	}
	if (!is_first)
		v = LLVMBuildFAdd(f->b, ldf(k, A, at), v, "");
	stf(k, v, A, at);
	cg_loop_end(f, &l);
}

/* The sum of a row's exps (never -0: exp is at least +0), in
 * row_sums' order (vector q of the row, its last one padded with +0,
 * into accumulator q % accs; accs 4 from 64 columns), each exp added
 * where it is computed: accumulator i is lanes [16 i, 16 i + 16) of a
 * stack array A, the row's columns walked 16 accs at a time, column
 * 16 accs g + l into lane l. row_sums' pass stored the exps in a tile
 * and added its vectors in a second loop, whose loads of the vectors
 * just stored waited on the stores. */
static LLVMValueRef exp_sum(cg_kernel *k, int64_t K, LLVMValueRef *offs,
			    LLVMValueRef m, LLVMValueRef src, LLVMValueRef dst)
{
	cg_fn *f = &k->f;
	exp_cx e = {m, src, dst};
	int64_t accs = K >= 64 ? 4 : 1, L = ROW_VW * accs;
	int64_t nf = K / ROW_VW, rem = K % ROW_VW, G = nf / accs;
	LLVMTypeRef vt = cg_t_vec(f, ROW_VW);
	if (K == 0)
		return cg_f32(f, 0);
	LLVMValueRef A = cg_entry_alloca(f,
					 LLVMArrayType(cg_t_f32(f), (unsigned)L),
					 64);
	if (G >= 1)
		exp_lanes(k, offs, &e, A, cg_i64(f, 0), 0, L, L, true);
	if (G >= 2) {
		cg_loop lg;
		LLVMValueRef g = cg_loop_begin(f, &lg, cg_i64(f, 1),
					       cg_i64(f, G), 1);
		exp_lanes(k, offs, &e, A, cg_muli(f, g, L), 0, L, L, false);
		cg_loop_end(f, &lg);
	}
	if (nf > G * accs)
		exp_lanes(k, offs, &e, A, cg_i64(f, G * L), 0,
			  (nf - G * accs) * ROW_VW, (nf - G * accs) * ROW_VW,
			  false);
	if (rem > 0)
		exp_lanes(k, offs, &e, A, cg_i64(f, nf * ROW_VW),
			  (nf % accs) * ROW_VW, ROW_VW, rem, nf == 0);
	LLVMValueRef v[4];
	for (int64_t i = 0; i < accs; i++) {
		v[i] = LLVMBuildLoad2(f->b, vt, cg_ati(f, A, i * ROW_VW), "");
		LLVMSetAlignment(v[i], 64);
	}
	return lanes_total(f, accs_combined(f, v, (int)accs));
}

/* x's leading dims (all but the last) as a nest: array 0 (out) steps by
 * rows of K, array 1 (when masked) reads operand 1 (valid lengths)
 * aligned with the leading dims, size-1 dims stretched; then the arrays
 * of operand 0, x (its tree when fused), whose last axis the row's inner
 * index walks. */
static void row_nest_of(cg_kernel *k, cg_nest *n, int64_t *K, bool masked,
			uint32_t x)
{
	int64_t xd[IR_MAX_RANK], vd[IR_MAX_RANK], vs[IR_MAX_RANK];
	int r = cg_lower_dims(k->L, cg_kernel_arg_type(k, 0), xd);
	memset(n, 0, sizeof *n);
	*K = xd[r - 1];
	n->rank = r - 1;
	n->n_arr = masked ? 2 : 1;
	memcpy(n->dims, xd, sizeof xd);
	int64_t s[IR_MAX_RANK];
	cg_lower_strides(xd, r, s);
	memcpy(n->strides[0], s, sizeof s);
	if (masked) {
		int vr = cg_lower_dims(k->L, cg_kernel_arg_type(k, 1), vd);
		cg_lower_strides(vd, vr, vs);
		for (int d = 0; d < r - 1; d++)
			n->strides[1][d] = d < vr && vd[d] != 1 ? vs[d] : 0;
	}
	int ax[IR_MAX_RANK];
	for (int d = 0; d < IR_MAX_RANK; d++)
		ax[d] = d;
	cg_nest_add_tree(k, n, x, ax, r - 1);
}

static void row_nest(cg_kernel *k, cg_nest *n, int64_t *K, bool masked)
{
	row_nest_of(k, n, K, masked, k->tr.opnd[0]);
}

/* Softmax of one row, as the interpreter: positions >= valid read as
 * fill; max-subtracted exps summed; divided (or, for log, subtracted). */
static void softmax_row(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	const row_cx *c = ud;
	cg_fn *f = &k->f;
	LLVMTypeRef ft = cg_t_f32(f);
	LLVMValueRef valid = cg_i64(f, c->K);
	if (c->is_masked)
		valid = LLVMBuildSExt(f->b,
				      cg_lower_load(f, IR_I32, k->in[1], offs[1]),
				      cg_t_i64(f), "");
	LLVMValueRef mx = var(k, ft, cg_f32(f, -INFINITY));
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, c->K), 1);
	LLVMValueRef v = cg_kernel_operand(k, 0, offs, j);
	if (c->is_masked) {
		LLVMValueRef in = LLVMBuildICmp(f->b, LLVMIntSLT, j, valid, "");
		v = LLVMBuildSelect(f->b, in, v, cg_f32(f, c->fill), "");
	}
	stf(k, v, k->out, cg_add(f, offs[0], j));
	set(k, mx, fmax_r(f, get(k, ft, mx), v));
	cg_loop_end(f, &l);
	LLVMValueRef m = get(k, ft, mx);
	LLVMValueRef s = exp_sum(k, c->K, offs, m, offs[0],
				 c->is_log ? NULL : offs[0]);
	LLVMValueRef lse = c->is_log ? cg_lower_fcall(f, "llvm.log", s, NULL)
				     : NULL;
	j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, c->K), 1);
	LLVMValueRef at = cg_add(f, offs[0], j);
	v = ldf(k, k->out, at);
	v = c->is_log
		    ? LLVMBuildFSub(f->b, LLVMBuildFSub(f->b, v, m, ""), lse, "")
		    : LLVMBuildFDiv(f->b, v, s, "");
	stf(k, v, k->out, at);
	cg_loop_end(f, &l);
}

bool cg_lower_softmax(cg_kernel *k)
{
	row_cx c = {0};
	c.is_log = k->node->op == IR_OP_LOG_SOFTMAX;
	c.is_masked = k->node->op == IR_OP_MASKED_SOFTMAX;
	if (c.is_masked)
		c.fill = (float)k->node->attr.fill;
	cg_nest n;
	row_nest(k, &n, &c.K, c.is_masked);
	run_rows(k, &n, 3 * c.K, softmax_row, &c);
	return true;
}

/* x at column j of a layer_norm row: read again from its operand when
 * that is a plain buffer, else from the output row, where the first pass
 * keeps a fused tree's values (computed once). */
static LLVMValueRef ln_x(cg_kernel *k, const row_cx *c, LLVMValueRef *offs,
			 LLVMValueRef j)
{
	if (c->is_x_leaf)
		return cg_kernel_operand(k, 0, offs, j);
	return ldf(k, k->out, cg_add(&k->f, offs[0], j));
}

/* Pass 1 of a layer_norm row at column j: x, kept in the output row
 * when it is a fused tree. */
static void ln_sum_x(cg_kernel *k, LLVMValueRef *offs, LLVMValueRef j,
		     LLVMValueRef *v, void *ud)
{
	const row_cx *c = ud;
	v[0] = cg_kernel_operand(k, 0, offs, j);
	if (!c->is_x_leaf)
		stf(k, v[0], k->out, cg_add(&k->f, offs[0], j));
}

/* Pass 2 of a layer_norm row: (x - mean)^2, the mean in c->mean. */
static void ln_sum_sq(cg_kernel *k, LLVMValueRef *offs, LLVMValueRef j,
		      LLVMValueRef *v, void *ud)
{
	const row_cx *c = ud;
	LLVMValueRef d = LLVMBuildFSub(k->f.b, ln_x(k, c, offs, j), c->mean, "");
	v[0] = LLVMBuildFMul(k->f.b, d, d, "");
}

/* (x - mean) r * gamma + beta over one row, r = 1 / sqrt(var + eps) (one
 * division a row, not one an element: a vector division takes the
 * divider for several cycles, a multiply half of one), the biased
 * variance from a second pass, as the interpreter, both sums in
 * row_sums' fixed order. A fused x is computed
 * once and kept in the output row; a plain x is read again instead: the
 * passes' loads of the row just stored waited on the stores (on Zen 4 a
 * 512-bit load from a 512-bit store just made stalls), a fifth of the
 * kernel's samples in the book's Transformer. */
/* The last pass of a layer_norm row: (x - mean) r * gamma + beta. */
static void ln_out_pass(cg_kernel *k, const row_cx *c, LLVMValueRef *offs,
			LLVMValueRef mean, LLVMValueRef r)
{
	cg_fn *f = &k->f;
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, c->K), 1);
	LLVMValueRef at = cg_add(f, offs[0], j);
	LLVMValueRef d = LLVMBuildFSub(f->b, ln_x(k, c, offs, j), mean, "");
	LLVMValueRef y = LLVMBuildFMul(f->b, LLVMBuildFMul(f->b, d, r, ""),
				       ldf(k, k->in[1], j), "");
	y = cg_fast(LLVMBuildFAdd(f->b, cg_fast(y, false), ldf(k, k->in[2], j),
				  ""),
		    false);
	stf(k, y, k->out, at);
	cg_loop_end(f, &l);
}

static void layer_norm_row(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	row_cx *c = ud;
	cg_fn *f = &k->f;
	LLVMValueRef Kf = cg_f32(f, (float)c->K);
	row_sums s;
	row_sums_init(k, &s, 1, c->K, 256);
	row_sums_pass(k, &s, offs, ln_sum_x, c);
	LLVMValueRef mean = LLVMBuildFDiv(f->b, row_sums_total(k, &s, 0, true),
					  Kf, "");
	c->mean = mean;
	row_sums_pass(k, &s, offs, ln_sum_sq, c);
	LLVMValueRef v = LLVMBuildFAdd(f->b,
				       LLVMBuildFDiv(f->b,
						     row_sums_total(k, &s, 0,
								    false),
						     Kf, ""),
				       cg_f32(f, c->eps), "");
	LLVMValueRef sd = cg_lower_fcall(f, "llvm.sqrt", v, NULL);
	ln_out_pass(k, c, offs, mean, LLVMBuildFDiv(f->b, cg_f32(f, 1), sd, ""));
}

/* A group of layer_norm rows (row_group): the three passes of
 * layer_norm_row, each over the group's rows, the means and the
 * reciprocals of the sd computed for all rows at once in between. */
typedef struct ln_group {
	row_cx *c;
	row_group *g;
	row_sums s;
	LLVMValueRef mean, r; /* lanes_var: each row's */
} ln_group;

static void ln_group_sum_x(cg_kernel *k, LLVMValueRef *offs, LLVMValueRef i,
			   void *ud)
{
	ln_group *lg = ud;
	row_sums_pass(k, &lg->s, offs, ln_sum_x, lg->c);
	row_group_put(lg->g, &lg->s, 0, i);
}

static void ln_group_sum_sq(cg_kernel *k, LLVMValueRef *offs, LLVMValueRef i,
			    void *ud)
{
	ln_group *lg = ud;
	lg->c->mean = lane_of(k, lg->mean, i);
	row_sums_pass(k, &lg->s, offs, ln_sum_sq, lg->c);
	row_group_put(lg->g, &lg->s, 0, i);
}

static void ln_group_out(cg_kernel *k, LLVMValueRef *offs, LLVMValueRef i,
			 void *ud)
{
	ln_group *lg = ud;
	ln_out_pass(k, lg->c, offs, lane_of(k, lg->mean, i),
		    lane_of(k, lg->r, i));
}

static void layer_norm_group(row_group *g, void *ud)
{
	ln_group *lg = ud;
	cg_fn *f = &g->k->f;
	LLVMTypeRef vt = cg_t_vec(f, ROW_VW);
	LLVMValueRef Kv = cg_const_real(vt, (double)(float)lg->c->K);
	row_group_each(g, ln_group_sum_x, lg);
	LLVMValueRef mean = LLVMBuildFDiv(f->b, row_group_totals(g, 0, true),
					  Kv, "");
	cg_vstore(f, mean, lg->mean, 64);
	row_group_each(g, ln_group_sum_sq, lg);
	LLVMValueRef v = LLVMBuildFAdd(f->b,
				       LLVMBuildFDiv(f->b,
						     row_group_totals(g, 0,
								      false),
						     Kv, ""),
				       cg_const_real(vt, lg->c->eps), "");
	LLVMValueRef sd = cg_intrinsic(f, "llvm.sqrt", &vt, 1, &v, 1);
	cg_vstore(f, LLVMBuildFDiv(f->b, cg_const_real(vt, 1), sd, ""), lg->r,
		  64);
	row_group_each(g, ln_group_out, lg);
}

bool cg_lower_layer_norm(cg_kernel *k)
{
	row_cx c = {0};
	c.eps = (float)k->node->attr.eps;
	c.is_x_leaf = k->tr.n[k->tr.opnd[0]].is_leaf;
	cg_nest n;
	row_nest(k, &n, &c.K, false);
	cg_nest_simplify(&n);
	if (!is_grouped(&n, c.K)) {
		run_rows(k, &n, 3 * c.K, layer_norm_row, &c);
		return true;
	}
	row_group g;
	ln_group lg = {.c = &c, .g = &g};
	row_group_init(k, &g, &n, 1);
	row_sums_init(k, &lg.s, 1, c.K, 256);
	lg.mean = lanes_var(k);
	lg.r = lanes_var(k);
	row_groups_run(k, &n, 3 * c.K, &g, layer_norm_group, &lg);
	return true;
}

/* layer_norm_grad's terms at column j of a row: d = x - mean and
 * h = g gamma (operands x, gamma, g). */
static void ln_grad_terms(cg_kernel *k, const row_cx *c, LLVMValueRef *offs,
			  LLVMValueRef j, LLVMValueRef mean, LLVMValueRef *d,
			  LLVMValueRef *h)
{
	cg_fn *f = &k->f;
	*d = LLVMBuildFSub(f->b, cg_kernel_tree(k, c->x, offs, j), mean, "");
	*h = LLVMBuildFMul(f->b, cg_kernel_tree(k, c->g, offs, j),
			   ldf(k, c->gamma, j), "");
}

/* Stores element j of a layer_norm_grad row, v, plus the term of the add
 * computing it when there is one (in the add's operand order, rounded
 * as the add kernel rounded it: no contraction with v's product). */
static void ln_grad_store(cg_kernel *k, const row_cx *c, LLVMValueRef *offs,
			  LLVMValueRef j, LLVMValueRef v)
{
	cg_fn *f = &k->f;
	if (c->term != UINT32_MAX) {
		LLVMValueRef t = cg_kernel_tree(k, c->term, offs, j);
		v = c->term_a == 0 ? LLVMBuildFAdd(f->b, t, v, "")
				   : LLVMBuildFAdd(f->b, v, t, "");
	}
	stf(k, v, k->out, cg_add(f, offs[0], j));
}

/* The last pass of a layer_norm_grad row whose dxh is all zero and whose
 * variance plus eps, v, is finite and positive (so is every d, and so are
 * sd and r = 1 / sd): the
 * sums s1 = sum(dxh) and s3 = sum(dxh d) are zeros, so m1 = s1 / K is s1
 * and m2 = s3 r / K is s3 (the same zeros, of the same signs), each
 * t = (dxh - m1) - (d r) m2 is a zero, (d r) m2 is d m2 and t r is t.
 * So the row is (dxh - s1) - d s3, the full pass's bits without its
 * sqrt, its divisions and its 2K + 1 multiplies. */
static void ln_grad_zero_pass(cg_kernel *k, const row_cx *c, LLVMValueRef *offs,
			      LLVMValueRef mean, LLVMValueRef s1,
			      LLVMValueRef s3)
{
	cg_fn *f = &k->f;
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, c->K), 1);
	LLVMValueRef d, h;
	ln_grad_terms(k, c, offs, j, mean, &d, &h);
	LLVMValueRef t = LLVMBuildFSub(f->b, LLVMBuildFSub(f->b, h, s1, ""),
				       LLVMBuildFMul(f->b, d, s3, ""), "");
	ln_grad_store(k, c, offs, j, t);
	cg_loop_end(f, &l);
}

/* The last pass of any other row, given r = 1 / sd, m1 and m2: each
 * element, multiplied by r where it once was divided by sd (twice an
 * element, the divider's cycles were most of the pass). */
static void ln_grad_full_loop(cg_kernel *k, const row_cx *c, LLVMValueRef *offs,
			      LLVMValueRef mean, LLVMValueRef r,
			      LLVMValueRef m1, LLVMValueRef m2)
{
	cg_fn *f = &k->f;
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, c->K), 1);
	LLVMValueRef d, h;
	ln_grad_terms(k, c, offs, j, mean, &d, &h);
	LLVMValueRef t = LLVMBuildFSub(
		f->b, LLVMBuildFSub(f->b, h, m1, ""),
		LLVMBuildFMul(f->b, LLVMBuildFMul(f->b, d, r, ""), m2, ""), "");
	ln_grad_store(k, c, offs, j, LLVMBuildFMul(f->b, t, r, ""));
	cg_loop_end(f, &l);
}

/* r = 1 / sqrt(v), m1 = s1 / K and m2 = s3 r / K, of a row or (vectors)
 * of a group's rows, into rm[0 .. 3). */
static void ln_grad_scales(cg_fn *f, int64_t K, LLVMValueRef v, LLVMValueRef s1,
			   LLVMValueRef s3, LLVMValueRef *rm)
{
	LLVMTypeRef t = LLVMTypeOf(v);
	LLVMValueRef Kf = cg_const_real(t, (double)(float)K);
	LLVMValueRef sd = cg_intrinsic(f, "llvm.sqrt", &t, 1, &v, 1);
	rm[0] = LLVMBuildFDiv(f->b, cg_const_real(t, 1), sd, "");
	rm[1] = LLVMBuildFDiv(f->b, s1, Kf, "");
	rm[2] = LLVMBuildFDiv(f->b, LLVMBuildFMul(f->b, s3, rm[0], ""), Kf, "");
}

/* The full last pass of a row, its scales computed from its sums. */
static void ln_grad_full_pass(cg_kernel *k, const row_cx *c, LLVMValueRef *offs,
			      LLVMValueRef mean, LLVMValueRef v,
			      LLVMValueRef s1, LLVMValueRef s3)
{
	LLVMValueRef rm[3];
	ln_grad_scales(&k->f, c->K, v, s1, s3, rm);
	ln_grad_full_loop(k, c, offs, mean, rm[0], rm[1], rm[2]);
}

/* The last pass of a layer_norm_grad row: ln_grad_zero_pass when no
 * dxh was other than zero (nz, an i32, is 0) and v = var + eps is finite
 * and positive, else the full pass, with its scales rm (r, m1, m2) or,
 * when rm is NULL, computing them. */
static void ln_grad_last(cg_kernel *k, const row_cx *c, LLVMValueRef *offs,
			 LLVMValueRef mean, LLVMValueRef v, LLVMValueRef nz,
			 LLVMValueRef s1, LLVMValueRef s3,
			 const LLVMValueRef *rm)
{
	cg_fn *f = &k->f;
	LLVMValueRef is_v = LLVMBuildAnd(f->b,
					 LLVMBuildFCmp(f->b, LLVMRealOGT, v,
						       cg_f32(f, 0), ""),
					 LLVMBuildFCmp(f->b, LLVMRealOLT, v,
						       cg_f32(f, INFINITY), ""),
					 "");
	LLVMValueRef is_zero = LLVMBuildAnd(f->b,
					    LLVMBuildICmp(f->b, LLVMIntEQ, nz,
							  cg_i32(f, 0), ""),
					    is_v, "");
	LLVMBasicBlockRef zero = cg_block(f, "lng.zero"),
			  full = cg_block(f, "lng.full"),
			  done = cg_block(f, "lng.done");
	LLVMBuildCondBr(f->b, is_zero, zero, full);
	LLVMPositionBuilderAtEnd(f->b, zero);
	ln_grad_zero_pass(k, c, offs, mean, s1, s3);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, full);
	if (rm)
		ln_grad_full_loop(k, c, offs, mean, rm[0], rm[1], rm[2]);
	else
		ln_grad_full_pass(k, c, offs, mean, v, s1, s3);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, done);
}

/* Pass 1 of a layer_norm_grad row at column j: x. */
static void lng_sum_x(cg_kernel *k, LLVMValueRef *offs, LLVMValueRef j,
		      LLVMValueRef *v, void *ud)
{
	const row_cx *c = ud;
	v[0] = cg_kernel_tree(k, c->x, offs, j);
}

/* Pass 2: d^2, dxh and dxh d, and whether dxh is not zero (c->nz). */
static void lng_sum_terms(cg_kernel *k, LLVMValueRef *offs, LLVMValueRef j,
			  LLVMValueRef *v, void *ud)
{
	const row_cx *c = ud;
	cg_fn *f = &k->f;
	LLVMTypeRef it = cg_t_i32(f);
	LLVMValueRef d, h;
	ln_grad_terms(k, c, offs, j, c->mean, &d, &h);
	v[0] = LLVMBuildFMul(f->b, d, d, "");
	v[1] = h;
	v[2] = LLVMBuildFMul(f->b, h, d, "");
	LLVMValueRef h_nz = LLVMBuildFCmp(f->b, LLVMRealUNE, h, cg_f32(f, 0),
					  "");
	set(k, c->nz,
	    LLVMBuildOr(f->b, get(k, it, c->nz),
			LLVMBuildZExt(f->b, h_nz, it, ""), ""));
}

/* layer_norm_grad over one row, as the interpreter: the mean of x in a
 * first pass; d = x - mean, dxh = g gamma and the sums of d^2, dxh and
 * dxh d in a second, which also notes whether any dxh is not zero; then
 * (dxh - m1 - d r m2) r with r = 1 / sd, m1 = sum(dxh) / K and m2 =
 * sum(dxh d) r / K (mean(dxh xhat)), or ln_grad_zero_pass's shortcut for a row
 * of zero dxh (a padding token's row of a masked loss's gradient). The
 * sums in row_sums' fixed order, as layer_norm's. */
static void layer_norm_grad_row(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	row_cx *c = ud;
	cg_fn *f = &k->f;
	LLVMTypeRef it = cg_t_i32(f);
	LLVMValueRef Kf = cg_f32(f, (float)c->K);
	row_sums s;
	row_sums_init(k, &s, 3, c->K, 256);
	s.n = 1;
	row_sums_pass(k, &s, offs, lng_sum_x, c);
	LLVMValueRef mean = LLVMBuildFDiv(f->b, row_sums_total(k, &s, 0, true),
					  Kf, "");
	c->mean = mean;
	c->nz = var(k, it, LLVMConstInt(it, 0, false));
	LLVMValueRef nz = c->nz;
	s.n = 3;
	row_sums_pass(k, &s, offs, lng_sum_terms, c);
	LLVMValueRef sqv = row_sums_total(k, &s, 0, false);
	LLVMValueRef s1v = row_sums_total(k, &s, 1, true),
		     s3v = row_sums_total(k, &s, 2, true);
	LLVMValueRef v = LLVMBuildFAdd(f->b, LLVMBuildFDiv(f->b, sqv, Kf, ""),
				       cg_f32(f, c->eps), "");
	ln_grad_last(k, c, offs, mean, v, get(k, it, nz), s1v, s3v, NULL);
}

/* A group of layer_norm_grad rows (row_group): the passes of
 * layer_norm_grad_row, each over the group's rows, what the sums give
 * (the mean, var + eps, r, m1, m2) computed for all rows at once. */
enum { LNG_MEAN, LNG_V, LNG_S1, LNG_S3, LNG_R, LNG_M1, LNG_M2, LNG_LANES };

typedef struct lng_group {
	row_cx *c;
	row_group *g;
	row_sums s;
	LLVMValueRef lanes[LNG_LANES]; /* lanes_var: each row's */
	LLVMValueRef nz;               /* [ROW_VW x i32]: each row's flag */
} lng_group;

static void lng_group_sum_x(cg_kernel *k, LLVMValueRef *offs, LLVMValueRef i,
			    void *ud)
{
	lng_group *lg = ud;
	lg->s.n = 1;
	row_sums_pass(k, &lg->s, offs, lng_sum_x, lg->c);
	row_group_put(lg->g, &lg->s, 0, i);
}

static void lng_group_sum_terms(cg_kernel *k, LLVMValueRef *offs,
				LLVMValueRef i, void *ud)
{
	lng_group *lg = ud;
	cg_fn *f = &k->f;
	LLVMTypeRef it = cg_t_i32(f);
	lg->c->mean = lane_of(k, lg->lanes[LNG_MEAN], i);
	lg->c->nz = var(k, it, cg_i32(f, 0));
	lg->s.n = 3;
	row_sums_pass(k, &lg->s, offs, lng_sum_terms, lg->c);
	for (int a = 0; a < 3; a++)
		row_group_put(lg->g, &lg->s, a, i);
	LLVMValueRef at = LLVMBuildGEP2(f->b, it, lg->nz, &i, 1, "");
	LLVMBuildStore(f->b, get(k, it, lg->c->nz), at);
}

static void lng_group_last(cg_kernel *k, LLVMValueRef *offs, LLVMValueRef i,
			   void *ud)
{
	lng_group *lg = ud;
	cg_fn *f = &k->f;
	LLVMValueRef v[LNG_LANES];
	for (int a = 0; a < LNG_LANES; a++)
		v[a] = lane_of(k, lg->lanes[a], i);
	LLVMValueRef at = LLVMBuildGEP2(f->b, cg_t_i32(f), lg->nz, &i, 1, "");
	ln_grad_last(k, lg->c, offs, v[LNG_MEAN], v[LNG_V],
		     LLVMBuildLoad2(f->b, cg_t_i32(f), at, ""), v[LNG_S1],
		     v[LNG_S3], &v[LNG_R]);
}

static void layer_norm_grad_group(row_group *g, void *ud)
{
	lng_group *lg = ud;
	cg_fn *f = &g->k->f;
	LLVMTypeRef vt = cg_t_vec(f, ROW_VW);
	LLVMValueRef Kv = cg_const_real(vt, (double)(float)lg->c->K);
	LLVMValueRef v[LNG_LANES];
	row_group_each(g, lng_group_sum_x, lg);
	v[LNG_MEAN] = LLVMBuildFDiv(f->b, row_group_totals(g, 0, true), Kv, "");
	cg_vstore(f, v[LNG_MEAN], lg->lanes[LNG_MEAN], 64);
	row_group_each(g, lng_group_sum_terms, lg);
	v[LNG_V] = LLVMBuildFAdd(f->b,
				 LLVMBuildFDiv(f->b,
					       row_group_totals(g, 0, false),
					       Kv, ""),
				 cg_const_real(vt, lg->c->eps), "");
	v[LNG_S1] = row_group_totals(g, 1, true);
	v[LNG_S3] = row_group_totals(g, 2, true);
	ln_grad_scales(f, lg->c->K, v[LNG_V], v[LNG_S1], v[LNG_S3], &v[LNG_R]);
	for (int a = LNG_V; a < LNG_LANES; a++)
		cg_vstore(f, v[a], lg->lanes[a], 64);
	row_group_each(g, lng_group_last, lg);
}

/* The tree node of the layer_norm_grad add kernel k computes (the root
 * of its operand *a), or UINT32_MAX. */
static uint32_t lng_tree(const cg_kernel *k, uint32_t *a)
{
	if (k->node->op != IR_OP_ADD)
		return UINT32_MAX;
	for (*a = 0; *a < 2; ++*a) {
		const cg_tree_node *tn = &k->tr.n[k->tr.opnd[*a]];
		if (!tn->is_leaf &&
		    k->g->nodes[tn->id].op == IR_OP_LAYER_NORM_GRAD)
			return k->tr.opnd[*a];
	}
	return UINT32_MAX;
}

bool cg_lower_is_lng_kernel(const cg_kernel *k)
{
	uint32_t a;
	return lng_tree(k, &a) != UINT32_MAX;
}

/* layer_norm_grad's kernel, or that of an add computing one
 * (cg_lower_epilogue_plan): the same rows, each element stored plus the
 * add's other operand. */
bool cg_lower_layer_norm_grad(cg_kernel *k)
{
	row_cx c = {0};
	uint32_t a, lng = lng_tree(k, &a);
	const ir_node *nd = k->node;
	c.term = UINT32_MAX;
	c.x = k->tr.opnd[0];
	c.g = k->tr.opnd[2];
	c.gamma = k->in[1];
	if (lng != UINT32_MAX) {
		const cg_tree_node *tn = &k->tr.n[lng];
		const cg_tree_node *ga = &k->tr.n[tn->kid[1]];
		assert(ga->is_leaf);
		nd = &k->g->nodes[tn->id];
		c.x = tn->kid[0];
		c.g = tn->kid[2];
		c.gamma = k->in[ga->param];
		c.term = k->tr.opnd[1 - a];
		c.term_a = 1 - a;
	}
	c.eps = (float)nd->attr.eps;
	cg_nest n;
	row_nest_of(k, &n, &c.K, false, c.x);
	int ax[IR_MAX_RANK];
	for (int d = 0; d < IR_MAX_RANK; d++)
		ax[d] = d;
	cg_nest_add_tree(k, &n, c.g, ax, n.rank);
	if (c.term != UINT32_MAX)
		cg_nest_add_tree(k, &n, c.term, ax, n.rank);
	cg_nest_simplify(&n);
	if (!is_grouped(&n, c.K)) {
		run_rows(k, &n, 4 * c.K, layer_norm_grad_row, &c);
		return true;
	}
	row_group g;
	lng_group lg = {.c = &c, .g = &g};
	row_group_init(k, &g, &n, 3);
	row_sums_init(k, &lg.s, 3, c.K, 256);
	for (int q = 0; q < LNG_LANES; q++)
		lg.lanes[q] = lanes_var(k);
	lg.nz = cg_entry_alloca(&k->f, LLVMArrayType(cg_t_i32(&k->f), ROW_VW),
				64);
	row_groups_run(k, &n, 4 * c.K, &g, layer_norm_grad_group, &lg);
	return true;
}

/* ---- embedding ------------------------------------------------------------------------ */

typedef struct embed_cx {
	int64_t V, D;
} embed_cx;

/* offs: 0 = the output row, 1 = the id. */
static void embedding_row(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	const embed_cx *e = ud;
	cg_fn *f = &k->f;
	LLVMValueRef id = LLVMBuildSExt(f->b,
					cg_lower_load(f, IR_I32, k->in[0],
						      offs[1]),
					cg_t_i64(f), "");
	cg_kernel_fail_index_if(k, id, cg_i64(f, e->V));
	LLVMValueRef row = cg_muli(f, id, e->D);
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, e->D), 1);
	stf(k, ldf(k, k->in[1], cg_add(f, row, j)), k->out,
	    cg_add(f, offs[0], j));
	cg_loop_end(f, &l);
}

bool cg_lower_embedding(cg_kernel *k)
{
	int64_t td[2];
	cg_lower_dims(k->L, cg_kernel_arg_type(k, 1), td);
	embed_cx e = {td[0], td[1]};
	cg_nest n;
	line_nest(&n, cg_lower_numel(k->L, cg_kernel_arg_type(k, 0)), 1, e.D, 1);
	run_rows(k, &n, e.D, embedding_row, &e);
	return true;
}

/* ---- sort ------------------------------------------------------------------------------- */

typedef struct sort_cx {
	int64_t len, stride;
	ir_dtype t;
} sort_cx;

/* a < b in the order of torch.sort: ascending, NaN last; -0 before +0,
 * so that every order of the comparisons gives the same bits. */
static LLVMValueRef sort_less(cg_fn *f, ir_dtype t, LLVMValueRef a,
			      LLVMValueRef b)
{
	if (t == IR_I32)
		return LLVMBuildICmp(f->b, LLVMIntSLT, a, b, "");
	LLVMValueRef lt = LLVMBuildFCmp(f->b, LLVMRealOLT, a, b, "");
	LLVMValueRef a_num = LLVMBuildFCmp(f->b, LLVMRealORD, a, a, "");
	LLVMTypeRef i32 = cg_t_i32(f);
	LLVMValueRef ab = LLVMBuildBitCast(f->b, a, i32, "");
	LLVMValueRef bb = LLVMBuildBitCast(f->b, b, i32, "");
	LLVMValueRef zero = LLVMConstInt(i32, 0, 0);
	LLVMValueRef signs = LLVMBuildAnd(f->b,
					  LLVMBuildICmp(f->b, LLVMIntSLT, ab,
							zero, ""),
					  LLVMBuildICmp(f->b, LLVMIntSGE, bb,
							zero, ""),
					  "");
	LLVMValueRef zeros = LLVMBuildAnd(f->b,
					  LLVMBuildFCmp(f->b, LLVMRealOEQ, a, b,
							""),
					  signs, "");
	return LLVMBuildAnd(f->b, a_num,
			    LLVMBuildOr(f->b,
					LLVMBuildOr(f->b, lt, is_nan(f, b), ""),
					zeros, ""),
			    "");
}

/* Element i of the line at base. */
static LLVMValueRef sort_at(cg_kernel *k, const sort_cx *s, LLVMValueRef base,
			    LLVMValueRef i)
{
	return cg_add(&k->f, base, cg_muli(&k->f, i, s->stride));
}

/* A line being heapsorted: its len elements, of type t, are read and
 * written by load and store; less orders them (strictly, totally). */
typedef struct heap_cx heap_cx;
struct heap_cx {
	cg_kernel *k;
	const sort_cx *s;
	LLVMTypeRef t;
	LLVMValueRef line, x; /* sort: out's line; sort_grad: indices, x's */
	LLVMValueRef (*load)(const heap_cx *h, LLVMValueRef i);
	void (*store)(const heap_cx *h, LLVMValueRef v, LLVMValueRef i);
	LLVMValueRef (*less)(const heap_cx *h, LLVMValueRef a, LLVMValueRef b);
};

/* Heapsort in place: O(len log len), no scratch. Steps 0 .. len/2 - 1
 * build the heap (sifting down roots len/2 - 1 .. 0 over the whole
 * line); the len - 1 steps after move the root to the line's end and
 * sift the new root down over what is left. One sift loop serves both. */
static void heapsort_emit(const heap_cx *h)
{
	cg_kernel *k = h->k;
	cg_fn *f = &k->f;
	int64_t len = h->s->len, half = len / 2;
	LLVMTypeRef i64 = cg_t_i64(f);
	if (len < 2)
		return;
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0),
				       cg_i64(f, half + len - 1), 1);
	LLVMValueRef building = LLVMBuildICmp(f->b, LLVMIntSLT, i,
					      cg_i64(f, half), "");
	LLVMValueRef root = LLVMBuildSelect(f->b, building,
					    LLVMBuildSub(f->b,
							 cg_i64(f, half - 1), i,
							 ""),
					    cg_i64(f, 0), "");
	LLVMValueRef end = LLVMBuildSelect(f->b, building, cg_i64(f, len),
					   LLVMBuildSub(f->b,
							cg_i64(f, half + len - 1),
							i, ""),
					   "");
	LLVMBasicBlockRef join = cg_if_begin(f,
					     LLVMBuildNot(f->b, building, ""));
	LLVMValueRef top = h->load(h, cg_i64(f, 0));
	h->store(h, h->load(h, end), cg_i64(f, 0));
	h->store(h, top, end);
	cg_if_end(f, join);
	LLVMValueRef v = h->load(h, root);
	LLVMValueRef pos = var(k, i64, root);
	LLVMBasicBlockRef head = cg_block(f, "sift"),
			  down = cg_block(f, "down"), move = cg_block(f, "move"),
			  done = cg_block(f, "place");
	LLVMBuildBr(f->b, head);
	LLVMPositionBuilderAtEnd(f->b, head);
	LLVMValueRef p = get(k, i64, pos);
	LLVMValueRef c = LLVMBuildAdd(f->b, cg_muli(f, p, 2), cg_i64(f, 1), "");
	LLVMBuildCondBr(f->b, LLVMBuildICmp(f->b, LLVMIntSLT, c, end, ""), down,
			done);
	LLVMPositionBuilderAtEnd(f->b, down);
	LLVMValueRef c2 = LLVMBuildAdd(f->b, c, cg_i64(f, 1), "");
	LLVMValueRef has2 = LLVMBuildICmp(f->b, LLVMIntSLT, c2, end, "");
	LLVMValueRef c2s = LLVMBuildSelect(f->b, has2, c2, c, "");
	LLVMValueRef a = h->load(h, c), b = h->load(h, c2s);
	LLVMValueRef right = LLVMBuildAnd(f->b, has2, h->less(h, a, b), "");
	LLVMValueRef pick = LLVMBuildSelect(f->b, right, c2s, c, "");
	LLVMValueRef big = LLVMBuildSelect(f->b, right, b, a, "");
	LLVMBuildCondBr(f->b, h->less(h, v, big), move, done);
	LLVMPositionBuilderAtEnd(f->b, move);
	h->store(h, big, p);
	set(k, pos, pick);
	LLVMBuildBr(f->b, head);
	LLVMPositionBuilderAtEnd(f->b, done);
	h->store(h, v, get(k, i64, pos));
	cg_loop_end(f, &l);
}

static LLVMValueRef out_load(const heap_cx *h, LLVMValueRef i)
{
	return cg_lower_load(&h->k->f, h->s->t, h->k->out,
			     sort_at(h->k, h->s, h->line, i));
}

static void out_store(const heap_cx *h, LLVMValueRef v, LLVMValueRef i)
{
	cg_lower_store(&h->k->f, h->s->t, v, h->k->out,
		       sort_at(h->k, h->s, h->line, i));
}

static LLVMValueRef value_less(const heap_cx *h, LLVMValueRef a, LLVMValueRef b)
{
	return sort_less(&h->k->f, h->s->t, a, b);
}

/* Sorts the line at offs[0] after copying it from offs[1]. */
static void sort_line(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	const sort_cx *s = ud;
	cg_fn *f = &k->f;
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, s->len),
				       1);
	cg_lower_store(f, s->t,
		       cg_lower_load(f, s->t, k->in[0],
				     sort_at(k, s, offs[1], j)),
		       k->out, sort_at(k, s, offs[0], j));
	cg_loop_end(f, &l);
	heap_cx h = {k,         s,         cg_lower_elem_type(f, s->t),
		     offs[0],   NULL,      out_load,
		     out_store, value_less};
	heapsort_emit(&h);
}

/* sort_grad's heap holds the line's indices (i64), ordered by x's
 * elements there, ties by index: a stable sort's permutation. */
static LLVMValueRef index_load(const heap_cx *h, LLVMValueRef i)
{
	cg_fn *f = &h->k->f;
	return LLVMBuildLoad2(f->b, cg_t_i64(f),
			      LLVMBuildGEP2(f->b, cg_t_i64(f), h->line, &i, 1,
					    ""),
			      "");
}

static void index_store(const heap_cx *h, LLVMValueRef v, LLVMValueRef i)
{
	cg_fn *f = &h->k->f;
	LLVMBuildStore(f->b, v,
		       LLVMBuildGEP2(f->b, cg_t_i64(f), h->line, &i, 1, ""));
}

static LLVMValueRef index_less(const heap_cx *h, LLVMValueRef a, LLVMValueRef b)
{
	cg_fn *f = &h->k->f;
	LLVMValueRef xa = cg_lower_load(f, IR_F32, h->k->in[0],
					sort_at(h->k, h->s, h->x, a));
	LLVMValueRef xb = cg_lower_load(f, IR_F32, h->k->in[0],
					sort_at(h->k, h->s, h->x, b));
	LLVMValueRef tie = LLVMBuildAnd(
		f->b, LLVMBuildNot(f->b, sort_less(f, IR_F32, xb, xa), ""),
		LLVMBuildICmp(f->b, LLVMIntSLT, a, b, ""), "");
	return LLVMBuildOr(f->b, sort_less(f, IR_F32, xa, xb), tie, "");
}

/* Lines up to this long keep their indices on the stack (64 KiB); longer
 * ones in a heap block of their own. */
#define SORT_GRAD_STACK 8192

/* dx at offs[0]: g's element j goes where x's element that a stable sort
 * places at j came from (x and g at offs[1], the same shape as out). */
static void sort_grad_line(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	const sort_cx *s = ud;
	cg_fn *f = &k->f;
	LLVMTypeRef i64 = cg_t_i64(f);
	LLVMValueRef idx;
	bool on_heap = s->len > SORT_GRAD_STACK;
	if (on_heap) {
		LLVMTypeRef params[2] = {i64, i64};
		LLVMValueRef args[2] = {cg_i64(f, 64),
					cg_i64(f, (s->len * 8 + 63) / 64 * 64)};
		idx = cg_call_extern(f, "aligned_alloc",
				     LLVMFunctionType(cg_t_ptr(f), params, 2, 0),
				     args, 2);
		LLVMBasicBlockRef join = cg_if_begin(f,
						     LLVMBuildIsNull(f->b, idx,
								     ""));
		cg_intrinsic(f, "llvm.trap", NULL, 0, NULL, 0);
		cg_if_end(f, join);
	} else {
		idx = cg_entry_alloca(f, LLVMArrayType(i64, (unsigned)s->len),
				      64);
	}
	heap_cx h = {k,       s,          i64,         idx,
		     offs[1], index_load, index_store, index_less};
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, s->len),
				       1);
	index_store(&h, j, j);
	cg_loop_end(f, &l);
	heapsort_emit(&h);
	j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, s->len), 1);
	LLVMValueRef g = cg_lower_load(f, IR_F32, k->in[1],
				       sort_at(k, s, offs[1], j));
	cg_lower_store(f, IR_F32, g, k->out,
		       sort_at(k, s, offs[0], index_load(&h, j)));
	cg_loop_end(f, &l);
	if (on_heap) {
		LLVMTypeRef fp = cg_t_ptr(f);
		cg_call_extern(f, "free",
			       LLVMFunctionType(LLVMVoidTypeInContext(f->ctx),
						&fp, 1, 0),
			       &idx, 1);
	}
}

bool cg_lower_sort(cg_kernel *k)
{
	int64_t xd[IR_MAX_RANK], outer, len, inner;
	int r = cg_lower_dims(k->L, cg_kernel_arg_type(k, 0), xd);
	split_axis(xd, r, k->node->attr.axis, &outer, &len, &inner);
	sort_cx s = {len, inner, k->node->type.dtype};
	cg_nest n;
	line_nest(&n, outer, inner, len, len);
	int64_t lg = 1;
	while (lg < 62 && ((int64_t)1 << lg) < len)
		lg++;
	run_rows(k, &n, 3 * len * lg, sort_line, &s);
	return true;
}

bool cg_lower_sort_grad(cg_kernel *k)
{
	int64_t xd[IR_MAX_RANK], outer, len, inner;
	int r = cg_lower_dims(k->L, cg_kernel_arg_type(k, 0), xd);
	split_axis(xd, r, k->node->attr.axis, &outer, &len, &inner);
	sort_cx s = {len, inner, IR_F32};
	cg_nest n;
	line_nest(&n, outer, inner, len, len);
	int64_t lg = 1;
	while (lg < 62 && ((int64_t)1 << lg) < len)
		lg++;
	run_rows(k, &n, 3 * len * lg, sort_grad_line, &s);
	return true;
}

/* ---- losses ------------------------------------------------------------------------------- */

/* mean((pred - target)^2); NaN when there are no elements. */
bool cg_lower_mse_loss(cg_kernel *k)
{
	cg_fn *f = &k->f;
	int64_t n = cg_lower_numel(k->L, cg_kernel_arg_type(k, 0));
	LLVMTypeRef ft = cg_t_f32(f);
	LLVMValueRef sum = var(k, ft, cg_f32(f, 0));
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, n), 1);
	LLVMValueRef d = LLVMBuildFSub(f->b, ldf(k, k->in[0], i),
				       ldf(k, k->in[1], i), "");
	LLVMValueRef d2 = cg_fast(LLVMBuildFMul(f->b, d, d, ""), true);
	set(k, sum, fadd_r(f, get(k, ft, sum), d2));
	cg_loop_end(f, &l);
	LLVMValueRef r = n ? LLVMBuildFDiv(f->b, get(k, ft, sum),
					   cg_f32(f, (float)n), "")
			   : cg_f32(f, NAN);
	stf(k, r, k->out, cg_i64(f, 0));
	k->extent = 1;
	k->work = n;
	return true;
}

/* The row's label (operand 1 at off) as an i64; outside [0, K) a
 * run-time index error. */
static LLVMValueRef row_label(cg_kernel *k, const row_cx *c, LLVMValueRef off)
{
	cg_fn *f = &k->f;
	LLVMValueRef y = LLVMBuildSExt(f->b,
				       cg_lower_load(f, IR_I32, k->in[1], off),
				       cg_t_i64(f), "");
	cg_kernel_fail_index_if(k, y, cg_i64(f, c->K));
	return y;
}

/* The largest of the row's K logits (operand 0, through its tree). */
static LLVMValueRef row_max(cg_kernel *k, const row_cx *c, LLVMValueRef *offs)
{
	cg_fn *f = &k->f;
	LLVMTypeRef ft = cg_t_f32(f);
	LLVMValueRef mx = var(k, ft, cg_f32(f, -INFINITY));
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, c->K), 1);
	set(k, mx, fmax_r(f, get(k, ft, mx), cg_kernel_operand(k, 0, offs, j)));
	cg_loop_end(f, &l);
	return get(k, ft, mx);
}

/* A nest over the logits' leading dims (ld, rank r): array 0 the output,
 * one element per row or (out_rows) a row of K, then n_dense arrays
 * over those dims, dense (labels, g), then the logits' arrays (their
 * tree when fused), whose last axis the row's inner index walks. */
static void label_nest(cg_kernel *k, cg_nest *n, const int64_t *ld, int r,
		       int n_dense, bool out_rows)
{
	int ax[IR_MAX_RANK];
	memset(n, 0, sizeof *n);
	n->rank = r - 1;
	n->n_arr = 1 + n_dense;
	memcpy(n->dims, ld, IR_MAX_RANK * sizeof *ld);
	cg_lower_strides(ld, out_rows ? r : r - 1, n->strides[0]);
	for (int a = 1; a <= n_dense; a++)
		cg_lower_strides(ld, r - 1, n->strides[a]);
	for (int d = 0; d < IR_MAX_RANK; d++)
		ax[d] = d;
	cg_nest_add_operand(k, n, 0, ax, r - 1);
}

/* -log_softmax(logits)[label] of one row; offs: 0 = out, 1 = logits row,
 * 2 = label. */
static void cross_entropy_row(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	const row_cx *c = ud;
	cg_fn *f = &k->f;
	LLVMValueRef y = row_label(k, c, offs[1]);
	LLVMValueRef m = row_max(k, c, offs);
	LLVMValueRef sum = exp_sum(k, c->K, offs, m, NULL, NULL);
	LLVMValueRef xy = cg_kernel_operand(k, 0, offs, y);
	LLVMValueRef ls = LLVMBuildFSub(f->b, LLVMBuildFSub(f->b, xy, m, ""),
					cg_lower_fcall(f, "llvm.log", sum, NULL),
					"");
	stf(k, LLVMBuildFNeg(f->b, ls, ""), k->out, offs[0]);
}

bool cg_lower_cross_entropy(cg_kernel *k)
{
	int64_t ld[IR_MAX_RANK];
	int r = cg_lower_dims(k->L, cg_kernel_arg_type(k, 0), ld);
	row_cx c = {0};
	c.K = ld[r - 1];
	cg_nest n;
	label_nest(k, &n, ld, r, 1, false);
	run_rows(k, &n, 2 * c.K, cross_entropy_row, &c);
	return true;
}

/* The gradient pass of a row: out[j] = (e_j / s - [j == y]) g, the
 * exps e at e0 of the output, the row at out0. The loop writes (e_j /
 * s) g at every column (e_j / s - 0 is e_j / s), the label's element
 * written after it: a one-hot select in the loop compared i64 column
 * indices, which kept LLVM to vectors of 8. A row whose g is 0 (a
 * masked token: most of a padded batch) and whose sum is not NaN (every
 * e finite) is copysign(0, g) but at the label, which is computed as in
 * the full pass: the same bits without the divisions. */
static void grad_pass(cg_kernel *k, int64_t K, LLVMValueRef e0,
		      LLVMValueRef out0, LLVMValueRef s, LLVMValueRef y,
		      LLVMValueRef gr)
{
	cg_fn *f = &k->f;
	LLVMBasicBlockRef zero = cg_block(f, "ce.zero"),
			  full = cg_block(f, "ce.full");
	LLVMBasicBlockRef done = cg_block(f, "ce.done");
	LLVMValueRef is_zero = LLVMBuildAnd(f->b,
					    LLVMBuildFCmp(f->b, LLVMRealOEQ, gr,
							  cg_f32(f, 0), ""),
					    LLVMBuildFCmp(f->b, LLVMRealORD, s,
							  s, ""),
					    "");
	LLVMBuildCondBr(f->b, is_zero, zero, full);
	cg_loop l;
	LLVMPositionBuilderAtEnd(f->b, zero);
	LLVMValueRef py = LLVMBuildFDiv(f->b, ldf(k, k->out, cg_add(f, e0, y)),
					s, "");
	LLVMValueRef dy = LLVMBuildFMul(f->b,
					LLVMBuildFSub(f->b, py, cg_f32(f, 1), ""),
					gr,
					""); /* read before e0 may be written */
	LLVMValueRef z = cg_lower_fcall(f, "llvm.copysign", cg_f32(f, 0), gr);
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, K), 1);
	stf(k, z, k->out, cg_add(f, out0, j));
	cg_loop_end(f, &l);
	stf(k, dy, k->out, cg_add(f, out0, y));
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, full);
	/* e_y / s - 1 first: e0 may be out0 */
	LLVMValueRef dy_full = LLVMBuildFMul(
		f->b,
		LLVMBuildFSub(f->b,
			      LLVMBuildFDiv(f->b,
					    ldf(k, k->out, cg_add(f, e0, y)), s,
					    ""),
			      cg_f32(f, 1), ""),
		gr, "");
	j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, K), 1);
	LLVMValueRef p = LLVMBuildFDiv(f->b, ldf(k, k->out, cg_add(f, e0, j)),
				       s, "");
	stf(k, LLVMBuildFMul(f->b, p, gr, ""), k->out, cg_add(f, out0, j));
	cg_loop_end(f, &l);
	stf(k, dy_full, k->out, cg_add(f, out0, y));
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, done);
}

/* (softmax(row) - one_hot(label)) * g of one row, softmax_row's passes:
 * the max, then the exps (stored in the output) and their sum, then each
 * e / sum, less 1 at the label, times g. offs: 0 = out row, 1 = label,
 * 2 = g, then the logits row. */
static void cross_entropy_grad_row(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	const row_cx *c = ud;
	LLVMValueRef y = row_label(k, c, offs[1]);
	LLVMValueRef gr = ldf(k, k->in[2], offs[2]);
	LLVMValueRef m = row_max(k, c, offs);
	LLVMValueRef sum = exp_sum(k, c->K, offs, m, NULL, offs[0]);
	grad_pass(k, c->K, offs[0], offs[0], sum, y, gr);
}

bool cg_lower_cross_entropy_grad(cg_kernel *k)
{
	int64_t ld[IR_MAX_RANK];
	int r = cg_lower_dims(k->L, cg_kernel_arg_type(k, 0), ld);
	row_cx c = {0};
	c.K = ld[r - 1];
	cg_nest n;
	label_nest(k, &n, ld, r, 2, true);
	run_rows(k, &n, 3 * c.K, cross_entropy_grad_row, &c);
	return true;
}

/* cross_entropy_with_grad: cross_entropy_grad_row's passes, the exps
 * kept in the row's part-1 row (ex, `part` floats after the gradient's
 * row), then the row's loss as cross_entropy_row computes it from the
 * same max and sum, over the exp of column 0. offs as for
 * cross_entropy_grad. */
typedef struct ce_cx {
	row_cx r;
	int64_t part; /* elements in [0] of the result: rows * K */
	/* Leaving dead rows out (cg_lower_row_skip_rows, n_valid >= 0):
	 * T steps a batch element, and whether row_skip is set (an i1). */
	int n_valid;
	int64_t T;
	LLVMValueRef on;
} ce_cx;

/* Whether the row (its index offs[1], the labels' offset) is dead and
 * row_skip set; then writes its gradient's row as the full pass writes
 * a row whose g is 0 and whose logits are +0 (a dead row of a product
 * that leaves them out): copysign(0, g), but (1 / K - 1) g at the
 * label; its loss, which no use reads, +0. */
static LLVMValueRef ce_dead_row(cg_kernel *k, const ce_cx *c, LLVMValueRef *offs,
				LLVMValueRef y, LLVMValueRef gr)
{
	cg_fn *f = &k->f;
	LLVMValueRef b = LLVMBuildUDiv(f->b, offs[1], cg_i64(f, c->T), "");
	LLVMValueRef t = LLVMBuildURem(f->b, offs[1], cg_i64(f, c->T), "");
	LLVMValueRef is_dead = LLVMBuildAnd(f->b, c->on,
					    LLVMBuildICmp(f->b, LLVMIntSGE, t,
							  row_len(k, k->id,
								  c->n_valid, b,
								  c->T),
							  ""),
					    "");
	LLVMBasicBlockRef join = cg_if_begin(f, is_dead);
	LLVMValueRef z = cg_lower_fcall(f, "llvm.copysign", cg_f32(f, 0), gr);
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, c->r.K),
				       1);
	stf(k, z, k->out, cg_add(f, offs[0], j));
	cg_loop_end(f, &l);
	LLVMValueRef py = LLVMBuildFDiv(f->b, cg_f32(f, 1),
					cg_f32(f, (float)c->r.K), "");
	stf(k,
	    LLVMBuildFMul(f->b, LLVMBuildFSub(f->b, py, cg_f32(f, 1), ""), gr,
			  ""),
	    k->out, cg_add(f, offs[0], y));
	stf(k, cg_f32(f, 0), k->out, cg_add(f, offs[0], cg_i64(f, c->part)));
	cg_if_end(f, join);
	return is_dead;
}

static void ce_with_grad_row(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	const ce_cx *c = ud;
	cg_fn *f = &k->f;
	LLVMValueRef y = row_label(k, &c->r, offs[1]);
	LLVMBasicBlockRef live = NULL, done = NULL;
	if (c->n_valid >= 0) {
		LLVMValueRef is_dead = ce_dead_row(k, c, offs, y,
						   ldf(k, k->in[2], offs[2]));
		live = cg_block(f, "ce.live");
		done = cg_block(f, "ce.row_done");
		LLVMBuildCondBr(f->b, is_dead, done, live);
		LLVMPositionBuilderAtEnd(f->b, live);
	}
	LLVMValueRef gr = ldf(k, k->in[2], offs[2]);
	LLVMValueRef ex = cg_add(f, offs[0], cg_i64(f, c->part));
	LLVMValueRef m = row_max(k, &c->r, offs);
	LLVMValueRef s = exp_sum(k, c->r.K, offs, m, NULL, ex);
	grad_pass(k, c->r.K, ex, offs[0], s, y, gr);
	LLVMValueRef xy = cg_kernel_operand(k, 0, offs, y);
	LLVMValueRef ls = LLVMBuildFSub(f->b, LLVMBuildFSub(f->b, xy, m, ""),
					cg_lower_fcall(f, "llvm.log", s, NULL),
					"");
	stf(k, LLVMBuildFNeg(f->b, ls, ""), k->out, ex);
	if (done) {
		LLVMBuildBr(f->b, done);
		LLVMPositionBuilderAtEnd(f->b, done);
	}
}

bool cg_lower_cross_entropy_with_grad(cg_kernel *k)
{
	int64_t ld[IR_MAX_RANK];
	int r = cg_lower_dims(k->L, cg_kernel_arg_type(k, 0), ld);
	ce_cx c = {0};
	c.r.K = ld[r - 1];
	c.part = cg_lower_numel(k->L, cg_kernel_arg_type(k, 0));
	ir_id valid[2];
	c.n_valid = cg_lower_row_skip_rows(k->L, k->g, k->id, &k->tr, valid);
	if (c.n_valid >= 0) {
		c.T = ld[1];
		c.on = row_skip_on(k);
	}
	cg_nest n;
	label_nest(k, &n, ld, r, 2, true);
	run_rows(k, &n, 3 * c.r.K, ce_with_grad_row, &c);
	return true;
}
