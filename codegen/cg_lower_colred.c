/*
 * cg_lower_colred.c - sum, mean and max over leading axes (a bias's
 * gradient, sum(dy, 0) of (640, 32) into (32,); a sum over (B, T) of
 * (B, T, D)) with the kept inner axis in the lanes of vectors.
 *
 * Each output element is a chain over its rows, in the interpreter's
 * order: out[j] = ((init + x[0,j]) + x[1,j]) + ... The general kernel
 * (cg_lower_reduce) walks that order too, but through memory: a load, an
 * add and a store of out per element, each row's add waiting on the last
 * row's store (about 10 cycles a row). Here each lane of a vector carries
 * the chain of one output column, so a chunk of up to COLRED_VECS vectors
 * of columns keeps its accumulators in registers across all the rows (one
 * dependent vector add a row per vector) and stores them once. No chain
 * is regrouped: every result is bit for bit the interpreter's.
 *
 * The reduction's simplified nest has the kept inner axis last (the
 * columns, C of them), reduced axes and perhaps kept outer axes before
 * it. The kernel's range [lo, hi) is over the output elements, flat: an
 * outer index b (the kept outer axes, row-major) times C plus a column.
 * Per outer index and chunk of columns: for every row (the reduced axes
 * in row-major order) the operand's values (its fused tree, per element,
 * as every kernel computes it) go into a one-row tile on the stack, in a
 * loop LLVM vectorizes along the columns, and the tile's vectors are
 * added into the accumulators. A chunk may start and end anywhere (a
 * thread's range splits columns at odd places): lanes past its end add
 * stale values and are never stored. A column's result does not depend
 * on its chunk, so any split over threads gives the same results.
 */
#include "cg_lower.h"

#include <string.h>

/* Accumulator vectors of a chunk: 4 x 16 floats, 64 columns. */
#define COLRED_VECS 4

/* One column reduction being generated. */
typedef struct colred {
	cg_kernel *k;
	const cg_nest *n; /* array 0 the output, then the leaves */
	ir_op op;
	ir_dtype t;
	unsigned vw, nv;  /* lanes; accumulator vectors (nv * vw: the tile) */
	int64_t C, count; /* columns (the last nest axis); rows per column */
	LLVMTypeRef et, vt;    /* element and <vw x element> */
	LLVMValueRef tile;     /* nv * vw elements on the stack */
	LLVMValueRef acc;      /* nv vectors of vt, on the stack (SROA'd) */
	LLVMValueRef base[CG_NEST_ARRS]; /* each array at the outer index */
	LLVMValueRef c0, nc;   /* the chunk's first column and its width */
} colred;

bool cg_lower_colred_fits(const cg_kernel *k, const cg_nest *n)
{
	ir_dtype t = k->node->type.dtype;
	int last = n->rank - 1;
	bool has_reduced = false;
	for (int d = 0; d < last; d++)
		has_reduced |= n->strides[0][d] == 0 && n->dims[d] > 1;
	return n->rank >= 2 && has_reduced && n->dims[last] > 0 &&
	       n->strides[0][last] == 1 &&
	       (t == IR_F32 || (t == IR_I32 && k->node->op != IR_OP_MEAN));
}

/* Element `v` of the accumulator array. */
static LLVMValueRef acc_at(colred *g, unsigned v)
{
	cg_fn *f = &g->k->f;
	LLVMValueRef idx[2] = {cg_i64(f, 0), cg_i64(f, v)};
	LLVMTypeRef at = LLVMArrayType2(g->vt, g->nv);
	return LLVMBuildInBoundsGEP2(f->b, at, g->acc, idx, 2, "");
}

/* offs[a] = each array's offset at the chunk's row `row` (its offsets
 * without the columns), column c0 + j. */
static void point(colred *g, const LLVMValueRef *row, LLVMValueRef j,
		  LLVMValueRef *offs)
{
	cg_fn *f = &g->k->f;
	const cg_nest *n = g->n;
	LLVMValueRef col = cg_add(f, g->c0, j);
	for (int a = 0; a < n->n_arr; a++)
		offs[a] = cg_add(f, row[a], cg_muli(f, col, n->strides[a][n->rank - 1]));
}

/* One row: the operand's values at the chunk's columns into the tile (a
 * loop kept for LLVM to vectorize), then the tile's vectors added into
 * the accumulators. */
static void add_row(colred *g, const LLVMValueRef *row)
{
	cg_fn *f = &g->k->f;
	cg_loop lj;
	LLVMValueRef j = cg_loop_begin(f, &lj, cg_i64(f, 0), g->nc, 1);
	LLVMValueRef offs[CG_NEST_ARRS];
	point(g, row, j, offs);
	cg_lower_store(f, g->t, cg_kernel_operand(g->k, 0, offs, NULL), g->tile, j);
	cg_loop_end(f, &lj);
	cg_lower_loop_keep(f, &lj);
	for (unsigned v = 0; v < g->nv; v++) {
		LLVMValueRef x = LLVMBuildLoad2(f->b, g->vt,
						cg_at(f, g->tile, cg_i64(f, (int64_t)v * g->vw)), "");
		LLVMSetAlignment(x, 64);
		LLVMValueRef p = acc_at(g, v);
		LLVMValueRef o = LLVMBuildLoad2(f->b, g->vt, p, "");
		LLVMBuildStore(f->b, cg_lower_red_step(f, g->op, g->t, o, x), p);
	}
}

/* The rows: the reduced axes before the columns, nested in order from
 * axis d, row[] each array's offset so far. */
static void add_rows(colred *g, int d, const LLVMValueRef *row)
{
	cg_fn *f = &g->k->f;
	const cg_nest *n = g->n;
	if (d == n->rank - 1) {
		add_row(g, row);
		return;
	}
	if (n->strides[0][d] != 0) { /* a kept outer axis: in base[] */
		add_rows(g, d + 1, row);
		return;
	}
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, n->dims[d]), 1);
	LLVMValueRef next[CG_NEST_ARRS];
	for (int a = 0; a < n->n_arr; a++)
		next[a] = cg_add(f, row[a], cg_muli(f, i, n->strides[a][d]));
	add_rows(g, d + 1, next);
	cg_loop_end(f, &l);
}

/* Lanes [0, n) of a <vw x i1> mask, n an i64 value (any sign). */
static LLVMValueRef lanes_below(colred *g, LLVMValueRef n)
{
	cg_fn *f = &g->k->f;
	LLVMTypeRef it = LLVMVectorType(cg_t_i64(f), g->vw);
	LLVMValueRef iota[16];
	for (unsigned i = 0; i < g->vw; i++)
		iota[i] = cg_i64(f, i);
	LLVMValueRef s = LLVMBuildInsertElement(f->b, LLVMGetPoison(it), n,
						cg_i32(f, 0), "");
	s = LLVMBuildShuffleVector(f->b, s, LLVMGetPoison(it),
				   LLVMConstNull(LLVMVectorType(cg_t_i32(f), g->vw)), "");
	return LLVMBuildICmp(f->b, LLVMIntSLT, LLVMConstVector(iota, g->vw), s, "");
}

/* The chunk's columns reduced over every row, then stored (means divided
 * by the row count) to out[ob + c0 .. ob + c0 + nc). */
static void reduce_chunk(colred *g, LLVMValueRef ob)
{
	cg_fn *f = &g->k->f;
	for (unsigned v = 0; v < g->nv; v++)
		LLVMBuildStore(f->b, cg_lower_red_init(g->op, g->t, g->vt), acc_at(g, v));
	add_rows(g, 0, g->base);
	LLVMTypeRef tys[2] = {g->vt, cg_t_ptr(f)};
	for (unsigned v = 0; v < g->nv; v++) {
		LLVMValueRef res = LLVMBuildLoad2(f->b, g->vt, acc_at(g, v), "");
		if (g->op == IR_OP_MEAN)
			res = LLVMBuildFDiv(f->b, res,
					    cg_const_real(g->vt, (double)(float)g->count), "");
		int64_t first = (int64_t)v * g->vw;
		LLVMValueRef at = cg_at(f, g->k->out, cg_addi(f, cg_add(f, ob, g->c0), first));
		LLVMValueRef left = LLVMBuildSub(f->b, g->nc, cg_i64(f, first), "");
		LLVMValueRef args[4] = {res, at, cg_i32(f, 4), lanes_below(g, left)};
		cg_intrinsic(f, "llvm.masked.store", tys, 2, args, 4);
	}
}

/* base[a] = each array's offset at outer index b: b's digits over the
 * kept outer axes, innermost last. */
static void outer_bases(colred *g, LLVMValueRef b)
{
	cg_fn *f = &g->k->f;
	const cg_nest *n = g->n;
	for (int a = 0; a < n->n_arr; a++)
		g->base[a] = cg_i64(f, 0);
	for (int d = n->rank - 2; d >= 0; d--) {
		if (n->strides[0][d] == 0)
			continue;
		LLVMValueRef dim = cg_i64(f, n->dims[d]);
		LLVMValueRef i = LLVMBuildURem(f->b, b, dim, "");
		b = LLVMBuildUDiv(f->b, b, dim, "");
		for (int a = 0; a < n->n_arr; a++)
			g->base[a] = cg_add(f, g->base[a], cg_muli(f, i, n->strides[a][d]));
	}
}

static LLVMValueRef max64(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef lt = LLVMBuildICmp(f->b, LLVMIntSLT, a, b, "");
	return LLVMBuildSelect(f->b, lt, b, a, "");
}

/* The outer index b's columns within [lo, hi), chunk by chunk. */
static void reduce_outer(colred *g, LLVMValueRef b)
{
	cg_fn *f = &g->k->f;
	cg_kernel *k = g->k;
	LLVMValueRef ob = cg_muli(f, b, g->C);
	LLVMValueRef cs = max64(f, LLVMBuildSub(f->b, k->lo, ob, ""), cg_i64(f, 0));
	LLVMValueRef ce = cg_min(f, LLVMBuildSub(f->b, k->hi, ob, ""), cg_i64(f, g->C));
	outer_bases(g, b);
	int64_t w = (int64_t)g->nv * g->vw;
	cg_loop l;
	g->c0 = cg_loop_begin(f, &l, cs, ce, w);
	g->nc = cg_min(f, cg_i64(f, w), LLVMBuildSub(f->b, ce, g->c0, ""));
	reduce_chunk(g, ob);
	cg_loop_end(f, &l);
}

void cg_lower_reduce_cols(cg_kernel *k, const cg_nest *n)
{
	cg_fn *f = &k->f;
	colred g = {0};
	g.k = k;
	g.n = n;
	g.op = k->node->op;
	g.t = k->node->type.dtype;
	g.vw = k->L->vw;
	g.C = n->dims[n->rank - 1];
	int64_t nv = (g.C + g.vw - 1) / g.vw, outer = 1;
	g.nv = nv < COLRED_VECS ? (unsigned)nv : COLRED_VECS;
	g.count = 1;
	for (int d = 0; d < n->rank - 1; d++) {
		bool red = n->strides[0][d] == 0;
		g.count *= red ? n->dims[d] : 1;
		outer *= red ? 1 : n->dims[d];
	}
	g.et = cg_lower_elem_type(f, g.t);
	g.vt = LLVMVectorType(g.et, g.vw);
	g.tile = cg_lower_entry_alloca(f, LLVMArrayType2(g.et, (uint64_t)g.nv * g.vw),
				       "tile");
	g.acc = cg_lower_entry_alloca(f, LLVMArrayType2(g.vt, g.nv), "acc");
	/* Lanes past a chunk's end read stale values, never stored; zeroed
	 * once, they are never uninitialized either. */
	LLVMBuildMemSet(f->b, g.tile, LLVMConstInt(LLVMInt8TypeInContext(f->ctx), 0, 0),
			cg_i64(f, (int64_t)g.nv * g.vw * 4), 64);
	k->extent = outer * g.C;
	k->work = k->extent * g.count;
	LLVMValueRef b_lo = LLVMBuildUDiv(f->b, k->lo, cg_i64(f, g.C), "");
	LLVMValueRef b_hi = LLVMBuildUDiv(f->b, cg_addi(f, k->hi, g.C - 1),
					  cg_i64(f, g.C), "");
	cg_loop l;
	LLVMValueRef b = cg_loop_begin(f, &l, b_lo, b_hi, 1);
	reduce_outer(&g, b);
	cg_loop_end(f, &l);
}
