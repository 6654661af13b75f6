/*
 * driver.h - what the files of the attnc command line share: the parsed
 * options and the actions (run under the interpreter or the JIT, write
 * code ahead of time).
 */
#ifndef ATTNC_DRIVER_H
#define ATTNC_DRIVER_H

#include "ir.h"

#define DRV_MAX_LIST 64

typedef struct drv_sym_value {
	const char *name;
	int64_t value;
} drv_sym_value;

typedef struct drv_options {
	const char *model;
	const char *dump; /* NULL, "" (optimized), "parse", "all" or a pass */
	const char *disabled[DRV_MAX_LIST];
	uint32_t n_disabled;
	drv_sym_value syms[DRV_MAX_LIST]; /* --sym NAME=N, --batch N */
	uint32_t n_syms;
	bool no_fuse, stats, verify_each;
	bool interp, jit, f64;
	bool compile_only;  /* -c: object file and header */
	const char *emit;   /* --emit=ir|llvm|asm|obj */
	const char *output; /* -o */
	const char *entry;
	const char *save, *load; /* checkpoints */
	uint64_t seed;
	int threads; /* 0 = OpenMP default */
} drv_options;

/* Runs the entry point on its example inputs under the reference
 * interpreter and prints its outputs. */
bool drv_run_interp(ir_ctx *ctx, const ir_module *m, const drv_options *o);

/* Compiles the module to native code, runs the entry point on its example
 * inputs and prints its outputs; with --stats prints the statistics of
 * the graph and of the compilation. */
bool drv_run_jit(ir_ctx *ctx, const ir_module *m, const drv_options *o);

/* -c and --emit: writes the module ahead of time. */
bool drv_emit(ir_ctx *ctx, const ir_module *m, const drv_options *o);

/* The entry point the options name, or the module's default; reports and
 * returns NULL if there is none or it has no example to run on. */
const ir_func *drv_entry(ir_ctx *ctx, const ir_module *m, const drv_options *o,
			 bool needs_example);

/* Binds every symbol of m into values (m->n_syms): --sym/--batch first,
 * then the example inputs of f (if f), then the train block's batch for B,
 * then the symbols' fallbacks. With is_strict, an unbound symbol is an
 * error; otherwise it is bound to 1. */
bool drv_bind_syms(ir_ctx *ctx, const ir_module *m, const ir_func *f,
		   const drv_options *o, bool is_strict, int64_t *values);

#endif
