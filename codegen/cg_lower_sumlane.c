/*
 * cg_lower_sumlane.c - the float sums and means longer than a plain sum
 * (CG_SUM_PLAIN) that neither the row kernel nor the column kernel
 * takes: a whole tensor summed to a scalar (a loss's mean over B*T), or
 * axes that do not merge into one run (axes 0 and 2 of a rank-3 tensor).
 *
 * The order is the interpreter's (docs/ops.md, "Summation order"): an
 * output element's n inputs, in row-major order of the reduced axes, in
 * blocks of CG_SUM_BLOCK summed left to right from 0, the block sums
 * combined by the pairwise tree. Here the blocks go in the lanes of a
 * vector: per output element, a group of vw consecutive blocks (vw a
 * power of two) is written into a tile on the stack, a block per row
 * (the operand computed per element; positions past n read as 0), then
 * added column by column into an accumulator whose lane r carries block
 * r's chain, as the row kernel adds its rows (cg_lower_rowred.c). The
 * group's vw block sums are combined across the lanes pairwise,
 * (l0 + l1), (l2 + l3), ... and so on up: the tree's subtree over an
 * aligned group of vw blocks. Zero blocks past the last one change no
 * bit (x + 0 is x for every sum from 0, which is never -0), so the last,
 * short group gives the tree over its blocks too. The groups' sums are
 * then pushed onto the tree's levels (cg_lower_sumtree.c), scalars
 * here: the tree over whole groups of vw blocks is the tree over the
 * blocks, as its splits (a power of two at least vw) fall on groups.
 * Output elements are split over threads, each computed whole by one,
 * so any thread count gives the same bits; a thread takes SUMLANE_OUTS
 * of them at a time, group by group, each on its own tree, so that
 * neighbouring elements' inputs (often adjacent rows) are read
 * together.
 */
#include "cg_lower.h"

/* Output elements taken together, group by group of their blocks. */
#define SUMLANE_OUTS 8

/* One lane-blocked sum being generated: the nest's axes (array 0 the
 * output, stride 0 along the reduced ones) split into kept and reduced. */
typedef struct sumlane {
	cg_kernel *k;
	const cg_nest *n;
	unsigned vw;
	int nk, nr; /* kept and reduced axes */
	int kept[CG_NEST_MAX], red[CG_NEST_MAX];
	int64_t count;     /* inputs per output element */
	LLVMTypeRef vt;    /* <vw x float> */
	LLVMValueRef tile; /* vw x CG_SUM_BLOCK floats */
	LLVMValueRef lv;   /* the trees' levels, a float each */
	int64_t levels;    /* levels per output element */
	LLVMValueRef lvo;  /* the levels of the output element at hand */
	LLVMValueRef ooff[CG_NEST_ARRS]; /* the arrays at the output element */
} sumlane;

bool cg_lower_sumlane_fits(const cg_kernel *k, const cg_nest *n, int64_t count)
{
	return k->node->type.dtype == IR_F32 && k->node->op != IR_OP_MAX &&
	       count > CG_SUM_PLAIN && n->dims[0] > 0;
}

/* The offsets of every array at linear index i (an i64 value) of the
 * axes ax[0 .. na), row-major, added to base[a] (i64 values; NULL: the
 * nest's bases). */
static void offsets(const sumlane *g, const int *ax, int na, LLVMValueRef i,
		    const LLVMValueRef *base, LLVMValueRef *offs)
{
	cg_fn *f = &g->k->f;
	for (int a = 0; a < g->n->n_arr; a++)
		offs[a] = base ? base[a] : cg_i64(f, g->n->base[a]);
	for (int d = na - 1; d >= 0; d--) {
		int64_t len = g->n->dims[ax[d]];
		LLVMValueRef digit = d ? LLVMBuildURem(f->b, i, cg_i64(f, len),
						       "")
				       : i;
		for (int a = 0; a < g->n->n_arr; a++)
			offs[a] = cg_add(f, offs[a],
					 cg_muli(f, digit,
						 g->n->strides[a][ax[d]]));
		if (d)
			i = LLVMBuildUDiv(f->b, i, cg_i64(f, len), "");
	}
}

/* Tile row r of the group from block b0 (i64 values) when a block lies
 * within the innermost reduced axis (its length a multiple of a block):
 * the arrays' offsets at the block's start computed once, then stepped
 * along that axis, for LLVM to read the block as contiguous as it is.
 * Rows past the last block read the last one, stored as 0. */
static void fill_row_runs(sumlane *g, LLVMValueRef b0, LLVMValueRef r,
			  LLVMValueRef dst)
{
	cg_fn *f = &g->k->f;
	int64_t nb = g->count / CG_SUM_BLOCK;
	LLVMValueRef b = cg_add(f, b0, r);
	LLVMValueRef in = LLVMBuildICmp(f->b, LLVMIntSLT, b, cg_i64(f, nb), "");
	b = cg_min(f, b, cg_i64(f, nb - 1));
	LLVMValueRef start[CG_NEST_ARRS], offs[CG_NEST_ARRS];
	offsets(g, g->red, g->nr, cg_muli(f, b, CG_SUM_BLOCK), g->ooff, start);
	int inner = g->red[g->nr - 1];
	cg_loop lj;
	LLVMValueRef j = cg_loop_begin(f, &lj, cg_i64(f, 0),
				       cg_i64(f, CG_SUM_BLOCK), 1);
	for (int a = 0; a < g->n->n_arr; a++)
		offs[a] = cg_add(f, start[a],
				 cg_muli(f, j, g->n->strides[a][inner]));
	LLVMValueRef v = cg_kernel_operand(g->k, 0, offs, NULL);
	v = LLVMBuildSelect(f->b, in, v, cg_f32(f, 0.0f), "");
	cg_lower_store(f, IR_F32, v, g->tile, cg_add(f, dst, j));
	cg_loop_end(f, &lj);
	cg_loop_no_unroll(f, &lj);
}

/* Tile row r of the group from block b0 (i64 values), any shape: each
 * element's offsets from its index, clamped to the last input (stored
 * as 0 past it). */
static void fill_row_any(sumlane *g, LLVMValueRef b0, LLVMValueRef r,
			 LLVMValueRef dst)
{
	cg_fn *f = &g->k->f;
	LLVMValueRef first = cg_muli(f, cg_add(f, b0, r), CG_SUM_BLOCK);
	cg_loop lj;
	LLVMValueRef j = cg_loop_begin(f, &lj, cg_i64(f, 0),
				       cg_i64(f, CG_SUM_BLOCK), 1);
	LLVMValueRef i = cg_add(f, first, j);
	LLVMValueRef in = LLVMBuildICmp(f->b, LLVMIntSLT, i,
					cg_i64(f, g->count), "");
	LLVMValueRef offs[CG_NEST_ARRS];
	offsets(g, g->red, g->nr, cg_min(f, i, cg_i64(f, g->count - 1)),
		g->ooff, offs);
	LLVMValueRef v = cg_kernel_operand(g->k, 0, offs, NULL);
	v = LLVMBuildSelect(f->b, in, v, cg_f32(f, 0.0f), "");
	cg_lower_store(f, IR_F32, v, g->tile, cg_add(f, dst, j));
	cg_loop_end(f, &lj);
	cg_loop_no_unroll(f, &lj);
}

/* The group of blocks from block b0 (an i64 value) into the tile: tile
 * row r holds block b0 + r, 0 past the count. */
static void fill_tile(sumlane *g, LLVMValueRef b0)
{
	cg_fn *f = &g->k->f;
	int64_t inner = g->n->dims[g->red[g->nr - 1]];
	bool is_runs = g->nr > 1 && inner % CG_SUM_BLOCK == 0;
	cg_loop lr;
	LLVMValueRef r = cg_loop_begin(f, &lr, cg_i64(f, 0), cg_i64(f, g->vw),
				       1);
	LLVMValueRef dst = cg_muli(f, r, CG_SUM_BLOCK);
	if (is_runs)
		fill_row_runs(g, b0, r, dst);
	else
		fill_row_any(g, b0, r, dst);
	cg_loop_end(f, &lr);
}

/* The tile's blocks summed left to right from 0, one per lane, vw
 * columns at a time transposed into column vectors; returns the sums. */
static LLVMValueRef add_tile(sumlane *g)
{
	cg_fn *f = &g->k->f;
	LLVMValueRef acc = LLVMConstNull(g->vt), v[16];
	for (unsigned c0 = 0; c0 < CG_SUM_BLOCK; c0 += g->vw) {
		for (unsigned r = 0; r < g->vw; r++) {
			LLVMValueRef at = cg_ati(f, g->tile,
						 (int64_t)r * CG_SUM_BLOCK + c0);
			v[r] = LLVMBuildLoad2(f->b, g->vt, at, "");
			LLVMSetAlignment(v[r], 4);
		}
		cg_transpose(f, v, g->vw);
		for (unsigned c = 0; c < g->vw; c++)
			acc = LLVMBuildFAdd(f->b, acc, v[c], "");
	}
	return acc;
}

/* The lanes of v combined pairwise, (l0 + l1) + (l2 + l3) ...: a float. */
static LLVMValueRef lane_tree(cg_fn *f, LLVMValueRef v, unsigned w)
{
	LLVMTypeRef i32 = cg_t_i32(f);
	for (; w > 1; w /= 2) {
		LLVMValueRef ev[8], od[8];
		for (unsigned i = 0; i < w / 2; i++) {
			ev[i] = LLVMConstInt(i32, 2 * i, 0);
			od[i] = LLVMConstInt(i32, 2 * i + 1, 0);
		}
		LLVMValueRef a = LLVMBuildShuffleVector(f->b, v, v,
							LLVMConstVector(ev,
									w / 2),
							"");
		LLVMValueRef b = LLVMBuildShuffleVector(f->b, v, v,
							LLVMConstVector(od,
									w / 2),
							"");
		v = LLVMBuildFAdd(f->b, a, b, "");
	}
	return LLVMBuildExtractElement(f->b, v, cg_i32(f, 0), "");
}

/* The tree's step (cg_tree_combine): level q - 1 += level q, of the
 * output element whose levels start at g->lvo. */
static void combine(cg_fn *f, LLVMValueRef q, void *ud)
{
	const sumlane *g = ud;
	LLVMValueRef dst = cg_at(f, g->lvo, cg_addi(f, q, -1));
	LLVMValueRef a = cg_load(f, dst), b = cg_load(f, cg_at(f, g->lvo, q));
	cg_store(f, LLVMBuildFAdd(f->b, a, b, ""), dst);
}

/* Points g at output element o0 + m (i64 values): its arrays' offsets
 * and its levels. */
static void select_output(sumlane *g, LLVMValueRef o0, LLVMValueRef m)
{
	cg_fn *f = &g->k->f;
	offsets(g, g->kept, g->nk, cg_add(f, o0, m), NULL, g->ooff);
	g->lvo = cg_at(f, g->lv, cg_muli(f, m, g->levels));
}

/* The output elements o0 .. o0 + no (i64 values, no <= SUMLANE_OUTS):
 * group by group of blocks, each element's group through the tile onto
 * its own tree (so that neighbouring elements' inputs, often adjacent
 * in memory, are read together); then each total (a mean's divided)
 * stored. */
static void reduce_outputs(sumlane *g, LLVMValueRef o0, LLVMValueRef no)
{
	cg_fn *f = &g->k->f;
	int64_t nb = (g->count + CG_SUM_BLOCK - 1) / CG_SUM_BLOCK;
	int64_t ng = (nb + g->vw - 1) / g->vw;
	cg_loop lb, lm;
	LLVMValueRef b = cg_loop_begin(f, &lb, cg_i64(f, 0), cg_i64(f, ng), 1);
	LLVMValueRef m = cg_loop_begin(f, &lm, cg_i64(f, 0), no, 1);
	select_output(g, o0, m);
	fill_tile(g, cg_muli(f, b, g->vw));
	cg_store(f, lane_tree(f, add_tile(g), g->vw),
		 cg_at(f, g->lvo, cg_lower_tree_slot(f, b)));
	cg_lower_tree_merge(f, b, combine, g);
	cg_loop_end(f, &lm);
	cg_loop_end(f, &lb);
	m = cg_loop_begin(f, &lm, cg_i64(f, 0), no, 1);
	select_output(g, o0, m);
	cg_lower_tree_fold(f, ng, combine, g);
	LLVMValueRef res = cg_load(f, g->lvo);
	if (g->k->node->op == IR_OP_MEAN)
		res = LLVMBuildFDiv(f->b, res, cg_f32(f, (float)g->count), "");
	cg_lower_store(f, IR_F32, res, g->k->out, g->ooff[0]);
	cg_loop_end(f, &lm);
}

void cg_lower_reduce_lanes(cg_kernel *k, const cg_nest *n, int64_t count)
{
	cg_fn *f = &k->f;
	sumlane g = {0};
	g.k = k;
	g.n = n;
	g.vw = k->L->vw;
	g.count = count;
	for (int d = 0; d < n->rank; d++) {
		if (n->strides[0][d] == 0)
			g.red[g.nr++] = d;
		else
			g.kept[g.nk++] = d;
	}
	g.vt = LLVMVectorType(cg_t_f32(f), g.vw);
	g.tile = cg_entry_alloca(f,
				 LLVMArrayType2(cg_t_f32(f),
						(uint64_t)g.vw * CG_SUM_BLOCK),
				 64);
	int64_t nb = (count + CG_SUM_BLOCK - 1) / CG_SUM_BLOCK;
	g.levels = cg_lower_tree_levels((nb + g.vw - 1) / g.vw);
	g.lv = cg_entry_alloca(f,
			       LLVMArrayType2(cg_t_f32(f),
					      (uint64_t)(g.levels *
							 SUMLANE_OUTS)),
			       16);
	int64_t n_out = 1;
	for (int d = 0; d < g.nk; d++)
		n_out *= n->dims[g.kept[d]];
	k->extent = n_out;
	k->work = n_out * count;
	cg_loop l;
	LLVMValueRef o = cg_loop_begin(f, &l, k->lo, k->hi, SUMLANE_OUTS);
	reduce_outputs(&g, o,
		       cg_min(f, cg_i64(f, SUMLANE_OUTS),
			      LLVMBuildSub(f->b, k->hi, o, "")));
	cg_loop_end(f, &l);
}
