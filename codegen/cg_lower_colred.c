/*
 * cg_lower_colred.c - float sums and means over leading axes into a kept
 * last axis that are longer than a plain sum (CG_SUM_PLAIN rows): the bias
 * gradient summed over B*T rows, sum(dy, 0) of (4096, 32).
 *
 * The interpreter sums each output element's inputs in blocks of
 * CG_SUM_BLOCK, left to right within a block, and combines the block
 * sums pairwise (docs/ops.md, "Summation order"). Here, per outer index o
 * (a kept axis before the reduced one, split over threads; or none) and
 * per tile of columns: for each block of rows, a tile of partial sums on
 * the stack is zeroed, every row of the block added into it in order (a
 * loop LLVM vectorizes along the row, each column's chain in one lane),
 * and the tile then copied to its level of the tree (cg_lower_sumtree.c),
 * a tile per level, where the pairs it completes are combined column by
 * column. The total, level 0, is stored to the output. Each column's
 * order is the interpreter's, whatever the tiling or the thread split.
 */
#include "cg_lower.h"

/* Floats of the block tile and the tree's levels, a tile each (64 KB on
 * the stack); a tile is narrower than the columns when the tree is deep. */
#define COLRED_FLOATS 16384

/* One blocked column reduction being generated: the nest is (R, C) or
 * (O, R, C), with the output's stride 0 only along R. */
typedef struct colred {
	cg_kernel *k;
	const cg_nest *n;
	int ro;           /* the nest's axis of rows (0, or 1 after a kept O) */
	int64_t tw;       /* floats per tile */
	LLVMValueRef tmp; /* the block's tile */
	LLVMValueRef lv;  /* the tree's levels, tw floats each */
	LLVMValueRef o, c0, w; /* the outer index, the tile's columns */
} colred;

bool cg_lower_colred_fits(const cg_kernel *k, const cg_nest *n)
{
	ir_op op = k->node->op;
	if (k->node->type.dtype != IR_F32 || op == IR_OP_MAX)
		return false;
	if (n->rank == 2)
		return n->strides[0][0] == 0 && n->strides[0][1] == 1 &&
		       n->dims[0] > CG_SUM_PLAIN && n->dims[1] > 0;
	return n->rank == 3 && n->strides[0][0] != 0 && n->strides[0][1] == 0 &&
	       n->strides[0][2] == 1 && n->dims[1] > CG_SUM_PLAIN &&
	       n->dims[0] > 0 && n->dims[2] > 0;
}

/* Array a's offset at row r, tile column j. */
static LLVMValueRef offset(const colred *g, int a, LLVMValueRef r,
			   LLVMValueRef j)
{
	cg_fn *f = &g->k->f;
	const cg_nest *n = g->n;
	int last = n->rank - 1;
	LLVMValueRef off = cg_add(f, cg_i64(f, n->base[a]),
				  cg_add(f, cg_muli(f, r, n->strides[a][g->ro]),
					 cg_muli(f, cg_add(f, g->c0, j),
						 n->strides[a][last])));
	if (g->ro)
		off = cg_add(f, off, cg_muli(f, g->o, n->strides[a][0]));
	return off;
}

/* The tile of level q (an i64 value) of the tree. */
static LLVMValueRef level(const colred *g, LLVMValueRef q)
{
	cg_fn *f = &g->k->f;
	return cg_at(f, g->lv, cg_muli(f, q, g->tw));
}

/* Rows r0 .. r1 added in order into the zeroed block tile. */
static void add_block(colred *g, LLVMValueRef r0, LLVMValueRef r1)
{
	cg_fn *f = &g->k->f;
	LLVMBuildMemSet(f->b, g->tmp,
			LLVMConstInt(LLVMInt8TypeInContext(f->ctx), 0, 0),
			cg_muli(f, g->w, 4), 64);
	cg_loop lr, lj;
	LLVMValueRef r = cg_loop_begin(f, &lr, r0, r1, 1);
	LLVMValueRef j = cg_loop_begin(f, &lj, cg_i64(f, 0), g->w, 1);
	LLVMValueRef offs[CG_NEST_ARRS];
	for (int a = 0; a < g->n->n_arr; a++)
		offs[a] = offset(g, a, r, j);
	LLVMValueRef v = cg_kernel_operand(g->k, 0, offs, NULL);
	LLVMValueRef s = cg_lower_load(f, IR_F32, g->tmp, j);
	cg_lower_store(f, IR_F32, LLVMBuildFAdd(f->b, s, v, ""), g->tmp, j);
	cg_loop_end(f, &lj);
	cg_loop_end(f, &lr);
}

/* The tree's step (cg_tree_combine): level q - 1 += level q, column by
 * column. */
static void combine(cg_fn *f, LLVMValueRef q, void *ud)
{
	const colred *g = ud;
	LLVMValueRef dst = level(g, cg_addi(f, q, -1)), src = level(g, q);
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0), g->w, 1);
	LLVMValueRef a = cg_lower_load(f, IR_F32, dst, j);
	LLVMValueRef b = cg_lower_load(f, IR_F32, src, j);
	cg_lower_store(f, IR_F32, LLVMBuildFAdd(f->b, a, b, ""), dst, j);
	cg_loop_end(f, &l);
}

/* The tile at p copied to the output's columns c0 .. c0 + w. */
static void store_tile(colred *g, LLVMValueRef p)
{
	cg_fn *f = &g->k->f;
	cg_loop l;
	LLVMValueRef j = cg_loop_begin(f, &l, cg_i64(f, 0), g->w, 1);
	LLVMValueRef at = offset(g, 0, cg_i64(f, 0), j);
	cg_lower_store(f, IR_F32, cg_lower_load(f, IR_F32, p, j), g->k->out, at);
	cg_loop_end(f, &l);
}

/* Every block of rows of one tile of columns at outer index o, each
 * block's tile pushed onto the tree; the total stored. */
static void reduce_tile(colred *g)
{
	cg_fn *f = &g->k->f;
	int64_t R = g->n->dims[g->ro];
	int64_t nb = (R + CG_SUM_BLOCK - 1) / CG_SUM_BLOCK;
	cg_loop l;
	LLVMValueRef b = cg_loop_begin(f, &l, cg_i64(f, 0), cg_i64(f, nb), 1);
	LLVMValueRef r0 = cg_muli(f, b, CG_SUM_BLOCK);
	add_block(g, r0, cg_min(f, cg_addi(f, r0, CG_SUM_BLOCK), cg_i64(f, R)));
	LLVMBuildMemCpy(f->b, level(g, cg_lower_tree_slot(f, b)), 4, g->tmp, 64,
			cg_muli(f, g->w, 4));
	cg_lower_tree_merge(f, b, combine, g);
	cg_loop_end(f, &l);
	cg_lower_tree_fold(f, nb, combine, g);
	store_tile(g, g->lv);
}

void cg_lower_reduce_columns(cg_kernel *k, const cg_nest *n)
{
	cg_fn *f = &k->f;
	colred g = {0};
	g.k = k;
	g.n = n;
	g.ro = n->rank == 3;
	int64_t R = n->dims[g.ro], C = n->dims[n->rank - 1];
	int lv = cg_lower_tree_levels((R + CG_SUM_BLOCK - 1) / CG_SUM_BLOCK);
	int64_t most = COLRED_FLOATS / (lv + 1) / 16 * 16;
	g.tw = C < most ? C : most;
	g.tmp = cg_entry_alloca(f, LLVMArrayType2(cg_t_f32(f), (uint64_t)g.tw),
				64);
	g.lv = cg_entry_alloca(f,
			       LLVMArrayType2(cg_t_f32(f), (uint64_t)(g.tw * lv)),
			       64);
	k->extent = g.ro ? n->dims[0] : 1;
	k->work = n->dims[0] * n->dims[1] * (g.ro ? n->dims[2] : 1);
	cg_loop lo, lc;
	g.o = g.ro ? cg_loop_begin(f, &lo, k->lo, k->hi, 1) : cg_i64(f, 0);
	if (C <= g.tw) {
		/* One tile of a constant width: LLVM may keep it in registers. */
		g.c0 = cg_i64(f, 0);
		g.w = cg_i64(f, C);
		reduce_tile(&g);
	} else {
		g.c0 = cg_loop_begin(f, &lc, cg_i64(f, 0), cg_i64(f, C), g.tw);
		g.w = cg_min(f, cg_i64(f, g.tw),
			     LLVMBuildSub(f->b, cg_i64(f, C), g.c0, ""));
		reduce_tile(&g);
		cg_loop_end(f, &lc);
	}
	if (g.ro)
		cg_loop_end(f, &lo);
}
