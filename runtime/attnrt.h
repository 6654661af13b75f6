/*
 * attnrt.h - the ABI between code that attnc generates and the programs
 * (and the attnc driver) that call it. Small and stable: plain C types,
 * no compiler headers.
 *
 * A compiled model is a set of entry points (one per exported function of
 * the .g file), all sharing one block of parameters. Every shape is fixed
 * when the model is compiled (symbols such as the batch size B are bound
 * then; a smaller batch is run by padding it, see docs/codegen.md). The
 * caller owns all memory, as in Glow's bundles:
 *
 *   params   one block for every parameter of the model, laid out as the
 *            generated header's table says (attnrt_param_info), 64-byte
 *            aligned, each parameter at a 64-byte aligned offset;
 *   scratch  per entry point, the activations and temporaries it needs
 *            (size in the header), 64-byte aligned; its contents are
 *            garbage between calls;
 *   inputs   one pointer per argument of the exported function, row-major
 *            f32 or i32 of the shapes in the header;
 *   outputs  one pointer per returned value, written by the call;
 *   run      seed, step, training mode and thread count of the call.
 *
 * An entry point returns 0, or ATTNRT_ERR_* | (node << 8) naming the op
 * that failed (an index out of range in an embedding or a loss).
 */
#ifndef ATTNRT_H
#define ATTNRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTNRT_ABI_VERSION 1
#define ATTNRT_ALIGN 64

enum {
	ATTNRT_OK = 0,
	ATTNRT_ERR_INDEX = 1, /* an id or label outside its range */
};

/* How one call runs. Dropout is active only when is_training; its random
 * numbers are a function of (seed, step, op, element) only (the same
 * convention as the reference interpreter, docs/ops.md), so results do
 * not depend on n_threads. */
typedef struct attnrt_run {
	uint64_t seed;
	uint64_t step;
	int32_t is_training;
	int32_t n_threads; /* threads of parallel loops; 0 = OpenMP default */
} attnrt_run;

/* Every generated entry point has this type. */
typedef int (*attnrt_entry_fn)(const attnrt_run *run, void *params,
			       void *scratch, const void *const *inputs,
			       void *const *outputs);

typedef enum attnrt_dtype { ATTNRT_F32 = 0, ATTNRT_I32 = 1 } attnrt_dtype;

/* A parameter's place in the params block, and how it is initialized. */
typedef enum attnrt_init {
	ATTNRT_INIT_ZEROS,
	ATTNRT_INIT_ONES,
	ATTNRT_INIT_NORMAL,         /* a = mean, b = std */
	ATTNRT_INIT_UNIFORM,        /* a = low, b = high */
	ATTNRT_INIT_XAVIER_UNIFORM, /* a = gain */
} attnrt_init;

typedef struct attnrt_param_info {
	const char *name;   /* dotted path: encoder.0.attention.W_q */
	size_t offset;      /* bytes from the start of the params block */
	int rank;
	int64_t dims[6];
	attnrt_init init;
	double a, b;
} attnrt_param_info;

/* Describes one argument or result of an entry point. */
typedef struct attnrt_tensor_info {
	const char *name;
	attnrt_dtype dtype;
	int rank;
	int64_t dims[6];
} attnrt_tensor_info;

#ifdef __cplusplus
}
#endif

#endif
