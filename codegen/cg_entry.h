/*
 * cg_entry.h - what the generation of an entry point shares between the
 * lowering (cg_lower.c: kernels, memory, the calls in program order) and
 * the static schedule over threads (cg_lower_sched.c). Private to
 * codegen/.
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
 * scratch slab of total bytes. */
typedef struct func_plan {
	ir_id *into;
	ir_id *root;
	uint64_t *view;
	uint64_t *offset;
	uint64_t total;
} func_plan;

/* The state of one entry point being generated. */
typedef struct entry_gen {
	cg_program *p;
	cg_lower *L;
	const ir_func *fn;
	func_plan plan;
	const uint64_t *offset; /* the offsets in use: plan's or a schedule's */
	cg_fn f;
	LLVMValueRef run, params, scratch;
	LLVMValueRef *inputs; /* per argument: its pointer */
	/* Profiling (cg_lower_profile.c): the entry point's counters (two
	 * i64 per site), NULL when not profiled; per node, its kernel's
	 * site; the cycle count at the entry point's start. */
	LLVMValueRef prof;
	const uint32_t *prof_site;
	LLVMValueRef prof_t0;
} entry_gen;

/* Where node i's data is at run time, in the function being built. */
LLVMValueRef cg_entry_node_ptr(entry_gen *e, ir_id i);

/* The arguments of node id's kernel but its range: run, its output,
 * its operands' pointers (null for a fused one), its trees' leaves'.
 * Returns how many. */
uint32_t cg_entry_kernel_args(entry_gen *e, ir_id id, const node_call *c,
			      LLVMValueRef *args);

/* The entry point's inputs array: each argument's pointer into e->inputs. */
void cg_entry_load_inputs(entry_gen *e, LLVMValueRef inputs);

/* Copies the outputs into the caller's outputs array of pointers. */
void cg_entry_copy_outputs(entry_gen *e, LLVMValueRef outputs);

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
	ir_id *kernel_node; /* per node of the schedule: the graph's node */
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
 * 0 after copying the outputs to outputs); otherwise, or if the region's
 * team comes out smaller, it branches on to `in_order`, which runs the
 * kernels one after another. */
void cg_sched_emit(entry_gen *e, const node_call *ks, const sched_plan *sp,
		   LLVMValueRef outputs, LLVMBasicBlockRef in_order);

#endif
