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
	const char **disabled; /* names of passes not to run */
	uint32_t n_disabled;
	bool no_fuse;          /* turn off every fusion pass */
	const char *dump;      /* NULL, "parse", a pass name, or "all" */
	FILE *dump_out;        /* where dumps go */
	bool verify_each;      /* run ir_module_verify after every pass */
} pass_options;

typedef bool (*pass_fn)(ir_module *m);

typedef struct pass_info {
	const char *name;
	const char *summary;
	pass_fn run;
	bool is_fusion;
} pass_info;

/* The passes in pipeline order. */
extern const pass_info pass_table[];
extern const uint32_t pass_count;
const pass_info *pass_find(const char *name);

/* Runs the pipeline as options say; dumps as asked; verifies between
 * passes when asked and always at the end. */
bool pass_pipeline_run(ir_module *m, const pass_options *opts);

bool pass_infer(ir_module *m);    /* re-derive every type; report mismatches */
bool pass_fold(ir_module *m);     /* evaluate nodes whose operands are constant */
bool pass_simplify(ir_module *m); /* algebraic identities */
bool pass_cse(ir_module *m);      /* merge identical nodes */
bool pass_dce(ir_module *m);      /* drop nodes no output needs */

/* Writes the --stats JSON object for the module. */
void pass_stats_print(const ir_module *m, FILE *out);

#endif
