/*
 * passes.h - the optimization pipeline over the graph IR and its passes.
 *
 * Every pass takes the module and rewrites each function's graph in place
 * (compacting it and renumbering nodes); it returns false only after
 * reporting an error. Analyses are recomputed by the pass that needs them.
 */
#ifndef ATTNC_PASSES_H
#define ATTNC_PASSES_H

#include "ir.h"

typedef struct pass_options {
	const char *const *disabled; /* names of passes not to run */
	uint32_t n_disabled;
	bool no_fuse;     /* turn off every fusion pass */
	const char *dump; /* NULL, "parse", a pass name, or "all" */
	FILE *dump_out;   /* where dumps go */
	bool verify_each; /* run ir_module_verify after every pass */
} pass_options;

typedef bool (*pass_fn)(ir_module *m);

typedef struct pass_info {
	const char *name;
	const char *summary;
	pass_fn run; /* NULL: the pass runs at lowering (fuse_elementwise) */
	bool is_fusion;
	bool is_forward; /* also runs before autodiff (pass_pipeline_forward) */
} pass_info;

/* The passes in pipeline order. */
extern const pass_info pass_table[];
extern const uint32_t pass_count;
const pass_info *pass_find(const char *name);

/* Runs the pipeline as options say; dumps as asked; verifies between
 * passes when asked and always at the end. */
bool pass_pipeline_run(ir_module *m, const pass_options *opts);

/* Runs the passes of the pipeline marked is_forward (infer, fold,
 * simplify, cse, fuse_attention, fuse_heads) that opts lets run, without
 * dumps, then the verifier: what a module gets before pass_autodiff
 * differentiates it, so that its loss's attentions are fused and their
 * gradient rules make the fused backward nodes. pass_pipeline_run then
 * runs over the whole module as usual. */
bool pass_pipeline_forward(ir_module *m, const pass_options *opts);

/* Whether opts lets the pass named name run (it is not disabled by name,
 * nor, being a fusion pass, by no_fuse). The lowering's passes
 * (fuse_elementwise) are asked this way by the driver. */
bool pass_is_enabled(const pass_options *opts, const char *name);

bool pass_infer(ir_module *m); /* re-derive every type; report mismatches */
bool pass_fold(ir_module *m);  /* evaluate nodes whose operands are constant */
bool pass_simplify(ir_module *m); /* algebraic identities */
bool pass_cse(ir_module *m);      /* merge identical nodes */
bool pass_dce(ir_module *m);      /* drop nodes no output needs */

/* Attention fusion (fuse_attention.c; docs/fusion.md). Replaces every
 * matmul(Q, K^T) -> [scale by a constant] -> softmax or masked_softmax ->
 * [dropout] -> matmul(., V) whose intermediates nothing else needs by one
 * fused_attention node located at the softmax; additive attention
 * likewise by one fused_additive_attention. Run before pass_autodiff
 * (pass_pipeline_forward), whose rules for the fused ops make their
 * fused gradients. Weights a function returns, or that backward nodes
 * use, stay unfused. */
bool pass_fuse_attention(ir_module *m);

/* Writes, for every softmax and masked_softmax of every function of m,
 * one line: whether pass_fuse_attention would fuse it and, if not, why
 * (the op or use that blocks it), then a count. Meant for the module as
 * the pass would see it: after the pipeline's earlier passes, which put
 * every chain in its canonical form (run the pipeline with no_fuse);
 * after fusion the fused ops carry their softmax's loc instead:
 *   @loss %14 masked_softmax at m.g:9:13: fuses: matmul %11, div by 2,
 *     masked_softmax, matmul %16 into fused_attention
 *   @forward %11 masked_softmax at m.g:9:13: not fused: the weights are
 *     output 1 (out1) of @forward: fusing would lose them */
void pass_explain_fusion(const ir_module *m, FILE *out);

/* Multi-head attention (fuse_heads.c; docs/fusion.md). A fused_attention
 * whose queries, keys and values are head splits of (B, T, h*w) tensors,
 * whose valid lengths are per batch element repeated for each head (or
 * absent) and whose result is read only through merges of its heads
 * becomes one node with attr heads = h that reads the unsplit tensors
 * and whose result the merges' readers read directly; likewise a
 * fused_attention_grad (from IR text: autodiff gives the gradient of a
 * node the node's heads) whose output gradient is a split and whose
 * parts are merged. Runs after pass_fuse_attention. */
bool pass_fuse_heads(ir_module *m);

/* Loss fusion (fuse_loss.c; docs/fusion.md). Replaces each
 * cross_entropy and a cross_entropy_grad of the same logits and labels
 * node (a gradient function holds both) by parts of one
 * cross_entropy_with_grad, when the gradient's g does not depend on any
 * cross_entropy: the losses a slice of its column 0 of [1], the gradient
 * its [0], each reshaped. Rebuilds and compacts the functions it
 * changes. */
bool pass_fuse_loss(ir_module *m);
/* GELU's backward (fuse_gelu.c; docs/fusion.md): in a function where
 * y = (x 0.5) (1 + erf(x c)) keeps a buffer (returned, or read by a
 * matmul) and its 1 + erf is read again after y (autodiff's gradient),
 * those reads take select(y == x 0.5, 1, y / (x 0.5)) instead: a
 * division where erf was computed again. A rounding change of the
 * gradient, within about an ulp. */
bool pass_fuse_gelu(ir_module *m);

/* Factoring (factor.c; docs/passes.md). Rewrites every sum (a tree of
 * adds without broadcasting) of matmuls that share one operand node and
 * their ta/tb flags, whose other operands have equal types and which
 * nothing else uses, into one matmul of the sum of the other operands:
 * A X1 + A X2 -> A (X1 + X2), likewise X1 B + X2 B. Changes results by
 * rounding only. Runs after the fusion passes; rebuilds and compacts the
 * functions it changes. */
bool pass_factor(ir_module *m);

/* Elementwise fusion (fuse_ew.c; docs/fusion.md), the pass
 * "fuse_elementwise", done at lowering: the IR keeps every node. Fills
 * into (f->g.n_nodes entries): into[i] is the consumer whose kernel
 * computes node i in place, PASS_FUSE_EW_EVERY when each of its readers'
 * kernels does, or IR_NONE when node i keeps a kernel and a buffer of
 * its own (or is a leaf or view). Fused nodes are elementwise ops,
 * dropouts, permutes and broadcasts that are no output, read by each
 * consumer once per element at an index it can address (same shape for
 * elementwise consumers; the data operand of reductions, softmaxes,
 * layer_norm, cross_entropy; any permute); a node with several readers
 * is computed in each (and its fused operands with it), a costly one
 * (IR_OPF_COSTLY) once in each of at most PASS_FUSE_EW_MAX_COSTLY
 * kernels. Every kernel's trees stay within PASS_FUSE_EW_MAX_NODES nodes
 * (its operands and fused nodes) and PASS_FUSE_EW_MAX_ARRAYS strided
 * arrays (the distinct buffers of each operand's tree and fused
 * dropouts' indices), and a node is computed in at most
 * PASS_FUSE_EW_MAX_ROOTS kernels, one of several readers that is
 * computed under another such node in at most PASS_FUSE_EW_MAX_NESTED
 * (GELU's x under its 1 + erf: so a chain of residual adds, each read
 * by a layer norm and the next add, does not grow into every later
 * layer's kernels, and the layers keep sharing their kernels). Returns false after reporting "out of
 * memory". */
#define PASS_FUSE_EW_MAX_NODES 64
#define PASS_FUSE_EW_MAX_ARRAYS 12
#define PASS_FUSE_EW_MAX_ROOTS 8
#define PASS_FUSE_EW_MAX_COSTLY 2
#define PASS_FUSE_EW_MAX_NESTED 2
/* into[i] of a node with several readers that each compute it in their
 * kernels. */
#define PASS_FUSE_EW_EVERY (IR_NONE - 1)
bool pass_fuse_ew_plan(const ir_module *m, const ir_func *f, ir_id *into);
/* Whether the plan into computes node x inside its reader c's kernel. */
static inline bool pass_fuse_ew_is_in(const ir_id *into, ir_id x, ir_id c)
{
	return into[x] == c || into[x] == PASS_FUSE_EW_EVERY;
}
/* Whether op may be computed inside its consumer's kernel. */
bool pass_fuse_ew_is_fusible(ir_op op);
/* The number of fused nodes in a plan of f. */
uint32_t pass_fuse_ew_count(const ir_func *f, const ir_id *into);

/* Recomputation (remat.c; docs/passes.md): an elementwise result that
 * a node reads at least REMAT_GAP nodes after its previous read, and
 * whose operands are alive there anyway, is computed again just before
 * that node (a copy of the tree its kernel computes under the
 * elementwise fusion plan, the same bits), so that its buffer is freed
 * in between: GELU's output read by a weight gradient in the backward. */
bool pass_remat(ir_module *m);

/* Reverse-mode autodiff (autodiff.c, rules in grad_rules.c; docs/autodiff.md).
 * For the function named entry, whose first output is a scalar f32 loss,
 * adds an exported function "<entry>_grad" with the same inputs (and
 * example) whose outputs are the loss ("loss") and then the gradient of
 * the loss with respect to every parameter of the module, in module
 * order ("grad.<param name>", the parameter's type; zeros for one the
 * loss does not use). Its graph is entry's, copied, followed by the
 * backward nodes, each located at the forward node it differentiates.
 * Call it after pass_pipeline_forward (so that it differentiates fused
 * attention) and before pass_pipeline_run, which then optimizes both.
 * Returns
 * false after reporting an error (no such function, a loss that is not a
 * scalar f32 at the function's location, "<entry>_grad" already taken,
 * out of memory), leaving the module as it was. */
bool pass_autodiff(ir_module *m, const char *entry);

/* Writes the --stats JSON object for the module: op counts (sorted by
 * name, over every function), kernels (non-leaf, non-view nodes),
 * planned_bytes (the largest activation slab any function needs, symbols
 * at their fallback or 1), nodes, params, param_elements, functions.
 * extra, if not NULL or empty, is more members ("\"compile_ms\": 12")
 * written before the closing brace. */
void pass_stats_print(const ir_module *m, const char *extra, FILE *out);

/* ---- graph rewriting (rewrite.c), shared by the passes --------------------- */

/* Rewrites f's graph in place: every use of node i (operands and outputs)
 * becomes a use of repl[i] (followed until it maps to itself; each
 * replacement must precede the node it replaces, repl[i] <= i), then
 * drops every node no output needs, keeping INPUT nodes (the arguments),
 * and compacts the node and operand arrays preserving order, renumbering
 * operands, outputs and inputs. repl may be NULL (no replacement); it is
 * left as it was. Invalidates every side array indexed by ir_id. Returns
 * false after reporting "out of memory". */
bool pass_graph_compact(ir_module *m, ir_func *f, const ir_id *repl);

/* Drops constants that no CONST node of any function and no function
 * example refers to; compacts m->consts and renumbers the references.
 * Returns false after reporting "out of memory". */
bool pass_module_drop_unused_consts(ir_module *m);

/* ---- memory planning (memplan.c) ------------------------------------------ */

#define PASS_MEMPLAN_NONE UINT64_MAX /* "no storage of its own" */

/* One buffer to place: live from step start to step end, both included.
 * pass_memplan_blocks fills offset. */
typedef struct pass_mem_block {
	uint64_t size; /* bytes */
	uint32_t start, end;
	uint64_t offset;
} pass_mem_block;

/* Places blocks in one offset space so that two blocks whose lifetimes
 * overlap never share a byte: greedy first-fit, largest block first (the
 * static planners of TVM and Glow). Offsets are multiples of align (a power
 * of two). Returns the slab size: the end of the highest block, rounded up
 * to align; *ok is false (after reporting "out of memory") if scratch
 * memory ran out. */
uint64_t pass_memplan_blocks(ir_ctx *ctx, pass_mem_block *blocks, uint32_t n,
			     uint64_t align, bool *ok);

/* The most bytes the blocks have alive at one step (a block of size 0
 * counts nothing): a lower bound of any placement's slab, which
 * pass_memplan_blocks reaches when its first fit leaves no holes. *at
 * receives the first step where it is reached (0 when n is 0). Returns
 * false (after reporting "out of memory") if scratch memory ran out. */
bool pass_memplan_peak(ir_ctx *ctx, const pass_mem_block *blocks, uint32_t n,
		       uint64_t *peak, uint32_t *at);

/* A plan for the node results of one function. */
typedef struct pass_memplan {
	uint64_t *offset; /* per node: byte offset in the slab, or
			   * PASS_MEMPLAN_NONE (leaves and views of leaves) */
	ir_id *storage;   /* per node: the node whose buffer holds its data
			   * (itself, or the root a view reads), IR_NONE for
			   * leaves and views of leaves */
	uint32_t n_nodes;
	uint64_t total_bytes; /* slab size */
} pass_memplan;

#define PASS_MEMPLAN_ALIGN 64

/* Plans every non-leaf node result of f into one slab. A view (an
 * IR_OPF_VIEW op) takes no storage of its own: it shares its operand's
 * buffer and keeps it alive until its own last use. Outputs live to the
 * end of the function. sym_values gives each symbol's value (m->n_syms
 * entries); NULL binds each symbol to its fallback, or 1 without one.
 * plan's arrays are allocated through m->ctx; free with
 * pass_memplan_fini. Returns false after reporting "out of memory". */
bool pass_memplan_func(const ir_module *m, const ir_func *f,
		       const int64_t *sym_values, pass_memplan *plan);
void pass_memplan_fini(ir_ctx *ctx, pass_memplan *plan);

/* Bytes of a node's result with symbols bound as pass_memplan_func does. */
uint64_t pass_type_bytes(const ir_module *m, const ir_type *t,
			 const int64_t *sym_values);

#endif
