/*
 * cg_gemm.c - the generated sgemm's plan, loop nest, threads and entry
 * point (the micro-kernels and packing are in cg_gemm_kernel.c).
 *
 * Every thread runs the loop nest over its share of C, BLIS's five
 * loops (the nest is one function for the sgemms of a module of one
 * kind, their sizes its arguments: gen_work):
 *
 *   for jc in its columns, step NC          (B block: KC×NC, L2/L3)
 *     for pc in 0..K, step KC
 *       pack B[pc.., jc..] into NR-wide panels     (if plan.pack_b)
 *       for ic in its rows, step MC         (A block: MC×KC, L2)
 *         pack A[ic.., pc..] into MR-tall panels   (if plan.pack_a)
 *         for jr in 0..nc, step NR          (B panel: KC×NR, L1)
 *           for ir in 0..mc, step MR
 *             micro-kernel: C[ic+ir.., jc+jr..] (+)= Apanel · Bpanel
 *             prefetch a slice of the next A block and B block
 *
 * Threads split C statically and evenly by MR-row panels (or, for shapes
 * with few rows, by NR-column panels), counted over the whole batch, so
 * each element of C is computed by one thread in the same order whatever
 * the thread count: results do not depend on it. Each thread packs what
 * it reads into its own buffers, so threads never wait for each other
 * inside the region: packing B once per thread costs a little on an idle
 * machine, but a barrier costs a scheduler time slice whenever the
 * machine is busy and one thread is descheduled (measured here: 1024³ on
 * 2 loaded cores went from 27 to 118 GFLOP/s without the barriers). The
 * entry point starts the team with GOMP_parallel on NAME.par, which reads
 * the captures struct {A, B, C, buf}, or calls the nest directly when
 * one thread is all the grain allows.
 */
#include "cg_gemm_gen.h"

#include <llvm-c/TargetMachine.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MC_MAX 144  /* m-block: an MC×KC A block (144 KB) stays in L2 */
#define NC_MAX 4080 /* n-block: the KC×NC B block lives in L3 */
/* B is read in place, unpacked, when it holds at most this many floats
 * (128 KB: it stays in L2 and packing would cost more than it saves). */
#define DIRECT_B_MAX (32 * 1024)
/* ... or, leaving out B's rows of zeros (skip_zero_k, B not tb), this
 * many (512 KB, half a Zen 4's L2): packed, such a product copies the
 * rows it keeps of B and A, then packs the copies; in place, it reads
 * them through a list of the k kept. The vocabulary head's weight
 * gradient of the book's Transformer, 32x170 by K = 320 (54K floats of
 * B), ran 14-18% faster in place with half of B's rows zero, 5% with
 * none (on operands in cache). */
#define DIRECT_B_ZERO_K_MAX (128 * 1024)
/* A buffer of at most this many bytes goes on the caller's stack. */
#define STACK_BUF_MAX (32 * 1024)
#define ALIGN_BYTES 64

static int64_t ceil_div(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}
static int64_t round_up(int64_t a, int64_t b)
{
	return ceil_div(a, b) * b;
}
static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* ---- plan ------------------------------------------------------------------- */

static bool check_batch(const cg_gemm_spec *s, cg_gemm_plan *p, char *err,
			size_t err_len)
{
	int64_t c_span = (s->m - 1) * p->ldc + s->n;

	p->batch = s->batch ? s->batch : 1;
	if (s->batch < 0 ||
	    (p->batch > 1 &&
	     (s->stride_a < 0 || s->stride_b < 0 || s->stride_c < c_span))) {
		snprintf(err, err_len,
			 "gemm batch %lld needs strides >= 0 and matrices of C "
			 "apart (stride_c %lld < %lld)",
			 (long long)s->batch, (long long)s->stride_c,
			 (long long)c_span);
		return false;
	}
	return true;
}

static bool check_epilogue(const cg_gemm_spec *s, const cg_gemm_plan *p,
			   char *err, size_t err_len)
{
	if (s->n_epilogue == 0)
		return true;
	if (s->n_epilogue < 0 || s->n_epilogue > CG_GEMM_MAX_EPILOGUE ||
	    p->batch > 1 || s->accumulate || s->skip_zero_m) {
		snprintf(err, err_len,
			 "gemm epilogue of %d terms needs at most %d, a batch "
			 "of 1, no accumulate and no skip_zero_m",
			 s->n_epilogue, CG_GEMM_MAX_EPILOGUE);
		return false;
	}
	for (int t = 0; t < s->n_epilogue; t++)
		if (s->epilogue_rs[t] != 0 && s->epilogue_rs[t] < s->n) {
			snprintf(err, err_len,
				 "gemm epilogue term %d: row stride %lld is "
				 "neither 0 nor >= n",
				 t, (long long)s->epilogue_rs[t]);
			return false;
		}
	return true;
}

static bool check_spec(const cg_gemm_spec *s, cg_gemm_plan *p, char *err,
		       size_t err_len)
{
	int64_t a_row = s->ta ? s->m : s->k, b_row = s->tb ? s->k : s->n;

	if (s->m < 1 || s->n < 1 || s->k < 1) {
		snprintf(err, err_len,
			 "gemm sizes must be >= 1 (m=%lld n=%lld k=%lld)",
			 (long long)s->m, (long long)s->n, (long long)s->k);
		return false;
	}
	p->lda = s->lda ? s->lda : a_row;
	p->ldb = s->ldb ? s->ldb : b_row;
	p->ldc = s->ldc ? s->ldc : s->n;
	if (p->lda < a_row || p->ldb < b_row || p->ldc < s->n) {
		snprintf(err, err_len,
			 "gemm leading dimension shorter than a row (lda=%lld of %lld, "
			 "ldb=%lld of %lld, ldc=%lld of %lld)",
			 (long long)p->lda, (long long)a_row, (long long)p->ldb,
			 (long long)b_row, (long long)p->ldc, (long long)s->n);
		return false;
	}
	if (s->grain < 0) {
		snprintf(err, err_len, "gemm grain must be >= 0");
		return false;
	}
	if (!check_batch(s, p, err, err_len))
		return false;
	if (s->skip_zero_k && (s->tb || p->batch > 1)) {
		snprintf(err, err_len,
			 "gemm skip_zero_k needs B stored k×n and "
			 "a batch of 1");
		return false;
	}
	if (s->skip_zero_m && (s->skip_zero_k || p->batch > 1)) {
		snprintf(err, err_len,
			 "gemm skip_zero_m needs a batch of 1 and no "
			 "skip_zero_k");
		return false;
	}
	if (!check_epilogue(s, p, err, err_len))
		return false;
	if (s->is_rows_given && (p->batch > 1 || s->accumulate ||
				 s->skip_zero_k || s->skip_zero_m)) {
		snprintf(err, err_len,
			 "gemm is_rows_given needs a batch of 1, no "
			 "accumulate or skip_zero_k/m");
		return false;
	}
	if (s->vector_width != 0 && s->vector_width != 8 &&
	    s->vector_width != 16) {
		snprintf(err, err_len,
			 "gemm vector width must be 0, 8 or 16, not %d",
			 s->vector_width);
		return false;
	}
	return true;
}

int cg_gemm_host_vector_width(void)
{
	char *features = LLVMGetHostCPUFeatures();
	int vw = strstr(features, "+avx512f") ? 16 : 8;
	LLVMDisposeMessage(features);
	return vw;
}

static void choose_packing(const cg_gemm_spec *s, cg_gemm_plan *p)
{
	bool is_zero_k = s->skip_zero_k && !s->tb;
	bool is_big = s->k * s->n >
		      (is_zero_k ? DIRECT_B_ZERO_K_MAX : DIRECT_B_MAX);
	switch (s->pack) {
	case CG_GEMM_PACK_AUTO:
		p->pack_a = is_big;
		p->pack_b = is_big || s->tb;
		return;
	case CG_GEMM_PACK_NONE:
		p->pack_a = false;
		p->pack_b = s->tb; /* the kernel needs contiguous B rows */
		return;
	case CG_GEMM_PACK_B:
		p->pack_a = false;
		p->pack_b = true;
		return;
	case CG_GEMM_PACK_AB:
		p->pack_a = true;
		p->pack_b = true;
		return;
	}
}

/* The longest k-block with 16-float vectors of a product NARROW_N_MIN
 * to NARROW_N_MAX columns wide: its KC×NR B panel, 16 KB, stays in L1
 * beside the A panels the micro-kernel streams (a 32 KB one fills a Zen
 * 4's L1). On the width-256 GPT step's products of 256 columns that
 * made the sgemm 1.5-4% faster; on those of 1,024 columns C's extra
 * load and store per tile and k-block cost about 1% more than it saved
 * (docs/benchmarks.md). The k-blocks are where a product's sums round,
 * so narrower products, not measured, keep theirs: the book's models
 * (none of 256 columns) train to the same bits. With 8-float vectors
 * the panel is 16 KB at CG_GEMM_KC_MAX already. */
#define KC_NARROW_MAX 128
#define NARROW_N_MIN 256
#define NARROW_N_MAX 512

/* Block sizes balanced over the blocks: K=300 gives two k-blocks of 150,
 * not 256 + 44. */
static void choose_blocks(const cg_gemm_spec *s, cg_gemm_plan *p)
{
	bool is_narrow = p->vw == 16 && s->n >= NARROW_N_MIN &&
			 s->n <= NARROW_N_MAX;
	int64_t kc_max = is_narrow ? KC_NARROW_MAX : CG_GEMM_KC_MAX;
	p->kc = ceil_div(s->k, ceil_div(s->k, kc_max));
	p->mc = min64(MC_MAX, round_up(s->m, CG_GEMM_MR));
	p->nc = round_up(ceil_div(s->n, ceil_div(s->n, NC_MAX)), p->nr);
}

/* Threads split C by row panels or by column panels. Each thread reads
 * (and packs) the whole of the operand the split does not cut: all of B
 * (k×n) when rows are split, all of A (k×m) when columns are. So a
 * product with fewer rows than columns splits its columns when there
 * are enough of them (SPLIT_PARTS_MIN, as many as rows would give at
 * least), the weight gradients X^T dY of an MLP's wide layer above all
 * (256×1024 by K = 1,024 tokens: each of 2 threads packed the 4 MB of
 * dY, where A is 1 MB). A batch's panels are counted across its
 * products, which splits rows best. The split changes no sum: each
 * element of C is computed the same way either way. */
#define SPLIT_PARTS_MIN 16

static bool is_split_rows(const cg_gemm_spec *s, const cg_gemm_plan *p,
			  int64_t mp, int64_t np)
{
	if (p->batch == 1 && s->m < s->n && np >= SPLIT_PARTS_MIN)
		return false;
	return mp >= np || mp >= SPLIT_PARTS_MIN;
}

static void choose_threads(const cg_gemm_spec *s, cg_gemm_plan *p)
{
	int64_t mp = ceil_div(s->m, CG_GEMM_MR), np = ceil_div(s->n, p->nr);
	int64_t grain = s->grain ? s->grain : CG_GEMM_GRAIN_DEFAULT;
	int64_t most = 2 * s->m * s->n * s->k * p->batch / grain;

	p->split_rows = is_split_rows(s, p, mp, np);
	most = min64(most, (p->split_rows ? mp : np) * p->batch);
	p->max_threads = (int)(most < 1 ? 1 : min64(most, 1024));
	p->parts = (p->split_rows ? mp : np) * p->batch;
}

bool cg_gemm_plan_make(const cg_gemm_spec *spec, cg_gemm_plan *plan, char *err,
		       size_t err_len)
{
	if (!check_spec(spec, plan, err, err_len))
		return false;
	plan->vw = spec->vector_width ? spec->vector_width
				      : cg_gemm_host_vector_width();
	plan->nr = 2 * plan->vw;
	choose_packing(spec, plan);
	choose_blocks(spec, plan);
	choose_threads(spec, plan);
	if (spec->is_rows_given && plan->pack_a) {
		snprintf(err, err_len,
			 "gemm is_rows_given needs A read in place (m=%lld "
			 "n=%lld k=%lld packs A)",
			 (long long)spec->m, (long long)spec->n,
			 (long long)spec->k);
		return false;
	}
	return true;
}

bool cg_gemm_is_k_gather(const cg_gemm_spec *s, const cg_gemm_plan *p)
{
	return s->skip_zero_k && !p->pack_a && !p->pack_b;
}

bool cg_gemm_is_m_gather(const cg_gemm_spec *s, const cg_gemm_plan *p)
{
	return (s->skip_zero_m || s->is_rows_given) && !p->pack_a;
}

/* ---- buffers -------------------------------------------------------------- */

/* Floats of one thread's buffers: an A block, then a B block, then the
 * rows kept: (skip_zero_k) A's columns and B's rows, or with
 * cg_gemm_is_k_gather only their numbers (i32, in map), (skip_zero_m)
 * A's rows, their product and their row numbers (i32), or with
 * cg_gemm_is_m_gather only the numbers (and up to MR - 1 more, to a
 * whole panel), each region as large as its whole operand; then
 * (skip_zero_k) where each k-block starts among the k kept (i64, one a
 * block and the end: in the buffer, not on the stack, since K may be
 * millions of rows); all are multiples of 16 floats, so every part is
 * 64-byte aligned. */
typedef struct buf_layout {
	int64_t per_thread, b_off, ka_off, kb_off, kc_off, map_off, ks_off;
	int64_t live_off; /* is_rows_given: i32 flag, then m row flags */
} buf_layout;

static buf_layout layout_of(const cg_gemm_spec *s, const cg_gemm_plan *p)
{
	bool is_gather = cg_gemm_is_k_gather(s, p);
	bool copy_k = s->skip_zero_k && !is_gather;
	bool copy_m = s->skip_zero_m && !cg_gemm_is_m_gather(s, p);
	int64_t a = p->pack_a ? round_up(p->mc * p->kc, 16) : 0;
	int64_t b = p->pack_b ? p->nc * p->kc : 0;
	int64_t ka = copy_k || copy_m
			     ? round_up((s->ta ? s->k : s->m) * p->lda, 16)
			     : 0;
	int64_t kb = copy_k ? round_up(s->k * p->ldb, 16) : 0;
	int64_t kc = copy_m ? round_up(s->m * p->ldc, 16) : 0;
	int64_t map = copy_m ? round_up(s->m, 16)
		      : s->skip_zero_m || s->is_rows_given
			      ? round_up(s->m + CG_GEMM_MR, 16)
		      : is_gather ? round_up(s->k, 16)
				  : 0;
	int64_t ks = s->skip_zero_k
			     ? round_up(2 * (ceil_div(s->k, p->kc) + 1), 16)
			     : 0;
	int64_t live = s->is_rows_given ? round_up(s->m + 1, 16) : 0;
	return (buf_layout){.per_thread = a + b + ka + kb + kc + map + ks + live,
			    .b_off = a,
			    .ka_off = a + b,
			    .kb_off = a + b + ka,
			    .kc_off = a + b + ka + kb,
			    .map_off = a + b + ka + kb + kc,
			    .ks_off = a + b + ka + kb + kc + map,
			    .live_off = a + b + ka + kb + kc + map + ks};
}

/* ---- the work of one thread ---------------------------------------------- */

/* Closes a loop of the nest (or of its scans and copies) and keeps it
 * rolled: each trip calls a micro-kernel or packing routine, or tests
 * or copies a row, so unrolling saves nothing that shows, while O3
 * unrolled the tile loops (N / NR trips, known) and the zero-row scans
 * (K trips) of every sgemm in full, and optimized and compiled each
 * copy: about 0.25 CPU s of the 12-layer GPT training program's cold
 * compile. */
static void nest_loop_end(cg_fn *f, cg_loop *l)
{
	cg_loop_end(f, l);
	cg_loop_no_unroll(f, l);
}

/* A loop of the nest whose step is a value: a block size, an argument
 * of the shared loop nest (a constant in a shape's own). */
typedef struct vloop {
	cg_loop l;
	LLVMValueRef step;
} vloop;

static LLVMValueRef vloop_begin(cg_fn *f, vloop *v, LLVMValueRef start,
				LLVMValueRef end, LLVMValueRef step)
{
	v->step = step;
	return cg_loop_begin(f, &v->l, start, end, 1);
}

/* Closes v as cg_loop_end does, stepping by v->step, and keeps it
 * rolled (nest_loop_end). */
static void vloop_end(cg_fn *f, vloop *v)
{
	LLVMBasicBlockRef latch = LLVMGetInsertBlock(f->b);
	LLVMValueRef next = LLVMBuildNSWAdd(f->b, v->l.iv, v->step, "");
	LLVMBuildBr(f->b, v->l.header);
	LLVMAddIncoming(v->l.iv, &next, &latch, 1);
	LLVMPositionBuilderAtEnd(f->b, v->l.exit);
	cg_loop_no_unroll(f, &v->l);
}

/* x · the value st (a constant 1 folds). */
static LLVMValueRef by(cg_fn *f, LLVMValueRef x, LLVMValueRef st)
{
	return LLVMIsConstant(st) && LLVMConstIntGetSExtValue(st) == 1
		       ? x
		       : cg_mul(f, x, st);
}

/* A block of an operand to prefetch in slices, as its stored rows: the
 * first's address, their row stride, how many, their floats, and how
 * many each tile prefetches; tile (an i64 variable) counts the tiles
 * done. */
typedef struct pf_run {
	LLVMValueRef src, rows, len, per, tile, rs;
} pf_run;

/* The values the loop nest of NAME.work passes around. */
typedef struct work_env {
	cg_fn *f;
	cg_gemm_gen *g;
	LLVMValueRef a0, b0, c0; /* the operands of the first product */
	LLVMValueRef a, b, c;    /* those of the current product */
	LLVMValueRef abuf, bbuf, lo, hi, nt;
	LLVMValueRef k; /* the inner dimension: spec.k, or the k kept */
	/* skip_zero_k: i64[n_kblocks + 1], where each k-block of spec.k
	 * starts among the k kept (and the end): the product keeps spec.k's
	 * k-blocks, so that each block's sum is the one without zero rows
	 * left out. NULL without skip_zero_k. */
	LLVMValueRef kstart;
	/* cg_gemm_is_k_gather: i32[spec.k], the k kept in their order
	 * (w->k of them), which the micro-kernels read through; else NULL. */
	LLVMValueRef kidx;
	/* cg_gemm_is_m_gather, multiplying the rows kept: i32[], the rows
	 * of A and C that the rows [0, mc) of the loop nest stand for (the
	 * micro-kernels read through it); else NULL. */
	LLVMValueRef rows;
	LLVMValueRef jc, nc, pc, kc, ic, mc, is_acc;
	LLVMValueRef is_last; /* i1: the last k-block */
	/* skip_zero_m: multiplying the rows kept into their own buffer,
	 * which is never accumulated into. */
	bool is_kept_rows;
	LLVMValueRef epi[CG_GEMM_MAX_EPILOGUE]; /* the epilogue's terms */
	/* The next block that packing reads, prefetched a slice after
	 * each tile: A's (next_a_prefetch), B's (next_b_prefetch). */
	pf_run pfa, pfb;
	/* The shape, as values: the shared loop nest's arguments
	 * (is_shared), or constants in a shape's own (nest_consts). m, n
	 * are spec.m, spec.n; a_rs .. b_cs g's strides; kc_max, mc_max,
	 * nc_max the plan's block sizes; ukr_ald the micro-kernels' a_ld. */
	bool is_shared;
	LLVMValueRef m, n, a_rs, a_cs, b_rs, b_cs, ldc;
	LLVMValueRef kc_max, mc_max, nc_max, batch;
	LLVMValueRef stride_a, stride_b, stride_c;
	LLVMValueRef split_rows, accumulate; /* i1 */
	LLVMValueRef ukr_ald, pack_a_ld, pack_b_ld;
	LLVMValueRef epi_rs[CG_GEMM_MAX_EPILOGUE];
	/* is_shared: the micro-kernels by [row edge][column edge] (null
	 * where the shape has none) and the packing routines, arguments. */
	LLVMValueRef ukr_fn[4], pack_a_fn, pack_b_fn;
	/* ... and with is_m_gather its row-gathering kernels by column
	 * edge. */
	LLVMValueRef ukr_mg_fn[2];
	LLVMValueRef kk;  /* spec.k, all of K (w->k may be the k kept) */
	LLVMValueRef nkb; /* spec.k's k-blocks */
	/* The parts of the thread's buffer (layout_of): A's columns and
	 * B's rows kept (ka, kb), the list of rows or k kept (map), where
	 * the k-blocks start among the k kept (ks). */
	LLVMValueRef ka, kb, map, ks;
	/* is_rows_given: the i32 flag (nonzero: the call gave rows), then
	 * the m rows' flags (nonzero: computed). */
	LLVMValueRef live;
} work_env;

/* Address of A(i, p) or B(p, j) in place. */
static LLVMValueRef a_at(work_env *w, LLVMValueRef i, LLVMValueRef p)
{
	cg_fn *f = w->f;
	return cg_at(f, w->a, cg_add(f, by(f, i, w->a_rs), by(f, p, w->a_cs)));
}

static LLVMValueRef b_at(work_env *w, LLVMValueRef p, LLVMValueRef j)
{
	cg_fn *f = w->f;
	return cg_at(f, w->b, cg_add(f, by(f, p, w->b_rs), by(f, j, w->b_cs)));
}

/* Calls the micro-kernel for the tile at C(i, j): the edge variants run
 * on the last row panel of an M that is not a multiple of MR and on the
 * last column panel likewise. */
static void call_tile(work_env *w, LLVMValueRef i, LLVMValueRef j,
		      LLVMValueRef *args, unsigned n_args)
{
	cg_fn *f = w->f;
	cg_gemm_gen *g = w->g;
	LLVMValueRef is_re = LLVMBuildICmp(f->b, LLVMIntSGT, i,
					   cg_addi(f, w->m, -CG_GEMM_MR), "");
	LLVMValueRef is_ce = LLVMBuildICmp(f->b, LLVMIntSGT, j,
					   cg_addi(f, w->n, -g->plan.nr), "");
	/* Rows gathered are whole panels: full-height kernels only. */
	if (w->rows)
		is_re = LLVMConstInt(LLVMInt1TypeInContext(f->ctx), 0, 0);
	if (w->is_shared) {
		/* The shape's kernels are arguments: one indirect call, a
		 * few cycles next to a tile's k-block of FMAs. */
		LLVMValueRef fn;
		if (w->rows) {
			fn = LLVMBuildSelect(f->b, is_ce, w->ukr_mg_fn[1],
					     w->ukr_mg_fn[0], "");
		} else {
			LLVMValueRef row[2];
			for (int re = 0; re < 2; re++)
				row[re] = LLVMBuildSelect(f->b, is_ce,
							  w->ukr_fn[2 * re + 1],
							  w->ukr_fn[2 * re], "");
			fn = LLVMBuildSelect(f->b, is_re, row[1], row[0], "");
		}
		LLVMBuildCall2(f->b, w->rows ? g->ukr_mg_type : g->ukr_type, fn,
			       args, n_args, "");
		return;
	}
	LLVMValueRef sel = cg_add(
		f, cg_muli(f, LLVMBuildZExt(f->b, is_re, cg_t_i64(f), ""), 2),
		LLVMBuildZExt(f->b, is_ce, cg_t_i64(f), ""));
	LLVMBasicBlockRef join = cg_block(f, "tile.done"), first = NULL;
	LLVMBasicBlockRef blocks[4] = {NULL};
	LLVMValueRef ukr[4] = {g->ukr[0][0], g->ukr[0][1], g->ukr[1][0],
			       g->ukr[1][1]};
	if (w->rows) {
		ukr[0] = g->ukr_mg[0], ukr[1] = g->ukr_mg[1];
		ukr[2] = ukr[3] = NULL;
	}

	for (int k = 0; k < 4; k++) {
		if (!ukr[k])
			continue;
		blocks[k] = cg_block(f, "tile");
		if (!first)
			first = blocks[k];
	}
	LLVMValueRef sw = LLVMBuildSwitch(f->b, sel, first, 4);
	for (int k = 0; k < 4; k++) {
		if (!blocks[k])
			continue;
		if (blocks[k] != first)
			LLVMAddCase(sw, cg_i64(f, k), blocks[k]);
		LLVMPositionBuilderAtEnd(f->b, blocks[k]);
		cg_call(f, ukr[k], args, n_args);
		LLVMBuildBr(f->b, join);
	}
	LLVMPositionBuilderAtEnd(f->b, join);
}

/* Stored rows tile · per to (tile + 1) · per (fewer at the end) of the
 * block of pf, each line of them prefetched (a hint: lines past the
 * operand are no fault); then counts the tile. The loops stay loops:
 * unrolled in every loop nest, they made the GPT training program's
 * compile 15-20% slower, for a few prefetches a tile. */
static void prefetch_slice(work_env *w, const pf_run *pf)
{
	cg_fn *f = w->f;
	LLVMTypeRef i64 = cg_t_i64(f), ft = cg_t_f32(f);
	LLVMValueRef t = LLVMBuildLoad2(f->b, i64, pf->tile, "");
	LLVMBuildStore(f->b, cg_addi(f, t, 1), pf->tile);
	LLVMValueRef lo = cg_mul(f, t, pf->per);
	LLVMValueRef hi = cg_min(f, cg_add(f, lo, pf->per), pf->rows);
	cg_loop lr, ll;
	LLVMValueRef r = cg_loop_begin(f, &lr, lo, hi, 1);
	LLVMValueRef at = by(f, r, pf->rs);
	LLVMValueRef row = LLVMBuildGEP2(f->b, ft, pf->src, &at, 1, "");
	LLVMValueRef x = cg_loop_begin(f, &ll, cg_i64(f, 0), pf->len, 16);
	cg_prefetch(f, LLVMBuildGEP2(f->b, ft, row, &x, 1, ""), false);
	nest_loop_end(f, &ll);
	LLVMValueRef end = cg_addi(f, pf->len, -1);
	cg_prefetch(f, LLVMBuildGEP2(f->b, ft, row, &end, 1, ""), false);
	nest_loop_end(f, &lr);
}

/* Sets pf to prefetch, spread over `tiles` tiles (taken as 1 if fewer:
 * a thread with no rows has none, and no division by 0), the block at
 * src of `rows` stored rows (0: none) of len floats, rs apart. */
static void prefetch_run(work_env *w, pf_run *pf, LLVMValueRef src,
			 LLVMValueRef rows, LLVMValueRef len, LLVMValueRef rs,
			 LLVMValueRef tiles)
{
	cg_fn *f = w->f;
	pf->src = src;
	pf->rows = rows;
	pf->len = len;
	pf->rs = rs;
	LLVMValueRef one = cg_i64(f, 1);
	tiles = LLVMBuildSelect(f->b,
				LLVMBuildICmp(f->b, LLVMIntSLT, tiles, one, ""),
				one, tiles, "");
	pf->per = LLVMBuildSDiv(f->b, cg_add(f, rows, cg_addi(f, tiles, -1)),
				tiles, "");
	pf->tile = cg_var(f, cg_t_i64(f), cg_i64(f, 0));
}

/* ceil(n / d) of an i64 value n >= 0. */
static LLVMValueRef ceil_divv(cg_fn *f, LLVMValueRef n, int64_t d)
{
	return LLVMBuildSDiv(f->b, cg_addi(f, n, d - 1), cg_i64(f, d), "");
}

/* The jr and ir loops over the tiles of one (ic, pc, jc) block. */
static void tile_loops(work_env *w)
{
	cg_fn *f = w->f;
	cg_gemm_gen *g = w->g;
	cg_loop ljr, lir;
	LLVMValueRef jr = cg_loop_begin(f, &ljr, cg_i64(f, 0), w->nc,
					g->plan.nr);
	LLVMValueRef j = cg_add(f, w->jc, jr);
	/* Gathering k, the kernels start from k = 0 and read kidx at pc. */
	LLVMValueRef p0 = w->kidx ? cg_i64(f, 0) : w->pc;
	LLVMValueRef b = g->plan.pack_b ? cg_at(f, w->bbuf, cg_mul(f, jr, w->kc))
					: b_at(w, p0, j);
	LLVMValueRef ir = cg_loop_begin(f, &lir, cg_i64(f, 0), w->mc,
					CG_GEMM_MR);
	LLVMValueRef i = cg_add(f, w->ic, ir);
	/* Gathering rows, the kernels start from row 0 and read rows at i. */
	LLVMValueRef i0 = w->rows ? cg_i64(f, 0) : i;
	LLVMValueRef a = g->plan.pack_a ? cg_at(f, w->abuf, cg_mul(f, ir, w->kc))
					: a_at(w, i0, p0);
	LLVMValueRef c = cg_at(f, w->c, cg_add(f, by(f, i0, w->ldc), j));
	int n_epi = g->spec.n_epilogue;
	LLVMValueRef args[CG_GEMM_UKR_ARGS + 2 + 2 * CG_GEMM_MAX_EPILOGUE] =
		{a,          b,       c,      w->kc,     w->is_acc,
		 w->ukr_ald, w->b_rs, w->ldc, w->is_last};
	for (int t = 0; t < n_epi; t++) {
		args[CG_GEMM_UKR_ARGS + 1 + t] = cg_at(
			f, w->epi[t], cg_add(f, by(f, i0, w->epi_rs[t]), j));
		args[CG_GEMM_UKR_ARGS + 1 + n_epi + t] = w->epi_rs[t];
	}
	unsigned n_args = CG_GEMM_UKR_ARGS +
			  (n_epi ? 1 + 2 * (unsigned)n_epi : 0);
	if (w->kidx)
		args[n_args++] = LLVMBuildInBoundsGEP2(f->b, cg_t_i32(f),
						       w->kidx, &w->pc, 1, "");
	if (w->rows)
		args[n_args++] = LLVMBuildInBoundsGEP2(f->b, cg_t_i32(f),
						       w->rows, &i, 1, "");
	call_tile(w, i, j, args, n_args);
	if (g->plan.pack_a)
		prefetch_slice(w, &w->pfa);
	if (g->plan.pack_b)
		prefetch_slice(w, &w->pfb);
	nest_loop_end(f, &lir);
	nest_loop_end(f, &ljr);
}

/* Calls a packing routine: fn itself, or (w->is_shared) the argument
 * fn_arg, of the same type. */
static void call_pack(work_env *w, LLVMValueRef fn, LLVMValueRef fn_arg,
		      LLVMValueRef src, LLVMValueRef dst, LLVMValueRef n,
		      LLVMValueRef ld)
{
	LLVMValueRef args[5] = {src, dst, n, w->kc, ld};
	LLVMBuildCall2(w->f->b, LLVMGlobalGetValueType(fn),
		       w->is_shared ? fn_arg : fn, args, 5, "");
}

/* The k-block after the one at w->pc, and whether there is one (not
 * with skip_zero_k, whose k-blocks are the rows kept). */
static LLVMValueRef next_k_block(work_env *w, LLVMValueRef *kcn)
{
	cg_fn *f = w->f;
	LLVMValueRef next = LLVMBuildNSWAdd(f->b, w->pc, w->kc, "");
	*kcn = cg_min(f, w->kc_max, LLVMBuildNSWSub(f->b, w->k, next, ""));
	if (w->kstart)
		return LLVMConstInt(LLVMInt1TypeInContext(f->ctx), 0, 0);
	return LLVMBuildICmp(f->b, LLVMIntSLT, next, w->k, "");
}

/* Sets w->pfa: the A block this thread packs after the one at w->ic,
 * prefetched over this block's tiles: its next MC rows at this k-block,
 * or after its last, its first rows at the next k-block (none after the
 * last). Packing reads an A block once, from L3 or memory where the
 * kernel before left the operand (a K = 256 block's rows are 1 KB long,
 * too short a run for the hardware's stream prefetchers): its misses
 * stalled the packing, where the tiles' FMAs now cover them. A prefetch
 * is a hint: results do not change. */
static void next_a_prefetch(work_env *w, LLVMValueRef r0, LLVMValueRef r1)
{
	cg_fn *f = w->f;
	cg_gemm_gen *g = w->g;
	LLVMBuilderRef b = f->b;
	LLVMValueRef mc = w->mc_max, kcn;
	LLVMValueRef next = LLVMBuildNSWAdd(b, w->ic, mc, "");
	LLVMValueRef left = LLVMBuildNSWSub(b, r1, next, "");
	LLVMValueRef is_row = LLVMBuildICmp(b, LLVMIntSGT, left, cg_i64(f, 0),
					    "");
	LLVMValueRef is_k = next_k_block(w, &kcn);
	LLVMValueRef i = LLVMBuildSelect(b, is_row, next, r0, "");
	LLVMValueRef p = LLVMBuildSelect(b, is_row, w->pc,
					 LLVMBuildNSWAdd(b, w->pc, w->kc, ""),
					 "");
	LLVMValueRef mcn = cg_min(f, mc,
				  LLVMBuildSelect(b, is_row, left,
						  LLVMBuildNSWSub(b, r1, r0, ""),
						  ""));
	kcn = LLVMBuildSelect(b, is_row, w->kc, kcn, "");
	LLVMValueRef at = cg_add(f, by(f, i, w->a_rs), by(f, p, w->a_cs));
	LLVMValueRef src = LLVMBuildGEP2(b, cg_t_f32(f), w->a, &at, 1, "");
	/* A^T: the block is kc stored rows of mc floats; else mc of kc */
	LLVMValueRef rows = LLVMBuildSelect(b, LLVMBuildOr(b, is_row, is_k, ""),
					    g->spec.ta ? kcn : mcn,
					    cg_i64(f, 0), "");
	LLVMValueRef tiles = cg_mul(f, ceil_divv(f, w->nc, g->plan.nr),
				    ceil_divv(f, w->mc, CG_GEMM_MR));
	prefetch_run(w, &w->pfa, src, rows, g->spec.ta ? mcn : kcn,
		     g->spec.ta ? w->a_cs : w->a_rs, tiles);
}

/* Sets w->pfb: the B block packed at the next k-block (none after the
 * last), prefetched over all of this k-block's tiles (rows r0 to r1),
 * as next_a_prefetch does A's. */
static void next_b_prefetch(work_env *w, LLVMValueRef r0, LLVMValueRef r1)
{
	cg_fn *f = w->f;
	cg_gemm_gen *g = w->g;
	LLVMBuilderRef b = f->b;
	LLVMValueRef kcn, is_k = next_k_block(w, &kcn);
	LLVMValueRef p = LLVMBuildNSWAdd(b, w->pc, w->kc, "");
	LLVMValueRef at = cg_add(f, by(f, p, w->b_rs), by(f, w->jc, w->b_cs));
	LLVMValueRef src = LLVMBuildGEP2(b, cg_t_f32(f), w->b, &at, 1, "");
	/* B^T: the block is nc stored rows of kc floats; else kc of nc */
	LLVMValueRef rows = LLVMBuildSelect(b, is_k, g->spec.tb ? w->nc : kcn,
					    cg_i64(f, 0), "");
	LLVMValueRef tiles = cg_mul(f, ceil_divv(f, w->nc, g->plan.nr),
				    ceil_divv(f, LLVMBuildNSWSub(b, r1, r0, ""),
					      CG_GEMM_MR));
	prefetch_run(w, &w->pfb, src, rows, g->spec.tb ? kcn : w->nc,
		     g->spec.tb ? w->b_cs : w->b_rs, tiles);
}

/* The ic loop over this thread's rows, packing each A block. */
static void row_blocks(work_env *w, LLVMValueRef r0, LLVMValueRef r1)
{
	cg_fn *f = w->f;
	vloop lic;
	w->ic = vloop_begin(f, &lic, r0, r1, w->mc_max);
	w->mc = cg_min(f, w->mc_max, LLVMBuildNSWSub(f->b, r1, w->ic, ""));
	if (w->g->plan.pack_a) {
		call_pack(w, w->g->pack_a, w->pack_a_fn, a_at(w, w->ic, w->pc),
			  w->abuf, w->mc, w->pack_a_ld);
		next_a_prefetch(w, r0, r1);
	}
	tile_loops(w);
	vloop_end(f, &lic);
}

/* Opens the pc loop over the k-blocks of w->k: w->pc, w->kc, w->is_last. */
static void k_block(work_env *w, vloop *lpc)
{
	cg_fn *f = w->f;
	w->pc = vloop_begin(f, lpc, cg_i64(f, 0), w->k, w->kc_max);
	w->kc = cg_min(f, w->kc_max, LLVMBuildNSWSub(f->b, w->k, w->pc, ""));
	w->is_last = LLVMBuildICmp(f->b, LLVMIntSGE,
				   LLVMBuildNSWAdd(f->b, w->pc, w->kc, ""),
				   w->k, "");
}

static LLVMValueRef kstart_at(work_env *w, LLVMValueRef i)
{
	return LLVMBuildInBoundsGEP2(w->f->b, cg_t_i64(w->f), w->kstart, &i, 1,
				     "");
}

/* skip_zero_k: opens the loop over spec.k's k-blocks, each the k kept
 * from it (at least one, keep_nonzero_k): w->pc, w->kc, w->is_last. */
static void kept_k_block(work_env *w, vloop *lpc)
{
	cg_fn *f = w->f;
	LLVMValueRef bi = vloop_begin(f, lpc, cg_i64(f, 0), w->nkb,
				      cg_i64(f, 1));
	LLVMValueRef end = LLVMBuildLoad2(f->b, cg_t_i64(f),
					  kstart_at(w, cg_addi(f, bi, 1)), "");
	w->pc = LLVMBuildLoad2(f->b, cg_t_i64(f), kstart_at(w, bi), "");
	w->kc = LLVMBuildNSWSub(f->b, end, w->pc, "");
	w->is_last = LLVMBuildICmp(f->b, LLVMIntEQ, bi, cg_addi(f, w->nkb, -1),
				   "");
}

/* The jc and pc loops: columns [c0, c1), rows [r0, r1). */
static void block_loops(work_env *w, LLVMValueRef r0, LLVMValueRef r1,
			LLVMValueRef c0, LLVMValueRef c1)
{
	cg_fn *f = w->f;
	const cg_gemm_plan *p = &w->g->plan;
	vloop ljc, lpc;
	w->jc = vloop_begin(f, &ljc, c0, c1, w->nc_max);
	w->nc = cg_min(f, w->nc_max, LLVMBuildNSWSub(f->b, c1, w->jc, ""));
	if (w->kstart)
		kept_k_block(w, &lpc);
	else
		k_block(w, &lpc);
	/* skip_zero_m multiplies into its own buffer, then adds. */
	LLVMValueRef is_later = LLVMBuildICmp(f->b, LLVMIntSGT, w->pc,
					      cg_i64(f, 0), "");
	if (w->is_shared)
		w->is_acc = LLVMBuildOr(f->b, w->accumulate, is_later, "");
	else
		w->is_acc = w->g->spec.accumulate && !w->is_kept_rows
				    ? LLVMConstInt(LLVMInt1TypeInContext(f->ctx),
						   1, 0)
				    : is_later;
	if (p->pack_b) {
		call_pack(w, w->g->pack_b, w->pack_b_fn, b_at(w, w->pc, w->jc),
			  w->bbuf, w->nc, w->pack_b_ld);
		next_b_prefetch(w, r0, r1);
	}
	row_blocks(w, r0, r1);
	vloop_end(f, &lpc);
	vloop_end(f, &ljc);
}

/* Whether v is a constant integer (its value in *c). */
static bool const_of(LLVMValueRef v, int64_t *c)
{
	if (!LLVMIsAConstantInt(v))
		return false;
	*c = LLVMConstIntGetSExtValue(v);
	return true;
}

/* Whether any float of the rows×n matrix at p (row stride rs, column
 * stride cs) is not 0 (NaN counts), or with is_finite_test, is an inf or
 * NaN (skip_zero_k, skip_zero_m). The answer does not depend on the
 * order of the scan, so it runs along the smaller stride (B = W^T, read
 * by columns, would be gathers), one loop when the matrix is dense.
 * The sizes are values: constants in a shape's own nest (which then
 * chooses as above), arguments in the shared one, whose strides that
 * are 1 are still constants, so it runs along those. */
static LLVMValueRef any_of(cg_fn *f, LLVMValueRef p, LLVMValueRef rows,
			   LLVMValueRef rs, LLVMValueRef n, LLVMValueRef cs,
			   bool is_finite_test)
{
	int64_t cr = 0, crs = 0, cn = 0, ccs = 0;
	bool is_rows = const_of(rows, &cr), is_rs = const_of(rs, &crs);
	bool is_n = const_of(n, &cn), is_cs = const_of(cs, &ccs);
	bool is_all = is_rows && is_rs && is_n && is_cs;
	bool is_line = (is_rows && cr <= 1) || (is_n && cn <= 1);
	bool swap = is_all ? cr > 1 && cn > 1 && crs < ccs
			   : !is_line && is_rs && crs == 1 &&
				     !(is_cs && ccs == 1);
	if (swap) {
		LLVMValueRef r = rows, st = rs;
		rows = n, rs = cs, n = r, cs = st;
		int64_t t = cr;
		cr = cn, cn = t;
		t = crs, crs = ccs, ccs = t;
	}
	if (is_all && cr > 1 && ccs == 1 && crs == cn) {
		n = cg_i64(f, cn * cr);
		rows = cg_i64(f, 1);
	}
	LLVMTypeRef i1 = LLVMInt1TypeInContext(f->ctx), ft = cg_t_f32(f);
	LLVMValueRef any = cg_var(f, i1, LLVMConstInt(i1, 0, 0));
	cg_loop lr, l;
	LLVMValueRef r = cg_loop_begin(f, &lr, cg_i64(f, 0), rows, 1);
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), n, 1);
	LLVMValueRef x = cg_load(f,
				 cg_at(f, p,
				       cg_add(f, by(f, r, rs), by(f, i, cs))));
	LLVMValueRef hit = is_finite_test
				   ? LLVMBuildFCmp(f->b, LLVMRealUGE,
						   cg_intrinsic(f, "llvm.fabs",
								&ft, 1, &x, 1),
						   cg_f32(f, INFINITY), "")
				   : LLVMBuildFCmp(f->b, LLVMRealUNE, x,
						   cg_f32(f, 0), "");
	LLVMValueRef was = LLVMBuildLoad2(f->b, i1, any, "");
	LLVMBuildStore(f->b, LLVMBuildOr(f->b, was, hit, ""), any);
	nest_loop_end(f, &l);
	nest_loop_end(f, &lr);
	return LLVMBuildLoad2(f->b, i1, any, "");
}

/* Whether hit(f, i, cx) holds for some i in [lo, hi), stopping at the
 * first i for which it does (a loop that stops early is not vectorized:
 * callers that scan whole blocks use any_of's loop). */
typedef LLVMValueRef (*hit_fn)(cg_fn *f, LLVMValueRef i, const void *cx);
static LLVMValueRef any_until_hit(cg_fn *f, LLVMValueRef lo, LLVMValueRef hi,
				  hit_fn hit, const void *cx)
{
	LLVMTypeRef i1 = LLVMInt1TypeInContext(f->ctx);
	LLVMValueRef any = cg_var(f, i1, LLVMConstInt(i1, 0, 0));
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, lo, hi, 1);
	LLVMBasicBlockRef yes = cg_block(f, "hit"), next = cg_block(f, "next");
	LLVMBuildCondBr(f->b, hit(f, i, cx), yes, next);
	LLVMPositionBuilderAtEnd(f->b, yes);
	LLVMBuildStore(f->b, LLVMConstInt(i1, 1, 0), any);
	LLVMBuildBr(f->b, l.exit);
	LLVMPositionBuilderAtEnd(f->b, next);
	nest_loop_end(f, &l);
	return LLVMBuildLoad2(f->b, i1, any, "");
}

/* The matrix (or row) an any_until_hit scan reads: at p, rows of stride
 * rs, n columns of stride cs. */
typedef struct {
	LLVMValueRef p, rs, n, cs;
} scan_cx;

/* Whether element i of the row is not 0 (NaN counts). */
static LLVMValueRef is_nonzero_at(cg_fn *f, LLVMValueRef i, const void *cx)
{
	const scan_cx *c = cx;
	LLVMValueRef x = cg_load(f, cg_at(f, c->p, by(f, i, c->cs)));
	return LLVMBuildFCmp(f->b, LLVMRealUNE, x, cg_f32(f, 0), "");
}

/* Whether row r of the matrix is all zero: a row of real data costs one
 * load, the scan stopping at its first nonzero. */
static LLVMValueRef is_zero_row_at(cg_fn *f, LLVMValueRef r, const void *cx)
{
	const scan_cx *c = cx;
	scan_cx row = {cg_at(f, c->p, by(f, r, c->rs)), NULL, c->n, c->cs};
	LLVMValueRef nz = any_until_hit(f, cg_i64(f, 0), c->n, is_nonzero_at,
					&row);
	return LLVMBuildNot(f->b, nz, "");
}

/* Whether any of the rows [r0, r1) of the matrix at p (row stride rs, n
 * columns of stride cs) is all zero, stopping at the first that is: the
 * sgemm leaves out rows (skip_zero_k, skip_zero_m) only when there is
 * one, so that data without padding costs about a load a row. */
static LLVMValueRef has_zero_row(cg_fn *f, LLVMValueRef p, LLVMValueRef r0,
				 LLVMValueRef r1, LLVMValueRef rs,
				 LLVMValueRef n, LLVMValueRef cs)
{
	scan_cx c = {p, rs, n, cs};
	return any_until_hit(f, r0, r1, is_zero_row_at, &c);
}

/* Copies n floats from src to dst, both of stride st. */
static void copy_strided(cg_fn *f, LLVMValueRef src, LLVMValueRef dst,
			 LLVMValueRef n, LLVMValueRef st)
{
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0), n, 1);
	LLVMValueRef at = by(f, i, st);
	cg_store(f, cg_load(f, cg_at(f, src, at)), cg_at(f, dst, at));
	nest_loop_end(f, &l);
}

/* skip_zero_m: copies the rows of A in [r0, r1) that are not all zero
 * (all of them if B is not finite: 0 times an inf is NaN) to ka and
 * their numbers to map; returns how many. */
static LLVMValueRef keep_nonzero_rows(work_env *w, LLVMValueRef ka,
				      LLVMValueRef map, LLVMValueRef r0,
				      LLVMValueRef r1)
{
	cg_fn *f = w->f;
	const cg_gemm_gen *g = w->g;
	LLVMTypeRef i32 = cg_t_i32(f), i64 = cg_t_i64(f);
	LLVMValueRef keep_all = any_of(f, w->b, w->kk, w->b_rs, w->n, w->b_cs,
				       true);
	LLVMValueRef kept = cg_var(f, i64, cg_i64(f, 0));
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, r0, r1, 1);
	LLVMValueRef arow = cg_at(f, w->a, cg_muli(f, i, g->a_rs));
	LLVMValueRef keep = LLVMBuildOr(f->b, keep_all,
					any_of(f, arow, cg_i64(f, 1),
					       cg_i64(f, 0), w->kk, w->a_cs,
					       false),
					"");
	LLVMBasicBlockRef join = cg_if_begin(f, keep);
	LLVMValueRef q = LLVMBuildLoad2(f->b, i64, kept, "");
	copy_strided(f, arow, cg_at(f, ka, cg_muli(f, q, g->a_rs)), w->kk,
		     w->a_cs);
	LLVMBuildStore(f->b, LLVMBuildTrunc(f->b, i, i32, ""),
		       LLVMBuildInBoundsGEP2(f->b, i32, map, &q, 1, ""));
	LLVMBuildStore(f->b, cg_addi(f, q, 1), kept);
	cg_if_end(f, join);
	nest_loop_end(f, &l);
	return LLVMBuildLoad2(f->b, i64, kept, "");
}

/* Rows [from, to) of C, columns [c0, c1): +0. Where the columns are
 * whole rows (c1 - c0 == ldc) the rows are one span, one memset. */
static void zero_rows_of_c(work_env *w, LLVMValueRef from, LLVMValueRef to,
			   LLVMValueRef c0, LLVMValueRef c1)
{
	cg_fn *f = w->f;
	LLVMValueRef width = LLVMBuildSub(f->b, c1, c0, "");
	LLVMValueRef is_span = LLVMBuildICmp(f->b, LLVMIntEQ, width, w->ldc, "");
	LLVMBasicBlockRef span = cg_block(f, "left.span"),
			  rows = cg_block(f, "left.rows"),
			  done = cg_block(f, "left.done");
	LLVMBuildCondBr(f->b, is_span, span, rows);
	LLVMPositionBuilderAtEnd(f->b, span);
	LLVMValueRef zero = LLVMConstInt(LLVMInt8TypeInContext(f->ctx), 0, 0);
	LLVMValueRef n = LLVMBuildSub(f->b, to, from, "");
	LLVMBuildMemSet(f->b, cg_at(f, w->c, by(f, from, w->ldc)), zero,
			cg_muli(f, by(f, n, w->ldc), 4), 4);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, rows);
	cg_loop l, lj;
	LLVMValueRef i = cg_loop_begin(f, &l, from, to, 1);
	LLVMValueRef crow = cg_at(f, w->c, by(f, i, w->ldc));
	LLVMValueRef j = cg_loop_begin(f, &lj, c0, c1, 1);
	cg_store(f, cg_f32(f, 0), cg_at(f, crow, j));
	nest_loop_end(f, &lj);
	nest_loop_end(f, &l);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, done);
}

/* skip_zero_m: rows [r0, r1), columns [c0, c1) of C from the product of
 * the n_kept rows kept (rows numbered by map): a kept row's values from
 * kc (added when accumulating; kc NULL: multiplied in place, where they
 * are already), a row left out +0 (or plus +0, as the plain product's
 * sum of zero terms adds, which turns a -0 into +0). Consecutive rows
 * left out, not accumulating, get their +0 together (zero_rows_of_c): a
 * memset a row was about 12,000 calls of 164 bytes a loss_grad call of
 * the book's Transformer, a batch element's dead rows being one run. */
static void write_rows_back(work_env *w, LLVMValueRef kc, LLVMValueRef map,
			    LLVMValueRef n_kept, LLVMValueRef r0,
			    LLVMValueRef r1, LLVMValueRef c0, LLVMValueRef c1)
{
	cg_fn *f = w->f;
	const cg_gemm_gen *g = w->g;
	const cg_gemm_spec *s = &g->spec;
	LLVMTypeRef i32 = cg_t_i32(f), i64 = cg_t_i64(f);
	LLVMValueRef is_acc = w->is_shared ? w->accumulate
					   : LLVMConstInt(LLVMInt1TypeInContext(
								  f->ctx),
							  s->accumulate, 0);
	/* Row i of C: the next row kept (map[q] == i) or a row left out;
	 * the rows left out since `run` (-1: none) not written yet. */
	LLVMValueRef next = cg_var(f, i64, cg_i64(f, 0));
	LLVMValueRef run = cg_var(f, i64, cg_i64(f, -1));
	cg_loop l, lj;
	LLVMValueRef i = cg_loop_begin(f, &l, r0, r1, 1);
	LLVMValueRef q = LLVMBuildLoad2(f->b, i64, next, "");
	LLVMValueRef qc = cg_min(f, q, cg_addi(f, w->m, -1));
	LLVMValueRef mi = LLVMBuildSExt(
		f->b,
		LLVMBuildLoad2(f->b, i32,
			       LLVMBuildInBoundsGEP2(f->b, i32, map, &qc, 1, ""),
			       ""),
		i64, "");
	LLVMValueRef is_kept = LLVMBuildAnd(f->b,
					    LLVMBuildICmp(f->b, LLVMIntSLT, q,
							  n_kept, ""),
					    LLVMBuildICmp(f->b, LLVMIntEQ, mi,
							  i, ""),
					    "");
	LLVMValueRef crow = cg_at(f, w->c, by(f, i, w->ldc));
	LLVMBasicBlockRef yes = cg_block(f, "row.kept"),
			  no = cg_block(f, "row.left");
	LLVMBasicBlockRef done = cg_block(f, "row.done");
	LLVMBuildCondBr(f->b, is_kept, yes, no);
	LLVMPositionBuilderAtEnd(f->b, yes);
	LLVMValueRef r = LLVMBuildLoad2(f->b, i64, run, "");
	LLVMBasicBlockRef join = cg_if_begin(f,
					     LLVMBuildICmp(f->b, LLVMIntSGE, r,
							   cg_i64(f, 0), ""));
	zero_rows_of_c(w, r, i, c0, c1);
	LLVMBuildStore(f->b, cg_i64(f, -1), run);
	cg_if_end(f, join);
	LLVMValueRef j, v;
	if (kc) {
		LLVMValueRef prow = cg_at(f, kc, by(f, q, w->ldc));
		j = cg_loop_begin(f, &lj, c0, c1, 1);
		v = cg_load(f, cg_at(f, prow, j));
		if (s->accumulate)
			v = LLVMBuildFAdd(f->b, cg_load(f, cg_at(f, crow, j)),
					  v, "");
		cg_store(f, v, cg_at(f, crow, j));
		nest_loop_end(f, &lj);
	}
	LLVMBuildStore(f->b, cg_addi(f, q, 1), next);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, no);
	LLVMBasicBlockRef add = cg_block(f, "row.left.add"),
			  later = cg_block(f, "row.left.later");
	LLVMBuildCondBr(f->b, is_acc, add, later);
	LLVMPositionBuilderAtEnd(f->b, add);
	/* the plain sum's +0 turns a -0 into +0 */
	j = cg_loop_begin(f, &lj, c0, c1, 1);
	v = LLVMBuildFAdd(f->b, cg_load(f, cg_at(f, crow, j)), cg_f32(f, 0), "");
	cg_store(f, v, cg_at(f, crow, j));
	nest_loop_end(f, &lj);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, later);
	r = LLVMBuildLoad2(f->b, i64, run, "");
	LLVMBuildStore(f->b,
		       LLVMBuildSelect(f->b,
				       LLVMBuildICmp(f->b, LLVMIntSLT, r,
						     cg_i64(f, 0), ""),
				       i, r, ""),
		       run);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, done);
	nest_loop_end(f, &l);
	r = LLVMBuildLoad2(f->b, i64, run, "");
	join = cg_if_begin(f,
			   LLVMBuildICmp(f->b, LLVMIntSGE, r, cg_i64(f, 0), ""));
	zero_rows_of_c(w, r, r1, c0, c1);
	cg_if_end(f, join);
}

/* n rounded up to whole panels of MR rows. */
static LLVMValueRef whole_panels(cg_fn *f, LLVMValueRef n)
{
	return cg_muli(f,
		       LLVMBuildUDiv(f->b, cg_addi(f, n, CG_GEMM_MR - 1),
				     cg_i64(f, CG_GEMM_MR), ""),
		       CG_GEMM_MR);
}

/* skip_zero_m, rows [r0, r1) and columns [c0, c1) of C: keeps the rows
 * of A that are not all zero, multiplies them into the buffer kc, then
 * writes C's rows back. */
static void product_of_rows_kept(work_env *w, LLVMValueRef r0, LLVMValueRef r1,
				 LLVMValueRef c0, LLVMValueRef c1)
{
	cg_fn *f = w->f;
	const cg_gemm_gen *g = w->g;
	const cg_gemm_spec *s = &g->spec;
	LLVMBasicBlockRef plain = cg_block(f, "rows.all"),
			  kept = cg_block(f, "rows.kept"),
			  done = cg_block(f, "rows.done");
	LLVMBuildCondBr(f->b,
			has_zero_row(f, w->a, r0, r1, w->a_rs, w->kk, w->a_cs),
			kept, plain);
	LLVMPositionBuilderAtEnd(f->b, plain);
	block_loops(w, r0, r1, c0, c1);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, kept);
	buf_layout lay = layout_of(s, &g->plan);
	LLVMValueRef ka = cg_ati(f, w->abuf, lay.ka_off);
	LLVMValueRef kc = cg_ati(f, w->abuf, lay.kc_off);
	LLVMValueRef map = cg_ati(f, w->abuf, lay.map_off);
	LLVMValueRef n_kept = keep_nonzero_rows(w, ka, map, r0, r1);
	/* The sgemm ends a row block in a partial panel only at A's last
	 * rows (M mod MR of them): the rows kept are padded with zero rows to
	 * a whole panel, or to M. */
	LLVMValueRef end = cg_min(f, whole_panels(f, n_kept), cg_i64(f, s->m));
	cg_loop l, lp;
	LLVMValueRef i = cg_loop_begin(f, &l, n_kept, end, 1);
	LLVMValueRef p = cg_loop_begin(f, &lp, cg_i64(f, 0), cg_i64(f, s->k), 1);
	cg_store(f, cg_f32(f, 0),
		 cg_at(f, ka,
		       cg_add(f, cg_muli(f, i, g->a_rs),
			      cg_muli(f, p, g->a_cs))));
	nest_loop_end(f, &lp);
	nest_loop_end(f, &l);
	LLVMValueRef a = w->a, c = w->c;
	w->a = ka;
	w->c = kc;
	w->is_kept_rows = true;
	LLVMBasicBlockRef join = cg_if_begin(f, LLVMBuildICmp(f->b, LLVMIntSGT,
							      n_kept,
							      cg_i64(f, 0), ""));
	block_loops(w, cg_i64(f, 0), end, c0, c1);
	cg_if_end(f, join);
	w->is_kept_rows = false;
	w->a = a;
	w->c = c;
	write_rows_back(w, kc, map, n_kept, r0, r1, c0, c1);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, done);
}

/* cg_gemm_is_m_gather's row test (a hit_fn): row i of A is not all
 * zero. */
static LLVMValueRef is_nonzero_row_at(cg_fn *f, LLVMValueRef i, const void *cx)
{
	const work_env *w = cx;
	LLVMValueRef arow = cg_at(f, w->a, by(f, i, w->a_rs));
	return any_of(f, arow, cg_i64(f, 1), cg_i64(f, 0), w->kk, w->a_cs,
		      false);
}

/* Lists in map the rows i in [r0, r1) for which is_kept(f, i, w)
 * holds, then repeats a row left out (the first) to the end of their
 * last panel; returns how many were kept. Called when a row is left
 * out: the rows of A that are not all zero (cg_gemm_is_m_gather,
 * is_nonzero_row_at) or those the call gave (is_rows_given,
 * is_live_at). */
static LLVMValueRef list_rows(work_env *w, LLVMValueRef map, LLVMValueRef r0,
			      LLVMValueRef r1, hit_fn is_kept)
{
	cg_fn *f = w->f;
	LLVMTypeRef i32 = cg_t_i32(f), i64 = cg_t_i64(f);
	LLVMTypeRef i1 = LLVMInt1TypeInContext(f->ctx);
	LLVMValueRef kept = cg_var(f, i64, cg_i64(f, 0));
	LLVMValueRef spare = cg_var(f, i64, r0);
	LLVMValueRef is_spare = cg_var(f, i1, LLVMConstInt(i1, 0, 0));
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, r0, r1, 1);
	LLVMValueRef keep = is_kept(f, i, w);
	LLVMBasicBlockRef yes = cg_block(f, "row.kept"),
			  no = cg_block(f, "row.left"),
			  next = cg_block(f, "row.next");
	LLVMBuildCondBr(f->b, keep, yes, no);
	LLVMPositionBuilderAtEnd(f->b, yes);
	LLVMValueRef q = LLVMBuildLoad2(f->b, i64, kept, "");
	LLVMBuildStore(f->b, LLVMBuildTrunc(f->b, i, i32, ""),
		       LLVMBuildInBoundsGEP2(f->b, i32, map, &q, 1, ""));
	LLVMBuildStore(f->b, cg_addi(f, q, 1), kept);
	LLVMBuildBr(f->b, next);
	LLVMPositionBuilderAtEnd(f->b, no);
	LLVMBasicBlockRef first = cg_if_begin(
		f,
		LLVMBuildNot(f->b, LLVMBuildLoad2(f->b, i1, is_spare, ""), ""));
	LLVMBuildStore(f->b, i, spare);
	LLVMBuildStore(f->b, LLVMConstInt(i1, 1, 0), is_spare);
	cg_if_end(f, first);
	LLVMBuildBr(f->b, next);
	LLVMPositionBuilderAtEnd(f->b, next);
	nest_loop_end(f, &l);
	LLVMValueRef n_kept = LLVMBuildLoad2(f->b, i64, kept, "");
	LLVMValueRef row = LLVMBuildTrunc(f->b,
					  LLVMBuildLoad2(f->b, i64, spare, ""),
					  i32, "");
	LLVMValueRef p = cg_loop_begin(f, &l, n_kept, whole_panels(f, n_kept),
				       1);
	LLVMBuildStore(f->b, row,
		       LLVMBuildInBoundsGEP2(f->b, i32, map, &p, 1, ""));
	nest_loop_end(f, &l);
	return n_kept;
}

/* Rows [r0, r1), columns [c0, c1) of C where is_kept leaves a row out:
 * multiplies the rows it keeps in place (list_rows: whole panels,
 * padded with a row left out), then write_rows_back gives each row its
 * plain product's bits and the rows left out +0. */
static void product_of_listed_rows(work_env *w, LLVMValueRef r0,
				   LLVMValueRef r1, LLVMValueRef c0,
				   LLVMValueRef c1, hit_fn is_kept)
{
	cg_fn *f = w->f;
	LLVMValueRef map = w->map;
	LLVMValueRef n_kept = list_rows(w, map, r0, r1, is_kept);
	w->rows = map;
	block_loops(w, cg_i64(f, 0), whole_panels(f, n_kept), c0, c1);
	w->rows = NULL;
	write_rows_back(w, NULL, map, n_kept, r0, r1, c0, c1);
}

/* skip_zero_m with cg_gemm_is_m_gather, rows [r0, r1) and columns [c0,
 * c1) of C: with a row of zeros in A and B finite (0 times an inf is
 * NaN), multiplies the rows kept in place, whole panels of them padded
 * with a row left out (whose product is what write_rows_back
 * gives it), then clears the rows left out; else the plain product.
 * Each row of C gets the plain product's bits. */
static void product_of_rows_in_place(work_env *w, LLVMValueRef r0,
				     LLVMValueRef r1, LLVMValueRef c0,
				     LLVMValueRef c1)
{
	cg_fn *f = w->f;
	LLVMBasicBlockRef plain = cg_block(f, "rows.all"),
			  test = cg_block(f, "rows.test"),
			  kept = cg_block(f, "rows.kept"),
			  done = cg_block(f, "rows.done");
	LLVMBuildCondBr(f->b,
			has_zero_row(f, w->a, r0, r1, w->a_rs, w->kk, w->a_cs),
			test, plain);
	LLVMPositionBuilderAtEnd(f->b, test);
	LLVMBuildCondBr(f->b,
			any_of(f, w->b, w->kk, w->b_rs, w->n, w->b_cs, true),
			plain, kept);
	LLVMPositionBuilderAtEnd(f->b, plain);
	block_loops(w, r0, r1, c0, c1);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, kept);
	product_of_listed_rows(w, r0, r1, c0, c1, is_nonzero_row_at);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, done);
}

/* The flag of row i (an i64) of is_rows_given's list, as an i1. */
static LLVMValueRef is_live_at(cg_fn *f, LLVMValueRef i, const void *cx)
{
	const work_env *w = cx;
	LLVMTypeRef i32 = cg_t_i32(f);
	LLVMValueRef at = cg_addi(f, i, 1);
	LLVMValueRef x = LLVMBuildLoad2(f->b, i32,
					LLVMBuildInBoundsGEP2(f->b, i32, w->live,
							      &at, 1, ""),
					"");
	return LLVMBuildICmp(f->b, LLVMIntNE, x, cg_i32(f, 0), "");
}

static LLVMValueRef is_dead_at(cg_fn *f, LLVMValueRef i, const void *cx)
{
	return LLVMBuildNot(f->b, is_live_at(f, i, cx), "");
}

/* is_rows_given, rows [r0, r1) and columns [c0, c1) of C: when the call
 * gave rows and leaves one of these out, multiplies those it keeps in
 * place, whole panels of them padded with a row left out, then clears
 * the rows left out to +0; else the plain product. */
static void product_of_rows_given(work_env *w, LLVMValueRef r0, LLVMValueRef r1,
				  LLVMValueRef c0, LLVMValueRef c1)
{
	cg_fn *f = w->f;
	LLVMBasicBlockRef plain = cg_block(f, "rows.all"),
			  test = cg_block(f, "rows.test"),
			  kept = cg_block(f, "rows.kept"),
			  done = cg_block(f, "rows.done");
	LLVMValueRef flag = LLVMBuildLoad2(f->b, cg_t_i32(f), w->live, "");
	LLVMBuildCondBr(f->b,
			LLVMBuildICmp(f->b, LLVMIntNE, flag, cg_i32(f, 0), ""),
			test, plain);
	LLVMPositionBuilderAtEnd(f->b, test);
	LLVMBuildCondBr(f->b, any_until_hit(f, r0, r1, is_dead_at, w), kept,
			plain);
	LLVMPositionBuilderAtEnd(f->b, plain);
	block_loops(w, r0, r1, c0, c1);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, kept);
	product_of_listed_rows(w, r0, r1, c0, c1, is_live_at);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, done);
}

/* Rows [r0, r1), columns [c0, c1) of the current product. */
static void product(work_env *w, LLVMValueRef r0, LLVMValueRef r1,
		    LLVMValueRef c0, LLVMValueRef c1)
{
	if (w->g->spec.is_rows_given)
		product_of_rows_given(w, r0, r1, c0, c1);
	else if (w->g->is_m_gather)
		product_of_rows_in_place(w, r0, r1, c0, c1);
	else if (w->g->spec.skip_zero_m)
		product_of_rows_kept(w, r0, r1, c0, c1);
	else
		block_loops(w, r0, r1, c0, c1);
}

/* Points a, b, c at product `item` of the batch. */
static void select_item(work_env *w, LLVMValueRef item)
{
	cg_fn *f = w->f;
	bool is_batch = w->is_shared || w->g->plan.batch > 1;
	w->a = is_batch ? cg_at(f, w->a0, by(f, item, w->stride_a)) : w->a0;
	w->b = is_batch ? cg_at(f, w->b0, by(f, item, w->stride_b)) : w->b0;
	w->c = is_batch ? cg_at(f, w->c0, by(f, item, w->stride_c)) : w->c0;
}

/* The call's panels [lo, hi), numbered across the batch (per_v panels
 * of `step` rows or columns a product, `total` rows or columns, split by
 * rows if split_rows, else by columns): for each product they touch,
 * the range [r0, r1) of rows (or columns) in it. */
static void item_loop(work_env *w, LLVMValueRef per_v, LLVMValueRef step,
		      LLVMValueRef total)
{
	cg_fn *f = w->f;
	cg_loop lb;
	LLVMValueRef panels = cg_mul(f, per_v, w->batch);
	LLVMValueRef lo = cg_muldiv(f, w->lo, panels, w->nt);
	LLVMValueRef hi = cg_muldiv(f, w->hi, panels, w->nt);
	LLVMValueRef b0 = LLVMBuildUDiv(f->b, lo, per_v, "");
	LLVMValueRef b1 = LLVMBuildUDiv(f->b,
					LLVMBuildNSWSub(f->b,
							cg_add(f, hi, per_v),
							cg_i64(f, 1), ""),
					per_v, "");
	LLVMValueRef item = cg_loop_begin(f, &lb, b0, b1, 1);
	LLVMValueRef first = cg_mul(f, item, per_v), zero = cg_i64(f, 0);
	LLVMValueRef p0 = LLVMBuildNSWSub(f->b, lo, first, "");
	p0 = LLVMBuildSelect(f->b, LLVMBuildICmp(f->b, LLVMIntSLT, p0, zero, ""),
			     zero, p0, "");
	LLVMValueRef p1 = cg_min(f, LLVMBuildNSWSub(f->b, hi, first, ""), per_v);
	LLVMValueRef r0 = by(f, p0, step);
	LLVMValueRef r1 = cg_min(f, by(f, p1, step), total);
	select_item(w, item);
	LLVMBasicBlockRef join = cg_if_begin(f, LLVMBuildICmp(f->b, LLVMIntSLT,
							      r0, r1, ""));
	if (w->is_shared) {
		LLVMBuilderRef b = f->b;
		LLVMValueRef sr = w->split_rows;
		product(w, LLVMBuildSelect(b, sr, r0, zero, ""),
			LLVMBuildSelect(b, sr, r1, w->m, ""),
			LLVMBuildSelect(b, sr, zero, r0, ""),
			LLVMBuildSelect(b, sr, w->n, r1, ""));
	} else if (w->g->plan.split_rows) {
		product(w, r0, r1, zero, w->n);
	} else {
		product(w, zero, w->m, r0, r1);
	}
	cg_if_end(f, join);
	nest_loop_end(f, &lb);
}

/* skip_zero_k: keeps B's rows that are not all zero, and those whose
 * column of A holds an inf or NaN (0 times it is NaN), at least one of
 * each k-block of spec.k (a block of none would leave C unwritten). A's
 * columns are looked at one by one only when A holds an inf or NaN at
 * all: one scan of the whole of A (m k loads in a loop LLVM vectorizes,
 * 1/n of the product's work) first, where a scan per zero row of B
 * stalled on each column's load (the padding rows of X^T dY's X, which
 * nothing else reads) and on its branch. With
 * w->kidx, writes their numbers there (the micro-kernels read them in
 * place); else copies them, with A's matching columns, to the buffers ka
 * and kb in the layout of A and B and points the work at them (w->a0,
 * w->b0). Sets w->k, and w->kstart the blocks' starts among the k kept.
 * Each block sums the terms it keeps in their order from +0, and a term
 * left out is a zero (+0 or -0) that adds nothing to a sum that is not
 * -0: the product has the bits of the one that keeps every k. */
static void keep_nonzero_k(work_env *w, LLVMValueRef ka, LLVMValueRef kb)
{
	cg_fn *f = w->f;
	LLVMTypeRef i1 = LLVMInt1TypeInContext(f->ctx);
	LLVMValueRef kept = cg_var(f, cg_t_i64(f), cg_i64(f, 0));
	LLVMValueRef one = cg_i64(f, 1), nil = cg_i64(f, 0);
	LLVMValueRef a_has_nonfinite = any_of(f, w->a0, w->m, w->a_rs, w->kk,
					      w->a_cs, true);
	cg_loop lb, l;
	LLVMValueRef bi = cg_loop_begin(f, &lb, nil, w->nkb, 1);
	LLVMValueRef first = LLVMBuildLoad2(f->b, cg_t_i64(f), kept, "");
	LLVMBuildStore(f->b, first, kstart_at(w, bi));
	LLVMValueRef p0 = by(f, bi, w->kc_max);
	LLVMValueRef p1 = cg_min(f, cg_add(f, p0, w->kc_max), w->kk);
	LLVMValueRef p = cg_loop_begin(f, &l, p0, p1, 1);
	LLVMValueRef q = LLVMBuildLoad2(f->b, cg_t_i64(f), kept, "");
	LLVMValueRef brow = cg_at(f, w->b0, by(f, p, w->b_rs));
	LLVMValueRef acol = cg_at(f, w->a0, by(f, p, w->a_cs));
	/* The block's last k is kept when none of it was, else by its
	 * values. */
	LLVMValueRef is_last = LLVMBuildICmp(f->b, LLVMIntEQ, cg_addi(f, p, 1),
					     p1, "");
	LLVMValueRef none_yet = LLVMBuildICmp(f->b, LLVMIntEQ, q, first, "");
	LLVMValueRef keep = cg_var(f, i1,
				   any_of(f, brow, one, nil, w->n, w->b_cs,
					  false));
	LLVMBasicBlockRef zero = cg_if_begin(
		f, LLVMBuildAnd(f->b,
				LLVMBuildNot(f->b,
					     LLVMBuildLoad2(f->b, i1, keep, ""),
					     ""),
				a_has_nonfinite, ""));
	LLVMBuildStore(f->b, any_of(f, acol, one, nil, w->m, w->a_rs, true),
		       keep);
	cg_if_end(f, zero);
	keep = LLVMBuildOr(f->b, LLVMBuildLoad2(f->b, i1, keep, ""),
			   LLVMBuildAnd(f->b, is_last, none_yet, ""), "");
	LLVMBasicBlockRef join = cg_if_begin(f, keep);
	if (w->kidx) {
		LLVMTypeRef i32 = cg_t_i32(f);
		LLVMBuildStore(f->b, LLVMBuildTrunc(f->b, p, i32, ""),
			       LLVMBuildInBoundsGEP2(f->b, i32, w->kidx, &q, 1,
						     ""));
	} else {
		copy_strided(f, brow, cg_at(f, kb, by(f, q, w->b_rs)), w->n,
			     w->b_cs);
		copy_strided(f, acol, cg_at(f, ka, by(f, q, w->a_cs)), w->m,
			     w->a_rs);
	}
	LLVMBuildStore(f->b, cg_addi(f, q, 1), kept);
	cg_if_end(f, join);
	nest_loop_end(f, &l);
	nest_loop_end(f, &lb);
	w->k = LLVMBuildLoad2(f->b, cg_t_i64(f), kept, "");
	LLVMBuildStore(f->b, w->k, kstart_at(w, w->nkb));
	if (!w->kidx) {
		w->a0 = ka;
		w->b0 = kb;
	}
}

/* cg_gemm_is_k_gather, B without a row of zeros: kidx lists every k. */
static void keep_every_k(work_env *w)
{
	cg_fn *f = w->f;
	LLVMTypeRef i32 = cg_t_i32(f);
	cg_loop l;
	LLVMValueRef p = cg_loop_begin(f, &l, cg_i64(f, 0), w->kk, 1);
	LLVMBuildStore(f->b, LLVMBuildTrunc(f->b, p, i32, ""),
		       LLVMBuildInBoundsGEP2(f->b, i32, w->kidx, &p, 1, ""));
	nest_loop_end(f, &l);
}

/* skip_zero_k: keep_nonzero_k when B has a row of zeros; else the work
 * reads A and B in place, all of K (gathering k, through a kidx that
 * lists them all). */
static void keep_nonzero_k_if_any(work_env *w, LLVMValueRef ka, LLVMValueRef kb)
{
	cg_fn *f = w->f;
	LLVMValueRef a0 = cg_var(f, cg_t_ptr(f), w->a0);
	LLVMValueRef b0 = cg_var(f, cg_t_ptr(f), w->b0);
	LLVMValueRef k = cg_var(f, cg_t_i64(f), w->k);
	w->kstart = w->ks;
	/* Every k kept: spec.k's blocks (a loop: K may be millions). */
	cg_loop lb;
	LLVMValueRef i = cg_loop_begin(f, &lb, cg_i64(f, 0),
				       cg_addi(f, w->nkb, 1), 1);
	LLVMBuildStore(f->b, cg_min(f, by(f, i, w->kc_max), w->kk),
		       kstart_at(w, i));
	nest_loop_end(f, &lb);
	LLVMBasicBlockRef yes = cg_block(f, "k.zero"), no = cg_block(f, "k.all");
	LLVMBasicBlockRef join = cg_block(f, "k.kept");
	LLVMBuildCondBr(f->b,
			has_zero_row(f, w->b0, cg_i64(f, 0), w->kk, w->b_rs,
				     w->n, w->b_cs),
			yes, no);
	LLVMPositionBuilderAtEnd(f->b, yes);
	keep_nonzero_k(w, ka, kb);
	LLVMBuildStore(f->b, w->a0, a0);
	LLVMBuildStore(f->b, w->b0, b0);
	LLVMBuildStore(f->b, w->k, k);
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, no);
	if (w->kidx)
		keep_every_k(w);
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, join);
	w->a0 = LLVMBuildLoad2(f->b, cg_t_ptr(f), a0, "");
	w->b0 = LLVMBuildLoad2(f->b, cg_t_ptr(f), b0, "");
	w->k = LLVMBuildLoad2(f->b, cg_t_i64(f), k, "");
}

/* The shared loop nest's arguments after the epilogue's terms: the
 * shape's numbers (i64), then its kernels and packing routines (ptr). */
enum {
	D_M,
	D_N,
	D_K,
	D_LDA,
	D_LDB,
	D_LDC,
	D_KC,
	D_MC,
	D_NC,
	D_BATCH,
	D_SA,
	D_SB,
	D_SC,
	D_SPLIT, /* 1: threads split rows, 0: columns */
	D_ACC,   /* 1: C += A·B */
	D_BOFF,  /* the B block's place in a thread's buffer */
	D_UKR_ALD,
	D_PA_LD,
	D_PB_LD,
	D_E0_RS,
	D_E1_RS,
	D_PER,   /* panels of a product (rows or columns, by D_SPLIT) */
	D_STEP,  /* rows or columns of a panel */
	D_TOTAL, /* rows or columns of a product */
	D_KA,    /* the parts of a thread's buffer (buf_layout) */
	D_KB,
	D_MAP,
	D_KS,
	D_LIVE,
	D_UKR, /* 4 micro-kernels, [row edge][column edge] */
	D_PACK_A = D_UKR + 4,
	D_PACK_B,
	D_UKR_MG, /* 2 row-gathering micro-kernels, by column edge */
	D_COUNT = D_UKR_MG + 2
};

/* Whether a spec's sgemm runs the loop nest it shares with the other
 * shapes of its kind (shared_name): all but those that leave zero rows
 * out through a list of the k kept (cg_gemm_is_k_gather) or by copying
 * the rows of A kept (skip_zero_m with A packed), whose nests are their
 * own. */
static bool is_shared_nest(const cg_gemm_gen *g)
{
	return !g->is_k_gather && (!g->spec.skip_zero_m || g->is_m_gather);
}

/* The shape's numbers, by D_*, for the shared nest's caller. */
static void shape_numbers(const cg_gemm_gen *g, int64_t *d)
{
	const cg_gemm_spec *s = &g->spec;
	const cg_gemm_plan *p = &g->plan;
	bool sr = p->split_rows;
	d[D_M] = s->m;
	d[D_N] = s->n;
	d[D_K] = s->k;
	d[D_LDA] = p->lda;
	d[D_LDB] = p->ldb;
	d[D_LDC] = p->ldc;
	d[D_KC] = p->kc;
	d[D_MC] = p->mc;
	d[D_NC] = p->nc;
	d[D_BATCH] = p->batch;
	d[D_SA] = p->batch > 1 ? s->stride_a : 0;
	d[D_SB] = p->batch > 1 ? s->stride_b : 0;
	d[D_SC] = p->batch > 1 ? s->stride_c : 0;
	d[D_SPLIT] = sr;
	d[D_ACC] = s->accumulate;
	d[D_BOFF] = layout_of(s, p).b_off;
	d[D_UKR_ALD] = !p->pack_a && g->a_rs == 1 ? g->a_cs : g->a_rs;
	d[D_PA_LD] = g->pack_a_ld;
	d[D_PB_LD] = g->pack_b_ld;
	for (int t = 0; t < CG_GEMM_MAX_EPILOGUE; t++)
		d[D_E0_RS + t] = t < s->n_epilogue ? s->epilogue_rs[t] : 0;
	d[D_PER] = sr ? ceil_div(s->m, CG_GEMM_MR) : ceil_div(s->n, p->nr);
	d[D_STEP] = sr ? CG_GEMM_MR : p->nr;
	d[D_TOTAL] = sr ? s->m : s->n;
	buf_layout l = layout_of(s, p);
	d[D_KA] = l.ka_off;
	d[D_KB] = l.kb_off;
	d[D_MAP] = l.map_off;
	d[D_KS] = l.ks_off;
	d[D_LIVE] = l.live_off;
}

/* w's shape as values: the shared nest's arguments from at on (by
 * D_*), or with at < 0 constants (a shape's own nest). */
static void nest_values(work_env *w, int at)
{
	cg_fn *f = w->f;
	cg_gemm_gen *g = w->g;
	LLVMValueRef v[D_COUNT];
	int64_t d[D_COUNT];
	shape_numbers(g, d);
	w->is_shared = at >= 0;
	for (int i = 0; i < D_COUNT; i++)
		v[i] = at >= 0     ? LLVMGetParam(f->fn, (unsigned)(at + i))
		       : i < D_UKR ? cg_i64(f, d[i])
				   : NULL;
	LLVMValueRef one = cg_i64(f, 1);
	w->m = v[D_M];
	w->n = v[D_N];
	w->k = v[D_K];
	w->a_rs = g->spec.ta ? one : v[D_LDA];
	w->a_cs = g->spec.ta ? v[D_LDA] : one;
	w->b_rs = g->spec.tb ? one : v[D_LDB];
	w->b_cs = g->spec.tb ? v[D_LDB] : one;
	if (at < 0) { /* the constants as they were, 1 or not */
		w->a_rs = cg_i64(f, g->a_rs);
		w->a_cs = cg_i64(f, g->a_cs);
		w->b_rs = cg_i64(f, g->b_rs);
		w->b_cs = cg_i64(f, g->b_cs);
	}
	w->ldc = v[D_LDC];
	w->kc_max = v[D_KC];
	w->mc_max = v[D_MC];
	w->nc_max = v[D_NC];
	w->batch = v[D_BATCH];
	w->stride_a = v[D_SA];
	w->stride_b = v[D_SB];
	w->stride_c = v[D_SC];
	LLVMValueRef zero = cg_i64(f, 0);
	w->split_rows = LLVMBuildICmp(f->b, LLVMIntNE, v[D_SPLIT], zero, "");
	w->accumulate = LLVMBuildICmp(f->b, LLVMIntNE, v[D_ACC], zero, "");
	w->ukr_ald = v[D_UKR_ALD];
	w->pack_a_ld = v[D_PA_LD];
	w->pack_b_ld = v[D_PB_LD];
	for (int t = 0; t < CG_GEMM_MAX_EPILOGUE; t++)
		w->epi_rs[t] = v[D_E0_RS + t];
	for (int i = 0; i < 4; i++)
		w->ukr_fn[i] = v[D_UKR + i];
	w->pack_a_fn = v[D_PACK_A];
	w->pack_b_fn = v[D_PACK_B];
	for (int i = 0; i < 2; i++)
		w->ukr_mg_fn[i] = v[D_UKR_MG + i];
	w->kk = w->k;
	w->nkb = LLVMBuildSDiv(f->b,
			       LLVMBuildNSWSub(f->b, cg_add(f, w->k, w->kc_max),
					       one, ""),
			       w->kc_max, "");
	w->bbuf = cg_at(f, w->abuf, v[D_BOFF]);
	w->ka = cg_at(f, w->abuf, v[D_KA]);
	w->kb = cg_at(f, w->abuf, v[D_KB]);
	w->map = cg_at(f, w->abuf, v[D_MAP]);
	w->ks = cg_at(f, w->abuf, v[D_KS]);
	w->live = cg_at(f, w->abuf, v[D_LIVE]);
}

/* The shared nest's name: what its code depends on beside the shape's
 * numbers (the vector width, how A and B are stored and packed, the
 * epilogue's terms). */
static void shared_name(const cg_gemm_gen *g, char *name, size_t size)
{
	snprintf(name, size, "sgemm.nest.%d.a%c%c.b%c%c.e%d%s%s", g->plan.vw,
		 g->spec.ta ? 't' : 'n', g->plan.pack_a ? 'p' : 'd',
		 g->spec.tb ? 't' : 'n', g->plan.pack_b ? 'p' : 'd',
		 g->spec.n_epilogue, g->spec.skip_zero_k ? ".zk" : "",
		 g->spec.skip_zero_m     ? ".zm"
		 : g->spec.is_rows_given ? ".lr"
					 : "");
}

/* The work function's type: (A, B, C, buf, lo, hi, n[, E0, ...]), then
 * with is_shared the shape's D_COUNT arguments. */
static LLVMTypeRef work_type(const cg_gemm_gen *g, bool is_shared)
{
	LLVMContextRef ctx = LLVMGetModuleContext(g->mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
	LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx);
	LLVMTypeRef params[7 + CG_GEMM_MAX_EPILOGUE + D_COUNT] = {ptr, ptr, ptr,
								  ptr, i64, i64,
								  i64};
	unsigned n = 7 + (unsigned)g->spec.n_epilogue;
	for (unsigned i = 7; i < n; i++)
		params[i] = ptr;
	for (int i = 0; is_shared && i < D_COUNT; i++)
		params[n + (unsigned)i] = i < D_UKR ? i64 : ptr;
	return LLVMFunctionType(LLVMVoidTypeInContext(ctx), params,
				n + (is_shared ? D_COUNT : 0), 0);
}

/* void NAME.work(const float *A, const float *B, float *C, float *buf,
 *                i64 lo, i64 hi, i64 n[, const float *E0, ...]): parts
 * [lo, hi) of C cut into n equal parts (thread tid of nt: tid, tid + 1,
 * nt), packing into buf, the call's own buffer; then the epilogue's
 * terms. With is_shared_nest it is instead the nest of its kind,
 * shared_name, found in the module or generated: the same parameters,
 * then the shape's (D_*), so that the products of a program that differ
 * only in their sizes are one function, optimized and compiled once;
 * the micro-kernels and packing routines stay specialized, and are
 * passed to it. */
static LLVMValueRef gen_work(cg_gemm_gen *g)
{
	cg_fn f;
	char name[256];
	bool is_shared = is_shared_nest(g);
	LLVMTypeRef type = work_type(g, is_shared);
	work_env w = {.f = &f, .g = g};
	const cg_gemm_spec *s = &g->spec;

	if (is_shared) {
		shared_name(g, name, sizeof name);
		LLVMValueRef have = LLVMGetNamedFunction(g->mod, name);
		if (have && LLVMGlobalGetValueType(have) == type)
			return have;
		if (have) /* not ours: a name of its own */
			snprintf(name, sizeof name, "%s.work", g->name);
	} else {
		snprintf(name, sizeof name, "%s.work", g->name);
	}
	cg_fn_begin(&f, g->mod, name, type, true);
	if (is_shared) {
		cg_fn_attr(&f, "noinline");
		cg_fn_attr_str(&f, CG_ATTR_SHARED, "1");
	}
	for (int t = 0; t < s->n_epilogue; t++) {
		cg_fn_param_readonly(&f, 7 + (unsigned)t);
		w.epi[t] = LLVMGetParam(f.fn, 7 + (unsigned)t);
	}
	cg_fn_param_readonly(&f, 0);
	cg_fn_param_readonly(&f, 1);
	w.a0 = LLVMGetParam(f.fn, 0);
	w.b0 = LLVMGetParam(f.fn, 1);
	w.c0 = LLVMGetParam(f.fn, 2);
	w.lo = LLVMGetParam(f.fn, 4);
	w.hi = LLVMGetParam(f.fn, 5);
	w.nt = LLVMGetParam(f.fn, 6);
	w.abuf = LLVMGetParam(f.fn, 3);
	nest_values(&w, is_shared ? 7 + s->n_epilogue : -1);
	if (g->is_k_gather)
		w.kidx = w.map;
	if (s->skip_zero_k)
		keep_nonzero_k_if_any(&w, w.ka, w.kb);
	if (is_shared) {
		int at = 7 + s->n_epilogue;
		item_loop(&w, LLVMGetParam(f.fn, (unsigned)(at + D_PER)),
			  LLVMGetParam(f.fn, (unsigned)(at + D_STEP)),
			  LLVMGetParam(f.fn, (unsigned)(at + D_TOTAL)));
	} else {
		int64_t d[D_COUNT];
		shape_numbers(g, d);
		item_loop(&w, cg_i64(&f, d[D_PER]), cg_i64(&f, d[D_STEP]),
			  cg_i64(&f, d[D_TOTAL]));
	}
	LLVMBuildRetVoid(f.b);
	cg_fn_end(&f);
	return f.fn;
}

/* ---- threads and the entry point ------------------------------------------ */

/* The captures of the parallel region: these, then the epilogue's terms. */
enum { CAP_A, CAP_B, CAP_C, CAP_BUF, CAP_COUNT };
#define CAP_MAX (CAP_COUNT + CG_GEMM_MAX_EPILOGUE)
#define WORK_ARGS_MAX (7 + CG_GEMM_MAX_EPILOGUE + D_COUNT)

static int n_caps(const cg_gemm_gen *g)
{
	return CAP_COUNT + g->spec.n_epilogue;
}

/* Calls NAME.work on parts [lo, hi) of n with caps (A, B, C, buf, E...). */
static void call_work(cg_fn *f, const cg_gemm_gen *g, LLVMValueRef work,
		      const LLVMValueRef *caps, LLVMValueRef lo,
		      LLVMValueRef hi, LLVMValueRef n)
{
	LLVMValueRef args[WORK_ARGS_MAX] = {caps[0], caps[1], caps[2], caps[3],
					    lo,      hi,      n};
	unsigned n_args = 7 + (unsigned)g->spec.n_epilogue;
	for (int t = 0; t < g->spec.n_epilogue; t++)
		args[7 + t] = caps[CAP_COUNT + t];
	if (is_shared_nest(g)) {
		int64_t d[D_COUNT];
		shape_numbers(g, d);
		LLVMValueRef fns[D_COUNT - D_UKR] =
			{g->ukr[0][0], g->ukr[0][1], g->ukr[1][0],
			 g->ukr[1][1], g->pack_a,    g->pack_b,
			 g->ukr_mg[0], g->ukr_mg[1]};
		for (int i = 0; i < D_COUNT; i++)
			args[n_args + (unsigned)i] =
				i < D_UKR ? cg_i64(f, d[i])
				: fns[i - D_UKR]
					? fns[i - D_UKR]
					: LLVMConstPointerNull(cg_t_ptr(f));
		n_args += D_COUNT;
	}
	cg_call(f, work, args, n_args);
}

static LLVMValueRef omp_int(cg_fn *f, const char *fn_name)
{
	return LLVMBuildSExt(f->b, cg_omp_i32(f, fn_name), cg_t_i64(f), "");
}

static LLVMValueRef cap_slot(cg_fn *f, LLVMValueRef cap, int i)
{
	LLVMValueRef idx = cg_i64(f, i);
	return LLVMBuildInBoundsGEP2(f->b, cg_t_ptr(f), cap, &idx, 1, "");
}

/* void NAME.par(void *cap): the body of the parallel region. */
static LLVMValueRef gen_par(cg_gemm_gen *g, LLVMValueRef work)
{
	cg_fn f;
	char name[256];
	LLVMContextRef ctx = LLVMGetModuleContext(g->mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
	LLVMValueRef args[CAP_MAX];
	buf_layout l = layout_of(&g->spec, &g->plan);

	snprintf(name, sizeof name, "%s.par", g->name);
	cg_fn_begin(&f, g->mod, name,
		    LLVMFunctionType(LLVMVoidTypeInContext(ctx), &ptr, 1, 0),
		    true);
	cg_fn_param_readonly(&f, 0);
	for (int i = 0; i < n_caps(g); i++)
		args[i] = LLVMBuildLoad2(f.b, ptr,
					 cap_slot(&f, LLVMGetParam(f.fn, 0), i),
					 "");
	LLVMValueRef tid = omp_int(&f, "omp_get_thread_num");
	args[3] = cg_at(&f, args[3], cg_muli(&f, tid, l.per_thread));
	call_work(&f, g, work, args, tid, cg_addi(&f, tid, 1),
		  omp_int(&f, "omp_get_num_threads"));
	LLVMBuildRetVoid(f.b);
	cg_fn_end(&f);
	return f.fn;
}

/* GOMP_parallel(par, {A, B, C, buf, E...}, nt, 0), or NAME.work for one
 * thread. */
static void run_team(cg_fn *f, const cg_gemm_gen *g, LLVMValueRef work,
		     LLVMValueRef par, LLVMValueRef cap, LLVMValueRef *args,
		     LLVMValueRef nt)
{
	LLVMValueRef is_one = LLVMBuildICmp(f->b, LLVMIntSLE, nt, cg_i64(f, 1),
					    "");
	LLVMBasicBlockRef one = cg_block(f, "serial"),
			  team = cg_block(f, "team");
	LLVMBasicBlockRef join = cg_block(f, "joined");
	LLVMBuildCondBr(f->b, is_one, one, team);

	LLVMPositionBuilderAtEnd(f->b, one);
	call_work(f, g, work, args, cg_i64(f, 0), cg_i64(f, 1), cg_i64(f, 1));
	LLVMBuildBr(f->b, join);

	LLVMPositionBuilderAtEnd(f->b, team);
	for (int i = 0; i < n_caps(g); i++)
		LLVMBuildStore(f->b, args[i], cap_slot(f, cap, i));
	cg_gomp_parallel(f, par, cap, LLVMBuildTrunc(f->b, nt, cg_t_i32(f), ""));
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, join);
}

/* The packing buffer for nt threads: on the stack when small enough for
 * the most threads, else aligned_alloc'd (*is_heap set). Generated code
 * has no error channel, so a failed allocation traps. */
static LLVMValueRef alloc_buf(cg_fn *f, const cg_gemm_spec *s,
			      const cg_gemm_plan *p, LLVMValueRef nt,
			      int64_t most_nt, bool *is_heap)
{
	buf_layout l = layout_of(s, p);
	int64_t most = l.per_thread * most_nt * 4;
	*is_heap = false;
	if (most == 0)
		return LLVMConstNull(cg_t_ptr(f));
	if (most <= STACK_BUF_MAX) {
		LLVMValueRef a = LLVMBuildAlloca(f->b,
						 LLVMArrayType2(cg_t_f32(f),
								(uint64_t)most /
									4),
						 "buf");
		LLVMSetAlignment(a, ALIGN_BYTES);
		return a;
	}
	*is_heap = true;
	LLVMValueRef bytes = cg_muli(f, nt,
				     l.per_thread * 4); /* 64-byte multiple */
	LLVMTypeRef i64 = cg_t_i64(f), params[2] = {i64, i64};
	LLVMValueRef args[2] = {cg_i64(f, ALIGN_BYTES), bytes};
	LLVMValueRef buf = cg_call_extern(f, "aligned_alloc",
					  LLVMFunctionType(cg_t_ptr(f), params,
							   2, 0),
					  args, 2);
	LLVMBasicBlockRef join = cg_if_begin(f, LLVMBuildIsNull(f->b, buf, ""));
	cg_intrinsic(f, "llvm.trap", NULL, 0, NULL, 0);
	cg_if_end(f, join);
	return buf;
}

/* The team size: the n_threads argument if positive, else OpenMP's
 * default, capped by what the grain allows. */
static LLVMValueRef team_size(cg_fn *f, const cg_gemm_gen *g)
{
	if (g->plan.max_threads == 1)
		return cg_i64(f, 1);
	LLVMValueRef n = omp_int(f, "omp_get_max_threads");
	if (g->spec.is_threads_arg) {
		LLVMValueRef req = LLVMBuildSExt(
			f->b,
			LLVMGetParam(f->fn, 3 + (unsigned)g->spec.n_epilogue),
			cg_t_i64(f), "");
		LLVMValueRef is_set = LLVMBuildICmp(f->b, LLVMIntSGT, req,
						    cg_i64(f, 0), "");
		n = LLVMBuildSelect(f->b, is_set, req, n, "");
	}
	return cg_min(f, n, cg_i64(f, g->plan.max_threads));
}

/* The captures A, B, C, buf, E... of a function whose parameters are
 * A, B, C, E..., buf its packing buffer. */
static void caps_of(cg_fn *f, const cg_gemm_gen *g, LLVMValueRef buf,
		    LLVMValueRef *caps)
{
	for (unsigned i = 0; i < 3; i++)
		caps[i] = LLVMGetParam(f->fn, i);
	caps[CAP_BUF] = buf;
	for (int t = 0; t < g->spec.n_epilogue; t++) {
		cg_fn_param_readonly(f, 3 + (unsigned)t);
		caps[CAP_COUNT + t] = LLVMGetParam(f->fn, 3 + (unsigned)t);
	}
}

/* void NAME(const float *A, const float *B, float *C[, const float *E0,
 * ...][, int n_threads]). */
static void gen_entry(cg_gemm_gen *g, LLVMValueRef work, LLVMValueRef par)
{
	cg_fn f;
	LLVMContextRef ctx = LLVMGetModuleContext(g->mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
	LLVMTypeRef params[4 + CG_GEMM_MAX_EPILOGUE] = {ptr, ptr, ptr};
	unsigned n_par = 3 + (unsigned)g->spec.n_epilogue;
	bool is_heap;

	for (unsigned i = 3; i < n_par; i++)
		params[i] = ptr;
	params[n_par] = LLVMInt32TypeInContext(ctx);
	cg_fn_begin(&f, g->mod, g->name,
		    LLVMFunctionType(LLVMVoidTypeInContext(ctx), params,
				     n_par + (g->spec.is_threads_arg ? 1 : 0), 0),
		    false);
	cg_fn_param_readonly(&f, 0);
	cg_fn_param_readonly(&f, 1);
	LLVMValueRef cap = par ? LLVMBuildAlloca(f.b,
						 LLVMArrayType2(ptr, CAP_MAX),
						 "cap")
			       : NULL;
	LLVMValueRef nt = team_size(&f, g);
	LLVMValueRef args[CAP_MAX];
	caps_of(&f, g,
		alloc_buf(&f, &g->spec, &g->plan, nt, g->plan.max_threads,
			  &is_heap),
		args);
	if (g->spec.is_rows_given) { /* every row: each thread's flag 0 */
		buf_layout l = layout_of(&g->spec, &g->plan);
		cg_loop lt;
		LLVMValueRef t = cg_loop_begin(&f, &lt, cg_i64(&f, 0), nt, 1);
		LLVMValueRef at = cg_addi(&f, cg_muli(&f, t, l.per_thread),
					  l.live_off);
		LLVMBuildStore(f.b, cg_i32(&f, 0), cg_at(&f, args[CAP_BUF], at));
		cg_loop_end(&f, &lt);
	}
	if (par)
		run_team(&f, g, work, par, cap, args, nt);
	else
		call_work(&f, g, work, args, cg_i64(&f, 0), cg_i64(&f, 1),
			  cg_i64(&f, 1));
	if (is_heap) {
		LLVMTypeRef fp = cg_t_ptr(&f);
		cg_call_extern(&f, "free",
			       LLVMFunctionType(LLVMVoidTypeInContext(ctx), &fp,
						1, 0),
			       &args[3], 1);
	}
	LLVMBuildRetVoid(f.b);
	cg_fn_end(&f);
}

/* is_rows_given: the call's rows into its buffer (layout_of's live):
 * the flag 1 and live's m flags, or the flag 0 when live is NULL. */
static void copy_given_rows(cg_fn *f, const cg_gemm_gen *g, LLVMValueRef buf,
			    LLVMValueRef live)
{
	LLVMTypeRef i32 = cg_t_i32(f);
	LLVMValueRef dst = cg_ati(f, buf,
				  layout_of(&g->spec, &g->plan).live_off);
	LLVMValueRef is_given = LLVMBuildIsNotNull(f->b, live, "");
	LLVMBuildStore(f->b, LLVMBuildZExt(f->b, is_given, i32, ""), dst);
	LLVMBasicBlockRef join = cg_if_begin(f, is_given);
	cg_loop l;
	LLVMValueRef i = cg_loop_begin(f, &l, cg_i64(f, 0),
				       cg_i64(f, g->spec.m), 1);
	LLVMValueRef x = LLVMBuildLoad2(f->b, i32,
					LLVMBuildInBoundsGEP2(f->b, i32, live,
							      &i, 1, ""),
					"");
	LLVMValueRef at = cg_addi(f, i, 1);
	LLVMBuildStore(f->b, x,
		       LLVMBuildInBoundsGEP2(f->b, i32, dst, &at, 1, ""));
	cg_loop_end(f, &l);
	cg_if_end(f, join);
}

/* void NAME.range(const float *A, const float *B, float *C[, const float
 * *E0, ...], i64 lo, i64 hi, i64 n[, const i32 *live]): parts [lo, hi)
 * of n on the calling thread (live: is_rows_given's rows). */
static void gen_range(cg_gemm_gen *g, LLVMValueRef work)
{
	cg_fn f;
	char name[256];
	LLVMContextRef ctx = LLVMGetModuleContext(g->mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
	LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx);
	LLVMTypeRef params[7 + CG_GEMM_MAX_EPILOGUE] = {ptr, ptr, ptr};
	unsigned n_ptr = 3 + (unsigned)g->spec.n_epilogue;
	bool is_heap;

	for (unsigned i = 3; i < n_ptr + 3; i++)
		params[i] = i < n_ptr ? ptr : i64;
	unsigned n_par = n_ptr + 3;
	if (g->spec.is_rows_given)
		params[n_par++] = ptr;
	snprintf(name, sizeof name, "%s.range", g->name);
	/* Internal when it is all there is: kernels of one module call it,
	 * and two modules linked together must not clash. */
	cg_fn_begin(&f, g->mod, name,
		    LLVMFunctionType(LLVMVoidTypeInContext(ctx), params, n_par,
				     0),
		    g->spec.is_range_only);
	cg_fn_param_readonly(&f, 0);
	cg_fn_param_readonly(&f, 1);
	LLVMValueRef buf = alloc_buf(&f, &g->spec, &g->plan, cg_i64(&f, 1), 1,
				     &is_heap);
	if (g->spec.is_rows_given)
		copy_given_rows(&f, g, buf, LLVMGetParam(f.fn, n_ptr + 3));
	LLVMValueRef caps[CAP_MAX];
	caps_of(&f, g, buf, caps);
	call_work(&f, g, work, caps, LLVMGetParam(f.fn, n_ptr),
		  LLVMGetParam(f.fn, n_ptr + 1), LLVMGetParam(f.fn, n_ptr + 2));
	if (is_heap)
		cg_call_extern(&f, "free",
			       LLVMFunctionType(LLVMVoidTypeInContext(ctx),
						&ptr, 1, 0),
			       &buf, 1);
	LLVMBuildRetVoid(f.b);
	cg_fn_end(&f);
}

/* ---- the generator ---------------------------------------------------------- */

static void gen_plain_kernels(cg_gemm_gen *g)
{
	int64_t m = g->spec.m, n = g->spec.n;
	int rows[2] = {m >= CG_GEMM_MR ? CG_GEMM_MR : 0, (int)(m % CG_GEMM_MR)};
	int nr = g->plan.nr;
	int cols[2] = {n >= nr ? nr : 0, (int)(n % nr)};

	for (int re = 0; re < 2; re++)
		for (int ce = 0; ce < 2; ce++)
			if (rows[re] && cols[ce])
				g->ukr[re][ce] = cg_gemm_gen_ukr(g, rows[re],
								 cols[ce],
								 false);
	for (int k = 0; k < 4; k++)
		if (g->ukr[k / 2][k % 2])
			g->ukr_type = LLVMGlobalGetValueType(
				g->ukr[k / 2][k % 2]);
	if (g->plan.pack_a)
		g->pack_a = cg_gemm_gen_pack_a(g);
	if (g->plan.pack_b)
		g->pack_b = cg_gemm_gen_pack_b(g);
}

static void gen_kernels(cg_gemm_gen *g)
{
	int nr = g->plan.nr;
	int cols[2] = {g->spec.n >= nr ? nr : 0, (int)(g->spec.n % nr)};
	for (int ce = 0; g->is_m_gather && ce < 2; ce++)
		if (cols[ce]) {
			g->ukr_mg[ce] = cg_gemm_gen_ukr(g, CG_GEMM_MR, cols[ce],
							true);
			g->ukr_mg_type = LLVMGlobalGetValueType(g->ukr_mg[ce]);
		}
	gen_plain_kernels(g);
}

bool cg_gemm_add(cg_module *m, const char *name, const cg_gemm_spec *spec)
{
	char err[256];
	cg_gemm_gen g = {.name = name, .spec = *spec};
	g.mod = cg_module_llvm(m);
	if (!g.mod)
		return cg_module_fail(m, "gemm %s: the module is closed", name);
	if (!cg_gemm_plan_make(spec, &g.plan, err, sizeof err))
		return cg_module_fail(m, "gemm %s: %s", name, err);
	if (LLVMGetNamedFunction(g.mod, name))
		return cg_module_fail(m, "gemm %s: the name is taken", name);
	g.a_rs = spec->ta ? 1 : g.plan.lda;
	g.a_cs = spec->ta ? g.plan.lda : 1;
	g.b_rs = spec->tb ? 1 : g.plan.ldb;
	g.b_cs = spec->tb ? g.plan.ldb : 1;
	g.is_k_gather = cg_gemm_is_k_gather(spec, &g.plan);
	g.is_m_gather = cg_gemm_is_m_gather(spec, &g.plan);
	gen_kernels(&g);
	LLVMValueRef work = gen_work(&g);
	if (!spec->is_range_only) {
		LLVMValueRef par = g.plan.max_threads > 1 ? gen_par(&g, work)
							  : NULL;
		gen_entry(&g, work, par);
	}
	gen_range(&g, work);
	return true;
}
