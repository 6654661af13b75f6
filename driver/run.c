/*
 * run.c - running a model's entry point on its example inputs: under the
 * reference interpreter (--interp) or as native code through the JIT
 * (--jit), printing the outputs the same way; and the set-up of native
 * code that training shares: binding the symbols, compiling, the params
 * block and its checkpoints.
 */
#include "driver.h"

#include "passes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <sys/resource.h>
#include <time.h>

const ir_func *drv_entry(ir_ctx *ctx, const ir_module *m, const drv_options *o,
			 bool needs_example)
{
	const ir_func *f = o->entry ? ir_module_find_func(m, o->entry)
				    : ir_module_default_func(m);
	if (!f) {
		if (o->entry)
			ir_error(ctx, (ir_loc){0},
				 "--entry: model %s has no function '%s'",
				 m->name, o->entry);
		else
			ir_error(ctx, (ir_loc){0},
				 "model %s exports no function", m->name);
		return NULL;
	}
	if (needs_example && !f->example && f->n_inputs) {
		ir_error(ctx, f->loc,
			 "'%s' has no example inputs to run on "
			 "(add an `example %s(...)` line)",
			 f->name, f->name);
		return NULL;
	}
	return f;
}

void drv_example_inputs(const ir_module *m, const ir_func *f, interp_tensor *in)
{
	for (uint32_t i = 0; i < f->n_inputs; i++) {
		const ir_const *c = &m->consts[f->example[i]];
		memset(&in[i], 0, sizeof in[i]);
		in[i].dtype = c->type.dtype;
		in[i].rank = c->type.rank;
		for (int d = 0; d < c->type.rank; d++)
			in[i].dims[d] = c->type.dims[d].coef;
		in[i].data = c->data;
	}
}

/* Binds the symbols the example inputs of f fix, where values has none. */
static bool bind_from_example(ir_ctx *ctx, const ir_module *m, const ir_func *f,
			      int64_t *values)
{
	interp_tensor *in = ir_alloc(ctx, f->n_inputs * sizeof *in);
	int64_t *from_example = ir_alloc(ctx, (m->n_syms + 1) *
						      sizeof *from_example);
	bool ok = in && from_example;
	if (ok) {
		drv_example_inputs(m, f, in);
		ok = interp_bind_syms(ctx, m, f, in, from_example);
	}
	for (uint32_t s = 0; ok && s < m->n_syms; s++)
		if (!values[s])
			values[s] = from_example[s];
	ir_free(ctx, in);
	ir_free(ctx, from_example);
	return ok;
}

/* B from the train block's batch, where values has none. */
static void bind_batch(const ir_module *m, int64_t *values)
{
	const ir_setting *batch = ir_module_find_setting(m, "batch");
	int32_t b = ir_module_find_sym(m, "B");
	if (b >= 0 && !values[b] && batch && batch->value.kind == IR_VAL_NUM)
		values[b] = (int64_t)batch->value.num;
}

/* The symbol that --sym (or --batch) value i of o names, or -1 after
 * reporting a name the model lacks or a product of symbols. */
static int32_t option_sym(ir_ctx *ctx, const ir_module *m, const drv_options *o,
			  uint32_t i)
{
	int32_t s = ir_module_find_sym(m, o->syms[i].name);
	if (s >= 0 && m->syms[s].n_factors) {
		ir_error(ctx, (ir_loc){0},
			 "%s: dimension '%s' is a product; give its factors",
			 o->syms[i].opt, o->syms[i].name);
		return -1;
	}
	if (s < 0)
		ir_error(ctx, (ir_loc){0}, "%s: model %s has no dimension '%s'",
			 o->syms[i].opt, m->name, o->syms[i].name);
	return s;
}

bool drv_syms_as_fallbacks(ir_ctx *ctx, ir_module *m, const drv_options *o)
{
	for (uint32_t i = 0; i < o->n_syms; i++) {
		int32_t s = option_sym(ctx, m, o, i);
		if (s < 0)
			return false;
		m->syms[s].fallback = o->syms[i].value;
	}
	return true;
}

bool drv_syms_agree(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		    const char *from, const int64_t *values)
{
	for (uint32_t i = 0; i < o->n_syms; i++) {
		int32_t s = ir_module_find_sym(m, o->syms[i].name);
		if (s < 0 || values[s] == o->syms[i].value)
			continue;
		ir_error(ctx, (ir_loc){0}, "%s %s=%lld, but %s give %s=%lld",
			 o->syms[i].opt, o->syms[i].name,
			 (long long)o->syms[i].value, from, o->syms[i].name,
			 (long long)values[s]);
		return false;
	}
	return true;
}

bool drv_bind_syms(ir_ctx *ctx, const ir_module *m, const ir_func *f,
		   const drv_options *o, bool is_strict, bool is_batch_first,
		   int64_t *values)
{
	memset(values, 0, m->n_syms * sizeof *values);
	for (uint32_t i = 0; i < o->n_syms; i++) {
		int32_t s = option_sym(ctx, m, o, i);
		if (s < 0)
			return false;
		values[s] = o->syms[i].value;
	}
	if (is_batch_first)
		bind_batch(m, values);
	if (f && f->example && f->n_inputs &&
	    !bind_from_example(ctx, m, f, values))
		return false;
	bind_batch(m, values);
	bool *used = NULL;
	if (is_strict) {
		used = ir_alloc(ctx, (m->n_syms + 1) * sizeof *used);
		if (!used)
			return false;
		ir_module_used_syms(m, used);
	}
	for (uint32_t s = 0; s < m->n_syms; s++) {
		if (m->syms[s].n_factors)
			continue; /* a product of others: derived below */
		if (!values[s])
			values[s] = m->syms[s].fallback;
		if (values[s])
			continue;
		if (is_strict && used[s]) {
			ir_free(ctx, used);
			ir_error(ctx, m->syms[s].loc,
				 "dimension '%s' has no value: give "
				 "--sym %s=N%s",
				 m->syms[s].name, m->syms[s].name,
				 strcmp(m->syms[s].name, "B") ? ""
							      : " or --batch N");
			return false;
		}
		values[s] = 1;
	}
	ir_free(ctx, used);
	ir_module_derive_syms(m, values);
	return ir_module_check_limits(ctx, m, values);
}

bool drv_options_bind(ir_ctx *ctx, drv_options *o, const char *opt,
		      const char *name, int64_t value)
{
	uint32_t i = 0;
	while (i < o->n_syms && strcmp(o->syms[i].name, name) != 0)
		i++;
	if (i == DRV_MAX_LIST) {
		ir_error(ctx, (ir_loc){0}, "--sym: at most %d dimensions",
			 DRV_MAX_LIST);
		return false;
	}
	o->syms[i] = (drv_sym_value){opt, name, value};
	o->n_syms += i == o->n_syms;
	return true;
}

const char *drv_io_name(const char *const *names, uint32_t i,
			const char *prefix, char *buf, size_t size)
{
	if (names && names[i])
		return names[i];
	snprintf(buf, size, "%s%u", prefix, i);
	return buf;
}

void drv_print_outputs(const ir_func *f, const interp_tensor *outs)
{
	char buf[32];
	for (uint32_t i = 0; i < f->n_outputs; i++) {
		printf("%s: ",
		       drv_io_name(f->output_names, i, "out", buf, sizeof buf));
		interp_tensor_print(&outs[i], stdout);
		putchar('\n');
	}
}

static bool wants_pictures(const drv_options *o)
{
	return o->plot || o->heatmap;
}

/* The entry's inputs: from --inputs (owned: *is_owned), else its
 * example (borrowed). */
static bool entry_inputs(ir_ctx *ctx, const ir_module *m, const ir_func *f,
			 const drv_options *o, interp_tensor *in, bool *is_owned)
{
	*is_owned = o->inputs != NULL;
	if (o->inputs)
		return drv_inputs_read(ctx, f, o->inputs, in);
	drv_example_inputs(m, f, in);
	return true;
}

static void inputs_fini(ir_ctx *ctx, const ir_func *f, interp_tensor *in,
			bool is_owned)
{
	for (uint32_t i = 0; is_owned && i < f->n_inputs; i++)
		interp_tensor_fini(ctx, &in[i]);
}

/* Prints the outputs, or writes them to --outputs. */
static bool put_outputs(ir_ctx *ctx, const ir_module *m, const ir_func *f,
			const drv_options *o, const interp_tensor *outs)
{
	if (o->outputs)
		return drv_outputs_write(ctx, m, f, outs, o->outputs);
	drv_print_outputs(f, outs);
	return true;
}

bool drv_run_interp(ir_ctx *ctx, const ir_module *m, const drv_options *o)
{
	const ir_func *f = drv_entry(ctx, m, o, !o->inputs);
	if (!f)
		return false;
	bool ok = false, is_owned = false;
	uint32_t n_in = f->n_inputs, n_out = f->n_outputs, n_par = m->n_params;
	interp_tensor *in = ir_alloc(ctx,
				     (n_in + n_out + n_par + 1) * sizeof *in);
	int64_t *syms = ir_alloc(ctx, (m->n_syms + 1) * sizeof *syms);
	if (!in || !syms)
		goto out;
	interp_tensor *outs = in + n_in, *params = outs + n_out;
	if (!entry_inputs(ctx, m, f, o, in, &is_owned))
		goto out;
	interp_opts opts = {.is_f64 = o->f64, .seed = o->seed};
	if (!interp_bind_syms(ctx, m, f, in, syms) ||
	    !drv_syms_agree(ctx, m, o,
			    o->inputs ? "the --inputs" : "the example inputs",
			    syms) ||
	    !interp_params_init(ctx, m, syms, o->seed, o->f64, params) ||
	    !interp_run(ctx, m, f, &opts, params, in, outs) ||
	    !put_outputs(ctx, m, f, o, outs))
		goto out;
	drv_exec e = {ctx, m, o, params, NULL};
	ok = !wants_pictures(o) || drv_pictures(&e, NULL, 0);
out:
	if (in) {
		inputs_fini(ctx, f, in, is_owned);
		for (uint32_t i = 0; i < n_out + n_par; i++)
			interp_tensor_fini(ctx, &in[n_in + i]);
	}
	ir_free(ctx, in);
	ir_free(ctx, syms);
	return ok;
}

/* ---- the JIT ------------------------------------------------------------------- */

/* Loads the parameters from --load, or initializes them from --seed. */
static bool params_fill(ir_ctx *ctx, cg_program *p, const drv_options *o,
			void *params)
{
	uint32_t n;
	const attnrt_param_info *table = cg_program_params(p, &n);
	char err[512];
	int rc = o->load ? attnrt_checkpoint_load(NULL, o->load, table, n,
						  params, err, sizeof err)
			 : attnrt_params_init(table, n, params, o->seed);
	if (rc == ATTNRT_OK)
		return true;
	if (o->load)
		ir_error(ctx, (ir_loc){0}, "--load: %s", err);
	else
		ir_error(ctx, (ir_loc){0}, "initializing parameters: %s",
			 attnrt_strerror(rc));
	return false;
}

bool drv_jit_save(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		  const drv_jit *j)
{
	uint32_t n;
	const attnrt_param_info *table = cg_program_params(j->p, &n);
	char err[512];
	attnrt_meta meta[] = {{"model", m->name},
			      {"format", "attnc"},
			      {"vocab", j->vocab}};
	if (attnrt_checkpoint_save(NULL, o->save, table, n, j->params, meta,
				   j->vocab ? 3 : 2, err,
				   sizeof err) == ATTNRT_OK)
		return true;
	ir_error(ctx, (ir_loc){0}, "--save: %s", err);
	return false;
}

void drv_report_run_error(ir_ctx *ctx, const cg_program *p, const ir_func *f,
			  int rc)
{
	uint32_t node = (uint32_t)rc >> 8;
	if ((rc & 0xff) == ATTNRT_ERR_OVERLAP) {
		ir_error(ctx, (ir_loc){0}, "%s: output %u (%s): %s", f->name,
			 node,
			 node < f->n_outputs && f->output_names &&
					 f->output_names[node]
				 ? f->output_names[node]
				 : "?",
			 attnrt_strerror(rc));
		return;
	}
	bool is_node = node < f->g.n_nodes;
	ir_loc loc = is_node ? f->g.nodes[node].loc : (ir_loc){0};
	/* A gradient's op, at the line of the op it differentiates, is
	 * named as that op: cross_entropy_with_grad as cross_entropy. */
	ir_op diff = is_node ? ir_op_differentiated(f->g.nodes[node].op)
			     : IR_OP_COUNT;
	const char *op = is_node ? ir_op_table[diff].name : f->name;
	int64_t index, bound;
	if ((rc & 0xff) != ATTNRT_ERR_INDEX)
		ir_error(ctx, loc, "%s: %s at run time", op,
			 attnrt_strerror(rc & 0xff));
	else if (cg_program_index_error(p, &index, &bound)) /* as interp's */
		ir_error(ctx, loc, "%s: %s %lld out of range [0, %lld)", op,
			 diff == IR_OP_CROSS_ENTROPY ? "label" : "index",
			 (long long)index, (long long)bound);
	else
		ir_error(ctx, loc, "%s: an index is out of range at run time",
			 op);
}

double drv_now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double drv_peak_rss_mib(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB */
}

bool drv_env_is_on(const char *name)
{
	const char *v = getenv(name);
	return v && *v && strcmp(v, "0") != 0;
}

const char *drv_loc_file(const ir_ctx *ctx, ir_loc loc)
{
	return loc.file && loc.file < ctx->n_files ? ctx->files[loc.file].name
						   : "?";
}

void drv_cache_resolve(drv_options *o)
{
	o->cache_dir[0] = '\0';
	if (o->no_cache || drv_env_is_on("ATTNC_NO_CACHE"))
		return;
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int n = 0;
	if (xdg && xdg[0] == '/')
		n = snprintf(o->cache_dir, sizeof o->cache_dir, "%s/attnc", xdg);
	else if (home && home[0] == '/')
		n = snprintf(o->cache_dir, sizeof o->cache_dir,
			     "%s/.cache/attnc", home);
	if (n < 0 || (size_t)n >= sizeof o->cache_dir)
		o->cache_dir[0] = '\0'; /* too long: no cache */
}

cg_program_options drv_program_options(const drv_options *o)
{
	pass_options po = {.disabled = o->disabled,
			   .n_disabled = o->n_disabled,
			   .no_fuse = o->no_fuse};
	return (cg_program_options){
		.no_fuse = !pass_is_enabled(&po, "fuse_elementwise"),
		.sched_threads = o->threads,
		.cpu = o->mcpu,
		.is_profiled = o->profile,
		.triple = o->target,
		.cache_dir = o->cache_dir,
		.is_perf_jit = drv_env_is_on("ATTNC_PERF_JIT")};
}

/* Writes `"kernel_calls": {"fn": N, ...}, "scratch_bytes": {...}` for
 * every entry point of p. */
static void print_entries(const cg_program *p, char *buf, size_t size)
{
	size_t at = 0;
	for (int pass = 0; pass < 2 && at < size; pass++) {
		at += (size_t)snprintf(buf + at, size - at, "%s\"%s\": {",
				       pass ? ", " : "",
				       pass ? "scratch_bytes" : "kernel_calls");
		for (uint32_t i = 0; i < cg_program_n_entries(p) && at < size;
		     i++) {
			const char *fn = cg_program_entry_name(p, i);
			unsigned long long v =
				pass ? (unsigned long long)
						cg_program_scratch_bytes(p, fn)
				     : cg_program_n_calls(p, fn);
			at += (size_t)snprintf(buf + at, size - at,
					       "%s\"%s\": %llu", i ? ", " : "",
					       fn, v);
		}
		if (at < size)
			at += (size_t)snprintf(buf + at, size - at, "}");
	}
	/* The static schedules: threads, tasks, waits, and the estimated
	 * time of the schedule over that of its kernels one by one. */
	bool first = true;
	for (uint32_t i = 0; i < cg_program_n_entries(p) && at < size; i++) {
		const char *fn = cg_program_entry_name(p, i);
		cg_program_sched sc = cg_program_sched_of(p, fn);
		if (!sc.threads)
			continue;
		at += (size_t)
			snprintf(buf + at, size - at,
				 "%s\"%s\": {\"threads\": %u, \"tasks\": %u, "
				 "\"waits\": %u, \"estimated_speedup\": %.2f}",
				 first ? ", \"schedules\": {" : ", ", fn,
				 sc.threads, sc.tasks, sc.waits,
				 sc.cycles / sc.makespan);
		first = false;
	}
	if (!first && at < size)
		at += (size_t)snprintf(buf + at, size - at, "}");
}

void drv_print_jit_stats(const ir_module *m, cg_program *p)
{
	cg_module_stats s = cg_program_stats(p);
	static const char *const cache[] = {"off", "miss", "hit", "corrupt"};
	char extra[4096], calls[3584];
	print_entries(p, calls, sizeof calls);
	snprintf(extra, sizeof extra,
		 "\"compile_ms\": %.1f, \"compile_cpu_ms\": %.1f, "
		 "\"build_ms\": %.1f, \"opt_ms\": %.1f, "
		 "\"codegen_ms\": %.1f, \"link_ms\": %.1f, \"cache\": \"%s\", "
		 "\"units\": %u, \"units_hit\": %u, \"units_corrupt\": %u, "
		 "\"jit_kernels\": %u, "
		 "\"parallel_kernels\": %u, \"fused_nodes\": %u, %s",
		 cg_program_build_ms(p) + s.opt_ms + s.jit_ms,
		 cg_program_cpu_ms(p), cg_program_build_ms(p), s.opt_ms,
		 s.codegen_ms, s.jit_ms - s.codegen_ms, cache[s.cache],
		 s.n_units, s.n_units_hit, s.n_units_corrupt,
		 cg_program_n_kernels(p), cg_program_n_parallel(p),
		 cg_program_n_fused(p), calls);
	pass_stats_print(m, extra, stdout);
}

static double gib(uint64_t bytes)
{
	return (double)bytes / (1024.0 * 1024 * 1024);
}

/* Refuses, before the compile, a program that cannot run here: its
 * parameters, the copies of their size the run holds besides them (the
 * gradient and the optimizer's state in training) and the largest
 * scratch of an entry point, a lower bound of what it will hold, beyond
 * the machine's memory and swap. A `const D = 1000000` would otherwise
 * compile and end in "out of memory", or be killed mid-run. */
static bool fits_in_memory(ir_ctx *ctx, const cg_program *p,
			   const drv_options *o)
{
	struct sysinfo si;
	if (sysinfo(&si) != 0)
		return true; /* nothing to compare with: the allocations tell */
	uint64_t have = ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
	uint64_t params = cg_program_params_bytes(p), scratch = 0, need;
	for (uint32_t i = 0; i < cg_program_n_entries(p); i++) {
		size_t s = cg_program_scratch_bytes(p,
						    cg_program_entry_name(p, i));
		scratch = s > scratch ? s : scratch;
	}
	uint32_t copies = 1 + o->param_copies;
	if (!__builtin_mul_overflow(params, copies, &need) &&
	    !__builtin_add_overflow(need, scratch, &need) && need <= have)
		return true;
	char also[96] = "";
	if (o->param_copies)
		snprintf(also, sizeof also,
			 " and %u times that for their gradient%s",
			 o->param_copies,
			 o->param_copies > 1 ? " and the optimizer's state"
					     : "");
	ir_error(ctx, (ir_loc){0},
		 "the model needs at least %.1f GiB: parameters %.1f GiB%s, "
		 "scratch %.1f GiB; this machine has %.1f GiB of memory and "
		 "swap",
		 gib(params) * copies + gib(scratch), gib(params), also,
		 gib(scratch), gib(have));
	return false;
}

bool drv_jit_open(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		  const ir_func *f, bool is_training, drv_jit *j)
{
	return drv_jit_open_only(ctx, m, o, f, is_training, NULL, 0, j);
}

bool drv_jit_open_only(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		       const ir_func *f, bool is_training,
		       const char *const *only, uint32_t n_only, drv_jit *j)
{
	memset(j, 0, sizeof *j);
	j->syms = ir_alloc(ctx, (m->n_syms + 1) * sizeof *j->syms);
	if (!j->syms ||
	    !drv_bind_syms(ctx, m, f, o, false, is_training, j->syms))
		return false;
	cg_program_options po = drv_program_options(o);
	po.only = only;
	po.n_only = n_only;
	j->p = cg_program_create(ctx, m, j->syms, &po);
	if (!j->p || !fits_in_memory(ctx, j->p, o) ||
	    (drv_env_is_on("ATTNC_MEMORY") &&
	     !drv_scratch_report(ctx, j->p, stderr)) ||
	    !cg_program_jit(j->p))
		return false;
	if (o->profile)
		drv_profile_clock_read(j->p, &j->prof_cycles, &j->prof_seconds);
	j->params = attnrt_alloc(NULL, cg_program_params_bytes(j->p));
	if (!j->params) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	return params_fill(ctx, j->p, o, j->params);
}

bool drv_jit_open_trained(ir_ctx *ctx, const ir_module *m, const drv_options *o,
			  const char *const *only, uint32_t n_only,
			  const drv_jit *trained, drv_jit *j)
{
	drv_options run_o = *o;
	if (trained)
		run_o.load = NULL; /* its weights, not a checkpoint's */
	if (!drv_jit_open_only(ctx, m, &run_o, NULL, false, only, n_only, j))
		return false;
	if (!trained)
		return true;
	size_t bytes = cg_program_params_bytes(j->p);
	if (bytes != cg_program_params_bytes(trained->p)) {
		ir_error(ctx, (ir_loc){0},
			 "the program of %s is laid out unlike "
			 "the trained one's parameters",
			 only[0]);
		return false;
	}
	memcpy(j->params, trained->params, bytes);
	return true;
}

void drv_jit_close(ir_ctx *ctx, drv_jit *j)
{
	attnrt_free(NULL, j->params);
	cg_program_destroy(j->p);
	ir_free(ctx, j->syms);
	memset(j, 0, sizeof *j);
}

/* --profile of the one call, to stderr and to --metrics FILE. */
static bool report_profile(ir_ctx *ctx, const drv_options *o, const drv_jit *j)
{
	FILE *metrics = o->metrics ? fopen(o->metrics, "w") : NULL;
	if (o->metrics && !metrics) {
		ir_error(ctx, (ir_loc){0}, "--metrics: cannot write '%s': %s",
			 o->metrics, strerror(errno));
		return false;
	}
	bool ok = drv_profile_report(ctx, j, "run", NULL, 0, metrics);
	if (metrics && fclose(metrics) != 0 && ok) {
		ir_error(ctx, (ir_loc){0}, "--metrics: cannot write '%s': %s",
			 o->metrics, strerror(errno));
		ok = false;
	}
	return ok;
}

bool drv_run_jit(ir_ctx *ctx, const ir_module *m, const drv_options *o)
{
	const ir_func *f = drv_entry(ctx, m, o, !o->inputs);
	if (!f)
		return false;
	/* As many as the function has: the interpreter takes any number. */
	interp_tensor *in = ir_alloc(ctx, ((size_t)f->n_inputs + f->n_outputs) *
						  sizeof *in);
	if (!in)
		return false;
	interp_tensor *outs = in + f->n_inputs;
	drv_jit j;
	memset(&j, 0, sizeof j);
	drv_options bound = *o;
	bool ok = false, is_owned = false;
	if (!entry_inputs(ctx, m, f, o, in, &is_owned) ||
	    (o->inputs && !drv_inputs_bind(ctx, m, f, in, o, &bound)) ||
	    !drv_jit_open(ctx, m, &bound, o->inputs ? NULL : f, false, &j))
		goto out;
	drv_exec e = {ctx, m, o, NULL, &j};
	if (!drv_exec_call(&e, f, in, outs))
		goto out;
	if (o->stats)
		drv_print_jit_stats(m, j.p);
	else if (!put_outputs(ctx, m, f, o, outs))
		goto out;
	ok = (!o->profile || report_profile(ctx, o, &j)) &&
	     (!o->save || drv_jit_save(ctx, m, o, &j)) &&
	     (!wants_pictures(o) || drv_pictures(&e, NULL, 0));
out:
	inputs_fini(ctx, f, in, is_owned);
	for (uint32_t i = 0; i < f->n_outputs; i++)
		interp_tensor_fini(ctx, &outs[i]);
	ir_free(ctx, in);
	drv_jit_close(ctx, &j);
	return ok;
}
