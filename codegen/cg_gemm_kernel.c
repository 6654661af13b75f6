/*
 * cg_gemm_kernel.c - the inner pieces of the generated sgemm: the
 * register-tiled micro-kernel and the routines that pack A and B into
 * panels.
 *
 * The micro-kernel keeps an MR×NR tile of C in 12 vector accumulators
 * (SSA values carried by phis, so they live in registers): 6×16 as
 * <8 x float> (ymm) on AVX2, 6×32 as <16 x float> (zmm) on AVX-512. Per
 * step p of the inner dimension it loads the two vectors of a B panel
 * row, broadcasts six A values and issues twelve llvm.fma calls. The
 * k-loop is unrolled CG_GEMM_UNROLL times by hand with a remainder loop;
 * the O3 pipeline neither tiles nor interchanges, so the shape of this
 * loop is the code's speed. Edge tiles of a shape whose M or N is not a
 * multiple of the tile get their own kernels with fewer rows and a masked
 * last vector: shapes are known at compile time, so every edge is.
 */
#include "cg_gemm_gen.h"

#include <stdio.h>

/* Packing A^T reads its source this many stored rows ahead of the row
 * it copies, so that the misses of an operand another kernel left in L3
 * or memory overlap: each row's piece of the block is a few cache lines
 * a page or more from the last row's, which the hardware's prefetchers
 * do not follow. (The same hint in the other packing routines, whose
 * reads are sequential, made them slower.) */
#define PACK_AHEAD_ROWS 8
/* Stored rows of A^T packed a panel at a time (pack_at): each panel gets
 * a run of PACK_AT_ROWS·MR floats (3 cache lines) at once. */
#define PACK_AT_ROWS 8
/* Rows of B packed a panel at a time (pack_b_by_rows): each panel gets a
 * run of PACK_B_ROWS·NR floats (1 KB with zmm) at once. */
#define PACK_B_ROWS 8

/* cg_prefetch of float `at` of p, which may lie past the operand. */
static void prefetch(cg_fn *f, LLVMValueRef p, LLVMValueRef at, bool is_write)
{
	cg_prefetch(f, LLVMBuildGEP2(f->b, cg_t_f32(f), p, &at, 1, ""),
		    is_write);
}

/* What shapes one micro-kernel. Its name says all of the constants, so
 * the variants of a module whose tiles agree share one function; the
 * strides of the matrices in place (A's and B's when not packed, C's,
 * the epilogue's) are its arguments. A packed panel's strides are
 * constants. */
typedef struct ukr_shape {
	unsigned vw;   /* floats per vector */
	int mr;        /* rows of the tile */
	int nv;        /* vectors per row */
	unsigned tail; /* valid lanes of the last vector (1..VW) */
	bool is_a_packed, is_b_packed;
	bool is_at; /* A in place is A^T: a_rs = 1, a_cs the argument */
	int n_epi;  /* terms of the epilogue */
	/* Step p reads k = kidx[p] (the last parameter): skip_zero_k's k
	 * kept, read in place. */
	bool is_k_gather;
	/* Row r of the tile is row rows[r] of A, of C and of the
	 * epilogue's terms (the last parameter): skip_zero_m's rows kept or
	 * is_rows_given's, read and written in place. */
	bool is_m_gather;
	/* Set in the function: constants or its parameters. */
	LLVMValueRef a_rs, a_cs, b_rs, ldc;
	/* is_m_gather: row r's number (i64), where it starts in A and in
	 * C. */
	LLVMValueRef row_i[CG_GEMM_MR], a_row[CG_GEMM_MR], c_row[CG_GEMM_MR];
	LLVMValueRef epi_rs[CG_GEMM_MAX_EPILOGUE]; /* their row strides */
} ukr_shape;

/* r * rs as an i64 value, folded when rs is a constant. */
static LLVMValueRef times(cg_fn *f, int64_t r, LLVMValueRef rs)
{
	if (r == 0)
		return cg_i64(f, 0);
	return r == 1 ? rs : cg_mul(f, cg_i64(f, r), rs);
}

/* Vector v of row p of the B operand. A packed panel is 64-byte aligned
 * (its rows NR floats apart) and zero-padded, so it is read whole; B in place is read only as far as
 * the tile reaches. */
static LLVMValueRef load_b(cg_fn *f, const ukr_shape *u, LLVMValueRef brow,
			   int v)
{
	LLVMValueRef p = cg_ati(f, brow, (int64_t)v * u->vw);
	if (u->is_b_packed)
		return cg_vload(f, u->vw, p, u->vw * 4);
	if (v == u->nv - 1 && u->tail < u->vw)
		return cg_vload_part(f, u->vw, p, u->tail);
	return cg_vload(f, u->vw, p, 4);
}

/* One step of the inner dimension: acc[r][v] += a(r, p) * b(p, v). */
static void ukr_step(cg_fn *f, const ukr_shape *u, LLVMValueRef a,
		     LLVMValueRef b, LLVMValueRef p, LLVMValueRef *acc)
{
	LLVMTypeRef vt = cg_t_vec(f, u->vw);
	LLVMValueRef bv[2];
	if (u->is_k_gather) {
		LLVMValueRef kidx = LLVMGetParam(f->fn,
						 LLVMCountParams(f->fn) - 1);
		LLVMTypeRef i32 = cg_t_i32(f);
		p = LLVMBuildSExt(f->b,
				  LLVMBuildLoad2(f->b, i32,
						 LLVMBuildInBoundsGEP2(f->b, i32,
								       kidx, &p,
								       1, ""),
						 ""),
				  cg_t_i64(f), "");
	}
	LLVMValueRef brow = cg_at(f, b, cg_mul(f, p, u->b_rs));
	LLVMValueRef arow = cg_at(f, a, cg_mul(f, p, u->a_cs));

	for (int v = 0; v < u->nv; v++)
		bv[v] = load_b(f, u, brow, v);
	for (int r = 0; r < u->mr; r++) {
		LLVMValueRef s = cg_load(f,
					 u->is_m_gather
						 ? cg_at(f, u->a_row[r],
							 cg_mul(f, p, u->a_cs))
						 : cg_at(f, arow,
							 times(f, r, u->a_rs)));
		s = cg_splat(f, u->vw, s);
		for (int v = 0; v < u->nv; v++) {
			LLVMValueRef args[3] = {s, bv[v], acc[r * u->nv + v]};
			acc[r * u->nv + v] = cg_intrinsic(f, "llvm.fma", &vt, 1,
							  args, 3);
		}
	}
}

/* Phis for the accumulators at the top of the current block, entered
 * from `from` with the values init. */
static void acc_phis(cg_fn *f, int n, LLVMValueRef *phi, LLVMValueRef *init,
		     LLVMBasicBlockRef from)
{
	for (int i = 0; i < n; i++) {
		phi[i] = LLVMBuildPhi(f->b, LLVMTypeOf(init[i]), "acc");
		LLVMAddIncoming(phi[i], &init[i], &from, 1);
	}
}

static void acc_close(int n, LLVMValueRef *phi, LLVMValueRef *val,
		      LLVMBasicBlockRef from)
{
	for (int i = 0; i < n; i++)
		LLVMAddIncoming(phi[i], &val[i], &from, 1);
}

/* A loop over p from `start` while p < end, `steps` unrolled steps a
 * trip, carrying the accumulators in phis. On return acc holds their
 * values after the loop, the builder is there, and the result is p. */
static LLVMValueRef k_loop(cg_fn *f, const ukr_shape *u, LLVMValueRef start,
			   LLVMValueRef end, int steps, LLVMValueRef *acc)
{
	LLVMValueRef a = LLVMGetParam(f->fn, 0), b = LLVMGetParam(f->fn, 1);
	LLVMValueRef phi[CG_GEMM_MR * 2], val[CG_GEMM_MR * 2];
	int n = u->mr * u->nv;
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(f->b);
	LLVMBasicBlockRef hdr = cg_block(f, "k"), body = cg_block(f, "k.body");
	LLVMBasicBlockRef done = cg_block(f, "k.done");

	LLVMBuildBr(f->b, hdr);
	LLVMPositionBuilderAtEnd(f->b, hdr);
	LLVMValueRef p = LLVMBuildPhi(f->b, cg_t_i64(f), "p");
	LLVMAddIncoming(p, &start, &pre, 1);
	acc_phis(f, n, phi, acc, pre);
	LLVMBuildCondBr(f->b, LLVMBuildICmp(f->b, LLVMIntSLT, p, end, ""), body,
			done);

	LLVMPositionBuilderAtEnd(f->b, body);
	for (int i = 0; i < n; i++)
		val[i] = phi[i];
	for (int s = 0; s < steps; s++)
		ukr_step(f, u, a, b, cg_addi(f, p, s), val);
	LLVMValueRef next = cg_addi(f, p, steps);
	LLVMBuildBr(f->b, hdr);
	LLVMAddIncoming(p, &next, &body, 1);
	acc_close(n, phi, val, body);

	LLVMPositionBuilderAtEnd(f->b, done);
	for (int i = 0; i < n; i++)
		acc[i] = phi[i];
	return p;
}

/* The k-loop: CG_GEMM_UNROLL steps a trip while they fit in kc, then
 * one step a trip. */
static void ukr_loop(cg_fn *f, const ukr_shape *u, LLVMValueRef *acc)
{
	LLVMValueRef kc = LLVMGetParam(f->fn, 3);
	LLVMValueRef kc4 = LLVMBuildAnd(f->b, kc, cg_i64(f, -CG_GEMM_UNROLL),
					"");
	LLVMValueRef p = k_loop(f, u, cg_i64(f, 0), kc4, CG_GEMM_UNROLL, acc);
	k_loop(f, u, p, kc, 1, acc);
}

/* Vector v of row r of the tile of the matrix at p (row stride rs). */
static LLVMValueRef tile_load(cg_fn *f, const ukr_shape *u, LLVMValueRef p,
			      LLVMValueRef rs, int r, int v)
{
	LLVMValueRef at = cg_ati(f, cg_at(f, p, times(f, r, rs)),
				 v * (int64_t)u->vw);
	if (v == u->nv - 1 && u->tail < u->vw)
		return cg_vload_part(f, u->vw, at, u->tail);
	return cg_vload(f, u->vw, at, 4);
}

/* The epilogue's terms added to x, vector v of row r, one plain add
 * each (no fast-math flags: the unfused adds' rounding). Gathering rows,
 * a term's pointer is at its row 0 and row r is its row rows[r]. */
static LLVMValueRef add_terms(cg_fn *f, const ukr_shape *u, LLVMValueRef x,
			      int r, int v)
{
	for (int t = 0; t < u->n_epi; t++) {
		LLVMValueRef e = LLVMGetParam(f->fn, CG_GEMM_UKR_ARGS + 1 +
							     (unsigned)t);
		LLVMValueRef term =
			u->is_m_gather ? tile_load(f, u,
						   cg_at(f, e,
							 cg_mul(f, u->row_i[r],
								u->epi_rs[t])),
						   cg_i64(f, 0), 0, v)
				       : tile_load(f, u, e, u->epi_rs[t], r, v);
		x = LLVMBuildFAdd(f->b, x, term, "");
	}
	return x;
}

/* Where row r of the C tile at c starts. */
static LLVMValueRef c_row_at(cg_fn *f, const ukr_shape *u, LLVMValueRef c, int r)
{
	return u->is_m_gather ? u->c_row[r] : cg_at(f, c, times(f, r, u->ldc));
}

/* Writes the tile to C, adding what is there if is_acc, then the
 * epilogue's terms if is_epi. */
static void ukr_store(cg_fn *f, const ukr_shape *u, LLVMValueRef *acc,
		      bool is_acc, bool is_epi)
{
	LLVMValueRef c = LLVMGetParam(f->fn, 2);
	for (int r = 0; r < u->mr; r++) {
		for (int v = 0; v < u->nv; v++) {
			LLVMValueRef p = cg_ati(f, c_row_at(f, u, c, r),
						v * (int64_t)u->vw);
			bool is_masked = v == u->nv - 1 && u->tail < u->vw;
			LLVMValueRef x = acc[r * u->nv + v];
			if (is_acc)
				x = cg_fast(LLVMBuildFAdd(f->b,
							  tile_load(f, u,
								    c_row_at(f,
									     u, c,
									     r),
								    cg_i64(f, 0),
								    0, v),
							  x, ""),
					    false);
			if (is_epi)
				x = add_terms(f, u, x, r, v);
			if (is_masked)
				cg_vstore_part(f, x, p, u->tail);
			else
				cg_vstore(f, x, p, 4);
		}
	}
}

/* The stores ending the micro-kernel: one block for each case of
 * (accumulate, and with an epilogue is_last), chosen by a switch. */
static void ukr_stores(cg_fn *f, const ukr_shape *u, LLVMValueRef *acc)
{
	int n_cases = u->n_epi ? 4 : 2;
	LLVMValueRef sel = LLVMBuildZExt(f->b, LLVMGetParam(f->fn, 4),
					 cg_t_i64(f), "");
	if (u->n_epi)
		sel = cg_add(f, cg_muli(f, sel, 2),
			     LLVMBuildZExt(f->b,
					   LLVMGetParam(f->fn, CG_GEMM_UKR_ARGS),
					   cg_t_i64(f), ""));
	LLVMBasicBlockRef blocks[4];
	for (int k = 0; k < n_cases; k++)
		blocks[k] = cg_block(f, "store");
	LLVMValueRef sw = LLVMBuildSwitch(f->b, sel, blocks[0],
					  (unsigned)n_cases - 1);
	for (int k = 0; k < n_cases; k++) {
		if (k)
			LLVMAddCase(sw, cg_i64(f, k), blocks[k]);
		LLVMPositionBuilderAtEnd(f->b, blocks[k]);
		bool is_acc = u->n_epi ? k >= 2 : k == 1;
		ukr_store(f, u, acc, is_acc, u->n_epi && k % 2 == 1);
		LLVMBuildRetVoid(f->b);
	}
}

/* Asks for the lines of the C tile (nr columns) before the k-loop, which
 * runs long enough to hide their misses: the stores (and the loads when
 * adding to C) at its end then hit. C is the largest operand that is
 * read and written, and with more than one k-block it travels to L3 and
 * back between them. */
static void prefetch_tile(cg_fn *f, const ukr_shape *u, int nr)
{
	LLVMValueRef c = LLVMGetParam(f->fn, 2);
	for (int r = 0; r < u->mr; r++) {
		LLVMValueRef base = u->is_m_gather ? u->c_row[r] : c;
		LLVMValueRef row = u->is_m_gather ? cg_i64(f, 0)
						  : times(f, r, u->ldc);
		for (int v = 0; v < u->nv; v++)
			prefetch(f, base,
				 LLVMBuildAdd(f->b, row,
					      cg_i64(f, v * (int64_t)u->vw), ""),
				 true);
		prefetch(f, base,
			 LLVMBuildAdd(f->b, row, cg_i64(f, nr - 1), ""), true);
	}
}

/* Lets the backend keep <16 x float> in zmm registers even where the
 * CPU's tuning prefers 256-bit vectors. */
static void wide_vectors(cg_fn *f, unsigned vw)
{
	char bits[16];
	snprintf(bits, sizeof bits, "%u", vw * 32);
	cg_fn_attr_str(f, "min-legal-vector-width", bits);
}

static ukr_shape ukr_shape_of(const cg_gemm_gen *g, int mr, int nr,
			      bool is_m_gather)
{
	int vw = g->plan.vw;
	ukr_shape u = {
		.vw = (unsigned)vw,
		.mr = mr,
		.nv = (nr + vw - 1) / vw,
		.is_a_packed = g->plan.pack_a,
		.is_b_packed = g->plan.pack_b,
		.is_at = !g->plan.pack_a && g->a_rs == 1,
		.n_epi = g->spec.n_epilogue,
		.is_k_gather = g->is_k_gather,
		.is_m_gather = is_m_gather,
	};
	u.tail = (unsigned)(nr - (u.nv - 1) * vw);
	return u;
}

/* The strides: a packed panel's constants, else the parameters. */
static void ukr_strides(cg_fn *f, ukr_shape *u)
{
	LLVMValueRef a_ld = LLVMGetParam(f->fn, 5);
	LLVMValueRef one = cg_i64(f, 1);
	u->a_rs = u->is_a_packed ? one : u->is_at ? one : a_ld;
	u->a_cs = u->is_a_packed ? cg_i64(f, CG_GEMM_MR)
		  : u->is_at     ? a_ld
				 : one;
	u->b_rs = u->is_b_packed ? cg_i64(f, (int64_t)u->vw * 2)
				 : LLVMGetParam(f->fn, 6);
	u->ldc = LLVMGetParam(f->fn, 7);
	for (int t = 0; t < u->n_epi; t++)
		u->epi_rs[t] = LLVMGetParam(f->fn,
					    CG_GEMM_UKR_ARGS + 1 +
						    (unsigned)(u->n_epi + t));
	if (!u->is_m_gather)
		return;
	LLVMValueRef rows = LLVMGetParam(f->fn, LLVMCountParams(f->fn) - 1);
	LLVMTypeRef i32 = cg_t_i32(f);
	for (int r = 0; r < u->mr; r++) {
		LLVMValueRef at = cg_i64(f, r);
		LLVMValueRef i = LLVMBuildSExt(
			f->b,
			LLVMBuildLoad2(f->b, i32,
				       LLVMBuildInBoundsGEP2(f->b, i32, rows,
							     &at, 1, ""),
				       ""),
			cg_t_i64(f), "");
		u->row_i[r] = i;
		u->a_row[r] = cg_at(f, LLVMGetParam(f->fn, 0),
				    cg_mul(f, i, u->a_rs));
		u->c_row[r] = cg_at(f, LLVMGetParam(f->fn, 2),
				    cg_mul(f, i, u->ldc));
	}
}

LLVMValueRef cg_gemm_gen_ukr(cg_gemm_gen *g, int mr, int nr, bool is_m_gather)
{
	cg_fn f;
	char name[256];
	ukr_shape u = ukr_shape_of(g, mr, nr, is_m_gather);
	LLVMContextRef ctx = LLVMGetModuleContext(g->mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
	LLVMTypeRef i1 = LLVMInt1TypeInContext(ctx);
	LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx);
	LLVMTypeRef params[CG_GEMM_UKR_ARGS + 2 + 2 * CG_GEMM_MAX_EPILOGUE] =
		{ptr, ptr, ptr, i64, i1, i64, i64, i64, i1};
	unsigned n_par = CG_GEMM_UKR_ARGS +
			 (u.n_epi ? 1 + 2 * (unsigned)u.n_epi : 0);
	LLVMValueRef acc[CG_GEMM_MR * 2];

	for (unsigned i = CG_GEMM_UKR_ARGS + 1; i < n_par; i++)
		params[i] = i < CG_GEMM_UKR_ARGS + 1 + (unsigned)u.n_epi ? ptr
									 : i64;
	if (u.is_k_gather || u.is_m_gather)
		params[n_par++] = ptr; /* kidx or rows */
	snprintf(name, sizeof name, "sgemm.ukr.%u.%dx%d.a%c.b%c.e%d%s", u.vw,
		 mr, nr,
		 u.is_a_packed ? 'p'
		 : u.is_at     ? 't'
			       : 'n',
		 u.is_b_packed ? 'p' : 'n', u.n_epi,
		 u.is_k_gather   ? ".kg"
		 : u.is_m_gather ? ".mg"
				 : "");
	LLVMTypeRef type = LLVMFunctionType(LLVMVoidTypeInContext(ctx), params,
					    n_par, 0);
	LLVMValueRef have = LLVMGetNamedFunction(g->mod, name);
	if (have && LLVMGlobalGetValueType(have) == type)
		return have;
	if (have) /* not ours: a name of its own */
		snprintf(name, sizeof name, "%s.ukr.%dx%d", g->name, mr, nr);
	cg_fn_begin(&f, g->mod, name, type, true);
	cg_fn_param_readonly(&f, 0);
	cg_fn_param_readonly(&f, 1);
	for (unsigned i = CG_GEMM_UKR_ARGS + 1;
	     i < CG_GEMM_UKR_ARGS + 1 + (unsigned)u.n_epi; i++)
		cg_fn_param_readonly(&f, i);
	if (u.is_k_gather || u.is_m_gather)
		cg_fn_param_readonly(&f, n_par - 1);
	/* One copy serves every tile of its shape: inlined, it would be
	 * optimized and compiled again in each variant's loop nest. */
	cg_fn_attr(&f, "noinline");
	cg_fn_attr_str(&f, CG_ATTR_SHARED, "1");
	wide_vectors(&f, u.vw);
	ukr_strides(&f, &u);
	for (int i = 0; i < u.mr * u.nv; i++)
		acc[i] = LLVMConstNull(cg_t_vec(&f, u.vw));
	prefetch_tile(&f, &u, nr);
	ukr_loop(&f, &u, acc);
	ukr_stores(&f, &u, acc);
	cg_fn_end(&f);
	return f.fn;
}

/* ---- packing ------------------------------------------------------------------ */

/* The packing routine of kind `name` that the module has, or NULL
 * after starting void <name>(const float *src, float *dst, i64 n, i64
 * kc, i64 ld) in f, its strides g->pk_rs and g->pk_cs (ld for the one
 * that is not 1: the row stride if is_ld_rows). */
static LLVMValueRef pack_begin(cg_fn *f, cg_gemm_gen *g, const char *name,
			       bool is_ld_rows)
{
	LLVMContextRef ctx = LLVMGetModuleContext(g->mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
	LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx);
	LLVMTypeRef params[5] = {ptr, ptr, i64, i64, i64};
	LLVMTypeRef type = LLVMFunctionType(LLVMVoidTypeInContext(ctx), params,
					    5, 0);
	char own[300];
	LLVMValueRef have = LLVMGetNamedFunction(g->mod, name);
	if (have && LLVMGlobalGetValueType(have) == type)
		return have;
	if (have) /* not ours: a name of its own */
		snprintf(own, sizeof own, "%s.%s", g->name, name);
	cg_fn_begin(f, g->mod, have ? own : name, type, true);
	cg_fn_param_readonly(f, 0);
	/* One copy per packing code, shared by the program's sgemms (the
	 * strides are an argument): inlined, O3 optimized and unrolled it
	 * again in every loop nest that calls it. A call per packed block
	 * costs nothing next to the copying. */
	cg_fn_attr(f, "noinline");
	cg_fn_attr_str(f, CG_ATTR_SHARED, "1");
	LLVMValueRef ld = LLVMGetParam(f->fn, 4);
	g->pk_rs = is_ld_rows ? ld : cg_i64(f, 1);
	g->pk_cs = is_ld_rows ? cg_i64(f, 1) : ld;
	return NULL;
}

/* x · the stride st, a value (a constant 1 folds). */
static LLVMValueRef by_stride(cg_fn *f, LLVMValueRef x, LLVMValueRef st)
{
	return LLVMIsConstant(st) && LLVMConstIntGetSExtValue(st) == 1
		       ? x
		       : cg_mul(f, x, st);
}

/* One row p of an A panel: dst[r] = src(r, p) for r < rows, else 0. */
static void pack_a_row(cg_fn *f, const cg_gemm_gen *g, LLVMValueRef src,
		       LLVMValueRef dst, LLVMValueRef p, int rows)
{
	LLVMValueRef col = cg_at(f, src, by_stride(f, p, g->pk_cs));
	LLVMValueRef out = cg_at(f, dst, cg_muli(f, p, CG_GEMM_MR));
	for (int r = 0; r < CG_GEMM_MR; r++) {
		LLVMValueRef x = r < rows ? cg_load(f,
						    cg_at(f, col,
							  times(f, r, g->pk_rs)))
					  : cg_f32(f, 0.0f);
		cg_store(f, x, cg_ati(f, out, r));
	}
}

/* Packs the panel of `rows` rows at src into dst (kc×MR floats). */
static void pack_a_panel(cg_fn *f, const cg_gemm_gen *g, LLVMValueRef src,
			 LLVMValueRef dst, LLVMValueRef kc, int rows)
{
	cg_loop lp;
	LLVMValueRef p = cg_loop_begin(f, &lp, cg_i64(f, 0), kc, 1);
	pack_a_row(f, g, src, dst, p, rows);
	cg_loop_end(f, &lp);
}

/* Packs rows [p, p + n) of the A^T block (ta: A(i, p) at a[i + p·lda])
 * into its panels: for each panel of rows [q, q+MR), the MR consecutive
 * floats at q of each of the n stored rows, as masked 8-float vectors;
 * a last partial panel (rows_tail rows, when the block's mc reaches past
 * full) gets its rows and zeros. The panel is the outer loop, so its n
 * pieces are one contiguous run of n·MR floats: storing a row's pieces
 * into all the panels in turn (KC·MR floats apart, 6 KB at KC = 256)
 * puts every piece in the same few L1 sets, and the stores' conflict
 * misses made that packing three times slower in cache. Each load also
 * prefetches the same columns PACK_AHEAD_ROWS stored rows ahead. */
static void pack_at_rows(cg_fn *f, const cg_gemm_gen *g, LLVMValueRef p, int n,
			 LLVMValueRef full, int rows_tail)
{
	cg_loop lq;
	LLVMValueRef src = LLVMGetParam(f->fn, 0), dst = LLVMGetParam(f->fn, 1);
	LLVMValueRef kc = LLVMGetParam(f->fn, 3);
	LLVMValueRef row = cg_at(f, src, by_stride(f, p, g->pk_cs));
	LLVMValueRef out = cg_at(f, dst, cg_muli(f, p, CG_GEMM_MR));
	LLVMValueRef q = cg_loop_begin(f, &lq, cg_i64(f, 0), full, CG_GEMM_MR);
	LLVMValueRef panel = cg_at(f, out, cg_mul(f, q, kc));
	for (int r = 0; r < n; r++) {
		LLVMValueRef at = cg_add(f, q, times(f, r, g->pk_cs));
		prefetch(f, row,
			 cg_add(f, at, times(f, PACK_AHEAD_ROWS, g->pk_cs)),
			 false);
		cg_vstore_part(f,
			       cg_vload_part(f, 8, cg_at(f, row, at), CG_GEMM_MR),
			       cg_ati(f, panel, r * CG_GEMM_MR), CG_GEMM_MR);
	}
	cg_loop_end(f, &lq);
	cg_loop_no_unroll(f, &lq);
	if (!rows_tail)
		return;
	LLVMValueRef has_tail = LLVMBuildICmp(f->b, LLVMIntSGT,
					      LLVMGetParam(f->fn, 2), full, "");
	LLVMBasicBlockRef join = cg_if_begin(f, has_tail);
	panel = cg_at(f, out, cg_mul(f, full, kc));
	for (int r = 0; r < n; r++) {
		LLVMValueRef at = cg_add(f, full, times(f, r, g->pk_cs));
		cg_vstore_part(f,
			       cg_vload_part(f, 8, cg_at(f, row, at),
					     (unsigned)rows_tail),
			       cg_ati(f, panel, r * CG_GEMM_MR), CG_GEMM_MR);
	}
	cg_if_end(f, join);
}

/* Packs the block's KC stored rows `run` at a time, then the rows left
 * one by one: pack(f, g, p, n, full, tail) packs the n rows from p.
 * None of these loops is unrolled (cg_loop_no_unroll, here and on the
 * loops over panels): a trip of a run's loop over panels copies run
 * pieces, and O3's unrolling of it by 4, and of the loops around it,
 * only made the routines larger to optimize and compile. */
typedef void (*pack_rows_fn)(cg_fn *f, const cg_gemm_gen *g, LLVMValueRef p,
			     int n, LLVMValueRef full, int tail);
static void pack_in_runs(cg_fn *f, const cg_gemm_gen *g, int run,
			 pack_rows_fn pack, LLVMValueRef full, int tail)
{
	cg_loop lp;
	LLVMValueRef kc = LLVMGetParam(f->fn, 3);
	LLVMValueRef whole = LLVMBuildAnd(f->b, kc, cg_i64(f, -(int64_t)run),
					  "");
	LLVMValueRef p = cg_loop_begin(f, &lp, cg_i64(f, 0), whole, run);
	pack(f, g, p, run, full, tail);
	cg_loop_end(f, &lp);
	cg_loop_no_unroll(f, &lp);
	p = cg_loop_begin(f, &lp, whole, kc, 1);
	pack(f, g, p, 1, full, tail);
	cg_loop_end(f, &lp);
	cg_loop_no_unroll(f, &lp);
}

/* A row block ends in a partial panel only at the last rows of A, so the
 * partial panel's height is M mod MR, a constant. */
LLVMValueRef cg_gemm_gen_pack_a(cg_gemm_gen *g)
{
	cg_fn f;
	cg_loop lp;
	int rows_tail = (int)(g->spec.m % CG_GEMM_MR);
	bool is_at = g->a_rs == 1;
	char name[64];

	snprintf(name, sizeof name, "sgemm.pack_a.%c.r%d", is_at ? 't' : 'n',
		 rows_tail);
	g->pack_a_ld = is_at ? g->a_cs : g->a_rs;
	LLVMValueRef have = pack_begin(&f, g, name, !is_at);
	if (have)
		return have;
	LLVMValueRef src = LLVMGetParam(f.fn, 0), dst = LLVMGetParam(f.fn, 1);
	LLVMValueRef mc = LLVMGetParam(f.fn, 2), kc = LLVMGetParam(f.fn, 3);
	LLVMValueRef full = cg_muli(&f,
				    LLVMBuildUDiv(f.b, mc,
						  cg_i64(&f, CG_GEMM_MR), ""),
				    CG_GEMM_MR);
	if (is_at) {
		/* A^T: each stored row is read contiguously, where the panel
		 * by panel order over all KC rows would read MR floats from
		 * each of KC rows lda apart (a page each, and LLVM turns that
		 * loop into gathers). */
		pack_in_runs(&f, g, PACK_AT_ROWS, pack_at_rows, full, rows_tail);
		LLVMBuildRetVoid(f.b);
		cg_fn_end(&f);
		return f.fn;
	}
	LLVMValueRef i = cg_loop_begin(&f, &lp, cg_i64(&f, 0), full, CG_GEMM_MR);
	pack_a_panel(&f, g, cg_at(&f, src, by_stride(&f, i, g->pk_rs)),
		     cg_at(&f, dst, cg_mul(&f, i, kc)), kc, CG_GEMM_MR);
	cg_loop_end(&f, &lp);
	if (rows_tail) {
		LLVMValueRef has_tail = LLVMBuildICmp(f.b, LLVMIntSLT, full, mc,
						      "");
		LLVMBasicBlockRef join = cg_if_begin(&f, has_tail);
		pack_a_panel(&f, g,
			     cg_at(&f, src, by_stride(&f, full, g->pk_rs)),
			     cg_at(&f, dst, cg_mul(&f, full, kc)), kc,
			     rows_tail);
		cg_if_end(&f, join);
	}
	LLVMBuildRetVoid(f.b);
	cg_fn_end(&f);
	return f.fn;
}

/* Lanes [vw·v, vw·(v+1)) of row p of a B panel, columns >= cols zero. */
static LLVMValueRef pack_b_vec(cg_fn *f, const cg_gemm_gen *g, LLVMValueRef row,
			       int v, int cols)
{
	int vw = g->plan.vw, lo = v * vw;
	int valid = cols - lo < 0 ? 0 : cols - lo;
	LLVMTypeRef vt = cg_t_vec(f, (unsigned)vw);

	if (valid > vw)
		valid = vw;
	if (valid == 0)
		return LLVMConstNull(vt);
	if (g->b_cs == 1) {
		LLVMValueRef p = cg_ati(f, row, lo);
		return valid == vw ? cg_vload(f, (unsigned)vw, p, 4)
				   : cg_vload_part(f, (unsigned)vw, p,
						   (unsigned)valid);
	}
	LLVMValueRef x = LLVMConstNull(vt);
	for (int c = 0; c < valid; c++) {
		LLVMValueRef s = cg_load(f, cg_at(f, row,
						  times(f, lo + c, g->pk_cs)));
		x = LLVMBuildInsertElement(f->b, x, s, cg_i32(f, c), "");
	}
	return x;
}

/* Rows p0 .. p0+vw of a B^T panel: each of the `cols` columns is vw
 * consecutive floats of a row of the stored N×K matrix, read as one
 * vector; two vw×vw transposes turn them into the panel's rows. */
static void pack_bt_rows(cg_fn *f, const cg_gemm_gen *g, LLVMValueRef src,
			 LLVMValueRef out, LLVMValueRef p0, int cols)
{
	int vw = g->plan.vw;
	LLVMTypeRef vt = cg_t_vec(f, (unsigned)vw);
	for (int v = 0; v < 2; v++) {
		LLVMValueRef r[16];
		for (int i = 0; i < vw; i++) {
			int c = v * vw + i;
			r[i] = c < cols
				       ? cg_vload(f, (unsigned)vw,
						  cg_at(f, src,
							cg_add(f, p0,
							       times(f, c,
								     g->pk_cs))),
						  4)
				       : LLVMConstNull(vt);
		}
		cg_transpose(f, r, (unsigned)vw);
		for (int k = 0; k < vw; k++) {
			LLVMValueRef row = cg_muli(f, cg_addi(f, p0, k),
						   g->plan.nr);
			cg_vstore(f, r[k],
				  cg_at(f, out, cg_addi(f, row, v * vw)),
				  (unsigned)vw * 4);
		}
	}
}

/* Packs the panel of `cols` columns at src into dst (kc×NR floats). B^T
 * (columns vw or more floats apart) goes vw rows at a time through
 * transposes in registers, the rows past the last whole vw one by one. */
static void pack_b_panel(cg_fn *f, const cg_gemm_gen *g, LLVMValueRef src,
			 LLVMValueRef dst, LLVMValueRef kc, int cols)
{
	cg_loop lp;
	LLVMValueRef start = cg_i64(f, 0);
	if (g->b_rs == 1 && g->b_cs >= g->plan.vw) {
		start = LLVMBuildAnd(f->b, kc, cg_i64(f, -(int64_t)g->plan.vw),
				     "");
		LLVMValueRef p0 = cg_loop_begin(f, &lp, cg_i64(f, 0), start,
						g->plan.vw);
		pack_bt_rows(f, g, src, dst, p0, cols);
		cg_loop_end(f, &lp);
	}
	LLVMValueRef p = cg_loop_begin(f, &lp, start, kc, 1);
	LLVMValueRef row = cg_at(f, src, by_stride(f, p, g->pk_rs));
	LLVMValueRef out = cg_at(f, dst, cg_muli(f, p, g->plan.nr));
	for (int v = 0; v < 2; v++)
		cg_vstore(f, pack_b_vec(f, g, row, v, cols),
			  cg_ati(f, out, v * g->plan.vw),
			  (unsigned)g->plan.vw * 4);
	cg_loop_end(f, &lp);
}

/* Rows [0, n) of the run at rows, columns from col (cols of them, the
 * rest of the panel zeros), into the panel at panel. */
static void pack_b_panel_rows(cg_fn *f, const cg_gemm_gen *g, LLVMValueRef rows,
			      LLVMValueRef col, LLVMValueRef panel, int n,
			      int cols)
{
	for (int r = 0; r < n; r++)
		for (int v = 0; v < 2; v++)
			cg_vstore(f,
				  pack_b_vec(f, g,
					     cg_at(f, rows,
						   cg_add(f, col,
							  times(f, r, g->pk_rs))),
					     v, cols),
				  cg_ati(f, panel,
					 r * g->plan.nr + v * g->plan.vw),
				  (unsigned)g->plan.vw * 4);
}

/* Rows [p, p + n) of B stored row by row (b_cs = 1) into its panels:
 * each panel gets the n rows' NR floats at its columns, one contiguous
 * run of n·NR floats; a last partial panel (cols_tail columns, when the
 * block's nc reaches past full) gets its columns and zeros. */
static void pack_b_rows(cg_fn *f, const cg_gemm_gen *g, LLVMValueRef p, int n,
			LLVMValueRef full, int cols_tail)
{
	cg_loop lj;
	int nr = g->plan.nr;
	LLVMValueRef src = LLVMGetParam(f->fn, 0), dst = LLVMGetParam(f->fn, 1);
	LLVMValueRef kc = LLVMGetParam(f->fn, 3);
	LLVMValueRef rows = cg_at(f, src, by_stride(f, p, g->pk_rs));
	LLVMValueRef out = cg_at(f, dst, cg_muli(f, p, nr));
	LLVMValueRef j = cg_loop_begin(f, &lj, cg_i64(f, 0), full, nr);
	pack_b_panel_rows(f, g, rows, j, cg_at(f, out, cg_mul(f, j, kc)), n, nr);
	cg_loop_end(f, &lj);
	cg_loop_no_unroll(f, &lj);
	if (!cols_tail)
		return;
	LLVMValueRef has_tail = LLVMBuildICmp(f->b, LLVMIntSLT, full,
					      LLVMGetParam(f->fn, 2), "");
	LLVMBasicBlockRef join = cg_if_begin(f, has_tail);
	pack_b_panel_rows(f, g, rows, full, cg_at(f, out, cg_mul(f, full, kc)),
			  n, cols_tail);
	cg_if_end(f, join);
}

/* As for A, a partial panel is the last columns of B: N mod NR wide. */
LLVMValueRef cg_gemm_gen_pack_b(cg_gemm_gen *g)
{
	cg_fn f;
	cg_loop lp;
	int nr = g->plan.nr, cols_tail = (int)(g->spec.n % nr);
	bool is_rows = g->b_cs == 1;
	char kind = is_rows ? 'r' : g->b_cs >= g->plan.vw ? 't' : 'g';
	char name[64];

	snprintf(name, sizeof name, "sgemm.pack_b.%d.%c.c%d", g->plan.vw, kind,
		 cols_tail);
	g->pack_b_ld = is_rows ? g->b_rs : g->b_cs;
	LLVMValueRef have = pack_begin(&f, g, name, is_rows);
	if (have)
		return have;
	wide_vectors(&f, (unsigned)g->plan.vw);
	LLVMValueRef src = LLVMGetParam(f.fn, 0), dst = LLVMGetParam(f.fn, 1);
	LLVMValueRef nc = LLVMGetParam(f.fn, 2), kc = LLVMGetParam(f.fn, 3);
	LLVMValueRef full = LLVMBuildAnd(f.b, nc, cg_i64(&f, -nr), "");
	if (is_rows) {
		/* B stored by rows, each row into every panel: the panel by
		 * panel order read NR floats from each of KC rows ldb apart,
		 * and at ldb = 1,024 (rows a page apart) that took 2.4 times
		 * as long from memory. */
		pack_in_runs(&f, g, PACK_B_ROWS, pack_b_rows, full, cols_tail);
		LLVMBuildRetVoid(f.b);
		cg_fn_end(&f);
		return f.fn;
	}
	LLVMValueRef j = cg_loop_begin(&f, &lp, cg_i64(&f, 0), full, nr);
	pack_b_panel(&f, g, cg_at(&f, src, by_stride(&f, j, g->pk_cs)),
		     cg_at(&f, dst, cg_mul(&f, j, kc)), kc, nr);
	cg_loop_end(&f, &lp);
	if (cols_tail) {
		LLVMValueRef has_tail = LLVMBuildICmp(f.b, LLVMIntSLT, full, nc,
						      "");
		LLVMBasicBlockRef join = cg_if_begin(&f, has_tail);
		pack_b_panel(&f, g,
			     cg_at(&f, src, by_stride(&f, full, g->pk_cs)),
			     cg_at(&f, dst, cg_mul(&f, full, kc)), kc,
			     cols_tail);
		cg_if_end(&f, join);
	}
	LLVMBuildRetVoid(f.b);
	cg_fn_end(&f);
	return f.fn;
}
