/*
 * cg_attn.h - what the fused attention kernels (cg_lower_attn.c forward,
 * cg_lower_attn_grad.c backward) share, private to codegen/: the sizes and
 * constants of one fused node, its stack buffers, and the generators of
 * the pieces both kernels are made of (docs/fusion.md draws them).
 *
 * Shape letters: N batch x heads, Q queries, K keys, d the query/key
 * width, dv the value width (of one head); a block is BR query rows
 * against BC keys. A node with H heads reads them side by side in its
 * operands' rows (docs/ops.md): attention n = b*H + j is head j of batch
 * element b, its rows H*d (or H*dv) floats apart; cg_attn_row finds
 * them, and every product, pack and store takes those strides.
 * Every product of the kernels has the form C (+)= A B with A read one
 * scalar at a time and broadcast, and B and C read as rows of vectors:
 * the scores S = Q K^T (K packed transposed per block), O += P V,
 * dP = dO V^T, dQ += dS K, dK += dS^T Q and dV += P^T dO. One register-
 * tiled generator (cg_attn_prod) emits them all.
 */
#ifndef ATTNC_CG_ATTN_H
#define ATTNC_CG_ATTN_H

#include "cg_lower.h"

/* Keys beyond the valid lengths are skipped unless a row's running
 * maximum is within this of the fill, when exp(fill - max) could still
 * matter (a row of valid length 0 has only the fill). */
#define CG_ATTN_FILL_MARGIN 40.0f
/* exp(x) is exactly 0 in float32 (cg_lower_exp_nonpos) for x below
 * -87.34: a row whose maximum is more than this above the fill gives
 * its masked keys the weight 0. */
#define CG_ATTN_EXP_ZERO 88.0f

typedef struct cg_attn {
	cg_kernel *k;
	cg_fn *f;
	int64_t N, Q, K, d, dv; /* N = B*H attentions, d and dv per head */
	int64_t H;              /* heads side by side in a row */
	int64_t br, bc;         /* query rows and keys of a block */
	int64_t brp;            /* br rounded up to vectors */
	unsigned vw;            /* floats per vector */
	int64_t nj;             /* vectors across a block's keys: bc / vw */
	int64_t wpad;           /* max(d, dv) rounded up to vectors */
	float scale, fill;
	bool has_valid;
	int64_t valid_sn, valid_sq; /* valid's strides along N and Q (0:
				     * stretched) */
	bool has_dropout;           /* p > 0 */
	int64_t threshold;     /* keep iff the top 24 random bits are >= it */
	float keep_scale;      /* 1 / (1 - p) */
	LLVMValueRef drop_on;  /* i1: a training run and p > 0 */
	LLVMValueRef drop_key; /* i64: cg_lower_dropout_key */
	LLVMValueRef q, kk, v, valid, g; /* operands (valid, g may be NULL) */
	/* stack buffers (per thread: each kernel call has its own) */
	LLVMValueRef kt, vt;  /* d x bc, dv x bc: a block of K, V transposed */
	LLVMValueRef sb, db;  /* br x bc: scores, weights, dP, dS */
	LLVMValueRef acc;     /* br x wpad: output (or dQ) rows */
	LLVMValueRef m, l, x; /* brp floats: running max, sum, one more */
	LLVMValueRef rv;      /* br i64: each row's valid length */
	/* Every key block of one attention packed, block after block (kc x
	 * d and kc x dv floats; vt_all only in the backward), so that each
	 * query block of that attention reuses them (kt and vt point into
	 * them): on the stack up to CG_ATTN_STACK_KEYS bytes, else one heap
	 * block per call. */
	LLVMValueRef kt_all, vt_all;
	LLVMValueRef packed_n;   /* i64 var: the attention packed, or -1 */
	LLVMValueRef packed_end; /* i64 var: its keys packed so far */
	LLVMValueRef keys_heap;  /* the heap block of kt_all, vt_all, or NULL */
	int64_t srs; /* floats between rows of sb and db: bc, or kc + 16 */
	/* The cache of a query block's rows over all its keys (is_cached):
	 * the forward's scores, then weights; the backward's pass 1, the
	 * scores, then exponentials, and dP, kept for pass 2. */
	bool is_cached;
	int64_t kc, nkb;     /* K rounded up to whole blocks, key blocks */
	LLVMValueRef ec, dc; /* br x srs: the scores, then exp(s - m); dP
			      * (dc only in the backward) */
	LLVMValueRef heap;   /* the cache's aligned_alloc'd block, or NULL
			      * when it sits on the stack */
	/* Where the products stop (has_valid): the keys each row needs. */
	LLVMValueRef nd; /* brp i64: keys 0 .. nd[i] of row i weigh */
	LLVMValueRef fr; /* bc i32: the first row a block's key t needs */
	/* i1, or NULL (true): whether the attention being computed may
	 * leave out the terms of its masked keys (cg_attn_finite) */
	LLVMValueRef fin;
	LLVMValueRef fin_b, fin_ok; /* vars: cg_attn_finite's batch element
				     * (-1: none yet) and its result */
	/* The small kernels' cache of the weights (cg_attn_cache_pair): the
	 * forward writes it after its output, the backward reads it. */
	bool has_wc;
	LLVMValueRef wc; /* its first float, or NULL */
	/* The small kernels' floats per block row: the kernel's vw, which
	 * sets the layout of their stack buffers and of the weights' cache
	 * and the order of their sums over keys, also in the blocks of at
	 * most 8 rows that they compute in vectors of vw = 8; and in those,
	 * the kernel's own shape (wide), else NULL. */
	unsigned lw;
	struct cg_attn *wide;
	/* The dead query rows (cg_attn_row_skip_valid): how many valid
	 * lengths the kernel reads last (0: none, every row computed; 1:
	 * t < v[b]; 2: keys(v over t < w)), and in the body the lengths (live_w: KEYS's queries' PREFIX) and whether the
	 * program's row_skip is set (i1). */
	int n_live;
	int live_op;
	LLVMValueRef live_v, live_w, rs_on;
} cg_attn;

/* Whether fused attention (or gradient) node id of g leaves out its
 * dead query rows in a call whose row_skip is set (cg_lower_row_skip_
 * valid for attention nodes): a forward, a gradient that takes the
 * small kernels (the blocked backward computes every row), or a fused
 * additive attention or its gradient, with L->rl, whose queries' rows
 * (the forward's result's liveness; the gradient's output gradient's
 * nonzero rows) are t < v[b] or keys(v over t < w), v and w i32 (B),
 * or, for the additive ones, step k of a recurrence over t < v
 * (cg_attn_row_step). A forward and its gradient that share the
 * weights' cache (cg_attn_cache_pair) skip only with the same
 * expression, so that the gradient reads no slot the forward left out.
 * Returns how many valid lengths the kernel reads after its other
 * operands, or -1: every row computed. */
int cg_attn_row_skip_valid(const cg_lower *L, const ir_graph *g, ir_id id,
			   ir_id *valid);
/* Whether op is a fused additive attention or its gradient. */
bool cg_attn_is_additive(ir_op op);
/* Whether op is one of the fused attentions cg_attn_row_skip_valid
 * answers for: dot-product or additive, forward or gradient. */
bool cg_attn_is_fused(ir_op op);
/* For a fused additive attention (or gradient) node id whose query
 * rows are step k of a recurrence unrolled over t < v (rowlive's STEP:
 * all of batch element b's rows live where k < v[b],
 * cg_lower_step_live), that expression x; else NULL. */
const pass_rowlive_expr *cg_attn_row_step(const cg_lower *L, const ir_graph *g,
					  ir_id id);
/* The multiply-adds of fused attention (or gradient) node id, as the
 * row_skip switch's share counts them (cg_program.c): the forward's
 * N·Q·K·(d + dv) (scores, output; an additive one's d is the
 * projections' width H), the gradient's twice that (dP, dq, dk, dv). */
double cg_attn_macs(const cg_lower *L, const ir_graph *g, ir_id id);
/* Of a block's `full` query rows from q0, those below live
 * (cg_attn_live): an i64 in [0, full]. */
LLVMValueRef cg_attn_live_rows(cg_attn *a, LLVMValueRef live, LLVMValueRef q0,
			       LLVMValueRef full);
/* A kernel that reads row_skip (a->n_live) counts in the program's
 * share of the multiply-adds that leave dead rows out
 * (CG_ROW_SKIP_MIN_SHARE). */
void cg_attn_count_row_skip(cg_kernel *k, const cg_attn *a);
/* The live queries of attention n (an i64 in [0, Q]): from the lengths
 * when the program's row_skip is set, else Q (and Q without n_live). */
LLVMValueRef cg_attn_live(cg_attn *a, LLVMValueRef n);
/* Whether node id takes the small kernels (cg_attn_is_small of its
 * operands' sizes). */
bool cg_attn_node_is_small(const cg_lower *L, const ir_graph *g, ir_id id);

/* The strides, in elements, of valid lengths of type vt (i32 [N] or
 * [N, Q], either axis possibly broadcast from 1) between batch elements
 * (*sn) and between queries (*sq); 0 along a broadcast axis. */
void cg_attn_valid_strides(const cg_kernel *k, const ir_type *vt, int64_t *sn,
			   int64_t *sq);
/* Reads the node's sizes and attributes (emits nothing). */
void cg_attn_shape(cg_attn *a, const cg_kernel *k, bool is_grad);
/* Sets the query rows of a block to br (at most Q, at least 1): no
 * more than cg_attn_shape chose, which keeps a block's accumulator
 * within its buffer's bound. */
void cg_attn_set_rows(cg_attn *a, int64_t br);

/* Emits the body of a kernel with a's shape: given a with its buffers,
 * operands and dropout key set, the loop over [lo, hi) of the kernel's
 * outer extent (a->k->lo, a->k->hi). */
typedef void (*cg_attn_gen)(cg_attn *a);

/* The most bytes of the backward's cache (is_cached: ec and dc) on the
 * body's stack; a larger one is one aligned_alloc'd block per call of
 * the body, freed at its end (a failed allocation traps: generated code
 * has no error channel). */
#define CG_ATTN_STACK_CACHE (512 * 1024)

/* Makes kernel k a call of the shared function that gen emits for a's
 * shape: nodes that differ only in their dropout stream (each attention
 * of a model has its own) share one body, which takes the stream's key
 * as an argument. kind names the kernel ("fwd", "bwd"); a backward
 * with the cache (is_cached) has ".cached" at the end of its name. */
void cg_attn_call_body(cg_kernel *k, const cg_attn *shape, const char *kind,
		       cg_attn_gen gen);

/* An array of n elements of t on the kernel's stack, 64-byte aligned. */
LLVMValueRef cg_attn_buffer(cg_attn *a, LLVMTypeRef t, int64_t n);

/* The vector of columns c .. c + vw of a row of width floats at p (p
 * points at column c): a masked load or store of the last, partial one. */
LLVMValueRef cg_attn_load_part(cg_attn *a, LLVMValueRef p, int64_t width,
			       int64_t c);
void cg_attn_store_part(cg_attn *a, LLVMValueRef v, LLVMValueRef p,
			int64_t width, int64_t c);

/* A local variable (promoted to a register) holding init. */
LLVMValueRef cg_attn_var(cg_attn *a, LLVMTypeRef t, LLVMValueRef init);
LLVMValueRef cg_attn_get(cg_attn *a, LLVMTypeRef t, LLVMValueRef var);
void cg_attn_set(cg_attn *a, LLVMValueRef var, LLVMValueRef v);

/* The offset (in floats) of row i of attention n in an operand whose
 * rows hold H heads of w floats, `rows` rows per batch element: head
 * n % H of row i of batch element n / H. */
LLVMValueRef cg_attn_row(cg_attn *a, LLVMValueRef n, int64_t rows,
			 LLVMValueRef i, int64_t w);

/* Fills a->rv[0 .. rows) with the valid length of query rows q0 ..
 * q0 + rows of attention n (its batch element's; K without a mask) and
 * returns the largest of them clamped to [0, K]: the keys the block
 * needs. */
LLVMValueRef cg_attn_block_valid(cg_attn *a, LLVMValueRef n, LLVMValueRef q0,
				 LLVMValueRef rows);

/* The most bytes of kt_all and vt_all on the body's stack; more are one
 * aligned_alloc'd block per call of the body (a failed allocation
 * traps, as the cache's). */
#define CG_ATTN_STACK_KEYS (128 * 1024)

/* Points a->kt (and a->vt in the backward) at the key block at j0 of
 * attention n, packing it first unless this call of the body already
 * has: the first block an attention visits is its first (j0 = 0), and
 * the loops over key blocks visit them in order from 0 with no gap, so
 * the blocks packed are always 0 .. packed_end. Packing each block once
 * per attention instead of once per query block leaves the values, and
 * the products' results, as they were. */
void cg_attn_keys(cg_attn *a, LLVMValueRef n, LLVMValueRef j0);

/* dst[c * bc + t] = src[t * stride + c] for c < width and t < jn, 0 for
 * jn <= t < bc: jn rows of K or V (src at the block's first) transposed
 * for a product. */
void cg_attn_pack(cg_attn *a, LLVMValueRef dst, LLVMValueRef src, int64_t width,
		  int64_t stride, LLVMValueRef jn);

/* C (+)= A B: row r of C (rows of them) at c + r * c_rs; A(r, t) at
 * a + r * a_rs + t * a_ts; row t of B (len of them) at b + t * b_ts; width
 * columns. A padded operand has whole vectors past width to read or
 * write; an unpadded one is read and written with masks. */
typedef struct cg_attn_prod {
	LLVMValueRef a, b, c;
	int64_t a_rs, a_ts, b_ts, c_rs;
	int64_t width;
	bool is_b_padded, is_c_padded;
	bool is_acc;
	LLVMValueRef rows, len; /* i64 */
	/* Optional bounds of the sum over t, where the terms left out are
	 * 0: a tile of rows r stops at max(lim[r]) - lim_off (lim: i64 per
	 * row of C) and starts at from[r0] for its first row r0 (from: i32
	 * per row of C, not decreasing). */
	LLVMValueRef lim, lim_off, from;
	/* Optional bound of the columns, where C is never read: a tile of
	 * rows r computes only its vectors of columns that start below
	 * max(cols[r]) - cols_off (cols: i64 per row of C) and leaves the
	 * others as they were. */
	LLVMValueRef cols, cols_off;
} cg_attn_prod;

void cg_attn_prod_emit(cg_attn *a, const cg_attn_prod *p);
/* S = Q K^T of a block: rows of q (a query block's first row, rows H d
 * apart) times the packed keys kt of the key block at j0, into c (rows
 * c_rs apart, padded to bc); the forward's, the cached forward's and the
 * backward's. With valid lengths, the vectors of keys at or past every
 * valid length (a->rv) of a tile's rows are left as they were: their
 * scores are the fill whatever the product (cg_attn_scores). */
void cg_attn_qk(cg_attn *a, LLVMValueRef q, LLVMValueRef rows, LLVMValueRef j0,
		LLVMValueRef c, int64_t c_rs);

/* Vector j of row i of a block's scores in sb (rows srs apart), times
 * scale, with keys past the row's valid length (rv[i]) set to fill and
 * keys past K to -inf; j0 is the block's first key. */
LLVMValueRef cg_attn_scores(cg_attn *a, LLVMValueRef i, LLVMValueRef j0,
			    int64_t j);
/* Lanes (a <vw x i1>) of vector j of the block at j0 whose keys are
 * below K; NULL when K is a multiple of bc (all are). */
LLVMValueRef cg_attn_real_keys(cg_attn *a, LLVMValueRef j0, int64_t j);
/* Lanes (a <vw x i1>) of vector j of the block at j0 whose keys are
 * below row i's valid length. */
LLVMValueRef cg_attn_in_valid(cg_attn *a, LLVMValueRef i, LLVMValueRef j0,
			      int64_t j);
/* Lanes (a <vw x i1>) of vector j of the block at j0 whose keys are
 * below row i's need (nd[i], cg_attn_set_need). */
LLVMValueRef cg_attn_in_need(cg_attn *a, LLVMValueRef i, LLVMValueRef j0,
			     int64_t j);
/* The keep mask (a <vw x i1>) of dropout for vector j of row i of the
 * block at j0, q0; all set when dropout is off for this run. Only for a
 * node with p > 0. */
LLVMValueRef cg_attn_keep(cg_attn *a, LLVMValueRef n, LLVMValueRef q0,
			  LLVMValueRef i, LLVMValueRef j0, int64_t j);

/* dst[0 .. width) = src[0 .. width) * s: src padded to whole vectors,
 * dst not (its last vector is stored through a mask). */
void cg_attn_scale_row(cg_attn *a, LLVMValueRef dst, LLVMValueRef src,
		       int64_t width, LLVMValueRef s);

/* max(x, y) lane by lane (x > y ? x : y, x86's max). */
LLVMValueRef cg_attn_vmax(cg_attn *a, LLVMValueRef x, LLVMValueRef y);
/* Horizontal max and sum of a vector. */
LLVMValueRef cg_attn_hmax(cg_attn *a, LLVMValueRef v);
LLVMValueRef cg_attn_hsum(cg_attn *a, LLVMValueRef v);
/* exp(gap) of a scalar gap <= 0 (a difference of running maxima, the
 * new one shifted: cg_attn_shift), the exponential computed only where
 * gap is below 0: at 0 it is exactly 1, and past a long row's first key
 * blocks its maximum seldom moves. A NaN gap (+inf - +inf, in a row
 * whose weights are NaN already) gives 1. */
LLVMValueRef cg_attn_exp_gap(cg_attn *a, LLVMValueRef gap);

/* ---- values that are not finite (docs/fusion.md) ----
 * The exponentials of the online softmax follow the interpreter's
 * softmax (PyTorch's) on scores that are not finite: the running maximum
 * m (llvm.maxnum, x86's max) passes over NaN scores, and a NaN score or
 * +inf - +inf gives the weight NaN, which makes l and then the whole row
 * NaN; -inf scores weigh 0, unless a row has only those (no fill), when
 * l is 0 and its weights 0 / 0. cg_attn_shift(m) is what they subtract:
 * m, or 0 while m is -inf (no score above -inf yet), so that
 * exp(-inf - m) is 0, not NaN. m and the result may be vectors. */
LLVMValueRef cg_attn_shift(cg_attn *a, LLVMValueRef m);
/* exp(s - shift): NaN for NaN, cg_lower_exp_nonpos's bits otherwise. */
LLVMValueRef cg_attn_exp(cg_attn *a, LLVMValueRef s, LLVMValueRef shift);

/* x (an integer, an i1 or a float) in every one of vw lanes. */
LLVMValueRef cg_attn_splat(cg_attn *a, LLVMValueRef x);
/* The sum of |x| over the rows 0 .. rows of attention n's batch
 * element, all H heads, in operand p (rows of H heads of w floats): NaN
 * or +inf where one of them is not finite, and a bound on every
 * element's magnitude. */
LLVMValueRef cg_attn_abs_sum(cg_attn *a, LLVMValueRef p, LLVMValueRef n,
			     int64_t rows, int64_t w);
/* Whether the terms the kernels leave out of attention n (keys past the
 * valid lengths, and the masked part of a causal block), whose weights
 * are 0, are +-0, so that leaving them out keeps the interpreter's
 * results, an i1. The forward's (is_grad false) are 0 v: v finite. The
 * backward's are 0 dP in D, 0 k in dq, 0 q in dk and 0 g in dv, and it
 * recomputes the weights of the rows they belong to: q, k, v and g
 * finite, and no score and no dP overflows (bounded through the sums of
 * |x|), so that no row's weights are NaN. Elsewhere the kernels visit
 * every key (a->fin false), where the products give the interpreter's
 * NaNs. The sums cover all heads of n's batch element, contiguous, and
 * are computed when the batch element differs from the last one's
 * (consecutive attentions are its heads): cg_attn_finite_begin, before
 * the loop over attentions, starts with none. */
void cg_attn_finite_begin(cg_attn *a);
LLVMValueRef cg_attn_finite(cg_attn *a, LLVMValueRef n, bool is_grad);

/* len floats at p set to v (a float value), whole vectors: len must be
 * a multiple of vw and p hold them. */
void cg_attn_fill(cg_attn *a, LLVMValueRef p, LLVMValueRef len, float v);

/* nd[i] = the keys row i needs, given its (running) maximum m: its
 * valid length (at most K) when m is more than CG_ATTN_EXP_ZERO above
 * the fill, so that the keys past it weigh exactly 0, and a->fin (if
 * set) holds; else K. */
void cg_attn_set_need(cg_attn *a, LLVMValueRef i, LLVMValueRef m);
/* fr[t] for t < bc = the number of rows i < rows below which every row
 * needs no more keys than j0 + t: key j0 + t has weight 0 in each. */
void cg_attn_key_starts(cg_attn *a, LLVMValueRef j0, LLVMValueRef rows);

/* The loop over a block's keys, in blocks of bc from key 0 to kmax, then
 * on to K if some row's running maximum (a->m, rows of them) is still
 * within CG_ATTN_FILL_MARGIN of the fill. body emits one block at j0.
 * Returns the end of the keys visited (an i64 value, read after the
 * loop). */
typedef void (*cg_attn_block_fn)(cg_attn *a, LLVMValueRef j0, void *ud);
LLVMValueRef cg_attn_key_loop(cg_attn *a, LLVMValueRef kmax, LLVMValueRef rows,
			      cg_attn_block_fn body, void *ud);

/* Row i of the key block at j0 with a cache (is_cached, a->sb at the
 * block's columns of ec): its scores, scaled and masked
 * (cg_attn_scores), back in place, and a->m[i] = the row's maximum so
 * far. The exponentials wait for the whole row, which then needs one
 * maximum instead of an online rescaling at every key block. */
void cg_attn_max_row(cg_attn *a, LLVMValueRef i, LLVMValueRef j0);
/* The end of the key blocks a key loop that ended at jend visited:
 * jend rounded up to whole blocks (every key of a visited block is in
 * the cache, and the products of the block may read any of them). */
LLVMValueRef cg_attn_blocks_end(cg_attn *a, LLVMValueRef jend);

/* ---- the small kernels (cg_lower_attn_small.c) ----
 * With few keys (the book's Transformer: 10 keys, heads of 8) a block is
 * up to vw query rows held in the lanes of every vector: a row of scores
 * per key, the softmax over keys vertical (no horizontal reductions, no
 * online rescaling: all keys at once), Q, dO and the results transposed
 * in and out of the lanes with cg_attn_load_t and cg_attn_store_t. */
#define CG_ATTN_SMALL_K 16 /* most keys */
#define CG_ATTN_SMALL_W 64 /* widest d and dv */

/* Whether a's node takes the small kernels: 1 <= K <= CG_ATTN_SMALL_K,
 * 1 <= d, dv <= CG_ATTN_SMALL_W. */
bool cg_attn_is_small(const cg_attn *a);

/* Lowers kernel k (of shape a, cg_attn_is_small) with the small forward
 * or backward body; sets its extent and work. */
void cg_attn_small_fwd(cg_kernel *k, const cg_attn *a);
void cg_attn_small_bwd(cg_kernel *k, const cg_attn *a);

/* The cache of the weights between a small forward and its gradient:
 * for a fused_attention node id of g, the fused_attention_grad node that
 * reads the weights its kernel leaves after its output (the first
 * gradient of the same operands and attributes, both nodes taking the
 * small kernels); for a fused_attention_grad node, that forward. IR_NONE
 * for none. The gradient's kernel takes the forward's buffer as one more
 * operand (node_call's extra), which keeps it alive until then. */
ir_id cg_attn_cache_pair(const cg_lower *L, const ir_graph *g, ir_id id);
/* The bytes of node id's buffer: its output's, and for a fused_attention
 * that leaves a cache (cg_attn_cache_pair), the cache after the output
 * rounded up to 64 bytes. */
uint64_t cg_attn_node_bytes(const cg_lower *L, const ir_graph *g, ir_id id);
/* Where that cache begins in the forward's buffer: the output's bytes
 * rounded up to 64 (the one place the layout says so). */
static inline uint64_t cg_attn_cache_offset(uint64_t out_bytes)
{
	return (out_bytes + 63) / 64 * 64;
}

/* cols[c] for c < width: column c of rows 0 .. rows (<= vw) of src (rows
 * stride floats apart), a vector over the rows; lanes past rows are 0. */
void cg_attn_load_t(cg_attn *a, LLVMValueRef *cols, LLVMValueRef src,
		    int64_t width, int64_t stride, LLVMValueRef rows);
/* The inverse: dst[t * stride + c] = lane t of cols[c], t < rows. */
void cg_attn_store_t(cg_attn *a, LLVMValueRef dst, const LLVMValueRef *cols,
		     int64_t width, int64_t stride, LLVMValueRef rows);
/* The lanes t < rows (a <vw x i1>). */
LLVMValueRef cg_attn_lanes(cg_attn *a, LLVMValueRef rows);
/* Lane t: the valid length (i32) of query q0 + t of attention n (0 past
 * rows). Only for a node with valid lengths. */
LLVMValueRef cg_attn_valid_t(cg_attn *a, LLVMValueRef n, LLVMValueRef q0,
			     LLVMValueRef rows);
/* Lane t: dropout's keep decision for the weight of query q0 + t and
 * key k of attention n (the same draw as cg_attn_keep's). */
LLVMValueRef cg_attn_keep_t(cg_attn *a, LLVMValueRef n, LLVMValueRef q0,
			    int64_t k);

/* min(x, y) of i64 values. */
LLVMValueRef cg_attn_min(cg_attn *a, LLVMValueRef x, int64_t y);

/* The length of the block of at most width rows (or keys) that starts at
 * start of the n of them: min(n - start, width). */
LLVMValueRef cg_attn_block_len(cg_attn *a, int64_t n, LLVMValueRef start,
			       int64_t width);

#endif
