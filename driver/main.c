/*
 * main.c - the attnc command line: read a model (.g source or printed .ir),
 * add the gradient function when training, run the pass pipeline, and do
 * what the flags ask: dump the IR, print statistics, run the default
 * entry point under the reference interpreter or the JIT, train, check
 * gradients, draw pictures, or write code ahead of time.
 *
 * The flow is one flat function, top to bottom: options, front end,
 * autodiff, pipeline, actions. Every user error goes through the
 * diagnostics of ir_ctx and ends in exit status 1.
 */
#include "driver.h"
#include "frontend.h"
#include "ir.h"
#include "passes.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: attnc MODEL.g|MODEL.ir [options]\n"
	"\n"
	"Parses, checks and optimizes MODEL and says so in one line; options:\n"
	"\n"
	"Seeing inside:\n"
	"  --dump-ir            print the optimized IR\n"
	"  --dump-ir=parse      print the IR right after parsing\n"
	"  --dump-ir=PASS       print the IR after pass PASS\n"
	"  --dump-ir=all        print the IR after parsing and every pass\n"
	"  --disable-pass=NAME  do not run pass NAME (repeatable)\n"
	"  --no-fuse            turn off every fusion pass\n"
	"  --explain-fusion     say, for every softmax, whether it fuses into\n"
	"                       fused_attention and, if not, what blocks it\n"
	"  --list-passes        print the passes in pipeline order\n"
	"  --stats              print statistics of the optimized graph as JSON\n"
	"                       (with --jit, of the compilation too; with\n"
	"                       --train, of the training program, first)\n"
	"  --verify-each        run the IR verifier after every pass\n"
	"\n"
	"Running (the default entry point: the first exported function with an\n"
	"example, on its example inputs):\n"
	"  --interp             with the reference interpreter\n"
	"  --jit                as native code, compiled through LLVM\n"
	"  --entry NAME         run function NAME instead\n"
	"  --f64                interpret in float64\n"
	"  --seed N             seed of the initializers and of dropout (0)\n"
	"  --threads N          threads of parallel loops (OMP_NUM_THREADS) and of\n"
	"                       the kernels' static schedule; with --train, at\n"
	"                       most N, as timing finds fastest\n"
	"  --load FILE          --jit: read the parameters from a safetensors file\n"
	"  --save FILE          --jit: write the parameters after the run\n"
	"\n"
	"Training (as the model's train block says; docs/training.md):\n"
	"  --train              train as native code (implies --jit), then save,\n"
	"                       report and draw as asked\n"
	"  --epochs N           train N epochs instead of the file's number\n"
	"  --lr X               learning rate X instead of the file's\n"
	"  --batch N            batch size (the value of the dimension B)\n"
	"  --shards N           split each batch into N shards of rows, each\n"
	"                       run on a thread of its own, their gradients\n"
	"                       added (instead of the file's `shards`, or 1)\n"
	"  --metrics FILE       write one JSON line per epoch (and per\n"
	"                       translation) to FILE\n"
	"  --gradcheck          check the compiled gradient against float64\n"
	"                       autodiff and finite differences; status 1 if\n"
	"                       it is off\n"
	"\n"
	"Translation (seq2seq models; docs/translation.md):\n"
	"  --data FILE          train on the English<TAB>French pairs of FILE\n"
	"                       instead of the built-in corpus\n"
	"  --examples N         use the pairs of the first N + 1 lines (0: all)\n"
	"  --translate TEXT     translate TEXT after --train or --load, with\n"
	"                       BLEU against the data's reference (repeatable)\n"
	"\n"
	"Pictures (SVG, or PNG when FILE ends in .png; with --interp, --jit\n"
	"or --train):\n"
	"  --plot FILE.svg      the loss per epoch; for regression models the\n"
	"                       prediction against the truth and the data\n"
	"  --heatmap FILE.svg   the entry's output `weights` as a heatmap; for\n"
	"                       seq2seq models the attention of the last\n"
	"                       translation\n"
	"\n"
	"Ahead of time:\n"
	"  -c [-o NAME.o]       write an object file and its header NAME.h (with a\n"
	"                       train block, also the gradient function)\n"
	"  --prefix P           name the symbols P_* (default: NAME of -o)\n"
	"  --load FILE          -c: take the dims the weights fix from FILE\n"
	"  --emit=KIND [-o F]   write ir (attnc IR), llvm, asm or obj\n"
	"  --batch N            the value of the dimension B\n"
	"  --sym NAME=N         the value of dimension NAME (repeatable)\n"
	"\n"
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
	if (!*s || *end || errno || *s == '-' || *s == '+' || *s == ' ')
		return false;
	*out = v;
	return true;
}

/* A positive count below 2^31 (threads, batch, dimension values). */
static bool parse_count(ir_ctx *ctx, const char *opt, const char *s,
			int64_t *out)
{
	uint64_t v;
	if (!parse_u64(s, &v) || v == 0 || v > INT32_MAX) {
		ir_error(ctx, (ir_loc){0}, "%s: '%s' is not a positive integer", opt, s);
		return false;
	}
	*out = (int64_t)v;
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

static bool add_sym(ir_ctx *ctx, drv_options *o, const char *opt,
		    const char *name, const char *value)
{
	int64_t v;
	if (!parse_count(ctx, opt, value, &v))
		return false;
	if (o->n_syms == DRV_MAX_LIST) {
		ir_error(ctx, (ir_loc){0}, "too many %s", opt);
		return false;
	}
	o->syms[o->n_syms++] = (drv_sym_value){opt, name, v};
	return true;
}

/* --sym NAME=N */
static bool parse_sym(ir_ctx *ctx, drv_options *o, char *arg)
{
	char *eq = strchr(arg, '=');
	if (!eq || eq == arg) {
		ir_error(ctx, (ir_loc){0}, "--sym: expected NAME=N, got '%s'", arg);
		return false;
	}
	*eq = '\0';
	return add_sym(ctx, o, "--sym", arg, eq + 1);
}

/* A positive, finite real number (--lr). */
static bool parse_positive(ir_ctx *ctx, const char *opt, const char *s,
			   double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno || !isfinite(v) || !(v > 0)) {
		ir_error(ctx, (ir_loc){0}, "%s: '%s' is not a positive number", opt, s);
		return false;
	}
	*out = v;
	return true;
}

/* Options whose value is a file name. */
static const char **file_option(drv_options *o, const char *a)
{
	return strcmp(a, "-o") == 0	       ? &o->output
	       : strcmp(a, "--load") == 0    ? &o->load
	       : strcmp(a, "--save") == 0    ? &o->save
	       : strcmp(a, "--entry") == 0   ? &o->entry
	       : strcmp(a, "--metrics") == 0 ? &o->metrics
	       : strcmp(a, "--plot") == 0    ? &o->plot
	       : strcmp(a, "--heatmap") == 0 ? &o->heatmap
	       : strcmp(a, "--data") == 0    ? &o->data
	       : strcmp(a, "--prefix") == 0  ? &o->prefix
					     : NULL;
}

/* --examples N: a count, or 0 for every line. */
static bool parse_examples(ir_ctx *ctx, const char *v, int64_t *out)
{
	uint64_t n;
	if (!parse_u64(v, &n) || n > INT32_MAX) {
		ir_error(ctx, (ir_loc){0}, "--examples: '%s' is not an integer "
			 ">= 0", v);
		return false;
	}
	*out = n ? (int64_t)n : -1;
	return true;
}

static bool add_sentence(ir_ctx *ctx, drv_options *o, const char *v)
{
	if (o->n_translate == DRV_MAX_LIST) {
		ir_error(ctx, (ir_loc){0}, "too many --translate (at most %d)",
			 DRV_MAX_LIST);
		return false;
	}
	o->translate[o->n_translate++] = v;
	return true;
}

/* Options that take the next argument as their value. */
static bool parse_valued(ir_ctx *ctx, drv_options *o, const char *a, char *v)
{
	int64_t n;
	const char **file = file_option(o, a);
	if (file)
		*file = v;
	else if (strcmp(a, "--examples") == 0)
		return parse_examples(ctx, v, &o->examples);
	else if (strcmp(a, "--translate") == 0)
		return add_sentence(ctx, o, v);
	else if (strcmp(a, "--epochs") == 0)
		return parse_count(ctx, a, v, &o->epochs);
	else if (strcmp(a, "--lr") == 0)
		return parse_positive(ctx, a, v, &o->lr);
	else if (strcmp(a, "--sym") == 0)
		return parse_sym(ctx, o, v);
	else if (strcmp(a, "--batch") == 0)
		return add_sym(ctx, o, a, "B", v);
	else if (strcmp(a, "--shards") == 0)
		return parse_count(ctx, a, v, &o->shards);
	else if (strcmp(a, "--threads") == 0) {
		if (!parse_count(ctx, a, v, &n))
			return false;
		o->threads = (int)n;
	} else if (!parse_u64(v, &o->seed)) {
		ir_error(ctx, (ir_loc){0},
			 "--seed: '%s' is not a non-negative integer", v);
		return false;
	}
	return true;
}

static bool is_valued(const char *a)
{
	static const char *const names[] = {
		"--entry", "-o",      "--load",   "--save",    "--sym",
		"--batch", "--shards", "--threads", "--seed", "--epochs", "--lr",
		"--metrics", "--plot", "--heatmap", "--data", "--examples",
		"--translate", "--prefix"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(a, names[i]) == 0)
			return true;
	return false;
}

/* Flags without a value; false if a is not one. */
static bool parse_flag(drv_options *o, const char *a)
{
	bool *flag = strcmp(a, "--no-fuse") == 0       ? &o->no_fuse
		     : strcmp(a, "--explain-fusion") == 0 ? &o->explain_fusion
		     : strcmp(a, "--stats") == 0       ? &o->stats
		     : strcmp(a, "--verify-each") == 0 ? &o->verify_each
		     : strcmp(a, "--interp") == 0      ? &o->interp
		     : strcmp(a, "--jit") == 0         ? &o->jit
		     : strcmp(a, "--f64") == 0         ? &o->f64
		     : strcmp(a, "--train") == 0       ? &o->train
		     : strcmp(a, "--gradcheck") == 0   ? &o->gradcheck
		     : strcmp(a, "-c") == 0            ? &o->compile_only
						       : NULL;
	if (flag)
		*flag = true;
	return flag != NULL;
}

/* Prints --help, --version or --list-passes; false if a is none of them. */
static bool print_info(const char *a)
{
	if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
		fputs(usage, stdout);
	} else if (strcmp(a, "--version") == 0) {
		printf("attnc %s\n", ATTNC_VERSION);
	} else if (strcmp(a, "--list-passes") == 0) {
		for (uint32_t p = 0; p < pass_count; p++)
			printf("%-10s %s\n", pass_table[p].name, pass_table[p].summary);
	} else {
		return false;
	}
	return true;
}

/* Options of translation that must go together. */
static const char *check_translation(const drv_options *o)
{
	if ((o->data || o->examples) && !o->train && !o->gradcheck &&
	    !o->n_translate)
		return "--data and --examples need --train, --gradcheck or "
		       "--translate";
	if (o->n_translate && (o->interp || o->compile_only || o->emit ||
			       o->gradcheck))
		return "--translate runs native code after --train or --load, "
		       "not with --interp, -c, --emit or --gradcheck";
	if (o->n_translate && !o->train && !o->load)
		return "--translate needs weights to translate with: --train or "
		       "--load FILE";
	if (o->n_translate && !o->train && o->save)
		return "--save with --translate writes trained weights: it needs "
		       "--train";
	return NULL;
}

/* Options of training that must go together. */
static const char *check_training(const drv_options *o)
{
	bool is_training = o->train || o->gradcheck;
	if (o->train && o->gradcheck)
		return "--train and --gradcheck: choose one";
	if (is_training && o->interp)
		return "--train and --gradcheck run native code, not --interp";
	if (is_training && (o->compile_only || o->emit))
		return "-c and --emit write code; they do not train";
	if (o->gradcheck && o->stats)
		return "--stats does not go with --gradcheck";
	if ((o->epochs || o->lr > 0 || o->shards ||
	     (o->metrics && !o->n_translate)) &&
	    !o->train)
		return "--epochs, --lr, --shards and --metrics need --train";
	if (o->gradcheck && (o->plot || o->heatmap || o->save))
		return "--gradcheck checks; it does not draw or save";
	if ((o->plot || o->heatmap) && !o->interp && !o->jit && !o->train)
		return "--plot and --heatmap need a run: --interp, --jit or --train";
	return NULL;
}

/* Options that must go together. */
static bool check_combination(ir_ctx *ctx, const drv_options *o)
{
	const char *bad = NULL;
	if (!o->model)
		bad = "no model file given (see --help)";
	else if ((bad = check_training(o)) != NULL)
		;
	else if ((bad = check_translation(o)) != NULL)
		;
	else if (o->interp && o->jit)
		bad = "--interp and --jit: choose one";
	else if ((o->compile_only || o->emit) && (o->interp || o->jit))
		bad = "-c and --emit write code; they do not run it with --interp or --jit";
	else if (o->output && !o->compile_only && !o->emit)
		bad = "-o needs -c or --emit";
	else if (o->prefix && !o->compile_only)
		bad = "--prefix needs -c";
	else if (o->save && o->compile_only)
		bad = "--save needs --jit or --train";
	else if ((o->load || o->save) && !o->jit && !o->train && !o->gradcheck &&
		 !o->n_translate && !o->compile_only)
		bad = "--load and --save need --jit or --train";
	if (bad)
		ir_error(ctx, (ir_loc){0}, "%s", bad);
	return bad == NULL;
}

/* Fills o from argv; returns 0 to go on, 1 on a usage error (reported),
 * 2 when the option was fully handled (--help, --version, --list-passes). */
static int parse_options(ir_ctx *ctx, int argc, char **argv, drv_options *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		if (print_info(a))
			return 2;
		if (parse_flag(o, a))
			continue;
		if (is_valued(a)) {
			if (i + 1 == argc) {
				ir_error(ctx, (ir_loc){0}, "%s needs a value", a);
				return 1;
			}
			if (!parse_valued(ctx, o, a, argv[++i]))
				return 1;
		} else if (strcmp(a, "--dump-ir") == 0) {
			o->dump = "";
		} else if (has_prefix(a, "--dump-ir=", &v)) {
			if (strcmp(v, "parse") && strcmp(v, "all") &&
			    !check_pass_name(ctx, "--dump-ir", v))
				return 1;
			o->dump = v;
		} else if (has_prefix(a, "--emit=", &v)) {
			o->emit = v;
		} else if (has_prefix(a, "--disable-pass=", &v)) {
			if (!check_pass_name(ctx, "--disable-pass", v))
				return 1;
			if (o->n_disabled == DRV_MAX_LIST) {
				ir_error(ctx, (ir_loc){0}, "too many --disable-pass");
				return 1;
			}
			o->disabled[o->n_disabled++] = v;
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
	if (!check_combination(ctx, o))
		return 1;
	o->jit |= o->train || o->gradcheck || o->n_translate;
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

int main(int argc, char **argv)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	drv_options o = {0};
	drv_train_config tc;
	/* errors (stderr) and results (stdout) interleave in order */
	setvbuf(stdout, NULL, _IOLBF, 0);
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
	if ((o.train || o.gradcheck || (o.compile_only && m->n_train)) &&
	    !drv_train_prepare(&ctx, m, &o, &tc))
		goto out;

	pass_options po = {
		.disabled = o.disabled,
		.n_disabled = o.n_disabled,
		/* --explain-fusion reports on the graph the fusion pass sees */
		.no_fuse = o.no_fuse || o.explain_fusion,
		.dump = o.dump && *o.dump ? o.dump : NULL,
		.dump_out = stdout,
		.verify_each = o.verify_each,
	};
	if (!pass_pipeline_run(m, &po) || ctx.n_errors)
		goto out;

	if (o.dump && !*o.dump)
		ir_module_print(m, stdout);
	if (o.explain_fusion) {
		pass_explain_fusion(m, stdout);
		status = 0;
		goto out;
	}
	if ((o.plot || o.heatmap) && !drv_pictures_check(&ctx, m, &o, o.train))
		goto out;
	if (o.n_translate && !drv_translate_check(&ctx, m, &o))
		goto out;
	if (o.compile_only || o.emit) {
		if (!drv_emit(&ctx, m, &o))
			goto out;
	} else if (o.train) {
		if (!drv_train(&ctx, m, &o, &tc))
			goto out;
	} else if (o.gradcheck) {
		if (!drv_gradcheck(&ctx, m, &o, &tc))
			goto out;
	} else if (o.n_translate) {
		if (!drv_translate_loaded(&ctx, m, &o))
			goto out;
	} else if (o.jit) {
		if (!drv_run_jit(&ctx, m, &o))
			goto out;
	} else {
		if (o.stats)
			pass_stats_print(m, NULL, stdout);
		if (o.interp && !drv_run_interp(&ctx, m, &o))
			goto out;
		if (!o.dump && !o.stats && !o.interp)
			print_summary(o.model, m);
	}
	status = 0;
out:
	ir_module_destroy(m);
	ir_ctx_fini(&ctx);
	return status;
}
