/*
 * cg_program.c - the program object (cg_program.h): binds the module's
 * symbols, lays out the parameter block, has each wanted exported
 * function's entry point generated (cg_lower_entry.c) into one
 * cg_module, and compiles it (JIT or emit); then answers the queries
 * about what it made (entry points, tensor tables, scratch sizes, kernel
 * counts, schedules, profiles).
 */
#include "cg_entry.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* CPU time of the whole process (every thread), in milliseconds. */
static double cpu_now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static uint64_t round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* ---- symbols and parameters --------------------------------------------- */

static bool bind_syms(cg_program *p, const int64_t *sym_values)
{
	const ir_module *m = p->m;
	p->syms = ir_alloc(p->ctx, (m->n_syms + 1) * sizeof *p->syms);
	if (!p->syms)
		return false;
	bool ok = true;
	for (uint32_t i = 0; i < m->n_syms; i++)
		p->syms[i] = sym_values && sym_values[i] > 0
				     ? sym_values[i]
				     : m->syms[i].fallback;
	ir_module_derive_syms(m, p->syms); /* B*T from B and T */
	for (uint32_t i = 0; i < m->n_syms; i++) {
		int64_t v = p->syms[i];
		if (v <= 0) {
			ir_error(p->ctx, m->syms[i].loc,
				 "codegen: symbol '%s' has no value (give one, "
				 "or a fallback with `dim %s = N`)",
				 m->syms[i].name, m->syms[i].name);
			ok = false;
		}
	}
	return ok && ir_module_check_limits(p->ctx, m, p->syms);
}

static attnrt_init abi_init(ir_init_kind k)
{
	switch (k) {
	case IR_INIT_ZEROS:
		return ATTNRT_INIT_ZEROS;
	case IR_INIT_ONES:
		return ATTNRT_INIT_ONES;
	case IR_INIT_NORMAL:
		return ATTNRT_INIT_NORMAL;
	case IR_INIT_UNIFORM:
		return ATTNRT_INIT_UNIFORM;
	case IR_INIT_XAVIER_UNIFORM:
		return ATTNRT_INIT_XAVIER_UNIFORM;
	}
	return ATTNRT_INIT_ZEROS;
}

static bool layout_params(cg_program *p, const cg_lower *L)
{
	const ir_module *m = p->m;
	p->params = ir_alloc(p->ctx, (m->n_params + 1) * sizeof *p->params);
	if (!p->params)
		return false;
	size_t at = 0;
	for (uint32_t i = 0; i < m->n_params; i++) {
		const ir_param *pa = &m->params[i];
		attnrt_param_info *pi = &p->params[i];
		pi->name = pa->name;
		pi->offset = at;
		pi->rank = cg_lower_dims(L, &pa->type, pi->dims);
		pi->init = abi_init(pa->init);
		pi->a = pa->a;
		pi->b = pa->b;
		/* The frontend and the IR reader bound each tensor; this also
		 * bounds the sum, which must never wrap to a small size. */
		int64_t n = cg_lower_numel(L, &pa->type);
		if (n < 0 || n > IR_MAX_NUMEL ||
		    __builtin_add_overflow(at, cg_lower_bytes(L, &pa->type),
					   &at) ||
		    at > ((size_t)1 << 62)) {
			ir_error(p->ctx, pa->loc,
				 "parameter @%s is too large, or "
				 "the parameters together are",
				 pa->name);
			return false;
		}
		at = round_up(at, ATTNRT_ALIGN);
	}
	p->params_bytes = at;
	return true;
}

/* ---- the program ------------------------------------------------------------------ */

static bool module_failed(cg_program *p)
{
	const char *msg = p->cm ? cg_module_error(p->cm) : "out of memory";
	if (!msg)
		return false;
	ir_error(p->ctx, (ir_loc){0}, "codegen: %s", msg);
	return true;
}

/* Whether opts asks for function f. */
static bool wanted(const cg_program_options *opts, const ir_func *f)
{
	if (!f->is_export)
		return false;
	if (!opts || !opts->only)
		return true;
	for (uint32_t i = 0; i < opts->n_only; i++)
		if (strcmp(opts->only[i], f->name) == 0)
			return true;
	return false;
}

static bool lower_all(cg_program *p, const cg_program_options *opts)
{
	const ir_module *m = p->m;
	const char *prefix = opts && opts->prefix ? opts->prefix : m->name;
	cg_lower L = {p->ctx, m,    p->syms, p->cm, cg_module_llvm(p->cm),
		      0,      0,    0,       false, false,
		      NULL,   NULL, NULL,    0,     0,
		      0};
	L.vw = opts && (opts->vector_width == 8 || opts->vector_width == 16)
		       ? (unsigned)opts->vector_width
		       : (unsigned)cg_cpu_vector_width(
				 opts && opts->triple && !opts->cpu
					 ? cg_target_default_cpu(opts->triple)
				 : opts ? opts->cpu
					: NULL);
	L.keep_zero_rows = opts && opts->keep_zero_rows;
	L.no_attn_cache = opts && opts->no_attn_cache;
	if (!(opts && opts->no_row_skip)) {
		snprintf(p->row_skip_name, sizeof p->row_skip_name,
			 "%s.row_skip", prefix);
		LLVMTypeRef i32 = LLVMInt32TypeInContext(
			LLVMGetModuleContext(L.mod));
		L.row_skip = LLVMAddGlobal(L.mod, i32, p->row_skip_name);
		LLVMSetInitializer(L.row_skip, LLVMConstInt(i32, 0, 0));
	}
	L.gemm_min = !opts || opts->gemm_min == 0 ? CG_PROGRAM_GEMM_MIN_DEFAULT
		     : opts->gemm_min < 0         ? INT64_MAX
						  : opts->gemm_min;
	if (!L.mod)
		return false;
	if (!layout_params(p, &L))
		return false;
	if (p->is_profiled) {
		snprintf(p->clock_name, sizeof p->clock_name,
			 "%s.profile_clock", prefix);
		cg_profile_clock_fn(&L, p->clock_name);
	}
	for (uint32_t i = 0; i < m->n_funcs; i++)
		p->n_entries += wanted(opts, m->funcs[i]);
	p->entries = ir_alloc(p->ctx, (p->n_entries + 1) * sizeof *p->entries);
	p->consts = ir_alloc(p->ctx, (m->n_consts + 1) * sizeof *p->consts);
	if (!p->entries || !p->consts)
		return false;
	uint32_t k = 0;
	bool ok = true;
	for (uint32_t i = 0; i < m->n_funcs; i++)
		if (wanted(opts, m->funcs[i])) {
			p->entries[k].fn = m->funcs[i];
			ok = cg_entry_lower(p, &L, &p->entries[k++], prefix) &&
			     ok;
		}
	/* No product reads the switch, or too few of its multiply-adds for
	 * the driver's check before each step (~1% of a book model's step)
	 * to pay: the program has none, and its products compute every row. */
	if (!L.n_row_skip || L.row_skip_macs < CG_ROW_SKIP_MIN_SHARE * L.macs)
		p->row_skip_name[0] = 0;
	return ok;
}

cg_program *cg_program_create(ir_ctx *ctx, const ir_module *m,
			      const int64_t *sym_values,
			      const cg_program_options *opts)
{
	double t0 = now_ms(), cpu0 = cpu_now_ms();
	cg_program *p = ir_alloc(ctx, sizeof *p);
	if (!p) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return NULL;
	}
	p->ctx = ctx;
	p->m = m;
	p->grain = opts && opts->grain > 0 ? opts->grain
					   : CG_PROGRAM_GRAIN_DEFAULT;
	p->is_serial = opts && opts->is_serial;
	p->no_fuse = opts && opts->no_fuse;
	p->is_profiled = opts && opts->is_profiled;
	int st = opts ? opts->sched_threads : 0;
	if (st == 0)
		st = cg_threads_get();
	p->sched_threads = p->is_serial || st < 2
				   ? 1
				   : (uint32_t)(st < CG_PROGRAM_SCHED_MAX
							? st
							: CG_PROGRAM_SCHED_MAX);
	int before = ctx->n_errors;
	bool ok = bind_syms(p, sym_values);
	if (ok) {
		p->cm = cg_module_create_target(m->name,
						opts ? opts->triple : NULL,
						opts ? opts->cpu : NULL);
		if (p->cm && opts) {
			cg_module_set_cache(p->cm, opts->cache_dir);
			cg_module_set_split(p->cm, !opts->no_split);
			cg_module_set_perf_jit(p->cm, opts->is_perf_jit);
		}
		if (p->cm) /* --threads 1: no thread, the compile's included */
			cg_module_set_threads(p->cm,
					      (int)p->sched_threads > 1 ? 0 : 1);
		ok = p->cm && !module_failed(p) && lower_all(p, opts) &&
		     !module_failed(p);
	}
	if (!ok) {
		if (ctx->n_errors == before)
			ir_error(ctx, (ir_loc){0}, "codegen: out of memory");
		cg_program_destroy(p);
		return NULL;
	}
	p->build_ms = now_ms() - t0;
	p->cpu_ms = cpu_now_ms() - cpu0;
	return p;
}

void cg_program_destroy(cg_program *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; p->entries && i < p->n_entries; i++) {
		ir_free(p->ctx, p->entries[i].inputs);
		ir_free(p->ctx, p->entries[i].outputs);
		ir_free(p->ctx, p->entries[i].sites);
		cg_scratch_peak_fini(p->ctx, &p->entries[i].peak);
	}
	cg_module_destroy(p->cm);
	ir_free(p->ctx, p->entries);
	ir_free(p->ctx, p->consts);
	cg_kernel_built_fini(p);
	ir_free(p->ctx, p->params);
	ir_free(p->ctx, p->syms);
	ir_free(p->ctx, p);
}

/* The profiled program's counters and clock, after the JIT. */
static bool profile_lookup(cg_program *p)
{
	char name[300];
	for (uint32_t i = 0; i < p->n_entries; i++) {
		snprintf(name, sizeof name, "%s.profile", p->entries[i].symbol);
		p->entries[i].counters = cg_module_lookup(p->cm, name);
		if (!p->entries[i].counters)
			return !module_failed(p);
	}
	void *fp = cg_module_lookup(p->cm, p->clock_name);
	if (!fp)
		return !module_failed(p);
	memcpy(&p->clock, &fp, sizeof fp);
	return true;
}

bool cg_program_jit(cg_program *p)
{
	double cpu0 = cpu_now_ms();
	bool ok = cg_module_jit(p->cm);
	p->cpu_ms += cpu_now_ms() - cpu0;
	if (!ok) {
		module_failed(p);
		return false;
	}
	for (uint32_t i = 0; i < p->n_entries; i++) {
		void *fp = cg_module_lookup(p->cm, p->entries[i].symbol);
		if (!fp) {
			module_failed(p);
			return false;
		}
		/* An object pointer to a function pointer: POSIX guarantees
		 * the round trip (as for dlsym). */
		memcpy(&p->entries[i].entry, &fp, sizeof fp);
	}
	if (p->row_skip_name[0]) {
		p->row_skip = cg_module_lookup(p->cm, p->row_skip_name);
		if (!p->row_skip) {
			module_failed(p);
			return false;
		}
	}
	return !p->is_profiled || profile_lookup(p);
}

bool cg_program_emit(cg_program *p, cg_emit_kind kind, const char *path)
{
	if (cg_module_emit(p->cm, kind, path))
		return true;
	module_failed(p);
	return false;
}

bool cg_program_emit_buffer(cg_program *p, cg_emit_kind kind, char **data,
			    size_t *len)
{
	if (cg_module_emit_buffer(p->cm, kind, data, len))
		return true;
	module_failed(p);
	return false;
}

/* ---- queries ------------------------------------------------------------------------ */

static const cg_entry *find_entry(const cg_program *p, const char *func)
{
	for (uint32_t i = 0; i < p->n_entries; i++)
		if (strcmp(p->entries[i].fn->name, func) == 0)
			return &p->entries[i];
	return NULL;
}

uint32_t cg_program_n_entries(const cg_program *p)
{
	return p->n_entries;
}

const char *cg_program_entry_name(const cg_program *p, uint32_t i)
{
	return i < p->n_entries ? p->entries[i].fn->name : NULL;
}

const char *cg_program_symbol(const cg_program *p, const char *func)
{
	const cg_entry *e = find_entry(p, func);
	return e ? e->symbol : NULL;
}

bool cg_program_set_row_skip(cg_program *p, bool on)
{
	if (!p->row_skip)
		return false;
	*p->row_skip = on;
	return true;
}

attnrt_entry_fn cg_program_entry(const cg_program *p, const char *func)
{
	const cg_entry *e = find_entry(p, func);
	return e ? e->entry : NULL;
}

const cg_scratch_peak *cg_program_scratch_peak(const cg_program *p,
					       const char *func)
{
	const cg_entry *e = find_entry(p, func);
	return e ? &e->peak : NULL;
}

size_t cg_program_scratch_bytes(const cg_program *p, const char *func)
{
	const cg_entry *e = find_entry(p, func);
	return e ? e->scratch_bytes : 0;
}

size_t cg_program_params_bytes(const cg_program *p)
{
	return p->params_bytes;
}

const attnrt_param_info *cg_program_params(const cg_program *p, uint32_t *n)
{
	*n = p->m->n_params;
	return p->params;
}

const attnrt_tensor_info *cg_program_inputs(const cg_program *p,
					    const char *func, uint32_t *n)
{
	const cg_entry *e = find_entry(p, func);
	*n = e ? e->fn->n_inputs : 0;
	return e ? e->inputs : NULL;
}

const attnrt_tensor_info *cg_program_outputs(const cg_program *p,
					     const char *func, uint32_t *n)
{
	const cg_entry *e = find_entry(p, func);
	*n = e ? e->fn->n_outputs : 0;
	return e ? e->outputs : NULL;
}

uint32_t cg_program_n_kernels(const cg_program *p)
{
	return p->n_kernels;
}

uint32_t cg_program_n_parallel(const cg_program *p)
{
	return p->n_parallel;
}

uint32_t cg_program_n_fused(const cg_program *p)
{
	return p->n_fused;
}

uint32_t cg_program_n_calls(const cg_program *p, const char *func)
{
	const cg_entry *e = find_entry(p, func);
	return e ? e->n_calls : 0;
}

cg_program_sched cg_program_sched_of(const cg_program *p, const char *func)
{
	const cg_entry *e = find_entry(p, func);
	return e ? e->sched : (cg_program_sched){0};
}

cg_module_stats cg_program_stats(const cg_program *p)
{
	return cg_module_stats_get(p->cm);
}

double cg_program_build_ms(const cg_program *p)
{
	return p->build_ms;
}

double cg_program_cpu_ms(const cg_program *p)
{
	return p->cpu_ms;
}

const cg_profile_site *cg_program_profile_sites(const cg_program *p,
						const char *func, uint32_t *n)
{
	const cg_entry *e = find_entry(p, func);
	*n = e && e->sites ? e->n_sites : 0;
	return e ? e->sites : NULL;
}

uint64_t *cg_program_profile_counters(const cg_program *p, const char *func)
{
	const cg_entry *e = find_entry(p, func);
	return e ? e->counters : NULL;
}

uint64_t cg_program_profile_clock(const cg_program *p)
{
	return p->clock ? p->clock() : 0;
}
