/*
 * main.c - the attnc command line: read a model (.g source or printed .ir),
 * run the pass pipeline, and do what the flags ask (dump the IR, print
 * statistics, run the default entry point under the reference interpreter).
 *
 * The flow is one flat function, top to bottom: options, front end,
 * pipeline, actions. Every user error goes through the diagnostics of
 * ir_ctx and ends in exit status 1.
 */
#include "frontend.h"
#include "interp.h"
#include "ir.h"
#include "passes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifndef ATTNC_VERSION
#define ATTNC_VERSION "0.0.0"
#endif

#define MAX_DISABLED 64

typedef struct options {
	const char *model;
	const char *dump;    /* NULL, "", "parse", "all" or a pass name */
	const char *disabled[MAX_DISABLED];
	uint32_t n_disabled;
	bool no_fuse;
	bool stats;
	bool interp;
	bool f64;
	bool verify_each;
	const char *entry;
	uint64_t seed;
} options;

static const char usage[] =
	"usage: attnc MODEL.g|MODEL.ir [options]\n"
	"\n"
	"Parses, checks and optimizes MODEL and says so in one line; options:\n"
	"  --dump-ir            print the optimized IR\n"
	"  --dump-ir=parse      print the IR right after parsing\n"
	"  --dump-ir=PASS       print the IR after pass PASS\n"
	"  --dump-ir=all        print the IR after every pass\n"
	"  --disable-pass=NAME  do not run pass NAME (repeatable)\n"
	"  --no-fuse            turn off every fusion pass\n"
	"  --list-passes        print the passes in pipeline order\n"
	"  --stats              print statistics of the optimized graph as JSON\n"
	"  --verify-each        run the IR verifier after every pass\n"
	"  --interp             run the default entry point on its example\n"
	"                       inputs with the reference interpreter\n"
	"  --entry NAME         the entry point --interp runs\n"
	"  --f64                interpret in float64\n"
	"  --seed N             seed of the parameters' initializers (0)\n"
	"  --help, --version\n";

static bool has_prefix(const char *s, const char *p, const char **rest)
{
	size_t n = strlen(p);
	if (strncmp(s, p, n) != 0)
		return false;
	*rest = s + n;
	return true;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (!*s || *end || errno || *s == '-')
		return false;
	*out = v;
	return true;
}

static bool check_pass_name(ir_ctx *ctx, const char *opt, const char *name)
{
	if (pass_find(name))
		return true;
	ir_error(ctx, (ir_loc){0}, "%s: unknown pass '%s' (see --list-passes)",
		 opt, name);
	return false;
}

/* Fills o from argv; returns 0 to go on, 1 on a usage error (reported),
 * 2 when the option was fully handled (--help, --version, --list-passes). */
static int parse_options(ir_ctx *ctx, int argc, char **argv, options *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(usage, stdout);
			return 2;
		} else if (strcmp(a, "--version") == 0) {
			printf("attnc %s\n", ATTNC_VERSION);
			return 2;
		} else if (strcmp(a, "--list-passes") == 0) {
			for (uint32_t p = 0; p < pass_count; p++)
				printf("%-10s %s\n", pass_table[p].name,
				       pass_table[p].summary);
			return 2;
		} else if (strcmp(a, "--dump-ir") == 0) {
			o->dump = "";
		} else if (has_prefix(a, "--dump-ir=", &v)) {
			if (strcmp(v, "parse") && strcmp(v, "all") &&
			    !check_pass_name(ctx, "--dump-ir", v))
				return 1;
			o->dump = v;
		} else if (has_prefix(a, "--disable-pass=", &v)) {
			if (!check_pass_name(ctx, "--disable-pass", v))
				return 1;
			if (o->n_disabled == MAX_DISABLED) {
				ir_error(ctx, (ir_loc){0}, "too many --disable-pass");
				return 1;
			}
			o->disabled[o->n_disabled++] = v;
		} else if (strcmp(a, "--no-fuse") == 0) {
			o->no_fuse = true;
		} else if (strcmp(a, "--stats") == 0) {
			o->stats = true;
		} else if (strcmp(a, "--verify-each") == 0) {
			o->verify_each = true;
		} else if (strcmp(a, "--interp") == 0) {
			o->interp = true;
		} else if (strcmp(a, "--f64") == 0) {
			o->f64 = true;
		} else if (strcmp(a, "--entry") == 0 || strcmp(a, "--seed") == 0) {
			if (i + 1 == argc) {
				ir_error(ctx, (ir_loc){0}, "%s needs a value", a);
				return 1;
			}
			v = argv[++i];
			if (strcmp(a, "--entry") == 0) {
				o->entry = v;
			} else if (!parse_u64(v, &o->seed)) {
				ir_error(ctx, (ir_loc){0},
					 "--seed: '%s' is not a non-negative integer", v);
				return 1;
			}
		} else if (a[0] == '-' && a[1]) {
			ir_error(ctx, (ir_loc){0}, "unknown option '%s' (see --help)", a);
			return 1;
		} else if (o->model) {
			ir_error(ctx, (ir_loc){0},
				 "more than one model given: '%s' and '%s'", o->model, a);
			return 1;
		} else {
			o->model = a;
		}
	}
	if (!o->model) {
		ir_error(ctx, (ir_loc){0}, "no model file given (see --help)");
		return 1;
	}
	return 0;
}

/* A file whose first word, after blank lines and comments (`#` or `//`),
 * is `module` is printed IR; anything else is .g. */
static bool is_ir_text(const ir_source *s)
{
	const char *p = s->text;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		if (*p != '#' && !(p[0] == '/' && p[1] == '/'))
			break;
		while (*p && *p != '\n')
			p++;
	}
	return strncmp(p, "module", 6) == 0 &&
	       (p[6] == ' ' || p[6] == '\t' || p[6] == '\n');
}

static ir_module *load_model(ir_ctx *ctx, const char *path)
{
	uint32_t file = ir_ctx_load_source(ctx, path);
	if (!file)
		return NULL;
	if (is_ir_text(&ctx->files[file]))
		return ir_module_read(ctx, file);
	return fe_compile(ctx, file);
}

static void print_summary(const char *path, const ir_module *m)
{
	uint32_t n_nodes = 0;
	int64_t n_weights = 0;
	for (uint32_t i = 0; i < m->n_funcs; i++)
		n_nodes += m->funcs[i]->g.n_nodes;
	for (uint32_t i = 0; i < m->n_params; i++) {
		int64_t n = ir_type_numel_static(&m->params[i].type);
		n_weights += n > 0 ? n : 0;
	}
	printf("%s: ok: model %s, %u functions, %u nodes, %u parameters "
	       "(%lld static weights)\n",
	       path, m->name, m->n_funcs, n_nodes, m->n_params,
	       (long long)n_weights);
}

/* Runs the entry point under the interpreter on its example inputs and
 * prints each output. */
static bool run_interp(ir_ctx *ctx, const ir_module *m, const options *o)
{
	const ir_func *f = o->entry ? ir_module_find_func(m, o->entry)
				    : ir_module_default_func(m);
	if (!f) {
		if (o->entry)
			ir_error(ctx, (ir_loc){0}, "--entry: no function '%s'", o->entry);
		else
			ir_error(ctx, (ir_loc){0}, "model %s exports no function", m->name);
		return false;
	}
	if (!f->example && f->n_inputs) {
		ir_error(ctx, f->loc, "'%s' has no example inputs to run on "
			 "(add an `example %s(...)` line)", f->name, f->name);
		return false;
	}
	bool ok = false;
	uint32_t n_in = f->n_inputs, n_out = f->n_outputs, n_par = m->n_params;
	interp_tensor *in = ir_alloc(ctx, (n_in + n_out + n_par + 1) * sizeof *in);
	int64_t *syms = ir_alloc(ctx, (m->n_syms + 1) * sizeof *syms);
	if (!in || !syms)
		goto out;
	interp_tensor *outs = in + n_in, *params = outs + n_out;
	for (uint32_t i = 0; i < n_in; i++) {
		const ir_const *c = &m->consts[f->example[i]];
		in[i].dtype = c->type.dtype;
		in[i].rank = c->type.rank;
		for (int d = 0; d < c->type.rank; d++)
			in[i].dims[d] = c->type.dims[d].coef;
		in[i].data = c->data; /* borrowed: not freed below */
	}
	interp_opts opts = {.is_f64 = o->f64, .seed = o->seed};
	if (!interp_bind_syms(ctx, m, f, in, syms) ||
	    !interp_params_init(ctx, m, syms, o->seed, o->f64, params) ||
	    !interp_run(ctx, m, f, &opts, params, in, outs))
		goto out;
	for (uint32_t i = 0; i < n_out; i++) {
		printf("%s: ", f->output_names[i]);
		interp_tensor_print(&outs[i], stdout);
		putchar('\n');
	}
	ok = true;
out:
	if (in) {
		for (uint32_t i = 0; i < n_out + n_par; i++)
			interp_tensor_fini(ctx, &in[n_in + i]);
	}
	ir_free(ctx, in);
	ir_free(ctx, syms);
	return ok;
}

int main(int argc, char **argv)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	options o = {0};
	int status = 1;
	ir_module *m = NULL;

	int r = parse_options(&ctx, argc, argv, &o);
	if (r) {
		status = r == 2 ? 0 : 1;
		goto out;
	}
	m = load_model(&ctx, o.model);
	if (!m || ctx.n_errors)
		goto out;
	if (o.dump && strcmp(o.dump, "all") == 0)
		printf("// ---- after parse ----\n");
	if (o.dump && (strcmp(o.dump, "parse") == 0 || strcmp(o.dump, "all") == 0))
		ir_module_print(m, stdout);

	pass_options po = {
		.disabled = o.disabled,
		.n_disabled = o.n_disabled,
		.no_fuse = o.no_fuse,
		.dump = o.dump && *o.dump ? o.dump : NULL,
		.dump_out = stdout,
		.verify_each = o.verify_each,
	};
	if (!pass_pipeline_run(m, &po) || ctx.n_errors)
		goto out;

	if (o.dump && !*o.dump)
		ir_module_print(m, stdout);
	if (o.stats)
		pass_stats_print(m, stdout);
	if (o.interp && !run_interp(&ctx, m, &o))
		goto out;
	if (!o.dump && !o.stats && !o.interp)
		print_summary(o.model, m);
	status = 0;
out:
	ir_module_destroy(m);
	ir_ctx_fini(&ctx);
	return status;
}
