/*
 * cg_gemm_gen.h - the state shared by the two halves of the sgemm
 * generator: cg_gemm.c (plan, loop nest, threads, entry point) and
 * cg_gemm_kernel.c (micro-kernels and packing routines). Private to
 * codegen/.
 *
 * Operand layouts are described by strides so one generator serves every
 * case: element (i, p) of A is at a[i*a_rs + p*a_cs], element (p, j) of B
 * at b[p*b_rs + j*b_cs]. A packed A panel has a_rs = 1, a_cs = MR; a
 * packed B panel b_rs = NR, b_cs = 1. NR (plan.nr) is two vectors of
 * plan.vw floats.
 */
#ifndef ATTNC_CG_GEMM_GEN_H
#define ATTNC_CG_GEMM_GEN_H

#include "cg_gemm.h"
#include "cg_internal.h"

#define CG_GEMM_UNROLL 4 /* k-steps per iteration of the micro-kernel loop */

typedef struct cg_gemm_gen {
	LLVMModuleRef mod;
	const char *name;
	cg_gemm_spec spec;
	cg_gemm_plan plan;
	int64_t a_rs, a_cs; /* A in place (the matrix, not a panel) */
	int64_t b_rs, b_cs; /* B in place */
	/* Micro-kernels by [row edge][column edge]; NULL where no tile has
	 * that shape. */
	LLVMValueRef ukr[2][2];
	LLVMValueRef pack_a, pack_b; /* NULL when not packed */
	/* skip_zero_k with neither operand packed: the micro-kernels read
	 * the k kept in place, through their numbers (cg_gemm_is_k_gather). */
	bool is_k_gather;
	/* skip_zero_m with A not packed: the rows kept are multiplied in
	 * place, read from A and written to C through their numbers, by
	 * full-height micro-kernels (ukr_mg; cg_gemm_is_m_gather). */
	bool is_m_gather;
	LLVMValueRef ukr_mg[2]; /* by column edge; NULL where none */
	/* The packing routines' stride argument (ld): the operand's stride
	 * that is not 1 (pack_a_ld, pack_b_ld), and, while one is
	 * generated, its strides as values (pk_rs, pk_cs: one of them ld,
	 * the parameter, the other the constant 1). */
	int64_t pack_a_ld, pack_b_ld;
	LLVMValueRef pk_rs, pk_cs;
	/* The type of the plain micro-kernels (ukr), which the loop nest
	 * shared by the shapes of its kind calls through a pointer. */
	LLVMTypeRef ukr_type, ukr_mg_type; /* and of ukr_mg */
} cg_gemm_gen;

/* Whether a spec's sgemm reads the k kept by skip_zero_k in place,
 * through a list of their numbers, rather than from copies: when
 * neither operand is packed (the packing routines read whole blocks). */
bool cg_gemm_is_k_gather(const cg_gemm_spec *s, const cg_gemm_plan *p);

/* Whether skip_zero_m multiplies the rows it keeps in place, through a
 * list of their numbers, rather than copies: when A is not packed. */
bool cg_gemm_is_m_gather(const cg_gemm_spec *s, const cg_gemm_plan *p);

/* The micro-kernel's parameters before the epilogue's. */
#define CG_GEMM_UKR_ARGS 8

/* Generates the micro-kernel for an mr×nr tile (mr <= MR, nr <= NR), or
 * finds the one the module has of that shape:
 *   void sgemm.ukr.<vw>.<mr>x<nr>.a<p|n|t>.b<p|n>.e<terms>(
 *           const float *a, const float *b, float *c, i64 kc,
 *           i1 accumulate, i64 a_ld, i64 ldb, i64 ldc
 *           [, i1 is_last, const float *e0, ..., i64 e0_rs, ...])
 * a points at the tile's first row (a packed panel if plan.pack_a, else
 * A itself at (i, p)), b likewise at its first column, c at C(i, j).
 * a_ld is A's stride that is not 1 (its a_rs, or its a_cs when A in
 * place is transposed: `t`), ldb B's row stride (both unused for a
 * packed panel), ldc C's and e_rs the epilogue terms' row strides: the
 * variants of a module share the kernels of their tile shapes. It is
 * noinline, so it is optimized and compiled once. Computes the kc-step
 * product in mr·ceil(nr/vw) vector accumulators, then
 * stores it into C, or adds it to C if accumulate; with an epilogue
 * (spec.n_epilogue > 0), on the last k-block (is_last) it adds the terms,
 * e_t pointing at E_t(i, j), to what it stores, one add each.
 * With g->is_k_gather the name ends in `.kg` and a last parameter
 * `const i32 *kidx` follows: step p of the k-loop reads A's column and
 * B's row kidx[p] (a and b then point at A(i, 0) and B(0, j)), the
 * same terms in the same order as from copies of those rows. With
 * is_m_gather (g->is_m_gather, mr = MR) the name ends in `.mg` and the last
 * parameter is `const i32 *rows`: row r of the tile is row rows[r] of A
 * and of C (a and c point at A(0, p) and C(0, j)); a row may repeat. */
LLVMValueRef cg_gemm_gen_ukr(cg_gemm_gen *g, int mr, int nr, bool is_m_gather);

/* Generates, or finds the one the module has of its kind,
 *   void sgemm.pack_a.<t|n>.r<tail>(const float *src, float *dst,
 *                                   i64 mc, i64 kc, i64 ld):
 * copies the mc×kc block of A at src (A at (i, p)) into MR-tall panels,
 * each kc×MR floats, zero-filling the rows of a last partial panel
 * (tail rows: M mod MR). ld is A's stride that is not 1 (g->pack_a_ld:
 * a_cs for A^T, `t`, else a_rs), an argument, so that the sgemms of a
 * program share one routine per kind; noinline, optimized and compiled
 * once. */
LLVMValueRef cg_gemm_gen_pack_a(cg_gemm_gen *g);

/* Generates, or finds, void sgemm.pack_b.<vw>.<r|t|g>.c<tail>(const
 * float *src, float *dst, i64 nc, i64 kc, i64 ld): copies the kc×nc
 * block of B at src (B at (p, j)) into NR-wide panels, each kc×NR
 * floats, zero-filling the columns of a last partial panel (tail
 * columns: N mod NR). ld is B's stride that is not 1 (g->pack_b_ld:
 * b_rs for B stored by rows, `r`; b_cs for B^T, packed by transposes,
 * `t`, or gathered when its rows are shorter than a vector, `g`). */
LLVMValueRef cg_gemm_gen_pack_b(cg_gemm_gen *g);

#endif
