/*
 * cg_lower_rowred.c - sum, mean and max over the last axis with rows in
 * the lanes of vectors (the layer norm's backward takes four means a
 * row).
 *
 * A row's result is a chain: out = ((init + x0) + x1) + ... in the
 * interpreter's order (a row longer than CG_SUM_PLAIN sums each block of
 * CG_SUM_BLOCK so, from init, then combines the block sums pairwise,
 * cg_lower_sumtree.c), one dependent add per element (4 cycles each on
 * the scalar unit), which LLVM cannot vectorize along the row without
 * reassociating it. Here each lane of a vector carries the chain of one
 * row, in that same order, so a group of vw rows (8 or 16) costs one
 * vector add per column and every result is bit for bit the
 * interpreter's (and the scalar loop's).
 *
 * Per group of rows and block of columns (at most ROWRED_BLOCK, so a
 * long row needs no big stack): the operand's values (its fused tree
 * computed per element, as every kernel computes it) are written row by
 * row into a tile on the stack, in a loop LLVM vectorizes along the row;
 * then vw columns at a time are loaded as vw row vectors, transposed in
 * registers into column vectors (a row per lane), and added into the
 * accumulator column by column. The last group of a range may have fewer
 * rows: its other lanes compute garbage that is never stored. Groups are
 * taken from the kernel's range [lo, hi) of rows, and a row's result does
 * not depend on its group, so any split over threads gives the same
 * results.
 */
#include "cg_lower.h"

#include <math.h>
#include <string.h>

/* Columns of the tile: a row no longer than a plain sum (CG_SUM_PLAIN),
 * or a piece of a longer one, whole blocks of CG_SUM_BLOCK (16 x 256
 * floats: 16 KB). */
#define ROWRED_BLOCK 256
_Static_assert(ROWRED_BLOCK >= CG_SUM_PLAIN && ROWRED_BLOCK % CG_SUM_BLOCK == 0,
	       "a tile holds a plain sum's row, or whole blocks");

/* One row reduction being generated. */
typedef struct rowred {
	cg_kernel *k;
	const cg_nest *n; /* (rows, K): array 0 the output, then the leaves */
	ir_op op;
	ir_dtype t;
	unsigned vw;         /* lanes: rows per group */
	int64_t K, wp;       /* row length; tile row stride (a block, padded) */
	LLVMTypeRef et, vt;  /* element and <vw x element> */
	LLVMValueRef tile;   /* vw x wp elements on the stack */
	LLVMValueRef acc;    /* variable of vt: a lane per row of the group */
	LLVMValueRef lv;     /* the tree's levels, a vt each (long rows) */
	LLVMValueRef r0, nr; /* the group's first row and its row count */
} rowred;

bool cg_lower_rowred_fits(const cg_kernel *k, const cg_nest *n)
{
	ir_dtype t = k->node->type.dtype;
	return n->rank == 2 && n->dims[0] > 0 && n->dims[1] > 0 &&
	       n->strides[0][0] == 1 && n->strides[0][1] == 0 &&
	       (t == IR_F32 || (t == IR_I32 && k->node->op != IR_OP_MEAN));
}

/* The identity of the reduction in every lane: 0, or the lowest value. */
static LLVMValueRef init_value(const rowred *g)
{
	if (g->op != IR_OP_MAX)
		return LLVMConstNull(g->vt);
	if (g->t == IR_I32)
		return cg_const_int(g->vt, (uint64_t)(uint32_t)INT32_MIN);
	return cg_const_real(g->vt, -INFINITY);
}

/* The operand at rows r0 .. r0 + nr, columns c0 .. c0 + w, into the
 * tile's rows. The inner loop stays a loop, so that LLVM vectorizes it
 * along the row (contiguous leaves, or broadcast ones) instead of
 * unrolling it and gathering across rows. */
static void fill_tile(rowred *g, LLVMValueRef c0, int64_t w)
{
	cg_fn *f = &g->k->f;
	const cg_nest *n = g->n;
	cg_loop lr, lj;
	LLVMValueRef r = cg_loop_begin(f, &lr, cg_i64(f, 0), g->nr, 1);
	LLVMValueRef row = cg_add(f, g->r0, r), dst = cg_muli(f, r, g->wp);
	LLVMValueRef j = cg_loop_begin(f, &lj, cg_i64(f, 0), cg_i64(f, w), 1);
	LLVMValueRef col = cg_add(f, c0, j), offs[CG_NEST_ARRS];
	for (int a = 0; a < n->n_arr; a++)
		offs[a] = cg_add(f, cg_i64(f, n->base[a]),
				 cg_add(f, cg_muli(f, row, n->strides[a][0]),
					cg_muli(f, col, n->strides[a][1])));
	cg_lower_store(f, g->t, cg_kernel_operand(g->k, 0, offs, NULL), g->tile,
		       cg_add(f, dst, j));
	cg_loop_end(f, &lj);
	cg_loop_no_unroll(f, &lj);
	cg_loop_end(f, &lr);
}

/* Tile columns c0 .. c0 + cols (cols <= vw) added into the accumulator,
 * column by column: vw rows read as vectors (the tile is padded to whole
 * vectors), transposed into columns. */
static void add_columns(rowred *g, LLVMValueRef c0, unsigned cols)
{
	cg_fn *f = &g->k->f;
	LLVMValueRef v[16];
	for (unsigned i = 0; i < g->vw; i++) {
		LLVMValueRef at = cg_at(f, g->tile,
					cg_addi(f, c0, (int64_t)i * g->wp));
		v[i] = LLVMBuildLoad2(f->b, g->vt, at, "");
		LLVMSetAlignment(v[i], 4);
	}
	cg_transpose(f, v, g->vw);
	LLVMValueRef acc = LLVMBuildLoad2(f->b, g->vt, g->acc, "");
	for (unsigned c = 0; c < cols; c++)
		acc = cg_lower_reduce_step(f, g->op, g->t, true, acc, v[c]);
	LLVMBuildStore(f->b, acc, g->acc);
}

/* Tile columns j0 .. j0 + w (j0 an i64 value) added into the
 * accumulator in order, vw at a time; a loop when there are many. */
static void add_range(rowred *g, LLVMValueRef j0, int64_t w)
{
	cg_fn *f = &g->k->f;
	int64_t whole = w / g->vw * g->vw;
	if (whole > (int64_t)g->vw * 4) {
		cg_loop l;
		LLVMValueRef c = cg_loop_begin(f, &l, cg_i64(f, 0),
					       cg_i64(f, whole), g->vw);
		add_columns(g, cg_add(f, j0, c), g->vw);
		cg_loop_end(f, &l);
	} else {
		for (int64_t c = 0; c < whole; c += g->vw)
			add_columns(g, cg_addi(f, j0, c), g->vw);
	}
	if (w > whole)
		add_columns(g, cg_addi(f, j0, whole), (unsigned)(w - whole));
}

/* Lanes 0 .. nr of the group, as a <vw x i1> mask. */
static LLVMValueRef rows_mask(rowred *g)
{
	cg_fn *f = &g->k->f;
	LLVMTypeRef it = LLVMVectorType(cg_t_i64(f), g->vw);
	LLVMValueRef iota[16];
	for (unsigned i = 0; i < g->vw; i++)
		iota[i] = cg_i64(f, i);
	LLVMValueRef nr = LLVMBuildInsertElement(f->b, LLVMGetPoison(it), g->nr,
						 cg_i32(f, 0), "");
	nr = LLVMBuildShuffleVector(f->b, nr, LLVMGetPoison(it),
				    LLVMConstNull(
					    LLVMVectorType(cg_t_i32(f), g->vw)),
				    "");
	return LLVMBuildICmp(f->b, LLVMIntULT, LLVMConstVector(iota, g->vw), nr,
			     "");
}

/* The address of the tree's level q (an i64 value). */
static LLVMValueRef level(const rowred *g, LLVMValueRef q)
{
	cg_fn *f = &g->k->f;
	return LLVMBuildGEP2(f->b, g->vt, g->lv, &q, 1, "");
}

/* The tree's step (cg_tree_combine): level q - 1 (+)= level q. */
static void combine(cg_fn *f, LLVMValueRef q, void *ud)
{
	const rowred *g = ud;
	LLVMValueRef dst = level(g, cg_addi(f, q, -1));
	LLVMValueRef a = LLVMBuildLoad2(f->b, g->vt, dst, "");
	LLVMValueRef b = LLVMBuildLoad2(f->b, g->vt, level(g, q), "");
	LLVMBuildStore(f->b, cg_lower_reduce_step(f, g->op, g->t, true, a, b),
		       dst);
}

/* Block b (an i64 value) of a long row, w columns of the tile from j0
 * (an i64 value), summed from the identity and pushed onto the tree. */
static void reduce_block(rowred *g, LLVMValueRef j0, int64_t w, LLVMValueRef b)
{
	cg_fn *f = &g->k->f;
	LLVMBuildStore(f->b, init_value(g), g->acc);
	add_range(g, j0, w);
	LLVMBuildStore(f->b, LLVMBuildLoad2(f->b, g->vt, g->acc, ""),
		       level(g, cg_lower_tree_slot(f, b)));
	cg_lower_tree_merge(f, b, combine, g);
}

/* The w columns of a long row from tile t (an i64 value) through the
 * tile, block by block. */
static void reduce_tile(rowred *g, LLVMValueRef t, int64_t w)
{
	cg_fn *f = &g->k->f;
	const int64_t per = ROWRED_BLOCK / CG_SUM_BLOCK;
	fill_tile(g, cg_muli(f, t, ROWRED_BLOCK), w);
	int64_t whole = w / CG_SUM_BLOCK, rest = w % CG_SUM_BLOCK;
	LLVMValueRef b0 = cg_muli(f, t, per);
	if (whole) {
		cg_loop l;
		LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0),
					       cg_i64(f, whole), 1);
		reduce_block(g, cg_muli(f, i, CG_SUM_BLOCK), CG_SUM_BLOCK,
			     cg_add(f, b0, i));
		cg_loop_end(f, &l);
	}
	if (rest)
		reduce_block(g, cg_i64(f, whole * CG_SUM_BLOCK), rest,
			     cg_addi(f, b0, whole));
}

/* A row longer than CG_SUM_PLAIN: its tiles, its blocks' results
 * combined pairwise into the tree's level 0. */
static void reduce_long(rowred *g)
{
	cg_fn *f = &g->k->f;
	int64_t tiles = g->K / ROWRED_BLOCK, rest = g->K % ROWRED_BLOCK;
	cg_loop l;
	LLVMValueRef t = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, tiles), 1);
	reduce_tile(g, t, ROWRED_BLOCK);
	cg_loop_end(f, &l);
	if (rest)
		reduce_tile(g, cg_i64(f, tiles), rest);
	cg_lower_tree_fold(f, (g->K + CG_SUM_BLOCK - 1) / CG_SUM_BLOCK, combine,
			   g);
}

/* The group's rows: a short row (at most CG_SUM_PLAIN) through the tile
 * at once, left to right; a long one in blocks (reduce_long); then the
 * results (means divided by the row length) stored to rows r0 .. r0 + nr. */
static void reduce_group(rowred *g)
{
	cg_fn *f = &g->k->f;
	bool is_long = g->K > CG_SUM_PLAIN;
	if (is_long) {
		reduce_long(g);
	} else {
		LLVMBuildStore(f->b, init_value(g), g->acc);
		fill_tile(g, cg_i64(f, 0), g->K);
		add_range(g, cg_i64(f, 0), g->K);
	}
	LLVMValueRef res = LLVMBuildLoad2(f->b, g->vt, is_long ? g->lv : g->acc,
					  "");
	if (g->op == IR_OP_MEAN)
		res = LLVMBuildFDiv(f->b, res,
				    cg_const_real(g->vt, (double)(float)g->K),
				    "");
	LLVMTypeRef tys[2] = {g->vt, cg_t_ptr(f)};
	LLVMValueRef args[4] = {res, cg_at(f, g->k->out, g->r0), cg_i32(f, 4),
				rows_mask(g)};
	cg_intrinsic(f, "llvm.masked.store", tys, 2, args, 4);
}

void cg_lower_reduce_rows(cg_kernel *k, const cg_nest *n)
{
	cg_fn *f = &k->f;
	rowred g = {0};
	g.k = k;
	g.n = n;
	g.op = k->node->op;
	g.t = k->node->type.dtype;
	g.vw = k->L->vw;
	g.K = n->dims[1];
	int64_t w = g.K < ROWRED_BLOCK ? g.K : ROWRED_BLOCK;
	g.wp = (w + g.vw - 1) / g.vw * g.vw;
	g.et = cg_lower_elem_type(f, g.t);
	g.vt = LLVMVectorType(g.et, g.vw);
	g.tile = cg_entry_alloca(f,
				 LLVMArrayType2(g.et, (uint64_t)g.vw *
							      (uint64_t)g.wp),
				 64);
	g.acc = cg_entry_alloca(f, g.vt, 64);
	int64_t nb = (g.K + CG_SUM_BLOCK - 1) / CG_SUM_BLOCK;
	int levels = cg_lower_tree_levels(nb);
	g.lv = cg_entry_alloca(f, LLVMArrayType2(g.vt, (uint64_t)levels), 64);
	/* Padding and the rows past a short group hold stale values, never
	 * stored; zeroed once, they are never uninitialized either. */
	LLVMBuildMemSet(f->b, g.tile,
			LLVMConstInt(LLVMInt8TypeInContext(f->ctx), 0, 0),
			cg_i64(f, (int64_t)g.vw * g.wp * 4), 64);
	k->extent = n->dims[0];
	k->work = n->dims[0] * g.K;
	cg_loop l;
	g.r0 = cg_loop_begin(f, &l, k->lo, k->hi, g.vw);
	g.nr = cg_min(f, cg_i64(f, g.vw), LLVMBuildSub(f->b, k->hi, g.r0, ""));
	reduce_group(&g);
	cg_loop_end(f, &l);
}
