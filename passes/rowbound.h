/*
 * rowbound.h - value bounds: an upper bound of |x| over every element
 * of every node of a function's forward, from the largest |x| of its
 * parameters and inputs at run time (rowbound.c; docs/passes.md, "Value
 * bounds").
 *
 * What it is for: leaving out the rows that row liveness (rowlive.h)
 * calls dead changes no output only while every value of the run is
 * finite, a dead row included (a masked loss multiplies a dead row's
 * loss by 0, a masked attention weighs a dead key's value by 0: an inf
 * or NaN there reaches the output), and while a masked attention's
 * masked keys weigh exactly 0 (its live scores far enough above the
 * fill). When every bound is below PASS_ROWBOUND_LIMIT both hold for
 * any values of the leaves within their maxima, whatever rows a kernel
 * leaves out (they become zeros, which are within them too).
 *
 * The forward: the nodes that depend on no gradient op (layer_norm_grad,
 * embedding_grad, sort_grad, the cross-entropies' gradients, the fused
 * attentions' gradients); remat's recomputed forward values are in it.
 * One rule per op, over the operands' bounds a, b, ... (each a double):
 *   products K·a·b (a·(W's largest column sum) for a rank-2 parameter
 *   or input W); sums n·a (n elements summed); add, sub a + b; mul
 *   a·b; div by a constant a / min|c|; exp e^a; sqrt √a; the bounded
 *   functions (tanh, sigmoid, sin, cos, erf, comparisons, softmaxes,
 *   one_hot) 1; relu, neg, abs, maximum, minimum, select, casts, views,
 *   slices, concatenations, repeats, broadcasts, sort, mean, max: the
 *   largest operand's; dropout a / (1 - p); embedding the table's;
 *   layer_norm max|γ|·√D + max|β| where 4·D·a² is below the limit (the
 *   variance stays finite); log_softmax, cross_entropy 2a + log n;
 *   mse_loss (a + b)²; a masked softmax 1 and a fused attention max|v| /
 *   (1 - p) where the scores' bound (d·|q|·|k|·scale, or the additive
 *   attention's H·|wv|·scale) lies PASS_ROWBOUND_FILL_MARGIN below
 *   -fill, else infinity; log, pow and a division by a non-constant:
 *   infinity. Every bound is exact arithmetic's; float32 rounding makes
 *   at most a relative 1e-6 or so of it, which the limit covers.
 */
#ifndef ATTNC_PASSES_ROWBOUND_H
#define ATTNC_PASSES_ROWBOUND_H

#include "ir.h"

/* Every forward value below this is finite, with room for float32's
 * rounding and for the sums of squares of layer norms. */
#define PASS_ROWBOUND_LIMIT 1e30
/* How far the largest score must lie above a mask's fill: exp(x) is 0
 * in float32 below -87.34 (codegen's CG_ATTN_EXP_ZERO is 88), so a
 * masked key's weight exp(fill - max) is exactly 0. */
#define PASS_ROWBOUND_FILL_MARGIN 128.0

typedef struct pass_rowbound {
	double *of_node;   /* n_nodes: bound of |x|, +inf when unknown */
	bool *is_forward;  /* n_nodes: depends on no gradient op */
	double *const_max; /* n_nodes: a constant's max |x| (others 0) */
	double *const_min; /* n_nodes: a constant's min |x| (others 0) */
	/* 3 n_nodes: what the leaf callback gave of a leaf in this call,
	 * by pass_rowbound_stat (-1: not asked yet), so that a weight the
	 * unrolled steps' products share is scanned once a call. */
	double *leaf_stat;
	uint32_t n_nodes;
} pass_rowbound;

/* is_forward[i] (g->n_nodes flags): whether node i depends on no
 * gradient op (ir_op_is_gradient) through its operands: a value of the
 * forward, recomputed ones included. */
void pass_rowbound_forward(const ir_graph *g, bool *is_forward);
/* Prepares the bounds of f (of module m, whose constants it reads).
 * Returns false when out of memory; pass_rowbound_fini frees rb either
 * way. */
bool pass_rowbound_init(ir_ctx *ctx, const ir_module *m, const ir_func *f,
			pass_rowbound *rb);
void pass_rowbound_fini(ir_ctx *ctx, pass_rowbound *rb);

/* What a leaf's callback gives of an input or parameter at run time:
 * its largest |x|, or of a rank-2 one (i, j) the largest sum of |x| down
 * a column (max over j of the sum over i of |x[i][j]|) or along a row;
 * +inf or NaN if some element is not finite. A product x·W by a rank-2
 * leaf W is bounded by max|x| times W's largest column sum (row sum when
 * W is read transposed), a far tighter bound than K·max|x|·max|W| for
 * weights of mixed signs and sizes. */
typedef enum pass_rowbound_stat {
	PASS_ROWBOUND_MAX,
	PASS_ROWBOUND_COL_SUM,
	PASS_ROWBOUND_ROW_SUM,
} pass_rowbound_stat;
typedef double (*pass_rowbound_leaf)(void *ud, ir_id node,
				     pass_rowbound_stat stat);

/* Fills rb->of_node for one call: leaf gives the inputs' and
 * parameters' maxima, sym_values the symbols' values (NULL: a symbolic
 * count is unbounded). Returns the largest bound over the forward's f32
 * nodes (+inf or NaN when one is unknown or not finite): the call may
 * leave dead rows out iff pass_rowbound_is_safe of it. */
double pass_rowbound_eval(pass_rowbound *rb, const ir_func *f,
			  const int64_t *sym_values, pass_rowbound_leaf leaf,
			  void *ud);

static inline bool pass_rowbound_is_safe(double worst)
{
	return worst < PASS_ROWBOUND_LIMIT; /* false for NaN */
}

#endif
