/*
 * cg_module.c - the cg_module: one LLVM module per compilation, built in an
 * ORC thread-safe context, optimized once for the TargetMachine of the
 * host CPU (or of a named one: cg_module_create_for, --mcpu; or of
 * another machine: cg_module_create_target, --target), then
 * either JIT-compiled with LLJIT (in parts, side by side: cg_split.c;
 * with the object cache in units, each cached on its own: cg_units.c)
 * or emitted (IR text, assembly, PIC object) from a clone.
 *
 * Why the pieces are as they are (../shared/LLVM-NOTES.md has the
 * measurements): LLVMRunPasses gets the TargetMachine, or nothing
 * vectorizes; the module lives in the thread-safe context's LLVMContext
 * so LLJIT can take it; the JIT gets its own TargetMachine because
 * LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine takes ownership;
 * objects are PIC because Debian's gcc links PIE executables; a process
 * symbol generator lets generated code call libgomp and libc. This file
 * also calls omp_* itself (cg_threads_*), which keeps libgomp linked into
 * every program that uses the JIT even with --as-needed.
 */
#include "cg_internal.h"
#include "attnrt.h"
#include "rt_file.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Error.h>
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/OrcEE.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <omp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The optimization pipeline (part of the cache key): first MergeFunctions,
 * which folds functions whose IR is the same (sgemm micro-kernels and
 * packing of variants with the same strides, any other functions that
 * came out the same) into one
 * before O3 optimizes and codegen compiles each copy. */
#define CG_PIPELINE "mergefunc,default<O3>"
/* How the JIT makes its objects (part of the cache key): the optimized
 * module split in parts (cg_split.c), the optnone part compiled at
 * CodeGen level None. */
#define CG_JIT_PARTS "then in parts, optnone at level None"
/* The JIT's pipeline for a module that splits: MergeFunctions and the
 * passes that need every call site over the whole module, then the
 * module split in parts (cg_split.c), each kernel part optimized and
 * compiled on its own, side by side. Part 0 (optnone functions, which
 * no function pass touches, and the globals, which globalopt has seen
 * whole) is only compiled: O3's module passes over it cost about half
 * as much as its machine code and changed nothing that runs. IPSCCP
 * runs without function specialization: on one thread, before the
 * parts, it weighed every kernel call with a constant argument as a
 * candidate (40% of IPSCCP's work at 12 layers) and cloned none in
 * any program tried, so the module it leaves is the same bits. */
#define CG_PRE_SPLIT                                            \
	"mergefunc,ipsccp<no-func-spec>,deadargelim,globalopt," \
	"cgscc(function-attrs)"
#define CG_PART_PIPELINE "default<O3>"
#define CG_JIT_SPLIT                                                   \
	CG_PRE_SPLIT ", then in units, the kernels' " CG_PART_PIPELINE \
		     ", optnone at level None"

struct cg_module {
	LLVMOrcThreadSafeContextRef tsctx; /* owns the LLVMContext */
	LLVMModuleRef mod;                 /* NULL once the JIT owns it */
	LLVMTargetMachineRef tm;           /* the CPU, PIC; passes and emit */
	LLVMOrcLLJITRef jit;               /* NULL until cg_module_jit */
	bool is_optimized;
	bool is_failed;
	bool no_split;    /* cg_module_set_split(m, false) */
	bool is_perf_jit; /* cg_module_set_perf_jit */
	int n_threads;    /* cg_module_set_threads; 0 = OpenMP's count */
	char cpu[64];     /* LLVM CPU name; "" = the host's CPU and features */
	char triple[128]; /* normalized target triple; "" = the host's */
	char cache_dir[1024]; /* the object cache; "" = none */
	cg_module_stats stats;
	char err[1024];
};

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

bool cg_module_fail(cg_module *m, const char *fmt, ...)
{
	if (m->is_failed)
		return false;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m->err, sizeof m->err, fmt, ap);
	va_end(ap);
	m->is_failed = true;
	return false;
}

/* Records an LLVMErrorRef (consuming it) as the module's failure. */
static bool fail_llvm_error(cg_module *m, const char *what, LLVMErrorRef e)
{
	char *msg = LLVMGetErrorMessage(e);
	cg_module_fail(m, "%s: %s", what, msg);
	LLVMDisposeErrorMessage(msg);
	return false;
}

/* A TargetMachine for the module's CPU with that CPU's features, or for
 * the host CPU and its features. */
static LLVMTargetMachineRef host_tm(cg_module *m, LLVMRelocMode reloc,
				    LLVMCodeModel model,
				    LLVMCodeGenOptLevel level)
{
	char *triple = m->triple[0] ? LLVMCreateMessage(m->triple)
				    : LLVMGetDefaultTargetTriple();
	char *cpu = m->cpu[0] ? NULL : LLVMGetHostCPUName();
	char *features = m->cpu[0] ? NULL : LLVMGetHostCPUFeatures();
	LLVMTargetRef target;
	char *msg = NULL;
	LLVMTargetMachineRef tm = NULL;

	if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
		cg_module_fail(m, "no LLVM target for %s: %s", triple, msg);
		LLVMDisposeMessage(msg);
	} else {
		tm = LLVMCreateTargetMachine(target, triple, cpu ? cpu : m->cpu,
					     features ? features : "", level,
					     reloc, model);
		if (!tm)
			cg_module_fail(m, "cannot create a TargetMachine for %s",
				       cpu ? cpu : m->cpu);
	}
	LLVMDisposeMessage(triple);
	if (cpu)
		LLVMDisposeMessage(cpu);
	if (features)
		LLVMDisposeMessage(features);
	return tm;
}

static void setup_module(cg_module *m, const char *name)
{
	if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter()) {
		cg_module_fail(m, "LLVM has no native target for this host");
		return;
	}
	if (m->triple[0])
		cg_target_init_all();
	m->tm = host_tm(m, LLVMRelocPIC, LLVMCodeModelDefault,
			LLVMCodeGenLevelAggressive);
	if (!m->tm)
		return;
	m->tsctx = LLVMOrcCreateNewThreadSafeContext();
	m->mod = LLVMModuleCreateWithNameInContext(
		name, LLVMOrcThreadSafeContextGetContext(m->tsctx));
	char *triple = LLVMGetTargetMachineTriple(m->tm);
	LLVMSetTarget(m->mod, triple);
	LLVMDisposeMessage(triple);
	LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(m->tm);
	LLVMSetModuleDataLayout(m->mod, dl);
	LLVMDisposeTargetData(dl);
}

cg_module *cg_module_create(const char *name)
{
	return cg_module_create_for(name, NULL);
}

cg_module *cg_module_create_for(const char *name, const char *cpu)
{
	return cg_module_create_target(name, NULL, cpu);
}

/* Sets m's triple and CPU (for a triple that is not x86-64's, only the
 * generic CPU); false once m has failed. */
static bool set_target(cg_module *m, const char *triple, const char *cpu)
{
	char err[512];
	if (!cg_target_check(triple, err, sizeof err))
		return cg_module_fail(m, "%s", err);
	char *norm = LLVMNormalizeTargetTriple(triple);
	snprintf(m->triple, sizeof m->triple, "%s", norm);
	LLVMDisposeMessage(norm);
	if (cg_target_is_x86_64(triple))
		return true;
	if (cpu && strcmp(cpu, "generic") != 0)
		return cg_module_fail(m,
				      "CPU '%s' is not one of target %s: its "
				      "only CPU here is 'generic'",
				      cpu, triple);
	snprintf(m->cpu, sizeof m->cpu, "generic");
	return true;
}

cg_module *cg_module_create_target(const char *name, const char *triple,
				   const char *cpu)
{
	cg_module *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	if (triple && !set_target(m, triple, cpu))
		return m;
	if (m->cpu[0]) { /* generic, of another arch */
		setup_module(m, name);
		return m;
	}
	if (triple && !cpu)
		cpu = cg_target_default_cpu(triple);
	char err[256];
	if (cpu && strcmp(cpu, "native") != 0) {
		if (!cg_cpu_check(cpu, err, sizeof err)) {
			cg_module_fail(m, "%s", err);
			return m;
		}
		snprintf(m->cpu, sizeof m->cpu, "%s", cpu);
	}
	setup_module(m, name);
	return m;
}

void cg_module_destroy(cg_module *m)
{
	if (!m)
		return;
	if (m->jit) {
		LLVMErrorRef e = LLVMOrcDisposeLLJIT(m->jit);
		if (e)
			LLVMConsumeError(e);
	}
	if (m->mod)
		LLVMDisposeModule(m->mod);
	if (m->tsctx)
		LLVMOrcDisposeThreadSafeContext(m->tsctx);
	if (m->tm)
		LLVMDisposeTargetMachine(m->tm);
	free(m);
}

const char *cg_module_error(const cg_module *m)
{
	return m->is_failed ? m->err : NULL;
}

LLVMModuleRef cg_module_llvm(cg_module *m)
{
	if (m->is_failed || m->is_optimized)
		return NULL;
	return m->mod;
}

static int count_functions(LLVMModuleRef mod)
{
	int n = 0;
	for (LLVMValueRef f = LLVMGetFirstFunction(mod); f;
	     f = LLVMGetNextFunction(f))
		n += !LLVMIsDeclaration(f);
	return n;
}

static bool verify(cg_module *m)
{
	char *msg = NULL;
	if (LLVMVerifyModule(m->mod, LLVMReturnStatusAction, &msg)) {
		cg_module_fail(m, "generated LLVM IR is invalid: %s", msg);
		LLVMDisposeMessage(msg);
		return false;
	}
	LLVMDisposeMessage(msg);
	m->stats.n_functions = count_functions(m->mod);
	return true;
}

LLVMErrorRef cg_run_passes(LLVMModuleRef mod, const char *pipeline,
			   LLVMTargetMachineRef tm)
{
	LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
	LLVMErrorRef e = LLVMRunPasses(mod, pipeline, tm, opts);
	LLVMDisposePassBuilderOptions(opts);
	return e;
}

/* Verifies the module (if is_verify) and runs the pipeline over it;
 * the time adds to opt_ms. */
static bool verify_and_run(cg_module *m, const char *pipeline, bool is_verify)
{
	if (!m->mod)
		return cg_module_fail(m, "module was handed to the JIT");
	double t0 = now_ms();
	if (is_verify && !verify(m))
		return false;
	LLVMErrorRef e = cg_run_passes(m->mod, pipeline, m->tm);
	m->stats.opt_ms += now_ms() - t0;
	return e ? fail_llvm_error(m, "optimization failed", e) : true;
}

bool cg_module_optimize(cg_module *m)
{
	if (m->is_failed)
		return false;
	if (m->is_optimized)
		return true;
	m->stats.opt_ms = 0;
	if (!verify_and_run(m, CG_PIPELINE, true))
		return false;
	m->is_optimized = true;
	return true;
}

/* The object layer of a JIT whose functions perf is told of: RuntimeDyld
 * (the C API registers listeners on it only) with ctx, the perf
 * listener. */
static LLVMOrcObjectLayerRef perf_layer(void *ctx, LLVMOrcExecutionSessionRef es,
					const char *triple)
{
	(void)triple;
	LLVMOrcObjectLayerRef l =
		LLVMOrcCreateRTDyldObjectLinkingLayerWithSectionMemoryManager(es);
	LLVMOrcRTDyldObjectLinkingLayerRegisterJITEventListener(l, ctx);
	return l;
}

/* An LLJIT for the host whose main dylib also resolves symbols of this
 * process (libgomp, libc). */
static bool create_jit(cg_module *m)
{
	LLVMJITEventListenerRef perf = NULL;
	if (m->is_perf_jit && !(perf = LLVMCreatePerfJITEventListener()))
		return cg_module_fail(m, "this LLVM has no perf listener "
					 "(built without LLVM_USE_PERF)");
	LLVMTargetMachineRef tm = host_tm(m, LLVMRelocPIC,
					  LLVMCodeModelJITDefault,
					  LLVMCodeGenLevelAggressive);
	if (!tm)
		return false;
	LLVMOrcLLJITBuilderRef jb = LLVMOrcCreateLLJITBuilder();
	LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(
		jb, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm));
	if (perf)
		LLVMOrcLLJITBuilderSetObjectLinkingLayerCreator(jb, perf_layer,
								perf);
	LLVMErrorRef e = LLVMOrcCreateLLJIT(&m->jit, jb);
	if (e)
		return fail_llvm_error(m, "cannot create the JIT", e);
	LLVMOrcDefinitionGeneratorRef gen;
	e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
		&gen, LLVMOrcLLJITGetGlobalPrefix(m->jit), NULL, NULL);
	if (e)
		return fail_llvm_error(m, "cannot search this process's symbols",
				       e);
	LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(m->jit), gen);
	return true;
}

/* The first function the module defines with external linkage: looking
 * it up makes LLJIT compile the whole module now. */
static const char *first_exported(LLVMModuleRef mod)
{
	for (LLVMValueRef f = LLVMGetFirstFunction(mod); f;
	     f = LLVMGetNextFunction(f))
		if (!LLVMIsDeclaration(f) &&
		    LLVMGetLinkage(f) == LLVMExternalLinkage)
			return LLVMGetValueName2(f, &(size_t){0});
	return NULL;
}

char *cg_emit_object(LLVMTargetMachineRef tm, LLVMModuleRef mod, size_t *len,
		     char *err, size_t err_size)
{
	LLVMMemoryBufferRef buf = NULL;
	char *msg = NULL;
	if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &msg,
						&buf)) {
		snprintf(err, err_size, "code generation failed: %s", msg);
		LLVMDisposeMessage(msg);
		return NULL;
	}
	*len = LLVMGetBufferSize(buf);
	char *out = malloc(*len + 1);
	if (out)
		memcpy(out, LLVMGetBufferStart(buf), *len);
	else
		snprintf(err, err_size, "out of memory");
	LLVMDisposeMemoryBuffer(buf);
	return out;
}

/* One part of a split compile (cg_split.c): its module, or the bitcode
 * to read it from into an LLVMContext of its own; its TargetMachine;
 * the pipeline to run over the part first (NULL: the module is
 * optimized); and what came out. */
typedef struct part_job {
	int part;
	LLVMModuleRef mod;      /* NULL: read bc */
	LLVMMemoryBufferRef bc; /* the whole module's bitcode */
	LLVMTargetMachineRef tm;
	const char *pipeline;
	double opt_ms; /* the pipeline's wall time */
	char *obj;     /* the object, malloc'd (len bytes) */
	size_t len;
	char err[512];
} part_job;

/* Runs the job's pipeline (if any) over its part. */
static bool optimize_part(part_job *j, LLVMModuleRef mod)
{
	if (!j->pipeline)
		return true;
	double t0 = now_ms();
	LLVMErrorRef e = cg_run_passes(mod, j->pipeline, j->tm);
	j->opt_ms = now_ms() - t0;
	if (!e)
		return true;
	char *msg = LLVMGetErrorMessage(e);
	snprintf(j->err, sizeof j->err, "optimization failed: %s", msg);
	LLVMDisposeErrorMessage(msg);
	return false;
}

/* Keeps the job's part of its module, optimizes it (j->pipeline) and
 * makes its object; touches no state but the job's and its module's
 * (its LLVMContext is its own), so parts run on threads side by side. */
static void run_part(part_job *j)
{
	LLVMContextRef ctx = NULL;
	LLVMModuleRef mod = j->mod;
	if (!mod) {
		ctx = LLVMContextCreate();
		if (LLVMParseBitcodeInContext2(ctx, j->bc, &mod)) {
			snprintf(j->err, sizeof j->err,
				 "cannot read the module's bitcode back");
			mod = NULL;
			goto done;
		}
	}
	if (!cg_split_keep(mod, j->part)) {
		snprintf(j->err, sizeof j->err, "cannot split the module");
		goto done;
	}
	if (!optimize_part(j, mod))
		goto done;
	j->obj = cg_emit_object(j->tm, mod, &j->len, j->err, sizeof j->err);
done:
	if (mod && ctx)
		LLVMDisposeModule(mod);
	if (ctx)
		LLVMContextDispose(ctx);
}

/* The jobs of a split compile and who has taken part 0. */
typedef struct parts_run {
	part_job *jobs;         /* (CG_SPLIT_PARTS) */
	bool has_part0;         /* part 0 has functions to compile */
	atomic_flag is_taken_0; /* part 0 is being or was compiled */
} parts_run;

/* Runs kernel part `part`, then part 0 unless the other thread took it
 * first: the thread that finishes its kernel part first compiles the
 * entry points, so a kernel part that took longer than its share of
 * the deal does not also wait for them. */
static void run_part_then_0(parts_run *r, int part)
{
	run_part(&r->jobs[part]);
	if (r->has_part0 && !atomic_flag_test_and_set(&r->is_taken_0))
		run_part(&r->jobs[0]);
}

static void *run_part_thread(void *run)
{
	run_part_then_0(run, 2);
	return NULL;
}

/* Makes the module's machine code in parts (cg_split.c; n_defs: each
 * part's functions, two parts or more), each kernel part (1 and 2)
 * first optimized by pipeline unless it is NULL (the module is
 * optimized): part 2 read from the bitcode bc (of the module) on a
 * second thread (if the module may use more than one: --threads 1
 * creates none), part 1 (read from bc too, or the module itself when
 * there is no part 0) on this one, and part 0 (the module itself) on
 * the thread that finishes its kernel part first. The objects, in
 * order of part, go to *out; they are the same whichever thread made
 * them. The longer thread's optimizing adds to opt_ms, the rest of the
 * wall time is codegen_ms. */
static bool compile_parts(cg_module *m, LLVMMemoryBufferRef bc,
			  const uint32_t n_defs[CG_SPLIT_PARTS],
			  const char *pipeline, cg_objects *out)
{
	part_job jobs[CG_SPLIT_PARTS] = {{0}};
	bool ok = true;
	for (int i = 0; i < CG_SPLIT_PARTS; i++) {
		jobs[i].part = i;
		jobs[i].tm = n_defs[i]
				     ? host_tm(m, LLVMRelocPIC,
					       LLVMCodeModelDefault,
					       i == 0 ? LLVMCodeGenLevelNone
						      : LLVMCodeGenLevelAggressive)
				     : NULL;
		ok = ok && (!n_defs[i] || jobs[i].tm);
		jobs[i].pipeline = i == 0 ? NULL : pipeline;
	}
	double t0 = now_ms();
	pthread_t th;
	bool is_threaded = false;
	parts_run run = {.jobs = jobs,
			 .has_part0 = ok && n_defs[0],
			 .is_taken_0 = ATOMIC_FLAG_INIT};
	jobs[0].mod = m->mod;
	/* Read back rather than cloned: LLVMCloneModule took about twice as
	 * long as parsing the bitcode. */
	jobs[1].bc = bc;
	jobs[1].mod = n_defs[0] ? NULL : m->mod;
	jobs[2].bc = bc;
	int nt = m->n_threads > 0 ? m->n_threads : cg_threads_get();
	if (ok && n_defs[2] && nt > 1)
		is_threaded = pthread_create(&th, NULL, run_part_thread,
					     &run) == 0;
	if (ok && n_defs[1])
		run_part(&jobs[1]);
	if (run.has_part0 && !atomic_flag_test_and_set(&run.is_taken_0))
		run_part(&jobs[0]);
	if (is_threaded)
		pthread_join(th, NULL);
	else if (ok && n_defs[2])
		run_part(&jobs[2]);
	/* The optimizer's time on the thread where it took longer: part 0
	 * has none, this one ran part 1, and part 2 unless a second thread
	 * did. */
	double here = jobs[0].opt_ms + jobs[1].opt_ms, there = jobs[2].opt_ms;
	double opt = !is_threaded ? here + there : here > there ? here : there;
	m->stats.opt_ms += opt;
	for (int i = 0; i < CG_SPLIT_PARTS; i++) {
		if (ok && n_defs[i] && !jobs[i].obj)
			ok = cg_module_fail(m, "%s", jobs[i].err);
		if (jobs[i].obj && !cg_objects_add(out, jobs[i].obj, jobs[i].len))
			ok = cg_module_fail(m, "out of memory");
		if (jobs[i].tm)
			LLVMDisposeTargetMachine(jobs[i].tm);
	}
	m->stats.codegen_ms = now_ms() - t0 - opt;
	return ok;
}

/* Compiles the module as one object (a module already optimized, or
 * one with nothing to split), the way cg_module_emit does. */
static bool compile_whole(cg_module *m, cg_objects *out)
{
	if (!cg_module_optimize(m))
		return false;
	double t0 = now_ms();
	char err[512];
	size_t len = 0;
	char *obj = cg_emit_object(m->tm, m->mod, &len, err, sizeof err);
	m->stats.codegen_ms = now_ms() - t0;
	if (!obj)
		return cg_module_fail(m, "%s", err);
	return cg_objects_add(out, obj, len) ||
	       cg_module_fail(m, "out of memory");
}

/* Compiles the module, after the whole-module passes, in units
 * (cg_units.c): each found in the object cache is loaded, each other
 * optimized and compiled on its own, side by side, and stored there.
 * As cg_units_compile returns. */
static int compile_units(cg_module *m, cg_objects *out)
{
	cg_units_env env = {.key_tm = m->tm,
			    .pipeline = CG_PART_PIPELINE,
			    .cache_dir = m->cache_dir};
	int nt = m->n_threads > 0 ? m->n_threads : cg_threads_get();
	env.is_threaded = nt > 1;
	env.tm_none = host_tm(m, LLVMRelocPIC, LLVMCodeModelDefault,
			      LLVMCodeGenLevelNone);
	for (int i = 0; i < 2; i++)
		env.tm_kernel[i] = host_tm(m, LLVMRelocPIC, LLVMCodeModelDefault,
					   LLVMCodeGenLevelAggressive);
	char err[512] = "";
	cg_units_stats st = {0};
	int r = 0;
	if (env.tm_none && env.tm_kernel[0] && env.tm_kernel[1])
		r = cg_units_compile(m->mod, &env, out, &st, err, sizeof err);
	LLVMTargetMachineRef tms[3] = {env.tm_none, env.tm_kernel[0],
				       env.tm_kernel[1]};
	for (int i = 0; i < 3; i++)
		if (tms[i])
			LLVMDisposeTargetMachine(tms[i]);
	if (r == 0)
		cg_module_fail(m, "%s",
			       err[0] ? err : "cannot compile in units");
	if (r != 1)
		return r;
	m->stats.opt_ms += st.opt_ms;
	m->stats.codegen_ms = st.codegen_ms;
	m->stats.n_units = st.n_units;
	m->stats.n_units_hit = st.n_hit;
	m->stats.n_units_corrupt = st.n_corrupt;
	return 1;
}

/* Compiles the module into objects: a module that splits (cg_split.c)
 * and is not optimized yet is split right after the whole-module passes
 * (CG_PRE_SPLIT): with the object cache, into units that are each found
 * there or compiled (compile_units), else into parts whose kernel parts
 * are optimized and compiled side by side (compile_parts: fewer, larger
 * modules, which cost less to make); an optimized one is split in parts
 * as it is; one that does not split is optimized whole and compiled as
 * one object. */
static bool compile_objects(cg_module *m, cg_objects *out)
{
	bool is_whole_opt = m->no_split || m->is_optimized;
	if (is_whole_opt && !cg_module_optimize(m))
		return false;
	if (!is_whole_opt) {
		m->stats.opt_ms = 0;
		if (!verify_and_run(m, CG_PRE_SPLIT, true))
			return false;
		int r = m->cache_dir[0] ? compile_units(m, out) : -1;
		if (r >= 0) {
			m->is_optimized = true;
			return r == 1;
		}
	}
	uint32_t n_defs[CG_SPLIT_PARTS] = {0};
	int n_parts = 0;
	if (!m->no_split && cg_split_count(m->mod, n_defs))
		for (int i = 0; i < CG_SPLIT_PARTS; i++)
			n_parts += n_defs[i] != 0;
	if (n_parts < 2) {
		if (!is_whole_opt && !verify_and_run(m, CG_PART_PIPELINE, false))
			return false;
		m->is_optimized = true;
		return compile_whole(m, out);
	}
	LLVMMemoryBufferRef bc = LLVMWriteBitcodeToMemoryBuffer(m->mod);
	if (!bc)
		return cg_module_fail(m, "cannot write the module's bitcode");
	bool ok = compile_parts(m, bc, n_defs,
				is_whole_opt ? NULL : CG_PART_PIPELINE, out);
	LLVMDisposeMemoryBuffer(bc);
	m->is_optimized = true;
	return ok;
}

/* The module's objects: from the cache when it holds the whole
 * program's, else compiled now (in units, each from the cache where it
 * is there: compile_objects) and stored there. Without a cache no key
 * is made: the module's bitcode, written only to be hashed, took 20-30
 * ms of a 12-layer program's compile on one thread. The caller frees
 * out. */
static bool module_objects(cg_module *m, cg_objects *out)
{
	if (!m->cache_dir[0])
		return compile_objects(m, out);
	LLVMMemoryBufferRef bc = LLVMWriteBitcodeToMemoryBuffer(m->mod);
	if (!bc)
		return cg_module_fail(m, "cannot write the module's bitcode");
	unsigned char key[CG_CACHE_KEY_BYTES];
	cg_cache_key(bc, m->tm,
		     m->no_split ? (m->is_optimized ? "optimized" : CG_PIPELINE)
		     : m->is_optimized ? "optimized, " CG_JIT_PARTS
				       : CG_JIT_SPLIT,
		     key);
	LLVMDisposeMemoryBuffer(bc);
	char *data = NULL;
	size_t len = 0;
	m->stats.cache = cg_cache_load(m->cache_dir, key, false, &data, &len);
	if (m->stats.cache == CG_CACHE_HIT && !cg_objects_unpack(data, len, out))
		m->stats.cache = CG_CACHE_CORRUPT;
	if (m->stats.cache == CG_CACHE_HIT) {
		m->stats.n_functions = count_functions(m->mod);
		return true;
	}
	free(data);
	bool ok = compile_objects(m, out);
	if (ok) {
		data = cg_objects_pack(out, &len);
		if (data)
			cg_cache_store(m->cache_dir, key, false, data, len);
		free(data);
	}
	return ok;
}

bool cg_module_jit(cg_module *m)
{
	if (m->jit)
		return true;
	if (m->is_failed)
		return false;
	if (!m->mod)
		return cg_module_fail(m, "module was handed to the JIT");
	if (m->triple[0] && !cg_target_is_host(m->triple))
		return cg_module_fail(m, "code for %s cannot run on this host",
				      m->triple);
	double t0 = now_ms(), opt0 = m->stats.opt_ms;
	char first[256] = "";
	const char *name = first_exported(m->mod);
	if (name)
		snprintf(first, sizeof first, "%s", name);
	cg_objects objs = {0};
	if (!module_objects(m, &objs)) {
		cg_objects_free(&objs);
		return false;
	}
	LLVMDisposeModule(m->mod);
	m->mod = NULL;
	m->is_optimized = true;
	bool ok = create_jit(m);
	for (uint32_t i = 0; ok && i < objs.n; i++) {
		LLVMMemoryBufferRef buf =
			LLVMCreateMemoryBufferWithMemoryRangeCopy(objs.data[i],
								  objs.len[i],
								  "attnc");
		LLVMErrorRef e = LLVMOrcLLJITAddObjectFile(
			m->jit, LLVMOrcLLJITGetMainJITDylib(m->jit), buf);
		if (e)
			ok = fail_llvm_error(m, "the JIT rejected the object",
					     e);
	}
	cg_objects_free(&objs);
	if (!ok || (first[0] && !cg_module_lookup(m, first)))
		return false;
	m->stats.jit_ms = now_ms() - t0 - (m->stats.opt_ms - opt0);
	return true;
}

void cg_module_set_cache(cg_module *m, const char *dir)
{
	snprintf(m->cache_dir, sizeof m->cache_dir, "%s", dir ? dir : "");
	m->stats.cache = CG_CACHE_OFF;
}

void cg_module_set_perf_jit(cg_module *m, bool is_on)
{
	m->is_perf_jit = is_on;
}

void cg_module_set_split(cg_module *m, bool is_split)
{
	m->no_split = !is_split;
}

void cg_module_set_threads(cg_module *m, int n)
{
	m->n_threads = n < 0 ? 0 : n;
}

void *cg_module_lookup(cg_module *m, const char *name)
{
	if (m->is_failed)
		return NULL;
	if (!m->jit) {
		cg_module_fail(m, "lookup of %s before cg_module_jit", name);
		return NULL;
	}
	LLVMOrcExecutorAddress addr = 0;
	LLVMErrorRef e = LLVMOrcLLJITLookup(m->jit, &addr, name);
	if (e) {
		fail_llvm_error(m, name, e);
		return NULL;
	}
	return (void *)(uintptr_t)addr;
}

/* Emits a clone of the optimized module into a memory buffer. */
static LLVMMemoryBufferRef emit_memory(cg_module *m, cg_emit_kind kind)
{
	if (!cg_module_optimize(m))
		return NULL;
	if (!m->mod) {
		cg_module_fail(m,
			       "cannot emit: the module was handed to the JIT");
		return NULL;
	}
	if (kind == CG_EMIT_LLVM) {
		char *text = LLVMPrintModuleToString(m->mod);
		LLVMMemoryBufferRef buf =
			LLVMCreateMemoryBufferWithMemoryRangeCopy(text,
								  strlen(text),
								  "ir");
		LLVMDisposeMessage(text);
		return buf;
	}
	LLVMModuleRef clone = LLVMCloneModule(m->mod);
	LLVMMemoryBufferRef buf = NULL;
	char *msg = NULL;
	LLVMCodeGenFileType ft = kind == CG_EMIT_ASM ? LLVMAssemblyFile
						     : LLVMObjectFile;
	if (LLVMTargetMachineEmitToMemoryBuffer(m->tm, clone, ft, &msg, &buf)) {
		cg_module_fail(m, "code generation failed: %s", msg);
		LLVMDisposeMessage(msg);
		buf = NULL;
	}
	LLVMDisposeModule(clone);
	return buf;
}

bool cg_module_emit_buffer(cg_module *m, cg_emit_kind kind, char **data,
			   size_t *len)
{
	LLVMMemoryBufferRef buf = emit_memory(m, kind);
	if (!buf)
		return false;
	size_t n = LLVMGetBufferSize(buf);
	char *out = malloc(n + 1);
	if (!out) {
		LLVMDisposeMemoryBuffer(buf);
		return cg_module_fail(m, "out of memory");
	}
	memcpy(out, LLVMGetBufferStart(buf), n);
	out[n] = '\0';
	LLVMDisposeMemoryBuffer(buf);
	*data = out;
	*len = n;
	return true;
}

bool cg_module_emit(cg_module *m, cg_emit_kind kind, const char *path)
{
	LLVMMemoryBufferRef buf = emit_memory(m, kind);
	if (!buf)
		return false;
	rt_out o;
	char err[512];
	int code = rt_out_open(&o, path, err, sizeof err);
	if (code == ATTNRT_OK) {
		rt_out_write(&o, LLVMGetBufferStart(buf),
			     LLVMGetBufferSize(buf));
		code = rt_out_commit(&o, path, err, sizeof err);
	}
	LLVMDisposeMemoryBuffer(buf);
	if (code != ATTNRT_OK)
		return cg_module_fail(m, "%s", err);
	return true;
}

cg_module_stats cg_module_stats_get(const cg_module *m)
{
	return m->stats;
}

int cg_threads_get(void)
{
	return omp_get_max_threads();
}

void cg_threads_set(int n)
{
	omp_set_num_threads(n < 1 ? 1 : n);
}

/* libgomp's entry point, as generated code calls it (gcc's ABI). */
void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads,
		   unsigned flags);

static void empty_region(void *data)
{
	(void)data;
}

static double seconds_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct each_cx {
	void (*fn)(void *data, int tid, int n);
	void *data;
} each_cx;

static void each_region(void *data)
{
	const each_cx *cx = data;
	cx->fn(cx->data, omp_get_thread_num(), omp_get_num_threads());
}

void cg_threads_each(int n, void (*fn)(void *data, int tid, int n), void *data)
{
	each_cx cx = {fn, data};
	if (n <= 1) {
		fn(data, 0, 1);
		return;
	}
	GOMP_parallel(each_region, &cx, (unsigned)n, 0);
}

double cg_threads_region_seconds(int n)
{
	double t[5];
	for (int i = 0; i < 5; i++) {
		double t0 = seconds_now();
		GOMP_parallel(empty_region, NULL, (unsigned)(n < 1 ? 1 : n), 0);
		t[i] = seconds_now() - t0;
	}
	for (int i = 1; i < 5; i++) /* insertion sort, for the median */
		for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
			double x = t[j];
			t[j] = t[j - 1];
			t[j - 1] = x;
		}
	return t[2];
}
