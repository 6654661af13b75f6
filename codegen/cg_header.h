/*
 * cg_header.h - writes the C header (NAME.h) that goes with an object file
 * attnc emits, so that a C program can call the model with nothing but
 * NAME.o, NAME.h and libattnrt.
 *
 * The writer takes plain data (what a cg_program exposes: entry symbols,
 * scratch sizes, the parameter table, the tensor infos), so it knows
 * nothing of LLVM or of the IR. For a prefix P (upper case PU) the header
 * declares:
 *
 *   PU_PARAMS_SIZE, PU_N_PARAMS       the params block and its table
 *   PU_SCHED_THREADS                  the threads of the static schedules
 *   static const attnrt_param_info P_params[]
 *   for each entry point F:
 *     a comment with its argument and result shapes (and, for a
 *     gradient function, how its outputs map onto a gradient block),
 *     PU_FU_SCRATCH_SIZE, PU_FU_N_INPUTS, PU_FU_N_OUTPUTS,
 *     PU_FU_SCHED_THREADS,
 *     static const attnrt_tensor_info P_F_inputs[], P_F_outputs[],
 *     int P_F(const attnrt_run *, void *params, void *scratch,
 *             const void *const *inputs, void *const *outputs);
 *
 * docs/runtime.md shows a generated header and a program that uses it.
 */
#ifndef ATTNC_CG_HEADER_H
#define ATTNC_CG_HEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "attnrt.h"

/* One entry point of the object. */
typedef struct cg_header_entry {
	const char *name;    /* the exported function: forward */
	const char *symbol;  /* its linker symbol: additive_attention_forward */
	size_t scratch_size; /* bytes of scratch memory it needs */
	const attnrt_tensor_info *inputs; /* arguments, in order */
	uint32_t n_inputs;
	const attnrt_tensor_info *outputs; /* results, in order */
	uint32_t n_outputs;
	/* Threads its static schedule was built for; 0 or 1: none. */
	uint32_t sched_threads;
	/* A gradient function: outputs[0] the loss, outputs[1 + i] the
	 * gradient of parameter i of the table (same shape). */
	bool is_grad;
} cg_header_entry;

typedef struct cg_header_desc {
	const char *prefix; /* C identifier prefixing every name: the model */
	const char *source; /* the .g file, for the top comment; may be NULL */
	const char *object; /* the object file, for the top comment; may be NULL */
	const char *version; /* attnc's version, for the top comment; may be NULL */
	size_t params_size;              /* bytes of the params block */
	const attnrt_param_info *params; /* the table, in module order */
	uint32_t n_params;
	const cg_header_entry *entries;
	uint32_t n_entries;
	/* The threads the program's static schedules were built for (1:
	 * none): what a call should ask for in attnrt_run.n_threads. */
	uint32_t sched_threads;
	/* Lines for the top comment: what the symbols were bound to, e.g.
	 * "B = 64 (the train block's batch)"; n_bound of them, may be 0. */
	const char *const *bound;
	uint32_t n_bound;
} cg_header_desc;

/* Writes the header for d to out. Every name that becomes a C identifier
 * (prefix, entry names and symbols) must be [A-Za-z_][A-Za-z0-9_]*;
 * strings that go into string literals or comments (parameter and tensor
 * names, source and object paths) are escaped as needed. Returns false
 * with a message in err (err_size bytes; err may be NULL) if d is not
 * valid or writing to out failed; out may then hold part of a header. */
bool cg_header_write(FILE *out, const cg_header_desc *d, char *err,
		     size_t err_size);

#endif
