/*
 * cg.h - attnc's native code generation: a module of generated functions
 * that is compiled once, then either run in this process (ORC LLJIT) or
 * written out as LLVM IR, assembly or a relocatable PIC object file.
 *
 * It is one of the headers the rest of the project sees, all plain C (no
 * LLVM type leaves codegen/): this one (the module), cg_program.h (an IR
 * module lowered to entry points, what the driver runs and emits),
 * cg_header.h (the C header of an emitted object) and cg_gemm.h (the
 * generated sgemm); the tests also read cg_sched.h. Generators (cg_gemm.h,
 * the kernel lowering behind cg_program.h) add functions to a cg_module;
 * the host then calls cg_module_jit() and cg_module_lookup(), or
 * cg_module_emit().
 *
 * Life of a module:
 *   cg_module_create -> add functions -> [cg_module_optimize]
 *     -> any number of cg_module_emit / cg_module_emit_buffer
 *     -> cg_module_jit -> cg_module_lookup ... -> cg_module_destroy
 * Optimization runs once (the first of optimize/emit/jit triggers it);
 * functions may not be added after it. The JIT takes the module: after
 * cg_module_jit, emit calls fail with an error.
 *
 * Errors are values: a function that fails returns false (or NULL) and
 * leaves a message in cg_module_error(); a module that has failed stays
 * failed. Generated code calls libgomp (GOMP_parallel, omp_get_thread_num,
 * ...) and the C library (aligned_alloc, free): a program that links an
 * emitted object must link -lgomp too.
 */
#ifndef ATTNC_CG_H
#define ATTNC_CG_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cg_module cg_module;

typedef enum cg_emit_kind {
	CG_EMIT_LLVM, /* LLVM IR text (.ll) */
	CG_EMIT_ASM,  /* host assembly (.s) */
	CG_EMIT_OBJ,  /* relocatable ELF object, position independent (.o) */
} cg_emit_kind;

/* What the object cache did for a module's JIT compilation. */
typedef enum cg_cache_result {
	CG_CACHE_OFF,     /* no cache (cg_module_set_cache not called) */
	CG_CACHE_MISS,    /* no entry: compiled, and stored */
	CG_CACHE_HIT,     /* the object came from the cache, checked whole */
	CG_CACHE_CORRUPT, /* an entry failed a check: compiled, and replaced */
} cg_cache_result;

/* Timings of the module's compilation, in milliseconds, and its size. */
typedef struct cg_module_stats {
	int n_functions; /* defined functions, helpers included */
	/* LLVMVerifyModule + the optimizer (compiled in parts: the
	 * whole-module passes + the parts' default<O3> on the thread
	 * where they took longer) */
	double opt_ms;
	/* machine code generation (0 on a cache hit; in parts or units:
	 * the rest of their wall time, optimization overlapping it taken
	 * out; in units it includes cutting and keying them) */
	double codegen_ms;
	/* cg_module_jit's time but optimizing: the cache key and lookup,
	 * machine code generation, linking by LLJIT */
	double jit_ms;
	cg_cache_result cache; /* the whole program's entry */
	/* compiled in units (cg_units.c), where the program's entry was
	 * not found: how many kernel units, how many were found in the
	 * cache, how many entries were found broken (compiled again) */
	unsigned n_units, n_units_hit, n_units_corrupt;
} cg_module_stats;

/* Creates an empty module for the host CPU (its name is the LLVM module
 * identifier). Returns NULL only when memory runs out; if the host target
 * cannot be set up, the module is returned already failed (see
 * cg_module_error). Free with cg_module_destroy. */
cg_module *cg_module_create(const char *name);

/* As cg_module_create, for the CPU named cpu (an LLVM x86-64 CPU name
 * that cg_cpu_check accepts, e.g. "x86-64-v3", with that CPU's own
 * features) instead of the host's; NULL or "native" = the host's CPU and
 * features. Optimization, emission and the JIT all target that CPU. */
cg_module *cg_module_create_for(const char *name, const char *cpu);

/* As cg_module_create_for, for the target triple (cg_target_check's
 * kind; NULL = the host's) and cpu: an x86-64 CPU name for an x86-64
 * triple, else NULL or "generic". The JIT refuses a module whose target
 * is not the host's (cg_target_is_host). */
cg_module *cg_module_create_target(const char *name, const char *triple,
				   const char *cpu);

/* True if triple names a target cg_module_create_target can make code
 * for: one this LLVM has, for Linux on a 64-bit little-endian machine
 * ("x86_64-linux-gnu", "aarch64-linux-gnu", ...); else false with the
 * reason in err. */
bool cg_target_check(const char *triple, char *err, size_t err_len);

/* True if code for triple runs here: its arch and OS are the host's
 * (the vendor may differ). NULL = the host: true. */
bool cg_target_is_host(const char *triple);

/* True if triple's arch is x86-64 (NULL = the host's). */
bool cg_target_is_x86_64(const char *triple);

/* The CPU code for triple is made for when no --mcpu says: "x86-64"
 * (the baseline, SSE2) for x86-64 triples, else "generic". */
const char *cg_target_default_cpu(const char *triple);

/* True if cpu names a CPU that cg_module_create_for knows; else false
 * with "unknown CPU 'NAME'..." (and the nearest known name) in err. */
bool cg_cpu_check(const char *cpu, char *err, size_t err_len);

/* Floats per vector of the kernels for cpu: 16 where it has AVX-512,
 * else 8; NULL or "native" = the host's (cg_gemm_host_vector_width). */
int cg_cpu_vector_width(const char *cpu);

/* Makes cg_module_jit keep compiled objects in directory dir (made
 * when first needed): the object of a module whose bitcode, LLVM
 * version, triple, CPU, features and pipeline all match an entry is
 * read from there instead of being optimized and compiled; an entry
 * that fails its checks is compiled again and replaced. NULL or ""
 * = no cache (the default). Only the JIT uses the cache. */
void cg_module_set_cache(cg_module *m, const char *dir);

/* Whether cg_module_jit has LLVM's perf listener write a jitdump file
 * of every function it loads, named as in the module, for perf's
 * `perf record -k 1` and `perf inject --jit` (docs/cli.md): the file is
 * $JITDUMPDIR/.debug/jit/.../jit-PID.dump, else under $HOME. Off by
 * default; the code is the same either way, linked by LLVM's
 * RuntimeDyld instead of JITLink. cg_module_jit fails when this LLVM
 * was built without the listener (LLVM_USE_PERF). */
void cg_module_set_perf_jit(cg_module *m, bool is_on);

/* Whether cg_module_jit compiles the module in parts (the default): the
 * optnone functions without optimization at CodeGen level None, the
 * others in two parts, side by side on two threads when OpenMP's
 * thread count is above 1. false compiles it as one module, as
 * cg_module_emit does; the results are the same bits either way. */
void cg_module_set_split(cg_module *m, bool is_split);

/* The threads cg_module_jit may compile on: 1 creates none; 0 (the
 * default) = OpenMP's thread count (cg_threads_get). */
void cg_module_set_threads(cg_module *m, int n);

/* Frees the module, its JIT and all code it made: function pointers from
 * cg_module_lookup are dangling afterwards. NULL is a no-op. */
void cg_module_destroy(cg_module *m);

/* The message of the first failure, or NULL if nothing failed. Owned by
 * the module. */
const char *cg_module_error(const cg_module *m);

/* Verifies the module (LLVMVerifyModule) and runs the default<O3> pipeline
 * for the host TargetMachine. Idempotent; no functions can be added after.
 * Returns false (with a message) if the module is invalid or failed. */
bool cg_module_optimize(cg_module *m);

/* Optimizes if needed, then hands the module to ORC LLJIT, which resolves
 * external symbols (libgomp, libc) in this process. Returns false on any
 * failure; the module cannot be emitted afterwards. */
bool cg_module_jit(cg_module *m);

/* Address of the generated function `name` after cg_module_jit, or NULL
 * (with a message) if there is none. */
void *cg_module_lookup(cg_module *m, const char *name);

/* Optimizes if needed, then writes the module to `path` in the given form.
 * Code generation works on a clone, so the module stays usable (for the
 * JIT or more emission). Returns false on failure. */
bool cg_module_emit(cg_module *m, cg_emit_kind kind, const char *path);

/* As cg_module_emit, into memory: *data receives a malloc'd buffer of *len
 * bytes (plus a terminating NUL, so text kinds are C strings) that the
 * caller frees with free(). */
bool cg_module_emit_buffer(cg_module *m, cg_emit_kind kind, char **data,
			   size_t *len);

/* The module's statistics so far. */
cg_module_stats cg_module_stats_get(const cg_module *m);

/* The thread count generated parallel regions use by default
 * (OMP_NUM_THREADS, else the number of cores): libgomp's
 * omp_get_max_threads() of the calling thread. */
int cg_threads_get(void);

/* Sets the thread count for parallel regions started from the calling
 * thread (omp_set_num_threads); n < 1 is taken as 1. */
void cg_threads_set(int n);

/* The median time, in seconds, of five empty parallel regions of n
 * threads: a few microseconds on idle cores, milliseconds when another
 * process holds one of them and the team waits for its descheduled
 * thread (a cheap test before running real work on a team). */
double cg_threads_region_seconds(int n);

/* Runs fn(data, tid, n) on each of a team of n threads (tid from 0; the
 * calling thread is 0) and returns when all have: one parallel region,
 * for work the caller divides itself. Inside another region the team is
 * the calling thread alone (n = 1). */
void cg_threads_each(int n, void (*fn)(void *data, int tid, int n), void *data);

#endif
