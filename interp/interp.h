/*
 * interp.h - the reference interpreter: a plain, obviously correct executor
 * of every op of the IR, in float32 or float64. It is the oracle every
 * backend is tested against, and constant folding evaluates with it.
 */
#ifndef ATTNC_INTERP_H
#define ATTNC_INTERP_H

#include "ir.h"

/* A concrete tensor: dtype, static dims, row-major data it owns (allocated
 * through the context's hook; free with interp_tensor_fini). */
typedef struct interp_tensor {
	ir_dtype dtype; /* IR_F32, IR_F64 or IR_I32 */
	int rank;
	int64_t dims[IR_MAX_RANK];
	void *data;
} interp_tensor;

typedef struct interp_opts {
	bool is_f64; /* compute floats in float64 (f32 tensors become f64) */
	bool is_training; /* dropout active */
	uint64_t seed;    /* dropout randomness: (seed, dropout stream, step) */
	uint64_t step;
	/* interp_run reports the first node whose float result holds a NaN
	 * or an infinity, at the node's location, and fails (the training
	 * driver's hunt for where a non-finite loss came from). */
	bool stop_at_nonfinite;
} interp_opts;

int64_t interp_tensor_numel(const interp_tensor *t);
/* Allocates zeroed data for dims; false on OOM. */
bool interp_tensor_alloc(ir_ctx *ctx, interp_tensor *t, ir_dtype dtype,
			 int rank, const int64_t *dims);
void interp_tensor_fini(ir_ctx *ctx, interp_tensor *t);
/* Element i converted to double, whatever the dtype. */
double interp_tensor_get(const interp_tensor *t, int64_t i);
/* Allocates dst as a deep copy of src; false on OOM (dst left empty). */
bool interp_tensor_copy(ir_ctx *ctx, interp_tensor *dst,
			const interp_tensor *src);
/* Prints a header line with dtype and dims, then the values as PyTorch
 * does (4 decimals, or %.4e when the magnitudes call for it; integers for
 * i32; columns aligned; lines wrapped at 80; when there are more than 1000
 * elements, dims longer than 6 show their first and last 3 around "..."):
 *   f32[2, 1, 4]
 *   [[[ 2.0000,  3.0000,  4.0000,  5.0000]],
 *
 *    [[10.0000, 11.0000, 12.0000, 13.0000]]]
 * No newline after the last line. docs/ops.md has the details. */
void interp_tensor_print(const interp_tensor *t, FILE *out);

/* Binds the module's symbols: from the inputs' dims against f's input
 * types (reporting a mismatch at the input's location), then from the
 * symbols' fallbacks; derived symbols (B*T) from their factors, checked
 * against the inputs that have them; then checks the module's limits
 * (ir_module_check_limits). sym_values has m->n_syms entries; 0 =
 * unbound. */
bool interp_bind_syms(ir_ctx *ctx, const ir_module *m, const ir_func *f,
		      const interp_tensor *inputs, int64_t *sym_values);

/* Initializes every parameter of m by its initializer (ir_param.init) from
 * (seed, parameter index), in float32 or float64 (docs/ops.md gives the
 * exact draws and xavier's fans). params has m->n_params entries, owned by
 * the caller afterwards. On failure (an unbound symbol, OOM) reports it
 * and leaves every entry empty. */
bool interp_params_init(ir_ctx *ctx, const ir_module *m,
			const int64_t *sym_values, uint64_t seed, bool is_f64,
			interp_tensor *params);

/* Runs f on inputs (f->n_inputs) with params (m->n_params); fills outputs
 * (f->n_outputs, owned by the caller afterwards). Reports run-time errors
 * (an index out of range, a shape that does not bind) at the node's
 * location and returns false. */
bool interp_run(ir_ctx *ctx, const ir_module *m, const ir_func *f,
		const interp_opts *opts, const interp_tensor *params,
		const interp_tensor *inputs, interp_tensor *outputs);

/* Evaluates one node of g on operand values args (its n_args operands;
 * leaves are not evaluated here). Used by constant folding. */
bool interp_eval_node(ir_ctx *ctx, const ir_module *m, const ir_graph *g,
		      ir_id node, const interp_opts *opts,
		      const int64_t *sym_values, const interp_tensor *args,
		      interp_tensor *out);

#endif
