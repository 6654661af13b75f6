/*
 * cg_lower_colred.c - sum, mean and max over leading axes (a bias's
 * gradient, sum(dy, 0) of (640, 32) into (32,); a sum over (B, T) of
 * (B, T, D)) with the kept inner axis in the lanes of vectors.
 *
 * Each output element is a chain over its rows, in the interpreter's
 * order: out[j] = ((init + x[0,j]) + x[1,j]) + ... The general kernel
 * (cg_lower_reduce) walks that order through memory: a load, an add and
 * a store of out per element, each row's add waiting on the last row's
 * store (about 10 cycles a row when a row is a vector or two). Here each
 * lane of a vector carries the chain of one output column, so up to 64
 * columns keep their accumulators in registers across all the rows (one
 * dependent vector add a row per vector) and are stored once. No chain
 * is regrouped: every result is bit for bit the interpreter's.
 *
 * The reduction's simplified nest has the kept inner axis last (the
 * columns, C of them, at most 64), reduced axes and perhaps kept outer
 * axes before it. The kernel's range [lo, hi) is over the output
 * elements, flat: an outer index b (the kept outer axes, row-major)
 * times C plus a column. A row's values are the operand's (its fused
 * tree, computed per element as every kernel computes it), one per lane,
 * put together into vectors; LLVM's SLP vectorizer turns contiguous
 * lanes into vector loads and arithmetic. A range that holds a whole row
 * of C >= vw columns takes one pass over the rows with ceil(C / vw)
 * vectors, the last moved back to end at the row's end (storing only its
 * new lanes). A range that splits rows (threads at odd columns) takes
 * chunks of whole vectors and then single vectors moved back the same
 * way; rows of fewer than vw columns take their C lanes, or, split,
 * lanes past the range's end repeating its last column. A column's
 * result does not depend on its pass, so any split over threads gives
 * the same results.
 */
#include "cg_lower.h"

#include <string.h>

/* The most columns this kernel takes (4 x 16 or 8 x 8 floats in
 * registers): rows of more are summed by the general kernel, row after
 * row through out, in order too. With that many vectors a row, its adds
 * into out no longer wait on each other, and it streams the input, where
 * passes of 64 columns would walk it once each, with a stride (3 times
 * slower at (640, 1024)). */
#define COLRED_MAX_COLS 64

/* One column reduction being generated. */
typedef struct colred {
	cg_kernel *k;
	const cg_nest *n; /* array 0 the output, then the leaves */
	ir_op op;
	ir_dtype t;
	unsigned vw, nv;  /* lanes; accumulator vectors of a whole chunk */
	int64_t C, count; /* columns (the last nest axis); rows per column */
	LLVMTypeRef vt;   /* <vw x element> */
	unsigned n_acc;   /* accumulator vectors: COLRED_MAX_COLS / vw */
	LLVMValueRef acc; /* n_acc vectors of vt, on the stack (SROA'd) */
	LLVMValueRef base[CG_NEST_ARRS]; /* each array at the outer index */
} colred;

/* One pass over the rows: nvec vectors of columns, vector v from column
 * c0 + v vw, but the last one from last_c0 when set (moved back so as not
 * to pass the row's end). Every lane is its own column (part NULL), or
 * (one vector) only lanes below `part` (an i64 value) are, the others
 * repeating the last; only the first `lanes` lanes are computed. Of the
 * last vector, the lanes [st_lo, st_lo + st_n) are stored (st_n NULL:
 * all of them, as of every other vector). All values are i64. */
typedef struct colpass {
	LLVMValueRef c0, last_c0, part, st_lo, st_n;
	unsigned nvec, lanes;
} colpass;

bool cg_lower_is_colred(const cg_nest *n)
{
	int last = n->rank - 1;
	bool has_reduced = false;
	for (int d = 0; d < last; d++)
		has_reduced |= n->strides[0][d] == 0 && n->dims[d] > 1;
	return n->rank >= 2 && has_reduced && n->dims[last] > 0 &&
	       n->strides[0][last] == 1;
}

bool cg_lower_colred_fits(const cg_kernel *k, const cg_nest *n)
{
	ir_dtype t = k->node->type.dtype;
	return cg_lower_is_colred(n) && n->dims[n->rank - 1] <= COLRED_MAX_COLS &&
	       (t == IR_F32 || (t == IR_I32 && k->node->op != IR_OP_MEAN));
}

/* The first column of vector v of the pass. */
static LLVMValueRef vec_c0(colred *g, const colpass *ps, unsigned v)
{
	if (v + 1 == ps->nvec && ps->last_c0)
		return ps->last_c0;
	return cg_addi(&g->k->f, ps->c0, (int64_t)v * g->vw);
}

/* Vector v of the accumulators. */
static LLVMValueRef acc_at(colred *g, unsigned v)
{
	cg_fn *f = &g->k->f;
	LLVMValueRef idx[2] = {cg_i64(f, 0), cg_i64(f, v)};
	LLVMTypeRef at = LLVMArrayType2(g->vt, g->n_acc);
	return LLVMBuildInBoundsGEP2(f->b, at, g->acc, idx, 2, "");
}

/* The operand at the row whose arrays' offsets are row[], lanes of
 * vector v of the pass: one value per lane, its column's, put together
 * (the SLP vectorizer turns contiguous lanes into vector loads and
 * arithmetic). A partial vector's lanes past its end repeat its last
 * column (gathered): they read in bounds, and are never stored. */
static LLVMValueRef row_vector(colred *g, const colpass *ps, const LLVMValueRef *row,
			       unsigned v)
{
	cg_fn *f = &g->k->f;
	const cg_nest *n = g->n;
	int last = n->rank - 1;
	LLVMValueRef x = LLVMConstNull(g->vt), offs[CG_NEST_ARRS];
	LLVMValueRef first = vec_c0(g, ps, v);
	for (unsigned i = 0; i < ps->lanes; i++) {
		LLVMValueRef lane = cg_i64(f, i);
		if (ps->part)
			lane = cg_min(f, lane, cg_addi(f, ps->part, -1));
		LLVMValueRef col = cg_add(f, first, lane);
		for (int a = 0; a < n->n_arr; a++)
			offs[a] = cg_add(f, row[a], cg_muli(f, col, n->strides[a][last]));
		x = LLVMBuildInsertElement(f->b, x, cg_kernel_operand(g->k, 0, offs, NULL),
					   cg_i32(f, (int32_t)i), "");
	}
	return x;
}

/* One row into the pass's accumulators. */
static void add_row(colred *g, const colpass *ps, const LLVMValueRef *row)
{
	cg_fn *f = &g->k->f;
	for (unsigned v = 0; v < ps->nvec; v++) {
		LLVMValueRef x = row_vector(g, ps, row, v);
		LLVMValueRef p = acc_at(g, v);
		LLVMValueRef o = LLVMBuildLoad2(f->b, g->vt, p, "");
		LLVMBuildStore(f->b, cg_lower_red_step(f, g->op, g->t, o, x), p);
	}
}

/* The rows: the reduced axes before the columns, nested in order from
 * axis d, row[] each array's offset so far. */
static void add_rows(colred *g, const colpass *ps, int d, const LLVMValueRef *row)
{
	cg_fn *f = &g->k->f;
	const cg_nest *n = g->n;
	if (d == n->rank - 1) {
		add_row(g, ps, row);
		return;
	}
	if (n->strides[0][d] != 0) { /* a kept outer axis: in base[] */
		add_rows(g, ps, d + 1, row);
		return;
	}
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, n->dims[d]), 1);
	LLVMValueRef next[CG_NEST_ARRS];
	for (int a = 0; a < n->n_arr; a++)
		next[a] = cg_add(f, row[a], cg_muli(f, i, n->strides[a][d]));
	add_rows(g, ps, d + 1, next);
	cg_loop_end(f, &l);
}

static LLVMValueRef splat64(colred *g, LLVMValueRef n)
{
	cg_fn *f = &g->k->f;
	LLVMTypeRef it = LLVMVectorType(cg_t_i64(f), g->vw);
	LLVMValueRef s = LLVMBuildInsertElement(f->b, LLVMGetPoison(it), n,
						cg_i32(f, 0), "");
	return LLVMBuildShuffleVector(f->b, s, LLVMGetPoison(it),
				      LLVMConstNull(LLVMVectorType(cg_t_i32(f), g->vw)), "");
}

/* Lanes [lo, lo + n) of a <vw x i1> mask, lo and n i64 values. */
static LLVMValueRef lanes_between(colred *g, LLVMValueRef lo, LLVMValueRef n)
{
	cg_fn *f = &g->k->f;
	LLVMValueRef iota[16];
	for (unsigned i = 0; i < g->vw; i++)
		iota[i] = cg_i64(f, i);
	LLVMValueRef io = LLVMConstVector(iota, g->vw);
	LLVMValueRef ge = LLVMBuildICmp(f->b, LLVMIntSGE, io, splat64(g, lo), "");
	LLVMValueRef lt = LLVMBuildICmp(f->b, LLVMIntSLT, io,
					splat64(g, cg_add(f, lo, n)), "");
	return LLVMBuildAnd(f->b, ge, lt, "");
}

/* The pass's columns reduced over every row, then stored (means divided
 * by the row count) from out[ob + c0]. */
static void reduce_pass(colred *g, const colpass *ps, LLVMValueRef ob)
{
	cg_fn *f = &g->k->f;
	for (unsigned v = 0; v < ps->nvec; v++)
		LLVMBuildStore(f->b, cg_lower_red_init(g->op, g->t, g->vt), acc_at(g, v));
	add_rows(g, ps, 0, g->base);
	for (unsigned v = 0; v < ps->nvec; v++) {
		LLVMValueRef res = LLVMBuildLoad2(f->b, g->vt, acc_at(g, v), "");
		if (g->op == IR_OP_MEAN)
			res = LLVMBuildFDiv(f->b, res,
					    cg_const_real(g->vt, (double)(float)g->count), "");
		LLVMValueRef at = cg_at(f, g->k->out, cg_add(f, ob, vec_c0(g, ps, v)));
		if (!ps->st_n || v + 1 < ps->nvec) {
			LLVMSetAlignment(LLVMBuildStore(f->b, res, at), 4);
			continue;
		}
		LLVMTypeRef tys[2] = {g->vt, cg_t_ptr(f)};
		LLVMValueRef args[4] = {res, at, cg_i32(f, 4),
					lanes_between(g, ps->st_lo, ps->st_n)};
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

/* Columns [c0, ce) of the outer index (fewer than a chunk), vw at a
 * time; C >= vw. Each pass reads a whole vector of columns, moved back
 * where it would pass the row's end, and stores only its own lanes. */
static void reduce_tail(colred *g, LLVMValueRef c0, LLVMValueRef ce, LLVMValueRef ob)
{
	cg_fn *f = &g->k->f;
	cg_loop l;
	LLVMValueRef c = cg_loop_begin(f, &l, c0, ce, g->vw);
	LLVMValueRef at = cg_min(f, c, cg_i64(f, g->C - g->vw));
	colpass ps = {at, at, NULL, NULL, NULL, 1, g->vw};
	ps.st_lo = LLVMBuildSub(f->b, c, at, "");
	ps.st_n = cg_min(f, cg_i64(f, g->vw), LLVMBuildSub(f->b, ce, c, ""));
	reduce_pass(g, &ps, ob);
	cg_loop_end(f, &l);
}

/* Columns [c0, ce) of the outer index when a row has fewer than vw
 * (C < vw): the row's C lanes when it is all there, else lanes below
 * ce - c0 and the others repeating the last. */
static void reduce_narrow(colred *g, LLVMValueRef c0, LLVMValueRef ce, LLVMValueRef ob)
{
	cg_fn *f = &g->k->f;
	LLVMValueRef n = LLVMBuildSub(f->b, ce, c0, "");
	LLVMValueRef is_all = LLVMBuildICmp(f->b, LLVMIntEQ, n, cg_i64(f, g->C), "");
	LLVMBasicBlockRef all = cg_block(f, "all"), part = cg_block(f, "part");
	LLVMBasicBlockRef join = cg_block(f, "join");
	LLVMBuildCondBr(f->b, is_all, all, part);
	LLVMPositionBuilderAtEnd(f->b, all);
	colpass ps = {c0, NULL, NULL, cg_i64(f, 0), cg_i64(f, g->C), 1, (unsigned)g->C};
	reduce_pass(g, &ps, ob);
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, part);
	colpass pp = {c0, NULL, n, cg_i64(f, 0), n, 1, g->vw};
	reduce_pass(g, &pp, ob);
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, join);
}

/* A whole row of C >= vw columns in one pass: ceil(C / vw) vectors, the
 * last one moved back to end at the row's end, storing only its lanes
 * past the vector before it. */
static void reduce_row(colred *g, LLVMValueRef ob)
{
	cg_fn *f = &g->k->f;
	int64_t nvec = (g->C + g->vw - 1) / g->vw, lo = nvec * g->vw - g->C;
	colpass ps = {cg_i64(f, 0), NULL, NULL, NULL, NULL, (unsigned)nvec, g->vw};
	if (lo) {
		ps.last_c0 = cg_i64(f, g->C - g->vw);
		ps.st_lo = cg_i64(f, lo);
		ps.st_n = cg_i64(f, g->vw - lo);
	}
	reduce_pass(g, &ps, ob);
}

/* Columns [cs, ce) of the outer index when not the whole row: whole
 * chunks of nv vectors, then the rest. */
static void reduce_cols(colred *g, LLVMValueRef cs, LLVMValueRef ce, LLVMValueRef ob)
{
	cg_fn *f = &g->k->f;
	int64_t w = (int64_t)g->nv * g->vw;
	LLVMValueRef n_chunks = LLVMBuildUDiv(f->b, LLVMBuildSub(f->b, ce, cs, ""),
					      cg_i64(f, w), "");
	LLVMValueRef tail = cg_add(f, cs, cg_muli(f, n_chunks, w));
	cg_loop l;
	colpass ps = {cg_loop_begin(f, &l, cs, tail, w), NULL, NULL, NULL, NULL, g->nv,
		      g->vw};
	reduce_pass(g, &ps, ob);
	cg_loop_end(f, &l);
	reduce_tail(g, tail, ce, ob);
}

/* The outer index b's columns within [lo, hi). */
static void reduce_outer(colred *g, LLVMValueRef b)
{
	cg_fn *f = &g->k->f;
	cg_kernel *k = g->k;
	LLVMValueRef ob = cg_muli(f, b, g->C);
	LLVMValueRef cs = max64(f, LLVMBuildSub(f->b, k->lo, ob, ""), cg_i64(f, 0));
	LLVMValueRef ce = cg_min(f, LLVMBuildSub(f->b, k->hi, ob, ""), cg_i64(f, g->C));
	outer_bases(g, b);
	if (g->C < g->vw) {
		reduce_narrow(g, cs, ce, ob);
		return;
	}
	LLVMValueRef whole = LLVMBuildICmp(f->b, LLVMIntEQ, LLVMBuildSub(f->b, ce, cs, ""),
					   cg_i64(f, g->C), "");
	LLVMBasicBlockRef row = cg_block(f, "row"), cols = cg_block(f, "cols");
	LLVMBasicBlockRef join = cg_block(f, "join");
	LLVMBuildCondBr(f->b, whole, row, cols);
	LLVMPositionBuilderAtEnd(f->b, row);
	reduce_row(g, ob);
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, cols);
	reduce_cols(g, cs, ce, ob);
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, join);
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
	int64_t nv = g.C / g.vw, outer = 1;
	g.n_acc = COLRED_MAX_COLS / g.vw;
	g.nv = nv < 1 ? 1 : (unsigned)nv;
	g.count = 1;
	for (int d = 0; d < n->rank - 1; d++) {
		bool red = n->strides[0][d] == 0;
		g.count *= red ? n->dims[d] : 1;
		outer *= red ? 1 : n->dims[d];
	}
	g.vt = LLVMVectorType(cg_lower_elem_type(f, g.t), g.vw);
	g.acc = cg_lower_entry_alloca(f, LLVMArrayType2(g.vt, g.n_acc), "acc");
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
