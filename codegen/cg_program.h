/*
 * cg_program.h - a whole optimized IR module lowered to native code: one
 * entry point per exported function, all in one cg_module, compiled once.
 *
 * Every shape is fixed here: the caller gives the value of each module
 * symbol (B, V_src, ...), and every dim becomes coef * value. Each entry
 * point has the ABI of runtime/attnrt.h:
 *
 *   int <prefix>_<function>(const attnrt_run *run, void *params,
 *                           void *scratch, const void *const *inputs,
 *                           void *const *outputs);
 *
 * params is one block for the whole program, laid out as
 * cg_program_params() says (each parameter 64-byte aligned, in module
 * order); scratch is per entry point (cg_program_scratch_bytes), 64-byte
 * aligned, garbage between calls; inputs and outputs are dense row-major
 * tensors as cg_program_inputs()/cg_program_outputs() describe. Nothing
 * is allocated by generated code (the generated sgemm may allocate its
 * packing buffers). docs/codegen.md, section "Lowering", tells how the
 * graph becomes kernels.
 *
 * This header uses plain C and IR types only; LLVM stays inside codegen/.
 */
#ifndef ATTNC_CG_PROGRAM_H
#define ATTNC_CG_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attnrt.h"
#include "cg.h"
#include "ir.h"

typedef struct cg_program cg_program;

typedef struct cg_program_options {
	/* Prefix of the entry points' symbols; NULL = the module's name. */
	const char *prefix;
	/* Never start parallel regions (every kernel serial). */
	bool is_serial;
	/* Elements of work a kernel needs before it runs in parallel;
	 * 0 = CG_PROGRAM_GRAIN_DEFAULT. */
	int64_t grain;
	/* Multiply-adds (m·n·k over the batch) from which a matmul calls
	 * the generated sgemm (cg_gemm.h) instead of plain row loops;
	 * 0 = CG_PROGRAM_GEMM_MIN_DEFAULT, < 0 = never. */
	int64_t gemm_min;
	/* Lower only the exported functions of these names (n_only of
	 * them; NULL = every exported function). The params block is laid
	 * out for the whole module either way. */
	const char *const *only;
	uint32_t n_only;
	/* Floats per vector of the sgemm and fused attention kernels: 8
	 * (AVX2's ymm) or 16 (AVX-512's zmm); 0 = the widest the CPU has.
	 * Either runs on any AVX2 host (LLVM splits what the CPU lacks);
	 * tests use it to cover both forms on one machine. */
	int vector_width;
	/* The CPU the code is for (cg_module_create_for: an LLVM x86-64
	 * CPU name such as "x86-64-v3", with its own features); NULL = the
	 * host's CPU and features. It also sets vector_width's default. */
	const char *cpu;
	/* The target triple (cg_module_create_target); NULL = the host's.
	 * With no cpu, the code is for cg_target_default_cpu(triple). */
	const char *triple;
	/* The directory of the object cache the JIT reads and fills
	 * (cg_module_set_cache); NULL or "" = none. */
	const char *cache_dir;
	/* Have the JIT compile the module as one, not in parts
	 * (cg_module_set_split): the same results, for tests. */
	bool no_split;
	/* Have the JIT tell perf where each function of the program lies
	 * (cg_module_set_perf_jit), for `perf inject --jit`. */
	bool is_perf_jit;
	/* Give every computing node a kernel and a buffer of its own (no
	 * elementwise fusion, the pass "fuse_elementwise": docs/fusion.md). */
	bool no_fuse;
	/* Have every sgemm multiply the zero rows of a masked loss's
	 * gradient too (codegen/cg_gemm.h, skip_zero_k and skip_zero_m):
	 * the same bits, for tests that compare against it. */
	bool keep_zero_rows;
	/* Threads of the entry points' static schedules (docs/codegen.md):
	 * a call asking for exactly this many threads runs its kernels side
	 * by side on them; any other count runs them one after another,
	 * each over the threads it asks for. 0 = OpenMP's default thread
	 * count when the program is made (at most CG_PROGRAM_SCHED_MAX);
	 * 1 = no schedule. */
	int sched_threads;
	/* Time every kernel call (docs/cli.md, --profile): each entry point
	 * reads the CPU's cycle counter around each kernel it calls and adds
	 * the call and its cycles to counters of its own (atomically, so
	 * that concurrent calls may share them). Without it the code has no
	 * trace of this; with it the results are the same bits. */
	bool is_profiled;
	/* Have every small attention gradient recompute its forward's
	 * weights instead of reading the forward's cache of them
	 * (cg_attn_cache_pair): the same bits, for tests that compare
	 * against it. */
	bool no_attn_cache;
	/* Give the forward's products no code for leaving out the rows no
	 * output reads (cg_program_set_row_skip): every row computed, for
	 * tests that compare against it. */
	bool no_row_skip;
} cg_program_options;

#define CG_PROGRAM_GRAIN_DEFAULT 32768
#define CG_PROGRAM_GEMM_MIN_DEFAULT 4096
#define CG_PROGRAM_SCHED_MAX 64

/* Lowers every exported function of m (already through the pass
 * pipeline and verified) into one new cg_module. sym_values has
 * m->n_syms entries: the value of each symbol, or 0 to take the symbol's
 * fallback. opts may be NULL (defaults).
 *
 * Returns NULL after reporting each problem through ir_error on ctx: an
 * unbound symbol, a dtype or op the backend cannot lower (naming the op
 * and its .g location), an LLVM failure. m must outlive the program
 * (names in the tables point into it); the program does not change m. */
cg_program *cg_program_create(ir_ctx *ctx, const ir_module *m,
			      const int64_t *sym_values,
			      const cg_program_options *opts);

/* Frees the program, its LLVM module and its JIT code (entry points from
 * cg_program_entry dangle afterwards). NULL is a no-op. */
void cg_program_destroy(cg_program *p);

/* Optimizes and JIT-compiles the module, then looks up every entry point.
 * Returns false after reporting the LLVM error on the program's ctx.
 * After it, cg_program_emit no longer works (the JIT owns the module). */
bool cg_program_jit(cg_program *p);

/* Writes the optimized module as LLVM IR text, assembly or a PIC object
 * to path (or, for the _buffer form, into a malloc'd NUL-terminated
 * buffer the caller frees). Must come before cg_program_jit. Returns
 * false after reporting the error. */
bool cg_program_emit(cg_program *p, cg_emit_kind kind, const char *path);
bool cg_program_emit_buffer(cg_program *p, cg_emit_kind kind, char **data,
			    size_t *len);

/* After cg_program_jit: whether the next calls of every entry point
 * leave out of the forward's products (those cg_lower_row_skip_valid
 * takes: no epilogue, the sgemm's) the rows no output reads
 * (passes/rowlive.h), writing +0 there. Off when the program is made;
 * the caller turns it on for a call only when pass_rowbound says every
 * value of the call's forward is finite (passes/rowbound.h), where the
 * results keep their bits, and never while a call is running. Returns
 * false (nothing changed) when the program has no switch: made with
 * no_row_skip, with too few products that leave rows out (below
 * CG_ROW_SKIP_MIN_SHARE of its multiply-adds), or not JIT-compiled. */
bool cg_program_set_row_skip(cg_program *p, bool on);

/* After a call that failed with ATTNRT_ERR_INDEX: the index it read and
 * the bound it broke ([0, bound)), from the program's global that the
 * failing kernel wrote (under threads, one of the failing reads).
 * Returns false when there is none (not JIT-compiled, or no kernel
 * wrote it). */
bool cg_program_index_error(const cg_program *p, int64_t *index, int64_t *bound);

/* Number of entry points (the exported functions, in module order) and
 * the IR function name of entry i (< cg_program_n_entries). */
uint32_t cg_program_n_entries(const cg_program *p);
const char *cg_program_entry_name(const cg_program *p, uint32_t i);

/* The linker symbol of the entry point for function func
 * ("<prefix>_<func>"), or NULL if func is not exported. Owned by p. */
const char *cg_program_symbol(const cg_program *p, const char *func);

/* The callable entry point for func after cg_program_jit, or NULL. */
attnrt_entry_fn cg_program_entry(const cg_program *p, const char *func);

/* Bytes of scratch memory the entry point for func needs (0 if func is
 * not exported, or needs none). */
size_t cg_program_scratch_bytes(const cg_program *p, const char *func);

/* Bytes of the params block (a multiple of ATTNRT_ALIGN). */
size_t cg_program_params_bytes(const cg_program *p);

/* The parameter table, one entry per module parameter in module order,
 * with concrete dims; *n receives the count. Owned by p. */
const attnrt_param_info *cg_program_params(const cg_program *p, uint32_t *n);

/* The inputs (arguments) and outputs (results) of the entry point for
 * func, with concrete dims; *n receives the count. NULL (and *n = 0) if
 * func is not exported. Owned by p. */
const attnrt_tensor_info *cg_program_inputs(const cg_program *p,
					    const char *func, uint32_t *n);
const attnrt_tensor_info *cg_program_outputs(const cg_program *p,
					     const char *func, uint32_t *n);

/* Number of kernels generated over all entry points (one per node that
 * computes, but nodes of the same op, attributes and concrete types
 * share one), and how many of them may run in parallel. */
uint32_t cg_program_n_kernels(const cg_program *p);
uint32_t cg_program_n_parallel(const cg_program *p);

/* The nodes computed inside their consumer's kernel (elementwise
 * fusion), over all entry points. */
uint32_t cg_program_n_fused(const cg_program *p);
/* The kernels one call of the entry point for func calls (0 if func is
 * not exported). */
uint32_t cg_program_n_calls(const cg_program *p, const char *func);

/* An entry point's static schedule, as estimated at compile time; all 0
 * when it has none (one thread, or too small to gain from one). */
typedef struct cg_program_sched {
	uint32_t threads, tasks, waits;
	double cycles;          /* the kernels' estimated cycles, summed */
	double makespan;        /* the schedule's estimated cycles */
	uint64_t scratch_bytes; /* the schedule's own memory layout */
} cg_program_sched;

cg_program_sched cg_program_sched_of(const cg_program *p, const char *func);

/* ---- the scratch slab's peak --------------------------------------------- */

/* One buffer of an entry point's scratch slab: node's result, from the
 * .g line loc. */
typedef struct cg_scratch_buffer {
	ir_id node;       /* in the function's graph */
	const char *kind; /* its op's name (ir_op_table), static */
	ir_loc loc;
	uint64_t bytes;
} cg_scratch_buffer;

/* What the slab holds at its fullest, in the layout that sets the
 * slab's size (the in-order one, or the static schedule's when it needs
 * more): the buffers live at that step, largest first. live <= slab;
 * the difference is the first fit's holes. */
typedef struct cg_scratch_peak {
	uint64_t slab;    /* cg_program_scratch_bytes */
	uint64_t live;    /* the buffers' bytes, summed */
	uint32_t threads; /* 1: the in-order layout; else the schedule's */
	uint32_t n;       /* buffers[0 .. n) */
	cg_scratch_buffer *buffers;
} cg_scratch_peak;

/* The peak of the entry point for func's scratch slab, or NULL if func
 * is not exported. Owned by p. */
const cg_scratch_peak *cg_program_scratch_peak(const cg_program *p,
					       const char *func);

/* ---- profiling (cg_program_options.is_profiled) ---------------------------- */

/* One place an entry point counts time at: site 0 is the entry point as
 * a whole (node IR_NONE), site 1 + i its i-th kernel call in program
 * order. Work is per call, from the concrete shapes. */
typedef struct cg_profile_site {
	ir_id node;       /* the kernel's node in the function's graph */
	const char *kind; /* its op's name (ir_op_table), static */
	uint32_t n_fused; /* nodes computed inside it (elementwise fusion) */
	ir_loc loc;       /* its node's .g location */
	double flops;     /* matmul and attention arithmetic; 0 for others */
	double bytes;     /* its operands' and result's bytes */
	/* In a gradient function (outputs "grad.<param>", passes.h): the
	 * kernel computes nothing the other outputs (the loss) read, so it
	 * is autodiff's backward, recomputation for it included. */
	bool is_backward;
} cg_profile_site;

/* The sites of the entry point for func (*n of them), or NULL (*n = 0)
 * when p is not profiled or func is not exported. Owned by p. */
const cg_profile_site *cg_program_profile_sites(const cg_program *p,
						const char *func, uint32_t *n);

/* After cg_program_jit: the counters of the entry point for func, two
 * per site (calls, cycles), which its calls add to; zero before the
 * first call. The caller may reset them. NULL when not profiled. Under a
 * static schedule, a kernel split into pieces counts one call and the
 * cycles of all its pieces (on every thread). */
uint64_t *cg_program_profile_counters(const cg_program *p, const char *func);

/* After cg_program_jit: the cycle counter the profile counts in, read
 * now (the difference of two reads over the time between them gives its
 * rate); 0 when not profiled. */
uint64_t cg_program_profile_clock(const cg_program *p);

/* Compilation statistics of the underlying module; build_ms is the time
 * spent building the LLVM IR in cg_program_create. */
cg_module_stats cg_program_stats(const cg_program *p);
double cg_program_build_ms(const cg_program *p);
/* The process's CPU time (every thread: the JIT compiles on two) spent
 * building the IR and in cg_program_jit's compile, in milliseconds: on
 * a busy machine, where a compile's wall time is mostly waiting, the
 * measure of its work. */
double cg_program_cpu_ms(const cg_program *p);

#endif
