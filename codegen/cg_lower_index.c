/*
 * cg_lower_index.c - the kernels of the gradient side of indexing:
 * one_hot (a row of zeros with a 1 at the id) and embedding_grad (the
 * scatter-add of gradient rows into the rows of a table); and arange, the
 * indices of a run-time length.
 *
 * embedding_grad splits the table's rows over threads: each thread zeroes
 * its rows, then walks every id in order and adds the rows that fall in
 * its range. Each row's sum thus runs in position order whatever the
 * thread count, the interpreter's order too, so results are identical
 * to it and across thread counts.
 */
#include "cg_lower.h"

/* ---- arange --------------------------------------------------------------------- */

/* start + i * step at i, in double as the interpreter computes it, then
 * rounded to f32 or (integers from the frontend) converted to i32. */
bool cg_lower_arange(cg_kernel *k)
{
	cg_fn *f = &k->f;
	LLVMTypeRef f64 = LLVMDoubleTypeInContext(f->ctx);
	ir_dtype dt = k->node->type.dtype;
	k->extent = cg_lower_numel(k->L, &k->node->type);
	k->work = k->extent;
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, k->lo, k->hi, 1);
	LLVMValueRef x = LLVMBuildFAdd(
		f->b, cg_const_real(f64, k->node->attr.arange.start),
		LLVMBuildFMul(f->b, LLVMBuildSIToFP(f->b, i, f64, ""),
			      cg_const_real(f64, k->node->attr.arange.step), ""),
		"");
	LLVMValueRef v = dt == IR_I32
				 ? LLVMBuildFPToSI(f->b, x, cg_t_i32(f), "")
				 : LLVMBuildFPTrunc(f->b, x, cg_t_f32(f), "");
	cg_lower_store(f, dt, v, k->out, i);
	cg_loop_end(f, &l);
	return true;
}

/* ---- one_hot -------------------------------------------------------------------- */

bool cg_lower_one_hot(cg_kernel *k)
{
	cg_fn *f = &k->f;
	int64_t od[IR_MAX_RANK];
	int r = cg_lower_dims(k->L, &k->node->type, od);
	int64_t n = od[r - 1];
	int64_t rows = cg_lower_numel(k->L, cg_kernel_arg_type(k, 0));
	k->extent = rows;
	k->work = rows * n;
	cg_loop rl, jl;
	LLVMValueRef i = cg_loop_begin(f, &rl, k->lo, k->hi, 1);
	LLVMValueRef id = LLVMBuildSExt(f->b,
					cg_lower_load(f, IR_I32, k->in[0], i),
					cg_t_i64(f), "");
	LLVMValueRef row = cg_muli(f, i, n);
	LLVMValueRef j = cg_loop_begin(f, &jl, cg_i64(f, 0), cg_i64(f, n), 1);
	LLVMValueRef hit = LLVMBuildICmp(f->b, LLVMIntEQ, j, id, "");
	LLVMValueRef v = LLVMBuildSelect(f->b, hit, cg_f32(f, 1), cg_f32(f, 0),
					 "");
	cg_lower_store(f, IR_F32, v, k->out, cg_add(f, row, j));
	cg_loop_end(f, &jl);
	cg_loop_end(f, &rl);
	return true;
}

/* ---- embedding_grad ----------------------------------------------------------------- */

/* Zeroes table rows [lo, hi) of width D. */
static void zero_rows(cg_kernel *k, int64_t D)
{
	cg_fn *f = &k->f;
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_muli(f, k->lo, D),
				       cg_muli(f, k->hi, D), 1);
	cg_lower_store(f, IR_F32, cg_f32(f, 0), k->out, i);
	cg_loop_end(f, &l);
}

bool cg_lower_embedding_grad(cg_kernel *k)
{
	cg_fn *f = &k->f;
	int64_t td[2];
	cg_lower_dims(k->L, &k->node->type, td);
	int64_t V = td[0], D = td[1];
	int64_t n = cg_lower_numel(k->L, cg_kernel_arg_type(k, 0));
	k->extent = V;
	k->work = n * D + V * D;
	zero_rows(k, D);
	cg_loop il, jl;
	LLVMValueRef i = cg_loop_begin(f, &il, cg_i64(f, 0), cg_i64(f, n), 1);
	LLVMValueRef id = LLVMBuildSExt(f->b,
					cg_lower_load(f, IR_I32, k->in[0], i),
					cg_t_i64(f), "");
	cg_kernel_fail_index_if(k, id, cg_i64(f, V));
	LLVMValueRef mine = LLVMBuildAnd(f->b,
					 LLVMBuildICmp(f->b, LLVMIntSGE, id,
						       k->lo, ""),
					 LLVMBuildICmp(f->b, LLVMIntSLT, id,
						       k->hi, ""),
					 "");
	LLVMBasicBlockRef join = cg_if_begin(f, mine);
	LLVMValueRef dst = cg_muli(f, id, D), src = cg_muli(f, i, D);
	LLVMValueRef j = cg_loop_begin(f, &jl, cg_i64(f, 0), cg_i64(f, D), 1);
	LLVMValueRef at = cg_add(f, dst, j);
	LLVMValueRef s = LLVMBuildFAdd(f->b,
				       cg_lower_load(f, IR_F32, k->out, at),
				       cg_lower_load(f, IR_F32, k->in[1],
						     cg_add(f, src, j)),
				       "");
	cg_lower_store(f, IR_F32, s, k->out, at);
	cg_loop_end(f, &jl);
	cg_if_end(f, join);
	cg_loop_end(f, &il);
	return true;
}
