/*
 * cg_entry.h - what the files that make a program share (private to
 * codegen/): the program object and its entry points (cg_program.c), the
 * generation of an entry point (cg_lower_entry.c), its memory plan
 * (cg_lower_plan.c), the kernels it calls (cg_lower_kernel.c) and the
 * static schedule over threads (cg_lower_sched.c).
 */
#ifndef ATTNC_CG_ENTRY_H
#define ATTNC_CG_ENTRY_H

#include "cg_lower.h"
#include "cg_sched.h"

/* A generated kernel as the entry point calls it. */
typedef struct kernel_ref {
	LLVMValueRef fn, par; /* par: the GOMP_parallel body, or NULL */
	int64_t extent;
	double cost; /* estimated cycles of a whole call (cg_sched) */
} kernel_ref;

/* How the entry point calls node i's kernel: ref, and the leaves of its
 * fused trees, whose pointers follow the operands', then the table of
 * its dropout streams (NULL: none; cg_lower_stream.c). */
typedef struct node_call {
	kernel_ref ref;
	uint32_t n_extra;
	ir_id extra[CG_KERNEL_MAX_IN];
	LLVMValueRef streams;
} node_call;

/* A function's fusion and memory plan: into (pass_fuse_ew_plan), the
 * buffer each node's data lives in (root: itself, or what a reshape or a
 * contiguous slice views, at byte view[i] of it) and its offset in the
 * scratch slab of total bytes, or, for a root whose kernel writes it
 * straight into the caller's buffer of output direct[root], that output
 * (UINT32_MAX: none). */
typedef struct func_plan {
	ir_id *into;
	ir_id *root;
	uint64_t *view;
	uint64_t *offset;
	uint32_t *direct;
	uint64_t total;
	cg_scratch_peak peak; /* of this layout (slab: total) */
} func_plan;

/* Plans f (cg_lower_plan.c): its fusion (none when no_fuse), each node's
 * root and view, and the slab offsets of the buffers, in arrays of
 * L->ctx that cg_func_plan_fini frees (also after a failure). Returns
 * false when memory ran out. */
bool cg_func_plan_make(const cg_lower *L, const ir_func *f, bool no_fuse,
		       func_plan *pl);
void cg_func_plan_fini(ir_ctx *ctx, func_plan *pl);

/* The peak of the n blocks of a layout of g's buffers (blocks[b] node
 * node[b]'s) whose slab is slab bytes, into *out (its buffers in an
 * array of ctx that cg_scratch_peak_fini frees). Returns false when
 * memory ran out (reported). */
bool cg_scratch_peak_make(ir_ctx *ctx, const ir_graph *g,
			  const pass_mem_block *blocks, const ir_id *node,
			  uint32_t n, uint64_t slab, cg_scratch_peak *out);
void cg_scratch_peak_fini(ir_ctx *ctx, cg_scratch_peak *pk);

/* One entry point of the program: an exported function. */
typedef struct cg_entry {
	const ir_func *fn;
	char symbol[256];
	size_t scratch_bytes;
	uint32_t n_calls;       /* kernel calls of one call */
	cg_program_sched sched; /* its static schedule, if it has one */
	cg_scratch_peak peak;   /* of the layout that sets scratch_bytes */
	attnrt_tensor_info *inputs, *outputs;
	attnrt_entry_fn entry;
	cg_profile_site *sites; /* when profiled: n_sites, site 0 the entry */
	uint32_t n_sites;
	uint64_t *counters; /* after the JIT: 2 per site (calls, cycles) */
} cg_entry;

/* The program (cg_program.h). */
struct cg_program {
	ir_ctx *ctx;
	const ir_module *m;
	int64_t *syms;
	cg_module *cm;
	attnrt_param_info *params; /* m->n_params */
	size_t params_bytes;
	cg_entry *entries;
	uint32_t n_entries;
	uint32_t n_kernels, n_parallel;
	uint32_t n_fused; /* fused nodes over all entries */
	int64_t grain;
	bool is_serial, no_fuse, is_profiled;
	char index_error_name[300]; /* the { index, bound } global */
	int64_t *index_error;       /* it, after the JIT */
	char clock_name[300];    /* when profiled: the cycle counter's reader */
	char row_skip_name[300]; /* the row_skip global ("": none) */
	int32_t *row_skip;       /* it, after the JIT */
	uint64_t (*clock)(void); /* it, after the JIT */
	uint32_t sched_threads;  /* > 1: entry points get a static schedule */
	double build_ms;
	double cpu_ms; /* process CPU time in create and JIT, all threads */
	LLVMValueRef *consts;       /* m->n_consts globals, made on first use */
	struct built_kernel *built; /* every kernel made, for sharing */
	uint32_t n_built, built_cap;
};

/* The state of one entry point being generated. */
typedef struct entry_gen {
	cg_program *p;
	cg_lower *L;
	const ir_func *fn;
	func_plan plan;
	const uint64_t *offset; /* the offsets in use: plan's or a schedule's */
	cg_fn f;
	LLVMValueRef run, params, scratch;
	LLVMValueRef *inputs;  /* per argument: its pointer */
	LLVMValueRef *outputs; /* per result: its pointer */
	/* Profiling (cg_lower_profile.c): the entry point's counters (two
	 * i64 per site), NULL when not profiled; per node, its kernel's
	 * site; the cycle count at the entry point's start. */
	LLVMValueRef prof;
	const uint32_t *prof_site;
	LLVMValueRef prof_t0;
} entry_gen;

/* Generates the entry point of ce->fn (named prefix_<name>) into L's
 * module: its plan, its kernels and the calls of them; fills ce's
 * symbol, call count, schedule, scratch size, tensor tables and (when
 * p is profiled) sites. Returns false after reporting a failure (a node
 * that cannot be compiled, out of memory). */
bool cg_entry_lower(cg_program *p, cg_lower *L, cg_entry *ce,
		    const char *prefix);

/* Whether computing node id can be compiled once the symbols are bound;
 * reports why at the node if not. */
bool cg_lower_node_compiles(const cg_lower *L, const ir_graph *g, ir_id id);

/* The kernel of node id of fn with the fusion plan into, into c: one
 * made for an equal node earlier, or a new one (with its GOMP_parallel
 * body when it has the work for one); counted in p. Returns false after
 * reporting a failure. */
bool cg_kernel_build(cg_program *p, cg_lower *L, const ir_func *fn,
		     const ir_id *into, ir_id id, node_call *c);

/* Frees the kernels p remembered for sharing (cg_kernel_build). */
void cg_kernel_built_fini(cg_program *p);

/* The captures a kernel's GOMP_parallel body reads, for n_in pointer
 * operands: { ptr run, out, in...; i64 extent; i32 status }. */
LLVMTypeRef cg_kernel_captures_type(LLVMContextRef c, uint32_t n_in);

/* Where node i's data is at run time, in the function being built. */
LLVMValueRef cg_entry_node_ptr(entry_gen *e, ir_id i);

/* A kernel's status st (0, or ATTNRT_ERR_*: a kernel may be shared by
 * nodes, and its code names none) as node id's: st | id << 8, the code
 * the entry point returns (attnrt.h). */
LLVMValueRef cg_entry_node_status(cg_fn *f, LLVMValueRef st, ir_id id);

/* The arguments of node id's kernel but its range: run, its output,
 * its operands' pointers (null for a fused one), its trees' leaves'.
 * Returns how many. */
uint32_t cg_entry_kernel_args(entry_gen *e, ir_id id, const node_call *c,
			      LLVMValueRef *args);

/* The entry point's inputs array: each argument's pointer into e->inputs. */
void cg_entry_load_inputs(entry_gen *e, LLVMValueRef inputs);
/* The entry point's outputs array: each result's pointer into
 * e->outputs. */
void cg_entry_load_outputs(entry_gen *e, LLVMValueRef outputs);

/* Copies into e->outputs the outputs whose kernels did not write them
 * there (func_plan.direct). */
void cg_entry_copy_outputs(entry_gen *e);

/* Profiling (cg_program_options.is_profiled, cg_lower_profile.c). */

/* The sites of an entry point whose kernels ks (per node, ref.fn set for
 * each call) are about to be called: *sites (1 + calls of them, site 0
 * the entry point), *site_of (per node, its site) and e->prof, the
 * module's global `symbol.profile` of their counters. Returns false on
 * out of memory (reported). */
bool cg_profile_entry_make(entry_gen *e, const node_call *ks,
			   const char *symbol, cg_profile_site **sites,
			   uint32_t *n_sites, uint32_t **site_of);
/* The cycle counter now, or NULL when e is not profiled. */
LLVMValueRef cg_profile_start(entry_gen *e);
/* Adds the cycles since t0 (from cg_profile_start; NULL: nothing) to
 * site's counter, and one call when is_call. */
void cg_profile_add(entry_gen *e, uint32_t site, LLVMValueRef t0, bool is_call);
/* The function `name` (i64 (void)) that reads the cycle counter. */
void cg_profile_clock_fn(cg_lower *L, const char *name);

/* A static schedule of an entry point over n_threads (cg_sched) and the
 * scratch layout that goes with it; usable false when the schedule is
 * not worth it or not safe (then the entry point only runs in order). */
typedef struct sched_plan {
	bool usable;
	cg_sched s;
	uint64_t *offset; /* per node, as func_plan.offset */
	uint64_t total;
	ir_id *kernel_node;   /* per node of the schedule: the graph's node */
	cg_scratch_peak peak; /* of the schedule's layout */
} sched_plan;

/* The estimated cycles of a call of node id's kernel, with trees tr and
 * work units of work (cg_kernel.work). */
double cg_sched_kernel_cost(const ir_graph *g, ir_id id, const cg_trees *tr,
			    int64_t work);

/* Plans e's kernels (ks, per node) over n_threads. Returns false only
 * when memory ran out (reported in the context). */
bool cg_sched_plan_make(entry_gen *e, const node_call *ks, uint32_t n_threads,
			sched_plan *sp);

void cg_sched_plan_fini(ir_ctx *ctx, sched_plan *sp);

/* Emits, at the builder's position in e's entry function, the run of the
 * schedule: when the team the call asks for (attnrt_run.n_threads, or
 * OpenMP's default) has sp's thread count, one parallel region runs
 * every thread's list, then the entry returns (a kernel's error code, or
 * 0 after copying the outputs not written in place); otherwise, or if
 * the region's team comes out smaller, it branches on to `in_order`,
 * which runs the kernels one after another. */
void cg_sched_emit(entry_gen *e, const node_call *ks, const sched_plan *sp,
		   LLVMValueRef outputs, LLVMBasicBlockRef in_order);

#endif
