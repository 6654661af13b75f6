/*
 * rowlive.h - row liveness: which rows of each node of a function some
 * output reads, as a length per batch element known at run time
 * (rowlive.c; docs/passes.md, "Row liveness").
 *
 * Rows: a node of rank >= 2 has dims[0] · dims[1] rows (b, t), each its
 * trailing elements (one element at rank 2); in the book's models b is
 * the batch element and t the step. The analysis says, for every node,
 * that row (b, t) may be read only if t < len[b], where len is an
 * expression over the function's i32 valid lengths (its inputs, or
 * nodes it computes) evaluated at run time. A row past len[b] is dead:
 * no output's value depends on it, except through a product with zero
 * (a masked loss multiplies a dead row's loss by 0, a masked attention
 * weighs a dead key's value by 0): an inf or NaN there still reaches
 * the output, so a kernel that leaves dead rows out must keep that
 * (docs/passes.md says how).
 *
 * First a sweep forward finds the rows that may be nonzero when every
 * value is finite (nz_of_node): a mask t < v[b] (cast(lt(arange,
 * reshape(v)))) below v, a product by it, and the gradients that follow
 * from it (a product's rows of A, layer_norm_grad's of g, the parts of
 * cross_entropy_with_grad and fused_attention_grad, sums, selects,
 * views). Then a sweep back from the outputs (each read whole), each use
 * of a node passing on the rows it reads: the elementwise ops, dropout,
 * layer_norm and the softmaxes (rank >= 3), reshapes, permutes, slices
 * and reductions that keep axes 0 and 1, a product's A (not transposed,
 * rank >= 3), embedding's ids, cross_entropy: the same rows as their
 * result; x · y: x's rows where y may be nonzero (a masked loss reads
 * the rows below valid); a (fused) attention's queries: the rows of its
 * result; its keys and values: those some live query does not mask out;
 * the backward's reads of the forward's values: A^T B (a weight's
 * gradient, its operands' rows merged into one axis by reshapes) each
 * operand's rows where the other's may be nonzero, layer_norm_grad's x
 * and embedding_grad's ids where g may be nonzero, fused_attention_grad's
 * queries where the output's gradient may be nonzero and the keys those
 * queries read (the additive attention's gradient likewise). A
 * recurrence unrolled over the steps (a GRU: rank-2 nodes (B, H), one a
 * step) is followed through the concatenation of its steps' outputs
 * along axis 1 (step k of it is live where k < len: STEP), the slices of
 * its inputs' steps, and the rank-2 ops that read a batch element's row
 * whole when any of their own is read (ANY: products, layer norms,
 * reshapes, slices and concatenations of the rows' elements). Every
 * other operand is read whole (PASS_ROWLIVE_ALL), so the answer errs
 * only on the side of live.
 */
#ifndef ATTNC_PASSES_ROWLIVE_H
#define ATTNC_PASSES_ROWLIVE_H

#include "ir.h"

typedef enum pass_rowlive_op {
	PASS_ROWLIVE_NONE,   /* len = 0: no row is read */
	PASS_ROWLIVE_ALL,    /* len = T (dims[1]): every row */
	PASS_ROWLIVE_PREFIX, /* len = clamp(v[b], 0, T): a masked loss's */
	/* The keys (b, j) a masked attention reads from live queries:
	 * len[b] = max over queries i < lq[b] of m(b, i), where lq is
	 * expression a over the queries (node, Q rows each), and m(b, i) =
	 * K if the query's valid length w is <= 0 (every key masked: the
	 * softmax is uniform over all of them), else min(w, K); w is
	 * v[b·Q + i] when is_per_query, else v[b] (and Q is taken as 1:
	 * only whether a query is live counts). */
	PASS_ROWLIVE_KEYS,
	PASS_ROWLIVE_MAX,   /* max(a, b): the rows either use reads */
	PASS_ROWLIVE_MIN,   /* min(a, b): a mask over a use's rows */
	PASS_ROWLIVE_CONST, /* len = min(k, T) */
	/* len = T if k < la[b], else 0, la expression a over node's rows:
	 * step k of node (a concatenation along its steps). */
	PASS_ROWLIVE_STEP,
	/* len = min(k, T) if a's len > 0, else 0: the rows of b that a use
	 * reads whole when any of its own rows of b is read. */
	PASS_ROWLIVE_ANY,
} pass_rowlive_op;

typedef struct pass_rowlive_expr {
	pass_rowlive_op op;
	ir_id valid;       /* PREFIX, KEYS: the i32 valid lengths */
	bool is_per_query; /* KEYS: valid is (N, Q), else (N) */
	uint32_t a, b;     /* KEYS, STEP, ANY: a; MAX, MIN: both (exprs) */
	/* KEYS per query: the attention's queries (IR_NONE per batch
	 * element); STEP: the concatenation. */
	ir_id node;
	int64_t k; /* CONST, STEP, ANY */
} pass_rowlive_expr;

/* The answer for one function: of_node[i] indexes exprs (i's rows may
 * be read only below that length). exprs[0] is NONE and exprs[1] ALL;
 * equal expressions are stored once. A node of rank < 2, or one the
 * outputs do not depend on, gets ALL or NONE. */
typedef struct pass_rowlive {
	uint32_t *of_node; /* n_nodes */
	/* n_nodes: the rows that may hold a value other than 0 when every
	 * value read is finite (a masked loss's gradient is 0 past valid),
	 * in the same expressions. */
	uint32_t *nz_of_node;
	/* n_nodes: the node whose dims[0] and dims[1] are the node's rows:
	 * itself, or, for a reshape that merges its operand's axes 0 and 1
	 * into its axis 0 (row b·T + t), the operand. */
	ir_id *row_node;
	uint32_t n_nodes;
	pass_rowlive_expr *exprs;
	uint32_t n_exprs, exprs_cap;
} pass_rowlive;

#define PASS_ROWLIVE_IS_NONE 0u
#define PASS_ROWLIVE_IS_ALL 1u

/* Analyzes f (of module m, whose constants it reads). Returns false
 * when out of memory (ctx->is_oom); pass_rowlive_fini frees rl either
 * way. f is not changed. */
bool pass_rowlive_analyze(ir_ctx *ctx, const ir_module *m, const ir_func *f,
			  pass_rowlive *rl);
void pass_rowlive_fini(ir_ctx *ctx, pass_rowlive *rl);

/* The i32 values of a node at run time (valid lengths), row-major. */
typedef const int32_t *(*pass_rowlive_values)(void *ud, ir_id node);

/* Evaluates expression e for a node of n_batch · n_rows rows (its
 * dims[0] and dims[1]) into len[0 .. n_batch), each in [0, n_rows];
 * values gives the valid lengths' nodes, f's graph the queries' shapes
 * (their dims[1] must be static; sym_values binds symbolic ones, or
 * NULL). */
void pass_rowlive_eval(const pass_rowlive *rl, const ir_func *f,
		       const int64_t *sym_values, uint32_t e, int64_t n_batch,
		       int64_t n_rows, pass_rowlive_values values, void *ud,
		       int32_t *len);

/* Writes expression e as text: "none", "all", "t < %4", "keys(%1
 * per query over t < %4)", "max(.., ..)", "min(.., ..)". */
void pass_rowlive_print(const pass_rowlive *rl, uint32_t e, FILE *out);

#endif
