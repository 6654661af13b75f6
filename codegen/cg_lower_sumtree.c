/*
 * cg_lower_sumtree.c - the pairwise combination of a long float sum's
 * block sums (docs/ops.md, "Summation order"), shared by the column
 * kernel (cg_lower_colred.c) and the row kernel (cg_lower_rowred.c).
 *
 * The tree is the interpreter's (interp/nn.c): block sums are pushed in
 * order onto a stack whose levels hold one partial sum per 1 bit of the
 * number of blocks pushed so far, largest first; block b goes to level
 * popcount(b), and then each pair of equal-sized sums it completes is
 * combined (cttz(b + 1) of them), the older on the left. At the end the
 * levels are combined from the newest, s0 + (s1 + (... + s_last)). What
 * a level holds (a tile of columns' partial sums, a vector of rows') is
 * the caller's; it emits the one combining step.
 */
#include "cg_lower.h"

int cg_lower_tree_levels(int64_t n_blocks)
{
	int l = 1;
	for (int64_t nb = n_blocks; nb > 1; nb >>= 1)
		l++;
	return l;
}

LLVMValueRef cg_lower_tree_slot(cg_fn *f, LLVMValueRef b)
{
	LLVMTypeRef t = cg_t_i64(f);
	return cg_intrinsic(f, "llvm.ctpop", &t, 1, &b, 1);
}

void cg_lower_tree_merge(cg_fn *f, LLVMValueRef b, cg_tree_combine combine,
			 void *ud)
{
	LLVMTypeRef t = cg_t_i64(f);
	LLVMValueRef args[2] = {cg_addi(f, b, 1),
				LLVMConstInt(LLVMInt1TypeInContext(f->ctx), 1,
					     0)};
	LLVMValueRef merges = cg_intrinsic(f, "llvm.cttz", &t, 1, args, 2);
	LLVMValueRef top = cg_lower_tree_slot(f, b);
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), merges, 1);
	combine(f, LLVMBuildSub(f->b, top, i, ""), ud);
	cg_loop_end(f, &l);
}

void cg_lower_tree_fold(cg_fn *f, int64_t n_blocks, cg_tree_combine combine,
			void *ud)
{
	int d = 0;
	for (int64_t i = n_blocks; i; i &= i - 1)
		d++;
	for (int q = d - 1; q >= 1; q--)
		combine(f, cg_i64(f, q), ud);
}
