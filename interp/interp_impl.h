/*
 * interp_impl.h - what the interpreter's files share: the kernel context,
 * element access with dtype conversion, rounding to the working precision,
 * index helpers for broadcasting, and the kernel of each op.
 *
 * Every kernel reads its operands element by element as double (or int64
 * for integer results) and stores into an output tensor the dispatcher has
 * already allocated with the node's dtype and concrete dims. Float results
 * in float32 mode are rounded to float after every arithmetic step
 * (interp_round), which gives exactly the IEEE float32 result for + - * /
 * and sqrt, because a double holds more than twice float's precision.
 */
#ifndef ATTNC_INTERP_IMPL_H
#define ATTNC_INTERP_IMPL_H

#include "interp.h"
#include "ir_scalar.h"

#include <math.h>

/* Where the leaves of a run come from; NULL fields when evaluating one
 * node outside a run (interp_eval_node). */
typedef struct interp_sources {
	const ir_module *m;
	const ir_func *f;            /* NULL outside a run */
	const interp_tensor *params; /* m->n_params, or NULL */
	const interp_tensor *inputs; /* f->n_inputs, or NULL */
} interp_sources;

/* One kernel invocation: the node, its operand values and the output. */
typedef struct interp_kernel {
	ir_ctx *ctx;
	const ir_node *node;
	const interp_opts *opts;
	const interp_sources *src;
	const interp_tensor *args; /* node->n_args operand values */
	uint32_t n_args;
	interp_tensor *out; /* allocated: node dtype, concrete dims */
} interp_kernel;

/* ---- element access --------------------------------------------------- */

/* Float to int32 as PyTorch's .int() on x86: truncation toward zero; NaN
 * and values outside the int32 range give INT32_MIN (never UB). */
static inline int32_t interp_f2i(double x)
{
	return ir_scalar_f2i(x);
}

static inline double interp_ld(const interp_tensor *t, int64_t i)
{
	switch (t->dtype) {
	case IR_F32:
		return ((const float *)t->data)[i];
	case IR_I32:
		return ((const int32_t *)t->data)[i];
	case IR_F64:
		return ((const double *)t->data)[i];
	}
	return 0;
}

/* Element i as an integer (floats converted by interp_f2i). */
static inline int64_t interp_ldi(const interp_tensor *t, int64_t i)
{
	if (t->dtype == IR_I32)
		return ((const int32_t *)t->data)[i];
	return interp_f2i(interp_ld(t, i));
}

/* x rounded to what dtype holds (float for F32; unchanged otherwise). */
static inline double interp_round(ir_dtype dtype, double x)
{
	return dtype == IR_F32 ? (double)(float)x : x;
}

/* Stores v into element i, converting to t's dtype (ints by interp_f2i). */
static inline void interp_st(interp_tensor *t, int64_t i, double v)
{
	switch (t->dtype) {
	case IR_F32:
		((float *)t->data)[i] = (float)v;
		break;
	case IR_I32:
		((int32_t *)t->data)[i] = interp_f2i(v);
		break;
	case IR_F64:
		((double *)t->data)[i] = v;
		break;
	}
}

/* Stores an integer: wraps to int32 like PyTorch's int32 arithmetic. */
static inline void interp_sti(interp_tensor *t, int64_t i, int64_t v)
{
	if (t->dtype == IR_I32)
		((int32_t *)t->data)[i] = (int32_t)(uint32_t)(uint64_t)v;
	else
		interp_st(t, i, (double)v);
}

/* Copies element j of src into element i of dst, converting dtypes. */
static inline void interp_copy_elem(interp_tensor *dst, int64_t i,
				    const interp_tensor *src, int64_t j)
{
	if (dst->dtype == IR_I32)
		interp_sti(dst, i, interp_ldi(src, j));
	else
		interp_st(dst, i, interp_ld(src, j));
}

static inline bool interp_is_float(ir_dtype t)
{
	return t == IR_F32 || t == IR_F64;
}

/* ---- shapes and indices ------------------------------------------------- */

/* Product of dims[from .. to). */
int64_t interp_dims_prod(const int64_t *dims, int from, int to);
/* Row-major strides of dims. */
void interp_strides(const int64_t *dims, int rank, int64_t *strides);
/* Strides for reading a tensor of dims (rank) as broadcast to odims
 * (orank), shapes right-aligned: 0 on stretched axes, in units of `unit`
 * elements. False if the shapes do not broadcast that way. */
bool interp_bcast_strides(const int64_t *dims, int rank, const int64_t *odims,
			  int orank, int64_t unit, int64_t *strides);
/* Advances a row-major multi-index (last axis fastest). */
void interp_index_next(int64_t *idx, const int64_t *dims, int rank);
static inline int64_t interp_index_dot(const int64_t *idx,
				       const int64_t *strides, int rank)
{
	int64_t off = 0;
	for (int i = 0; i < rank; i++)
		off += idx[i] * strides[i];
	return off;
}
/* The element of valid lengths v (dims aligned with x's leading dims
 * lead[0..nl), size-1 dims stretched) for row r of those leading dims. */
int64_t interp_valid_at(const interp_tensor *v, const int64_t *lead, int nl,
			int64_t r);
/* Writes "[2, 3, 4]" into buf. */
void interp_dims_format(const int64_t *dims, int rank, char *buf, size_t size);

/* ---- errors and scratch memory ---------------------------------------- */

/* Reports "<op>: <message>" at the node's location; returns false. */
bool interp_fail(const interp_kernel *k, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Zeroed scratch memory, or NULL after reporting "out of memory". */
void *interp_scratch(const interp_kernel *k, size_t bytes);

/* ---- kernels (each returns false after reporting an error) ------------- */

/* elementwise.c: op is of the family the kernel's name says. */
bool interp_k_unary(const interp_kernel *k, ir_op op);
bool interp_k_binary(const interp_kernel *k, ir_op op);
bool interp_k_compare(const interp_kernel *k, ir_op op);
bool interp_k_select(const interp_kernel *k);
bool interp_k_cast(const interp_kernel *k);

/* nn.c */
bool interp_k_matmul(const interp_kernel *k);
bool interp_k_sum(const interp_kernel *k, bool is_mean);
bool interp_k_max(const interp_kernel *k);
bool interp_k_argmax(const interp_kernel *k);
bool interp_k_softmax(const interp_kernel *k, bool is_log);
bool interp_k_masked_softmax(const interp_kernel *k);
bool interp_k_layer_norm(const interp_kernel *k);
bool interp_k_layer_norm_grad(const interp_kernel *k);
bool interp_k_dropout(const interp_kernel *k);
bool interp_k_embedding(const interp_kernel *k);
bool interp_k_arange(const interp_kernel *k);
bool interp_k_one_hot(const interp_kernel *k);
bool interp_k_embedding_grad(const interp_kernel *k);
bool interp_k_mse_loss(const interp_kernel *k);
bool interp_k_cross_entropy(const interp_kernel *k);
bool interp_k_cross_entropy_grad(const interp_kernel *k);
bool interp_k_cross_entropy_with_grad(const interp_kernel *k);

/* fused_attention.c */
bool interp_k_fused_attention(const interp_kernel *k);
bool interp_k_fused_attention_grad(const interp_kernel *k);

/* fused_additive.c */
bool interp_k_fused_additive_attention(const interp_kernel *k);
bool interp_k_fused_additive_attention_grad(const interp_kernel *k);

/* layout.c */
bool interp_k_reshape(const interp_kernel *k);
bool interp_k_broadcast(const interp_kernel *k);
bool interp_k_permute(const interp_kernel *k);
bool interp_k_slice(const interp_kernel *k);
bool interp_k_concat(const interp_kernel *k);
bool interp_k_repeat(const interp_kernel *k);
bool interp_k_repeat_interleave(const interp_kernel *k);
bool interp_k_sort(const interp_kernel *k);
bool interp_k_sort_grad(const interp_kernel *k);

#endif
