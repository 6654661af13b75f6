/*
 * cg_gemm.h - generated single-precision matrix multiplication.
 *
 * For a shape fixed at compile time, cg_gemm_add() generates into a
 * cg_module the function
 *
 *     void NAME(const float *A, const float *B, float *C);
 *     void NAME(const float *A, const float *B, float *C, int n_threads);
 *                                          (with spec.is_threads_arg)
 *
 * computing C = A·B (or C += A·B, or C = A·B + E0 + E1 with an
 * epilogue, whose terms' pointers follow C) on row-major matrices, or on
 * a batch of them, in the BLIS style: B packed into NR-wide panels, A into 6-tall
 * panels, a 6×NR register-tiled micro-kernel of 12 vector FMA
 * accumulators (6×16 with <8 x float> on AVX2, 6×32 with <16 x float> on
 * AVX-512), loops blocked by NC/KC/MC, and the row (or column) panels of
 * C split statically over OpenMP threads through libgomp, with no
 * barrier inside. Small shapes skip the packing; docs/codegen.md explains
 * the choices. Letters: C is M×N, the inner dimension is K.
 */
#ifndef ATTNC_CG_GEMM_H
#define ATTNC_CG_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "cg.h"

/* Which operands are copied into panels before the micro-kernel runs. */
typedef enum cg_gemm_pack {
	CG_GEMM_PACK_AUTO, /* chosen from the shape (cg_gemm_plan_make) */
	CG_GEMM_PACK_NONE, /* read A and B in place (B is packed if tb) */
	CG_GEMM_PACK_B,    /* pack B only */
	CG_GEMM_PACK_AB,   /* pack both */
} cg_gemm_pack;

#define CG_GEMM_MAX_EPILOGUE 2 /* terms of a gemm's epilogue */

typedef struct cg_gemm_spec {
	int64_t m, n, k;       /* C is m×n, the inner dimension k; all >= 1 */
	bool ta;               /* A is stored k×m (A^T row-major); else m×k */
	bool tb;               /* B is stored n×k; else k×n */
	int64_t lda, ldb, ldc; /* row strides in floats; 0 = dense */
	bool accumulate;       /* beta = 1: C += A·B; else C = A·B */
	/* Batch: `batch` products (0 means 1); matrix i of each operand
	 * starts stride_* floats after matrix i-1. A stride of A or B may be
	 * 0 (one matrix for the whole batch); C's must keep the matrices of
	 * C apart. Ignored for a batch of 1. (A B of stride 0 with a dense A
	 * is better folded into M: batch·m rows, one product.) */
	int64_t batch;
	int64_t stride_a, stride_b, stride_c;
	cg_gemm_pack pack; /* normally CG_GEMM_PACK_AUTO */
	/* Flops (2·m·n·k·batch) each thread must have at least; fewer
	 * threads run below that, one means no parallel region. 0 = the
	 * default. */
	int64_t grain;
	/* Floats per vector of the micro-kernel: 8 (AVX2, ymm) or 16
	 * (AVX-512, zmm); 0 = the widest the host CPU has. Either works on
	 * any x86-64 host with AVX2; LLVM splits vectors the CPU lacks. */
	int vector_width;
	/* NAME takes a 4th argument, int n_threads: the team size, capped by
	 * the grain (<= 0: OpenMP's default, as without the argument). */
	bool is_threads_arg;
	/* Generate only NAME.range (below), not NAME. */
	bool is_range_only;
	/* Leave out of the product each k whose row of B is all zero (B not
	 * tb, a batch of 1) while A's column k is finite: its terms are all
	 * zero, and the k kept keep the k-blocks of all of K (at least one
	 * from each), so C has the same bits and the work is that of the
	 * rows kept. For the weight gradient X^T dY of a masked loss, where
	 * dY is zero at every padding token. A call that finds a row of
	 * zeros in B (it stops at the first) lists the k kept, and its
	 * micro-kernels read them in place through the list, or, when A or
	 * B is packed, copies the rows kept, and A's matching columns,
	 * into its buffer; one that finds none reads A and B in place. */
	bool skip_zero_k;
	/* Leave out of the product each row of A that is all zero (a batch of
	 * 1), unless B holds an inf or NaN: that row of C is +0 (the
	 * sgemm's sum of zero terms), or C's plus +0 when accumulating. For
	 * the input gradient dY W^T of a masked loss. A call that finds a
	 * row of zeros in its part of A (it stops at the first) lists the
	 * rows kept and multiplies them in place through the list, or,
	 * when A is packed, copies them into its buffer, multiplies them
	 * there and copies the rows of the product back; a row left out
	 * gets +0, or plus +0 when accumulating (a -0 becomes +0, as in
	 * the plain sum of zero terms); one that finds none multiplies in
	 * place. Either way each row of C gets the bits of the product
	 * without skip_zero_m. */
	bool skip_zero_m;
	/* The rows of C to compute are the caller's to say: NAME.range
	 * takes one more argument after n, const int32_t *live (NULL:
	 * every row), m flags, row i computed where live[i] != 0 and +0
	 * elsewhere, each row computed with the bits of the plain product
	 * and its epilogue (through skip_zero_m's row gather, the
	 * epilogue's terms read at the rows gathered; NAME computes every
	 * row). A dead row gets +0, not its epilogue's terms. For the
	 * forward's products, whose padding rows no output reads
	 * (passes/rowlive.h). Needs a batch of 1, no accumulate, no
	 * skip_zero_k or skip_zero_m, and A not packed. */
	bool is_rows_given;
	/* The epilogue: n_epilogue (0..CG_GEMM_MAX_EPILOGUE) m×n terms
	 * added, in order, to the finished product as it is stored:
	 * C = ((A·B) + E0) + E1, each add rounded as a separate add would
	 * be, so the result is that of the unfused adds to the bit. Term t
	 * is read at E_t[i·epilogue_rs[t] + j]: a row stride of 0 is one
	 * row broadcast over the rows (a bias), n or more a matrix (a
	 * residual). NAME and NAME.range take the terms' pointers right
	 * after C. Needs a batch of 1, no accumulate and no skip_zero_m. */
	int n_epilogue;
	int64_t epilogue_rs[CG_GEMM_MAX_EPILOGUE];
} cg_gemm_spec;

#define CG_GEMM_MR 6 /* rows of the micro-kernel's tile */
/* The longest k-block: a KC×NR B panel (16 or 32 KB) stays in L1 (with
 * 16-float vectors, products 256 to 512 columns wide take 128:
 * choose_blocks in cg_gemm.c). */
#define CG_GEMM_KC_MAX 256
#define CG_GEMM_GRAIN_DEFAULT (1 << 19)

/* The choices the generator makes for a spec (all known at compile time). */
typedef struct cg_gemm_plan {
	int vw; /* floats per vector (8 or 16) */
	int nr; /* columns of the tile: two vectors, 2·vw */
	bool pack_a, pack_b;
	int64_t kc, mc, nc;    /* block sizes of the K, M and N loops */
	bool split_rows;       /* threads take row panels; else column panels */
	int max_threads;       /* most threads worth starting (by grain) */
	int64_t parts;         /* the finest split: row (or column) panels
			      * of C over the batch */
	int64_t lda, ldb, ldc; /* the strides with defaults filled in */
	int64_t batch;         /* >= 1 */
} cg_gemm_plan;

/* Floats per vector on the host CPU: 16 if it has AVX-512F, else 8. */
int cg_gemm_host_vector_width(void);

/* Checks a spec and fills in its plan. Returns false, with a message in
 * err (of err_len bytes), if the spec is invalid: a size < 1, a leading
 * dimension smaller than its row, a negative batch or stride, matrices
 * of C that overlap, a negative grain, a vector width other than 0, 8
 * or 16. */
bool cg_gemm_plan_make(const cg_gemm_spec *spec, cg_gemm_plan *plan, char *err,
		       size_t err_len);

/* Generates NAME and its internal helpers (NAME.par; the loop nest
 * sgemm.nest.*, which the variants of m share by kind, their sizes
 * its arguments, or NAME.work for the few kinds whose sizes stay
 * constants; the packing routines sgemm.pack_* and micro-kernels
 * sgemm.ukr.*, which they share by kind and tile shape) into m. NAME must be unique in m. Returns false,
 * with the message in cg_module_error(m), if the spec is invalid or the
 * module is already optimized or failed. The generated function may be
 * called from any thread, also inside a parallel region (it then runs on
 * that one thread); it needs no workspace: small packing buffers live on
 * its stack, larger ones are aligned_alloc'd for each call (a failed
 * allocation traps). */
bool cg_gemm_add(cg_module *m, const char *name, const cg_gemm_spec *spec);

/* cg_gemm_add also generates, for callers that split the work themselves
 * (the matmul kernels of cg_lower_nn.c; internal to the module with
 * spec.is_range_only):
 *
 *     void NAME.range(const float *A, const float *B, float *C,
 *                     [const float *E0, ...,] int64_t lo, int64_t hi,
 *                     int64_t n);
 *
 * parts [lo, hi) of C cut into n equal parts (0 <= lo <= hi <= n), on the
 * calling thread. Every element of C is computed the same way whatever
 * the cut, so results do not depend on it. */

#endif
