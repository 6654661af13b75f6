/*
 * emit.c - ahead-of-time output: `-c -o NAME.o` writes a relocatable
 * object and the C header NAME.h that describes it (entry points, shapes,
 * the params block, the scratch each entry needs, the threads of the
 * static schedules, and for a model with a train block its gradient
 * function); `--emit=KIND -o FILE` writes one form (attnc IR, LLVM IR,
 * assembly or object).
 *
 * -c names the symbols NAME_<function> (or --prefix P: P_<function>), so
 * that two builds of one model link into one program, binds the symbols'
 * sizes (--load FILE: from the shapes of a checkpoint's weights), and
 * says what it bound and why.
 */
#include "driver.h"

#include "cg_header.h"
#include "cg_program.h"
#include "rt_ckpt.h"
#include "rt_file.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENTRIES 64
#define MAX_BOUND 64 /* symbols a header lists */

/* What -c writes: the program, its file names, and the origin of each
 * symbol's value for the report and the header. */
typedef struct emit_job {
	ir_ctx *ctx;
	const ir_module *m;
	const drv_options *o; /* with --load's dims among the --sym values */
	const char *obj;
	char *prefix;
	int64_t *syms;
	char bound[MAX_BOUND][512];
	const char *bound_lines[MAX_BOUND];
	uint32_t n_bound;
} emit_job;

/* NAME.o -> NAME.h; anything else gets ".h" appended. */
static char *header_path(ir_ctx *ctx, const char *obj)
{
	size_t n = strlen(obj);
	char *h = ir_alloc(ctx, n + 3);
	if (!h)
		return NULL;
	memcpy(h, obj, n);
	if (n > 2 && strcmp(obj + n - 2, ".o") == 0)
		h[n - 1] = 'h';
	else
		memcpy(h + n, ".h", 3);
	return h;
}

/* Whether entry e is a gradient function: the loss, then the gradient
 * of every parameter of the table in its order ("grad.<name>"). */
static bool is_grad_entry(const cg_header_entry *e,
			  const attnrt_param_info *table, uint32_t n_params)
{
	if (e->n_outputs != 1 + n_params)
		return false;
	for (uint32_t i = 0; i < n_params; i++) {
		const char *name = e->outputs[1 + i].name;
		if (!name || strncmp(name, "grad.", 5) != 0 ||
		    strcmp(name + 5, table[i].name) != 0)
			return false;
	}
	return true;
}

/* The entry points of p, and the most threads any static schedule of
 * theirs was built for (1 if none). */
static uint32_t fill_entries(cg_program *p, const attnrt_param_info *table,
			     uint32_t n_params, cg_header_entry *entries,
			     uint32_t n)
{
	uint32_t threads = 1;
	for (uint32_t i = 0; i < n; i++) {
		const char *name = cg_program_entry_name(p, i);
		cg_header_entry *e = &entries[i];
		e->name = name;
		e->symbol = cg_program_symbol(p, name);
		e->scratch_size = cg_program_scratch_bytes(p, name);
		e->inputs = cg_program_inputs(p, name, &e->n_inputs);
		e->outputs = cg_program_outputs(p, name, &e->n_outputs);
		e->sched_threads = cg_program_sched_of(p, name).threads;
		e->is_grad = is_grad_entry(e, table, n_params);
		if (e->sched_threads > threads)
			threads = e->sched_threads;
	}
	return threads;
}

static bool write_header(emit_job *job, cg_program *p)
{
	ir_ctx *ctx = job->ctx;
	cg_header_entry entries[MAX_ENTRIES];
	uint32_t n = cg_program_n_entries(p);
	if (n > MAX_ENTRIES)
		return ir_error(ctx, (ir_loc){0}, "too many entry points"),
		       false;
	cg_header_desc d = {
		.prefix = job->prefix,
		.source = job->o->model,
		.object = job->obj,
		.version = ATTNC_VERSION,
		.params_size = cg_program_params_bytes(p),
		.entries = entries,
		.n_entries = n,
		.bound = job->bound_lines,
		.n_bound = job->n_bound,
	};
	d.params = cg_program_params(p, &d.n_params);
	d.sched_threads = fill_entries(p, d.params, d.n_params, entries, n);
	char *path = header_path(ctx, job->obj);
	if (!path)
		return false;
	rt_out out;
	char err[256] = "";
	bool ok = rt_out_open(&out, path, err, sizeof err) == ATTNRT_OK;
	FILE *f = ok ? rt_out_stream(&out) : NULL;
	if (f && !cg_header_write(f, &d, err, sizeof err) && !out.errnum) {
		/* Not the file's fault (an I/O failure is commit's). */
		rt_out_abort(&out);
		ir_error(ctx, (ir_loc){0}, "cannot write '%s': %s", path, err);
		ok = false;
	} else if (!ok ||
		   rt_out_commit(&out, path, err, sizeof err) != ATTNRT_OK) {
		ir_error(ctx, (ir_loc){0}, "%s", err);
		ok = false;
	}
	ir_free(ctx, path);
	return ok;
}

static bool emit_kind(ir_ctx *ctx, const char *s, cg_emit_kind *kind)
{
	if (strcmp(s, "llvm") == 0)
		*kind = CG_EMIT_LLVM;
	else if (strcmp(s, "asm") == 0)
		*kind = CG_EMIT_ASM;
	else if (strcmp(s, "obj") == 0)
		*kind = CG_EMIT_OBJ;
	else
		return ir_error(ctx, (ir_loc){0},
				"--emit: unknown kind '%s' (ir, llvm, asm or obj)",
				s),
		       false;
	return true;
}

/* --emit=ir: the optimized attnc IR as text. */
static bool emit_ir(ir_ctx *ctx, const ir_module *m, const char *path)
{
	if (!path || strcmp(path, "-") == 0) {
		ir_module_print(m, stdout);
		return true;
	}
	rt_out out;
	char err[256] = "";
	if (rt_out_open(&out, path, err, sizeof err) == ATTNRT_OK) {
		FILE *f = rt_out_stream(&out);
		if (f)
			ir_module_print(m, f);
		if (rt_out_commit(&out, path, err, sizeof err) == ATTNRT_OK)
			return true;
	}
	return ir_error(ctx, (ir_loc){0}, "--emit: %s", err), false;
}

/* Text kinds without -o go to standard output. */
static bool emit_stdout(cg_program *p, cg_emit_kind kind)
{
	char *data;
	size_t len;
	if (!cg_program_emit_buffer(p, kind, &data, &len))
		return false;
	fwrite(data, 1, len, stdout);
	free(data);
	return true;
}

/* ---- -c: names, sizes and what it says ----------------------------------------------- */

/* The C prefix of the symbols: --prefix, else NAME of -o NAME.o (its
 * base name without ".o", every character that cannot be in a C
 * identifier made '_', and '_' before a leading digit). */
static char *symbol_prefix(ir_ctx *ctx, const drv_options *o, const char *obj)
{
	const char *base = strrchr(obj, '/') ? strrchr(obj, '/') + 1 : obj;
	const char *from = o->prefix ? o->prefix : base;
	size_t n = strlen(from);
	if (!o->prefix && n > 2 && strcmp(from + n - 2, ".o") == 0)
		n -= 2;
	char *p = ir_alloc(ctx, n + 2);
	if (!p)
		return NULL;
	size_t at = 0;
	if (!n || isdigit((unsigned char)from[0]))
		p[at++] = '_';
	for (size_t i = 0; i < n; i++)
		p[at++] = isalnum((unsigned char)from[i]) ? from[i] : '_';
	p[at] = '\0';
	if (o->prefix && strcmp(p, o->prefix) != 0) {
		ir_error(ctx, (ir_loc){0},
			 "--prefix: '%s' is not a C identifier", o->prefix);
		ir_free(ctx, p);
		return NULL;
	}
	return p;
}

/* Sets symbol s of m to value v as the shape of parameter name fixes it,
 * unless another parameter fixed it to something else (reported). */
static bool fix_sym(ir_ctx *ctx, const ir_module *m, const char *file,
		    const char *name, int32_t s, int64_t v, int64_t *values)
{
	if (!values[s] || values[s] == v) {
		values[s] = v;
		return true;
	}
	ir_error(ctx, (ir_loc){0},
		 "--load: %s: '%s' makes %s %lld, another "
		 "tensor %lld",
		 file, name, m->syms[s].name, (long long)v,
		 (long long)values[s]);
	return false;
}

/* The symbols the shape of parameter p's tensor in the checkpoint
 * (rank, dims) fixes; its static dims must be the model's. */
static bool dims_of_param(ir_ctx *ctx, const ir_module *m, const char *file,
			  const ir_param *p, int rank, const int64_t *dims,
			  int64_t *values)
{
	/* A parameter of a prelude function (embed's table) is reported
	 * at the model's call of it, not at the prelude's line. */
	ir_loc loc = ir_loc_user(ctx, p->loc);
	if (rank < 0) {
		ir_error(ctx, loc, "--load: %s holds no tensor '%s'", file,
			 p->name);
		return false;
	}
	if (rank != p->type.rank) {
		ir_error(ctx, loc,
			 "--load: %s: '%s' is of rank %d; the model's is of "
			 "rank %u",
			 file, p->name, rank, p->type.rank);
		return false;
	}
	for (int d = 0; d < rank; d++) {
		ir_dim dim = p->type.dims[d];
		if (ir_dim_is_static(dim) && dims[d] != dim.coef) {
			ir_error(ctx, loc,
				 "--load: %s: dim %d of '%s' is %lld; "
				 "the model's is %lld",
				 file, d, p->name, (long long)dims[d],
				 (long long)dim.coef);
			return false;
		}
		if (ir_dim_is_static(dim))
			continue;
		if (dims[d] <= 0 || dims[d] % dim.coef != 0) {
			ir_error(ctx, loc,
				 "--load: %s: dim %d of '%s' is %lld, "
				 "not a multiple of %lld",
				 file, d, p->name, (long long)dims[d],
				 (long long)dim.coef);
			return false;
		}
		if (!fix_sym(ctx, m, file, p->name, dim.sym, dims[d] / dim.coef,
			     values))
			return false;
	}
	return true;
}

/* --load FILE: the symbols the weights' shapes fix (values, 0 where
 * none does), read from the checkpoint's header, which must hold every
 * parameter of m with its static dims. */
static bool dims_from_checkpoint(ir_ctx *ctx, const ir_module *m,
				 const char *file, int64_t *values)
{
	uint32_t n = m->n_params;
	const char **names = ir_alloc(ctx, (n + 1) * sizeof *names);
	int *ranks = ir_alloc(ctx, (n + 1) * sizeof *ranks);
	int64_t(*dims)[6] = ir_alloc(ctx, (n + 1) * sizeof *dims);
	char err[512] = "";
	bool ok = names && ranks && dims;
	for (uint32_t i = 0; ok && i < n; i++)
		names[i] = m->params[i].name;
	if (ok && rt_ckpt_shapes(NULL, file, names, n, ranks, dims, err,
				 sizeof err) != ATTNRT_OK) {
		ir_error(ctx, (ir_loc){0}, "--load: %s", err);
		ok = false;
	}
	for (uint32_t i = 0; ok && i < n; i++)
		ok = dims_of_param(ctx, m, file, &m->params[i], ranks[i],
				   dims[i], values);
	ir_free(ctx, names);
	ir_free(ctx, ranks);
	ir_free(ctx, dims);
	return ok;
}

/* A --sym or --batch that gives a symbol the weights fix another value
 * (the program could not load them). */
static bool check_against_load(ir_ctx *ctx, const ir_module *m,
			       const drv_options *o, const int64_t *values)
{
	for (uint32_t i = 0; i < o->n_syms; i++) {
		int32_t s = ir_module_find_sym(m, o->syms[i].name);
		if (s >= 0 && values[s] && values[s] != o->syms[i].value) {
			ir_error(ctx, (ir_loc){0},
				 "%s %s=%lld: the weights of "
				 "--load %s make it %lld",
				 o->syms[i].opt, o->syms[i].name,
				 (long long)o->syms[i].value, o->load,
				 (long long)values[s]);
			return false;
		}
	}
	return true;
}

/* o with the dims --load's checkpoint fixes added as --sym values
 * (named "--load"), after checking the command line's agree. */
static bool options_with_load(ir_ctx *ctx, const ir_module *m,
			      const drv_options *o, drv_options *out)
{
	*out = *o;
	if (!o->load)
		return true;
	int64_t *values = ir_alloc(ctx, (m->n_syms + 1) * sizeof *values);
	bool ok = values && dims_from_checkpoint(ctx, m, o->load, values) &&
		  check_against_load(ctx, m, o, values);
	for (uint32_t s = 0; ok && s < m->n_syms; s++) {
		if (!values[s])
			continue;
		ok = out->n_syms < DRV_MAX_LIST;
		if (ok)
			out->syms[out->n_syms++] = (drv_sym_value){"--load",
								   m->syms[s].name,
								   values[s]};
		else
			ir_error(ctx, (ir_loc){0}, "too many dimensions");
	}
	ir_free(ctx, values);
	return ok;
}

/* Whether an input of f has a dim of symbol s (its example binds it). */
static bool example_binds(const ir_func *f, int32_t s)
{
	for (uint32_t i = 0; f && f->example && i < f->n_inputs; i++) {
		const ir_type *t = &f->g.nodes[f->inputs[i]].type;
		for (int d = 0; d < t->rank; d++)
			if (t->dims[d].sym == s)
				return true;
	}
	return false;
}

/* Why symbol s has its value, in drv_bind_syms's order of precedence. */
static void sym_origin(const emit_job *job, int32_t s, char *buf, size_t n)
{
	const drv_options *o = job->o;
	const ir_func *f = ir_module_default_func(job->m);
	const char *name = job->m->syms[s].name;
	if (job->m->syms[s].n_factors) {
		snprintf(buf, n, "the product of its factors");
		return;
	}
	for (uint32_t i = o->n_syms; i-- > 0;)
		if (strcmp(o->syms[i].name, name) == 0) {
			if (strcmp(o->syms[i].opt, "--load") == 0)
				snprintf(buf, n, "the weights of --load %s",
					 o->load);
			else
				snprintf(buf, n, "%s", o->syms[i].opt);
			return;
		}
	if (example_binds(f, s))
		snprintf(buf, n, "the example of %s", f->name);
	else if (strcmp(name, "B") == 0 &&
		 ir_module_find_setting(job->m, "batch"))
		snprintf(buf, n, "the train block's batch");
	else
		snprintf(buf, n,
			 "the model's default: --sym %s=N or --load to "
			 "change it",
			 name);
}

/* The lines "B = 64 (the train block's batch)" of every symbol the
 * model uses (one nothing uses has no value to tell); past MAX_BOUND - 1
 * of them, a last line counts the rest. */
static bool describe_bound(emit_job *job)
{
	const ir_module *m = job->m;
	bool *used = ir_alloc(job->ctx, (m->n_syms + 1) * sizeof *used);
	if (!used)
		return false;
	ir_module_used_syms(m, used);
	uint32_t n_used = 0;
	for (uint32_t s = 0; s < m->n_syms; s++)
		n_used += used[s];
	job->n_bound = 0;
	for (uint32_t s = 0; s < m->n_syms; s++) {
		if (!used[s])
			continue;
		char *line = job->bound[job->n_bound];
		if (job->n_bound == MAX_BOUND - 1 && n_used > MAX_BOUND) {
			snprintf(line, sizeof job->bound[0],
				 "... and %u more symbols",
				 n_used - job->n_bound);
			job->bound_lines[job->n_bound++] = line;
			break;
		}
		char why[300];
		sym_origin(job, (int32_t)s, why, sizeof why);
		snprintf(line, sizeof job->bound[0], "%s = %lld (%s)",
			 m->syms[s].name, (long long)job->syms[s], why);
		job->bound_lines[job->n_bound++] = line;
	}
	ir_free(job->ctx, used);
	return true;
}

/* Says what -c wrote: the files, the symbols, the sizes, the threads. */
static void report(const emit_job *job, cg_program *p)
{
	char *h = header_path(job->ctx, job->obj);
	printf("wrote %s and %s:", job->obj, h ? h : "its header");
	ir_free(job->ctx, h);
	uint32_t threads = 1;
	for (uint32_t i = 0; i < cg_program_n_entries(p); i++) {
		const char *name = cg_program_entry_name(p, i);
		uint32_t t = cg_program_sched_of(p, name).threads;
		printf("%s%s", i ? ", " : " ", cg_program_symbol(p, name));
		threads = t > threads ? t : threads;
	}
	printf("\n");
	for (uint32_t i = 0; i < job->n_bound; i++)
		printf("  %s\n", job->bound_lines[i]);
	if (threads > 1)
		printf("  static schedules for %u threads (run.n_threads; "
		       "--threads N to build for N)\n",
		       threads);
	else
		printf("  no static schedule (one thread)\n");
}

/* -c: the object, the header and the report. */
static bool compile_only(ir_ctx *ctx, const ir_module *m, const drv_options *o,
			 const char *out)
{
	drv_options lo;
	emit_job job = {.ctx = ctx, .m = m, .o = &lo, .obj = out};
	cg_program *p = NULL;
	bool ok = false;
	job.syms = ir_alloc(ctx, (m->n_syms + 1) * sizeof *job.syms);
	if (!job.syms || !options_with_load(ctx, m, o, &lo) ||
	    !(job.prefix = symbol_prefix(ctx, o, out)) ||
	    !drv_bind_syms(ctx, m, ir_module_default_func(m), &lo, true, false,
			   job.syms))
		goto done;
	cg_program_options po = drv_program_options(o);
	po.prefix = job.prefix;
	p = cg_program_create(ctx, m, job.syms, &po);
	if (!p || !cg_program_emit(p, CG_EMIT_OBJ, out))
		goto done;
	ok = describe_bound(&job) && write_header(&job, p);
	if (ok)
		report(&job, p);
done:
	cg_program_destroy(p);
	ir_free(ctx, job.syms);
	ir_free(ctx, job.prefix);
	return ok;
}

bool drv_emit(ir_ctx *ctx, const ir_module *m, const drv_options *o)
{
	if (o->emit && strcmp(o->emit, "ir") == 0)
		return emit_ir(ctx, m, o->output);
	cg_emit_kind kind = CG_EMIT_OBJ;
	if (o->emit && !emit_kind(ctx, o->emit, &kind))
		return false;
	const char *out = o->output;
	char *default_out = NULL;
	if (!out && (o->compile_only || kind == CG_EMIT_OBJ)) {
		size_t n = strlen(m->name);
		default_out = ir_alloc(ctx, n + 3);
		if (!default_out)
			return false;
		memcpy(default_out, m->name, n);
		memcpy(default_out + n, ".o", 3);
		out = default_out;
	}
	if (o->compile_only) {
		bool ok = compile_only(ctx, m, o, out);
		ir_free(ctx, default_out);
		return ok;
	}
	int64_t *syms = ir_alloc(ctx, (m->n_syms + 1) * sizeof *syms);
	cg_program *p = NULL;
	bool ok = false;
	if (!syms || !drv_bind_syms(ctx, m, ir_module_default_func(m), o, true,
				    false, syms))
		goto done;
	cg_program_options po = drv_program_options(o);
	p = cg_program_create(ctx, m, syms, &po);
	ok = p && (out && strcmp(out, "-") != 0 ? cg_program_emit(p, kind, out)
						: emit_stdout(p, kind));
done:
	cg_program_destroy(p);
	ir_free(ctx, syms);
	ir_free(ctx, default_out);
	return ok;
}
