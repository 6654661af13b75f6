/*
 * cg_internal.h - what the generators inside codegen/ share: access to a
 * module's LLVM objects, and small helpers that keep IR building readable
 * (constants, typed pointer arithmetic, counted loops, intrinsic calls).
 *
 * Private to codegen/: it includes llvm-c headers, whose include path only
 * the attnc_codegen library has, so nothing outside can include it. All
 * LLVM*Ref values stay behind this line.
 */
#ifndef ATTNC_CG_INTERNAL_H
#define ATTNC_CG_INTERNAL_H

#include <llvm-c/Core.h>
#include <llvm-c/Error.h>

#include <stdbool.h>
#include <stdint.h>

#include "cg.h"

/* ---- the module (cg_module.c) --------------------------------------------- */

/* The LLVM module functions are added to, or NULL if the module failed or
 * has been optimized (no more functions may be added then). */
LLVMModuleRef cg_module_llvm(cg_module *m);
/* Records the first failure of the module (printf-style); later failures
 * keep the first message. Always returns false. */
bool cg_module_fail(cg_module *m, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Registers every target this LLVM has (--target; the host's alone is
 * what cg_module_create needs). Idempotent. */
void cg_target_init_all(void);

/* ---- the object cache (cg_cache.c) ---------------------------------------- */

#include <llvm-c/TargetMachine.h>

#include <stddef.h>

#define CG_CACHE_KEY_BYTES 16

/* The cache key of a module (its bitcode bc) compiled by tm through
 * pipeline: a 128-bit hash of LLVM's version, tm's triple, CPU and
 * features, the pipeline and the bitcode. */
void cg_cache_key(LLVMMemoryBufferRef bc, LLVMTargetMachineRef tm,
		  const char *pipeline, unsigned char key[CG_CACHE_KEY_BYTES]);
/* Looks key up in directory dir: CG_CACHE_MISS, CG_CACHE_CORRUPT (an
 * entry that fails a check, not to be used) or CG_CACHE_HIT, when
 * *data is a malloc'd copy of the object (*len bytes) that the caller
 * frees. An entry is the file KEY.o of a whole program, or KEY.part.o
 * of one of its units (is_part). */
cg_cache_result cg_cache_load(const char *dir,
			      const unsigned char key[CG_CACHE_KEY_BYTES],
			      bool is_part, char **data, size_t *len);
/* The objects of a module's parts or units, as the JIT links them. */
typedef struct cg_objects {
	uint32_t n, cap;
	char **data; /* (cap) each malloc'd, or pointers into block */
	size_t *len; /* (cap) */
	char *block; /* a cache entry that data points into, or NULL */
} cg_objects;
/* Appends the malloc'd object data (len bytes), which o now owns; false
 * (data freed) when memory runs out. */
bool cg_objects_add(cg_objects *o, char *data, size_t len);
/* Frees what o owns and empties it. */
void cg_objects_free(cg_objects *o);
/* The objects of o in one malloc'd buffer (*len bytes), or NULL when
 * memory runs out. */
char *cg_objects_pack(const cg_objects *o, size_t *len);
/* Finds the objects in a buffer cg_objects_pack made, which o then
 * owns (o's pointers point into it; o must be empty); false (data not
 * taken) if data (len bytes) is not one. */
bool cg_objects_unpack(char *data, size_t len, cg_objects *o);
/* Stores the object data (len bytes) under key in dir (is_part: as
 * cg_cache_load), making dir if needed, atomically (a temporary file
 * renamed over the entry). False if it could not: the caller carries on
 * without the cache. */
bool cg_cache_store(const char *dir, const unsigned char key[CG_CACHE_KEY_BYTES],
		    bool is_part, const char *data, size_t len);

/* ---- splitting a module for a parallel compile (cg_split.c) ----------- */

/* Part 0: the optnone functions; parts 1 and 2: the others. */
#define CG_SPLIT_PARTS 3

/* How many functions mod defines in each part (n_defs[0..3)), by the
 * plan cg_split_keep follows. False if mod cannot be split (out of
 * memory, or a global value another part must name has no name). */
bool cg_split_count(LLVMModuleRef mod, uint32_t n_defs[CG_SPLIT_PARTS]);
/* Keeps part `part` of mod (0, 1 or 2): every function defined in
 * another part becomes a declaration, and what another part names is
 * made external and hidden. Every copy of one module keeps its part by
 * the same plan, so the parts' objects link into one program. False
 * (mod unchanged) where cg_split_count is false. */
bool cg_split_keep(LLVMModuleRef mod, int part);
/* Makes the definition f a declaration (external). */
void cg_split_strip_body(LLVMValueRef f);
/* The globals of part `part` of a split module: a constant private one
 * stays where it is used (an unused one goes); any other is defined
 * only in part 0 (made external and hidden there), declared in others. */
void cg_split_keep_globals(LLVMModuleRef mod, int part);

/* Functions by pointer, to find a function's index in a module's list. */
typedef struct cg_fn_key {
	LLVMValueRef fn;
	uint32_t index;
} cg_fn_key;
/* Sets keys[i] = {fns[i], i} for i < n and sorts them by pointer. */
void cg_fn_keys_sort(cg_fn_key *keys, const LLVMValueRef *fns, uint32_t n);
/* The index of f among the n sorted keys, or -1 if it is not there. */
int64_t cg_fn_key_find(const cg_fn_key *keys, uint32_t n, LLVMValueRef f);

/* A module's units (cg_module_jit compiles and caches each on its own):
 * unit 0 is the optnone functions (entry points, thread functions);
 * each other unit a connected component of the other functions, as the
 * split's parts deal them (a helper marked CG_ATTR_SHARED is one of its
 * own), numbered in the order of its first function. */
typedef struct cg_units {
	uint32_t n_fns;    /* functions of the module, in order */
	LLVMValueRef *fns; /* (n_fns) */
	int32_t *unit;     /* (n_fns) its unit; -1 for a declaration */
	bool *is_cross;    /* (n_fns) named from another unit, or a constant */
	bool *was_local;   /* (n_fns) internal or private before the split */
	uint32_t n_units;  /* unit 0 included */
	uint64_t *weight;  /* (n_units) instructions */
} cg_units;
/* Finds mod's units and makes every function another unit names
 * external and hidden. False (mod unchanged) where cg_split_count is
 * false. Free with cg_units_free. */
bool cg_split_units(LLVMModuleRef mod, cg_units *u);
void cg_units_free(cg_units *u);

/* ---- compiling and caching a module in units (cg_units.c) ------------- */

/* Where and how cg_units_compile compiles. */
typedef struct cg_units_env {
	LLVMTargetMachineRef key_tm;       /* its target names the keys */
	LLVMTargetMachineRef tm_none;      /* unit 0's, level None */
	LLVMTargetMachineRef tm_kernel[2]; /* the kernels', one a thread */
	const char *pipeline;              /* the kernel units' optimizer */
	const char *cache_dir;             /* "" = no cache */
	bool is_threaded;                  /* a second thread may compile */
} cg_units_env;

typedef struct cg_units_stats {
	uint32_t n_units, n_hit, n_corrupt; /* kernel units; found; broken */
	double opt_ms;     /* the optimizer, on the thread that took longer */
	double codegen_ms; /* the rest: cutting, keying, machine code */
} cg_units_stats;

/* Compiles mod, after the whole-module passes (cg_module.c's
 * CG_PRE_SPLIT), in units (cg_split_units): each kernel unit found in
 * env->cache_dir (not "") under its key is loaded, each other optimized
 * and compiled (and stored there), and unit 0 compiled; their objects,
 * unit 0's first, are appended to out. mod becomes unit 0. Returns 1 on success, 0 on a
 * failure (the reason in err; mod is then unusable), -1 where mod
 * cannot be split (mod unchanged). */
int cg_units_compile(LLVMModuleRef mod, const cg_units_env *env, cg_objects *out,
		     cg_units_stats *st, char *err, size_t err_size);
/* Runs the pass pipeline on mod for tm; NULL, or the error. */
LLVMErrorRef cg_run_passes(LLVMModuleRef mod, const char *pipeline,
			   LLVMTargetMachineRef tm);
/* mod's PIC object made by tm, in a malloc'd buffer (*len bytes); NULL
 * with the reason in err if it cannot be made. */
char *cg_emit_object(LLVMTargetMachineRef tm, LLVMModuleRef mod, size_t *len,
		     char *err, size_t err_size);

/* ---- building IR (cg_llvm.c) ---------------------------------------------- */

/* One function under construction: its module, context and builder. */
typedef struct cg_fn {
	LLVMModuleRef mod;
	LLVMContextRef ctx;
	LLVMBuilderRef b;
	LLVMValueRef fn;
	LLVMTypeRef fn_type;
} cg_fn;

/* A counted loop `for (iv = start; iv < end; iv += step)` being emitted;
 * the body may be empty (the test comes first). */
typedef struct cg_loop {
	LLVMBasicBlockRef header, exit;
	LLVMValueRef iv;
	int64_t step;
} cg_loop;

/* Adds a function `name` of type fn_type to mod and positions a new
 * builder at its entry block. Internal functions are private to the
 * module. Pointer parameters get nocapture and noalias (no two pointer
 * arguments of a generated function overlap); the caller marks readonly
 * ones with cg_fn_param_readonly. Free with cg_fn_end. */
void cg_fn_begin(cg_fn *f, LLVMModuleRef mod, const char *name,
		 LLVMTypeRef fn_type, bool is_internal);
/* Finishes the function: disposes of the builder. */
void cg_fn_end(cg_fn *f);
/* Marks parameter i (0-based) readonly. */
void cg_fn_param_readonly(cg_fn *f, unsigned i);
/* Adds the function attribute `kind` (e.g. "noinline") to f. */
void cg_fn_attr(cg_fn *f, const char *kind);
/* Adds the string function attribute key="value" to f. */
void cg_fn_attr_str(cg_fn *f, const char *key, const char *value);
/* The string attribute (value "1") of a helper that kernels of many
 * components call (an sgemm micro-kernel or packing routine): cg_split
 * deals it as a component of its own rather than joining its callers
 * into one. */
#define CG_ATTR_SHARED "attnc-shared"

LLVMTypeRef cg_t_f32(cg_fn *f);
LLVMTypeRef cg_t_i64(cg_fn *f);
LLVMTypeRef cg_t_i32(cg_fn *f);
LLVMTypeRef cg_t_ptr(cg_fn *f);
LLVMTypeRef cg_t_vec(cg_fn *f, unsigned width); /* <width x float> */

LLVMValueRef cg_i64(cg_fn *f, int64_t v);
LLVMValueRef cg_i32(cg_fn *f, int32_t v);
LLVMValueRef cg_f32(cg_fn *f, float v);

/* The constant v of type t (float, or integer taking v's low bits), in
 * every lane if t is a vector type. */
LLVMValueRef cg_const_real(LLVMTypeRef t, double v);
LLVMValueRef cg_const_int(LLVMTypeRef t, uint64_t v);

/* Integer arithmetic on i64 values (no-wrap flags: all indices are
 * non-negative and small). */
LLVMValueRef cg_add(cg_fn *f, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_mul(cg_fn *f, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_addi(cg_fn *f, LLVMValueRef a, int64_t b);
LLVMValueRef cg_muli(cg_fn *f, LLVMValueRef a, int64_t b);
LLVMValueRef cg_min(cg_fn *f, LLVMValueRef a, LLVMValueRef b); /* signed */
/* (a * b) / c on non-negative values. */
LLVMValueRef cg_muldiv(cg_fn *f, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);

/* Address of float element idx (an i64 value) of p. */
LLVMValueRef cg_at(cg_fn *f, LLVMValueRef p, LLVMValueRef idx);
/* Address of float element p + c (a constant offset). */
LLVMValueRef cg_ati(cg_fn *f, LLVMValueRef p, int64_t c);
/* Loads/stores of a float or a <width x float> with the given alignment. */
LLVMValueRef cg_load(cg_fn *f, LLVMValueRef p);
void cg_store(cg_fn *f, LLVMValueRef v, LLVMValueRef p);
LLVMValueRef cg_vload(cg_fn *f, unsigned width, LLVMValueRef p, unsigned align);
void cg_vstore(cg_fn *f, LLVMValueRef v, LLVMValueRef p, unsigned align);
/* The first `lanes` floats at p (4-byte aligned) as a <width x float>: a
 * plain load when lanes >= width, else a masked one whose other lanes
 * are 0 (nothing past them is touched). */
LLVMValueRef cg_vload_part(cg_fn *f, unsigned width, LLVMValueRef p,
			   unsigned lanes);
/* Stores the first `lanes` lanes of the float vector v at p (all of
 * them when lanes >= its width). */
void cg_vstore_part(cg_fn *f, LLVMValueRef v, LLVMValueRef p, unsigned lanes);
/* A <width x float> with every lane equal to the float s. */
LLVMValueRef cg_splat(cg_fn *f, unsigned width, LLVMValueRef s);
/* The <width x i1> mask whose first n lanes are set. */
LLVMValueRef cg_mask(cg_fn *f, unsigned width, unsigned n);
/* Transposes the n x n matrix (n a power of two, at most 64) whose rows
 * are the <n x float> vectors r[0 .. n) in place: log2(n) rounds, each
 * swapping the off-diagonal h x h blocks of every 2h x 2h diagonal block
 * with one two-source shuffle per row. */
void cg_transpose(cg_fn *f, LLVMValueRef *r, unsigned n);

/* Calls the overloaded intrinsic `name` (e.g. "llvm.fma") whose overload
 * types are tys[0..n_tys). */
LLVMValueRef cg_intrinsic(cg_fn *f, const char *name, LLVMTypeRef *tys,
			  unsigned n_tys, LLVMValueRef *args, unsigned n_args);
/* Asks for the cache line at addr ahead of its use (llvm.prefetch of
 * data, locality 3): a hint that never faults, so addr may lie past the
 * object it points into (a GEP without inbounds); is_write for a line
 * about to be stored to. */
void cg_prefetch(cg_fn *f, LLVMValueRef addr, bool is_write);
/* Calls the external C function `name` of type fn_type, declaring it in
 * the module on first use. */
LLVMValueRef cg_call_extern(cg_fn *f, const char *name, LLVMTypeRef fn_type,
			    LLVMValueRef *args, unsigned n_args);
/* An atomic load of the i32 at p, and an atomic store of the i32 v at
 * p, with the given ordering (4-byte aligned). */
LLVMValueRef cg_atomic_load_i32(cg_fn *f, LLVMValueRef p,
				LLVMAtomicOrdering order);
void cg_atomic_store(cg_fn *f, LLVMValueRef v, LLVMValueRef p,
		     LLVMAtomicOrdering order);

/* libgomp, as gcc's code calls it: an `int name(void)` of OpenMP
 * (omp_get_thread_num, omp_get_num_threads, omp_get_max_threads), and
 * GOMP_parallel(body, data, n_threads, 0), which runs void body(data) on
 * a team of n_threads (an i32; 0: OpenMP's default) and returns when
 * all have. */
LLVMValueRef cg_omp_i32(cg_fn *f, const char *name);
void cg_gomp_parallel(cg_fn *f, LLVMValueRef body, LLVMValueRef data,
		      LLVMValueRef n_threads);

/* Calls a function of this module. */
LLVMValueRef cg_call(cg_fn *f, LLVMValueRef callee, LLVMValueRef *args,
		     unsigned n_args);

/* Sets fast-math flags on a float instruction: contract (FMA formation)
 * and, when is_reduction, reassoc and nsz too. Returns v. */
LLVMValueRef cg_fast(LLVMValueRef v, bool is_reduction);

/* An alloca of t at the top of the function's entry block, where SROA
 * finds it and no loop repeats it; align 0 keeps t's own alignment. */
LLVMValueRef cg_entry_alloca(cg_fn *f, LLVMTypeRef t, unsigned align);
/* A local variable (an entry-block alloca that SROA turns into
 * registers) holding init from the builder's position on. */
LLVMValueRef cg_var(cg_fn *f, LLVMTypeRef t, LLVMValueRef init);

/* Appends a block named `name` to the current function. */
LLVMBasicBlockRef cg_block(cg_fn *f, const char *name);
/* Starts a loop at the builder's position; returns the induction value
 * and leaves the builder in the body. start/end are i64 values. */
LLVMValueRef cg_loop_begin(cg_fn *f, cg_loop *l, LLVMValueRef start,
			   LLVMValueRef end, int64_t step);
/* Closes the innermost open body of l: steps the induction value, jumps
 * back, and leaves the builder after the loop. */
void cg_loop_end(cg_fn *f, cg_loop *l);
/* Marks the counted loop l, once closed, llvm.loop.unroll.disable:
 * LLVM neither unrolls it fully nor by a runtime factor. */
void cg_loop_no_unroll(cg_fn *f, const cg_loop *l);
/* Emits `if (cond) {` and leaves the builder in the then-block; returns
 * the join block, where cg_if_end continues. */
LLVMBasicBlockRef cg_if_begin(cg_fn *f, LLVMValueRef cond);
void cg_if_end(cg_fn *f, LLVMBasicBlockRef join);

#endif
