/*
 * cg_lower.h - what the lowering files share (private to codegen/): the
 * kernel being generated for one node, concrete shapes, the strided loop
 * nest every elementwise and layout kernel is built from, and the
 * generator of each op.
 *
 * A kernel is one LLVM function per computing node:
 *
 *   i32 k<fn>.<node>(ptr run, ptr out, ptr in0, ..., [ptr streams,]
 *                    i64 lo, i64 hi)
 *
 * that does iterations [lo, hi) of its outer loop, whose length the
 * generator records in `extent` (so that the entry point can split it
 * over threads), and returns 0 or ATTNRT_ERR_* (naming no node: the
 * caller adds its node's number, cg_entry_node_status). Operands and
 * the result are dense row-major buffers that never overlap; streams,
 * when the node or its fused trees have dropout, the table of their
 * random streams (cg_lower_stream.c).
 */
#ifndef ATTNC_CG_LOWER_H
#define ATTNC_CG_LOWER_H

#include "cg_internal.h"
#include "cg_program.h"
#include "passes.h"
#include "rowlive.h"

#define CG_NEST_MAX 16      /* loop depth of a nest (layout ops split axes) */
#define CG_NEST_ARRS 16     /* arrays one nest addresses (fused leaves too) */
#define CG_KERNEL_MAX_IN 64 /* pointer operands of one kernel */
/* Nodes of a kernel's trees: a leaf per operand of a node that hosts
 * nothing (concat), or the planner's bound for one that does. */
#define CG_TREE_MAX (CG_KERNEL_MAX_IN + PASS_FUSE_EW_MAX_NODES)

/* The state of one lowering run. */
typedef struct cg_lower {
	ir_ctx *ctx;
	const ir_module *m;
	const int64_t *syms; /* m->n_syms bound values */
	cg_module *cm;
	LLVMModuleRef mod;
	int64_t gemm_min; /* multiply-adds from which a matmul uses cg_gemm */
	uint32_t n_gemms; /* sgemm functions generated (for unique names) */
	unsigned vw;      /* floats per vector of the sgemm and attention
			   * kernels: 8 (AVX2) or 16 (AVX-512) */
	/* The program's global { i64 index, i64 bound } where a kernel that
	 * fails with ATTNRT_ERR_INDEX leaves what it read
	 * (cg_kernel_fail_index_if, cg_program_index_error). */
	LLVMValueRef index_error;
	bool keep_zero_rows; /* cg_program_options.keep_zero_rows */
	bool no_attn_cache;  /* cg_program_options.no_attn_cache */
	/* Row liveness of the function being lowered (NULL: none, with
	 * cg_program_options.no_row_skip), and the program's global i32
	 * that turns its use on for a call (cg_program_set_row_skip). */
	const pass_rowlive *rl;
	/* With rl: n_nodes flags, the forward's nodes (those that depend
	 * on no gradient op), whose row-wise kernels may leave rows out. */
	const bool *rl_fwd;
	LLVMValueRef row_skip;
	uint32_t n_row_skip; /* the products that read row_skip */
	/* Multiply-adds of the products and fused attentions lowered, and
	 * of those that read row_skip: the program keeps the switch only
	 * where they are at least CG_ROW_SKIP_MIN_SHARE of all
	 * (cg_program.c). */
	double macs, row_skip_macs;
} cg_lower;

/* The share of a program's products' and fused attentions'
 * multiply-adds that must leave padding rows out for it to keep its
 * row_skip switch: the driver's check before each step costs ~1-1.5% of
 * a book model's step; with 5.2% (Bahdanau's output layer) the step was
 * 1.3% slower, with 33% (the Transformer's 33 products, before the
 * attentions joined) 1.1x faster (docs/codegen.md). */
#define CG_ROW_SKIP_MIN_SHARE 0.10

/* One node of the trees through which a kernel reads its operands
 * (elementwise fusion, docs/fusion.md): a leaf reads a buffer, a fused
 * node computes its IR node from its children's values. An operand that
 * is not fused is a tree of one leaf. t holds element strides, one per
 * axis of the kernel operand whose tree holds the node: at operand index
 * x a leaf reads element sum_j x[j] t[j] of its buffer, and a fused
 * dropout draws the random bits of that flat index of its own. */
typedef struct cg_tree_node {
	ir_id id;
	bool is_leaf;
	uint32_t kid[3]; /* fused: the tree nodes of its operands */
	uint32_t param;  /* leaf: its pointer is k->in[param] */
	uint32_t first;  /* leaf: the first leaf of its operand's tree that
			  * reads the same elements (itself, or one whose
			  * param and array it shares) */
	int64_t t[IR_MAX_RANK];
	int64_t base; /* the element at operand index 0 (a fused slice's start) */
	/* Leaf and fused dropout, set by cg_nest_add_operand: the nest
	 * array that walks t, and t along a row kernel's inner axis. */
	int arr;
	int64_t inner;
} cg_tree_node;

/* The trees of one kernel. Its pointer parameters are one per operand of
 * the node (a fused operand's is null and never read), then one per leaf
 * of the fused trees, in tree order, leaves that read the same buffer
 * sharing one (and leaves of one operand's tree that read the same
 * elements of it sharing their array too). */
typedef struct cg_trees {
	cg_tree_node n[CG_TREE_MAX];
	uint32_t n_nodes;
	uint32_t opnd[CG_KERNEL_MAX_IN]; /* the root of operand i's tree */
	uint32_t n_par;
} cg_trees;

/* One kernel under construction. */
typedef struct cg_kernel {
	cg_lower *L;
	const ir_graph *g;
	ir_id id;
	const ir_node *node;
	cg_fn f;
	LLVMValueRef run, out, lo, hi;
	LLVMValueRef in[CG_KERNEL_MAX_IN]; /* pointer parameters (cg_trees) */
	uint32_t n_in;
	cg_trees tr;
	LLVMValueRef is_train; /* i1: a training run (when a dropout is fused) */
	LLVMValueRef key[CG_TREE_MAX]; /* fused dropouts' keys */
	int64_t extent;        /* length of the outer, splittable loop */
	int64_t work;          /* elements touched, to judge parallelism */
	LLVMBasicBlockRef err; /* shared error exit, made on first use */
	/* Dropout streams (cg_lower_stream.c): the node's and its fused
	 * trees', and the parameter of their table (NULL: none). */
	uint32_t stream_ids[CG_TREE_MAX + 2];
	uint32_t n_streams;
	LLVMValueRef streams;
	bool has_own_stream; /* a stream is a constant: share the kernel not */
	/* The step of its rows (cg_lower_row_step; -1: none), the table's
	 * entry after the streams. */
	int64_t row_step;
	/* In an outlined body (cg_kernel_outline_begin): that step, its
	 * parameter; else NULL. */
	LLVMValueRef step_arg;
} cg_kernel;

/* ---- shapes (cg_lower_kernel.c) ----------------------------------------- */

/* The concrete dims of t; returns the rank. */
int cg_lower_dims(const cg_lower *L, const ir_type *t, int64_t *dims);
/* Whether a and b have the same dtype and concrete dims. */
bool cg_lower_same_type(const cg_lower *L, const ir_type *a, const ir_type *b);
/* The number of elements of t, its symbols bound. */
int64_t cg_lower_numel(const cg_lower *L, const ir_type *t);
/* The bytes of a dense tensor of type t. */
uint64_t cg_lower_bytes(const cg_lower *L, const ir_type *t);
/* Row-major strides of dims (in elements). */
void cg_lower_strides(const int64_t *dims, int rank, int64_t *strides);
/* The type of operand i of the kernel's node. */
const ir_type *cg_kernel_arg_type(const cg_kernel *k, uint32_t i);

/* ---- values (cg_lower_kernel.c, but exp and the like cg_lower_math.c) --- */

/* The LLVM type of one element of dtype t: i32, else float (the
 * backend's dtypes are f32 and i32). */
LLVMTypeRef cg_lower_elem_type(cg_fn *f, ir_dtype t);
/* Load/store element off (an i64) of buffer p as dtype t. */
LLVMValueRef cg_lower_load(cg_fn *f, ir_dtype t, LLVMValueRef p,
			   LLVMValueRef off);
void cg_lower_store(cg_fn *f, ir_dtype t, LLVMValueRef v, LLVMValueRef p,
		    LLVMValueRef off);
/* Calls a float intrinsic of one or two f32 arguments (llvm.exp, ...). */
LLVMValueRef cg_lower_fcall(cg_fn *f, const char *name, LLVMValueRef a,
			    LLVMValueRef b);
/* exp and tanh of an f32 in IR that vectorizes (cg_lower_math.c). */
LLVMValueRef cg_lower_exp(cg_fn *f, LLVMValueRef x);
LLVMValueRef cg_lower_tanh(cg_fn *f, LLVMValueRef x);
/* exp of x <= 0 (or -inf), the softmax's case: cg_lower_exp's formula
 * without its overflow and NaN handling; x > 0 gives garbage. */
LLVMValueRef cg_lower_exp_nonpos(cg_fn *f, LLVMValueRef x);
/* e^d of d = x - max(row) of a softmax or a cross-entropy: d <= 0, or
 * NaN when the row holds a NaN or an infinity, which it keeps;
 * cg_lower_exp's bits for less work. */
LLVMValueRef cg_lower_exp_shifted(cg_fn *f, LLVMValueRef d);
/* 1 / (1 + e^-x) of an f32 or a vector of them, through e^-|x|. */
LLVMValueRef cg_lower_sigmoid(cg_fn *f, LLVMValueRef x);
/* erf x for a float or a vector of floats, within 2 ulps (scripts/fit_erf.py). */
LLVMValueRef cg_lower_erf(cg_fn *f, LLVMValueRef x);
/* SplitMix64's finalizer (runtime/rt_rng.c mix()) of an i64 or a vector
 * of them. */
LLVMValueRef cg_lower_mix64(cg_fn *f, LLVMValueRef z);
/* The dropout key mix(seed ^ mix(step << 20 ^ stream)) of this run: the
 * random bits of element i are then cg_lower_mix64(key + i), as
 * rt_rng_bits(seed, step << 20 ^ stream, i) (docs/ops.md). */
LLVMValueRef cg_lower_dropout_key(cg_kernel *k, uint32_t stream);
/* Returns from the kernel with its error code (an ATTNRT_ERR_*, which
 * the caller makes its node's) when cond holds, else continues after. */
void cg_kernel_fail_if(cg_kernel *k, LLVMValueRef cond, int code);
/* Fails with ATTNRT_ERR_INDEX, as cg_kernel_fail_if, when the i64 index
 * is outside [0, bound); it first stores both into the program's
 * index_error global, for the message (cg_program_index_error). */
void cg_kernel_fail_index_if(cg_kernel *k, LLVMValueRef index,
			     LLVMValueRef bound);
/* A kernel's work outlined into a function that every kernel with the
 * same `name` calls (the attention kernels' bodies):
 *   void name(ptr run, ptr out, ptr in..., i64 lo, i64 hi, i64 key,
 *             i64 step)
 * cg_kernel_outline_begin starts it and fills *kb as k with the
 * function's parameters (and no error exit: a body cannot fail); it
 * returns key. cg_kernel_outline_end returns from it and closes it;
 * cg_kernel_outline_call calls it from k with k's pointers, range, key
 * and its rows' step (cg_kernel_row_step; 0 without one), which
 * cg_kernel_row_step gives in the body. */
LLVMValueRef cg_kernel_outline_begin(const cg_kernel *k, const char *name,
				     cg_kernel *kb);
LLVMValueRef cg_kernel_outline_end(cg_kernel *kb);
void cg_kernel_outline_call(cg_kernel *k, LLVMValueRef body, LLVMValueRef key);
/* Loads the field of attnrt_run `run` at offset (offsetof(attnrt_run,
 * field)) as a t; the kernel's own run for cg_kernel_run_field. */
LLVMValueRef cg_run_field(cg_fn *f, LLVMValueRef run, LLVMTypeRef t,
			  size_t offset);
LLVMValueRef cg_kernel_run_field(cg_kernel *k, LLVMTypeRef t, size_t offset);
/* The run's is_training flag, as an i1. */
LLVMValueRef cg_kernel_is_training(cg_kernel *k);

/* ---- strided loop nests (cg_lower_ew.c) --------------------------------- */

/* A nest of loops over dims (outermost first); array a is addressed at
 * base[a] + sum_d idx[d] * strides[a][d]. The outer loop runs [lo, hi). */
typedef struct cg_nest {
	int rank;
	int n_arr;
	/* The innermost loop stays a loop (cg_loop_no_unroll) for LLVM to
	 * vectorize along it; else, when short, it may be unrolled and the
	 * loop around it vectorized, each array gathered across rows. */
	bool is_inner_kept;
	int64_t dims[CG_NEST_MAX];
	int64_t base[CG_NEST_ARRS];
	int64_t strides[CG_NEST_ARRS][CG_NEST_MAX];
} cg_nest;

/* Emits the body at the innermost point; offs[a] is array a's element
 * offset there (an i64 value). */
typedef void (*cg_nest_body)(cg_kernel *k, LLVMValueRef *offs, void *ud);

/* Drops size-1 axes and merges neighbours that every array walks
 * contiguously, so that most nests become one flat loop; a nest of rank
 * 0 becomes one loop of one iteration. Empty nests keep a 0 extent. */
void cg_nest_simplify(cg_nest *n);
void cg_nest_emit(cg_kernel *k, const cg_nest *n, LLVMValueRef lo,
		  LLVMValueRef hi, cg_nest_body body, void *ud);
/* Sets array a's strides to read a tensor of dims (rank) broadcast to
 * the nest's (right-aligned) dims: 0 on stretched axes. */
void cg_nest_bcast(cg_nest *n, int a, const int64_t *dims, int rank);

/* ---- fused operands (cg_fuse.c) ------------------------------------------ */

/* The trees of node id of g for the fusion plan into (from
 * pass_fuse_ew_plan; NULL: every operand a leaf). Fails (false, after
 * reporting at the node) if they need more pointers than a kernel has. */
bool cg_trees_build(const cg_lower *L, const ir_graph *g, ir_id id,
		    const ir_id *into, cg_trees *t);
/* Whether two kernels' trees compile to the same code: same shape of
 * trees, ops, attributes (but for dropout streams, an argument: see
 * cg_lower_stream.c), concrete types and strides. */
bool cg_trees_eq(const cg_lower *L, const ir_graph *ga, const cg_trees *a,
		 const ir_graph *gb, const cg_trees *b);
/* Emits, at the kernel's start, what fused dropouts need (the run's
 * training flag, their keys). */
void cg_kernel_trees_begin(cg_kernel *k);
/* Adds to n the arrays that read operand i of the kernel: one per leaf
 * (leaves that share a parameter share one) and fused dropout of its
 * tree, walking t so that nest dim d steps
 * operand axis ax[d] (-1: none); inner_ax (-1: none) is the axis a row
 * kernel's inner index j walks. */
void cg_nest_add_operand(cg_kernel *k, cg_nest *n, uint32_t i, const int *ax,
			 int inner_ax);
/* The value of operand i at the nest point offs (after
 * cg_nest_add_operand), at inner index j of a row kernel (NULL: none);
 * a node that occurs twice in the tree at the same elements is computed
 * once. */
LLVMValueRef cg_kernel_operand(cg_kernel *k, uint32_t i, LLVMValueRef *offs,
			       LLVMValueRef j);
/* cg_nest_add_operand and cg_kernel_operand for the subtree at tree node
 * x (a fused node's operand: layer_norm_grad's under the add that
 * computes it, cg_lower_layer_norm_grad). */
void cg_nest_add_tree(cg_kernel *k, cg_nest *n, uint32_t x, const int *ax,
		      int inner_ax);
LLVMValueRef cg_kernel_tree(cg_kernel *k, uint32_t x, LLVMValueRef *offs,
			    LLVMValueRef j);
/* The ax map of an elementwise kernel: operand i broadcast to the node's
 * output, axis d of a nest over the output dims (-1 where stretched). */
void cg_kernel_ew_axes(const cg_kernel *k, uint32_t i, int *ax);

/* cg_lower_ew.c: the value of elementwise op (IR_OPF_EW) of node n from
 * its operands' values v, of dtype in (operand 0's; select's operand 1). */
LLVMValueRef cg_lower_ew_value(cg_fn *f, const ir_node *n, ir_dtype in,
			       LLVMValueRef *v);
/* ---- dropout streams (cg_lower_stream.c) ---------------------------------- */

/* The streams of the dropouts (p > 0) of node id and its fused trees tr,
 * into ids (room for CG_TREE_MAX + 1, and one more for a row step);
 * returns their count. */
uint32_t cg_kernel_stream_ids(const ir_graph *g, ir_id id, const cg_trees *tr,
			      uint32_t *ids);
/* Whether a kernel with trees tr and n_streams streams has room for the
 * pointer parameter of their table. */
bool cg_kernel_stream_room(const cg_trees *tr, uint32_t n_streams);
/* Whether nodes a and b have the same op and attributes but for their
 * dropout streams. */
bool cg_lower_same_attr(const ir_node *a, const ir_node *b);
/* The value (i64) of dropout stream `stream` in kernel k: loaded from
 * the kernel's table, or a constant (and the kernel unshared) when it
 * has none. */
LLVMValueRef cg_kernel_stream(cg_kernel *k, uint32_t stream);
/* The step (i64) of the rows kernel k leaves out (k->row_step >= 0,
 * cg_lower_row_step): the entry after the streams in its table, or a
 * constant (and the kernel unshared) when it has none. */
LLVMValueRef cg_kernel_row_step(cg_kernel *k);
/* A constant table of n streams (and a row step after them), for a call
 * site to pass. */
LLVMValueRef cg_lower_stream_table(cg_lower *L, const uint32_t *ids, uint32_t n);

/* Inverted dropout of x with probability p at random index idx (i64) of
 * a stream's key: x / (1 - p) or 0 when is_train (i1), x otherwise. */
LLVMValueRef cg_lower_dropout_value(cg_fn *f, double p, LLVMValueRef key,
				    LLVMValueRef is_train, LLVMValueRef idx,
				    LLVMValueRef x);

/* ---- op generators (each returns false after reporting an error) -------- */

/* cg_lower_ew.c: elementwise ops and layout copies. */
/* Every op of IR_OPF_EW: the unary, binary and compare families, cast
 * and select. */
bool cg_lower_elementwise(cg_kernel *k);
bool cg_lower_broadcast(cg_kernel *k);
bool cg_lower_permute(cg_kernel *k);
bool cg_lower_slice(cg_kernel *k);
/* Whether slice node id's range fits its operand's axis once symbols are
 * bound (a static range on a symbolic axis); reports it at the node's
 * location if not. Checked for every slice, fused or not. */
bool cg_lower_slice_fits(const cg_lower *L, const ir_graph *g, ir_id id);
bool cg_lower_concat(cg_kernel *k);
bool cg_lower_repeat(cg_kernel *k);
bool cg_lower_repeat_interleave(cg_kernel *k);
bool cg_lower_dropout(cg_kernel *k);

/* cg_lower_nn.c: matmul, reductions, normalizations, indexing, losses. */
/* Lowers a matmul, or an add whose kernel computes the matmul it adds
 * to as the sgemm's epilogue (cg_lower_epilogue_plan). */
bool cg_lower_matmul(cg_kernel *k);
/* Whether matmul mm's kernel leaves out the rows no output reads
 * (L->rl) in a call whose row_skip is set (a fused attention or its
 * gradient: its dead query rows, cg_attn_row_skip_valid): a matmul of a
 * kernel of its own (with an epilogue: cg_lower_row_skip_rows of the
 * add), A (B, T, K) not transposed, B one matrix for all,
 * through the sgemm as one product of B·T rows (is_rows_given), its rows
 * live where t < v[b] (valid = {v}) or, keys of a masked attention,
 * where keys(v over t < w) (valid = {v, w}). Returns how many
 * valid-length nodes its kernel reads (its last pointer parameters,
 * after the others), or -1: every row computed. */
int cg_lower_row_skip_valid(const cg_lower *L, const ir_graph *g, ir_id mm,
			    ir_id *valid);
/* The multiply-adds of matmul node mm: its result's elements times the
 * length of the axis it sums over. */
double cg_lower_matmul_macs(const cg_lower *L, const ir_graph *g, ir_id mm);
/* The rows of a node of type t, as a kernel that leaves rows out sees
 * them: B batch elements (dims[0]) of T rows (dims[1] at rank >= 3; 1 at
 * rank 2, a batch element's whole row). */
void cg_lower_row_shape(const cg_lower *L, const ir_type *t, int64_t *B,
			int64_t *T);
/* For a kernel of node id that leaves rows out (cg_lower_row_skip_rows
 * >= 0): the step k when its rows are step k of a recurrence unrolled
 * over t < v (rowlive's STEP: a batch element's rows all live where k <
 * v[b], none elsewhere), else -1. The kernel reads k from its call's
 * table (cg_kernel_row_step), so that the steps share its code. */
int64_t cg_lower_row_step(const cg_lower *L, const ir_graph *g, ir_id id);
/* cg_lower_row_skip_valid for any kernel, node id with fused trees tr:
 * beside the products and the fused attentions, an add computing a
 * product in the sgemm's epilogue (the product's conditions, the add's
 * rows), the row-wise kernels (the elementwise ops and
 * dropout, an f32 output (B, T, ...) of its own, no product fused;
 * in the forward layer_norm, with no layer_norm_grad fused, in the
 * backward layer_norm_grad) whose rows are live (a gradient's: may be
 * nonzero) where t < v[b] or keys(v over t < w), and
 * cross_entropy_with_grad, its logits' live rows. Returns the count of
 * valid-length nodes its kernel reads last, or -1. */
int cg_lower_row_skip_rows(const cg_lower *L, const ir_graph *g, ir_id id,
			   const cg_trees *tr, ir_id *valid);
/* One part [lo, hi) of a kernel's outer range. */
typedef void (*cg_row_part)(cg_kernel *k, LLVMValueRef lo, LLVMValueRef hi,
			    void *ud);
/* Runs live over the kernel's range [k->lo, k->hi) of the outer index
 * of n, a simplified nest whose array 0 is the node's dense output.
 * When the kernel leaves rows out (cg_lower_row_skip_rows), each of its
 * node's rows (b, t) is whole outer indices, and the program's row_skip
 * is set, live runs over each batch element's live rows in the range
 * and the dead rows' floats are set to +0; else over the whole range. */
void cg_lower_row_skip_run(cg_kernel *k, const cg_nest *n, cg_row_part live,
			   void *ud);
/* len[b] (an i64 in [0, T]) of rows live where t < len[b], as
 * pass_rowlive_eval computes it from i32 valid lengths v: clamp(v[b], 0,
 * T) with w NULL (PREFIX), else keys(v over t < w) (0 where w[b] <= 0,
 * T where v[b] <= 0, else min(v[b], T)); b an i64. */
LLVMValueRef cg_lower_row_len(cg_fn *f, LLVMValueRef v, LLVMValueRef w,
			      LLVMValueRef b, int64_t T);
/* Whether batch element b (an i64) is live at step `step` (an i64) of
 * a recurrence over t < v (rowlive's STEP): step < v[b] (an i1).
 * pass_rowlive_eval clamps v[b] to the steps' count T first, which
 * changes nothing for a step 0 <= k < T: the code does not depend on T,
 * and recurrences of other lengths share it. */
LLVMValueRef cg_lower_step_live(cg_fn *f, LLVMValueRef v, LLVMValueRef b,
				LLVMValueRef step);
/* cg_lower_row_skip_run of the nest n itself: n over the kernel's
 * [lo, hi), or over its live rows only. */
void cg_lower_row_skip_nest(cg_kernel *k, const cg_nest *n, cg_nest_body body,
			    void *ud);
/* Marks in a fusion plan each matmul whose only reader is an add with a
 * kernel of its own, adding to it a bias row or a matrix of its shape,
 * when the matmul runs as one sgemm: into[matmul] = the add, whose kernel
 * then computes the product with the sgemm's epilogue instead of reading
 * it from a buffer (docs/fusion.md). Returns false after reporting "out
 * of memory". */
bool cg_lower_epilogue_plan(const cg_lower *L, const ir_func *f, ir_id *into);
/* Whether kernel k is an add computing a fused matmul (its operand's
 * tree a MATMUL node), lowered by cg_lower_matmul. */
bool cg_lower_is_epilogue_kernel(const cg_kernel *k);
/* Whether kernel k is an add computing a fused layer_norm_grad (the
 * epilogue plan's other kind: a layer_norm_grad read by one add alone,
 * whose other operand is a buffer of its type, adds that buffer to each
 * element as it stores it), lowered by cg_lower_layer_norm_grad. */
bool cg_lower_is_lng_kernel(const cg_kernel *k);
/* The matmul node id's kernel computes as its epilogue's product under
 * the plan into, or IR_NONE; the layer_norm_grad it computes, or IR_NONE. */
ir_id cg_lower_epilogue_matmul(const ir_graph *g, const ir_id *into, ir_id id);
ir_id cg_lower_epilogue_lng(const ir_graph *g, const ir_id *into, ir_id id);
bool cg_lower_reduce(cg_kernel *k);
/* One step of a reduction's chain, o (+) v, on scalars or vectors of
 * dtype t: an add (is_ordered: without `reassoc`, so LLVM keeps the
 * written order), or for max the larger, NaN winning as in PyTorch. */
LLVMValueRef cg_lower_reduce_step(cg_fn *f, ir_op op, ir_dtype t,
				  bool is_ordered, LLVMValueRef o,
				  LLVMValueRef v);
bool cg_lower_argmax(cg_kernel *k);
bool cg_lower_softmax(cg_kernel *k);
bool cg_lower_layer_norm(cg_kernel *k);
bool cg_lower_layer_norm_grad(cg_kernel *k);
bool cg_lower_embedding(cg_kernel *k);
bool cg_lower_sort(cg_kernel *k);
bool cg_lower_sort_grad(cg_kernel *k);
bool cg_lower_mse_loss(cg_kernel *k);
bool cg_lower_cross_entropy(cg_kernel *k);
bool cg_lower_cross_entropy_grad(cg_kernel *k);
/* Both at once: [2, ..., K], ops.def; rows split by [lo, hi). */
bool cg_lower_cross_entropy_with_grad(cg_kernel *k);

/* cg_lower_rowred.c: sum, mean and max over the last axis, rows in
 * vector lanes. Fits when the reduction's simplified nest n (array 0 the
 * output, then operand 0's arrays) is (rows, K) with the output dense
 * over rows and K reduced, and the dtype is f32 (or i32 for sum and
 * max); then cg_lower_reduce_rows generates the kernel over the rows
 * [lo, hi), in the interpreter's order for every row. */
bool cg_lower_rowred_fits(const cg_kernel *k, const cg_nest *n);
void cg_lower_reduce_rows(cg_kernel *k, const cg_nest *n);

/* The order of a float sum or mean, the interpreter's (docs/ops.md,
 * "Summation order"): an output element of at most CG_SUM_PLAIN inputs
 * adds them left to right; a longer one adds them left to right in
 * blocks of CG_SUM_BLOCK, then combines the block sums pairwise. */
#define CG_SUM_PLAIN 256
#define CG_SUM_BLOCK 32

/* cg_lower_sumtree.c: the pairwise tree over a sum's block sums, on a
 * stack of levels the caller allocates (cg_lower_tree_levels of them for
 * n_blocks blocks) and combines: combine(f, q, ud) emits level q - 1 =
 * level q - 1 + level q, q an i64 value. Block b's sum (an i64 value b)
 * is written to level cg_lower_tree_slot(b); cg_lower_tree_merge then
 * combines the pairs it completes. After the last block,
 * cg_lower_tree_fold leaves the total in level 0. */
typedef void (*cg_tree_combine)(cg_fn *f, LLVMValueRef q, void *ud);
int cg_lower_tree_levels(int64_t n_blocks);
LLVMValueRef cg_lower_tree_slot(cg_fn *f, LLVMValueRef b);
void cg_lower_tree_merge(cg_fn *f, LLVMValueRef b, cg_tree_combine combine,
			 void *ud);
void cg_lower_tree_fold(cg_fn *f, int64_t n_blocks, cg_tree_combine combine,
			void *ud);

/* cg_lower_sumlane.c: a float sum or mean of more than CG_SUM_PLAIN
 * inputs per output element (count) that neither the row kernel nor the
 * column kernel takes (a whole tensor to a scalar, axes that do not
 * merge); then cg_lower_reduce_lanes generates it over the simplified
 * nest n (array 0 the output), output elements split by [lo, hi), blocks
 * in vector lanes, in the interpreter's order, storing each output
 * element's result (a mean's divided). */
bool cg_lower_sumlane_fits(const cg_kernel *k, const cg_nest *n, int64_t count);
void cg_lower_reduce_lanes(cg_kernel *k, const cg_nest *n, int64_t count);

/* cg_lower_colred.c: a float sum or mean whose simplified nest n (array 0
 * the output) is (R, C), or (O, R, C) with O kept and split by [lo, hi),
 * reducing only R, longer than CG_SUM_PLAIN; then cg_lower_reduce_columns
 * generates it in blocks of rows, the interpreter's order, storing each
 * output element's total; a mean's division comes after. */
bool cg_lower_colred_fits(const cg_kernel *k, const cg_nest *n);
void cg_lower_reduce_columns(cg_kernel *k, const cg_nest *n);

/* cg_lower_index.c: one_hot and the scatter-add of embedding_grad. */
bool cg_lower_arange(cg_kernel *k);
bool cg_lower_one_hot(cg_kernel *k);
bool cg_lower_embedding_grad(cg_kernel *k);

/* cg_lower_plan.c: side buffers. A kernel may leave, after its output in
 * its own buffer, values that a later kernel reads (the small attention
 * leaves its weights for its gradient: cg_attn_cache_pair). The memory
 * plan, the schedule and the kernels ask these two, not the ops:
 * cg_node_bytes is the bytes of node id's buffer, its output's and any
 * side part's; cg_node_side is the node whose buffer node id's kernel
 * takes as one more operand, last, for a side part (itself for the
 * kernel that writes one, the writer for the kernel that reads it), or
 * IR_NONE. The reader's operand keeps the writer's buffer alive. */
uint64_t cg_node_bytes(const cg_lower *L, const ir_graph *g, ir_id id);
ir_id cg_node_side(const cg_lower *L, const ir_graph *g, ir_id id);

/* cg_lower_attn.c, cg_lower_attn_grad.c: the fused attention kernels. */
bool cg_lower_fused_attention(cg_kernel *k);
bool cg_lower_fused_attention_grad(cg_kernel *k);

/* cg_lower_additive.c, cg_lower_additive_grad.c: the fused additive
 * attention kernels. */
bool cg_lower_fused_additive_attention(cg_kernel *k);
bool cg_lower_fused_additive_attention_grad(cg_kernel *k);

#endif
